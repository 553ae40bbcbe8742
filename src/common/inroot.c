/* SPDX-License-Identifier: MIT */
#include "inroot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#endif

void inroot_become(uint32_t uid)
{
        setfsgid(uid);
        setfsuid(uid);
}

void inroot_unbecome(void)
{
        setfsuid(0);
        setfsgid(0);
}

int inroot_normalize(const char *path, char *out, size_t out_len)
{
        static const char base[] = "/workspace";
        if (!path || !*path || out_len < 2)
                return -EINVAL;
        size_t o = 0;
        if (path[0] != '/') {
                memcpy(out, base, sizeof(base) - 1);
                o = sizeof(base) - 1;
        }
        const char *p = path;
        while (*p) {
                while (*p == '/')
                        p++;
                const char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);
                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                if (n && !(n == 1 && p[0] == '.')) {
                        if (o + 1 + n + 1 > out_len || o + 1 + n >= INROOT_PATH_MAX)
                                return -ENAMETOOLONG;
                        out[o++] = '/';
                        memcpy(out + o, p, n);
                        o += n;
                }
                p = end;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = '\0';
        return 0;
}

int inroot_open(int rootfd, const char *path, uint64_t flags, int mode)
{
        struct open_how how = {
            /* openat2 refuses flags O_PATH ignores (O_NOCTTY among them). */
            .flags = flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY),
            .mode = (uint64_t)mode,
            /* RESOLVE_IN_ROOT: "/" and ".." stop at the sandbox's root, and
             * absolute symlinks resolve against it. NO_MAGICLINKS: no
             * /proc/<pid>/root or /proc/self/fd jumps (CVE-2019-5736 class). */
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

/* A name just created in dir: entered without following anything. */
static int open_child_dir(int dirfd, const char *name)
{
        struct open_how how = {
            .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
            .resolve =
                RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        return fd < 0 ? -errno : fd;
}

int inroot_check_fs(int fd, bool want_dir)
{
        struct stat st;
        struct statfs sf;
        if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0)
                return -errno;
        /* Never the sandbox's /proc (whose sysctls are the host's), /sys or
         * /dev nodes. */
        if (sf.f_type != OVERLAYFS_SUPER_MAGIC && sf.f_type != TMPFS_MAGIC)
                return -EPERM;
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
                return want_dir ? -ENOTDIR : -EISDIR;
        return 0;
}

/* Open the prefix path[0..len) (len 0: "/") as a directory. */
static int open_prefix(int rootfd, char *path, size_t len)
{
        if (len == 0)
                return inroot_open(rootfd, "/", O_RDONLY | O_DIRECTORY, 0);
        char saved = path[len];
        path[len] = '\0';
        int fd = inroot_open(rootfd, path, O_RDONLY | O_DIRECTORY, 0);
        path[len] = saved;
        return fd;
}

int inroot_mkdirs(int rootfd, const char *dir)
{
        char path[INROOT_PATH_MAX];
        size_t len = strlen(dir);
        if (len == 0 || len >= sizeof(path) || dir[0] != '/')
                return -EINVAL;
        memcpy(path, dir, len + 1);
        int fd = open_prefix(rootfd, path, len);
        if (fd != -ENOENT)
                return fd;
        /* The longest prefix that exists, from the end: a walk in the kernel
         * stops at the first missing component, so each try is cheap. */
        size_t have = len;
        do {
                char *slash = memrchr(path, '/', have);
                have = slash ? (size_t)(slash - path) : 0;
                fd = open_prefix(rootfd, path, have);
        } while (fd == -ENOENT && have > 0);
        if (fd < 0)
                return fd;
        int r = inroot_check_fs(fd, true);
        /* Then create each missing component in turn, without recursion. */
        while (r == 0 && have < len) {
                size_t start = have + 1;
                char *slash = memchr(path + start, '/', len - start);
                size_t next = slash ? (size_t)(slash - path) : len;
                char name[NAME_MAX + 1];
                size_t n = next - start;
                if (n == 0 || n > NAME_MAX) {
                        r = -EINVAL;
                        break;
                }
                memcpy(name, path + start, n);
                name[n] = '\0';
                int nfd;
                if (!strcmp(name, "..")) {
                        nfd = open_prefix(rootfd, path, next);
                } else if (mkdirat(fd, name, 0755) < 0 && errno != EEXIST) {
                        nfd = -errno;
                } else {
                        nfd = open_child_dir(fd, name);
                }
                close(fd);
                fd = nfd;
                if (fd < 0)
                        return fd;
                have = next;
        }
        if (r < 0) {
                close(fd);
                return r;
        }
        return fd;
}

int inroot_split(const char *path, char *dir, size_t dir_len, char *base, size_t base_len)
{
        const char *slash = strrchr(path, '/');
        if (!slash || !slash[1])
                return -EINVAL;
        size_t bl = strlen(slash + 1);
        size_t dl = (size_t)(slash - path);
        if (bl >= base_len || (dl ? dl : 1) >= dir_len)
                return -ENAMETOOLONG;
        memcpy(base, slash + 1, bl + 1);
        if (dl == 0) {
                dir[0] = '/';
                dir[1] = '\0';
        } else {
                memcpy(dir, path, dl);
                dir[dl] = '\0';
        }
        return 0;
}
