/* SPDX-License-Identifier: MIT */
/* Lifecycle timers: one thread, a min-heap of (deadline, sandbox id).
 * Entries are never updated in place: when a deadline moves later (the
 * sandbox was used), the old entry fires early, the callback finds nothing
 * due and adds the new deadline. So each firing costs O(log n), and no loop
 * ever scans every sandbox. */
#pragma once

#include <stdint.h>

struct timers;
typedef void (*timers_fn)(void *ctx, int64_t at, uint64_t id);

int timers_open(timers_fn fn, void *ctx, struct timers **ret);
/* Stop the thread (waits for a running callback) and free. */
void timers_close(struct timers *t);
/* Call fn(ctx, deadline_ms, id) at deadline_ms (CLOCK_REALTIME ms) or soon after. */
int timers_add(struct timers *t, int64_t deadline_ms, uint64_t id);
