/* SPDX-License-Identifier: MIT */
/* etcd's v3 JSON gateway, the bytes only (placement-etcd.h). */
#include "placement-etcd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

/* ---- base64 ---- */

char *etcd_b64(const void *data, size_t n)
{
        if (n > ETCD_ANSWER_MAX)
                return NULL;
        char *out = malloc(4 * ((n + 2) / 3) + 1);
        if (out)
                EVP_EncodeBlock((unsigned char *)out, data, (int)n);
        return out;
}

static bool b64_char(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '+' || c == '/';
}

int etcd_unb64(const char *s, size_t len, char *out, size_t cap, size_t *ret_len)
{
        if (len % 4)
                return -EBADMSG;
        size_t pad = 0;
        for (size_t i = 0; i < len; i++) {
                bool tail = i >= len - 2 && s[i] == '=';
                if (tail)
                        pad++;
                else if (!b64_char(s[i]) || pad)
                        return -EBADMSG; /* a character after '=' too */
        }
        size_t n = len / 4 * 3 - pad;
        if (n > cap)
                return -E2BIG;
        unsigned char *tmp = malloc(len / 4 * 3 + 1);
        if (!tmp)
                return -ENOMEM;
        int r = len ? EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)len) : 0;
        if (r < 0 || (size_t)r != len / 4 * 3) {
                free(tmp);
                return -EBADMSG;
        }
        memcpy(out, tmp, n);
        free(tmp);
        if (n < cap)
                out[n] = '\0';
        *ret_len = n;
        return 0;
}

int etcd_prefix_end(const char *prefix, char *out, size_t cap)
{
        size_t n = strlen(prefix);
        if (n == 0 || n >= cap)
                return -EINVAL;
        memcpy(out, prefix, n + 1);
        /* The last byte that can be incremented, what follows it dropped. */
        while (n > 0 && (unsigned char)out[n - 1] == 0xff)
                out[--n] = '\0';
        if (n == 0)
                return -EINVAL;
        out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
        return 0;
}

/* ---- requests ---- */

static json_t *b64_string(const char *s)
{
        _cleanup_free_ char *b = etcd_b64(s, strlen(s));
        return b ? json_string(b) : NULL;
}

static json_t *int64_string(int64_t v)
{
        char s[24];
        snprintf(s, sizeof(s), "%" PRId64, v);
        return json_string(s);
}

static char *dump(json_t *j)
{
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        return s;
}

static json_t *range_obj(const char *key, bool prefix, int64_t limit)
{
        json_t *o = json_object();
        json_object_set_new(o, "key", b64_string(key));
        if (prefix) {
                char end[ETCD_KEY_MAX + 1];
                if (etcd_prefix_end(key, end, sizeof(end)) < 0) {
                        json_decref(o);
                        return NULL;
                }
                json_object_set_new(o, "range_end", b64_string(end));
        }
        if (limit > 0)
                json_object_set_new(o, "limit", int64_string(limit));
        return o;
}

char *etcd_range_json(const char *key, bool prefix, int64_t limit)
{
        return dump(range_obj(key, prefix, limit));
}

static json_t *op_obj(const struct etcd_op *op)
{
        json_t *o;
        switch (op->kind) {
        case ETCD_PUT:
                o = json_pack("{s:o,s:o}", "key", b64_string(op->key), "value",
                              b64_string(op->value ? op->value : ""));
                if (o && op->lease)
                        json_object_set_new(o, "lease", int64_string(op->lease));
                return json_pack("{s:o}", "request_put", o);
        case ETCD_DELETE:
                return json_pack("{s:{s:o}}", "request_delete_range", "key", b64_string(op->key));
        case ETCD_RANGE:
                return json_pack("{s:o}", "request_range", range_obj(op->key, op->prefix, 0));
        }
        return NULL;
}

static json_t *ops_array(const struct etcd_op *ops, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, op_obj(&ops[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

char *etcd_txn_json(const struct etcd_txn *t)
{
        if (t->n_cmp > ETCD_MAX_OPS || t->n_success > ETCD_MAX_OPS || t->n_failure > ETCD_MAX_OPS)
                return NULL;
        json_t *cmp = json_array();
        for (size_t i = 0; cmp && i < t->n_cmp; i++) {
                const struct etcd_cmp *c = &t->cmp[i];
                bool create = c->target == ETCD_CREATE;
                json_array_append_new(cmp, json_pack("{s:o,s:s,s:s,s:o}", "key", b64_string(c->key),
                                                     "target", create ? "CREATE" : "MOD", "result",
                                                     "EQUAL",
                                                     create ? "create_revision" : "mod_revision",
                                                     int64_string(c->rev)));
        }
        return dump(json_pack("{s:o,s:o,s:o}", "compare", cmp, "success",
                              ops_array(t->success, t->n_success), "failure",
                              ops_array(t->failure, t->n_failure)));
}

char *etcd_grant_json(int64_t ttl_s)
{
        return dump(json_pack("{s:o}", "TTL", int64_string(ttl_s)));
}

char *etcd_lease_id_json(int64_t id)
{
        return dump(json_pack("{s:o}", "ID", int64_string(id)));
}

/* ---- answers ---- */

/* An int64 member: absent is 0 (proto3 leaves defaults out); a decimal
 * string or a JSON integer, nothing else. */
static int member_int64(json_t *o, const char *key, int64_t *ret)
{
        json_t *v = json_object_get(o, key);
        *ret = 0;
        if (!v)
                return 0;
        if (json_is_integer(v)) {
                *ret = json_integer_value(v);
                return 0;
        }
        if (!json_is_string(v))
                return -EBADMSG;
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);
        /* strtoll would take leading blanks and a '+': not etcd's form. */
        if (n == 0 || n > 20 || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')))
                return -EBADMSG;
        char *end;
        errno = 0;
        long long x = strtoll(s, &end, 10);
        if (errno || end != s + n)
                return -EBADMSG;
        *ret = x;
        return 0;
}

static int member_bytes(json_t *o, const char *key, char *out, size_t cap, size_t *ret_len)
{
        json_t *v = json_object_get(o, key);
        *ret_len = 0;
        out[0] = '\0';
        if (!v)
                return 0;
        if (!json_is_string(v))
                return -EBADMSG;
        int r = etcd_unb64(json_string_value(v), json_string_length(v), out, cap, ret_len);
        return r == -E2BIG ? -EBADMSG : r;
}

static json_t *load(const char *body, size_t len)
{
        if (!body || len > ETCD_ANSWER_MAX)
                return NULL;
        json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* {"error": ..., "code": n, "message": ...}: what the gateway answers a
 * failed call. The message is etcd's, bounded, never echoed whole. */
static int reported_error(json_t *j, struct sbx_error *err)
{
        json_t *msg = json_object_get(j, "message");
        if (!msg)
                msg = json_object_get(j, "error");
        if (!msg && !json_object_get(j, "code"))
                return 0;
        const char *m = json_is_string(msg) ? json_string_value(msg) : "(no message)";
        return sbx_error_say(err, EIO, "etcd: %.200s", m), -EIO;
}

static int header_rev(json_t *j, int64_t *ret_rev)
{
        json_t *h = json_object_get(j, "header");
        int64_t rev = 0;
        if (h && (!json_is_object(h) || member_int64(h, "revision", &rev) < 0 || rev < 0))
                return -EBADMSG;
        if (ret_rev)
                *ret_rev = rev;
        return 0;
}

static int parse_kv(json_t *o, struct etcd_kv *kv)
{
        if (!json_is_object(o))
                return -EBADMSG;
        if (member_bytes(o, "key", kv->key, ETCD_KEY_MAX, &kv->key_len) < 0 ||
            member_bytes(o, "value", kv->value, ETCD_VALUE_MAX, &kv->value_len) < 0)
                return -EBADMSG;
        kv->key[kv->key_len] = '\0';
        kv->value[kv->value_len] = '\0';
        if (member_int64(o, "create_revision", &kv->create_rev) < 0 ||
            member_int64(o, "mod_revision", &kv->mod_rev) < 0 ||
            member_int64(o, "version", &kv->version) < 0 ||
            member_int64(o, "lease", &kv->lease) < 0)
                return -EBADMSG;
        if (kv->key_len == 0 || kv->create_rev < 0 || kv->mod_rev < 0)
                return -EBADMSG;
        return 0;
}

/* A RangeResponse object into r. */
static int range_body(json_t *o, struct etcd_range *r)
{
        if (!json_is_object(o))
                return -EBADMSG;
        json_t *kvs = json_object_get(o, "kvs");
        if (kvs && !json_is_array(kvs))
                return -EBADMSG;
        r->n = 0;
        if (member_int64(o, "count", &r->count) < 0 || r->count < 0)
                return -EBADMSG;
        size_t n = kvs ? json_array_size(kvs) : 0;
        if (n > r->cap || n > ETCD_MAX_KVS)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++)
                if (parse_kv(json_array_get(kvs, i), &r->kvs[i]) < 0)
                        return -EBADMSG;
        r->n = n;
        return 0;
}

/* An answer's object, its error or its header: 0 and *ret_j (to be
 * json_decref'd) when there is neither error nor a bad header. */
static int answer(const char *body, size_t len, int64_t *ret_rev, json_t **ret_j,
                  struct sbx_error *err)
{
        json_t *j = load(body, len);
        if (!j)
                return sbx_error_say(err, EBADMSG, "etcd: not a JSON object");
        int r = reported_error(j, err);
        if (r == 0)
                r = header_rev(j, ret_rev);
        *ret_j = j;
        return r;
}

int etcd_parse_range(const char *body, size_t len, struct etcd_range *ret, int64_t *ret_rev,
                     struct sbx_error *err)
{
        json_t *j = NULL;
        int r = answer(body, len, ret_rev, &j, err);
        if (r == 0)
                r = range_body(j, ret);
        json_decref(j);
        if (r == -EBADMSG)
                sbx_error_say(err, EBADMSG, "etcd: malformed range answer");
        return r;
}

static int txn_responses(json_t *resps, struct etcd_range *ranges, size_t n_ranges)
{
        if (resps && !json_is_array(resps))
                return -EBADMSG;
        size_t n = resps ? json_array_size(resps) : 0;
        if (n > ETCD_MAX_OPS)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                json_t *o = json_array_get(resps, i);
                if (!json_is_object(o) || json_object_size(o) > 1)
                        return -EBADMSG;
                json_t *rr = json_object_get(o, "response_range");
                if (rr && i < n_ranges && range_body(rr, &ranges[i]) < 0)
                        return -EBADMSG;
        }
        return 0;
}

int etcd_parse_txn(const char *body, size_t len, bool *ret_ok, struct etcd_range *ranges,
                   size_t n_ranges, int64_t *ret_rev, struct sbx_error *err)
{
        json_t *j = NULL;
        int r = answer(body, len, ret_rev, &j, err);
        json_t *ok = json_object_get(j, "succeeded");
        if (r == 0 && ok && !json_is_boolean(ok))
                r = -EBADMSG;
        for (size_t i = 0; i < n_ranges; i++)
                ranges[i].n = 0;
        if (r == 0)
                r = txn_responses(json_object_get(j, "responses"), ranges, n_ranges);
        if (r == 0)
                *ret_ok = ok && json_is_true(ok);
        json_decref(j);
        if (r == -EBADMSG)
                sbx_error_say(err, EBADMSG, "etcd: malformed txn answer");
        return r;
}

int etcd_parse_lease(const char *body, size_t len, int64_t *ret_id, int64_t *ret_ttl,
                     struct sbx_error *err)
{
        json_t *j = load(body, len);
        if (!j)
                return sbx_error_say(err, EBADMSG, "etcd: not a JSON object"), -EBADMSG;
        int r = reported_error(j, err);
        /* A keepalive answers {"result": {...}}, a grant the object itself. */
        json_t *o = json_object_get(j, "result");
        if (!o)
                o = j;
        int64_t id = 0, ttl = 0;
        if (r == 0 && (!json_is_object(o) || member_int64(o, "ID", &id) < 0 ||
                       member_int64(o, "TTL", &ttl) < 0 || ttl < 0))
                r = -EBADMSG;
        json_decref(j);
        if (r == -EBADMSG)
                return sbx_error_say(err, EBADMSG, "etcd: malformed lease answer"), -EBADMSG;
        if (r == 0) {
                *ret_id = id;
                *ret_ttl = ttl;
        }
        return r;
}

/* ---- values ---- */

char *etcd_place_json(const struct placement_rec *r)
{
        return dump(json_pack("{s:s,s:s,s:s,s:I,s:s}", "host", r->host, "account", r->account,
                              "class", r->sandbox_class, "generation", (json_int_t)r->generation,
                              "recreated", r->recreated));
}

static int name_member(json_t *o, const char *key, char *out, size_t cap, bool allow_empty)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_string(v) || json_string_length(v) >= cap)
                return -EBADMSG;
        snprintf(out, cap, "%s", json_string_value(v));
        if (!out[0])
                return allow_empty ? 0 : -EBADMSG;
        return strlen(out) == json_string_length(v) && name_is_valid(out) ? 0 : -EBADMSG;
}

int etcd_place_parse(const char *v, size_t len, struct placement_rec *ret)
{
        json_t *j = load(v, len);
        if (!j)
                return -EBADMSG;
        struct placement_rec r = {0};
        json_t *gen = json_object_get(j, "generation");
        json_t *rec = json_object_get(j, "recreated");
        int e = 0;
        if (name_member(j, "host", r.host, sizeof(r.host), false) < 0 ||
            name_member(j, "account", r.account, sizeof(r.account), false) < 0 ||
            name_member(j, "class", r.sandbox_class, sizeof(r.sandbox_class), false) < 0 ||
            !json_is_integer(gen) || json_integer_value(gen) < 1)
                e = -EBADMSG;
        else if (rec && (!json_is_string(rec) ||
                         (json_string_length(rec) && strcmp(json_string_value(rec), "host_lost"))))
                e = -EBADMSG;
        if (e == 0) {
                r.generation = (uint64_t)json_integer_value(gen);
                if (rec)
                        snprintf(r.recreated, sizeof(r.recreated), "%s", json_string_value(rec));
                *ret = r;
        }
        json_decref(j);
        return e;
}

char *etcd_host_json(const char *url, int64_t free_slots)
{
        return dump(json_pack("{s:s,s:I}", "url", url, "free", (json_int_t)free_slots));
}

/* A data-plane URL: http(s)://, printable, no spaces or quotes. */
static bool url_ok(const char *u)
{
        if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))
                return false;
        for (const char *p = u; *p; p++)
                if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f || *p == '"' ||
                    *p == '\\')
                        return false;
        return true;
}

int etcd_host_parse(const char *v, size_t len, struct placement_host *ret)
{
        json_t *j = load(v, len);
        if (!j)
                return -EBADMSG;
        json_t *url = json_object_get(j, "url");
        json_t *fr = json_object_get(j, "free");
        int e = -EBADMSG;
        if (json_is_string(url) && json_string_length(url) < sizeof(ret->url) &&
            strlen(json_string_value(url)) == json_string_length(url) &&
            url_ok(json_string_value(url)) && json_is_integer(fr) && json_integer_value(fr) >= 0) {
                snprintf(ret->url, sizeof(ret->url), "%s", json_string_value(url));
                ret->free = json_integer_value(fr);
                e = 0;
        }
        json_decref(j);
        return e;
}

int etcd_counter_parse(const char *v, size_t len, int64_t *ret)
{
        if (len == 0) {
                *ret = 0;
                return 0;
        }
        if (len > 18)
                return -EBADMSG;
        int64_t x = 0;
        for (size_t i = 0; i < len; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return -EBADMSG;
                x = x * 10 + (v[i] - '0');
        }
        *ret = x;
        return 0;
}
