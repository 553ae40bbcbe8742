/* SPDX-License-Identifier: MIT */
/* The route table (src/api/routes.c): patterns, methods, auth kinds, the
 * parameters a match yields, and the paths no route has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/api/control.h"
#include "src/api/dataplane.h"
#include "src/api/files.h"
#include "src/api/ports.h"
#include "src/api/routes.h"

static struct api_match m;

static const struct api_route *match(const char *method, const char *path)
{
        memset(&m, 0xa5, sizeof(m)); /* nothing of an earlier match survives */
        api_route_match(method, path, &m);
        return m.route;
}

static void expect(const char *method, const char *path, api_handler *h, enum api_auth auth,
                   const char *name, const char *id)
{
        const struct api_route *r = match(method, path);
        assert_non_null(r);
        assert_true(m.method_ok);
        assert_ptr_equal(r->handler, h);
        assert_int_equal(r->auth, auth);
        if (name)
                assert_string_equal(m.name, name);
        else
                assert_null(m.name);
        if (id)
                assert_string_equal(m.id, id);
        else
                assert_null(m.id);
}

/* A path with a route, but not for the method: 405 after the path's own
 * authentication. */
static void expect_405(const char *method, const char *path, enum api_auth auth)
{
        const struct api_route *r = match(method, path);
        assert_non_null(r);
        assert_false(m.method_ok);
        assert_int_equal(r->auth, auth);
}

static void expect_none(const char *method, const char *path)
{
        assert_null(match(method, path));
}

/* No route, but under an endpoint: the name is checked, then 404. */
static void expect_catch_all(const char *path, const char *name)
{
        const struct api_route *r = match("GET", path);
        assert_non_null(r);
        assert_true(m.method_ok);
        assert_int_equal(r->auth, API_AUTH_NONE);
        assert_non_null(strstr(r->pattern, "/*"));
        assert_string_equal(m.name, name);
}

static void test_control_plane(void **state)
{
        expect("GET", "/v1/sandboxes", control_list, API_AUTH_IDENTITY, NULL, NULL);
        expect("GET", "/v1/sandboxes/", control_list, API_AUTH_IDENTITY, NULL, NULL);
        expect("GET", "//v1///sandboxes", control_list, API_AUTH_IDENTITY, NULL, NULL);
        expect("GET", "/v1/sandboxes/box", control_get, API_AUTH_IDENTITY, "box", NULL);
        expect("GET", "/v1/sandboxes/box/", control_get, API_AUTH_IDENTITY, "box", NULL);
        expect("DELETE", "/v1/sandboxes/box", control_delete, API_AUTH_IDENTITY, "box", NULL);
        expect("POST", "/v1/sandboxes/box/attach", control_attach, API_AUTH_IDENTITY, "box", NULL);
        expect("POST", "/v1/sandboxes/box/stop", control_stop, API_AUTH_IDENTITY, "box", NULL);
        /* A bad name still names the route: it is refused after the token. */
        expect("GET", "/v1/sandboxes/-bad!", control_get, API_AUTH_IDENTITY, "-bad!", NULL);
        expect_405("POST", "/v1/sandboxes", API_AUTH_IDENTITY);
        expect_405("PUT", "/v1/sandboxes/box", API_AUTH_IDENTITY);
        expect_405("GET", "/v1/sandboxes/box/attach", API_AUTH_IDENTITY);
        expect_405("DELETE", "/v1/sandboxes/box/stop", API_AUTH_IDENTITY);
        expect_405("HEAD", "/v1/sandboxes", API_AUTH_IDENTITY);
}

static void test_data_plane(void **state)
{
        const char *ep = "/v1/sandboxes/box";
        char p[256];
#define P(tail) (snprintf(p, sizeof(p), "%s%s", ep, tail), p)
        expect("POST", P("/exec"), dataplane_exec, API_AUTH_CREDENTIAL, "box", NULL);
        expect("POST", P("/exec/"), dataplane_exec, API_AUTH_CREDENTIAL, "box", NULL);
        expect("GET", P("/processes"), dataplane_list, API_AUTH_CREDENTIAL, "box", NULL);
        expect("POST", P("/processes"), dataplane_spawn, API_AUTH_CREDENTIAL, "box", NULL);
        expect("GET", P("/processes/p1-ab"), dataplane_poll, API_AUTH_CREDENTIAL, "box", "p1-ab");
        expect("DELETE", P("/processes/p1"), dataplane_kill, API_AUTH_CREDENTIAL, "box", "p1");
        expect("POST", P("/processes/p1/signal"), dataplane_signal, API_AUTH_CREDENTIAL, "box",
               "p1");
        expect("POST", P("/processes/p1/stdin"), dataplane_stdin, API_AUTH_CREDENTIAL, "box", "p1");
        expect("GET", P("/processes/p1/"), dataplane_poll, API_AUTH_CREDENTIAL, "box", "p1");
        /* An empty id is an id (that never exists), never the list; a bad
         * one is matched too and refused as a missing process. */
        expect("GET", P("/processes/"), dataplane_poll, API_AUTH_CREDENTIAL, "box", "");
        expect("GET", P("/processes//"), dataplane_poll, API_AUTH_CREDENTIAL, "box", "");
        expect("DELETE", P("/processes/"), dataplane_kill, API_AUTH_CREDENTIAL, "box", "");
        expect("GET", P("/processes/a.b"), dataplane_poll, API_AUTH_CREDENTIAL, "box", "a.b");
        expect("GET", P("/files"), files_read, API_AUTH_CREDENTIAL, "box", NULL);
        expect("GET", P("/files/list"), files_list, API_AUTH_CREDENTIAL, "box", NULL);
        expect("PUT", P("/files"), files_upload, API_AUTH_CREDENTIAL, "box", NULL);
        expect_405("GET", P("/exec"), API_AUTH_CREDENTIAL);
        expect_405("DELETE", P("/processes"), API_AUTH_CREDENTIAL);
        expect_405("PUT", P("/processes/p1"), API_AUTH_CREDENTIAL);
        expect_405("GET", P("/processes/p1/signal"), API_AUTH_CREDENTIAL);
        expect_405("POST", P("/files"), API_AUTH_CREDENTIAL);
        expect_405("PUT", P("/files/list"), API_AUTH_CREDENTIAL);
        /* Ports: the shares' own, and every other method and depth proxied. */
        expect("GET", P("/ports/shares"), ports_share_list, API_AUTH_CREDENTIAL, "box", NULL);
        expect("POST", P("/ports/8000/share"), ports_share_create, API_AUTH_CREDENTIAL, "box",
               NULL);
        assert_string_equal(m.port, "8000");
        expect("GET", P("/ports/8000/share"), ports_proxy, API_AUTH_CREDENTIAL, "box", NULL);
        expect("DELETE", P("/ports/8000/share/ab"), ports_share_delete, API_AUTH_CREDENTIAL, "box",
               NULL);
        expect("PUT", P("/ports/8000/share/ab"), ports_proxy, API_AUTH_CREDENTIAL, "box", NULL);
        expect("PATCH", P("/ports/8000"), ports_proxy, API_AUTH_CREDENTIAL, "box", NULL);
        expect("GET", P("/ports/8000/"), ports_proxy, API_AUTH_CREDENTIAL, "box", NULL);
        expect("GET", P("/ports/1/a/b/c/d/e/f/g/h/i/j/k"), ports_proxy, API_AUTH_CREDENTIAL, "box",
               NULL);
        assert_string_equal(m.port, "1");
        assert_true(m.route->streams);
        expect("GET", "/v1/preview/tok/x/y", ports_preview, API_AUTH_NONE, NULL, NULL);
        expect_405("POST", P("/ports/shares"), API_AUTH_CREDENTIAL);
#undef P
}

static void test_streams_and_caps(void **state)
{
        const struct api_route *r = match("PUT", "/v1/sandboxes/box/files");
        assert_true(r->streams);
        assert_int_equal(r->cap, API_CAP_FILE);
        /* Held in memory, under max_body, when it is refused while draining. */
        assert_int_equal(api_route_held_cap(r), API_CAP_BODY);
        r = match("GET", "/v1/sandboxes/box/files");
        assert_false(r->streams);
        r = match("POST", "/v1/sandboxes/box/exec");
        assert_false(r->streams);
        assert_int_equal(api_route_held_cap(r), API_CAP_BODY);
        assert_int_equal(api_route_held_cap(NULL), API_CAP_BODY);
}

static void test_no_route(void **state)
{
        expect_none("GET", "/");
        expect_none("GET", "");
        expect_none("GET", "/v1");
        expect_none("GET", "/v1/other");
        expect_none("GET", "/v2/sandboxes");
        expect_none("GET", "/healthzz");
        expect_none("GET", "/v1/sandboxes/box/a/b/c/d");
        expect_none("GET", "/v1/sandboxes/box/processes/p1/signal/x");
        expect_catch_all("/v1/sandboxes/box/nope", "box");
        expect_catch_all("/v1/sandboxes/box/exec/x", "box");
        expect_catch_all("/v1/sandboxes/box/files/x", "box");
        expect_catch_all("/v1/sandboxes/box/processes/p1/kill", "box");
        expect_catch_all("/v1/sandboxes/-bad!/nope", "-bad!");
        expect_catch_all("/v1/sandboxes/box/attach/x", "box");
        /* Too long to name anything. */
        char longp[2048];
        memset(longp, 'a', sizeof(longp) - 1);
        longp[0] = '/';
        longp[sizeof(longp) - 1] = '\0';
        expect_none("GET", longp);
        memcpy(longp, "/v1/sandboxes/", 14);
        longp[API_PATH_MAX] = '\0';
        expect_none("GET", longp);
        longp[API_PATH_MAX - 1] = '\0';
        assert_non_null(match("GET", longp)); /* one byte less: a (bad) name */
}

static void test_open_routes(void **state)
{
        const struct api_route *r = match("GET", "/healthz");
        assert_non_null(r);
        assert_int_equal(r->auth, API_AUTH_NONE);
        assert_true(m.method_ok);
        assert_non_null(match("POST", "/metrics"));
        assert_int_equal(m.route->auth, API_AUTH_NONE);
}

/* Entries of a pattern are adjacent and share its auth kind; a method
 * appears once per pattern, and an entry of any method (NULL) comes last;
 * only a PUT and the port proxy's any-method entries stream. */
static void test_table_shape(void **state)
{
        size_t n;
        const struct api_route *t = api_routes(&n);
        for (size_t i = 0; i < n; i++) {
                assert_int_equal(t[i].pattern[0], '/');
                assert_non_null(t[i].handler);
                if (t[i].streams && t[i].method)
                        assert_string_equal(t[i].method, "PUT");
                bool seen_gap = false;
                for (size_t k = i + 1; k < n; k++) {
                        if (strcmp(t[i].pattern, t[k].pattern)) {
                                seen_gap = true;
                                continue;
                        }
                        assert_false(seen_gap);
                        assert_int_equal(t[i].auth, t[k].auth);
                        assert_non_null(t[i].method); /* an any-method entry is the last */
                        if (t[k].method)
                                assert_string_not_equal(t[i].method, t[k].method);
                }
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_control_plane),    cmocka_unit_test(test_data_plane),
            cmocka_unit_test(test_streams_and_caps), cmocka_unit_test(test_no_route),
            cmocka_unit_test(test_open_routes),      cmocka_unit_test(test_table_shape),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
