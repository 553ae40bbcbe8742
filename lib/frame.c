/* SPDX-License-Identifier: MIT */
/* The frames of `GET .../processes/{id}/stream` (docs/api.md, Streaming
 * output): a 16-byte head (type u8, three zero bytes, length u32 BE,
 * offset u64 BE), then the payload. Decoded incrementally from whatever
 * pieces the transport hands over, so a data frame's bytes reach the
 * caller as they arrive and no payload is ever held whole but the small
 * JSON ones. Pure: no I/O, unit-tested with hostile input. */
#include "internal.h"

#include <string.h>

void sbxc_frames_init(struct sbxc_frames *f)
{
        *f = (struct sbxc_frames){0};
        buf_init(&f->json, SBXC_MAX_SMALL);
}

void sbxc_frames_free(struct sbxc_frames *f)
{
        buf_free(&f->json);
}

static uint64_t be(const uint8_t *p, int n)
{
        uint64_t v = 0;
        for (int i = 0; i < n; i++)
                v = (v << 8) | p[i];
        return v;
}

static bool is_data(int type)
{
        return type == SBXC_FRAME_STDOUT || type == SBXC_FRAME_STDERR;
}

static bool is_json(int type)
{
        return type == SBXC_FRAME_START || type == SBXC_FRAME_EXIT || type == SBXC_FRAME_ERROR;
}

/* The head is whole: check it against the contract and the state. */
static int head_done(struct sbxc_frames *f, struct sbx_err *err)
{
        const uint8_t *h = f->head;
        f->type = h[0];
        f->len = (uint32_t)be(h + 4, 4);
        f->got = 0;
        f->next = be(h + 8, 8);
        f->head_len = 0;
        if (h[1] || h[2] || h[3])
                return sbxc_bad(err, "stream: a frame head with non-zero reserved bytes");
        if (f->len > SBXC_MAX_FRAME)
                return sbxc_bad(err, "stream: a frame of %u bytes (over 8 MiB)", f->len);
        if (!f->started && f->type != SBXC_FRAME_START)
                return sbxc_bad(err, "stream: the first frame is of type %d, not start", f->type);
        if (f->started && f->type == SBXC_FRAME_START)
                return sbxc_bad(err, "stream: a second start frame");
        if (is_json(f->type) && f->len > SBXC_MAX_SMALL)
                return sbxc_bad(err, "stream: a JSON frame of %u bytes", f->len);
        if (is_data(f->type)) {
                uint64_t want = f->expect[f->type - SBXC_FRAME_STDOUT];
                if (f->next != want)
                        return sbxc_bad(err, "stream: %s data at offset %llu, expected %llu",
                                        f->type == SBXC_FRAME_STDOUT ? "stdout" : "stderr",
                                        (unsigned long long)f->next, (unsigned long long)want);
                if (f->next + f->len < f->next)
                        return sbxc_bad(err, "stream: an offset past 2^64");
        }
        buf_free(&f->json);
        buf_init(&f->json, SBXC_MAX_SMALL);
        return 0;
}

/* Some payload bytes of the current frame. */
static int payload(struct sbxc_frames *f, const uint8_t *p, size_t n,
                   const struct sbxc_frame_sink *sink, struct sbx_err *err)
{
        f->got += (uint32_t)n;
        if (is_data(f->type)) {
                uint64_t at = f->next;
                f->next += n;
                f->expect[f->type - SBXC_FRAME_STDOUT] = f->next;
                return n && sink->data
                           ? sink->data(sink->ctx, (enum sbx_stream_id)(f->type - 1), at, p, n)
                           : 0;
        }
        if (is_json(f->type) && buf_append(&f->json, p, n) < 0)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        return 0;
}

/* The current frame's payload is whole. */
static int frame_done(struct sbxc_frames *f, const struct sbxc_frame_sink *sink)
{
        if (f->type == SBXC_FRAME_START)
                f->started = true;
        if (f->type == SBXC_FRAME_EXIT || f->type == SBXC_FRAME_ERROR)
                f->ended = true;
        int r = 0;
        if (is_json(f->type) && sink->json)
                r = sink->json(sink->ctx, f->type, f->json.data ? f->json.data : "", f->json.len);
        f->type = 0;
        return r;
}

int sbxc_frames_feed(struct sbxc_frames *f, const void *data, size_t n,
                     const struct sbxc_frame_sink *sink, struct sbx_err *err)
{
        const uint8_t *p = data;
        while (n > 0) {
                if (f->ended)
                        return sbxc_bad(err, "stream: bytes after the last frame");
                int r = 0;
                if (f->type == 0) {
                        size_t take = MIN(n, SBXC_FRAME_HEAD - f->head_len);
                        memcpy(f->head + f->head_len, p, take);
                        f->head_len += take;
                        p += take;
                        n -= take;
                        if (f->head_len < SBXC_FRAME_HEAD)
                                return 0;
                        r = head_done(f, err);
                        // A type 0 is unknown like any other: skipped, but the
                        // state machine uses 0 for "in a head".
                        if (r >= 0 && f->type == 0)
                                f->type = 256;
                } else {
                        size_t take = MIN(n, (size_t)(f->len - f->got));
                        r = payload(f, p, take, sink, err);
                        p += take;
                        n -= take;
                }
                if (r == 0 && f->type != 0 && f->got == f->len)
                        r = frame_done(f, sink);
                if (r != 0)
                        return r;
        }
        return 0;
}
