/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the recipe parser (src/runtime/recipe.c), checking
 * what it promises (recipe.h) rather than only that it does not crash:
 *   - a recipe it takes has a base, at most 256 steps, each with its
 *     arguments (COPY at least two, WORKDIR exactly one absolute path
 *     without "." or ".." components, ENV "K=V" each with a valid key);
 *   - one it refuses says why, on a line of the text, and leaves nothing
 *     behind. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/runtime/recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_step(const struct recipe_step *s)
{
        if (!s->text || s->n_args == 0 || s->n_args > RECIPE_MAX_ARGS || !s->line)
                abort();
        for (size_t i = 0; i < s->n_args; i++)
                if (!s->args[i])
                        abort();
        switch (s->op) {
        case RECIPE_COPY:
                if (s->n_args < 2 || s->args[s->n_args - 1][0] != '/')
                        abort();
                break;
        case RECIPE_WORKDIR:
                if (s->n_args != 1 || s->args[0][0] != '/' || strstr(s->args[0], "/./") ||
                    strstr(s->args[0], "/../") || strstr(s->args[0], "//"))
                        abort();
                break;
        case RECIPE_ENV:
                for (size_t i = 0; i < s->n_args; i++) {
                        const char *eq = strchr(s->args[i], '=');
                        if (!eq || eq == s->args[i])
                                abort();
                }
                break;
        case RECIPE_RUN:
                break;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct recipe r;
        struct sbx_error err = {0};
        if (recipe_parse((const char *)data, size, &r, &err) < 0) {
                if (!err.msg[0] || r.from || r.steps || r.n_steps)
                        abort();
                return 0;
        }
        if (!r.from || r.n_steps > RECIPE_MAX_STEPS)
                abort();
        if (r.base == RECIPE_BASE_MMDEBSTRAP && (!r.suite || r.suite[0] == '-'))
                abort();
        for (size_t i = 0; i < r.n_steps; i++)
                check_step(&r.steps[i]);
        recipe_free(&r);
        return 0;
}
