/* SPDX-License-Identifier: MIT */
/* The manager's own parts, shared by its files and by nothing else.
 *
 *   manager.c    the mgr_* calls: open and close, attach, get, list, stop,
 *                delete, enter/leave, the account and tenancy checks
 *   table.c      the tables by (deployment, name) and by id, the uid-slot
 *                bitmap, usage counts
 *   sandbox.c    one sandbox: references, its directory, its class, what
 *                the runtime is told about it (sandbox_spec)
 *   lifecycle.c  the state machine: bring up (thaw or start), suspend,
 *                destroy, the timer callback (idle, suspended_ttl, max_age),
 *                reconnection at start-up and after an agent is lost
 *   pool.c       the warm pools, one per driver: their threads, taking and
 *                renaming an entry
 *   timers.c     the deadline heap and its thread
 *   uploads.c    notes of uploads in progress
 *
 * ---- Locks, in the order they are taken ----
 *
 *   1. sb->lock     one sandbox's transitions (struct sandbox). Never two
 *                   sandbox locks at once.
 *   2. m->lock      the tables, the slots, the stats, the warm pool, and
 *                   every sandbox's rec.state (see below).
 *   3. the store's lock and the timers' lock, inside store_* and
 *                   timers_add: taken last, held for one short call, and
 *                   nothing is taken while they are held.
 *
 * A thread holding one of these may take one further down the list, never
 * one further up: m->lock is never held while waiting for a sandbox lock,
 * and the timers thread calls back (sandbox_on_timer) without its own lock.
 *
 * rec.state is written with both sb->lock and m->lock held (set_state), so
 * it may be read under either: a list or the stats read it under m->lock
 * alone and never wait for a sandbox. A record's deployment, account,
 * name, class, network and created_at do not change once it is in the
 * table. Everything else of a sandbox is guarded by sb->lock, except what
 * is atomic (refs, gone, dying, last_active).
 *
 * ---- Why a start may hold a sandbox lock for 30 s ----
 *
 * rt_start (up to 30 s before it gives up), a thaw, a stop and rt_destroy
 * run under sb->lock. That is the lock's job: one transition of a sandbox
 * at a time, and a caller that needs the sandbox running waits until it
 * runs. What can wait on it:
 *   - calls about that same sandbox: attach, get, stop, delete, enter and
 *     recover. Each runs on its own HTTP connection's thread (the server
 *     runs a thread per connection), so it holds up no one else, and each
 *     waits for the very transition whose outcome it needs. A delete
 *     during an attach's start waits for the start, then deletes.
 *   - nothing shared. mgr_list and mgr_stats take m->lock only; m->lock and
 *     the store's lock are never held across a runtime call; the pool
 *     starts its sandboxes before they are in the table, under no lock.
 *     The timers thread does not wait either: it only tries the lock, and
 *     when the sandbox is in a transition it looks again a second later
 *     (BUSY_RETRY_MS), so one slow start never delays the deadlines of
 *     every other sandbox.
 * And it cannot deadlock: what is taken under sb->lock (m->lock, the
 * store, the timers) is never held by anyone waiting for a sandbox lock.
 */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "manager.h"
#include "timers.h"

#define MGR_NBUCKETS 1024u
/* A timer that finds its sandbox busy, or in a call, looks again after this. */
#define BUSY_RETRY_MS 1000

struct sandbox {
        struct store_sandbox rec;    /* guarded by lock; rec.state by lock and m->lock */
        const struct mgr_class *cls; /* its class; NULL when it is no longer offered
                                        (its driver is rec.driver, whatever the class) */
        char dir[PATH_MAX];          /* <state>/sandboxes/<id> */
        pthread_mutex_t lock;        /* serializes lifecycle transitions */
        atomic_int refs;
        atomic_bool gone;         /* deleted or reclaimed */
        atomic_bool dying;        /* being destroyed: its agent may vanish */
        atomic_llong last_active; /* ms; read without the lock by timers */
        int64_t persisted_active;
        int64_t timer_at;        /* earliest deadline queued; guarded by lock */
        pid_t init_pid;          /* host pid of sandbox-init when we started it, else 0 */
        bool from_pool;          /* taken from the warm pool by this attach */
        struct sandbox *next;    /* hash chain by (deployment, name), guarded by m->lock */
        struct sandbox *id_next; /* hash chain by id, guarded by m->lock */
        struct manager *m;
        struct agent_peer peer; /* dials its agent through its driver */
        /* Its image's defaults for commands, loaded by the first mgr_enter
         * (under lock), read-only from then on. */
        struct rt_image_config img_cfg;
        bool img_cfg_loaded;
};

/* One warm pool (struct mgr_pool): sandboxes of one driver started ahead
 * of time with no owner (deployment ""), in no table. */
/* Starts a pool makes at once, at most: a start is mostly CPU (the
 * launcher's and the kernel's), so about the cores of a small host. */
#define MGR_POOL_THREADS 4

struct pool {
        struct manager *m;
        const char *driver; /* the opened driver's own name */
        size_t size;
        struct sandbox *ready[MGR_MAX_POOL]; /* guarded by m->lock */
        size_t n;                            /* guarded by m->lock */
        size_t starting;                     /* starts under way; guarded by m->lock */
        pthread_cond_t cond;                 /* with m->lock: wakes its threads */
        pthread_t threads[MGR_POOL_THREADS];
        size_t n_threads;
};

struct manager {
        struct mgr_config cfg;
        const struct mgr_class *classes; /* cfg's, or default_class alone */
        size_t n_classes;
        struct mgr_class default_class;
        struct store *store;
        struct rt *rt;
        pthread_mutex_t lock; /* table, slots, stats, pool, rec.state */
        struct sandbox *buckets[MGR_NBUCKETS];
        struct sandbox *id_buckets[MGR_NBUCKETS];
        uint8_t slots[MGR_MAX_SLOTS / 8];
        char sandboxes_dir[PATH_MAX];
        char images_dir[PATH_MAX];
        struct timers *timers;
        struct mgr_stats stats; /* guarded by lock */
        /* The warm pools (pool.c), one per driver, each filled by a thread
         * of its own. Their entries are guarded by lock. */
        struct pool pools[RT_MAX_DRIVERS];
        size_t n_pools;
        bool stopping;
        uint64_t run; /* this run of the daemon, for upload notes */
};

/* ---- table.c: m->lock held by the caller of every *_locked ---- */
struct sandbox *table_find_locked(struct manager *m, const char *dep, const char *name);
void table_insert_locked(struct manager *m, struct sandbox *sb);
/* Out of both tables; its slot is given back. */
void table_remove_locked(struct manager *m, struct sandbox *sb);
/* Calls fn on every sandbox of the table; fn may drop the table's
 * reference, not unlink. */
void table_each_locked(struct manager *m, void (*fn)(struct sandbox *sb, void *ctx), void *ctx);
/* The sandbox of that id with a reference, or NULL; takes m->lock. */
struct sandbox *table_ref_id(struct manager *m, uint64_t id);
/* The sandbox (dep, name), of c's account when c is given, with a
 * reference; -ENOENT otherwise. Takes m->lock. */
int table_ref(struct manager *m, const char *dep, const struct mgr_caller *c, const char *name,
              struct sandbox **ret, struct sbx_error *err);

/* Sandboxes of the caller's deployment, of its account, and whether the
 * deployment holds another account's. */
struct usage {
        size_t deployment, account;
        bool foreign;
};
void table_usage_locked(struct manager *m, const struct mgr_caller *c, struct usage *ret);
bool owned_by(const struct sandbox *sb, const struct mgr_caller *c);

/* uid slots: a bit per slot, of min(max_sandboxes, MGR_MAX_SLOTS). */
int slot_alloc_locked(struct manager *m, uint32_t *ret); /* -EDQUOT when full */
void slot_free_locked(struct manager *m, uint32_t slot);
/* Mark a slot of a record loaded at start-up: -ERANGE past MGR_MAX_SLOTS,
 * -EEXIST when taken. */
int slot_claim_locked(struct manager *m, uint32_t slot);
/* slot_free_locked under m->lock. */
void slot_free(struct manager *m, uint32_t slot);

/* ---- sandbox.c ---- */
const struct mgr_class *class_find(const struct manager *m, const char *name);
const char *class_image(const struct manager *m, const struct mgr_class *cls);
/* The name of the driver a new sandbox of cls is created under. */
const char *class_driver(const struct manager *m, const struct mgr_class *cls);
/* 0 when the host runs cls's driver; else -ENOTSUP saying why not. */
int class_unavailable(const struct manager *m, const struct mgr_class *cls, struct sbx_error *err);
/* 0 when the driver sb was created under is here; else -ENOTSUP saying
 * why not: nothing can be done to sb but read its record. */
int sandbox_driver_check(const struct manager *m, const struct sandbox *sb, struct sbx_error *err);
/* A sandbox for a record with an id (the table's reference): -ENOMEM, or
 * -ENAMETOOLONG when its directory cannot be named. */
int sandbox_new(struct manager *m, const struct store_sandbox *rec, struct sandbox **ret);
void sandbox_ref(struct sandbox *sb);
void sandbox_unref(struct sandbox *sb);
const char *default_network(const struct manager *m);
const char *network_of(const struct manager *m, const struct sandbox *sb);
/* What the runtime is told about sb. rootfs: a PATH_MAX buffer for a
 * start, which needs the image (-ENOENT when it is not built), or NULL for
 * every other operation. */
int sandbox_spec(struct manager *m, struct sandbox *sb, char *rootfs, struct rt_spec *spec);
void sandbox_to_record(struct manager *m, struct sandbox *sb, struct mgr_record *ret);
void log_transition(struct sandbox *sb, const char *from, const char *to, const char *why);

/* ---- lifecycle.c: sb->lock held by the caller of every *_locked ---- */
void sandbox_set_state(struct manager *m, struct sandbox *sb, enum sbx_state to, const char *why);
/* Bring sb to running: thaw it, or start it (again). */
int sandbox_ensure_running_locked(struct manager *m, struct sandbox *sb, const char *why,
                                  struct sbx_error *err);
int sandbox_suspend_locked(struct manager *m, struct sandbox *sb, const char *why,
                           struct sbx_error *err);
/* Remove sb for good; the caller holds a reference of its own. */
int sandbox_destroy_locked(struct manager *m, struct sandbox *sb, const char *why,
                           struct sbx_error *err);
/* Count a call as activity. */
void sandbox_touch_locked(struct manager *m, struct sandbox *sb);
/* Queue sb's next deadline. */
void sandbox_schedule_locked(struct manager *m, struct sandbox *sb);
/* The timers' callback (timers_fn), ctx the manager. */
void sandbox_on_timer(void *ctx, int64_t at, uint64_t id);
/* At start-up: keep what still runs and answers, mark the rest stopped. */
void sandbox_reconnect_locked(struct manager *m, struct sandbox *sb);
/* Its agent did not answer a call: when it does not answer a ping either,
 * start it again on the same files. */
int sandbox_recover_locked(struct manager *m, struct sandbox *sb, struct sbx_error *err);

/* ---- checkpoints (checkpoint.c) ---- */
/* <sandbox dir>/MGR_CHECKPOINT_DIR: the sandbox's last checkpoint, which a
 * start of it restores (lifecycle.c); NULL-terminated path in out. */
#define MGR_CHECKPOINT_DIR "checkpoint"
/* Whether sb has one its driver can restore. */
bool sandbox_has_checkpoint(struct manager *m, struct sandbox *sb);
/* The attach of a fork (manager.c): a new sandbox `name` of from's
 * deployment, account, class, driver and network, from image (NULL:
 * from's), whose dir gets dir (a copy of from's checkpoint; NULL: none)
 * before its first start; -EEXIST when the name is taken. */
int manager_fork_attach(struct manager *m, const struct sandbox *from, const char *name,
                        const char *image, const char *dir, uint64_t *ret_id,
                        struct mgr_record *ret, struct sbx_error *err);
/* A sandbox's image that was made for it alone (a files fork's snapshot)
 * goes with it (snapshot.c). */
void manager_image_release(struct manager *m, const struct sandbox *sb);
/* mgr_fork of a sandbox whose class keeps no checkpoint: its files. */
int manager_files_fork(struct manager *m, struct sandbox *sb, const char *name, uint64_t *ret_id,
                       struct mgr_record *ret, struct sbx_error *err);

/* ---- egress.c ---- */
/* Give the runtime sb's policy (none: registered without one): at every
 * start and at reconnection. A failure is logged; sb then gets no new
 * connection out. */
void sandbox_egress_apply_locked(struct manager *m, struct sandbox *sb);
/* At its destruction. */
void sandbox_egress_forget_locked(struct manager *m, struct sandbox *sb);
/* The text form of p (malloc'd). */
int sandbox_egress_text(const struct egress_policy *p, char **ret, struct sbx_error *err);
/* Record text (NULL: none) as sb's policy; -EAGAIN when the store fails. */
int sandbox_egress_store(struct manager *m, const struct sandbox *sb, const char *text,
                         struct sbx_error *err);
/* 1 when sb's recorded policy is text (NULL: none), 0 when not. */
int sandbox_egress_equal(struct manager *m, const struct sandbox *sb, const char *text);
/* from's recorded policy (malloc'd; NULL: none), for a fork. */
int sandbox_egress_copy(struct manager *m, const struct sandbox *from, char **ret);

/* ---- pool.c ---- */
/* Check cfg's pools and set them up (those of size 0 are left out):
 * -EINVAL for a size out of bounds, a driver that is not here or cannot
 * rename a sandbox, or one driver twice. */
int pool_init(struct manager *m, struct sbx_error *err);
/* What pool_init set up, once their threads are stopped. */
void pool_free(struct manager *m);
/* Start a thread per pool; stop them and destroy every pool's sandboxes. */
void pool_start(struct manager *m);
void pool_stop(struct manager *m);
/* Warm sandboxes ready, all pools. m->lock held. */
size_t pool_ready_locked(const struct manager *m);
/* Remove a pool entry for good (it is in no table). */
void pool_destroy(struct manager *m, struct sandbox *sb);
/* A ready entry given to c as name and cls, if one fits (the pool of
 * cls's driver, the default image and network), not yet in the table;
 * NULL otherwise. m->lock held. */
struct sandbox *pool_take_locked(struct manager *m, const struct mgr_caller *c, const char *name,
                                 const struct mgr_class *cls, const char *network);
/* Give a taken entry its name. When the driver cannot rename it, it is
 * stopped instead, and the bring-up that follows starts it cold. sb->lock
 * held. */
void pool_rename_locked(struct manager *m, struct sandbox *sb);
