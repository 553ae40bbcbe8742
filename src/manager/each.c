/* SPDX-License-Identifier: MIT */
/* Every sandbox of the host, by name (manager.h, mgr_each): what cluster
 * mode reconciles against the placement store. */
#include "manager-internal.h"

#include <stdio.h>
#include <string.h>

struct each_ctx {
        struct mgr_owned *v;
        size_t n, cap;
};

static void each_one(struct sandbox *sb, void *ctx)
{
        struct each_ctx *e = ctx;
        if (!sb->rec.deployment[0] || atomic_load(&sb->gone) || e->n == e->cap)
                return; /* a warm one has no name yet */
        struct mgr_owned *o = &e->v[e->n++];
        snprintf(o->deployment, sizeof(o->deployment), "%s", sb->rec.deployment);
        snprintf(o->account, sizeof(o->account), "%s", sb->rec.account);
        snprintf(o->name, sizeof(o->name), "%s", sb->rec.name);
}

int mgr_each(struct manager *m, struct mgr_owned **ret, size_t *ret_n)
{
        struct each_ctx e = {.cap = m->cfg.max_sandboxes + (size_t)MGR_MAX_POOL * RT_MAX_DRIVERS};
        e.v = calloc(e.cap, sizeof(*e.v));
        if (!e.v)
                return -ENOMEM;
        pthread_mutex_lock(&m->lock);
        table_each_locked(m, each_one, &e);
        pthread_mutex_unlock(&m->lock);
        *ret = e.v;
        *ret_n = e.n;
        return 0;
}

int64_t mgr_account_limit(struct manager *m, const char *account)
{
        struct store_account a = {0};
        return store_account_get(m->store, account, &a, NULL) > 0 ? a.limit : 0;
}

int64_t mgr_free_slots(struct manager *m)
{
        int64_t used = 0;
        pthread_mutex_lock(&m->lock);
        for (uint32_t i = 0; i < m->cfg.max_sandboxes && i < MGR_MAX_SLOTS; i++)
                used += (m->slots[i / 8] >> (i % 8)) & 1;
        /* A warm sandbox holds a slot an attach can take. */
        int64_t free_slots = (int64_t)m->cfg.max_sandboxes - used + (int64_t)pool_ready_locked(m);
        pthread_mutex_unlock(&m->lock);
        return free_slots > 0 ? free_slots : 0;
}
