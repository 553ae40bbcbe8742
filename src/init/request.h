/* SPDX-License-Identifier: MIT */
/* Decoding of one request of the agent protocol (proto.h) into a struct
 * req, and the checks of its values that need no process table: the
 * command line's size, the environment's entries, the working directory.
 * What comes in is from the daemon, but is still checked field by field
 * (and fuzzed: tests/fuzz/fuzz-init.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../agent/proto.h"

struct req {
        char **argv;
        size_t argc;
        size_t argv_bytes;
        char **env;
        size_t envc;
        char *cwd;
        char *user;       /* AGENT_T_USER, as sent */
        const char *home; /* the HOME default (the user's, else /root) */
        uint64_t timeout_ms;
        uint64_t max_output;
        bool stdin_pipe;
        bool lossless;
        uint64_t pty_cols, pty_rows; /* 0: absent */
        char *proc_id;
        uint64_t from[2];
        uint64_t wait_ms;
        bool has_signal;
        uint64_t signal;
        const uint8_t *data; /* into the request payload */
        uint32_t data_len;
        bool close;
        char *hostname;
        uint64_t port; /* AGENT_T_PORT; 0: absent */
        bool v6;       /* AGENT_T_V6 */
        char msg[256]; /* why a value is invalid */
};

/* 0, -EPROTO (malformed: close the connection), -EINVAL (rq->msg set),
 * -ENOMEM. Fields of an unknown tag are skipped; a later field of the same
 * tag replaces an earlier one (argv and env entries add up). */
int req_parse(const uint8_t *payload, uint32_t len, struct req *rq);
void req_free(struct req *rq);
/* Set rq->msg; returns -EINVAL. */
__attribute__((format(printf, 2, 3))) int req_invalid(struct req *rq, const char *fmt, ...);
/* The environment of a command: PATH, HOME, LANG and HOSTNAME defaults
 * (and TERM on a terminal) overridden by the request's "KEY=VALUE"
 * entries (-EINVAL otherwise). */
int req_env(struct req *rq, char ***ret);
void req_env_free(char **env);
/* The user a command runs as (AGENT_T_USER): "name" or "uid", with an
 * optional ":group" or ":gid", names looked up in etc's passwd and group
 * files (the sandbox's /etc). 0 with the ids and the user's home (a static
 * buffer, or "/" when unknown), -EINVAL with rq->msg. */
int req_user(struct req *rq, const char *etc, uint32_t *ret_uid, uint32_t *ret_gid,
             const char **ret_home);
/* The working directory: absolute, or relative to INIT_CWD_DEFAULT. */
int req_cwd(struct req *rq, char **ret);
