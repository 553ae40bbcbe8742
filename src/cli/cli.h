/* SPDX-License-Identifier: MIT */
/* The sandboxd command: main() and one file per verb. */
#pragma once

int cmd_serve(int argc, char **argv);
int cmd_token(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_image_import(int argc, char **argv);
int cmd_image_build(int argc, char **argv);
int cmd_account(int argc, char **argv);
int cmd_key(int argc, char **argv);
