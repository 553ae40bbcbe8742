/* SPDX-License-Identifier: MIT */
/* What the runtime keeps per NAT sandbox for its egress policy and log
 * (egress.c), shared by the API's threads (set, read), the DNS forwarder's
 * thread (names, pins, answers) and the NFLOG reader (denied
 * connections). One mutex, held for short in-memory work; nft runs outside
 * it. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#include "dns-msg.h"
#include "egress.h"

struct egress;

enum egress_event_type {
        EGRESS_EV_CONN = 1, /* a connection refused by the policy */
        EGRESS_EV_DNS = 2,  /* a name answered (allowed) or refused */
};
struct egress_event {
        int64_t at_ms; /* wall clock */
        uint8_t type;  /* enum egress_event_type */
        bool allowed;
        uint8_t proto; /* EGRESS_EV_CONN: IPPROTO_TCP, _UDP, _ICMP, ... */
        uint16_t port; /* EGRESS_EV_CONN: destination port (0 without one) */
        uint32_t addr; /* EGRESS_EV_CONN: destination, host order */
        uint8_t n_addrs;
        uint32_t addrs[8]; /* EGRESS_EV_DNS: the A answers (host order) */
        char name[EGRESS_NAME_MAX + 3];
};
struct egress_stats {
        uint64_t denied_connections, dns_allowed, dns_refused;
};

/* table: the instance's nftables table; dns: whether a forwarder serves
 * names. Opens the NFLOG socket of a group no other daemon holds
 * (egress_nflog_group; when none can be bound, denied connections are
 * refused all the same, only not logged). */
int egress_open(const char *table, bool dns, struct egress **ret, struct sbx_error *err);
void egress_close(struct egress *eg);
/* The NFLOG group bound (0: none) and its fd (-1: none), for the rules and
 * the forwarder's poll. */
uint16_t egress_nflog_group(const struct egress *eg);
int egress_nflog_fd(const struct egress *eg);
/* Read what NFLOG has queued (non-blocking) into the sandboxes' logs. */
void egress_nflog_read(struct egress *eg);

/* Sandbox id at addr gets policy p (NULL: none): its nftables chain and
 * sets replaced at once, its pins flushed. -ENOTSUP when p names domains
 * and no forwarder runs. */
int egress_set(struct egress *eg, uint64_t id, uint32_t addr, const struct egress_policy *p,
               struct sbx_error *err);
/* Forget sandbox id: its chain, sets and log. */
void egress_forget(struct egress *eg, uint64_t id);

/* The forwarder: a query for name from src (the sandbox's address).
 * true: forward it; false: refuse it (logged). */
bool egress_dns_query(struct egress *eg, uint32_t src, const char *name);
/* The forwarder: an answer for name to src with these A records: pinned
 * for their TTL where the policy needs it (before the answer goes out),
 * logged. false: the sandbox has spent its budget of new pins (a hundred
 * a second); the answer is to be refused (SERVFAIL: it may retry). */
bool egress_dns_answer(struct egress *eg, uint32_t src, const char *name,
                       const struct dnsmsg_addr *a, size_t n);

/* Up to max of sandbox id's recent events, oldest first; -ENOENT when it
 * has no record here (not started under NAT). */
int egress_log(struct egress *eg, uint64_t id, struct egress_event *out, size_t max, size_t *ret_n);
void egress_stats(struct egress *eg, struct egress_stats *ret);
