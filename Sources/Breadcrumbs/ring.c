#include "breadcrumb_ring.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define RING_MAGIC 0x43424852u /* "RHBC" */
#define RING_VERSION 2u /* 1: the checksum took the sequence first (still read) */

typedef struct ring_header {
    uint32_t magic;
    uint32_t version;
    uint32_t slot_bytes;
    uint32_t slots;
    _Atomic uint64_t next;
    uint8_t reserved[RH_CRUMB_HEADER_BYTES - 24];
} ring_header;

typedef struct ring_slot {
    _Atomic uint64_t sequence;
    int64_t timestamp_ms;
    int32_t level;
    uint16_t category_len;
    uint16_t message_len;
    uint64_t checksum;
    uint32_t reserved;
    char text[RH_CRUMB_TEXT_MAX];
} ring_slot;

_Static_assert(sizeof(ring_header) == RH_CRUMB_HEADER_BYTES, "ring header size");
_Static_assert(sizeof(ring_slot) == RH_CRUMB_SLOT_BYTES, "ring slot size");
_Static_assert(offsetof(ring_slot, text) == RH_CRUMB_SLOT_FIELDS, "ring slot fields");

/* Slots come in powers of two, so a sequence finds its slot with a mask, not a division. */
static uint32_t slot_count(uint32_t asked) {
    uint32_t slots = 1;
    while (slots < asked && slots < (1u << 30)) slots <<= 1;
    return slots;
}

size_t rh_crumb_ring_bytes(uint32_t slots) { return RH_CRUMB_HEADER_BYTES + (size_t)slot_count(slots) * RH_CRUMB_SLOT_BYTES; }

void rh_crumb_ring_format(void *base, uint32_t slots) {
    ring_header *header = base;
    slots = slot_count(slots);
    header->version = RING_VERSION;
    header->slot_bytes = RH_CRUMB_SLOT_BYTES;
    header->slots = slots;
    atomic_store_explicit(&header->next, 0, memory_order_relaxed);
    /* The magic last: a ring read while it is made is not one yet. */
    atomic_thread_fence(memory_order_release);
    header->magic = RING_MAGIC;
}

bool rh_crumb_ring_valid(const void *base, size_t bytes, uint32_t *slots_out) {
    if (base == NULL || bytes < RH_CRUMB_HEADER_BYTES) return false;
    const ring_header *header = base;
    if (header->magic != RING_MAGIC || (header->version != 1 && header->version != RING_VERSION) || header->slot_bytes != RH_CRUMB_SLOT_BYTES
        || header->slots == 0 || (header->slots & (header->slots - 1)) != 0 || rh_crumb_ring_bytes(header->slots) > bytes)
        return false;
    if (slots_out) *slots_out = header->slots;
    return true;
}

/* Version 1's checksum, kept to read a ring an older host left: a 64-bit multiply-xorshift
 * mix over 8 bytes at a time, the sequence first. */
static uint64_t mix(uint64_t hash, uint64_t word) {
    hash = (hash ^ word) * 0x9E3779B97F4A7C15ull;
    return hash ^ (hash >> 29);
}

static uint64_t mix_bytes(uint64_t hash, const void *bytes, size_t len) {
    const unsigned char *at = bytes;
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, at, 8);
        hash = mix(hash, word);
        at += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, at, len);
    return mix(hash, tail ^ ((uint64_t)len << 56));
}

static uint64_t checksum_v1(uint64_t sequence, int64_t timestamp_ms, int32_t level, uint16_t category_len,
                            uint16_t message_len, const char *category, const char *message) {
    uint64_t hash = mix(0xcbf29ce484222325ull, sequence);
    hash = mix(hash, (uint64_t)timestamp_ms);
    hash = mix(hash, (uint64_t)(uint32_t)level | (uint64_t)category_len << 32 | (uint64_t)message_len << 48);
    hash = mix_bytes(hash, category, category_len);
    return mix_bytes(hash, message, message_len);
}

/* Version 2's checksum (a checksum, not a MAC: it detects torn and mixed writes; nobody
 * forges a ring in memory they can already write). One multiply per 8 bytes: each step is
 * a bijection of the word, so two contents that differ in one word always differ. The text
 * is hashed before the slot is claimed, in the same pass that looks for non-ASCII bytes;
 * the sequence and the fields are folded in after, then mixed once. It is computed over
 * the values themselves, never read back from the shared slot, so two writers that met in
 * one slot (a ring lapped while a writer was preempted) leave a checksum that matches
 * neither's. */
#define HASH_SEED 0xcbf29ce484222325ull

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

/* Hashes `len` bytes into `hash`; ORs every byte into *bits (a high bit set: not ASCII). */
static inline uint64_t hash_text(uint64_t hash, const char *text, size_t len, uint64_t *bits) {
    uint64_t seen = 0;
    size_t at = 0;
    for (; at + 8 <= len; at += 8) {
        uint64_t word;
        memcpy(&word, text + at, 8);
        seen |= word;
        hash = step(hash, word);
    }
    uint64_t tail = tail_word(text + len, len - at, len);
    *bits |= seen | tail;
    return step(hash, tail ^ ((uint64_t)len << 56));
}

static inline uint64_t finish(uint64_t text_hash, uint64_t sequence, int64_t timestamp_ms, int32_t level, uint16_t category_len,
                              uint16_t message_len) {
    uint64_t hash = step(text_hash, sequence);
    hash = step(hash, (uint64_t)timestamp_ms);
    hash = step(hash, (uint64_t)(uint32_t)level | (uint64_t)category_len << 32 | (uint64_t)message_len << 48);
    return hash ^ (hash >> 29);
}

/* `len` cut to at most `limit` bytes without splitting a UTF-8 sequence. */
static size_t cut(const char *text, size_t len, size_t limit) {
    if (len <= limit) return len;
    size_t at = limit;
    while (at > 0 && ((unsigned char)text[at] & 0xC0) == 0x80) at--;
    return at;
}

static inline bool writable(const ring_header *header) {
    return header != NULL && header->magic == RING_MAGIC && header->version == RING_VERSION && header->slots != 0 &&
           (header->slots & (header->slots - 1)) == 0;
}

/* Claims a slot and writes one breadcrumb whose text is already hashed. `mask` is the slot
 * count less one (the header's, read once by whoever passes it). */
static uint64_t store(ring_header *header, uint64_t mask, int64_t timestamp_ms, int32_t level, const char *category,
                      size_t category_len, const char *message, size_t message_len, uint64_t text_hash) {
    uint64_t sequence = atomic_fetch_add_explicit(&header->next, 1, memory_order_relaxed) + 1;
    ring_slot *slot = (ring_slot *)((char *)header + RH_CRUMB_HEADER_BYTES + ((sequence - 1) & mask) * RH_CRUMB_SLOT_BYTES);
    /* Empty first: a reader (or a kill) from here to the last store sees no breadcrumb. */
    atomic_store_explicit(&slot->sequence, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    slot->timestamp_ms = timestamp_ms;
    slot->level = level;
    slot->category_len = (uint16_t)category_len;
    slot->message_len = (uint16_t)message_len;
    memcpy(slot->text, category, category_len);
    memcpy(slot->text + category_len, message, message_len);
    slot->checksum = finish(text_hash, sequence, timestamp_ms, level, (uint16_t)category_len, (uint16_t)message_len);
    atomic_store_explicit(&slot->sequence, sequence, memory_order_release);
    return sequence;
}

uint64_t rh_crumb_write(void *base, int64_t timestamp_ms, int32_t level, const char *category, size_t category_len,
                        const char *message, size_t message_len) {
    ring_header *header = base;
    if (!writable(header) || message == NULL) return 0;
    if (category == NULL) {
        category = "default";
        category_len = 7;
    }
    category_len = cut(category, category_len, RH_CRUMB_CATEGORY_MAX);
    message_len = cut(message, message_len, RH_CRUMB_TEXT_MAX - category_len);
    uint64_t bits = 0;
    uint64_t text_hash = hash_text(hash_text(HASH_SEED, category, category_len, &bits), message, message_len, &bits);
    return store(header, header->slots - 1, timestamp_ms, level, category, category_len, message, message_len, text_hash);
}

/* The checksum a slot's copy should carry, by the ring's version. */
static uint64_t slot_checksum(uint32_t version, uint64_t sequence, const ring_slot *copy) {
    const char *category = copy->text, *message = copy->text + copy->category_len;
    if (version == 1)
        return checksum_v1(sequence, copy->timestamp_ms, copy->level, copy->category_len, copy->message_len, category, message);
    uint64_t bits = 0;
    uint64_t text_hash = hash_text(hash_text(HASH_SEED, category, copy->category_len, &bits), message, copy->message_len, &bits);
    return finish(text_hash, sequence, copy->timestamp_ms, copy->level, copy->category_len, copy->message_len);
}

static ring_slot *slot_at(const void *base, uint32_t index) {
    return (ring_slot *)((char *)base + RH_CRUMB_HEADER_BYTES + (size_t)index * RH_CRUMB_SLOT_BYTES);
}

/* Copies the slot that held `sequence` when its sequence was read (acquire) into `copy`: its
 * fields and only as much text as they name. Whether the copy is that breadcrumb, whole: the
 * sequence unchanged after the copy, the lengths in bounds and the checksum matching. */
static bool copy_slot(uint32_t version, ring_slot *shared, uint64_t sequence, ring_slot *copy) {
    memcpy(copy, shared, RH_CRUMB_SLOT_FIELDS);
    size_t text = (size_t)copy->category_len + copy->message_len;
    if (text > RH_CRUMB_TEXT_MAX) return false;
    memcpy(copy->text, shared->text, text);
    atomic_thread_fence(memory_order_acquire);
    uint64_t after = atomic_load_explicit(&shared->sequence, memory_order_relaxed);
    return after == sequence && slot_checksum(version, sequence, copy) == copy->checksum;
}

/* The breadcrumb `copy` holds, its text read from `text` (the copy's own, or the caller's). */
static rh_crumb crumb_of(uint64_t sequence, const ring_slot *copy, const char *text) {
    return (rh_crumb){sequence, copy->timestamp_ms, copy->level, text, copy->category_len, text + copy->category_len, copy->message_len};
}

void rh_crumb_ring_read(const void *base, size_t bytes, void (*visit)(void *ctx, const rh_crumb *crumb), void *ctx,
                        uint64_t *torn_out) {
    uint32_t slots = 0;
    uint64_t torn = 0;
    if (rh_crumb_ring_valid(base, bytes, &slots)) {
        uint32_t version = ((const ring_header *)base)->version;
        for (uint32_t index = 0; index < slots; index++) {
            ring_slot *shared = slot_at(base, index);
            uint64_t sequence = atomic_load_explicit(&shared->sequence, memory_order_acquire);
            if (sequence == 0) continue;
            ring_slot copy;
            if (!copy_slot(version, shared, sequence, &copy)) {
                torn++;
                continue;
            }
            rh_crumb crumb = crumb_of(sequence, &copy, copy.text);
            visit(ctx, &crumb);
        }
    }
    if (torn_out) *torn_out = torn;
}

size_t rh_crumb_ring_sequences(const void *base, size_t bytes, uint64_t *out, size_t capacity) {
    uint32_t slots = 0;
    size_t count = 0;
    if (!rh_crumb_ring_valid(base, bytes, &slots)) return 0;
    for (uint32_t index = 0; index < slots && count < capacity; index++) {
        uint64_t sequence = atomic_load_explicit(&slot_at(base, index)->sequence, memory_order_acquire);
        if (sequence != 0) out[count++] = sequence;
    }
    return count;
}

bool rh_crumb_ring_read_one(const void *base, size_t bytes, uint64_t sequence, rh_crumb_text *text, rh_crumb *crumb) {
    uint32_t slots = 0;
    if (sequence == 0 || !rh_crumb_ring_valid(base, bytes, &slots)) return false;
    ring_slot *shared = slot_at(base, (uint32_t)((sequence - 1) & (slots - 1)));
    if (atomic_load_explicit(&shared->sequence, memory_order_acquire) != sequence) return false;
    ring_slot copy;
    if (!copy_slot(((const ring_header *)base)->version, shared, sequence, &copy)) return false;
    memcpy(text->bytes, copy.text, (size_t)copy.category_len + copy.message_len);
    *crumb = crumb_of(sequence, &copy, text->bytes);
    return true;
}

bool rh_crumb_valid_utf8(const char *text, size_t len) {
    const unsigned char *at = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        /* ASCII, 8 bytes at a time: most breadcrumbs are. */
        if (i + 8 <= len) {
            uint64_t word;
            memcpy(&word, at + i, 8);
            if ((word & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char lead = at[i];
        size_t width;
        uint32_t minimum;
        if (lead < 0x80) {
            i++;
            continue;
        } else if (lead >= 0xC2 && lead <= 0xDF) {
            width = 2, minimum = 0x80;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            width = 3, minimum = 0x800;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            width = 4, minimum = 0x10000;
        } else {
            return false;
        }
        if (i + width > len) return false;
        uint32_t point = lead & (0x7F >> width);
        for (size_t k = 1; k < width; k++) {
            if ((at[i + k] & 0xC0) != 0x80) return false;
            point = (point << 6) | (at[i + k] & 0x3F);
        }
        if (point < minimum || point > 0x10FFFF || (point >= 0xD800 && point <= 0xDFFF)) return false;
        i += width;
    }
    return true;
}

int64_t rh_crumb_now_ms(void) {
    struct timespec now;
    /* The kernel's tick (4 ms here), read from the vDSO in a few nanoseconds: the precise
     * clock alone would cost a breadcrumb a fifth of its time. Order is the sequence's. */
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* The embedding program's live ring. Rings are never unmapped (a writer may hold the
 * pointer it loaded a moment before a stop), so a stale pointer writes into a mapping that
 * stays valid, into a file the next launch reads or has removed.
 *
 * The ring is kept with its slot count's log2 in the top byte: one load gives a writer both,
 * always of the same ring, and a writer never reads the header's line (where every writer's
 * atomic add lands) for them: with threads on several cores, that read cost a second
 * transfer of the line per breadcrumb. 0: no ring (breadcrumbs off). */
static _Atomic uintptr_t live_token;
static _Atomic uint64_t live_ring;

#define RING_SHIFT 56

static void *unpacked_ring(uint64_t packed) { return (void *)(uintptr_t)(packed & ((1ull << RING_SHIFT) - 1)); }
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void forget_in_child(void) {
    atomic_store(&live_ring, 0);
    atomic_store(&live_token, 0);
}

static void install_fork_handler(void) { pthread_atfork(NULL, NULL, forget_in_child); }

void rh_crumb_activate(uintptr_t token, void *base) {
    pthread_once(&fork_handler_once, install_fork_handler);
    uint64_t packed = 0;
    if (writable(base) && (uintptr_t)base >> RING_SHIFT == 0)
        packed = (uintptr_t)base | (uint64_t)__builtin_ctz(((ring_header *)base)->slots) << RING_SHIFT;
    atomic_store(&live_ring, packed);
    atomic_store(&live_token, token);
}

void rh_crumb_deactivate(uintptr_t token) {
    uintptr_t expected = token;
    if (atomic_compare_exchange_strong(&live_token, &expected, 0)) atomic_store(&live_ring, 0);
}

bool rh_crumb_is_live(uintptr_t token) {
    return token != 0 && atomic_load_explicit(&live_token, memory_order_acquire) == token;
}

void *rh_crumb_live_ring(uintptr_t token) {
    if (token == 0 || atomic_load_explicit(&live_token, memory_order_acquire) != token) return NULL;
    return unpacked_ring(atomic_load_explicit(&live_ring, memory_order_acquire));
}

rh_crumb_outcome rh_crumb_record(uintptr_t token, int32_t level, const char *category, const char *message) {
    if (token == 0 || atomic_load_explicit(&live_token, memory_order_acquire) != token) return RH_CRUMB_NOT_LIVE;
    uint64_t packed = atomic_load_explicit(&live_ring, memory_order_acquire);
    size_t category_len = category ? strlen(category) : 0, message_len = strlen(message);
    const char *kept_category = category ? category : "default";
    size_t kept_category_len = cut(kept_category, category ? category_len : 7, RH_CRUMB_CATEGORY_MAX);
    size_t kept_message_len = cut(message, message_len, RH_CRUMB_TEXT_MAX - kept_category_len);
    /* One pass hashes the kept text and sees whether it is all ASCII; only text that is not,
     * or was cut, is validated byte by byte. */
    uint64_t bits = 0;
    uint64_t text_hash = hash_text(hash_text(HASH_SEED, kept_category, kept_category_len, &bits), message, kept_message_len, &bits);
    if ((bits & 0x8080808080808080ull) != 0 || kept_category_len < category_len || kept_message_len < message_len) {
        if ((category && !rh_crumb_valid_utf8(category, category_len)) || !rh_crumb_valid_utf8(message, message_len))
            return RH_CRUMB_INVALID_TEXT;
    }
    if (packed == 0) return RH_CRUMB_OFF;
    store(unpacked_ring(packed), (1ull << (packed >> RING_SHIFT)) - 1, rh_crumb_now_ms(), level, kept_category, kept_category_len,
          message, kept_message_len, text_hash);
    return RH_CRUMB_RECORDED;
}
