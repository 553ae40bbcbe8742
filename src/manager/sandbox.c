/* SPDX-License-Identifier: MIT */
/* One sandbox as the manager holds it: its references, its directory, its
 * class, and what the runtime is told about it. */
#include "manager-internal.h"

#include <stdio.h>
#include <string.h>

#include "../common/log.h"

const struct mgr_class *class_find(const struct manager *m, const char *name)
{
        for (size_t i = 0; i < m->n_classes; i++)
                if (!strcmp(m->classes[i].name, name))
                        return &m->classes[i];
        return NULL;
}

const char *class_image(const struct manager *m, const struct mgr_class *cls)
{
        return cls->image ? cls->image : m->cfg.default_image;
}

const char *class_driver(const struct manager *m, const struct mgr_class *cls)
{
        const struct rt_driver *first = rt_driver(m->rt, NULL);
        return cls->driver ? cls->driver : first ? first->name : "";
}

/* Why the host cannot run driver: rt_unavailable's reason, or that this
 * daemon has no such driver at all. */
static const char *why_unavailable(const struct manager *m, const char *driver)
{
        const char *why = rt_unavailable(m->rt, driver);
        return why ? why : "this sandboxd has no such runtime driver";
}

int class_unavailable(const struct manager *m, const struct mgr_class *cls, struct sbx_error *err)
{
        const char *driver = class_driver(m, cls);
        if (rt_driver(m->rt, driver))
                return 0;
        return sbx_error_say(err, ENOTSUP, "sandbox class '%s' is not available on this host: %s",
                             cls->name, why_unavailable(m, driver));
}

int sandbox_driver_check(const struct manager *m, const struct sandbox *sb, struct sbx_error *err)
{
        if (rt_driver(m->rt, sb->rec.driver))
                return 0;
        return sbx_error_say(err, ENOTSUP,
                             "sandbox '%s' was created under the %s driver, which is not "
                             "available on this host: %s",
                             sb->rec.name, sb->rec.driver, why_unavailable(m, sb->rec.driver));
}

static int sandbox_dial(void *ctx, int *ret_fd, struct sbx_error *err)
{
        struct sandbox *sb = ctx;
        struct rt_spec spec;
        sandbox_spec(sb->m, sb, NULL, &spec);
        return rt_dial(sb->m->rt, &spec, ret_fd, err);
}

int sandbox_new(struct manager *m, const struct store_sandbox *rec, struct sandbox **ret)
{
        struct sandbox *sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        /* Never a truncated path: rt_destroy removes this directory, and a
         * cut one could name another sandbox's. */
        int r = path_printf(sb->dir, sizeof(sb->dir), "%s/%llu", m->sandboxes_dir,
                            (unsigned long long)rec->id);
        if (r < 0) {
                free(sb);
                return r;
        }
        sb->rec = *rec;
        if ((unsigned)sb->rec.state >= SBX_NSTATES)
                sb->rec.state = SBX_STOPPED; /* a state this version does not know */
        sb->cls = class_find(m, rec->sandbox_class);
        pthread_mutex_init(&sb->lock, NULL);
        atomic_init(&sb->refs, 1); /* the table's reference */
        atomic_init(&sb->last_active, rec->last_active_at);
        sb->persisted_active = rec->last_active_at;
        sb->m = m;
        sb->peer = (struct agent_peer){.dial = sandbox_dial, .ctx = sb};
        *ret = sb;
        return 0;
}

void sandbox_ref(struct sandbox *sb)
{
        atomic_fetch_add(&sb->refs, 1);
}

void sandbox_unref(struct sandbox *sb)
{
        if (atomic_fetch_sub(&sb->refs, 1) == 1) {
                pthread_mutex_destroy(&sb->lock);
                rt_image_config_free(&sb->img_cfg);
                free(sb);
        }
}

const char *default_network(const struct manager *m)
{
        return m->cfg.limits.network == RT_NET_NAT ? "nat" : "none";
}

/* A record's network, "" (made before networks were per sandbox) meaning
 * the daemon's default. */
const char *network_of(const struct manager *m, const struct sandbox *sb)
{
        return sb->rec.network[0] ? sb->rec.network : default_network(m);
}

int sandbox_spec(struct manager *m, struct sandbox *sb, char *rootfs, struct rt_spec *spec)
{
        *spec = (struct rt_spec){
            /* Its own, never its class's current one: a class may name
             * another driver since (default_class), and a sandbox is only
             * ever reached through the driver that made it. One that is
             * not here makes every runtime call -ENOTSUP. */
            .driver = sb->rec.driver,
            .id = sb->rec.id,
            .dir = sb->dir,
            .rootfs = rootfs ? rootfs : "",
            .hostname = sb->rec.name,
            .uid_base = mgr_sandbox_uid(m, sb),
            .uid_count = MGR_UID_RANGE,
            .limits = m->cfg.limits,
        };
        spec->limits.network = strcmp(network_of(m, sb), "nat") ? RT_NET_NONE : RT_NET_NAT;
        if (rootfs && rt_image_rootfs(m->images_dir, sb->rec.image, rootfs, PATH_MAX) < 0) {
                rootfs[0] = '\0';
                return -ENOENT;
        }
        return 0;
}

void sandbox_to_record(struct manager *m, struct sandbox *sb, struct mgr_record *r)
{
        memset(r, 0, sizeof(*r));
        snprintf(r->name, sizeof(r->name), "%s", sb->rec.name);
        snprintf(r->sandbox_class, sizeof(r->sandbox_class), "%s", sb->rec.sandbox_class);
        snprintf(r->image, sizeof(r->image), "%s", sb->rec.image);
        snprintf(r->network, sizeof(r->network), "%s", network_of(m, sb));
        r->state = sb->rec.state;
        r->created_at = sb->rec.created_at;
        r->last_active_at = atomic_load(&sb->last_active);
        /* "Absent when nothing runs": a suspended sandbox runs nothing. */
        if (sb->rec.state == SBX_RUNNING)
                r->ceiling_at = sb->rec.created_at + m->cfg.max_age_ms;
}

void log_transition(struct sandbox *sb, const char *from, const char *to, const char *why)
{
        log_info("sandbox name=%s deployment=%s from=%s to=%s why=%s", sb->rec.name,
                 sb->rec.deployment, from, to, why);
}
