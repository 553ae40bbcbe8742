/* SPDX-License-Identifier: MIT */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
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
