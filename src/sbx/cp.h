/* SPDX-License-Identifier: MIT */
/* sbx cp's parts: one file each way (cmd-cp.c), whole trees as a tar
 * stream (cp-tree.c). */
#pragma once

#include "sbx.h"

/* One file between local and sandbox; the exit code for sbx. */
int sbx_cp_put(struct sbx_ctx *ctx, const char *local, const char *name, const char *path);
/* A download lands in a temporary file next to `local`, renamed when whole. */
int sbx_cp_get(struct sbx_ctx *ctx, const char *name, const char *path, const char *local);

/* Trees: a local directory into the sandbox's `path` (made), and a sandbox
 * directory into the local `local` (made). */
int sbx_cp_put_tree(struct sbx_ctx *ctx, const char *local, const char *name, const char *path);
int sbx_cp_get_tree(struct sbx_ctx *ctx, const char *name, const char *path, const char *local);
