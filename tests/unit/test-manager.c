/* SPDX-License-Identifier: MIT */
/* The manager alone: a real store (SQLite in a temporary directory), a real
 * manager, and the fake runtime driver (fake-driver.h) behind rt_open, so
 * that nothing is forked. Caps under racing attaches, a delete during an
 * attach, the idle rule, the warm pool and its fallbacks, the start-up
 * reconciliation, classes and their drivers (a sandbox stays under the
 * driver it was made by, whatever its class names later, and one whose
 * driver is gone is kept, untouched), and the timers' independence
 * of a slow transition.
 *
 * The manager runs on real clocks: the lifecycle tests use timeouts of a
 * few hundred milliseconds and poll for the state they expect, each wait
 * bounded by a deadline of seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake-driver.h"
#include "src/manager/manager.h"
#include "src/store/store.h"

#define WAIT_MS 5000
#define HOUR_MS (3600 * 1000)

struct fixture {
        char dir[512];
        char state[600];
        char images[600];
        char sandboxes[700];
        struct mgr_config cfg;
        struct store *st;
        struct rt *rt;
        struct manager *m;
};

static const struct mgr_caller alice = {.deployment = "dep", .account = "alice"};

static const struct rt_driver *const drivers[] = {&fake_driver_a, &fake_driver_b};

/* The default class on the first driver, "gv" on the second. */
static const struct mgr_class with_gv[] = {
    {.name = "default", .driver = "fake"},
    {.name = "gv", .driver = "fake-b"},
};

static int open_runtime(struct fixture *f)
{
        struct rt_config rc = {.drivers = drivers, .n_drivers = 2};
        return rt_open(&rc, &f->rt, NULL);
}

static void msleep(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static int make_image(const char *images, const char *name)
{
        char p[800];
        snprintf(p, sizeof(p), "%s/%s/rootfs", images, name);
        if (mkdir_p(p, 0755) < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/%s/image.json", images, name);
        FILE *fp = fopen(p, "w");
        if (!fp)
                return -1;
        fputs("{\"name\":\"tiny\"}\n", fp);
        return fclose(fp);
}

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        const char *tmp = getenv("TMPDIR");
        snprintf(f->dir, sizeof(f->dir), "%s/sandboxd-test-manager-XXXXXX",
                 tmp && *tmp ? tmp : P_tmpdir);
        if (!mkdtemp(f->dir))
                return -1;
        snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
        snprintf(f->images, sizeof(f->images), "%s/images", f->dir);
        snprintf(f->sandboxes, sizeof(f->sandboxes), "%s/sandboxes", f->state);
        char db[700];
        snprintf(db, sizeof(db), "%s/sandboxd.db", f->state);
        if (mkdir_p(f->state, 0700) < 0 || make_image(f->images, "tiny") < 0 ||
            store_open(db, &f->st, NULL) < 0)
                return -1;
        fake_reset(&fake_a);
        fake_reset(&fake_b);
        if (open_runtime(f) < 0)
                return -1;
        f->cfg = (struct mgr_config){
            .state_dir = f->state,
            .images_dir = f->images,
            .default_image = "tiny",
            .uid_base = 100000,
            .idle_timeout_ms = HOUR_MS,
            .suspended_ttl_ms = HOUR_MS,
            .max_age_ms = HOUR_MS,
            .allow_unknown_accounts = true,
        };
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        fake_open_gate(&fake_a);
        mgr_close(f->m);
        rt_close(f->rt);
        store_close(f->st);
        int r = rm_rf_at(AT_FDCWD, f->dir);
        free(f);
        return r;
}

static void open_manager(struct fixture *f)
{
        struct sbx_error err = {0};
        int r = mgr_open(&f->cfg, f->st, f->rt, &f->m, &err);
        if (r < 0)
                fail_msg("mgr_open: %d %s", r, err.msg);
}

static void reopen_manager(struct fixture *f)
{
        mgr_close(f->m);
        f->m = NULL;
        open_manager(f);
}

/* The daemon goes away and comes back, its runtime opened again (the host
 * may run other drivers by now); its sandboxes live on meanwhile. */
static void restart_daemon(struct fixture *f)
{
        mgr_close(f->m);
        f->m = NULL;
        rt_close(f->rt);
        f->rt = NULL;
        if (open_runtime(f) < 0)
                fail_msg("rt_open");
        open_manager(f);
}

/* The driver the store keeps for name. */
static void assert_driver(struct fixture *f, const char *name, const char *driver)
{
        struct store_sandbox *v = NULL;
        size_t n = 0;
        assert_int_equal(store_sandbox_list(f->st, &v, &n, NULL), 0);
        const char *found = NULL;
        for (size_t i = 0; i < n; i++)
                if (!strcmp(v[i].name, name))
                        found = v[i].driver;
        assert_non_null(found);
        assert_string_equal(found, driver);
        free(v);
}

static uint64_t attach_ok(struct fixture *f, const struct mgr_caller *c, const char *name,
                          const char *cls)
{
        struct sbx_error err = {0};
        struct mgr_record rec;
        uint64_t id = 0;
        int r = mgr_attach(f->m, c, name, &(struct mgr_attach_opts){.sandbox_class = cls}, &id,
                           &rec, &err);
        if (r < 0)
                fail_msg("attach %s: %d %s", name, r, err.msg);
        assert_int_equal(rec.state, SBX_RUNNING);
        return id;
}

/* Its state, or -ENOENT. */
static int state_of(struct fixture *f, const char *name)
{
        struct mgr_record rec;
        int r = mgr_get(f->m, &alice, name, &rec, NULL);
        return r < 0 ? r : (int)rec.state;
}

static bool wait_state(struct fixture *f, const char *name, int want)
{
        for (int waited = 0; waited < WAIT_MS; waited += 10) {
                if (state_of(f, name) == want)
                        return true;
                msleep(10);
        }
        return false;
}

static uint64_t pool_ready(struct fixture *f)
{
        struct mgr_stats st;
        mgr_stats(f->m, &st);
        return st.pool;
}

static bool wait_pool(struct fixture *f, uint64_t want)
{
        for (int waited = 0; waited < WAIT_MS; waited += 10) {
                if (pool_ready(f) == want)
                        return true;
                msleep(10);
        }
        return false;
}

/* The reclaim is counted just after the sandbox leaves the table, so a
 * get may find it gone a moment before the counter says so. */
static bool wait_reclaimed(struct fixture *f, uint64_t want)
{
        for (int waited = 0; waited < WAIT_MS; waited += 10) {
                struct mgr_stats st;
                mgr_stats(f->m, &st);
                if (st.reclaimed == want)
                        return true;
                msleep(10);
        }
        return false;
}

static size_t store_rows(struct fixture *f)
{
        struct store_sandbox *v = NULL;
        size_t n = 0;
        assert_int_equal(store_sandbox_list(f->st, &v, &n, NULL), 0);
        free(v);
        return n;
}

static bool wait_rows(struct fixture *f, size_t want)
{
        for (int waited = 0; waited < WAIT_MS; waited += 10) {
                if (store_rows(f) == want)
                        return true;
                msleep(10);
        }
        return false;
}

static bool wait_count(struct fake *fk, const int *counter, int want)
{
        for (int waited = 0; waited < WAIT_MS; waited += 10) {
                if (fake_get(fk, counter) >= want)
                        return true;
                msleep(10);
        }
        return false;
}

static size_t dir_entries(const char *path)
{
        DIR *d = opendir(path);
        size_t n = 0;
        assert_non_null(d);
        for (struct dirent *e; (e = readdir(d));)
                n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        closedir(d);
        return n;
}

/* Nothing of any sandbox is left: no row, no directory, nothing alive,
 * nothing in the table. */
static void assert_nothing_left(struct fixture *f)
{
        struct mgr_stats st;
        mgr_stats(f->m, &st);
        assert_int_equal(
            st.sandboxes[SBX_RUNNING] + st.sandboxes[SBX_SUSPENDED] + st.sandboxes[SBX_STOPPED], 0);
        assert_int_equal(store_rows(f), 0);
        assert_int_equal(dir_entries(f->sandboxes), 0);
        assert_int_equal(fake_alive(&fake_a), 0);
}

/* ---- two attaches racing for the last place ---- */

struct racer {
        struct fixture *f;
        pthread_barrier_t *go;
        struct mgr_caller c;
        const char *name;
        int r;
};

static void *race_attach(void *arg)
{
        struct racer *a = arg;
        struct sbx_error err = {0};
        struct mgr_record rec;
        uint64_t id;
        pthread_barrier_wait(a->go);
        a->r = mgr_attach(a->f->m, &a->c, a->name, NULL, &id, &rec, &err);
        return NULL;
}

/* Rounds of two attaches let go at once; each round exactly one wins and
 * the other is told the cap is reached. The winner is deleted before the
 * next round, which must then find its place free again. */
static void race(struct fixture *f, const struct mgr_caller *c1, const struct mgr_caller *c2)
{
        for (int round = 0; round < 20; round++) {
                pthread_barrier_t go;
                pthread_barrier_init(&go, NULL, 2);
                struct racer a = {.f = f, .go = &go, .c = *c1, .name = "one"};
                struct racer b = {.f = f, .go = &go, .c = *c2, .name = "two"};
                pthread_t ta, tb;
                pthread_create(&ta, NULL, race_attach, &a);
                pthread_create(&tb, NULL, race_attach, &b);
                pthread_join(ta, NULL);
                pthread_join(tb, NULL);
                pthread_barrier_destroy(&go);
                assert_true((a.r == 0 && b.r == -EDQUOT) || (a.r == -EDQUOT && b.r == 0));
                struct racer *won = a.r == 0 ? &a : &b;
                assert_int_equal(mgr_delete(f->m, &won->c, won->name, NULL), 0);
        }
        assert_nothing_left(f);
}

static void test_race_deployment_cap(void **state)
{
        struct fixture *f = *state;
        f->cfg.max_per_deployment = 1;
        open_manager(f);
        race(f, &alice, &alice);
}

static void test_race_max_sandboxes(void **state)
{
        struct fixture *f = *state;
        f->cfg.max_sandboxes = 1; /* one uid slot */
        open_manager(f);
        const struct mgr_caller other = {.deployment = "dep2", .account = "bob"};
        race(f, &alice, &other);
}

/* ---- delete during attach ---- */

struct call {
        struct fixture *f;
        const char *name;
        int r;
        uint64_t id;
        struct sbx_error err;
};

static void *do_attach(void *arg)
{
        struct call *c = arg;
        struct mgr_record rec;
        c->r = mgr_attach(c->f->m, &alice, c->name, NULL, &c->id, &rec, &c->err);
        return NULL;
}

static void *do_delete(void *arg)
{
        struct call *c = arg;
        c->r = mgr_delete(c->f->m, &alice, c->name, &c->err);
        return NULL;
}

/* Attach "x" with its start held at the gate, delete "x" meanwhile, then
 * let the start go; at and del hold what each call returned. */
static void attach_against_delete(struct fixture *f, struct call *at, struct call *del)
{
        *at = (struct call){.f = f, .name = "x"};
        *del = (struct call){.f = f, .name = "x"};
        FAKE_SET(fake_a, gate_closed, true);
        pthread_t ta, td;
        pthread_create(&ta, NULL, do_attach, at);
        assert_int_equal(fake_wait_starting(&fake_a, 1), 0);
        pthread_create(&td, NULL, do_delete, del);
        msleep(50); /* most often the delete is waiting by now; either order must hold */
        fake_open_gate(&fake_a);
        pthread_join(ta, NULL);
        pthread_join(td, NULL);
}

/* The start wins, the delete follows it: both succeed, and the incarnation
 * the attach handed out is gone with everything it had. */
static void test_delete_during_attach(void **state)
{
        struct fixture *f = *state;
        f->cfg.max_sandboxes = 1;
        open_manager(f);
        struct call at, del;
        attach_against_delete(f, &at, &del);
        assert_int_equal(at.r, 0);
        assert_int_equal(del.r, 0);
        struct sandbox *sb;
        assert_int_equal(mgr_enter(f->m, "dep", "x", at.id, &sb, NULL), -ENOENT);
        assert_int_equal(state_of(f, "x"), -ENOENT);
        assert_int_equal(FAKE_COUNT(fake_a, destroys), 1);
        assert_nothing_left(f);
        /* Its one slot is free again. */
        attach_ok(f, &alice, "y", NULL);
}

/* The start fails while the delete waits: the attach cleans up and says
 * bring-up failed, the delete finds nothing. */
static void test_delete_during_failed_attach(void **state)
{
        struct fixture *f = *state;
        f->cfg.max_sandboxes = 1;
        open_manager(f);
        FAKE_SET(fake_a, fail_start, true);
        struct call at, del;
        attach_against_delete(f, &at, &del);
        assert_int_equal(at.r, -EHOSTDOWN);
        assert_int_equal(del.r, -ENOENT);
        assert_nothing_left(f);
        FAKE_SET(fake_a, fail_start, false);
        attach_ok(f, &alice, "y", NULL);
}

/* ---- the idle rule ---- */

static void test_idle_suspends_and_a_call_resumes(void **state)
{
        struct fixture *f = *state;
        f->cfg.idle_timeout_ms = 100;
        open_manager(f);
        uint64_t id = attach_ok(f, &alice, "idle", NULL);
        assert_true(wait_state(f, "idle", SBX_SUSPENDED));
        assert_int_equal(FAKE_COUNT(fake_a, freezes), 1);
        struct fake_box box;
        assert_true(fake_box(&fake_a, id, &box) && box.frozen);
        /* A data-plane call thaws it. */
        struct sandbox *sb;
        assert_int_equal(mgr_enter(f->m, "dep", "idle", id, &sb, NULL), 0);
        assert_int_equal(state_of(f, "idle"), SBX_RUNNING);
        assert_int_equal(FAKE_COUNT(fake_a, thaws), 1);
        assert_true(fake_box(&fake_a, id, &box) && !box.frozen);
        /* ... and holds it running while the call lasts. */
        msleep(300);
        assert_int_equal(state_of(f, "idle"), SBX_RUNNING);
        mgr_leave(f->m, sb);
        assert_true(wait_state(f, "idle", SBX_SUSPENDED));
        assert_int_equal(FAKE_COUNT(fake_a, freezes), 2);
}

static void test_suspended_ttl_reclaims(void **state)
{
        struct fixture *f = *state;
        f->cfg.idle_timeout_ms = 50;
        f->cfg.suspended_ttl_ms = 150;
        open_manager(f);
        attach_ok(f, &alice, "ttl", NULL);
        assert_true(wait_state(f, "ttl", SBX_SUSPENDED));
        assert_true(wait_state(f, "ttl", -ENOENT));
        assert_true(wait_reclaimed(f, 1));
        assert_int_equal(FAKE_COUNT(fake_a, destroys), 1);
        assert_nothing_left(f);
}

static void test_max_age_reclaims(void **state)
{
        struct fixture *f = *state;
        f->cfg.max_age_ms = 200;
        open_manager(f);
        attach_ok(f, &alice, "old", NULL);
        assert_true(wait_state(f, "old", -ENOENT));
        assert_int_equal(FAKE_COUNT(fake_a, freezes), 0); /* never idle: reclaimed while running */
        assert_true(wait_reclaimed(f, 1));
        assert_nothing_left(f);
}

/* ---- the warm pool ---- */

/* One warm sandbox of the first driver (that of the default class). */
static const struct mgr_pool one_warm[] = {{.driver = NULL, .size = 1}};

/* A new name takes the warm sandbox: renamed, not started. */
static void test_pool_assign(void **state)
{
        struct fixture *f = *state;
        f->cfg.pools = one_warm;
        f->cfg.n_pools = 1;
        open_manager(f);
        assert_true(wait_pool(f, 1));
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
        uint64_t id = attach_ok(f, &alice, "warm", NULL);
        assert_int_equal(FAKE_COUNT(fake_a, renames), 1);
        assert_string_equal(fake_a.last_rename, "warm");
        struct fake_box box;
        assert_true(fake_box(&fake_a, id, &box));
        assert_true(box.alive);
        assert_string_equal(box.hostname, "warm");
        /* The pool fills again behind it. */
        assert_true(wait_pool(f, 1));
        assert_int_equal(FAKE_COUNT(fake_a, starts), 2);
}

/* A rename that fails costs the warm start, not the attach: the sandbox
 * is stopped and started cold under its name. */
static void test_pool_rename_fails(void **state)
{
        struct fixture *f = *state;
        f->cfg.pools = one_warm;
        f->cfg.n_pools = 1;
        open_manager(f);
        assert_true(wait_pool(f, 1));
        FAKE_SET(fake_a, fail_rename, true);
        uint64_t id = attach_ok(f, &alice, "cold", NULL);
        assert_int_equal(FAKE_COUNT(fake_a, renames), 1);
        assert_true(FAKE_COUNT(fake_a, stops) >= 1);
        struct fake_box box;
        assert_true(fake_box(&fake_a, id, &box));
        assert_true(box.alive);
        assert_string_equal(box.hostname, "cold");
        assert_int_equal(state_of(f, "cold"), SBX_RUNNING);
}

/* No warm sandbox ready (its starts fail): an attach starts cold. */
static void test_pool_empty(void **state)
{
        struct fixture *f = *state;
        f->cfg.pools = one_warm;
        f->cfg.n_pools = 1;
        FAKE_SET(fake_a, fail_start_of, "sandbox");
        open_manager(f);
        assert_true(wait_count(&fake_a, &fake_a.starts, 1)); /* the pool tried */
        uint64_t id = attach_ok(f, &alice, "cold", NULL);
        assert_int_equal(pool_ready(f), 0);
        assert_int_equal(FAKE_COUNT(fake_a, renames), 0);
        struct fake_box box;
        assert_true(fake_box(&fake_a, id, &box));
        assert_string_equal(box.hostname, "cold");
        /* What the failed pool start reserved is given back. */
        assert_true(wait_rows(f, 1));
}

/* A pool per driver: an attach takes a warm sandbox of the driver its
 * class names, the record gets the class the attach named, and only that
 * pool refills. */
static void test_pool_per_driver(void **state)
{
        struct fixture *f = *state;
        static const struct mgr_class classes[] = {
            {.name = "default", .driver = "fake"},
            {.name = "ns", .driver = "fake"},
            {.name = "gv", .driver = "fake-b"},
        };
        static const struct mgr_pool pools[] = {{.driver = "fake", .size = 1},
                                                {.driver = "fake-b", .size = 1}};
        f->cfg.classes = classes;
        f->cfg.n_classes = 3;
        f->cfg.pools = pools;
        f->cfg.n_pools = 2;
        open_manager(f);
        assert_true(wait_pool(f, 2));
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
        assert_int_equal(FAKE_COUNT(fake_b, starts), 1);
        uint64_t g = attach_ok(f, &alice, "g", "gv");
        assert_int_equal(FAKE_COUNT(fake_b, renames), 1);
        assert_int_equal(FAKE_COUNT(fake_a, renames), 0);
        struct fake_box box;
        assert_true(fake_box(&fake_b, g, &box) && box.alive);
        assert_string_equal(box.hostname, "g");
        struct mgr_record rec;
        assert_int_equal(mgr_get(f->m, &alice, "g", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "gv");
        assert_driver(f, "g", "fake-b");
        assert_true(wait_pool(f, 2));
        assert_int_equal(FAKE_COUNT(fake_b, starts), 2);
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
        /* Two classes of one driver take from its one pool. */
        uint64_t n = attach_ok(f, &alice, "n", "ns");
        assert_int_equal(FAKE_COUNT(fake_a, renames), 1);
        assert_true(fake_box(&fake_a, n, &box) && box.alive);
        assert_string_equal(box.hostname, "n");
        assert_true(wait_pool(f, 2));
        uint64_t d = attach_ok(f, &alice, "d", NULL);
        assert_int_equal(FAKE_COUNT(fake_a, renames), 2);
        assert_true(fake_box(&fake_a, d, &box) && box.alive);
        assert_int_equal(mgr_get(f->m, &alice, "n", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "ns");
        assert_int_equal(mgr_get(f->m, &alice, "d", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "default");
        /* What the records say survives a restart: each class as named, and
         * the pools' entries are gone with the daemon. */
        reopen_manager(f);
        assert_int_equal(mgr_get(f->m, &alice, "g", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "gv");
        assert_int_equal(attach_ok(f, &alice, "g", "gv"), g);
        assert_int_equal(FAKE_COUNT(fake_b, thaws) + FAKE_COUNT(fake_a, thaws), 0);
}

/* A warm sandbox of one driver is never handed to an attach of a class of
 * another: that attach starts cold under its own driver, and the pool
 * keeps its entry for its own. */
static void test_pool_not_for_another_driver(void **state)
{
        struct fixture *f = *state;
        static const struct mgr_pool pools[] = {{.driver = "fake-b", .size = 1}};
        f->cfg.classes = with_gv;
        f->cfg.n_classes = 2;
        f->cfg.pools = pools;
        f->cfg.n_pools = 1;
        f->cfg.limits.network = RT_NET_NAT; /* the pool's; "none" on request */
        open_manager(f);
        assert_true(wait_pool(f, 1));
        uint64_t id = attach_ok(f, &alice, "n", NULL);
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
        assert_int_equal(FAKE_COUNT(fake_b, renames), 0);
        assert_int_equal(pool_ready(f), 1);
        struct fake_box box;
        assert_true(fake_box(&fake_a, id, &box));
        assert_string_equal(box.hostname, "n");
        assert_false(fake_box(&fake_b, id, &box));
        assert_driver(f, "n", "fake");
        /* Nor to an attach that asks for another network than the pool's. */
        struct mgr_record rec;
        uint64_t other;
        assert_int_equal(mgr_attach(f->m, &alice, "x",
                                    &(struct mgr_attach_opts){"gv", "none", NULL, NULL}, &other,
                                    &rec, NULL),
                         0);
        assert_int_equal(FAKE_COUNT(fake_b, renames), 0);
        attach_ok(f, &alice, "g", "gv");
        assert_int_equal(FAKE_COUNT(fake_b, renames), 1);
}

/* A pool is of a driver that is here and can rename a running sandbox
 * (else a warm one could never take its name), at most MGR_MAX_POOL big,
 * one per driver; a pool of size 0 is none, whatever its driver. */
static void test_pool_config(void **state)
{
        struct fixture *f = *state;
        static const struct mgr_pool big[] = {{.driver = "fake", .size = MGR_MAX_POOL + 1}};
        static const struct mgr_pool absent[] = {{.driver = "gvisor", .size = 1}};
        static const struct mgr_pool twice[] = {{.driver = "fake", .size = 1},
                                                {.driver = NULL, .size = 1}};
        static const struct mgr_pool none[] = {{.driver = "gvisor", .size = 0}};
        static const struct mgr_pool fixed[] = {{.driver = "fake-b", .size = 1}};
        static const struct {
                const struct mgr_pool *pools;
                size_t n;
                const char *msg;
        } bad[] = {
            {big, 1, "warm pool of driver 'fake': size must be 0-16"},
            {absent, 1, "warm pool of driver 'gvisor': no such driver here"},
            {twice, 2, "warm pool of driver 'fake' twice"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct sbx_error err = {0};
                f->cfg.pools = bad[i].pools;
                f->cfg.n_pools = bad[i].n;
                assert_int_equal(mgr_open(&f->cfg, f->st, f->rt, &f->m, &err), -EINVAL);
                assert_string_equal(err.msg, bad[i].msg);
                f->m = NULL;
        }
        f->cfg.pools = none;
        f->cfg.n_pools = 1;
        open_manager(f);
        mgr_close(f->m);
        f->m = NULL;
        /* fake-b, as a driver without a rename. */
        rt_close(f->rt);
        static const struct rt_driver *const fixed_name[] = {&fake_driver_a,
                                                             &fake_driver_b_fixed_name};
        struct rt_config rc = {.drivers = fixed_name, .n_drivers = 2};
        assert_int_equal(rt_open(&rc, &f->rt, NULL), 0);
        struct sbx_error err = {0};
        f->cfg.pools = fixed;
        assert_int_equal(mgr_open(&f->cfg, f->st, f->rt, &f->m, &err), -EINVAL);
        assert_string_equal(err.msg, "warm pool of driver 'fake-b': it cannot rename a running "
                                     "sandbox, so a warm one could not take its name");
        f->m = NULL;
        assert_int_equal(FAKE_COUNT(fake_a, starts) + FAKE_COUNT(fake_b, starts), 0);
}

/* ---- restart reconciliation ---- */

static void test_restart_reconciliation(void **state)
{
        struct fixture *f = *state;
        open_manager(f);
        uint64_t up = attach_ok(f, &alice, "up", NULL);
        uint64_t mute = attach_ok(f, &alice, "mute", NULL);
        uint64_t dead = attach_ok(f, &alice, "dead", NULL);
        uint64_t frozen = attach_ok(f, &alice, "frozen", NULL);
        uint64_t gone_frozen = attach_ok(f, &alice, "gone-frozen", NULL);
        assert_int_equal(mgr_stop(f->m, &alice, "frozen", NULL), 0);
        assert_int_equal(mgr_stop(f->m, &alice, "gone-frozen", NULL), 0);
        /* The daemon goes away; its sandboxes live on, some not well. */
        mgr_close(f->m);
        f->m = NULL;
        fake_agent_down(&fake_a, mute);
        fake_kill(&fake_a, dead);
        fake_kill(&fake_a, gone_frozen);
        int stops = FAKE_COUNT(fake_a, stops), thaws = FAKE_COUNT(fake_a, thaws);
        open_manager(f);
        struct fake_box box;
        /* alive, its agent answers: stays running, untouched */
        assert_int_equal(state_of(f, "up"), SBX_RUNNING);
        assert_true(fake_box(&fake_a, up, &box) && box.alive);
        /* alive, its agent dead: what is left is stopped */
        assert_int_equal(state_of(f, "mute"), SBX_STOPPED);
        assert_true(fake_box(&fake_a, mute, &box) && !box.alive);
        /* not alive: stopped, and its driver told so (what a driver holds
         * on the host for a running sandbox goes now): mute, dead and
         * gone-frozen each get a stop */
        assert_int_equal(state_of(f, "dead"), SBX_STOPPED);
        assert_int_equal(FAKE_COUNT(fake_a, stops), stops + 3);
        /* suspended and alive: stays suspended, still frozen */
        assert_int_equal(state_of(f, "frozen"), SBX_SUSPENDED);
        assert_true(fake_box(&fake_a, frozen, &box) && box.alive && box.frozen);
        assert_int_equal(FAKE_COUNT(fake_a, thaws), thaws);
        /* suspended, not alive: stopped */
        assert_int_equal(state_of(f, "gone-frozen"), SBX_STOPPED);
        /* The store says the same after another restart. */
        reopen_manager(f);
        assert_int_equal(state_of(f, "mute"), SBX_STOPPED);
        assert_int_equal(state_of(f, "frozen"), SBX_SUSPENDED);
        /* A stopped one starts again on attach, under its old id. */
        assert_int_equal(attach_ok(f, &alice, "mute", NULL), mute);
        assert_true(fake_box(&fake_a, mute, &box) && box.alive);
}

/* ---- classes ---- */

static const struct mgr_class two_classes[] = {
    {.name = "default", .driver = "fake"},
    {.name = "other", .driver = "fake-b", .image = "tiny"},
};

static void test_class_selects_driver(void **state)
{
        struct fixture *f = *state;
        f->cfg.classes = two_classes;
        f->cfg.n_classes = 2;
        open_manager(f);
        attach_ok(f, &alice, "a", NULL);
        attach_ok(f, &alice, "b", "other");
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
        assert_int_equal(FAKE_COUNT(fake_b, starts), 1);
        struct mgr_record rec;
        assert_int_equal(mgr_get(f->m, &alice, "b", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "other");
        assert_int_equal(mgr_stop(f->m, &alice, "b", NULL), 0);
        assert_int_equal(FAKE_COUNT(fake_b, freezes), 1);
        assert_int_equal(FAKE_COUNT(fake_a, freezes), 0);
        /* An unknown class, and another class for an existing sandbox. */
        struct sbx_error err = {0};
        uint64_t id;
        assert_int_equal(mgr_attach(f->m, &alice, "c",
                                    &(struct mgr_attach_opts){.sandbox_class = "gpu"}, &id, &rec,
                                    &err),
                         -ENOTSUP);
        assert_string_equal(err.msg, "sandbox class 'gpu' is not offered");
        assert_int_equal(mgr_attach(f->m, &alice, "b",
                                    &(struct mgr_attach_opts){.sandbox_class = "default"}, &id,
                                    &rec, &err),
                         -EBUSY);
        /* Without a class, an existing sandbox keeps its own. */
        attach_ok(f, &alice, "b", NULL);
        assert_int_equal(FAKE_COUNT(fake_b, thaws), 1);
}

/* A sandbox whose class is no longer offered is not used any more, and
 * never run by another driver: its attach says the class is not offered,
 * even while it still runs. Its own driver, which its record names, still
 * removes it. */
static void test_class_withdrawn(void **state)
{
        struct fixture *f = *state;
        f->cfg.classes = two_classes;
        f->cfg.n_classes = 2;
        open_manager(f);
        attach_ok(f, &alice, "b", "other");
        f->cfg.n_classes = 1;
        reopen_manager(f);
        struct sbx_error err = {0};
        struct mgr_record rec;
        uint64_t id;
        assert_int_equal(mgr_attach(f->m, &alice, "b", NULL, &id, &rec, &err), -ENOTSUP);
        assert_string_equal(err.msg, "sandbox class 'other' is not offered");
        assert_int_equal(FAKE_COUNT(fake_a, starts), 0);
        assert_int_equal(mgr_delete(f->m, &alice, "b", NULL), 0);
        assert_int_equal(FAKE_COUNT(fake_b, destroys), 1);
        assert_int_equal(FAKE_COUNT(fake_a, destroys), 0);
        assert_int_equal(FAKE_COUNT(fake_a, stops), 0);
}

/* A class must name a driver that is there; the default class is the
 * first driver when none is configured. */
static void test_class_config(void **state)
{
        struct fixture *f = *state;
        static const struct mgr_class bad[] = {{.name = "default", .driver = "gvisor"}};
        f->cfg.classes = bad;
        f->cfg.n_classes = 1;
        struct sbx_error err = {0};
        assert_int_equal(mgr_open(&f->cfg, f->st, f->rt, &f->m, &err), -EINVAL);
        assert_string_equal(err.msg, "sandbox class 'default': no runtime driver 'gvisor'");
        f->m = NULL;
        f->cfg.classes = NULL;
        f->cfg.n_classes = 0;
        open_manager(f);
        struct mgr_record rec;
        attach_ok(f, &alice, "a", NULL);
        assert_int_equal(mgr_get(f->m, &alice, "a", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "default");
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
}

/* Each class names its driver, "default" included: a sandbox is created
 * under its class's driver, and its record keeps the class asked for and
 * that driver. */
static void test_class_driver_resolution(void **state)
{
        struct fixture *f = *state;
        static const struct mgr_class classes[] = {
            {.name = "default", .driver = "fake-b"},
            {.name = "a", .driver = "fake"},
            {.name = "b", .driver = "fake-b"},
        };
        f->cfg.classes = classes;
        f->cfg.n_classes = 3;
        open_manager(f);
        attach_ok(f, &alice, "d", NULL);
        assert_int_equal(FAKE_COUNT(fake_b, starts), 1);
        assert_int_equal(FAKE_COUNT(fake_a, starts), 0);
        attach_ok(f, &alice, "x", "a");
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
        attach_ok(f, &alice, "y", "b");
        assert_int_equal(FAKE_COUNT(fake_b, starts), 2);
        struct mgr_record rec;
        assert_int_equal(mgr_get(f->m, &alice, "d", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "default");
        assert_driver(f, "d", "fake-b");
        assert_driver(f, "x", "fake");
        assert_driver(f, "y", "fake-b");
        /* Naming the default class outright is the same class. */
        attach_ok(f, &alice, "d", "default");
        assert_int_equal(FAKE_COUNT(fake_b, starts), 2);
}

/* The operator points "default" at another driver between two runs: the
 * sandboxes made before stay under the driver they were made by, for
 * every call (reconnect, resume, stop, delete); new ones get the new one. */
static void test_default_class_switch(void **state)
{
        struct fixture *f = *state;
        static const struct mgr_class before[] = {{.name = "default", .driver = "fake"}};
        static const struct mgr_class after[] = {{.name = "default", .driver = "fake-b"}};
        f->cfg.classes = before;
        f->cfg.n_classes = 1;
        open_manager(f);
        uint64_t old = attach_ok(f, &alice, "old", NULL);
        uint64_t frozen = attach_ok(f, &alice, "frozen", NULL);
        assert_int_equal(mgr_stop(f->m, &alice, "frozen", NULL), 0);
        f->cfg.classes = after;
        reopen_manager(f);
        /* Found alive under its own driver at start-up: still running. */
        assert_int_equal(state_of(f, "old"), SBX_RUNNING);
        assert_int_equal(state_of(f, "frozen"), SBX_SUSPENDED);
        assert_int_equal(attach_ok(f, &alice, "old", NULL), old);
        assert_int_equal(attach_ok(f, &alice, "frozen", NULL), frozen);
        assert_int_equal(FAKE_COUNT(fake_a, thaws), 1);
        struct mgr_record rec;
        assert_int_equal(mgr_get(f->m, &alice, "old", &rec, NULL), 0);
        assert_string_equal(rec.sandbox_class, "default");
        assert_int_equal(mgr_stop(f->m, &alice, "old", NULL), 0);
        assert_int_equal(FAKE_COUNT(fake_a, freezes), 2);
        /* A lost agent is restarted by its own driver too. */
        struct sandbox *sb;
        assert_int_equal(mgr_enter(f->m, "dep", "frozen", frozen, &sb, NULL), 0);
        fake_agent_down(&fake_a, frozen);
        assert_int_equal(mgr_recover(f->m, sb, NULL), 0);
        mgr_leave(f->m, sb);
        assert_int_equal(FAKE_COUNT(fake_a, starts), 3);
        /* Nothing of theirs ever reached the new default's driver. */
        assert_int_equal(FAKE_COUNT(fake_b, starts) + FAKE_COUNT(fake_b, thaws) +
                             FAKE_COUNT(fake_b, freezes) + FAKE_COUNT(fake_b, stops) +
                             FAKE_COUNT(fake_b, dials),
                         0);
        uint64_t fresh = attach_ok(f, &alice, "new", NULL);
        assert_int_equal(FAKE_COUNT(fake_b, starts), 1);
        struct fake_box box;
        assert_true(fake_box(&fake_b, fresh, &box) && box.alive);
        assert_driver(f, "old", "fake");
        assert_driver(f, "new", "fake-b");
        assert_int_equal(mgr_delete(f->m, &alice, "old", NULL), 0);
        assert_int_equal(FAKE_COUNT(fake_a, destroys), 1);
        assert_int_equal(FAKE_COUNT(fake_b, destroys), 0);
}

/* A class whose driver the host cannot run is offered, and an attach of it
 * is told why it cannot be had; an unknown class is not offered. Neither
 * creates anything. */
static void test_class_unavailable(void **state)
{
        struct fixture *f = *state;
        rt_close(f->rt);
        FAKE_SET(fake_b, unavailable, "runsc not found");
        assert_int_equal(open_runtime(f), 0);
        assert_null(rt_driver(f->rt, "fake-b"));
        f->cfg.classes = with_gv;
        f->cfg.n_classes = 2;
        open_manager(f);
        struct sbx_error err = {0};
        struct mgr_record rec;
        uint64_t id;
        assert_int_equal(mgr_attach(f->m, &alice, "g",
                                    &(struct mgr_attach_opts){.sandbox_class = "gv"}, &id, &rec,
                                    &err),
                         -ENOTSUP);
        assert_string_equal(err.msg,
                            "sandbox class 'gv' is not available on this host: runsc not found");
        assert_int_equal(mgr_attach(f->m, &alice, "u",
                                    &(struct mgr_attach_opts){.sandbox_class = "gpu"}, &id, &rec,
                                    &err),
                         -ENOTSUP);
        assert_string_equal(err.msg, "sandbox class 'gpu' is not offered");
        assert_int_equal(store_rows(f), 0);
        assert_int_equal(state_of(f, "g"), -ENOENT);
        assert_int_equal(FAKE_COUNT(fake_a, starts), 0);
        /* The other classes are unaffected. */
        attach_ok(f, &alice, "d", NULL);
        assert_int_equal(FAKE_COUNT(fake_a, starts), 1);
}

/* The driver a sandbox was made by is gone from the host (runsc removed):
 * the sandbox is kept as its record says, every call that needs its
 * driver says why it cannot be had, and no other driver is ever asked.
 * Once its driver is back, it is found where it was. */
static void test_driver_gone(void **state)
{
        struct fixture *f = *state;
        f->cfg.classes = with_gv;
        f->cfg.n_classes = 2;
        open_manager(f);
        uint64_t id = attach_ok(f, &alice, "g", "gv");
        attach_ok(f, &alice, "s", "gv");
        assert_int_equal(mgr_stop(f->m, &alice, "s", NULL), 0);
        FAKE_SET(fake_b, unavailable, "runsc not found");
        restart_daemon(f);
        assert_int_equal(state_of(f, "g"), SBX_RUNNING);
        assert_int_equal(state_of(f, "s"), SBX_SUSPENDED);
        struct sbx_error err = {0};
        struct mgr_record rec;
        uint64_t got;
        static const char why[] = "sandbox 'g' was created under the fake-b driver, which is "
                                  "not available on this host: runsc not found";
        assert_int_equal(mgr_attach(f->m, &alice, "g", NULL, &got, &rec, &err), -ENOTSUP);
        assert_string_equal(err.msg, why);
        assert_int_equal(mgr_attach(f->m, &alice, "g",
                                    &(struct mgr_attach_opts){.sandbox_class = "gv"}, &got, &rec,
                                    &err),
                         -ENOTSUP);
        struct sandbox *sb;
        assert_int_equal(mgr_enter(f->m, "dep", "g", id, &sb, &err), -ENOTSUP);
        assert_string_equal(err.msg, why);
        assert_int_equal(mgr_stop(f->m, &alice, "g", &err), -ENOTSUP);
        assert_int_equal(mgr_delete(f->m, &alice, "g", &err), -ENOTSUP);
        assert_int_equal(mgr_delete(f->m, &alice, "s", &err), -ENOTSUP);
        assert_int_equal(store_rows(f), 2);
        assert_int_equal(state_of(f, "g"), SBX_RUNNING);
        assert_int_equal(FAKE_COUNT(fake_a, starts) + FAKE_COUNT(fake_a, stops) +
                             FAKE_COUNT(fake_a, destroys) + FAKE_COUNT(fake_a, dials),
                         0);
        /* runsc is back: the sandbox still runs, and answers. */
        FAKE_SET(fake_b, unavailable, NULL);
        restart_daemon(f);
        assert_int_equal(attach_ok(f, &alice, "g", NULL), id);
        assert_int_equal(FAKE_COUNT(fake_b, starts), 2);
        assert_int_equal(mgr_delete(f->m, &alice, "s", NULL), 0);
}

/* ---- the timers never wait for a transition ---- */

struct recover_call {
        struct fixture *f;
        struct sandbox *sb;
        int r;
};

static void *do_recover(void *arg)
{
        struct recover_call *c = arg;
        c->r = mgr_recover(c->f->m, c->sb, NULL);
        return NULL;
}

/* "slow" restarts (its agent died) and its start hangs; its deadline comes
 * first, yet "quick" is suspended on time. And the deadline that found
 * "slow" busy is not lost: the call stays in flight past the timers' next
 * look (BUSY_RETRY_MS, 1 s), and "slow" is suspended once it ends. */
static void test_timers_not_held_by_a_start(void **state)
{
        struct fixture *f = *state;
        f->cfg.idle_timeout_ms = 150;
        open_manager(f);
        uint64_t id = attach_ok(f, &alice, "slow", NULL);
        struct recover_call rc = {.f = f};
        assert_int_equal(mgr_enter(f->m, "dep", "slow", id, &rc.sb, NULL), 0);
        fake_agent_down(&fake_a, id);
        FAKE_SET(fake_a, gate_of, "slow");
        FAKE_SET(fake_a, gate_closed, true);
        pthread_t t;
        pthread_create(&t, NULL, do_recover, &rc);
        assert_int_equal(fake_wait_starting(&fake_a, 1), 0);
        attach_ok(f, &alice, "quick", NULL);
        bool suspended = wait_state(f, "quick", SBX_SUSPENDED);
        fake_open_gate(&fake_a);
        pthread_join(t, NULL);
        assert_true(suspended);
        assert_int_equal(rc.r, 0);
        msleep(1200);
        assert_int_equal(state_of(f, "slow"), SBX_RUNNING);
        mgr_leave(f->m, rc.sb);
        assert_true(wait_state(f, "slow", SBX_SUSPENDED));
}

/* An attach may name the image of a sandbox it creates: the record keeps
 * it, the pool (of the default image) is not used for it, an unknown one
 * is -ENOPKG, and an existing sandbox of another image is -EBUSY. */
static void test_attach_image(void **state)
{
        struct fixture *f = *state;
        f->cfg.pools = one_warm;
        f->cfg.n_pools = 1;
        assert_int_equal(make_image(f->images, "py"), 0);
        open_manager(f);
        assert_true(wait_pool(f, 1));
        struct mgr_record rec;
        struct sbx_error err = {0};
        uint64_t id;
        struct mgr_attach_opts py = {.image = "py"};
        assert_int_equal(mgr_attach(f->m, &alice, "a", &py, &id, &rec, &err), 0);
        assert_string_equal(rec.image, "py");
        assert_int_equal(FAKE_COUNT(fake_a, renames), 0); /* not the pool's */
        assert_int_equal(pool_ready(f), 1);
        assert_int_equal(mgr_get(f->m, &alice, "a", &rec, NULL), 0);
        assert_string_equal(rec.image, "py");
        /* Again by its image, and without naming one: the same sandbox. */
        assert_int_equal(mgr_attach(f->m, &alice, "a", &py, &id, &rec, &err), 0);
        assert_int_equal(mgr_attach(f->m, &alice, "a", NULL, &id, &rec, &err), 0);
        struct mgr_attach_opts tiny = {.image = "tiny"};
        assert_int_equal(mgr_attach(f->m, &alice, "a", &tiny, &id, &rec, &err), -EBUSY);
        assert_non_null(strstr(err.msg, "image py"));
        struct mgr_attach_opts none = {.image = "nope"};
        assert_int_equal(mgr_attach(f->m, &alice, "b", &none, &id, &rec, &err), -ENOPKG);
        assert_int_equal(state_of(f, "b"), -ENOENT);
        struct mgr_attach_opts bad = {.image = "../x"};
        assert_int_equal(mgr_attach(f->m, &alice, "b", &bad, &id, &rec, &err), -EINVAL);
        /* The default image, named: the pool's sandbox. */
        assert_int_equal(mgr_attach(f->m, &alice, "c", &tiny, &id, &rec, &err), 0);
        assert_int_equal(FAKE_COUNT(fake_a, renames), 1);
        assert_string_equal(rec.image, "tiny");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_race_deployment_cap, setup, teardown),
            cmocka_unit_test_setup_teardown(test_race_max_sandboxes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_delete_during_attach, setup, teardown),
            cmocka_unit_test_setup_teardown(test_delete_during_failed_attach, setup, teardown),
            cmocka_unit_test_setup_teardown(test_idle_suspends_and_a_call_resumes, setup, teardown),
            cmocka_unit_test_setup_teardown(test_suspended_ttl_reclaims, setup, teardown),
            cmocka_unit_test_setup_teardown(test_max_age_reclaims, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pool_assign, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pool_rename_fails, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pool_empty, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pool_per_driver, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pool_not_for_another_driver, setup, teardown),
            cmocka_unit_test_setup_teardown(test_attach_image, setup, teardown),
            cmocka_unit_test_setup_teardown(test_pool_config, setup, teardown),
            cmocka_unit_test_setup_teardown(test_restart_reconciliation, setup, teardown),
            cmocka_unit_test_setup_teardown(test_class_selects_driver, setup, teardown),
            cmocka_unit_test_setup_teardown(test_class_withdrawn, setup, teardown),
            cmocka_unit_test_setup_teardown(test_class_config, setup, teardown),
            cmocka_unit_test_setup_teardown(test_class_driver_resolution, setup, teardown),
            cmocka_unit_test_setup_teardown(test_default_class_switch, setup, teardown),
            cmocka_unit_test_setup_teardown(test_class_unavailable, setup, teardown),
            cmocka_unit_test_setup_teardown(test_driver_gone, setup, teardown),
            cmocka_unit_test_setup_teardown(test_timers_not_held_by_a_start, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
