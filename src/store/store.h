/* SPDX-License-Identifier: MIT */
/* Durable records: SQLite in WAL mode, <state>/sandboxd.db. The store
 * holds records only, never a secret, and gives them no meaning: a
 * sandbox's state is the manager's number, kept as it is given. One
 * connection, serialized by a mutex: every call is short. A cluster would
 * put another engine behind this same interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/names.h"
#include "../common/util.h"

struct store;

struct store_sandbox {
        uint64_t id; /* never reused */
        char deployment[SBX_NAME_MAX + 1];
        char account[SBX_NAME_MAX + 1];
        char name[SBX_NAME_MAX + 1];
        char sandbox_class[SBX_NAME_MAX + 1];
        char image[65];
        char network[8];               /* "nat" or "none" */
        char driver[SBX_NAME_MAX + 1]; /* the runtime driver it was created under */
        int state;                     /* the manager's (enum sbx_state) */
        int64_t created_at;            /* ms since the epoch */
        int64_t last_active_at;
        int64_t state_since;
        uint32_t slot; /* index of its host uid range */
};

struct store_account {
        char account[SBX_NAME_MAX + 1];
        bool enabled;
        int64_t limit; /* sandboxes across deployments; 0 = none */
};

int store_open(const char *path, struct store **ret, struct sbx_error *err);
void store_close(struct store *st);

/* Insert; sb->id is assigned. -EEXIST when (deployment, name) exists. */
int store_sandbox_insert(struct store *st, struct store_sandbox *sb, struct sbx_error *err);
/* Give a sandbox started ahead of time (a pool entry, deployment "") its
 * owner and name; created_at and last_active_at become `now`. */
int store_sandbox_assign(struct store *st, uint64_t id, const char *deployment, const char *account,
                         const char *name, const char *sandbox_class, int64_t now,
                         struct sbx_error *err);
int store_sandbox_set_state(struct store *st, uint64_t id, int state, int64_t since,
                            struct sbx_error *err);
int store_sandbox_touch(struct store *st, uint64_t id, int64_t last_active_at,
                        struct sbx_error *err);
int store_sandbox_delete(struct store *st, uint64_t id, struct sbx_error *err);
/* Every record; *ret malloc'd. */
int store_sandbox_list(struct store *st, struct store_sandbox **ret, size_t *ret_n,
                       struct sbx_error *err);

/* A sandbox's egress policy (text form, runtime/egress.h): put one (NULL:
 * remove it); get: 1 and *ret malloc'd, or 0 when it has none. It goes
 * with the sandbox's record. */
int store_egress_put(struct store *st, uint64_t id, const char *policy, struct sbx_error *err);
int store_egress_get(struct store *st, uint64_t id, char **ret, struct sbx_error *err);

/* Accounts: enable/disable with an optional limit. */
int store_account_put(struct store *st, const struct store_account *a, struct sbx_error *err);
/* 1 found, 0 unknown. */
int store_account_get(struct store *st, const char *account, struct store_account *ret,
                      struct sbx_error *err);
int store_account_list(struct store *st, struct store_account **ret, size_t *ret_n,
                       struct sbx_error *err);

/* A preview share of a sandbox's port (src/api/shares.c): the record only;
 * the token's MAC is made from it under the daemon's key, never stored. */
struct store_share {
        char id[33]; /* hex */
        char deployment[SBX_NAME_MAX + 1];
        char name[SBX_NAME_MAX + 1];
        uint64_t sandbox_id; /* the incarnation it was made for */
        uint16_t port;
        bool public;
        int64_t created_at; /* ms since the epoch */
        int64_t expires_at;
};

/* Insert sh (and drop the shares expired by its created_at). */
int store_share_put(struct store *st, const struct store_share *sh, struct sbx_error *err);
/* 1 found, 0 none, -errno. */
int store_share_get(struct store *st, const char *id, struct store_share *ret,
                    struct sbx_error *err);
/* How many went (0 or 1), -errno. */
int store_share_delete(struct store *st, const char *id, const char *deployment, const char *name,
                       struct sbx_error *err);
/* A sandbox name's shares, oldest first, at most max. */
int store_share_list(struct store *st, const char *deployment, const char *name,
                     struct store_share *ret, size_t max, size_t *ret_n, struct sbx_error *err);
