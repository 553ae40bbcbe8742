/* SPDX-License-Identifier: MIT */
/* The HTTP server: libmicrohttpd's epoll event loop on a few threads,
 * which only ever read, parse and send. What may block (a handler, a
 * stream's opening, a body chunk sent on to a peer, a body read from one)
 * runs on a handler thread (workers.h) while its connection is suspended;
 * a request that waits on its sandbox (a long poll, an exec, a stream's
 * next bytes) is a hold (hold.h), which costs no thread at all. Bodies are
 * collected up to max_body; one log line per request. */
#include "api-internal.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

#include "../common/log.h"
#include "ports.h"

#define API_WORKERS_MIN 4
#define API_EVENT_LOOPS_MAX 4
#define API_CONN_MEMORY (32u << 10)
#define API_FD_RESERVE 1024 /* descriptors kept for the daemon itself */
#define API_CONN_SLACK 64   /* libmicrohttpd's own limit, per event loop, past ours */
#define API_BACKLOG_MAX 4096u

const char *api_query(struct api_req *req, const char *key)
{
        return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *api_query_n(struct api_req *req, const char *key, size_t *ret_len)
{
        const char *v = NULL;
        size_t n = 0;
        if (MHD_lookup_connection_value_n(req->conn, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v,
                                          &n) != MHD_YES)
                return NULL;
        *ret_len = n;
        return v;
}

const char *api_header(struct api_req *req, const char *key)
{
        return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, key);
}

void api_resp_free(struct api_resp *resp)
{
        buf_free(&resp->body);
        buf_free(&resp->headers);
        if (resp->upgrade.free)
                resp->upgrade.free(resp->upgrade.cls);
        if (resp->body_fd >= 0)
                close(resp->body_fd);
        free(resp);
}

struct api_resp *api_resp_new(void)
{
        struct api_resp *resp = calloc(1, sizeof(*resp));
        if (resp) {
                resp->status = 500;
                resp->body_fd = -1;
                buf_init(&resp->body, 0);
        }
        return resp;
}

static void req_free(struct api *a, struct api_req *req)
{
        if (req->stream)
                req->stream_ops->abort(a, req->stream);
        if (req->early)
                api_resp_free(req->early);
        if (req->answer)
                api_resp_free(req->answer);
        buf_free(&req->chunk);
        buf_free(&req->body);
        free(req->raw_uri);
        free(req);
}

/* Called with the raw request line's URI, before libmicrohttpd decodes
 * it: the only place an encoded NUL is still visible (decoded, it would
 * cut the path or a query value short, and `processes/%00` would become
 * `processes/`). What it returns is the request's context. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
        struct api_req *req = calloc(1, sizeof(*req));
        if (req) {
                req->bad_uri = strstr(uri, "%00") != NULL;
                req->raw_uri = strdup(uri);
                if (!req->raw_uri) {
                        free(req);
                        return NULL;
                }
        }
        return req;
}

struct framing {
        unsigned content_lengths;
        bool differ;
        const char *first;
        bool chunked;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
        struct framing *f = cls;
        if (!strcasecmp(key, "Content-Length")) {
                if (f->content_lengths++ && value && f->first && strcmp(value, f->first))
                        f->differ = true;
                if (!f->first)
                        f->first = value;
        } else if (!strcasecmp(key, "Transfer-Encoding")) {
                f->chunked = true;
        }
        return MHD_YES;
}

/* A head whose body length is ambiguous is refused before any of the body
 * is read (RFC 9112 6.3: request smuggling), and the connection closed. */
static bool bad_framing(struct api_req *req, struct api_resp *resp)
{
        if (req->bad_uri) {
                api_error(resp, 400, "invalid_argument",
                          "the URL contains an encoded NUL byte (%%00)");
                return true;
        }
        struct framing f = {0};
        MHD_get_connection_values(req->conn, MHD_HEADER_KIND, count_framing, &f);
        if (f.differ) {
                api_error(resp, 400, "invalid_argument", "conflicting Content-Length headers");
                return true;
        }
        if (f.content_lengths && f.chunked) {
                api_error(
                    resp, 400, "invalid_argument",
                    "both Content-Length and Transfer-Encoding: the body length is ambiguous");
                return true;
        }
        return false;
}

/* A file, read as it is sent. Its length was fixed when it was opened; a
 * file that shrinks meanwhile ends the response early (the connection is
 * closed, so the client sees a short body, never a hang), one that grows
 * is sent up to the opening length. */
struct file_body {
        int fd;
        uint64_t len;
};

static ssize_t file_body_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct file_body *fb = cls;
        if (pos >= fb->len)
                return MHD_CONTENT_READER_END_OF_STREAM;
        size_t want = (size_t)MIN((uint64_t)max, fb->len - pos);
        ssize_t n;
        do
                n = pread(fb->fd, buf, want, (off_t)pos);
        while (n < 0 && errno == EINTR);
        if (n <= 0) {
                log_warn("download cut at byte %llu of %llu: %s", (unsigned long long)pos,
                         (unsigned long long)fb->len,
                         n == 0 ? "the file shrank while it was sent" : strerror(errno));
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        return n;
}

static void file_body_free(void *cls)
{
        struct file_body *fb = cls;
        close(fb->fd);
        free(fb);
}

#define FILE_BLOCK (64 * 1024)

static struct MHD_Response *file_response(int fd, uint64_t len)
{
        struct file_body *fb = malloc(sizeof(*fb));
        if (!fb) {
                close(fd);
                return NULL;
        }
        fb->fd = fd;
        fb->len = len;
        struct MHD_Response *r =
            MHD_create_response_from_callback(len, FILE_BLOCK, file_body_read, fb, file_body_free);
        if (!r)
                file_body_free(fb);
        return r;
}

/* ----------------------------------------------- suspend and resume */

void api_suspend(struct api_req *req)
{
        atomic_fetch_add(&req->a->suspended, 1);
        MHD_suspend_connection(req->conn);
}

void api_resume(struct api_req *req)
{
        struct api *a = req->a;
        MHD_resume_connection(req->conn);
        atomic_fetch_sub(&a->suspended, 1);
}

int api_client_fd(struct api_req *req)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        return ci ? ci->connect_fd : -1;
}

void api_defer(struct api_resp *resp)
{
        resp->deferred = true;
}

void api_answer(struct api_req *req, struct api_resp *resp)
{
        req->answer = resp;
        req->phase = API_PH_ANSWER;
        api_resume(req);
}

/* Run what may block on a handler thread, the connection suspended. */
static void defer_job(struct api_req *req, enum api_phase phase, void (*run)(struct api_job *))
{
        req->phase = phase;
        req->job.run = run;
        api_suspend(req);
        workers_submit(&req->a->workers, &req->job);
}

/* ------------------------------------------------- bodies that block */

/* A body source whose read blocks (the port proxy's): each read runs on
 * a handler thread into a buffer, and the event loop takes from that. */
struct offload {
        struct api_job job;
        struct api_body_source src;
        struct api_req *req;
        char *buf;
        size_t off, len;
        ssize_t end; /* the source's end (< 0) once the buffer is out */
        uint64_t pos;
};

static void offload_job(struct api_job *j)
{
        struct offload *o = container_of(j, struct offload, job);
        ssize_t n = o->src.read(o->src.cls, o->pos, o->buf, o->src.block);
        if (n > 0) {
                o->off = 0;
                o->len = (size_t)n;
                o->pos += (uint64_t)n;
        } else if (n < 0) {
                o->end = n;
        }
        api_resume(o->req);
}

static ssize_t offload_read(void *cls, uint64_t pos, char *out, size_t max)
{
        struct offload *o = cls;
        (void)pos;
        if (o->off < o->len) {
                size_t n = MIN(max, o->len - o->off);
                memcpy(out, o->buf + o->off, n);
                o->off += n;
                return (ssize_t)n;
        }
        if (o->end)
                return o->end;
        /* At the stop nothing more is suspended: libmicrohttpd must stop
         * with every connection running. */
        if (atomic_load(&o->req->a->stopping))
                return MHD_CONTENT_READER_END_WITH_ERROR;
        o->job.run = offload_job;
        api_suspend(o->req);
        workers_submit(&o->req->a->workers, &o->job);
        return 0;
}

static void offload_free(void *cls)
{
        struct offload *o = cls;
        o->src.free(o->src.cls);
        free(o->buf);
        free(o);
}

/* src wrapped so that its reads run on a handler thread; src is freed on
 * failure. */
static bool offload_wrap(struct api_req *req, struct api_body_source *src)
{
        struct offload *o = calloc(1, sizeof(*o));
        char *buf = malloc(src->block ? src->block : 1);
        if (!o || !buf) {
                free(o);
                free(buf);
                src->free(src->cls);
                return false;
        }
        *o = (struct offload){.src = *src, .req = req, .buf = buf};
        *src = (struct api_body_source){
            .read = offload_read, .free = offload_free, .cls = o, .block = src->block};
        return true;
}

/* An upgraded connection is relayed on a handler thread. */
struct upgrade_job {
        struct api_job job;
        struct api_upgrade up;
        char *extra;
        size_t extra_len;
        int sock;
        void *urh;
};

static void upgrade_job_run(struct api_job *j)
{
        struct upgrade_job *u = container_of(j, struct upgrade_job, job);
        u->up.run(u->up.cls, u->extra, u->extra_len, u->sock, u->urh);
        free(u->extra);
        free(u);
}

static void upgrade_run(void *cls, struct MHD_Connection *connection, void *req_cls,
                        const char *extra_in, size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh)
{
        struct upgrade_job *u = cls;
        struct api_req *req = req_cls;
        u->extra = malloc(extra_in_size ? extra_in_size : 1);
        if (!u->extra || !req || atomic_load(&req->a->stopping)) {
                MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
                u->up.free(u->up.cls);
                free(u->extra);
                free(u);
                return;
        }
        if (extra_in_size)
                memcpy(u->extra, extra_in, extra_in_size);
        u->extra_len = extra_in_size;
        u->sock = sock;
        u->urh = urh;
        u->job.run = upgrade_job_run;
        workers_submit(&req->a->workers, &u->job);
}

/* A 101 whose connection resp's upgrade takes over. libmicrohttpd frees
 * nothing of the handler's when the answer is not sent: then the
 * upgrade's free runs from here, on failure. */
static struct MHD_Response *upgrade_response(struct api_resp *resp)
{
        struct upgrade_job *u = calloc(1, sizeof(*u));
        if (!u)
                return NULL;
        u->up = resp->upgrade;
        struct MHD_Response *r = MHD_create_response_for_upgrade(upgrade_run, u);
        if (!r) {
                free(u);
                return NULL;
        }
        resp->upgrade = (struct api_upgrade){0};
        return r;
}

static void add_headers(struct MHD_Response *r, const struct buf *h)
{
        size_t pos = 0;
        while (pos < h->len) {
                const char *name = h->data + pos;
                const char *value = name + strlen(name) + 1;
                MHD_add_response_header(r, name, value);
                pos = (size_t)(value + strlen(value) + 1 - h->data);
        }
}

/* The path as logged: a preview share's token is a secret, and never
 * written to the log. */
static const char *log_path(const char *path, char *buf, size_t len)
{
        static const char pre[] = "/v1/preview/";
        if (strncmp(path, pre, sizeof(pre) - 1))
                return path;
        const char *rest = strchr(path + sizeof(pre) - 1, '/');
        snprintf(buf, len, "%s<token>%s", pre, rest ? rest : "");
        return buf;
}

/* Queue resp (consumed) on conn and log the request's one line. */
static enum MHD_Result respond(struct api *a, struct api_req *req, struct api_resp *resp,
                               bool close_after)
{
        struct MHD_Response *r;
        uint64_t out_len = resp->body.len;
        if (resp->upgrade.run) {
                buf_free(&resp->body);
                r = upgrade_response(resp);
                out_len = 0;
        } else if (resp->source.read) {
                buf_free(&resp->body);
                if (resp->source.blocks && !offload_wrap(req, &resp->source)) {
                        buf_free(&resp->headers);
                        return MHD_NO;
                }
                uint64_t len = resp->source_sized ? resp->source_len : MHD_SIZE_UNKNOWN;
                r = MHD_create_response_from_callback(len, resp->source.block, resp->source.read,
                                                      resp->source.cls, resp->source.free);
                if (!r)
                        resp->source.free(resp->source.cls);
                resp->source = (struct api_body_source){0};
                out_len = 0; /* counted as it goes */
        } else if (resp->body_fd >= 0) {
                buf_free(&resp->body);
                out_len = resp->body_fd_len;
                r = file_response(resp->body_fd, resp->body_fd_len);
                resp->body_fd = -1;
        } else {
                r = MHD_create_response_from_buffer(resp->body.len, resp->body.data,
                                                    MHD_RESPMEM_MUST_FREE);
                if (!r)
                        buf_free(&resp->body);
                resp->body.data = NULL; /* owned by r now */
        }
        if (!r) {
                buf_free(&resp->headers);
                if (resp->upgrade.free)
                        resp->upgrade.free(resp->upgrade.cls);
                return MHD_NO;
        }
        add_headers(r, &resp->headers);
        buf_free(&resp->headers);
        if (resp->content_type)
                MHD_add_response_header(r, "Content-Type", resp->content_type);
        if (resp->retry_after[0])
                MHD_add_response_header(r, "Retry-After", resp->retry_after);
        if (!resp->passthrough)
                MHD_add_response_header(r, "Cache-Control", "no-store");
        if (close_after)
                MHD_add_response_header(r, "Connection", "close");
        enum MHD_Result ret = MHD_queue_response(req->conn, resp->status, r);
        MHD_destroy_response(r);
        atomic_fetch_add(&a->metrics.bytes_out, out_len);
        unsigned cls_i = resp->status / 100;
        if (cls_i < 6)
                atomic_fetch_add(&a->metrics.responses_by_class[cls_i], 1);
        /* The one line per request: method, path, status, duration. */
        char lp[API_PATH_MAX + 32];
        log_info("%s %s %u %.1fms", req->method, log_path(req->path, lp, sizeof(lp)), resp->status,
                 (double)(mono_us() - req->started_us) / 1000.0);
        return ret;
}

static void head_job(struct api_job *j)
{
        struct api_req *req = container_of(j, struct api_req, job);
        api_route_run(req->a, req, req->early);
        if (req->stream) {
                api_resp_free(req->early);
                req->early = NULL;
        }
        req->phase = API_PH_HEAD_DONE;
        api_resume(req);
}

/* The head is in: framing checks, the route, and for a streaming route
 * its stream, opened now from the headers alone (on a handler thread). */
static enum MHD_Result request_head(struct api *a, struct api_req *req, struct MHD_Connection *conn,
                                    const char *url, const char *method)
{
        req->started = true;
        req->a = a;
        req->conn = conn;
        req->method = method;
        req->path = url;
        req->started_us = mono_us();
        buf_init(&req->chunk, 0);
        atomic_fetch_add(&a->metrics.requests, 1);
        atomic_fetch_add(&a->inflight, 1);
        conns_request_begin(&a->conns, conn);
        struct api_resp early = {.status = 500, .body_fd = -1};
        buf_init(&early.body, 0);
        if (bad_framing(req, &early))
                return respond(a, req, &early, true);
        buf_free(&early.body);
        api_route_match(method, url, &req->match);
        if (ports_preview_host(a, req)) { /* a share's own host: any path is the sandbox's */
                req->match.route = ports_preview_route();
                req->match.method_ok = true;
                req->match.name = req->match.id = req->match.port = NULL;
        }
        const struct api_route *route = req->match.route;
        buf_init(&req->body, (size_t)api_cap_bytes(a, api_route_held_cap(route)));
        if (!route || !route->streams || !req->match.method_ok || atomic_load(&a->draining))
                return MHD_YES;
        if (!(req->early = api_resp_new()))
                return MHD_NO;
        req->streaming = true;
        defer_job(req, API_PH_HEAD_JOB, head_job);
        return MHD_YES;
}

static void chunk_job(struct api_job *j)
{
        struct api_req *req = container_of(j, struct api_req, job);
        if (req->stream)
                req->stream_ops->write(req->stream, req->chunk.data, req->chunk.len);
        req->chunk.len = 0;
        req->phase = API_PH_BODY;
        api_resume(req);
}

static enum MHD_Result request_body(struct api *a, struct api_req *req, const char *data,
                                    size_t len)
{
        atomic_fetch_add(&a->metrics.bytes_in, len);
        if (req->streaming) {
                if (req->stream && req->stream_ops->write_blocks) {
                        if (atomic_load(&a->stopping) || buf_append(&req->chunk, data, len) < 0)
                                return MHD_NO;
                        defer_job(req, API_PH_CHUNK_JOB, chunk_job);
                } else if (req->stream) {
                        req->stream_ops->write(req->stream, data, len);
                }
        } else if (!req->body_too_large && buf_append(&req->body, data, len) < 0) {
                req->body_too_large = true;
                buf_free(&req->body);
        }
        return MHD_YES;
}

static void end_job(struct api_job *j)
{
        struct api_req *req = container_of(j, struct api_req, job);
        struct api *a = req->a;
        struct api_resp *resp = api_resp_new();
        if (!resp) {
                api_answer(req, NULL);
                return;
        }
        if (req->stream)
                req->stream_ops->finish(a, TAKE_PTR(req->stream), resp);
        else
                api_route_run(a, req, resp);
        if (resp->deferred) { /* a hold answers; req may be gone already */
                api_resp_free(resp);
                return;
        }
        api_answer(req, resp);
}

/* The body is complete: answer, at once when that is all known here, else
 * from a handler thread. */
static enum MHD_Result request_end(struct api *a, struct api_req *req)
{
        struct api_resp resp = {.status = 500, .body_fd = -1};
        buf_init(&resp.body, 0);
        if (req->early) {
                resp = *req->early;
                free(req->early);
                req->early = NULL;
        } else if (req->stream && !atomic_load(&a->stopping)) {
                defer_job(req, API_PH_END_JOB, end_job);
                return MHD_YES;
        } else if (req->stream) { /* its end may wait: not at the stop (after the drain) */
                req->stream_ops->abort(a, TAKE_PTR(req->stream));
                api_error(&resp, 503, "unavailable", "the server is shutting down");
        } else if (req->body_too_large) {
                api_too_large(a, api_route_held_cap(req->match.route), &resp);
        } else if (atomic_load(&a->draining)) {
                api_error(&resp, 503, "unavailable", "the server is shutting down");
        } else {
                defer_job(req, API_PH_END_JOB, end_job);
                return MHD_YES;
        }
        return respond(a, req, &resp, false);
}

/* What a handler thread or a hold left to send. */
static enum MHD_Result send_answer(struct api *a, struct api_req *req)
{
        struct api_resp *resp = TAKE_PTR(req->answer);
        if (!resp)
                return MHD_NO; /* nobody is there to answer */
        struct api_resp r = *resp;
        free(resp);
        return respond(a, req, &r, false);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        struct api *a = cls;
        struct api_req *req = *con_cls;
        if (!req)
                return MHD_NO; /* on_uri could not allocate */
        if (!req->started)
                return request_head(a, req, conn, url, method);
        switch (req->phase) {
        case API_PH_HEAD_DONE: /* the head's call again, after its job */
                req->phase = API_PH_BODY;
                return MHD_YES;
        case API_PH_ANSWER:
                return send_answer(a, req);
        case API_PH_BODY:
                break;
        default: /* a job runs: take nothing more meanwhile */
                return MHD_YES;
        }
        if (*upload_data_size) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                return request_body(a, req, upload_data, n);
        }
        return request_end(a, req);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct api *a = cls;
        struct api_req *req = *con_cls;
        if (!req)
                return;
        if (req->started) {
                atomic_fetch_sub(&a->inflight, 1);
                conns_request_end(&a->conns, conn);
        }
        req_free(a, req);
        *con_cls = NULL;
}

static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len)
{
        char host[256];
        const char *colon = strrchr(listen, ':');
        if (!colon || colon == listen || (size_t)(colon - listen) >= sizeof(host))
                return -EINVAL;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        char *h = host;
        size_t hl = strlen(h);
        if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
                h[hl - 1] = '\0';
                h++;
        }
        struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                                 .ai_socktype = SOCK_STREAM},
                        *res = NULL;
        if (getaddrinfo(h, colon + 1, &hints, &res) || !res)
                return -EINVAL;
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
        freeaddrinfo(res);
        return 0;
}

/* Past max_connections a new connection is closed at once, whichever
 * event loop took it. (libmicrohttpd's own limit is split between its
 * loops, and one at its share stops accepting: clients would then wait
 * in the listen queue instead of hearing no. Its limit is set above this
 * one.) */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
        struct api *a = cls;
        (void)addr;
        (void)addrlen;
        return atomic_load(&a->conns.open) < a->conn_budget ? MHD_YES : MHD_NO;
}

/* max_connections, or fewer when the open-file limit cannot hold two
 * descriptors for each (a held request's socket and its agent's) beside
 * what the daemon needs for itself: then more clients are refused at the
 * door rather than a sandbox's start failing for want of a descriptor. */
static unsigned conn_budget(const struct api *a)
{
        unsigned want = (unsigned)a->cfg.max_connections;
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return want;
        rlim_t room = rl.rlim_cur > API_FD_RESERVE * 2 ? (rl.rlim_cur - API_FD_RESERVE) / 2 : 64;
        if ((rlim_t)want <= room)
                return want;
        log_warn("max_connections %u: the open-file limit (%llu) holds %llu; more are refused",
                 want, (unsigned long long)rl.rlim_cur, (unsigned long long)room);
        return (unsigned)room;
}

int api_start(struct api *a, struct sbx_error *err)
{
        struct sockaddr_storage ss;
        socklen_t sl;
        if (parse_listen(a->cfg.listen, &ss, &sl) < 0)
                return sbx_error_set(err, EINVAL, "bad listen address '%s' (want ADDR:PORT)",
                                     a->cfg.listen);
        unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                         MHD_USE_ERROR_LOG | MHD_USE_SUPPRESS_DATE_NO_CLOCK |
                         MHD_USE_ITC /* resumes, and MHD_quiesce_daemon */ |
                         MHD_ALLOW_UPGRADE /* the port proxy's WebSockets */;
        if (ss.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        int r = conns_start(&a->conns, a->cfg.request_head_timeout_ms);
        if (r < 0)
                return sbx_error_set(err, -r, "start the connection watchdog");
        /* Handler threads: a few kept, one more per job that finds none
         * idle, as many at most as there can be connections. */
        if ((r = workers_start(&a->workers, API_WORKERS_MIN,
                               (unsigned)MAX(a->cfg.max_connections, API_WORKERS_MIN))) < 0) {
                conns_stop(&a->conns);
                return sbx_error_set(err, -r, "start the handler threads");
        }
        if ((r = holder_start(&a->holder)) < 0) {
                workers_stop(&a->workers);
                conns_stop(&a->conns);
                return sbx_error_set(err, -r, "start the held requests' thread");
        }
        unsigned max_conns = conn_budget(a);
        unsigned per_ip =
            (unsigned)(a->cfg.max_connections_per_ip > 0 ? a->cfg.max_connections_per_ip
                                                         : MAX(max_conns / 4, 1));
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned loops = (unsigned)MIN(MAX(cpus, 1L), (long)API_EVENT_LOOPS_MAX);
        a->conn_budget = max_conns;
        a->mhd = MHD_start_daemon(
            flags, 0, accept_policy, a, on_request, a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
            MHD_OPTION_URI_LOG_CALLBACK, on_uri, a, MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
            MHD_OPTION_NOTIFY_CONNECTION, conns_notify, &a->conns, MHD_OPTION_CONNECTION_LIMIT,
            max_conns + API_CONN_SLACK * loops, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_THREAD_POOL_SIZE, loops,
            /* Per connection: the request's head, and the read buffer
             * body chunks come through. Also the cap on a head. */
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONN_MEMORY,
            MHD_OPTION_LISTEN_BACKLOG_SIZE, MIN(max_conns, API_BACKLOG_MAX), MHD_OPTION_END);
        if (!a->mhd) {
                holder_stop(&a->holder);
                workers_stop(&a->workers);
                conns_stop(&a->conns);
                return sbx_error_set(err, EADDRINUSE, "cannot listen on %s", a->cfg.listen);
        }
        return 0;
}

int api_drain(struct api *a, int64_t grace_ms)
{
        if (!a->mhd)
                return 0;
        atomic_store(&a->draining, true);
        MHD_socket ls = MHD_quiesce_daemon(a->mhd);
        if (ls != MHD_INVALID_SOCKET)
                close(ls);
        int64_t deadline = mono_ms() + grace_ms;
        while (atomic_load(&a->inflight) > 0 && mono_ms() < deadline)
                sleep_ms(20);
        return atomic_load(&a->inflight);
}

void api_stop(struct api *a)
{
        if (!a->mhd)
                return;
        atomic_store(&a->draining, true);
        atomic_store(&a->stopping, true);
        /* libmicrohttpd must not stop with a connection suspended: every
         * hold answers (503) or lets go, every job ends, nothing more is
         * suspended (stopping), then it stops. */
        holder_stop(&a->holder);
        workers_stop(&a->workers);
        int64_t deadline = mono_ms() + 5000;
        while (atomic_load(&a->suspended) > 0 && mono_ms() < deadline)
                sleep_ms(10);
        if (atomic_load(&a->suspended) > 0) {
                log_error("%d connections still suspended at the stop: left to the exit",
                          atomic_load(&a->suspended));
                a->mhd = NULL;
                return;
        }
        MHD_stop_daemon(a->mhd);
        a->mhd = NULL;
        conns_stop(&a->conns);
}
