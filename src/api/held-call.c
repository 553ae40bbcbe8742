/* SPDX-License-Identifier: MIT */
/* An exec or a long poll, once its request is sent: the connection is
 * suspended and the agent's socket watched by the holder (hold.h) until
 * the answer is whole, the client hangs up (the agent connection is then
 * closed: the agent keeps an exec's record, a poll is forgotten), the
 * call's deadline passes or the daemon stops. A call usually answered at
 * once is first waited for briefly where it was sent, which saves the
 * trip through the holder. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "api-internal.h"
#include "dataplane.h"

#define HELD_SPIN_MS 3               /* how long a quick call is waited for in place */
#define HELD_BIG_ANSWER (256u << 10) /* a bigger answer is turned into JSON off the holder */

struct held_call {
        struct hold hold;
        struct api_job job;
        struct api *a;
        struct api_req *req;
        struct sandbox *sb; /* entered; left once answered */
        struct agent_pending p;
        int64_t deadline; /* mono ms; < 0: none */
        int r;
        struct sbx_error err;
        held_call_done *done;
};

static void held_free(struct held_call *h)
{
        agent_pending_free(&h->p);
        mgr_leave(h->a->mgr, h->sb);
        free(h);
}

/* Answer (h->r says how it ended) and let go of everything. */
static void finish(struct held_call *h)
{
        struct api_req *req = h->req;
        struct api_resp *resp = api_resp_new();
        if (resp && h->r == -ESHUTDOWN)
                api_error(resp, 503, "unavailable", "the server is shutting down");
        else if (resp)
                h->done(h->a, h->sb, &h->p, h->r, &h->err, resp);
        held_free(h);
        api_answer(req, resp);
}

static void finish_job(struct api_job *j)
{
        finish(container_of(j, struct held_call, job));
}

static void held_wake(struct hold *hd, uint32_t events)
{
        struct held_call *h = container_of(hd, struct held_call, hold);
        if (events & HOLD_CLIENT_GONE) { /* nobody to answer */
                struct api_req *req = h->req;
                held_free(h);
                api_answer(req, NULL);
                return;
        }
        if (events & HOLD_STOP) {
                h->r = -ESHUTDOWN;
        } else if (events & HOLD_TICK) {
                h->r = sbx_error_set(&h->err, ETIMEDOUT, "agent: no answer in time");
        } else {
                int r = agent_pending_read(&h->p, &h->err);
                if (r == 0 &&
                    hold_arm(&h->a->holder, &h->hold, h->p.fd, EPOLLIN, api_client_fd(h->req)) == 0)
                        return; /* more is to come */
                h->r = r == 0 ? -ESHUTDOWN : (r < 0 ? r : 0);
                if (r > 0 && h->p.len > HELD_BIG_ANSWER) {
                        h->job.run = finish_job;
                        workers_submit(&h->a->workers, &h->job);
                        return;
                }
        }
        finish(h);
}

static bool held_tick(struct hold *hd, int64_t now)
{
        struct held_call *h = container_of(hd, struct held_call, hold);
        return h->deadline >= 0 && now >= h->deadline;
}

static const struct hold_ops held_ops = {.wake = held_wake, .tick = held_tick};

void dataplane_hold_call(struct api_call *c, struct agent_pending *p, int64_t wait_ms, bool spin,
                         held_call_done *done, struct api_resp *resp)
{
        struct sbx_error err = {0};
        if (spin) {
                struct pollfd pf = {.fd = p->fd, .events = POLLIN};
                int r = 0;
                while (poll(&pf, 1, HELD_SPIN_MS) > 0 && (r = agent_pending_read(p, &err)) == 0)
                        ;
                if (r != 0) { /* answered (or failed) already */
                        done(c->a, c->sb, p, r < 0 ? r : 0, &err, resp);
                        agent_pending_free(p);
                        return;
                }
        }
        struct held_call *h = calloc(1, sizeof(*h));
        if (!h) {
                agent_pending_free(p);
                api_error(resp, 503, "unavailable", "out of memory");
                return;
        }
        struct sandbox *sb = TAKE_PTR(c->sb);
        *h = (struct held_call){.hold.ops = &held_ops,
                                .a = c->a,
                                .req = c->req,
                                .sb = sb,
                                .p = *p,
                                .deadline = wait_ms < 0 ? -1 : mono_ms() + wait_ms,
                                .done = done};
        *p = (struct agent_pending){.fd = -1};
        api_defer(resp);
        int r = hold_arm(&h->a->holder, &h->hold, h->p.fd, EPOLLIN, api_client_fd(h->req));
        if (r < 0) {
                h->r = r == -ESHUTDOWN
                           ? r
                           : sbx_error_set(&h->err, -r, "hold the call: %s", strerror(-r));
                finish(h);
        }
}
