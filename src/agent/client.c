/* SPDX-License-Identifier: MIT */
/* Daemon-side client of the agent protocol (see client.h). The agent runs
 * inside a sandbox whose workload is hostile, so its answers are decoded
 * with the same care as any outside input. */
#include "client.h"
#include "../common/fdpass.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#define MAX_LIST_ENTRIES 4096

/* ------------------------------------------------------------- results */

void agent_exec_result_free(struct agent_exec_result *r)
{
        if (!r)
                return;
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
        r->out_len = r->err_len = 0;
}

void agent_proc_status_free(struct agent_proc_status *s)
{
        if (!s)
                return;
        free(s->id);
        if (s->argv)
                for (size_t i = 0; i < s->argc; i++)
                        free(s->argv[i]);
        free(s->argv);
        memset(s, 0, sizeof(*s));
}

void agent_poll_result_free(struct agent_poll_result *r)
{
        if (!r)
                return;
        agent_proc_status_free(&r->status);
        free(r->out);
        free(r->err);
        r->out = r->err = NULL;
        r->out_len = r->err_len = 0;
}

void agent_proc_list_free(struct agent_proc_list *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                agent_proc_status_free(&l->procs[i]);
        free(l->procs);
        l->procs = NULL;
        l->n = 0;
}

int agent_signal_from_name(const char *name)
{
        static const struct {
                const char *name;
                int sig;
        } table[] = {
            {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},   {"HUP", SIGHUP},
            {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
        };
        if (!name)
                return -EINVAL;
        /* Upper case only, as the documented client's Signal type spells
         * them: "term" is refused rather than guessed at. */
        if (strncmp(name, "SIG", 3) == 0)
                name += 3;
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (strcmp(name, table[i].name) == 0)
                        return table[i].sig;
        return -EINVAL;
}

/* ----------------------------------------------------------- transport */

static int dial(const struct agent_peer *peer, int *ret_fd, struct sbx_error *err)
{
        if (!peer || !peer->dial || !ret_fd)
                return sbx_error_set(err, EINVAL, "agent: no way to reach the agent");
        return peer->dial(peer->ctx, ret_fd, err);
}

static int dial_dir(void *ctx, int *ret_fd, struct sbx_error *err)
{
        return unix_connect_in(ctx, "agent.sock", AGENT_CALL_TIMEOUT_MS, ret_fd, err);
}

struct agent_peer agent_peer_dir(const char *dir)
{
        return (struct agent_peer){.dial = dial_dir, .ctx = (void *)dir};
}

/* Wait for fd to be ready, until the deadline (mono ms; < 0: none). */
static int wait_fd(int fd, short events, int64_t deadline)
{
        for (;;) {
                int timeout = -1;
                if (deadline >= 0) {
                        int64_t left = deadline - mono_ms();
                        if (left <= 0)
                                return -ETIMEDOUT;
                        timeout = left > 1000000 ? 1000000 : (int)left;
                }
                struct pollfd pfd = {.fd = fd, .events = events};
                int n = poll(&pfd, 1, timeout);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n > 0)
                        return 0; /* ready, or HUP/ERR: the next call says which */
        }
}

static int send_full(int fd, const void *data, size_t len, int64_t deadline)
{
        const uint8_t *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        int r = wait_fd(fd, POLLOUT, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                return -EPIPE;
        }
        return 0;
}

static int recv_full(int fd, void *data, size_t len, int64_t deadline)
{
        uint8_t *p = data;
        while (len > 0) {
                ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n == 0)
                        return -EPIPE;
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                        int r = wait_fd(fd, POLLIN, deadline);
                        if (r < 0)
                                return r;
                        continue;
                }
                return -EPIPE;
        }
        return 0;
}

static int map_agent_err(uint64_t code)
{
        switch (code) {
        case AGENT_E_INVALID:
                return EINVAL;
        case AGENT_E_NOT_FOUND:
                return ENOENT;
        case AGENT_E_CAP:
                return EDQUOT;
        case AGENT_E_STATE:
                return EBUSY;
        case AGENT_E_TIMEOUT:
                return ETIME;
        default:
                return EREMOTEIO;
        }
}

/* Turn an AGENT_RESP_ERR payload into the mapped error. */
static int decode_agent_err(const uint8_t *payload, uint32_t len, struct sbx_error *err)
{
        struct agent_field f;
        uint64_t code = AGENT_E_INTERNAL;
        char msg[384] = "agent error";

        if (agent_find(payload, len, AGENT_T_ERR_CODE, &f) == 1)
                agent_field_u64(&f, &code);
        if (agent_find(payload, len, AGENT_T_MESSAGE, &f) == 1) {
                size_t n = MIN((size_t)f.len, sizeof(msg) - 1);
                memcpy(msg, f.data, n);
                msg[n] = '\0';
                for (size_t i = 0; i < n; i++) /* keep it one printable line */
                        if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f)
                                msg[i] = ' ';
        }
        int e = map_agent_err(code);
        if (err) {
                err->code = e;
                snprintf(err->msg, sizeof(err->msg), "%s", msg);
        }
        return -e;
}

static int transport_error(struct sbx_error *err, int r, const char *what)
{
        switch (r) {
        case -ETIMEDOUT:
                return sbx_error_set(err, ETIMEDOUT, "agent: no answer to %s in time", what);
        case -EPROTO:
                return sbx_error_set(err, EPROTO, "agent: malformed answer to %s", what);
        case -ENOMEM:
                return sbx_error_set(err, ENOMEM, "agent: %s", what);
        default:
                return sbx_error_set(err, EPIPE, "agent: connection lost during %s", what);
        }
}

/* Send req, read the answer whole: its type (OK or ERR) and payload. */
static int exchange(int fd, const struct agent_msg *req, int timeout_ms, uint16_t *ret_type,
                    uint8_t **ret_payload, uint32_t *ret_len, struct sbx_error *err)
{
        int64_t deadline = timeout_ms < 0 ? -1 : mono_ms() + timeout_ms;
        uint8_t head[AGENT_HEADER_SIZE];
        uint16_t type;
        uint32_t len;
        int r;

        agent_header_encode(req, head);
        if ((r = send_full(fd, head, sizeof(head), deadline)) < 0 ||
            (r = send_full(fd, req->payload.data, req->payload.len, deadline)) < 0)
                return transport_error(err, r, "a request");
        if ((r = recv_full(fd, head, sizeof(head), deadline)) < 0)
                return transport_error(err, r, "a request");
        if (agent_header_decode(head, &type, &len) < 0 ||
            (type != AGENT_RESP_OK && type != AGENT_RESP_ERR))
                return transport_error(err, -EPROTO, "a request");
        _cleanup_free_ uint8_t *payload = malloc(len ? len : 1);
        if (!payload)
                return transport_error(err, -ENOMEM, "a request");
        if (len && (r = recv_full(fd, payload, len, deadline)) < 0)
                return transport_error(err, r, "a request");
        *ret_type = type;
        *ret_payload = TAKE_PTR(payload);
        *ret_len = len;
        return 0;
}

int agent_call(int fd, const struct agent_msg *req, int timeout_ms, uint8_t **ret_payload,
               uint32_t *ret_len, struct sbx_error *err)
{
        _cleanup_free_ uint8_t *payload = NULL;
        uint16_t type = 0;
        uint32_t len = 0;
        int r = exchange(fd, req, timeout_ms, &type, &payload, &len, err);
        if (r < 0)
                return r;
        if (type == AGENT_RESP_ERR)
                return decode_agent_err(payload, len, err);
        *ret_payload = TAKE_PTR(payload);
        *ret_len = len;
        return 0;
}

/* Connect, ask, close. */
static int call_peer(const struct agent_peer *peer, const struct agent_msg *req, int timeout_ms,
                     uint8_t **ret_payload, uint32_t *ret_len, struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = dial(peer, &fd, err);
        if (r < 0)
                return r;
        return agent_call(fd, req, timeout_ms, ret_payload, ret_len, err);
}

/* ------------------------------------------------ answers read later */

int agent_send(const struct agent_peer *peer, const struct agent_msg *req, struct agent_pending *p,
               struct sbx_error *err)
{
        *p = (struct agent_pending){.fd = -1};
        int r = dial(peer, &p->fd, err);
        if (r < 0)
                return r;
        uint8_t head[AGENT_HEADER_SIZE];
        int64_t deadline = mono_ms() + AGENT_CALL_TIMEOUT_MS;
        agent_header_encode(req, head);
        if ((r = send_full(p->fd, head, sizeof(head), deadline)) < 0 ||
            (r = send_full(p->fd, req->payload.data, req->payload.len, deadline)) < 0) {
                close_fd(&p->fd);
                return transport_error(err, r, "a request");
        }
        return 0;
}

/* What is there of the payload; > 0 when it grew, 0 none now. */
static int pending_recv(int fd, void *buf, size_t len)
{
        ssize_t n;
        do
                n = recv(fd, buf, len, MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
        return n <= 0 ? -EPIPE : (int)n;
}

int agent_pending_read(struct agent_pending *p, struct sbx_error *err)
{
        while (p->head_got < AGENT_HEADER_SIZE) {
                int n = pending_recv(p->fd, p->head + p->head_got, AGENT_HEADER_SIZE - p->head_got);
                if (n <= 0)
                        return n < 0 ? transport_error(err, n, "a request") : 0;
                p->head_got += (uint32_t)n;
                if (p->head_got < AGENT_HEADER_SIZE)
                        continue;
                if (agent_header_decode(p->head, &p->type, &p->len) < 0 ||
                    (p->type != AGENT_RESP_OK && p->type != AGENT_RESP_ERR))
                        return transport_error(err, -EPROTO, "a request");
                if (!(p->payload = malloc(p->len ? p->len : 1)))
                        return transport_error(err, -ENOMEM, "a request");
        }
        while (p->got < p->len) {
                int n = pending_recv(p->fd, p->payload + p->got, p->len - p->got);
                if (n <= 0)
                        return n < 0 ? transport_error(err, n, "a request") : 0;
                p->got += (uint32_t)n;
        }
        return 1;
}

/* A whole answer: an OK's payload (still p's), or the ERR's mapped error. */
static int pending_answer(struct agent_pending *p, uint8_t **ret, uint32_t *ret_len,
                          struct sbx_error *err)
{
        if (p->head_got < AGENT_HEADER_SIZE || p->got < p->len)
                return transport_error(err, -EPROTO, "a request");
        if (p->type == AGENT_RESP_ERR)
                return decode_agent_err(p->payload, p->len, err);
        *ret = p->payload;
        *ret_len = p->len;
        return 0;
}

void agent_pending_free(struct agent_pending *p)
{
        close_fd(&p->fd);
        free(p->payload);
        p->payload = NULL;
}

/* -------------------------------------------------------------- decode */

static int take_bytes(const struct agent_field *f, char **ret, size_t *ret_len)
{
        char *s = malloc((size_t)f->len + 1);
        if (!s)
                return -ENOMEM;
        if (f->len)
                memcpy(s, f->data, f->len);
        s[f->len] = '\0';
        free(*ret);
        *ret = s;
        *ret_len = f->len;
        return 0;
}

static int status_add_argv(struct agent_proc_status *st, const struct agent_field *f)
{
        if (st->argc >= AGENT_MAX_ARGV)
                return -EPROTO;
        char **n = realloc(st->argv, (st->argc + 2) * sizeof(char *));
        if (!n)
                return -ENOMEM;
        st->argv = n;
        size_t len;
        st->argv[st->argc] = NULL;
        int r = take_bytes(f, &st->argv[st->argc], &len);
        if (r < 0)
                return r;
        st->argv[++st->argc] = NULL;
        return 0;
}

/* A field of a process status: 1 consumed, 0 not ours, < 0 error. */
static int status_field(struct agent_proc_status *st, const struct agent_field *f)
{
        uint64_t v;
        size_t len;
        int r;

        switch (f->tag) {
        case AGENT_T_PROC_ID:
                r = take_bytes(f, &st->id, &len);
                return r < 0 ? r : 1;
        case AGENT_T_ARGV:
                r = status_add_argv(st, f);
                return r < 0 ? r : 1;
        case AGENT_T_EXEC:
                r = agent_field_bool(f, &st->exec);
                return r < 0 ? r : 1;
        case AGENT_T_TIMED_OUT:
                r = agent_field_bool(f, &st->timed_out);
                return r < 0 ? r : 1;
        case AGENT_T_TRUNCATED:
                r = agent_field_bool(f, &st->truncated);
                return r < 0 ? r : 1;
        case AGENT_T_PTY:
                r = agent_field_bool(f, &st->pty);
                return r < 0 ? r : 1;
        case AGENT_T_LOSSLESS:
                r = agent_field_bool(f, &st->lossless);
                return r < 0 ? r : 1;
        case AGENT_T_STATE:
        case AGENT_T_EXIT_CODE:
        case AGENT_T_STARTED_AT:
        case AGENT_T_EXITED_AT:
                if (agent_field_u64(f, &v) < 0)
                        return -EPROTO;
                if (f->tag == AGENT_T_STATE)
                        st->exited = v == 1;
                else if (f->tag == AGENT_T_EXIT_CODE)
                        st->exit_code = (int)(int32_t)v;
                else if (f->tag == AGENT_T_STARTED_AT)
                        st->started_at = (int64_t)v;
                else
                        st->exited_at = (int64_t)v;
                return 1;
        default:
                return 0;
        }
}

static int status_fn(void *ctx, const struct agent_field *f)
{
        int r = status_field(ctx, f);
        return r < 0 ? r : 0;
}

static int decode_status(const uint8_t *payload, uint32_t len, struct agent_proc_status *st)
{
        memset(st, 0, sizeof(*st));
        int r = agent_walk(payload, len, status_fn, st);
        if (r >= 0 && !st->id)
                r = -EPROTO;
        if (r >= 0 && !st->argv) {
                st->argv = calloc(1, sizeof(char *));
                if (!st->argv)
                        r = -ENOMEM;
        }
        if (r < 0)
                agent_proc_status_free(st);
        return r;
}

static int poll_fn(void *ctx, const struct agent_field *f)
{
        struct agent_poll_result *p = ctx;
        int r = status_field(&p->status, f);
        if (r != 0)
                return r < 0 ? r : 0;
        switch (f->tag) {
        case AGENT_T_STDOUT:
                return take_bytes(f, &p->out, &p->out_len);
        case AGENT_T_STDERR:
                return take_bytes(f, &p->err, &p->err_len);
        case AGENT_T_STDOUT_NEXT:
                return agent_field_u64(f, &p->out_next);
        case AGENT_T_STDERR_NEXT:
                return agent_field_u64(f, &p->err_next);
        case AGENT_T_STDOUT_DROPPED:
                return agent_field_u64(f, &p->out_dropped);
        case AGENT_T_STDERR_DROPPED:
                return agent_field_u64(f, &p->err_dropped);
        default:
                return 0;
        }
}

static int exec_fn(void *ctx, const struct agent_field *f)
{
        struct agent_exec_result *e = ctx;
        uint64_t v;
        switch (f->tag) {
        case AGENT_T_EXIT_CODE:
                if (agent_field_u64(f, &v) < 0)
                        return -EPROTO;
                e->exit_code = (int)(int32_t)v;
                return 0;
        case AGENT_T_DURATION_MS:
                if (agent_field_u64(f, &v) < 0)
                        return -EPROTO;
                e->duration_ms = v > INT64_MAX ? INT64_MAX : (int64_t)v;
                return 0;
        case AGENT_T_STDOUT:
                return take_bytes(f, &e->out, &e->out_len);
        case AGENT_T_STDERR:
                return take_bytes(f, &e->err, &e->err_len);
        case AGENT_T_TIMED_OUT:
                return agent_field_bool(f, &e->timed_out);
        case AGENT_T_TRUNCATED:
                return agent_field_bool(f, &e->truncated);
        default:
                return 0;
        }
}

/* Empty strings rather than NULL, so callers need no special case. */
static int ensure_str(char **s)
{
        if (!*s && !(*s = calloc(1, 1)))
                return -ENOMEM;
        return 0;
}

static int list_fn(void *ctx, const struct agent_field *f)
{
        struct agent_proc_list *l = ctx;
        if (f->tag != AGENT_T_PROC)
                return 0;
        if (l->n >= MAX_LIST_ENTRIES)
                return -EPROTO;
        struct agent_proc_status *n = realloc(l->procs, (l->n + 1) * sizeof(*n));
        if (!n)
                return -ENOMEM;
        l->procs = n;
        int r = decode_status(f->data, f->len, &l->procs[l->n]);
        if (r < 0)
                return r;
        l->n++;
        return 0;
}

/* -------------------------------------------------------------- build */

static int put_strs(struct agent_msg *m, uint16_t tag, const char *const *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (!v[i])
                        return -EINVAL;
                int r = agent_put_str(m, tag, v[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int agent_put_cmd(struct agent_msg *m, const struct agent_cmd *cmd)
{
        int r;
        if (!cmd || !cmd->argv || cmd->argc == 0 || cmd->argc > AGENT_MAX_ARGV ||
            cmd->envc > AGENT_MAX_ENV || (cmd->envc && !cmd->env))
                return -EINVAL;
        if ((r = put_strs(m, AGENT_T_ARGV, cmd->argv, cmd->argc)) < 0 ||
            (r = put_strs(m, AGENT_T_ENV, cmd->env, cmd->envc)) < 0)
                return r;
        if (cmd->cwd && (r = agent_put_str(m, AGENT_T_CWD, cmd->cwd)) < 0)
                return r;
        if (cmd->user && (r = agent_put_str(m, AGENT_T_USER, cmd->user)) < 0)
                return r;
        return 0;
}

static int build_error(struct sbx_error *err, int r, const char *what)
{
        if (r == -E2BIG)
                return sbx_error_set(err, EINVAL, "%s: request too large", what);
        return sbx_error_set(err, -r, "%s", what);
}

static int decode_error(struct sbx_error *err, int r, const char *what)
{
        return transport_error(err, r == -ENOMEM ? -ENOMEM : -EPROTO, what);
}

/* ----------------------------------------------------------- requests */

int agent_ping(const struct agent_peer *peer, int timeout_ms, struct sbx_error *err)
{
        struct agent_msg m;
        _cleanup_free_ uint8_t *payload = NULL;
        uint32_t len;

        agent_msg_init(&m, AGENT_REQ_PING);
        int r = call_peer(peer, &m, timeout_ms, &payload, &len, err);
        agent_msg_free(&m);
        return r < 0 ? r : 0;
}

int agent_set_hostname(const struct agent_peer *peer, const char *name, struct sbx_error *err)
{
        struct agent_msg m;
        _cleanup_free_ uint8_t *payload = NULL;
        uint32_t len;

        agent_msg_init(&m, AGENT_REQ_HOSTNAME);
        int r = agent_put_str(&m, AGENT_T_HOSTNAME, name);
        if (r == 0)
                r = call_peer(peer, &m, AGENT_CALL_TIMEOUT_MS, &payload, &len, err);
        else
                sbx_error_set(err, -r, "hostname");
        agent_msg_free(&m);
        return r < 0 ? r : 0;
}

int agent_quiesce(const struct agent_peer *peer, struct sbx_error *err)
{
        struct agent_msg m;
        _cleanup_free_ uint8_t *payload = NULL;
        uint32_t len;

        agent_msg_init(&m, AGENT_REQ_QUIESCE);
        int r = call_peer(peer, &m, AGENT_CALL_TIMEOUT_MS, &payload, &len, err);
        agent_msg_free(&m);
        return r < 0 ? r : 0;
}

static int64_t exec_wait(int64_t timeout_ms)
{
        if (timeout_ms <= 0)
                return -1;
        int64_t w = timeout_ms + AGENT_CALL_SLACK_MS;
        return w > INT32_MAX ? INT32_MAX : w;
}

/* The answer to p's request, waited for until timeout_ms (< 0: none). */
static int pending_wait(struct agent_pending *p, int timeout_ms, struct sbx_error *err)
{
        int64_t deadline = timeout_ms < 0 ? -1 : mono_ms() + timeout_ms;
        for (;;) {
                int r = agent_pending_read(p, err);
                if (r != 0)
                        return r < 0 ? r : 0;
                if ((r = wait_fd(p->fd, POLLIN, deadline)) < 0)
                        return transport_error(err, r, "a request");
        }
}

static int exec_request(const struct agent_cmd *cmd, int64_t timeout_ms, struct agent_msg *m,
                        struct sbx_error *err)
{
        int r;
        agent_msg_init(m, AGENT_REQ_EXEC);
        if ((r = agent_put_cmd(m, cmd)) < 0 ||
            (timeout_ms > 0 &&
             (r = agent_put_u64(m, AGENT_T_TIMEOUT_MS, (uint64_t)timeout_ms)) < 0) ||
            (cmd->max_output && (r = agent_put_u64(m, AGENT_T_MAX_OUTPUT, cmd->max_output)) < 0)) {
                agent_msg_free(m);
                return build_error(err, r, "exec");
        }
        return 0;
}

int agent_exec_send(const struct agent_peer *peer, const struct agent_cmd *cmd, int64_t timeout_ms,
                    struct agent_pending *p, struct sbx_error *err)
{
        struct agent_msg m;
        int r = exec_request(cmd, timeout_ms, &m, err);
        if (r < 0)
                return r;
        r = agent_send(peer, &m, p, err);
        agent_msg_free(&m);
        return r;
}

int agent_exec_finish(struct agent_pending *p, struct agent_exec_result *ret, struct sbx_error *err)
{
        uint8_t *payload;
        uint32_t len;
        struct agent_exec_result res = {0};
        int r = pending_answer(p, &payload, &len, err);
        if (r < 0)
                return r;
        r = agent_walk(payload, len, exec_fn, &res);
        if (r >= 0 && (r = ensure_str(&res.out)) >= 0)
                r = ensure_str(&res.err);
        if (r < 0) {
                agent_exec_result_free(&res);
                return decode_error(err, r, "exec");
        }
        *ret = res;
        return 0;
}

int agent_exec(const struct agent_peer *peer, const struct agent_cmd *cmd, int64_t timeout_ms,
               struct agent_exec_result *ret, struct sbx_error *err)
{
        struct agent_pending p;
        int r = agent_exec_send(peer, cmd, timeout_ms, &p, err);
        if (r < 0)
                return r;
        if ((r = pending_wait(&p, (int)exec_wait(timeout_ms), err)) >= 0)
                r = agent_exec_finish(&p, ret, err);
        agent_pending_free(&p);
        return r;
}

int agent_spawn(const struct agent_peer *peer, const struct agent_cmd *cmd,
                struct agent_proc_status *ret, struct sbx_error *err)
{
        struct agent_msg m;
        _cleanup_free_ uint8_t *payload = NULL;
        uint32_t len;
        int r;

        agent_msg_init(&m, AGENT_REQ_SPAWN);
        if ((r = agent_put_cmd(&m, cmd)) < 0 ||
            (cmd->stdin_pipe && (r = agent_put_bool(&m, AGENT_T_STDIN, true)) < 0) ||
            (cmd->lossless && (r = agent_put_bool(&m, AGENT_T_LOSSLESS, true)) < 0) ||
            (cmd->pty_cols && ((r = agent_put_u64(&m, AGENT_T_PTY_COLS, cmd->pty_cols)) < 0 ||
                               (r = agent_put_u64(&m, AGENT_T_PTY_ROWS, cmd->pty_rows)) < 0))) {
                agent_msg_free(&m);
                return build_error(err, r, "spawn");
        }
        r = call_peer(peer, &m, AGENT_CALL_TIMEOUT_MS, &payload, &len, err);
        agent_msg_free(&m);
        if (r < 0)
                return r;
        r = decode_status(payload, len, ret);
        return r < 0 ? decode_error(err, r, "spawn") : 0;
}

static int put_id(struct agent_msg *m, const char *proc_id)
{
        if (!proc_id || !*proc_id || strlen(proc_id) > 64)
                return -EINVAL;
        return agent_put_str(m, AGENT_T_PROC_ID, proc_id);
}

int agent_poll_send(const struct agent_peer *peer, const char *proc_id, uint64_t stdout_from,
                    uint64_t stderr_from, int wait_ms, struct agent_pending *p,
                    struct sbx_error *err)
{
        struct agent_msg m;
        int r;
        wait_ms = MIN(MAX(wait_ms, 0), AGENT_MAX_WAIT_MS);
        agent_msg_init(&m, AGENT_REQ_POLL);
        if ((r = put_id(&m, proc_id)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDOUT_FROM, stdout_from)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDERR_FROM, stderr_from)) < 0 ||
            (wait_ms && (r = agent_put_u64(&m, AGENT_T_WAIT_MS, (uint64_t)wait_ms)) < 0)) {
                agent_msg_free(&m);
                return build_error(err, r, "poll");
        }
        r = agent_send(peer, &m, p, err);
        agent_msg_free(&m);
        return r;
}

int agent_poll_finish(struct agent_pending *p, struct agent_poll_result *ret, struct sbx_error *err)
{
        uint8_t *payload;
        uint32_t len;
        struct agent_poll_result res = {0};
        int r = pending_answer(p, &payload, &len, err);
        if (r < 0)
                return r;
        r = agent_walk(payload, len, poll_fn, &res);
        if (r >= 0 && !res.status.id)
                r = -EPROTO;
        if (r >= 0 && !res.status.argv && !(res.status.argv = calloc(1, sizeof(char *))))
                r = -ENOMEM;
        if (r >= 0 && (r = ensure_str(&res.out)) >= 0)
                r = ensure_str(&res.err);
        if (r < 0) {
                agent_poll_result_free(&res);
                return decode_error(err, r, "poll");
        }
        *ret = res;
        return 0;
}

int agent_poll(const struct agent_peer *peer, const char *proc_id, uint64_t stdout_from,
               uint64_t stderr_from, int wait_ms, struct agent_poll_result *ret,
               struct sbx_error *err)
{
        struct agent_pending p;
        int r = agent_poll_send(peer, proc_id, stdout_from, stderr_from, wait_ms, &p, err);
        if (r < 0)
                return r;
        int wait = MIN(MAX(wait_ms, 0), AGENT_MAX_WAIT_MS);
        if ((r = pending_wait(&p, wait + AGENT_CALL_TIMEOUT_MS, err)) >= 0)
                r = agent_poll_finish(&p, ret, err);
        agent_pending_free(&p);
        return r;
}

int agent_list(const struct agent_peer *peer, struct agent_proc_list *ret, struct sbx_error *err)
{
        struct agent_msg m;
        _cleanup_free_ uint8_t *payload = NULL;
        struct agent_proc_list l = {0};
        uint32_t len;

        agent_msg_init(&m, AGENT_REQ_LIST);
        int r = call_peer(peer, &m, AGENT_CALL_TIMEOUT_MS, &payload, &len, err);
        agent_msg_free(&m);
        if (r < 0)
                return r;
        r = agent_walk(payload, len, list_fn, &l);
        if (r < 0) {
                agent_proc_list_free(&l);
                return decode_error(err, r, "list");
        }
        *ret = l;
        return 0;
}

/* A request whose OK answer carries nothing; m is freed. */
static int simple_call(const struct agent_peer *peer, struct agent_msg *m, int timeout_ms,
                       struct sbx_error *err)
{
        _cleanup_free_ uint8_t *payload = NULL;
        uint32_t len;
        int r = call_peer(peer, m, timeout_ms, &payload, &len, err);
        agent_msg_free(m);
        return r < 0 ? r : 0;
}

int agent_signal(const struct agent_peer *peer, const char *proc_id, int sig, struct sbx_error *err)
{
        struct agent_msg m;
        int r;

        agent_msg_init(&m, AGENT_REQ_SIGNAL);
        if (sig <= 0 || (r = put_id(&m, proc_id)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_SIGNAL, (uint64_t)sig)) < 0) {
                agent_msg_free(&m);
                return build_error(err, -EINVAL, "signal");
        }
        return simple_call(peer, &m, AGENT_CALL_TIMEOUT_MS, err);
}

int agent_kill(const struct agent_peer *peer, const char *proc_id, struct sbx_error *err)
{
        struct agent_msg m;

        agent_msg_init(&m, AGENT_REQ_KILL);
        if (put_id(&m, proc_id) < 0) {
                agent_msg_free(&m);
                return build_error(err, -EINVAL, "kill");
        }
        return simple_call(peer, &m, AGENT_CALL_TIMEOUT_MS, err);
}

int agent_stdin(const struct agent_peer *peer, const char *proc_id, const void *data, size_t len,
                bool close, int timeout_ms, uint64_t *ret_written, struct sbx_error *err)
{
        _cleanup_free_ uint8_t *payload = NULL;
        _cleanup_close_ int fd = -1;
        struct agent_msg m;
        struct agent_field f;
        uint64_t written = 0;
        uint16_t type = 0;
        uint32_t plen = 0;
        int r;

        agent_msg_init(&m, AGENT_REQ_STDIN);
        if ((r = put_id(&m, proc_id)) < 0 ||
            (r = agent_put_bytes(&m, AGENT_T_DATA, data, len)) < 0 ||
            (close && (r = agent_put_bool(&m, AGENT_T_CLOSE, true)) < 0) ||
            (timeout_ms > 0 &&
             (r = agent_put_u64(&m, AGENT_T_TIMEOUT_MS, (uint64_t)timeout_ms)) < 0)) {
                agent_msg_free(&m);
                return build_error(err, r, "stdin");
        }
        r = dial(peer, &fd, err);
        if (r >= 0)
                r = exchange(fd, &m, timeout_ms > 0 ? timeout_ms + AGENT_CALL_SLACK_MS : -1, &type,
                             &payload, &plen, err);
        agent_msg_free(&m);
        if (r < 0)
                return r;
        if (type == AGENT_RESP_OK) {
                if (ret_written)
                        *ret_written = len;
                return 0;
        }
        r = decode_agent_err(payload, plen, err);
        if (r != -ETIME)
                return r;
        /* Timed out: how much of data reached the pipe (never more than
         * was sent, whatever the agent claims). */
        if (agent_find(payload, plen, AGENT_T_WRITTEN, &f) != 1 ||
            agent_field_u64(&f, &written) < 0)
                return transport_error(err, -EPROTO, "stdin");
        if (ret_written)
                *ret_written = MIN(written, (uint64_t)len);
        return r;
}

/* Send m on fd and read an answer that may carry a descriptor with its
 * first byte (ROOT, TCP): 0 with *ret_got (-1: none) for an empty OK, the
 * agent's error, or a transport error. */
static int call_fd(int fd, const struct agent_msg *m, int *ret_got, const char *what,
                   struct sbx_error *err)
{
        int64_t deadline = mono_ms() + AGENT_CALL_TIMEOUT_MS;
        uint8_t head[AGENT_HEADER_SIZE];
        int r;
        agent_header_encode(m, head);
        if ((r = send_full(fd, head, sizeof(head), deadline)) < 0 ||
            (r = send_full(fd, m->payload.data, m->payload.len, deadline)) < 0)
                return transport_error(err, r, what);
        _cleanup_close_ int got = -1;
        size_t have = 0;
        for (;;) {
                ssize_t n = fd_recv(fd, head, sizeof(head), &got, MSG_DONTWAIT);
                if (n == -EAGAIN) {
                        if ((r = wait_fd(fd, POLLIN, deadline)) < 0)
                                return transport_error(err, r, what);
                        continue;
                }
                if (n == -EMSGSIZE)
                        return transport_error(err, -EPROTO, what);
                if (n <= 0)
                        return transport_error(err, -EPIPE, what);
                have = (size_t)n;
                break;
        }
        if (have < sizeof(head) &&
            (r = recv_full(fd, head + have, sizeof(head) - have, deadline)) < 0)
                return transport_error(err, r, what);
        uint16_t type;
        uint32_t len;
        if (agent_header_decode(head, &type, &len) < 0)
                return transport_error(err, -EPROTO, what);
        if (type == AGENT_RESP_ERR) {
                _cleanup_free_ uint8_t *payload = malloc(len ? len : 1);
                if (!payload)
                        return transport_error(err, -ENOMEM, what);
                if (len && (r = recv_full(fd, payload, len, deadline)) < 0)
                        return transport_error(err, r, what);
                return decode_agent_err(payload, len, err);
        }
        if (type != AGENT_RESP_OK || len != 0)
                return transport_error(err, -EPROTO, what);
        *ret_got = TAKE_FD(got);
        return 0;
}

int agent_root(const struct agent_peer *peer, int *ret_fd, struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = dial(peer, &fd, err);
        if (r < 0)
                return r;
        struct agent_msg m;
        agent_msg_init(&m, AGENT_REQ_ROOT);
        _cleanup_close_ int got = -1;
        r = call_fd(fd, &m, &got, "root", err);
        agent_msg_free(&m);
        if (r < 0)
                return r;
        struct stat st;
        /* Whatever the agent sent must at least be a directory. */
        if (got < 0 || fstat(got, &st) < 0 || !S_ISDIR(st.st_mode))
                return transport_error(err, -EPROTO, "root");
        *ret_fd = TAKE_FD(got);
        return 0;
}

/* A socket an agent handed over must be what was asked for: a new TCP
 * stream socket of that family, nothing else (not a file, not a unix
 * socket, not one connected somewhere already). */
static bool fresh_tcp_socket(int s, bool v6)
{
        struct stat st;
        int dom = 0, type = 0, proto = 0;
        socklen_t l1 = sizeof(dom), l2 = sizeof(type), l3 = sizeof(proto);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        return fstat(s, &st) == 0 && S_ISSOCK(st.st_mode) &&
               getsockopt(s, SOL_SOCKET, SO_DOMAIN, &dom, &l1) == 0 &&
               dom == (v6 ? AF_INET6 : AF_INET) &&
               getsockopt(s, SOL_SOCKET, SO_TYPE, &type, &l2) == 0 && type == SOCK_STREAM &&
               getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &proto, &l3) == 0 && proto == IPPROTO_TCP &&
               getpeername(s, (struct sockaddr *)&ss, &sl) < 0 && errno == ENOTCONN;
}

int agent_tcp_open(const struct agent_peer *peer, uint16_t port, bool v6, int *ret_fd,
                   bool *ret_unconnected, struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        struct agent_msg m;
        int r;

        agent_msg_init(&m, AGENT_REQ_TCP);
        if ((r = agent_put_u64(&m, AGENT_T_PORT, port)) < 0 ||
            (r = agent_put_bool(&m, AGENT_T_V6, v6)) < 0) {
                agent_msg_free(&m);
                return build_error(err, r, "tcp");
        }
        _cleanup_close_ int got = -1;
        if ((r = dial(peer, &fd, err)) >= 0)
                r = call_fd(fd, &m, &got, "tcp", err);
        agent_msg_free(&m);
        if (r < 0)
                return r;
        if (got >= 0 && !fresh_tcp_socket(got, v6))
                return transport_error(err, -EPROTO, "tcp");
        *ret_unconnected = got >= 0;
        *ret_fd = got >= 0 ? TAKE_FD(got) : TAKE_FD(fd);
        return 0;
}

int agent_resize(const struct agent_peer *peer, const char *proc_id, unsigned cols, unsigned rows,
                 struct sbx_error *err)
{
        struct agent_msg m;
        int r;
        agent_msg_init(&m, AGENT_REQ_RESIZE);
        if ((r = put_id(&m, proc_id)) < 0 || (r = agent_put_u64(&m, AGENT_T_PTY_COLS, cols)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_PTY_ROWS, rows)) < 0) {
                agent_msg_free(&m);
                return build_error(err, r, "resize");
        }
        return simple_call(peer, &m, AGENT_CALL_TIMEOUT_MS, err);
}

/* ------------------------------------------------------------ streams */

void agent_stream_start_free(struct agent_stream_start *s)
{
        agent_proc_status_free(&s->status);
}

struct stream_fields {
        struct agent_proc_status *st;
        uint64_t *v[4]; /* STDOUT_FROM|NEXT, STDERR_FROM|NEXT, STDOUT_DROPPED, STDERR_DROPPED */
        uint16_t tags[4];
};

static int stream_fn(void *ctx, const struct agent_field *f)
{
        struct stream_fields *sf = ctx;
        int r = status_field(sf->st, f);
        if (r != 0)
                return r < 0 ? r : 0;
        for (int i = 0; i < 4; i++)
                if (sf->v[i] && f->tag == sf->tags[i])
                        return agent_field_u64(f, sf->v[i]) < 0 ? -EPROTO : 0;
        return 0;
}

static int decode_stream_fields(const uint8_t *payload, uint32_t len, struct stream_fields *sf)
{
        memset(sf->st, 0, sizeof(*sf->st));
        int r = agent_walk(payload, len, stream_fn, sf);
        if (r >= 0 && !sf->st->id)
                r = -EPROTO;
        if (r >= 0 && !sf->st->argv && !(sf->st->argv = calloc(1, sizeof(char *))))
                r = -ENOMEM;
        if (r < 0)
                agent_proc_status_free(sf->st);
        return r;
}

int agent_stream_open(const struct agent_peer *peer, const char *proc_id, uint64_t stdout_from,
                      uint64_t stderr_from, int *ret_fd, struct agent_stream_start *ret,
                      struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ uint8_t *payload = NULL;
        struct agent_msg m;
        uint32_t len;
        int r;

        agent_msg_init(&m, AGENT_REQ_STREAM);
        if ((r = put_id(&m, proc_id)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDOUT_FROM, stdout_from)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDERR_FROM, stderr_from)) < 0) {
                agent_msg_free(&m);
                return build_error(err, r, "stream");
        }
        if ((r = dial(peer, &fd, err)) >= 0)
                r = agent_call(fd, &m, AGENT_CALL_TIMEOUT_MS, &payload, &len, err);
        agent_msg_free(&m);
        if (r < 0)
                return r;
        struct agent_stream_start st = {0};
        struct stream_fields sf = {
            .st = &st.status,
            .v = {&st.from[0], &st.from[1], &st.dropped[0], &st.dropped[1]},
            .tags = {AGENT_T_STDOUT_FROM, AGENT_T_STDERR_FROM, AGENT_T_STDOUT_DROPPED,
                     AGENT_T_STDERR_DROPPED},
        };
        if ((r = decode_stream_fields(payload, len, &sf)) < 0)
                return decode_error(err, r, "stream");
        *ret = st;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int agent_stream_exit_decode(const uint8_t *payload, uint32_t len, struct agent_proc_status *st,
                             uint64_t next[2])
{
        struct stream_fields sf = {
            .st = st,
            .v = {&next[0], &next[1]},
            .tags = {AGENT_T_STDOUT_NEXT, AGENT_T_STDERR_NEXT},
        };
        next[0] = next[1] = 0;
        return decode_stream_fields(payload, len, &sf);
}

int agent_stream_error_decode(const uint8_t *payload, uint32_t len, struct sbx_error *err)
{
        return decode_agent_err(payload, len, err);
}
