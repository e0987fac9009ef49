#include "ring_layout.h"

#include <pthread.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* Slots come in powers of two, so a sequence finds its slot with a mask, not a division. */
static uint32_t slot_count(uint32_t asked) {
    uint32_t slots = 1;
    while (slots < asked && slots < (1u << 30)) slots <<= 1;
    return slots;
}

/* A ring's shape: `slots` per lane, enough for the last `asked` and the one before them (a
 * breadcrumb's id counts the breadcrumbs of every lane older than it, so each lane keeps one
 * more than a reader shows). Clock-ordered rings get as many lanes as fit 2 MB, at most 16:
 * lane 0 and 15 a thread may own; threads beyond that share lane 0. A ring of one lane is
 * ordered by its sequence. */
#define LANES_MAX 16
#define LANES_BUDGET (2u << 20)

typedef struct ring_shape {
    uint32_t slots;
    uint32_t lanes;
    rh_crumb_order order;
} ring_shape;

static ring_shape shape(uint32_t asked, rh_crumb_order order) {
    ring_shape shape = {slot_count(asked < (1u << 30) ? asked + 1 : asked), 1, RH_CRUMB_ORDER_SEQUENCE};
    if (order == RH_CRUMB_ORDER_CLOCK) {
        size_t fit = LANES_BUDGET / ((size_t)shape.slots * RH_CRUMB_SLOT_BYTES);
        shape.lanes = fit >= LANES_MAX ? LANES_MAX : fit < 1 ? 1 : (uint32_t)fit;
        if (shape.lanes > 1) shape.order = RH_CRUMB_ORDER_CLOCK;
    }
    return shape;
}

/* The processor's timestamp counter: constant-rate, and in step across cores where the
 * kernel keeps its own clock on it. */
static inline uint64_t clock_key(void) {
#if defined(__x86_64__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t ticks;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(ticks));
    return ticks;
#else
    return 0;
#endif
}

/* The same, read only once what came before it is done (a load, a failed compare-and-swap):
 * lane 0's writers read it between their claims, so its keys rise with its sequences. Twice
 * the cost, on the shared lane only. */
static inline uint64_t clock_key_after(void) {
#if defined(__x86_64__)
    _mm_lfence();
    return __rdtsc();
#elif defined(__aarch64__)
    __asm__ volatile("isb" ::: "memory");
    return clock_key();
#else
    return 0;
#endif
}

/* At least this many ticks a microsecond: a slower counter gives two threads' breadcrumbs
 * the same tick (ordered by lane, not by time), and a thread writing faster than it ticks
 * keys that run ahead of it. */
#define CLOCK_TICKS_PER_US_MIN 1000u

bool rh_crumb_clock_order_available(const char *clocksource) {
    if (clocksource == NULL) return false;
#if defined(__x86_64__)
    const char *counter = "tsc"; /* a constant-rate TSC runs at the processor's base clock: GHz */
#elif defined(__aarch64__)
    const char *counter = "arch_sys_counter";
    uint64_t frequency;
    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(frequency));
    if (frequency < (uint64_t)CLOCK_TICKS_PER_US_MIN * 1000000u) return false; /* 1 GHz from ARMv8.6 on; often 25-100 MHz before */
#else
    return false;
#endif
    size_t len = strlen(counter);
    return strncmp(clocksource, counter, len) == 0 && (clocksource[len] == '\0' || clocksource[len] == '\n');
}

size_t rh_crumb_ring_bytes(uint32_t slots, rh_crumb_order order) {
    ring_shape ring = shape(slots, order);
    return RH_CRUMB_HEADER_BYTES + (size_t)ring.lanes * (RH_CRUMB_LANE_BYTES + (size_t)ring.slots * RH_CRUMB_SLOT_BYTES);
}

void rh_crumb_ring_format(void *base, uint32_t slots, rh_crumb_order order) {
    ring_header *header = base;
    ring_shape ring = shape(slots, order);
    header->version = RING_VERSION;
    header->slot_bytes = RH_CRUMB_SLOT_BYTES;
    header->slots = ring.slots;
    header->lanes = ring.lanes;
    header->order = ring.order;
    /* The magic last: a ring read while it is made is not one yet. */
    atomic_thread_fence(memory_order_release);
    header->magic = RING_MAGIC;
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
           (header->slots & (header->slots - 1)) == 0 && header->lanes >= 1 && header->lanes <= LANES_MAX;
}

/* One breadcrumb to write (its text cut to fit, `locator` unused), the hash of its text, and
 * the counter read when the call began (a clock-ordered ring's; read first, so its latency
 * hides behind the hashing). */
typedef struct crumb_text {
    uint64_t clock;
    rh_crumb fields;
    uint64_t hash;
} crumb_text;

/* Writes a breadcrumb into slot `sequence` of `lane`, claimed by the caller. */
static inline void fill(const ring_header *header, uint32_t lane, uint64_t sequence, uint64_t key, const crumb_text *crumb) {
    ring_slot *slot = lane_slot(header, header->lanes, header->slots, lane, (sequence - 1) & (header->slots - 1));
    /* Empty first: a reader (or a kill) from here to the last store sees no breadcrumb. */
    atomic_store_explicit(&slot->sequence, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    /* A level outside a byte reads back as an unknown one, as it would have before. */
    const rh_crumb *fields = &crumb->fields;
    uint8_t level = fields->level >= 0 && fields->level < 255 ? (uint8_t)fields->level : 255;
    slot->key = key;
    slot->timestamp_ms = fields->timestamp_ms;
    slot->level = level;
    slot->category_len = (uint8_t)fields->category_len;
    slot->message_len = (uint16_t)fields->message_len;
    memcpy(slot->text, fields->category, fields->category_len);
    memcpy(slot->text + fields->category_len, fields->message, fields->message_len);
    slot->checksum = finish(crumb->hash, sequence, key, fields->timestamp_ms, level, (uint8_t)fields->category_len,
                            (uint16_t)fields->message_len);
    atomic_store_explicit(&slot->sequence, sequence, memory_order_release);
}

/* Lane 0, shared: a sequence claimed with a compare-and-swap, the counter read before each
 * try, so the lane's sequences and keys rise together. In a sequence-ordered ring the
 * sequence is the key. */
static void write_shared(ring_header *header, const crumb_text *crumb) {
    lane_header *lane = lane_at(header, 0);
    if (header->order != RH_CRUMB_ORDER_CLOCK) {
        uint64_t sequence = atomic_fetch_add_explicit(&lane->claimed, 1, memory_order_relaxed) + 1;
        fill(header, 0, sequence, sequence, crumb);
        return;
    }
    uint64_t claimed = atomic_load_explicit(&lane->claimed, memory_order_relaxed), key;
    do {
        key = clock_key_after();
    } while (!atomic_compare_exchange_weak_explicit(&lane->claimed, &claimed, claimed + 1, memory_order_relaxed, memory_order_relaxed));
    fill(header, 0, claimed + 1, key, crumb);
}

/* Which lane the calling thread writes. A lane is released when its thread ends (a
 * pthread key's destructor), or when the thread writes to another ring. glibc keeps the
 * first 32 keys' values in the thread itself: setting one there allocates nothing, so it is
 * safe in a signal handler; a later key could allocate, and then threads share lane 0. */
typedef struct lane_claim {
    ring_header *ring; /* the ring `lane` is in; NULL: none yet */
    uint64_t last_key; /* the lane's newest key (in its header when released) */
    uint32_t lane;     /* 0: the shared lane (none of its own was free) */
    uint32_t retry;    /* writes left in the shared lane before looking for a free one again */
    bool busy;         /* inside a write: a signal handler's breadcrumb goes to the shared lane */
    bool ending;       /* the thread is ending: the shared lane only */
} lane_claim;

static __thread lane_claim claim __attribute__((tls_model("initial-exec")));

#define CLAIM_RETRY 256
#define KEYS_KEPT_IN_THREAD 32

static pthread_key_t lane_key;
static bool lanes_claimable;

/* Gives the lane back, its key where its next owner goes on from it. */
static void release(ring_header *ring, uint32_t lane) {
    lane_header *header = lane_at(ring, lane);
    header->last_key = claim.last_key;
    uint64_t token = (uintptr_t)&claim;
    atomic_compare_exchange_strong_explicit(&header->owner, &token, 0, memory_order_release, memory_order_relaxed);
}

static void thread_ending(void *unused) {
    (void)unused;
    claim.ending = true;
    if (claim.ring != NULL && claim.lane != 0) release(claim.ring, claim.lane);
    claim.ring = NULL;
    claim.lane = 0;
}

__attribute__((constructor)) static void make_lane_key(void) {
#if defined(__GLIBC__)
    lanes_claimable = pthread_key_create(&lane_key, thread_ending) == 0 && lane_key < KEYS_KEPT_IN_THREAD;
#endif
}

/* Moves the calling thread to a free lane of `ring` (its lane in another ring released). */
static void claim_lane(ring_header *ring) {
    if (claim.ring != NULL && claim.lane != 0) release(claim.ring, claim.lane);
    claim.ring = ring;
    claim.lane = 0;
    claim.retry = CLAIM_RETRY;
    if (!lanes_claimable) return;
    uint64_t token = (uintptr_t)&claim;
    for (uint32_t lane = 1; lane < ring->lanes; lane++) {
        uint64_t free = 0;
        if (atomic_load_explicit(&lane_at(ring, lane)->owner, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&lane_at(ring, lane)->owner, &free, token)) {
            claim.lane = lane;
            claim.last_key = lane_at(ring, lane)->last_key;
            break;
        }
    }
    pthread_setspecific(lane_key, claim.lane != 0 ? ring : NULL);
}

/* A lane of the calling thread's own: nobody else writes it, so its sequence (which readers
 * read to know how far it was written) and key are plain stores, and the thread's
 * breadcrumbs never leave its core's cache lines. A key never falls behind the thread's
 * last one. */
static inline void write_owned(ring_header *header, const crumb_text *crumb) {
    uint64_t key = crumb->clock > claim.last_key ? crumb->clock : claim.last_key + 1;
    claim.last_key = key;
    lane_header *lane = lane_at(header, claim.lane);
    uint64_t sequence = atomic_load_explicit(&lane->claimed, memory_order_relaxed) + 1;
    atomic_store_explicit(&lane->claimed, sequence, memory_order_relaxed);
    fill(header, claim.lane, sequence, key, crumb);
}

static inline __attribute__((always_inline)) void store(ring_header *header, const crumb_text *crumb) {
    if (header->order != RH_CRUMB_ORDER_CLOCK || claim.busy || claim.ending) {
        write_shared(header, crumb);
        return;
    }
    claim.busy = true;
    atomic_signal_fence(memory_order_seq_cst);
    if (claim.ring != header || (claim.lane == 0 && --claim.retry == 0)) claim_lane(header);
    if (claim.lane != 0) write_owned(header, crumb);
    else write_shared(header, crumb);
    atomic_signal_fence(memory_order_seq_cst);
    claim.busy = false;
}

bool rh_crumb_write(void *base, int64_t timestamp_ms, int32_t level, const char *category, size_t category_len,
                    const char *message, size_t message_len) {
    ring_header *header = base;
    if (!writable(header) || message == NULL) return false;
    if (category == NULL) {
        category = "default";
        category_len = 7;
    }
    category_len = cut(category, category_len, RH_CRUMB_CATEGORY_MAX);
    message_len = cut(message, message_len, RH_CRUMB_TEXT_MAX - category_len);
    uint64_t clock = header->order == RH_CRUMB_ORDER_CLOCK ? clock_key() : 0;
    uint64_t bits = 0;
    crumb_text crumb = {clock, {0, timestamp_ms, level, category, category_len, message, message_len},
                        text_checksum(category, category_len, message, message_len, &bits)};
    store(header, &crumb);
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
     * clock alone would cost a breadcrumb a fifth of its time. Order is the key's. */
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* The time a clock-ordered breadcrumb carries: the coarse clock's, read again only when the
 * counter says a quarter of a millisecond may have passed since this thread last read it
 * (250,000 ticks: the counter runs at 1 GHz or faster where it orders breadcrumbs,
 * CLOCK_TICKS_PER_US_MIN). The coarse clock moves once a tick (4 ms here), so what is reused
 * is as fresh as what would be read, and a breadcrumb in a busy loop skips a fifth of its
 * cost. */
#define FRESH_TICKS (250u * CLOCK_TICKS_PER_US_MIN)

static __thread struct {
    uint64_t clock;
    int64_t ms;
} recent_time __attribute__((tls_model("initial-exec")));

static inline int64_t now_ms_at(uint64_t clock) {
    if (clock - recent_time.clock < FRESH_TICKS) return recent_time.ms;
    int64_t ms = rh_crumb_now_ms();
    /* The time before the counter: a signal handler between the two sees an old counter, and
     * reads the clock itself. */
    recent_time.ms = ms;
    atomic_signal_fence(memory_order_seq_cst);
    recent_time.clock = clock;
    return ms;
}

/* The embedding program's live ring. Rings are never unmapped (a writer may hold the
 * pointer it loaded a moment before a stop), so a stale pointer writes into a mapping that
 * stays valid, into a file the next launch reads or has removed. NULL: no ring (breadcrumbs
 * off). */
static _Atomic uintptr_t live_token;
static _Atomic(ring_header *) live_ring;

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void forget_in_child(void) {
    atomic_store(&live_ring, NULL);
    atomic_store(&live_token, 0);
    /* The forking thread's lane is its parent's: the child (sharing the mapping) never writes
     * or gives it back. */
    claim = (lane_claim){0};
}

static void install_fork_handler(void) { pthread_atfork(NULL, NULL, forget_in_child); }

void rh_crumb_activate(uintptr_t token, void *base) {
    pthread_once(&fork_handler_once, install_fork_handler);
    atomic_store(&live_ring, writable(base) ? (ring_header *)base : NULL);
    atomic_store(&live_token, token);
}

void rh_crumb_deactivate(uintptr_t token) {
    uintptr_t expected = token;
    if (atomic_compare_exchange_strong(&live_token, &expected, 0)) atomic_store(&live_ring, NULL);
}

bool rh_crumb_is_live(uintptr_t token) {
    return token != 0 && atomic_load_explicit(&live_token, memory_order_acquire) == token;
}

void *rh_crumb_live_ring(uintptr_t token) {
    if (token == 0 || atomic_load_explicit(&live_token, memory_order_acquire) != token) return NULL;
    return atomic_load_explicit(&live_ring, memory_order_acquire);
}

rh_crumb_outcome rh_crumb_record(uintptr_t token, int32_t level, const char *category, const char *message) {
    if (token == 0 || atomic_load_explicit(&live_token, memory_order_acquire) != token) return RH_CRUMB_NOT_LIVE;
    ring_header *ring = atomic_load_explicit(&live_ring, memory_order_acquire);
    uint64_t clock = ring != NULL && ring->order == RH_CRUMB_ORDER_CLOCK ? clock_key() : 0;
    size_t category_len = category ? strlen(category) : 0, message_len = strlen(message);
    const char *kept_category = category ? category : "default";
    size_t kept_category_len = cut(kept_category, category ? category_len : 7, RH_CRUMB_CATEGORY_MAX);
    size_t kept_message_len = cut(message, message_len, RH_CRUMB_TEXT_MAX - kept_category_len);
    /* One pass hashes the kept text and sees whether it is all ASCII; only text that is not,
     * or was cut, is validated byte by byte. */
    uint64_t bits = 0;
    uint64_t text_hash = text_checksum(kept_category, kept_category_len, message, kept_message_len, &bits);
    if ((bits & 0x8080808080808080ull) != 0 || kept_category_len < category_len || kept_message_len < message_len) {
        if ((category && !rh_crumb_valid_utf8(category, category_len)) || !rh_crumb_valid_utf8(message, message_len))
            return RH_CRUMB_INVALID_TEXT;
    }
    if (ring == NULL) return RH_CRUMB_OFF;
    int64_t now = clock != 0 ? now_ms_at(clock) : rh_crumb_now_ms();
    crumb_text crumb = {clock, {0, now, level, kept_category, kept_category_len, message, kept_message_len}, text_hash};
    store(ring, &crumb);
    return RH_CRUMB_RECORDED;
}
