/* SPDX-License-Identifier: MIT */
/* libsandboxd's answers parsed as hostile (lib/parse.c): error bodies,
 * records with fields missing or of the wrong type, output with NUL bytes,
 * credential headers that would inject a header, times, and the token's
 * `iss` read without verification. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/internal.h"

static json_t *parse(const char *text)
{
        json_t *o = NULL;
        struct sbx_err err = {0};
        assert_int_equal(sbxc_parse_object(text, strlen(text), &o, &err), 0);
        return o;
}

/* parse_fn on text fails with bad_response naming `needle`. */
static void expect_bad(sbxc_parser fn, void *ret, const char *text, const char *needle)
{
        json_t *o = parse(text);
        struct sbx_err err = {0};
        assert_int_equal(fn(o, ret, &err), -EPROTO);
        assert_string_equal(err.code, "bad_response");
        assert_int_equal(err.status, 0);
        if (!strstr(err.message, needle))
                fail_msg("'%s' does not say '%s'", err.message, needle);
        json_decref(o);
}

static void test_objects(void **state)
{
        (void)state;
        const char *bad[] = {"", "nul", "[1]", "\"s\"", "{\"a\":1,\"a\":2}", "{", "{}x"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                json_t *o = NULL;
                struct sbx_err err = {0};
                assert_int_equal(sbxc_parse_object(bad[i], strlen(bad[i]), &o, &err), -EPROTO);
                assert_null(o);
                assert_string_equal(err.code, "bad_response");
        }
}

static void test_errors(void **state)
{
        (void)state;
        struct sbx_err err = {0};
        const char *body = "{\"error\":{\"code\":\"sandbox_not_found\",\"message\":\"no such\"}}";
        assert_int_equal(sbxc_parse_error(404, body, strlen(body), &err), -ENOENT);
        assert_int_equal(err.status, 404);
        assert_string_equal(err.code, "sandbox_not_found");
        assert_string_equal(err.message, "no such");
        body = "{\"error\":{\"code\":\"already_exists\",\"message\":\"taken\"}}";
        assert_int_equal(sbxc_parse_error(409, body, strlen(body), &err), -EEXIST);
        /* Not the documented body: the status is still told. */
        assert_int_equal(sbxc_parse_error(502, "<html>", 6, &err), -EHOSTDOWN);
        assert_int_equal(err.status, 502);
        assert_string_equal(err.code, "unknown");
        assert_int_equal(sbxc_parse_error(418, "{\"error\":{\"code\":7}}", 20, &err), -EIO);
        assert_string_equal(err.code, "unknown");
        /* A code longer than the field is cut, never overflows. */
        char big[400];
        snprintf(big, sizeof(big), "{\"error\":{\"code\":\"%0200d\",\"message\":\"m\"}}", 0);
        sbxc_parse_error(400, big, strlen(big), &err);
        assert_int_equal(strlen(err.code), sizeof(err.code) - 1);
}

static void test_sandbox(void **state)
{
        (void)state;
        struct sbx_sandbox s = {0};
        json_t *o = parse("{\"name\":\"t\",\"class\":\"default\",\"state\":\"running\","
                          "\"network\":\"nat\",\"image\":\"tiny\",\"extra\":[1]}");
        assert_int_equal(sbxc_parse_sandbox(o, &s, NULL), 0);
        assert_string_equal(s.name, "t");
        assert_string_equal(s.image, "tiny");
        assert_null(s.endpoint);
        sbx_sandbox_clear(&s);
        json_decref(o);
        expect_bad(sbxc_parse_sandbox, &s, "{\"state\":\"running\"}", "'name'");
        expect_bad(sbxc_parse_sandbox, &s, "{\"name\":1,\"state\":\"running\"}", "'name'");
        expect_bad(sbxc_parse_sandbox, &s, "{\"name\":\"a\",\"state\":\"x\",\"image\":5}",
                   "'image'");
        expect_bad(sbxc_parse_sandbox, &s, "{\"name\":\"a\\u0000b\",\"state\":\"x\"}", "NUL");
        assert_null(s.name);
        /* A list with a bad record: nothing returned, nothing leaked. */
        struct sbx_sandbox_list l = {0};
        expect_bad(sbxc_parse_sandbox_list, &l,
                   "{\"sandboxes\":[{\"name\":\"a\",\"state\":\"s\"},{\"name\":\"b\"}]}",
                   "'state'");
        expect_bad(sbxc_parse_sandbox_list, &l, "{\"sandboxes\":{}}", "'sandboxes'");
        assert_null(l.items);
        o = parse("{\"sandboxes\":[]}");
        assert_int_equal(sbxc_parse_sandbox_list(o, &l, NULL), 0);
        assert_int_equal(l.n, 0);
        sbx_sandbox_list_clear(&l);
        json_decref(o);
}

static void test_exec_result(void **state)
{
        (void)state;
        struct sbx_exec_result x = {0};
        json_t *o = parse("{\"exitCode\":3,\"stdout\":\"a\\u0000b\",\"stderr\":\"\","
                          "\"durationMs\":1,\"timedOut\":false,\"truncated\":true}");
        assert_int_equal(sbxc_parse_exec_result(o, &x, NULL), 0);
        assert_int_equal(x.exit_code, 3);
        assert_int_equal(x.out_len, 3);
        assert_memory_equal(x.out, "a\0b", 3);
        assert_true(x.truncated);
        sbx_exec_result_clear(&x);
        json_decref(o);
        expect_bad(sbxc_parse_exec_result, &x, "{\"exitCode\":99999}", "out of range");
        expect_bad(sbxc_parse_exec_result, &x, "{\"exitCode\":0,\"stdout\":\"\",\"stderr\":\"\"}",
                   "'timedOut'");
        expect_bad(sbxc_parse_exec_result, &x, "{\"exitCode\":\"0\"}", "'exitCode'");
}

static void test_process(void **state)
{
        (void)state;
        struct sbx_process p = {0};
        json_t *o = parse("{\"processId\":\"p1\",\"command\":[\"sh\",\"-c\"],\"state\":\"exited\","
                          "\"exitCode\":137,\"pty\":true}");
        assert_int_equal(sbxc_parse_process(o, &p, NULL), 0);
        assert_string_equal(p.argv[1], "-c");
        assert_null(p.argv[2]);
        assert_true(p.has_exit_code && p.exit_code == 137 && p.pty && !p.running);
        sbx_process_clear(&p);
        json_decref(o);
        expect_bad(sbxc_parse_process, &p, "{\"processId\":\"p\",\"state\":\"zombie\"}", "zombie");
        expect_bad(sbxc_parse_process, &p, "{\"processId\":\"p\",\"state\":\"exited\"}",
                   "'exitCode'");
        expect_bad(sbxc_parse_process, &p,
                   "{\"processId\":\"p\",\"state\":\"running\","
                   "\"command\":[\"a\",1]}",
                   "non-string");
        struct sbx_output out = {0};
        expect_bad(sbxc_parse_output, &out,
                   "{\"processId\":\"p\",\"state\":\"running\",\"stdout\":\"\",\"stderr\":\"\","
                   "\"stdoutNext\":-1,\"stderrNext\":0,\"stdoutDropped\":0,\"stderrDropped\":0}",
                   "negative");
        struct sbx_dir d = {0};
        expect_bad(sbxc_parse_dir, &d, "{\"entries\":[{\"name\":\"a\"},7]}", "not an object");
}

static void test_headers(void **state)
{
        (void)state;
        char **h = NULL;
        json_t *o = parse("{\"headers\":{\"Authorization\":\"Bearer abc\",\"X-A\":\"1\"}}");
        assert_int_equal(sbxc_parse_headers(o, &h, NULL), 0);
        assert_string_equal(h[0], "Authorization: Bearer abc");
        assert_string_equal(h[1], "X-A: 1");
        assert_null(h[2]);
        sbxc_strv_free(h);
        json_decref(o);
        const char *bad[] = {
            "{\"headers\":{\"Authorization\":\"Bearer a\\r\\nHost: evil\"}}",
            "{\"headers\":{\"Authorization\":\"a\\nb\"}}",
            "{\"headers\":{\"Bad Name\":\"v\"}}",
            "{\"headers\":{\"A:B\":\"v\"}}",
            "{\"headers\":{\"\":\"v\"}}",
            "{\"headers\":{\"A\":\"x\\u0000y\"}}",
            "{\"headers\":{\"A\":1}}",
            "{\"headers\":[]}",
            "{}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                o = parse(bad[i]);
                h = NULL;
                assert_int_equal(sbxc_parse_headers(o, &h, NULL), -EPROTO);
                assert_null(h);
                json_decref(o);
        }
}

static void test_time(void **state)
{
        (void)state;
        int64_t ms = 0;
        assert_int_equal(sbxc_parse_time("1970-01-01T00:00:01.250Z", &ms), 0);
        assert_int_equal(ms, 1250);
        assert_int_equal(sbxc_parse_time("2026-11-30T15:20:00Z", &ms), 0);
        assert_int_equal(ms, 1796052000000LL);
        const char *bad[] = {"",
                             "2026-11-30",
                             "2026-11-30T15:20:00",
                             "2026-11-30T15:20:00.Z",
                             "2026-11-30T15:20:00+01:00",
                             "2026-11-30T15:20:00.000Zjunk"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(sbxc_parse_time(bad[i], &ms), -EINVAL);
        assert_int_equal(sbxc_parse_time(NULL, &ms), -EINVAL);
}

static void test_issuer(void **state)
{
        (void)state;
        char *iss = NULL;
        /* {"iss":"http://127.0.0.1:7070","sub":"d"} */
        assert_int_equal(
            sbxc_token_issuer("e30.eyJpc3MiOiJodHRwOi8vMTI3LjAuMC4xOjcwNzAiLCJzdWIiOiJkIn0.sig",
                              &iss),
            0);
        assert_string_equal(iss, "http://127.0.0.1:7070");
        free(iss);
        const char *bad[] = {
            "",
            "nodots",
            "a.b",                            /* no third part */
            "e30..sig",                       /* empty payload */
            "e30.e30.sig",                    /* {} : no iss */
            "e30.eyJpc3MiOjF9.s",             /* {"iss":1} */
            "e30.eyJpc3MiOiIifQ.s",           /* {"iss":""} */
            "e30.!!!!.s",                     /* not base64url */
            "e30.eyJ.s",                      /* a cut payload */
            "e30.aGVsbG8.s",                  /* "hello": not JSON */
            "e30.eyJpc3MiOiJhXHUwMDAwYiJ9.s", /* {"iss":"a\u0000b"} */
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                iss = NULL;
                assert_true(sbxc_token_issuer(bad[i], &iss) < 0);
                assert_null(iss);
        }
        assert_true(sbxc_token_issuer(NULL, &iss) < 0);
        /* A payload over 64 KiB is not even decoded. */
        size_t n = 70000;
        char *huge = malloc(n + 10);
        memcpy(huge, "e30.", 4);
        memset(huge + 4, 'A', n);
        memcpy(huge + 4 + n, ".s", 3);
        assert_int_equal(sbxc_token_issuer(huge, &iss), -EINVAL);
        free(huge);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_objects), cmocka_unit_test(test_errors),
            cmocka_unit_test(test_sandbox), cmocka_unit_test(test_exec_result),
            cmocka_unit_test(test_process), cmocka_unit_test(test_headers),
            cmocka_unit_test(test_time),    cmocka_unit_test(test_issuer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
