/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the config file parser (src/cli/settings.c): the
 * input is a sandboxd.conf, read through settings_parse as `serve` reads
 * it. Whatever it holds, parsing ends in 0 or -EINVAL (or -ENOMEM), never a crash, a
 * leak or undefined behaviour, and a parse that succeeded leaves every
 * setting printable (strings set, the listen address and URL derived). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/cli/settings.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int conf_fd = -1;
static char conf_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        conf_fd = memfd_create("sandboxd.conf", MFD_CLOEXEC);
        if (conf_fd < 0)
                abort();
        snprintf(conf_path, sizeof(conf_path), "/proc/self/fd/%d", conf_fd);
        unsetenv("SANDBOXD_STATE");
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (ftruncate(conf_fd, 0) < 0 || pwrite(conf_fd, data, size, 0) != (ssize_t)size)
                abort();
        struct settings s;
        if (settings_defaults(&s) < 0)
                abort();
        char *argv[] = {"--config", conf_path, NULL};
        char **args = NULL;
        int r = settings_parse(&s, SET_SERVE | SET_URL, 2, argv, NULL, NULL, NULL, &args);
        if (r != 0 && r != -EINVAL && r != -ENOMEM)
                abort();
        if (r == 0 && (!s.state || !s.listen || !s.url || !s.network || !s.log_level))
                abort();
        free(args);
        settings_free(&s);
        return 0;
}
