/* SPDX-License-Identifier: MIT */
/* libFuzzer target for sandbox-init's decoding of a request (request.h):
 * the input is a request payload (TLV fields, proto.h). Beyond not
 * crashing, what is decoded must keep the promises the handlers rely on:
 * argv and env NULL-terminated and within their caps, the environment
 * built from it made of unique KEY=VALUE entries, the working directory
 * absolute. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/init/init.h"
#include "src/init/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_env(char **env)
{
        for (size_t i = 0; env[i]; i++) {
                const char *eq = strchr(env[i], '=');
                if (!eq || eq == env[i])
                        abort();
                for (size_t j = 0; j < i; j++)
                        if (!strncmp(env[i], env[j], (size_t)(eq - env[i]) + 1))
                                abort(); /* a key twice */
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > AGENT_MAX_PAYLOAD)
                return 0;
        struct req rq = {0};
        int r = req_parse(data, (uint32_t)size, &rq);
        if (r != 0 && r != -EPROTO && r != -EINVAL && r != -ENOMEM)
                abort();
        if (r == -EINVAL && !rq.msg[0])
                abort(); /* every refusal says why */
        if (r == 0) {
                if (rq.argc > AGENT_MAX_ARGV || rq.envc > AGENT_MAX_ENV ||
                    rq.argv_bytes > INIT_ARGV_MAX_BYTES || (rq.argc && rq.argv[rq.argc]) ||
                    (rq.envc && rq.env[rq.envc]))
                        abort();
                char **env = NULL;
                if (req_env(&rq, &env) == 0) {
                        check_env(env);
                        req_env_free(env);
                }
                char *cwd = NULL;
                if (req_cwd(&rq, &cwd) == 0) {
                        if (cwd[0] != '/')
                                abort();
                        free(cwd);
                }
        }
        req_free(&rq);
        return 0;
}
