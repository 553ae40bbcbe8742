/* SPDX-License-Identifier: MIT */
/* Identity tokens (control plane): compact JWS / JWT.
 *
 * Claims: iss (the server's base URL), sub (deployment id), acct (account
 * id), exp, iat, optional nbf. Tokens the server signs use EdDSA with its
 * current key (header {"alg":"EdDSA","typ":"JWT","kid":...}).
 *
 * Verification accepts an algorithm only when a key for it is configured:
 * EdDSA (own keys, external Ed25519 keys), ES256 (external P-256 keys),
 * HS256 (an external shared secret). "none" is never accepted, and a key
 * is only ever used with its own algorithm (an HS256 token is checked
 * against the HS256 secret alone, never against a public key). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/names.h"
#include "../common/util.h"
#include "keys.h"

#define JWT_MAX_LEN 8192 /* longest token accepted */
#define JWT_ISS_MAX 512  /* longest iss claim */
#define JWT_DEFAULT_LEEWAY_S 60

struct jwt_claims {
        char iss[JWT_ISS_MAX + 1];
        char sub[SBX_NAME_MAX + 1];  /* deployment id; name_is_valid() */
        char acct[SBX_NAME_MAX + 1]; /* account id; name_is_valid() */
        int64_t exp;                 /* seconds since the epoch */
        int64_t iat;                 /* 0 when absent (verify only) */
        int64_t nbf;                 /* 0 when absent */
};

/* The most clock skew a policy may allow. */
#define JWT_MAX_LEEWAY_S (7 * 86400)

struct jwt_policy {
        const char *issuer; /* iss must equal this exactly; required */
        int64_t leeway_s;   /* clock skew allowed on exp / nbf / iat, 0..JWT_MAX_LEEWAY_S */
        int64_t now_s;      /* 0: the current time */
};

/* issuer, JWT_DEFAULT_LEEWAY_S, the current time. */
void jwt_policy_init(struct jwt_policy *p, const char *issuer);

/* Sign claims (iss, sub, acct, exp and iat required; nbf if non-zero) with
 * the keyring's current signing key. *ret_token is malloc'd.
 * -ENOKEY when the keyring has no signing key, -EINVAL for bad claims. */
int jwt_sign(const struct keyring *kr, const struct jwt_claims *claims, char **ret_token,
             struct sbx_error *err);

/* Verify a token: -EACCES for every rejection (malformed, unsupported or
 * unconfigured alg, bad signature, expired, not yet valid, wrong issuer,
 * missing or invalid sub / acct), with a message in err that never holds
 * the token or a key. -ENOMEM / -EINVAL (bad policy: no issuer, a leeway
 * out of range) otherwise. */
int jwt_verify(const struct keyring *kr, const struct jwt_policy *policy, const char *token,
               struct jwt_claims *ret_claims, struct sbx_error *err);

/* base64url without padding (RFC 4648 section 5, as JWS uses it).
 * encode: *ret is a malloc'd NUL-terminated string.
 * decode: strict: no padding, no whitespace, no other alphabet, unused
 * trailing bits must be zero; *ret is malloc'd (NUL-terminated too, not
 * counted in *ret_len). Both return 0 or -EINVAL / -ENOMEM / -E2BIG. */
int b64url_encode(const void *data, size_t len, char **ret);
int b64url_decode(const char *s, size_t len, unsigned char **ret, size_t *ret_len);
