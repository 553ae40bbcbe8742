/* SPDX-License-Identifier: MIT */
#include "uploads.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/inroot.h"
#include "../common/util.h"
#include "manager.h"

static int records_dir(const char *sandbox_dir, bool create)
{
        _cleanup_close_ int sd = open(sandbox_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sd < 0)
                return -errno;
        if (create && mkdirat(sd, "uploads", 0700) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(sd, "uploads", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static bool is_upload_name(const char *name)
{
        size_t pl = strlen(MGR_UPLOAD_PREFIX);
        return !strncmp(name, MGR_UPLOAD_PREFIX, pl) && strlen(name) == pl + 12 &&
               strspn(name + pl, "0123456789abcdef") == 12;
}

int uploads_note(const char *sandbox_dir, uint64_t run, const char *dir, const char *name)
{
        _cleanup_close_ int rd = records_dir(sandbox_dir, true);
        if (rd < 0)
                return rd;
        _cleanup_close_ int fd =
            openat(rd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        char head[32];
        int n = snprintf(head, sizeof(head), "%016" PRIx64 "\n", run);
        int r = write_all(fd, head, (size_t)n);
        if (r == 0)
                r = write_all(fd, dir, strlen(dir));
        if (r < 0)
                unlinkat(rd, name, 0);
        return r;
}

void uploads_done(const char *sandbox_dir, const char *name)
{
        _cleanup_close_ int rd = records_dir(sandbox_dir, false);
        if (rd >= 0)
                unlinkat(rd, name, 0);
}

/* Remove the temporary file a record names, as the sandbox's root. */
static int remove_tmp(int root, const char *dir, const char *name, uint32_t uid)
{
        int removed = 0;
        inroot_become(uid);
        int dfd = inroot_open(root, dir, O_RDONLY | O_DIRECTORY, 0);
        struct stat st;
        if (dfd >= 0 && inroot_check_fs(dfd, true) == 0 &&
            fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            unlinkat(dfd, name, 0) == 0)
                removed = 1;
        if (dfd >= 0)
                close(dfd);
        inroot_unbecome();
        return removed;
}

/* One record: its file removed unless it is this run's; the record goes. */
static int sweep_one(int rd, const char *name, int root, uint64_t run, uint32_t uid)
{
        char text[INROOT_PATH_MAX + 32];
        int n = read_small_at(rd, name, text, sizeof(text));
        int removed = 0;
        if (n >= 17 && text[16] == '\n') {
                if (strtoull(text, NULL, 16) == run)
                        return 0; /* this run's own upload, still going on */
                if (text[17] == '/' && is_upload_name(name))
                        removed = remove_tmp(root, text + 17, name, uid);
        }
        unlinkat(rd, name, 0);
        return removed;
}

int uploads_sweep(const char *sandbox_dir, uint64_t run, uint32_t uid,
                  int (*get_root)(void *ctx, int *ret_fd), void *ctx)
{
        int rd = records_dir(sandbox_dir, false);
        if (rd == -ENOENT)
                return 0;
        if (rd < 0)
                return rd;
        DIR *d = fdopendir(rd);
        if (!d) {
                close(rd);
                return -errno;
        }
        int removed = 0, root = -1, r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' && !is_upload_name(de->d_name))
                        continue;
                if (root < 0 && (r = get_root(ctx, &root)) < 0)
                        break;
                removed += sweep_one(dirfd(d), de->d_name, root, run, uid);
        }
        if (root >= 0)
                close(root);
        closedir(d);
        return r < 0 ? r : removed;
}
