/* SPDX-License-Identifier: MIT */
/* sbx get NAME */
#include "sbx.h"

static const char usage[] = "usage: sbx get NAME [--json]\n"
                            "Prints the sandbox's record (no credentials).\n";

int cmd_get(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 1, 1, "expected NAME", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        struct sbx_sandbox s = {0};
        struct sbx_err err = {0};
        r = sbx_get(c, pos.argv[0], &s, &err);
        if (r < 0)
                return sbx_fail(ctx, pos.argv[0], r, &err);
        sbx_print_sandboxes(ctx, &s, 1);
        sbx_sandbox_clear(&s);
        return 0;
}
