/* SPDX-License-Identifier: MIT */
#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../agent/proto.h"

/* The size is a power of two, so offset % size is a mask. */
_Static_assert((AGENT_RING_SIZE & (AGENT_RING_SIZE - 1)) == 0, "ring size is a power of two");
_Static_assert((AGENT_LOSSLESS_RING_SIZE & (AGENT_LOSSLESS_RING_SIZE - 1)) == 0,
               "ring size is a power of two");

int ring_alloc(struct ring *r, size_t size)
{
        /* Anonymous memory of its own: pages are only touched as output
         * arrives (a quiet process costs next to nothing) and all of it goes
         * back to the kernel when the process is forgotten, rather than
         * staying in the heap and counting against the sandbox's memory. */
        if (size == 0 || (size & (size - 1)))
                return -EINVAL;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        r->data = p == MAP_FAILED ? NULL : p;
        r->total = 0;
        r->size = r->data ? size : 0;
        return r->data ? 0 : -ENOMEM;
}

void ring_free(struct ring *r)
{
        if (r->data)
                munmap(r->data, r->size);
        r->data = NULL;
}

void ring_write(struct ring *r, const void *data, size_t len)
{
        const uint8_t *p = data;

        if (!r->data || len == 0)
                return;
        if (len > r->size) {
                r->total += len - r->size;
                p += len - r->size;
                len = r->size;
        }
        size_t at = (size_t)(r->total & (r->size - 1));
        size_t first = MIN(len, r->size - at);
        memcpy(r->data + at, p, first);
        if (len > first)
                memcpy(r->data, p + first, len - first);
        r->total += len;
}

uint64_t ring_start(const struct ring *r)
{
        return r->total > r->size ? r->total - r->size : 0;
}

void ring_copy(const struct ring *r, uint64_t from, size_t len, uint8_t *out)
{
        if (!r->data || len == 0)
                return;
        size_t at = (size_t)(from & (r->size - 1));
        size_t first = MIN(len, r->size - at);
        memcpy(out, r->data + at, first);
        if (len > first)
                memcpy(out + first, r->data, len - first);
}

static size_t utf8_seq_len(uint8_t lead)
{
        if (lead < 0x80)
                return 1;
        if ((lead & 0xE0) == 0xC0)
                return 2;
        if ((lead & 0xF0) == 0xE0)
                return 3;
        if ((lead & 0xF8) == 0xF0)
                return 4;
        return 1; /* not a lead byte: invalid, nothing to wait for */
}

size_t utf8_trim_incomplete(const uint8_t *p, size_t len)
{
        for (size_t back = 1; back <= 4 && back <= len; back++) {
                uint8_t c = p[len - back];
                if ((c & 0xC0) == 0x80)
                        continue; /* continuation byte: keep looking for the lead */
                return utf8_seq_len(c) > back ? len - back : len;
        }
        return len;
}
