/* SPDX-License-Identifier: MIT */
/* Unit tests of the API's handler threads (src/api/workers.c) and of the
 * holder of held requests (src/api/hold.c): a job that blocks never holds
 * up another (a thread each, up to the ceiling, then a queue), the stop
 * runs what is queued; a hold wakes once for its fd, once for its
 * client's hang-up even when both come at once, from its tick, and every
 * armed one at the stop, after which none can be armed. Nothing here is
 * timed: order is shown by who waits for whom. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/api/hold.h"
#include "src/api/workers.h"
#include "src/common/util.h"

/* ---- handler threads ---- */

struct gate {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool open;
        int started, done;
};

struct gated_job {
        struct api_job job;
        struct gate *g;
};

static void gated_run(struct api_job *j)
{
        struct gated_job *gj = container_of(j, struct gated_job, job);
        struct gate *g = gj->g;
        pthread_mutex_lock(&g->lock);
        g->started++;
        pthread_cond_broadcast(&g->cond);
        while (!g->open)
                pthread_cond_wait(&g->cond, &g->lock);
        g->done++;
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
}

static void wait_count(struct gate *g, int *field, int n)
{
        pthread_mutex_lock(&g->lock);
        while (*field < n)
                pthread_cond_wait(&g->cond, &g->lock);
        pthread_mutex_unlock(&g->lock);
}

/* Eight jobs that block until the gate opens all run at once: each found
 * no idle thread and got one of its own. */
static void test_blocking_jobs_get_threads(void **state)
{
        struct api_workers w;
        assert_int_equal(workers_start(&w, 2, 64), 0);
        struct gate g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
        struct gated_job jobs[8];
        for (int i = 0; i < 8; i++) {
                jobs[i] = (struct gated_job){.job.run = gated_run, .g = &g};
                workers_submit(&w, &jobs[i].job);
        }
        wait_count(&g, &g.started, 8); /* hangs if any waited behind another */
        pthread_mutex_lock(&g.lock);
        g.open = true;
        pthread_cond_broadcast(&g.cond);
        pthread_mutex_unlock(&g.lock);
        wait_count(&g, &g.done, 8);
        workers_stop(&w);
        assert_int_equal(w.threads, 0);
        assert_true(w.spawned >= 8);
}

/* At the ceiling jobs queue, and the stop runs what is queued. */
static void test_ceiling_queues_and_stop_runs_all(void **state)
{
        struct api_workers w;
        assert_int_equal(workers_start(&w, 1, 2), 0);
        struct gate g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
        struct gated_job jobs[5];
        for (int i = 0; i < 5; i++) {
                jobs[i] = (struct gated_job){.job.run = gated_run, .g = &g};
                workers_submit(&w, &jobs[i].job);
        }
        wait_count(&g, &g.started, 2);
        pthread_mutex_lock(&w.lock);
        unsigned threads = w.threads;
        pthread_mutex_unlock(&w.lock);
        assert_int_equal(threads, 2);
        pthread_mutex_lock(&g.lock);
        assert_int_equal(g.started, 2); /* the other three wait in the queue */
        g.open = true;
        pthread_cond_broadcast(&g.cond);
        pthread_mutex_unlock(&g.lock);
        workers_stop(&w);
        assert_int_equal(g.done, 5);
}

/* ---- the holder ---- */

struct probe {
        struct hold h;
        atomic_int wakes;
        atomic_uint events;
        atomic_bool want_tick;
        pthread_mutex_t lock;
        pthread_cond_t cond;
};

static void probe_wake(struct hold *h, uint32_t events)
{
        struct probe *p = container_of(h, struct probe, h);
        pthread_mutex_lock(&p->lock);
        atomic_fetch_or(&p->events, events);
        atomic_fetch_add(&p->wakes, 1);
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
}

static bool probe_tick(struct hold *h, int64_t now)
{
        (void)now;
        return atomic_load(&container_of(h, struct probe, h)->want_tick);
}

static const struct hold_ops probe_ops = {.wake = probe_wake, .tick = probe_tick};

static void probe_init(struct probe *p)
{
        *p = (struct probe){.h.ops = &probe_ops};
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->cond, NULL);
}

static void probe_wait(struct probe *p, int n)
{
        pthread_mutex_lock(&p->lock);
        while (atomic_load(&p->wakes) < n)
                pthread_cond_wait(&p->cond, &p->lock);
        pthread_mutex_unlock(&p->lock);
}

/* Bytes on the fd wake it once, with EPOLLIN, and disarm it. */
static void test_fd_wakes_once(void **state)
{
        struct holder w;
        assert_int_equal(holder_start(&w), 0);
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        struct probe p;
        probe_init(&p);
        assert_int_equal(hold_arm(&w, &p.h, sp[0], EPOLLIN, -1), 0);
        assert_int_equal(holder_count(&w), 1);
        assert_int_equal(write(sp[1], "x", 1), 1);
        probe_wait(&p, 1);
        assert_true(atomic_load(&p.events) & EPOLLIN);
        assert_int_equal(holder_count(&w), 0);
        assert_false(p.h.armed);
        holder_stop(&w);
        assert_int_equal(atomic_load(&p.wakes), 1); /* not armed: not woken at the stop */
        close(sp[0]);
        close(sp[1]);
}

/* The fd ready and the client gone in one batch: one wake, saying gone. */
static void test_both_at_once_one_wake(void **state)
{
        struct holder w;
        assert_int_equal(holder_start(&w), 0);
        int agent[2], client[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, agent), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, client), 0);
        /* Both ready before it is armed: the first epoll batch has both. */
        assert_int_equal(write(agent[1], "x", 1), 1);
        close(client[1]);
        struct probe p;
        probe_init(&p);
        assert_int_equal(hold_arm(&w, &p.h, agent[0], EPOLLIN, client[0]), 0);
        probe_wait(&p, 1);
        holder_stop(&w);
        assert_int_equal(atomic_load(&p.wakes), 1);
        assert_true(atomic_load(&p.events) & HOLD_CLIENT_GONE);
        close(agent[0]);
        close(agent[1]);
        close(client[0]);
}

/* The sweep wakes a hold whose tick asks, with HOLD_TICK; the stop wakes
 * the others with HOLD_STOP; after the stop nothing can be armed. */
static void test_tick_and_stop(void **state)
{
        struct holder w;
        assert_int_equal(holder_start(&w), 0);
        int a[2], b[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
        struct probe ticked, idle;
        probe_init(&ticked);
        probe_init(&idle);
        atomic_store(&ticked.want_tick, true);
        assert_int_equal(hold_arm(&w, &ticked.h, a[0], EPOLLIN, -1), 0);
        assert_int_equal(hold_arm(&w, &idle.h, b[0], EPOLLIN, -1), 0);
        probe_wait(&ticked, 1);
        assert_true(atomic_load(&ticked.events) & HOLD_TICK);
        assert_int_equal(atomic_load(&idle.wakes), 0);
        holder_stop(&w);
        assert_int_equal(atomic_load(&idle.wakes), 1);
        assert_true(atomic_load(&idle.events) & HOLD_STOP);
        assert_int_equal(hold_arm(&w, &idle.h, b[0], EPOLLIN, -1), -ESHUTDOWN);
        close(a[0]);
        close(a[1]);
        close(b[0]);
        close(b[1]);
}

/* A wake may arm its hold again (more of an answer is to come). */
struct rearm {
        struct probe p;
        struct holder *w;
        int fd;
};

static void rearm_wake(struct hold *h, uint32_t events)
{
        struct rearm *r = container_of(container_of(h, struct probe, h), struct rearm, p);
        char c;
        if (read(r->fd, &c, 1) == 1 && atomic_load(&r->p.wakes) == 0)
                assert_int_equal(hold_arm(r->w, h, r->fd, EPOLLIN, -1), 0);
        probe_wake(h, events);
}

static const struct hold_ops rearm_ops = {.wake = rearm_wake, .tick = probe_tick};

static void test_wake_arms_again(void **state)
{
        struct holder w;
        assert_int_equal(holder_start(&w), 0);
        int sp[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        struct rearm r = {.w = &w, .fd = sp[0]};
        probe_init(&r.p);
        r.p.h.ops = &rearm_ops;
        assert_int_equal(hold_arm(&w, &r.p.h, sp[0], EPOLLIN, -1), 0);
        assert_int_equal(write(sp[1], "a", 1), 1);
        probe_wait(&r.p, 1);
        assert_int_equal(holder_count(&w), 1); /* armed again by its wake */
        assert_int_equal(write(sp[1], "b", 1), 1);
        probe_wait(&r.p, 2);
        assert_int_equal(holder_count(&w), 0);
        holder_stop(&w);
        assert_int_equal(atomic_load(&r.p.wakes), 2);
        close(sp[0]);
        close(sp[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_blocking_jobs_get_threads),
            cmocka_unit_test(test_ceiling_queues_and_stop_runs_all),
            cmocka_unit_test(test_fd_wakes_once),
            cmocka_unit_test(test_both_at_once_one_wake),
            cmocka_unit_test(test_tick_and_stop),
            cmocka_unit_test(test_wake_arms_again),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
