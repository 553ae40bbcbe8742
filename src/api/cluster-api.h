/* SPDX-License-Identifier: MIT */
/* The control plane's hooks of cluster mode (cluster-api.c). Each is a
 * no-op, answering "go on locally", when the daemon runs on one host. The
 * bool functions return false when they answered (forwarded the call to
 * the sandbox's host, or failed) and true when the local path runs. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "../cluster/cluster.h"
#include "routes.h"

struct api_resp;

/* Before mgr_attach. */
bool cluster_api_attach(struct api_call *c, const char *sandbox_class, struct cluster_route *route,
                        struct api_resp *resp);
/* After it, with its result: a new placement that did not come up goes;
 * a re-homed one's handle says "recreated". */
void cluster_api_attached(struct api_call *c, const struct cluster_route *route, int r,
                          struct api_resp *resp);
/* Before a get, stop or delete; cluster_api_looked_up after a get. */
bool cluster_api_lookup(struct api_call *c, struct cluster_route *route, struct api_resp *resp);
void cluster_api_looked_up(struct api_call *c, const struct cluster_route *route,
                           struct api_resp *resp);
/* After a local delete with its result. */
void cluster_api_deleted(struct api_call *c, const struct cluster_route *route, int r);
/* A list's body ({"sandboxes": [...]}, this host's records) made the
 * cluster's (cluster-list.c): each says whether it was recreated, the
 * other hosts' records join it, with "lost" and "unreachable"; false
 * with resp set when the store cannot be read. */
bool cluster_api_list(struct api_call *c, json_t *body, struct api_resp *resp);
/* Before every authenticated call, control and data plane: 503 while
 * this host's lease is in doubt, and until its sandboxes are reconciled
 * under a new one (a list would show stale copies, a call would reach
 * one). */
bool cluster_api_serving(struct api *a, struct api_resp *resp);
