/* SPDX-License-Identifier: MIT */
/* Egress policies (egress.h): parsing what a client sent, matching
 * destinations and names, and the text form the store keeps. Pure: no
 * I/O, so the unit tests and the fuzzer drive it alone. Everything here
 * reads hostile input (an API body, a sandbox's DNS query name). */
#include "egress.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void egress_policy_init(struct egress_policy *p)
{
        p->has_allow = false;
        p->n_allow = p->n_deny = 0;
}

bool egress_policy_active(const struct egress_policy *p)
{
        return p->has_allow || p->n_deny > 0;
}

static bool any_name(const struct egress_entry *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (v[i].kind != EGRESS_CIDR)
                        return true;
        return false;
}

bool egress_policy_has_names(const struct egress_policy *p)
{
        return any_name(p->allow, p->n_allow) || any_name(p->deny, p->n_deny);
}

/* "a.b.c.d" or "a.b.c.d/len": a network with no host bits. */
static int parse_cidr(const char *s, struct egress_entry *e, struct sbx_error *err)
{
        char ip[INET_ADDRSTRLEN];
        const char *slash = strchr(s, '/');
        size_t il = slash ? (size_t)(slash - s) : strlen(s);
        long len = 32;
        if (il >= sizeof(ip))
                return sbx_error_say(err, EINVAL, "`%s`: not an IPv4 address or network", s);
        memcpy(ip, s, il);
        ip[il] = '\0';
        if (slash) {
                char *end;
                if (!isdigit((unsigned char)slash[1]) ||
                    (len = strtol(slash + 1, &end, 10), *end) || len < 0 || len > 32)
                        return sbx_error_say(err, EINVAL, "`%s`: the prefix length is not 0..32",
                                             s);
        }
        struct in_addr a;
        if (inet_pton(AF_INET, ip, &a) != 1)
                return sbx_error_say(err, EINVAL, "`%s`: not an IPv4 address or network", s);
        uint32_t net = ntohl(a.s_addr), mask = len == 0 ? 0 : ~0U << (32 - len);
        if (net & ~mask)
                return sbx_error_say(err, EINVAL, "`%s`: host bits set (a typo?)", s);
        e->kind = EGRESS_CIDR;
        e->net = net;
        e->prefix = (uint8_t)len;
        e->name[0] = '\0';
        return 0;
}

/* Letters, digits and '-' (and '_', which real zones use), 1..63 bytes a
 * label, no '-' at either end, at least two labels, a last label that is
 * not all digits (that would be an IP address written wrong). */
static bool valid_name(const char *n)
{
        size_t len = strlen(n), labels = 0;
        if (len == 0 || len > EGRESS_NAME_MAX)
                return false;
        const char *label = n, *p = n;
        bool digits = true;
        for (;; p++) {
                if (*p == '.' || *p == '\0') {
                        size_t l = (size_t)(p - label);
                        if (l == 0 || l > 63 || label[0] == '-' || p[-1] == '-')
                                return false;
                        labels++;
                        if (*p == '\0')
                                break;
                        label = p + 1;
                        digits = true;
                        continue;
                }
                if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
                        return false;
                if (!isdigit((unsigned char)*p))
                        digits = false;
        }
        return labels >= 2 && !digits;
}

int egress_entry_parse(const char *s, struct egress_entry *ret, struct sbx_error *err)
{
        size_t len = s ? strlen(s) : 0;
        if (len == 0)
                return sbx_error_say(err, EINVAL, "an empty entry");
        if (len > EGRESS_NAME_MAX + 2)
                return sbx_error_say(err, EINVAL, "`%.40s...`: longer than %d bytes", s,
                                     EGRESS_NAME_MAX);
        if (strchr(s, ':'))
                return sbx_error_say(err, EINVAL,
                                     "`%s`: IPv6 is not routed for sandboxes (IPv4 only)", s);
        /* Digits, dots and a slash: an address or a network (a name's
         * last label is never all digits). */
        if (strspn(s, "0123456789./") == len || strchr(s, '/'))
                return parse_cidr(s, ret, err);
        bool wild = len > 2 && s[0] == '*' && s[1] == '.';
        char name[EGRESS_NAME_MAX + 3];
        snprintf(name, sizeof(name), "%s", wild ? s + 2 : s);
        size_t nl = strlen(name);
        if (nl && name[nl - 1] == '.')
                name[--nl] = '\0';
        for (char *c = name; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        if (!valid_name(name))
                return sbx_error_say(err, EINVAL,
                                     "`%s`: not an IPv4 network, a domain name or *.domain", s);
        ret->kind = wild ? EGRESS_WILDCARD : EGRESS_NAME;
        ret->net = 0;
        ret->prefix = 0;
        snprintf(ret->name, sizeof(ret->name), "%s", name);
        return 0;
}

static bool same_entry(const struct egress_entry *a, const struct egress_entry *b)
{
        return a->kind == b->kind && a->net == b->net && a->prefix == b->prefix &&
               strcmp(a->name, b->name) == 0;
}

int egress_policy_add(struct egress_policy *p, bool allow, const char *s, struct sbx_error *err)
{
        struct egress_entry e;
        int r = egress_entry_parse(s, &e, err);
        if (r < 0)
                return r;
        struct egress_entry *v = allow ? p->allow : p->deny;
        size_t *n = allow ? &p->n_allow : &p->n_deny;
        for (size_t i = 0; i < *n; i++)
                if (same_entry(&v[i], &e))
                        return 0;
        if (*n == EGRESS_MAX_ENTRIES)
                return sbx_error_say(err, E2BIG, "%s: more than %d entries",
                                     allow ? "allow" : "deny", EGRESS_MAX_ENTRIES);
        v[(*n)++] = e;
        if (allow)
                p->has_allow = true;
        return 0;
}

void egress_entry_format(const struct egress_entry *e, char *out, size_t len)
{
        if (e->kind == EGRESS_CIDR) {
                struct in_addr a = {.s_addr = htonl(e->net)};
                char ip[INET_ADDRSTRLEN];
                inet_ntop(AF_INET, &a, ip, sizeof(ip));
                snprintf(out, len, "%s/%u", ip, (unsigned)e->prefix);
        } else {
                snprintf(out, len, "%s%s", e->kind == EGRESS_WILDCARD ? "*." : "", e->name);
        }
}

static bool cidr_matches(const struct egress_entry *e, uint32_t addr)
{
        uint32_t mask = e->prefix == 0 ? 0 : ~0U << (32 - e->prefix);
        return e->kind == EGRESS_CIDR && (addr & mask) == e->net;
}

bool egress_name_matches(const struct egress_entry *e, const char *name)
{
        if (e->kind == EGRESS_NAME)
                return strcmp(e->name, name) == 0;
        if (e->kind != EGRESS_WILDCARD)
                return false;
        /* *.example.com: a.example.com and a.b.example.com, not
         * example.com, not badexample.com. */
        size_t nl = strlen(name), el = strlen(e->name);
        return nl > el + 1 && name[nl - el - 1] == '.' && strcmp(name + nl - el, e->name) == 0;
}

enum egress_verdict egress_check_addr(const struct egress_policy *p, uint32_t addr)
{
        for (size_t i = 0; i < p->n_deny; i++)
                if (cidr_matches(&p->deny[i], addr))
                        return EGRESS_DENIED;
        if (!p->has_allow)
                return EGRESS_ALLOWED;
        for (size_t i = 0; i < p->n_allow; i++)
                if (cidr_matches(&p->allow[i], addr))
                        return EGRESS_ALLOWED;
        return EGRESS_NOT_LISTED;
}

enum egress_verdict egress_check_name(const struct egress_policy *p, const char *name)
{
        char n[EGRESS_NAME_MAX + 2];
        size_t len = strlen(name);
        if (len > EGRESS_NAME_MAX + 1)
                return p->has_allow ? EGRESS_NOT_LISTED : EGRESS_ALLOWED;
        for (size_t i = 0; i <= len; i++)
                n[i] = (char)tolower((unsigned char)name[i]);
        if (len && n[len - 1] == '.')
                n[len - 1] = '\0';
        for (size_t i = 0; i < p->n_deny; i++)
                if (egress_name_matches(&p->deny[i], n))
                        return EGRESS_DENIED;
        if (!p->has_allow)
                return EGRESS_ALLOWED;
        for (size_t i = 0; i < p->n_allow; i++)
                if (egress_name_matches(&p->allow[i], n))
                        return EGRESS_ALLOWED;
        return EGRESS_NOT_LISTED;
}

int egress_policy_to_text(const struct egress_policy *p, struct buf *out)
{
        int r = buf_printf(out, "%s\n", p->has_allow ? "allow-list" : "open");
        char e[EGRESS_NAME_MAX + 8];
        for (size_t i = 0; i < p->n_allow && r >= 0; i++) {
                egress_entry_format(&p->allow[i], e, sizeof(e));
                r = buf_printf(out, "+%s\n", e);
        }
        for (size_t i = 0; i < p->n_deny && r >= 0; i++) {
                egress_entry_format(&p->deny[i], e, sizeof(e));
                r = buf_printf(out, "-%s\n", e);
        }
        return r < 0 ? r : buf_terminate(out);
}

int egress_policy_from_text(const char *text, struct egress_policy *ret, struct sbx_error *err)
{
        egress_policy_init(ret);
        const char *p = text;
        size_t l = strcspn(p, "\n");
        if (l == 10 && !strncmp(p, "allow-list", l))
                ret->has_allow = true;
        else if (!(l == 4 && !strncmp(p, "open", l)))
                return sbx_error_say(err, EINVAL, "egress policy: unknown form");
        for (p += l; *p == '\n'; p += l) {
                p++;
                l = strcspn(p, "\n");
                if (l == 0)
                        continue;
                char line[EGRESS_NAME_MAX + 8];
                if (l >= sizeof(line) || (p[0] != '+' && p[0] != '-'))
                        return sbx_error_say(err, EINVAL, "egress policy: a bad line");
                memcpy(line, p + 1, l - 1);
                line[l - 1] = '\0';
                int r = egress_policy_add(ret, p[0] == '+', line, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

bool egress_budget_take(struct egress_budget *b, unsigned rate, unsigned burst, int64_t now_ms)
{
        if (b->at_ms == 0)
                b->tokens = burst;
        else if (now_ms > b->at_ms)
                b->tokens =
                    MIN((double)burst, b->tokens + (double)(now_ms - b->at_ms) * rate / 1000.0);
        if (now_ms > b->at_ms || b->at_ms == 0)
                b->at_ms = now_ms ? now_ms : 1;
        if (b->tokens < 1)
                return false;
        b->tokens -= 1;
        return true;
}
