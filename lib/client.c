/* SPDX-License-Identifier: MIT */
/* The client handle, the control plane, and the data-plane call with its
 * credential cache: attach on first use, refresh before `expiresAt`, and
 * exactly one re-attach on a 401 (docs/api.md, Data-plane credentials). */
#include "internal.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_TIMEOUT_MS 30000
/* Refresh a credential this long before it expires (less for short ones). */
#define REFRESH_MARGIN_MS 30000

struct sbxc_cred {
        struct sbxc_cred *next;
        char *name;
        char *endpoint;
        char **headers;
        char *sandbox_class; /* asked for again on a re-attach */
        char *network;
        char *image;
        int64_t refresh_at; /* local ms after which the credential is refreshed */
        unsigned generation;
        bool attaching; /* a thread attaches for this name: others wait for it */
};

const char *sbxc_version(void)
{
        return "1.0";
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
        curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *nonempty(const char *s)
{
        return s && *s ? (char *)s : NULL;
}

static void strip_slashes(char *s)
{
        size_t n = strlen(s);
        while (n > 0 && s[n - 1] == '/')
                s[--n] = 0;
}

int sbx_client_new(const struct sbx_options *opts, struct sbx_client **ret, struct sbx_err *err)
{
        static const struct sbx_options none = {0};
        if (!opts)
                opts = &none;
        pthread_once(&curl_once, curl_init);
        if (curl_init_rc != CURLE_OK)
                return sbxc_fail(err, EIO, 0, "internal", "curl_global_init failed");
        const char *token = nonempty(opts->token);
        if (!token)
                token = nonempty(getenv("ASTRO_AUTHZ_TOKEN"));
        if (!token)
                token = nonempty(getenv("SANDBOXD_TOKEN"));
        if (!token)
                return sbxc_fail(err, EINVAL, 0, "no_token",
                                 "no identity token: give one or set SANDBOXD_TOKEN");
        struct sbx_client *c = calloc(1, sizeof(*c));
        if (!c)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        c->token = strdup(token);
        int r = 0;
        if (nonempty(opts->server_url))
                c->server = strdup(opts->server_url);
        else if ((r = sbxc_token_issuer(token, &c->server)) < 0 && r != -ENOMEM)
                r = sbxc_fail(err, EINVAL, 0, "no_server",
                              "no server URL: give one or use a token with an 'iss' claim");
        if (r >= 0 && (!c->token || !c->server))
                r = sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        if (r >= 0 && strncmp(c->server, "http://", 7) && strncmp(c->server, "https://", 8))
                r = sbxc_fail(err, EINVAL, 0, "no_server", "server URL '%.200s' is not http(s)",
                              c->server);
        if (r < 0) {
                free(c->token);
                free(c->server);
                free(c);
                return r == -ENOMEM ? sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory") : r;
        }
        strip_slashes(c->server);
        c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
        pthread_mutex_init(&c->lock, NULL);
        pthread_cond_init(&c->attached, NULL);
        *ret = c;
        return 0;
}

static void cred_free(struct sbxc_cred *k)
{
        if (!k)
                return;
        free(k->name);
        free(k->endpoint);
        sbxc_strv_free(k->headers);
        free(k->sandbox_class);
        free(k->network);
        free(k->image);
        free(k);
}

void sbx_client_free(struct sbx_client *c)
{
        if (!c)
                return;
        while (c->creds) {
                struct sbxc_cred *k = c->creds;
                c->creds = k->next;
                cred_free(k);
        }
        pthread_cond_destroy(&c->attached);
        pthread_mutex_destroy(&c->lock);
        // The token is a secret: leave no copy in freed memory.
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
        free(c->server);
        free(c);
}

const char *sbx_client_server(const struct sbx_client *c)
{
        return c->server;
}

int sbxc_check_name(const char *name, struct sbx_err *err)
{
        size_t n = name ? strlen(name) : 0;
        bool ok =
            n >= 1 && n <= 128 &&
            strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", name[0]) &&
            strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n;
        if (!ok)
                return sbxc_fail(err, EINVAL, 400, "invalid_argument",
                                 "invalid sandbox name '%.140s': letters, digits, '.', '_', ':' "
                                 "and '-', 1 to 128, not starting with a sign",
                                 name ? name : "");
        return 0;
}

int sbxc_check_id(const char *id, struct sbx_err *err)
{
        size_t n = id ? strlen(id) : 0;
        if (n < 1 || n > 64 ||
            strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-") != n)
                return sbxc_fail(err, EINVAL, 400, "invalid_argument", "invalid process id '%.70s'",
                                 id ? id : "");
        return 0;
}

/* ---- control plane ---- */

/* A request with a JSON body (text may be NULL) and a JSON answer. */
static struct sbxc_request json_request(const struct sbx_client *c, const char *method,
                                        const char *text)
{
        return (struct sbxc_request){
            .method = method,
            .content_type = text ? "application/json" : NULL,
            .body = text,
            .body_len = text ? strlen(text) : 0,
            .body_fd = -1,
            .max_body = SBXC_MAX_JSON,
            .timeout_ms = c->timeout_ms,
        };
}

/* A control-plane call with the identity token; a JSON object answer in
 * *ret (when ret is set), a 204 or any body discarded otherwise. */
static int control(struct sbx_client *c, const char *method, const char *path, json_t *body,
                   json_t **ret, struct sbxc_response *keep, struct sbx_err *err)
{
        _cleanup_free_ char *url = NULL;
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (asprintf(&url, "%s%s", c->server, path) < 0 || (body && !text))
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        _cleanup_free_ char *auth = NULL;
        if (asprintf(&auth, "Bearer %s", c->token) < 0)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        struct sbxc_request rq = json_request(c, method, text);
        rq.url = url;
        rq.auth = auth;
        struct sbxc_response resp;
        int r = sbxc_http(&rq, &resp, err);
        explicit_bzero(auth, strlen(auth));
        if (r < 0)
                return r;
        if (resp.status < 200 || resp.status >= 300)
                r = sbxc_parse_error(resp.status, resp.body.data, resp.body.len, err);
        else if (ret)
                r = sbxc_parse_object(resp.body.data, resp.body.len, ret, err);
        if (r >= 0 && keep)
                *keep = resp;
        else
                sbxc_response_free(&resp);
        return r;
}

static int sandbox_path(const char *name, const char *suffix, char **ret, struct sbx_err *err)
{
        int r = sbxc_check_name(name, err);
        if (r < 0)
                return r;
        // A checked name needs no escaping (no '/', '%', '?' or '#').
        if (asprintf(ret, "/v1/sandboxes/%s%s", name, suffix) < 0)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        return 0;
}

static int64_t now_ms_local(void)
{
        return now_ms();
}

/* The cache entry for an attach answer. */
static int cred_of(json_t *o, const struct sbx_sandbox *s, int64_t server_date_ms, int64_t received,
                   struct sbxc_cred **ret, struct sbx_err *err)
{
        struct sbxc_cred *k = calloc(1, sizeof(*k));
        if (!k)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        int r = sbxc_parse_headers(o, &k->headers, err);
        int64_t expires = 0;
        if (r >= 0 && (!s->endpoint || !s->expires_at))
                r = sbxc_bad(err, "attach: no endpoint or expiresAt");
        if (r >= 0 && strncmp(s->endpoint, "http://", 7) && strncmp(s->endpoint, "https://", 8))
                r = sbxc_bad(err, "attach: the endpoint is not an http(s) URL");
        if (r >= 0 && sbxc_parse_time(s->expires_at, &expires) < 0)
                r = sbxc_bad(err, "attach: bad expiresAt '%.40s'", s->expires_at);
        k->name = strdup(s->name);
        k->endpoint = strdup(s->endpoint ? s->endpoint : "");
        k->sandbox_class = s->sandbox_class ? strdup(s->sandbox_class) : NULL;
        k->network = s->network ? strdup(s->network) : NULL;
        k->image = s->image ? strdup(s->image) : NULL;
        if (r >= 0 && (!k->name || !k->endpoint))
                r = sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        if (r < 0) {
                cred_free(k);
                return r;
        }
        strip_slashes(k->endpoint);
        // Measure the lifetime against the server's clock when it sent one
        // (a skewed local clock must not make every call re-attach); the
        // Date header has one-second resolution: take the late end.
        int64_t sent = server_date_ms > 0 ? server_date_ms + 1000 : received;
        int64_t life = expires - sent;
        if (life < 0)
                life = 0;
        k->refresh_at = received + life - MIN(REFRESH_MARGIN_MS, life / 4);
        *ret = k;
        return 0;
}

static json_t *attach_body(const char *sandbox_class, const char *network, const char *image)
{
        json_t *b = json_object();
        json_object_set_new(b, "class", json_string(sandbox_class ? sandbox_class : "default"));
        if (network)
                json_object_set_new(b, "network", json_string(network));
        if (image)
                json_object_set_new(b, "image", json_string(image));
        return b;
}

static void cache_put(struct sbx_client *c, struct sbxc_cred *k, unsigned generation)
{
        pthread_mutex_lock(&c->lock);
        struct sbxc_cred **pp = &c->creds;
        unsigned gen = 0;
        for (; *pp; pp = &(*pp)->next)
                if (!strcmp((*pp)->name, k->name)) {
                        gen = (*pp)->generation;
                        break;
                }
        // A stop or delete since the attach started: do not cache its answer.
        if (gen != generation) {
                pthread_mutex_unlock(&c->lock);
                cred_free(k);
                return;
        }
        k->generation = gen;
        if (*pp) {
                k->next = (*pp)->next;
                cred_free(*pp);
        }
        *pp = k;
        pthread_mutex_unlock(&c->lock);
}

/* The generation of name's entry (0 when none). */
static unsigned cache_generation(struct sbx_client *c, const char *name)
{
        unsigned gen = 0;
        pthread_mutex_lock(&c->lock);
        for (struct sbxc_cred *k = c->creds; k; k = k->next)
                if (!strcmp(k->name, name))
                        gen = k->generation;
        pthread_mutex_unlock(&c->lock);
        return gen;
}

/* A handle answer (attach, fork) for the sandbox `name`: parsed, its
 * credential cached, the record in ret (when set). */
static int take_handle(struct sbx_client *c, const char *name, json_t *ans,
                       const struct sbxc_response *resp, unsigned generation,
                       const char *sandbox_class, struct sbx_sandbox *ret, struct sbx_err *err)
{
        int64_t received = now_ms_local();
        struct sbx_sandbox s = {0};
        struct sbxc_cred *k = NULL;
        int r = sbxc_parse_sandbox(ans, &s, err);
        // The credential is cached under the answer's name: it must be the
        // one asked for, or one sandbox's calls would go to another.
        if (r >= 0 && strcmp(s.name, name))
                r = sbxc_bad(err, "answer: a handle for '%.64s', not '%s'", s.name, name);
        if (r >= 0)
                r = cred_of(ans, &s, resp->server_date_ms, received, &k, err);
        if (r < 0) {
                sbx_sandbox_clear(&s);
                return r;
        }
        if (!k->sandbox_class && sandbox_class)
                k->sandbox_class = strdup(sandbox_class);
        cache_put(c, k, generation);
        if (ret)
                *ret = s;
        else
                sbx_sandbox_clear(&s);
        return 0;
}

static int attach_now(struct sbx_client *c, const char *name, const struct sbx_attach_options *o,
                      struct sbx_sandbox *ret, struct sbx_err *err)
{
        _cleanup_free_ char *path = NULL;
        int r = sandbox_path(name, "/attach", &path, err);
        if (r < 0)
                return r;
        unsigned generation = cache_generation(c, name);
        json_t *ans = NULL;
        struct sbxc_response resp;
        r = control(c, "POST", path, attach_body(o->sandbox_class, o->network, o->image), &ans,
                    &resp, err);
        if (r < 0)
                return r;
        r = take_handle(c, name, ans, &resp, generation, o->sandbox_class, ret, err);
        sbxc_response_free(&resp);
        json_decref(ans);
        return r;
}

int sbx_attach(struct sbx_client *c, const char *name, const struct sbx_attach_options *opts,
               struct sbx_sandbox *ret, struct sbx_err *err)
{
        static const struct sbx_attach_options none = {0};
        return attach_now(c, name, opts ? opts : &none, ret, err);
}

/* A control-plane GET whose answer parse turns into ret. */
static int control_get(struct sbx_client *c, const char *path, sbxc_parser parse, void *ret,
                       struct sbx_err *err)
{
        json_t *ans = NULL;
        int r = control(c, "GET", path, NULL, &ans, NULL, err);
        if (r >= 0)
                r = parse(ans, ret, err);
        json_decref(ans);
        return r;
}

int sbx_get(struct sbx_client *c, const char *name, struct sbx_sandbox *ret, struct sbx_err *err)
{
        _cleanup_free_ char *path = NULL;
        int r = sandbox_path(name, "", &path, err);
        return r < 0 ? r : control_get(c, path, sbxc_parse_sandbox, ret, err);
}

int sbx_list(struct sbx_client *c, struct sbx_sandbox_list *ret, struct sbx_err *err)
{
        return control_get(c, "/v1/sandboxes", sbxc_parse_sandbox_list, ret, err);
}

int sbx_images(struct sbx_client *c, struct sbx_image_list *ret, struct sbx_err *err)
{
        return control_get(c, "/v1/images", sbxc_parse_images, ret, err);
}

/* Drop name's credential and bump its generation, so an attach in flight
 * does not cache what it gets. */
static void forget(struct sbx_client *c, const char *name)
{
        pthread_mutex_lock(&c->lock);
        for (struct sbxc_cred *k = c->creds; k; k = k->next)
                if (!strcmp(k->name, name)) {
                        k->generation++;
                        k->refresh_at = 0;
                        free(k->endpoint);
                        k->endpoint = NULL;
                }
        pthread_mutex_unlock(&c->lock);
}

static int lifecycle(struct sbx_client *c, const char *name, const char *method, const char *suffix,
                     struct sbx_err *err)
{
        _cleanup_free_ char *path = NULL;
        int r = sandbox_path(name, suffix, &path, err);
        if (r < 0)
                return r;
        forget(c, name);
        r = control(c, method, path, NULL, NULL, NULL, err);
        forget(c, name);
        return r;
}

int sbx_stop(struct sbx_client *c, const char *name, struct sbx_err *err)
{
        return lifecycle(c, name, "POST", "/stop", err);
}

int sbx_delete(struct sbx_client *c, const char *name, struct sbx_err *err)
{
        return lifecycle(c, name, "DELETE", "", err);
}

/* ---- data plane ---- */

struct cred_copy {
        char *endpoint;
        char **headers;
        struct sbx_attach_options again;
        char *sandbox_class, *network, *image;
};

static void cred_copy_free(struct cred_copy *cc)
{
        free(cc->endpoint);
        sbxc_strv_free(cc->headers);
        free(cc->sandbox_class);
        free(cc->network);
        free(cc->image);
        *cc = (struct cred_copy){0};
}

static char **strv_dup(char **v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        char **d = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; d && i < n; i++)
                if (!(d[i] = strdup(v[i]))) {
                        sbxc_strv_free(d);
                        return NULL;
                }
        return d;
}

static char *dup_or_null(const char *s)
{
        return s ? strdup(s) : NULL;
}

/* A copy of name's usable credential, taken under the lock (another thread
 * may replace the entry meanwhile). -ENOENT when none is fresh; the
 * attach options to ask again with are copied either way. */
static int cache_get(struct sbx_client *c, const char *name, bool stale_ok, struct cred_copy *cc)
{
        int r = -ENOENT;
        pthread_mutex_lock(&c->lock);
        for (struct sbxc_cred *k = c->creds; k; k = k->next) {
                if (strcmp(k->name, name))
                        continue;
                cc->sandbox_class = dup_or_null(k->sandbox_class);
                cc->network = dup_or_null(k->network);
                cc->image = dup_or_null(k->image);
                if (k->endpoint && (stale_ok || now_ms_local() < k->refresh_at)) {
                        cc->endpoint = strdup(k->endpoint);
                        cc->headers = strv_dup(k->headers);
                        r = cc->endpoint && cc->headers ? 0 : -ENOMEM;
                }
                break;
        }
        pthread_mutex_unlock(&c->lock);
        cc->again = (struct sbx_attach_options){cc->sandbox_class, cc->network, cc->image};
        return r;
}

static bool fresh(const struct sbxc_cred *k)
{
        return k->endpoint && now_ms_local() < k->refresh_at;
}

static struct sbxc_cred *find_locked(struct sbx_client *c, const char *name)
{
        struct sbxc_cred *k = c->creds;
        while (k && strcmp(k->name, name))
                k = k->next;
        return k;
}

/* Concurrent callers share one attach, as the TypeScript client does: 0
 * when a fresh credential is cached (after waiting for an attach that
 * another thread has under way), 1 when the caller is to attach (marked,
 * for the others to wait), -ENOMEM. */
static int claim_attach(struct sbx_client *c, const char *name, bool force)
{
        pthread_mutex_lock(&c->lock);
        struct sbxc_cred *k;
        while ((k = find_locked(c, name)) && !force && !fresh(k) && k->attaching)
                pthread_cond_wait(&c->attached, &c->lock);
        int r = 1;
        if (k && !force && fresh(k)) {
                r = 0;
        } else if (!k) {
                // A place-holder for the others to wait on; the attach's
                // answer replaces it.
                k = calloc(1, sizeof(*k));
                if (k && !(k->name = strdup(name))) {
                        free(k);
                        k = NULL;
                }
                if (k) {
                        k->next = c->creds;
                        c->creds = k;
                }
        }
        if (r == 1 && k)
                k->attaching = true;
        pthread_mutex_unlock(&c->lock);
        return k ? r : -ENOMEM;
}

static void release_attach(struct sbx_client *c, const char *name)
{
        pthread_mutex_lock(&c->lock);
        struct sbxc_cred *k = find_locked(c, name);
        if (k)
                k->attaching = false;
        pthread_cond_broadcast(&c->attached);
        pthread_mutex_unlock(&c->lock);
}

/* A fresh credential for name: the cached one, else a new attach. */
static int credential(struct sbx_client *c, const char *name, bool force, struct cred_copy *cc,
                      struct sbx_err *err)
{
        int r = claim_attach(c, name, force);
        if (r == 0 && cache_get(c, name, false, cc) == 0)
                return 0;
        // (Expired since, or first: attach, with the options it was made with.)
        cred_copy_free(cc);
        if (r < 0 || cache_get(c, name, true, cc) == -ENOMEM)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        struct sbx_attach_options again = cc->again;
        r = attach_now(c, name, &again, NULL, err);
        release_attach(c, name);
        cred_copy_free(cc);
        if (r < 0)
                return r;
        // Just attached: use it even if its lifetime is already short.
        r = cache_get(c, name, true, cc);
        if (r < 0)
                return sbxc_fail(err, EAGAIN, 0, "unreachable",
                                 "attach '%s': the sandbox was stopped or deleted meanwhile", name);
        return 0;
}

static int data_once(struct sbx_client *c, const char *name, const char *path, bool force,
                     struct sbxc_request *rq, struct sbxc_response *resp, struct sbx_err *err)
{
        struct cred_copy cc = {0};
        int r = credential(c, name, force, &cc, err);
        _cleanup_free_ char *url = NULL;
        if (r >= 0 && asprintf(&url, "%s%s", cc.endpoint, path) < 0)
                r = sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        if (r >= 0) {
                rq->url = url;
                rq->headers = cc.headers;
                r = sbxc_http(rq, resp, err);
                rq->url = NULL;
                rq->headers = NULL;
        }
        cred_copy_free(&cc);
        return r;
}

int sbxc_data(struct sbx_client *c, const char *name, const char *path, struct sbxc_request *rq,
              struct sbxc_response *resp, struct sbx_err *err)
{
        int r = sbxc_check_name(name, err);
        if (r < 0)
                return r;
        off_t start = rq->body_fd >= 0 ? lseek(rq->body_fd, 0, SEEK_CUR) : 0;
        r = data_once(c, name, path, false, rq, resp, err);
        // A 401 is answered before anything runs: one re-attach and retry
        // cannot run a command twice. A body read from an fd is sent again
        // only when the fd can go back to where it started.
        if (r >= 0 && resp->status == 401 && (rq->body_fd < 0 || start >= 0)) {
                if (rq->body_fd >= 0 && lseek(rq->body_fd, start, SEEK_SET) != start) {
                        r = sbxc_parse_error(resp->status, resp->body.data, resp->body.len, err);
                        sbxc_response_free(resp);
                        return r;
                }
                sbxc_response_free(resp);
                r = data_once(c, name, path, true, rq, resp, err);
        }
        if (r < 0)
                return r;
        if (resp->status < 200 || resp->status >= 300) {
                r = sbxc_parse_error(resp->status, resp->body.data, resp->body.len, err);
                sbxc_response_free(resp);
        }
        return r;
}

int sbxc_data_json(struct sbx_client *c, const char *name, const char *method, const char *path,
                   json_t *body, sbxc_parser parse, void *ret, struct sbx_err *err)
{
        _cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (body && !text)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        struct sbxc_request rq = json_request(c, method, text);
        struct sbxc_response resp;
        int r = sbxc_data(c, name, path, &rq, &resp, err);
        if (r < 0)
                return r;
        json_t *ans = NULL;
        if (parse)
                r = sbxc_parse_object(resp.body.data, resp.body.len, &ans, err);
        if (parse && r >= 0)
                r = parse(ans, ret, err);
        json_decref(ans);
        sbxc_response_free(&resp);
        return r;
}

int sbx_snapshot(struct sbx_client *c, const char *name, const char *image,
                 struct sbx_snapshot_info *ret, struct sbx_err *err)
{
        if (!image || !*image)
                return sbxc_fail(err, EINVAL, 400, "invalid_argument", "no image name");
        json_t *b = json_object();
        json_object_set_new(b, "image", json_string(image));
        return sbxc_data_json(c, name, "POST", "/snapshot", b, sbxc_parse_snapshot, ret, err);
}

int sbx_fork(struct sbx_client *c, const char *name, const char *new_name, struct sbx_sandbox *ret,
             struct sbx_err *err)
{
        int r = sbxc_check_name(new_name, err);
        if (r < 0)
                return r;
        json_t *b = json_object();
        json_object_set_new(b, "name", json_string(new_name));
        _cleanup_free_ char *text = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        if (!text)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        unsigned generation = cache_generation(c, new_name);
        struct sbxc_request rq = json_request(c, "POST", text);
        struct sbxc_response resp;
        r = sbxc_data(c, name, "/fork", &rq, &resp, err);
        if (r < 0)
                return r;
        json_t *ans = NULL;
        r = sbxc_parse_object(resp.body.data, resp.body.len, &ans, err);
        if (r >= 0)
                r = take_handle(c, new_name, ans, &resp, generation, NULL, ret, err);
        json_decref(ans);
        sbxc_response_free(&resp);
        return r;
}
