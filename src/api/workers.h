/* SPDX-License-Identifier: MIT */
/* The API's handler threads: what may block (a route's handler, a stream
 * opening, a proxied body chunk, a WebSocket relay) runs here, while the
 * connection it serves is suspended in libmicrohttpd's event loop, which
 * never blocks. The pool grows by a thread when a job finds none idle, up
 * to its ceiling (then jobs queue), and a thread idle for a while ends, so
 * an idle daemon holds `min` of them. Jobs are embedded in their owner's
 * state: submitting never allocates and cannot fail. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

struct api_job {
        struct api_job *next;
        void (*run)(struct api_job *job);
};

struct api_workers {
        pthread_mutex_t lock;
        pthread_cond_t work; /* a job is queued, or stop */
        pthread_cond_t gone; /* a thread ended */
        struct api_job *head, *tail;
        unsigned threads, idle, min, max;
        unsigned long long spawned; /* threads started, ever */
        bool stop;
};

/* min threads kept, max at most; -errno. */
int workers_start(struct api_workers *w, unsigned min, unsigned max);
void workers_submit(struct api_workers *w, struct api_job *job);
/* Runs what is queued, then ends every thread. */
void workers_stop(struct api_workers *w);
