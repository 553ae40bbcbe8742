/* SPDX-License-Identifier: MIT */
/* NAT networking of the ns driver (net.c): the instance's nftables table
 * and IPv4 forwarding on the host, a veth pair per RT_NET_NAT sandbox. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../common/util.h"

/* "a.b.c.d/len" (len 8..30, no host bits) -> base (host order), len. */
int net_parse_cidr(const char *s, uint32_t *ret_base, unsigned *ret_len);

/* The host's side, configured once by rt_open. */
struct ns_net_cfg {
        bool enabled;  /* the host is set up for RT_NET_NAT */
        uint32_t base; /* the range, host byte order */
        unsigned prefix;
        uint32_t slots;    /* /30s in the range */
        char resolv[256];  /* resolv.conf for NAT sandboxes; "" = keep the image's */
        bool forward;      /* the daemon forwards DNS (a forwarder must be bound) */
        uint16_t dns_port; /* != 0: DNS to the range's first address goes to the forwarder here */
        char table[40];    /* the instance's nftables table, "sandboxd-<instance>" */
        char ifprefix[12]; /* host ends of its veth pairs: <ifprefix><N> */
        char open4[1024];  /* nft elements of net_open_ranges, "a/n, b/m"; "" = none */
};
/* One sandbox's veth pair. */
struct ns_net {
        bool active;
        char host_if[16];            /* <ifprefix><N> */
        uint32_t host_addr, sb_addr; /* host byte order */
};

/* In rt_open (single-threaded): validate the range and decide the
 * sandboxes' resolv.conf; ret->forward when the daemon must forward DNS
 * (forwarder: one may run). range NULL: NAT stays off, nothing changes. */
int net_host_plan(const char *range, const char *instance, const char *dns, bool forwarder,
                  bool force_forward, struct ns_net_cfg *ret, struct sbx_error *err);
/* The operator's opt-in (rt_config.net_open_ranges, "a/n,b/m") into
 * ret->open4; -EINVAL naming a bad network. */
int net_open_ranges(const char *list, struct ns_net_cfg *ret, struct sbx_error *err);
/* Then (with cfg->dns_port set when forwarding): turn on forwarding and
 * install (or replace) the instance's nftables table. */
int net_host_install(struct ns_net_cfg *cfg, struct sbx_error *err);
/* At exit, when no sandbox of the instance runs (they outlive the daemon
 * and need the table): remove the instance's table. A pair whose sandbox
 * is gone may linger a moment; nothing passes through it. */
int net_host_remove(const struct ns_net_cfg *cfg, struct sbx_error *err);

/* In the launcher, in the host netns: the pair, its peer moved into the
 * namespace of netns_fd as eth0. hint: preferred /30 index. */
int net_veth_create(const struct ns_net_cfg *cfg, uint32_t hint, int netns_fd, struct ns_net *ret,
                    struct sbx_error *err);
/* In the launcher, after entering the sandbox's netns: address eth0 and
 * route through the host end. */
int net_sandbox_setup(const struct ns_net *n, struct sbx_error *err);
/* In a sandbox's netns: loopback up (a runtime that takes the namespace's
 * interfaces over, gVisor's, makes its own lo only from an up one). */
int net_loopback_up(struct sbx_error *err);

/* Run `nft -f -` with rules (about the instance's table): 0 or -errno with
 * err saying what nft said. */
int net_run_nft(const char *table, const char *rules, struct sbx_error *err);

/* The sandbox's address, kept in <dir>/NET_ADDR_FILE by whoever made its
 * veth pair (written once it has one), read by the daemon to tell its
 * packets and DNS queries apart from another's. */
#define NET_ADDR_FILE "net-addr"
int net_addr_save(int dirfd, const struct ns_net *n, struct sbx_error *err);
/* -ENOENT: the sandbox has no NAT address (yet). */
int net_addr_load(const char *dir, uint32_t *ret_addr);
