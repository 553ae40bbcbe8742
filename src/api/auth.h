/* SPDX-License-Identifier: MIT */
/* Who is calling: the identity token of the control plane, the data-plane
 * credential of one sandbox, and the per-deployment rate limit taken once
 * either is verified. A failure answers 401 (429 when rate limited, the
 * account check's error for a disabled account) and nothing else runs. */
#pragma once

#include <stdbool.h>

#include "routes.h"

/* Verify the identity token ("Authorization: Bearer <jwt>"), take the
 * deployment's rate limit and check its account; fills c->claims and
 * c->caller. False with resp set on failure. */
bool api_auth_identity(struct api_call *c, struct api_resp *resp);
/* Verify the data-plane credential for sandbox c->name, take the
 * deployment's rate limit and enter the sandbox (c->sb, mgr_leave() it
 * after). False with resp set on failure. */
bool api_auth_credential(struct api_call *c, struct api_resp *resp);
/* A preview share's viewer: the rate limit of the share's deployment, and
 * for a share that is not public an identity token of that deployment.
 * False with resp set on failure. */
bool api_auth_share_viewer(struct api_call *c, const char *deployment, bool public,
                           struct api_resp *resp);
