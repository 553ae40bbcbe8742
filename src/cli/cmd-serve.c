/* SPDX-License-Identifier: MIT */
/* sandboxd serve: open the store, the keys and the runtime, reconnect to
 * the sandboxes still alive, serve HTTP until SIGTERM / SIGINT. Sandboxes
 * outlive the daemon: stopping it leaves them running. */
#include <fcntl.h>
#include <limits.h>
#include <sys/random.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "../api/api.h"
#include "../common/log.h"
#include "../manager/manager.h"
#include "../runtime/runtime.h"
#include "../store/store.h"
#include "cli.h"
#include "settings.h"

static void find_init(const struct settings *s, char *out, size_t len)
{
        if (s->init_path) {
                snprintf(out, len, "%s", s->init_path);
                return;
        }
        /* Next to this binary (a build tree), then the installed libexec. */
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = '\0';
                char *slash = strrchr(self, '/');
                if (slash) {
                        *slash = '\0';
                        snprintf(out, len, "%s/sandbox-init", self);
                        if (access(out, X_OK) == 0)
                                return;
                }
        }
        snprintf(out, len, "%s/sandbox-init", SANDBOXD_LIBEXECDIR);
}

/* A short random id of this state dir, made on first start: it names the
 * daemon's cgroup subtree, so two daemons with different state dirs on one
 * host (tests do that) never share a sandbox cgroup. */
static int instance_id(const char *state, char out[17])
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/instance-id", state);
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
                ssize_t n = read(fd, out, 16);
                close(fd);
                if (n == 16) {
                        out[16] = '\0';
                        bool ok = true;
                        for (int i = 0; i < 16; i++)
                                ok = ok && ((out[i] >= '0' && out[i] <= '9') ||
                                            (out[i] >= 'a' && out[i] <= 'f'));
                        if (ok)
                                return 0;
                }
        }
        uint8_t rnd[8];
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        for (int i = 0; i < 8; i++)
                snprintf(out + 2 * i, 3, "%02x", rnd[i]);
        char tmp[PATH_MAX];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        int r = write_all(fd, out, 16);
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
                .hs256_secret_file = s->hs256_secret_file && *s->hs256_secret_file
                                             ? s->hs256_secret_file
                                             : NULL,
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
        if (!strcmp(s, "debug"))
                return LOG_DEBUG;
        if (!strcmp(s, "warn"))
                return LOG_WARN;
        if (!strcmp(s, "error"))
                return LOG_ERROR;
        return LOG_INFO;
}

int cmd_serve(int argc, char **argv)
{
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf("usage: sandboxd serve [OPTIONS]\n\n");
                        settings_usage(SET_SERVE | SET_URL);
                        return 0;
                }
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        if (settings_parse(&s, SET_SERVE | SET_URL, argc, argv, NULL, NULL, NULL, &args) < 0)
                return 2;
        if (args[0]) {
                fprintf(stderr, "sandboxd serve: unexpected argument '%s'\n", args[0]);
                return 2;
        }
        free(args);
        log_set_level(parse_level(s.log_level));

        int ret = 1;
        struct sbx_error err = { 0 };
        struct store *st = NULL;
        struct keyring *keys = NULL;
        struct rt *rt = NULL;
        struct manager *mgr = NULL;
        struct api *api = NULL;
        struct rt_claim claim = { .fd = -1 };
        struct keys_external_config ext;
        _cleanup_free_ char *pubkeys_copy = NULL;
        _cleanup_free_ const char **pubkeys = NULL;

        int r = mkdir_p(s.state, 0700);
        if (r < 0) {
                log_error("cannot create state dir %s: %s", s.state, strerror(-r));
                goto out;
        }
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/sandboxd.db", s.state);
        if (s.public_keys && split_list(s.public_keys, &pubkeys_copy, &pubkeys) < 0) {
                log_error("out of memory");
                goto out;
        }
        if (!issuers_config(&s, pubkeys, &ext))
                goto out;
        if (store_open(path, &st, &err) < 0 || keys_load(s.state, &ext, &keys, &err) < 0) {
                log_error("%s", err.msg);
                goto out;
        }
        char init_path[PATH_MAX];
        find_init(&s, init_path, sizeof(init_path));
        char inst[17], cgroot[64];
        if ((r = instance_id(s.state, inst)) < 0) {
                log_error("cannot write %s/instance-id: %s", s.state, strerror(-r));
                goto out;
        }
        snprintf(cgroot, sizeof(cgroot), "sandboxd/%s", inst);
        if (s.disk_limit && s.disk_limit < (16 << 20)) {
                log_error("disk_limit must be 0 (none) or at least 16M");
                goto out;
        }
        bool nat = !strcmp(s.network, "nat");
        if (!nat && strcmp(s.network, "none")) {
                log_error("network must be nat or none, not `%s`", s.network);
                goto out;
        }
        /* The host-wide ranges, claimed against every other sandboxd of
         * this host for as long as this one runs. */
        char state_abs[PATH_MAX];
        if (!realpath(s.state, state_abs)) {
                log_error("state dir %s: %s", s.state, strerror(errno));
                goto out;
        }
        struct rt_claim_want want = { .state_dir = state_abs, .instance = inst,
                                      .uid_base = s.uid_base,
                                      .uid_count = (uint32_t)s.max_sandboxes * MGR_UID_RANGE,
                                      .net_range = nat ? s.net_range : NULL,
                                      .net_slots = (uint32_t)s.max_sandboxes };
        if (rt_claim_take(&want, &claim, &err) < 0) {
                log_error("%s", err.msg);
                goto out;
        }
        log_info("instance %s: uids %u-%u%s%s", inst, claim.uid_base,
                 claim.uid_base + (claim.uid_count - 1), nat ? ", net_range " : "",
                 nat ? claim.net_range : "");
        struct rt_config rtc = { .init_path = init_path, .cgroup_root = cgroot,
                                 .instance = inst,
                                 .net_range = nat ? claim.net_range : NULL, .dns = s.dns,
                                 .dns_port = (int32_t)s.dns_port,
                                 .dns_upstream = s.dns_upstream };
        /* Before any thread exists: the runtime forks its helper here. */
        if (rt_open(&rtc, &rt, &err) < 0) {
                log_error("runtime: %s", err.msg);
                goto out;
        }

        /* SIGTERM / SIGINT / SIGHUP are taken by sigwait below; every thread
         * started from here on inherits the blocked mask. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);

        struct mgr_config mc = {
                .state_dir = s.state,
                .images_dir = s.images,
                .default_image = s.default_image,
                .uid_base = claim.uid_base,
                .max_sandboxes = (uint32_t)s.max_sandboxes,
                .idle_timeout_ms = s.idle_timeout_ms,
                .suspended_ttl_ms = s.suspended_ttl_ms,
                .max_age_ms = s.max_age_ms,
                .max_per_deployment = s.max_per_deployment,
                .allow_unknown_accounts = s.allow_unknown_accounts,
                .pool_size = s.pool_size,
                .limits = { .memory_bytes = (uint64_t)s.memory_limit,
                            .pids = (uint64_t)s.pids_limit,
                            .nofile = (uint32_t)s.max_open_files,
                            .cpu_shares = (uint64_t)s.cpu_shares,
                            .tmp_bytes = (uint64_t)s.tmp_size,
                            .disk_bytes = (uint64_t)s.disk_limit,
                            .network = nat ? RT_NET_NAT : RT_NET_NONE },
        };
        if (mgr_open(&mc, st, rt, &mgr, &err) < 0) {
                log_error("manager: %s", err.msg);
                goto out;
        }
        struct api_config ac = {
                .listen = s.listen,
                .url = s.url,
                .state_dir = s.state,
                .keys_ext = &ext,
                .credential_ttl_ms = s.credential_ttl_ms,
                .token_leeway_ms = s.token_leeway_ms,
                .max_body_bytes = s.max_body_bytes,
                .max_file_bytes = s.max_file_bytes,
                .max_connections = s.max_connections,
                .max_connections_per_ip = s.max_connections_per_ip,
                .request_head_timeout_ms = s.request_head_timeout_ms,
                .rate_limit = s.rate_limit,
                .rate_burst = s.rate_burst,
        };
        if (api_new(&ac, mgr, keys, &api, &err) < 0) {
                log_error("%s", err.msg);
                goto out;
        }
        keys = NULL; /* the api's now */
        if (api_start(api, &err) < 0) {
                log_error("%s", err.msg);
                goto out;
        }
        log_info("sandboxd %s serving on %s (url %s, state %s, images %s)", SANDBOXD_VERSION,
                 s.listen, s.url, s.state, s.images);

        for (;;) {
                int sig = 0;
                if (sigwait(&set, &sig) != 0)
                        continue;
                if (sig == SIGHUP) {
                        api_reload_keys(api);
                        continue;
                }
                log_info("signal %d: shutting down (sandboxes keep running)", sig);
                break;
        }
        int left = api_drain(api, s.shutdown_grace_ms);
        if (left > 0) {
                /* A request still waits on its sandbox (an exec without a
                 * deadline, say). Its command goes on in the sandbox; only
                 * the answer is lost. The store is a WAL: leaving without
                 * closing it loses nothing. */
                log_warn("%d requests still running after %lld ms; leaving without them",
                         left, (long long)s.shutdown_grace_ms);
                mgr_stop_pool(mgr);
                _exit(0);
        }
        ret = 0;
out:
        api_stop(api);
        mgr_close(mgr);
        /* The claim stays recorded while sandboxes of this instance run on
         * (they outlive the daemon); no other daemon picks it by itself. */
        bool alive = !rt || rt_any_alive(rt);
        rt_close(rt);
        rt_claim_release(&claim, !alive);
        api_free(api);
        keyring_free(keys);
        store_close(st);
        settings_free(&s);
        return ret;
}
