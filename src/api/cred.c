/* SPDX-License-Identifier: MIT */
#include "cred.h"

#include <string.h>

#include <openssl/crypto.h>

#include "jwt.h"

#define MAC_LEN KEYS_HMAC_LEN
#define PAYLOAD_MAX (1 + SBX_NAME_MAX + 1 + SBX_NAME_MAX + 8 + 8)

static void put_u64(unsigned char *p, uint64_t v)
{
        for (int i = 7; i >= 0; i--, v >>= 8)
                p[i] = (unsigned char)v;
}

static uint64_t get_u64(const unsigned char *p)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | p[i];
        return v;
}

static int mac(const struct keyring *kr, const char *data, size_t len, unsigned char out[MAC_LEN])
{
        return keys_hmac(keyring_cred_hmac(kr), data, len, out);
}

static size_t payload_encode(const char *dep, const char *name, uint64_t id, int64_t exp_ms,
                             unsigned char out[PAYLOAD_MAX])
{
        size_t n = 0, dl = strlen(dep), nl = strlen(name);
        out[n++] = (unsigned char)dl;
        memcpy(out + n, dep, dl);
        n += dl;
        out[n++] = (unsigned char)nl;
        memcpy(out + n, name, nl);
        n += nl;
        put_u64(out + n, id);
        n += 8;
        put_u64(out + n, (uint64_t)exp_ms);
        return n + 8;
}

/* One length-prefixed name; advances *off. */
static int payload_name(const unsigned char *p, size_t len, size_t *off, char out[SBX_NAME_MAX + 1])
{
        if (*off >= len)
                return -EINVAL;
        size_t n = p[(*off)++];
        if (n == 0 || n > SBX_NAME_MAX || n > len - *off)
                return -EINVAL;
        memcpy(out, p + *off, n);
        out[n] = '\0';
        *off += n;
        return name_is_valid(out) ? 0 : -EINVAL;
}

static int payload_decode(const unsigned char *p, size_t len, struct cred_claims *c)
{
        size_t off = 0;
        if (payload_name(p, len, &off, c->dep) < 0 || payload_name(p, len, &off, c->name) < 0)
                return -EINVAL;
        if (len - off != 16)
                return -EINVAL;
        c->id = get_u64(p + off);
        c->exp_ms = (int64_t)get_u64(p + off + 8);
        return 0;
}

int cred_mint(const struct keyring *kr, const char *deployment, const char *name,
              uint64_t sandbox_id, int64_t expires_at_ms, char **ret, struct sbx_error *err)
{
        if (!kr || !name_is_valid(deployment) || !name_is_valid(name) || expires_at_ms <= 0)
                return sbx_error_set(err, EINVAL, "mint credential: bad arguments");
        unsigned char payload[PAYLOAD_MAX];
        size_t plen = payload_encode(deployment, name, sandbox_id, expires_at_ms, payload);
        _cleanup_free_ char *p64 = NULL, *m64 = NULL;
        int r = b64url_encode(payload, plen, &p64);
        if (r < 0)
                return sbx_error_set(err, -r, "mint credential");
        struct buf b;
        buf_init(&b, CRED_MAX_LEN);
        unsigned char m[MAC_LEN];
        r = buf_printf(&b, CRED_PREFIX "%s", p64);
        if (r == 0)
                r = mac(kr, b.data, b.len, m);
        if (r == 0)
                r = b64url_encode(m, sizeof(m), &m64);
        if (r == 0)
                r = buf_printf(&b, ".%s", m64);
        if (r < 0) {
                buf_free(&b);
                return sbx_error_set(err, -r, "mint credential");
        }
        *ret = b.data;
        return 0;
}

static int reject(struct sbx_error *err, const char *why)
{
        return sbx_error_set(err, EACCES, "credential rejected: %s", why);
}

int cred_verify(const struct keyring *kr, const char *token, int64_t now_ms,
                struct cred_claims *ret, struct sbx_error *err)
{
        if (!kr)
                return sbx_error_set(err, EINVAL, "credential: no keyring");
        if (!token)
                return reject(err, "missing");
        size_t len = strnlen(token, CRED_MAX_LEN + 1), plen = strlen(CRED_PREFIX);
        if (len > CRED_MAX_LEN)
                return reject(err, "too long");
        if (len <= plen || memcmp(token, CRED_PREFIX, plen) != 0)
                return reject(err, "not a credential");
        const char *dot = memchr(token + plen, '.', len - plen);
        if (!dot || dot == token + plen || memchr(dot + 1, '.', len - (size_t)(dot + 1 - token)))
                return reject(err, "malformed");

        _cleanup_free_ unsigned char *m = NULL, *payload = NULL;
        size_t m_len = 0, payload_len = 0;
        int r = b64url_decode(dot + 1, len - (size_t)(dot + 1 - token), &m, &m_len);
        if (r == -ENOMEM)
                return sbx_error_set(err, ENOMEM, "credential");
        if (r < 0 || m_len != MAC_LEN)
                return reject(err, "malformed MAC");
        unsigned char expect[MAC_LEN];
        if (mac(kr, token, (size_t)(dot - token), expect) < 0)
                return sbx_error_set(err, EIO, "credential MAC");
        /* Constant time, so response timing reveals nothing of the MAC. */
        bool ok = CRYPTO_memcmp(expect, m, MAC_LEN) == 0;
        OPENSSL_cleanse(expect, sizeof(expect));
        if (!ok)
                return reject(err, "bad MAC");

        r = b64url_decode(token + plen, (size_t)(dot - token) - plen, &payload, &payload_len);
        if (r == -ENOMEM)
                return sbx_error_set(err, ENOMEM, "credential");
        struct cred_claims c;
        if (r < 0 || payload_decode(payload, payload_len, &c) < 0)
                return reject(err, "malformed payload");
        if (now_ms >= c.exp_ms)
                return reject(err, "expired");
        if (ret)
                *ret = c;
        return 0;
}

bool cred_matches(const struct cred_claims *c, const char *deployment, const char *name,
                  uint64_t sandbox_id)
{
        return c && deployment && name && c->id == sandbox_id && !strcmp(c->dep, deployment) &&
               !strcmp(c->name, name);
}
