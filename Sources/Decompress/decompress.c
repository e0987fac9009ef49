/* See rh_decompress.h. */
#include "rh_decompress.h"

#include <brotli/decode.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

/* A growing output buffer that never passes `limit`. */
struct sink {
    uint8_t *bytes;
    size_t length, capacity, limit;
};

/* Room for at least one more byte; RH_DECOMPRESS_OK or why not. */
static int grow(struct sink *sink) {
    if (sink->length < sink->capacity) return RH_DECOMPRESS_OK;
    if (sink->capacity >= sink->limit) return RH_DECOMPRESS_TOO_LARGE;
    size_t capacity = sink->capacity ? sink->capacity * 2 : 64 * 1024;
    if (capacity > sink->limit) capacity = sink->limit;
    uint8_t *grown = realloc(sink->bytes, capacity);
    if (grown == NULL) return RH_DECOMPRESS_NO_MEMORY;
    sink->bytes = grown;
    sink->capacity = capacity;
    return RH_DECOMPRESS_OK;
}

/* zlib with `window_bits`: 16 + 15 gzip, 15 zlib, -15 raw deflate. */
static int inflate_with(int window_bits, const void *input, size_t size, struct sink *sink) {
    z_stream stream = {0};
    if (inflateInit2(&stream, window_bits) != Z_OK) return RH_DECOMPRESS_NO_MEMORY;
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)size;
    int status = RH_DECOMPRESS_OK, step = Z_OK;
    while (step != Z_STREAM_END) {
        if ((status = grow(sink)) != RH_DECOMPRESS_OK) break;
        stream.next_out = sink->bytes + sink->length;
        stream.avail_out = (uInt)(sink->capacity - sink->length);
        step = inflate(&stream, Z_NO_FLUSH);
        sink->length = sink->capacity - stream.avail_out;
        if (step == Z_BUF_ERROR && stream.avail_in == 0) step = Z_DATA_ERROR; /* cut short */
        if (step != Z_OK && step != Z_STREAM_END) {
            status = step == Z_MEM_ERROR ? RH_DECOMPRESS_NO_MEMORY : RH_DECOMPRESS_CORRUPT;
            break;
        }
    }
    inflateEnd(&stream);
    return status;
}

static int brotli(const void *input, size_t size, struct sink *sink) {
    BrotliDecoderState *state = BrotliDecoderCreateInstance(NULL, NULL, NULL);
    if (state == NULL) return RH_DECOMPRESS_NO_MEMORY;
    const uint8_t *next_in = input;
    size_t available_in = size;
    int status = RH_DECOMPRESS_OK;
    for (;;) {
        if ((status = grow(sink)) != RH_DECOMPRESS_OK) break;
        uint8_t *next_out = sink->bytes + sink->length;
        size_t available_out = sink->capacity - sink->length;
        BrotliDecoderResult step = BrotliDecoderDecompressStream(state, &available_in, &next_in, &available_out, &next_out, NULL);
        sink->length = sink->capacity - available_out;
        if (step == BROTLI_DECODER_RESULT_SUCCESS) break;
        if (step == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) continue;
        status = RH_DECOMPRESS_CORRUPT; /* an error, or the input ended early */
        break;
    }
    BrotliDecoderDestroyInstance(state);
    return status;
}

int rh_decompress(int encoding, const void *input, size_t size, size_t limit, void **output, size_t *output_size) {
    struct sink sink = {NULL, 0, 0, limit};
    int status = RH_DECOMPRESS_CORRUPT;
    if (size <= UINT32_MAX) {
        if (encoding == RH_ENCODING_GZIP) status = inflate_with(16 + 15, input, size, &sink);
        if (encoding == RH_ENCODING_DEFLATE) {
            status = inflate_with(15, input, size, &sink);
            if (status == RH_DECOMPRESS_CORRUPT) {
                sink.length = 0;
                status = inflate_with(-15, input, size, &sink);
            }
        }
        if (encoding == RH_ENCODING_BR) status = brotli(input, size, &sink);
    }
    if (status != RH_DECOMPRESS_OK) {
        free(sink.bytes);
        return status;
    }
    *output = sink.bytes;
    *output_size = sink.length;
    return RH_DECOMPRESS_OK;
}
