/* SPDX-License-Identifier: MIT */
/* The warm pool: pool_size sandboxes of the default class started ahead of
 * time, with no owner (deployment "") and in no table, so that an attach of
 * a new name costs a rename instead of a start. One thread keeps it full,
 * one start at a time; the entries never outlive the daemon. */
#include "manager-internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../common/log.h"

/* A slot and a store row for a new entry. */
static int pool_insert(struct manager *m, const struct mgr_class *cls, struct store_sandbox *rec)
{
        memset(rec, 0, sizeof(*rec));
        pthread_mutex_lock(&m->lock);
        int r = slot_alloc_locked(m, &rec->slot);
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                return r;
        snprintf(rec->name, sizeof(rec->name), "pool-%u", rec->slot);
        snprintf(rec->sandbox_class, sizeof(rec->sandbox_class), "%s", cls->name);
        snprintf(rec->image, sizeof(rec->image), "%s", class_image(m, cls));
        snprintf(rec->driver, sizeof(rec->driver), "%s", class_driver(m, cls));
        rec->state = SBX_STOPPED;
        rec->created_at = rec->last_active_at = rec->state_since = now_ms();
        r = store_sandbox_insert(m->store, rec, NULL);
        if (r < 0)
                slot_free(m, rec->slot);
        return r;
}

/* Start an entry, in no table yet: nobody else can reach it, no lock. */
static int pool_boot(struct manager *m, struct sandbox *sb)
{
        char rootfs[PATH_MAX];
        struct rt_spec spec;
        if (sandbox_spec(m, sb, rootfs, &spec) < 0)
                return -ENOENT; /* no image (yet): nothing was made */
        spec.hostname = "sandbox";
        pid_t pid;
        int r = mkdir_p(sb->dir, 0700);
        if (r == 0)
                r = rt_start(m->rt, &spec, &pid, NULL);
        if (r < 0) {
                rt_destroy(m->rt, &spec, NULL);
                return r;
        }
        sb->init_pid = pid;
        sb->rec.state = SBX_RUNNING;
        store_sandbox_set_state(m->store, sb->rec.id, SBX_RUNNING, now_ms(), NULL);
        return 0;
}

/* Start one owner-less sandbox of the default class. */
static struct sandbox *pool_launch(struct manager *m)
{
        const struct mgr_class *cls = class_find(m, MGR_DEFAULT_CLASS);
        struct store_sandbox rec;
        struct sandbox *sb = NULL;
        if (!cls || pool_insert(m, cls, &rec) < 0)
                return NULL;
        if (sandbox_new(m, &rec, &sb) == 0 && pool_boot(m, sb) == 0)
                return sb;
        store_sandbox_delete(m->store, rec.id, NULL);
        slot_free(m, rec.slot);
        if (sb)
                sandbox_unref(sb);
        return NULL;
}

void pool_destroy(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        rt_destroy(m->rt, &spec, NULL);
        store_sandbox_delete(m->store, sb->rec.id, NULL);
        slot_free(m, sb->rec.slot);
        sandbox_unref(sb);
}

/* No image yet, or no room: wait before the next try, longer each time
 * (2 s to 64 s), or until woken. m->lock held. */
static void pool_backoff_locked(struct manager *m, int failures)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1 << failures;
        pthread_cond_timedwait(&m->pool_cond, &m->lock, &ts);
}

/* Keep the pool full: one start at a time, in the background. */
static void *pool_main(void *arg)
{
        struct manager *m = arg;
        int failures = 0;
        pthread_mutex_lock(&m->lock);
        while (!m->stopping) {
                if (m->pool_n >= (size_t)m->cfg.pool_size) {
                        pthread_cond_wait(&m->pool_cond, &m->lock);
                        continue;
                }
                pthread_mutex_unlock(&m->lock);
                struct sandbox *sb = pool_launch(m);
                pthread_mutex_lock(&m->lock);
                if (sb && !m->stopping) {
                        m->pool[m->pool_n++] = sb;
                        failures = 0;
                } else if (sb) {
                        pthread_mutex_unlock(&m->lock);
                        pool_destroy(m, sb);
                        pthread_mutex_lock(&m->lock);
                } else if (!m->stopping) {
                        failures = MIN(failures + 1, 6);
                        pool_backoff_locked(m, failures);
                }
        }
        pthread_mutex_unlock(&m->lock);
        return NULL;
}

void pool_start(struct manager *m)
{
        if (m->cfg.pool_size <= 0 || !class_find(m, MGR_DEFAULT_CLASS))
                return;
        if (pthread_create(&m->pool_thread, NULL, pool_main, m) == 0)
                m->pool_thread_started = true;
}

void pool_stop(struct manager *m)
{
        pthread_mutex_lock(&m->lock);
        m->stopping = true;
        pthread_cond_broadcast(&m->pool_cond);
        pthread_mutex_unlock(&m->lock);
        if (m->pool_thread_started)
                pthread_join(m->pool_thread, NULL);
        m->pool_thread_started = false;
        /* Pool entries belong to no one: they do not outlive the daemon. */
        pthread_mutex_lock(&m->lock);
        while (m->pool_n > 0) {
                struct sandbox *sb = m->pool[--m->pool_n];
                pthread_mutex_unlock(&m->lock);
                pool_destroy(m, sb);
                pthread_mutex_lock(&m->lock);
        }
        pthread_mutex_unlock(&m->lock);
}

struct sandbox *pool_take_locked(struct manager *m, const struct mgr_caller *c, const char *name,
                                 const char *cls, const char *network)
{
        if (m->pool_n == 0 || strcmp(cls, MGR_DEFAULT_CLASS) || strcmp(network, default_network(m)))
                return NULL;
        struct sandbox *sb = m->pool[m->pool_n - 1];
        int64_t now = now_ms();
        if (store_sandbox_assign(m->store, sb->rec.id, c->deployment, c->account, name, cls, now,
                                 NULL) < 0)
                return NULL; /* the store said no: keep the entry pooled, make a fresh one */
        m->pool_n--;
        snprintf(sb->rec.deployment, sizeof(sb->rec.deployment), "%s", c->deployment);
        snprintf(sb->rec.account, sizeof(sb->rec.account), "%s", c->account);
        snprintf(sb->rec.name, sizeof(sb->rec.name), "%s", name);
        sb->rec.created_at = sb->rec.last_active_at = sb->rec.state_since = now;
        atomic_store(&sb->last_active, now);
        sb->from_pool = true;
        pthread_cond_signal(&m->pool_cond);
        return sb;
}

void pool_rename_locked(struct manager *m, struct sandbox *sb)
{
        struct sbx_error err = {0};
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        if (rt_set_hostname(m->rt, &spec, sb->init_pid, sb->rec.name, &err) == 0)
                return;
        /* Costs the warm start, not the attach. */
        log_warn("sandbox name=%s: cannot rename a warm sandbox (%s); starting it cold",
                 sb->rec.name, err.msg);
        rt_stop(m->rt, &spec, NULL);
        sandbox_set_state(m, sb, SBX_STOPPED, "rename failed");
}
