/* SPDX-License-Identifier: MIT */
/* The placement store on etcd (placement.h), through its v3 JSON gateway
 * with libcurl: every call bounded in time and in the size of its answer,
 * tried on each endpoint in turn from the last one that answered. The
 * host's lease is kept by a thread of its own. */
#include "placement-etcd.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define MAX_ENDPOINTS 8
#define CREATE_TRIES 12
#define HOSTS_MAX 64

struct etcd {
        struct placement p;
        struct placement_config cfg;
        char *endpoints_copy;
        const char *endpoints[MAX_ENDPOINTS];
        size_t n_endpoints;
        atomic_size_t good; /* the endpoint that answered last */
        char prefix[128];
        /* The lease thread. */
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool stop;
        int64_t lease;          /* 0 = none; the lease thread's */
        int64_t published_free; /* the free slots hosts/<id> says */
};

static struct etcd *E(struct placement *p)
{
        return (struct etcd *)p;
}

/* ---- one call ---- */

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
        struct buf *b = ctx;
        /* Past ETCD_ANSWER_MAX: returning short makes curl fail the call. */
        return buf_append(b, data, size * n) < 0 ? 0 : size * n;
}

static CURL *easy(struct etcd *e, const char *url, const char *body, struct buf *out,
                  struct curl_slist *h, int64_t timeout_ms)
{
        CURL *c = curl_easy_init();
        if (!c)
                return NULL;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms / 2 + 1));
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
        if (e->cfg.ca_file)
                curl_easy_setopt(c, CURLOPT_CAINFO, e->cfg.ca_file);
        if (e->cfg.cert_file)
                curl_easy_setopt(c, CURLOPT_SSLCERT, e->cfg.cert_file);
        if (e->cfg.key_file)
                curl_easy_setopt(c, CURLOPT_SSLKEY, e->cfg.key_file);
        return c;
}

/* POST body to path on one endpoint; the answer into out. 0, or -EIO
 * (unreachable, or not 200 with a JSON body). */
static int post_one(struct etcd *e, size_t i, const char *path, const char *body, struct buf *out,
                    int64_t timeout_ms, long *ret_status)
{
        char url[512];
        if (snprintf(url, sizeof(url), "%s%s", e->endpoints[i], path) >= (int)sizeof(url))
                return -ENAMETOOLONG;
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        CURL *c = easy(e, url, body, out, h, timeout_ms);
        if (!c) {
                curl_slist_free_all(h);
                return -ENOMEM;
        }
        CURLcode cr = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        atomic_fetch_add(&e->p.calls, 1);
        atomic_fetch_add(&e->p.bytes, strlen(body) + out->len);
        *ret_status = status;
        return cr == CURLE_OK ? 0 : -EIO;
}

/* POST to the first endpoint that answers. An answer of etcd's (any
 * status with a body) is returned as it is: the parsers judge it. */
static int post_within(struct etcd *e, const char *path, const char *body, struct buf *out,
                       int64_t timeout_ms, struct sbx_error *err)
{
        if (!body)
                return sbx_error_set(err, ENOMEM, "etcd request"), -ENOMEM;
        size_t start = atomic_load(&e->good);
        for (size_t k = 0; k < e->n_endpoints; k++) {
                size_t i = (start + k) % e->n_endpoints;
                buf_free(out);
                buf_init(out, ETCD_ANSWER_MAX);
                long status = 0;
                int r = post_one(e, i, path, body, out, timeout_ms, &status);
                /* 503 and the like: a member without a leader; try another. */
                if (r == 0 && status >= 200 && status < 500) {
                        atomic_store(&e->good, i);
                        return 0;
                }
        }
        return sbx_error_say(err, EAGAIN, "etcd: no endpoint answered");
}

static int post(struct etcd *e, const char *path, const char *body, struct buf *out,
                struct sbx_error *err)
{
        return post_within(e, path, body, out, e->cfg.request_timeout_ms, err);
}

static int key_of(struct etcd *e, char *out, size_t cap, const char *kind, const char *a,
                  const char *b)
{
        int n = b ? snprintf(out, cap, "%s%s/%s/%s", e->prefix, kind, a, b)
                  : snprintf(out, cap, "%s%s/%s", e->prefix, kind, a);
        return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* One txn; ranges as etcd_parse_txn. */
static int txn(struct etcd *e, const struct etcd_txn *t, bool *ret_ok, struct etcd_range *ranges,
               size_t n_ranges, int64_t *ret_rev, struct sbx_error *err)
{
        _cleanup_free_ char *body = etcd_txn_json(t);
        struct buf out = {0};
        int r = post(e, "/v3/kv/txn", body, &out, err);
        if (r == 0)
                r = etcd_parse_txn(out.data, out.len, ret_ok, ranges, n_ranges, ret_rev, err);
        buf_free(&out);
        return r;
}

static int range(struct etcd *e, const char *key, bool prefix, struct etcd_range *ret,
                 struct sbx_error *err)
{
        _cleanup_free_ char *body = etcd_range_json(key, prefix, (int64_t)ret->cap);
        struct buf out = {0};
        int r = post(e, "/v3/kv/range", body, &out, err);
        if (r == 0)
                r = etcd_parse_range(out.data, out.len, ret, NULL, err);
        buf_free(&out);
        return r;
}

/* ---- the lease ---- */

static int put_host(struct etcd *e, int64_t lease, struct sbx_error *err)
{
        char key[ETCD_KEY_MAX];
        if (key_of(e, key, sizeof(key), "hosts", e->cfg.host_id, NULL) < 0)
                return -ENAMETOOLONG;
        int64_t free_slots = atomic_load(&e->p.free_slots);
        _cleanup_free_ char *v = etcd_host_json(e->cfg.url, free_slots);
        struct etcd_txn t = {.n_success = 1};
        t.success[0] = (struct etcd_op){.kind = ETCD_PUT, .key = key, .value = v, .lease = lease};
        bool ok = false;
        int r = txn(e, &t, &ok, NULL, 0, NULL, err);
        if (r == 0)
                e->published_free = free_slots;
        return r;
}

static int lease_call(struct etcd *e, const char *path, char *body, int64_t *ret_id,
                      int64_t *ret_ttl)
{
        struct buf out = {0};
        struct sbx_error err = {0};
        /* A renewal must not outlast the lease's margin on a member that
         * has no leader: the next endpoint is tried soon. */
        int64_t t = e->cfg.lease_ttl_ms / 5 > 1000 ? e->cfg.lease_ttl_ms / 5 : 1000;
        int r = post_within(e, path, body, &out,
                            t < e->cfg.request_timeout_ms ? t : e->cfg.request_timeout_ms, &err);
        free(body);
        if (r == 0)
                r = etcd_parse_lease(out.data, out.len, ret_id, ret_ttl, &err);
        buf_free(&out);
        return r;
}

/* How long this host may serve after a renewal sent at `sent` worked:
 * a margin short of the TTL, as etcd counts the TTL from when it got the
 * renewal, after we sent it. */
static void renewed(struct etcd *e, int64_t sent)
{
        int64_t margin = e->cfg.lease_ttl_ms / 5;
        atomic_store(&e->p.serve_until, sent + e->cfg.lease_ttl_ms - margin);
}

/* One round of the lease thread: grant and register when there is no
 * lease, else renew it. True when it worked. */
static bool lease_round(struct etcd *e)
{
        int64_t sent = mono_ms(), id = 0, ttl = 0;
        if (!e->lease) {
                int r = lease_call(e, "/v3/lease/grant",
                                   etcd_grant_json((e->cfg.lease_ttl_ms + 999) / 1000), &id, &ttl);
                if (r < 0 || id <= 0 || ttl <= 0 || put_host(e, id, NULL) < 0)
                        return false;
                e->lease = id;
                atomic_fetch_add(&e->p.epoch, 1);
                renewed(e, sent);
                return true;
        }
        if (lease_call(e, "/v3/lease/keepalive", etcd_lease_id_json(e->lease), &id, &ttl) < 0)
                return false;
        if (ttl > 0 && id == e->lease) {
                renewed(e, sent);
                /* Free slots changed: the host's record says so (under the
                 * same lease), for hosts choosing where to place. */
                if (atomic_load(&e->p.free_slots) != e->published_free)
                        put_host(e, e->lease, NULL);
                return true;
        }
        /* Expired: etcd forgot it, and this host is lost in its eyes. */
        e->lease = 0;
        atomic_store(&e->p.serve_until, 0);
        return false;
}

static void *lease_thread(void *arg)
{
        struct etcd *e = arg;
        pthread_mutex_lock(&e->lock);
        while (!e->stop) {
                pthread_mutex_unlock(&e->lock);
                bool ok = lease_round(e);
                pthread_mutex_lock(&e->lock);
                /* Renew four times a TTL; after a failure, again soon. */
                int64_t wait = ok ? e->cfg.lease_ttl_ms / 4 : 200;
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += wait / 1000;
                ts.tv_nsec += (wait % 1000) * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                if (!e->stop)
                        pthread_cond_timedwait(&e->wake, &e->lock, &ts);
        }
        pthread_mutex_unlock(&e->lock);
        return NULL;
}

static int etcd_start(struct placement *p, struct sbx_error *err)
{
        struct etcd *e = E(p);
        int r = pthread_create(&e->thread, NULL, lease_thread, e);
        if (r != 0)
                return sbx_error_set(err, r, "lease thread");
        e->thread_started = true;
        return 0;
}

static void etcd_close(struct placement *p)
{
        struct etcd *e = E(p);
        if (!e)
                return;
        if (e->thread_started) {
                pthread_mutex_lock(&e->lock);
                e->stop = true;
                pthread_cond_signal(&e->wake);
                pthread_mutex_unlock(&e->lock);
                pthread_join(e->thread, NULL);
        }
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->wake);
        free(e->endpoints_copy);
        free(e);
}

/* Every key under prefix (at most cap): *ret_kvs malloc'd, *ret_n of
 * them, *ret_plen the prefix's length. */
static int range_under(struct etcd *e, const char *prefix, size_t cap, struct etcd_kv **ret_kvs,
                       size_t *ret_n, size_t *ret_plen, struct sbx_error *err)
{
        struct etcd_kv *kvs = calloc(cap ? cap : 1, sizeof(*kvs));
        if (!kvs)
                return -ENOMEM;
        struct etcd_range rr = {.kvs = kvs, .cap = cap};
        int r = range(e, prefix, true, &rr, err);
        if (r < 0) {
                free(kvs);
                return r;
        }
        *ret_kvs = kvs;
        *ret_n = rr.n;
        *ret_plen = strlen(prefix);
        return 0;
}

/* ---- hosts ---- */

static int etcd_host_get(struct placement *p, const char *host, struct placement_host *ret,
                         struct sbx_error *err)
{
        struct etcd *e = E(p);
        char key[ETCD_KEY_MAX];
        if (key_of(e, key, sizeof(key), "hosts", host, NULL) < 0)
                return sbx_error_say(err, ENAMETOOLONG, "host id too long"), -ENAMETOOLONG;
        struct etcd_kv *kv = calloc(1, sizeof(*kv));
        if (!kv)
                return -ENOMEM;
        struct etcd_range rr = {.kvs = kv, .cap = 1};
        int r = range(e, key, false, &rr, err);
        if (r == 0 && rr.n == 1) {
                struct placement_host h = {0};
                snprintf(h.id, sizeof(h.id), "%s", host);
                r = etcd_host_parse(kv->value, kv->value_len, &h) < 0 ? -EBADMSG : 1;
                if (r == 1)
                        *ret = h;
                else
                        sbx_error_say(err, EBADMSG, "etcd: host %s: malformed record", host);
        }
        free(kv);
        return r;
}

static int etcd_hosts(struct placement *p, struct placement_host *ret, size_t max, size_t *ret_n,
                      struct sbx_error *err)
{
        struct etcd *e = E(p);
        char key[ETCD_KEY_MAX];
        snprintf(key, sizeof(key), "%shosts/", e->prefix);
        struct etcd_kv *kvs = NULL;
        size_t got = 0, n = 0, plen = 0;
        int r = range_under(e, key, max < HOSTS_MAX ? max : HOSTS_MAX, &kvs, &got, &plen, err);
        for (size_t i = 0; r == 0 && i < got; i++) {
                struct placement_host h = {0};
                const char *id = kvs[i].key + plen;
                if (kvs[i].key_len <= plen || strlen(id) >= sizeof(h.id) || !name_is_valid(id) ||
                    etcd_host_parse(kvs[i].value, kvs[i].value_len, &h) < 0)
                        continue; /* not a host's record: skipped */
                snprintf(h.id, sizeof(h.id), "%s", id);
                ret[n++] = h;
        }
        free(kvs);
        if (r == 0)
                *ret_n = n;
        return r;
}

/* ---- placements ---- */

/* A place/ key's value into ret (incarnation: its mod revision). */
static int place_from(const struct etcd_kv *kv, struct placement_rec *ret, struct sbx_error *err)
{
        if (etcd_place_parse(kv->value, kv->value_len, ret) < 0)
                return sbx_error_say(err, EBADMSG, "etcd: malformed placement record"), -EBADMSG;
        ret->incarnation = kv->mod_rev;
        return 0;
}

static int etcd_get(struct placement *p, const char *dep, const char *name,
                    struct placement_rec *ret, struct sbx_error *err)
{
        struct etcd *e = E(p);
        char key[ETCD_KEY_MAX];
        if (key_of(e, key, sizeof(key), "place", dep, name) < 0)
                return -ENAMETOOLONG;
        struct etcd_kv *kv = calloc(1, sizeof(*kv));
        if (!kv)
                return -ENOMEM;
        struct etcd_range rr = {.kvs = kv, .cap = 1};
        int r = range(e, key, false, &rr, err);
        if (r == 0 && rr.n == 1)
                r = place_from(kv, ret, err) < 0 ? -EBADMSG : 1;
        free(kv);
        return r;
}

/* The three keys a placement's change touches and what was read of them. */
struct place_keys {
        char place[ETCD_KEY_MAX], dep[ETCD_KEY_MAX], acct[ETCD_KEY_MAX];
        struct etcd_kv kv[3]; /* place, dep counter, account counter */
        struct etcd_range rr[3];
};

static int keys_init(struct etcd *e, struct place_keys *k, const char *dep, const char *name,
                     const char *account)
{
        if (key_of(e, k->place, sizeof(k->place), "place", dep, name) < 0 ||
            key_of(e, k->dep, sizeof(k->dep), "count/dep", dep, NULL) < 0 ||
            key_of(e, k->acct, sizeof(k->acct), "count/acct", account, NULL) < 0)
                return -ENAMETOOLONG;
        for (int i = 0; i < 3; i++)
                k->rr[i] = (struct etcd_range){.kvs = &k->kv[i], .cap = 1};
        return 0;
}

/* The three ranges, as a txn's failure branch (or a read of its own). */
static void keys_ranges(const struct place_keys *k, struct etcd_op *ops)
{
        ops[0] = (struct etcd_op){.kind = ETCD_RANGE, .key = k->place};
        ops[1] = (struct etcd_op){.kind = ETCD_RANGE, .key = k->dep};
        ops[2] = (struct etcd_op){.kind = ETCD_RANGE, .key = k->acct};
}

static int keys_read(struct etcd *e, struct place_keys *k, struct sbx_error *err)
{
        struct etcd_txn t = {.n_success = 3};
        keys_ranges(k, t.success);
        bool ok = false;
        return txn(e, &t, &ok, k->rr, 3, NULL, err);
}

/* A counter as read (absent: 0 at mod revision 0). */
static int counter(const struct etcd_range *rr, int64_t *ret_n, int64_t *ret_mod)
{
        *ret_n = 0;
        *ret_mod = 0;
        if (rr->n == 0)
                return 0;
        *ret_mod = rr->kvs[0].mod_rev;
        return etcd_counter_parse(rr->kvs[0].value, rr->kvs[0].value_len, ret_n);
}

static void backoff(int attempt)
{
        unsigned r = 0;
        if (getrandom(&r, sizeof(r), 0) != sizeof(r))
                r = (unsigned)mono_us();
        unsigned cap = 4u << (attempt < 6 ? attempt : 6);
        sleep_ms(1 + r % cap);
}

struct counts {
        int64_t dep, dep_mod, acct, acct_mod;
        char dep_v[24], acct_v[24];
};

static int counts_of(struct place_keys *k, int delta, struct counts *c, struct sbx_error *err)
{
        if (counter(&k->rr[1], &c->dep, &c->dep_mod) < 0 ||
            counter(&k->rr[2], &c->acct, &c->acct_mod) < 0)
                return sbx_error_say(err, EBADMSG, "etcd: malformed counter"), -EBADMSG;
        snprintf(c->dep_v, sizeof(c->dep_v), "%" PRId64, c->dep + delta > 0 ? c->dep + delta : 0);
        snprintf(c->acct_v, sizeof(c->acct_v), "%" PRId64,
                 c->acct + delta > 0 ? c->acct + delta : 0);
        return 0;
}

/* The txn that changes a placement and both counters as they were read,
 * the three reads again when it fails. */
static void counted_txn(struct place_keys *k, const struct counts *c, struct etcd_txn *t)
{
        t->n_cmp = 3;
        t->cmp[0] = (struct etcd_cmp){.key = k->place,
                                      .target = k->rr[0].n ? ETCD_MOD : ETCD_CREATE,
                                      .rev = k->rr[0].n ? k->kv[0].mod_rev : 0};
        t->cmp[1] = (struct etcd_cmp){.key = k->dep, .target = ETCD_MOD, .rev = c->dep_mod};
        t->cmp[2] = (struct etcd_cmp){.key = k->acct, .target = ETCD_MOD, .rev = c->acct_mod};
        t->success[1] = (struct etcd_op){.kind = ETCD_PUT, .key = k->dep, .value = c->dep_v};
        t->success[2] = (struct etcd_op){.kind = ETCD_PUT, .key = k->acct, .value = c->acct_v};
        t->n_success = 3;
        t->n_failure = 3;
        keys_ranges(k, t->failure);
}

static int caps_check(const struct placement_caps *caps, const struct counts *c,
                      struct sbx_error *err)
{
        if (caps->max_per_deployment > 0 && c->dep >= caps->max_per_deployment)
                return sbx_error_say(err, EDQUOT, "deployment has %" PRId64 " sandboxes, the cap",
                                     caps->max_per_deployment),
                       -EDQUOT;
        if (caps->account_limit > 0 && c->acct >= caps->account_limit)
                return sbx_error_say(err, EDQUOT, "account has %" PRId64 " sandboxes, its limit",
                                     caps->account_limit),
                       -EDQUOT;
        return 0;
}

/* The three keys of a placement's change, read. */
static int keys_open(struct etcd *e, const char *dep, const char *name, const char *account,
                     struct place_keys **ret, struct sbx_error *err)
{
        struct place_keys *k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        int r = keys_init(e, k, dep, name, account);
        if (r == 0)
                r = keys_read(e, k, err);
        if (r < 0) {
                free(k);
                return r;
        }
        *ret = k;
        return 0;
}

/* One round of a counted change: op on the place key, the counters as
 * c says. 1 when it is done, 0 to go again (it lost: k holds the three
 * keys read again), < 0 on an error or when every round was lost. */
static int counted_round(struct etcd *e, struct place_keys *k, const struct counts *c,
                         const struct etcd_op *op, int attempt, int64_t *ret_rev,
                         struct sbx_error *err)
{
        if (attempt >= CREATE_TRIES)
                return sbx_error_say(err, EAGAIN, "placement: lost every race");
        struct etcd_txn t = {0};
        counted_txn(k, c, &t);
        t.success[0] = *op;
        bool ok = false;
        int r = txn(e, &t, &ok, k->rr, 3, ret_rev, err);
        if (r < 0)
                return r;
        if (!ok)
                backoff(attempt);
        return ok;
}

static int etcd_create(struct placement *p, const char *dep, const char *name,
                       const struct placement_caps *caps, struct placement_rec *rec,
                       struct sbx_error *err)
{
        struct etcd *e = E(p);
        struct place_keys *k = NULL;
        int r = keys_open(e, dep, name, rec->account, &k, err);
        if (r < 0)
                return r;
        rec->generation = rec->generation ? rec->generation : 1;
        _cleanup_free_ char *v = etcd_place_json(rec);
        struct etcd_op put = {.kind = ETCD_PUT, .key = k->place, .value = v};
        for (int attempt = 0; r == 0; attempt++) {
                struct counts c;
                int64_t rev = 0;
                if (k->rr[0].n) {
                        r = place_from(&k->kv[0], rec, err) < 0 ? -EBADMSG : -EEXIST;
                        break;
                }
                if ((r = counts_of(k, 1, &c, err)) < 0 || (r = caps_check(caps, &c, err)) < 0)
                        break;
                r = counted_round(e, k, &c, &put, attempt, &rev, err);
                if (r == 1)
                        rec->incarnation = rev;
        }
        free(k);
        return r < 0 ? r : 0;
}

static int etcd_rehome(struct placement *p, const char *dep, const char *name,
                       const struct placement_rec *old, struct placement_rec *rec,
                       struct sbx_error *err)
{
        struct etcd *e = E(p);
        char key[ETCD_KEY_MAX];
        if (key_of(e, key, sizeof(key), "place", dep, name) < 0)
                return -ENAMETOOLONG;
        rec->generation = old->generation + 1;
        _cleanup_free_ char *v = etcd_place_json(rec);
        struct etcd_txn t = {.n_cmp = 1, .n_success = 1};
        t.cmp[0] = (struct etcd_cmp){.key = key, .target = ETCD_MOD, .rev = old->incarnation};
        t.success[0] = (struct etcd_op){.kind = ETCD_PUT, .key = key, .value = v};
        bool ok = false;
        int64_t rev = 0;
        int r = txn(e, &t, &ok, NULL, 0, &rev, err);
        if (r == 0 && !ok)
                return sbx_error_say(err, EAGAIN, "placement changed meanwhile"), -EAGAIN;
        if (r == 0)
                rec->incarnation = rev;
        return r;
}

static int etcd_remove(struct placement *p, const char *dep, const char *name,
                       const struct placement_rec *old, struct sbx_error *err)
{
        struct etcd *e = E(p);
        struct place_keys *k = NULL;
        int r = keys_open(e, dep, name, old->account, &k, err);
        if (r < 0)
                return r;
        struct etcd_op del = {.kind = ETCD_DELETE, .key = k->place};
        for (int attempt = 0; r == 0; attempt++) {
                struct counts c;
                /* Gone, or placed anew since: not ours to remove. */
                if (!k->rr[0].n || k->kv[0].mod_rev != old->incarnation)
                        break;
                if ((r = counts_of(k, -1, &c, err)) < 0)
                        break;
                r = counted_round(e, k, &c, &del, attempt, NULL, err);
        }
        free(k);
        return r < 0 ? r : 0;
}

static int etcd_list(struct placement *p, const char *dep, char (*names)[SBX_NAME_MAX + 1],
                     struct placement_rec *recs, size_t max, size_t *ret_n, struct sbx_error *err)
{
        struct etcd *e = E(p);
        char key[ETCD_KEY_MAX];
        if (key_of(e, key, sizeof(key), "place", dep, "") < 0)
                return -ENAMETOOLONG;
        struct etcd_kv *kvs = NULL;
        size_t got = 0, n = 0, plen = 0;
        int r =
            range_under(e, key, max < ETCD_MAX_KVS ? max : ETCD_MAX_KVS, &kvs, &got, &plen, err);
        for (size_t i = 0; r == 0 && i < got; i++) {
                const char *nm = kvs[i].key + plen;
                if (kvs[i].key_len <= plen || strlen(nm) > SBX_NAME_MAX || !name_is_valid(nm) ||
                    place_from(&kvs[i], &recs[n], NULL) < 0)
                        continue;
                snprintf(names[n], SBX_NAME_MAX + 1, "%s", nm);
                n++;
        }
        free(kvs);
        if (r == 0)
                *ret_n = n;
        return r;
}

static const struct placement_ops etcd_ops = {
    .start = etcd_start,
    .close = etcd_close,
    .host_get = etcd_host_get,
    .hosts = etcd_hosts,
    .get = etcd_get,
    .create = etcd_create,
    .rehome = etcd_rehome,
    .remove = etcd_remove,
    .list = etcd_list,
};

static int split_endpoints(struct etcd *e, struct sbx_error *err)
{
        e->endpoints_copy = strdup(e->cfg.endpoints);
        if (!e->endpoints_copy)
                return sbx_error_set(err, ENOMEM, "endpoints"), -ENOMEM;
        char *save = NULL;
        for (char *t = strtok_r(e->endpoints_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                size_t n = strlen(t);
                while (n > 0 && t[n - 1] == '/')
                        t[--n] = '\0';
                if (strncmp(t, "http://", 7) && strncmp(t, "https://", 8))
                        return sbx_error_say(err, EINVAL,
                                             "cluster_etcd: '%s' is not an http(s):// URL", t);
                if (e->n_endpoints == MAX_ENDPOINTS)
                        return sbx_error_say(err, EINVAL, "cluster_etcd: at most %d endpoints",
                                             MAX_ENDPOINTS);
                e->endpoints[e->n_endpoints++] = t;
        }
        if (!e->n_endpoints)
                return sbx_error_say(err, EINVAL, "cluster_etcd: no endpoint");
        return 0;
}

int placement_etcd_open(const struct placement_config *cfg, struct placement **ret,
                        struct sbx_error *err)
{
        if (!cfg->host_id || !name_is_valid(cfg->host_id))
                return sbx_error_say(err, EINVAL, "host_id: not a valid name");
        if (!cfg->url || strlen(cfg->url) >= PLACE_URL_MAX)
                return sbx_error_say(err, EINVAL, "url: too long for a cluster host");
        struct etcd *e = calloc(1, sizeof(*e));
        if (!e)
                return sbx_error_set(err, ENOMEM, "placement");
        e->p.ops = &etcd_ops;
        e->cfg = *cfg;
        if (e->cfg.request_timeout_ms <= 0)
                e->cfg.request_timeout_ms = 2000;
        pthread_mutex_init(&e->lock, NULL);
        pthread_cond_init(&e->wake, NULL);
        snprintf(e->prefix, sizeof(e->prefix), "%s", cfg->prefix ? cfg->prefix : "/sandboxd/");
        int r = split_endpoints(e, err);
        if (r < 0) {
                etcd_close(&e->p);
                return r;
        }
        *ret = &e->p;
        return 0;
}
