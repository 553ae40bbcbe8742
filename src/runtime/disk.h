/* SPDX-License-Identifier: MIT */
/* The disk cap of the ns driver (disk.c): the writable layer on a
 * loop-mounted ext4 image, made at a sandbox's first start. */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"
#include "runtime.h"

struct ns_disk {
        bool active;  /* false: a plain upper/ directory on the host fs */
        int loop_fd;  /* held until the mounter has mounted it */
        char dev[32]; /* /dev/loopN */
};

/* In the launcher (host mount ns): make the image on first use (taking
 * one of the spares of `driver`, the driver starting it) and attach it to
 * a loop device; disk->active false when the sandbox has no cap. */
int disk_prepare(int dirfd, const struct rt_spec *spec, const char *driver, struct ns_disk *disk,
                 struct sbx_error *err);
void disk_release(struct ns_disk *disk);

#define DISK_SPARE_SIZES 4 /* disk sizes kept spare images of */

/* Spare images (<sandboxes>/.disk-spare-<driver>), made ahead of the
 * starts that take them by a thread of the driver's, in a directory of
 * its own: after a start with a disk of a size, disk_spares_note has that
 * size's spares topped up. Spares of sizes no start of this daemon's
 * driver has used are removed, from that driver's directory only. */
struct disk_spares {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t thread;
        bool running, stop, dirty;
        const char *driver; /* the driver's name (static) */
        char dir[PATH_MAX]; /* the sandboxes dir */
        uint64_t sizes[DISK_SPARE_SIZES];
        size_t n_sizes;
};

void disk_spares_init(struct disk_spares *sp, const char *driver);
void disk_spares_note(struct disk_spares *sp, const struct rt_spec *spec);
void disk_spares_stop(struct disk_spares *sp);
/* In the mounter (sandbox mount ns): mount it on <dirfd>/disk, with
 * upper/ and work/ owned by uid. */
int disk_mount(const struct ns_disk *disk, int dirfd, uint32_t uid, struct sbx_error *err);
