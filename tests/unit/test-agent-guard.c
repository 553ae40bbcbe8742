/* SPDX-License-Identifier: MIT */
/* sandbox-init of the gvisor class, outside any sandbox: close_range as
 * gVisor answers it, and --guard (the workload's own pid and mount
 * namespace, its guard as PID 1) in a pid and mount namespace of the
 * test's own.
 *
 *   test-agent-guard PATH-TO-sandbox-init
 */
#include "agent-harness.h"

/* ---------------------------------------------------- a second instance */

/* A sandbox-init of its own, listening on <dir>/<name>/agent.sock, for
 * tests that start it differently from the shared one. */
struct side {
        char dir[300];
        struct agent_peer peer;
        pid_t pid;     /* sandbox-init, as the test sees it */
        pid_t wrapper; /* its parent with new namespaces; -1 without */
};

/* One at a time, static: the teardown stops it after a failed assertion
 * has left the test. */
static struct side side = {.pid = -1, .wrapper = -1};

/* prep runs in the child before anything else and may _exit(77): the test
 * is then skipped. ns: unshare(ns) in the child, then sandbox-init is
 * forked there (PID 1 with CLONE_NEWPID; "/" made private with
 * CLONE_NEWNS). flag: one more argument, or NULL. False: skip. */
static bool side_start(struct side *s, const char *name, void (*prep)(void), int ns,
                       const char *flag)
{
        char sock[340];
        int pfd[2];

        snprintf(s->dir, sizeof(s->dir), "%s/%s", dir, name);
        assert_int_equal(mkdir(s->dir, 0700), 0);
        s->peer = agent_peer_dir(s->dir);
        snprintf(sock, sizeof(sock), "--listen=%s/agent.sock", s->dir);
        assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
        pid_t w = fork();
        assert_true(w >= 0);
        if (w == 0) {
                /* Gone with the test, whatever becomes of it. */
                prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (prep)
                        prep();
                if (ns && unshare(ns) < 0)
                        _exit(77);
                if ((ns & CLONE_NEWNS) && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        _exit(77);
                pid_t p = (ns & CLONE_NEWPID) ? fork() : 0;
                if (p == 0) {
                        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                        execl(init_path, init_path, sock, flag, (char *)NULL);
                        _exit(127);
                }
                ssize_t n = write(pfd[1], &p, sizeof(p));
                (void)n;
                waitpid(p, NULL, 0);
                _exit(0);
        }
        close(pfd[1]);
        pid_t inner = -1;
        bool wrapped = read(pfd[0], &inner, sizeof(inner)) == (ssize_t)sizeof(inner);
        close(pfd[0]);
        s->pid = wrapped ? inner : w;
        s->wrapper = wrapped ? w : -1;

        struct sbx_error err = {0};
        for (int i = 0; i < 300; i++) {
                if (agent_ping(&s->peer, 1000, &err) == 0)
                        return true;
                int st;
                if (waitpid(w, &st, WNOHANG) == w) {
                        s->pid = s->wrapper = -1;
                        rmdir(s->dir);
                        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 77);
                        return false;
                }
                msleep(10);
        }
        fail_msg("the second sandbox-init (%s) does not answer", name);
        return false;
}

static void side_stop(struct side *s)
{
        char path[340];

        if (s->pid > 0)
                kill(s->pid, SIGKILL);
        if (s->wrapper > 0 || s->pid > 0)
                waitpid(s->wrapper > 0 ? s->wrapper : s->pid, NULL, 0);
        s->pid = s->wrapper = -1;
        snprintf(path, sizeof(path), "%s/agent.sock", s->dir);
        unlink(path);
        rmdir(s->dir);
}

static int side_teardown(void **state)
{
        if (side.pid > 0 || side.wrapper > 0)
                side_stop(&side);
        return 0;
}

static struct agent_exec_result side_exec(struct side *s, const char *const *argv)
{
        struct agent_exec_result r = {0};
        struct sbx_error err = {0};
        struct agent_cmd c = cmd_in(argv, "/");
        int rc = agent_exec(&s->peer, &c, 10000, &r, &err);
        if (rc < 0)
                fail_msg("exec: %d %s", rc, err.msg);
        return r;
}

/* An fd sandbox-init never has open: closing it means the loop ran. */
#define LOOP_SENTINEL_FD 1000

/* As under gVisor: close_range() with a last fd beyond INT_MAX is EINVAL
 * (Linux clamps it). Falling back to a close() loop over every possible fd
 * is what made an exec cost 200 ms there: here the loop kills the child. */
static void prep_gvisor_close_range(void)
{
        scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
        if (!f ||
            seccomp_rule_add(f, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(close_range), 1,
                             SCMP_A1_32(SCMP_CMP_GT, INT_MAX)) < 0 ||
            seccomp_rule_add(f, SCMP_ACT_KILL_PROCESS, SCMP_SYS(close), 1,
                             SCMP_A0_32(SCMP_CMP_EQ, LOOP_SENTINEL_FD)) < 0 ||
            seccomp_load(f) < 0)
                _exit(77);
        seccomp_release(f);
}

/* close_from() closes everything above the report pipe with one
 * close_range() that gVisor accepts: the workload has only 0, 1, 2 (and
 * the directory ls opened itself), and no per-fd loop ran. */
static void test_close_from(void **state)
{
        struct side *s = &side;

        if (!side_start(s, "close", prep_gvisor_close_range, 0, NULL))
                skip();
        struct agent_exec_result r = side_exec(s, CMD("ls", "/proc/self/fd"));
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "0\n1\n2\n3\n");
        agent_exec_result_free(&r);
        side_stop(s);
}

/* Children of parent not yet reaped, named comm: how many, and one. */
static int children_named(pid_t parent, const char *comm, pid_t *ret_one)
{
        DIR *d = opendir("/proc");
        struct dirent *de;
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d))) {
                char path[300], buf[512], name[64];
                int pid, ppid;
                char st;
                snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t len = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (len <= 0)
                        continue;
                buf[len] = '\0';
                char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
                if (!lp || !rp || rp - lp - 1 >= (ptrdiff_t)sizeof(name) ||
                    sscanf(buf, "%d", &pid) != 1 || sscanf(rp + 1, " %c %d", &st, &ppid) != 2)
                        continue;
                memcpy(name, lp + 1, (size_t)(rp - lp - 1));
                name[rp - lp - 1] = '\0';
                if (ppid == parent && st != 'Z' && strcmp(name, comm) == 0) {
                        n++;
                        *ret_one = pid;
                }
        }
        closedir(d);
        return n;
}

static uint64_t status_hex(const char *out, const char *key)
{
        const char *at = strstr(out, key);
        assert_non_null(at);
        return strtoull(at + strlen(key), NULL, 16);
}

#define CAP_BIT(n) (1ull << (n))

/* What the workload sees in guard mode. fresh: nothing ran in this
 * namespace yet. */
static void guard_check_view(struct side *s, bool fresh)
{
        /* PID 1 is the guard; the first workload is pid 2 there. */
        struct agent_exec_result r = side_exec(s, CMD("sh", "-c", "cat /proc/1/comm; echo $$"));
        assert_int_equal(strncmp(r.out, "sandbox-guard\n", 14), 0);
        if (fresh)
                assert_string_equal(r.out + 14, "2\n");
        agent_exec_result_free(&r);

        /* No sandbox-init in this /proc, and PID 1 shows no argv of it and
         * no environment. */
        r = side_exec(s, CMD("sh", "-c",
                             "cat /proc/[0-9]*/cmdline | tr '\\0' '\\n'; echo; "
                             "tr -d '\\0' </proc/1/environ | wc -c"));
        assert_int_equal(r.exit_code, 0);
        assert_null(strstr(r.out, "sandbox-init"));
        assert_null(strstr(r.out, "--listen"));
        assert_int_equal(strncmp(r.out, "sandbox-guard\n", 14), 0);
        assert_non_null(strstr(r.out, "\n0\n"));
        agent_exec_result_free(&r);

        /* Joining the guard's mount namespace resets the cwd; the
         * command's is set after. */
        struct agent_cmd c = cmd_in(CMD("pwd"), dir);
        struct sbx_error err = {0};
        assert_int_equal(agent_exec(&s->peer, &c, 10000, &r, &err), 0);
        assert_int_equal(strncmp(r.out, dir, strlen(dir)), 0);
        assert_string_equal(r.out + strlen(dir), "\n");
        agent_exec_result_free(&r);

        /* The agent socket's directory is empty. */
        r = side_exec(
            s, CMD("sh", "-c", "ls -A \"$0\"; test -e \"$0/agent.sock\" || echo none", s->dir));
        assert_string_equal(r.out, "none\n");
        agent_exec_result_free(&r);

        /* CAP_SYS_ADMIN is gone, for good; CAP_SYS_CHROOT stays. */
        r = side_exec(s, CMD("grep", "-E", "^Cap(Eff|Bnd)", "/proc/self/status"));
        uint64_t eff = status_hex(r.out, "CapEff:"), bnd = status_hex(r.out, "CapBnd:");
        assert_int_equal(eff & CAP_BIT(21), 0);
        assert_int_equal(bnd & CAP_BIT(21), 0);
        assert_int_not_equal(bnd & CAP_BIT(18), 0);
        agent_exec_result_free(&r);
}

/* Orphans go to the guard, which reaps them; a deadline still kills the
 * whole group. */
static void guard_check_reaping(struct side *s)
{
        pid_t guard = -1;

        assert_int_equal(children_named(s->pid, "sandbox-guard", &guard), 1);
        struct agent_exec_result r = side_exec(
            s, CMD("sh", "-c", "i=0; while [ $i -lt 200 ]; do (true &) ; i=$((i+1)); done"));
        assert_int_equal(r.exit_code, 0);
        agent_exec_result_free(&r);
        int z = 0;
        for (int i = 0; i < 100; i++) {
                if ((z = zombies_of(guard) + zombies_of(s->pid)) == 0)
                        break;
                msleep(20);
        }
        assert_int_equal(z, 0);

        struct agent_cmd c = cmd_in(CMD("sh", "-c", "sleep 30 & sleep 30"), "/");
        struct sbx_error err = {0};
        int64_t t0 = mono_ms();
        assert_int_equal(agent_exec(&s->peer, &c, 300, &r, &err), 0);
        assert_true(r.timed_out);
        assert_true(elapsed_ms(t0) < 5000);
        agent_exec_result_free(&r);
}

/* --guard, as the gvisor class runs it, here in a pid and mount namespace
 * of the test's own. gVisor does not protect a pid-namespace init, so the
 * guard is what the workload can reach: it sees the guard as PID 1, no
 * sandbox-init, an empty socket directory; killing PID 1 ends only its own
 * namespace, and the next command gets a new one. */
static void test_guard(void **state)
{
        struct side *s = &side;
        struct sbx_error err = {0};
        pid_t guard = -1;

        if (!side_start(s, "guard", NULL, CLONE_NEWPID | CLONE_NEWNS, "--guard"))
                skip();
        guard_check_view(s, true);
        guard_check_reaping(s);

        struct agent_cmd c = cmd_in(CMD("sleep", "300"), "/");
        struct agent_proc_status st = {0};
        assert_int_equal(agent_spawn(&s->peer, &c, &st, &err), 0);
        for (int round = 0; round < 3; round++) {
                /* Linux ignores it (the guard is a pid-namespace init)... */
                struct agent_exec_result r = side_exec(s, CMD("sh", "-c", "kill -9 1"));
                agent_exec_result_free(&r);
                assert_int_equal(agent_ping(&s->peer, 1000, &err), 0);
                /* ...gVisor does not: the guard dies, as here from outside,
                 * and every process of its namespace with it. */
                assert_int_equal(children_named(s->pid, "sandbox-guard", &guard), 1);
                assert_int_equal(kill(guard, SIGKILL), 0);
                if (round == 0) {
                        struct agent_poll_result pr = {0};
                        wait_exit_on(&s->peer, st.id, &pr);
                        assert_int_equal(pr.status.exit_code, 137);
                        agent_poll_result_free(&pr);
                }
                assert_true(pid_gone(guard));
                assert_int_equal(agent_ping(&s->peer, 1000, &err), 0);
                r = side_exec(s, CMD("sh", "-c", "cat /proc/1/comm; echo $$"));
                assert_string_equal(r.out, "sandbox-guard\n2\n");
                agent_exec_result_free(&r);
        }
        agent_proc_status_free(&st);
        /* The dead guards are reaped, one lives. */
        int z = 0;
        for (int i = 0; i < 100; i++) {
                if ((z = zombies_of(s->pid)) == 0)
                        break;
                msleep(20);
        }
        assert_int_equal(z, 0);
        assert_int_equal(children_named(s->pid, "sandbox-guard", &guard), 1);
        guard_check_view(s, false);
        side_stop(s);
}

int main(int argc, char **argv)
{
        init_path = argc > 1 ? argv[1] : getenv("SANDBOX_INIT");
        if (!init_path) {
                fprintf(stderr, "usage: test-agent-guard PATH-TO-sandbox-init\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_teardown(test_close_from, side_teardown),
            cmocka_unit_test_teardown(test_guard, side_teardown),
        };
        return cmocka_run_group_tests(tests, start_init, stop_init);
}
