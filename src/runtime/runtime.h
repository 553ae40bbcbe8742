/* SPDX-License-Identifier: MIT */
/* The runtime: isolation drivers behind one interface. A driver's whole
 * job is to create an environment from an image with a persistent writable
 * layer, start sandbox-init as its PID 1, let the daemon dial it, and
 * freeze, thaw, stop and destroy it. Nothing above runtime/ knows how.
 *
 * A driver is a table of operations (struct rt_driver, below); the rt_*
 * calls pick one by the spec's `driver` name and call through it
 * (driver.c). The `ns` driver (namespaces + overlayfs + cgroups,
 * ns-driver.c) is built in.
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
struct ns_net_cfg;

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
        /* IPv4 networks, comma-separated, that NAT sandboxes may reach
         * although the fixed rules block them (a LAN service, a private
         * mirror); NULL or "" = none. Egress policies still apply. */
        const char *net_open_ranges;
        /* The drivers to open; NULL = the built-in ones (ns). */
        const struct rt_driver *const *drivers;
        size_t n_drivers;
        /* The gvisor driver: the runsc binary (NULL = `runsc` on PATH) and
         * its platform ("systrap", "ptrace"; NULL or "auto" = systrap). */
        const char *runsc_path;
        const char *gvisor_platform;
        const char *state_dir; /* absolute: the gvisor driver keeps runsc's state
                                  under <state_dir>/runsc */
        /* Set by rt_open for the drivers' open, whatever the caller put
         * there: the host's side of NAT (net.h), made once for every
         * driver, never NULL then. */
        const struct ns_net_cfg *net;
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
        const char *driver;   /* its driver's name (the sandbox's class, kept in
                                 its record); NULL = the first one opened */
        uint64_t id;          /* unique, never reused; names what the driver
                                 makes for it (ns: its cgroups) */
        const char *dir;      /* sandbox dir: holds upper/ work/ agent.sock; exists, 0700 */
        const char *rootfs;   /* image root (read-only lower layer) */
        const char *hostname; /* the sandbox name (cut to 64 bytes) */
        uint32_t uid_base;    /* host uid/gid that is root inside */
        uint32_t uid_count;   /* size of the mapped range, e.g. 65536 */
        struct rt_limits limits;
};

/* ---- drivers ----
 *
 * What a driver promises, whatever isolates the sandbox (ns today; a
 * gVisor/runsc driver, which boots sandbox-init in its own kernel, next):
 *  - A sandbox is named by its spec: id (unique, never reused: it names
 *    what the driver makes for it, such as the ns driver's cgroups), dir
 *    (the sandbox's own host directory; everything the driver keeps on
 *    disk for it lives there, so destroy can remove it) and the rest of
 *    the spec its start was given.
 *  - Its state lives on the host, not in the daemon: a sandbox outlives
 *    the daemon, and a daemon that starts again finds it with is_alive
 *    and dial from the spec alone.
 *  - Calls about one sandbox come one at a time (the manager holds the
 *    sandbox's lock), except dial and root: any thread, any time, also
 *    while the sandbox is frozen, stopping or stopped (they fail then).
 *  - Errors are -errno with err set; -ENOTSUP for what the driver cannot
 *    do. Optional operations are NULL; a capability bit that names one
 *    (RT_CAP_HOSTNAME, RT_CAP_CHECKPOINT) comes with it (rt_open checks). */
enum {
        RT_CAP_NAT = 1u << 0,        /* RT_NET_NAT sandboxes */
        RT_CAP_DISK_LIMIT = 1u << 1, /* limits.disk_bytes is enforced */
        RT_CAP_HOSTNAME = 1u << 2,   /* set_hostname renames a running sandbox */
        RT_CAP_AGENT_ROOT = 1u << 3, /* sandbox-init hands over an O_PATH fd of its
                                        "/" (AGENT_REQ_ROOT) on a dialled socket */
        RT_CAP_CHECKPOINT = 1u << 4, /* checkpoint and restore */
        RT_CAP_ID_SHIFT = 1u << 5,   /* the sandbox's ids are shifted: its root is host
                                        uid_base, and its files are owned by uid_base + id.
                                        Without it they are owned by the ids the sandbox
                                        uses (root is 0): its kernel is not the host's */
};

/* checkpoint flags */
enum {
        RT_CKPT_KEEP_RUNNING = 1u << 0, /* the sandbox goes on running afterwards */
};

/* One isolation driver. state is what its open() made. */
struct rt_driver {
        const char *name; /* "ns" */
        uint32_t caps;    /* RT_CAP_* */
        /* Once, before the daemon has any thread (a driver may fork a
         * helper then); cfg stays valid only during the call. */
        int (*open)(const struct rt_config *cfg, void **ret_state, struct sbx_error *err);
        /* At exit. Sandboxes keep running. */
        void (*close)(void *state);
        /* Start sandbox-init as the sandbox's first process and return once
         * it accepts a dial. ret_pid: a host pid for it (ns: sandbox-init
         * itself; a driver whose sandbox-init is no host process gives its
         * supervisor's), which the caller only passes back (set_hostname).
         * See rt_start for the rest. */
        int (*start)(void *state, const struct rt_spec *spec, pid_t *ret_pid,
                     struct sbx_error *err);
        /* Stop every process of the sandbox from running, and let them go
         * on. A frozen sandbox still counts as alive. */
        int (*freeze)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        int (*thaw)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        /* Kill every process, frozen or not, and return once they are gone
         * (is_alive false); the files stay for the next start. A sandbox
         * that does not run is fine. */
        int (*stop)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        /* stop, then remove everything the driver made for the sandbox on
         * the host, its dir included. */
        int (*destroy)(void *state, const struct rt_spec *spec, struct sbx_error *err);
        /* Whether a process of the sandbox may still run. */
        bool (*is_alive)(void *state, const struct rt_spec *spec);
        /* Whether any sandbox this driver started for this daemon instance
         * may still run (they outlive the daemon); true when it cannot
         * tell. */
        bool (*any_alive)(void *state);
        /* A connected stream socket to sandbox-init (the agent protocol,
         * agent/proto.h), O_CLOEXEC and non-blocking; -ECONNREFUSED when
         * nobody listens, -ETIMEDOUT when its backlog stays full. Cheap: a
         * call per agent request. */
        int (*dial)(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);

        /* Optional. Rename a running sandbox (RT_CAP_HOSTNAME); init_pid is
         * what its start returned. */
        int (*set_hostname)(void *state, const struct rt_spec *spec, pid_t init_pid,
                            const char *name, struct sbx_error *err);
        /* Optional. A host-side O_PATH fd of the sandbox's "/" for the file
         * endpoints, which resolve every client path under it with
         * openat2(RESOLVE_IN_ROOT) as the sandbox's root uid (inroot.h): it
         * must be the tree the sandbox sees, coherent with what its
         * processes see while they run. A driver whose sandbox keeps its
         * own view of its files (gVisor's sentry caches them) has none.
         * Without one, RT_CAP_AGENT_ROOT says whether sandbox-init hands
         * one over; with neither, files go through the agent protocol. */
        int (*root)(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);
        /* Optional (RT_CAP_CHECKPOINT), both or neither. checkpoint: save a
         * running or frozen sandbox (its processes and memory) into dir, an
         * empty directory the caller made, then stop it unless flags has
         * RT_CKPT_KEEP_RUNNING. restore: start the stopped sandbox again
         * from such a dir instead of booting it, as start does otherwise
         * (its files are the ones it had then). */
        int (*checkpoint)(void *state, const struct rt_spec *spec, const char *dir, uint32_t flags,
                          struct sbx_error *err);
        int (*restore)(void *state, const struct rt_spec *spec, const char *dir, pid_t *ret_pid,
                       struct sbx_error *err);
};

/* The ns driver (ns-driver.c): namespaces, an overlay over the image,
 * cgroups. It reads every field of struct rt_config. */
extern const struct rt_driver rt_ns_driver;
/* The gvisor driver (gvisor.c): sandbox-init on gVisor's user-space
 * kernel (runsc), one kernel per sandbox. Its open fails with -ENOTSUP,
 * saying why, on a host that cannot run it (no runsc, a runsc too old). */
extern const struct rt_driver rt_gvisor_driver;

#define RT_MAX_DRIVERS 4

/* Open the drivers: cfg->drivers (n_drivers of them), or the built-in ns
 * driver when NULL. Call once, before any thread exists. -EINVAL for a
 * driver that lacks a required operation or whose capability bits and
 * optional operations disagree. A driver whose open fails with -ENOTSUP
 * (the host cannot run it) is left out, its reason kept for
 * rt_unavailable; every other failure, or no driver left, fails rt_open. */
int rt_open(const struct rt_config *cfg, struct rt **ret, struct sbx_error *err);
void rt_close(struct rt *rt);
/* The opened driver of that name (NULL = the first); NULL when none. */
const struct rt_driver *rt_driver(const struct rt *rt, const char *name);
/* Why a driver of that name was left out ("runsc not found", ...); NULL
 * when it was opened or never asked for. */
const char *rt_unavailable(const struct rt *rt, const char *name);

/* Start a sandbox: mounts, namespaces, cgroups, then sandbox-init as PID 1.
 * Returns once its agent accepts connections. Safe to call again on a
 * stopped sandbox (same files); -EBUSY while it still runs. ret_pid: see
 * struct rt_driver.start. On failure nothing of this start is left
 * running, except after -ETIMEDOUT (30 s): then rt_stop() it to be sure.
 * spec->dir and spec->rootfs must be absolute; uid_base must not be 0, and
 * each sandbox should get its own range (RLIMIT_NPROC counts per host uid).
 * -ENOTSUP: no such driver, or it cannot give what the spec asks for. */
int rt_start(struct rt *rt, const struct rt_spec *spec, pid_t *ret_pid, struct sbx_error *err);

/* Set the hostname of a running sandbox (init_pid: what rt_start gave);
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

/* Whether any process of the sandbox may be alive (true for a sandbox of
 * a driver this daemon lacks: it cannot be known dead). */
bool rt_is_alive(struct rt *rt, const struct rt_spec *spec);
/* Whether any sandbox of this instance is, under any driver (true when it
 * cannot tell). */
bool rt_any_alive(struct rt *rt);

/* Dial the sandbox's agent (see struct rt_driver.dial). */
int rt_dial(struct rt *rt, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);
/* The driver's host-side root handle; -ENOTSUP when it has none. */
int rt_root(struct rt *rt, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err);
/* Checkpoint / restore (see struct rt_driver); -ENOTSUP when the driver
 * cannot. */
int rt_checkpoint(struct rt *rt, const struct rt_spec *spec, const char *dir, uint32_t flags,
                  struct sbx_error *err);
int rt_restore(struct rt *rt, const struct rt_spec *spec, const char *dir, pid_t *ret_pid,
               struct sbx_error *err);
/* RT_CAP_* of the spec's driver; 0 when there is no such driver. */
uint32_t rt_caps(const struct rt *rt, const struct rt_spec *spec);

/* ---- egress (egress.h, egress-nft.h) ----
 * What a NAT sandbox may reach beyond the fixed rules, and what it was
 * refused. Register every NAT sandbox once it runs (p NULL: no policy):
 * until then the instance's table gives its address nothing. A change
 * applies to new connections at once. -ENOTSUP: p needs what the sandbox
 * or the daemon lacks (network "none"; domains without the forwarder). */
struct egress_policy;
struct egress_event;
struct egress_stats;
int rt_egress_set(struct rt *rt, const struct rt_spec *spec, const struct egress_policy *p,
                  struct sbx_error *err);
/* At its destruction: its rules, sets and log go. */
void rt_egress_forget(struct rt *rt, const struct rt_spec *spec);
/* Its recent events, oldest first (none for a sandbox not registered). */
int rt_egress_log(struct rt *rt, const struct rt_spec *spec, struct egress_event *out, size_t max,
                  size_t *ret_n);
void rt_egress_stats(struct rt *rt, struct egress_stats *ret);

/* ---- images (runtime/image.c) ----
 * <images>/<name>/rootfs is an image; <images>/<name>/image.json, written
 * last, marks it complete. A build goes to a temporary dir and is renamed
 * into place, so a half-built image is never used. */
struct rt_image_info {
        char name[65];
        int64_t built_at_ms;
        uint64_t size_bytes;
        bool stale;      /* built from an older recipe than this sandboxd's */
        char source[16]; /* "built" (image build), "snapshot", an import's "oci", "docker" */
        unsigned layers; /* an import's layers (merged into rootfs/); 1 when built */
};
/* The bases a recipe may start from without an image (recipe.h): the
 * host's static busybox (`tiny`), or mmdebstrap of a Debian suite with
 * packages (comma-separated, NULL for none). Built into images_dir/name,
 * which must not exist; progress goes to stderr. */
int rt_image_bootstrap(const char *images_dir, const char *name, bool busybox, const char *suite,
                       const char *packages, struct sbx_error *err);
/* A derived image (snapshot.c; the steps of a recipe build): dst_name in
 * dst_dir made from src_name of src_dir, its files hard links to the
 * source's, then a directory made (mkdir) and a layer tar applied
 * (layer_fd, read from its start), image.json written with source,
 * recipe, build_key and config_json (a JSON object; NULL: the source's).
 * replace: an image dst_name that exists is replaced (else -EEXIST). */
struct rt_derive {
        const char *src_dir, *src_name;
        const char *dst_dir, *dst_name;
        const char *mkdir;
        int layer_fd;
        const char *source, *recipe, *build_key, *config_json;
        bool replace;
};
int rt_image_derive(const struct rt_derive *d, struct sbx_error *err);
/* A snapshot (snapshot.c): the tree beneath root_fd (a sandbox's "/",
 * whose files are owned by the image's ids + uid_shift), frozen by the
 * caller, as the new image `name` made on top of `base` (whose config it
 * keeps; its unchanged files are linked, not copied). -EEXIST when there
 * is an image of that name. */
struct rt_snapshot_stats {
        uint64_t copied_files, linked_files;
        uint64_t copied_bytes; /* what copy_file_range was asked to copy */
        uint64_t size_bytes;   /* the new image's own disk use */
        uint64_t frozen_ms;    /* with hooks: how long the second pass took */
};
/* With hooks, two passes: the tree is copied while the sandbox runs, then
 * freeze is called and what changed since the first pass (by inode, ctime,
 * size, mode and owner; anything changed within 2 s of its start) is
 * copied again, what went is removed, then thaw. freeze's error ends the
 * snapshot; thaw is called after every freeze that succeeded. Without
 * hooks, one pass: the caller has frozen the sandbox. */
struct rt_snapshot_hooks {
        int (*freeze)(void *ctx, struct sbx_error *err);
        void (*thaw)(void *ctx);
        void *ctx;
};
/* What a snapshot reads: the sandbox's "/" (root_fd, files owned by the
 * image's ids + uid_shift) and, where the host can see it, its writable
 * layer (upper_fd, else -1), whose files are read directly where they are
 * what the tree shows, so that the copy can share their blocks. */
struct rt_snapshot_src {
        int root_fd;
        int upper_fd;
        uint32_t uid_shift;
};
int rt_image_snapshot(const char *images_dir, const char *name, const char *base,
                      const struct rt_snapshot_src *src, bool ephemeral,
                      const struct rt_snapshot_hooks *hooks, struct rt_snapshot_stats *stats,
                      struct sbx_error *err);
/* The writable layer of the sandbox in sandbox_dir as the host sees it
 * (<dir>/disk/upper when its disk is mounted on the host, else <dir>/upper
 * when it has no disk), an fd; -1 when only the sandbox's own mount
 * namespace has it (an ns sandbox with a disk cap). */
int rt_upper_open(const char *sandbox_dir);
/* Remove what dead builds, imports, snapshots and removals left in the
 * images dir (the daemon does at start-up). */
void rt_image_sweep(const char *images_dir);
/* Whether name was made ephemeral (a files fork's, going with its sandbox). */
bool rt_image_ephemeral(const char *images_dir, const char *name);
/* Remove an image: it is renamed away at once (never half there for a
 * new sandbox), then its files go. -ENOENT when there is none. Whether
 * sandboxes use it is the caller's to check. */
int rt_image_remove(const char *images_dir, const char *name, struct sbx_error *err);
/* Path of a complete image's rootfs in out; -ENOENT when absent. */
int rt_image_rootfs(const char *images_dir, const char *name, char *out, size_t out_len);
/* An image's defaults for the commands run in it: image.json's "config"
 * (an imported image's OCI config: Env, WorkingDir, User, Entrypoint,
 * Cmd). Every part may be empty: a built image has none. */
struct rt_image_config {
        char **env; /* "K=V", NULL-terminated (never NULL after a load) */
        size_t envc;
        char *workdir;     /* NULL: none */
        char *user;        /* NULL: none */
        char **entrypoint; /* NULL-terminated */
        size_t n_entrypoint;
        char **cmd; /* NULL-terminated */
        size_t n_cmd;
};
/* Load name's config; an image without one gets an empty one. A config
 * whose members have the wrong types is -EINVAL (an image.json is ours,
 * but it is read as hostile anyway). */
int rt_image_config(const char *images_dir, const char *name, struct rt_image_config *ret,
                    struct sbx_error *err);
void rt_image_config_free(struct rt_image_config *c);
/* List complete images; *ret is malloc'd. */
int rt_image_list(const char *images_dir, struct rt_image_info **ret, size_t *ret_n,
                  struct sbx_error *err);

/* ---- imported images (runtime/oci.c) ----
 * An OCI image layout (a directory, or a tar of one) or a `docker save`
 * archive, flattened into <images>/<name>/rootfs: every blob checked
 * against its digest, layers applied in order with their whiteouts, the
 * image config's Env, WorkingDir, User, Entrypoint and Cmd kept in
 * image.json. Built in a .build- dir like any image: a failed or killed
 * import leaves nothing that is used. docs/images.md. */
enum rt_import_phase {
        RT_IMPORT_VERIFY,  /* the blob's digest */
        RT_IMPORT_SCAN,    /* pass 1: whiteouts, checks, diff_id */
        RT_IMPORT_EXTRACT, /* pass 2: the files */
        RT_IMPORT_DONE,    /* the layer is applied */
};
struct rt_import_progress {
        unsigned layer, layers; /* 1-based; 0 while the archive is unpacked */
        const char *digest;     /* "sha256:..." */
        enum rt_import_phase phase;
        uint64_t done, total; /* bytes of the blob read in this phase, its size */
        uint64_t unpacked;    /* uncompressed bytes of the layer so far */
};
struct rt_import_opts {
        bool force;        /* replace an image of that name */
        bool no_setuid;    /* refuse setuid/setgid files */
        uint64_t max_size; /* cap on the uncompressed size of all layers; 0: 32 GiB */
        void (*progress)(void *ctx, const struct rt_import_progress *p);
        void *ctx;
};
#define RT_IMPORT_MAX_SIZE_DEFAULT (32ull << 30)
#define RT_IMPORT_LAYERS_MAX 128
/* Import `file` as image `name`; its disk use in *ret_size. */
int rt_image_import(const char *images_dir, const char *name, const char *file,
                    const struct rt_import_opts *o, uint64_t *ret_size, struct sbx_error *err);
