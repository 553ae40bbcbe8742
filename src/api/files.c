/* SPDX-License-Identifier: MIT */
#include "files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../agent/client.h"
#include "../common/inroot.h"
#include "../common/log.h"

/* A listing is built in memory: a sandbox must not make the daemon hold
 * an unbounded one. */
#define MAX_LIST_ENTRIES 100000

struct files_upload {
        struct sandbox *sb;
        uint32_t uid;
        int dirfd;                   /* the target's parent directory */
        int fd;                      /* the temporary file */
        char tmp[64];                /* its name, while it exists */
        char note[64];               /* its record for the start-up sweep */
        char base[NAME_MAX + 1];
        uint64_t written, max;
        int error;                   /* first -errno while writing */
};

/* A handle of the sandbox's root; resp set on failure. */
static int get_root(struct api *a, struct sandbox *sb, int *ret, struct api_resp *resp)
{
        struct sbx_error err = { 0 };
        int r = mgr_root(a->mgr, sb, ret, &err);
        if (r < 0)
                api_error_errno(resp, mgr_sandbox_gone(sb) ? API_ERR_GONE : API_ERR_ROOT, r, &err);
        return r;
}

/* The path query parameter, normalized (relative to /workspace, no "//"
 * or "."); NULL with resp set when it is missing or unusable. */
static bool path_arg(struct api_req *req, struct api_resp *resp, bool allow_default,
                     char out[INROOT_PATH_MAX])
{
        size_t len = 0;
        const char *p = api_query_n(req, "path", &len);
        if (!p && allow_default)
                p = ".";
        else if (!p || !*p) {
                api_error(resp, 400, "invalid_argument", "path: required");
                return false;
        } else if (len != strlen(p)) {
                api_error(resp, 400, "invalid_argument", "path: contains a NUL byte");
                return false;
        }
        int r = inroot_normalize(p, out, INROOT_PATH_MAX);
        if (r < 0) {
                api_error_path(resp, API_ERR_PATH, r, "path", NULL);
                return false;
        }
        return true;
}

static void handle_read(struct api *a, struct api_req *req, struct sandbox *sb,
                        struct api_resp *resp)
{
        char path[INROOT_PATH_MAX];
        if (!path_arg(req, resp, false, path))
                return;
        _cleanup_close_ int root = -1;
        int r = get_root(a, sb, &root, resp);
        if (r < 0)
                return;
        inroot_become(mgr_sandbox_uid(a->mgr, sb));
        /* O_PATH first: a FIFO or device is refused before it is opened. */
        _cleanup_close_ int p = inroot_open(root, path, O_PATH, 0);
        int fd = -1;
        if (p >= 0 && (r = inroot_check_fs(p, false)) == 0) {
                char proc[64];
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p);
                fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        r = -errno;
        } else if (p < 0) {
                r = p;
        }
        inroot_unbecome();
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                fd = -1;
        }
        if (fd < 0) {
                api_error_path(resp, API_ERR_FILE_READ, r, "cannot read", path);
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
        char path[INROOT_PATH_MAX];
        if (!path_arg(req, resp, true, path))
                return;
        _cleanup_close_ int root = -1;
        int r = get_root(a, sb, &root, resp);
        if (r < 0)
                return;
        inroot_become(mgr_sandbox_uid(a->mgr, sb));
        int fd = inroot_open(root, path, O_RDONLY | O_DIRECTORY, 0);
        if (fd >= 0 && (r = inroot_check_fs(fd, true)) < 0) {
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
        inroot_unbecome();
        if (fd < 0) {
                json_decref(arr);
                api_error_path(resp, API_ERR_FILE_READ, fd, "cannot list", path);
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

/* A fresh name for the temporary file, noted for the start-up sweep
 * before the file exists, then the file. */
static int create_tmp(struct api *a, struct files_upload *u, const char *dir)
{
        for (int tries = 0; tries < 16; tries++) {
                uint8_t rnd[6];
                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                        return -EIO;
                snprintf(u->tmp, sizeof(u->tmp), MGR_UPLOAD_PREFIX "%02x%02x%02x%02x%02x%02x",
                         rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
                /* The note is the daemon's, on the host: written as root. */
                inroot_unbecome();
                int r = mgr_upload_note(a->mgr, u->sb, dir, u->tmp);
                inroot_become(u->uid);
                if (r == -EEXIST)
                        continue;
                if (r < 0)
                        return r;
                int fd = openat(u->dirfd, u->tmp,
                                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        memcpy(u->note, u->tmp, sizeof(u->note));
                        return fd;
                }
                r = -errno;
                inroot_unbecome();
                mgr_upload_done(a->mgr, u->sb, u->tmp);
                inroot_become(u->uid);
                if (r != -EEXIST)
                        return r;
        }
        return -EEXIST;
}

/* The target, if it exists, must be a regular file (or a symlink, which
 * the rename replaces) of the directory's own filesystem: a file that
 * sandboxd mounts into the sandbox (its read-only /etc/resolv.conf) is
 * refused, where a rename from the host's side of the mount would
 * otherwise replace the file beneath the mount. */
static int check_target(int dirfd, const char *base)
{
        struct statx d, t;
        if (statx(dirfd, base, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_MNT_ID, &t) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(t.stx_mode))
                return -EISDIR;
        if (!S_ISREG(t.stx_mode) && !S_ISLNK(t.stx_mode))
                return -EINVAL;
        if (statx(dirfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &d) < 0)
                return -errno;
        if (!(t.stx_mask & STATX_MNT_ID) || !(d.stx_mask & STATX_MNT_ID) ||
            t.stx_mnt_id != d.stx_mnt_id)
                return -EBUSY;
        return 0;
}

/* Open the upload's directory (made as needed) and its temporary file. */
static int upload_open(struct api *a, struct files_upload *u, int root, const char *dir)
{
        inroot_become(u->uid);
        int r = u->dirfd = inroot_mkdirs(root, dir);
        if (r >= 0 && (r = inroot_check_fs(u->dirfd, true)) == 0 &&
            (r = check_target(u->dirfd, u->base)) == 0) {
                r = create_tmp(a, u, dir);
                if (r >= 0) {
                        u->fd = r;
                        r = 0;
                }
        }
        inroot_unbecome();
        if (r < 0)
                u->tmp[0] = '\0';
        return r;
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
        char path[INROOT_PATH_MAX], dir[INROOT_PATH_MAX];
        if (!path_arg(req, resp, false, path))
                return true;
        struct files_upload *u = calloc(1, sizeof(*u));
        if (!u) {
                api_error(resp, 503, "unavailable", "out of memory");
                return true;
        }
        u->dirfd = u->fd = -1;
        int r = inroot_split(path, dir, sizeof(dir), u->base, sizeof(u->base));
        if (r < 0 || !strcmp(u->base, "..")) {
                free(u);
                api_error(resp, 400, "invalid_argument", "path: %s is not a file path", path);
                return true;
        }
        struct sandbox *sb = api_enter_data_plane(a, req, name, resp);
        if (!sb) {
                free(u);
                return true;
        }
        u->sb = sb;
        u->uid = mgr_sandbox_uid(a->mgr, sb);
        u->max = (uint64_t)a->cfg.max_file_bytes;
        _cleanup_close_ int root = -1;
        if (get_root(a, sb, &root, resp) < 0) {
                files_upload_abort(a, u);
                return true;
        }
        if ((r = upload_open(a, u, root, dir)) < 0) {
                api_error_path(resp, API_ERR_FILE_WRITE, r, "cannot write", path);
                files_upload_abort(a, u);
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
        /* A 204 means the data and the name are on disk: the file is
         * flushed before the rename and the directory after it. */
        int r = u->error;
        if (r == 0 && fsync(u->fd) < 0)
                r = -errno;
        if (close(u->fd) < 0 && r == 0)
                r = -errno;
        u->fd = -1;
        if (r == 0) {
                inroot_become(u->uid);
                /* rename(2) within one directory: readers see the old file or
                 * the new one, never a part. A symlink at the target is
                 * replaced, not followed. */
                if (renameat(u->dirfd, u->tmp, u->dirfd, u->base) < 0)
                        r = -errno;
                else
                        u->tmp[0] = '\0';
                inroot_unbecome();
        }
        if (r == 0 && fsync(u->dirfd) < 0)
                r = -errno;
        if (r < 0)
                api_error_path(resp, API_ERR_FILE_WRITE, r, "cannot write", u->base);
        else
                api_no_content(resp);
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
                        inroot_become(u->uid);
                        unlinkat(u->dirfd, u->tmp, 0);
                        inroot_unbecome();
                }
                close(u->dirfd);
        }
        if (u->note[0])
                mgr_upload_done(a->mgr, u->sb, u->note);
        if (u->sb)
                mgr_leave(a->mgr, u->sb);
        free(u);
}
