/* SPDX-License-Identifier: MIT */
/* Per-key request rate limit: one token bucket per key (a deployment id),
 * refilled at `rate` tokens per second up to `burst`. One tenant that
 * floods the server drains its own bucket only, so the others keep being
 * served.
 *
 * The table is bounded: keys whose bucket has refilled completely carry no
 * state worth keeping and are dropped when the table grows past its size.
 * Safe to call from any number of threads at once. */
#pragma once

#include <stdint.h>

#define RATELIMIT_MAX_KEYS 65536       /* tracked keys before idle ones are dropped */
#define RATELIMIT_MAX_RATE 1000000     /* requests per second */
#define RATELIMIT_MAX_BURST 1000000000 /* tokens */

struct ratelimit;

/* rate: requests per second (1..RATELIMIT_MAX_RATE); burst: bucket size
 * (1..RATELIMIT_MAX_BURST; 0 picks 2 x rate). -EINVAL for a bad rate or
 * burst, -ENOMEM. */
int ratelimit_new(int64_t rate, int64_t burst, struct ratelimit **ret);
void ratelimit_free(struct ratelimit *rl);

/* Take one token from key's bucket at now_ms (a monotonic clock).
 * 0: allowed. > 0: refused, the whole seconds to wait before a token is
 * there (at least 1), for Retry-After. Never fails: when memory runs out
 * the request is allowed. */
int64_t ratelimit_take(struct ratelimit *rl, const char *key, int64_t now_ms);
