/* SPDX-License-Identifier: MIT */
/* The escape probe: a static binary the security tests copy into a sandbox
 * and run there. It attempts every escape on the list below and prints
 *
 *   {"checks":[{"name":"...","reached":false,"detail":"..."}, ...]}
 *
 * reached = the attempt got somewhere it must never get (a syscall passed
 * the seccomp filter, a host file or process was touched, a write opened).
 * Each attempt runs in a forked child: a child killed by a signal (seccomp
 * kills on a foreign syscall ABI) counts as blocked.
 *
 * The probe never does damage when an attempt succeeds: sysctl files are
 * only opened, never written; dangerous syscalls get arguments the kernel
 * rejects (EINVAL / EFAULT / EBADF), so "the kernel looked at them" is the
 * signal, not a side effect.
 *
 * Options (repeatable): --canary=VALUE  a secret from the daemon's env;
 *   --pid=N  a pid outside the sandbox (must stay unreachable);
 *   --host-file=PATH  a file only the host has; --connect=IPv4:PORT  must
 *   not connect; --abstract=NAME  a host abstract unix socket;
 *   --no-kill-all  skip kill(-1, SIGKILL); --only=NAME  run only that check
 *   (repeatable); --profile=gvisor  see below.
 *
 * --profile=gvisor: the sandbox's kernel is gVisor's sentry, a kernel in
 * user space that runs under its own seccomp filter on the host, and
 * there is no filter inside (the sentry is the boundary: a call made here
 * runs the sentry's code, never the host kernel's). Where the sentry
 * answers a call that the ns class's filter refuses, the profile asserts
 * the answer gVisor gives (gv_answers, and each check's comments say
 * why it is harmless there); any other answer is still reached. PID 1 is
 * then the guard (sandbox-init --guard): sandbox-init itself is outside
 * the workload's pid namespace, and gVisor does not protect a pid
 * namespace's init from SIGKILL and SIGSTOP, so those two are not sent.
 *
 * `probe memhog` instead allocates memory until it is killed;
 * `probe userns CMD ARG...` runs CMD as root of a user namespace of its
 * own (where the kernel allows one); `probe udp SRC DST PORT COUNT` sends
 * COUNT datagrams from SRC (an address of the sandbox's) to DST:PORT. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/userfaultfd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/timex.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

#define MAX_ARGS 1024
#define DETAIL_MAX 900
#define CHECK_TIMEOUT_S 20
/* Docker's default capability set: what CapEff / CapBnd may hold. */
#define DOCKER_CAPS 0xa80425fbULL

struct opts {
        const char *canary[MAX_ARGS];
        int n_canary;
        long pid[MAX_ARGS];
        int n_pid;
        const char *host_file[MAX_ARGS];
        int n_host_file;
        const char *connect[MAX_ARGS];
        int n_connect;
        const char *abstract[MAX_ARGS];
        int n_abstract;
        bool kill_all;
        bool gvisor; /* --profile=gvisor */
        const char *only[MAX_ARGS];
        int n_only;
};

/* Written by a check's child into shared memory. */
struct result {
        int reached;
        char detail[DETAIL_MAX];
};

static struct opts O = {.kill_all = true};
static struct result *R;       /* the running check's result (shared page) */
static char early_fds[512];    /* fds above 2 found at start-up */
static bool first_item = true; /* JSON output state */

/* ---- reporting ---- */

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
        size_t len = strlen(R->detail);
        if (len + 2 >= sizeof(R->detail))
                return;
        if (len) {
                R->detail[len++] = ';';
                R->detail[len++] = ' ';
                R->detail[len] = '\0';
        }
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(R->detail + len, sizeof(R->detail) - len, fmt, ap);
        va_end(ap);
}

static void reach(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reach(const char *fmt, ...)
{
        char tmp[DETAIL_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tmp, sizeof(tmp), fmt, ap);
        va_end(ap);
        R->reached = 1;
        note("REACHED %s", tmp);
}

static void json_str(const char *s)
{
        putchar('"');
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        printf("\\%c", *p);
                else if (*p < 0x20 || *p >= 0x7f)
                        printf("\\u%04x", *p);
                else
                        putchar(*p);
        }
        putchar('"');
}

static void emit(const char *name, bool reached, const char *detail)
{
        printf("%s\n  {\"name\":", first_item ? "" : ",");
        first_item = false;
        json_str(name);
        printf(",\"reached\":%s,\"detail\":", reached ? "true" : "false");
        json_str(detail);
        putchar('}');
        fflush(stdout);
}

/* Whether a failed syscall was stopped before the kernel looked at it:
 * seccomp answers EPERM (or ENOSYS for clone3); a capability check that
 * fails early looks the same, which is fine: nothing was reached. */
static bool blocked_errno(int e)
{
        return e == EPERM || e == ENOSYS || e == EACCES;
}

/* What gVisor's sentry answers to calls the ns class's filter refuses
 * (err 0: it succeeds). Each is the sentry's own code and state, not the
 * host kernel's: */
static const struct {
        const char *what;
        int err;
} gv_answers[] = {
    {"keyctl(GET_KEYRING_ID)", 0},         /* a session keyring of the sentry's */
    {"perf_event_open(NULL)", ENODEV},     /* no perf events at all */
    {"open_by_handle_at(-1)", EOPNOTSUPP}, /* no file handles */
    {"syslog(SIZE_BUFFER)", 0},            /* its made-up boot log ("Starting gVisor...") */
    {"personality(0x4000000)", EINVAL},    /* personalities it does not emulate */
    {"mbind(bad)", EINVAL},                /* its NUMA emulation checks the mode */
    {"set_mempolicy(bad)", EINVAL},
};

/* Whether r/errno is the answer gVisor gives to `what` (profile gvisor). */
static bool gv_answered(const char *what, long r, int e)
{
        if (!O.gvisor)
                return false;
        for (size_t i = 0; i < sizeof(gv_answers) / sizeof(gv_answers[0]); i++)
                if (!strcmp(gv_answers[i].what, what))
                        return gv_answers[i].err ? r < 0 && e == gv_answers[i].err : r >= 0;
        return false;
}

/* A raw syscall whose arguments the kernel would reject: reached when it
 * returns anything but a blocking errno (or, profile gvisor, gVisor's own
 * answer). */
static void sys_try(const char *what, long nr, long a, long b, long c, long d, long e)
{
        errno = 0;
        long r = syscall(nr, a, b, c, d, e, 0L);
        int err = errno;
        if (r >= 0 ? gv_answered(what, r, 0) : blocked_errno(err) || gv_answered(what, r, err))
                note("%s: %s%s", what, r < 0 ? strerror(err) : "ok",
                     r >= 0 || !blocked_errno(err) ? " (gVisor's own answer)" : "");
        else
                reach("%s -> %ld (%s)", what, r, r < 0 ? strerror(err) : "ok");
}

/* ---- helpers ---- */

static bool is_pid_name(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* Read up to len-1 bytes of a file; bytes read or -errno. */
static ssize_t slurp(const char *path, char *out, size_t len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        size_t off = 0;
        while (off + 1 < len) {
                ssize_t n = read(fd, out + off, len - 1 - off);
                if (n < 0) {
                        int e = errno;
                        close(fd);
                        return off ? (ssize_t)off : -e;
                }
                if (n == 0)
                        break;
                off += (size_t)n;
        }
        out[off] = '\0';
        close(fd);
        return (ssize_t)off;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Walk ".." from dirfd to the top of the tree it belongs to; true when
 * that top is not our "/" (the directory lies outside the sandbox). */
static bool outside_root(int dirfd)
{
        struct stat root, cur, up;
        if (stat("/", &root) < 0)
                return false;
        int fd = dup(dirfd);
        for (int i = 0; fd >= 0 && i < 256; i++) {
                int parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (parent < 0 || fstat(fd, &cur) < 0 || fstat(parent, &up) < 0) {
                        if (parent >= 0)
                                close(parent);
                        break;
                }
                close(fd);
                fd = parent;
                if (same_file(&cur, &up))
                        break;
        }
        bool out = fd >= 0 && fstat(fd, &cur) == 0 && !same_file(&cur, &root);
        if (fd >= 0)
                close(fd);
        return out;
}

/* ---- checks ---- */

/* CVE-2019-5736: overwrite the runtime's binary through /proc/<pid>/exe. */
static void check_proc_exe(void)
{
        struct stat root;
        stat("/", &root);
        DIR *d = opendir("/proc");
        struct dirent *de;
        int tried = 0;
        while (d && (de = readdir(d))) {
                if (!is_pid_name(de->d_name) || atoi(de->d_name) == getpid())
                        continue;
                char p[64];
                if (snprintf(p, sizeof(p), "/proc/%s/exe", de->d_name) >= (int)sizeof(p))
                        continue;
                tried++;
                int fd = open(p, O_WRONLY | O_CLOEXEC);
                if (fd < 0) {
                        /* The O_PATH-then-reopen variant. */
                        int pfd = open(p, O_PATH | O_CLOEXEC);
                        if (pfd >= 0) {
                                char via[64];
                                snprintf(via, sizeof(via), "/proc/self/fd/%d", pfd);
                                fd = open(via, O_WRONLY | O_CLOEXEC);
                                close(pfd);
                        }
                }
                if (fd < 0) {
                        note("pid %s: %s", de->d_name, strerror(errno));
                        continue;
                }
                struct stat st;
                fstat(fd, &st);
                if (atoi(de->d_name) == 1 || st.st_dev != root.st_dev)
                        reach("opened %s for writing", p);
                close(fd);
        }
        if (d)
                closedir(d);
        note("%d pids tried", tried);
}

/* CVE-2024-21626 class: fds inherited from the daemon or the agent. */
static void check_fd_leak(void)
{
        if (early_fds[0])
                reach("inherited fds: %s", early_fds);
        DIR *d = opendir("/proc/1/fd");
        struct dirent *de;
        int listed = 0;
        while (d && (de = readdir(d))) {
                if (!is_pid_name(de->d_name))
                        continue;
                listed++;
                char p[64], l[256];
                if (snprintf(p, sizeof(p), "/proc/1/fd/%s", de->d_name) >= (int)sizeof(p))
                        continue;
                ssize_t n = readlink(p, l, sizeof(l) - 1);
                /* gVisor shows a non-dumpable process's fd links. PID 1
                 * is the guard there, whose only fd is its life socket to
                 * sandbox-init: that name may show, nothing else. */
                if (n >= 0 && O.gvisor && !strncmp(l, "socket:[", 8)) {
                        l[n] = '\0';
                        note("the guard's fd %s -> %s", de->d_name, l);
                } else if (n >= 0) {
                        l[n] = '\0';
                        reach("read the agent's fd %s -> %s", de->d_name, l);
                }
                int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                if (fd >= 0) {
                        reach("opened the agent's fd %s", de->d_name);
                        close(fd);
                }
        }
        if (d)
                closedir(d);
        if (O.gvisor && listed > 1)
                reach("the guard holds %d fds (only its life socket expected)", listed);
        note("own fds 0-2 only: %s; agent fds listed %d, none readable",
             early_fds[0] ? "no" : "yes", listed);
}

/* Where sandbox-init and its socket are: PID 1 in the ns class (its
 * listener is an fd, no path); outside the workload's pid namespace in
 * the gvisor class, where PID 1 is the guard and the socket's directory
 * (/.sbx/agent, a host directory served by the gofer) is under an empty
 * read-only tmpfs. Either way the workload finds no other process of
 * sandbox-init's and cannot reach its socket. */
#define AGENT_SOCK "/.sbx/agent/agent.sock"

static void scan_for_init(const char *proc)
{
        DIR *d = opendir(proc);
        struct dirent *de;
        int n = 0;
        while (d && (de = readdir(d))) {
                if (!is_pid_name(de->d_name))
                        continue;
                char p[600], cmd[64];
                snprintf(p, sizeof(p), "%s/%s/cmdline", proc, de->d_name);
                n++;
                if (slurp(p, cmd, sizeof(cmd)) > 0 && !strncmp(cmd, "sandbox-init", 12) &&
                    (O.gvisor || atoi(de->d_name) != 1))
                        reach("sandbox-init is pid %s in %s", de->d_name, proc);
        }
        if (d)
                closedir(d);
        note("%d pids in %s", n, proc);
}

static void check_agent_hidden(void)
{
        char cmd[64];
        if (O.gvisor &&
            (slurp("/proc/1/cmdline", cmd, sizeof(cmd)) <= 0 || strcmp(cmd, "sandbox-guard") != 0))
                reach("PID 1 is not the guard");
        scan_for_init("/proc");
        struct stat st;
        if (lstat(AGENT_SOCK, &st) == 0)
                reach("%s exists", AGENT_SOCK);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path, AGENT_SOCK, sizeof(AGENT_SOCK));
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                reach("connected to %s", AGENT_SOCK);
        else
                note("connect %s: %s", AGENT_SOCK, strerror(errno));
        if (fd >= 0)
                close(fd);
        DIR *d = opendir("/.sbx/agent");
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.')
                        reach("/.sbx/agent/%s is visible", de->d_name);
        if (d)
                closedir(d);
}

static void check_cwd_leak(void)
{
        char cwd[4096];
        if (!getcwd(cwd, sizeof(cwd)))
                reach("getcwd failed: %s (cwd outside the root?)", strerror(errno));
        else if (cwd[0] != '/')
                reach("cwd is %s", cwd);
        int here = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (here >= 0 && outside_root(here))
                reach("cwd lies outside the sandbox root");
        if (here >= 0)
                close(here);
        for (int n = 0; n < 1024; n++) {
                char p[64];
                snprintf(p, sizeof(p), "/proc/self/fd/%d", n);
                int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                /* gVisor's reopen through /proc/self/fd ignores
                 * O_DIRECTORY: a file's ".." is not the question. */
                struct stat st;
                if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) {
                        close(fd);
                        continue;
                }
                if (outside_root(fd))
                        reach("fd %d is a directory outside the root", n);
                close(fd);
        }
        static const char *const other[] = {"/proc/1/cwd", "/proc/1/root"};
        for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
                int fd = open(other[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0) {
                        note("%s: %s", other[i], strerror(errno));
                        continue;
                }
                if (outside_root(fd))
                        reach("%s leads outside the root", other[i]);
                else
                        note("%s opened (inside the root)", other[i]);
                close(fd);
        }
        note("cwd %s", cwd);
}

/* Under gVisor the knobs are the sentry's, never the host's (the profile
 * runs only on gVisor: see main), and the host-wide ones do not exist. The
 * three that open for writing are written with what they hold (a no-op
 * there) to see what they do: hostname and sysrq-trigger must refuse the
 * write; ip_forward is the switch of the sandbox's own network stack
 * (forwarding among its own interfaces, which the host filters as any). */
static void gv_sys_write(int fd, const char *path)
{
        char cur[256];
        ssize_t n = slurp(path, cur, sizeof(cur));
        bool sysrq = !strcmp(path, "/proc/sysrq-trigger");
        if (sysrq) {
                n = 1;
                cur[0] = 'h';
        }
        if (n <= 0) {
                reach("opened %s for writing (and cannot read it)", path);
                return;
        }
        errno = 0;
        bool wrote = write(fd, cur, (size_t)n) == n;
        if (!strcmp(path, "/proc/sys/net/ipv4/ip_forward"))
                note("%s: the sandbox's own network stack (write %s)", path,
                     wrote ? "taken" : strerror(errno));
        else if (wrote)
                reach("wrote %s", path);
        else
                note("%s opens, refuses writes (%s)", path, strerror(errno));
}

/* Host-wide kernel knobs (CVE-2022-0811 class): opened, never written
 * (but see gv_sys_write). */
static void check_proc_sys_write(void)
{
        static const char *const files[] = {
            "/proc/sys/kernel/core_pattern",
            "/proc/sys/kernel/modprobe",
            "/proc/sys/vm/drop_caches",
            "/proc/sys/kernel/hostname",
            "/proc/sys/net/ipv4/ip_forward",
            "/proc/sysrq-trigger",
            "/sys/kernel/uevent_helper",
            "/sys/power/state",
            "/proc/sys/kernel/randomize_va_space",
        };
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                int fd = open(files[i], O_WRONLY | O_CLOEXEC);
                if (fd >= 0 && O.gvisor) {
                        gv_sys_write(fd, files[i]);
                        close(fd);
                } else if (fd >= 0) {
                        reach("opened %s for writing", files[i]);
                        close(fd);
                } else {
                        note("%s: %s", files[i], strerror(errno));
                }
        }
}

static void check_masked(void)
{
        static const char *const files[] = {
            "/proc/kcore",         "/proc/keys",        "/proc/timer_list", "/proc/sched_debug",
            "/proc/latency_stats", "/proc/timer_stats", "/proc/key-users"};
        char buf[256];
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                ssize_t n = slurp(files[i], buf, sizeof(buf));
                if (n > 0 && strcmp(files[i], "/proc/key-users") != 0)
                        reach("%s gave %zd bytes", files[i], n);
                else
                        note("%s: %s", files[i], n < 0 ? strerror((int)-n) : "empty");
        }
        static const char *const dirs[] = {"/proc/acpi", "/proc/scsi", "/proc/asound",
                                           "/sys/firmware", "/sys/devices/virtual/powercap"};
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                DIR *d = opendir(dirs[i]);
                struct dirent *de;
                int n = 0;
                while (d && (de = readdir(d)))
                        n += de->d_name[0] != '.';
                if (d)
                        closedir(d);
                if (n > 0)
                        reach("%s lists %d entries", dirs[i], n);
        }
        /* Kernel addresses (KASLR) in kallsyms must read as zeros. */
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[256];
        for (int i = 0; f && i < 64 && fgets(line, sizeof(line), f); i++)
                if (strtoull(line, NULL, 16) != 0) {
                        reach("/proc/kallsyms shows addresses");
                        break;
                }
        if (f)
                fclose(f);
}

static void check_mknod(void)
{
        const struct {
                const char *path;
                mode_t mode;
                dev_t dev;
        } nodes[] = {
            {"/tmp/.probe-mem", S_IFCHR | 0600, makedev(1, 1)},
            {"/tmp/.probe-disk", S_IFBLK | 0600, makedev(254, 0)},
            {"/workspace/.probe-kmsg", S_IFCHR | 0600, makedev(1, 11)},
        };
        for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
                if (mknod(nodes[i].path, nodes[i].mode, nodes[i].dev) == 0) {
                        int fd = open(nodes[i].path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                        reach("mknod %s (%u:%u) worked, open %s", nodes[i].path,
                              major(nodes[i].dev), minor(nodes[i].dev),
                              fd >= 0 ? "worked" : "failed");
                        if (fd >= 0)
                                close(fd);
                        unlink(nodes[i].path);
                } else {
                        note("mknod %s: %s", nodes[i].path, strerror(errno));
                }
        }
}

static int dir_entries(const char *path)
{
        DIR *d = opendir(path);
        struct dirent *de;
        int n = 0;
        while (d && (de = readdir(d)))
                n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        if (d)
                closedir(d);
        return d ? n : -1;
}

/* gVisor gives every sandbox its own FUSE device (the sentry's FUSE
 * client; no host /dev/fuse is involved). Opening it is harmless while no
 * FUSE file system can be mounted with it, which takes CAP_SYS_ADMIN. */
static bool fuse_mounts(int fd)
{
        char opts[128];
        snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
        mkdir("/tmp/.probe-fuse", 0700);
        bool ok = mount("probe", "/tmp/.probe-fuse", "fuse", 0, opts) == 0;
        if (ok)
                umount2("/tmp/.probe-fuse", MNT_DETACH);
        else
                note("mount fuse: %s", strerror(errno));
        rmdir("/tmp/.probe-fuse");
        return ok;
}

static void check_devices(void)
{
        static const char *const devs[] = {
            "/dev/kmsg",      "/dev/mem",          "/dev/kmem",        "/dev/port",
            "/dev/kvm",       "/dev/net/tun",      "/dev/fuse",        "/dev/vda",
            "/dev/sda",       "/dev/loop-control", "/dev/loop0",       "/dev/console",
            "/dev/dri/card0", "/dev/vhost-net",    "/dev/userfaultfd", "/dev/tty0"};
        for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
                bool fuse = O.gvisor && !strcmp(devs[i], "/dev/fuse");
                int fd =
                    open(devs[i], (fuse ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
                if (fd >= 0 && fuse && !fuse_mounts(fd))
                        note("opened gVisor's own /dev/fuse");
                else if (fd >= 0)
                        reach("opened %s%s", devs[i], fuse ? " and mounted FUSE with it" : "");
                if (fd >= 0)
                        close(fd);
        }
        static const char *const allowed[] = {"null",  "zero",   "full",   "random", "urandom",
                                              "tty",   "pts",    "shm",    "ptmx",   "fd",
                                              "stdin", "stdout", "stderr", "mqueue", "core"};
        DIR *d = opendir("/dev");
        struct dirent *de;
        char seen[512] = "";
        while (d && (de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                bool ok = false;
                for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
                        ok = ok || !strcmp(de->d_name, allowed[i]);
                /* gVisor's own FUSE device (above), and the empty mask the
                 * driver puts over gVisor's /dev/net (its tun device). */
                if (O.gvisor && (!strcmp(de->d_name, "fuse") ||
                                 (!strcmp(de->d_name, "net") && dir_entries("/dev/net") == 0)))
                        ok = true;
                if (!ok)
                        reach("/dev/%s exists", de->d_name);
                size_t l = strlen(seen);
                snprintf(seen + l, sizeof(seen) - l, "%s%s", l ? " " : "", de->d_name);
        }
        if (d)
                closedir(d);
        note("/dev: %s", seen);
}

/* CVE-2022-0492: a cgroupfs with a writable release_agent. */
static void check_cgroupfs(void)
{
        mkdir("/tmp/.probe-cg", 0700);
        static const struct {
                const char *type, *opts;
        } m[] = {{"cgroup", "rdma"}, {"cgroup", "memory"}, {"cgroup2", NULL}};
        for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
                if (mount("probe", "/tmp/.probe-cg", m[i].type, 0, m[i].opts) == 0) {
                        reach("mounted %s %s", m[i].type, m[i].opts ? m[i].opts : "");
                        umount2("/tmp/.probe-cg", MNT_DETACH);
                } else {
                        note("mount %s: %s", m[i].type, strerror(errno));
                }
        }
        sys_try("fsopen(cgroup)", SYS_fsopen, (long)"cgroup", 0, 0, 0, 0);
        DIR *d = opendir("/sys/fs/cgroup");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                char p[512];
                snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/release_agent", de->d_name);
                int fd = open(p, O_WRONLY | O_CLOEXEC);
                if (fd >= 0) {
                        reach("opened %s for writing", p);
                        close(fd);
                }
        }
        if (d)
                closedir(d);
        rmdir("/tmp/.probe-cg");
}

/* gv: allowed in the gvisor profile (a namespace of the sentry's). */
static void try_unshare(const char *name, int flag, bool gv)
{
        pid_t c = fork();
        if (c == 0)
                _exit(unshare(flag) == 0 ? 0 : errno == EPERM ? 1 : 2);
        int st = 0;
        waitpid(c, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !(gv && O.gvisor))
                reach("unshare(%s) worked", name);
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                note("unshare(%s): the sentry's own", name);
        else
                note("unshare(%s) refused", name);
}

/* Nested namespaces open the kernel's largest attack surface
 * (nf_tables CVE-2022-1015 / CVE-2024-1086, overlayfs CVE-2023-0386).
 * Under gVisor that surface is the sentry's, not the host kernel's: it
 * makes user and cgroup namespaces without any privilege, as Linux does.
 * What a user namespace must still not give is checked by
 * userns_confined. The others take CAP_SYS_ADMIN, which no workload has. */
static void check_namespaces(void)
{
        try_unshare("user", CLONE_NEWUSER, true);
        try_unshare("mnt", CLONE_NEWNS, false);
        try_unshare("net", CLONE_NEWNET, false);
        try_unshare("pid", CLONE_NEWPID, false);
        try_unshare("cgroup", CLONE_NEWCGROUP, true);
        try_unshare("uts", CLONE_NEWUTS, false);
        try_unshare("ipc", CLONE_NEWIPC, false);
        long r = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
        if (r == 0)
                _exit(0);
        if (r > 0) {
                waitpid((pid_t)r, NULL, 0);
                if (O.gvisor)
                        note("clone(CLONE_NEWUSER): the sentry's own");
                else
                        reach("clone(CLONE_NEWUSER) worked");
        } else {
                note("clone(CLONE_NEWUSER): %s", strerror(errno));
        }
        r = syscall(SYS_clone, (long)(CLONE_NEWNET | SIGCHLD), 0L, 0L, 0L, 0L);
        if (r == 0)
                _exit(0);
        if (r > 0) {
                waitpid((pid_t)r, NULL, 0);
                reach("clone(CLONE_NEWNET) worked");
        }
        /* clone3 must answer ENOSYS (seccomp cannot see its flags); the
         * sentry has it, with the same rules as clone. */
        struct {
                uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
        } args = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
        r = syscall(SYS_clone3, &args, sizeof(args));
        if (r == 0)
                _exit(0);
        if (r > 0) {
                waitpid((pid_t)r, NULL, 0);
                if (O.gvisor)
                        note("clone3(CLONE_NEWUSER): the sentry's own");
                else
                        reach("clone3(CLONE_NEWUSER) worked");
        } else if (O.gvisor) {
                note("clone3: %s", strerror(errno));
        } else if (errno != ENOSYS) {
                reach("clone3 reached the kernel (%s)", strerror(errno));
        } else {
                note("clone3: ENOSYS");
        }
        int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                if (setns(fd, 0) == 0)
                        reach("setns allowed");
                else
                        note("setns: %s", strerror(errno));
                close(fd);
        }
}

static void write_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, text, strlen(text)) < 0)
                note("write %s: %s", path, strerror(errno));
        if (fd >= 0)
                close(fd);
}

/* Root of a user namespace of its own has every capability there: what
 * it must still not do. Mounts copied from a more privileged namespace
 * are locked (the guard's /proc, the mask over the agent's socket
 * directory and over /dev/net), the UTS namespace is not its own, and no
 * device node can be made. Only runs where user namespaces can be made
 * (the gvisor class); elsewhere new_namespaces refuses them. */
static void check_userns(void)
{
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
                note("unshare(user|mnt): %s", strerror(errno));
                return;
        }
        write_file("/proc/self/uid_map", "0 0 1");
        write_file("/proc/self/gid_map", "0 0 1");
        static const char *const locked[] = {"/.sbx/agent", "/proc", "/dev/net", "/sys"};
        for (size_t i = 0; i < sizeof(locked) / sizeof(locked[0]); i++) {
                if (umount2(locked[i], MNT_DETACH) == 0)
                        reach("unmounted %s", locked[i]);
                else
                        note("umount %s: %s", locked[i], strerror(errno));
        }
        if (mount(NULL, "/.sbx/agent", NULL, MS_REMOUNT | MS_BIND, NULL) == 0)
                note("remount of the agent mask: allowed (its copy; still empty)");
        const char *mnt = "/tmp/.probe-userns";
        mkdir(mnt, 0700);
        /* "/" alone, without what is mounted on it: the image's own,
         * empty mount points. */
        if (mount("/", mnt, NULL, MS_BIND, NULL) == 0) {
                char p[256];
                snprintf(p, sizeof(p), "%s%s", mnt, AGENT_SOCK);
                struct stat st;
                if (lstat(p, &st) == 0)
                        reach("%s is visible under a bind of /", AGENT_SOCK);
                snprintf(p, sizeof(p), "%s/dev/net/tun", mnt);
                if (lstat(p, &st) == 0)
                        reach("/dev/net/tun is visible under a bind of /");
                umount2(mnt, MNT_DETACH);
        } else {
                note("bind /: %s", strerror(errno));
        }
        if (mount("proc", mnt, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0) {
                scan_for_init(mnt);
                umount2(mnt, MNT_DETACH);
        } else {
                note("mount proc: %s", strerror(errno));
        }
        rmdir(mnt);
        if (sethostname("probe", 5) == 0)
                reach("sethostname in a user namespace of its own");
        if (mknod("/tmp/.probe-tun", S_IFCHR | 0600, makedev(10, 200)) == 0) {
                reach("mknod of a tun device");
                unlink("/tmp/.probe-tun");
        }
        int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
                reach("opened /dev/net/tun");
                close(fd);
        }
        note("user namespace made");
}

static void check_sockets(void)
{
        static const struct {
                const char *name;
                int domain, type, proto;
        } s[] = {
            {"AF_PACKET raw", AF_PACKET, SOCK_RAW, 0x0300 /* htons(ETH_P_ALL) */},
            {"AF_PACKET dgram", AF_PACKET, SOCK_DGRAM, 0},
            {"NETLINK_NETFILTER", AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER},
            {"NETLINK_XFRM", AF_NETLINK, SOCK_RAW, NETLINK_XFRM},
            {"NETLINK_AUDIT", AF_NETLINK, SOCK_RAW, NETLINK_AUDIT},
            {"NETLINK_GENERIC", AF_NETLINK, SOCK_RAW, NETLINK_GENERIC},
            {"AF_ALG", AF_ALG, SOCK_SEQPACKET, 0},
            {"AF_VSOCK", AF_VSOCK, SOCK_STREAM, 0},
        };
        for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
                /* gVisor's packet sockets are its network stack's (with
                 * --net-raw, as raw sockets under CAP_NET_RAW in the ns
                 * class): the host kernel's af_packet code (CVE-2020-14386)
                 * never sees them. They reach the sandbox's own interfaces
                 * only, whose traffic the host filters as any other. */
                bool gv = O.gvisor && s[i].domain == AF_PACKET;
                int fd = socket(s[i].domain, s[i].type | SOCK_CLOEXEC, s[i].proto);
                if (fd >= 0 && gv) {
                        note("%s: gVisor's network stack", s[i].name);
                        close(fd);
                } else if (fd >= 0) {
                        reach("socket %s", s[i].name);
                        close(fd);
                } else {
                        note("%s: %s", s[i].name, strerror(errno));
                }
                /* The kernel truncates family and protocol to int: a filter
                 * comparing 64 bits would miss these. */
                long hi = 1L << 32;
                fd = (int)syscall(SYS_socket, s[i].domain | hi, s[i].type | SOCK_CLOEXEC,
                                  s[i].proto | hi, 0L, 0L, 0L);
                if (fd >= 0 && !gv)
                        reach("socket %s with high bits set", s[i].name);
                if (fd >= 0)
                        close(fd);
        }
}

/* CVE-2016-9962 class: the workload must not trace or read PID 1. */
static void check_ptrace(void)
{
        if (ptrace(PTRACE_ATTACH, 1, NULL, NULL) == 0) {
                reach("PTRACE_ATTACH 1");
                ptrace(PTRACE_DETACH, 1, NULL, NULL);
        } else {
                note("attach 1: %s", strerror(errno));
        }
        if (ptrace(PTRACE_SEIZE, 1, NULL, NULL) == 0) {
                reach("PTRACE_SEIZE 1");
                ptrace(PTRACE_DETACH, 1, NULL, NULL);
        }
        /* The sentry implements ptrace among its own tasks (the host's
         * ptrace is never used for them): tracing oneself is harmless. */
        pid_t c = fork();
        if (c == 0)
                _exit(ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0 ? 0 : 1);
        int st = 0;
        waitpid(c, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !O.gvisor)
                reach("PTRACE_TRACEME allowed");
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                note("PTRACE_TRACEME: the sentry's own");
        char buf[64];
        struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
        errno = 0;
        if (syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0) >= 0 ||
            !blocked_errno(errno))
                reach("process_vm_readv(1) reached the kernel (%s)", strerror(errno));
        static const char *const files[] = {"/proc/1/mem",  "/proc/1/environ", "/proc/1/maps",
                                            "/proc/1/auxv", "/proc/1/stack",   "/proc/1/syscall"};
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
                int fd = open(files[i], O_RDONLY | O_CLOEXEC);
                /* gVisor does not hide these for a non-dumpable process.
                 * PID 1 is the guard there: its maps and auxv are those of
                 * a reaper that holds nothing, its environment is blanked
                 * (it must read as NULs only); its memory stays closed. */
                bool gv_ok = O.gvisor && i >= 2 && i <= 3;
                if (fd >= 0 && O.gvisor && i == 1) {
                        char env[4096];
                        ssize_t n = read(fd, env, sizeof(env));
                        for (ssize_t k = 0; k < n; k++)
                                if (env[k]) {
                                        reach("the guard's environ has data");
                                        break;
                                }
                        note("%s: %zd NUL bytes", files[i], n);
                        gv_ok = true;
                }
                if (fd >= 0 && gv_ok) {
                        note("%s: readable (the guard's)", files[i]);
                        close(fd);
                } else if (fd >= 0) {
                        ssize_t n = read(fd, buf, sizeof(buf));
                        if (n >= 0 && strcmp(files[i], "/proc/1/mem") != 0)
                                reach("read %s", files[i]);
                        else if (strcmp(files[i], "/proc/1/mem") == 0)
                                reach("opened /proc/1/mem");
                        close(fd);
                } else {
                        note("%s: %s", files[i], strerror(errno));
                }
        }
}

static char init_state(void)
{
        char buf[512];
        if (slurp("/proc/1/stat", buf, sizeof(buf)) <= 0)
                return '?';
        char *p = strrchr(buf, ')');
        return p && p[1] == ' ' ? p[2] : '?';
}

static void check_signal_init(void)
{
        static const int sigs[] = {SIGTERM, SIGINT,  SIGHUP,  SIGQUIT, SIGUSR1,
                                   SIGSEGV, SIGPIPE, SIGALRM, SIGSTOP, SIGKILL};
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
                /* Not to the guard: gVisor lets them through (see top). */
                if (O.gvisor && (sigs[i] == SIGKILL || sigs[i] == SIGSTOP))
                        continue;
                int r = kill(1, sigs[i]);
                note("kill(1, %d) = %d", sigs[i], r);
        }
        usleep(100 * 1000);
        char s = init_state();
        if (s == '?' || s == 'Z' || s == 'X')
                reach("PID 1 is gone (state %c)", s);
        if (s == 'T' || s == 't') {
                kill(1, SIGCONT);
                reach("PID 1 was stopped");
        }
        note("PID 1 state %c", s);
}

/* Pids of the host or of other sandboxes must not exist here. */
static void check_signal_outside(void)
{
        for (int i = 0; i < O.n_pid; i++) {
                char p[64];
                snprintf(p, sizeof(p), "/proc/%ld", O.pid[i]);
                bool ours = access(p, F_OK) == 0;
                int r = kill((pid_t)O.pid[i], 0);
                if (r == 0 && !ours)
                        reach("pid %ld answers kill(0) without being in /proc", O.pid[i]);
                if (!ours && kill((pid_t)O.pid[i], SIGKILL) == 0)
                        reach("SIGKILL to pid %ld delivered", O.pid[i]);
                note("pid %ld: %s", O.pid[i],
                     ours ? "a sandbox pid (same number)" : "no such process");
        }
        int visible = 0, answered = 0;
        for (pid_t pid = 1; pid < 65536; pid++) {
                if (kill(pid, 0) != 0 && errno == ESRCH)
                        continue;
                answered++;
                char p[64];
                snprintf(p, sizeof(p), "/proc/%d", (int)pid);
                if (access(p, F_OK) == 0)
                        visible++;
                else
                        reach("pid %d answers but is not in /proc", (int)pid);
        }
        note("%d pids answer kill(0) in 1..65535, %d in /proc", answered, visible);
}

static void check_keyring(void)
{
        sys_try("keyctl(GET_KEYRING_ID)", SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                KEY_SPEC_SESSION_KEYRING, 0, 0, 0);
        sys_try("add_key(NULL)", SYS_add_key, 0, 0, 0, 0, 0);
        sys_try("request_key(NULL)", SYS_request_key, 0, 0, 0, 0, 0);
}

static void check_kernel_surface(void)
{
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.map_type = BPF_MAP_TYPE_ARRAY;
        attr.key_size = 4;
        attr.value_size = 4;
        attr.max_entries = 1;
        errno = 0;
        long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
        if (fd >= 0) {
                reach("bpf(MAP_CREATE) worked");
                close((int)fd);
        } else {
                note("bpf: %s", strerror(errno));
        }
        sys_try("perf_event_open(NULL)", SYS_perf_event_open, 0, 0, -1, -1, 0);
        /* Pages hidden from the kernel and locked outside swap: refused. */
        sys_try("memfd_secret(0)", SYS_memfd_secret, 0, 0, 0, 0, 0);
        sys_try("io_uring_setup(1, NULL)", SYS_io_uring_setup, 1, 0, 0, 0, 0);
        sys_try("io_uring_enter(-1)", SYS_io_uring_enter, -1, 0, 0, 0, 0);
        sys_try("io_uring_register(-1)", SYS_io_uring_register, -1, 0, 0, 0, 0);
        errno = 0;
        fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
        if (fd >= 0) {
                reach("userfaultfd worked");
                close((int)fd);
        } else if (!blocked_errno(errno)) {
                reach("userfaultfd reached the kernel (%s)", strerror(errno));
        } else {
                note("userfaultfd: %s", strerror(errno));
        }
}

static void check_mount_api(void)
{
        mkdir("/tmp/.probe-mnt", 0700);
        if (mount("none", "/tmp/.probe-mnt", "tmpfs", 0, NULL) == 0) {
                reach("mount(tmpfs)");
                umount2("/tmp/.probe-mnt", MNT_DETACH);
        } else {
                note("mount: %s", strerror(errno));
        }
        rmdir("/tmp/.probe-mnt");
        sys_try("fsopen(tmpfs)", SYS_fsopen, (long)"tmpfs", 0, 0, 0, 0);
        sys_try("fsmount(-1)", SYS_fsmount, -1, 0, 0, 0, 0);
        sys_try("fsconfig(-1)", SYS_fsconfig, -1, 0, 0, 0, 0);
        sys_try("fspick(-1)", SYS_fspick, -1, (long)"", 0, 0, 0);
        sys_try("open_tree(/)", SYS_open_tree, AT_FDCWD, (long)"/", 1 /* OPEN_TREE_CLONE */, 0, 0);
        sys_try("move_mount(-1)", SYS_move_mount, -1, (long)"", -1, (long)"", 0);
        sys_try("mount_setattr(-1)", SYS_mount_setattr, -1, (long)"", 0, 0, 0);
        sys_try("umount2(/nonexistent)", SYS_umount2, (long)"/nonexistent-probe", 0, 0, 0, 0);
        sys_try("pivot_root(/nonexistent)", SYS_pivot_root, (long)"/nonexistent-probe",
                (long)"/nonexistent-probe", 0, 0, 0);
}

/* Syscalls Docker's profile leaves out; each gets arguments the kernel
 * would reject, so reaching it does nothing. */
static void check_misc_syscalls(void)
{
        sys_try("open_by_handle_at(-1)", SYS_open_by_handle_at, -1, 0, 0, 0, 0);
        sys_try("kexec_load(bad)", SYS_kexec_load, 0, 0, 0, 0x7fffffff, 0);
        sys_try("init_module(NULL)", SYS_init_module, 0, 0, 0, 0, 0);
        sys_try("finit_module(-1)", SYS_finit_module, -1, 0, 0, 0, 0);
        sys_try("delete_module(\"\")", SYS_delete_module, (long)"", 0, 0, 0, 0);
        sys_try("iopl(4)", SYS_iopl, 4, 0, 0, 0, 0);
        sys_try("ioperm(bad)", SYS_ioperm, 0x10000, 1, 1, 0, 0);
        sys_try("swapon(/nonexistent)", SYS_swapon, (long)"/nonexistent-probe", 0, 0, 0, 0);
        sys_try("swapoff(/nonexistent)", SYS_swapoff, (long)"/nonexistent-probe", 0, 0, 0, 0);
        sys_try("reboot(bad magic)", SYS_reboot, 0, 0, 0, 0, 0);
        sys_try("syslog(SIZE_BUFFER)", SYS_syslog, 10, 0, 0, 0, 0);
        sys_try("acct(/nonexistent)", SYS_acct, (long)"/nonexistent-probe", 0, 0, 0, 0);
        sys_try("clock_settime(NULL)", SYS_clock_settime, CLOCK_REALTIME, 0, 0, 0, 0);
        sys_try("settimeofday(bad)", SYS_settimeofday, 1, 0, 0, 0, 0);
        /* Allowed for reading (Docker does); setting the host clock needs
         * CAP_SYS_TIME. Set the status to what it is: a no-op if allowed. */
        struct timex tx = {.modes = 0};
        if (adjtimex(&tx) >= 0) {
                tx.modes = ADJ_STATUS;
                errno = 0;
                if (adjtimex(&tx) >= 0 || !blocked_errno(errno))
                        reach("adjtimex(ADJ_STATUS) -> %s", strerror(errno));
        }
        sys_try("pidfd_getfd(-1)", SYS_pidfd_getfd, -1, 0, 0, 0, 0);
        sys_try("kcmp(bad)", SYS_kcmp, 1, 1, 99, 0, 0);
        sys_try("quotactl(bad)", SYS_quotactl, 0, 0, 0, 0, 0);
        sys_try("lookup_dcookie", SYS_lookup_dcookie, 0, 0, 0, 0, 0);
        sys_try("modify_ldt(read)", SYS_modify_ldt, 0, 0, 0, 0, 0);
        sys_try("personality(0x4000000)", SYS_personality, 0x4000000, 0, 0, 0, 0);
        sys_try("fanotify_init(bad)", SYS_fanotify_init, ~0L, 0, 0, 0, 0);
        sys_try("mbind(bad)", SYS_mbind, 0, 0, 99, 0, 0);
        sys_try("move_pages(bad)", SYS_move_pages, 0, 0, 0, 0, 0);
        sys_try("set_mempolicy(bad)", SYS_set_mempolicy, 99, 0, 0, 0, 0);
        sys_try("vhangup", SYS_vhangup, 0, 0, 0, 0, 0);
        sys_try("uselib(NULL)", SYS_uselib, 0, 0, 0, 0, 0);
        sys_try("setdomainname(bad)", SYS_setdomainname, 0, -1, 0, 0, 0);
        sys_try("nfsservctl", 180, 0, 0, 0, 0, 0);
}

/* CVE-2017-5226 / CVE-2019-10063: typing into a terminal, also with the
 * upper 32 bits of the command set (the kernel ignores them). */
static void check_tiocsti(void)
{
        int fds[4] = {0, 1, 2, -1};
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0) {
                char *name = ptsname(m);
                if (name)
                        fds[3] = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        }
        note("pty %s", fds[3] >= 0 ? "opened" : "not available");
        int enotty = 0;
        for (int i = 0; i < 4; i++) {
                if (fds[i] < 0)
                        continue;
                const unsigned long cmds[] = {TIOCSTI, TIOCSTI | (1UL << 32),
                                              TIOCSTI | (0xffUL << 40)};
                for (size_t k = 0; k < 3; k++) {
                        char c = '#';
                        errno = 0;
                        long r = syscall(SYS_ioctl, fds[i], cmds[k], &c);
                        /* gVisor's terminals implement neither ioctl. */
                        enotty += r < 0 && errno == ENOTTY;
                        if (r == 0 || (errno != EPERM && !(O.gvisor && errno == ENOTTY)))
                                reach("TIOCSTI %#lx on fd %d -> %s", cmds[k], fds[i],
                                      r == 0 ? "ok" : strerror(errno));
                }
                char sub = 12; /* TIOCL_GETSHIFTSTATE */
                errno = 0;
                long r = syscall(SYS_ioctl, fds[i], TIOCLINUX | (1UL << 32), &sub);
                enotty += r < 0 && errno == ENOTTY;
                if (r == 0 || (errno != EPERM && !(O.gvisor && errno == ENOTTY)))
                        reach("TIOCLINUX on fd %d -> %s", fds[i], r == 0 ? "ok" : strerror(errno));
        }
        if (O.gvisor)
                note("%d answers ENOTTY", enotty);
        if (fds[3] >= 0)
                close(fds[3]);
        if (m >= 0)
                close(m);
}

/* The i386 ABI through int 0x80: seccomp must kill (a filter written for
 * x86_64 numbers would otherwise be bypassed). gVisor has no i386 ABI for
 * a 64-bit process: every such call must answer ENOSYS. */
static void check_int80(void)
{
        long ret = 20; /* i386 getpid */
#if defined(__x86_64__)
        __asm__ volatile("int $0x80" : "+a"(ret) : : "memory", "r8", "r9", "r10", "r11");
        if (!O.gvisor || ret != -ENOSYS) {
                reach("int 0x80 getpid returned %ld", ret);
                return;
        }
        long flags = CLONE_NEWUSER;
        ret = 310; /* i386 unshare */
        __asm__ volatile("int $0x80" : "+a"(ret) : "b"(flags) : "memory", "r8", "r9", "r10", "r11");
        if (ret != -ENOSYS)
                reach("int 0x80 unshare returned %ld", ret);
        note("int 0x80: ENOSYS (gVisor has no i386 ABI)");
#else
        note("not x86_64 (%ld)", ret);
#endif
}

static void check_x32(void)
{
#if defined(__x86_64__)
        long ret = 39 | 0x40000000L; /* x32 getpid */
        __asm__ volatile("syscall" : "+a"(ret) : : "memory", "rcx", "r11");
        if (ret == -ENOSYS)
                note("x32 getpid: ENOSYS (no x32 ABI)");
        else
                reach("x32 getpid returned %ld", ret);
        /* An x32 number for unshare as well. */
        ret = 272 | 0x40000000L;
        long flags = CLONE_NEWUSER;
        __asm__ volatile("syscall" : "+a"(ret) : "D"(flags) : "memory", "rcx", "r11");
        if (ret != -ENOSYS)
                reach("x32 unshare returned %ld", ret);
#endif
}

static bool file_has(const char *path, const char *needle)
{
        static char buf[1 << 16];
        ssize_t n = slurp(path, buf, sizeof(buf));
        if (n <= 0)
                return false;
        return memmem(buf, (size_t)n, needle, strlen(needle)) != NULL;
}

static void check_env_canary(void)
{
        extern char **environ;
        for (int i = 0; i < O.n_canary; i++) {
                const char *c = O.canary[i];
                for (char **e = environ; *e; e++)
                        if (strstr(*e, c))
                                reach("canary in own environment");
                DIR *d = opendir("/proc");
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        if (!is_pid_name(de->d_name))
                                continue;
                        char p[64];
                        if (snprintf(p, sizeof(p), "/proc/%s/environ", de->d_name) >=
                            (int)sizeof(p))
                                continue;
                        if (file_has(p, c))
                                reach("canary in %s", p);
                }
                if (d)
                        closedir(d);
        }
        note("%d canaries looked for", O.n_canary);
}

/* Host files must not be reachable, directly, through /proc or out of a
 * chroot (the classic chdir("..") escape). */
static void check_host_files(void)
{
        for (int i = 0; i < O.n_host_file; i++) {
                const char *f = O.host_file[i];
                char p[4200];
                if (access(f, F_OK) == 0)
                        reach("%s visible", f);
                snprintf(p, sizeof(p), "/proc/1/root%s", f);
                if (access(p, F_OK) == 0)
                        reach("%s visible", p);
                snprintf(p, sizeof(p), "/proc/self/root%s", f);
                if (access(p, F_OK) == 0)
                        reach("%s visible", p);
        }
        pid_t c = fork();
        if (c == 0) {
                mkdir("/tmp/.probe-chroot", 0700);
                if (chroot("/tmp/.probe-chroot") < 0)
                        _exit(3);
                for (int i = 0; i < 64; i++)
                        if (chdir("..") < 0)
                                break;
                if (chroot(".") < 0)
                        _exit(3);
                for (int i = 0; i < O.n_host_file; i++)
                        if (access(O.host_file[i], F_OK) == 0)
                                _exit(1);
                int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                /* "/" now is wherever ".." led: it must still be inside. */
                if (root >= 0 && access("/workspace", F_OK) == 0)
                        _exit(0);
                _exit(root >= 0 && dir_entries("/") == 0 ? 4 : 2);
        }
        int st = 0;
        waitpid(c, &st, 0);
        rmdir("/tmp/.probe-chroot");
        if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
                reach("a host file is visible after a chroot escape");
        /* gVisor lets ".." climb above a mount namespace's root, into an
         * empty directory of the sentry's own below the sandbox's tree:
         * out of the sandbox's files, into nothing (no host file). */
        else if (O.gvisor && WIFEXITED(st) && WEXITSTATUS(st) == 4)
                note("chroot escape: an empty directory of the sentry's");
        else if (WIFEXITED(st) && (WEXITSTATUS(st) == 2 || WEXITSTATUS(st) == 4))
                reach("chroot escape left the sandbox tree");
        else
                note("chroot escape stays inside (status %d)", st);
}

static uint64_t status_hex(const char *text, const char *key)
{
        const char *p = strstr(text, key);
        return p ? strtoull(p + strlen(key), NULL, 16) : ~0ULL;
}

static long status_int(const char *text, const char *key)
{
        const char *p = strstr(text, key);
        return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static void check_posture(void)
{
        char s[8192];
        if (slurp("/proc/self/status", s, sizeof(s)) <= 0) {
                reach("cannot read /proc/self/status");
                return;
        }
        uint64_t eff = status_hex(s, "CapEff:"), bnd = status_hex(s, "CapBnd:");
        uint64_t inh = status_hex(s, "CapInh:"), amb = status_hex(s, "CapAmb:");
        long nnp = status_int(s, "NoNewPrivs:"), sec = status_int(s, "Seccomp:");
        /* gVisor's status has neither line: it has no ambient capabilities
         * at all (PR_CAP_AMBIENT answers EINVAL), and the flag is read
         * with prctl. The prctl answers are checked in both classes. */
        if (O.gvisor && !strstr(s, "CapAmb:")) {
                amb = 0;
                for (int cap = 0; cap < 64; cap++)
                        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0)
                                amb |= 1ULL << cap;
        }
        if (O.gvisor && !strstr(s, "NoNewPrivs:"))
                nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
                reach("PR_GET_NO_NEW_PRIVS is not 1");
        if (eff & ~DOCKER_CAPS || bnd & ~DOCKER_CAPS)
                reach("capabilities beyond Docker's set: CapEff %llx CapBnd %llx",
                      (unsigned long long)eff, (unsigned long long)bnd);
        if (inh || amb)
                reach("CapInh %llx CapAmb %llx", (unsigned long long)inh, (unsigned long long)amb);
        if (nnp != 1)
                reach("NoNewPrivs %ld", nnp);
        /* No filter inside the gvisor class: the sentry is the boundary,
         * and runs under its own filter on the host (the test reads it
         * there). */
        if (sec != (O.gvisor ? 0 : 2))
                reach("Seccomp %ld", sec);
        struct rlimit core;
        if (getrlimit(RLIMIT_CORE, &core) == 0 && core.rlim_max != 0)
                reach("RLIMIT_CORE hard limit %llu", (unsigned long long)core.rlim_max);
        note("CapEff %llx CapBnd %llx NoNewPrivs %ld Seccomp %ld", (unsigned long long)eff,
             (unsigned long long)bnd, nnp, sec);
}

/* Mounts that show a host filesystem (anything but the sandbox's own). */
static void check_mounts(void)
{
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[4096];
        int n = 0;
        bool agent_mask = false; /* the last mount on /.sbx/agent (gvisor) */
        while (f && fgets(line, sizeof(line), f)) {
                char root[1024], mnt[1024], fstype[64];
                const char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*d %*d %*s %1023s %1023s", root, mnt) != 2 ||
                    sscanf(sep + 3, "%63s", fstype) != 1)
                        continue;
                n++;
                static const char *const ok_fs[] = {"overlay", "proc",   "tmpfs",  "devpts",
                                                    "sysfs",   "mqueue", "cgroup2"};
                bool ok = false;
                for (size_t i = 0; i < sizeof(ok_fs) / sizeof(ok_fs[0]); i++)
                        ok = ok || !strcmp(fstype, ok_fs[i]);
                /* The device nodes are binds of single host nodes. */
                if (!strcmp(fstype, "devtmpfs") && strchr(root + 1, '/') == NULL &&
                    (strncmp(mnt, "/dev/", 5) == 0 ||
                     (strncmp(mnt, "/proc/", 6) == 0 && !strcmp(root, "/null"))))
                        ok = true;
                /* gVisor shows what its gofer serves as 9p: exactly the
                 * spec's host files (the sandbox's tree, its /tmp, the
                 * sandbox-init binary, the socket directory under its
                 * mask, resolv.conf under NAT), nothing else. */
                static const char *const gv_9p[] = {"/", "/tmp", "/.sbx/sandbox-init",
                                                    "/.sbx/agent", "/etc/resolv.conf"};
                for (size_t i = 0; O.gvisor && !strcmp(fstype, "9p") && !strcmp(root, "/") &&
                                   i < sizeof(gv_9p) / sizeof(gv_9p[0]);
                     i++)
                        ok = ok || !strcmp(mnt, gv_9p[i]);
                if (O.gvisor && !strcmp(mnt, "/.sbx/agent"))
                        agent_mask = !strcmp(fstype, "tmpfs") && strstr(line, " ro") != NULL;
                if (!ok)
                        reach("mount of %s (root %s) at %s", fstype, root, mnt);
        }
        if (f)
                fclose(f);
        if (O.gvisor && !agent_mask)
                reach("/.sbx/agent is not under a read-only tmpfs");
        note("%d mounts", n);
}

static void check_connect(void)
{
        for (int i = 0; i < O.n_connect; i++) {
                char host[64];
                const char *colon = strrchr(O.connect[i], ':');
                if (!colon || (size_t)(colon - O.connect[i]) >= sizeof(host))
                        continue;
                memcpy(host, O.connect[i], (size_t)(colon - O.connect[i]));
                host[colon - O.connect[i]] = '\0';
                struct sockaddr_in sa = {.sin_family = AF_INET,
                                         .sin_port = htons((uint16_t)atoi(colon + 1))};
                if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
                        continue;
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
                if (r < 0 && errno == EINPROGRESS) {
                        struct pollfd p = {.fd = fd, .events = POLLOUT};
                        int e = 0;
                        socklen_t el = sizeof(e);
                        r = poll(&p, 1, 2000) == 1 &&
                                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0
                                ? 0
                                : -1;
                        errno = e ? e : ETIMEDOUT;
                }
                if (r == 0)
                        reach("connected to %s", O.connect[i]);
                else
                        note("%s: %s", O.connect[i], strerror(errno));
                close(fd);
        }
}

/* CVE-2020-15257 class: the host's abstract unix sockets (they live in the
 * network namespace). */
static void check_abstract(void)
{
        for (int i = 0; i < O.n_abstract; i++) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                size_t len = strlen(O.abstract[i]);
                if (len + 1 > sizeof(sa.sun_path))
                        continue;
                memcpy(sa.sun_path + 1, O.abstract[i], len);
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd >= 0 &&
                    connect(fd, (struct sockaddr *)&sa,
                            (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) == 0)
                        reach("connected to abstract socket @%s", O.abstract[i]);
                else
                        note("@%s: %s", O.abstract[i], strerror(errno));
                if (fd >= 0)
                        close(fd);
        }
}

/* ---- driver ---- */

struct check {
        const char *name;
        void (*fn)(void);
};

static const struct check checks[] = {
    {"proc_exe_write", check_proc_exe},
    {"fd_leak", check_fd_leak},
    {"agent_hidden", check_agent_hidden},
    {"cwd_leak", check_cwd_leak},
    {"proc_sys_write", check_proc_sys_write},
    {"masked_paths", check_masked},
    {"mknod", check_mknod},
    {"host_devices", check_devices},
    {"cgroupfs_mount", check_cgroupfs},
    {"new_namespaces", check_namespaces},
    {"userns_confined", check_userns},
    {"packet_netlink_sockets", check_sockets},
    {"ptrace_pid1", check_ptrace},
    {"signal_pid1", check_signal_init},
    {"signal_outside", check_signal_outside},
    {"keyring", check_keyring},
    {"bpf_perf_io_uring_userfaultfd", check_kernel_surface},
    {"mount_api", check_mount_api},
    {"other_syscalls", check_misc_syscalls},
    {"tiocsti_tioclinux", check_tiocsti},
    {"i386_int80", check_int80},
    {"x32_syscall", check_x32},
    {"env_canary", check_env_canary},
    {"host_files", check_host_files},
    {"posture", check_posture},
    {"mounts", check_mounts},
    {"connect", check_connect},
    {"abstract_unix", check_abstract},
};

static bool selected(const char *name)
{
        for (int i = 0; i < O.n_only; i++)
                if (!strcmp(O.only[i], name))
                        return true;
        return O.n_only == 0;
}

static void run_check(const struct check *c)
{
        if (!selected(c->name))
                return;
        memset(R, 0, sizeof(*R));
        pid_t pid = fork();
        if (pid == 0) {
                /* connect tries each target for up to 2 s: its budget grows
                 * with the list, so a loaded host cannot make it time out. */
                unsigned budget = CHECK_TIMEOUT_S;
                if (!strcmp(c->name, "connect"))
                        budget += 2 * (unsigned)O.n_connect;
                alarm(budget);
                c->fn();
                _exit(0);
        }
        int st = 0;
        if (pid < 0) {
                snprintf(R->detail, sizeof(R->detail), "fork: %s", strerror(errno));
        } else {
                while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                        ;
                /* Reap anything a check left behind. */
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
        }
        if (pid > 0 && WIFSIGNALED(st)) {
                char d[DETAIL_MAX + 64];
                snprintf(d, sizeof(d), "killed by signal %d%s%s", WTERMSIG(st),
                         R->detail[0] ? "; " : "", R->detail);
                /* A timeout (SIGALRM) is not a block: say so. */
                emit(c->name, R->reached || WTERMSIG(st) == SIGALRM, d);
                return;
        }
        emit(c->name, R->reached, R->detail);
}

/* kill(-1, SIGKILL) from the probe itself (the sender is spared): every
 * other process of the sandbox dies, PID 1 must not. */
static void kill_all(void)
{
        int r = kill(-1, SIGKILL);
        int e = errno;
        usleep(200 * 1000);
        char s = init_state();
        char d[128];
        snprintf(d, sizeof(d), "kill(-1, SIGKILL) = %d (%s); PID 1 state %c", r,
                 r < 0 ? strerror(e) : "ok", s);
        emit("kill_all", s == '?' || s == 'Z' || s == 'X' || s == 'T', d);
}

static void scan_early_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        int own = d ? dirfd(d) : -1;
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (!is_pid_name(de->d_name))
                        continue;
                int fd = atoi(de->d_name);
                if (fd <= 2 || fd == own)
                        continue;
                char p[64], l[256];
                snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
                ssize_t n = readlink(p, l, sizeof(l) - 1);
                l[n > 0 ? n : 0] = '\0';
                size_t len = strlen(early_fds);
                snprintf(early_fds + len, sizeof(early_fds) - len, "%s%d=%s", len ? " " : "", fd,
                         l);
        }
        if (d)
                closedir(d);
}

static int parse_args(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (!strncmp(a, "--canary=", 9) && O.n_canary < MAX_ARGS && a[9])
                        O.canary[O.n_canary++] = a + 9;
                else if (!strncmp(a, "--pid=", 6) && O.n_pid < MAX_ARGS)
                        O.pid[O.n_pid++] = strtol(a + 6, NULL, 10);
                else if (!strncmp(a, "--host-file=", 12) && O.n_host_file < MAX_ARGS)
                        O.host_file[O.n_host_file++] = a + 12;
                else if (!strncmp(a, "--connect=", 10) && O.n_connect < MAX_ARGS)
                        O.connect[O.n_connect++] = a + 10;
                else if (!strncmp(a, "--abstract=", 11) && O.n_abstract < MAX_ARGS && a[11])
                        O.abstract[O.n_abstract++] = a + 11;
                else if (!strncmp(a, "--only=", 7) && O.n_only < MAX_ARGS)
                        O.only[O.n_only++] = a + 7;
                else if (!strcmp(a, "--profile=gvisor"))
                        O.gvisor = true;
                else if (!strcmp(a, "--profile=ns"))
                        O.gvisor = false;
                else if (!strcmp(a, "--no-kill-all"))
                        O.kill_all = false;
                else {
                        fprintf(stderr, "probe: unknown argument %s\n", a);
                        return -1;
                }
        }
        return 0;
}

/* The probe signals PID 1 and kill(-1)s: never let it loose on a host. */
static bool inside_sandbox(void)
{
        char cmd[64];
        ssize_t n = slurp("/proc/1/cmdline", cmd, sizeof(cmd));
        return n > 0 && (!strncmp(cmd, "sandbox-init", 12) || !strcmp(cmd, "sandbox-guard"));
}

/* Whether the kernel answering is gVisor's: its syslog is a made-up boot
 * log ("Starting gVisor..."); the host kernel's is refused by the ns
 * class's filter. The gvisor profile accepts answers that would be an
 * escape on the host kernel: it must never run anywhere else. */
static bool on_gvisor(void)
{
        static char log[8192];
        long n = syscall(SYS_syslog, 3 /* SYSLOG_ACTION_READ_ALL */, log, sizeof(log) - 1);
        if (n <= 0)
                return false;
        log[n] = '\0';
        return strstr(log, "Starting gVisor") != NULL;
}

/* `probe memhog`: touch memory 1 MiB at a time until the OOM killer
 * ends it (the memory-bomb test). */
static int memhog(void)
{
        for (unsigned long mib = 1;; mib++) {
                char *p = malloc(1 << 20);
                if (!p) {
                        printf("malloc failed at %lu MiB\n", mib);
                        return 1;
                }
                memset(p, (int)mib, 1 << 20);
                if (mib % 16 == 0) {
                        printf("%lu MiB\n", mib);
                        fflush(stdout);
                }
        }
}

/* `probe userns CMD...`: what root of a user namespace of its own may do
 * to the sandbox (the network tests try reconfiguring its network). */
static int userns_exec(char **argv)
{
        if (unshare(CLONE_NEWUSER) < 0) {
                fprintf(stderr, "probe: unshare(CLONE_NEWUSER): %s\n", strerror(errno));
                return 4;
        }
        int fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0 0 1", 5) != 5) {
                fprintf(stderr, "probe: uid_map: %s\n", strerror(errno));
                return 4;
        }
        close(fd);
        execv(argv[0], argv);
        fprintf(stderr, "probe: exec %s: %s\n", argv[0], strerror(errno));
        return 4;
}

/* `probe udp SRC DST PORT COUNT`: datagrams from a chosen source. */
static int udp_from(const char *src, const char *dst, const char *port, const char *count)
{
        struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
        to.sin_port = htons((uint16_t)atoi(port));
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
            inet_pton(AF_INET, dst, &to.sin_addr) != 1 ||
            bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0) {
                fprintf(stderr, "probe: udp from %s: %s\n", src, strerror(errno));
                return 4;
        }
        int sent = 0;
        for (int i = 0; i < atoi(count); i++) {
                char msg[64];
                int n = snprintf(msg, sizeof(msg), "probe %s %d\n", src, i);
                sent += sendto(fd, msg, (size_t)n, 0, (struct sockaddr *)&to, sizeof(to)) == n;
                usleep(20 * 1000);
        }
        printf("sent %d\n", sent);
        return 0;
}

int main(int argc, char **argv)
{
        scan_early_fds();
        if (!inside_sandbox()) {
                fprintf(stderr, "probe: PID 1 is not sandbox-init; refusing to run\n");
                return 3;
        }
        if (argc == 2 && !strcmp(argv[1], "memhog"))
                return memhog();
        if (argc >= 3 && !strcmp(argv[1], "userns"))
                return userns_exec(argv + 2);
        if (argc == 6 && !strcmp(argv[1], "udp"))
                return udp_from(argv[2], argv[3], argv[4], argv[5]);
        if (parse_args(argc, argv) < 0)
                return 2;
        if (O.gvisor && !on_gvisor()) {
                fprintf(stderr, "probe: --profile=gvisor and the kernel is not gVisor's\n");
                return 3;
        }
        R = mmap(NULL, sizeof(*R), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (R == MAP_FAILED)
                return 1;
        signal(SIGPIPE, SIG_IGN);
        printf("{\"checks\":[");
        for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
                run_check(&checks[i]);
        if (O.kill_all && selected("kill_all"))
                kill_all();
        printf("\n]}\n");
        return 0;
}
