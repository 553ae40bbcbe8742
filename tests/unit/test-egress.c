/* SPDX-License-Identifier: MIT */
/* Unit tests of egress policies (src/runtime/egress-policy.c) and of the
 * DNS forwarder's wire reading (src/runtime/dns-msg.c): CIDR and name
 * matching at their edges, deny before allow, the caps, hostile entries,
 * the store's text form, and packets cut short or looping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/runtime/dns-msg.h"
#include "src/runtime/egress.h"

static struct egress_policy *policy(const char *const *allow, size_t na, const char *const *deny,
                                    size_t nd, bool has_allow)
{
        struct egress_policy *p = malloc(sizeof(*p));
        assert_non_null(p);
        egress_policy_init(p);
        p->has_allow = has_allow;
        for (size_t i = 0; i < na; i++)
                assert_int_equal(egress_policy_add(p, true, allow[i], NULL), 0);
        for (size_t i = 0; i < nd; i++)
                assert_int_equal(egress_policy_add(p, false, deny[i], NULL), 0);
        return p;
}

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static void test_entries(void **state)
{
        static const struct {
                const char *in, *canonical;
        } ok[] = {
            {"203.0.113.0/24", "203.0.113.0/24"},
            {"203.0.113.7", "203.0.113.7/32"},
            {"0.0.0.0/0", "0.0.0.0/0"},
            {"Example.COM.", "example.com"},
            {"*.example.com", "*.example.com"},
            {"a_b.example-1.org", "a_b.example-1.org"},
            {"s3.host1", "s3.host1"}, /* a last label that ends in a digit */
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                struct egress_entry e;
                char out[300];
                assert_int_equal(egress_entry_parse(ok[i].in, &e, NULL), 0);
                egress_entry_format(&e, out, sizeof(out));
                assert_string_equal(out, ok[i].canonical);
        }
        static const char *const bad[] = {
            "",
            "1.2.3.4/33",
            "1.2.3.4/-1",
            "1.2.3.4/",
            "1.2.3.4/8",
            "256.1.1.1",
            "1.2.3",
            "2001:db8::/32",
            "::1",
            "localhost",
            "*.",
            "*.com",
            "a..b.com",
            "-a.example.com",
            "a-.example.com",
            "exa mple.com",
            "a.b/c",
            "*a.example.com",
            "a.*.example.com",
            "1.2.3.4/24x",
            "example.123",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct egress_entry e;
                struct sbx_error err = {0};
                assert_int_equal(egress_entry_parse(bad[i], &e, &err), -EINVAL);
                assert_true(err.msg[0] != '\0');
        }
        /* Too long: a label over 63, a name over 253. */
        char name[400];
        memset(name, 'a', 64);
        strcpy(name + 64, ".com");
        assert_int_equal(egress_entry_parse(name, &(struct egress_entry){0}, NULL), -EINVAL);
        for (size_t i = 0; i < 300; i += 2) {
                name[i] = 'a';
                name[i + 1] = '.';
        }
        strcpy(name + 300, "com");
        assert_int_equal(egress_entry_parse(name, &(struct egress_entry){0}, NULL), -EINVAL);
}

static void test_cap_and_duplicates(void **state)
{
        struct egress_policy *p = policy(NULL, 0, NULL, 0, false);
        char e[32];
        for (int i = 0; i < EGRESS_MAX_ENTRIES; i++) {
                snprintf(e, sizeof(e), "10.%d.%d.0/24", i / 256, i % 256);
                assert_int_equal(egress_policy_add(p, true, e, NULL), 0);
        }
        assert_int_equal(egress_policy_add(p, true, "10.0.0.0/24", NULL), 0); /* kept once */
        assert_int_equal(egress_policy_add(p, true, "11.0.0.0/24", NULL), -E2BIG);
        assert_int_equal(p->n_allow, EGRESS_MAX_ENTRIES);
        free(p);
}

static void test_cidr_matching(void **state)
{
        static const char *const allow[] = {"203.0.113.0/24", "198.51.100.7"};
        static const char *const deny[] = {"203.0.113.128/25"};
        struct egress_policy *p = policy(allow, 2, deny, 1, true);
        assert_int_equal(egress_check_addr(p, IP(203, 0, 113, 0)), EGRESS_ALLOWED);
        assert_int_equal(egress_check_addr(p, IP(203, 0, 113, 127)), EGRESS_ALLOWED);
        assert_int_equal(egress_check_addr(p, IP(203, 0, 113, 128)), EGRESS_DENIED);
        assert_int_equal(egress_check_addr(p, IP(203, 0, 113, 255)), EGRESS_DENIED);
        assert_int_equal(egress_check_addr(p, IP(203, 0, 114, 1)), EGRESS_NOT_LISTED);
        assert_int_equal(egress_check_addr(p, IP(198, 51, 100, 7)), EGRESS_ALLOWED);
        assert_int_equal(egress_check_addr(p, IP(198, 51, 100, 8)), EGRESS_NOT_LISTED);
        free(p);
        /* No allow list: all but what is denied; /0 denies everything. */
        static const char *const all[] = {"0.0.0.0/0"};
        p = policy(NULL, 0, deny, 1, false);
        assert_int_equal(egress_check_addr(p, IP(1, 1, 1, 1)), EGRESS_ALLOWED);
        assert_int_equal(egress_check_addr(p, IP(203, 0, 113, 200)), EGRESS_DENIED);
        free(p);
        p = policy(NULL, 0, all, 1, false);
        assert_int_equal(egress_check_addr(p, IP(1, 1, 1, 1)), EGRESS_DENIED);
        free(p);
        /* An empty allow list: nothing. */
        p = policy(NULL, 0, NULL, 0, true);
        assert_int_equal(egress_check_addr(p, IP(1, 1, 1, 1)), EGRESS_NOT_LISTED);
        assert_true(egress_policy_active(p));
        free(p);
}

static void test_name_matching(void **state)
{
        static const char *const allow[] = {"example.com", "*.cdn.example.net"};
        static const char *const deny[] = {"bad.cdn.example.net"};
        struct egress_policy *p = policy(allow, 2, deny, 1, true);
        assert_int_equal(egress_check_name(p, "example.com"), EGRESS_ALLOWED);
        assert_int_equal(egress_check_name(p, "EXAMPLE.com."), EGRESS_ALLOWED);
        assert_int_equal(egress_check_name(p, "www.example.com"), EGRESS_NOT_LISTED);
        assert_int_equal(egress_check_name(p, "a.cdn.example.net"), EGRESS_ALLOWED);
        assert_int_equal(egress_check_name(p, "a.b.cdn.example.net"), EGRESS_ALLOWED);
        assert_int_equal(egress_check_name(p, "cdn.example.net"), EGRESS_NOT_LISTED);
        assert_int_equal(egress_check_name(p, "xcdn.example.net"), EGRESS_NOT_LISTED);
        assert_int_equal(egress_check_name(p, "bad.cdn.example.net"), EGRESS_DENIED);
        assert_int_equal(egress_check_name(p, "x.bad.cdn.example.net"), EGRESS_ALLOWED);
        assert_int_equal(egress_check_name(p, "example.com.evil.org"), EGRESS_NOT_LISTED);
        assert_int_equal(egress_check_name(p, ""), EGRESS_NOT_LISTED);
        assert_true(egress_policy_has_names(p));
        free(p);
        p = policy(NULL, 0, deny, 1, false);
        assert_int_equal(egress_check_name(p, "other.org"), EGRESS_ALLOWED);
        assert_int_equal(egress_check_name(p, "bad.cdn.example.net"), EGRESS_DENIED);
        free(p);
}

static void test_text_form(void **state)
{
        static const char *const allow[] = {"example.com", "*.w.example.com", "203.0.113.0/24"};
        static const char *const deny[] = {"198.51.100.1"};
        struct egress_policy *p = policy(allow, 3, deny, 1, true);
        struct buf b;
        buf_init(&b, 1 << 20);
        assert_int_equal(egress_policy_to_text(p, &b), 0);
        assert_string_equal((char *)b.data, "allow-list\n+example.com\n+*.w.example.com\n"
                                            "+203.0.113.0/24\n-198.51.100.1/32\n");
        struct egress_policy *q = malloc(sizeof(*q));
        assert_non_null(q);
        assert_int_equal(egress_policy_from_text((char *)b.data, q, NULL), 0);
        assert_true(q->has_allow);
        assert_int_equal(q->n_allow, 3);
        assert_int_equal(q->n_deny, 1);
        assert_int_equal(egress_check_addr(q, IP(198, 51, 100, 1)), EGRESS_DENIED);
        assert_int_equal(egress_policy_from_text("open\n", q, NULL), 0);
        assert_false(egress_policy_active(q));
        assert_int_equal(egress_policy_from_text("closed\n", q, NULL), -EINVAL);
        assert_int_equal(egress_policy_from_text("open\n*x\n", q, NULL), -EINVAL);
        buf_free(&b);
        free(p);
        free(q);
}

/* A query for name (type A), as a stub resolver sends it. */
static size_t query(uint8_t *pkt, const char *name)
{
        static const uint8_t head[] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
        memcpy(pkt, head, sizeof(head));
        size_t i = sizeof(head);
        for (const char *p = name; *p;) {
                size_t l = strcspn(p, ".");
                pkt[i++] = (uint8_t)l;
                memcpy(pkt + i, p, l);
                i += l;
                p += l + (p[l] == '.');
        }
        pkt[i++] = 0;
        memcpy(pkt + i, "\0\1\0\1", 4);
        return i + 4;
}

static void test_dns_question(void **state)
{
        uint8_t pkt[512];
        char name[DNSMSG_NAME_MAX + 1];
        uint16_t type;
        size_t end, n = query(pkt, "WWW.Example.com");
        assert_int_equal(dnsmsg_question(pkt, n, name, &type, &end), 0);
        assert_string_equal(name, "www.example.com");
        assert_int_equal(type, DNSMSG_TYPE_A);
        assert_int_equal(end, n);
        /* Every cut is refused, never read past. */
        for (size_t k = 0; k < n; k++)
                assert_int_equal(dnsmsg_question(pkt, k, name, &type, &end), -EINVAL);
        /* A pointer, a dot inside a label, an answer instead of a query. */
        uint8_t bad[512];
        memcpy(bad, pkt, n);
        bad[12] = 0xc0;
        assert_int_equal(dnsmsg_question(bad, n, name, &type, &end), -EINVAL);
        memcpy(bad, pkt, n);
        bad[14] = '.';
        assert_int_equal(dnsmsg_question(bad, n, name, &type, &end), -EINVAL);
        memcpy(bad, pkt, n);
        bad[2] |= 0x80;
        assert_int_equal(dnsmsg_question(bad, n, name, &type, &end), -EINVAL);
        /* The refusal: same id and question, REFUSED, no records. */
        size_t r = dnsmsg_refuse(pkt, end, DNSMSG_RCODE_REFUSED);
        assert_int_equal(r, n);
        assert_int_equal(pkt[0], 0x12);
        assert_true(pkt[2] & 0x80);
        assert_int_equal(dnsmsg_rcode(pkt, r), DNSMSG_RCODE_REFUSED);
}

static void test_dns_answers(void **state)
{
        uint8_t pkt[512];
        size_t n = query(pkt, "a.example.com");
        pkt[2] = 0x81;
        pkt[3] = 0x80;
        pkt[7] = 3; /* three answers: a CNAME, then two A */
        static const uint8_t rr[] = {
            0xc0, 0x0c, 0, 5, 0, 1, 0,    0, 0, 60, 0, 4, 1,   'b', 0xc0, 0x0e, /* CNAME b.<...> */
            0xc0, 0x0c, 0, 1, 0, 1, 0,    0, 0, 30, 0, 4, 203, 0,   113,  7,    /* A, TTL 30 */
            0xc0, 0x0c, 0, 1, 0, 1, 0x80, 0, 0, 0,  0, 4, 198, 51,  100,  1, /* A, TTL "negative" */
        };
        memcpy(pkt + n, rr, sizeof(rr));
        n += sizeof(rr);
        struct dnsmsg_addr a[4];
        size_t got = 0;
        assert_int_equal(dnsmsg_answers(pkt, n, a, 4, &got), 0);
        assert_int_equal(got, 2);
        assert_int_equal(a[0].addr, IP(203, 0, 113, 7));
        assert_int_equal(a[0].ttl, 30);
        assert_int_equal(a[1].addr, IP(198, 51, 100, 1));
        assert_int_equal(a[1].ttl, 0);
        /* At most max of them. */
        assert_int_equal(dnsmsg_answers(pkt, n, a, 1, &got), 0);
        assert_int_equal(got, 1);
        /* Cut anywhere inside the records: refused. */
        for (size_t k = 12; k < n; k++)
                assert_int_equal(dnsmsg_answers(pkt, k, a, 4, &got), -EINVAL);
        /* A name made of labels that never end is bounded. */
        uint8_t loop[600] = {0x12, 0x34, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0};
        memset(loop + 12, 1, sizeof(loop) - 12);
        assert_int_equal(dnsmsg_answers(loop, sizeof(loop), a, 4, &got), -EINVAL);
}

static void test_budget(void **state)
{
        struct egress_budget b = {0};
        int64_t t = 5000;
        for (int i = 0; i < 200; i++)
                assert_true(egress_budget_take(&b, 100, 200, t));
        assert_false(egress_budget_take(&b, 100, 200, t));     /* the burst is spent */
        assert_false(egress_budget_take(&b, 100, 200, t + 5)); /* half a token */
        assert_true(egress_budget_take(&b, 100, 200, t + 10)); /* 100 a second: one per 10 ms */
        assert_false(egress_budget_take(&b, 100, 200, t + 10));
        /* A clock that goes back refills nothing; a long pause refills the
         * burst, never more. */
        assert_false(egress_budget_take(&b, 100, 200, t));
        for (int i = 0; i < 200; i++)
                assert_true(egress_budget_take(&b, 100, 200, t + 60000));
        assert_false(egress_budget_take(&b, 100, 200, t + 60000));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_entries),       cmocka_unit_test(test_cap_and_duplicates),
            cmocka_unit_test(test_cidr_matching), cmocka_unit_test(test_name_matching),
            cmocka_unit_test(test_text_form),     cmocka_unit_test(test_dns_question),
            cmocka_unit_test(test_dns_answers),   cmocka_unit_test(test_budget),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
