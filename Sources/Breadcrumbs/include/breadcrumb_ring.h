/* The breadcrumb ring (SPEC B-1): a fixed number of fixed-size slots in a file the host maps
 * MAP_SHARED, so what is written is in the page cache at once and survives SIGKILL (the
 * kernel writes the pages back whenever it likes: no flush is ever asked for).
 *
 * Writing takes no lock and makes no system call: a slot is claimed with one atomic add on
 * the ring's counter, its sequence is zeroed (the slot reads as empty), its fields are
 * written, and its sequence is stored last (release). A checksum over the sequence and the
 * fields is written with them, so a slot a kill, a power loss or a racing writer left half
 * written is detected and skipped by the reader, never shown torn. Safe from any thread and
 * from a signal handler.
 *
 * Layout (little-endian, as the host writes it):
 *   header (64 bytes): magic "RHBC", version 2, slot bytes, slot count (a power of two),
 *   next sequence (u64)
 *   slots (slot count x RH_CRUMB_SLOT_BYTES): sequence (u64, 0 = empty), timestamp in Unix
 *   milliseconds (i64), level (i32), category bytes (u16), message bytes (u16), checksum
 *   (u64; version 1 took the sequence first), then the category and the message, neither
 *   NUL-terminated. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RH_CRUMB_HEADER_BYTES 64
#define RH_CRUMB_SLOT_BYTES 1024
#define RH_CRUMB_SLOT_FIELDS 36
/* The longest category kept; longer ones are cut at a UTF-8 character boundary. */
#define RH_CRUMB_CATEGORY_MAX 64
/* Category and message share the rest of a slot; a longer message is cut likewise. */
#define RH_CRUMB_TEXT_MAX (RH_CRUMB_SLOT_BYTES - RH_CRUMB_SLOT_FIELDS)

/* The bytes of a ring of at least `slots` slots (rounded up to a power of two). */
size_t rh_crumb_ring_bytes(uint32_t slots);

/* Writes an empty ring's header into `base` (rh_crumb_ring_bytes(slots) zeroed bytes). */
void rh_crumb_ring_format(void *base, uint32_t slots);

/* Whether `base` (of `bytes` bytes) holds a ring this code reads, and its slot count. */
bool rh_crumb_ring_valid(const void *base, size_t bytes, uint32_t *slots_out);

/* Records one breadcrumb. category may be NULL ("default"); message must not be. Both are
 * UTF-8 (not checked here) of the given lengths, cut to fit at a character boundary.
 * Returns the breadcrumb's sequence number (1 for the ring's first), 0 when `base` is not
 * a ring. Lock-free, no system call except the vDSO clock; async-signal-safe. */
uint64_t rh_crumb_write(void *base, int64_t timestamp_ms, int32_t level, const char *category, size_t category_len,
                        const char *message, size_t message_len);

/* One breadcrumb read back. The text points into the caller's copy, valid during the visit. */
typedef struct rh_crumb {
    uint64_t sequence;
    int64_t timestamp_ms;
    int32_t level;
    const char *category;
    size_t category_len;
    const char *message;
    size_t message_len;
} rh_crumb;

/* Calls visit for every slot that holds a whole breadcrumb (any order; the caller sorts by
 * sequence). A slot being written or left torn is skipped and counted in *torn_out (may be
 * NULL). Reads a copy of each slot, so a writer running meanwhile never shows half. */
void rh_crumb_ring_read(const void *base, size_t bytes, void (*visit)(void *ctx, const rh_crumb *crumb), void *ctx,
                        uint64_t *torn_out);

/* The sequences of the slots that hold a breadcrumb now (or held one a moment ago: one being
 * written over may be among them), in slot order, at most `capacity` (the ring's slot count
 * is enough); returns how many. */
size_t rh_crumb_ring_sequences(const void *base, size_t bytes, uint64_t *out, size_t capacity);

/* Room for one breadcrumb's text (rh_crumb_ring_read_one's crumb points into it). */
typedef struct rh_crumb_text {
    char bytes[RH_CRUMB_TEXT_MAX];
} rh_crumb_text;

/* Breadcrumb `sequence` into *crumb, its text copied into *text, when its slot holds it whole;
 * false when the slot holds another one by now, or a torn one. Reads only that slot: a
 * reader that keeps the breadcrumbs it read before (a slot holds one unchanged until the
 * ring laps it) copies only the new ones. */
bool rh_crumb_ring_read_one(const void *base, size_t bytes, uint64_t sequence, rh_crumb_text *text, rh_crumb *crumb);

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
