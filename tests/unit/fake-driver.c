/* SPDX-License-Identifier: MIT */
/* The fake runtime driver (fake-driver.h). */
#include "fake-driver.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/agent/proto.h"

struct fake fake_a = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
struct fake fake_b = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

void fake_reset(struct fake *f)
{
        pthread_mutex_lock(&f->lock);
        memset(f->boxes, 0, sizeof(*f) - offsetof(struct fake, boxes));
        pthread_mutex_unlock(&f->lock);
}

/* f->lock held. */
static struct fake_box *find(struct fake *f, uint64_t id)
{
        for (int i = 0; i < FAKE_MAX_BOXES; i++)
                if (f->boxes[i].used && f->boxes[i].id == id)
                        return &f->boxes[i];
        return NULL;
}

static struct fake_box *find_or_add(struct fake *f, uint64_t id)
{
        struct fake_box *b = find(f, id);
        for (int i = 0; !b && i < FAKE_MAX_BOXES; i++)
                if (!f->boxes[i].used) {
                        b = &f->boxes[i];
                        memset(b, 0, sizeof(*b));
                        b->used = true;
                        b->id = id;
                }
        return b;
}

static int fail(struct sbx_error *err, int errnum, const char *what)
{
        return sbx_error_set(err, errnum, "fake driver: %s", what);
}

/* As a driver the host cannot run says so (rt_open leaves it out). */
static int fake_open(struct fake *f, void **ret_state, struct sbx_error *err)
{
        pthread_mutex_lock(&f->lock);
        f->opens++;
        const char *why = f->unavailable;
        pthread_mutex_unlock(&f->lock);
        if (why)
                return sbx_error_say(err, ENOTSUP, "%s", why);
        *ret_state = f;
        return 0;
}

static int open_a(const struct rt_config *cfg, void **ret_state, struct sbx_error *err)
{
        return fake_open(&fake_a, ret_state, err);
}

static int open_b(const struct rt_config *cfg, void **ret_state, struct sbx_error *err)
{
        return fake_open(&fake_b, ret_state, err);
}

static void fake_close(void *state)
{
        struct fake *f = state;
        pthread_mutex_lock(&f->lock);
        for (size_t i = 0; i < f->n_fds; i++)
                close(f->fds[i]);
        f->n_fds = 0;
        pthread_mutex_unlock(&f->lock);
}

/* The sandbox's files: its dir must exist, as for a real driver. */
static int make_upper(const char *dir, struct sbx_error *err)
{
        char upper[4200];
        if (snprintf(upper, sizeof(upper), "%s/upper", dir) >= (int)sizeof(upper))
                return fail(err, ENAMETOOLONG, "sandbox dir");
        if (mkdir(upper, 0700) < 0 && errno != EEXIST)
                return fail(err, errno, "no sandbox dir");
        return 0;
}

static bool gated(const struct fake *f, const char *hostname)
{
        return f->gate_closed && (!f->gate_of || !strcmp(f->gate_of, hostname));
}

static int fake_start(void *state, const struct rt_spec *spec, pid_t *ret_pid,
                      struct sbx_error *err)
{
        struct fake *f = state;
        pthread_mutex_lock(&f->lock);
        f->starts++;
        snprintf(f->last_start, sizeof(f->last_start), "%s", spec->hostname);
        if (gated(f, spec->hostname)) {
                f->starting++;
                pthread_cond_broadcast(&f->cond);
                while (gated(f, spec->hostname))
                        pthread_cond_wait(&f->cond, &f->lock);
                f->starting--;
        }
        int r = 0;
        struct fake_box *b = find_or_add(f, spec->id);
        if (f->fail_start || (f->fail_start_of && !strcmp(f->fail_start_of, spec->hostname)))
                r = fail(err, EIO, "start refused");
        else if (!b)
                r = fail(err, ENOSPC, "too many sandboxes");
        else if (b->alive)
                r = fail(err, EBUSY, "still running");
        else
                r = make_upper(spec->dir, err);
        if (r == 0) {
                snprintf(b->dir, sizeof(b->dir), "%s", spec->dir);
                snprintf(b->hostname, sizeof(b->hostname), "%s", spec->hostname);
                b->alive = b->agent_up = true;
                b->frozen = false;
                *ret_pid = (pid_t)(100000 + spec->id);
        } else if (b && !b->alive) {
                b->used = false; /* nothing of a failed start is left */
        }
        pthread_mutex_unlock(&f->lock);
        return r;
}

/* Look up the spec's live box and apply op: 0, or -ESRCH. */
static int with_box(struct fake *f, const struct rt_spec *spec, int *counter,
                    void (*op)(struct fake_box *b), struct sbx_error *err)
{
        pthread_mutex_lock(&f->lock);
        (*counter)++;
        struct fake_box *b = find(f, spec->id);
        if (b && b->alive)
                op(b);
        pthread_mutex_unlock(&f->lock);
        return b && b->alive ? 0 : fail(err, ESRCH, "no such sandbox");
}

static void do_freeze(struct fake_box *b)
{
        b->frozen = true;
}

static void do_thaw(struct fake_box *b)
{
        b->frozen = false;
}

static int fake_freeze(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct fake *f = state;
        return with_box(f, spec, &f->freezes, do_freeze, err);
}

static int fake_thaw(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct fake *f = state;
        return with_box(f, spec, &f->thaws, do_thaw, err);
}

static int fake_stop(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct fake *f = state;
        pthread_mutex_lock(&f->lock);
        f->stops++;
        struct fake_box *b = find(f, spec->id);
        if (b)
                b->alive = b->frozen = false;
        pthread_mutex_unlock(&f->lock);
        return 0;
}

static int fake_destroy(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct fake *f = state;
        pthread_mutex_lock(&f->lock);
        f->destroys++;
        struct fake_box *b = find(f, spec->id);
        if (b)
                b->used = false;
        pthread_mutex_unlock(&f->lock);
        int r = rm_rf_at(AT_FDCWD, spec->dir);
        return r < 0 ? fail(err, -r, "remove the sandbox dir") : 0;
}

static bool fake_is_alive(void *state, const struct rt_spec *spec)
{
        struct fake *f = state;
        pthread_mutex_lock(&f->lock);
        struct fake_box *b = find(f, spec->id);
        bool alive = b && b->alive;
        pthread_mutex_unlock(&f->lock);
        return alive;
}

static bool fake_any_alive(void *state)
{
        return fake_alive(state) > 0;
}

/* A socket on which the answer to one request is already waiting: an
 * empty OK, which is what a ping wants. */
static int answering_socket(struct fake *f, int *ret_fd, struct sbx_error *err)
{
        int sv[2];
        if (f->n_fds == FAKE_MAX_FDS)
                return fail(err, EMFILE, "too many dials");
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return fail(err, errno, "socketpair");
        struct agent_msg ok;
        agent_msg_init(&ok, AGENT_RESP_OK);
        int r = agent_msg_send(sv[1], &ok);
        agent_msg_free(&ok);
        if (r < 0 || fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
                close(sv[0]);
                close(sv[1]);
                return fail(err, EIO, "answer");
        }
        /* Kept open until close: the daemon's request must have somewhere
         * to go. */
        f->fds[f->n_fds++] = sv[1];
        *ret_fd = sv[0];
        return 0;
}

static int fake_dial(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        struct fake *f = state;
        pthread_mutex_lock(&f->lock);
        f->dials++;
        struct fake_box *b = find(f, spec->id);
        int r;
        if (b && b->alive && !b->frozen && b->agent_up)
                r = answering_socket(f, ret_fd, err);
        else
                r = fail(err, ECONNREFUSED, "nobody listens");
        pthread_mutex_unlock(&f->lock);
        return r;
}

static int fake_set_hostname(void *state, const struct rt_spec *spec, pid_t init_pid,
                             const char *name, struct sbx_error *err)
{
        struct fake *f = state;
        pthread_mutex_lock(&f->lock);
        f->renames++;
        snprintf(f->last_rename, sizeof(f->last_rename), "%s", name);
        struct fake_box *b = find(f, spec->id);
        int r = 0;
        if (f->fail_rename)
                r = fail(err, EIO, "rename refused");
        else if (!b || !b->alive || init_pid != (pid_t)(100000 + spec->id))
                r = fail(err, ESRCH, "no such sandbox");
        else
                snprintf(b->hostname, sizeof(b->hostname), "%s", name);
        pthread_mutex_unlock(&f->lock);
        return r;
}

/* Every operation but the optional rename. */
#define FAKE_BASE_OPS                                                                              \
        .close = fake_close, .start = fake_start, .freeze = fake_freeze, .thaw = fake_thaw,        \
        .stop = fake_stop, .destroy = fake_destroy, .is_alive = fake_is_alive,                     \
        .any_alive = fake_any_alive, .dial = fake_dial
#define FAKE_OPS FAKE_BASE_OPS, .caps = RT_CAP_HOSTNAME, .set_hostname = fake_set_hostname

const struct rt_driver fake_driver_a = {.name = "fake", .open = open_a, FAKE_OPS};
const struct rt_driver fake_driver_b = {.name = "fake-b", .open = open_b, FAKE_OPS};
/* fake-b as a driver that cannot rename a running sandbox. */
const struct rt_driver fake_driver_b_fixed_name = {.name = "fake-b", .open = open_b, FAKE_BASE_OPS};

bool fake_box(struct fake *f, uint64_t id, struct fake_box *ret)
{
        pthread_mutex_lock(&f->lock);
        struct fake_box *b = find(f, id);
        if (b)
                *ret = *b;
        pthread_mutex_unlock(&f->lock);
        return b != NULL;
}

void fake_agent_down(struct fake *f, uint64_t id)
{
        pthread_mutex_lock(&f->lock);
        struct fake_box *b = find(f, id);
        if (b)
                b->agent_up = false;
        pthread_mutex_unlock(&f->lock);
}

void fake_kill(struct fake *f, uint64_t id)
{
        pthread_mutex_lock(&f->lock);
        struct fake_box *b = find(f, id);
        if (b)
                b->alive = b->frozen = false;
        pthread_mutex_unlock(&f->lock);
}

int fake_get(struct fake *f, const int *counter)
{
        pthread_mutex_lock(&f->lock);
        int n = *counter;
        pthread_mutex_unlock(&f->lock);
        return n;
}

int fake_alive(struct fake *f)
{
        int n = 0;
        pthread_mutex_lock(&f->lock);
        for (int i = 0; i < FAKE_MAX_BOXES; i++)
                n += f->boxes[i].used && f->boxes[i].alive;
        pthread_mutex_unlock(&f->lock);
        return n;
}

int fake_wait_starting(struct fake *f, int n)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        int r = 0;
        pthread_mutex_lock(&f->lock);
        while (f->starting < n && r == 0)
                r = pthread_cond_timedwait(&f->cond, &f->lock, &ts);
        bool there = f->starting >= n;
        pthread_mutex_unlock(&f->lock);
        return there ? 0 : -ETIMEDOUT;
}

void fake_open_gate(struct fake *f)
{
        pthread_mutex_lock(&f->lock);
        f->gate_closed = false;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->lock);
}
