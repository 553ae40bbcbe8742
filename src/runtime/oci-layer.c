/* SPDX-License-Identifier: MIT */
/* One layer tar applied to a tree.
 *
 * The blob is read through two libarchive readers: the first only
 * undoes the compression (gzip, zstd or none, format "raw"), the second
 * parses the tar it hands over, so the uncompressed bytes pass through
 * here once, are hashed (the layer's diff_id) and counted against the
 * size cap (a gzip bomb stops at the cap, not at the disk's end).
 *
 * A layer is applied in two passes. The first reads only headers: every
 * entry is checked (path, type, ids), and the whiteouts act: `.wh.NAME`
 * removes NAME from what the lower layers made, `.wh..wh..opq` in D
 * empties D of it. Whiteouts apply to lower layers only (OCI image spec,
 * "Whiteouts"), and in the first pass the tree holds nothing else, so
 * order inside the tar does not matter. The second pass writes the
 * entries, whiteout files excepted. */
#include "oci.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define LAYER_BUF (128 * 1024)
#define ID_MAX 65535 /* an image's ids are 0..65535: the sandbox's range */

struct layer_stream {
        int fd;
        struct archive *raw; /* decompression only */
        struct archive *tar;
        EVP_MD_CTX *md; /* sha256 of the uncompressed bytes */
        uint64_t unpacked;
        uint64_t *budget;
        bool over_budget;
        const struct oci_apply_opts *o;
        enum rt_import_phase phase;
        int64_t last_report;
        unsigned char buf[LAYER_BUF];
};

static la_ssize_t stream_read(struct archive *a, void *ctx, const void **out)
{
        struct layer_stream *s = ctx;
        la_ssize_t n = archive_read_data(s->raw, s->buf, sizeof(s->buf));
        if (n < 0) {
                archive_set_error(a, archive_errno(s->raw), "%s", archive_error_string(s->raw));
                return -1;
        }
        if ((uint64_t)n > *s->budget) {
                s->over_budget = true;
                archive_set_error(a, EFBIG, "the image is larger than the size cap (--max-size)");
                return -1;
        }
        *s->budget -= (uint64_t)n;
        s->unpacked += (uint64_t)n;
        EVP_DigestUpdate(s->md, s->buf, (size_t)n);
        int64_t now = mono_ms();
        if (s->o->progress && now - s->last_report >= 100) {
                s->last_report = now;
                s->o->progress(s->o->ctx, s->phase, (uint64_t)archive_filter_bytes(s->raw, -1),
                               s->unpacked);
        }
        *out = s->buf;
        return n;
}

static void stream_close(struct layer_stream *s)
{
        if (s->tar)
                archive_read_free(s->tar);
        if (s->raw)
                archive_read_free(s->raw);
        if (s->md)
                EVP_MD_CTX_free(s->md);
        s->tar = s->raw = NULL;
        s->md = NULL;
}

static int stream_error(struct archive *a, struct sbx_error *err, const char *what)
{
        int e = archive_errno(a);
        const char *msg = archive_error_string(a);
        return sbx_error_say(err, e > 0 ? e : EINVAL, "%s: %s", what, msg ? msg : "unreadable");
}

/* Open the blob from its start. Only libarchive's own gzip and zstd code
 * is used: a filter it would run as an external program (ARCHIVE_WARN)
 * is refused. */
static int stream_open(struct layer_stream *s, struct sbx_error *err)
{
        if (lseek(s->fd, 0, SEEK_SET) < 0)
                return sbx_error_set(err, errno, "rewind a layer");
        s->raw = archive_read_new();
        s->tar = archive_read_new();
        s->md = EVP_MD_CTX_new();
        s->unpacked = 0;
        if (!s->raw || !s->tar || !s->md || !EVP_DigestInit_ex(s->md, EVP_sha256(), NULL))
                return sbx_error_set(err, ENOMEM, "open a layer");
        if (archive_read_support_filter_gzip(s->raw) != ARCHIVE_OK ||
            archive_read_support_filter_zstd(s->raw) != ARCHIVE_OK ||
            archive_read_support_format_raw(s->raw) != ARCHIVE_OK ||
            archive_read_support_format_tar(s->tar) != ARCHIVE_OK)
                return sbx_error_say(err, ENOTSUP, "libarchive lacks gzip, zstd or tar");
        struct archive_entry *e;
        if (archive_read_open_fd(s->raw, s->fd, LAYER_BUF) != ARCHIVE_OK ||
            archive_read_next_header(s->raw, &e) != ARCHIVE_OK)
                return stream_error(s->raw, err, "read the layer");
        if (archive_read_open(s->tar, s, NULL, stream_read, NULL) != ARCHIVE_OK)
                return stream_error(s->tar, err, "read the layer's tar");
        return 0;
}

/* After the tar's end: the padding after it is part of the diff_id too. */
static int stream_finish(struct layer_stream *s, struct oci_apply_result *ret,
                         struct sbx_error *err)
{
        for (;;) {
                la_ssize_t n = archive_read_data(s->raw, s->buf, sizeof(s->buf));
                if (n < 0)
                        return stream_error(s->raw, err, "read the layer");
                if (n == 0)
                        break;
                if ((uint64_t)n > *s->budget)
                        return sbx_error_say(err, EFBIG, "the image is larger than the size cap");
                *s->budget -= (uint64_t)n;
                s->unpacked += (uint64_t)n;
                EVP_DigestUpdate(s->md, s->buf, (size_t)n);
        }
        unsigned len = 0;
        if (!EVP_DigestFinal_ex(s->md, ret->diff_id, &len) || len != OCI_SHA256_LEN)
                return sbx_error_set(err, EIO, "sha256");
        ret->unpacked = s->unpacked;
        return 0;
}

/* ---- checks on an entry (both passes) ---- */

struct entry {
        struct archive_entry *ae;
        char path[PATH_MAX]; /* clean, relative */
        char link[PATH_MAX]; /* a hard link's target, clean */
        bool hardlink;
        mode_t type;
};

static int entry_check(const struct oci_apply_opts *o, struct entry *en, struct sbx_error *err)
{
        const char *raw = archive_entry_pathname(en->ae);
        if (!raw)
                return sbx_error_say(err, EINVAL, "an entry has no readable path");
        int r = oci_clean_path(raw, en->path, sizeof(en->path));
        if (r < 0)
                return sbx_error_say(err, EPERM,
                                     r == -EINVAL ? "entry `%s`: an absolute path or `..` "
                                                    "component, refused (it could write "
                                                    "outside the image)"
                                                  : "entry `%s`: path too long",
                                     raw);
        const char *hl = archive_entry_hardlink(en->ae);
        en->hardlink = hl != NULL;
        en->type = archive_entry_filetype(en->ae);
        if (hl && oci_clean_path(hl, en->link, sizeof(en->link)) < 0)
                return sbx_error_say(err, EPERM,
                                     "hard link `%s` -> `%s`: the target leaves the image",
                                     en->path, hl);
        if (o->mode == OCI_APPLY_PLAIN)
                return 0;
        if (!hl && (en->type == AE_IFCHR || en->type == AE_IFBLK))
                return sbx_error_say(err, EPERM,
                                     "entry `%s` is a device node, refused (a sandbox gets its own "
                                     "/dev)",
                                     en->path);
        if (!hl && en->type != AE_IFREG && en->type != AE_IFDIR && en->type != AE_IFLNK &&
            en->type != AE_IFIFO)
                return sbx_error_say(err, EPERM, "entry `%s`: unsupported file type 0%o", en->path,
                                     (unsigned)en->type);
        la_int64_t uid = archive_entry_uid(en->ae), gid = archive_entry_gid(en->ae);
        if (uid < 0 || uid > ID_MAX || gid < 0 || gid > ID_MAX)
                return sbx_error_say(err, EPERM,
                                     "entry `%s`: uid %lld / gid %lld is beyond 65535 (an image's "
                                     "ids are 0..65535)",
                                     en->path, (long long)uid, (long long)gid);
        mode_t perm = archive_entry_perm(en->ae);
        if (o->no_setuid && en->type != AE_IFDIR && (perm & (S_ISUID | S_ISGID)))
                return sbx_error_say(err, EPERM, "entry `%s` is setuid or setgid (--no-setuid)",
                                     en->path);
        return 0;
}

static int parent_error(struct sbx_error *err, int r, const char *what, const char *path)
{
        if (r == -EXDEV || r == -ELOOP)
                return sbx_error_say(err, EPERM,
                                     "%s `%s`: its parent goes through a symlink that leads out "
                                     "of the image, refused",
                                     what, path);
        if (r == -ENOTDIR)
                return sbx_error_say(err, ENOTDIR, "%s `%s`: its parent is not a directory", what,
                                     path);
        return sbx_error_set(err, -r, "%s `%s`: open its parent", what, path);
}

/* ---- pass 1: whiteouts ---- */

static int whiteout_apply(int rootfd, struct entry *en, struct sbx_error *err)
{
        char path[PATH_MAX];
        memcpy(path, en->path, sizeof(path));
        const char *dir, *base;
        oci_split_path(path, &dir, &base);
        if (strncmp(base, WH_PREFIX, strlen(WH_PREFIX)))
                return 0;
        _cleanup_close_ int dfd = -1;
        int r = oci_open_dir(rootfd, dir, false, &dfd);
        if (r == -ENOENT)
                return 0; /* nothing below to hide */
        if (r < 0)
                return parent_error(err, r, "whiteout", en->path);
        if (!strcmp(base, WH_OPAQUE)) {
                r = rm_rf_contents(dfd);
                return r < 0 ? sbx_error_set(err, -r, "opaque dir `%s`", dir) : 0;
        }
        const char *name = base + strlen(WH_PREFIX);
        if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
                return sbx_error_say(err, EINVAL, "whiteout `%s` names nothing", en->path);
        r = rm_rf_at(dfd, name);
        return r < 0 ? sbx_error_set(err, -r, "whiteout `%s`", en->path) : 0;
}

static bool is_whiteout(const char *path)
{
        const char *slash = strrchr(path, '/');
        return !strncmp(slash ? slash + 1 : path, WH_PREFIX, strlen(WH_PREFIX));
}

/* ---- pass 2: the entries ---- */

/* Make room for the entry at base: what a lower layer (or an earlier
 * entry) left there goes, unless both are directories. 1: a directory
 * stays. */
static int make_room(int pfd, const char *base, bool want_dir)
{
        struct stat st;
        if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (want_dir && S_ISDIR(st.st_mode))
                return 1;
        return rm_rf_at(pfd, base);
}

static int set_xattrs(int fd, struct archive_entry *ae, const char *path, struct sbx_error *err)
{
        const char *name;
        const void *value;
        size_t size;
        archive_entry_xattr_reset(ae);
        while (archive_entry_xattr_next(ae, &name, &value, &size) == ARCHIVE_OK) {
                /* user.* is the image's own; security.capability is how a
                 * file carries capabilities (ping). trusted.* and other
                 * security.* would speak to the host's kernel: ignored. */
                if (strncmp(name, "user.", 5) && strcmp(name, "security.capability"))
                        continue;
                if (fsetxattr(fd, name, value, size, 0) < 0)
                        return sbx_error_set(err, errno, "entry `%s`: set xattr %s", path, name);
        }
        return 0;
}

/* Owner, mode (after the owner: chown clears setuid), xattrs, mtime. */
static int set_meta(int fd, const struct oci_apply_opts *o, const struct entry *en,
                    struct sbx_error *err)
{
        if (o->mode == OCI_APPLY_PLAIN)
                return 0;
        struct archive_entry *ae = en->ae;
        if (fchown(fd, (uid_t)archive_entry_uid(ae), (gid_t)archive_entry_gid(ae)) < 0 ||
            fchmod(fd, archive_entry_perm(ae) & 07777) < 0)
                return sbx_error_set(err, errno, "entry `%s`: owner and mode", en->path);
        int r = set_xattrs(fd, ae, en->path, err);
        if (r < 0)
                return r;
        struct timespec ts[2] = {
            {.tv_sec = archive_entry_mtime(ae), .tv_nsec = archive_entry_mtime_nsec(ae)},
            {.tv_sec = archive_entry_mtime(ae), .tv_nsec = archive_entry_mtime_nsec(ae)},
        };
        if (futimens(fd, ts) < 0)
                return sbx_error_set(err, errno, "entry `%s`: mtime", en->path);
        return 0;
}

/* Symlinks and FIFOs have no fd to set things through: by name. */
static int set_meta_at(int pfd, const char *base, const struct oci_apply_opts *o,
                       const struct entry *en, struct sbx_error *err)
{
        if (o->mode == OCI_APPLY_PLAIN)
                return 0;
        struct archive_entry *ae = en->ae;
        if (fchownat(pfd, base, (uid_t)archive_entry_uid(ae), (gid_t)archive_entry_gid(ae),
                     AT_SYMLINK_NOFOLLOW) < 0)
                return sbx_error_set(err, errno, "entry `%s`: owner", en->path);
        if (en->type == AE_IFIFO && fchmodat(pfd, base, archive_entry_perm(ae) & 07777, 0) < 0)
                return sbx_error_set(err, errno, "entry `%s`: mode", en->path);
        struct timespec ts[2] = {
            {.tv_sec = archive_entry_mtime(ae), .tv_nsec = archive_entry_mtime_nsec(ae)},
            {.tv_sec = archive_entry_mtime(ae), .tv_nsec = archive_entry_mtime_nsec(ae)},
        };
        if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
                return sbx_error_set(err, errno, "entry `%s`: mtime", en->path);
        return 0;
}

static int write_data(struct archive *a, int fd, const struct entry *en, struct sbx_error *err)
{
        const void *buf;
        size_t size;
        la_int64_t off;
        int ar;
        while ((ar = archive_read_data_block(a, &buf, &size, &off)) == ARCHIVE_OK) {
                for (size_t done = 0; done < size;) {
                        ssize_t n = pwrite(fd, (const char *)buf + done, size - done,
                                           (off_t)off + (off_t)done);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                return sbx_error_set(err, n < 0 ? errno : EIO, "entry `%s`: write",
                                                     en->path);
                        done += (size_t)n;
                }
        }
        if (ar != ARCHIVE_EOF)
                return stream_error(a, err, en->path);
        /* A sparse file's hole at its end. */
        la_int64_t len = archive_entry_size(en->ae);
        if (len > 0 && ftruncate(fd, (off_t)len) < 0)
                return sbx_error_set(err, errno, "entry `%s`: size", en->path);
        return 0;
}

static int make_file(struct archive *a, int pfd, const char *base, const struct oci_apply_opts *o,
                     const struct entry *en, struct sbx_error *err)
{
        _cleanup_close_ int fd =
            openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return sbx_error_set(err, errno, "entry `%s`: create", en->path);
        int r = write_data(a, fd, en, err);
        if (r >= 0 && o->mode == OCI_APPLY_PLAIN && fchmod(fd, 0644) < 0)
                r = sbx_error_set(err, errno, "entry `%s`: mode", en->path);
        return r < 0 ? r : set_meta(fd, o, en, err);
}

static int make_dir(int pfd, const char *base, bool exists, const struct oci_apply_opts *o,
                    const struct entry *en, struct sbx_error *err)
{
        if (!exists && mkdirat(pfd, base, 0700) < 0)
                return sbx_error_set(err, errno, "entry `%s`: mkdir", en->path);
        _cleanup_close_ int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "entry `%s`: open", en->path);
        if (o->mode == OCI_APPLY_PLAIN)
                return fchmod(fd, 0755) < 0 ? sbx_error_set(err, errno, "chmod `%s`", en->path) : 0;
        return set_meta(fd, o, en, err);
}

/* A hard link names an entry already in the tree, beneath it; the link
 * itself is made from an fd, so nothing is resolved twice. */
static int make_hardlink(int rootfd, int pfd, const char *base, const struct entry *en,
                         struct sbx_error *err)
{
        _cleanup_close_ int tfd = -1;
        int r = oci_open_beneath(rootfd, en->link, O_PATH | O_NOFOLLOW, &tfd);
        if (r == -ENOENT)
                return sbx_error_say(err, ENOENT, "hard link `%s` -> `%s`: no such entry", en->path,
                                     en->link);
        if (r < 0)
                return parent_error(err, r, "hard link target", en->link);
        struct stat st;
        if (fstat(tfd, &st) < 0 || S_ISDIR(st.st_mode))
                return sbx_error_say(err, EPERM, "hard link `%s` -> `%s`: a directory", en->path,
                                     en->link);
        if (linkat(tfd, "", pfd, base, AT_EMPTY_PATH) < 0)
                return sbx_error_set(err, errno, "hard link `%s` -> `%s`", en->path, en->link);
        return 0;
}

static int make_entry(struct archive *a, int rootfd, int pfd, const char *base,
                      const struct oci_apply_opts *o, const struct entry *en, struct sbx_error *err)
{
        bool dir = !en->hardlink && en->type == AE_IFDIR;
        int r = make_room(pfd, base, dir);
        if (r < 0)
                return sbx_error_set(err, -r, "entry `%s`: replace what was there", en->path);
        if (en->hardlink)
                return make_hardlink(rootfd, pfd, base, en, err);
        switch (en->type) {
        case AE_IFDIR:
                return make_dir(pfd, base, r == 1, o, en, err);
        case AE_IFREG:
                return make_file(a, pfd, base, o, en, err);
        case AE_IFLNK: {
                /* The target is kept as written: it is resolved only
                 * inside a sandbox, or beneath this tree by the parent
                 * checks above. */
                const char *target = archive_entry_symlink(en->ae);
                if (!target || !*target)
                        return sbx_error_say(err, EINVAL, "symlink `%s` has no target", en->path);
                if (symlinkat(target, pfd, base) < 0)
                        return sbx_error_set(err, errno, "entry `%s`: symlink", en->path);
                return set_meta_at(pfd, base, o, en, err);
        }
        case AE_IFIFO:
                if (o->mode == OCI_APPLY_PLAIN)
                        return 0;
                if (mknodat(pfd, base, S_IFIFO | 0600, 0) < 0)
                        return sbx_error_set(err, errno, "entry `%s`: mkfifo", en->path);
                return set_meta_at(pfd, base, o, en, err);
        default:
                return 0; /* PLAIN: what is not a file, dir or link is skipped */
        }
}

static int extract(struct archive *a, int rootfd, const struct oci_apply_opts *o, struct entry *en,
                   struct sbx_error *err)
{
        if (!en->path[0] || (o->mode == OCI_APPLY_MERGE && is_whiteout(en->path)))
                return 0; /* the root itself is the build's; whiteouts acted in pass 1 */
        char path[PATH_MAX];
        memcpy(path, en->path, sizeof(path));
        const char *dir, *base;
        oci_split_path(path, &dir, &base);
        _cleanup_close_ int pfd = -1;
        int r = oci_open_dir(rootfd, dir, true, &pfd);
        if (r < 0)
                return parent_error(err, r, "entry", en->path);
        return make_entry(a, rootfd, pfd, base, o, en, err);
}

/* One read of the tar: pass 1 (extracting false) or pass 2. */
static int tar_pass(struct layer_stream *s, int rootfd, bool extracting,
                    struct oci_apply_result *ret, struct sbx_error *err)
{
        const struct oci_apply_opts *o = s->o;
        int r = stream_open(s, err);
        if (r < 0)
                return r;
        _cleanup_free_ struct entry *en = calloc(1, sizeof(*en));
        if (!en)
                return sbx_error_set(err, ENOMEM, "read a layer");
        for (;;) {
                int ar = archive_read_next_header(s->tar, &en->ae);
                if (ar == ARCHIVE_EOF)
                        break;
                if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
                        if (s->over_budget)
                                return sbx_error_say(err, EFBIG,
                                                     "the image is larger than the size cap "
                                                     "(--max-size)");
                        return stream_error(s->tar, err, "read the layer's tar");
                }
                if ((r = entry_check(o, en, err)) < 0)
                        return r;
                if (extracting)
                        r = extract(s->tar, rootfd, o, en, err);
                else if (o->mode == OCI_APPLY_MERGE)
                        r = whiteout_apply(rootfd, en, err);
                if (r < 0)
                        return r;
        }
        if (s->over_budget)
                return sbx_error_say(err, EFBIG, "the image is larger than the size cap");
        return stream_finish(s, ret, err);
}

int oci_tar_apply(int rootfd, int fd, const struct oci_apply_opts *o, struct oci_apply_result *ret,
                  struct sbx_error *err)
{
        _cleanup_free_ struct layer_stream *s = calloc(1, sizeof(*s));
        if (!s)
                return sbx_error_set(err, ENOMEM, "read a layer");
        s->fd = fd;
        s->o = o;
        s->budget = o->budget;
        struct oci_apply_result scan = {0};
        int r = 0;
        if (o->mode == OCI_APPLY_MERGE) {
                /* The scan reads the same bytes again: they do not count
                 * twice against the cap. */
                uint64_t before = *o->budget;
                s->phase = RT_IMPORT_SCAN;
                r = tar_pass(s, rootfd, false, &scan, err);
                stream_close(s);
                *o->budget = before;
        }
        if (r >= 0) {
                s->phase = RT_IMPORT_EXTRACT;
                r = tar_pass(s, rootfd, true, ret, err);
        }
        stream_close(s);
        return r;
}
