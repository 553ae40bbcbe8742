/* SPDX-License-Identifier: MIT */
/* Validation of names that come from outside and end up in paths. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define SBX_NAME_MAX 128

/* Sandbox names and deployment/account ids:
 * ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$ . Such a name can never be "." or
 * "..", never holds a '/', so it is safe as one path component. */
bool name_is_valid(const char *s);
/* Image names: ^[a-z0-9][a-z0-9_-]{0,63}$ */
bool image_name_is_valid(const char *s);
