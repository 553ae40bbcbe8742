/* SPDX-License-Identifier: MIT */
/* The port proxy's parsers (src/api/httpmsg.c) and the preview share
 * tokens and host names (src/api/share-token.c), fed what a hostile
 * server in a sandbox or a hostile client would send. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "src/api/httpmsg.h"
#include "src/api/ports.h"
#include "src/api/share-token.h"

static int parse(const char *s, struct httpmsg_head *h)
{
        return httpmsg_parse_response(s, strlen(s), h);
}

static void test_response_head(void **state)
{
        struct httpmsg_head h;
        const char *ok = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length:  12 \r\n"
                         "Connection: keep-alive, close\r\n\r\n";
        assert_int_equal(httpmsg_head_end(ok, strlen(ok)), strlen(ok));
        assert_int_equal(httpmsg_head_end(ok, strlen(ok) - 1), 0);
        assert_int_equal(parse(ok, &h), 0);
        assert_int_equal(h.status, 200);
        assert_int_equal(h.n_headers, 3);
        assert_int_equal(h.content_length, 12);
        assert_true(h.close);
        assert_false(h.chunked);
        assert_true(httpmsg_span_is(h.headers[0].value, "text/plain"));

        assert_int_equal(parse("HTTP/1.0 101\r\nUpgrade: websocket\r\n\r\n", &h), 0);
        assert_int_equal(h.status, 101);
        assert_int_equal(
            parse("HTTP/1.1 204 No Content\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &h), 0);
        assert_true(h.chunked);
        assert_int_equal(h.content_length, -1);
        /* Chunked only when it is the last coding. */
        assert_int_equal(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", &h),
                         0);
        assert_false(h.chunked);
}

static void test_response_head_hostile(void **state)
{
        struct httpmsg_head h;
        static const char *const bad[] = {
            "",
            "\r\n\r\n",
            "HTTP/2 200 OK\r\n\r\n",
            "HTTP/1.1 20 OK\r\n\r\n",
            "HTTP/1.1 999 OK\r\n\r\n",
            "HTTP/1.1 099 OK\r\n\r\n",
            "HTTP/1.1 200OK\r\n\r\n",
            "HTTP/1.1 200 OK\nX: y\r\n\r\n",                 /* a bare LF */
            "HTTP/1.1 200 OK\r\nX : y\r\n\r\n",              /* space before the colon */
            "HTTP/1.1 200 OK\r\nX: y\r\n continued\r\n\r\n", /* obs-fold */
            "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX: y\r\n", /* no empty line */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse(bad[i], &h), -EPROTO);
        /* The same length twice is one length. */
        assert_int_equal(
            parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", &h), 0);
        /* More headers than the cap. */
        char big[8192];
        size_t n = (size_t)snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\n");
        for (int i = 0; i <= HTTPMSG_MAX_HEADERS; i++)
                n += (size_t)snprintf(big + n, sizeof(big) - n, "X-%d: v\r\n", i);
        snprintf(big + n, sizeof(big) - n, "\r\n");
        assert_int_equal(parse(big, &h), -EPROTO);
}

static void test_hop_by_hop(void **state)
{
        struct httpmsg_span s = {"transfer-encoding", 17};
        assert_true(httpmsg_hop_by_hop(s));
        s = (struct httpmsg_span){"Content-Type", 12};
        assert_false(httpmsg_hop_by_hop(s));
}

/* Decode all of in, out_max bytes at a time, feeding in_step at a time. */
static int decode(const char *in, size_t in_step, size_t out_max, char *out, size_t *ret_len,
                  size_t *ret_used)
{
        struct httpmsg_chunked d = {0};
        size_t len = strlen(in), pos = 0, o = 0;
        for (;;) {
                size_t step = MIN(in_step, len - pos), used = 0, got = 0;
                int r = httpmsg_chunked_run(&d, in + pos, step, &used, out + o, out_max, &got);
                pos += used;
                o += got;
                if (r != 0) {
                        *ret_len = o;
                        *ret_used = pos;
                        return r;
                }
                if (pos == len && used == 0 && got == 0)
                        return -EAGAIN; /* wants more than there is */
        }
}

static void test_chunked(void **state)
{
        const char *body =
            "5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        char out[64];
        size_t len, used;
        for (size_t step = 1; step <= 8; step++)
                for (size_t omax = 1; omax <= 4; omax++) {
                        assert_int_equal(decode(body, step, omax, out, &len, &used), 1);
                        assert_int_equal(len, 16);
                        assert_memory_equal(out, "hello 0123456789", 16);
                        assert_string_equal(body + used, "NEXT"); /* what follows is left */
                }
        assert_int_equal(decode("0\r\n\r\n", 100, 10, out, &len, &used), 1);
        assert_int_equal(len, 0);
        assert_int_equal(decode("5\r\nhel", 100, 10, out, &len, &used), -EAGAIN);
}

static void test_chunked_hostile(void **state)
{
        static const char *const bad[] = {
            "\r\n",                 /* no size */
            "g\r\n",                /* not hex */
            "5\nhello\r\n",         /* bare LF */
            "5\r\nhelloXX",         /* no CRLF after the data */
            "1000000000000000\r\n", /* 16 digits: past 2^60 */
            "0\r\nX: y\n",          /* bare LF in a trailer */
            "-1\r\n",
        };
        char out[64];
        size_t len, used;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(decode(bad[i], 100, sizeof(out), out, &len, &used), -EPROTO);
        /* An extension longer than a line may be. */
        static char ext[9000];
        memset(ext, 'x', sizeof(ext) - 1);
        memcpy(ext, "1;", 2);
        assert_int_equal(decode(ext, 100, sizeof(out), out, &len, &used), -EPROTO);
}

static void test_uri_rest(void **state)
{
        assert_string_equal(httpmsg_uri_rest("/v1/sandboxes/a/ports/80/x/y?q=1", 5), "/x/y?q=1");
        assert_string_equal(httpmsg_uri_rest("//v1//sandboxes/a/ports/80", 5), "");
        assert_string_equal(httpmsg_uri_rest("/v1/sandboxes/a/ports/80?x", 5), "?x");
        assert_null(httpmsg_uri_rest("/v1/sandboxes/a/ports", 5));
        assert_null(httpmsg_uri_rest("/v1/sandboxes/a/ports?/80/", 5));
}

static void test_port_parse(void **state)
{
        assert_int_equal(ports_parse("1"), 1);
        assert_int_equal(ports_parse("65535"), 65535);
        static const char *const bad[] = {"",    "0",  "65536",  "080", "+80",
                                          "80 ", "8o", "123456", "-1"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(ports_parse(bad[i]), 0);
}

static const unsigned char key[32] = "0123456789abcdef0123456789abcdef";

static struct store_share share(void)
{
        struct store_share sh = {.sandbox_id = 7, .port = 8000, .expires_at = 1000, .public = true};
        strcpy(sh.id, "0011223344556677");
        strcpy(sh.deployment, "dep-a");
        strcpy(sh.name, "web");
        return sh;
}

static void test_share_token(void **state)
{
        struct store_share sh = share();
        char tok[SHARE_TOKEN_LEN + 1], id[SHARE_ID_HEX + 1];
        assert_int_equal(share_token_make(key, sizeof(key), &sh, tok), 0);
        assert_int_equal(strlen(tok), SHARE_TOKEN_LEN);
        assert_memory_equal(tok, sh.id, SHARE_ID_HEX);
        assert_int_equal(share_token_id(tok, strlen(tok), id), 0);
        assert_string_equal(id, sh.id);
        assert_true(share_token_valid(key, sizeof(key), &sh, tok, strlen(tok)));

        /* Every field the token binds: a change of any makes it invalid. */
        struct store_share o;
        o = sh, o.sandbox_id = 8;
        assert_false(share_token_valid(key, sizeof(key), &o, tok, strlen(tok)));
        o = sh, o.port = 8001;
        assert_false(share_token_valid(key, sizeof(key), &o, tok, strlen(tok)));
        o = sh, o.expires_at = 1001;
        assert_false(share_token_valid(key, sizeof(key), &o, tok, strlen(tok)));
        o = sh, o.public = false;
        assert_false(share_token_valid(key, sizeof(key), &o, tok, strlen(tok)));
        o = sh, strcpy(o.name, "web2");
        assert_false(share_token_valid(key, sizeof(key), &o, tok, strlen(tok)));
        o = sh, strcpy(o.deployment, "dep-b");
        assert_false(share_token_valid(key, sizeof(key), &o, tok, strlen(tok)));
        unsigned char other[32];
        memcpy(other, key, sizeof(other));
        other[0] ^= 1;
        assert_false(share_token_valid(other, sizeof(other), &sh, tok, strlen(tok)));
        /* A flipped digit of the MAC; a short, long or upper-case token. */
        char t2[SHARE_TOKEN_LEN + 2];
        strcpy(t2, tok);
        t2[SHARE_TOKEN_LEN - 1] = t2[SHARE_TOKEN_LEN - 1] == '0' ? '1' : '0';
        assert_false(share_token_valid(key, sizeof(key), &sh, t2, strlen(t2)));
        assert_int_equal(share_token_id(tok, SHARE_TOKEN_LEN - 1, id), -EINVAL);
        strcpy(t2, tok);
        strcat(t2, "0");
        assert_int_equal(share_token_id(t2, strlen(t2), id), -EINVAL);
        strcpy(t2, tok);
        t2[3] = 'A';
        assert_int_equal(share_token_id(t2, strlen(t2), id), -EINVAL);
        assert_int_equal(
            share_token_id("0011223344556677\0aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 48, id), -EINVAL);
}

static void test_share_host(void **state)
{
        struct store_share sh = share();
        char tok[SHARE_TOKEN_LEN + 1], got[SHARE_TOKEN_LEN + 1], host[256];
        uint16_t port = 0;
        assert_int_equal(share_token_make(key, sizeof(key), &sh, tok), 0);
        snprintf(host, sizeof(host), "8000-%s.preview.example.com", tok);
        assert_int_equal(share_host_parse(host, "preview.example.com", &port, got), 0);
        assert_int_equal(port, 8000);
        assert_string_equal(got, tok);
        snprintf(host, sizeof(host), "3-%s.Preview.Example.COM:7070", tok);
        assert_int_equal(share_host_parse(host, "preview.example.com:7070", &port, got), 0);
        assert_int_equal(port, 3);

        /* Around the token: what comes before it, and after it. */
        static const char *const bad[][2] = {
            {"8000-", ".other.com"},
            {"8000-", ".xpreview.example.com"},
            {"8000-", ".example.com"},
            {"0-", ".preview.example.com"},
            {"65536-", ".preview.example.com"},
            {"-", ".preview.example.com"},
            {"80a-", ".preview.example.com"},
            {"8000_", ".preview.example.com"},
            {"8000-", "a.preview.example.com"},
            {"a.8000-", ".preview.example.com"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(host, sizeof(host), "%s%s%s", bad[i][0], tok, bad[i][1]);
                assert_int_equal(share_host_parse(host, "preview.example.com", &port, got),
                                 -EINVAL);
        }
        assert_int_equal(share_host_parse("preview.example.com", "preview.example.com", &port, got),
                         -EINVAL);
        assert_int_equal(share_host_parse(NULL, "preview.example.com", &port, got), -EINVAL);
        assert_int_equal(share_host_parse("x", "", &port, got), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_response_head),   cmocka_unit_test(test_response_head_hostile),
            cmocka_unit_test(test_hop_by_hop),      cmocka_unit_test(test_chunked),
            cmocka_unit_test(test_chunked_hostile), cmocka_unit_test(test_uri_rest),
            cmocka_unit_test(test_port_parse),      cmocka_unit_test(test_share_token),
            cmocka_unit_test(test_share_host),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
