/* SPDX-License-Identifier: MIT */
/* Passing a descriptor over a unix socket (SCM_RIGHTS), for the zygote and
 * its launchers, the launcher and the sandbox's first process, and
 * sandbox-init and the daemon; and reaching a unix socket by its directory. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "util.h"

/* Send len bytes in one sendmsg with fd attached. 0; -EMSGSIZE when fewer
 * bytes went; -errno otherwise (-EAGAIN with MSG_DONTWAIT in flags).
 * EINTR is retried; SIGPIPE is never raised. */
int fd_send(int sock, const void *data, size_t len, int fd, int flags);

/* Receive one message and at most one fd: *ret_fd gets it (O_CLOEXEC), or
 * -1 when none came; extra fds are closed. Returns the bytes read, 0 at
 * EOF, -EMSGSIZE when the message or its control data was cut (no fd is
 * kept then), or -errno (-EAGAIN with MSG_DONTWAIT). */
ssize_t fd_recv(int sock, void *buf, size_t len, int *ret_fd, int flags);

/* Connect a stream socket to <dir>/<name>. The directory path may be longer
 * than a sockaddr_un allows: it is reached through an O_PATH descriptor.
 * connect() is bounded by timeout_ms (a full backlog blocks it). The fd is
 * O_CLOEXEC and non-blocking. Every failure is -ECONNREFUSED, or
 * -ETIMEDOUT when the backlog stayed full; err keeps the real cause. */
int unix_connect_in(const char *dir, const char *name, int timeout_ms, int *ret_fd,
                    struct sbx_error *err);
