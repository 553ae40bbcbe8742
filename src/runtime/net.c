/* SPDX-License-Identifier: MIT */
/* NAT networking of the ns driver.
 *
 * A sandbox with RT_NET_NAT gets a veth pair: the host end `sbd<tag><N>` in
 * the host's network namespace, the other end `eth0` in the sandbox's, a
 * /30 of the instance's range each (host .1, sandbox .2), the host end as
 * default gateway. <tag> is the first RT_TAG_LEN digits of the instance id
 * (unique among live instances, claim.c), N the index of the /30; the name
 * doubles as the lock on that /30 (creating an existing name fails, and the
 * kernel removes the pair with the sandbox's namespace when its last
 * process exits). Every daemon instance has its own range (claim.c).
 *
 * What a sandbox may reach is decided by the instance's own nftables table
 * `inet sandboxd-<instance>`, whose rules match only its own interfaces
 * (installed by rt_open, replaced atomically when the daemon starts again,
 * removed when it stops with no sandbox left):
 *  - nothing of the host itself: every packet that arrives on one of its
 *    interfaces for a local address is rejected (the daemon's API, host
 *    services, 127/8 through the veth, the gateway address);
 *  - no private, shared, link-local, multicast or reserved IPv4 range, no
 *    network the host is directly attached to (its LAN, even with public
 *    addresses), and not the sandbox range itself (no sandbox-to-sandbox
 *    traffic), but for what the operator opens (net_open_ranges, the set
 *    opened4); no IPv6 at all (it is disabled on both ends of the pair);
 *  - a new connection of a sandbox goes through its egress policy, the
 *    map egress4 keyed by its address (egress.c); an address the daemon
 *    has not registered yet gets nothing;
 *  - replies to what the sandbox opened come back (conntrack), nothing
 *    else enters; IPv4 is masqueraded to the host's outgoing address.
 * The host end runs strict reverse-path filtering, so a sandbox with
 * CAP_NET_RAW cannot spoof another source address.
 *
 * Configuration talks rtnetlink directly (no ip(8) processes). */
#include "net.h"
#include "runtime.h"
#include "../common/tool.h"
#include "egress.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#define NL_BUF 1024
#define NET_IF_PREFIX "sbd"
#define NFT_RULES_MAX 8192
/* A veth name has IFNAMSIZ - 1 bytes: the instance's prefix (9) and at most
 * 6 digits of the index of its /30, so a range serves at most that many. */
#define NET_MAX_SLOTS 1000000u

/* ---- the range ---- */

int net_parse_cidr(const char *s, uint32_t *ret_base, unsigned *ret_len)
{
        char ip[32];
        const char *slash = strchr(s, '/');
        if (!slash || (size_t)(slash - s) >= sizeof(ip))
                return -EINVAL;
        memcpy(ip, s, (size_t)(slash - s));
        ip[slash - s] = '\0';
        struct in_addr a;
        char *end;
        long len = strtol(slash + 1, &end, 10);
        if (inet_pton(AF_INET, ip, &a) != 1 || *end || end == slash + 1 || len < 8 || len > 30)
                return -EINVAL;
        uint32_t base = ntohl(a.s_addr);
        uint32_t mask = len == 0 ? 0 : ~0U << (32 - len);
        if (base & ~mask)
                return -EINVAL; /* host bits set: almost surely a typo */
        *ret_base = base;
        *ret_len = (unsigned)len;
        return 0;
}

static void fmt_ip(uint32_t host_order, char out[INET_ADDRSTRLEN])
{
        struct in_addr a = {.s_addr = htonl(host_order)};
        inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

/* ---- resolv.conf ---- */

/* Whether an IPv4 nameserver is one a NAT sandbox may reach. */
static bool public_ipv4(uint32_t a)
{
        static const struct {
                uint32_t net;
                unsigned len;
        } blocked[] = {
            {0x00000000, 8},  {0x0a000000, 8},  {0x64400000, 10}, {0x7f000000, 8}, {0xa9fe0000, 16},
            {0xac100000, 12}, {0xc0000000, 24}, {0xc0a80000, 16}, {0xe0000000, 4}, {0xf0000000, 4},
        };
        for (size_t i = 0; i < ARRAY_SIZE(blocked); i++)
                if ((a & (~0U << (32 - blocked[i].len))) == blocked[i].net)
                        return false;
        return true;
}

/* The host's nameservers, as "a,b,...": those of /etc/resolv.conf, and
 * those of systemd-resolved, whose stub (127.0.0.53) hides the upstream
 * servers in its own file. Only whole names: what does not fit is left
 * out, never cut. */
static void host_nameservers(struct buf *list)
{
        static const char *const files[] = {"/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                FILE *f = fopen(files[i], "re");
                char line[256];
                while (f && fgets(line, sizeof(line), f)) {
                        char ip[64];
                        if (sscanf(line, " nameserver %63s", ip) == 1)
                                buf_printf(list, "%s%s", list->len ? "," : "", ip);
                }
                if (f)
                        fclose(f);
        }
}

/* 1 when t is a nameserver a NAT sandbox may use, 0 when not; strict (the
 * operator named it): -EINVAL instead of 0, with err saying why. */
static int nameserver_ok(const char *t, bool strict, struct sbx_error *err)
{
        struct in_addr a;
        if (inet_pton(AF_INET, t, &a) != 1)
                return strict ? sbx_error_set(err, EINVAL, "dns: `%s` is not an IPv4 address", t)
                              : 0;
        if (!public_ipv4(ntohl(a.s_addr)))
                return strict ? sbx_error_set(err, EINVAL,
                                              "dns: %s is a private or local address a "
                                              "sandbox may not reach",
                                              t)
                              : 0;
        return 1;
}

/* "a, b" (or the host's nameservers when list is NULL: its public IPv4
 * servers only) -> "nameserver a\nnameserver b\n"; "" when none. */
static int make_resolv(const char *list, char *out, size_t out_len, struct sbx_error *err)
{
        struct buf names;
        buf_init(&names, 1023);
        out[0] = '\0';
        int r = 0;
        if (list)
                r = buf_printf(&names, "%s", list);
        else
                host_nameservers(&names);
        if (r >= 0)
                r = buf_terminate(&names);
        if (r < 0) {
                buf_free(&names);
                return sbx_error_set(err, -r, "dns: the list of nameservers");
        }
        char *save = NULL;
        int n = 0;
        for (char *t = strtok_r(names.data, ", \t", &save); t && n < 3 && r >= 0;
             t = strtok_r(NULL, ", \t", &save)) {
                if ((r = nameserver_ok(t, list != NULL, err)) <= 0)
                        continue;
                size_t l = strlen(out);
                snprintf(out + l, out_len - l, "nameserver %s\n", t);
                n++;
        }
        buf_free(&names);
        return r < 0 ? r : 0;
}

/* ---- the host's side: forwarding and the nftables table ---- */

/* Turn IPv4 forwarding on. When the host did not route before sandboxd
 * (remembered in /run, which lives as long as the setting), it must not
 * start routing for its LAN either: *ret_router says whether it did. */
static int enable_forwarding(bool *ret_router, struct sbx_error *err)
{
        static const char fwd[] = "/proc/sys/net/ipv4/ip_forward";
        static const char mark[] = "/run/sandboxd/ip_forward-was-off";
        char v[8] = "";
        int r = read_small_at(AT_FDCWD, fwd, v, sizeof(v));
        if (r < 0)
                return sbx_error_set(err, -r, "read %s", fwd);
        bool was_on = v[0] == '1';
        if (!was_on) {
                mkdir_p("/run/sandboxd", 0755);
                _cleanup_close_ int fd =
                    open(mark, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
                if (fd < 0)
                        return sbx_error_set(err, errno, "create %s", mark);
                if ((r = write_small_at(AT_FDCWD, fwd, "1\n")) < 0)
                        return sbx_error_set(err, -r, "turn on %s", fwd);
        }
        *ret_router = was_on && access(mark, F_OK) != 0;
        return 0;
}

/* A name fit for the nft script that is no sandbox's veth (sbd<tag><N>
 * now, sbx<N> before instances had their own). */
static bool plain_ifname(const char *n)
{
        bool ok =
            strlen(n) < IFNAMSIZ && strncmp(n, NET_IF_PREFIX, 3) != 0 && strncmp(n, "sbx", 3) != 0;
        for (const char *c = n; ok && *c; c++)
                ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                     (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.';
        return ok;
}

static void append(char *out, size_t len, const char *item)
{
        size_t l = strlen(out);
        if (!strstr(out, item) && l + strlen(item) + 3 < len)
                snprintf(out + l, len - l, "%s%s", l ? ", " : "", item);
}

/* From the host's IPv4 routes: the interfaces of its default routes, as an
 * nft list ("\"eth0\""), and the networks it is directly attached to
 * ("192.0.2.0/24"), the LAN a sandbox must not reach even when its
 * addresses are public. Names go into the nft script: plain ones only. */
static void host_routes(char *uplinks, size_t ulen, char *onlink, size_t olen)
{
        uplinks[0] = onlink[0] = '\0';
        FILE *f = fopen("/proc/net/route", "re");
        char line[256];
        while (f && fgets(line, sizeof(line), f)) {
                char ifname[IFNAMSIZ + 1];
                unsigned dst, gw, flags, mask;
                if (sscanf(line, "%16s %x %x %x %*s %*s %*s %x", ifname, &dst, &gw, &flags,
                           &mask) != 5 ||
                    !plain_ifname(ifname))
                        continue;
                /* The kernel prints the network-order words as host integers. */
                uint32_t d = ntohl(dst), m = ntohl(mask);
                char item[48];
                if (d == 0 && m == 0) {
                        snprintf(item, sizeof(item), "\"%s\"", ifname);
                        append(uplinks, ulen, item);
                } else if (gw == 0 && (~m & (~m + 1)) == 0) {
                        char ip[INET_ADDRSTRLEN];
                        fmt_ip(d & m, ip);
                        snprintf(item, sizeof(item), "%s/%d", ip, __builtin_popcount(m));
                        append(onlink, olen, item);
                }
        }
        if (f)
                fclose(f);
}

/* One table per daemon instance, matching only its own interfaces:
 * another sandboxd of the host has its own table, range and forwarder, and
 * replacing or removing ours never touches it. */
static int nft_rules(const struct ns_net_cfg *n, bool router, char *out, size_t len)
{
        char base[INET_ADDRSTRLEN], up[256], lan[512] = "", onlink[1024];
        char dns_in[256] = "", dns_nat[640] = "", dns_fwd[160] = "", own[24];
        const char *t = n->table;
        fmt_ip(n->base, base);
        snprintf(own, sizeof(own), "\"%s*\"", n->ifprefix);
        if (n->dns_port) {
                /* DNS to the range's first address goes to the daemon's
                 * forwarder; only such redirected packets may reach it. */
                char vip[INET_ADDRSTRLEN];
                fmt_ip(n->base + 1, vip);
                snprintf(dns_in, sizeof(dns_in),
                         "    iifname %s udp dport %u ct status dnat accept\n", own,
                         (unsigned)n->dns_port);
                /* A sandbox with an egress policy (the set dnsforce4,
                 * egress.c) has every UDP query to port 53 answered by the
                 * forwarder, whatever resolver it names, and no DNS over
                 * TCP to port 53 (the forwarder has none). */
                snprintf(dns_nat, sizeof(dns_nat),
                         "  chain prerouting {\n"
                         "    type nat hook prerouting priority dstnat; policy accept;\n"
                         "    iifname %s ip daddr %s udp dport 53 redirect to :%u\n"
                         "    iifname %s ip saddr @dnsforce4 udp dport 53 redirect to :%u\n"
                         "  }\n",
                         own, vip, (unsigned)n->dns_port, own, (unsigned)n->dns_port);
                snprintf(dns_fwd, sizeof(dns_fwd),
                         "    iifname %s ip saddr @dnsforce4 tcp dport 53 reject with tcp reset\n",
                         own);
        }
        host_routes(up, sizeof(up), onlink, sizeof(onlink));
        char opened[sizeof(n->open4) + 32] = "";
        if (n->open4[0])
                snprintf(opened, sizeof(opened), "    elements = { %s }\n", n->open4);
        /* A host that did not route before must not start routing for its
         * LAN: new flows arriving on an uplink go to a sandbox (replies) or
         * nowhere. Other forwarding (containers, published ports) is left
         * alone. */
        if (!router && up[0])
                snprintf(lan, sizeof(lan),
                         "    iifname { %s } oifname != %s ct state new ct status != dnat drop\n",
                         up, own);
        int w = snprintf(
            out, len,
            "table inet %s\n"
            "delete table inet %s\n"
            "table inet %s {\n"
            "  set blocked4 {\n"
            "    type ipv4_addr; flags interval; auto-merge;\n"
            "    elements = { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8,\n"
            "                 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.168.0.0/16,\n"
            "                 224.0.0.0/4, 240.0.0.0/4, %s/%u%s%s }\n"
            "  }\n"
            "  set opened4 {\n"
            "    type ipv4_addr; flags interval; auto-merge;\n"
            "%s"
            "  }\n"
            "  set dnsforce4 {\n"
            "    type ipv4_addr;\n"
            "  }\n"
            "  map egress4 {\n"
            "    type ipv4_addr : verdict;\n"
            "  }\n"
            "  chain input {\n"
            "    type filter hook input priority filter - 10; policy accept;\n"
            "%s"
            "    iifname %s meta l4proto tcp reject with tcp reset\n"
            "    iifname %s drop\n"
            "  }\n"
            "  chain forward {\n"
            "    type filter hook forward priority filter - 10; policy accept;\n"
            "    iifname %s meta nfproto ipv6 drop\n"
            "    iifname %s ip saddr != %s/%u drop\n"
            "    iifname %s ip daddr @blocked4 ip daddr != @opened4 reject with icmpx "
            "admin-prohibited\n"
            "    iifname %s oifname %s drop\n"
            "%s"
            "    iifname %s ct state new ip saddr vmap @egress4\n"
            "    iifname %s ct state new drop\n"
            "    iifname %s accept\n"
            "    oifname %s ct state established,related accept\n"
            "    oifname %s drop\n"
            "%s"
            "  }\n"
            "%s"
            "  chain postrouting {\n"
            "    type nat hook postrouting priority srcnat; policy accept;\n"
            "    ip saddr %s/%u oifname != %s masquerade\n"
            "  }\n"
            "}\n",
            t, t, t, base, n->prefix, onlink[0] ? ", " : "", onlink, opened, dns_in, own, own, own,
            own, base, n->prefix, own, own, own, dns_fwd, own, own, own, own, own, lan, dns_nat,
            base, n->prefix, own);
        return w < 0 || (size_t)w >= len ? -E2BIG : 0;
}

int net_run_nft(const char *table, const char *rules, struct sbx_error *err)
{
        static const char *const paths[] = {"/usr/sbin/nft", "/sbin/nft", NULL};
        const char *nft = tool_find(paths);
        if (!nft)
                return sbx_error_set(err, ENOENT,
                                     "network nat needs nft (the nftables package); or set "
                                     "network = none");
        const char *const argv[] = {nft, "-f", "-", NULL};
        char msg[256] = "";
        struct tool_run t = {
            .argv = argv,
            .envp = tool_plain_env,
            .input = rules,
            .err_text = msg,
            .err_len = sizeof(msg),
        };
        int st;
        int r = run_tool(&t, &st, err);
        if (r < 0 && st != -1) {
                for (char *p = msg; *p; p++)
                        if (*p == '\n')
                                *p = ' ';
                return sbx_error_set(err, EIO, "nftables table inet %s: %s", table,
                                     msg[0] ? msg : "nft failed");
        }
        return r;
}

int net_host_plan(const char *range, const char *instance, const char *dns, bool forwarder,
                  bool force_forward, struct ns_net_cfg *ret, struct sbx_error *err)
{
        memset(ret, 0, sizeof(*ret));
        if (!range)
                return 0;
        if (!instance || strlen(instance) != RT_INSTANCE_LEN)
                return sbx_error_set(err, EINVAL, "network nat needs the instance id");
        if (net_parse_cidr(range, &ret->base, &ret->prefix) < 0)
                return sbx_error_set(err, EINVAL,
                                     "net_range `%s`: want an IPv4 network a.b.c.d/8..30", range);
        ret->slots = MIN(1U << (32 - ret->prefix - 2), NET_MAX_SLOTS);
        snprintf(ret->table, sizeof(ret->table), "sandboxd-%s", instance);
        snprintf(ret->ifprefix, sizeof(ret->ifprefix), NET_IF_PREFIX "%.*s", RT_TAG_LEN, instance);
        int r = make_resolv(dns && *dns ? dns : NULL, ret->resolv, sizeof(ret->resolv), err);
        if (r < 0)
                return r;
        if (force_forward && (dns && *dns))
                return sbx_error_set(err, EINVAL, "set dns or dns_upstream, not both");
        if ((force_forward || (!ret->resolv[0] && !(dns && *dns))) && forwarder) {
                /* No resolver a sandbox may reach (or an upstream chosen for
                 * the forwarder): the daemon forwards. */
                char vip[INET_ADDRSTRLEN];
                fmt_ip(ret->base + 1, vip);
                snprintf(ret->resolv, sizeof(ret->resolv), "nameserver %s\noptions edns0\n", vip);
                ret->forward = true;
        }
        return 0;
}

int net_open_ranges(const char *list, struct ns_net_cfg *ret, struct sbx_error *err)
{
        ret->open4[0] = '\0';
        if (!list || !*list)
                return 0;
        char buf[sizeof(ret->open4)];
        if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
                return sbx_error_say(err, E2BIG, "net_open_ranges: the list is too long");
        char *save = NULL;
        for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
                struct egress_entry e;
                struct sbx_error why = {0};
                if (egress_entry_parse(t, &e, &why) < 0 || e.kind != EGRESS_CIDR)
                        return sbx_error_say(err, EINVAL, "net_open_ranges: %s",
                                             why.msg[0] ? why.msg : "an IPv4 network, a.b.c.d/n");
                char item[EGRESS_NAME_MAX + 8];
                egress_entry_format(&e, item, sizeof(item));
                size_t l = strlen(ret->open4);
                snprintf(ret->open4 + l, sizeof(ret->open4) - l, "%s%s", l ? ", " : "", item);
        }
        return 0;
}

int net_host_install(struct ns_net_cfg *cfg, struct sbx_error *err)
{
        if (!cfg->table[0])
                return 0;
        bool router = false;
        int r = enable_forwarding(&router, err);
        if (r < 0)
                return r;
        char rules[NFT_RULES_MAX];
        if (nft_rules(cfg, router, rules, sizeof(rules)) < 0)
                return sbx_error_set(err, E2BIG, "nftables rules");
        if ((r = net_run_nft(cfg->table, rules, err)) < 0)
                return r;
        cfg->enabled = true;
        return 0;
}

int net_host_remove(const struct ns_net_cfg *cfg, struct sbx_error *err)
{
        if (!cfg->enabled)
                return 0;
        char rules[128];
        snprintf(rules, sizeof(rules), "table inet %s\ndelete table inet %s\n", cfg->table,
                 cfg->table);
        return net_run_nft(cfg->table, rules, err);
}

/* ---- rtnetlink ---- */

struct nl_msg {
        struct nlmsghdr h;
        char data[NL_BUF];
};

static void nl_init(struct nl_msg *m, uint16_t type, uint16_t flags, const void *hdr, size_t len)
{
        memset(m, 0, sizeof(*m));
        m->h.nlmsg_len = NLMSG_LENGTH(len);
        m->h.nlmsg_type = type;
        m->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        memcpy(NLMSG_DATA(&m->h), hdr, len);
}

static struct rtattr *nl_attr(struct nl_msg *m, uint16_t type, const void *data, size_t len)
{
        size_t at = NLMSG_ALIGN(m->h.nlmsg_len);
        if (at + RTA_SPACE(len) > sizeof(*m))
                return NULL;
        struct rtattr *a = (struct rtattr *)((char *)m + at);
        a->rta_type = type;
        a->rta_len = (unsigned short)RTA_LENGTH(len);
        if (len)
                memcpy(RTA_DATA(a), data, len);
        m->h.nlmsg_len = (uint32_t)(at + RTA_SPACE(len));
        return a;
}

static void nl_nest_end(struct nl_msg *m, struct rtattr *nest)
{
        nest->rta_len = (unsigned short)((char *)m + m->h.nlmsg_len - (char *)nest);
}

/* Send one request, wait for its ack: 0 or -errno. */
static int nl_talk(struct nl_msg *m)
{
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
        m->h.nlmsg_seq = 1;
        if (sendto(fd, m, m->h.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        char buf[4096];
        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
                     h = NLMSG_NEXT(h, n)) {
                        if (h->nlmsg_seq != 1)
                                continue;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);
                                return e->error;
                        }
                        if (h->nlmsg_type == NLMSG_DONE)
                                return 0;
                }
        }
}

/* veth `name` here, its peer `eth0` in the namespace of netns_fd. */
static int nl_veth_add(const char *name, int netns_fd)
{
        struct nl_msg m;
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
        nl_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
        nl_attr(&m, IFLA_IFNAME, name, strlen(name) + 1);
        struct rtattr *info = nl_attr(&m, IFLA_LINKINFO, NULL, 0);
        nl_attr(&m, IFLA_INFO_KIND, "veth", 4);
        struct rtattr *data = nl_attr(&m, IFLA_INFO_DATA, NULL, 0);
        struct rtattr *peer = nl_attr(&m, VETH_INFO_PEER, &ifi, sizeof(ifi));
        nl_attr(&m, IFLA_IFNAME, "eth0", 5);
        uint32_t fd = (uint32_t)netns_fd;
        if (!nl_attr(&m, IFLA_NET_NS_FD, &fd, sizeof(fd)))
                return -E2BIG;
        nl_nest_end(&m, peer);
        nl_nest_end(&m, data);
        nl_nest_end(&m, info);
        return nl_talk(&m);
}

static int nl_addr_add(int ifindex, uint32_t addr, unsigned prefix)
{
        struct nl_msg m;
        struct ifaddrmsg ifa = {.ifa_family = AF_INET,
                                .ifa_prefixlen = (unsigned char)prefix,
                                .ifa_scope = RT_SCOPE_UNIVERSE,
                                .ifa_index = (unsigned)ifindex};
        nl_init(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof(ifa));
        uint32_t a = htonl(addr);
        nl_attr(&m, IFA_LOCAL, &a, 4);
        nl_attr(&m, IFA_ADDRESS, &a, 4);
        return nl_talk(&m);
}

static int nl_link_up(int ifindex)
{
        struct nl_msg m;
        struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC,
                                .ifi_index = ifindex,
                                .ifi_flags = IFF_UP,
                                .ifi_change = IFF_UP};
        nl_init(&m, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
        return nl_talk(&m);
}

static int nl_default_route(int ifindex, uint32_t gw)
{
        struct nl_msg m;
        struct rtmsg rt = {.rtm_family = AF_INET,
                           .rtm_table = RT_TABLE_MAIN,
                           .rtm_protocol = RTPROT_BOOT,
                           .rtm_scope = RT_SCOPE_UNIVERSE,
                           .rtm_type = RTN_UNICAST};
        nl_init(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt, sizeof(rt));
        uint32_t g = htonl(gw);
        uint32_t oif = (uint32_t)ifindex;
        nl_attr(&m, RTA_GATEWAY, &g, 4);
        nl_attr(&m, RTA_OIF, &oif, 4);
        return nl_talk(&m);
}

/* /proc/sys/net/<family>/conf/<ifname>/<key> of the caller's netns. */
static int if_sysctl(const char *family, const char *ifname, const char *key, const char *value)
{
        char p[128];
        int r = path_printf(p, sizeof(p), "/proc/sys/net/%s/conf/%s/%s", family, ifname, key);
        return r < 0 ? r : write_small_at(AT_FDCWD, p, value);
}

/* ---- per sandbox ---- */

int net_veth_create(const struct ns_net_cfg *cfg, uint32_t hint, int netns_fd, struct ns_net *ret,
                    struct sbx_error *err)
{
        if (!cfg->enabled)
                return sbx_error_set(err, ENOTSUP,
                                     "network nat is not enabled on this daemon (network = none)");
        memset(ret, 0, sizeof(*ret));
        int r = -EEXIST;
        uint32_t idx = 0;
        /* The first free /30, starting from the hint: the name is the lock. */
        for (uint32_t i = 0; i < cfg->slots && r == -EEXIST; i++) {
                idx = (hint + i) % cfg->slots;
                if (path_printf(ret->host_if, sizeof(ret->host_if), "%s%" PRIu32, cfg->ifprefix,
                                idx) < 0)
                        return sbx_error_set(err, ENAMETOOLONG, "veth name for /30 %" PRIu32, idx);
                r = nl_veth_add(ret->host_if, netns_fd);
        }
        if (r == -EEXIST)
                return sbx_error_set(err, EADDRNOTAVAIL,
                                     "every /30 of the sandbox network is in use");
        if (r < 0)
                return sbx_error_set(err, -r, "create veth %s", ret->host_if);
        ret->host_addr = cfg->base + 4 * idx + 1;
        ret->sb_addr = cfg->base + 4 * idx + 2;
        int ifindex = (int)if_nametoindex(ret->host_if);
        if (ifindex <= 0)
                return sbx_error_set(err, errno, "find %s", ret->host_if);
        /* No IPv6 (no link-local either), strict reverse-path filtering (no
         * spoofed sources), no route to 127/8, no redirects. Before the
         * link comes up. */
        r = if_sysctl("ipv6", ret->host_if, "disable_ipv6", "1");
        if (r == -ENOENT) /* a host without IPv6 */
                r = 0;
        if (r < 0 || (r = if_sysctl("ipv4", ret->host_if, "rp_filter", "1")) < 0 ||
            (r = if_sysctl("ipv4", ret->host_if, "route_localnet", "0")) < 0 ||
            (r = if_sysctl("ipv4", ret->host_if, "send_redirects", "0")) < 0 ||
            (r = if_sysctl("ipv4", ret->host_if, "accept_local", "0")) < 0)
                return sbx_error_set(err, -r, "configure %s", ret->host_if);
        if ((r = nl_addr_add(ifindex, ret->host_addr, 30)) < 0 || (r = nl_link_up(ifindex)) < 0)
                return sbx_error_set(err, -r, "bring up %s", ret->host_if);
        ret->active = true;
        return 0;
}

int net_loopback_up(struct sbx_error *err)
{
        int ifindex = (int)if_nametoindex("lo");
        int r = ifindex > 0 ? nl_link_up(ifindex) : -errno;
        return r < 0 ? sbx_error_set(err, -r, "bring up lo in the sandbox") : 0;
}

int net_sandbox_setup(const struct ns_net *n, struct sbx_error *err)
{
        int ifindex = (int)if_nametoindex("eth0");
        if (ifindex <= 0)
                return sbx_error_set(err, errno, "find eth0 in the sandbox");
        int r = if_sysctl("ipv6", "eth0", "disable_ipv6", "1");
        if (r < 0 && r != -ENOENT)
                return sbx_error_set(err, -r, "disable IPv6 on the sandbox's eth0");
        if ((r = nl_addr_add(ifindex, n->sb_addr, 30)) < 0 || (r = nl_link_up(ifindex)) < 0 ||
            (r = nl_default_route(ifindex, n->host_addr)) < 0)
                return sbx_error_set(err, -r, "configure the sandbox's eth0");
        return 0;
}

/* ---- the sandbox's address, kept in its dir ---- */

int net_addr_save(int dirfd, const struct ns_net *n, struct sbx_error *err)
{
        char addr[INET_ADDRSTRLEN], ip[INET_ADDRSTRLEN + 2];
        fmt_ip(n->sb_addr, addr);
        snprintf(ip, sizeof(ip), "%s\n", addr);
        _cleanup_close_ int fd = openat(
            dirfd, NET_ADDR_FILE, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        int r = fd < 0 ? -errno : write_all(fd, ip, strlen(ip));
        return r < 0 ? sbx_error_set(err, -r, "write %s of the sandbox", NET_ADDR_FILE) : 0;
}

int net_addr_load(const char *dir, uint32_t *ret_addr)
{
        _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        char text[32];
        int r = d < 0 ? -errno : read_small_at(d, NET_ADDR_FILE, text, sizeof(text));
        if (r < 0)
                return r;
        text[strcspn(text, "\n")] = '\0';
        struct in_addr a;
        if (inet_pton(AF_INET, text, &a) != 1)
                return -EINVAL;
        *ret_addr = ntohl(a.s_addr);
        return 0;
}
