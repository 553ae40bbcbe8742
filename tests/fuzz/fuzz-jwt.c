/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the token parsers: identity tokens (jwt_verify),
 * data-plane credentials (cred_verify) and base64url.
 *
 * The first input byte picks a mode:
 *   0: the rest is a token, verified as is (reaches header parsing and
 *      signature checks);
 *   1: the rest is "<header JSON>\n<payload JSON>", signed here with the
 *      configured HS256 secret, so the claims code sees arbitrary JSON;
 *   2: the rest is a credential;
 *   3: the rest is base64url: a successful decode must re-encode to the
 *      same text (one spelling per value). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include "src/api/cred.h"
#include "src/api/jwt.h"
#include "src/api/keys.h"

#define ISS "http://127.0.0.1:7070"
#define SECRET "fuzzing secret, 32 bytes or more...."

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct keyring *ring;
static char tmpdir[256];

static void cleanup(void)
{
        keyring_free(ring);
        if (tmpdir[0])
                rm_rf_at(AT_FDCWD, tmpdir);
}

static void write_text(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write_all(fd, text, strlen(text)) < 0)
                abort();
        close(fd);
}

static void write_pubkey(EVP_PKEY *pkey, const char *path)
{
        FILE *f = fopen(path, "we");
        if (!f || PEM_write_PUBKEY(f, pkey) != 1)
                abort();
        fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/fuzz-jwt-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir))
                abort();
        atexit(cleanup);
        char state[300], hs[300], es[300], ed[300];
        snprintf(state, sizeof(state), "%s/state", tmpdir);
        snprintf(hs, sizeof(hs), "%s/hs256", tmpdir);
        snprintf(es, sizeof(es), "%s/es256.pem", tmpdir);
        snprintf(ed, sizeof(ed), "%s/ed25519.pem", tmpdir);
        write_text(hs, SECRET "\n");
        EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        EVP_PKEY *edk = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        if (!ec || !edk)
                abort();
        write_pubkey(ec, es);
        write_pubkey(edk, ed);
        EVP_PKEY_free(ec);
        EVP_PKEY_free(edk);
        const char *files[] = {es, ed, NULL};
        struct keys_external_config ext = {.hs256_secret_file = hs, .public_key_files = files};
        struct sbx_error err = {0};
        if (keys_load(state, &ext, &ring, &err) < 0) {
                fprintf(stderr, "keys_load: %s\n", err.msg);
                abort();
        }
        return 0;
}

static void verify_token(const char *token)
{
        struct jwt_policy p;
        struct jwt_claims c;
        struct sbx_error err = {0};
        jwt_policy_init(&p, ISS);
        p.now_s = 1900000000;
        int r = jwt_verify(ring, &p, token, &c, &err);
        if (r == 0 && (!name_is_valid(c.sub) || !name_is_valid(c.acct) || strcmp(c.iss, ISS)))
                abort();
        if (r < 0 && r != -EACCES && r != -ENOMEM)
                abort();
}

static void sign_and_verify(const char *text)
{
        const char *nl = strchr(text, '\n');
        if (!nl)
                return;
        char *h64 = NULL, *p64 = NULL, *s64 = NULL, *tok = NULL;
        unsigned char mac[32];
        unsigned int mac_len = 0;
        if (b64url_encode(text, (size_t)(nl - text), &h64) == 0 &&
            b64url_encode(nl + 1, strlen(nl + 1), &p64) == 0 &&
            asprintf(&tok, "%s.%s", h64, p64) > 0 &&
            HMAC(EVP_sha256(), SECRET, (int)strlen(SECRET), (unsigned char *)tok, strlen(tok), mac,
                 &mac_len) &&
            b64url_encode(mac, mac_len, &s64) == 0) {
                char *full = NULL;
                if (asprintf(&full, "%s.%s", tok, s64) > 0)
                        verify_token(full);
                free(full);
        }
        free(h64);
        free(p64);
        free(s64);
        free(tok);
}

static void b64_round_trip(const char *text, size_t len)
{
        unsigned char *raw = NULL;
        size_t raw_len = 0;
        if (b64url_decode(text, len, &raw, &raw_len) < 0)
                return;
        char *again = NULL;
        if (b64url_encode(raw, raw_len, &again) < 0 || strlen(again) != len ||
            memcmp(again, text, len) != 0)
                abort();
        free(again);
        free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1 || size > 3 * JWT_MAX_LEN)
                return 0;
        char *text = malloc(size);
        if (!text)
                return 0;
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        switch (data[0] % 4) {
        case 0:
                verify_token(text);
                break;
        case 1:
                sign_and_verify(text);
                break;
        case 2: {
                struct cred_claims c;
                int r = cred_verify(ring, text, 0, &c, NULL);
                if (r < 0 && r != -EACCES && r != -ENOMEM)
                        abort();
                break;
        }
        default:
                b64_round_trip((const char *)data + 1, size - 1);
                break;
        }
        free(text);
        return 0;
}
