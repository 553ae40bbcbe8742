/* SPDX-License-Identifier: MIT */
#include "names.h"

#include <string.h>

static bool is_alnum(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool name_is_valid(const char *s)
{
        if (!s || !is_alnum(s[0]))
                return false;
        size_t i;
        for (i = 1; s[i]; i++) {
                if (i >= SBX_NAME_MAX)
                        return false;
                char c = s[i];
                if (!is_alnum(c) && c != '.' && c != '_' && c != ':' && c != '-')
                        return false;
        }
        return true;
}

bool image_name_is_valid(const char *s)
{
        if (!s || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
                return false;
        size_t i;
        for (i = 1; s[i]; i++) {
                char c = s[i];
                if (i >= 64)
                        return false;
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
                        return false;
        }
        return true;
}
