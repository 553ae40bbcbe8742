/* SPDX-License-Identifier: MIT */
/* sandboxd account enable|disable|list and sandboxd key list|rotate|remove:
 * operator verbs that work on the state dir, with or without a running
 * daemon (accounts are read on every call; keys are reloaded on SIGHUP). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../api/keys.h"
#include "../common/names.h"
#include "../store/store.h"
#include "cli.h"
#include "settings.h"

static int limit_extra(const char *name, const char *value, void *ctx)
{
        if (strcmp(name, "limit"))
                return 0;
        char *end;
        long long v = strtoll(value, &end, 10);
        if (*end || end == value || v < 0) {
                fprintf(stderr, "sandboxd account: bad --limit '%s'\n", value);
                return -1;
        }
        *(int64_t *)ctx = v;
        return 1;
}

int cmd_account(int argc, char **argv)
{
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf("usage: sandboxd account enable ACCOUNT [--limit N]\n"
                               "       sandboxd account disable ACCOUNT\n"
                               "       sandboxd account list\n\n"
                               "  --limit N                  sandboxes across the account's "
                               "deployments (0 = no limit)\n");
                        settings_usage(0);
                        return 0;
                }
        static const char *const extra[] = {"limit", NULL};
        int64_t limit = 0;
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        if (settings_parse(&s, 0, argc, argv, limit_extra, extra, &limit, &args) < 0)
                return 2;
        int ret = 1;
        struct sbx_error err = {0};
        struct store *st = NULL;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/sandboxd.db", s.state);
        if (mkdir_p(s.state, 0700) < 0 || store_open(path, &st, &err) < 0) {
                fprintf(stderr, "sandboxd account: %s\n", err.msg[0] ? err.msg : "no state dir");
                goto out;
        }
        if (args[0] && (!strcmp(args[0], "enable") || !strcmp(args[0], "disable")) && args[1] &&
            !args[2]) {
                if (!name_is_valid(args[1])) {
                        fprintf(stderr, "sandboxd account: bad account id '%s'\n", args[1]);
                        ret = 2;
                        goto out;
                }
                struct store_account a = {.enabled = !strcmp(args[0], "enable"), .limit = limit};
                snprintf(a.account, sizeof(a.account), "%s", args[1]);
                if (store_account_put(st, &a, &err) < 0) {
                        fprintf(stderr, "sandboxd account: %s\n", err.msg);
                        goto out;
                }
                printf("account %s %sd\n", a.account, args[0]);
                ret = 0;
        } else if (args[0] && !strcmp(args[0], "list") && !args[1]) {
                struct store_account *v = NULL;
                size_t n = 0;
                if (store_account_list(st, &v, &n, &err) < 0) {
                        fprintf(stderr, "sandboxd account: %s\n", err.msg);
                        goto out;
                }
                printf("%-32s %-9s %s\n", "ACCOUNT", "ENABLED", "LIMIT");
                for (size_t i = 0; i < n; i++)
                        printf("%-32s %-9s %lld\n", v[i].account, v[i].enabled ? "yes" : "no",
                               (long long)v[i].limit);
                free(v);
                ret = 0;
        } else {
                fprintf(stderr, "usage: sandboxd account enable|disable ACCOUNT | list\n");
                ret = 2;
        }
out:
        store_close(st);
        free(args);
        settings_free(&s);
        return ret;
}

int cmd_key(int argc, char **argv)
{
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf("usage: sandboxd key list | rotate | remove KID\n\n"
                               "rotate makes a new signing key current; tokens of the old keys\n"
                               "stay valid until `key remove`. Send SIGHUP to a running daemon\n"
                               "to pick up the change.\n\n");
                        settings_usage(0);
                        return 0;
                }
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        if (settings_parse(&s, 0, argc, argv, NULL, NULL, NULL, &args) < 0)
                return 2;
        int ret = 1;
        struct sbx_error err = {0};
        if (args[0] && !strcmp(args[0], "list") && !args[1]) {
                struct keys_info *v = NULL;
                size_t n = 0;
                if (keys_list(s.state, &v, &n, &err) < 0) {
                        fprintf(stderr, "sandboxd key: %s\n", err.msg);
                        goto out;
                }
                for (size_t i = 0; i < n; i++) {
                        char ts[32];
                        format_rfc3339(v[i].created_ms, ts);
                        printf("%s %s%s\n", v[i].kid, ts, v[i].current ? " current" : "");
                }
                free(v);
                ret = 0;
        } else if (args[0] && !strcmp(args[0], "rotate") && !args[1]) {
                char kid[KEYS_KID_LEN + 1];
                if (mkdir_p(s.state, 0700) < 0 || keys_rotate(s.state, kid, &err) < 0) {
                        fprintf(stderr, "sandboxd key: %s\n", err.msg);
                        goto out;
                }
                printf("%s\n", kid);
                ret = 0;
        } else if (args[0] && !strcmp(args[0], "remove") && args[1] && !args[2]) {
                if (keys_remove(s.state, args[1], &err) < 0) {
                        fprintf(stderr, "sandboxd key: %s\n", err.msg);
                        goto out;
                }
                ret = 0;
        } else {
                fprintf(stderr, "usage: sandboxd key list | rotate | remove KID\n");
                ret = 2;
        }
out:
        free(args);
        settings_free(&s);
        return ret;
}
