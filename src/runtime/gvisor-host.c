/* SPDX-License-Identifier: MIT */
/* The host side of a gvisor sandbox's files (gvisor.h): its overlay root,
 * its /tmp and its disk, mounted in the daemon's (the host's) mount
 * namespace while it runs, so that runsc's gofer serves them and the file
 * endpoints reach the same tree. Every mount is attached with the new
 * mount API onto an O_PATH fd of a directory of the sandbox dir, a dir
 * only the daemon writes (0700, root): no path a sandbox controls is
 * resolved on the host here. */
#include "gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"

#define GV_TMP_DEFAULT (256ULL << 20)

static int subdir(int dirfd, const char *name, mode_t mode, int *ret, struct sbx_error *err)
{
        if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create %s/ of the sandbox", name);
        int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "open %s/ of the sandbox", name);
        /* A link the image or upper layer put there is never followed: a
         * mount onto it would land wherever it points, on the host
         * (CVE-2021-30465 class). Refused like the ns class's targets. */
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int e = errno;
                close(fd);
                return sbx_error_set(err, e, "stat %s/ of the sandbox", name);
        }
        if (!S_ISDIR(st.st_mode)) {
                bool link = S_ISLNK(st.st_mode);
                close(fd);
                return sbx_error_set(err, link ? ELOOP : ENOTDIR,
                                     "mount target %s of the sandbox is a %s, refusing it", name,
                                     link ? "symlink" : "file of the wrong type");
        }
        *ret = fd;
        return 0;
}

/* Whether name (a directory of dirfd) is a mount point. */
static bool is_mounted(int dirfd, const char *name)
{
        struct statx a, b;
        if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &a) < 0 ||
            statx(dirfd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &b) < 0)
                return false;
        if (a.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
                return a.stx_attributes & STATX_ATTR_MOUNT_ROOT;
        return a.stx_dev_major != b.stx_dev_major || a.stx_dev_minor != b.stx_dev_minor;
}

static int fs_attach(int fs, int target, unsigned attrs, const char *what, struct sbx_error *err)
{
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return sbx_error_set(err, errno, "create the sandbox's %s", what);
        _cleanup_close_ int m = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
        if (m < 0)
                return sbx_error_set(err, errno, "mount the sandbox's %s", what);
        if (move_mount(m, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return sbx_error_set(err, errno, "attach the sandbox's %s", what);
        return 0;
}

/* The overlay: the image below, upper/ (on the disk when capped) above. */
static int mount_root(int dirfd, const struct rt_spec *spec, bool on_disk, struct sbx_error *err)
{
        char upper[PATH_MAX], work[PATH_MAX];
        const char *base = on_disk ? "disk/" : "";
        if (path_printf(upper, sizeof(upper), "%s/%supper", spec->dir, base) < 0 ||
            path_printf(work, sizeof(work), "%s/%swork", spec->dir, base) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir `%s`", spec->dir);
        if (strpbrk(spec->rootfs, ",:\\") || strpbrk(spec->dir, ",:\\"))
                return sbx_error_set(err, EINVAL, "image or sandbox path has `,` `:` or `\\`");
        _cleanup_close_ int target = -1;
        int r = subdir(dirfd, "root", 0755, &target, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs < 0)
                return sbx_error_set(err, errno, "fsopen overlay");
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", "sandboxd", 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir", spec->rootfs, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work, 0) < 0)
                return sbx_error_set(err, errno, "configure the sandbox's overlay");
        return fs_attach(fs, target, MOUNT_ATTR_NODEV, "overlay", err);
}

/* The mount points of the sandbox's own kernel (its proc, sys and dev):
 * on the host they are plain directories of its tree, which the file
 * endpoints must not take for the sandbox's files. An empty read-only
 * tmpfs over each makes them read as empty and refuse writes, as they do
 * through the ns class's view; inside, gVisor mounts its own over them. */
static const char *const masked[] = {"proc", "sys", "dev"};

static int mount_masks(int root, struct sbx_error *err)
{
        for (size_t i = 0; i < ARRAY_SIZE(masked); i++) {
                _cleanup_close_ int target = -1, fs = -1;
                int r = subdir(root, masked[i], 0555, &target, err);
                if (r < 0)
                        return r;
                if ((fs = fsopen("tmpfs", FSOPEN_CLOEXEC)) < 0)
                        return sbx_error_set(err, errno, "fsopen tmpfs");
                if (fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
                    fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0)
                        return sbx_error_set(err, errno, "configure a mask of /%s", masked[i]);
                r = fs_attach(fs, target,
                              MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                  MOUNT_ATTR_NOEXEC,
                              masked[i], err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* /tmp: a tmpfs of its own size (the host enforces it), and the
 * mount points of sandbox-init and its socket directory. */
static int mount_tmp_and_targets(int dirfd, const struct rt_spec *spec, struct sbx_error *err)
{
        _cleanup_close_ int root = openat(dirfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return sbx_error_set(err, errno, "open root/ of the sandbox");
        _cleanup_close_ int tmp = -1, sbx = -1;
        /* Inside the overlay the tree is the sandbox's: open every
         * component without following a link it may have put there. */
        int r = subdir(root, "tmp", 01777, &tmp, err);
        if (r < 0)
                return r;
        uint64_t size = spec->limits.tmp_bytes ? spec->limits.tmp_bytes : GV_TMP_DEFAULT;
        char v[32];
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return sbx_error_set(err, errno, "fsopen tmpfs");
        snprintf(v, sizeof(v), "%" PRIu64, size);
        if (fsconfig(fs, FSCONFIG_SET_STRING, "size", v, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "mode", "1777", 0) < 0)
                return sbx_error_set(err, errno, "configure the sandbox's /tmp");
        snprintf(v, sizeof(v), "%" PRIu64, MAX(size / 4096, 1024));
        if (fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", v, 0) < 0)
                return sbx_error_set(err, errno, "configure the sandbox's /tmp");
        if ((r = fs_attach(fs, tmp, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "/tmp", err)) < 0)
                return r;
        if ((r = mount_masks(root, err)) < 0 || (r = subdir(root, ".sbx", 0755, &sbx, err)) < 0)
                return r;
        _cleanup_close_ int agent = -1;
        if ((r = subdir(sbx, "agent", 0700, &agent, err)) < 0)
                return r;
        int f = openat(sbx, "sandbox-init", O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0555);
        if (f < 0)
                return sbx_error_set(err, errno, "create /.sbx/sandbox-init in the sandbox%s",
                                     errno == ELOOP ? ": a symlink, refusing it" : "");
        close(f);
        return 0;
}

/* Unmount name (a directory of parent, not followed if a link). */
static int unmount_at(int parent, const char *name, struct sbx_error *err)
{
        while (is_mounted(parent, name)) {
                char path[64 + NAME_MAX];
                snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", parent, name);
                if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        return sbx_error_set(err, errno, "unmount %s of the sandbox", name);
        }
        return 0;
}

int gv_host_unmount(int dirfd, struct sbx_error *err)
{
        /* An umount of a path follows links: root/tmp and the masks are
         * the sandbox's, so they go only as mount points of root/. */
        _cleanup_close_ int root =
            openat(dirfd, "root", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r = 0;
        if (root >= 0 && is_mounted(dirfd, "root")) {
                _cleanup_close_ int etc =
                    openat(root, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (etc >= 0)
                        r = unmount_at(etc, "resolv.conf", err);
                if (r == 0)
                        r = unmount_at(root, "tmp", err);
                for (size_t i = 0; r == 0 && i < ARRAY_SIZE(masked); i++)
                        r = unmount_at(root, masked[i], err);
        }
        if (r == 0)
                r = unmount_at(dirfd, "root", err);
        if (r == 0)
                r = unmount_at(dirfd, "disk", err);
        return r;
}

int gv_host_mount(int dirfd, const struct rt_spec *spec, struct sbx_error *err)
{
        int r = gv_host_unmount(dirfd, err);
        if (r < 0)
                return r;
        struct ns_disk disk;
        if ((r = disk_prepare(dirfd, spec, rt_gvisor_driver.name, &disk, err)) < 0)
                return r;
        if (disk.active) {
                if (mkdirat(dirfd, "disk", 0700) < 0 && errno != EEXIST)
                        r = sbx_error_set(err, errno, "create disk/ of the sandbox");
                else
                        r = disk_mount(&disk, dirfd, 0, err);
                disk_release(&disk);
        } else {
                if ((mkdirat(dirfd, "upper", 0755) < 0 && errno != EEXIST) ||
                    (mkdirat(dirfd, "work", 0700) < 0 && errno != EEXIST))
                        r = sbx_error_set(err, errno, "create upper/ of the sandbox");
        }
        if (r < 0 || (r = mount_root(dirfd, spec, disk.active, err)) < 0 ||
            (r = mount_tmp_and_targets(dirfd, spec, err)) < 0) {
                gv_host_unmount(dirfd, NULL);
                return r;
        }
        return 0;
}

int gv_host_root(int dirfd, int *ret_fd, struct sbx_error *err)
{
        if (!is_mounted(dirfd, "root"))
                return sbx_error_set(err, ESTALE, "the sandbox's files are not mounted");
        int fd = openat(dirfd, "root", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "open the sandbox's root");
        *ret_fd = fd;
        return 0;
}
