/* SPDX-License-Identifier: MIT */
/* One handler per request type of the agent protocol (proto.h). Requests
 * come from the daemon but are still checked field by field: a malformed
 * frame closes the connection, a bad value is answered AGENT_E_INVALID. */
#include "init.h"
#include "request.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "config.h"

/* A single status (spawn, poll) may echo up to half a frame of command
 * line: the rest leaves room for 2 x 1 MiB of output. */
#define STATUS_ARGV_BUDGET (AGENT_MAX_PAYLOAD / 2)
#define MAX_TIMEOUT_MS (400LL * 24 * 3600 * 1000) /* keeps deadline math far from overflow */

/* ------------------------------------------------------------ replies */

/* Put argv, but never more than budget bytes of it: a LIST of many
 * processes with huge command lines must still fit one frame. */
static int put_argv(struct agent_msg *m, const struct proc *p, size_t budget)
{
        for (size_t i = 0; i < p->argc; i++) {
                size_t len = strlen(p->argv[i]);
                if (len + 6 > budget)
                        return agent_put_bytes(m, AGENT_T_ARGV, p->argv[i],
                                               budget > 6 ? budget - 6 : 0);
                int r = agent_put_bytes(m, AGENT_T_ARGV, p->argv[i], len);
                if (r < 0)
                        return r;
                budget -= len + 6;
        }
        return 0;
}

int proc_put_status(struct agent_msg *m, const struct proc *p, size_t argv_budget)
{
        int r;
        if ((r = agent_put_str(m, AGENT_T_PROC_ID, p->id)) < 0 ||
            (r = put_argv(m, p, argv_budget)) < 0 ||
            (r = agent_put_u64(m, AGENT_T_STATE, p->exited ? 1 : 0)) < 0 ||
            (r = agent_put_u64(m, AGENT_T_STARTED_AT, (uint64_t)p->started_at)) < 0)
                return r;
        if (p->exited &&
            ((r = agent_put_u64(m, AGENT_T_EXIT_CODE, (uint64_t)(int64_t)p->exit_code)) < 0 ||
             (r = agent_put_u64(m, AGENT_T_EXITED_AT, (uint64_t)p->exited_at)) < 0))
                return r;
        if ((p->pty && (r = agent_put_bool(m, AGENT_T_PTY, true)) < 0) ||
            (p->lossless && (r = agent_put_bool(m, AGENT_T_LOSSLESS, true)) < 0))
                return r;
        if (p->is_exec && ((r = agent_put_bool(m, AGENT_T_EXEC, true)) < 0 ||
                           (r = agent_put_bool(m, AGENT_T_TIMED_OUT, p->timed_out)) < 0 ||
                           (r = agent_put_bool(m, AGENT_T_TRUNCATED,
                                               p->out[0].truncated || p->out[1].truncated)) < 0))
                return r;
        return 0;
}

static void reply_built(struct init_ctx *ctx, struct conn *c, struct agent_msg *m, int r)
{
        if (r < 0)
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "cannot build the answer: %s",
                               strerror(-r));
        else
                conn_reply(ctx, c, m);
        agent_msg_free(m);
}

static void reply_status(struct init_ctx *ctx, struct conn *c, const struct proc *p)
{
        struct agent_msg m;
        agent_msg_init(&m, AGENT_RESP_OK);
        reply_built(ctx, c, &m, proc_put_status(&m, p, STATUS_ARGV_BUDGET));
}

/* The part of stream i a poll from offset `from` gets (see API.md). */
struct chunk {
        uint64_t start, end, dropped;
};

static struct chunk poll_chunk(const struct proc *p, int i, uint64_t from)
{
        const struct stream *s = &p->out[i];
        uint64_t oldest = stream_start(s);
        struct chunk ch = {.start = MAX(from, oldest), .end = stream_total(s)};

        ch.dropped = oldest > from ? oldest - from : 0;
        if (ch.end > ch.start + AGENT_RING_SIZE)
                ch.end = ch.start + AGENT_RING_SIZE;
        /* Never end inside a UTF-8 sequence, unless no more bytes can come. */
        bool final = p->exited && s->fd < 0;
        if (!final && ch.end > ch.start) {
                uint8_t tail[4];
                size_t n = (size_t)MIN(ch.end - ch.start, (uint64_t)sizeof(tail));
                stream_copy(s, ch.end - n, n, tail);
                ch.end -= n - utf8_trim_incomplete(tail, n);
        }
        return ch;
}

static bool poll_has_news(const struct proc *p, const uint64_t from[2])
{
        for (int i = 0; i < 2; i++) {
                struct chunk ch = poll_chunk(p, i, from[i]);
                if (ch.end > ch.start)
                        return true;
        }
        return false;
}

static int put_chunk(struct agent_msg *m, const struct proc *p, int i, uint64_t from)
{
        static const uint16_t tags[2][3] = {
            {AGENT_T_STDOUT, AGENT_T_STDOUT_NEXT, AGENT_T_STDOUT_DROPPED},
            {AGENT_T_STDERR, AGENT_T_STDERR_NEXT, AGENT_T_STDERR_DROPPED},
        };
        struct chunk ch = poll_chunk(p, i, from);
        size_t n = (size_t)(ch.end - ch.start);
        _cleanup_free_ uint8_t *data = malloc(n ? n : 1);
        int r;

        if (!data)
                return -ENOMEM;
        stream_copy(&p->out[i], ch.start, n, data);
        if ((r = agent_put_bytes(m, tags[i][0], data, n)) < 0 ||
            (r = agent_put_u64(m, tags[i][1], ch.end)) < 0 ||
            (r = agent_put_u64(m, tags[i][2], ch.dropped)) < 0)
                return r;
        return 0;
}

static void reply_poll(struct init_ctx *ctx, struct conn *c, const struct proc *p,
                       const uint64_t from[2])
{
        struct agent_msg m;
        int r;

        agent_msg_init(&m, AGENT_RESP_OK);
        if ((r = proc_put_status(&m, p, STATUS_ARGV_BUDGET)) >= 0 &&
            (r = put_chunk(&m, p, 0, from[0])) >= 0)
                r = put_chunk(&m, p, 1, from[1]);
        reply_built(ctx, c, &m, r);
}

static void reply_exec(struct init_ctx *ctx, struct conn *c, const struct proc *p)
{
        struct agent_msg m;
        int r;

        agent_msg_init(&m, AGENT_RESP_OK);
        if ((r = agent_put_u64(&m, AGENT_T_EXIT_CODE, (uint64_t)(int64_t)p->exit_code)) >= 0 &&
            (r = agent_put_bytes(&m, AGENT_T_STDOUT, p->out[0].kept.data, p->out[0].kept.len)) >=
                0 &&
            (r = agent_put_bytes(&m, AGENT_T_STDERR, p->out[1].kept.data, p->out[1].kept.len)) >=
                0 &&
            (r = agent_put_u64(&m, AGENT_T_DURATION_MS,
                               (uint64_t)MAX(0, (p->exit_us - p->fork_us) / 1000))) >= 0 &&
            (r = agent_put_bool(&m, AGENT_T_TIMED_OUT, p->timed_out)) >= 0)
                r = agent_put_bool(&m, AGENT_T_TRUNCATED,
                                   p->out[0].truncated || p->out[1].truncated);
        reply_built(ctx, c, &m, r);
}

/* ------------------------------------------------------- proc callbacks */

void handlers_proc_changed(struct init_ctx *ctx, struct proc *p)
{
        struct conn *next;
        for (struct conn *c = p->waiters; c; c = next) {
                next = c->wnext;
                if (c->held == HELD_POLL && (p->exited || poll_has_news(p, c->poll_from)))
                        reply_poll(ctx, c, p, c->poll_from);
        }
}

void handlers_poll_expired(struct init_ctx *ctx, struct conn *c)
{
        if (c->held == HELD_POLL && c->held_proc)
                reply_poll(ctx, c, c->held_proc, c->poll_from);
}

void handlers_stdin_expired(struct init_ctx *ctx, struct conn *c)
{
        struct proc *p = c->held_proc;
        struct agent_msg m;
        char msg[256];
        int r;

        if (c->held != HELD_STDIN || !p)
                return;
        uint64_t total = c->stdin_target - c->stdin_start;
        uint64_t written = proc_stdin_abandon(ctx, p, c);
        snprintf(msg, sizeof(msg),
                 "%s took %llu of %llu bytes of stdin in time; the rest was discarded", p->id,
                 (unsigned long long)written, (unsigned long long)total);
        agent_msg_init(&m, AGENT_RESP_ERR);
        if ((r = agent_put_u64(&m, AGENT_T_ERR_CODE, AGENT_E_TIMEOUT)) >= 0 &&
            (r = agent_put_str(&m, AGENT_T_MESSAGE, msg)) >= 0)
                r = agent_put_u64(&m, AGENT_T_WRITTEN, written);
        if (r < 0)
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "cannot build the answer: %s",
                               strerror(-r));
        else
                conn_reply(ctx, c, &m);
        agent_msg_free(&m);
}

void handlers_proc_exited(struct init_ctx *ctx, struct proc *p)
{
        if (p->listed) {
                handlers_proc_changed(ctx, p);
                stream_proc_changed(ctx, p);
                return;
        }
        /* An exec whose requester waits: answer it. Once the answer is out
         * the exec is forgotten; should the connection go first, the exec
         * is listed instead (proc_exec_answered). */
        struct conn *c = p->waiters;
        while (c && c->held != HELD_EXEC)
                c = c->wnext;
        if (!c) {
                proc_exec_answered(ctx, p, false);
                return;
        }
        c->answer_of = p;
        p->answer_conn = c;
        reply_exec(ctx, c, p);
}

/* ------------------------------------------------------------ commands */

static void answer_errno(struct init_ctx *ctx, struct conn *c, struct req *rq, int r)
{
        if (r == -EINVAL)
                conn_reply_err(ctx, c, AGENT_E_INVALID, "%s", rq->msg);
        else
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "%s", strerror(-r));
}

static void handle_start(struct init_ctx *ctx, struct conn *c, struct req *rq, bool is_exec)
{
        _cleanup_free_ char *cwd = NULL;
        char **env = NULL;
        struct sbx_error err = {0};
        struct proc *p;
        int r;

        if (rq->argc == 0) {
                conn_reply_err(ctx, c, AGENT_E_INVALID, "the command is empty");
                return;
        }
        bool terminal = rq->pty_cols || rq->pty_rows;
        if (terminal && (is_exec || rq->pty_cols == 0 || rq->pty_rows == 0 ||
                         rq->pty_cols > AGENT_PTY_MAX || rq->pty_rows > AGENT_PTY_MAX)) {
                conn_reply_err(ctx, c, AGENT_E_INVALID,
                               is_exec ? "an exec takes no terminal"
                                       : "a terminal's cols and rows are each 1 to %d",
                               AGENT_PTY_MAX);
                return;
        }
        if (ctx->n_running >= AGENT_MAX_PROCS) {
                conn_reply_err(ctx, c, AGENT_E_CAP, "at most %d processes may be running",
                               AGENT_MAX_PROCS);
                return;
        }
        uint32_t uid = 0, gid = 0;
        if (rq->user && (r = req_user(rq, "/etc", &uid, &gid, &rq->home)) < 0) {
                answer_errno(ctx, c, rq, r);
                return;
        }
        if ((r = req_cwd(rq, &cwd)) < 0 || (r = req_env(rq, &env)) < 0) {
                answer_errno(ctx, c, rq, r);
                return;
        }
        struct proc_spec spec = {
            .argv = rq->argv,
            .argc = rq->argc,
            .env = env,
            .cwd = cwd,
            .stdin_pipe = !is_exec && rq->stdin_pipe,
            .is_exec = is_exec,
            .lossless = !is_exec && rq->lossless,
            .pty_cols = terminal ? (unsigned)rq->pty_cols : 0,
            .pty_rows = terminal ? (unsigned)rq->pty_rows : 0,
            .as_user = rq->user != NULL,
            .uid = uid,
            .gid = gid,
            .timeout_ms = (int64_t)MIN(rq->timeout_ms, (uint64_t)MAX_TIMEOUT_MS),
            .max_output = rq->max_output && rq->max_output < AGENT_EXEC_MAX_OUTPUT
                              ? (size_t)rq->max_output
                              : AGENT_EXEC_MAX_OUTPUT,
        };
        r = proc_start(ctx, &spec, &p, &err);
        req_env_free(env);
        if (r < 0) {
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "cannot start the command: %s", err.msg);
                return;
        }
        if (is_exec)
                conn_hold(c, p, HELD_EXEC); /* answered when it exits */
        else
                reply_status(ctx, c, p);
}

/* The spawned process a request names, or NULL after answering. */
static struct proc *lookup(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        if (!rq->proc_id || !agent_proc_id_valid(rq->proc_id)) {
                conn_reply_err(ctx, c, AGENT_E_INVALID, "a valid process id is required");
                return NULL;
        }
        struct proc *p = proc_find(ctx, rq->proc_id);
        if (!p)
                conn_reply_err(ctx, c, AGENT_E_NOT_FOUND, "no process %s", rq->proc_id);
        return p;
}

/* The offsets a request asks from, each within what the process wrote. */
static bool offsets_ok(struct init_ctx *ctx, struct conn *c, const struct proc *p,
                       const uint64_t from[2])
{
        static const char *names[2] = {"stdout", "stderr"};
        for (int i = 0; i < 2; i++) {
                if (from[i] > stream_total(&p->out[i])) {
                        conn_reply_err(ctx, c, AGENT_E_INVALID,
                                       "%s offset %llu is past the end of the output (%llu)",
                                       names[i], (unsigned long long)from[i],
                                       (unsigned long long)stream_total(&p->out[i]));
                        return false;
                }
        }
        return true;
}

static void handle_poll(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        struct proc *p = lookup(ctx, c, rq);
        if (!p || !offsets_ok(ctx, c, p, rq->from))
                return;
        stream_poll_read(ctx, p, rq->from);
        uint64_t wait = MIN(rq->wait_ms, (uint64_t)AGENT_MAX_WAIT_MS);
        if (wait > 0 && !p->exited && !poll_has_news(p, rq->from)) {
                c->poll_from[0] = rq->from[0];
                c->poll_from[1] = rq->from[1];
                c->deadline_us = mono_us() + (int64_t)wait * 1000;
                conn_hold(c, p, HELD_POLL);
                return;
        }
        reply_poll(ctx, c, p, rq->from);
}

static void handle_list(struct init_ctx *ctx, struct conn *c)
{
        /* Each entry's command is cut to its share of one frame. */
        const size_t budget = AGENT_MAX_PAYLOAD / (AGENT_MAX_PROCS + AGENT_MAX_EXITED) - 1024;
        struct agent_msg m, one;
        int r = 0;

        agent_msg_init(&m, AGENT_RESP_OK);
        for (struct proc *p = ctx->procs_head; p && r >= 0; p = p->next) {
                if (!p->listed)
                        continue;
                agent_msg_init(&one, 0);
                r = proc_put_status(&one, p, budget);
                if (r >= 0)
                        r = agent_put_bytes(&m, AGENT_T_PROC, one.payload.data, one.payload.len);
                agent_msg_free(&one);
        }
        reply_built(ctx, c, &m, r);
}

static bool signal_allowed(uint64_t sig)
{
        static const int allowed[] = {SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
        for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
                if (sig == (uint64_t)allowed[i])
                        return true;
        return false;
}

static void handle_signal(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        struct proc *p = lookup(ctx, c, rq);
        if (!p)
                return;
        if (!rq->has_signal || !signal_allowed(rq->signal)) {
                conn_reply_err(ctx, c, AGENT_E_INVALID,
                               "signal must be one of TERM, KILL, INT, HUP, QUIT, USR1, USR2");
                return;
        }
        proc_kill_group(p, (int)rq->signal); /* no-op once exited */
        conn_reply(ctx, c, NULL);
}

static void handle_kill(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        struct proc *p = lookup(ctx, c, rq);
        if (!p)
                return;
        proc_kill_group(p, SIGKILL);
        proc_forget(ctx, p);
        conn_reply(ctx, c, NULL);
}

static void handle_stdin(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        struct proc *p = lookup(ctx, c, rq);
        uint64_t target;

        if (!p)
                return;
        if (p->in_broken) {
                conn_reply_err(ctx, c, AGENT_E_STATE,
                               "stdin of %s is closed: the process stopped reading it", p->id);
                return;
        }
        if (p->in_fd < 0 || p->in_close_requested) {
                conn_reply_err(ctx, c, AGENT_E_STATE, "stdin of %s is not open", p->id);
                return;
        }
        /* One write at a time: two concurrent writes have no order anyway,
         * and a timed-out one can then drop exactly its own rest. */
        for (struct conn *w = p->waiters; w; w = w->wnext) {
                if (w->held == HELD_STDIN) {
                        conn_reply_err(ctx, c, AGENT_E_STATE,
                                       "another write to the stdin of %s is still pending", p->id);
                        return;
                }
        }
        uint64_t start = p->in_queued;
        int r = proc_stdin_queue(ctx, p, rq->data, rq->data_len, rq->close, &target);
        if (r == -E2BIG) {
                conn_reply_err(ctx, c, AGENT_E_INVALID,
                               "too much stdin data waiting for %s (at most %u bytes)", p->id,
                               INIT_STDIN_QUEUE_MAX);
                return;
        }
        if (r < 0) {
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "stdin: %s", strerror(-r));
                return;
        }
        c->stdin_start = start;
        c->stdin_target = target;
        c->deadline_us =
            rq->timeout_ms
                ? mono_us() + (int64_t)MIN(rq->timeout_ms, (uint64_t)MAX_TIMEOUT_MS) * 1000
                : 0;
        conn_hold(c, p, HELD_STDIN); /* answered once written (EPIPE, deadline) */
        proc_stdin_flush(ctx, p);
}

/* The start answer, then the connection carries the process's frames. */
static void handle_stream(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        struct proc *p = lookup(ctx, c, rq);
        uint64_t start[2];
        struct agent_msg m;
        int r;

        if (!p || !offsets_ok(ctx, c, p, rq->from))
                return;
        for (int i = 0; i < 2; i++)
                start[i] = MAX(rq->from[i], stream_start(&p->out[i]));
        agent_msg_init(&m, AGENT_RESP_OK);
        if ((r = proc_put_status(&m, p, STATUS_ARGV_BUDGET)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDOUT_FROM, start[0])) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDERR_FROM, start[1])) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDOUT_DROPPED, start[0] - rq->from[0])) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDERR_DROPPED, start[1] - rq->from[1])) < 0) {
                reply_built(ctx, c, &m, r);
                return;
        }
        reply_built(ctx, c, &m, 0);
        if (!c->dead)
                stream_attach(ctx, c, p, start);
}

static void handle_resize(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        struct proc *p = lookup(ctx, c, rq);
        if (!p)
                return;
        if (rq->pty_cols == 0 || rq->pty_rows == 0 || rq->pty_cols > AGENT_PTY_MAX ||
            rq->pty_rows > AGENT_PTY_MAX) {
                conn_reply_err(ctx, c, AGENT_E_INVALID, "cols and rows are each 1 to %d",
                               AGENT_PTY_MAX);
                return;
        }
        if (!p->pty || p->exited || p->pty_fd < 0) {
                conn_reply_err(ctx, c, AGENT_E_STATE, "%s %s", p->id,
                               p->pty ? "has exited" : "has no terminal");
                return;
        }
        struct winsize ws = {.ws_row = (unsigned short)rq->pty_rows,
                             .ws_col = (unsigned short)rq->pty_cols};
        if (ioctl(p->pty_fd, TIOCSWINSZ, &ws) < 0) {
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "resize: %s", strerror(errno));
                return;
        }
        /* Linux signals the foreground group itself; gVisor (the guard's
         * runtime) only stores the size, so it is done here: to the
         * terminal's foreground group, or the process's own when gVisor
         * does not say which that is. */
        if (ctx->guard.on) {
                pid_t fg = tcgetpgrp(p->pty_fd);
                if (fg <= 0 || kill(-fg, SIGWINCH) < 0)
                        proc_kill_group(p, SIGWINCH);
        }
        conn_reply(ctx, c, NULL);
}

static void handle_ping(struct init_ctx *ctx, struct conn *c)
{
        struct agent_msg m;
        agent_msg_init(&m, AGENT_RESP_OK);
        reply_built(ctx, c, &m, agent_put_str(&m, AGENT_T_VERSION, SANDBOXD_VERSION));
}

/* Hand the daemon a handle on this sandbox's root, so that its file
 * endpoints resolve paths inside the sandbox (RESOLVE_IN_ROOT) and never
 * on the host. O_PATH: the handle opens nothing by itself. */
static void handle_root(struct init_ctx *ctx, struct conn *c)
{
        int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "open /: %s", strerror(errno));
                return;
        }
        int r = conn_reply_fd(ctx, c, fd);
        close(fd);
        if (r == -EBUSY)
                conn_reply_err(ctx, c, AGENT_E_STATE, "root: answers pending on this connection");
}

/* The runtime names the sandbox through PID 1 where the host cannot enter
 * its UTS namespace; sethostname needs CAP_SYS_ADMIN, which only such a
 * runtime gives sandbox-init (and no workload). */
static void handle_hostname(struct init_ctx *ctx, struct conn *c, struct req *rq)
{
        const char *h = rq->hostname;
        size_t n = h ? strlen(h) : 0;
        if (n == 0 || n > 64 ||
            strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != n) {
                conn_reply_err(ctx, c, AGENT_E_INVALID, "hostname: 1 to 64 of [A-Za-z0-9.-]");
                return;
        }
        if (sethostname(h, n) < 0) {
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "sethostname: %s", strerror(errno));
                return;
        }
        conn_reply(ctx, c, NULL);
}

static void handle_quiesce(struct init_ctx *ctx, struct conn *c)
{
        if (!ctx->listen_path) {
                conn_reply_err(ctx, c, AGENT_E_STATE, "quiesce: no listening path to come back on");
                return;
        }
        conn_reply(ctx, c, NULL);
        quiesce_request(ctx);
}

void handle_request(struct init_ctx *ctx, struct conn *c, uint16_t type, const uint8_t *payload,
                    uint32_t len)
{
        struct req rq = {0};

        if (type < AGENT_REQ_PING || type > AGENT_REQ_TCP) {
                conn_protocol_error(ctx, c, "unknown request type");
                return;
        }
        int r = req_parse(payload, len, &rq);
        if (r == -EPROTO)
                conn_protocol_error(ctx, c, "malformed request");
        else if (r < 0)
                answer_errno(ctx, c, &rq, r);
        else if (type == AGENT_REQ_PING)
                handle_ping(ctx, c);
        else if (type == AGENT_REQ_EXEC || type == AGENT_REQ_SPAWN)
                handle_start(ctx, c, &rq, type == AGENT_REQ_EXEC);
        else if (type == AGENT_REQ_POLL)
                handle_poll(ctx, c, &rq);
        else if (type == AGENT_REQ_LIST)
                handle_list(ctx, c);
        else if (type == AGENT_REQ_SIGNAL)
                handle_signal(ctx, c, &rq);
        else if (type == AGENT_REQ_KILL)
                handle_kill(ctx, c, &rq);
        else if (type == AGENT_REQ_ROOT)
                handle_root(ctx, c);
        else if (type == AGENT_REQ_HOSTNAME)
                handle_hostname(ctx, c, &rq);
        else if (type == AGENT_REQ_QUIESCE)
                handle_quiesce(ctx, c);
        else if (type == AGENT_REQ_STREAM)
                handle_stream(ctx, c, &rq);
        else if (type == AGENT_REQ_RESIZE)
                handle_resize(ctx, c, &rq);
        else if (type == AGENT_REQ_TCP)
                tcp_relay_start(ctx, c, &rq);
        else
                handle_stdin(ctx, c, &rq);
        req_free(&rq);
}
