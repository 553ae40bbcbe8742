/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "util.h"

static enum log_level min_level = LOG_INFO;
static enum log_format line_format = LOG_FORMAT_TEXT;

bool log_enabled(enum log_level level)
{
        return level >= min_level;
}

void log_set_level(enum log_level level)
{
        min_level = level;
}

void log_set_format(enum log_format format)
{
        line_format = format;
}

/* msg into out as a quoted string: JSON's escapes, or logfmt's (the same
 * for quote, backslash and the usual controls). JSON gets only ASCII: a
 * byte past it is \u00XX, so a line is valid JSON whatever a message
 * holds. */
static void quote(const char *msg, char *out, size_t len, bool json)
{
        size_t o = 0;
        out[o++] = '"';
        for (const unsigned char *p = (const unsigned char *)msg; *p && o + 8 < len; p++) {
                if (*p == '"' || *p == '\\') {
                        out[o++] = '\\';
                        out[o++] = (char)*p;
                } else if (*p == '\n' || *p == '\t' || *p == '\r') {
                        out[o++] = '\\';
                        out[o++] = *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
                } else if (*p < 0x20 || *p == 0x7f || (json && *p >= 0x80)) {
                        o += (size_t)snprintf(out + o, len - o, json ? "\\u%04x" : "\\x%02x", *p);
                } else {
                        out[o++] = (char)*p;
                }
        }
        out[o++] = '"';
        out[o] = '\0';
}

void log_msg(enum log_level level, const char *fmt, ...)
{
        static const char *const names[] = {"debug", "info", "warn", "error"};
        if (level < min_level)
                return;
        char ts[32], msg[2048], line[4200];
        format_rfc3339(now_ms(), ts);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (line_format == LOG_FORMAT_TEXT) {
                snprintf(line, sizeof(line), "%s %s %s", ts, names[level], msg);
        } else {
                char q[4100];
                bool json = line_format == LOG_FORMAT_JSON;
                quote(msg, q, sizeof(q), json);
                snprintf(line, sizeof(line),
                         json ? "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":%s}"
                              : "ts=%s level=%s msg=%s",
                         ts, names[level], q);
        }
        /* One fputs per line keeps lines whole between threads. */
        flockfile(stderr);
        fputs(line, stderr);
        fputc('\n', stderr);
        funlockfile(stderr);
}
