/* SPDX-License-Identifier: MIT */
/* Unit tests of the instances' host-wide claims (src/runtime/claim.c), on a
 * registry in a temporary directory: automatic ranges that never overlap a
 * live instance, explicit ones refused when they do, a restart adopting
 * its ranges, one daemon per state dir, and dead claims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/common/util.h"
#include "src/runtime/runtime.h"

#define COUNT (1024u * 65536u)

static char root[64], registry[96];

static int setup(void **state)
{
        snprintf(root, sizeof(root), "/tmp/test-claim-XXXXXX");
        if (!mkdtemp(root))
                return -1;
        snprintf(registry, sizeof(registry), "%s/registry", root);
        return 0;
}

static int teardown(void **state)
{
        return rm_rf_at(AT_FDCWD, root);
}

/* A state dir of its own for instance `inst` (a one-letter tag, padded). */
static struct rt_claim_want want(char inst, char *state, size_t len, char *id)
{
        snprintf(state, len, "%s/state-%c", root, inst);
        mkdir(state, 0700);
        memset(id, inst, RT_INSTANCE_LEN);
        id[RT_INSTANCE_LEN] = '\0';
        return (struct rt_claim_want){.registry = registry,
                                      .state_dir = state,
                                      .instance = id,
                                      .uid_base = -1,
                                      .uid_count = COUNT,
                                      .net_range = "auto",
                                      .net_slots = 1024};
}

static void test_auto_ranges_differ_and_persist(void **state)
{
        char sa[128], sb[128], ia[17], ib[17];
        struct rt_claim_want wa = want('a', sa, sizeof(sa), ia), wb = want('b', sb, sizeof(sb), ib);
        struct rt_claim a, b;
        struct sbx_error err = {0};
        assert_int_equal(rt_claim_take(&wa, &a, &err), 0);
        assert_int_equal(rt_claim_take(&wb, &b, &err), 0);
        assert_true(a.uid_base >= 1u << 30 && b.uid_base >= 1u << 30);
        assert_true(a.uid_base + COUNT <= b.uid_base || b.uid_base + COUNT <= a.uid_base);
        assert_string_not_equal(a.net_range, b.net_range);
        assert_non_null(strstr(a.net_range, "/20"));
        /* Another daemon on A's state dir is refused; a restart adopts. */
        struct rt_claim a2;
        assert_int_equal(rt_claim_take(&wa, &a2, &err), -EBUSY);
        uint32_t uid = a.uid_base;
        char net[20];
        snprintf(net, sizeof(net), "%s", a.net_range);
        rt_claim_release(&a, false);
        assert_int_equal(rt_claim_take(&wa, &a2, &err), 0);
        assert_int_equal(a2.uid_base, uid);
        assert_string_equal(a2.net_range, net);
        rt_claim_release(&a2, true);
        rt_claim_release(&b, true);
}

static void test_explicit_overlap_refused(void **state)
{
        char sa[128], sc[128], ia[17], ic[17];
        struct rt_claim_want wa = want('a', sa, sizeof(sa), ia), wc = want('c', sc, sizeof(sc), ic);
        struct rt_claim a, c;
        struct sbx_error err = {0};
        assert_int_equal(rt_claim_take(&wa, &a, &err), 0);
        wc.uid_base = a.uid_base + 3 * 65536;
        assert_int_equal(rt_claim_take(&wc, &c, &err), -EADDRINUSE);
        assert_non_null(strstr(err.msg, "in use by another sandboxd"));
        wc.uid_base = -1;
        wc.net_range = a.net_range;
        assert_int_equal(rt_claim_take(&wc, &c, &err), -EADDRINUSE);
        assert_non_null(strstr(err.msg, sa));
        /* The refused instance left nothing in the registry. */
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", registry, ic);
        assert_int_equal(access(path, F_OK), -1);
        /* Once A is dead its explicit range is free; auto still avoids it
         * (its sandboxes may run on) while its state dir exists. */
        uint32_t uid = a.uid_base;
        rt_claim_release(&a, false);
        wc.net_range = "auto";
        assert_int_equal(rt_claim_take(&wc, &c, &err), 0);
        assert_true(c.uid_base != uid);
        rt_claim_release(&c, true);
        wc.uid_base = uid;
        assert_int_equal(rt_claim_take(&wc, &c, &err), 0);
        assert_int_equal(c.uid_base, uid);
        rt_claim_release(&c, true);
        /* A dead claim whose state dir is gone is removed by the next scan. */
        assert_int_equal(rm_rf_at(AT_FDCWD, sa), 0);
        wc.uid_base = -1;
        assert_int_equal(rt_claim_take(&wc, &c, &err), 0);
        snprintf(path, sizeof(path), "%s/%s", registry, ia);
        assert_int_equal(access(path, F_OK), -1);
        rt_claim_release(&c, true);
}

static void test_bad_explicit_ranges(void **state)
{
        char sa[128], ia[17];
        struct rt_claim_want wa = want('d', sa, sizeof(sa), ia);
        struct rt_claim a;
        struct sbx_error err = {0};
        wa.uid_base = 0xffff0000u - COUNT + 65536;
        assert_int_equal(rt_claim_take(&wa, &a, &err), -EINVAL);
        wa.uid_base = -1;
        wa.net_range = "10.1.2.3/16";
        assert_int_equal(rt_claim_take(&wa, &a, &err), -EINVAL);
        wa.net_range = NULL; /* network none: no range claimed */
        assert_int_equal(rt_claim_take(&wa, &a, &err), 0);
        assert_string_equal(a.net_range, "");
        rt_claim_release(&a, true);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_auto_ranges_differ_and_persist, setup, teardown),
            cmocka_unit_test_setup_teardown(test_explicit_overlap_refused, setup, teardown),
            cmocka_unit_test_setup_teardown(test_bad_explicit_ranges, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
