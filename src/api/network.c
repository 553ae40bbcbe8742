/* SPDX-License-Identifier: MIT */
/* {endpoint}/network: a sandbox's egress policy (runtime/egress.h), read
 * and replaced by its owner, and its egress log. */
#include "network.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/egress-nft.h"
#include "api-internal.h"
#include "dataplane.h"
#include "errors.h"

/* One list of the body: absent or null is none, else an array of at most
 * EGRESS_MAX_ENTRIES strings. */
static bool parse_list(json_t *j, const char *key, bool allow, struct egress_policy *p,
                       struct api_resp *resp)
{
        json_t *v = json_object_get(j, key);
        if (!v || json_is_null(v))
                return true;
        if (!json_is_array(v)) {
                api_error(resp, 400, "invalid_argument", "egress.%s: expected an array of strings",
                          key);
                return false;
        }
        if (json_array_size(v) > EGRESS_MAX_ENTRIES) {
                api_error(resp, 400, "invalid_argument", "egress.%s: more than %d entries", key,
                          EGRESS_MAX_ENTRIES);
                return false;
        }
        if (allow)
                p->has_allow = true; /* even empty: nothing is allowed */
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
                struct sbx_error err = {0};
                if (!json_is_string(e)) {
                        api_error(resp, 400, "invalid_argument",
                                  "egress.%s[%zu]: expected a string", key, i);
                        return false;
                }
                if (egress_policy_add(p, allow, json_string_value(e), &err) < 0) {
                        api_error(resp, 400, "invalid_argument", "egress.%s[%zu]: %s", key, i,
                                  err.msg);
                        return false;
                }
        }
        return true;
}

bool network_policy_parse(json_t *j, struct egress_policy *ret, struct api_resp *resp)
{
        egress_policy_init(ret);
        if (!json_is_object(j)) {
                api_error(resp, 400, "invalid_argument",
                          "egress: expected {\"allow\": [...], \"deny\": [...]}");
                return false;
        }
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v)
        {
                if (strcmp(key, "allow") && strcmp(key, "deny")) {
                        api_error(resp, 400, "invalid_argument",
                                  "egress: unknown member `%.64s` (allow, deny)", key);
                        return false;
                }
        }
        return parse_list(j, "allow", true, ret, resp) && parse_list(j, "deny", false, ret, resp);
}

static json_t *list_json(const struct egress_entry *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) {
                char e[EGRESS_NAME_MAX + 8];
                egress_entry_format(&v[i], e, sizeof(e));
                json_array_append_new(a, json_string(e));
        }
        return a;
}

static json_t *policy_json(const struct egress_policy *p)
{
        json_t *j = json_object();
        json_object_set_new(j, "allow",
                            p->has_allow ? list_json(p->allow, p->n_allow) : json_null());
        json_object_set_new(j, "deny", list_json(p->deny, p->n_deny));
        return json_pack("{s:s,s:o}", "mode", "nat", "egress", j);
}

static void answer_policy(struct api_call *c, struct api_resp *resp)
{
        struct egress_policy *p = malloc(sizeof(*p));
        struct sbx_error err = {0};
        int r = p ? mgr_network_get(c->a->mgr, c->sb, p, &err) : -ENOMEM;
        if (r < 0)
                api_error(resp, 503, "unavailable", "cannot read the egress policy");
        else
                api_json(resp, 200, policy_json(p));
        free(p);
}

void network_get(struct api_call *c, struct api_resp *resp)
{
        answer_policy(c, resp);
}

void network_put(struct api_call *c, struct api_resp *resp)
{
        json_t *body = dataplane_parse_body(c->req, resp);
        if (!body)
                return;
        struct egress_policy *p = malloc(sizeof(*p));
        if (!p) {
                json_decref(body);
                api_error(resp, 503, "unavailable", "out of memory");
                return;
        }
        /* The policy itself, or {"egress": policy} as GET answers it. */
        json_t *e = json_object_get(body, "egress");
        bool ok = network_policy_parse(e ? e : body, p, resp);
        json_decref(body);
        struct sbx_error err = {0};
        int r = ok ? mgr_network_set(c->a->mgr, c->sb, p, &err) : 0;
        free(p);
        if (!ok)
                return;
        if (r < 0) {
                api_error_errno(resp, API_ERR_CONTROL, r, &err);
                return;
        }
        answer_policy(c, resp);
}

static const char *proto_name(uint8_t p)
{
        switch (p) {
        case IPPROTO_TCP:
                return "tcp";
        case IPPROTO_UDP:
                return "udp";
        case IPPROTO_ICMP:
                return "icmp";
        default:
                return "other";
        }
}

static json_t *ip_json(uint32_t a)
{
        struct in_addr in = {.s_addr = htonl(a)};
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &in, ip, sizeof(ip));
        return json_string(ip);
}

static json_t *event_json(const struct egress_event *e)
{
        char at[32];
        format_rfc3339(e->at_ms, at);
        if (e->type == EGRESS_EV_CONN)
                return json_pack("{s:s,s:s,s:o,s:i,s:s,s:b}", "type", "connection", "time", at,
                                 "address", ip_json(e->addr), "port", (int)e->port, "protocol",
                                 proto_name(e->proto), "allowed", 0);
        json_t *addrs = json_array();
        for (size_t i = 0; i < e->n_addrs; i++)
                json_array_append_new(addrs, ip_json(e->addrs[i]));
        return json_pack("{s:s,s:s,s:s,s:o,s:b}", "type", "dns", "time", at, "name", e->name,
                         "addresses", addrs, "allowed", e->allowed);
}

void network_log(struct api_call *c, struct api_resp *resp)
{
        struct egress_event *v = calloc(EGRESS_LOG_MAX, sizeof(*v));
        size_t n = 0;
        int r = v ? mgr_network_log(c->a->mgr, c->sb, v, EGRESS_LOG_MAX, &n) : -ENOMEM;
        if (r < 0) {
                free(v);
                api_error(resp, 503, "unavailable", "cannot read the egress log");
                return;
        }
        json_t *events = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(events, event_json(&v[i]));
        free(v);
        api_json(resp, 200, json_pack("{s:o}", "events", events));
}
