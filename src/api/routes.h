/* SPDX-License-Identifier: MIT */
/* The route table: every request the API answers, control plane and data
 * plane, in one table in routes.c (redis's command table is the model).
 * An entry is a method, a path pattern, how the caller is authenticated,
 * whether the body streams, the cap on the body, and the handler.
 *
 * A pattern is segments split on '/': a literal matches itself, {name} a
 * sandbox name (any non-empty segment; it is checked after matching, so a
 * bad one is a 400, not a 404), {id} a process id (any segment, the empty
 * one included: `processes/` names the process with the empty id, which
 * never exists, and is not the list), `*` any non-empty segment. In a path,
 * runs of '/' count as one, and a trailing '/' is matched as an empty last
 * segment first, then ignored: `exec/` is exec, `processes/` is the empty
 * id. {port} is any segment (its handler checks it), and a last `**`
 * any number of segments, none included (the port proxy's path).
 *
 * The server looks a request's route up once, when its head is in
 * (api_route_match), and keeps the match with the request. Entries with the
 * same pattern are adjacent; the first whose pattern matches decides the
 * path, and when none of that pattern's entries has the method the answer
 * is 405 (after authentication, as for any request to that path). A path
 * no pattern matches is 404 not_found before anything else. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "jwt.h"
#include "respond.h"
#include "../manager/manager.h"

struct api;
struct api_req;

enum api_auth {
        API_AUTH_NONE,       /* anyone (/healthz, /metrics) */
        API_AUTH_IDENTITY,   /* a deployment's identity token, then its account's check */
        API_AUTH_CREDENTIAL, /* the data-plane credential of the sandbox {name} */
};

enum api_cap {
        API_CAP_BODY, /* max_body: a body held in memory */
        API_CAP_FILE, /* max_file: a file upload, streamed to disk */
};

/* One request as a handler sees it, after authentication. */
struct api_call {
        struct api *a;
        struct api_req *req;
        const char *name;         /* {name} of the path, valid; or NULL */
        const char *id;           /* {id} of the path, valid; or NULL */
        const char *port;         /* {port} of the path, as sent; or NULL */
        struct jwt_claims claims; /* identity routes: the token's */
        struct mgr_caller caller; /* identity routes: into claims */
        struct sandbox *sb;       /* credential routes: entered, left after the
                                   * handler (a stream takes it: set NULL) */
};

typedef void api_handler(struct api_call *c, struct api_resp *resp);

struct api_route {
        const char *method; /* NULL: any */
        const char *pattern;
        enum api_auth auth;
        bool streams; /* the body goes to a stream the handler opens when
                       * the head is in (req->stream), not to memory */
        enum api_cap cap;
        api_handler *handler;
};

/* A path this long or longer matches nothing. */
#define API_PATH_MAX 1024
#define API_MAX_SEGMENTS 128

struct api_match {
        const struct api_route *route; /* NULL: no pattern matches the path */
        bool method_ok;                /* false: the path's route lacks the method (405) */
        const char *name;              /* the {name} / {id} segments, or NULL */
        const char *id;
        const char *port;
        char segs[API_PATH_MAX + 1]; /* the path's segments, NUL-separated */
};

/* Match method and path (without the query) against the table. */
void api_route_match(const char *method, const char *path, struct api_match *m);
/* The table, for the tests. */
const struct api_route *api_routes(size_t *ret_n);

/* The cap on a request's body held in memory, by its route: its own for a
 * route that holds its body, max_body for an unknown route and for a
 * streaming one (whose body is held only when it is refused). */
enum api_cap api_route_held_cap(const struct api_route *route);
int64_t api_cap_bytes(const struct api *a, enum api_cap cap);
/* resp = 413 for a body over cap. */
void api_too_large(const struct api *a, enum api_cap cap, struct api_resp *resp);

/* Answer a request by its match: authenticate, check the path's
 * parameters and the method, run the handler. For a streaming route this
 * runs when the head is in, and the handler opens req->stream or answers;
 * for the others when the body is complete. */
void api_route_run(struct api *a, struct api_req *req, struct api_resp *resp);
