/* SPDX-License-Identifier: MIT */
#include "tool.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

const char *const tool_plain_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};

/* In the child, every descriptor it keeps is first moved this high, so
 * that setting up 0-3 cannot overwrite one not yet in place. */
#define TOOL_FD_FLOOR 16

/* The pipes of one run; [0] read end, [1] write end, -1 when unused. */
struct tool_io {
        int in[2], out[2], err[2];
        int report[2]; /* the child's exec errno; closed unread by a good exec */
};

static void io_close(struct tool_io *io)
{
        int *fds[] = {&io->in[0],  &io->in[1],  &io->out[0],    &io->out[1],
                      &io->err[0], &io->err[1], &io->report[0], &io->report[1]};
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                close_fd(fds[i]);
}

static int io_open(const struct tool_run *t, struct tool_io *io)
{
        if (pipe2(io->report, O_CLOEXEC) < 0 || (t->input && pipe2(io->in, O_CLOEXEC) < 0) ||
            (t->out && pipe2(io->out, O_CLOEXEC) < 0) ||
            (t->err_text && t->err_len && pipe2(io->err, O_CLOEXEC) < 0))
                return -errno;
        /* Our end of its stdin never blocks: its output is read meanwhile. */
        if (t->input && fcntl(io->in[1], F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

static bool executable(const char *path)
{
        struct stat st;
        return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

const char *tool_find(const char *const *paths)
{
        for (size_t i = 0; paths[i]; i++)
                if (executable(paths[i]))
                        return paths[i];
        return NULL;
}

/* A name without a slash, looked up in $PATH as execvp() would. */
static int lookup(const char *name, char *out, size_t len)
{
        if (strchr(name, '/'))
                return path_printf(out, len, "%s", name);
        const char *p = getenv("PATH");
        if (!p || !*p)
                p = "/bin:/usr/bin";
        for (;;) {
                const char *end = strchrnul(p, ':');
                int dl = (int)(end - p);
                /* An empty entry is the working directory. */
                if (path_printf(out, len, "%.*s%s%s", dl, p, dl ? "/" : "", name) == 0 &&
                    executable(out))
                        return 0;
                if (!*end)
                        break;
                p = end + 1;
        }
        out[0] = '\0';
        return -ENOENT;
}

/* ---- the child, between fork() and execve(): async-signal-safe only ---- */

static _Noreturn void child_fail(int report)
{
        int e = errno;
        ssize_t n = write(report, &e, sizeof(e));
        (void)n;
        _exit(127);
}

static _Noreturn void child_exec(const struct tool_run *t, const char *path,
                                 const struct tool_io *io)
{
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int report = io->report[1];
        if (null < 0)
                child_fail(report);
        /* Its 0, 1, 2 and 3, then the report pipe. */
        int src[5] = {
            t->input ? io->in[0] : null,
            t->out ? io->out[1] : (t->out_to_stderr ? STDERR_FILENO : null),
            io->err[1] >= 0 ? io->err[1] : STDERR_FILENO,
            t->fd3 > 2 ? t->fd3 : -1,
            report,
        };
        for (size_t i = 0; i < ARRAY_SIZE(src); i++)
                if (src[i] >= 0 && (src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, TOOL_FD_FLOOR)) < 0)
                        child_fail(report);
        report = src[4];
        int nfd = src[3] >= 0 ? 4 : 3;
        for (int fd = 0; fd < nfd; fd++)
                if (dup2(src[fd], fd) < 0) /* dup2 clears O_CLOEXEC */
                        child_fail(report);
        if (dup3(report, nfd, O_CLOEXEC) < 0)
                child_fail(report);
        report = nfd;
        close_range((unsigned)nfd + 1, ~0U, 0);
        execve(path, (char *const *)t->argv, t->envp ? (char *const *)t->envp : environ);
        child_fail(report);
}

/* ---- the parent ---- */

/* The errno of a failed exec, 0 after a good one (the pipe closes). */
static int read_report(int fd)
{
        int e = 0;
        ssize_t n;
        do
                n = read(fd, &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof(e) ? (e > 0 ? e : EIO) : 0;
}

struct pump {
        const struct tool_run *t;
        size_t in_off;  /* bytes of input written */
        size_t err_got; /* bytes of err_text filled */
        int in_error;   /* writing its stdin failed: -errno */
        int out_error;  /* keeping its stdout failed: -errno */
};

static void pump_write(struct pump *p, int *fd)
{
        size_t len = strlen(p->t->input);
        while (p->in_off < len) {
                ssize_t n = write(*fd, p->t->input + p->in_off, len - p->in_off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n < 0) {
                        p->in_error = -errno;
                        break;
                }
                p->in_off += (size_t)n;
        }
        close_fd(fd); /* all of it, or it stopped reading: EOF either way */
}

/* Read what is there; at EOF or an error, close fd. */
static void pump_read(struct pump *p, int *fd, bool is_out)
{
        char chunk[4096];
        ssize_t n = read(*fd, chunk, sizeof(chunk));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (n <= 0) {
                close_fd(fd);
                return;
        }
        if (is_out) {
                if (p->out_error == 0)
                        p->out_error = buf_append(p->t->out, chunk, (size_t)n);
                return;
        }
        size_t room = p->t->err_len - 1 - p->err_got;
        size_t take = MIN(room, (size_t)n);
        memcpy(p->t->err_text + p->err_got, chunk, take);
        p->err_got += take;
        p->t->err_text[p->err_got] = '\0';
}

/* Feed its stdin and drain its stdout and stderr until all three close. */
static void pump_all(struct pump *p, struct tool_io *io)
{
        /* poll() skips the entries of closed (-1) descriptors. */
        while (io->in[1] >= 0 || io->out[0] >= 0 || io->err[0] >= 0) {
                struct pollfd pfd[3] = {
                    {.fd = io->in[1], .events = POLLOUT},
                    {.fd = io->out[0], .events = POLLIN},
                    {.fd = io->err[0], .events = POLLIN},
                };
                if (poll(pfd, ARRAY_SIZE(pfd), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        p->out_error = -errno;
                        return;
                }
                if (pfd[0].revents)
                        pump_write(p, &io->in[1]);
                if (pfd[1].revents)
                        pump_read(p, &io->out[0], true);
                if (pfd[2].revents)
                        pump_read(p, &io->err[0], false);
        }
}

/* Talk to the started child: 0, or the error of its stdout (first) or of
 * its stdin (*ret_stdin set). */
static int talk(const struct tool_run *t, struct tool_io *io, bool *ret_stdin)
{
        struct pump p = {.t = t};
        /* A tool may exit before reading all of its input: EPIPE, not a
         * SIGPIPE, which would end a daemon that does not ignore it yet. */
        struct sigaction ign = {.sa_handler = SIG_IGN}, old;
        if (t->input)
                sigaction(SIGPIPE, &ign, &old);
        pump_all(&p, io);
        if (t->input)
                sigaction(SIGPIPE, &old, NULL);
        *ret_stdin = !p.out_error && p.in_error;
        return p.out_error ? p.out_error : p.in_error;
}

int run_tool(const struct tool_run *t, int *ret_status, struct sbx_error *err)
{
        const char *name = t->argv[0];
        char path[PATH_MAX];
        struct tool_io io = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
        bool in_failed = false;
        if (ret_status)
                *ret_status = -1;
        if (t->err_text && t->err_len)
                t->err_text[0] = '\0';
        int r = lookup(name, path, sizeof(path));
        if (r < 0)
                return sbx_error_set(err, -r, "run `%s`", name);
        if ((r = io_open(t, &io)) < 0) {
                io_close(&io);
                return sbx_error_set(err, -r, "pipe");
        }
        pid_t pid = fork();
        if (pid < 0) {
                r = -errno;
                io_close(&io);
                return sbx_error_set(err, -r, "fork `%s`", name);
        }
        if (pid == 0)
                child_exec(t, path, &io);
        int *child_ends[] = {&io.in[0], &io.out[1], &io.err[1], &io.report[1]};
        for (size_t i = 0; i < ARRAY_SIZE(child_ends); i++)
                close_fd(child_ends[i]);
        int exec_errno = read_report(io.report[0]);
        int io_r = exec_errno ? 0 : talk(t, &io, &in_failed);
        io_close(&io);
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return sbx_error_set(err, errno, "wait for `%s`", name);
        if (exec_errno)
                return sbx_error_set(err, exec_errno, "run `%s`", name);
        if (ret_status)
                *ret_status = st;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return sbx_error_set(err, EIO, "`%s` failed (status 0x%x)", name, st);
        if (io_r < 0)
                return sbx_error_set(err, -io_r, "%s `%s`", in_failed ? "write to" : "output of",
                                     name);
        return 0;
}
