/* SPDX-License-Identifier: MIT */
/* The manager: the sandbox state machine (create, attach, suspend, resume,
 * stop, reclaim, delete), caps and tenancy, and the lifecycle timers.
 * It owns the in-memory table of sandboxes; the store makes it durable and
 * the runtime does the isolation work.
 *
 * Errors are -errno, mapped to API errors in exactly one place (api/):
 *   -EINVAL invalid_argument, -ENOENT not_found, -EDQUOT cap_reached,
 *   -EPERM not_enabled, -ENOTSUP unsupported_class, -EHOSTDOWN
 *   bring_up_failed, -EAGAIN unavailable, -EACCES unauthenticated (the
 *   deployment belongs to another account).
 *
 * Tenancy: a sandbox is keyed by (deployment, name) and belongs to the
 * account that created it; control-plane calls see only the sandboxes of
 * their own deployment and account. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../agent/client.h"
#include "../common/names.h"
#include "../common/util.h"
#include "../runtime/runtime.h"
#include "../store/store.h"

struct manager;
struct sandbox;

/* The states of a sandbox (the state machine is lifecycle.c's). The store
 * keeps the number; a number this version does not know reads as stopped. */
enum sbx_state {
        SBX_RUNNING = 0,
        SBX_SUSPENDED = 1,
        SBX_STOPPED = 2,
};
#define SBX_NSTATES 3

/* "running", "suspended", "stopped": the names the API and the metrics
 * show; "unknown" for anything else. */
const char *sbx_state_name(enum sbx_state s);

/* Each sandbox maps MGR_UID_RANGE host ids from uid_base + slot * range;
 * at most MGR_MAX_SLOTS slots (the daemon claims uid_base ..
 * uid_base + max_sandboxes * MGR_UID_RANGE). */
#define MGR_UID_RANGE 65536u
#define MGR_MAX_SLOTS 32768u
/* At most this many sandboxes kept started ahead of time per pool. */
#define MGR_MAX_POOL 16

/* A sandbox class: what an attach names ("class"), and what it selects.
 * A new sandbox is created under the class's driver from the class's
 * image, and its record keeps the class's name, the image and the driver
 * for the sandbox's life: every runtime call of it goes to that driver,
 * whatever the class names later (a class may name another driver in the
 * next run of the daemon; its sandboxes do not move).
 *
 * A class whose driver the host cannot run (left out by rt_open, see
 * rt_unavailable) is still offered: an attach that would create a sandbox
 * of it is -ENOTSUP saying why. A sandbox whose own driver is not here is
 * kept as its record says, and everything but get and list of it is
 * -ENOTSUP, saying why. */
struct mgr_class {
        const char *name;   /* a sandbox name (names.h), e.g. "default" */
        const char *driver; /* runtime driver (rt_driver); NULL = the first opened */
        const char *image;  /* NULL = mgr_config.default_image */
};

/* The class an attach that names none gets. */
#define MGR_DEFAULT_CLASS "default"

/* A warm pool: sandboxes of one driver started ahead of time, with no
 * owner, from the default image, so that an attach of a new name costs a
 * rename instead of a start. An attach creating a sandbox takes one from
 * the pool of the driver its class names when the class's image is the
 * default one and the network the daemon's default; the record then gets
 * the attach's name and class.
 *
 * The driver must rename a running sandbox (RT_CAP_HOSTNAME): a warm
 * sandbox is booted before its name is known, and one whose driver could
 * not rename it would have to be started again under its name, costing
 * the attach more than no pool at all. mgr_open refuses such a pool. */
struct mgr_pool {
        const char *driver; /* an opened runtime driver (rt_driver); NULL = the first */
        int64_t size;       /* 0 to MGR_MAX_POOL sandboxes kept started */
};

struct mgr_config {
        const char *state_dir;
        const char *images_dir;
        const char *default_image;
        uint32_t uid_base;
        uint32_t max_sandboxes; /* slots: uid ranges of 65536 from uid_base */
        int64_t idle_timeout_ms;
        int64_t suspended_ttl_ms;
        int64_t max_age_ms;
        int64_t max_per_deployment;
        bool allow_unknown_accounts;
        /* The warm pools, one per driver at most (read by mgr_open
         * only); NULL (or n_pools 0) = none. */
        const struct mgr_pool *pools;
        size_t n_pools;
        struct rt_limits limits;
        /* The classes offered, borrowed for the manager's life. NULL (or
         * n_classes 0) = one, MGR_DEFAULT_CLASS: the first driver and
         * default_image. */
        const struct mgr_class *classes;
        size_t n_classes;
};

/* What get/list show: no credentials. ceiling_at 0 = absent. */
struct mgr_record {
        char name[SBX_NAME_MAX + 1];
        char sandbox_class[SBX_NAME_MAX + 1];
        char image[65];  /* what it was created from */
        char network[8]; /* "nat" or "none" */
        enum sbx_state state;
        int64_t created_at;
        int64_t last_active_at;
        int64_t ceiling_at;
};

struct mgr_caller {
        const char *deployment;
        const char *account;
};

/* Load every record, reconnect to the agents still alive, mark the others
 * stopped, and start the lifecycle timer thread. */
int mgr_open(const struct mgr_config *cfg, struct store *st, struct rt *rt, struct manager **ret,
             struct sbx_error *err);
void mgr_close(struct manager *m);
/* Stop the warm pools and destroy their sandboxes (mgr_close does this too);
 * for a shutdown that cannot wait for requests still in flight. */
void mgr_stop_pool(struct manager *m);

/* ---- control plane ---- */
/* Create on first call, resume a suspended one, start a stopped one.
 * sandbox_class: one of the configured classes (-ENOTSUP otherwise, and
 * for a new sandbox of a class whose driver the host cannot run), or NULL
 * for MGR_DEFAULT_CLASS. network: "nat", "none" or NULL (the
 * daemon's default). Both are chosen at creation: naming another one for
 * an existing sandbox is -EBUSY.
 * ret_id: the incarnation id the data-plane credential is bound to. */
/* What an attach names; NULL members name nothing. A member named for an
 * existing sandbox must be what it has (-EBUSY); for a new one it is what
 * it gets: the class, the network, the image (-ENOPKG when there is no
 * such image). */
struct egress_policy;
struct egress_event;
struct egress_stats;
struct mgr_attach_opts {
        const char *sandbox_class;
        const char *network;
        const char *image;
        /* A new sandbox's egress policy (runtime/egress.h); an existing one
         * must have the same (-EBUSY: PUT {endpoint}/network changes it). */
        const struct egress_policy *egress;
};
int mgr_attach(struct manager *m, const struct mgr_caller *c, const char *name,
               const struct mgr_attach_opts *o, uint64_t *ret_id, struct mgr_record *ret,
               struct sbx_error *err);
int mgr_get(struct manager *m, const struct mgr_caller *c, const char *name, struct mgr_record *ret,
            struct sbx_error *err);
int mgr_list(struct manager *m, const struct mgr_caller *c, struct mgr_record **ret, size_t *ret_n,
             struct sbx_error *err);
int mgr_stop(struct manager *m, const struct mgr_caller *c, const char *name,
             struct sbx_error *err);
int mgr_delete(struct manager *m, const struct mgr_caller *c, const char *name,
               struct sbx_error *err);
/* The account check every control-plane call makes first (-EPERM). */
int mgr_check_account(struct manager *m, const char *account, struct sbx_error *err);

/* ---- data plane ---- */
/* Find the sandbox a credential names (deployment, name, incarnation id),
 * make sure it runs (thaw / start), count the call as activity, and hold a
 * reference until mgr_leave(). -ENOENT when it no longer exists. */
int mgr_enter(struct manager *m, const char *deployment, const char *name, uint64_t id,
              struct sandbox **ret, struct sbx_error *err);
void mgr_leave(struct manager *m, struct sandbox *sb);
/* Its deployment, valid while entered. */
const char *mgr_sandbox_deployment(const struct sandbox *sb);
/* The store the manager keeps its records in (the API's shares too). */
struct store *mgr_store(struct manager *m);
/* The incarnation id of an entered sandbox (its record's). */
uint64_t mgr_sandbox_id(const struct sandbox *sb);
/* The images dir (mgr_config.images_dir, normalized). */
const char *mgr_images_dir(const struct manager *m);
/* The sandbox dir, valid while entered. */
const char *mgr_sandbox_dir(const struct sandbox *sb);
/* How to reach its agent (agent/client.h), valid while entered. */
const struct agent_peer *mgr_agent(struct sandbox *sb);
/* Its image's defaults for the commands run in it (runtime.h), valid while
 * entered; empty when the image has none or its config cannot be read. */
const struct rt_image_config *mgr_image_config(struct sandbox *sb);
/* An O_PATH fd of its "/" for the file endpoints: from its driver, or
 * handed over by its agent. */
int mgr_root(struct manager *m, struct sandbox *sb, int *ret_fd, struct sbx_error *err);
/* ---- checkpoints (checkpoint.c) ---- */
struct mgr_checkpoint_info {
        uint64_t size_bytes; /* on the host: the kernel's image and the files' copy */
        int64_t duration_ms;
        int64_t created_at;
};
/* Save sb (running; a suspended one is thawed first): its processes, their
 * memory and its files, replacing the checkpoint it had. From then on a
 * start of it (after its processes ended: a host reboot, a crash) restores
 * that state instead of booting. keep_running false: it is stopped after
 * the save. -ENOTSUP: its class cannot. */
/* A snapshot of sb's files as the new image `image` (runtime.h,
 * rt_image_snapshot), the sandbox frozen meanwhile and running on after.
 * -EEXIST when the image exists. Every class. */
struct mgr_snapshot_info {
        uint64_t size_bytes;   /* the new image's disk use */
        uint64_t copied_bytes; /* what was copied (the rest is linked) */
        uint64_t copied_files, linked_files;
        int64_t duration_ms; /* frozen this long */
        int64_t created_at;
};
int mgr_snapshot(struct manager *m, struct sandbox *sb, const char *image,
                 struct mgr_snapshot_info *ret, struct sbx_error *err);
int mgr_checkpoint(struct manager *m, struct sandbox *sb, bool keep_running,
                   struct mgr_checkpoint_info *ret, struct sbx_error *err);
/* A new sandbox `name` (sb's deployment, account, class, network) started
 * from sb's checkpoint: its processes, memory and files as they were then,
 * its own name. -ENOENT: sb has no checkpoint; -EEXIST: the name is taken;
 * -EINVAL: a bad name. ret_id: the new sandbox's incarnation. */
int mgr_fork(struct manager *m, struct sandbox *sb, const char *name, uint64_t *ret_id,
             struct mgr_record *ret, struct sbx_error *err);

/* The first host uid (and gid) of the sandbox's id range. */
uint32_t mgr_sandbox_uid(struct manager *m, const struct sandbox *sb);
/* The host uid its files carry for its root, which the file endpoints act
 * as: the range's first where its driver shifts ids (ns), else 0 (gvisor:
 * its own kernel owns the ids, root is 0 in the files it writes). */
uint32_t mgr_sandbox_root_uid(struct manager *m, struct sandbox *sb);
/* An agent call found no agent listening: if the sandbox's processes are
 * gone, mark it stopped and start it again. 0 when it runs again. */
int mgr_recover(struct manager *m, struct sandbox *sb, struct sbx_error *err);
/* Whether it was deleted or reclaimed while entered, or is being. */
bool mgr_sandbox_gone(const struct sandbox *sb);

/* Uploads stream into a temporary file named MGR_UPLOAD_PREFIX + 12 hex
 * digits beside their target. Note one before creating it, and call done
 * once it is renamed or removed: a daemon killed in between leaves a note
 * that the next start of the sandbox (or of the daemon) acts on, removing
 * the file (manager/uploads.h). */
#define MGR_UPLOAD_PREFIX ".sandboxd-upload-"
int mgr_upload_note(struct manager *m, struct sandbox *sb, const char *dir, const char *name);
void mgr_upload_done(struct manager *m, struct sandbox *sb, const char *name);

/* ---- egress (egress.c), sb entered ---- */
/* The policy in force (an empty one when it has none). */
int mgr_network_get(struct manager *m, struct sandbox *sb, struct egress_policy *ret,
                    struct sbx_error *err);
/* Replace it, for new connections at once, and record it. -EINVAL with
 * err saying why when it cannot be enforced (network none; domains
 * without the DNS forwarder). */
int mgr_network_set(struct manager *m, struct sandbox *sb, const struct egress_policy *p,
                    struct sbx_error *err);
/* Its recent egress events, oldest first. */
int mgr_network_log(struct manager *m, struct sandbox *sb, struct egress_event *out, size_t max,
                    size_t *ret_n);
void mgr_egress_stats(struct manager *m, struct egress_stats *ret);

/* ---- operations ---- */
struct mgr_stats {
        uint64_t sandboxes[SBX_NSTATES]; /* by state */
        uint64_t pool;                   /* warm sandboxes ready to be taken, all pools */
        uint64_t transitions;            /* every state change */
        uint64_t created, deleted, reclaimed, suspended, resumed, started, bring_up_failures;
};
void mgr_stats(struct manager *m, struct mgr_stats *ret);

/* ---- cluster mode ---- */
/* Every named sandbox of this host (deployment, account, name), a copy:
 * *ret malloc'd. */
struct mgr_owned {
        char deployment[SBX_NAME_MAX + 1];
        char account[SBX_NAME_MAX + 1];
        char name[SBX_NAME_MAX + 1];
};
int mgr_each(struct manager *m, struct mgr_owned **ret, size_t *ret_n);
/* Slots left for new sandboxes (max_sandboxes less those held, warm ones
 * counted as free). */
int64_t mgr_free_slots(struct manager *m);
/* The account's sandbox limit (0 = none, or an unknown account). */
int64_t mgr_account_limit(struct manager *m, const char *account);
