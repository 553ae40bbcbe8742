/* SPDX-License-Identifier: MIT */
/* Data-plane handlers: {endpoint}/exec and /processes[/{id}[/signal|/stdin]].
 * Called with the credential checked and the sandbox entered (c->sb), and
 * {id} valid (agent_proc_id_valid). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "../agent/client.h"
#include "routes.h"

api_handler dataplane_exec;   /* POST   {endpoint}/exec */
api_handler dataplane_spawn;  /* POST   {endpoint}/processes */
api_handler dataplane_list;   /* GET    {endpoint}/processes */
api_handler dataplane_poll;   /* GET    {endpoint}/processes/{id} */
api_handler dataplane_kill;   /* DELETE {endpoint}/processes/{id} */
api_handler dataplane_signal; /* POST   {endpoint}/processes/{id}/signal */
api_handler dataplane_stdin;  /* POST   {endpoint}/processes/{id}/stdin */
/* stream.c */
api_handler dataplane_stream; /* GET    {endpoint}/processes/{id}/stream */
api_handler dataplane_resize; /* POST   {endpoint}/processes/{id}/resize */
/* checkpoint.c */
api_handler dataplane_checkpoint; /* POST {endpoint}/checkpoint */
api_handler dataplane_fork;       /* POST {endpoint}/fork */
api_handler dataplane_snapshot;   /* POST {endpoint}/snapshot */

/* Shared by the data-plane files. */
struct api;
struct sandbox;
/* A process status as the API's ProcessStatus. */
json_t *dataplane_status_json(const struct agent_proc_status *st);
/* An agent call failed: the agent's error, or the sandbox lost meanwhile. */
void dataplane_agent_failure(struct sandbox *sb, int r, const struct sbx_error *err,
                             struct api_resp *resp);
/* r says nothing listens in the sandbox: it was brought up again, try once
 * more. */
bool dataplane_should_retry(struct api *a, struct sandbox *sb, int r);
/* The body as a JSON object, or NULL with resp set (400). */
struct api_req;
json_t *dataplane_parse_body(struct api_req *req, struct api_resp *resp);
/* A query parameter: a decimal integer up to max, 0 when absent; -1 bad. */
int dataplane_query_u64(struct api_req *req, const char *key, uint64_t max, uint64_t *ret);

/* held-call.c: an agent call sent (p), whose answer the request waits
 * for as a hold, without a thread. done builds the answer from the whole
 * answer (r >= 0) or the failure (r < 0, err), with the sandbox still
 * entered. wait_ms bounds the wait (< 0: none); spin first waits briefly
 * on this thread, for a call that is usually answered at once. */
typedef void held_call_done(struct api *a, struct sandbox *sb, struct agent_pending *p, int r,
                            struct sbx_error *err, struct api_resp *resp);
void dataplane_hold_call(struct api_call *c, struct agent_pending *p, int64_t wait_ms, bool spin,
                         held_call_done *done, struct api_resp *resp);
