/* SPDX-License-Identifier: MIT */
/* sbx_exec with stdin: the wire's exec takes none, so the command is
 * spawned lossless with a stdin pipe, fed from a thread of its own (the
 * process may need its output read before it reads on, so feeding and
 * reading cannot take turns), streamed here, and killed at its deadline by
 * the same thread. The result is an exec's: 1 MiB per stream kept. */
#include "internal.h"

#include <string.h>
#include <time.h>

#define KEEP (1u << 20)
/* One stdin write holds at most this (the wire takes just under 8 MiB). */
#define STDIN_CHUNK (4u << 20)

struct run {
        struct sbx_client *c;
        const char *name;
        const char *id;
        const struct sbx_exec_request *req;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;      /* the stream ended: the feeder stops waiting */
        bool timed_out; /* the deadline passed and the process was killed */
        struct buf out, err;
        bool truncated;
};

static int keep(void *ctx, enum sbx_stream_id s, uint64_t offset, const void *data, size_t len)
{
        struct run *rn = ctx;
        struct buf *b = s == SBX_STDERR ? &rn->err : &rn->out;
        size_t room = b->len < KEEP ? KEEP - b->len : 0;
        if (len > room)
                rn->truncated = true;
        return buf_append(b, data, MIN(len, room));
}

/* Feed stdin, then wait for the end or the deadline. */
static void *feeder(void *arg)
{
        struct run *rn = arg;
        const char *p = rn->req->stdin_data;
        size_t left = rn->req->stdin_len;
        int r = 0;
        do {
                size_t n = MIN(left, STDIN_CHUNK);
                struct sbx_err err = {0};
                // A process that exits without reading all of it is not an
                // error of the call: its exit says what happened.
                r = sbx_stdin(rn->c, rn->name, rn->id, p, n, n == left, &err);
                p += n;
                left -= n;
        } while (r >= 0 && left > 0);
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        int64_t t = rn->req->timeout_ms;
        deadline.tv_sec += t / 1000;
        deadline.tv_nsec += (t % 1000) * 1000000;
        if (deadline.tv_nsec >= 1000000000) {
                deadline.tv_sec++;
                deadline.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&rn->lock);
        int w = 0;
        while (!rn->done && w != ETIMEDOUT)
                w = t > 0 ? pthread_cond_timedwait(&rn->cond, &rn->lock, &deadline)
                          : pthread_cond_wait(&rn->cond, &rn->lock);
        bool kill = !rn->done;
        rn->timed_out = kill;
        pthread_mutex_unlock(&rn->lock);
        if (kill) {
                struct sbx_err err = {0};
                sbx_signal(rn->c, rn->name, rn->id, "KILL", &err);
        }
        return NULL;
}

static int result(struct run *rn, const struct sbx_stream_result *res, int64_t started,
                  struct sbx_exec_result *ret, struct sbx_err *err)
{
        if (buf_terminate(&rn->out) < 0 || buf_terminate(&rn->err) < 0)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        struct sbx_exec_result x = {
            .exit_code = res->status.exit_code,
            .timed_out = rn->timed_out,
            .truncated = rn->truncated,
            .duration_ms = mono_ms() - started,
            .out_len = rn->out.len,
            .err_len = rn->err.len,
        };
        x.out = TAKE_PTR(rn->out.data);
        x.err = TAKE_PTR(rn->err.data);
        *ret = x;
        return 0;
}

int sbxc_exec_with_stdin(struct sbx_client *c, const char *name, const struct sbx_exec_request *req,
                         struct sbx_exec_result *ret, struct sbx_err *err)
{
        struct sbx_spawn_request sp = {.argv = req->argv,
                                       .env = req->env,
                                       .cwd = req->cwd,
                                       .user = req->user,
                                       .stdin_open = true,
                                       .lossless = true};
        struct sbx_process p = {0};
        int64_t started = mono_ms();
        int r = sbx_spawn(c, name, &sp, &p, err);
        if (r < 0)
                return r;
        struct run rn = {.c = c, .name = name, .id = p.id, .req = req};
        buf_init(&rn.out, 0);
        buf_init(&rn.err, 0);
        pthread_mutex_init(&rn.lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&rn.cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_t t;
        r = -pthread_create(&t, NULL, feeder, &rn);
        bool feeding = r == 0;
        struct sbx_stream_result res = {0};
        if (r < 0)
                sbxc_fail(err, -r, 0, "internal", "pthread_create: %s", strerror(-r));
        else
                r = sbx_stream(c, name, p.id, NULL, keep, &rn, &res, err);
        pthread_mutex_lock(&rn.lock);
        rn.done = true;
        pthread_cond_broadcast(&rn.cond);
        pthread_mutex_unlock(&rn.lock);
        if (r != 0) {
                // The feeder may still be writing: the process's end stops it.
                struct sbx_err kerr = {0};
                sbx_signal(c, name, p.id, "KILL", &kerr);
        }
        if (feeding)
                pthread_join(t, NULL);
        if (r == 0)
                r = result(&rn, &res, started, ret, err);
        struct sbx_err kerr = {0};
        sbx_kill(c, name, p.id, &kerr); /* forget the record */
        sbx_stream_result_clear(&res);
        sbx_process_clear(&p);
        buf_free(&rn.out);
        buf_free(&rn.err);
        pthread_cond_destroy(&rn.cond);
        pthread_mutex_destroy(&rn.lock);
        return r;
}
