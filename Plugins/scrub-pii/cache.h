/* The compiled rule set, saved in the plugin's data folder (cache.c). */
#pragma once

#include <hs/hs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What names a compiled set: the patterns, their flags and the library's version. */
void scrub_cache_digest(const char *const *patterns, const unsigned *flags, size_t count, uint8_t digest[32]);

/* The set saved under `digest` in `folder`, whole and intact; NULL otherwise. */
hs_database_t *scrub_cache_load(const char *folder, const uint8_t digest[32]);

/* Saves `database` under `digest` in `folder` (nothing when it cannot: the next start compiles). */
void scrub_cache_store(const char *folder, const uint8_t digest[32], const hs_database_t *database);
