/* SPDX-License-Identifier: MIT */
/* Paths of a layer's entries, resolved beneath the tree being built.
 *
 * A tar names its entries by strings the archive's author chose: an
 * absolute path, a ".." component or a symlink planted by an earlier
 * entry (`evil -> /etc`, then `evil/passwd`) would write outside the
 * image (the tar-slip class: CVE-2018-15664 and docker cp, CVE-2019-14271,
 * containerd's CVE-2021-32760). Strings are cleaned first, then every
 * parent is resolved by the kernel with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS): a symlink is followed only while it stays
 * inside the tree, and the last component is never followed. */
#include "oci.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

int oci_clean_path(const char *in, char *out, size_t len)
{
        if (!in || in[0] == '/')
                return -EINVAL;
        size_t n = 0;
        while (*in) {
                size_t c = strcspn(in, "/");
                bool dot = c == 1 && in[0] == '.';
                if (c == 2 && in[0] == '.' && in[1] == '.')
                        return -EINVAL;
                if (c && !dot) {
                        if (n + c + 2 > len)
                                return -ENAMETOOLONG;
                        if (n)
                                out[n++] = '/';
                        memcpy(out + n, in, c);
                        n += c;
                }
                in += c;
                in += *in == '/';
        }
        if (!len)
                return -ENAMETOOLONG;
        out[n] = '\0';
        return 0;
}

void oci_split_path(char *path, const char **ret_dir, const char **ret_base)
{
        char *slash = strrchr(path, '/');
        if (!slash) {
                *ret_dir = "";
                *ret_base = path;
                return;
        }
        *slash = '\0';
        *ret_dir = path;
        *ret_base = slash + 1;
}

int oci_open_beneath(int rootfd, const char *path, int flags, int *ret_fd)
{
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));
        if (fd < 0)
                return -errno;
        *ret_fd = (int)fd;
        return 0;
}

/* depth: components left to make, so a path of 4096 slashes cannot run
 * the stack out. */
static int open_dir_at(int rootfd, char *path, bool create, int depth, int *ret_fd)
{
        int r = oci_open_beneath(rootfd, path, O_PATH | O_DIRECTORY, ret_fd);
        if (r != -ENOENT || !create || !*path)
                return r;
        if (depth > 512)
                return -ELOOP;
        const char *dir, *base;
        oci_split_path(path, &dir, &base);
        _cleanup_close_ int pfd = -1;
        r = open_dir_at(rootfd, (char *)dir, true, depth + 1, &pfd);
        if (base != path)
                path[strlen(path)] = '/'; /* undo the split */
        if (r < 0)
                return r;
        if (mkdirat(pfd, base, 0755) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(pfd, base, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

int oci_open_dir(int rootfd, const char *path, bool create, int *ret_fd)
{
        char copy[PATH_MAX];
        if (path_printf(copy, sizeof(copy), "%s", path) < 0)
                return -ENAMETOOLONG;
        return open_dir_at(rootfd, copy, create, 0, ret_fd);
}
