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
#include "probe.h"

struct opts O = {.kill_all = true};
struct result *R;              /* the running check's result (shared page) */
char early_fds[512];           /* fds above 2 found at start-up */
static bool first_item = true; /* JSON output state */

/* ---- reporting ---- */

void note(const char *fmt, ...)
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

void reach(const char *fmt, ...)
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

void emit(const char *name, bool reached, const char *detail)
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
bool blocked_errno(int e)
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
void sys_try(const char *what, long nr, long a, long b, long c, long d, long e)
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

bool is_pid_name(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* Read up to len-1 bytes of a file; bytes read or -errno. */
ssize_t slurp(const char *path, char *out, size_t len)
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
bool outside_root(int dirfd)
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
