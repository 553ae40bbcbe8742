/* SPDX-License-Identifier: MIT */
/* Small helpers shared by every part of sandboxd: cleanup attributes,
 * the error object, buffers with a size cap, time. No global state. */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- cleanup attributes (systemd / crun style) ---- */
static inline void cleanup_freep(void *p)
{
        free(*(void **)p);
}
static inline void cleanup_closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
/* Close *fd if open and mark it closed (-1); errno is kept. */
static inline void close_fd(int *fd)
{
        cleanup_closep(fd);
        *fd = -1;
}
#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))

/* Hand ownership of an fd / pointer out of a scope with a cleanup. */
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _taken_fd = (fd);                                                              \
                (fd) = -1;                                                                         \
                _taken_fd;                                                                         \
        })
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _taken_p = (p);                                                      \
                (p) = NULL;                                                                        \
                _taken_p;                                                                          \
        })

/* The struct that holds member m at ptr. */
#define container_of(ptr, type, m) ((type *)(void *)((char *)(ptr)-offsetof(type, m)))

/* ---- error object for operations that span many syscalls ---- */
struct sbx_error {
        int code;      /* positive errno, 0 = no error */
        char msg[512]; /* human readable, never contains secrets */
};

/* Record an error and return -errnum, so callers can write
 *   return sbx_error_set(err, errno, "open `%s`", path);
 * A NULL err is allowed. errnum <= 0 is treated as EIO. */
int sbx_error_set(struct sbx_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for a refusal by the service's own rules (a missing sandbox, a
 * cap): the message is the text alone, no strerror() after it. */
int sbx_error_say(struct sbx_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix the existing message with more context ("launch: <old>"). */
int sbx_error_wrap(struct sbx_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- growable byte buffer with a hard cap (curl's dynbuf idea) ---- */
struct buf {
        char *data;
        size_t len;
        size_t cap; /* allocated */
        size_t max; /* never grow past this; 0 = SIZE_MAX */
};
void buf_init(struct buf *b, size_t max);
void buf_free(struct buf *b);
/* 0, or -ENOMEM, or -E2BIG when len would pass max (nothing appended). */
int buf_append(struct buf *b, const void *data, size_t len);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ensure b->data is NUL terminated (not counted in len). */
int buf_terminate(struct buf *b);

/* ---- time ---- */
int64_t now_ms(void);  /* CLOCK_REALTIME, milliseconds since the epoch */
int64_t mono_ms(void); /* CLOCK_MONOTONIC, milliseconds */
int64_t mono_us(void);
/* RFC 3339 UTC with milliseconds: "2026-11-30T15:20:00.000Z"; out >= 25 bytes. */
void format_rfc3339(int64_t ms, char out[32]);
/* Parse "30s", "15m", "8h", "2d", "500ms" or a plain number of seconds into ms. */
int parse_duration_ms(const char *s, int64_t *ret_ms);
/* Sleep ms milliseconds, resuming after a signal. Async-signal-safe. */
void sleep_ms(unsigned ms);

/* ---- io ---- */
/* write/read all bytes, retrying on EINTR; 0 or -errno (-EPIPE on EOF for read). */
int write_all(int fd, const void *data, size_t len);
int read_all(int fd, void *data, size_t len);
/* Read a small file (at most len - 1 bytes) into out, NUL terminated,
 * without following a symlink at `name`; the bytes read, or -errno. */
int read_small_at(int dirfd, const char *name, char *out, size_t len);
/* Write text to an existing file in one write(2), without following a
 * symlink at `name`: a kernel setting (/proc, /sys, cgroupfs) takes its
 * value in one write. 0, -EIO when it took less, or -errno. */
int write_small_at(int dirfd, const char *name, const char *text);
/* mkdir -p with mode for created components; 0 or -errno. */
/* out = a "/" b (a "" or b "": the other alone), or -ENAMETOOLONG with out
 * "" when it does not fit: never a truncated path, which could name
 * something else. */
int path_join(char *out, size_t len, const char *a, const char *b);
/* out = printf(fmt, ...), or -ENAMETOOLONG with out "" when it is cut. */
int path_printf(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

int mkdir_p(const char *path, mode_t mode);
/* Remove a directory tree without following symlinks or crossing mounts. */
int rm_rf_at(int dirfd, const char *name);
/* The names in the directory fd ("." and ".." left out), sorted by
 * dir_names_cmp (bsearch with it); *ret malloc'd, dir_names_free it. */
int dir_names_sorted(int fd, char ***ret, size_t *ret_n);
int dir_names_cmp(const void *a, const void *b);
void dir_names_free(char **v, size_t n);
/* Remove everything inside the directory dirfd (an O_PATH fd will do),
 * the same way; dirfd stays open. */
int rm_rf_contents(int dirfd);
