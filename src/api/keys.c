/* SPDX-License-Identifier: MIT */
#include "keys.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <openssl/params.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#define KEYS_DIR "keys"
#define CURRENT_FILE "current"
#define CRED_FILE "credential.key"
#define SIGNING_PREFIX "signing-"
#define SIGNING_SUFFIX ".pem"
#define PEM_MAX (64 * 1024)

struct keyring {
        int refs;
        size_t n;
        struct keyring_key keys[KEYS_MAX_OWN + KEYS_MAX_EXTERNAL + 1];
        const struct keyring_key *signer;
        unsigned char *hs256;
        size_t hs256_size; /* allocated bytes */
        struct keys_hmac *hs256_hmac;
        unsigned char cred_key[KEYS_CRED_KEY_LEN];
        struct keys_hmac *cred_hmac;
};

/* ---- prepared HMAC contexts ----
 *
 * One EVP_MAC context per key, initialised once with the key and the
 * digest; each MAC works on a duplicate, so the shared one is only ever
 * read (many threads MAC at once). */

struct keys_hmac {
        EVP_MAC_CTX *ctx; /* initialised with the key; only ever duplicated */
};

/* EVP_MAC_CTX_free wipes the key and the key-derived digest states. */
static void hmac_free(struct keys_hmac *h)
{
        if (h) {
                EVP_MAC_CTX_free(h->ctx);
                free(h);
        }
}

static int hmac_prepare(const unsigned char *key, size_t len, struct keys_hmac **ret)
{
        struct keys_hmac *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        h->ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
        EVP_MAC_free(mac); /* the context keeps its own reference */
        OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", (char *)"SHA256", 0),
                               OSSL_PARAM_construct_end()};
        if (!h->ctx || EVP_MAC_init(h->ctx, key, len, params) != 1) {
                hmac_free(h);
                ERR_clear_error();
                return -EIO;
        }
        *ret = h;
        return 0;
}

int keys_hmac(const struct keys_hmac *h, const void *data, size_t len,
              unsigned char out[KEYS_HMAC_LEN])
{
        if (!h)
                return -EIO;
        EVP_MAC_CTX *c = EVP_MAC_CTX_dup(h->ctx);
        size_t n = 0;
        bool ok = c && EVP_MAC_update(c, data, len) == 1 &&
                  EVP_MAC_final(c, out, &n, KEYS_HMAC_LEN) == 1 && n == KEYS_HMAC_LEN;
        EVP_MAC_CTX_free(c);
        if (!ok) {
                OPENSSL_cleanse(out, KEYS_HMAC_LEN);
                ERR_clear_error();
                return -EIO;
        }
        return 0;
}

/* ---- small file helpers ---- */

static void secret_free(unsigned char *p, size_t len)
{
        if (p) {
                OPENSSL_cleanse(p, len);
                free(p);
        }
}

/* Read a whole regular file of at most `max` bytes (NUL terminated copy).
 * `private` files must belong to us; looser modes than 0600 are tightened,
 * since a key readable by others would let them mint tokens. */
static int read_file_at(int dfd, const char *name, int flags, size_t max, bool private,
                        unsigned char **ret, size_t *ret_len, struct sbx_error *err)
{
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | flags);
        if (fd < 0)
                return sbx_error_set(err, errno, "open `%s`", name);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return sbx_error_set(err, errno, "stat `%s`", name);
        if (!S_ISREG(st.st_mode))
                return sbx_error_set(err, EINVAL, "`%s` is not a regular file", name);
        if (private && st.st_uid != geteuid())
                return sbx_error_set(err, EPERM, "`%s` is not owned by us", name);
        if (private && (st.st_mode & 077) && fchmod(fd, 0600) < 0)
                return sbx_error_set(err, errno, "chmod `%s`", name);
        if (st.st_size < 0 || (uint64_t)st.st_size > max)
                return sbx_error_set(err, EFBIG, "`%s` is larger than %zu bytes", name, max);
        size_t len = (size_t)st.st_size;
        unsigned char *data = malloc(len + 1);
        if (!data)
                return sbx_error_set(err, ENOMEM, "read `%s`", name);
        int r = read_all(fd, data, len);
        if (r < 0) {
                secret_free(data, len + 1);
                return sbx_error_set(err, r == -EPIPE ? EIO : -r, "read `%s`", name);
        }
        data[len] = '\0';
        *ret = data;
        *ret_len = len;
        return 0;
}

/* Write `name` in dfd atomically: a 0600 temporary file created with
 * O_EXCL|O_NOFOLLOW (a planted symlink cannot redirect the write), synced,
 * then renamed over the old one. */
static int write_file_atomic(int dfd, const char *name, const void *data, size_t len,
                             struct sbx_error *err)
{
        unsigned char rnd[8];
        char tmp[128];
        if (RAND_bytes(rnd, sizeof(rnd)) != 1)
                return sbx_error_set(err, EIO, "random bytes for a temporary name");
        snprintf(tmp, sizeof(tmp), ".tmp-%s-%02x%02x%02x%02x%02x%02x%02x%02x", name, rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);

        _cleanup_close_ int fd =
            openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return sbx_error_set(err, errno, "create `%s`", tmp);
        int r = write_all(fd, data, len);
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dfd, tmp, 0);
                return sbx_error_set(err, -r, "write `%s`", name);
        }
        fsync(dfd);
        return 0;
}

/* ---- the keys directory ---- */

bool keys_kid_is_valid(const char *kid)
{
        if (!kid)
                return false;
        size_t i;
        for (i = 0; kid[i]; i++) {
                char c = kid[i];
                if (i >= KEYS_KID_LEN || !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                        return false;
        }
        return i == KEYS_KID_LEN;
}

/* Parse "signing-<kid>.pem"; 0 with the kid, or -EINVAL for other names. */
static int signing_name_kid(const char *name, char ret_kid[KEYS_KID_LEN + 1])
{
        size_t plen = strlen(SIGNING_PREFIX), slen = strlen(SIGNING_SUFFIX);
        if (strlen(name) != plen + KEYS_KID_LEN + slen || strncmp(name, SIGNING_PREFIX, plen) ||
            strcmp(name + plen + KEYS_KID_LEN, SIGNING_SUFFIX))
                return -EINVAL;
        char kid[KEYS_KID_LEN + 1];
        memcpy(kid, name + plen, KEYS_KID_LEN);
        kid[KEYS_KID_LEN] = '\0';
        if (!keys_kid_is_valid(kid))
                return -EINVAL;
        memcpy(ret_kid, kid, sizeof(kid));
        return 0;
}

static void signing_name(const char *kid, char out[64])
{
        snprintf(out, 64, SIGNING_PREFIX "%s" SIGNING_SUFFIX, kid);
}

/* Open <state>/keys, locked (LOCK_EX or LOCK_SH) for the caller's lifetime
 * of the fd. With `create`, missing directories are made. The directory
 * must be ours and is kept 0700; a symlink in its place is refused. */
static int keys_dir_open(const char *state_dir, bool create, int lock, int *ret_fd,
                         struct sbx_error *err)
{
        if (!state_dir || !*state_dir)
                return sbx_error_set(err, EINVAL, "no state directory");
        if (create) {
                int r = mkdir_p(state_dir, 0755);
                if (r < 0)
                        return sbx_error_set(err, -r, "create `%s`", state_dir);
        }
        _cleanup_close_ int sfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0)
                return sbx_error_set(err, errno, "open `%s`", state_dir);
        if (create && mkdirat(sfd, KEYS_DIR, 0700) < 0 && errno != EEXIST)
                return sbx_error_set(err, errno, "create `%s/" KEYS_DIR "`", state_dir);
        _cleanup_close_ int dfd =
            openat(sfd, KEYS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return sbx_error_set(err, errno, "open `%s/" KEYS_DIR "`", state_dir);
        struct stat st;
        if (fstat(dfd, &st) < 0)
                return sbx_error_set(err, errno, "stat `%s/" KEYS_DIR "`", state_dir);
        if (st.st_uid != geteuid())
                return sbx_error_set(err, EPERM, "`%s/" KEYS_DIR "` is not owned by us", state_dir);
        if ((st.st_mode & 077) && fchmod(dfd, 0700) < 0)
                return sbx_error_set(err, errno, "chmod `%s/" KEYS_DIR "`", state_dir);
        while (flock(dfd, lock) < 0) {
                if (errno != EINTR)
                        return sbx_error_set(err, errno, "lock `%s/" KEYS_DIR "`", state_dir);
        }
        *ret_fd = TAKE_FD(dfd);
        return 0;
}

static int kid_of_pkey(EVP_PKEY *pkey, char ret_kid[KEYS_KID_LEN + 1])
{
        unsigned char *der = NULL;
        int len = i2d_PUBKEY(pkey, &der);
        if (len <= 0)
                return -EINVAL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        int ok = EVP_Digest(der, (size_t)len, md, &mdlen, EVP_sha256(), NULL);
        OPENSSL_free(der);
        if (ok != 1 || mdlen < KEYS_KID_LEN / 2)
                return -EIO;
        for (size_t i = 0; i < KEYS_KID_LEN / 2; i++)
                snprintf(ret_kid + 2 * i, 3, "%02x", md[i]);
        return 0;
}

/* Never prompt on a terminal for a pass phrase: keys are not encrypted. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
        return -1;
}

static int read_current(int dfd, char ret_kid[KEYS_KID_LEN + 1], struct sbx_error *err)
{
        unsigned char *data = NULL;
        size_t len = 0;
        int r = read_file_at(dfd, CURRENT_FILE, O_NOFOLLOW, 256, true, &data, &len, err);
        if (r < 0)
                return r;
        while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
                data[--len] = '\0';
        bool ok = keys_kid_is_valid((char *)data);
        if (ok)
                memcpy(ret_kid, data, KEYS_KID_LEN + 1);
        free(data);
        if (!ok)
                return sbx_error_set(err, EINVAL,
                                     "`" KEYS_DIR "/" CURRENT_FILE "` holds no key id");
        return 0;
}

/* Create a new Ed25519 key and make it current. dfd is locked LOCK_EX. */
static int signing_key_create(int dfd, char ret_kid[KEYS_KID_LEN + 1], struct sbx_error *err)
{
        EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        if (!pkey)
                return sbx_error_set(err, EIO, "generate an Ed25519 key");
        char kid[KEYS_KID_LEN + 1], name[64];
        int r = kid_of_pkey(pkey, kid);
        if (r < 0) {
                EVP_PKEY_free(pkey);
                return sbx_error_set(err, -r, "derive a key id");
        }
        /* Secure-heap BIO: the PEM text is wiped when freed. */
        BIO *bio = BIO_new(BIO_s_secmem());
        if (!bio || PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL) != 1) {
                BIO_free(bio);
                EVP_PKEY_free(pkey);
                return sbx_error_set(err, EIO, "encode the signing key");
        }
        EVP_PKEY_free(pkey);
        char *pem = NULL;
        long pem_len = BIO_get_mem_data(bio, &pem);
        signing_name(kid, name);
        r = write_file_atomic(dfd, name, pem, pem_len > 0 ? (size_t)pem_len : 0, err);
        BIO_free(bio);
        if (r < 0)
                return r;
        char line[KEYS_KID_LEN + 2];
        snprintf(line, sizeof(line), "%s\n", kid);
        r = write_file_atomic(dfd, CURRENT_FILE, line, strlen(line), err);
        if (r < 0)
                return r;
        memcpy(ret_kid, kid, sizeof(kid));
        return 0;
}

/* Load one signing key file and check that its name is its key id. */
static int signing_key_load(int dfd, const char *name, const char *kid, EVP_PKEY **ret,
                            struct sbx_error *err)
{
        unsigned char *pem = NULL;
        size_t len = 0;
        int r = read_file_at(dfd, name, O_NOFOLLOW, PEM_MAX, true, &pem, &len, err);
        if (r < 0)
                return r;
        BIO *bio = BIO_new_mem_buf(pem, (int)len);
        EVP_PKEY *pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
        BIO_free(bio);
        secret_free(pem, len + 1);
        if (!pkey)
                return sbx_error_set(err, EINVAL, "`%s` holds no private key", name);
        char actual[KEYS_KID_LEN + 1];
        if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519 || kid_of_pkey(pkey, actual) < 0 ||
            strcmp(actual, kid) != 0) {
                EVP_PKEY_free(pkey);
                return sbx_error_set(err, EINVAL, "`%s` is not the Ed25519 key it names", name);
        }
        *ret = pkey;
        return 0;
}

static int keyring_add(struct keyring *kr, enum key_alg alg, bool own, const char *kid,
                       EVP_PKEY *pkey, struct sbx_error *err)
{
        if (kr->n >= ARRAY_SIZE(kr->keys)) {
                EVP_PKEY_free(pkey);
                return sbx_error_set(err, E2BIG, "too many keys");
        }
        struct keyring_key *k = &kr->keys[kr->n++];
        k->alg = alg;
        k->own = own;
        snprintf(k->kid, sizeof(k->kid), "%s", kid ? kid : "");
        k->pkey = pkey;
        return 0;
}

/* Every signing-<kid>.pem in the directory, into kr. */
static int own_keys_load(int dfd, struct keyring *kr, struct sbx_error *err)
{
        int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup_fd < 0)
                return sbx_error_set(err, errno, "open `" KEYS_DIR "`");
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return sbx_error_set(err, errno, "list `" KEYS_DIR "`");
        }
        int r = 0;
        size_t own = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d))) {
                char kid[KEYS_KID_LEN + 1];
                if (signing_name_kid(de->d_name, kid) < 0)
                        continue;
                if (++own > KEYS_MAX_OWN) {
                        r = sbx_error_set(err, E2BIG, "more than %d signing keys", KEYS_MAX_OWN);
                        break;
                }
                EVP_PKEY *pkey = NULL;
                r = signing_key_load(dfd, de->d_name, kid, &pkey, err);
                if (r == 0)
                        r = keyring_add(kr, KEY_ALG_EDDSA, true, kid, pkey, err);
        }
        closedir(d);
        return r;
}

static int cred_key_load(int dfd, unsigned char out[KEYS_CRED_KEY_LEN], struct sbx_error *err)
{
        unsigned char *data = NULL;
        size_t len = 0;
        int r = read_file_at(dfd, CRED_FILE, O_NOFOLLOW, KEYS_CRED_KEY_LEN, true, &data, &len, err);
        if (r == -ENOENT) {
                unsigned char fresh[KEYS_CRED_KEY_LEN];
                if (RAND_priv_bytes(fresh, sizeof(fresh)) != 1)
                        return sbx_error_set(err, EIO, "random bytes for `" CRED_FILE "`");
                r = write_file_atomic(dfd, CRED_FILE, fresh, sizeof(fresh), err);
                if (r == 0)
                        memcpy(out, fresh, sizeof(fresh));
                OPENSSL_cleanse(fresh, sizeof(fresh));
                return r;
        }
        if (r < 0)
                return r;
        if (len != KEYS_CRED_KEY_LEN) {
                secret_free(data, len + 1);
                return sbx_error_set(err, EINVAL, "`" CRED_FILE "` is not %d bytes",
                                     KEYS_CRED_KEY_LEN);
        }
        memcpy(out, data, KEYS_CRED_KEY_LEN);
        secret_free(data, len + 1);
        return 0;
}

/* Own keys: read `current` (creating a first key when there is none), then
 * every signing key; the current one must be among them. */
static int local_issuer_load(int dfd, struct keyring *kr, struct sbx_error *err)
{
        char kid[KEYS_KID_LEN + 1];
        int r = read_current(dfd, kid, err);
        if (r == -ENOENT)
                r = signing_key_create(dfd, kid, err);
        if (r < 0)
                return r;
        r = own_keys_load(dfd, kr, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < kr->n; i++)
                if (kr->keys[i].own && !strcmp(kr->keys[i].kid, kid))
                        kr->signer = &kr->keys[i];
        if (!kr->signer)
                return sbx_error_set(err, ENOENT, "current signing key %s is missing", kid);
        return 0;
}

/* ---- external issuers ---- */

static int hs256_load(const char *path, struct keyring *kr, struct sbx_error *err)
{
        unsigned char *data = NULL;
        size_t len = 0;
        int r = read_file_at(AT_FDCWD, path, 0, KEYS_HS256_MAX_LEN + 2, false, &data, &len, err);
        if (r < 0)
                return sbx_error_wrap(err, "HS256 secret");
        size_t size = len + 1;
        if (len > 0 && data[len - 1] == '\n') {
                len--;
                if (len > 0 && data[len - 1] == '\r')
                        len--;
        }
        if (len < KEYS_HS256_MIN_LEN || len > KEYS_HS256_MAX_LEN) {
                secret_free(data, size);
                return sbx_error_set(err, EINVAL, "HS256 secret `%s` must be %d to %d bytes", path,
                                     KEYS_HS256_MIN_LEN, KEYS_HS256_MAX_LEN);
        }
        kr->hs256 = data;
        kr->hs256_size = size;
        r = keyring_add(kr, KEY_ALG_HS256, false, "", NULL, err);
        if (r < 0)
                return r;
        r = hmac_prepare(kr->hs256, len, &kr->hs256_hmac);
        if (r < 0)
                return sbx_error_set(err, -r, "HS256 secret: HMAC context");
        kr->keys[kr->n - 1].secret = kr->hs256;
        kr->keys[kr->n - 1].secret_len = len;
        kr->keys[kr->n - 1].hmac = kr->hs256_hmac;
        return 0;
}

static int pubkey_alg(EVP_PKEY *pkey, enum key_alg *ret)
{
        if (EVP_PKEY_get_id(pkey) == EVP_PKEY_ED25519) {
                *ret = KEY_ALG_EDDSA;
                return 0;
        }
        if (EVP_PKEY_get_id(pkey) == EVP_PKEY_EC) {
                char group[64];
                size_t glen = 0;
                if (EVP_PKEY_get_group_name(pkey, group, sizeof(group), &glen) == 1 &&
                    OBJ_txt2nid(group) == NID_X9_62_prime256v1) {
                        *ret = KEY_ALG_ES256;
                        return 0;
                }
        }
        return -EINVAL;
}

static int pubkey_load(const char *path, struct keyring *kr, struct sbx_error *err)
{
        unsigned char *pem = NULL;
        size_t len = 0;
        int r = read_file_at(AT_FDCWD, path, 0, PEM_MAX, false, &pem, &len, err);
        if (r < 0)
                return sbx_error_wrap(err, "public key");
        BIO *bio = BIO_new_mem_buf(pem, (int)len);
        EVP_PKEY *pkey = bio ? PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL) : NULL;
        BIO_free(bio);
        free(pem);
        if (!pkey)
                return sbx_error_set(err, EINVAL, "`%s` holds no PEM public key", path);
        enum key_alg alg;
        char kid[KEYS_KID_LEN + 1];
        if (pubkey_alg(pkey, &alg) < 0) {
                EVP_PKEY_free(pkey);
                return sbx_error_set(err, EINVAL, "`%s`: only P-256 and Ed25519 keys are supported",
                                     path);
        }
        if (kid_of_pkey(pkey, kid) < 0) {
                EVP_PKEY_free(pkey);
                return sbx_error_set(err, EINVAL, "`%s`: cannot encode the key", path);
        }
        return keyring_add(kr, alg, false, kid, pkey, err);
}

static int external_load(const struct keys_external_config *ext, struct keyring *kr,
                         struct sbx_error *err)
{
        if (!ext)
                return 0;
        if (ext->hs256_secret_file) {
                int r = hs256_load(ext->hs256_secret_file, kr, err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; ext->public_key_files && ext->public_key_files[i]; i++) {
                if (i >= KEYS_MAX_EXTERNAL)
                        return sbx_error_set(err, E2BIG, "more than %d public key files",
                                             KEYS_MAX_EXTERNAL);
                int r = pubkey_load(ext->public_key_files[i], kr, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- public API ---- */

int keys_load(const char *state_dir, const struct keys_external_config *ext, struct keyring **ret,
              struct sbx_error *err)
{
        struct keyring *kr = calloc(1, sizeof(*kr));
        if (!kr)
                return sbx_error_set(err, ENOMEM, "keyring");
        kr->refs = 1;
        _cleanup_close_ int dfd = -1;
        int r = keys_dir_open(state_dir, true, LOCK_EX, &dfd, err);
        if (r == 0)
                r = cred_key_load(dfd, kr->cred_key, err);
        if (r == 0) {
                r = hmac_prepare(kr->cred_key, sizeof(kr->cred_key), &kr->cred_hmac);
                if (r < 0)
                        r = sbx_error_set(err, -r, "`" CRED_FILE "`: HMAC context");
        }
        if (r == 0 && !(ext && ext->disable_local_issuer))
                r = local_issuer_load(dfd, kr, err);
        if (r == 0)
                r = external_load(ext, kr, err);
        if (r < 0) {
                ERR_clear_error();
                keyring_free(kr);
                return r;
        }
        *ret = kr;
        return 0;
}

struct keyring *keyring_ref(struct keyring *kr)
{
        if (kr)
                __atomic_add_fetch(&kr->refs, 1, __ATOMIC_RELAXED);
        return kr;
}

void keyring_free(struct keyring *kr)
{
        if (!kr || __atomic_sub_fetch(&kr->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        for (size_t i = 0; i < kr->n; i++)
                EVP_PKEY_free(kr->keys[i].pkey);
        secret_free(kr->hs256, kr->hs256_size);
        hmac_free(kr->hs256_hmac);
        hmac_free(kr->cred_hmac);
        OPENSSL_cleanse(kr, sizeof(*kr));
        free(kr);
}

size_t keyring_count(const struct keyring *kr)
{
        return kr ? kr->n : 0;
}

const struct keyring_key *keyring_get(const struct keyring *kr, size_t i)
{
        return kr && i < kr->n ? &kr->keys[i] : NULL;
}

const struct keyring_key *keyring_signer(const struct keyring *kr)
{
        return kr ? kr->signer : NULL;
}

const unsigned char *keyring_cred_key(const struct keyring *kr)
{
        return kr->cred_key;
}

const struct keys_hmac *keyring_cred_hmac(const struct keyring *kr)
{
        return kr ? kr->cred_hmac : NULL;
}

bool keyring_has_alg(const struct keyring *kr, enum key_alg alg)
{
        for (size_t i = 0; kr && i < kr->n; i++)
                if (kr->keys[i].alg == alg)
                        return true;
        return false;
}

int keys_rotate(const char *state_dir, char ret_kid[KEYS_KID_LEN + 1], struct sbx_error *err)
{
        _cleanup_close_ int dfd = -1;
        int r = keys_dir_open(state_dir, true, LOCK_EX, &dfd, err);
        if (r < 0)
                return r;
        char kid[KEYS_KID_LEN + 1];
        r = signing_key_create(dfd, kid, err);
        if (r < 0)
                return r;
        if (ret_kid)
                memcpy(ret_kid, kid, sizeof(kid));
        return 0;
}

int keys_remove(const char *state_dir, const char *kid, struct sbx_error *err)
{
        if (!keys_kid_is_valid(kid))
                return sbx_error_set(err, EINVAL, "not a key id");
        _cleanup_close_ int dfd = -1;
        int r = keys_dir_open(state_dir, false, LOCK_EX, &dfd, err);
        if (r < 0)
                return r;
        char current[KEYS_KID_LEN + 1];
        r = read_current(dfd, current, err);
        if (r < 0 && r != -ENOENT)
                return r;
        if (r == 0 && !strcmp(current, kid))
                return sbx_error_set(err, EBUSY, "key %s is the current signing key", kid);
        char name[64];
        signing_name(kid, name);
        if (unlinkat(dfd, name, 0) < 0)
                return sbx_error_set(err, errno, "remove key %s", kid);
        fsync(dfd);
        return 0;
}

static int keys_info_cmp(const void *a, const void *b)
{
        const struct keys_info *x = a, *y = b;
        if (x->created_ms != y->created_ms)
                return x->created_ms < y->created_ms ? -1 : 1;
        return strcmp(x->kid, y->kid);
}

int keys_list(const char *state_dir, struct keys_info **ret, size_t *ret_n, struct sbx_error *err)
{
        _cleanup_close_ int dfd = -1;
        struct sbx_error local = {0};
        int r = keys_dir_open(state_dir, false, LOCK_SH, &dfd, &local);
        if (r == -ENOENT) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (r < 0) {
                if (err)
                        *err = local;
                return r;
        }
        char current[KEYS_KID_LEN + 1] = "";
        r = read_current(dfd, current, err);
        if (r < 0 && r != -ENOENT)
                return r;

        int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        if (!d) {
                r = -errno;
                if (dup_fd >= 0)
                        close(dup_fd);
                return sbx_error_set(err, -r, "list `" KEYS_DIR "`");
        }
        struct keys_info *list = calloc(KEYS_MAX_OWN, sizeof(*list));
        size_t n = 0;
        struct dirent *de;
        while (list && (de = readdir(d)) && n < KEYS_MAX_OWN) {
                struct stat st;
                if (signing_name_kid(de->d_name, list[n].kid) < 0 ||
                    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                list[n].current = !strcmp(list[n].kid, current);
                list[n].created_ms =
                    (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
                n++;
        }
        closedir(d);
        if (!list)
                return sbx_error_set(err, ENOMEM, "list keys");
        qsort(list, n, sizeof(*list), keys_info_cmp);
        *ret = list;
        *ret_n = n;
        return 0;
}
