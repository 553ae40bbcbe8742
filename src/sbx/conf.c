/* SPDX-License-Identifier: MIT */
#include "conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

void sbx_config_free(struct sbx_config *cfg)
{
        free(cfg->server);
        free(cfg->token);
        cfg->server = cfg->token = NULL;
}

static const char *trim(char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        size_t n = strlen(s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
                s[--n] = 0;
        return s;
}

static int set_key(struct sbx_config *cfg, const char *key, const char *value, char *why,
                   size_t why_len)
{
        char **slot = !strcmp(key, "server")  ? &cfg->server
                      : !strcmp(key, "token") ? &cfg->token
                                              : NULL;
        if (!slot) {
                snprintf(why, why_len, "unknown key '%.64s' (server, token)", key);
                return -EINVAL;
        }
        if (!*value) {
                snprintf(why, why_len, "'%s' has no value", key);
                return -EINVAL;
        }
        char *v = strdup(value);
        if (!v)
                return -ENOMEM;
        free(*slot);
        *slot = v;
        return 0;
}

int sbx_config_parse(const char *text, size_t len, struct sbx_config *cfg, int *ret_line, char *why,
                     size_t why_len)
{
        if (memchr(text, 0, len)) {
                *ret_line = 0;
                snprintf(why, why_len, "a NUL byte");
                return -EINVAL;
        }
        _cleanup_free_ char *copy = strndup(text, len);
        if (!copy)
                return -ENOMEM;
        char *rest = copy, *line;
        int no = 0;
        while ((line = strsep(&rest, "\n"))) {
                no++;
                char *eq = strchr(line, '=');
                const char *t = trim(line);
                if (!*t || *t == '#')
                        continue;
                if (!eq) {
                        *ret_line = no;
                        snprintf(why, why_len, "not `key = value`");
                        return -EINVAL;
                }
                *eq = 0;
                int r = set_key(cfg, trim(line), trim(eq + 1), why, why_len);
                if (r < 0) {
                        *ret_line = no;
                        return r;
                }
        }
        return 0;
}

int sbx_config_path(char *out, size_t len)
{
        const char *xdg = getenv("XDG_CONFIG_HOME");
        if (xdg && *xdg == '/')
                return path_printf(out, len, "%s/sandboxd/config", xdg);
        const char *home = getenv("HOME");
        if (home && *home)
                return path_printf(out, len, "%s/.config/sandboxd/config", home);
        return -ENOENT;
}
