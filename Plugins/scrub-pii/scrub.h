/* The scrubber behind scrub-pii, separate from the plugin glue so it reads (and extends)
 * on its own. */
#pragma once

#include <regex.h>
#include <stddef.h>

/* The kinds the scrubber finds, as SPEC T-4 names them; a bit each in `disabled`. */
enum rh_scrub_kind {
    RH_SCRUB_EMAIL, RH_SCRUB_CARD, RH_SCRUB_IPV4, RH_SCRUB_IPV6, RH_SCRUB_PHONE,
    RH_SCRUB_JWT, RH_SCRUB_AWS_KEY, RH_SCRUB_BEARER, RH_SCRUB_SECRET, RH_SCRUB_KINDS
};

/* The kind's name (`email`, `aws_key`, …). */
const char *rh_scrub_kind_name(enum rh_scrub_kind kind);

/* What replaces a value found: its mask, nothing, or a pseudonym `[kind:<12 hex>]` that
   `pseudonym` writes (the same value, the same pseudonym). */
enum rh_scrub_method { RH_SCRUB_MASK, RH_SCRUB_REMOVE, RH_SCRUB_HASH };

struct rh_scrub_style {
    unsigned disabled;               /* 1u << kind: kinds left alone */
    enum rh_scrub_method method;
    /* RH_SCRUB_HASH: writes 12 lowercase hex digits and a NUL of a keyed digest of
       value[0..length) into out. */
    void (*pseudonym)(void *context, const char *value, size_t length, char out[13]);
    void *context;
};

/* A newly allocated copy of `text` with e-mail addresses, card numbers, IPv4 and IPv6
 * addresses, phone numbers, JWTs, AWS key ids, bearer tokens and key=/token=/secret=/password=
 * values replaced as `style` says (NULL: masked, every kind). Idempotent. The caller frees the
 * result; NULL when out of memory. */
char *rh_scrub_styled(const char *text, const struct rh_scrub_style *style);

/* rh_scrub_styled with every kind masked: [email], [card], [ip], [phone], [secret]. */
char *rh_scrub(const char *text);

/* A newly allocated copy of `text` with each match of `pattern` (an `extraPatterns` entry)
   replaced by `[name]`, nothing, or `[name:<12 hex>]`, as `style` says; what an earlier
   replacement wrote is never matched. NULL when out of memory. */
char *rh_scrub_pattern(const char *text, const char *name, const regex_t *pattern, const struct rh_scrub_style *style);
