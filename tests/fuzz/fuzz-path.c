/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the file endpoints' path handling: a client's path
 * through inroot_normalize and inroot_split, checking what they promise
 * (inroot.h) rather than only that they do not crash:
 *   - a normalized path is absolute, has no "//", no "." component and
 *     no trailing slash (but "/"), and normalizing it again changes nothing;
 *   - split gives a directory and a last component that join back to it,
 *     the component never empty, never "." and never containing "/". */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/inroot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_normal(const char *p)
{
        size_t n = strlen(p);
        if (p[0] != '/' || strstr(p, "//") || strstr(p, "/./") ||
            (n >= 2 && !strcmp(p + n - 2, "/.")) || (n > 1 && p[n - 1] == '/'))
                abort();
        char again[INROOT_PATH_MAX + 16];
        if (inroot_normalize(p, again, sizeof(again)) != 0 || strcmp(again, p))
                abort();
}

static void check_split(const char *p)
{
        char dir[INROOT_PATH_MAX + 16], base[NAME_MAX + 1];
        int r = inroot_split(p, dir, sizeof(dir), base, sizeof(base));
        if (r == -EINVAL && !strcmp(p, "/"))
                return; /* the root has no last component */
        if (r < 0)
                abort(); /* a normalized path always splits */
        if (!base[0] || !strcmp(base, ".") || strchr(base, '/'))
                abort();
        char joined[2 * INROOT_PATH_MAX];
        snprintf(joined, sizeof(joined), "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", base);
        if (strcmp(joined, p))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > INROOT_PATH_MAX + 64)
                return 0;
        char *in = malloc(size + 1);
        if (!in)
                return 0;
        memcpy(in, data, size);
        in[size] = '\0'; /* a NUL inside is cut here, as the HTTP layer refuses it */
        char out[INROOT_PATH_MAX + 16];
        if (inroot_normalize(in, out, sizeof(out)) == 0) {
                check_normal(out);
                check_split(out);
        }
        free(in);
        return 0;
}
