/* SPDX-License-Identifier: MIT */
/* Private to the OCI import (oci.c, oci-layer.c, oci-path.c).
 *
 * oci.c reads what an archive says (index, manifest, config), checks each
 * blob against its digest and drives the import; oci-layer.c applies one
 * layer tar to a tree; oci-path.c resolves an entry's path beneath the
 * tree. Every byte of the archive is hostile. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../common/util.h"
#include "runtime.h"

#define OCI_SHA256_LEN 32
#define OCI_DIGEST_MAX 72 /* "sha256:" + 64 hex + NUL */

/* How a tar is applied to the tree. A later change keeps layers apart:
 * OCI_APPLY_LAYER will write one layer's own dir, turning whiteouts into
 * overlayfs ones instead of removing what lower layers made. */
enum oci_apply_mode {
        OCI_APPLY_MERGE, /* a layer over the merged tree of the layers below */
        OCI_APPLY_PLAIN, /* an archive's files (the outer tar), root-owned */
};

struct oci_apply_opts {
        enum oci_apply_mode mode;
        bool no_setuid;
        uint64_t *budget; /* uncompressed bytes still allowed; lowered as read */
        /* progress: called with the phase and the blob's bytes read */
        void (*progress)(void *ctx, enum rt_import_phase phase, uint64_t done, uint64_t unpacked);
        void *ctx;
};

struct oci_apply_result {
        unsigned char diff_id[OCI_SHA256_LEN]; /* sha256 of the uncompressed tar */
        uint64_t unpacked;                     /* its length */
};

/* Apply the tar (plain, gzip or zstd) in fd, read from its start, to the
 * tree rootfd. */
int oci_tar_apply(int rootfd, int fd, const struct oci_apply_opts *o, struct oci_apply_result *ret,
                  struct sbx_error *err);

/* ---- paths (oci-path.c) ---- */

/* An entry's path made relative and clean ("./a//b/" -> "a/b"; "" is the
 * root): -EINVAL for an absolute path or a ".." component. */
int oci_clean_path(const char *in, char *out, size_t len);
/* Split a clean path into its parent (in dir) and last component. */
void oci_split_path(char *path, const char **ret_dir, const char **ret_base);
/* An O_PATH fd of the directory `path` beneath rootfd, resolved with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (relative symlinks inside the
 * tree are followed; absolute or escaping ones fail with -EXDEV);
 * missing components are made (0755) when create. */
int oci_open_dir(int rootfd, const char *path, bool create, int *ret_fd);
/* An fd (flags, e.g. O_RDONLY or O_PATH | O_NOFOLLOW) of `path` beneath
 * rootfd, resolved the same way. */
int oci_open_beneath(int rootfd, const char *path, int flags, int *ret_fd);

/* ---- digests (oci.c) ---- */

/* "sha256:<64 lowercase hex>" -> the 32 bytes; -EINVAL otherwise. */
int oci_digest_parse(const char *s, unsigned char out[OCI_SHA256_LEN]);
void oci_digest_format(const unsigned char d[OCI_SHA256_LEN], char out[OCI_DIGEST_MAX]);
