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
 * read is called from libmicrohttpd's event loop whenever the client can
 * take more and must not block (a reader that would wait suspends the
 * connection: stream.c), unless `blocks` is set: then each read runs on a
 * handler thread while the connection waits (the port proxy's). It
 * returns bytes put in buf (> 0), 0 for nothing now (only after
 * suspending), or libmicrohttpd's end-of-stream (-1) or end-with-error
 * (-2, the connection is cut). free is called once, however the response
 * ends (or when it was never sent). */
struct api_body_source {
        ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max);
        void (*free)(void *cls);
        void *cls;
        size_t block; /* the buffer size to ask for */
        bool blocks;  /* read may block: run it on a handler thread */
};

/* A 101 answer after which the connection is the handler's (the port
 * proxy's WebSocket): run is called once with the client's socket and the
 * bytes already read past the head, on a handler thread; it
 * takes the handle and ends it with MHD_upgrade_action(CLOSE). free is
 * called instead when the answer is never sent. */
struct api_upgrade {
        void (*run)(void *cls, const char *extra, size_t extra_len, int sock, void *urh);
        void (*free)(void *cls);
        void *cls;
};

struct api_resp {
        unsigned status;
        const char *content_type;
        struct buf body; /* JSON or raw bytes */
        int body_fd;     /* >= 0: send this file instead (owned) */
        uint64_t body_fd_len;
        struct api_body_source source; /* read set: send this instead (owned) */
        char retry_after[24];          /* Retry-After header when set */
        struct buf headers;            /* more headers: "name\0value\0" pairs */
        bool passthrough;              /* a proxied answer: none of the API's own headers */
        bool source_sized;             /* source: of source_len bytes (else unknown) */
        uint64_t source_len;
        struct api_upgrade upgrade; /* run set: a 101 that hands the connection over */
        bool deferred;              /* api_defer: a hold answers, not this */
};

/* Add a header to resp (copied); -ENOMEM, -E2BIG. */
int api_resp_header(struct api_resp *resp, const char *name, size_t name_len, const char *value,
                    size_t value_len);

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
