/* SPDX-License-Identifier: MIT */
/* The server's JSON answers to the public structs. Every answer is read as
 * hostile: a missing field or one of the wrong type is an error naming it,
 * never a NULL dereference later. Pure: no I/O, unit-tested. */
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int sbxc_fail(struct sbx_err *err, int errnum, int status, const char *code, const char *fmt, ...)
{
        if (errnum <= 0)
                errnum = EIO;
        if (!err)
                return -errnum;
        err->status = status;
        snprintf(err->code, sizeof(err->code), "%s", code);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        return -errnum;
}

int sbxc_errno_of_status(long status)
{
        static const struct {
                long status;
                int errnum;
        } map[] = {
            {400, EINVAL}, {401, EACCES},    {402, EDQUOT}, {403, EPERM},
            {404, ENOENT}, {408, ETIMEDOUT}, {409, EBUSY},  {413, EFBIG},
            {429, EAGAIN}, {502, EHOSTDOWN}, {503, EAGAIN},
        };
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (map[i].status == status)
                        return map[i].errnum;
        return EIO;
}

int sbxc_parse_object(const char *body, size_t len, json_t **ret, struct sbx_err *err)
{
        json_error_t je;
        // NUL is allowed in strings (an exec's output may hold one); the fields
        // that must not hold one are checked where they are read.
        json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!o)
                return sbxc_bad(err, "answer is not JSON: %s", je.text);
        if (!json_is_object(o)) {
                json_decref(o);
                return sbxc_bad(err, "answer is not a JSON object");
        }
        *ret = o;
        return 0;
}

int sbxc_parse_error(long status, const char *body, size_t len, struct sbx_err *err)
{
        int errnum = sbxc_errno_of_status(status);
        json_t *o = NULL;
        if (sbxc_parse_object(body, len, &o, NULL) < 0)
                return sbxc_fail(err, errnum, (int)status, "unknown",
                                 "HTTP %ld without an error body", status);
        json_t *e = json_object_get(o, "error");
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        if (code && !strcmp(code, "already_exists"))
                errnum = EEXIST;
        int r = sbxc_fail(err, errnum, (int)status, code && *code ? code : "unknown", "%s",
                          msg ? msg : "no message");
        json_decref(o);
        return r;
}

/* ---- fields ---- */

static int opt_str(json_t *o, const char *key, char **out, struct sbx_err *err)
{
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                return sbxc_bad(err, "answer: '%s' is not a string without NUL", key);
        *out = strdup(json_string_value(v));
        return *out ? 0 : sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
}

static int req_str(json_t *o, const char *key, char **out, struct sbx_err *err)
{
        if (!json_is_string(json_object_get(o, key)))
                return sbxc_bad(err, "answer: no string '%s'", key);
        return opt_str(o, key, out, err);
}

/* A string that may hold NUL bytes (exec output), with its length. */
static int req_bytes(json_t *o, const char *key, char **out, size_t *len, struct sbx_err *err)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_string(v))
                return sbxc_bad(err, "answer: no string '%s'", key);
        size_t n = json_string_length(v);
        char *p = malloc(n + 1);
        if (!p)
                return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        memcpy(p, json_string_value(v), n);
        p[n] = 0;
        *out = p;
        *len = n;
        return 0;
}

static int req_int(json_t *o, const char *key, int64_t *out, struct sbx_err *err)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_integer(v))
                return sbxc_bad(err, "answer: no integer '%s'", key);
        *out = json_integer_value(v);
        return 0;
}

static int req_u64(json_t *o, const char *key, uint64_t *out, struct sbx_err *err)
{
        int64_t v = 0;
        int r = req_int(o, key, &v, err);
        if (r < 0)
                return r;
        if (v < 0)
                return sbxc_bad(err, "answer: '%s' is negative", key);
        *out = (uint64_t)v;
        return 0;
}

static int req_bool(json_t *o, const char *key, bool *out, struct sbx_err *err)
{
        json_t *v = json_object_get(o, key);
        if (!json_is_boolean(v))
                return sbxc_bad(err, "answer: no boolean '%s'", key);
        *out = json_is_true(v);
        return 0;
}

static bool opt_true(json_t *o, const char *key)
{
        return json_is_true(json_object_get(o, key));
}

static json_t *req_array(json_t *o, const char *key, struct sbx_err *err)
{
        json_t *a = json_object_get(o, key);
        if (!json_is_array(a))
                sbxc_bad(err, "answer: no array '%s'", key);
        return json_is_array(a) ? a : NULL;
}

/* ---- structs ---- */

void sbx_sandbox_clear(struct sbx_sandbox *s)
{
        if (!s)
                return;
        char **f[] = {&s->name,     &s->sandbox_class, &s->state,          &s->network,
                      &s->image,    &s->created_at,    &s->last_active_at, &s->ceiling_at,
                      &s->endpoint, &s->expires_at};
        for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
                free(*f[i]);
                *f[i] = NULL;
        }
}

int sbxc_parse_sandbox(json_t *o, void *out, struct sbx_err *err)
{
        struct sbx_sandbox *ret = out;
        if (!json_is_object(o))
                return sbxc_bad(err, "answer: a sandbox is not an object");
        struct sbx_sandbox s = {0};
        int r = req_str(o, "name", &s.name, err);
        if (r >= 0)
                r = req_str(o, "state", &s.state, err);
        if (r >= 0)
                r = opt_str(o, "class", &s.sandbox_class, err);
        const struct {
                const char *key;
                char **out;
        } opt[] = {
            {"network", &s.network},      {"image", &s.image},
            {"createdAt", &s.created_at}, {"lastActiveAt", &s.last_active_at},
            {"ceilingAt", &s.ceiling_at}, {"endpoint", &s.endpoint},
            {"expiresAt", &s.expires_at},
        };
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(opt); i++)
                r = opt_str(o, opt[i].key, opt[i].out, err);
        if (r < 0) {
                sbx_sandbox_clear(&s);
                return r;
        }
        *ret = s;
        return 0;
}

/* calloc for an array of n of size each (n may be 0). */
static void *alloc_items(size_t n, size_t size, struct sbx_err *err)
{
        void *p = calloc(n ? n : 1, size);
        if (!p)
                sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
        return p;
}

static int parse_image(json_t *o, void *out, struct sbx_err *err)
{
        struct sbx_image *im = out;
        if (!json_is_object(o))
                return sbxc_bad(err, "answer: an image is not an object");
        int r = req_str(o, "name", &im->name, err);
        if (r >= 0)
                r = opt_str(o, "builtAt", &im->built_at, err);
        if (r >= 0)
                r = opt_str(o, "source", &im->source, err);
        if (r >= 0)
                r = req_int(o, "sizeBytes", &im->size_bytes, err);
        if (r >= 0 && json_object_get(o, "layers"))
                r = req_int(o, "layers", &im->layers, err);
        return r;
}

void sbx_snapshot_info_clear(struct sbx_snapshot_info *s)
{
        if (!s)
                return;
        free(s->image);
        free(s->created_at);
        s->image = s->created_at = NULL;
}

int sbxc_parse_snapshot(json_t *o, void *out, struct sbx_err *err)
{
        struct sbx_snapshot_info *ret = out;
        struct sbx_snapshot_info s = {0};
        int r = req_str(o, "image", &s.image, err);
        if (r >= 0)
                r = opt_str(o, "createdAt", &s.created_at, err);
        if (r >= 0)
                r = req_int(o, "sizeBytes", &s.size_bytes, err);
        if (r >= 0)
                r = req_int(o, "copiedBytes", &s.copied_bytes, err);
        if (r >= 0)
                r = req_int(o, "linkedFiles", &s.linked_files, err);
        if (r >= 0)
                r = req_int(o, "durationMs", &s.duration_ms, err);
        if (r < 0) {
                sbx_snapshot_info_clear(&s);
                return r;
        }
        *ret = s;
        return 0;
}

void sbx_exec_result_clear(struct sbx_exec_result *r)
{
        if (!r)
                return;
        free(r->out);
        free(r->err);
        *r = (struct sbx_exec_result){0};
}

static int exit_code_of(json_t *o, int *out, struct sbx_err *err)
{
        int64_t code = 0;
        int r = req_int(o, "exitCode", &code, err);
        if (r < 0)
                return r;
        if (code < -255 || code > 511)
                return sbxc_bad(err, "answer: exitCode %lld out of range", (long long)code);
        *out = (int)code;
        return 0;
}

int sbxc_parse_exec_result(json_t *o, void *out, struct sbx_err *err)
{
        struct sbx_exec_result *ret = out;
        struct sbx_exec_result x = {0};
        int r = exit_code_of(o, &x.exit_code, err);
        if (r >= 0)
                r = req_bytes(o, "stdout", &x.out, &x.out_len, err);
        if (r >= 0)
                r = req_bytes(o, "stderr", &x.err, &x.err_len, err);
        if (r >= 0)
                r = req_bool(o, "timedOut", &x.timed_out, err);
        if (r >= 0)
                r = req_bool(o, "truncated", &x.truncated, err);
        if (r >= 0)
                r = req_int(o, "durationMs", &x.duration_ms, err);
        if (r < 0) {
                sbx_exec_result_clear(&x);
                return r;
        }
        *ret = x;
        return 0;
}

void sbxc_strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

static int parse_argv(json_t *o, char ***out, struct sbx_err *err)
{
        json_t *a = json_object_get(o, "command");
        if (!a || json_is_null(a)) {
                *out = alloc_items(1, sizeof(char *), err);
                return *out ? 0 : -ENOMEM;
        }
        if (!json_is_array(a))
                return sbxc_bad(err, "answer: 'command' is not an array");
        char **v = alloc_items(json_array_size(a) + 1, sizeof(char *), err);
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < json_array_size(a); i++) {
                const char *s = json_string_value(json_array_get(a, i));
                v[i] = s ? strdup(s) : NULL;
                if (!v[i]) {
                        sbxc_strv_free(v);
                        return s ? sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory")
                                 : sbxc_bad(err, "answer: 'command' holds a non-string");
                }
        }
        *out = v;
        return 0;
}

void sbx_process_clear(struct sbx_process *p)
{
        if (!p)
                return;
        free(p->id);
        sbxc_strv_free(p->argv);
        free(p->started_at);
        free(p->exited_at);
        *p = (struct sbx_process){0};
}

int sbxc_parse_process(json_t *o, void *out, struct sbx_err *err)
{
        struct sbx_process *ret = out;
        if (!json_is_object(o))
                return sbxc_bad(err, "answer: a process is not an object");
        struct sbx_process p = {0};
        _cleanup_free_ char *state = NULL;
        int r = req_str(o, "processId", &p.id, err);
        if (r >= 0)
                r = req_str(o, "state", &state, err);
        if (r >= 0)
                r = parse_argv(o, &p.argv, err);
        if (r >= 0)
                r = opt_str(o, "startedAt", &p.started_at, err);
        if (r >= 0)
                r = opt_str(o, "exitedAt", &p.exited_at, err);
        if (r >= 0 && strcmp(state, "running") && strcmp(state, "exited"))
                r = sbxc_bad(err, "answer: unknown process state '%.64s'", state);
        if (r >= 0 && !strcmp(state, "exited")) {
                p.has_exit_code = true;
                r = exit_code_of(o, &p.exit_code, err);
        }
        if (r < 0) {
                sbx_process_clear(&p);
                return r;
        }
        p.running = !strcmp(state, "running");
        p.pty = opt_true(o, "pty");
        p.lossless = opt_true(o, "lossless");
        p.exec = opt_true(o, "exec");
        *ret = p;
        return 0;
}

void sbx_output_clear(struct sbx_output *o)
{
        if (!o)
                return;
        sbx_process_clear(&o->status);
        free(o->out);
        free(o->err);
        *o = (struct sbx_output){0};
}

int sbxc_parse_output(json_t *o, void *out, struct sbx_err *err)
{
        struct sbx_output *ret = out;
        struct sbx_output x = {0};
        int r = sbxc_parse_process(o, &x.status, err);
        if (r >= 0)
                r = req_bytes(o, "stdout", &x.out, &x.out_len, err);
        if (r >= 0)
                r = req_bytes(o, "stderr", &x.err, &x.err_len, err);
        if (r >= 0)
                r = req_u64(o, "stdoutNext", &x.out_next, err);
        if (r >= 0)
                r = req_u64(o, "stderrNext", &x.err_next, err);
        if (r >= 0)
                r = req_u64(o, "stdoutDropped", &x.out_dropped, err);
        if (r >= 0)
                r = req_u64(o, "stderrDropped", &x.err_dropped, err);
        if (r < 0) {
                sbx_output_clear(&x);
                return r;
        }
        *ret = x;
        return 0;
}

/* ---- lists: a JSON array of items, each parsed and cleared alike ---- */

typedef void (*clear_fn)(void *item);

static void clear_items(void *items, size_t n, size_t size, clear_fn clear)
{
        for (size_t i = 0; i < n; i++)
                clear((char *)items + i * size);
        free(items);
}

static int parse_items(json_t *o, const char *key, size_t size, sbxc_parser parse, clear_fn clear,
                       void **ret_items, size_t *ret_n, struct sbx_err *err)
{
        json_t *a = req_array(o, key, err);
        if (!a)
                return -EPROTO;
        size_t n = json_array_size(a);
        char *items = alloc_items(n, size, err);
        if (!items)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = parse(json_array_get(a, i), items + i * size, err);
                if (r < 0) {
                        // Item i may be partly filled (a parser that stops midway).
                        clear_items(items, i + 1, size, clear);
                        return r;
                }
        }
        *ret_items = items;
        *ret_n = n;
        return 0;
}

static void clear_sandbox(void *p)
{
        sbx_sandbox_clear(p);
}

static void clear_image(void *p)
{
        struct sbx_image *im = p;
        free(im->name);
        free(im->built_at);
        free(im->source);
}

static void clear_process(void *p)
{
        sbx_process_clear(p);
}

static void clear_dirent(void *p)
{
        free(((struct sbx_dirent *)p)->name);
}

static int parse_dirent(json_t *e, void *out, struct sbx_err *err)
{
        struct sbx_dirent *d = out;
        if (!json_is_object(e))
                return sbxc_bad(err, "answer: an entry is not an object");
        d->is_directory = opt_true(e, "isDirectory");
        return req_str(e, "name", &d->name, err);
}

/* The public list types share one layout: items, then n. */
#define LIST_FUNCS(type, item, key, parse, clear, pub_clear, parser)                               \
        void pub_clear(struct type *l)                                                             \
        {                                                                                          \
                if (!l)                                                                            \
                        return;                                                                    \
                clear_items(l->items, l->n, sizeof(struct item), clear);                           \
                l->items = NULL;                                                                   \
                l->n = 0;                                                                          \
        }                                                                                          \
        int parser(json_t *o, void *out, struct sbx_err *err)                                      \
        {                                                                                          \
                struct type *l = out;                                                              \
                void *items = NULL;                                                                \
                size_t n = 0;                                                                      \
                int r = parse_items(o, key, sizeof(struct item), parse, clear, &items, &n, err);   \
                if (r >= 0)                                                                        \
                        *l = (struct type){.items = items, .n = n};                                \
                return r;                                                                          \
        }

LIST_FUNCS(sbx_sandbox_list, sbx_sandbox, "sandboxes", sbxc_parse_sandbox, clear_sandbox,
           sbx_sandbox_list_clear, sbxc_parse_sandbox_list)
LIST_FUNCS(sbx_image_list, sbx_image, "images", parse_image, clear_image, sbx_image_list_clear,
           sbxc_parse_images)
LIST_FUNCS(sbx_process_list, sbx_process, "processes", sbxc_parse_process, clear_process,
           sbx_process_list_clear, sbxc_parse_process_list)
LIST_FUNCS(sbx_dir, sbx_dirent, "entries", parse_dirent, clear_dirent, sbx_dir_clear,
           sbxc_parse_dir)

/* An HTTP header name: a token (RFC 9110). */
static bool header_name_ok(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (!(strchr("!#$%&'*+-.^_`|~", *s) || (*s >= '0' && *s <= '9') ||
                      (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
                        return false;
        return true;
}

int sbxc_parse_headers(json_t *o, char ***ret, struct sbx_err *err)
{
        json_t *h = json_object_get(o, "headers");
        if (!json_is_object(h))
                return sbxc_bad(err, "answer: no object 'headers'");
        if (json_object_size(h) > 32)
                return sbxc_bad(err, "answer: more than 32 headers");
        char **v = alloc_items(json_object_size(h) + 1, sizeof(char *), err);
        if (!v)
                return -ENOMEM;
        size_t n = 0;
        const char *key;
        json_t *val;
        json_object_foreach(h, key, val)
        {
                const char *s = json_string_value(val);
                // A value with CR or LF would let the server write our next
                // request's headers; a NUL would cut it where curl reads it.
                if (!s || !header_name_ok(key) || strpbrk(s, "\r\n") ||
                    strlen(s) != json_string_length(val) || strlen(s) > 8192) {
                        sbxc_strv_free(v);
                        return sbxc_bad(err, "answer: a bad credential header");
                }
                if (asprintf(&v[n], "%s: %s", key, s) < 0) {
                        v[n] = NULL;
                        sbxc_strv_free(v);
                        return sbxc_fail(err, ENOMEM, 0, "no_memory", "out of memory");
                }
                n++;
        }
        *ret = v;
        return 0;
}

int sbxc_parse_time(const char *s, int64_t *ret_ms)
{
        if (!s)
                return -EINVAL;
        struct tm tm = {0};
        const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!end)
                return -EINVAL;
        int64_t ms = 0;
        if (*end == '.') {
                int digits = 0;
                for (end++; *end >= '0' && *end <= '9'; end++, digits++)
                        if (digits < 3)
                                ms = ms * 10 + (*end - '0');
                if (!digits)
                        return -EINVAL;
                for (; digits < 3; digits++)
                        ms *= 10;
        }
        if (strcmp(end, "Z"))
                return -EINVAL;
        time_t t = timegm(&tm);
        if (t == (time_t)-1)
                return -EINVAL;
        *ret_ms = (int64_t)t * 1000 + ms;
        return 0;
}

static int b64url_value(char ch)
{
        if (ch >= 'A' && ch <= 'Z')
                return ch - 'A';
        if (ch >= 'a' && ch <= 'z')
                return ch - 'a' + 26;
        if (ch >= '0' && ch <= '9')
                return ch - '0' + 52;
        if (ch == '-')
                return 62;
        if (ch == '_')
                return 63;
        return -1;
}

/* base64url without padding (a JWT part) to bytes; out holds len*3/4+1. */
static ssize_t b64url_decode(const char *in, size_t len, unsigned char *out)
{
        uint32_t acc = 0;
        int bits = 0;
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
                int v = b64url_value(in[i]);
                if (v < 0)
                        return -EINVAL;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (unsigned char)(acc >> bits);
                }
        }
        if (len % 4 == 1)
                return -EINVAL;
        return (ssize_t)n;
}

int sbxc_token_issuer(const char *token, char **ret)
{
        const char *a = token ? strchr(token, '.') : NULL;
        const char *b = a ? strchr(a + 1, '.') : NULL;
        if (!b)
                return -EINVAL;
        size_t len = (size_t)(b - a - 1);
        if (len == 0 || len > 65536)
                return -EINVAL;
        _cleanup_free_ unsigned char *raw = malloc(len * 3 / 4 + 1);
        if (!raw)
                return -ENOMEM;
        ssize_t n = b64url_decode(a + 1, len, raw);
        if (n < 0)
                return (int)n;
        json_t *claims = json_loadb((const char *)raw, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
        const char *iss = json_string_value(json_object_get(claims, "iss"));
        int r = -ENOENT;
        if (iss && *iss && strlen(iss) == json_string_length(json_object_get(claims, "iss"))) {
                *ret = strdup(iss);
                r = *ret ? 0 : -ENOMEM;
        }
        json_decref(claims);
        return r;
}
