/* SPDX-License-Identifier: MIT */
/* Preview shares (ports.h, share-token.h): made, listed and revoked with
 * the sandbox's credential; used by anyone holding the URL (public) or by
 * the deployment's own identity (not public), through the path form
 * /v1/preview/{token}/... or the host form <port>-<token>.<preview_domain>.
 * A share's record is in the store, so it outlives a daemon restart; it
 * reaches only the port and the incarnation it was made for. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "../common/log.h"
#include "api-internal.h"
#include "auth.h"
#include "cred.h"
#include "dataplane.h"
#include "httpmsg.h"
#include "ports.h"
#include "share-token.h"

#define SHARE_TTL_DEFAULT_MS (3600 * 1000LL)
#define SHARE_TTL_MAX_MS (30 * 86400 * 1000LL)
#define SHARES_MAX 256 /* listed per sandbox, and made: past it, a 402 */

static int token_of(struct api *a, const struct store_share *sh, char out[SHARE_TOKEN_LEN + 1])
{
        struct keyring *kr = api_keys(a);
        int r = share_token_make(keyring_cred_key(kr), KEYS_CRED_KEY_LEN, sh, out);
        keyring_free(kr);
        return r;
}

static json_t *share_json(struct api *a, const struct store_share *sh)
{
        char tok[SHARE_TOKEN_LEN + 1], exp[32], created[32];
        if (token_of(a, sh, tok) < 0)
                return NULL;
        format_rfc3339(sh->expires_at, exp);
        format_rfc3339(sh->created_at, created);
        char *path_url = NULL, *host_url = NULL;
        const char *base = a->cfg.url ? a->cfg.url : "";
        if (asprintf(&path_url, "%s/v1/preview/%s/", base, tok) < 0)
                return NULL;
        const char *dom = a->cfg.preview_domain;
        if (dom && *dom &&
            asprintf(&host_url, "%s://%u-%s.%s/", strncasecmp(base, "https:", 6) ? "http" : "https",
                     sh->port, tok, dom) < 0) {
                free(path_url);
                return NULL;
        }
        json_t *j = json_pack("{s:s, s:i, s:s, s:s, s:s*, s:s, s:s, s:s, s:b}", "id", sh->id,
                              "port", (json_int_t)sh->port, "url", host_url ? host_url : path_url,
                              "pathUrl", path_url, "hostUrl", host_url, "token", tok, "expiresAt",
                              exp, "createdAt", created, "public", sh->public);
        free(path_url);
        free(host_url);
        return j;
}

static int share_options(struct api_req *req, int64_t *ttl_ms, bool *public, struct api_resp *resp)
{
        *ttl_ms = SHARE_TTL_DEFAULT_MS;
        *public = false;
        if (req->body.len == 0)
                return 0;
        json_t *j = dataplane_parse_body(req, resp);
        if (!j)
                return -EINVAL;
        json_t *ttl = json_object_get(j, "ttl");
        json_t *pub = json_object_get(j, "public");
        int r = 0;
        if (ttl && json_is_integer(ttl) && json_integer_value(ttl) > 0 &&
            json_integer_value(ttl) <= SHARE_TTL_MAX_MS / 1000)
                *ttl_ms = json_integer_value(ttl) * 1000;
        else if (ttl &&
                 (!json_is_string(ttl) || parse_duration_ms(json_string_value(ttl), ttl_ms) < 0 ||
                  *ttl_ms < 1000 || *ttl_ms > SHARE_TTL_MAX_MS))
                r = -EINVAL;
        if (pub && !json_is_boolean(pub))
                r = -EINVAL;
        *public = pub && json_is_true(pub);
        json_decref(j);
        if (r < 0)
                api_error(resp, 400, "invalid_argument",
                          "ttl: a duration (\"30s\", \"15m\", \"1h\", \"7d\") or seconds, 1 s to "
                          "30 d; public: a boolean");
        return r;
}

void ports_share_create(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        uint16_t port = ports_parse(c->port);
        if (!port) {
                api_error(resp, 400, "invalid_argument", "bad port '%.16s' (1..65535)", c->port);
                return;
        }
        struct store_share sh = {.port = port, .created_at = now_ms()};
        int64_t ttl_ms;
        if (share_options(c->req, &ttl_ms, &sh.public, resp) < 0)
                return;
        sh.expires_at = sh.created_at + ttl_ms;
        unsigned char rnd[SHARE_ID_HEX / 2];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                api_error(resp, 500, "internal", "no randomness for a share id");
                return;
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(sh.id + 2 * i, 3, "%02x", rnd[i]);
        snprintf(sh.deployment, sizeof(sh.deployment), "%s", mgr_sandbox_deployment(c->sb));
        snprintf(sh.name, sizeof(sh.name), "%s", c->name);
        sh.sandbox_id = mgr_sandbox_id(c->sb);
        struct sbx_error err = {0};
        struct store *st = mgr_store(a->mgr);
        struct store_share *seen = calloc(SHARES_MAX, sizeof(*seen));
        size_t n = 0;
        int r = seen ? store_share_list(st, sh.deployment, sh.name, seen, SHARES_MAX, &n, &err)
                     : sbx_error_set(&err, ENOMEM, "out of memory");
        free(seen);
        if (r >= 0 && n == SHARES_MAX) {
                api_error(resp, 402, "cap_reached",
                          "sandbox '%s' has %d shares already; revoke one", c->name, SHARES_MAX);
                return;
        }
        if (r >= 0)
                r = store_share_put(st, &sh, &err);
        if (r < 0) {
                log_error("share %s/%s: %s", sh.deployment, sh.name, err.msg);
                api_error(resp, 500, "internal", "store: %s", err.msg);
                return;
        }
        json_t *j = share_json(a, &sh);
        if (!j) {
                api_error(resp, 500, "internal", "out of memory");
                return;
        }
        api_json(resp, 201, j);
}

void ports_share_list(struct api_call *c, struct api_resp *resp)
{
        struct store_share *v = calloc(SHARES_MAX, sizeof(*v));
        json_t *arr = json_array();
        struct sbx_error err = {0};
        size_t n = 0;
        if (!v || !arr) {
                free(v);
                json_decref(arr);
                api_error(resp, 500, "internal", "out of memory");
                return;
        }
        int r = store_share_list(mgr_store(c->a->mgr), mgr_sandbox_deployment(c->sb), c->name, v,
                                 SHARES_MAX, &n, &err);
        int64_t now = now_ms();
        uint64_t id = mgr_sandbox_id(c->sb);
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (v[i].expires_at > now && v[i].sandbox_id == id)
                        json_array_append_new(arr, share_json(c->a, &v[i]));
        free(v);
        if (r < 0) {
                json_decref(arr);
                api_error(resp, 500, "internal", "store: %s", err.msg);
                return;
        }
        api_json(resp, 200, json_pack("{s:o}", "shares", arr));
}

void ports_share_delete(struct api_call *c, struct api_resp *resp)
{
        const char *id = strrchr(c->req->path, '/');
        id = id ? id + 1 : "";
        struct sbx_error err = {0};
        int r = strlen(id) == SHARE_ID_HEX
                    ? store_share_delete(mgr_store(c->a->mgr), id, mgr_sandbox_deployment(c->sb),
                                         c->name, &err)
                    : 0;
        if (r < 0) {
                api_error(resp, 500, "internal", "store: %s", err.msg);
                return;
        }
        if (r == 0) {
                api_error(resp, 404, "share_not_found", "no such share of sandbox '%s'", c->name);
                return;
        }
        api_no_content(resp);
}

/* ---- viewers ---- */

/* The share of tok, checked, its viewer authorized and its sandbox
 * entered: true with *ret_sb and *ret_sh, else false with resp set. */
static bool share_enter(struct api_call *c, const char *tok, size_t len, struct store_share *ret_sh,
                        struct sandbox **ret_sb, struct api_resp *resp)
{
        char id[SHARE_ID_HEX + 1];
        struct sbx_error err = {0};
        int r = share_token_id(tok, len, id) < 0
                    ? 0
                    : store_share_get(mgr_store(c->a->mgr), id, ret_sh, &err);
        bool valid = false;
        if (r > 0) {
                struct keyring *kr = api_keys(c->a);
                valid =
                    share_token_valid(keyring_cred_key(kr), KEYS_CRED_KEY_LEN, ret_sh, tok, len);
                keyring_free(kr);
        }
        if (r < 0) {
                api_error(resp, 500, "internal", "store: %s", err.msg);
                return false;
        }
        if (!valid) {
                api_error(resp, 404, "share_not_found", "no such share (revoked, or never made)");
                return false;
        }
        if (ret_sh->expires_at <= now_ms()) {
                api_error(resp, 401, "share_expired", "this share has expired");
                return false;
        }
        if (!api_auth_share_viewer(c, ret_sh->deployment, ret_sh->public, resp))
                return false;
        r = mgr_enter(c->a->mgr, ret_sh->deployment, ret_sh->name, ret_sh->sandbox_id, ret_sb,
                      &err);
        if (r == -ENOENT) {
                api_error(resp, 404, "share_not_found",
                          "the sandbox of this share no longer exists");
                return false;
        }
        if (r < 0) {
                api_error_errno(resp, API_ERR_ENTER, r, &err);
                return false;
        }
        return true;
}

/* Proxy for a share: rest is the raw target after the share's prefix. */
static void preview_open(struct api_call *c, const char *tok, size_t len, const char *rest,
                         const char *prefix, uint16_t want_port, struct api_resp *resp)
{
        struct store_share sh;
        struct sandbox *sb = NULL;
        if (!share_enter(c, tok, len, &sh, &sb, resp))
                return;
        if (want_port && want_port != sh.port) {
                mgr_leave(c->a->mgr, sb);
                api_error(resp, 404, "share_not_found", "no such share (revoked, or never made)");
                return;
        }
        ports_open(c, sb, sh.port, rest, prefix, !sh.public, resp);
}

void ports_preview(struct api_call *c, struct api_resp *resp)
{
        /* /v1/preview/{token}: three segments before the target. */
        const char *raw = c->req->raw_uri;
        const char *rest = httpmsg_uri_rest(raw, 3);
        const char *tok_end = rest;
        const char *tok = httpmsg_uri_rest(raw, 2);
        if (!rest || !tok) {
                api_error(resp, 404, "share_not_found", "no such share (revoked, or never made)");
                return;
        }
        while (*tok == '/')
                tok++;
        if (*rest != '/') {
                ports_redirect_slash(c, rest, resp);
                return;
        }
        char prefix[API_PATH_MAX];
        snprintf(prefix, sizeof(prefix), "%.*s", (int)MIN(rest - raw, API_PATH_MAX - 1), raw);
        preview_open(c, tok, (size_t)(tok_end - tok), rest, prefix, 0, resp);
}

bool ports_preview_host(struct api *a, struct api_req *req)
{
        uint16_t port;
        char tok[SHARE_TOKEN_LEN + 1];
        return a->cfg.preview_domain && *a->cfg.preview_domain &&
               share_host_parse(api_header(req, "Host"), a->cfg.preview_domain, &port, tok) == 0;
}

void ports_preview_by_host(struct api_call *c, struct api_resp *resp)
{
        uint16_t port;
        char tok[SHARE_TOKEN_LEN + 1];
        if (share_host_parse(api_header(c->req, "Host"), c->a->cfg.preview_domain, &port, tok) <
            0) {
                api_error(resp, 404, "share_not_found", "no such share (revoked, or never made)");
                return;
        }
        const char *rest = c->req->raw_uri[0] == '/' ? c->req->raw_uri : "/";
        preview_open(c, tok, SHARE_TOKEN_LEN, rest, "", port, resp);
}

const struct api_route *ports_preview_route(void)
{
        static const struct api_route route = {NULL, "",           API_AUTH_NONE,
                                               true, API_CAP_FILE, ports_preview_by_host};
        return &route;
}
