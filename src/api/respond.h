/* SPDX-License-Identifier: MIT */
/* What a handler answers: a status and a JSON (or raw, or file) body. The
 * helpers here build the bodies: JSON documents, the API's error body, and
 * byte strings as JSON text (invalid UTF-8 as U+FFFD). No HTTP server in
 * here: http.c sends what these build. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/util.h"

/* A body of unknown length, produced as it is sent (a process's stream):
 * read is called from the connection's thread whenever the client can take
 * more, and may block; it returns bytes put in buf (> 0), or libmicrohttpd's
 * end-of-stream (-1) or end-with-error (-2, the connection is cut). free is
 * called once, however the response ends (or when it was never sent). */
struct api_body_source {
        ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max);
        void (*free)(void *cls);
        void *cls;
        size_t block; /* the buffer size to ask for */
};

struct api_resp {
        unsigned status;
        const char *content_type;
        struct buf body; /* JSON or raw bytes */
        int body_fd;     /* >= 0: send this file instead (owned) */
        uint64_t body_fd_len;
        struct api_body_source source; /* read set: send this instead (owned) */
        char retry_after[24];          /* Retry-After header when set */
};

/* Set resp to the API's error body {"error":{"code","message"}}. */
void api_error(struct api_resp *resp, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with more members in the error object: extra's (stolen; NULL
 * for none), e.g. the bytes a timed-out stdin write got through. */
void api_error_with(struct api_resp *resp, unsigned status, const char *code, const char *msg,
                    json_t *extra);
/* Serialize j (stolen) as the response body with status. */
void api_json(struct api_resp *resp, unsigned status, json_t *j);
/* Like api_json, with two byte strings added to the object head as JSON
 * strings (invalid UTF-8 as U+FFFD), written without intermediate copies. */
void api_json_text(struct api_resp *resp, unsigned status, json_t *head, const char *k1,
                   const void *d1, size_t l1, const char *k2, const void *d2, size_t l2);
/* 204, no body. */
void api_no_content(struct api_resp *resp);

/* Replace invalid UTF-8 in bytes with U+FFFD; returns a malloc'd string
 * (ret_len without the NUL). */
char *utf8_sanitize(const uint8_t *data, size_t len, size_t *ret_len);
