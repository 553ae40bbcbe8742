/* SPDX-License-Identifier: MIT */
/* Recipe builds (sandboxd image build -f): the steps a recipe's RUN runs
 * go to a daemon of the build's own, started for it on a state dir of its
 * own (<images>/.state-build-<pid>) and the build cache as its images dir
 * (<images>/.cache): a RUN is an attach, a spawn, its stream, a snapshot
 * and a delete, through the same API every client uses. build-daemon.c is
 * that daemon's life and the calls; build-copy.c makes COPY's layer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../common/util.h"

#define BUILD_CACHE_DIR ".cache"
#define BUILD_STATE_PREFIX ".state-build-"

struct build_daemon {
        pid_t pid;
        int lock_fd; /* flock'd for the daemon's life: a dead build's is free */
        char state[4096];
        char url[64];
        char token[8192];
};

/* Start the daemon (state: its dir, made and locked here; cache: its
 * images dir). Its log goes to <state>/daemon.log. */
int build_daemon_start(struct build_daemon *d, const char *state, const char *cache,
                       struct sbx_error *err);
/* Delete every sandbox of the build's deployment, stop the daemon, remove
 * its state dir. */
void build_daemon_stop(struct build_daemon *d);

struct build_run {
        const char *image; /* the cache image to run in */
        const char *const *argv;
        size_t argc;
        const char *const *env; /* "K=V" */
        size_t envc;
        const char *cwd;
        const char *snapshot; /* the cache image to make of the result */
};
/* Run one RUN step: its output goes to stderr as it comes (the last 16 KiB
 * of it kept in tail, for the error), then a snapshot when it exits 0.
 * *ret_exit: the exit code (-1: killed by a signal). */
int build_daemon_run(struct build_daemon *d, const struct build_run *r, int *ret_exit,
                     struct buf *tail, struct sbx_error *err);

/* Clean up after builds that died (SIGKILL, a crash): for each state dir
 * whose lock is free, its daemon is started again to delete its sandbox,
 * then the dir goes. */
void build_sweep(const char *images_dir);

/* Whether a build runs on images_dir now (its state dir's lock is held). */
bool build_running(const char *images_dir);

/* Set by SIGINT / SIGTERM during a build: the step in progress stops. */
extern volatile int build_interrupted;

/* COPY (build-copy.c): a tar of the sources beneath ctxfd, as COPY puts
 * them at dst (absolute; a trailing '/' or several sources make it a
 * directory), written to out_fd; digest: sha256 hex of what the copy
 * holds (names, types, modes, contents, link targets; not times). */
int build_copy_layer(int ctxfd, const char *const *srcs, size_t n, const char *dst, int out_fd,
                     char digest[65], struct sbx_error *err);
