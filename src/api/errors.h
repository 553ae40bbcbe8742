/* SPDX-License-Identifier: MIT */
/* The one place where a -errno becomes an HTTP error: a table from
 * (context, errno) to (status, error.code, reason), after libuv's
 * UV_ERRNO_MAP. The same errno means different things in different
 * places (ENOENT is a missing sandbox from the manager, a missing process
 * from the agent, a missing file from the file endpoints), so every row
 * names the context it belongs to.
 *
 * The message of the error body is built from three parts:
 *   [subject ": "] reason
 * where the subject is what the caller was doing ("cannot read /x"), the
 * reason is the row's, and a row without a reason (NULL) uses the error's
 * own message (the sbx_error's text, else strerror). A reason ending in
 * ": " is followed by the error's own message. */
#pragma once

#include <jansson.h>

#include "../common/util.h"
#include "respond.h"

/* C(context, falls back to). A context that falls back to another has no
 * default of its own: an errno it does not list is looked up there. */
#define API_ERR_CONTEXTS(C)                                                                        \
        C(CONTROL, CONTROL)       /* a manager call: attach, get, list, stop, delete */            \
        C(ENTER, CONTROL)         /* entering a sandbox with a data-plane credential */            \
        C(GONE, GONE)             /* anything, on a sandbox deleted while the call ran */          \
        C(AGENT, AGENT)           /* a call to the sandbox's agent */                              \
        C(STDIN, AGENT)           /* a stdin write, through the agent */                           \
        C(ROOT, ROOT)             /* the handle on the sandbox's root for the file endpoints */    \
        C(PATH, PATH)             /* the path query parameter of the file endpoints */             \
        C(FILE_READ, FILE_READ)   /* reading a file or listing a directory */                      \
        C(FILE_WRITE, FILE_WRITE) /* writing a file */                                             \
        C(CKPT, CONTROL)          /* a checkpoint or a fork */

/* X(context, errno, status, code, reason); errno 0 is the context's
 * default. The tests pin every status and code. */
#define API_ERRNO_MAP(X)                                                                           \
        X(CONTROL, EINVAL, 400, "invalid_argument", NULL)                                          \
        X(CONTROL, EACCES, 401, "unauthenticated", NULL)                                           \
        X(CONTROL, EDQUOT, 402, "cap_reached", NULL)                                               \
        /* The manager's only "missing" is a sandbox; files and processes                          \
         * answer their own codes below. */                                                        \
        X(CONTROL, ENOENT, 404, "sandbox_not_found", NULL)                                         \
        X(CONTROL, EPERM, 409, "not_enabled", NULL)                                                \
        X(CONTROL, EBUSY, 409, "invalid_state", NULL)                                              \
        X(CONTROL, ENOTSUP, 409, "unsupported_class", NULL)                                        \
        X(CONTROL, ENOPKG, 404, "image_not_found", NULL)                                           \
        X(CONTROL, E2BIG, 413, "too_large", NULL)                                                  \
        X(CONTROL, EHOSTDOWN, 502, "bring_up_failed", NULL)                                        \
        X(CONTROL, EAGAIN, 503, "unavailable", NULL)                                               \
        X(CONTROL, 0, 500, "internal", NULL)                                                       \
        /* The incarnation a credential names is gone (deleted, reclaimed):                        \
         * a 401 makes a client attach again, which gives it a new, empty                          \
         * sandbox. A 404 would look like a missing file and never be retried. */                  \
        X(ENTER, ENOENT, 401, "credential_stale", NULL)                                            \
        /* The sandbox cannot be brought up here: the driver it was created                        \
         * under is not available on this host (runsc gone), or its class is                       \
         * no longer offered. The message says which; a control-plane call                         \
         * answers 409 unsupported_class instead. */                                               \
        X(ENTER, ENOTSUP, 502, "bring_up_failed", NULL)                                            \
        X(GONE, 0, 404, "sandbox_not_found", NULL)                                                 \
        /* A fork needs a checkpoint to start from, and a name of its own. */                      \
        X(CKPT, ENOENT, 409, "no_checkpoint", NULL)                                                \
        X(CKPT, EEXIST, 409, "already_exists", NULL)                                               \
        /* The agent's one "missing" is a process id. */                                           \
        X(AGENT, ENOENT, 404, "process_not_found", NULL)                                           \
        X(AGENT, EINVAL, 400, "invalid_argument", NULL)                                            \
        X(AGENT, EDQUOT, 402, "cap_reached", NULL)                                                 \
        X(AGENT, EBUSY, 409, "invalid_state", NULL)                                                \
        X(AGENT, 0, 502, "bring_up_failed", "sandbox agent: ")                                     \
        /* The first bytes reached the process, the rest was dropped: the                          \
         * body says how many got through, so the client can resume. */                            \
        X(STDIN, ETIME, 408, "timeout", NULL)                                                      \
        X(ROOT, 0, 502, "bring_up_failed", NULL)                                                   \
        /* 4084: a path of 4095 bytes, less the "/workspace/" a relative one                       \
         * is resolved against. */                                                                 \
        X(PATH, ENAMETOOLONG, 400, "invalid_argument",                                             \
          "a file or directory name is at most 255 bytes, a path at most 4084")                    \
        X(PATH, 0, 400, "invalid_argument", "not a usable path")                                   \
        /* A read or a listing that failed is always 404, as the documented                        \
         * client says of anything it cannot read, with the reason. */                             \
        X(FILE_READ, ENOENT, 404, "file_not_found", "no such file or directory")                   \
        X(FILE_READ, EISDIR, 404, "file_not_found", "is a directory")                              \
        X(FILE_READ, ENOTDIR, 404, "file_not_found", "not a directory")                            \
        X(FILE_READ, EPERM, 404, "file_not_found", "not one of the sandbox's own files")           \
        X(FILE_READ, EACCES, 404, "file_not_found", "the sandbox's own permissions forbid it")     \
        X(FILE_READ, ELOOP, 404, "file_not_found", "too many symbolic links")                      \
        X(FILE_READ, 0, 404, "file_not_found", "not a regular file or directory")                  \
        /* A failed write names the path and what is wrong, never an errno                         \
         * string a client cannot act on (but for the default). */                                 \
        X(FILE_WRITE, ENOSPC, 402, "cap_reached", "the sandbox's disk is full")                    \
        X(FILE_WRITE, EDQUOT, 402, "cap_reached", "the sandbox's disk is full")                    \
        X(FILE_WRITE, E2BIG, 413, "too_large", "over the file size cap")                           \
        X(FILE_WRITE, EFBIG, 413, "too_large", "over the file size cap")                           \
        X(FILE_WRITE, ENOENT, 404, "file_not_found", "no such file or directory")                  \
        X(FILE_WRITE, ENOTDIR, 404, "file_not_found",                                              \
          "a component of the path is not a directory")                                            \
        X(FILE_WRITE, EISDIR, 400, "invalid_argument", "is a directory")                           \
        X(FILE_WRITE, ENAMETOOLONG, 400, "invalid_argument",                                       \
          "a name in the path is over 255 bytes, or the path over 4095")                           \
        X(FILE_WRITE, EACCES, 403, "permission_denied", "the sandbox's own permissions forbid it") \
        X(FILE_WRITE, EPERM, 403, "permission_denied", "the sandbox's own permissions forbid it")  \
        X(FILE_WRITE, EROFS, 403, "permission_denied", "the sandbox's own permissions forbid it")  \
        X(FILE_WRITE, EBUSY, 403, "permission_denied",                                             \
          "a file sandboxd provides read-only inside the sandbox")                                 \
        X(FILE_WRITE, ELOOP, 400, "invalid_argument", "too many symbolic links")                   \
        X(FILE_WRITE, 0, 400, "invalid_argument", NULL)

enum api_err_ctx {
#define API_ERR_CTX_ENUM(ctx, parent) API_ERR_##ctx,
        API_ERR_CONTEXTS(API_ERR_CTX_ENUM)
#undef API_ERR_CTX_ENUM
            API_ERR_CONTEXT_COUNT
};

struct api_errno_row {
        enum api_err_ctx ctx;
        int errnum; /* positive; 0: the context's default */
        unsigned status;
        const char *code;
        const char *reason; /* NULL: the error's own message */
};

/* The row for -errno r in ctx: its own, its fallback's, or the default. */
const struct api_errno_row *api_errno_lookup(enum api_err_ctx ctx, int r);
/* The whole table, for the tests. */
const struct api_errno_row *api_errno_rows(size_t *ret_n);
enum api_err_ctx api_err_fallback(enum api_err_ctx ctx);

/* Set resp to the error -errno r means in ctx; the message from err (may
 * be NULL). */
void api_error_errno(struct api_resp *resp, enum api_err_ctx ctx, int r,
                     const struct sbx_error *err);
/* The same with more members in the error object (extra, stolen). */
void api_error_errno_with(struct api_resp *resp, enum api_err_ctx ctx, int r,
                          const struct sbx_error *err, json_t *extra);
/* The same with the subject "what path" (path may be NULL) in front of
 * the reason. */
void api_error_path(struct api_resp *resp, enum api_err_ctx ctx, int r, const char *what,
                    const char *path);
