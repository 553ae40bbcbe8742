/* SPDX-License-Identifier: MIT */
#include "auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../common/log.h"
#include "api-internal.h"
#include "cluster-api.h"
#include "cred.h"
#include "errors.h"

struct keyring *api_keys(struct api *a)
{
        pthread_mutex_lock(&a->keys_lock);
        struct keyring *kr = keyring_ref(a->keys);
        pthread_mutex_unlock(&a->keys_lock);
        return kr;
}

void api_reload_keys(struct api *a)
{
        struct sbx_error err = {0};
        struct keyring *kr = NULL;
        if (keys_load(a->cfg.state_dir, a->cfg.keys_ext, &kr, &err) < 0) {
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

static bool verify_identity(struct api *a, struct api_req *req, struct jwt_claims *claims,
                            struct api_resp *resp)
{
        const char *tok = bearer(req);
        if (!tok) {
                api_error(resp, 401, "unauthenticated", "missing bearer identity token");
                return false;
        }
        struct jwt_policy pol;
        jwt_policy_init(&pol, a->cfg.issuer ? a->cfg.issuer : a->cfg.url);
        pol.leeway_s = a->cfg.token_leeway_ms / 1000;
        struct sbx_error err = {0};
        struct keyring *kr = api_keys(a);
        int r = jwt_verify(kr, &pol, tok, claims, &err);
        keyring_free(kr);
        if (r < 0) {
                api_error(resp, 401, "unauthenticated", "%s", err.msg);
                return false;
        }
        return true;
}

bool api_auth_identity(struct api_call *c, struct api_resp *resp)
{
        if (!cluster_api_serving(c->a, resp) || !verify_identity(c->a, c->req, &c->claims, resp) ||
            rate_limited(c->a, c->claims.sub, resp))
                return false;
        c->caller = (struct mgr_caller){.deployment = c->claims.sub, .account = c->claims.acct};
        /* The account check comes before anything that could tell whether a
         * name exists. */
        struct sbx_error err = {0};
        int r = mgr_check_account(c->a->mgr, c->caller.account, &err);
        if (r < 0) {
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
                return false;
        }
        return true;
}

bool api_auth_credential(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        if (!cluster_api_serving(a, resp))
                return false;
        const char *tok = bearer(c->req);
        if (!tok) {
                api_error(resp, 401, "unauthenticated", "missing data-plane credential");
                return false;
        }
        struct cred_claims cr;
        struct sbx_error err = {0};
        struct keyring *kr = api_keys(a);
        int r = cred_verify(kr, tok, now_ms(), &cr, &err);
        keyring_free(kr);
        if (r < 0) {
                api_error(resp, 401, "unauthenticated", "%s", err.msg);
                return false;
        }
        if (rate_limited(a, cr.dep, resp))
                return false;
        /* A credential is good for the one sandbox it was minted for. */
        if (strcmp(cr.name, c->name)) {
                api_error(resp, 401, "unauthenticated", "credential is not for this sandbox");
                return false;
        }
        r = mgr_enter(a->mgr, cr.dep, c->name, cr.id, &c->sb, &err);
        if (r == -ENOENT)
                sbx_error_say(&err, ENOENT,
                              "sandbox '%s' of this credential no longer exists; attach again",
                              c->name);
        if (r < 0) {
                if (r == -EHOSTDOWN)
                        log_error("enter %s/%s: %s", cr.dep, c->name, err.msg);
                api_error_errno(resp, API_ERR_ENTER, r, &err);
                return false;
        }
        return true;
}

bool api_auth_share_viewer(struct api_call *c, const char *deployment, bool public,
                           struct api_resp *resp)
{
        if (rate_limited(c->a, deployment, resp))
                return false;
        if (public)
                return true;
        if (!verify_identity(c->a, c->req, &c->claims, resp))
                return false;
        if (strcmp(c->claims.sub, deployment)) {
                api_error(resp, 401, "unauthenticated",
                          "this share is not public: an identity token of its deployment");
                return false;
        }
        return true;
}
