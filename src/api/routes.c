/* SPDX-License-Identifier: MIT */
/* Routing, authentication and the control-plane handlers. The data-plane
 * handlers (exec, processes, files) live in dataplane.c. */
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "../common/names.h"
#include "cred.h"
#include "dataplane.h"
#include "jwt.h"
#include "metrics.h"

struct keyring *api_keys(struct api *a)
{
        pthread_mutex_lock(&a->keys_lock);
        struct keyring *kr = keyring_ref(a->keys);
        pthread_mutex_unlock(&a->keys_lock);
        return kr;
}

void api_reload_keys(struct api *a)
{
        struct sbx_error err = { 0 };
        struct keyring *kr = NULL;
        if (keys_load(a->state_dir, a->keys_ext, &kr, &err) < 0) {
                log_error("reload keys: %s", err.msg);
                return;
        }
        pthread_mutex_lock(&a->keys_lock);
        struct keyring *old = a->keys;
        a->keys = kr;
        pthread_mutex_unlock(&a->keys_lock);
        keyring_free(old);
        log_info("keys reloaded");
}

/* The per-deployment rate limit, taken once the caller is authenticated
 * (so only a verified deployment id can own a bucket). True when refused,
 * with resp set to 429 and Retry-After. */
static bool rate_limited(struct api *a, const char *deployment, struct api_resp *resp)
{
        if (!a->ratelimit)
                return false;
        int64_t wait_s = ratelimit_take(a->ratelimit, deployment, mono_ms());
        if (wait_s == 0)
                return false;
        atomic_fetch_add(&a->metrics.rate_limited, 1);
        snprintf(resp->retry_after, sizeof(resp->retry_after), "%lld", (long long)wait_s);
        api_error(resp, 429, "rate_limited",
                  "too many requests for this deployment; retry in %lld s", (long long)wait_s);
        return true;
}

/* "Bearer <token>" -> token, or NULL. */
static const char *bearer(struct api_req *req)
{
        const char *h = api_header(req, "Authorization");
        if (!h || strncasecmp(h, "Bearer ", 7))
                return NULL;
        h += 7;
        while (*h == ' ')
                h++;
        return *h ? h : NULL;
}

/* Verify the identity token; fill claims. */
static int auth_identity(struct api *a, struct api_req *req, struct jwt_claims *claims,
                         struct api_resp *resp)
{
        const char *tok = bearer(req);
        if (!tok) {
                api_error(resp, 401, "unauthenticated", "missing bearer identity token");
                return -1;
        }
        struct jwt_policy pol;
        jwt_policy_init(&pol, a->cfg.url);
        pol.leeway_s = a->cfg.token_leeway_ms / 1000;
        struct sbx_error err = { 0 };
        struct keyring *kr = api_keys(a);
        int r = jwt_verify(kr, &pol, tok, claims, &err);
        keyring_free(kr);
        if (r < 0) {
                api_error(resp, 401, "unauthenticated", "%s", err.msg);
                return -1;
        }
        return 0;
}

static json_t *record_json(const struct mgr_record *r)
{
        char created[32], active[32];
        format_rfc3339(r->created_at, created);
        format_rfc3339(r->last_active_at, active);
        json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "name", r->name, "class",
                              r->sandbox_class, "state", sbx_state_name(r->state), "createdAt",
                              created, "lastActiveAt", active, "network", r->network);
        if (j && r->ceiling_at) {
                char ceil[32];
                format_rfc3339(r->ceiling_at, ceil);
                json_object_set_new(j, "ceilingAt", json_string(ceil));
        }
        return j;
}

static void handle_attach(struct api *a, struct api_req *req, const struct mgr_caller *c,
                          const char *name, struct api_resp *resp)
{
        const char *cls = "default", *network = NULL;
        json_t *body = NULL;
        if (req->body.len) {
                json_error_t jerr;
                body = json_loadb(req->body.data, req->body.len, JSON_REJECT_DUPLICATES, &jerr);
                if (!json_is_object(body)) {
                        json_decref(body);
                        api_error(resp, 400, "invalid_argument", "body: expected a JSON object");
                        return;
                }
                json_t *jc = json_object_get(body, "class");
                if (jc && !json_is_null(jc)) {
                        if (!json_is_string(jc)) {
                                json_decref(body);
                                api_error(resp, 400, "invalid_argument", "class: expected a string");
                                return;
                        }
                        cls = json_string_value(jc);
                }
                json_t *jn = json_object_get(body, "network");
                if (jn && !json_is_null(jn)) {
                        if (!json_is_string(jn)) {
                                json_decref(body);
                                api_error(resp, 400, "invalid_argument",
                                          "network: \"nat\" or \"none\"");
                                return;
                        }
                        network = json_string_value(jn);
                }
        }
        struct sbx_error err = { 0 };
        struct mgr_record rec;
        uint64_t id = 0;
        int r = mgr_attach(a->mgr, c, name, cls, network, &id, &rec, &err);
        json_decref(body);
        if (r < 0) {
                if (r == -EHOSTDOWN)
                        log_error("attach %s/%s: %s", c->deployment, name, err.msg);
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
                return;
        }
        int64_t exp = now_ms() + a->cfg.credential_ttl_ms;
        char *cred = NULL;
        struct keyring *kr = api_keys(a);
        r = cred_mint(kr, c->deployment, name, id, exp, &cred, &err);
        keyring_free(kr);
        if (r < 0) {
                api_error(resp, 500, "internal", "cannot mint a credential");
                return;
        }
        char endpoint[1024], expires[32], auth[2048];
        snprintf(endpoint, sizeof(endpoint), "%s/v1/sandboxes/%s", a->cfg.url, name);
        snprintf(auth, sizeof(auth), "Bearer %s", cred);
        free(cred);
        format_rfc3339(exp, expires);
        api_json(resp, 200,
                 json_pack("{s:s,s:s,s:s,s:s,s:{s:s},s:s,s:s}", "name", rec.name, "class",
                           rec.sandbox_class, "state", sbx_state_name(rec.state), "endpoint",
                           endpoint, "headers", "Authorization", auth, "expiresAt", expires,
                           "network", rec.network));
}

static void handle_list(struct api *a, const struct mgr_caller *c, struct api_resp *resp)
{
        struct mgr_record *v = NULL;
        size_t n = 0;
        struct sbx_error err = { 0 };
        int r = mgr_list(a->mgr, c, &v, &n, &err);
        if (r < 0) {
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, record_json(&v[i]));
        free(v);
        api_json(resp, 200, json_pack("{s:o}", "sandboxes", arr));
}

/* /v1/sandboxes[/{name}[/attach|/stop]] */
static void control_plane(struct api *a, struct api_req *req, const char *name, const char *verb,
                          struct api_resp *resp)
{
        struct jwt_claims claims;
        if (auth_identity(a, req, &claims, resp) < 0 || rate_limited(a, claims.sub, resp))
                return;
        struct mgr_caller c = { .deployment = claims.sub, .account = claims.acct };
        struct sbx_error err = { 0 };
        /* The account check comes before anything that could tell whether a
         * name exists. */
        int r = mgr_check_account(a->mgr, c.account, &err);
        if (r < 0) {
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
                return;
        }
        const char *m = req->method;
        if (!name) {
                if (strcmp(m, "GET"))
                        api_error(resp, 405, "invalid_argument", "method %s not allowed", m);
                else
                        handle_list(a, &c, resp);
                return;
        }
        if (!name_is_valid(name)) {
                api_error(resp, 400, "invalid_argument",
                          "bad sandbox name (must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$)");
                return;
        }
        if (!verb && !strcmp(m, "GET")) {
                struct mgr_record rec;
                r = mgr_get(a->mgr, &c, name, &rec, &err);
                if (r < 0)
                        api_error_errno(resp, API_ERR_CONTROL, r, &err);
                else
                        api_json(resp, 200, record_json(&rec));
        } else if (!verb && !strcmp(m, "DELETE")) {
                r = mgr_delete(a->mgr, &c, name, &err);
                if (r < 0)
                        api_error_errno(resp, API_ERR_CONTROL, r, &err);
                else
                        api_no_content(resp);
        } else if (verb && !strcmp(verb, "attach") && !strcmp(m, "POST")) {
                handle_attach(a, req, &c, name, resp);
        } else if (verb && !strcmp(verb, "stop") && !strcmp(m, "POST")) {
                r = mgr_stop(a->mgr, &c, name, &err);
                if (r < 0)
                        api_error_errno(resp, API_ERR_CONTROL, r, &err);
                else
                        api_no_content(resp);
        } else {
                api_error(resp, 405, "invalid_argument", "method %s not allowed here", m);
        }
}

struct sandbox *api_enter_data_plane(struct api *a, struct api_req *req, const char *name,
                                       struct api_resp *resp)
{
        const char *tok = bearer(req);
        if (!tok) {
                api_error(resp, 401, "unauthenticated", "missing data-plane credential");
                return NULL;
        }
        struct cred_claims cr;
        struct sbx_error err = { 0 };
        struct keyring *kr = api_keys(a);
        int r = cred_verify(kr, tok, now_ms(), &cr, &err);
        keyring_free(kr);
        if (r < 0) {
                api_error(resp, 401, "unauthenticated", "%s", err.msg);
                return NULL;
        }
        if (rate_limited(a, cr.dep, resp))
                return NULL;
        /* A credential is good for the one sandbox it was minted for. */
        if (strcmp(cr.name, name)) {
                api_error(resp, 401, "unauthenticated", "credential is not for this sandbox");
                return NULL;
        }
        struct sandbox *sb = NULL;
        r = mgr_enter(a->mgr, cr.dep, name, cr.id, &sb, &err);
        if (r == -ENOENT)
                sbx_error_say(&err, ENOENT,
                              "sandbox '%s' of this credential no longer exists; attach again", name);
        if (r < 0) {
                if (r == -EHOSTDOWN)
                        log_error("enter %s/%s: %s", cr.dep, name, err.msg);
                api_error_errno(resp, API_ERR_ENTER, r, &err);
                return NULL;
        }
        return sb;
}

/* Split "/v1/sandboxes/{name}/{rest...}" into at most 5 segments. */
static size_t split_path(char *p, char **seg, size_t max)
{
        size_t n = 0;
        char *save = NULL;
        for (char *t = strtok_r(p, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
                if (n == max)
                        return max + 1;
                seg[n++] = t;
        }
        return n;
}

void api_route(struct api *a, struct api_req *req, struct api_resp *resp)
{
        const char *path = req->path;
        if (!strcmp(path, "/healthz")) {
                api_json(resp, 200, json_pack("{s:b}", "ok", 1));
                return;
        }
        if (!strcmp(path, "/metrics")) {
                metrics_render(a, resp);
                return;
        }
        char copy[1024];
        if (strlen(path) >= sizeof(copy)) {
                api_error(resp, 404, "not_found", "no such route");
                return;
        }
        snprintf(copy, sizeof(copy), "%s", path);
        char *seg[6];
        size_t n = split_path(copy, seg, 6);
        if (n < 2 || n > 6 || strcmp(seg[0], "v1") || strcmp(seg[1], "sandboxes")) {
                api_error(resp, 404, "not_found", "no such route");
                return;
        }
        if (n == 2) {
                control_plane(a, req, NULL, NULL, resp);
                return;
        }
        const char *name = seg[2];
        if (n == 3 || (n == 4 && (!strcmp(seg[3], "attach") || !strcmp(seg[3], "stop")))) {
                control_plane(a, req, name, n == 4 ? seg[3] : NULL, resp);
                return;
        }
        if (!name_is_valid(name)) {
                api_error(resp, 400, "invalid_argument", "bad sandbox name");
                return;
        }
        if (!dataplane_route_exists((const char *const *)seg + 3, n - 3)) {
                api_error(resp, 404, "not_found", "no such route");
                return;
        }
        struct sandbox *sb = api_enter_data_plane(a, req, name, resp);
        if (!sb)
                return;
        dataplane_handle(a, req, sb, (const char *const *)seg + 3, n - 3, resp);
        mgr_leave(a->mgr, sb);
}
