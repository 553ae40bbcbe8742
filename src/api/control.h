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
