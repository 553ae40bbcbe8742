/* SPDX-License-Identifier: MIT */
/* One-line logs to stderr: "2026-11-30T15:20:00.000Z level message", or
 * (log_format) logfmt `ts=... level=info msg="..."`, or a JSON object per
 * line {"ts", "level", "msg"}, for journald and log shippers.
 * Only the daemon's top level (HTTP handlers, CLI main, manager events)
 * logs; library code returns errors instead. Never log a secret. */
#pragma once

#include <stdbool.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_LOGFMT, LOG_FORMAT_JSON };

void log_set_level(enum log_level level);
void log_set_format(enum log_format format);
/* Whether a line of this level would be written. */
bool log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
