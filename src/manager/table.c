/* SPDX-License-Identifier: MIT */
/* The sandbox table: one hash table by (deployment, name), one by id,
 * both chained through the sandboxes; and the bitmap of uid slots. All of
 * it is guarded by m->lock. */
#include "manager-internal.h"

#include <string.h>

static uint32_t hash_key(const char *dep, const char *name)
{
        uint32_t h = 2166136261u;
        for (const char *p = dep; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        h = (h ^ 0xff) * 16777619u;
        for (const char *p = name; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        return h % MGR_NBUCKETS;
}

struct sandbox *table_find_locked(struct manager *m, const char *dep, const char *name)
{
        for (struct sandbox *sb = m->buckets[hash_key(dep, name)]; sb; sb = sb->next)
                if (!strcmp(sb->rec.deployment, dep) && !strcmp(sb->rec.name, name))
                        return sb;
        return NULL;
}

void table_insert_locked(struct manager *m, struct sandbox *sb)
{
        uint32_t h = hash_key(sb->rec.deployment, sb->rec.name);
        sb->next = m->buckets[h];
        m->buckets[h] = sb;
        sb->id_next = m->id_buckets[sb->rec.id % MGR_NBUCKETS];
        m->id_buckets[sb->rec.id % MGR_NBUCKETS] = sb;
}

void table_remove_locked(struct manager *m, struct sandbox *sb)
{
        struct sandbox **pp = &m->buckets[hash_key(sb->rec.deployment, sb->rec.name)];
        while (*pp && *pp != sb)
                pp = &(*pp)->next;
        if (*pp)
                *pp = sb->next;
        pp = &m->id_buckets[sb->rec.id % MGR_NBUCKETS];
        while (*pp && *pp != sb)
                pp = &(*pp)->id_next;
        if (*pp)
                *pp = sb->id_next;
        slot_free_locked(m, sb->rec.slot);
}

void table_each_locked(struct manager *m, void (*fn)(struct sandbox *sb, void *ctx), void *ctx)
{
        for (size_t b = 0; b < MGR_NBUCKETS; b++)
                for (struct sandbox *sb = m->buckets[b], *next; sb; sb = next) {
                        next = sb->next;
                        fn(sb, ctx);
                }
}

struct sandbox *table_ref_id(struct manager *m, uint64_t id)
{
        struct sandbox *sb;
        pthread_mutex_lock(&m->lock);
        for (sb = m->id_buckets[id % MGR_NBUCKETS]; sb && sb->rec.id != id; sb = sb->id_next)
                ;
        if (sb)
                sandbox_ref(sb);
        pthread_mutex_unlock(&m->lock);
        return sb;
}

int table_ref(struct manager *m, const char *dep, const struct mgr_caller *c, const char *name,
              struct sandbox **ret, struct sbx_error *err)
{
        pthread_mutex_lock(&m->lock);
        struct sandbox *sb = table_find_locked(m, dep, name);
        if (sb && c && !owned_by(sb, c))
                sb = NULL;
        if (sb)
                sandbox_ref(sb);
        pthread_mutex_unlock(&m->lock);
        if (!sb)
                return sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", name), -ENOENT;
        *ret = sb;
        return 0;
}

/* A deployment belongs to the account its sandboxes were made for. A token
 * that names the deployment under another account (an issuer's mistake, or
 * a forged claim of a trusted issuer) reaches none of them. */
bool owned_by(const struct sandbox *sb, const struct mgr_caller *c)
{
        return !strcmp(sb->rec.account, c->account);
}

struct usage_ctx {
        const struct mgr_caller *c;
        struct usage *u;
};

static void count_usage(struct sandbox *sb, void *ctx)
{
        struct usage_ctx *uc = ctx;
        bool dep = !strcmp(sb->rec.deployment, uc->c->deployment);
        bool mine = owned_by(sb, uc->c);
        uc->u->deployment += dep;
        uc->u->account += mine;
        uc->u->foreign |= dep && !mine;
}

void table_usage_locked(struct manager *m, const struct mgr_caller *c, struct usage *ret)
{
        memset(ret, 0, sizeof(*ret));
        struct usage_ctx uc = {.c = c, .u = ret};
        table_each_locked(m, count_usage, &uc);
}

/* ---- uid slots ---- */

static uint32_t slot_count(const struct manager *m)
{
        uint32_t n = m->cfg.max_sandboxes;
        return n && n < MGR_MAX_SLOTS ? n : MGR_MAX_SLOTS;
}

static bool slot_taken(const struct manager *m, uint32_t slot)
{
        return m->slots[slot / 8] & (1u << (slot % 8));
}

static void slot_set(struct manager *m, uint32_t slot, bool taken)
{
        uint8_t bit = (uint8_t)(1u << (slot % 8));
        if (taken)
                m->slots[slot / 8] |= bit;
        else
                m->slots[slot / 8] &= (uint8_t)~bit;
}

int slot_alloc_locked(struct manager *m, uint32_t *ret)
{
        uint32_t n = slot_count(m);
        for (uint32_t i = 0; i < n; i++)
                if (!slot_taken(m, i)) {
                        slot_set(m, i, true);
                        *ret = i;
                        return 0;
                }
        return -EDQUOT;
}

void slot_free_locked(struct manager *m, uint32_t slot)
{
        if (slot < MGR_MAX_SLOTS)
                slot_set(m, slot, false);
}

void slot_free(struct manager *m, uint32_t slot)
{
        pthread_mutex_lock(&m->lock);
        slot_free_locked(m, slot);
        pthread_mutex_unlock(&m->lock);
}

int slot_claim_locked(struct manager *m, uint32_t slot)
{
        if (slot >= MGR_MAX_SLOTS)
                return -ERANGE;
        if (slot_taken(m, slot))
                return -EEXIST;
        slot_set(m, slot, true);
        return 0;
}
