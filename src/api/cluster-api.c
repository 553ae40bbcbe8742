/* SPDX-License-Identifier: MIT */
/* The control plane in cluster mode (cluster/cluster.h): each handler of
 * control.c asks here first where the sandbox lives. Without a cluster
 * every function here lets the local path run untouched. */
#include "cluster-api.h"

#include <string.h>

#include "../common/log.h"
#include "api-internal.h"
#include "errors.h"

static struct cluster *cluster_of(struct api_call *c)
{
        return c->a->cfg.cluster;
}

/* The other host's answer, as it came. */
static void relay(struct api_resp *resp, long status, const char *body, size_t len)
{
        resp->status = (unsigned)status;
        /* An answer without content (a 204) has no type either. */
        resp->content_type = len ? "application/json" : NULL;
        resp->body.len = 0;
        if (len && buf_append(&resp->body, body, len) < 0)
                api_error(resp, 500, "internal", "out of memory");
}

static bool forwarded(struct api_call *c)
{
        return api_header(c->req, CLUSTER_FORWARD_HEADER) != NULL;
}

/* Send the call to the host at url; false: answered. *relayed: with that
 * host's own answer. */
static bool forward_to(struct api_call *c, const char *url, struct api_resp *resp, bool *relayed)
{
        *relayed = false;
        if (forwarded(c)) {
                /* The placement moved between the two hosts' reads: one hop
                 * only, the caller tries again. */
                api_error(resp, 503, "unavailable", "sandbox '%s' is moving; try again", c->name);
                return false;
        }
        char target[PLACE_URL_MAX + API_PATH_MAX];
        if (snprintf(target, sizeof(target), "%s%s", url, c->req->path) >= (int)sizeof(target)) {
                api_error(resp, 500, "internal", "the owner's URL is too long");
                return false;
        }
        struct sbx_error err = {0};
        long status = 0;
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        int r = cluster_forward(cluster_of(c), c->req->method, target,
                                api_header(c->req, "Authorization"), c->req->body.data,
                                c->req->body.len, &status, &body, &len, &err);
        if (r < 0) {
                log_warn("cluster: %s %s: %s", c->req->method, target, err.msg);
                api_error_errno(resp, API_ERR_CONTROL, -EAGAIN, &err);
                return false;
        }
        relay(resp, status, body, len);
        *relayed = true;
        return false;
}

static bool forward(struct api_call *c, const char *url, struct api_resp *resp)
{
        bool relayed;
        return forward_to(c, url, resp, &relayed);
}

/* Add "recreated" to the object answered. */
static void add_recreated(struct api_resp *resp, const char *why)
{
        if (!why || !why[0] || resp->status != 200)
                return;
        json_t *j = json_loadb(resp->body.data, resp->body.len, 0, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return;
        }
        json_object_set_new(j, "recreated", json_string(why));
        api_json(resp, 200, j);
}

static bool route_failed(struct api_resp *resp, int r, struct sbx_error *err)
{
        /* An error etcd reported, or an answer that made no sense: the
         * store is unavailable, not the request wrong. */
        if (r == -EIO || r == -EBADMSG)
                r = -EAGAIN;
        api_error_errno(resp, API_ERR_CONTROL, r, err);
        return false;
}

bool cluster_api_attach(struct api_call *c, const char *sandbox_class, struct cluster_route *route,
                        struct api_resp *resp)
{
        struct cluster *cl = cluster_of(c);
        memset(route, 0, sizeof(*route));
        if (!cl)
                return true;
        struct sbx_error err = {0};
        int64_t limit = mgr_account_limit(c->a->mgr, c->caller.account);
        int r = cluster_route_attach(cl, c->caller.deployment, c->caller.account, c->name,
                                     sandbox_class, limit, route, &err);
        if (r < 0)
                return route_failed(resp, r, &err);
        if (route->where != CLUSTER_THERE)
                return true;
        bool relayed;
        forward_to(c, route->url, resp, &relayed);
        /* Placed on that host just now, and it said the sandbox did not
         * come up: the placement goes (as on this host). Kept when it did
         * not answer: it may have brought it up. */
        if (route->placed && relayed && resp->status >= 400)
                cluster_unplace(cl, c->caller.deployment, c->name, route);
        return false;
}

void cluster_api_attached(struct api_call *c, const struct cluster_route *route, int r,
                          struct api_resp *resp)
{
        struct cluster *cl = cluster_of(c);
        if (!cl)
                return;
        bool fresh = route->where == CLUSTER_NEW || route->where == CLUSTER_REHOMED;
        if (r < 0 && fresh)
                cluster_unplace(cl, c->caller.deployment, c->name, route);
        if (r == 0)
                add_recreated(resp, route->rec.recreated);
}

bool cluster_api_lookup(struct api_call *c, struct cluster_route *route, struct api_resp *resp)
{
        struct cluster *cl = cluster_of(c);
        memset(route, 0, sizeof(*route));
        if (!cl)
                return true;
        struct sbx_error err = {0};
        int r = cluster_route_lookup(cl, c->caller.deployment, c->name, route, &err);
        if (r < 0)
                return route_failed(resp, r, &err);
        if (route->where == CLUSTER_THERE)
                return forward(c, route->url, resp);
        return true;
}

void cluster_api_looked_up(struct api_call *c, const struct cluster_route *route,
                           struct api_resp *resp)
{
        if (cluster_of(c) && route->where == CLUSTER_HERE)
                add_recreated(resp, route->rec.recreated);
}

void cluster_api_deleted(struct api_call *c, const struct cluster_route *route, int r)
{
        struct cluster *cl = cluster_of(c);
        /* Gone here (deleted now, or reclaimed before): its name is free. */
        if (cl && route->where == CLUSTER_HERE && (r == 0 || r == -ENOENT))
                cluster_unplace(cl, c->caller.deployment, c->name, route);
}

bool cluster_api_serving(struct api *a, struct api_resp *resp)
{
        if (!a->cfg.cluster || cluster_serving(a->cfg.cluster))
                return true;
        api_error(resp, 503, "unavailable",
                  "this host has no cluster lease now (or has not reconciled its sandboxes "
                  "under it yet); another host serves the cluster");
        return false;
}
