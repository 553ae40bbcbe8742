/* SPDX-License-Identifier: MIT */
/* The ns driver's zygote (zygote.c): a single-threaded helper forked while
 * the daemon has no thread yet. For each start it forks a launcher, which
 * builds the sandbox (launch.h); the daemon's threads only send it
 * requests. */
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include "../common/util.h"
#include "launch.h"
#include "runtime.h"

struct zygote {
        int sock; /* to the zygote */
        pid_t pid;
        pthread_mutex_t lock; /* one request on the socket at a time */
};

/* Fork the zygote with ctx, which it keeps (its fds included) for every
 * launcher; the caller may release its own copy afterwards. Call while
 * the process is single-threaded. */
int zygote_open(const struct ns_ctx *ctx, struct zygote *ret, struct sbx_error *err);
/* Close its socket: it reads EOF and exits; wait for that. */
void zygote_close(struct zygote *z);
/* Launch spec (checked with ns_spec_check) through it and wait, at most
 * 30 s (then -ETIMEDOUT), for the launcher's answer. Thread-safe. */
int zygote_launch(struct zygote *z, const struct rt_spec *spec, pid_t *ret_pid,
                  struct sbx_error *err);
