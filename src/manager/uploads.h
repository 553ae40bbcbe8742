/* SPDX-License-Identifier: MIT */
/* Records of uploads in progress, so that a daemon killed in the middle
 * of one leaves no temporary file behind in the sandbox for good.
 *
 * An upload streams into `<dir>/.sandboxd-upload-<random>` inside the
 * sandbox and renames it over the target at the end. Before that file is
 * created, a record `<sandbox dir>/uploads/<name>` on the host names the
 * run of the daemon and the directory inside the sandbox; it is removed
 * once the file is renamed or removed. When a sandbox comes up (the
 * daemon's start-up finds its agent alive, or the sandbox is started or
 * resumed), records of earlier runs are swept: their files are removed
 * from the sandbox, then the records. The sandbox never sees a record. */
#pragma once

#include <stdint.h>

/* Note an upload's temporary `name` in directory `dir` (absolute, inside
 * the sandbox) for run `run`. -EEXIST if that name is noted already. */
int uploads_note(const char *sandbox_dir, uint64_t run, const char *dir, const char *name);
void uploads_done(const char *sandbox_dir, const char *name);
/* Remove what runs other than `run` left behind; sandbox-init must be
 * running (its root handle is asked for only when there is a record).
 * Returns how many temporary files were removed, or -errno. */
int uploads_sweep(const char *sandbox_dir, uint64_t run, uint32_t uid,
                  int (*get_root)(void *ctx, int *ret_fd), void *ctx);
