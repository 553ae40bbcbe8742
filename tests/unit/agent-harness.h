/* SPDX-License-Identifier: MIT */
/* What the agent tests share (test-agent.c, test-agent-guard.c): one
 * sandbox-init started outside any sandbox with --listen=<tmpdir>/agent.sock,
 * the client reaching it, and helpers to run commands through it. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/agent/client.h"

static const char *init_path;
static char dir[256];
static struct agent_peer agent; /* <dir>/agent.sock */
static pid_t init_pid = -1;

#define CMD(...) ((const char *const[]){__VA_ARGS__, NULL})

static inline size_t count(const char *const *v)
{
        size_t n = 0;
        while (v[n])
                n++;
        return n;
}

static inline struct agent_cmd cmd_in(const char *const *argv, const char *cwd)
{
        struct agent_cmd c = {.argv = argv, .argc = count(argv), .cwd = cwd};
        return c;
}

/* Most commands run in the test's own directory: /workspace does not exist
 * outside a sandbox. */
static inline struct agent_cmd cmd(const char *const *argv)
{
        return cmd_in(argv, dir);
}

static inline void msleep(int ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

/* The waits below are generous (seconds): a loaded host runs sanitized
 * builds and tests side by side. They end as soon as the thing happens. */
static inline bool pid_gone(pid_t pid)
{
        for (int i = 0; i < 1000; i++) {
                if (kill(pid, 0) < 0 && errno == ESRCH)
                        return true;
                msleep(10);
        }
        return false;
}

static inline struct agent_exec_result exec_ok(const struct agent_cmd *c, int64_t timeout_ms)
{
        struct agent_exec_result r = {0};
        struct sbx_error err = {0};
        int rc = agent_exec(&agent, c, timeout_ms, &r, &err);
        if (rc < 0)
                fail_msg("exec: %d %s", rc, err.msg);
        return r;
}

static inline char *spawn_ok(const struct agent_cmd *c)
{
        struct agent_proc_status st = {0};
        struct sbx_error err = {0};
        int rc = agent_spawn(&agent, c, &st, &err);
        if (rc < 0)
                fail_msg("spawn: %d %s", rc, err.msg);
        assert_false(st.exited);
        assert_true(st.started_at > 0);
        char *id = strdup(st.id);
        agent_proc_status_free(&st);
        return id;
}

static inline void poll_ok(const char *id, uint64_t of, uint64_t ef, int wait,
                           struct agent_poll_result *r)
{
        struct sbx_error err = {0};
        int rc = agent_poll(&agent, id, of, ef, wait, r, &err);
        if (rc < 0)
                fail_msg("poll %s: %d %s", id, rc, err.msg);
}

/* Poll until exited, ignoring output. */
static inline void wait_exit_on(const struct agent_peer *peer, const char *id,
                                struct agent_poll_result *last)
{
        for (int i = 0; i < 1000; i++) {
                struct sbx_error err = {0};
                int rc = agent_poll(peer, id, 0, 0, 0, last, &err);
                if (rc < 0)
                        fail_msg("poll %s: %d %s", id, rc, err.msg);
                if (last->status.exited)
                        return;
                agent_poll_result_free(last);
                msleep(20);
        }
        fail_msg("process %s did not exit", id);
}

static inline void wait_exit(const char *id, struct agent_poll_result *last)
{
        wait_exit_on(&agent, id, last);
}

static inline void kill_all(void)
{
        struct agent_proc_list l = {0};
        struct sbx_error err = {0};
        assert_int_equal(agent_list(&agent, &l, &err), 0);
        for (size_t i = 0; i < l.n; i++)
                assert_int_equal(agent_kill(&agent, l.procs[i].id, &err), 0);
        agent_proc_list_free(&l);
}

static inline int64_t elapsed_ms(int64_t since)
{
        return mono_ms() - since;
}

/* ---------------------------------------------------------------- setup */

static inline int start_init(void **state)
{
        char sock[300];
        const char *tmp = getenv("TMPDIR");

        snprintf(dir, sizeof(dir), "%s/sbx-agent-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
                return -1;
        agent = agent_peer_dir(dir);
        snprintf(sock, sizeof(sock), "--listen=%s/agent.sock", dir);
        init_pid = fork();
        if (init_pid < 0)
                return -1;
        if (init_pid == 0) {
                execl(init_path, init_path, sock, (char *)NULL);
                _exit(127);
        }
        for (int i = 0; i < 500; i++) {
                struct sbx_error err;
                if (agent_ping(&agent, 1000, &err) == 0)
                        return 0;
                msleep(10);
        }
        return -1;
}

static inline int stop_init(void **state)
{
        if (init_pid > 0) {
                kill(init_pid, SIGKILL);
                waitpid(init_pid, NULL, 0);
        }
        int dfd = open(dir, O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                struct dirent *de;
                DIR *d = fdopendir(dfd);
                while (d && (de = readdir(d)))
                        if (de->d_name[0] != '.')
                                unlinkat(dirfd(d), de->d_name, 0);
                if (d)
                        closedir(d);
        }
        rmdir(dir);
        return 0;
}

/* Zombies: count children of sandbox-init in state Z. */
static inline int zombies_of(pid_t parent)
{
        DIR *d = opendir("/proc");
        struct dirent *de;
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d))) {
                char path[300], buf[512];
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t len = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (len <= 0)
                        continue;
                buf[len] = '\0';
                char *rp = strrchr(buf, ')');
                char st;
                int ppid;
                if (rp && sscanf(rp + 1, " %c %d", &st, &ppid) == 2 && ppid == parent && st == 'Z')
                        n++;
        }
        closedir(d);
        return n;
}
