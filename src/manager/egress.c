/* SPDX-License-Identifier: MIT */
/* A sandbox's egress policy (runtime/egress.h): kept in the store, given
 * to the runtime at every start of the sandbox (and to one this daemon
 * finds running at its own start), changed by its owner, and its log. */
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../runtime/egress-nft.h"
#include "manager-internal.h"

/* sb's policy from the store into *ret (malloc'd, NULL when it has none). */
static int policy_load(struct manager *m, const struct sandbox *sb, struct egress_policy **ret,
                       struct sbx_error *err)
{
        *ret = NULL;
        _cleanup_free_ char *text = NULL;
        int r = store_egress_get(m->store, sb->rec.id, &text, err);
        if (r <= 0)
                return r;
        struct egress_policy *p = malloc(sizeof(*p));
        if (!p)
                return sbx_error_set(err, ENOMEM, "egress policy");
        if ((r = egress_policy_from_text(text, p, err)) < 0) {
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void sandbox_egress_apply_locked(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        if (spec.limits.network != RT_NET_NAT)
                return;
        struct sbx_error err = {0};
        struct egress_policy *p = NULL;
        int r = policy_load(m, sb, &p, &err);
        if (r == 0)
                r = rt_egress_set(m->rt, &spec, p, &err);
        free(p);
        /* Its new connections go nowhere until it is registered. */
        if (r < 0)
                log_warn("sandbox name=%s: egress policy not applied, no new connection passes: "
                         "%s",
                         sb->rec.name, err.msg);
}

void sandbox_egress_forget_locked(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        rt_egress_forget(m->rt, &spec);
}

int sandbox_egress_text(const struct egress_policy *p, char **ret, struct sbx_error *err)
{
        struct buf b;
        buf_init(&b, 128 * 1024);
        int r = egress_policy_to_text(p, &b);
        if (r < 0) {
                buf_free(&b);
                return sbx_error_set(err, -r, "egress policy");
        }
        *ret = (char *)b.data;
        return 0;
}

int sandbox_egress_store(struct manager *m, const struct sandbox *sb, const char *text,
                         struct sbx_error *err)
{
        return store_egress_put(m->store, sb->rec.id, text, err) < 0 ? -EAGAIN : 0;
}

int sandbox_egress_equal(struct manager *m, const struct sandbox *sb, const char *text)
{
        _cleanup_free_ char *have = NULL;
        if (store_egress_get(m->store, sb->rec.id, &have, NULL) < 0)
                return -EAGAIN;
        return have && text ? !strcmp(have, text) : have == text;
}

int sandbox_egress_copy(struct manager *m, const struct sandbox *from, char **ret)
{
        return store_egress_get(m->store, from->rec.id, ret, NULL) < 0 ? -EAGAIN : 0;
}

int mgr_network_get(struct manager *m, struct sandbox *sb, struct egress_policy *ret,
                    struct sbx_error *err)
{
        struct egress_policy *p = NULL;
        pthread_mutex_lock(&sb->lock);
        int r = policy_load(m, sb, &p, err);
        pthread_mutex_unlock(&sb->lock);
        if (r < 0)
                return -EAGAIN;
        if (p)
                *ret = *p;
        else
                egress_policy_init(ret);
        free(p);
        return 0;
}

int mgr_network_set(struct manager *m, struct sandbox *sb, const struct egress_policy *p,
                    struct sbx_error *err)
{
        _cleanup_free_ char *text = NULL;
        bool active = egress_policy_active(p);
        if (active && sandbox_egress_text(p, &text, err) < 0)
                return -EINVAL;
        struct rt_spec spec;
        pthread_mutex_lock(&sb->lock);
        sandbox_spec(m, sb, NULL, &spec);
        int r = 0;
        if (spec.limits.network != RT_NET_NAT) {
                sbx_error_say(err, ENOTSUP, "sandbox '%s' has network none: it reaches nothing",
                              sb->rec.name);
                r = -EINVAL;
        }
        /* The rules first: a policy the runtime cannot enforce is never
         * recorded as the one in force. */
        if (r == 0 && (r = rt_egress_set(m->rt, &spec, p, err)) < 0)
                r = r == -ENOTSUP ? -EINVAL : -EAGAIN;
        if (r == 0 && (r = sandbox_egress_store(m, sb, text, err)) < 0) {
                /* Back to what the store says. */
                sandbox_egress_apply_locked(m, sb);
        }
        pthread_mutex_unlock(&sb->lock);
        return r;
}

int mgr_network_log(struct manager *m, struct sandbox *sb, struct egress_event *out, size_t max,
                    size_t *ret_n)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        return rt_egress_log(m->rt, &spec, out, max, ret_n);
}

void mgr_egress_stats(struct manager *m, struct egress_stats *ret)
{
        rt_egress_stats(m->rt, ret);
}
