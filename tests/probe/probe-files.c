/* SPDX-License-Identifier: MIT */
/* The escape probe's checks of files, /proc and devices: the runtime's
 * binary, leaked fds and cwd, PID 1 and the agent's socket, kernel knobs,
 * masked paths, device nodes, cgroupfs. */
#include "probe.h"

/* ---- checks ---- */

/* CVE-2019-5736: overwrite the runtime's binary through /proc/<pid>/exe. */
void check_proc_exe(void)
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
void check_fd_leak(void)
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

void scan_for_init(const char *proc)
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

void check_agent_hidden(void)
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

void check_cwd_leak(void)
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
void check_proc_sys_write(void)
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

void check_masked(void)
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

void check_mknod(void)
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

int dir_entries(const char *path)
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

void check_devices(void)
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
void check_cgroupfs(void)
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
