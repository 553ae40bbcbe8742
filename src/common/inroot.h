/* SPDX-License-Identifier: MIT */
/* Paths inside a sandbox, resolved from a handle of its root.
 *
 * The daemon works on a sandbox's files from the host, through an O_PATH
 * descriptor of the sandbox's "/" that its agent passes. Every path is
 * resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): `..`
 * and absolute symlinks stop at the sandbox's root, and /proc/<pid>/root
 * style jumps are refused (CVE-2019-5736 class). File operations run with
 * the thread's fsuid/fsgid set to the host uid that is root inside, so
 * they have the sandbox's permissions, not the daemon's, and create files
 * the sandbox owns. Only regular files and directories on the sandbox's
 * own filesystems (its overlay, its tmpfs mounts) are touched. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest path a client may name (the kernel's PATH_MAX, with room for the
 * "/workspace/" a relative path is resolved against). */
#define INROOT_PATH_MAX 4096

/* Act as the sandbox's root for file operations on this thread only:
 * fsuid/fsgid are per thread, and a non-zero fsuid drops the fs
 * capabilities (DAC override, fowner, ...) from the effective set. */
void inroot_become(uint32_t uid);
void inroot_unbecome(void);

/* Normalize a client's path into an absolute one: relative to
 * /workspace, repeated slashes and "." components dropped, a trailing
 * slash removed; ".." is kept (the kernel resolves it inside the root).
 * -EINVAL for an empty path or one with a NUL, -ENAMETOOLONG past
 * INROOT_PATH_MAX or for a component over NAME_MAX. */
int inroot_normalize(const char *path, char *out, size_t out_len);

/* Open an absolute path (normalized) inside the root. -errno. */
int inroot_open(int rootfd, const char *path, uint64_t flags, int mode);

/* 0 if fd is on the sandbox's own files (overlay or tmpfs) and is a
 * directory (want_dir) or a regular file; -EPERM, -ENOTDIR or -EISDIR. */
int inroot_check_fs(int fd, bool want_dir);

/* Open directory `dir` (normalized, absolute) inside the root, creating
 * what is missing as the caller's fsuid with mode 0755. Iterative: any
 * depth the path length allows. A directory created here is entered with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, so a symlink planted in its place
 * meanwhile cannot lead anywhere; ".." is resolved again from the root. */
int inroot_mkdirs(int rootfd, const char *dir);

/* Split a normalized absolute path into its directory and last component.
 * -EINVAL for "/" (no name). */
int inroot_split(const char *path, char *dir, size_t dir_len, char *base, size_t base_len);
