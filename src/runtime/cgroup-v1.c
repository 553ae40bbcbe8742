/* SPDX-License-Identifier: MIT */
/* A v1 or hybrid host (cg_v1_ops): the v1 memory, pids and cpu
 * hierarchies carry the limits. Freeze, kill and "populated" go to the
 * sandbox's cgroup in the unified v2 hierarchy when the host mounts one
 * and its kernel has the file: a task frozen through v2 still dies on
 * SIGKILL, while a v1-frozen task sits in D state and ignores SIGKILL
 * until thawed. Otherwise the v1 freezer and cgroup.procs do it, as runc
 * does (opencontainers/cgroups fs/freezer.go, signalAllProcesses). */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cgroup-internal.h"

/* ---- limits ---- */

/* Socket buffers. v2 charges them to memory.max; v1 charges them nowhere
 * unless memory.kmem.tcp.limit_in_bytes is set: then every socket made in
 * the cgroup, UDP as much as TCP, charges its buffers to that counter (not
 * to memory.limit_in_bytes) and the kernel drops what would exceed it.
 * Without it, 4,000 UDP sockets of a 256M sandbox held 702 MiB, towards the
 * host-wide udp_mem ceiling that, once reached, breaks UDP (DNS included)
 * for the whole host. A quarter of the memory limit, on top of it. Set
 * before any process joins: a socket is bound to its cgroup when made.
 * (memory.kmem.limit_in_bytes, for the rest of kernel memory, has no
 * effect since Linux 6.1; v1 charges slab memory to memory.limit_in_bytes
 * anyway.) Optional: a kernel without kmem accounting has no such file. */
static int set_socket_memory(const struct cg_layout *l, uint64_t id, uint64_t bytes,
                             struct sbx_error *err)
{
        char v[32] = "-1";
        if (bytes)
                snprintf(v, sizeof(v), "%" PRIu64, MAX(bytes / 4, (uint64_t)4 << 20));
        return cg_set(l, l->v1[CG_V1_MEMORY], id, "memory.kmem.tcp.limit_in_bytes", v, true, err);
}

/* No limit: memsw must stay >= the limit, so raise memsw first. */
static int unset_memory(const struct cg_layout *l, uint64_t id, bool memsw, struct sbx_error *err)
{
        const char *mnt = l->v1[CG_V1_MEMORY];
        int r;
        if (memsw && (r = cg_set(l, mnt, id, "memory.memsw.limit_in_bytes", "-1", false, err)) < 0)
                return r;
        if ((r = cg_set(l, mnt, id, "memory.limit_in_bytes", "-1", false, err)) < 0)
                return r;
        return set_socket_memory(l, id, 0, err);
}

static int set_memory(const struct cg_layout *l, uint64_t id, uint64_t bytes, struct sbx_error *err)
{
        const char *mnt = l->v1[CG_V1_MEMORY];
        char p[CG_PATH_MAX], v[32];
        int r = cg_path(l, mnt, id, "memory.memsw.limit_in_bytes", p);
        if (r < 0)
                return sbx_error_set(err, -r, "cgroup path");
        bool memsw = access(p, F_OK) == 0;
        if (!bytes)
                return unset_memory(l, id, memsw, err);
        snprintf(v, sizeof(v), "%" PRIu64, bytes);
        r = cg_path(l, mnt, id, "memory.limit_in_bytes", p);
        if (r >= 0)
                r = write_small_at(AT_FDCWD, p, v);
        if (r == -EINVAL && memsw) {
                /* Raising above an old memsw value: memsw first, then retry. */
                if ((r = cg_set(l, mnt, id, "memory.memsw.limit_in_bytes", v, false, err)) < 0)
                        return r;
                r = write_small_at(AT_FDCWD, p, v);
        }
        if (r < 0)
                return sbx_error_set(err, -r, "write `%s` to `%s`", v, p);
        /* Same value for memory+swap, so swap cannot extend the limit. */
        if (memsw && (r = cg_set(l, mnt, id, "memory.memsw.limit_in_bytes", v, false, err)) < 0)
                return r;
        return set_socket_memory(l, id, bytes, err);
}

static int set_pids(const struct cg_layout *l, uint64_t id, uint64_t pids, struct sbx_error *err)
{
        char v[32];
        if (pids)
                snprintf(v, sizeof(v), "%" PRIu64, pids);
        else
                snprintf(v, sizeof(v), "max");
        return cg_set(l, l->v1[CG_V1_PIDS], id, "pids.max", v, false, err);
}

static int set_cpu(const struct cg_layout *l, uint64_t id, uint64_t shares, struct sbx_error *err)
{
        char v[32];
        uint64_t s = shares ? shares : 1024;
        s = MAX(s, 2);
        s = MIN(s, 262144);
        snprintf(v, sizeof(v), "%" PRIu64, s);
        return cg_set(l, l->v1[CG_V1_CPU], id, "cpu.shares", v, !shares, err);
}

static int v1_set_limits(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
                         struct sbx_error *err)
{
        int r;
        if (l->v1[CG_V1_MEMORY][0]) {
                if ((r = set_memory(l, id, lim->memory_bytes, err)) < 0)
                        return r;
        } else if (lim->memory_bytes) {
                return sbx_error_set(err, ENOTSUP, "memory limit: no memory cgroup");
        }
        if (l->v1[CG_V1_PIDS][0]) {
                if ((r = set_pids(l, id, lim->pids, err)) < 0)
                        return r;
        } else if (lim->pids) {
                return sbx_error_set(err, ENOTSUP, "pids limit: no pids cgroup");
        }
        if (l->v1[CG_V1_CPU][0])
                return set_cpu(l, id, lim->cpu_shares, err);
        return 0;
}

/* ---- the v1 freezer ---- */

static bool has_freezer(const struct cg_layout *l)
{
        return l->v1[CG_V1_FREEZER][0] != '\0';
}

static int set_thawed(const struct cg_layout *l, uint64_t id, bool optional, struct sbx_error *err)
{
        return cg_set(l, l->v1[CG_V1_FREEZER], id, "freezer.state", "THAWED", optional, err);
}

/* v1 can stay in FREEZING while tasks fork; like runc, retry, and thaw
 * now and then so the stragglers can get to a freezable point. */
static int freeze_v1(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        char p[CG_PATH_MAX], state[64];
        if (cg_path(l, l->v1[CG_V1_FREEZER], id, "freezer.state", p) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "cgroup path");
        for (int i = 0; i < 1000; i++) {
                if (i % 50 == 49) {
                        write_small_at(AT_FDCWD, p, "THAWED");
                        sleep_ms(10);
                }
                int r = write_small_at(AT_FDCWD, p, "FROZEN");
                if (r < 0)
                        return sbx_error_set(err, -r, "write FROZEN to `%s`", p);
                if (i % 25 == 24)
                        sleep_ms(10);
                if ((r = read_small_at(AT_FDCWD, p, state, sizeof(state))) < 0)
                        return sbx_error_set(err, -r, "read `%s`", p);
                if (!strncmp(state, "FROZEN", 6))
                        return 0;
        }
        write_small_at(AT_FDCWD, p, "THAWED");
        return sbx_error_set(err, EBUSY, "unable to freeze `%s`", p);
}

static int v1_reset(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        int r;
        if (l->v2[0] && (r = cg_set(l, l->v2, id, "cgroup.freeze", "0", true, err)) < 0)
                return r;
        if (has_freezer(l) && (r = set_thawed(l, id, false, err)) < 0)
                return r;
        return 0;
}

static int v1_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        if (cg2_has(l, id, "cgroup.freeze"))
                return cg2_freeze(l, id, err);
        if (has_freezer(l))
                return freeze_v1(l, id, err);
        return cg_no_freezer(id, err);
}

/* Both, when the sandbox has both: a v1-frozen task stays frozen whatever
 * v2 says. */
static int v1_thaw(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        int r;
        if (has_freezer(l) && (r = set_thawed(l, id, false, err)) < 0)
                return r;
        if (cg2_has(l, id, "cgroup.freeze"))
                return cg2_thaw(l, id, err);
        return has_freezer(l) ? 0 : cg_no_freezer(id, err);
}

/* ---- kill ---- */

/* The first v1 hierarchy mounted; NULL when none is. */
static const char *any_v1(const struct cg_layout *l)
{
        for (int i = 0; i < CG_V1_COUNT; i++)
                if (l->v1[i][0])
                        return l->v1[i];
        return NULL;
}

/* SIGKILL every pid listed in a v1 cgroup.procs; how many were listed. */
static int kill_listed(const struct cg_layout *l, const char *mnt, uint64_t id)
{
        char p[CG_PATH_MAX];
        if (cg_path(l, mnt, id, "cgroup.procs", p) < 0)
                return 0;
        FILE *f = fopen(p, "re");
        if (!f)
                return 0;
        int n = 0;
        long pid;
        while (fscanf(f, "%ld", &pid) == 1) {
                if (pid > 0 && pid <= INT32_MAX)
                        kill((pid_t)pid, SIGKILL);
                n++;
        }
        fclose(f);
        return n;
}

/* v1 without cgroup.kill: freeze so nothing forks or exits under us, kill
 * the listed pids, thaw (a v1-frozen task ignores SIGKILL until thawed). */
static int kill_round_v1(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        (void)err;
        bool frozen = has_freezer(l) && freeze_v1(l, id, NULL) == 0;
        const char *mnt = frozen ? l->v1[CG_V1_FREEZER] : any_v1(l);
        if (mnt)
                kill_listed(l, mnt, id);
        if (has_freezer(l))
                set_thawed(l, id, true, NULL);
        return 0;
}

/* Hybrid: cgroup.kill, and thaw v1 too: a v1-frozen task ignores SIGKILL. */
static int kill_round_hybrid(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        int r = cg2_kill(l, id, err);
        if (r < 0)
                return r;
        if (has_freezer(l))
                set_thawed(l, id, true, NULL);
        return 0;
}

static int v1_kill_all(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        bool v2kill = cg2_has(l, id, "cgroup.kill");
        int r = cg_kill_until_empty(l, id, v2kill ? kill_round_hybrid : kill_round_v1, err);
        if (r < 0)
                return r;
        /* Leave the cgroup thawed for the next start. */
        cg2_leave_thawed(l, id);
        return 0;
}

/* ---- populated ---- */

static bool procs_listed(const struct cg_layout *l, const char *mnt, uint64_t id)
{
        char p[CG_PATH_MAX], text[256];
        if (cg_path(l, mnt, id, "cgroup.procs", p) < 0)
                return false;
        if (read_small_at(AT_FDCWD, p, text, sizeof(text)) < 0)
                return false;
        return text[0] != '\0';
}

static bool v1_populated(const struct cg_layout *l, uint64_t id)
{
        if (cg2_has(l, id, "cgroup.events"))
                return cg2_populated(l, id);
        for (int i = 0; i < CG_V1_COUNT; i++)
                if (l->v1[i][0] && procs_listed(l, l->v1[i], id))
                        return true;
        return false;
}

/* Without the unified hierarchy: every sb-* directory of one hierarchy. */
static bool v1_any_populated(const struct cg_layout *l)
{
        if (l->v2[0])
                return cg2_any_populated(l);
        const char *mnt = any_v1(l);
        char p[CG_PATH_MAX];
        if (!mnt || path_join(p, sizeof(p), mnt, l->root) < 0)
                return mnt != NULL;
        DIR *d = opendir(p);
        if (!d)
                return errno != ENOENT;
        bool any = false;
        struct dirent *de;
        uint64_t id;
        while (!any && (de = readdir(d)))
                if (sscanf(de->d_name, "sb-%" SCNu64, &id) == 1)
                        any = procs_listed(l, mnt, id);
        closedir(d);
        return any;
}

const struct cg_ops cg_v1_ops = {
    .name = "v1",
    .prepare = NULL,
    .reset = v1_reset,
    .set_limits = v1_set_limits,
    .freeze = v1_freeze,
    .thaw = v1_thaw,
    .kill_all = v1_kill_all,
    .populated = v1_populated,
    .any_populated = v1_any_populated,
};
