/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A message cut to fit (n: the length it wanted) ends in "...", so that
 * it reads as cut. */
static void mark_cut(char *msg, size_t size, int n)
{
        if (n >= (int)size && size >= 4)
                memcpy(msg + size - 4, "...", 4);
}

int sbx_error_set(struct sbx_error *err, int errnum, const char *fmt, ...)
{
        if (errnum <= 0)
                errnum = EIO;
        if (err) {
                va_list ap;
                char head[384];

                va_start(ap, fmt);
                mark_cut(head, sizeof(head), vsnprintf(head, sizeof(head), fmt, ap));
                va_end(ap);
                err->code = errnum;
                int n = snprintf(err->msg, sizeof(err->msg), "%s: %s", head, strerror(errnum));
                mark_cut(err->msg, sizeof(err->msg), n);
        }
        return -errnum;
}

int sbx_error_say(struct sbx_error *err, int errnum, const char *fmt, ...)
{
        if (errnum <= 0)
                errnum = EIO;
        if (err) {
                va_list ap;
                va_start(ap, fmt);
                mark_cut(err->msg, sizeof(err->msg),
                         vsnprintf(err->msg, sizeof(err->msg), fmt, ap));
                va_end(ap);
                err->code = errnum;
        }
        return -errnum;
}

int sbx_error_wrap(struct sbx_error *err, const char *fmt, ...)
{
        if (!err)
                return -EIO;
        char head[256], old[sizeof(err->msg)];
        va_list ap;

        va_start(ap, fmt);
        mark_cut(head, sizeof(head), vsnprintf(head, sizeof(head), fmt, ap));
        va_end(ap);
        memcpy(old, err->msg, sizeof(old));
        mark_cut(err->msg, sizeof(err->msg),
                 snprintf(err->msg, sizeof(err->msg), "%s: %s", head, old));
        return -(err->code ? err->code : EIO);
}

void buf_init(struct buf *b, size_t max)
{
        b->data = NULL;
        b->len = b->cap = 0;
        b->max = max ? max : SIZE_MAX;
}

void buf_free(struct buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

static int buf_reserve(struct buf *b, size_t extra)
{
        if (extra > b->max || b->len > b->max - extra)
                return -E2BIG;
        size_t need = b->len + extra + 1; /* room for a terminator */
        if (need <= b->cap)
                return 0;
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < need)
                ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
        char *n = realloc(b->data, ncap);
        if (!n)
                return -ENOMEM;
        b->data = n;
        b->cap = ncap;
        return 0;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
        int r = buf_reserve(b, len);
        if (r < 0)
                return r;
        if (len)
                memcpy(b->data + b->len, data, len);
        b->len += len;
        b->data[b->len] = '\0';
        return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        int r = buf_reserve(b, (size_t)n);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
        return 0;
}

int buf_terminate(struct buf *b)
{
        return buf_append(b, "", 0);
}

static int64_t clock_ms(clockid_t id)
{
        struct timespec ts;
        clock_gettime(id, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t now_ms(void)
{
        return clock_ms(CLOCK_REALTIME);
}

int64_t mono_ms(void)
{
        return clock_ms(CLOCK_MONOTONIC);
}

int64_t mono_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* 9999-12-31T23:59:59.999Z, the last instant RFC 3339 can write. */
#define RFC3339_MAX_MS 253402300799999LL

void format_rfc3339(int64_t ms, char out[32])
{
        ms = MIN(MAX(ms, 0), RFC3339_MAX_MS);
        time_t secs = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&secs, &tm);
        /* Each field is in range; the casts and the modulo tell the
         * compiler so (the result always fits 25 bytes). */
        snprintf(out, 32, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
                 (unsigned)(tm.tm_year + 1900) % 10000, (unsigned)(tm.tm_mon + 1) % 100,
                 (unsigned)tm.tm_mday % 100, (unsigned)tm.tm_hour % 100, (unsigned)tm.tm_min % 100,
                 (unsigned)tm.tm_sec % 100, (unsigned)(ms % 1000));
}

int parse_duration_ms(const char *s, int64_t *ret_ms)
{
        if (!s || !*s)
                return -EINVAL;
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        /* Written so that NaN fails too. */
        if (errno || end == s || !(v >= 0 && v <= 1e12))
                return -EINVAL;
        double mult;
        if (!*end || !strcmp(end, "s"))
                mult = 1000;
        else if (!strcmp(end, "ms"))
                mult = 1;
        else if (!strcmp(end, "m"))
                mult = 60e3;
        else if (!strcmp(end, "h"))
                mult = 3600e3;
        else if (!strcmp(end, "d"))
                mult = 86400e3;
        else
                return -EINVAL;
        /* 1e12 days would overflow: past 2^62 ms (146 million years) is
         * no duration anyone means. */
        if (v * mult > 0x1p62)
                return -EINVAL;
        *ret_ms = (int64_t)(v * mult);
        return 0;
}

int write_all(int fd, const void *data, size_t len)
{
        const char *p = data;
        while (len) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int read_all(int fd, void *data, size_t len)
{
        char *p = data;
        while (len) {
                ssize_t n = read(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EPIPE;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int read_small_at(int dirfd, const char *name, char *out, size_t len)
{
        if (len == 0)
                return -EINVAL;
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t off = 0;
        while (off + 1 < len) {
                ssize_t n = read(fd, out + off, len - 1 - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                off += (size_t)n;
        }
        out[off] = '\0';
        return (int)off;
}

int write_small_at(int dirfd, const char *name, const char *text)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text);
        ssize_t n;
        do
                n = write(fd, text, len);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return (size_t)n == len ? 0 : -EIO;
}

int mkdir_p(const char *path, mode_t mode)
{
        char tmp[4096];
        size_t len = strlen(path);
        if (len == 0 || len >= sizeof(tmp))
                return -ENAMETOOLONG;
        memcpy(tmp, path, len + 1);
        for (char *p = tmp + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(tmp, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(tmp, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* Depth-first removal through dirfds: O_NOFOLLOW everywhere, and a
 * directory on another device (a mount point) is never entered, so a
 * symlink or a leftover mount inside a sandbox tree cannot redirect the
 * removal to host files. */
static int rm_rf_children(int dfd, dev_t dev, int depth);

/* Remove `name` of the directory dfd (a subdirectory with its tree). */
static int rm_rf_entry(int dfd, const char *name, dev_t dev, int depth)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (st.st_dev != dev)
                return -EBUSY;
        int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cfd < 0)
                return -errno;
        /* Let us into dirs like overlay's work/work (mode 000). */
        fchmod(cfd, 0700);
        int ret = rm_rf_children(cfd, dev, depth + 1);
        if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                ret = -errno;
        return ret;
}

static int rm_rf_children(int dfd, dev_t dev, int depth)
{
        if (depth > 4096) {
                close(dfd);
                return -ELOOP;
        }
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return -errno;
        }
        int ret = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                int r = rm_rf_entry(dirfd(d), de->d_name, dev, depth);
                if (r < 0)
                        ret = r;
        }
        closedir(d);
        return ret;
}

int rm_rf_at(int dirfd, const char *name)
{
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        fchmod(fd, 0700);
        int r = rm_rf_children(fd, st.st_dev, 0);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int rm_rf_contents(int dirfd)
{
        struct stat st;
        if (fstat(dirfd, &st) < 0)
                return -errno;
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return rm_rf_children(fd, st.st_dev, 0);
}

int path_printf(char *out, size_t len, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(out, len, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= len) {
                if (len)
                        out[0] = '\0';
                return -ENAMETOOLONG;
        }
        return 0;
}

int path_join(char *out, size_t len, const char *a, const char *b)
{
        if (!a[0] || !b[0])
                return path_printf(out, len, "%s", a[0] ? a : b);
        size_t al = strlen(a);
        bool slash = a[al - 1] == '/' || b[0] == '/';
        return path_printf(out, len, "%s%s%s", a, slash ? "" : "/", b);
}

int dir_names_cmp(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

void dir_names_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

int dir_names_sorted(int fd, char ***ret, size_t *ret_n)
{
        int lfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
        if (!d) {
                int e = errno;
                if (lfd >= 0)
                        close(lfd);
                return -e;
        }
        char **v = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 32;
                        char **nv = realloc(v, cap * sizeof(*nv));
                        if (!nv) {
                                r = -ENOMEM;
                                break;
                        }
                        v = nv;
                }
                if (!(v[n] = strdup(de->d_name)))
                        r = -ENOMEM;
                else
                        n++;
        }
        closedir(d);
        if (r < 0) {
                dir_names_free(v, n);
                return r;
        }
        if (n)
                qsort(v, n, sizeof(*v), dir_names_cmp);
        *ret = v;
        *ret_n = n;
        return 0;
}
