/* SPDX-License-Identifier: MIT */
/* Internals of the ns driver shared by zygote.c, ns.c and seccomp.c. */
#pragma once

#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/util.h"
#include "cgroup.h"
#include "runtime.h"

/* The compiled seccomp policy: two stacked filters. The kernel applies the
 * most restrictive answer of all loaded filters, which lets an allowlist
 * (default EPERM) sit next to a few argument-based denials that libseccomp
 * cannot express in the same filter as an unconditional allow. */
struct rt_seccomp {
        struct sock_fprog allow; /* allowlist, default EPERM, bad arch kills */
        struct sock_fprog deny;  /* default allow; argument-filtered denials */
};

/* Compile the policy (in the daemon, once, before the zygote forks). */
int rt_seccomp_build(struct rt_seccomp *ret, struct sbx_error *err);
void rt_seccomp_free(struct rt_seccomp *s);
/* Load it into the calling thread: the last step before execve; needs
 * no_new_privs (or CAP_SYS_ADMIN). 0 or -errno. */
int rt_seccomp_load(const struct rt_seccomp *s);

/* What every launcher inherits from the zygote. */
struct ns_ctx {
        struct cg_layout cg;
        int init_memfd; /* sealed copy of sandbox-init */
        struct rt_seccomp seccomp;
};

/* Launch one sandbox (runs in a launcher: a single-threaded, forked child
 * of the zygote, as host root). On success ret_pid is the host pid of
 * sandbox-init, already exec'd and listening on <dir>/agent.sock. */
int ns_launch(const struct ns_ctx *ctx, const struct rt_spec *spec, pid_t *ret_pid,
              struct sbx_error *err);

/* Checks a spec before it crosses to the zygote; 0 or -EINVAL with err. */
int ns_spec_check(const struct rt_spec *spec, struct sbx_error *err);
