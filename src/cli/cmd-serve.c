/* SPDX-License-Identifier: MIT */
/* sandboxd serve: the daemon's composition root. It checks the settings,
 * opens what the daemon runs on (the state dir and its store and keys, the
 * host-wide ranges, the runtime and the sandbox classes and warm pools of
 * the drivers it runs, the manager, the API), serves HTTP until
 * SIGTERM / SIGINT, and shuts down; each is a step below, and what is open
 * is released in reverse. Sandboxes outlive the daemon: stopping it leaves
 * them running. */
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "../api/api.h"
#include "../cluster/cluster.h"
#include "../common/log.h"
#include "../manager/manager.h"
#include "../runtime/runtime.h"
#include "../store/store.h"
#include "cli.h"
#include "settings.h"

#define SERVE_MALLOC_ARENAS 4

/* What the daemon runs on, in the order it is opened. */
struct serve {
        struct settings s;
        bool nat;
        struct keys_external_config ext;
        char *pubkeys_copy;
        const char **pubkeys;
        char init_path[PATH_MAX];
        char state_abs[PATH_MAX];
        char inst[RT_INSTANCE_LEN + 1];
        char cgroot[64];
        struct store *st;
        struct keyring *keys; /* until the api takes them */
        struct rt_claim claim;
        struct rt *rt;
        /* `default` and a class per driver (serve_classes), the warm pools */
        struct mgr_class classes[1 + RT_MAX_DRIVERS];
        size_t n_classes;
        struct mgr_pool pools[RT_MAX_DRIVERS];
        size_t n_pools;
        struct manager *mgr;
        struct cluster *cluster; /* NULL: one host */
        struct api *api;
        sigset_t signals; /* taken by sigwait */
};

/* The runtime drivers the daemon offers, each as a sandbox class of its
 * own name; `default` is the one default_class names. rt_open leaves out
 * one the host cannot run (gvisor without a usable runsc), saying why: its
 * class is still offered, and an attach of it is told the reason. */
static const struct rt_driver *const drivers[] = {&rt_ns_driver, &rt_gvisor_driver};

/* What serve --help says of them, after the settings. */
static const char classes_help[] =
    "\nSandbox classes (the `class` an attach names; a sandbox keeps its class and the\n"
    "driver it was created under for its life, so changing default_class moves no\n"
    "existing sandbox):\n"
    "  default  the driver default_class names (ns unless set otherwise)\n"
    "  ns       Linux namespaces (user, pid, mount, ipc, uts, net, cgroup), a seccomp\n"
    "           filter, a reduced capability set and cgroup limits around the\n"
    "           sandbox's processes, which run on the host kernel, shared with the\n"
    "           host and every other sandbox\n"
    "  gvisor   gVisor (runsc): each sandbox runs on a user-space kernel of its own\n"
    "           (the sentry), which serves its processes' system calls; the host\n"
    "           kernel is reached only through the sentry's own seccomp-filtered\n"
    "           syscalls. Needs runsc (setting runsc); where the host cannot run it,\n"
    "           an attach naming it gets 409 unsupported_class saying why, and\n"
    "           default_class = gvisor refuses to start\n";

/* The sandbox-init binary: the setting, else next to this binary (a build
 * tree), else the installed libexec one. */
static int find_init(const struct settings *s, char *out, size_t len)
{
        if (s->init_path)
                return path_join(out, len, s->init_path, "");
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = '\0';
                char *slash = strrchr(self, '/');
                if (slash) {
                        *slash = '\0';
                        if (path_join(out, len, self, "sandbox-init") == 0 &&
                            access(out, X_OK) == 0)
                                return 0;
                }
        }
        return path_join(out, len, SANDBOXD_LIBEXECDIR, "sandbox-init");
}

static bool is_hex_id(const char *id, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
                        return false;
        return true;
}

/* A short random id of this state dir, made on first start: it names the
 * daemon's cgroup subtree, so two daemons with different state dirs on one
 * host (tests do that) never share a sandbox cgroup. */
static int instance_id(const char *state, char out[RT_INSTANCE_LEN + 1])
{
        char path[PATH_MAX], tmp[PATH_MAX];
        int r = path_join(path, sizeof(path), state, "instance-id");
        if (r < 0 || (r = path_printf(tmp, sizeof(tmp), "%s.tmp", path)) < 0)
                return r;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
                ssize_t n = read(fd, out, RT_INSTANCE_LEN);
                close(fd);
                out[RT_INSTANCE_LEN] = '\0';
                if (n == RT_INSTANCE_LEN && is_hex_id(out, RT_INSTANCE_LEN))
                        return 0;
        }
        uint8_t rnd[RT_INSTANCE_LEN / 2];
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < sizeof(rnd); i++) {
                out[2 * i] = hex[rnd[i] >> 4];
                out[2 * i + 1] = hex[rnd[i] & 0xf];
        }
        out[RT_INSTANCE_LEN] = '\0';
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = write_all(fd, out, RT_INSTANCE_LEN);
        close(fd);
        if (r < 0 || rename(tmp, path) < 0)
                return r < 0 ? r : -errno;
        return 0;
}

/* "a.pem, b.pem" -> a NULL-terminated array of trimmed, non-empty paths
 * pointing into *ret_copy (both malloc'd). */
static int split_list(const char *list, char **ret_copy, const char ***ret)
{
        char *copy = strdup(list);
        size_t n = 1;
        for (const char *p = list; *p; p++)
                n += *p == ',';
        const char **v = calloc(n + 1, sizeof(*v));
        if (!copy || !v) {
                free(copy);
                free(v);
                return -ENOMEM;
        }
        size_t i = 0;
        char *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                while (*t == ' ' || *t == '\t')
                        t++;
                char *e = t + strlen(t);
                while (e > t && (e[-1] == ' ' || e[-1] == '\t'))
                        *--e = '\0';
                if (*t)
                        v[i++] = t;
        }
        *ret_copy = copy;
        *ret = v;
        return 0;
}

/* The identity-token issuers of the settings; false (logged) when the
 * settings accept no token at all. */
static bool issuers_config(const struct settings *s, const char *const *pubkeys,
                           struct keys_external_config *ext)
{
        *ext = (struct keys_external_config){
            .hs256_secret_file =
                s->hs256_secret_file && *s->hs256_secret_file ? s->hs256_secret_file : NULL,
            .public_key_files = pubkeys,
            .disable_local_issuer = !s->local_issuer,
        };
        if (!s->local_issuer && !ext->hs256_secret_file && !(pubkeys && pubkeys[0])) {
                log_error("local_issuer is off and no hs256_secret_file or public_keys is set: "
                          "no identity token could be accepted");
                return false;
        }
        return true;
}

static enum log_level parse_level(const char *s)
{
        /* The settings table allows these four words only. */
        if (!strcmp(s, "debug"))
                return LOG_DEBUG;
        if (!strcmp(s, "warn"))
                return LOG_WARN;
        if (!strcmp(s, "error"))
                return LOG_ERROR;
        return LOG_INFO;
}

/* ---- the steps ---- */

/* The settings of the command line, the config file and the environment.
 * -1 to go on, else the exit code (--help, a bad setting). */
static int serve_settings(struct serve *sv, int argc, char **argv)
{
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf("usage: sandboxd serve [OPTIONS]\n\n");
                        settings_usage(SET_SERVE | SET_URL);
                        fputs(classes_help, stdout);
                        return 0;
                }
        char **args = NULL;
        settings_defaults(&sv->s);
        if (settings_parse(&sv->s, SET_SERVE | SET_URL, argc, argv, NULL, NULL, NULL, &args) < 0)
                return 2;
        int code = -1;
        if (args[0]) {
                fprintf(stderr, "sandboxd serve: unexpected argument '%s'\n", args[0]);
                code = 2;
        }
        free(args);
        log_set_level(parse_level(sv->s.log_level));
        log_set_format(!strcmp(sv->s.log_format, "json")     ? LOG_FORMAT_JSON
                       : !strcmp(sv->s.log_format, "logfmt") ? LOG_FORMAT_LOGFMT
                                                             : LOG_FORMAT_TEXT);
        return code;
}

/* What the settings say together, before anything is opened (each one
 * alone was checked against its bounds as it was read). */
static int serve_check(struct serve *sv)
{
        const struct settings *s = &sv->s;
        sv->nat = !strcmp(s->network, "nat");
        if (s->public_keys && split_list(s->public_keys, &sv->pubkeys_copy, &sv->pubkeys) < 0) {
                log_error("out of memory");
                return -ENOMEM;
        }
        if (!issuers_config(s, sv->pubkeys, &sv->ext))
                return -EINVAL;
        if (find_init(s, sv->init_path, sizeof(sv->init_path)) < 0) {
                log_error("init_path: the path of sandbox-init is too long");
                return -ENAMETOOLONG;
        }
        return 0;
}

/* The state dir, its store and the keys. */
static int open_state(struct serve *sv)
{
        const char *state = sv->s.state;
        char db[PATH_MAX];
        struct sbx_error err = {0};
        int r = mkdir_p(state, 0700);
        if (r < 0) {
                log_error("cannot create state dir %s: %s", state, strerror(-r));
                return r;
        }
        if (!realpath(state, sv->state_abs)) {
                log_error("state dir %s: %s", state, strerror(errno));
                return -errno;
        }
        if ((r = path_join(db, sizeof(db), state, "sandboxd.db")) < 0) {
                log_error("state dir %s: path too long", state);
                return r;
        }
        if ((r = store_open(db, &sv->st, &err)) < 0 ||
            (r = keys_load(state, &sv->ext, &sv->keys, &err)) < 0) {
                log_error("%s", err.msg);
                return r;
        }
        return 0;
}

/* This instance's id and the host-wide ranges, claimed against every
 * other sandboxd of this host for as long as this one runs. */
static int open_claim(struct serve *sv)
{
        const struct settings *s = &sv->s;
        struct sbx_error err = {0};
        int r = instance_id(s->state, sv->inst);
        if (r < 0) {
                log_error("cannot write %s/instance-id: %s", s->state, strerror(-r));
                return r;
        }
        snprintf(sv->cgroot, sizeof(sv->cgroot), "sandboxd/%s", sv->inst);
        struct rt_claim_want want = {.state_dir = sv->state_abs,
                                     .instance = sv->inst,
                                     .uid_base = s->uid_base,
                                     .uid_count = (uint32_t)s->max_sandboxes * MGR_UID_RANGE,
                                     .net_range = sv->nat ? s->net_range : NULL,
                                     .net_slots = (uint32_t)s->max_sandboxes};
        if ((r = rt_claim_take(&want, &sv->claim, &err)) < 0) {
                log_error("%s", err.msg);
                return r;
        }
        log_info("instance %s: uids %u-%u%s%s", sv->inst, sv->claim.uid_base,
                 sv->claim.uid_base + (sv->claim.uid_count - 1), sv->nat ? ", net_range " : "",
                 sv->nat ? sv->claim.net_range : "");
        return 0;
}

/* Before any thread exists: the runtime forks its helper here. */
static int open_runtime(struct serve *sv)
{
        const struct settings *s = &sv->s;
        struct sbx_error err = {0};
        struct rt_config rtc = {.init_path = sv->init_path,
                                .cgroup_root = sv->cgroot,
                                .instance = sv->inst,
                                .net_range = sv->nat ? sv->claim.net_range : NULL,
                                .dns = s->dns,
                                .dns_port = (int32_t)s->dns_port,
                                .dns_upstream = s->dns_upstream,
                                .net_open_ranges = s->net_open_ranges,
                                .drivers = drivers,
                                .n_drivers = ARRAY_SIZE(drivers),
                                .runsc_path = s->runsc,
                                .gvisor_platform = s->gvisor_platform,
                                .state_dir = sv->state_abs};
        int r = rt_open(&rtc, &sv->rt, &err);
        if (r < 0)
                log_error("runtime: %s", err.msg);
        return r;
}

/* Why the host runs no driver of that name. */
static const char *why_not(const struct serve *sv, const char *driver)
{
        const char *why = rt_unavailable(sv->rt, driver);
        return why ? why : "this sandboxd is built without it";
}

/* The warm pool setting of a driver's sandboxes: its value, its key. */
static int64_t pool_setting(const struct settings *s, const char *driver, const char **ret_key)
{
        if (!strcmp(driver, "gvisor")) {
                *ret_key = "gvisor_pool_size";
                return s->gvisor_pool_size;
        }
        *ret_key = "pool_size";
        return !strcmp(driver, "ns") ? s->pool_size : 0;
}

/* The warm pool of one driver, if its setting asks for one: a driver the
 * host cannot run has none (said once); one that cannot rename a running
 * sandbox cannot have one (an error naming the setting). */
static int serve_pool(struct serve *sv, const char *driver)
{
        const char *key;
        int64_t size = pool_setting(&sv->s, driver, &key);
        const struct rt_driver *d = rt_driver(sv->rt, driver);
        if (size == 0)
                return 0;
        if (!d) {
                log_warn("%s = %lld: no warm sandboxes, the %s driver is not available on this "
                         "host: %s",
                         key, (long long)size, driver, why_not(sv, driver));
                return 0;
        }
        if (!(d->caps & RT_CAP_HOSTNAME)) {
                log_error("%s = %lld: the %s driver cannot rename a running sandbox, so a warm "
                          "one could not take its name; set %s = 0",
                          key, (long long)size, driver, key);
                return -EINVAL;
        }
        sv->pools[sv->n_pools++] = (struct mgr_pool){.driver = d->name, .size = size};
        return 0;
}

/* The sandbox classes and the warm pools, once the runtime says which
 * drivers this host runs: `default` (default_class's driver, which must
 * be one), and one class per driver, named after it, offered even where
 * the host cannot run it (an attach of it is told why). */
static int serve_classes(struct serve *sv)
{
        const char *def = sv->s.default_class;
        if (!rt_driver(sv->rt, def)) {
                log_error("default_class = %s, but the %s driver is not available on this host: "
                          "%s",
                          def, def, why_not(sv, def));
                return -ENOTSUP;
        }
        sv->classes[sv->n_classes++] = (struct mgr_class){.name = MGR_DEFAULT_CLASS, .driver = def};
        for (size_t i = 0; i < ARRAY_SIZE(drivers); i++) {
                const char *name = drivers[i]->name;
                sv->classes[sv->n_classes++] = (struct mgr_class){.name = name, .driver = name};
                if (!rt_driver(sv->rt, name))
                        log_warn("sandbox class %s is not available on this host: %s", name,
                                 why_not(sv, name));
                int r = serve_pool(sv, name);
                if (r < 0)
                        return r;
        }
        log_info("sandbox class default: the %s driver (default_class)", def);
        return 0;
}

/* SIGTERM / SIGINT / SIGHUP are taken by sigwait in serve_run; every
 * thread started from here on inherits the blocked mask. */
static int block_signals(struct serve *sv)
{
        sigemptyset(&sv->signals);
        sigaddset(&sv->signals, SIGTERM);
        sigaddset(&sv->signals, SIGINT);
        sigaddset(&sv->signals, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &sv->signals, NULL);
        signal(SIGPIPE, SIG_IGN);
        return 0;
}

static int open_manager(struct serve *sv)
{
        const struct settings *s = &sv->s;
        struct sbx_error err = {0};
        struct mgr_config mc = {
            .state_dir = s->state,
            .images_dir = s->images,
            .default_image = s->default_image,
            .uid_base = sv->claim.uid_base,
            .max_sandboxes = (uint32_t)s->max_sandboxes,
            .idle_timeout_ms = s->idle_timeout_ms,
            .suspended_ttl_ms = s->suspended_ttl_ms,
            .max_age_ms = s->max_age_ms,
            .max_per_deployment = s->max_per_deployment,
            .allow_unknown_accounts = s->allow_unknown_accounts,
            .classes = sv->classes,
            .n_classes = sv->n_classes,
            .pools = sv->pools,
            .n_pools = sv->n_pools,
            .limits = {.memory_bytes = (uint64_t)s->memory_limit,
                       .pids = (uint64_t)s->pids_limit,
                       .nofile = (uint32_t)s->max_open_files,
                       .cpu_shares = (uint64_t)s->cpu_shares,
                       .tmp_bytes = (uint64_t)s->tmp_size,
                       .disk_bytes = (uint64_t)s->disk_limit,
                       .network = sv->nat ? RT_NET_NAT : RT_NET_NONE},
        };
        int r = mgr_open(&mc, sv->st, sv->rt, &sv->mgr, &err);
        if (r < 0)
                log_error("manager: %s", err.msg);
        return r;
}

/* Cluster mode, when cluster_etcd names etcd: this host's lease and the
 * routing of attaches (cluster/cluster.h). Nothing without it. */
static int open_cluster(struct serve *sv)
{
        const struct settings *s = &sv->s;
        if (!s->cluster_etcd)
                return 0;
        if (!s->host_id) {
                log_error("cluster_etcd needs host_id");
                return -EINVAL;
        }
        struct cluster_config cc = {
            .store = {.endpoints = s->cluster_etcd,
                      .prefix = s->cluster_prefix,
                      .host_id = s->host_id,
                      .url = s->url,
                      .lease_ttl_ms = s->cluster_lease_ttl_ms,
                      .ca_file = s->cluster_etcd_ca,
                      .cert_file = s->cluster_etcd_cert,
                      .key_file = s->cluster_etcd_key},
            .max_per_deployment = s->max_per_deployment,
        };
        struct sbx_error err = {0};
        int r = cluster_open(&cc, sv->mgr, &sv->cluster, &err);
        if (r < 0)
                log_error("cluster: %s", err.msg);
        else
                log_info("cluster mode: host %s, etcd %s, lease %lld ms", s->host_id,
                         s->cluster_etcd, (long long)s->cluster_lease_ttl_ms);
        return r;
}

static int open_api(struct serve *sv)
{
        const struct settings *s = &sv->s;
        struct sbx_error err = {0};
        struct api_config ac = {
            .listen = s->listen,
            .url = s->url,
            .preview_domain = s->preview_domain,
            .state_dir = s->state,
            .keys_ext = &sv->ext,
            .credential_ttl_ms = s->credential_ttl_ms,
            .token_leeway_ms = s->token_leeway_ms,
            .max_body_bytes = s->max_body_bytes,
            .max_file_bytes = s->max_file_bytes,
            .max_connections = s->max_connections,
            .max_connections_per_ip = s->max_connections_per_ip,
            .request_head_timeout_ms = s->request_head_timeout_ms,
            .port_timeout_ms = s->port_timeout_ms,
            .rate_limit = s->rate_limit,
            .rate_burst = s->rate_burst,
            .cluster = sv->cluster,
            .issuer = s->issuer,
        };
        int r = api_new(&ac, sv->mgr, sv->keys, &sv->api, &err);
        if (r < 0) {
                log_error("%s", err.msg);
                return r;
        }
        sv->keys = NULL; /* the api's now */
        return 0;
}

static int (*const open_steps[])(struct serve *sv) = {
    open_state,    open_claim,   open_runtime, serve_classes,
    block_signals, open_manager, open_cluster, open_api,
};

static int serve_open(struct serve *sv)
{
        for (size_t i = 0; i < ARRAY_SIZE(open_steps); i++) {
                int r = open_steps[i](sv);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Room for max_connections held requests: each is the client's socket
 * and, while it waits on a sandbox, the agent's. The soft limit goes up to
 * that, and the hard one with it where the daemon may (CAP_SYS_RESOURCE,
 * up to fs.nr_open); short of it, a warning names what is missing. */
static void raise_nofile(const struct serve *sv)
{
        rlim_t want = (rlim_t)sv->s.max_connections * 2 + 4096;
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
                return;
        struct rlimit up = {.rlim_cur = want, .rlim_max = MAX(want, rl.rlim_max)};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
                return;
        up = (struct rlimit){.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) < 0)
                up.rlim_cur = rl.rlim_cur;
        log_warn("open files: %llu allowed, %llu wanted for max_connections %lld: held requests "
                 "past that are refused",
                 (unsigned long long)up.rlim_cur, (unsigned long long)want,
                 (long long)sv->s.max_connections);
}

/* Serve until SIGTERM or SIGINT; SIGHUP loads the keys again. */
static int serve_run(struct serve *sv)
{
        struct sbx_error err = {0};
        raise_nofile(sv);
        int r = api_start(sv->api, &err);
        if (r < 0) {
                log_error("%s", err.msg);
                return r;
        }
        log_info("sandboxd %s serving on %s (url %s, state %s, images %s)", SANDBOXD_VERSION,
                 sv->s.listen, sv->s.url, sv->s.state, sv->s.images);
        for (;;) {
                int sig = 0;
                if (sigwait(&sv->signals, &sig) != 0)
                        continue;
                if (sig != SIGHUP) {
                        log_info("signal %d: shutting down (sandboxes keep running)", sig);
                        return 0;
                }
                api_reload_keys(sv->api);
        }
}

/* Let the requests in flight finish, for up to shutdown_grace. */
static void serve_shutdown(struct serve *sv)
{
        int left = api_drain(sv->api, sv->s.shutdown_grace_ms);
        if (left == 0)
                return;
        /* A request still waits on its sandbox (an exec without a deadline,
         * say). Its command goes on in the sandbox; only the answer is lost.
         * The store is a WAL: leaving without closing it loses nothing. */
        log_warn("%d requests still running after %lld ms; leaving without them", left,
                 (long long)sv->s.shutdown_grace_ms);
        mgr_stop_pool(sv->mgr);
        _exit(0);
}

/* Release what is open, in reverse. */
static void serve_close(struct serve *sv)
{
        if (sv->api)
                api_stop(sv->api);
        cluster_close(sv->cluster);
        mgr_close(sv->mgr);
        /* The claim stays recorded while sandboxes of this instance run on
         * (they outlive the daemon); no other daemon picks it by itself. */
        bool alive = !sv->rt || rt_any_alive(sv->rt);
        rt_close(sv->rt);
        rt_claim_release(&sv->claim, !alive);
        api_free(sv->api);
        keyring_free(sv->keys);
        store_close(sv->st);
        free(sv->pubkeys_copy);
        free(sv->pubkeys);
        settings_free(&sv->s);
}

int cmd_serve(int argc, char **argv)
{
        /* Handler threads come and go with the load; an arena each would
         * keep the memory of a burst long after it (glibc gives one to up
         * to eight threads a core). A few shared arenas keep little. */
        mallopt(M_ARENA_MAX, SERVE_MALLOC_ARENAS);
        struct serve sv = {.claim = {.fd = -1}};
        int code = serve_settings(&sv, argc, argv);
        if (code >= 0) {
                settings_free(&sv.s);
                return code;
        }
        code = 1;
        if (serve_check(&sv) == 0 && serve_open(&sv) == 0 && serve_run(&sv) == 0) {
                serve_shutdown(&sv);
                code = 0;
        }
        serve_close(&sv);
        return code;
}
