/* SPDX-License-Identifier: MIT */
/* sbx images */
#include <inttypes.h>

#include "sbx.h"

static const char usage[] = "usage: sbx images [--json]\n"
                            "Lists the images a sandbox can be made from (attach --image).\n";

static void print_images(const struct sbx_ctx *ctx, const struct sbx_image_list *l)
{
        if (ctx->json) {
                json_t *a = json_array();
                for (size_t i = 0; i < l->n; i++)
                        json_array_append_new(
                            a, json_pack("{s:s,s:I,s:s?,s:s?,s:I}", "name", l->items[i].name,
                                         "sizeBytes", (json_int_t)l->items[i].size_bytes, "builtAt",
                                         l->items[i].built_at, "source", l->items[i].source,
                                         "layers", (json_int_t)l->items[i].layers));
                sbx_print_json(a);
                return;
        }
        struct sbx_table t;
        sbx_table_init(&t, 4);
        sbx_table_add(&t, "NAME", "SIZE", "SOURCE", "BUILT");
        for (size_t i = 0; i < l->n; i++) {
                char size[32];
                snprintf(size, sizeof(size), "%.1f MiB",
                         (double)l->items[i].size_bytes / (1024.0 * 1024.0));
                sbx_table_add(&t, l->items[i].name, size, l->items[i].source, l->items[i].built_at);
        }
        sbx_table_print(&t, stdout);
        sbx_table_free(&t);
}

int cmd_images(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 0, 0, "takes no arguments", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        struct sbx_image_list l = {0};
        struct sbx_err err = {0};
        r = sbx_images(c, &l, &err);
        if (r < 0)
                return sbx_fail(ctx, NULL, r, &err);
        print_images(ctx, &l);
        sbx_image_list_clear(&l);
        return 0;
}
