/* SPDX-License-Identifier: MIT */
/* Image recipes (docs/images.md, "Recipes"): a base and a list of steps,
 * a subset of the Dockerfile with exactly the instructions FROM, RUN,
 * COPY, ENV and WORKDIR. Every other instruction is refused by name. The
 * text is the user's: every byte of it is checked here, and nothing in it
 * is run by this parser. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "../common/util.h"

#define RECIPE_MAX_BYTES (1u << 20)
#define RECIPE_MAX_STEPS 256
#define RECIPE_MAX_ARGS 256

enum recipe_base {
        RECIPE_BASE_IMAGE,      /* FROM <image> */
        RECIPE_BASE_BUSYBOX,    /* FROM @busybox: the static busybox of the host */
        RECIPE_BASE_MMDEBSTRAP, /* FROM @mmdebstrap SUITE [PACKAGE,...] */
};

enum recipe_op {
        RECIPE_RUN,
        RECIPE_COPY,
        RECIPE_ENV,
        RECIPE_WORKDIR,
};

struct recipe_step {
        enum recipe_op op;
        unsigned line; /* where it starts, 1-based */
        /* RUN: the shell command (args[0], shell form) or the argv (exec
         * form); COPY: the sources then the destination; ENV: "K=V" each;
         * WORKDIR: the path (absolute, as written or made so). */
        char **args;
        size_t n_args;
        bool exec_form;
        char *text; /* the instruction as written, continuations joined */
};

struct recipe {
        enum recipe_base base;
        char *from;     /* the image name, or "@busybox" / "@mmdebstrap" */
        char *suite;    /* @mmdebstrap: the Debian suite */
        char *packages; /* @mmdebstrap: comma-separated, NULL for none */
        struct recipe_step *steps;
        size_t n_steps;
};

/* Parse a recipe's text (not NUL-terminated; len bytes). Errors name the
 * line. */
int recipe_parse(const char *text, size_t len, struct recipe *ret, struct sbx_error *err);
void recipe_free(struct recipe *r);
const char *recipe_op_name(enum recipe_op op);
/* A path of a WORKDIR or COPY destination made absolute against cwd (NULL:
 * "/") and clean ("a/./b//" -> "/cwd/a/b"); -EINVAL for "..". */
int recipe_abs_path(const char *cwd, const char *path, char *out, size_t len);

/* The recipes of the images sandboxd ships (`tiny`, `debian`); NULL for
 * another name. */
const char *recipe_builtin(const char *name);
/* "sha256:<hex>" of a recipe's text: what image.json's "recipe" holds. */
int recipe_text_id(const char *text, size_t len, char out[72]);
