/* SPDX-License-Identifier: MIT */
/* {endpoint}/processes/{id}/stream and /resize. A stream is one long
 * response (docs/api.md, "Streaming output"): the agent's answer becomes
 * the start frame, then the agent connection's frames are passed on. Data
 * frames go through untouched, received straight into libmicrohttpd's
 * buffer; the exit and error frames carry agent fields and are rewritten
 * as JSON. The body is read only when the client can take more, so a slow
 * client leaves the agent's socket full, and the agent then stops reading
 * the process's pipe: that is the whole of the backpressure here. The
 * reader never waits: with nothing to send it suspends the connection and
 * arms its hold (hold.h) on the agent's socket, so a quiet stream costs no
 * thread.
 *
 * The response holds the sandbox entered (mgr_enter) until it ends, so an
 * attached stream is a call in flight: the sandbox is not suspended under
 * it. It ends when the agent closes (after exit or error, or because the
 * sandbox stopped), when the client goes away (its socket is watched while
 * we wait), or within a second of the daemon starting to shut down. */
#include <sys/epoll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../agent/client.h"
#include "../common/log.h"
#include "api-internal.h"
#include "command.h"
#include "dataplane.h"
#include "errors.h"

#define STREAM_BLOCK (128u << 10)        /* what libmicrohttpd is asked to buffer */
#define STREAM_KEEPALIVE_MS 15000        /* a frame at least this often */
#define STREAM_FRAME_WAIT_MS 10000       /* the rest of an exit or error frame */
#define STREAM_CLIENT_SNDBUF (256 << 10) /* in flight towards the client */
#define STEP_END (-100000)               /* step(): the last frame is out */
#define STREAM_IN (128u << 10)           /* what one recv() from the agent may take */

struct stream_body {
        struct api *a;
        struct api_req *req; /* its request, suspended while the hold is armed */
        struct hold hold;
        bool gone;          /* woken because the client hung up, or the stop */
        struct sandbox *sb; /* entered; left when the body is freed */
        int fd;             /* the agent connection */
        int client_fd;      /* the HTTP client's socket, for its hang-up; -1 unknown */
        char id[AGENT_PROC_ID_MAX + 1];
        uint8_t *in; /* received from the agent, not yet taken: [in_off, in_len) */
        size_t in_off, in_len;
        struct buf pend; /* bytes to send before anything else */
        size_t pend_off;
        uint8_t head[AGENT_SF_HEAD]; /* the agent frame head being read */
        size_t head_got;
        uint32_t left; /* payload bytes of the current data frame still to pass */
        bool done;     /* the last frame is in pend: end after it */
        bool cut;      /* ... or the response is cut: end with an error */
        int64_t last_ms;
        uint8_t *last; /* an exit or error frame's payload, as it comes */
        uint32_t last_len, last_got;
        uint8_t last_type;
        int64_t last_since;
};

/* ---------------------------------------------------------------- frames */

static int pend_frame(struct stream_body *s, uint8_t type, const void *payload, size_t len)
{
        uint8_t head[AGENT_SF_HEAD];
        if (len > AGENT_SF_MAX_LEN)
                return -E2BIG;
        agent_sf_head_encode(head, type, (uint32_t)len, 0);
        if (buf_append(&s->pend, head, sizeof(head)) < 0 ||
            (len && buf_append(&s->pend, payload, len) < 0))
                return -ENOMEM;
        return 0;
}

static int pend_json(struct stream_body *s, uint8_t type, json_t *j)
{
        if (!j)
                return -ENOMEM;
        char *text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        int r = pend_frame(s, type, text, strlen(text));
        free(text);
        return r;
}

/* An error frame as the API would have answered the same error. */
static int pend_error(struct stream_body *s, int r, const struct sbx_error *err)
{
        struct api_resp tmp = {.body_fd = -1};
        buf_init(&tmp.body, 0);
        api_error_errno(&tmp, API_ERR_AGENT, r, err);
        int e = pend_frame(s, AGENT_SF_ERROR, tmp.body.data, tmp.body.len);
        buf_free(&tmp.body);
        return e;
}

static json_t *start_json(const struct agent_stream_start *st)
{
        json_t *j = dataplane_status_json(&st->status);
        if (!j)
                return NULL;
        json_object_set_new(j, "stdoutFrom", json_integer((json_int_t)st->from[0]));
        json_object_set_new(j, "stderrFrom", json_integer((json_int_t)st->from[1]));
        json_object_set_new(j, "stdoutDropped", json_integer((json_int_t)st->dropped[0]));
        json_object_set_new(j, "stderrDropped", json_integer((json_int_t)st->dropped[1]));
        return j;
}

/* ------------------------------------------------------------ the agent */

/* Up to len of the agent's bytes: > 0 got, 0 none now, -EPIPE it closed.
 * One recv() takes as much as there is (up to STREAM_IN), however small
 * its frames: a process that writes 4 KiB at a time costs one system call
 * per 128 KiB here, not two per 4 KiB. */
static ssize_t recv_some(struct stream_body *s, void *buf, size_t len)
{
        if (s->in_off == s->in_len) {
                ssize_t n;
                do
                        n = recv(s->fd, s->in, STREAM_IN, MSG_DONTWAIT);
                while (n < 0 && errno == EINTR);
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return 0;
                if (n <= 0)
                        return -EPIPE;
                s->in_off = 0;
                s->in_len = (size_t)n;
        }
        size_t k = MIN(len, s->in_len - s->in_off);
        memcpy(buf, s->in + s->in_off, k);
        s->in_off += k;
        return (ssize_t)k;
}

/* An exit or error frame: its payload is read as it comes (last_more),
 * then rewritten as JSON into pend (last_done), and that is the end. */
static int last_start(struct stream_body *s, uint8_t type, uint32_t len)
{
        if (!(s->last = malloc(len ? len : 1)))
                return -ENOMEM;
        s->last_type = type;
        s->last_len = len;
        s->last_got = 0;
        s->last_since = mono_ms();
        return 0;
}

/* 1: the payload is whole; 0: more is to come; < 0: cut. */
static int last_more(struct stream_body *s)
{
        while (s->last_got < s->last_len) {
                ssize_t n = recv_some(s, s->last + s->last_got, s->last_len - s->last_got);
                if (n < 0)
                        return -EPIPE;
                if (n == 0)
                        return 0;
                s->last_got += (uint32_t)n;
        }
        return 1;
}

static int last_done(struct stream_body *s)
{
        _cleanup_free_ uint8_t *payload = TAKE_PTR(s->last);
        uint32_t len = s->last_len;
        s->done = true;
        if (s->last_type == AGENT_SF_ERROR) {
                struct sbx_error err = {0};
                return pend_error(s, agent_stream_error_decode(payload, len, &err), &err);
        }
        struct agent_proc_status st;
        uint64_t next[2];
        if (agent_stream_exit_decode(payload, len, &st, next) < 0)
                return -EPROTO;
        json_t *j = dataplane_status_json(&st);
        agent_proc_status_free(&st);
        if (j) {
                json_object_set_new(j, "stdoutNext", json_integer((json_int_t)next[0]));
                json_object_set_new(j, "stderrNext", json_integer((json_int_t)next[1]));
        }
        return pend_json(s, AGENT_SF_EXIT, j);
}

/* The agent's frame head is in: pass a data frame's on, take the rest. */
static int on_head(struct stream_body *s)
{
        uint8_t type;
        uint32_t len;
        uint64_t off;
        s->head_got = 0;
        if (agent_sf_head_decode(s->head, &type, &len, &off) < 0)
                return -EPROTO;
        if (type == AGENT_SF_STDOUT || type == AGENT_SF_STDERR) {
                s->left = len;
                return buf_append(&s->pend, s->head, sizeof(s->head)) < 0 ? -ENOMEM : 0;
        }
        if (type == AGENT_SF_EXIT || type == AGENT_SF_ERROR)
                return last_start(s, type, len);
        return -EPROTO; /* start and keepalive are ours; nothing else exists */
}

/* ------------------------------------------------------------- the body */

static size_t take_pend(struct stream_body *s, char *buf, size_t max)
{
        size_t n = MIN(max, s->pend.len - s->pend_off);
        memcpy(buf, s->pend.data + s->pend_off, n);
        s->pend_off += n;
        if (s->pend_off == s->pend.len)
                s->pend.len = s->pend_off = 0;
        return n;
}

/* One step towards filling buf: > 0 bytes added, 0 nothing now (the agent
 * has nothing), STEP_END all is sent, another < 0 the response is cut. */
static ssize_t step(struct stream_body *s, char *buf, size_t max)
{
        if (s->pend_off < s->pend.len)
                return (ssize_t)take_pend(s, buf, max);
        if (s->done)
                return s->cut ? -EPIPE : STEP_END;
        if (s->last) {
                int r = last_more(s);
                if (r <= 0)
                        return r;
                if ((r = last_done(s)) < 0)
                        return r;
                return step(s, buf, max);
        }
        if (s->left > 0) {
                ssize_t n = recv_some(s, buf, MIN(max, (size_t)s->left));
                if (n > 0)
                        s->left -= (uint32_t)n;
                return n;
        }
        ssize_t n = recv_some(s, s->head + s->head_got, sizeof(s->head) - s->head_got);
        if (n <= 0)
                return n;
        s->head_got += (size_t)n;
        if (s->head_got < sizeof(s->head))
                return step(s, buf, max);
        int r = on_head(s);
        if (r < 0)
                return r;
        return step(s, buf, max);
}

/* The agent went away because the sandbox was deleted: that is the end,
 * said in an error frame (a reconnect would find no sandbox). */
static bool end_gone(struct stream_body *s, ssize_t why)
{
        /* Only between two frames of ours: inside a data frame whose
         * bytes did not all come, the framing is lost and all we can do is
         * cut. */
        if (why != -EPIPE || s->done || s->left > 0 || s->last || !mgr_sandbox_gone(s->sb))
                return false;
        struct sbx_error err = {0};
        sbx_error_say(&err, ENOENT, "the sandbox was deleted while the stream ran");
        struct api_resp tmp = {.body_fd = -1};
        buf_init(&tmp.body, 0);
        api_error_errno(&tmp, API_ERR_GONE, -ENOENT, &err);
        s->head_got = 0; /* a head that came only in part is dropped */
        bool ok = pend_frame(s, AGENT_SF_ERROR, tmp.body.data, tmp.body.len) == 0;
        buf_free(&tmp.body);
        s->done = true;
        return ok;
}

/* The response is cut: the agent went away mid-stream, or spoke nonsense.
 * The client sees no exit frame and reconnects. */
static void cut(struct stream_body *s, ssize_t why)
{
        if (why != -EPIPE && why != -ECONNRESET && why != -ESHUTDOWN && !s->cut)
                log_warn("stream of %s: %s", s->id, strerror((int)-why));
        s->done = s->cut = true;
        s->pend.len = s->pend_off = 0;
}

/* Nothing to send: queue a keepalive when one is due (1), else suspend
 * the connection and arm the hold until the agent has bytes, the client
 * hangs up or a keepalive is due (0); < 0 when the response is to end. */
static int idle(struct stream_body *s)
{
        int64_t now = mono_ms();
        bool between = s->left == 0 && s->head_got == 0 && !s->last;
        if (now - s->last_ms >= STREAM_KEEPALIVE_MS && between)
                return pend_frame(s, AGENT_SF_KEEPALIVE, NULL, 0) == 0 ? 1 : -ENOMEM;
        if (s->last && now - s->last_since > STREAM_FRAME_WAIT_MS)
                return -ETIMEDOUT;
        api_suspend(s->req);
        int r = hold_arm(&s->a->holder, &s->hold, s->fd, EPOLLIN, s->client_fd);
        if (r < 0)
                api_resume(s->req);
        return r;
}

static void stream_wake(struct hold *h, uint32_t events)
{
        struct stream_body *s = container_of(h, struct stream_body, hold);
        if (events & (HOLD_CLIENT_GONE | HOLD_STOP))
                s->gone = true;
        api_resume(s->req);
}

static bool stream_tick(struct hold *h, int64_t now)
{
        struct stream_body *s = container_of(h, struct stream_body, hold);
        return atomic_load(&s->a->draining) || now - s->last_ms >= STREAM_KEEPALIVE_MS ||
               (s->last && now - s->last_since > STREAM_FRAME_WAIT_MS);
}

static const struct hold_ops stream_hold = {.wake = stream_wake, .tick = stream_tick};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct stream_body *s = cls;
        size_t used = 0;
        (void)pos;
        if (s->gone) /* the reader went away: let go of the agent */
                cut(s, -ECONNRESET);
        else if (atomic_load(&s->a->draining)) /* the client reconnects to the next daemon */
                cut(s, -ESHUTDOWN);
        for (;;) {
                ssize_t n = used < max ? step(s, buf + used, max - used) : 0;
                if (n > 0) {
                        used += (size_t)n;
                        continue;
                }
                if (n == STEP_END) /* the last frame is out */
                        return used ? (ssize_t)used : MHD_CONTENT_READER_END_OF_STREAM;
                if (n < 0 && end_gone(s, n))
                        continue;
                if (n < 0)
                        cut(s, n); /* what is already in buf goes first */
                if (used)
                        break;
                if (n < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                int w = idle(s);
                if (w > 0)
                        continue;
                if (w == 0)
                        return 0; /* suspended: called again once woken */
                cut(s, w);
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        s->last_ms = mono_ms();
        atomic_fetch_add(&s->a->metrics.bytes_out, used);
        return (ssize_t)used;
}

static void stream_free(void *cls)
{
        struct stream_body *s = cls;
        close_fd(&s->fd);
        free(s->in);
        free(s->last);
        buf_free(&s->pend);
        mgr_leave(s->a->mgr, s->sb);
        free(s);
}

/* The client's socket: watched for its hang-up, and its send buffer kept
 * small, so that little is in flight where a reconnect cannot get it back
 * (docs/api.md, "Reconnecting"). */
static int client_socket(struct api_req *req)
{
        int fd = api_client_fd(req);
        if (fd < 0)
                return -1;
        int sndbuf = STREAM_CLIENT_SNDBUF;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
        return fd;
}

void dataplane_stream(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        struct sandbox *sb = c->sb;
        uint64_t from[2];
        if (dataplane_query_u64(c->req, "stdoutFrom", INT64_MAX, &from[0]) < 0 ||
            dataplane_query_u64(c->req, "stderrFrom", INT64_MAX, &from[1]) < 0) {
                api_error(resp, 400, "invalid_argument", "bad stdoutFrom / stderrFrom");
                return;
        }
        struct agent_stream_start st = {0};
        struct sbx_error err = {0};
        int fd = -1;
        int r = agent_stream_open(mgr_agent(sb), c->id, from[0], from[1], &fd, &st, &err);
        if (r < 0 && dataplane_should_retry(a, sb, r))
                r = agent_stream_open(mgr_agent(sb), c->id, from[0], from[1], &fd, &st, &err);
        if (r < 0) {
                dataplane_agent_failure(sb, r, &err, resp);
                return;
        }
        struct stream_body *s = calloc(1, sizeof(*s));
        uint8_t *in = malloc(STREAM_IN);
        if (!s || !in) {
                free(s);
                free(in);
                close(fd);
                agent_stream_start_free(&st);
                api_error(resp, 503, "unavailable", "out of memory");
                return;
        }
        *s = (struct stream_body){.a = a,
                                  .req = c->req,
                                  .hold.ops = &stream_hold,
                                  .fd = fd,
                                  .client_fd = client_socket(c->req),
                                  .in = in};
        snprintf(s->id, sizeof(s->id), "%s", c->id);
        buf_init(&s->pend, 0);
        r = pend_json(s, AGENT_SF_START, start_json(&st));
        agent_stream_start_free(&st);
        if (r < 0) {
                close(fd);
                buf_free(&s->pend);
                free(s->in);
                free(s);
                api_error(resp, 503, "unavailable", "out of memory");
                return;
        }
        /* The response owns the sandbox reference from here on. */
        s->sb = TAKE_PTR(c->sb);
        s->last_ms = mono_ms();
        resp->status = 200;
        resp->content_type = "application/vnd.sandboxd.stream";
        resp->source = (struct api_body_source){
            .read = stream_read, .free = stream_free, .cls = s, .block = STREAM_BLOCK};
}

void dataplane_resize(struct api_call *c, struct api_resp *resp)
{
        json_t *body = dataplane_parse_body(c->req, resp);
        unsigned cols, rows;
        if (!body)
                return;
        int r = api_pty_size(body, "body", &cols, &rows, resp);
        json_decref(body);
        if (r < 0)
                return;
        struct sbx_error err = {0};
        r = agent_resize(mgr_agent(c->sb), c->id, cols, rows, &err);
        if (r < 0 && dataplane_should_retry(c->a, c->sb, r))
                r = agent_resize(mgr_agent(c->sb), c->id, cols, rows, &err);
        if (r < 0)
                dataplane_agent_failure(c->sb, r, &err, resp);
        else
                api_no_content(resp);
}
