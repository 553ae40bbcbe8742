/* SPDX-License-Identifier: MIT */
/* Copy bytes both ways between two stream sockets until both directions
 * have ended (each end's EOF passed on as a shutdown of the other's
 * writing side), one breaks, or nothing moved for idle_ms. Used by
 * sandbox-init's TCP relay and by the daemon's port proxy after a 101. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One direction: bytes read from `from` not yet written to `to`. */
struct relay_dir {
        int from, to;
        char *buf;
        size_t cap, len, off; /* buf's size; [off, len) still to write */
        bool eof;             /* from has ended */
        bool done;            /* ... and to was shut for writing once all was out */
};

/* Move what can move without blocking, given poll's revents of from and
 * of to: 1 when bytes moved, 0 when none, -errno for a broken peer. */
int relay_pump(struct relay_dir *d, short rev_from, short rev_to);

/* Bytes to send before anything read: to a, and to b (what was read past
 * an HTTP head on either side); each at most 64 KiB. */
struct relay_pre {
        const void *to_a, *to_b;
        size_t to_a_len, to_b_len;
};

/* idle_ms < 0: no idle limit. stop (may be NULL) is looked at every
 * second: once true, the relay ends (a server shutting down). 0 when both
 * directions ended, -ETIMEDOUT when idle, -ECANCELED when stopped, -E2BIG
 * for a pre too long, -errno when a peer broke. */
int relay_run(int a, int b, const struct relay_pre *pre, int64_t idle_ms, const atomic_bool *stop);
