/* SPDX-License-Identifier: MIT */
/* Unit tests of the agent protocol framing (src/agent/proto.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/agent/proto.h"

static void test_round_trip(void **state)
{
        struct agent_msg m;
        uint8_t head[AGENT_HEADER_SIZE];
        uint16_t type;
        uint32_t len;
        const uint8_t bin[] = {0, 1, 2, 0xff, 0};

        agent_msg_init(&m, AGENT_REQ_EXEC);
        assert_int_equal(agent_put_str(&m, AGENT_T_ARGV, "sh"), 0);
        assert_int_equal(agent_put_str(&m, AGENT_T_ARGV, ""), 0);
        assert_int_equal(agent_put_u64(&m, AGENT_T_TIMEOUT_MS, 0x0123456789abcdefull), 0);
        assert_int_equal(agent_put_bool(&m, AGENT_T_STDIN, true), 0);
        assert_int_equal(agent_put_bytes(&m, AGENT_T_DATA, bin, sizeof(bin)), 0);
        assert_int_equal(agent_put_bytes(&m, AGENT_T_STDOUT, NULL, 0), 0);

        agent_header_encode(&m, head);
        assert_int_equal(agent_header_decode(head, &type, &len), 0);
        assert_int_equal(type, AGENT_REQ_EXEC);
        assert_int_equal(len, m.payload.len);
        /* little-endian on the wire */
        assert_int_equal(head[0], m.payload.len & 0xff);
        assert_int_equal(head[4], AGENT_REQ_EXEC);

        const uint8_t *p = (const uint8_t *)m.payload.data;
        struct agent_field f;
        uint32_t pos = 0;
        char *s;
        uint64_t v;
        bool b;

        assert_int_equal(agent_next_field(p, len, &pos, &f), 1);
        assert_int_equal(f.tag, AGENT_T_ARGV);
        assert_int_equal(agent_field_str(&f, &s), 0);
        assert_string_equal(s, "sh");
        free(s);
        assert_int_equal(agent_next_field(p, len, &pos, &f), 1);
        assert_int_equal(agent_field_str(&f, &s), 0);
        assert_string_equal(s, "");
        free(s);
        assert_int_equal(agent_next_field(p, len, &pos, &f), 1);
        assert_int_equal(agent_field_u64(&f, &v), 0);
        assert_true(v == 0x0123456789abcdefull);
        assert_int_equal(agent_next_field(p, len, &pos, &f), 1);
        assert_int_equal(agent_field_bool(&f, &b), 0);
        assert_true(b);
        assert_int_equal(agent_next_field(p, len, &pos, &f), 1);
        assert_int_equal(f.len, sizeof(bin));
        assert_memory_equal(f.data, bin, sizeof(bin));
        /* bytes with a NUL are not a string */
        assert_int_equal(agent_field_str(&f, &s), -EPROTO);
        assert_int_equal(agent_next_field(p, len, &pos, &f), 1);
        assert_int_equal(f.len, 0);
        assert_int_equal(agent_next_field(p, len, &pos, &f), 0);

        assert_int_equal(agent_find(p, len, AGENT_T_TIMEOUT_MS, &f), 1);
        assert_int_equal(agent_field_u64(&f, &v), 0);
        assert_int_equal(agent_find(p, len, AGENT_T_CWD, &f), 0);
        agent_msg_free(&m);
}

static void test_send_recv(void **state)
{
        int sv[2];
        struct agent_msg m;
        uint16_t type;
        uint8_t *payload;
        uint32_t len;

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        agent_msg_init(&m, AGENT_RESP_OK);
        assert_int_equal(agent_put_str(&m, AGENT_T_VERSION, "1.2.3"), 0);
        assert_int_equal(agent_msg_send(sv[0], &m), 0);
        assert_int_equal(agent_msg_recv(sv[1], &type, &payload, &len), 0);
        assert_int_equal(type, AGENT_RESP_OK);
        assert_int_equal(len, m.payload.len);
        assert_memory_equal(payload, m.payload.data, len);
        free(payload);
        agent_msg_free(&m);

        /* empty payload */
        agent_msg_init(&m, AGENT_REQ_LIST);
        assert_int_equal(agent_msg_send(sv[0], &m), 0);
        assert_int_equal(agent_msg_recv(sv[1], &type, &payload, &len), 0);
        assert_int_equal(type, AGENT_REQ_LIST);
        assert_int_equal(len, 0);
        free(payload);
        agent_msg_free(&m);

        /* a frame cut short: EOF before the whole payload */
        uint8_t head[AGENT_HEADER_SIZE] = {10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal(write(sv[0], head, sizeof(head)), sizeof(head));
        assert_int_equal(write(sv[0], "abc", 3), 3);
        close(sv[0]);
        assert_true(agent_msg_recv(sv[1], &type, &payload, &len) < 0);
        close(sv[1]);

        /* a peer that went away: EPIPE, not SIGPIPE */
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        close(sv[1]);
        agent_msg_init(&m, AGENT_REQ_PING);
        assert_int_equal(agent_msg_send(sv[0], &m), -EPIPE);
        agent_msg_free(&m);
        close(sv[0]);
}

static void test_bad_headers(void **state)
{
        uint8_t head[AGENT_HEADER_SIZE] = {0};
        uint16_t type;
        uint32_t len;

        head[4] = 1;
        assert_int_equal(agent_header_decode(head, &type, &len), 0);
        head[6] = 1; /* flags */
        assert_int_equal(agent_header_decode(head, &type, &len), -EPROTO);
        head[6] = 0;
        head[11] = 1; /* reserved */
        assert_int_equal(agent_header_decode(head, &type, &len), -EPROTO);
        head[11] = 0;
        uint32_t big = AGENT_MAX_PAYLOAD + 1;
        memcpy(head, &big, 4);
        assert_int_equal(agent_header_decode(head, &type, &len), -EPROTO);
        big = AGENT_MAX_PAYLOAD;
        memcpy(head, &big, 4);
        assert_int_equal(agent_header_decode(head, &type, &len), 0);
        assert_int_equal(len, AGENT_MAX_PAYLOAD);
}

static void test_oversize(void **state)
{
        struct agent_msg m;
        size_t chunk = 1u << 20;
        char *big = calloc(1, AGENT_MAX_PAYLOAD + 1);

        assert_non_null(big);
        agent_msg_init(&m, AGENT_REQ_STDIN);
        assert_int_equal(agent_put_bytes(&m, AGENT_T_DATA, big, AGENT_MAX_PAYLOAD + 1), -E2BIG);
        assert_int_equal(agent_put_bytes(&m, AGENT_T_DATA, big, AGENT_MAX_PAYLOAD), -E2BIG);
        assert_int_equal(m.payload.len, 0);
        int n = 0;
        while (agent_put_bytes(&m, AGENT_T_DATA, big, chunk) == 0)
                n++;
        assert_int_equal(n, 7); /* 8 would need 8 field headers more */
        size_t before = m.payload.len;
        /* exactly filling the payload is fine, one byte more is not */
        size_t room = AGENT_MAX_PAYLOAD - before - 6;
        assert_int_equal(agent_put_bytes(&m, AGENT_T_DATA, big, room + 1), -E2BIG);
        assert_int_equal(m.payload.len, before);
        assert_int_equal(agent_put_bytes(&m, AGENT_T_DATA, big, room), 0);
        assert_int_equal(m.payload.len, AGENT_MAX_PAYLOAD);
        assert_int_equal(agent_put_bool(&m, AGENT_T_CLOSE, true), -E2BIG);
        agent_msg_free(&m);
        free(big);
}

static void test_malformed_fields(void **state)
{
        struct agent_field f;
        uint32_t pos;
        uint64_t v;
        bool b;

        /* a header cut short */
        uint8_t short_hdr[] = {1, 0, 5, 0};
        pos = 0;
        assert_int_equal(agent_next_field(short_hdr, sizeof(short_hdr), &pos, &f), -EPROTO);
        /* a length running past the end */
        uint8_t past[] = {1, 0, 5, 0, 0, 0, 'a', 'b'};
        pos = 0;
        assert_int_equal(agent_next_field(past, sizeof(past), &pos, &f), -EPROTO);
        /* a huge length that would wrap 32-bit arithmetic */
        uint8_t wrap[] = {1, 0, 0xff, 0xff, 0xff, 0xff, 'a'};
        pos = 0;
        assert_int_equal(agent_next_field(wrap, sizeof(wrap), &pos, &f), -EPROTO);
        /* pos beyond the end */
        pos = 100;
        assert_int_equal(agent_next_field(wrap, sizeof(wrap), &pos, &f), -EPROTO);
        /* empty payload */
        pos = 0;
        assert_int_equal(agent_next_field(NULL, 0, &pos, &f), 0);
        assert_int_equal(agent_find(NULL, 0, 1, &f), 0);
        assert_int_equal(agent_find(past, sizeof(past), 9, &f), -EPROTO);

        /* wrong sizes */
        uint8_t seven[] = {4, 0, 7, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7};
        pos = 0;
        assert_int_equal(agent_next_field(seven, sizeof(seven), &pos, &f), 1);
        assert_int_equal(agent_field_u64(&f, &v), -EPROTO);
        assert_int_equal(agent_field_bool(&f, &b), -EPROTO);
        uint8_t two[] = {6, 0, 1, 0, 0, 0, 2};
        pos = 0;
        assert_int_equal(agent_next_field(two, sizeof(two), &pos, &f), 1);
        assert_int_equal(agent_field_bool(&f, &b), -EPROTO);
}

static void test_field_count(void **state)
{
        /* AGENT_MAX_FIELDS + 1 empty fields: agent_find gives up. */
        size_t n = (size_t)AGENT_MAX_FIELDS + 1;
        uint8_t *p = calloc(n, 6);
        assert_non_null(p);
        for (size_t i = 0; i < n; i++)
                p[i * 6] = 99;
        struct agent_field f;
        assert_int_equal(agent_find(p, (uint32_t)(n * 6), 1, &f), -EPROTO);
        assert_int_equal(agent_find(p, (uint32_t)((n - 1) * 6), 1, &f), 0);
        free(p);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return (uint32_t)rng_state;
}

static void test_garbage(void **state)
{
        uint8_t buf[512];

        for (int iter = 0; iter < 200000; iter++) {
                uint32_t len = rnd() % sizeof(buf);
                for (uint32_t i = 0; i < len; i++)
                        buf[i] = (uint8_t)rnd();
                /* bias towards plausible lengths so parsing goes deep */
                for (uint32_t i = 0; i + 6 <= len; i += 6 + (rnd() % 8)) {
                        buf[i + 3] = buf[i + 4] = buf[i + 5] = 0;
                        buf[i + 2] = (uint8_t)(rnd() % 12);
                }
                struct agent_field f;
                uint32_t pos = 0;
                int r, guard = 0;
                while ((r = agent_next_field(buf, len, &pos, &f)) > 0) {
                        assert_true(f.data >= buf && f.data + f.len <= buf + len);
                        assert_true(pos <= len);
                        uint64_t v;
                        bool b;
                        char *s = NULL;
                        agent_field_u64(&f, &v);
                        agent_field_bool(&f, &b);
                        if (agent_field_str(&f, &s) == 0)
                                free(s);
                        assert_true(++guard <= (int)len);
                }
                assert_true(r == 0 || r == -EPROTO);
                if (len >= AGENT_HEADER_SIZE) {
                        uint16_t t;
                        uint32_t l;
                        if (agent_header_decode(buf, &t, &l) == 0)
                                assert_true(l <= AGENT_MAX_PAYLOAD);
                }
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_send_recv),
            cmocka_unit_test(test_bad_headers),      cmocka_unit_test(test_oversize),
            cmocka_unit_test(test_malformed_fields), cmocka_unit_test(test_field_count),
            cmocka_unit_test(test_garbage),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
