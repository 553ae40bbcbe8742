/* SPDX-License-Identifier: MIT */
/* sbx cp of a directory, file by file: the wire moves files only. An
 * upload walks the local tree (symlinks and special files are skipped,
 * with a warning) and then makes every directory with one `mkdir -p` in
 * the sandbox, so empty ones are copied too. A download lists the sandbox's
 * tree; each name it gets is checked before it becomes a local path (a
 * hostile server must not name `..` or a path with a '/'). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cp.h"
#include "common/util.h"

#define MAX_DEPTH 64
/* Directories per `mkdir -p` (the wire bounds a command at 256 KiB). */
#define MKDIR_BATCH 200

struct tree {
        struct sbx_ctx *ctx;
        const char *name;
        char **dirs; /* remote directories to make */
        size_t ndirs;
};

static int join(const char *a, const char *b, char **ret)
{
        size_t n = strlen(a);
        return asprintf(ret, "%s%s%s", a, n && a[n - 1] == '/' ? "" : "/", b) < 0 ? -ENOMEM : 0;
}

static int add_dir(struct tree *t, const char *path)
{
        char **d = realloc(t->dirs, (t->ndirs + 1) * sizeof(char *));
        if (!d)
                return -ENOMEM;
        t->dirs = d;
        return (t->dirs[t->ndirs] = strdup(path)) ? (t->ndirs++, 0) : -ENOMEM;
}

static int put_walk(struct tree *t, const char *local, const char *remote, int depth);

static int put_entry(struct tree *t, const char *local, const char *remote, const char *entry,
                     int depth)
{
        _cleanup_free_ char *lp = NULL, *rp = NULL;
        if (join(local, entry, &lp) < 0 || join(remote, entry, &rp) < 0)
                return SBX_EXIT_LOCAL;
        struct stat st;
        if (lstat(lp, &st) < 0) {
                fprintf(stderr, "sbx: cp: %s: %s\n", lp, strerror(errno));
                return SBX_EXIT_LOCAL;
        }
        if (S_ISDIR(st.st_mode))
                return put_walk(t, lp, rp, depth + 1);
        if (S_ISREG(st.st_mode))
                return sbx_cp_put(t->ctx, lp, t->name, rp);
        fprintf(stderr, "sbx: cp: %s: skipped (not a file or directory)\n", lp);
        return 0;
}

static int put_walk(struct tree *t, const char *local, const char *remote, int depth)
{
        if (depth > MAX_DEPTH) {
                fprintf(stderr, "sbx: cp: %s: deeper than %d directories\n", local, MAX_DEPTH);
                return SBX_EXIT_LOCAL;
        }
        if (add_dir(t, remote) < 0)
                return SBX_EXIT_LOCAL;
        DIR *d = opendir(local);
        if (!d) {
                fprintf(stderr, "sbx: cp: %s: %s\n", local, strerror(errno));
                return SBX_EXIT_LOCAL;
        }
        int rc = 0;
        struct dirent *e;
        while (rc == 0 && (e = readdir(d)))
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        rc = put_entry(t, local, remote, e->d_name, depth);
        closedir(d);
        return rc;
}

/* One `mkdir -p` per batch of directories. */
static int make_dirs(struct tree *t)
{
        for (size_t at = 0; at < t->ndirs; at += MKDIR_BATCH) {
                size_t n = MIN(MKDIR_BATCH, t->ndirs - at);
                const char *argv[MKDIR_BATCH + 4] = {"mkdir", "-p", "--"};
                for (size_t i = 0; i < n; i++)
                        argv[3 + i] = t->dirs[at + i];
                struct sbx_exec_request rq = {.argv = argv};
                struct sbx_exec_result res = {0};
                struct sbx_err err = {0};
                int r = sbx_exec(t->ctx->client, t->name, &rq, &res, &err);
                if (r < 0)
                        return sbx_fail(t->ctx, t->name, r, &err);
                int code = res.exit_code;
                if (code)
                        fprintf(stderr, "sbx: cp: mkdir in %s: %.*s\n", t->name,
                                (int)strcspn(res.err, "\n"), res.err);
                sbx_exec_result_clear(&res);
                if (code)
                        return SBX_EXIT_REFUSED;
        }
        return 0;
}

int sbx_cp_put_tree(struct sbx_ctx *ctx, const char *local, const char *name, const char *path)
{
        struct tree t = {.ctx = ctx, .name = name};
        int rc = put_walk(&t, local, path, 0);
        if (rc == 0)
                rc = make_dirs(&t);
        for (size_t i = 0; i < t.ndirs; i++)
                free(t.dirs[i]);
        free(t.dirs);
        return rc;
}

/* A name from the server that may become a local path component. */
static bool safe_name(const char *s)
{
        return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/');
}

static int get_walk(struct sbx_ctx *ctx, const char *name, const char *path, const char *local,
                    int depth);

static int get_entry(struct sbx_ctx *ctx, const char *name, const char *path, const char *local,
                     const struct sbx_dirent *e, int depth)
{
        if (!safe_name(e->name)) {
                fprintf(stderr, "sbx: cp: %s: the server listed a bad name '%.64s'\n", path,
                        e->name);
                return SBX_EXIT_UNREACHABLE;
        }
        _cleanup_free_ char *rp = NULL, *lp = NULL;
        if (join(path, e->name, &rp) < 0 || join(local, e->name, &lp) < 0)
                return SBX_EXIT_LOCAL;
        return e->is_directory ? get_walk(ctx, name, rp, lp, depth + 1)
                               : sbx_cp_get(ctx, name, rp, lp);
}

static int get_walk(struct sbx_ctx *ctx, const char *name, const char *path, const char *local,
                    int depth)
{
        if (depth > MAX_DEPTH) {
                fprintf(stderr, "sbx: cp: %s: deeper than %d directories\n", path, MAX_DEPTH);
                return SBX_EXIT_LOCAL;
        }
        if (mkdir(local, 0777) < 0 && errno != EEXIST) {
                fprintf(stderr, "sbx: cp: %s: %s\n", local, strerror(errno));
                return SBX_EXIT_LOCAL;
        }
        struct sbx_dir d = {0};
        struct sbx_err err = {0};
        int r = sbx_file_list(ctx->client, name, path, &d, &err);
        if (r < 0)
                return sbx_fail(ctx, name, r, &err);
        int rc = 0;
        for (size_t i = 0; rc == 0 && i < d.n; i++)
                rc = get_entry(ctx, name, path, local, &d.items[i], depth);
        sbx_dir_clear(&d);
        return rc;
}

int sbx_cp_get_tree(struct sbx_ctx *ctx, const char *name, const char *path, const char *local)
{
        return get_walk(ctx, name, path, local, 0);
}
