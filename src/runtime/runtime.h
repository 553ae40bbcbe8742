/* SPDX-License-Identifier: MIT */
/* The runtime: isolation drivers behind one interface. A driver's whole
 * job is to create an environment from an image with a persistent writable
 * layer, start sandbox-init as its PID 1 listening on <dir>/agent.sock,
 * and freeze, thaw, stop and destroy it. Nothing above runtime/ knows how.
 *
 * Only the ns driver exists today (namespaces + overlayfs + cgroups).
 *
 * Threads: rt_open() forks a single-threaded helper (the "zygote") and must
 * be called before the daemon starts any thread. Every clone() with
 * namespace flags happens in a child of that helper, never in the threaded
 * daemon. All other functions are thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/util.h"

struct rt;

/* ---- the instance's host-wide ranges (runtime/claim.c) ----
 * A daemon instance is named by <state>/instance-id (16 hex digits); its
 * cgroups, nftables table and veth names carry it. Its uid range and NAT
 * range are claimed in a registry shared by every sandboxd of the host, for
 * as long as it runs: see claim.c. */
#define RT_INSTANCE_LEN 16
#define RT_TAG_LEN 6 /* digits of the instance id in its veth names */
#define RT_REGISTRY "/run/sandboxd/instances"

struct rt_claim_want {
        const char *registry;  /* NULL = RT_REGISTRY */
        const char *state_dir; /* absolute */
        const char *instance;  /* RT_INSTANCE_LEN hex digits */
        int64_t uid_base;      /* -1 = auto */
        uint32_t uid_count;    /* ids claimed from uid_base on */
        const char *net_range; /* NULL = no network; "auto" = pick one */
        uint32_t net_slots;    /* /30s an auto net_range holds */
};
struct rt_claim {
        int fd; /* the locked registry entry, -1 = none */
        char instance[RT_INSTANCE_LEN + 1];
        char registry[128];
        uint32_t uid_base, uid_count;
        char net_range[20]; /* "" = none claimed */
};
/* Claim the ranges, refusing with EADDRINUSE what a live instance holds and
 * with EBUSY a second daemon on the same state dir; the effective ranges are
 * kept in <state>/ranges. Hold the claim for the daemon's life. */
int rt_claim_take(const struct rt_claim_want *w, struct rt_claim *ret, struct sbx_error *err);
/* Let it go; drop: also remove the entry (nothing of the instance runs). */
void rt_claim_release(struct rt_claim *c, bool drop);

struct rt_config {
        const char *init_path;   /* host path of the static sandbox-init binary */
        const char *cgroup_root; /* cgroup parent name, e.g. "sandboxd" */
        const char *instance;    /* RT_INSTANCE_LEN hex digits: names the nftables
                                    table and the veth pairs (needed with net_range) */
        /* NAT networking; NULL = no sandbox may have RT_NET_NAT, and the host's
         * network configuration is left alone. Otherwise rt_open installs the
         * nftables table `inet sandboxd-<instance>` and turns ip_forward on;
         * rt_close removes the table when no NAT sandbox is left. */
        const char *net_range;    /* IPv4 CIDR split into one /30 per sandbox */
        const char *dns;          /* comma-separated nameservers for NAT sandboxes'
                                     /etc/resolv.conf; NULL or "" = the host's public
                                     ones, else the daemon's forwarder (dns_port) */
        int32_t dns_port;         /* port of the DNS forwarder; 0 = none, -1 = any free */
        const char *dns_upstream; /* where it forwards; NULL or "" = the host's
                                     own nameservers */
};

enum rt_network {
        RT_NET_NONE = 0, /* loopback only */
        RT_NET_NAT = 1,  /* a veth pair, NAT to the outside (rt_config.net_range) */
};

/* Resource limits and network policy of a sandbox; 0 = unlimited / not
 * set / no network. */
struct rt_limits {
        uint64_t memory_bytes;
        uint64_t pids;
        uint64_t cpu_shares; /* relative weight, 1024 = one default share */
        uint64_t tmp_bytes;  /* /tmp tmpfs size */
        uint64_t disk_bytes; /* writable layer cap (ext4 image), >= 16 MiB; taken at the
                                sandbox's first start and kept */
        uint32_t network;    /* enum rt_network */
        uint32_t nofile;     /* RLIMIT_NOFILE of every workload process, soft = hard */
};

struct rt_spec {
        uint64_t id;          /* unique, never reused; names the cgroup */
        const char *dir;      /* sandbox dir: holds upper/ work/ agent.sock; exists, 0700 */
        const char *rootfs;   /* image root (read-only lower layer) */
        const char *hostname; /* the sandbox name (cut to 64 bytes) */
        uint32_t uid_base;    /* host uid/gid that is root inside */
        uint32_t uid_count;   /* size of the mapped range, e.g. 65536 */
        struct rt_limits limits;
};

/* Fork the zygote. Call once, before any thread exists. */
int rt_open(const struct rt_config *cfg, struct rt **ret, struct sbx_error *err);
void rt_close(struct rt *rt);

/* Start a sandbox: mounts, namespaces, cgroups, then sandbox-init as PID 1.
 * Returns once <dir>/agent.sock accepts connections. Safe to call again on
 * a stopped sandbox (same files); -EBUSY while it still runs. ret_pid: host
 * pid of sandbox-init. On failure nothing of this start is left running,
 * except after -ETIMEDOUT (30 s): then rt_stop() it to be sure.
 * spec->dir and spec->rootfs must be absolute; uid_base must not be 0, and
 * each sandbox should get its own range (RLIMIT_NPROC counts per host uid). */
int rt_start(struct rt *rt, const struct rt_spec *spec, pid_t *ret_pid, struct sbx_error *err);

/* Set the hostname of a running sandbox (its sandbox-init's host pid). */
int rt_set_hostname(pid_t init_pid, const char *name, struct sbx_error *err);

/* Freeze / thaw every process of the sandbox (cgroup freezer). */
int rt_freeze(struct rt *rt, uint64_t id, struct sbx_error *err);
int rt_thaw(struct rt *rt, uint64_t id, struct sbx_error *err);

/* Kill every process of the sandbox, frozen or not, and wait until its
 * cgroup is empty. The files stay. */
int rt_stop(struct rt *rt, uint64_t id, struct sbx_error *err);

/* rt_stop, then remove the cgroups and the sandbox dir (upper layer and
 * all), never following a symlink or crossing a mount. */
int rt_destroy(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err);

/* Whether any process of the sandbox is alive (its cgroup is populated). */
bool rt_is_alive(struct rt *rt, uint64_t id);
/* Whether any sandbox of this instance is (true when it cannot tell). */
bool rt_any_alive(struct rt *rt);

/* ---- images (runtime/image.c) ----
 * <images>/<name>/rootfs is an image; <images>/<name>/image.json, written
 * last, marks it complete. A build goes to a temporary dir and is renamed
 * into place, so a half-built image is never used. */
struct rt_image_info {
        char name[65];
        int64_t built_at_ms;
        uint64_t size_bytes;
};
/* Build `name` ("debian" or "tiny"); progress lines go to stderr.
 * force: rebuild even if present. */
int rt_image_build(const char *images_dir, const char *name, bool force, struct sbx_error *err);
/* Path of a complete image's rootfs in out; -ENOENT when absent. */
int rt_image_rootfs(const char *images_dir, const char *name, char *out, size_t out_len);
/* List complete images; *ret is malloc'd. */
int rt_image_list(const char *images_dir, struct rt_image_info **ret, size_t *ret_n,
                  struct sbx_error *err);
