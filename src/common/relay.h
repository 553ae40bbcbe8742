/* SPDX-License-Identifier: MIT */
/* Copy bytes both ways between two stream sockets until both directions
 * have ended (each end's EOF passed on as a shutdown of the other's
 * writing side), one breaks, or nothing moved for idle_ms. Used by
 * sandbox-init's TCP relay and by the daemon's port proxy after a 101. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Bytes to send before anything read: to a, and to b (what was read past
 * an HTTP head on either side); each at most 64 KiB. */
struct relay_pre {
        const void *to_a, *to_b;
        size_t to_a_len, to_b_len;
};

/* idle_ms < 0: no idle limit. 0 when both directions ended, -ETIMEDOUT
 * when idle, -E2BIG for a pre too long, -errno when a peer broke. */
int relay_run(int a, int b, const struct relay_pre *pre, int64_t idle_ms);
