/* SPDX-License-Identifier: MIT */
/* Sandbox dirs removed off the path of a delete (reaper.c): a destroyed
 * sandbox's dir is renamed at once into a trash dir of its driver's, and a
 * thread removes what is there. */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

#include "../common/util.h"

struct reaper {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t thread;
        bool running, stop, pending;
        const char *name;     /* the trash dir's name: .trash-<name> */
        char trash[PATH_MAX]; /* its path, known from the first dir put */
};

/* name: the driver's, which names its trash dir (a literal). */
void reaper_init(struct reaper *r, const char *name);
/* Take dir (a sandbox dir of which nothing is mounted or running any
 * more) out of its place now and have it removed: renamed into
 * <its parent>/.trash-<name>/, which the reaper empties. Where the rename
 * cannot be made, dir is removed here. */
int reaper_put(struct reaper *r, const char *dir, struct sbx_error *err);
/* Stop the thread; what it has not removed yet stays in the trash dir,
 * for the next daemon's reaper (which empties it when first woken). */
void reaper_stop(struct reaper *r);
