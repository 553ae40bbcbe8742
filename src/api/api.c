/* SPDX-License-Identifier: MIT */
/* The API object: what it is built from and what it owns. */
#include "api-internal.h"

#include <stdlib.h>

int api_new(const struct api_config *cfg, struct manager *mgr, struct keyring *keys,
            struct api **ret, struct sbx_error *err)
{
        struct api *a = calloc(1, sizeof(*a));
        if (!a)
                return sbx_error_set(err, ENOMEM, "api");
        a->cfg = *cfg;
        a->mgr = mgr;
        if (cfg->rate_limit > 0) {
                int r = ratelimit_new(cfg->rate_limit, cfg->rate_burst, &a->ratelimit);
                if (r < 0) {
                        free(a);
                        return sbx_error_set(err, -r, "rate_limit %lld / rate_burst %lld",
                                             (long long)cfg->rate_limit,
                                             (long long)cfg->rate_burst);
                }
        }
        pthread_mutex_init(&a->keys_lock, NULL);
        a->keys = keys;
        *ret = a;
        return 0;
}

void api_free(struct api *a)
{
        if (!a)
                return;
        api_stop(a);
        keyring_free(a->keys);
        ratelimit_free(a->ratelimit);
        pthread_mutex_destroy(&a->keys_lock);
        free(a);
}
