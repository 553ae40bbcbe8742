/* SPDX-License-Identifier: MIT */
/* Snapshots (manager.h): a sandbox's files, frozen for the moment it takes,
 * as a new image (runtime/snapshot.c makes it). */
#include "manager-internal.h"

#include <stdio.h>
#include <sys/random.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/names.h"

static int snapshot_locked(struct manager *m, struct sandbox *sb, const char *image, bool ephemeral,
                           struct mgr_snapshot_info *ret, struct sbx_error *err)
{
        struct rt_spec spec;
        int fd = -1;
        sandbox_spec(m, sb, NULL, &spec);
        /* The root handle first: an agent that gives it cannot answer
         * frozen. */
        int r = mgr_root(m, sb, &fd, err);
        if (r < 0)
                return r;
        int64_t t0 = mono_ms();
        r = rt_freeze(m->rt, &spec, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        struct rt_snapshot_stats st = {0};
        r = rt_image_snapshot(m->images_dir, image, sb->rec.image, fd, mgr_sandbox_root_uid(m, sb),
                              ephemeral, &st, err);
        struct sbx_error terr = {0};
        if (rt_thaw(m->rt, &spec, &terr) < 0) {
                /* Frozen for good is worse than a failed snapshot: say it. */
                log_error("sandbox %s: thaw after a snapshot: %s", sb->rec.name, terr.msg);
                if (r >= 0)
                        r = sbx_error_set(err, terr.code ? terr.code : EIO, "%s", terr.msg);
        }
        close(fd);
        if (r < 0)
                return r;
        *ret = (struct mgr_snapshot_info){
            .size_bytes = st.size_bytes,
            .copied_bytes = st.copied_bytes,
            .copied_files = st.copied_files,
            .linked_files = st.linked_files,
            .duration_ms = mono_ms() - t0,
            .created_at = now_ms(),
        };
        log_info("sandbox name=%s snapshot image=%s copied=%llu linked=%llu bytes=%llu ms=%lld",
                 sb->rec.name, image, (unsigned long long)st.copied_files,
                 (unsigned long long)st.linked_files, (unsigned long long)st.copied_bytes,
                 (long long)ret->duration_ms);
        return 0;
}

static int snapshot(struct manager *m, struct sandbox *sb, const char *image, bool ephemeral,
                    struct mgr_snapshot_info *ret, struct sbx_error *err)
{
        if (!image_name_is_valid(image))
                return sbx_error_say(err, EINVAL, "image: not a valid image name"), -EINVAL;
        pthread_mutex_lock(&sb->lock);
        int r = atomic_load(&sb->gone) ? -ENOENT : 0;
        if (r == 0)
                r = sandbox_ensure_running_locked(m, sb, "snapshot", err);
        if (r == 0)
                r = snapshot_locked(m, sb, image, ephemeral, ret, err);
        if (r == 0)
                sandbox_touch_locked(m, sb);
        pthread_mutex_unlock(&sb->lock);
        return r;
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
