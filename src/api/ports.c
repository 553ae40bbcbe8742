/* SPDX-License-Identifier: MIT */
/* The port proxy (ports.h). One upstream connection per request: the head
 * is sent when the client's head is in, the body is passed on as it comes
 * (chunked when the client's was), and the answer's head is read once the
 * request is complete; its body is then read only when the client can
 * take more, so nothing is held whole in either direction. A 101 hands the
 * client's connection to a relay (src/common/relay.c) until either side
 * ends. The sandbox stays entered (mgr_enter: a call in flight, so it is
 * not suspended under it) until the response is done. */
#include "ports.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../agent/client.h"
#include "../common/log.h"
#include "../common/relay.h"
#include "api-internal.h"
#include "httpmsg.h"

#define PROXY_BLOCK (64u << 10)

enum body_mode { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_TO_CLOSE };

struct proxy {
        struct api *a;
        struct sandbox *sb; /* entered; left when the proxy is freed */
        int fd;             /* the upstream connection, through sandbox-init */
        int client_fd;      /* the client's socket, for its hang-up; -1 unknown */
        bool chunked_up;    /* the body is sent on chunked */
        bool upgrade;       /* the client asked for an Upgrade */
        bool head_only;     /* HEAD: no body comes back */
        int write_err;      /* the first error sending the body on */
        uint64_t body_in;   /* request body bytes taken, against max_file */
        char *in;           /* from upstream, not yet taken: [in_off, in_len) */
        size_t in_off, in_len;
        enum body_mode mode;
        uint64_t left; /* BODY_LENGTH: bytes still to come */
        struct httpmsg_chunked ch;
};

static int64_t timeout_ms(const struct api *a)
{
        return a->cfg.port_timeout_ms > 0 ? a->cfg.port_timeout_ms : PORTS_TIMEOUT_DEFAULT_MS;
}

static void proxy_free(struct proxy *p)
{
        if (!p)
                return;
        if (p->fd >= 0)
                close(p->fd);
        if (p->sb)
                mgr_leave(p->a->mgr, p->sb);
        free(p->in);
        free(p);
}

uint16_t ports_parse(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 5 || strspn(s, "0123456789") != n || s[0] == '0')
                return 0;
        long v = strtol(s, NULL, 10);
        return v >= 1 && v <= 65535 ? (uint16_t)v : 0;
}

/* ---------------------------------------------------------------- I/O */

/* Wait for events on the upstream fd (and the client's hang-up) until
 * timeout_ms: 0, -ETIMEDOUT, -EPIPE when the client went away. */
static int wait_up(struct proxy *p, short events, int64_t timeout_ms)
{
        int64_t deadline = mono_ms() + timeout_ms;
        for (;;) {
                struct pollfd f[2] = {{.fd = p->fd, .events = events},
                                      {.fd = p->client_fd, .events = POLLRDHUP}};
                int64_t left = deadline - mono_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                int n = poll(f, p->client_fd >= 0 ? 2 : 1, (int)MIN(left, 1000));
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0 && (f[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                        return -EPIPE;
                if (n > 0 && f[0].revents)
                        return 0;
                if (atomic_load(&p->a->draining))
                        return -ESHUTDOWN;
        }
}

static int send_up(struct proxy *p, const void *data, size_t len)
{
        const char *d = data;
        while (len) {
                ssize_t n = send(p->fd, d, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
                        int r = wait_up(p, POLLOUT, 2 * timeout_ms(p->a));
                        if (r < 0)
                                return r;
                        continue;
                }
                if (n < 0)
                        return -errno;
                d += n;
                len -= (size_t)n;
        }
        return 0;
}

/* More bytes from upstream into in: > 0 got, 0 EOF, -errno. */
static ssize_t recv_up(struct proxy *p, int64_t timeout_ms)
{
        if (p->in_off == p->in_len)
                p->in_off = p->in_len = 0;
        if (p->in_off > 0 && p->in_len == PORTS_HEAD_MAX) {
                memmove(p->in, p->in + p->in_off, p->in_len - p->in_off);
                p->in_len -= p->in_off;
                p->in_off = 0;
        }
        if (p->in_len == PORTS_HEAD_MAX)
                return -E2BIG;
        for (;;) {
                ssize_t n =
                    recv(p->fd, p->in + p->in_len, PORTS_HEAD_MAX - p->in_len, MSG_DONTWAIT);
                if (n >= 0) {
                        p->in_len += (size_t)n;
                        return n;
                }
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                int r = wait_up(p, POLLIN, timeout_ms);
                if (r < 0)
                        return r;
        }
}

/* ---------------------------------------------------------------- request */

struct head_ctx {
        struct buf *out;
        bool strip_auth;
        int err;
};

static bool skip_request_header(const char *key, bool strip_auth)
{
        static const char *const skip[] = {
            "Host",
            "Content-Length",
            "Expect",
            "Forwarded",
            "X-Forwarded-For",
            "X-Forwarded-Proto",
            "X-Forwarded-Host",
            "X-Forwarded-Prefix",
            "X-Real-IP",
        };
        struct httpmsg_span name = {key, strlen(key)};
        if (httpmsg_hop_by_hop(name))
                return true;
        if (strip_auth && !strcasecmp(key, "Authorization"))
                return true;
        for (size_t i = 0; i < ARRAY_SIZE(skip); i++)
                if (!strcasecmp(key, skip[i]))
                        return true;
        return false;
}

static enum MHD_Result put_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
        struct head_ctx *h = cls;
        if (skip_request_header(key, h->strip_auth))
                return MHD_YES;
        if (buf_printf(h->out, "%s: %s\r\n", key, value ? value : "") < 0)
                h->err = -ENOMEM;
        return MHD_YES;
}

static const char *client_ip(struct api_req *req, char *buf, size_t len)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;
        const void *addr = NULL;
        if (sa && sa->sa_family == AF_INET)
                addr = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        else if (sa && sa->sa_family == AF_INET6)
                addr = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (!addr || !inet_ntop(sa->sa_family, addr, buf, (socklen_t)len))
                return "unknown";
        return buf;
}

/* The head sent upstream: the client's headers but the hop-by-hop ones,
 * the credential and any forwarding headers it made up, and ours. */
static int build_head(struct api_call *c, struct proxy *p, uint16_t port, const char *target,
                      const char *prefix, bool strip_auth, struct buf *out)
{
        struct api_req *req = c->req;
        const char *host = api_header(req, "Host");
        const char *up = api_header(req, "Upgrade");
        const char *cl = api_header(req, "Content-Length");
        char ip[INET6_ADDRSTRLEN];
        bool https = c->a->cfg.url && !strncasecmp(c->a->cfg.url, "https:", 6);
        struct head_ctx h = {.out = out, .strip_auth = strip_auth};
        p->upgrade = up && *up;
        p->chunked_up = !cl && api_header(req, "Transfer-Encoding");
        p->head_only = !strcmp(req->method, "HEAD");
        buf_printf(out, "%s %s HTTP/1.1\r\nHost: localhost:%u\r\n", req->method, target, port);
        MHD_get_connection_values(req->conn, MHD_HEADER_KIND, put_header, &h);
        buf_printf(out, "X-Forwarded-For: %s\r\nX-Forwarded-Proto: %s\r\n",
                   client_ip(req, ip, sizeof(ip)), https ? "https" : "http");
        if (host)
                buf_printf(out, "X-Forwarded-Host: %s\r\n", host);
        if (*prefix)
                buf_printf(out, "X-Forwarded-Prefix: %s\r\n", prefix);
        if (p->upgrade)
                buf_printf(out, "Connection: Upgrade\r\nUpgrade: %s\r\n", up);
        else
                buf_printf(out, "Connection: close\r\n");
        if (cl)
                buf_printf(out, "Content-Length: %s\r\n", cl);
        else if (p->chunked_up)
                buf_printf(out, "Transfer-Encoding: chunked\r\n");
        if (h.err < 0 || buf_printf(out, "\r\n") < 0)
                return -ENOMEM;
        return 0;
}

static void proxy_write(void *stream, const void *data, size_t len)
{
        struct proxy *p = stream;
        p->body_in += len;
        if (p->body_in > (uint64_t)p->a->cfg.max_file_bytes)
                p->write_err = -E2BIG; /* a chunked body has no length to refuse early */
        if (p->write_err || len == 0)
                return;
        char size[24];
        int r = 0;
        if (p->chunked_up) {
                int n = snprintf(size, sizeof(size), "%zx\r\n", len);
                r = send_up(p, size, (size_t)n);
        }
        if (r >= 0)
                r = send_up(p, data, len);
        if (r >= 0 && p->chunked_up)
                r = send_up(p, "\r\n", 2);
        if (r < 0)
                p->write_err = r; /* it may still answer (a 413 of its own): read that */
}

static void proxy_abort(struct api *a, void *stream)
{
        proxy_free(stream);
}

/* ---------------------------------------------------------------- response */

/* Read the answer's head into in, past any 1xx but a 101; its end in
 * ret_end. 0, or an error already in resp. */
static int read_head(struct proxy *p, struct httpmsg_head *h, size_t *ret_end,
                     struct api_resp *resp)
{
        for (;;) {
                size_t end = httpmsg_head_end(p->in + p->in_off, p->in_len - p->in_off);
                if (end) {
                        if (httpmsg_parse_response(p->in + p->in_off, end, h) < 0) {
                                api_error(resp, 502, "bad_gateway",
                                          "the server in the sandbox sent a malformed answer");
                                return -EPROTO;
                        }
                        if (h->status >= 200 || h->status == 101) {
                                *ret_end = end;
                                return 0;
                        }
                        p->in_off += end; /* 100 Continue, 103 Early Hints: not passed on */
                        continue;
                }
                ssize_t n = recv_up(p, timeout_ms(p->a));
                if (n > 0)
                        continue;
                if (n == -ETIMEDOUT)
                        api_error(resp, 504, "upstream_timeout",
                                  "the server in the sandbox did not answer within %lld ms",
                                  (long long)timeout_ms(p->a));
                else if (n == -E2BIG)
                        api_error(resp, 502, "bad_gateway",
                                  "the answer's head is longer than %u bytes", PORTS_HEAD_MAX);
                else
                        api_error(resp, 502, "bad_gateway",
                                  "the server in the sandbox closed the connection without an "
                                  "answer");
                return n == 0 ? -EPIPE : (int)n;
        }
}

static int copy_headers(const struct httpmsg_head *h, struct api_resp *resp)
{
        for (size_t i = 0; i < h->n_headers; i++) {
                const struct httpmsg_header *hd = &h->headers[i];
                if (httpmsg_hop_by_hop(hd->name) || httpmsg_span_is(hd->name, "Content-Length"))
                        continue;
                if (api_resp_header(resp, hd->name.p, hd->name.n, hd->value.p, hd->value.n) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Take up to max bytes of the body as it is framed: > 0 bytes, 0 at its
 * end, -1 for more input first, -EPROTO for a broken chunked coding. */
static ssize_t take_body(struct proxy *p, char *buf, size_t max)
{
        size_t avail = p->in_len - p->in_off;
        if (p->mode == BODY_CHUNKED) {
                size_t used = 0, out = 0;
                int r =
                    httpmsg_chunked_run(&p->ch, p->in + p->in_off, avail, &used, buf, max, &out);
                p->in_off += used;
                if (r < 0)
                        return -EPROTO;
                if (out > 0)
                        return (ssize_t)out;
                return r == 1 ? 0 : -1;
        }
        if (p->mode == BODY_LENGTH && p->left == 0)
                return 0;
        if (avail == 0)
                return -1;
        size_t n = MIN(avail, max);
        if (p->mode == BODY_LENGTH)
                n = (size_t)MIN((uint64_t)n, p->left);
        memcpy(buf, p->in + p->in_off, n);
        p->in_off += n;
        if (p->mode == BODY_LENGTH)
                p->left -= n;
        return (ssize_t)n;
}

static ssize_t proxy_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct proxy *p = cls;
        for (;;) {
                ssize_t n = take_body(p, buf, max);
                if (n >= 0)
                        return n > 0 ? n : MHD_CONTENT_READER_END_OF_STREAM;
                if (n == -EPROTO)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                ssize_t got = recv_up(p, 2 * timeout_ms(p->a));
                if (got == 0 && p->mode == BODY_TO_CLOSE)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (got <= 0) /* cut short, idle, or the client went away */
                        return MHD_CONTENT_READER_END_WITH_ERROR;
        }
}

static void proxy_source_free(void *cls)
{
        proxy_free(cls);
}

static void upgraded(void *cls, const char *extra, size_t extra_len, int sock, void *urh)
{
        struct proxy *p = cls;
        atomic_fetch_add(&p->a->metrics.port_upgraded, 1);
        struct relay_pre pre = {.to_a = p->in + p->in_off,
                                .to_a_len = p->in_len - p->in_off,
                                .to_b = extra,
                                .to_b_len = extra_len};
        relay_run(sock, p->fd, &pre, 10 * timeout_ms(p->a), &p->a->draining);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        proxy_free(p);
}

static void answer_upgrade(struct proxy *p, const struct httpmsg_head *h, struct api_resp *resp)
{
        const struct httpmsg_header *up = NULL;
        for (size_t i = 0; i < h->n_headers; i++)
                if (httpmsg_span_is(h->headers[i].name, "Upgrade"))
                        up = &h->headers[i];
        if (!p->upgrade || !up) {
                api_error(resp, 502, "bad_gateway",
                          "the server in the sandbox switched protocols unasked");
                proxy_free(p);
                return;
        }
        if (copy_headers(h, resp) < 0 ||
            api_resp_header(resp, "Upgrade", 7, up->value.p, up->value.n) < 0) {
                api_error(resp, 500, "internal", "out of memory");
                proxy_free(p);
                return;
        }
        resp->status = 101;
        resp->passthrough = true;
        resp->upgrade = (struct api_upgrade){.run = upgraded, .free = proxy_source_free, .cls = p};
}

static void answer(struct proxy *p, const struct httpmsg_head *h, struct api_resp *resp)
{
        if (copy_headers(h, resp) < 0) {
                api_error(resp, 500, "internal", "out of memory");
                proxy_free(p);
                return;
        }
        resp->status = h->status;
        resp->passthrough = true;
        bool no_body = p->head_only || h->status == 204 || h->status == 304;
        if (no_body) {
                p->mode = BODY_LENGTH;
                p->left = 0;
        } else if (h->chunked) {
                p->mode = BODY_CHUNKED;
        } else if (h->content_length >= 0) {
                p->mode = BODY_LENGTH;
                p->left = (uint64_t)h->content_length;
        } else {
                p->mode = BODY_TO_CLOSE;
        }
        if (p->mode == BODY_LENGTH) {
                resp->source_sized = true;
                /* HEAD: the length a GET would have, and no body. */
                resp->source_len =
                    p->head_only && h->content_length >= 0 ? (uint64_t)h->content_length : p->left;
        }
        resp->source = (struct api_body_source){.read = proxy_read,
                                                .free = proxy_source_free,
                                                .cls = p,
                                                .block = PROXY_BLOCK,
                                                .blocks = true};
}

static void proxy_finish(struct api *a, void *stream, struct api_resp *resp)
{
        struct proxy *p = stream;
        if (p->write_err == -E2BIG) {
                api_too_large(a, API_CAP_FILE, resp);
                proxy_free(p);
                return;
        }
        if (p->chunked_up && !p->write_err)
                p->write_err = send_up(p, "0\r\n\r\n", 5);
        struct httpmsg_head h;
        size_t end = 0;
        if (read_head(p, &h, &end, resp) < 0) {
                proxy_free(p);
                return;
        }
        p->in_off += end;
        if (h.status == 101)
                answer_upgrade(p, &h, resp);
        else
                answer(p, &h, resp);
}

static const struct api_stream_ops proxy_ops = {
    .write = proxy_write,
    .finish = proxy_finish,
    .abort = proxy_abort,
    .write_blocks = true, /* it waits for the server in the sandbox to take it */
};

/* ---------------------------------------------------------------- handlers */

/* Connect s (a socket of the sandbox's network namespace) to its
 * loopback's port: 0, or -errno (-ECONNREFUSED: nothing listens). */
static int connect_loopback(int s, bool v6, uint16_t port)
{
        struct sockaddr_in v4a = {.sin_family = AF_INET,
                                  .sin_port = htons(port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        struct sockaddr_in6 v6a = {
            .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        int fl = fcntl(s, F_GETFL);
        if (fl < 0 || fcntl(s, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        int r = v6 ? connect(s, (struct sockaddr *)&v6a, sizeof(v6a))
                   : connect(s, (struct sockaddr *)&v4a, sizeof(v4a));
        if (r < 0 && errno != EINPROGRESS)
                return -errno;
        if (r < 0) {
                struct pollfd pf = {.fd = s, .events = POLLOUT};
                int n = poll(&pf, 1, AGENT_CALL_TIMEOUT_MS);
                if (n <= 0)
                        return n == 0 ? -ETIMEDOUT : -errno;
                int e = 0;
                socklen_t l = sizeof(e);
                if (getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l) < 0)
                        return -errno;
                if (e)
                        return -e;
        }
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return 0;
}

/* The upstream connection: a socket sandbox-init made in the sandbox's
 * network namespace, connected here to 127.0.0.1 and then ::1; or a
 * stream its relay carries (it tried both itself). */
static int open_upstream(struct sandbox *sb, uint16_t port, int *ret_fd, struct sbx_error *err)
{
        for (int v6 = 0; v6 < 2; v6++) {
                bool unconnected = false;
                int fd = -1;
                int r = agent_tcp_open(mgr_agent(sb), port, v6, &fd, &unconnected, err);
                if (r < 0)
                        return r;
                if (!unconnected) {
                        *ret_fd = fd;
                        return 0;
                }
                r = connect_loopback(fd, v6, port);
                if (r == 0) {
                        *ret_fd = fd;
                        return 0;
                }
                close(fd);
                /* No such listener, or no IPv6 on its loopback: the other. */
                if (r != -ECONNREFUSED && r != -EADDRNOTAVAIL && r != -ENETUNREACH)
                        return sbx_error_set(err, -r, "connect to port %u", port);
        }
        return sbx_error_set(err, ENOENT, "nothing listens on port %u", port);
}

static void open_error(int r, uint16_t port, const char *name, const struct sbx_error *err,
                       struct api_resp *resp)
{
        if (r == -ENOENT)
                api_error(resp, 502, "port_unreachable",
                          "nothing listens on port %u in sandbox '%s'", port, name);
        else if (r == -ETIMEDOUT)
                api_error(resp, 504, "upstream_timeout", "port %u: %s", port, err->msg);
        else
                api_error(resp, 502, "bad_gateway", "port %u: %s", port, err->msg);
}

void ports_open(struct api_call *c, struct sandbox *sb, uint16_t port, const char *target,
                const char *prefix, bool strip_auth, struct api_resp *resp)
{
        struct sbx_error err = {0};
        struct proxy *p = calloc(1, sizeof(*p));
        char *in = malloc(PORTS_HEAD_MAX);
        if (!p || !in) {
                free(p);
                free(in);
                mgr_leave(c->a->mgr, sb);
                api_error(resp, 500, "internal", "out of memory");
                return;
        }
        *p = (struct proxy){.a = c->a, .sb = sb, .fd = -1, .client_fd = -1, .in = in};
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c->req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
                p->client_fd = ci->connect_fd;
        int r = open_upstream(sb, port, &p->fd, &err);
        atomic_fetch_add(r == 0         ? &c->a->metrics.port_opened
                         : r == -ENOENT ? &c->a->metrics.port_unreachable
                                        : &c->a->metrics.port_failed,
                         1);
        if (r < 0) {
                open_error(r, port, c->name ? c->name : "", &err, resp);
                proxy_free(p);
                return;
        }
        struct buf head;
        buf_init(&head, PORTS_HEAD_MAX + API_PATH_MAX * 4);
        if ((r = build_head(c, p, port, target, prefix, strip_auth, &head)) < 0 ||
            (r = send_up(p, head.data, head.len)) < 0) {
                buf_free(&head);
                api_error(resp, 502, "bad_gateway", "port %u: sending the request: %s", port,
                          strerror(-r));
                proxy_free(p);
                return;
        }
        buf_free(&head);
        c->req->stream = p;
        c->req->stream_ops = &proxy_ops;
}

void ports_redirect_slash(struct api_call *c, const char *rest, struct api_resp *resp)
{
        size_t path_len = (size_t)(rest - c->req->raw_uri);
        struct buf loc;
        buf_init(&loc, API_PATH_MAX * 4);
        if (buf_append(&loc, c->req->raw_uri, path_len) < 0 || buf_printf(&loc, "/%s", rest) < 0 ||
            buf_terminate(&loc) < 0 ||
            api_resp_header(resp, "Location", 8, loc.data, loc.len) < 0) {
                buf_free(&loc);
                api_error(resp, 500, "internal", "out of memory");
                return;
        }
        api_json(resp, 308, json_pack("{s:s}", "location", loc.data));
        buf_free(&loc);
}

void ports_proxy(struct api_call *c, struct api_resp *resp)
{
        uint16_t port = ports_parse(c->port);
        if (!port) {
                api_error(resp, 400, "invalid_argument", "bad port '%.16s' (1..65535)", c->port);
                return;
        }
        /* /v1/sandboxes/{name}/ports/{port}: five segments before the target. */
        const char *rest = httpmsg_uri_rest(c->req->raw_uri, 5);
        if (!rest) {
                api_error(resp, 400, "invalid_argument", "bad path");
                return;
        }
        if (*rest != '/') {
                ports_redirect_slash(c, rest, resp);
                return;
        }
        char prefix[API_PATH_MAX];
        snprintf(prefix, sizeof(prefix), "%.*s", (int)MIN(rest - c->req->raw_uri, API_PATH_MAX - 1),
                 c->req->raw_uri);
        ports_open(c, TAKE_PTR(c->sb), port, rest, prefix, true, resp);
}
