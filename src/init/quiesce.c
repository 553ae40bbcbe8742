/* SPDX-License-Identifier: MIT */
/* AGENT_REQ_QUIESCE: before a runtime saves the sandbox (gVisor's
 * checkpoint cannot save a socket of the host: the listener runsc made on
 * the host's path, and every connection accepted from it), PID 1 answers,
 * then closes every connection and the listener and removes its socket.
 * The daemon sees the path go. Nothing of the host is open in the sandbox
 * then; its processes go on. PID 1 then looks, every QUIESCE_POLL_US, for
 * a file named `resume` next to where its socket was, which only the host
 * can make (the directory is hidden from the workload, guard.c): once it is
 * there (after the save, or in a sandbox restored from it), PID 1 removes
 * it and listens again. */
#include "init.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define QUIESCE_POLL_US 10000
#define QUIESCE_FLUSH_US 200000 /* an answer not taken by then is dropped */

void quiesce_request(struct init_ctx *ctx)
{
        ctx->quiesce.pending = true;
        ctx->quiesce.pending_us = mono_us() + QUIESCE_FLUSH_US;
}

int64_t quiesce_deadline(const struct init_ctx *ctx)
{
        if (ctx->quiesce.pending)
                return ctx->quiesce.pending_us;
        if (ctx->quiesce.on)
                return ctx->quiesce.poll_us;
        return INT64_MAX;
}

static bool answers_out(const struct init_ctx *ctx)
{
        for (const struct conn *c = ctx->conns; c; c = c->next)
                if (c->out_off < c->out.len)
                        return false;
        return true;
}

static int resume_path(const struct init_ctx *ctx, char out[PATH_MAX])
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", ctx->listen_path);
        return path_printf(out, PATH_MAX, "%s/resume", dirname(dir));
}

static void close_all(struct init_ctx *ctx)
{
        conn_close_all(ctx);
        tcp_relay_kill_all(ctx); /* each holds a connection of the host's */
        if (ctx->listen_fd >= 0) {
                if (!ctx->listen_paused)
                        loop_unwatch(ctx, ctx->listen_fd);
                close_fd(&ctx->listen_fd);
        }
        ctx->listen_paused = false;
        unlink(ctx->listen_path);
        ctx->quiesce.pending = false;
        ctx->quiesce.on = true;
        ctx->quiesce.poll_us = 0;
}

void quiesce_tick(struct init_ctx *ctx, int64_t now_us)
{
        struct quiesce *q = &ctx->quiesce;
        if (q->pending && (answers_out(ctx) || now_us >= q->pending_us))
                close_all(ctx);
        if (!q->on || now_us < q->poll_us)
                return;
        q->poll_us = now_us + QUIESCE_POLL_US;
        char path[PATH_MAX];
        if (resume_path(ctx, path) < 0 || access(path, F_OK) < 0)
                return;
        if (listen_on_path(ctx, ctx->listen_path) < 0)
                return; /* tried again at the next poll */
        if (loop_watch(ctx, ctx->listen_fd, &ctx->listen_w, EPOLLIN) < 0) {
                close_fd(&ctx->listen_fd);
                return;
        }
        unlink(path);
        q->on = false;
}
