/* SPDX-License-Identifier: MIT */
/* The rt_* calls: each picks the spec's driver and calls through its table
 * of operations (runtime.h). The drivers are opened once, in rt_open, and
 * never change afterwards, so lookups need no lock. An optional operation
 * a driver lacks is -ENOTSUP here, never a NULL call.
 *
 * What every driver shares is made here once: the host's side of NAT (the
 * instance's nftables table, forwarding, the DNS forwarder), which every
 * driver's NAT sandboxes use the same way (net.h). */
#include "runtime.h"

#include "dns.h"
#include "egress-nft.h"
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rt {
        size_t n;
        struct {
                const struct rt_driver *ops;
                void *state;
        } d[RT_MAX_DRIVERS];
        struct ns_net_cfg net;
        struct dns_forwarder *dns;
        struct egress *egress; /* the NAT sandboxes' egress policies and logs */
        /* Drivers the host cannot run, and why. */
        size_t n_off;
        struct {
                const char *name;
                char why[sizeof(((struct sbx_error *)0)->msg)];
        } off[RT_MAX_DRIVERS];
};

static const struct rt_driver *const builtin[] = {&rt_ns_driver};

/* Every required operation there, and the capability bits that name an
 * optional one matching it. */
static bool driver_is_valid(const struct rt_driver *d)
{
        if (!d || !d->name || !d->open || !d->close || !d->start || !d->freeze || !d->thaw ||
            !d->stop || !d->destroy || !d->is_alive || !d->any_alive || !d->dial)
                return false;
        bool hostname = d->caps & RT_CAP_HOSTNAME, checkpoint = d->caps & RT_CAP_CHECKPOINT;
        return hostname == !!d->set_hostname && checkpoint == !!d->checkpoint &&
               checkpoint == !!d->restore;
}

/* NAT: the sandboxes' resolv.conf, the forwarder's sockets (so its port is
 * known), then the instance's nftables table. Before any thread: this runs
 * nft. A forwarder port in use is an error: another sandboxd's forwarder
 * would not serve this instance's sandboxes. An nftables table once
 * installed stays on failure (the next start replaces it). */
static int open_network(const struct rt_config *cfg, struct ns_net_cfg *net,
                        struct dns_forwarder **ret_dns, struct sbx_error *err)
{
        int r = net_host_plan(cfg->net_range, cfg->instance, cfg->dns, cfg->dns_port != 0,
                              cfg->dns_upstream && *cfg->dns_upstream, net, err);
        if (r == 0)
                r = net_open_ranges(cfg->net_open_ranges, net, err);
        if (r < 0)
                return r;
        /* A forwarder also where sandboxes resolve elsewhere: an egress
         * policy that names domains needs one. */
        if (net->forward || (net->table[0] && cfg->dns_port != 0)) {
                uint16_t port = cfg->dns_port > 0 ? (uint16_t)cfg->dns_port : 0;
                if ((r = dns_forwarder_open(port, ret_dns, &net->dns_port, err)) < 0)
                        return r;
        }
        if ((r = net_host_install(net, err)) < 0) {
                dns_forwarder_stop(*ret_dns);
                *ret_dns = NULL;
        }
        return r;
}

static int open_drivers(struct rt *rt, const struct rt_config *cfg, struct sbx_error *err);

int rt_open(const struct rt_config *cfg, struct rt **ret, struct sbx_error *err)
{
        if (!cfg || !ret)
                return sbx_error_set(err, EINVAL, "rt_open: no configuration");
        struct rt *rt = calloc(1, sizeof(*rt));
        if (!rt)
                return sbx_error_set(err, ENOMEM, "rt_open");
        int r = open_network(cfg, &rt->net, &rt->dns, err);
        if (r < 0) {
                free(rt);
                return r;
        }
        struct rt_config c = *cfg;
        c.net = &rt->net;
        if ((r = open_drivers(rt, &c, err)) < 0)
                return r; /* rt closed */
        if (rt->net.enabled &&
            (r = egress_open(rt->net.table, rt->dns != NULL, &rt->egress, err)) < 0) {
                rt_close(rt);
                return r;
        }
        /* After the drivers' forks: the forwarder is a thread of the daemon. */
        struct sbx_error why = {0};
        if (rt->dns && (r = dns_forwarder_start(rt->dns, rt->net.base, rt->net.prefix,
                                                cfg->dns_upstream, rt->egress, &why)) < 0) {
                if (rt->net.forward) {
                        if (err)
                                *err = why;
                        rt_close(rt);
                        return r;
                }
                /* Only for egress policies: without an upstream they
                 * cannot name domains. */
                dns_forwarder_stop(rt->dns);
                rt->dns = NULL;
                egress_close(rt->egress);
                rt->egress = NULL;
                if ((r = egress_open(rt->net.table, false, &rt->egress, err)) < 0) {
                        rt_close(rt);
                        return r;
                }
        }
        *ret = rt;
        return 0;
}

static int open_drivers(struct rt *rt, const struct rt_config *cfg, struct sbx_error *err)
{
        const struct rt_driver *const *list = cfg->drivers ? cfg->drivers : builtin;
        size_t n = cfg->drivers ? cfg->n_drivers : ARRAY_SIZE(builtin);
        if (n == 0 || n > RT_MAX_DRIVERS)
                return sbx_error_set(err, EINVAL, "rt_open: %zu drivers (1 to %d)", n,
                                     RT_MAX_DRIVERS);
        for (size_t i = 0; i < n; i++) {
                const struct rt_driver *ops = list[i];
                if (!driver_is_valid(ops)) {
                        rt_close(rt);
                        return sbx_error_set(err, EINVAL, "runtime driver %zu is incomplete", i);
                }
                if (rt_driver(rt, ops->name) || rt_unavailable(rt, ops->name)) {
                        rt_close(rt);
                        return sbx_error_set(err, EEXIST, "runtime driver `%s` twice", ops->name);
                }
                struct sbx_error why = {0};
                int r = ops->open(cfg, &rt->d[rt->n].state, &why);
                if (r == -ENOTSUP) {
                        rt->off[rt->n_off].name = ops->name;
                        snprintf(rt->off[rt->n_off].why, sizeof(rt->off[0].why), "%s",
                                 why.msg[0] ? why.msg : "the host cannot run it");
                        rt->n_off++;
                        continue;
                }
                if (r < 0) {
                        if (err)
                                *err = why;
                        rt_close(rt);
                        return r;
                }
                rt->d[rt->n].ops = ops;
                rt->n++;
        }
        if (rt->n == 0) {
                sbx_error_set(err, ENOTSUP, "no runtime driver can run here (`%s`: %s)",
                              rt->off[0].name, rt->off[0].why);
                rt_close(rt);
                return -ENOTSUP;
        }
        return 0;
}

const char *rt_unavailable(const struct rt *rt, const char *name)
{
        if (!rt || !name)
                return NULL;
        for (size_t i = 0; i < rt->n_off; i++)
                if (strcmp(rt->off[i].name, name) == 0)
                        return rt->off[i].why;
        return NULL;
}

void rt_close(struct rt *rt)
{
        if (!rt)
                return;
        /* Sandboxes outlive the daemon and need the table: it goes only
         * with the last one of the instance. Best effort (a failure leaves
         * a table that matches no interface). */
        bool keep_net = rt->n == 0 || rt_any_alive(rt);
        dns_forwarder_stop(rt->dns);
        egress_close(rt->egress);
        for (size_t i = rt->n; i-- > 0;)
                rt->d[i].ops->close(rt->d[i].state);
        if (!keep_net)
                net_host_remove(&rt->net, NULL);
        free(rt);
}

static int find(const struct rt *rt, const char *name)
{
        if (!rt || rt->n == 0)
                return -1;
        if (!name)
                return 0;
        for (size_t i = 0; i < rt->n; i++)
                if (strcmp(rt->d[i].ops->name, name) == 0)
                        return (int)i;
        return -1;
}

const struct rt_driver *rt_driver(const struct rt *rt, const char *name)
{
        int i = find(rt, name);
        return i < 0 ? NULL : rt->d[i].ops;
}

/* The driver of spec, or -ENOTSUP naming the one asked for. */
static int pick(const struct rt *rt, const struct rt_spec *spec, struct sbx_error *err)
{
        if (!spec)
                return sbx_error_set(err, EINVAL, "runtime: no sandbox spec");
        int i = find(rt, spec->driver);
        if (i < 0)
                return sbx_error_set(err, ENOTSUP, "runtime driver `%s` is not available",
                                     spec->driver ? spec->driver : "(default)");
        return i;
}

#define CALL(rt, spec, err, op, ...)                                                               \
        ({                                                                                         \
                int i_ = pick(rt, spec, err);                                                      \
                i_ < 0 ? i_ : (rt)->d[i_].ops->op((rt)->d[i_].state, spec, ##__VA_ARGS__);         \
        })

int rt_start(struct rt *rt, const struct rt_spec *spec, pid_t *ret_pid, struct sbx_error *err)
{
        return CALL(rt, spec, err, start, ret_pid, err);
}

int rt_freeze(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err)
{
        return CALL(rt, spec, err, freeze, err);
}

int rt_thaw(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err)
{
        return CALL(rt, spec, err, thaw, err);
}

int rt_stop(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err)
{
        return CALL(rt, spec, err, stop, err);
}

int rt_destroy(struct rt *rt, const struct rt_spec *spec, struct sbx_error *err)
{
        return CALL(rt, spec, err, destroy, err);
}

int rt_dial(struct rt *rt, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        return CALL(rt, spec, err, dial, ret_fd, err);
}

bool rt_is_alive(struct rt *rt, const struct rt_spec *spec)
{
        /* A sandbox of a driver this daemon lacks cannot be known dead. */
        int i = pick(rt, spec, NULL);
        return i < 0 ? true : rt->d[i].ops->is_alive(rt->d[i].state, spec);
}

bool rt_any_alive(struct rt *rt)
{
        if (!rt)
                return true;
        for (size_t i = 0; i < rt->n; i++)
                if (rt->d[i].ops->any_alive(rt->d[i].state))
                        return true;
        return false;
}

int rt_set_hostname(struct rt *rt, const struct rt_spec *spec, pid_t init_pid, const char *name,
                    struct sbx_error *err)
{
        int i = pick(rt, spec, err);
        if (i < 0)
                return i;
        if (!rt->d[i].ops->set_hostname)
                return sbx_error_set(err, ENOTSUP, "driver `%s` cannot rename a sandbox",
                                     rt->d[i].ops->name);
        return rt->d[i].ops->set_hostname(rt->d[i].state, spec, init_pid, name, err);
}

int rt_root(struct rt *rt, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        int i = pick(rt, spec, err);
        if (i < 0)
                return i;
        if (!rt->d[i].ops->root)
                return sbx_error_set(err, ENOTSUP, "driver `%s` has no root handle",
                                     rt->d[i].ops->name);
        return rt->d[i].ops->root(rt->d[i].state, spec, ret_fd, err);
}

int rt_checkpoint(struct rt *rt, const struct rt_spec *spec, const char *dir, uint32_t flags,
                  struct sbx_error *err)
{
        int i = pick(rt, spec, err);
        if (i < 0)
                return i;
        if (!rt->d[i].ops->checkpoint)
                return sbx_error_set(err, ENOTSUP, "driver `%s` cannot checkpoint",
                                     rt->d[i].ops->name);
        return rt->d[i].ops->checkpoint(rt->d[i].state, spec, dir, flags, err);
}

int rt_restore(struct rt *rt, const struct rt_spec *spec, const char *dir, pid_t *ret_pid,
               struct sbx_error *err)
{
        int i = pick(rt, spec, err);
        if (i < 0)
                return i;
        if (!rt->d[i].ops->restore)
                return sbx_error_set(err, ENOTSUP, "driver `%s` cannot restore",
                                     rt->d[i].ops->name);
        return rt->d[i].ops->restore(rt->d[i].state, spec, dir, ret_pid, err);
}

uint32_t rt_caps(const struct rt *rt, const struct rt_spec *spec)
{
        int i = spec ? find(rt, spec->driver) : -1;
        return i < 0 ? 0 : rt->d[i].ops->caps;
}

/* ---- egress (egress.c) ---- */

int rt_egress_set(struct rt *rt, const struct rt_spec *spec, const struct egress_policy *p,
                  struct sbx_error *err)
{
        bool active = p && egress_policy_active(p);
        if (spec->limits.network != RT_NET_NAT || !rt->egress)
                return active
                           ? sbx_error_say(err, ENOTSUP, "an egress policy needs network \"nat\"")
                           : 0;
        uint32_t addr;
        int r = net_addr_load(spec->dir, &addr);
        if (r == -ENOENT && !rt_is_alive(rt, spec))
                return 0; /* never started: its next start registers it */
        if (r < 0)
                return sbx_error_set(err, -r, "the sandbox's network address");
        return egress_set(rt->egress, spec->id, addr, p, err);
}

void rt_egress_forget(struct rt *rt, const struct rt_spec *spec)
{
        if (rt->egress)
                egress_forget(rt->egress, spec->id);
}

int rt_egress_log(struct rt *rt, const struct rt_spec *spec, struct egress_event *out, size_t max,
                  size_t *ret_n)
{
        *ret_n = 0;
        if (!rt->egress)
                return 0;
        int r = egress_log(rt->egress, spec->id, out, max, ret_n);
        return r == -ENOENT ? 0 : r;
}

void rt_egress_stats(struct rt *rt, struct egress_stats *ret)
{
        egress_stats(rt ? rt->egress : NULL, ret);
}
