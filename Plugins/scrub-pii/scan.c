/* Scanning a text (engine.c's steps before the selection): the whole rule set once, to learn
 * where each rule's matches end (a rule whose matches all have one length is done then: each
 * end gives its start), then each other rule that matched alone, for the start of each of its
 * matches, over the stretches that can hold them: up to `width` bytes (16 KB for a rule
 * without a bound) before each end, to that end, and from after the last of the rule's breaks
 * (breaks.c: the bytes none of its matches holds, a space for most tokens, a newline for a
 * rule whose matches stay in one line) at most. Stretches that touch are scanned as one, so
 * no byte is scanned twice for a rule, and a text that holds few matches is scanned about
 * once. Where a stretch starts (after a break, or a byte before the longest match could) a
 * match at its first byte counts only after a byte the pattern reads as the whole text does
 * (breaks.c's `starts`), so `^`, `\b` and "not after a letter" read as in the whole text: the
 * matches are those of each rule over the whole text (scrub_fuzz checks it). A rule whose
 * matches have a bounded length searches its stretches backwards (below) for the same
 * matches. */
#define _GNU_SOURCE
#include "engine.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

/* How far back a stretch reaches for a rule without a bound. */
#define UNBOUNDED_REACH (16 * 1024)

static size_t reach_of(const struct compiled *rule) { return rule->width > UNBOUNDED_REACH ? UNBOUNDED_REACH : rule->width; }

static bool append(struct matches *found, struct match match) {
    if (found->count == found->capacity) {
        size_t capacity = found->capacity ? found->capacity * 2 : 64;
        struct match *grown = found->borrowed ? malloc(capacity * sizeof *grown) : realloc(found->items, capacity * sizeof *grown);
        if (!grown) {
            found->failed = true;
            return false;
        }
        if (found->borrowed) memcpy(grown, found->items, found->count * sizeof *grown);
        found->borrowed = false;
        found->items = grown;
        found->capacity = capacity;
    }
    found->items[found->count++] = match;
    return true;
}

/* Whether text[from..to) holds one of the rule's breaks. */
static bool breaks_between(const struct compiled *rule, const char *text, size_t from, size_t to) {
    if (rule->has_breaks)
        for (size_t at = from; at < to; at++)
            if (rule->breaks[(unsigned char)text[at]]) return true;
    return false;
}

/* The first scan: each rule's ends, as runs `[first end, last end]` in which no two ends are
   further apart than the rule's reach (one stretch each). Ends come in order. */
struct runs {
    struct matches *found;
    struct rh_scrubber *scrubber;
    size_t *last; /* by rule: the index of its open run, or SIZE_MAX */
    const char *text;
    size_t size;
    struct matches *matches; /* a fixed-width rule's matches, known from their ends */
};

const struct compiled *scrub_measured(struct rh_scrubber *scrubber, unsigned id) {
    struct compiled *rule = &scrubber->rules[id];
    if (__atomic_load_n(&rule->measured, __ATOMIC_ACQUIRE)) return rule;
    pthread_mutex_lock(&scrubber->lock);
    if (!rule->measured) {
        /* Read by reverse.c, in a few microseconds; the engine's own reading (about 0.2 ms a
           rule) only for a pattern reverse.c does not read. */
        size_t room = 3 * strlen(rule->pattern) + 32, shortest = 0, longest = SIZE_MAX;
        char *reversed = malloc(room);
        bool caseless, known = reversed && scrub_reverse(rule->pattern, reversed, room, &caseless, &shortest, &longest);
        free(reversed);
        if (!known) {
            hs_expr_info_t *info = NULL;
            hs_compile_error_t *why = NULL;
            known = hs_expression_info(rule->pattern, HS_FLAG_SOM_LEFTMOST, &info, &why) == HS_SUCCESS && info;
            if (known) {
                shortest = info->min_width;
                longest = info->max_width == UINT_MAX ? SIZE_MAX : info->max_width;
            }
            free(info);
            hs_free_compile_error(why);
        }
        rule->width = known ? longest : SIZE_MAX;
        rule->fixed = known && longest != SIZE_MAX && shortest == longest;
        __atomic_store_n(&rule->measured, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&scrubber->lock);
    return rule;
}

/* Whether an end at `to` joins the rule's open run: within its reach, with none of the rule's
   breaks between (past one, a stretch of its own starts). */
static bool joins(const struct runs *runs, const struct compiled *rule, const struct match *open, size_t to) {
    if (!open) return false;
    return runs->scrubber->whole_text || (to <= open->to + reach_of(rule) && !breaks_between(rule, runs->text, open->to, to));
}

static int on_end(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)from;
    (void)flags;
    struct runs *runs = context;
    const struct compiled *rule = scrub_measured(runs->scrubber, id);
    if (rule->fixed) return append(runs->matches, (struct match){id, (size_t)to - rule->width, (size_t)to, false}) ? 0 : 1;
    /* A rule whose tail the rule set holds cut: each byte of its tail after this end is an end
       too, up to `tail_extra` of them. An end inside the open run's tail goes on from where that
       run's walk stopped (the bytes before are tail bytes): each byte is walked once (an end for
       every `token=` of `token=token=…` would walk the rest of the run again). */
    struct match *open = runs->last[id] == SIZE_MAX ? NULL : &runs->found->items[runs->last[id]];
    size_t last = (size_t)to;
    if (rule->has_tail) {
        size_t limit = rule->tail_extra < runs->size - last ? last + rule->tail_extra : runs->size;
        if (open && open->to > last) last = open->to;
        while (last < limit && rule->tail[(unsigned char)runs->text[last]]) last++;
    }
    if (joins(runs, rule, open, (size_t)to)) {
        if (last > open->to) open->to = last;
        return 0;
    }
    runs->last[id] = runs->found->count;
    return append(runs->found, (struct match){id, (size_t)to, last, false}) ? 0 : 1;
}

/* A rule's own scan: its matches, each start's ends as one (the longest) when the rule has no
   check that could refuse the longer one. A failure stops the scan: the text is not returned
   half scrubbed. */
static int on_match(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)id;
    (void)flags;
    struct matches *found = context;
    if (from == 0 && !found->trusted) return 0; /* read after a boundary the text may not have */
    struct match match = {found->id, found->offset + (size_t)from, found->offset + (size_t)to, false};
    struct match *last = found->count > found->first ? &found->items[found->count - 1] : NULL;
    if (found->collapse && last && last->from == match.from) {
        last->to = match.to;
        return 0;
    }
    return append(found, match) ? 0 : 1;
}

/* Where the stretch for a match ending at `end` starts: after the last of the rule's breaks
   before `end` within its reach (no match holds one, so none starts before it); without one,
   a byte before the longest match could start, so that the pattern reads the text before
   each of those starts as the whole text does (a match at the stretch's first byte, where the
   pattern reads a boundary the text may not have, counts only when the byte before it is one
   of breaks.c's `starts`: scan_stretch). */
static size_t stretch_start(const struct rh_scrubber *scrubber, const struct compiled *rule, const char *text, size_t end) {
    size_t reach = reach_of(rule), start = end > reach ? end - reach : 0;
    if (scrubber->whole_text) return 0;
    if (rule->has_breaks)
        for (size_t at = end; at > start; at--)
            if (rule->breaks[(unsigned char)text[at - 1]]) return at;
    return start > 0 ? start - 1 : 0;
}

/* One scratch per thread, grown to each database it scans. Growing it checks the whole
   database (about 100 us for the rule set): done once per thread and database, noted here. */
#define NOTED_MAX 512
static __thread hs_scratch_t *scratch;
static __thread unsigned noted_generation;
static __thread bool noted_main, noted[SCRUB_OWN_KINDS][NOTED_MAX];

/* Whether this thread's scratch fits `database`: the rule set (`id` < 0) or rule `id`'s own. */
static bool ready_for(const struct rh_scrubber *scrubber, hs_database_t *database, int id, enum scrub_own kind) {
    if (noted_generation != scrubber->generation) {
        noted_generation = scrubber->generation;
        noted_main = false;
        memset(noted, 0, sizeof noted);
    }
    bool *note = id < 0 ? &noted_main : id < NOTED_MAX ? &noted[kind][id] : NULL;
    if (note && *note) return true;
    if (hs_alloc_scratch(database, &scratch) != HS_SUCCESS) return false;
    if (note) *note = true;
    return true;
}

/* --- the backward start search ---------------------------------------------------------
   The start-of-match scan finds each match's start by running the rule backwards from each end
   it reports, over as many bytes as its longest match: a token of up to 60 characters that may
   end at 39 places costs 39 such runs (24 us for a 65-byte stretch, against 0.5 us here). When
   the rule reads backwards (reverse.c), its stretch is searched instead:
   1. once, its bytes reversed, with the pattern read backwards: each end found there is a place
      a match may start (without its assertions that pattern matches more, never less);
   2. from each such place, with the rule anchored there and the byte before it in the buffer
      (so `\b` and the like read it as the start-of-match scan does), for every end of the
      matches that start there; at the stretch's first byte as that scan reads it, the text
      before unseen;
   3. each end keeps its leftmost start: the matches the start-of-match scan reports, in its
      order, which on_match takes as they come from it.
   A stretch with more than STARTS_MAX places (a number or an address, where most bytes may
   start a match) gets the start-of-match scan, cheaper there. */
#define STARTS_MAX 8

struct places {
    size_t at[STARTS_MAX];
    size_t count;
    size_t end; /* where the stretch ends: a reversed end `to` is the place end - to */
};

static int on_reversed_end(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)id;
    (void)from;
    (void)flags;
    struct places *places = context;
    if (places->count == STARTS_MAX) return 1;
    places->at[places->count++] = places->end - (size_t)to;
    return 0;
}

struct anchored {
    struct matches *pairs; /* each end with a start, in the text */
    size_t from;           /* where the anchored scan's buffer starts */
    size_t stretch;        /* where the stretch starts */
};

static int on_anchored_end(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)from;
    (void)flags;
    struct anchored *anchored = context;
    /* id 1 reads its first byte with nothing before it: only the stretch's first byte is read so. */
    if (id == 1 && anchored->from != anchored->stretch) return 0;
    size_t start = anchored->from + (id == 0 ? 1 : 0);
    return append(anchored->pairs, (struct match){0, start, anchored->from + (size_t)to, false}) ? 0 : 1;
}

static int by_end(const void *a, const void *b) {
    const struct match *x = a, *y = b;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return (x->from > y->from) - (x->from < y->from);
}

/* text[from..to) reversed into `local` (of `room` bytes) or, when longer, into memory the
   caller frees; NULL without memory. */
static char *reversed_copy(const char *text, size_t from, size_t to, char *local, size_t room) {
    char *copy = to - from <= room ? local : malloc(to - from);
    for (size_t k = 0; copy && k < to - from; k++) copy[k] = text[to - 1 - k];
    return copy;
}

enum backward { BACKWARD_DONE, BACKWARD_FAILED, BACKWARD_NOT_HERE };

/* The stretch text[from..to) of rule `id`, searched backwards into `found` (whose stretch
   fields scan_stretch set); BACKWARD_NOT_HERE when the rule does not read backwards or the
   stretch has too many places. */
static enum backward backward(struct rh_scrubber *scrubber, unsigned id, const char *text, size_t from, size_t to, struct matches *found) {
    hs_database_t *reversed = scrub_own(scrubber, id, SCRUB_REVERSED);
    hs_database_t *anchored = reversed ? scrub_own(scrubber, id, SCRUB_ANCHORED) : NULL;
    if (!anchored) return BACKWARD_NOT_HERE;
    char local[1024];
    char *copy = reversed_copy(text, from, to, local, sizeof local);
    struct places places = {.count = 0, .end = to};
    bool ready = copy && ready_for(scrubber, reversed, (int)id, SCRUB_REVERSED) && ready_for(scrubber, anchored, (int)id, SCRUB_ANCHORED);
    hs_error_t scanned = ready ? hs_scan(reversed, copy, (unsigned)(to - from), 0, scratch, on_reversed_end, &places) : HS_NOMEM;
    if (copy != local) free(copy);
    if (scanned == HS_SCAN_TERMINATED) return BACKWARD_NOT_HERE;
    if (scanned != HS_SUCCESS) return BACKWARD_FAILED;
    struct match room[STARTS_MAX * 2];
    struct matches pairs = scrub_matches_in(room, sizeof room / sizeof *room);
    size_t scanned_from = SIZE_MAX;
    /* Places come latest first; each anchored scan starts a byte before its place (its context),
       except at the stretch's first byte, and covers the place after its own start too. */
    for (size_t k = places.count; k-- > 0 && !pairs.failed;) {
        size_t place = places.at[k], start = place > from ? place - 1 : from;
        if (start == scanned_from) continue;
        scanned_from = start;
        struct anchored context = {&pairs, start, from};
        if (hs_scan(anchored, text + start, (unsigned)(to - start), 0, scratch, on_anchored_end, &context) != HS_SUCCESS) pairs.failed = true;
    }
    if (!pairs.failed) scrub_sort(pairs.items, pairs.count, by_end);
    for (size_t k = 0; k < pairs.count && !pairs.failed && !found->failed; k++)
        if (k == 0 || pairs.items[k].to != pairs.items[k - 1].to)
            on_match(id, pairs.items[k].from - from, pairs.items[k].to - from, 0, found);
    bool failed = pairs.failed || found->failed;
    scrub_matches_free(&pairs);
    return failed ? BACKWARD_FAILED : BACKWARD_DONE;
}

/* Scans text[from..to) for rule `id` alone; false when the engine or memory fails. */
static bool scan_stretch(struct rh_scrubber *scrubber, unsigned id, const char *text, size_t from, size_t to, struct matches *found) {
    const struct compiled *rule = &scrubber->rules[id];
    found->id = id;
    found->offset = from;
    found->trusted = from == 0 || rule->starts[(unsigned char)text[from - 1]];
    found->first = found->count;
    found->collapse = rule->unchecked && !rule->first_end;
    if (!scrubber->whole_text && !scrubber->starts_only && scrub_measured(scrubber, id)->width != SIZE_MAX) {
        enum backward searched = backward(scrubber, id, text, from, to, found);
        if (searched != BACKWARD_NOT_HERE) return searched == BACKWARD_DONE;
    }
    hs_database_t *database = scrub_own(scrubber, id, SCRUB_STARTS);
    return database && ready_for(scrubber, database, (int)id, SCRUB_STARTS) &&
           hs_scan(database, text + from, (unsigned)(to - from), 0, scratch, on_match, found) == HS_SUCCESS && !found->failed;
}

/* A `first_end` rule (a PEM block) reports each end with its leftmost start only, so the end
   of a later block comes with the first block's start. From the first end of the matches
   found since `first`, the rule scans again to their last end, for the next block's start. */
static bool later_blocks(struct rh_scrubber *scrubber, unsigned id, const char *text, struct matches *found, size_t first) {
    while (found->count > first) {
        size_t shortest = SIZE_MAX, longest = 0;
        for (size_t k = first; k < found->count; k++) {
            if (found->items[k].to < shortest) shortest = found->items[k].to;
            if (found->items[k].to > longest) longest = found->items[k].to;
        }
        if (longest <= shortest) return true;
        first = found->count;
        if (!scan_stretch(scrubber, id, text, shortest, longest, found)) return false;
    }
    return true;
}

bool scrub_scan(struct rh_scrubber *scrubber, const char *text, size_t size, struct matches *found) {
    struct match room[64];
    struct matches ends = scrub_matches_in(room, sizeof room / sizeof *room);
    size_t last[scrubber->count];
    for (size_t k = 0; k < scrubber->count; k++) last[k] = SIZE_MAX;
    struct runs runs = {&ends, scrubber, last, text, size, found};
    bool ok = ready_for(scrubber, scrubber->database, -1, SCRUB_STARTS) &&
              hs_scan(scrubber->database, text, (unsigned)size, 0, scratch, on_end, &runs) == HS_SUCCESS && !ends.failed &&
              !found->failed;
    for (size_t i = 0; ok && i < ends.count; i++) {
        const struct match *run = &ends.items[i];
        const struct compiled *rule = &scrubber->rules[run->id];
        size_t first = found->count;
        ok = scan_stretch(scrubber, run->id, text, stretch_start(scrubber, rule, text, run->from), run->to, found);
        if (ok && rule->first_end) ok = later_blocks(scrubber, run->id, text, found, first);
    }
    scrub_matches_free(&ends);
    return ok;
}
