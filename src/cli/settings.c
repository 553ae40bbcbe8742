/* SPDX-License-Identifier: MIT */
#include "settings.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"
#include "../manager/manager.h"

enum kind { K_STR, K_DURATION, K_INT, K_SIZE, K_BOOL };

struct option_def {
        const char *key;  /* config key; the flag is --key with '_' -> '-' */
        enum kind kind;
        size_t offset;
        unsigned groups;
        const char *def;  /* default as text; NULL = unset */
        const char *help;
        int64_t min, max; /* K_INT / K_SIZE bounds; both 0 = none */
};

/* A default of "auto": the daemon picks the value (K_INT: stored as -1). */
#define AUTO "auto"

#define OFF(f) offsetof(struct settings, f)

/* Entries without bounds leave min and max out (zero). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct option_def defs[] = {
        { "state", K_STR, OFF(state), SET_COMMON, "/var/lib/sandboxd",
          "state directory (store, keys, sandboxes); env SANDBOXD_STATE" },
        { "config", K_STR, OFF(config), SET_COMMON, NULL,
          "config file of `key = value` lines (default <state>/sandboxd.conf if present)" },
        { "images", K_STR, OFF(images), SET_COMMON, NULL, "images directory (default <state>/images)" },
        { "log_level", K_STR, OFF(log_level), SET_COMMON, "info", "debug, info, warn or error" },
        { "listen", K_STR, OFF(listen), SET_URL, "127.0.0.1:7070", "address and port to serve on" },
        { "url", K_STR, OFF(url), SET_URL, NULL,
          "public base URL, the identity tokens' iss (default http://<listen>)" },
        { "default_image", K_STR, OFF(default_image), SET_SERVE, "debian",
          "image of the `default` sandbox class" },
        { "init_path", K_STR, OFF(init_path), SET_SERVE, NULL,
          "sandbox-init binary (default: next to sandboxd, then the libexec dir)" },
        { "idle_timeout", K_DURATION, OFF(idle_timeout_ms), SET_SERVE, "15m",
          "suspend a sandbox after this long without a call" },
        { "suspended_ttl", K_DURATION, OFF(suspended_ttl_ms), SET_SERVE, "1h",
          "reclaim a sandbox suspended this long" },
        { "max_age", K_DURATION, OFF(max_age_ms), SET_SERVE, "8h",
          "reclaim a sandbox this long after its creation" },
        { "credential_ttl", K_DURATION, OFF(credential_ttl_ms), SET_SERVE, "15m",
          "lifetime of the data-plane credentials attach mints" },
        { "shutdown_grace", K_DURATION, OFF(shutdown_grace_ms), SET_SERVE, "10s",
          "on SIGTERM, how long requests in flight (an exec, a long poll) may finish" },
        { "token_leeway", K_DURATION, OFF(token_leeway_ms), SET_SERVE, "60s",
          "clock skew allowed on identity token exp/nbf/iat" },
        { "max_per_deployment", K_INT, OFF(max_per_deployment), SET_SERVE, "20",
          "sandboxes per deployment" },
        { "max_body", K_SIZE, OFF(max_body_bytes), SET_SERVE, "16M",
          "largest JSON request body" },
        { "max_file", K_SIZE, OFF(max_file_bytes), SET_SERVE, "4G",
          "largest file one PUT {endpoint}/files may write" },
        { "max_connections", K_INT, OFF(max_connections), SET_SERVE, "1024",
          "concurrent HTTP connections" },
        { "max_connections_per_ip", K_INT, OFF(max_connections_per_ip), SET_SERVE, NULL,
          "concurrent HTTP connections from one client address (default a quarter of max_connections)",
          1, 1048576 },
        { "request_head_timeout", K_DURATION, OFF(request_head_timeout_ms), SET_SERVE, "10s",
          "close a connection whose request line and headers take longer than this (0 = never)" },
        { "uid_base", K_INT, OFF(uid_base), SET_SERVE, AUTO,
          "first host uid of the per-sandbox id ranges, 65536 ids each (auto: what this state "
          "dir used last, else a range no other sandboxd of this host holds)",
          65536, 4294901760 },
        { "max_sandboxes", K_INT, OFF(max_sandboxes), SET_SERVE, "1024",
          "sandboxes this daemon holds at once; sizes the uid range it claims (x 65536 ids) and "
          "an auto net_range (x 4 addresses)",
          1, MGR_MAX_SLOTS },
        { "memory_limit", K_SIZE, OFF(memory_limit), SET_SERVE, "2G",
          "memory per sandbox (0 = unlimited)" },
        { "pids_limit", K_INT, OFF(pids_limit), SET_SERVE, "1024",
          "processes per sandbox (0 = unlimited)" },
        { "max_open_files", K_INT, OFF(max_open_files), SET_SERVE, "4096",
          "open files per sandbox process (RLIMIT_NOFILE, soft = hard)", 64, 1048576 },
        { "cpu_shares", K_INT, OFF(cpu_shares), SET_SERVE, "1024", "relative CPU weight per sandbox" },
        { "tmp_size", K_SIZE, OFF(tmp_size), SET_SERVE, "256M", "size of each sandbox's /tmp" },
        { "disk_limit", K_SIZE, OFF(disk_limit), SET_SERVE, "10G",
          "cap on each sandbox's files (sparse ext4 image, made at its first start; 0 = none)" },
        { "network", K_STR, OFF(network), SET_SERVE, "nat",
          "nat (outside only: never the host, private or link-local ranges) or none (loopback)" },
        { "net_range", K_STR, OFF(net_range), SET_SERVE, AUTO,
          "IPv4 range of the nat sandboxes' veth pairs, one /30 each (auto: what this state dir "
          "used last, else a free block of 10.200.0.0/14)" },
        { "dns", K_STR, OFF(dns), SET_SERVE, NULL,
          "nameservers of nat sandboxes, comma-separated public IPv4 (default: the host's public ones)" },
        { "dns_port", K_INT, OFF(dns_port), SET_SERVE, AUTO,
          "port of the DNS forwarder for nat sandboxes when the host has no public resolver "
          "(0 = off, auto = any free port)",
          0, 65535 },
        { "dns_upstream", K_STR, OFF(dns_upstream), SET_SERVE, NULL,
          "where the forwarder sends queries, \"a,b:port\" (default: the host's nameservers)" },
        { "pool_size", K_INT, OFF(pool_size), SET_SERVE, "2",
          "sandboxes of the default image kept started ahead of time (0-16)" },
        { "allow_unknown_accounts", K_BOOL, OFF(allow_unknown_accounts), SET_SERVE, "true",
          "accounts not enabled explicitly may use sandboxes" },
        { "rate_limit", K_INT, OFF(rate_limit), SET_SERVE, "0",
          "requests per second per deployment, answered 429 beyond (0 = off)" },
        { "rate_burst", K_INT, OFF(rate_burst), SET_SERVE, NULL,
          "requests a deployment may send at once (default 2 x rate_limit)" },
        { "local_issuer", K_BOOL, OFF(local_issuer), SET_SERVE, "true",
          "accept identity tokens signed with the server's own keys (sandboxd token)" },
        { "hs256_secret_file", K_STR, OFF(hs256_secret_file), SET_SERVE, NULL,
          "file holding an external issuer's HS256 secret (32 bytes or more)" },
        { "public_keys", K_STR, OFF(public_keys), SET_SERVE, NULL,
          "external issuers' PEM public keys (P-256: ES256, Ed25519: EdDSA), comma-separated" },
};
#pragma GCC diagnostic pop

static int parse_size(const char *s, int64_t *ret)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *s == '-')
                return -EINVAL;
        unsigned long long mult = 1;
        if (*end) {
                switch (*end) {
                case 'k': case 'K': mult = 1ull << 10; break;
                case 'm': case 'M': mult = 1ull << 20; break;
                case 'g': case 'G': mult = 1ull << 30; break;
                case 't': case 'T': mult = 1ull << 40; break;
                default: return -EINVAL;
                }
                if (end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))
                        return -EINVAL;
        }
        if (v > (unsigned long long)INT64_MAX / mult)
                return -ERANGE;
        *ret = (int64_t)(v * mult);
        return 0;
}

static bool is_bool_word(const char *v)
{
        static const char *const words[] = { "true", "false", "1", "0", "yes", "no", "on", "off" };
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (!strcmp(v, words[i]))
                        return true;
        return false;
}

static int set_value(struct settings *s, const struct option_def *d, const char *v)
{
        void *field = (char *)s + d->offset;
        int r = 0;
        if (d->kind == K_INT && d->def && !strcmp(d->def, AUTO) && !strcmp(v, AUTO)) {
                *(int64_t *)field = -1;
                return 0;
        }
        switch (d->kind) {
        case K_STR: {
                char *copy = strdup(v);
                if (!copy)
                        return -ENOMEM;
                free(*(char **)field);
                *(char **)field = copy;
                return 0;
        }
        case K_DURATION:
                r = parse_duration_ms(v, (int64_t *)field);
                break;
        case K_INT: {
                char *end;
                errno = 0;
                long long n = strtoll(v, &end, 10);
                if (errno || end == v || *end || n < 0)
                        r = -EINVAL;
                else
                        *(int64_t *)field = n;
                break;
        }
        case K_SIZE:
                r = parse_size(v, (int64_t *)field);
                break;
        case K_BOOL:
                if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on"))
                        *(bool *)field = true;
                else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no") ||
                         !strcmp(v, "off"))
                        *(bool *)field = false;
                else
                        r = -EINVAL;
                break;
        }
        if (r == 0 && (d->min || d->max) &&
            (*(int64_t *)field < d->min || *(int64_t *)field > d->max)) {
                fprintf(stderr, "sandboxd: %s must be %lld to %lld, not '%s'\n", d->key,
                        (long long)d->min, (long long)d->max, v);
                return -ERANGE;
        }
        if (r < 0)
                fprintf(stderr, "sandboxd: bad value '%s' for %s\n", v, d->key);
        return r;
}

void settings_defaults(struct settings *s)
{
        memset(s, 0, sizeof(*s));
        for (size_t i = 0; i < ARRAY_SIZE(defs); i++)
                if (defs[i].def)
                        set_value(s, &defs[i], defs[i].def);
}

void settings_free(struct settings *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(defs); i++)
                if (defs[i].kind == K_STR) {
                        char **p = (char **)((char *)s + defs[i].offset);
                        free(*p);
                        *p = NULL;
                }
}

static const struct option_def *find_def(const char *name, unsigned groups)
{
        char key[64];
        size_t n = strlen(name);
        if (n >= sizeof(key))
                return NULL;
        for (size_t i = 0; i <= n; i++)
                key[i] = name[i] == '-' ? '_' : name[i];
        for (size_t i = 0; i < ARRAY_SIZE(defs); i++)
                if ((defs[i].groups & groups) && !strcmp(defs[i].key, key))
                        return &defs[i];
        return NULL;
}

static char *trim(char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
                *--e = '\0';
        return s;
}

static int read_config(struct settings *s, const char *path, bool must_exist)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                if (!must_exist && errno == ENOENT)
                        return 0;
                fprintf(stderr, "sandboxd: cannot read config %s: %s\n", path, strerror(errno));
                return -EINVAL;
        }
        char line[4096];
        int lineno = 0, r = 0;
        while (fgets(line, sizeof(line), f)) {
                lineno++;
                char *l = trim(line);
                if (!*l || *l == '#')
                        continue;
                char *eq = strchr(l, '=');
                if (!eq) {
                        fprintf(stderr, "sandboxd: %s:%d: expected key = value\n", path, lineno);
                        r = -EINVAL;
                        break;
                }
                *eq = '\0';
                char *key = trim(l), *val = trim(eq + 1);
                size_t vl = strlen(val);
                if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
                        val[vl - 1] = '\0';
                        val++;
                }
                /* The config file may set anything, whatever the subcommand. */
                const struct option_def *d = find_def(key, ~0u);
                if (!d || !strcmp(d->key, "config")) {
                        fprintf(stderr, "sandboxd: %s:%d: unknown setting '%s'\n", path, lineno, key);
                        r = -EINVAL;
                        break;
                }
                if ((r = set_value(s, d, val)) < 0)
                        break;
        }
        fclose(f);
        return r;
}

int settings_parse(struct settings *s, unsigned groups, int argc, char **argv,
                   settings_extra_fn extra, const char *const *extra_flags, void *ctx,
                   char ***ret_args)
{
        groups |= SET_COMMON;
        char **args = calloc((size_t)argc + 1, sizeof(char *));
        if (!args)
                return -ENOMEM;
        size_t nargs = 0;
        /* Pass 1: find --config and --state, which decide the config file. */
        const char *config = NULL, *state_flag = NULL;
        for (int i = 0; i < argc; i++) {
                if (!strncmp(argv[i], "--config=", 9))
                        config = argv[i] + 9;
                else if (!strcmp(argv[i], "--config") && i + 1 < argc)
                        config = argv[i + 1];
                else if (!strncmp(argv[i], "--state=", 8))
                        state_flag = argv[i] + 8;
                else if (!strcmp(argv[i], "--state") && i + 1 < argc)
                        state_flag = argv[i + 1];
        }
        const char *env_state = getenv("SANDBOXD_STATE");
        const char *state = state_flag ? state_flag : env_state && *env_state ? env_state : s->state;
        char defconf[4096];
        int r;
        if (config) {
                r = read_config(s, config, true);
        } else {
                snprintf(defconf, sizeof(defconf), "%s/sandboxd.conf", state);
                r = read_config(s, defconf, false);
        }
        if (r < 0)
                goto fail;
        if (env_state && *env_state && (r = set_value(s, &defs[0], env_state)) < 0)
                goto fail;

        /* Pass 2: flags. */
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];
                if (strncmp(a, "--", 2) || !a[2]) {
                        if (a[0] == '-' && a[1] && strcmp(a, "-")) {
                                fprintf(stderr, "sandboxd: unknown option '%s'\n", a);
                                r = -EINVAL;
                                goto fail;
                        }
                        args[nargs++] = argv[i];
                        continue;
                }
                char name[128];
                const char *value = NULL;
                const char *eq = strchr(a + 2, '=');
                size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
                if (nl >= sizeof(name)) {
                        fprintf(stderr, "sandboxd: unknown option '%s'\n", a);
                        r = -EINVAL;
                        goto fail;
                }
                memcpy(name, a + 2, nl);
                name[nl] = '\0';
                if (eq)
                        value = eq + 1;

                const struct option_def *d = find_def(name, groups);
                bool takes_value = true;
                bool is_extra = false;
                if (!d && extra_flags) {
                        for (const char *const *e = extra_flags; *e; e++) {
                                size_t el = strlen(*e);
                                bool boolean = el && (*e)[el - 1] == '!';
                                if (strlen(name) == el - boolean && !strncmp(*e, name, el - boolean)) {
                                        is_extra = true;
                                        takes_value = !boolean;
                                }
                        }
                }
                if (!d && !is_extra) {
                        fprintf(stderr, "sandboxd: unknown option '--%s' (see --help)\n", name);
                        r = -EINVAL;
                        goto fail;
                }
                /* A boolean flag alone means true; `--flag false` works too. */
                if (d && d->kind == K_BOOL && !value)
                        value = i + 1 < argc && is_bool_word(argv[i + 1]) ? argv[++i] : "true";
                if (takes_value && !value && !(d && d->kind == K_BOOL)) {
                        if (i + 1 >= argc) {
                                fprintf(stderr, "sandboxd: option '--%s' needs a value\n", name);
                                r = -EINVAL;
                                goto fail;
                        }
                        value = argv[++i];
                }
                if (d)
                        r = set_value(s, d, value);
                else
                        r = extra(name, takes_value ? value : "true", ctx) < 0 ? -EINVAL : 0;
                if (r < 0)
                        goto fail;
        }
        if (!s->url && (groups & SET_URL)) {
                char u[512];
                snprintf(u, sizeof(u), "http://%s", s->listen);
                s->url = strdup(u);
        }
        if (!s->images) {
                char p[4096];
                snprintf(p, sizeof(p), "%s/images", s->state);
                s->images = strdup(p);
        }
        if (!s->url && (groups & SET_URL))
                return -ENOMEM;
        /* A trailing slash would make iss comparisons and endpoints differ. */
        if (s->url) {
                size_t ul = strlen(s->url);
                while (ul > 0 && s->url[ul - 1] == '/')
                        s->url[--ul] = '\0';
        }
        *ret_args = args;
        return 0;
fail:
        free(args);
        return r < 0 ? r : -EINVAL;
}

void settings_usage(unsigned groups)
{
        groups |= SET_COMMON;
        printf("Options (each is also a config-file key, with '_' for '-'):\n");
        for (size_t i = 0; i < ARRAY_SIZE(defs); i++) {
                const struct option_def *d = &defs[i];
                if (!(d->groups & groups))
                        continue;
                char flag[64];
                size_t n = strlen(d->key);
                for (size_t j = 0; j <= n; j++)
                        flag[j] = d->key[j] == '_' ? '-' : d->key[j];
                printf("  --%-24s %s", flag, d->help);
                if (d->min || d->max)
                        printf(" (%lld-%lld)", (long long)d->min, (long long)d->max);
                if (d->def)
                        printf(" [%s]", d->def);
                printf("\n");
        }
}
