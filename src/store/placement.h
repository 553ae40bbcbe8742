/* SPDX-License-Identifier: MIT */
/* The placement store: what spans the hosts of a cluster, and nothing
 * else (SQLite stays each host's own store). One engine today, etcd
 * (placement-etcd.c, over its v3 JSON gateway); another would be one more
 * struct placement_ops.
 *
 * What it holds, under one key prefix:
 *   hosts/<host>               the host's data-plane URL and free slots,
 *                              bound to the host's lease: it vanishes when
 *                              the host stops renewing it
 *   place/<deployment>/<name>  which host holds the sandbox, its account,
 *                              class, generation (+1 per re-homing) and
 *                              whether it was recreated; no lease: it
 *                              outlives its host
 *   count/dep/<deployment>     the number of place/ records of a
 *   count/acct/<account>       deployment and of an account, changed in
 *                              the same transaction as the records, so a
 *                              cap holds across hosts exactly
 * Every change is a compare-and-swap: it names the version it read, and
 * fails (-EAGAIN) when another host changed it first.
 *
 * The incarnation of a placement is the store's revision of the write
 * that made it (create or re-home): unique across the cluster, never
 * reused. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/names.h"
#include "../common/util.h"

#define PLACE_URL_MAX 256
#define PLACE_RECREATED_MAX 16

struct placement;

struct placement_host {
        char id[SBX_NAME_MAX + 1];
        char url[PLACE_URL_MAX];
        int64_t free; /* slots it has for new sandboxes */
};

struct placement_rec {
        char host[SBX_NAME_MAX + 1];
        char account[SBX_NAME_MAX + 1];
        char sandbox_class[SBX_NAME_MAX + 1];
        uint64_t generation;                 /* 1 at creation, +1 per re-homing */
        char recreated[PLACE_RECREATED_MAX]; /* "" or "host_lost" */
        int64_t incarnation;                 /* the revision of its last write */
};

/* The caps a new placement must fit under; 0 = none. */
struct placement_caps {
        int64_t max_per_deployment;
        int64_t account_limit;
};

struct placement_config {
        const char *endpoints; /* comma-separated base URLs of the engine */
        const char *prefix;    /* key prefix, e.g. "/sandboxd/" */
        const char *host_id;   /* this host (a name, names.h) */
        const char *url;       /* this host's data-plane URL */
        int64_t lease_ttl_ms;
        const char *ca_file, *cert_file, *key_file; /* TLS to the engine; NULL = none */
        int64_t request_timeout_ms;                 /* each call to the engine */
};

struct placement_ops {
        /* Start keeping this host registered under a lease (a thread). */
        int (*start)(struct placement *p, struct sbx_error *err);
        void (*close)(struct placement *p);
        /* 1 and *ret when host is registered (its lease lives), 0 if not. */
        int (*host_get)(struct placement *p, const char *host, struct placement_host *ret,
                        struct sbx_error *err);
        /* Up to max live hosts. */
        int (*hosts)(struct placement *p, struct placement_host *ret, size_t max, size_t *ret_n,
                     struct sbx_error *err);
        /* 1 and *ret when the name is placed, 0 when it is not. */
        int (*get)(struct placement *p, const char *dep, const char *name,
                   struct placement_rec *ret, struct sbx_error *err);
        /* Place a new name (rec->host etc.); 0 and ret->incarnation set,
         * -EEXIST when it is placed already (*ret is that record),
         * -EDQUOT over a cap, -EAGAIN when it lost every race. */
        int (*create)(struct placement *p, const char *dep, const char *name,
                      const struct placement_caps *caps, struct placement_rec *rec,
                      struct sbx_error *err);
        /* Move old (as read) to rec->host, generation + 1; -EAGAIN when
         * old is no longer what is stored. */
        int (*rehome)(struct placement *p, const char *dep, const char *name,
                      const struct placement_rec *old, struct placement_rec *rec,
                      struct sbx_error *err);
        /* Remove old (as read), counters down; 0 also when it is gone. */
        int (*remove)(struct placement *p, const char *dep, const char *name,
                      const struct placement_rec *old, struct sbx_error *err);
        /* Every placement of deployment dep (at most max). */
        int (*list)(struct placement *p, const char *dep, char (*names)[SBX_NAME_MAX + 1],
                    struct placement_rec *recs, size_t max, size_t *ret_n, struct sbx_error *err);
};

struct placement {
        const struct placement_ops *ops;
        /* This host's lease: it is surely alive in the engine's eyes
         * until serve_until (mono_ms; 0 = no lease), which placement_serving
         * compares with the clock, so that a renewal stuck in a call
         * cannot stretch it. epoch counts the leases it has had. */
        atomic_int_fast64_t serve_until;
        atomic_uint_fast64_t epoch;
        /* This host's free slots, as its owner last published them: the
         * engine records them with the host when they change. */
        atomic_int_fast64_t free_slots;
        atomic_uint_fast64_t calls; /* requests made to the engine */
        atomic_uint_fast64_t bytes; /* bytes sent and received */
};

static inline bool placement_serving(struct placement *p)
{
        return mono_ms() < atomic_load(&p->serve_until);
}

/* The etcd engine (placement-etcd.c). */
int placement_etcd_open(const struct placement_config *cfg, struct placement **ret,
                        struct sbx_error *err);
