/* SPDX-License-Identifier: MIT */
/* The settings table (src/cli/settings.c): defaults inside their own
 * bounds, values outside them refused naming the setting, never clamped;
 * enums, "auto" and the 0 that means none. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "src/cli/settings.h"
#include "src/common/util.h"

static char state[] = P_tmpdir "/sandboxd-test-settings-XXXXXX";

static int setup(void **st)
{
        unsetenv("SANDBOXD_STATE");
        return mkdtemp(state) ? 0 : -1;
}

static int teardown(void **st)
{
        char conf[sizeof(state) + 32];
        snprintf(conf, sizeof(conf), "%s/sandboxd.conf", state);
        unlink(conf);
        return rmdir(state);
}

/* Parse one flag and its value into s (after the defaults). */
static int parse(struct settings *s, const char *flag, const char *value)
{
        assert_int_equal(settings_defaults(s), 0);
        char *argv[] = {"--state", state, (char *)flag, (char *)value, NULL};
        char **args = NULL;
        int r =
            settings_parse(s, SET_SERVE | SET_URL, value ? 4 : 3, argv, NULL, NULL, NULL, &args);
        free(args);
        return r;
}

static void expect_refused(const char *flag, const char *value)
{
        struct settings s;
        assert_true(parse(&s, flag, value) < 0);
        settings_free(&s);
}

static int64_t parsed(const char *flag, const char *value, size_t offset)
{
        struct settings s;
        assert_int_equal(parse(&s, flag, value), 0);
        int64_t v = *(int64_t *)((char *)&s + offset);
        settings_free(&s);
        return v;
}

#define VALUE(flag, value, field) parsed(flag, value, offsetof(struct settings, field))

static void test_defaults(void **st)
{
        struct settings s;
        assert_int_equal(parse(&s, "--listen", "127.0.0.1:1"), 0);
        assert_string_equal(s.network, "nat");
        assert_string_equal(s.log_level, "info");
        assert_int_equal(s.uid_base, -1);
        assert_int_equal(s.dns_port, -1);
        assert_int_equal(s.disk_limit, 10LL << 30);
        assert_int_equal(s.max_body_bytes, 16 << 20);
        assert_int_equal(s.idle_timeout_ms, 15 * 60 * 1000);
        assert_int_equal(s.pool_size, 2);
        assert_string_equal(s.default_class, "ns");
        assert_string_equal(s.gvisor_platform, "auto");
        assert_null(s.runsc); /* `runsc` on PATH */
        assert_int_equal(s.gvisor_pool_size, 0);
        assert_string_equal(s.url, "http://127.0.0.1:1");
        settings_free(&s);
}

static void test_bounds(void **st)
{
        assert_int_equal(VALUE("--pool-size", "16", pool_size), 16);
        expect_refused("--pool-size", "17");
        assert_int_equal(VALUE("--gvisor-pool-size", "16", gvisor_pool_size), 16);
        expect_refused("--gvisor-pool-size", "17");
        expect_refused("--gvisor-pool-size", "auto");
        expect_refused("--max-connections", "0");
        assert_int_equal(VALUE("--max-connections", "1048576", max_connections), 1048576);
        expect_refused("--max-connections", "4294967297");
        expect_refused("--max-sandboxes", "0");
        expect_refused("--max-open-files", "63");
        expect_refused("--rate-limit", "1000001");
        expect_refused("--rate-burst", "1000000001");
        expect_refused("--token-leeway", "8d");
        assert_int_equal(VALUE("--token-leeway", "7d", token_leeway_ms), 7LL * 86400 * 1000);
        expect_refused("--idle-timeout", "0");
        expect_refused("--cpu-shares", "1");
        expect_refused("--cpu-shares", "262145");
        expect_refused("--max-body", "0");
        expect_refused("--uid-base", "5");
        expect_refused("--dns-port", "65536");
        expect_refused("--max-per-deployment", "-1");
        expect_refused("--max-per-deployment", "x");
        expect_refused("--idle-timeout", "nan");
}

/* Durations that are no number of milliseconds are refused by the parser
 * itself, before any bound: NaN, infinity, and products past int64. */
static void test_durations(void **st)
{
        int64_t ms = 0;
        assert_int_equal(parse_duration_ms("1.5s", &ms), 0);
        assert_int_equal(ms, 1500);
        assert_int_equal(parse_duration_ms("1e12ms", &ms), 0);
        assert_int_equal(ms, 1000000000000LL);
        assert_int_equal(parse_duration_ms("nan", &ms), -EINVAL);
        assert_int_equal(parse_duration_ms("nanms", &ms), -EINVAL);
        assert_int_equal(parse_duration_ms("inf", &ms), -EINVAL);
        assert_int_equal(parse_duration_ms("1e12d", &ms), -EINVAL);
        assert_int_equal(parse_duration_ms("-1s", &ms), -EINVAL);
}

static void test_zero_and_auto(void **st)
{
        assert_int_equal(VALUE("--disk-limit", "0", disk_limit), 0);
        assert_int_equal(VALUE("--disk-limit", "16M", disk_limit), 16 << 20);
        expect_refused("--disk-limit", "8M");
        assert_int_equal(VALUE("--cpu-shares", "0", cpu_shares), 0);
        /* The head watchdog looks a quarter of the deadline apart, at least
         * 50 ms: a deadline under a second would not be kept. */
        assert_int_equal(VALUE("--request-head-timeout", "0", request_head_timeout_ms), 0);
        expect_refused("--request-head-timeout", "500ms");
        assert_int_equal(VALUE("--uid-base", "auto", uid_base), -1);
        assert_int_equal(VALUE("--uid-base", "65536", uid_base), 65536);
        assert_int_equal(VALUE("--dns-port", "auto", dns_port), -1);
        assert_int_equal(VALUE("--dns-port", "0", dns_port), 0);
        /* "auto" only where the table says so. */
        expect_refused("--pool-size", "auto");
}

static void test_enums(void **st)
{
        struct settings s;
        assert_int_equal(parse(&s, "--network", "none"), 0);
        assert_string_equal(s.network, "none");
        settings_free(&s);
        assert_int_equal(parse(&s, "--log-level", "debug"), 0);
        assert_string_equal(s.log_level, "debug");
        settings_free(&s);
        expect_refused("--network", "bridge");
        expect_refused("--network", "NAT");
        expect_refused("--log-level", "verbose");
        assert_int_equal(parse(&s, "--default-class", "gvisor"), 0);
        assert_string_equal(s.default_class, "gvisor");
        settings_free(&s);
        expect_refused("--default-class", "default");
        expect_refused("--default-class", "runc");
        assert_int_equal(parse(&s, "--gvisor-platform", "ptrace"), 0);
        assert_string_equal(s.gvisor_platform, "ptrace");
        settings_free(&s);
        assert_int_equal(parse(&s, "--gvisor-platform", "systrap"), 0);
        settings_free(&s);
        /* Never kvm. */
        expect_refused("--gvisor-platform", "kvm");
        assert_int_equal(parse(&s, "--runsc", "/opt/gvisor/runsc"), 0);
        assert_string_equal(s.runsc, "/opt/gvisor/runsc");
        settings_free(&s);
}

/* The config file is held to the same table. */
static void test_config_file(void **st)
{
        char conf[sizeof(state) + 32];
        snprintf(conf, sizeof(conf), "%s/sandboxd.conf", state);
        FILE *f = fopen(conf, "w");
        assert_non_null(f);
        fputs("# a comment\npool_size = 3\nnetwork = \"none\"\ndefault_class = gvisor\n"
              "gvisor_pool_size = 1\n",
              f);
        fclose(f);
        struct settings s;
        assert_int_equal(parse(&s, "--listen", "127.0.0.1:1"), 0);
        assert_int_equal(s.pool_size, 3);
        assert_string_equal(s.network, "none");
        assert_string_equal(s.default_class, "gvisor");
        assert_int_equal(s.gvisor_pool_size, 1);
        settings_free(&s);
        f = fopen(conf, "w");
        fputs("pool_size = 99\n", f);
        fclose(f);
        expect_refused("--listen", "127.0.0.1:1");
        unlink(conf);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_defaults),      cmocka_unit_test(test_bounds),
            cmocka_unit_test(test_zero_and_auto), cmocka_unit_test(test_enums),
            cmocka_unit_test(test_config_file),   cmocka_unit_test(test_durations),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
