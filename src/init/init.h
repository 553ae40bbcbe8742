/* SPDX-License-Identifier: MIT */
/* sandbox-init internals: PID 1 of a sandbox. One thread, one epoll loop.
 *
 *   main.c     startup (signals, fds, the listening socket) and the loop
 *   conn.c     connections: framing, buffered replies, held requests
 *   handlers.c one function per request type (proto.h)
 *   proc.c     the process table: fork/exec, pipes, reaping, stdin
 *   ring.c     output rings and the UTF-8 boundary rule
 *   stream.c   STREAM readers: frames out, backpressure on the pipes
 *   guard.c    --guard: the workload's own pid namespace and its PID 1
 *
 * Object lifetime: an event batch from epoll_wait may still hold pointers to
 * a connection or process that an earlier event in the same batch released.
 * Released objects are therefore only marked dead and moved to a graveyard
 * that the loop empties after the batch. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "../agent/proto.h"
#include "../common/util.h"
#include "ring.h"

#define INIT_MAX_CONNS 1024
#define INIT_MAX_RELAYS 512 /* TCP connections relayed at once (AGENT_REQ_TCP) */
#define INIT_STDIN_QUEUE_MAX (8u << 20)
#define INIT_ARGV_MAX_BYTES (1u << 20) /* kept per process and echoed in statuses */
#define INIT_CWD_DEFAULT "/workspace"

enum watch_kind { W_LISTEN, W_SIGNAL, W_CONN, W_STREAM, W_STDIN, W_RELAY };

/* What epoll_event.data.ptr points at. */
struct watch {
        enum watch_kind kind;
        void *owner; /* struct conn / struct proc / NULL */
        int index;   /* W_STREAM: 0 stdout, 1 stderr */
};

enum held_kind { HELD_NONE, HELD_EXEC, HELD_POLL, HELD_STDIN, HELD_STREAM };

struct proc;

struct conn {
        struct conn *next, *prev;
        struct watch w;
        int fd;
        uint32_t events; /* current epoll interest */

        /* the frame being read */
        uint8_t hdr[AGENT_HEADER_SIZE];
        uint32_t hdr_got;
        bool have_header;
        uint16_t type;
        uint32_t plen, pgot;
        uint8_t *payload;
        bool frame_ready;

        /* the reply being written */
        struct buf out;
        size_t out_off;
        bool closing; /* close once out is flushed */

        /* a held request waits on one process */
        enum held_kind held;
        struct proc *held_proc;
        struct conn *wnext, *wprev; /* in held_proc->waiters */
        int64_t deadline_us;        /* HELD_POLL, HELD_STDIN (0: none); CLOCK_MONOTONIC */
        uint64_t poll_from[2];
        uint64_t stdin_start, stdin_target; /* the write's bytes: [start, target) of in_queued */
        struct proc *answer_of;             /* the exec whose answer is in out */
        uint64_t spos[2];                   /* HELD_STREAM: the next byte to send per stream */
        int snext;                          /* ... and which stream goes first next time */

        struct conn *rnext; /* in ctx->ready */
        bool in_ready;
        bool dead;
};

struct stream {
        struct watch w;
        int fd;           /* read end; -1 after EOF */
        struct ring ring; /* spawned processes */
        struct buf kept;  /* execs: the first max_output bytes */
        bool truncated;
        bool paused;  /* not watched: held for a reader (stream.c) */
        bool settled; /* the process exited and the pipe was found empty (or at EOF) */
};

struct proc {
        struct proc *next, *prev; /* table, in start order */
        char id[48];
        char **argv; /* NULL terminated */
        size_t argc;
        char *cwd; /* for the message when it does not exist */
        bool is_exec;
        bool lossless;    /* output waits for a reader (proto.h, "streams") */
        bool pty;         /* out[0] and in_fd are a terminal's master */
        int pty_fd;       /* the master, for resizing */
        uint64_t keep[2]; /* lossless: what the last reader had been sent */
        bool pump;        /* its pipes' holds are to be looked at again (stream.c) */
        /* In the table clients see (LIST, POLL, SIGNAL, KILL): every spawned
         * process, and an exec whose requester went away before the whole
         * answer was written (see proto.h). */
        bool listed;
        struct conn *answer_conn; /* an exec's answer is being written there */
        pid_t pid;
        bool exited;
        int exit_code;
        size_t argv_bytes;
        int64_t started_at, exited_at; /* ms since the epoch */
        uint64_t exit_seq;             /* order of exits: the oldest record goes first */
        int64_t fork_us, exit_us;      /* CLOCK_MONOTONIC */
        int64_t deadline_us;           /* execs; 0 = none */
        bool timed_out;
        struct stream out[2];
        int err_fd; /* read end of the exec-failure pipe */

        /* stdin (spawned with STDIN) */
        struct watch in_w;
        int in_fd;
        bool in_watched;
        bool in_close_requested;
        bool in_broken; /* the reader went away (EPIPE) */
        struct buf in_q;
        size_t in_qoff;
        uint64_t in_queued, in_written, in_close_at;

        struct conn *waiters;
        bool dead;
};

/* --guard (guard.c). */
struct guard {
        bool on;
        char *hide_dir; /* the agent socket's directory (--listen), or NULL */
        char *title;    /* argv and the environment after it, blanked in the guard */
        size_t title_len;
        pid_t pid;      /* the current guard, in our pid namespace; -1: none */
        int life_fd;    /* a socket it holds open: hung up once it died */
        int mnt_fd;     /* its mount namespace, which every workload joins */
        int own_pid_ns; /* ours, to make the next one (Linux), or -1 */
};

/* AGENT_REQ_QUIESCE (quiesce.c): no socket of the host open while a
 * runtime saves the sandbox (gVisor cannot save a host socket), then the
 * listener again once the host says so. */
struct quiesce {
        bool pending;       /* asked: close everything once the answer is out */
        int64_t pending_us; /* ... or at this time, answered or not */
        bool on;            /* closed: waiting for the resume file */
        int64_t poll_us;    /* when to look for it next */
};

struct init_ctx {
        int epfd;
        int sigfd;
        int listen_fd;
        int devnull_fd;
        bool listen_paused;
        int64_t listen_resume_us;
        struct watch listen_w, sig_w;
        struct rlimit child_nofile; /* children's limit: the original soft one, as both */
        bool restore_nofile;
        struct guard guard;
        char *listen_path; /* --listen's, for a quiesce; NULL with --listen-fd */
        struct quiesce quiesce;

        struct conn *conns;
        unsigned n_conns;
        struct proc *procs_head, *procs_tail;
        unsigned n_running; /* started and not exited: what AGENT_MAX_PROCS caps */
        uint64_t seq, exit_seq;
        bool pump_any; /* some process has pump set */

        struct tcp_relay *relays; /* AGENT_REQ_TCP's connections (tcp.c) */
        struct tcp_relay *dead_relays;
        unsigned n_relays;

        struct conn *ready; /* conns whose next frame can now be dispatched */
        struct conn *dead_conns;
        struct proc *dead_procs;
};

/* A command to start, already validated. Strings are borrowed. */
struct proc_spec {
        char **argv; /* NULL terminated, argc >= 1 */
        size_t argc;
        char **env; /* NULL terminated "K=V", complete */
        const char *cwd;
        bool stdin_pipe;
        bool is_exec;
        bool lossless;
        unsigned pty_cols, pty_rows; /* both > 0: on a terminal */
        bool as_user;                /* run as uid:gid instead of root */
        uint32_t uid, gid;
        int64_t timeout_ms; /* execs */
        size_t max_output;  /* execs */
};

/* ---- conn.c ---- */
int conn_accept_all(struct init_ctx *ctx);
/* Close c now, whatever it holds (its fd handed to someone else). */
void conn_drop(struct init_ctx *ctx, struct conn *c);
void conn_on_event(struct init_ctx *ctx, struct conn *c, uint32_t events);
/* Send iov[0..n) as one piece of the byte stream: what the socket does not
 * take now is queued (and sent on EPOLLOUT). False when c was closed. */
struct iovec;
bool conn_send_iov(struct init_ctx *ctx, struct conn *c, const struct iovec *iov, int n);
/* Queue a reply frame (NULL: an empty OK); the held state is cleared. */
void conn_reply(struct init_ctx *ctx, struct conn *c, const struct agent_msg *m);
/* Answer OK with fd attached (SCM_RIGHTS); the caller still owns fd. */
int conn_reply_fd(struct init_ctx *ctx, struct conn *c, int fd);
void conn_reply_err(struct init_ctx *ctx, struct conn *c, enum agent_err code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Hold c on p (linked into p->waiters). */
void conn_hold(struct conn *c, struct proc *p, enum held_kind kind);
void conn_unhold(struct conn *c);
/* Answer INVALID and close: the framing is lost. */
void conn_protocol_error(struct init_ctx *ctx, struct conn *c, const char *why);
/* Dispatch frames that became dispatchable (see ctx->ready). */
void conn_run_ready(struct init_ctx *ctx);
void conn_free_dead(struct init_ctx *ctx);

/* ---- handlers.c ---- */
/* p's status fields (proto.h), its command cut to argv_budget bytes. */
int proc_put_status(struct agent_msg *m, const struct proc *p, size_t argv_budget);
void handle_request(struct init_ctx *ctx, struct conn *c, uint16_t type, const uint8_t *payload,
                    uint32_t len);
/* Re-evaluate what waits on p after output, exit or a deadline. */
void handlers_proc_changed(struct init_ctx *ctx, struct proc *p);
/* A held poll whose wait ran out. */
void handlers_poll_expired(struct init_ctx *ctx, struct conn *c);
/* A held stdin write whose deadline passed: answered TIMEOUT. */
void handlers_stdin_expired(struct init_ctx *ctx, struct conn *c);
/* p exited: answer its waiters; an exec is then forgotten. */
void handlers_proc_exited(struct init_ctx *ctx, struct proc *p);

/* ---- guard.c ---- */
/* The listener on a path (a stale socket there is replaced). */
int listen_on_path(struct init_ctx *ctx, const char *path);

/* Quiesce (quiesce.c): the request, and the loop's part of it. */
void quiesce_request(struct init_ctx *ctx);
/* The next time quiesce_tick wants to run; INT64_MAX = none. */
int64_t quiesce_deadline(const struct init_ctx *ctx);
void quiesce_tick(struct init_ctx *ctx, int64_t now_us);
/* Close every connection (their answers are dropped). */
void conn_close_all(struct init_ctx *ctx);

/* At startup, once the listener exists: the first namespace and guard. */
int guard_start(struct init_ctx *ctx, const char *listen_path, int argc, char **argv);
/* Before a fork: make a new namespace and guard if the guard is gone. */
int guard_ensure(struct init_ctx *ctx);
/* Guard mode and the guard died, or does within wait_ms: a fork that
 * failed ENOMEM failed for want of a namespace init. */
bool guard_lost(const struct init_ctx *ctx, int wait_ms);
/* pid was reaped: true if it was the guard (it is forgotten). */
bool guard_reaped(struct init_ctx *ctx, pid_t pid);
/* In a workload child, guard mode: join the guard's mount namespace and
 * drop CAP_SYS_ADMIN. 0 or -errno. */
int guard_enter(const struct guard *g);

/* ---- tcp.c ---- */
/* AGENT_REQ_TCP: hand the daemon a socket of the sandbox's network
 * namespace, or (under the guard: gVisor) connect to the port on loopback
 * and relay the connection's bytes to it from the event loop (c becomes
 * the relay's). */
struct req;
void tcp_relay_start(struct init_ctx *ctx, struct conn *c, const struct req *rq);
struct tcp_relay;
/* An event on one of a relay's sockets. */
void tcp_relay_on_event(struct init_ctx *ctx, struct tcp_relay *r);
/* Free the relays closed during the batch of events just handled. */
void tcp_relay_free_dead(struct init_ctx *ctx);
/* End every relay (a quiesce: no host socket may stay open). */
void tcp_relay_kill_all(struct init_ctx *ctx);

/* ---- proc.c ---- */
/* Close every fd from first up (close_range, or a loop). */
void proc_close_from(int first);
int proc_start(struct init_ctx *ctx, const struct proc_spec *spec, struct proc **ret,
               struct sbx_error *err);
struct proc *proc_find(struct init_ctx *ctx, const char *id);
void proc_on_stream(struct init_ctx *ctx, struct proc *p, int index);
/* Read stream index now, up to what its hold allows; true when anything
 * changed (data or EOF). */
bool proc_stream_read(struct init_ctx *ctx, struct proc *p, int index);
/* Watch a paused stream's pipe again. */
void proc_stream_resume(struct init_ctx *ctx, struct proc *p, int index);
/* The retained bytes of a stream are [stream_start, stream_total) of its
 * offsets (bytes since the process started): a ring's newest, or an exec's
 * first max_output. */
uint64_t stream_start(const struct stream *s);
uint64_t stream_total(const struct stream *s);
void stream_copy(const struct stream *s, uint64_t from, size_t len, uint8_t *out);
void proc_reap_all(struct init_ctx *ctx);
/* Kill the group of a running process (no-op once exited). */
void proc_kill_group(struct proc *p, int sig);
/* Forget the oldest exited records beyond the bounds (proto.h). */
void proc_trim_exited(struct init_ctx *ctx);
/* Forget p: close its pipes, free its buffers, release its table slot. */
void proc_forget(struct init_ctx *ctx, struct proc *p);
/* The answer to exec p was written out whole (delivered: p is forgotten),
 * or its connection went away first (p is listed, its result kept). */
void proc_exec_answered(struct init_ctx *ctx, struct proc *p, bool delivered);
void proc_free_dead(struct init_ctx *ctx);
/* Exec deadlines: kill what ran out of time. */
void proc_check_deadlines(struct init_ctx *ctx, int64_t now_us);
/* stdin: queue data (and maybe close). 0, -E2BIG queue full, -EPIPE broken. */
int proc_stdin_queue(struct init_ctx *ctx, struct proc *p, const void *data, size_t len,
                     bool close_after, uint64_t *ret_target);
void proc_stdin_flush(struct init_ctx *ctx, struct proc *p);
/* The write held on c gives up: what of it is not in the pipe yet is
 * dropped, its close with it. Returns how many of its bytes were written. */
uint64_t proc_stdin_abandon(struct init_ctx *ctx, struct proc *p, const struct conn *c);
void proc_on_stdin(struct init_ctx *ctx, struct proc *p);

/* ---- stream.c ---- */
/* AGENT_REQ_STREAM: answer the start, then c carries p's frames. */
void stream_attach(struct init_ctx *ctx, struct conn *c, struct proc *p, const uint64_t from[2]);
/* Send what c may send now: data, then the exit once there is no more. */
void stream_pump(struct init_ctx *ctx, struct conn *c);
/* p has new output or exited: every reader of it gets its share. */
void stream_proc_changed(struct init_ctx *ctx, struct proc *p);
/* Whether a stream reader is attached to p. */
bool stream_has_readers(const struct proc *p);
/* The reader c goes away (its connection closes). */
void stream_detach(struct init_ctx *ctx, struct conn *c);
/* p is forgotten: its readers get an ERROR frame and are closed. */
void stream_proc_gone(struct init_ctx *ctx, struct proc *p, const char *why);
/* How many bytes of stream i may be read from its pipe now (SIZE_MAX: no
 * hold). */
size_t stream_allowance(const struct proc *p, int i);
/* A poll from `from` counts as having read up to there (lossless). */
void stream_poll_read(struct init_ctx *ctx, struct proc *p, const uint64_t from[2]);
/* Mark p's holds to be looked at again, from the loop (no recursion). */
void stream_mark(struct init_ctx *ctx, struct proc *p);
/* The loop's part: unpause what may be read again. */
void stream_run_pumps(struct init_ctx *ctx);

/* ---- main.c ---- */
/* Change an fd's epoll interest (add when needed). 0 or -errno. */
int loop_watch(struct init_ctx *ctx, int fd, struct watch *w, uint32_t events);
void loop_unwatch(struct init_ctx *ctx, int fd);
