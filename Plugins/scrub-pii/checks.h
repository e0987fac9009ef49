/* A rule's `check` and `group` words (checks.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Whether every `;`-separated word of `check` holds of text[from..to) (text is `size` bytes). */
bool scrub_check(const char *check, const char *text, size_t size, size_t from, size_t to);

/* The part of the match text[from..to) that is replaced, as `group` says. */
void scrub_group(const char *group, const char *text, size_t from, size_t to, size_t *replace_from, size_t *replace_to);
