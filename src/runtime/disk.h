/* SPDX-License-Identifier: MIT */
/* The disk cap of the ns driver (disk.c): the writable layer on a
 * loop-mounted ext4 image, made at a sandbox's first start. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../common/util.h"
#include "runtime.h"

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
