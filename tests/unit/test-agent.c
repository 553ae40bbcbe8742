/* SPDX-License-Identifier: MIT */
/* End-to-end tests of sandbox-init through the daemon's agent client: each
 * run starts `sandbox-init --listen=<tmpdir>/agent.sock` outside any sandbox
 * and drives it with src/agent/client.c.
 *
 *   test-agent PATH-TO-sandbox-init      (or SANDBOX_INIT=... test-agent)
 */
#include "agent-harness.h"

/* ---------------------------------------------------------------- tests */

static void test_ping(void **state)
{
        struct sbx_error err = {0};
        assert_int_equal(agent_ping(&agent, 1000, &err), 0);
}

static void test_exec_basic(void **state)
{
        struct agent_cmd c = cmd(CMD("sh", "-c", "echo hi; echo err >&2; exit 3"));
        struct agent_exec_result r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 3);
        assert_string_equal(r.out, "hi\n");
        assert_string_equal(r.err, "err\n");
        assert_false(r.timed_out);
        assert_false(r.truncated);
        assert_true(r.duration_ms >= 0 && r.duration_ms < 2000);
        agent_exec_result_free(&r);
}

static void test_exec_env_cwd(void **state)
{
        const char *env[] = {"FOO=bar", "HOME=/elsewhere", "FOO=baz"};
        struct agent_cmd c = cmd(CMD("sh", "-c", "pwd; echo $HOME $LANG $FOO; echo $PATH"));
        c.env = env;
        c.envc = 3;
        struct agent_exec_result r = exec_ok(&c, 5000);
        char want[600];
        snprintf(want, sizeof(want),
                 "%s\n/elsewhere C.UTF-8 baz\n"
                 "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n",
                 dir);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, want);
        agent_exec_result_free(&r);

        /* PATH comes from the command's env, not the agent's */
        const char *env2[] = {"PATH=/nonexistent"};
        c = cmd(CMD("ls"));
        c.env = env2;
        c.envc = 1;
        r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 127);
        agent_exec_result_free(&r);

        /* HOSTNAME is set; the signal state is clean */
        c = cmd(
            CMD("sh", "-c", "test -n \"$HOSTNAME\" && grep -E '^Sig(Blk|Ign)' /proc/self/status"));
        r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(r.out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
        agent_exec_result_free(&r);

        /* only 0, 1, 2 are inherited: never the agent's sockets */
        c = cmd(CMD("sh", "-c", "ls /proc/$$/fd"));
        r = exec_ok(&c, 5000);
        assert_string_equal(r.out, "0\n1\n2\n");
        agent_exec_result_free(&r);

        /* own process group */
        c = cmd(CMD("sh", "-c", "test $(ps -o pgid= $$) -eq $$"));
        r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 0);
        agent_exec_result_free(&r);
}

static void test_exec_failures(void **state)
{
        struct agent_cmd c = cmd(CMD("no-such-command-xyz"));
        struct agent_exec_result r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 127);
        assert_string_equal(
            r.err, "sandbox-init: cannot run 'no-such-command-xyz': No such file or directory\n");
        agent_exec_result_free(&r);

        char path[400];
        snprintf(path, sizeof(path), "%s/not-executable", dir);
        int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        close(fd);
        c = cmd(CMD(path));
        r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 126);
        assert_non_null(strstr(r.err, "Permission denied"));
        agent_exec_result_free(&r);

        /* default cwd /workspace does not exist out here */
        c = cmd_in(CMD("pwd"), NULL);
        r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 127);
        assert_non_null(strstr(r.err, "sandbox-init: cannot run 'pwd': No such file or directory"));
        assert_non_null(strstr(r.err, "'/workspace'"));
        agent_exec_result_free(&r);

        /* relative cwd is against /workspace */
        c = cmd_in(CMD("pwd"), "sub/dir");
        r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 127);
        assert_non_null(strstr(r.err, "'/workspace/sub/dir'"));
        agent_exec_result_free(&r);

        /* invalid requests */
        struct agent_exec_result none = {0};
        struct sbx_error err = {0};
        const char *bad_env[] = {"NOEQUALS"};
        c = cmd(CMD("true"));
        c.env = bad_env;
        c.envc = 1;
        assert_int_equal(agent_exec(&agent, &c, 0, &none, &err), -EINVAL);
        c = cmd(CMD("true"));
        c.argc = 0;
        assert_int_equal(agent_exec(&agent, &c, 0, &none, &err), -EINVAL);
}

static void test_exec_signal_exit(void **state)
{
        struct agent_cmd c = cmd(CMD("sh", "-c", "kill -TERM $$"));
        struct agent_exec_result r = exec_ok(&c, 5000);
        assert_int_equal(r.exit_code, 143);
        agent_exec_result_free(&r);
}

static void test_exec_timeout(void **state)
{
        struct agent_cmd c = cmd(CMD("sh", "-c", "sleep 100 & echo $!; sleep 100"));
        int64_t t0 = mono_ms();
        struct agent_exec_result r = exec_ok(&c, 300);
        int64_t took = elapsed_ms(t0);
        assert_true(r.timed_out);
        assert_int_equal(r.exit_code, 137);
        assert_true(took >= 290 && took < 1500);
        assert_true(r.duration_ms >= 290 && r.duration_ms < 1500);
        pid_t bg = (pid_t)atoi(r.out);
        assert_true(bg > 0);
        assert_true(pid_gone(bg)); /* the whole group died */
        agent_exec_result_free(&r);
}

static void test_exec_background(void **state)
{
        /* The background sleep keeps the pipes open: the answer must not
         * wait for EOF. */
        struct agent_cmd c = cmd(CMD("sh", "-c", "sleep 30 & echo $!"));
        int64_t t0 = mono_ms();
        struct agent_exec_result r = exec_ok(&c, 0);
        assert_true(elapsed_ms(t0) < 1000);
        assert_int_equal(r.exit_code, 0);
        pid_t bg = (pid_t)atoi(r.out);
        assert_true(bg > 0);
        kill(bg, SIGKILL);
        agent_exec_result_free(&r);
}

static void test_exec_truncated(void **state)
{
        struct agent_cmd c = cmd(
            CMD("sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' a; head -c 10 /dev/zero >&2"));
        struct agent_exec_result r = exec_ok(&c, 10000);
        assert_int_equal(r.exit_code, 0);
        assert_true(r.truncated);
        assert_int_equal(r.out_len, 1u << 20);
        assert_int_equal(r.err_len, 10);
        for (size_t i = 0; i < r.out_len; i++)
                if (r.out[i] != 'a')
                        fail_msg("byte %zu", i);
        agent_exec_result_free(&r);

        /* exactly 1 MiB is not truncated; a smaller cap is honoured */
        c = cmd(CMD("head", "-c", "1048576", "/dev/zero"));
        r = exec_ok(&c, 10000);
        assert_false(r.truncated);
        assert_int_equal(r.out_len, 1u << 20);
        agent_exec_result_free(&r);
        c.max_output = 100;
        r = exec_ok(&c, 10000);
        assert_true(r.truncated);
        assert_int_equal(r.out_len, 100);
        agent_exec_result_free(&r);
}

static void test_spawn_ring(void **state)
{
        struct agent_cmd c =
            cmd(CMD("sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' b; echo done >&2"));
        char *id = spawn_ok(&c);
        struct agent_poll_result p = {0};
        struct sbx_error err = {0};

        wait_exit(id, &p);
        agent_poll_result_free(&p);
        msleep(50);
        poll_ok(id, 0, 0, 0, &p);
        assert_true(p.status.exited);
        assert_int_equal(p.status.exit_code, 0);
        assert_true(p.status.exited_at >= p.status.started_at);
        assert_int_equal(p.out_dropped, 2u << 20);
        assert_int_equal(p.out_len, 1u << 20);
        assert_int_equal(p.out_next, 3u << 20);
        assert_int_equal(p.err_dropped, 0);
        assert_string_equal(p.err, "done\n");
        assert_int_equal(p.err_next, 5);
        for (size_t i = 0; i < p.out_len; i++)
                if (p.out[i] != 'b')
                        fail_msg("byte %zu", i);
        agent_poll_result_free(&p);

        /* from inside the retained window: nothing dropped */
        poll_ok(id, (3u << 20) - 10, 5, 0, &p);
        assert_int_equal(p.out_dropped, 0);
        assert_int_equal(p.out_len, 10);
        assert_int_equal(p.err_len, 0);
        agent_poll_result_free(&p);
        /* past the end */
        assert_int_equal(agent_poll(&agent, id, (3u << 20) + 1, 0, 0, &p, &err), -EINVAL);
        assert_int_equal(agent_poll(&agent, id, 0, 6, 0, &p, &err), -EINVAL);

        /* LIST shows it, with its command */
        struct agent_proc_list l = {0};
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.procs[0].id, id);
        assert_int_equal(l.procs[0].argc, 3);
        assert_string_equal(l.procs[0].argv[0], "sh");
        assert_true(l.procs[0].exited);
        agent_proc_list_free(&l);

        assert_int_equal(agent_kill(&agent, id, &err), 0);
        assert_int_equal(agent_kill(&agent, id, &err), -ENOENT);
        assert_int_equal(agent_poll(&agent, id, 0, 0, 0, &p, &err), -ENOENT);
        assert_int_equal(agent_poll(&agent, "bad/id", 0, 0, 0, &p, &err), -EINVAL);
        free(id);
}

static void test_poll_wait(void **state)
{
        struct agent_cmd c = cmd(CMD("sh", "-c", "sleep 0.3; echo x; sleep 0.3; exit 4"));
        char *id = spawn_ok(&c);
        struct agent_poll_result p = {0};

        int64_t t0 = mono_ms();
        poll_ok(id, 0, 0, 10000, &p);
        int64_t took = elapsed_ms(t0);
        assert_true(took >= 250 && took < 900);
        assert_string_equal(p.out, "x\n");
        assert_false(p.status.exited);
        uint64_t next = p.out_next;
        agent_poll_result_free(&p);

        t0 = mono_ms();
        poll_ok(id, next, 0, 10000, &p);
        took = elapsed_ms(t0);
        assert_true(took >= 250 && took < 900);
        assert_true(p.status.exited);
        assert_int_equal(p.status.exit_code, 4);
        assert_int_equal(p.out_len, 0);
        agent_poll_result_free(&p);

        /* an exited process answers at once even with a wait */
        t0 = mono_ms();
        poll_ok(id, next, 0, 10000, &p);
        assert_true(elapsed_ms(t0) < 300);
        agent_poll_result_free(&p);
        kill_all();
        free(id);

        /* the wait runs out */
        c = cmd(CMD("sleep", "100"));
        id = spawn_ok(&c);
        t0 = mono_ms();
        poll_ok(id, 0, 0, 200, &p);
        took = elapsed_ms(t0);
        assert_true(took >= 190 && took < 800);
        assert_false(p.status.exited);
        assert_int_equal(p.out_len + p.err_len, 0);
        agent_poll_result_free(&p);
        kill_all();
        free(id);
}

static void test_utf8_split(void **state)
{
        /* U+20AC is E2 82 AC: the first two bytes come, then the third */
        struct agent_cmd c =
            cmd(CMD("sh", "-c", "printf 'a\\342\\202'; sleep 0.5; printf '\\254 ok'; sleep 0.2"));
        char *id = spawn_ok(&c);
        struct agent_poll_result p = {0};

        msleep(200);
        poll_ok(id, 0, 0, 0, &p);
        assert_string_equal(p.out, "a");
        assert_int_equal(p.out_next, 1);
        agent_poll_result_free(&p);
        /* an incomplete sequence alone is not news: the wait holds */
        int64_t t0 = mono_ms();
        poll_ok(id, 1, 0, 5000, &p);
        assert_true(elapsed_ms(t0) >= 150);
        assert_string_equal(p.out, "\xe2\x82\xac ok");
        assert_int_equal(p.out_next, 7);
        agent_poll_result_free(&p);
        kill_all();
        free(id);

        /* at exit and EOF, a cut sequence is returned as it is */
        c = cmd(CMD("sh", "-c", "printf 'a\\342\\202'"));
        id = spawn_ok(&c);
        wait_exit(id, &p);
        agent_poll_result_free(&p);
        msleep(50);
        poll_ok(id, 0, 0, 0, &p);
        assert_int_equal(p.out_len, 3);
        assert_int_equal(p.out_next, 3);
        agent_poll_result_free(&p);
        kill_all();
        free(id);
}

static size_t lines(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                n += *s == '\n';
        return n;
}

static void test_signal_group(void **state)
{
        struct agent_cmd c = cmd(CMD("sh", "-c", "sleep 100 & echo $!; sleep 100 & echo $!; wait"));
        char *id = spawn_ok(&c);
        struct agent_poll_result p = {0};
        struct sbx_error err = {0};
        char out[256] = "";

        /* Up to 30 s: a loaded host (a sanitized build, tests side by side)
         * may take seconds to start two processes. A poll from 0 answers at
         * once when there is output already: the wait is ours. */
        for (int i = 0; i < 300 && lines(out) < 2; i++) {
                poll_ok(id, 0, 0, 200, &p);
                snprintf(out, sizeof(out), "%s", p.out);
                agent_poll_result_free(&p);
                if (lines(out) < 2)
                        msleep(100);
        }
        assert_int_equal(lines(out), 2);
        pid_t a = (pid_t)atoi(out), b = (pid_t)atoi(strchr(out, '\n') + 1);

        assert_int_equal(agent_signal(&agent, id, SIGSYS, &err), -EINVAL);
        assert_int_equal(agent_signal(&agent, "p0-nothere", SIGTERM, &err), -ENOENT);
        assert_int_equal(agent_signal(&agent, id, agent_signal_from_name("TERM"), &err), 0);
        wait_exit(id, &p);
        assert_int_equal(p.status.exit_code, 143);
        agent_poll_result_free(&p);
        assert_true(pid_gone(a));
        assert_true(pid_gone(b));
        /* signalling an exited process is fine */
        assert_int_equal(agent_signal(&agent, id, SIGTERM, &err), 0);
        kill_all();
        free(id);

        assert_int_equal(agent_signal_from_name("SIGUSR1"), SIGUSR1);
        assert_int_equal(agent_signal_from_name("STOP"), -EINVAL);
        /* upper case only, as documented */
        assert_int_equal(agent_signal_from_name("term"), -EINVAL);
        assert_int_equal(agent_signal_from_name("sigterm"), -EINVAL);
        assert_int_equal(agent_signal_from_name("SIGterm"), -EINVAL);
        assert_int_equal(agent_signal_from_name("SIG"), -EINVAL);
        assert_int_equal(agent_signal_from_name(""), -EINVAL);
}

static void test_cap(void **state)
{
        struct agent_cmd c = cmd(CMD("sleep", "100"));
        struct agent_proc_status st = {0};
        struct agent_exec_result r = {0};
        struct sbx_error err = {0};
        char *ids[AGENT_MAX_PROCS];

        kill_all();
        for (int i = 0; i < AGENT_MAX_PROCS; i++)
                ids[i] = spawn_ok(&c);
        assert_int_equal(agent_spawn(&agent, &c, &st, &err), -EDQUOT);
        struct agent_cmd t = cmd(CMD("true"));
        assert_int_equal(agent_exec(&agent, &t, 1000, &r, &err), -EDQUOT);

        struct agent_proc_list l = {0};
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_int_equal(l.n, AGENT_MAX_PROCS);
        for (int i = 0; i < AGENT_MAX_PROCS; i++)
                assert_string_equal(l.procs[i].id, ids[i]); /* start order */
        agent_proc_list_free(&l);

        /* only running processes count: an exited one frees its place at
         * once, and its record stays until killed */
        assert_int_equal(agent_signal(&agent, ids[0], SIGKILL, &err), 0);
        struct agent_poll_result p = {0};
        wait_exit(ids[0], &p);
        agent_poll_result_free(&p);
        char *extra = spawn_ok(&c);
        assert_int_equal(agent_spawn(&agent, &c, &st, &err), -EDQUOT);
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_int_equal(l.n, AGENT_MAX_PROCS + 1);
        agent_proc_list_free(&l);
        poll_ok(ids[0], 0, 0, 0, &p);
        assert_true(p.status.exited);
        agent_poll_result_free(&p);
        free(extra);
        kill_all();
        for (int i = 0; i < AGENT_MAX_PROCS; i++)
                free(ids[i]);

        /* a running exec counts, a finished one does not */
        r = exec_ok(&t, 1000);
        agent_exec_result_free(&r);
        for (int i = 0; i < AGENT_MAX_PROCS; i++)
                ids[i] = spawn_ok(&c);
        kill_all();
        for (int i = 0; i < AGENT_MAX_PROCS; i++)
                free(ids[i]);
}

/* Spawn c and wait for it to exit; returns its id. */
static char *run_ok(const struct agent_cmd *c)
{
        struct agent_poll_result p = {0};
        char *id = spawn_ok(c);
        wait_exit(id, &p);
        agent_poll_result_free(&p);
        return id;
}

static bool known(const char *id)
{
        struct agent_poll_result p = {0};
        struct sbx_error err = {0};
        int rc = agent_poll(&agent, id, 0, 0, 0, &p, &err);
        agent_poll_result_free(&p);
        if (rc != 0 && rc != -ENOENT)
                fail_msg("poll %s: %d %s", id, rc, err.msg);
        return rc == 0;
}

static void test_exited_bounded(void **state)
{
        enum { N = AGENT_MAX_EXITED + 10 };
        struct agent_cmd t = cmd(CMD("true"));
        struct agent_proc_list l = {0};
        struct sbx_error err = {0};
        char *ids[N];

        kill_all();
        /* never killed: the oldest exited go first, the newest stay */
        for (int i = 0; i < N; i++)
                ids[i] = run_ok(&t);
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_int_equal(l.n, AGENT_MAX_EXITED);
        for (size_t i = 0; i < l.n; i++)
                assert_string_equal(l.procs[i].id, ids[N - AGENT_MAX_EXITED + i]);
        agent_proc_list_free(&l);
        assert_false(known(ids[0]));
        assert_false(known(ids[N - AGENT_MAX_EXITED - 1]));
        assert_true(known(ids[N - AGENT_MAX_EXITED]));
        assert_true(known(ids[N - 1]));
        for (int i = 0; i < N; i++)
                free(ids[i]);
        kill_all();

        /* and their output is bounded in total: 2 MiB each (1 MiB per
         * stream) keeps only AGENT_EXITED_OUTPUT_MAX / 2 MiB of them */
        struct agent_cmd big =
            cmd(CMD("sh", "-c", "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2"));
        const int keep = (int)(AGENT_EXITED_OUTPUT_MAX / (2u << 20));
        char *last = NULL;
        for (int i = 0; i < keep + 8; i++) {
                free(last);
                last = run_ok(&big);
        }
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_true(l.n <= (size_t)keep);
        assert_true(l.n >= (size_t)keep - 1); /* argv and rounding take a little */
        assert_string_equal(l.procs[l.n - 1].id, last);
        agent_proc_list_free(&l);
        struct agent_poll_result p = {0};
        poll_ok(last, 0, 0, 0, &p);
        assert_int_equal(p.out_len, 1u << 20);
        assert_int_equal(p.err_len, 1u << 20);
        agent_poll_result_free(&p);
        free(last);
        kill_all();
}

static void test_stdin(void **state)
{
        struct agent_cmd c = cmd(CMD("cat"));
        c.stdin_pipe = true;
        char *id = spawn_ok(&c);
        struct agent_poll_result p = {0};
        struct sbx_error err = {0};

        assert_int_equal(agent_stdin(&agent, id, "hello\n", 6, false, 5000, NULL, &err), 0);
        poll_ok(id, 0, 0, 5000, &p);
        assert_string_equal(p.out, "hello\n");
        agent_poll_result_free(&p);
        assert_int_equal(agent_stdin(&agent, id, "bye", 3, true, 5000, NULL, &err), 0);
        wait_exit(id, &p);
        assert_int_equal(p.status.exit_code, 0);
        assert_string_equal(p.out, "hello\nbye");
        agent_poll_result_free(&p);
        assert_int_equal(agent_stdin(&agent, id, "x", 1, false, 5000, NULL, &err), -EBUSY);
        kill_all();
        free(id);

        /* big writes are queued and answered once written */
        size_t big = 5u << 20;
        char *data = malloc(big);
        assert_non_null(data);
        memset(data, 'z', big);
        c = cmd(CMD("sh", "-c", "wc -c"));
        c.stdin_pipe = true;
        id = spawn_ok(&c);
        assert_int_equal(agent_stdin(&agent, id, data, big, true, 10000, NULL, &err), 0);
        wait_exit(id, &p);
        assert_int_equal(atoi(p.out), (int)big);
        agent_poll_result_free(&p);
        free(data);
        kill_all();
        free(id);

        /* without a stdin pipe */
        c = cmd(CMD("sleep", "100"));
        id = spawn_ok(&c);
        assert_int_equal(agent_stdin(&agent, id, "x", 1, false, 5000, NULL, &err), -EBUSY);
        kill_all();
        free(id);

        /* the reader is gone: EPIPE is a state error */
        c = cmd(CMD("true"));
        c.stdin_pipe = true;
        id = spawn_ok(&c);
        wait_exit(id, &p);
        agent_poll_result_free(&p);
        assert_int_equal(agent_stdin(&agent, id, "x", 1, false, 5000, NULL, &err), -EBUSY);
        assert_non_null(strstr(err.msg, "Broken pipe"));
        kill_all();
        free(id);
}

static void test_stdin_timeout(void **state)
{
        /* reads nothing until ./go exists, then counts its stdin */
        struct agent_cmd c =
            cmd(CMD("sh", "-c", "while [ ! -e go ]; do sleep 0.05; done; exec wc -c"));
        struct agent_poll_result p = {0};
        struct sbx_error err = {0};
        size_t big = 1u << 20;
        uint64_t written = 0, w2 = 0;
        char *data = malloc(big);

        assert_non_null(data);
        memset(data, 'q', big);
        c.stdin_pipe = true;
        char *id = spawn_ok(&c);

        /* the write gives up at its deadline and says how far it got */
        assert_int_equal(agent_stdin(&agent, id, data, big, true, 300, &written, &err), -ETIME);
        assert_true(written < big);
        assert_non_null(strstr(err.msg, "discarded"));

        /* one write at a time: a second one while another waits is refused */
        int fd = -1;
        struct agent_msg m;
        assert_int_equal(agent.dial(agent.ctx, &fd, &err), 0);
        agent_msg_init(&m, AGENT_REQ_STDIN);
        agent_put_str(&m, AGENT_T_PROC_ID, id);
        agent_put_bytes(&m, AGENT_T_DATA, data, 100000);
        assert_int_equal(agent_msg_send(fd, &m), 0);
        agent_msg_free(&m);
        msleep(100);
        assert_int_equal(agent_stdin(&agent, id, "x", 1, false, 1000, &w2, &err), -EBUSY);
        assert_non_null(strstr(err.msg, "pending"));
        /* its requester leaves: what it had queued goes too */
        close(fd);
        msleep(100);

        struct agent_cmd go = cmd(CMD("touch", "go"));
        struct agent_exec_result r = exec_ok(&go, 5000);
        agent_exec_result_free(&r);
        assert_int_equal(agent_stdin(&agent, id, "", 0, true, 5000, &w2, &err), 0);
        wait_exit(id, &p);
        assert_int_equal(p.status.exit_code, 0);
        assert_int_equal(strtoull(p.out, NULL, 10), written); /* not a byte more */
        agent_poll_result_free(&p);
        free(id);
        free(data);
        kill_all();
}

static void test_held_does_not_block(void **state)
{
        struct sbx_error err = {0};
        int fd = -1, fd2 = -1;
        struct agent_msg m;
        uint8_t *payload = NULL;
        uint32_t len;

        assert_int_equal(agent.dial(agent.ctx, &fd, &err), 0);
        agent_msg_init(&m, AGENT_REQ_EXEC);
        agent_put_str(&m, AGENT_T_ARGV, "sleep");
        agent_put_str(&m, AGENT_T_ARGV, "0.5");
        agent_put_str(&m, AGENT_T_CWD, dir);
        assert_int_equal(agent_msg_send(fd, &m), 0);
        agent_msg_free(&m);

        /* another connection is served meanwhile */
        int64_t t0 = mono_ms();
        assert_int_equal(agent_ping(&agent, 1000, &err), 0);
        assert_true(elapsed_ms(t0) < 300);

        /* a held exec whose client leaves keeps running (and is listed) */
        assert_int_equal(agent.dial(agent.ctx, &fd2, &err), 0);
        agent_msg_init(&m, AGENT_REQ_EXEC);
        agent_put_str(&m, AGENT_T_ARGV, "sleep");
        agent_put_str(&m, AGENT_T_ARGV, "0.2");
        agent_put_str(&m, AGENT_T_CWD, dir);
        assert_int_equal(agent_msg_send(fd2, &m), 0);
        agent_msg_free(&m);
        close(fd2);

        /* the first answer comes when its command ends; the connection then
         * carries another request */
        agent_msg_init(&m, AGENT_REQ_PING);
        m.type = AGENT_REQ_LIST;
        uint16_t type;
        int fl = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* agent_msg_recv blocks */
        assert_int_equal(agent_msg_recv(fd, &type, &payload, &len), 0);
        fcntl(fd, F_SETFL, fl);
        assert_int_equal(type, AGENT_RESP_OK);
        assert_true(elapsed_ms(t0) >= 400);
        free(payload);
        assert_int_equal(agent_call(fd, &m, 1000, &payload, &len, &err), 0);
        free(payload);
        agent_msg_free(&m);
        close(fd);
        kill_all();
}

/* Send an EXEC of argv (in the test's directory) on a connection of its own
 * and return that connection without reading the answer. */
static int exec_unread(const char *const *argv)
{
        struct sbx_error err = {0};
        struct agent_msg m;
        int fd = -1;

        assert_int_equal(agent.dial(agent.ctx, &fd, &err), 0);
        agent_msg_init(&m, AGENT_REQ_EXEC);
        for (size_t i = 0; argv[i]; i++)
                agent_put_str(&m, AGENT_T_ARGV, argv[i]);
        agent_put_str(&m, AGENT_T_CWD, dir);
        assert_int_equal(agent_msg_send(fd, &m), 0);
        agent_msg_free(&m);
        return fd;
}

/* The one process listed, which must be an exec record. */
static char *only_exec_record(struct agent_proc_list *l)
{
        struct sbx_error err = {0};
        assert_int_equal(agent_list(&agent, l, &err), 0);
        assert_int_equal(l->n, 1);
        assert_true(l->procs[0].exec);
        return strdup(l->procs[0].id);
}

static void test_exec_lost(void **state)
{
        struct agent_proc_list l = {0};
        struct agent_poll_result p = {0};
        struct sbx_error err = {0};

        kill_all();
        /* the requester goes away while the command runs: its record is
         * listed (running, then exited) with the output an answer holds */
        int fd = exec_unread(CMD("sh", "-c", "echo a; sleep 0.5; echo b >&2; exit 4"));
        msleep(100);
        close(fd);
        msleep(100);
        char *id = only_exec_record(&l);
        assert_false(l.procs[0].exited);
        assert_string_equal(l.procs[0].argv[0], "sh");
        agent_proc_list_free(&l);
        wait_exit(id, &p);
        assert_true(p.status.exec);
        assert_int_equal(p.status.exit_code, 4);
        assert_false(p.status.timed_out);
        assert_false(p.status.truncated);
        assert_string_equal(p.out, "a\n");
        assert_string_equal(p.err, "b\n");
        assert_int_equal(p.out_next, 2);
        agent_poll_result_free(&p);
        /* offsets work as for any process */
        poll_ok(id, 1, 2, 0, &p);
        assert_string_equal(p.out, "\n");
        assert_string_equal(p.err, "");
        agent_poll_result_free(&p);
        assert_int_equal(agent_kill(&agent, id, &err), 0);
        assert_false(known(id));
        free(id);

        /* the command ended but its answer (2 MiB, more than the socket
         * holds) was not read when the requester left */
        fd = exec_unread(CMD("sh", "-c", "head -c 3000000 /dev/zero; echo e >&2"));
        msleep(500);
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_int_equal(l.n, 0); /* not listed while its answer is being written */
        agent_proc_list_free(&l);
        close(fd);
        msleep(100);
        id = only_exec_record(&l);
        assert_true(l.procs[0].exited);
        assert_true(l.procs[0].truncated);
        agent_proc_list_free(&l);
        poll_ok(id, 0, 0, 0, &p);
        assert_int_equal(p.out_len, 1u << 20);
        assert_int_equal(p.out_next, 1u << 20);
        assert_string_equal(p.err, "e\n");
        assert_int_equal(p.status.exit_code, 0);
        agent_poll_result_free(&p);
        free(id);
        kill_all();

        /* an answer read in full leaves nothing behind */
        struct agent_cmd t = cmd(CMD("true"));
        struct agent_exec_result r = exec_ok(&t, 1000);
        agent_exec_result_free(&r);
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_int_equal(l.n, 0);
        agent_proc_list_free(&l);
}

static void test_protocol_errors(void **state)
{
        struct sbx_error err = {0};
        uint8_t *payload = NULL;
        uint32_t len;
        uint16_t type;
        int fd = -1;

        /* a bad header: INVALID, then the connection closes */
        assert_int_equal(agent.dial(agent.ctx, &fd, &err), 0);
        uint8_t bad[AGENT_HEADER_SIZE] = {0, 0, 0, 0, 1, 0, 7, 7, 0, 0, 0, 0};
        assert_int_equal(write(fd, bad, sizeof(bad)), sizeof(bad));
        struct timeval tv = {2, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        fcntl(fd, F_SETFL, 0);
        assert_int_equal(agent_msg_recv(fd, &type, &payload, &len), 0);
        assert_int_equal(type, AGENT_RESP_ERR);
        free(payload);
        assert_int_equal(agent_msg_recv(fd, &type, &payload, &len), -EPIPE);
        close(fd);

        /* an unknown type, then a malformed payload */
        struct agent_msg m;
        agent_msg_init(&m, 77);
        assert_int_equal(agent.dial(agent.ctx, &fd, &err), 0);
        assert_int_equal(agent_call(fd, &m, 1000, &payload, &len, &err), -EINVAL);
        assert_true(agent_call(fd, &m, 1000, &payload, &len, &err) < 0);
        close(fd);
        agent_msg_free(&m);

        agent_msg_init(&m, AGENT_REQ_POLL);
        agent_put_str(&m, AGENT_T_PROC_ID, "p1-x");
        m.payload.len -= 1; /* field runs past the end */
        assert_int_equal(agent.dial(agent.ctx, &fd, &err), 0);
        assert_int_equal(agent_call(fd, &m, 1000, &payload, &len, &err), -EINVAL);
        close(fd);
        agent_msg_free(&m);

        /* a u64 of the wrong size */
        agent_msg_init(&m, AGENT_REQ_SIGNAL);
        agent_put_str(&m, AGENT_T_PROC_ID, "p1-x");
        agent_put_bytes(&m, AGENT_T_SIGNAL, "abc", 3);
        assert_int_equal(agent.dial(agent.ctx, &fd, &err), 0);
        assert_int_equal(agent_call(fd, &m, 1000, &payload, &len, &err), -EINVAL);
        close(fd);
        agent_msg_free(&m);

        /* random garbage on many connections, then it still answers */
        uint64_t x = 88172645463325252ull;
        for (int i = 0; i < 200; i++) {
                uint8_t junk[256];
                for (size_t k = 0; k < sizeof(junk); k++) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        junk[k] = (uint8_t)x;
                }
                if (i % 2) { /* a valid header with a random payload */
                        uint32_t plen = sizeof(junk) - AGENT_HEADER_SIZE;
                        memcpy(junk, &plen, 4);
                        junk[4] = (uint8_t)(1 + i % 8);
                        junk[5] = 0;
                        memset(junk + 6, 0, 6);
                }
                if (agent.dial(agent.ctx, &fd, &err) == 0) {
                        ssize_t n = write(fd, junk, sizeof(junk));
                        (void)n;
                        if (i % 3 == 0)
                                msleep(1);
                        close(fd);
                }
        }
        assert_int_equal(agent_ping(&agent, 1000, &err), 0);
        kill_all();
}

static void test_many_connections(void **state)
{
        struct sbx_error err = {0};
        int fds[300];

        for (int i = 0; i < 300; i++)
                assert_int_equal(agent.dial(agent.ctx, &fds[i], &err), 0);
        assert_int_equal(agent_ping(&agent, 1000, &err), 0);
        for (int i = 0; i < 300; i++) {
                struct agent_msg m;
                uint8_t *payload;
                uint32_t len;
                agent_msg_init(&m, AGENT_REQ_PING);
                assert_int_equal(agent_call(fds[i], &m, 1000, &payload, &len, &err), 0);
                free(payload);
                agent_msg_free(&m);
                close(fds[i]);
        }
}

static void test_big_argv(void **state)
{
        enum { N = 4000, LEN = 250 };
        const char **argv = calloc(N + 1, sizeof(char *));
        char *arg = malloc(LEN + 1);
        struct agent_proc_status st = {0};
        struct agent_poll_result p = {0};
        struct agent_proc_list l = {0};
        struct sbx_error err = {0};

        assert_non_null(argv);
        assert_non_null(arg);
        memset(arg, 'q', LEN);
        arg[LEN] = '\0';
        argv[0] = "sh";
        argv[1] = "-c";
        argv[2] = "echo $#";
        argv[3] = "sh";
        for (int i = 4; i < N; i++)
                argv[i] = arg;
        struct agent_cmd c = cmd(argv);
        char *id = spawn_ok(&c);
        wait_exit(id, &p);
        assert_int_equal(atoi(p.out), N - 4);
        assert_int_equal(p.status.argc, N);
        agent_poll_result_free(&p);
        /* LIST cuts each command to its share of one frame */
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        assert_int_equal(l.n, 1);
        assert_true(l.procs[0].argc > 100 && l.procs[0].argc < N);
        agent_proc_list_free(&l);
        kill_all();
        free(id);

        /* more than 1 MiB of command line is refused */
        char *big = malloc(301);
        assert_non_null(big);
        memset(big, 'q', 300);
        big[300] = '\0';
        for (int i = 4; i < N; i++)
                argv[i] = big; /* 4000 x 301 bytes */
        assert_int_equal(agent_spawn(&agent, &c, &st, &err), -EINVAL);
        free(big);
        free(arg);
        free(argv);
}

static void test_root(void **state)
{
        struct sbx_error err = {0};
        struct stat a, b;
        int fd = -1;

        /* Outside a sandbox the agent's "/" is the host's. */
        assert_int_equal(agent_root(&agent, &fd, &err), 0);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &a), 0);
        assert_int_equal(stat("/", &b), 0);
        assert_true(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        assert_int_equal(agent_ping(&agent, 1000, &err), 0);
}

static void test_orphans_reaped(void **state)
{
        struct agent_cmd c =
            cmd(CMD("sh", "-c", "i=0; while [ $i -lt 500 ]; do (true &) ; i=$((i+1)); done"));
        struct agent_exec_result r = exec_ok(&c, 60000);
        assert_int_equal(r.exit_code, 0);
        agent_exec_result_free(&r);
        int z = 0;
        for (int i = 0; i < 500; i++) {
                z = zombies_of(init_pid);
                if (z == 0)
                        break;
                msleep(20);
        }
        assert_int_equal(z, 0);
}

static void test_survives_signals(void **state)
{
        /* Outside a pid namespace, only check what does not kill: a TERM
         * storm on the workload's own group leaves the agent serving. */
        struct agent_cmd c =
            cmd(CMD("sh", "-c", "kill -PIPE $PPID 2>/dev/null; kill -CHLD $PPID; true"));
        struct agent_exec_result r = exec_ok(&c, 5000);
        agent_exec_result_free(&r);
        struct sbx_error err = {0};
        assert_int_equal(agent_ping(&agent, 1000, &err), 0);
        /* not dumpable */
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%d/status", (int)init_pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        assert_true(n > 0);
        buf[n] = '\0';
        assert_non_null(strstr(buf, "SigIgn:\t0000000000001000")); /* only SIGPIPE */
}

/* As PID 1 of a new pid namespace (needs root; skipped otherwise): signals
 * from the workload do nothing, orphans are reaped. */
static void test_pid1(void **state)
{
        char pdir[300] = "", sock[320];
        struct agent_peer ppeer = agent_peer_dir(pdir);
        int pfd[2];

        snprintf(pdir, sizeof(pdir), "%s/pid1", dir);
        assert_int_equal(mkdir(pdir, 0700), 0);
        snprintf(sock, sizeof(sock), "--listen=%s/agent.sock", pdir);
        assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
        pid_t mid = fork();
        assert_true(mid >= 0);
        if (mid == 0) {
                if (unshare(CLONE_NEWPID) < 0)
                        _exit(77);
                pid_t p1 = fork();
                if (p1 == 0) {
                        execl(init_path, init_path, sock, (char *)NULL);
                        _exit(127);
                }
                ssize_t n = write(pfd[1], &p1, sizeof(p1));
                (void)n;
                waitpid(p1, NULL, 0);
                _exit(0);
        }
        close(pfd[1]);
        pid_t host_pid = -1;
        ssize_t n = read(pfd[0], &host_pid, sizeof(host_pid));
        close(pfd[0]);
        if (n != (ssize_t)sizeof(host_pid)) {
                int st;
                waitpid(mid, &st, 0);
                rmdir(pdir);
                skip();
        }

        struct sbx_error err = {0};
        bool up = false;
        for (int i = 0; i < 300 && !up; i++) {
                up = agent_ping(&ppeer, 1000, &err) == 0;
                if (!up)
                        msleep(10);
        }
        assert_true(up);
        struct agent_cmd c = cmd_in(CMD("sh", "-c",
                                        "echo $$; for s in TERM INT HUP QUIT USR1 USR2 PIPE STOP "
                                        "KILL; do kill -$s 1; done"),
                                    "/");
        struct agent_exec_result r = {0};
        assert_int_equal(agent_exec(&ppeer, &c, 5000, &r, &err), 0);
        assert_int_equal(atoi(r.out), 2); /* the first child of PID 1 */
        agent_exec_result_free(&r);
        msleep(100);
        assert_int_equal(agent_ping(&ppeer, 1000, &err), 0);
        assert_int_equal(kill(host_pid, 0), 0);

        c = cmd_in(CMD("sh", "-c", "i=0; while [ $i -lt 500 ]; do (true &) ; i=$((i+1)); done"),
                   "/");
        assert_int_equal(agent_exec(&ppeer, &c, 60000, &r, &err), 0);
        assert_int_equal(r.exit_code, 0);
        agent_exec_result_free(&r);
        int z = 0;
        for (int i = 0; i < 100; i++) {
                if ((z = zombies_of(host_pid)) == 0)
                        break;
                msleep(20);
        }
        assert_int_equal(z, 0);

        /* Only SIGKILL from outside stops it. */
        kill(host_pid, SIGKILL);
        int st;
        assert_int_equal(waitpid(mid, &st, 0), mid);
        char path[340];
        snprintf(path, sizeof(path), "%s/agent.sock", pdir);
        unlink(path);
        rmdir(pdir);
}

int main(int argc, char **argv)
{
        init_path = argc > 1 ? argv[1] : getenv("SANDBOX_INIT");
        if (!init_path) {
                fprintf(stderr, "usage: test-agent PATH-TO-sandbox-init\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_ping),
            cmocka_unit_test(test_exec_basic),
            cmocka_unit_test(test_exec_env_cwd),
            cmocka_unit_test(test_exec_failures),
            cmocka_unit_test(test_exec_signal_exit),
            cmocka_unit_test(test_exec_timeout),
            cmocka_unit_test(test_exec_background),
            cmocka_unit_test(test_exec_truncated),
            cmocka_unit_test(test_spawn_ring),
            cmocka_unit_test(test_poll_wait),
            cmocka_unit_test(test_utf8_split),
            cmocka_unit_test(test_signal_group),
            cmocka_unit_test(test_cap),
            cmocka_unit_test(test_exited_bounded),
            cmocka_unit_test(test_stdin),
            cmocka_unit_test(test_stdin_timeout),
            cmocka_unit_test(test_held_does_not_block),
            cmocka_unit_test(test_exec_lost),
            cmocka_unit_test(test_protocol_errors),
            cmocka_unit_test(test_many_connections),
            cmocka_unit_test(test_root),
            cmocka_unit_test(test_big_argv),
            cmocka_unit_test(test_orphans_reaped),
            cmocka_unit_test(test_survives_signals),
            cmocka_unit_test(test_pid1),
        };
        return cmocka_run_group_tests(tests, start_init, stop_init);
}
