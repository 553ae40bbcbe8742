/* SPDX-License-Identifier: MIT */
/* The daemon's side of the agent protocol: typed calls to the sandbox-init
 * of one sandbox. Thread-safe (no global state): every call opens its own
 * connection to <sandbox_dir>/agent.sock, sends one request and waits for
 * its answer with a timeout.
 *
 * Return values: >= 0 on success, otherwise a negative errno:
 *
 *   The agent answered with an error (AGENT_RESP_ERR); err->msg holds the
 *   agent's message:
 *     AGENT_E_INVALID   -> -EINVAL     (400 invalid_argument)
 *     AGENT_E_NOT_FOUND -> -ENOENT     (404 not_found)
 *     AGENT_E_CAP       -> -EDQUOT     (402 cap_reached)
 *     AGENT_E_STATE     -> -EBUSY      (409 invalid_state)
 *     AGENT_E_TIMEOUT   -> -ETIME      (408 timeout: stdin not taken in time)
 *     AGENT_E_INTERNAL  -> -EREMOTEIO  (500; also any unknown code)
 *
 *   The agent could not be reached or did not answer properly (the sandbox
 *   is not running, or its agent died); agent_is_transport_error() is true:
 *     -ECONNREFUSED  cannot connect (no socket, nobody listening)
 *     -EPIPE         the connection broke before the whole answer came
 *     -ETIMEDOUT     no answer within the timeout
 *     -EPROTO        the answer is malformed
 *
 *   Local: -ENOMEM; -EINVAL also for arguments rejected before sending
 *   (e.g. an empty command), which maps to the same 400. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"
#include "proto.h"

/* How long a quick call (ping, spawn, list, signal, kill) may take, and the
 * slack added to calls that wait on purpose (exec, poll with wait). */
#define AGENT_CALL_TIMEOUT_MS 10000
#define AGENT_CALL_SLACK_MS 10000

static inline bool agent_is_transport_error(int r)
{
        return r == -ECONNREFUSED || r == -EPIPE || r == -ETIMEDOUT || r == -EPROTO;
}

/* A command to run. Strings are borrowed for the duration of the call. */
struct agent_cmd {
        const char *const *argv; /* argc >= 1 */
        size_t argc;
        const char *const *env; /* "KEY=VALUE", override the defaults */
        size_t envc;
        const char *cwd;   /* NULL: /workspace; relative: against it */
        const char *user;  /* NULL: root; else "name|uid[:group|gid]" */
        bool stdin_pipe;   /* spawn: give it a stdin pipe */
        bool lossless;     /* spawn: its output waits for a reader */
        unsigned pty_cols; /* spawn: both > 0: on a terminal of this size */
        unsigned pty_rows;
        uint64_t max_output; /* exec: bytes kept per stream; 0 = 1 MiB */
};

/* Put cmd's ARGV, ENV and CWD fields into m (exec and spawn requests);
 * -EINVAL for a command the agent would refuse by its shape, -E2BIG past
 * the frame. */
int agent_put_cmd(struct agent_msg *m, const struct agent_cmd *cmd);

struct agent_exec_result {
        int exit_code; /* status, or 128 + signal */
        char *out;     /* stdout bytes, NUL terminated (not counted) */
        size_t out_len;
        char *err; /* stderr bytes, NUL terminated (not counted) */
        size_t err_len;
        int64_t duration_ms;
        bool timed_out;
        bool truncated;
};

struct agent_proc_status {
        char *id;
        char **argv; /* NULL terminated */
        size_t argc;
        bool exited;
        int exit_code;      /* only when exited */
        int64_t started_at; /* ms since the epoch */
        int64_t exited_at;  /* ms since the epoch; 0 while running */
        /* The record of an exec whose answer was lost (its requester went
         * away first), with the flags that answer would have carried. */
        bool exec;
        bool timed_out;
        bool truncated;
        bool pty;      /* on a terminal */
        bool lossless; /* spawned lossless */
};

struct agent_poll_result {
        struct agent_proc_status status;
        char *out; /* NUL terminated (not counted) */
        size_t out_len;
        char *err;
        size_t err_len;
        uint64_t out_next, err_next;       /* pass as the next *_from */
        uint64_t out_dropped, err_dropped; /* bytes lost before this read */
};

struct agent_proc_list {
        struct agent_proc_status *procs; /* in start order */
        size_t n;
};

void agent_exec_result_free(struct agent_exec_result *r);
void agent_proc_status_free(struct agent_proc_status *s);
void agent_poll_result_free(struct agent_poll_result *r);
void agent_proc_list_free(struct agent_proc_list *l);

/* "TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2", upper case, with
 * an optional "SIG" prefix ("SIGTERM") -> the signal number; -EINVAL for
 * anything else, lower or mixed case included. */
int agent_signal_from_name(const char *name);

/* How to reach one sandbox's agent: dial returns a connected stream socket,
 * O_CLOEXEC and non-blocking, or -ECONNREFUSED / -ETIMEDOUT (nobody
 * listens, a full backlog) with the real cause in err. The manager makes
 * one per sandbox from its runtime driver (rt_dial). */
struct agent_peer {
        int (*dial)(void *ctx, int *ret_fd, struct sbx_error *err);
        void *ctx;
};
/* A peer listening on <dir>/agent.sock (sandbox-init --listen), for tests
 * and tools; dir must outlive it. */
struct agent_peer agent_peer_dir(const char *dir);

/* Send req on fd and wait for its answer, at most timeout_ms (< 0: no
 * limit). An OK answer's payload is returned (malloc'd, may be empty); an
 * ERR answer becomes the mapped error above. */
int agent_call(int fd, const struct agent_msg *req, int timeout_ms, uint8_t **ret_payload,
               uint32_t *ret_len, struct sbx_error *err);

/* A request whose answer is read later, without waiting, by a caller
 * with an event loop of its own (the API's held requests): agent_send
 * connects and sends the request whole (a quick call's timeout), then
 * agent_pending_read takes what has come whenever fd is readable, and
 * the call's _finish decodes the whole answer. */
struct agent_pending {
        int fd; /* the connection, non-blocking; -1 once freed */
        uint8_t head[AGENT_HEADER_SIZE];
        uint32_t head_got;
        uint16_t type;
        uint8_t *payload;
        uint32_t len, got;
};
int agent_send(const struct agent_peer *peer, const struct agent_msg *req, struct agent_pending *p,
               struct sbx_error *err);
/* 1: the answer is whole; 0: more is to come (wait for POLLIN); < 0 a
 * transport error. */
int agent_pending_read(struct agent_pending *p, struct sbx_error *err);
/* Closes the connection and frees what was read; p may be read again
 * only after another send. */
void agent_pending_free(struct agent_pending *p);
int agent_exec_send(const struct agent_peer *peer, const struct agent_cmd *cmd, int64_t timeout_ms,
                    struct agent_pending *p, struct sbx_error *err);
int agent_exec_finish(struct agent_pending *p, struct agent_exec_result *ret,
                      struct sbx_error *err);
int agent_poll_send(const struct agent_peer *peer, const char *proc_id, uint64_t stdout_from,
                    uint64_t stderr_from, int wait_ms, struct agent_pending *p,
                    struct sbx_error *err);
int agent_poll_finish(struct agent_pending *p, struct agent_poll_result *ret,
                      struct sbx_error *err);

/* Each call below connects, asks, and closes. */
int agent_ping(const struct agent_peer *peer, int timeout_ms, struct sbx_error *err);
/* Runs cmd to completion. timeout_ms is the command's deadline (0: none);
 * the call waits that long plus AGENT_CALL_SLACK_MS (forever with none). */
int agent_exec(const struct agent_peer *peer, const struct agent_cmd *cmd, int64_t timeout_ms,
               struct agent_exec_result *ret, struct sbx_error *err);
int agent_spawn(const struct agent_peer *peer, const struct agent_cmd *cmd,
                struct agent_proc_status *ret, struct sbx_error *err);
/* wait_ms: hold until output or exit, at most this long (<= 30000). */
int agent_poll(const struct agent_peer *peer, const char *proc_id, uint64_t stdout_from,
               uint64_t stderr_from, int wait_ms, struct agent_poll_result *ret,
               struct sbx_error *err);
int agent_list(const struct agent_peer *peer, struct agent_proc_list *ret, struct sbx_error *err);
int agent_signal(const struct agent_peer *peer, const char *proc_id, int sig,
                 struct sbx_error *err);
int agent_kill(const struct agent_peer *peer, const char *proc_id, struct sbx_error *err);
/* A way to TCP port on the sandbox's loopback (AGENT_REQ_TCP): either
 * (*ret_unconnected) a new TCP socket of the sandbox's network namespace
 * (AF_INET6 with v6), checked to be one, for the caller to connect to the
 * loopback; or a connection that carries that port's stream both ways
 * from now on (v6 ignored: the agent tried both). -ENOENT when nothing
 * listens there. */
int agent_tcp_open(const struct agent_peer *peer, uint16_t port, bool v6, int *ret_fd,
                   bool *ret_unconnected, struct sbx_error *err);
/* Set the sandbox's hostname through PID 1 (AGENT_REQ_HOSTNAME). */
int agent_set_hostname(const struct agent_peer *peer, const char *name, struct sbx_error *err);
/* Ask PID 1 to close every socket of the host until `resume` appears
 * beside its socket (AGENT_REQ_QUIESCE). */
int agent_quiesce(const struct agent_peer *peer, struct sbx_error *err);
/* An O_PATH fd of the sandbox's "/" (from sandbox-init, over SCM_RIGHTS). */
int agent_root(const struct agent_peer *peer, int *ret_fd, struct sbx_error *err);
/* A terminal's new size (AGENT_REQ_RESIZE). */
int agent_resize(const struct agent_peer *peer, const char *proc_id, unsigned cols, unsigned rows,
                 struct sbx_error *err);

/* Streams (proto.h, "streams"): the answer to AGENT_REQ_STREAM. */
struct agent_stream_start {
        struct agent_proc_status status;
        uint64_t from[2];    /* where the stream starts, stdout and stderr */
        uint64_t dropped[2]; /* asked for, but no longer held */
};
/* Ask for p's stream from the offsets; on success *ret_fd is the
 * connection (non-blocking), which carries stream frames from now on. */
int agent_stream_open(const struct agent_peer *peer, const char *proc_id, uint64_t stdout_from,
                      uint64_t stderr_from, int *ret_fd, struct agent_stream_start *ret,
                      struct sbx_error *err);
void agent_stream_start_free(struct agent_stream_start *s);
/* An EXIT frame's payload: the exited status and the next offsets. */
int agent_stream_exit_decode(const uint8_t *payload, uint32_t len, struct agent_proc_status *st,
                             uint64_t next[2]);
/* An ERROR frame's payload, as the mapped -errno with err set. */
int agent_stream_error_decode(const uint8_t *payload, uint32_t len, struct sbx_error *err);

/* Answers once all of data is in the process's stdin pipe; close: close it
 * afterwards. timeout_ms > 0: the agent gives up when the process has not
 * taken it all by then: -ETIME, *ret_written (may be NULL) the bytes of
 * data written, the rest discarded and stdin left open. <= 0: no limit.
 * Nothing of data stays queued in the agent once the call returns, however
 * it ends. One write at a time: another pending one is -EBUSY. */
int agent_stdin(const struct agent_peer *peer, const char *proc_id, const void *data, size_t len,
                bool close, int timeout_ms, uint64_t *ret_written, struct sbx_error *err);
