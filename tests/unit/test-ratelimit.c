/* SPDX-License-Identifier: MIT */
/* Unit tests of the per-deployment token buckets (src/api/ratelimit.c):
 * burst, refill, Retry-After, independence of keys, the bounded table and
 * concurrent takers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "src/api/ratelimit.h"
#include "src/common/util.h"

static void test_bad_arguments(void **state)
{
        struct ratelimit *rl = NULL;
        assert_int_equal(ratelimit_new(0, 0, &rl), -EINVAL);
        assert_int_equal(ratelimit_new(-1, 0, &rl), -EINVAL);
        assert_int_equal(ratelimit_new(10, -1, &rl), -EINVAL);
        assert_int_equal(ratelimit_new(INT64_MAX, 0, &rl), -EINVAL);
        assert_int_equal(ratelimit_new(10, INT64_MAX, &rl), -EINVAL);
        assert_null(rl);
        ratelimit_free(NULL);
}

static void test_burst_then_refill(void **state)
{
        struct ratelimit *rl = NULL;
        assert_int_equal(ratelimit_new(5, 10, &rl), 0);
        int64_t t = 1000000;
        for (int i = 0; i < 10; i++)
                assert_int_equal(ratelimit_take(rl, "dep-a", t), 0);
        /* Empty: one token comes back after 200 ms, announced as 1 s. */
        assert_int_equal(ratelimit_take(rl, "dep-a", t), 1);
        assert_int_equal(ratelimit_take(rl, "dep-a", t + 199), 1);
        assert_int_equal(ratelimit_take(rl, "dep-a", t + 200), 0);
        assert_int_equal(ratelimit_take(rl, "dep-a", t + 200), 1);
        /* A long pause fills the bucket to the burst, not beyond. */
        t += 3600 * 1000;
        for (int i = 0; i < 10; i++)
                assert_int_equal(ratelimit_take(rl, "dep-a", t), 0);
        assert_true(ratelimit_take(rl, "dep-a", t) > 0);
        ratelimit_free(rl);
}

static void test_retry_after_rounds_up(void **state)
{
        struct ratelimit *rl = NULL;
        /* Rate 1, burst 1: one request a second. */
        assert_int_equal(ratelimit_new(1, 1, &rl), 0);
        assert_int_equal(ratelimit_take(rl, "d", 5000), 0);
        assert_int_equal(ratelimit_take(rl, "d", 5000), 1);
        assert_int_equal(ratelimit_take(rl, "d", 5999), 1);
        assert_int_equal(ratelimit_take(rl, "d", 6000), 0);
        /* A clock that goes back refills nothing and breaks nothing. */
        assert_int_equal(ratelimit_take(rl, "d", 1000), 1);
        ratelimit_free(rl);
}

static void test_default_burst(void **state)
{
        struct ratelimit *rl = NULL;
        assert_int_equal(ratelimit_new(3, 0, &rl), 0);
        for (int i = 0; i < 6; i++)
                assert_int_equal(ratelimit_take(rl, "d", 0), 0);
        assert_true(ratelimit_take(rl, "d", 0) > 0);
        ratelimit_free(rl);
}

static void test_keys_independent(void **state)
{
        struct ratelimit *rl = NULL;
        assert_int_equal(ratelimit_new(1, 2, &rl), 0);
        assert_int_equal(ratelimit_take(rl, "noisy", 0), 0);
        assert_int_equal(ratelimit_take(rl, "noisy", 0), 0);
        for (int i = 0; i < 100; i++)
                assert_true(ratelimit_take(rl, "noisy", 0) > 0);
        assert_int_equal(ratelimit_take(rl, "quiet", 0), 0);
        assert_int_equal(ratelimit_take(rl, "quiet", 0), 0);
        assert_true(ratelimit_take(rl, "quiet", 0) > 0);
        ratelimit_free(rl);
}

static void test_table_bounded(void **state)
{
        struct ratelimit *rl = NULL;
        assert_int_equal(ratelimit_new(1, 1, &rl), 0);
        char key[32];
        /* Fill the table with drained buckets. */
        for (int i = 0; i < RATELIMIT_MAX_KEYS; i++) {
                snprintf(key, sizeof(key), "k%d", i);
                assert_int_equal(ratelimit_take(rl, key, 0), 0);
        }
        /* Full of busy keys: a new key is served (untracked), old ones stay limited. */
        assert_int_equal(ratelimit_take(rl, "late", 0), 0);
        assert_int_equal(ratelimit_take(rl, "late", 0), 0);
        assert_true(ratelimit_take(rl, "k0", 0) > 0);
        /* Later every old bucket is full again: they are dropped and the
         * new key is tracked (and limited) once more. */
        assert_int_equal(ratelimit_take(rl, "late", 10000), 0);
        assert_true(ratelimit_take(rl, "late", 10000) > 0);
        ratelimit_free(rl);
}

static struct ratelimit *shared;
static atomic_int allowed;

static void *taker(void *arg)
{
        for (int i = 0; i < 1000; i++)
                if (ratelimit_take(shared, "dep", 42) == 0)
                        atomic_fetch_add(&allowed, 1);
        return NULL;
}

static void test_concurrent(void **state)
{
        assert_int_equal(ratelimit_new(10, 100, &shared), 0);
        pthread_t th[8];
        for (int i = 0; i < 8; i++)
                assert_int_equal(pthread_create(&th[i], NULL, taker, NULL), 0);
        for (int i = 0; i < 8; i++)
                pthread_join(th[i], NULL);
        /* The clock stood still: exactly the burst got through. */
        assert_int_equal(atomic_load(&allowed), 100);
        ratelimit_free(shared);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_bad_arguments),
            cmocka_unit_test(test_burst_then_refill),
            cmocka_unit_test(test_retry_after_rounds_up),
            cmocka_unit_test(test_default_burst),
            cmocka_unit_test(test_keys_independent),
            cmocka_unit_test(test_table_bounded),
            cmocka_unit_test(test_concurrent),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
