/* SPDX-License-Identifier: MIT */
/* The ns driver's zygote (zygote.h).
 *
 * zygote_open() forks it while the daemon is still single-threaded. The
 * zygote never runs a thread: for each start it receives the spec and a
 * reply socket over a SOCK_SEQPACKET pair, forks a launcher (ns.c) and
 * goes back to waiting. The launcher builds the sandbox, answers on the
 * reply socket and exits; SIGCHLD is ignored in the zygote so launchers
 * reap themselves. Sandboxes are re-parented to the host's init and
 * outlive both the daemon and the zygote. */
#include "zygote.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../common/fdpass.h"

#define RT_REQ_MAGIC 0x53425831u /* "SBX1" */
#define RT_START_TIMEOUT_MS 30000
#define RT_LAUNCH_ALARM_S 25

/* A launch request: this header, then dir, rootfs and hostname, each NUL
 * terminated. */
struct rt_req {
        uint32_t magic;
        uint32_t uid_base;
        uint32_t uid_count;
        uint32_t len_dir;
        uint32_t len_rootfs;
        uint32_t len_hostname;
        uint64_t id;
        struct rt_limits limits;
};
#define RT_REQ_MAX (sizeof(struct rt_req) + 2 * PATH_MAX + 256)

struct rt_reply {
        int32_t code; /* 0 or a positive errno */
        int32_t pid;
        char msg[sizeof(((struct sbx_error *)0)->msg)];
};

/* ---- the zygote and its launchers ---- */

static int req_parse(const char *buf, size_t n, struct rt_spec *spec)
{
        struct rt_req h;
        if (n < sizeof(h))
                return -EPROTO;
        memcpy(&h, buf, sizeof(h));
        size_t ld = h.len_dir, lr = h.len_rootfs, lh = h.len_hostname;
        if (h.magic != RT_REQ_MAGIC || ld >= PATH_MAX || lr >= PATH_MAX || lh > 255 ||
            n != sizeof(h) + ld + lr + lh + 3)
                return -EPROTO;
        const char *dir = buf + sizeof(h), *rootfs = dir + ld + 1, *host = rootfs + lr + 1;
        if (strnlen(dir, ld + 1) != ld || strnlen(rootfs, lr + 1) != lr ||
            strnlen(host, lh + 1) != lh)
                return -EPROTO;
        *spec = (struct rt_spec){
            .id = h.id,
            .dir = dir,
            .rootfs = rootfs,
            .hostname = host,
            .uid_base = h.uid_base,
            .uid_count = h.uid_count,
            .limits = h.limits,
        };
        return 0;
}

static _Noreturn void launcher_main(const struct ns_ctx *ctx, const char *buf, size_t n,
                                    int reply_fd)
{
        struct rt_reply rep = {0};
        struct sbx_error err = {0};
        struct rt_spec spec;
        pid_t pid = 0;

        signal(SIGCHLD, SIG_DFL);
        /* A launch that hangs dies; C then sees its sync socket close and
         * exits, and rt_start reports the missing answer. */
        alarm(RT_LAUNCH_ALARM_S);
        int r = req_parse(buf, n, &spec);
        if (r < 0)
                sbx_error_set(&err, -r, "malformed launch request");
        else
                r = ns_launch(ctx, &spec, &pid, &err);
        rep.code = r < 0 ? (err.code ? err.code : -r) : 0;
        rep.pid = r < 0 ? 0 : (int32_t)pid;
        snprintf(rep.msg, sizeof(rep.msg), "%s", r < 0 ? err.msg : "");
        send(reply_fd, &rep, sizeof(rep), MSG_NOSIGNAL);
        _exit(0);
}

/* Close every fd but 0-2 and the two kept ones. */
static void close_all_but(int a, int b)
{
        int lo = MIN(a, b), hi = MAX(a, b);
        if (lo > 3)
                close_range(3, (unsigned)lo - 1, 0);
        if (hi > lo + 1)
                close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
        close_range((unsigned)hi + 1, ~0U, 0);
}

static _Noreturn void zygote_main(int sock, const struct ns_ctx *ctx, pid_t parent)
{
        /* Die with the daemon; if it is already gone, do not linger. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                _exit(1);
        /* Whatever the daemon's thread blocked or ignored must not leak
         * into launchers (their alarm must fire). */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGALRM, SIG_DFL);
        signal(SIGCHLD, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        close_all_but(sock, ctx->init_memfd);
        char *buf = malloc(RT_REQ_MAX);
        if (!buf)
                _exit(1);
        for (;;) {
                int reply_fd;
                ssize_t n = fd_recv(sock, buf, RT_REQ_MAX, &reply_fd, 0);
                if (n == 0)
                        _exit(0);
                if (n < 0 && n != -EMSGSIZE)
                        _exit(1);
                if (reply_fd < 0)
                        continue;
                pid_t pid = n > 0 ? fork() : -1;
                if (pid == 0) {
                        close(sock);
                        launcher_main(ctx, buf, (size_t)n, reply_fd);
                }
                if (pid < 0) {
                        struct rt_reply rep = {.code = n < 0 ? EMSGSIZE : errno};
                        snprintf(rep.msg, sizeof(rep.msg), "runtime helper: %s",
                                 n < 0 ? "oversized request" : "cannot fork a launcher");
                        send(reply_fd, &rep, sizeof(rep), MSG_NOSIGNAL);
                }
                close(reply_fd);
        }
}

/* ---- open / close ---- */

int zygote_open(const struct ns_ctx *ctx, struct zygote *ret, struct sbx_error *err)
{
        int sp[2];
        pid_t parent = getpid();
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return sbx_error_set(err, errno, "socketpair");
        pid_t pid = fork();
        if (pid < 0) {
                int r = sbx_error_set(err, errno, "fork the runtime helper");
                close(sp[0]);
                close(sp[1]);
                return r;
        }
        if (pid == 0) {
                close(sp[0]);
                zygote_main(sp[1], ctx, parent);
        }
        close(sp[1]);
        ret->sock = sp[0];
        ret->pid = pid;
        pthread_mutex_init(&ret->lock, NULL);
        return 0;
}

void zygote_close(struct zygote *z)
{
        close(z->sock); /* the zygote reads EOF and exits */
        while (waitpid(z->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        pthread_mutex_destroy(&z->lock);
}

/* ---- launch ---- */

static int req_build(const struct rt_spec *spec, struct buf *b)
{
        struct rt_req h = {
            .magic = RT_REQ_MAGIC,
            .uid_base = spec->uid_base,
            .uid_count = spec->uid_count,
            .len_dir = (uint32_t)strlen(spec->dir),
            .len_rootfs = (uint32_t)strlen(spec->rootfs),
            .len_hostname = (uint32_t)strnlen(spec->hostname, 255),
            .id = spec->id,
            .limits = spec->limits,
        };
        int r = buf_append(b, &h, sizeof(h));
        if (r >= 0)
                r = buf_append(b, spec->dir, h.len_dir + 1);
        if (r >= 0)
                r = buf_append(b, spec->rootfs, h.len_rootfs + 1);
        if (r >= 0)
                r = buf_append(b, spec->hostname, h.len_hostname);
        if (r >= 0)
                r = buf_append(b, "", 1);
        return r;
}

static int wait_reply(int fd, pid_t *ret_pid, struct sbx_error *err)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t deadline = mono_ms() + RT_START_TIMEOUT_MS;
        for (;;) {
                int64_t left = deadline - mono_ms();
                if (left <= 0)
                        return sbx_error_set(err, ETIMEDOUT, "sandbox launch timed out");
                int r = poll(&p, 1, (int)left);
                if (r > 0)
                        break;
                if (r < 0 && errno != EINTR)
                        return sbx_error_set(err, errno, "poll");
        }
        struct rt_reply rep;
        ssize_t n;
        do
                n = recv(fd, &rep, sizeof(rep), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return sbx_error_set(err, errno, "read launch reply");
        if (n != sizeof(rep))
                return sbx_error_set(err, EIO, "sandbox launcher died without an answer");
        rep.msg[sizeof(rep.msg) - 1] = '\0';
        if (rep.code) {
                int code = rep.code > 0 && rep.code < 4096 ? rep.code : EIO;
                if (err) {
                        err->code = code;
                        snprintf(err->msg, sizeof(err->msg), "%s", rep.msg);
                }
                return -code;
        }
        if (rep.pid <= 0)
                return sbx_error_set(err, EIO, "launch reply without a pid");
        *ret_pid = rep.pid;
        return 0;
}

int zygote_launch(struct zygote *z, const struct rt_spec *spec, pid_t *ret_pid,
                  struct sbx_error *err)
{
        struct buf b;
        buf_init(&b, RT_REQ_MAX);
        int r = req_build(spec, &b);
        if (r < 0) {
                buf_free(&b);
                return sbx_error_set(err, -r, "launch request");
        }
        int rp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rp) < 0) {
                buf_free(&b);
                return sbx_error_set(err, errno, "socketpair");
        }
        pthread_mutex_lock(&z->lock);
        r = fd_send(z->sock, b.data, b.len, rp[1], 0);
        pthread_mutex_unlock(&z->lock);
        buf_free(&b);
        close(rp[1]);
        if (r < 0) {
                close(rp[0]);
                return sbx_error_set(err, -r, "send launch request to the runtime helper");
        }
        pid_t pid = 0;
        r = wait_reply(rp[0], &pid, err);
        close(rp[0]);
        if (r < 0)
                return r;
        *ret_pid = pid;
        return 0;
}
