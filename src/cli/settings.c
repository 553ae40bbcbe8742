/* SPDX-License-Identifier: MIT */
#include "settings.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../api/jwt.h"
#include "../api/ratelimit.h"
#include "../common/util.h"
#include "../manager/manager.h"

enum kind { K_STR, K_ENUM, K_DURATION, K_INT, K_SIZE, K_BOOL };

/* Values a number takes besides its range. */
#define V_AUTO (1u << 0) /* "auto": the daemon picks it (stored as -1) */
#define V_ZERO (1u << 1) /* 0: none / off, below the range's minimum */

struct option_def {
        const char *key; /* config key; the flag is --key with '_' -> '-' */
        enum kind kind;
        size_t offset;
        unsigned groups;
        const char *def; /* default as text; NULL = unset */
        const char *help;
        int64_t min, max;         /* K_INT, K_SIZE, K_DURATION: the range */
        unsigned also;            /* V_AUTO, V_ZERO */
        const char *const *words; /* K_ENUM: the values, NULL-terminated */
};

#define OFF(f) offsetof(struct settings, f)

/* One constructor per kind, redis's createIntConfig(name, min, max, default)
 * style: a number's range is where the setting is declared, and a value
 * outside it is an error that names the setting, never clamped. */
#define STR(key, f, groups, def, help)                                                             \
        {                                                                                          \
                key, K_STR, OFF(f), groups, def, help, 0, 0, 0, NULL                               \
        }
#define ENUM(key, f, groups, def, help, ...)                                                       \
        {                                                                                          \
                key, K_ENUM, OFF(f), groups, def, help, 0, 0, 0, (const char *const[])             \
                {                                                                                  \
                        __VA_ARGS__, NULL                                                          \
                }                                                                                  \
        }
#define BOOL(key, f, groups, def, help)                                                            \
        {                                                                                          \
                key, K_BOOL, OFF(f), groups, def, help, 0, 0, 0, NULL                              \
        }
#define INT(key, f, groups, def, min, max, also, help)                                             \
        {                                                                                          \
                key, K_INT, OFF(f), groups, def, help, min, max, also, NULL                        \
        }
#define SIZE(key, f, groups, def, min, max, also, help)                                            \
        {                                                                                          \
                key, K_SIZE, OFF(f), groups, def, help, min, max, also, NULL                       \
        }
#define DURATION(key, f, groups, def, min, max, also, help)                                        \
        {                                                                                          \
                key, K_DURATION, OFF(f), groups, def, help, min, max, also, NULL                   \
        }

#define KiB (INT64_C(1) << 10)
#define MiB (INT64_C(1) << 20)
#define GiB (INT64_C(1) << 30)
#define TiB (INT64_C(1) << 40)
#define SEC INT64_C(1000)
#define MINUTE (60 * SEC)
#define HOUR (60 * MINUTE)
#define DAY (24 * HOUR)

/* cpu.shares' range, which cgroup v2's cpu.weight is converted from. */
#define CPU_SHARES_MIN 2
#define CPU_SHARES_MAX 262144
/* The kernel's PID_MAX_LIMIT. */
#define PIDS_MAX 4194304

static const struct option_def defs[] = {
    STR("state", state, SET_COMMON, "/var/lib/sandboxd",
        "state directory (store, keys, sandboxes); env SANDBOXD_STATE"),
    STR("config", config, SET_COMMON, NULL,
        "config file of `key = value` lines (default <state>/sandboxd.conf if present)"),
    STR("images", images, SET_COMMON, NULL, "images directory (default <state>/images)"),
    ENUM("log_level", log_level, SET_COMMON, "info", "how much the daemon logs", "debug", "info",
         "warn", "error"),
    ENUM("log_format", log_format, SET_COMMON, "text",
         "log lines: text (time level message), logfmt (ts= level= msg=), or json (an object "
         "per line)",
         "text", "logfmt", "json"),
    STR("listen", listen, SET_URL, "127.0.0.1:7070", "address and port to serve on"),
    STR("url", url, SET_URL, NULL,
        "public base URL, the identity tokens' iss (default http://<listen>)"),
    STR("preview_domain", preview_domain, SET_SERVE, NULL,
        "domain of preview share host names, <port>-<token>.<domain> (a wildcard DNS name "
        "that reaches this daemon; may end in :PORT); unset: path-form share URLs only"),
    STR("default_image", default_image, SET_SERVE, "debian", "image of every sandbox class"),
    ENUM("default_class", default_class, SET_SERVE, "ns",
         "driver of the `default` sandbox class (see Sandbox classes below); a sandbox keeps the "
         "driver it was created under",
         "ns", "gvisor"),
    STR("runsc", runsc, SET_SERVE, NULL,
        "runsc binary of the gvisor class (default: `runsc` on PATH)"),
    ENUM("gvisor_platform", gvisor_platform, SET_SERVE, "auto",
         "gVisor platform of the gvisor class (auto = systrap; kvm is never used)", "auto",
         "systrap", "ptrace"),
    STR("init_path", init_path, SET_SERVE, NULL,
        "sandbox-init binary (default: next to sandboxd, then the libexec dir)"),
    DURATION("idle_timeout", idle_timeout_ms, SET_SERVE, "15m", SEC, 365 * DAY, 0,
             "suspend a sandbox after this long without a call"),
    DURATION("suspended_ttl", suspended_ttl_ms, SET_SERVE, "1h", SEC, 365 * DAY, 0,
             "reclaim a sandbox suspended this long"),
    DURATION("max_age", max_age_ms, SET_SERVE, "8h", SEC, 365 * DAY, 0,
             "reclaim a sandbox this long after its creation"),
    DURATION("credential_ttl", credential_ttl_ms, SET_SERVE, "15m", SEC, 365 * DAY, 0,
             "lifetime of the data-plane credentials attach mints"),
    DURATION("shutdown_grace", shutdown_grace_ms, SET_SERVE, "10s", 0, HOUR, 0,
             "on SIGTERM, how long requests in flight (an exec, a long poll) may finish"),
    DURATION("token_leeway", token_leeway_ms, SET_SERVE, "60s", 0, JWT_MAX_LEEWAY_S *SEC, 0,
             "clock skew allowed on identity token exp/nbf/iat (whole seconds count)"),
    INT("max_per_deployment", max_per_deployment, SET_SERVE, "20", 0, MGR_MAX_SLOTS, 0,
        "sandboxes per deployment (0 = no cap)"),
    SIZE("max_body", max_body_bytes, SET_SERVE, "16M", 1, TiB, 0, "largest JSON request body"),
    SIZE("max_file", max_file_bytes, SET_SERVE, "4G", 1, 1024 * TiB, 0,
         "largest file one PUT {endpoint}/files may write"),
    INT("max_connections", max_connections, SET_SERVE, "1024", 1, 1048576, 0,
        "concurrent HTTP connections"),
    INT("max_connections_per_ip", max_connections_per_ip, SET_SERVE, NULL, 1, 1048576, 0,
        "concurrent HTTP connections from one client address (default a quarter of "
        "max_connections)"),
    DURATION("port_timeout", port_timeout_ms, SET_SERVE, "60s", SEC, HOUR, 0,
             "{endpoint}/ports/: how long the server in a sandbox may take to begin its answer "
             "(504 after), and a body or upgraded connection may stay silent (cut after twice "
             "this; ten times for an upgraded one)"),
    DURATION("request_head_timeout", request_head_timeout_ms, SET_SERVE, "10s", SEC, HOUR, V_ZERO,
             "close a connection whose request line and headers take longer than this (0 = "
             "never)"),
    INT("uid_base", uid_base, SET_SERVE, "auto", 65536, 4294901760, V_AUTO,
        "first host uid of the per-sandbox id ranges, 65536 ids each (auto: what this state "
        "dir used last, else a range no other sandboxd of this host holds)"),
    INT("max_sandboxes", max_sandboxes, SET_SERVE, "1024", 1, MGR_MAX_SLOTS, 0,
        "sandboxes this daemon holds at once; sizes the uid range it claims (x 65536 ids) and "
        "an auto net_range (x 4 addresses)"),
    SIZE("memory_limit", memory_limit, SET_SERVE, "2G", 0, 1024 * TiB, 0,
         "memory per sandbox (0 = unlimited)"),
    INT("pids_limit", pids_limit, SET_SERVE, "1024", 0, PIDS_MAX, 0,
        "processes per sandbox (0 = unlimited)"),
    INT("max_open_files", max_open_files, SET_SERVE, "4096", 64, 1048576, 0,
        "open files per sandbox process (RLIMIT_NOFILE, soft = hard)"),
    INT("cpu_shares", cpu_shares, SET_SERVE, "1024", CPU_SHARES_MIN, CPU_SHARES_MAX, V_ZERO,
        "relative CPU weight per sandbox (0 = the cgroup's default)"),
    SIZE("tmp_size", tmp_size, SET_SERVE, "256M", 0, TiB, 0,
         "size of each sandbox's /tmp (0 = the runtime's default)"),
    SIZE("disk_limit", disk_limit, SET_SERVE, "10G", 16 * MiB, 1024 * TiB, V_ZERO,
         "cap on each sandbox's files (sparse ext4 image, made at its first start; 0 = none)"),
    ENUM("network", network, SET_SERVE, "nat",
         "nat (outside only: never the host, private or link-local ranges) or none (loopback)",
         "nat", "none"),
    STR("net_range", net_range, SET_SERVE, "auto",
        "IPv4 range of the nat sandboxes' veth pairs, one /30 each (auto: what this state dir "
        "used last, else a free block of 10.200.0.0/14)"),
    STR("dns", dns, SET_SERVE, NULL,
        "nameservers of nat sandboxes, comma-separated public IPv4 (default: the host's public "
        "ones)"),
    INT("dns_port", dns_port, SET_SERVE, "auto", 0, 65535, V_AUTO,
        "port of the DNS forwarder for nat sandboxes when the host has no public resolver "
        "(0 = off, auto = any free port)"),
    STR("dns_upstream", dns_upstream, SET_SERVE, NULL,
        "where the forwarder sends queries, \"a,b:port\" (default: the host's nameservers)"),
    STR("net_open_ranges", net_open_ranges, SET_SERVE, NULL,
        "IPv4 networks of the ranges nat sandboxes never reach (private, link-local, the host's "
        "own) that they may reach after all, comma-separated (egress policies still apply)"),
    INT("pool_size", pool_size, SET_SERVE, "2", 0, MGR_MAX_POOL, 0,
        "sandboxes of the ns driver kept started ahead of time, for the ns class (and default "
        "under default_class = ns)"),
    INT("gvisor_pool_size", gvisor_pool_size, SET_SERVE, "0", 0, MGR_MAX_POOL, 0,
        "sandboxes of the gvisor driver kept started ahead of time, for the gvisor class (and "
        "default under default_class = gvisor)"),
    BOOL("allow_unknown_accounts", allow_unknown_accounts, SET_SERVE, "true",
         "accounts not enabled explicitly may use sandboxes"),
    INT("rate_limit", rate_limit, SET_SERVE, "0", 0, RATELIMIT_MAX_RATE, 0,
        "requests per second per deployment, answered 429 beyond (0 = off)"),
    INT("rate_burst", rate_burst, SET_SERVE, NULL, 0, RATELIMIT_MAX_BURST, 0,
        "requests a deployment may send at once (default 2 x rate_limit)"),
    BOOL("local_issuer", local_issuer, SET_SERVE, "true",
         "accept identity tokens signed with the server's own keys (sandboxd token)"),
    STR("hs256_secret_file", hs256_secret_file, SET_SERVE, NULL,
        "file holding an external issuer's HS256 secret (32 bytes or more)"),
    STR("public_keys", public_keys, SET_SERVE, NULL,
        "external issuers' PEM public keys (P-256: ES256, Ed25519: EdDSA), comma-separated"),
    STR("issuer", issuer, SET_URL, NULL,
        "the identity tokens' iss (default: url); one value for every host of a cluster"),
    STR("cluster_etcd", cluster_etcd, SET_SERVE, NULL,
        "cluster mode: etcd client URLs, comma-separated (default: off, one host); url is the "
        "data-plane URL other hosts and clients reach this host at"),
    STR("host_id", host_id, SET_SERVE, NULL,
        "cluster mode: this host's name, unique in the cluster (required with cluster_etcd)"),
    STR("cluster_prefix", cluster_prefix, SET_SERVE, "/sandboxd/",
        "cluster mode: the etcd key prefix of the cluster's records"),
    DURATION("cluster_lease_ttl", cluster_lease_ttl_ms, SET_SERVE, "10s", 2 * SEC, 5 * MINUTE, 0,
             "cluster mode: the host's lease; a host silent this long is lost and its sandboxes' "
             "names are placed anew elsewhere"),
    STR("cluster_etcd_ca", cluster_etcd_ca, SET_SERVE, NULL,
        "cluster mode: CA file of etcd's TLS certificates"),
    STR("cluster_etcd_cert", cluster_etcd_cert, SET_SERVE, NULL,
        "cluster mode: client certificate file for etcd"),
    STR("cluster_etcd_key", cluster_etcd_key, SET_SERVE, NULL,
        "cluster mode: client key file for etcd"),
};

int settings_parse_size(const char *s, int64_t *ret)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *s == '-')
                return -EINVAL;
        unsigned long long mult = 1;
        if (*end) {
                switch (*end) {
                case 'k':
                case 'K':
                        mult = 1ull << 10;
                        break;
                case 'm':
                case 'M':
                        mult = 1ull << 20;
                        break;
                case 'g':
                case 'G':
                        mult = 1ull << 30;
                        break;
                case 't':
                case 'T':
                        mult = 1ull << 40;
                        break;
                default:
                        return -EINVAL;
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
        static const char *const words[] = {"true", "false", "1", "0", "yes", "no", "on", "off"};
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (!strcmp(v, words[i]))
                        return true;
        return false;
}

static int parse_int(const char *v, int64_t *ret)
{
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (errno || end == v || *end || n < 0)
                return -EINVAL;
        *ret = n;
        return 0;
}

static int parse_bool(const char *v, bool *ret)
{
        if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes") || !strcmp(v, "on"))
                *ret = true;
        else if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no") || !strcmp(v, "off"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

static int set_string(char **field, const char *v)
{
        char *copy = strdup(v);
        if (!copy)
                return -ENOMEM;
        free(*field);
        *field = copy;
        return 0;
}

static bool is_word(const struct option_def *d, const char *v)
{
        for (const char *const *w = d->words; *w; w++)
                if (!strcmp(*w, v))
                        return true;
        return false;
}

static bool is_number(enum kind k)
{
        return k == K_INT || k == K_SIZE || k == K_DURATION;
}

/* A number of d's kind as it is written: 16M, 90s, 1024. */
static void format_number(const struct option_def *d, int64_t v, char *out, size_t len)
{
        static const struct {
                int64_t unit;
                const char *suffix;
        } sizes[] = {{TiB, "T"}, {GiB, "G"}, {MiB, "M"}, {KiB, "K"}},
          times[] = {{DAY, "d"}, {HOUR, "h"}, {MINUTE, "m"}, {SEC, "s"}};
        const char *suffix = d->kind == K_DURATION && v ? "ms" : "";
        int64_t n = v;
        for (size_t i = 0; v && d->kind != K_INT && i < ARRAY_SIZE(sizes); i++) {
                int64_t unit = d->kind == K_SIZE ? sizes[i].unit : times[i].unit;
                if (v % unit == 0) {
                        n = v / unit;
                        suffix = d->kind == K_SIZE ? sizes[i].suffix : times[i].suffix;
                        break;
                }
        }
        snprintf(out, len, "%lld%s", (long long)n, suffix);
}

/* What d accepts, for its error and its help: "16M-1024T, or 0". */
static void format_range(const struct option_def *d, char *out, size_t len)
{
        char lo[32], hi[32];
        if (d->kind == K_ENUM) {
                size_t o = 0;
                out[0] = '\0';
                for (const char *const *w = d->words; *w && o < len; w++)
                        o += (size_t)snprintf(out + o, len - o, "%s%s", w == d->words ? "" : ", ",
                                              *w);
                return;
        }
        format_number(d, d->min, lo, sizeof(lo));
        format_number(d, d->max, hi, sizeof(hi));
        snprintf(out, len, "%s-%s%s%s", lo, hi, d->also & V_ZERO ? ", or 0" : "",
                 d->also & V_AUTO ? ", or auto" : "");
}

static int parse_value(struct settings *s, const struct option_def *d, const char *v)
{
        void *field = (char *)s + d->offset;
        switch (d->kind) {
        case K_STR:
                return set_string(field, v);
        case K_ENUM:
                return is_word(d, v) ? set_string(field, v) : -ERANGE;
        case K_BOOL:
                return parse_bool(v, field);
        case K_DURATION:
        case K_INT:
        case K_SIZE:
                break;
        }
        int64_t n;
        int r;
        if ((d->also & V_AUTO) && !strcmp(v, "auto")) {
                *(int64_t *)field = -1;
                return 0;
        }
        if (d->kind == K_DURATION)
                r = parse_duration_ms(v, &n);
        else if (d->kind == K_SIZE)
                r = settings_parse_size(v, &n);
        else
                r = parse_int(v, &n);
        if (r < 0)
                return -EINVAL;
        if ((n < d->min || n > d->max) && !(n == 0 && (d->also & V_ZERO)))
                return -ERANGE;
        *(int64_t *)field = n;
        return 0;
}

/* Set d from its text v; a bad value is an error naming the setting (and
 * where it was set: "file:line: ", or ""). */
static int set_value_at(struct settings *s, const struct option_def *d, const char *v,
                        const char *where)
{
        int r = parse_value(s, d, v);
        if (r == -ERANGE) {
                char range[128];
                format_range(d, range, sizeof(range));
                fprintf(stderr, "sandboxd: %s%s must be %s%s, not '%s'\n", where, d->key,
                        d->kind == K_ENUM ? "one of " : "", range, v);
        } else if (r < 0 && r != -ENOMEM) {
                fprintf(stderr, "sandboxd: %sbad value '%s' for %s\n", where, v, d->key);
        }
        /* What settings_parse promises: a bad value is -EINVAL. */
        return r == -ENOMEM ? r : r < 0 ? -EINVAL : 0;
}

static int set_value(struct settings *s, const struct option_def *d, const char *v)
{
        return set_value_at(s, d, v, "");
}

int settings_defaults(struct settings *s)
{
        int ret = 0;
        memset(s, 0, sizeof(*s));
        for (size_t i = 0; i < ARRAY_SIZE(defs); i++) {
                int r = defs[i].def ? set_value(s, &defs[i], defs[i].def) : 0;
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

void settings_free(struct settings *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(defs); i++)
                if (defs[i].kind == K_STR || defs[i].kind == K_ENUM) {
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
                        fprintf(stderr, "sandboxd: %s:%d: unknown setting '%s'\n", path, lineno,
                                key);
                        r = -EINVAL;
                        break;
                }
                char where[PATH_MAX + 32];
                snprintf(where, sizeof(where), "%s:%d: ", path, lineno);
                if ((r = set_value_at(s, d, val, where)) < 0)
                        break;
        }
        fclose(f);
        return r;
}

/* Pass 1: the config file (--config, else <state>/sandboxd.conf if it is
 * there, with the state dir from --state, SANDBOXD_STATE or the default),
 * then SANDBOXD_STATE over it. */
static int read_config_and_env(struct settings *s, int argc, char **argv)
{
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
        if (env_state && !*env_state)
                env_state = NULL;
        const char *state = state_flag ? state_flag : env_state ? env_state : s->state;
        int r;
        if (config) {
                r = read_config(s, config, true);
        } else {
                char defconf[PATH_MAX];
                r = path_join(defconf, sizeof(defconf), state, "sandboxd.conf");
                if (r < 0)
                        fprintf(stderr, "sandboxd: state dir %s: path too long\n", state);
                else
                        r = read_config(s, defconf, false);
        }
        if (r == 0 && env_state)
                r = set_value(s, find_def("state", SET_COMMON), env_state);
        return r;
}

/* The flags a caller takes besides the table's: "name" takes a value,
 * "name!" is a boolean. Whether name is one; *takes_value. */
static bool is_extra_flag(const char *const *extra_flags, const char *name, bool *takes_value)
{
        for (const char *const *e = extra_flags; e && *e; e++) {
                size_t el = strlen(*e);
                bool boolean = el && (*e)[el - 1] == '!';
                if (strlen(name) == el - boolean && !strncmp(*e, name, el - boolean)) {
                        *takes_value = !boolean;
                        return true;
                }
        }
        return false;
}

struct flags {
        unsigned groups;
        settings_extra_fn extra;
        const char *const *extra_flags;
        void *ctx;
        int argc;
        char **argv;
};

/* Pass 2, one flag: argv[*i] is "--name[=value]"; a value of its own
 * moves *i on. */
static int parse_flag(struct settings *s, const struct flags *f, int *i)
{
        const char *a = f->argv[*i];
        char name[128];
        const char *eq = strchr(a + 2, '=');
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nl >= sizeof(name)) {
                fprintf(stderr, "sandboxd: unknown option '%s'\n", a);
                return -EINVAL;
        }
        memcpy(name, a + 2, nl);
        name[nl] = '\0';
        const char *value = eq ? eq + 1 : NULL;
        const struct option_def *d = find_def(name, f->groups);
        bool takes_value = true;
        if (!d && !is_extra_flag(f->extra_flags, name, &takes_value)) {
                fprintf(stderr, "sandboxd: unknown option '--%s' (see --help)\n", name);
                return -EINVAL;
        }
        bool next = *i + 1 < f->argc;
        /* A boolean flag alone means true; `--flag false` works too. */
        if (d && d->kind == K_BOOL && !value)
                value = next && is_bool_word(f->argv[*i + 1]) ? f->argv[++*i] : "true";
        if (takes_value && !value) {
                if (!next) {
                        fprintf(stderr, "sandboxd: option '--%s' needs a value\n", name);
                        return -EINVAL;
                }
                value = f->argv[++*i];
        }
        if (d)
                return set_value(s, d, value);
        return f->extra(name, takes_value ? value : "true", f->ctx) < 0 ? -EINVAL : 0;
}

/* Settings whose default comes from others: url from listen, images from
 * state. */
static int fill_derived(struct settings *s, unsigned groups)
{
        if (!s->url && (groups & SET_URL) && asprintf(&s->url, "http://%s", s->listen) < 0) {
                s->url = NULL;
                return -ENOMEM;
        }
        if (!s->images && asprintf(&s->images, "%s/images", s->state) < 0) {
                s->images = NULL;
                return -ENOMEM;
        }
        /* A trailing slash would make iss comparisons and endpoints differ. */
        if (s->url) {
                size_t ul = strlen(s->url);
                while (ul > 0 && s->url[ul - 1] == '/')
                        s->url[--ul] = '\0';
        }
        return 0;
}

int settings_parse(struct settings *s, unsigned groups, int argc, char **argv,
                   settings_extra_fn extra, const char *const *extra_flags, void *ctx,
                   char ***ret_args)
{
        const struct flags f = {.groups = groups | SET_COMMON,
                                .extra = extra,
                                .extra_flags = extra_flags,
                                .ctx = ctx,
                                .argc = argc,
                                .argv = argv};
        _cleanup_free_ char **args = calloc((size_t)argc + 1, sizeof(char *));
        if (!args)
                return -ENOMEM;
        size_t nargs = 0;
        int r = read_config_and_env(s, argc, argv);
        for (int i = 0; r == 0 && i < argc; i++) {
                const char *a = argv[i];
                if (!strncmp(a, "--", 2) && a[2]) {
                        r = parse_flag(s, &f, &i);
                } else if (a[0] == '-' && a[1] && strcmp(a, "-")) {
                        fprintf(stderr, "sandboxd: unknown option '%s'\n", a);
                        r = -EINVAL;
                } else {
                        args[nargs++] = argv[i];
                }
        }
        if (r == 0)
                r = fill_derived(s, f.groups);
        if (r < 0)
                return r;
        *ret_args = TAKE_PTR(args);
        return 0;
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
                if (is_number(d->kind) || d->kind == K_ENUM) {
                        char range[128];
                        format_range(d, range, sizeof(range));
                        printf(" (%s)", range);
                }
                if (d->def)
                        printf(" [%s]", d->def);
                printf("\n");
        }
}
