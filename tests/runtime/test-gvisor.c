/* SPDX-License-Identifier: MIT */
/* The gvisor driver against the real runsc: start, the agent, the files
 * coherent between the host's view and the sandbox's, the kernel that is
 * not the host's, the guard of PID 1, freeze, stop, restart, destroy.
 *
 *   test-gvisor <static sandbox-init binary>
 *
 * Needs root and runsc (scripts/setup.sh installs it); exits 77 (skipped)
 * without them, which the suite reports. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../../src/agent/client.h"
#include "../../src/runtime/runtime.h"

static int failures;
static struct rt *rt_of_test;
static char tmpdir[256], images[300], cgroot[64], state[300];

#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (cond) {                                                                        \
                        printf("ok - ");                                                           \
                } else {                                                                           \
                        printf("not ok - ");                                                       \
                        failures++;                                                                \
                }                                                                                  \
                printf(__VA_ARGS__);                                                               \
                printf("\n");                                                                      \
        } while (0)

#define CMD(...) ((const char *const[]){__VA_ARGS__, NULL})

struct box {
        struct rt_spec spec;
        char dir[300];
        char agent_dir[320];
        struct agent_peer peer;
};

static void box_init(struct box *b, uint64_t id, const char *rootfs, const char *name)
{
        memset(b, 0, sizeof(*b));
        snprintf(b->dir, sizeof(b->dir), "%s/sb-%" PRIu64, tmpdir, id);
        mkdir(b->dir, 0700);
        snprintf(b->agent_dir, sizeof(b->agent_dir), "%s/agent", b->dir);
        b->spec = (struct rt_spec){
            .driver = "gvisor",
            .id = id,
            .dir = b->dir,
            .rootfs = rootfs,
            .hostname = name,
            .uid_base = 400000,
            .uid_count = 65536,
            .limits = {
                .memory_bytes = 512u << 20, .pids = 256, .tmp_bytes = 8u << 20, .nofile = 1024}};
        b->peer = agent_peer_dir(b->agent_dir);
}

/* Run argv in the sandbox; its exit code, stdout in out. */
static int run(struct box *b, const char *const *argv, char *out, size_t len)
{
        size_t argc = 0;
        while (argv[argc])
                argc++;
        struct agent_cmd cmd = {.argv = argv, .argc = argc};
        struct agent_exec_result r = {0};
        struct sbx_error err = {0};
        if (agent_exec(&b->peer, &cmd, 20000, &r, &err) < 0) {
                printf("# exec %s: %s\n", argv[0], err.msg);
                return -1;
        }
        if (out)
                snprintf(out, len, "%s", r.out ? r.out : "");
        int code = r.exit_code;
        agent_exec_result_free(&r);
        return code;
}

static void check_kernel(struct box *b)
{
        struct utsname u;
        uname(&u);
        char out[256];
        int c = run(b, CMD("uname", "-r"), out, sizeof(out));
        out[strcspn(out, "\n")] = '\0';
        CHECK(c == 0 && *out && strcmp(out, u.release),
              "uname -r inside (%s) is not the host's (%s)", out, u.release);
        char hv[256];
        c = run(b, CMD("cat", "/proc/version"), hv, sizeof(hv));
        CHECK(c == 0 && !strstr(hv, u.version), "/proc/version inside is not the host's");
        c = run(b, CMD("hostname"), out, sizeof(out));
        CHECK(c == 0 && !strncmp(out, "gv-box", 6), "hostname inside is the sandbox's (%s)", out);
        struct sbx_error err = {0};
        int r = rt_set_hostname(rt_of_test, &b->spec, 0, "renamed-box", &err);
        c = run(b, CMD("hostname"), out, sizeof(out));
        CHECK(r == 0 && c == 0 && !strcmp(out, "renamed-box\n"), "renamed (%s) %s", out, err.msg);
        c = run(b, CMD("sh", "-c", "hostname evil"), out, sizeof(out));
        CHECK(c != 0, "the workload cannot rename it itself");
}

static void check_files(struct rt *rt, struct box *b)
{
        char p[512], out[256];
        struct sbx_error err = {0};
        int c = run(b, CMD("sh", "-c", "echo inside > /workspace/a && echo t > /tmp/t"), NULL, 0);
        CHECK(c == 0, "write /workspace/a inside");
        int root = -1;
        int r = rt_root(rt, &b->spec, &root, &err);
        CHECK(r == 0, "rt_root %s", err.msg);
        if (r < 0)
                return;
        int fd = openat(root, "workspace/a", O_RDONLY | O_CLOEXEC);
        char v[32] = "";
        ssize_t n = fd >= 0 ? read(fd, v, sizeof(v) - 1) : -1;
        v[n > 0 ? n : 0] = '\0';
        CHECK(!strcmp(v, "inside\n"), "the host's root handle sees it at once (%s)", v);
        if (fd >= 0)
                close(fd);
        fd = openat(root, "tmp/t", O_RDONLY | O_CLOEXEC);
        CHECK(fd >= 0, "and the sandbox's /tmp");
        if (fd >= 0)
                close(fd);
        fd = openat(root, "workspace/b", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHECK(fd >= 0 && write(fd, "host\n", 5) == 5, "write /workspace/b from the host");
        if (fd >= 0)
                close(fd);
        c = run(b, CMD("cat", "/workspace/b"), out, sizeof(out));
        CHECK(c == 0 && !strcmp(out, "host\n"), "the sandbox sees it at once (%s)", out);
        c = run(b, CMD("sh", "-c", "head -c 9000000 /dev/zero > /tmp/big"), NULL, 0);
        CHECK(c != 0, "/tmp is capped at its size (exit %d)", c);
        close(root);
        snprintf(p, sizeof(p), "%s/upper/workspace/a", b->dir);
        CHECK(access(p, F_OK) == 0, "the file is in the sandbox's upper layer");
}

static void check_guard(struct box *b)
{
        char out[512];
        int c = run(b, CMD("cat", "/proc/1/comm"), out, sizeof(out));
        CHECK(c == 0 && strncmp(out, "sandbox-init", 12),
              "pid 1 the workload sees is not sandbox-init (%s)", out);
        c = run(b, CMD("sh", "-c", "ls -A /.sbx/agent"), out, sizeof(out));
        CHECK(c == 0 && out[0] == '\0', "the agent's socket directory is empty inside (%s)", out);
        c = run(
            b, CMD("sh", "-c", "cat /proc/sys/net/ipv4/ip_forward > /proc/sys/net/ipv4/ip_forward"),
            out, sizeof(out));
        CHECK(c != 0, "the kernel's knobs are read-only for the workload (exit %d)", c);
        c = run(b, CMD("sh", "-c", "kill -9 1; sleep 0.2; echo after"), out, sizeof(out));
        struct sbx_error err = {0};
        CHECK(agent_ping(&b->peer, 2000, &err) == 0, "after kill -9 1 the agent answers %s",
              err.msg);
        c = run(b, CMD("echo", "alive"), out, sizeof(out));
        CHECK(c == 0 && !strcmp(out, "alive\n"), "and the next exec works");
}

/* What the spec takes away from gVisor's defaults: its /dev/net/tun
 * (hidden under an empty read-only tmpfs) and core dumps. */
static void check_spec_limits(struct box *b)
{
        char out[256];
        int c = run(b, CMD("sh", "-c", "ls -A /dev/net; test -e /dev/net/tun && echo tun"), out,
                    sizeof(out));
        CHECK(c != 0 && out[0] == '\0', "/dev/net is empty inside (%s)", out);
        c = run(b, CMD("sh", "-c", "mkdir /tmp/m && umount /dev/net"), NULL, 0);
        CHECK(c != 0, "and stays so");
        c = run(b, CMD("sh", "-c", "ulimit -Hc; ulimit -c unlimited"), out, sizeof(out));
        CHECK(c != 0 && !strcmp(out, "0\n"), "the core limit is 0 and stays so (%s)", out);
}

static void test_lifecycle(struct rt *rt, const char *rootfs)
{
        struct box b;
        struct sbx_error err = {0};
        box_init(&b, 1, rootfs, "gv-box");
        pid_t pid = 0;
        int64_t t0 = mono_ms();
        int r = rt_start(rt, &b.spec, &pid, &err);
        CHECK(r == 0, "rt_start (%" PRId64 " ms) %s", mono_ms() - t0, err.msg);
        if (r < 0)
                return;
        CHECK(rt_is_alive(rt, &b.spec), "rt_is_alive");
        char out[64];
        CHECK(run(&b, CMD("echo", "hi"), out, sizeof(out)) == 0 && !strcmp(out, "hi\n"), "exec");
        check_kernel(&b);
        check_files(rt, &b);
        check_spec_limits(&b);
        check_guard(&b);
        CHECK(rt_freeze(rt, &b.spec, &err) == 0, "freeze %s", err.msg);
        CHECK(agent_ping(&b.peer, 300, &err) < 0, "a frozen sandbox does not answer");
        CHECK(rt_thaw(rt, &b.spec, &err) == 0, "thaw %s", err.msg);
        CHECK(agent_ping(&b.peer, 5000, &err) == 0, "a thawed one does %s", err.msg);
        r = rt_start(rt, &b.spec, &pid, &err);
        CHECK(r == -EBUSY, "a second start of a live sandbox is -EBUSY");
        CHECK(rt_stop(rt, &b.spec, &err) == 0 && !rt_is_alive(rt, &b.spec), "rt_stop %s", err.msg);
        int root = -1;
        CHECK(rt_root(rt, &b.spec, &root, &err) == -ESTALE, "no root handle while stopped");
        r = rt_start(rt, &b.spec, &pid, &err);
        CHECK(r == 0, "restart after stop %s", err.msg);
        CHECK(run(&b, CMD("cat", "/workspace/a"), out, sizeof(out)) == 0 &&
                  !strcmp(out, "inside\n"),
              "files survive a restart");
        CHECK(rt_destroy(rt, &b.spec, &err) == 0, "rt_destroy %s", err.msg);
        CHECK(access(b.dir, F_OK) < 0, "sandbox dir removed");
}

static long counter(struct box *b)
{
        char out[64];
        return run(b, CMD("cat", "/tmp/count"), out, sizeof(out)) == 0 ? strtol(out, NULL, 10) : -1;
}

/* A checkpoint saves the kernel, the processes and their memory, and the
 * files; a restore continues them; a second sandbox restored from the
 * same checkpoint (a fork) continues them too, under its own name. */
static void test_checkpoint(struct rt *rt, const char *rootfs)
{
        struct box b, f;
        struct sbx_error err = {0};
        box_init(&b, 3, rootfs, "gv-ckpt");
        pid_t pid = 0;
        int r = rt_start(rt, &b.spec, &pid, &err);
        CHECK(r == 0, "rt_start %s", err.msg);
        if (r < 0)
                return;
        /* Written aside and renamed: a read never sees the file empty. */
        const char *loop = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.new; "
                           "mv /tmp/count.new /tmp/count; sleep 0.05; done";
        struct agent_cmd cmd = {.argv = CMD("sh", "-c", loop), .argc = 3};
        struct agent_proc_status st = {0};
        CHECK(agent_spawn(&b.peer, &cmd, &st, &err) == 0, "spawn a counter %s", err.msg);
        agent_proc_status_free(&st);
        run(&b, CMD("sh", "-c", "echo kept > /workspace/k; sleep 0.5"), NULL, 0);
        char ck[400];
        snprintf(ck, sizeof(ck), "%s/ck", tmpdir);
        mkdir(ck, 0700);
        long c0 = counter(&b); /* where it was, just before */
        int64_t t0 = mono_ms();
        err = (struct sbx_error){0};
        r = rt_checkpoint(rt, &b.spec, ck, 0, &err);
        CHECK(r == 0, "checkpoint (%" PRId64 " ms) %s", mono_ms() - t0, err.msg);
        CHECK(!rt_is_alive(rt, &b.spec), "a checkpoint without keep-running ends the sandbox");
        if (r < 0)
                return;
        t0 = mono_ms();
        err = (struct sbx_error){0};
        r = rt_restore(rt, &b.spec, ck, &pid, &err);
        CHECK(r == 0, "restore (%" PRId64 " ms) %s", mono_ms() - t0, err.msg);
        long c1 = counter(&b);
        usleep(300000);
        long c2 = counter(&b);
        CHECK(c0 > 0 && c1 >= c0 && c2 > c1,
              "the counter goes on from where it was (%ld before, %ld, then %ld)", c0, c1, c2);
        char out[64];
        CHECK(run(&b, CMD("cat", "/workspace/k"), out, sizeof(out)) == 0 && !strcmp(out, "kept\n"),
              "files are there");
        /* A failed checkpoint (runsc will not overwrite an image) leaves
         * it running, its agent answering. */
        err = (struct sbx_error){0};
        r = rt_checkpoint(rt, &b.spec, ck, RT_CKPT_KEEP_RUNNING, &err);
        CHECK(r < 0 && rt_is_alive(rt, &b.spec) && agent_ping(&b.peer, 5000, NULL) == 0,
              "a failed checkpoint leaves it running: %s", err.msg);
        snprintf(ck, sizeof(ck), "%s/ck2", tmpdir);
        mkdir(ck, 0700);
        t0 = mono_ms();
        err = (struct sbx_error){0};
        r = rt_checkpoint(rt, &b.spec, ck, RT_CKPT_KEEP_RUNNING, &err);
        CHECK(r == 0 && rt_is_alive(rt, &b.spec), "checkpoint, keep running (%" PRId64 " ms) %s",
              mono_ms() - t0, err.msg);
        CHECK(counter(&b) >= c2, "and it still counts");

        /* The fork: its own dir with a copy of the checkpoint. */
        box_init(&f, 4, rootfs, "gv-fork");
        char cp[1200];
        snprintf(cp, sizeof(cp), "cp -a %s %s/ck", ck, f.dir);
        CHECK(system(cp) == 0, "copy the checkpoint");
        snprintf(cp, sizeof(cp), "%s/ck", f.dir);
        t0 = mono_ms();
        err = (struct sbx_error){0};
        r = rt_restore(rt, &f.spec, cp, &pid, &err);
        CHECK(r == 0, "fork: restore as another sandbox (%" PRId64 " ms) %s", mono_ms() - t0,
              err.msg);
        long fc = counter(&f);
        CHECK(fc >= c2, "the fork's counter goes on too (%ld, from at least %ld)", fc, c2);
        CHECK(run(&f, CMD("hostname"), out, sizeof(out)) == 0 && !strcmp(out, "gv-fork\n"),
              "the fork has its own name (%s)", out);
        run(&f, CMD("sh", "-c", "echo fork > /workspace/k"), NULL, 0);
        CHECK(run(&b, CMD("cat", "/workspace/k"), out, sizeof(out)) == 0 && !strcmp(out, "kept\n"),
              "and its own files");
        err = (struct sbx_error){0};
        CHECK(rt_destroy(rt, &f.spec, &err) == 0, "destroy the fork %s", err.msg);
        CHECK(rt_destroy(rt, &b.spec, &err) == 0, "destroy %s", err.msg);
}

/* NAT: a veth in a netns of its own that the sentry runs its own network
 * stack on; the address and route are the ns class's. */
static void test_nat(struct rt *rt, const char *rootfs)
{
        struct box b;
        struct sbx_error err = {0};
        box_init(&b, 2, rootfs, "gv-nat");
        b.spec.limits.network = RT_NET_NAT;
        b.spec.uid_base = 400000 + 3 * 65536; /* the hint: /30 number 3... of the range */
        pid_t pid = 0;
        int r = rt_start(rt, &b.spec, &pid, &err);
        CHECK(r == 0, "rt_start with NAT %s", err.msg);
        if (r < 0)
                return;
        char out[1024];
        int c = run(&b, CMD("ip", "-4", "addr"), out, sizeof(out));
        CHECK(c == 0 && strstr(out, "10.251.77."), "the sandbox's stack has the veth's address");
        c = run(&b, CMD("ip", "-4", "route"), out, sizeof(out));
        CHECK(c == 0 && strstr(out, "default via 10.251.77."), "and its default route (%s)", out);
        c = run(&b, CMD("cat", "/etc/resolv.conf"), out, sizeof(out));
        CHECK(c == 0 && strstr(out, "nameserver 10.251.77.1"), "and the daemon's resolver (%s)",
              out);
        char p[400];
        snprintf(p, sizeof(p), "%s/netns", b.dir);
        CHECK(rt_destroy(rt, &b.spec, &err) == 0, "rt_destroy %s", err.msg);
        CHECK(access(p, F_OK) < 0, "the netns pin is gone");
}

/* A writable layer whose /tmp or /proc is a link: the host mounts /tmp and
 * the masks onto those directories of its tree, so the start must refuse
 * the link (saying so), never mount onto where it points. */
static void test_symlinked_targets(struct rt *rt, const char *rootfs)
{
        static const char *const names[] = {"tmp", "proc"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                struct box b;
                struct sbx_error err = {0};
                char p[400];
                box_init(&b, 3 + i, rootfs, "gv-link");
                snprintf(p, sizeof(p), "%s/upper", b.dir);
                mkdir(p, 0755);
                snprintf(p, sizeof(p), "%s/upper/%s", b.dir, names[i]);
                CHECK(symlink("/etc", p) == 0, "upper/%s -> /etc", names[i]);
                pid_t pid = 0;
                int r = rt_start(rt, &b.spec, &pid, &err);
                CHECK(r < 0 && strstr(err.msg, "symlink"), "a symlinked /%s is refused (%s)",
                      names[i], err.msg);
                struct statfs st;
                CHECK(statfs("/etc", &st) == 0 && st.f_type != 0x01021994 /* TMPFS_MAGIC */,
                      "and nothing was mounted on the host's /etc");
                if (r == 0)
                        rt_stop(rt, &b.spec, NULL);
                rt_destroy(rt, &b.spec, &err);
        }
}

int main(int argc, char **argv)
{
        const char *init = argc > 1 ? argv[1] : getenv("SANDBOX_INIT");
        if (geteuid() != 0 || !init) {
                fprintf(stderr, "skipped: needs root and a sandbox-init path\n");
                return 77;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/gv-test-XXXXXX", t ? t : "/tmp");
        if (!mkdtemp(tmpdir))
                return 1;
        chmod(tmpdir, 0700);
        snprintf(images, sizeof(images), "%s/images", tmpdir);
        snprintf(state, sizeof(state), "%s/state", tmpdir);
        mkdir(state, 0700);
        snprintf(cgroot, sizeof(cgroot), "sandboxd-gvtest-%d", (int)getpid());
        struct sbx_error err = {0};
        char rootfs[512];
        mkdir(images, 0755);
        int r = rt_image_bootstrap(images, "tiny", true, NULL, NULL, &err);
        CHECK(r == 0, "build tiny %s", err.msg);
        rt_image_rootfs(images, "tiny", rootfs, sizeof(rootfs));

        static const struct rt_driver *const gv[] = {&rt_gvisor_driver};
        struct rt_config cfg = {.init_path = init,
                                .cgroup_root = cgroot,
                                .instance = "00000000feedf00d",
                                .drivers = gv,
                                .n_drivers = 1,
                                .state_dir = state,
                                .net_range = "10.251.77.0/24",
                                .dns_port = -1};
        struct rt *rt = NULL;
        r = rt_open(&cfg, &rt, &err);
        if (r == -ENOTSUP) {
                printf("# skipped: %s\n", err.msg);
                rm_rf_at(AT_FDCWD, tmpdir);
                return 77;
        }
        CHECK(r == 0, "rt_open %s", err.msg);
        rt_of_test = rt;
        if (r == 0) {
                struct rt_spec s = {.driver = "gvisor"};
                CHECK(rt_caps(rt, &s) ==
                          (RT_CAP_NAT | RT_CAP_DISK_LIMIT | RT_CAP_HOSTNAME | RT_CAP_CHECKPOINT),
                      "gvisor: NAT, disk limit, rename, checkpoint; no id shift, no agent root");
                test_lifecycle(rt, rootfs);
                test_nat(rt, rootfs);
                test_checkpoint(rt, rootfs);
                test_symlinked_targets(rt, rootfs);
                rt_close(rt);
        }
        static const char *const h[] = {"unified", "memory", "pids", "cpu", "freezer", ""};
        for (size_t i = 0; i < ARRAY_SIZE(h); i++) {
                char p[256];
                snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s%s", h[i], h[i][0] ? "/" : "", cgroot);
                rmdir(p);
        }
        if (!getenv("GV_TEST_KEEP"))
                rm_rf_at(AT_FDCWD, tmpdir);
        printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
        return failures ? 1 : 0;
}
