/* SPDX-License-Identifier: MIT */
/* Cluster mode (cluster.h): routing by placement, and the watch that
 * freezes this host's sandboxes when its lease is in doubt and
 * reconciles them when it has one again. */
#include "cluster.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../common/log.h"

#define ROUTE_TRIES 8
#define ROUTE_MS 10000
#define WATCH_MS 200
#define SAMPLE_MAX 64 /* hosts read when choosing one */

struct cluster {
        struct cluster_config cfg;
        struct placement *p;
        struct manager *m;
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool stop;
        atomic_uint_fast64_t reconciled; /* the lease epoch reconciled under */
        bool frozen;
        atomic_uint_fast64_t forwarded, placed, rehomed, removed_stale;
};

bool cluster_serving(struct cluster *cl)
{
        return placement_serving(cl->p) &&
               atomic_load(&cl->reconciled) == atomic_load(&cl->p->epoch);
}

const char *cluster_host_id(const struct cluster *cl)
{
        return cl->cfg.store.host_id;
}

/* ---- the watch: freeze and reconcile ---- */

static void each_local(struct cluster *cl, void (*fn)(struct cluster *, const struct mgr_owned *))
{
        struct mgr_owned *v = NULL;
        size_t n = 0;
        if (mgr_each(cl->m, &v, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                fn(cl, &v[i]);
        free(v);
}

static void freeze_one(struct cluster *cl, const struct mgr_owned *o)
{
        struct mgr_caller c = {.deployment = o->deployment, .account = o->account};
        struct sbx_error err = {0};
        if (mgr_stop(cl->m, &c, o->name, &err) < 0 && err.code != ENOENT)
                log_warn("cluster: freeze %s/%s: %s", o->deployment, o->name, err.msg);
}

/* A local sandbox whose name this host no longer holds goes: another
 * host serves that name now (or nobody does, and a new attach places it
 * anew). Kept when the store cannot tell. */
static void reconcile_one(struct cluster *cl, const struct mgr_owned *o)
{
        struct placement_rec rec;
        struct sbx_error err = {0};
        int r = cl->p->ops->get(cl->p, o->deployment, o->name, &rec, &err);
        if (r < 0) {
                log_warn("cluster: reconcile %s/%s: %s; kept", o->deployment, o->name, err.msg);
                return;
        }
        if (r == 1 && !strcmp(rec.host, cluster_host_id(cl)))
                return;
        struct mgr_caller c = {.deployment = o->deployment, .account = o->account};
        log_info("cluster: %s/%s is %s%s; removing the local copy", o->deployment, o->name,
                 r == 1 ? "held by " : "placed nowhere", r == 1 ? rec.host : "");
        if (mgr_delete(cl->m, &c, o->name, &err) == 0)
                atomic_fetch_add(&cl->removed_stale, 1);
}

static void watch_round(struct cluster *cl)
{
        atomic_store(&cl->p->free_slots, mgr_free_slots(cl->m));
        uint64_t epoch = atomic_load(&cl->p->epoch);
        bool live = placement_serving(cl->p);
        if (!live && !cl->frozen && atomic_load(&cl->reconciled)) {
                log_warn("cluster: lease in doubt; data plane off, sandboxes suspended");
                each_local(cl, freeze_one);
                cl->frozen = true;
                /* Whatever lease comes next, reconcile under it first. */
                atomic_store(&cl->reconciled, 0);
        }
        if (live && atomic_load(&cl->reconciled) != epoch) {
                each_local(cl, reconcile_one);
                atomic_store(&cl->reconciled, epoch);
                cl->frozen = false;
                log_info("cluster: host %s serving (lease %llu)", cluster_host_id(cl),
                         (unsigned long long)epoch);
        }
}

static void *watch_thread(void *arg)
{
        struct cluster *cl = arg;
        pthread_mutex_lock(&cl->lock);
        while (!cl->stop) {
                pthread_mutex_unlock(&cl->lock);
                watch_round(cl);
                pthread_mutex_lock(&cl->lock);
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += WATCH_MS * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                if (!cl->stop)
                        pthread_cond_timedwait(&cl->wake, &cl->lock, &ts);
        }
        pthread_mutex_unlock(&cl->lock);
        return NULL;
}

int cluster_open(const struct cluster_config *cfg, struct manager *m, struct cluster **ret,
                 struct sbx_error *err)
{
        /* Before any thread: curl's global state is not made thread-safely
         * by every build. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return sbx_error_say(err, EIO, "libcurl");
        struct cluster *cl = calloc(1, sizeof(*cl));
        if (!cl)
                return sbx_error_set(err, ENOMEM, "cluster");
        cl->cfg = *cfg;
        cl->m = m;
        pthread_mutex_init(&cl->lock, NULL);
        pthread_cond_init(&cl->wake, NULL);
        int r = placement_etcd_open(&cfg->store, &cl->p, err);
        if (r == 0) {
                /* Known from the first registration on. */
                atomic_store(&cl->p->free_slots, mgr_free_slots(m));
                r = cl->p->ops->start(cl->p, err);
        }
        if (r == 0 && (r = -pthread_create(&cl->thread, NULL, watch_thread, cl)) < 0)
                sbx_error_set(err, -r, "cluster thread");
        cl->thread_started = r == 0;
        if (r < 0) {
                cluster_close(cl);
                return r;
        }
        *ret = cl;
        return 0;
}

void cluster_close(struct cluster *cl)
{
        if (!cl)
                return;
        if (cl->thread_started) {
                pthread_mutex_lock(&cl->lock);
                cl->stop = true;
                pthread_cond_signal(&cl->wake);
                pthread_mutex_unlock(&cl->lock);
                pthread_join(cl->thread, NULL);
        }
        if (cl->p)
                cl->p->ops->close(cl->p);
        pthread_mutex_destroy(&cl->lock);
        pthread_cond_destroy(&cl->wake);
        free(cl);
}

/* ---- routing ---- */

/* rec is another host's: forward when that host lives. 1 when it does,
 * 0 when its lease is gone. */
static int owner_live(struct cluster *cl, const struct placement_rec *rec,
                      struct cluster_route *ret, struct sbx_error *err)
{
        struct placement_host h;
        int r = cl->p->ops->host_get(cl->p, rec->host, &h, err);
        if (r == 1) {
                ret->where = CLUSTER_THERE;
                snprintf(ret->url, sizeof(ret->url), "%s", h.url);
        }
        return r;
}

int cluster_host_url(struct cluster *cl, const char *id, char *url, size_t size,
                     struct sbx_error *err)
{
        struct placement_host h;
        int r = cl->p->ops->host_get(cl->p, id, &h, err);
        if (r == 1)
                snprintf(url, size, "%s", h.url);
        return r;
}

static int no_store(struct sbx_error *err)
{
        return sbx_error_say(err, EAGAIN, "the cluster's placement store cannot be reached");
}

int cluster_route_lookup(struct cluster *cl, const char *dep, const char *name,
                         struct cluster_route *ret, struct sbx_error *err)
{
        memset(ret, 0, sizeof(*ret));
        int r = cl->p->ops->get(cl->p, dep, name, &ret->rec, err);
        if (r < 0)
                return r == -EAGAIN ? no_store(err) : r;
        if (r == 0) {
                ret->where = CLUSTER_NONE;
                return 0;
        }
        if (!strcmp(ret->rec.host, cluster_host_id(cl))) {
                ret->where = CLUSTER_HERE;
                return 0;
        }
        r = owner_live(cl, &ret->rec, ret, err);
        if (r == 0)
                ret->where = CLUSTER_NONE; /* its host is lost: nobody serves it */
        return r < 0 ? r : 0;
}

/* This host is full: the better (more free slots) of two live hosts
 * sampled at random, the power of two choices. 0 when none has room. */
static int pick_other(struct cluster *cl, struct placement_host *ret, struct sbx_error *err)
{
        struct placement_host *v = calloc(SAMPLE_MAX, sizeof(*v));
        size_t n = 0, k = 0;
        if (!v)
                return -ENOMEM;
        int r = cl->p->ops->hosts(cl->p, v, SAMPLE_MAX, &n, err);
        for (size_t i = 0; r == 0 && i < n; i++)
                if (v[i].free > 0 && strcmp(v[i].id, cluster_host_id(cl)))
                        v[k++] = v[i];
        r = r < 0 ? r : k > 0;
        if (r == 1) {
                uint32_t x = 0;
                if (getrandom(&x, sizeof(x), 0) != sizeof(x))
                        x = (uint32_t)mono_us();
                const struct placement_host *a = &v[x % k], *b = &v[(x / 7919) % k];
                *ret = a->free >= b->free ? *a : *b;
        }
        free(v);
        return r;
}

/* A name placed nowhere: here, or, when this host is full, on the host
 * pick_other chose (the attach then goes there). */
static int place_new(struct cluster *cl, const char *dep, const char *name,
                     const struct placement_caps *caps, struct cluster_route *ret,
                     struct sbx_error *err)
{
        struct placement_host other = {0};
        int r = mgr_free_slots(cl->m) > 0 ? 0 : pick_other(cl, &other, err);
        if (r < 0)
                return r;
        if (r == 1)
                snprintf(ret->rec.host, sizeof(ret->rec.host), "%s", other.id);
        r = cl->p->ops->create(cl->p, dep, name, caps, &ret->rec, err);
        if (r < 0)
                return r; /* -EEXIST: placed already, ret->rec is its record */
        atomic_fetch_add(&cl->placed, 1);
        ret->where = other.id[0] ? CLUSTER_THERE : CLUSTER_NEW;
        ret->placed = other.id[0] != 0;
        snprintf(ret->url, sizeof(ret->url), "%s", other.url);
        return 0;
}

/* One round of an attach's routing; -EAGAIN to go again (a race lost). */
static int route_once(struct cluster *cl, const char *dep, const struct placement_rec *want,
                      const char *name, const struct placement_caps *caps,
                      struct cluster_route *ret, struct sbx_error *err)
{
        /* Placing reads the record first, in the same round trip as the
         * counters: -EEXIST then hands back the record there is. */
        ret->rec = *want;
        int r = place_new(cl, dep, name, caps, ret, err);
        if (r != -EEXIST)
                return r;
        struct placement_rec cur = ret->rec;
        if (!strcmp(cur.host, cluster_host_id(cl))) {
                ret->where = CLUSTER_HERE;
                return 0;
        }
        r = owner_live(cl, &cur, ret, err);
        if (r != 0)
                return r < 0 ? r : 0;
        /* Its host's lease is gone, and its files with it: placed here
         * anew, and said so. */
        struct placement_rec next = cur;
        snprintf(next.host, sizeof(next.host), "%s", cluster_host_id(cl));
        snprintf(next.recreated, sizeof(next.recreated), "host_lost");
        r = cl->p->ops->rehome(cl->p, dep, name, &cur, &next, err);
        if (r == 0) {
                log_info("cluster: %s/%s: host %s lost; re-homed here (generation %llu)", dep, name,
                         cur.host, (unsigned long long)next.generation);
                ret->rec = next;
                ret->where = CLUSTER_REHOMED;
                atomic_fetch_add(&cl->rehomed, 1);
        }
        return r;
}

int cluster_route_attach(struct cluster *cl, const char *dep, const char *account, const char *name,
                         const char *sandbox_class, int64_t account_limit,
                         struct cluster_route *ret, struct sbx_error *err)
{
        struct placement_rec want = {0};
        snprintf(want.host, sizeof(want.host), "%s", cluster_host_id(cl));
        snprintf(want.account, sizeof(want.account), "%s", account);
        snprintf(want.sandbox_class, sizeof(want.sandbox_class), "%s",
                 sandbox_class ? sandbox_class : MGR_DEFAULT_CLASS);
        struct placement_caps caps = {.max_per_deployment = cl->cfg.max_per_deployment,
                                      .account_limit = account_limit};
        memset(ret, 0, sizeof(*ret));
        int r = -EAGAIN;
        /* Bounded in rounds and in time: a store that does not answer
         * makes each round last its calls' timeouts. */
        int64_t deadline = mono_ms() + ROUTE_MS;
        for (int i = 0; i < ROUTE_TRIES && r == -EAGAIN && mono_ms() < deadline; i++) {
                if (!cluster_serving(cl))
                        return sbx_error_say(err, EAGAIN, "this host has no cluster lease now");
                r = route_once(cl, dep, &want, name, &caps, ret, err);
        }
        return r;
}

void cluster_unplace(struct cluster *cl, const char *dep, const char *name,
                     const struct cluster_route *route)
{
        struct sbx_error err = {0};
        if (cl->p->ops->remove(cl->p, dep, name, &route->rec, &err) < 0)
                log_warn("cluster: unplace %s/%s: %s", dep, name, err.msg);
}

int cluster_list(struct cluster *cl, const char *dep, char (*names)[SBX_NAME_MAX + 1],
                 struct placement_rec *recs, size_t max, size_t *ret_n, struct sbx_error *err)
{
        return cl->p->ops->list(cl->p, dep, names, recs, max, ret_n, err);
}

void cluster_stats(struct cluster *cl, struct cluster_stats *ret)
{
        *ret = (struct cluster_stats){
            .store_calls = atomic_load(&cl->p->calls),
            .store_bytes = atomic_load(&cl->p->bytes),
            .forwarded = atomic_load(&cl->forwarded),
            .placed = atomic_load(&cl->placed),
            .rehomed = atomic_load(&cl->rehomed),
            .removed_stale = atomic_load(&cl->removed_stale),
        };
}

/* For forward.c. */
void cluster_count_forward(struct cluster *cl);
void cluster_count_forward(struct cluster *cl)
{
        atomic_fetch_add(&cl->forwarded, 1);
}
