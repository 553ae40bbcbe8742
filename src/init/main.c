/* SPDX-License-Identifier: MIT */
/* sandbox-init: PID 1 of every sandbox. The runtime starts it inside the
 * sandbox's namespaces, after pivot_root, with the agent socket listening
 * on a passed fd:
 *     sandbox-init --listen-fd=3
 * For tests outside a sandbox it can bind the socket itself:
 *     sandbox-init --listen=PATH
 * With --guard (the gvisor class, where the kernel does not protect a
 * pid-namespace init) every workload runs in a pid and mount namespace of
 * its own below a tiny PID 1, which hides sandbox-init, its /proc and the
 * directory of the --listen socket (guard.c). It needs CAP_SYS_ADMIN and
 * CAP_SYS_CHROOT, which the workload does not keep:
 *     sandbox-init --listen=/.sbx/agent/agent.sock --guard
 * It serves the agent protocol (src/agent/proto.h) until it is killed. */
#include "init.h"

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"

#define MAX_EVENTS 64
#define ACCEPT_PAUSE_US (100 * 1000)

int loop_watch(struct init_ctx *ctx, int fd, struct watch *w, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.ptr = w};

        if (epoll_ctl(ctx->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
                return 0;
        if (errno == ENOENT && epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
                return 0;
        return -errno;
}

void loop_unwatch(struct init_ctx *ctx, int fd)
{
        epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* ------------------------------------------------------------- startup */

/* fds 0-2 must be taken, or a pipe could land there and be clobbered when a
 * child sets up its stdio. */
static int ensure_stdio(void)
{
        for (int fd = 0; fd < 3; fd++) {
                if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
                        continue;
                int n = open("/dev/null", O_RDWR);
                if (n < 0)
                        n = open("/", O_RDONLY | O_DIRECTORY);
                if (n < 0)
                        return -errno;
                if (n != fd)
                        return -EBADF; /* lower fds were filled first */
        }
        return 0;
}

static int setup_signals(struct init_ctx *ctx)
{
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigset_t mask;

        /* Nothing is inherited as ignored (a daemon started in the
         * background of a shell has SIGINT and SIGQUIT ignored; SIGCHLD
         * ignored would auto-reap and lose every exit status). */
        sigemptyset(&sa.sa_mask);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        sigaction(sig, &sa, NULL); /* fails only for the ones libc keeps */
        /* A daemon that hangs up mid-answer must give EPIPE, not kill us. */
        sa.sa_handler = SIG_IGN;
        if (sigaction(SIGPIPE, &sa, NULL) < 0)
                return -errno;
        /* Everything else keeps its default disposition and no handler:
         * as PID 1 of a pid namespace the kernel then drops those signals
         * when they come from inside, so the workload cannot kill us. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_SETMASK, &mask, NULL) < 0)
                return -errno;
        ctx->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        return ctx->sigfd < 0 ? -errno : 0;
}

static int listen_on_fd(struct init_ctx *ctx, int fd)
{
        int val = 0;
        socklen_t len = sizeof(val);

        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &val, &len) < 0)
                return -errno;
        if (!val)
                return -EINVAL;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        ctx->listen_fd = fd;
        return 0;
}

int listen_on_path(struct init_ctx *ctx, const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct stat st;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
                unlink(path); /* a stale socket of an earlier run */
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0)
                return -errno;
        ctx->listen_fd = TAKE_FD(fd);
        return 0;
}

static int parse_args(int argc, char **argv, int *ret_fd, const char **ret_path, bool *ret_guard)
{
        *ret_fd = -1;
        *ret_path = NULL;
        *ret_guard = false;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (strncmp(a, "--listen-fd=", 12) == 0) {
                        char *end;
                        errno = 0;
                        long v = strtol(a + 12, &end, 10);
                        if (errno || *end || end == a + 12 || v < 0 || v > INT_MAX)
                                return -EINVAL;
                        *ret_fd = (int)v;
                } else if (strncmp(a, "--listen=", 9) == 0 && a[9]) {
                        *ret_path = a + 9;
                } else if (strcmp(a, "--guard") == 0) {
                        *ret_guard = true;
                } else if (strcmp(a, "--version") == 0) {
                        printf("sandbox-init %s\n", SANDBOXD_VERSION);
                        exit(0);
                } else {
                        return -EINVAL;
                }
        }
        return (*ret_fd >= 0) != (*ret_path != NULL) ? 0 : -EINVAL;
}

static int open_devnull(void)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd >= 0)
                return fd;
        /* No /dev/null in this root: an empty pipe reads as EOF too. */
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        close(p[1]);
        return p[0];
}

static int setup(struct init_ctx *ctx, int listen_fd, const char *listen_path, bool guard,
                 char **argv, int argc)
{
        struct rlimit rl;
        int r;

        /* Not dumpable: the workload runs as the same uid, and must not be
         * able to ptrace PID 1 or open its /proc/1/fd (and so its sockets). */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return -errno;
        /* Outside a pid namespace, orphans still have to come back to us. */
        if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
                return -errno;
        if ((r = ensure_stdio()) < 0)
                return r;
        umask(022);
        /* A fixed threshold: big buffers (exec output, answers) always come
         * from mmap and are returned when freed, instead of glibc raising
         * the threshold and keeping them in a heap that never shrinks. */
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);
        /* Room for INIT_MAX_CONNS connections and every process's pipes;
         * children get the original soft limit back, as their soft and hard
         * limit: the runtime's open-file cap (max_open_files), which they
         * cannot raise. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                ctx->child_nofile = (struct rlimit){rl.rlim_cur, rl.rlim_cur};
                ctx->restore_nofile = rl.rlim_max != rl.rlim_cur;
                rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 65536 : MIN(rl.rlim_max, 65536);
                if (rl.rlim_cur > ctx->child_nofile.rlim_cur)
                        setrlimit(RLIMIT_NOFILE, &rl);
        }
        if ((r = setup_signals(ctx)) < 0)
                return r;
        r = listen_path ? listen_on_path(ctx, listen_path) : listen_on_fd(ctx, listen_fd);
        if (r < 0)
                return r;
        /* Kept for a quiesce: the guard blanks argv, where the path is. */
        if (listen_path && !(ctx->listen_path = strdup(listen_path)))
                return -ENOMEM;
        if ((ctx->devnull_fd = open_devnull()) < 0)
                return ctx->devnull_fd;
        if (guard && (r = guard_start(ctx, listen_path, argc, argv)) < 0)
                return r;
        ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (ctx->epfd < 0)
                return -errno;
        ctx->listen_w = (struct watch){.kind = W_LISTEN};
        ctx->sig_w = (struct watch){.kind = W_SIGNAL};
        if ((r = loop_watch(ctx, ctx->listen_fd, &ctx->listen_w, EPOLLIN)) < 0 ||
            (r = loop_watch(ctx, ctx->sigfd, &ctx->sig_w, EPOLLIN)) < 0)
                return r;
        return 0;
}

/* ---------------------------------------------------------------- loop */

static void on_signal(struct init_ctx *ctx)
{
        struct signalfd_siginfo si;
        while (read(ctx->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
        proc_reap_all(ctx); /* SIGCHLDs coalesce: reap until none is left */
}

static void on_listen(struct init_ctx *ctx)
{
        int r = conn_accept_all(ctx);
        if (r == -EMFILE || r == -ENFILE || r == -ENOBUFS || r == -ENOMEM) {
                /* Cannot take more now; retry shortly instead of spinning. */
                loop_unwatch(ctx, ctx->listen_fd);
                ctx->listen_paused = true;
                ctx->listen_resume_us = mono_us() + ACCEPT_PAUSE_US;
        }
}

static int64_t next_deadline(const struct init_ctx *ctx)
{
        int64_t next = INT64_MAX;

        for (const struct proc *p = ctx->procs_head; p; p = p->next)
                if (p->is_exec && !p->exited && !p->timed_out && p->deadline_us)
                        next = MIN(next, p->deadline_us);
        for (const struct conn *c = ctx->conns; c; c = c->next)
                if (c->held == HELD_POLL || (c->held == HELD_STDIN && c->deadline_us))
                        next = MIN(next, c->deadline_us);
        if (ctx->listen_paused)
                next = MIN(next, ctx->listen_resume_us);
        return MIN(next, quiesce_deadline(ctx));
}

static int loop_timeout(const struct init_ctx *ctx)
{
        int64_t next = next_deadline(ctx);
        if (next == INT64_MAX)
                return -1;
        int64_t now = mono_us();
        if (next <= now)
                return 0;
        int64_t ms = (next - now + 999) / 1000;
        return ms > INT_MAX ? INT_MAX : (int)ms;
}

static void run_timers(struct init_ctx *ctx)
{
        int64_t now = mono_us();
        struct conn *next;

        proc_check_deadlines(ctx, now);
        for (struct conn *c = ctx->conns; c; c = next) {
                next = c->next;
                if (c->held == HELD_POLL && c->deadline_us <= now)
                        handlers_poll_expired(ctx, c);
                else if (c->held == HELD_STDIN && c->deadline_us && c->deadline_us <= now)
                        handlers_stdin_expired(ctx, c);
        }
        quiesce_tick(ctx, now);
        if (ctx->listen_paused && ctx->listen_resume_us <= now &&
            loop_watch(ctx, ctx->listen_fd, &ctx->listen_w, EPOLLIN) == 0)
                ctx->listen_paused = false;
}

static void dispatch(struct init_ctx *ctx, const struct epoll_event *ev)
{
        struct watch *w = ev->data.ptr;

        switch (w->kind) {
        case W_LISTEN:
                on_listen(ctx);
                break;
        case W_SIGNAL:
                on_signal(ctx);
                break;
        case W_CONN:
                conn_on_event(ctx, w->owner, ev->events);
                break;
        case W_STREAM:
                proc_on_stream(ctx, w->owner, w->index);
                break;
        case W_STDIN:
                proc_on_stdin(ctx, w->owner);
                break;
        case W_RELAY:
                tcp_relay_on_event(ctx, w->owner);
                break;
        }
}

static int loop_run(struct init_ctx *ctx)
{
        struct epoll_event evs[MAX_EVENTS];

        proc_reap_all(ctx);
        for (;;) {
                int n = epoll_wait(ctx->epfd, evs, MAX_EVENTS, loop_timeout(ctx));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                for (int i = 0; i < n; i++)
                        dispatch(ctx, &evs[i]);
                run_timers(ctx);
                conn_run_ready(ctx);
                stream_run_pumps(ctx);
                /* Nothing from this batch points at the dead any more. */
                conn_free_dead(ctx);
                proc_free_dead(ctx);
                tcp_relay_free_dead(ctx);
        }
}

int main(int argc, char **argv)
{
        struct init_ctx ctx = {.epfd = -1,
                               .sigfd = -1,
                               .listen_fd = -1,
                               .devnull_fd = -1,
                               .guard = {.pid = -1, .life_fd = -1, .mnt_fd = -1, .own_pid_ns = -1}};
        const char *path;
        bool guard;
        int fd, r;

        if (parse_args(argc, argv, &fd, &path, &guard) < 0) {
                fprintf(stderr, "usage: sandbox-init --listen-fd=N | --listen=PATH [--guard]\n");
                return 2;
        }
        r = setup(&ctx, fd, path, guard, argv, argc);
        if (r < 0) {
                fprintf(stderr, "sandbox-init: setup: %s\n", strerror(-r));
                return 1;
        }
        r = loop_run(&ctx);
        fprintf(stderr, "sandbox-init: event loop: %s\n", strerror(-r));
        return 1;
}
