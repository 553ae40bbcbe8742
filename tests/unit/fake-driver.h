/* SPDX-License-Identifier: MIT */
/* A runtime driver that runs nothing, for unit tests of what sits above the
 * runtime: its sandboxes are records in memory, every operation is
 * counted, and a few knobs make operations slow or fail.
 *
 * Its agent: a dial of a live, unfrozen sandbox whose agent is up returns
 * one end of a socketpair on which an OK answer is already queued, which
 * is all a ping asks for; otherwise -ECONNREFUSED, as for a dead agent.
 *
 * Two drivers share the code, "fake" and "fake-b", each with its own
 * state (fake_a, fake_b), so a test can tell which driver a sandbox runs
 * under. Reset a state with fake_reset() before its rt_open; set its
 * `unavailable` before an rt_open to have the host "not run" it. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "src/runtime/runtime.h"

#define FAKE_MAX_BOXES 64
#define FAKE_MAX_FDS 256

struct fake_box {
        bool used;
        uint64_t id;
        char dir[4096];
        char hostname[65];
        bool alive, frozen, agent_up;
};

struct fake {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        /* fake_reset() clears everything from here on */
        struct fake_box boxes[FAKE_MAX_BOXES];
        int fds[FAKE_MAX_FDS]; /* our ends of dialled sockets, closed at close */
        size_t n_fds;
        /* what happened */
        int opens, starts, freezes, thaws, stops, destroys, renames, dials;
        int starting; /* starts waiting at the gate */
        char last_start[65], last_rename[65];
        /* knobs */
        bool gate_closed;          /* starts wait until fake_open_gate() ... */
        const char *gate_of;       /* ... those of this hostname only; NULL = all */
        bool fail_start;           /* every start fails (-EIO) */
        const char *fail_start_of; /* starts of this hostname fail (-EIO) */
        bool fail_rename;          /* set_hostname fails (-EIO) */
        const char *unavailable;   /* open fails with -ENOTSUP, saying this */
};

extern struct fake fake_a, fake_b;
extern const struct rt_driver fake_driver_a, fake_driver_b;
/* fake-b without RT_CAP_HOSTNAME (no set_hostname), for the same state. */
extern const struct rt_driver fake_driver_b_fixed_name;

void fake_reset(struct fake *f);
/* A copy of the box of sandbox id: false when there is none. */
bool fake_box(struct fake *f, uint64_t id, struct fake_box *ret);
/* Its agent stops answering (it crashed) / all of it dies. */
void fake_agent_down(struct fake *f, uint64_t id);
void fake_kill(struct fake *f, uint64_t id);
/* One of the counters above, read under the lock (the manager's threads
 * may be counting). */
int fake_get(struct fake *f, const int *counter);
#define FAKE_COUNT(f, field) fake_get(&(f), &(f).field)
/* Turn a knob, under the lock. */
#define FAKE_SET(f, field, value)                                                                  \
        do {                                                                                       \
                pthread_mutex_lock(&(f).lock);                                                     \
                (f).field = (value);                                                               \
                pthread_mutex_unlock(&(f).lock);                                                   \
        } while (0)
/* Sandboxes alive right now. */
int fake_alive(struct fake *f);
/* Wait until n starts are at the gate (at most 5 s): 0, or -ETIMEDOUT. */
int fake_wait_starting(struct fake *f, int n);
void fake_open_gate(struct fake *f);
