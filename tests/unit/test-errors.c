/* SPDX-License-Identifier: MIT */
/* Error bodies: the errno-to-HTTP table (src/api/errors.h) and the body
 * api_json falls back to when it cannot build one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/api/errors.h"

static struct api_resp resp_init(void)
{
        struct api_resp resp = {.status = 0, .body_fd = -1};
        buf_init(&resp.body, 0);
        return resp;
}

/* resp's error object, parsed; checks the status and the code. */
static json_t *error_of(struct api_resp *resp, unsigned status, const char *code)
{
        assert_int_equal(resp->status, status);
        assert_string_equal(resp->content_type, "application/json");
        json_error_t e;
        json_t *j = json_loadb(resp->body.data, resp->body.len, 0, &e);
        assert_non_null(j);
        json_t *err = json_incref(json_object_get(j, "error"));
        json_decref(j);
        assert_non_null(err);
        assert_string_equal(json_string_value(json_object_get(err, "code")), code);
        buf_free(&resp->body);
        return err;
}

static void expect_message(struct api_resp *resp, unsigned status, const char *code,
                           const char *msg)
{
        json_t *err = error_of(resp, status, code);
        assert_string_equal(json_string_value(json_object_get(err, "message")), msg);
        json_decref(err);
}

/* Every context's chain ends at a default, and no (context, errno) is
 * listed twice. */
static void test_table_shape(void **state)
{
        size_t n;
        const struct api_errno_row *rows = api_errno_rows(&n);
        assert_true(n > 0);
        for (int c = 0; c < API_ERR_CONTEXT_COUNT; c++) {
                enum api_err_ctx ctx = (enum api_err_ctx)c;
                int hops = 0;
                bool has_default = false;
                while (!has_default) {
                        for (size_t i = 0; i < n; i++)
                                has_default |= rows[i].ctx == ctx && rows[i].errnum == 0;
                        if (has_default)
                                break;
                        assert_int_not_equal(api_err_fallback(ctx), ctx);
                        ctx = api_err_fallback(ctx);
                        assert_true(++hops < API_ERR_CONTEXT_COUNT);
                }
        }
        for (size_t i = 0; i < n; i++) {
                assert_true(rows[i].status >= 400 && rows[i].status < 600);
                assert_non_null(rows[i].code);
                for (size_t k = i + 1; k < n; k++)
                        assert_false(rows[i].ctx == rows[k].ctx &&
                                     rows[i].errnum == rows[k].errnum);
        }
}

struct want {
        enum api_err_ctx ctx;
        int errnum;
        unsigned status;
        const char *code;
};

/* What the four mappings this table replaced answered. */
static const struct want wants[] = {
    {API_ERR_CONTROL, EINVAL, 400, "invalid_argument"},
    {API_ERR_CONTROL, EACCES, 401, "unauthenticated"},
    {API_ERR_CONTROL, EDQUOT, 402, "cap_reached"},
    {API_ERR_CONTROL, ENOENT, 404, "sandbox_not_found"},
    {API_ERR_CONTROL, EPERM, 409, "not_enabled"},
    {API_ERR_CONTROL, EBUSY, 409, "invalid_state"},
    {API_ERR_CONTROL, ENOTSUP, 409, "unsupported_class"},
    {API_ERR_CONTROL, E2BIG, 413, "too_large"},
    {API_ERR_CONTROL, EHOSTDOWN, 502, "bring_up_failed"},
    {API_ERR_CONTROL, EAGAIN, 503, "unavailable"},
    {API_ERR_CONTROL, ENOMEM, 500, "internal"},
    {API_ERR_CONTROL, EIO, 500, "internal"},
    {API_ERR_ENTER, ENOENT, 401, "credential_stale"},
    {API_ERR_ENTER, ENOTSUP, 502, "bring_up_failed"},
    {API_ERR_CKPT, ENOENT, 409, "no_checkpoint"},
    {API_ERR_CKPT, EEXIST, 409, "already_exists"},
    {API_ERR_CKPT, ENOTSUP, 409, "unsupported_class"},
    {API_ERR_CKPT, EDQUOT, 402, "cap_reached"},
    {API_ERR_ENTER, EHOSTDOWN, 502, "bring_up_failed"},
    {API_ERR_ENTER, EAGAIN, 503, "unavailable"},
    {API_ERR_ENTER, EIO, 500, "internal"},
    {API_ERR_GONE, ENOENT, 404, "sandbox_not_found"},
    {API_ERR_GONE, EPIPE, 404, "sandbox_not_found"},
    {API_ERR_AGENT, ENOENT, 404, "process_not_found"},
    {API_ERR_AGENT, EINVAL, 400, "invalid_argument"},
    {API_ERR_AGENT, EDQUOT, 402, "cap_reached"},
    {API_ERR_AGENT, EBUSY, 409, "invalid_state"},
    {API_ERR_AGENT, EPIPE, 502, "bring_up_failed"},
    {API_ERR_AGENT, EACCES, 502, "bring_up_failed"},
    {API_ERR_AGENT, ETIME, 502, "bring_up_failed"},
    {API_ERR_STDIN, ETIME, 408, "timeout"},
    {API_ERR_STDIN, EBUSY, 409, "invalid_state"},
    {API_ERR_STDIN, ENOENT, 404, "process_not_found"},
    {API_ERR_STDIN, EREMOTEIO, 502, "bring_up_failed"},
    {API_ERR_ROOT, ENOENT, 502, "bring_up_failed"},
    {API_ERR_ROOT, EPIPE, 502, "bring_up_failed"},
    {API_ERR_PATH, ENAMETOOLONG, 400, "invalid_argument"},
    {API_ERR_PATH, EINVAL, 400, "invalid_argument"},
    {API_ERR_FILE_READ, ENOENT, 404, "file_not_found"},
    {API_ERR_FILE_READ, EACCES, 404, "file_not_found"},
    {API_ERR_FILE_READ, EIO, 404, "file_not_found"},
    {API_ERR_FILE_WRITE, ENOSPC, 402, "cap_reached"},
    {API_ERR_FILE_WRITE, EDQUOT, 402, "cap_reached"},
    {API_ERR_FILE_WRITE, EFBIG, 413, "too_large"},
    {API_ERR_FILE_WRITE, E2BIG, 413, "too_large"},
    {API_ERR_FILE_WRITE, ENOENT, 404, "file_not_found"},
    {API_ERR_FILE_WRITE, ENOTDIR, 404, "file_not_found"},
    {API_ERR_FILE_WRITE, EISDIR, 400, "invalid_argument"},
    {API_ERR_FILE_WRITE, ENAMETOOLONG, 400, "invalid_argument"},
    {API_ERR_FILE_WRITE, EACCES, 403, "permission_denied"},
    {API_ERR_FILE_WRITE, EPERM, 403, "permission_denied"},
    {API_ERR_FILE_WRITE, EROFS, 403, "permission_denied"},
    {API_ERR_FILE_WRITE, EBUSY, 403, "permission_denied"},
    {API_ERR_FILE_WRITE, ELOOP, 400, "invalid_argument"},
    {API_ERR_FILE_WRITE, EIO, 400, "invalid_argument"},
};

static void test_statuses_and_codes(void **state)
{
        for (size_t i = 0; i < ARRAY_SIZE(wants); i++) {
                const struct api_errno_row *row = api_errno_lookup(wants[i].ctx, -wants[i].errnum);
                assert_int_equal(row->status, wants[i].status);
                assert_string_equal(row->code, wants[i].code);
        }
}

static void test_messages(void **state)
{
        struct api_resp resp = resp_init();
        struct sbx_error err = {0};
        sbx_error_say(&err, ENOENT, "sandbox 'x' does not exist");
        api_error_errno(&resp, API_ERR_CONTROL, -ENOENT, &err);
        expect_message(&resp, 404, "sandbox_not_found", "sandbox 'x' does not exist");

        /* No message of its own: strerror's. */
        api_error_errno(&resp, API_ERR_CONTROL, -EAGAIN, NULL);
        expect_message(&resp, 503, "unavailable", strerror(EAGAIN));

        sbx_error_say(&err, EPIPE, "agent: connection lost during exec");
        api_error_errno(&resp, API_ERR_AGENT, -EPIPE, &err);
        expect_message(&resp, 502, "bring_up_failed",
                       "sandbox agent: agent: connection lost during exec");

        api_error_path(&resp, API_ERR_FILE_READ, -EISDIR, "cannot read", "/workspace");
        expect_message(&resp, 404, "file_not_found", "cannot read /workspace: is a directory");
        api_error_path(&resp, API_ERR_FILE_WRITE, -ENOSPC, "cannot write", "/workspace/f");
        expect_message(&resp, 402, "cap_reached",
                       "cannot write /workspace/f: the sandbox's disk is full");
        api_error_path(&resp, API_ERR_FILE_WRITE, -EIO, "cannot write", "/workspace/f");
        expect_message(&resp, 400, "invalid_argument",
                       "cannot write /workspace/f: Input/output error");
        api_error_path(&resp, API_ERR_PATH, -ENAMETOOLONG, "path", NULL);
        expect_message(&resp, 400, "invalid_argument",
                       "path: a file or directory name is at most 255 bytes, a path at most 4084");
        api_error_path(&resp, API_ERR_PATH, -EINVAL, "path", NULL);
        expect_message(&resp, 400, "invalid_argument", "path: not a usable path");
}

/* A timed-out stdin write carries what got through, after code and message. */
static void test_extra_members(void **state)
{
        struct api_resp resp = resp_init();
        struct sbx_error err = {0};
        sbx_error_say(&err, ETIME, "stdin not taken in time");
        api_error_errno_with(&resp, API_ERR_STDIN, -ETIME, &err, json_pack("{s:I}", "written", 7));
        assert_int_equal(buf_terminate(&resp.body), 0);
        assert_string_equal(resp.body.data, "{\"error\":{\"code\":\"timeout\",\"message\":\"stdin "
                                            "not taken in time\",\"written\":7}}");
        json_t *e = error_of(&resp, 408, "timeout");
        json_decref(e);
}

/* A body that cannot be serialized (here: none at all) becomes the fixed
 * 500: exactly its JSON text, no NUL after the closing brace. */
static void test_fallback_body(void **state)
{
        static const char want[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        struct api_resp resp = resp_init();
        api_json(&resp, 200, NULL);
        assert_int_equal(resp.status, 500);
        assert_int_equal(resp.body.len, sizeof(want) - 1);
        assert_memory_equal(resp.body.data, want, sizeof(want) - 1);
        json_t *e = error_of(&resp, 500, "internal");
        json_decref(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_table_shape),   cmocka_unit_test(test_statuses_and_codes),
            cmocka_unit_test(test_messages),      cmocka_unit_test(test_extra_members),
            cmocka_unit_test(test_fallback_body),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
