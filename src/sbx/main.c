/* SPDX-License-Identifier: MIT */
/* sbx: a table of verbs; settings from flags, the environment and the
 * config file, in that order; errors printed here, in one line each. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "conf.h"
#include "sbx.h"
#include "common/util.h"

static const struct verb {
        const char *name;
        int (*fn)(struct sbx_ctx *ctx, int argc, char **argv);
        const char *help;
} verbs[] = {
    {"attach", cmd_attach, "create or resume a sandbox"},
    {"exec", cmd_exec, "run a command, its output streamed, its exit code passed through"},
    {"shell", cmd_shell, "an interactive terminal in a sandbox"},
    {"ps", cmd_ps, "list a sandbox's processes"},
    {"logs", cmd_logs, "a process's output (-f: follow it)"},
    {"kill", cmd_kill, "kill a process, or send it a signal"},
    {"cp", cmd_cp, "copy files: sbx cp SRC DST, either side NAME:PATH"},
    {"ls", cmd_ls, "list the sandboxes"},
    {"get", cmd_get, "a sandbox's record"},
    {"stop", cmd_stop, "suspend a sandbox"},
    {"rm", cmd_rm, "delete a sandbox and its files"},
    {"snapshot", cmd_snapshot, "save a sandbox's files as a new image"},
    {"fork", cmd_fork, "a new sandbox from another's state now"},
    {"images", cmd_images, "list the images"},
};

static void usage(FILE *f)
{
        fprintf(f, "usage: sbx [--server URL] [--token TOKEN] [--json] VERB [ARGS]\n\nVerbs:\n");
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
                fprintf(f, "  %-9s %s\n", verbs[i].name, verbs[i].help);
        fprintf(f, "\n`sbx VERB --help` shows a verb's arguments. Settings: --server, --token;\n"
                   "$SANDBOXD_URL, $SANDBOXD_TOKEN; $XDG_CONFIG_HOME/sandboxd/config (server =, "
                   "token =).\nExit codes: 0 ok, 1 refused by the server, 2 usage, 3 no usable "
                   "answer, 4 local I/O;\nexec and shell: the command's, or 125.\n");
}

static int read_config(struct sbx_config *cfg)
{
        char path[4096];
        if (sbx_config_path(path, sizeof(path)) < 0)
                return 0;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT
                           ? 0
                           : (fprintf(stderr, "sbx: %s: %s\n", path, strerror(errno)), -1);
        char text[65536];
        ssize_t n = read(fd, text, sizeof(text));
        if (n < 0 || n == (ssize_t)sizeof(text)) {
                fprintf(stderr, "sbx: %s: %s\n", path, n < 0 ? strerror(errno) : "over 64 KiB");
                return -1;
        }
        int line = 0;
        char why[128];
        if (sbx_config_parse(text, (size_t)n, cfg, &line, why, sizeof(why)) < 0) {
                fprintf(stderr, "sbx: %s:%d: %s\n", path, line, why);
                return -1;
        }
        return 0;
}

/* Take the global options out of argv (up to the verb); returns the
 * index of the verb, or -1 after printing why. */
static int global_options(int argc, char **argv, struct sbx_ctx *ctx)
{
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i];
                size_t n = strcspn(a, "=");
                const char **slot = n == 8 && !strncmp(a, "--server", 8)  ? &ctx->server
                                    : n == 7 && !strncmp(a, "--token", 7) ? &ctx->token
                                                                          : NULL;
                if (!strcmp(a, "--json")) {
                        ctx->json = true;
                } else if (slot && a[n] == '=') {
                        *slot = a + n + 1;
                } else if (slot && i + 1 < argc) {
                        *slot = argv[++i];
                } else {
                        return i;
                }
        }
        return i;
}

int main(int argc, char **argv)
{
        struct sbx_ctx ctx = {.verb = "sbx"};
        // A closed pipe is an EPIPE where sbx writes, not a death mid-call
        // (exec then kills its process and exits 141).
        signal(SIGPIPE, SIG_IGN);
        int v = global_options(argc, argv, &ctx);
        if (v >= argc || !strcmp(argv[v], "--help") || !strcmp(argv[v], "-h") ||
            !strcmp(argv[v], "help")) {
                usage(v >= argc ? stderr : stdout);
                return v >= argc ? SBX_EXIT_USAGE : 0;
        }
        if (!strcmp(argv[v], "--version") || !strcmp(argv[v], "version")) {
                printf("sbx %s (libsandboxd %s)\n", SANDBOXD_VERSION, sbxc_version());
                return 0;
        }
        const struct verb *verb = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
                if (!strcmp(argv[v], verbs[i].name))
                        verb = &verbs[i];
        if (!verb) {
                fprintf(stderr, "sbx: unknown %s '%s'\n\n", argv[v][0] == '-' ? "option" : "verb",
                        argv[v]);
                usage(stderr);
                return SBX_EXIT_USAGE;
        }
        ctx.verb = verb->name;
        ctx.own_failure =
            verb->fn == cmd_exec || verb->fn == cmd_shell ? SBX_EXIT_EXEC_FAILED : SBX_EXIT_USAGE;
        struct sbx_config cfg = {0};
        if (read_config(&cfg) < 0) {
                sbx_config_free(&cfg);
                return SBX_EXIT_USAGE;
        }
        if (!ctx.server)
                ctx.server = getenv("SANDBOXD_URL");
        if (!ctx.server || !*ctx.server)
                ctx.server = cfg.server;
        if (!ctx.token)
                ctx.token = getenv("SANDBOXD_TOKEN");
        if (!ctx.token || !*ctx.token)
                ctx.token = cfg.token;
        int rc = verb->fn(&ctx, argc - v - 1, argv + v + 1);
        sbx_client_free(ctx.client);
        sbx_config_free(&cfg);
        return rc;
}
