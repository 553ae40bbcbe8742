/* SPDX-License-Identifier: MIT */
/* The list in cluster mode (cluster-api.h, cluster_api_list): this
 * host's own sandboxes of the deployment, and those of every other live
 * host that holds placements of it, asked once each (one hop: the other
 * host answers only its own). Names placed on a host whose lease is gone
 * are listed as lost; a host that does not answer in time, or answers
 * what makes no sense, is named as unreachable. Another host's answer is
 * as hostile as any: bounded in size and time, and only the records it
 * holds by the placements, with the members a record has, pass. */
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "api-internal.h"
#include "cluster-api.h"
#include "errors.h"

#define LIST_PLACEMENTS_MAX 1024 /* the store's bound of one range read */
#define LIST_HOSTS_MAX 64
#define LIST_HOST_MS 3000L  /* each other host */
#define LIST_TOTAL_MS 5000L /* all of them, one after the other */

struct merge {
        struct api_call *c;
        struct cluster *cl;
        char (*names)[SBX_NAME_MAX + 1];
        struct placement_rec *recs;
        size_t n;
        json_t *out; /* the records listed */
        json_t *unreachable, *lost;
        int64_t deadline;
};

static const struct placement_rec *placed(const struct merge *m, const char *name)
{
        for (size_t k = 0; name && k < m->n; k++)
                if (!strcmp(m->names[k], name))
                        return &m->recs[k];
        return NULL;
}

static bool listed(json_t *arr, const char *name)
{
        for (size_t i = 0; i < json_array_size(arr); i++)
                if (!strcmp(json_string_value(json_object_get(json_array_get(arr, i), "name")),
                            name))
                        return true;
        return false;
}

/* This host's records: each says whether it was recreated. */
static void annotate(const struct merge *m)
{
        for (size_t i = 0; i < json_array_size(m->out); i++) {
                json_t *s = json_array_get(m->out, i);
                const struct placement_rec *p =
                    placed(m, json_string_value(json_object_get(s, "name")));
                if (p && p->recreated[0])
                        json_object_set_new(s, "recreated", json_string(p->recreated));
        }
}

/* A record of another host's answer, with only the members a record has,
 * each a string; NULL when it is not one. */
static json_t *record_from(json_t *s)
{
        static const char *const need[] = {"name",         "class",   "state", "createdAt",
                                           "lastActiveAt", "network", "image"};
        static const char *const may[] = {"ceilingAt", "recreated"};
        json_t *r = json_is_object(s) ? json_object() : NULL;
        for (size_t i = 0; r && i < sizeof(need) / sizeof(need[0]); i++) {
                json_t *v = json_object_get(s, need[i]);
                if (!json_is_string(v) || json_string_length(v) > API_PATH_MAX) {
                        json_decref(r);
                        return NULL;
                }
                json_object_set(r, need[i], v);
        }
        for (size_t i = 0; r && i < sizeof(may) / sizeof(may[0]); i++) {
                json_t *v = json_object_get(s, may[i]);
                if (json_is_string(v) && json_string_length(v) <= API_PATH_MAX)
                        json_object_set(r, may[i], v);
        }
        return r;
}

/* The records of host's answer that host holds by the placements; -1
 * when the answer is no list. */
static int take_answer(struct merge *m, const char *host, const char *body, size_t len)
{
        json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        json_t *arr = json_object_get(j, "sandboxes");
        json_t *got = json_is_array(arr) ? json_array() : NULL;
        for (size_t i = 0; got && i < json_array_size(arr); i++) {
                json_t *r = record_from(json_array_get(arr, i));
                const char *nm = json_string_value(json_object_get(r, "name"));
                const struct placement_rec *p = placed(m, nm);
                if (!r) {
                        json_decref(got);
                        got = NULL;
                        break;
                }
                if (p && !strcmp(p->host, host) && !listed(m->out, nm) && !listed(got, nm))
                        json_array_append(got, r);
                json_decref(r);
        }
        json_decref(j);
        if (!got)
                return -1;
        json_array_extend(m->out, got);
        json_decref(got);
        return 0;
}

/* One forwarded list to the live host at url, within what is left of
 * the list's time. */
static int ask(struct merge *m, const char *host, const char *url)
{
        int64_t left = m->deadline - mono_ms();
        char target[PLACE_URL_MAX + 16];
        if (left <= 0 ||
            snprintf(target, sizeof(target), "%s/v1/sandboxes", url) >= (int)sizeof(target))
                return -1;
        struct cluster_call call = {.method = "GET",
                                    .url = target,
                                    .authorization = api_header(m->c->req, "Authorization"),
                                    .timeout_ms = left < LIST_HOST_MS ? (long)left : LIST_HOST_MS};
        struct sbx_error err = {0};
        long status = 0;
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        int r = cluster_call(m->cl, &call, &status, &body, &len, &err);
        if (r == 0 && status == 200)
                r = take_answer(m, host, body, len);
        else if (r == 0)
                r = -1;
        if (r < 0)
                log_warn("cluster: list of %s from %s: %s", m->c->caller.deployment, host,
                         err.msg[0] ? err.msg : "no list answered");
        return r;
}

/* The names placed on host, whose lease is gone: listed as lost. */
static void add_lost(struct merge *m, const char *host)
{
        for (size_t k = 0; k < m->n; k++)
                if (!strcmp(m->recs[k].host, host) && !listed(m->out, m->names[k]))
                        json_array_append_new(
                            m->lost, json_pack("{s:s,s:s,s:s}", "name", m->names[k], "class",
                                               m->recs[k].sandbox_class, "host", host));
}

static void from_host(struct merge *m, const char *host)
{
        char url[PLACE_URL_MAX];
        struct sbx_error err = {0};
        int r = cluster_host_url(m->cl, host, url, sizeof(url), &err);
        if (r == 0)
                add_lost(m, host);
        else if (r < 0 || ask(m, host, url) < 0)
                json_array_append_new(m->unreachable, json_string(host));
}

static bool seen_before(const struct merge *m, size_t k)
{
        for (size_t i = 0; i < k; i++)
                if (!strcmp(m->recs[i].host, m->recs[k].host))
                        return true;
        return false;
}

static void from_others(struct merge *m)
{
        size_t hosts = 0;
        for (size_t k = 0; k < m->n; k++) {
                const char *h = m->recs[k].host;
                if (!strcmp(h, cluster_host_id(m->cl)) || seen_before(m, k))
                        continue;
                if (hosts++ < LIST_HOSTS_MAX)
                        from_host(m, h);
                else
                        json_array_append_new(m->unreachable, json_string(h));
        }
}

static int by_name(const void *a, const void *b)
{
        json_t *const *x = a, *const *y = b;
        return strcmp(json_string_value(json_object_get(*x, "name")),
                      json_string_value(json_object_get(*y, "name")));
}

static void sort_by_name(json_t *arr)
{
        size_t n = json_array_size(arr);
        json_t **v = n ? calloc(n, sizeof(*v)) : NULL;
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                v[i] = json_incref(json_array_get(arr, i));
        qsort(v, n, sizeof(*v), by_name);
        json_array_clear(arr);
        for (size_t i = 0; i < n; i++)
                json_array_append_new(arr, v[i]);
        free(v);
}

bool cluster_api_list(struct api_call *c, json_t *body, struct api_resp *resp)
{
        struct cluster *cl = c->a->cfg.cluster;
        if (!cl)
                return true;
        struct merge m = {.c = c, .cl = cl, .out = json_object_get(body, "sandboxes")};
        m.names = calloc(LIST_PLACEMENTS_MAX, sizeof(*m.names));
        m.recs = calloc(LIST_PLACEMENTS_MAX, sizeof(*m.recs));
        struct sbx_error err = {0};
        int r = m.names && m.recs ? cluster_list(cl, c->caller.deployment, m.names, m.recs,
                                                 LIST_PLACEMENTS_MAX, &m.n, &err)
                                  : sbx_error_set(&err, ENOMEM, "list");
        if (r < 0) {
                api_error_errno(resp, API_ERR_CONTROL, r == -ENOMEM ? r : -EAGAIN, &err);
        } else {
                annotate(&m);
                /* Asked by another host's list: this host's own only. */
                if (!api_header(c->req, CLUSTER_FORWARD_HEADER)) {
                        m.unreachable = json_array();
                        m.lost = json_array();
                        m.deadline = mono_ms() + LIST_TOTAL_MS;
                        from_others(&m);
                        sort_by_name(m.out);
                        json_object_set_new(body, "lost", m.lost);
                        json_object_set_new(body, "unreachable", m.unreachable);
                }
        }
        free(m.names);
        free(m.recs);
        return r == 0;
}
