/* SPDX-License-Identifier: MIT */
/* The sandboxd command: main() and one file per verb. */
#pragma once

int cmd_serve(int argc, char **argv);
int cmd_token(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_image_import(int argc, char **argv);
int cmd_image_build(int argc, char **argv);
/* Empty the build cache (<images>/.cache) unless a build runs. */
int image_prune(const char *images);
int cmd_account(int argc, char **argv);
int cmd_key(int argc, char **argv);
