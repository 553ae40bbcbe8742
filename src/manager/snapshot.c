/* SPDX-License-Identifier: MIT */
/* Snapshots (manager.h): a sandbox's files, frozen for the moment it takes,
 * as a new image (runtime/snapshot.c makes it). */
#include "manager-internal.h"

#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/names.h"

/* What a snapshot's freeze checks and holds: the first pass runs with the
 * sandbox unlocked (its calls go on), the freeze takes sb->lock again and
 * holds it through the second pass to the thaw. */
struct freezer {
        struct manager *m;
        struct sandbox *sb;
        struct rt_spec spec;
        pid_t init_pid; /* the incarnation the first pass read */
        struct sbx_error thaw_err;
        bool thaw_failed;
};

static int freeze_hook(void *ctx, struct sbx_error *err)
{
        struct freezer *f = ctx;
        struct sandbox *sb = f->sb;
        pthread_mutex_lock(&sb->lock);
        int r = 0;
        if (atomic_load(&sb->gone))
                r = sbx_error_say(err, ENOENT, "the sandbox was deleted during the snapshot");
        else if (sb->rec.state != SBX_RUNNING || sb->init_pid != f->init_pid)
                r = sbx_error_say(err, EAGAIN,
                                  "the sandbox stopped during the snapshot: take it again");
        if (r == 0)
                r = rt_freeze(f->m->rt, &f->spec, err);
        if (r < 0)
                pthread_mutex_unlock(&sb->lock);
        return r;
}

static void thaw_hook(void *ctx)
{
        struct freezer *f = ctx;
        if (rt_thaw(f->m->rt, &f->spec, &f->thaw_err) < 0) {
                /* Frozen for good is worse than a failed snapshot: say it. */
                log_error("sandbox %s: thaw after a snapshot: %s", f->sb->rec.name,
                          f->thaw_err.msg);
                f->thaw_failed = true;
        }
        sandbox_touch_locked(f->m, f->sb);
        pthread_mutex_unlock(&f->sb->lock);
}

/* The files are copied while the sandbox runs (and while other calls to it
 * go on), then again, frozen, what changed meanwhile (rt_image_snapshot's
 * two passes): the freeze lasts what the sandbox changed during the copy,
 * not the copy. */
static int snapshot(struct manager *m, struct sandbox *sb, const char *image, bool ephemeral,
                    struct mgr_snapshot_info *ret, struct sbx_error *err)
{
        if (!image_name_is_valid(image))
                return sbx_error_say(err, EINVAL, "image: not a valid image name"), -EINVAL;
        struct freezer f = {.m = m, .sb = sb};
        int fd = -1;
        pthread_mutex_lock(&sb->lock);
        int r = atomic_load(&sb->gone) ? -ENOENT : 0;
        if (r == 0)
                r = sandbox_ensure_running_locked(m, sb, "snapshot", err);
        /* The root handle first: an agent that gives it cannot answer
         * frozen. */
        if (r == 0)
                r = mgr_root(m, sb, &fd, err);
        if (r == 0) {
                sandbox_spec(m, sb, NULL, &f.spec);
                f.init_pid = sb->init_pid;
                sandbox_touch_locked(m, sb);
        }
        const char *base = sb->rec.image;
        char base_copy[sizeof(sb->rec.image)];
        snprintf(base_copy, sizeof(base_copy), "%s", base);
        uint32_t shift = r == 0 ? mgr_sandbox_root_uid(m, sb) : 0;
        int upper = r == 0 ? rt_upper_open(sb->dir) : -1;
        pthread_mutex_unlock(&sb->lock);
        if (r < 0)
                return r;
        int64_t t0 = mono_ms();
        struct rt_snapshot_hooks hooks = {.freeze = freeze_hook, .thaw = thaw_hook, .ctx = &f};
        struct rt_snapshot_stats st = {0};
        struct rt_snapshot_src src = {.root_fd = fd, .upper_fd = upper, .uid_shift = shift};
        r = rt_image_snapshot(m->images_dir, image, base_copy, &src, ephemeral, &hooks, &st, err);
        if (upper >= 0)
                close(upper);
        if (r >= 0 && f.thaw_failed)
                r = sbx_error_set(err, f.thaw_err.code ? f.thaw_err.code : EIO, "%s",
                                  f.thaw_err.msg);
        close(fd);
        if (r < 0)
                return r;
        *ret = (struct mgr_snapshot_info){
            .size_bytes = st.size_bytes,
            .copied_bytes = st.copied_bytes,
            .copied_files = st.copied_files,
            .linked_files = st.linked_files,
            .duration_ms = (int64_t)st.frozen_ms,
            .created_at = now_ms(),
        };
        log_info("sandbox name=%s snapshot image=%s copied=%llu linked=%llu bytes=%llu "
                 "frozen_ms=%llu ms=%lld",
                 sb->rec.name, image, (unsigned long long)st.copied_files,
                 (unsigned long long)st.linked_files, (unsigned long long)st.copied_bytes,
                 (unsigned long long)st.frozen_ms, (long long)(mono_ms() - t0));
        return 0;
}

int mgr_snapshot(struct manager *m, struct sandbox *sb, const char *image,
                 struct mgr_snapshot_info *ret, struct sbx_error *err)
{
        return snapshot(m, sb, image, false, ret, err);
}

/* A fork of a class that keeps no memory (ns): a snapshot of sb's files as
 * an image of the fork's own, which goes with it, and the fork made from
 * it. */
int manager_files_fork(struct manager *m, struct sandbox *sb, const char *name, uint64_t *ret_id,
                       struct mgr_record *ret, struct sbx_error *err)
{
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                rnd = (uint64_t)mono_us();
        char image[32];
        snprintf(image, sizeof(image), "fork-%016llx", (unsigned long long)rnd);
        struct mgr_snapshot_info info;
        int r = snapshot(m, sb, image, true, &info, err);
        if (r < 0)
                return r == -EEXIST ? -EAGAIN : r;
        r = manager_fork_attach(m, sb, name, image, NULL, ret_id, ret, err);
        if (r < 0) {
                struct sbx_error ignored;
                rt_image_remove(m->images_dir, image, &ignored);
        }
        return r;
}

void manager_image_release(struct manager *m, const struct sandbox *sb)
{
        if (!rt_image_ephemeral(m->images_dir, sb->rec.image))
                return;
        struct sbx_error err = {0};
        if (rt_image_remove(m->images_dir, sb->rec.image, &err) < 0)
                log_warn("sandbox %s: remove its image %s: %s", sb->rec.name, sb->rec.image,
                         err.msg);
}
