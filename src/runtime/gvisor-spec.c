/* SPDX-License-Identifier: MIT */
/* The OCI bundle of a gvisor sandbox (gvisor.h): sandbox-init as the
 * container's process, the overlay root the host mounted, /tmp, and the
 * socket directory runsc exposes to the daemon. */
#include "gvisor.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the workload keeps (the ns class's set), and what sandbox-init
 * needs on top to build its guard (a pid namespace with its own proc and
 * mount namespace for the workload, src/init): it drops those two in every
 * workload before exec. */
static const char *const caps[] = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
    "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_KILL",    "CAP_AUDIT_WRITE",  "CAP_SYS_ADMIN",
};

static json_t *str_array(const char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *mount(const char *dst, const char *type, const char *src, const char *const *opts,
                     size_t n)
{
        return json_pack("{s:s,s:s,s:s,s:o}", "destination", dst, "type", type, "source", src,
                         "options", str_array(opts, n));
}

#define OPTS(...)                                                                                  \
        ((const char *const[]){__VA_ARGS__}), ARRAY_SIZE(((const char *const[]){__VA_ARGS__}))

static json_t *mounts(const struct gv_bundle *b)
{
        char agent[PATH_MAX], tmp[PATH_MAX];
        if (path_printf(agent, sizeof(agent), "%s/agent", b->spec->dir) < 0 ||
            path_printf(tmp, sizeof(tmp), "%s/root/tmp", b->spec->dir) < 0)
                return NULL;
        json_t *m = json_array();
        if (!m)
                return NULL;
        json_array_append_new(m, mount("/proc", "proc", "proc", OPTS("nosuid", "noexec", "nodev")));
        json_array_append_new(m, mount("/dev", "tmpfs", "tmpfs",
                                       OPTS("nosuid", "strictatime", "mode=755", "size=65536k")));
        json_array_append_new(
            m, mount("/dev/pts", "devpts", "devpts",
                     OPTS("nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620")));
        json_array_append_new(m,
                              mount("/dev/shm", "tmpfs", "shm",
                                    OPTS("nosuid", "noexec", "nodev", "mode=1777", "size=65536k")));
        json_array_append_new(
            m, mount("/sys", "sysfs", "sysfs", OPTS("nosuid", "noexec", "nodev", "ro")));
        /* gVisor puts its own /dev/net/tun in every /dev. The ns class
         * has none, and this one is worse than none: the sentry checks
         * TUNSETIFF's CAP_NET_ADMIN in the caller's user namespace, so a
         * workload that makes one gets an interface in the sandbox's
         * network stack. An empty read-only tmpfs hides the directory (a
         * copy of this mount in a namespace of the workload's is locked:
         * it cannot be unmounted there). */
        json_array_append_new(
            m, mount("/dev/net", "tmpfs", "tmpfs",
                     OPTS("ro", "nosuid", "noexec", "nodev", "mode=0555", "size=4k")));
        json_array_append_new(m,
                              mount("/tmp", "bind", tmp, OPTS("rbind", "rw", "nosuid", "nodev")));
        json_array_append_new(
            m, mount(GV_INIT_PATH, "bind", b->init_path, OPTS("bind", "ro", "nosuid", "nodev")));
        json_array_append_new(m, mount(GV_AGENT_DIR, "bind", agent,
                                       OPTS("rbind", "rw", "nosuid", "nodev", "noexec")));
        char resolv[PATH_MAX];
        if (b->resolv && path_printf(resolv, sizeof(resolv), "%s/resolv.conf", b->spec->dir) == 0)
                json_array_append_new(m, mount("/etc/resolv.conf", "bind", resolv,
                                               OPTS("bind", "ro", "nosuid", "nodev", "noexec")));
        return m;
}

static json_t *process(const struct gv_bundle *b)
{
        const struct rt_limits *lim = &b->spec->limits;
        char listen[64];
        snprintf(listen, sizeof(listen), "--listen=%s/%s", GV_AGENT_DIR, GV_AGENT_SOCK);
        const char *argv[] = {GV_INIT_PATH, listen, "--guard"};
        size_t argc = ARRAY_SIZE(argv);
        /* sandbox-init keeps room for its connections; each workload gets
         * the soft limit as both limits (src/init). */
        json_int_t soft = lim->nofile ? lim->nofile : 1024;
        json_int_t hard = soft > 65536 ? soft : 65536;
        json_t *c = str_array(caps, ARRAY_SIZE(caps));
        /* No core dumps, as in the ns class (a workload cannot raise a
         * hard limit of 0). */
        return json_pack("{s:b,s:{s:i,s:i},s:o,s:[],s:s,s:{s:o,s:O,s:O,s:[],s:[]},"
                         "s:[{s:s,s:I,s:I},{s:s,s:i,s:i}],s:b}",
                         "terminal", 0, "user", "uid", 0, "gid", 0, "args", str_array(argv, argc),
                         "env", "cwd", "/", "capabilities", "bounding", c, "effective", c,
                         "permitted", c, "inheritable", "ambient", "rlimits", "type",
                         "RLIMIT_NOFILE", "hard", hard, "soft", soft, "type", "RLIMIT_CORE", "hard",
                         0, "soft", 0, "noNewPrivileges", 1);
}

static json_t *linux_section(const struct gv_bundle *b)
{
        json_t *ns = json_pack("[{s:s},{s:s},{s:s},{s:s}]", "type", "pid", "type", "ipc", "type",
                               "uts", "type", "mount");
        if (!ns)
                return NULL;
        if (b->netns)
                json_array_append_new(ns,
                                      json_pack("{s:s,s:s}", "type", "network", "path", b->netns));
        else
                json_array_append_new(ns, json_pack("{s:s}", "type", "network"));
        return json_pack("{s:o}", "namespaces", ns);
}

int gv_bundle_write(int dirfd, const struct gv_bundle *b, struct sbx_error *err)
{
        char root[PATH_MAX], host[65];
        if (path_printf(root, sizeof(root), "%s/root", b->spec->dir) < 0)
                return sbx_error_set(err, ENAMETOOLONG, "sandbox dir `%s`", b->spec->dir);
        snprintf(host, sizeof(host), "%s", b->spec->hostname ? b->spec->hostname : "sandbox");
        json_t *spec = json_pack("{s:s,s:o,s:{s:s,s:b},s:s,s:o,s:o}", "ociVersion", "1.0.2",
                                 "process", process(b), "root", "path", root, "readonly", 0,
                                 "hostname", host, "mounts", mounts(b), "linux", linux_section(b));
        if (!spec)
                return sbx_error_set(err, ENOMEM, "build the sandbox's OCI spec");
        char *text = json_dumps(spec, JSON_COMPACT);
        json_decref(spec);
        if (!text)
                return sbx_error_set(err, ENOMEM, "build the sandbox's OCI spec");
        int r = 0;
        if (mkdirat(dirfd, "bundle", 0700) < 0 && errno != EEXIST)
                r = sbx_error_set(err, errno, "create bundle/ of the sandbox");
        _cleanup_close_ int bd =
            r < 0 ? -1 : openat(dirfd, "bundle", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r == 0 && bd < 0)
                r = sbx_error_set(err, errno, "open bundle/ of the sandbox");
        _cleanup_close_ int f = -1;
        if (r == 0) {
                /* O_PATH fds cannot be written through: reopen the dir. */
                _cleanup_close_ int d = openat(bd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                f = d < 0 ? -1
                          : openat(d, "config.json",
                                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (f < 0 || write_all(f, text, strlen(text)) < 0)
                        r = sbx_error_set(err, errno ? errno : EIO,
                                          "write the sandbox's config.json");
        }
        free(text);
        return r;
}
