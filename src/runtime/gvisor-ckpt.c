/* SPDX-License-Identifier: MIT */
/* The files of a gvisor checkpoint (gvisor.h). runsc saves the sandbox's
 * kernel, processes and memory into <ckpt>/image; what it keeps of its
 * files are paths of the host's tree, which must be as they were when a
 * restore opens them again. So a checkpoint also keeps, in <ckpt>/files,
 * a copy of its writable layer (upper/, or the disk cap's disk.img, sparse)
 * and of its /tmp, taken while no process of it runs; a restore puts them
 * back first. The copies are made by cp(1): -a keeps every link as a link
 * (nothing the sandbox wrote is followed), owners, modes and times;
 * --reflink=auto shares the blocks where the filesystem can. */
#include "gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/tool.h"

#define GV_DISK_IMAGE "disk.img"

static int cp(const char *const *argv, struct sbx_error *err)
{
        char text[256] = "";
        struct tool_run t = {.argv = argv,
                             .envp = tool_plain_env,
                             .fd3 = -1,
                             .err_text = text,
                             .err_len = sizeof(text)};
        int r = run_tool(&t, NULL, err);
        if (r < 0 && text[0])
                sbx_error_set(err, -r, "copy the sandbox's files: %s", text);
        return r;
}

static int paths(const char *a, const char *a_name, char pa[PATH_MAX], const char *b,
                 const char *b_name, char pb[PATH_MAX], struct sbx_error *err)
{
        if (path_printf(pa, PATH_MAX, "%s/%s", a, a_name) < 0 ||
            path_printf(pb, PATH_MAX, "%s/%s", b, b_name) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "checkpoint path");
        return 0;
}

int gv_ckpt_save(const struct rt_spec *spec, const char *ckpt, enum gv_ckpt_part part,
                 struct sbx_error *err)
{
        char files[PATH_MAX], src[PATH_MAX], dst[PATH_MAX];
        if (path_printf(files, sizeof(files), "%s/files", ckpt) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "checkpoint path");
        if (mkdir(files, 0700) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create `%s`", files);
        if (part == GV_CKPT_TMP) {
                /* The tmpfs's contents, not its mount point. */
                if (paths(spec->dir, "root/tmp/.", src, files, "tmp", dst, err) < 0)
                        return -ENAMETOOLONG;
                if (mkdir(dst, 01777) < 0 && errno != EEXIST)
                        return sbx_error_set(err, errno, "create `%s`", dst);
                const char *const argv[] = {"cp", "-a", "--reflink=auto", src, dst, NULL};
                return cp(argv, err);
        }
        struct stat st;
        if (paths(spec->dir, GV_DISK_IMAGE, src, files, GV_DISK_IMAGE, dst, err) < 0)
                return -ENAMETOOLONG;
        if (lstat(src, &st) == 0 && S_ISREG(st.st_mode)) {
                const char *const argv[] = {"cp", "--sparse=always", "--reflink=auto", src, dst,
                                            NULL};
                return cp(argv, err);
        }
        if (paths(spec->dir, "upper", src, files, "upper", dst, err) < 0)
                return -ENAMETOOLONG;
        const char *const argv[] = {"cp", "-a", "--reflink=auto", src, dst, NULL};
        return cp(argv, err);
}

int gv_ckpt_load(const struct rt_spec *spec, const char *ckpt, enum gv_ckpt_part part,
                 struct sbx_error *err)
{
        char src[PATH_MAX], dst[PATH_MAX], files[PATH_MAX];
        if (path_printf(files, sizeof(files), "%s/files", ckpt) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "checkpoint path");
        if (part == GV_CKPT_TMP) {
                if (paths(files, "tmp/.", src, spec->dir, "root/tmp", dst, err) < 0)
                        return -ENAMETOOLONG;
                const char *const argv[] = {"cp", "-a", "--reflink=auto", src, dst, NULL};
                return access(src, F_OK) == 0 ? cp(argv, err) : 0;
        }
        _cleanup_close_ int dirfd = open(spec->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dirfd < 0)
                return sbx_error_set(err, errno, "open `%s`", spec->dir);
        if (paths(files, GV_DISK_IMAGE, src, spec->dir, GV_DISK_IMAGE, dst, err) < 0)
                return -ENAMETOOLONG;
        if (access(src, F_OK) == 0) {
                if (unlinkat(dirfd, GV_DISK_IMAGE, 0) < 0 && errno != ENOENT)
                        return sbx_error_set(err, errno, "replace the sandbox's disk");
                const char *const argv[] = {"cp", "--sparse=always", "--reflink=auto", src, dst,
                                            NULL};
                return cp(argv, err);
        }
        if (paths(files, "upper", src, spec->dir, "upper", dst, err) < 0)
                return -ENAMETOOLONG;
        /* Nothing is mounted on upper/ or work/ now: rm_rf_at crosses no
         * mount and follows no link anyway. */
        int r = rm_rf_at(dirfd, "upper");
        if (r == 0 || r == -ENOENT)
                r = rm_rf_at(dirfd, "work");
        if (r < 0 && r != -ENOENT)
                return sbx_error_set(err, -r, "replace the sandbox's files");
        const char *const argv[] = {"cp", "-a", "--reflink=auto", src, dst, NULL};
        return cp(argv, err);
}
