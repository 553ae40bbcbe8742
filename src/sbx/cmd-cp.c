/* SPDX-License-Identifier: MIT */
/* sbx cp SRC DST, one side NAME:PATH: files streamed both ways, nothing
 * held whole; a download lands under a temporary name and is renamed into
 * place when complete, as the server does for an upload; a file keeps its
 * permission bits (a chmod or a stat in the sandbox beside the transfer).
 * Directories go as a tar stream (cp-tree.c). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cp.h"
#include "common/util.h"

static const char usage[] =
    "usage: sbx cp SRC DST\n"
    "Copies a file or a directory into or out of a sandbox; the sandbox side is\n"
    "NAME:PATH (relative paths resolve against /workspace), the other a local path\n"
    "or '-' for stdin or stdout. A DST that is a directory (or ends in '/') gets\n"
    "SRC's name. Modes, symlinks (as links), empty directories and times are kept\n"
    "(set-id bits are not). A progress line shows on stderr when it is a terminal and a file\n"
    "is over 1 MiB.\n";

struct remote {
        char name[129];
        const char *path;
};

/* NAME:PATH -> true. A name may itself hold ':', so a ":/" splits first
 * (an absolute path), else the last ':'. Paths starting with '/' or '.'
 * are always local. */
static bool parse_remote(const char *arg, struct remote *r)
{
        if (arg[0] == '/' || arg[0] == '.')
                return false;
        const char *colon = strstr(arg, ":/");
        if (!colon)
                colon = strrchr(arg, ':');
        if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(r->name))
                return false;
        snprintf(r->name, sizeof(r->name), "%.*s", (int)(colon - arg), arg);
        r->path = colon[1] ? colon + 1 : ".";
        return true;
}

struct bar {
        int64_t last_ms;
        bool shown;
};

static int progress(void *ctx, int64_t done, int64_t total)
{
        struct bar *b = ctx;
        int64_t now = mono_ms();
        if ((total >= 0 ? total : done) < (1 << 20) || now - b->last_ms < 100)
                return 0;
        b->last_ms = now;
        b->shown = true;
        if (total > 0)
                fprintf(stderr, "\r%8.1f / %.1f MiB %3d%%", (double)done / 1048576.0,
                        (double)total / 1048576.0, (int)(done * 100 / total));
        else
                fprintf(stderr, "\r%8.1f MiB", (double)done / 1048576.0);
        return 0;
}

static void bar_end(const struct bar *b)
{
        if (b->shown)
                fputc('\n', stderr);
}

static sbx_progress_fn progress_fn(void)
{
        return isatty(STDERR_FILENO) ? progress : NULL;
}

/* A command as root in the sandbox; its stdout in *out (NULL: dropped).
 * 0, or the exit code for sbx after printing why. */
static int run_root(struct sbx_ctx *ctx, const char *name, const char *const *argv, char **out)
{
        struct sbx_exec_request rq = {.argv = argv, .cwd = "/workspace", .user = "root"};
        struct sbx_exec_result res = {0};
        struct sbx_err err = {0};
        int r = sbx_exec(ctx->client, name, &rq, &res, &err);
        if (r < 0)
                return sbx_fail(ctx, name, r, &err);
        int rc = 0;
        if (res.exit_code) {
                fprintf(stderr, "sbx: cp: %s in %s exited %d: %.*s\n", argv[0], name, res.exit_code,
                        (int)MIN(strcspn(res.err, "\n"), 256), res.err);
                rc = SBX_EXIT_REFUSED;
        } else if (out) {
                *out = res.out;
                res.out = NULL;
        }
        sbx_exec_result_clear(&res);
        return rc;
}

/* The sandbox file's permission bits (set-id ones dropped), or -1 after
 * printing why (*rc the exit code). */
static int remote_mode(struct sbx_ctx *ctx, const char *name, const char *path, int *rc)
{
        const char *argv[] = {"stat", "-c", "%a", "--", path, NULL};
        _cleanup_free_ char *out = NULL;
        if ((*rc = run_root(ctx, name, argv, &out)))
                return -1;
        char *end = NULL;
        errno = 0;
        long mode = strtol(out, &end, 8);
        if (errno || end == out || (*end && strcmp(end, "\n")) || mode < 0 || mode > 07777) {
                fprintf(stderr, "sbx: cp: stat in %s answered '%.32s', not a mode\n", name, out);
                *rc = SBX_EXIT_UNREACHABLE;
                return -1;
        }
        return (int)(mode & 01777);
}

int sbx_cp_put(struct sbx_ctx *ctx, const char *local, const char *name, const char *path)
{
        bool std = !strcmp(local, "-");
        _cleanup_close_ int fd = std ? -1 : open(local, O_RDONLY | O_CLOEXEC);
        if (!std && fd < 0) {
                fprintf(stderr, "sbx: cp: %s: %s\n", local, strerror(errno));
                return SBX_EXIT_LOCAL;
        }
        struct bar b = {0};
        struct sbx_err err = {0};
        int r = sbx_file_write(ctx->client, name, path, std ? STDIN_FILENO : fd, progress_fn(), &b,
                               &err);
        bar_end(&b);
        if (r < 0)
                return sbx_fail(ctx, name, r, &err);
        struct stat st;
        if (std || fstat(fd, &st) < 0)
                return 0;
        // The file keeps its mode (the files API carries none): one chmod.
        char mode[8];
        snprintf(mode, sizeof(mode), "%o", (unsigned)(st.st_mode & 01777));
        const char *argv[] = {"chmod", mode, "--", path, NULL};
        return run_root(ctx, name, argv, NULL);
}

int sbx_cp_get(struct sbx_ctx *ctx, const char *name, const char *path, const char *local)
{
        struct bar b = {0};
        struct sbx_err err = {0};
        if (!strcmp(local, "-")) {
                int r =
                    sbx_file_read(ctx->client, name, path, STDOUT_FILENO, progress_fn(), &b, &err);
                bar_end(&b);
                return r < 0 ? sbx_fail(ctx, name, r, &err) : 0;
        }
        _cleanup_free_ char *tmp = NULL;
        if (asprintf(&tmp, "%s.sbx-XXXXXX", local) < 0)
                return SBX_EXIT_LOCAL;
        _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "sbx: cp: %s: %s\n", local, strerror(errno));
                return SBX_EXIT_LOCAL;
        }
        int r = sbx_file_read(ctx->client, name, path, fd, progress_fn(), &b, &err);
        bar_end(&b);
        if (r < 0) {
                unlink(tmp);
                return sbx_fail(ctx, name, r, &err);
        }
        // mkstemp made it 0600; the copy gets the sandbox file's mode.
        int rc = 0;
        int mode = remote_mode(ctx, name, path, &rc);
        if (mode < 0) {
                unlink(tmp);
                return rc;
        }
        if (fchmod(fd, (mode_t)mode) < 0 || fsync(fd) < 0 || rename(tmp, local) < 0) {
                fprintf(stderr, "sbx: cp: %s: %s\n", local, strerror(errno));
                unlink(tmp);
                return SBX_EXIT_LOCAL;
        }
        return 0;
}

/* dir/basename(path) into *ret. */
static int with_base(const char *dir, const char *path, char **ret)
{
        _cleanup_free_ char *copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        size_t n = strlen(dir);
        return asprintf(ret, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", basename(copy)) < 0
                   ? -ENOMEM
                   : 0;
}

static bool remote_is_dir(struct sbx_ctx *ctx, const char *name, const char *path)
{
        struct sbx_dir d = {0};
        bool dir = sbx_file_list(ctx->client, name, path, &d, NULL) == 0;
        sbx_dir_clear(&d);
        return dir;
}

static int upload(struct sbx_ctx *ctx, const char *src, const struct remote *dst)
{
        struct stat st;
        bool tree = strcmp(src, "-") && stat(src, &st) == 0 && S_ISDIR(st.st_mode);
        // Into an existing directory (or one named with a trailing '/'): under
        // the source's name, as cp does.
        bool into = strcmp(src, "-") && (dst->path[strlen(dst->path) - 1] == '/' ||
                                         remote_is_dir(ctx, dst->name, dst->path));
        _cleanup_free_ char *path = NULL;
        if (into ? with_base(dst->path, src, &path) < 0 : !(path = strdup(dst->path)))
                return SBX_EXIT_LOCAL;
        return tree ? sbx_cp_put_tree(ctx, src, dst->name, path)
                    : sbx_cp_put(ctx, src, dst->name, path);
}

static int download(struct sbx_ctx *ctx, const struct remote *src, const char *dst)
{
        bool tree = strcmp(dst, "-") && remote_is_dir(ctx, src->name, src->path);
        struct stat st;
        bool into = strcmp(dst, "-") && stat(dst, &st) == 0 && S_ISDIR(st.st_mode);
        _cleanup_free_ char *local = NULL;
        if (into ? with_base(dst, src->path, &local) < 0 : !(local = strdup(dst)))
                return SBX_EXIT_LOCAL;
        return tree ? sbx_cp_get_tree(ctx, src->name, src->path, local)
                    : sbx_cp_get(ctx, src->name, src->path, local);
}

int cmd_cp(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 2, 2, "expected SRC DST", &pos);
        if (r >= 0)
                return r;
        struct remote src, dst;
        bool rs = parse_remote(pos.argv[0], &src), rd = parse_remote(pos.argv[1], &dst);
        if (rs == rd)
                return sbx_usage_error(ctx, "exactly one of SRC and DST is NAME:PATH");
        return rs ? download(ctx, &src, pos.argv[1]) : upload(ctx, pos.argv[0], &dst);
}
