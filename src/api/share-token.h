/* SPDX-License-Identifier: MIT */
/* Preview share tokens: 48 lowercase hex digits, so that one fits in a DNS
 * label beside its port ("8000-<token>.<preview_domain>", 54 of the 63
 * bytes a label may have):
 *
 *   <id: 16 hex, 8 random bytes> <mac: 32 hex, HMAC-SHA256 truncated to 16 bytes>
 *
 * The MAC, under the daemon's credential key, covers "sbxp1", the id, the
 * deployment, the sandbox name, its incarnation id, the port, the expiry
 * and whether the share is public, so a token names one port of one
 * incarnation of one sandbox, until one time. The id finds the share's
 * record in the store (deleting it revokes the token); the MAC is never
 * stored. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../store/store.h"

#define SHARE_ID_HEX 16
#define SHARE_MAC_HEX 32
#define SHARE_TOKEN_LEN (SHARE_ID_HEX + SHARE_MAC_HEX)

/* The token of sh under key: out gets SHARE_TOKEN_LEN digits and a NUL. */
int share_token_make(const unsigned char *key, size_t key_len, const struct store_share *sh,
                     char out[SHARE_TOKEN_LEN + 1]);
/* The id of a well-formed token (exactly SHARE_TOKEN_LEN lowercase hex
 * digits) into ret_id; -EINVAL otherwise. */
int share_token_id(const char *tok, size_t len, char ret_id[SHARE_ID_HEX + 1]);
/* Whether tok is sh's token under key (compared in constant time). */
bool share_token_valid(const unsigned char *key, size_t key_len, const struct store_share *sh,
                       const char *tok, size_t len);
/* A preview host name "<port>-<token>.<domain>[:<port>]", domain compared
 * without case (domain may carry a ":port" of its own, ignored): 0 with
 * the port and the token, -EINVAL for any other host. */
int share_host_parse(const char *host, const char *domain, uint16_t *ret_port,
                     char ret_tok[SHARE_TOKEN_LEN + 1]);
