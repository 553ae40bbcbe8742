/* SPDX-License-Identifier: MIT */
#include "manager.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "../agent/client.h"
#include "../common/log.h"
#include "timers.h"
#include "uploads.h"

#define NBUCKETS 1024u
/* Persist lastActiveAt at most this often per sandbox; memory has the truth. */
#define TOUCH_PERSIST_MS 1000
#define MGR_MAX_POOL 16

struct sandbox {
        struct store_sandbox rec;   /* guarded by lock (state, times) */
        char dir[4096];
        pthread_mutex_t lock;       /* serializes lifecycle transitions */
        atomic_int refs;
        atomic_bool gone;           /* deleted or reclaimed */
        atomic_bool dying;          /* being destroyed: its agent may vanish */
        atomic_llong last_active;   /* ms; read without the lock by timers */
        int64_t persisted_active;
        int64_t timer_at;           /* earliest deadline queued; guarded by lock */
        pid_t init_pid;             /* host pid of sandbox-init when we started it, else 0 */
        bool from_pool;             /* taken from the warm pool by this attach */
        struct sandbox *next;       /* hash chain by (deployment, name), guarded by m->lock */
        struct sandbox *id_next;    /* hash chain by id, guarded by m->lock */
        struct manager *m;
        struct agent_peer peer;     /* dials its agent through its driver */
};

struct manager {
        struct mgr_config cfg;
        struct store *store;
        struct rt *rt;
        pthread_mutex_t lock;       /* table, slots, counts */
        struct sandbox *buckets[NBUCKETS];
        struct sandbox *id_buckets[NBUCKETS];
        uint8_t slots[MGR_MAX_SLOTS / 8];
        char sandboxes_dir[4096];
        char images_dir[4096];
        struct timers *timers;
        struct mgr_stats stats;     /* guarded by lock */
        /* The warm pool: sandboxes of the default image started ahead of
         * time with no owner (deployment ""), so that an attach of a new
         * name costs a rename instead of a start. Guarded by lock. */
        struct sandbox *pool[MGR_MAX_POOL];
        size_t pool_n;
        bool pool_launching;
        bool stopping;
        pthread_cond_t pool_cond;
        pthread_t pool_thread;
        bool pool_thread_started;
        uint64_t run;               /* this run of the daemon, for upload notes */
};

static uint32_t hash_key(const char *dep, const char *name)
{
        uint32_t h = 2166136261u;
        for (const char *p = dep; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        h = (h ^ 0xff) * 16777619u;
        for (const char *p = name; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        return h % NBUCKETS;
}

static struct sandbox *find_locked(struct manager *m, const char *dep, const char *name)
{
        for (struct sandbox *sb = m->buckets[hash_key(dep, name)]; sb; sb = sb->next)
                if (!strcmp(sb->rec.deployment, dep) && !strcmp(sb->rec.name, name))
                        return sb;
        return NULL;
}

static void insert_locked(struct manager *m, struct sandbox *sb)
{
        uint32_t h = hash_key(sb->rec.deployment, sb->rec.name);
        sb->next = m->buckets[h];
        m->buckets[h] = sb;
        sb->id_next = m->id_buckets[sb->rec.id % NBUCKETS];
        m->id_buckets[sb->rec.id % NBUCKETS] = sb;
}

static void remove_locked(struct manager *m, struct sandbox *sb)
{
        struct sandbox **pp = &m->buckets[hash_key(sb->rec.deployment, sb->rec.name)];
        for (; *pp; pp = &(*pp)->next)
                if (*pp == sb) {
                        *pp = sb->next;
                        break;
                }
        for (pp = &m->id_buckets[sb->rec.id % NBUCKETS]; *pp; pp = &(*pp)->id_next)
                if (*pp == sb) {
                        *pp = sb->id_next;
                        break;
                }
        m->slots[sb->rec.slot / 8] &= (uint8_t)~(1u << (sb->rec.slot % 8));
}

static int alloc_slot_locked(struct manager *m, uint32_t *ret)
{
        uint32_t n = m->cfg.max_sandboxes ? MIN(m->cfg.max_sandboxes, MGR_MAX_SLOTS) : MGR_MAX_SLOTS;
        for (uint32_t i = 0; i < n; i++)
                if (!(m->slots[i / 8] & (1u << (i % 8)))) {
                        m->slots[i / 8] |= (uint8_t)(1u << (i % 8));
                        *ret = i;
                        return 0;
                }
        return -EDQUOT;
}

static void sandbox_ref(struct sandbox *sb)
{
        atomic_fetch_add(&sb->refs, 1);
}

static void sandbox_unref(struct sandbox *sb)
{
        if (atomic_fetch_sub(&sb->refs, 1) == 1) {
                pthread_mutex_destroy(&sb->lock);
                free(sb);
        }
}

static int sandbox_dial(void *ctx, int *ret_fd, struct sbx_error *err);

static struct sandbox *sandbox_new(struct manager *m, const struct store_sandbox *rec)
{
        struct sandbox *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return NULL;
        sb->rec = *rec;
        if ((unsigned)sb->rec.state >= SBX_NSTATES)
                sb->rec.state = SBX_STOPPED; /* a state this version does not know */
        pthread_mutex_init(&sb->lock, NULL);
        atomic_init(&sb->refs, 1); /* the table's reference */
        atomic_init(&sb->last_active, rec->last_active_at);
        sb->persisted_active = rec->last_active_at;
        sb->m = m;
        sb->peer = (struct agent_peer){.dial = sandbox_dial, .ctx = sb};
        return sb;
}

static const char *default_network(const struct manager *m)
{
        return m->cfg.limits.network == RT_NET_NAT ? "nat" : "none";
}

/* A record's network, "" (made before networks were per sandbox) meaning
 * the daemon's default. */
static const char *network_of(const struct manager *m, const struct sandbox *sb)
{
        return sb->rec.network[0] ? sb->rec.network : default_network(m);
}

static void set_dir(struct manager *m, struct sandbox *sb)
{
        snprintf(sb->dir, sizeof(sb->dir), "%s/%llu", m->sandboxes_dir,
                 (unsigned long long)sb->rec.id);
}

/* What the runtime is told about sb. rootfs: a PATH_MAX buffer for a
 * start, which needs the image (-ENOENT when it is not built), or NULL for
 * every other operation. */
static int sandbox_spec(struct manager *m, struct sandbox *sb, char *rootfs, struct rt_spec *spec)
{
        *spec = (struct rt_spec){
            .driver = NULL, /* the one driver there is: ns */
            .id = sb->rec.id,
            .dir = sb->dir,
            .rootfs = rootfs ? rootfs : "",
            .hostname = sb->rec.name,
            .uid_base = mgr_sandbox_uid(m, sb),
            .uid_count = MGR_UID_RANGE,
            .limits = m->cfg.limits,
        };
        spec->limits.network = strcmp(network_of(m, sb), "nat") ? RT_NET_NONE : RT_NET_NAT;
        if (rootfs && rt_image_rootfs(m->images_dir, sb->rec.image, rootfs, PATH_MAX) < 0) {
                rootfs[0] = '\0';
                return -ENOENT;
        }
        return 0;
}

static int sandbox_dial(void *ctx, int *ret_fd, struct sbx_error *err)
{
        struct sandbox *sb = ctx;
        struct rt_spec spec;
        sandbox_spec(sb->m, sb, NULL, &spec);
        return rt_dial(sb->m->rt, &spec, ret_fd, err);
}

/* rt_stop with sb's spec, errors ignored. */
static void stop_quietly(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        rt_stop(m->rt, &spec, NULL);
}

const char *sbx_state_name(enum sbx_state s)
{
        static const char *const names[SBX_NSTATES] = {"running", "suspended", "stopped"};
        return (unsigned)s < SBX_NSTATES ? names[s] : "unknown";
}

static void log_transition(struct sandbox *sb, const char *from, const char *to, const char *why)
{
        log_info("sandbox name=%s deployment=%s from=%s to=%s why=%s", sb->rec.name,
                 sb->rec.deployment, from, to, why);
}

/* Change state in memory and in the store; sb->lock held. */
static void set_state(struct manager *m, struct sandbox *sb, enum sbx_state to, const char *why)
{
        struct sbx_error err = { 0 };
        enum sbx_state from = sb->rec.state;
        int64_t now = now_ms();
        sb->rec.state = to;
        sb->rec.state_since = now;
        if (store_sandbox_set_state(m->store, sb->rec.id, to, now, &err) < 0)
                log_error("sandbox name=%s: %s", sb->rec.name, err.msg);
        pthread_mutex_lock(&m->lock);
        m->stats.transitions++;
        if (to == SBX_SUSPENDED)
                m->stats.suspended++;
        if (from == SBX_SUSPENDED && to == SBX_RUNNING)
                m->stats.resumed++;
        if (from == SBX_STOPPED && to == SBX_RUNNING)
                m->stats.started++;
        pthread_mutex_unlock(&m->lock);
        log_transition(sb, sbx_state_name(from), sbx_state_name(to), why);
}

/* The next time the timers must look at sb. */
static int64_t next_deadline(struct manager *m, struct sandbox *sb)
{
        int64_t d = sb->rec.created_at + m->cfg.max_age_ms;
        if (sb->rec.state == SBX_RUNNING)
                d = MIN(d, atomic_load(&sb->last_active) + m->cfg.idle_timeout_ms);
        else if (sb->rec.state == SBX_SUSPENDED)
                d = MIN(d, sb->rec.state_since + m->cfg.suspended_ttl_ms);
        return d;
}

/* Queue sb's next deadline unless an earlier one is queued already (that
 * one fires, finds nothing due, and queues the later one): at most a couple
 * of heap entries per sandbox, however busy it is. sb->lock held. */
static void schedule(struct manager *m, struct sandbox *sb)
{
        int64_t d = next_deadline(m, sb);
        if (sb->timer_at && sb->timer_at <= d)
                return;
        if (timers_add(m->timers, d, sb->rec.id) == 0)
                sb->timer_at = d;
}

static int sweep_root(void *ctx, int *ret_fd)
{
        struct sandbox *sb = ctx;
        return mgr_root(sb->m, sb, ret_fd, NULL);
}

/* sb's agent answers: remove what uploads of an earlier run left. */
static void sweep_uploads(struct manager *m, struct sandbox *sb)
{
        int n = uploads_sweep(sb->dir, m->run, mgr_sandbox_uid(m, sb), sweep_root, sb);
        if (n > 0)
                log_info("sandbox name=%s: removed %d unfinished upload(s) of an earlier run",
                         sb->rec.name, n);
        else if (n < 0)
                log_warn("sandbox name=%s: cannot sweep unfinished uploads: %s", sb->rec.name,
                         strerror(-n));
}

/* Bring sb to running; sb->lock held. */
static int ensure_running(struct manager *m, struct sandbox *sb, const char *why,
                          struct sbx_error *err)
{
        int r;
        if (sb->rec.state == SBX_RUNNING)
                return 0;
        char rootfs[PATH_MAX];
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        if (sb->rec.state == SBX_SUSPENDED) {
                r = rt_thaw(m->rt, &spec, err);
                if (r == 0) {
                        set_state(m, sb, SBX_RUNNING, why);
                        sweep_uploads(m, sb);
                        return 0;
                }
                /* Cannot thaw: treat it as gone and start it again. */
                log_warn("sandbox name=%s: thaw failed (%s), restarting", sb->rec.name, err->msg);
                rt_stop(m->rt, &spec, NULL);
                set_state(m, sb, SBX_STOPPED, "thaw failed");
        }
        if (sandbox_spec(m, sb, rootfs, &spec) < 0) {
                sbx_error_say(err, ENOENT, "image '%s' is not built (sandboxd image build %s)",
                              sb->rec.image, sb->rec.image);
                return -EHOSTDOWN;
        }
        pid_t pid;
        r = rt_start(m->rt, &spec, &pid, err);
        if (r == -ETIMEDOUT)
                rt_stop(m->rt, &spec, NULL);
        if (r < 0) {
                pthread_mutex_lock(&m->lock);
                m->stats.bring_up_failures++;
                pthread_mutex_unlock(&m->lock);
                return -EHOSTDOWN;
        }
        sb->init_pid = pid;
        set_state(m, sb, SBX_RUNNING, why);
        sweep_uploads(m, sb);
        return 0;
}

static void touch(struct manager *m, struct sandbox *sb)
{
        int64_t now = now_ms();
        atomic_store(&sb->last_active, now);
        sb->rec.last_active_at = now;
        if (now - sb->persisted_active >= TOUCH_PERSIST_MS) {
                sb->persisted_active = now;
                store_sandbox_touch(m->store, sb->rec.id, now, NULL);
        }
}

static void to_record(struct manager *m, struct sandbox *sb, struct mgr_record *r)
{
        memset(r, 0, sizeof(*r));
        snprintf(r->name, sizeof(r->name), "%s", sb->rec.name);
        snprintf(r->sandbox_class, sizeof(r->sandbox_class), "%s", sb->rec.sandbox_class);
        snprintf(r->network, sizeof(r->network), "%s", network_of(m, sb));
        r->state = sb->rec.state;
        r->created_at = sb->rec.created_at;
        r->last_active_at = atomic_load(&sb->last_active);
        /* "Absent when nothing runs": a suspended sandbox runs nothing. */
        if (sb->rec.state == SBX_RUNNING)
                r->ceiling_at = sb->rec.created_at + m->cfg.max_age_ms;
}

/* Remove sb for good; sb->lock held, a reference held by the caller. */
static int destroy_locked(struct manager *m, struct sandbox *sb, const char *why,
                          struct sbx_error *err)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        /* Calls in flight lose their agent from here on: they must answer
         * that the sandbox is gone, not that it failed. */
        atomic_store(&sb->dying, true);
        int r = rt_destroy(m->rt, &spec, err);
        if (r < 0) {
                atomic_store(&sb->dying, false);
                return r;
        }
        store_sandbox_delete(m->store, sb->rec.id, NULL);
        atomic_store(&sb->gone, true);
        pthread_mutex_lock(&m->lock);
        remove_locked(m, sb);
        m->stats.deleted++;
        pthread_mutex_unlock(&m->lock);
        log_transition(sb, sbx_state_name(sb->rec.state), "deleted", why);
        sandbox_unref(sb); /* the table's reference */
        return 0;
}

int mgr_check_account(struct manager *m, const char *account, struct sbx_error *err)
{
        struct store_account a;
        int r = store_account_get(m->store, account, &a, err);
        if (r < 0)
                return r;
        if (r == 0 ? !m->cfg.allow_unknown_accounts : !a.enabled)
                return sbx_error_say(err, EPERM, "account '%s' does not have sandboxes", account),
                       -EPERM;
        return 0;
}

/* A deployment belongs to the account its sandboxes were made for. A token
 * that names the deployment under another account (an issuer's mistake, or
 * a forged claim of a trusted issuer) reaches none of them. */
static bool owned_by(const struct sandbox *sb, const struct mgr_caller *c)
{
        return !strcmp(sb->rec.account, c->account);
}

static int foreign_deployment(const struct mgr_caller *c, struct sbx_error *err)
{
        return sbx_error_say(err, EACCES, "deployment '%s' belongs to another account",
                             c->deployment);
}

/* Sandboxes of the caller's deployment, of its account, and whether the
 * deployment holds another account's; m->lock held. */
struct usage {
        size_t deployment, account;
        bool foreign;
};

static void usage_locked(struct manager *m, const struct mgr_caller *c, struct usage *u)
{
        memset(u, 0, sizeof(*u));
        for (size_t i = 0; i < NBUCKETS; i++)
                for (struct sandbox *sb = m->buckets[i]; sb; sb = sb->next) {
                        bool dep = !strcmp(sb->rec.deployment, c->deployment);
                        bool mine = owned_by(sb, c);
                        u->deployment += dep;
                        u->account += mine;
                        u->foreign |= dep && !mine;
                }
}

/* Check caps and reserve a table entry for a new sandbox; m->lock held, so
 * two attaches can never both take the last place. */
static int create_entry_locked(struct manager *m, const struct mgr_caller *c, const char *name,
                               const char *cls, const char *network, int64_t account_limit,
                               struct sandbox **ret, struct sbx_error *err)
{
        struct usage u;
        usage_locked(m, c, &u);
        if (u.foreign)
                return foreign_deployment(c, err);
        if (m->cfg.max_per_deployment > 0 && u.deployment >= (size_t)m->cfg.max_per_deployment)
                return sbx_error_say(err, EDQUOT, "deployment has %lld sandboxes, the cap",
                                     (long long)m->cfg.max_per_deployment),
                       -EDQUOT;
        if (account_limit > 0 && u.account >= (size_t)account_limit)
                return sbx_error_say(err, EDQUOT, "account has %lld sandboxes, its limit",
                                     (long long)account_limit),
                       -EDQUOT;
        /* Pool entries run the default class and network. */
        if (m->pool_n > 0 && !strcmp(cls, "default") && !strcmp(network, default_network(m))) {
                struct sandbox *sb = m->pool[--m->pool_n];
                int64_t now = now_ms();
                if (store_sandbox_assign(m->store, sb->rec.id, c->deployment, c->account, name, cls,
                                         now, err) == 0) {
                        snprintf(sb->rec.deployment, sizeof(sb->rec.deployment), "%s", c->deployment);
                        snprintf(sb->rec.account, sizeof(sb->rec.account), "%s", c->account);
                        snprintf(sb->rec.name, sizeof(sb->rec.name), "%s", name);
                        snprintf(sb->rec.sandbox_class, sizeof(sb->rec.sandbox_class), "%s", cls);
                        sb->rec.created_at = sb->rec.last_active_at = sb->rec.state_since = now;
                        atomic_store(&sb->last_active, now);
                        sb->from_pool = true;
                        insert_locked(m, sb);
                        m->stats.created++;
                        pthread_cond_signal(&m->pool_cond);
                        *ret = sb;
                        return 0;
                }
                /* The store said no: keep the entry pooled, make a fresh one. */
                m->pool[m->pool_n++] = sb;
        }
        struct store_sandbox rec = { 0 };
        snprintf(rec.deployment, sizeof(rec.deployment), "%s", c->deployment);
        snprintf(rec.account, sizeof(rec.account), "%s", c->account);
        snprintf(rec.name, sizeof(rec.name), "%s", name);
        snprintf(rec.sandbox_class, sizeof(rec.sandbox_class), "%s", cls);
        snprintf(rec.image, sizeof(rec.image), "%s", m->cfg.default_image);
        snprintf(rec.network, sizeof(rec.network), "%s", network);
        rec.state = SBX_STOPPED;
        rec.created_at = rec.last_active_at = rec.state_since = now_ms();
        if (alloc_slot_locked(m, &rec.slot) < 0)
                return sbx_error_say(err, EDQUOT, "max_sandboxes reached on this daemon"), -EDQUOT;
        if (store_sandbox_insert(m->store, &rec, err) < 0) {
                m->slots[rec.slot / 8] &= (uint8_t)~(1u << (rec.slot % 8));
                return -EAGAIN;
        }
        struct sandbox *sb = sandbox_new(m, &rec);
        if (!sb) {
                store_sandbox_delete(m->store, rec.id, NULL);
                m->slots[rec.slot / 8] &= (uint8_t)~(1u << (rec.slot % 8));
                return sbx_error_set(err, ENOMEM, "attach"), -EAGAIN;
        }
        set_dir(m, sb);
        insert_locked(m, sb);
        m->stats.created++;
        *ret = sb;
        return 0;
}

int mgr_attach(struct manager *m, const struct mgr_caller *c, const char *name,
               const char *sandbox_class, const char *network, uint64_t *ret_id,
               struct mgr_record *ret, struct sbx_error *err)
{
        const char *cls = sandbox_class ? sandbox_class : "default";
        if (strcmp(cls, "default"))
                return sbx_error_say(err, ENOTSUP, "sandbox class '%s' is not offered", cls),
                       -ENOTSUP;
        if (network && strcmp(network, "none") && strcmp(network, "nat"))
                return sbx_error_say(err, EINVAL, "network: nat or none"), -EINVAL;
        /* nat needs the host side the daemon sets up only when it is the
         * default; none is always possible. */
        if (network && !strcmp(network, "nat") && m->cfg.limits.network != RT_NET_NAT)
                return sbx_error_say(err, EINVAL, "this server offers no nat network"), -EINVAL;
        const char *net = network ? network : default_network(m);
        struct store_account acct = { 0 };
        if (store_account_get(m->store, c->account, &acct, NULL) <= 0)
                acct.limit = 0;
        for (;;) {
                bool created = false;
                pthread_mutex_lock(&m->lock);
                struct sandbox *sb = find_locked(m, c->deployment, name);
                if (sb && !owned_by(sb, c)) {
                        pthread_mutex_unlock(&m->lock);
                        return foreign_deployment(c, err);
                }
                if (!sb) {
                        int r = create_entry_locked(m, c, name, cls, net, acct.limit, &sb, err);
                        if (r < 0) {
                                pthread_mutex_unlock(&m->lock);
                                return r;
                        }
                        created = true;
                }
                sandbox_ref(sb);
                pthread_mutex_unlock(&m->lock);

                pthread_mutex_lock(&sb->lock);
                if (atomic_load(&sb->gone)) {
                        /* Deleted while we waited: the next round creates a new one. */
                        pthread_mutex_unlock(&sb->lock);
                        sandbox_unref(sb);
                        continue;
                }
                int r = 0;
                if (!created && network && strcmp(network, network_of(m, sb))) {
                        r = sbx_error_say(err, EBUSY, "sandbox '%s' exists with network %s", name,
                                          network_of(m, sb));
                } else if (created && sb->from_pool) {
                        sb->from_pool = false;
                        log_transition(sb, "none", "running", "created (warm pool)");
                        struct rt_spec spec;
                        sandbox_spec(m, sb, NULL, &spec);
                        r = rt_set_hostname(m->rt, &spec, sb->init_pid, name, err);
                        if (r < 0)
                                r = -EHOSTDOWN;
                } else if (created) {
                        log_transition(sb, "none", "stopped", "created");
                        if (mkdir_p(sb->dir, 0700) < 0)
                                log_error("sandbox name=%s: cannot create its directory", name);
                }
                if (r == 0)
                        r = ensure_running(m, sb, created ? "attach (new)" : "attach", err);
                if (r < 0 && created) {
                        /* Never leave a half-made sandbox behind a failed attach. */
                        struct sbx_error derr = { 0 };
                        destroy_locked(m, sb, "bring-up failed", &derr);
                }
                if (r == 0) {
                        touch(m, sb);
                        schedule(m, sb);
                        *ret_id = sb->rec.id;
                        to_record(m, sb, ret);
                }
                pthread_mutex_unlock(&sb->lock);
                sandbox_unref(sb);
                return r;
        }
}

/* Find and reference sb of deployment dep (and of the caller's account,
 * when c is given); -ENOENT otherwise. */
static int lookup(struct manager *m, const char *dep, const struct mgr_caller *c, const char *name,
                  struct sandbox **ret, struct sbx_error *err)
{
        pthread_mutex_lock(&m->lock);
        struct sandbox *sb = find_locked(m, dep, name);
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

int mgr_get(struct manager *m, const struct mgr_caller *c, const char *name, struct mgr_record *ret,
            struct sbx_error *err)
{
        struct sandbox *sb;
        int r = lookup(m, c->deployment, c, name, &sb, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&sb->lock);
        to_record(m, sb, ret);
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
        return 0;
}

int mgr_list(struct manager *m, const struct mgr_caller *c, struct mgr_record **ret, size_t *ret_n,
             struct sbx_error *err)
{
        pthread_mutex_lock(&m->lock);
        struct usage u;
        usage_locked(m, c, &u);
        size_t n = u.deployment, i = 0;
        struct mgr_record *v = calloc(n ? n : 1, sizeof(*v));
        if (!v) {
                pthread_mutex_unlock(&m->lock);
                return sbx_error_set(err, ENOMEM, "list"), -EAGAIN;
        }
        /* Records are read under the table lock only: state fields are
         * plain words, and a list may show a transition a moment late. */
        for (size_t b = 0; b < NBUCKETS; b++)
                for (struct sandbox *sb = m->buckets[b]; sb && i < n; sb = sb->next)
                        if (!strcmp(sb->rec.deployment, c->deployment) && owned_by(sb, c))
                                to_record(m, sb, &v[i++]);
        pthread_mutex_unlock(&m->lock);
        *ret = v;
        *ret_n = i;
        return 0;
}

static int suspend_locked(struct manager *m, struct sandbox *sb, const char *why,
                          struct sbx_error *err)
{
        if (sb->rec.state != SBX_RUNNING)
                return 0;
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        int r = rt_freeze(m->rt, &spec, err);
        if (r < 0)
                return r;
        set_state(m, sb, SBX_SUSPENDED, why);
        return 0;
}

int mgr_stop(struct manager *m, const struct mgr_caller *c, const char *name, struct sbx_error *err)
{
        struct sandbox *sb;
        int r = lookup(m, c->deployment, c, name, &sb, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&sb->lock);
        if (atomic_load(&sb->gone))
                r = sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", name);
        else if ((r = suspend_locked(m, sb, "stop", err)) == 0)
                schedule(m, sb);
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
        return r;
}

int mgr_delete(struct manager *m, const struct mgr_caller *c, const char *name,
               struct sbx_error *err)
{
        struct sandbox *sb;
        int r = lookup(m, c->deployment, c, name, &sb, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&sb->lock);
        if (atomic_load(&sb->gone))
                r = sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", name);
        else
                r = destroy_locked(m, sb, "delete", err);
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
        return r;
}

int mgr_enter(struct manager *m, const char *deployment, const char *name, uint64_t id,
              struct sandbox **ret, struct sbx_error *err)
{
        struct sandbox *sb;
        int r = lookup(m, deployment, NULL, name, &sb, err);
        if (r < 0)
                return r;
        if (sb->rec.id != id) {
                /* A credential of an earlier incarnation of this name. */
                sandbox_unref(sb);
                return sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", name), -ENOENT;
        }
        pthread_mutex_lock(&sb->lock);
        if (atomic_load(&sb->gone)) {
                r = sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", name);
        } else if ((r = ensure_running(m, sb, "data-plane call", err)) == 0) {
                touch(m, sb);
                schedule(m, sb);
        }
        pthread_mutex_unlock(&sb->lock);
        if (r < 0) {
                sandbox_unref(sb);
                return r;
        }
        *ret = sb;
        return 0;
}

void mgr_leave(struct manager *m, struct sandbox *sb)
{
        (void)m;
        /* A long call (a 30 s poll, a long exec) counts as activity to its end. */
        atomic_store(&sb->last_active, now_ms());
        sandbox_unref(sb);
}

const char *mgr_sandbox_dir(const struct sandbox *sb)
{
        return sb->dir;
}

const struct agent_peer *mgr_agent(struct sandbox *sb)
{
        return &sb->peer;
}

int mgr_root(struct manager *m, struct sandbox *sb, int *ret_fd, struct sbx_error *err)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        if (rt_caps(m->rt, &spec) & RT_CAP_AGENT_ROOT)
                return agent_root(&sb->peer, ret_fd, err);
        return rt_root(m->rt, &spec, ret_fd, err);
}

uint32_t mgr_sandbox_uid(struct manager *m, const struct sandbox *sb)
{
        return m->cfg.uid_base + sb->rec.slot * MGR_UID_RANGE;
}

bool mgr_sandbox_gone(const struct sandbox *sb)
{
        return atomic_load(&sb->gone) || atomic_load(&sb->dying);
}

int mgr_upload_note(struct manager *m, struct sandbox *sb, const char *dir, const char *name)
{
        return uploads_note(sb->dir, m->run, dir, name);
}

void mgr_upload_done(struct manager *m, struct sandbox *sb, const char *name)
{
        (void)m;
        uploads_done(sb->dir, name);
}

int mgr_recover(struct manager *m, struct sandbox *sb, struct sbx_error *err)
{
        int r = 0;
        pthread_mutex_lock(&sb->lock);
        if (atomic_load(&sb->gone)) {
                r = sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", sb->rec.name);
        } else if (sb->rec.state == SBX_RUNNING &&
                   agent_ping(&sb->peer, 2000, NULL) < 0) {
                /* Its agent is gone (killed, crashed): clean up what is left
                 * and start it again on the same files. */
                stop_quietly(m, sb);
                set_state(m, sb, SBX_STOPPED, "agent gone");
                r = ensure_running(m, sb, "restart after agent loss", err);
        }
        pthread_mutex_unlock(&sb->lock);
        return r;
}

void mgr_stats(struct manager *m, struct mgr_stats *ret)
{
        pthread_mutex_lock(&m->lock);
        *ret = m->stats;
        memset(ret->sandboxes, 0, sizeof(ret->sandboxes));
        for (size_t b = 0; b < NBUCKETS; b++)
                for (struct sandbox *sb = m->buckets[b]; sb; sb = sb->next)
                        if ((unsigned)sb->rec.state < SBX_NSTATES)
                                ret->sandboxes[sb->rec.state]++;
        pthread_mutex_unlock(&m->lock);
}

/* ---- lifecycle timers ---- */

static struct sandbox *lookup_id(struct manager *m, uint64_t id)
{
        struct sandbox *found = NULL;
        pthread_mutex_lock(&m->lock);
        for (struct sandbox *sb = m->id_buckets[id % NBUCKETS]; sb; sb = sb->id_next)
                if (sb->rec.id == id) {
                        sandbox_ref(sb);
                        found = sb;
                        break;
                }
        pthread_mutex_unlock(&m->lock);
        return found;
}

/* A timer fired for sandbox id: do what is due, and schedule the next. */
static void on_timer(void *ctx, int64_t at, uint64_t id)
{
        struct manager *m = ctx;
        struct sandbox *sb = lookup_id(m, id);
        if (!sb)
                return;
        struct sbx_error err = { 0 };
        pthread_mutex_lock(&sb->lock);
        int64_t now = now_ms();
        const char *reclaim = NULL;
        if (now >= sb->rec.created_at + m->cfg.max_age_ms)
                reclaim = "max_age";
        else if (sb->rec.state == SBX_SUSPENDED &&
                 now >= sb->rec.state_since + m->cfg.suspended_ttl_ms)
                reclaim = "suspended_ttl";
        if (atomic_load(&sb->gone)) {
                /* deleted meanwhile: nothing is due */
        } else if (reclaim) {
                if (destroy_locked(m, sb, reclaim, &err) == 0) {
                        pthread_mutex_lock(&m->lock);
                        m->stats.reclaimed++;
                        pthread_mutex_unlock(&m->lock);
                } else {
                        log_error("sandbox name=%s: reclaim failed: %s", sb->rec.name, err.msg);
                }
        } else if (sb->rec.state == SBX_RUNNING &&
                   now >= atomic_load(&sb->last_active) + m->cfg.idle_timeout_ms &&
                   atomic_load(&sb->refs) <= 2 /* the table's and ours: no call in flight */) {
                if (suspend_locked(m, sb, "idle", &err) < 0)
                        log_error("sandbox name=%s: suspend failed: %s", sb->rec.name, err.msg);
        }
        if (at == sb->timer_at)
                sb->timer_at = 0;
        if (!atomic_load(&sb->gone)) {
                int64_t next = next_deadline(m, sb);
                if (next <= now) {
                        /* Busy with a call right now: look again shortly. */
                        if (!sb->timer_at && timers_add(m->timers, now + 1000, id) == 0)
                                sb->timer_at = now + 1000;
                } else {
                        schedule(m, sb);
                }
        }
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
}


/* ---- the warm pool ---- */

/* Start one owner-less sandbox of the default image. */
static struct sandbox *pool_launch(struct manager *m)
{
        struct store_sandbox rec = { 0 };
        pthread_mutex_lock(&m->lock);
        int r = alloc_slot_locked(m, &rec.slot);
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                return NULL;
        snprintf(rec.name, sizeof(rec.name), "pool-%u", rec.slot);
        snprintf(rec.sandbox_class, sizeof(rec.sandbox_class), "default");
        snprintf(rec.image, sizeof(rec.image), "%s", m->cfg.default_image);
        rec.state = SBX_STOPPED;
        rec.created_at = rec.last_active_at = rec.state_since = now_ms();
        struct sbx_error err = { 0 };
        struct sandbox *sb = NULL;
        if (store_sandbox_insert(m->store, &rec, &err) < 0 || !(sb = sandbox_new(m, &rec)))
                goto fail;
        set_dir(m, sb);
        char rootfs[PATH_MAX];
        struct rt_spec spec;
        bool have_image = sandbox_spec(m, sb, rootfs, &spec) == 0;
        spec.hostname = "sandbox";
        pid_t pid;
        if (!have_image || mkdir_p(sb->dir, 0700) < 0 ||
            (r = rt_start(m->rt, &spec, &pid, &err)) < 0) {
                if (have_image)
                        rt_destroy(m->rt, &spec, NULL);
                goto fail;
        }
        sb->init_pid = pid;
        sb->rec.state = SBX_RUNNING;
        store_sandbox_set_state(m->store, rec.id, SBX_RUNNING, now_ms(), NULL);
        return sb;
fail:
        if (rec.id)
                store_sandbox_delete(m->store, rec.id, NULL);
        pthread_mutex_lock(&m->lock);
        m->slots[rec.slot / 8] &= (uint8_t)~(1u << (rec.slot % 8));
        pthread_mutex_unlock(&m->lock);
        if (sb)
                sandbox_unref(sb);
        return NULL;
}

static void pool_destroy(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        rt_destroy(m->rt, &spec, NULL);
        store_sandbox_delete(m->store, sb->rec.id, NULL);
        pthread_mutex_lock(&m->lock);
        m->slots[sb->rec.slot / 8] &= (uint8_t)~(1u << (sb->rec.slot % 8));
        pthread_mutex_unlock(&m->lock);
        sandbox_unref(sb);
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
                m->pool_launching = true;
                pthread_mutex_unlock(&m->lock);
                struct sandbox *sb = pool_launch(m);
                pthread_mutex_lock(&m->lock);
                m->pool_launching = false;
                if (sb && !m->stopping) {
                        m->pool[m->pool_n++] = sb;
                        failures = 0;
                } else if (sb) {
                        pthread_mutex_unlock(&m->lock);
                        pool_destroy(m, sb);
                        pthread_mutex_lock(&m->lock);
                } else if (!m->stopping) {
                        /* No image yet, or no room: try again later, slowly. */
                        failures = MIN(failures + 1, 6);
                        struct timespec ts;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_sec += 1 << failures;
                        pthread_cond_timedwait(&m->pool_cond, &m->lock, &ts);
                }
        }
        pthread_mutex_unlock(&m->lock);
        return NULL;
}

/* ---- start-up ---- */

static void reconnect(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        bool alive = rt_is_alive(m->rt, &spec);
        if (alive && sb->rec.state == SBX_SUSPENDED)
                return; /* frozen: it cannot answer a ping, and need not */
        if (alive && sb->rec.state == SBX_RUNNING && agent_ping(&sb->peer, 2000, NULL) == 0) {
                sweep_uploads(m, sb);
                return;
        }
        if (alive)
                rt_stop(m->rt, &spec, NULL);
        if (sb->rec.state != SBX_STOPPED)
                set_state(m, sb, SBX_STOPPED, "agent gone at start-up");
}

int mgr_open(const struct mgr_config *cfg, struct store *st, struct rt *rt, struct manager **ret,
             struct sbx_error *err)
{
        struct manager *m = calloc(1, sizeof(*m));
        if (!m)
                return sbx_error_set(err, ENOMEM, "manager");
        m->cfg = *cfg;
        if (getrandom(&m->run, sizeof(m->run), 0) != sizeof(m->run))
                m->run = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
        m->store = st;
        m->rt = rt;
        pthread_mutex_init(&m->lock, NULL);
        snprintf(m->sandboxes_dir, sizeof(m->sandboxes_dir), "%s/sandboxes", cfg->state_dir);
        snprintf(m->images_dir, sizeof(m->images_dir), "%s", cfg->images_dir);
        m->cfg.images_dir = m->images_dir;
        int r = mkdir_p(m->sandboxes_dir, 0700);
        if (r < 0) {
                free(m);
                return sbx_error_set(err, -r, "create %s", m->sandboxes_dir);
        }
        chmod(m->sandboxes_dir, 0700);

        struct store_sandbox *recs = NULL;
        size_t n = 0;
        r = store_sandbox_list(st, &recs, &n, err);
        if (r < 0) {
                free(m);
                return r;
        }
        r = timers_open(on_timer, m, &m->timers);
        if (r < 0) {
                free(recs);
                free(m);
                return sbx_error_set(err, -r, "timers");
        }
        for (size_t i = 0; i < n; i++) {
                struct sandbox *sb = sandbox_new(m, &recs[i]);
                if (!sb)
                        continue;
                set_dir(m, sb);
                m->slots[sb->rec.slot / 8] |= (uint8_t)(1u << (sb->rec.slot % 8));
                if (!sb->rec.deployment[0]) {
                        /* A pool entry of an earlier run: nobody knows it. */
                        pool_destroy(m, sb);
                        continue;
                }
                insert_locked(m, sb);
                reconnect(m, sb);
                schedule(m, sb);
        }
        free(recs);
        pthread_cond_init(&m->pool_cond, NULL);
        if (m->cfg.pool_size > MGR_MAX_POOL)
                m->cfg.pool_size = MGR_MAX_POOL;
        if (m->cfg.pool_size > 0 &&
            pthread_create(&m->pool_thread, NULL, pool_main, m) == 0)
                m->pool_thread_started = true;
        *ret = m;
        return 0;
}

void mgr_stop_pool(struct manager *m)
{
        if (!m)
                return;
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

void mgr_close(struct manager *m)
{
        if (!m)
                return;
        mgr_stop_pool(m);
        timers_close(m->timers);
        for (size_t b = 0; b < NBUCKETS; b++) {
                struct sandbox *sb = m->buckets[b];
                while (sb) {
                        struct sandbox *next = sb->next;
                        /* Persist the newest activity so timers resume right. */
                        store_sandbox_touch(m->store, sb->rec.id, atomic_load(&sb->last_active),
                                            NULL);
                        sandbox_unref(sb);
                        sb = next;
                }
        }
        pthread_mutex_destroy(&m->lock);
        free(m);
}
