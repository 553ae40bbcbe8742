/* SPDX-License-Identifier: MIT */
/* The state machine of one sandbox:
 *
 *   (new) --attach--> stopped --start--> running <--thaw / freeze--> suspended
 *                        ^                  |                           |
 *                        +--agent gone------+                           |
 *   any state --delete, max_age, suspended_ttl (suspended only)--> (gone)
 *
 * A running sandbox idle for idle_timeout is suspended (frozen); a call
 * brings it back. Every function here but the timer callback runs with
 * sb->lock held (the lock order is in manager-internal.h). */
#include "manager-internal.h"

#include <string.h>

#include "../common/log.h"
#include "uploads.h"

/* Persist lastActiveAt at most this often per sandbox; memory has the truth. */
#define TOUCH_PERSIST_MS 1000
/* How long a start-up or recovery ping waits for an agent. */
#define PING_MS 2000

const char *sbx_state_name(enum sbx_state s)
{
        static const char *const names[SBX_NSTATES] = {"running", "suspended", "stopped"};
        return (unsigned)s < SBX_NSTATES ? names[s] : "unknown";
}

static void count_locked(struct manager *m, enum sbx_state from, enum sbx_state to)
{
        m->stats.transitions++;
        if (to == SBX_SUSPENDED)
                m->stats.suspended++;
        if (from == SBX_SUSPENDED && to == SBX_RUNNING)
                m->stats.resumed++;
        if (from == SBX_STOPPED && to == SBX_RUNNING)
                m->stats.started++;
}

/* Change state in memory and in the store. */
void sandbox_set_state(struct manager *m, struct sandbox *sb, enum sbx_state to, const char *why)
{
        struct sbx_error err = {0};
        enum sbx_state from = sb->rec.state;
        int64_t now = now_ms();
        if (store_sandbox_set_state(m->store, sb->rec.id, to, now, &err) < 0)
                log_error("sandbox name=%s: %s", sb->rec.name, err.msg);
        pthread_mutex_lock(&m->lock);
        sb->rec.state = to;
        sb->rec.state_since = now;
        count_locked(m, from, to);
        pthread_mutex_unlock(&m->lock);
        log_transition(sb, sbx_state_name(from), sbx_state_name(to), why);
}

/* rt_stop with sb's spec, errors ignored. */
static void stop_quietly(struct manager *m, struct sandbox *sb)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        rt_stop(m->rt, &spec, NULL);
}

static int sweep_root(void *ctx, int *ret_fd)
{
        struct sandbox *sb = ctx;
        return mgr_root(sb->m, sb, ret_fd, NULL);
}

/* sb's agent answers: remove what uploads of an earlier run left. */
static void sweep_uploads(struct manager *m, struct sandbox *sb)
{
        int n = uploads_sweep(sb->dir, m->run, mgr_sandbox_root_uid(m, sb), sweep_root, sb);
        if (n > 0)
                log_info("sandbox name=%s: removed %d unfinished upload(s) of an earlier run",
                         sb->rec.name, n);
        else if (n < 0)
                log_warn("sandbox name=%s: cannot sweep unfinished uploads: %s", sb->rec.name,
                         strerror(-n));
}

/* Thaw a suspended sb. When it cannot be thawed it is treated as gone:
 * stopped, to be started again. */
static int thaw_locked(struct manager *m, struct sandbox *sb, const char *why,
                       struct sbx_error *err)
{
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        int r = rt_thaw(m->rt, &spec, err);
        if (r == 0) {
                sandbox_set_state(m, sb, SBX_RUNNING, why);
                sweep_uploads(m, sb);
                return 0;
        }
        log_warn("sandbox name=%s: thaw failed (%s), restarting", sb->rec.name, err->msg);
        rt_stop(m->rt, &spec, NULL);
        sandbox_set_state(m, sb, SBX_STOPPED, "thaw failed");
        return r;
}

static int start_locked(struct manager *m, struct sandbox *sb, const char *why,
                        struct sbx_error *err)
{
        char rootfs[PATH_MAX];
        struct rt_spec spec;
        if (sandbox_spec(m, sb, rootfs, &spec) < 0)
                return sbx_error_say(err, ENOENT,
                                     "image '%s' is not built (sandboxd image build %s)",
                                     sb->rec.image, sb->rec.image),
                       -EHOSTDOWN;
        pid_t pid;
        int r = -ENOENT;
        /* One that was checkpointed resumes there: processes, memory and
         * files as they were saved. If that fails it boots, on the files
         * the restore put back. */
        if (sandbox_has_checkpoint(m, sb)) {
                char ck[PATH_MAX];
                path_printf(ck, sizeof(ck), "%s/" MGR_CHECKPOINT_DIR, sb->dir);
                if ((r = rt_restore(m->rt, &spec, ck, &pid, err)) < 0)
                        log_warn("sandbox name=%s: restore from its checkpoint failed (%s), "
                                 "booting",
                                 sb->rec.name, err->msg);
                else
                        why = "restored from its checkpoint";
        }
        if (r < 0)
                r = rt_start(m->rt, &spec, &pid, err);
        if (r == -ETIMEDOUT)
                rt_stop(m->rt, &spec, NULL);
        if (r < 0) {
                pthread_mutex_lock(&m->lock);
                m->stats.bring_up_failures++;
                pthread_mutex_unlock(&m->lock);
                return -EHOSTDOWN;
        }
        sb->init_pid = pid;
        sandbox_egress_apply_locked(m, sb);
        sandbox_set_state(m, sb, SBX_RUNNING, why);
        sweep_uploads(m, sb);
        return 0;
}

int sandbox_ensure_running_locked(struct manager *m, struct sandbox *sb, const char *why,
                                  struct sbx_error *err)
{
        /* Both before the state: a sandbox whose driver is gone may be
         * recorded running, and nothing can reach it; one of a class the
         * operator no longer offers is not used any more (its own driver
         * still suspends, reclaims and deletes it). */
        int r = sandbox_driver_check(m, sb, err);
        if (r < 0)
                return r;
        if (!sb->cls)
                return sbx_error_say(err, ENOTSUP, "sandbox class '%s' is not offered",
                                     sb->rec.sandbox_class),
                       -ENOTSUP;
        if (sb->rec.state == SBX_RUNNING)
                return 0;
        if (sb->rec.state == SBX_SUSPENDED && thaw_locked(m, sb, why, err) == 0)
                return 0;
        return start_locked(m, sb, why, err);
}

int sandbox_suspend_locked(struct manager *m, struct sandbox *sb, const char *why,
                           struct sbx_error *err)
{
        if (sb->rec.state != SBX_RUNNING)
                return 0;
        int r = sandbox_driver_check(m, sb, err);
        if (r < 0)
                return r;
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        r = rt_freeze(m->rt, &spec, err);
        if (r < 0)
                return r;
        sandbox_set_state(m, sb, SBX_SUSPENDED, why);
        return 0;
}

int sandbox_destroy_locked(struct manager *m, struct sandbox *sb, const char *why,
                           struct sbx_error *err)
{
        /* Only its own driver knows what it made on the host: without it,
         * the record stays for a run that has it. */
        int r = sandbox_driver_check(m, sb, err);
        if (r < 0)
                return r;
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        /* Calls in flight lose their agent from here on: they must answer
         * that the sandbox is gone, not that it failed. */
        atomic_store(&sb->dying, true);
        r = rt_destroy(m->rt, &spec, err);
        if (r == 0)
                sandbox_egress_forget_locked(m, sb);
        if (r < 0) {
                atomic_store(&sb->dying, false);
                return r;
        }
        store_sandbox_delete(m->store, sb->rec.id, NULL);
        atomic_store(&sb->gone, true);
        manager_image_release(m, sb);
        pthread_mutex_lock(&m->lock);
        table_remove_locked(m, sb);
        m->stats.deleted++;
        pthread_mutex_unlock(&m->lock);
        log_transition(sb, sbx_state_name(sb->rec.state), "deleted", why);
        sandbox_unref(sb); /* the table's reference */
        return 0;
}

void sandbox_touch_locked(struct manager *m, struct sandbox *sb)
{
        int64_t now = now_ms();
        atomic_store(&sb->last_active, now);
        sb->rec.last_active_at = now;
        if (now - sb->persisted_active >= TOUCH_PERSIST_MS) {
                sb->persisted_active = now;
                store_sandbox_touch(m->store, sb->rec.id, now, NULL);
        }
}

/* ---- deadlines ---- */

/* The next time the timers must look at sb. */
static int64_t next_deadline(struct manager *m, struct sandbox *sb)
{
        int64_t d = sb->rec.created_at + m->cfg.max_age_ms;
        if (sb->rec.state == SBX_RUNNING)
                d = MIN(d, atomic_load(&sb->last_active) + m->cfg.idle_timeout_ms);
        else if (sb->rec.state == SBX_SUSPENDED)
                d = MIN(d, sb->rec.state_since + m->cfg.suspended_ttl_ms);
        return d;
}

/* Queue sb's next deadline unless an earlier one is queued already (that
 * one fires, finds nothing due, and queues the later one): at most a couple
 * of heap entries per sandbox, however busy it is. */
void sandbox_schedule_locked(struct manager *m, struct sandbox *sb)
{
        /* A sandbox whose driver is not here has none: nothing can be done
         * to it without its driver. */
        if (sandbox_driver_check(m, sb, NULL) < 0)
                return;
        int64_t d = next_deadline(m, sb);
        if (sb->timer_at && sb->timer_at <= d)
                return;
        if (timers_add(m->timers, d, sb->rec.id) == 0)
                sb->timer_at = d;
}

/* Why sb is to be reclaimed now, or NULL. */
static const char *reclaim_due(const struct manager *m, const struct sandbox *sb, int64_t now)
{
        if (now >= sb->rec.created_at + m->cfg.max_age_ms)
                return "max_age";
        if (sb->rec.state == SBX_SUSPENDED && now >= sb->rec.state_since + m->cfg.suspended_ttl_ms)
                return "suspended_ttl";
        return NULL;
}

/* Running, idle long enough, and no call in flight (the table's reference
 * and the timer's own are the only ones). */
static bool idle_due(const struct manager *m, struct sandbox *sb, int64_t now)
{
        return sb->rec.state == SBX_RUNNING &&
               now >= atomic_load(&sb->last_active) + m->cfg.idle_timeout_ms &&
               atomic_load(&sb->refs) <= 2;
}

static void act_on_deadline(struct manager *m, struct sandbox *sb, int64_t now)
{
        struct sbx_error err = {0};
        const char *reclaim = reclaim_due(m, sb, now);
        if (reclaim && sandbox_destroy_locked(m, sb, reclaim, &err) == 0) {
                pthread_mutex_lock(&m->lock);
                m->stats.reclaimed++;
                pthread_mutex_unlock(&m->lock);
        } else if (reclaim) {
                log_error("sandbox name=%s: reclaim failed: %s", sb->rec.name, err.msg);
        } else if (idle_due(m, sb, now) && sandbox_suspend_locked(m, sb, "idle", &err) < 0) {
                log_error("sandbox name=%s: suspend failed: %s", sb->rec.name, err.msg);
        }
}

/* After a firing at `at`: the queued deadline it stood for has passed. */
static void reschedule_locked(struct manager *m, struct sandbox *sb, int64_t at, int64_t now)
{
        if (sb->timer_at <= at)
                sb->timer_at = 0;
        if (atomic_load(&sb->gone) || sandbox_driver_check(m, sb, NULL) < 0)
                return;
        if (next_deadline(m, sb) > now) {
                sandbox_schedule_locked(m, sb);
        } else if (!sb->timer_at && timers_add(m->timers, now + BUSY_RETRY_MS, sb->rec.id) == 0) {
                /* Due, but in a call right now: look again shortly. */
                sb->timer_at = now + BUSY_RETRY_MS;
        }
}

/* A timer fired for sandbox id: do what is due, and schedule the next. */
void sandbox_on_timer(void *ctx, int64_t at, uint64_t id)
{
        struct manager *m = ctx;
        struct sandbox *sb = table_ref_id(m, id);
        if (!sb)
                return;
        if (pthread_mutex_trylock(&sb->lock) != 0) {
                /* In a transition, which may be a 30 s start: never make
                 * every other sandbox's deadline wait for it. The firing
                 * after the transition clears timer_at (reschedule_locked). */
                timers_add(m->timers, now_ms() + BUSY_RETRY_MS, id);
                sandbox_unref(sb);
                return;
        }
        int64_t now = now_ms();
        if (!atomic_load(&sb->gone))
                act_on_deadline(m, sb, now);
        reschedule_locked(m, sb, at, now);
        pthread_mutex_unlock(&sb->lock);
        sandbox_unref(sb);
}

/* ---- reconnection ---- */

void sandbox_reconnect_locked(struct manager *m, struct sandbox *sb)
{
        /* Its driver is not here (runsc gone): whether it still runs cannot
         * be known, so its record stays as it is for a run that can tell. */
        if (sandbox_driver_check(m, sb, NULL) < 0)
                return;
        struct rt_spec spec;
        sandbox_spec(m, sb, NULL, &spec);
        bool alive = rt_is_alive(m->rt, &spec);
        if (alive && sb->rec.state == SBX_SUSPENDED) {
                /* Frozen: it cannot answer a ping, and need not. */
                sandbox_egress_apply_locked(m, sb);
                return;
        }
        if (alive && sb->rec.state == SBX_RUNNING && agent_ping(&sb->peer, PING_MS, NULL) == 0) {
                sandbox_egress_apply_locked(m, sb);
                sweep_uploads(m, sb);
                return;
        }
        /* Also when its processes are gone (a reboot, a kill): what its
         * driver holds on the host for a running sandbox (gvisor: its
         * mounts, its netns and veth) goes now, not at its next start. */
        if (alive || sb->rec.state != SBX_STOPPED)
                rt_stop(m->rt, &spec, NULL);
        if (sb->rec.state != SBX_STOPPED)
                sandbox_set_state(m, sb, SBX_STOPPED, "agent gone at start-up");
}

int sandbox_recover_locked(struct manager *m, struct sandbox *sb, struct sbx_error *err)
{
        int r = sandbox_driver_check(m, sb, err);
        if (r < 0)
                return r;
        if (sb->rec.state != SBX_RUNNING || agent_ping(&sb->peer, PING_MS, NULL) == 0)
                return 0;
        /* Its agent is gone (killed, crashed): clean up what is left and
         * start it again on the same files. */
        stop_quietly(m, sb);
        sandbox_set_state(m, sb, SBX_STOPPED, "agent gone");
        return sandbox_ensure_running_locked(m, sb, "restart after agent loss", err);
}
