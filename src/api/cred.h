/* SPDX-License-Identifier: MIT */
/* Data-plane credentials: verifiable without a store read, scoped to one
 * incarnation of one sandbox of one deployment, short-lived.
 *
 *   "sbxc1." <base64url payload> "." <base64url HMAC-SHA256>
 *
 * payload (binary, big endian): u8 len, deployment; u8 len, name;
 * u64 sandbox id; i64 expiry (ms since the epoch). The MAC covers
 * everything before the last dot, under keys/credential.key. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../common/names.h"
#include "../common/util.h"
#include "keys.h"

#define CRED_PREFIX "sbxc1."
#define CRED_MAX_LEN 512

struct cred_claims {
        char dep[SBX_NAME_MAX + 1];
        char name[SBX_NAME_MAX + 1];
        uint64_t id; /* unique per sandbox incarnation */
        int64_t exp_ms;
};

/* deployment and name must pass name_is_valid(); *ret is malloc'd.
 * -EINVAL for bad arguments. */
int cred_mint(const struct keyring *kr, const char *deployment, const char *name,
              uint64_t sandbox_id, int64_t expires_at_ms, char **ret, struct sbx_error *err);

/* -EACCES for every rejection (malformed, forged, expired at now_ms),
 * with a message that never holds the credential. The caller then checks
 * the claims against the sandbox addressed (cred_matches). */
int cred_verify(const struct keyring *kr, const char *token, int64_t now_ms,
                struct cred_claims *ret, struct sbx_error *err);

bool cred_matches(const struct cred_claims *c, const char *deployment, const char *name,
                  uint64_t sandbox_id);
