/* SPDX-License-Identifier: MIT */
#include "conns.h"

#include <arpa/inet.h>
#include <linux/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../common/log.h"
#include "../common/util.h"

struct api_conn {
        struct api_conn *prev, *next;
        int fd;
        bool in_request;     /* between the head and the response's end */
        uint64_t bytes_idle; /* bytes received when it became idle */
        int64_t head_ms;     /* when a head's first byte was seen; 0 = none */
        char peer[INET6_ADDRSTRLEN];
};

static uint64_t bytes_received(int fd)
{
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        memset(&ti, 0, sizeof(ti));
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
            len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
                return 0;
        return ti.tcpi_bytes_received;
}

static void peer_name(struct MHD_Connection *conn, char *out, size_t len)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        out[0] = '\0';
        if (!ci || !ci->client_addr)
                return;
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
                          (socklen_t)len);
        else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
                          (socklen_t)len);
}

void conns_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                  enum MHD_ConnectionNotificationCode code)
{
        struct api_conns *cs = cls;
        if (code == MHD_CONNECTION_NOTIFY_STARTED)
                atomic_fetch_add(&cs->open, 1);
        else
                atomic_fetch_sub(&cs->open, 1);
        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *ci =
                    MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                struct api_conn *c = calloc(1, sizeof(*c));
                if (!c || !ci) {
                        free(c);
                        *socket_context = NULL;
                        return;
                }
                c->fd = ci->connect_fd;
                peer_name(conn, c->peer, sizeof(c->peer));
                pthread_mutex_lock(&cs->lock);
                c->next = cs->head;
                if (cs->head)
                        cs->head->prev = c;
                cs->head = c;
                pthread_mutex_unlock(&cs->lock);
                *socket_context = c;
                return;
        }
        struct api_conn *c = *socket_context;
        if (!c)
                return;
        pthread_mutex_lock(&cs->lock);
        if (c->prev)
                c->prev->next = c->next;
        else
                cs->head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        pthread_mutex_unlock(&cs->lock);
        *socket_context = NULL;
        free(c);
}

static struct api_conn *conn_of(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

void conns_request_begin(struct api_conns *cs, struct MHD_Connection *conn)
{
        struct api_conn *c = conn_of(conn);
        if (!c)
                return;
        pthread_mutex_lock(&cs->lock);
        c->in_request = true;
        c->head_ms = 0;
        pthread_mutex_unlock(&cs->lock);
}

void conns_request_end(struct api_conns *cs, struct MHD_Connection *conn)
{
        struct api_conn *c = conn_of(conn);
        if (!c)
                return;
        uint64_t b = bytes_received(c->fd);
        pthread_mutex_lock(&cs->lock);
        c->in_request = false;
        c->bytes_idle = b;
        c->head_ms = 0;
        pthread_mutex_unlock(&cs->lock);
}

static void watch_once(struct api_conns *cs, int64_t now)
{
        pthread_mutex_lock(&cs->lock);
        for (struct api_conn *c = cs->head; c; c = c->next) {
                if (c->in_request || c->fd < 0)
                        continue;
                if (!c->head_ms) {
                        if (bytes_received(c->fd) != c->bytes_idle)
                                c->head_ms = now;
                        continue;
                }
                if (now - c->head_ms < cs->head_timeout_ms)
                        continue;
                /* shutdown(), not close(): the descriptor stays libmicrohttpd's,
                 * whose thread sees the end of the stream and cleans up. */
                shutdown(c->fd, SHUT_RDWR);
                log_warn("closed a connection from %s: its request head took over %lld ms", c->peer,
                         (long long)cs->head_timeout_ms);
                c->fd = -1;
                atomic_fetch_add(&cs->cut, 1);
        }
        pthread_mutex_unlock(&cs->lock);
}

static void *watch_main(void *arg)
{
        struct api_conns *cs = arg;
        /* Look a few times per deadline: a head is cut between the deadline
         * and a quarter of it later. */
        int64_t period = MAX(MIN(cs->head_timeout_ms / 4, 1000), 50);
        pthread_mutex_lock(&cs->lock);
        while (!cs->stop) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                int64_t ns = ts.tv_nsec + period * 1000000;
                ts.tv_sec += ns / 1000000000;
                ts.tv_nsec = ns % 1000000000;
                pthread_cond_timedwait(&cs->cond, &cs->lock, &ts);
                if (cs->stop)
                        break;
                pthread_mutex_unlock(&cs->lock);
                watch_once(cs, mono_ms());
                pthread_mutex_lock(&cs->lock);
        }
        pthread_mutex_unlock(&cs->lock);
        return NULL;
}

int conns_start(struct api_conns *cs, int64_t head_timeout_ms)
{
        pthread_mutex_init(&cs->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&cs->cond, &ca);
        pthread_condattr_destroy(&ca);
        cs->head = NULL;
        cs->stop = false;
        cs->head_timeout_ms = head_timeout_ms;
        cs->running = false;
        if (head_timeout_ms <= 0)
                return 0;
        int r = pthread_create(&cs->thread, NULL, watch_main, cs);
        if (r != 0)
                return -r;
        cs->running = true;
        return 0;
}

void conns_stop(struct api_conns *cs)
{
        if (!cs->running)
                return;
        pthread_mutex_lock(&cs->lock);
        cs->stop = true;
        pthread_cond_signal(&cs->cond);
        pthread_mutex_unlock(&cs->lock);
        pthread_join(cs->thread, NULL);
        cs->running = false;
}
