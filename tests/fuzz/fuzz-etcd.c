/* SPDX-License-Identifier: MIT */
/* libFuzzer target for what etcd (or anything that answers on its
 * endpoints) sends a cluster host: the gateway's answers and the records
 * stored in it (store/placement-etcd-wire.c).
 *
 * The first input byte picks a parser: 0 range, 1 txn, 2 lease, 3 a
 * placement record, 4 a host record, 5 a counter, 6 base64. What parses
 * is checked to be within its bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/store/placement-etcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_range(const char *s, size_t n)
{
        static struct etcd_kv kvs[4];
        struct etcd_range rr = {.kvs = kvs, .cap = 4};
        struct sbx_error err = {0};
        int64_t rev;
        if (etcd_parse_range(s, n, &rr, &rev, &err) == 0) {
                if (rr.n > 4 || rev < 0)
                        abort();
                for (size_t i = 0; i < rr.n; i++)
                        if (kvs[i].key_len > ETCD_KEY_MAX || kvs[i].value_len > ETCD_VALUE_MAX)
                                abort();
        }
}

static void fuzz_txn(const char *s, size_t n)
{
        static struct etcd_kv kvs[3];
        struct etcd_range rr[3] = {
            {.kvs = &kvs[0], .cap = 1}, {.kvs = &kvs[1], .cap = 1}, {.kvs = &kvs[2], .cap = 1}};
        struct sbx_error err = {0};
        bool ok;
        int64_t rev;
        if (etcd_parse_txn(s, n, &ok, rr, 3, &rev, &err) == 0)
                for (int i = 0; i < 3; i++)
                        if (rr[i].n > 1)
                                abort();
}

static void fuzz_values(int mode, const char *s, size_t n)
{
        struct placement_rec r;
        struct placement_host h;
        int64_t v;
        char out[256];
        size_t len;
        switch (mode) {
        case 3:
                if (etcd_place_parse(s, n, &r) == 0 && (!name_is_valid(r.host) || r.generation < 1))
                        abort();
                break;
        case 4:
                if (etcd_host_parse(s, n, &h) == 0 && strncmp(h.url, "http", 4))
                        abort();
                break;
        case 5:
                if (etcd_counter_parse(s, n, &v) == 0 && v < 0)
                        abort();
                break;
        default:
                if (etcd_unb64(s, n, out, sizeof(out), &len) == 0 && len > sizeof(out))
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        const char *s = (const char *)data + 1;
        size_t n = size - 1;
        struct sbx_error err = {0};
        int64_t id, ttl;
        switch (data[0] % 7) {
        case 0:
                fuzz_range(s, n);
                break;
        case 1:
                fuzz_txn(s, n);
                break;
        case 2:
                if (etcd_parse_lease(s, n, &id, &ttl, &err) == 0 && ttl < 0)
                        abort();
                break;
        default:
                fuzz_values(data[0] % 7, s, n);
        }
        return 0;
}
