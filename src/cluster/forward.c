/* SPDX-License-Identifier: MIT */
/* A control-plane call relayed to the host that owns the sandbox
 * (cluster.h, cluster_forward). The other host's answer is as hostile as
 * any: bounded in size and time, and only a JSON object (or nothing)
 * passes. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

#define FORWARD_TIMEOUT_MS 60000L /* an attach may start a sandbox */
#define FORWARD_CONNECT_MS 2000L

void cluster_count_forward(struct cluster *cl);

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
        return buf_append(ctx, data, size * n) < 0 ? 0 : size * n;
}

static struct curl_slist *headers(const char *authorization)
{
        char auth[8192];
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        /* curl would send its own "Expect: 100-continue" and wait for it. */
        h = h ? curl_slist_append(h, "Expect:") : NULL;
        h = h ? curl_slist_append(h, CLUSTER_FORWARD_HEADER ": 1") : NULL;
        if (h && authorization &&
            snprintf(auth, sizeof(auth), "Authorization: %s", authorization) < (int)sizeof(auth))
                h = curl_slist_append(h, auth);
        return h;
}

static int answer_ok(const struct buf *b)
{
        if (b->len == 0)
                return 0;
        json_t *j = json_loadb(b->data, b->len, JSON_REJECT_DUPLICATES, NULL);
        int ok = json_is_object(j);
        json_decref(j);
        return ok ? 0 : -EBADMSG;
}

int cluster_forward(struct cluster *cl, const char *method, const char *url,
                    const char *authorization, const void *body, size_t body_len, long *ret_status,
                    char **ret_body, size_t *ret_len, struct sbx_error *err)
{
        struct cluster_call call = {.method = method,
                                    .url = url,
                                    .authorization = authorization,
                                    .body = body,
                                    .body_len = body_len,
                                    .timeout_ms = FORWARD_TIMEOUT_MS};
        return cluster_call(cl, &call, ret_status, ret_body, ret_len, err);
}

int cluster_call(struct cluster *cl, const struct cluster_call *call, long *ret_status,
                 char **ret_body, size_t *ret_len, struct sbx_error *err)
{
        const char *method = call->method;
        const void *body = call->body;
        long timeout = call->timeout_ms > 0 ? call->timeout_ms : 1;
        long connect = timeout < FORWARD_CONNECT_MS ? timeout : FORWARD_CONNECT_MS;
        struct curl_slist *h = headers(call->authorization);
        CURL *c = h ? curl_easy_init() : NULL;
        if (!c) {
                curl_slist_free_all(h);
                return sbx_error_set(err, ENOMEM, "forward");
        }
        struct buf out;
        buf_init(&out, CLUSTER_FORWARD_MAX);
        curl_easy_setopt(c, CURLOPT_URL, call->url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        if (!strcmp(method, "POST")) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)call->body_len);
        }
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
        CURLcode cr = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        cluster_count_forward(cl);
        int r = 0;
        if (cr != CURLE_OK)
                r = sbx_error_say(err, EAGAIN, "the sandbox's host does not answer: %s",
                                  curl_easy_strerror(cr));
        else if (status < 200 || status > 599 || answer_ok(&out) < 0)
                r = sbx_error_say(err, EBADMSG, "the sandbox's host gave a malformed answer");
        if (r == 0 && buf_terminate(&out) < 0)
                r = sbx_error_set(err, ENOMEM, "forward");
        if (r < 0) {
                buf_free(&out);
                return r;
        }
        *ret_status = status;
        *ret_len = out.len;
        *ret_body = out.data;
        return 0;
}
