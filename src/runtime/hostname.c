/* SPDX-License-Identifier: MIT */
/* Rename a running sandbox: set the hostname in its UTS namespace from the
 * host. Used when a sandbox started ahead of time (the manager's warm pool)
 * is given its name. setns(CLONE_NEWUTS) changes only the calling thread,
 * so a short-lived thread does it and takes the namespace with it. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ns.h"

#define HOSTNAME_MAX 64

struct rename_job {
        int nsfd;
        const char *name;
        int result;
};

static void *rename_thread(void *arg)
{
        struct rename_job *j = arg;
        if (setns(j->nsfd, CLONE_NEWUTS) < 0)
                j->result = -errno;
        else if (sethostname(j->name, strnlen(j->name, HOSTNAME_MAX)) < 0)
                j->result = -errno;
        else
                j->result = 0;
        return NULL;
}

int ns_set_hostname(void *state, const struct rt_spec *spec, pid_t init_pid, const char *name,
                    struct sbx_error *err)
{
        (void)state;
        (void)spec;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/uts", (int)init_pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "open %s", path);
        struct rename_job j = { .nsfd = fd, .name = name, .result = -EIO };
        pthread_t t;
        int r = pthread_create(&t, NULL, rename_thread, &j);
        if (r)
                return sbx_error_set(err, r, "hostname thread");
        pthread_join(t, NULL);
        if (j.result < 0)
                return sbx_error_set(err, -j.result, "set hostname of pid %d", (int)init_pid);
        return 0;
}
