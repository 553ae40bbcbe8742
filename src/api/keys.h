/* SPDX-License-Identifier: MIT */
/* The server's key material and the keys of external token issuers.
 *
 * On disk, in <state>/keys/ (directory 0700, files 0600, each written to a
 * temporary file and renamed into place, never through a symlink):
 *   signing-<kid>.pem   Ed25519 private keys (PKCS#8 PEM); every one is
 *                       accepted for verification
 *   current             the kid that signs new identity tokens
 *   credential.key      32 random bytes: HMAC key of data-plane credentials
 * First use creates the directory, one signing key and the credential key.
 * A kid is 16 lowercase hex characters: the start of the SHA-256 of the
 * key's DER SubjectPublicKeyInfo.
 *
 * A loaded `struct keyring` is never modified, so any number of threads may
 * verify with it at once. Rotation changes the files only: load a new ring
 * to pick it up (keyring_ref lets old users finish with the old one). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/types.h>

#include "../common/util.h"

#define KEYS_KID_LEN 16 /* hex characters of an own key id */
#define KEYS_KID_MAX 64 /* longest kid accepted from a token header */
#define KEYS_CRED_KEY_LEN 32
#define KEYS_HS256_MIN_LEN 32 /* RFC 7518 3.2: at least the hash size */
#define KEYS_HS256_MAX_LEN 4096
#define KEYS_MAX_OWN 64      /* signing keys kept in the directory */
#define KEYS_MAX_EXTERNAL 32 /* external public key files */
#define KEYS_HMAC_LEN 32     /* HMAC-SHA256 output */

/* A key's HMAC-SHA256 context, prepared once when the keyring is loaded
 * (the key schedule done) and freed with it. Never updated in place: each
 * use works on a copy, so any number of threads may use it at once. */
struct keys_hmac;

/* Operator configuration of external issuers; all optional. */
struct keys_external_config {
        /* File holding the HS256 shared secret, used as is except that one
         * trailing "\n" or "\r\n" is dropped. At least 32 bytes. */
        const char *hs256_secret_file;
        /* NULL-terminated list of PEM public key files (SubjectPublicKeyInfo):
         * EC P-256 keys verify ES256 tokens, Ed25519 keys verify EdDSA. */
        const char *const *public_key_files;
        /* Accept only the external issuers: the server's own signing keys
         * are not used for verification and jwt_sign refuses. */
        bool disable_local_issuer;
};

enum key_alg {
        KEY_ALG_EDDSA = 1,
        KEY_ALG_ES256,
        KEY_ALG_HS256,
};

/* One verification key, as jwt.c sees it. */
struct keyring_key {
        enum key_alg alg;
        bool own;                    /* one of the server's signing keys */
        char kid[KEYS_KID_LEN + 1];  /* "" for the HS256 secret */
        EVP_PKEY *pkey;              /* EdDSA / ES256 (public part used) */
        const unsigned char *secret; /* HS256 only */
        size_t secret_len;
        const struct keys_hmac *hmac; /* HS256 only: prepared from secret */
};

struct keyring;

/* Open (creating on first use) the keys in <state_dir>/keys and load the
 * external issuers' keys. */
int keys_load(const char *state_dir, const struct keys_external_config *ext, struct keyring **ret,
              struct sbx_error *err);
/* Take one more reference; keyring_free drops one and frees at zero. */
struct keyring *keyring_ref(struct keyring *kr);
void keyring_free(struct keyring *kr);

/* Read-only accessors (for jwt.c and cred.c). */
size_t keyring_count(const struct keyring *kr);
const struct keyring_key *keyring_get(const struct keyring *kr, size_t i);
/* The current signing key, NULL when the local issuer is disabled. */
const struct keyring_key *keyring_signer(const struct keyring *kr);
/* KEYS_CRED_KEY_LEN bytes. */
const unsigned char *keyring_cred_key(const struct keyring *kr);
/* The credential key's prepared HMAC context. */
const struct keys_hmac *keyring_cred_hmac(const struct keyring *kr);
/* HMAC-SHA256 of data under a prepared key, into out. 0, or -EIO (out
 * then cleared). */
int keys_hmac(const struct keys_hmac *h, const void *data, size_t len,
              unsigned char out[KEYS_HMAC_LEN]);
/* Whether some key verifies tokens of this algorithm. */
bool keyring_has_alg(const struct keyring *kr, enum key_alg alg);

/* Make a new signing key current; the old ones stay accepted.
 * ret_kid (may be NULL) receives the new kid. */
int keys_rotate(const char *state_dir, char ret_kid[KEYS_KID_LEN + 1], struct sbx_error *err);
/* Delete an old signing key. -EBUSY for the current one, -ENOENT if absent. */
int keys_remove(const char *state_dir, const char *kid, struct sbx_error *err);

struct keys_info {
        char kid[KEYS_KID_LEN + 1];
        bool current;
        int64_t created_ms; /* mtime of the key file */
};
/* The signing keys on disk, oldest first; *ret is malloc'd (free()).
 * Creates nothing: a missing directory gives 0 keys. */
int keys_list(const char *state_dir, struct keys_info **ret, size_t *ret_n, struct sbx_error *err);

/* kid syntax of own keys: KEYS_KID_LEN lowercase hex characters. */
bool keys_kid_is_valid(const char *kid);
