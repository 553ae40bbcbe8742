/* SPDX-License-Identifier: MIT */
/* sbx's config file (src/sbx/conf.c): `key = value`, comments, blanks,
 * spaces around both, later values over earlier, and the lines refused
 * with their number; the path from $XDG_CONFIG_HOME, else $HOME. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "src/sbx/conf.h"

static void test_good(void **state)
{
        (void)state;
        const char *text = "# settings\n\n  server =  http://h:1  \r\n\ttoken=a.b.c\n"
                           "token = x.y=z\n   # indented comment\n";
        struct sbx_config cfg = {0};
        int line = -1;
        char why[128] = "";
        assert_int_equal(sbx_config_parse(text, strlen(text), &cfg, &line, why, sizeof(why)), 0);
        assert_string_equal(cfg.server, "http://h:1");
        assert_string_equal(cfg.token, "x.y=z"); /* the last wins; '=' in a value is kept */
        sbx_config_free(&cfg);
        assert_null(cfg.server);
        assert_int_equal(sbx_config_parse("", 0, &cfg, &line, why, sizeof(why)), 0);
        assert_null(cfg.token);
}

static void expect_line(const char *text, size_t len, int want_line, const char *needle)
{
        struct sbx_config cfg = {0};
        int line = -1;
        char why[128] = "";
        assert_int_equal(sbx_config_parse(text, len, &cfg, &line, why, sizeof(why)), -EINVAL);
        assert_int_equal(line, want_line);
        if (!strstr(why, needle))
                fail_msg("'%s' does not say '%s'", why, needle);
        sbx_config_free(&cfg);
}

static void test_bad(void **state)
{
        (void)state;
        expect_line("server = a\nno equals sign\n", 26, 2, "key = value");
        expect_line("colour = blue\n", 14, 1, "unknown key 'colour'");
        expect_line("\n\ntoken =   \n", 13, 3, "no value");
        expect_line(" = x\n", 5, 1, "unknown key ''");
        expect_line("server = a\0b\n", 13, 0, "NUL");
}

static void test_path(void **state)
{
        (void)state;
        char p[256];
        setenv("XDG_CONFIG_HOME", "/x/conf", 1);
        setenv("HOME", "/home/u", 1);
        assert_int_equal(sbx_config_path(p, sizeof(p)), 0);
        assert_string_equal(p, "/x/conf/sandboxd/config");
        /* A relative XDG_CONFIG_HOME is ignored, as the spec says. */
        setenv("XDG_CONFIG_HOME", "rel", 1);
        assert_int_equal(sbx_config_path(p, sizeof(p)), 0);
        assert_string_equal(p, "/home/u/.config/sandboxd/config");
        unsetenv("XDG_CONFIG_HOME");
        unsetenv("HOME");
        assert_int_equal(sbx_config_path(p, sizeof(p)), -ENOENT);
        setenv("HOME", "/h", 1);
        assert_int_equal(sbx_config_path(p, 8), -ENAMETOOLONG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_good),
            cmocka_unit_test(test_bad),
            cmocka_unit_test(test_path),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
