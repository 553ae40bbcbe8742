/* SPDX-License-Identifier: MIT */
/* Unit tests of name validation (src/common/names.c): these names become
 * path components and store keys, so the edges matter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "src/common/names.h"
#include "src/common/util.h"

static char *repeat(char c, size_t n)
{
        char *s = malloc(n + 1);
        assert_non_null(s);
        memset(s, c, n);
        s[n] = '\0';
        return s;
}

static void test_name_valid(void **state)
{
        static const char *const ok[] = {
            "a",    "A",  "0",  "thread-42", "dep_1",  "acct:7",      "v1.2.3",
            "a..b", "a-", "a.", "x:y:z",     "9lives", "A-Z_a.z:0-9",
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
                assert_true(name_is_valid(ok[i]));
}

static void test_name_invalid(void **state)
{
        static const char *const bad[] = {
            "",
            ".",
            "..",
            "...",
            "a/b",
            "/a",
            "a/",
            "-a",
            "_a",
            ":a",
            ".hidden",
            " a",
            "a b",
            "a\tb",
            "a\nb",
            "a\\b",
            "a*",
            "a?",
            "a%2f",
            "a@b",
            "a+b",
            "a=b",
            "a\"b",
            "a'b",
            "a;b",
            "a|b",
            "a$b",
            "a~",
            "caf\xc3\xa9",              /* é (UTF-8) */
            "\xc3\xa9t\xc3\xa9",        /* leading non-ASCII */
            "a\xe2\x80\x8b",            /* zero-width space */
            "\xef\xbc\x8e\xef\xbc\x8e", /* fullwidth ".." */
            "a\xc0\xaf",                /* overlong '/' */
            "a\x7f",
            "\x01",
            "a\xff",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_false(name_is_valid(bad[i]));
        assert_false(name_is_valid(NULL));
}

static void test_name_length(void **state)
{
        char *s = repeat('a', SBX_NAME_MAX);
        assert_int_equal(SBX_NAME_MAX, 128);
        assert_true(name_is_valid(s));
        free(s);
        s = repeat('a', SBX_NAME_MAX + 1);
        assert_false(name_is_valid(s));
        free(s);
        s = repeat('a', 4096);
        assert_false(name_is_valid(s));
        free(s);
        /* 127 then 128 characters with a separator at the end. */
        s = repeat('b', SBX_NAME_MAX);
        s[SBX_NAME_MAX - 1] = '-';
        assert_true(name_is_valid(s));
        free(s);
}

static void test_image_name(void **state)
{
        static const char *const ok[] = {"a", "0", "base", "python-3_12", "ubuntu2404"};
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
                assert_true(image_name_is_valid(ok[i]));
        static const char *const bad[] = {
            "",   ".",  "..",  "Base",   "a.b", "a:b",      "a/b",
            "-a", "_a", "a b", "../etc", "a\n", "\xc3\xa9",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_false(image_name_is_valid(bad[i]));
        assert_false(image_name_is_valid(NULL));
        char *s = repeat('i', 64);
        assert_true(image_name_is_valid(s));
        free(s);
        s = repeat('i', 65);
        assert_false(image_name_is_valid(s));
        free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_name_valid),
            cmocka_unit_test(test_name_invalid),
            cmocka_unit_test(test_name_length),
            cmocka_unit_test(test_image_name),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
