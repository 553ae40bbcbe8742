/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level level)
{
        min_level = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
        static const char *const names[] = {"debug", "info", "warn", "error"};
        if (level < min_level)
                return;
        char ts[32], line[2048];
        format_rfc3339(now_ms(), ts);
        int n = snprintf(line, sizeof(line), "%s %s ", ts, names[level]);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
        va_end(ap);
        /* One fputs per line keeps lines whole between threads. */
        flockfile(stderr);
        fputs(line, stderr);
        fputc('\n', stderr);
        funlockfile(stderr);
}
