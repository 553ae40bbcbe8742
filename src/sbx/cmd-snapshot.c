/* SPDX-License-Identifier: MIT */
/* sbx snapshot NAME IMAGE */
#include "sbx.h"

static const char usage[] =
    "usage: sbx snapshot NAME IMAGE [--json]\n"
    "Saves the sandbox's files, now, as a new image IMAGE (attach --image IMAGE).\n";

int cmd_snapshot(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 2, 2, "expected NAME IMAGE", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        struct sbx_snapshot_info s = {0};
        struct sbx_err err = {0};
        r = sbx_snapshot(c, pos.argv[0], pos.argv[1], &s, &err);
        if (r < 0)
                return sbx_fail(ctx, pos.argv[0], r, &err);
        if (ctx->json)
                sbx_print_json(json_pack("{s:s,s:I,s:I,s:I,s:I,s:s?}", "image", s.image,
                                         "sizeBytes", (json_int_t)s.size_bytes, "copiedBytes",
                                         (json_int_t)s.copied_bytes, "linkedFiles",
                                         (json_int_t)s.linked_files, "durationMs",
                                         (json_int_t)s.duration_ms, "createdAt", s.created_at));
        else
                printf("%s: %lld bytes (%lld copied, %lld files linked) in %lld ms\n", s.image,
                       (long long)s.size_bytes, (long long)s.copied_bytes,
                       (long long)s.linked_files, (long long)s.duration_ms);
        sbx_snapshot_info_clear(&s);
        return 0;
}
