/* SPDX-License-Identifier: MIT */
/* Error bodies: the body api_json falls back to when it cannot build one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "src/api/respond.h"

static struct api_resp resp_init(void)
{
        struct api_resp resp = { .status = 0, .body_fd = -1 };
        buf_init(&resp.body, 0);
        return resp;
}

/* A body that cannot be serialized (here: none at all) becomes the fixed
 * 500: exactly its JSON text, no NUL after the closing brace. */
static void test_fallback_body(void **state)
{
        static const char want[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        struct api_resp resp = resp_init();
        api_json(&resp, 200, NULL);
        assert_int_equal(resp.status, 500);
        assert_int_equal(resp.body.len, sizeof(want) - 1);
        assert_memory_equal(resp.body.data, want, sizeof(want) - 1);
        json_error_t e;
        json_t *j = json_loadb(resp.body.data, resp.body.len, 0, &e);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
                            "internal");
        json_decref(j);
        buf_free(&resp.body);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fallback_body),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
