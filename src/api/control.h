/* SPDX-License-Identifier: MIT */
/* Control-plane handlers: /v1/sandboxes[/{name}[/attach|/stop]]. Called
 * with the identity token verified, the account checked and {name} valid. */
#pragma once

#include "routes.h"

api_handler control_list;   /* GET    /v1/sandboxes */
api_handler control_get;    /* GET    /v1/sandboxes/{name} */
api_handler control_delete; /* DELETE /v1/sandboxes/{name} */
api_handler control_attach; /* POST   /v1/sandboxes/{name}/attach */
api_handler control_stop;   /* POST   /v1/sandboxes/{name}/stop */
api_handler control_images; /* GET    /v1/images */

/* The 200 of an attach: rec's handle (endpoint, a fresh credential for
 * deployment/name/id). A fork answers the same. */
void control_handle_answer(struct api_call *c, const char *deployment, const char *name,
                           const struct mgr_record *rec, uint64_t id, struct api_resp *resp);
