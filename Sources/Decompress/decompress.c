/* See rh_decompress.h. zlib and Brotli's decoder are loaded with dlopen at the first body
 * that needs them, never linked: only `reporthost receive` inflates, and every other command
 * would pay for loading them at its start. */
#define _GNU_SOURCE
#include "rh_decompress.h"

#include <brotli/decode.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

/* The functions used, resolved once; a member left NULL: that library could not be loaded. */
static struct {
    int (*inflate_init)(z_streamp, int, const char *, int);
    int (*inflate)(z_streamp, int);
    int (*inflate_end)(z_streamp);
    BrotliDecoderState *(*create)(brotli_alloc_func, brotli_free_func, void *);
    BrotliDecoderResult (*decompress)(BrotliDecoderState *, size_t *, const uint8_t **, size_t *, uint8_t **, size_t *);
    void (*destroy)(BrotliDecoderState *);
} lib;
static pthread_once_t loaded = PTHREAD_ONCE_INIT;

/* Never closed (RTLD_NODELETE): they stay for the process once loaded. */
static void load(void) {
    void *z = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (z != NULL) {
        *(void **)&lib.inflate_init = dlsym(z, "inflateInit2_");
        *(void **)&lib.inflate = dlsym(z, "inflate");
        *(void **)&lib.inflate_end = dlsym(z, "inflateEnd");
        if (!lib.inflate_init || !lib.inflate || !lib.inflate_end) lib.inflate_init = NULL;
    }
    void *br = dlopen("libbrotlidec.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (br != NULL) {
        *(void **)&lib.create = dlsym(br, "BrotliDecoderCreateInstance");
        *(void **)&lib.decompress = dlsym(br, "BrotliDecoderDecompressStream");
        *(void **)&lib.destroy = dlsym(br, "BrotliDecoderDestroyInstance");
        if (!lib.create || !lib.decompress || !lib.destroy) lib.create = NULL;
    }
}

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
    if (lib.inflate_init == NULL) return RH_DECOMPRESS_UNAVAILABLE;
    z_stream stream = {0};
    if (lib.inflate_init(&stream, window_bits, ZLIB_VERSION, (int)sizeof stream) != Z_OK) return RH_DECOMPRESS_NO_MEMORY;
    stream.next_in = (Bytef *)input;
    stream.avail_in = (uInt)size;
    int status = RH_DECOMPRESS_OK, step = Z_OK;
    while (step != Z_STREAM_END) {
        if ((status = grow(sink)) != RH_DECOMPRESS_OK) break;
        stream.next_out = sink->bytes + sink->length;
        stream.avail_out = (uInt)(sink->capacity - sink->length);
        step = lib.inflate(&stream, Z_NO_FLUSH);
        sink->length = sink->capacity - stream.avail_out;
        if (step == Z_BUF_ERROR && stream.avail_in == 0) step = Z_DATA_ERROR; /* cut short */
        if (step != Z_OK && step != Z_STREAM_END) {
            status = step == Z_MEM_ERROR ? RH_DECOMPRESS_NO_MEMORY : RH_DECOMPRESS_CORRUPT;
            break;
        }
    }
    lib.inflate_end(&stream);
    return status;
}

static int brotli(const void *input, size_t size, struct sink *sink) {
    if (lib.create == NULL) return RH_DECOMPRESS_UNAVAILABLE;
    BrotliDecoderState *state = lib.create(NULL, NULL, NULL);
    if (state == NULL) return RH_DECOMPRESS_NO_MEMORY;
    const uint8_t *next_in = input;
    size_t available_in = size;
    int status = RH_DECOMPRESS_OK;
    for (;;) {
        if ((status = grow(sink)) != RH_DECOMPRESS_OK) break;
        uint8_t *next_out = sink->bytes + sink->length;
        size_t available_out = sink->capacity - sink->length;
        BrotliDecoderResult step = lib.decompress(state, &available_in, &next_in, &available_out, &next_out, NULL);
        sink->length = sink->capacity - available_out;
        if (step == BROTLI_DECODER_RESULT_SUCCESS) break;
        if (step == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) continue;
        status = RH_DECOMPRESS_CORRUPT; /* an error, or the input ended early */
        break;
    }
    lib.destroy(state);
    return status;
}

int rh_decompress(int encoding, const void *input, size_t size, size_t limit, void **output, size_t *output_size) {
    pthread_once(&loaded, load);
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
