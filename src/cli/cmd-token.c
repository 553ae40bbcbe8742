/* SPDX-License-Identifier: MIT */
/* sandboxd token: mint an identity token with the server's signing key. */
#include <stdio.h>
#include <string.h>

#include "../api/jwt.h"
#include "../api/keys.h"
#include "../common/names.h"
#include "cli.h"
#include "settings.h"

struct token_opts {
        const char *deployment, *account;
        int64_t ttl_ms;
};

static int token_extra(const char *name, const char *value, void *ctx)
{
        struct token_opts *o = ctx;
        if (!strcmp(name, "deployment"))
                o->deployment = value;
        else if (!strcmp(name, "account"))
                o->account = value;
        else if (!strcmp(name, "ttl")) {
                if (parse_duration_ms(value, &o->ttl_ms) < 0 || o->ttl_ms <= 0) {
                        fprintf(stderr, "sandboxd token: bad --ttl '%s'\n", value);
                        return -1;
                }
        } else
                return 0;
        return 1;
}

int cmd_token(int argc, char **argv)
{
        for (int i = 0; i < argc; i++)
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        printf("usage: sandboxd token --deployment D --account A [--ttl 24h] "
                               "[OPTIONS]\n\nPrints an identity token (JWT) whose iss is --url.\n\n"
                               "  --deployment D             deployment id (the token's sub)\n"
                               "  --account A                account id (the token's acct)\n"
                               "  --ttl DURATION             lifetime, e.g. 30m, 24h [24h]\n");
                        settings_usage(SET_URL);
                        return 0;
                }
        static const char *const extra[] = {"deployment", "account", "ttl", NULL};
        struct token_opts o = {.ttl_ms = 24 * 3600 * 1000LL};
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        if (settings_parse(&s, SET_URL, argc, argv, token_extra, extra, &o, &args) < 0)
                return 2;
        free(args);
        if (!o.deployment || !o.account) {
                fprintf(stderr, "sandboxd token: --deployment and --account are required\n");
                return 2;
        }
        if (!name_is_valid(o.deployment) || !name_is_valid(o.account)) {
                fprintf(stderr,
                        "sandboxd token: ids must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$\n");
                return 2;
        }
        struct sbx_error err = {0};
        struct keyring *kr = NULL;
        if (!s.local_issuer) {
                /* The server would refuse whatever we signed. */
                fprintf(stderr, "sandboxd token: local_issuer is off: identity tokens come from "
                                "the external issuer\n");
                return 1;
        }
        if (mkdir_p(s.state, 0700) < 0 || keys_load(s.state, NULL, &kr, &err) < 0) {
                fprintf(stderr, "sandboxd token: %s\n",
                        err.msg[0] ? err.msg : "cannot create state dir");
                return 1;
        }
        struct jwt_claims c = {0};
        snprintf(c.iss, sizeof(c.iss), "%s", s.issuer ? s.issuer : s.url);
        snprintf(c.sub, sizeof(c.sub), "%s", o.deployment);
        snprintf(c.acct, sizeof(c.acct), "%s", o.account);
        c.iat = now_ms() / 1000;
        c.exp = c.iat + o.ttl_ms / 1000;
        char *tok = NULL;
        int r = jwt_sign(kr, &c, &tok, &err);
        keyring_free(kr);
        settings_free(&s);
        if (r < 0) {
                fprintf(stderr, "sandboxd token: %s\n", err.msg);
                return 1;
        }
        printf("%s\n", tok);
        free(tok);
        return 0;
}
