/* SPDX-License-Identifier: MIT */
/* What cgroup.c (detection, creation, paths) and the two backends,
 * cgroup-v1.c and cgroup-v2.c, share. Nothing outside them includes it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "cgroup.h"

/* How long a freeze, a thaw or a kill may take to show. */
#define CG_WAIT_MS 5000

/* How one kind of host does each thing for one sandbox; cg_detect picks
 * one. Errors are -errno with err set; a missing capability (no freezer)
 * is -ENOTSUP. */
struct cg_ops {
        const char *name; /* "v1" (v1 or hybrid host), "v2" (pure v2 host) */
        /* Once the parents of the sandbox's cgroups exist, before the
         * sandbox's own are made. NULL: nothing to do. */
        int (*prepare)(const struct cg_layout *l, struct sbx_error *err);
        /* A made or reused cgroup: thaw what an earlier run left frozen. */
        int (*reset)(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
        /* Apply the limits (0 = unset, which also resets an old value). */
        int (*set_limits)(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
                          struct sbx_error *err);
        int (*freeze)(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
        int (*thaw)(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
        /* cg_kill_all's work: kill until empty (cg_kill_until_empty), leave
         * thawed. */
        int (*kill_all)(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
        bool (*populated)(const struct cg_layout *l, uint64_t id);
        bool (*any_populated)(const struct cg_layout *l);
};

extern const struct cg_ops cg_v1_ops, cg_v2_ops;

/* ---- shared helpers (cgroup.c) ---- */

/* <mnt>/<root>/sb-<id>[/<file>]; -ENAMETOOLONG when it does not fit. */
int cg_path(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file,
            char out[CG_PATH_MAX]);
/* Whether <mnt>/<root>/sb-<id>/<file> exists. */
bool cg_has(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file);
/* Write value to a file of the sandbox's cgroup in mnt. optional: a
 * missing file is fine. A missing controller file (memory.max, ...) is
 * -ENOTSUP naming it. */
int cg_set(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file,
           const char *value, bool optional, struct sbx_error *err);
/* Value of `key` in a "key value\n" file such as cgroup.events; -1 if
 * absent. */
long long cg_kv_lookup(const char *text, const char *key);
/* One round of killing; NULL = none (only wait). */
typedef int (*cg_kill_round_fn)(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
/* Run rounds, sleeping between them, while the sandbox is populated;
 * -ETIMEDOUT after CG_WAIT_MS. */
int cg_kill_until_empty(const struct cg_layout *l, uint64_t id, cg_kill_round_fn round,
                        struct sbx_error *err);
/* Both backends' answer when there is no freezer. */
int cg_no_freezer(uint64_t id, struct sbx_error *err);

/* ---- the v2 hierarchy, l->v2 (cgroup-v2.c); hybrid v1 hosts use these
 * too, on their controller-less unified hierarchy ---- */

/* Whether l has a v2 hierarchy and the sandbox's cgroup there has file. */
bool cg2_has(const struct cg_layout *l, uint64_t id, const char *file);
/* cgroup.freeze 1 and wait until the cgroup reads frozen (back to 0 when
 * it does not); cgroup.freeze 0 and wait until thawed. */
int cg2_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
int cg2_thaw(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
/* cgroup.freeze 0 when there is one; best effort. */
void cg2_leave_thawed(const struct cg_layout *l, uint64_t id);
/* cgroup.kill: kills every task, also ones forking right now, and a task
 * frozen through v2. A cgroup already gone is fine. */
int cg2_kill(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
/* "populated" of the sandbox's cgroup.events (whole subtree). */
bool cg2_populated(const struct cg_layout *l, uint64_t id);
/* "populated" of <root>'s cgroup.events: any sandbox of the instance
 * (true when it cannot tell, false when <root> does not exist). */
bool cg2_any_populated(const struct cg_layout *l);
