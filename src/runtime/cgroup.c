/* SPDX-License-Identifier: MIT */
/* Cgroups of the ns driver: the layout, the sandbox's cgroups in every
 * hierarchy, and the calls that go to the backend of the host
 * (cgroup-v1.c, cgroup-v2.c). See cgroup.h for the layout. */
#include "cgroup.h"

#include <dirent.h>

#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "../common/names.h"
#include "cgroup-internal.h"

#define CG_MNT "/sys/fs/cgroup"

static const char *const cg_v1_names[CG_V1_COUNT] = {
    [CG_V1_MEMORY] = "memory",
    [CG_V1_PIDS] = "pids",
    [CG_V1_CPU] = "cpu",
    [CG_V1_FREEZER] = "freezer",
};

/* ---- shared helpers ---- */

int cg_path(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file,
            char out[CG_PATH_MAX])
{
        return path_printf(out, CG_PATH_MAX, "%s/%s/sb-%" PRIu64 "%s%s", mnt, l->root, id,
                           file ? "/" : "", file ? file : "");
}

bool cg_has(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file)
{
        char p[CG_PATH_MAX];
        return cg_path(l, mnt, id, file, p) == 0 && access(p, F_OK) == 0;
}

long long cg_kv_lookup(const char *text, const char *key)
{
        size_t klen = strlen(key);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
                if (!strncmp(p, key, klen) && p[klen] == ' ')
                        return strtoll(p + klen + 1, NULL, 10);
        }
        return -1;
}

int cg_set(const struct cg_layout *l, const char *mnt, uint64_t id, const char *file,
           const char *value, bool optional, struct sbx_error *err)
{
        char p[CG_PATH_MAX];
        int r = cg_path(l, mnt, id, file, p);
        if (r >= 0)
                r = write_small_at(AT_FDCWD, p, value);
        if (r == -ENOENT && optional)
                return 0;
        if (r == -ENOENT && file && strchr(file, '.') && strncmp(file, "cgroup.", 7))
                return sbx_error_set(err, ENOTSUP, "cgroup controller for %s not available (%s)",
                                     file, p);
        if (r < 0)
                return sbx_error_set(err, -r, "write `%s` to `%s`", value, p);
        return 0;
}

int cg_kill_until_empty(const struct cg_layout *l, uint64_t id, cg_kill_round_fn round,
                        struct sbx_error *err)
{
        int64_t deadline = mono_ms() + CG_WAIT_MS;
        unsigned delay = 1;
        while (l->ops->populated(l, id)) {
                if (mono_ms() > deadline)
                        return sbx_error_set(
                            err, ETIMEDOUT, "processes of sandbox %" PRIu64 " survive SIGKILL", id);
                int r = round ? round(l, id, err) : 0;
                if (r < 0)
                        return r;
                sleep_ms(delay);
                delay = MIN(delay * 2, 20);
        }
        return 0;
}

int cg_no_freezer(uint64_t id, struct sbx_error *err)
{
        return sbx_error_set(err, ENOTSUP, "no cgroup freezer for sandbox %" PRIu64, id);
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
                snprintf(l->v2, sizeof(l->v2), "%s", CG_MNT);
                l->ops = &cg_v2_ops;
                return 0;
        }
        l->ops = &cg_v1_ops;
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

/* ---- the sandbox's cgroups in every hierarchy ---- */

/* A v2 cgroup that was ever killed (cgroup.kill) kills a child made into
 * it with CLONE_INTO_CGROUP at once on this kernel (its kill count is
 * compared with the parent's): an old, empty one is made anew. One with a
 * process in it stays (the caller refuses it). */
static int cg_v2_fresh(const char *p, struct sbx_error *err)
{
        if (rmdir(p) < 0 && errno != ENOENT && errno != EBUSY)
                return sbx_error_set(err, errno, "remove the old cgroup `%s`", p);
        return 0;
}

static int cg_make_dirs(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        const char *mnts[CG_V1_COUNT + 1];
        int n = cg_mounts(l, mnts);
        char p[CG_PATH_MAX];
        int r;

        for (int i = 0; i < n; i++) {
                if ((r = path_join(p, sizeof(p), mnts[i], l->root)) < 0 ||
                    (r = mkdir_p(p, 0755)) < 0)
                        return sbx_error_set(err, -r, "create cgroup `%s/%s`", mnts[i], l->root);
        }
        if (l->ops->prepare && (r = l->ops->prepare(l, err)) < 0)
                return r;
        for (int i = 0; i < n; i++) {
                if ((r = cg_path(l, mnts[i], id, NULL, p)) < 0)
                        return sbx_error_set(err, -r, "cgroup path");
                if (mnts[i] == l->v2 && (r = cg_v2_fresh(p, err)) < 0)
                        return r;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return sbx_error_set(err, errno, "create cgroup `%s`", p);
        }
        return 0;
}

int cg_create(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
              struct sbx_error *err)
{
        int r = cg_make_dirs(l, id, err);
        if (r < 0)
                return r;
        /* Starting a sandbox that still runs is a caller bug: refuse rather
         * than mix two generations of processes in one cgroup. */
        if (cg_populated(l, id))
                return sbx_error_set(
                    err, EBUSY, "sandbox %" PRIu64 " still has live processes in its cgroup", id);
        /* A process joining a frozen cgroup freezes: thaw any leftover state. */
        if ((r = l->ops->reset(l, id, err)) < 0)
                return r;
        return l->ops->set_limits(l, id, lim, err);
}

int cg_attach(const struct cg_layout *l, uint64_t id, pid_t pid, bool v1, bool v2,
              struct sbx_error *err)
{
        char v[24];
        snprintf(v, sizeof(v), "%d", (int)pid);
        int r = 0;
        if (v2 && l->v2[0] && (r = cg_set(l, l->v2, id, "cgroup.procs", v, false, err)) < 0)
                return r;
        for (int i = 0; v1 && i < CG_V1_COUNT; i++)
                if (l->v1[i][0] && (r = cg_set(l, l->v1[i], id, "cgroup.procs", v, false, err)) < 0)
                        return r;
        return 0;
}

/* ---- spare launchers' cgroups ---- */

static int spare_path(const struct cg_layout *l, const char *mnt, pid_t pid, char out[CG_PATH_MAX])
{
        return path_printf(out, CG_PATH_MAX, "%s/%s/spare-%d", mnt, l->root, (int)pid);
}

bool cg_spares_possible(const struct cg_layout *l)
{
        bool any = false;
        char a[CG_PATH_MAX], b[CG_PATH_MAX], root[CG_PATH_MAX];
        for (int i = 0; i < CG_V1_COUNT; i++) {
                if (!l->v1[i][0])
                        continue;
                if (path_join(root, sizeof(root), l->v1[i], l->root) < 0 ||
                    mkdir_p(root, 0755) < 0 ||
                    path_printf(a, sizeof(a), "%s/.probe-%d", root, (int)getpid()) < 0 ||
                    path_printf(b, sizeof(b), "%s/.probe-%d-b", root, (int)getpid()) < 0 ||
                    (mkdir(a, 0755) < 0 && errno != EEXIST))
                        return false;
                bool ok = rename(a, b) == 0;
                rmdir(ok ? b : a);
                if (!ok)
                        return false;
                any = true;
        }
        return any;
}

int cg_spare_join(const struct cg_layout *l, struct sbx_error *err)
{
        char p[CG_PATH_MAX], root[CG_PATH_MAX];
        for (int i = 0; i < CG_V1_COUNT; i++) {
                if (!l->v1[i][0])
                        continue;
                int r;
                if ((r = path_join(root, sizeof(root), l->v1[i], l->root)) < 0 ||
                    (r = mkdir_p(root, 0755)) < 0 || (r = spare_path(l, l->v1[i], getpid(), p)) < 0)
                        return sbx_error_set(err, -r, "spare cgroup under `%s`", l->v1[i]);
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return sbx_error_set(err, errno, "create cgroup `%s`", p);
                char procs[CG_PATH_MAX];
                if ((r = path_join(procs, sizeof(procs), p, "cgroup.procs")) < 0 ||
                    (r = write_small_at(AT_FDCWD, procs, "0")) < 0)
                        return sbx_error_set(err, -r, "join `%s`", p);
        }
        return 0;
}

/* The sandbox's v2 cgroup, made anew (its parents as needed). */
static int cg_v2_make(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        char p[CG_PATH_MAX];
        int r;
        if ((r = path_join(p, sizeof(p), l->v2, l->root)) < 0 || (r = mkdir_p(p, 0755)) < 0)
                return sbx_error_set(err, -r, "create cgroup `%s/%s`", l->v2, l->root);
        if (l->ops->prepare && (r = l->ops->prepare(l, err)) < 0)
                return r;
        if ((r = cg_path(l, l->v2, id, NULL, p)) < 0)
                return sbx_error_set(err, -r, "cgroup path");
        if ((r = cg_v2_fresh(p, err)) < 0)
                return r;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create cgroup `%s`", p);
        return 0;
}

int cg_spare_adopt(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
                   struct sbx_error *err)
{
        if (cg_populated(l, id))
                return sbx_error_set(
                    err, EBUSY, "sandbox %" PRIu64 " still has live processes in its cgroup", id);
        char from[CG_PATH_MAX], to[CG_PATH_MAX];
        for (int i = 0; i < CG_V1_COUNT; i++) {
                if (!l->v1[i][0])
                        continue;
                if (spare_path(l, l->v1[i], getpid(), from) < 0 ||
                    cg_path(l, l->v1[i], id, NULL, to) < 0)
                        return sbx_error_set(err, ENAMETOOLONG, "cgroup path");
                if (rmdir(to) < 0 && errno != ENOENT)
                        return sbx_error_set(err, errno, "remove the old cgroup `%s`", to);
                if (rename(from, to) < 0)
                        return sbx_error_set(err, errno, "rename cgroup `%s`", from);
        }
        int r;
        if (l->v2[0] && (r = cg_v2_make(l, id, err)) < 0)
                return r;
        if ((r = l->ops->reset(l, id, err)) < 0)
                return r;
        return l->ops->set_limits(l, id, lim, err);
}

bool cg_spare_remove(const struct cg_layout *l, pid_t pid)
{
        char p[CG_PATH_MAX], root[CG_PATH_MAX];
        bool gone = true;
        for (int i = 0; i < CG_V1_COUNT; i++) {
                if (!l->v1[i][0])
                        continue;
                if (pid > 0) {
                        if (spare_path(l, l->v1[i], pid, p) == 0 && rmdir(p) < 0 && errno != ENOENT)
                                gone = false;
                        continue;
                }
                if (path_join(root, sizeof(root), l->v1[i], l->root) < 0)
                        continue;
                DIR *d = opendir(root);
                struct dirent *de;
                while (d && (de = readdir(d)))
                        if (de->d_type == DT_DIR && !strncmp(de->d_name, "spare-", 6) &&
                            path_join(p, sizeof(p), root, de->d_name) == 0)
                                rmdir(p);
                if (d)
                        closedir(d);
        }
        return gone;
}

int cg_v2_open(const struct cg_layout *l, uint64_t id)
{
        char p[CG_PATH_MAX];
        if (!l->v2[0] || cg_path(l, l->v2, id, NULL, p) < 0)
                return -1;
        return open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* rmdir, retrying: dying tasks can keep a cgroup busy for a moment after
 * it reads as empty. */
static int cg_rmdir(const char *p, struct sbx_error *err)
{
        for (int tries = 0;; tries++) {
                if (rmdir(p) == 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY || tries >= 100)
                        return sbx_error_set(err, errno, "remove cgroup `%s`", p);
                sleep_ms(10);
        }
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
                int r = cg_rmdir(p, err);
                if (r < 0)
                        ret = r;
        }
        return ret;
}

/* ---- what the backend does ---- */

int cg_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        return l->ops->freeze(l, id, err);
}

int cg_thaw(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        return l->ops->thaw(l, id, err);
}

int cg_kill_all(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        return l->ops->kill_all(l, id, err);
}

bool cg_populated(const struct cg_layout *l, uint64_t id)
{
        return l->ops->populated(l, id);
}

bool cg_any_populated(const struct cg_layout *l)
{
        return l->ops->any_populated(l);
}

void cg_remove_root(const struct cg_layout *l)
{
        const char *mnts[CG_V1_COUNT + 1];
        int n = cg_mounts(l, mnts);
        char p[CG_PATH_MAX], c[CG_PATH_MAX];
        for (int i = 0; i < n; i++) {
                if (path_join(p, sizeof(p), mnts[i], l->root) < 0)
                        continue;
                DIR *d = opendir(p);
                struct dirent *de;
                while (d && (de = readdir(d)))
                        if (de->d_type == DT_DIR && strcmp(de->d_name, ".") &&
                            strcmp(de->d_name, "..") && path_join(c, sizeof(c), p, de->d_name) == 0)
                                rmdir(c); /* fails for one with a process in it */
                if (d)
                        closedir(d);
                rmdir(p);
        }
}
