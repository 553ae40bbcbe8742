/* SPDX-License-Identifier: MIT */
#include "httpmsg.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

size_t httpmsg_head_end(const char *buf, size_t len)
{
        for (size_t i = 0; i + 3 < len; i++)
                if (buf[i] == '\r' && !memcmp(buf + i, "\r\n\r\n", 4))
                        return i + 4;
        return 0;
}

bool httpmsg_span_is(struct httpmsg_span sp, const char *s)
{
        return strlen(s) == sp.n && !strncasecmp(sp.p, s, sp.n);
}

bool httpmsg_hop_by_hop(struct httpmsg_span name)
{
        static const char *const hop[] = {"Connection",
                                          "Keep-Alive",
                                          "Proxy-Connection",
                                          "TE",
                                          "Trailer",
                                          "Transfer-Encoding",
                                          "Upgrade",
                                          "Proxy-Authenticate",
                                          "Proxy-Authorization"};
        for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
                if (httpmsg_span_is(name, hop[i]))
                        return true;
        return false;
}

/* RFC 9110 5.6.2: tchar. */
static bool is_tchar(unsigned char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool is_digit(char ch)
{
        return ch >= '0' && ch <= '9';
}

/* "HTTP/1.x NNN reason" */
static int parse_status_line(const char *p, size_t n, unsigned *ret)
{
        if (n < 12 || memcmp(p, "HTTP/1.", 7) || !is_digit(p[7]) || p[8] != ' ' ||
            !is_digit(p[9]) || !is_digit(p[10]) || !is_digit(p[11]) || (n > 12 && p[12] != ' '))
                return -EPROTO;
        unsigned st =
            (unsigned)(p[9] - '0') * 100 + (unsigned)(p[10] - '0') * 10 + (unsigned)(p[11] - '0');
        if (st < 100 || st > 599)
                return -EPROTO;
        *ret = st;
        return 0;
}

static struct httpmsg_span trim(const char *p, size_t n)
{
        while (n && (*p == ' ' || *p == '\t')) {
                p++;
                n--;
        }
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                n--;
        return (struct httpmsg_span){p, n};
}

static int parse_length(struct httpmsg_span v, int64_t *ret)
{
        if (v.n == 0 || v.n > 18)
                return -EPROTO;
        int64_t x = 0;
        for (size_t i = 0; i < v.n; i++) {
                if (!is_digit(v.p[i]))
                        return -EPROTO;
                x = x * 10 + (v.p[i] - '0');
        }
        if (*ret >= 0 && *ret != x)
                return -EPROTO; /* two lengths that differ */
        *ret = x;
        return 0;
}

/* The last coding of a Transfer-Encoding value is chunked. */
static bool ends_chunked(struct httpmsg_span v)
{
        const char *comma = NULL;
        for (size_t i = 0; i < v.n; i++)
                if (v.p[i] == ',')
                        comma = v.p + i;
        struct httpmsg_span last =
            comma ? trim(comma + 1, (size_t)(v.p + v.n - comma - 1)) : trim(v.p, v.n);
        return httpmsg_span_is(last, "chunked");
}

static bool has_token(struct httpmsg_span v, const char *tok)
{
        size_t i = 0;
        while (i < v.n) {
                size_t j = i;
                while (j < v.n && v.p[j] != ',')
                        j++;
                if (httpmsg_span_is(trim(v.p + i, j - i), tok))
                        return true;
                i = j + 1;
        }
        return false;
}

static int parse_header(const char *p, size_t n, struct httpmsg_head *h)
{
        size_t k = 0;
        while (k < n && is_tchar((unsigned char)p[k]))
                k++;
        if (k == 0 || k == n || p[k] != ':')
                return -EPROTO; /* also a space before the colon, or an obs-fold */
        if (h->n_headers == HTTPMSG_MAX_HEADERS)
                return -EPROTO;
        struct httpmsg_header *hd = &h->headers[h->n_headers++];
        hd->name = (struct httpmsg_span){p, k};
        hd->value = trim(p + k + 1, n - k - 1);
        for (size_t i = 0; i < hd->value.n; i++)
                if ((unsigned char)hd->value.p[i] < 0x20 && hd->value.p[i] != '\t')
                        return -EPROTO;
        if (httpmsg_span_is(hd->name, "Content-Length"))
                return parse_length(hd->value, &h->content_length);
        if (httpmsg_span_is(hd->name, "Transfer-Encoding"))
                h->chunked = ends_chunked(hd->value);
        else if (httpmsg_span_is(hd->name, "Connection"))
                h->close = h->close || has_token(hd->value, "close");
        return 0;
}

int httpmsg_parse_response(const char *buf, size_t len, struct httpmsg_head *ret)
{
        struct httpmsg_head *h = ret;
        memset(h, 0, sizeof(*h));
        h->content_length = -1;
        size_t pos = 0;
        bool first = true;
        while (pos < len) {
                const char *eol = memchr(buf + pos, '\n', len - pos);
                if (!eol || eol == buf + pos || eol[-1] != '\r')
                        return -EPROTO;
                size_t n = (size_t)(eol - (buf + pos)) - 1;
                if (n == 0)
                        return first ? -EPROTO : 0; /* the empty line: the end */
                int r = first ? parse_status_line(buf + pos, n, &h->status)
                              : parse_header(buf + pos, n, h);
                if (r < 0)
                        return r;
                first = false;
                pos = (size_t)(eol - buf) + 1;
        }
        return -EPROTO; /* no empty line */
}

/* ---- chunked ---- */

enum {
        CH_SIZE,     /* hex digits of a chunk size */
        CH_EXT,      /* ;extension up to CR */
        CH_SIZE_LF,  /* the LF of the size line */
        CH_DATA,     /* chunk bytes */
        CH_DATA_CR,  /* the CRLF after them */
        CH_DATA_LF,  /* */
        CH_TRAILER,  /* a trailer line, or the empty line that ends */
        CH_TRAIL_LF, /* */
        CH_DONE,
};

#define CH_LINE_MAX 8192
#define CH_DIGITS_MAX 15 /* 2^60: more than any body */

static int hexval(char ch)
{
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

static int on_size(struct httpmsg_chunked *d, char ch)
{
        int v = hexval(ch);
        if (v >= 0) {
                if (++d->digits > CH_DIGITS_MAX)
                        return -EPROTO;
                d->left = d->left << 4 | (uint64_t)v;
                return 0;
        }
        if (d->digits == 0)
                return -EPROTO;
        if (ch == '\r') {
                d->state = CH_SIZE_LF;
                return 0;
        }
        if (ch != ';' && ch != ' ' && ch != '\t')
                return -EPROTO;
        d->state = CH_EXT;
        d->line = 0;
        return 0;
}

static int on_byte(struct httpmsg_chunked *d, char ch)
{
        switch (d->state) {
        case CH_SIZE:
                return on_size(d, ch);
        case CH_EXT:
                if (ch == '\r')
                        d->state = CH_SIZE_LF;
                else if (++d->line > CH_LINE_MAX || ch == '\n')
                        return -EPROTO;
                return 0;
        case CH_SIZE_LF:
                if (ch != '\n')
                        return -EPROTO;
                d->state = d->left ? CH_DATA : CH_TRAILER;
                d->line = 0;
                return 0;
        case CH_DATA_CR:
                d->state = CH_DATA_LF;
                return ch == '\r' ? 0 : -EPROTO;
        case CH_DATA_LF:
                d->state = CH_SIZE;
                d->digits = 0;
                d->left = 0;
                return ch == '\n' ? 0 : -EPROTO;
        case CH_TRAILER:
                if (ch == '\r')
                        d->state = CH_TRAIL_LF;
                else if (++d->line > CH_LINE_MAX || ch == '\n')
                        return -EPROTO;
                return 0;
        case CH_TRAIL_LF:
                if (ch != '\n')
                        return -EPROTO;
                d->state = d->line == 0 ? CH_DONE : CH_TRAILER;
                d->line = 0;
                return 0;
        default:
                return -EPROTO;
        }
}

int httpmsg_chunked_run(struct httpmsg_chunked *d, const char *in, size_t in_len, size_t *ret_used,
                        char *out, size_t out_max, size_t *ret_out)
{
        size_t i = 0, o = 0;
        int r = 0;
        while (i < in_len && d->state != CH_DONE) {
                if (d->state == CH_DATA) {
                        size_t n = in_len - i;
                        if (n > d->left)
                                n = (size_t)d->left;
                        if (n > out_max - o)
                                n = out_max - o;
                        if (n == 0)
                                break; /* out is full */
                        memcpy(out + o, in + i, n);
                        i += n;
                        o += n;
                        d->left -= n;
                        if (d->left == 0)
                                d->state = CH_DATA_CR;
                        continue;
                }
                if ((r = on_byte(d, in[i])) < 0)
                        break;
                i++;
        }
        *ret_used = i;
        *ret_out = o;
        if (r < 0)
                return r;
        return d->state == CH_DONE ? 1 : 0;
}

const char *httpmsg_uri_rest(const char *uri, unsigned skip)
{
        const char *p = uri;
        for (unsigned k = 0; k < skip; k++) {
                while (*p == '/')
                        p++;
                size_t n = strcspn(p, "/?");
                if (n == 0)
                        return NULL;
                p += n;
        }
        return p;
}
