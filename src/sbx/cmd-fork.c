/* SPDX-License-Identifier: MIT */
/* sbx fork NAME NEW */
#include "sbx.h"

static const char usage[] =
    "usage: sbx fork NAME NEW [--json]\n"
    "Makes a new sandbox NEW from NAME's state now (its files; under gvisor, its\n"
    "last checkpoint) and prints it.\n";

int cmd_fork(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 2, 2, "expected NAME NEW", &pos);
        if (r >= 0)
                return r;
        struct sbx_sandbox s = {0};
        struct sbx_err err = {0};
        r = sbx_fork(ctx->client, pos.argv[0], pos.argv[1], &s, &err);
        if (r < 0)
                return sbx_fail(ctx, pos.argv[0], r, &err);
        sbx_print_sandboxes(ctx, &s, 1);
        sbx_sandbox_clear(&s);
        return 0;
}
