/* SPDX-License-Identifier: MIT */
#include "ratelimit.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

#define NBUCKETS 4096u
#define MILLI 1000 /* a bucket counts thousandths of a token */
#define SWEEP_INTERVAL_MS 1000

struct rl_entry {
        struct rl_entry *next;
        int64_t tokens;  /* thousandths of a token */
        int64_t last_ms; /* when tokens was last brought up to date */
        char key[];
};

struct ratelimit {
        pthread_mutex_t lock;
        int64_t rate;     /* tokens per second = thousandths per ms */
        int64_t capacity; /* burst in thousandths */
        size_t n;
        int64_t last_sweep_ms;
        struct rl_entry *buckets[NBUCKETS];
};

static uint32_t hash_key(const char *key)
{
        uint32_t h = 2166136261u;
        for (const char *p = key; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        return h % NBUCKETS;
}

int ratelimit_new(int64_t rate, int64_t burst, struct ratelimit **ret)
{
        if (rate <= 0 || rate > RATELIMIT_MAX_RATE || burst < 0 || burst > RATELIMIT_MAX_BURST)
                return -EINVAL;
        if (burst == 0)
                burst = 2 * rate;
        struct ratelimit *rl = calloc(1, sizeof(*rl));
        if (!rl)
                return -ENOMEM;
        pthread_mutex_init(&rl->lock, NULL);
        rl->rate = rate;
        rl->capacity = burst * MILLI;
        *ret = rl;
        return 0;
}

void ratelimit_free(struct ratelimit *rl)
{
        if (!rl)
                return;
        for (size_t b = 0; b < NBUCKETS; b++) {
                struct rl_entry *e = rl->buckets[b];
                while (e) {
                        struct rl_entry *next = e->next;
                        free(e);
                        e = next;
                }
        }
        pthread_mutex_destroy(&rl->lock);
        free(rl);
}

/* Bring e's tokens up to now; lock held. */
static void refill(struct ratelimit *rl, struct rl_entry *e, int64_t now)
{
        int64_t elapsed = now - e->last_ms;
        if (elapsed <= 0)
                return; /* a clock that went back refills nothing */
        e->last_ms = now;
        /* Long enough to fill any bucket: skip the product (and its overflow). */
        if (elapsed >= rl->capacity / rl->rate + 1) {
                e->tokens = rl->capacity;
                return;
        }
        e->tokens = MIN(rl->capacity, e->tokens + elapsed * rl->rate);
}

/* Drop every key whose bucket is full again; lock held. */
static void sweep(struct ratelimit *rl, int64_t now)
{
        rl->last_sweep_ms = now;
        for (size_t b = 0; b < NBUCKETS; b++) {
                struct rl_entry **pp = &rl->buckets[b];
                while (*pp) {
                        struct rl_entry *e = *pp;
                        refill(rl, e, now);
                        if (e->tokens >= rl->capacity) {
                                *pp = e->next;
                                free(e);
                                rl->n--;
                        } else {
                                pp = &e->next;
                        }
                }
        }
}

static struct rl_entry *lookup_or_add(struct ratelimit *rl, const char *key, int64_t now)
{
        uint32_t h = hash_key(key);
        for (struct rl_entry *e = rl->buckets[h]; e; e = e->next)
                if (!strcmp(e->key, key))
                        return e;
        if (rl->n >= RATELIMIT_MAX_KEYS && now - rl->last_sweep_ms >= SWEEP_INTERVAL_MS)
                sweep(rl, now);
        /* Still full of busy keys: serve this one untracked rather than
         * refuse a tenant for what others do. */
        if (rl->n >= RATELIMIT_MAX_KEYS)
                return NULL;
        size_t len = strlen(key);
        struct rl_entry *e = malloc(sizeof(*e) + len + 1);
        if (!e)
                return NULL;
        memcpy(e->key, key, len + 1);
        e->tokens = rl->capacity;
        e->last_ms = now;
        e->next = rl->buckets[h];
        rl->buckets[h] = e;
        rl->n++;
        return e;
}

int64_t ratelimit_take(struct ratelimit *rl, const char *key, int64_t now_ms)
{
        int64_t wait_s = 0;
        pthread_mutex_lock(&rl->lock);
        struct rl_entry *e = lookup_or_add(rl, key, now_ms);
        if (e) {
                refill(rl, e, now_ms);
                if (e->tokens >= MILLI) {
                        e->tokens -= MILLI;
                } else {
                        /* Time until one whole token is there, rounded up. */
                        int64_t wait_ms = (MILLI - e->tokens + rl->rate - 1) / rl->rate;
                        wait_s = MAX((int64_t)1, (wait_ms + 999) / 1000);
                }
        }
        pthread_mutex_unlock(&rl->lock);
        return wait_s;
}
