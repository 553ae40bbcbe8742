/* SPDX-License-Identifier: MIT */
/* The warm pools: for each driver that has one (mgr_config.pools), `size`
 * sandboxes started ahead of time from the default image, with no owner
 * (deployment "") and in no table, so that an attach of a new name costs a
 * rename instead of a start. Threads of each pool's own keep it full, as
 * many starts at once as the host has cores (up to MGR_POOL_THREADS), so
 * a burst that empties it is made good soon, and a driver whose starts
 * fail or are slow never holds up the other's pool; the entries never
 * outlive the daemon.
 *
 * An entry is of its driver, not of a class: an attach takes one from the
 * pool of the driver its class names (with two classes on one driver,
 * such as `default` and `ns`, both take from the same pool), and the
 * entry's record gets the class the attach named. */
#include "manager-internal.h"

#include "../agent/client.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"

static int pool_add(struct manager *m, const struct mgr_pool *want, struct sbx_error *err)
{
        const struct rt_driver *d = rt_driver(m->rt, want->driver);
        const char *name = want->driver ? want->driver : "(default)";
        if (want->size < 0 || want->size > MGR_MAX_POOL)
                return sbx_error_say(err, EINVAL, "warm pool of driver '%s': size must be 0-%d",
                                     name, MGR_MAX_POOL);
        if (want->size == 0)
                return 0;
        if (!d)
                return sbx_error_say(err, EINVAL, "warm pool of driver '%s': no such driver here",
                                     name);
        if (!(d->caps & RT_CAP_HOSTNAME))
                return sbx_error_say(err, EINVAL,
                                     "warm pool of driver '%s': it cannot rename a running "
                                     "sandbox, so a warm one could not take its name",
                                     d->name);
        for (size_t i = 0; i < m->n_pools; i++)
                if (!strcmp(m->pools[i].driver, d->name))
                        return sbx_error_say(err, EINVAL, "warm pool of driver '%s' twice",
                                             d->name);
        if (m->n_pools == ARRAY_SIZE(m->pools))
                return sbx_error_say(err, EINVAL, "more than %zu warm pools", ARRAY_SIZE(m->pools));
        struct pool *p = &m->pools[m->n_pools++];
        *p = (struct pool){.m = m, .driver = d->name, .size = (size_t)want->size};
        pthread_cond_init(&p->cond, NULL);
        return 0;
}

int pool_init(struct manager *m, struct sbx_error *err)
{
        for (size_t i = 0; m->cfg.pools && i < m->cfg.n_pools; i++) {
                int r = pool_add(m, &m->cfg.pools[i], err);
                if (r < 0)
                        return r;
        }
        return 0;
}

void pool_free(struct manager *m)
{
        for (size_t i = 0; i < m->n_pools; i++)
                pthread_cond_destroy(&m->pools[i].cond);
        m->n_pools = 0;
}

size_t pool_ready_locked(const struct manager *m)
{
        size_t n = 0;
        for (size_t i = 0; i < m->n_pools; i++)
                n += m->pools[i].n;
        return n;
}

/* A slot and a store row for a new entry of p. */
static int pool_insert(struct manager *m, const struct pool *p, struct store_sandbox *rec)
{
        memset(rec, 0, sizeof(*rec));
        pthread_mutex_lock(&m->lock);
        int r = slot_alloc_locked(m, &rec->slot);
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                return r;
        snprintf(rec->name, sizeof(rec->name), "pool-%u", rec->slot);
        /* No class until an attach takes it. */
        snprintf(rec->image, sizeof(rec->image), "%s", m->cfg.default_image);
        snprintf(rec->driver, sizeof(rec->driver), "%s", p->driver);
        rec->state = SBX_STOPPED;
        rec->created_at = rec->last_active_at = rec->state_since = now_ms();
        r = store_sandbox_insert(m->store, rec, NULL);
        if (r < 0)
                slot_free(m, rec->slot);
        return r;
}

/* The first command in a fresh sandbox pays for loading the shell's and
 * libc's pages (under gVisor through its gofer, into its own page cache):
 * a warm sandbox pays it before anyone waits. What it answers does not
 * matter. */
static void pool_warm(struct sandbox *sb)
{
        static const char *const argv[] = {"/bin/sh", "-c", "true", NULL};
        struct agent_cmd cmd = {.argv = argv, .argc = 3};
        struct agent_exec_result r = {0};
        if (agent_exec(&sb->peer, &cmd, 5000, &r, NULL) == 0)
                agent_exec_result_free(&r);
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
        sandbox_egress_apply_locked(m, sb);
        sb->rec.state = SBX_RUNNING;
        store_sandbox_set_state(m->store, sb->rec.id, SBX_RUNNING, now_ms(), NULL);
        pool_warm(sb);
        return 0;
}

/* Start one owner-less sandbox of p's driver. */
static struct sandbox *pool_launch(struct manager *m, const struct pool *p)
{
        struct store_sandbox rec;
        struct sandbox *sb = NULL;
        if (pool_insert(m, p, &rec) < 0)
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
        rt_egress_forget(m->rt, &spec);
        store_sandbox_delete(m->store, sb->rec.id, NULL);
        slot_free(m, sb->rec.slot);
        sandbox_unref(sb);
}

/* No image yet, no room, or the driver's starts fail: wait before the
 * next try, longer each time (2 s to 64 s), or until woken (an entry of p
 * was taken, or the daemon stops). m->lock held. */
static void pool_backoff_locked(struct pool *p, int failures)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1 << failures;
        pthread_cond_timedwait(&p->cond, &p->m->lock, &ts);
}

/* Keep pool p full, in the background: each of its threads makes one start
 * at a time while the pool and the starts under way fall short of it. */
static void *pool_main(void *arg)
{
        struct pool *p = arg;
        struct manager *m = p->m;
        int failures = 0;
        pthread_mutex_lock(&m->lock);
        while (!m->stopping) {
                if (p->n + p->starting >= p->size) {
                        pthread_cond_wait(&p->cond, &m->lock);
                        continue;
                }
                p->starting++;
                log_debug("pool %s: a warm start, %zu under way, %zu ready", p->driver, p->starting,
                          p->n);
                pthread_mutex_unlock(&m->lock);
                struct sandbox *sb = pool_launch(m, p);
                pthread_mutex_lock(&m->lock);
                p->starting--;
                if (sb && !m->stopping) {
                        p->ready[p->n++] = sb;
                        failures = 0;
                } else if (sb) {
                        pthread_mutex_unlock(&m->lock);
                        pool_destroy(m, sb);
                        pthread_mutex_lock(&m->lock);
                } else if (!m->stopping) {
                        failures = MIN(failures + 1, 6);
                        pool_backoff_locked(p, failures);
                }
        }
        pthread_mutex_unlock(&m->lock);
        return NULL;
}

void pool_start(struct manager *m)
{
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        size_t want = (size_t)MAX(1, MIN(cores, (long)MGR_POOL_THREADS));
        for (size_t i = 0; i < m->n_pools; i++) {
                struct pool *p = &m->pools[i];
                size_t n = MIN(want, p->size);
                while (p->n_threads < n &&
                       pthread_create(&p->threads[p->n_threads], NULL, pool_main, p) == 0)
                        p->n_threads++;
        }
}

void pool_stop(struct manager *m)
{
        pthread_mutex_lock(&m->lock);
        m->stopping = true;
        for (size_t i = 0; i < m->n_pools; i++)
                pthread_cond_broadcast(&m->pools[i].cond);
        pthread_mutex_unlock(&m->lock);
        for (size_t i = 0; i < m->n_pools; i++) {
                struct pool *p = &m->pools[i];
                while (p->n_threads > 0)
                        pthread_join(p->threads[--p->n_threads], NULL);
        }
        /* Pool entries belong to no one: they do not outlive the daemon. */
        pthread_mutex_lock(&m->lock);
        for (size_t i = 0; i < m->n_pools; i++) {
                struct pool *p = &m->pools[i];
                while (p->n > 0) {
                        struct sandbox *sb = p->ready[--p->n];
                        pthread_mutex_unlock(&m->lock);
                        pool_destroy(m, sb);
                        pthread_mutex_lock(&m->lock);
                }
        }
        pthread_mutex_unlock(&m->lock);
}

/* The pool an attach of cls with network may take from, or NULL. m->lock
 * held. */
static struct pool *pool_for_locked(struct manager *m, const struct mgr_class *cls,
                                    const char *network)
{
        if (strcmp(network, default_network(m)) ||
            strcmp(class_image(m, cls), m->cfg.default_image))
                return NULL;
        const char *driver = class_driver(m, cls);
        for (size_t i = 0; i < m->n_pools; i++)
                if (!strcmp(m->pools[i].driver, driver))
                        return m->pools[i].n > 0 ? &m->pools[i] : NULL;
        return NULL;
}

struct sandbox *pool_take_locked(struct manager *m, const struct mgr_caller *c, const char *name,
                                 const struct mgr_class *cls, const char *network)
{
        struct pool *p = pool_for_locked(m, cls, network);
        if (!p)
                return NULL;
        struct sandbox *sb = p->ready[p->n - 1];
        int64_t now = now_ms();
        if (store_sandbox_assign(m->store, sb->rec.id, c->deployment, c->account, name, cls->name,
                                 now, NULL) < 0)
                return NULL; /* the store said no: keep the entry pooled, make a fresh one */
        p->n--;
        snprintf(sb->rec.deployment, sizeof(sb->rec.deployment), "%s", c->deployment);
        snprintf(sb->rec.account, sizeof(sb->rec.account), "%s", c->account);
        snprintf(sb->rec.name, sizeof(sb->rec.name), "%s", name);
        snprintf(sb->rec.sandbox_class, sizeof(sb->rec.sandbox_class), "%s", cls->name);
        sb->cls = cls;
        sb->rec.created_at = sb->rec.last_active_at = sb->rec.state_since = now;
        atomic_store(&sb->last_active, now);
        sb->from_pool = true;
        pthread_cond_signal(&p->cond); /* one of its threads refills it */
        return sb;
}

void pool_rename_locked(struct manager *m, struct sandbox *sb)
{
        struct sbx_error err = {0};
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        if (rt_set_hostname(m->rt, &spec, sb->init_pid, sb->rec.name, &err) == 0)
                return;
        /* Only a rename that fails at run time gets here (a pool's driver
         * can rename, pool_init checks): it costs the warm start, not the
         * attach. */
        log_warn("sandbox name=%s: cannot rename a warm sandbox (%s); starting it cold",
                 sb->rec.name, err.msg);
        rt_stop(m->rt, &spec, NULL);
        sandbox_set_state(m, sb, SBX_STOPPED, "rename failed");
}
