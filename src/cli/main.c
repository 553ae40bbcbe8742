/* SPDX-License-Identifier: MIT */
/* sandboxd: a table of verbs; the work lives in the library below. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cli.h"

static const struct verb {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *help;
} verbs[] = {
    {"serve", cmd_serve, "run the daemon in the foreground"},
    {"token", cmd_token, "print an identity token for a deployment and account"},
    {"image", cmd_image,
     "build, import, list or remove images (image build|import|list|rm|recipe)"},
    {"account", cmd_account, "enable, disable or list accounts"},
    {"key", cmd_key, "list, rotate or remove identity-token signing keys"},
};

static void usage(FILE *f)
{
        fprintf(f, "usage: sandboxd VERB [OPTIONS]\n\nVerbs:\n");
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].help);
        fprintf(f,
                "\n`sandboxd VERB --help` lists a verb's options. Every verb takes --state DIR.\n");
}

int main(int argc, char **argv)
{
        if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
            !strcmp(argv[1], "help")) {
                usage(argc < 2 ? stderr : stdout);
                return argc < 2 ? 2 : 0;
        }
        if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
                printf("sandboxd %s\n", SANDBOXD_VERSION);
                return 0;
        }
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                if (!strcmp(argv[1], verbs[i].name))
                        return verbs[i].fn(argc - 2, argv + 2);
        fprintf(stderr, "sandboxd: unknown verb '%s'\n\n", argv[1]);
        usage(stderr);
        return 2;
}
