/* SPDX-License-Identifier: MIT */
/* Egress policy of a NAT sandbox (egress-policy.c: the policy itself;
 * egress.c: how the daemon enforces it and what it logs).
 *
 * A policy is two lists of entries, `allow` and `deny`, each an IPv4
 * network ("203.0.113.0/24", or an address: a /32) or a domain name
 * ("example.com": that name only; "*.example.com": every name under it,
 * not example.com itself). Evaluation, on top of the instance's fixed rules
 * (never the host, private, link-local or reserved ranges, net.c):
 *   - deny first: a destination or name a deny entry matches is refused;
 *   - then allow: with an allow list (even an empty one) anything it does
 *     not match is refused; with none, everything else is allowed.
 * Names are enforced by the DNS forwarder (dns.c): it answers only allowed
 * names, and the addresses of their answers are let through for the
 * answer's TTL (clamped to EGRESS_TTL_MIN_S..EGRESS_TTL_MAX_S). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"

#define EGRESS_MAX_ENTRIES 256 /* per list */
#define EGRESS_NAME_MAX 253    /* a domain name, without its trailing dot */
#define EGRESS_TTL_MIN_S 5
#define EGRESS_TTL_MAX_S 3600
#define EGRESS_LOG_MAX 256 /* events kept per sandbox, the oldest dropped */

enum egress_kind {
        EGRESS_CIDR = 1,     /* net/prefix */
        EGRESS_NAME = 2,     /* name exactly */
        EGRESS_WILDCARD = 3, /* names under name (name is without the "*.") */
};

struct egress_entry {
        uint8_t kind;                   /* enum egress_kind */
        uint8_t prefix;                 /* EGRESS_CIDR: 0..32 */
        uint32_t net;                   /* EGRESS_CIDR: host byte order, no host bits */
        char name[EGRESS_NAME_MAX + 1]; /* lower case, no trailing dot */
};

struct egress_policy {
        bool has_allow; /* an allow list was given: what it does not match is refused */
        size_t n_allow, n_deny;
        struct egress_entry allow[EGRESS_MAX_ENTRIES];
        struct egress_entry deny[EGRESS_MAX_ENTRIES];
};

/* An empty policy: no allow list, nothing denied (today's behaviour). */
void egress_policy_init(struct egress_policy *p);
/* Whether p restricts anything. */
bool egress_policy_active(const struct egress_policy *p);
/* Whether p names a domain (it needs the DNS forwarder). */
bool egress_policy_has_names(const struct egress_policy *p);

/* One entry as a client writes it; -EINVAL with err naming it otherwise
 * (bad CIDR, host bits set, IPv6, bad name, too long). */
int egress_entry_parse(const char *s, struct egress_entry *ret, struct sbx_error *err);
/* Add s to the allow (allow true) or deny list; -E2BIG past
 * EGRESS_MAX_ENTRIES, -EINVAL as egress_entry_parse. Duplicates are kept
 * once. */
int egress_policy_add(struct egress_policy *p, bool allow, const char *s, struct sbx_error *err);
/* The entry as a client wrote it (canonical form) into out (>= 260 bytes). */
void egress_entry_format(const struct egress_entry *e, char *out, size_t len);

/* A verdict for an address or a name. */
enum egress_verdict {
        EGRESS_ALLOWED = 0,
        EGRESS_DENIED = 1,     /* a deny entry matches */
        EGRESS_NOT_LISTED = 2, /* an allow list is there and does not match */
};
/* An IPv4 destination (host order) by the CIDR entries alone (names are
 * the forwarder's). */
enum egress_verdict egress_check_addr(const struct egress_policy *p, uint32_t addr);
/* A name (any case, trailing dot or not) by the name entries; a name the
 * policy does not list and an allow list of CIDRs only: not listed. */
enum egress_verdict egress_check_name(const struct egress_policy *p, const char *name);
/* Whether a name entry e matches name (lower case, no trailing dot). */
bool egress_name_matches(const struct egress_entry *e, const char *name);

/* The text form kept in the store: "allow-list\n" or "open\n", then one
 * line per entry, "+entry" (allow) or "-entry" (deny). */
int egress_policy_to_text(const struct egress_policy *p, struct buf *out);
int egress_policy_from_text(const char *text, struct egress_policy *ret, struct sbx_error *err);

/* A budget of events a second (the forwarder's new pins per sandbox): up
 * to burst at once, refilled at rate a second. Zeroed: full. */
struct egress_budget {
        double tokens;
        int64_t at_ms; /* last refill, monotonic; 0 = never */
};
/* Take one at now_ms: false when the budget is spent. */
bool egress_budget_take(struct egress_budget *b, unsigned rate, unsigned burst, int64_t now_ms);
