/* SPDX-License-Identifier: MIT */
/* AGENT_REQ_TCP: the daemon's way to a TCP port inside the sandbox, made
 * from inside, so that it works alike for every class and network mode (a
 * sandbox without a network, `none`, still has its loopback).
 *
 * Where PID 1 shares the host's kernel (ns), it hands the daemon a new,
 * unconnected socket made in the sandbox's network namespace: a socket
 * keeps the namespace it was made in, so the daemon's connect to
 * 127.0.0.1 reaches the sandbox's loopback, and PID 1 never waits on a
 * connect (a full backlog would stall its loop).
 *
 * Under gVisor (the guard) the sandbox's loopback lives in the sentry's
 * own network stack and its sockets cannot travel to the host: PID 1
 * connects to the port itself, answers, and from then on its event loop
 * copies bytes between the agent connection and that TCP connection
 * until both directions have ended, a buffer of 16 KiB each way: a slow
 * peer fills its own buffer and is then not read, it holds nobody up. */
#include "init.h"
#include "request.h"
#include "../common/relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_BUF (16 * 1024) /* per direction: at most 512 relays, 16 MiB */

/* One relayed connection, carried by the event loop: the agent connection
 * (a) and the TCP connection (b), both non-blocking and watched
 * edge-triggered, so a peer's hang-up wakes the loop once, not forever.
 * b is connected asynchronously (a full backlog must not hold PID 1 up):
 * 127.0.0.1 first, then ::1 (a server may listen on "localhost" that
 * resolved to either); the answer to the request goes first on a, ahead
 * of the stream's bytes. */
struct tcp_relay {
        struct tcp_relay *next, *prev;
        struct watch wa, wb;
        struct relay_dir up, down; /* a -> b, b -> a */
        uint16_t port;
        bool connecting;
        bool v6;   /* b is the ::1 attempt */
        bool dead; /* closed; freed after the batch of events */
        char bufs[2 * RELAY_BUF];
};

#define RELAY_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

/* A non-blocking connect to the port on loopback: the fd, connected or
 * connecting, or -errno. */
static int connect_start(uint16_t port, bool v6)
{
        struct sockaddr_in v4a = {.sin_family = AF_INET,
                                  .sin_port = htons(port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct sockaddr_in6 v6a = {
            .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        int r = v6 ? connect(fd, (struct sockaddr *)&v6a, sizeof(v6a))
                   : connect(fd, (struct sockaddr *)&v4a, sizeof(v4a));
        if (r < 0 && errno != EINPROGRESS) {
                r = -errno;
                close(fd);
                return r;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
}

static void relay_close(struct init_ctx *ctx, struct tcp_relay *r)
{
        if (r->dead)
                return;
        r->dead = true;
        loop_unwatch(ctx, r->up.from);
        close(r->up.from);
        if (r->down.from >= 0) {
                loop_unwatch(ctx, r->down.from);
                close(r->down.from);
        }
        if (r->prev)
                r->prev->next = r->next;
        else
                ctx->relays = r->next;
        if (r->next)
                r->next->prev = r->prev;
        ctx->n_relays--;
        /* Another event of this batch may still point at it. */
        r->next = ctx->dead_relays;
        r->prev = NULL;
        ctx->dead_relays = r;
}

void tcp_relay_free_dead(struct init_ctx *ctx)
{
        while (ctx->dead_relays) {
                struct tcp_relay *r = ctx->dead_relays;
                ctx->dead_relays = r->next;
                free(r);
        }
}

/* Queue the answer on a: OK, after which the stream's bytes follow; or an
 * error, after which a is closed once it is out. */
static void relay_answer(struct tcp_relay *r, int err)
{
        struct agent_msg m;
        char msg[128];
        if (err == 0) {
                agent_msg_init(&m, AGENT_RESP_OK);
        } else {
                bool refused = err == -ECONNREFUSED;
                snprintf(msg, sizeof(msg), refused ? "nothing listens on port %u" : "port %u: %s",
                         r->port, strerror(-err));
                agent_msg_init(&m, AGENT_RESP_ERR);
                agent_put_u64(&m, AGENT_T_ERR_CODE, refused ? AGENT_E_NOT_FOUND : AGENT_E_INTERNAL);
                agent_put_str(&m, AGENT_T_MESSAGE, msg);
        }
        uint8_t *out = (uint8_t *)r->down.buf;
        agent_header_encode(&m, out);
        size_t n = MIN(m.payload.len, r->down.cap - AGENT_HEADER_SIZE);
        if (n)
                memcpy(out + AGENT_HEADER_SIZE, m.payload.data, n);
        r->down.len = AGENT_HEADER_SIZE + n;
        r->down.off = 0;
        agent_msg_free(&m);
        if (err) {
                /* Nothing to read from b, nothing of a's to pass on. */
                r->down.eof = true;
                r->up.eof = r->up.done = true;
        }
}

/* b's connect ended (or is still under way: nothing to do). */
static void relay_connected(struct init_ctx *ctx, struct tcp_relay *r)
{
        int b = r->down.from, e = 0;
        socklen_t el = sizeof(e);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockopt(b, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
                e = errno;
        if (e == 0 && getpeername(b, (struct sockaddr *)&ss, &sl) < 0 && errno == ENOTCONN)
                return; /* still connecting */
        if (e == ECONNREFUSED && !r->v6) {
                loop_unwatch(ctx, b);
                close(b);
                r->v6 = true;
                int nb = connect_start(r->port, true);
                r->down.from = r->up.to = nb;
                if (nb >= 0 && loop_watch(ctx, nb, &r->wb, RELAY_EVENTS) == 0)
                        return; /* the ::1 attempt's events come */
                e = nb < 0 ? ECONNREFUSED : errno;
        }
        r->connecting = false;
        relay_answer(r, -e);
}

void tcp_relay_on_event(struct init_ctx *ctx, struct tcp_relay *r)
{
        if (!r->dead && r->connecting)
                relay_connected(ctx, r);
        if (r->dead || r->connecting)
                return;
        /* Edge-triggered: move all that can move now. */
        while (!r->dead) {
                int m1 = r->up.done ? 0 : relay_pump(&r->up, POLLIN, POLLOUT);
                int m2 = relay_pump(&r->down, POLLIN, POLLOUT);
                if (m1 < 0 || m2 < 0 || (r->up.done && r->down.done)) {
                        relay_close(ctx, r);
                        return;
                }
                if (m1 == 0 && m2 == 0)
                        return;
        }
}

void tcp_relay_kill_all(struct init_ctx *ctx)
{
        while (ctx->relays)
                relay_close(ctx, ctx->relays);
}

/* c's fd becomes the relay's a; b is connected or connecting. */
static void relay_begin(struct init_ctx *ctx, struct conn *c, int b, uint16_t port)
{
        struct tcp_relay *r = calloc(1, sizeof(*r));
        int a = dup(c->fd);
        conn_drop(ctx, c);
        if (!r || a < 0) {
                free(r); /* never watched */
                if (a >= 0)
                        close(a);
                close(b);
                return; /* the daemon sees its connection closed: a transport error */
        }
        fcntl(a, F_SETFD, FD_CLOEXEC);
        fcntl(a, F_SETFL, fcntl(a, F_GETFL) | O_NONBLOCK);
        r->up = (struct relay_dir){.from = a, .to = b, .buf = r->bufs, .cap = RELAY_BUF};
        r->down =
            (struct relay_dir){.from = b, .to = a, .buf = r->bufs + RELAY_BUF, .cap = RELAY_BUF};
        r->port = port;
        r->connecting = true;
        r->wa = (struct watch){.kind = W_RELAY, .owner = r};
        r->wb = (struct watch){.kind = W_RELAY, .owner = r};
        r->next = ctx->relays;
        if (r->next)
                r->next->prev = r;
        ctx->relays = r;
        ctx->n_relays++;
        if (loop_watch(ctx, a, &r->wa, RELAY_EVENTS) < 0 ||
            loop_watch(ctx, b, &r->wb, RELAY_EVENTS) < 0) {
                relay_close(ctx, r);
                return;
        }
        tcp_relay_on_event(ctx, r);
}

static void hand_socket(struct init_ctx *ctx, struct conn *c, bool v6)
{
        int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0) {
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "tcp: socket: %s", strerror(errno));
                return;
        }
        int r = conn_reply_fd(ctx, c, fd);
        close(fd);
        if (r == -EBUSY)
                conn_reply_err(ctx, c, AGENT_E_STATE, "tcp: answers pending on this connection");
}

void tcp_relay_start(struct init_ctx *ctx, struct conn *c, const struct req *rq)
{
        uint64_t port = rq->port;
        if (port < 1 || port > 65535) {
                conn_reply_err(ctx, c, AGENT_E_INVALID, "tcp: port must be 1..65535");
                return;
        }
        if (!ctx->guard.on) {
                hand_socket(ctx, c, rq->v6);
                return;
        }
        if (ctx->n_relays == INIT_MAX_RELAYS) {
                conn_reply_err(ctx, c, AGENT_E_CAP, "tcp: %d connections open already",
                               INIT_MAX_RELAYS);
                return;
        }
        if (c->out_off < c->out.len) {
                conn_reply_err(ctx, c, AGENT_E_STATE, "tcp: answers pending on this connection");
                return;
        }
        int b = connect_start((uint16_t)port, false);
        if (b < 0)
                b = connect_start((uint16_t)port, true);
        if (b < 0) {
                conn_reply_err(ctx, c, b == -ECONNREFUSED ? AGENT_E_NOT_FOUND : AGENT_E_INTERNAL,
                               "port %u: %s", (unsigned)port, strerror(-b));
                return;
        }
        relay_begin(ctx, c, b, (uint16_t)port);
}
