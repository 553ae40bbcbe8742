/* SPDX-License-Identifier: MIT */
#include "timers.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "../common/util.h"

struct entry {
        int64_t at;
        uint64_t id;
};

struct timers {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_t thread;
        struct entry *heap;
        size_t n, cap;
        bool stop;
        timers_fn fn;
        void *ctx;
};

static void swap(struct entry *a, struct entry *b)
{
        struct entry t = *a;
        *a = *b;
        *b = t;
}

static void sift_up(struct timers *t, size_t i)
{
        while (i > 0) {
                size_t p = (i - 1) / 2;
                if (t->heap[p].at <= t->heap[i].at)
                        break;
                swap(&t->heap[p], &t->heap[i]);
                i = p;
        }
}

static void sift_down(struct timers *t, size_t i)
{
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, s = i;
                if (l < t->n && t->heap[l].at < t->heap[s].at)
                        s = l;
                if (r < t->n && t->heap[r].at < t->heap[s].at)
                        s = r;
                if (s == i)
                        break;
                swap(&t->heap[s], &t->heap[i]);
                i = s;
        }
}

static void *timers_main(void *arg)
{
        struct timers *t = arg;
        pthread_mutex_lock(&t->lock);
        while (!t->stop) {
                if (t->n == 0) {
                        pthread_cond_wait(&t->cond, &t->lock);
                        continue;
                }
                int64_t now = now_ms();
                if (t->heap[0].at > now) {
                        /* Sleep on CLOCK_REALTIME until the earliest deadline. */
                        struct timespec ts = {.tv_sec = t->heap[0].at / 1000,
                                              .tv_nsec = (t->heap[0].at % 1000) * 1000000};
                        pthread_cond_timedwait(&t->cond, &t->lock, &ts);
                        continue;
                }
                struct entry e = t->heap[0];
                t->heap[0] = t->heap[--t->n];
                sift_down(t, 0);
                pthread_mutex_unlock(&t->lock);
                t->fn(t->ctx, e.at, e.id);
                pthread_mutex_lock(&t->lock);
        }
        pthread_mutex_unlock(&t->lock);
        return NULL;
}

int timers_open(timers_fn fn, void *ctx, struct timers **ret)
{
        struct timers *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        pthread_mutex_init(&t->lock, NULL);
        pthread_cond_init(&t->cond, NULL);
        t->fn = fn;
        t->ctx = ctx;
        int r = pthread_create(&t->thread, NULL, timers_main, t);
        if (r) {
                free(t);
                return -r;
        }
        *ret = t;
        return 0;
}

void timers_close(struct timers *t)
{
        if (!t)
                return;
        pthread_mutex_lock(&t->lock);
        t->stop = true;
        pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->thread, NULL);
        free(t->heap);
        free(t);
}

int timers_add(struct timers *t, int64_t deadline_ms, uint64_t id)
{
        pthread_mutex_lock(&t->lock);
        if (t->n == t->cap) {
                size_t ncap = t->cap ? t->cap * 2 : 64;
                struct entry *h = realloc(t->heap, ncap * sizeof(*h));
                if (!h) {
                        pthread_mutex_unlock(&t->lock);
                        return -ENOMEM;
                }
                t->heap = h;
                t->cap = ncap;
        }
        t->heap[t->n] = (struct entry){.at = deadline_ms, .id = id};
        sift_up(t, t->n++);
        if (t->heap[0].id == id && t->heap[0].at == deadline_ms)
                pthread_cond_signal(&t->cond);
        pthread_mutex_unlock(&t->lock);
        return 0;
}
