/* SPDX-License-Identifier: MIT */
/* Connections to sandbox-init. Each carries one request at a time: a frame
 * is read (non-blocking, exactly as many bytes as it needs), dispatched,
 * and answered by one frame. A request may be held (exec until exit, poll
 * with a wait, stdin until written); the next frame of that connection is
 * read but not dispatched until the answer is out, so a client that does
 * not read its answers cannot make us buffer more than one. */
#include "init.h"
#include "../common/fdpass.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static bool conn_busy(const struct conn *c)
{
        return c->held != HELD_NONE || c->out_off < c->out.len || c->closing;
}

static void conn_update_events(struct init_ctx *ctx, struct conn *c)
{
        uint32_t ev = EPOLLRDHUP;

        if (c->dead)
                return;
        if (!c->frame_ready && !c->closing)
                ev |= EPOLLIN;
        if (c->out_off < c->out.len)
                ev |= EPOLLOUT;
        if (ev != c->events && loop_watch(ctx, c->fd, &c->w, ev) == 0)
                c->events = ev;
}

static void conn_close(struct init_ctx *ctx, struct conn *c)
{
        if (c->dead)
                return;
        /* An exec still running, or whose answer is not all out: its
         * requester is gone, so its result is kept (proto.h). */
        struct proc *lost = c->held == HELD_EXEC ? c->held_proc : c->answer_of;
        /* A write to stdin nobody waits for any more: drop its rest. */
        if (c->held == HELD_STDIN && c->held_proc)
                proc_stdin_abandon(ctx, c->held_proc, c);
        /* A reader gone: its hold on the pipes goes with it. */
        stream_detach(ctx, c);
        conn_unhold(c);
        loop_unwatch(ctx, c->fd);
        close(c->fd);
        c->fd = -1;
        free(c->payload);
        c->payload = NULL;
        buf_free(&c->out);
        if (c->prev)
                c->prev->next = c->next;
        else
                ctx->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        ctx->n_conns--;
        c->dead = true;
        c->next = ctx->dead_conns;
        c->prev = NULL;
        ctx->dead_conns = c;
        if (lost)
                proc_exec_answered(ctx, lost, false);
}

void conn_drop(struct init_ctx *ctx, struct conn *c)
{
        conn_close(ctx, c);
}

void conn_close_all(struct init_ctx *ctx)
{
        while (ctx->conns)
                conn_close(ctx, ctx->conns);
}

void conn_free_dead(struct init_ctx *ctx)
{
        while (ctx->dead_conns) {
                struct conn *c = ctx->dead_conns;
                ctx->dead_conns = c->next;
                free(c);
        }
}

void conn_hold(struct conn *c, struct proc *p, enum held_kind kind)
{
        conn_unhold(c);
        c->held = kind;
        c->held_proc = p;
        c->wprev = NULL;
        c->wnext = p->waiters;
        if (p->waiters)
                p->waiters->wprev = c;
        p->waiters = c;
}

void conn_unhold(struct conn *c)
{
        struct proc *p = c->held_proc;

        if (p) {
                if (c->wprev)
                        c->wprev->wnext = c->wnext;
                else
                        p->waiters = c->wnext;
                if (c->wnext)
                        c->wnext->wprev = c->wprev;
        }
        c->held = HELD_NONE;
        c->held_proc = NULL;
        c->wnext = c->wprev = NULL;
}

/* Write what is queued. Returns false when the connection was closed. */
static bool conn_flush(struct init_ctx *ctx, struct conn *c)
{
        while (c->out_off < c->out.len) {
                ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                        c->out_off += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                conn_close(ctx, c);
                return false;
        }
        if (c->out_off == c->out.len) {
                c->out_off = 0;
                c->out.len = 0;
                if (c->answer_of)
                        proc_exec_answered(ctx, c->answer_of, true);
                if (c->out.cap > 64 * 1024 && c->held != HELD_STREAM)
                        buf_free(&c->out); /* do not sit on a big answer's memory */
                if (c->closing) {
                        conn_close(ctx, c);
                        return false;
                }
        }
        return true;
}

/* A held request was answered from another object's event while the next
 * frame of c already waits: dispatch it from the loop, not from here, so
 * that no handler runs inside another one. */
static void conn_schedule(struct init_ctx *ctx, struct conn *c)
{
        if (c->dead || c->in_ready || !c->frame_ready || conn_busy(c))
                return;
        c->in_ready = true;
        c->rnext = ctx->ready;
        ctx->ready = c;
}

bool conn_send_iov(struct init_ctx *ctx, struct conn *c, const struct iovec *iov, int n)
{
        size_t sent = 0;

        if (c->dead)
                return false;
        if (c->out_off == c->out.len) {
                /* Nothing queued: try to send straight from the caller's. */
                struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
                ssize_t r;
                do
                        r = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
                while (r < 0 && errno == EINTR);
                if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                        conn_close(ctx, c);
                        return false;
                }
                sent = r > 0 ? (size_t)r : 0;
        }
        for (int i = 0; i < n; i++) {
                size_t skip = MIN(sent, iov[i].iov_len);
                sent -= skip;
                if (skip < iov[i].iov_len &&
                    buf_append(&c->out, (const uint8_t *)iov[i].iov_base + skip,
                               iov[i].iov_len - skip) < 0) {
                        conn_close(ctx, c); /* the client sees EOF, not half a frame */
                        return false;
                }
        }
        if (!conn_flush(ctx, c))
                return false;
        conn_update_events(ctx, c);
        return true;
}

static void conn_queue_reply(struct init_ctx *ctx, struct conn *c, const uint8_t *head,
                             const void *payload, size_t len)
{
        struct iovec iov[2] = {{(void *)head, AGENT_HEADER_SIZE}, {(void *)payload, len}};
        conn_send_iov(ctx, c, iov, len ? 2 : 1);
}

void conn_reply(struct init_ctx *ctx, struct conn *c, const struct agent_msg *m)
{
        uint8_t head[AGENT_HEADER_SIZE];
        struct agent_msg empty;

        if (c->dead)
                return;
        conn_unhold(c);
        if (!m) {
                agent_msg_init(&empty, AGENT_RESP_OK);
                m = &empty;
        }
        agent_header_encode(m, head);
        conn_queue_reply(ctx, c, head, m->payload.data, m->payload.len);
        if (m == &empty)
                agent_msg_free(&empty);
        conn_schedule(ctx, c);
}

int conn_reply_fd(struct init_ctx *ctx, struct conn *c, int fd)
{
        uint8_t head[AGENT_HEADER_SIZE];
        struct agent_msg m;

        if (c->dead)
                return -EPIPE;
        /* The descriptor must travel with the frame's first byte: only when
         * nothing else is queued on this connection. */
        if (c->out_off != c->out.len)
                return -EBUSY;
        conn_unhold(c);
        agent_msg_init(&m, AGENT_RESP_OK);
        agent_header_encode(&m, head);
        agent_msg_free(&m);
        if (fd_send(c->fd, head, AGENT_HEADER_SIZE, fd, MSG_DONTWAIT) < 0) {
                conn_close(ctx, c);
                return -EPIPE;
        }
        conn_schedule(ctx, c);
        return 0;
}

void conn_reply_err(struct init_ctx *ctx, struct conn *c, enum agent_err code, const char *fmt, ...)
{
        struct agent_msg m;
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        agent_msg_init(&m, AGENT_RESP_ERR);
        agent_put_u64(&m, AGENT_T_ERR_CODE, code);
        agent_put_str(&m, AGENT_T_MESSAGE, msg);
        conn_reply(ctx, c, &m);
        agent_msg_free(&m);
}

void conn_protocol_error(struct init_ctx *ctx, struct conn *c, const char *why)
{
        if (c->dead)
                return;
        c->closing = true; /* no further requests: we lost the framing */
        c->frame_ready = false;
        conn_reply_err(ctx, c, AGENT_E_INVALID, "protocol error: %s", why);
        if (!c->dead && c->out_off == c->out.len)
                conn_close(ctx, c);
}

static void conn_dispatch(struct init_ctx *ctx, struct conn *c)
{
        if (c->dead || !c->frame_ready || conn_busy(c))
                return;
        uint8_t *payload = c->payload;
        uint16_t type = c->type;
        uint32_t len = c->plen;
        c->payload = NULL;
        c->frame_ready = false;
        c->have_header = false;
        c->hdr_got = 0;
        c->plen = c->pgot = 0;
        handle_request(ctx, c, type, payload, len);
        free(payload);
}

void conn_run_ready(struct init_ctx *ctx)
{
        while (ctx->ready) {
                struct conn *c = ctx->ready;
                ctx->ready = c->rnext;
                c->rnext = NULL;
                c->in_ready = false;
                conn_dispatch(ctx, c);
                conn_update_events(ctx, c);
        }
}

static bool conn_got_header(struct init_ctx *ctx, struct conn *c)
{
        if (agent_header_decode(c->hdr, &c->type, &c->plen) < 0) {
                conn_protocol_error(ctx, c, "bad frame header");
                return false;
        }
        c->have_header = true;
        c->pgot = 0;
        c->payload = malloc(c->plen ? c->plen : 1);
        if (!c->payload) {
                c->closing = true;
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "out of memory");
                return false;
        }
        if (c->plen == 0)
                c->frame_ready = true;
        return true;
}

/* One recv() towards the header, or once it is in, the payload. */
static ssize_t conn_recv_some(struct conn *c)
{
        if (!c->have_header)
                return recv(c->fd, c->hdr + c->hdr_got, AGENT_HEADER_SIZE - c->hdr_got,
                            MSG_DONTWAIT);
        return recv(c->fd, c->payload + c->pgot, c->plen - c->pgot, MSG_DONTWAIT);
}

/* Count n bytes received. False when they completed a header that
 * conn_got_header() refused. */
static bool conn_got(struct init_ctx *ctx, struct conn *c, size_t n)
{
        if (c->have_header) {
                c->pgot += (uint32_t)n;
                if (c->pgot == c->plen)
                        c->frame_ready = true;
                return true;
        }
        c->hdr_got += (uint32_t)n;
        return c->hdr_got != AGENT_HEADER_SIZE || conn_got_header(ctx, c);
}

/* Read towards one complete frame. False when the connection is gone. */
static bool conn_read(struct init_ctx *ctx, struct conn *c)
{
        while (!c->frame_ready && !c->dead && !c->closing) {
                ssize_t n = conn_recv_some(c);
                if (n > 0) {
                        if (!conn_got(ctx, c, (size_t)n))
                                return !c->dead;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                conn_close(ctx, c); /* EOF or error: the peer is gone */
                return false;
        }
        return !c->dead;
}

void conn_on_event(struct init_ctx *ctx, struct conn *c, uint32_t events)
{
        if (c->dead)
                return;
        if (events & EPOLLERR) {
                conn_close(ctx, c);
                return;
        }
        if ((events & EPOLLOUT) && !conn_flush(ctx, c))
                return;
        if (c->held == HELD_STREAM && c->out_off == c->out.len) {
                stream_pump(ctx, c); /* the socket took what waited: more */
                if (c->dead)
                        return;
        }
        if ((events & EPOLLIN) && !conn_read(ctx, c))
                return;
        if (events & (EPOLLHUP | EPOLLRDHUP)) {
                /* The daemon gave up on this connection: drop whatever it
                 * held (an exec keeps running, listed: conn_close). */
                conn_close(ctx, c);
                return;
        }
        conn_dispatch(ctx, c);
        conn_update_events(ctx, c);
}

int conn_accept_all(struct init_ctx *ctx)
{
        for (int i = 0; i < 64; i++) {
                int fd = accept4(ctx->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return 0;
                        return -errno;
                }
                if (ctx->n_conns >= INIT_MAX_CONNS) {
                        close(fd); /* the client sees EOF at once, not a hang */
                        continue;
                }
                struct conn *c = calloc(1, sizeof(*c));
                if (!c) {
                        close(fd);
                        return -ENOMEM;
                }
                c->fd = fd;
                c->w = (struct watch){.kind = W_CONN, .owner = c};
                buf_init(&c->out, 0);
                if (loop_watch(ctx, fd, &c->w, EPOLLIN | EPOLLRDHUP) < 0) {
                        close(fd);
                        free(c);
                        continue;
                }
                c->events = EPOLLIN | EPOLLRDHUP;
                c->next = ctx->conns;
                if (ctx->conns)
                        ctx->conns->prev = c;
                ctx->conns = c;
                ctx->n_conns++;
        }
        return 0;
}
