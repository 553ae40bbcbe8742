/* SPDX-License-Identifier: MIT */
#include "files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../agent/client.h"
#include "../common/log.h"

#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#endif

#define MAX_PATH_LEN 4096
/* A listing is built in memory: a sandbox must not make the daemon hold
 * an unbounded one. */
#define MAX_LIST_ENTRIES 100000
#define MAX_DEPTH 256

struct files_upload {
        struct sandbox *sb;
        uint32_t uid;
        int dirfd;                   /* the target's parent directory */
        int fd;                      /* the temporary file */
        char tmp[64];
        char base[NAME_MAX + 1];
        uint64_t written, max;
        int error;                   /* first -errno while writing */
};

/* Act as the sandbox's root for file operations on this thread only:
 * fsuid/fsgid are per thread, and a non-zero fsuid drops the fs
 * capabilities (DAC override, fowner, ...) from the effective set. */
static void become(uint32_t uid)
{
        setfsgid(uid);
        setfsuid(uid);
}

static void unbecome(void)
{
        setfsuid(0);
        setfsgid(0);
}

static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
        return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

/* Resolve path inside the sandbox. Relative paths are against /workspace. */
static int open_in(int rootfd, const char *path, uint64_t flags, int mode)
{
        char full[MAX_PATH_LEN + 16];
        if (path[0] == '/')
                snprintf(full, sizeof(full), "%s", path);
        else
                snprintf(full, sizeof(full), "/workspace/%s", path);
        struct open_how how = {
                /* openat2 refuses flags O_PATH ignores (O_NOCTTY among them). */
                .flags = flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY),
                .mode = (uint64_t)mode,
                /* RESOLVE_IN_ROOT: "/" and ".." stop at the sandbox's root, and
                 * absolute symlinks resolve against it. NO_MAGICLINKS: no
                 * /proc/<pid>/root or /proc/self/fd jumps (CVE-2019-5736 class). */
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int)sys_openat2(rootfd, full, &how);
        return fd < 0 ? -errno : fd;
}

/* Only the sandbox's own files: its overlay and its tmpfs mounts. Never
 * its /proc (whose sysctls are the host's), /sys or /dev nodes. */
static int check_fs(int fd, bool want_dir)
{
        struct stat st;
        struct statfs sf;
        if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0)
                return -errno;
        if (sf.f_type != OVERLAYFS_SUPER_MAGIC && sf.f_type != TMPFS_MAGIC)
                return -EPERM;
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
                return want_dir ? -ENOTDIR : -EISDIR;
        return 0;
}

/* A handle of the sandbox's root from its agent; resp set on failure. */
static int get_root(struct sandbox *sb, int *ret, struct api_resp *resp)
{
        struct sbx_error err = { 0 };
        int r = agent_root(mgr_sandbox_dir(sb), ret, &err);
        if (r < 0)
                api_error(resp, 502, "bring_up_failed", "sandbox agent: %s", err.msg);
        return r;
}

static void fs_error(struct api_resp *resp, int r, const char *what, const char *path)
{
        switch (-r) {
        case ENOSPC:
        case EDQUOT:
                api_error(resp, 402, "cap_reached", "%s %s: the sandbox's disk is full", what, path);
                break;
        case E2BIG:
        case EFBIG:
                api_error(resp, 413, "too_large", "%s %s: over the file size cap", what, path);
                break;
        case ENOENT:
                api_error(resp, 404, "not_found", "%s %s: no such file or directory", what, path);
                break;
        default:
                api_error(resp, 400, "invalid_argument", "%s %s: %s", what, path, strerror(-r));
        }
}

static const char *path_arg(struct api_req *req, struct api_resp *resp, bool allow_default)
{
        const char *p = api_query(req, "path");
        if (!p && allow_default)
                return ".";
        if (!p || !*p || strlen(p) >= MAX_PATH_LEN) {
                api_error(resp, 400, "invalid_argument", "path: required, under %d bytes",
                          MAX_PATH_LEN);
                return NULL;
        }
        return p;
}

static void handle_read(struct api *a, struct api_req *req, struct sandbox *sb,
                        struct api_resp *resp)
{
        const char *path = path_arg(req, resp, false);
        if (!path)
                return;
        _cleanup_close_ int root = -1;
        int r = get_root(sb, &root, resp);
        if (r < 0)
                return;
        become(mgr_sandbox_uid(a->mgr, sb));
        /* O_PATH first: a FIFO or device is refused before it is opened. */
        _cleanup_close_ int p = open_in(root, path, O_PATH, 0);
        int fd = -1;
        if (p >= 0 && (r = check_fs(p, false)) == 0) {
                char proc[64];
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p);
                fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        r = -errno;
        } else if (p < 0) {
                r = p;
        }
        unbecome();
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                fd = -1;
        }
        if (fd < 0) {
                /* Anything unreadable is a 404, as the client documents. */
                api_error(resp, 404, "not_found", "cannot read %s: %s", path, strerror(-r));
                return;
        }
        resp->status = 200;
        resp->content_type = "application/octet-stream";
        resp->body.len = 0;
        resp->body_fd = fd;
        resp->body_fd_len = (uint64_t)st.st_size;
}

static void handle_list(struct api *a, struct api_req *req, struct sandbox *sb,
                        struct api_resp *resp)
{
        const char *path = path_arg(req, resp, true);
        if (!path)
                return;
        _cleanup_close_ int root = -1;
        int r = get_root(sb, &root, resp);
        if (r < 0)
                return;
        become(mgr_sandbox_uid(a->mgr, sb));
        int fd = open_in(root, path, O_RDONLY | O_DIRECTORY, 0);
        if (fd >= 0 && (r = check_fs(fd, true)) < 0) {
                close(fd);
                fd = r;
        }
        json_t *arr = json_array();
        bool too_many = false;
        if (fd >= 0) {
                DIR *d = fdopendir(fd);
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                                continue;
                        if (json_array_size(arr) >= MAX_LIST_ENTRIES) {
                                too_many = true;
                                break;
                        }
                        bool isdir = de->d_type == DT_DIR;
                        if (de->d_type == DT_UNKNOWN) {
                                struct stat st;
                                isdir = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                                        S_ISDIR(st.st_mode);
                        }
                        size_t n = 0;
                        char *name = utf8_sanitize((const uint8_t *)de->d_name, strlen(de->d_name), &n);
                        json_array_append_new(arr, json_pack("{s:s%,s:b}", "name", name ? name : "",
                                                             name ? n : 0, "isDirectory", isdir));
                        free(name);
                }
                if (d)
                        closedir(d);
                else
                        close(fd);
        }
        unbecome();
        if (fd < 0) {
                json_decref(arr);
                api_error(resp, 404, "not_found", "cannot list %s: %s", path, strerror(-fd));
                return;
        }
        if (too_many) {
                json_decref(arr);
                api_error(resp, 413, "too_large", "%s has more than %d entries", path,
                          MAX_LIST_ENTRIES);
                return;
        }
        api_json(resp, 200, json_pack("{s:o}", "entries", arr));
}

void files_handle(struct api *a, struct api_req *req, struct sandbox *sb, const char *const *seg,
                  size_t n, struct api_resp *resp)
{
        if (n == 2 && !strcmp(seg[1], "list") && !strcmp(req->method, "GET"))
                handle_list(a, req, sb, resp);
        else if (n == 1 && !strcmp(req->method, "GET"))
                handle_read(a, req, sb, resp);
        else
                api_error(resp, 405, "invalid_argument", "method %s not allowed here", req->method);
}

/* Open `dir` (absolute, inside the sandbox), creating missing directories
 * as the sandbox's root. Each level is resolved again from the root, so a
 * symlink planted meanwhile still cannot lead out. */
static int mkdirs_in(int root, const char *dir, int depth)
{
        int fd = open_in(root, dir, O_RDONLY | O_DIRECTORY, 0);
        if (fd != -ENOENT)
                return fd;
        if (depth > MAX_DEPTH)
                return -ELOOP;
        char parent[MAX_PATH_LEN + 16];
        snprintf(parent, sizeof(parent), "%s", dir);
        char *slash = strrchr(parent, '/');
        if (!slash || !slash[1])
                return -ENOENT;
        char name[NAME_MAX + 1];
        if (strlen(slash + 1) > NAME_MAX)
                return -ENAMETOOLONG;
        strcpy(name, slash + 1);
        if (slash == parent)
                slash[1] = '\0';
        else
                *slash = '\0';
        int pfd = mkdirs_in(root, parent, depth + 1);
        if (pfd < 0)
                return pfd;
        int r = check_fs(pfd, true);
        if (r == 0 && mkdirat(pfd, name, 0755) < 0 && errno != EEXIST)
                r = -errno;
        close(pfd);
        if (r < 0)
                return r;
        return open_in(root, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Split a path into its directory (absolute, in the sandbox) and name. */
static int split(const char *path, char *dir, size_t dl, char *base)
{
        char full[MAX_PATH_LEN + 16];
        if (path[0] == '/')
                snprintf(full, sizeof(full), "%s", path);
        else
                snprintf(full, sizeof(full), "/workspace/%s", path);
        size_t n = strlen(full);
        while (n > 1 && full[n - 1] == '/')
                full[--n] = '\0';
        char *slash = strrchr(full, '/');
        const char *name = slash + 1;
        if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > NAME_MAX)
                return -EINVAL;
        strcpy(base, name);
        if (slash == full)
                snprintf(dir, dl, "/");
        else {
                *slash = '\0';
                snprintf(dir, dl, "%s", full);
        }
        return 0;
}

static int create_tmp(struct files_upload *u)
{
        for (int tries = 0; tries < 16; tries++) {
                uint8_t rnd[6];
                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                        return -EIO;
                snprintf(u->tmp, sizeof(u->tmp), ".sandboxd-upload-%02x%02x%02x%02x%02x%02x", rnd[0],
                         rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
                int fd = openat(u->dirfd, u->tmp,
                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

static bool is_upload_path(struct api_req *req, char *name, size_t nl)
{
        if (strcmp(req->method, "PUT"))
                return false;
        const char *p = req->path;
        const char *pre = "/v1/sandboxes/";
        if (strncmp(p, pre, strlen(pre)))
                return false;
        p += strlen(pre);
        const char *slash = strchr(p, '/');
        if (!slash || strcmp(slash, "/files") || (size_t)(slash - p) >= nl)
                return false;
        memcpy(name, p, (size_t)(slash - p));
        name[slash - p] = '\0';
        return true;
}

bool files_upload_begin(struct api *a, struct api_req *req, struct api_resp *resp)
{
        char name[SBX_NAME_MAX + 2];
        if (!is_upload_path(req, name, sizeof(name)))
                return false;
        if (!name_is_valid(name)) {
                api_error(resp, 400, "invalid_argument", "bad sandbox name");
                return true;
        }
        const char *cl = api_header(req, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)a->cfg.max_file_bytes) {
                api_error(resp, 413, "too_large", "file over %lld bytes",
                          (long long)a->cfg.max_file_bytes);
                return true;
        }
        const char *path = path_arg(req, resp, false);
        if (!path)
                return true;
        struct sandbox *sb = api_enter_data_plane(a, req, name, resp);
        if (!sb)
                return true;
        struct files_upload *u = calloc(1, sizeof(*u));
        char dir[MAX_PATH_LEN + 16];
        int r = u ? split(path, dir, sizeof(dir), u->base) : -ENOMEM;
        if (r < 0) {
                free(u);
                mgr_leave(a->mgr, sb);
                api_error(resp, 400, "invalid_argument", "path: not a file path");
                return true;
        }
        u->sb = sb;
        u->uid = mgr_sandbox_uid(a->mgr, sb);
        u->max = (uint64_t)a->cfg.max_file_bytes;
        u->dirfd = u->fd = -1;
        _cleanup_close_ int root = -1;
        if (get_root(sb, &root, resp) < 0) {
                files_upload_abort(a, u);
                return true;
        }
        become(u->uid);
        u->dirfd = mkdirs_in(root, dir, 0);
        if (u->dirfd >= 0 && (r = check_fs(u->dirfd, true)) < 0) {
                close(u->dirfd);
                u->dirfd = r;
        }
        if (u->dirfd >= 0) {
                /* The target, if it exists, must be a regular file. */
                struct stat st;
                if (fstatat(u->dirfd, u->base, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                        r = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
                else
                        r = u->fd = create_tmp(u);
        } else {
                r = u->dirfd;
        }
        unbecome();
        if (r < 0) {
                u->tmp[0] = '\0';
                files_upload_abort(a, u);
                fs_error(resp, r, "cannot write", path);
                return true;
        }
        req->upload = u;
        return true;
}

void files_upload_write(struct files_upload *u, const void *data, size_t len)
{
        if (u->error)
                return;
        if (u->written + len > u->max) {
                u->error = -EFBIG;
                return;
        }
        int r = write_all(u->fd, data, len);
        if (r < 0)
                u->error = r;
        else
                u->written += len;
}

void files_upload_finish(struct api *a, struct files_upload *u, struct api_resp *resp)
{
        int r = u->error;
        if (r == 0 && close(u->fd) < 0)
                r = -errno;
        else if (r != 0)
                close(u->fd);
        u->fd = -1;
        if (r == 0) {
                become(u->uid);
                /* rename(2) within one directory: readers see the old file or
                 * the new one, never a part. A symlink at the target is
                 * replaced, not followed. */
                if (renameat(u->dirfd, u->tmp, u->dirfd, u->base) < 0)
                        r = -errno;
                else
                        u->tmp[0] = '\0';
                unbecome();
        }
        if (r < 0) {
                fs_error(resp, r, "cannot write", u->base);
        } else {
                resp->status = 204;
                resp->content_type = NULL;
                resp->body.len = 0;
        }
        files_upload_abort(a, u);
}

void files_upload_abort(struct api *a, struct files_upload *u)
{
        if (!u)
                return;
        if (u->fd >= 0)
                close(u->fd);
        if (u->dirfd >= 0) {
                if (u->tmp[0]) {
                        become(u->uid);
                        unlinkat(u->dirfd, u->tmp, 0);
                        unbecome();
                }
                close(u->dirfd);
        }
        if (u->sb)
                mgr_leave(a->mgr, u->sb);
        free(u);
}
