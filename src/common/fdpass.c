/* SPDX-License-Identifier: MIT */
#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

int fd_send(int sock, const void *data, size_t len, int fd, int flags)
{
        struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
        /* Zeroed: the kernel reads the whole control buffer. */
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } c;
        memset(&c, 0, sizeof(c));
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = c.buf,
                             .msg_controllen = sizeof(c.buf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        ssize_t n;
        do
                n = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EMSGSIZE;
}

ssize_t fd_recv(int sock, void *buf, size_t len, int *ret_fd, int flags)
{
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(4 * sizeof(int))];
        } c;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = c.buf,
                             .msg_controllen = sizeof(c.buf)};
        ssize_t n;
        *ret_fd = -1;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < nfd; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (*ret_fd < 0)
                                *ret_fd = fd;
                        else
                                close(fd);
                }
        }
        if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                if (*ret_fd >= 0)
                        close(*ret_fd);
                *ret_fd = -1;
                return -EMSGSIZE;
        }
        return n;
}

int unix_connect_in(const char *dir, const char *name, int timeout_ms, int *ret_fd,
                    struct sbx_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000};

        if (!dir || !name || !ret_fd)
                return sbx_error_set(err, EINVAL, "connect: no socket directory");
        /* A long path cannot go in sun_path; a short magic link to an
         * O_PATH descriptor of the directory always fits. */
        _cleanup_close_ int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0) {
                sbx_error_set(err, errno, "open `%s`", dir);
                if (err)
                        err->code = ECONNREFUSED;
                return -ECONNREFUSED;
        }
        if (snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, name) >=
            (int)sizeof(sa.sun_path))
                return sbx_error_set(err, ENAMETOOLONG, "socket name `%s`", name);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return sbx_error_set(err, errno, "socket");
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int r;
        do
                r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        while (r < 0 && errno == EINTR);
        if (r < 0) {
                int e = errno;
                int mapped = (e == EAGAIN || e == EINPROGRESS) ? ETIMEDOUT : ECONNREFUSED;
                sbx_error_set(err, e, "connect to `%s/%s`", dir, name);
                if (err)
                        err->code = mapped;
                return -mapped;
        }
        tv = (struct timeval){0};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return sbx_error_set(err, errno, "fcntl");
        *ret_fd = TAKE_FD(fd);
        return 0;
}
