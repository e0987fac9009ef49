/* The compiled rule set, saved in the plugin's data folder, and the texts a scrubber found
 * nothing in (cache.c). */
#pragma once

#include <hs/hs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What names a compiled set: the patterns, their flags and the library's version. */
void scrub_cache_digest(const char *const *patterns, const unsigned *flags, size_t count, uint8_t digest[32]);

/* The set saved under `digest` in `folder`, whole and intact; NULL otherwise. */
hs_database_t *scrub_cache_load(const char *folder, const uint8_t digest[32]);

/* Whether `folder` holds a file saved under `digest` (not read: `scrub_cache_load` checks it). */
bool scrub_cache_has(const char *folder, const uint8_t digest[32]);

/* Saves `database` under `digest` in `folder` (nothing when it cannot: the next start compiles). */
void scrub_cache_store(const char *folder, const uint8_t digest[32], const hs_database_t *database);

/* Texts a scrubber found nothing in, remembered by digest (their 128-bit SipHash-2-4 under a
   key drawn at random when the memo is made: no text can be made to share a digest without the
   key, and the hash takes a third of a SHA-256's time), so one seen again is not scanned
   again: a breadcrumb is carried by every report until the ring drops it, and the after step
   reads what the before step scrubbed. A text's result depends only on the scrubber's rules,
   so the memo is the scrubber's. */
struct scrub_memo {
    pthread_mutex_t lock;
    uint8_t (*slots)[16]; /* direct-mapped by the digest's first bytes; NULL: no memo */
    uint64_t key[2];
};

/* Texts longer than this are never remembered (an attachment is rarely seen twice). */
#define SCRUB_MEMO_MAX_TEXT 16384

/* SipHash-2-4 with its 128-bit output (the reference siphash.c with outlen 16): the memo's
   digest (the fuzz test holds it to the reference's vectors). */
void scrub_siphash128(const uint64_t key[2], const char *text, size_t length, uint8_t out[16]);

/* Makes an empty memo (without memory: one that remembers nothing). */
void scrub_memo_init(struct scrub_memo *memo);
void scrub_memo_free(struct scrub_memo *memo);

/* The digest of text[0..length) into `digest`; whether the memo holds it. */
bool scrub_memo_knows(struct scrub_memo *memo, const char *text, size_t length, uint8_t digest[16]);

/* Remembers `digest` (from `scrub_memo_knows`) as a text with nothing to scrub. */
void scrub_memo_remember(struct scrub_memo *memo, const uint8_t digest[16]);
