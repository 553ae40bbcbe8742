/* SPDX-License-Identifier: MIT */
/* The seccomp policy of every ns sandbox (seccomp.c): compiled once in the
 * daemon, before the zygote forks, and loaded by each sandbox's first
 * process as the last step before it execs sandbox-init. */
#pragma once

#include <linux/filter.h>

#include "../common/util.h"

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
