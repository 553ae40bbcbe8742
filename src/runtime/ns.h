/* SPDX-License-Identifier: MIT */
/* Internals of the ns driver shared by zygote.c, ns.c and seccomp.c. */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/util.h"
#include "cgroup.h"
#include "runtime.h"

/* The compiled seccomp policy: two stacked filters. The kernel applies the
 * most restrictive answer of all loaded filters, which lets an allowlist
 * (default EPERM) sit next to a few argument-based denials that libseccomp
 * cannot express in the same filter as an unconditional allow. */
struct rt_seccomp {
        struct sock_fprog allow; /* allowlist, default EPERM, bad arch kills */
        struct sock_fprog deny;  /* default allow; argument-filtered denials */
};

/* Compile the policy (in the daemon, once, before the zygote forks). */
int rt_seccomp_build(struct rt_seccomp *ret, struct sbx_error *err);
void rt_seccomp_free(struct rt_seccomp *s);
/* Load it into the calling thread: the last step before execve; needs
 * no_new_privs (or CAP_SYS_ADMIN). 0 or -errno. */
int rt_seccomp_load(const struct rt_seccomp *s);

/* "a.b.c.d/len" (len 8..30, no host bits) -> base (host order), len. */
int net_parse_cidr(const char *s, uint32_t *ret_base, unsigned *ret_len);

/* NAT networking (net.c), configured once by rt_open. */
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
/* Then (with cfg->dns_port set when forwarding): turn on forwarding and
 * install (or replace) the instance's nftables table. */
int net_host_install(struct ns_net_cfg *cfg, struct sbx_error *err);
/* At exit, when no sandbox of the instance runs (they outlive the daemon
 * and need the table): remove the instance's table. A pair whose sandbox
 * is gone may linger a moment; nothing passes through it. */
int net_host_remove(const struct ns_net_cfg *cfg, struct sbx_error *err);

/* The DNS forwarder (dns.c), a thread of the daemon: relays queries that
 * NAT sandboxes send to the first address of their range (redirected to
 * its port by the nftables table) to `upstream` ("a,b:port"; NULL or "" =
 * the host's own nameservers). Opened (sockets bound; port 0 = any free
 * one, *ret_port says which) before the table is installed, started (the
 * thread) once the zygote is forked. */
struct dns_forwarder;
int dns_forwarder_open(uint16_t port, struct dns_forwarder **ret, uint16_t *ret_port,
                       struct sbx_error *err);
int dns_forwarder_start(struct dns_forwarder *f, const struct ns_net_cfg *net, const char *upstream,
                        struct sbx_error *err);
void dns_forwarder_stop(struct dns_forwarder *f);
/* In the launcher, in the host netns: the pair, its peer moved into the
 * namespace of netns_fd as eth0. hint: preferred /30 index. */
int net_veth_create(const struct ns_net_cfg *cfg, uint32_t hint, int netns_fd, struct ns_net *ret,
                    struct sbx_error *err);
/* In the launcher, after entering the sandbox's netns: address eth0 and
 * route through the host end. */
int net_sandbox_setup(const struct ns_net *n, struct sbx_error *err);

/* What every launcher inherits from the zygote. */
struct ns_ctx {
        struct cg_layout cg;
        int init_memfd; /* sealed copy of sandbox-init */
        struct rt_seccomp seccomp;
        struct ns_net_cfg net;
};

/* The disk cap (disk.c): the writable layer on a loop-mounted ext4 image. */
struct ns_disk {
        bool active;  /* false: a plain upper/ directory on the host fs */
        int loop_fd;  /* held until the mounter has mounted it */
        char dev[32]; /* /dev/loopN */
};
/* In the launcher (host mount ns): make the image on first use and attach
 * it to a loop device; disk->active false when the sandbox has no cap. */
int disk_prepare(int dirfd, const struct rt_spec *spec, struct ns_disk *disk,
                 struct sbx_error *err);
void disk_release(struct ns_disk *disk);
/* In the mounter (sandbox mount ns): mount it on <dirfd>/disk, with
 * upper/ and work/ owned by uid. */
int disk_mount(const struct ns_disk *disk, int dirfd, uint32_t uid, struct sbx_error *err);

/* Launch one sandbox (runs in a launcher: a single-threaded, forked child
 * of the zygote, as host root). On success ret_pid is the host pid of
 * sandbox-init, already exec'd and listening on <dir>/agent.sock. */
int ns_launch(const struct ns_ctx *ctx, const struct rt_spec *spec, pid_t *ret_pid,
              struct sbx_error *err);

/* Checks a spec before it crosses to the zygote; 0 or -EINVAL with err. */
int ns_spec_check(const struct rt_spec *spec, struct sbx_error *err);

/* hostname.c: rt_ns_driver.set_hostname. */
int ns_set_hostname(void *state, const struct rt_spec *spec, pid_t init_pid, const char *name,
                    struct sbx_error *err);
