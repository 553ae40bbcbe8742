/* SPDX-License-Identifier: MIT */
/* sbx ls: every sandbox of the token's deployment. */
#include "sbx.h"

static const char usage[] = "usage: sbx ls [--json]\n"
                            "Lists the sandboxes of the token's deployment.\n";

int cmd_ls(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 0, 0, "takes no arguments", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        struct sbx_sandbox_list l = {0};
        struct sbx_err err = {0};
        r = sbx_list(c, &l, &err);
        if (r < 0)
                return sbx_fail(ctx, NULL, r, &err);
        sbx_print_sandboxes(ctx, l.items, l.n);
        sbx_sandbox_list_clear(&l);
        return 0;
}
