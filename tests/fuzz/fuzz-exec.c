/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the exec/spawn request parser (src/api/command.h):
 * the input is a request body. A body refused is answered 400, 413 or 503
 * with an error object. A body taken must survive the trip the daemon
 * makes with it: encoded into an agent request (agent_put_cmd) and decoded
 * by sandbox-init (req_parse), it must arrive as exactly the argv, env and
 * cwd that were parsed, and within the API's caps. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/api/command.h"
#include "src/init/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(struct api_resp *resp)
{
        if (resp->status != 400 && resp->status != 413 && resp->status != 503)
                abort();
        json_error_t e;
        json_t *j = json_loadb(resp->body.data, resp->body.len, 0, &e);
        if (!json_is_string(json_object_get(json_object_get(j, "error"), "code")))
                abort();
        json_decref(j);
}

static bool same(const char *const *a, char **b, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(a[i], b[i]))
                        return false;
        return true;
}

static void check_trip(const struct agent_cmd *cmd)
{
        size_t bytes = 0;
        for (size_t i = 0; i < cmd->argc; i++)
                bytes += strlen(cmd->argv[i]) + 1;
        for (size_t i = 0; i < cmd->envc; i++) {
                const char *eq = strchr(cmd->env[i], '=');
                if (!eq || eq == cmd->env[i])
                        abort();
                bytes += strlen(cmd->env[i]) + 1;
        }
        if (cmd->argc < 1 || cmd->argc > AGENT_MAX_ARGV || cmd->envc > AGENT_MAX_ENV ||
            bytes > API_CMD_MAX_BYTES || cmd->argv[cmd->argc])
                abort();

        struct agent_msg m;
        agent_msg_init(&m, AGENT_REQ_EXEC);
        if (agent_put_cmd(&m, cmd) < 0)
                abort(); /* within the API's caps, it always fits a frame */
        struct req rq = {0};
        if (req_parse((const uint8_t *)m.payload.data, (uint32_t)m.payload.len, &rq) != 0 ||
            rq.argc != cmd->argc || rq.envc != cmd->envc || !same(cmd->argv, rq.argv, rq.argc) ||
            !same(cmd->env, rq.env, rq.envc) || !cmd->cwd != !rq.cwd ||
            (cmd->cwd && strcmp(cmd->cwd, rq.cwd)))
                abort();
        req_free(&rq);
        agent_msg_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t e;
        json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &e);
        if (!json_is_object(body)) {
                json_decref(body);
                return 0;
        }
        struct api_resp resp = {.body_fd = -1};
        buf_init(&resp.body, 0);
        struct api_cmd h;
        if (api_cmd_parse(body, &h, &resp) == 0)
                check_trip(&h.cmd);
        else
                check_refusal(&resp);
        api_cmd_free(&h);
        buf_free(&resp.body);
        json_decref(body);
        return 0;
}
