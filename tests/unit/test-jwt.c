/* SPDX-License-Identifier: MIT */
/* Unit tests of identity tokens (jwt.c), key files (keys.c) and data-plane
 * credentials (cred.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "src/api/cred.h"
#include "src/api/jwt.h"
#include "src/api/keys.h"

#define ISS "http://127.0.0.1:7070"
#define NOW 1900000000LL

struct fixture {
        char dir[256]; /* temp dir: state in <dir>/state, extra files beside */
        char state[300];
        struct keyring *kr;
};

static int fixture_setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));
        const char *tmp = getenv("TMPDIR");
        snprintf(f->dir, sizeof(f->dir), "%s/sbx-test-jwt-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(f->dir))
                return -1;
        snprintf(f->state, sizeof(f->state), "%s/state", f->dir);
        struct sbx_error err = {0};
        if (keys_load(f->state, NULL, &f->kr, &err) < 0) {
                fprintf(stderr, "keys_load: %s\n", err.msg);
                return -1;
        }
        *state = f;
        return 0;
}

static int fixture_teardown(void **state)
{
        struct fixture *f = *state;
        keyring_free(f->kr);
        rm_rf_at(AT_FDCWD, f->dir);
        free(f);
        return 0;
}

static void reload(struct fixture *f, const struct keys_external_config *ext)
{
        struct sbx_error err = {0};
        keyring_free(f->kr);
        f->kr = NULL;
        int r = keys_load(f->state, ext, &f->kr, &err);
        if (r < 0)
                fprintf(stderr, "keys_load: %s\n", err.msg);
        assert_int_equal(r, 0);
}

static void write_file(const char *path, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, data, len), 0);
        close(fd);
}

static void path_in(const struct fixture *f, const char *name, char out[512])
{
        snprintf(out, 512, "%s/%s", f->dir, name);
}

static struct jwt_claims good_claims(void)
{
        struct jwt_claims c = {0};
        snprintf(c.iss, sizeof(c.iss), "%s", ISS);
        snprintf(c.sub, sizeof(c.sub), "dep-1");
        snprintf(c.acct, sizeof(c.acct), "acct_7");
        c.iat = NOW - 10;
        c.exp = NOW + 3600;
        return c;
}

static struct jwt_policy policy(void)
{
        struct jwt_policy p;
        jwt_policy_init(&p, ISS);
        p.now_s = NOW;
        return p;
}

static int verify(const struct fixture *f, const char *token)
{
        struct jwt_policy p = policy();
        struct jwt_claims c;
        struct sbx_error err = {0};
        return jwt_verify(f->kr, &p, token, &c, &err);
}

/* noinline: once inlined, gcc 12 cannot tell that jwt_sign does not store
 * &tok into tok and warns of a dangling pointer at every caller. */
__attribute__((noinline)) static char *sign_ok(const struct fixture *f, const struct jwt_claims *c)
{
        char *tok = NULL;
        struct sbx_error err = {0};
        assert_int_equal(jwt_sign(f->kr, c, &tok, &err), 0);
        return tok;
}

/* ---- building arbitrary tokens, signed by test code ---- */

enum test_alg { T_EDDSA, T_ES256, T_HS256, T_NOSIG };

struct signer {
        enum test_alg alg;
        EVP_PKEY *pkey;
        const unsigned char *secret;
        size_t secret_len;
};

static size_t test_sign(const struct signer *s, const char *data, unsigned char sig[128])
{
        size_t len = strlen(data);
        if (s->alg == T_HS256) {
                unsigned int n = 0;
                assert_non_null(HMAC(EVP_sha256(), s->secret, (int)s->secret_len,
                                     (const unsigned char *)data, len, sig, &n));
                return n;
        }
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned char der[128];
        size_t n = sizeof(der);
        const EVP_MD *md = s->alg == T_ES256 ? EVP_sha256() : NULL;
        assert_int_equal(EVP_DigestSignInit(ctx, NULL, md, NULL, s->pkey), 1);
        assert_int_equal(EVP_DigestSign(ctx, der, &n, (const unsigned char *)data, len), 1);
        EVP_MD_CTX_free(ctx);
        if (s->alg == T_EDDSA) {
                memcpy(sig, der, n);
                return n;
        }
        /* DER ECDSA -> JOSE r||s */
        const unsigned char *p = der;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)n);
        assert_non_null(es);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, 32), 32);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + 32, 32), 32);
        ECDSA_SIG_free(es);
        return 64;
}

static char *make_token(const char *header, const char *payload, const struct signer *s)
{
        char *h = NULL, *p = NULL, *sig64 = NULL;
        assert_int_equal(b64url_encode(header, strlen(header), &h), 0);
        assert_int_equal(b64url_encode(payload, strlen(payload), &p), 0);
        size_t cap = strlen(h) + strlen(p) + 200;
        char *out = malloc(cap);
        assert_non_null(out);
        snprintf(out, cap, "%s.%s", h, p);
        if (s && s->alg != T_NOSIG) {
                unsigned char sig[128];
                size_t n = test_sign(s, out, sig);
                assert_int_equal(b64url_encode(sig, n, &sig64), 0);
                strcat(out, ".");
                strcat(out, sig64);
        }
        free(h);
        free(p);
        free(sig64);
        return out;
}

static char *payload_json(const char *iss, int64_t iat, int64_t exp)
{
        char *s = NULL;
        assert_true(asprintf(&s,
                             "{\"iss\":\"%s\",\"sub\":\"dep-1\",\"acct\":\"acct_7\","
                             "\"iat\":%lld,\"exp\":%lld}",
                             iss, (long long)iat, (long long)exp) > 0);
        return s;
}

static struct signer own_signer(const struct fixture *f)
{
        struct signer s = {.alg = T_EDDSA, .pkey = keyring_signer(f->kr)->pkey};
        return s;
}

static char *own_header(const struct fixture *f)
{
        char *s = NULL;
        assert_true(asprintf(&s, "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
                             keyring_signer(f->kr)->kid) > 0);
        return s;
}

static void write_pubkey(EVP_PKEY *pkey, const char *path)
{
        BIO *bio = BIO_new(BIO_s_mem());
        assert_int_equal(PEM_write_bio_PUBKEY(bio, pkey), 1);
        char *data = NULL;
        long n = BIO_get_mem_data(bio, &data);
        write_file(path, data, (size_t)n);
        BIO_free(bio);
}

/* ---- identity tokens ---- */

static void test_round_trip(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims(), out;
        c.nbf = NOW - 5;
        char *tok = sign_ok(f, &c);
        struct jwt_policy p = policy();
        struct sbx_error err = {0};
        assert_int_equal(jwt_verify(f->kr, &p, tok, &out, &err), 0);
        assert_string_equal(out.iss, ISS);
        assert_string_equal(out.sub, "dep-1");
        assert_string_equal(out.acct, "acct_7");
        assert_int_equal(out.exp, c.exp);
        assert_int_equal(out.iat, c.iat);
        assert_int_equal(out.nbf, c.nbf);

        /* The header is exactly what the contract names. */
        const char *dot = strchr(tok, '.');
        unsigned char *hdr = NULL;
        size_t hlen = 0;
        assert_int_equal(b64url_decode(tok, (size_t)(dot - tok), &hdr, &hlen), 0);
        char expect[128];
        snprintf(expect, sizeof(expect), "{\"alg\":\"EdDSA\",\"typ\":\"JWT\",\"kid\":\"%s\"}",
                 keyring_signer(f->kr)->kid);
        assert_string_equal((char *)hdr, expect);
        assert_true(keys_kid_is_valid(keyring_signer(f->kr)->kid));
        free(hdr);
        free(tok);
}

static void test_sign_bad_claims(void **state)
{
        struct fixture *f = *state;
        struct sbx_error err = {0};
        char *tok = NULL;
        struct jwt_claims c = good_claims();
        snprintf(c.sub, sizeof(c.sub), "../x");
        assert_int_equal(jwt_sign(f->kr, &c, &tok, &err), -EINVAL);
        c = good_claims();
        c.acct[0] = '\0';
        assert_int_equal(jwt_sign(f->kr, &c, &tok, &err), -EINVAL);
        c = good_claims();
        c.exp = c.iat;
        assert_int_equal(jwt_sign(f->kr, &c, &tok, &err), -EINVAL);
        c = good_claims();
        c.iss[0] = '\0';
        assert_int_equal(jwt_sign(f->kr, &c, &tok, &err), -EINVAL);
        assert_null(tok);
}

static void test_expired(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims();
        c.iat = NOW - 7200;
        c.exp = NOW - 61;
        char *tok = sign_ok(f, &c);
        struct jwt_policy p = policy();
        struct sbx_error err = {0};
        assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, &err), -EACCES);
        assert_non_null(strstr(err.msg, "expired"));
        free(tok);

        c.exp = NOW - 30; /* inside the default leeway */
        tok = sign_ok(f, &c);
        assert_int_equal(verify(f, tok), 0);
        p.leeway_s = 0;
        assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, &err), -EACCES);
        free(tok);

        c.exp = NOW; /* exp is the first second it is invalid */
        tok = sign_ok(f, &c);
        assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, &err), -EACCES);
        free(tok);
}

static void test_nbf_future(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims();
        c.nbf = NOW + 120;
        char *tok = sign_ok(f, &c);
        struct jwt_policy p = policy();
        struct sbx_error err = {0};
        assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, &err), -EACCES);
        assert_non_null(strstr(err.msg, "nbf"));
        free(tok);
        c.nbf = NOW + 30;
        tok = sign_ok(f, &c);
        assert_int_equal(verify(f, tok), 0);
        free(tok);
}

static void test_iat_future(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims();
        c.iat = NOW + 120;
        char *tok = sign_ok(f, &c);
        struct jwt_policy p = policy();
        struct sbx_error err = {0};
        assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, &err), -EACCES);
        assert_non_null(strstr(err.msg, "iat"));
        free(tok);
}

static void test_wrong_iss(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims();
        char *tok = sign_ok(f, &c);
        static const char *const others[] = {"http://127.0.0.1:7070/", "http://127.0.0.1:7071",
                                             "HTTP://127.0.0.1:7070", "http://127.0.0.1:707"};
        for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
                struct jwt_policy p = policy();
                p.issuer = others[i];
                struct sbx_error err = {0};
                assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, &err), -EACCES);
                assert_non_null(strstr(err.msg, "issuer"));
        }
        /* A policy without an issuer is a programming error, not a pass. */
        struct jwt_policy p = policy();
        p.issuer = NULL;
        assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, NULL), -EINVAL);
        free(tok);
}

static void test_alg_none(void **state)
{
        struct fixture *f = *state;
        char *pl = payload_json(ISS, NOW, NOW + 600);
        static const char *const headers[] = {
            "{\"alg\":\"none\",\"typ\":\"JWT\"}",
            "{\"alg\":\"None\",\"typ\":\"JWT\"}",
            "{\"alg\":\"NONE\"}",
            "{\"typ\":\"JWT\"}",
            "{\"alg\":null}",
        };
        struct signer nosig = {.alg = T_NOSIG}, own = own_signer(f);
        for (size_t i = 0; i < ARRAY_SIZE(headers); i++) {
                char *t = make_token(headers[i], pl, &nosig);
                assert_int_equal(verify(f, t), -EACCES); /* "h.p" */
                char *t2 = malloc(strlen(t) + 2);
                sprintf(t2, "%s.", t);
                assert_int_equal(verify(f, t2), -EACCES); /* "h.p." */
                free(t2);
                free(t);
                t = make_token(headers[i], pl, &own); /* even with a real signature */
                assert_int_equal(verify(f, t), -EACCES);
                free(t);
        }
        free(pl);
}

/* The classic confusion: the attacker takes the server's public key and
 * uses it as an HMAC secret. */
static void test_hs256_with_public_key_refused(void **state)
{
        struct fixture *f = *state;
        EVP_PKEY *pub = keyring_signer(f->kr)->pkey;
        unsigned char raw[32];
        size_t raw_len = sizeof(raw);
        assert_int_equal(EVP_PKEY_get_raw_public_key(pub, raw, &raw_len), 1);
        BIO *bio = BIO_new(BIO_s_mem());
        assert_int_equal(PEM_write_bio_PUBKEY(bio, pub), 1);
        char *pem = NULL;
        long pem_len = BIO_get_mem_data(bio, &pem);
        unsigned char *der = NULL;
        int der_len = i2d_PUBKEY(pub, &der);

        struct {
                const unsigned char *secret;
                size_t len;
        } secrets[] = {
            {raw, raw_len}, {(unsigned char *)pem, (size_t)pem_len}, {der, (size_t)der_len}};
        char *pl = payload_json(ISS, NOW, NOW + 600);
        char hdr_kid[128];
        snprintf(hdr_kid, sizeof(hdr_kid), "{\"alg\":\"HS256\",\"kid\":\"%s\"}",
                 keyring_signer(f->kr)->kid);
        const char *hdrs[] = {"{\"alg\":\"HS256\",\"typ\":\"JWT\"}", hdr_kid};

        char secret_path[512];
        path_in(f, "hs.secret", secret_path);
        write_file(secret_path, "0123456789abcdef0123456789abcdef\n", 33);
        struct keys_external_config with_hs = {.hs256_secret_file = secret_path};

        for (int configured = 0; configured < 2; configured++) {
                reload(f, configured ? &with_hs : NULL);
                for (size_t i = 0; i < ARRAY_SIZE(secrets); i++) {
                        for (size_t h = 0; h < ARRAY_SIZE(hdrs); h++) {
                                struct signer s = {.alg = T_HS256,
                                                   .secret = secrets[i].secret,
                                                   .secret_len = secrets[i].len};
                                char *t = make_token(hdrs[h], pl, &s);
                                assert_int_equal(verify(f, t), -EACCES);
                                free(t);
                        }
                }
        }
        OPENSSL_free(der);
        BIO_free(bio);
        free(pl);
}

static void test_tampered(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims();
        char *tok = sign_ok(f, &c);
        size_t len = strlen(tok);
        /* Any character replaced by another of the alphabet (or a dot
         * replaced) must break the token. */
        for (size_t i = 0; i < len; i++) {
                char saved = tok[i];
                tok[i] = saved == 'A' ? 'B' : 'A';
                assert_int_equal(verify(f, tok), -EACCES);
                tok[i] = saved;
        }
        assert_int_equal(verify(f, tok), 0);

        /* A payload swapped for another deployment with the old signature. */
        char *hdr = own_header(f);
        char *pl = payload_json(ISS, NOW, NOW + 600);
        struct signer own = own_signer(f);
        char *good = make_token(hdr, pl, &own);
        assert_int_equal(verify(f, good), 0);
        char *evil_pl = NULL, *evil_p64 = NULL;
        assert_true(asprintf(&evil_pl,
                             "{\"iss\":\"%s\",\"sub\":\"other\",\"acct\":\"acct_7\","
                             "\"iat\":%lld,\"exp\":%lld}",
                             ISS, NOW, NOW + 600) > 0);
        assert_int_equal(b64url_encode(evil_pl, strlen(evil_pl), &evil_p64), 0);
        const char *d1 = strchr(good, '.'), *d2 = strrchr(good, '.');
        assert_true(d1 && d2 && d1 != d2);
        char *evil = malloc(strlen(good) + strlen(evil_p64) + 1);
        sprintf(evil, "%.*s.%s%s", (int)(d1 - good), good, evil_p64, d2 ? d2 : "");
        assert_int_equal(verify(f, evil), -EACCES);

        /* A flipped bit in the decoded signature. */
        char *sig64 = strrchr(good, '.') + 1;
        unsigned char *sig = NULL;
        size_t sig_len = 0;
        assert_int_equal(b64url_decode(sig64, strlen(sig64), &sig, &sig_len), 0);
        for (size_t i = 0; i < sig_len; i += 7) {
                sig[i] ^= 0x01;
                char *s64 = NULL, *t = NULL;
                assert_int_equal(b64url_encode(sig, sig_len, &s64), 0);
                assert_true(asprintf(&t, "%.*s.%s", (int)(sig64 - 1 - good), good, s64) > 0);
                assert_int_equal(verify(f, t), -EACCES);
                free(s64);
                free(t);
                sig[i] ^= 0x01;
        }
        free(sig);
        free(evil);
        free(evil_pl);
        free(evil_p64);
        free(good);
        free(pl);
        free(hdr);
        free(tok);
}

static void test_wrong_kid(void **state)
{
        struct fixture *f = *state;
        char *pl = payload_json(ISS, NOW, NOW + 600);
        struct signer own = own_signer(f);
        char *t = make_token("{\"alg\":\"EdDSA\",\"kid\":\"0000000000000000\"}", pl, &own);
        assert_int_equal(verify(f, t), -EACCES);
        free(t);
        t = make_token("{\"alg\":\"EdDSA\",\"kid\":12}", pl, &own);
        assert_int_equal(verify(f, t), -EACCES);
        free(t);
        /* No kid: each key of the algorithm is tried. */
        t = make_token("{\"alg\":\"EdDSA\"}", pl, &own);
        assert_int_equal(verify(f, t), 0);
        free(t);

        /* The kid of another own key: only that key is tried. */
        char old_kid[KEYS_KID_LEN + 1];
        snprintf(old_kid, sizeof(old_kid), "%s", keyring_signer(f->kr)->kid);
        struct sbx_error err = {0};
        assert_int_equal(keys_rotate(f->state, NULL, &err), 0);
        reload(f, NULL);
        struct signer fresh = own_signer(f);
        char hdr[128];
        snprintf(hdr, sizeof(hdr), "{\"alg\":\"EdDSA\",\"kid\":\"%s\"}", old_kid);
        t = make_token(hdr, pl, &fresh);
        assert_int_equal(verify(f, t), -EACCES);
        free(t);
        free(pl);
}

static void test_rotation(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims();
        char *old_tok = sign_ok(f, &c);
        char old_kid[KEYS_KID_LEN + 1], new_kid[KEYS_KID_LEN + 1];
        snprintf(old_kid, sizeof(old_kid), "%s", keyring_signer(f->kr)->kid);
        struct sbx_error err = {0};

        assert_int_equal(keys_rotate(f->state, new_kid, &err), 0);
        assert_string_not_equal(old_kid, new_kid);
        reload(f, NULL);
        assert_string_equal(keyring_signer(f->kr)->kid, new_kid);
        char *new_tok = sign_ok(f, &c);
        assert_int_equal(verify(f, old_tok), 0);
        assert_int_equal(verify(f, new_tok), 0);

        struct keys_info *list = NULL;
        size_t n = 0;
        assert_int_equal(keys_list(f->state, &list, &n, &err), 0);
        assert_int_equal(n, 2);
        int currents = 0;
        for (size_t i = 0; i < n; i++) {
                if (list[i].current) {
                        currents++;
                        assert_string_equal(list[i].kid, new_kid);
                }
        }
        assert_int_equal(currents, 1);
        free(list);

        assert_int_equal(keys_remove(f->state, new_kid, &err), -EBUSY);
        assert_int_equal(keys_remove(f->state, "not-a-kid", &err), -EINVAL);
        assert_int_equal(keys_remove(f->state, "../../etc/passwd", &err), -EINVAL);
        assert_int_equal(keys_remove(f->state, "0123456789abcdef", &err), -ENOENT);
        assert_int_equal(keys_remove(f->state, old_kid, &err), 0);
        /* The loaded ring is unchanged until a reload. */
        assert_int_equal(verify(f, old_tok), 0);
        reload(f, NULL);
        assert_int_equal(verify(f, old_tok), -EACCES);
        assert_int_equal(verify(f, new_tok), 0);
        assert_int_equal(keys_list(f->state, &list, &n, &err), 0);
        assert_int_equal(n, 1);
        free(list);
        free(old_tok);
        free(new_tok);
}

static void test_key_files(void **state)
{
        struct fixture *f = *state;
        char path[512];
        struct stat st;
        snprintf(path, sizeof(path), "%s/keys", f->state);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0700);
        snprintf(path, sizeof(path), "%s/keys/credential.key", f->state);
        assert_int_equal(lstat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(st.st_size, 32);
        snprintf(path, sizeof(path), "%s/keys/signing-%s.pem", f->state,
                 keyring_signer(f->kr)->kid);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0600);

        /* A second load reuses the keys. */
        char kid[KEYS_KID_LEN + 1];
        snprintf(kid, sizeof(kid), "%s", keyring_signer(f->kr)->kid);
        reload(f, NULL);
        assert_string_equal(keyring_signer(f->kr)->kid, kid);

        /* A symlink in place of a key file is refused. */
        snprintf(path, sizeof(path), "%s/keys/credential.key", f->state);
        char moved[512];
        path_in(f, "moved.key", moved);
        assert_int_equal(rename(path, moved), 0);
        assert_int_equal(symlink(moved, path), 0);
        struct keyring *kr = NULL;
        struct sbx_error err = {0};
        assert_true(keys_load(f->state, NULL, &kr, &err) < 0);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rename(moved, path), 0);

        /* A key file whose name is not its key id is refused. */
        snprintf(path, sizeof(path), "%s/keys/signing-%s.pem", f->state, kid);
        char other[512];
        snprintf(other, sizeof(other), "%s/keys/signing-0123456789abcdef.pem", f->state);
        assert_int_equal(link(path, other), 0);
        assert_true(keys_load(f->state, NULL, &kr, &err) < 0);
        assert_int_equal(unlink(other), 0);
}

static void test_es256_external(void **state)
{
        struct fixture *f = *state;
        EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        EVP_PKEY *ec_other = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        assert_non_null(ec);
        char pub[512];
        path_in(f, "issuer-es256.pem", pub);
        write_pubkey(ec, pub);

        char *pl = payload_json(ISS, NOW, NOW + 600);
        struct signer s = {.alg = T_ES256, .pkey = ec}, bad = {.alg = T_ES256, .pkey = ec_other};
        char *t =
            make_token("{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":\"issuer-key-1\"}", pl, &s);
        char *t_nokid = make_token("{\"alg\":\"ES256\"}", pl, &s);
        char *t_bad = make_token("{\"alg\":\"ES256\"}", pl, &bad);

        assert_int_equal(verify(f, t), -EACCES); /* not configured */
        const char *files[] = {pub, NULL};
        struct keys_external_config ext = {.public_key_files = files};
        reload(f, &ext);
        assert_int_equal(verify(f, t), 0);
        assert_int_equal(verify(f, t_nokid), 0);
        assert_int_equal(verify(f, t_bad), -EACCES);
        /* The ES256 key never verifies an EdDSA or HS256 token. */
        struct signer own = own_signer(f);
        char *t_own = make_token("{\"alg\":\"ES256\"}", pl, &own);
        assert_int_equal(verify(f, t_own), -EACCES);
        free(t_own);
        /* A DER signature instead of r||s is refused. */
        char *dot = strrchr(t, '.');
        char *t_der = NULL;
        assert_true(asprintf(&t_der, "%.*s.MEQCIA", (int)(dot - t), t) > 0);
        assert_int_equal(verify(f, t_der), -EACCES);
        free(t_der);

        free(t);
        free(t_nokid);
        free(t_bad);
        free(pl);
        EVP_PKEY_free(ec);
        EVP_PKEY_free(ec_other);
}

static void test_eddsa_external(void **state)
{
        struct fixture *f = *state;
        EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        char pub[512];
        path_in(f, "issuer-ed.pem", pub);
        write_pubkey(ed, pub);
        char *pl = payload_json(ISS, NOW, NOW + 600);
        struct signer s = {.alg = T_EDDSA, .pkey = ed};
        char *t = make_token("{\"alg\":\"EdDSA\",\"kid\":\"their-kid\"}", pl, &s);
        assert_int_equal(verify(f, t), -EACCES);
        const char *files[] = {pub, NULL};
        struct keys_external_config ext = {.public_key_files = files};
        reload(f, &ext);
        assert_int_equal(verify(f, t), 0);

        /* An own key's kid on a token signed by the external key fails:
         * a kid that names one of our keys selects that key alone. */
        char hdr[128];
        snprintf(hdr, sizeof(hdr), "{\"alg\":\"EdDSA\",\"kid\":\"%s\"}",
                 keyring_signer(f->kr)->kid);
        char *t2 = make_token(hdr, pl, &s);
        assert_int_equal(verify(f, t2), -EACCES);

        /* Only the external issuers: own tokens are refused, signing too. */
        struct jwt_claims c = good_claims();
        char *own_tok = sign_ok(f, &c);
        ext.disable_local_issuer = true;
        reload(f, &ext);
        assert_int_equal(verify(f, own_tok), -EACCES);
        assert_int_equal(verify(f, t), 0);
        char *tok = NULL;
        assert_int_equal(jwt_sign(f->kr, &c, &tok, NULL), -ENOKEY);
        free(own_tok);
        free(t2);
        free(t);
        free(pl);
        EVP_PKEY_free(ed);
}

static void test_hs256_external(void **state)
{
        struct fixture *f = *state;
        static const char secret[] = "a shared secret of at least 32 bytes!!";
        char path[512];
        path_in(f, "hs256.secret", path);
        char with_nl[64];
        snprintf(with_nl, sizeof(with_nl), "%s\r\n", secret);
        write_file(path, with_nl, strlen(with_nl));

        char *pl = payload_json(ISS, NOW, NOW + 600);
        struct signer s = {
            .alg = T_HS256, .secret = (const unsigned char *)secret, .secret_len = strlen(secret)};
        char *t = make_token("{\"alg\":\"HS256\",\"typ\":\"JWT\",\"kid\":\"k1\"}", pl, &s);
        assert_int_equal(verify(f, t), -EACCES);
        struct keys_external_config ext = {.hs256_secret_file = path};
        reload(f, &ext);
        assert_int_equal(verify(f, t), 0);
        /* The secret with its newline is a different key. */
        struct signer s_nl = {.alg = T_HS256,
                              .secret = (const unsigned char *)with_nl,
                              .secret_len = strlen(with_nl)};
        char *t2 = make_token("{\"alg\":\"HS256\"}", pl, &s_nl);
        assert_int_equal(verify(f, t2), -EACCES);
        /* HS256-keyed bytes claiming EdDSA. */
        char *t3 = make_token("{\"alg\":\"EdDSA\"}", pl, &s);
        assert_int_equal(verify(f, t3), -EACCES);
        free(t3);
        free(t2);
        free(t);

        /* Too short a secret is a configuration error. */
        write_file(path, "short\n", 6);
        struct keyring *kr = NULL;
        struct sbx_error err = {0};
        assert_int_equal(keys_load(f->state, &ext, &kr, &err), -EINVAL);
        const char *missing[] = {"/nonexistent/key.pem", NULL};
        struct keys_external_config ext2 = {.public_key_files = missing};
        assert_true(keys_load(f->state, &ext2, &kr, &err) < 0);
        /* A file that is no public key. */
        const char *not_pem[] = {path, NULL};
        ext2.public_key_files = not_pem;
        assert_int_equal(keys_load(f->state, &ext2, &kr, &err), -EINVAL);
        /* An RSA key is not supported. */
        EVP_PKEY *rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
        char rsa_path[512];
        path_in(f, "rsa.pem", rsa_path);
        write_pubkey(rsa, rsa_path);
        const char *rsa_files[] = {rsa_path, NULL};
        ext2.public_key_files = rsa_files;
        assert_int_equal(keys_load(f->state, &ext2, &kr, &err), -EINVAL);
        EVP_PKEY_free(rsa);
        free(pl);
}

static void test_malformed(void **state)
{
        struct fixture *f = *state;
        struct jwt_claims c = good_claims();
        char *tok = sign_ok(f, &c);
        struct signer own = own_signer(f);
        char *hdr = own_header(f);

        static const char *const bad[] = {
            "",
            ".",
            "..",
            "...",
            "a",
            "a.b",
            "a.b.c.d",
            "a..c",
            ".b.c",
            "a.b.",
            "e30.e30.",
            "e30.e30.e30",
            "e30=.e30.e30",
            " e30.e30.e30",
            "e30.e30.e30 ",
            "e30.e3+.e30",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(verify(f, bad[i]), -EACCES);
        assert_int_equal(verify(f, NULL), -EACCES);

        /* Padding, whitespace or a trailing character added to a good token. */
        char *t = NULL;
        assert_true(asprintf(&t, "%s=", tok) > 0);
        assert_int_equal(verify(f, t), -EACCES);
        free(t);
        assert_true(asprintf(&t, "%s\n", tok) > 0);
        assert_int_equal(verify(f, t), -EACCES);
        free(t);
        assert_true(asprintf(&t, "%s.", tok) > 0);
        assert_int_equal(verify(f, t), -EACCES);
        free(t);

        /* Over the size cap. */
        char *big = malloc(JWT_MAX_LEN + 2);
        memset(big, 'A', JWT_MAX_LEN + 1);
        big[10] = '.';
        big[20] = '.';
        big[JWT_MAX_LEN + 1] = '\0';
        assert_int_equal(verify(f, big), -EACCES);
        free(big);

        /* Well signed, badly formed JSON. */
        static const char *const payloads[] = {
            "[]",
            "\"x\"",
            "{",
            "{\"iss\":\"" ISS "\",\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\","
            "\"exp\":1900000600}",
            "{\"iss\":\"" ISS "\",\"acct\":\"a\",\"exp\":1900000600}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"exp\":1900000600}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\"}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\",\"exp\":\"1900000600\"}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\",\"exp\":-1}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\",\"exp\":1e300}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\",\"exp\":1900000600,\"nbf\":true}",
            "{\"iss\":\"" ISS "\",\"sub\":\"../d\",\"acct\":\"a\",\"exp\":1900000600}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a/b\",\"exp\":1900000600}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\\u0000x\",\"acct\":\"a\",\"exp\":1900000600}",
            "{\"iss\":\"" ISS "\",\"sub\":7,\"acct\":\"a\",\"exp\":1900000600}",
            "{\"iss\":[\"" ISS "\"],\"sub\":\"d\",\"acct\":\"a\",\"exp\":1900000600}",
            "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\",\"exp\":1900000600} x",
        };
        for (size_t i = 0; i < ARRAY_SIZE(payloads); i++) {
                t = make_token(hdr, payloads[i], &own);
                assert_int_equal(verify(f, t), -EACCES);
                free(t);
        }
        /* The same minimal claims, well formed, pass (the list above is not
         * failing for another reason); fractional dates are accepted. */
        t = make_token(
            hdr, "{\"iss\":\"" ISS "\",\"sub\":\"d\",\"acct\":\"a\",\"exp\":1900000600.5}", &own);
        assert_int_equal(verify(f, t), 0);
        free(t);

        static const char *const headers[] = {
            "[]",
            "{\"alg\":\"EdDSA\",\"alg\":\"EdDSA\"}",
            "{\"alg\":\"EdDSA\",\"crit\":[\"exp\"]}",
            "{\"alg\":\"EdDSA\",\"typ\":5}",
            "{\"alg\":\"RS256\"}",
            "{\"alg\":\"HS512\"}",
            "{\"alg\":\"eddsa\"}",
            "{\"alg\":5}",
        };
        char *pl = payload_json(ISS, NOW, NOW + 600);
        for (size_t i = 0; i < ARRAY_SIZE(headers); i++) {
                t = make_token(headers[i], pl, &own);
                assert_int_equal(verify(f, t), -EACCES);
                free(t);
        }
        /* The error never repeats the token. */
        struct jwt_policy p = policy();
        struct sbx_error err = {0};
        p.issuer = "http://elsewhere";
        assert_int_equal(jwt_verify(f->kr, &p, tok, NULL, &err), -EACCES);
        assert_null(strstr(err.msg, strrchr(tok, '.') + 1));
        assert_null(strstr(err.msg, "eyJ"));
        free(pl);
        free(hdr);
        free(tok);
}

/* The keyring is read-only: many threads verify with one ring at once. */
struct verify_job {
        const struct fixture *f;
        const char *tokens[3];
        const char *cred;
        int failures;
};

static void *verify_thread(void *arg)
{
        struct verify_job *job = arg;
        for (int i = 0; i < 200; i++) {
                for (size_t t = 0; t < ARRAY_SIZE(job->tokens); t++)
                        if (verify(job->f, job->tokens[t]) != 0)
                                job->failures++;
                if (cred_verify(job->f->kr, job->cred, 0, NULL, NULL) != 0)
                        job->failures++;
                if (verify(job->f, "e30.e30.e30") != -EACCES)
                        job->failures++;
        }
        return NULL;
}

static void test_concurrent_verify(void **state)
{
        struct fixture *f = *state;
        EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        char pub[512], secret_path[512];
        path_in(f, "es.pem", pub);
        path_in(f, "hs.secret", secret_path);
        write_pubkey(ec, pub);
        static const char secret[] = "0123456789abcdef0123456789abcdef";
        write_file(secret_path, secret, strlen(secret));
        const char *files[] = {pub, NULL};
        struct keys_external_config ext = {.hs256_secret_file = secret_path,
                                           .public_key_files = files};
        reload(f, &ext);

        struct jwt_claims c = good_claims();
        char *pl = payload_json(ISS, NOW, NOW + 600);
        struct signer es = {.alg = T_ES256, .pkey = ec},
                      hs = {.alg = T_HS256,
                            .secret = (const unsigned char *)secret,
                            .secret_len = strlen(secret)};
        char *t_own = sign_ok(f, &c), *t_es = make_token("{\"alg\":\"ES256\"}", pl, &es),
             *t_hs = make_token("{\"alg\":\"HS256\"}", pl, &hs), *cred = NULL;
        assert_int_equal(cred_mint(f->kr, "d", "n", 1, INT64_MAX, &cred, NULL), 0);

        struct verify_job jobs[4];
        pthread_t th[ARRAY_SIZE(jobs)];
        for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
                jobs[i] = (struct verify_job){f, {t_own, t_es, t_hs}, cred, 0};
                assert_int_equal(pthread_create(&th[i], NULL, verify_thread, &jobs[i]), 0);
        }
        for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
                assert_int_equal(pthread_join(th[i], NULL), 0);
                assert_int_equal(jobs[i].failures, 0);
        }
        free(t_own);
        free(t_es);
        free(t_hs);
        free(cred);
        free(pl);
        EVP_PKEY_free(ec);
}

/* ---- base64url ---- */

static void test_b64url(void **state)
{
        static const char *const vec[][2] = {
            {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},         {"foo", "Zm9v"},
            {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
        for (size_t i = 0; i < ARRAY_SIZE(vec); i++) {
                char *e = NULL;
                unsigned char *d = NULL;
                size_t n = 0;
                assert_int_equal(b64url_encode(vec[i][0], strlen(vec[i][0]), &e), 0);
                assert_string_equal(e, vec[i][1]);
                assert_int_equal(b64url_decode(e, strlen(e), &d, &n), 0);
                assert_int_equal(n, strlen(vec[i][0]));
                assert_memory_equal(d, vec[i][0], n);
                free(e);
                free(d);
        }
        unsigned char all[256];
        for (size_t i = 0; i < sizeof(all); i++)
                all[i] = (unsigned char)(255 - i);
        for (size_t len = 0; len <= sizeof(all); len++) {
                char *e = NULL;
                unsigned char *d = NULL;
                size_t n = 0;
                assert_int_equal(b64url_encode(all, len, &e), 0);
                assert_null(strpbrk(e, "+/="));
                assert_int_equal(b64url_decode(e, strlen(e), &d, &n), 0);
                assert_int_equal(n, len);
                assert_memory_equal(d, all, len);
                free(e);
                free(d);
        }
        static const char *const bad[] = {"Zg==", "Z",    "Zh",     "Zm9",     "Zm+v",
                                          "Zm/v", "Zm 9", "Zm9v\n", "Zm9vYmF="};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                unsigned char *d = NULL;
                size_t n = 0;
                /* "Zm9" and "Zh": leftover bits set, a second spelling
                 * of "fo" / "f". */
                assert_int_equal(b64url_decode(bad[i], strlen(bad[i]), &d, &n), -EINVAL);
        }
}

/* ---- data-plane credentials ---- */

#define DEP "dep-1"
#define NAME "thread-42"
#define SID 0xfedcba9876543210ULL
#define EXP_MS 1900000900000LL

__attribute__((noinline)) static char *mint_ok(const struct fixture *f)
{
        char *c = NULL;
        struct sbx_error err = {0};
        assert_int_equal(cred_mint(f->kr, DEP, NAME, SID, EXP_MS, &c, &err), 0);
        return c;
}

static void test_cred_round_trip(void **state)
{
        struct fixture *f = *state;
        char *c = mint_ok(f);
        assert_true(strncmp(c, "sbxc1.", 6) == 0);
        assert_true(strlen(c) <= CRED_MAX_LEN);
        struct cred_claims out;
        struct sbx_error err = {0};
        assert_int_equal(cred_verify(f->kr, c, EXP_MS - 1, &out, &err), 0);
        assert_string_equal(out.dep, DEP);
        assert_string_equal(out.name, NAME);
        assert_true(out.id == SID);
        assert_int_equal(out.exp_ms, EXP_MS);
        assert_true(cred_matches(&out, DEP, NAME, SID));
        assert_false(cred_matches(&out, DEP, NAME, SID + 1));
        assert_false(cred_matches(&out, "dep-2", NAME, SID));
        assert_false(cred_matches(&out, DEP, "thread-43", SID));

        /* Still valid after a reload (same key), not under another state. */
        reload(f, NULL);
        assert_int_equal(cred_verify(f->kr, c, EXP_MS - 1, &out, &err), 0);
        char other[512];
        path_in(f, "other-state", other);
        struct keyring *kr2 = NULL;
        assert_int_equal(keys_load(other, NULL, &kr2, &err), 0);
        assert_int_equal(cred_verify(kr2, c, EXP_MS - 1, &out, &err), -EACCES);
        keyring_free(kr2);

        /* Longest names fit under the cap. */
        char long_name[SBX_NAME_MAX + 1];
        memset(long_name, 'n', SBX_NAME_MAX);
        long_name[SBX_NAME_MAX] = '\0';
        char *lc = NULL;
        assert_int_equal(cred_mint(f->kr, long_name, long_name, UINT64_MAX, INT64_MAX, &lc, &err),
                         0);
        assert_true(strlen(lc) <= CRED_MAX_LEN);
        assert_int_equal(cred_verify(f->kr, lc, EXP_MS, &out, &err), 0);
        assert_true(out.id == UINT64_MAX);
        free(lc);
        free(c);
}

static void test_cred_expiry(void **state)
{
        struct fixture *f = *state;
        char *c = mint_ok(f);
        struct sbx_error err = {0};
        assert_int_equal(cred_verify(f->kr, c, EXP_MS - 1, NULL, &err), 0);
        assert_int_equal(cred_verify(f->kr, c, EXP_MS, NULL, &err), -EACCES);
        assert_non_null(strstr(err.msg, "expired"));
        assert_int_equal(cred_verify(f->kr, c, EXP_MS + 3600000, NULL, &err), -EACCES);
        free(c);
}

static void test_cred_tampered(void **state)
{
        struct fixture *f = *state;
        char *c = mint_ok(f);
        size_t len = strlen(c);
        static const char alphabet[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.";
        for (size_t i = 0; i < len; i++) {
                char saved = c[i];
                for (size_t a = 0; a < sizeof(alphabet) - 1; a += 5) {
                        if (alphabet[a] == saved)
                                continue;
                        c[i] = alphabet[a];
                        assert_int_equal(cred_verify(f->kr, c, EXP_MS - 1, NULL, NULL), -EACCES);
                }
                c[i] = (char)(saved ^ 0x80);
                assert_int_equal(cred_verify(f->kr, c, EXP_MS - 1, NULL, NULL), -EACCES);
                c[i] = saved;
        }
        /* Truncated anywhere. */
        for (size_t i = 0; i < len; i++) {
                char *t = strndup(c, i);
                assert_int_equal(cred_verify(f->kr, t, EXP_MS - 1, NULL, NULL), -EACCES);
                free(t);
        }
        assert_int_equal(cred_verify(f->kr, c, EXP_MS - 1, NULL, NULL), 0);
        free(c);
}

static void test_cred_malformed(void **state)
{
        struct fixture *f = *state;
        static const char *const bad[] = {
            "",
            "sbxc1",
            "sbxc1.",
            "sbxc1..",
            "sbxc1.a.b",
            "sbxc2.AAAA.AAAA",
            "Bearer sbxc1.AAAA.AAAA",
            "sbxc1.AAAA.AAAA.AAAA",
            "x",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(cred_verify(f->kr, bad[i], 0, NULL, NULL), -EACCES);
        assert_int_equal(cred_verify(f->kr, NULL, 0, NULL, NULL), -EACCES);
        char *big = malloc(CRED_MAX_LEN + 100);
        memset(big, 'A', CRED_MAX_LEN + 99);
        memcpy(big, "sbxc1.", 6);
        big[200] = '.';
        big[CRED_MAX_LEN + 99] = '\0';
        assert_int_equal(cred_verify(f->kr, big, 0, NULL, NULL), -EACCES);
        free(big);

        /* An identity token is not a credential. */
        struct jwt_claims jc = good_claims();
        char *tok = sign_ok(f, &jc);
        assert_int_equal(cred_verify(f->kr, tok, 0, NULL, NULL), -EACCES);
        free(tok);

        /* Bad arguments to mint. */
        char *c = NULL;
        struct sbx_error err = {0};
        assert_int_equal(cred_mint(f->kr, "../x", NAME, 1, EXP_MS, &c, &err), -EINVAL);
        assert_int_equal(cred_mint(f->kr, DEP, "", 1, EXP_MS, &c, &err), -EINVAL);
        assert_int_equal(cred_mint(f->kr, DEP, NAME, 1, 0, &c, &err), -EINVAL);
        assert_null(c);
}

/* The prepared HMAC contexts are only ever copied: were one updated in
 * place, a MAC would carry the bytes of the one before it. So MACs of
 * different messages alternate, a wrong MAC after a right one is refused
 * and the right one still passes after it, from one thread and from two. */
struct hmac_job {
        const struct keys_hmac *h;
        const unsigned char *key;
        size_t shift; /* where in msg this thread's messages start */
        pthread_barrier_t *start;
        int failures;
};

static const unsigned char hmac_msg[] = "two messages interleaved, MAC'd under one shared context";

static int hmac_check(const struct keys_hmac *h, const unsigned char *key, const void *data,
                      size_t len)
{
        unsigned char want[KEYS_HMAC_LEN], got[KEYS_HMAC_LEN];
        unsigned int n = 0;
        assert_non_null(HMAC(EVP_sha256(), key, KEYS_CRED_KEY_LEN, data, len, want, &n));
        return keys_hmac(h, data, len, got) == 0 && !memcmp(want, got, sizeof(got)) ? 0 : 1;
}

static void *hmac_thread(void *arg)
{
        struct hmac_job *job = arg;
        pthread_barrier_wait(job->start);
        for (int i = 0; i < 20000; i++) {
                size_t len = (size_t)i % (sizeof(hmac_msg) - job->shift);
                job->failures += hmac_check(job->h, job->key, hmac_msg + job->shift, len);
        }
        return NULL;
}

static void test_hmac_not_in_place(void **state)
{
        struct fixture *f = *state;
        const struct keys_hmac *h = keyring_cred_hmac(f->kr);
        const unsigned char *key = keyring_cred_key(f->kr);
        assert_non_null(h);
        for (size_t len = 0; len < sizeof(hmac_msg); len++) {
                assert_int_equal(hmac_check(h, key, hmac_msg, len), 0);
                assert_int_equal(hmac_check(h, key, hmac_msg + 1, len / 2), 0);
        }
        pthread_barrier_t start;
        struct hmac_job jobs[2] = {{h, key, 0, &start, 0}, {h, key, 3, &start, 0}};
        pthread_t th[ARRAY_SIZE(jobs)];
        assert_int_equal(pthread_barrier_init(&start, NULL, ARRAY_SIZE(jobs)), 0);
        for (size_t i = 0; i < ARRAY_SIZE(jobs); i++)
                assert_int_equal(pthread_create(&th[i], NULL, hmac_thread, &jobs[i]), 0);
        for (size_t i = 0; i < ARRAY_SIZE(jobs); i++) {
                assert_int_equal(pthread_join(th[i], NULL), 0);
                assert_int_equal(jobs[i].failures, 0);
        }
        pthread_barrier_destroy(&start);

        /* Credentials: two interleaved, then a forged MAC between good ones. */
        char *c1 = NULL, *c2 = NULL;
        assert_int_equal(cred_mint(f->kr, DEP, NAME, 1, EXP_MS, &c1, NULL), 0);
        assert_int_equal(cred_mint(f->kr, DEP, "thread-43", 2, EXP_MS, &c2, NULL), 0);
        struct cred_claims out;
        for (int i = 0; i < 3; i++) {
                assert_int_equal(cred_verify(f->kr, c1, 0, &out, NULL), 0);
                assert_true(cred_matches(&out, DEP, NAME, 1));
                assert_int_equal(cred_verify(f->kr, c2, 0, &out, NULL), 0);
                assert_true(cred_matches(&out, DEP, "thread-43", 2));
        }
        char *forged = strdup(c1);
        size_t fl = strlen(forged);
        forged[fl - 2] = forged[fl - 2] == 'A' ? 'B' : 'A';
        assert_int_equal(cred_verify(f->kr, forged, 0, NULL, NULL), -EACCES);
        assert_int_equal(cred_verify(f->kr, c1, 0, NULL, NULL), 0);
        assert_int_equal(cred_verify(f->kr, forged, 0, NULL, NULL), -EACCES);

        /* HS256: the same for its secret's context. */
        static const char secret[] = "another shared secret, 32 bytes or more";
        char path[512];
        path_in(f, "hs.secret", path);
        write_file(path, secret, strlen(secret));
        struct keys_external_config ext = {.hs256_secret_file = path};
        reload(f, &ext);
        struct signer hs = {.alg = T_HS256,
                            .secret = (const unsigned char *)secret,
                            .secret_len = strlen(secret)},
                      wrong = {.alg = T_HS256,
                               .secret = (const unsigned char *)"a different secret of 32 bytes!!",
                               .secret_len = 32};
        char *pl1 = payload_json(ISS, NOW, NOW + 600), *pl2 = payload_json(ISS, NOW - 5, NOW + 60);
        char *t1 = make_token("{\"alg\":\"HS256\"}", pl1, &hs),
             *t2 = make_token("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", pl2, &hs),
             *bad = make_token("{\"alg\":\"HS256\"}", pl1, &wrong);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(verify(f, t1), 0);
                assert_int_equal(verify(f, t2), 0);
        }
        assert_int_equal(verify(f, bad), -EACCES);
        assert_int_equal(verify(f, t1), 0);
        assert_int_equal(verify(f, bad), -EACCES);
        free(bad);
        free(t2);
        free(t1);
        free(pl2);
        free(pl1);
        free(forged);
        free(c2);
        free(c1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)
            T(test_round_trip),        T(test_sign_bad_claims),
            T(test_expired),           T(test_nbf_future),
            T(test_iat_future),        T(test_wrong_iss),
            T(test_alg_none),          T(test_hs256_with_public_key_refused),
            T(test_tampered),          T(test_wrong_kid),
            T(test_rotation),          T(test_key_files),
            T(test_es256_external),    T(test_eddsa_external),
            T(test_hs256_external),    T(test_malformed),
            T(test_concurrent_verify), cmocka_unit_test(test_b64url),
            T(test_cred_round_trip),   T(test_cred_expiry),
            T(test_cred_tampered),     T(test_cred_malformed),
            T(test_hmac_not_in_place),
#undef T
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
