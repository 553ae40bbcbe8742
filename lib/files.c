/* SPDX-License-Identifier: MIT */
/* Files, streamed from and to file descriptors: nothing is held whole. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

static int files_path(const char *route, const char *path, char **ret, struct sbx_err *err)
{
        if (!path || !*path)
                return sbxc_fail(err, EINVAL, 400, "invalid_argument", "an empty path");
        if (strlen(path) > 4095)
                return sbxc_fail(err, ENAMETOOLONG, 400, "invalid_argument",
                                 "a path over 4095 bytes");
        _cleanup_free_ char *q = sbxc_escape(path);
        if (!q || asprintf(ret, "%s?path=%s", route, q) < 0)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        return 0;
}

struct to_fd {
        int fd;
        int errnum;
};

static int write_sink(void *ctx, const void *p, size_t n)
{
        struct to_fd *t = ctx;
        int r = write_all(t->fd, p, n);
        if (r < 0) {
                t->errnum = -r;
                return r;
        }
        return 0;
}

/* A file moved between fd and the sandbox: GET writes the body to fd, PUT
 * sends fd as the body. */
static int transfer(struct sbx_client *c, const char *name, const char *method, const char *path,
                    int fd, sbx_progress_fn progress, void *ctx, struct sbx_err *err)
{
        _cleanup_free_ char *route = NULL;
        int r = files_path("/files", path, &route, err);
        if (r < 0)
                return r;
        bool put = !strcmp(method, "PUT");
        struct to_fd t = {.fd = fd};
        struct sbxc_request rq = {
            .method = method,
            .content_type = put ? "application/octet-stream" : NULL,
            .body_fd = put ? fd : -1,
            .sink = put ? NULL : write_sink,
            .sink_ctx = &t,
            .max_body = SBXC_MAX_SMALL,
            .low_speed = true,
            .progress = progress,
            .progress_ctx = ctx,
        };
        struct sbxc_response resp;
        r = sbxc_data(c, name, route, &rq, &resp, err);
        if (r >= 0) {
                sbxc_response_free(&resp);
                return 0;
        }
        if (t.errnum)
                return sbxc_fail(err, t.errnum, 0, "io_error", "write: %s", strerror(t.errnum));
        return r;
}

int sbx_file_read(struct sbx_client *c, const char *name, const char *path, int fd,
                  sbx_progress_fn progress, void *ctx, struct sbx_err *err)
{
        return transfer(c, name, "GET", path, fd, progress, ctx, err);
}

int sbx_file_write(struct sbx_client *c, const char *name, const char *path, int fd,
                   sbx_progress_fn progress, void *ctx, struct sbx_err *err)
{
        return transfer(c, name, "PUT", path, fd, progress, ctx, err);
}

int sbx_file_list(struct sbx_client *c, const char *name, const char *path, struct sbx_dir *ret,
                  struct sbx_err *err)
{
        _cleanup_free_ char *route = NULL;
        int r = files_path("/files/list", path ? path : ".", &route, err);
        if (r < 0)
                return r;
        return sbxc_data_json(c, name, "GET", route, NULL, sbxc_parse_dir, ret, err);
}
