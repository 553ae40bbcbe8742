/* SPDX-License-Identifier: MIT */
/* sbx stop NAME... */
#include "sbx.h"

static const char usage[] = "usage: sbx stop NAME...\n"
                            "Suspends the sandboxes' compute; the next use resumes them.\n";

int cmd_stop(struct sbx_ctx *ctx, int argc, char **argv)
{
        return sbx_each_name(ctx, argc, argv, usage, sbx_stop);
}
