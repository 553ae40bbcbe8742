/* SPDX-License-Identifier: MIT */
/* The pure part of the etcd engine (placement-etcd-wire.c): what goes to
 * etcd's v3 JSON gateway and what comes back, with no I/O, so the unit
 * test and the fuzzer reach all of it.
 *
 * The gateway speaks proto3 JSON: keys and values are base64, int64s are
 * decimal strings, and members at their default (false, 0, empty) are
 * left out. Every answer is treated as hostile: bounded in size, each
 * member's type checked, numbers in range, base64 strict. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../common/util.h"
#include "placement.h"

#define ETCD_KEY_MAX 512
#define ETCD_VALUE_MAX 4096
#define ETCD_ANSWER_MAX (1 << 20)
#define ETCD_MAX_KVS 1024
#define ETCD_MAX_OPS 8

struct etcd_kv {
        char key[ETCD_KEY_MAX + 1];
        size_t key_len;
        char value[ETCD_VALUE_MAX + 1]; /* NUL-terminated; value_len counts the bytes */
        size_t value_len;
        int64_t create_rev, mod_rev, version, lease;
};

/* One range's result. kvs is the caller's array of cap entries. */
struct etcd_range {
        struct etcd_kv *kvs;
        size_t cap, n;
        int64_t count; /* what etcd says matched (may exceed n) */
};

enum etcd_target { ETCD_CREATE, ETCD_MOD };
struct etcd_cmp {
        const char *key;
        enum etcd_target target;
        int64_t rev; /* EQUAL to this */
};
enum etcd_op_kind { ETCD_PUT, ETCD_DELETE, ETCD_RANGE };
struct etcd_op {
        enum etcd_op_kind kind;
        const char *key;
        const char *value; /* PUT */
        int64_t lease;     /* PUT; 0 = none */
        bool prefix;       /* RANGE: every key starting with key */
};
struct etcd_txn {
        struct etcd_cmp cmp[ETCD_MAX_OPS];
        size_t n_cmp;
        struct etcd_op success[ETCD_MAX_OPS];
        size_t n_success;
        struct etcd_op failure[ETCD_MAX_OPS];
        size_t n_failure;
};

/* base64 of n bytes; malloc'd. */
char *etcd_b64(const void *data, size_t n);
/* Strict base64 (padding required) into out (cap bytes, NUL added past
 * the data when there is room); -EBADMSG or -E2BIG. */
int etcd_unb64(const char *s, size_t len, char *out, size_t cap, size_t *ret_len);
/* The key just past every key starting with prefix (range_end). */
int etcd_prefix_end(const char *prefix, char *out, size_t cap);

/* Request bodies; malloc'd JSON text, NULL on ENOMEM. */
char *etcd_range_json(const char *key, bool prefix, int64_t limit);
char *etcd_txn_json(const struct etcd_txn *t);
char *etcd_grant_json(int64_t ttl_s);
char *etcd_lease_id_json(int64_t id);

/* Answers. Each returns 0, -EBADMSG for a malformed one, -EIO with err
 * set for an error etcd reports. *ret_rev: header.revision. */
int etcd_parse_range(const char *body, size_t len, struct etcd_range *ret, int64_t *ret_rev,
                     struct sbx_error *err);
/* A txn: whether it succeeded, and the ranges of its responses in order
 * (ranges[i] for the i-th response when it is a range; others skipped).
 * n_ranges: entries of ranges. */
int etcd_parse_txn(const char *body, size_t len, bool *ret_ok, struct etcd_range *ranges,
                   size_t n_ranges, int64_t *ret_rev, struct sbx_error *err);
/* A lease grant or keepalive: its id and TTL (0 = the lease is gone). */
int etcd_parse_lease(const char *body, size_t len, int64_t *ret_id, int64_t *ret_ttl,
                     struct sbx_error *err);

/* The values stored. */
char *etcd_place_json(const struct placement_rec *r);
int etcd_place_parse(const char *v, size_t len, struct placement_rec *ret);
char *etcd_host_json(const char *url, int64_t free_slots);
int etcd_host_parse(const char *v, size_t len, struct placement_host *ret);
/* A counter's value: decimal digits; absent = 0. */
int etcd_counter_parse(const char *v, size_t len, int64_t *ret);
