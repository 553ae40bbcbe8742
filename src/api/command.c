/* SPDX-License-Identifier: MIT */
/* The command of an ExecRequest or a SpawnRequest, from JSON to the
 * agent's struct agent_cmd (see command.h). */
#include "command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A JSON string that can become a C string: no NUL inside. */
static const char *c_string(json_t *v)
{
        if (!json_is_string(v))
                return NULL;
        const char *s = json_string_value(v);
        return strlen(s) == json_string_length(v) ? s : NULL;
}

void api_cmd_free(struct api_cmd *h)
{
        for (size_t i = 0; i < h->envc; i++)
                free(h->env[i]);
}

static int parse_argv(json_t *body, struct api_cmd *h, size_t *total, struct api_resp *resp)
{
        json_t *cmd = json_object_get(body, "command");
        if (!json_is_array(cmd) || json_array_size(cmd) == 0 ||
            json_array_size(cmd) > AGENT_MAX_ARGV) {
                api_error(resp, 400, "invalid_argument",
                          "command: expected a non-empty array of strings");
                return -1;
        }
        size_t i;
        json_t *v;
        json_array_foreach(cmd, i, v)
        {
                const char *s = c_string(v);
                if (!s) {
                        api_error(resp, 400, "invalid_argument",
                                  "command[%zu]: expected a string without NUL bytes", i);
                        return -1;
                }
                *total += strlen(s) + 1;
                h->argv[i] = s;
        }
        h->argv[i] = NULL;
        h->cmd.argv = h->argv;
        h->cmd.argc = i;
        return 0;
}

static int parse_cwd(json_t *body, struct api_cmd *h, struct api_resp *resp)
{
        json_t *cwd = json_object_get(body, "cwd");
        if (!cwd || json_is_null(cwd))
                return 0;
        const char *s = c_string(cwd);
        if (!s || !*s || strlen(s) > 4095) {
                api_error(resp, 400, "invalid_argument", "cwd: expected a path");
                return -1;
        }
        h->cmd.cwd = s;
        return 0;
}

static int parse_env(json_t *body, struct api_cmd *h, size_t *total, struct api_resp *resp)
{
        json_t *env = json_object_get(body, "env");
        if (env && !json_is_null(env) &&
            (!json_is_object(env) || json_object_size(env) > AGENT_MAX_ENV)) {
                api_error(resp, 400, "invalid_argument", "env: expected an object of strings");
                return -1;
        }
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v)
        {
                const char *val = c_string(v);
                if (!*k || strchr(k, '=') || !val) {
                        api_error(resp, 400, "invalid_argument", "env: bad variable '%.64s'", k);
                        return -1;
                }
                char *kv = NULL;
                int n = asprintf(&kv, "%s=%s", k, val);
                if (n < 0) {
                        api_error(resp, 503, "unavailable", "out of memory");
                        return -1;
                }
                *total += (size_t)n + 1;
                h->env[h->envc++] = kv;
        }
        h->env[h->envc] = NULL;
        h->cmd.env = (const char *const *)h->env;
        h->cmd.envc = h->envc;
        return 0;
}

/* An optional boolean member; absent or null is false. */
static int parse_flag(json_t *body, const char *key, bool *ret, struct api_resp *resp)
{
        json_t *v = json_object_get(body, key);
        *ret = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_boolean(v)) {
                api_error(resp, 400, "invalid_argument", "%s: expected a boolean", key);
                return -1;
        }
        *ret = json_is_true(v);
        return 0;
}

static int pty_dim(json_t *obj, const char *key, const char *what, unsigned *ret,
                   struct api_resp *resp)
{
        json_t *v = json_object_get(obj, key);
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > AGENT_PTY_MAX) {
                api_error(resp, 400, "invalid_argument", "%s.%s: expected an integer from 1 to %d",
                          what, key, AGENT_PTY_MAX);
                return -1;
        }
        *ret = (unsigned)json_integer_value(v);
        return 0;
}

int api_pty_size(json_t *v, const char *what, unsigned *ret_cols, unsigned *ret_rows,
                 struct api_resp *resp)
{
        if (!json_is_object(v)) {
                api_error(resp, 400, "invalid_argument", "%s: expected an object {cols, rows}",
                          what);
                return -1;
        }
        if (pty_dim(v, "cols", what, ret_cols, resp) < 0 ||
            pty_dim(v, "rows", what, ret_rows, resp) < 0)
                return -1;
        return 0;
}

int api_spawn_parse(json_t *body, struct api_cmd *h, struct api_resp *resp)
{
        if (parse_flag(body, "stdin", &h->cmd.stdin_pipe, resp) < 0 ||
            parse_flag(body, "lossless", &h->cmd.lossless, resp) < 0)
                return -1;
        json_t *pty = json_object_get(body, "pty");
        if (!pty || json_is_null(pty))
                return 0;
        return api_pty_size(pty, "pty", &h->cmd.pty_cols, &h->cmd.pty_rows, resp);
}

int api_cmd_parse(json_t *body, struct api_cmd *h, struct api_resp *resp)
{
        memset(&h->cmd, 0, sizeof(h->cmd));
        h->envc = 0;
        size_t total = 0;
        if (parse_argv(body, h, &total, resp) < 0 || parse_cwd(body, h, resp) < 0 ||
            parse_env(body, h, &total, resp) < 0)
                return -1;
        if (total > API_CMD_MAX_BYTES) {
                api_error(resp, 413, "too_large", "command and env over %u bytes",
                          API_CMD_MAX_BYTES);
                return -1;
        }
        return 0;
}
