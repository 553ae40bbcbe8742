/* SPDX-License-Identifier: MIT */
/* GET /metrics in the Prometheus text format. Counters only: no secret,
 * no sandbox name, no token ever appears here. */
#pragma once

#include "api-internal.h"

void metrics_render(struct api *a, struct api_resp *resp);
