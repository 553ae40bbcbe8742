/* SPDX-License-Identifier: MIT */
/* The recipe parser (recipe.h). A recipe is read as logical lines: a line
 * ending in a backslash goes on on the next (the backslash and the line
 * break removed, as a Dockerfile does); blank lines and lines that
 * start with '#' are skipped (inside a continuation too, as a Dockerfile
 * does). The first word of a logical line is its instruction, in any
 * case. */
#include "recipe.h"

#include <ctype.h>
#include <jansson.h>
#include <stdarg.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/names.h"

#define RECIPE_MAX_LINE (64u << 10)

struct parser {
        struct recipe *r;
        struct sbx_error *err;
        unsigned line;
        char cwd[4096]; /* the WORKDIR so far, for relative ones */
};

static const char *const refused[] = {
    "ADD",   "CMD",     "ENTRYPOINT", "USER",        "EXPOSE", "VOLUME",     "ARG",
    "LABEL", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",  "MAINTAINER", NULL,
};

const char *recipe_op_name(enum recipe_op op)
{
        switch (op) {
        case RECIPE_RUN:
                return "RUN";
        case RECIPE_COPY:
                return "COPY";
        case RECIPE_ENV:
                return "ENV";
        case RECIPE_WORKDIR:
                return "WORKDIR";
        }
        return "?";
}

__attribute__((format(printf, 3, 4))) static int fail(struct parser *p, int errnum, const char *fmt,
                                                      ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return sbx_error_say(p->err, errnum, "recipe line %u: %s", p->line, msg);
}

static void free_args(char **args, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(args[i]);
        free(args);
}

void recipe_free(struct recipe *r)
{
        for (size_t i = 0; i < r->n_steps; i++) {
                free_args(r->steps[i].args, r->steps[i].n_args);
                free(r->steps[i].text);
        }
        free(r->steps);
        free(r->from);
        free(r->suite);
        free(r->packages);
        memset(r, 0, sizeof(*r));
}

int recipe_abs_path(const char *cwd, const char *path, char *out, size_t len)
{
        char joined[8192];
        if (snprintf(joined, sizeof(joined), "%s/%s", path[0] == '/' ? "" : (cwd ? cwd : ""),
                     path) >= (int)sizeof(joined))
                return -ENAMETOOLONG;
        size_t o = 0;
        if (len < 2)
                return -ENAMETOOLONG;
        out[o++] = '/';
        char *save = NULL;
        for (char *c = strtok_r(joined, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                if (!strcmp(c, "."))
                        continue;
                if (!strcmp(c, ".."))
                        return -EINVAL;
                size_t n = strlen(c);
                if (o + n + 2 > len)
                        return -ENAMETOOLONG;
                if (o > 1)
                        out[o++] = '/';
                memcpy(out + o, c, n);
                o += n;
        }
        out[o] = '\0';
        return 0;
}

/* ---- words ---- */

/* A JSON array of strings ("exec form"): 1 and *ret when rest is one, 0
 * when rest does not start with '[', < 0 for a bad one. */
static int json_words(struct parser *p, const char *rest, char ***ret, size_t *ret_n)
{
        if (rest[0] != '[')
                return 0;
        json_error_t je;
        json_t *a = json_loads(rest, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > RECIPE_MAX_ARGS) {
                json_decref(a);
                return fail(p, EINVAL, "%s", "expected a JSON array of 1 to 256 strings");
        }
        size_t n = json_array_size(a);
        char **v = calloc(n, sizeof(*v));
        int r = v ? 1 : -ENOMEM;
        for (size_t i = 0; r > 0 && i < n; i++) {
                const char *s = json_string_value(json_array_get(a, i));
                if (!s || strlen(s) != json_string_length(json_array_get(a, i)))
                        r = fail(p, EINVAL, "%s", "expected a JSON array of strings (no NUL)");
                else if (!(v[i] = strdup(s)))
                        r = -ENOMEM;
        }
        json_decref(a);
        if (r < 0) {
                free_args(v, v ? n : 0);
                return r == -ENOMEM ? sbx_error_set(p->err, ENOMEM, "recipe") : r;
        }
        *ret = v;
        *ret_n = n;
        return 1;
}

static const char *skip_space(const char *s)
{
        while (*s && isspace((unsigned char)*s))
                s++;
        return s;
}

/* Whitespace-separated words of rest. */
static int plain_words(struct parser *p, const char *rest, char ***ret, size_t *ret_n)
{
        char **v = calloc(RECIPE_MAX_ARGS, sizeof(*v));
        size_t n = 0;
        if (!v)
                return sbx_error_set(p->err, ENOMEM, "recipe");
        for (const char *s = skip_space(rest); *s; s = skip_space(s)) {
                const char *e = s;
                while (*e && !isspace((unsigned char)*e))
                        e++;
                if (n == RECIPE_MAX_ARGS) {
                        free_args(v, n);
                        return fail(p, E2BIG, "%s", "more than 256 words");
                }
                if (!(v[n++] = strndup(s, (size_t)(e - s)))) {
                        free_args(v, n);
                        return sbx_error_set(p->err, ENOMEM, "recipe");
                }
                s = e;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- instructions ---- */

static int add_step(struct parser *p, enum recipe_op op, const char *text, char **args,
                    size_t n_args, bool exec_form)
{
        struct recipe *r = p->r;
        if (r->n_steps == RECIPE_MAX_STEPS) {
                free_args(args, n_args);
                return fail(p, E2BIG, "%s", "more than 256 steps");
        }
        if (!r->steps && !(r->steps = calloc(RECIPE_MAX_STEPS, sizeof(*r->steps)))) {
                free_args(args, n_args);
                return sbx_error_set(p->err, ENOMEM, "recipe");
        }
        char *t = strdup(text);
        if (!t) {
                free_args(args, n_args);
                return sbx_error_set(p->err, ENOMEM, "recipe");
        }
        r->steps[r->n_steps++] = (struct recipe_step){.op = op,
                                                      .line = p->line,
                                                      .args = args,
                                                      .n_args = n_args,
                                                      .exec_form = exec_form,
                                                      .text = t};
        return 0;
}

static bool pkg_list_ok(const char *s)
{
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr(",.+-:~", *s))
                        return false;
        return true;
}

static int do_from(struct parser *p, const char *rest)
{
        char **w = NULL;
        size_t n = 0;
        int r = plain_words(p, rest, &w, &n);
        if (r < 0)
                return r;
        if (n >= 2 && !strcasecmp(w[n - 2], "AS"))
                r = fail(p, EINVAL, "%s", "FROM ... AS (more than one stage) is not supported");
        else if (n == 1 && !strcmp(w[0], "@busybox"))
                p->r->base = RECIPE_BASE_BUSYBOX;
        else if ((n == 2 || n == 3) && !strcmp(w[0], "@mmdebstrap")) {
                p->r->base = RECIPE_BASE_MMDEBSTRAP;
                if (!pkg_list_ok(w[1]) || w[1][0] == '-' || (n == 3 && !pkg_list_ok(w[2])))
                        r = fail(p, EINVAL, "%s", "@mmdebstrap SUITE [PACKAGE,...]: bad word");
                else {
                        p->r->suite = strdup(w[1]);
                        p->r->packages = n == 3 ? strdup(w[2]) : NULL;
                }
        } else if (n == 1 && w[0][0] == '@')
                r = fail(p, EINVAL, "unknown built-in base '%.64s' (@busybox, @mmdebstrap)", w[0]);
        else if (n == 1 && image_name_is_valid(w[0]))
                p->r->base = RECIPE_BASE_IMAGE;
        else
                r = fail(p, EINVAL, "%s",
                         "FROM takes one image name (or @busybox, or @mmdebstrap SUITE "
                         "[PACKAGE,...])");
        if (r == 0 && !(p->r->from = strdup(w[0])))
                r = sbx_error_set(p->err, ENOMEM, "recipe");
        free_args(w, n);
        return r;
}

static int do_run(struct parser *p, const char *text, const char *rest)
{
        char **w = NULL;
        size_t n = 0;
        int r = json_words(p, rest, &w, &n);
        if (r < 0)
                return r;
        if (r == 1)
                return add_step(p, RECIPE_RUN, text, w, n, true);
        if (!*rest)
                return fail(p, EINVAL, "%s", "RUN needs a command");
        if (!(w = calloc(1, sizeof(*w))) || !(w[0] = strdup(rest))) {
                free(w);
                return sbx_error_set(p->err, ENOMEM, "recipe");
        }
        return add_step(p, RECIPE_RUN, text, w, 1, false);
}

static int do_copy(struct parser *p, const char *text, const char *rest)
{
        char **w = NULL;
        size_t n = 0;
        int r = json_words(p, rest, &w, &n);
        if (r == 0)
                r = plain_words(p, rest, &w, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (!strncmp(w[i], "--", 2)) {
                        r = fail(p, EINVAL, "COPY %.64s is not supported", w[i]);
                        free_args(w, n);
                        return r;
                }
        if (n < 2) {
                free_args(w, n);
                return fail(p, EINVAL, "%s", "COPY SOURCE... DESTINATION");
        }
        char dst[4096];
        r = recipe_abs_path(p->cwd, w[n - 1], dst, sizeof(dst));
        /* "dir/": keep "a directory" */
        bool slash =
            strlen(w[n - 1]) > 1 && w[n - 1][strlen(w[n - 1]) - 1] == '/' && strcmp(dst, "/");
        char *abs = NULL;
        if (r == 0 && asprintf(&abs, "%s%s", dst, slash ? "/" : "") < 0)
                abs = NULL;
        if (!abs) {
                free_args(w, n);
                return r < 0 ? fail(p, -r, "%s", "COPY: a bad destination") : -ENOMEM;
        }
        free(w[n - 1]);
        w[n - 1] = abs;
        return add_step(p, RECIPE_COPY, text, w, n, false);
}

static bool env_key_ok(const char *k, size_t n)
{
        if (n == 0 || n > 255 || !(isalpha((unsigned char)k[0]) || k[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!isalnum((unsigned char)k[i]) && k[i] != '_')
                        return false;
        return true;
}

/* A quoted part of a value, *c at its opening quote q ("..." with \" and
 * \\ escapes, '...' as is), appended to out; *c moves past its end. */
static int env_quoted(struct parser *p, const char **c, char *out, size_t len, size_t *o)
{
        char q = **c;
        const char *s = *c + 1;
        for (; *s && *s != q; s++) {
                if (q == '"' && *s == '\\' && (s[1] == '"' || s[1] == '\\'))
                        s++;
                if (*o + 1 >= len)
                        return fail(p, E2BIG, "%s", "ENV: value too long");
                out[(*o)++] = *s;
        }
        if (*s != q)
                return fail(p, EINVAL, "%s", "ENV: an unterminated quote");
        *c = s + 1;
        return 0;
}

/* One value of K=V: plain up to whitespace (a backslash escapes the next
 * byte), with quoted parts. *s moves past it. */
static int env_value(struct parser *p, const char **s, char *out, size_t len)
{
        size_t o = 0;
        const char *c = *s;
        while (*c && !isspace((unsigned char)*c)) {
                if (*c == '"' || *c == '\'') {
                        int r = env_quoted(p, &c, out, len, &o);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (*c == '\\' && c[1])
                        c++;
                if (o + 1 >= len)
                        return fail(p, E2BIG, "%s", "ENV: value too long");
                out[o++] = *c++;
        }
        out[o] = '\0';
        *s = c;
        return 0;
}

static int env_pairs(struct parser *p, const char *rest, char **v, size_t *n)
{
        _cleanup_free_ char *val = malloc(RECIPE_MAX_LINE);
        if (!val)
                return sbx_error_set(p->err, ENOMEM, "recipe");
        for (const char *s = skip_space(rest); *s; s = skip_space(s)) {
                const char *eq = s;
                while (*eq && *eq != '=' && !isspace((unsigned char)*eq))
                        eq++;
                if (*eq != '=' || !env_key_ok(s, (size_t)(eq - s)))
                        return fail(p, EINVAL, "%s", "ENV KEY=VALUE ...: a bad key");
                const char *vs = eq + 1;
                int r = env_value(p, &vs, val, RECIPE_MAX_LINE);
                if (r < 0)
                        return r;
                if (*n == RECIPE_MAX_ARGS)
                        return fail(p, E2BIG, "%s", "more than 256 variables");
                if (asprintf(&v[(*n)++], "%.*s=%s", (int)(eq - s), s, val) < 0) {
                        v[--(*n)] = NULL;
                        return sbx_error_set(p->err, ENOMEM, "recipe");
                }
                s = vs;
        }
        return 0;
}

static int do_env(struct parser *p, const char *text, const char *rest)
{
        char **v = calloc(RECIPE_MAX_ARGS, sizeof(*v));
        size_t n = 0;
        if (!v)
                return sbx_error_set(p->err, ENOMEM, "recipe");
        const char *sp = rest;
        while (*sp && !isspace((unsigned char)*sp) && *sp != '=')
                sp++;
        int r = 0;
        if (*sp != '=' && *sp) {
                /* ENV KEY the rest of the line */
                const char *val = sp;
                while (isspace((unsigned char)*val))
                        val++;
                if (!env_key_ok(rest, (size_t)(sp - rest)))
                        r = fail(p, EINVAL, "%s", "ENV KEY VALUE: a bad key");
                else if (asprintf(&v[0], "%.*s=%s", (int)(sp - rest), rest, val) < 0)
                        r = sbx_error_set(p->err, ENOMEM, "recipe");
                else
                        n = 1;
        } else {
                r = env_pairs(p, rest, v, &n);
        }
        if (r == 0 && n == 0)
                r = fail(p, EINVAL, "%s", "ENV needs KEY=VALUE");
        if (r < 0) {
                free_args(v, n);
                return r;
        }
        return add_step(p, RECIPE_ENV, text, v, n, false);
}

static int do_workdir(struct parser *p, const char *text, const char *rest)
{
        char **w = NULL;
        size_t n = 0;
        int r = plain_words(p, rest, &w, &n);
        if (r < 0)
                return r;
        char abs[4096];
        if (n != 1 || (r = recipe_abs_path(p->cwd, w[0], abs, sizeof(abs))) < 0) {
                free_args(w, n);
                return fail(p, EINVAL, "%s", "WORKDIR takes one path (no '..')");
        }
        snprintf(p->cwd, sizeof(p->cwd), "%s", abs);
        free(w[0]);
        if (!(w[0] = strdup(abs))) {
                free(w);
                return sbx_error_set(p->err, ENOMEM, "recipe");
        }
        return add_step(p, RECIPE_WORKDIR, text, w, 1, false);
}

static int instruction(struct parser *p, char *text)
{
        char *rest = text;
        while (*rest && !isspace((unsigned char)*rest))
                rest++;
        size_t kl = (size_t)(rest - text);
        while (*rest && isspace((unsigned char)*rest))
                rest++;
        char *e = rest + strlen(rest);
        while (e > rest && isspace((unsigned char)e[-1]))
                *--e = '\0';
        char kw[16] = "";
        if (kl < sizeof(kw))
                for (size_t i = 0; i < kl; i++)
                        kw[i] = (char)toupper((unsigned char)text[i]);
        bool is_from = !strcmp(kw, "FROM");
        if (!p->r->from && !is_from && kw[0])
                for (size_t i = 0; refused[i]; i++)
                        if (!strcmp(kw, refused[i]))
                                goto refuse;
        if (!p->r->from && !is_from)
                return fail(p, EINVAL, "%s", "a recipe starts with FROM");
        if (is_from)
                return p->r->from ? fail(p, EINVAL, "%s", "a second FROM (one stage only)")
                                  : do_from(p, rest);
        if (!strcmp(kw, "RUN"))
                return do_run(p, text, rest);
        if (!strcmp(kw, "COPY"))
                return do_copy(p, text, rest);
        if (!strcmp(kw, "ENV"))
                return do_env(p, text, rest);
        if (!strcmp(kw, "WORKDIR"))
                return do_workdir(p, text, rest);
        for (size_t i = 0; refused[i]; i++)
                if (!strcmp(kw, refused[i]))
                        goto refuse;
        text[MIN(kl, (size_t)64)] = '\0';
        return fail(p, EINVAL, "unknown instruction '%s'", text);
refuse:
        return fail(p, ENOTSUP,
                    "%s is not supported: a recipe has FROM, RUN, COPY, ENV and WORKDIR only", kw);
}

/* The next logical line from text[*pos..len) into buf (continuations
 * joined, comments inside them dropped); 0 at the end. */
static int next_line(struct parser *p, const char *text, size_t len, size_t *pos, char *buf,
                     unsigned *start, size_t *ret_n)
{
        size_t n = 0;
        *start = 0;
        while (*pos < len) {
                const char *s = text + *pos;
                const char *nl = memchr(s, '\n', len - *pos);
                size_t l = nl ? (size_t)(nl - s) : len - *pos;
                *pos += l + (nl ? 1 : 0);
                p->line++;
                if (memchr(s, '\0', l))
                        return fail(p, EINVAL, "%s", "a NUL byte");
                while (l && (s[l - 1] == '\r'))
                        l--;
                size_t lead = 0;
                while (lead < l && isspace((unsigned char)s[lead]))
                        lead++;
                if (lead == l || s[lead] == '#')
                        continue; /* blank or a comment, inside a continuation too */
                if (!*start)
                        *start = p->line;
                bool more = s[l - 1] == '\\';
                if (more)
                        l--;
                if (n + l + 2 > RECIPE_MAX_LINE)
                        return fail(p, E2BIG, "%s", "an instruction longer than 64 KiB");
                memcpy(buf + n, s, l);
                n += l;
                if (!more)
                        break;
        }
        buf[n] = '\0';
        *ret_n = n;
        return *start ? 1 : 0;
}

int recipe_parse(const char *text, size_t len, struct recipe *ret, struct sbx_error *err)
{
        memset(ret, 0, sizeof(*ret));
        if (len > RECIPE_MAX_BYTES)
                return sbx_error_say(err, E2BIG, "the recipe is over 1 MiB");
        struct parser p = {.r = ret, .err = err, .cwd = "/"};
        _cleanup_free_ char *buf = malloc(RECIPE_MAX_LINE);
        if (!buf)
                return sbx_error_set(err, ENOMEM, "recipe");
        size_t pos = 0, n = 0;
        int r;
        unsigned start;
        while ((r = next_line(&p, text, len, &pos, buf, &start, &n)) > 0) {
                unsigned end = p.line;
                p.line = start;
                r = instruction(&p, buf);
                p.line = end;
                if (r < 0)
                        break;
        }
        if (r == 0 && !ret->from)
                r = sbx_error_say(err, EINVAL, "the recipe has no FROM");
        if (r < 0)
                recipe_free(ret);
        return r < 0 ? r : 0;
}

/* ---- the images sandboxd ships ---- */

static const char recipe_tiny[] = "# tiny: busybox, and nothing else.\n"
                                  "FROM @busybox\n"
                                  "WORKDIR /workspace\n";

static const char recipe_debian[] = "# debian: Debian 12 with what agents reach for.\n"
                                    "FROM @mmdebstrap bookworm "
                                    "python3,nodejs,npm,git,curl,ca-certificates,procps,vim-tiny\n"
                                    "WORKDIR /workspace\n";

const char *recipe_builtin(const char *name)
{
        if (!name)
                return NULL;
        if (!strcmp(name, "tiny"))
                return recipe_tiny;
        if (!strcmp(name, "debian"))
                return recipe_debian;
        return NULL;
}

int recipe_text_id(const char *text, size_t len, char out[72])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        if (!EVP_Digest(text, len, md, &n, EVP_sha256(), NULL) || n != 32)
                return -EIO;
        static const char hex[] = "0123456789abcdef";
        memcpy(out, "sha256:", 7);
        for (unsigned i = 0; i < 32; i++) {
                out[7 + 2 * i] = hex[md[i] >> 4];
                out[8 + 2 * i] = hex[md[i] & 15];
        }
        out[71] = '\0';
        return 0;
}
