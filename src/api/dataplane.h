/* SPDX-License-Identifier: MIT */
/* Data-plane handlers: {endpoint}/exec and /processes[/{id}[/signal|/stdin]].
 * Called with the credential checked and the sandbox entered (c->sb), and
 * {id} valid (agent_proc_id_valid). */
#pragma once

#include "routes.h"

api_handler dataplane_exec;   /* POST   {endpoint}/exec */
api_handler dataplane_spawn;  /* POST   {endpoint}/processes */
api_handler dataplane_list;   /* GET    {endpoint}/processes */
api_handler dataplane_poll;   /* GET    {endpoint}/processes/{id} */
api_handler dataplane_kill;   /* DELETE {endpoint}/processes/{id} */
api_handler dataplane_signal; /* POST   {endpoint}/processes/{id}/signal */
api_handler dataplane_stdin;  /* POST   {endpoint}/processes/{id}/stdin */
/* checkpoint.c */
api_handler dataplane_checkpoint; /* POST {endpoint}/checkpoint */
api_handler dataplane_fork;       /* POST {endpoint}/fork */
