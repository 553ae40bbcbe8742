/* SPDX-License-Identifier: MIT */
/* sbx logs NAME ID [-f]: what the sandbox holds of a process's output (the
 * newest 1 MiB per stream), or, with -f, the stream of it to its exit. */
#include <unistd.h>

#include "sbx.h"
#include "common/util.h"

static const char usage[] =
    "usage: sbx logs NAME ID [-f]\n"
    "Prints a process's stdout and stderr (to sbx's stdout and stderr).\n"
    "  -f, --follow   stream the output as it is written, until the process exits\n";

/* Poll from the start until a read brings nothing new (a bounded number
 * of reads: a process that writes on and on is for -f). */
static int dump(struct sbx_client *c, const char *name, const char *id, struct sbx_err *err)
{
        uint64_t out = 0, errs = 0;
        for (int reads = 0;; reads++) {
                struct sbx_output o = {0};
                int r = sbx_poll(c, name, id, out, errs, 0, &o, err);
                if (r < 0)
                        return r;
                bool more = o.out_next > out || o.err_next > errs;
                if (o.out_len)
                        r = write_all(STDOUT_FILENO, o.out, o.out_len);
                if (r >= 0 && o.err_len)
                        r = write_all(STDERR_FILENO, o.err, o.err_len);
                out = o.out_next;
                errs = o.err_next;
                sbx_output_clear(&o);
                if (r < 0 || !more || reads >= 64)
                        return r;
        }
}

int cmd_logs(struct sbx_ctx *ctx, int argc, char **argv)
{
        const char *follow = NULL;
        const struct sbx_opt opts[] = {{"follow", 'f', false, &follow}, {0}};
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, opts, usage, 2, 2, "expected NAME ID", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        struct sbx_err err = {0};
        if (follow)
                r = sbx_stream(c, pos.argv[0], pos.argv[1], NULL, sbx_output_to_fd, NULL, NULL,
                               &err);
        else
                r = dump(c, pos.argv[0], pos.argv[1], &err);
        return r < 0 ? sbx_fail(ctx, pos.argv[0], r, &err) : 0;
}
