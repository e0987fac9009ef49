/* SHA-256 (FIPS 180-4), for the digests of attachments and plugin files (the quarantine's
 * key). Built in, not libcrypto: linking libcrypto cost every program that links the host
 * 1.4 MB and its relocations at start, for six functions. */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t state[8];
    uint64_t length;     /* bytes hashed so far */
    uint8_t block[64];   /* the block being filled */
    size_t used;         /* bytes of `block` filled */
} rh_sha256;

void rh_sha256_init(rh_sha256 *context);
void rh_sha256_update(rh_sha256 *context, const void *data, size_t count);
/* Writes the 32-byte digest. The context must be initialised again before reuse. */
void rh_sha256_final(rh_sha256 *context, uint8_t digest[32]);
