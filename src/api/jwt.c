/* SPDX-License-Identifier: MIT */
#include "jwt.h"

#include <math.h> /* isfinite: a macro, no libm */
#include <string.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#define ED25519_SIG_LEN 64
#define ES256_SIG_LEN 64
#define HS256_SIG_LEN 32
#define MAX_NUMERIC_DATE 253402300799LL /* 9999-12-31T23:59:59Z */

/* ---- base64url ---- */

static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int b64url_encode(const void *data, size_t len, char **ret)
{
        const unsigned char *in = data;
        if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
                return -E2BIG;
        char *out = malloc(len / 3 * 4 + 4 + 1);
        if (!out)
                return -ENOMEM;
        char *p = out;
        size_t i = 0;
        for (; i + 3 <= len; i += 3) {
                uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
                *p++ = b64url_alphabet[v >> 18 & 63];
                *p++ = b64url_alphabet[v >> 12 & 63];
                *p++ = b64url_alphabet[v >> 6 & 63];
                *p++ = b64url_alphabet[v & 63];
        }
        if (len - i == 1) {
                uint32_t v = (uint32_t)in[i] << 16;
                *p++ = b64url_alphabet[v >> 18 & 63];
                *p++ = b64url_alphabet[v >> 12 & 63];
        } else if (len - i == 2) {
                uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
                *p++ = b64url_alphabet[v >> 18 & 63];
                *p++ = b64url_alphabet[v >> 12 & 63];
                *p++ = b64url_alphabet[v >> 6 & 63];
        }
        *p = '\0';
        *ret = out;
        return 0;
}

static int b64url_value(char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '-')
                return 62;
        if (c == '_')
                return 63;
        return -1;
}

int b64url_decode(const char *s, size_t len, unsigned char **ret, size_t *ret_len)
{
        /* A lone trailing character carries fewer than 8 bits: never valid. */
        if (len % 4 == 1)
                return -EINVAL;
        if (len > SIZE_MAX / 3)
                return -E2BIG;
        unsigned char *out = malloc(len / 4 * 3 + 3 + 1);
        if (!out)
                return -ENOMEM;
        size_t n = 0;
        uint32_t acc = 0;
        unsigned bits = 0;
        for (size_t i = 0; i < len; i++) {
                int v = b64url_value(s[i]);
                if (v < 0) {
                        free(out);
                        return -EINVAL;
                }
                acc = acc << 6 | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (unsigned char)(acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        /* Non-zero leftover bits would give one value several encodings. */
        if (acc != 0) {
                free(out);
                return -EINVAL;
        }
        out[n] = '\0';
        *ret = out;
        *ret_len = n;
        return 0;
}

/* ---- signatures ---- */

static const char *alg_name(enum key_alg alg)
{
        switch (alg) {
        case KEY_ALG_EDDSA:
                return "EdDSA";
        case KEY_ALG_ES256:
                return "ES256";
        case KEY_ALG_HS256:
                return "HS256";
        }
        return "?";
}

static int alg_parse(const char *s, enum key_alg *ret)
{
        /* Exact, case-sensitive names (RFC 7518): "none", "HS512", "hs256",
         * "RS256"... are all unknown here, which is the allowlist. */
        static const enum key_alg algs[] = {KEY_ALG_EDDSA, KEY_ALG_ES256, KEY_ALG_HS256};
        for (size_t i = 0; i < ARRAY_SIZE(algs); i++) {
                if (!strcmp(s, alg_name(algs[i]))) {
                        *ret = algs[i];
                        return 0;
                }
        }
        return -EINVAL;
}

static bool eddsa_verify(EVP_PKEY *pkey, const char *data, size_t len, const unsigned char *sig,
                         size_t sig_len)
{
        if (sig_len != ED25519_SIG_LEN)
                return false;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1 &&
                  EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)data, len) == 1;
        EVP_MD_CTX_free(ctx);
        return ok;
}

/* JOSE carries an ECDSA signature as r || s, 32 bytes each (RFC 7518
 * 3.4); OpenSSL wants DER. */
static bool es256_verify(EVP_PKEY *pkey, const char *data, size_t len, const unsigned char *sig,
                         size_t sig_len)
{
        if (sig_len != ES256_SIG_LEN)
                return false;
        ECDSA_SIG *esig = ECDSA_SIG_new();
        BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
        if (!esig || !r || !s || ECDSA_SIG_set0(esig, r, s) != 1) {
                BN_free(r);
                BN_free(s);
                ECDSA_SIG_free(esig);
                return false;
        }
        unsigned char *der = NULL;
        int der_len = i2d_ECDSA_SIG(esig, &der);
        ECDSA_SIG_free(esig);
        if (der_len <= 0)
                return false;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        bool ok =
            ctx && EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, pkey) == 1 &&
            EVP_DigestVerify(ctx, der, (size_t)der_len, (const unsigned char *)data, len) == 1;
        EVP_MD_CTX_free(ctx);
        OPENSSL_free(der);
        return ok;
}

static bool hs256_verify(const struct keys_hmac *hmac, const char *data, size_t len,
                         const unsigned char *sig, size_t sig_len)
{
        unsigned char mac[KEYS_HMAC_LEN];
        if (sig_len != HS256_SIG_LEN || keys_hmac(hmac, data, len, mac) < 0)
                return false;
        /* Constant time: a timing oracle would let a forger find the MAC
         * byte by byte. */
        bool ok = CRYPTO_memcmp(mac, sig, HS256_SIG_LEN) == 0;
        OPENSSL_cleanse(mac, sizeof(mac));
        return ok;
}

/* A key is used only with the algorithm it was configured for: the alg
 * header selects the key class, never the other way round. This is what
 * defeats algorithm confusion (CVE-2015-9235, CVE-2016-10555): an HS256
 * token "signed" with a public key as the HMAC secret never meets a
 * public key here. */
static bool key_verify(const struct keyring_key *k, enum key_alg alg, const char *data, size_t len,
                       const unsigned char *sig, size_t sig_len)
{
        if (k->alg != alg)
                return false;
        switch (alg) {
        case KEY_ALG_EDDSA:
                return k->pkey && eddsa_verify(k->pkey, data, len, sig, sig_len);
        case KEY_ALG_ES256:
                return k->pkey && es256_verify(k->pkey, data, len, sig, sig_len);
        case KEY_ALG_HS256:
                return k->hmac && hs256_verify(k->hmac, data, len, sig, sig_len);
        }
        return false;
}

/* With a kid naming one of our keys, only that key. With an unknown kid,
 * only external keys (whose issuers name keys their own way), never the
 * server's own keys. Without a kid, every key of the algorithm. */
static bool signature_ok(const struct keyring *kr, enum key_alg alg, const char *kid,
                         const char *data, size_t len, const unsigned char *sig, size_t sig_len)
{
        bool kid_known = false;
        size_t n = keyring_count(kr);
        if (kid && alg != KEY_ALG_HS256) {
                for (size_t i = 0; i < n; i++) {
                        const struct keyring_key *k = keyring_get(kr, i);
                        if (k->alg == alg && !strcmp(k->kid, kid)) {
                                kid_known = true;
                                if (key_verify(k, alg, data, len, sig, sig_len))
                                        return true;
                        }
                }
                if (kid_known)
                        return false;
        }
        for (size_t i = 0; i < n; i++) {
                const struct keyring_key *k = keyring_get(kr, i);
                if (kid && alg != KEY_ALG_HS256 && k->own)
                        continue;
                if (key_verify(k, alg, data, len, sig, sig_len))
                        return true;
        }
        return false;
}

/* ---- parsing ---- */

static int reject(struct sbx_error *err, const char *why)
{
        return sbx_error_set(err, EACCES, "identity token rejected: %s", why);
}

/* Decode one base64url part into a JSON object. */
static int part_json(const char *s, size_t len, json_t **ret)
{
        _cleanup_free_ unsigned char *raw = NULL;
        size_t raw_len = 0;
        int r = b64url_decode(s, len, &raw, &raw_len);
        if (r < 0)
                return r;
        /* Duplicate keys are refused: two parsers reading {"alg":..,"alg":..}
         * differently is a classic JWT bypass. */
        json_t *j = json_loadb((const char *)raw, raw_len, JSON_REJECT_DUPLICATES, NULL);
        if (!j)
                return -EINVAL;
        if (!json_is_object(j)) {
                json_decref(j);
                return -EINVAL;
        }
        *ret = j;
        return 0;
}

/* NumericDate: integer or (rarely) fractional seconds. 0 absent, 1 set,
 * -EINVAL malformed. */
static int numeric_date(json_t *obj, const char *key, int64_t *ret)
{
        json_t *v = json_object_get(obj, key);
        if (!v)
                return 0;
        double d;
        if (json_is_integer(v))
                d = (double)json_integer_value(v);
        else if (json_is_real(v))
                d = json_real_value(v);
        else
                return -EINVAL;
        if (!isfinite(d) || d < 0 || d > (double)MAX_NUMERIC_DATE)
                return -EINVAL;
        *ret = (int64_t)d; /* d >= 0: truncation is floor */
        return 1;
}

static int string_claim(json_t *obj, const char *key, char *out, size_t out_size)
{
        json_t *v = json_object_get(obj, key);
        if (!json_is_string(v))
                return -ENOENT;
        size_t len = json_string_length(v);
        const char *s = json_string_value(v);
        if (len >= out_size || strlen(s) != len)
                return -EINVAL;
        memcpy(out, s, len + 1);
        return 0;
}

struct jwt_parts {
        const char *header;
        size_t header_len;
        const char *payload;
        size_t payload_len;
        const char *sig;
        size_t sig_len;
};

/* Exactly three non-empty parts of the base64url alphabet. An empty
 * signature ("alg":"none" tokens end in a dot) is refused right here. */
static int split_token(const char *token, struct jwt_parts *p, struct sbx_error *err)
{
        size_t len = strnlen(token, JWT_MAX_LEN + 1);
        if (len > JWT_MAX_LEN)
                return reject(err, "too long");
        const char *dot1 = memchr(token, '.', len);
        const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
        if (!dot2 || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)))
                return reject(err, "not three dot-separated parts");
        p->header = token;
        p->header_len = (size_t)(dot1 - token);
        p->payload = dot1 + 1;
        p->payload_len = (size_t)(dot2 - p->payload);
        p->sig = dot2 + 1;
        p->sig_len = len - (size_t)(p->sig - token);
        if (!p->header_len || !p->payload_len || !p->sig_len)
                return reject(err, "empty part");
        return 0;
}

/* Header: alg from the allowlist and configured, optional kid, no crit. */
static int parse_header(const struct keyring *kr, const struct jwt_parts *p, enum key_alg *ret_alg,
                        char ret_kid[KEYS_KID_MAX + 1], bool *ret_has_kid, struct sbx_error *err)
{
        json_t *h = NULL;
        int r = part_json(p->header, p->header_len, &h);
        if (r == -ENOMEM)
                return sbx_error_set(err, ENOMEM, "identity token header");
        if (r < 0)
                return reject(err, "malformed header");
        json_t *alg = json_object_get(h, "alg"), *kid = json_object_get(h, "kid");
        json_t *typ = json_object_get(h, "typ");
        if (!json_is_string(alg))
                r = reject(err, "no alg");
        else if (!strcmp(json_string_value(alg), "none"))
                r = reject(err, "alg none is never accepted");
        else if (alg_parse(json_string_value(alg), ret_alg) < 0)
                r = reject(err, "unsupported alg");
        else if (!keyring_has_alg(kr, *ret_alg))
                r = reject(err, "alg not configured");
        /* RFC 7515 4.1.11: extensions we do not understand must fail. */
        else if (json_object_get(h, "crit"))
                r = reject(err, "crit header not supported");
        else if (typ && !json_is_string(typ))
                r = reject(err, "malformed typ");
        else if (kid && (!json_is_string(kid) || json_string_length(kid) > KEYS_KID_MAX ||
                         strlen(json_string_value(kid)) != json_string_length(kid)))
                r = reject(err, "malformed kid");
        if (r == 0) {
                *ret_has_kid = kid != NULL;
                snprintf(ret_kid, KEYS_KID_MAX + 1, "%s", kid ? json_string_value(kid) : "");
        }
        json_decref(h);
        return r;
}

static int check_times(json_t *pl, const struct jwt_policy *policy, struct jwt_claims *c,
                       struct sbx_error *err)
{
        int64_t now = policy->now_s ? policy->now_s : now_ms() / 1000;
        int64_t leeway = policy->leeway_s;
        int has_exp = numeric_date(pl, "exp", &c->exp);
        int has_nbf = numeric_date(pl, "nbf", &c->nbf);
        int has_iat = numeric_date(pl, "iat", &c->iat);
        if (has_exp < 0 || has_nbf < 0 || has_iat < 0)
                return reject(err, "malformed time claim");
        if (!has_exp)
                return reject(err, "no exp");
        if (now - leeway >= c->exp)
                return reject(err, "expired");
        if (has_nbf && c->nbf > now + leeway)
                return reject(err, "not valid yet (nbf)");
        if (has_iat && c->iat > now + leeway)
                return reject(err, "issued in the future (iat)");
        return 0;
}

static int check_claims(json_t *pl, const struct jwt_policy *policy, struct jwt_claims *c,
                        struct sbx_error *err)
{
        int r = check_times(pl, policy, c, err);
        if (r < 0)
                return r;
        if (string_claim(pl, "iss", c->iss, sizeof(c->iss)) < 0 || strcmp(c->iss, policy->issuer))
                return reject(err, "wrong issuer");
        /* sub and acct become path components and store keys. */
        if (string_claim(pl, "sub", c->sub, sizeof(c->sub)) < 0 || !name_is_valid(c->sub))
                return reject(err, "missing or invalid sub");
        if (string_claim(pl, "acct", c->acct, sizeof(c->acct)) < 0 || !name_is_valid(c->acct))
                return reject(err, "missing or invalid acct");
        return 0;
}

void jwt_policy_init(struct jwt_policy *p, const char *issuer)
{
        p->issuer = issuer;
        p->leeway_s = JWT_DEFAULT_LEEWAY_S;
        p->now_s = 0;
}

int jwt_verify(const struct keyring *kr, const struct jwt_policy *policy, const char *token,
               struct jwt_claims *ret_claims, struct sbx_error *err)
{
        if (!kr || !policy || !policy->issuer || !*policy->issuer)
                return sbx_error_set(err, EINVAL, "identity token: no keyring or issuer");
        if (policy->leeway_s < 0 || policy->leeway_s > JWT_MAX_LEEWAY_S)
                return sbx_error_set(err, EINVAL, "identity token: leeway %lld s out of range",
                                     (long long)policy->leeway_s);
        if (!token)
                return reject(err, "missing");
        struct jwt_parts p = {0};
        int r = split_token(token, &p, err);
        if (r < 0)
                return r;
        enum key_alg alg = 0;
        char kid[KEYS_KID_MAX + 1];
        bool has_kid = false;
        r = parse_header(kr, &p, &alg, kid, &has_kid, err);
        if (r < 0)
                return r;

        /* The signature is checked before the payload is parsed: the JSON
         * parser sees unauthenticated claims only from a key holder. */
        _cleanup_free_ unsigned char *sig = NULL;
        size_t sig_len = 0;
        r = b64url_decode(p.sig, p.sig_len, &sig, &sig_len);
        if (r == -ENOMEM)
                return sbx_error_set(err, ENOMEM, "identity token signature");
        if (r < 0)
                return reject(err, "malformed signature");
        size_t signed_len = (size_t)(p.sig - 1 - token);
        bool sig_ok = signature_ok(kr, alg, has_kid ? kid : NULL, token, signed_len, sig, sig_len);
        /* Failed attempts may leave OpenSSL errors queued on this thread. */
        ERR_clear_error();
        if (!sig_ok)
                return reject(err, "bad signature");

        json_t *pl = NULL;
        r = part_json(p.payload, p.payload_len, &pl);
        if (r == -ENOMEM)
                return sbx_error_set(err, ENOMEM, "identity token payload");
        if (r < 0)
                return reject(err, "malformed payload");
        struct jwt_claims c = {0};
        r = check_claims(pl, policy, &c, err);
        json_decref(pl);
        if (r < 0)
                return r;
        if (ret_claims)
                *ret_claims = c;
        return 0;
}

/* ---- signing ---- */

static int json_b64(json_t *j, char **ret)
{
        _cleanup_free_ char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!s)
                return -ENOMEM;
        return b64url_encode(s, strlen(s), ret);
}

static int claims_valid(const struct jwt_claims *c, struct sbx_error *err)
{
        if (!c->iss[0] || strnlen(c->iss, sizeof(c->iss)) >= sizeof(c->iss))
                return sbx_error_set(err, EINVAL, "sign: bad iss");
        if (!name_is_valid(c->sub) || !name_is_valid(c->acct))
                return sbx_error_set(err, EINVAL, "sign: bad sub or acct");
        if (c->iat <= 0 || c->exp <= c->iat || c->exp > MAX_NUMERIC_DATE || c->nbf < 0 ||
            c->nbf > MAX_NUMERIC_DATE)
                return sbx_error_set(err, EINVAL, "sign: bad exp, iat or nbf");
        return 0;
}

static json_t *claims_json(const struct jwt_claims *c)
{
        json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", c->iss, "sub", c->sub, "acct",
                              c->acct, "iat", (json_int_t)c->iat, "exp", (json_int_t)c->exp);
        if (j && c->nbf && json_object_set_new(j, "nbf", json_integer(c->nbf)) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

static int eddsa_sign(EVP_PKEY *pkey, const char *data, size_t len, unsigned char sig[64])
{
        size_t sig_len = ED25519_SIG_LEN;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        bool ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, pkey) == 1 &&
                  EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)data, len) == 1 &&
                  sig_len == ED25519_SIG_LEN;
        EVP_MD_CTX_free(ctx);
        return ok ? 0 : -EIO;
}

int jwt_sign(const struct keyring *kr, const struct jwt_claims *claims, char **ret_token,
             struct sbx_error *err)
{
        const struct keyring_key *k = keyring_signer(kr);
        if (!k || !k->pkey)
                return sbx_error_set(err, ENOKEY, "sign: no signing key");
        int r = claims_valid(claims, err);
        if (r < 0)
                return r;
        json_t *hdr = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ", "JWT", "kid", k->kid);
        json_t *pl = claims_json(claims);
        _cleanup_free_ char *h64 = NULL, *p64 = NULL, *s64 = NULL;
        r = hdr && pl ? json_b64(hdr, &h64) : -ENOMEM;
        if (r == 0)
                r = json_b64(pl, &p64);
        json_decref(hdr);
        json_decref(pl);
        if (r < 0)
                return sbx_error_set(err, -r, "sign: encode");

        struct buf b;
        buf_init(&b, JWT_MAX_LEN);
        r = buf_printf(&b, "%s.%s", h64, p64);
        unsigned char sig[ED25519_SIG_LEN];
        if (r == 0)
                r = eddsa_sign(k->pkey, b.data, b.len, sig);
        if (r == 0)
                r = b64url_encode(sig, sizeof(sig), &s64);
        if (r == 0)
                r = buf_printf(&b, ".%s", s64);
        if (r < 0) {
                buf_free(&b);
                return sbx_error_set(err, -r, "sign");
        }
        *ret_token = b.data;
        return 0;
}
