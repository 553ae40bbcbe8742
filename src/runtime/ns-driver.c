/* SPDX-License-Identifier: MIT */
/* The ns driver (runtime.h: rt_ns_driver): namespaces, an overlay over the
 * image, cgroups. The only thing of it the rest of the daemon sees.
 *
 * Start goes through the zygote (zygote.c), forked by ns_open while the
 * daemon is single-threaded, and from there to a launcher (ns.c). Freeze,
 * thaw, stop and destroy need no helper: they are cgroup file writes,
 * made directly by the calling daemon thread (cgroup.c). The agent is
 * dialled at <dir>/agent.sock; the file endpoints get the sandbox's root
 * from sandbox-init (RT_CAP_AGENT_ROOT). */
#include "runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#include "../common/fdpass.h"
#include "cgroup.h"
#include "disk.h"
#include "reaper.h"
#include "launch.h"
#include "net.h"
#include "seccomp.h"
#include "zygote.h"

#define RT_INIT_MAX (256u << 20)
#define NS_DIAL_TIMEOUT_MS 10000
#define NS_HOSTNAME_MAX 64

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

struct ns_rt {
        struct zygote zygote;
        struct cg_layout cg;
        struct disk_spares spares;
        struct reaper reaper;
};

/* ---- open / close ---- */

static int count_threads(void)
{
        DIR *d = opendir("/proc/self/task");
        if (!d)
                return -errno;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

/* Copy sandbox-init into a sealed memfd: what every sandbox execs is
 * this immutable copy, never a host file a workload could reach through
 * /proc/<pid>/exe and overwrite (CVE-2019-5736). */
static int load_init(const char *path, int *ret, struct sbx_error *err)
{
        _cleanup_close_ int src = open(path, O_RDONLY | O_CLOEXEC);
        if (src < 0)
                return sbx_error_set(err, errno, "open sandbox-init `%s`", path);
        struct stat st;
        if (fstat(src, &st) < 0)
                return sbx_error_set(err, errno, "stat `%s`", path);
        if (!S_ISREG(st.st_mode) || st.st_size < 4 || (uint64_t)st.st_size > RT_INIT_MAX)
                return sbx_error_set(err, EINVAL, "`%s` is not a plausible sandbox-init", path);
        char magic[4];
        if (pread(src, magic, 4, 0) != 4 || memcmp(magic,
                                                   "\x7f"
                                                   "ELF",
                                                   4))
                return sbx_error_set(err, ENOEXEC, "`%s` is not an ELF binary", path);
        unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
        _cleanup_close_ int mfd = memfd_create("sandbox-init", flags | MFD_EXEC);
        if (mfd < 0 && errno == EINVAL)
                mfd = memfd_create("sandbox-init", flags); /* kernel < 6.3 */
        if (mfd < 0)
                return sbx_error_set(err, errno, "memfd_create");
        for (off_t off = 0; off < st.st_size;) {
                ssize_t n = sendfile(mfd, src, &off, (size_t)(st.st_size - off));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return sbx_error_set(err, n < 0 ? errno : EIO, "copy `%s`", path);
        }
        int seals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
        if (fcntl(mfd, F_ADD_SEALS, seals) < 0 || (fcntl(mfd, F_GET_SEALS) & seals) != seals)
                return sbx_error_set(err, errno, "seal the sandbox-init copy");
        *ret = TAKE_FD(mfd);
        return 0;
}

#define NS_SPARE_LAUNCHERS 2 /* kept by the zygote on a v1 host (zygote.c) */

/* What the zygote hands every launcher: the cgroup layout, the host's
 * network (set up by rt_open, driver.c), the sealed sandbox-init, the
 * compiled seccomp policy. */
static int ctx_build(const struct rt_config *cfg, struct ns_ctx *ctx, struct sbx_error *err)
{
        int r = cg_detect(&ctx->cg, cfg->cgroup_root, err);
        if (r < 0)
                return r;
        /* Spare launchers' cgroups a daemon that died left behind (its
         * spares died with its zygote), then whether spares work here. */
        cg_spare_remove(&ctx->cg, 0);
        ctx->spares = cg_spares_possible(&ctx->cg) ? NS_SPARE_LAUNCHERS : 0;
        if (cfg->net)
                ctx->net = *cfg->net;
        if ((r = load_init(cfg->init_path, &ctx->init_memfd, err)) < 0)
                return r;
        if ((r = rt_seccomp_build(&ctx->seccomp, err)) < 0) {
                close_fd(&ctx->init_memfd);
                return r;
        }
        return 0;
}

static int ns_open(const struct rt_config *cfg, void **ret, struct sbx_error *err)
{
        if (!cfg || !cfg->init_path || !ret)
                return sbx_error_set(err, EINVAL, "rt_open: no sandbox-init path");
        /* The zygote must start from a single-threaded image: a fork of a
         * threaded process may inherit locks held by other threads. */
        if (count_threads() != 1)
                return sbx_error_set(err, EBUSY, "rt_open must run before any thread starts");
        struct ns_ctx ctx = {.init_memfd = -1};
        _cleanup_free_ struct ns_rt *rt = calloc(1, sizeof(*rt));
        if (!rt)
                return sbx_error_set(err, ENOMEM, "rt_open");
        int r = ctx_build(cfg, &ctx, err);
        if (r < 0)
                return r;
        r = zygote_open(&ctx, &rt->zygote, err);
        /* The zygote has its own copy now. */
        close_fd(&ctx.init_memfd);
        rt_seccomp_free(&ctx.seccomp);
        if (r < 0)
                return r;
        rt->cg = ctx.cg;
        disk_spares_init(&rt->spares, rt_ns_driver.name);
        reaper_init(&rt->reaper, "ns");
        *ret = TAKE_PTR(rt);
        return 0;
}

static void ns_close(void *state)
{
        struct ns_rt *rt = state;
        if (!rt)
                return;
        disk_spares_stop(&rt->spares);
        reaper_stop(&rt->reaper);
        zygote_close(&rt->zygote);
        if (!cg_any_populated(&rt->cg))
                cg_remove_root(&rt->cg);
        free(rt);
}

/* ---- start ---- */

static int ns_start(void *state, const struct rt_spec *spec, pid_t *ret_pid, struct sbx_error *err)
{
        struct ns_rt *rt = state;
        int r = ns_spec_check(spec, err);
        if (r < 0)
                return r;
        r = zygote_launch(&rt->zygote, spec, ret_pid, err);
        if (r == 0)
                disk_spares_note(&rt->spares, spec);
        return r;
}

/* ---- cgroup-only operations ---- */

static int ns_freeze(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_freeze(&((struct ns_rt *)state)->cg, spec->id, err);
}

static int ns_thaw(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_thaw(&((struct ns_rt *)state)->cg, spec->id, err);
}

static int ns_stop(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        return cg_kill_all(&((struct ns_rt *)state)->cg, spec->id, err);
}

static bool ns_is_alive(void *state, const struct rt_spec *spec)
{
        return cg_populated(&((struct ns_rt *)state)->cg, spec->id);
}

static bool ns_any_alive(void *state)
{
        return cg_any_populated(&((struct ns_rt *)state)->cg);
}

/* sandbox-init listens on <dir>/agent.sock, a socket in the sandbox dir
 * it sees as /.sandboxd (ns.c). */
static int ns_dial(void *state, const struct rt_spec *spec, int *ret_fd, struct sbx_error *err)
{
        (void)state;
        return unix_connect_in(spec->dir, "agent.sock", NS_DIAL_TIMEOUT_MS, ret_fd, err);
}

static int ns_destroy(void *state, const struct rt_spec *spec, struct sbx_error *err)
{
        struct ns_rt *rt = state;
        if (!spec || !spec->dir || spec->dir[0] != '/' || !strcmp(spec->dir, "/") ||
            strstr(spec->dir, "/../") || strlen(spec->dir) >= PATH_MAX)
                return sbx_error_set(err, EINVAL, "refusing to destroy sandbox dir `%s`",
                                     spec && spec->dir ? spec->dir : "(null)");
        int r = cg_kill_all(&rt->cg, spec->id, err);
        if (r < 0)
                return r;
        if ((r = cg_remove(&rt->cg, spec->id, err)) < 0)
                return r;
        /* The overlay lived only in the sandbox's mount namespace, gone with
         * its last process: nothing is mounted here on the host. */
        return reaper_put(&rt->reaper, spec->dir, err);
}

/* ---- rename ---- */

/* setns(CLONE_NEWUTS) changes only the calling thread, so a short-lived
 * thread renames and takes the namespace with it. */
struct rename_job {
        int nsfd;
        const char *name;
        int result;
};

static void *rename_thread(void *arg)
{
        struct rename_job *j = arg;
        if (setns(j->nsfd, CLONE_NEWUTS) < 0)
                j->result = -errno;
        else if (sethostname(j->name, strnlen(j->name, NS_HOSTNAME_MAX)) < 0)
                j->result = -errno;
        else
                j->result = 0;
        return NULL;
}

/* Set the hostname in the UTS namespace of a running sandbox, from the
 * host: a sandbox started ahead of time (the manager's warm pool) is
 * given its name. */
static int ns_set_hostname(void *state, const struct rt_spec *spec, pid_t init_pid,
                           const char *name, struct sbx_error *err)
{
        (void)state;
        (void)spec;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/uts", (int)init_pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "open %s", path);
        struct rename_job j = {.nsfd = fd, .name = name, .result = -EIO};
        pthread_t t;
        int r = pthread_create(&t, NULL, rename_thread, &j);
        if (r)
                return sbx_error_set(err, r, "hostname thread");
        pthread_join(t, NULL);
        if (j.result < 0)
                return sbx_error_set(err, -j.result, "set hostname of pid %d", (int)init_pid);
        return 0;
}

const struct rt_driver rt_ns_driver = {
    .name = "ns",
    .caps = RT_CAP_NAT | RT_CAP_DISK_LIMIT | RT_CAP_HOSTNAME | RT_CAP_AGENT_ROOT | RT_CAP_ID_SHIFT,
    .open = ns_open,
    .close = ns_close,
    .start = ns_start,
    .freeze = ns_freeze,
    .thaw = ns_thaw,
    .stop = ns_stop,
    .destroy = ns_destroy,
    .is_alive = ns_is_alive,
    .any_alive = ns_any_alive,
    .dial = ns_dial,
    .set_hostname = ns_set_hostname,
};
