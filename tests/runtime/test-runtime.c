/* SPDX-License-Identifier: MIT */
/* Integration test of the ns runtime driver, checked from the host side.
 *
 *   test-runtime <static sandbox-init binary>
 *
 * Needs root, cgroups, idmapped mounts and a static /bin/busybox (the tiny
 * image). Exits 77 (skipped) when not root or without an init binary.
 * Works in a private temp dir ($TMPDIR or /tmp) and a private cgroup
 * parent, and removes both. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/common/fdpass.h"
#include "../../src/common/util.h"
#include "../../src/runtime/runtime.h"

#define UID_BASE 300000u
#define UID_COUNT 65536u
#define N_TIMED 20
#define N_THREADS 4
#define N_PER_THREAD 3

static int failures;
static char tmpdir[256], images[300], cgroot[64];
static uint64_t next_id;

#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (cond) {                                                                        \
                        printf("ok   ");                                                           \
                } else {                                                                           \
                        printf("FAIL ");                                                           \
                        failures++;                                                                \
                }                                                                                  \
                printf(__VA_ARGS__);                                                               \
                printf("\n");                                                                      \
        } while (0)

static void sandbox_dir(const char *name, char *out, size_t len)
{
        if (path_join(out, len, tmpdir, name) < 0) {
                fprintf(stderr, "sandbox dir %s/%s: path too long\n", tmpdir, name);
                exit(1);
        }
        mkdir(out, 0700);
}

static struct rt_spec make_spec(const char *dir, const char *rootfs, const char *host)
{
        return (struct rt_spec){
            .id = next_id++,
            .dir = dir,
            .rootfs = rootfs,
            .hostname = host,
            .uid_base = UID_BASE,
            .uid_count = UID_COUNT,
            .limits = {.memory_bytes = 256u << 20, .pids = 256, .cpu_shares = 512},
        };
}

/* Through the daemon's own dialler: a dir of any length. */
static bool agent_answers(const char *dir)
{
        int fd = -1;
        bool ok = unix_connect_in(dir, "agent.sock", 1000, &fd, NULL) == 0;
        if (fd >= 0)
                close(fd);
        return ok;
}

static bool same_ns(pid_t pid, const char *ns)
{
        char a[64], b[64], la[128] = "", lb[128] = "";
        snprintf(a, sizeof(a), "/proc/%d/ns/%s", (int)pid, ns);
        snprintf(b, sizeof(b), "/proc/self/ns/%s", ns);
        if (readlink(a, la, sizeof(la) - 1) < 0 || readlink(b, lb, sizeof(lb) - 1) < 0)
                return true;
        return strcmp(la, lb) == 0;
}

/* Value of a "Key:\tvalue" line of /proc/<pid>/status. */
static bool status_field(pid_t pid, const char *key, char *out, size_t len)
{
        char p[64], line[256];
        snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
        FILE *f = fopen(p, "re");
        bool found = false;
        size_t kl = strlen(key);
        while (f && fgets(line, sizeof(line), f)) {
                if (!strncmp(line, key, kl) && line[kl] == ':') {
                        snprintf(out, len, "%s", line + kl + 1 + strspn(line + kl + 1, " \t"));
                        out[strcspn(out, "\n")] = '\0';
                        found = true;
                        break;
                }
        }
        if (f)
                fclose(f);
        return found;
}

static int count_entries(const char *path, bool numeric_only)
{
        DIR *d = opendir(path);
        if (!d)
                return -1;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' &&
                    (!numeric_only || (de->d_name[0] >= '0' && de->d_name[0] <= '9')))
                        n++;
        closedir(d);
        return n;
}

/* Join the sandbox (user, mnt, uts ns) as its root in a child, write
 * /workspace/hello and report the hostname. */
static int write_inside(pid_t pid, char *host, size_t hlen)
{
        int p[2];
        if (pipe(p) < 0)
                return -1;
        pid_t c = fork();
        if (c == 0) {
                char path[64];
                const char *nss[] = {"user", "mnt", "uts"};
                int fds[3];
                for (int i = 0; i < 3; i++) {
                        snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, nss[i]);
                        fds[i] = open(path, O_RDONLY | O_CLOEXEC);
                }
                if (setns(fds[0], CLONE_NEWUSER) < 0 || setresgid(0, 0, 0) < 0 ||
                    setresuid(0, 0, 0) < 0 || setns(fds[1], CLONE_NEWNS) < 0 ||
                    setns(fds[2], CLONE_NEWUTS) < 0)
                        _exit(1);
                int fd = open("/workspace/hello", O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (fd < 0 || write(fd, "hi\n", 3) != 3)
                        _exit(2);
                close(fd);
                struct utsname u;
                uname(&u);
                _exit(write(p[1], u.nodename, strlen(u.nodename)) > 0 ? 0 : 3);
        }
        close(p[1]);
        ssize_t n = read(p[0], host, hlen - 1);
        host[n > 0 ? n : 0] = '\0';
        close(p[0]);
        int st;
        waitpid(c, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cg_file(const char *hier, uint64_t id, const char *file, char *out, size_t len)
{
        snprintf(out, len, "/sys/fs/cgroup/%s/%s/sb-%" PRIu64 "%s%s", hier, cgroot, id,
                 file ? "/" : "", file ? file : "");
}

/* read_small_at(), with out "" when the file cannot be read. */
static bool read_small(const char *path, char *out, size_t len)
{
        out[0] = '\0';
        return read_small_at(AT_FDCWD, path, out, len) >= 0;
}

/* fd 0-2 are /dev/null, fd 3 the listener; no fd is a directory or a
 * path outside the sandbox (CVE-2024-21626 class). Init may open more of
 * its own (epoll, signalfd, pipes). */
static void check_fds(pid_t pid)
{
        char p[128], l[256];
        bool ok = true;
        for (int fd = 0; fd < 256; fd++) {
                snprintf(p, sizeof(p), "/proc/%d/fd/%d", (int)pid, fd);
                ssize_t n = readlink(p, l, sizeof(l) - 1);
                if (n < 0) {
                        if (fd <= 3) {
                                printf("     fd %d missing\n", fd);
                                ok = false;
                        }
                        continue;
                }
                l[n] = '\0';
                struct stat st;
                bool dir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
                bool want = fd <= 2   ? !strcmp(l, "/dev/null")
                            : fd == 3 ? !strncmp(l, "socket:", 7)
                                      : l[0] != '/' || !strcmp(l, "/dev/null");
                if (dir || !want) {
                        printf("     fd %d -> %s\n", fd, l);
                        ok = false;
                }
        }
        CHECK(ok, "init fds: stdio on /dev/null, listener on 3, no host path or directory");
}

static void check_posture(pid_t pid, const struct rt_spec *s)
{
        static const char *const nss[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
        char v[256], p[512];
        for (size_t i = 0; i < ARRAY_SIZE(nss); i++)
                CHECK(!same_ns(pid, nss[i]), "init has its own %s namespace", nss[i]);
        snprintf(v, sizeof(v), "x");
        status_field(pid, "Uid", v, sizeof(v));
        char want[64];
        snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", UID_BASE, UID_BASE, UID_BASE, UID_BASE);
        CHECK(!strcmp(v, want), "init runs as host uid %u (Uid: %s)", UID_BASE, v);
        status_field(pid, "Gid", v, sizeof(v));
        CHECK(!strcmp(v, want), "init runs as host gid %u (Gid: %s)", UID_BASE, v);
        status_field(pid, "NoNewPrivs", v, sizeof(v));
        CHECK(!strcmp(v, "1"), "no_new_privs set");
        status_field(pid, "Seccomp", v, sizeof(v));
        CHECK(!strcmp(v, "2"), "seccomp filter mode (Seccomp: %s)", v);
        status_field(pid, "Seccomp_filters", v, sizeof(v));
        CHECK(!strcmp(v, "2"), "two seccomp filters (%s)", v);
        status_field(pid, "CapEff", v, sizeof(v));
        CHECK(!strcmp(v, "00000000a80425fb"), "CapEff is Docker's default set (%s)", v);
        status_field(pid, "CapBnd", v, sizeof(v));
        CHECK(!strcmp(v, "00000000a80425fb"), "CapBnd is Docker's default set (%s)", v);
        status_field(pid, "CapInh", v, sizeof(v));
        CHECK(!strcmp(v, "0000000000000000"), "CapInh empty");
        status_field(pid, "CapAmb", v, sizeof(v));
        CHECK(!strcmp(v, "0000000000000000"), "CapAmb empty");

        check_fds(pid);
        snprintf(p, sizeof(p), "/proc/%d/environ", (int)pid);
        CHECK(read_small(p, v, sizeof(v)) && v[0] == '\0', "init environment empty");
        snprintf(p, sizeof(p), "/proc/%d/exe", (int)pid);
        ssize_t n = readlink(p, v, sizeof(v) - 1);
        v[n > 0 ? n : 0] = '\0';
        CHECK(!strncmp(v, "/memfd:sandbox-init", 19), "init runs from the sealed memfd (%s)", v);
        int wfd = open(p, O_WRONLY | O_CLOEXEC);
        CHECK(wfd < 0, "init binary not writable via /proc/pid/exe (%s)", strerror(errno));
        if (wfd >= 0)
                close(wfd);

        snprintf(p, sizeof(p), "/proc/%d/root/bin/busybox", (int)pid);
        CHECK(access(p, X_OK) == 0, "rootfs shows /bin/busybox");
        struct stat st;
        snprintf(p, sizeof(p), "/proc/%d/root/workspace", (int)pid);
        CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode), "rootfs has /workspace");
        snprintf(p, sizeof(p), "/proc/%d/root/proc", (int)pid);
        int np = count_entries(p, true);
        CHECK(np >= 1 && np < 10, "/proc shows only the sandbox's pids (%d)", np);
        static const char *const masked[] = {"kcore", "keys", "timer_list", "sched_debug"};
        for (size_t i = 0; i < ARRAY_SIZE(masked); i++) {
                snprintf(p, sizeof(p), "/proc/%s", masked[i]);
                if (access(p, F_OK) < 0)
                        continue; /* not on this kernel */
                snprintf(p, sizeof(p), "/proc/%d/root/proc/%s", (int)pid, masked[i]);
                CHECK(stat(p, &st) == 0 && S_ISCHR(st.st_mode), "/proc/%s masked", masked[i]);
        }
        snprintf(p, sizeof(p), "/proc/%d/root/proc/sys/kernel/core_pattern", (int)pid);
        int fd = open(p, O_WRONLY | O_CLOEXEC);
        CHECK(fd < 0 && errno == EROFS, "/proc/sys read-only (%s)", strerror(errno));
        if (fd >= 0)
                close(fd);
        snprintf(p, sizeof(p), "/proc/%d/root/sys/firmware", (int)pid);
        CHECK(count_entries(p, false) <= 0, "/sys/firmware hidden");
        snprintf(p, sizeof(p), "/proc/%d/root/dev", (int)pid);
        CHECK(count_entries(p, false) == 13, "/dev has the 13 expected entries (%d)",
              count_entries(p, false));
        snprintf(p, sizeof(p), "/proc/%d/root/tmp", (int)pid);
        CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 01777 && st.st_uid == UID_BASE,
              "/tmp is 1777 and owned by root inside");

        char host[80];
        int r = write_inside(pid, host, sizeof(host));
        CHECK(r == 0, "joined the sandbox and wrote /workspace/hello (%d)", r);
        CHECK(!strcmp(host, s->hostname), "hostname inside is %s", host);
        snprintf(p, sizeof(p), "%s/upper/workspace/hello", s->dir);
        CHECK(stat(p, &st) == 0 && st.st_uid == UID_BASE && st.st_gid == UID_BASE,
              "the file landed in upper/ owned by %u", UID_BASE);

        cg_file("memory", s->id, "memory.limit_in_bytes", p, sizeof(p));
        if (access("/sys/fs/cgroup/memory", F_OK) == 0) {
                read_small(p, v, sizeof(v));
                CHECK(strtoull(v, NULL, 10) == s->limits.memory_bytes, "memory limit set");
                cg_file("pids", s->id, "pids.max", p, sizeof(p));
                read_small(p, v, sizeof(v));
                CHECK(strtoull(v, NULL, 10) == s->limits.pids, "pids limit set");
        }
}

/* 1 frozen, 0 not, -1 unknown: v2 cgroup.events, else v1 freezer.state. */
static int frozen_state(uint64_t id)
{
        char p[256], v[256];
        const char *v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "" : "unified";
        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s%s/sb-%" PRIu64 "/cgroup.events", v2,
                 v2[0] ? "/" : "", cgroot, id);
        if (read_small(p, v, sizeof(v))) {
                char *f = strstr(v, "frozen ");
                return f ? f[7] == '1' : -1;
        }
        cg_file("freezer", id, "freezer.state", p, sizeof(p));
        if (read_small(p, v, sizeof(v)))
                return !strncmp(v, "FROZEN", 6);
        return -1;
}

static void check_freeze(struct rt *rt, pid_t pid, const struct rt_spec *s)
{
        struct sbx_error err = {0};
        uint64_t id = s->id;
        int r = rt_freeze(rt, s, &err);
        CHECK(r == 0, "rt_freeze %s", err.msg);
        CHECK(frozen_state(id) == 1, "cgroup reports frozen");
        CHECK(rt_is_alive(rt, s), "a frozen sandbox is alive");
        r = rt_thaw(rt, s, &err);
        CHECK(r == 0, "rt_thaw %s", err.msg);
        CHECK(frozen_state(id) == 0, "cgroup reports thawed");
        CHECK(kill(pid, 0) == 0, "init still there");
}

static bool cgroups_gone(uint64_t id)
{
        static const char *const h[] = {"unified", "memory", "pids", "cpu", "freezer", ""};
        for (size_t i = 0; i < ARRAY_SIZE(h); i++) {
                char p[256];
                if (h[i][0])
                        cg_file(h[i], id, NULL, p, sizeof(p));
                else
                        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/sb-%" PRIu64, cgroot, id);
                if (access(p, F_OK) == 0)
                        return false;
        }
        return true;
}

static void test_lifecycle(struct rt *rt, const char *rootfs)
{
        char dir[300];
        struct sbx_error err = {0};
        pid_t pid = 0;
        sandbox_dir("life", dir, sizeof(dir));
        struct rt_spec s = make_spec(dir, rootfs, "test-box");

        int r = rt_start(rt, &s, &pid, &err);
        CHECK(r == 0 && pid > 0, "rt_start (pid %d) %s", (int)pid, err.msg);
        if (r < 0)
                return;
        CHECK(agent_answers(dir), "agent.sock accepts connections");
        CHECK(rt_is_alive(rt, &s), "rt_is_alive");
        check_posture(pid, &s);
        check_freeze(rt, pid, &s);

        pid_t pid2 = 0;
        r = rt_start(rt, &s, &pid2, &err);
        CHECK(r == -EBUSY, "second rt_start on a live sandbox fails: %s", err.msg);

        memset(&err, 0, sizeof(err));
        r = rt_stop(rt, &s, &err);
        CHECK(r == 0 && !rt_is_alive(rt, &s), "rt_stop empties the cgroup");
        r = rt_start(rt, &s, &pid, &err);
        CHECK(r == 0, "restart after stop %s", err.msg);
        char p[512];
        snprintf(p, sizeof(p), "/proc/%d/root/workspace/hello", (int)pid);
        CHECK(r == 0 && access(p, F_OK) == 0, "files survive a restart");
        r = rt_freeze(rt, &s, &err);
        CHECK(r == 0, "freeze before destroy");
        r = rt_destroy(rt, &s, &err);
        CHECK(r == 0, "rt_destroy of a frozen sandbox %s", err.msg);
        CHECK(access(dir, F_OK) < 0, "sandbox dir removed");
        CHECK(cgroups_gone(s.id), "cgroups removed");
        usleep(50000);
        char state[64] = "gone";
        status_field(pid, "State", state, sizeof(state));
        CHECK(kill(pid, 0) < 0 || state[0] == 'Z', "init process gone (%s)", state);
}

/* The drivers' own threads (spare disks, the reaper of destroyed dirs)
 * hold an fd for a moment while they work: the process's fds, counted when
 * none of those is open (the least of a few looks), and whether they are
 * back to n within 5 s (a leak stays). */
static int fds_now(void)
{
        int n = count_entries("/proc/self/fd", false);
        for (int i = 0; i < 20; i++) {
                usleep(5000);
                n = MIN(n, count_entries("/proc/self/fd", false));
        }
        return n;
}

static bool fds_back_to(int n)
{
        for (int i = 0; i < 500; i++) {
                if (count_entries("/proc/self/fd", false) <= n)
                        return true;
                usleep(10000);
        }
        return false;
}

/* A hostile upper layer: a mount target replaced by a symlink must make
 * the launch fail, never mount over a host path. */
static void test_hostile(struct rt *rt, const char *rootfs)
{
        static const char *const cases[][2] = {
            {"proc", "/"},   {"dev", "../../../.."}, {"tmp", "/etc"},
            {"sys", "/sys"}, {"workspace", "/etc"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char dir[300], up[400], link[500];
                struct sbx_error err = {0};
                pid_t pid = 0;
                snprintf(up, sizeof(up), "hostile-%zu", i);
                sandbox_dir(up, dir, sizeof(dir));
                snprintf(up, sizeof(up), "%s/upper", dir);
                mkdir(up, 0755);
                snprintf(link, sizeof(link), "%s/%s", up, cases[i][0]);
                if (chown(up, UID_BASE, UID_BASE) < 0 || symlink(cases[i][1], link) < 0)
                        CHECK(false, "prepare hostile upper %s", link);
                struct rt_spec s = make_spec(dir, rootfs, "hostile");
                int before = fds_now();
                int r = rt_start(rt, &s, &pid, &err);
                CHECK(r < 0, "upper /%s -> %s refused: %s", cases[i][0], cases[i][1], err.msg);
                CHECK(!rt_is_alive(rt, &s), "nothing left running");
                CHECK(fds_back_to(before), "no fd leaked");
                rt_destroy(rt, &s, &err);
        }
}

static void test_timing(struct rt *rt, const char *rootfs)
{
        struct rt_spec specs[N_TIMED];
        char dirs[N_TIMED][300];
        int64_t total = 0, worst = 0;
        int ok = 0;
        for (int i = 0; i < N_TIMED; i++) {
                char name[32];
                struct sbx_error err = {0};
                pid_t pid;
                snprintf(name, sizeof(name), "t%d", i);
                sandbox_dir(name, dirs[i], sizeof(dirs[i]));
                specs[i] = make_spec(dirs[i], rootfs, name);
                int64_t t0 = mono_us();
                int r = rt_start(rt, &specs[i], &pid, &err);
                int64_t dt = mono_us() - t0;
                if (r == 0 && agent_answers(dirs[i]))
                        ok++;
                else
                        printf("     start %d: %s\n", i, err.msg);
                total += dt;
                worst = MAX(worst, dt);
        }
        CHECK(ok == N_TIMED, "%d sandboxes started and answering", ok);
        printf("     rt_start: mean %.2f ms, worst %.2f ms over %d starts\n",
               (double)total / N_TIMED / 1000.0, (double)worst / 1000.0, N_TIMED);
        int64_t t0 = mono_us();
        int gone = 0;
        for (int i = 0; i < N_TIMED; i++) {
                struct sbx_error err = {0};
                if (rt_destroy(rt, &specs[i], &err) == 0)
                        gone++;
                else
                        printf("     destroy %d: %s\n", i, err.msg);
        }
        CHECK(gone == N_TIMED, "all destroyed");
        printf("     rt_destroy: mean %.2f ms\n", (double)(mono_us() - t0) / N_TIMED / 1000.0);
}

struct worker {
        struct rt *rt;
        const char *rootfs;
        struct rt_spec specs[N_PER_THREAD];
        char dirs[N_PER_THREAD][300];
        char names[N_PER_THREAD][32];
        int started;
};

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        for (int i = 0; i < N_PER_THREAD; i++) {
                struct sbx_error err = {0};
                pid_t pid;
                if (rt_start(w->rt, &w->specs[i], &pid, &err) == 0 && agent_answers(w->dirs[i]))
                        w->started++;
                else
                        printf("     concurrent start: %s\n", err.msg);
        }
        return NULL;
}

/* rt_start from several daemon threads at once. */
static void test_concurrent(struct rt *rt, const char *rootfs)
{
        static struct worker w[N_THREADS];
        pthread_t th[N_THREADS];
        for (int t = 0; t < N_THREADS; t++) {
                w[t] = (struct worker){.rt = rt, .rootfs = rootfs};
                for (int i = 0; i < N_PER_THREAD; i++) {
                        char *name = w[t].names[i];
                        snprintf(name, sizeof(w[t].names[i]), "c%d-%d", t, i);
                        sandbox_dir(name, w[t].dirs[i], sizeof(w[t].dirs[i]));
                        w[t].specs[i] = make_spec(w[t].dirs[i], rootfs, name);
                }
        }
        for (int t = 0; t < N_THREADS; t++)
                pthread_create(&th[t], NULL, worker_main, &w[t]);
        int started = 0, gone = 0;
        for (int t = 0; t < N_THREADS; t++) {
                pthread_join(th[t], NULL);
                started += w[t].started;
        }
        CHECK(started == N_THREADS * N_PER_THREAD, "%d concurrent starts from %d threads", started,
              N_THREADS);
        for (int t = 0; t < N_THREADS; t++)
                for (int i = 0; i < N_PER_THREAD; i++) {
                        struct sbx_error err = {0};
                        gone += rt_destroy(rt, &w[t].specs[i], &err) == 0;
                }
        CHECK(gone == N_THREADS * N_PER_THREAD, "all concurrent sandboxes destroyed");
}

static void test_images(char *rootfs, size_t len)
{
        struct sbx_error err = {0};
        mkdir(images, 0755);
        int r = rt_image_bootstrap(images, "tiny", true, NULL, NULL, &err);
        CHECK(r == 0, "build tiny %s", err.msg);
        r = rt_image_bootstrap(images, "tiny", true, NULL, NULL, &err);
        CHECK(r == -EEXIST, "a second build of tiny is refused, the first kept");
        r = rt_image_bootstrap(images, "nope", false, NULL, NULL, &err);
        CHECK(r == -EINVAL, "@mmdebstrap without a suite refused");
        struct rt_image_info *v = NULL;
        size_t n = 0;
        r = rt_image_list(images, &v, &n, &err);
        CHECK(r == 0 && n == 1 && !strcmp(v[0].name, "tiny") && v[0].size_bytes > 0 &&
                  v[0].built_at_ms > 0,
              "rt_image_list shows tiny");
        free(v);
        CHECK(rt_image_rootfs(images, "../etc", rootfs, len) == -EINVAL, "bad name refused");
        CHECK(rt_image_rootfs(images, "debian", rootfs, len) == -ENOENT, "absent image");
        r = rt_image_rootfs(images, "tiny", rootfs, len);
        CHECK(r == 0, "tiny rootfs at %s", rootfs);
}

/* ---- the driver table (driver.c), with a fake driver ---- */

static int fake_calls;

static int fake_open(const struct rt_config *cfg, void **ret, struct sbx_error *err)
{
        *ret = &fake_calls;
        return 0;
}

static void fake_close(void *state)
{
}

static int fake_op(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        (*(int *)state)++;
        return 0;
}

static int fake_start(void *state, const struct rt_spec *spec, pid_t *ret_pid,
                      struct sbx_error *err)
{
        *ret_pid = 4242;
        return fake_op(state, spec, err);
}

static bool fake_alive(void *state, const struct rt_spec *spec)
{
        return false;
}

static bool fake_any_alive(void *state)
{
        return false;
}

static int fake_dial(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        return sbx_error_set(err, ECONNREFUSED, "fake");
}

static const struct rt_driver fake = {
    .name = "fake",
    .open = fake_open,
    .close = fake_close,
    .start = fake_start,
    .freeze = fake_op,
    .thaw = fake_op,
    .stop = fake_op,
    .destroy = fake_op,
    .is_alive = fake_alive,
    .any_alive = fake_any_alive,
    .dial = fake_dial,
};

static void test_driver_table(void)
{
        struct sbx_error err = {0};
        struct rt *rt = NULL;
        const struct rt_driver *one[] = {&fake};
        struct rt_config cfg = {.drivers = one, .n_drivers = 1};
        int r = rt_open(&cfg, &rt, &err);
        CHECK(r == 0 && rt_driver(rt, NULL) == &fake, "rt_open with a fake driver %s", err.msg);
        if (r < 0)
                return;
        struct rt_spec spec = {.id = 1, .dir = "/nonexistent", .rootfs = "/", .hostname = "f"};
        pid_t pid = 0;
        r = rt_start(rt, &spec, &pid, &err);
        CHECK(r == 0 && pid == 4242 && fake_calls == 1, "rt_start reaches the default driver");
        CHECK(rt_freeze(rt, &spec, &err) == 0 && rt_thaw(rt, &spec, &err) == 0 &&
                  rt_stop(rt, &spec, &err) == 0 && rt_destroy(rt, &spec, &err) == 0 &&
                  fake_calls == 5,
              "freeze, thaw, stop, destroy reach it");
        CHECK(!rt_is_alive(rt, &spec) && !rt_any_alive(rt), "is_alive, any_alive reach it");
        int fd = -1;
        CHECK(rt_dial(rt, &spec, &fd, &err) == -ECONNREFUSED, "dial reaches it");
        CHECK(rt_root(rt, &spec, &fd, &err) == -ENOTSUP &&
                  rt_set_hostname(rt, &spec, pid, "x", &err) == -ENOTSUP &&
                  rt_checkpoint(rt, &spec, "/nonexistent", 0, &err) == -ENOTSUP &&
                  rt_restore(rt, &spec, "/nonexistent", &pid, &err) == -ENOTSUP,
              "optional operations it lacks are ENOTSUP (%s)", err.msg);
        spec.driver = "gvisor";
        CHECK(rt_start(rt, &spec, &pid, &err) == -ENOTSUP && rt_caps(rt, &spec) == 0,
              "an unknown driver: ENOTSUP (%s)", err.msg);
        CHECK(rt_is_alive(rt, &spec), "a sandbox of an unknown driver cannot be known dead");
        rt_close(rt);

        struct rt_driver bad = fake;
        bad.caps = RT_CAP_CHECKPOINT;
        const struct rt_driver *badv[] = {&bad};
        cfg.drivers = badv;
        CHECK(rt_open(&cfg, &rt, &err) == -EINVAL, "a capability without its operation refused");
        bad = fake;
        bad.dial = NULL;
        CHECK(rt_open(&cfg, &rt, &err) == -EINVAL, "a driver without dial refused");
        const struct rt_driver *twice[] = {&fake, &fake};
        cfg.drivers = twice;
        cfg.n_drivers = 2;
        CHECK(rt_open(&cfg, &rt, &err) == -EEXIST, "two drivers of one name refused");
}

int main(int argc, char **argv)
{
        const char *init = argc > 1 ? argv[1] : getenv("SANDBOX_INIT");
        if (geteuid() != 0 || !init) {
                fprintf(stderr, "skipped: needs root and a sandbox-init path\n");
                return 77;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        test_driver_table();
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/rt-test-XXXXXX", t ? t : "/tmp");
        if (!mkdtemp(tmpdir))
                return 1;
        snprintf(images, sizeof(images), "%s/images", tmpdir);
        snprintf(cgroot, sizeof(cgroot), "sandboxd-test-%d", (int)getpid());
        next_id = 1;

        char rootfs[512];
        test_images(rootfs, sizeof(rootfs));

        struct rt *rt = NULL;
        struct sbx_error err = {0};
        struct rt_config cfg = {.init_path = init, .cgroup_root = cgroot};
        int r = rt_open(&cfg, &rt, &err);
        CHECK(r == 0, "rt_open %s", err.msg);
        if (r == 0) {
                struct rt_spec ns = {.driver = "ns"};
                int fd;
                CHECK(rt_caps(rt, &ns) == (RT_CAP_NAT | RT_CAP_DISK_LIMIT | RT_CAP_HOSTNAME |
                                           RT_CAP_AGENT_ROOT | RT_CAP_ID_SHIFT),
                      "ns: NAT, disk limit, rename, root from the agent");
                CHECK(rt_root(rt, &ns, &fd, &err) == -ENOTSUP &&
                          rt_checkpoint(rt, &ns, tmpdir, 0, &err) == -ENOTSUP,
                      "ns: no host-side root handle, no checkpoint");
                test_lifecycle(rt, rootfs);
                test_hostile(rt, rootfs);
                test_timing(rt, rootfs);
                test_concurrent(rt, rootfs);
                rt_close(rt);
        }
        static const char *const h[] = {"unified", "memory", "pids", "cpu", "freezer", ""};
        for (size_t i = 0; i < ARRAY_SIZE(h); i++) {
                char p[256];
                snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s%s", h[i], h[i][0] ? "/" : "", cgroot);
                rmdir(p);
        }
        rm_rf_at(AT_FDCWD, tmpdir);
        printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
        return failures ? 1 : 0;
}
