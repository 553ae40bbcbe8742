/* SPDX-License-Identifier: MIT */
/* sandboxd image build NAME [-f RECIPE] [--context DIR] [--no-cache]:
 * an image from a recipe (docs/images.md, "Recipes"; runtime/recipe.h).
 *
 * Each step's result is an image of the build cache, <images>/.cache,
 * named by its key: the sha256 of the key before it and of what the step
 * says (and, for COPY, of what it copies). A step whose key has an image
 * is not run again, so a rebuild with an unchanged prefix only runs what
 * follows the first change. FROM's key covers the base image's image.json,
 * so a base built again is a new prefix. ENV changes no file: it is kept
 * for the RUN steps after it and for the image's config. The result is
 * the last step's image, linked (not copied) into <images>/NAME with the
 * recipe's config, written last, as every image is: a build that dies
 * leaves no NAME half made, and its cache steps are whole or absent. */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/names.h"
#include "../runtime/recipe.h"
#include "../runtime/runtime.h"
#include "build.h"
#include "cli.h"
#include "settings.h"

#define BUILD_KEY_PREFIX "k-"
#define BUILD_MAX_ENV 512

struct build {
        const char *images;
        char cache[PATH_MAX];
        const char *name;
        const char *text; /* the recipe */
        size_t text_len;
        struct recipe rc;
        int ctxfd; /* -1: no context (a built-in recipe) */
        bool no_cache;
        char key[65];    /* the chain so far, hex */
        char parent[65]; /* the cache image the next step starts from */
        char *env[BUILD_MAX_ENV];
        size_t envc;
        char workdir[4096];
        struct build_daemon d;
        bool daemon_up;
        unsigned ran, cached;
};

static void hex32(const unsigned char *md, char out[65])
{
        static const char hex[] = "0123456789abcdef";
        for (int i = 0; i < 32; i++) {
                out[2 * i] = hex[md[i] >> 4];
                out[2 * i + 1] = hex[md[i] & 15];
        }
        out[64] = '\0';
}

/* key = sha256(key, parts...), parts NUL-separated. */
static void chain(struct build *b, const char *const *parts, size_t n)
{
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned char out[EVP_MAX_MD_SIZE];
        unsigned int len = 0;
        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
                abort();
        EVP_DigestUpdate(md, b->key, strlen(b->key) + 1);
        for (size_t i = 0; i < n; i++)
                EVP_DigestUpdate(md, parts[i], strlen(parts[i]) + 1);
        EVP_DigestFinal_ex(md, out, &len);
        EVP_MD_CTX_free(md);
        hex32(out, b->key);
}

static void key_image(const struct build *b, char out[65])
{
        snprintf(out, 65, BUILD_KEY_PREFIX "%.40s", b->key);
}

static bool cached(const struct build *b, const char *img)
{
        char p[PATH_MAX];
        return !b->no_cache && path_printf(p, sizeof(p), "%s/%s/image.json", b->cache, img) == 0 &&
               access(p, F_OK) == 0;
}

static char *read_small(const char *path, size_t max, size_t *ret_len)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        struct buf t;
        buf_init(&t, max);
        char chunk[65536];
        for (;;) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || (n > 0 && buf_append(&t, chunk, (size_t)n) < 0)) {
                        buf_free(&t);
                        errno = n < 0 ? errno : E2BIG;
                        return NULL;
                }
                if (n == 0)
                        break;
        }
        if (buf_terminate(&t) < 0) {
                buf_free(&t);
                return NULL;
        }
        *ret_len = t.len;
        return t.data;
}

/* ---- the base ---- */

static int base_step(struct build *b, struct sbx_error *err)
{
        struct recipe *rc = &b->rc;
        _cleanup_free_ char *json = NULL;
        if (rc->base == RECIPE_BASE_IMAGE) {
                char p[PATH_MAX];
                size_t n = 0;
                if (path_printf(p, sizeof(p), "%s/%s/image.json", b->images, rc->from) < 0 ||
                    !(json = read_small(p, 1 << 20, &n)))
                        return sbx_error_say(err, ENOENT, "FROM %s: there is no such image",
                                             rc->from);
        }
        const char *parts[] = {"sandboxd recipe 1",
                               "FROM",
                               rc->from,
                               rc->suite ? rc->suite : "",
                               rc->packages ? rc->packages : "",
                               json ? json : ""};
        chain(b, parts, ARRAY_SIZE(parts));
        key_image(b, b->parent);
        fprintf(stderr, "step 1/%zu: FROM %s%s%s\n", rc->n_steps + 1, rc->from,
                rc->suite ? " " : "", rc->suite ? rc->suite : "");
        if (cached(b, b->parent)) {
                b->cached++;
                fprintf(stderr, "  cached\n");
                return 0;
        }
        rt_image_remove(b->cache, b->parent, &(struct sbx_error){0}); /* --no-cache */
        b->ran++;
        if (rc->base != RECIPE_BASE_IMAGE)
                return rt_image_bootstrap(b->cache, b->parent, rc->base == RECIPE_BASE_BUSYBOX,
                                          rc->suite, rc->packages, err);
        struct rt_derive d = {.src_dir = b->images,
                              .src_name = rc->from,
                              .dst_dir = b->cache,
                              .dst_name = b->parent,
                              .layer_fd = -1,
                              .source = "cache"};
        return rt_image_derive(&d, err);
}

/* ---- the steps ---- */

static int set_env(struct build *b, const char *kv, struct sbx_error *err)
{
        size_t kl = strcspn(kv, "=");
        for (size_t i = 0; i < b->envc; i++)
                if (!strncmp(b->env[i], kv, kl) && b->env[i][kl] == '=') {
                        char *v = strdup(kv);
                        if (!v)
                                return sbx_error_set(err, ENOMEM, "ENV");
                        free(b->env[i]);
                        b->env[i] = v;
                        return 0;
                }
        if (b->envc == BUILD_MAX_ENV)
                return sbx_error_say(err, E2BIG, "more than %d variables", BUILD_MAX_ENV);
        if (!(b->env[b->envc] = strdup(kv)))
                return sbx_error_set(err, ENOMEM, "ENV");
        b->envc++;
        return 0;
}

/* A step that makes an image on the host (WORKDIR, COPY): the parent's
 * files, linked, with a directory or a layer on top. */
static int derive_step(struct build *b, const char *mkdir_path, int layer_fd, struct sbx_error *err)
{
        char img[65];
        key_image(b, img);
        if (cached(b, img)) {
                b->cached++;
                fprintf(stderr, "  cached\n");
        } else {
                rt_image_remove(b->cache, img, &(struct sbx_error){0});
                struct rt_derive d = {.src_dir = b->cache,
                                      .src_name = b->parent,
                                      .dst_dir = b->cache,
                                      .dst_name = img,
                                      .mkdir = mkdir_path,
                                      .layer_fd = layer_fd,
                                      .source = "cache"};
                int r = rt_image_derive(&d, err);
                if (r < 0)
                        return r;
                b->ran++;
        }
        snprintf(b->parent, sizeof(b->parent), "%s", img);
        return 0;
}

static int workdir_step(struct build *b, const struct recipe_step *s, struct sbx_error *err)
{
        snprintf(b->workdir, sizeof(b->workdir), "%s", s->args[0]);
        const char *parts[] = {"WORKDIR", s->args[0]};
        chain(b, parts, 2);
        char p[PATH_MAX];
        struct stat st;
        /* Already a directory of the parent's (not through a link): no
         * new image. */
        if (path_printf(p, sizeof(p), "%s/%s/rootfs%s", b->cache, b->parent, b->workdir) == 0 &&
            lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && !strstr(b->workdir, "/."))
                return 0;
        return derive_step(b, b->workdir, -1, err);
}

static int copy_step(struct build *b, const struct recipe_step *s, struct sbx_error *err)
{
        if (b->ctxfd < 0)
                return sbx_error_say(err, EINVAL, "COPY needs a build context (-f or --context)");
        _cleanup_close_ int fd = open(b->cache, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0)
                return sbx_error_set(err, errno, "a temporary file in `%s`", b->cache);
        char digest[65];
        int r = build_copy_layer(b->ctxfd, (const char *const *)s->args, s->n_args - 1,
                                 s->args[s->n_args - 1], fd, digest, err);
        if (r < 0)
                return r;
        const char *parts[] = {"COPY", digest};
        chain(b, parts, 2);
        if (lseek(fd, 0, SEEK_SET) < 0)
                return sbx_error_set(err, errno, "COPY");
        return derive_step(b, NULL, fd, err);
}

static int run_step(struct build *b, const struct recipe_step *s, struct sbx_error *err)
{
        const char *parts[2 + RECIPE_MAX_ARGS] = {"RUN", s->exec_form ? "exec" : "shell"};
        for (size_t i = 0; i < s->n_args; i++)
                parts[2 + i] = s->args[i];
        chain(b, parts, 2 + s->n_args);
        char img[65];
        key_image(b, img);
        if (cached(b, img)) {
                b->cached++;
                fprintf(stderr, "  cached\n");
                snprintf(b->parent, sizeof(b->parent), "%s", img);
                return 0;
        }
        rt_image_remove(b->cache, img, &(struct sbx_error){0});
        int r = 0;
        if (!b->daemon_up) {
                char state[PATH_MAX];
                if (path_printf(state, sizeof(state), "%s/" BUILD_STATE_PREFIX "%d", b->images,
                                (int)getpid()) < 0)
                        return sbx_error_say(err, ENAMETOOLONG, "images path too long");
                r = build_daemon_start(&b->d, state, b->cache, err);
                b->daemon_up = true; /* stopped (and its dir removed) either way */
                if (r < 0)
                        return r;
        }
        const char *sh[] = {"/bin/sh", "-c", s->args[0]};
        struct build_run run = {
            .image = b->parent,
            .argv = s->exec_form ? (const char *const *)s->args : sh,
            .argc = s->exec_form ? s->n_args : 3,
            .env = (const char *const *)b->env,
            .envc = b->envc,
            .cwd = b->workdir[0] ? b->workdir : NULL,
            .snapshot = img,
        };
        struct buf tail;
        buf_init(&tail, 0);
        int code = -1;
        r = build_daemon_run(&b->d, &run, &code, &tail, err);
        buf_free(&tail);
        if (r == 0 && code != 0)
                r = sbx_error_say(err, EIO, "line %u: RUN failed: %s %d (its output is above)",
                                  s->line, code < 0 ? "killed," : "exit code", code);
        if (r < 0)
                return r;
        b->ran++;
        snprintf(b->parent, sizeof(b->parent), "%s", img);
        return 0;
}

static int step(struct build *b, size_t i, struct sbx_error *err)
{
        const struct recipe_step *s = &b->rc.steps[i];
        fprintf(stderr, "step %zu/%zu: %.200s\n", i + 2, b->rc.n_steps + 1, s->text);
        switch (s->op) {
        case RECIPE_ENV: {
                const char *parts[1 + RECIPE_MAX_ARGS] = {"ENV"};
                for (size_t k = 0; k < s->n_args; k++)
                        parts[1 + k] = s->args[k];
                chain(b, parts, 1 + s->n_args);
                for (size_t k = 0; k < s->n_args; k++) {
                        int r = set_env(b, s->args[k], err);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case RECIPE_WORKDIR:
                return workdir_step(b, s, err);
        case RECIPE_COPY:
                return copy_step(b, s, err);
        case RECIPE_RUN:
                return run_step(b, s, err);
        }
        return 0;
}

/* ---- the result ---- */

/* The image's config: its base's, the recipe's ENV over its Env, its
 * WORKDIR as WorkingDir. */
static char *final_config(struct build *b)
{
        char p[PATH_MAX];
        json_t *cfg = NULL;
        if (path_printf(p, sizeof(p), "%s/%s/image.json", b->cache, b->parent) == 0) {
                json_t *j = json_load_file(p, JSON_REJECT_DUPLICATES, NULL);
                cfg = json_deep_copy(json_object_get(j, "config"));
                json_decref(j);
        }
        if (!json_is_object(cfg)) {
                json_decref(cfg);
                cfg = json_object();
        }
        json_t *env = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(cfg, "Env"), i, v)
        {
                const char *kv = json_string_value(v);
                bool over = false;
                size_t kl = kv ? strcspn(kv, "=") : 0;
                for (size_t k = 0; kv && k < b->envc; k++)
                        over |= !strncmp(b->env[k], kv, kl) && b->env[k][kl] == '=';
                if (kv && !over)
                        json_array_append(env, v);
        }
        for (size_t k = 0; k < b->envc; k++)
                json_array_append_new(env, json_string(b->env[k]));
        if (json_array_size(env))
                json_object_set(cfg, "Env", env);
        json_decref(env);
        if (b->workdir[0])
                json_object_set_new(cfg, "WorkingDir", json_string(b->workdir));
        char *text = json_dumps(cfg, JSON_COMPACT);
        json_decref(cfg);
        return text;
}

/* Whether NAME is already this build's result: the same chain, from the
 * same recipe text. */
static bool up_to_date(const struct build *b, const char *recipe_id)
{
        char p[PATH_MAX];
        if (path_printf(p, sizeof(p), "%s/%s/image.json", b->images, b->name) < 0)
                return false;
        json_t *j = json_load_file(p, JSON_REJECT_DUPLICATES, NULL);
        const char *key = json_string_value(json_object_get(j, "buildKey"));
        const char *rid = json_string_value(json_object_get(j, "recipe"));
        bool same = key && rid && !strcmp(key, b->key) && !strcmp(rid, recipe_id);
        json_decref(j);
        return same;
}

static int install(struct build *b, struct sbx_error *err)
{
        char recipe_id[72];
        if (recipe_text_id(b->text, b->text_len, recipe_id) < 0)
                return sbx_error_say(err, EIO, "digest the recipe");
        if (!b->no_cache && up_to_date(b, recipe_id)) {
                fprintf(stderr, "image '%s' is up to date\n", b->name);
                return 0;
        }
        _cleanup_free_ char *cfg = final_config(b);
        if (!cfg)
                return sbx_error_set(err, ENOMEM, "the image's config");
        struct rt_derive d = {.src_dir = b->cache,
                              .src_name = b->parent,
                              .dst_dir = b->images,
                              .dst_name = b->name,
                              .layer_fd = -1,
                              .source = "built",
                              .recipe = recipe_id,
                              .build_key = b->key,
                              .config_json = cfg,
                              .replace = true};
        return rt_image_derive(&d, err);
}

static int run_build(struct build *b, struct sbx_error *err)
{
        int r = recipe_parse(b->text, b->text_len, &b->rc, err);
        if (r < 0)
                return r;
        if (path_join(b->cache, sizeof(b->cache), b->images, BUILD_CACHE_DIR) < 0)
                return sbx_error_say(err, ENAMETOOLONG, "images path too long");
        if (mkdir(b->cache, 0700) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create `%s`", b->cache);
        build_sweep(b->images);
        r = base_step(b, err);
        for (size_t i = 0; r == 0 && i < b->rc.n_steps; i++) {
                if (build_interrupted)
                        r = sbx_error_say(err, EINTR, "interrupted");
                else
                        r = step(b, i, err);
        }
        if (b->daemon_up)
                build_daemon_stop(&b->d);
        if (r == 0 && build_interrupted)
                r = sbx_error_say(err, EINTR, "interrupted");
        if (r == 0)
                r = install(b, err);
        return r;
}

/* ---- the command ---- */

struct build_opts {
        const char *file, *context;
        bool no_cache, force;
};

static int build_extra(const char *name, const char *value, void *ctx)
{
        struct build_opts *o = ctx;
        if (!strcmp(name, "file"))
                o->file = value;
        else if (!strcmp(name, "context"))
                o->context = value;
        else if (!strcmp(name, "no-cache") || !strcmp(name, "no_cache"))
                o->no_cache = true;
        else if (!strcmp(name, "force"))
                o->force = true;
        else
                return 0;
        return 1;
}

static void on_signal(int sig)
{
        build_interrupted = 1;
}

static void usage(void)
{
        printf("usage: sandboxd image build NAME [-f RECIPE] [--context DIR] [--no-cache] "
               "[--force]\n\n"
               "Builds the image NAME from a recipe (docs/images.md): FROM, then RUN, COPY,\n"
               "ENV and WORKDIR steps. RUN steps run in a sandbox of the image so far (nat\n"
               "network), their output shown as it comes; each step's result is cached by\n"
               "its content, so a rebuild runs only what follows the first change.\n"
               "Without -f, NAME is one of the images sandboxd ships (tiny, debian),\n"
               "built when missing or built from an older recipe.\n\n"
               "  -f, --file RECIPE          the recipe (`-`: standard input)\n"
               "  --context DIR              where COPY reads from [the recipe's dir]\n"
               "  --no-cache                 run every step again\n"
               "  --force                    replace an image that is not a build's; rebuild a\n"
               "                             shipped image that is current\n");
        settings_usage(0);
}

/* Whether an image NAME may be replaced by this build: 1 go on, 0 it is
 * already what was asked (a current shipped image), < 0 refused. */
static int may_replace(const char *images, const char *name, bool builtin, bool force)
{
        struct rt_image_info *v = NULL;
        size_t n = 0;
        struct sbx_error err = {0};
        if (rt_image_list(images, &v, &n, &err) < 0)
                return 1;
        int ret = 1;
        for (size_t i = 0; i < n; i++) {
                if (strcmp(v[i].name, name))
                        continue;
                bool ours = !strcmp(v[i].source, "built");
                if (builtin && !force && !v[i].stale) {
                        fprintf(stderr, "image '%s' already present (use --force to rebuild)\n",
                                name);
                        ret = 0;
                } else if (!ours && !force) {
                        fprintf(stderr,
                                "sandboxd image: there is an image '%s' (%s) already: --force "
                                "replaces it\n",
                                name, v[i].source);
                        ret = -1;
                } else if (builtin && v[i].stale) {
                        fprintf(stderr, "image '%s' was built from an older recipe\n", name);
                }
        }
        free(v);
        return ret;
}

static int load_recipe(struct build *b, const struct build_opts *o, char **owned)
{
        if (!o->file) {
                b->text = recipe_builtin(b->name);
                if (!b->text) {
                        fprintf(stderr,
                                "sandboxd image: '%s' is not an image sandboxd ships (tiny, "
                                "debian): name a recipe with -f\n",
                                b->name);
                        return -1;
                }
                b->text_len = strlen(b->text);
                return 0;
        }
        size_t n = 0;
        *owned = read_small(!strcmp(o->file, "-") ? "/dev/stdin" : o->file, RECIPE_MAX_BYTES, &n);
        if (!*owned) {
                fprintf(stderr, "sandboxd image: read %s: %s\n", o->file, strerror(errno));
                return -1;
        }
        b->text = *owned;
        b->text_len = n;
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", o->file);
        char *slash = strrchr(dir, '/');
        const char *ctx = o->context              ? o->context
                          : !strcmp(o->file, "-") ? NULL
                          : slash                 ? (*slash = '\0', dir[0] ? dir : "/")
                                                  : ".";
        if (ctx && (b->ctxfd = open(ctx, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                fprintf(stderr, "sandboxd image: the build context %s: %s\n", ctx, strerror(errno));
                return -1;
        }
        return 0;
}

int cmd_image_build(int argc, char **argv)
{
        for (int i = 0; i < argc; i++) {
                if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                        usage();
                        return 0;
                }
                if (!strcmp(argv[i], "-f"))
                        argv[i] = (char *)"--file";
        }
        static const char *const extra[] = {"file", "context", "no-cache!", "force!", NULL};
        struct build_opts o = {0};
        struct settings s;
        char **args = NULL;
        settings_defaults(&s);
        if (settings_parse(&s, 0, argc, argv, build_extra, extra, &o, &args) < 0)
                return 2;
        int ret = 2;
        _cleanup_free_ char *text = NULL;
        struct build b = {.images = s.images, .ctxfd = -1, .no_cache = o.no_cache};
        if (!args[0] || args[1]) {
                fprintf(stderr, "usage: sandboxd image build NAME [-f RECIPE] [--context DIR] "
                                "[--no-cache] [--force]\n");
                goto out;
        }
        b.name = args[0];
        if (!image_name_is_valid(b.name)) {
                fprintf(stderr, "sandboxd image: bad image name '%s'\n", b.name);
                goto out;
        }
        ret = 1;
        if (load_recipe(&b, &o, &text) < 0 || mkdir_p(s.images, 0755) < 0)
                goto out;
        int m = may_replace(s.images, b.name, !o.file, o.force);
        if (m <= 0) {
                ret = m == 0 ? 0 : 1;
                goto out;
        }
        struct sigaction sa = {.sa_handler = on_signal};
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        fprintf(stderr, "building image '%s'...\n", b.name);
        struct sbx_error err = {0};
        if (run_build(&b, &err) < 0) {
                fprintf(stderr, "sandboxd image: build %s: %s\n", b.name, err.msg);
        } else {
                fprintf(stderr, "image '%s' ready (%u steps run, %u cached)\n", b.name, b.ran,
                        b.cached);
                ret = 0;
        }
out:
        recipe_free(&b.rc);
        for (size_t i = 0; i < b.envc; i++)
                free(b.env[i]);
        if (b.ctxfd >= 0)
                close(b.ctxfd);
        free(args);
        settings_free(&s);
        return ret;
}

int image_prune(const char *images)
{
        char cache[PATH_MAX];
        if (path_join(cache, sizeof(cache), images, BUILD_CACHE_DIR) < 0)
                return 1;
        build_sweep(images);
        if (build_running(images)) {
                fprintf(stderr, "sandboxd image: a build is running on %s: prune after it\n",
                        images);
                return 1;
        }
        struct rt_image_info *v = NULL;
        size_t n = 0, gone = 0;
        struct sbx_error err = {0};
        if (access(cache, F_OK) < 0) {
                printf("the build cache is empty\n");
                return 0;
        }
        if (rt_image_list(cache, &v, &n, &err) < 0) {
                fprintf(stderr, "sandboxd image: %s\n", err.msg);
                return 1;
        }
        for (size_t i = 0; i < n; i++)
                gone += rt_image_remove(cache, v[i].name, &err) == 0;
        free(v);
        rt_image_sweep(cache);
        printf("removed %zu cached build step%s\n", gone, gone == 1 ? "" : "s");
        return gone == n ? 0 : 1;
}
