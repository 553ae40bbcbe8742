/* SPDX-License-Identifier: MIT */
/* sbx rm NAME... */
#include "sbx.h"

static const char usage[] = "usage: sbx rm NAME...\n"
                            "Deletes the sandboxes: every process ends, their files are dropped.\n";

int cmd_rm(struct sbx_ctx *ctx, int argc, char **argv)
{
        return sbx_each_name(ctx, argc, argv, usage, sbx_delete);
}
