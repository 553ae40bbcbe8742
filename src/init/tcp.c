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
 * own network stack and its sockets cannot travel to the host: PID 1 forks
 * a relay for each connection, which connects to the port, answers, and
 * from then on copies bytes between the agent connection and that TCP
 * connection until both directions have ended. The event loop of PID 1
 * never carries these bytes: a slow peer holds only its own relay. */
#include "init.h"
#include "request.h"
#include "../common/relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RELAY_FD 3

/* Connect to port on 127.0.0.1, else on ::1 (a server may listen on
 * "localhost" that resolved to either). An fd, or -errno of the first. */
static int connect_loopback(uint16_t port)
{
        struct sockaddr_in v4 = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct sockaddr_in6 v6 = {
            .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        const struct sockaddr *addrs[] = {(const struct sockaddr *)&v4,
                                          (const struct sockaddr *)&v6};
        const socklen_t lens[] = {sizeof(v4), sizeof(v6)};
        int first = 0;
        for (size_t i = 0; i < ARRAY_SIZE(addrs); i++) {
                int fd = socket(addrs[i]->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        first = first ? first : -errno;
                        continue;
                }
                if (connect(fd, addrs[i], lens[i]) == 0) {
                        int one = 1;
                        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                        return fd;
                }
                first = first ? first : -errno;
                close(fd);
        }
        return first ? first : -ECONNREFUSED;
}

static void answer(int fd, int r, uint16_t port)
{
        struct agent_msg m;
        if (r >= 0) {
                agent_msg_init(&m, AGENT_RESP_OK);
        } else {
                char msg[128];
                bool refused = r == -ECONNREFUSED;
                snprintf(msg, sizeof(msg), refused ? "nothing listens on port %u" : "port %u: %s",
                         port, strerror(-r));
                agent_msg_init(&m, AGENT_RESP_ERR);
                agent_put_u64(&m, AGENT_T_ERR_CODE, refused ? AGENT_E_NOT_FOUND : AGENT_E_INTERNAL);
                agent_put_str(&m, AGENT_T_MESSAGE, msg);
        }
        agent_msg_send(fd, &m);
        agent_msg_free(&m);
}

static _Noreturn void relay_child(uint16_t port)
{
        struct sigaction sa = {.sa_handler = SIG_DFL};
        sigemptyset(&sa.sa_mask);
        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        sigaction(sig, &sa, NULL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Nothing of PID 1 but this one connection: not its listener, not
         * the other connections, not the workloads' pipes. */
        proc_close_from(RELAY_FD + 1);
        int fd = connect_loopback(port);
        answer(RELAY_FD, fd, port);
        if (fd >= 0)
                relay_run(RELAY_FD, fd, NULL, -1);
        _exit(0);
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
        pid_t pid = fork();
        if (pid < 0) {
                conn_reply_err(ctx, c, AGENT_E_INTERNAL, "tcp: fork: %s", strerror(errno));
                return;
        }
        if (pid == 0) {
                if (c->fd != RELAY_FD && dup2(c->fd, RELAY_FD) < 0)
                        _exit(1);
                relay_child((uint16_t)port);
        }
        /* The child has the connection now. */
        ctx->relays[ctx->n_relays++] = pid;
        conn_drop(ctx, c);
}

void tcp_relay_reaped(struct init_ctx *ctx, pid_t pid)
{
        for (unsigned i = 0; i < ctx->n_relays; i++)
                if (ctx->relays[i] == pid) {
                        ctx->relays[i] = ctx->relays[--ctx->n_relays];
                        return;
                }
}

void tcp_relay_kill_all(struct init_ctx *ctx)
{
        for (unsigned i = 0; i < ctx->n_relays; i++)
                kill(ctx->relays[i], SIGKILL);
}
