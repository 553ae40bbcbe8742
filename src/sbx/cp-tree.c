/* SPDX-License-Identifier: MIT */
/* sbx cp of a directory, as a tar stream through a process in the sandbox:
 * the files API carries bytes only, a tar carries names, types, modes,
 * symlinks (as links, never followed) and times. One process per copy,
 * whatever the number of files.
 *
 * Upload: `tar -x` runs in the sandbox (as root, in the target directory,
 * made first) reading its stdin; sbx walks the local tree with lstat and
 * writes the archive (libarchive) into that stdin in chunks. Special files
 * (FIFOs, sockets, devices) are skipped with a warning.
 *
 * Download: `tar -c` runs in the sandbox, spawned lossless, and its stdout
 * is streamed by a thread into a pipe that libarchive reads and extracts
 * from, so nothing is held whole. Every entry is hostile: only files,
 * directories, symlinks and hard links are made; a name or link target
 * that is absolute or holds a `..` component is refused, nothing is
 * written through a symlink, and the set-id bits are dropped. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cp.h"
#include "common/util.h"

#define MAX_DEPTH 64
/* Bytes per stdin write (the wire takes just under 8 MiB). */
#define CHUNK (1024 * 1024)
/* The start of tar's stderr kept for a message. */
#define ERR_KEEP 512

static int join(const char *a, const char *b, char **ret)
{
        size_t n = strlen(a);
        return asprintf(ret, "%s%s%s", a, n && a[n - 1] == '/' ? "" : "/", b) < 0 ? -ENOMEM : 0;
}

/* ------------------------------------------------------------ upload */

struct put {
        struct sbx_ctx *ctx;
        const char *name;
        const char *id; /* the sandbox's tar */
        struct archive *a;
        char *buf;
        size_t len;
        struct sbx_err err;
        int r; /* the first stdin error */
        char *data;
};

static int flush(struct put *p, bool close)
{
        if (p->r < 0)
                return p->r;
        p->r = sbx_stdin(p->ctx->client, p->name, p->id, p->buf, p->len, close, &p->err);
        p->len = 0;
        return p->r;
}

static la_ssize_t put_write(struct archive *a, void *ctx, const void *data, size_t len)
{
        struct put *p = ctx;
        size_t n = MIN(len, CHUNK - p->len);
        memcpy(p->buf + p->len, data, n);
        p->len += n;
        if (p->len == CHUNK && flush(p, false) < 0) {
                archive_set_error(a, EIO, "the sandbox's tar took no more");
                return -1;
        }
        return (la_ssize_t)n;
}

static int local_error(const char *path, const char *what)
{
        fprintf(stderr, "sbx: cp: %s: %s\n", path, what);
        return SBX_EXIT_LOCAL;
}

static int archive_error(struct put *p, const char *path)
{
        // A stdin write that failed is the server's error, not the file's.
        if (p->r < 0)
                return sbx_fail(p->ctx, p->name, p->r, &p->err);
        return local_error(path, archive_error_string(p->a));
}

static int put_data(struct put *p, const char *lp)
{
        _cleanup_close_ int fd = open(lp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return local_error(lp, strerror(errno));
        for (;;) {
                ssize_t n = read(fd, p->data, CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return local_error(lp, strerror(errno));
                if (n == 0)
                        return 0;
                if (archive_write_data(p->a, p->data, (size_t)n) != n)
                        return archive_error(p, lp);
        }
}

static int put_walk(struct put *p, const char *lp, const char *ap, int depth);

/* One entry: lp its local path, ap its name in the archive. */
static int put_entry(struct put *p, const char *lp, const char *ap, int depth)
{
        struct stat st;
        if (lstat(lp, &st) < 0)
                return local_error(lp, strerror(errno));
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
                fprintf(stderr, "sbx: cp: %s: skipped (not a file, directory or symlink)\n", lp);
                return 0;
        }
        char target[4096] = "";
        if (S_ISLNK(st.st_mode)) {
                ssize_t n = readlink(lp, target, sizeof(target) - 1);
                if (n < 0)
                        return local_error(lp, strerror(errno));
                target[n] = '\0';
        }
        struct archive_entry *e = archive_entry_new();
        if (!e)
                return local_error(lp, strerror(ENOMEM));
        archive_entry_copy_stat(e, &st);
        archive_entry_set_pathname(e, ap);
        // The sandbox's root owns what is copied in, as the files API does.
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_nlink(e, 1);
        if (S_ISLNK(st.st_mode))
                archive_entry_set_symlink(e, target);
        int r = archive_write_header(p->a, e) == ARCHIVE_OK ? 0 : archive_error(p, lp);
        archive_entry_free(e);
        if (r == 0 && S_ISREG(st.st_mode))
                r = put_data(p, lp);
        if (r == 0 && S_ISDIR(st.st_mode))
                r = put_walk(p, lp, ap, depth + 1);
        return r;
}

static int put_walk(struct put *p, const char *lp, const char *ap, int depth)
{
        if (depth > MAX_DEPTH) {
                fprintf(stderr, "sbx: cp: %s: deeper than %d directories\n", lp, MAX_DEPTH);
                return SBX_EXIT_LOCAL;
        }
        DIR *d = opendir(lp);
        if (!d)
                return local_error(lp, strerror(errno));
        int rc = 0;
        struct dirent *e;
        while (rc == 0 && (e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                        continue;
                _cleanup_free_ char *l = NULL, *a = NULL;
                rc = join(lp, e->d_name, &l) < 0 || join(ap, e->d_name, &a) < 0
                         ? SBX_EXIT_LOCAL
                         : put_entry(p, l, a, depth);
        }
        closedir(d);
        return rc;
}

/* tar's end: its exit code, and the start of its stderr in msg. */
struct tar_end {
        char msg[ERR_KEEP];
        size_t msg_len;
        int fd; /* stdout goes here (download), or -1 */
        int write_errno;
};

static int tar_output(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *data,
                      size_t len)
{
        (void)offset;
        struct tar_end *t = ctx;
        if (s == SBX_STDERR) {
                size_t n = MIN(len, sizeof(t->msg) - 1 - t->msg_len);
                memcpy(t->msg + t->msg_len, data, n);
                t->msg_len += n;
                return 0;
        }
        if (t->fd >= 0 && write_all(t->fd, data, len) < 0) {
                t->write_errno = errno;
                return -EPIPE;
        }
        return 0;
}

/* Stream the process to its end; its exit code, or the exit code for sbx
 * (negated) after printing why. */
static int tar_wait(struct sbx_ctx *ctx, const char *name, const char *id, struct tar_end *t)
{
        struct sbx_stream_result res = {0};
        struct sbx_err err = {0};
        int r = sbx_stream(ctx->client, name, id, NULL, tar_output, t, &res, &err);
        int code = r < 0 ? -1 : res.status.exit_code;
        sbx_stream_result_clear(&res);
        if (r < 0 && r != -EPIPE)
                return -sbx_fail(ctx, name, r, &err);
        return code;
}

static int tar_failed(const char *name, const struct tar_end *t, int code)
{
        fprintf(stderr, "sbx: cp: tar in %s exited %d: %.*s\n", name, code,
                (int)strcspn(t->msg, "\n"), t->msg);
        return SBX_EXIT_REFUSED;
}

static int tar_spawn(struct sbx_ctx *ctx, const char *name, const char *const *argv, bool in,
                     struct sbx_process *ret)
{
        struct sbx_spawn_request rq = {
            .argv = argv,
            .cwd = "/workspace",
            .user = "root",
            .stdin_open = in,
            .lossless = !in,
        };
        struct sbx_err err = {0};
        int r = sbx_spawn(ctx->client, name, &rq, ret, &err);
        return r < 0 ? sbx_fail(ctx, name, r, &err) : 0;
}

static void forget(struct sbx_ctx *ctx, const char *name, struct sbx_process *p)
{
        struct sbx_err err = {0};
        sbx_kill(ctx->client, name, p->id, &err);
        sbx_process_clear(p);
}

static int put_archive(struct put *p, const char *local)
{
        archive_write_set_format_gnutar(p->a);
        archive_write_set_bytes_per_block(p->a, 0);
        if (archive_write_open(p->a, p, NULL, put_write, NULL) != ARCHIVE_OK)
                return archive_error(p, local);
        // "." first: the target directory gets the source's mode and time.
        int rc = put_entry(p, local, ".", 0);
        if (archive_write_close(p->a) != ARCHIVE_OK && rc == 0)
                rc = archive_error(p, local);
        if (flush(p, true) < 0 && rc == 0)
                rc = sbx_fail(p->ctx, p->name, p->r, &p->err);
        return rc;
}

int sbx_cp_put_tree(struct sbx_ctx *ctx, const char *local, const char *name, const char *path)
{
        const char *argv[] = {
            "sh",     "-c", "mkdir -p -- \"$1\" && cd -- \"$1\" && exec tar -x -o -f -",
            "sbx-cp", path, NULL};
        struct sbx_process proc = {0};
        int rc = tar_spawn(ctx, name, argv, true, &proc);
        if (rc)
                return rc;
        struct put p = {.ctx = ctx, .name = name, .id = proc.id, .a = archive_write_new()};
        p.buf = malloc(CHUNK);
        p.data = malloc(CHUNK);
        rc = p.a && p.buf && p.data ? put_archive(&p, local) : local_error(local, strerror(ENOMEM));
        struct tar_end t = {.fd = -1};
        int code = tar_wait(ctx, name, proc.id, &t);
        // tar's own complaint first: a refused stdin is its consequence.
        if (code > 0)
                rc = tar_failed(name, &t, code);
        else if (code < 0 && rc == 0)
                rc = -code;
        forget(ctx, name, &proc);
        if (p.a)
                archive_write_free(p.a);
        free(p.buf);
        free(p.data);
        return rc;
}

/* ------------------------------------------------------------ download */

struct get {
        struct sbx_ctx *ctx;
        const char *name;
        const char *id;
        struct tar_end t;
        int code; /* tar_wait's */
        pthread_t thread;
};

static void *get_stream(void *arg)
{
        struct get *g = arg;
        g->code = tar_wait(g->ctx, g->name, g->id, &g->t);
        close(g->t.fd);
        g->t.fd = -1;
        return NULL;
}

/* A name or link target from the sandbox that may be made here. */
static bool safe_path(const char *s)
{
        if (!s || !*s || *s == '/')
                return false;
        for (const char *c = s; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 2 && c[0] == '.' && c[1] == '.')
                        return false;
                c += n;
                c += *c == '/';
        }
        return true;
}

static int bad_entry(const char *name, const char *what, const char *path)
{
        fprintf(stderr, "sbx: cp: the tar from %s holds %s '%.64s'\n", name, what, path);
        return SBX_EXIT_UNREACHABLE;
}

static int check_entry(const char *name, struct archive_entry *e)
{
        const char *path = archive_entry_pathname(e);
        if (!safe_path(path))
                return bad_entry(name, "a bad name", path ? path : "");
        const char *hard = archive_entry_hardlink(e);
        if (hard && !safe_path(hard))
                return bad_entry(name, "a bad hard link", hard);
        mode_t type = archive_entry_filetype(e);
        if (!hard && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
                return bad_entry(name, "a special file", path);
        archive_entry_set_perm(e, archive_entry_perm(e) & 01777);
        return 0;
}

static int extract_error(struct archive *a, const char *what)
{
        fprintf(stderr, "sbx: cp: %s: %s\n", what, archive_error_string(a));
        return SBX_EXIT_LOCAL;
}

/* Everything from r into the current directory. */
static int extract(const char *name, struct archive *r, struct archive *w)
{
        for (;;) {
                struct archive_entry *e;
                int h = archive_read_next_header(r, &e);
                if (h == ARCHIVE_EOF)
                        return 0;
                if (h < ARCHIVE_WARN) {
                        fprintf(stderr, "sbx: cp: the tar from %s: %s\n", name,
                                archive_error_string(r));
                        return SBX_EXIT_UNREACHABLE;
                }
                int rc = check_entry(name, e);
                if (rc)
                        return rc;
                if (archive_write_header(w, e) < ARCHIVE_WARN)
                        return extract_error(w, archive_entry_pathname(e));
                const void *buf;
                size_t len;
                la_int64_t off;
                while ((h = archive_read_data_block(r, &buf, &len, &off)) == ARCHIVE_OK)
                        if (archive_write_data_block(w, buf, len, off) < ARCHIVE_WARN)
                                return extract_error(w, archive_entry_pathname(e));
                if (h != ARCHIVE_EOF)
                        return extract_error(r, archive_entry_pathname(e));
        }
}

/* The archive on fd into the directory local (made); cwd is restored. */
static int extract_into(const char *name, int fd, const char *local)
{
        if (mkdir(local, 0700) < 0 && errno != EEXIST)
                return local_error(local, strerror(errno));
        _cleanup_close_ int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (here < 0 || chdir(local) < 0)
                return local_error(local, strerror(errno));
        struct archive *r = archive_read_new(), *w = archive_write_disk_new();
        int rc = r && w ? 0 : local_error(local, strerror(ENOMEM));
        if (rc == 0) {
                archive_read_support_format_tar(r);
                archive_read_support_format_gnutar(r);
                archive_write_disk_set_options(w, ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME |
                                                      ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                      ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                      ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS);
                rc = archive_read_open_fd(r, fd, 64 * 1024) == ARCHIVE_OK ? extract(name, r, w)
                                                                          : extract_error(r, name);
        }
        // Directories get their modes and times last, when closed.
        if (w && archive_write_close(w) != ARCHIVE_OK && rc == 0)
                rc = extract_error(w, local);
        archive_read_free(r);
        archive_write_free(w);
        if (fchdir(here) < 0 && rc == 0)
                rc = local_error(".", strerror(errno));
        return rc;
}

int sbx_cp_get_tree(struct sbx_ctx *ctx, const char *name, const char *path, const char *local)
{
        const char *argv[] = {"tar", "-c", "-f", "-", "-C", path, ".", NULL};
        struct sbx_process proc = {0};
        int rc = tar_spawn(ctx, name, argv, false, &proc);
        if (rc)
                return rc;
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0) {
                forget(ctx, name, &proc);
                return local_error("pipe", strerror(errno));
        }
        struct get g = {.ctx = ctx, .name = name, .id = proc.id, .t = {.fd = fds[1]}};
        if ((errno = pthread_create(&g.thread, NULL, get_stream, &g))) {
                close(fds[0]);
                close(fds[1]);
                forget(ctx, name, &proc);
                return local_error("thread", strerror(errno));
        }
        rc = extract_into(name, fds[0], local);
        // After the archive's end, what tar still writes (padding) is read
        // and dropped, so its exit code arrives; after a failure nothing is:
        // the stream's writes then fail (EPIPE) and it ends.
        char sink[4096];
        errno = 0;
        while (rc == 0 && (read(fds[0], sink, sizeof(sink)) > 0 || errno == EINTR))
                errno = 0;
        close(fds[0]);
        pthread_join(g.thread, NULL);
        if (g.code > 0)
                rc = tar_failed(name, &g.t, g.code);
        else if (g.code < 0 && rc == 0 && !g.t.write_errno)
                rc = -g.code;
        forget(ctx, name, &proc);
        return rc;
}
