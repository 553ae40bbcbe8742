/* SPDX-License-Identifier: MIT */
/* {endpoint}/processes/{id}/stream and /resize. A stream is one long
 * response (docs/api.md, "Streaming output"): the agent's answer becomes
 * the start frame, then the agent connection's frames are passed on. Data
 * frames go through untouched, received straight into libmicrohttpd's
 * buffer; the exit and error frames carry agent fields and are rewritten
 * as JSON. The body is read only when the client can take more, so a slow
 * client leaves the agent's socket full, and the agent then stops reading
 * the process's pipe: that is the whole of the backpressure here.
 *
 * The response holds the sandbox entered (mgr_enter) until it ends, so an
 * attached stream is a call in flight: the sandbox is not suspended under
 * it. It ends when the agent closes (after exit or error, or because the
 * sandbox stopped), when the client goes away (its socket is watched while
 * we wait), or within a second of the daemon starting to shut down. */
#include <poll.h>
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
#define STREAM_TICK_MS 1000              /* how often a wait looks at the shutdown */
#define STREAM_FRAME_WAIT_MS 10000       /* the rest of an exit or error frame */
#define STREAM_CLIENT_SNDBUF (256 << 10) /* in flight towards the client */
#define STEP_END (-100000)               /* step(): the last frame is out */

struct stream_body {
        struct api *a;
        struct sandbox *sb; /* entered; left when the body is freed */
        int fd;             /* the agent connection */
        int client_fd;      /* the HTTP client's socket, for its hang-up; -1 unknown */
        char id[AGENT_PROC_ID_MAX + 1];
        struct buf pend; /* bytes to send before anything else */
        size_t pend_off;
        uint8_t head[AGENT_SF_HEAD]; /* the agent frame head being read */
        size_t head_got;
        uint32_t left; /* payload bytes of the current data frame still to pass */
        bool done;     /* the last frame is in pend: end after it */
        bool cut;      /* ... or the response is cut: end with an error */
        int64_t last_ms;
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

/* Wait for the agent's next bytes, the client's hang-up, a keepalive's
 * time, or the shutdown. 1: the agent has bytes; 0: look again (a
 * keepalive may be due); < 0: end the response (-EPIPE). */
static int wait_agent(struct stream_body *s, int timeout_ms)
{
        struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN},
                              {.fd = s->client_fd, .events = POLLRDHUP}};
        int n = poll(p, s->client_fd >= 0 ? 2 : 1, timeout_ms);
        if (n < 0)
                return errno == EINTR ? 0 : -EPIPE;
        if (s->client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
                return -EPIPE; /* the reader went away: let go of the agent */
        if (atomic_load(&s->a->draining))
                return -EPIPE; /* the client reconnects to the next daemon */
        return n > 0 ? 1 : 0;
}

/* Receive up to len bytes: > 0 got, 0 none now, -EPIPE the agent closed. */
static ssize_t recv_some(int fd, void *buf, size_t len)
{
        ssize_t n;
        do
                n = recv(fd, buf, len, MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n > 0)
                return n;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return 0;
        return -EPIPE;
}

/* The whole of an exit or error frame's payload (small), with a deadline. */
static int recv_payload(struct stream_body *s, uint8_t *out, uint32_t len)
{
        int64_t deadline = mono_ms() + STREAM_FRAME_WAIT_MS;
        uint32_t got = 0;
        while (got < len) {
                ssize_t n = recv_some(s->fd, out + got, len - got);
                if (n < 0)
                        return -EPIPE;
                got += (uint32_t)n;
                if (n > 0)
                        continue;
                int64_t left = deadline - mono_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                int w = wait_agent(s, (int)MIN(left, (int64_t)STREAM_TICK_MS));
                if (w < 0)
                        return w;
        }
        return 0;
}

/* An exit or error frame: rewritten as JSON into pend, and the end. */
static int take_last_frame(struct stream_body *s, uint8_t type, uint32_t len)
{
        _cleanup_free_ uint8_t *payload = malloc(len ? len : 1);
        if (!payload)
                return -ENOMEM;
        int r = recv_payload(s, payload, len);
        if (r < 0)
                return r;
        s->done = true;
        if (type == AGENT_SF_ERROR) {
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
                return take_last_frame(s, type, len);
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
        if (s->left > 0) {
                ssize_t n = recv_some(s->fd, buf, MIN(max, (size_t)s->left));
                if (n > 0)
                        s->left -= (uint32_t)n;
                return n;
        }
        ssize_t n = recv_some(s->fd, s->head + s->head_got, sizeof(s->head) - s->head_got);
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

/* The response is cut: the agent went away mid-stream, or spoke nonsense.
 * The client sees no exit frame and reconnects. */
static void cut(struct stream_body *s, ssize_t why)
{
        if (why != -EPIPE && !s->cut)
                log_warn("stream of %s: %s", s->id, strerror((int)-why));
        s->done = s->cut = true;
        s->pend.len = s->pend_off = 0;
}

/* Nothing to send: wait for the agent, or queue a keepalive when one is
 * due. False when the response is to end. */
static bool idle(struct stream_body *s)
{
        int64_t quiet = mono_ms() - s->last_ms;
        if (quiet >= STREAM_KEEPALIVE_MS && s->left == 0 && s->head_got == 0)
                return pend_frame(s, AGENT_SF_KEEPALIVE, NULL, 0) == 0;
        int64_t wait = MIN((int64_t)STREAM_TICK_MS, STREAM_KEEPALIVE_MS - quiet);
        return wait_agent(s, (int)MAX(wait, (int64_t)1)) >= 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct stream_body *s = cls;
        size_t used = 0;
        (void)pos;
        for (;;) {
                ssize_t n = used < max ? step(s, buf + used, max - used) : 0;
                if (n > 0) {
                        used += (size_t)n;
                        continue;
                }
                if (n == STEP_END) /* the last frame is out */
                        return used ? (ssize_t)used : MHD_CONTENT_READER_END_OF_STREAM;
                if (n < 0)
                        cut(s, n); /* what is already in buf goes first */
                if (used)
                        break;
                if (n < 0 || !idle(s))
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
        buf_free(&s->pend);
        mgr_leave(s->a->mgr, s->sb);
        free(s);
}

/* The client's socket: watched for its hang-up, and its send buffer kept
 * small, so that little is in flight where a reconnect cannot get it back
 * (docs/api.md, "Reconnecting"). */
static int client_socket(struct api_req *req)
{
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci)
                return -1;
        int fd = ci->connect_fd;
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
        if (!s) {
                close(fd);
                agent_stream_start_free(&st);
                api_error(resp, 503, "unavailable", "out of memory");
                return;
        }
        *s = (struct stream_body){.a = a, .fd = fd, .client_fd = client_socket(c->req)};
        snprintf(s->id, sizeof(s->id), "%s", c->id);
        buf_init(&s->pend, 0);
        r = pend_json(s, AGENT_SF_START, start_json(&st));
        agent_stream_start_free(&st);
        if (r < 0) {
                close(fd);
                buf_free(&s->pend);
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
