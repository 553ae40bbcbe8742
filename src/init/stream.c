/* SPDX-License-Identifier: MIT */
/* STREAM readers (proto.h, "streams"). A reader is a connection held on a
 * process (HELD_STREAM) with its own next offset per stream (c->spos). It is
 * sent data frames straight from the process's rings while its socket takes
 * them, and the exit frame once the process exited and every byte was sent.
 *
 * Backpressure: a stream's pipe is read at most AGENT_STREAM_WINDOW bytes
 * past the slowest attached reader (stream_allowance). A pipe that may not
 * be read is not watched (proc.c pauses it), so its writer blocks once the
 * pipe is full; whatever lets a hold move (a reader sent more, a reader
 * left, a poll of a lossless process) marks the process, and the loop looks
 * at its pipes again after the batch (stream_run_pumps): never from inside
 * another handler. */
#include "init.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* Each status in a frame echoes at most this much command line. */
#define STREAM_SNDBUF (256 << 10) /* a reader's socket buffer (the kernel doubles it) */
#define FRAME_ARGV_BUDGET (AGENT_SF_MAX_LEN / 2)

/* The lowest offset of stream i that a reader still needs: the slowest
 * attached reader's next byte or, for a lossless process with none, where
 * the last one was. False when nothing holds the stream. */
static bool hold_low(const struct proc *p, int i, uint64_t *ret)
{
        bool any = false;
        uint64_t low = UINT64_MAX;
        for (const struct conn *c = p->waiters; c; c = c->wnext) {
                if (c->held == HELD_STREAM) {
                        any = true;
                        low = MIN(low, c->spos[i]);
                }
        }
        if (!any && p->lossless) {
                low = p->keep[i];
                any = true;
        }
        *ret = low;
        return any;
}

bool stream_has_readers(const struct proc *p)
{
        for (const struct conn *c = p->waiters; c; c = c->wnext)
                if (c->held == HELD_STREAM)
                        return true;
        return false;
}

size_t stream_allowance(const struct proc *p, int i)
{
        const struct stream *s = &p->out[i];
        uint64_t low;
        if (!s->ring.data || !hold_low(p, i, &low))
                return SIZE_MAX;
        uint64_t limit = low + AGENT_STREAM_WINDOW;
        return s->ring.total >= limit ? 0 : (size_t)MIN(limit - s->ring.total, (uint64_t)SIZE_MAX);
}

void stream_mark(struct init_ctx *ctx, struct proc *p)
{
        if (p->dead || !(p->out[0].paused || p->out[1].paused))
                return;
        p->pump = true;
        ctx->pump_any = true;
}

void stream_run_pumps(struct init_ctx *ctx)
{
        while (ctx->pump_any) {
                ctx->pump_any = false;
                for (struct proc *p = ctx->procs_head; p; p = p->next) {
                        if (!p->pump || p->dead)
                                continue;
                        p->pump = false;
                        bool changed = false;
                        for (int i = 0; i < 2; i++) {
                                if (!p->out[i].paused || stream_allowance(p, i) == 0)
                                        continue;
                                proc_stream_resume(ctx, p, i);
                                /* A running process's pipe says when it has
                                 * more; an exited one's may be empty for good,
                                 * and only a read finds that out. */
                                if (p->exited)
                                        changed |= proc_stream_read(ctx, p, i);
                        }
                        if (changed && p->listed) {
                                handlers_proc_changed(ctx, p);
                                stream_proc_changed(ctx, p);
                        }
                }
        }
}

/* ------------------------------------------------------------- frames */

/* A frame: head, then the payload's iovecs. False when c was closed. */
static bool send_frame(struct init_ctx *ctx, struct conn *c, uint8_t type, uint64_t offset,
                       const struct iovec *payload, int n)
{
        uint8_t head[AGENT_SF_HEAD];
        struct iovec iov[4];
        size_t len = 0;

        iov[0] = (struct iovec){head, sizeof(head)};
        for (int i = 0; i < n && i < 3; i++) {
                iov[1 + i] = payload[i];
                len += payload[i].iov_len;
        }
        agent_sf_head_encode(head, type, (uint32_t)len, offset);
        return conn_send_iov(ctx, c, iov, 1 + MIN(n, 3));
}

static bool send_msg_frame(struct init_ctx *ctx, struct conn *c, uint8_t type, struct agent_msg *m)
{
        struct iovec iov = {m->payload.data, m->payload.len};
        bool ok = send_frame(ctx, c, type, 0, &iov, m->payload.len ? 1 : 0);
        agent_msg_free(m);
        return ok;
}

/* The stream ends with an ERROR frame; c closes once it is out. */
static void send_error(struct init_ctx *ctx, struct conn *c, enum agent_err code, const char *msg)
{
        struct agent_msg m;
        agent_msg_init(&m, 0);
        c->closing = true;
        if (agent_put_u64(&m, AGENT_T_ERR_CODE, code) < 0 ||
            agent_put_str(&m, AGENT_T_MESSAGE, msg) < 0)
                agent_msg_free(&m); /* out of memory: an empty ERROR still ends it */
        send_msg_frame(ctx, c, AGENT_SF_ERROR, &m);
}

/* Every byte c may ever get was sent and the process exited. */
static bool reader_finished(const struct proc *p, const struct conn *c)
{
        if (!p->exited)
                return false;
        for (int i = 0; i < 2; i++) {
                const struct stream *s = &p->out[i];
                if ((s->fd >= 0 && !s->settled) || c->spos[i] < stream_total(s))
                        return false;
        }
        return true;
}

static void send_exit(struct init_ctx *ctx, struct conn *c, const struct proc *p)
{
        struct agent_msg m;
        int r;
        agent_msg_init(&m, 0);
        c->closing = true;
        if ((r = proc_put_status(&m, p, FRAME_ARGV_BUDGET)) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDOUT_NEXT, c->spos[0])) < 0 ||
            (r = agent_put_u64(&m, AGENT_T_STDERR_NEXT, c->spos[1])) < 0) {
                agent_msg_free(&m);
                send_error(ctx, c, AGENT_E_INTERNAL, "cannot build the exit frame");
                return;
        }
        send_msg_frame(ctx, c, AGENT_SF_EXIT, &m);
}

/* The stream with bytes for c, taking turns; -1 when none has. */
static int next_stream(const struct proc *p, const struct conn *c)
{
        for (int k = 0; k < 2; k++) {
                int i = (c->snext + k) & 1;
                if (c->spos[i] < stream_total(&p->out[i]))
                        return i;
        }
        return -1;
}

/* The iovecs of [from, from + n) of stream s (a ring wraps: two). */
static int stream_iov(const struct stream *s, uint64_t from, size_t n, struct iovec iov[2])
{
        if (!s->ring.data) {
                iov[0] = (struct iovec){s->kept.data + from, n};
                return 1;
        }
        size_t at = (size_t)(from & (s->ring.size - 1));
        size_t first = MIN(n, s->ring.size - at);
        iov[0] = (struct iovec){s->ring.data + at, first};
        if (first == n)
                return 1;
        iov[1] = (struct iovec){s->ring.data, n - first};
        return 2;
}

void stream_pump(struct init_ctx *ctx, struct conn *c)
{
        struct proc *p = c->held_proc;
        bool moved = false;

        if (c->dead || c->held != HELD_STREAM || !p)
                return;
        /* One frame at a time into the socket: what it does not take waits
         * in c->out, and nothing more is read for c until that is out. */
        while (!c->dead && c->out_off == c->out.len) {
                int i = next_stream(p, c);
                if (i < 0)
                        break;
                const struct stream *s = &p->out[i];
                if (c->spos[i] < stream_start(s)) {
                        /* Holds keep this from happening; say so if it did. */
                        send_error(ctx, c, AGENT_E_INTERNAL, "output was lost under a reader");
                        return;
                }
                size_t n = (size_t)MIN(stream_total(s) - c->spos[i], (uint64_t)AGENT_SF_DATA_MAX);
                struct iovec iov[2];
                int k = stream_iov(s, c->spos[i], n, iov);
                uint64_t at = c->spos[i];
                c->spos[i] += n;
                c->snext = 1 - i;
                moved = true;
                if (!send_frame(ctx, c, i == 0 ? AGENT_SF_STDOUT : AGENT_SF_STDERR, at, iov, k))
                        return; /* closed: conn_close detached it */
        }
        if (moved)
                stream_mark(ctx, p);
        if (!c->dead && c->out_off == c->out.len && reader_finished(p, c))
                send_exit(ctx, c, p);
}

/* ------------------------------------------------------------ readers */

void stream_attach(struct init_ctx *ctx, struct conn *c, struct proc *p, const uint64_t from[2])
{
        c->spos[0] = from[0];
        c->spos[1] = from[1];
        c->snext = 0;
        /* What sits in the socket on its way counts as sent: keep it small
         * (gVisor's own socket buffers are larger than Linux's). */
        int sndbuf = STREAM_SNDBUF;
        setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        conn_hold(c, p, HELD_STREAM);
        stream_pump(ctx, c);
}

void stream_proc_changed(struct init_ctx *ctx, struct proc *p)
{
        struct conn *next;
        for (struct conn *c = p->waiters; c; c = next) {
                next = c->wnext;
                if (c->held == HELD_STREAM)
                        stream_pump(ctx, c);
        }
}

void stream_detach(struct init_ctx *ctx, struct conn *c)
{
        struct proc *p = c->held_proc;
        if (c->held != HELD_STREAM || !p)
                return;
        if (p->lossless) {
                bool last = true;
                for (const struct conn *w = p->waiters; w; w = w->wnext)
                        if (w != c && w->held == HELD_STREAM)
                                last = false;
                /* The hold stays where the last reader was: a reconnect
                 * from its offsets loses nothing. */
                for (int i = 0; last && i < 2; i++)
                        p->keep[i] = MAX(p->keep[i], c->spos[i]);
        }
        conn_unhold(c);
        stream_mark(ctx, p);
        if (p->exited && p->listed)
                proc_trim_exited(ctx); /* it may have been kept for this reader */
}

void stream_proc_gone(struct init_ctx *ctx, struct proc *p, const char *why)
{
        char msg[128];
        struct conn *next;
        snprintf(msg, sizeof(msg), "process %s %s", p->id, why);
        for (struct conn *c = p->waiters; c; c = next) {
                next = c->wnext;
                if (c->held != HELD_STREAM)
                        continue;
                conn_unhold(c);
                send_error(ctx, c, AGENT_E_NOT_FOUND, msg);
        }
}

void stream_poll_read(struct init_ctx *ctx, struct proc *p, const uint64_t from[2])
{
        if (!p->lossless)
                return;
        for (int i = 0; i < 2; i++)
                p->keep[i] = MAX(p->keep[i], MIN(from[i], stream_total(&p->out[i])));
        stream_mark(ctx, p);
}
