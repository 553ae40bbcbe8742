/* SPDX-License-Identifier: MIT */
#include "share-token.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char hexd[] = "0123456789abcdef";

static void hex(const unsigned char *in, size_t n, char *out)
{
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = hexd[in[i] >> 4];
                out[2 * i + 1] = hexd[in[i] & 15];
        }
        out[2 * n] = '\0';
}

static void put_be(unsigned char *out, uint64_t v, int n)
{
        for (int i = 0; i < n; i++)
                out[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
}

static int mac_hex(const unsigned char *key, size_t key_len, const struct store_share *sh,
                   char out[SHARE_MAC_HEX + 1])
{
        /* "sbxp1" NUL id NUL deployment NUL name NUL, then the numbers. */
        unsigned char msg[8 + SHARE_ID_HEX + 2 * (SBX_NAME_MAX + 1) + 8 + 2 + 8 + 1 + 8];
        size_t n = 0;
        const char *parts[] = {"sbxp1", sh->id, sh->deployment, sh->name};
        for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
                size_t l = strnlen(parts[i], SBX_NAME_MAX + 1);
                if (l > SBX_NAME_MAX || n + l + 1 > sizeof(msg) - 19)
                        return -EINVAL;
                memcpy(msg + n, parts[i], l);
                msg[n + l] = '\0';
                n += l + 1;
        }
        put_be(msg + n, sh->sandbox_id, 8);
        put_be(msg + n + 8, sh->port, 2);
        put_be(msg + n + 10, (uint64_t)sh->expires_at, 8);
        msg[n + 18] = sh->public ? 1 : 0;
        n += 19;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        if (!HMAC(EVP_sha256(), key, (int)key_len, msg, n, md, &md_len) || md_len < 16)
                return -EIO;
        hex(md, SHARE_MAC_HEX / 2, out);
        return 0;
}

static bool all_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!strchr(hexd, s[i]) || !s[i])
                        return false;
        return true;
}

int share_token_make(const unsigned char *key, size_t key_len, const struct store_share *sh,
                     char out[SHARE_TOKEN_LEN + 1])
{
        char mac[SHARE_MAC_HEX + 1];
        if (strlen(sh->id) != SHARE_ID_HEX || !all_hex(sh->id, SHARE_ID_HEX))
                return -EINVAL;
        int r = mac_hex(key, key_len, sh, mac);
        if (r < 0)
                return r;
        memcpy(out, sh->id, SHARE_ID_HEX);
        memcpy(out + SHARE_ID_HEX, mac, SHARE_MAC_HEX + 1);
        return 0;
}

int share_token_id(const char *tok, size_t len, char ret_id[SHARE_ID_HEX + 1])
{
        if (len != SHARE_TOKEN_LEN || !all_hex(tok, len))
                return -EINVAL;
        memcpy(ret_id, tok, SHARE_ID_HEX);
        ret_id[SHARE_ID_HEX] = '\0';
        return 0;
}

bool share_token_valid(const unsigned char *key, size_t key_len, const struct store_share *sh,
                       const char *tok, size_t len)
{
        char want[SHARE_TOKEN_LEN + 1];
        if (len != SHARE_TOKEN_LEN || share_token_make(key, key_len, sh, want) < 0)
                return false;
        return CRYPTO_memcmp(want, tok, SHARE_TOKEN_LEN) == 0;
}

/* The length of s without a trailing ":digits". */
static size_t without_port(const char *s, size_t n)
{
        for (size_t i = n; i > 0; i--) {
                if (s[i - 1] == ':')
                        return i - 1;
                if (s[i - 1] < '0' || s[i - 1] > '9')
                        break;
        }
        return n;
}

int share_host_parse(const char *host, const char *domain, uint16_t *ret_port,
                     char ret_tok[SHARE_TOKEN_LEN + 1])
{
        if (!host || !domain || !*domain)
                return -EINVAL;
        size_t hl = without_port(host, strlen(host));
        size_t dl = without_port(domain, strlen(domain));
        /* "<1..5 digits>-<48 hex>." then the domain */
        const char *dash = memchr(host, '-', hl);
        if (!dash || dash == host || dash - host > 5)
                return -EINVAL;
        size_t pl = (size_t)(dash - host);
        const char *tok = dash + 1;
        if (hl != pl + 1 + SHARE_TOKEN_LEN + 1 + dl || tok[SHARE_TOKEN_LEN] != '.' ||
            strncasecmp(tok + SHARE_TOKEN_LEN + 1, domain, dl) || !all_hex(tok, SHARE_TOKEN_LEN))
                return -EINVAL;
        unsigned v = 0;
        for (size_t i = 0; i < pl; i++) {
                if (host[i] < '0' || host[i] > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned)(host[i] - '0');
        }
        if (host[0] == '0' || v < 1 || v > 65535)
                return -EINVAL;
        *ret_port = (uint16_t)v;
        memcpy(ret_tok, tok, SHARE_TOKEN_LEN);
        ret_tok[SHARE_TOKEN_LEN] = '\0';
        return 0;
}
