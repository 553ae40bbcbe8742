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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/fdpass.h"
#include "../common/log.h"
#include "cgroup.h"

#define RT_REQ_MAGIC 0x53425831u /* "SBX1" */
#define RT_START_TIMEOUT_MS 30000
#define RT_LAUNCH_ALARM_S 25
#define ZY_SPARES_MAX 4
#define ZY_REFILL_QUIET_MS 40 /* spares are made once starts pause this long */

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
                                    int reply_fd, bool spare)
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
                r = ns_launch(ctx, &spec, spare, &pid, &err);
        rep.code = r < 0 ? (err.code ? err.code : -r) : 0;
        rep.pid = r < 0 ? 0 : (int32_t)pid;
        snprintf(rep.msg, sizeof(rep.msg), "%s", r < 0 ? err.msg : "");
        send(reply_fd, &rep, sizeof(rep), MSG_NOSIGNAL);
        _exit(0);
}

/* ---- spare launchers ----
 *
 * Moving a process into v1 cgroups waits for a kernel grace period, the
 * longest wait of a start. So the zygote keeps a few launchers forked
 * ahead, each already in v1 cgroups of its own (cg_spare_join), which
 * become the sandbox's at its start (cg_spare_adopt): its C is born in
 * them. A spare says 'R' once ready (anything else, or nothing: it is
 * gone), then waits for its one request; the zygote's end ends it. */

struct spare {
        pid_t pid; /* 0: a free slot */
        int pidfd; /* signals it by this, never by a pid that may be reused */
        int sock;
        bool ready;
};

static _Noreturn void spare_main(const struct ns_ctx *ctx, int sock)
{
        struct sbx_error err = {0};
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                _exit(1);
        char said = cg_spare_join(&ctx->cg, &err) == 0 ? 'R' : 'F';
        if (said != 'R')
                log_warn("spare launcher: %s", err.msg);
        if (send(sock, &said, 1, MSG_NOSIGNAL) != 1 || said != 'R')
                _exit(1);
        char *buf = malloc(RT_REQ_MAX);
        int reply_fd = -1;
        ssize_t n = buf ? fd_recv(sock, buf, RT_REQ_MAX, &reply_fd, 0) : -ENOMEM;
        if (n <= 0 || reply_fd < 0)
                _exit(0); /* the zygote ended, or sent nonsense */
        close(sock);
        /* A launcher now: it finishes its start even when the zygote ends. */
        prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
        launcher_main(ctx, buf, (size_t)n, reply_fd, true);
}

/* A spare gone (or never ready): ended, and its cgroups removed once it
 * has left them. */
static void spare_drop(const struct ns_ctx *ctx, struct spare *sp)
{
        syscall(SYS_pidfd_send_signal, sp->pidfd, SIGKILL, NULL, 0);
        struct pollfd p = {.fd = sp->pidfd, .events = POLLIN};
        while (poll(&p, 1, 1000) < 0 && errno == EINTR)
                ;
        close(sp->pidfd);
        close(sp->sock);
        /* An exited task leaves its cgroup a moment later. */
        for (int i = 0; i < 100 && !cg_spare_remove(&ctx->cg, sp->pid); i++)
                sleep_ms(10);
        *sp = (struct spare){0};
}

static void spares_fill(const struct ns_ctx *ctx, struct spare *sp, unsigned n, int zsock)
{
        for (unsigned i = 0; i < n; i++) {
                if (sp[i].pid)
                        continue;
                int pair[2];
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                        return;
                pid_t pid = fork();
                if (pid == 0) {
                        close(zsock);
                        close(pair[0]);
                        for (unsigned j = 0; j < n; j++)
                                if (sp[j].pid) {
                                        close(sp[j].sock);
                                        close(sp[j].pidfd);
                                }
                        spare_main(ctx, pair[1]);
                }
                close(pair[1]);
                /* Without a pidfd it is not tracked: it finds its socket
                 * closed and ends by itself. */
                int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
                if (pidfd < 0) {
                        close(pair[0]);
                        return;
                }
                sp[i] = (struct spare){.pid = pid, .pidfd = pidfd, .sock = pair[0]};
        }
}

/* A spare's word: 'R', or its end. false when spares do not work here. */
static bool spare_heard(const struct ns_ctx *ctx, struct spare *sp)
{
        char c = 0;
        ssize_t n = recv(sp->sock, &c, 1, MSG_DONTWAIT);
        if (n == 1 && c == 'R') {
                sp->ready = true;
                return true;
        }
        if (n < 0 && errno == EAGAIN)
                return true;
        spare_drop(ctx, sp);
        return n != 1; /* it died (try another) or it could not join (stop trying) */
}

/* Hand the request to a ready spare; false when none took it. */
static bool spare_take(const struct ns_ctx *ctx, struct spare *sp, unsigned n, const char *buf,
                       size_t len, int reply_fd)
{
        for (unsigned i = 0; i < n; i++) {
                if (!sp[i].pid || !sp[i].ready)
                        continue;
                int r = fd_send(sp[i].sock, buf, len, reply_fd, 0);
                if (r < 0) {
                        spare_drop(ctx, &sp[i]);
                        continue;
                }
                close(sp[i].sock); /* a launcher now, in what are the sandbox's cgroups */
                close(sp[i].pidfd);
                sp[i] = (struct spare){0};
                return true;
        }
        return false;
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

/* The zygote's state: its socket to the daemon and its spares. */
struct zygote_loop {
        const struct ns_ctx *ctx;
        int sock;
        char *buf;
        struct spare sp[ZY_SPARES_MAX];
        unsigned nsp;        /* spares kept; 0 once they cannot join here */
        int64_t last_launch; /* mono ms */
};

static void close_spares_in_child(struct zygote_loop *z)
{
        close(z->sock);
        for (unsigned i = 0; i < ZY_SPARES_MAX; i++)
                if (z->sp[i].pid) {
                        close(z->sp[i].sock);
                        close(z->sp[i].pidfd);
                }
}

/* Wait for a request, refilling spares once starts pause (a spare joining
 * its cgroups holds the kernel's cgroup lock through a grace period,
 * which would stall the starts running now). True when a request waits. */
static bool zygote_wait(struct zygote_loop *z)
{
        int64_t quiet = mono_ms() - z->last_launch;
        int timeout = -1;
        if (quiet >= ZY_REFILL_QUIET_MS)
                spares_fill(z->ctx, z->sp, z->nsp, z->sock);
        else
                for (unsigned i = 0; i < z->nsp; i++)
                        if (!z->sp[i].pid)
                                timeout = (int)(ZY_REFILL_QUIET_MS - quiet);
        struct pollfd p[1 + ZY_SPARES_MAX] = {{.fd = z->sock, .events = POLLIN}};
        for (unsigned i = 0; i < z->nsp; i++) {
                const struct spare *s = &z->sp[i];
                p[1 + i] =
                    (struct pollfd){.fd = s->pid && !s->ready ? s->sock : -1, .events = POLLIN};
        }
        if (poll(p, 1 + z->nsp, timeout) < 0) {
                if (errno == EINTR)
                        return false;
                _exit(1);
        }
        for (unsigned i = 0; i < z->nsp; i++)
                if (p[1 + i].revents && !spare_heard(z->ctx, &z->sp[i]))
                        z->nsp = 0; /* spares cannot join here: plain launchers only */
        return p[0].revents != 0;
}

/* One request: to a ready spare, else to a launcher forked for it. */
static void zygote_serve(struct zygote_loop *z)
{
        int reply_fd;
        ssize_t n = fd_recv(z->sock, z->buf, RT_REQ_MAX, &reply_fd, 0);
        if (n == 0 || (n < 0 && n != -EMSGSIZE)) { /* the daemon closed: the end */
                for (unsigned i = 0; i < ZY_SPARES_MAX; i++)
                        if (z->sp[i].pid)
                                spare_drop(z->ctx, &z->sp[i]);
                _exit(n == 0 ? 0 : 1);
        }
        if (reply_fd < 0)
                return;
        z->last_launch = mono_ms();
        if (n > 0 && spare_take(z->ctx, z->sp, z->nsp, z->buf, (size_t)n, reply_fd)) {
                close(reply_fd);
                return;
        }
        pid_t pid = n > 0 ? fork() : -1;
        if (pid == 0) {
                close_spares_in_child(z);
                launcher_main(z->ctx, z->buf, (size_t)n, reply_fd, false);
        }
        if (pid < 0) {
                struct rt_reply rep = {.code = n < 0 ? EMSGSIZE : errno};
                snprintf(rep.msg, sizeof(rep.msg), "runtime helper: %s",
                         n < 0 ? "oversized request" : "cannot fork a launcher");
                send(reply_fd, &rep, sizeof(rep), MSG_NOSIGNAL);
        }
        close(reply_fd);
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
        struct zygote_loop z = {.ctx = ctx,
                                .sock = sock,
                                .buf = malloc(RT_REQ_MAX),
                                .nsp = MIN(ctx->spares, (unsigned)ZY_SPARES_MAX)};
        if (!z.buf)
                _exit(1);
        for (;;)
                if (zygote_wait(&z))
                        zygote_serve(&z);
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
