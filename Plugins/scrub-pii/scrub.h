/* The scrubber behind scrub-pii, separate from the plugin glue so it reads (and extends) on
 * its own: engine.c (one compiled rule set, scanned once per text), rules.c (the rules as
 * data), checks.c (what a rule's check and group words mean), keys.c (secret-named keys). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* What replaces a value found: its mask `[kind]`, nothing, or a pseudonym `[kind:<12 hex>]`
   that `pseudonym` writes (the same value, the same pseudonym). */
enum rh_scrub_method { RH_SCRUB_MASK, RH_SCRUB_REMOVE, RH_SCRUB_HASH };

struct rh_scrub_style {
    enum rh_scrub_method method;
    /* RH_SCRUB_HASH: writes 12 lowercase hex digits and a NUL of a keyed digest of
       value[0..length) into out. Without it, values are masked. */
    void (*pseudonym)(void *context, const char *value, size_t length, char out[13]);
    void *context;
};

/* An `extraPatterns` entry: replaced as `[name]`. */
struct rh_scrub_extra {
    const char *name;
    const char *pattern; /* Hyperscan syntax (PCRE without back-references or lookaround) */
};

/* A compiled rule set; shared by every thread that scrubs (each has its own scratch; a rule's
   own database is made under a lock on first use). */
struct rh_scrubber;

/* Every built-in rule but those of the kinds in `disable`, and `extras`, compiled into one
   database (loaded from, or saved to, `cache_folder` when not NULL). NULL with a message in
   `error`: an extra pattern the engine refuses (naming it), or no memory. `extras`' patterns
   are used, not copied: they must live as long as the scrubber. */
struct rh_scrubber *rh_scrubber_new(const char *const *disable, size_t disable_count, const struct rh_scrub_extra *extras, size_t extra_count,
                                    const char *cache_folder, char *error, size_t error_size);

/* Whether each of `extras` is a pattern the engine takes; false with a message naming the
   first that is not. Cheap: what a plugin checks at load, before it compiles everything. */
bool rh_scrub_extras_valid(const struct rh_scrub_extra *extras, size_t extra_count, char *error, size_t error_size);

void rh_scrubber_free(struct rh_scrubber *scrubber);

/* Compiles now every rule's own database the cache folder does not hold (about 0.6 s for all),
   rather than on the first text it matches. One the cache holds is loaded when the rule first
   matches (about 0.1 ms): a start reads only the rule set (loading all of them took 12 ms). */
void rh_scrubber_prepare_every_rule(struct rh_scrubber *scrubber);

/* A newly allocated copy of `text` with every value the rules find replaced as `style` says
   (NULL: masked). Idempotent. NULL when out of memory. */
char *rh_scrubber_apply(struct rh_scrubber *scrubber, const char *text, const struct rh_scrub_style *style);

/* The same, remembering the texts it found nothing in (by digest, in the scrubber's memo): one
   seen again comes back unscanned. For a host's reports, which carry the breadcrumbs the
   previous report carried, and whose after step reads what the before step scrubbed. */
char *rh_scrubber_apply_remembering(struct rh_scrubber *scrubber, const char *text, const struct rh_scrub_style *style);

/* The same without the copy when nothing changes: NULL with *unchanged when `text` holds
   nothing to scrub; the scrubbed copy when it held something; NULL without memory. */
char *rh_scrubber_apply_if_changed(struct rh_scrubber *scrubber, const char *text, const struct rh_scrub_style *style, bool *unchanged);

/* Whether a built-in rule has this kind. */
bool rh_scrub_kind_known(const char *kind);

/* Whether an attribute key names a secret (SPEC T-5): one of `words` (NULL: the built-in
   list) is a word of the key, in snake, kebab, dotted or camel case; a two-word entry
   (`api key`) matches two adjacent words. A word inside another word (`author`) is not one. */
bool rh_scrub_key_is_secret(const char *key, const char *const *words, size_t word_count);

/* rh_scrubber_apply with every built-in rule, masked (compiled once per process). */
char *rh_scrub(const char *text);
