/* SPDX-License-Identifier: MIT */
/* Held requests: a long poll waiting for its process's output, an exec
 * waiting for its command, a stream waiting for the next bytes. Each is a
 * suspended connection plus a struct hold here, watched by one thread's
 * epoll: the agent connection it waits on, and the client's socket for
 * its hang-up. A hold costs its struct and its two descriptors, no thread.
 *
 * A hold is armed by whoever suspends the connection; when something
 * happens (the agent's bytes, the client's hang-up, or, from a sweep once
 * a second, the hold's tick asking for it: a deadline, a keepalive, the
 * shutdown) it is disarmed and its wake runs on the holder's thread,
 * which may arm it again or resume the connection. Only an armed hold is
 * the holder's; a disarmed one is its owner's to free. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define HOLD_CLIENT_GONE 0x80000000u /* wake's events: the client hung up */
#define HOLD_TICK 0x40000000u        /* ... the hold's tick asked for it */
#define HOLD_STOP 0x20000000u        /* ... the holder is stopping: end now */

struct hold;

struct hold_ops {
        /* Disarmed; events is the agent fd's epoll events, or one of the
         * HOLD_ flags above. */
        void (*wake)(struct hold *h, uint32_t events);
        /* From the sweep, armed, under the holder's lock (so: no arming,
         * no resuming here): true to be woken (with HOLD_TICK). */
        bool (*tick)(struct hold *h, int64_t now_ms);
};

struct hold_tag {
        struct hold *h;
        bool client;
};

struct hold {
        const struct hold_ops *ops;
        int fd;        /* waited on for its events */
        int client_fd; /* watched for the hang-up; -1: not */
        uint32_t events;
        bool armed;
        struct hold *prev, *next;
        struct hold_tag tag_fd, tag_client;
};

struct holder {
        int epfd;
        int evfd; /* written at the stop */
        pthread_t thread;
        pthread_mutex_t lock;
        struct hold *head; /* the armed */
        unsigned long long n_armed;
        bool running, stop;
};

int holder_start(struct holder *w);
/* Every armed hold is woken with HOLD_STOP, then the thread ends. */
void holder_stop(struct holder *w);
/* Watch fd for events (EPOLLIN, EPOLLOUT) and client_fd (>= 0) for its
 * hang-up; -errno (the hold is then not armed). Any thread. */
int hold_arm(struct holder *w, struct hold *h, int fd, uint32_t events, int client_fd);
/* How many holds are armed now. */
unsigned long long holder_count(struct holder *w);
