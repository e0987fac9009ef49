/* scrub-pii's options (SPEC T-4) and the pseudonym key of its `hash` method. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scrub.h"

struct scrub_options {
    struct rh_scrub_style style;   /* method; pseudonym set once a key is loaded */
    char **safe_attributes;        /* attribute keys never touched */
    size_t safe_count;
    char **disabled;               /* kinds left alone */
    size_t disabled_count;
    struct rh_scrub_extra *extras; /* extraPatterns (names and patterns owned) */
    size_t extra_count;
    char **sensitive_keys;         /* sensitiveKeys: the words that name a secret */
    size_t sensitive_key_count;
    bool has_sensitive_keys;       /* else the built-in list */
    uint8_t key[32];
    bool has_key;
};

/* Parses the options object; false with a message naming the option (or pattern) at fault. */
bool scrub_options_parse(const char *json, struct scrub_options *options, char *error, size_t error_size);

bool scrub_options_is_safe_attribute(const struct scrub_options *options, const char *key);

/* The key in `folder`/hmac.key, made there when missing; false with a message. */
bool scrub_options_load_key(struct scrub_options *options, const char *folder, char *error, size_t error_size);

/* rh_scrub_style.pseudonym: the first 12 hex digits of HMAC-SHA256(key, value); context: the options. */
void scrub_options_pseudonym(void *context, const char *value, size_t length, char out[13]);
