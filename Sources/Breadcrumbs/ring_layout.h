/* The ring file's layout and checksums, shared by the writer (ring.c) and the reader
 * (ring_read.c). Private to this target: breadcrumb_ring.h is the interface. */
#pragma once

#include "breadcrumb_ring.h"

#include <stdatomic.h>
#include <string.h>

#define RING_MAGIC 0x43424852u /* "RHBC" */
/* 1: one lane, the checksum took the sequence first; 2: one lane; 3: lanes, each breadcrumb
 * with its order key. Versions 1 and 2 are still read. */
#define RING_VERSION 3u

typedef struct ring_header {
    uint32_t magic;
    uint32_t version;
    uint32_t slot_bytes;
    uint32_t slots; /* per lane, a power of two */
    _Atomic uint64_t next; /* versions 1 and 2: the next sequence; version 3: unused */
    uint32_t lanes;    /* version 3 */
    uint32_t order;    /* version 3: an rh_crumb_order */
    uint8_t reserved[RH_CRUMB_HEADER_BYTES - 32];
} ring_header;

/* Version 3: after the header, one of these per lane, then each lane's slots in turn. */
typedef struct lane_header {
    _Atomic uint64_t owner;   /* the thread writing it alone (0: none); lane 0 is never owned */
    _Atomic uint64_t claimed; /* the sequence of the lane's newest breadcrumb (written or not) */
    uint64_t last_key;        /* the owner's newest order key */
    uint8_t reserved[RH_CRUMB_LANE_BYTES - 24];
} lane_header;

/* A version 3 slot. `sequence` is the breadcrumb's place in its lane (0: empty), `key` its
 * place among all lanes' breadcrumbs. */
typedef struct ring_slot {
    _Atomic uint64_t sequence;
    uint64_t key;
    int64_t timestamp_ms;
    uint64_t checksum;
    uint8_t level;
    uint8_t category_len;
    uint16_t message_len;
    char text[RH_CRUMB_TEXT_MAX];
} ring_slot;

/* A version 1 or 2 slot (the one lane's sequence is the order). */
typedef struct ring_slot_v2 {
    _Atomic uint64_t sequence;
    int64_t timestamp_ms;
    int32_t level;
    uint16_t category_len;
    uint16_t message_len;
    uint64_t checksum;
    uint32_t reserved;
    char text[RH_CRUMB_TEXT_MAX];
} ring_slot_v2;

_Static_assert(sizeof(ring_header) == RH_CRUMB_HEADER_BYTES, "ring header size");
_Static_assert(sizeof(lane_header) == RH_CRUMB_LANE_BYTES, "lane header size");
_Static_assert(sizeof(ring_slot) == RH_CRUMB_SLOT_BYTES, "ring slot size");
_Static_assert(offsetof(ring_slot, text) == RH_CRUMB_SLOT_FIELDS, "ring slot fields");
_Static_assert(sizeof(ring_slot_v2) == RH_CRUMB_SLOT_BYTES, "version 2 slot size");
_Static_assert(offsetof(ring_slot_v2, text) == RH_CRUMB_SLOT_FIELDS, "version 2 slot fields");

static inline lane_header *lane_at(const void *base, uint32_t lane) {
    return (lane_header *)((char *)base + RH_CRUMB_HEADER_BYTES + (size_t)lane * RH_CRUMB_LANE_BYTES);
}

/* Slot `index` of `lane` in a version 3 ring of `lanes` lanes of `slots` slots. */
static inline void *lane_slot(const void *base, uint32_t lanes, uint32_t slots, uint32_t lane, uint64_t index) {
    return (char *)base + RH_CRUMB_HEADER_BYTES + (size_t)lanes * RH_CRUMB_LANE_BYTES +
           ((size_t)lane * slots + index) * RH_CRUMB_SLOT_BYTES;
}

/* Checksums (a checksum, not a MAC: it detects torn and mixed writes; nobody forges a ring
 * in memory they can already write). Each step is a bijection of its word (a multiply after
 * an exclusive or, or an add), so two contents that differ in one word always differ. The
 * text is hashed before the slot is claimed, in the same pass that looks for non-ASCII
 * bytes; the fields are folded in after. It is computed over the values themselves, never
 * read back from the shared slot, so two writers that met in one slot (a lane lapped while a
 * writer was preempted) leave a checksum that matches neither's.
 *
 * Version 2 chains every word through one multiply after another. Version 3 sums the text
 * (below) and chains the fields apart, the two joined at the end. */
#define HASH_SEED 0xcbf29ce484222325ull
#define HASH_SEED_ODD 0x84222325cbf29ce4ull
#define HASH_SEED_FIELDS 0x9ce484222325cbf2ull

static inline uint64_t step(uint64_t hash, uint64_t word) { return (hash ^ word) * 0x9E3779B97F4A7C15ull; }

/* The last `rest` (< 8) bytes of a text of `len` bytes ending at `end`, in a register. A text
 * of 8 bytes or more is read with one load that ends at its end; a shorter one byte by byte
 * into a register: a variable-length copy to memory read back as a word would stall on
 * store forwarding, a third of a breadcrumb's time. */
static inline uint64_t tail_word(const char *end, size_t rest, size_t len) {
    if (rest == 0) return 0;
    uint64_t word = 0;
    if (len >= 8) {
        memcpy(&word, end - 8, 8);
        return word >> (8 * (8 - rest));
    }
    for (size_t i = 0; i < rest; i++) word |= (uint64_t)(unsigned char)end[(ptrdiff_t)i - (ptrdiff_t)rest] << (8 * i);
    return word;
}

/* Version 2's text hash: `len` bytes into `hash`, one chain. */
static inline uint64_t hash_text_v2(uint64_t hash, const char *text, size_t len) {
    size_t at = 0;
    for (; at + 8 <= len; at += 8) {
        uint64_t word;
        memcpy(&word, text + at, 8);
        hash = step(hash, word);
    }
    return step(hash, tail_word(text + len, len - at, len) ^ ((uint64_t)len << 56));
}

/* Version 3's text sums: every word (the tail with the length) added to `first`, and `first`
 * after each to `second`, as Fletcher's checksum does. A word that differs changes `first`;
 * two that differ and cancel there change `second`. Adds wait one cycle for each other where
 * a multiply per word waited three (0.4 ns of a breadcrumb here). ORs every byte into *bits
 * (a high bit set: not ASCII). */
typedef struct text_sums {
    uint64_t first, second;
} text_sums;

static inline __attribute__((always_inline)) void add_text(text_sums *sums, const char *text, size_t len, uint64_t *bits) {
    uint64_t first = sums->first, second = sums->second, seen = 0;
    size_t at = 0;
    for (; at + 8 <= len; at += 8) {
        uint64_t word;
        memcpy(&word, text + at, 8);
        seen |= word;
        first += word;
        second += first;
    }
    uint64_t tail = tail_word(text + len, len - at, len);
    *bits |= seen | tail;
    first += tail ^ ((uint64_t)len << 56);
    sums->first = first;
    sums->second = second + first;
}

/* Version 3's hash of a breadcrumb's category and message: their sums, mixed. */
static inline __attribute__((always_inline)) uint64_t text_checksum(const char *category, size_t category_len, const char *message,
                                                                   size_t message_len, uint64_t *bits) {
    text_sums sums = {HASH_SEED, HASH_SEED_ODD};
    add_text(&sums, category, category_len, bits);
    add_text(&sums, message, message_len, bits);
    return step(step(HASH_SEED, sums.first), sums.second);
}

/* Version 3's checksum: the text's hash joined with the fields' chain. */
static inline uint64_t finish(uint64_t text_hash, uint64_t sequence, uint64_t key, int64_t timestamp_ms, uint8_t level,
                              uint8_t category_len, uint16_t message_len) {
    uint64_t fields = step(step(HASH_SEED_FIELDS, sequence), key);
    fields = step(step(fields, (uint64_t)timestamp_ms), (uint64_t)level | (uint64_t)category_len << 8 | (uint64_t)message_len << 16);
    uint64_t hash = step(text_hash, fields);
    return hash ^ (hash >> 29);
}

/* Version 2's: the sequence, the time and the fields chained after the text's hash. */
static inline uint64_t finish_v2(uint64_t text_hash, uint64_t sequence, int64_t timestamp_ms, int32_t level, uint16_t category_len,
                                 uint16_t message_len) {
    uint64_t hash = step(text_hash, sequence);
    hash = step(hash, (uint64_t)timestamp_ms);
    hash = step(hash, (uint64_t)(uint32_t)level | (uint64_t)category_len << 32 | (uint64_t)message_len << 48);
    return hash ^ (hash >> 29);
}
