/* SPDX-License-Identifier: MIT */
/*
 * libsandboxd: the C client of sandboxd (docs/libsandboxd.md, docs/api.md).
 *
 * Conventions, everywhere:
 * - A function returns 0 (or a count) on success and -errno on failure, and
 *   then fills the caller's `struct sbx_err` (which may be NULL).
 * - `err->status` is the HTTP status of a refusal by the server, with the
 *   server's `error.code` in `err->code`. Status 0 means no usable answer:
 *   `code` is then "unreachable" (connection refused, reset, timed out;
 *   never retried), "bad_response" (the answer broke the contract: bad
 *   JSON, a missing field, an oversize body, a bad frame) or one of the
 *   client's own: "no_token", "no_server", "io_error" (a local fd),
 *   "cancelled" (a progress callback said stop), "no_memory", "internal".
 *   A request the client refuses before sending it (a bad name, process
 *   id or terminal size) is status 400 "invalid_argument", as the server
 *   would answer it.
 * - Results are written to `ret` only on success; what they point at is
 *   owned by the caller and freed with the matching `sbx_*_clear()`.
 *
 * A `struct sbx_client` may be used from many threads at once: the only
 * shared state is the cache of data-plane credentials, behind a mutex.
 * Each call uses a curl easy handle of its own.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SANDBOXD_CLIENT_VERSION_MAJOR 1
#define SANDBOXD_CLIENT_VERSION_MINOR 0

#if defined(__GNUC__)
#define SBX_PUBLIC __attribute__((visibility("default")))
#else
#define SBX_PUBLIC
#endif

/* "MAJOR.MINOR" of the library actually loaded (the macros above are the
 * header's). */
SBX_PUBLIC const char *sbxc_version(void);

/* The error of a failed call. (`sbx_err`, not `sbx_error`: the daemon's
 * sources use that name for their own error object.) */
struct sbx_err {
        int status;        /* HTTP status, or 0 when there was no usable answer */
        char code[64];     /* the server's error.code, or the client's (above) */
        char message[512]; /* for people; never holds a token or credential */
};

/* ------------------------------------------------------------ the client */

struct sbx_client;

struct sbx_options {
        /* The identity token. NULL: $ASTRO_AUTHZ_TOKEN, else $SANDBOXD_TOKEN. */
        const char *token;
        /* The server's base URL. NULL: the token's `iss` claim. */
        const char *server_url;
        /* Bound on each request but a stream (0: 30 s). */
        int64_t timeout_ms;
};

SBX_PUBLIC int sbx_client_new(const struct sbx_options *opts, struct sbx_client **ret,
                              struct sbx_err *err);
SBX_PUBLIC void sbx_client_free(struct sbx_client *c);
/* The server URL the client talks to, without a trailing slash. */
SBX_PUBLIC const char *sbx_client_server(const struct sbx_client *c);

/* ------------------------------------------------------------ control plane */

struct sbx_attach_options {
        const char *sandbox_class; /* NULL: "default" */
        const char *network;       /* NULL: the server's */
        const char *image;         /* NULL: the server's default image */
};

/* A sandbox: the record (get, list) or the handle (attach). Fields the
 * answer did not carry are NULL. The credential is never exposed. */
struct sbx_sandbox {
        char *name;
        char *sandbox_class;
        char *state; /* running, suspended, stopped */
        char *network;
        char *image;
        char *created_at;
        char *last_active_at;
        char *ceiling_at;
        char *endpoint;   /* attach only */
        char *expires_at; /* attach only */
};
SBX_PUBLIC void sbx_sandbox_clear(struct sbx_sandbox *s);

struct sbx_sandbox_list {
        struct sbx_sandbox *items;
        size_t n;
};
SBX_PUBLIC void sbx_sandbox_list_clear(struct sbx_sandbox_list *l);

/* Creates the sandbox on first use, resumes a stopped one; the credential
 * is cached for the data-plane calls below. */
SBX_PUBLIC int sbx_attach(struct sbx_client *c, const char *name,
                          const struct sbx_attach_options *opts, struct sbx_sandbox *ret,
                          struct sbx_err *err);
SBX_PUBLIC int sbx_get(struct sbx_client *c, const char *name, struct sbx_sandbox *ret,
                       struct sbx_err *err);
SBX_PUBLIC int sbx_list(struct sbx_client *c, struct sbx_sandbox_list *ret, struct sbx_err *err);
SBX_PUBLIC int sbx_stop(struct sbx_client *c, const char *name, struct sbx_err *err);
SBX_PUBLIC int sbx_delete(struct sbx_client *c, const char *name, struct sbx_err *err);

struct sbx_image {
        char *name;
        char *built_at;
        char *source; /* built, oci, docker, snapshot */
        int64_t size_bytes;
        int64_t layers;
};
struct sbx_image_list {
        struct sbx_image *items;
        size_t n;
};
SBX_PUBLIC void sbx_image_list_clear(struct sbx_image_list *l);
SBX_PUBLIC int sbx_images(struct sbx_client *c, struct sbx_image_list *ret, struct sbx_err *err);

struct sbx_snapshot_info {
        char *image;
        char *created_at;
        int64_t size_bytes;
        int64_t copied_bytes;
        int64_t linked_files;
        int64_t duration_ms;
};
SBX_PUBLIC void sbx_snapshot_info_clear(struct sbx_snapshot_info *s);
/* The sandbox's files, now, as a new image. */
SBX_PUBLIC int sbx_snapshot(struct sbx_client *c, const char *name, const char *image,
                            struct sbx_snapshot_info *ret, struct sbx_err *err);

/* A new sandbox new_name from name's state now (docs/api.md, "Checkpoints
 * and forks": its files under `ns`, its last checkpoint under `gvisor`);
 * its handle in ret, its credential cached as sbx_attach() caches one.
 * 409 "already_exists" when new_name is taken, "no_checkpoint" for a
 * gvisor sandbox without a checkpoint. */
SBX_PUBLIC int sbx_fork(struct sbx_client *c, const char *name, const char *new_name,
                        struct sbx_sandbox *ret, struct sbx_err *err);

/* ------------------------------------------------------------ commands */

/* argv and env are NULL-terminated; env entries are "KEY=VALUE". */
struct sbx_exec_request {
        const char *const *argv;
        const char *const *env;
        const char *cwd;
        const char *user;
        /* 0: none. Without stdin: never past the client's timeout less a
         * second (the one request waits for the command). */
        int64_t timeout_ms;
        /* Bytes for the command's stdin, then its end (NULL: stdin is
         * empty). The wire's exec takes none, so the command is then spawned
         * (lossless), fed and streamed, with the same result: output capped
         * at 1 MiB per stream (truncated), killed at timeout_ms (timed_out),
         * with no bound from the client's timeout. */
        const void *stdin_data;
        size_t stdin_len;
};

struct sbx_exec_result {
        int exit_code;
        bool timed_out;
        bool truncated; /* more than 1 MiB on a stream: the rest was dropped */
        int64_t duration_ms;
        char *out; /* stdout, NUL-terminated (UTF-8, invalid bytes replaced) */
        size_t out_len;
        char *err; /* stderr, likewise */
        size_t err_len;
};
SBX_PUBLIC void sbx_exec_result_clear(struct sbx_exec_result *r);
SBX_PUBLIC int sbx_exec(struct sbx_client *c, const char *name, const struct sbx_exec_request *req,
                        struct sbx_exec_result *ret, struct sbx_err *err);

struct sbx_spawn_request {
        const char *const *argv;
        const char *const *env;
        const char *cwd;
        const char *user;
        bool stdin_open; /* stdin is a pipe fed by sbx_stdin() */
        bool lossless;   /* output waits for a reader from the first byte */
        /* Both non-zero: a terminal of that size (1 to 4096 each). */
        unsigned pty_cols;
        unsigned pty_rows;
};

struct sbx_process {
        char *id;
        char **argv; /* NULL-terminated */
        bool running;
        bool has_exit_code;
        int exit_code;
        char *started_at;
        char *exited_at; /* NULL while running */
        bool pty;
        bool lossless;
        bool exec; /* the record of an exec whose answer was lost */
};
SBX_PUBLIC void sbx_process_clear(struct sbx_process *p);

struct sbx_process_list {
        struct sbx_process *items;
        size_t n;
};
SBX_PUBLIC void sbx_process_list_clear(struct sbx_process_list *l);

SBX_PUBLIC int sbx_spawn(struct sbx_client *c, const char *name,
                         const struct sbx_spawn_request *req, struct sbx_process *ret,
                         struct sbx_err *err);
SBX_PUBLIC int sbx_processes(struct sbx_client *c, const char *name, struct sbx_process_list *ret,
                             struct sbx_err *err);

/* Offsets count bytes since the process started. */
struct sbx_output {
        struct sbx_process status;
        char *out;
        size_t out_len;
        char *err;
        size_t err_len;
        uint64_t out_next, err_next;       /* pass these next time */
        uint64_t out_dropped, err_dropped; /* discarded before this read */
};
SBX_PUBLIC void sbx_output_clear(struct sbx_output *o);
/* A process's status and output after the offsets; wait_ms (at most the
 * client's timeout less a second) waits for new output or the exit. */
SBX_PUBLIC int sbx_poll(struct sbx_client *c, const char *name, const char *id, uint64_t out_from,
                        uint64_t err_from, int wait_ms, struct sbx_output *ret,
                        struct sbx_err *err);

/* signal: TERM, KILL, INT, HUP, QUIT, USR1, USR2 (NULL: TERM). */
SBX_PUBLIC int sbx_signal(struct sbx_client *c, const char *name, const char *id,
                          const char *signal, struct sbx_err *err);
/* Stops the process if it runs, then forgets it. */
SBX_PUBLIC int sbx_kill(struct sbx_client *c, const char *name, const char *id,
                        struct sbx_err *err);
/* Writes to the stdin of a process spawned with stdin_open (or a pty);
 * close ends it after the bytes. */
SBX_PUBLIC int sbx_stdin(struct sbx_client *c, const char *name, const char *id, const void *data,
                         size_t len, bool close, struct sbx_err *err);
SBX_PUBLIC int sbx_resize(struct sbx_client *c, const char *name, const char *id, unsigned cols,
                          unsigned rows, struct sbx_err *err);

enum sbx_stream_id { SBX_STDOUT = 1, SBX_STDERR = 2 };

/* Called for each piece of output as it arrives, in order, without gaps:
 * `offset` is the stream offset of data[0]. A non-zero return ends the
 * stream, and sbx_stream() returns it. */
typedef int (*sbx_output_fn)(void *ctx, enum sbx_stream_id stream, uint64_t offset,
                             const void *data, size_t len);

struct sbx_stream_options {
        uint64_t out_from;
        uint64_t err_from;
        /* A body cut short (no exit frame) reconnects from the next offsets
         * unless this is set; a reconnect that brings nothing new counts
         * against a bound of three in a row. */
        bool no_reconnect;
};

struct sbx_stream_result {
        struct sbx_process status; /* exited: has_exit_code, exit_code */
        uint64_t out_next, err_next;
        uint64_t out_dropped, err_dropped; /* asked for but no longer held */
};
SBX_PUBLIC void sbx_stream_result_clear(struct sbx_stream_result *r);

/* Streams the process's output to fn until it exits (no request timeout:
 * a stream lasts as long as its process; 60 s without a byte, keepalives
 * included, is a dead connection). */
SBX_PUBLIC int sbx_stream(struct sbx_client *c, const char *name, const char *id,
                          const struct sbx_stream_options *opts, sbx_output_fn fn, void *ctx,
                          struct sbx_stream_result *ret, struct sbx_err *err);

/* ------------------------------------------------------------ files */

/* Called as bytes move; total is -1 when unknown. A non-zero return aborts. */
typedef int (*sbx_progress_fn)(void *ctx, int64_t done, int64_t total);

/* Paths are the sandbox's (relative ones resolve against /workspace). */
/* The file's bytes to fd, streamed as they arrive; a body cut short is an
 * error (the bytes already written stay in fd). */
SBX_PUBLIC int sbx_file_read(struct sbx_client *c, const char *name, const char *path, int fd,
                             sbx_progress_fn progress, void *ctx, struct sbx_err *err);
/* fd's bytes (to its end) to the file, streamed; parent directories are
 * created; the file appears whole or not at all. A 401 is retried only
 * when fd can seek back to where it started. */
SBX_PUBLIC int sbx_file_write(struct sbx_client *c, const char *name, const char *path, int fd,
                              sbx_progress_fn progress, void *ctx, struct sbx_err *err);

struct sbx_dirent {
        char *name;
        bool is_directory;
};
struct sbx_dir {
        struct sbx_dirent *items;
        size_t n;
};
SBX_PUBLIC void sbx_dir_clear(struct sbx_dir *d);
SBX_PUBLIC int sbx_file_list(struct sbx_client *c, const char *name, const char *path,
                             struct sbx_dir *ret, struct sbx_err *err);

#ifdef __cplusplus
}
#endif
