/* SPDX-License-Identifier: MIT */
/* The HTTP server: libmicrohttpd with a thread per connection, so a
 * handler may block on its sandbox (an exec, a 30 s poll) without holding
 * up any other request. Bodies are collected up to max_body; one log line
 * per request. */
#include "api.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "files.h"

void api_error(struct api_resp *resp, unsigned status, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
        api_json(resp, status, j);
}

void api_error_errno(struct api_resp *resp, int r, const struct sbx_error *err)
{
        const char *msg = err && err->msg[0] ? err->msg : strerror(-r);
        switch (-r) {
        case EINVAL:
                api_error(resp, 400, "invalid_argument", "%s", msg);
                break;
        case EACCES:
                api_error(resp, 401, "unauthenticated", "%s", msg);
                break;
        case EDQUOT:
                api_error(resp, 402, "cap_reached", "%s", msg);
                break;
        case ENOENT:
                api_error(resp, 404, "not_found", "%s", msg);
                break;
        case EPERM:
                api_error(resp, 409, "not_enabled", "%s", msg);
                break;
        case EBUSY:
                api_error(resp, 409, "invalid_state", "%s", msg);
                break;
        case ENOTSUP:
                api_error(resp, 409, "unsupported_class", "%s", msg);
                break;
        case E2BIG:
                api_error(resp, 413, "too_large", "%s", msg);
                break;
        case EHOSTDOWN:
                api_error(resp, 502, "bring_up_failed", "%s", msg);
                break;
        case EAGAIN:
                api_error(resp, 503, "unavailable", "%s", msg);
                break;
        default:
                api_error(resp, 500, "internal", "%s", msg);
                break;
        }
}

void api_json(struct api_resp *resp, unsigned status, json_t *j)
{
        resp->status = status;
        resp->content_type = "application/json";
        resp->body.len = 0;
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!s || buf_append(&resp->body, s, strlen(s)) < 0) {
                resp->status = 500;
                resp->body.len = 0;
                buf_append(&resp->body,
                           "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}", 56);
        }
        free(s);
}

const char *api_query(struct api_req *req, const char *key)
{
        return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *api_header(struct api_req *req, const char *key)
{
        return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, key);
}

/* Length of the valid UTF-8 sequence at s[i], or 0 if there is none
 * (overlongs, surrogates and values past U+10FFFF are invalid). */
static size_t utf8_valid_len(const uint8_t *s, size_t i, size_t len)
{
        uint8_t c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf) {
                n = 1;
                cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
                n = 2;
                cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                n = 3;
                cp = c & 0x07;
        } else {
                return 0;
        }
        if (i + n >= len)
                return 0;
        for (size_t k = 1; k <= n; k++) {
                if ((s[i + k] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n + 1;
}

char *utf8_sanitize(const uint8_t *s, size_t len, size_t *ret_len)
{
        /* Worst case every byte becomes the 3-byte U+FFFD. */
        if (len > (SIZE_MAX - 1) / 3)
                return NULL;
        char *out = malloc(len * 3 + 1);
        if (!out)
                return NULL;
        size_t o = 0, i = 0;
        while (i < len) {
                size_t n = utf8_valid_len(s, i, len);
                if (n) {
                        memcpy(out + o, s + i, n);
                        o += n;
                        i += n;
                } else {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        out[o] = '\0';
        *ret_len = o;
        return out;
}

/* Append bytes as a JSON string literal, invalid UTF-8 as U+FFFD. One
 * pass, runs of plain bytes copied whole: output can be megabytes. */
static int json_append_text(struct buf *b, const uint8_t *s, size_t len)
{
        int r = buf_append(b, "\"", 1);
        size_t i = 0, run = 0;
        while (r == 0 && i < len) {
                uint8_t c = s[i];
                if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
                        i++;
                        continue;
                }
                if (i > run && (r = buf_append(b, s + run, i - run)) < 0)
                        break;
                size_t n = c >= 0x80 ? utf8_valid_len(s, i, len) : 0;
                if (n) {
                        r = buf_append(b, s + i, n);
                        i += n;
                } else if (c >= 0x80) {
                        r = buf_append(b, "\xef\xbf\xbd", 3);
                        i++;
                } else {
                        char esc[8];
                        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                                      : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
                        if (!e) {
                                snprintf(esc, sizeof(esc), "\\u%04x", c);
                                e = esc;
                        }
                        r = buf_append(b, e, strlen(e));
                        i++;
                }
                run = i;
        }
        if (r == 0 && i > run)
                r = buf_append(b, s + run, i - run);
        if (r == 0)
                r = buf_append(b, "\"", 1);
        return r;
}

void api_json_text(struct api_resp *resp, unsigned status, json_t *head, const char *k1,
                   const void *d1, size_t l1, const char *k2, const void *d2, size_t l2)
{
        char *h = head ? json_dumps(head, JSON_COMPACT) : NULL;
        json_decref(head);
        size_t hl = h ? strlen(h) : 0;
        struct buf *b = &resp->body;
        b->len = 0;
        /* head is an object: reopen it, add the two strings, close it. */
        int r = hl >= 2 && h[hl - 1] == '}' ? 0 : -EINVAL;
        if (r == 0)
                r = buf_append(b, h, hl - 1);
        if (r == 0)
                r = buf_printf(b, "%s\"%s\":", hl > 2 ? "," : "", k1);
        if (r == 0)
                r = json_append_text(b, d1, l1);
        if (r == 0)
                r = buf_printf(b, ",\"%s\":", k2);
        if (r == 0)
                r = json_append_text(b, d2, l2);
        if (r == 0)
                r = buf_append(b, "}", 1);
        free(h);
        if (r < 0) {
                api_error(resp, 500, "internal", "out of memory");
                return;
        }
        resp->status = status;
        resp->content_type = "application/json";
}

static void resp_free(struct api_resp *resp)
{
        buf_free(&resp->body);
        if (resp->body_fd >= 0)
                close(resp->body_fd);
        free(resp);
}

static struct api_resp *resp_new(void)
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
        if (req->upload)
                files_upload_abort(a, req->upload);
        if (req->early)
                resp_free(req->early);
        buf_free(&req->body);
        free(req);
}

/* A NUL decoded from %00 would cut the path or a query value short in every
 * C string after this point: GET {endpoint}/processes/%00 was read as GET
 * {endpoint}/processes, a listing. No route or argument takes one, so the
 * request is refused. libmicrohttpd unescapes in the connection's own thread
 * (a thread per connection), before the first call of on_request for the
 * same request: a thread-local flag carries the finding over. */
static _Thread_local struct MHD_Connection *nul_in_url;

static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
        size_t n = MHD_http_unescape(s);
        if (memchr(s, '\0', n))
                nul_in_url = conn;
        return n;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
        struct api *a = cls;
        struct api_req *req = *con_cls;
        if (!req) {
                req = calloc(1, sizeof(*req));
                if (!req)
                        return MHD_NO;
                req->conn = conn;
                req->method = method;
                req->path = url;
                req->started_us = mono_us();
                buf_init(&req->body, (size_t)a->cfg.max_body_bytes);
                *con_cls = req;
                atomic_fetch_add(&a->metrics.requests, 1);
                atomic_fetch_add(&a->inflight, 1);
                /* A file upload streams its body to disk as it arrives: it
                 * is authorized and opened now, from the headers alone. */
                struct api_resp *early = resp_new();
                if (!early)
                        return MHD_NO;
                bool nul = nul_in_url == conn;
                nul_in_url = NULL;
                if (nul) {
                        api_error(early, 400, "invalid_argument",
                                  "the URL holds a NUL byte (%%00)");
                        req->streaming = true; /* the body is not read */
                        req->early = early;
                } else if (!atomic_load(&a->draining) && files_upload_begin(a, req, early)) {
                        req->streaming = true;
                        if (!req->upload)
                                req->early = early;
                        else
                                resp_free(early);
                } else {
                        resp_free(early);
                }
                return MHD_YES;
        }
        if (*upload_data_size) {
                atomic_fetch_add(&a->metrics.bytes_in, *upload_data_size);
                if (req->streaming) {
                        if (req->upload)
                                files_upload_write(req->upload, upload_data, *upload_data_size);
                } else if (!req->body_too_large &&
                    buf_append(&req->body, upload_data, *upload_data_size) < 0) {
                        req->body_too_large = true;
                        buf_free(&req->body);
                }
                *upload_data_size = 0;
                return MHD_YES;
        }

        struct api_resp resp = { .status = 500, .body_fd = -1 };
        buf_init(&resp.body, 0);
        if (req->early) {
                resp = *req->early;
                free(req->early);
                req->early = NULL;
        } else if (req->upload) {
                files_upload_finish(a, req->upload, &resp);
                req->upload = NULL;
        } else if (req->body_too_large)
                api_error(&resp, 413, "too_large", "request body over %lld bytes",
                          (long long)a->cfg.max_body_bytes);
        else if (atomic_load(&a->draining))
                api_error(&resp, 503, "unavailable", "the server is shutting down");
        else
                api_route(a, req, &resp);

        struct MHD_Response *r;
        uint64_t out_len = resp.body.len;
        if (resp.body_fd >= 0) {
                /* A file: sent from its descriptor (sendfile), never read whole. */
                buf_free(&resp.body);
                out_len = resp.body_fd_len;
                r = MHD_create_response_from_fd64(resp.body_fd_len, resp.body_fd);
                if (!r)
                        close(resp.body_fd);
        } else {
                r = MHD_create_response_from_buffer(resp.body.len, resp.body.data,
                                                    MHD_RESPMEM_MUST_FREE);
                if (!r)
                        buf_free(&resp.body);
                resp.body.data = NULL; /* owned by r now */
        }
        if (!r)
                return MHD_NO;
        if (resp.content_type)
                MHD_add_response_header(r, "Content-Type", resp.content_type);
        if (resp.retry_after[0])
                MHD_add_response_header(r, "Retry-After", resp.retry_after);
        MHD_add_response_header(r, "Cache-Control", "no-store");
        enum MHD_Result ret = MHD_queue_response(conn, resp.status, r);
        MHD_destroy_response(r);
        atomic_fetch_add(&a->metrics.bytes_out, out_len);
        unsigned cls_i = resp.status / 100;
        if (cls_i < 6)
                atomic_fetch_add(&a->metrics.responses_by_class[cls_i], 1);
        /* The one line per request: method, path, status, duration. */
        log_info("%s %s %u %.1fms", method, url, resp.status,
                 (double)(mono_us() - req->started_us) / 1000.0);
        return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        if (*con_cls) {
                struct api *a = cls;
                req_free(a, *con_cls);
                *con_cls = NULL;
                atomic_fetch_sub(&a->inflight, 1);
        }
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
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                                  .ai_socktype = SOCK_STREAM },
                        *res = NULL;
        if (getaddrinfo(h, colon + 1, &hints, &res) || !res)
                return -EINVAL;
        memcpy(ss, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
        freeaddrinfo(res);
        return 0;
}

int api_start(struct api *a, struct sbx_error *err)
{
        struct sockaddr_storage ss;
        socklen_t sl;
        if (parse_listen(a->cfg.listen, &ss, &sl) < 0)
                return sbx_error_set(err, EINVAL, "bad listen address '%s' (want ADDR:PORT)",
                                     a->cfg.listen);
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                         MHD_USE_ERROR_LOG | MHD_USE_SUPPRESS_DATE_NO_CLOCK |
                         MHD_USE_ITC /* for MHD_quiesce_daemon */;
        if (ss.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        a->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, a,
                                  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
                                  MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned)a->cfg.max_connections,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                                  /* Room for big upload chunks (fewer, larger writes), yet
                                   * bounded: this is also the cap on a request's headers. */
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
                                  MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
                                  MHD_OPTION_END);
        if (!a->mhd)
                return sbx_error_set(err, EADDRINUSE, "cannot listen on %s", a->cfg.listen);
        return 0;
}

bool api_drain(struct api *a, int64_t grace_ms)
{
        if (!a->mhd)
                return true;
        atomic_store(&a->draining, true);
        MHD_socket ls = MHD_quiesce_daemon(a->mhd);
        if (ls != MHD_INVALID_SOCKET)
                close(ls);
        int64_t deadline = mono_ms() + grace_ms;
        while (atomic_load(&a->inflight) > 0 && mono_ms() < deadline)
                usleep(20 * 1000);
        return atomic_load(&a->inflight) == 0;
}

void api_stop(struct api *a)
{
        if (a->mhd) {
                atomic_store(&a->draining, true);
                MHD_stop_daemon(a->mhd);
                a->mhd = NULL;
        }
}
