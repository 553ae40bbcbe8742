/* SPDX-License-Identifier: MIT */
#include "control.h"

#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../runtime/egress.h"
#include "api-internal.h"
#include "cluster-api.h"
#include "cred.h"
#include "errors.h"
#include "network.h"

static json_t *record_json(const struct mgr_record *r)
{
        char created[32], active[32];
        format_rfc3339(r->created_at, created);
        format_rfc3339(r->last_active_at, active);
        json_t *j =
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "name", r->name, "class", r->sandbox_class,
                      "state", sbx_state_name(r->state), "createdAt", created, "lastActiveAt",
                      active, "network", r->network, "image", r->image);
        if (j && r->ceiling_at) {
                char ceil[32];
                format_rfc3339(r->ceiling_at, ceil);
                json_object_set_new(j, "ceilingAt", json_string(ceil));
        }
        return j;
}

/* An optional string member of the attach body; false with resp set when
 * it is there and no string. */
static bool optional_string(json_t *body, const char *key, const char **ret, const char *what,
                            struct api_resp *resp)
{
        json_t *v = json_object_get(body, key);
        if (!v || json_is_null(v))
                return true;
        if (!json_is_string(v)) {
                api_error(resp, 400, "invalid_argument", "%s", what);
                return false;
        }
        *ret = json_string_value(v);
        return true;
}

/* The attach body, optional: {"class"?, "network"?}. False with resp set
 * when it is malformed; *ret_body is to be json_decref'd either way. */
static bool attach_body(struct api_req *req, json_t **ret_body, struct mgr_attach_opts *o,
                        struct api_resp *resp)
{
        *ret_body = NULL;
        if (!req->body.len)
                return true;
        json_error_t jerr;
        json_t *body = json_loadb(req->body.data, req->body.len, JSON_REJECT_DUPLICATES, &jerr);
        *ret_body = body;
        if (!json_is_object(body)) {
                api_error(resp, 400, "invalid_argument", "body: expected a JSON object");
                return false;
        }
        if (!optional_string(body, "class", &o->sandbox_class, "class: expected a string", resp) ||
            !optional_string(body, "network", &o->network, "network: \"nat\" or \"none\"", resp) ||
            !optional_string(body, "image", &o->image, "image: expected an image name", resp))
                return false;
        /* "egress": the new sandbox's egress policy (network.c). */
        json_t *e = json_object_get(body, "egress");
        if (!e || json_is_null(e))
                return true;
        struct egress_policy *p = malloc(sizeof(*p));
        if (!p) {
                api_error(resp, 503, "unavailable", "out of memory");
                return false;
        }
        o->egress = p;
        return network_policy_parse(e, p, resp);
}

/* The handle of an attached sandbox: its record, endpoint and a fresh
 * credential. */
void control_handle_answer(struct api_call *c, const char *deployment, const char *name,
                           const struct mgr_record *rec, uint64_t id, struct api_resp *resp)
{
        struct api *a = c->a;
        struct sbx_error err = {0};
        int64_t exp = now_ms() + a->cfg.credential_ttl_ms;
        _cleanup_free_ char *cred = NULL;
        struct keyring *kr = api_keys(a);
        int r = cred_mint(kr, deployment, name, id, exp, &cred, &err);
        keyring_free(kr);
        if (r < 0) {
                api_error(resp, 500, "internal", "cannot mint a credential");
                return;
        }
        char expires[32];
        format_rfc3339(exp, expires);
        api_json(resp, 200,
                 json_pack("{s:s,s:s,s:s,s:o,s:{s:o},s:s,s:s,s:s}", "name", rec->name, "class",
                           rec->sandbox_class, "state", sbx_state_name(rec->state), "endpoint",
                           json_sprintf("%s/v1/sandboxes/%s", a->cfg.url, name), "headers",
                           "Authorization", json_sprintf("Bearer %s", cred), "expiresAt", expires,
                           "network", rec->network, "image", rec->image));
}

void control_attach(struct api_call *c, struct api_resp *resp)
{
        struct mgr_attach_opts o = {0}; /* NULL: the defaults */
        json_t *body = NULL;
        if (!attach_body(c->req, &body, &o, resp)) {
                free((void *)o.egress);
                json_decref(body);
                return;
        }
        struct cluster_route route;
        if (!cluster_api_attach(c, o.sandbox_class, &route, resp)) {
                json_decref(body);
                return;
        }
        struct sbx_error err = {0};
        struct mgr_record rec;
        uint64_t id = 0;
        int r = mgr_attach(c->a->mgr, &c->caller, c->name, &o, &id, &rec, &err);
        free((void *)o.egress);
        json_decref(body);
        if (r < 0) {
                if (r == -EHOSTDOWN)
                        log_error("attach %s/%s: %s", c->caller.deployment, c->name, err.msg);
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
        } else {
                control_handle_answer(c, c->caller.deployment, c->name, &rec, id, resp);
        }
        cluster_api_attached(c, &route, r, resp);
}

void control_list(struct api_call *c, struct api_resp *resp)
{
        struct mgr_record *v = NULL;
        size_t n = 0;
        struct sbx_error err = {0};
        int r = mgr_list(c->a->mgr, &c->caller, &v, &n, &err);
        if (r < 0) {
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, record_json(&v[i]));
        free(v);
        json_t *body = json_pack("{s:o}", "sandboxes", arr);
        if (cluster_api_list(c, body, resp))
                api_json(resp, 200, body);
        else
                json_decref(body);
}

void control_get(struct api_call *c, struct api_resp *resp)
{
        struct cluster_route route;
        if (!cluster_api_lookup(c, &route, resp))
                return;
        struct sbx_error err = {0};
        struct mgr_record rec;
        int r = mgr_get(c->a->mgr, &c->caller, c->name, &rec, &err);
        if (r < 0)
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
        else
                api_json(resp, 200, record_json(&rec));
        cluster_api_looked_up(c, &route, resp);
}

void control_delete(struct api_call *c, struct api_resp *resp)
{
        struct cluster_route route;
        if (!cluster_api_lookup(c, &route, resp))
                return;
        struct sbx_error err = {0};
        int r = mgr_delete(c->a->mgr, &c->caller, c->name, &err);
        if (r < 0)
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
        else
                api_no_content(resp);
        cluster_api_deleted(c, &route, r);
}

void control_stop(struct api_call *c, struct api_resp *resp)
{
        struct cluster_route route;
        if (!cluster_api_lookup(c, &route, resp))
                return;
        struct sbx_error err = {0};
        int r = mgr_stop(c->a->mgr, &c->caller, c->name, &err);
        if (r < 0)
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
        else
                api_no_content(resp);
}

/* The images a sandbox can be made from: the server's, the same for every
 * caller (names and sizes, nothing of any sandbox). */
void control_images(struct api_call *c, struct api_resp *resp)
{
        struct rt_image_info *v = NULL;
        size_t n = 0;
        struct sbx_error err = {0};
        if (rt_image_list(mgr_images_dir(c->a->mgr), &v, &n, &err) < 0) {
                api_error(resp, 500, "internal", "cannot list the images");
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
                char built[32];
                format_rfc3339(v[i].built_at_ms, built);
                json_array_append_new(arr, json_pack("{s:s,s:I,s:s,s:s,s:I}", "name", v[i].name,
                                                     "sizeBytes", (json_int_t)v[i].size_bytes,
                                                     "builtAt", built, "source", v[i].source,
                                                     "layers", (json_int_t)v[i].layers));
        }
        free(v);
        api_json(resp, 200, json_pack("{s:o}", "images", arr));
}
