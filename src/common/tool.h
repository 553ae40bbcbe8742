/* SPDX-License-Identifier: MIT */
/* Running a host tool to its end: nft (NAT), mkfs.ext4 (the disk cap),
 * mmdebstrap and busybox (image builds).
 *
 * No shell is involved: argv goes to execve() as it is. The caller may be
 * a thread of the daemon or a single-threaded launcher in a namespace of
 * its own; either way the child runs only async-signal-safe calls (dup2,
 * close_range, open, execve, write) between fork() and execve(), so a lock
 * another thread held at the fork cannot hang it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

struct tool_run {
        /* argv[0]: an absolute path, or a name looked up in $PATH (by the
         * caller, before the fork). NULL terminated. */
        const char *const *argv;
        const char *const *envp; /* NULL: the caller's environment */
        const char *input;       /* written to its stdin, then closed; NULL: /dev/null */
        struct buf *out;         /* collects its stdout (up to the buf's cap) */
        bool out_to_stderr;      /* without out: its stdout is our stderr, else /dev/null */
        char *err_text;          /* collects the start of its stderr, NUL terminated; */
        size_t err_len;          /* NULL: it writes to our stderr */
        int fd3;                 /* > 2: handed to it as its fd 3; otherwise none */
};

/* Run t to its end. 0 when it exited 0. When it ran but failed (a non-zero
 * exit, a signal, its stdin refused, output past out's cap): -errno with
 * err set ("`argv0` failed (status 0x...)" for an exit), *ret_status its
 * wait status. When it could not be run (not found, pipe, fork, exec):
 * -errno with err set and *ret_status -1. ret_status may be NULL. */
int run_tool(const struct tool_run *t, int *ret_status, struct sbx_error *err);

/* The first of `paths` (NULL terminated) that is an executable file; NULL
 * when none is. */
const char *tool_find(const char *const *paths);

/* A fixed PATH and the C locale, for tools whose messages are parsed or
 * passed on (nft, mkfs.ext4): never the daemon's own environment. */
extern const char *const tool_plain_env[];
