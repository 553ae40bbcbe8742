/* SPDX-License-Identifier: MIT */
/* The ns driver's launcher (ns.c): builds one sandbox and execs
 * sandbox-init as its PID 1. It runs in a launcher process, a
 * single-threaded child the zygote forks for each start (zygote.c). */
#pragma once

#include <sys/types.h>

#include "../common/util.h"
#include "cgroup.h"
#include "net.h"
#include "runtime.h"
#include "seccomp.h"

/* What every launcher inherits from the zygote, made by rt_open. */
struct ns_ctx {
        struct cg_layout cg;
        int init_memfd; /* sealed copy of sandbox-init */
        struct rt_seccomp seccomp;
        struct ns_net_cfg net;
        unsigned
            spares; /* spare launchers the zygote keeps (0 where v1 cgroups cannot be renamed) */
};

/* Launch one sandbox (in a launcher, as host root). On success ret_pid is
 * the host pid of sandbox-init, already exec'd and listening on
 * <dir>/agent.sock. spare: the launcher is a spare, in v1 cgroups of its
 * own that become the sandbox's (cg_spare_adopt). */
int ns_launch(const struct ns_ctx *ctx, const struct rt_spec *spec, bool spare, pid_t *ret_pid,
              struct sbx_error *err);

/* Checks a spec before it crosses to the zygote; 0 or -EINVAL with err. */
int ns_spec_check(const struct rt_spec *spec, struct sbx_error *err);
