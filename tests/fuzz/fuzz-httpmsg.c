/* SPDX-License-Identifier: MIT */
/* libFuzzer target for what the port proxy parses of a sandbox's server
 * and of a client: a response head, a chunked body, a request URI's
 * rest, a preview host name.
 *
 * The first input byte picks a mode:
 *   0: the rest is a response head (through its first empty line);
 *   1: the rest is a chunked body, fed in pieces of the second byte's
 *      size, decoded into a buffer of the third byte's size: what comes
 *      out never passes what went in;
 *   2: the rest is a Host header for a preview domain;
 *   3: the rest is a raw request URI. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/api/httpmsg.h"
#include "src/api/share-token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_head(const char *s, size_t n)
{
        struct httpmsg_head h;
        size_t end = httpmsg_head_end(s, n);
        if (end && httpmsg_parse_response(s, end, &h) == 0) {
                if (h.status < 100 || h.status > 599 || h.n_headers > HTTPMSG_MAX_HEADERS)
                        abort();
                for (size_t i = 0; i < h.n_headers; i++)
                        if (h.headers[i].name.p < s ||
                            h.headers[i].value.p + h.headers[i].value.n > s + end)
                                abort();
        }
}

static void fuzz_chunked(const uint8_t *d, size_t n)
{
        if (n < 2)
                return;
        size_t step = (size_t)d[0] + 1, omax = (size_t)d[1] + 1;
        const char *in = (const char *)d + 2;
        size_t len = n - 2, pos = 0, total = 0;
        char out[256];
        struct httpmsg_chunked ch = {0};
        while (pos < len) {
                size_t used = 0, got = 0;
                size_t take = len - pos < step ? len - pos : step;
                int r = httpmsg_chunked_run(&ch, in + pos, take, &used, out, omax, &got);
                if (used > take || got > omax)
                        abort();
                pos += used;
                total += got;
                if (r != 0 || (used == 0 && got == 0))
                        break;
        }
        if (total > len)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        char *s = malloc(size);
        if (!s)
                return 0;
        memcpy(s, data + 1, size - 1);
        s[size - 1] = '\0';
        uint16_t port;
        char tok[SHARE_TOKEN_LEN + 1];
        switch (data[0] & 3) {
        case 0:
                fuzz_head(s, size - 1);
                break;
        case 1:
                fuzz_chunked(data + 1, size - 1);
                break;
        case 2:
                if (share_host_parse(s, "preview.example.com", &port, tok) == 0 &&
                    (port == 0 || strlen(tok) != SHARE_TOKEN_LEN))
                        abort();
                break;
        default: {
                const char *rest = httpmsg_uri_rest(s, 5);
                if (rest && (rest < s || rest > s + strlen(s)))
                        abort();
                break;
        }
        }
        free(s);
        return 0;
}
