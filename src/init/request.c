/* SPDX-License-Identifier: MIT */
/* See request.h. */
#include "request.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "init.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

void req_free(struct req *rq)
{
        for (size_t i = 0; i < rq->argc; i++)
                free(rq->argv[i]);
        free(rq->argv);
        for (size_t i = 0; i < rq->envc; i++)
                free(rq->env[i]);
        free(rq->env);
        free(rq->cwd);
        free(rq->user);
        free(rq->proc_id);
        free(rq->hostname);
}

int req_invalid(struct req *rq, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rq->msg, sizeof(rq->msg), fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* A string field: -EPROTO never (a NUL inside is a bad value, not a bad
 * frame), -EINVAL with a message, -ENOMEM. */
static int req_str(struct req *rq, const struct agent_field *f, const char *what, char **ret)
{
        int r = agent_field_str(f, ret);
        if (r == -EPROTO)
                return req_invalid(rq, "%s contains a NUL byte", what);
        return r;
}

static int req_push(struct req *rq, const struct agent_field *f, char ***list, size_t *n,
                    size_t max, const char *what)
{
        if (*n >= max)
                return req_invalid(rq, "too many %s entries (at most %zu)", what, max);
        if (*n == 0 || (*n >= 8 && (*n & (*n - 1)) == 0)) { /* 8, 16, 32, ... */
                size_t ncap = *n ? *n * 2 : 8;
                char **nl = realloc(*list, (ncap + 1) * sizeof(char *));
                if (!nl)
                        return -ENOMEM;
                *list = nl;
        }
        char *s;
        int r = req_str(rq, f, what, &s);
        if (r < 0)
                return r;
        (*list)[(*n)++] = s;
        (*list)[*n] = NULL;
        return 0;
}

static int req_field(struct req *rq, const struct agent_field *f)
{
        switch (f->tag) {
        case AGENT_T_ARGV:
                rq->argv_bytes += f->len + 1;
                if (rq->argv_bytes > INIT_ARGV_MAX_BYTES)
                        return req_invalid(rq, "command is longer than %u bytes",
                                           INIT_ARGV_MAX_BYTES);
                return req_push(rq, f, &rq->argv, &rq->argc, AGENT_MAX_ARGV, "argv");
        case AGENT_T_ENV:
                return req_push(rq, f, &rq->env, &rq->envc, AGENT_MAX_ENV, "env");
        case AGENT_T_CWD:
                free(rq->cwd);
                rq->cwd = NULL;
                return req_str(rq, f, "cwd", &rq->cwd);
        case AGENT_T_USER:
                free(rq->user);
                rq->user = NULL;
                return req_str(rq, f, "user", &rq->user);
        case AGENT_T_PROC_ID:
                free(rq->proc_id);
                rq->proc_id = NULL;
                return req_str(rq, f, "process id", &rq->proc_id);
        case AGENT_T_TIMEOUT_MS:
                return agent_field_u64(f, &rq->timeout_ms);
        case AGENT_T_MAX_OUTPUT:
                return agent_field_u64(f, &rq->max_output);
        case AGENT_T_STDIN:
                return agent_field_bool(f, &rq->stdin_pipe);
        case AGENT_T_LOSSLESS:
                return agent_field_bool(f, &rq->lossless);
        case AGENT_T_PTY_COLS:
                return agent_field_u64(f, &rq->pty_cols);
        case AGENT_T_PTY_ROWS:
                return agent_field_u64(f, &rq->pty_rows);
        case AGENT_T_STDOUT_FROM:
                return agent_field_u64(f, &rq->from[0]);
        case AGENT_T_STDERR_FROM:
                return agent_field_u64(f, &rq->from[1]);
        case AGENT_T_WAIT_MS:
                return agent_field_u64(f, &rq->wait_ms);
        case AGENT_T_SIGNAL:
                rq->has_signal = true;
                return agent_field_u64(f, &rq->signal);
        case AGENT_T_DATA:
                rq->data = f->data;
                rq->data_len = f->len;
                return 0;
        case AGENT_T_CLOSE:
                return agent_field_bool(f, &rq->close);
        case AGENT_T_HOSTNAME:
                free(rq->hostname);
                rq->hostname = NULL;
                return req_str(rq, f, "hostname", &rq->hostname);
        case AGENT_T_PORT:
                return agent_field_u64(f, &rq->port);
        case AGENT_T_V6:
                return agent_field_bool(f, &rq->v6);
        default:
                return 0; /* unknown tags are skipped */
        }
}

/* 0, -EPROTO (malformed: close the connection), -EINVAL (rq->msg), -ENOMEM. */
static int req_field_fn(void *ctx, const struct agent_field *f)
{
        int r = req_field(ctx, f);
        return r > 0 ? 0 : r;
}

int req_parse(const uint8_t *payload, uint32_t len, struct req *rq)
{
        return agent_walk(payload, len, req_field_fn, rq);
}

static bool env_same_key(const char *a, const char *b)
{
        const char *ea = strchr(a, '=');
        const char *eb = strchr(b, '=');
        return ea && eb && ea - a == eb - b && memcmp(a, b, (size_t)(ea - a)) == 0;
}

/* Defaults overridden by the request's "K=V" entries. */
int req_env(struct req *rq, char ***ret)
{
        char host[HOST_NAME_MAX + 1] = "";
        char hostvar[sizeof(host) + 16];
        char homevar[PATH_MAX + 8];
        snprintf(homevar, sizeof(homevar), "HOME=%s", rq->home ? rq->home : "/root");
        const char *defaults[] = {"PATH=" DEFAULT_PATH, homevar, "LANG=C.UTF-8", hostvar,
                                  "TERM=xterm-256color"};
        size_t ndef =
            rq->pty_cols || rq->pty_rows ? ARRAY_SIZE(defaults) : ARRAY_SIZE(defaults) - 1;
        size_t n = 0;

        if (gethostname(host, sizeof(host)) < 0)
                host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        snprintf(hostvar, sizeof(hostvar), "HOSTNAME=%s", host);

        /* Borrowed strings: the request owns the overrides. */
        const char **env = calloc(ARRAY_SIZE(defaults) + rq->envc + 1, sizeof(char *));
        if (!env)
                return -ENOMEM;
        for (size_t i = 0; i < ndef; i++)
                env[n++] = defaults[i];
        for (size_t i = 0; i < rq->envc; i++) {
                const char *e = rq->env[i];
                const char *eq = strchr(e, '=');
                if (!eq || eq == e) {
                        free(env);
                        return req_invalid(rq, "env entry %zu is not KEY=VALUE", i);
                }
                size_t j = 0;
                while (j < n && !env_same_key(env[j], e))
                        j++;
                env[j] = e;
                if (j == n)
                        n++;
        }
        /* hostvar lives on this stack frame: copy everything out. */
        char **out = calloc(n + 1, sizeof(char *));
        if (!out) {
                free(env);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                out[i] = strdup(env[i]);
                if (!out[i]) {
                        for (size_t k = 0; k < i; k++)
                                free(out[k]);
                        free(out);
                        free(env);
                        return -ENOMEM;
                }
        }
        free(env);
        *ret = out;
        return 0;
}

void req_env_free(char **env)
{
        if (!env)
                return;
        for (size_t i = 0; env[i]; i++)
                free(env[i]);
        free(env);
}

int req_cwd(struct req *rq, char **ret)
{
        const char *cwd = rq->cwd && rq->cwd[0] ? rq->cwd : INIT_CWD_DEFAULT;
        char *out;

        if (strlen(cwd) >= PATH_MAX - sizeof(INIT_CWD_DEFAULT))
                return req_invalid(rq, "cwd is too long");
        if (cwd[0] == '/')
                out = strdup(cwd);
        else if (asprintf(&out, "%s/%s", INIT_CWD_DEFAULT, cwd) < 0)
                out = NULL;
        if (!out)
                return -ENOMEM;
        *ret = out;
        return 0;
}

/* ---- users ---- */

#define USER_SPEC_MAX 256
#define DB_LINE_MAX 4096
#define DB_FIELDS 7

static bool all_digits(const char *s)
{
        if (!*s || strlen(s) > 10)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* Split a passwd/group line at ':' into f[0..DB_FIELDS), NULL past its end. */
static void db_split(char *line, char **f)
{
        size_t k = 0;
        char *p = line;
        while (k < DB_FIELDS) {
                f[k++] = p;
                char *c = strchr(p, ':');
                if (!c)
                        break;
                *c = '\0';
                p = c + 1;
        }
        while (k < DB_FIELDS)
                f[k++] = NULL;
}

/* The line of an /etc/passwd-style file whose name (field 0) or, when
 * by_id, id (field 2) is key, split into f. */
static bool db_find(const char *path, const char *key, bool by_id, char *line, size_t line_len,
                    char **f)
{
        FILE *fp = fopen(path, "re");
        bool found = false;
        if (!fp)
                return false;
        while (!found && fgets(line, (int)line_len, fp)) {
                line[strcspn(line, "\n")] = '\0';
                db_split(line, f);
                const char *v = by_id ? f[2] : f[0];
                found = v && !strcmp(v, key);
        }
        fclose(fp);
        return found;
}

static int parse_id(const char *s, uint32_t *ret)
{
        if (!s || !all_digits(s))
                return -EINVAL;
        unsigned long v = strtoul(s, NULL, 10);
        if (v > 0xfffffffeul)
                return -EINVAL;
        *ret = (uint32_t)v;
        return 0;
}

static int req_group(struct req *rq, const char *etc, const char *group, uint32_t *ret_gid)
{
        char path[PATH_MAX], line[DB_LINE_MAX];
        char *f[DB_FIELDS];
        snprintf(path, sizeof(path), "%s/group", etc);
        bool known = db_find(path, group, all_digits(group), line, sizeof(line), f);
        if (!known && !all_digits(group))
                return req_invalid(rq, "user: no group '%.64s' in /etc/group", group);
        if (parse_id(known ? f[2] : group, ret_gid) < 0)
                return req_invalid(rq, "user: a bad group id for '%.64s'", group);
        return 0;
}

int req_user(struct req *rq, const char *etc, uint32_t *ret_uid, uint32_t *ret_gid,
             const char **ret_home)
{
        static char home[PATH_MAX];
        char spec[USER_SPEC_MAX + 1], path[PATH_MAX], line[DB_LINE_MAX];
        char *f[DB_FIELDS];
        const char *u = rq->user;
        if (!u || !*u || strlen(u) > USER_SPEC_MAX)
                return req_invalid(rq, "user: 1 to %d bytes", USER_SPEC_MAX);
        snprintf(spec, sizeof(spec), "%s", u);
        char *group = strchr(spec, ':');
        if (group)
                *group++ = '\0';
        snprintf(path, sizeof(path), "%s/passwd", etc);
        bool known = db_find(path, spec, all_digits(spec), line, sizeof(line), f);
        if (!known && !all_digits(spec))
                return req_invalid(rq, "user: no user '%.64s' in /etc/passwd", spec);
        /* A bare uid that /etc/passwd does not know runs with gid = uid... of
         * nothing: gid 0 would be root's group, so it is the uid's number. */
        if (parse_id(known ? f[2] : spec, ret_uid) < 0 ||
            parse_id(known ? f[3] : spec, ret_gid) < 0)
                return req_invalid(rq, "user: a bad id for '%.64s'", u);
        snprintf(home, sizeof(home), "%s", known && f[5] && f[5][0] == '/' ? f[5] : "/");
        *ret_home = home;
        return group && *group ? req_group(rq, etc, group, ret_gid) : 0;
}
