/* SPDX-License-Identifier: MIT */
/* Output bytes become JSON strings: escaping, and invalid UTF-8 replaced
 * by U+FFFD, on the fast path (api_json_text) and the plain one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/api/respond.h"

/* Run bytes through api_json_text and parse the result back. */
static char *round_trip(const char *in, size_t len, size_t *ret_len)
{
        struct api_resp resp = {.body_fd = -1};
        buf_init(&resp.body, 0);
        api_json_text(&resp, 200, json_pack("{s:i}", "n", 1), "a", in, len, "b", "", 0);
        assert_int_equal(resp.status, 200);
        json_error_t e;
        json_t *j = json_loadb(resp.body.data, resp.body.len, JSON_ALLOW_NUL, &e);
        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j, "n")), 1);
        assert_string_equal(json_string_value(json_object_get(j, "b")), "");
        json_t *a = json_object_get(j, "a");
        *ret_len = json_string_length(a);
        char *out = malloc(*ret_len + 1);
        memcpy(out, json_string_value(a), *ret_len + 1);
        json_decref(j);
        buf_free(&resp.body);
        return out;
}

static void expect(const char *in, size_t len, const char *want, size_t want_len)
{
        size_t n;
        char *out = round_trip(in, len, &n);
        assert_int_equal(n, want_len);
        assert_memory_equal(out, want, n);
        free(out);
        size_t m;
        char *plain = utf8_sanitize((const uint8_t *)in, len, &m);
        assert_int_equal(m, want_len);
        assert_memory_equal(plain, want, m);
        free(plain);
}

#define E(in, want) expect(in, sizeof(in) - 1, want, sizeof(want) - 1)
#define FFFD "\xef\xbf\xbd"

static void test_escapes(void **state)
{
        E("plain text", "plain text");
        E("q\"b\\s/", "q\"b\\s/");
        E("nl\n cr\r tab\t bell\a nul\0 del\x7f", "nl\n cr\r tab\t bell\a nul\0 del\x7f");
        E("", "");
}

static void test_utf8(void **state)
{
        E("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
          "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
        E("a\xc3", "a" FFFD);                       /* cut at the end */
        E("\xe2\x82", FFFD FFFD);                   /* cut 3-byte sequence */
        E("\xc0\xaf", FFFD FFFD);                   /* overlong '/' */
        E("\xe0\x80\xaf", FFFD FFFD FFFD);          /* overlong, 3 bytes */
        E("\xed\xa0\x80", FFFD FFFD FFFD);          /* a surrogate */
        E("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* past U+10FFFF */
        E("\x80x\xff", FFFD "x" FFFD);              /* stray bytes */
}

static void test_large(void **state)
{
        size_t len = 3u << 20;
        char *in = malloc(len);
        for (size_t i = 0; i < len; i++)
                in[i] = (char)(i % 251);
        size_t n;
        char *out = round_trip(in, len, &n);
        size_t m;
        char *plain = utf8_sanitize((const uint8_t *)in, len, &m);
        assert_int_equal(n, m);
        assert_memory_equal(out, plain, n);
        free(out);
        free(plain);
        free(in);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_escapes),
            cmocka_unit_test(test_utf8),
            cmocka_unit_test(test_large),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
