/* SPDX-License-Identifier: MIT */
/* The runtime: isolation drivers behind one interface. A driver's whole
 * job is to create an environment from an image with a persistent writable
 * layer, start sandbox-init as its PID 1, let the daemon dial it, and
 * freeze, thaw, stop and destroy it. Nothing above runtime/ knows how.
 *
 * A driver is a table of operations (struct rt_driver); the rt_* calls
 * below pick one by the spec's `driver` name and call through it. The `ns`
 * driver (namespaces + overlayfs + cgroups, zygote.c) is built in.
 *
 * Threads: rt_open() opens every driver; the ns driver forks a
 * single-threaded helper (the "zygote"), so rt_open must be called before
 * the daemon starts any thread. Every clone() with namespace flags happens
 * in a child of that helper, never in the threaded daemon. All other
 * functions are thread-safe.
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
        /* The drivers to open; NULL = the built-in ones (ns). */
        const struct rt_driver *const *drivers;
        size_t n_drivers;
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
        const char *driver;   /* its driver's name; NULL = the first one opened */
        uint64_t id;          /* unique, never reused; names the cgroup */
        const char *dir;      /* sandbox dir: holds upper/ work/ agent.sock; exists, 0700 */
        const char *rootfs;   /* image root (read-only lower layer) */
        const char *hostname; /* the sandbox name (cut to 64 bytes) */
        uint32_t uid_base;    /* host uid/gid that is root inside */
        uint32_t uid_count;   /* size of the mapped range, e.g. 65536 */
        struct rt_limits limits;
};

/* ---- drivers ---- */
enum {
        RT_CAP_NAT = 1u << 0,        /* RT_NET_NAT sandboxes */
        RT_CAP_DISK_LIMIT = 1u << 1, /* limits.disk_bytes is enforced */
        RT_CAP_HOSTNAME = 1u << 2,   /* set_hostname renames a running sandbox */
        RT_CAP_AGENT_ROOT = 1u << 3, /* sandbox-init hands over an O_PATH fd of its
                                        "/" (AGENT_REQ_ROOT) on a dialled socket */
};

/* One isolation driver. state is what its open() made. Every operation
 * but open/close/any_alive is about one sandbox, named by its spec (the
 * same spec its start was given: id and dir at least). Errors are -errno
 * with err set. Optional operations are NULL. */
struct rt_driver {
        const char *name; /* "ns" */
        uint32_t caps;    /* RT_CAP_* */
        int (*open)(const struct rt_config *cfg, void **ret_state, struct sbx_error *err);
        void (*close)(void *state);
        /* Start sandbox-init as PID 1 and return once it accepts a dial
         * (see rt_start). */
        int (*start)(void *state, const struct rt_spec *spec, pid_t *ret_pid,
                     struct sbx_error *err);
        int (*freeze)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        int (*thaw)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        int (*stop)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        int (*destroy)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        bool (*is_alive)(void *state, const struct rt_spec *spec);
        bool (*any_alive)(void *state);
        /* A connected stream socket to sandbox-init (agent protocol),
         * O_CLOEXEC and non-blocking; -ECONNREFUSED when nobody listens. */
        int (*dial)(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);
        /* Optional. */
        int (*set_hostname)(void *state, const struct rt_spec *spec, pid_t init_pid,
                            const char *name, struct sbx_error *err);
        /* A host-side O_PATH fd of the sandbox's "/", for the file
         * endpoints. NULL: none (then RT_CAP_AGENT_ROOT says whether the
         * agent hands one over). */
        int (*root)(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);
        /* Save a stopped sandbox's state to / restore it from a directory. */
        int (*checkpoint)(void *state, const struct rt_spec *spec, const char *to,
                          struct sbx_error *err);
        int (*restore)(void *state, const struct rt_spec *spec, const char *from, pid_t *ret_pid,
                       struct sbx_error *err);
};

extern const struct rt_driver rt_ns_driver;

#define RT_MAX_DRIVERS 4

/* Open the drivers: cfg->drivers (n_drivers of them), or the built-in ns
 * driver when NULL. Call once, before any thread exists. */
int rt_open(const struct rt_config *cfg, struct rt **ret, struct sbx_error *err);
void rt_close(struct rt *rt);
/* The opened driver of that name (NULL = the first); NULL when none. */
const struct rt_driver *rt_driver(const struct rt *rt, const char *name);

/* Start a sandbox: mounts, namespaces, cgroups, then sandbox-init as PID 1.
 * Returns once its agent accepts connections. Safe to call again on a
 * stopped sandbox (same files); -EBUSY while it still runs. ret_pid: host
 * pid of sandbox-init. On failure nothing of this start is left running,
 * except after -ETIMEDOUT (30 s): then rt_stop() it to be sure.
 * spec->dir and spec->rootfs must be absolute; uid_base must not be 0, and
 * each sandbox should get its own range (RLIMIT_NPROC counts per host uid).
 * -ENOTSUP: no such driver, or it cannot give what the spec asks for. */
int rt_start(struct rt *rt, const struct rt_spec *spec, pid_t *ret_pid, struct sbx_error *err);

/* Set the hostname of a running sandbox (its sandbox-init's host pid);
 * -ENOTSUP when its driver cannot. */
int rt_set_hostname(struct rt *rt, const struct rt_spec *spec, pid_t init_pid, const char *name,
                    struct sbx_error *err);

/* Freeze / thaw every process of the sandbox. */
int rt_freeze(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err);
int rt_thaw(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err);

/* Kill every process of the sandbox, frozen or not, and wait until they
 * are gone. The files stay. */
int rt_stop(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err);

/* rt_stop, then remove what the driver made for it and the sandbox dir
 * (upper layer and all), never following a symlink or crossing a mount. */
int rt_destroy(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err);

/* Whether any process of the sandbox is alive. */
bool rt_is_alive(struct rt *rt, const struct rt_spec *spec);
/* Whether any sandbox of this instance is, under any driver (true when it
 * cannot tell). */
bool rt_any_alive(struct rt *rt);

/* Dial the sandbox's agent (see struct rt_driver.dial). */
int rt_dial(struct rt *rt, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);
/* The driver's host-side root handle; -ENOTSUP when it has none. */
int rt_root(struct rt *rt, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);
/* RT_CAP_* of the spec's driver; 0 when there is no such driver. */
uint32_t rt_caps(const struct rt *rt, const struct rt_spec *spec);

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
