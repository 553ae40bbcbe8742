/* SPDX-License-Identifier: MIT */
/* The HTTP API: the server (http.c), the route table (routes.c), who is
 * calling (auth.c), the handlers (control.c, dataplane.c, files.c), the
 * response bodies (respond.c) and the one errno-to-HTTP table (errors.h).
 *
 * Built by api_new from its configuration, the manager and the keys, then
 * started, drained, stopped and freed by the daemon's composition root
 * (cmd-serve.c). struct api is the API's own (api-internal.h). */
#pragma once

#include <stdint.h>

#include "../common/util.h"
#include "keys.h"

struct api;
struct manager;
struct cluster;

/* The strings and keys_ext are referenced, not copied: they outlive the api. */
struct api_config {
        const char *listen;         /* ADDR:PORT */
        const char *url;            /* public base URL (iss, endpoints) */
        const char *preview_domain; /* preview share hosts <port>-<token>.<it>; NULL none */
        const char *state_dir;      /* where the key files are */
        /* External issuers, loaded again with the own keys on SIGHUP. NULL = none. */
        const struct keys_external_config *keys_ext;
        int64_t credential_ttl_ms;
        int64_t token_leeway_ms;
        int64_t max_body_bytes;
        int64_t max_file_bytes;
        int64_t max_connections;
        int64_t max_connections_per_ip;  /* 0 = a quarter of max_connections */
        int64_t request_head_timeout_ms; /* 0 = none */
        int64_t port_timeout_ms;         /* the port proxy's answer wait; 0 = 60 s */
        int64_t rate_limit;              /* requests/s per deployment; 0 = off */
        int64_t rate_burst;              /* 0 = 2 x rate_limit */
        /* Cluster mode (cluster/cluster.h); NULL = one host. */
        struct cluster *cluster;
        const char *issuer; /* identity tokens' iss; NULL = url */
};

/* A new API on mgr with keys (owned by the api on success). -EINVAL for
 * a bad rate limit, -ENOMEM. Nothing listens before api_start. */
int api_new(const struct api_config *cfg, struct manager *mgr, struct keyring *keys,
            struct api **ret, struct sbx_error *err);
/* Stop it if it runs, then free it and its keys. NULL is allowed. */
void api_free(struct api *a);

int api_start(struct api *a, struct sbx_error *err);
/* Stop taking connections, answer 503 to new requests on open ones, and
 * wait up to grace_ms for the requests in flight (an exec, a long poll)
 * to end. Returns how many are left: 0, and api_stop() returns at once. */
int api_drain(struct api *a, int64_t grace_ms);
/* Load the key files again (after `sandboxd key rotate|remove`). */
void api_reload_keys(struct api *a);
void api_stop(struct api *a);
