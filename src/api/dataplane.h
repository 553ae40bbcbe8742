/* SPDX-License-Identifier: MIT */
/* Data-plane handlers: {endpoint}/exec, /processes..., /files...
 * Called with the sandbox entered (running, credential checked). */
#pragma once

#include "api.h"

/* Whether {endpoint}/<seg...> names a data-plane route (before auth, so an
 * unknown path is a 404 whatever the credential). */
bool dataplane_route_exists(const char *const *seg, size_t n);
void dataplane_handle(struct api *a, struct api_req *req, struct sandbox *sb,
                      const char *const *seg, size_t n, struct api_resp *resp);
