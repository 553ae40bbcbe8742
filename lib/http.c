/* SPDX-License-Identifier: MIT */
/* One HTTP exchange on a curl easy handle of its own. One handle per call
 * rather than a pool: a call then shares nothing with another thread's,
 * and no lock is held while the network is waited on; what it costs is a
 * new connection per call, which on the loopback or a LAN is small next to
 * the work a sandbox call does. */
#include "internal.h"

#include <curl/curl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

struct xfer {
        const struct sbxc_request *rq;
        struct sbxc_response *resp;
        CURL *curl;
        bool over;    /* the kept body passed max_body */
        int read_err; /* errno of a failed read of body_fd */
};

static bool ok_status(long s)
{
        return s >= 200 && s < 300;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
        struct xfer *x = ud;
        size_t n = size * nmemb;
        if (!x->resp->status)
                curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->resp->status);
        if (ok_status(x->resp->status) && x->rq->sink) {
                int r = x->rq->sink(x->rq->sink_ctx, p, n);
                if (r != 0) {
                        x->resp->sink_rc = r;
                        return CURL_WRITEFUNC_ERROR;
                }
                return n;
        }
        if (buf_append(&x->resp->body, p, n) < 0) {
                x->over = true;
                return CURL_WRITEFUNC_ERROR;
        }
        return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
        struct xfer *x = ud;
        size_t n = size * nmemb;
        if (n > 5 && n < 128 && !strncasecmp(p, "date:", 5)) {
                char line[128];
                memcpy(line, p + 5, n - 5);
                line[n - 5] = 0;
                time_t t = curl_getdate(line, NULL);
                if (t > 0)
                        x->resp->server_date_ms = (int64_t)t * 1000;
        }
        return n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *ud)
{
        struct xfer *x = ud;
        for (;;) {
                ssize_t n = read(x->rq->body_fd, p, size * nmemb);
                if (n >= 0)
                        return (size_t)n;
                if (errno != EINTR) {
                        x->read_err = errno;
                        return CURL_READFUNC_ABORT;
                }
        }
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
        struct xfer *x = ud;
        if (x->rq->body_fd >= 0)
                return x->rq->progress(x->rq->progress_ctx, ulnow, ultotal > 0 ? ultotal : -1);
        return x->rq->progress(x->rq->progress_ctx, dlnow, dltotal > 0 ? dltotal : -1);
}

static int set_body(CURL *curl, const struct sbxc_request *rq, struct xfer *x)
{
        if (rq->body_fd >= 0) {
                curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
                curl_easy_setopt(curl, CURLOPT_READDATA, x);
                struct stat st;
                off_t pos = lseek(rq->body_fd, 0, SEEK_CUR);
                if (fstat(rq->body_fd, &st) == 0 && S_ISREG(st.st_mode) && pos >= 0)
                        curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE,
                                         (curl_off_t)(st.st_size > pos ? st.st_size - pos : 0));
        } else if (rq->body) {
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, rq->body);
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
        } else if (!strcmp(rq->method, "POST") || !strcmp(rq->method, "PUT")) {
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
        }
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, rq->method);
        if (!strcmp(rq->method, "GET"))
                curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
        return 0;
}

static struct curl_slist *build_headers(const struct sbxc_request *rq)
{
        struct curl_slist *h = NULL, *t;
        char line[9000];
        bool fail = false;
        for (size_t i = 0; rq->headers && rq->headers[i] && !fail; i++)
                fail = !(t = curl_slist_append(h, rq->headers[i])) || !(h = t);
        if (rq->auth && !fail) {
                fail = snprintf(line, sizeof(line), "Authorization: %s", rq->auth) >=
                       (int)sizeof(line);
                fail = fail || !(t = curl_slist_append(h, line)) || !(h = t);
        }
        if (rq->content_type && !fail) {
                snprintf(line, sizeof(line), "Content-Type: %s", rq->content_type);
                fail = !(t = curl_slist_append(h, line)) || !(h = t);
        }
        // An upload's 401 comes before its body: no need to wait for 100.
        fail = fail || !(t = curl_slist_append(h, "Expect:")) || !(h = t);
        if (fail) {
                curl_slist_free_all(h);
                return NULL;
        }
        return h;
}

static void set_options(CURL *curl, const struct sbxc_request *rq, struct xfer *x)
{
        curl_easy_setopt(curl, CURLOPT_URL, rq->url);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(curl, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, NULL);
        if (rq->timeout_ms > 0)
                curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)rq->timeout_ms);
        if (rq->low_speed || rq->timeout_ms <= 0) {
                // A stream sends a keepalive every 15 s: a minute of nothing
                // is a dead peer, not a quiet process.
                curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
                curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
        }
        if (rq->progress) {
                curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
                curl_easy_setopt(curl, CURLOPT_XFERINFODATA, x);
        }
}

/* Strip the query string: a URL in a message names the route only. */
static void route_of(const char *url, char *out, size_t len)
{
        snprintf(out, len, "%.*s", (int)strcspn(url, "?"), url);
}

static int transfer_error(struct xfer *x, CURLcode rc, const char *errbuf, struct sbx_err *err)
{
        char route[256];
        route_of(x->rq->url, route, sizeof(route));
        if (x->resp->sink_rc)
                return x->resp->sink_rc;
        if (x->over)
                return sbxc_bad(err, "%s %s: an answer over %zu bytes", x->rq->method, route,
                                x->resp->body.max);
        if (x->read_err)
                return sbxc_fail(err, x->read_err, 0, "io_error", "%s %s: read: %s", x->rq->method,
                                 route, strerror(x->read_err));
        if (rc == CURLE_ABORTED_BY_CALLBACK)
                return sbxc_fail(err, ECANCELED, 0, "cancelled", "%s %s: cancelled", x->rq->method,
                                 route);
        int e = rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT
                : rc == CURLE_COULDNT_CONNECT  ? ECONNREFUSED
                : rc == CURLE_WRITE_ERROR      ? EIO
                                               : ECONNRESET;
        return sbxc_fail(err, e, 0, "unreachable", "%s %s: %s", x->rq->method, route,
                         errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

int sbxc_http(const struct sbxc_request *rq, struct sbxc_response *resp, struct sbx_err *err)
{
        *resp = (struct sbxc_response){0};
        buf_init(&resp->body, rq->max_body ? rq->max_body : SBXC_MAX_SMALL);
        struct xfer x = {.rq = rq, .resp = resp};
        CURL *curl = curl_easy_init();
        struct curl_slist *headers = curl ? build_headers(rq) : NULL;
        if (!curl || !headers) {
                curl_easy_cleanup(curl);
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        }
        x.curl = curl;
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
        set_options(curl, rq, &x);
        set_body(curl, rq, &x);
        CURLcode rc = curl_easy_perform(curl);
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        int r = 0;
        // A refusal's body was kept whole (or was cut by its cap, which the
        // error parse then reports as no error body); take it as the answer.
        if (rc != CURLE_OK && !(status >= 300 && !x.over && !x.read_err && !resp->sink_rc &&
                                rc != CURLE_OPERATION_TIMEDOUT))
                r = transfer_error(&x, rc, errbuf, err);
        resp->status = status;
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        if (r < 0 || (r == 0 && !status))
                buf_free(&resp->body);
        if (r == 0 && !status)
                return sbxc_bad(err, "%s: no HTTP status", rq->method);
        return r;
}

void sbxc_response_free(struct sbxc_response *resp)
{
        buf_free(&resp->body);
}

char *sbxc_escape(const char *s)
{
        char *e = curl_easy_escape(NULL, s, 0);
        char *copy = e ? strdup(e) : NULL;
        curl_free(e);
        return copy;
}
