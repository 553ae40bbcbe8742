/* SPDX-License-Identifier: MIT */
/* The command of an ExecRequest or a SpawnRequest: `command` (a non-empty
 * array of strings), `cwd`, `env` (an object of strings) and, for spawn,
 * `stdin`. Every string must become a C string (no NUL inside), every env
 * name be non-empty without "=", and command plus env stay under
 * API_CMD_MAX_BYTES; otherwise resp gets the 400 (or 413) that says why.
 * Fuzzed: tests/fuzz/fuzz-exec.c. */
#pragma once

#include <jansson.h>

#include "../agent/client.h"
#include "respond.h"

/* The API's own cap on a command and its environment together, below
 * what the agent accepts (AGENT_MAX_PAYLOAD). */
#define API_CMD_MAX_BYTES (256u << 10)

struct api_cmd {
        struct agent_cmd cmd;
        const char *argv[AGENT_MAX_ARGV + 1]; /* borrowed from the JSON body */
        char *env[AGENT_MAX_ENV + 1];         /* "KEY=VALUE", owned */
        size_t envc;
};

/* 0 with h->cmd filled (valid while body lives; free with api_cmd_free,
 * on failure too), or -1 with resp set. */
int api_cmd_parse(json_t *body, struct api_cmd *h, struct api_resp *resp);
/* A SpawnRequest's own members: `stdin`, `lossless`, `pty`. 0 or -1 with
 * resp set. */
int api_spawn_parse(json_t *body, struct api_cmd *h, struct api_resp *resp);
/* A terminal's size {cols, rows}, each 1 to AGENT_PTY_MAX; what names it
 * in the message. 0 or -1 with resp set. */
int api_pty_size(json_t *v, const char *what, unsigned *ret_cols, unsigned *ret_rows,
                 struct api_resp *resp);
void api_cmd_free(struct api_cmd *h);
