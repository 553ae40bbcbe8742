/* SPDX-License-Identifier: MIT */
/* The escape probe's parts (probe.c, probe-files.c, probe-kernel.c): the
 * options, the result of the running check, reporting, and every check. */
#pragma once

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

extern struct opts O;
extern struct result *R;
extern char early_fds[512]; /* fds above 2 found at start-up */

/* Where the gvisor class binds the agent's socket directory. */
#define AGENT_SOCK "/.sbx/agent/agent.sock"

void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void reach(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void emit(const char *name, bool reached, const char *detail);
bool blocked_errno(int e);
void sys_try(const char *what, long nr, long a, long b, long c, long d, long e);
bool is_pid_name(const char *s);
ssize_t slurp(const char *path, char *out, size_t len);
bool outside_root(int dirfd);
void check_proc_exe(void);
void check_fd_leak(void);
void scan_for_init(const char *proc);
void check_agent_hidden(void);
void check_cwd_leak(void);
void check_proc_sys_write(void);
void check_masked(void);
void check_mknod(void);
int dir_entries(const char *path);
void check_devices(void);
void check_cgroupfs(void);
void check_namespaces(void);
void check_userns(void);
void check_sockets(void);
void check_ptrace(void);
char init_state(void);
void check_signal_init(void);
void check_signal_outside(void);
void check_keyring(void);
void check_kernel_surface(void);
void check_mount_api(void);
void check_misc_syscalls(void);
void check_tiocsti(void);
void check_int80(void);
void check_x32(void);
void check_env_canary(void);
void check_host_files(void);
void check_posture(void);
void check_mounts(void);
void check_connect(void);
void check_abstract(void);
