/* SPDX-License-Identifier: MIT */
/* libsandboxd's insides: the pure parts (answers parsed, frames decoded,
 * the token read), which the unit tests drive with hostile input, and the
 * HTTP exchange under every call. */
#pragma once

#include <jansson.h>
#include <pthread.h>

#include "sandboxd.h"
#include "common/util.h"

/* The largest JSON answer taken: an exec's 1 MiB per stream, escaped. */
#define SBXC_MAX_JSON (16u << 20)
/* The largest error body and JSON frame payload read. */
#define SBXC_MAX_SMALL (64u << 10)
/* A frame's payload, as the wire bounds it. */
#define SBXC_MAX_FRAME (8u << 20)

/* Fill err and return -errnum (errnum > 0). */
int sbxc_fail(struct sbx_err *err, int errnum, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A contract breach by the server: -EPROTO, code bad_response. */
#define sbxc_bad(err, ...) sbxc_fail(err, EPROTO, 0, "bad_response", __VA_ARGS__)
/* The errno of an HTTP refusal (one table). */
int sbxc_errno_of_status(long status);

/* ---- parse.c: JSON answers to structs (pure) ---- */
/* A non-2xx answer's body to err; a body that is not the documented error
 * still yields the status, with code "unknown". Returns the -errno. */
int sbxc_parse_error(long status, const char *body, size_t len, struct sbx_err *err);
/* Parse a JSON object (duplicates refused); *ret owned by the caller. */
int sbxc_parse_object(const char *body, size_t len, json_t **ret, struct sbx_err *err);
/* Each parser fills a struct of the kind its name says (void *, so that
 * one request function takes any). */
typedef int (*sbxc_parser)(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_sandbox(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_sandbox_list(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_images(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_snapshot(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_exec_result(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_process(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_process_list(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_output(json_t *o, void *ret, struct sbx_err *err);
int sbxc_parse_dir(json_t *o, void *ret, struct sbx_err *err);
/* attach's `headers` as "Name: value" lines (NULL-terminated); names and
 * values with a CR, LF or NUL, or a bad name, are refused (a hostile server
 * must not inject a header or a request). */
int sbxc_parse_headers(json_t *o, char ***ret, struct sbx_err *err);
void sbxc_strv_free(char **v);
/* RFC 3339 UTC ("2026-11-30T15:20:00.000Z") to ms since the epoch. */
int sbxc_parse_time(const char *s, int64_t *ret_ms);
/* The `iss` claim of a JWT, not verified (the server does): a new string. */
int sbxc_token_issuer(const char *token, char **ret);

/* ---- frame.c: the stream's frames (pure) ---- */
enum {
        SBXC_FRAME_START = 1,
        SBXC_FRAME_STDOUT = 2,
        SBXC_FRAME_STDERR = 3,
        SBXC_FRAME_EXIT = 4,
        SBXC_FRAME_ERROR = 5,
        SBXC_FRAME_KEEPALIVE = 6,
};
#define SBXC_FRAME_HEAD 16

struct sbxc_frame_sink {
        /* Data as it arrives; may be a part of a frame. */
        int (*data)(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *p, size_t n);
        /* A whole start, exit or error frame's JSON payload. */
        int (*json)(void *ctx, int type, const char *p, size_t n);
        void *ctx;
};

struct sbxc_frames {
        uint8_t head[SBXC_FRAME_HEAD];
        size_t head_len;
        int type;
        uint32_t len;  /* payload length of the current frame */
        uint32_t got;  /* payload bytes of it seen */
        uint64_t next; /* offset of the next data byte of the current frame */
        struct buf json;
        bool started;       /* a start frame came */
        bool ended;         /* an exit or error frame came */
        uint64_t expect[2]; /* next offset of stdout, stderr */
};
/* expect_out/err: the offsets the request asked from (a start frame may
 * move them forward; data must continue from them without a gap). */
void sbxc_frames_init(struct sbxc_frames *f);
void sbxc_frames_free(struct sbxc_frames *f);
/* Feed body bytes; 0, a sink's non-zero return, or -EPROTO with err. */
int sbxc_frames_feed(struct sbxc_frames *f, const void *p, size_t n,
                     const struct sbxc_frame_sink *sink, struct sbx_err *err);

/* ---- http.c: one exchange ---- */
struct sbxc_request {
        const char *method;
        const char *url;
        char *const *headers; /* "Name: value", NULL-terminated; may be NULL */
        const char *auth;     /* "Bearer ..." for the Authorization header, or NULL */
        const char *content_type;
        const void *body; /* a body from memory, or */
        size_t body_len;
        int body_fd; /* a body read from this fd to its end (-1: none) */
        /* A 2xx body goes to sink (when set) as it arrives, else is kept
         * (up to max_body). */
        int (*sink)(void *ctx, const void *p, size_t n);
        void *sink_ctx;
        size_t max_body;
        int64_t timeout_ms; /* whole exchange; 0: none (then low_speed) */
        bool low_speed;     /* abort after 60 s without a byte */
        sbx_progress_fn progress;
        void *progress_ctx;
};
struct sbxc_response {
        long status;
        struct buf body;
        int64_t server_date_ms; /* the Date header, or 0 */
        int sink_rc;            /* what stopped a sink */
};
/* 0 with any status in resp (the caller decides), or -errno for no usable
 * answer (err filled). */
int sbxc_http(const struct sbxc_request *rq, struct sbxc_response *resp, struct sbx_err *err);
void sbxc_response_free(struct sbxc_response *resp);
/* A URL-encoded copy of s (a new string), or NULL. */
char *sbxc_escape(const char *s);

/* ---- client.c ---- */
struct sbxc_cred;
struct sbx_client {
        char *token;
        char *server;
        int64_t timeout_ms;
        pthread_mutex_t lock;    /* guards creds */
        pthread_cond_t attached; /* an attach under way ended */
        struct sbxc_cred *creds;
};

/* A data-plane call: path is appended to the sandbox's endpoint; the
 * cached credential is used (attaching when there is none or it is about
 * to expire), and a 401 re-attaches and retries once. A non-2xx answer
 * becomes the error. */
int sbxc_data(struct sbx_client *c, const char *name, const char *path, struct sbxc_request *rq,
              struct sbxc_response *resp, struct sbx_err *err);
/* The same, with a JSON body built by the caller (stolen, may be NULL) and
 * the JSON answer parsed into ret (parse NULL: the answer is discarded). */
int sbxc_data_json(struct sbx_client *c, const char *name, const char *method, const char *path,
                   json_t *body, sbxc_parser parse, void *ret, struct sbx_err *err);
int sbxc_check_name(const char *name, struct sbx_err *err);
/* run.c: sbx_exec of a request with stdin (spawn, feed, stream). */
int sbxc_exec_with_stdin(struct sbx_client *c, const char *name, const struct sbx_exec_request *req,
                         struct sbx_exec_result *ret, struct sbx_err *err);
int sbxc_check_id(const char *id, struct sbx_err *err);
