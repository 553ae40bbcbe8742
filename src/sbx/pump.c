/* SPDX-License-Identifier: MIT */
/* Forwards fd 0 to a process's stdin from a thread of its own, while the
 * caller's thread streams the output. For a terminal it also forwards
 * SIGWINCH as a resize. The thread waits in poll() on fd 0 and on a pipe
 * that sbx_pump_stop() writes (and the SIGWINCH handler), so stopping it
 * never waits for a byte of input. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

#include "sbx.h"
#include "common/util.h"

/* A write to a process's stdin holds at most this much (the wire's is 8 MiB). */
#define CHUNK (256 * 1024)

struct sbx_pump {
        struct sbx_client *c;
        char *name;
        char *id;
        bool tty;
        int wake[2]; /* [1] written by stop (byte 's') and SIGWINCH ('w') */
        pthread_t thread;
        struct sbx_err err;
        int rc;
};

/* The pump a SIGWINCH handler wakes; one terminal per process. */
static int winch_fd = -1;

static void on_winch(int sig)
{
        (void)sig;
        int saved = errno;
        if (winch_fd >= 0 && write(winch_fd, "w", 1) < 0) {
                // Nothing to do in a handler: the next resize catches up.
        }
        errno = saved;
}

static int resize(struct sbx_pump *p)
{
        struct winsize ws;
        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_col || !ws.ws_row)
                return 0;
        struct sbx_err err = {0};
        int r = sbx_resize(p->c, p->name, p->id, ws.ws_col, ws.ws_row, &err);
        // The process may have exited meanwhile (409): not the pump's error.
        return r < 0 && err.status != 409 ? (p->err = err, r) : 0;
}

/* 1 when stopped, 0 to go on, < 0 on error. */
static int wake_up(struct sbx_pump *p)
{
        char ch[16];
        ssize_t n = read(p->wake[0], ch, sizeof(ch));
        for (ssize_t i = 0; i < n; i++)
                if (ch[i] == 's')
                        return 1;
        return p->tty ? resize(p) : 0;
}

static int forward(struct sbx_pump *p, char *buf)
{
        ssize_t n = read(STDIN_FILENO, buf, CHUNK);
        if (n < 0)
                return errno == EINTR || errno == EAGAIN ? 0 : -errno;
        int r = sbx_stdin(p->c, p->name, p->id, buf, (size_t)n, n == 0, &p->err);
        if (r < 0)
                return r;
        return n == 0 ? 1 : 0;
}

static void *run(void *arg)
{
        struct sbx_pump *p = arg;
        _cleanup_free_ char *buf = malloc(CHUNK);
        bool eof = false;
        int r = buf ? 0 : -ENOMEM;
        while (r == 0) {
                struct pollfd fds[2] = {{p->wake[0], POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
                if (poll(fds, eof ? 1 : 2, -1) < 0) {
                        r = errno == EINTR ? 0 : -errno;
                        continue;
                }
                if (fds[0].revents)
                        r = wake_up(p);
                else if (!eof && fds[1].revents)
                        r = forward(p, buf);
                if (r == 1 && !eof && !fds[0].revents) {
                        // stdin's end: sent as a close; wait for the stop.
                        eof = true;
                        r = 0;
                }
        }
        p->rc = r < 0 ? r : 0;
        return NULL;
}

int sbx_pump_start(struct sbx_client *c, const char *name, const char *id, bool tty,
                   struct sbx_pump **ret)
{
        struct sbx_pump *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->c = c;
        p->tty = tty;
        p->name = strdup(name);
        p->id = strdup(id);
        int r = pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0 ? -errno : 0;
        if (r == 0 && (!p->name || !p->id))
                r = -ENOMEM;
        if (r == 0 && tty) {
                winch_fd = p->wake[1];
                struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
                sigemptyset(&sa.sa_mask);
                sigaction(SIGWINCH, &sa, NULL);
        }
        if (r == 0)
                r = -pthread_create(&p->thread, NULL, run, p);
        if (r < 0) {
                free(p->name);
                free(p->id);
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

int sbx_pump_stop(struct sbx_pump *p, struct sbx_err *err)
{
        if (!p)
                return 0;
        if (write(p->wake[1], "s", 1) < 0) {
                // A full pipe already holds a wake-up; the thread sees it.
        }
        pthread_join(p->thread, NULL);
        winch_fd = -1;
        close(p->wake[0]);
        close(p->wake[1]);
        int r = p->rc;
        if (r < 0 && err)
                *err = p->err;
        free(p->name);
        free(p->id);
        free(p);
        return r;
}

/* ---- signals sent to sbx, forwarded to the process ---- */

struct sbx_forward {
        struct sbx_client *c;
        const char *name;
        const char *id;
        bool hangup; /* a terminal's: every signal is sent as HUP */
        pthread_t thread;
        sigset_t set;
};

static const struct {
        int sig;
        const char *name;
} forwarded[] = {{SIGINT, "INT"}, {SIGTERM, "TERM"}, {SIGHUP, "HUP"}, {SIGQUIT, "QUIT"}};

static void *forward_run(void *arg)
{
        struct sbx_forward *f = arg;
        for (;;) {
                int sig = 0;
                if (sigwait(&f->set, &sig) != 0 || sig == SIGUSR1)
                        return NULL;
                for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
                        if (forwarded[i].sig == sig) {
                                struct sbx_err err = {0};
                                // Best effort: a process that has just exited
                                // needs no signal.
                                sbx_signal(f->c, f->name, f->id,
                                           f->hangup ? "HUP" : forwarded[i].name, &err);
                        }
        }
}

int sbx_forward_start(struct sbx_client *c, const char *name, const char *id, bool hangup,
                      struct sbx_forward **ret)
{
        struct sbx_forward *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        *f = (struct sbx_forward){.c = c, .name = name, .id = id, .hangup = hangup};
        sigemptyset(&f->set);
        for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
                sigaddset(&f->set, forwarded[i].sig);
        sigaddset(&f->set, SIGUSR1);
        // Blocked in this thread (and so in every thread started after it):
        // the forwarder alone takes them, with sigwait.
        int r = -pthread_sigmask(SIG_BLOCK, &f->set, NULL);
        if (r == 0)
                r = -pthread_create(&f->thread, NULL, forward_run, f);
        if (r < 0) {
                free(f);
                return r;
        }
        *ret = f;
        return 0;
}

void sbx_forward_stop(struct sbx_forward *f)
{
        if (!f)
                return;
        pthread_kill(f->thread, SIGUSR1);
        pthread_join(f->thread, NULL);
        pthread_sigmask(SIG_UNBLOCK, &f->set, NULL);
        free(f);
}
