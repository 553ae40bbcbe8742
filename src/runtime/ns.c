/* SPDX-License-Identifier: MIT */
/* The ns driver's launcher: builds one sandbox and execs sandbox-init as
 * its PID 1. Runs in a single-threaded child of the zygote, as host root.
 *
 * Order (the one every mature runtime uses):
 *   launcher: cgroups -> sandbox dir, listening socket -> clone(C) with
 *             user/mnt/pid/ipc/uts/net namespaces, C waiting on a seqpacket
 *             socket -> C into its cgroups -> uid/gid maps -> idmapped
 *             image tree -> setns into C's mount/net/pid namespaces -> a
 *             "mounter" child does every mount there (mount.c; private
 *             propagation first, never in the host namespace) -> release C
 *             by sending it an fd of its new root over that socket.
 *   C:        every inherited fd closed but its four -> receive the root ->
 *             cgroup ns -> hostname, lo -> pivot_root -> stdio -> setsid,
 *             env -> ids, rlimits -> caps -> no_new_privs -> seccomp ->
 *             exec of the sealed sandbox-init memfd.
 */
#include "launch.h"

#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <net/if.h>
#include <linux/sched.h> /* struct clone_args, CLONE_INTO_CGROUP */
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "../common/fdpass.h"
#include "disk.h"
#include "mount.h"
#include "net.h"
#include "seccomp.h"
#include "../common/log.h"

#define NS_CLONE_FLAGS                                                                             \
        (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)
#define NS_HOSTNAME_MAX 64
#define NS_MARKS 16
/* sandbox-init's own RLIMIT_NOFILE ceiling: its connections and every
 * process's pipes (it takes min(hard, 65536) and gives its children the
 * soft limit as soft and hard). */
#define NS_INIT_NOFILE 65536

/* fds of C once it has tidied its table (see child_fds_early). */
enum { FD_LISTEN = 3, FD_MEMFD = 4, FD_ERR = 5, FD_SYNC = 6, FD_FIRST_FREE = 7 };

/* A step run by a forked child of the launcher, beside the launcher's
 * own steps: its report (wire_err) comes back through a pipe. */
struct side {
        pid_t pid;
        int fd; /* read end of its report pipe */
};

struct launch {
        const struct ns_ctx *ctx;
        const struct rt_spec *spec;
        int dirfd; /* spec->dir in the host mount ns */
        int listen_fd;
        int sync[2]; /* seqpacket: [0] launcher, [1] C */
        int errp[2]; /* C's error pipe: [0] read, [1] write */
        pid_t pid;   /* C */
        int userns, mntns, netns, pidns;
        int tree_fd;              /* idmapped clone of the image */
        int dev_fd[NS_DEV_NODES]; /* clones of host device nodes */
        struct ns_disk disk;      /* the capped writable layer, if any */
        struct ns_net net;        /* the veth pair under RT_NET_NAT */
        struct side attacher;     /* cgroup_step, while the launcher goes on */
        bool spare;               /* in the sandbox's v1 cgroups already (a spare launcher) */
        bool cloned_into;         /* C was made in its v2 cgroup (CLONE_INTO_CGROUP) */
        /* When each step ended (mono us), for the debug log's one line. */
        int64_t t0;
        int64_t mark_us[NS_MARKS];
        const char *mark[NS_MARKS];
        unsigned n_marks;
};

static void mark(struct launch *L, const char *what)
{
        if (L->n_marks < NS_MARKS) {
                L->mark_us[L->n_marks] = mono_us();
                L->mark[L->n_marks++] = what;
        }
}

/* The debug log's line for a start: each step's milliseconds. */
static void log_marks(const struct launch *L)
{
        if (!log_enabled(LOG_DEBUG))
                return;
        char line[512];
        size_t n = 0;
        int64_t prev = L->t0;
        for (unsigned i = 0; i < L->n_marks && n < sizeof(line); i++) {
                int k = snprintf(line + n, sizeof(line) - n, " %s %.2f", L->mark[i],
                                 (double)(L->mark_us[i] - prev) / 1000.0);
                if (k < 0)
                        break;
                n += (size_t)k;
                prev = L->mark_us[i];
        }
        log_debug("start %llu: %.2f ms:%s", (unsigned long long)L->spec->id,
                  (double)(prev - L->t0) / 1000.0, line);
}

static int side_wait(struct side *s, const char *what, struct sbx_error *err);

static void launch_release(struct launch *L)
{
        int *fds[] = {&L->dirfd,  &L->listen_fd, &L->sync[0], &L->sync[1], &L->errp[0], &L->errp[1],
                      &L->userns, &L->mntns,     &L->netns,   &L->pidns,   &L->tree_fd};
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                close_fd(fds[i]);
        for (size_t i = 0; i < ARRAY_SIZE(L->dev_fd); i++)
                close_fd(&L->dev_fd[i]);
        disk_release(&L->disk);
        if (L->attacher.pid > 0)
                side_wait(&L->attacher, "cgroup attach", NULL);
}

/* A failure report from the mounter or from C: one write, smaller than
 * PIPE_BUF, so it arrives whole. */
struct wire_err {
        int32_t code;
        char msg[sizeof(((struct sbx_error *)0)->msg)];
};

static void wire_send(int fd, int code, const char *msg)
{
        struct wire_err w = {.code = code > 0 ? code : EIO};
        snprintf(w.msg, sizeof(w.msg), "%s", msg);
        write_all(fd, &w, sizeof(w));
}

/* 0 when the writer closed without a report, else -code with err set. */
static int wire_recv(int fd, struct sbx_error *err)
{
        struct wire_err w;
        int r = read_all(fd, &w, sizeof(w));
        if (r == -EPIPE)
                return 0;
        if (r < 0)
                return sbx_error_set(err, -r, "read launch report");
        w.msg[sizeof(w.msg) - 1] = '\0';
        if (w.code <= 0 || w.code > 4095)
                w.code = EIO;
        if (err) {
                err->code = w.code;
                snprintf(err->msg, sizeof(err->msg), "%s", w.msg);
        }
        return -w.code;
}

int ns_spec_check(const struct rt_spec *spec, struct sbx_error *err)
{
        if (!spec || !spec->dir || !spec->rootfs || !spec->hostname)
                return sbx_error_set(err, EINVAL, "incomplete sandbox spec");
        size_t dl = strlen(spec->dir), rl = strlen(spec->rootfs);
        if (spec->dir[0] != '/' || dl >= PATH_MAX - 64)
                return sbx_error_set(err, EINVAL, "sandbox dir must be an absolute path");
        if (spec->rootfs[0] != '/' || rl >= PATH_MAX)
                return sbx_error_set(err, EINVAL, "image rootfs must be an absolute path");
        /* Mapping host root into a sandbox would make its root the host's. */
        if (spec->uid_base == 0 || spec->uid_count == 0 ||
            (uint64_t)spec->uid_base + spec->uid_count > UINT32_MAX)
                return sbx_error_set(err, EINVAL, "invalid uid range %" PRIu32 "+%" PRIu32,
                                     spec->uid_base, spec->uid_count);
        if (spec->limits.network != RT_NET_NONE && spec->limits.network != RT_NET_NAT)
                return sbx_error_set(err, EINVAL, "unknown network mode %" PRIu32,
                                     spec->limits.network);
        return 0;
}

typedef int (*side_fn)(const struct launch *L, struct sbx_error *err);

static int side_start(struct side *s, side_fn fn, const struct launch *L, const char *what,
                      struct sbx_error *err)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return sbx_error_set(err, errno, "pipe");
        pid_t pid = fork();
        if (pid < 0) {
                close(p[0]);
                close(p[1]);
                return sbx_error_set(err, errno, "fork %s", what);
        }
        if (pid == 0) {
                struct sbx_error e = {0};
                close(p[0]);
                int r = fn(L, &e);
                if (r < 0)
                        wire_send(p[1], e.code, e.msg);
                _exit(r < 0 ? 1 : 0);
        }
        close(p[1]);
        *s = (struct side){.pid = pid, .fd = p[0]};
        return 0;
}

/* Wait for a side step; its report, or an error if it died without one. */
static int side_wait(struct side *s, const char *what, struct sbx_error *err)
{
        if (s->pid <= 0)
                return 0;
        int r = wire_recv(s->fd, err);
        close_fd(&s->fd);
        int st = 0;
        while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
                ;
        s->pid = 0;
        if (r < 0)
                return r;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return sbx_error_set(err, EIO, "%s died (status 0x%x)", what, st);
        return 0;
}

static int mount_step(const struct launch *L, struct sbx_error *err)
{
        struct ns_mounts plan = {
            .spec = L->spec,
            .tree_fd = L->tree_fd,
            .dev_fd = L->dev_fd,
            .disk = &L->disk,
            .resolv = L->net.active && L->ctx->net.resolv[0] ? L->ctx->net.resolv : NULL,
        };
        return ns_mount_all(&plan, err);
}

/* Fork the mounter (it lands in C's pid ns, so its proc mount is C's) and
 * wait for it. */
static int run_mounter(const struct launch *L, struct sbx_error *err)
{
        struct side s;
        int r = side_start(&s, mount_step, L, "mounter", err);
        return r < 0 ? r : side_wait(&s, "mounter", err);
}

/* C into its cgroups. On a cgroup v1 host the first write into a
 * cgroup.procs waits out an RCU grace period (the kernel's threadgroup
 * lock): milliseconds of waiting, not work, so it runs beside the steps
 * that follow and is waited for before C is let go. */
static int cgroup_step(const struct launch *L, struct sbx_error *err)
{
        return cg_attach(&L->ctx->cg, L->spec->id, L->pid, !L->spare, !L->cloned_into, err);
}

/* ---- launcher steps in the host namespaces ---- */

/* A directory of the sandbox dir, created when missing with owner/mode. */
static int sandbox_subdir(int dirfd, const char *name, mode_t mode, uid_t uid,
                          struct sbx_error *err)
{
        if (mkdirat(dirfd, name, mode) == 0) {
                if (fchownat(dirfd, name, uid, (gid_t)uid, AT_SYMLINK_NOFOLLOW) < 0 ||
                    fchmodat(dirfd, name, mode, 0) < 0)
                        return sbx_error_set(err, errno, "set owner of %s/", name);
                return 0;
        }
        if (errno != EEXIST)
                return sbx_error_set(err, errno, "create %s/", name);
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return sbx_error_set(err, errno, "stat %s/", name);
        if (!S_ISDIR(st.st_mode))
                return sbx_error_set(err, ENOTDIR, "%s/ of the sandbox is not a directory", name);
        return 0;
}

static int prepare_dir(struct launch *L, struct sbx_error *err)
{
        const struct rt_spec *s = L->spec;
        /* The writable layer: on its own capped filesystem, or upper/ and
         * work/ right here. */
        int r = disk_prepare(L->dirfd, s, rt_ns_driver.name, &L->disk, err);
        if (r < 0)
                return r;
        if (L->disk.active)
                r = sandbox_subdir(L->dirfd, "disk", 0700, 0, err);
        else if ((r = sandbox_subdir(L->dirfd, "upper", 0755, s->uid_base, err)) >= 0)
                r = sandbox_subdir(L->dirfd, "work", 0700, s->uid_base, err);
        if (r < 0)
                return r;
        if ((r = sandbox_subdir(L->dirfd, "rootfs", 0755, 0, err)) < 0 ||
            (r = sandbox_subdir(L->dirfd, "lower", 0755, 0, err)) < 0)
                return r;
        return 0;
}

static int make_listener(struct launch *L, struct sbx_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = "agent.sock"};
        L->dirfd = open(L->spec->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (L->dirfd < 0)
                return sbx_error_set(err, errno, "open sandbox dir `%s`", L->spec->dir);
        if (unlinkat(L->dirfd, "agent.sock", 0) < 0 && errno != ENOENT)
                return sbx_error_set(err, errno, "remove stale agent.sock");
        L->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (L->listen_fd < 0)
                return sbx_error_set(err, errno, "socket");
        /* The dir path may exceed sun_path: bind relative to it. The umask
         * makes the socket 0600 from its first moment. */
        if (fchdir(L->dirfd) < 0)
                return sbx_error_set(err, errno, "chdir `%s`", L->spec->dir);
        mode_t old = umask(0177);
        int r = bind(L->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
        int e = errno;
        umask(old);
        if (r < 0)
                return sbx_error_set(err, e, "bind %s/agent.sock", L->spec->dir);
        if (fchmodat(L->dirfd, "agent.sock", 0600, 0) < 0)
                return sbx_error_set(err, errno, "chmod agent.sock");
        if (listen(L->listen_fd, 128) < 0)
                return sbx_error_set(err, errno, "listen");
        if (chdir("/") < 0)
                return sbx_error_set(err, errno, "chdir /");
        return 0;
}

/* Detached clones of the host device nodes, made in the host namespace. */
static int prepare_dev_trees(struct launch *L, struct sbx_error *err)
{
        for (size_t i = 0; i < NS_DEV_NODES; i++) {
                char p[32];
                snprintf(p, sizeof(p), "/dev/%s", ns_dev_nodes[i]);
                L->dev_fd[i] = open_tree(AT_FDCWD, p, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (L->dev_fd[i] < 0)
                        return sbx_error_set(err, errno, "clone host %s", p);
                struct stat st;
                if (fstat(L->dev_fd[i], &st) < 0 || !S_ISCHR(st.st_mode))
                        return sbx_error_set(err, ENODEV, "host %s is not a char device", p);
        }
        return 0;
}

static int write_proc(pid_t pid, const char *file, const char *text, struct sbx_error *err)
{
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "open %s", p);
        size_t len = strlen(text);
        if (write(fd, text, len) != (ssize_t)len)
                return sbx_error_set(err, errno, "write %s", p);
        return 0;
}

static int open_ns(pid_t pid, const char *name, int *ret, struct sbx_error *err)
{
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, name);
        *ret = open(p, O_RDONLY | O_CLOEXEC);
        if (*ret < 0)
                return sbx_error_set(err, errno, "open %s", p);
        return 0;
}

static int map_ids(struct launch *L, struct sbx_error *err)
{
        char map[64];
        snprintf(map, sizeof(map), "0 %" PRIu32 " %" PRIu32 "\n", L->spec->uid_base,
                 L->spec->uid_count);
        int r;
        if ((r = write_proc(L->pid, "uid_map", map, err)) < 0 ||
            (r = write_proc(L->pid, "gid_map", map, err)) < 0)
                return r;
        /* The agent is never the OOM killer's victim: its workload is.
         * Through the legacy oom_adj file on purpose: a privileged write
         * there lowers the score without lowering oom_score_adj_min, so the
         * workload, which sandbox-init puts back to 0 before every exec,
         * can never make itself unkillable in turn. Best effort: a host
         * that withholds CAP_SYS_RESOURCE even from root refuses it, and
         * then the OOM killer just picks the largest process, as usual. */
        r = write_proc(L->pid, "oom_adj", "-17\n", NULL);
        if (r < 0 && r != -EACCES && r != -EPERM)
                return sbx_error_set(err, -r, "write /proc/%d/oom_adj", (int)L->pid);
        if ((r = open_ns(L->pid, "user", &L->userns, err)) < 0 ||
            (r = open_ns(L->pid, "mnt", &L->mntns, err)) < 0 ||
            (r = open_ns(L->pid, "net", &L->netns, err)) < 0 ||
            (r = open_ns(L->pid, "pid", &L->pidns, err)) < 0)
                return r;
        return 0;
}

/* One image for every sandbox: an idmapped, read-only clone of it shows
 * files owned by host 0 as owned by root of this sandbox. */
static int idmap_image(struct launch *L, struct sbx_error *err)
{
        const char *img = L->spec->rootfs;
        L->tree_fd = open_tree(AT_FDCWD, img, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (L->tree_fd < 0)
                return sbx_error_set(err, errno, "open image `%s`", img);
        struct mount_attr a = {
            .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            .userns_fd = (uint64_t)L->userns,
        };
        if (mount_setattr(L->tree_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
                int e = errno;
                if (e == EINVAL || e == EPERM || e == EOPNOTSUPP || e == ENOSYS)
                        return sbx_error_set(err, e,
                                             "idmapped mount of image `%s` refused (the kernel "
                                             "or the image's filesystem does not support "
                                             "idmapped mounts)",
                                             img);
                return sbx_error_set(err, e, "idmap image `%s`", img);
        }
        return 0;
}

static int enter_ns(struct launch *L, struct sbx_error *err)
{
        if (setns(L->mntns, CLONE_NEWNS) < 0)
                return sbx_error_set(err, errno, "enter the sandbox mount ns");
        if (setns(L->netns, CLONE_NEWNET) < 0)
                return sbx_error_set(err, errno, "enter the sandbox net ns");
        /* Only our future children land in C's pid ns: the mounter. */
        if (setns(L->pidns, CLONE_NEWPID) < 0)
                return sbx_error_set(err, errno, "enter the sandbox pid ns");
        return 0;
}

/* Hand C an fd of its root (opened in its mount ns) and let it go. */
static int release_child(struct launch *L, struct sbx_error *err)
{
        _cleanup_close_ int dfd = open(L->spec->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return sbx_error_set(err, errno, "open `%s`", L->spec->dir);
        _cleanup_close_ int root =
            openat(dfd, "rootfs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return sbx_error_set(err, errno, "open rootfs/");
        char byte = 'G';
        int r = fd_send(L->sync[0], &byte, 1, root, 0);
        if (r < 0)
                return sbx_error_set(err, -r, "release sandbox process");
        close_fd(&L->sync[0]);
        return 0;
}

/* C closes its error pipe by exec'ing (CLOEXEC) or reports why it failed. */
static int wait_exec(struct launch *L, struct sbx_error *err)
{
        int r = wire_recv(L->errp[0], err);
        if (r < 0)
                return r;
        int st;
        if (waitpid(L->pid, &st, WNOHANG) == L->pid) {
                L->pid = 0;
                return sbx_error_set(err, EIO, "sandbox-init exited at once (status 0x%x)", st);
        }
        return 0;
}

/* ---- C: the sandbox's PID 1 until it execs sandbox-init ---- */

struct child {
        int errfd;
        const struct launch *L;
};

static _Noreturn void child_fail(struct child *c, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static _Noreturn void child_fail(struct child *c, int errnum, const char *fmt, ...)
{
        char head[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(head, sizeof(head), fmt, ap);
        va_end(ap);
        struct sbx_error e;
        sbx_error_set(&e, errnum, "%s", head);
        wire_send(c->errfd, e.code, e.msg);
        _exit(1);
}

/* Only what C needs, at fixed numbers; everything else inherited from the
 * daemon is closed before anything else happens (CVE-2024-21626 class:
 * no host fd, above all no directory fd, may reach the sandbox). */
static void child_fds_early(struct child *c)
{
        const struct launch *L = c->L;
        int src[] = {L->listen_fd, L->ctx->init_memfd, L->errp[1], L->sync[1]};
        int tmp[ARRAY_SIZE(src)];
        for (size_t i = 0; i < ARRAY_SIZE(src); i++) {
                tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 64);
                if (tmp[i] < 0)
                        _exit(1);
        }
        for (size_t i = 0; i < ARRAY_SIZE(src); i++) {
                /* fd 3 (the listener) is the only one kept across exec. */
                if (dup3(tmp[i], FD_LISTEN + (int)i, i == 0 ? 0 : O_CLOEXEC) < 0)
                        _exit(1);
        }
        c->errfd = FD_ERR;
        close_range(0, 2, 0);
        close_range(FD_FIRST_FREE, ~0U, 0);
}

static int child_recv_root(struct child *c)
{
        char byte;
        int fd;
        ssize_t n = fd_recv(FD_SYNC, &byte, 1, &fd, 0);
        if (n == 0 || (n < 0 && n != -EMSGSIZE))
                _exit(1); /* launcher gone: nothing to report to */
        if (n < 0 || fd < 0)
                child_fail(c, EPROTO, "release message without root fd");
        close(FD_SYNC);
        return fd;
}

static void child_net_uts(struct child *c)
{
        const char *h = c->L->spec->hostname;
        if (sethostname(h, strnlen(h, NS_HOSTNAME_MAX)) < 0)
                child_fail(c, errno, "sethostname");
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {0};
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                child_fail(c, errno, "get flags of lo");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                child_fail(c, errno, "bring lo up");
}

static void child_pivot(struct child *c, int rootfd)
{
        if (fchdir(rootfd) < 0)
                child_fail(c, errno, "chdir to the sandbox root");
        close(rootfd);
        /* pivot_root(".", ".") stacks the old root on top of the new one;
         * detaching it leaves no path to the host tree. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                child_fail(c, errno, "pivot_root");
        if (umount2(".", MNT_DETACH) < 0)
                child_fail(c, errno, "detach the old root");
        if (chdir("/") < 0)
                child_fail(c, errno, "chdir /");
}

static void child_stdio(struct child *c)
{
        int fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                child_fail(c, errno, "open /dev/null");
        for (int i = 0; i <= 2; i++)
                if (fd != i && dup2(fd, i) < 0)
                        child_fail(c, errno, "dup2");
        if (fd > 2)
                close(fd);
        else
                fcntl(fd, F_SETFD, 0);
}

static void child_ids_env(struct child *c)
{
        /* C still runs as host uid 0, which is unmapped here: become the
         * mapped root (host uid_base). Supplementary groups of host root
         * must not survive either. */
        if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
                child_fail(c, errno, "switch to root of the user namespace");
        if (setsid() < 0)
                child_fail(c, errno, "setsid");
        clearenv();
        umask(022);
        struct rlimit core = {0, 0};
        if (setrlimit(RLIMIT_CORE, &core) < 0)
                child_fail(c, errno, "setrlimit core");
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        /* Ignored signals stay ignored across exec: reset them all. */
        for (int s = 1; s < NSIG; s++)
                if (s != SIGKILL && s != SIGSTOP)
                        signal(s, SIG_DFL);
}

/* Docker's default set (moby oci/caps/defaults.go). The inheritable set
 * stays empty (CVE-2022-24769: inheritable caps would let a non-root
 * workload gain them from file capabilities). */
static const int keep_caps[] = {
    CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FSETID,           CAP_FOWNER,
    CAP_MKNOD,   CAP_NET_RAW,      CAP_SETGID,           CAP_SETUID,
    CAP_SETFCAP, CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
    CAP_KILL,    CAP_AUDIT_WRITE,
};

static void child_caps(struct child *c)
{
        uint64_t keep = 0;
        for (size_t i = 0; i < ARRAY_SIZE(keep_caps); i++)
                keep |= 1ULL << keep_caps[i];
        for (int cap = 0; cap < 64; cap++) {
                if (keep & (1ULL << cap))
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        child_fail(c, errno, "drop capability %d from the bounding set", cap);
        }
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                child_fail(c, errno, "clear ambient capabilities");
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {0};
        for (int i = 0; i < 2; i++) {
                d[i].effective = d[i].permitted = (uint32_t)(keep >> (32 * i));
                d[i].inheritable = 0;
        }
        if (syscall(SYS_capset, &h, d) < 0)
                child_fail(c, errno, "capset");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(c, errno, "set no_new_privs");
}

static _Noreturn void child_main(struct child *c)
{
        child_fds_early(c);
        int rootfd = child_recv_root(c);
        /* The launcher put us in our cgroups: that is the root of the new
         * cgroup namespace. */
        if (unshare(CLONE_NEWCGROUP) < 0)
                child_fail(c, errno, "unshare cgroup ns");
        child_net_uts(c);
        child_pivot(c, rootfd);
        child_stdio(c);
        child_ids_env(c);
        child_caps(c);
        int r = rt_seccomp_load(&c->L->ctx->seccomp);
        if (r < 0)
                child_fail(c, -r, "load seccomp filter");
        /* A sealed memfd, not a host path: even a workload that reaches
         * /proc/1/exe cannot write through to a host binary (CVE-2019-5736). */
        char *const argv[] = {"sandbox-init", "--listen-fd=3", NULL};
        char *const envp[] = {NULL};
        fexecve(FD_MEMFD, argv, envp);
        child_fail(c, errno, "exec sandbox-init");
}

/* ---- the launch ---- */

static int launch_clone(struct launch *L, struct sbx_error *err)
{
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, L->sync) < 0)
                return sbx_error_set(err, errno, "socketpair");
        if (pipe2(L->errp, O_CLOEXEC) < 0)
                return sbx_error_set(err, errno, "pipe");
        /* Fork-like clone (no new stack): the child continues here, made
         * in its v2 cgroup where there is one (no move, no wait), else
         * moved by cgroup_step. */
        _cleanup_close_ int cgfd = cg_v2_open(&L->ctx->cg, L->spec->id);
        long pid = -1;
        if (cgfd >= 0) {
                struct clone_args ca = {.flags = NS_CLONE_FLAGS | CLONE_INTO_CGROUP,
                                        .exit_signal = SIGCHLD,
                                        .cgroup = (uint64_t)cgfd};
                pid = syscall(SYS_clone3, &ca, sizeof(ca));
                L->cloned_into = pid >= 0;
        }
        if (pid < 0)
                pid = syscall(SYS_clone, (unsigned long)NS_CLONE_FLAGS | SIGCHLD, NULL, NULL, NULL,
                              NULL);
        if (pid < 0)
                return sbx_error_set(err, errno, "clone sandbox namespaces");
        if (pid == 0) {
                struct child c = {.errfd = L->errp[1], .L = L};
                child_main(&c);
        }
        L->pid = (pid_t)pid;
        close_fd(&L->sync[1]);
        close_fd(&L->errp[1]);
        close_fd(&L->listen_fd);
        return 0;
}

/* The open-file cap, set here (as host root) so C inherits it: the hard
 * limit cannot be raised from inside, where no process has CAP_SYS_RESOURCE
 * in the initial user namespace. Soft = nofile, which sandbox-init makes
 * every workload process's soft and hard limit; the hard limit left for
 * sandbox-init itself covers its own fds. Every fd can pin kernel memory (a
 * socket's buffers above all), and the cap applies per process: a sandbox
 * holds at most about pids_limit x nofile of them. */
static int set_nofile(const struct launch *L, struct sbx_error *err)
{
        rlim_t n = L->spec->limits.nofile;
        struct rlimit rl;
        if (!n)
                return 0;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return sbx_error_set(err, errno, "get RLIMIT_NOFILE");
        /* Raising the hard limit needs CAP_SYS_RESOURCE, which some hosts
         * withhold even from root: then init's room is the daemon's own. */
        rl.rlim_max = MAX(n, MIN(rl.rlim_max, (rlim_t)NS_INIT_NOFILE));
        rl.rlim_cur = n;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                return sbx_error_set(err, errno,
                                     "set RLIMIT_NOFILE to %llu (max_open_files above the "
                                     "daemon's own hard limit?)",
                                     (unsigned long long)n);
        return 0;
}

static int launch_steps(struct launch *L, struct sbx_error *err)
{
        int r;
        /* C first, what only the mounter needs after: C's cgroup attach
         * (cgroup_step) is the longest wait of a start and runs from
         * C's clone on. */
        L->t0 = mono_us();
        r = L->spare ? cg_spare_adopt(&L->ctx->cg, L->spec->id, &L->spec->limits, err)
                     : cg_create(&L->ctx->cg, L->spec->id, &L->spec->limits, err);
        if (r < 0)
                return r;
        mark(L, "cgroups");
        if ((r = make_listener(L, err)) < 0 || (r = set_nofile(L, err)) < 0 ||
            (r = launch_clone(L, err)) < 0)
                return r;
        bool v1 = false;
        for (int i = 0; i < CG_V1_COUNT; i++)
                v1 |= L->ctx->cg.v1[i][0] != '\0';
        if (((v1 && !L->spare) || (L->ctx->cg.v2[0] && !L->cloned_into)) &&
            (r = side_start(&L->attacher, cgroup_step, L, "cgroup attach", err)) < 0)
                return r;
        mark(L, "clone");
        if ((r = prepare_dir(L, err)) < 0)
                return r;
        mark(L, "dir");
        if ((r = prepare_dev_trees(L, err)) < 0 || (r = map_ids(L, err)) < 0 ||
            (r = idmap_image(L, err)) < 0)
                return r;
        mark(L, "ids");
        /* The veth pair is made from the host's netns, configured from the
         * sandbox's once the launcher is in it. */
        if (L->spec->limits.network == RT_NET_NAT &&
            (r = net_veth_create(&L->ctx->net, L->spec->uid_base / L->spec->uid_count, L->netns,
                                 &L->net, err)) < 0)
                return r;
        if (L->net.active && (r = net_addr_save(L->dirfd, &L->net, err)) < 0)
                return r;
        if ((r = enter_ns(L, err)) < 0)
                return r;
        if (L->net.active && (r = net_sandbox_setup(&L->net, err)) < 0)
                return r;
        mark(L, "net");
        if ((r = run_mounter(L, err)) < 0)
                return r;
        mark(L, "mounts");
        if (L->attacher.pid > 0 && (r = side_wait(&L->attacher, "cgroup attach", err)) < 0)
                return r;
        mark(L, "cgroup-attach-wait");
        if ((r = release_child(L, err)) < 0 || (r = wait_exec(L, err)) < 0)
                return r;
        mark(L, "exec");
        log_marks(L);
        return 0;
}

int ns_launch(const struct ns_ctx *ctx, const struct rt_spec *spec, bool spare, pid_t *ret_pid,
              struct sbx_error *err)
{
        struct launch L = {
            .ctx = ctx,
            .spec = spec,
            .spare = spare,
            .dirfd = -1,
            .listen_fd = -1,
            .sync = {-1, -1},
            .errp = {-1, -1},
            .userns = -1,
            .mntns = -1,
            .netns = -1,
            .pidns = -1,
            .tree_fd = -1,
            .disk = {.loop_fd = -1},
            .attacher = {.fd = -1},
        };
        for (size_t i = 0; i < ARRAY_SIZE(L.dev_fd); i++)
                L.dev_fd[i] = -1;
        int r = ns_spec_check(spec, err);
        if (r >= 0)
                r = launch_steps(&L, err);
        if (r < 0 && L.pid > 0) {
                kill(L.pid, SIGKILL);
                while (waitpid(L.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        if (r >= 0)
                *ret_pid = L.pid;
        launch_release(&L);
        return r < 0 ? r : 0;
}
