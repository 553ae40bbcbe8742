/* SPDX-License-Identifier: MIT */
/* What the port proxy parses of an HTTP/1.1 peer inside a sandbox: a
 * response head, a chunked body. Every byte comes from the sandbox and is
 * hostile: lengths are checked before they are read, numbers are bounded,
 * and anything unclear is -EPROTO (answered 502). No I/O in here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTPMSG_MAX_HEADERS 100

struct httpmsg_span {
        const char *p;
        size_t n;
};

struct httpmsg_header {
        struct httpmsg_span name, value;
};

struct httpmsg_head {
        unsigned status;
        size_t n_headers;
        struct httpmsg_header headers[HTTPMSG_MAX_HEADERS];
        int64_t content_length; /* -1: none */
        bool chunked;           /* Transfer-Encoding ends in chunked */
        bool close;             /* Connection: close */
};

/* The end of a head in buf: the offset just past its empty line, or 0
 * when it is not all in yet. */
size_t httpmsg_head_end(const char *buf, size_t len);

/* Parse the response head buf[0..len) (through its empty line). Spans
 * point into buf. -EPROTO for anything malformed: a bad status line, a
 * header without a colon or with a space before it, an obs-fold, a bad or
 * conflicting Content-Length, more than HTTPMSG_MAX_HEADERS headers. */
int httpmsg_parse_response(const char *buf, size_t len, struct httpmsg_head *ret);

/* Whether the span equals s, ASCII case-insensitively. */
bool httpmsg_span_is(struct httpmsg_span sp, const char *s);

/* Whether a hop-by-hop header (RFC 9110 7.6.1), which a proxy drops. */
bool httpmsg_hop_by_hop(struct httpmsg_span name);

/* ---- chunked transfer coding (RFC 9112 7.1) ---- */
struct httpmsg_chunked {
        int state;
        uint64_t left;   /* data bytes of the current chunk not yet out */
        unsigned digits; /* of the size line so far */
        size_t line;     /* bytes of an extension or trailer line so far */
};

/* Decode in[0..in_len) into out (at most out_max bytes). *ret_used: input
 * taken; *ret_out: data bytes written. 1 once the last chunk and its
 * trailers are through (input after that is not taken), 0 for more,
 * -EPROTO for a malformed coding (sizes past 2^60, lines past 8 KiB). */
int httpmsg_chunked_run(struct httpmsg_chunked *d, const char *in, size_t in_len, size_t *ret_used,
                        char *out, size_t out_max, size_t *ret_out);

/* What of a raw request URI follows its first skip path segments (runs of
 * '/' as one): a pointer into uri at a '/', a '?' or its end. NULL when it
 * has fewer segments. */
const char *httpmsg_uri_rest(const char *uri, unsigned skip);
