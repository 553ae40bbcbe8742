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

#include "routes.h"

api_handler files_read; /* GET {endpoint}/files?path=P */
api_handler files_list; /* GET {endpoint}/files/list?path=P */
/* PUT {endpoint}/files?path=P, a streaming route: run when the head is in,
 * it opens the temporary file and sets req->stream (the body goes there;
 * the end renames it into place and answers), or answers an error. */
api_handler files_upload;
