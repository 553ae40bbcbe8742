/* SPDX-License-Identifier: MIT */
/* sbx, the command line of libsandboxd: a table of verbs (main.c), one file
 * per verb, the work in the library. Exit codes (docs/sbx.md): */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "sandboxd.h"

enum {
        SBX_EXIT_OK = 0,
        SBX_EXIT_REFUSED = 1,     /* the server answered with an error */
        SBX_EXIT_USAGE = 2,       /* bad arguments or configuration */
        SBX_EXIT_UNREACHABLE = 3, /* no usable answer (down, cut, broke the contract) */
        SBX_EXIT_LOCAL = 4,       /* a local file could not be read or written */
        /* exec and shell pass the command's code through; their own
         * failures are this one instead (as `docker run` does). */
        SBX_EXIT_EXEC_FAILED = 125,
};

/* What every verb gets: the settings, and the client made from them on
 * first use. */
struct sbx_ctx {
        const char *verb;
        const char *server; /* --server, $SANDBOXD_URL, config `server` */
        const char *token;  /* --token, $SANDBOXD_TOKEN, config `token` */
        bool json;          /* --json */
        int own_failure;    /* the exit code of sbx's own usage errors */
        struct sbx_client *client;
};

/* The client, made on first call; NULL after printing why. */
struct sbx_client *sbx_ctx_client(struct sbx_ctx *ctx);
/* Print "sbx: VERB WHAT: STATUS CODE: MESSAGE" and return the exit code
 * for it. */
int sbx_fail(const struct sbx_ctx *ctx, const char *what, int r, const struct sbx_err *err);
/* Print "sbx: VERB: MESSAGE" for a usage error; returns SBX_EXIT_USAGE. */
int sbx_usage_error(const struct sbx_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Options of a verb: a long name, a short letter (or a number > 127 for
 * none), whether it takes a value, and where it goes ("1" for a flag). */
struct sbx_opt {
        const char *name;
        int ch;
        bool arg;
        const char **out;
};
struct sbx_pos {
        int argc;
        char **argv;
};
/* Parse a verb's argv (after the verb): its options (--json and --help for
 * all), then the positional arguments in pos. 0, 1 after printing the
 * usage for --help, or SBX_EXIT_USAGE after printing why. */
int sbx_args(struct sbx_ctx *ctx, int argc, char **argv, const struct sbx_opt *opts,
             const char *usage, struct sbx_pos *pos);
/* The start of most verbs: sbx_args, then between min and max positional
 * arguments (max -1: any; else print `expect`), then the client. -1 to go
 * on; else the exit code to return at once (0 after --help). */
int sbx_begin(struct sbx_ctx *ctx, int argc, char **argv, const struct sbx_opt *opts,
              const char *usage, int min, int max, const char *expect, struct sbx_pos *pos);
/* Print obj (stolen) as JSON on stdout; returns 0. */
int sbx_print_json(json_t *obj);

/* An aligned table for people: add rows of `cols` strings, then print. */
struct sbx_table {
        size_t cols;
        size_t rows;
        char **cells;
};
void sbx_table_init(struct sbx_table *t, size_t cols);
void sbx_table_add(struct sbx_table *t, ...); /* cols strings (NULL prints "-") */
void sbx_table_print(struct sbx_table *t, FILE *f);
void sbx_table_free(struct sbx_table *t);

/* Sandboxes as a table, or JSON (an array for ls, an object otherwise). */
void sbx_print_sandboxes(const struct sbx_ctx *ctx, const struct sbx_sandbox *s, size_t n);
/* A verb that applies fn to each NAME argument (stop, rm). */
int sbx_each_name(struct sbx_ctx *ctx, int argc, char **argv, const char *usage,
                  int (*fn)(struct sbx_client *c, const char *name, struct sbx_err *err));
/* An sbx_output_fn: stdout to fd 1, stderr to fd 2. */
int sbx_output_to_fd(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *data,
                     size_t len);
/* Shared JSON shapes. */
json_t *sbx_json_sandbox(const struct sbx_sandbox *s);
json_t *sbx_json_process(const struct sbx_process *p);
/* argv joined by spaces into out (cut at len). */
void sbx_join_argv(char *const *argv, char *out, size_t len);

/* stdin pump (pump.c): forwards fd 0 to a process's stdin from a thread
 * while the caller streams; with tty set, SIGWINCH resizes the terminal. */
struct sbx_pump;
int sbx_pump_start(struct sbx_client *c, const char *name, const char *id, bool tty,
                   struct sbx_pump **ret);
/* Stop and join it; returns the first error it met (0 when none). */
int sbx_pump_stop(struct sbx_pump *p, struct sbx_err *err);

/* SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to sbx go to the process's
 * group (from a thread of its own, with sigwait) until stopped; with
 * hangup (a terminal's process), each as SIGHUP: the terminal went away,
 * and an interactive shell, which ignores TERM, ends on that. */
struct sbx_forward;
int sbx_forward_start(struct sbx_client *c, const char *name, const char *id, bool hangup,
                      struct sbx_forward **ret);
void sbx_forward_stop(struct sbx_forward *f);

/* Spawn rq in name, stream its output to fd 1 and 2 (forwarding fd 0
 * when pump_stdin, resizes when tty), reap it; the exit code for sbx. */
int sbx_run_command(struct sbx_ctx *ctx, const char *name, const struct sbx_spawn_request *rq,
                    bool tty, bool pump_stdin);

/* Verbs. */
int cmd_attach(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_get(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_ls(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_stop(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_rm(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_exec(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_shell(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_ps(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_logs(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_kill(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_cp(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_snapshot(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_fork(struct sbx_ctx *ctx, int argc, char **argv);
int cmd_images(struct sbx_ctx *ctx, int argc, char **argv);
