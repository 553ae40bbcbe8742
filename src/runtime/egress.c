/* SPDX-License-Identifier: MIT */
/* Enforcing egress policies (egress.h) and keeping the egress log
 * (egress-nft.h).
 *
 * In the instance's own nftables table (net.c), the forward chain sends a
 * sandbox's new connections through the map `egress4`, keyed by the
 * sandbox's address, to its verdict: `accept` for a sandbox with no
 * policy, `jump e<id>` for one with, whose chain reads
 *     ip daddr @e<id>d  log, reject        deny CIDRs first (the log
 *                                          rate-limited per sandbox)
 *     ip daddr @e<id>a  accept             allow CIDRs
 *     ip daddr @e<id>n  accept             addresses pinned by DNS answers
 *     log, reject                          (with an allow list; else accept)
 * An address missing from the map (a sandbox not yet registered by a
 * daemon that started again) is dropped: a policy is never off while the
 * daemon comes back. A change replaces the chain and sets in one nft
 * transaction; it applies to new connections, not established ones
 * (conntrack lets those through without a second look).
 *
 * Denied connections are logged with `log group <N>` (NFLOG): a netlink
 * socket of this daemon bound to a group no other daemon of the host holds
 * (binding one that is taken fails), so every daemon reads its own. */
#include "egress-nft.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"

#define NFLOG_FIRST_GROUP 20000
#define NFLOG_TRIES 256
#define NFLOG_COPY 64 /* bytes of each packet: its IPv4 header and ports */
#define PINS_MAX 1024 /* pinned addresses remembered per sandbox */
/* New pins per sandbox: a sandbox that resolves names by the thousand
 * would otherwise hold the forwarder's thread (an nft transaction per
 * answer) for its neighbours. A budget of PIN_BURST, refilled at
 * PIN_RATE a second. */
#define PIN_RATE 100
#define LOG_RATE 20 /* refused packets logged per sandbox and second */
#define LOG_BURST 50
#define PIN_BURST 200
#define NFT_SCRIPT_MAX (64 * 1024)

struct pin {
        uint32_t addr;
        int64_t until_ms; /* monotonic */
};

struct egress_sb {
        uint64_t id;
        uint32_t addr;
        struct egress_policy *policy; /* NULL: none */
        struct egress_event *log;     /* ring of EGRESS_LOG_MAX, allocated at the first event */
        bool chain;                   /* its chain and sets exist */
        size_t log_head, log_n;
        struct pin pins[PINS_MAX];
        size_t n_pins;
        struct egress_budget pins_budget; /* of new pins */
};

struct egress {
        pthread_mutex_t lock;
        char table[40];
        bool dns;
        int nflog_fd;
        uint16_t nflog_group;
        struct egress_sb **v;
        size_t n, cap;
        atomic_uint_fast64_t denied, dns_allowed, dns_refused;
        /* Everything goes through libnftables in-process (an nft run costs
         * tens of milliseconds, most of it nft starting): pins with a
         * context of the forwarder's thread alone, the rest (set, forget)
         * with one the API's threads take turns at. NULL: nft runs. */
        struct nft_ctx *pin_ctx;
        struct nft_ctx *ctl_ctx;
        pthread_mutex_t ctl_lock;
};

/* ---- NFLOG ---- */

static int nflog_cmd(int fd, uint16_t group, uint8_t pf, const void *attr, uint16_t type,
                     uint16_t len)
{
        char buf[128] = {0};
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        h->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
        h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        h->nlmsg_seq = 1;
        struct nfgenmsg *g = NLMSG_DATA(h);
        g->nfgen_family = pf;
        g->version = NFNETLINK_V0;
        g->res_id = htons(group);
        h->nlmsg_len = NLMSG_LENGTH(sizeof(*g));
        struct nlattr *a = (struct nlattr *)(buf + NLMSG_ALIGN(h->nlmsg_len));
        a->nla_type = type;
        a->nla_len = (uint16_t)(NLA_HDRLEN + len);
        memcpy((char *)a + NLA_HDRLEN, attr, len);
        h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        if (sendto(fd, buf, h->nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        char ack[256];
        ssize_t n = recv(fd, ack, sizeof(ack), 0);
        if (n < (ssize_t)NLMSG_HDRLEN)
                return n < 0 ? -errno : -EIO;
        const struct nlmsghdr *r = (const struct nlmsghdr *)ack;
        if (r->nlmsg_type == NLMSG_ERROR)
                return ((const struct nlmsgerr *)NLMSG_DATA(r))->error;
        return 0;
}

/* A group no other process holds: binding a taken one fails. */
static int nflog_open(const char *table, uint16_t *ret_group)
{
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                return -errno;
        }
        /* Start from a hash of the instance, so that daemons rarely try
         * the same groups. */
        uint32_t h = 2166136261u;
        for (const char *c = table; *c; c++)
                h = (h ^ (uint8_t)*c) * 16777619u;
        struct nfulnl_msg_config_cmd bind_cmd = {.command = NFULNL_CFG_CMD_BIND};
        struct nfulnl_msg_config_mode mode = {.copy_range = htonl(NFLOG_COPY),
                                              .copy_mode = NFULNL_COPY_PACKET};
        for (unsigned i = 0; i < NFLOG_TRIES; i++) {
                uint16_t g = (uint16_t)(NFLOG_FIRST_GROUP + (h + i) % 40000);
                if (nflog_cmd(fd, g, AF_UNSPEC, &bind_cmd, NFULA_CFG_CMD, sizeof(bind_cmd)) < 0)
                        continue;
                if (nflog_cmd(fd, g, AF_UNSPEC, &mode, NFULA_CFG_MODE, sizeof(mode)) < 0)
                        break;
                int fl = fcntl(fd, F_GETFL);
                fcntl(fd, F_SETFL, fl | O_NONBLOCK);
                *ret_group = g;
                return fd;
        }
        close(fd);
        return -EADDRINUSE;
}

/* ---- the table of sandboxes (lock held) ---- */

static struct egress_sb *by_id(struct egress *eg, uint64_t id)
{
        for (size_t i = 0; i < eg->n; i++)
                if (eg->v[i]->id == id)
                        return eg->v[i];
        return NULL;
}

static struct egress_sb *by_addr(struct egress *eg, uint32_t addr)
{
        for (size_t i = 0; i < eg->n; i++)
                if (eg->v[i]->addr == addr)
                        return eg->v[i];
        return NULL;
}

static void sb_free(struct egress_sb *s)
{
        if (s) {
                free(s->policy);
                free(s->log);
                free(s);
        }
}

static void drop_at(struct egress *eg, size_t i)
{
        sb_free(eg->v[i]);
        eg->v[i] = eg->v[--eg->n];
}

static void log_push(struct egress_sb *s, const struct egress_event *e)
{
        /* Made at its first event: most sandboxes never have one. */
        if (!s->log && !(s->log = calloc(EGRESS_LOG_MAX, sizeof(*s->log))))
                return;
        size_t at = (s->log_head + s->log_n) % EGRESS_LOG_MAX;
        s->log[at] = *e;
        if (s->log_n < EGRESS_LOG_MAX)
                s->log_n++;
        else
                s->log_head = (s->log_head + 1) % EGRESS_LOG_MAX;
}

/* ---- nft scripts ---- */

static void fmt_ip4(uint32_t a, char out[INET_ADDRSTRLEN])
{
        struct in_addr in = {.s_addr = htonl(a)};
        inet_ntop(AF_INET, &in, out, INET_ADDRSTRLEN);
}

/* The elements of the CIDR entries of v, "a/n, b/m" ("" for none). */
static int cidr_elements(struct buf *b, const struct egress_entry *v, size_t n)
{
        int r = 0;
        bool first = true;
        for (size_t i = 0; i < n && r >= 0; i++) {
                if (v[i].kind != EGRESS_CIDR)
                        continue;
                char ip[INET_ADDRSTRLEN];
                fmt_ip4(v[i].net, ip);
                r = buf_printf(b, "%s%s/%u", first ? "" : ", ", ip, (unsigned)v[i].prefix);
                first = false;
        }
        return r;
}

/* Replace the map's element for addr with verdict. Whether there is one
 * is known: only this daemon changes the map, and it starts empty. (nft
 * has no "replace" for a map element, and adding one whose verdict
 * differs fails.) */
static int map_element(struct buf *b, const char *t, const char *ip, bool present,
                       const char *verdict)
{
        int r = present ? buf_printf(b, "delete element inet %s egress4 { %s }\n", t, ip) : 0;
        return r < 0 ? r
                     : buf_printf(b, "add element inet %s egress4 { %s : %s }\n", t, ip, verdict);
}

static int chain_script(struct buf *b, const struct egress *eg, uint64_t id,
                        const struct egress_policy *p)
{
        const char *t = eg->table;
        /* Logged at most LOG_RATE a second per sandbox (the rest is
         * refused all the same): a sandbox that knocks at refused
         * addresses by the million cannot flood the log's reader. */
        char log[96] = "";
        if (eg->nflog_group)
                snprintf(log, sizeof(log), "limit rate %d/second burst %d packets log group %u ",
                         LOG_RATE, LOG_BURST, (unsigned)eg->nflog_group);
        int r = buf_printf(b,
                           "add set inet %s e%llud { type ipv4_addr; flags interval; }\n"
                           "add set inet %s e%llua { type ipv4_addr; flags interval; }\n"
                           "add set inet %s e%llun { type ipv4_addr; flags timeout; }\n"
                           "add chain inet %s e%llu\n"
                           "flush chain inet %s e%llu\n"
                           "flush set inet %s e%llud\nflush set inet %s e%llua\n"
                           "flush set inet %s e%llun\n",
                           t, (unsigned long long)id, t, (unsigned long long)id, t,
                           (unsigned long long)id, t, (unsigned long long)id, t,
                           (unsigned long long)id, t, (unsigned long long)id, t,
                           (unsigned long long)id, t, (unsigned long long)id);
        size_t mark = b->len;
        if (r >= 0)
                r = buf_printf(b, "add element inet %s e%llud { ", t, (unsigned long long)id);
        size_t before = b->len;
        if (r >= 0)
                r = cidr_elements(b, p->deny, p->n_deny);
        if (r >= 0 && b->len == before)
                b->len = mark; /* none: no element statement */
        else if (r >= 0)
                r = buf_printf(b, " }\n");
        mark = b->len;
        if (r >= 0)
                r = buf_printf(b, "add element inet %s e%llua { ", t, (unsigned long long)id);
        before = b->len;
        if (r >= 0)
                r = cidr_elements(b, p->allow, p->n_allow);
        if (r >= 0 && b->len == before)
                b->len = mark;
        else if (r >= 0)
                r = buf_printf(b, " }\n");
        if (r >= 0 && log[0])
                r = buf_printf(b, "add rule inet %s e%llu ip daddr @e%llud %s\n", t,
                               (unsigned long long)id, (unsigned long long)id, log);
        if (r >= 0)
                r = buf_printf(b,
                               "add rule inet %s e%llu ip daddr @e%llud reject with icmpx "
                               "admin-prohibited\n",
                               t, (unsigned long long)id, (unsigned long long)id);
        if (r >= 0 && p->has_allow)
                r = buf_printf(b,
                               "add rule inet %s e%llu ip daddr @e%llua accept\n"
                               "add rule inet %s e%llu ip daddr @e%llun accept\n",
                               t, (unsigned long long)id, (unsigned long long)id, t,
                               (unsigned long long)id, (unsigned long long)id);
        if (r >= 0 && p->has_allow && log[0])
                r = buf_printf(b, "add rule inet %s e%llu %s\n", t, (unsigned long long)id, log);
        if (r >= 0 && p->has_allow)
                r = buf_printf(b, "add rule inet %s e%llu reject with icmpx admin-prohibited\n", t,
                               (unsigned long long)id);
        else if (r >= 0) /* past the deny list, everything */
                r = buf_printf(b, "add rule inet %s e%llu accept\n", t, (unsigned long long)id);
        return r;
}

static struct nft_ctx *nft_open(void)
{
        struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
        if (ctx && (nft_ctx_buffer_output(ctx) < 0 || nft_ctx_buffer_error(ctx) < 0)) {
                nft_ctx_free(ctx);
                ctx = NULL;
        }
        return ctx;
}

/* Run script with ctx: 0, or -EIO with err saying what nft said. */
static int nft_script(struct nft_ctx *ctx, const char *table, const char *script,
                      struct sbx_error *err)
{
        int r = nft_run_cmd_from_buffer(ctx, script);
        /* Read both, so that the buffers start empty next time. */
        nft_ctx_get_output_buffer(ctx);
        const char *msg = nft_ctx_get_error_buffer(ctx);
        if (r == 0)
                return 0;
        char one[256];
        snprintf(one, sizeof(one), "%s", msg && *msg ? msg : "nft failed");
        for (char *p = one; *p; p++)
                if (*p == '\n')
                        *p = ' ';
        return sbx_error_set(err, EIO, "nftables table inet %s: %s", table, one);
}

static int run_script(struct egress *eg, struct buf *b, struct sbx_error *err)
{
        int r = buf_terminate(b);
        if (r < 0)
                return sbx_error_set(err, -r, "egress rules: too long");
        if (!eg->ctl_ctx)
                return net_run_nft(eg->table, b->data, err);
        pthread_mutex_lock(&eg->ctl_lock);
        r = nft_script(eg->ctl_ctx, eg->table, b->data, err);
        pthread_mutex_unlock(&eg->ctl_lock);
        return r;
}

/* ---- the calls ---- */

int egress_open(const char *table, bool dns, struct egress **ret, struct sbx_error *err)
{
        struct egress *eg = calloc(1, sizeof(*eg));
        if (!eg)
                return sbx_error_set(err, ENOMEM, "egress");
        pthread_mutex_init(&eg->lock, NULL);
        snprintf(eg->table, sizeof(eg->table), "%s", table);
        eg->dns = dns;
        eg->nflog_fd = nflog_open(table, &eg->nflog_group);
        pthread_mutex_init(&eg->ctl_lock, NULL);
        eg->pin_ctx = nft_open();
        eg->ctl_ctx = nft_open();
        if (eg->nflog_fd < 0)
                eg->nflog_group = 0;
        *ret = eg;
        return 0;
}

void egress_close(struct egress *eg)
{
        if (!eg)
                return;
        if (eg->nflog_fd >= 0)
                close(eg->nflog_fd);
        if (eg->pin_ctx)
                nft_ctx_free(eg->pin_ctx);
        if (eg->ctl_ctx)
                nft_ctx_free(eg->ctl_ctx);
        pthread_mutex_destroy(&eg->ctl_lock);
        for (size_t i = 0; i < eg->n; i++)
                sb_free(eg->v[i]);
        free(eg->v);
        pthread_mutex_destroy(&eg->lock);
        free(eg);
}

uint16_t egress_nflog_group(const struct egress *eg)
{
        return eg ? eg->nflog_group : 0;
}

int egress_nflog_fd(const struct egress *eg)
{
        return eg ? eg->nflog_fd : -1;
}

/* The entry of id at addr, made when new; NULL when out of memory. */
static struct egress_sb *entry_locked(struct egress *eg, uint64_t id, uint32_t addr)
{
        /* Another sandbox that had this address before is gone. */
        for (size_t i = 0; i < eg->n; i++)
                if (eg->v[i]->addr == addr && eg->v[i]->id != id)
                        drop_at(eg, i--);
        struct egress_sb *s = by_id(eg, id);
        if (s) {
                s->addr = addr;
                return s;
        }
        if (eg->n == eg->cap) {
                size_t cap = eg->cap ? eg->cap * 2 : 16;
                struct egress_sb **v = realloc(eg->v, cap * sizeof(*v));
                if (!v)
                        return NULL;
                eg->v = v;
                eg->cap = cap;
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->id = id;
        s->addr = addr;
        eg->v[eg->n++] = s;
        return s;
}

int egress_set(struct egress *eg, uint64_t id, uint32_t addr, const struct egress_policy *p,
               struct sbx_error *err)
{
        if (p && egress_policy_has_names(p) && !eg->dns)
                return sbx_error_say(err, ENOTSUP,
                                     "domain names in an egress policy need the daemon's DNS "
                                     "forwarder (dns_port)");
        bool active = p && egress_policy_active(p);
        struct egress_policy *copy = NULL;
        if (active && !(copy = malloc(sizeof(*copy))))
                return sbx_error_set(err, ENOMEM, "egress policy");
        if (copy)
                *copy = *p;
        struct buf b;
        buf_init(&b, NFT_SCRIPT_MAX);
        char ip[INET_ADDRSTRLEN], verdict[48];
        fmt_ip4(addr, ip);
        snprintf(verdict, sizeof(verdict), "jump e%llu", (unsigned long long)id);
        pthread_mutex_lock(&eg->lock);
        const struct egress_sb *prev = by_addr(eg, addr);
        bool present = prev != NULL, forced = prev && prev->policy;
        pthread_mutex_unlock(&eg->lock);
        int r = active ? chain_script(&b, eg, id, p) : 0;
        if (r >= 0)
                r = map_element(&b, eg->table, ip, present, active ? verdict : "accept");
        /* Its DNS goes to the forwarder whatever server it asks, while it
         * has a policy (net.c, dnsforce4). */
        if (r >= 0 && eg->dns && forced)
                r = buf_printf(&b, "delete element inet %s dnsforce4 { %s }\n", eg->table, ip);
        if (r >= 0 && eg->dns && active)
                r = buf_printf(&b, "add element inet %s dnsforce4 { %s }\n", eg->table, ip);
        if (r >= 0)
                r = run_script(eg, &b, err);
        else
                r = sbx_error_set(err, -r, "egress rules");
        buf_free(&b);
        if (r < 0) {
                free(copy);
                return r;
        }
        pthread_mutex_lock(&eg->lock);
        struct egress_sb *s = entry_locked(eg, id, addr);
        if (s) {
                free(s->policy);
                s->policy = copy;
                s->chain |= active;
                s->n_pins = 0; /* the set was flushed */
        } else {
                free(copy);
        }
        pthread_mutex_unlock(&eg->lock);
        return s ? 0 : sbx_error_set(err, ENOMEM, "egress");
}

void egress_forget(struct egress *eg, uint64_t id)
{
        if (!eg)
                return;
        pthread_mutex_lock(&eg->lock);
        struct egress_sb *s = by_id(eg, id);
        uint32_t addr = s ? s->addr : 0;
        bool had = s && s->chain, forced = s && s->policy && eg->dns;
        for (size_t i = 0; i < eg->n; i++)
                if (eg->v[i]->id == id)
                        drop_at(eg, i);
        pthread_mutex_unlock(&eg->lock);
        if (!s)
                return;
        struct buf b;
        buf_init(&b, 4096);
        char ip[INET_ADDRSTRLEN];
        fmt_ip4(addr, ip);
        const char *t = eg->table;
        unsigned long long i = (unsigned long long)id;
        /* Its address goes back to "not registered" (dropped) until the
         * next sandbox there registers. */
        int r = buf_printf(&b, "delete element inet %s egress4 { %s }\n", t, ip);
        if (r >= 0 && forced)
                r = buf_printf(&b, "delete element inet %s dnsforce4 { %s }\n", t, ip);
        if (r >= 0 && had)
                r = buf_printf(&b,
                               "delete chain inet %s e%llu\ndelete set inet %s e%llud\n"
                               "delete set inet %s e%llua\ndelete set inet %s e%llun\n",
                               t, i, t, i, t, i, t, i);
        if (r >= 0)
                run_script(eg, &b, NULL);
        buf_free(&b);
}

static void dns_event(struct egress_sb *s, const char *name, bool allowed,
                      const struct dnsmsg_addr *a, size_t n)
{
        struct egress_event e = {.at_ms = now_ms(), .type = EGRESS_EV_DNS, .allowed = allowed};
        snprintf(e.name, sizeof(e.name), "%s", name);
        for (size_t i = 0; i < n && e.n_addrs < ARRAY_SIZE(e.addrs); i++)
                e.addrs[e.n_addrs++] = a[i].addr;
        log_push(s, &e);
}

bool egress_dns_query(struct egress *eg, uint32_t src, const char *name)
{
        if (!eg)
                return true;
        pthread_mutex_lock(&eg->lock);
        struct egress_sb *s = by_addr(eg, src);
        bool ok = !s || !s->policy || egress_check_name(s->policy, name) == EGRESS_ALLOWED;
        if (!ok) {
                dns_event(s, name, false, NULL, 0);
                atomic_fetch_add(&eg->dns_refused, 1);
        }
        pthread_mutex_unlock(&eg->lock);
        return ok;
}

static uint32_t clamp_ttl(uint32_t ttl)
{
        return ttl < EGRESS_TTL_MIN_S ? EGRESS_TTL_MIN_S : MIN(ttl, (uint32_t)EGRESS_TTL_MAX_S);
}

/* Record the pin of a for ttl; false when one long enough is there. */
static bool pin_locked(struct egress_sb *s, uint32_t a, uint32_t ttl, int64_t now)
{
        struct pin *slot = NULL;
        for (size_t i = 0; i < s->n_pins; i++) {
                struct pin *p = &s->pins[i];
                if (p->addr == a) {
                        /* Renewed only when half of it has gone. */
                        if (p->until_ms - now > (int64_t)ttl * 500)
                                return false;
                        slot = p;
                } else if (!slot && p->until_ms <= now) {
                        slot = p;
                }
        }
        if (!slot && s->n_pins < PINS_MAX)
                slot = &s->pins[s->n_pins++];
        if (!slot) /* full of live pins: the oldest goes */
                slot = &s->pins[a % PINS_MAX];
        slot->addr = a;
        slot->until_ms = now + (int64_t)ttl * 1000;
        return true;
}

/* Whether any of a's addresses needs a new pin in s. */
static bool needs_pin_locked(const struct egress_sb *s, const struct dnsmsg_addr *a, size_t n,
                             int64_t now)
{
        for (size_t i = 0; i < n; i++) {
                bool fresh = false;
                for (size_t k = 0; k < s->n_pins && !fresh; k++)
                        fresh = s->pins[k].addr == a[i].addr &&
                                s->pins[k].until_ms - now > (int64_t)clamp_ttl(a[i].ttl) * 500;
                if (!fresh)
                        return true;
        }
        return false;
}

bool egress_dns_answer(struct egress *eg, uint32_t src, const char *name,
                       const struct dnsmsg_addr *a, size_t n)
{
        if (!eg)
                return true;
        struct buf b;
        buf_init(&b, NFT_SCRIPT_MAX);
        int64_t now = mono_ms();
        pthread_mutex_lock(&eg->lock);
        struct egress_sb *s = by_addr(eg, src);
        uint64_t id = s ? s->id : 0;
        bool pins = s && s->policy && s->policy->has_allow;
        if (pins && needs_pin_locked(s, a, n, now) &&
            !egress_budget_take(&s->pins_budget, PIN_RATE, PIN_BURST, now)) {
                dns_event(s, name, false, a, n);
                atomic_fetch_add(&eg->dns_refused, 1);
                pthread_mutex_unlock(&eg->lock);
                buf_free(&b);
                return false;
        }
        for (size_t i = 0; pins && i < n; i++) {
                uint32_t ttl = clamp_ttl(a[i].ttl);
                if (!pin_locked(s, a[i].addr, ttl, now))
                        continue;
                char ip[INET_ADDRSTRLEN];
                fmt_ip4(a[i].addr, ip);
                /* add, delete, add: a pin already there gets its new
                 * timeout (add alone would keep the old one). */
                buf_printf(&b,
                           "add element inet %s e%llun { %s timeout %us }\n"
                           "delete element inet %s e%llun { %s }\n"
                           "add element inet %s e%llun { %s timeout %us }\n",
                           eg->table, (unsigned long long)id, ip, ttl, eg->table,
                           (unsigned long long)id, ip, eg->table, (unsigned long long)id, ip, ttl);
        }
        if (s) {
                dns_event(s, name, true, a, n);
                atomic_fetch_add(&eg->dns_allowed, 1);
        }
        pthread_mutex_unlock(&eg->lock);
        /* Before the answer goes out: the sandbox connects as soon as it
         * has it. */
        if (b.len && eg->pin_ctx && buf_terminate(&b) == 0)
                nft_script(eg->pin_ctx, eg->table, (const char *)b.data, NULL);
        else if (b.len)
                run_script(eg, &b, NULL);
        buf_free(&b);
        return true;
}

/* One NFLOG packet message: the IPv4 packet that was refused. */
static void nflog_packet(struct egress *eg, const struct nlmsghdr *h)
{
        const char *p = (const char *)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(struct nfgenmsg));
        const char *end = (const char *)h + h->nlmsg_len;
        const uint8_t *pkt = NULL;
        size_t plen = 0;
        while (p + NLA_HDRLEN <= end) {
                const struct nlattr *a = (const struct nlattr *)p;
                if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
                        break;
                if ((a->nla_type & NLA_TYPE_MASK) == NFULA_PAYLOAD) {
                        pkt = (const uint8_t *)p + NLA_HDRLEN;
                        plen = a->nla_len - NLA_HDRLEN;
                }
                p += NLA_ALIGN(a->nla_len);
        }
        if (!pkt || plen < 20 || (pkt[0] >> 4) != 4)
                return;
        size_t ihl = (size_t)(pkt[0] & 0x0f) * 4;
        struct egress_event e = {.at_ms = now_ms(), .type = EGRESS_EV_CONN, .proto = pkt[9]};
        uint32_t src = (uint32_t)pkt[12] << 24 | (uint32_t)pkt[13] << 16 | pkt[14] << 8 | pkt[15];
        e.addr = (uint32_t)pkt[16] << 24 | (uint32_t)pkt[17] << 16 | pkt[18] << 8 | pkt[19];
        if ((e.proto == IPPROTO_TCP || e.proto == IPPROTO_UDP) && ihl >= 20 && plen >= ihl + 4)
                e.port = (uint16_t)(pkt[ihl + 2] << 8 | pkt[ihl + 3]);
        atomic_fetch_add(&eg->denied, 1);
        pthread_mutex_lock(&eg->lock);
        struct egress_sb *s = by_addr(eg, src);
        if (s)
                log_push(s, &e);
        pthread_mutex_unlock(&eg->lock);
}

void egress_nflog_read(struct egress *eg)
{
        char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
        /* A bounded batch: the forwarder's other sockets wait meanwhile. */
        for (int k = 0; k < 64 && eg->nflog_fd >= 0; k++) {
                ssize_t n = recv(eg->nflog_fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n <= 0)
                        return;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
                     h = NLMSG_NEXT(h, n))
                        if (h->nlmsg_type == ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
                                nflog_packet(eg, h);
        }
}

int egress_log(struct egress *eg, uint64_t id, struct egress_event *out, size_t max, size_t *ret_n)
{
        pthread_mutex_lock(&eg->lock);
        struct egress_sb *s = by_id(eg, id);
        size_t n = 0;
        if (s) {
                size_t skip = s->log_n > max ? s->log_n - max : 0;
                for (size_t i = skip; i < s->log_n; i++)
                        out[n++] = s->log[(s->log_head + i) % EGRESS_LOG_MAX];
        }
        pthread_mutex_unlock(&eg->lock);
        if (!s)
                return -ENOENT;
        *ret_n = n;
        return 0;
}

void egress_stats(struct egress *eg, struct egress_stats *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (!eg)
                return;
        ret->denied_connections = atomic_load(&eg->denied);
        ret->dns_allowed = atomic_load(&eg->dns_allowed);
        ret->dns_refused = atomic_load(&eg->dns_refused);
}
