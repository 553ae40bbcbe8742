/* SPDX-License-Identifier: MIT */
/* sandboxd image list | image rm NAME | image recipe NAME (image build:
 * cmd-image-build.c, image import: cmd-image-import.c) */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/names.h"
#include "../runtime/runtime.h"
#include "../runtime/recipe.h"
#include "../store/store.h"
#include "cli.h"
#include "settings.h"

static int image_list(const struct settings *s)
{
        struct rt_image_info *v = NULL;
        struct sbx_error err = {0};
        size_t n = 0;
        if (rt_image_list(s->images, &v, &n, &err) < 0) {
                fprintf(stderr, "sandboxd image: %s\n", err.msg);
                return 1;
        }
        printf("%-16s %-26s %-12s %-8s %-7s %s\n", "NAME", "BUILT", "SIZE", "SOURCE", "LAYERS",
               "RECIPE");
        for (size_t i = 0; i < n; i++) {
                char ts[32], size[32];
                format_rfc3339(v[i].built_at_ms, ts);
                snprintf(size, sizeof(size), "%.1f MiB", (double)v[i].size_bytes / (1 << 20));
                printf("%-16s %-26s %-12s %-8s %-7u %s\n", v[i].name, ts, size, v[i].source,
                       v[i].layers, v[i].stale ? "older" : "current");
        }
        free(v);
        return 0;
}

/* The sandboxes of the store that were made from image: "deployment/name"
 * of the first few, and how many in all. -errno when the store cannot be
 * read. */
static int image_users(const struct settings *s, const char *image, char *names, size_t len,
                       size_t *ret_n)
{
        char path[PATH_MAX];
        struct store *st = NULL;
        struct store_sandbox *v = NULL;
        struct sbx_error err = {0};
        size_t n = 0;
        *ret_n = 0;
        names[0] = '\0';
        if (path_join(path, sizeof(path), s->state, "sandboxd.db") < 0)
                return -ENAMETOOLONG;
        if (access(path, F_OK) < 0)
                return 0; /* no daemon ever ran here: no sandbox */
        int r = store_open(path, &st, &err);
        if (r >= 0)
                r = store_sandbox_list(st, &v, &n, &err);
        if (st)
                store_close(st);
        if (r < 0) {
                fprintf(stderr, "sandboxd image: cannot read the sandboxes: %s\n", err.msg);
                return r;
        }
        size_t used = 0;
        for (size_t i = 0; i < n; i++) {
                if (strcmp(v[i].image, image))
                        continue;
                if (++*ret_n <= 8 && used < len)
                        used += (size_t)snprintf(names + used, len - used, "%s%s/%s",
                                                 used ? ", " : "", v[i].deployment, v[i].name);
        }
        free(v);
        return 0;
}

/* image rm: refused while a sandbox was made from it, or while it is the
 * default image (a warm pool may be starting from it). */
static int image_rm(const struct settings *s, const char *name)
{
        char names[600];
        size_t n;
        struct sbx_error err = {0};
        if (!image_name_is_valid(name)) {
                fprintf(stderr, "sandboxd image: bad image name '%s'\n", name);
                return 2;
        }
        if (s->default_image && !strcmp(s->default_image, name)) {
                fprintf(stderr, "sandboxd image: '%s' is the default image (default_image)\n",
                        name);
                return 1;
        }
        if (image_users(s, name, names, sizeof(names), &n) < 0)
                return 1;
        if (n > 0) {
                fprintf(stderr,
                        "sandboxd image: '%s' is in use by %zu sandbox%s: %s%s (delete them "
                        "first)\n",
                        name, n, n == 1 ? "" : "es", names, n > 8 ? ", ..." : "");
                return 1;
        }
        if (rt_image_remove(s->images, name, &err) < 0) {
                fprintf(stderr, "sandboxd image: %s\n", err.msg);
                return 1;
        }
        return 0;
}

int cmd_image(int argc, char **argv)
{
        if (argc > 0 && !strcmp(argv[0], "import"))
                return cmd_image_import(argc - 1, argv + 1);
        if (argc > 0 && !strcmp(argv[0], "build"))
                return cmd_image_build(argc - 1, argv + 1);
        if (argc == 2 && !strcmp(argv[0], "recipe") && recipe_builtin(argv[1])) {
                fputs(recipe_builtin(argv[1]), stdout);
                return 0;
        }
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf(
                            "usage: sandboxd image list | sandboxd image rm NAME | sandboxd image "
                            "prune\n"
                            "       sandboxd image build NAME [-f RECIPE] (see image build "
                            "--help)\n"
                            "       sandboxd image import NAME FILE (see image import --help)\n"
                            "       sandboxd image recipe tiny|debian\n\n"
                            "Shipped images, each a recipe (`image recipe` prints it): debian\n"
                            "(Debian 12 with python3, nodejs, npm, git, curl, ca-certificates,\n"
                            "procps, vim-tiny) and tiny (busybox). `image build NAME` builds one\n"
                            "that is missing or was built from an older recipe (RECIPE `older`\n"
                            "in the list). `image prune` empties the build cache (the steps a\n"
                            "rebuild would reuse).\n");
                        settings_usage(0);
                        return 0;
                }
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        if (settings_parse(&s, 0, argc, argv, NULL, NULL, NULL, &args) < 0)
                return 2;
        int ret = 2;
        if (args[0] && !strcmp(args[0], "list") && !args[1]) {
                ret = image_list(&s);
        } else if (args[0] && !strcmp(args[0], "prune") && !args[1]) {
                ret = image_prune(s.images);
        } else if (args[0] && !strcmp(args[0], "rm") && args[1] && !args[2]) {
                ret = image_rm(&s, args[1]);
        } else {
                fprintf(stderr,
                        "usage: sandboxd image build NAME [-f RECIPE] | sandboxd image list |\n"
                        "       sandboxd image rm NAME | sandboxd image prune |\n"
                        "       sandboxd image recipe tiny|debian |\n"
                        "       sandboxd image import NAME FILE [--force] [--no-setuid]\n");
        }
        free(args);
        settings_free(&s);
        return ret;
}
