/* SPDX-License-Identifier: MIT */
/* Commands: exec, spawn, poll, signals, stdin, terminals, and the stream
 * of a process's output (frame.c decodes it). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* argv (required) and env ("K=V") into body; strings must be UTF-8. */
static int command_fields(json_t *body, const char *const *argv, const char *const *env,
                          const char *cwd, const char *user, struct sbx_err *err)
{
        if (!argv || !argv[0])
                return sbxc_fail(err, EINVAL, 400, "invalid_argument", "an empty command");
        json_t *a = json_array();
        json_object_set_new(body, "command", a);
        for (size_t i = 0; argv[i]; i++)
                if (json_array_append_new(a, json_string(argv[i])) < 0)
                        return sbxc_fail(err, EINVAL, 400, "invalid_argument",
                                         "argument %zu is not UTF-8", i);
        if (env && env[0]) {
                json_t *e = json_object();
                json_object_set_new(body, "env", e);
                for (size_t i = 0; env[i]; i++) {
                        const char *eq = strchr(env[i], '=');
                        _cleanup_free_ char *key =
                            eq ? strndup(env[i], (size_t)(eq - env[i])) : NULL;
                        if (!eq || eq == env[i] || !key ||
                            json_object_set_new(e, key, json_string(eq + 1)) < 0)
                                return sbxc_fail(err, EINVAL, 400, "invalid_argument",
                                                 "environment entry %zu is not KEY=VALUE (UTF-8)",
                                                 i);
                }
        }
        if ((cwd && json_object_set_new(body, "cwd", json_string(cwd)) < 0) ||
            (user && json_object_set_new(body, "user", json_string(user)) < 0))
                return sbxc_fail(err, EINVAL, 400, "invalid_argument", "cwd or user not UTF-8");
        return 0;
}

int sbx_exec(struct sbx_client *c, const char *name, const struct sbx_exec_request *req,
             struct sbx_exec_result *ret, struct sbx_err *err)
{
        if (req->stdin_data)
                return sbxc_exec_with_stdin(c, name, req, ret, err);
        json_t *b = json_object();
        int r = command_fields(b, req->argv, req->env, req->cwd, req->user, err);
        if (r < 0) {
                json_decref(b);
                return r;
        }
        // The request waits for the command: bound it under the request's
        // own timeout, so a slow command is a timedOut result, not a lost one.
        int64_t limit = MAX(1, c->timeout_ms - 1000);
        int64_t t = req->timeout_ms > 0 ? MIN(req->timeout_ms, limit) : limit;
        json_object_set_new(b, "timeoutMs", json_integer(t));
        return sbxc_data_json(c, name, "POST", "/exec", b, sbxc_parse_exec_result, ret, err);
}

int sbx_spawn(struct sbx_client *c, const char *name, const struct sbx_spawn_request *req,
              struct sbx_process *ret, struct sbx_err *err)
{
        json_t *b = json_object();
        int r = command_fields(b, req->argv, req->env, req->cwd, req->user, err);
        if (r >= 0 && (req->pty_cols || req->pty_rows)) {
                if (req->pty_cols < 1 || req->pty_cols > 4096 || req->pty_rows < 1 ||
                    req->pty_rows > 4096)
                        r = sbxc_fail(err, EINVAL, 400, "invalid_argument",
                                      "a terminal's cols and rows are 1 to 4096");
                else
                        json_object_set_new(b, "pty",
                                            json_pack("{s:I,s:I}", "cols",
                                                      (json_int_t)req->pty_cols, "rows",
                                                      (json_int_t)req->pty_rows));
        }
        if (r < 0) {
                json_decref(b);
                return r;
        }
        if (req->stdin_open)
                json_object_set_new(b, "stdin", json_true());
        if (req->lossless)
                json_object_set_new(b, "lossless", json_true());
        return sbxc_data_json(c, name, "POST", "/processes", b, sbxc_parse_process, ret, err);
}

int sbx_processes(struct sbx_client *c, const char *name, struct sbx_process_list *ret,
                  struct sbx_err *err)
{
        return sbxc_data_json(c, name, "GET", "/processes", NULL, sbxc_parse_process_list, ret,
                              err);
}

/* "/processes/ID" + suffix into out. */
static int proc_path(const char *id, const char *suffix, char *out, size_t len, struct sbx_err *err)
{
        int r = sbxc_check_id(id, err);
        if (r < 0)
                return r;
        if ((size_t)snprintf(out, len, "/processes/%s%s", id, suffix) >= len)
                return sbxc_fail(err, EINVAL, 400, "invalid_argument", "a path too long");
        return 0;
}

int sbx_poll(struct sbx_client *c, const char *name, const char *id, uint64_t out_from,
             uint64_t err_from, int wait_ms, struct sbx_output *ret, struct sbx_err *err)
{
        char q[160], path[256];
        int64_t max_wait = MAX(0, MIN(30000, c->timeout_ms - 1000));
        int64_t wait = wait_ms > 0 ? MIN(wait_ms, max_wait) : 0;
        snprintf(q, sizeof(q), "?stdoutFrom=%llu&stderrFrom=%llu&waitMs=%lld",
                 (unsigned long long)out_from, (unsigned long long)err_from, (long long)wait);
        int r = proc_path(id, q, path, sizeof(path), err);
        return r < 0 ? r : sbxc_data_json(c, name, "GET", path, NULL, sbxc_parse_output, ret, err);
}

int sbx_signal(struct sbx_client *c, const char *name, const char *id, const char *signal,
               struct sbx_err *err)
{
        char path[128];
        int r = proc_path(id, "/signal", path, sizeof(path), err);
        if (r < 0)
                return r;
        json_t *b = json_pack("{s:s}", "signal", signal ? signal : "TERM");
        if (!b)
                return sbxc_fail(err, EINVAL, 400, "invalid_argument", "a bad signal name");
        return sbxc_data_json(c, name, "POST", path, b, NULL, NULL, err);
}

int sbx_kill(struct sbx_client *c, const char *name, const char *id, struct sbx_err *err)
{
        char path[128];
        int r = proc_path(id, "", path, sizeof(path), err);
        return r < 0 ? r : sbxc_data_json(c, name, "DELETE", path, NULL, NULL, NULL, err);
}

int sbx_resize(struct sbx_client *c, const char *name, const char *id, unsigned cols, unsigned rows,
               struct sbx_err *err)
{
        char path[128];
        int r = proc_path(id, "/resize", path, sizeof(path), err);
        if (r < 0)
                return r;
        if (cols < 1 || cols > 4096 || rows < 1 || rows > 4096)
                return sbxc_fail(err, EINVAL, 400, "invalid_argument",
                                 "a terminal's cols and rows are 1 to 4096");
        json_t *b = json_pack("{s:I,s:I}", "cols", (json_int_t)cols, "rows", (json_int_t)rows);
        return sbxc_data_json(c, name, "POST", path, b, NULL, NULL, err);
}

int sbx_stdin(struct sbx_client *c, const char *name, const char *id, const void *data, size_t len,
              bool close, struct sbx_err *err)
{
        char path[128];
        int r = proc_path(id, close ? "/stdin?close=true" : "/stdin", path, sizeof(path), err);
        if (r < 0)
                return r;
        struct sbxc_request rq = {
            .method = "POST",
            .content_type = "application/octet-stream",
            .body = len ? data : "",
            .body_len = len,
            .body_fd = -1,
            .timeout_ms = c->timeout_ms,
        };
        struct sbxc_response resp;
        r = sbxc_data(c, name, path, &rq, &resp, err);
        if (r >= 0)
                sbxc_response_free(&resp);
        return r;
}

/* ---- the stream ---- */

struct stream_state {
        struct sbxc_frames frames;
        sbx_output_fn fn;
        void *ctx;
        struct sbx_stream_result *res;
        struct sbx_err *err;
        int fatal; /* a contract breach or the caller's stop: no reconnect */
        bool progressed;
};

static int on_json(void *ctx, int type, const char *p, size_t n)
{
        struct stream_state *s = ctx;
        json_t *o = NULL;
        int r = sbxc_parse_object(p, n, &o, s->err);
        if (r < 0)
                return r;
        if (type == SBXC_FRAME_ERROR) {
                r = sbxc_parse_error(404, p, n, s->err);
                if (s->err)
                        s->err->status = 0;
                json_decref(o);
                return r;
        }
        struct sbx_process st = {0};
        r = sbxc_parse_process(o, &st, s->err);
        uint64_t a = 0, b = 0;
        const char *ka = type == SBXC_FRAME_START ? "stdoutFrom" : "stdoutNext";
        const char *kb = type == SBXC_FRAME_START ? "stderrFrom" : "stderrNext";
        json_t *ja = json_object_get(o, ka), *jb = json_object_get(o, kb);
        if (r >= 0 && (!json_is_integer(ja) || !json_is_integer(jb) || json_integer_value(ja) < 0 ||
                       json_integer_value(jb) < 0))
                r = sbxc_bad(s->err, "stream: no %s/%s", ka, kb);
        if (r >= 0) {
                a = (uint64_t)json_integer_value(ja);
                b = (uint64_t)json_integer_value(jb);
        }
        if (r >= 0 && type == SBXC_FRAME_START) {
                // The sandbox may start past the asked offsets (it no longer
                // holds the bytes): the gap is reported, never silent.
                if (a < s->frames.expect[0] || b < s->frames.expect[1])
                        r = sbxc_bad(s->err, "stream: starts before the offsets asked");
                else {
                        s->res->out_dropped += a - s->frames.expect[0];
                        s->res->err_dropped += b - s->frames.expect[1];
                        s->frames.expect[0] = a;
                        s->frames.expect[1] = b;
                }
        }
        if (r >= 0 && type == SBXC_FRAME_EXIT &&
            (st.running || a != s->frames.expect[0] || b != s->frames.expect[1]))
                r = sbxc_bad(s->err, "stream: an exit that is not one, or short of the data");
        if (r >= 0) {
                sbx_process_clear(&s->res->status);
                s->res->status = st;
        } else
                sbx_process_clear(&st);
        json_decref(o);
        return r;
}

static int on_data(void *ctx, enum sbx_stream_id id, uint64_t offset, const void *p, size_t n)
{
        struct stream_state *s = ctx;
        s->progressed = true;
        return s->fn ? s->fn(s->ctx, id, offset, p, n) : 0;
}

static int on_body(void *ctx, const void *p, size_t n)
{
        struct stream_state *s = ctx;
        struct sbxc_frame_sink sink = {on_data, on_json, s};
        int r = sbxc_frames_feed(&s->frames, p, n, &sink, s->err);
        if (r != 0)
                s->fatal = r;
        return r;
}

/* One connection of the stream, from the offsets reached so far. */
static int stream_once(struct sbx_client *c, const char *name, const char *id,
                       struct stream_state *s, struct sbx_err *err)
{
        char q[128], path[256];
        uint64_t from_out = s->frames.expect[0], from_err = s->frames.expect[1];
        sbxc_frames_free(&s->frames);
        sbxc_frames_init(&s->frames);
        s->frames.expect[0] = from_out;
        s->frames.expect[1] = from_err;
        snprintf(q, sizeof(q), "/stream?stdoutFrom=%llu&stderrFrom=%llu",
                 (unsigned long long)from_out, (unsigned long long)from_err);
        int r = proc_path(id, q, path, sizeof(path), err);
        if (r < 0)
                return r;
        struct sbxc_request rq = {
            .method = "GET",
            .body_fd = -1,
            .sink = on_body,
            .sink_ctx = s,
            .max_body = SBXC_MAX_SMALL,
            .low_speed = true,
        };
        struct sbxc_response resp;
        r = sbxc_data(c, name, path, &rq, &resp, err);
        if (r >= 0)
                sbxc_response_free(&resp);
        return r;
}

void sbx_stream_result_clear(struct sbx_stream_result *r)
{
        if (r)
                sbx_process_clear(&r->status);
}

int sbx_stream(struct sbx_client *c, const char *name, const char *id,
               const struct sbx_stream_options *opts, sbx_output_fn fn, void *ctx,
               struct sbx_stream_result *ret, struct sbx_err *err)
{
        static const struct sbx_stream_options none = {0};
        if (!opts)
                opts = &none;
        struct sbx_stream_result res = {0};
        struct stream_state s = {.fn = fn, .ctx = ctx, .res = &res, .err = err};
        sbxc_frames_init(&s.frames);
        s.frames.expect[0] = opts->out_from;
        s.frames.expect[1] = opts->err_from;
        int r = 0, idle = 0;
        for (;;) {
                s.progressed = false;
                r = stream_once(c, name, id, &s, err);
                if (r == 0 && s.frames.ended)
                        break;
                // A refusal (an HTTP error), a breach or the caller's stop
                // ends it; a cut body or a broken connection mid-stream is
                // what reconnecting is for, once it got as far as a 200.
                bool cut =
                    s.frames.started && !s.fatal &&
                    (r == 0 || (err && err->status == 0 && !strcmp(err->code, "unreachable")));
                if (!cut || opts->no_reconnect || (s.progressed ? (idle = 0) : ++idle) >= 3) {
                        if (r == 0)
                                r = sbxc_bad(err, "stream: the body ended without an exit frame");
                        break;
                }
        }
        res.out_next = s.frames.expect[0];
        res.err_next = s.frames.expect[1];
        sbxc_frames_free(&s.frames);
        if (r != 0) {
                sbx_stream_result_clear(&res);
                return r;
        }
        if (ret)
                *ret = res;
        else
                sbx_stream_result_clear(&res);
        return 0;
}
