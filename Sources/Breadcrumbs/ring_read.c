#include "ring_layout.h"

/* A ring as its reader sees it, of any version: versions 1 and 2 are one lane of version 2
 * slots right after the header, their sequence the order. */
typedef struct ring_view {
    const void *base;
    uint32_t version;
    uint32_t lanes;
    uint32_t slots;
} ring_view;

static uint64_t lane_bytes(uint32_t lanes, uint32_t slots) {
    return (uint64_t)lanes * (RH_CRUMB_LANE_BYTES + (uint64_t)slots * RH_CRUMB_SLOT_BYTES);
}

static bool view(const void *base, size_t bytes, ring_view *out) {
    if (base == NULL || bytes < RH_CRUMB_HEADER_BYTES) return false;
    const ring_header *header = base;
    uint32_t version = header->version, slots = header->slots;
    if (header->magic != RING_MAGIC || version < 1 || version > RING_VERSION || header->slot_bytes != RH_CRUMB_SLOT_BYTES ||
        slots == 0 || (slots & (slots - 1)) != 0 || slots > (1u << 30))
        return false;
    uint32_t lanes = version == RING_VERSION ? header->lanes : 1;
    if (lanes == 0 || lanes > 64) return false;
    uint64_t need = RH_CRUMB_HEADER_BYTES + (version == RING_VERSION ? lane_bytes(lanes, slots) : (uint64_t)slots * RH_CRUMB_SLOT_BYTES);
    if (need > bytes) return false;
    *out = (ring_view){base, version, lanes, slots};
    return true;
}

bool rh_crumb_ring_valid(const void *base, size_t bytes) {
    ring_view ring;
    return view(base, bytes, &ring);
}

size_t rh_crumb_ring_window(const void *base, size_t bytes) {
    ring_view ring;
    if (!view(base, bytes, &ring)) return 0;
    return ring.lanes > 1 ? ring.slots - 1 : ring.slots;
}

size_t rh_crumb_ring_capacity(const void *base, size_t bytes) {
    ring_view ring;
    return view(base, bytes, &ring) ? 2 * (size_t)ring.lanes * ring.slots : 0;
}

/* The slot `sequence` of `lane` is in (either version's; both begin with the sequence). */
static _Atomic uint64_t *slot_of(const ring_view *ring, uint32_t lane, uint64_t sequence) {
    uint64_t index = (sequence - 1) & (ring->slots - 1);
    if (ring->version == RING_VERSION) return &((ring_slot *)lane_slot(ring->base, ring->lanes, ring->slots, lane, index))->sequence;
    return &((ring_slot_v2 *)((char *)ring->base + RH_CRUMB_HEADER_BYTES + index * RH_CRUMB_SLOT_BYTES))->sequence;
}

/* Sequences a locator holds: below it, and so is every sequence a lane of this ring reaches
 * in 2^56 breadcrumbs (2,000 years at one a nanosecond). */
#define SEQUENCE_LIMIT (1ull << RH_CRUMB_LANE_SHIFT)

static uint64_t locator(uint32_t lane, uint64_t sequence) { return (uint64_t)lane << RH_CRUMB_LANE_SHIFT | sequence; }

/* Whether `x` comes before `y`: by key, then by lane (keys read in the same tick). */
static bool before(const rh_crumb_ref *x, const rh_crumb_ref *y) {
    return x->key < y->key || (x->key == y->key && x->locator < y->locator);
}

/* How many breadcrumbs `lane` was given (written or being written): versions 1 and 2 count
 * them in the header. */
static uint64_t given(const ring_view *ring, uint32_t lane) {
    if (ring->version != RING_VERSION) return atomic_load_explicit(&((ring_header *)ring->base)->next, memory_order_acquire);
    return atomic_load_explicit(&lane_at(ring->base, lane)->claimed, memory_order_acquire);
}

/* The breadcrumbs `lane` holds, oldest first, each with its key (read between two reads of
 * the slot's sequence, so a key a writer is replacing is never taken for the old
 * breadcrumb's); returns how many. Only the slots of the last sequences it was given are
 * read: a lane no thread wrote costs nothing, and no page it never used is touched. */
static size_t collect(const ring_view *ring, uint32_t lane, rh_crumb_ref *refs, size_t capacity) {
    /* A damaged count past what a locator holds is read as none. */
    uint64_t newest = given(ring, lane);
    if (newest >= SEQUENCE_LIMIT) return 0;
    uint64_t held = newest < ring->slots ? newest : ring->slots;
    if (held > capacity) held = capacity; /* the newest of them, then */
    size_t count = 0;
    for (uint64_t index = 0; index < held; index++) {
        uint64_t sequence = newest - held + 1 + index;
        _Atomic uint64_t *shared = slot_of(ring, lane, sequence);
        if (atomic_load_explicit(shared, memory_order_acquire) != sequence) continue; /* being written, or torn */
        uint64_t key = sequence;
        if (ring->version == RING_VERSION) key = ((const ring_slot *)(const void *)shared)->key;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(shared, memory_order_relaxed) != sequence) continue;
        refs[count++] = (rh_crumb_ref){locator(lane, sequence), key, 0};
    }
    return count;
}

/* Each breadcrumb's id: how many of all lanes' breadcrumbs are not newer than it. A lane's
 * sequences rise with its keys, so the count of a lane's breadcrumbs up to a key is the
 * sequence of the last one at or before it; a lane's breadcrumbs before its oldest one
 * still held are older than all it holds. */
static void number(rh_crumb_ref *refs, size_t count) {
    uint64_t counted[64] = {0}, oldest[64] = {0};
    for (size_t i = 0; i < count; i++) {
        uint32_t lane = (uint32_t)(refs[i].locator >> RH_CRUMB_LANE_SHIFT);
        uint64_t sequence = refs[i].locator & (SEQUENCE_LIMIT - 1);
        if (oldest[lane] == 0 || sequence < oldest[lane]) oldest[lane] = sequence;
    }
    uint64_t total = 0;
    for (int lane = 0; lane < 64; lane++) {
        if (oldest[lane] > 0) counted[lane] = oldest[lane] - 1;
        total += counted[lane];
    }
    uint64_t last = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t lane = (uint32_t)(refs[i].locator >> RH_CRUMB_LANE_SHIFT);
        uint64_t sequence = refs[i].locator & (SEQUENCE_LIMIT - 1);
        if (sequence > counted[lane]) {
            total += sequence - counted[lane];
            counted[lane] = sequence;
        }
        last = total > last ? total : last + 1;
        refs[i].id = last;
    }
}

size_t rh_crumb_ring_list(const void *base, size_t bytes, rh_crumb_ref *refs, size_t capacity) {
    ring_view ring;
    if (!view(base, bytes, &ring) || refs == NULL) return 0;
    /* Each lane's breadcrumbs in the first half, one run after another, each run in order;
     * merged into the second half, then moved to the front. */
    size_t half = capacity / 2, count = 0, at[64], end[64];
    uint32_t runs = 0; /* the lanes that hold any, as runs [at, end) */
    for (uint32_t lane = 0; lane < ring.lanes; lane++) {
        size_t found = collect(&ring, lane, refs + count, half - count);
        if (found == 0) continue;
        at[runs] = count;
        end[runs++] = count + found;
        count += found;
    }
    if (runs > 1) {
        for (size_t merged = 0; merged < count; merged++) {
            uint32_t next = 0;
            for (uint32_t run = 1; run < runs; run++)
                if (before(&refs[at[run]], &refs[at[next]])) next = run;
            refs[half + merged] = refs[at[next]++];
            if (at[next] == end[next]) { /* that run is done: the last one takes its place */
                runs--;
                at[next] = at[runs];
                end[next] = end[runs];
            }
        }
        memmove(refs, refs + half, count * sizeof *refs);
    }
    number(refs, count);
    return count;
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

static uint64_t checksum_v1(uint64_t sequence, const ring_slot_v2 *copy) {
    uint64_t hash = mix(0xcbf29ce484222325ull, sequence);
    hash = mix(hash, (uint64_t)copy->timestamp_ms);
    hash = mix(hash, (uint64_t)(uint32_t)copy->level | (uint64_t)copy->category_len << 32 | (uint64_t)copy->message_len << 48);
    hash = mix_bytes(hash, copy->text, copy->category_len);
    return mix_bytes(hash, copy->text + copy->category_len, copy->message_len);
}

/* Copies `shared` (holding `sequence` when it was read, acquire) into `copy`: its fields and
 * only as much text as they name. Whether the copy is that breadcrumb, whole: the sequence
 * unchanged after the copy, the lengths in bounds. */
static bool copy_slot(const _Atomic uint64_t *shared, uint64_t sequence, size_t text_at, size_t (*text_len)(const void *), void *copy) {
    memcpy(copy, (const void *)shared, RH_CRUMB_SLOT_FIELDS);
    size_t text = text_len(copy);
    if (text > RH_CRUMB_TEXT_MAX) return false;
    memcpy((char *)copy + text_at, (const char *)shared + text_at, text);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(shared, memory_order_relaxed) == sequence;
}

static size_t text_len_v3(const void *copy) {
    const ring_slot *slot = copy;
    return (size_t)slot->category_len + slot->message_len;
}

static size_t text_len_v2(const void *copy) {
    const ring_slot_v2 *slot = copy;
    return (size_t)slot->category_len + slot->message_len;
}

bool rh_crumb_ring_read_one(const void *base, size_t bytes, uint64_t locator, rh_crumb_text *text, rh_crumb *crumb) {
    ring_view ring;
    uint32_t lane = (uint32_t)(locator >> RH_CRUMB_LANE_SHIFT);
    uint64_t sequence = locator & (SEQUENCE_LIMIT - 1);
    if (sequence == 0 || !view(base, bytes, &ring) || lane >= ring.lanes) return false;
    _Atomic uint64_t *shared = slot_of(&ring, lane, sequence);
    if (atomic_load_explicit(shared, memory_order_acquire) != sequence) return false;
    if (ring.version == RING_VERSION) {
        ring_slot copy;
        if (!copy_slot(shared, sequence, offsetof(ring_slot, text), text_len_v3, &copy)) return false;
        uint64_t bits = 0;
        uint64_t hash = text_checksum(copy.text, copy.category_len, copy.text + copy.category_len, copy.message_len, &bits);
        if (finish(hash, sequence, copy.key, copy.timestamp_ms, copy.level, copy.category_len, copy.message_len) != copy.checksum)
            return false;
        memcpy(text->bytes, copy.text, (size_t)copy.category_len + copy.message_len);
        *crumb = (rh_crumb){locator, copy.timestamp_ms, copy.level, text->bytes, copy.category_len,
                            text->bytes + copy.category_len, copy.message_len};
        return true;
    }
    ring_slot_v2 copy;
    if (!copy_slot(shared, sequence, offsetof(ring_slot_v2, text), text_len_v2, &copy)) return false;
    uint64_t expected = ring.version == 1 ? checksum_v1(sequence, &copy)
                                          : finish_v2(hash_text_v2(hash_text_v2(HASH_SEED, copy.text, copy.category_len),
                                                                       copy.text + copy.category_len, copy.message_len),
                                                      sequence, copy.timestamp_ms, copy.level, copy.category_len, copy.message_len);
    if (expected != copy.checksum) return false;
    memcpy(text->bytes, copy.text, (size_t)copy.category_len + copy.message_len);
    *crumb = (rh_crumb){locator, copy.timestamp_ms, copy.level, text->bytes, copy.category_len,
                        text->bytes + copy.category_len, copy.message_len};
    return true;
}
