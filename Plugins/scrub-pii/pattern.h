/* Reading a rule's pattern piece by piece (reverse.c), shared by reverse.c (the pattern read
 * backwards, its widths) and tail.c (its tail). Hyperscan's syntax, the part these
 * read; anything else is refused and the rule is scanned as it is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The shortest and the longest match of a part of a pattern, in bytes; SIZE_MAX: no bound. */
struct width {
    size_t min, max;
};

/* The end of the class that starts at `at` ('['), past its ']'; NULL when it is not one this
   reads (an unterminated class, a POSIX name). */
const char *scrub_class_end(const char *at);

/* The length of the escape at `at` ('\'), or 0 when it is one this refuses; *assertion when it
   matches a position, not a byte. */
size_t scrub_escape_length(const char *at, bool *assertion);

/* The length of the repeat at `at` (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`), 0 when there is none,
   and its bounds in *times_out ({1, 1} without one); a lazy `?` after it is not counted (the
   engine reports every match either way); *refused when it is possessive. */
size_t scrub_repeat_length(const char *at, struct width *times_out, bool *refused);
