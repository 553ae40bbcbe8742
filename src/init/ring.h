/* SPDX-License-Identifier: MIT */
/* Output rings: the newest bytes of a stream (AGENT_RING_SIZE, or
 * AGENT_LOSSLESS_RING_SIZE for a lossless process), addressed by absolute
 * offsets (every byte since the process started). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct ring {
        uint8_t *data;  /* size bytes, NULL until ring_alloc */
        uint64_t total; /* bytes ever written */
        size_t size;    /* a power of two */
};

int ring_alloc(struct ring *r, size_t size);
void ring_free(struct ring *r);
/* Append; when more than the ring holds, the oldest bytes go. */
void ring_write(struct ring *r, const void *data, size_t len);
/* Oldest retained offset: max(0, total - size). */
uint64_t ring_start(const struct ring *r);
/* Copy [from, from + len) out; the caller keeps it within
 * [ring_start, total). */
void ring_copy(const struct ring *r, uint64_t from, size_t len, uint8_t *out);

/* Length of p[0..len) without a trailing incomplete UTF-8 sequence (a lead
 * byte whose continuation bytes are not all there yet). Bytes that are not
 * UTF-8 at all are left alone: the reader replaces them. */
size_t utf8_trim_incomplete(const uint8_t *p, size_t len);
