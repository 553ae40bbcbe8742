/* SPDX-License-Identifier: MIT */
/* sbx ps NAME: the sandbox's spawned processes (running, or exited and not
 * yet killed). */
#include "sbx.h"

static const char usage[] = "usage: sbx ps NAME [--json]\n"
                            "Lists the sandbox's processes: running ones, and exited ones not "
                            "yet killed.\n";

static void print_table(const struct sbx_process_list *l)
{
        struct sbx_table t;
        sbx_table_init(&t, 5);
        sbx_table_add(&t, "ID", "STATE", "EXIT", "STARTED", "COMMAND");
        for (size_t i = 0; i < l->n; i++) {
                const struct sbx_process *p = &l->items[i];
                char code[16] = "", cmd[512];
                if (p->has_exit_code)
                        snprintf(code, sizeof(code), "%d", p->exit_code);
                sbx_join_argv(p->argv, cmd, sizeof(cmd));
                sbx_table_add(&t, p->id, p->running ? "running" : "exited", code, p->started_at,
                              cmd);
        }
        sbx_table_print(&t, stdout);
        sbx_table_free(&t);
}

int cmd_ps(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 1, 1, "expected NAME", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        struct sbx_process_list l = {0};
        struct sbx_err err = {0};
        r = sbx_processes(c, pos.argv[0], &l, &err);
        if (r < 0)
                return sbx_fail(ctx, pos.argv[0], r, &err);
        if (ctx->json) {
                json_t *a = json_array();
                for (size_t i = 0; i < l.n; i++)
                        json_array_append_new(a, sbx_json_process(&l.items[i]));
                sbx_print_json(a);
        } else {
                print_table(&l);
        }
        sbx_process_list_clear(&l);
        return 0;
}
