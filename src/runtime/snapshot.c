/* SPDX-License-Identifier: MIT */
/* Snapshots: a sandbox's files at one moment, as a new image. The tree is
 * read from the sandbox's "/" (the handle its driver or agent gives) one
 * entry at a time, every name opened beneath its parent with O_NOFOLLOW,
 * so nothing the sandbox made (a symlink, a swapped directory) leads out
 * of it. The caller freezes the sandbox meanwhile.
 *
 * What is written: regular files, directories, symlinks, FIFOs and hard
 * links, with their modes (set-id bits too: sandboxes mount nosuid), owners
 * (back to the image's own ids: the sandbox's minus its uid shift), times
 * and the xattrs user.* and security.capability. A file that is the base
 * image's, unchanged (same size, mtime, mode and owner at the same path),
 * is a hard link to it rather than a copy, and a copy uses
 * copy_file_range, which shares blocks where the filesystem can: so a
 * snapshot costs what the sandbox changed. Other filesystems mounted in
 * the sandbox (/proc, /dev, /tmp, ...) are not part of it: their mount
 * points are kept empty.
 *
 * The new image is built in a .build-<name>-<pid> dir, synced, marked
 * complete by its image.json (written last, synced) and renamed into
 * place, the images dir synced after: an acknowledged snapshot survives a
 * crash, a half-made one is a leftover the next build, import or list
 * removes (image.c). */
#include "runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "../common/names.h"
#include "image-internal.h"
#include "oci.h"

#define SNAP_MAX_DEPTH 256
#define SNAP_XATTR_LIST 65536
#define SNAP_XATTR_VALUE 65536

struct hardlink {
        dev_t dev;
        ino_t ino;
        char *path; /* relative to the new root */
};

struct snap {
        int dst_root;     /* the new rootfs/ */
        int upper;        /* the sandbox's writable layer as the host sees it, or -1 */
        uint64_t src_mnt; /* the sandbox root's mount (overlayfs shows its files'
                           * own st_dev: the mount id is what says "ours") */
        uint32_t shift;
        struct hardlink *links;
        size_t n_links, cap_links;
        struct rt_snapshot_stats *st;
        struct sbx_error *err;
        bool base_first; /* a derived image: link to the base before looking
                          * for second names (every file has some) */
        /* Two passes (rt_image_snapshot with hooks): the first, while the
         * sandbox runs, records what it copied in sigs; the second, frozen,
         * copies again only what changed since (or was changed too close
         * to the first to trust: a ctime at or after since_s). */
        struct sigtab *sigs;
        int pass;
        time_t since_s;
};

static bool ids_ok(const struct snap *s, const struct stat *st, uint32_t *uid, uint32_t *gid)
{
        if (st->st_uid < s->shift || st->st_gid < s->shift || st->st_uid - s->shift > 65535 ||
            st->st_gid - s->shift > 65535)
                return false;
        *uid = st->st_uid - s->shift;
        *gid = st->st_gid - s->shift;
        return true;
}

/* The xattrs worth keeping, from src to dst (both fds of regular files or
 * directories). Best effort: an image without them still works. */
static void copy_xattrs(int src, int dst)
{
        _cleanup_free_ char *names = malloc(SNAP_XATTR_LIST);
        _cleanup_free_ char *value = malloc(SNAP_XATTR_VALUE);
        if (!names || !value)
                return;
        ssize_t n = flistxattr(src, names, SNAP_XATTR_LIST);
        for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
                const char *k = names + off;
                if (strncmp(k, "user.", 5) && strcmp(k, "security.capability"))
                        continue;
                ssize_t v = fgetxattr(src, k, value, SNAP_XATTR_VALUE);
                if (v >= 0)
                        fsetxattr(dst, k, value, (size_t)v, 0);
        }
}

#define SNAP_COPY_BUF (1u << 20)

/* read() and write(), where copy_file_range cannot (across filesystems
 * that do not take it: an overlay's files, often). */
static int copy_plain(int in, int out, uint64_t size, uint64_t *done)
{
        _cleanup_free_ uint8_t *b = malloc(SNAP_COPY_BUF);
        if (!b)
                return -ENOMEM;
        while (*done < size) {
                ssize_t n = read(in, b, (size_t)MIN(size - *done, (uint64_t)SNAP_COPY_BUF));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : 0;
                for (ssize_t w = 0; w < n;) {
                        ssize_t k = write(out, b + w, (size_t)(n - w));
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                return -errno;
                        w += k;
                }
                *done += (uint64_t)n;
        }
        return 0;
}

static int copy_data(int in, int out, uint64_t size, struct snap *s)
{
        uint64_t done = 0;
        int r = 0;
        while (done < size) {
                ssize_t n =
                    copy_file_range(in, NULL, out, NULL, (size_t)MIN(size - done, 1u << 30), 0);
                if (n == 0)
                        break; /* it shrank: the sandbox is frozen, so it cannot */
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 &&
                    (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
                        r = copy_plain(in, out, size, &done);
                        break;
                }
                if (n < 0)
                        return -errno;
                done += (uint64_t)n;
        }
        s->st->copied_bytes += done;
        return r;
}

/* A file the base has, unchanged: link to it. True when linked. */
static bool link_base(struct snap *s, int base, int dst, const char *name, const struct stat *st,
                      uint32_t uid, uint32_t gid)
{
        struct stat b;
        if (base < 0 || fstatat(base, name, &b, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(b.st_mode) ||
            b.st_size != st->st_size || b.st_mtim.tv_sec != st->st_mtim.tv_sec ||
            b.st_mtim.tv_nsec != st->st_mtim.tv_nsec || b.st_mode != st->st_mode ||
            b.st_uid != uid || b.st_gid != gid)
                return false;
        if (linkat(base, name, dst, name, 0) < 0)
                return false;
        s->st->linked_files++;
        return true;
}

/* The writable layer's own file at rel, when it is what the sandbox's
 * tree shows there (a regular file of the same size and mtime, and not an
 * overlay metacopy, whose data would be a lower layer's): read from it,
 * copy_file_range can share its blocks (a reflink on XFS or btrfs), which
 * it cannot from the overlay's file (EXDEV). -1 otherwise. */
static int open_upper(const struct snap *s, const char *rel, const struct stat *st)
{
        if (s->upper < 0)
                return -1;
        struct open_how how = {
            .flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
            .resolve =
                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd = (int)syscall(SYS_openat2, s->upper, rel, &how, sizeof(how));
        struct stat u;
        if (fd < 0)
                return -1;
        if (fstat(fd, &u) < 0 || !S_ISREG(u.st_mode) || u.st_size != st->st_size ||
            u.st_mtim.tv_sec != st->st_mtim.tv_sec || u.st_mtim.tv_nsec != st->st_mtim.tv_nsec ||
            fgetxattr(fd, "trusted.overlay.metacopy", NULL, 0) >= 0 ||
            fgetxattr(fd, "user.overlay.metacopy", NULL, 0) >= 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static int copy_file(struct snap *s, int src, int base, int dst, const char *rel, const char *name,
                     const struct stat *st, uint32_t uid, uint32_t gid)
{
        if (!s->base_first && link_base(s, base, dst, name, st, uid, gid))
                return 0;
        _cleanup_close_ int in = open_upper(s, rel, st);
        if (in < 0)
                in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
                return sbx_error_set(s->err, errno, "read %s", name);
        _cleanup_close_ int out =
            openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return sbx_error_set(s->err, errno, "write %s", name);
        int r = copy_data(in, out, (uint64_t)st->st_size, s);
        if (r < 0)
                return sbx_error_set(s->err, -r, "copy %s", name);
        copy_xattrs(in, out);
        struct timespec t[2] = {st->st_atim, st->st_mtim};
        if (fchown(out, uid, gid) < 0 || fchmod(out, st->st_mode & 07777) < 0 ||
            futimens(out, t) < 0)
                return sbx_error_set(s->err, errno, "set the owner, mode and times of %s", name);
        s->st->copied_files++;
        return 0;
}

/* A second name of a file already written: link it again. 1 linked, 0
 * first seen (remembered), < 0 error. */
static int hardlink(struct snap *s, int dst, const char *rel, const char *name,
                    const struct stat *st)
{
        if (st->st_nlink < 2)
                return 0;
        for (size_t i = 0; i < s->n_links; i++) {
                if (s->links[i].dev == st->st_dev && s->links[i].ino == st->st_ino)
                        return linkat(s->dst_root, s->links[i].path, dst, name, 0) < 0
                                   ? sbx_error_set(s->err, errno, "link %s", rel)
                                   : 1;
        }
        if (s->n_links == s->cap_links) {
                size_t cap = s->cap_links ? s->cap_links * 2 : 64;
                struct hardlink *v = realloc(s->links, cap * sizeof(*v));
                if (!v)
                        return sbx_error_set(s->err, ENOMEM, "hard links");
                s->links = v;
                s->cap_links = cap;
        }
        char *p = strdup(rel);
        if (!p)
                return sbx_error_set(s->err, ENOMEM, "hard links");
        s->links[s->n_links++] = (struct hardlink){st->st_dev, st->st_ino, p};
        return 0;
}

static int copy_dir(struct snap *s, int src, int base, int dst, const char *rel, int depth);

/* A directory's xattrs, owner, mode and times, from src's (st) to dst. */
static int dir_meta(struct snap *s, int src, int dst, const struct stat *st, uint32_t uid,
                    uint32_t gid, const char *what)
{
        copy_xattrs(src, dst);
        struct timespec t[2] = {st->st_atim, st->st_mtim};
        if (fchown(dst, uid, gid) < 0 || fchmod(dst, st->st_mode & 07777) < 0 ||
            futimens(dst, t) < 0)
                return sbx_error_set(s->err, errno, "set the owner, mode and times of %s", what);
        return 0;
}

static int copy_symlink(struct snap *s, int src, int dst, const char *name, const struct stat *st,
                        uint32_t uid, uint32_t gid)
{
        char target[PATH_MAX];
        ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
        if (n < 0)
                return sbx_error_set(s->err, errno, "read the link %s", name);
        target[n] = '\0';
        struct timespec t[2] = {st->st_atim, st->st_mtim};
        if (symlinkat(target, dst, name) < 0 ||
            fchownat(dst, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
            utimensat(dst, name, t, AT_SYMLINK_NOFOLLOW) < 0)
                return sbx_error_set(s->err, errno, "write the link %s", name);
        return 0;
}

/* The mount an entry is on; 0 when it cannot be told. */
static uint64_t mount_of(int dirfd, const char *name)
{
        struct statx sx;
        if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0 ||
            !(sx.stx_mask & STATX_MNT_ID))
                return 0;
        return sx.stx_mnt_id;
}

/* ---- what the first pass copied ---- */

struct sig {
        char *path; /* NULL: a free slot */
        dev_t dev;
        ino_t ino;
        struct timespec ctim;
        off_t size;
        mode_t mode;
        uid_t uid;
        gid_t gid;
};

struct sigtab {
        struct sig *v;
        size_t cap, n; /* cap: a power of two */
};

static size_t path_hash(const char *p)
{
        uint64_t h = 1469598103934665603ULL;
        for (; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        return (size_t)h;
}

static struct sig *sig_slot(const struct sigtab *t, const char *path)
{
        for (size_t i = path_hash(path) & (t->cap - 1);; i = (i + 1) & (t->cap - 1))
                if (!t->v[i].path || !strcmp(t->v[i].path, path))
                        return &t->v[i];
}

static int sig_grow(struct sigtab *t)
{
        struct sigtab g = {.cap = t->cap ? t->cap * 2 : 4096};
        if (!(g.v = calloc(g.cap, sizeof(*g.v))))
                return -ENOMEM;
        for (size_t i = 0; i < t->cap; i++)
                if (t->v[i].path)
                        *sig_slot(&g, t->v[i].path) = t->v[i];
        g.n = t->n;
        free(t->v);
        *t = g;
        return 0;
}

static int sig_put(struct sigtab *t, const char *path, const struct stat *st)
{
        if ((t->n + 1) * 2 > t->cap && sig_grow(t) < 0)
                return -ENOMEM;
        struct sig *g = sig_slot(t, path);
        if (!g->path) {
                if (!(g->path = strdup(path)))
                        return -ENOMEM;
                t->n++;
        }
        g->dev = st->st_dev;
        g->ino = st->st_ino;
        g->ctim = st->st_ctim;
        g->size = st->st_size;
        g->mode = st->st_mode;
        g->uid = st->st_uid;
        g->gid = st->st_gid;
        return 0;
}

static void sig_free(struct sigtab *t)
{
        for (size_t i = 0; i < t->cap; i++)
                free(t->v[i].path);
        free(t->v);
}

/* Whether the entry at rel is what the first pass copied, untouched since
 * and not touched just before it. */
static bool sig_same(const struct snap *s, const char *rel, const struct stat *st)
{
        if (!s->sigs || !s->sigs->cap)
                return false;
        const struct sig *g = sig_slot(s->sigs, rel);
        return g->path && g->dev == st->st_dev && g->ino == st->st_ino &&
               g->ctim.tv_sec == st->st_ctim.tv_sec && g->ctim.tv_nsec == st->st_ctim.tv_nsec &&
               g->size == st->st_size && g->mode == st->st_mode && g->uid == st->st_uid &&
               g->gid == st->st_gid && st->st_ctim.tv_sec < s->since_s;
}

/* A directory entry: what it is decides how it is written. */
static int copy_entry(struct snap *s, int src, int base, int dst, const char *rel, const char *name,
                      int depth)
{
        struct stat st;
        uint32_t uid, gid;
        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : sbx_error_set(s->err, errno, "stat %s", rel);
        if (!ids_ok(s, &st, &uid, &gid))
                return 0; /* not an id of the sandbox's: nothing it made */
        if (s->pass == 1 && sig_put(s->sigs, rel, &st) < 0)
                return sbx_error_set(s->err, ENOMEM, "snapshot");
        if (mount_of(src, name) != s->src_mnt) {
                /* Another filesystem mounted here: only its mount point. */
                if (S_ISDIR(st.st_mode) && mkdirat(dst, name, st.st_mode & 07777) == 0)
                        return fchownat(dst, name, uid, gid, 0) < 0 ? -errno : 0;
                return 0;
        }
        if (S_ISDIR(st.st_mode))
                return copy_dir(s, src, base, dst, rel, depth + 1);
        if (S_ISLNK(st.st_mode))
                return copy_symlink(s, src, dst, name, &st, uid, gid);
        if (S_ISFIFO(st.st_mode)) {
                if (mknodat(dst, name, S_IFIFO | (st.st_mode & 07777), 0) < 0 ||
                    fchownat(dst, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return sbx_error_set(s->err, errno, "write the FIFO %s", rel);
                return 0;
        }
        if (!S_ISREG(st.st_mode))
                return 0; /* devices, sockets: nothing of the image's */
        if (s->base_first && link_base(s, base, dst, name, &st, uid, gid))
                return 0;
        int r = hardlink(s, dst, rel, name, &st);
        if (r != 0)
                return r < 0 ? r : 0;
        return copy_file(s, src, base, dst, rel, name, &st, uid, gid);
}

/* Open name beneath parent as a directory (never through a symlink); the
 * top (depth 0) is parent itself. -1 when parent is -1 or it fails. */
static int open_sub(int parent, const char *name, bool top)
{
        if (parent < 0)
                return -1;
        return top ? dup(parent)
                   : openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Every entry of src into dst. */
static int copy_children(struct snap *s, int src, int base, int dst, const char *rel, bool top,
                         int depth)
{
        int lfd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
        if (!d) {
                if (lfd >= 0)
                        close(lfd);
                return sbx_error_set(s->err, errno, "list %s", top ? "/" : rel);
        }
        int r = 0;
        struct dirent *de;
        char child[PATH_MAX];
        while (r >= 0 && (de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (path_printf(child, sizeof(child), "%s%s%s", top ? "" : rel, top ? "" : "/",
                                de->d_name) < 0)
                        r = sbx_error_set(s->err, ENAMETOOLONG, "a path in %s", rel);
                else
                        r = copy_entry(s, src, base, dst, child, de->d_name, depth);
        }
        closedir(d);
        return r;
}

/* The directory rel (its name the last part) of src into dst, with the
 * base's directory of the same path, if any, to link unchanged files to. */
static int copy_dir(struct snap *s, int src_parent, int base_parent, int dst_parent,
                    const char *rel, int depth)
{
        const char *name = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
        bool top = depth == 0;
        if (depth > SNAP_MAX_DEPTH)
                return sbx_error_set(s->err, ELOOP, "%s: nested too deep", rel);
        _cleanup_close_ int src = open_sub(src_parent, name, top);
        struct stat st;
        uint32_t uid, gid;
        if (src < 0 || fstat(src, &st) < 0)
                return sbx_error_set(s->err, errno, "open %s", top ? "/" : rel);
        if (!ids_ok(s, &st, &uid, &gid))
                uid = gid = 0;
        if (!top && mkdirat(dst_parent, name, 0700) < 0)
                return sbx_error_set(s->err, errno, "create %s", rel);
        _cleanup_close_ int dst = open_sub(dst_parent, name, top);
        _cleanup_close_ int base = open_sub(base_parent, name, top);
        if (dst < 0)
                return sbx_error_set(s->err, errno, "open %s", rel);
        int r = copy_children(s, src, base, dst, rel, top, depth);
        if (r < 0)
                return r;
        return dir_meta(s, src, dst, &st, uid, gid, top ? "/" : rel);
}

/* ---- the second pass, frozen ---- */

static void links_reset(struct snap *s)
{
        for (size_t i = 0; i < s->n_links; i++)
                free(s->links[i].path);
        s->n_links = 0;
}

static int resync_dir(struct snap *s, int src, int base, int dst, const char *rel, int depth);

/* One entry of the frozen tree against what the first pass wrote: kept
 * when it is unchanged, walked again when it is a directory still, else
 * written anew. */
static int resync_entry(struct snap *s, int src, int base, int dst, const char *rel,
                        const char *name, int depth)
{
        struct stat st, old;
        uint32_t uid, gid;
        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : sbx_error_set(s->err, errno, "stat %s", rel);
        bool had = fstatat(dst, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
        bool ours = ids_ok(s, &st, &uid, &gid) && mount_of(src, name) == s->src_mnt;
        if (had && ours && S_ISDIR(st.st_mode) && S_ISDIR(old.st_mode)) {
                if (depth + 1 > SNAP_MAX_DEPTH)
                        return sbx_error_set(s->err, ELOOP, "%s: nested too deep", rel);
                _cleanup_close_ int sfd = open_sub(src, name, false);
                _cleanup_close_ int dfd = open_sub(dst, name, false);
                _cleanup_close_ int bfd = open_sub(base, name, false);
                if (sfd < 0 || dfd < 0)
                        return sbx_error_set(s->err, errno, "open %s", rel);
                int r = resync_dir(s, sfd, bfd, dfd, rel, depth + 1);
                struct stat now;
                if (r >= 0 && fstat(sfd, &now) < 0)
                        r = sbx_error_set(s->err, errno, "stat %s", rel);
                return r < 0 ? r : dir_meta(s, sfd, dfd, &now, uid, gid, rel);
        }
        /* A file of several names is written again, each name: the links
         * are made among what this pass writes. */
        if (had && ours && !S_ISDIR(st.st_mode) && st.st_nlink < 2 && sig_same(s, rel, &st))
                return 0;
        if (had && rm_rf_at(dst, name) < 0)
                return sbx_error_set(s->err, errno, "replace %s", rel);
        return copy_entry(s, src, base, dst, rel, name, depth);
}

/* A directory of the frozen tree against what the first pass wrote: its
 * entries resynced, what it no longer holds removed. */
static int resync_dir(struct snap *s, int src, int base, int dst, const char *rel, int depth)
{
        char **have = NULL, **was = NULL;
        size_t nh = 0, nw = 0;
        int r = dir_names_sorted(src, &have, &nh);
        if (r < 0)
                return sbx_error_set(s->err, -r, "list %s", depth ? rel : "/");
        if ((r = dir_names_sorted(dst, &was, &nw)) < 0) {
                dir_names_free(have, nh);
                return sbx_error_set(s->err, -r, "list the copy of %s", depth ? rel : "/");
        }
        char child[PATH_MAX];
        for (size_t i = 0; r >= 0 && i < nh; i++) {
                if (path_printf(child, sizeof(child), "%s%s%s", rel, *rel ? "/" : "", have[i]) < 0)
                        r = sbx_error_set(s->err, ENAMETOOLONG, "a path in %s", rel);
                else
                        r = resync_entry(s, src, base, dst, child, have[i], depth);
        }
        for (size_t i = 0; r >= 0 && i < nw; i++)
                if (!bsearch(&was[i], have, nh, sizeof(*have), dir_names_cmp) &&
                    rm_rf_at(dst, was[i]) < 0)
                        r = sbx_error_set(s->err, errno, "remove %s/%s", rel, was[i]);
        dir_names_free(have, nh);
        dir_names_free(was, nw);
        return r;
}

/* The second pass from the root. */
static int resync_root(struct snap *s, int src, int base, int dst)
{
        struct stat st;
        uint32_t uid, gid;
        if (fstat(src, &st) < 0)
                return sbx_error_set(s->err, errno, "stat /");
        if (!ids_ok(s, &st, &uid, &gid))
                uid = gid = 0;
        int r = resync_dir(s, src, base, dst, "", 0);
        return r < 0 ? r : dir_meta(s, src, dst, &st, uid, gid, "/");
}

/* An image's config (image.json's "config"), a new reference; NULL when
 * it has none. */
static json_t *image_config_of(int imgfd, const char *name)
{
        char p[256];
        if (path_join(p, sizeof(p), name, IMG_JSON) < 0)
                return NULL;
        int fd = openat(imgfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        json_t *j = fd >= 0 ? json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (fd >= 0)
                close(fd);
        json_t *cfg = json_incref(json_object_get(j, "config"));
        json_decref(j);
        return cfg;
}

/* Write j (its reference taken) as bfd's image.json. */
static int write_json(int bfd, json_t *j, struct sbx_error *err)
{
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text)
                return sbx_error_set(err, ENOMEM, "image.json");
        int r = img_write_file_at(bfd, IMG_JSON, text, strlen(text), 0644);
        free(text);
        return r < 0 ? sbx_error_set(err, -r, "write image.json") : 0;
}

/* The new image's image.json: the base's config, and where it came from. */
static int write_snapshot_json(int bfd, const char *name, const char *base, int imgfd,
                               uint64_t size, bool ephemeral, struct sbx_error *err)
{
        char when[32];
        format_rfc3339(now_ms(), when);
        json_t *cfg = image_config_of(imgfd, base);
        json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s}", "name", name, "builtAt", when, "size",
                              (json_int_t)size, "source", "snapshot", "parent", base);
        if (j && cfg)
                json_object_set_new(j, "config", cfg);
        else
                json_decref(cfg);
        if (j && ephemeral)
                json_object_set_new(j, "ephemeral", json_true());
        return write_json(bfd, j, err);
}

void rt_image_sweep(const char *images_dir)
{
        int imgfd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (imgfd < 0)
                return;
        img_remove_leftovers(imgfd, NULL, false);
        close(imgfd);
}

bool rt_image_ephemeral(const char *images_dir, const char *name)
{
        char p[PATH_MAX];
        if (!image_name_is_valid(name) ||
            snprintf(p, sizeof(p), "%s/%s/" IMG_JSON, images_dir, name) >= (int)sizeof(p))
                return false;
        json_t *j = json_load_file(p, JSON_REJECT_DUPLICATES, NULL);
        bool e = json_is_true(json_object_get(j, "ephemeral"));
        json_decref(j);
        return e;
}

/* The copy of root_fd into dst: one pass (frozen by the caller), or two
 * around the hooks' freeze. */
static int snapshot_passes(struct snap *s, int root_fd, int basefd, int dst,
                           const struct rt_snapshot_hooks *hooks)
{
        if (!hooks || !hooks->freeze)
                return copy_dir(s, root_fd, basefd, dst, "", 0);
        struct sigtab sigs = {0};
        s->sigs = &sigs;
        s->pass = 1;
        /* A ctime this close to the first pass's start may belong to a
         * write whose data the first pass read half of. */
        s->since_s = time(NULL) - 2;
        int r = copy_dir(s, root_fd, basefd, dst, "", 0);
        if (r >= 0) {
                int64_t t0 = mono_ms();
                r = hooks->freeze(hooks->ctx, s->err);
                if (r >= 0) {
                        s->pass = 2;
                        links_reset(s);
                        r = resync_root(s, root_fd, basefd, dst);
                        hooks->thaw(hooks->ctx);
                        s->st->frozen_ms = (uint64_t)(mono_ms() - t0);
                }
        }
        sig_free(&sigs);
        s->sigs = NULL;
        return r;
}

int rt_upper_open(const char *sandbox_dir)
{
        _cleanup_close_ int d = open(sandbox_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
                return -1;
        int fd = openat(d, "disk/upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                fd = openat(d, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd;
}

int rt_image_snapshot(const char *images_dir, const char *name, const char *base,
                      const struct rt_snapshot_src *src, bool ephemeral,
                      const struct rt_snapshot_hooks *hooks, struct rt_snapshot_stats *stats,
                      struct sbx_error *err)
{
        int root_fd = src->root_fd;
        struct rt_snapshot_stats local = {0};
        struct stat rst;
        if (!stats)
                stats = &local;
        memset(stats, 0, sizeof(*stats));
        if (!image_name_is_valid(name))
                return sbx_error_set(err, EINVAL, "not a valid image name");
        _cleanup_close_ int imgfd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (imgfd < 0)
                return sbx_error_set(err, errno, "open `%s`", images_dir);
        img_remove_leftovers(imgfd, name, false); /* another thread may be making one */
        if (img_complete(imgfd, name) || faccessat(imgfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return sbx_error_set(err, EEXIST, "there is an image '%s' already", name);
        if (fstat(root_fd, &rst) < 0 || !S_ISDIR(rst.st_mode))
                return sbx_error_set(err, errno ? errno : ENOTDIR, "the sandbox's root");
        uint64_t root_mnt = mount_of(root_fd, "");
        if (!root_mnt)
                return sbx_error_set(err, ENOTSUP,
                                     "this kernel does not say which mount a file is on");
        char build[128];
        _cleanup_close_ int bfd = -1;
        int r = img_build_dir(imgfd, name, build, &bfd, err);
        if (r < 0)
                return r;
        _cleanup_close_ int dst = mkdirat(bfd, "rootfs", 0755) < 0
                                      ? -1
                                      : openat(bfd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        char bpath[160];
        snprintf(bpath, sizeof(bpath), "%s/rootfs", base);
        _cleanup_close_ int basefd =
            image_name_is_valid(base)
                ? openat(imgfd, bpath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                : -1;
        struct snap s = {.dst_root = dst,
                         .upper = src->upper_fd,
                         .src_mnt = root_mnt,
                         .shift = src->uid_shift,
                         .st = stats,
                         .err = err};
        r = dst < 0 ? sbx_error_set(err, errno, "create `%s/rootfs`", build)
                    : snapshot_passes(&s, root_fd, basefd, dst, hooks);
        for (size_t i = 0; i < s.n_links; i++)
                free(s.links[i].path);
        free(s.links);
        /* Its files on disk before the marker that says they are whole. */
        if (r >= 0 && syncfs(dst) < 0)
                r = sbx_error_set(err, errno, "sync `%s`", build);
        if (r >= 0) {
                stats->size_bytes = img_rootfs_size(bfd);
                r = write_snapshot_json(bfd, name, base, imgfd, stats->size_bytes, ephemeral, err);
        }
        if (r >= 0 && renameat(imgfd, build, imgfd, name) < 0)
                r = sbx_error_set(err, errno, "install image '%s'", name);
        if (r < 0) {
                rm_rf_at(imgfd, build);
                return r;
        }
        fsync(imgfd); /* the rename itself */
        return 0;
}

/* ---- derived images (recipe builds) ---- */

static int derive_json(int bfd, const struct rt_derive *d, int srcimg, uint64_t size,
                       struct sbx_error *err)
{
        char when[32];
        format_rfc3339(now_ms(), when);
        json_t *cfg = NULL;
        if (d->config_json) {
                cfg = json_loads(d->config_json, JSON_REJECT_DUPLICATES, NULL);
                if (!json_is_object(cfg)) {
                        json_decref(cfg);
                        return sbx_error_say(err, EINVAL, "a derived image's config");
                }
        } else {
                cfg = image_config_of(srcimg, d->src_name);
        }
        json_t *j = json_pack("{s:s, s:s, s:I, s:s}", "name", d->dst_name, "builtAt", when, "size",
                              (json_int_t)size, "source", d->source);
        if (j && cfg && json_object_size(cfg))
                json_object_set(j, "config", cfg);
        json_decref(cfg);
        if (j && d->recipe)
                json_object_set_new(j, "recipe", json_string(d->recipe));
        if (j && d->build_key)
                json_object_set_new(j, "buildKey", json_string(d->build_key));
        return write_json(bfd, j, err);
}

/* What goes on top of the copy: a directory, a layer tar. */
static int derive_changes(int rootfd, const struct rt_derive *d, struct sbx_error *err)
{
        if (d->mkdir) {
                char clean[PATH_MAX];
                const char *rel = d->mkdir;
                while (*rel == '/')
                        rel++;
                int r = oci_clean_path(rel, clean, sizeof(clean));
                int fd = -1;
                if (r == 0)
                        r = oci_open_dir(rootfd, clean, true, &fd);
                if (fd >= 0)
                        close(fd);
                if (r < 0)
                        return sbx_error_set(err, -r, "WORKDIR %s", d->mkdir);
        }
        if (d->layer_fd < 0)
                return 0;
        uint64_t budget = UINT64_MAX;
        struct oci_apply_opts o = {.mode = OCI_APPLY_MERGE, .budget = &budget};
        struct oci_apply_result res;
        return oci_tar_apply(rootfd, d->layer_fd, &o, &res, err);
}

static int derive_tree(int srcimg, int bfd, const struct rt_derive *d, struct sbx_error *err)
{
        char sp[160];
        snprintf(sp, sizeof(sp), "%s/rootfs", d->src_name);
        _cleanup_close_ int src =
            openat(srcimg, sp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return sbx_error_set(err, errno, "open image '%s'", d->src_name);
        _cleanup_close_ int dst = mkdirat(bfd, "rootfs", 0755) < 0
                                      ? -1
                                      : openat(bfd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dst < 0)
                return sbx_error_set(err, errno, "create a rootfs");
        struct rt_snapshot_stats st = {0};
        struct snap s = {.dst_root = dst,
                         .src_mnt = mount_of(src, ""),
                         .shift = 0,
                         .st = &st,
                         .err = err,
                         .base_first = true};
        int r = copy_dir(&s, src, src, dst, "", 0);
        for (size_t i = 0; i < s.n_links; i++)
                free(s.links[i].path);
        free(s.links);
        if (r >= 0)
                r = derive_changes(dst, d, err);
        if (r >= 0 && syncfs(dst) < 0)
                r = sbx_error_set(err, errno, "sync the new image");
        return r;
}

int rt_image_derive(const struct rt_derive *d, struct sbx_error *err)
{
        if (!image_name_is_valid(d->dst_name) || !image_name_is_valid(d->src_name))
                return sbx_error_say(err, EINVAL, "not a valid image name");
        _cleanup_close_ int srcimg = open(d->src_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int imgfd = open(d->dst_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (srcimg < 0 || imgfd < 0)
                return sbx_error_set(err, errno, "open the images dir");
        if (!img_complete(srcimg, d->src_name))
                return sbx_error_say(err, ENOENT, "there is no image '%s'", d->src_name);
        img_remove_leftovers(imgfd, d->dst_name, false);
        if (!d->replace && faccessat(imgfd, d->dst_name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return sbx_error_say(err, EEXIST, "there is an image '%s' already", d->dst_name);
        char build[128];
        _cleanup_close_ int bfd = -1;
        int r = img_build_dir(imgfd, d->dst_name, build, &bfd, err);
        if (r < 0)
                return r;
        r = derive_tree(srcimg, bfd, d, err);
        /* A build cache's step is never listed: its size is not measured. */
        if (r >= 0)
                r = derive_json(bfd, d, srcimg,
                                strcmp(d->source, "cache") ? img_rootfs_size(bfd) : 0, err);
        if (r >= 0)
                r = d->replace ? img_install_build(imgfd, build, d->dst_name, err)
                    : renameat(imgfd, build, imgfd, d->dst_name) < 0
                        ? sbx_error_set(err, errno, "install image '%s'", d->dst_name)
                        : 0;
        if (r < 0) {
                rm_rf_at(imgfd, build);
                return r;
        }
        fsync(imgfd);
        return 0;
}
