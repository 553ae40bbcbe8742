/* SPDX-License-Identifier: MIT */
/* --guard: the workload runs in a pid namespace of its own, below
 * sandbox-init, with a tiny PID 1 of its own (the guard).
 *
 * Why: under gVisor sandbox-init is PID 1 of the sandbox but gVisor does
 * not protect a pid-namespace init the way Linux does. A workload's
 * `kill -9 1` killed sandbox-init and the whole sandbox; its /proc/1
 * environ, cmdline, maps and fd links were readable; and the agent
 * socket's path was there for it to connect to and drive PID 1.
 *
 * So, at startup and whenever the guard is gone:
 *   unshare(CLONE_NEWPID)  every child forked from now on lands in a new
 *                          pid namespace; the first one is its PID 1
 *   fork the guard         in a mount namespace of its own: "/" private,
 *                          a fresh /proc (of the new pid namespace: no
 *                          sandbox-init in it), an empty read-only tmpfs
 *                          over the agent socket's directory; no fd but
 *                          its life socket, no argv or environment, every
 *                          catchable signal ignored; it reaps orphans
 *   get its mount ns fd    which every workload joins between fork and
 *                          exec, then drops CAP_SYS_ADMIN (given to
 *                          sandbox-init only so that it can do this)
 *
 * sandbox-init sees the workloads under its own pids, so waitpid and
 * kill(-pgid) work as before. The workload can still kill the guard: that
 * kills every process of its namespace (as on Linux), sandbox-init reaps
 * them and the guard, and the next fork makes a new namespace and guard.
 * A fork into a namespace whose init is dead fails with ENOMEM, so the
 * guard is checked before every fork, and after a fork failing so: on
 * Linux the guard's end of its life socket is closed by then, under gVisor
 * it may close tens of milliseconds later (25 ms seen). */
#include "init.h"

#include "../common/fdpass.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define GUARD_NAME "sandbox-guard"

/* ------------------------------------------------------------ the guard */

/* The guard is a copy of sandbox-init: its /proc/1/cmdline and environ
 * would show sandbox-init's (gVisor lets the workload read them). Blank
 * the strings where they are: argv, and the environment right after. */
static void guard_blank_title(const struct guard *g)
{
        if (!g->title)
                return;
        memset(g->title, 0, g->title_len);
        memcpy(g->title, GUARD_NAME, MIN(sizeof(GUARD_NAME), g->title_len));
        prctl(PR_SET_NAME, GUARD_NAME, 0, 0, 0);
}

/* glibc refuses to touch the signals it keeps for itself (SIGCANCEL,
 * SIGSETXID); the guard has no threads and never changes ids, so they are
 * ignored too, through the system call. */
struct kernel_sigaction {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        uint64_t mask;
};

static void guard_ignore_signals(void)
{
        struct kernel_sigaction ksa = {.handler = SIG_IGN};
        sigset_t chld;

        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD)
                        syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof(ksa.mask));
        /* SIGCHLD keeps its default disposition and stays blocked: kept
         * pending, it wakes sigwaitinfo in the reaping loop. */
        ksa.handler = SIG_DFL;
        syscall(SYS_rt_sigaction, SIGCHLD, &ksa, NULL, sizeof(ksa.mask));
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_SETMASK, &chld, NULL);
}

/* The guard's namespaces; *ret_mnt: an fd of its mount namespace. It is
 * opened here, through the new /proc, and passed over the life socket:
 * sandbox-init's /proc may be of another pid namespace than its own (so
 * /proc/<pid> would be someone else), and the guard is not dumpable (so
 * opening its ns files would take CAP_SYS_PTRACE). 0 or an errno. */
static int guard_namespaces(const struct guard *g, int *ret_mnt)
{
        /* Outside a pid namespace of its own sandbox-init may die without
         * taking the guard with it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (unshare(CLONE_NEWNS) < 0)
                return errno;
        /* Private: the mounts below stay in this namespace, and nothing
         * sandbox-init mounts later reaches it. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return errno;
        /* A proc of the new pid namespace: sandbox-init is not in it. */
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return errno;
        /* Its kernel's knobs read-only, as the ns class's are (under gVisor
         * they are the sandbox's own, yet ip_forward of its network stack
         * would be writable); one that does not exist is fine. */
        static const char *const ro[] = {"/proc/sys", "/proc/sysrq-trigger"};
        for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
                if (mount(ro[i], ro[i], NULL, MS_BIND, NULL) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return errno;
                }
                if (mount(NULL, ro[i], NULL,
                          MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          NULL) < 0)
                        return errno;
        }
        /* The agent socket's directory: empty and read-only here, so the
         * workload cannot connect to PID 1 and drive it. */
        if (g->hide_dir && mount("tmpfs", g->hide_dir, "tmpfs",
                                 MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555") < 0)
                return errno;
        if (chdir("/") < 0)
                return errno;
        *ret_mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
        return *ret_mnt < 0 ? errno : 0;
}

static _Noreturn void guard_main(const struct guard *g, int life)
{
        int mnt = -1;
        int st = guard_namespaces(g, &mnt);
        sigset_t chld;

        if (st != 0) {
                ssize_t n = write(life, &st, sizeof(st));
                (void)n;
                _exit(1);
        }
        /* Named before it says it is ready: a process started right after
         * must see pid 1 as the guard, never as a copy of sandbox-init. */
        guard_blank_title(g);
        if (fd_send(life, &st, sizeof(st), mnt, 0) < 0)
                _exit(1); /* sandbox-init reads EOF */
        guard_ignore_signals();
        /* Nothing of sandbox-init's: not the listener, no connection. The
         * life socket stays open until the guard dies. */
        for (int fd = 0; fd < life; fd++)
                close(fd);
        proc_close_from(life + 1);
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        for (;;) {
                /* Orphans of the workload; reparenting makes their exit
                 * signal SIGCHLD. */
                while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
                        ;
                sigwaitinfo(&chld, NULL);
        }
}

/* ------------------------------------------------------- sandbox-init */

static void guard_drop(struct guard *g)
{
        /* An unreaped guard is reaped later as an unknown child. */
        g->pid = -1;
        close_fd(&g->life_fd);
        close_fd(&g->mnt_fd);
}

/* Every child forked from now on lands in a new pid namespace. */
static int guard_new_pid_ns(const struct guard *g)
{
        if (unshare(CLONE_NEWPID) == 0)
                return 0;
        /* Linux makes only one: while the namespace for children is not
         * our own, it is EINVAL until setns() back to ours. gVisor allows
         * the unshare again, and refuses that setns. */
        if (errno != EINVAL || g->own_pid_ns < 0 || setns(g->own_pid_ns, CLONE_NEWPID) < 0)
                return -EINVAL;
        return unshare(CLONE_NEWPID) < 0 ? -errno : 0;
}

static int guard_spawn(struct guard *g)
{
        int life[2], st = 0, mnt = -1;
        int r = guard_new_pid_ns(g);

        if (r < 0)
                return r;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, life) < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                close(life[0]);
                close(life[1]);
                return r;
        }
        if (pid == 0) {
                close(life[0]);
                guard_main(g, life[1]);
        }
        close(life[1]);
        ssize_t n = fd_recv(life[0], &st, sizeof(st), &mnt, 0);
        if (n == (ssize_t)sizeof(st) && st == 0 && mnt >= 0) {
                g->pid = pid;
                g->life_fd = life[0];
                g->mnt_fd = mnt;
                return 0;
        }
        close_fd(&mnt);
        close(life[0]);
        /* It never had a workload: nothing holds its exit up. */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (n < 0)
                return (int)n;
        return n == (ssize_t)sizeof(st) && st ? -st : -EIO;
}

/* Its end of the life socket closes as it dies: end of file. Only that
 * counts, not data (none is sent after the namespace fd). POLLIN, not
 * just the hang-up: gVisor's poll does not wake for a hang-up alone. */
static bool guard_alive(const struct guard *g, int wait_ms)
{
        struct pollfd pfd = {.fd = g->life_fd, .events = POLLIN};
        char c;

        if (g->pid <= 0)
                return false;
        if (poll(&pfd, 1, wait_ms) <= 0)
                return true;
        if (pfd.revents & (POLLERR | POLLNVAL))
                return false;
        return recv(g->life_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
}

int guard_start(struct init_ctx *ctx, const char *listen_path, int argc, char **argv)
{
        struct guard *g = &ctx->guard;

        g->on = true;
        g->pid = g->life_fd = g->mnt_fd = -1;
        g->own_pid_ns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC); /* -1: gVisor needs none */
        if (argc > 0) {
                char *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
                for (char **e = environ; e && *e == end; e++)
                        end += strlen(*e) + 1;
                g->title = argv[0];
                g->title_len = (size_t)(end - argv[0]);
        }
        if (listen_path) {
                char *copy = strdup(listen_path);
                if (!copy)
                        return -ENOMEM;
                g->hide_dir = realpath(dirname(copy), NULL);
                free(copy);
                if (!g->hide_dir)
                        return -errno;
                /* Hiding "/" would hide everything. */
                if (strcmp(g->hide_dir, "/") == 0)
                        return -EINVAL;
        }
        return guard_spawn(g);
}

int guard_ensure(struct init_ctx *ctx)
{
        struct guard *g = &ctx->guard;

        if (!g->on || guard_alive(g, 0))
                return 0;
        guard_drop(g);
        return guard_spawn(g);
}

bool guard_lost(const struct init_ctx *ctx, int wait_ms)
{
        return ctx->guard.on && !guard_alive(&ctx->guard, wait_ms);
}

bool guard_reaped(struct init_ctx *ctx, pid_t pid)
{
        if (!ctx->guard.on || pid != ctx->guard.pid)
                return false;
        guard_drop(&ctx->guard);
        return true;
}

/* ---------------------------------------------------------- the child */

int guard_enter(const struct guard *g)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
        const uint32_t bit = 1u << (CAP_SYS_ADMIN % 32);
        const int i = CAP_SYS_ADMIN / 32;

        /* Resets root and cwd to the namespace's; chdir comes later. */
        if (setns(g->mnt_fd, CLONE_NEWNS) < 0)
                return -errno;
        /* The workload gets the capabilities it has in the ns class: none
         * to mount or unmount (and so uncover the socket directory), to
         * make namespaces, or to join sandbox-init's mount namespace. Out
         * of the bounding set too, or an exec as root would get it back. */
        if (prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) < 0)
                return -errno;
        if (syscall(SYS_capget, &hdr, data) < 0)
                return -errno;
        data[i].effective &= ~bit;
        data[i].permitted &= ~bit;
        data[i].inheritable &= ~bit;
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        return 0;
}
