/* SPDX-License-Identifier: MIT */
/* `sandboxd image import`: an OCI image layout or a docker-archive,
 * flattened into an image (docs/images.md).
 *
 * The order: the archive (a tar) is unpacked into the build dir, or a
 * layout dir is read where it is; what it says is read top down (OCI:
 * index.json -> manifest -> config; docker: manifest.json -> config), each
 * blob checked against its digest and size before it is parsed; then the
 * layers are applied in order into rootfs/ (oci-layer.c), each checked
 * against its digest before it is read and against the config's diff_id
 * after; image.json is written last and the build dir renamed into place.
 * Any error removes the build dir; a killed import leaves a .build- dir
 * that the next build, import or list removes. */
#include "runtime.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/names.h"
#include "image-internal.h"
#include "oci.h"

#define OCI_JSON_MAX (4u << 20) /* index, manifest, config */
#define OCI_INDEX_DEPTH 2       /* an index may name one nested index */
#define HASH_BUF (256 * 1024)

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

struct layer_ref {
        char path[PATH_MAX];          /* beneath the layout dir */
        char digest[OCI_DIGEST_MAX];  /* the blob's; "" in a docker archive */
        int64_t size;                 /* the blob's; -1: not said */
        char diff_id[OCI_DIGEST_MAX]; /* the uncompressed tar's */
        uint64_t unpacked;
};

struct plan {
        const char *source; /* "oci" or "docker" */
        char manifest[OCI_DIGEST_MAX];
        char image_id[OCI_DIGEST_MAX]; /* the config's digest */
        json_t *config;                /* the fields kept */
        size_t n;
        struct layer_ref *layers; /* RT_IMPORT_LAYERS_MAX of them */
};

/* ---- digests ---- */

int oci_digest_parse(const char *s, unsigned char out[OCI_SHA256_LEN])
{
        if (!s || strncmp(s, "sha256:", 7) || strlen(s + 7) != 2 * OCI_SHA256_LEN)
                return -EINVAL;
        for (size_t i = 0; i < OCI_SHA256_LEN; i++) {
                unsigned v = 0;
                for (int k = 0; k < 2; k++) {
                        char c = s[7 + 2 * i + (size_t)k];
                        int d = c >= '0' && c <= '9'   ? c - '0'
                                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                       : -1;
                        if (d < 0)
                                return -EINVAL;
                        v = v * 16 + (unsigned)d;
                }
                out[i] = (unsigned char)v;
        }
        return 0;
}

void oci_digest_format(const unsigned char d[OCI_SHA256_LEN], char out[OCI_DIGEST_MAX])
{
        static const char hex[] = "0123456789abcdef";
        memcpy(out, "sha256:", 7);
        for (size_t i = 0; i < OCI_SHA256_LEN; i++) {
                out[7 + 2 * i] = hex[d[i] >> 4];
                out[8 + 2 * i] = hex[d[i] & 15];
        }
        out[7 + 2 * OCI_SHA256_LEN] = '\0';
}

struct import {
        const struct rt_import_opts *o;
        struct rt_import_progress p;
        int layoutfd;
        int64_t last_report;
};

static void report(struct import *im, enum rt_import_phase phase, uint64_t done, uint64_t unpacked)
{
        im->p.phase = phase;
        im->p.done = done;
        im->p.unpacked = unpacked;
        if (im->o->progress)
                im->o->progress(im->o->ctx, &im->p);
}

static void on_layer_progress(void *ctx, enum rt_import_phase phase, uint64_t done,
                              uint64_t unpacked)
{
        report(ctx, phase, done, unpacked);
}

/* sha256 and length of what fd holds, from its start. */
static int hash_fd(struct import *im, int fd, unsigned char out[OCI_SHA256_LEN], uint64_t *ret_len)
{
        _cleanup_free_ unsigned char *buf = malloc(HASH_BUF);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        int r = !buf || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL) ? -ENOMEM : 0;
        uint64_t len = 0;
        while (r == 0) {
                ssize_t n = pread(fd, buf, HASH_BUF, (off_t)len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : 1;
                        break;
                }
                EVP_DigestUpdate(md, buf, (size_t)n);
                len += (uint64_t)n;
                int64_t now = mono_ms();
                if (im && now - im->last_report >= 100) {
                        im->last_report = now;
                        report(im, RT_IMPORT_VERIFY, len, 0);
                }
        }
        unsigned dl = 0;
        if (r == 1)
                r = EVP_DigestFinal_ex(md, out, &dl) && dl == OCI_SHA256_LEN ? 0 : -EIO;
        EVP_MD_CTX_free(md);
        *ret_len = len;
        return r;
}

/* Open blob `path` beneath the layout dir; what = how messages name it. */
static int blob_open(int layoutfd, const char *path, const char *what, int *ret_fd,
                     struct sbx_error *err)
{
        int r = oci_open_beneath(layoutfd, path, O_RDONLY | O_NOFOLLOW, ret_fd);
        if (r == -ENOENT)
                return sbx_error_say(err, ENOENT, "%s: blob `%s` is missing", what, path);
        if (r < 0)
                return sbx_error_set(err, -r, "%s: open blob `%s`", what, path);
        struct stat st;
        if (fstat(*ret_fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close_fd(ret_fd);
                return sbx_error_say(err, EINVAL, "%s: blob `%s` is not a file", what, path);
        }
        return 0;
}

/* The blob's digest and size against what its descriptor says. */
static int blob_verify(struct import *im, int fd, const char *digest, int64_t size,
                       const char *what, struct sbx_error *err)
{
        unsigned char want[OCI_SHA256_LEN], got[OCI_SHA256_LEN];
        if (oci_digest_parse(digest, want) < 0)
                return sbx_error_say(err, EINVAL, "%s: digest `%s` is not sha256:<hex>", what,
                                     digest);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return sbx_error_set(err, errno, "%s: stat", what);
        if (size >= 0 && st.st_size != size)
                return sbx_error_say(err, EINVAL,
                                     "%s: blob %s has %lld bytes, its descriptor says %lld", what,
                                     digest, (long long)st.st_size, (long long)size);
        uint64_t len;
        int r = hash_fd(im, fd, got, &len);
        if (r < 0)
                return sbx_error_set(err, -r, "%s: read blob %s", what, digest);
        if (memcmp(want, got, sizeof(want))) {
                char have[OCI_DIGEST_MAX];
                oci_digest_format(got, have);
                return sbx_error_say(err, EINVAL,
                                     "%s: blob %s does not match its digest (it is %s)", what,
                                     digest, have);
        }
        return 0;
}

static int read_json_fd(int fd, const char *what, json_t **ret, struct sbx_error *err)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return sbx_error_set(err, errno, "%s: stat", what);
        if (st.st_size > (off_t)OCI_JSON_MAX)
                return sbx_error_say(err, EFBIG, "%s: larger than %u bytes", what, OCI_JSON_MAX);
        _cleanup_free_ char *text = malloc((size_t)st.st_size + 1);
        if (!text)
                return sbx_error_set(err, ENOMEM, "%s", what);
        int r = st.st_size ? (int)pread(fd, text, (size_t)st.st_size, 0) : 0;
        if (r != (int)st.st_size)
                return sbx_error_set(err, r < 0 ? errno : EIO, "%s: read", what);
        json_error_t je;
        *ret = json_loadb(text, (size_t)st.st_size, JSON_REJECT_DUPLICATES, &je);
        if (!*ret)
                return sbx_error_say(err, EINVAL, "%s: not JSON (%s)", what, je.text);
        return 0;
}

/* A JSON blob named by a descriptor, checked, then parsed. */
static int load_blob(struct import *im, const char *digest, int64_t size, const char *what,
                     json_t **ret, struct sbx_error *err)
{
        char path[128];
        if (oci_digest_parse(digest, (unsigned char[OCI_SHA256_LEN]){0}) < 0)
                return sbx_error_say(err, EINVAL, "%s: digest `%s` is not sha256:<hex>", what,
                                     digest ? digest : "");
        path_printf(path, sizeof(path), "blobs/sha256/%s", digest + 7);
        _cleanup_close_ int fd = -1;
        int r = blob_open(im->layoutfd, path, what, &fd, err);
        if (r >= 0)
                r = blob_verify(NULL, fd, digest, size, what, err);
        return r < 0 ? r : read_json_fd(fd, what, ret, err);
}

static int load_file(int dfd, const char *name, json_t **ret, struct sbx_error *err)
{
        _cleanup_close_ int fd = -1;
        int r = oci_open_beneath(dfd, name, O_RDONLY | O_NOFOLLOW, &fd);
        if (r < 0)
                return sbx_error_set(err, -r, "open %s", name);
        return read_json_fd(fd, name, ret, err);
}

/* ---- the config ---- */

static bool is_string_array(const json_t *v)
{
        if (!json_is_array(v))
                return false;
        size_t i;
        json_t *s;
        json_array_foreach(v, i, s) if (!json_is_string(s)) return false;
        return true;
}

/* Env, WorkingDir, User, Entrypoint and Cmd, type-checked, into a new
 * object (another part of sandboxd applies them to commands). */
static int config_keep(const json_t *cfg, json_t **ret, struct sbx_error *err)
{
        static const struct {
                const char *key;
                bool array;
        } keep[] = {{"Env", true},
                    {"WorkingDir", false},
                    {"User", false},
                    {"Entrypoint", true},
                    {"Cmd", true}};
        json_t *c = json_object_get(cfg, "config");
        json_t *out = json_object();
        if (!out)
                return sbx_error_set(err, ENOMEM, "image config");
        for (size_t i = 0; c && !json_is_null(c) && i < ARRAY_SIZE(keep); i++) {
                json_t *v = json_object_get(c, keep[i].key);
                if (!v || json_is_null(v))
                        continue;
                if (keep[i].array ? !is_string_array(v) : !json_is_string(v)) {
                        json_decref(out);
                        return sbx_error_say(err, EINVAL, "image config: %s is not %s", keep[i].key,
                                             keep[i].array ? "an array of strings" : "a string");
                }
                json_object_set(out, keep[i].key, v);
        }
        *ret = out;
        return 0;
}

/* The config's platform, its diff_ids (one per layer), the fields kept. */
static int config_apply(struct plan *pl, const json_t *cfg, struct sbx_error *err)
{
        const char *os = json_string_value(json_object_get(cfg, "os"));
        const char *arch = json_string_value(json_object_get(cfg, "architecture"));
        if ((os && strcmp(os, "linux")) || (arch && strcmp(arch, "amd64")))
                return sbx_error_say(err, EINVAL, "the image is for %s/%s, not linux/amd64",
                                     os ? os : "?", arch ? arch : "?");
        json_t *ids = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
        if (!is_string_array(ids) || json_array_size(ids) != pl->n)
                return sbx_error_say(err, EINVAL,
                                     "image config: rootfs.diff_ids does not list the %zu layers",
                                     pl->n);
        for (size_t i = 0; i < pl->n; i++) {
                const char *d = json_string_value(json_array_get(ids, i));
                if (oci_digest_parse(d, (unsigned char[OCI_SHA256_LEN]){0}) < 0)
                        return sbx_error_say(err, EINVAL,
                                             "image config: diff_id `%s` is not "
                                             "sha256:<hex>",
                                             d);
                snprintf(pl->layers[i].diff_id, OCI_DIGEST_MAX, "%s", d);
        }
        return config_keep(cfg, &pl->config, err);
}

/* ---- OCI image layout ---- */

/* A descriptor, copied out of its JSON (which may go first). */
struct desc {
        char media[128]; /* "" when not said */
        char digest[OCI_DIGEST_MAX];
        int64_t size;
};

static int desc_get(const json_t *d, const char *what, struct desc *out, struct sbx_error *err)
{
        const char *media = json_string_value(json_object_get(d, "mediaType"));
        const char *digest = json_string_value(json_object_get(d, "digest"));
        json_t *size = json_object_get(d, "size");
        out->size = json_is_integer(size) ? (int64_t)json_integer_value(size) : -1;
        if (!digest || out->size < 0)
                return sbx_error_say(err, EINVAL, "%s: a descriptor without digest or size", what);
        if (oci_digest_parse(digest, (unsigned char[OCI_SHA256_LEN]){0}) < 0)
                return sbx_error_say(err, EINVAL, "%s: digest `%.80s` is not sha256:<hex>", what,
                                     digest);
        snprintf(out->digest, sizeof(out->digest), "%s", digest);
        if (path_printf(out->media, sizeof(out->media), "%s", media ? media : "") < 0)
                return sbx_error_say(err, EINVAL, "%s: media type too long", what);
        return 0;
}

static bool desc_is_index(const struct desc *d)
{
        return !strcmp(d->media, MT_OCI_INDEX) || !strcmp(d->media, MT_DOCKER_LIST);
}

/* Which of an index's manifests: linux/amd64, or the only one there is. */
static int index_pick(const json_t *index, struct desc *ret, struct sbx_error *err)
{
        json_t *ms = json_object_get(index, "manifests");
        size_t n = json_array_size(ms), i;
        if (!n)
                return sbx_error_say(err, EINVAL, "the index lists no manifests");
        json_t *m;
        struct buf seen;
        buf_init(&seen, 4096);
        json_array_foreach(ms, i, m)
        {
                json_t *pf = json_object_get(m, "platform");
                const char *os = json_string_value(json_object_get(pf, "os"));
                const char *arch = json_string_value(json_object_get(pf, "architecture"));
                if ((n == 1 && !pf) ||
                    (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64"))) {
                        buf_free(&seen);
                        return desc_get(m, "index.json", ret, err);
                }
                buf_printf(&seen, "%s%s/%s", i ? ", " : "", os ? os : "?", arch ? arch : "?");
        }
        int r = sbx_error_say(err, ENOENT, "no manifest for linux/amd64 in the index (it has: %s)",
                              seen.data ? seen.data : "");
        buf_free(&seen);
        return r;
}

static int oci_manifest_layers(struct plan *pl, const json_t *man, struct sbx_error *err)
{
        json_t *layers = json_object_get(man, "layers");
        if (!json_is_array(layers))
                return sbx_error_say(err, EINVAL, "the manifest lists no layers");
        if (json_array_size(layers) > RT_IMPORT_LAYERS_MAX)
                return sbx_error_say(err, E2BIG, "the image has %zu layers, more than %d",
                                     json_array_size(layers), RT_IMPORT_LAYERS_MAX);
        size_t i;
        json_t *l;
        json_array_foreach(layers, i, l)
        {
                struct desc d;
                int r = desc_get(l, "manifest layer", &d, err);
                if (r < 0)
                        return r;
                if (d.media[0] && !strstr(d.media, ".tar") && !strstr(d.media, "tar.gzip"))
                        return sbx_error_say(err, EINVAL, "layer %s: media type %s is not a tar",
                                             d.digest, d.media);
                struct layer_ref *L = &pl->layers[i];
                snprintf(L->digest, sizeof(L->digest), "%s", d.digest);
                path_printf(L->path, sizeof(L->path), "blobs/sha256/%s", d.digest + 7);
                L->size = d.size;
        }
        pl->n = i;
        return 0;
}

static int oci_plan(struct import *im, struct plan *pl, struct sbx_error *err)
{
        json_t *layout = NULL, *index = NULL;
        int r = load_file(im->layoutfd, "oci-layout", &layout, err);
        if (r >= 0 && !json_is_string(json_object_get(layout, "imageLayoutVersion")))
                r = sbx_error_say(err, EINVAL, "oci-layout has no imageLayoutVersion");
        json_decref(layout);
        if (r >= 0)
                r = load_file(im->layoutfd, "index.json", &index, err);
        struct desc d;
        for (int depth = 0; r >= 0; depth++) {
                r = index_pick(index, &d, err);
                json_decref(index);
                index = NULL;
                if (r < 0 || !desc_is_index(&d))
                        break;
                if (depth + 1 >= OCI_INDEX_DEPTH)
                        r = sbx_error_say(err, ELOOP, "indexes nested too deep");
                else
                        r = load_blob(im, d.digest, d.size, "the nested index", &index, err);
        }
        json_decref(index);
        if (r < 0)
                return r;
        snprintf(pl->manifest, sizeof(pl->manifest), "%s", d.digest);
        json_t *man = NULL, *cfg = NULL;
        if ((r = load_blob(im, pl->manifest, d.size, "the manifest", &man, err)) < 0)
                return r;
        struct desc c;
        r = desc_get(json_object_get(man, "config"), "the manifest's config", &c, err);
        if (r >= 0)
                r = oci_manifest_layers(pl, man, err);
        if (r >= 0)
                r = load_blob(im, c.digest, c.size, "the image config", &cfg, err);
        if (r >= 0) {
                snprintf(pl->image_id, sizeof(pl->image_id), "%s", c.digest);
                r = config_apply(pl, cfg, err);
        }
        json_decref(man);
        json_decref(cfg);
        return r;
}

/* ---- docker-archive (docker save, podman save) ---- */

/* The config's file is named by its sha256: <hex>.json (older docker) or
 * blobs/sha256/<hex> (docker 25 and later). */
static int docker_config(struct import *im, struct plan *pl, const char *path,
                         struct sbx_error *err)
{
        char clean[PATH_MAX], digest[OCI_DIGEST_MAX];
        if (!path || oci_clean_path(path, clean, sizeof(clean)) < 0)
                return sbx_error_say(err, EINVAL, "manifest.json: bad Config `%s`",
                                     path ? path : "");
        const char *base = strrchr(clean, '/');
        base = base ? base + 1 : clean;
        size_t hl = strcspn(base, ".");
        if (hl != 2 * OCI_SHA256_LEN || (base[hl] && strcmp(base + hl, ".json")))
                return sbx_error_say(err, EINVAL,
                                     "manifest.json: Config `%s` is not named by "
                                     "its sha256",
                                     path);
        snprintf(digest, sizeof(digest), "sha256:%.*s", (int)hl, base);
        _cleanup_close_ int fd = -1;
        json_t *cfg = NULL;
        int r = blob_open(im->layoutfd, clean, "the image config", &fd, err);
        if (r >= 0)
                r = blob_verify(NULL, fd, digest, -1, "the image config", err);
        if (r >= 0)
                r = read_json_fd(fd, "the image config", &cfg, err);
        if (r >= 0) {
                snprintf(pl->image_id, sizeof(pl->image_id), "%s", digest);
                r = config_apply(pl, cfg, err);
        }
        json_decref(cfg);
        return r;
}

static int docker_plan(struct import *im, struct plan *pl, struct sbx_error *err)
{
        json_t *mj = NULL;
        int r = load_file(im->layoutfd, "manifest.json", &mj, err);
        if (r < 0)
                return r;
        json_t *m = json_array_get(mj, 0);
        json_t *layers = json_object_get(m, "Layers");
        if (json_array_size(mj) != 1 || !is_string_array(layers)) {
                char *text = json_dumps(mj, JSON_COMPACT);
                r = sbx_error_say(err, EINVAL,
                                  "manifest.json must describe one image with Layers (it has: "
                                  "%.200s)",
                                  text ? text : "?");
                free(text);
        } else if (json_array_size(layers) > RT_IMPORT_LAYERS_MAX) {
                r = sbx_error_say(err, E2BIG, "the image has %zu layers, more than %d",
                                  json_array_size(layers), RT_IMPORT_LAYERS_MAX);
        }
        size_t i;
        json_t *l;
        json_array_foreach(r < 0 ? NULL : layers, i, l)
        {
                if (oci_clean_path(json_string_value(l), pl->layers[i].path, PATH_MAX) < 0) {
                        r = sbx_error_say(err, EINVAL, "manifest.json: bad layer path `%s`",
                                          json_string_value(l));
                        break;
                }
                pl->layers[i].size = -1;
                pl->n = i + 1;
        }
        if (r >= 0)
                r = docker_config(im, pl, json_string_value(json_object_get(m, "Config")), err);
        json_decref(mj);
        return r;
}

/* ---- the source ---- */

static bool has_file(int dfd, const char *name)
{
        struct stat st;
        return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* A tar file is unpacked into <build>/source; a dir is read where it is. */
static int open_source(struct import *im, int bfd, const char *file, uint64_t max,
                       struct sbx_error *err)
{
        _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return sbx_error_set(err, errno, "open `%s`", file);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return sbx_error_set(err, errno, "stat `%s`", file);
        if (S_ISDIR(st.st_mode)) {
                im->layoutfd = TAKE_FD(fd);
                return 0;
        }
        if (!S_ISREG(st.st_mode))
                return sbx_error_say(err, EINVAL, "`%s` is neither a directory nor a file", file);
        int r = img_mkdir_mode(bfd, "source", 0700);
        if (r < 0)
                return sbx_error_set(err, -r, "create the unpack dir");
        _cleanup_close_ int sfd = openat(bfd, "source", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0)
                return sbx_error_set(err, errno, "open the unpack dir");
        uint64_t budget = max;
        struct oci_apply_opts ao = {
            .mode = OCI_APPLY_PLAIN, .budget = &budget, .progress = on_layer_progress, .ctx = im};
        struct oci_apply_result res;
        im->p.total = (uint64_t)st.st_size;
        if ((r = oci_tar_apply(sfd, fd, &ao, &res, err)) < 0)
                return sbx_error_wrap(err, "`%s`", file);
        im->layoutfd = TAKE_FD(sfd);
        return 0;
}

static int plan_read(struct import *im, struct plan *pl, struct sbx_error *err)
{
        if (has_file(im->layoutfd, "manifest.json")) {
                pl->source = "docker";
                return docker_plan(im, pl, err);
        }
        if (has_file(im->layoutfd, "index.json") && has_file(im->layoutfd, "oci-layout")) {
                pl->source = "oci";
                return oci_plan(im, pl, err);
        }
        return sbx_error_say(err, EINVAL,
                             "neither an OCI image layout (oci-layout, index.json) nor a "
                             "docker archive (manifest.json)");
}

/* ---- the layers ---- */

static int apply_layer(struct import *im, struct layer_ref *L, int rootfd, uint64_t *budget,
                       struct sbx_error *err)
{
        char what[96];
        snprintf(what, sizeof(what), "layer %u", im->p.layer);
        _cleanup_close_ int fd = -1;
        int r = blob_open(im->layoutfd, L->path, what, &fd, err);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return sbx_error_set(err, errno, "%s: stat", what);
        im->p.total = (uint64_t)st.st_size;
        if (L->digest[0] && (r = blob_verify(im, fd, L->digest, L->size, what, err)) < 0)
                return r;
        L->size = st.st_size;
        struct oci_apply_opts ao = {.mode = OCI_APPLY_MERGE,
                                    .no_setuid = im->o->no_setuid,
                                    .budget = budget,
                                    .progress = on_layer_progress,
                                    .ctx = im};
        struct oci_apply_result res;
        if ((r = oci_tar_apply(rootfd, fd, &ao, &res, err)) < 0)
                return sbx_error_wrap(err, "%s (%s)", what, L->digest[0] ? L->digest : L->path);
        char got[OCI_DIGEST_MAX];
        oci_digest_format(res.diff_id, got);
        if (strcmp(got, L->diff_id))
                return sbx_error_say(err, EINVAL,
                                     "%s (%s): its uncompressed content is %s, the config's "
                                     "diff_id says %s",
                                     what, L->path, got, L->diff_id);
        L->unpacked = res.unpacked;
        report(im, RT_IMPORT_DONE, (uint64_t)st.st_size, res.unpacked);
        return 0;
}

static int apply_layers(struct import *im, struct plan *pl, int bfd, struct sbx_error *err)
{
        int r = img_mkdir_mode(bfd, "rootfs", 0755);
        if (r < 0)
                return sbx_error_set(err, -r, "create rootfs/");
        _cleanup_close_ int rootfd =
            openat(bfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfd < 0)
                return sbx_error_set(err, errno, "open rootfs/");
        uint64_t budget = im->o->max_size ? im->o->max_size : RT_IMPORT_MAX_SIZE_DEFAULT;
        im->p.layers = (unsigned)pl->n;
        for (size_t i = 0; i < pl->n; i++) {
                struct layer_ref *L = &pl->layers[i];
                im->p.layer = (unsigned)i + 1;
                im->p.digest = L->digest[0] ? L->digest : L->diff_id;
                if ((r = apply_layer(im, L, rootfd, &budget, err)) < 0)
                        return r;
        }
        return 0;
}

/* ---- image.json ---- */

static int write_json(int bfd, const char *name, const struct plan *pl, uint64_t size,
                      struct sbx_error *err)
{
        char when[32];
        format_rfc3339(now_ms(), when);
        json_t *layers = json_array();
        for (size_t i = 0; layers && i < pl->n; i++) {
                const struct layer_ref *L = &pl->layers[i];
                json_t *l = json_pack("{s:s, s:I, s:I}", "diffId", L->diff_id, "size",
                                      (json_int_t)L->size, "unpacked", (json_int_t)L->unpacked);
                if (l && L->digest[0])
                        json_object_set_new(l, "digest", json_string(L->digest));
                json_array_append_new(layers, l);
        }
        json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:O}", "name", name, "builtAt", when,
                              "size", (json_int_t)size, "source", pl->source, "imageId",
                              pl->image_id, "layers", layers, "config", pl->config);
        if (j && pl->manifest[0])
                json_object_set_new(j, "manifest", json_string(pl->manifest));
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!text)
                return sbx_error_set(err, ENOMEM, "image.json");
        size_t len = strlen(text);
        int r = len + 1 >= IMG_JSON_MAX ? -E2BIG : 0;
        text[len] = '\n';
        if (r == 0)
                r = img_write_file_at(bfd, IMG_JSON, text, len + 1, 0644);
        free(text);
        return r < 0 ? sbx_error_set(err, -r, "write image.json") : 0;
}

static int import_into(struct import *im, int bfd, const char *name, const char *file,
                       uint64_t *ret_size, struct sbx_error *err)
{
        uint64_t max = im->o->max_size ? im->o->max_size : RT_IMPORT_MAX_SIZE_DEFAULT;
        struct plan pl = {0};
        pl.layers = calloc(RT_IMPORT_LAYERS_MAX, sizeof(*pl.layers));
        if (!pl.layers)
                return sbx_error_set(err, ENOMEM, "import");
        int r = open_source(im, bfd, file, max, err);
        if (r >= 0)
                r = plan_read(im, &pl, err);
        if (r >= 0)
                r = apply_layers(im, &pl, bfd, err);
        if (r >= 0 && (r = rm_rf_at(bfd, "source")) < 0)
                sbx_error_set(err, -r, "remove the unpacked archive");
        if (r >= 0) {
                *ret_size = img_rootfs_size(bfd);
                r = write_json(bfd, name, &pl, *ret_size, err);
        }
        json_decref(pl.config);
        free(pl.layers);
        return r;
}

int rt_image_import(const char *images_dir, const char *name, const char *file,
                    const struct rt_import_opts *o, uint64_t *ret_size, struct sbx_error *err)
{
        if (!name || !image_name_is_valid(name))
                return sbx_error_say(err, EINVAL, "bad image name `%s`", name ? name : "");
        int r = mkdir_p(images_dir, 0755);
        if (r < 0)
                return sbx_error_set(err, -r, "create `%s`", images_dir);
        _cleanup_close_ int imgfd = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (imgfd < 0)
                return sbx_error_set(err, errno, "open `%s`", images_dir);
        img_remove_leftovers(imgfd, name, true);
        if (!o->force && img_complete(imgfd, name))
                return sbx_error_say(err, EEXIST, "image `%s` exists (--force replaces it)", name);
        char build[128];
        _cleanup_close_ int bfd = -1;
        if ((r = img_build_dir(imgfd, name, build, &bfd, err)) < 0)
                return r;
        struct import im = {.o = o, .layoutfd = -1};
        r = import_into(&im, bfd, name, file, ret_size, err);
        close_fd(&im.layoutfd);
        if (r >= 0)
                r = img_install_build(imgfd, build, name, err);
        if (r < 0)
                rm_rf_at(imgfd, build);
        return r;
}
