/* SPDX-License-Identifier: MIT */
/* Unit tests of the recipe parser (src/runtime/recipe.c): every
 * instruction's forms, continuations and comments, the paths WORKDIR and
 * COPY make absolute, and the refusals, each naming its line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "src/runtime/recipe.h"

static int parse(const char *text, struct recipe *r, struct sbx_error *err)
{
        memset(err, 0, sizeof(*err));
        return recipe_parse(text, strlen(text), r, err);
}

static void test_forms(void **state)
{
        struct recipe r;
        struct sbx_error err;
        const char *text = "# a comment\n"
                           "\n"
                           "from base-1\n"
                           "RUN make \\\n"
                           "# a comment inside\n"
                           "  all\n"
                           "run [\"/bin/echo\", \"a b\"]\n"
                           "ENV A=1 B=\"two words\" C='it''s' D=x\\ y\n"
                           "ENV LEGACY the rest here\n"
                           "WORKDIR /srv\n"
                           "WORKDIR app/./sub//\n"
                           "COPY a b dest/\n"
                           "COPY [\"with space\", \"/abs\"]\r\n"
                           "COPY one rel\n";
        assert_int_equal(parse(text, &r, &err), 0);
        assert_int_equal(r.base, RECIPE_BASE_IMAGE);
        assert_string_equal(r.from, "base-1");
        assert_int_equal(r.n_steps, 9);
        assert_int_equal(r.steps[0].op, RECIPE_RUN);
        assert_false(r.steps[0].exec_form);
        assert_string_equal(r.steps[0].args[0], "make   all");
        assert_int_equal(r.steps[0].line, 4);
        assert_true(r.steps[1].exec_form);
        assert_int_equal(r.steps[1].n_args, 2);
        assert_string_equal(r.steps[1].args[1], "a b");
        assert_int_equal(r.steps[1].line, 7);
        assert_int_equal(r.steps[2].n_args, 4);
        assert_string_equal(r.steps[2].args[0], "A=1");
        assert_string_equal(r.steps[2].args[1], "B=two words");
        assert_string_equal(r.steps[2].args[2], "C=its");
        assert_string_equal(r.steps[2].args[3], "D=x y");
        assert_string_equal(r.steps[3].args[0], "LEGACY=the rest here");
        assert_string_equal(r.steps[4].args[0], "/srv");
        assert_string_equal(r.steps[5].args[0], "/srv/app/sub");
        assert_int_equal(r.steps[6].n_args, 3);
        assert_string_equal(r.steps[6].args[2], "/srv/app/sub/dest/");
        assert_string_equal(r.steps[7].args[0], "with space");
        assert_string_equal(r.steps[7].args[1], "/abs");
        assert_string_equal(r.steps[8].args[1], "/srv/app/sub/rel");
        recipe_free(&r);
}

static void test_bases(void **state)
{
        struct recipe r;
        struct sbx_error err;
        assert_int_equal(parse("FROM @busybox\n", &r, &err), 0);
        assert_int_equal(r.base, RECIPE_BASE_BUSYBOX);
        assert_int_equal(r.n_steps, 0);
        recipe_free(&r);
        assert_int_equal(parse("FROM @mmdebstrap bookworm git,curl\n", &r, &err), 0);
        assert_int_equal(r.base, RECIPE_BASE_MMDEBSTRAP);
        assert_string_equal(r.suite, "bookworm");
        assert_string_equal(r.packages, "git,curl");
        recipe_free(&r);
        assert_int_equal(parse("FROM @mmdebstrap bookworm\n", &r, &err), 0);
        assert_null(r.packages);
        recipe_free(&r);
        /* The shipped recipes parse. */
        for (const char *const *n = (const char *const[]){"tiny", "debian", NULL}; *n; n++) {
                const char *t = recipe_builtin(*n);
                assert_non_null(t);
                assert_int_equal(parse(t, &r, &err), 0);
                recipe_free(&r);
        }
        assert_null(recipe_builtin("other"));
        char id[72];
        assert_int_equal(recipe_text_id("", 0, id), 0);
        assert_string_equal(
            id, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_refused(void **state)
{
        static const struct {
                const char *text, *msg;
        } bad[] = {
            {"FROM a\nADD x /x\n", "recipe line 2: ADD is not supported"},
            {"FROM a\nENTRYPOINT [\"x\"]\n", "ENTRYPOINT is not supported"},
            {"USER x\n", "recipe line 1: USER is not supported"},
            {"RUN x\n", "a recipe starts with FROM"},
            {"", "the recipe has no FROM"},
            {"FROM a\nFROM b\n", "a second FROM"},
            {"FROM a AS b\n", "more than one stage"},
            {"FROM Bad/Name\n", "FROM takes one image name"},
            {"FROM a b\n", "FROM takes one image name"},
            {"FROM @nope\n", "unknown built-in base"},
            {"FROM @mmdebstrap --evil\n", "bad word"},
            {"FROM @mmdebstrap bookworm a;b\n", "bad word"},
            {"FROM a\nNOPE x\n", "unknown instruction 'NOPE'"},
            {"FROM a\nRUN\n", "RUN needs a command"},
            {"FROM a\nRUN [\"a\", 1]\n", "a JSON array of strings"},
            {"FROM a\nRUN []\n", "a JSON array of 1 to 256 strings"},
            {"FROM a\nCOPY x\n", "COPY SOURCE... DESTINATION"},
            {"FROM a\nCOPY --from=x a b\n", "COPY --from=x is not supported"},
            {"FROM a\nCOPY a ../b\n", "COPY: a bad destination"},
            {"FROM a\nENV\n", "ENV needs KEY=VALUE"},
            {"FROM a\nENV 9=x\n", "a bad key"},
            {"FROM a\nENV A=\"x\n", "an unterminated quote"},
            {"FROM a\nWORKDIR a b\n", "WORKDIR takes one path"},
            {"FROM a\nWORKDIR ../x\n", "WORKDIR takes one path"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                struct recipe r;
                struct sbx_error err;
                assert_true(parse(bad[i].text, &r, &err) < 0);
                if (!strstr(err.msg, bad[i].msg))
                        fail_msg("%s: got '%s', want '%s'", bad[i].text, err.msg, bad[i].msg);
                assert_null(r.from);
                assert_int_equal(r.n_steps, 0);
        }
        struct recipe r;
        struct sbx_error err = {0};
        assert_true(recipe_parse("FROM a\nRUN x\0y\n", 14, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "line 2: a NUL byte"));
}

static void test_limits(void **state)
{
        struct buf b;
        buf_init(&b, 0);
        assert_int_equal(buf_printf(&b, "FROM a\n"), 0);
        for (int i = 0; i < RECIPE_MAX_STEPS + 1; i++)
                assert_int_equal(buf_printf(&b, "RUN step %d\n", i), 0);
        struct recipe r;
        struct sbx_error err = {0};
        assert_true(recipe_parse(b.data, b.len, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "more than 256 steps"));
        buf_free(&b);
        /* One instruction over 64 KiB, made of continuations. */
        buf_init(&b, 0);
        assert_int_equal(buf_printf(&b, "FROM a\nRUN x"), 0);
        for (int i = 0; i < 2000; i++)
                assert_int_equal(buf_printf(&b, "%040d \\\n", i), 0);
        assert_int_equal(buf_printf(&b, "end\n"), 0);
        assert_true(recipe_parse(b.data, b.len, &r, &err) < 0);
        assert_non_null(strstr(err.msg, "longer than 64 KiB"));
        buf_free(&b);
        /* The whole text over 1 MiB. */
        assert_true(recipe_parse("FROM a\n", RECIPE_MAX_BYTES + 1, &r, &err) < 0);
}

static void test_abs_path(void **state)
{
        char out[64];
        assert_int_equal(recipe_abs_path(NULL, "a", out, sizeof(out)), 0);
        assert_string_equal(out, "/a");
        assert_int_equal(recipe_abs_path("/x/y", "./a//b/.", out, sizeof(out)), 0);
        assert_string_equal(out, "/x/y/a/b");
        assert_int_equal(recipe_abs_path("/x", "/abs", out, sizeof(out)), 0);
        assert_string_equal(out, "/abs");
        assert_int_equal(recipe_abs_path("/x", "/", out, sizeof(out)), 0);
        assert_string_equal(out, "/");
        assert_int_equal(recipe_abs_path("/x", "a/../b", out, sizeof(out)), -EINVAL);
        assert_int_equal(recipe_abs_path("/", "abcdefgh", out, 4), -ENAMETOOLONG);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_forms),    cmocka_unit_test(test_bases),
            cmocka_unit_test(test_refused),  cmocka_unit_test(test_limits),
            cmocka_unit_test(test_abs_path),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
