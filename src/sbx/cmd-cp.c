/* SPDX-License-Identifier: MIT */
/* sbx cp SRC DST, one side NAME:PATH: files streamed both ways, nothing
 * held whole; a download lands under a temporary name and is renamed into
 * place when complete, as the server does for an upload. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx.h"
#include "common/util.h"

static const char usage[] =
    "usage: sbx cp SRC DST\n"
    "Copies a file into or out of a sandbox; the sandbox side is NAME:PATH\n"
    "(relative paths resolve against /workspace), the other a local path or '-'\n"
    "for stdin or stdout. A DST that is a directory (or ends in '/') gets SRC's\n"
    "name. A progress bar shows on stderr when it is a terminal and the copy is\n"
    "over 1 MiB.\n";

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

/* A remote path that names a directory gets the local file's name. */
static char *upload_target(struct sbx_client *c, const struct remote *dst, const char *src)
{
        _cleanup_free_ char *copy = strdup(src);
        const char *base = copy ? basename(copy) : "file";
        struct sbx_dir d = {0};
        bool dir = dst->path[strlen(dst->path) - 1] == '/' ||
                   sbx_file_list(c, dst->name, dst->path, &d, NULL) == 0;
        sbx_dir_clear(&d);
        char *out = NULL;
        if (!dir)
                return strdup(dst->path);
        if (asprintf(&out, "%s%s%s", dst->path, dst->path[strlen(dst->path) - 1] == '/' ? "" : "/",
                     base) < 0)
                return NULL;
        return out;
}

static int upload(struct sbx_ctx *ctx, struct sbx_client *c, const char *src,
                  const struct remote *dst)
{
        bool std = !strcmp(src, "-");
        _cleanup_close_ int fd = std ? -1 : open(src, O_RDONLY | O_CLOEXEC);
        if (!std && fd < 0) {
                fprintf(stderr, "sbx: cp: %s: %s\n", src, strerror(errno));
                return SBX_EXIT_LOCAL;
        }
        _cleanup_free_ char *path = std ? strdup(dst->path) : upload_target(c, dst, src);
        if (!path)
                return SBX_EXIT_LOCAL;
        struct bar b = {0};
        struct sbx_err err = {0};
        int r = sbx_file_write(c, dst->name, path, std ? STDIN_FILENO : fd,
                               isatty(STDERR_FILENO) ? progress : NULL, &b, &err);
        bar_end(&b);
        return r < 0 ? sbx_fail(ctx, dst->name, r, &err) : 0;
}

/* The local file a download writes: dst, or dst/basename(remote). */
static char *download_target(const char *dst, const char *remote)
{
        struct stat st;
        if (stat(dst, &st) < 0 || !S_ISDIR(st.st_mode))
                return strdup(dst);
        _cleanup_free_ char *copy = strdup(remote);
        char *out = NULL;
        if (!copy || asprintf(&out, "%s/%s", dst, basename(copy)) < 0)
                return NULL;
        return out;
}

static int download(struct sbx_ctx *ctx, struct sbx_client *c, const struct remote *src,
                    const char *dst)
{
        struct bar b = {0};
        struct sbx_err err = {0};
        sbx_progress_fn fn = isatty(STDERR_FILENO) ? progress : NULL;
        if (!strcmp(dst, "-")) {
                int r = sbx_file_read(c, src->name, src->path, STDOUT_FILENO, fn, &b, &err);
                bar_end(&b);
                return r < 0 ? sbx_fail(ctx, src->name, r, &err) : 0;
        }
        _cleanup_free_ char *target = download_target(dst, src->path);
        _cleanup_free_ char *tmp = NULL;
        if (!target || asprintf(&tmp, "%s.sbx-XXXXXX", target) < 0)
                return SBX_EXIT_LOCAL;
        _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "sbx: cp: %s: %s\n", target, strerror(errno));
                return SBX_EXIT_LOCAL;
        }
        int r = sbx_file_read(c, src->name, src->path, fd, fn, &b, &err);
        bar_end(&b);
        if (r >= 0 &&
            (fchmod(fd, 0644 & ~umask(022)) < 0 || fsync(fd) < 0 || rename(tmp, target) < 0)) {
                fprintf(stderr, "sbx: cp: %s: %s\n", target, strerror(errno));
                unlink(tmp);
                return SBX_EXIT_LOCAL;
        }
        if (r < 0) {
                unlink(tmp);
                return sbx_fail(ctx, src->name, r, &err);
        }
        return 0;
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
        struct sbx_client *c = ctx->client;
        return rs ? download(ctx, c, &src, pos.argv[1]) : upload(ctx, c, pos.argv[0], &dst);
}
