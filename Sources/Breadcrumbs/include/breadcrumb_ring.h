/* The breadcrumb ring (SPEC B-1): fixed-size slots in a file the host maps MAP_SHARED, so
 * what is written is in the page cache at once and survives SIGKILL (the kernel writes the
 * pages back whenever it likes: no flush is ever asked for).
 *
 * Writing takes no lock and makes no system call. The slots come in lanes: a thread writes
 * into a lane of its own when one is free, so threads writing at once never share a cache
 * line, and into the shared lane 0 otherwise. Every breadcrumb carries an order key:
 *   - RH_CRUMB_ORDER_CLOCK: the processor's timestamp counter, read at the call (the kernel's
 *     own clock when its clocksource is that counter, so it runs in step on every core).
 *     Breadcrumbs read back oldest first by it: one thread's in the order it wrote them,
 *     several threads' as the counter saw them.
 *   - RH_CRUMB_ORDER_SEQUENCE: one lane, and a sequence every writer claims with one atomic
 *     add (where the counter is not to be trusted, or a ring of one lane).
 * A slot's sequence is zeroed (the slot reads as empty), its fields are written, and its
 * sequence is stored last (release). A checksum over the fields and the text is written
 * with them, so a slot a kill, a power loss or a racing writer left half written is detected
 * and skipped by the reader, never shown torn. Safe from any thread and from a signal
 * handler (whose breadcrumb goes to the shared lane).
 *
 * Layout (little-endian, as the host writes it), version 3:
 *   header (64 bytes): magic "RHBC", version 3, slot bytes, slots per lane (a power of two),
 *   8 unused bytes, lane count, order (an rh_crumb_order)
 *   lane headers (lane count x 64 bytes): owner (u64), newest sequence (u64), owner's newest
 *   key (u64)
 *   slots (lane count x slots x RH_CRUMB_SLOT_BYTES, lane by lane): sequence in its lane
 *   (u64, 0 = empty), order key (u64), timestamp in Unix milliseconds (i64), checksum (u64),
 *   level (u8), category bytes (u8), message bytes (u16), then the category and the message,
 *   neither NUL-terminated.
 * Versions 1 and 2 (read, never written): the header's next sequence at byte 16, one lane of
 * slots right after the header: sequence (u64, the order), timestamp (i64), level (i32),
 * category bytes (u16), message bytes (u16), checksum (u64; version 1 took the sequence
 * first), 4 unused bytes, the text. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RH_CRUMB_HEADER_BYTES 64
#define RH_CRUMB_LANE_BYTES 64
#define RH_CRUMB_SLOT_BYTES 1024
#define RH_CRUMB_SLOT_FIELDS 36
/* The longest category kept; longer ones are cut at a UTF-8 character boundary. */
#define RH_CRUMB_CATEGORY_MAX 64
/* Category and message share the rest of a slot; a longer message is cut likewise. */
#define RH_CRUMB_TEXT_MAX (RH_CRUMB_SLOT_BYTES - RH_CRUMB_SLOT_FIELDS)

/* How breadcrumbs of several threads are ordered (see above). */
typedef enum rh_crumb_order {
    RH_CRUMB_ORDER_SEQUENCE = 0,
    RH_CRUMB_ORDER_CLOCK = 1,
} rh_crumb_order;

/* Whether RH_CRUMB_ORDER_CLOCK may be used: this processor's counter is one this code reads,
 * and `clocksource` (the kernel's current one, as
 * /sys/devices/system/clocksource/clocksource0/current_clocksource names it) is that counter. */
bool rh_crumb_clock_order_available(const char *clocksource);

/* The bytes of a ring that keeps at least the last `slots` breadcrumbs in `order`. */
size_t rh_crumb_ring_bytes(uint32_t slots, rh_crumb_order order);

/* Writes an empty ring's header into `base` (rh_crumb_ring_bytes(slots, order) zeroed bytes). */
void rh_crumb_ring_format(void *base, uint32_t slots, rh_crumb_order order);

/* Whether `base` (of `bytes` bytes) holds a ring this code reads. */
bool rh_crumb_ring_valid(const void *base, size_t bytes);

/* Records one breadcrumb. category may be NULL ("default"); message must not be. Both are
 * UTF-8 (not checked here) of the given lengths, cut to fit at a character boundary.
 * Returns false when `base` is not a ring this code writes. Lock-free, no system call;
 * async-signal-safe. */
bool rh_crumb_write(void *base, int64_t timestamp_ms, int32_t level, const char *category, size_t category_len,
                    const char *message, size_t message_len);

/* Where a breadcrumb is: its lane in the top 8 bits, its sequence in that lane below. */
#define RH_CRUMB_LANE_SHIFT 56

/* One breadcrumb found by rh_crumb_ring_list: where it is, its order key, and its id (its
 * place among all the ring's breadcrumbs, 1 for the first). */
typedef struct rh_crumb_ref {
    uint64_t locator;
    uint64_t key;
    uint64_t id;
} rh_crumb_ref;

/* Room enough for rh_crumb_ring_list (twice what the ring can hold at once: it merges the
 * lanes in the second half). */
size_t rh_crumb_ring_capacity(const void *base, size_t bytes);

/* How many of the newest breadcrumbs the ring answers for: a ring of lanes holds one more in
 * each lane than that, which the ids of the others count (a reader asking for more, after
 * `breadcrumbs.max` was raised, gets this many). */
size_t rh_crumb_ring_window(const void *base, size_t bytes);

/* The breadcrumbs the ring holds now (or held a moment ago: one being written over may be
 * among them), oldest first, at most `capacity` / 2 (the newest of each lane when it holds
 * more); returns how many. Ids are counted from the lanes' sequences: for the newest
 * rh_crumb_ring_window they are the same from one listing to the next, but for breadcrumbs
 * still being written meanwhile (not listed yet), each of which lowers by one the ids of
 * those after it in order. */
size_t rh_crumb_ring_list(const void *base, size_t bytes, rh_crumb_ref *refs, size_t capacity);

/* One breadcrumb read back. The text points into the caller's copy, valid during the visit. */
typedef struct rh_crumb {
    uint64_t locator;
    int64_t timestamp_ms;
    int32_t level;
    const char *category;
    size_t category_len;
    const char *message;
    size_t message_len;
} rh_crumb;

/* Room for one breadcrumb's text (rh_crumb_ring_read_one's crumb points into it). */
typedef struct rh_crumb_text {
    char bytes[RH_CRUMB_TEXT_MAX];
} rh_crumb_text;

/* The breadcrumb at `locator` into *crumb, its text copied into *text, when its slot holds it
 * whole; false when the slot holds another one by now, or a torn one. Reads only that slot:
 * a reader that keeps the breadcrumbs it read before (a slot holds one unchanged until its
 * lane laps it) copies only the new ones. */
bool rh_crumb_ring_read_one(const void *base, size_t bytes, uint64_t locator, rh_crumb_text *text, rh_crumb *crumb);

/* Whether text of `len` bytes is valid UTF-8 (the embedding API refuses text that is not). */
bool rh_crumb_valid_utf8(const char *text, size_t len);

/* The current time in Unix milliseconds, to the kernel's tick (CLOCK_REALTIME_COARSE,
 * through the vDSO). */
int64_t rh_crumb_now_ms(void);

/* The embedding program's ring (embed.h: rh_embed_breadcrumb): the live handle's token and
 * its ring, or 0 and NULL. A forked child sees none (cleared by a pthread_atfork handler). */
void rh_crumb_activate(uintptr_t token, void *base);
void rh_crumb_deactivate(uintptr_t token);
/* The live ring of `token`, or NULL when `token` is not the live handle or it has no ring
 * (breadcrumbs off: `rh_crumb_activate` with a NULL base, or one that is not a ring it writes). */
void *rh_crumb_live_ring(uintptr_t token);
/* Whether `token` is the live handle (with a ring or without). */
bool rh_crumb_is_live(uintptr_t token);

/* What rh_crumb_record did. */
typedef enum rh_crumb_outcome {
    RH_CRUMB_RECORDED,
    RH_CRUMB_OFF,          /* the live handle has no ring (breadcrumbs off): nothing recorded */
    RH_CRUMB_NOT_LIVE,     /* `token` is not the live handle */
    RH_CRUMB_INVALID_TEXT, /* category or message is not UTF-8 */
} rh_crumb_outcome;

/* rh_embed_breadcrumb's whole path, in one call so the compiler sees it whole: the live
 * check, the lengths, the UTF-8 check fused with the checksum's pass, the claim and the
 * copy. category may be NULL ("default"); message must not be. */
rh_crumb_outcome rh_crumb_record(uintptr_t token, int32_t level, const char *category, const char *message);

#ifdef __cplusplus
}
#endif
