/* SPDX-License-Identifier: MIT */
/* The escape probe's checks of the kernel's reach: namespaces, user
 * namespaces, sockets, ptrace and signals, the syscall surface, foreign
 * ABIs, the environment, host files, posture, mounts and the network. */
#include "probe.h"

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
void check_namespaces(void)
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
void check_userns(void)
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

void check_sockets(void)
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
void check_ptrace(void)
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

char init_state(void)
{
        char buf[512];
        if (slurp("/proc/1/stat", buf, sizeof(buf)) <= 0)
                return '?';
        char *p = strrchr(buf, ')');
        return p && p[1] == ' ' ? p[2] : '?';
}

void check_signal_init(void)
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
void check_signal_outside(void)
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

void check_keyring(void)
{
        sys_try("keyctl(GET_KEYRING_ID)", SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                KEY_SPEC_SESSION_KEYRING, 0, 0, 0);
        sys_try("add_key(NULL)", SYS_add_key, 0, 0, 0, 0, 0);
        sys_try("request_key(NULL)", SYS_request_key, 0, 0, 0, 0, 0);
}

void check_kernel_surface(void)
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

void check_mount_api(void)
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
void check_misc_syscalls(void)
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
void check_tiocsti(void)
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
void check_int80(void)
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

void check_x32(void)
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

void check_env_canary(void)
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
void check_host_files(void)
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

void check_posture(void)
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
void check_mounts(void)
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

void check_connect(void)
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
void check_abstract(void)
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
