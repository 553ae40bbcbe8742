/* SPDX-License-Identifier: MIT */
/* sbx attach NAME [--class C] [--network N] [--image I] */
#include "sbx.h"

static const char usage[] =
    "usage: sbx attach NAME [--class CLASS] [--network nat|none] [--image IMAGE] [--json]\n"
    "Creates the sandbox on first use, resumes a stopped one, and prints it.\n";

int cmd_attach(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_attach_options o = {0};
        const struct sbx_opt opts[] = {{"class", 'c', true, &o.sandbox_class},
                                       {"network", 'n', true, &o.network},
                                       {"image", 'i', true, &o.image},
                                       {0}};
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, opts, usage, 1, 1, "expected NAME", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        struct sbx_sandbox s = {0};
        struct sbx_err err = {0};
        r = sbx_attach(c, pos.argv[0], &o, &s, &err);
        if (r < 0)
                return sbx_fail(ctx, pos.argv[0], r, &err);
        sbx_print_sandboxes(ctx, &s, 1);
        sbx_sandbox_clear(&s);
        return 0;
}
