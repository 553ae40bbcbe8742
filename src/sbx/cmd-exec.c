/* SPDX-License-Identifier: MIT */
/* sbx exec NAME [-i] [-e K=V] [-w DIR] [-u USER] -- CMD...: spawned
 * lossless and streamed, so output arrives as it is written, nothing is
 * dropped and nothing is capped; the command's exit code is sbx's. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx.h"
#include "common/util.h"

static const char usage[] =
    "usage: sbx exec NAME [-i] [-e KEY=VALUE]... [-w DIR] [-u USER] -- COMMAND [ARG]...\n"
    "Runs COMMAND in the sandbox, streaming its stdout and stderr as they arrive.\n"
    "  -i, --stdin        forward sbx's stdin to the command (to its end)\n"
    "  -e, --env K=V      set a variable (repeatable)\n"
    "  -w, --workdir DIR  the working directory (default: the image's, /workspace)\n"
    "  -u, --user USER    run as USER (name or uid[:gid])\n"
    "Exit code: the command's (128 + N when killed by signal N); 125 when sbx failed.\n";

struct exec_args {
        const char *in, *env, *cwd, *user;
        const char **envv;
        size_t nenv;
};

/* -e may repeat: sbx_args keeps the last, so collect them first. */
static int collect_env(int argc, char **argv, struct exec_args *a)
{
        a->envv = calloc((size_t)argc + 1, sizeof(char *));
        if (!a->envv)
                return -1;
        for (int i = 0; i < argc && strcmp(argv[i], "--"); i++) {
                if ((!strcmp(argv[i], "-e") || !strcmp(argv[i], "--env")) && i + 1 < argc)
                        a->envv[a->nenv++] = argv[++i];
                else if (!strncmp(argv[i], "--env=", 6))
                        a->envv[a->nenv++] = argv[i] + 6;
                else if (!strncmp(argv[i], "-e", 2) && argv[i][2])
                        a->envv[a->nenv++] = argv[i] + 2;
        }
        return 0;
}

/* Spawn, stream to the end, reap; the command's exit code or -errno. */
static int run(struct sbx_ctx *ctx, struct sbx_client *c, const char *name,
               const struct sbx_spawn_request *rq, bool tty, bool pump_stdin)
{
        struct sbx_process p = {0};
        struct sbx_err err = {0};
        int r = sbx_spawn(c, name, rq, &p, &err);
        if (r < 0) {
                sbx_fail(ctx, name, r, &err);
                return SBX_EXIT_EXEC_FAILED;
        }
        // A signal to sbx is passed on, and sbx waits for the process's end
        // (on a terminal, as a hangup; Ctrl-C is a byte there, not a signal).
        struct sbx_forward *fwd = NULL;
        if ((r = sbx_forward_start(c, name, p.id, tty, &fwd)) < 0)
                err = (struct sbx_err){0};
        struct sbx_pump *pump = NULL;
        if (r >= 0 && pump_stdin && (r = sbx_pump_start(c, name, p.id, tty, &pump)) < 0)
                err = (struct sbx_err){0};
        struct sbx_stream_result res = {0};
        if (r >= 0)
                r = sbx_stream(c, name, p.id, NULL, sbx_output_to_fd, NULL, &res, &err);
        struct sbx_err perr = {0};
        int pr = sbx_pump_stop(pump, &perr);
        sbx_forward_stop(fwd);
        int rc = r >= 0 ? res.status.exit_code : SBX_EXIT_EXEC_FAILED;
        // Whoever read sbx's output went away (`| head`): quietly, as a
        // shell's pipeline would end, and the process is killed below.
        if (r == -EPIPE)
                rc = 128 + SIGPIPE;
        else if (r < 0)
                sbx_fail(ctx, name, r, &err);
        else if (pr < 0 && perr.status != 404 && perr.status != 409)
                rc = (sbx_fail(ctx, "stdin", pr, &perr), SBX_EXIT_EXEC_FAILED);
        // Forget the process (killing it if it still runs: sbx's own failure
        // or a reader gone), so it does not push other records out.
        struct sbx_err kerr = {0};
        sbx_kill(c, name, p.id, &kerr);
        sbx_stream_result_clear(&res);
        sbx_process_clear(&p);
        return rc < 0 || rc > 255 ? SBX_EXIT_EXEC_FAILED : rc;
}

int sbx_run_command(struct sbx_ctx *ctx, const char *name, const struct sbx_spawn_request *rq,
                    bool tty, bool pump_stdin)
{
        return run(ctx, ctx->client, name, rq, tty, pump_stdin);
}

int cmd_exec(struct sbx_ctx *ctx, int argc, char **argv)
{
        struct exec_args a = {0};
        const struct sbx_opt opts[] = {{"stdin", 'i', false, &a.in},
                                       {"env", 'e', true, &a.env},
                                       {"workdir", 'w', true, &a.cwd},
                                       {"user", 'u', true, &a.user},
                                       {0}};
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, opts, usage, 2, -1, "expected NAME -- COMMAND", &pos);
        if (r >= 0)
                return r;
        if (collect_env(argc, argv, &a) < 0)
                return SBX_EXIT_EXEC_FAILED;
        struct sbx_spawn_request rq = {
            .argv = (const char *const *)pos.argv + 1,
            .env = a.envv,
            .cwd = a.cwd,
            .user = a.user,
            .stdin_open = a.in != NULL,
            .lossless = true,
        };
        r = sbx_run_command(ctx, pos.argv[0], &rq, false, a.in != NULL);
        free(a.envv);
        return r;
}
