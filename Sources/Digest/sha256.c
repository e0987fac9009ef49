#include "rh_sha256.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotate(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state (FIPS 180-4, 6.2.2). */
static void compress(uint32_t state[8], const uint8_t block[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 | (uint32_t)block[4 * i + 2] << 8 |
               (uint32_t)block[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotate(w[i - 15], 7) ^ rotate(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotate(w[i - 2], 17) ^ rotate(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)) + ((e & f) ^ (~e & g)) + round_constants[i] + w[i];
        uint32_t t2 = (rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

#if defined(__x86_64__)
/* The same compression with the x86 SHA extensions (about five times as fast): the state is
 * kept as ABEF and CDGH, four rounds per step, the message schedule by sha256msg1/msg2. */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_sha_ni(uint32_t state[8], const uint8_t block[64]) {
    const __m128i byte_order = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i cdab = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[0]), 0xB1);
    __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&state[4]), 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    const __m128i abef_before = abef, cdgh_before = cdgh;
    __m128i message[4];
    for (int group = 0; group < 16; group++) {
        __m128i *m = &message[group % 4];
        if (group < 4) {
            *m = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(block + 16 * group)), byte_order);
        } else {
            __m128i previous = message[(group + 3) % 4];
            __m128i w7 = _mm_alignr_epi8(previous, message[(group + 2) % 4], 4);
            *m = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(*m, message[(group + 1) % 4]), w7), previous);
        }
        __m128i k = _mm_add_epi32(*m, _mm_loadu_si128((const __m128i *)&round_constants[4 * group]));
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, k);
        abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(k, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef_before);
    cdgh = _mm_add_epi32(cdgh, cdgh_before);
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

/* Whether this processor has the SHA extensions (and the SSSE3 and SSE4.1 they come with). */
static int has_sha_ni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1)) return 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#endif

/* The compression this processor runs fastest, chosen once. */
static void compress_blocks(uint32_t state[8], const uint8_t *blocks, size_t count) {
#if defined(__x86_64__)
    static int chosen = -1; /* a race writes the same value */
    if (__atomic_load_n(&chosen, __ATOMIC_RELAXED) < 0) __atomic_store_n(&chosen, has_sha_ni(), __ATOMIC_RELAXED);
    if (__atomic_load_n(&chosen, __ATOMIC_RELAXED)) {
        for (size_t i = 0; i < count; i++) compress_sha_ni(state, blocks + 64 * i);
        return;
    }
#endif
    for (size_t i = 0; i < count; i++) compress(state, blocks + 64 * i);
}

void rh_sha256_init(rh_sha256 *context) {
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(context->state, initial, sizeof initial);
    context->length = 0;
    context->used = 0;
}

void rh_sha256_update(rh_sha256 *context, const void *data, size_t count) {
    const uint8_t *bytes = data;
    context->length += count;
    if (context->used > 0) {
        size_t take = 64 - context->used < count ? 64 - context->used : count;
        memcpy(context->block + context->used, bytes, take);
        context->used += take;
        bytes += take;
        count -= take;
        if (context->used < 64) return;
        compress_blocks(context->state, context->block, 1);
        context->used = 0;
    }
    compress_blocks(context->state, bytes, count / 64);
    bytes += count / 64 * 64;
    count %= 64;
    memcpy(context->block, bytes, count);
    context->used = count;
}

void rh_sha256_final(rh_sha256 *context, uint8_t digest[32]) {
    uint64_t bits = context->length * 8;
    context->block[context->used++] = 0x80;
    if (context->used > 56) {
        memset(context->block + context->used, 0, 64 - context->used);
        compress_blocks(context->state, context->block, 1);
        context->used = 0;
    }
    memset(context->block + context->used, 0, 56 - context->used);
    for (int i = 0; i < 8; i++) context->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    compress_blocks(context->state, context->block, 1);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(context->state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(context->state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(context->state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)context->state[i];
    }
}
