/* SPDX-License-Identifier: MIT */
#include "errors.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../common/inroot.h"

/* The reasons of the table spell these numbers out. */
_Static_assert(NAME_MAX == 255, "errors.h says a name is at most 255 bytes");
_Static_assert(INROOT_PATH_MAX == 4096, "errors.h says a path is at most 4095 bytes");

static const struct api_errno_row rows[] = {
#define API_ERRNO_ROW(ctx, e, status, code, reason) {API_ERR_##ctx, e, status, code, reason},
    API_ERRNO_MAP(API_ERRNO_ROW)
#undef API_ERRNO_ROW
};

static const enum api_err_ctx fallbacks[API_ERR_CONTEXT_COUNT] = {
#define API_ERR_FALLBACK(ctx, parent) [API_ERR_##ctx] = API_ERR_##parent,
    API_ERR_CONTEXTS(API_ERR_FALLBACK)
#undef API_ERR_FALLBACK
};

const struct api_errno_row *api_errno_rows(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(rows);
        return rows;
}

enum api_err_ctx api_err_fallback(enum api_err_ctx ctx)
{
        return fallbacks[ctx];
}

const struct api_errno_row *api_errno_lookup(enum api_err_ctx ctx, int r)
{
        /* A chain ends at a context that is its own fallback and has a
         * default (test-errors checks every one does). */
        for (;;) {
                const struct api_errno_row *def = NULL;
                for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                        if (rows[i].ctx != ctx)
                                continue;
                        if (rows[i].errnum && rows[i].errnum == -r)
                                return &rows[i];
                        if (!rows[i].errnum)
                                def = &rows[i];
                }
                if (def || fallbacks[ctx] == ctx)
                        return def ? def : &rows[0];
                ctx = fallbacks[ctx];
        }
}

static bool ends_with(const char *s, const char *tail)
{
        size_t n = strlen(s), t = strlen(tail);
        return n >= t && !memcmp(s + n - t, tail, t);
}

static void emit(struct api_resp *resp, enum api_err_ctx ctx, int r, const char *own,
                 const char *what, const char *path, json_t *extra)
{
        const struct api_errno_row *row = api_errno_lookup(ctx, r);
        const char *reason = row->reason ? row->reason : "";
        bool with_own = !row->reason || ends_with(row->reason, ": ");
        /* Messages are for people and bounded: a long path is cut. */
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s%s%s%s%s%s", what ? what : "", path ? " " : "",
                 path ? path : "", what ? ": " : "", reason, with_own ? own : "");
        api_error_with(resp, row->status, row->code, msg, extra);
}

static const char *own_message(int r, const struct sbx_error *err)
{
        return err && err->msg[0] ? err->msg : strerror(-r);
}

void api_error_errno(struct api_resp *resp, enum api_err_ctx ctx, int r,
                     const struct sbx_error *err)
{
        emit(resp, ctx, r, own_message(r, err), NULL, NULL, NULL);
}

void api_error_errno_with(struct api_resp *resp, enum api_err_ctx ctx, int r,
                          const struct sbx_error *err, json_t *extra)
{
        emit(resp, ctx, r, own_message(r, err), NULL, NULL, extra);
}

void api_error_path(struct api_resp *resp, enum api_err_ctx ctx, int r, const char *what,
                    const char *path)
{
        emit(resp, ctx, r, strerror(-r), what, path, NULL);
}
