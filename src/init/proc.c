/* SPDX-License-Identifier: MIT */
/* The process table of sandbox-init: starting commands, collecting their
 * output, reaping them, feeding their stdin. */
#include "init.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char **environ;

/* How much one readiness event may read from a pipe before others get a
 * turn, and how much is drained from a pipe when its process exits (more
 * than the largest pipe buffer, /proc/sys/fs/pipe-max-size = 1 MiB). */
#define READ_BUDGET (1u << 20)
#define DRAIN_BUDGET (2u << 20)

/* The child tells the parent why it could not exec through a CLOEXEC pipe:
 * the pipe closes empty when execve succeeds. */
enum child_stage { STAGE_SETUP = 1, STAGE_CWD = 2, STAGE_EXEC = 3 };
struct child_report {
        int32_t stage;
        int32_t err;
};

struct child_fds {
        int in, out, err, report;
        bool terminal; /* in = out = err: a terminal's, to be made the controlling one */
};

static uint8_t io_buf[64 * 1024]; /* single-threaded: one scratch buffer */

/* ---------------------------------------------------------------- child */

static _Noreturn void child_fail(int report_fd, int stage, int err)
{
        struct child_report rep = {.stage = stage, .err = err};
        ssize_t n = write(report_fd, &rep, sizeof(rep));
        (void)n;
        _exit(err == ENOENT ? 127 : 126);
}

void proc_close_from(int first)
{
#ifdef SYS_close_range
        /* INT_MAX, not ~0u: no fd is above it, and gVisor refuses a last fd
         * beyond INT_MAX with EINVAL where Linux clamps it. The loop below
         * is the fallback only: under gVisor with a hard RLIMIT_NOFILE of
         * 65536 it made every exec cost 200 ms instead of 17. */
        if (syscall(SYS_close_range, (unsigned)first, (unsigned)INT_MAX, 0u) == 0)
                return;
#endif
        long max = sysconf(_SC_OPEN_MAX);
        if (max < 0 || max > (1L << 20))
                max = 1L << 20;
        for (int fd = first; fd < max; fd++)
                close(fd);
}

/* Runs between clone and exec, in PID 1's memory (spawn_child): only
 * system calls and what writes nothing PID 1 reads; no malloc. */
static _Noreturn void child_run(const struct init_ctx *ctx, const struct proc_spec *spec,
                                const struct child_fds *fds)
{
        int report = fds->report;
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigset_t none;
        int r;

        /* First: everything below sees the guard's filesystem view. */
        if (ctx->guard.on && (r = guard_enter(&ctx->guard)) < 0)
                child_fail(report, STAGE_SETUP, -r);

        /* Own process group, so that a signal or a timeout reaches every
         * process the command starts (a shell and its children). On a
         * terminal, a session of its own whose controlling tty it is. */
        if (fds->terminal) {
                if (setsid() < 0 || ioctl(fds->in, TIOCSCTTY, 0) < 0)
                        child_fail(report, STAGE_SETUP, errno);
        } else {
                setpgid(0, 0);
        }

        /* Nothing of PID 1's signal setup (ignored SIGPIPE, blocked
         * SIGCHLD) may leak into the workload. */
        sigemptyset(&sa.sa_mask);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);

        if (dup2(fds->in, 0) < 0 || dup2(fds->out, 1) < 0 || dup2(fds->err, 2) < 0)
                child_fail(report, STAGE_SETUP, errno);
        if (report != 3) {
                if (dup3(report, 3, O_CLOEXEC) < 0)
                        child_fail(report, STAGE_SETUP, errno);
                report = 3;
        }
        /* The workload must not inherit the agent's listening socket or any
         * connection: with one it could drive PID 1 or impersonate the
         * daemon. Everything above the report pipe goes. */
        proc_close_from(4);
        if (ctx->restore_nofile)
                setrlimit(RLIMIT_NOFILE, &ctx->child_nofile);

        /* The runtime makes PID 1 exempt from the OOM killer; the workload
         * must not be (raising the score needs no privilege). Fail closed:
         * an unkillable workload could starve its own agent. */
        int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (oom < 0 || write(oom, "0\n", 2) != 2)
                child_fail(report, STAGE_SETUP, errno ? errno : EIO);
        close(oom);
        /* Last, as the user: /proc/self is no longer ours to write after. */
        if (spec->as_user) {
                gid_t g = spec->gid;
                if (syscall(SYS_setgroups, 1, &g) < 0 || syscall(SYS_setresgid, g, g, g) < 0 ||
                    syscall(SYS_setresuid, spec->uid, spec->uid, spec->uid) < 0)
                        child_fail(report, STAGE_SETUP, errno);
        }
        if (chdir(spec->cwd) < 0)
                child_fail(report, STAGE_CWD, errno);
        /* execvp looks PATH up in environ: make it the command's env. The
         * child shares PID 1's memory: spawn_child puts PID 1's back. */
        environ = spec->env;
        execvp(spec->argv[0], spec->argv);
        child_fail(report, STAGE_EXEC, errno);
}

/* The child runs on this stack in PID 1's memory (CLONE_VM) while PID 1
 * waits (CLONE_VFORK): one at a time. */
static char child_stack[256 * 1024] __attribute__((aligned(16)));

struct child_args {
        const struct init_ctx *ctx;
        const struct proc_spec *spec;
        const struct child_fds *fds;
};

static int child_entry(void *arg)
{
        const struct child_args *a = arg;
        child_run(a->ctx, a->spec, a->fds);
}

/* fork() and exec, without copying PID 1's address space for a child that
 * replaces it at once: the child shares it until its execve (as
 * posix_spawn does). Under gVisor every address space is a host stub
 * process; this halves what an exec makes. Every signal is blocked
 * around it, so no handler of PID 1 ever runs on the child's stack. */
static pid_t spawn_child(const struct init_ctx *ctx, const struct proc_spec *spec,
                         const struct child_fds *fds)
{
        struct child_args a = {.ctx = ctx, .spec = spec, .fds = fds};
        sigset_t all, old;
        char **env = environ;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        pid_t pid = clone(child_entry, child_stack + sizeof(child_stack),
                          CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
        int e = errno;
        environ = env; /* the child has exec'd or exited by now */
        sigprocmask(SIG_SETMASK, &old, NULL);
        errno = e;
        return pid;
}

/* --------------------------------------------------------------- tables */

static void proc_make_id(struct init_ctx *ctx, char out[48])
{
        uint64_t rnd;

        /* Random so that ids stay unique across a restart of the agent. */
        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
                rnd = (uint64_t)mono_us() * 0x9E3779B97F4A7C15ull ^ (uint64_t)now_ms() ^
                      ((uint64_t)getpid() << 40);
        ctx->seq++;
        snprintf(out, 48, "p%llu-%016llx", (unsigned long long)ctx->seq, (unsigned long long)rnd);
}

struct proc *proc_find(struct init_ctx *ctx, const char *id)
{
        for (struct proc *p = ctx->procs_head; p; p = p->next)
                if (p->listed && strcmp(p->id, id) == 0)
                        return p;
        return NULL;
}

static struct proc *proc_find_pid(struct init_ctx *ctx, pid_t pid)
{
        for (struct proc *p = ctx->procs_head; p; p = p->next)
                if (!p->exited && p->pid == pid)
                        return p;
        return NULL;
}

static void stream_close(struct init_ctx *ctx, struct stream *s)
{
        if (s->fd >= 0) {
                loop_unwatch(ctx, s->fd);
                close_fd(&s->fd);
        }
}

static void stdin_close(struct init_ctx *ctx, struct proc *p)
{
        if (p->in_fd >= 0) {
                if (p->in_watched)
                        loop_unwatch(ctx, p->in_fd);
                p->in_watched = false;
                close_fd(&p->in_fd);
        }
}

static struct proc *proc_new(void)
{
        struct proc *p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        for (int i = 0; i < 2; i++) {
                p->out[i].fd = -1;
                p->out[i].w = (struct watch){.kind = W_STREAM, .owner = p, .index = i};
        }
        p->in_w = (struct watch){.kind = W_STDIN, .owner = p};
        p->in_fd = -1;
        p->pty_fd = -1;
        p->err_fd = -1;
        p->pid = -1;
        buf_init(&p->in_q, INIT_STDIN_QUEUE_MAX);
        return p;
}

static void proc_release(struct init_ctx *ctx, struct proc *p)
{
        for (int i = 0; i < 2; i++) {
                stream_close(ctx, &p->out[i]);
                ring_free(&p->out[i].ring);
                buf_free(&p->out[i].kept);
        }
        stdin_close(ctx, p);
        close_fd(&p->pty_fd);
        close_fd(&p->err_fd);
        buf_free(&p->in_q);
        if (p->argv)
                for (size_t i = 0; i < p->argc; i++)
                        free(p->argv[i]);
        free(p->argv);
        p->argv = NULL;
        p->argc = 0;
        free(p->cwd);
        p->cwd = NULL;
}

static int proc_copy_argv(struct proc *p, char **argv, size_t argc)
{
        p->argv = calloc(argc + 1, sizeof(char *));
        if (!p->argv)
                return -ENOMEM;
        for (size_t i = 0; i < argc; i++) {
                p->argv[i] = strdup(argv[i]);
                if (!p->argv[i])
                        return -ENOMEM;
                p->argc = i + 1;
                p->argv_bytes += strlen(argv[i]) + 1;
        }
        return 0;
}

/* The parent's end is non-blocking; the child's stays blocking. */
static int make_pipe(int fds[2], int parent_end)
{
        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        int fl = fcntl(fds[parent_end], F_GETFL);
        if (fl < 0 || fcntl(fds[parent_end], F_SETFL, fl | O_NONBLOCK) < 0) {
                int r = -errno;
                close(fds[0]);
                close(fds[1]);
                return r;
        }
        return 0;
}

static void close_pair(int fds[2])
{
        close_fd(&fds[0]);
        close_fd(&fds[1]);
}

struct spawn_pipes {
        int out[2], err[2], report[2], in[2];
        int master, slave; /* a terminal's, or -1 */
};

/* A terminal of the asked size: the master non-blocking (ours), the slave
 * for the child. Neither becomes PID 1's controlling tty (O_NOCTTY). */
static int open_terminal(const struct proc_spec *spec, struct spawn_pipes *sp,
                         struct sbx_error *err)
{
        char name[64];
        struct winsize ws = {.ws_row = (unsigned short)spec->pty_rows,
                             .ws_col = (unsigned short)spec->pty_cols};
        sp->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (sp->master < 0)
                return sbx_error_set(err, errno, "open a terminal (/dev/ptmx)");
        if (grantpt(sp->master) < 0 || unlockpt(sp->master) < 0 ||
            ptsname_r(sp->master, name, sizeof(name)) != 0)
                return sbx_error_set(err, errno, "set up a terminal");
        sp->slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (sp->slave < 0)
                return sbx_error_set(err, errno, "open %s", name);
        if (ioctl(sp->master, TIOCSWINSZ, &ws) < 0)
                return sbx_error_set(err, errno, "set the terminal's size");
        return 0;
}

static int open_pipes(const struct proc_spec *spec, struct spawn_pipes *sp, struct sbx_error *err)
{
        int r;
        if ((r = make_pipe(sp->report, 0)) < 0)
                return sbx_error_set(err, -r, "pipe");
        if (spec->pty_cols > 0)
                return open_terminal(spec, sp, err);
        if ((r = make_pipe(sp->out, 0)) < 0 || (r = make_pipe(sp->err, 0)) < 0)
                return sbx_error_set(err, -r, "pipe");
        if (spec->stdin_pipe && (r = make_pipe(sp->in, 1)) < 0)
                return sbx_error_set(err, -r, "pipe");
        return 0;
}

static void close_pipes(struct spawn_pipes *sp)
{
        close_pair(sp->out);
        close_pair(sp->err);
        close_pair(sp->report);
        close_pair(sp->in);
        close_fd(&sp->master);
        close_fd(&sp->slave);
}

static int proc_prepare(const struct proc_spec *spec, struct proc *p, struct sbx_error *err)
{
        int r = proc_copy_argv(p, spec->argv, spec->argc);
        if (r < 0)
                return sbx_error_set(err, -r, "copy argv");
        p->cwd = strdup(spec->cwd);
        if (!p->cwd)
                return sbx_error_set(err, ENOMEM, "copy cwd");
        p->is_exec = spec->is_exec;
        p->listed = !spec->is_exec;
        p->lossless = spec->lossless;
        p->pty = spec->pty_cols > 0;
        size_t ring = spec->lossless ? AGENT_LOSSLESS_RING_SIZE : AGENT_RING_SIZE;
        for (int i = 0; i < 2; i++) {
                if (spec->is_exec)
                        buf_init(&p->out[i].kept, spec->max_output);
                else if ((r = ring_alloc(&p->out[i].ring, ring)) < 0)
                        return sbx_error_set(err, -r, "allocate output ring");
        }
        return 0;
}

/* After fork, in the parent: keep our ends, watch the output pipes. */
static int proc_adopt_fds(struct init_ctx *ctx, struct proc *p, struct spawn_pipes *sp,
                          struct sbx_error *err)
{
        p->err_fd = TAKE_FD(sp->report[0]);
        if (sp->master >= 0) {
                /* One terminal, three of our fds on it: its output, our
                 * writes to it (stdin) and its size. stderr is empty. */
                p->in_fd = fcntl(sp->master, F_DUPFD_CLOEXEC, 3);
                p->pty_fd = fcntl(sp->master, F_DUPFD_CLOEXEC, 3);
                p->out[0].fd = TAKE_FD(sp->master);
                p->out[1].settled = true;
                if (p->in_fd < 0 || p->pty_fd < 0)
                        return sbx_error_set(err, errno, "dup the terminal");
        } else {
                p->out[0].fd = TAKE_FD(sp->out[0]);
                p->out[1].fd = TAKE_FD(sp->err[0]);
                p->in_fd = TAKE_FD(sp->in[1]);
        }
        for (int i = 0; i < 2; i++) {
                if (p->out[i].fd < 0)
                        continue;
                int r = loop_watch(ctx, p->out[i].fd, &p->out[i].w, EPOLLIN);
                if (r < 0)
                        return sbx_error_set(err, -r, "epoll");
        }
        return 0;
}

/* How long a fork that failed ENOMEM waits to learn that the guard died
 * (it has, unless memory ran out). */
#define GUARD_DEATH_WAIT_MS 1000

/* In guard mode the child lands in the guard's pid namespace, where a
 * fork fails with ENOMEM once its init is dead: the guard is checked (and
 * made anew) before, and once more after a fork that failed so. */
static pid_t spawn_fork(struct init_ctx *ctx, const struct proc_spec *spec,
                        const struct child_fds *fds, struct sbx_error *err)
{
        int r = guard_ensure(ctx);
        if (r < 0)
                return sbx_error_set(err, -r, "start the guard of the pid namespace");
        pid_t pid = spawn_child(ctx, spec, fds);
        int e = errno;
        if (pid < 0 && e == ENOMEM && guard_lost(ctx, GUARD_DEATH_WAIT_MS)) {
                if ((r = guard_ensure(ctx)) < 0)
                        return sbx_error_set(err, -r, "start the guard of the pid namespace");
                pid = spawn_child(ctx, spec, fds);
                e = errno;
        }
        if (pid < 0)
                return sbx_error_set(err, e, "fork");
        return pid;
}

int proc_start(struct init_ctx *ctx, const struct proc_spec *spec, struct proc **ret,
               struct sbx_error *err)
{
        struct spawn_pipes sp = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, -1, -1};
        struct proc *p = proc_new();
        int r;

        if (!p)
                return sbx_error_set(err, ENOMEM, "allocate process");
        r = proc_prepare(spec, p, err);
        if (r >= 0)
                r = open_pipes(spec, &sp, err);
        if (r < 0)
                goto fail;
        proc_make_id(ctx, p->id);

        struct child_fds cf = {
            .in = spec->stdin_pipe ? sp.in[0] : ctx->devnull_fd,
            .out = sp.out[1],
            .err = sp.err[1],
            .report = sp.report[1],
        };
        if (sp.slave >= 0)
                cf = (struct child_fds){sp.slave, sp.slave, sp.slave, sp.report[1], true};
        p->fork_us = mono_us();
        p->started_at = now_ms();
        pid_t pid = spawn_fork(ctx, spec, &cf, err);
        if (pid < 0) {
                r = pid;
                goto fail;
        }

        p->pid = pid;
        /* Also from here: a SIGNAL right after SPAWN must find the group
         * even if the child has not run yet. EACCES once it has exec'd is
         * fine, it did setpgid itself. */
        setpgid(pid, pid);
        if (spec->is_exec && spec->timeout_ms > 0)
                p->deadline_us = p->fork_us + spec->timeout_ms * 1000;

        p->prev = ctx->procs_tail;
        if (ctx->procs_tail)
                ctx->procs_tail->next = p;
        else
                ctx->procs_head = p;
        ctx->procs_tail = p;
        ctx->n_running++;

        r = proc_adopt_fds(ctx, p, &sp, err);
        close_pipes(&sp);
        if (r < 0) {
                /* The child runs but we cannot watch it: stop it cleanly. */
                kill(-pid, SIGKILL);
                kill(pid, SIGKILL);
                proc_forget(ctx, p);
                return r;
        }
        *ret = p;
        return 0;
fail:
        close_pipes(&sp);
        proc_release(ctx, p);
        free(p);
        return r;
}

void proc_forget(struct init_ctx *ctx, struct proc *p)
{
        if (p->dead)
                return;
        /* Whoever still waits on it learns it is gone. */
        stream_proc_gone(ctx, p, "was killed");
        while (p->waiters) {
                struct conn *c = p->waiters;
                if (c->held == HELD_STDIN)
                        conn_reply_err(ctx, c, AGENT_E_STATE, "process %s was killed", p->id);
                else
                        conn_reply_err(ctx, c, AGENT_E_NOT_FOUND, "process %s was killed", p->id);
                if (p->waiters == c) /* conn_reply always unholds; be sure */
                        conn_unhold(c);
        }
        if (p->answer_conn)
                p->answer_conn->answer_of = NULL;
        p->answer_conn = NULL;
        proc_release(ctx, p);
        if (p->prev)
                p->prev->next = p->next;
        else
                ctx->procs_head = p->next;
        if (p->next)
                p->next->prev = p->prev;
        else
                ctx->procs_tail = p->prev;
        if (!p->exited)
                ctx->n_running--;
        p->dead = true;
        p->next = ctx->dead_procs;
        p->prev = NULL;
        ctx->dead_procs = p;
}

void proc_free_dead(struct init_ctx *ctx)
{
        while (ctx->dead_procs) {
                struct proc *p = ctx->dead_procs;
                ctx->dead_procs = p->next;
                free(p);
        }
}

void proc_kill_group(struct proc *p, int sig)
{
        if (p->exited || p->pid <= 0)
                return;
        if (kill(-p->pid, sig) < 0 && errno == ESRCH)
                kill(p->pid, sig);
}

void proc_check_deadlines(struct init_ctx *ctx, int64_t now_us)
{
        for (struct proc *p = ctx->procs_head; p; p = p->next) {
                if (p->is_exec && !p->exited && !p->timed_out && p->deadline_us &&
                    now_us >= p->deadline_us) {
                        p->timed_out = true;
                        proc_kill_group(p, SIGKILL);
                }
        }
}

/* What an exited record holds on to: its output and its command line. */
static uint64_t proc_retained(const struct proc *p)
{
        uint64_t n = p->argv_bytes;
        for (int i = 0; i < 2; i++)
                n += MIN(p->out[i].ring.total, (uint64_t)p->out[i].ring.size) + p->out[i].kept.len;
        return n;
}

/* Only running processes count against AGENT_MAX_PROCS; an exited one is
 * kept for polling until it is killed, but not without bound: beyond
 * AGENT_MAX_EXITED records, or AGENT_EXITED_OUTPUT_MAX bytes held by them,
 * the record that exited first (and has no stream reader) is forgotten. The table holds at most 64
 * running and 65 exited records when this runs: the scans are cheap. */
void proc_trim_exited(struct init_ctx *ctx)
{
        for (;;) {
                struct proc *oldest = NULL;
                unsigned n = 0;
                uint64_t bytes = 0;
                for (struct proc *p = ctx->procs_head; p; p = p->next) {
                        if (!p->listed || !p->exited)
                                continue;
                        n++;
                        bytes += proc_retained(p);
                        /* One being read by a stream is not forgotten under
                         * its reader: it goes once the reader is done. */
                        if (stream_has_readers(p))
                                continue;
                        if (!oldest || p->exit_seq < oldest->exit_seq)
                                oldest = p;
                }
                if (!oldest || (n <= AGENT_MAX_EXITED && bytes <= AGENT_EXITED_OUTPUT_MAX))
                        return;
                proc_forget(ctx, oldest);
        }
}

void proc_exec_answered(struct init_ctx *ctx, struct proc *p, bool delivered)
{
        if (p->answer_conn)
                p->answer_conn->answer_of = NULL;
        p->answer_conn = NULL;
        if (p->dead || p->listed)
                return;
        if (delivered) {
                proc_forget(ctx, p); /* a finished exec is not kept */
                return;
        }
        /* Nobody holds the result any more: keep it where a restarted
         * daemon (or one that gave up waiting) can find it. */
        p->listed = true;
        if (p->exited)
                proc_trim_exited(ctx);
}

/* --------------------------------------------------------------- output */

static void stream_feed(struct proc *p, struct stream *s, const uint8_t *d, size_t n)
{
        if (!p->is_exec) {
                ring_write(&s->ring, d, n);
                return;
        }
        size_t room = s->kept.max - s->kept.len;
        size_t take = MIN(n, room);
        if (take && buf_append(&s->kept, d, take) < 0)
                take = 0; /* out of memory: what we cannot keep counts as cut */
        if (take < n)
                s->truncated = true;
}

uint64_t stream_start(const struct stream *s)
{
        return s->ring.data ? ring_start(&s->ring) : 0;
}

uint64_t stream_total(const struct stream *s)
{
        return s->ring.data ? s->ring.total : s->kept.len;
}

void stream_copy(const struct stream *s, uint64_t from, size_t len, uint8_t *out)
{
        if (s->ring.data)
                ring_copy(&s->ring, from, len, out);
        else if (len)
                memcpy(out, s->kept.data + from, len);
}

/* One read() of stream s: into its ring where the ring is (no copy), into
 * the scratch buffer for an exec's kept bytes. */
static ssize_t stream_read_once(struct proc *p, struct stream *s, size_t max)
{
        ssize_t n;
        if (s->ring.data) {
                size_t at = (size_t)(s->ring.total & (s->ring.size - 1));
                size_t span = MIN(max, s->ring.size - at);
                n = read(s->fd, s->ring.data + at, span);
                if (n > 0)
                        s->ring.total += (uint64_t)n;
                return n;
        }
        n = read(s->fd, io_buf, MIN(max, sizeof(io_buf)));
        if (n > 0)
                stream_feed(p, s, io_buf, (size_t)n);
        return n;
}

/* Stop watching a pipe that may not be read now: its writer blocks once
 * the pipe is full, until a reader takes what is held (stream.c). */
static void stream_pause(struct init_ctx *ctx, struct stream *s)
{
        if (s->paused || s->fd < 0)
                return;
        loop_unwatch(ctx, s->fd);
        s->paused = true;
}

void proc_stream_resume(struct init_ctx *ctx, struct proc *p, int index)
{
        struct stream *s = &p->out[index];
        if (!s->paused || s->fd < 0)
                return;
        if (loop_watch(ctx, s->fd, &s->w, EPOLLIN) == 0)
                s->paused = false;
}

/* Read what the pipe holds now, up to budget bytes and what the stream's
 * hold allows. True when anything changed (data or EOF). */
static bool stream_read(struct init_ctx *ctx, struct proc *p, int index, size_t budget)
{
        struct stream *s = &p->out[index];
        size_t allowed = stream_allowance(p, index);
        bool changed = false;
        size_t done = 0;

        budget = MIN(budget, allowed);
        while (s->fd >= 0 && done < budget) {
                ssize_t n = stream_read_once(p, s, budget - done);
                if (n > 0) {
                        done += (size_t)n;
                        changed = true;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        if (p->exited && !s->settled) {
                                s->settled = true; /* empty once it exited: no more now */
                                changed = true;
                        }
                        break;
                }
                /* EOF, EIO (a terminal nobody holds any more), or an error
                 * that will not go away. */
                stream_close(ctx, s);
                s->settled = true;
                changed = true;
        }
        if (s->fd >= 0 && done == allowed)
                stream_pause(ctx, s);
        return changed;
}

bool proc_stream_read(struct init_ctx *ctx, struct proc *p, int index)
{
        return stream_read(ctx, p, index, DRAIN_BUDGET);
}

void proc_on_stream(struct init_ctx *ctx, struct proc *p, int index)
{
        if (p->dead)
                return;
        if (stream_read(ctx, p, index, READ_BUDGET) && p->listed) {
                handlers_proc_changed(ctx, p);
                stream_proc_changed(ctx, p);
                if (p->exited) /* a background child still writes */
                        proc_trim_exited(ctx);
        }
}

/* Did the child report a failure to start? Then say why on its stderr. */
static void proc_read_report(struct proc *p)
{
        struct child_report rep;
        char line[512];

        if (p->err_fd < 0)
                return;
        ssize_t n = read(p->err_fd, &rep, sizeof(rep));
        close_fd(&p->err_fd);
        if (n != (ssize_t)sizeof(rep))
                return;
        const char *what = p->argc ? p->argv[0] : "";
        int len;
        if (rep.stage == STAGE_CWD)
                len =
                    snprintf(line, sizeof(line),
                             "sandbox-init: cannot run '%.200s': %s (working directory '%.200s')\n",
                             what, strerror(rep.err), p->cwd ? p->cwd : "");
        else
                len = snprintf(line, sizeof(line), "sandbox-init: cannot run '%.200s': %s\n", what,
                               strerror(rep.err));
        if (len > 0)
                stream_feed(p, &p->out[1], (const uint8_t *)line,
                            MIN((size_t)len, sizeof(line) - 1));
}

static void proc_exited(struct init_ctx *ctx, struct proc *p, int status)
{
        p->exited = true;
        p->exit_seq = ++ctx->exit_seq;
        ctx->n_running--;
        p->exit_us = mono_us();
        p->exited_at = now_ms();
        if (WIFEXITED(status))
                p->exit_code = WEXITSTATUS(status);
        else if (WIFSIGNALED(status))
                p->exit_code = 128 + WTERMSIG(status);
        else
                p->exit_code = 255;
        /* What it wrote just before exiting is in the pipes now: take it,
         * without waiting for EOF (a background child may keep them). */
        stream_read(ctx, p, 0, DRAIN_BUDGET);
        stream_read(ctx, p, 1, DRAIN_BUDGET);
        proc_read_report(p);
        handlers_proc_exited(ctx, p);
        proc_trim_exited(ctx);
}

void proc_reap_all(struct init_ctx *ctx)
{
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);
                if (pid < 0 && errno == EINTR)
                        continue;
                if (pid <= 0)
                        return;
                /* The guard is no workload; orphans re-parented to PID 1
                 * are reaped and forgotten. */
                if (guard_reaped(ctx, pid))
                        continue;
                struct proc *p = proc_find_pid(ctx, pid);
                if (p)
                        proc_exited(ctx, p, status);
        }
}

/* ---------------------------------------------------------------- stdin */

static void stdin_answer(struct init_ctx *ctx, struct proc *p, int error)
{
        struct conn *next;
        for (struct conn *c = p->waiters; c; c = next) {
                next = c->wnext;
                if (c->held != HELD_STDIN)
                        continue;
                if (error)
                        conn_reply_err(ctx, c, AGENT_E_STATE, "cannot write to the stdin of %s: %s",
                                       p->id, strerror(error));
                else if (c->stdin_target <= p->in_written)
                        conn_reply(ctx, c, NULL);
        }
}

static void stdin_break(struct init_ctx *ctx, struct proc *p, int error)
{
        stdin_close(ctx, p);
        p->in_broken = true;
        p->in_q.len = 0;
        p->in_qoff = 0;
        stdin_answer(ctx, p, error);
}

int proc_stdin_queue(struct init_ctx *ctx, struct proc *p, const void *data, size_t len,
                     bool close_after, uint64_t *ret_target)
{
        size_t pending = p->in_q.len - p->in_qoff;

        if (p->in_fd < 0)
                return -EPIPE;
        if (len > INIT_STDIN_QUEUE_MAX - pending)
                return -E2BIG;
        if (p->in_qoff) {
                memmove(p->in_q.data, p->in_q.data + p->in_qoff, pending);
                p->in_q.len = pending;
                p->in_qoff = 0;
        }
        int r = buf_append(&p->in_q, data, len);
        if (r < 0)
                return r;
        p->in_queued += len;
        if (close_after) {
                p->in_close_requested = true;
                p->in_close_at = p->in_queued;
        }
        *ret_target = p->in_queued;
        return 0;
}

void proc_stdin_flush(struct init_ctx *ctx, struct proc *p)
{
        while (p->in_fd >= 0 && p->in_qoff < p->in_q.len) {
                ssize_t n = write(p->in_fd, p->in_q.data + p->in_qoff, p->in_q.len - p->in_qoff);
                if (n > 0) {
                        p->in_qoff += (size_t)n;
                        p->in_written += (uint64_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                /* EPIPE (SIGPIPE is ignored in PID 1): the reader is gone. */
                stdin_break(ctx, p, n < 0 ? errno : EPIPE);
                return;
        }
        if (p->in_qoff == p->in_q.len)
                p->in_q.len = p->in_qoff = 0;
        bool pending = p->in_q.len > p->in_qoff;
        if (p->in_fd >= 0 && !pending && p->in_close_requested && p->in_written >= p->in_close_at)
                stdin_close(ctx, p);
        if (p->in_fd >= 0 && pending != p->in_watched) {
                /* Watch only while data waits: an idle pipe whose reader
                 * left would report EPOLLERR forever. */
                if (pending && loop_watch(ctx, p->in_fd, &p->in_w, EPOLLOUT) == 0)
                        p->in_watched = true;
                else if (!pending) {
                        loop_unwatch(ctx, p->in_fd);
                        p->in_watched = false;
                }
        }
        stdin_answer(ctx, p, 0);
}

uint64_t proc_stdin_abandon(struct init_ctx *ctx, struct proc *p, const struct conn *c)
{
        uint64_t written = MIN(p->in_written, c->stdin_target);

        written = written > c->stdin_start ? written - c->stdin_start : 0;
        if (p->in_written >= c->stdin_target)
                return written; /* all of it is in: nothing to drop */
        /* One write at a time (handlers.c): all that is queued is this one's. */
        p->in_q.len = p->in_qoff = 0;
        p->in_queued = p->in_written;
        p->in_close_requested = false;
        proc_stdin_flush(ctx, p); /* stop watching the pipe */
        return written;
}

void proc_on_stdin(struct init_ctx *ctx, struct proc *p)
{
        if (!p->dead)
                proc_stdin_flush(ctx, p);
}
