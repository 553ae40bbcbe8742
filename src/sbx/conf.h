/* SPDX-License-Identifier: MIT */
/* sbx's configuration file: `key = value` lines, `#` comments. Keys:
 * server, token. Pure parsing here (unit-tested); main.c finds the file
 * ($XDG_CONFIG_HOME/sandboxd/config, else ~/.config/sandboxd/config). */
#pragma once

#include <stddef.h>

struct sbx_config {
        char *server;
        char *token;
};

/* Parse text; on a bad line, -EINVAL with its number in *ret_line and a
 * reason in why. Values replace earlier ones. */
int sbx_config_parse(const char *text, size_t len, struct sbx_config *cfg, int *ret_line, char *why,
                     size_t why_len);
void sbx_config_free(struct sbx_config *cfg);
/* The file's path into out: $XDG_CONFIG_HOME or $HOME/.config. -ENOENT
 * when neither is set. */
int sbx_config_path(char *out, size_t len);
