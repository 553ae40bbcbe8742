/* SPDX-License-Identifier: MIT */
/* The ns driver's mounts (mount.h): the sandbox's root and everything
 * under it, made by the mounter in the sandbox's own mount namespace with
 * the new mount API (fsopen, fsmount, open_tree, move_mount). Every target
 * is resolved in the attacker-controlled tree with openat2() and mounted
 * on through its fd, never by path again. */
#include "mount.h"

#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#define NS_TMP_DEFAULT (256ULL << 20)
#define NS_SHM_BYTES (64ULL << 20)

const char *const ns_dev_nodes[NS_DEV_NODES] = {"null", "zero", "full", "random", "urandom", "tty"};

/* ---- helpers: paths inside the sandbox root ---- */

static int openat2_path(int dirfd, const char *path, int *ret)
{
        /* Every component is attacker-controlled (image or upper layer):
         * stay inside the root, follow no symlink and no magic link, cross
         * no mount. A symlinked target then fails instead of redirecting a
         * mount onto the host (CVE-2021-30465, CVE-2025-31133). */
        struct open_how how = {
            .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
            .resolve =
                RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        *ret = (int)fd;
        return 0;
}

/* Resolve `path` under dirfd to an O_PATH fd of the expected type
 * (S_IFDIR, S_IFREG, or 0 for either). */
static int resolve_target(int dirfd, const char *where, const char *path, mode_t type, int *ret,
                          struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = openat2_path(dirfd, path, &fd);
        if (r == -ELOOP || r == -EXDEV)
                return sbx_error_set(err, -r, "mount target %s/%s escapes the sandbox root", where,
                                     path);
        if (r < 0)
                return sbx_error_set(err, -r, "resolve mount target %s/%s", where, path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return sbx_error_set(err, errno, "stat %s/%s", where, path);
        mode_t fmt = st.st_mode & S_IFMT;
        bool ok = type ? fmt == type : fmt == S_IFDIR || fmt == S_IFREG;
        if (!ok)
                return sbx_error_set(err, fmt == S_IFLNK ? ELOOP : ENOTDIR,
                                     "mount target %s/%s is a %s, refusing it", where, path,
                                     fmt == S_IFLNK ? "symlink" : "file of the wrong type");
        *ret = TAKE_FD(fd);
        return 0;
}

/* A top-level directory of the rootfs, created (on the upper layer) when
 * missing; owned by uid:uid when created and uid != -1. */
static int rootfs_dir(int rootfd, const char *name, mode_t mode, uid_t uid, int *ret,
                      struct sbx_error *err)
{
        bool created = mkdirat(rootfd, name, mode) == 0;
        if (!created && errno != EEXIST)
                return sbx_error_set(err, errno, "create /%s in the sandbox", name);
        int r = resolve_target(rootfd, "", name, S_IFDIR, ret, err);
        if (r < 0)
                return r;
        if (created && uid != (uid_t)-1 &&
            fchownat(*ret, "", uid, (gid_t)uid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
                r = sbx_error_set(err, errno, "chown /%s in the sandbox", name);
                close_fd(ret);
                return r;
        }
        return 0;
}

/* ---- helpers: the new mount API ---- */

/* Append the kernel's fs_context message (if any) to an error. */
static int fs_error(int fsfd, struct sbx_error *err, int errnum, const char *what,
                    const char *fstype)
{
        char log[256] = "";
        ssize_t n = fsfd >= 0 ? read(fsfd, log, sizeof(log) - 1) : -1;
        if (n > 0) {
                log[n] = '\0';
                log[strcspn(log, "\n")] = '\0';
        }
        return sbx_error_set(err, errnum, "%s %s%s%s", what, fstype, n > 0 ? ": " : "",
                             n > 0 ? log : "");
}

/* fsopen + options ("k=v,flag,...") + fsmount; *ret = detached mount fd. */
static int fs_new(const char *fstype, const char *opts, unsigned attrs, int *ret,
                  struct sbx_error *err)
{
        _cleanup_close_ int fs = fsopen(fstype, FSOPEN_CLOEXEC);
        if (fs < 0)
                return sbx_error_set(err, errno, "fsopen %s", fstype);
        char buf[512];
        if (snprintf(buf, sizeof(buf), "%s", opts ? opts : "") >= (int)sizeof(buf))
                return sbx_error_set(err, E2BIG, "%s options too long", fstype);
        char *save = NULL;
        for (char *o = strtok_r(buf, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(o, '=');
                int r;
                if (eq) {
                        *eq = '\0';
                        r = fsconfig(fs, FSCONFIG_SET_STRING, o, eq + 1, 0);
                } else {
                        r = fsconfig(fs, FSCONFIG_SET_FLAG, o, NULL, 0);
                }
                if (r < 0)
                        return fs_error(fs, err, errno, "configure", fstype);
        }
        if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return fs_error(fs, err, errno, "create", fstype);
        int m = fsmount(fs, FSMOUNT_CLOEXEC, attrs);
        if (m < 0)
                return fs_error(fs, err, errno, "mount", fstype);
        *ret = m;
        return 0;
}

/* Attach a detached mount onto an O_PATH target fd: no path is resolved
 * again, so the checked target is the one mounted on. */
static int attach(int mnt_fd, int target_fd, const char *what, struct sbx_error *err)
{
        if (move_mount(mnt_fd, "", target_fd, "",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return sbx_error_set(err, errno, "mount %s", what);
        return 0;
}

/* New fs of `fstype` at <dirfd>/<path> (checked target); *ret_mnt gets
 * the mount's root fd when non-NULL. */
static int mount_fs_at(int dirfd, const char *where, const char *path, const char *fstype,
                       const char *opts, unsigned attrs, int *ret_mnt, struct sbx_error *err)
{
        _cleanup_close_ int target = -1, m = -1;
        int r = resolve_target(dirfd, where, path, S_IFDIR, &target, err);
        if (r < 0)
                return r;
        if ((r = fs_new(fstype, opts, attrs, &m, err)) < 0)
                return sbx_error_wrap(err, "%s/%s", where, path);
        char what[128];
        snprintf(what, sizeof(what), "%s on %s/%s", fstype, where, path);
        if ((r = attach(m, target, what, err)) < 0)
                return r;
        if (ret_mnt)
                *ret_mnt = TAKE_FD(m);
        return 0;
}

/* Set attrs on a detached tree and attach it at <dirfd>/<path>. */
static int attach_tree_at(int tree_fd, int dirfd, const char *where, const char *path, mode_t type,
                          unsigned attrs, struct sbx_error *err)
{
        _cleanup_close_ int target = -1;
        int r = resolve_target(dirfd, where, path, type, &target, err);
        if (r < 0)
                return r;
        struct mount_attr a = {.attr_set = attrs};
        if (attrs && mount_setattr(tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
                return sbx_error_set(err, errno, "set mount flags on %s/%s", where, path);
        char what[128];
        snprintf(what, sizeof(what), "%s/%s", where, path);
        return attach(tree_fd, target, what, err);
}

/* Bind a clone of the (attached) mount at src_fd onto <dirfd>/<path>. */
static int bind_at(int src_fd, int dirfd, const char *where, const char *path, mode_t type,
                   unsigned attrs, struct sbx_error *err)
{
        _cleanup_close_ int t = open_tree(
            src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (t < 0)
                return sbx_error_set(err, errno, "clone mount for %s/%s", where, path);
        return attach_tree_at(t, dirfd, where, path, type, attrs, err);
}

/* ---- the mounts ---- */

static int mount_dev(const struct ns_mounts *M, int rootfd, int *ret_devfd, struct sbx_error *err)
{
        uint32_t uid = M->spec->uid_base;
        char opts[160];
        _cleanup_close_ int devfd = -1;
        snprintf(opts, sizeof(opts),
                 "mode=0755,size=65536,nr_inodes=256,uid=%" PRIu32 ",gid=%" PRIu32, uid, uid);
        int r = mount_fs_at(rootfd, "", "dev", "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                            &devfd, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < NS_DEV_NODES; i++) {
                int fd = openat(devfd, ns_dev_nodes[i],
                                O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0666);
                if (fd < 0)
                        return sbx_error_set(err, errno, "create /dev/%s", ns_dev_nodes[i]);
                close(fd);
                if ((r = attach_tree_at(M->dev_fd[i], devfd, "/dev", ns_dev_nodes[i], S_IFREG,
                                        MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, err)) < 0)
                        return r;
        }
        if (mkdirat(devfd, "pts", 0755) < 0 || mkdirat(devfd, "shm", 01777) < 0)
                return sbx_error_set(err, errno, "create /dev/pts, /dev/shm");
        /* gid 5 (tty) inside, when the range has it. */
        uint32_t tty = M->spec->uid_count > 5 ? uid + 5 : uid;
        snprintf(opts, sizeof(opts), "newinstance,ptmxmode=0666,mode=0620,gid=%" PRIu32, tty);
        if ((r = mount_fs_at(devfd, "/dev", "pts", "devpts", opts,
                             MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, NULL, err)) < 0)
                return r;
        snprintf(opts, sizeof(opts),
                 "mode=1777,size=%llu,nr_inodes=16384,uid=%" PRIu32 ",gid=%" PRIu32, NS_SHM_BYTES,
                 uid, uid);
        if ((r = mount_fs_at(devfd, "/dev", "shm", "tmpfs", opts,
                             MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, NULL, err)) <
            0)
                return r;
        static const char *const links[][2] = {
            {"pts/ptmx", "ptmx"},          {"/proc/self/fd", "fd"},
            {"/proc/self/fd/0", "stdin"},  {"/proc/self/fd/1", "stdout"},
            {"/proc/self/fd/2", "stderr"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++)
                if (symlinkat(links[i][0], devfd, links[i][1]) < 0 ||
                    fchownat(devfd, links[i][1], uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                        return sbx_error_set(err, errno, "create /dev/%s", links[i][1]);
        *ret_devfd = TAKE_FD(devfd);
        return 0;
}

/* An empty read-only tmpfs over a directory, to hide it. */
#define NS_EMPTY_TMPFS "size=4k,nr_inodes=8,mode=0755"
#define NS_RO_ATTRS (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

/* nullfd: the sandbox's /dev/null bind mount (attached). */
static int mount_proc(int rootfd, int nullfd, struct sbx_error *err)
{
        static const char *const masked_files[] = {"kcore",       "keys",          "timer_list",
                                                   "sched_debug", "latency_stats", "timer_stats"};
        static const char *const masked_dirs[] = {"acpi", "scsi", "asound"};
        static const char *const ro[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};
        _cleanup_close_ int procfd = -1;
        int r = mount_fs_at(rootfd, "", "proc", "proc", NULL,
                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NODEV, &procfd, err);
        if (r < 0)
                return r;
        /* Paths that leak host data or reach host-wide kernel state. A path
         * this kernel does not have is simply absent. */
        for (size_t i = 0; i < ARRAY_SIZE(masked_files); i++) {
                if (faccessat(procfd, masked_files[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if ((r = bind_at(nullfd, procfd, "/proc", masked_files[i], S_IFREG, 0, err)) < 0)
                        return r;
        }
        for (size_t i = 0; i < ARRAY_SIZE(masked_dirs); i++) {
                if (faccessat(procfd, masked_dirs[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if ((r = mount_fs_at(procfd, "/proc", masked_dirs[i], "tmpfs", NS_EMPTY_TMPFS,
                                     NS_RO_ATTRS, NULL, err)) < 0)
                        return r;
        }
        for (size_t i = 0; i < ARRAY_SIZE(ro); i++) {
                _cleanup_close_ int t = -1;
                if (faccessat(procfd, ro[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if ((r = resolve_target(procfd, "/proc", ro[i], 0, &t, err)) < 0)
                        return r;
                if ((r = bind_at(t, procfd, "/proc", ro[i], 0, NS_RO_ATTRS, err)) < 0)
                        return r;
        }
        return 0;
}

static int mount_sys(int rootfd, struct sbx_error *err)
{
        _cleanup_close_ int sysfd = -1;
        /* sysfs shows the mounter's network namespace; the mounter is in
         * C's. If the kernel refuses (no fully visible sysfs), an empty
         * read-only tmpfs stands in. */
        int r = mount_fs_at(rootfd, "", "sys", "sysfs", NULL, NS_RO_ATTRS, &sysfd, err);
        if (r == -EPERM || r == -EACCES)
                r = mount_fs_at(rootfd, "", "sys", "tmpfs", NS_EMPTY_TMPFS, NS_RO_ATTRS, &sysfd,
                                err);
        if (r < 0)
                return r;
        /* Firmware tables, and RAPL energy counters (a power side channel on
         * other tenants' secrets: CVE-2020-8694 / CVE-2020-8695). */
        static const char *const masked[] = {"firmware", "devices/virtual/powercap"};
        for (size_t i = 0; i < ARRAY_SIZE(masked); i++) {
                if (faccessat(sysfd, masked[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if ((r = mount_fs_at(sysfd, "/sys", masked[i], "tmpfs", NS_EMPTY_TMPFS, NS_RO_ATTRS,
                                     NULL, err)) < 0)
                        return r;
        }
        return 0;
}

static int mount_rootfs(const struct ns_mounts *M, int *ret_root, struct sbx_error *err)
{
        _cleanup_close_ int dfd = -1, lower = -1, ovl = -1, rootmp = -1;
        const char *dir = M->spec->dir;

        dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return sbx_error_set(err, errno, "open `%s` in the sandbox mount ns", dir);
        lower = openat(dfd, "lower", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        rootmp = openat(dfd, "rootfs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (lower < 0 || rootmp < 0)
                return sbx_error_set(err, errno, "open lower/ and rootfs/ in `%s`", dir);
        int r = attach(M->tree_fd, lower, "image on lower/", err);
        if (r < 0)
                return r;
        if (M->disk->active && (r = disk_mount(M->disk, dfd, M->spec->uid_base, err)) < 0)
                return r;
        /* Relative layer paths (cwd = the sandbox dir) keep the option
         * string short whatever the length of the dir. */
        if (fchdir(dfd) < 0)
                return sbx_error_set(err, errno, "chdir `%s`", dir);
        r = fs_new("overlay",
                   M->disk->active ? "lowerdir=lower,upperdir=disk/upper,workdir=disk/work"
                                   : "lowerdir=lower,upperdir=upper,workdir=work",
                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, &ovl, err);
        if (r < 0)
                return r;
        if ((r = attach(ovl, rootmp, "overlay on rootfs/", err)) < 0)
                return r;
        *ret_root = TAKE_FD(ovl);
        return 0;
}

/* A read-only /etc/resolv.conf with the daemon's nameservers for a NAT
 * sandbox, from a tiny tmpfs (nothing of the host's filesystem is bound).
 * An image without a plain /etc/resolv.conf (absent is fine: it is made)
 * keeps its own: a symlink there is never followed. */
static int mount_resolv(int rootfd, const char *text, uint32_t uid, struct sbx_error *err)
{
        _cleanup_close_ int etc = -1, tfs = -1, tree = -1;
        struct sbx_error ignored;
        if (resolve_target(rootfd, "", "etc", S_IFDIR, &etc, &ignored) < 0)
                return 0;
        int fd =
            openat(etc, "resolv.conf", O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
                int r = fchown(fd, uid, uid) < 0 ? -errno : 0;
                close(fd);
                if (r < 0)
                        return sbx_error_set(err, -r, "chown /etc/resolv.conf");
        } else if (errno != EEXIST) {
                return 0;
        }
        _cleanup_close_ int target = -1;
        if (resolve_target(etc, "/etc", "resolv.conf", S_IFREG, &target, &ignored) < 0)
                return 0;
        int r = fs_new("tmpfs", "size=4k,nr_inodes=4,mode=0755", 0, &tfs, err);
        if (r < 0)
                return r;
        fd = openat(tfs, "resolv.conf", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0)
                return sbx_error_set(err, errno, "create resolv.conf");
        r = write_all(fd, text, strlen(text));
        if (r >= 0 && fchown(fd, uid, uid) < 0)
                r = -errno;
        close(fd);
        if (r < 0)
                return sbx_error_set(err, -r, "write resolv.conf");
        tree = open_tree(tfs, "resolv.conf", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree < 0)
                return sbx_error_set(err, errno, "clone resolv.conf");
        return attach_tree_at(tree, etc, "/etc", "resolv.conf", S_IFREG, NS_RO_ATTRS, err);
}

/* Before each top-level mount point is used it must exist as a directory. */
static int rootfs_mountpoints(int rootfd, struct sbx_error *err)
{
        static const char *const dirs[] = {"dev", "proc", "sys", "tmp"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                _cleanup_close_ int fd = -1;
                int r = rootfs_dir(rootfd, dirs[i], 0755, (uid_t)-1, &fd, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int ns_mount_all(const struct ns_mounts *M, struct sbx_error *err)
{
        _cleanup_close_ int rootfd = -1, devfd = -1, fd = -1;
        char opts[160];
        /* Before anything else: nothing mounted from here on may propagate
         * back to the host's mount namespace. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return sbx_error_set(err, errno, "make / private in the sandbox mount ns");
        int r = mount_rootfs(M, &rootfd, err);
        if (r < 0)
                return r;
        if ((r = rootfs_mountpoints(rootfd, err)) < 0)
                return r;
        if ((r = mount_dev(M, rootfd, &devfd, err)) < 0)
                return r;
        /* dev_fd[0] is the /dev/null mount now; it masks /proc files. */
        if ((r = mount_proc(rootfd, M->dev_fd[0], err)) < 0)
                return r;
        if ((r = mount_sys(rootfd, err)) < 0)
                return r;
        uint64_t tmp = M->spec->limits.tmp_bytes ? M->spec->limits.tmp_bytes : NS_TMP_DEFAULT;
        uint64_t inodes = MAX(tmp / 4096, 1024);
        snprintf(opts, sizeof(opts),
                 "mode=1777,size=%" PRIu64 ",nr_inodes=%" PRIu64 ",uid=%" PRIu32 ",gid=%" PRIu32,
                 tmp, inodes, M->spec->uid_base, M->spec->uid_base);
        if ((r = mount_fs_at(rootfd, "", "tmp", "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                             NULL, err)) < 0)
                return r;
        if (M->resolv && (r = mount_resolv(rootfd, M->resolv, M->spec->uid_base, err)) < 0)
                return r;
        return rootfs_dir(rootfd, "workspace", 0755, M->spec->uid_base, &fd, err);
}
