/* SPDX-License-Identifier: MIT */
/* What image.c (built images) and oci.c (imported images) share: the
 * build dir's life (made, renamed into place, or removed; leftovers of
 * dead builds swept), image.json, and the size of a rootfs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/util.h"

#define IMG_JSON "image.json"
/* The largest image.json read or written (an imported image keeps its
 * config in it). */
#define IMG_JSON_MAX (1u << 20)

/* Create `name` in dfd with exactly this mode (not the umask's). */
int img_mkdir_mode(int dfd, const char *name, mode_t mode);
/* Write a whole file in dfd (never through a symlink), fsync'd. */
int img_write_file_at(int dfd, const char *name, const void *data, size_t len, mode_t mode);
/* Remove .build-<name>-<pid> / .old-<name>-<pid> dirs whose process is
 * gone; name NULL: those of every name. ours: ours too (a process that
 * knows it is building nothing else, whose pid a dead one may have had);
 * never in the daemon, where another thread may be building. */
void img_remove_leftovers(int imgfd, const char *name, bool ours);
/* Whether <images>/<name>/image.json exists. */
bool img_complete(int imgfd, const char *name);
/* Make <images>/.build-<name>-<pid>: its name in build (>= 128 bytes) and
 * an fd of it. */
int img_build_dir(int imgfd, const char *name, char build[128], int *ret_fd, struct sbx_error *err);
/* Move the build dir into place as `name` (what was there goes). */
int img_install_build(int imgfd, const char *build, const char *name, struct sbx_error *err);
/* Disk use of bfd's rootfs/; 0 when it cannot be measured. */
uint64_t img_rootfs_size(int bfd);
