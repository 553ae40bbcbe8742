/* SPDX-License-Identifier: MIT */
/* The agent protocol: how sandboxd talks to sandbox-init (PID 1 of each
 * sandbox) over its unix socket. Binary-safe framing, shared by both ends.
 * Both ends treat the other's bytes as untrusted: every decoder checks
 * lengths before it reads.
 *
 * Frame:   u32 payload_len | u16 type | u16 flags (0) | u32 reserved (0)
 *          followed by payload_len bytes. Little-endian. payload_len is at
 *          most AGENT_MAX_PAYLOAD; a larger frame is a protocol error and the
 *          connection is dropped.
 * Payload: a sequence of fields, each  u16 tag | u32 len | len bytes.
 *          A tag may repeat (ARGV, ENV, PROC). Unknown tags are skipped.
 *          Integers are u64 little-endian (8 bytes); booleans one byte;
 *          strings are bytes without a NUL; nested messages are payloads.
 *
 * One connection carries requests one after another; each request gets
 * exactly one response frame (AGENT_RESP_OK or AGENT_RESP_ERR). The daemon
 * may open as many connections at once as it likes; a request may be held
 * by the agent (exec until exit, poll with WAIT_MS) without blocking others.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/util.h"

#define AGENT_HEADER_SIZE 12
#define AGENT_MAX_PAYLOAD (8u << 20)
#define AGENT_MAX_FIELDS 65536

/* Limits the agent enforces (also documented in the API). */
#define AGENT_MAX_PROCS 64                  /* running: spawned + execs */
#define AGENT_MAX_EXITED 64                 /* exited records kept (oldest go first) */
#define AGENT_EXITED_OUTPUT_MAX (64u << 20) /* ... and their output, in total */
#define AGENT_RING_SIZE (1u << 20)          /* newest bytes kept per stream */
#define AGENT_EXEC_MAX_OUTPUT (1u << 20)    /* exec: bytes kept per stream */
#define AGENT_MAX_WAIT_MS 30000
#define AGENT_MAX_ARGV 4096                  /* command words of an EXEC / SPAWN */
#define AGENT_MAX_ENV 4096                   /* environment variables of one */
#define AGENT_PROC_ID_MAX 64                 /* bytes of a process id */
#define AGENT_LOSSLESS_RING_SIZE (32u << 20) /* kept per stream of a lossless process */
#define AGENT_STREAM_WINDOW (256u << 10)     /* read ahead of the slowest stream reader */
#define AGENT_PTY_MAX 4096                   /* columns, rows of a terminal */

/* The process-id grammar, [A-Za-z0-9-]{1,64}: the daemon checks it before
 * it asks the agent, so an id the agent could never have made is answered
 * without a call. The TypeScript client keeps a copy of it
 * (PROCESS_ID_RE in clients/typescript/src/client.ts). */
static inline bool agent_proc_id_valid(const char *id)
{
        size_t n = 0;
        for (; id[n]; n++) {
                char c = id[n];
                if (n == AGENT_PROC_ID_MAX || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                                (c >= '0' && c <= '9') || c == '-'))
                        return false;
        }
        return n > 0;
}

enum agent_msg_type {
        /* requests, daemon -> agent */
        AGENT_REQ_PING = 1,  /* -> OK {VERSION} */
        AGENT_REQ_EXEC = 2,  /* {ARGV+, CWD?, ENV*, TIMEOUT_MS?, MAX_OUTPUT?} -> OK exec result */
        AGENT_REQ_SPAWN = 3, /* {ARGV+, CWD?, ENV*, STDIN?} -> OK process status */
        AGENT_REQ_POLL = 4,  /* {PROC_ID, STDOUT_FROM?, STDERR_FROM?, WAIT_MS?} -> OK poll result */
        AGENT_REQ_LIST = 5,  /* {} -> OK {PROC*} (each PROC a nested process status) */
        AGENT_REQ_SIGNAL = 6, /* {PROC_ID, SIGNAL} -> OK {} ; signal goes to the process group */
        AGENT_REQ_KILL = 7,   /* {PROC_ID} -> OK {} ; SIGKILL the group if running, then forget */
        AGENT_REQ_STDIN = 8,  /* {PROC_ID, DATA?, CLOSE?, TIMEOUT_MS?} -> OK {} once DATA is
                               * written; see "stdin" below */
        AGENT_REQ_ROOT = 9,   /* {} -> OK {} carrying, as SCM_RIGHTS, an O_PATH fd of the
                               * sandbox's "/" (the daemon's native file endpoints
                               * resolve paths beneath it) */
        AGENT_REQ_HOSTNAME = 10, /* {HOSTNAME} -> OK {} ; sets the sandbox's hostname, for a
                                  * runtime whose UTS namespace the host cannot enter
                                  * (gVisor's): a pooled sandbox gets its name */
        AGENT_REQ_QUIESCE = 11,  /* {} -> OK {} ; then PID 1 closes every connection and its
                                  * listener and removes its socket, until a file `resume`
                                  * appears beside it (src/init/quiesce.c): a runtime can then
                                  * save the sandbox with nothing of the host open in it */
        AGENT_REQ_STREAM = 12,   /* {PROC_ID, STDOUT_FROM?, STDERR_FROM?} -> OK stream start,
                                  * then stream frames until the end: see "streams" below */
        AGENT_REQ_RESIZE = 13,   /* {PROC_ID, PTY_COLS, PTY_ROWS} -> OK {} ; a terminal's size */
        AGENT_REQ_TCP = 14,      /* {PORT, V6?} -> a way to that TCP port on the sandbox's
                                  * loopback (src/init/tcp.c), one of two:
                                  * OK {} carrying, as SCM_RIGHTS, a new unconnected TCP
                                  * socket of the sandbox's network namespace (AF_INET6 with
                                  * V6), which the daemon connects (a PID 1 that shares the
                                  * host's kernel: ns);
                                  * or OK {} once PID 1 connected to the port (127.0.0.1,
                                  * then ::1; ERR NOT_FOUND when nothing listens), and from
                                  * then on the connection carries that TCP stream's bytes
                                  * both ways, relayed by PID 1, and takes no more requests
                                  * (a PID 1 whose sockets the host cannot use: gVisor's) */

        /* responses, agent -> daemon */
        AGENT_RESP_OK = 0x100,
        AGENT_RESP_ERR = 0x101, /* {ERR_CODE, MESSAGE} */
};

enum agent_tag {
        AGENT_T_ARGV = 1,        /* string, repeated, in order */
        AGENT_T_CWD = 2,         /* string; default /workspace; relative = against /workspace */
        AGENT_T_ENV = 3,         /* string "KEY=VALUE", repeated; overrides the defaults */
        AGENT_T_TIMEOUT_MS = 4,  /* u64; 0 or absent = no deadline */
        AGENT_T_MAX_OUTPUT = 5,  /* u64; exec bytes kept per stream, default/max 1 MiB */
        AGENT_T_STDIN = 6,       /* bool; spawn with a stdin pipe */
        AGENT_T_PROC_ID = 7,     /* string, agent_proc_id_valid() */
        AGENT_T_STDOUT_FROM = 8, /* u64 */
        AGENT_T_STDERR_FROM = 9, /* u64 */
        AGENT_T_WAIT_MS = 10,    /* u64, clamped to AGENT_MAX_WAIT_MS */
        AGENT_T_SIGNAL = 11,     /* u64, a signal number */
        AGENT_T_DATA = 12,       /* bytes */
        AGENT_T_CLOSE = 13,      /* bool */
        AGENT_T_HOSTNAME = 14,   /* string, 1..64 bytes of [A-Za-z0-9.-] */
        AGENT_T_PTY_COLS = 15,   /* u64, 1..AGENT_PTY_MAX; with PTY_ROWS: spawn on a terminal */
        AGENT_T_PTY_ROWS = 16,   /* u64, 1..AGENT_PTY_MAX */
        AGENT_T_LOSSLESS = 17,   /* bool: spawn whose output waits for a reader; in a status */
        AGENT_T_USER = 18,       /* string: run as this user, "name|uid[:group|gid]", 1..256
                                  * bytes, resolved in the sandbox's /etc/passwd, /etc/group */

        AGENT_T_EXIT_CODE = 20,      /* u64 holding an int32 (code, or 128+signal) */
        AGENT_T_STDOUT = 21,         /* bytes */
        AGENT_T_STDERR = 22,         /* bytes */
        AGENT_T_DURATION_MS = 23,    /* u64 */
        AGENT_T_TIMED_OUT = 24,      /* bool */
        AGENT_T_TRUNCATED = 25,      /* bool */
        AGENT_T_STATE = 26,          /* u64: 0 running, 1 exited */
        AGENT_T_STARTED_AT = 27,     /* u64 ms since the epoch (CLOCK_REALTIME) */
        AGENT_T_EXITED_AT = 28,      /* u64 ms since the epoch; only when exited */
        AGENT_T_STDOUT_NEXT = 29,    /* u64 */
        AGENT_T_STDERR_NEXT = 30,    /* u64 */
        AGENT_T_STDOUT_DROPPED = 31, /* u64 */
        AGENT_T_STDERR_DROPPED = 32, /* u64 */
        AGENT_T_PROC = 33,           /* nested payload: a process status */
        AGENT_T_VERSION = 34,        /* string */
        AGENT_T_EXEC = 35,           /* bool: a process status is an exec's record */
        AGENT_T_WRITTEN = 36,        /* u64: bytes of a STDIN request's DATA written */
        AGENT_T_PTY = 37,            /* bool: a process status is a terminal's */
        AGENT_T_PORT = 38,           /* u64, 1..65535: a TCP port (AGENT_REQ_TCP) */
        AGENT_T_V6 = 39,             /* bool: AGENT_REQ_TCP's socket is AF_INET6 */

        AGENT_T_ERR_CODE = 40, /* u64, enum agent_err */
        AGENT_T_MESSAGE = 41,  /* string, for humans */
};

/* Error classes; the daemon maps them to HTTP statuses. */
enum agent_err {
        AGENT_E_INVALID = 1,   /* 400 invalid_argument */
        AGENT_E_NOT_FOUND = 2, /* 404 process_not_found (unknown process id) */
        AGENT_E_CAP = 3,       /* 402 cap_reached (64 running processes) */
        AGENT_E_STATE = 4,     /* 409 invalid_state (stdin not open) */
        AGENT_E_INTERNAL = 5,  /* 500 */
        AGENT_E_TIMEOUT = 6,   /* 408 timeout (stdin not taken in time; carries WRITTEN) */
};

/* A process status (PROC, SPAWN result, and the head of a POLL result):
 *   PROC_ID, ARGV*, STATE, EXIT_CODE (exited only), STARTED_AT, EXITED_AT (exited only),
 *   and for an exec's record EXEC (true), TIMED_OUT, TRUNCATED.
 * An exec is not in the process table while its requester waits for it. It
 *   is entered there, as an exec's record, when that connection goes away
 *   before the whole answer was written to it (the daemon died or gave up):
 *   then LIST shows it, POLL reads it, SIGNAL and KILL reach it as they do a
 *   spawned process, so its result is not lost. Its output is what the
 *   answer would have held: the first MAX_OUTPUT bytes per stream, offsets
 *   from 0, nothing dropped; TRUNCATED when more was discarded.
 * A POLL result adds: STDOUT, STDERR, STDOUT_NEXT, STDERR_NEXT,
 *   STDOUT_DROPPED, STDERR_DROPPED.
 * An EXEC result: EXIT_CODE, STDOUT, STDERR, DURATION_MS, TIMED_OUT, TRUNCATED.
 *   A command that cannot be started (no such file, bad cwd) is a result,
 *   not an error: exit code 127 (not found) or 126 (other), and a line on
 *   stderr saying why. */

/* stdin: DATA is queued and written as the process reads it; the answer
 *   comes once all of it is in the pipe (then CLOSE closes it). TIMEOUT_MS
 *   (0 or absent: none) bounds the wait: when it runs out, whatever of DATA
 *   is not written yet is discarded, CLOSE is not done, and the answer is
 *   ERR TIMEOUT carrying WRITTEN (how many bytes of DATA the process got),
 *   so that the writer can resume from there. The same discarding happens,
 *   unanswered, when the request's connection goes away first: nothing
 *   queued outlives its request. One write per process at a time: a STDIN
 *   while another is pending is ERR STATE. */

/* streams: a STREAM request is answered OK with the process status and
 *   STDOUT_FROM, STDERR_FROM (where the stream starts: the asked offset, or
 *   the oldest byte still held) and STDOUT_DROPPED, STDERR_DROPPED (what lies
 *   between). From then on the connection carries stream frames, not agent
 *   frames, and takes no more requests: a 16-byte head (type u8, three zero
 *   bytes, length u32 big-endian, offset u64 big-endian), then length bytes.
 *   This is the framing the daemon serves to HTTP clients (docs/api.md),
 *   so it passes data frames through untouched:
 *     STDOUT, STDERR  bytes of a stream; offset is that of the first byte
 *     EXIT    payload: agent fields, the exited status and STDOUT_NEXT,
 *             STDERR_NEXT; sent once every byte was, then PID 1 closes
 *     ERROR   payload: agent fields ERR_CODE, MESSAGE; then PID 1 closes
 *   While a stream is attached, PID 1 reads a process's pipe at most
 *   AGENT_STREAM_WINDOW bytes ahead of what the slowest attached stream
 *   was sent; a lossless process is held so from its first byte, and keeps
 *   that hold where the last reader left it. */
enum agent_stream_type {
        AGENT_SF_START = 1, /* the daemon's, made from the OK answer */
        AGENT_SF_STDOUT = 2,
        AGENT_SF_STDERR = 3,
        AGENT_SF_EXIT = 4,
        AGENT_SF_ERROR = 5,
        AGENT_SF_KEEPALIVE = 6, /* the daemon's, after 15 s of nothing */
};
#define AGENT_SF_HEAD 16
#define AGENT_SF_MAX_LEN (8u << 20)    /* the longest frame either side may send */
#define AGENT_SF_DATA_MAX (256u << 10) /* the longest data frame PID 1 sends */

static inline void agent_sf_head_encode(uint8_t out[AGENT_SF_HEAD], uint8_t type, uint32_t len,
                                        uint64_t offset)
{
        out[0] = type;
        out[1] = out[2] = out[3] = 0;
        for (int i = 0; i < 4; i++)
                out[4 + i] = (uint8_t)(len >> (24 - 8 * i));
        for (int i = 0; i < 8; i++)
                out[8 + i] = (uint8_t)(offset >> (56 - 8 * i));
}

/* -EPROTO for a head with non-zero padding or a length past the cap. */
static inline int agent_sf_head_decode(const uint8_t in[AGENT_SF_HEAD], uint8_t *ret_type,
                                       uint32_t *ret_len, uint64_t *ret_offset)
{
        uint32_t len = 0;
        uint64_t off = 0;
        if (in[1] || in[2] || in[3])
                return -EPROTO;
        for (int i = 0; i < 4; i++)
                len = len << 8 | in[4 + i];
        for (int i = 0; i < 8; i++)
                off = off << 8 | in[8 + i];
        if (len > AGENT_SF_MAX_LEN)
                return -EPROTO;
        *ret_type = in[0];
        *ret_len = len;
        *ret_offset = off;
        return 0;
}

/* ---- encoding ---- */
struct agent_msg {
        uint16_t type;
        struct buf payload; /* fields */
};

/* Start a message; payload capped at AGENT_MAX_PAYLOAD. */
void agent_msg_init(struct agent_msg *m, uint16_t type);
void agent_msg_free(struct agent_msg *m);
int agent_put_bytes(struct agent_msg *m, uint16_t tag, const void *data, size_t len);
int agent_put_str(struct agent_msg *m, uint16_t tag, const char *s);
int agent_put_u64(struct agent_msg *m, uint16_t tag, uint64_t v);
int agent_put_bool(struct agent_msg *m, uint16_t tag, bool v);
/* Encode the 12-byte header for m into out. */
void agent_header_encode(const struct agent_msg *m, uint8_t out[AGENT_HEADER_SIZE]);
/* Send header + payload (blocking fd). 0 or -errno. */
int agent_msg_send(int fd, const struct agent_msg *m);

/* ---- decoding ---- */
/* Parse a header; -EPROTO on a bad one (flags/reserved non-zero, too long). */
int agent_header_decode(const uint8_t in[AGENT_HEADER_SIZE], uint16_t *ret_type, uint32_t *ret_len);
/* Read one whole frame (blocking fd). The payload is malloc'd. */
int agent_msg_recv(int fd, uint16_t *ret_type, uint8_t **ret_payload, uint32_t *ret_len);

struct agent_field {
        uint16_t tag;
        uint32_t len;
        const uint8_t *data; /* points into the payload */
};

/* Iterate fields: returns 1 and fills f, 0 at the end, -EPROTO when the
 * payload is malformed (a field running past the end). *pos starts at 0. */
int agent_next_field(const uint8_t *payload, uint32_t len, uint32_t *pos, struct agent_field *f);
/* Call fn on each field in order, at most AGENT_MAX_FIELDS of them. fn
 * returns < 0 to fail, > 0 to stop early, 0 to go on; agent_walk returns
 * fn's non-zero value, -EPROTO for a malformed payload, or 0 at the end. */
typedef int (*agent_field_fn)(void *ctx, const struct agent_field *f);
int agent_walk(const uint8_t *payload, uint32_t len, agent_field_fn fn, void *ctx);
/* Field value helpers; -EPROTO when the field has the wrong size. */
int agent_field_u64(const struct agent_field *f, uint64_t *ret);
int agent_field_bool(const struct agent_field *f, bool *ret);
/* Copy into a new NUL-terminated string; -EPROTO if it contains a NUL. */
int agent_field_str(const struct agent_field *f, char **ret);
/* Find the first field with tag; 1 found, 0 absent, -EPROTO malformed. */
int agent_find(const uint8_t *payload, uint32_t len, uint16_t tag, struct agent_field *ret);
