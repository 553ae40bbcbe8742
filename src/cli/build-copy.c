/* SPDX-License-Identifier: MIT */
/* COPY's layer (build.h): the sources, read beneath the build context
 * (never through a symlink out of it, never "..": RESOLVE_BENEATH), as a
 * tar of root-owned entries that the image build applies like any layer.
 * Files, directories and symlinks are copied (a symlink as itself, not
 * what it names); anything else in the context is an error. The digest
 * covers what the copy holds and not when it was touched: an unchanged
 * context keeps the step's cache. */
#include "build.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../runtime/recipe.h"

#define COPY_MAX_DEPTH 128
#define COPY_CHUNK (256u << 10)

struct copy {
        int ctxfd;
        struct archive *a;
        EVP_MD_CTX *md;
        unsigned char *chunk;
        struct sbx_error *err;
};

static int open_beneath(int dirfd, const char *path, int flags)
{
        struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC,
                               .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
        int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

static void digest_record(struct copy *c, char type, const char *path, mode_t mode, uint64_t size)
{
        char head[64];
        int n = snprintf(head, sizeof(head), "%c %o %llu ", type, (unsigned)mode & 07777,
                         (unsigned long long)size);
        EVP_DigestUpdate(c->md, head, (size_t)n);
        EVP_DigestUpdate(c->md, path, strlen(path) + 1);
}

static int arch_error(struct copy *c, const char *what)
{
        return sbx_error_say(c->err, EIO, "COPY: %s: %s", what, archive_error_string(c->a));
}

static struct archive_entry *entry_for(const char *path, const struct stat *st, mode_t type)
{
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return NULL;
        archive_entry_set_pathname(e, path);
        archive_entry_set_filetype(e, type);
        archive_entry_set_perm(e, st->st_mode & 0777);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
        return e;
}

static int put_file(struct copy *c, int fd, const char *path, const struct stat *st)
{
        struct archive_entry *e = entry_for(path, st, AE_IFREG);
        if (!e)
                return sbx_error_set(c->err, ENOMEM, "COPY");
        archive_entry_set_size(e, st->st_size);
        digest_record(c, 'f', path, st->st_mode, (uint64_t)st->st_size);
        int r = archive_write_header(c->a, e) == ARCHIVE_OK ? 0 : arch_error(c, path);
        archive_entry_free(e);
        for (off_t left = st->st_size; r == 0 && left > 0;) {
                ssize_t n = read(fd, c->chunk, (size_t)MIN((off_t)COPY_CHUNK, left));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sbx_error_set(c->err, n < 0 ? errno : EIO,
                                             "COPY: read %s (did it change?)", path);
                EVP_DigestUpdate(c->md, c->chunk, (size_t)n);
                if (archive_write_data(c->a, c->chunk, (size_t)n) != n)
                        return arch_error(c, path);
                left -= n;
        }
        return r;
}

static int put_symlink(struct copy *c, int parent, const char *name, const char *path,
                       const struct stat *st)
{
        char target[PATH_MAX];
        ssize_t n = readlinkat(parent, name, target, sizeof(target) - 1);
        if (n < 0)
                return sbx_error_set(c->err, errno, "COPY: read the link %s", path);
        target[n] = '\0';
        struct archive_entry *e = entry_for(path, st, AE_IFLNK);
        if (!e)
                return sbx_error_set(c->err, ENOMEM, "COPY");
        archive_entry_set_symlink(e, target);
        digest_record(c, 'l', path, 0, 0);
        EVP_DigestUpdate(c->md, target, (size_t)n + 1);
        int r = archive_write_header(c->a, e) == ARCHIVE_OK ? 0 : arch_error(c, path);
        archive_entry_free(e);
        return r;
}

static int put_tree(struct copy *c, int fd, const char *path, const struct stat *st, int depth);

/* The entry `name` of the directory parent, at path in the layer. */
static int put_entry(struct copy *c, int parent, const char *name, const char *path, int depth)
{
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return sbx_error_set(c->err, errno, "COPY: %s", path);
        if (S_ISLNK(st.st_mode))
                return put_symlink(c, parent, name, path, &st);
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
                return sbx_error_say(c->err, EINVAL,
                                     "COPY: %s is not a file, a directory or a symlink", path);
        _cleanup_close_ int fd =
            openat(parent, name,
                   (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(c->err, errno, "COPY: open %s", path);
        return S_ISDIR(st.st_mode) ? put_tree(c, fd, path, &st, depth + 1)
                                   : put_file(c, fd, path, &st);
}

/* A directory and what it holds, in name order (the digest must not
 * depend on the order readdir gives). */
static int put_tree(struct copy *c, int fd, const char *path, const struct stat *st, int depth)
{
        if (depth > COPY_MAX_DEPTH)
                return sbx_error_say(c->err, ELOOP, "COPY: %s: nested too deep", path);
        int r = 0;
        /* The image's "/" keeps its own owner and mode. */
        if (strcmp(path, ".")) {
                struct archive_entry *e = entry_for(path, st, AE_IFDIR);
                if (!e)
                        return sbx_error_set(c->err, ENOMEM, "COPY");
                digest_record(c, 'd', path, st->st_mode, 0);
                r = archive_write_header(c->a, e) == ARCHIVE_OK ? 0 : arch_error(c, path);
                archive_entry_free(e);
        }
        char **names = NULL;
        size_t n = 0;
        if (r == 0 && (r = dir_names_sorted(fd, &names, &n)) < 0)
                r = sbx_error_set(c->err, -r, "COPY: list %s", path);
        char child[PATH_MAX];
        for (size_t i = 0; i < n; i++) {
                if (r == 0 && path_printf(child, sizeof(child), "%s/%s", path, names[i]) < 0)
                        r = sbx_error_say(c->err, ENAMETOOLONG, "COPY: a path in %s", path);
                if (r == 0)
                        r = put_entry(c, fd, names[i], child, depth);
                free(names[i]);
        }
        free(names);
        return r;
}

/* One source: "" is the context itself. */
static int put_source(struct copy *c, const char *src, const char *dst, bool dst_dir)
{
        char clean[PATH_MAX];
        int r = recipe_abs_path("/", src, clean, sizeof(clean));
        if (r < 0)
                return sbx_error_say(c->err, EINVAL, "COPY %s: a source is inside the context",
                                     src);
        const char *rel = clean[1] ? clean + 1 : ".";
        _cleanup_close_ int fd = open_beneath(c->ctxfd, rel, O_PATH | O_NOFOLLOW);
        if (fd < 0)
                return sbx_error_set(c->err, -fd, "COPY %s (in the build context)", src);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return sbx_error_set(c->err, errno, "COPY %s", src);
        const char *base = strrchr(clean, '/') + 1;
        char target[PATH_MAX];
        /* A directory's contents go to dst; a file goes to dst, or into it. */
        if (S_ISDIR(st.st_mode) || !dst_dir || !*base)
                snprintf(target, sizeof(target), "%s", dst + 1);
        else if (path_printf(target, sizeof(target), "%s%s%s", dst + 1, dst[1] ? "/" : "", base) <
                 0)
                return sbx_error_say(c->err, ENAMETOOLONG, "COPY %s", src);
        size_t tl = strlen(target);
        while (tl > 0 && target[tl - 1] == '/')
                target[--tl] = '\0';
        if (!*target && !S_ISDIR(st.st_mode))
                return sbx_error_say(c->err, EINVAL, "COPY %s: a file cannot be /", src);
        if (S_ISLNK(st.st_mode))
                return sbx_error_say(c->err, EINVAL,
                                     "COPY %s: a source that is a symlink (name what it names)",
                                     src);
        _cleanup_close_ int rfd = open_beneath(
            c->ctxfd, rel, (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY | O_NOFOLLOW);
        if (rfd < 0)
                return sbx_error_set(c->err, -rfd, "COPY %s", src);
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                return sbx_error_say(c->err, EINVAL, "COPY %s: not a file or a directory", src);
        return S_ISDIR(st.st_mode) ? put_tree(c, rfd, *target ? target : ".", &st, 0)
                                   : put_file(c, rfd, target, &st);
}

int build_copy_layer(int ctxfd, const char *const *srcs, size_t n, const char *dst, int out_fd,
                     char digest[65], struct sbx_error *err)
{
        struct copy c = {.ctxfd = ctxfd, .err = err};
        bool dst_dir = n > 1 || dst[strlen(dst) - 1] == '/';
        c.a = archive_write_new();
        c.md = EVP_MD_CTX_new();
        c.chunk = malloc(COPY_CHUNK);
        int r = c.a && c.md && c.chunk && EVP_DigestInit_ex(c.md, EVP_sha256(), NULL)
                    ? 0
                    : sbx_error_set(err, ENOMEM, "COPY");
        if (r == 0 && (archive_write_set_format_pax_restricted(c.a) != ARCHIVE_OK ||
                       archive_write_open_fd(c.a, out_fd) != ARCHIVE_OK))
                r = arch_error(&c, "start the layer");
        EVP_DigestUpdate(c.md, dst, strlen(dst) + 1);
        for (size_t i = 0; r == 0 && i < n; i++)
                r = put_source(&c, srcs[i], dst, dst_dir);
        if (r == 0 && archive_write_close(c.a) != ARCHIVE_OK)
                r = arch_error(&c, "finish the layer");
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int ml = 0;
        if (r == 0 && (!EVP_DigestFinal_ex(c.md, md, &ml) || ml != 32))
                r = sbx_error_say(err, EIO, "COPY: digest");
        static const char hex[] = "0123456789abcdef";
        for (unsigned i = 0; r == 0 && i < 32; i++) {
                digest[2 * i] = hex[md[i] >> 4];
                digest[2 * i + 1] = hex[md[i] & 15];
        }
        digest[64] = '\0';
        if (c.a)
                archive_write_free(c.a);
        EVP_MD_CTX_free(c.md);
        free(c.chunk);
        return r;
}
