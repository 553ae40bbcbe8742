/* SPDX-License-Identifier: MIT */
#include "workers.h"

#include <stdbool.h>

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "../common/log.h"

#define WORKER_STACK (256u << 10) /* what a handler needs: the old per-connection stack */
#define WORKER_IDLE_MS 10000      /* a thread beyond min ends after this long idle */

static void deadline_in(struct timespec *ts, int64_t ms)
{
        clock_gettime(CLOCK_MONOTONIC, ts);
        ts->tv_sec += ms / 1000;
        ts->tv_nsec += (ms % 1000) * 1000000;
        if (ts->tv_nsec >= 1000000000) {
                ts->tv_sec++;
                ts->tv_nsec -= 1000000000;
        }
}

/* The next job, or NULL when this thread is to end. Called locked. */
static struct api_job *next_job(struct api_workers *w)
{
        for (;;) {
                struct api_job *j = w->head;
                if (j) {
                        w->head = j->next;
                        if (!w->head)
                                w->tail = NULL;
                        return j;
                }
                if (w->stop)
                        return NULL;
                struct timespec ts;
                deadline_in(&ts, WORKER_IDLE_MS);
                w->idle++;
                int r = pthread_cond_timedwait(&w->work, &w->lock, &ts);
                w->idle--;
                if (r == ETIMEDOUT && !w->head && w->threads > w->min)
                        return NULL;
        }
}

static void *worker_main(void *arg)
{
        struct api_workers *w = arg;
        pthread_mutex_lock(&w->lock);
        struct api_job *j;
        while ((j = next_job(w))) {
                pthread_mutex_unlock(&w->lock);
                j->run(j);
                pthread_mutex_lock(&w->lock);
        }
        w->threads--;
        bool last_idle = !w->stop && w->threads == w->min;
        pthread_cond_broadcast(&w->gone);
        pthread_mutex_unlock(&w->lock);
        /* Back to the few kept after a burst: what the burst's requests
         * freed goes back to the system. */
        if (last_idle)
                malloc_trim(0);
        return NULL;
}

/* One more thread; called locked. */
static int spawn(struct api_workers *w)
{
        pthread_attr_t at;
        pthread_t t;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, WORKER_STACK);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&t, &at, worker_main, w);
        pthread_attr_destroy(&at);
        if (r)
                return -r;
        w->threads++;
        w->spawned++;
        return 0;
}

int workers_start(struct api_workers *w, unsigned min, unsigned max)
{
        *w = (struct api_workers){.min = min, .max = max < min ? min : max};
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->work, &ca);
        pthread_cond_init(&w->gone, NULL);
        pthread_condattr_destroy(&ca);
        pthread_mutex_lock(&w->lock);
        int r = 0;
        for (unsigned i = 0; i < min && r == 0; i++)
                r = spawn(w);
        pthread_mutex_unlock(&w->lock);
        if (r < 0)
                workers_stop(w);
        return r;
}

void workers_submit(struct api_workers *w, struct api_job *job)
{
        job->next = NULL;
        pthread_mutex_lock(&w->lock);
        if (w->tail)
                w->tail->next = job;
        else
                w->head = job;
        w->tail = job;
        /* Each queued job that no idle thread will take gets a thread of
         * its own, up to max: a slow handler never holds up a quick one. */
        unsigned queued = 0;
        for (struct api_job *j = w->head; j && queued <= w->idle; j = j->next)
                queued++;
        if (queued > w->idle && w->threads < w->max) {
                int r = spawn(w);
                if (r < 0 && w->threads == 0)
                        log_error("no handler thread could start: %s", strerror(-r));
        }
        pthread_cond_signal(&w->work);
        pthread_mutex_unlock(&w->lock);
}

void workers_stop(struct api_workers *w)
{
        pthread_mutex_lock(&w->lock);
        w->stop = true;
        pthread_cond_broadcast(&w->work);
        while (w->threads > 0)
                pthread_cond_wait(&w->gone, &w->lock);
        pthread_mutex_unlock(&w->lock);
}
