/* SPDX-License-Identifier: MIT */
/* Checkpoints and forks (manager.h). A sandbox's checkpoint lives in its
 * own dir (MGR_CHECKPOINT_DIR); a new one is made beside it and replaces it
 * only once complete, so a failed save keeps the old. A fork copies it
 * (cp -a --reflink=auto, under the source's lock, so never half of a
 * replacement) into a dir of its own and starts from it. */
#include "manager-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/names.h"
#include "../common/tool.h"

static int ckpt_path(const struct sandbox *sb, const char *suffix, char out[PATH_MAX])
{
        return path_printf(out, PATH_MAX, "%s/" MGR_CHECKPOINT_DIR "%s", sb->dir, suffix);
}

bool sandbox_has_checkpoint(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        char p[PATH_MAX];
        return (rt_caps(m->rt, &spec) & RT_CAP_CHECKPOINT) && ckpt_path(sb, "/image", p) == 0 &&
               access(p, F_OK) == 0;
}

static uint64_t tree_bytes;

static int add_bytes(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)path;
        (void)ftw;
        if (flag == FTW_F)
                tree_bytes += (uint64_t)st->st_blocks * 512;
        return 0;
}

/* The blocks a tree takes (nftw keeps one walk at a time: the caller
 * holds the sandbox's lock, and the counter is only read under it). */
static uint64_t du(const char *path)
{
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        tree_bytes = 0;
        nftw(path, add_bytes, 16, FTW_PHYS | FTW_MOUNT);
        uint64_t n = tree_bytes;
        pthread_mutex_unlock(&lock);
        return n;
}

static int save_locked(struct manager *m, struct sandbox *sb, bool keep_running,
                       struct mgr_checkpoint_info *ret, struct sbx_error *err)
{
        struct rt_spec spec;
        char rootfs[PATH_MAX]; /* a keep-running save starts it again */
        sandbox_spec(m, sb, rootfs, &spec);
        if (!(rt_caps(m->rt, &spec) & RT_CAP_CHECKPOINT))
                return sbx_error_say(err, ENOTSUP, "sandbox class '%s' cannot checkpoint",
                                     sb->rec.sandbox_class),
                       -ENOTSUP;
        char cur[PATH_MAX], next[PATH_MAX];
        if (ckpt_path(sb, "", cur) < 0 || ckpt_path(sb, ".new", next) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "checkpoint path");
        rm_rf_at(AT_FDCWD, next);
        if (mkdir(next, 0700) < 0)
                return sbx_error_set(err, errno, "create the checkpoint dir");
        int64_t t0 = mono_ms();
        int r = rt_checkpoint(m->rt, &spec, next, keep_running ? RT_CKPT_KEEP_RUNNING : 0, err);
        if (r < 0) {
                rm_rf_at(AT_FDCWD, next);
                if (!rt_is_alive(m->rt, &spec))
                        sandbox_set_state(m, sb, SBX_STOPPED, "checkpoint failed");
                log_warn("sandbox name=%s: checkpoint failed: %s", sb->rec.name, err->msg);
                return -EHOSTDOWN;
        }
        int64_t took = mono_ms() - t0;
        rm_rf_at(AT_FDCWD, cur);
        if (rename(next, cur) < 0)
                return sbx_error_set(err, errno, "keep the checkpoint");
        *ret = (struct mgr_checkpoint_info){
            .size_bytes = du(cur), .duration_ms = took, .created_at = now_ms()};
        if (!keep_running)
                sandbox_set_state(m, sb, SBX_STOPPED, "checkpoint");
        log_info("sandbox name=%s: checkpoint of %llu bytes in %lld ms", sb->rec.name,
                 (unsigned long long)ret->size_bytes, (long long)took);
        return 0;
}

int mgr_checkpoint(struct manager *m, struct sandbox *sb, bool keep_running,
                   struct mgr_checkpoint_info *ret, struct sbx_error *err)
{
        pthread_mutex_lock(&sb->lock);
        int r = atomic_load(&sb->gone) ? -ENOENT : 0;
        if (r == 0)
                r = sandbox_ensure_running_locked(m, sb, "checkpoint", err);
        if (r == 0)
                r = save_locked(m, sb, keep_running, ret, err);
        if (r == 0)
                sandbox_touch_locked(m, sb);
        pthread_mutex_unlock(&sb->lock);
        return r;
}

/* A copy of sb's checkpoint in a new dir beside it, for a fork. */
static int copy_checkpoint(struct manager *m, struct sandbox *sb, char out[PATH_MAX],
                           struct sbx_error *err)
{
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                rnd = (uint64_t)mono_us();
        char src[PATH_MAX];
        if (ckpt_path(sb, "", src) < 0 ||
            path_printf(out, PATH_MAX, "%s/fork-%016llx", sb->dir, (unsigned long long)rnd) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "checkpoint path");
        pthread_mutex_lock(&sb->lock);
        int r = sandbox_has_checkpoint(m, sb) ? 0 : -ENOENT;
        if (r < 0)
                sbx_error_say(err, ENOENT, "sandbox '%s' has no checkpoint (POST .../checkpoint)",
                              sb->rec.name);
        char text[256] = "";
        const char *const argv[] = {"cp", "-a", "--reflink=auto", src, out, NULL};
        struct tool_run t = {.argv = argv,
                             .envp = tool_plain_env,
                             .fd3 = -1,
                             .err_text = text,
                             .err_len = sizeof(text)};
        if (r == 0 && (r = run_tool(&t, NULL, err)) < 0) {
                rm_rf_at(AT_FDCWD, out);
                r = -EHOSTDOWN;
        }
        pthread_mutex_unlock(&sb->lock);
        return r;
}

int mgr_fork(struct manager *m, struct sandbox *sb, const char *name, uint64_t *ret_id,
             struct mgr_record *ret, struct sbx_error *err)
{
        if (!name || !name_is_valid(name))
                return sbx_error_say(err, EINVAL, "name: not a valid sandbox name"), -EINVAL;
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        if (!(rt_caps(m->rt, &spec) & RT_CAP_CHECKPOINT))
                return manager_files_fork(m, sb, name, ret_id, ret, err);
        char dir[PATH_MAX];
        int r = copy_checkpoint(m, sb, dir, err);
        if (r < 0)
                return r;
        r = manager_fork_attach(m, sb, name, NULL, dir, ret_id, ret, err);
        rm_rf_at(AT_FDCWD, dir); /* moved into the fork, unless it failed */
        return r;
}
