/* SPDX-License-Identifier: MIT */
/* Data-plane handlers: JSON in, one agent call, JSON out. The agent does
 * the work; this file checks input and maps results and errors. */
#include "dataplane.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "../agent/client.h"
#include "../common/log.h"
#include "api-internal.h"
#include "command.h"
#include "errors.h"

/* How long a stdin write waits for the process to take its bytes. */
#define STDIN_TIMEOUT_MS 10000

json_t *dataplane_parse_body(struct api_req *req, struct api_resp *resp)
{
        json_error_t jerr;
        json_t *j = req->body.len
                        ? json_loadb(req->body.data, req->body.len, JSON_REJECT_DUPLICATES, &jerr)
                        : NULL;
        if (!json_is_object(j)) {
                json_decref(j);
                api_error(resp, 400, "invalid_argument", "body: expected a JSON object");
                return NULL;
        }
        return j;
}

/* Output bytes as a JSON string, invalid UTF-8 replaced by U+FFFD. */
static json_t *text_json(const uint8_t *data, size_t len)
{
        size_t n = 0;
        char *s = utf8_sanitize(data, len, &n);
        json_t *j = s ? json_stringn_nocheck(s, n) : NULL;
        free(s);
        return j;
}

/* An agent call failed: the agent's error, or a sandbox lost meanwhile. */
void dataplane_agent_failure(struct sandbox *sb, int r, const struct sbx_error *err,
                             struct api_resp *resp)
{
        if (mgr_sandbox_gone(sb)) {
                struct sbx_error gone = {0};
                sbx_error_say(&gone, ENOENT, "the sandbox was deleted while the call ran");
                api_error_errno(resp, API_ERR_GONE, r, &gone);
                return;
        }
        if (api_errno_lookup(API_ERR_AGENT, r)->status >= 500)
                log_error("agent call failed: %s", err->msg);
        api_error_errno(resp, API_ERR_AGENT, r, err);
}

/* Connecting failed because nothing listens any more: the agent died (it
 * was killed, or the host rebooted under a running daemon). Restart the
 * sandbox on its files and let the caller try once more. */
bool dataplane_should_retry(struct api *a, struct sandbox *sb, int r)
{
        if (r != -ECONNREFUSED)
                return false;
        struct sbx_error err = {0};
        return mgr_recover(a->mgr, sb, &err) == 0;
}

json_t *dataplane_status_json(const struct agent_proc_status *st)
{
        char started[32];
        format_rfc3339(st->started_at, started);
        json_t *argv = json_array();
        for (size_t i = 0; i < st->argc; i++)
                json_array_append_new(argv,
                                      text_json((const uint8_t *)st->argv[i], strlen(st->argv[i])));
        json_t *j = json_pack("{s:s,s:o,s:s,s:s}", "processId", st->id, "command", argv, "state",
                              st->exited ? "exited" : "running", "startedAt", started);
        if (j && st->exited) {
                char exited[32];
                format_rfc3339(st->exited_at, exited);
                json_object_set_new(j, "exitCode", json_integer(st->exit_code));
                json_object_set_new(j, "exitedAt", json_string(exited));
        }
        if (j && st->pty)
                json_object_set_new(j, "pty", json_true());
        if (j && st->lossless)
                json_object_set_new(j, "lossless", json_true());
        if (j && st->exec) { /* an exec whose answer was lost */
                json_object_set_new(j, "exec", json_true());
                json_object_set_new(j, "timedOut", json_boolean(st->timed_out));
                json_object_set_new(j, "truncated", json_boolean(st->truncated));
        }
        return j;
}

/* A request without a command runs its image's Entrypoint and Cmd. */
static void image_command(struct sandbox *sb, json_t *body)
{
        json_t *cmd = json_object_get(body, "command");
        const struct rt_image_config *ic = mgr_image_config(sb);
        if ((cmd && !json_is_null(cmd)) || ic->n_entrypoint + ic->n_cmd == 0)
                return; /* parsing says what is wrong with a missing one */
        json_t *a = json_array();
        for (size_t i = 0; i < ic->n_entrypoint; i++)
                json_array_append_new(a, json_string(ic->entrypoint[i]));
        for (size_t i = 0; i < ic->n_cmd; i++)
                json_array_append_new(a, json_string(ic->cmd[i]));
        json_object_set_new(body, "command", a);
}

/* The image's Env under the request's own, its WorkingDir and User where
 * the request names none (docs/api.md, "Images"). *owned: the merged env
 * array to free (strings borrowed). 0 or -1 with resp set. */
static int image_defaults(struct sandbox *sb, struct api_cmd *h, const char ***owned,
                          struct api_resp *resp)
{
        const struct rt_image_config *ic = mgr_image_config(sb);
        *owned = NULL;
        if (!h->cmd.cwd && ic->workdir)
                h->cmd.cwd = ic->workdir;
        if (!h->cmd.user && ic->user)
                h->cmd.user = ic->user;
        if (ic->envc == 0)
                return 0;
        size_t n = ic->envc + h->cmd.envc;
        if (n > AGENT_MAX_ENV) {
                api_error(resp, 400, "invalid_argument",
                          "env: more than %d variables with the image's", AGENT_MAX_ENV);
                return -1;
        }
        const char **env = malloc((n + 1) * sizeof(*env));
        if (!env) {
                api_error(resp, 503, "unavailable", "out of memory");
                return -1;
        }
        /* Later entries win in the sandbox: the request's come last. */
        for (size_t i = 0; i < ic->envc; i++)
                env[i] = ic->env[i];
        for (size_t i = 0; i < h->cmd.envc; i++)
                env[ic->envc + i] = h->cmd.env[i];
        env[n] = NULL;
        h->cmd.env = env;
        h->cmd.envc = n;
        *owned = env;
        return 0;
}

static void exec_done(struct api *a, struct sandbox *sb, struct agent_pending *p, int r,
                      struct sbx_error *err, struct api_resp *resp)
{
        struct agent_exec_result res = {0};
        if (r >= 0)
                r = agent_exec_finish(p, &res, err);
        if (r < 0) {
                dataplane_agent_failure(sb, r, err, resp);
                return;
        }
        atomic_fetch_add(&a->metrics.execs, 1);
        atomic_fetch_add(&a->metrics.exec_ms_total, (unsigned long long)res.duration_ms);
        json_t *j = json_pack("{s:i,s:I,s:b,s:b}", "exitCode", res.exit_code, "durationMs",
                              (json_int_t)res.duration_ms, "timedOut", res.timed_out, "truncated",
                              res.truncated);
        api_json_text(resp, 200, j, "stdout", res.out, res.out_len, "stderr", res.err, res.err_len);
        agent_exec_result_free(&res);
}

void dataplane_exec(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        struct api_req *req = c->req;
        struct sandbox *sb = c->sb;
        json_t *body = dataplane_parse_body(req, resp);
        if (!body)
                return;
        struct api_cmd h;
        int64_t timeout = 0;
        json_t *t = json_object_get(body, "timeoutMs");
        if (t && !json_is_null(t)) {
                if (!json_is_integer(t) || json_integer_value(t) < 0) {
                        api_error(resp, 400, "invalid_argument",
                                  "timeoutMs: expected a non-negative integer");
                        json_decref(body);
                        return;
                }
                timeout = json_integer_value(t);
        }
        image_command(sb, body);
        _cleanup_free_ const char **env = NULL;
        if (api_cmd_parse(body, &h, resp) < 0 || api_spawn_parse(body, &h, resp) < 0 ||
            image_defaults(sb, &h, &env, resp) < 0) {
                api_cmd_free(&h);
                json_decref(body);
                return;
        }
        /* What only a spawn takes is checked, and means nothing here. */
        h.cmd.stdin_pipe = h.cmd.lossless = false;
        h.cmd.pty_cols = h.cmd.pty_rows = 0;
        struct agent_pending pend;
        struct sbx_error err = {0};
        int r = agent_exec_send(mgr_agent(sb), &h.cmd, timeout, &pend, &err);
        if (r < 0 && dataplane_should_retry(a, sb, r))
                r = agent_exec_send(mgr_agent(sb), &h.cmd, timeout, &pend, &err);
        api_cmd_free(&h);
        json_decref(body);
        if (r < 0) {
                dataplane_agent_failure(sb, r, &err, resp);
                return;
        }
        int64_t wait = timeout > 0 ? timeout + AGENT_CALL_SLACK_MS : -1;
        dataplane_hold_call(c, &pend, wait, true, exec_done, resp);
}

void dataplane_spawn(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        struct api_req *req = c->req;
        struct sandbox *sb = c->sb;
        json_t *body = dataplane_parse_body(req, resp);
        if (!body)
                return;
        struct api_cmd h;
        image_command(sb, body);
        _cleanup_free_ const char **env = NULL;
        if (api_cmd_parse(body, &h, resp) < 0 || api_spawn_parse(body, &h, resp) < 0 ||
            image_defaults(sb, &h, &env, resp) < 0) {
                api_cmd_free(&h);
                json_decref(body);
                return;
        }
        struct agent_proc_status st = {0};
        struct sbx_error err = {0};
        int r = agent_spawn(mgr_agent(sb), &h.cmd, &st, &err);
        if (r < 0 && dataplane_should_retry(a, sb, r))
                r = agent_spawn(mgr_agent(sb), &h.cmd, &st, &err);
        api_cmd_free(&h);
        json_decref(body);
        if (r < 0) {
                dataplane_agent_failure(sb, r, &err, resp);
                return;
        }
        api_json(resp, 200, dataplane_status_json(&st));
        agent_proc_status_free(&st);
}

void dataplane_list(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        struct sandbox *sb = c->sb;
        struct agent_proc_list l = {0};
        struct sbx_error err = {0};
        int r = agent_list(mgr_agent(sb), &l, &err);
        if (r < 0 && dataplane_should_retry(a, sb, r))
                r = agent_list(mgr_agent(sb), &l, &err);
        if (r < 0) {
                dataplane_agent_failure(sb, r, &err, resp);
                return;
        }
        json_t *arr = json_array();
        for (size_t i = 0; i < l.n; i++)
                json_array_append_new(arr, dataplane_status_json(&l.procs[i]));
        agent_proc_list_free(&l);
        api_json(resp, 200, json_pack("{s:o}", "processes", arr));
}

/* A query offset: a non-negative decimal integer, default 0. */
int dataplane_query_u64(struct api_req *req, const char *key, uint64_t max, uint64_t *ret)
{
        const char *v = api_query(req, key);
        *ret = 0;
        if (!v)
                return 0;
        if (!*v || strlen(v) > 20)
                return -1;
        uint64_t n = 0;
        for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -1;
                if (n > (UINT64_MAX - 9) / 10)
                        return -1;
                n = n * 10 + (uint64_t)(*p - '0');
        }
        if (n > max)
                return -1;
        *ret = n;
        return 0;
}

static void poll_done(struct api *a, struct sandbox *sb, struct agent_pending *pend, int r,
                      struct sbx_error *err, struct api_resp *resp)
{
        struct agent_poll_result p = {0};
        (void)a;
        if (r >= 0)
                r = agent_poll_finish(pend, &p, err);
        if (r < 0) {
                dataplane_agent_failure(sb, r, err, resp);
                return;
        }
        json_t *j = dataplane_status_json(&p.status);
        json_object_set_new(j, "stdoutNext", json_integer((json_int_t)p.out_next));
        json_object_set_new(j, "stderrNext", json_integer((json_int_t)p.err_next));
        json_object_set_new(j, "stdoutDropped", json_integer((json_int_t)p.out_dropped));
        json_object_set_new(j, "stderrDropped", json_integer((json_int_t)p.err_dropped));
        api_json_text(resp, 200, j, "stdout", p.out, p.out_len, "stderr", p.err, p.err_len);
        agent_poll_result_free(&p);
}

void dataplane_poll(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        struct api_req *req = c->req;
        struct sandbox *sb = c->sb;
        const char *id = c->id;
        uint64_t out_from, err_from, wait;
        if (dataplane_query_u64(req, "stdoutFrom", INT64_MAX, &out_from) < 0 ||
            dataplane_query_u64(req, "stderrFrom", INT64_MAX, &err_from) < 0) {
                api_error(resp, 400, "invalid_argument", "bad stdoutFrom / stderrFrom");
                return;
        }
        if (dataplane_query_u64(req, "waitMs", AGENT_MAX_WAIT_MS, &wait) < 0) {
                api_error(resp, 400, "invalid_argument", "waitMs: an integer from 0 to %d",
                          AGENT_MAX_WAIT_MS);
                return;
        }
        struct agent_pending pend;
        struct sbx_error err = {0};
        int r = agent_poll_send(mgr_agent(sb), id, out_from, err_from, (int)wait, &pend, &err);
        if (r < 0 && dataplane_should_retry(a, sb, r))
                r = agent_poll_send(mgr_agent(sb), id, out_from, err_from, (int)wait, &pend, &err);
        if (r < 0) {
                dataplane_agent_failure(sb, r, &err, resp);
                return;
        }
        dataplane_hold_call(c, &pend, (int64_t)wait + AGENT_CALL_TIMEOUT_MS, wait == 0, poll_done,
                            resp);
}

void dataplane_signal(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        struct api_req *req = c->req;
        struct sandbox *sb = c->sb;
        const char *id = c->id;
        const char *name = "TERM";
        json_t *body = NULL;
        if (req->body.len) {
                if (!(body = dataplane_parse_body(req, resp)))
                        return;
                json_t *s = json_object_get(body, "signal");
                if (s && !json_is_null(s)) {
                        if (!json_is_string(s)) {
                                json_decref(body);
                                api_error(resp, 400, "invalid_argument",
                                          "signal: expected a string");
                                return;
                        }
                        name = json_string_value(s);
                }
        }
        int sig = agent_signal_from_name(name);
        json_decref(body);
        if (sig < 0) {
                api_error(resp, 400, "invalid_argument",
                          "signal: one of TERM, KILL, INT, HUP, QUIT, USR1, USR2");
                return;
        }
        struct sbx_error err = {0};
        int r = agent_signal(mgr_agent(sb), id, sig, &err);
        if (r < 0 && dataplane_should_retry(a, sb, r))
                r = agent_signal(mgr_agent(sb), id, sig, &err);
        if (r < 0)
                dataplane_agent_failure(sb, r, &err, resp);
        else
                api_no_content(resp);
}

void dataplane_kill(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        struct sandbox *sb = c->sb;
        const char *id = c->id;
        struct sbx_error err = {0};
        int r = agent_kill(mgr_agent(sb), id, &err);
        if (r < 0 && dataplane_should_retry(a, sb, r))
                r = agent_kill(mgr_agent(sb), id, &err);
        if (r < 0)
                dataplane_agent_failure(sb, r, &err, resp);
        else
                api_no_content(resp);
}

void dataplane_stdin(struct api_call *c, struct api_resp *resp)
{
        struct api_req *req = c->req;
        struct sandbox *sb = c->sb;
        const char *id = c->id;
        const char *close_arg = api_query(req, "close");
        bool close_it = false;
        if (close_arg) {
                if (!strcmp(close_arg, "true") || !strcmp(close_arg, "1"))
                        close_it = true;
                else if (strcmp(close_arg, "false") && strcmp(close_arg, "0")) {
                        api_error(resp, 400, "invalid_argument", "close: true or false");
                        return;
                }
        }
        struct sbx_error err = {0};
        uint64_t written = 0;
        int r = agent_stdin(mgr_agent(sb), id, req->body.data, req->body.len, close_it,
                            STDIN_TIMEOUT_MS, &written, &err);
        if (r == -ETIME) {
                api_error_errno_with(resp, API_ERR_STDIN, r, &err,
                                     json_pack("{s:I}", "written", (json_int_t)written));
                return;
        }
        if (r < 0)
                dataplane_agent_failure(sb, r, &err, resp);
        else
                api_no_content(resp);
}
