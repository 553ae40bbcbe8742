/* SPDX-License-Identifier: MIT */
/* {endpoint}/ports/{port}/...: HTTP/1.1 (and any Upgrade) proxied to a TCP
 * port on the sandbox's own loopback, reached through its sandbox-init
 * (AGENT_REQ_TCP), never through a port on the host; and the preview
 * shares that let a person reach one port of one sandbox without the
 * credential (/v1/preview/{token}/..., or {port}-{token}.{preview_domain}). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "routes.h"

#define PORTS_HEAD_MAX (64u << 10) /* a response head from the sandbox */
/* Timeouts derive from the port_timeout setting T (default 60 s): the
 * response head within T of the request's end, a body with nothing moving
 * either way for 2 T, an upgraded connection (WebSocket) silent for 10 T. */
#define PORTS_TIMEOUT_DEFAULT_MS 60000

api_handler ports_proxy;
api_handler ports_preview;
api_handler ports_share_create;
api_handler ports_share_list;
api_handler ports_share_delete;
api_handler ports_preview_by_host;

/* Whether req is for a preview host (<port>-<token>.<preview_domain>):
 * then it is routed to ports_preview_by_host whatever its path. */
bool ports_preview_host(struct api *a, struct api_req *req);
/* The route of such requests. */
const struct api_route *ports_preview_route(void);

/* 308 to the raw URI with a '/' put in before rest (a pointer into it):
 * without it a browser resolves the page's relative links against the
 * parent of the port's root. */
void ports_redirect_slash(struct api_call *c, const char *rest, struct api_resp *resp);

/* The port of a path segment: 1..65535 in decimal, else 0. */
uint16_t ports_parse(const char *s);

/* Proxy the request to port of sb (entered: the proxy takes it over, or
 * leaves it when it answers an error). target: the request target to send
 * (a path and query); prefix: what the client's path had before it
 * (X-Forwarded-Prefix, "" for none); strip_auth: the Authorization header
 * carried what authorized the request, and goes no further. */
void ports_open(struct api_call *c, struct sandbox *sb, uint16_t port, const char *target,
                const char *prefix, bool strip_auth, struct api_resp *resp);
