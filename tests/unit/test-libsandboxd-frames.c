/* SPDX-License-Identifier: MIT */
/* libsandboxd's stream frames (lib/frame.c) fed whole, byte by byte, and
 * hostile: a bad head, an oversize frame, a gap, no start, bytes after the
 * end, a JSON frame too big. A breach is -EPROTO with a message, never a
 * crash or a wrong byte delivered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/internal.h"

struct seen {
        struct buf out, err;
        uint64_t out_at, err_at; /* offset the next piece must start at */
        int json_types[8];
        int njson;
        char last_json[256];
};

static int on_data(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *p, size_t n)
{
        struct seen *w = ctx;
        uint64_t *at = s == SBX_STDOUT ? &w->out_at : &w->err_at;
        assert_int_equal(offset, *at);
        *at += n;
        return buf_append(s == SBX_STDOUT ? &w->out : &w->err, p, n);
}

static int on_json(void *ctx, int type, const char *p, size_t n)
{
        struct seen *w = ctx;
        if (w->njson < 8)
                w->json_types[w->njson++] = type;
        snprintf(w->last_json, sizeof(w->last_json), "%.*s", (int)n, p);
        return 0;
}

/* A frame: head then payload, appended to b. */
static void frame(struct buf *b, int type, uint32_t len, uint64_t offset, const void *payload)
{
        uint8_t h[16] = {(uint8_t)type};
        for (int i = 0; i < 4; i++)
                h[4 + i] = (uint8_t)(len >> (24 - 8 * i));
        for (int i = 0; i < 8; i++)
                h[8 + i] = (uint8_t)(offset >> (56 - 8 * i));
        assert_int_equal(buf_append(b, h, sizeof(h)), 0);
        if (payload)
                assert_int_equal(buf_append(b, payload, len), 0);
}

static void json_frame(struct buf *b, int type, const char *text)
{
        frame(b, type, (uint32_t)strlen(text), 0, text);
}

/* Feed b in pieces of `step` bytes (0: whole); returns the first non-zero. */
static int feed(const struct buf *b, size_t step, struct seen *w, struct sbx_err *err)
{
        struct sbxc_frames f;
        sbxc_frames_init(&f);
        struct sbxc_frame_sink sink = {on_data, on_json, w};
        buf_init(&w->out, 0);
        buf_init(&w->err, 0);
        int r = 0;
        for (size_t at = 0; r == 0 && at < b->len;) {
                size_t n = step ? MIN(step, b->len - at) : b->len - at;
                r = sbxc_frames_feed(&f, b->data + at, n, &sink, err);
                at += n;
        }
        if (r == 0 && !f.ended)
                r = 1; /* cut: no exit frame */
        sbxc_frames_free(&f);
        return r;
}

static void seen_free(struct seen *w)
{
        buf_free(&w->out);
        buf_free(&w->err);
}

static void good_stream(struct buf *b)
{
        buf_init(b, 0);
        json_frame(b, SBXC_FRAME_START, "{\"processId\":\"p1\"}");
        frame(b, SBXC_FRAME_STDOUT, 5, 0, "hello");
        frame(b, SBXC_FRAME_STDERR, 3, 0, "err");
        frame(b, SBXC_FRAME_KEEPALIVE, 0, 0, NULL);
        frame(b, 77, 4, 0, "skip"); /* unknown types are skipped */
        frame(b, 0, 2, 0, "zz");    /* type 0 too */
        frame(b, SBXC_FRAME_STDOUT, 0, 5, NULL);
        frame(b, SBXC_FRAME_STDOUT, 6, 5, " world");
        json_frame(b, SBXC_FRAME_EXIT, "{\"exitCode\":3}");
}

static void test_whole_and_split(void **state)
{
        (void)state;
        struct buf b;
        good_stream(&b);
        size_t steps[] = {0, 1, 3, 16, 17};
        for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
                struct seen w = {0};
                struct sbx_err err = {0};
                assert_int_equal(feed(&b, steps[i], &w, &err), 0);
                assert_int_equal(w.out.len, 11);
                assert_memory_equal(w.out.data, "hello world", 11);
                assert_int_equal(w.err.len, 3);
                assert_int_equal(w.njson, 2);
                assert_int_equal(w.json_types[0], SBXC_FRAME_START);
                assert_int_equal(w.json_types[1], SBXC_FRAME_EXIT);
                assert_string_equal(w.last_json, "{\"exitCode\":3}");
                seen_free(&w);
        }
        buf_free(&b);
}

/* Each hostile stream: -EPROTO, a bad_response error. */
static void expect_breach(struct buf *b, const char *needle)
{
        size_t steps[] = {0, 1, 7};
        for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
                struct seen w = {0};
                struct sbx_err err = {0};
                assert_int_equal(feed(b, steps[i], &w, &err), -EPROTO);
                assert_string_equal(err.code, "bad_response");
                if (!strstr(err.message, needle))
                        fail_msg("'%s' does not say '%s'", err.message, needle);
                seen_free(&w);
        }
        buf_free(b);
}

static void test_hostile(void **state)
{
        (void)state;
        struct buf b;
        buf_init(&b, 0);
        frame(&b, SBXC_FRAME_STDOUT, 1, 0, "x");
        expect_breach(&b, "not start");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        uint8_t bad[16] = {SBXC_FRAME_STDOUT, 0, 1, 0};
        buf_append(&b, bad, sizeof(bad));
        expect_breach(&b, "reserved");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        frame(&b, SBXC_FRAME_STDOUT, SBXC_MAX_FRAME + 1, 0, NULL);
        expect_breach(&b, "over 8 MiB");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        frame(&b, SBXC_FRAME_STDOUT, 0xffffffffu, 0, NULL);
        expect_breach(&b, "over 8 MiB");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        frame(&b, SBXC_FRAME_STDOUT, 2, 0, "ab");
        frame(&b, SBXC_FRAME_STDOUT, 2, 5, "cd");
        expect_breach(&b, "expected 2");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        frame(&b, SBXC_FRAME_STDERR, 1, UINT64_MAX, "x");
        expect_breach(&b, "expected 0");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        json_frame(&b, SBXC_FRAME_START, "{}");
        expect_breach(&b, "second start");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        json_frame(&b, SBXC_FRAME_EXIT, "{}");
        frame(&b, SBXC_FRAME_KEEPALIVE, 0, 0, NULL);
        expect_breach(&b, "after the last frame");

        buf_init(&b, 0);
        json_frame(&b, SBXC_FRAME_START, "{}");
        frame(&b, SBXC_FRAME_EXIT, SBXC_MAX_SMALL + 1, 0, NULL);
        expect_breach(&b, "JSON frame");
}

static void test_cut(void **state)
{
        (void)state;
        struct buf b;
        good_stream(&b);
        /* Every prefix short of the end is a cut, not an error or a crash. */
        for (size_t n = 0; n + 1 < b.len; n += 5) {
                struct buf part = {.data = b.data, .len = n};
                struct seen w = {0};
                struct sbx_err err = {0};
                assert_int_equal(feed(&part, 2, &w, &err), 1);
                assert_true(w.out.len <= 11);
                assert_memory_equal(w.out.data ? w.out.data : "", "hello world", w.out.len);
                seen_free(&w);
        }
        buf_free(&b);
}

static int stop_at_data(void *ctx, enum sbx_stream_id s, uint64_t o, const void *p, size_t n)
{
        (void)ctx, (void)s, (void)o, (void)p, (void)n;
        return 42;
}

static void test_sink_stops(void **state)
{
        (void)state;
        struct buf b;
        good_stream(&b);
        struct sbxc_frames f;
        sbxc_frames_init(&f);
        struct sbxc_frame_sink sink = {stop_at_data, NULL, NULL};
        assert_int_equal(sbxc_frames_feed(&f, b.data, b.len, &sink, NULL), 42);
        sbxc_frames_free(&f);
        buf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_whole_and_split),
            cmocka_unit_test(test_hostile),
            cmocka_unit_test(test_cut),
            cmocka_unit_test(test_sink_stops),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
