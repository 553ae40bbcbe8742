/* SPDX-License-Identifier: MIT */
/* A sandbox's egress policy and log (network.c): {endpoint}/network and
 * {endpoint}/network/log, and the attach body's "egress". */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "routes.h"

api_handler network_get; /* GET {endpoint}/network */
api_handler network_put; /* PUT {endpoint}/network */
api_handler network_log; /* GET {endpoint}/network/log */

struct egress_policy;
/* {"allow"?: [string], "deny"?: [string]} into ret; false with resp set
 * (400 naming the entry) when it is not one. */
bool network_policy_parse(json_t *j, struct egress_policy *ret, struct api_resp *resp);
