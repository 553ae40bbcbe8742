/* SPDX-License-Identifier: MIT */
/* Every setting of sandboxd, in one table: each has a config-file key
 * (`key = value`), a command-line flag (--key-with-dashes) and a default.
 * Precedence: defaults < config file < environment (SANDBOXD_STATE) < flags. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct settings {
        char *listen;         /* ADDR:PORT */
        char *url;            /* public base URL; default http://<listen> */
        char *preview_domain; /* preview shares' host names: <port>-<token>.<this>; NULL none */
        char *state;          /* state dir */
        char *images;         /* images dir; default <state>/images */
        char *config;         /* config file path */
        char *default_image;
        char *default_class;     /* driver of the `default` class: "ns" or "gvisor" */
        char *runsc;             /* runsc binary; NULL = `runsc` on PATH */
        char *gvisor_platform;   /* "auto", "systrap" or "ptrace" */
        char *init_path;         /* sandbox-init binary */
        char *log_level;         /* debug, info, warn or error */
        char *log_format;        /* text, logfmt or json */
        char *hs256_secret_file; /* external issuer: HS256 shared secret */
        char *public_keys;       /* external issuer: comma-separated PEM files */
        char *network;           /* "nat" or "none" */
        char *net_range;         /* IPv4 CIDR of the sandboxes' veth pairs, or "auto" */
        char *dns;               /* nameservers of nat sandboxes; NULL = host's public ones */
        int64_t idle_timeout_ms;
        int64_t suspended_ttl_ms;
        int64_t max_age_ms;
        int64_t credential_ttl_ms;
        int64_t token_leeway_ms;
        int64_t shutdown_grace_ms;
        int64_t max_per_deployment;
        int64_t max_body_bytes;
        int64_t max_file_bytes;
        int64_t max_connections;
        int64_t max_connections_per_ip; /* 0 = a quarter of max_connections */
        int64_t request_head_timeout_ms;
        int64_t port_timeout_ms;
        int64_t uid_base; /* -1 = auto */
        int64_t max_sandboxes;
        int64_t memory_limit;
        int64_t pids_limit;
        int64_t max_open_files; /* RLIMIT_NOFILE of sandbox processes */
        int64_t cpu_shares;
        int64_t tmp_size;
        int64_t disk_limit; /* writable layer cap; 0 = none */
        int64_t rate_limit; /* requests/s per deployment; 0 = off */
        int64_t rate_burst; /* 0 = 2 x rate_limit */
        bool allow_unknown_accounts;
        int64_t pool_size;        /* warm sandboxes of the ns driver */
        int64_t gvisor_pool_size; /* warm sandboxes of the gvisor driver */
        int64_t dns_port;         /* -1 = auto (any free port), 0 = off */
        char *dns_upstream;
        char *net_open_ranges;
        bool local_issuer; /* accept tokens of the server's own keys */
        char *issuer;      /* identity tokens' iss; NULL = url */
        /* Cluster mode (cluster/cluster.h): off while cluster_etcd is NULL. */
        char *cluster_etcd;   /* comma-separated etcd client URLs */
        char *host_id;        /* this host's name in the cluster */
        char *cluster_prefix; /* etcd key prefix */
        char *cluster_etcd_ca, *cluster_etcd_cert, *cluster_etcd_key;
        int64_t cluster_lease_ttl_ms;
};

/* Which settings a subcommand accepts (a bit mask of groups). */
enum settings_group {
        SET_COMMON = 1 << 0, /* state, config, images, log-level */
        SET_SERVE = 1 << 1,  /* everything the daemon uses */
        SET_URL = 1 << 2,    /* url, listen (token needs them to name iss) */
};

/* Every setting at its default; -errno when a default is out of its own
 * bounds (a bug the unit test catches). */
int settings_defaults(struct settings *s);
void settings_free(struct settings *s);

/* Each setting's bounds and values are in its table entry (settings.c); a
 * value outside them is an error that names the setting, never clamped. */

/* Parse argv (from index 0 = first option after the subcommand) into s,
 * accepting only options of `groups`; positional arguments are returned
 * in *ret_args (malloc'd array, NULL-terminated, pointing into argv).
 * Reads the config file (--config or <state>/sandboxd.conf if present)
 * and SANDBOXD_STATE. Options not in the table are left for `extra`:
 * extra(name, value, ctx) returns 1 when it took the option, 0 if unknown,
 * <0 on a bad value. Prints an error and returns -EINVAL on bad input. */
typedef int (*settings_extra_fn)(const char *name, const char *value, void *ctx);
int settings_parse(struct settings *s, unsigned groups, int argc, char **argv,
                   settings_extra_fn extra, const char *const *extra_flags, void *ctx,
                   char ***ret_args);

/* "512M", "32GiB", "100": bytes; -EINVAL or -ERANGE. */
int settings_parse_size(const char *s, int64_t *ret);

/* Print the options of `groups` with defaults and help to stdout. */
void settings_usage(unsigned groups);
