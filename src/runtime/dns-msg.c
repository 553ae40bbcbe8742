/* SPDX-License-Identifier: MIT */
/* DNS wire reading for the forwarder (dns-msg.h). RFC 1035 section 4. */
#include "dns-msg.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>

/* A name is at most 255 bytes on the wire; more pointers than that would
 * be a loop. */
#define NAME_HOPS 128

static uint16_t get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Skip the name at *at (labels or a pointer, which ends it): *at past it.
 * Nothing is followed, so no loop is possible. */
static int skip_name(const uint8_t *pkt, size_t n, size_t *at)
{
        size_t i = *at;
        for (int hops = 0; hops < NAME_HOPS; hops++) {
                if (i >= n)
                        return -EINVAL;
                uint8_t l = pkt[i];
                if ((l & 0xc0) == 0xc0) {
                        if (i + 2 > n)
                                return -EINVAL;
                        *at = i + 2;
                        return 0;
                }
                if (l & 0xc0)
                        return -EINVAL; /* the reserved label types */
                i += 1u + l;
                if (l == 0) {
                        *at = i;
                        return 0;
                }
        }
        return -EINVAL;
}

int dnsmsg_question(const uint8_t *pkt, size_t n, char name[DNSMSG_NAME_MAX + 1],
                    uint16_t *ret_type, size_t *ret_end)
{
        if (n < DNSMSG_HEADER || (pkt[2] & 0x80) || get16(pkt + 4) != 1)
                return -EINVAL;
        size_t i = DNSMSG_HEADER, out = 0;
        /* Labels only: a query has nothing earlier to point at. */
        for (;;) {
                if (i >= n)
                        return -EINVAL;
                uint8_t l = pkt[i++];
                if (l == 0)
                        break;
                if (l & 0xc0 || i + l > n || out + l + 1 > DNSMSG_NAME_MAX)
                        return -EINVAL;
                if (out)
                        name[out++] = '.';
                for (uint8_t k = 0; k < l; k++) {
                        unsigned char c = pkt[i + k];
                        /* A dot or a NUL inside a label would make the
                         * name read as another one. */
                        if (c == '.' || c == '\0')
                                return -EINVAL;
                        name[out++] = (char)tolower(c);
                }
                i += l;
        }
        if (i + 4 > n)
                return -EINVAL;
        name[out] = '\0';
        *ret_type = get16(pkt + i);
        *ret_end = i + 4;
        return 0;
}

unsigned dnsmsg_rcode(const uint8_t *pkt, size_t n)
{
        return n >= DNSMSG_HEADER ? pkt[3] & 0x0f : 0;
}

int dnsmsg_answers(const uint8_t *pkt, size_t n, struct dnsmsg_addr *out, size_t max, size_t *ret_n)
{
        if (n < DNSMSG_HEADER)
                return -EINVAL;
        unsigned qd = get16(pkt + 4), an = get16(pkt + 6);
        size_t i = DNSMSG_HEADER, got = 0;
        for (unsigned q = 0; q < qd; q++) {
                if (skip_name(pkt, n, &i) < 0 || i + 4 > n)
                        return -EINVAL;
                i += 4;
        }
        for (unsigned a = 0; a < an; a++) {
                if (skip_name(pkt, n, &i) < 0 || i + 10 > n)
                        return -EINVAL;
                uint16_t type = get16(pkt + i), cls = get16(pkt + i + 2);
                uint32_t ttl = get32(pkt + i + 4);
                uint16_t rdlen = get16(pkt + i + 8);
                i += 10;
                if (i + rdlen > n)
                        return -EINVAL;
                if (type == DNSMSG_TYPE_A && cls == 1 && rdlen == 4 && got < max) {
                        out[got].addr = get32(pkt + i);
                        /* RFC 2181: a TTL with the top bit set is 0. */
                        out[got].ttl = ttl & 0x80000000u ? 0 : ttl;
                        got++;
                }
                i += rdlen;
        }
        *ret_n = got;
        return 0;
}

size_t dnsmsg_refuse(uint8_t *pkt, size_t qend, unsigned rcode)
{
        pkt[2] = (uint8_t)(0x80 | (pkt[2] & 0x79)); /* QR, keep opcode and RD */
        pkt[3] = (uint8_t)(0x80 | (rcode & 0x0f));  /* RA */
        memset(pkt + 6, 0, 6);                      /* no answer, authority, additional */
        return qend;
}
