/* SPDX-License-Identifier: MIT */
/* What every verb shares: the client, the one-line errors, tables, JSON. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"
#include "common/util.h"

struct sbx_client *sbx_ctx_client(struct sbx_ctx *ctx)
{
        if (ctx->client)
                return ctx->client;
        struct sbx_options o = {.token = ctx->token, .server_url = ctx->server};
        struct sbx_err err = {0};
        int r = sbx_client_new(&o, &ctx->client, &err);
        if (r < 0) {
                fprintf(stderr, "sbx: %s: %s\n", ctx->verb, err.message);
                ctx->client = NULL;
        }
        return ctx->client;
}

int sbx_fail(const struct sbx_ctx *ctx, const char *what, int r, const struct sbx_err *err)
{
        const char *sep = what && *what ? " " : "";
        if (err->status)
                fprintf(stderr, "sbx: %s%s%s: %d %s: %s\n", ctx->verb, sep, what ? what : "",
                        err->status, err->code, err->message);
        else if (err->code[0])
                fprintf(stderr, "sbx: %s%s%s: %s: %s\n", ctx->verb, sep, what ? what : "",
                        err->code, err->message);
        else
                fprintf(stderr, "sbx: %s%s%s: %s\n", ctx->verb, sep, what ? what : "",
                        strerror(r < 0 ? -r : EIO));
        if (err->status)
                return SBX_EXIT_REFUSED;
        if (!strcmp(err->code, "invalid_argument") || !strcmp(err->code, "no_token") ||
            !strcmp(err->code, "no_server"))
                return SBX_EXIT_USAGE;
        if (!strcmp(err->code, "io_error"))
                return SBX_EXIT_LOCAL;
        return SBX_EXIT_UNREACHABLE;
}

int sbx_usage_error(const struct sbx_ctx *ctx, const char *fmt, ...)
{
        fprintf(stderr, "sbx: %s: ", ctx->verb);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (sbx %s --help)\n", ctx->verb);
        return SBX_EXIT_USAGE;
}

int sbx_print_json(json_t *obj)
{
        json_dumpf(obj, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
        fputc('\n', stdout);
        json_decref(obj);
        return 0;
}

void sbx_table_init(struct sbx_table *t, size_t cols)
{
        *t = (struct sbx_table){.cols = cols};
}

void sbx_table_add(struct sbx_table *t, ...)
{
        char **cells = realloc(t->cells, (t->rows + 1) * t->cols * sizeof(char *));
        if (!cells)
                return;
        t->cells = cells;
        va_list ap;
        va_start(ap, t);
        for (size_t i = 0; i < t->cols; i++) {
                const char *s = va_arg(ap, const char *);
                cells[t->rows * t->cols + i] = strdup(s && *s ? s : "-");
        }
        va_end(ap);
        t->rows++;
}

void sbx_table_print(struct sbx_table *t, FILE *f)
{
        size_t width[16] = {0};
        for (size_t i = 0; i < t->rows * t->cols; i++) {
                const char *s = t->cells[i] ? t->cells[i] : "-";
                width[i % t->cols] = MAX(width[i % t->cols], strlen(s));
        }
        for (size_t i = 0; i < t->rows * t->cols; i++) {
                size_t col = i % t->cols;
                const char *s = t->cells[i] ? t->cells[i] : "-";
                if (col + 1 == t->cols)
                        fprintf(f, "%s\n", s);
                else
                        fprintf(f, "%-*s  ", (int)width[col], s);
        }
}

void sbx_table_free(struct sbx_table *t)
{
        for (size_t i = 0; i < t->rows * t->cols; i++)
                free(t->cells[i]);
        free(t->cells);
        t->cells = NULL;
        t->rows = 0;
}

static void set_str(json_t *o, const char *key, const char *v)
{
        if (v)
                json_object_set_new(o, key, json_string(v));
}

json_t *sbx_json_sandbox(const struct sbx_sandbox *s)
{
        json_t *o = json_object();
        set_str(o, "name", s->name);
        set_str(o, "class", s->sandbox_class);
        set_str(o, "state", s->state);
        set_str(o, "network", s->network);
        set_str(o, "image", s->image);
        set_str(o, "createdAt", s->created_at);
        set_str(o, "lastActiveAt", s->last_active_at);
        set_str(o, "ceilingAt", s->ceiling_at);
        set_str(o, "expiresAt", s->expires_at);
        return o;
}

json_t *sbx_json_process(const struct sbx_process *p)
{
        json_t *o = json_object(), *argv = json_array();
        set_str(o, "processId", p->id);
        for (size_t i = 0; p->argv && p->argv[i]; i++)
                json_array_append_new(argv, json_string(p->argv[i]));
        json_object_set_new(o, "command", argv);
        set_str(o, "state", p->running ? "running" : "exited");
        if (p->has_exit_code)
                json_object_set_new(o, "exitCode", json_integer(p->exit_code));
        set_str(o, "startedAt", p->started_at);
        set_str(o, "exitedAt", p->exited_at);
        if (p->pty)
                json_object_set_new(o, "pty", json_true());
        return o;
}

void sbx_join_argv(char *const *argv, char *out, size_t len)
{
        size_t n = 0;
        out[0] = 0;
        for (size_t i = 0; argv && argv[i] && n + 1 < len; i++) {
                int w = snprintf(out + n, len - n, "%s%s", i ? " " : "", argv[i]);
                if (w < 0)
                        break;
                n += (size_t)w;
        }
}

/* getopt's tables from a verb's options, --json and --help added. */
static void option_tables(const struct sbx_opt *opts, struct option *lo, size_t max, char *shorts,
                          size_t shorts_len)
{
        size_t n = 0, k = 1;
        snprintf(shorts, shorts_len, "h");
        for (; opts && opts[n].name && n < max - 3; n++) {
                lo[n] = (struct option){opts[n].name, opts[n].arg ? required_argument : no_argument,
                                        NULL, opts[n].ch};
                if (opts[n].ch <= ' ' || opts[n].ch >= 127 || k + 3 >= shorts_len)
                        continue;
                shorts[k++] = (char)opts[n].ch;
                if (opts[n].arg)
                        shorts[k++] = ':';
                shorts[k] = 0;
        }
        lo[n++] = (struct option){"json", no_argument, NULL, 1};
        lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
        lo[n] = (struct option){0};
}

int sbx_args(struct sbx_ctx *ctx, int argc, char **argv, const struct sbx_opt *opts,
             const char *usage, struct sbx_pos *pos)
{
        struct option lo[16];
        char shorts[64];
        option_tables(opts, lo, ARRAY_SIZE(lo), shorts, sizeof(shorts));
        optind = 0;
        opterr = 0;
        int ch;
        while ((ch = getopt_long(argc + 1, argv - 1, shorts, lo, NULL)) != -1) {
                if (ch == 'h') {
                        fputs(usage, stdout);
                        return 1;
                }
                if (ch == 1) {
                        ctx->json = true;
                        continue;
                }
                size_t i = 0;
                while (opts && opts[i].name && opts[i].ch != ch)
                        i++;
                if (ch == '?' || !opts || !opts[i].name)
                        return sbx_usage_error(ctx, "unknown option '%s'",
                                               argv[optind - 2] ? argv[optind - 2] : "?");
                *opts[i].out = opts[i].arg ? optarg : "1";
        }
        pos->argv = argv + optind - 1;
        pos->argc = argc + 1 - optind;
        return 0;
}

void sbx_print_sandboxes(const struct sbx_ctx *ctx, const struct sbx_sandbox *s, size_t n)
{
        if (ctx->json) {
                // One sandbox (get, attach) is an object; a list an array.
                if (!strcmp(ctx->verb, "ls")) {
                        json_t *a = json_array();
                        for (size_t i = 0; i < n; i++)
                                json_array_append_new(a, sbx_json_sandbox(&s[i]));
                        sbx_print_json(a);
                } else if (n == 1) {
                        sbx_print_json(sbx_json_sandbox(s));
                }
                return;
        }
        struct sbx_table t;
        sbx_table_init(&t, 6);
        sbx_table_add(&t, "NAME", "STATE", "CLASS", "IMAGE", "NETWORK", "LAST ACTIVE");
        for (size_t i = 0; i < n; i++)
                sbx_table_add(&t, s[i].name, s[i].state, s[i].sandbox_class, s[i].image,
                              s[i].network, s[i].last_active_at);
        sbx_table_print(&t, stdout);
        sbx_table_free(&t);
}

int sbx_each_name(struct sbx_ctx *ctx, int argc, char **argv, const char *usage,
                  int (*fn)(struct sbx_client *c, const char *name, struct sbx_err *err))
{
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, NULL, usage, 1, -1, "expected NAME", &pos);
        if (r >= 0)
                return r;
        struct sbx_client *c = ctx->client;
        int rc = 0;
        for (int i = 0; i < pos.argc; i++) {
                struct sbx_err err = {0};
                r = fn(c, pos.argv[i], &err);
                if (r < 0)
                        rc = sbx_fail(ctx, pos.argv[i], r, &err);
        }
        return rc;
}

int sbx_begin(struct sbx_ctx *ctx, int argc, char **argv, const struct sbx_opt *opts,
              const char *usage, int min, int max, const char *expect, struct sbx_pos *pos)
{
        int r = sbx_args(ctx, argc, argv, opts, usage, pos);
        if (r)
                return r == 1 ? 0 : ctx->own_failure;
        if (pos->argc < min || (max >= 0 && pos->argc > max)) {
                sbx_usage_error(ctx, "%s", expect);
                return ctx->own_failure;
        }
        return sbx_ctx_client(ctx) ? -1 : ctx->own_failure;
}

int sbx_output_to_fd(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *data, size_t len)
{
        (void)ctx;
        (void)offset;
        int r = write_all(s == SBX_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
        // A socket's reader that went away with bytes unread resets it:
        // the same end as a closed pipe.
        return r == -ECONNRESET ? -EPIPE : r;
}
