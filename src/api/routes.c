/* SPDX-License-Identifier: MIT */
/* The route table, its lookup, and the steps every request takes from its
 * route to its handler. */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../agent/proto.h"
#include "../common/names.h"
#include "api-internal.h"
#include "auth.h"
#include "control.h"
#include "dataplane.h"
#include "files.h"
#include "metrics.h"
#include "network.h"
#include "ports.h"

static void healthz(struct api_call *c, struct api_resp *resp)
{
        api_json(resp, 200, json_pack("{s:b}", "ok", 1));
}

static void metrics_page(struct api_call *c, struct api_resp *resp)
{
        metrics_render(c->a, resp);
}

static void no_route(struct api_call *c, struct api_resp *resp)
{
        api_error(resp, 404, "not_found", "no such route");
}

#define NONE API_AUTH_NONE
#define IDENTITY API_AUTH_IDENTITY
#define CREDENTIAL API_AUTH_CREDENTIAL
#define HELD false
#define STREAMED true
#define BODY API_CAP_BODY
#define FILE_CAP API_CAP_FILE
#define EP "/v1/sandboxes/{name}" /* a sandbox's endpoint */

/* A table reads best in columns. */
/* clang-format off */
static const struct api_route routes[] = {
        /* method   pattern                      auth        body      cap       handler */
        { NULL,     "/healthz",                  NONE,       HELD,     BODY,     healthz },
        { NULL,     "/metrics",                  NONE,       HELD,     BODY,     metrics_page },

        /* The control plane. */
        { "GET",    "/v1/sandboxes",             IDENTITY,   HELD,     BODY,     control_list },
        { "GET",    "/v1/images",                IDENTITY,   HELD,     BODY,     control_images },
        { "GET",    EP,                          IDENTITY,   HELD,     BODY,     control_get },
        { "DELETE", EP,                          IDENTITY,   HELD,     BODY,     control_delete },
        { "POST",   EP "/attach",                IDENTITY,   HELD,     BODY,     control_attach },
        { "POST",   EP "/stop",                  IDENTITY,   HELD,     BODY,     control_stop },

        /* The data plane: {endpoint} is a sandbox's endpoint. */
        { "POST",   EP "/exec",                  CREDENTIAL, HELD,     BODY,     dataplane_exec },
        { "GET",    EP "/processes",             CREDENTIAL, HELD,     BODY,     dataplane_list },
        { "POST",   EP "/processes",             CREDENTIAL, HELD,     BODY,     dataplane_spawn },
        { "GET",    EP "/processes/{id}",        CREDENTIAL, HELD,     BODY,     dataplane_poll },
        { "DELETE", EP "/processes/{id}",        CREDENTIAL, HELD,     BODY,     dataplane_kill },
        { "POST",   EP "/processes/{id}/signal", CREDENTIAL, HELD,     BODY,     dataplane_signal },
        { "POST",   EP "/processes/{id}/stdin",  CREDENTIAL, HELD,     BODY,     dataplane_stdin },
        { "GET",    EP "/processes/{id}/stream", CREDENTIAL, HELD,     BODY,     dataplane_stream },
        { "POST",   EP "/processes/{id}/resize", CREDENTIAL, HELD,     BODY,     dataplane_resize },
        { "POST",   EP "/checkpoint",            CREDENTIAL, HELD,     BODY,     dataplane_checkpoint },
        { "POST",   EP "/fork",                  CREDENTIAL, HELD,     BODY,     dataplane_fork },
        { "POST",   EP "/snapshot",              CREDENTIAL, HELD,     BODY,     dataplane_snapshot },
        { "GET",    EP "/files",                 CREDENTIAL, HELD,     BODY,     files_read },
        { "PUT",    EP "/files",                 CREDENTIAL, STREAMED, FILE_CAP, files_upload },
        { "GET",    EP "/files/list",            CREDENTIAL, HELD,     BODY,     files_list },
        { "GET",    EP "/network",               CREDENTIAL, HELD,     BODY,     network_get },
        { "PUT",    EP "/network",               CREDENTIAL, HELD,     BODY,     network_put },
        { "GET",    EP "/network/log",           CREDENTIAL, HELD,     BODY,     network_log },

        /* A sandbox's TCP ports (src/api/ports.c): shares, then the proxy,
         * any method, any path below the port. */
        { "GET",    EP "/ports/shares",          CREDENTIAL, HELD,     BODY,     ports_share_list },
        { "POST",   EP "/ports/{port}/share",    CREDENTIAL, HELD,     BODY,     ports_share_create },
        { NULL,     EP "/ports/{port}/share",    CREDENTIAL, STREAMED, FILE_CAP, ports_proxy },
        { "DELETE", EP "/ports/{port}/share/*",  CREDENTIAL, HELD,     BODY,     ports_share_delete },
        { NULL,     EP "/ports/{port}/share/*",  CREDENTIAL, STREAMED, FILE_CAP, ports_proxy },
        { NULL,     EP "/ports/{port}/**",       CREDENTIAL, STREAMED, FILE_CAP, ports_proxy },
        { NULL,     "/v1/preview/*/**",          NONE,       STREAMED, FILE_CAP, ports_preview },

        /* Anything else under an endpoint, up to the depth of its routes: no
         * route, but a bad name is said first, as on every route there. */
        { NULL,     EP "/*",                     NONE,       HELD,     BODY,     no_route },
        { NULL,     EP "/*/*",                   NONE,       HELD,     BODY,     no_route },
        { NULL,     EP "/*/*/*",                 NONE,       HELD,     BODY,     no_route },
};
/* clang-format on */

#undef NONE
#undef IDENTITY
#undef CREDENTIAL
#undef HELD
#undef STREAMED
#undef BODY
#undef FILE_CAP
#undef EP

const struct api_route *api_routes(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(routes);
        return routes;
}

/* ---- matching ---- */

struct segments {
        const char *v[API_MAX_SEGMENTS + 1];
        size_t n;
        bool trailing; /* the path ends in '/' */
};

/* Split path into m->segs, runs of '/' as one; false when it is too long
 * or too deep to name any route. */
static bool split(const char *path, struct api_match *m, struct segments *s)
{
        size_t len = strlen(path);
        if (len >= API_PATH_MAX)
                return false;
        char *out = m->segs;
        s->n = 0;
        s->trailing = len > 0 && path[len - 1] == '/';
        for (const char *p = path; *p;) {
                if (*p == '/') {
                        p++;
                        continue;
                }
                size_t n = strcspn(p, "/");
                if (s->n == API_MAX_SEGMENTS)
                        return false;
                memcpy(out, p, n);
                out[n] = '\0';
                s->v[s->n++] = out;
                out += n + 1;
                p += n;
        }
        *out = '\0';
        s->v[s->n] = out; /* the empty segment a trailing '/' may stand for */
        return true;
}

/* Whether the first n segments of s match pattern; the parameters into m. */
static bool pattern_match(const char *pattern, const struct segments *s, size_t n,
                          struct api_match *m)
{
        const char *name = NULL, *id = NULL, *port = NULL;
        size_t i = 0;
        for (const char *p = pattern; *p; i++) {
                p++; /* the '/' */
                size_t pl = strcspn(p, "/");
                if (pl == 2 && !strncmp(p, "**", 2)) {
                        i = n; /* the rest, whatever it is */
                        break;
                }
                if (i == n)
                        return false;
                const char *seg = s->v[i];
                if (pl == 6 && !strncmp(p, "{name}", pl) && *seg)
                        name = seg;
                else if (pl == 4 && !strncmp(p, "{id}", pl))
                        id = seg;
                else if (pl == 6 && !strncmp(p, "{port}", pl) && *seg)
                        port = seg;
                else if (!(pl == 1 && *p == '*' && *seg) &&
                         !(strlen(seg) == pl && !strncmp(p, seg, pl)))
                        return false;
                p += pl;
        }
        if (i != n)
                return false;
        m->name = name;
        m->id = id;
        m->port = port;
        return true;
}

/* The first entry whose pattern matches, then the entry of that pattern
 * with the method. */
static bool lookup(const char *method, const struct segments *s, size_t n, struct api_match *m)
{
        for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
                if (!pattern_match(routes[i].pattern, s, n, m))
                        continue;
                m->route = &routes[i];
                m->method_ok = false;
                for (size_t k = i;
                     k < ARRAY_SIZE(routes) && !strcmp(routes[k].pattern, routes[i].pattern); k++) {
                        if (!routes[k].method || !strcmp(routes[k].method, method)) {
                                m->route = &routes[k];
                                m->method_ok = true;
                                break;
                        }
                }
                return true;
        }
        return false;
}

void api_route_match(const char *method, const char *path, struct api_match *m)
{
        struct segments s;
        m->route = NULL;
        m->method_ok = false;
        m->name = m->id = m->port = NULL;
        if (!split(path, m, &s))
                return;
        /* A trailing '/' is an empty last segment where a route takes one
         * (`processes/`: the empty process id), else nothing. */
        if (s.trailing && lookup(method, &s, s.n + 1, m))
                return;
        lookup(method, &s, s.n, m);
}

/* ---- caps ---- */

enum api_cap api_route_held_cap(const struct api_route *route)
{
        return route && !route->streams ? route->cap : API_CAP_BODY;
}

int64_t api_cap_bytes(const struct api *a, enum api_cap cap)
{
        return cap == API_CAP_FILE ? a->cfg.max_file_bytes : a->cfg.max_body_bytes;
}

void api_too_large(const struct api *a, enum api_cap cap, struct api_resp *resp)
{
        api_error(resp, 413, "too_large", "%s over %lld bytes",
                  cap == API_CAP_FILE ? "file" : "request body", (long long)api_cap_bytes(a, cap));
}

/* ---- from the route to the handler ---- */

/* Each step answers and returns false to end the request. The order is
 * the API's: a bad name before a credential (it is for a name), an
 * identity and its account before a name (a disabled account learns
 * nothing about names), both before a process id or a wrong method. */
typedef bool api_step(struct api_call *c, const struct api_route *route, struct api_resp *resp);

static bool step_identity(struct api_call *c, const struct api_route *route, struct api_resp *resp)
{
        return route->auth != API_AUTH_IDENTITY || api_auth_identity(c, resp);
}

static bool step_name(struct api_call *c, const struct api_route *route, struct api_resp *resp)
{
        if (!c->name || name_is_valid(c->name))
                return true;
        api_error(resp, 400, "invalid_argument",
                  "bad sandbox name (must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$)");
        return false;
}

/* A stream's declared length is refused before anything is opened for it
 * (the stream enforces its cap on the bytes too). */
static bool step_length(struct api_call *c, const struct api_route *route, struct api_resp *resp)
{
        if (!route->streams)
                return true;
        const char *cl = api_header(c->req, "Content-Length");
        if (!cl || strtoull(cl, NULL, 10) <= (unsigned long long)api_cap_bytes(c->a, route->cap))
                return true;
        api_too_large(c->a, route->cap, resp);
        return false;
}

static bool step_credential(struct api_call *c, const struct api_route *route,
                            struct api_resp *resp)
{
        return route->auth != API_AUTH_CREDENTIAL || api_auth_credential(c, resp);
}

static bool step_id(struct api_call *c, const struct api_route *route, struct api_resp *resp)
{
        if (!c->id || agent_proc_id_valid(c->id))
                return true;
        api_error(resp, 404, "process_not_found", "no such process");
        return false;
}

static bool step_method(struct api_call *c, const struct api_route *route, struct api_resp *resp)
{
        if (c->req->match.method_ok)
                return true;
        api_error(resp, 405, "invalid_argument", "method %s not allowed here", c->req->method);
        return false;
}

static api_step *const steps[] = {
    step_identity, step_name, step_length, step_credential, step_id, step_method,
};

void api_route_run(struct api *a, struct api_req *req, struct api_resp *resp)
{
        const struct api_match *m = &req->match;
        if (!m->route) {
                no_route(NULL, resp);
                return;
        }
        struct api_call c = {.a = a, .req = req, .name = m->name, .id = m->id, .port = m->port};
        size_t i = 0;
        while (i < ARRAY_SIZE(steps) && steps[i](&c, m->route, resp))
                i++;
        if (i == ARRAY_SIZE(steps))
                m->route->handler(&c, resp);
        if (c.sb)
                mgr_leave(a->mgr, c.sb);
}
