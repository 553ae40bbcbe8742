/* SPDX-License-Identifier: MIT */
/* The v2 hierarchy: everything on a pure v2 host (cg_v2_ops), and freeze,
 * kill and "populated" on the controller-less unified hierarchy of a
 * hybrid host (the cg2_* calls cgroup-v1.c makes). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cgroup-internal.h"

/* ---- the calls hybrid hosts share ---- */

bool cg2_has(const struct cg_layout *l, uint64_t id, const char *file)
{
        return l->v2[0] && cg_has(l, l->v2, id, file);
}

static int cg2_wait_frozen(const struct cg_layout *l, uint64_t id, long want, struct sbx_error *err)
{
        char p[CG_PATH_MAX], text[256];
        if (cg_path(l, l->v2, id, "cgroup.events", p) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "cgroup path");
        int64_t deadline = mono_ms() + CG_WAIT_MS;
        for (unsigned delay = 1;; delay = MIN(delay * 2, 20)) {
                int r = read_small_at(AT_FDCWD, p, text, sizeof(text));
                if (r < 0)
                        return sbx_error_set(err, -r, "read `%s`", p);
                if (cg_kv_lookup(text, "frozen") == want)
                        return 0;
                if (mono_ms() > deadline)
                        return sbx_error_set(err, ETIMEDOUT, "cgroup %s did not become %s", p,
                                             want ? "frozen" : "thawed");
                sleep_ms(delay);
        }
}

int cg2_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        int r = cg_set(l, l->v2, id, "cgroup.freeze", "1", false, err);
        if (r < 0)
                return r;
        r = cg2_wait_frozen(l, id, 1, err);
        if (r < 0)
                cg_set(l, l->v2, id, "cgroup.freeze", "0", true, NULL);
        return r;
}

int cg2_thaw(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        int r = cg_set(l, l->v2, id, "cgroup.freeze", "0", false, err);
        if (r < 0)
                return r;
        return cg2_wait_frozen(l, id, 0, err);
}

void cg2_leave_thawed(const struct cg_layout *l, uint64_t id)
{
        if (cg2_has(l, id, "cgroup.freeze"))
                cg_set(l, l->v2, id, "cgroup.freeze", "0", true, NULL);
}

int cg2_kill(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        int r = cg_set(l, l->v2, id, "cgroup.kill", "1", false, err);
        return r == -ENOENT ? 0 : r;
}

bool cg2_populated(const struct cg_layout *l, uint64_t id)
{
        char p[CG_PATH_MAX], text[256];
        if (cg_path(l, l->v2, id, "cgroup.events", p) < 0)
                return false;
        if (read_small_at(AT_FDCWD, p, text, sizeof(text)) < 0)
                return false;
        return cg_kv_lookup(text, "populated") > 0;
}

bool cg2_any_populated(const struct cg_layout *l)
{
        char p[CG_PATH_MAX], text[256];
        /* v2 counts the whole subtree in cgroup.events. */
        if (path_printf(p, sizeof(p), "%s/%s/cgroup.events", l->v2, l->root) < 0)
                return true;
        int n = read_small_at(AT_FDCWD, p, text, sizeof(text));
        if (n < 0)
                return n != -ENOENT;
        return cg_kv_lookup(text, "populated") != 0;
}

/* ---- a pure v2 host ---- */

static int enable_at(const char *dir, struct sbx_error *err)
{
        static const char *const wanted[] = {"memory", "pids", "cpu"};
        char file[CG_PATH_MAX + 32], avail[512];
        int r = path_join(file, sizeof(file), dir, "cgroup.controllers");
        if (r < 0)
                return sbx_error_set(err, -r, "cgroup path `%s`", dir);
        if ((r = read_small_at(AT_FDCWD, file, avail, sizeof(avail))) < 0)
                return sbx_error_set(err, -r, "read `%s`", file);
        if ((r = path_join(file, sizeof(file), dir, "cgroup.subtree_control")) < 0)
                return sbx_error_set(err, -r, "cgroup path `%s`", dir);
        for (size_t w = 0; w < ARRAY_SIZE(wanted); w++) {
                char tok[16];
                if (!strstr(avail, wanted[w]))
                        continue;
                snprintf(tok, sizeof(tok), "+%s", wanted[w]);
                if ((r = write_small_at(AT_FDCWD, file, tok)) < 0)
                        return sbx_error_set(err, -r, "write `%s` to `%s`", tok, file);
        }
        return 0;
}

/* Enable memory, pids and cpu for the children of every level from the
 * mount point down to <root>. Controllers the host lacks are skipped; a
 * limit on one of them fails later with a clear error. */
static int v2_prepare(const struct cg_layout *l, struct sbx_error *err)
{
        int r = enable_at(l->v2, err);
        size_t rlen = strlen(l->root);
        for (size_t i = 1; r >= 0 && i <= rlen; i++) {
                if (i < rlen && l->root[i] != '/')
                        continue;
                char dir[CG_PATH_MAX];
                if ((r = path_printf(dir, sizeof(dir), "%s/%.*s", l->v2, (int)i, l->root)) < 0)
                        return sbx_error_set(err, -r, "cgroup path");
                r = enable_at(dir, err);
        }
        return r;
}

static int v2_reset(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        return cg_set(l, l->v2, id, "cgroup.freeze", "0", true, err);
}

static int v2_set_limits(const struct cg_layout *l, uint64_t id, const struct rt_limits *lim,
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

static int v2_freeze(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        if (!cg2_has(l, id, "cgroup.freeze"))
                return cg_no_freezer(id, err);
        return cg2_freeze(l, id, err);
}

static int v2_thaw(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        if (!cg2_has(l, id, "cgroup.freeze"))
                return cg_no_freezer(id, err);
        return cg2_thaw(l, id, err);
}

/* Without cgroup.kill (Linux < 5.14) there is no round: the wait times
 * out unless the processes end by themselves. */
static int v2_kill_all(const struct cg_layout *l, uint64_t id, struct sbx_error *err)
{
        bool kill = cg2_has(l, id, "cgroup.kill");
        int r = cg_kill_until_empty(l, id, kill ? cg2_kill : NULL, err);
        if (r < 0)
                return r;
        /* Leave the cgroup thawed for the next start. */
        cg2_leave_thawed(l, id);
        return 0;
}

static bool v2_populated(const struct cg_layout *l, uint64_t id)
{
        return cg2_has(l, id, "cgroup.events") && cg2_populated(l, id);
}

const struct cg_ops cg_v2_ops = {
    .name = "v2",
    .prepare = v2_prepare,
    .reset = v2_reset,
    .set_limits = v2_set_limits,
    .freeze = v2_freeze,
    .thaw = v2_thaw,
    .kill_all = v2_kill_all,
    .populated = v2_populated,
    .any_populated = cg2_any_populated,
};
