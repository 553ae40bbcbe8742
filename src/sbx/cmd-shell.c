/* SPDX-License-Identifier: MIT */
/* sbx shell NAME [-- COMMAND...]: an interactive terminal. The local tty
 * goes raw (every key, Ctrl-C included, is the remote terminal's) and is
 * restored on every way out: the end, an error, a signal (which hangs the
 * remote terminal up first, so the shell does not live on without it). */
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "sbx.h"

static const char usage[] =
    "usage: sbx shell NAME [-w DIR] [-u USER] [-- COMMAND [ARG]...]\n"
    "An interactive terminal in the sandbox (default command: /bin/sh). The local\n"
    "terminal is raw while it runs; its size follows the window (SIGWINCH).\n"
    "Exit code: the command's; 125 when sbx failed.\n";

static struct termios saved;
static bool raw;

static void restore(void)
{
        if (raw)
                tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        raw = false;
}

/* Until the command runs; then sbx_forward takes the signals (a hangup for
 * the remote terminal) and sbx restores the tty at its end. */
static void on_signal(int sig)
{
        restore();
        signal(sig, SIG_DFL);
        raise(sig);
}

static void make_raw(void)
{
        if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved) < 0)
                return;
        struct termios t = saved;
        cfmakeraw(&t);
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
                signal(sigs[i], on_signal);
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0) {
                raw = true;
                atexit(restore);
        }
}

int cmd_shell(struct sbx_ctx *ctx, int argc, char **argv)
{
        const char *cwd = NULL, *user = NULL;
        const struct sbx_opt opts[] = {
            {"workdir", 'w', true, &cwd}, {"user", 'u', true, &user}, {0}};
        struct sbx_pos pos;
        int r = sbx_begin(ctx, argc, argv, opts, usage, 1, -1, "expected NAME", &pos);
        if (r >= 0)
                return r;
        static const char *const sh[] = {"/bin/sh", NULL};
        struct winsize ws = {.ws_col = 80, .ws_row = 24};
        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_col || !ws.ws_row)
                ws = (struct winsize){.ws_col = 80, .ws_row = 24};
        struct sbx_spawn_request rq = {
            .argv = pos.argc > 1 ? (const char *const *)pos.argv + 1 : sh,
            .cwd = cwd,
            .user = user,
            .pty_cols = ws.ws_col,
            .pty_rows = ws.ws_row,
        };
        make_raw();
        r = sbx_run_command(ctx, pos.argv[0], &rq, true, true);
        restore();
        return r;
}
