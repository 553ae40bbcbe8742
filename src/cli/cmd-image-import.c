/* SPDX-License-Identifier: MIT */
/* sandboxd image import NAME FILE [--force] [--no-setuid] [--max-size N]:
 * the flags, and the progress on stderr (the work: runtime/oci.c). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/runtime.h"
#include "cli.h"
#include "settings.h"

#define IMPORT_USAGE                                                                               \
        "usage: sandboxd image import NAME FILE [--force] [--no-setuid] [--max-size SIZE]\n"

struct import_flags {
        bool force, no_setuid, bad_size;
        int64_t max_size;
};

struct progress {
        bool tty;
        unsigned line_of; /* the layer the terminal's line shows */
};

static int import_extra(const char *name, const char *value, void *ctx)
{
        struct import_flags *f = ctx;
        if (!strcmp(name, "force"))
                f->force = true;
        else if (!strcmp(name, "no-setuid"))
                f->no_setuid = true;
        else if (!strcmp(name, "max-size")) {
                if (settings_parse_size(value, &f->max_size) < 0 || f->max_size <= 0) {
                        fprintf(stderr, "sandboxd image import: bad --max-size '%s'\n", value);
                        return -1;
                }
        } else
                return 0;
        return 1;
}

static double mib(uint64_t b)
{
        return (double)b / (1 << 20);
}

static void on_progress(void *ctx, const struct rt_import_progress *p)
{
        static const char *const phase[] = {"verify", "scan", "extract", "done"};
        struct progress *pr = ctx;
        if (!p->layer) {
                if (pr->tty)
                        fprintf(stderr, "\runpacking the archive: %.1f/%.1f MiB", mib(p->done),
                                mib(p->total));
                return;
        }
        char dig[20];
        snprintf(dig, sizeof(dig), "%.19s", p->digest ? p->digest : "?");
        if (p->phase == RT_IMPORT_DONE) {
                fprintf(stderr, "%slayer %u/%u %s %.1f MiB (%.1f MiB unpacked)\n",
                        pr->tty ? "\r\033[K" : "", p->layer, p->layers, dig, mib(p->total),
                        mib(p->unpacked));
                return;
        }
        if (!pr->tty)
                return;
        if (pr->line_of == 0 && p->layer == 1)
                fputs("\r\033[K", stderr); /* the unpacking line */
        pr->line_of = p->layer;
        unsigned pct = p->total ? (unsigned)(p->done * 100 / p->total) : 0;
        fprintf(stderr, "\r\033[Klayer %u/%u %s %.1f MiB %s %u%%", p->layer, p->layers, dig,
                mib(p->total), phase[p->phase], pct > 100 ? 100 : pct);
}

int cmd_image_import(int argc, char **argv)
{
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf(
                            IMPORT_USAGE
                            "\nImport an OCI image layout (a directory or a tar of one) or a\n"
                            "docker save / podman save archive as image NAME (docs/images.md).\n\n"
                            "  --force                    replace an image of that name\n"
                            "  --no-setuid                refuse setuid and setgid files\n"
                            "  --max-size SIZE            cap on the uncompressed layers "
                            "(default 32G)\n");
                        settings_usage(0);
                        return 0;
                }
        static const char *const extra[] = {"force!", "no-setuid!", "max-size", NULL};
        struct import_flags f = {0};
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        int ret = 2;
        if (settings_parse(&s, 0, argc, argv, import_extra, extra, &f, &args) < 0)
                goto out;
        if (!args[0] || !args[1] || args[2]) {
                fputs(IMPORT_USAGE, stderr);
                goto out;
        }
        struct progress pr = {.tty = isatty(STDERR_FILENO) == 1};
        struct rt_import_opts o = {.force = f.force,
                                   .no_setuid = f.no_setuid,
                                   .max_size = (uint64_t)f.max_size,
                                   .progress = on_progress,
                                   .ctx = &pr};
        struct sbx_error err = {0};
        uint64_t size = 0;
        if (rt_image_import(s.images, args[0], args[1], &o, &size, &err) < 0) {
                fprintf(stderr, "%ssandboxd image import: %s\n", pr.tty ? "\r\033[K" : "", err.msg);
                ret = 1;
        } else {
                fprintf(stderr, "image '%s' imported (%.1f MiB)\n", args[0], mib(size));
                ret = 0;
        }
out:
        free(args);
        settings_free(&s);
        return ret;
}
