/* SPDX-License-Identifier: MIT */
/* The gvisor driver (runtime.h: rt_gvisor_driver): sandbox-init boots as
 * PID 1 of gVisor's user-space kernel (runsc), one kernel per sandbox.
 *
 * The host holds what outlives the daemon: the sandbox's files, mounted in
 * its dir (gvisor-host.c); its cgroups (cgroup.c, the ns driver's layout,
 * so freeze, kill and "populated" work the same way), which runsc is told
 * to leave alone (--ignore-cgroups) and which its sentry, gofer and stubs
 * join by being started in them; runsc's state under <state>/runsc; and
 * the agent's socket, which runsc makes in <dir>/agent (--host-uds=create)
 * for the daemon to dial. runsc never runs with the kvm platform: it hangs
 * on paravirtual KVM hosts; systrap (the default) or ptrace do not need
 * virtualisation.
 *
 * Each runsc call is a child of the calling daemon thread with fixed
 * stdio (a detached sandbox keeps its runner's stdout and stderr open for
 * its whole life: never a pipe of the daemon), bounded in time. */
#include "gvisor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agent/client.h"
#include "../common/fdpass.h"
#include "../common/tool.h"
#include "cgroup.h"
#include "disk.h"
#include "reaper.h"

#define GV_START_TIMEOUT_MS 30000
#define GV_CALL_TIMEOUT_MS 15000
#define GV_DIAL_TIMEOUT_MS 10000
#define GV_MIN_VERSION 20230101 /* older runsc fails stat and ls on 6.x kernels */
#define GV_MAX_ARGS 24

struct gv_rt {
        struct cg_layout cg;
        struct ns_net_cfg net; /* the host's NAT, made by rt_open */
        char runsc[PATH_MAX];
        char platform[16];
        char state[PATH_MAX]; /* runsc --root */
        char init[PATH_MAX];  /* sandbox-init, bound read-only at GV_INIT_PATH */
        char instance[RT_INSTANCE_LEN + 1];
        struct disk_spares spares;
        struct reaper reaper;
};

/* runsc matches container ids by prefix: every id has the same length. */
static void container_id(const struct gv_rt *g, uint64_t id, char out[40])
{
        snprintf(out, 40, "sbx-%s-%016llx", g->instance, (unsigned long long)id);
}

/* ---- running runsc ---- */

struct gv_call {
        const char *const *args; /* the subcommand and its arguments */
        int log_fd;              /* its stderr; -1 = /dev/null */
        uint64_t cg_id;          /* != 0: started inside that sandbox's cgroups */
        int netns_fd;            /* >= 0: started in that network namespace (NAT) */
        int timeout_ms;
};

/* This runsc refuses --network=sandbox when it believes it runs in the
 * host's network namespace, which it decides by the presence of
 * /proc/sys/net/core/rmem_default, present in every namespace of a 6.x
 * kernel. So runsc starts inside the sandbox's namespace, in a mount
 * namespace of its own where an empty tmpfs hides that directory; the
 * sentry then takes the namespace's interfaces over (the spec names it).
 * Nothing of this mount namespace reaches the host's. */
static void enter_netns(int netns_fd)
{
        /* The namespace first: /proc/sys/net shows the caller's. */
        if (setns(netns_fd, CLONE_NEWNET) < 0 || unshare(CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", "/proc/sys/net/core", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,mode=0555") < 0)
                _exit(125);
}

/* Between fork and exec: async-signal-safe calls only. */
static _Noreturn void call_child(const char *path, char *const *argv, int sync_fd, int log_fd,
                                 int netns_fd)
{
        char go;
        if (sync_fd >= 0 && read(sync_fd, &go, 1) != 1)
                _exit(126);
        if (netns_fd >= 0)
                enter_netns(netns_fd);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 ||
            dup2(log_fd >= 0 ? log_fd : null, 2) < 0)
                _exit(126);
        syscall(SYS_close_range, 3u, ~0u, 0u);
        char *const envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                              NULL};
        execve(path, argv, envp);
        _exit(127);
}

static int wait_bounded(pid_t pid, int timeout_ms, int *ret_status)
{
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd >= 0) {
                struct pollfd p = {.fd = pfd, .events = POLLIN};
                int64_t deadline = mono_ms() + timeout_ms;
                int n;
                do {
                        int64_t left = deadline - mono_ms();
                        n = left > 0 ? poll(&p, 1, (int)left) : 0;
                } while (n < 0 && errno == EINTR);
                close(pfd);
                if (n == 0)
                        kill(pid, SIGKILL);
        }
        int st;
        while (waitpid(pid, &st, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        *ret_status = st;
        return pfd >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? -ETIMEDOUT : 0;
}

/* The end of a log, for an error message. */
static void log_tail(int fd, char *out, size_t len)
{
        out[0] = '\0';
        off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
        if (end <= 0)
                return;
        off_t from = end > (off_t)len - 1 ? end - (off_t)len + 1 : 0;
        ssize_t n = pread(fd, out, len - 1, from);
        out[n > 0 ? n : 0] = '\0';
        for (char *p = out; *p; p++)
                if (*p == '\n' && p[1])
                        *p = ' ';
        size_t l = strlen(out);
        if (l && out[l - 1] == '\n')
                out[l - 1] = '\0';
}

static int gv_call(const struct gv_rt *g, const struct gv_call *c, struct sbx_error *err)
{
        char root[PATH_MAX + 8], platform[32];
        snprintf(root, sizeof(root), "--root=%s", g->state);
        snprintf(platform, sizeof(platform), "--platform=%s", g->platform);
        const char *argv[GV_MAX_ARGS] = {g->runsc,
                                         root,
                                         platform,
                                         "--host-uds=create",
                                         c->netns_fd >= 0 ? "--network=sandbox" : "--network=none",
                                         "--overlay2=none",
                                         "--file-access=shared",
                                         "--ignore-cgroups",
                                         "--net-raw"};
        size_t n = 9;
        for (size_t i = 0; c->args[i]; i++) {
                if (n + 1 >= GV_MAX_ARGS)
                        return sbx_error_set(err, E2BIG, "runsc: too many arguments");
                argv[n++] = c->args[i];
        }
        argv[n] = NULL;
        int sync[2] = {-1, -1};
        if (c->cg_id && pipe2(sync, O_CLOEXEC) < 0)
                return sbx_error_set(err, errno, "pipe");
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close_fd(&sync[0]);
                close_fd(&sync[1]);
                return sbx_error_set(err, e, "fork runsc");
        }
        if (pid == 0)
                call_child(g->runsc, (char *const *)argv, sync[0], c->log_fd, c->netns_fd);
        close_fd(&sync[0]);
        int r = 0;
        if (c->cg_id) {
                r = cg_attach(&g->cg, c->cg_id, pid, true, true, err);
                /* Released either way; after a failure it never execs. */
                if (r < 0)
                        kill(pid, SIGKILL);
                else if (write(sync[1], "g", 1) != 1)
                        r = sbx_error_set(err, errno, "start runsc");
                close_fd(&sync[1]);
        }
        int st = 0;
        int w = wait_bounded(pid, c->timeout_ms, &st);
        if (r < 0)
                return r;
        char tail[256];
        if (w == -ETIMEDOUT || w < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                log_tail(c->log_fd, tail, sizeof(tail));
                int e = w == -ETIMEDOUT ? ETIMEDOUT : w < 0 ? -w : EIO;
                return sbx_error_set(err, e, "runsc %s %s (status 0x%x)%s%s", c->args[0],
                                     w == -ETIMEDOUT ? "timed out" : "failed", st,
                                     tail[0] ? ": " : "", tail);
        }
        return 0;
}

/* ---- open / close ---- */

static int find_runsc(const char *want, char out[PATH_MAX], struct sbx_error *err)
{
        if (want && *want) {
                if (path_printf(out, PATH_MAX, "%s", want) < 0 || access(out, X_OK) < 0)
                        return sbx_error_set(err, ENOTSUP, "runsc `%s` is not an executable", want);
                return 0;
        }
        static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                           "/usr/bin",        "/sbin",          "/bin"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                if (path_printf(out, PATH_MAX, "%s/runsc", dirs[i]) == 0 && access(out, X_OK) == 0)
                        return 0;
        return sbx_error_set(err, ENOTSUP, "runsc not found (install the `runsc` package)");
}

/* runsc's version is a date ("runsc version 0.0~20240729.0",
 * "release-20240729.0"); the first 8-digit run of it. */
static long version_date(const char *text)
{
        for (const char *p = text; *p; p++) {
                size_t n = strspn(p, "0123456789");
                if (n == 8)
                        return strtol(p, NULL, 10);
                if (n)
                        p += n - 1;
        }
        return 0;
}

static int check_version(const char *runsc, struct sbx_error *err)
{
        struct buf out;
        buf_init(&out, 4096);
        const char *const argv[] = {runsc, "--version", NULL};
        struct tool_run t = {.argv = argv, .envp = tool_plain_env, .out = &out, .fd3 = -1};
        char errtext[256];
        t.err_text = errtext;
        t.err_len = sizeof(errtext);
        int r = run_tool(&t, NULL, err);
        long date = 0;
        if (r == 0 && buf_terminate(&out) == 0)
                date = version_date(out.data);
        buf_free(&out);
        if (r < 0)
                return sbx_error_set(err, ENOTSUP, "`%s --version` failed", runsc);
        if (date < GV_MIN_VERSION)
                return sbx_error_set(err, ENOTSUP,
                                     "runsc `%s` is too old (version date %ld, needs %d or later)",
                                     runsc, date, GV_MIN_VERSION);
        return 0;
}

static int gv_open(const struct rt_config *cfg, void **ret, struct sbx_error *err)
{
        if (!cfg || !cfg->init_path || !cfg->instance || !cfg->state_dir ||
            cfg->state_dir[0] != '/')
                return sbx_error_set(err, ENOTSUP, "no state dir, instance or sandbox-init");
        const char *platform = cfg->gvisor_platform;
        if (!platform || !*platform || !strcmp(platform, "auto"))
                platform = "systrap";
        if (strcmp(platform, "systrap") && strcmp(platform, "ptrace"))
                return sbx_error_set(err, EINVAL, "gvisor platform `%s` (systrap or ptrace)",
                                     platform);
        _cleanup_free_ struct gv_rt *g = calloc(1, sizeof(*g));
        if (!g)
                return sbx_error_set(err, ENOMEM, "gvisor driver");
        int r = find_runsc(cfg->runsc_path, g->runsc, err);
        if (r < 0 || (r = check_version(g->runsc, err)) < 0)
                return r;
        if ((r = cg_detect(&g->cg, cfg->cgroup_root, err)) < 0)
                return r;
        if (cfg->net)
                g->net = *cfg->net;
        snprintf(g->platform, sizeof(g->platform), "%s", platform);
        snprintf(g->instance, sizeof(g->instance), "%s", cfg->instance);
        if (realpath(cfg->init_path, g->init) == NULL)
                return sbx_error_set(err, errno, "sandbox-init `%s`", cfg->init_path);
        if (path_printf(g->state, sizeof(g->state), "%s/runsc", cfg->state_dir) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "state dir `%s`", cfg->state_dir);
        if (mkdir(g->state, 0700) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create `%s`", g->state);
        disk_spares_init(&g->spares, rt_gvisor_driver.name);
        reaper_init(&g->reaper, "gvisor");
        *ret = TAKE_PTR(g);
        return 0;
}

static void gv_close(void *state)
{
        struct gv_rt *g = state;
        if (!g)
                return;
        disk_spares_stop(&g->spares);
        reaper_stop(&g->reaper);
        if (!cg_any_populated(&g->cg))
                cg_remove_root(&g->cg);
        free(g);
}

/* ---- start / stop ---- */

static int spec_check(const struct rt_spec *spec, struct sbx_error *err)
{
        if (!spec || !spec->dir || spec->dir[0] != '/' || !spec->rootfs || spec->rootfs[0] != '/' ||
            strstr(spec->dir, "/../") || strlen(spec->dir) >= PATH_MAX - 64)
                return sbx_error_set(err, EINVAL, "gvisor: bad sandbox spec");
        if (spec->limits.network != RT_NET_NONE && spec->limits.network != RT_NET_NAT)
                return sbx_error_set(err, EINVAL, "gvisor: unknown network %u",
                                     spec->limits.network);
        return 0;
}

static int open_dir(const struct rt_spec *spec, struct sbx_error *err)
{
        int fd = open(spec->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "open sandbox dir `%s`", spec->dir);
        return fd;
}

/* Whether runsc's state dir still has an entry of container cid. */
static bool has_record(const struct gv_rt *g, const char *cid)
{
        DIR *d = opendir(g->state);
        if (!d)
                return false;
        bool found = false;
        for (struct dirent *de; !found && (de = readdir(d));)
                found = strstr(de->d_name, cid) != NULL;
        closedir(d);
        return found;
}

/* Forget runsc's record of a container whose processes are gone (its
 * cgroup is empty). `runsc delete` takes a second or two for a sandbox
 * that no longer answers, so the record's files, which this driver's
 * state dir holds for nobody else, go directly: the state, its lock and
 * the controller's socket. Only a record of another shape is left to
 * runsc. */
static void forget(const struct gv_rt *g, const struct rt_spec *spec)
{
        char cid[40], name[3][128];
        container_id(g, spec->id, cid);
        if (!has_record(g, cid))
                return;
        snprintf(name[0], sizeof(name[0]), "%s_sandbox:%s.state", cid, cid);
        snprintf(name[1], sizeof(name[1]), "%s_sandbox:%s.lock", cid, cid);
        snprintf(name[2], sizeof(name[2]), "runsc-%s.sock", cid);
        _cleanup_close_ int dir = open(g->state, O_PATH | O_DIRECTORY | O_CLOEXEC);
        for (size_t i = 0; dir >= 0 && i < ARRAY_SIZE(name); i++)
                unlinkat(dir, name[i], 0);
        if (!has_record(g, cid))
                return;
        const char *const args[] = {"delete", "--force", cid, NULL};
        struct gv_call c = {
            .args = args, .log_fd = -1, .netns_fd = -1, .timeout_ms = GV_CALL_TIMEOUT_MS};
        gv_call(g, &c, NULL);
}

static int wait_agent(const struct rt_spec *spec, struct sbx_error *err)
{
        char dir[PATH_MAX];
        if (path_printf(dir, sizeof(dir), "%s/agent", spec->dir) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir");
        _cleanup_close_ int fd = -1;
        int r = -ECONNREFUSED;
        for (int64_t deadline = mono_ms() + GV_DIAL_TIMEOUT_MS; mono_ms() < deadline; sleep_ms(5)) {
                close_fd(&fd);
                if ((r = unix_connect_in(dir, GV_AGENT_SOCK, 1000, &fd, NULL)) == 0)
                        return 0;
        }
        return sbx_error_set(err, -r, "the sandbox's agent does not answer");
}

static int read_pid(int dirfd, pid_t *ret)
{
        char text[32];
        int n = read_small_at(dirfd, "sandbox.pid", text, sizeof(text));
        long v = n > 0 ? strtol(text, NULL, 10) : 0;
        *ret = v > 0 ? (pid_t)v : 0;
        return 0;
}

/* sandbox-init quiesced for the checkpoint (AGENT_REQ_QUIESCE) and
 * listens again once this file is there. */
static int resume_agent(int dirfd, struct sbx_error *err)
{
        int fd = openat(dirfd, "agent/resume", O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return sbx_error_set(err, errno, "tell the sandbox's agent to resume");
        close(fd);
        return 0;
}

/* Boot sandbox-init, or (image: a checkpoint's image dir) restore the
 * kernel saved there. */
static int boot(struct gv_rt *g, const struct rt_spec *spec, int dirfd, const char *image,
                struct sbx_error *err)
{
        char cid[40], bundle[PATH_MAX], pidfile[PATH_MAX], netns[PATH_MAX], ipath[PATH_MAX + 16];
        container_id(g, spec->id, cid);
        if (path_printf(bundle, sizeof(bundle), "%s/bundle", spec->dir) < 0 ||
            path_printf(pidfile, sizeof(pidfile), "%s/sandbox.pid", spec->dir) < 0 ||
            path_printf(netns, sizeof(netns), "%s/netns", spec->dir) < 0 ||
            (image && path_printf(ipath, sizeof(ipath), "--image-path=%s", image) < 0))
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir");
        struct gv_bundle b = {.spec = spec, .init_path = g->init};
        _cleanup_close_ int nsfd = -1;
        int r;
        if (spec->limits.network == RT_NET_NAT) {
                if ((r = gv_net_up(&g->net, dirfd, spec, &b.resolv, err)) < 0)
                        return r;
                b.netns = netns;
                if ((nsfd = openat(dirfd, "netns", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                        return sbx_error_set(err, errno, "open the sandbox's netns");
        }
        r = gv_bundle_write(dirfd, &b, err);
        if (r < 0)
                return r;
        _cleanup_close_ int log =
            openat(dirfd, "runsc.log", O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (log < 0)
                return sbx_error_set(err, errno, "open runsc.log of the sandbox");
        /* A previous run's record (a daemon killed mid-start) would make
         * the id taken. */
        forget(g, spec);
        const char *const run[] = {"run",   "--bundle", bundle, "--pid-file",
                                   pidfile, "-detach",  cid,    NULL};
        const char *const restore[] = {"restore", ipath,     "--bundle", bundle, "--pid-file",
                                       pidfile,   "-detach", cid,        NULL};
        struct gv_call c = {.args = image ? restore : run,
                            .log_fd = log,
                            .cg_id = spec->id,
                            .netns_fd = nsfd,
                            .timeout_ms = GV_START_TIMEOUT_MS};
        if ((r = gv_call(g, &c, err)) < 0)
                return r;
        if (image && (r = resume_agent(dirfd, err)) < 0)
                return r;
        return wait_agent(spec, err);
}

static int gv_stop(void *state, const struct rt_spec *spec, struct sbx_error *err);

/* Start, or restore from ckpt (a checkpoint dir; load: put its writable
 * layer back first, which a restore of the checkpoint just taken skips;
 * its /tmp always comes back). */
static int launch(struct gv_rt *g, const struct rt_spec *spec, const char *ckpt, bool load,
                  pid_t *ret_pid, struct sbx_error *err)
{
        int r = spec_check(spec, err);
        if (r < 0)
                return r;
        if (cg_populated(&g->cg, spec->id))
                return sbx_error_set(err, EBUSY, "sandbox %llu still runs",
                                     (unsigned long long)spec->id);
        _cleanup_close_ int dirfd = open_dir(spec, err);
        if (dirfd < 0)
                return dirfd;
        struct rt_limits lim = spec->limits;
        lim.pids = GV_HOST_PIDS(lim.pids);
        if ((r = cg_create(&g->cg, spec->id, &lim, err)) < 0)
                return r;
        if (mkdirat(dirfd, "agent", 0700) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create agent/ of the sandbox");
        _cleanup_close_ int agent =
            openat(dirfd, "agent", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (agent < 0)
                return sbx_error_set(err, errno, "open agent/ of the sandbox");
        /* A socket file left by an earlier run blocks runsc's bind; a
         * resume file would wake a restored agent too early. */
        if ((unlinkat(agent, GV_AGENT_SOCK, 0) < 0 && errno != ENOENT) ||
            (unlinkat(agent, "resume", 0) < 0 && errno != ENOENT))
                return sbx_error_set(err, errno, "remove the old agent socket");
        if (ckpt && load && (r = gv_ckpt_load(spec, ckpt, GV_CKPT_LAYER, err)) < 0)
                return r;
        if ((r = gv_host_mount(dirfd, spec, err)) < 0)
                return r;
        char image[PATH_MAX];
        if (ckpt && path_printf(image, sizeof(image), "%s/image", ckpt) < 0)
                r = sbx_error_set(err, ENAMETOOLONG, "checkpoint path");
        else if (ckpt) /* a tmpfs: gone with the last run, whatever load says */
                r = gv_ckpt_load(spec, ckpt, GV_CKPT_TMP, err);
        if (r < 0 || (r = boot(g, spec, dirfd, ckpt ? image : NULL, err)) < 0) {
                gv_stop(g, spec, NULL);
                return r;
        }
        read_pid(dirfd, ret_pid);
        return 0;
}

static int gv_start(void *state, const struct rt_spec *spec, pid_t *ret_pid, struct sbx_error *err)
{
        struct gv_rt *g = state;
        int r = launch(g, spec, NULL, false, ret_pid, err);
        if (r == 0)
                disk_spares_note(&g->spares, spec);
        return r;
}

/* A restored sandbox keeps the name it had when saved: a fork gets its
 * own. */
static int gv_set_hostname(void *state, const struct rt_spec *spec, pid_t init_pid,
                           const char *name, struct sbx_error *err);

static int gv_restore(void *state, const struct rt_spec *spec, const char *dir, pid_t *ret_pid,
                      struct sbx_error *err)
{
        int r = launch(state, spec, dir, true, ret_pid, err);
        if (r == 0 && spec->hostname)
                r = gv_set_hostname(state, spec, *ret_pid, spec->hostname, err);
        return r;
}

/* Wait until sandbox-init has closed its listener and removed its socket
 * (quiesce.c): then nothing of the host is open in the sandbox. */
static int wait_quiesced(const struct rt_spec *spec, struct sbx_error *err)
{
        char sock[PATH_MAX];
        if (path_printf(sock, sizeof(sock), "%s/agent/%s", spec->dir, GV_AGENT_SOCK) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir");
        for (int64_t deadline = mono_ms() + 2000; mono_ms() < deadline; sleep_ms(2))
                if (access(sock, F_OK) < 0 && errno == ENOENT) {
                        sleep_ms(5); /* its last close, after the unlink */
                        return 0;
                }
        return sbx_error_set(err, ETIMEDOUT, "the sandbox's agent did not quiesce");
}

/* Save the sandbox into dir: the kernel and its processes (runsc
 * checkpoint, which ends it), then its files (gvisor-ckpt.c); then start it
 * again from there when it is to keep running. */
static int gv_checkpoint(void *state, const struct rt_spec *spec, const char *dir, uint32_t flags,
                         struct sbx_error *err)
{
        struct gv_rt *g = state;
        _cleanup_close_ int dirfd = open_dir(spec, err);
        if (dirfd < 0)
                return dirfd;
        char agent[PATH_MAX], image[PATH_MAX + 16], cid[40];
        if (path_printf(agent, sizeof(agent), "%s/agent", spec->dir) < 0 ||
            path_printf(image, sizeof(image), "--image-path=%s/image", dir) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir");
        container_id(g, spec->id, cid);
        struct agent_peer peer = agent_peer_dir(agent);
        int r = agent_quiesce(&peer, err);
        if (r < 0 || (r = wait_quiesced(spec, err)) < 0)
                return r;
        _cleanup_close_ int log =
            openat(dirfd, "runsc.log", O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        const char *const args[] = {"checkpoint", image, cid, NULL};
        struct gv_call c = {
            .args = args, .log_fd = log, .netns_fd = -1, .timeout_ms = GV_START_TIMEOUT_MS};
        if ((r = gv_call(g, &c, err)) < 0) {
                /* Still running (runsc saves before it stops anything): the
                 * agent listens again. */
                if (cg_populated(&g->cg, spec->id) && resume_agent(dirfd, NULL) == 0)
                        wait_agent(spec, NULL);
                return r;
        }
        /* What the sandbox wrote may still be dirty in the writable layer's
         * filesystem (the disk cap's ext4 on a loop device): on its image
         * before that is copied, also when a lazy unmount leaves it mounted
         * a while. */
        int root = openat(dirfd, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root >= 0) {
                syncfs(root);
                close(root); /* before the unmount: it would hold the disk */
        }
        if ((r = gv_ckpt_save(spec, dir, GV_CKPT_TMP, err)) < 0 ||
            (r = gv_stop(g, spec, err)) < 0 ||
            (r = gv_ckpt_save(spec, dir, GV_CKPT_LAYER, err)) < 0)
                return r;
        if (!(flags & RT_CKPT_KEEP_RUNNING))
                return 0;
        pid_t pid;
        return launch(g, spec, dir, false, &pid, err);
}

static int gv_stop(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct gv_rt *g = state;
        int r = cg_kill_all(&g->cg, spec->id, err);
        if (r < 0)
                return r;
        forget(g, spec);
        _cleanup_close_ int dirfd = open(spec->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dirfd < 0)
                return errno == ENOENT ? 0 : sbx_error_set(err, errno, "open `%s`", spec->dir);
        gv_net_down(dirfd);
        return gv_host_unmount(dirfd, err);
}

static int gv_destroy(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct gv_rt *g = state;
        if (!spec || !spec->dir || spec->dir[0] != '/' || !strcmp(spec->dir, "/") ||
            strstr(spec->dir, "/../") || strlen(spec->dir) >= PATH_MAX)
                return sbx_error_set(err, EINVAL, "refusing to destroy sandbox dir `%s`",
                                     spec && spec->dir ? spec->dir : "(null)");
        int r = gv_stop(g, spec, err);
        if (r < 0)
                return r;
        if ((r = cg_remove(&g->cg, spec->id, err)) < 0)
                return r;
        return reaper_put(&g->reaper, spec->dir, err);
}

/* ---- the rest: cgroup writes and the socket ---- */

static int gv_freeze(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_freeze(&((struct gv_rt *)state)->cg, spec->id, err);
}

static int gv_thaw(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_thaw(&((struct gv_rt *)state)->cg, spec->id, err);
}

static bool gv_is_alive(void *state, const struct rt_spec *spec)
{
        return cg_populated(&((struct gv_rt *)state)->cg, spec->id);
}

static bool gv_any_alive(void *state)
{
        return cg_any_populated(&((struct gv_rt *)state)->cg);
}

static int gv_dial(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        (void)state;
        char dir[PATH_MAX];
        if (path_printf(dir, sizeof(dir), "%s/agent", spec->dir) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir");
        return unix_connect_in(dir, GV_AGENT_SOCK, GV_DIAL_TIMEOUT_MS, ret_fd, err);
}

static int gv_root(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        (void)state;
        _cleanup_close_ int dirfd = open_dir(spec, err);
        if (dirfd < 0)
                return dirfd;
        return gv_host_root(dirfd, ret_fd, err);
}

/* The host cannot enter the sentry's UTS namespace: sandbox-init renames
 * it (AGENT_REQ_HOSTNAME). */
static int gv_set_hostname(void *state, const struct rt_spec *spec, pid_t init_pid,
                           const char *name, struct sbx_error *err)
{
        (void)state;
        (void)init_pid;
        char dir[PATH_MAX], host[65];
        if (path_printf(dir, sizeof(dir), "%s/agent", spec->dir) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir");
        snprintf(host, sizeof(host), "%s", name);
        struct agent_peer peer = agent_peer_dir(dir);
        return agent_set_hostname(&peer, host, err);
}

const struct rt_driver rt_gvisor_driver = {
    .name = "gvisor",
    .caps = RT_CAP_NAT | RT_CAP_DISK_LIMIT | RT_CAP_HOSTNAME | RT_CAP_CHECKPOINT,
    .open = gv_open,
    .close = gv_close,
    .start = gv_start,
    .freeze = gv_freeze,
    .thaw = gv_thaw,
    .stop = gv_stop,
    .destroy = gv_destroy,
    .is_alive = gv_is_alive,
    .any_alive = gv_any_alive,
    .dial = gv_dial,
    .set_hostname = gv_set_hostname,
    .root = gv_root,
    .checkpoint = gv_checkpoint,
    .restore = gv_restore,
};
