/* SPDX-License-Identifier: MIT */
/* Cgroups of the ns driver: v1 hierarchies for limits on hybrid hosts, v2
 * for freeze / kill / populated (and for everything on pure v2 hosts).
 * See cgroup.h for the layout. */
#include "cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include "../common/names.h"

#define CG_MNT "/sys/fs/cgroup"
#define CG_WAIT_MS 5000

static const char *const cg_v1_names[CG_V1_COUNT] = {
    [CG_V1_MEMORY] = "memory",
    [CG_V1_PIDS] = "pids",
    [CG_V1_CPU] = "cpu",
    [CG_V1_FREEZER] = "freezer",
};

/* ---- small file helpers ---- */

static int cg_write(const char *path, const char *value)
{
        return write_small_at(AT_FDCWD, path, value);
}

/* Read a small cgroup file into out (NUL terminated); bytes or -errno. */
static ssize_t cg_read(const char *path, char *out, size_t out_len)
{
        return read_small_at(AT_FDCWD, path, out, out_len);
}

static bool path_exists(const char *path)
{
        return access(path, F_OK) == 0;
}

/* <mnt>/<root>/sb-<id>[/<file>] */
static int cg_path(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file,
                   char out[CG_PATH_MAX])
{
        int n = snprintf(out, CG_PATH_MAX, "%s/%s/sb-%" PRIu64 "%s%s", mnt, l->root, id,
                         file ? "/" : "", file ? file : "");
        return n < 0 || n >= CG_PATH_MAX ? -ENAMETOOLONG : 0;
}

/* Value of `key` in a "key value\n" file such as cgroup.events; -1 if absent. */
static long long kv_lookup(const char *text, const char *key)
{
        size_t klen = strlen(key);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (!strncmp(p, key, klen) && p[klen] == ' ')
                        return strtoll(p + klen + 1, NULL, 10);
        }
        return -1;
}

/* ---- layout ---- */

static bool is_fs(const char *path, long magic)
{
        struct statfs sf;
        return statfs(path, &sf) == 0 && (long)sf.f_type == magic;
}

static bool cg_root_is_valid(const char *root)
{
        char tmp[128];
        size_t len = strlen(root);
        if (len == 0 || len >= sizeof(tmp) || root[0] == '/' || root[len - 1] == '/')
                return false;
        memcpy(tmp, root, len + 1);
        char *save = NULL;
        for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (!name_is_valid(c) || !strcmp(c, ".") || !strcmp(c, ".."))
                        return false;
        }
        return strstr(root, "//") == NULL;
}

int cg_detect(struct cg_layout *l, const char *root, struct sbx_error *err)
{
        memset(l, 0, sizeof(*l));
        if (!root)
                root = "sandboxd";
        if (!cg_root_is_valid(root))
                return sbx_error_set(err, EINVAL, "invalid cgroup root `%s`", root);
        snprintf(l->root, sizeof(l->root), "%s", root);

        if (is_fs(CG_MNT, CGROUP2_SUPER_MAGIC)) {
                l->pure_v2 = true;
                snprintf(l->v2, sizeof(l->v2), "%s", CG_MNT);
                return 0;
        }
        if (is_fs(CG_MNT "/unified", CGROUP2_SUPER_MAGIC))
                snprintf(l->v2, sizeof(l->v2), "%s", CG_MNT "/unified");
        bool any = l->v2[0] != '\0';
        for (int i = 0; i < CG_V1_COUNT; i++) {
                char p[64];
                snprintf(p, sizeof(p), CG_MNT "/%s", cg_v1_names[i]);
                if (is_fs(p, CGROUP_SUPER_MAGIC)) {
                        snprintf(l->v1[i], sizeof(l->v1[i]), "%s", p);
                        any = true;
                }
        }
        if (!any)
                return sbx_error_set(err, ENOTSUP, "no cgroup hierarchy under " CG_MNT);
        return 0;
}

/* Every hierarchy of the layout, v2 first; returns how many. */
static int cg_mounts(const struct cg_layout *l, const char *out[CG_V1_COUNT + 1])
{
        int n = 0;
        if (l->v2[0])
                out[n++] = l->v2;
        for (int i = 0; i < CG_V1_COUNT; i++)
                if (l->v1[i][0])
                        out[n++] = l->v1[i];
        return n;
}

/* ---- creation and limits ---- */

static int cg2_enable_at(const char *dir, struct sbx_error *err)
{
        static const char *const wanted[] = {"memory", "pids", "cpu"};
        char file[CG_PATH_MAX + 32], avail[512];
        snprintf(file, sizeof(file), "%s/cgroup.controllers", dir);
        ssize_t n = cg_read(file, avail, sizeof(avail));
        if (n < 0)
                return sbx_error_set(err, (int)-n, "read `%s`", file);
        snprintf(file, sizeof(file), "%s/cgroup.subtree_control", dir);
        for (size_t w = 0; w < ARRAY_SIZE(wanted); w++) {
                char tok[16];
                if (!strstr(avail, wanted[w]))
                        continue;
                snprintf(tok, sizeof(tok), "+%s", wanted[w]);
                int r = cg_write(file, tok);
                if (r < 0)
                        return sbx_error_set(err, -r, "write `%s` to `%s`", tok, file);
        }
        return 0;
}

/* Pure v2: enable memory, pids and cpu for the children of every level
 * from the mount point down to <root>. Controllers the host lacks are
 * skipped; a limit on one of them fails later with a clear error. */
static int cg2_enable_controllers(const struct cg_layout *l, struct sbx_error *err)
{
        int r = cg2_enable_at(l->v2, err);
        size_t rlen = strlen(l->root);
        for (size_t i = 1; r >= 0 && i <= rlen; i++) {
                if (i < rlen && l->root[i] != '/')
                        continue;
                char dir[CG_PATH_MAX];
                snprintf(dir, sizeof(dir), "%s/%.*s", l->v2, (int)i, l->root);
                r = cg2_enable_at(dir, err);
        }
        return r;
}

static int cg_set(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file,
                  const char *value, bool optional, struct sbx_error *err)
{
        char p[CG_PATH_MAX];
        int r = cg_path(l, mnt, id, file, p);
        if (r >= 0)
                r = cg_write(p, value);
        if (r == -ENOENT && optional)
                return 0;
        if (r == -ENOENT && file && strchr(file, '.') && strncmp(file, "cgroup.", 7))
                return sbx_error_set(err, ENOTSUP, "cgroup controller for %s not available (%s)",
                                     file, p);
        if (r < 0)
                return sbx_error_set(err, -r, "write `%s` to `%s`", value, p);
        return 0;
}

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
static int cg1_set_socket_memory(const struct cg_layout *l, uint64_t id, uint64_t bytes,
                                 struct sbx_error *err)
{
        char v[32] = "-1";
        if (bytes)
                snprintf(v, sizeof(v), "%" PRIu64, MAX(bytes / 4, (uint64_t)4 << 20));
        return cg_set(l, l->v1[CG_V1_MEMORY], id, "memory.kmem.tcp.limit_in_bytes", v, true, err);
}

static int cg1_set_memory(const struct cg_layout *l, uint64_t id, uint64_t bytes,
                          struct sbx_error *err)
{
        const char *mnt = l->v1[CG_V1_MEMORY];
        char p[CG_PATH_MAX], v[32];
        int r = cg_path(l, mnt, id, "memory.memsw.limit_in_bytes", p);
        if (r < 0)
                return sbx_error_set(err, -r, "cgroup path");
        bool memsw = path_exists(p);
        if (!bytes) {
                /* memsw must stay >= limit: raise memsw first. */
                if (memsw &&
                    (r = cg_set(l, mnt, id, "memory.memsw.limit_in_bytes", "-1", false, err)) < 0)
                        return r;
                if ((r = cg_set(l, mnt, id, "memory.limit_in_bytes", "-1", false, err)) < 0)
                        return r;
                return cg1_set_socket_memory(l, id, 0, err);
        }
        snprintf(v, sizeof(v), "%" PRIu64, bytes);
        r = cg_path(l, mnt, id, "memory.limit_in_bytes", p);
        if (r >= 0)
                r = cg_write(p, v);
        if (r == -EINVAL && memsw) {
                /* Raising above an old memsw value: memsw first, then retry. */
                if ((r = cg_set(l, mnt, id, "memory.memsw.limit_in_bytes", v, false, err)) < 0)
                        return r;
                r = cg_write(p, v);
        }
        if (r < 0)
                return sbx_error_set(err, -r, "write `%s` to `%s`", v, p);
        /* Same value for memory+swap, so swap cannot extend the limit. */
        if (memsw && (r = cg_set(l, mnt, id, "memory.memsw.limit_in_bytes", v, false, err)) < 0)
                return r;
        return cg1_set_socket_memory(l, id, bytes, err);
}

static int cg1_limits(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
                      struct sbx_error *err)
{
        char v[32];
        int r;
        if (l->v1[CG_V1_MEMORY][0]) {
                if ((r = cg1_set_memory(l, id, lim->memory_bytes, err)) < 0)
                        return r;
        } else if (lim->memory_bytes) {
                return sbx_error_set(err, ENOTSUP, "memory limit: no memory cgroup");
        }
        if (l->v1[CG_V1_PIDS][0]) {
                if (lim->pids)
                        snprintf(v, sizeof(v), "%" PRIu64, lim->pids);
                else
                        snprintf(v, sizeof(v), "max");
                if ((r = cg_set(l, l->v1[CG_V1_PIDS], id, "pids.max", v, false, err)) < 0)
                        return r;
        } else if (lim->pids) {
                return sbx_error_set(err, ENOTSUP, "pids limit: no pids cgroup");
        }
        if (l->v1[CG_V1_CPU][0]) {
                uint64_t s = lim->cpu_shares ? lim->cpu_shares : 1024;
                s = MAX(s, 2);
                s = MIN(s, 262144);
                snprintf(v, sizeof(v), "%" PRIu64, s);
                if ((r = cg_set(l, l->v1[CG_V1_CPU], id, "cpu.shares", v, !lim->cpu_shares, err)) <
                    0)
                        return r;
        }
        return 0;
}

static int cg2_limits(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
                      struct sbx_error *err)
{
        char v[32];
        int r;
        if (lim->memory_bytes)
                snprintf(v, sizeof(v), "%" PRIu64, lim->memory_bytes);
        else
                snprintf(v, sizeof(v), "max");
        if ((r = cg_set(l, l->v2, id, "memory.max", v, !lim->memory_bytes, err)) < 0)
                return r;
        /* No swap beyond the memory limit. */
        if ((r = cg_set(l, l->v2, id, "memory.swap.max", lim->memory_bytes ? "0" : "max", true,
                        err)) < 0)
                return r;
        if (lim->pids)
                snprintf(v, sizeof(v), "%" PRIu64, lim->pids);
        else
                snprintf(v, sizeof(v), "max");
        if ((r = cg_set(l, l->v2, id, "pids.max", v, !lim->pids, err)) < 0)
                return r;
        /* cpu.shares [2, 262144] -> cpu.weight [1, 10000], as runc converts. */
        uint64_t w = 100;
        if (lim->cpu_shares) {
                uint64_t s = MIN(MAX(lim->cpu_shares, 2), 262144);
                w = 1 + ((s - 2) * 9999) / 262142;
        }
        snprintf(v, sizeof(v), "%" PRIu64, w);
        return cg_set(l, l->v2, id, "cpu.weight", v, !lim->cpu_shares, err);
}

static bool cg_dir_populated(const struct cg_layout *l, const char *mnt, uint64_t id, bool v2)
{
        char p[CG_PATH_MAX], text[256];
        if (cg_path(l, mnt, id, v2 ? "cgroup.events" : "cgroup.procs", p) < 0)
                return false;
        if (cg_read(p, text, sizeof(text)) < 0)
                return false;
        if (v2)
                return kv_lookup(text, "populated") > 0;
        return text[0] != '\0';
}

bool cg_populated(const struct cg_layout *l, uint64_t id)
{
        if (l->v2[0]) {
                char p[CG_PATH_MAX];
                if (cg_path(l, l->v2, id, "cgroup.events", p) == 0 && path_exists(p))
                        return cg_dir_populated(l, l->v2, id, true);
        }
        for (int i = 0; i < CG_V1_COUNT; i++)
                if (l->v1[i][0] && cg_dir_populated(l, l->v1[i], id, false))
                        return true;
        return false;
}

int cg_create(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
              struct sbx_error *err)
{
        const char *mnts[CG_V1_COUNT + 1];
        int n = cg_mounts(l, mnts);
        char p[CG_PATH_MAX];
        int r;

        for (int i = 0; i < n; i++) {
                snprintf(p, sizeof(p), "%s/%s", mnts[i], l->root);
                if ((r = mkdir_p(p, 0755)) < 0)
                        return sbx_error_set(err, -r, "create cgroup `%s`", p);
        }
        if (l->pure_v2 && (r = cg2_enable_controllers(l, err)) < 0)
                return r;
        for (int i = 0; i < n; i++) {
                if ((r = cg_path(l, mnts[i], id, NULL, p)) < 0)
                        return sbx_error_set(err, -r, "cgroup path");
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return sbx_error_set(err, errno, "create cgroup `%s`", p);
        }
        /* Starting a sandbox that still runs is a caller bug: refuse rather
         * than mix two generations of processes in one cgroup. */
        if (cg_populated(l, id))
                return sbx_error_set(
                    err, EBUSY, "sandbox %" PRIu64 " still has live processes in its cgroup", id);
        /* A process joining a frozen cgroup freezes: thaw any leftover state. */
        if (l->v2[0] && (r = cg_set(l, l->v2, id, "cgroup.freeze", "0", true, err)) < 0)
                return r;
        if (l->v1[CG_V1_FREEZER][0] &&
            (r = cg_set(l, l->v1[CG_V1_FREEZER], id, "freezer.state", "THAWED", false, err)) < 0)
                return r;
        return l->pure_v2 ? cg2_limits(l, id, lim, err) : cg1_limits(l, id, lim, err);
}

int cg_attach(const struct cg_layout *l, uint64_t id, pid_t pid, struct sbx_error *err)
{
        const char *mnts[CG_V1_COUNT + 1];
        int n = cg_mounts(l, mnts);
        char v[24];
        snprintf(v, sizeof(v), "%d", (int)pid);
        for (int i = 0; i < n; i++) {
                int r = cg_set(l, mnts[i], id, "cgroup.procs", v, false, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- freezer ---- */

static int cg2_wait_frozen(const struct cg_layout *l, uint64_t id, long want, struct sbx_error *err)
{
        char p[CG_PATH_MAX], text[256];
        if (cg_path(l, l->v2, id, "cgroup.events", p) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "cgroup path");
        int64_t deadline = mono_ms() + CG_WAIT_MS;
        for (unsigned delay = 1;; delay = MIN(delay * 2, 20)) {
                ssize_t r = cg_read(p, text, sizeof(text));
                if (r < 0)
                        return sbx_error_set(err, (int)-r, "read `%s`", p);
                if (kv_lookup(text, "frozen") == want)
                        return 0;
                if (mono_ms() > deadline)
                        return sbx_error_set(err, ETIMEDOUT, "cgroup %s did not become %s", p,
                                             want ? "frozen" : "thawed");
                sleep_ms(delay);
        }
}

static bool cg2_has(const struct cg_layout *l, uint64_t id, const char *file)
{
        char p[CG_PATH_MAX];
        return l->v2[0] && cg_path(l, l->v2, id, file, p) == 0 && path_exists(p);
}

/* v1 can stay in FREEZING while tasks fork; like runc, retry, and thaw
 * now and then so the stragglers can get to a freezable point. */
static int cg1_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        char p[CG_PATH_MAX], state[64];
        if (cg_path(l, l->v1[CG_V1_FREEZER], id, "freezer.state", p) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "cgroup path");
        for (int i = 0; i < 1000; i++) {
                if (i % 50 == 49) {
                        cg_write(p, "THAWED");
                        sleep_ms(10);
                }
                int r = cg_write(p, "FROZEN");
                if (r < 0)
                        return sbx_error_set(err, -r, "write FROZEN to `%s`", p);
                if (i % 25 == 24)
                        sleep_ms(10);
                ssize_t n = cg_read(p, state, sizeof(state));
                if (n < 0)
                        return sbx_error_set(err, (int)-n, "read `%s`", p);
                if (!strncmp(state, "FROZEN", 6))
                        return 0;
        }
        cg_write(p, "THAWED");
        return sbx_error_set(err, EBUSY, "unable to freeze `%s`", p);
}

int cg_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        if (cg2_has(l, id, "cgroup.freeze")) {
                int r = cg_set(l, l->v2, id, "cgroup.freeze", "1", false, err);
                if (r < 0)
                        return r;
                r = cg2_wait_frozen(l, id, 1, err);
                if (r < 0)
                        cg_set(l, l->v2, id, "cgroup.freeze", "0", true, NULL);
                return r;
        }
        if (l->v1[CG_V1_FREEZER][0])
                return cg1_freeze(l, id, err);
        return sbx_error_set(err, ENOTSUP, "no cgroup freezer for sandbox %" PRIu64, id);
}

int cg_thaw(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        bool done = false;
        int r;
        if (l->v1[CG_V1_FREEZER][0]) {
                if ((r = cg_set(l, l->v1[CG_V1_FREEZER], id, "freezer.state", "THAWED", false,
                                err)) < 0)
                        return r;
                done = true;
        }
        if (cg2_has(l, id, "cgroup.freeze")) {
                if ((r = cg_set(l, l->v2, id, "cgroup.freeze", "0", false, err)) < 0)
                        return r;
                return cg2_wait_frozen(l, id, 0, err);
        }
        if (!done)
                return sbx_error_set(err, ENOTSUP, "no cgroup freezer for sandbox %" PRIu64, id);
        return 0;
}

/* ---- kill ---- */

/* SIGKILL every pid listed in a v1 cgroup.procs; how many were listed. */
static int cg1_kill_listed(const struct cg_layout *l, const char *mnt, uint64_t id)
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

static const char *cg1_any(const struct cg_layout *l)
{
        for (int i = 0; i < CG_V1_COUNT; i++)
                if (l->v1[i][0])
                        return l->v1[i];
        return NULL;
}

/* v1 without cgroup.kill: freeze so nothing forks or exits under us, kill
 * the listed pids, thaw (a v1-frozen task ignores SIGKILL until thawed). */
static void cg1_kill_round(const struct cg_layout *l, uint64_t id)
{
        bool frozen = l->v1[CG_V1_FREEZER][0] && cg1_freeze(l, id, NULL) == 0;
        const char *mnt = frozen ? l->v1[CG_V1_FREEZER] : cg1_any(l);
        if (mnt)
                cg1_kill_listed(l, mnt, id);
        if (l->v1[CG_V1_FREEZER][0])
                cg_set(l, l->v1[CG_V1_FREEZER], id, "freezer.state", "THAWED", true, NULL);
}

int cg_kill_all(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        bool v2kill = cg2_has(l, id, "cgroup.kill");
        int64_t deadline = mono_ms() + CG_WAIT_MS;
        unsigned delay = 1;

        while (cg_populated(l, id)) {
                if (mono_ms() > deadline)
                        return sbx_error_set(
                            err, ETIMEDOUT, "processes of sandbox %" PRIu64 " survive SIGKILL", id);
                if (v2kill) {
                        /* Kills every task, including ones forking right now.
                         * Thaw v1 too: a v1-frozen task ignores SIGKILL. */
                        int r = cg_set(l, l->v2, id, "cgroup.kill", "1", false, err);
                        if (r < 0 && r != -ENOENT)
                                return r;
                        if (l->v1[CG_V1_FREEZER][0])
                                cg_set(l, l->v1[CG_V1_FREEZER], id, "freezer.state", "THAWED", true,
                                       NULL);
                } else {
                        cg1_kill_round(l, id);
                }
                sleep_ms(delay);
                delay = MIN(delay * 2, 20);
        }
        /* Leave the cgroup thawed for the next start. */
        if (cg2_has(l, id, "cgroup.freeze"))
                cg_set(l, l->v2, id, "cgroup.freeze", "0", true, NULL);
        return 0;
}

int cg_remove(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        const char *mnts[CG_V1_COUNT + 1];
        int n = cg_mounts(l, mnts);
        int ret = 0;
        for (int i = 0; i < n; i++) {
                char p[CG_PATH_MAX];
                if (cg_path(l, mnts[i], id, NULL, p) < 0)
                        continue;
                /* Dying tasks can keep a cgroup busy for a moment after it
                 * reads as empty. */
                for (int tries = 0;; tries++) {
                        if (rmdir(p) == 0 || errno == ENOENT)
                                break;
                        if (errno != EBUSY || tries >= 100) {
                                ret = sbx_error_set(err, errno, "remove cgroup `%s`", p);
                                break;
                        }
                        sleep_ms(10);
                }
        }
        return ret;
}

bool cg_any_populated(const struct cg_layout *l)
{
        char p[CG_PATH_MAX], text[256];
        /* v2 counts the whole subtree in cgroup.events. */
        if (l->v2[0]) {
                snprintf(p, sizeof(p), "%s/%s/cgroup.events", l->v2, l->root);
                ssize_t n = cg_read(p, text, sizeof(text));
                if (n < 0)
                        return n != -ENOENT;
                return kv_lookup(text, "populated") != 0;
        }
        /* v1 only: every sb-* directory of one hierarchy. */
        const char *mnt = cg1_any(l);
        snprintf(p, sizeof(p), "%s/%s", mnt ? mnt : "", l->root);
        DIR *d = mnt ? opendir(p) : NULL;
        if (!d)
                return mnt && errno != ENOENT;
        bool any = false;
        struct dirent *de;
        uint64_t id;
        while (!any && (de = readdir(d)))
                if (sscanf(de->d_name, "sb-%" SCNu64, &id) == 1)
                        any = cg_dir_populated(l, mnt, id, false);
        closedir(d);
        return any;
}
