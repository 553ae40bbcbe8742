/* SPDX-License-Identifier: MIT */
/* The gvisor driver's parts (internal to runtime/): the OCI bundle it
 * hands runsc (gvisor-spec.c) and the host side of a sandbox's files
 * (gvisor-host.c). The driver itself, its runsc calls and its ops table
 * are in gvisor.c.
 *
 * A gvisor sandbox on the host, in its dir:
 *   bundle/config.json  the OCI spec runsc boots
 *   agent/agent.sock    sandbox-init's listener, made by runsc
 *                       (--host-uds=create); inside it is /.sbx/agent
 *   upper/ work/        the writable layer (or disk/upper, disk/work on
 *                       the loop-mounted ext4 image of the disk cap)
 *   root/               the overlay (image below, upper above), mounted on
 *                       the host while the sandbox runs: runsc's rootfs
 *                       (--file-access=shared) and the file endpoints' root
 *   root/tmp            a tmpfs of limits.tmp_bytes, bound at /tmp
 *   runsc.log           runsc's own messages of the last start
 * Files are owned by the ids the sandbox uses (root is 0): gVisor is the
 * sandbox's kernel, its processes never run as host processes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../common/util.h"
#include "net.h"
#include "runtime.h"

/* Where sandbox-init and its socket directory appear inside. */
#define GV_INIT_PATH "/.sbx/sandbox-init"
#define GV_AGENT_DIR "/.sbx/agent"
#define GV_AGENT_SOCK "agent.sock"

/* The sandbox's first (and the guard's) process budget: the sentry's own
 * threads and one systrap stub per workload process count against the host
 * cgroup's pids.max, so the host limit leaves room above the sandbox's. */
#define GV_HOST_PIDS(limit) ((limit) ? 2 * (limit) + 128 : 0)

struct gv_bundle {
        const struct rt_spec *spec;
        const char *init_path; /* host path of sandbox-init */
        const char *netns;     /* host path of the sandbox's netns, NULL = none */
        bool resolv;           /* bind <dir>/resolv.conf at /etc/resolv.conf */
};

/* Write <dir>/bundle/config.json for a start. */
int gv_bundle_write(int dirfd, const struct gv_bundle *b, struct sbx_error *err);

/* Mount the sandbox's files on the host (see above), after unmounting
 * whatever an earlier run left mounted. */
int gv_host_mount(int dirfd, const struct rt_spec *spec, struct sbx_error *err);
/* Unmount them (root/tmp, root, disk); what is not mounted is fine. */
int gv_host_unmount(int dirfd, struct sbx_error *err);
/* NAT (gvisor-net.c): a network namespace pinned on <dir>/netns with the
 * sandbox's end of a veth pair (net.c) configured in it, and
 * <dir>/resolv.conf with cfg's nameservers (*ret_resolv: the image has a
 * plain /etc/resolv.conf to bind it on). After gv_host_mount. */
int gv_net_up(const struct ns_net_cfg *cfg, int dirfd, const struct rt_spec *spec, bool *ret_resolv,
              struct sbx_error *err);
/* Unpin it: the namespace and its veth go with the sandbox's last user. */
void gv_net_down(int dirfd);

/* A checkpoint's copy of the sandbox's files (gvisor-ckpt.c): its /tmp,
 * taken while the host still has it mounted, and its writable layer, taken
 * once nothing is mounted; put back in the opposite order. */
enum gv_ckpt_part { GV_CKPT_TMP, GV_CKPT_LAYER };
int gv_ckpt_save(const struct rt_spec *spec, const char *ckpt, enum gv_ckpt_part part,
                 struct sbx_error *err);
int gv_ckpt_load(const struct rt_spec *spec, const char *ckpt, enum gv_ckpt_part part,
                 struct sbx_error *err);

/* An O_PATH fd of <dir>/root while it is the mounted overlay; -ESTALE
 * when the sandbox's files are not mounted (it does not run). */
int gv_host_root(int dirfd, int *ret_fd, struct sbx_error *err);
