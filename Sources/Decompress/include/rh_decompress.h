/* Request bodies a Sentry SDK compresses (SPEC S-4: Content-Encoding gzip, deflate or br),
 * inflated within a limit, for the local receiver. zlib and Brotli's decoder (Debian's
 * zlib1g-dev and libbrotli-dev; loaded at the first use, not linked). */
#pragma once

#include <stddef.h>

/* The encodings rh_decompress takes. */
#define RH_ENCODING_GZIP 1
#define RH_ENCODING_DEFLATE 2
#define RH_ENCODING_BR 3

/* What rh_decompress returns. */
#define RH_DECOMPRESS_OK 0
#define RH_DECOMPRESS_CORRUPT (-1)   /* not a valid stream of that encoding */
#define RH_DECOMPRESS_TOO_LARGE (-2) /* it inflates past `limit` bytes */
#define RH_DECOMPRESS_NO_MEMORY (-3)
#define RH_DECOMPRESS_UNAVAILABLE (-4) /* zlib or Brotli's decoder could not be loaded */

/* Inflates `size` bytes at `input` of `encoding` into a buffer of at most `limit` bytes, which
 * *output points to (free() it) with its length in *output_size. `deflate` is zlib's format
 * (RFC 1950), or raw deflate (RFC 1951) when that fails, as browsers accept both. Any thread. */
int rh_decompress(int encoding, const void *input, size_t size, size_t limit, void **output, size_t *output_size);
