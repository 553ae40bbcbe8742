/* SPDX-License-Identifier: MIT */
/* sandboxd image build NAME [--force] | image list (image import: cmd-image-import.c) */
#include <stdio.h>
#include <string.h>

#include "../common/names.h"
#include "../runtime/runtime.h"
#include "cli.h"
#include "settings.h"

static int image_extra(const char *name, const char *value, void *ctx)
{
        if (strcmp(name, "force"))
                return 0;
        *(bool *)ctx = true;
        return 1;
}

int cmd_image(int argc, char **argv)
{
        if (argc > 0 && !strcmp(argv[0], "import"))
                return cmd_image_import(argc - 1, argv + 1);
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf(
                            "usage: sandboxd image build NAME [--force] | sandboxd image list\n"
                            "       sandboxd image import NAME FILE (see image import --help)\n\n"
                            "Images: debian (Debian 12 with python3, nodejs, npm, git, curl,\n"
                            "ca-certificates, procps, vim-tiny; built with mmdebstrap) and\n"
                            "tiny (busybox). `build` builds an image that is missing, or was\n"
                            "built from an older recipe (RECIPE `older` in the list).\n\n"
                            "  --force                    rebuild an image that exists\n");
                        settings_usage(0);
                        return 0;
                }
        static const char *const extra[] = {"force!", NULL};
        bool force = false;
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        if (settings_parse(&s, 0, argc, argv, image_extra, extra, &force, &args) < 0)
                return 2;
        int ret = 2;
        struct sbx_error err = {0};
        if (args[0] && !strcmp(args[0], "build") && args[1] && !args[2]) {
                if (!image_name_is_valid(args[1])) {
                        fprintf(stderr, "sandboxd image: bad image name '%s'\n", args[1]);
                } else if (mkdir_p(s.images, 0755) < 0) {
                        fprintf(stderr, "sandboxd image: cannot create %s\n", s.images);
                        ret = 1;
                } else if (rt_image_build(s.images, args[1], force, &err) < 0) {
                        fprintf(stderr, "sandboxd image: %s\n", err.msg);
                        ret = 1;
                } else {
                        ret = 0;
                }
        } else if (args[0] && !strcmp(args[0], "list") && !args[1]) {
                struct rt_image_info *v = NULL;
                size_t n = 0;
                if (rt_image_list(s.images, &v, &n, &err) < 0) {
                        fprintf(stderr, "sandboxd image: %s\n", err.msg);
                        ret = 1;
                } else {
                        printf("%-16s %-26s %-12s %s\n", "NAME", "BUILT", "SIZE", "RECIPE");
                        for (size_t i = 0; i < n; i++) {
                                char ts[32];
                                format_rfc3339(v[i].built_at_ms, ts);
                                char size[32];
                                snprintf(size, sizeof(size), "%.1f MiB",
                                         (double)v[i].size_bytes / (1 << 20));
                                printf("%-16s %-26s %-12s %s\n", v[i].name, ts, size,
                                       v[i].stale ? "older" : "current");
                        }
                        free(v);
                        ret = 0;
                }
        } else {
                fprintf(stderr,
                        "usage: sandboxd image build NAME [--force] | sandboxd image list |\n"
                        "       sandboxd image import NAME FILE [--force] [--no-setuid]\n");
        }
        free(args);
        settings_free(&s);
        return ret;
}
