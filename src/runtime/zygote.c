/* SPDX-License-Identifier: MIT */
/* The ns driver (runtime.h: rt_ns_driver) and its zygote.
 *
 * ns_open() forks the zygote while the daemon is still single-threaded.
 * The zygote never runs a thread: for each start it receives the
 * spec and a reply socket over a SOCK_SEQPACKET pair, forks a launcher
 * (ns.c) and goes back to waiting. The launcher builds the sandbox,
 * answers on the reply socket and exits; SIGCHLD is ignored in the zygote
 * so launchers reap themselves. Sandboxes are re-parented to the host's
 * init and outlive both the daemon and the zygote.
 *
 * Freeze, thaw, stop and destroy need no helper: they are cgroup file
 * writes, made directly by the calling daemon thread. */
#include "runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ns.h"
#include "../common/fdpass.h"

#define RT_REQ_MAGIC 0x53425831u /* "SBX1" */
#define RT_START_TIMEOUT_MS 30000
#define RT_LAUNCH_ALARM_S 25
#define RT_INIT_MAX (256u << 20)
#define NS_DIAL_TIMEOUT_MS 10000

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

struct ns_rt {
        int sock; /* to the zygote */
        pid_t zygote;
        pthread_mutex_t lock; /* one request on the socket at a time */
        struct cg_layout cg;
        struct ns_net_cfg net;
        struct dns_forwarder *dns;
};

/* A launch request: this header, then dir, rootfs and hostname, each NUL
 * terminated. */
struct rt_req {
        uint32_t magic;
        uint32_t uid_base;
        uint32_t uid_count;
        uint32_t len_dir;
        uint32_t len_rootfs;
        uint32_t len_hostname;
        uint64_t id;
        struct rt_limits limits;
};
#define RT_REQ_MAX (sizeof(struct rt_req) + 2 * PATH_MAX + 256)

struct rt_reply {
        int32_t code; /* 0 or a positive errno */
        int32_t pid;
        char msg[sizeof(((struct sbx_error *)0)->msg)];
};

/* ---- the zygote and its launchers ---- */

static int req_parse(const char *buf, size_t n, struct rt_spec *spec)
{
        struct rt_req h;
        if (n < sizeof(h))
                return -EPROTO;
        memcpy(&h, buf, sizeof(h));
        size_t ld = h.len_dir, lr = h.len_rootfs, lh = h.len_hostname;
        if (h.magic != RT_REQ_MAGIC || ld >= PATH_MAX || lr >= PATH_MAX || lh > 255 ||
            n != sizeof(h) + ld + lr + lh + 3)
                return -EPROTO;
        const char *dir = buf + sizeof(h), *rootfs = dir + ld + 1, *host = rootfs + lr + 1;
        if (strnlen(dir, ld + 1) != ld || strnlen(rootfs, lr + 1) != lr ||
            strnlen(host, lh + 1) != lh)
                return -EPROTO;
        *spec = (struct rt_spec){
            .id = h.id,
            .dir = dir,
            .rootfs = rootfs,
            .hostname = host,
            .uid_base = h.uid_base,
            .uid_count = h.uid_count,
            .limits = h.limits,
        };
        return 0;
}

static _Noreturn void launcher_main(const struct ns_ctx *ctx, const char *buf, size_t n,
                                    int reply_fd)
{
        struct rt_reply rep = {0};
        struct sbx_error err = {0};
        struct rt_spec spec;
        pid_t pid = 0;

        signal(SIGCHLD, SIG_DFL);
        /* A launch that hangs dies; C then sees its sync socket close and
         * exits, and rt_start reports the missing answer. */
        alarm(RT_LAUNCH_ALARM_S);
        int r = req_parse(buf, n, &spec);
        if (r < 0)
                sbx_error_set(&err, -r, "malformed launch request");
        else
                r = ns_launch(ctx, &spec, &pid, &err);
        rep.code = r < 0 ? (err.code ? err.code : -r) : 0;
        rep.pid = r < 0 ? 0 : (int32_t)pid;
        snprintf(rep.msg, sizeof(rep.msg), "%s", r < 0 ? err.msg : "");
        send(reply_fd, &rep, sizeof(rep), MSG_NOSIGNAL);
        _exit(0);
}

/* Close every fd but 0-2 and the two kept ones. */
static void close_all_but(int a, int b)
{
        int lo = MIN(a, b), hi = MAX(a, b);
        if (lo > 3)
                close_range(3, (unsigned)lo - 1, 0);
        if (hi > lo + 1)
                close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
        close_range((unsigned)hi + 1, ~0U, 0);
}

static _Noreturn void zygote_main(int sock, const struct ns_ctx *ctx, pid_t parent)
{
        /* Die with the daemon; if it is already gone, do not linger. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                _exit(1);
        /* Whatever the daemon's thread blocked or ignored must not leak
         * into launchers (their alarm must fire). */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGALRM, SIG_DFL);
        signal(SIGCHLD, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        close_all_but(sock, ctx->init_memfd);
        char *buf = malloc(RT_REQ_MAX);
        if (!buf)
                _exit(1);
        for (;;) {
                int reply_fd;
                ssize_t n = fd_recv(sock, buf, RT_REQ_MAX, &reply_fd, 0);
                if (n == 0)
                        _exit(0);
                if (n < 0 && n != -EMSGSIZE)
                        _exit(1);
                if (reply_fd < 0)
                        continue;
                pid_t pid = n > 0 ? fork() : -1;
                if (pid == 0) {
                        close(sock);
                        launcher_main(ctx, buf, (size_t)n, reply_fd);
                }
                if (pid < 0) {
                        struct rt_reply rep = {.code = n < 0 ? EMSGSIZE : errno};
                        snprintf(rep.msg, sizeof(rep.msg), "runtime helper: %s",
                                 n < 0 ? "oversized request" : "cannot fork a launcher");
                        send(reply_fd, &rep, sizeof(rep), MSG_NOSIGNAL);
                }
                close(reply_fd);
        }
}

/* ---- rt_open / rt_close ---- */

static int count_threads(void)
{
        DIR *d = opendir("/proc/self/task");
        if (!d)
                return -errno;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

/* Copy sandbox-init into a sealed memfd: what every sandbox execs is
 * this immutable copy, never a host file a workload could reach through
 * /proc/<pid>/exe and overwrite (CVE-2019-5736). */
static int load_init(const char *path, int *ret, struct sbx_error *err)
{
        _cleanup_close_ int src = open(path, O_RDONLY | O_CLOEXEC);
        if (src < 0)
                return sbx_error_set(err, errno, "open sandbox-init `%s`", path);
        struct stat st;
        if (fstat(src, &st) < 0)
                return sbx_error_set(err, errno, "stat `%s`", path);
        if (!S_ISREG(st.st_mode) || st.st_size < 4 || (uint64_t)st.st_size > RT_INIT_MAX)
                return sbx_error_set(err, EINVAL, "`%s` is not a plausible sandbox-init", path);
        char magic[4];
        if (pread(src, magic, 4, 0) != 4 || memcmp(magic,
                                                   "\x7f"
                                                   "ELF",
                                                   4))
                return sbx_error_set(err, ENOEXEC, "`%s` is not an ELF binary", path);
        unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
        _cleanup_close_ int mfd = memfd_create("sandbox-init", flags | MFD_EXEC);
        if (mfd < 0 && errno == EINVAL)
                mfd = memfd_create("sandbox-init", flags); /* kernel < 6.3 */
        if (mfd < 0)
                return sbx_error_set(err, errno, "memfd_create");
        for (off_t off = 0; off < st.st_size;) {
                ssize_t n = sendfile(mfd, src, &off, (size_t)(st.st_size - off));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sbx_error_set(err, n < 0 ? errno : EIO, "copy `%s`", path);
        }
        int seals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
        if (fcntl(mfd, F_ADD_SEALS, seals) < 0 || (fcntl(mfd, F_GET_SEALS) & seals) != seals)
                return sbx_error_set(err, errno, "seal the sandbox-init copy");
        *ret = TAKE_FD(mfd);
        return 0;
}

/* NAT: the sandboxes' resolv.conf, the forwarder's sockets (so its port is
 * known), then the instance's nftables table. Before any thread: this runs
 * nft. A forwarder port in use is an error: another sandboxd's forwarder
 * would not serve this instance's sandboxes. */
static int open_network(const struct rt_config *cfg, struct ns_net_cfg *net,
                        struct dns_forwarder **ret_dns, struct sbx_error *err)
{
        int r = net_host_plan(cfg->net_range, cfg->instance, cfg->dns, cfg->dns_port != 0,
                              cfg->dns_upstream && *cfg->dns_upstream, net, err);
        if (r < 0)
                return r;
        if (net->forward) {
                uint16_t port = cfg->dns_port > 0 ? (uint16_t)cfg->dns_port : 0;
                if ((r = dns_forwarder_open(port, ret_dns, &net->dns_port, err)) < 0)
                        return r;
        }
        if ((r = net_host_install(net, err)) < 0) {
                dns_forwarder_stop(*ret_dns);
                *ret_dns = NULL;
        }
        return r;
}

static void ns_close(void *state);

static int ns_open(const struct rt_config *cfg, void **ret, struct sbx_error *err)
{
        if (!cfg || !cfg->init_path || !ret)
                return sbx_error_set(err, EINVAL, "rt_open: no sandbox-init path");
        /* The zygote must start from a single-threaded image: a fork of a
         * threaded process may inherit locks held by other threads. */
        if (count_threads() != 1)
                return sbx_error_set(err, EBUSY, "rt_open must run before any thread starts");
        struct ns_ctx ctx = {.init_memfd = -1};
        _cleanup_free_ struct ns_rt *rt = calloc(1, sizeof(*rt));
        if (!rt)
                return sbx_error_set(err, ENOMEM, "rt_open");
        int r = cg_detect(&ctx.cg, cfg->cgroup_root, err);
        if (r < 0)
                return r;
        if ((r = open_network(cfg, &ctx.net, &rt->dns, err)) < 0)
                return r;
        if ((r = load_init(cfg->init_path, &ctx.init_memfd, err)) < 0) {
                dns_forwarder_stop(rt->dns);
                return r;
        }
        if ((r = rt_seccomp_build(&ctx.seccomp, err)) < 0) {
                close(ctx.init_memfd);
                dns_forwarder_stop(rt->dns);
                return r;
        }
        int sp[2] = {-1, -1};
        pid_t parent = getpid(), pid = -1;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                r = sbx_error_set(err, errno, "socketpair");
        } else if ((pid = fork()) < 0) {
                r = sbx_error_set(err, errno, "fork the runtime helper");
                close(sp[0]);
                close(sp[1]);
        } else if (pid == 0) {
                close(sp[0]);
                zygote_main(sp[1], &ctx, parent);
        } else {
                close(sp[1]);
        }
        close(ctx.init_memfd);
        rt_seccomp_free(&ctx.seccomp);
        if (r < 0) {
                dns_forwarder_stop(rt->dns);
                return r;
        }
        rt->sock = sp[0];
        rt->zygote = pid;
        rt->cg = ctx.cg;
        rt->net = ctx.net;
        pthread_mutex_init(&rt->lock, NULL);
        /* After the fork: the forwarder is a thread of the daemon. */
        if (rt->dns && (r = dns_forwarder_start(rt->dns, &ctx.net, cfg->dns_upstream, err)) < 0) {
                ns_close(TAKE_PTR(rt));
                return r;
        }
        *ret = TAKE_PTR(rt);
        return 0;
}

static void ns_close(void *state)
{
        struct ns_rt *rt = state;
        if (!rt)
                return;
        dns_forwarder_stop(rt->dns);
        close(rt->sock); /* the zygote reads EOF and exits */
        while (waitpid(rt->zygote, NULL, 0) < 0 && errno == EINTR)
                ;
        /* The table goes only with the last sandbox of the instance; best
         * effort (a failure leaves a table that matches no interface). */
        if (!cg_any_populated(&rt->cg))
                net_host_remove(&rt->net, NULL);
        pthread_mutex_destroy(&rt->lock);
        free(rt);
}

/* ---- start ---- */

static int req_build(const struct rt_spec *spec, struct buf *b)
{
        struct rt_req h = {
            .magic = RT_REQ_MAGIC,
            .uid_base = spec->uid_base,
            .uid_count = spec->uid_count,
            .len_dir = (uint32_t)strlen(spec->dir),
            .len_rootfs = (uint32_t)strlen(spec->rootfs),
            .len_hostname = (uint32_t)strnlen(spec->hostname, 255),
            .id = spec->id,
            .limits = spec->limits,
        };
        int r = buf_append(b, &h, sizeof(h));
        if (r >= 0)
                r = buf_append(b, spec->dir, h.len_dir + 1);
        if (r >= 0)
                r = buf_append(b, spec->rootfs, h.len_rootfs + 1);
        if (r >= 0)
                r = buf_append(b, spec->hostname, h.len_hostname);
        if (r >= 0)
                r = buf_append(b, "", 1);
        return r;
}

static int wait_reply(int fd, pid_t *ret_pid, struct sbx_error *err)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t deadline = mono_ms() + RT_START_TIMEOUT_MS;
        for (;;) {
                int64_t left = deadline - mono_ms();
                if (left <= 0)
                        return sbx_error_set(err, ETIMEDOUT, "sandbox launch timed out");
                int r = poll(&p, 1, (int)left);
                if (r > 0)
                        break;
                if (r < 0 && errno != EINTR)
                        return sbx_error_set(err, errno, "poll");
        }
        struct rt_reply rep;
        ssize_t n;
        do
                n = recv(fd, &rep, sizeof(rep), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return sbx_error_set(err, errno, "read launch reply");
        if (n != sizeof(rep))
                return sbx_error_set(err, EIO, "sandbox launcher died without an answer");
        rep.msg[sizeof(rep.msg) - 1] = '\0';
        if (rep.code) {
                int code = rep.code > 0 && rep.code < 4096 ? rep.code : EIO;
                if (err) {
                        err->code = code;
                        snprintf(err->msg, sizeof(err->msg), "%s", rep.msg);
                }
                return -code;
        }
        if (rep.pid <= 0)
                return sbx_error_set(err, EIO, "launch reply without a pid");
        *ret_pid = rep.pid;
        return 0;
}

static int ns_start(void *state, const struct rt_spec *spec, pid_t *ret_pid,
                    struct sbx_error *err)
{
        struct ns_rt *rt = state;
        int r = ns_spec_check(spec, err);
        if (r < 0)
                return r;
        struct buf b;
        buf_init(&b, RT_REQ_MAX);
        if ((r = req_build(spec, &b)) < 0) {
                buf_free(&b);
                return sbx_error_set(err, -r, "launch request");
        }
        int rp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rp) < 0) {
                buf_free(&b);
                return sbx_error_set(err, errno, "socketpair");
        }
        pthread_mutex_lock(&rt->lock);
        r = fd_send(rt->sock, b.data, b.len, rp[1], 0);
        pthread_mutex_unlock(&rt->lock);
        buf_free(&b);
        close(rp[1]);
        if (r < 0) {
                close(rp[0]);
                return sbx_error_set(err, -r, "send launch request to the runtime helper");
        }
        pid_t pid = 0;
        r = wait_reply(rp[0], &pid, err);
        close(rp[0]);
        if (r < 0)
                return r;
        *ret_pid = pid;
        return 0;
}

/* ---- cgroup-only operations ---- */

static int ns_freeze(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_freeze(&((struct ns_rt *)state)->cg, spec->id, err);
}

static int ns_thaw(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_thaw(&((struct ns_rt *)state)->cg, spec->id, err);
}

static int ns_stop(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_kill_all(&((struct ns_rt *)state)->cg, spec->id, err);
}

static bool ns_is_alive(void *state, const struct rt_spec *spec)
{
        return cg_populated(&((struct ns_rt *)state)->cg, spec->id);
}

static bool ns_any_alive(void *state)
{
        return cg_any_populated(&((struct ns_rt *)state)->cg);
}

/* sandbox-init listens on <dir>/agent.sock, a socket in the sandbox dir
 * it sees as /.sandboxd (ns.c). */
static int ns_dial(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        (void)state;
        return unix_connect_in(spec->dir, "agent.sock", NS_DIAL_TIMEOUT_MS, ret_fd, err);
}

static int ns_destroy(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct ns_rt *rt = state;
        if (!spec || !spec->dir || spec->dir[0] != '/' || !strcmp(spec->dir, "/") ||
            strstr(spec->dir, "/../") || strlen(spec->dir) >= PATH_MAX)
                return sbx_error_set(err, EINVAL, "refusing to destroy sandbox dir `%s`",
                                     spec && spec->dir ? spec->dir : "(null)");
        int r = cg_kill_all(&rt->cg, spec->id, err);
        if (r < 0)
                return r;
        if ((r = cg_remove(&rt->cg, spec->id, err)) < 0)
                return r;
        /* The overlay lived only in the sandbox's mount namespace, gone with
         * its last process: nothing is mounted here on the host. rm_rf_at
         * still never follows a symlink nor crosses a mount. */
        if ((r = rm_rf_at(AT_FDCWD, spec->dir)) < 0)
                return sbx_error_set(err, -r, "remove sandbox dir `%s`", spec->dir);
        return 0;
}

const struct rt_driver rt_ns_driver = {
    .name = "ns",
    .caps = RT_CAP_NAT | RT_CAP_DISK_LIMIT | RT_CAP_HOSTNAME | RT_CAP_AGENT_ROOT,
    .open = ns_open,
    .close = ns_close,
    .start = ns_start,
    .freeze = ns_freeze,
    .thaw = ns_thaw,
    .stop = ns_stop,
    .destroy = ns_destroy,
    .is_alive = ns_is_alive,
    .any_alive = ns_any_alive,
    .dial = ns_dial,
    .set_hostname = ns_set_hostname,
};
