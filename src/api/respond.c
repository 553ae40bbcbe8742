/* SPDX-License-Identifier: MIT */
/* Response bodies: JSON documents, the error body, byte strings as JSON
 * text. */
#include "respond.h"

#include <stdio.h>
#include <string.h>

void api_error(struct api_resp *resp, unsigned status, const char *code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        api_error_with(resp, status, code, msg, NULL);
}

void api_error_with(struct api_resp *resp, unsigned status, const char *code, const char *msg,
                    json_t *extra)
{
        json_t *e = json_pack("{s:s,s:s}", "code", code, "message", msg);
        if (e && extra && json_object_update(e, extra) < 0) {
                json_decref(e);
                e = NULL;
        }
        json_decref(extra);
        api_json(resp, status, e ? json_pack("{s:o}", "error", e) : NULL);
}

void api_json(struct api_resp *resp, unsigned status, json_t *j)
{
        resp->status = status;
        resp->content_type = "application/json";
        resp->body.len = 0;
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!s || buf_append(&resp->body, s, strlen(s)) < 0) {
                /* The bytes of the literal, not its NUL: a JSON body ends at
                 * its closing brace. */
                static const char oom[] =
                    "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
                resp->status = 500;
                resp->body.len = 0;
                buf_append(&resp->body, oom, sizeof(oom) - 1);
        }
        free(s);
}

/* Length of the valid UTF-8 sequence at s[i], or 0 if there is none
 * (overlongs, surrogates and values past U+10FFFF are invalid). */
static size_t utf8_valid_len(const uint8_t *s, size_t i, size_t len)
{
        uint8_t c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf) {
                n = 1;
                cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
                n = 2;
                cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                n = 3;
                cp = c & 0x07;
        } else {
                return 0;
        }
        if (i + n >= len)
                return 0;
        for (size_t k = 1; k <= n; k++) {
                if ((s[i + k] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return n + 1;
}

char *utf8_sanitize(const uint8_t *s, size_t len, size_t *ret_len)
{
        /* Worst case every byte becomes the 3-byte U+FFFD. */
        if (len > (SIZE_MAX - 1) / 3)
                return NULL;
        char *out = malloc(len * 3 + 1);
        if (!out)
                return NULL;
        size_t o = 0, i = 0;
        while (i < len) {
                size_t n = utf8_valid_len(s, i, len);
                if (n) {
                        memcpy(out + o, s + i, n);
                        o += n;
                        i += n;
                } else {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        out[o] = '\0';
        *ret_len = o;
        return out;
}

/* A byte JSON escapes: '"', '\\' and the control characters. */
static int append_escape(struct buf *b, uint8_t c)
{
        char esc[8];
        const char *e = esc;
        switch (c) {
        case '"':
                e = "\\\"";
                break;
        case '\\':
                e = "\\\\";
                break;
        case '\n':
                e = "\\n";
                break;
        case '\r':
                e = "\\r";
                break;
        case '\t':
                e = "\\t";
                break;
        default:
                snprintf(esc, sizeof(esc), "\\u%04x", c);
        }
        return buf_append(b, e, strlen(e));
}

/* The byte at s[i] that is not copied as it is: a UTF-8 sequence (whole),
 * U+FFFD for an invalid one, or an escape; *ret_used input bytes. */
static int append_special(struct buf *b, const uint8_t *s, size_t i, size_t len, size_t *ret_used)
{
        *ret_used = 1;
        if (s[i] < 0x80)
                return append_escape(b, s[i]);
        size_t n = utf8_valid_len(s, i, len);
        if (!n)
                return buf_append(b, "\xef\xbf\xbd", 3);
        *ret_used = n;
        return buf_append(b, s + i, n);
}

static bool is_plain(uint8_t c)
{
        return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* Append bytes as a JSON string literal, invalid UTF-8 as U+FFFD. One
 * pass, runs of plain bytes copied whole: output can be megabytes. */
static int json_append_text(struct buf *b, const uint8_t *s, size_t len)
{
        int r = buf_append(b, "\"", 1);
        size_t i = 0;
        while (r == 0 && i < len) {
                size_t run = i, used = 0;
                while (i < len && is_plain(s[i]))
                        i++;
                if (i > run)
                        r = buf_append(b, s + run, i - run);
                if (r == 0 && i < len) {
                        r = append_special(b, s, i, len, &used);
                        i += used;
                }
        }
        return r == 0 ? buf_append(b, "\"", 1) : r;
}

void api_json_text(struct api_resp *resp, unsigned status, json_t *head, const char *k1,
                   const void *d1, size_t l1, const char *k2, const void *d2, size_t l2)
{
        char *h = head ? json_dumps(head, JSON_COMPACT) : NULL;
        json_decref(head);
        size_t hl = h ? strlen(h) : 0;
        struct buf *b = &resp->body;
        b->len = 0;
        /* head is an object: reopen it, add the two strings, close it. */
        int r = hl >= 2 && h[hl - 1] == '}' ? 0 : -EINVAL;
        if (r == 0)
                r = buf_append(b, h, hl - 1);
        if (r == 0)
                r = buf_printf(b, "%s\"%s\":", hl > 2 ? "," : "", k1);
        if (r == 0)
                r = json_append_text(b, d1, l1);
        if (r == 0)
                r = buf_printf(b, ",\"%s\":", k2);
        if (r == 0)
                r = json_append_text(b, d2, l2);
        if (r == 0)
                r = buf_append(b, "}", 1);
        free(h);
        if (r < 0) {
                api_error(resp, 500, "internal", "out of memory");
                return;
        }
        resp->status = status;
        resp->content_type = "application/json";
}

void api_no_content(struct api_resp *resp)
{
        resp->status = 204;
        resp->content_type = NULL;
        resp->body.len = 0;
}

int api_resp_header(struct api_resp *resp, const char *name, size_t name_len, const char *value,
                    size_t value_len)
{
        static const char nul = '\0';
        int r;
        if (!resp->headers.data && !resp->headers.max)
                buf_init(&resp->headers, 256 << 10); /* a zeroed resp's: the cap of a head */
        if ((r = buf_append(&resp->headers, name, name_len)) < 0 ||
            (r = buf_append(&resp->headers, &nul, 1)) < 0 ||
            (r = buf_append(&resp->headers, value, value_len)) < 0 ||
            (r = buf_append(&resp->headers, &nul, 1)) < 0)
                return r;
        return 0;
}
