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
#include "api-internal.h"
#include "errors.h"

/* A listing is built in memory: a sandbox must not make the daemon hold
 * an unbounded one. */
#define MAX_LIST_ENTRIES 100000

struct files_upload {
        struct sandbox *sb;
        uint32_t uid;
        int dirfd;     /* the target's parent directory */
        int fd;        /* the temporary file */
        char tmp[64];  /* its name, while it exists */
        char note[64]; /* its record for the start-up sweep */
        char base[NAME_MAX + 1];
        uint64_t written, max;
        int error; /* first -errno while writing */
};

/* A handle of the sandbox's root; resp set on failure. */
static int get_root(struct api *a, struct sandbox *sb, int *ret, struct api_resp *resp)
{
        struct sbx_error err = {0};
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

/* Open path for reading as the sandbox's root: a regular file of the
 * sandbox's own; fd or -errno. */
static int open_for_read(int root, const char *path, struct stat *st)
{
        /* O_PATH first: a FIFO or device is refused before it is opened. */
        _cleanup_close_ int p = inroot_open(root, path, O_PATH, 0);
        if (p < 0)
                return p;
        int r = inroot_check_fs(p, false);
        if (r < 0)
                return r;
        char proc[64];
        if ((r = path_printf(proc, sizeof(proc), "/proc/self/fd/%d", p)) < 0)
                return r;
        _cleanup_close_ int fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0 || fstat(fd, st) < 0)
                return -errno;
        return TAKE_FD(fd);
}

void files_read(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        char path[INROOT_PATH_MAX];
        if (!path_arg(c->req, resp, false, path))
                return;
        _cleanup_close_ int root = -1;
        if (get_root(a, c->sb, &root, resp) < 0)
                return;
        struct stat st;
        inroot_become(mgr_sandbox_root_uid(a->mgr, c->sb));
        int fd = open_for_read(root, path, &st);
        inroot_unbecome();
        if (fd < 0) {
                api_error_path(resp, API_ERR_FILE_READ, fd, "cannot read", path);
                return;
        }
        resp->status = 200;
        resp->content_type = "application/octet-stream";
        resp->body.len = 0;
        resp->body_fd = fd;
        resp->body_fd_len = (uint64_t)st.st_size;
}

static json_t *entry_json(DIR *d, const struct dirent *de)
{
        bool isdir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN) {
                struct stat st;
                isdir = fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                        S_ISDIR(st.st_mode);
        }
        size_t n = 0;
        char *name = utf8_sanitize((const uint8_t *)de->d_name, strlen(de->d_name), &n);
        json_t *j =
            json_pack("{s:s%,s:b}", "name", name ? name : "", name ? n : 0, "isDirectory", isdir);
        free(name);
        return j;
}

/* The entries of directory fd (consumed) into arr; -E2BIG past
 * MAX_LIST_ENTRIES. */
static int list_dir(int fd, json_t *arr)
{
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return 0;
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (json_array_size(arr) >= MAX_LIST_ENTRIES) {
                        r = -E2BIG;
                        break;
                }
                json_array_append_new(arr, entry_json(d, de));
        }
        closedir(d);
        return r;
}

/* List path as the sandbox's root into arr: -errno when it is no
 * directory of the sandbox's own, -E2BIG when it holds too many. */
static int list_path(int root, const char *path, json_t *arr)
{
        int fd = inroot_open(root, path, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return fd;
        int r = inroot_check_fs(fd, true);
        if (r < 0) {
                close(fd);
                return r;
        }
        return list_dir(fd, arr) < 0 ? -E2BIG : 1;
}

void files_list(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        char path[INROOT_PATH_MAX];
        if (!path_arg(c->req, resp, true, path))
                return;
        _cleanup_close_ int root = -1;
        if (get_root(a, c->sb, &root, resp) < 0)
                return;
        json_t *arr = json_array();
        inroot_become(mgr_sandbox_root_uid(a->mgr, c->sb));
        int r = list_path(root, path, arr);
        inroot_unbecome();
        if (r == -E2BIG) {
                json_decref(arr);
                api_error(resp, 413, "too_large", "%s has more than %d entries", path,
                          MAX_LIST_ENTRIES);
        } else if (r < 0) {
                json_decref(arr);
                api_error_path(resp, API_ERR_FILE_READ, r, "cannot list", path);
        } else {
                api_json(resp, 200, json_pack("{s:o}", "entries", arr));
        }
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

static void upload_write(void *stream, const void *data, size_t len);
static void upload_finish(struct api *a, void *stream, struct api_resp *resp);
static void upload_abort(struct api *a, void *stream);

static const struct api_stream_ops upload_ops = {
    .write = upload_write,
    .finish = upload_finish,
    .abort = upload_abort,
};

void files_upload(struct api_call *c, struct api_resp *resp)
{
        struct api *a = c->a;
        char path[INROOT_PATH_MAX], dir[INROOT_PATH_MAX];
        if (!path_arg(c->req, resp, false, path))
                return;
        struct files_upload *u = calloc(1, sizeof(*u));
        if (!u) {
                api_error(resp, 503, "unavailable", "out of memory");
                return;
        }
        u->dirfd = u->fd = -1;
        int r = inroot_split(path, dir, sizeof(dir), u->base, sizeof(u->base));
        if (r < 0 || !strcmp(u->base, "..")) {
                free(u);
                api_error(resp, 400, "invalid_argument", "path: %s is not a file path", path);
                return;
        }
        /* The upload holds the sandbox until it ends. */
        u->sb = TAKE_PTR(c->sb);
        u->uid = mgr_sandbox_root_uid(a->mgr, u->sb);
        u->max = (uint64_t)a->cfg.max_file_bytes;
        _cleanup_close_ int root = -1;
        if (get_root(a, u->sb, &root, resp) < 0) {
                upload_abort(a, u);
                return;
        }
        if ((r = upload_open(a, u, root, dir)) < 0) {
                api_error_path(resp, API_ERR_FILE_WRITE, r, "cannot write", path);
                upload_abort(a, u);
                return;
        }
        c->req->stream = u;
        c->req->stream_ops = &upload_ops;
}

static void upload_write(void *stream, const void *data, size_t len)
{
        struct files_upload *u = stream;
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

static void upload_finish(struct api *a, void *stream, struct api_resp *resp)
{
        struct files_upload *u = stream;
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
        upload_abort(a, u);
}

static void upload_abort(struct api *a, void *stream)
{
        struct files_upload *u = stream;
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
