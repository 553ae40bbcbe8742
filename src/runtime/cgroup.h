/* SPDX-License-Identifier: MIT */
/* Cgroups of the ns driver (internal to runtime/).
 *
 * Every sandbox gets one cgroup per hierarchy, named <root>/sb-<id>:
 *  - on a v1 or hybrid host (cgroup-v1.c), the v1 memory, pids, cpu and
 *    freezer hierarchies that are mounted (they carry the limits), plus,
 *    when it is mounted, the controller-less v2 hierarchy at
 *    /sys/fs/cgroup/unified, used for freeze, kill and the "populated"
 *    notification, as runc does in hybrid mode;
 *  - on a pure v2 host (cgroup-v2.c), the one v2 cgroup for everything.
 * cg_detect finds the layout and picks the backend (struct cg_ops,
 * cgroup-internal.h) once; both are read-only afterwards, so every
 * function here is safe from any thread. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/util.h"
#include "runtime.h"

enum cg_v1 { CG_V1_MEMORY, CG_V1_PIDS, CG_V1_CPU, CG_V1_FREEZER, CG_V1_COUNT };

#define CG_PATH_MAX 512

struct cg_ops;

struct cg_layout {
        char root[128];           /* cgroup parent, e.g. "sandboxd" */
        char v2[64];              /* v2 mount point, "" when absent */
        char v1[CG_V1_COUNT][64]; /* v1 mount points, "" when absent */
        const struct cg_ops *ops; /* the backend: v2 on a pure v2 host, else v1 */
};

/* Find the hierarchies. root: cgroup parent path, relative, made of valid
 * names ("sandboxd" or "a/b"); NULL = "sandboxd". */
int cg_detect(struct cg_layout *l, const char *root, struct sbx_error *err);

/* Create (or reuse, when empty) the sandbox's cgroups, leave them thawed,
 * and apply the limits (0 = unset, which also resets an old value).
 * Fails with EBUSY when a process of a previous run is still inside. */
int cg_create(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
              struct sbx_error *err);

/* Move pid into the sandbox's cgroups: the v1 ones (v1), the v2 one (v2).
 * Each first move after a quiet spell waits for one RCU grace period of
 * the kernel (the threadgroup lock's writer side), about 10 ms here; a
 * child made into its cgroups (below) never moves. */
int cg_attach(const struct cg_layout *l, uint64_t id, pid_t pid, bool v1, bool v2,
              struct sbx_error *err);

/* ---- made into their cgroups: no move on the start's path ----
 *
 * The v2 cgroup is joined at the clone (clone3's CLONE_INTO_CGROUP: an fd
 * of the sandbox's v2 cgroup, cg_v2_open). The v1 ones are inherited from
 * a spare launcher (zygote.c) that joined cgroups of its own,
 * <root>/spare-<pid>, ahead of time and renames them to the sandbox's at
 * its start (v1 cgroups can be renamed; v2 ones cannot). */

/* Whether l has v1 hierarchies and renaming cgroups in them works. */
bool cg_spares_possible(const struct cg_layout *l);
/* Make <root>/spare-<self> in every v1 hierarchy and join them. */
int cg_spare_join(const struct cg_layout *l, struct sbx_error *err);
/* The calling spare's v1 cgroups become the sandbox's (refused with EBUSY
 * when the sandbox's hold a process), the v2 one is made, and all are
 * thawed and limited as cg_create does. */
int cg_spare_adopt(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
                   struct sbx_error *err);
/* rmdir <root>/spare-<pid> in every v1 hierarchy (pid 0: every spare-*,
 * those of a daemon that died); best effort, a cgroup in use stays.
 * True when none of them is left. */
bool cg_spare_remove(const struct cg_layout *l, pid_t pid);
/* An fd of the sandbox's v2 cgroup for CLONE_INTO_CGROUP, or -1 when l has
 * no v2 hierarchy. */
int cg_v2_open(const struct cg_layout *l, uint64_t id);

int cg_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err);
int cg_thaw(const struct cg_layout *l, uint64_t id, struct sbx_error *err);

/* Kill every process and wait (bounded) until the cgroup is empty; leaves
 * the cgroups thawed. A missing cgroup counts as empty. */
int cg_kill_all(const struct cg_layout *l, uint64_t id, struct sbx_error *err);

/* rmdir every cgroup of the sandbox (retrying briefly on EBUSY). */
int cg_remove(const struct cg_layout *l, uint64_t id, struct sbx_error *err);

/* rmdir the root's empty cgroups, then the root itself, in every
 * hierarchy (a daemon that stops with no sandbox alive leaves nothing of
 * its own; one with a process in it stays). */
void cg_remove_root(const struct cg_layout *l);

/* Whether any process of the sandbox is alive. */
bool cg_populated(const struct cg_layout *l, uint64_t id);
/* Whether any sandbox under the root is (true when it cannot tell). */
bool cg_any_populated(const struct cg_layout *l);
