/* SPDX-License-Identifier: MIT */
/* Native files: GET/PUT {endpoint}/files?path=P and GET .../files/list.
 *
 * The daemon works on the sandbox's own tree through a handle to its root
 * that sandbox-init passes over the agent socket. Every path is resolved
 * with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so `..`, absolute
 * symlinks and /proc/self/root tricks stay inside the sandbox; every file
 * operation runs with the thread's fsuid/fsgid set to the sandbox's root
 * (no host capabilities, ownership as the sandbox's); only regular files
 * and directories on the sandbox's overlay or tmpfs are touched, never its
 * /proc, /sys or /dev. Uploads stream to a temporary file renamed into
 * place at the end, so a reader never sees half a file, and a body is
 * never held in memory whole. */
#pragma once

#include "api.h"

struct files_upload;

/* GET .../files and .../files/list; sb entered. */
void files_handle(struct api *a, struct api_req *req, struct sandbox *sb, const char *const *seg,
                  size_t n, struct api_resp *resp);

/* Called by the server when a request's headers are in. Returns false if
 * req is no upload. Otherwise true, with req->upload set (the body goes to
 * files_upload_write) or resp holding the error to answer. */
bool files_upload_begin(struct api *a, struct api_req *req, struct api_resp *resp);
/* A chunk of the body; errors are remembered and answered at the end. */
void files_upload_write(struct files_upload *u, const void *data, size_t len);
/* The body is complete: rename into place and answer. Frees u. */
void files_upload_finish(struct api *a, struct files_upload *u, struct api_resp *resp);
/* The request ended early: remove the temporary file. Frees u. */
void files_upload_abort(struct api *a, struct files_upload *u);
