/* SPDX-License-Identifier: MIT */
/* The ns driver's mounts (mount.c), made by the mounter: a child of the
 * launcher that has entered the sandbox's mount, net and pid namespaces
 * (so its /proc and /sys are the sandbox's), never the host's. */
#pragma once

#include "../common/util.h"
#include "disk.h"
#include "runtime.h"

/* The host device nodes a sandbox gets, as /dev/<name>. */
#define NS_DEV_NODES 6
extern const char *const ns_dev_nodes[NS_DEV_NODES];

/* What the mounts are made of. */
struct ns_mounts {
        const struct rt_spec *spec;
        int tree_fd;                /* the idmapped, read-only image (detached) */
        const int *dev_fd;          /* clones of the host's ns_dev_nodes, in order */
        const struct ns_disk *disk; /* the capped writable layer, if active */
        const char *resolv;         /* a read-only /etc/resolv.conf; NULL: the image's */
};

/* Make / private, then, on <dir>/rootfs: the overlay (image, upper layer),
 * /dev, /proc with its masked and read-only paths, /sys, /tmp, the NAT
 * resolv.conf, /workspace. */
int ns_mount_all(const struct ns_mounts *m, struct sbx_error *err);
