/* SPDX-License-Identifier: MIT */
/* The little of the DNS wire format the forwarder reads (dns-msg.c): a
 * query's question, an answer's A records, a refusal built from a query.
 * Every packet is hostile (a sandbox's query, an upstream's answer): each
 * read is bounds-checked, compression pointers are followed a bounded
 * number of times, and a malformed packet is an error, never a guess. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNSMSG_HEADER 12
#define DNSMSG_NAME_MAX 255 /* presentation form, with the dots */
#define DNSMSG_TYPE_A 1
#define DNSMSG_TYPE_AAAA 28
#define DNSMSG_RCODE_SERVFAIL 2
#define DNSMSG_RCODE_REFUSED 5

/* A query's first question: its name in presentation form, lower case,
 * without the trailing dot ("" for the root), its type, and the offset
 * just past the question. -EINVAL when pkt is no query with one question
 * the forwarder can read. */
int dnsmsg_question(const uint8_t *pkt, size_t n, char name[DNSMSG_NAME_MAX + 1],
                    uint16_t *ret_type, size_t *ret_end);

struct dnsmsg_addr {
        uint32_t addr; /* host byte order */
        uint32_t ttl;  /* seconds, as answered */
};
/* The A records (class IN) of an answer's answer section, at most max of
 * them in out; *ret_n how many. -EINVAL when it cannot be read whole. */
int dnsmsg_answers(const uint8_t *pkt, size_t n, struct dnsmsg_addr *out, size_t max,
                   size_t *ret_n);
/* The answer's RCODE (low 4 bits of the flags). */
unsigned dnsmsg_rcode(const uint8_t *pkt, size_t n);

/* Turn the query pkt (its question ending at qend) into a reply with
 * rcode and no records, in place: its new length. */
size_t dnsmsg_refuse(uint8_t *pkt, size_t qend, unsigned rcode);
