/* SPDX-License-Identifier: MIT */
/* etcd's wire format (store/placement-etcd-wire.c): encoding of keys and
 * values, the txn bodies, and the parsing of hostile answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../src/store/placement-etcd.h"

static int parse_range_str(const char *s, struct etcd_range *rr, int64_t *rev)
{
        struct sbx_error err = {0};
        return etcd_parse_range(s, strlen(s), rr, rev, &err);
}

static void test_b64(void **state)
{
        (void)state;
        char *b = etcd_b64("/sandboxd/place/d/n", 19);
        assert_string_equal(b, "L3NhbmRib3hkL3BsYWNlL2Qvbg==");
        char out[64];
        size_t n = 0;
        assert_int_equal(etcd_unb64(b, strlen(b), out, sizeof(out), &n), 0);
        assert_int_equal(n, 19);
        assert_memory_equal(out, "/sandboxd/place/d/n", 19);
        free(b);
        assert_int_equal(etcd_unb64("", 0, out, sizeof(out), &n), 0);
        assert_int_equal(n, 0);
        /* Not a multiple of 4, a bad character, '=' in the middle, too big. */
        assert_int_equal(etcd_unb64("abc", 3, out, sizeof(out), &n), -EBADMSG);
        assert_int_equal(etcd_unb64("ab!d", 4, out, sizeof(out), &n), -EBADMSG);
        assert_int_equal(etcd_unb64("a=bc", 4, out, sizeof(out), &n), -EBADMSG);
        assert_int_equal(etcd_unb64("ab=c", 4, out, sizeof(out), &n), -EBADMSG);
        assert_int_equal(etcd_unb64("YWJjZA==", 8, out, 3, &n), -E2BIG);
}

static void test_prefix_end(void **state)
{
        (void)state;
        char out[16];
        assert_int_equal(etcd_prefix_end("/a/", out, sizeof(out)), 0);
        assert_string_equal(out, "/a0");
        assert_int_equal(etcd_prefix_end("", out, sizeof(out)), -EINVAL);
        assert_int_equal(etcd_prefix_end("\xff\xff", out, sizeof(out)), -EINVAL);
        assert_int_equal(etcd_prefix_end("a\xff", out, sizeof(out)), 0);
        assert_string_equal(out, "b");
}

static void test_txn_json(void **state)
{
        (void)state;
        struct etcd_txn t = {.n_cmp = 2, .n_success = 2, .n_failure = 1};
        t.cmp[0] = (struct etcd_cmp){.key = "k", .target = ETCD_CREATE, .rev = 0};
        t.cmp[1] = (struct etcd_cmp){.key = "c", .target = ETCD_MOD, .rev = 42};
        t.success[0] = (struct etcd_op){.kind = ETCD_PUT, .key = "k", .value = "v", .lease = 7};
        t.success[1] = (struct etcd_op){.kind = ETCD_DELETE, .key = "c"};
        t.failure[0] = (struct etcd_op){.kind = ETCD_RANGE, .key = "k"};
        char *s = etcd_txn_json(&t);
        assert_non_null(s);
        json_t *j = json_loads(s, 0, NULL);
        assert_non_null(j);
        json_t *c0 = json_array_get(json_object_get(j, "compare"), 0);
        assert_string_equal(json_string_value(json_object_get(c0, "key")), "aw==");
        assert_string_equal(json_string_value(json_object_get(c0, "target")), "CREATE");
        assert_string_equal(json_string_value(json_object_get(c0, "create_revision")), "0");
        json_t *c1 = json_array_get(json_object_get(j, "compare"), 1);
        assert_string_equal(json_string_value(json_object_get(c1, "mod_revision")), "42");
        json_t *put =
            json_object_get(json_array_get(json_object_get(j, "success"), 0), "request_put");
        assert_string_equal(json_string_value(json_object_get(put, "value")), "dg==");
        assert_string_equal(json_string_value(json_object_get(put, "lease")), "7");
        assert_non_null(json_object_get(json_array_get(json_object_get(j, "success"), 1),
                                        "request_delete_range"));
        assert_non_null(
            json_object_get(json_array_get(json_object_get(j, "failure"), 0), "request_range"));
        json_decref(j);
        free(s);
        t.n_cmp = ETCD_MAX_OPS + 1;
        assert_null(etcd_txn_json(&t));
}

static void test_range_parse(void **state)
{
        (void)state;
        struct etcd_kv kv[2];
        struct etcd_range rr = {.kvs = kv, .cap = 2};
        int64_t rev = 0;
        /* etcd 3.4's form: int64s as strings, defaults left out. */
        assert_int_equal(parse_range_str("{\"header\":{\"revision\":\"17\"},\"kvs\":[{\"key\":"
                                         "\"aw==\",\"create_revision\":\"5\",\"mod_revision\":"
                                         "\"9\",\"version\":\"2\",\"value\":\"dg==\"}],"
                                         "\"count\":\"1\"}",
                                         &rr, &rev),
                         0);
        assert_int_equal(rev, 17);
        assert_int_equal(rr.n, 1);
        assert_string_equal(kv[0].key, "k");
        assert_string_equal(kv[0].value, "v");
        assert_int_equal(kv[0].mod_rev, 9);
        assert_int_equal(parse_range_str("{\"header\":{}}", &rr, &rev), 0);
        assert_int_equal(rr.n, 0);
        /* Hostile: wrong types, too many kvs, bad base64, junk numbers. */
        const char *bad[] = {
            "[]",
            "{\"kvs\":{}}",
            "{\"kvs\":[1]}",
            "{\"kvs\":[{\"key\":\"aw==\"},{\"key\":\"aw==\"},{\"key\":\"aw==\"}]}",
            "{\"kvs\":[{\"key\":\"a\"}]}",
            "{\"kvs\":[{\"key\":\"aw==\",\"mod_revision\":\" 9\"}]}",
            "{\"kvs\":[{\"key\":\"aw==\",\"mod_revision\":\"-1\"}]}",
            "{\"kvs\":[{\"key\":\"aw==\",\"mod_revision\":\"99999999999999999999\"}]}",
            "{\"kvs\":[{\"key\":\"aw==\",\"mod_revision\":true}]}",
            "{\"kvs\":[{}]}",
            "{\"header\":{\"revision\":\"x\"}}",
            "{\"count\":\"1\",\"count\":\"2\"}",
            "not json",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_range_str(bad[i], &rr, &rev), -EBADMSG);
        /* An error etcd reports. */
        assert_int_equal(
            parse_range_str("{\"error\":\"etcdserver: no leader\",\"code\":14}", &rr, &rev), -EIO);
}

static void test_txn_parse(void **state)
{
        (void)state;
        struct sbx_error err = {0};
        struct etcd_kv kv[2];
        struct etcd_range rr[2] = {{.kvs = &kv[0], .cap = 1}, {.kvs = &kv[1], .cap = 1}};
        bool ok = true;
        int64_t rev = 0;
        const char *failed = "{\"header\":{\"revision\":\"30\"},\"responses\":[{\"response_"
                             "range\":{\"kvs\":[{\"key\":\"aw==\",\"value\":\"Mw==\",\"mod_"
                             "revision\":\"29\"}],\"count\":\"1\"}},{\"response_range\":{}}]}";
        assert_int_equal(etcd_parse_txn(failed, strlen(failed), &ok, rr, 2, &rev, &err), 0);
        assert_false(ok); /* "succeeded" left out: false */
        assert_int_equal(rev, 30);
        assert_int_equal(rr[0].n, 1);
        assert_string_equal(kv[0].value, "3");
        assert_int_equal(rr[1].n, 0);
        const char *good = "{\"header\":{\"revision\":\"31\"},\"succeeded\":true,\"responses\":"
                           "[{\"response_put\":{\"header\":{}}}]}";
        assert_int_equal(etcd_parse_txn(good, strlen(good), &ok, rr, 2, &rev, &err), 0);
        assert_true(ok);
        const char *bad1 = "{\"succeeded\":\"yes\"}";
        assert_int_equal(etcd_parse_txn(bad1, strlen(bad1), &ok, rr, 2, &rev, &err), -EBADMSG);
        const char *bad2 = "{\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":\"aw==\"},"
                           "{\"key\":\"aw==\"}]}}]}";
        assert_int_equal(etcd_parse_txn(bad2, strlen(bad2), &ok, rr, 2, &rev, &err), -EBADMSG);
}

static void test_lease_parse(void **state)
{
        (void)state;
        struct sbx_error err = {0};
        int64_t id = 0, ttl = 0;
        const char *grant = "{\"header\":{},\"ID\":\"7587862\",\"TTL\":\"10\"}";
        assert_int_equal(etcd_parse_lease(grant, strlen(grant), &id, &ttl, &err), 0);
        assert_int_equal(id, 7587862);
        assert_int_equal(ttl, 10);
        const char *ka = "{\"result\":{\"header\":{},\"ID\":\"5\"}}";
        assert_int_equal(etcd_parse_lease(ka, strlen(ka), &id, &ttl, &err), 0);
        assert_int_equal(id, 5);
        assert_int_equal(ttl, 0); /* gone */
        const char *bad = "{\"result\":{\"ID\":\"5\",\"TTL\":\"-3\"}}";
        assert_int_equal(etcd_parse_lease(bad, strlen(bad), &id, &ttl, &err), -EBADMSG);
}

static void test_values(void **state)
{
        (void)state;
        struct placement_rec r = {.host = "h1",
                                  .account = "acct",
                                  .sandbox_class = "default",
                                  .generation = 2,
                                  .recreated = "host_lost"};
        char *v = etcd_place_json(&r);
        struct placement_rec back;
        assert_int_equal(etcd_place_parse(v, strlen(v), &back), 0);
        assert_string_equal(back.host, "h1");
        assert_string_equal(back.recreated, "host_lost");
        assert_int_equal(back.generation, 2);
        free(v);
        const char *bad[] = {
            "{\"host\":\"h1\",\"account\":\"a\",\"class\":\"c\",\"generation\":0}",
            "{\"host\":\"../x\",\"account\":\"a\",\"class\":\"c\",\"generation\":1}",
            "{\"host\":\"h1\",\"account\":\"a\",\"class\":\"c\",\"generation\":1,\"recreated\":"
            "\"maybe\"}",
            "{\"host\":\"h\\u0000x\",\"account\":\"a\",\"class\":\"c\",\"generation\":1}",
            "{\"host\":\"h1\",\"class\":\"c\",\"generation\":1}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(etcd_place_parse(bad[i], strlen(bad[i]), &back), -EBADMSG);
        struct placement_host h;
        char *hv = etcd_host_json("http://10.0.0.2:7070", 3);
        assert_int_equal(etcd_host_parse(hv, strlen(hv), &h), 0);
        assert_string_equal(h.url, "http://10.0.0.2:7070");
        free(hv);
        const char *hb = "{\"url\":\"file:///etc/passwd\",\"free\":1}";
        assert_int_equal(etcd_host_parse(hb, strlen(hb), &h), -EBADMSG);
        const char *hb2 = "{\"url\":\"http://a b\",\"free\":1}";
        assert_int_equal(etcd_host_parse(hb2, strlen(hb2), &h), -EBADMSG);
        int64_t n = -1;
        assert_int_equal(etcd_counter_parse("", 0, &n), 0);
        assert_int_equal(n, 0);
        assert_int_equal(etcd_counter_parse("12", 2, &n), 0);
        assert_int_equal(n, 12);
        assert_int_equal(etcd_counter_parse("-1", 2, &n), -EBADMSG);
        assert_int_equal(etcd_counter_parse("1234567890123456789", 19, &n), -EBADMSG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_b64),       cmocka_unit_test(test_prefix_end),
            cmocka_unit_test(test_txn_json),  cmocka_unit_test(test_range_parse),
            cmocka_unit_test(test_txn_parse), cmocka_unit_test(test_lease_parse),
            cmocka_unit_test(test_values),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
