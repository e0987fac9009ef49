/* The scrubber behind scrub-pii, separate from the plugin glue so it reads (and extends)
 * on its own. */
#pragma once

/* A newly allocated copy of `text` with e-mail addresses, card numbers, bearer tokens,
 * key=/token=/secret=/password= values and IPv4 addresses replaced by [email], [card],
 * [secret] and [ip]. Idempotent. The caller frees the result; NULL when out of memory. */
char *rh_scrub(const char *text);
