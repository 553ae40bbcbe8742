/* SPDX-License-Identifier: MIT */
/* The seccomp policy of every sandbox: Docker's default allowlist
 * (moby/profiles seccomp/default_linux.go) with the capability-gated parts
 * matching the capabilities we keep, tightened as the research notes
 * advise: no ptrace / process_vm_*, no io_uring, no new mount API, no
 * namespace creation, clone3 -> ENOSYS, no TIOCSTI / TIOCLINUX, no
 * AF_ALG / AF_VSOCK / AF_PACKET sockets, netlink only for NETLINK_ROUTE
 * and NETLINK_SOCK_DIAG; any other architecture (i386 via
 * int 0x80, x32) kills the process.
 *
 * It is compiled once in the daemon (libseccomp) and loaded as raw BPF by
 * each sandbox's PID 1 right before it execs sandbox-init. */
#include "seccomp.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/netlink.h>

/* clang-format off */
static const char *const allowed[] = {
        "accept", "accept4", "access", "adjtimex", "alarm", "arch_prctl", "bind", "brk",
        "cachestat", "capget", "capset", "chdir", "chmod", "chown", "chroot", "clock_adjtime",
        "clock_getres", "clock_gettime", "clock_nanosleep", "close", "close_range", "connect",
        "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1",
        "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait", "eventfd", "eventfd2",
        "execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2", "fadvise64",
        "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown",
        "fchownat", "fcntl", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork",
        "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex",
        "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "futimesat", "getcpu",
        "getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid", "getgroups",
        "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
        "getrandom", "getresgid", "getresuid", "getrlimit", "get_robust_list", "getrusage",
        "getsid", "getsockname", "getsockopt", "get_thread_area", "gettid", "gettimeofday",
        "getuid", "getxattr", "inotify_add_watch", "inotify_init", "inotify_init1",
        "inotify_rm_watch", "io_cancel", "ioctl", "io_destroy", "io_getevents",
        "io_pgetevents", "ioprio_get", "ioprio_set", "io_setup", "io_submit", "kill",
        "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown",
        "lgetxattr", "link", "linkat", "listen", "listxattr", "llistxattr", "lremovexattr",
        "lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack", "membarrier",
        "memfd_create", "mincore", "mkdir", "mkdirat", "mknod", "mknodat",
        "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify",
        "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl",
        "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap",
        "name_to_handle_at", "nanosleep", "newfstatat", "open", "openat", "openat2", "pause",
        "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free",
        "pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv", "preadv2", "prlimit64",
        "process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2", "read", "readahead",
        "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
        "remap_file_pages", "removexattr", "rename", "renameat", "renameat2", "restart_syscall",
        "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
        "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
        "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_get_priority_max",
        "sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval",
        "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
        "sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop",
        "sendfile", "sendmmsg", "sendmsg", "sendto", "setfsgid", "setfsuid", "setgid",
        "setgroups", "setitimer", "setpgid", "setpriority", "setregid", "setresgid",
        "setresuid", "setreuid", "setrlimit", "set_robust_list", "setsid", "setsockopt",
        "set_thread_area", "set_tid_address", "setuid", "setxattr", "shmat", "shmctl", "shmdt",
        "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "socket", "socketpair",
        "splice", "stat", "statfs", "statx", "symlink", "symlinkat", "sync", "sync_file_range",
        "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create", "timer_delete",
        "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create",
        "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask", "uname",
        "unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4",
        "waitid", "write", "writev",
};
/* clang-format on */

/* x86_64 numbers of syscalls newer than some libseccomp releases. */
static const struct {
        const char *name;
        int nr;
} late_syscalls[] = {
#ifdef __x86_64__
    {"cachestat", 451},  {"fchmodat2", 452},  {"map_shadow_stack", 453},
    {"futex_wake", 454}, {"futex_wait", 455}, {"futex_requeue", 456},
    {"mseal", 462},
#endif
    {NULL, 0},
};

static int syscall_nr(const char *name)
{
        int nr = seccomp_syscall_resolve_name(name);
        if (nr != __NR_SCMP_ERROR)
                return nr;
        for (size_t i = 0; late_syscalls[i].name; i++)
                if (!strcmp(late_syscalls[i].name, name))
                        return late_syscalls[i].nr;
        return -1;
}

/* Namespace flags: a sandbox process may clone, never into new namespaces
 * (nested user namespaces open the kernel's largest attack surface:
 * nf_tables CVE-2022-1015 / CVE-2024-1086, overlayfs CVE-2023-0386). */
#define CLONE_NS_MASK                                                                              \
        (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
         CLONE_NEWCGROUP)

static int build_allow(scmp_filter_ctx ctx)
{
        int r;
        for (size_t i = 0; i < ARRAY_SIZE(allowed); i++) {
                int nr = syscall_nr(allowed[i]);
                if (nr < 0)
                        continue; /* unknown on this architecture */
                if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0)
                        return r;
        }
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_MASK, 0))) < 0)
                return r;
        /* seccomp cannot read clone3's struct: ENOSYS makes libc fall back
         * to clone, which is filtered. */
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
                return r;
        static const unsigned long personas[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
        for (size_t i = 0; i < ARRAY_SIZE(personas); i++)
                if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                                          SCMP_A0(SCMP_CMP_EQ, personas[i], 0))) < 0)
                        return r;
        return 0;
}

/* Netlink: only NETLINK_ROUTE (ip, getifaddrs) and NETLINK_SOCK_DIAG (ss).
 * The others reach subsystems a sandbox has no use for and that keep
 * producing kernel bugs: nf_tables (NETLINK_NETFILTER, CVE-2022-1015,
 * CVE-2023-32233, CVE-2024-1086), xfrm (NETLINK_XFRM, CVE-2022-3028),
 * generic netlink families, audit, connector, uevents. */
static int build_deny_netlink(scmp_filter_ctx ctx)
{
        const scmp_datum_t nl = AF_NETLINK;
        /* Protocol > NETLINK_SOCK_DIAG (4) as a 64-bit value: any high bit
         * also lands here, so nothing slips through by truncation. */
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, nl),
                                 SCMP_A2(SCMP_CMP_GT, NETLINK_SOCK_DIAG, 0));
        if (r < 0)
                return r;
        /* 1 (unused), 2 (NETLINK_USERSOCK), 3 (NETLINK_FIREWALL). */
        for (scmp_datum_t proto = 1; proto <= 3; proto++)
                if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
                                          SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, nl),
                                          SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffUL, proto))) < 0)
                        return r;
        return 0;
}

static int build_deny(scmp_filter_ctx ctx)
{
        int r;
        /* Typing into the controlling terminal's input (CVE-2017-5226,
         * CVE-2019-10063): the kernel reads cmd as 32 bits, so compare
         * only those, or cmd | 1 << 32 would slip through. */
        static const unsigned long ioctls[] = {TIOCSTI, TIOCLINUX};
        for (size_t i = 0; i < ARRAY_SIZE(ioctls); i++)
                if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                          SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, ioctls[i]))) <
                    0)
                        return r;
        /* AF_PACKET: CVE-2020-14386 class, reachable with CAP_NET_RAW of the
         * sandbox's own net ns; AF_ALG and AF_VSOCK: rarely needed, often
         * buggy. The family is an int: compare only the low 32 bits, or a
         * family with a high bit set would pass a 64-bit comparison while
         * the kernel, truncating it, still creates the socket. */
        static const int families[] = {AF_PACKET, AF_ALG, AF_VSOCK};
        for (size_t i = 0; i < ARRAY_SIZE(families); i++)
                if ((r = seccomp_rule_add(
                         ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                         SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, (scmp_datum_t)families[i]))) < 0)
                        return r;
        return build_deny_netlink(ctx);
}

/* Export a libseccomp filter to raw BPF in memory. */
static int export_bpf(scmp_filter_ctx ctx, struct sock_fprog *ret)
{
        _cleanup_close_ int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
            st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -E2BIG;
        struct sock_filter *f = malloc((size_t)st.st_size);
        if (!f)
                return -ENOMEM;
        if ((r = (int)pread(fd, f, (size_t)st.st_size, 0)) != st.st_size) {
                free(f);
                return r < 0 ? -errno : -EIO;
        }
        ret->filter = f;
        ret->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
        return 0;
}

static int build_one(uint32_t def, bool allowlist, struct sock_fprog *ret)
{
        scmp_filter_ctx ctx = seccomp_init(def);
        if (!ctx)
                return -ENOMEM;
        /* Another ABI on this arch (i386 via int 0x80, x32) bypasses a
         * filter written for x86_64 numbers: kill the process. */
        int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r >= 0)
                r = allowlist ? build_allow(ctx) : build_deny(ctx);
        if (r >= 0)
                r = export_bpf(ctx, ret);
        seccomp_release(ctx);
        return r;
}

int rt_seccomp_build(struct rt_seccomp *ret, struct sbx_error *err)
{
        memset(ret, 0, sizeof(*ret));
        int r = build_one(SCMP_ACT_ERRNO(EPERM), true, &ret->allow);
        if (r >= 0)
                r = build_one(SCMP_ACT_ALLOW, false, &ret->deny);
        if (r < 0) {
                rt_seccomp_free(ret);
                return sbx_error_set(err, -r, "build seccomp filter");
        }
        return 0;
}

void rt_seccomp_free(struct rt_seccomp *s)
{
        free(s->allow.filter);
        free(s->deny.filter);
        memset(s, 0, sizeof(*s));
}

/* No SECCOMP_FILTER_FLAG_SPEC_ALLOW: the speculative store bypass
 * mitigation stays on, tenants are hostile. */
int rt_seccomp_load(const struct rt_seccomp *s)
{
        const struct sock_fprog *progs[] = {&s->deny, &s->allow};
        for (size_t i = 0; i < ARRAY_SIZE(progs); i++) {
                if (!progs[i]->filter)
                        return -EINVAL;
                if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, progs[i]) < 0)
                        return -errno;
        }
        return 0;
}
