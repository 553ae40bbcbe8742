/* SPDX-License-Identifier: MIT */
/* sbx kill NAME ID [-s SIG] */
#include "sbx.h"

static const char usage[] =
    "usage: sbx kill NAME ID... [-s SIGNAL]\n"
    "Without -s: stops each process if it runs, then forgets it. With -s: sends\n"
    "SIGNAL (TERM, KILL, INT, HUP, QUIT, USR1, USR2) to its process group.\n";

int cmd_kill(struct sbx_ctx *ctx, int argc, char **argv)
{
        const char *sig = NULL;
        const struct sbx_opt opts[] = {{"signal", 's', true, &sig}, {0}};
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, opts, usage, 2, -1, "expected NAME ID...", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        int rc = 0;
        for (int i = 1; i < pos.argc; i++) {
                struct sbx_err err = {0};
                r = sig ? sbx_signal(c, pos.argv[0], pos.argv[i], sig, &err)
                        : sbx_kill(c, pos.argv[0], pos.argv[i], &err);
                if (r < 0)
                        rc = sbx_fail(ctx, pos.argv[i], r, &err);
        }
        return rc;
}
