/* SPDX-License-Identifier: MIT */
/* Cluster mode: several hosts as one service, coordinated through the
 * placement store (store/placement.h). Off (no cluster_etcd) the daemon
 * never makes a struct cluster and runs exactly as on one host.
 *
 * Each sandbox name has one owner host, recorded in the store. An attach
 * on any host routes by that record (cluster_route): served here when
 * this host owns the name, forwarded to the owner when another live host
 * does (cluster_forward), placed here when nobody does, and re-homed here
 * when its owner's lease is gone (the handle then says
 * "recreated": "host_lost": the files were on the lost host).
 *
 * A host serves its data plane only while its lease surely lives and it
 * has reconciled its sandboxes with the store since it last got a lease
 * (cluster_serving): a host cut off from etcd stops answering (503) and
 * suspends its sandboxes before another host could take their names; back,
 * it removes every local sandbox whose name another host now owns. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"
#include "../manager/manager.h"
#include "../store/placement.h"

struct cluster;

struct cluster_config {
        struct placement_config store;
        int64_t max_per_deployment; /* 0 = no cap */
};

int cluster_open(const struct cluster_config *cfg, struct manager *m, struct cluster **ret,
                 struct sbx_error *err);
void cluster_close(struct cluster *cl);

/* Whether the data plane may serve: the lease lives and the sandboxes
 * were reconciled under it. */
bool cluster_serving(struct cluster *cl);
const char *cluster_host_id(const struct cluster *cl);

enum cluster_where {
        CLUSTER_HERE,    /* this host owns it: the local path */
        CLUSTER_NEW,     /* placed here just now: the local path, undone on failure */
        CLUSTER_REHOMED, /* its host was lost; placed here anew */
        CLUSTER_THERE,   /* another live host owns it: forward to url */
        CLUSTER_NONE,    /* (lookups only) nobody holds it */
};

struct cluster_route {
        enum cluster_where where;
        char url[PLACE_URL_MAX]; /* CLUSTER_THERE */
        bool placed;             /* CLUSTER_THERE: placed there just now */
        struct placement_rec rec;
};

/* Where an attach of (dep, name) by account goes; places or re-homes it
 * here when nobody live holds it. -EDQUOT over a cap, -EAGAIN when the
 * store cannot be reached or every race was lost. */
int cluster_route_attach(struct cluster *cl, const char *dep, const char *account, const char *name,
                         const char *sandbox_class, int64_t account_limit,
                         struct cluster_route *ret, struct sbx_error *err);
/* Where a get, stop or delete of (dep, name) goes: CLUSTER_HERE,
 * CLUSTER_THERE or CLUSTER_NONE. Never places. */
int cluster_route_lookup(struct cluster *cl, const char *dep, const char *name,
                         struct cluster_route *ret, struct sbx_error *err);
/* The sandbox of a route of this host was deleted, or a new one failed to
 * come up: its placement goes. */
void cluster_unplace(struct cluster *cl, const char *dep, const char *name,
                     const struct cluster_route *route);
/* The placements of dep (names and records, at most max), for list. */
int cluster_list(struct cluster *cl, const char *dep, char (*names)[SBX_NAME_MAX + 1],
                 struct placement_rec *recs, size_t max, size_t *ret_n, struct sbx_error *err);

/* A request relayed to another host (cluster/forward.c): method, url,
 * the caller's Authorization header and body as they came. The answer's
 * status and body (a JSON object of at most CLUSTER_FORWARD_MAX bytes)
 * into ret_status and ret_body (malloc'd). -EAGAIN when the host does not
 * answer in time, -EBADMSG when its answer is not JSON. */
#define CLUSTER_FORWARD_MAX (256 * 1024)
#define CLUSTER_FORWARD_HEADER "X-Sandboxd-Forwarded"
int cluster_forward(struct cluster *cl, const char *method, const char *url,
                    const char *authorization, const void *body, size_t body_len, long *ret_status,
                    char **ret_body, size_t *ret_len, struct sbx_error *err);

/* The same with a timeout of the caller's (ms, the whole call). */
struct cluster_call {
        const char *method, *url, *authorization;
        const void *body;
        size_t body_len;
        long timeout_ms;
};
int cluster_call(struct cluster *cl, const struct cluster_call *call, long *ret_status,
                 char **ret_body, size_t *ret_len, struct sbx_error *err);
/* The live host id (its data-plane URL into url): 1, 0 when its lease is
 * gone. */
int cluster_host_url(struct cluster *cl, const char *id, char *url, size_t size,
                     struct sbx_error *err);

/* What cluster_forward and the store have done: for the metrics and the
 * benchmark. */
struct cluster_stats {
        uint64_t store_calls, store_bytes, forwarded, placed, rehomed, removed_stale;
};
void cluster_stats(struct cluster *cl, struct cluster_stats *ret);
