/* SPDX-License-Identifier: MIT */
/* The disk cap of the ns driver: a sandbox's writable layer (overlay
 * upper/ and work/) lives on its own ext4 filesystem, in a sparse image
 * file <dir>/disk.img of the capped size, attached to a loop device and
 * mounted only inside the sandbox's mount namespace.
 *
 * Why this and not project quotas: quotas need a filesystem mounted with
 * prjquota (ext4 -O project, xfs pquota), which a host rarely has and
 * which cannot be switched on under a running system. A loop-mounted
 * image works on any host filesystem that supports sparse files, costs a
 * sparse copy of a formatted template (a few MiB; one mkfs per size, ever)
 * at a sandbox's first start, and gives
 * ENOSPC inside when full while the host only ever sees one file grow up
 * to the cap. `discard` hands freed blocks back to the host (the loop
 * driver punches holes in the image).
 *
 * The image is written only by the kernel's ext4 on the sandbox's behalf:
 * no process of the sandbox ever sees the image file or the loop device
 * (neither is in its mount namespace), so the filesystem metadata the
 * kernel parses is never attacker-supplied bytes.
 *
 * A sandbox that started once without an image keeps its plain upper/
 * directory (its files stay where they are); one that has an image keeps
 * it even if the setting changes. */
#include "disk.h"
#include "../common/log.h"
#include "../common/tool.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/loop.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define DISK_IMAGE "disk.img"
#define DISK_SPARE_DIR ".disk-spare-" /* + the driver's name */
#define DISK_SPARES 4                 /* spare images kept per size */
#define DISK_MIN_BYTES (16ULL << 20)
#define DISK_BUSY_WAIT_MS 5000
#define DISK_ERR_MAX 200

static const char *const mkfs_paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4", NULL};

/* Run mkfs.ext4 on the image file at fd; its stderr ends up in err. */
static int run_mkfs(int img_fd, struct sbx_error *err)
{
        const char *mkfs = tool_find(mkfs_paths);
        if (!mkfs)
                return sbx_error_set(err, ENOENT, "disk_limit needs mkfs.ext4 (e2fsprogs)");
        /* Lazy init: the kernel never zeroes inode tables or the journal of
         * a fresh image (mounted noinit_itable), so it stays sparse. The
         * filesystem's root is never seen by the sandbox (its upper/ and
         * work/ are, made and chowned by disk_mount), so it stays root's,
         * and one formatted image serves every sandbox as a template. */
        static const char ext[] = "lazy_itable_init=1,lazy_journal_init=1,nodiscard";
        /* No resize inode: an image never grows (a sandbox keeps the size
         * it was made with), and the blocks it reserves for growing to
         * 1024 times the size are most of a fresh image's data (4.2 of
         * 4.4 MiB at 10 GiB): what every sandbox costs the host's disk. */
        const char *const argv[] = {mkfs,
                                    "-q",
                                    "-F",
                                    "-t",
                                    "ext4",
                                    "-b",
                                    "4096",
                                    "-m",
                                    "0",
                                    "-O",
                                    "^resize_inode",
                                    "-L",
                                    "sandbox",
                                    "-E",
                                    ext,
                                    "/proc/self/fd/3",
                                    NULL};
        char msg[DISK_ERR_MAX] = "";
        struct tool_run t = {
            .argv = argv,
            .envp = tool_plain_env,
            .err_text = msg,
            .err_len = sizeof(msg),
            .fd3 = img_fd,
        };
        int st;
        int r = run_tool(&t, &st, err);
        if (r < 0 && st != -1) {
                msg[strcspn(msg, "\n")] = '\0';
                return sbx_error_set(err, EIO,
                                     "mkfs.ext4 of the sandbox disk failed (status 0x%x)%s%s", st,
                                     msg[0] ? ": " : "", msg);
        }
        return r;
}

/* Copy the data of a sparse file, leaving its holes holes: an empty ext4
 * image of gigabytes holds a few MiB of data. */
static int copy_sparse(int src, int dst, uint64_t bytes)
{
        if (ftruncate(dst, (off_t)bytes) < 0)
                return -errno;
        off_t off = 0;
        for (;;) {
                off_t data = lseek(src, off, SEEK_DATA);
                if (data < 0)
                        return errno == ENXIO ? 0 : -errno; /* ENXIO: no more data */
                off_t hole = lseek(src, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                loff_t in = data, out = data;
                size_t left = (size_t)(hole - data);
                while (left > 0) {
                        ssize_t n = copy_file_range(src, &in, dst, &out, left, 0);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                return n < 0 ? -errno : -EIO;
                        left -= (size_t)n;
                }
                off = hole;
        }
}

/* The formatted empty image of `bytes`, made once per size beside the
 * sandbox dirs (<sandboxes>/.disk-template-v2-<bytes>.img) and renamed
 * into place whole, so concurrent launchers at worst both make one. A
 * template of the first format (with a resize inode) goes when its
 * successor is made: images made from it go on working. */
static int open_template(int parent, uint64_t bytes, struct sbx_error *err)
{
        char name[64], tmp[96];
        snprintf(name, sizeof(name), ".disk-template-v2-%" PRIu64 ".img", bytes);
        int fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT)
                return fd >= 0 ? fd : sbx_error_set(err, errno, "open %s", name);
        snprintf(tmp, sizeof(tmp), "%s.%d", name, (int)getpid());
        _cleanup_close_ int t =
            openat(parent, tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (t < 0)
                return sbx_error_set(err, errno, "create %s", tmp);
        int r = 0;
        if (ftruncate(t, (off_t)bytes) < 0)
                r = sbx_error_set(err, errno, "size %s", tmp);
        if (r == 0)
                r = run_mkfs(t, err);
        if (r == 0 && fsync(t) < 0)
                r = sbx_error_set(err, errno, "fsync %s", tmp);
        if (r == 0 && renameat(parent, tmp, parent, name) < 0)
                r = sbx_error_set(err, errno, "rename %s", tmp);
        if (r < 0) {
                unlinkat(parent, tmp, 0);
                return r;
        }
        snprintf(tmp, sizeof(tmp), ".disk-template-%" PRIu64 ".img", bytes);
        unlinkat(parent, tmp, 0);
        fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        return fd >= 0 ? fd : sbx_error_set(err, errno, "open %s", name);
}

/* A sparse copy of the template at `name` in dirfd, synced, then renamed
 * into place whole. */
static int copy_template(int tpl, int dirfd, const char *tmp, const char *name, uint64_t bytes,
                         struct sbx_error *err)
{
        if (unlinkat(dirfd, tmp, 0) < 0 && errno != ENOENT)
                return sbx_error_set(err, errno, "remove stale %s", tmp);
        _cleanup_close_ int fd =
            openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return sbx_error_set(err, errno, "create %s", tmp);
        int r = copy_sparse(tpl, fd, bytes);
        if (r < 0)
                r = sbx_error_set(err, -r, "copy the disk template");
        if (r >= 0 && fsync(fd) < 0)
                r = sbx_error_set(err, errno, "fsync %s", tmp);
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = sbx_error_set(err, errno, "rename %s", tmp);
        if (r < 0)
                unlinkat(dirfd, tmp, 0);
        return r;
}

/* ---- spare images ----
 *
 * Copying and syncing a fresh image is most of a cold start's disk cost
 * (the sync alone ~10 ms here), so images of the sizes in use are made
 * ahead of time, off the start path, each driver's in a directory of its
 * own: <sandboxes>/.disk-spare-<driver>/<bytes>-<tag>.img, each complete
 * (synced, renamed into place) before it can be taken. One driver's filler
 * never counts, removes or takes another's. A start takes one of its
 * driver's by renaming it to its <dir>/disk.img (RENAME_NOREPLACE: two
 * launchers never get the same one); a start that finds none makes its
 * own, as before. A spare holds no sandbox's data, ever. */

static int spare_dir(int parent, const char *driver, bool create, struct sbx_error *err)
{
        char name[64];
        if (!driver || !*driver || strchr(driver, '/') ||
            snprintf(name, sizeof(name), DISK_SPARE_DIR "%s", driver) >= (int)sizeof(name))
                return sbx_error_set(err, EINVAL, "spare images: bad driver name");
        if (create && mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create %s", name);
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && (create || errno != ENOENT))
                return sbx_error_set(err, errno, "open %s", name);
        return fd;
}

/* The size a spare's name gives, or 0 for a name that is no spare's. */
static uint64_t spare_size(const char *name)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(name, &end, 10);
        if (errno || end == name || *end != '-' || !strstr(end, ".img") ||
            strcmp(end + strlen(end) - 4, ".img"))
                return 0;
        return v;
}

/* Rename a spare of `bytes` to <dirfd>/disk.img. 0 taken, -ENOENT none. */
static int spare_take(int parent, const char *driver, int dirfd, uint64_t bytes)
{
        _cleanup_close_ int sd = spare_dir(parent, driver, false, NULL);
        if (sd < 0)
                return -ENOENT;
        DIR *d = fdopendir(dup(sd));
        if (!d)
                return -ENOENT;
        int r = -ENOENT;
        struct dirent *de;
        while (r < 0 && (de = readdir(d)))
                if (spare_size(de->d_name) == bytes &&
                    renameat2(sd, de->d_name, dirfd, DISK_IMAGE, RENAME_NOREPLACE) == 0)
                        r = 0;
        closedir(d);
        return r;
}

/* How many spares of `bytes` there are; those of sizes not in sizes[] and
 * leftovers of a copy cut short go. */
static unsigned spare_count(int sd, uint64_t bytes, const uint64_t *sizes, size_t n_sizes)
{
        DIR *d = fdopendir(dup(sd));
        if (!d)
                return 0;
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
                        continue;
                uint64_t v = spare_size(de->d_name);
                bool known = false;
                for (size_t i = 0; i < n_sizes && v; i++)
                        known = known || sizes[i] == v;
                if (v == bytes)
                        n++;
                else if (!known)
                        unlinkat(sd, de->d_name, 0);
        }
        closedir(d);
        return n;
}

static int spares_fill(const char *sandboxes, const char *driver, const uint64_t *sizes,
                       size_t n_sizes, unsigned want, struct sbx_error *err)
{
        _cleanup_close_ int parent =
            open(sandboxes, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (parent < 0)
                return sbx_error_set(err, errno, "open `%s`", sandboxes);
        _cleanup_close_ int sd = spare_dir(parent, driver, true, err);
        if (sd < 0)
                return sd;
        static unsigned seq;
        for (size_t i = 0; i < n_sizes; i++) {
                _cleanup_close_ int tpl = open_template(parent, sizes[i], err);
                if (tpl < 0)
                        return tpl;
                for (unsigned n = spare_count(sd, sizes[i], sizes, n_sizes); n < want; n++) {
                        char name[64];
                        snprintf(name, sizeof(name), "%" PRIu64 "-%d-%u.img", sizes[i],
                                 (int)getpid(), seq++);
                        int r = copy_template(tpl, sd, ".copy.tmp", name, sizes[i], err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static void *spares_main(void *arg)
{
        struct disk_spares *sp = arg;
        pthread_mutex_lock(&sp->lock);
        while (!sp->stop) {
                if (!sp->dirty) {
                        pthread_cond_wait(&sp->wake, &sp->lock);
                        continue;
                }
                sp->dirty = false;
                uint64_t sizes[DISK_SPARE_SIZES];
                size_t n = sp->n_sizes;
                memcpy(sizes, sp->sizes, sizeof(sizes));
                pthread_mutex_unlock(&sp->lock);
                struct sbx_error e = {0};
                if (spares_fill(sp->dir, sp->driver, sizes, n, DISK_SPARES, &e) < 0)
                        log_warn("spare disk images (%s): %s", sp->driver, e.msg);
                pthread_mutex_lock(&sp->lock);
        }
        pthread_mutex_unlock(&sp->lock);
        return NULL;
}

void disk_spares_init(struct disk_spares *sp, const char *driver)
{
        *sp = (struct disk_spares){.driver = driver};
        pthread_mutex_init(&sp->lock, NULL);
        pthread_cond_init(&sp->wake, NULL);
}

void disk_spares_note(struct disk_spares *sp, const struct rt_spec *spec)
{
        uint64_t bytes = spec->limits.disk_bytes;
        const char *slash = spec->dir ? strrchr(spec->dir, '/') : NULL;
        if (!bytes || !slash || slash == spec->dir || (size_t)(slash - spec->dir) >= PATH_MAX)
                return;
        pthread_mutex_lock(&sp->lock);
        size_t i = 0;
        while (i < sp->n_sizes && sp->sizes[i] != bytes)
                i++;
        if (i == sp->n_sizes && sp->n_sizes < DISK_SPARE_SIZES)
                sp->sizes[sp->n_sizes++] = bytes;
        if (!sp->dir[0])
                snprintf(sp->dir, sizeof(sp->dir), "%.*s", (int)(slash - spec->dir), spec->dir);
        sp->dirty = true;
        if (!sp->running && !sp->stop)
                sp->running = pthread_create(&sp->thread, NULL, spares_main, sp) == 0;
        pthread_cond_signal(&sp->wake);
        pthread_mutex_unlock(&sp->lock);
}

void disk_spares_stop(struct disk_spares *sp)
{
        pthread_mutex_lock(&sp->lock);
        bool running = sp->running;
        sp->stop = true;
        pthread_cond_signal(&sp->wake);
        pthread_mutex_unlock(&sp->lock);
        if (running)
                pthread_join(sp->thread, NULL);
        pthread_cond_destroy(&sp->wake);
        pthread_mutex_destroy(&sp->lock);
}

/* Make <dir>/disk.img: a spare, or a sparse copy of the formatted
 * template; whole either way, so a half-made image is never used. */
static int create_image(int dirfd, const char *driver, uint64_t bytes, struct sbx_error *err)
{
        _cleanup_close_ int parent = openat(dirfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0)
                return sbx_error_set(err, errno, "open the sandboxes directory");
        if (spare_take(parent, driver, dirfd, bytes) == 0)
                return 1;
        _cleanup_close_ int tpl = open_template(parent, bytes, err);
        if (tpl < 0)
                return tpl;
        int r = copy_template(tpl, dirfd, DISK_IMAGE ".tmp", DISK_IMAGE, bytes, err);
        return r < 0 ? r : 1;
}

/* Whether a loop device is still backed by the image (dev, ino): a
 * previous run whose filesystem the kernel has not let go of yet. Mounting
 * the image a second time beside it would corrupt it. */
static bool image_attached(dev_t dev, ino_t ino)
{
        DIR *d = opendir("/sys/block");
        if (!d)
                return false;
        bool found = false;
        struct dirent *de;
        while (!found && (de = readdir(d))) {
                if (strncmp(de->d_name, "loop", 4))
                        continue;
                char p[300];
                snprintf(p, sizeof(p), "/dev/%s", de->d_name);
                int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                if (fd < 0)
                        continue;
                struct loop_info64 li;
                if (ioctl(fd, LOOP_GET_STATUS64, &li) == 0 && li.lo_device == (uint64_t)dev &&
                    li.lo_inode == (uint64_t)ino)
                        found = true;
                close(fd);
        }
        closedir(d);
        return found;
}

/* Attach img_fd to a free loop device; autoclear detaches it when the
 * sandbox's filesystem goes away with its last process. */
static int attach_loop(int img_fd, struct ns_disk *disk, struct sbx_error *err)
{
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return sbx_error_set(err, errno, "open /dev/loop-control");
        for (int tries = 0; tries < 32; tries++) {
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return sbx_error_set(err, errno, "find a free loop device");
                snprintf(disk->dev, sizeof(disk->dev), "/dev/loop%d", n);
                _cleanup_close_ int lfd = open(disk->dev, O_RDWR | O_CLOEXEC);
                if (lfd < 0)
                        return sbx_error_set(err, errno, "open %s", disk->dev);
                struct loop_config cfg = {
                    .fd = (uint32_t)img_fd,
                    .block_size = 4096,
                    .info = {.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO},
                };
                snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "sandbox");
                int r = ioctl(lfd, LOOP_CONFIGURE, &cfg);
                if (r < 0 && errno == EINVAL) {
                        /* No direct I/O on this host filesystem. */
                        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
                        r = ioctl(lfd, LOOP_CONFIGURE, &cfg);
                }
                if (r == 0) {
                        disk->loop_fd = TAKE_FD(lfd);
                        return 0;
                }
                if (errno != EBUSY) /* EBUSY: another process took it first */
                        return sbx_error_set(err, errno, "configure %s", disk->dev);
        }
        return sbx_error_set(err, EBUSY, "no loop device could be claimed");
}

int disk_prepare(int dirfd, const struct rt_spec *spec, const char *driver, struct ns_disk *disk,
                 struct sbx_error *err)
{
        *disk = (struct ns_disk){.loop_fd = -1};
        struct stat st;
        bool have_img = fstatat(dirfd, DISK_IMAGE, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (have_img && !S_ISREG(st.st_mode))
                return sbx_error_set(err, EINVAL, "%s of the sandbox is not a regular file",
                                     DISK_IMAGE);
        bool have_upper = fstatat(dirfd, "upper", &st, AT_SYMLINK_NOFOLLOW) == 0;
        uint64_t bytes = spec->limits.disk_bytes;
        if (!have_img && (have_upper || bytes == 0))
                return 0; /* a plain upper/ directory, no cap */
        if (!have_img) {
                if (bytes < DISK_MIN_BYTES)
                        return sbx_error_set(err, EINVAL, "disk limit %" PRIu64 " below 16 MiB",
                                             bytes);
                int r = create_image(dirfd, driver, bytes, err);
                if (r < 0)
                        return r;
        }
        /* Only an image that was here before can still be attached from a
         * previous run: a new one (a new inode) cannot. */
        _cleanup_close_ int img = openat(dirfd, DISK_IMAGE, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (img < 0)
                return sbx_error_set(err, errno, "open %s", DISK_IMAGE);
        if (fstat(img, &st) < 0 || !S_ISREG(st.st_mode))
                return sbx_error_set(err, EINVAL, "%s is not a regular file", DISK_IMAGE);
        for (int64_t deadline = mono_ms() + DISK_BUSY_WAIT_MS;
             have_img && image_attached(st.st_dev, st.st_ino);) {
                if (mono_ms() > deadline)
                        return sbx_error_set(
                            err, EBUSY, "the sandbox's disk is still attached from a previous run");
                sleep_ms(20);
        }
        int r = attach_loop(img, disk, err);
        if (r < 0)
                return r;
        disk->active = true;
        return 0;
}

void disk_release(struct ns_disk *disk)
{
        if (disk->loop_fd >= 0)
                close(disk->loop_fd);
        disk->loop_fd = -1;
}

/* In the mounter (the sandbox's mount ns): the image's ext4 on <dir>/disk,
 * with upper/ and work/ in it. The mount disappears with the namespace. */
int disk_mount(const struct ns_disk *disk, int dirfd, uint32_t uid, struct sbx_error *err)
{
        _cleanup_close_ int fs = fsopen("ext4", FSOPEN_CLOEXEC);
        if (fs < 0)
                return sbx_error_set(err, errno, "fsopen ext4");
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", disk->dev, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_FLAG, "discard", NULL, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return sbx_error_set(err, errno, "mount the sandbox disk (%s)", disk->dev);
        _cleanup_close_ int m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (m < 0)
                return sbx_error_set(err, errno, "mount the sandbox disk (%s)", disk->dev);
        _cleanup_close_ int target =
            openat(dirfd, "disk", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (target < 0)
                return sbx_error_set(err, errno, "open disk/ of the sandbox");
        if (move_mount(m, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return sbx_error_set(err, errno, "attach the sandbox disk");
        static const struct {
                const char *name;
                mode_t mode;
        } dirs[] = {{"upper", 0755}, {"work", 0700}};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                if (mkdirat(m, dirs[i].name, dirs[i].mode) == 0) {
                        if (fchownat(m, dirs[i].name, uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) < 0)
                                return sbx_error_set(err, errno, "chown disk/%s", dirs[i].name);
                        continue;
                }
                struct stat st;
                if (errno != EEXIST || fstatat(m, dirs[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode))
                        return sbx_error_set(err, errno == EEXIST ? ENOTDIR : errno,
                                             "disk/%s of the sandbox", dirs[i].name);
        }
        return 0;
}
