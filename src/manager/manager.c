/* SPDX-License-Identifier: MIT */
/* The manager's calls (manager.h). The parts they are made of, and the
 * order of the locks, are in manager-internal.h. */
#include "manager-internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "../common/log.h"
#include "../runtime/egress.h"
#include "uploads.h"

/* Room kept after <state>/sandboxes for a sandbox's directory ("/" and up
 * to 20 digits of id), so that naming one cannot fail once open. */
#define SANDBOX_DIR_ROOM 64

/* ---- open and close ---- */

static int check_class(const struct manager *m, size_t i, struct sbx_error *err)
{
        const struct mgr_class *c = &m->classes[i];
        if (!c->name || !name_is_valid(c->name))
                return sbx_error_say(err, EINVAL, "sandbox class %zu: not a valid name", i);
        for (size_t j = 0; j < i; j++)
                if (!strcmp(m->classes[j].name, c->name))
                        return sbx_error_say(err, EINVAL, "sandbox class '%s' twice", c->name);
        /* A driver the host cannot run (rt_unavailable) still makes a
         * class: an attach of it is told why it cannot be had here. */
        const char *driver = class_driver(m, c);
        if (!rt_driver(m->rt, driver) && !rt_unavailable(m->rt, driver))
                return sbx_error_say(err, EINVAL, "sandbox class '%s': no runtime driver '%s'",
                                     c->name, c->driver ? c->driver : "(default)");
        const char *image = class_image(m, c);
        if (!image || !image_name_is_valid(image))
                return sbx_error_say(err, EINVAL, "sandbox class '%s': not a valid image name",
                                     c->name);
        return 0;
}

/* cfg's classes, or the one default class: the first driver, the
 * default image. */
static int init_classes(struct manager *m, struct sbx_error *err)
{
        if (m->cfg.classes && m->cfg.n_classes > 0) {
                m->classes = m->cfg.classes;
                m->n_classes = m->cfg.n_classes;
        } else {
                m->default_class = (struct mgr_class){.name = MGR_DEFAULT_CLASS};
                m->classes = &m->default_class;
                m->n_classes = 1;
        }
        for (size_t i = 0; i < m->n_classes; i++) {
                int r = check_class(m, i, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int init_dirs(struct manager *m, const struct mgr_config *cfg, struct sbx_error *err)
{
        int r = path_join(m->sandboxes_dir, sizeof(m->sandboxes_dir) - SANDBOX_DIR_ROOM,
                          cfg->state_dir, "sandboxes");
        if (r < 0)
                return sbx_error_set(err, -r, "state dir %s", cfg->state_dir);
        r = path_join(m->images_dir, sizeof(m->images_dir), cfg->images_dir, "");
        if (r < 0)
                return sbx_error_set(err, -r, "images dir %s", cfg->images_dir);
        m->cfg.images_dir = m->images_dir;
        /* A snapshot, build or import cut short by a crash is never used:
         * what it left goes now. */
        rt_image_sweep(m->images_dir);
        r = mkdir_p(m->sandboxes_dir, 0700);
        if (r < 0)
                return sbx_error_set(err, -r, "create %s", m->sandboxes_dir);
        chmod(m->sandboxes_dir, 0700);
        return 0;
}

static void free_manager(struct manager *m)
{
        pool_free(m);
        pthread_mutex_destroy(&m->lock);
        free(m);
}

/* One record of the store, at start-up: into the table, reconnected. */
static void adopt(struct manager *m, const struct store_sandbox *rec)
{
        struct sandbox *sb;
        int r = sandbox_new(m, rec, &sb);
        if (r < 0) {
                log_error("sandbox id=%llu: %s; left alone", (unsigned long long)rec->id,
                          strerror(-r));
                return;
        }
        pthread_mutex_lock(&m->lock);
        r = slot_claim_locked(m, rec->slot);
        if (r == 0 && rec->deployment[0])
                table_insert_locked(m, sb);
        pthread_mutex_unlock(&m->lock);
        if (r < 0) {
                log_error("sandbox id=%llu: slot %u is out of range or taken; left alone",
                          (unsigned long long)rec->id, rec->slot);
                sandbox_unref(sb);
        } else if (!rec->deployment[0] && sandbox_driver_check(m, sb, NULL) < 0) {
                /* A pool entry of an earlier run whose driver is not here:
                 * only that driver can remove it, so its record and slot
                 * stay for a run that has it. */
                log_warn("sandbox id=%llu: warm sandbox of driver %s, which is not here; left "
                         "alone",
                         (unsigned long long)rec->id, rec->driver);
                sandbox_unref(sb);
        } else if (!rec->deployment[0]) {
                pool_destroy(m, sb); /* a pool entry of an earlier run: nobody knows it */
        } else {
                pthread_mutex_lock(&sb->lock);
                sandbox_reconnect_locked(m, sb);
                sandbox_schedule_locked(m, sb);
                pthread_mutex_unlock(&sb->lock);
        }
}

static int adopt_all(struct manager *m, struct sbx_error *err)
{
        struct store_sandbox *recs = NULL;
        size_t n = 0;
        int r = store_sandbox_list(m->store, &recs, &n, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                adopt(m, &recs[i]);
        free(recs);
        return 0;
}

int mgr_open(const struct mgr_config *cfg, struct store *st, struct rt *rt, struct manager **ret,
             struct sbx_error *err)
{
        struct manager *m = calloc(1, sizeof(*m));
        if (!m)
                return sbx_error_set(err, ENOMEM, "manager");
        m->cfg = *cfg;
        m->store = st;
        m->rt = rt;
        pthread_mutex_init(&m->lock, NULL);
        if (getrandom(&m->run, sizeof(m->run), 0) != sizeof(m->run))
                m->run = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
        int r = 0;
        if (cfg->max_sandboxes > MGR_MAX_SLOTS)
                r = sbx_error_say(err, EINVAL, "max_sandboxes must be at most %u", MGR_MAX_SLOTS);
        if (r == 0)
                r = init_classes(m, err);
        if (r == 0)
                r = pool_init(m, err);
        if (r == 0)
                r = init_dirs(m, cfg, err);
        if (r == 0 && (r = timers_open(sandbox_on_timer, m, &m->timers)) < 0)
                sbx_error_set(err, -r, "timers");
        if (r == 0 && (r = adopt_all(m, err)) < 0)
                timers_close(m->timers);
        if (r < 0) {
                free_manager(m);
                return r;
        }
        pool_start(m);
        *ret = m;
        return 0;
}

void mgr_stop_pool(struct manager *m)
{
        if (m)
                pool_stop(m);
}

static void forget(struct sandbox *sb, void *ctx)
{
        struct manager *m = ctx;
        /* Persist the newest activity so timers resume right. */
        store_sandbox_touch(m->store, sb->rec.id, atomic_load(&sb->last_active), NULL);
        sandbox_unref(sb);
}

void mgr_close(struct manager *m)
{
        if (!m)
                return;
        pool_stop(m);
        timers_close(m->timers);
        pthread_mutex_lock(&m->lock);
        table_each_locked(m, forget, m);
        pthread_mutex_unlock(&m->lock);
        free_manager(m);
}

/* ---- accounts and tenancy ---- */

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

static int foreign_deployment(const struct mgr_caller *c, struct sbx_error *err)
{
        return sbx_error_say(err, EACCES, "deployment '%s' belongs to another account",
                             c->deployment);
}

/* ---- attach ---- */

/* An attach's request, checked. */
struct attach {
        const struct mgr_caller *c;
        const char *name;
        const struct mgr_class *cls;
        bool class_named;    /* the caller named cls */
        const char *network; /* as named, or NULL */
        const char *net;     /* what a new sandbox gets */
        const char *image;   /* as named, or NULL */
        const char *img;     /* what a new sandbox gets */
        int64_t account_limit;
        /* A fork (mgr_fork): the sandbox it is made from, whose class,
         * driver, image and network it gets, and the copy of its
         * checkpoint it starts from (moved into its dir). */
        const struct sandbox *fork_of;
        const char *fork_dir;
        /* Its egress policy's text form (egress.c); NULL: none. */
        const char *egress;
};

/* A named image must be a complete one of the images dir. */
static int image_check(struct manager *m, const char *image, struct sbx_error *err)
{
        char p[PATH_MAX];
        if (!image_name_is_valid(image))
                return sbx_error_say(err, EINVAL, "image: not a valid image name"), -EINVAL;
        if (rt_image_rootfs(m->images_dir, image, p, sizeof(p)) < 0)
                return sbx_error_say(err, ENOPKG, "there is no image '%s' (sandboxd image list)",
                                     image),
                       -ENOPKG;
        return 0;
}

static int attach_check(struct manager *m, const char *cls, const char *network, struct attach *a,
                        struct sbx_error *err)
{
        a->class_named = cls != NULL;
        a->cls = class_find(m, cls ? cls : MGR_DEFAULT_CLASS);
        if (!a->cls)
                return sbx_error_say(err, ENOTSUP, "sandbox class '%s' is not offered",
                                     cls ? cls : MGR_DEFAULT_CLASS),
                       -ENOTSUP;
        if (network && strcmp(network, "none") && strcmp(network, "nat"))
                return sbx_error_say(err, EINVAL, "network: nat or none"), -EINVAL;
        /* nat needs the host side the daemon sets up only when it is the
         * default; none is always possible. */
        if (network && !strcmp(network, "nat") && m->cfg.limits.network != RT_NET_NAT)
                return sbx_error_say(err, EINVAL, "this server offers no nat network"), -EINVAL;
        a->network = network;
        a->net = network ? network : default_network(m);
        a->img = a->image ? a->image : class_image(m, a->cls);
        if (a->image) {
                int r = image_check(m, a->image, err);
                if (r < 0)
                        return r;
        }
        struct store_account acct = {0};
        a->account_limit =
            store_account_get(m->store, a->c->account, &acct, NULL) > 0 ? acct.limit : 0;
        return 0;
}

/* The caps a new sandbox of a must fit under. m->lock held: two attaches
 * can never both take the last place. */
static int check_caps_locked(struct manager *m, const struct attach *a, struct sbx_error *err)
{
        struct usage u;
        table_usage_locked(m, a->c, &u);
        if (u.foreign)
                return foreign_deployment(a->c, err);
        if (m->cfg.max_per_deployment > 0 && u.deployment >= (size_t)m->cfg.max_per_deployment)
                return sbx_error_say(err, EDQUOT, "deployment has %lld sandboxes, the cap",
                                     (long long)m->cfg.max_per_deployment),
                       -EDQUOT;
        if (a->account_limit > 0 && u.account >= (size_t)a->account_limit)
                return sbx_error_say(err, EDQUOT, "account has %lld sandboxes, its limit",
                                     (long long)a->account_limit),
                       -EDQUOT;
        return 0;
}

/* A new record, its slot and its sandbox, for a cold start. m->lock held. */
static int new_entry_locked(struct manager *m, const struct attach *a, struct sandbox **ret,
                            struct sbx_error *err)
{
        struct store_sandbox rec = {0};
        snprintf(rec.deployment, sizeof(rec.deployment), "%s", a->c->deployment);
        snprintf(rec.account, sizeof(rec.account), "%s", a->c->account);
        snprintf(rec.name, sizeof(rec.name), "%s", a->name);
        snprintf(rec.sandbox_class, sizeof(rec.sandbox_class), "%s", a->cls->name);
        snprintf(rec.image, sizeof(rec.image), "%s", a->img);
        snprintf(rec.driver, sizeof(rec.driver), "%s", class_driver(m, a->cls));
        if (a->fork_of) {
                snprintf(rec.image, sizeof(rec.image), "%s",
                         a->image ? a->image : a->fork_of->rec.image);
                snprintf(rec.driver, sizeof(rec.driver), "%s", a->fork_of->rec.driver);
        }
        snprintf(rec.network, sizeof(rec.network), "%s", a->net);
        rec.state = SBX_STOPPED;
        rec.created_at = rec.last_active_at = rec.state_since = now_ms();
        if (slot_alloc_locked(m, &rec.slot) < 0)
                return sbx_error_say(err, EDQUOT, "max_sandboxes reached on this daemon"), -EDQUOT;
        if (store_sandbox_insert(m->store, &rec, err) < 0) {
                slot_free_locked(m, rec.slot);
                return -EAGAIN;
        }
        int r = sandbox_new(m, &rec, ret);
        if (r < 0) {
                store_sandbox_delete(m->store, rec.id, NULL);
                slot_free_locked(m, rec.slot);
                sbx_error_set(err, -r, "sandbox %llu", (unsigned long long)rec.id);
                return r == -ENOMEM ? -EAGAIN : -EHOSTDOWN;
        }
        return 0;
}

/* Check caps and reserve a table entry for a new sandbox: a warm one when
 * one fits, else a new record. m->lock held. */
static int create_entry_locked(struct manager *m, const struct attach *a, struct sandbox **ret,
                               struct sbx_error *err)
{
        int r = class_unavailable(m, a->cls, err);
        if (r == 0)
                r = check_caps_locked(m, a, err);
        if (r < 0)
                return r;
        /* The pool's sandboxes are of the default image. */
        bool poolable = !a->fork_of && !strcmp(a->img, m->cfg.default_image);
        struct sandbox *sb = poolable ? pool_take_locked(m, a->c, a->name, a->cls, a->net) : NULL;
        if (!sb && (r = new_entry_locked(m, a, &sb, err)) < 0)
                return r;
        table_insert_locked(m, sb);
        m->stats.created++;
        *ret = sb;
        return 0;
}

/* a's sandbox, found or made, with a reference for the caller. */
static int attach_entry(struct manager *m, const struct attach *a, struct sandbox **ret,
                        bool *ret_created, struct sbx_error *err)
{
        int r = 0;
        bool created = false;
        pthread_mutex_lock(&m->lock);
        struct sandbox *sb = table_find_locked(m, a->c->deployment, a->name);
        if (sb && !owned_by(sb, a->c))
                r = foreign_deployment(a->c, err);
        else if (sb && a->fork_of) {
                sbx_error_say(err, EEXIST, "sandbox '%s' exists", a->name);
                r = -EEXIST;
        } else if (!sb && (r = create_entry_locked(m, a, &sb, err)) == 0)
                created = true;
        if (r == 0)
                sandbox_ref(sb);
        pthread_mutex_unlock(&m->lock);
        if (r < 0)
                return r;
        *ret = sb;
        *ret_created = created;
        return 0;
}

/* An existing sandbox: what the caller named must be what it has. */
static int attach_matches(struct manager *m, struct sandbox *sb, const struct attach *a,
                          struct sbx_error *err)
{
        if (a->network && strcmp(a->network, network_of(m, sb)))
                return sbx_error_say(err, EBUSY, "sandbox '%s' exists with network %s", a->name,
                                     network_of(m, sb));
        if (a->class_named && strcmp(a->cls->name, sb->rec.sandbox_class))
                return sbx_error_say(err, EBUSY, "sandbox '%s' exists with class %s", a->name,
                                     sb->rec.sandbox_class);
        if (a->image && strcmp(a->image, sb->rec.image))
                return sbx_error_say(err, EBUSY, "sandbox '%s' exists with image %s", a->name,
                                     sb->rec.image);
        int same = a->egress ? sandbox_egress_equal(m, sb, a->egress) : 1;
        if (same < 0)
                return sbx_error_say(err, EAGAIN, "the store failed"), -EAGAIN;
        if (!same)
                return sbx_error_say(err, EBUSY,
                                     "sandbox '%s' exists with another egress policy (PUT "
                                     "{endpoint}/network changes it)",
                                     a->name);
        return 0;
}

/* A new sandbox: name a warm one, or make the directory of a cold one
 * (with a fork's checkpoint in it). */
static int attach_prepare_new(struct sandbox *sb, const struct attach *a, struct sbx_error *err)
{
        if (sb->from_pool) {
                sb->from_pool = false;
                log_transition(sb, "none", "running", "created (warm pool)");
                pool_rename_locked(sb->m, sb);
                return 0;
        }
        log_transition(sb, "none", "stopped", "created");
        int r = mkdir_p(sb->dir, 0700);
        if (r < 0)
                return sbx_error_set(err, -r, "create the sandbox's directory"), -EHOSTDOWN;
        char ck[PATH_MAX];
        if (a->fork_dir && (path_printf(ck, sizeof(ck), "%s/" MGR_CHECKPOINT_DIR, sb->dir) < 0 ||
                            rename(a->fork_dir, ck) < 0))
                return sbx_error_set(err, errno ? errno : ENAMETOOLONG,
                                     "move the checkpoint into the fork"),
                       -EHOSTDOWN;
        return 0;
}

/* Bring a's sandbox up; sb->lock held. A new one that does not come up is
 * destroyed: a failed attach never leaves a half-made sandbox behind. */
static int attach_bring_up(struct manager *m, struct sandbox *sb, const struct attach *a,
                           bool created, struct sbx_error *err)
{
        int r = created ? attach_prepare_new(sb, a, err) : attach_matches(m, sb, a, err);
        /* Recorded before its first start, which applies it; a warm one
         * runs already and gets it now. */
        if (r == 0 && created && a->egress &&
            (r = sandbox_egress_store(m, sb, a->egress, err)) == 0)
                sandbox_egress_apply_locked(m, sb);
        if (r == 0)
                r = sandbox_ensure_running_locked(m, sb, created ? "attach (new)" : "attach", err);
        if (r < 0 && created) {
                struct sbx_error derr = {0};
                sandbox_destroy_locked(m, sb, "bring-up failed", &derr);
        }
        if (r == 0) {
                sandbox_touch_locked(m, sb);
                sandbox_schedule_locked(m, sb);
        }
        return r;
}

static int attach_run(struct manager *m, struct attach *a, uint64_t *ret_id, struct mgr_record *ret,
                      struct sbx_error *err);

int mgr_attach(struct manager *m, const struct mgr_caller *c, const char *name,
               const struct mgr_attach_opts *o, uint64_t *ret_id, struct mgr_record *ret,
               struct sbx_error *err)
{
        struct attach a = {.c = c, .name = name, .image = o ? o->image : NULL};
        int r = attach_check(m, o ? o->sandbox_class : NULL, o ? o->network : NULL, &a, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *egress = NULL;
        if (o && o->egress && egress_policy_active(o->egress)) {
                if (strcmp(a.net, "nat"))
                        return sbx_error_say(err, EINVAL, "egress: a policy needs network \"nat\""),
                               -EINVAL;
                if (sandbox_egress_text(o->egress, &egress, err) < 0)
                        return -EINVAL;
                a.egress = egress;
        }
        return attach_run(m, &a, ret_id, ret, err);
}

int manager_fork_attach(struct manager *m, const struct sandbox *from, const char *name,
                        const char *image, const char *dir, uint64_t *ret_id,
                        struct mgr_record *ret, struct sbx_error *err)
{
        struct mgr_caller c = {.deployment = from->rec.deployment, .account = from->rec.account};
        struct attach a = {.c = &c, .name = name, .fork_of = from, .fork_dir = dir, .image = image};
        /* A sandbox taken from a pool has no network of its own in its
         * record: the default's, which the fork gets too. */
        int r = attach_check(m, from->rec.sandbox_class,
                             from->rec.network[0] ? from->rec.network : NULL, &a, err);
        if (r < 0)
                return r;
        a.class_named = true;
        /* A fork keeps the policy of what it is made from. */
        _cleanup_free_ char *egress = NULL;
        if (sandbox_egress_copy(m, from, &egress) < 0)
                return sbx_error_say(err, EAGAIN, "the store failed"), -EAGAIN;
        a.egress = egress;
        return attach_run(m, &a, ret_id, ret, err);
}

static int attach_run(struct manager *m, struct attach *a, uint64_t *ret_id, struct mgr_record *ret,
                      struct sbx_error *err)
{
        int r;
        for (;;) {
                struct sandbox *sb;
                bool created;
                r = attach_entry(m, a, &sb, &created, err);
                if (r < 0)
                        return r;
                pthread_mutex_lock(&sb->lock);
                bool gone = atomic_load(&sb->gone);
                if (!gone && (r = attach_bring_up(m, sb, a, created, err)) == 0) {
                        *ret_id = sb->rec.id;
                        sandbox_to_record(m, sb, ret);
                }
                pthread_mutex_unlock(&sb->lock);
                sandbox_unref(sb);
                if (!gone)
                        return r;
                /* Deleted while we waited: the next round creates a new one. */
        }
}

/* ---- get, list, stop, delete ---- */

static int gone_error(const struct sandbox *sb, struct sbx_error *err)
{
        return sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", sb->rec.name), -ENOENT;
}

int mgr_get(struct manager *m, const struct mgr_caller *c, const char *name, struct mgr_record *ret,
            struct sbx_error *err)
{
        struct sandbox *sb;
        int r = table_ref(m, c->deployment, c, name, &sb, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&sb->lock);
        sandbox_to_record(m, sb, ret);
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
        return 0;
}

struct list_ctx {
        struct manager *m;
        const struct mgr_caller *c;
        struct mgr_record *v;
        size_t n, cap;
};

static void list_one(struct sandbox *sb, void *ctx)
{
        struct list_ctx *l = ctx;
        if (l->n < l->cap && !strcmp(sb->rec.deployment, l->c->deployment) && owned_by(sb, l->c))
                sandbox_to_record(l->m, sb, &l->v[l->n++]);
}

int mgr_list(struct manager *m, const struct mgr_caller *c, struct mgr_record **ret, size_t *ret_n,
             struct sbx_error *err)
{
        pthread_mutex_lock(&m->lock);
        struct usage u;
        table_usage_locked(m, c, &u);
        struct list_ctx l = {.m = m, .c = c, .cap = u.deployment};
        l.v = calloc(l.cap ? l.cap : 1, sizeof(*l.v));
        if (!l.v) {
                pthread_mutex_unlock(&m->lock);
                return sbx_error_set(err, ENOMEM, "list"), -EAGAIN;
        }
        /* Under the table lock only: rec.state is written under it too
         * (manager-internal.h), so a list never waits for a transition. */
        table_each_locked(m, list_one, &l);
        pthread_mutex_unlock(&m->lock);
        *ret = l.v;
        *ret_n = l.n;
        return 0;
}

int mgr_stop(struct manager *m, const struct mgr_caller *c, const char *name, struct sbx_error *err)
{
        struct sandbox *sb;
        int r = table_ref(m, c->deployment, c, name, &sb, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&sb->lock);
        if (atomic_load(&sb->gone))
                r = gone_error(sb, err);
        else if ((r = sandbox_suspend_locked(m, sb, "stop", err)) == 0)
                sandbox_schedule_locked(m, sb);
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
        return r;
}

int mgr_delete(struct manager *m, const struct mgr_caller *c, const char *name,
               struct sbx_error *err)
{
        struct sandbox *sb;
        int r = table_ref(m, c->deployment, c, name, &sb, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&sb->lock);
        if (atomic_load(&sb->gone))
                r = gone_error(sb, err);
        else
                r = sandbox_destroy_locked(m, sb, "delete", err);
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
        return r;
}

/* ---- data plane ---- */

int mgr_enter(struct manager *m, const char *deployment, const char *name, uint64_t id,
              struct sandbox **ret, struct sbx_error *err)
{
        struct sandbox *sb;
        int r = table_ref(m, deployment, NULL, name, &sb, err);
        if (r < 0)
                return r;
        if (sb->rec.id != id) {
                /* A credential of an earlier incarnation of this name. */
                sandbox_unref(sb);
                return sbx_error_say(err, ENOENT, "sandbox '%s' does not exist", name), -ENOENT;
        }
        pthread_mutex_lock(&sb->lock);
        if (atomic_load(&sb->gone)) {
                r = gone_error(sb, err);
        } else if ((r = sandbox_ensure_running_locked(m, sb, "data-plane call", err)) == 0) {
                sandbox_touch_locked(m, sb);
                sandbox_schedule_locked(m, sb);
                if (!sb->img_cfg_loaded) {
                        struct sbx_error cerr = {0};
                        if (rt_image_config(m->images_dir, sb->rec.image, &sb->img_cfg, &cerr) < 0)
                                log_warn("sandbox %s: %s", sb->rec.name, cerr.msg);
                        sb->img_cfg_loaded = true;
                }
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

struct store *mgr_store(struct manager *m)
{
        return m->store;
}

uint64_t mgr_sandbox_id(const struct sandbox *sb)
{
        return sb->rec.id;
}

const char *mgr_images_dir(const struct manager *m)
{
        return m->images_dir;
}

const char *mgr_sandbox_dir(const struct sandbox *sb)
{
        return sb->dir;
}

const char *mgr_sandbox_deployment(const struct sandbox *sb)
{
        return sb->rec.deployment;
}

const struct rt_image_config *mgr_image_config(struct sandbox *sb)
{
        return &sb->img_cfg;
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

uint32_t mgr_sandbox_root_uid(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        return rt_caps(m->rt, &spec) & RT_CAP_ID_SHIFT ? spec.uid_base : 0;
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
        pthread_mutex_lock(&sb->lock);
        int r = atomic_load(&sb->gone) ? gone_error(sb, err) : sandbox_recover_locked(m, sb, err);
        pthread_mutex_unlock(&sb->lock);
        return r;
}

/* ---- operations ---- */

static void count_state(struct sandbox *sb, void *ctx)
{
        struct mgr_stats *st = ctx;
        if ((unsigned)sb->rec.state < SBX_NSTATES)
                st->sandboxes[sb->rec.state]++;
}

void mgr_stats(struct manager *m, struct mgr_stats *ret)
{
        pthread_mutex_lock(&m->lock);
        *ret = m->stats;
        memset(ret->sandboxes, 0, sizeof(ret->sandboxes));
        table_each_locked(m, count_state, ret);
        ret->pool = pool_ready_locked(m);
        pthread_mutex_unlock(&m->lock);
}
