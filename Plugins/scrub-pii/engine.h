/* The scrubber's parts shared by engine.c (compiling, selecting, writing) and scan.c
 * (scanning). Not part of scrub.h: the plugin sees only the scrubber. */
#pragma once

#include <hs/hs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "cache.h"
#include "scrub.h"

/* A rule's own databases, each made the first time a scan needs it (rule_databases.c):
   - SCRUB_STARTS: the rule alone with the start of each match (HS_FLAG_SOM_LEFTMOST);
   - SCRUB_REVERSED: its pattern read backwards (reverse.c), none when it does not read so;
   - SCRUB_ANCHORED: `^[\s\S](?:P)` (id 0: the matches that start at the second byte, the
     first read as their context) and `^(?:P)` (id 1: those at the first byte). */
enum scrub_own { SCRUB_STARTS, SCRUB_REVERSED, SCRUB_ANCHORED, SCRUB_OWN_KINDS };

struct compiled {
    const char *kind;
    const char *pattern;
    const char *group;
    const char *check;
    bool first_end;       /* the group says `first_end` (a PEM block: engine.c's step 1) */
    bool unchecked;       /* the check is `none` */
    hs_database_t *own[SCRUB_OWN_KINDS]; /* the rule's own databases (rule_databases.c), made on first use */
    int own_tried[SCRUB_OWN_KINDS];      /* set (atomically, release) once own[kind] is made or cannot be */
    bool breaks[256];     /* the bytes no match holds (scrub_breaks): a stretch starts after one */
    bool starts[256];     /* the bytes after which the pattern reads the text as the whole text does */
    bool has_breaks;      /* some byte is a break (one a rule whose matches stay in one line has: '\n') */
    bool has_tail;        /* the rule set has it with its tail cut (tail.c) */
    bool tail[256];       /* the bytes of that tail: after an end the rule set reports, ends too, */
    size_t tail_extra;    /* at most this many of them (SIZE_MAX: no bound) */
    /* Known once asked for (scrub_measured, the first time the rule matches): read from the
       pattern by reverse.c, or by the engine (about 0.2 ms a rule) when reverse.c cannot. */
    int measured;         /* set (atomically, release) once width and fixed are */
    size_t width;         /* the longest match it can make, in bytes; SIZE_MAX: no bound */
    bool fixed;           /* every match is `width` bytes long: its end gives its start */
};

struct rh_scrubber {
    hs_database_t *database; /* every rule, without the starts: which rules match */
    struct compiled *rules;  /* by pattern id */
    size_t count;
    char **owned;            /* extra patterns' names */
    size_t owned_count;
    pthread_mutex_t lock;    /* over each rule's own databases and its measures */
    unsigned generation;     /* tells scrubbers apart for each thread's scratch */
    char *cache_folder;      /* where compiled databases are kept; NULL: none */
    struct scrub_memo memo;  /* texts it found nothing in */
    bool whole_text;         /* each rule that matched scans the whole text: scrub_fuzz's reference */
    bool starts_only;        /* starts found only by the start-of-match scan: scrub_fuzz's reference */
};

/* Read from `pattern`, conservatively (breaks.c): the bytes after which it reads the text as
   the whole text does (`starts`), and those of them no match holds (`breaks`); false when
   there is no break. */
bool scrub_breaks(const char *pattern, bool breaks[256], bool starts[256]);

struct match {
    unsigned id;
    size_t from, to;
    bool hides; /* kept over a one-line part that ran past it (engine.c's step 5) */
};

struct matches {
    struct match *items;
    size_t count, capacity;
    bool failed;
    bool borrowed; /* items is the caller's room (scrub_matches_in), never freed or grown in place */
    unsigned id;   /* the rule scanned alone */
    size_t offset; /* where the stretch it scans starts in the text */
    bool trusted;  /* a match at its start counts: the text's start, or after one of the rule's `starts` */
    size_t first;  /* the first item of this stretch's scan */
    bool collapse; /* keep one item per start: its longest end */
};

/* Matches kept in `room` (the caller's, on its stack: a scan finds few) until more come than it
   holds, then in memory of their own. Most scans then allocate nothing: a pass over the bench's
   100 documents asked glibc for 3,600 blocks of 2 KB or more, about 5% of its time. */
static inline struct matches scrub_matches_in(struct match *room, size_t capacity) {
    return (struct matches){.items = room, .capacity = capacity, .borrowed = true};
}

/* Sorts items[0..count) by `compare` (sort.c), stably. */
void scrub_sort(struct match *items, size_t count, int (*compare)(const void *, const void *));

/* Frees what `found` holds in memory of its own. */
static inline void scrub_matches_free(struct matches *found) {
    if (!found->borrowed) free(found->items);
}

/* Whether `pattern` ends, in each top-level branch, with the same atom repeated more times than
   its least, as many more in each (tail.c): then `cut` holds the pattern with each such tail cut
   to its least, `member` the bytes that atom matches, *extra how many more times it may repeat
   (SIZE_MAX: without bound), and *atom (when not NULL) where the atom is in `pattern`, of
   *atom_length bytes. */
bool scrub_tail(const char *pattern, char *cut, size_t cut_size, bool member[256], size_t *extra, const char **atom, size_t *atom_length);

/* Whether `pattern` (with no `|` outside its groups) starts, after `(?i)` and any assertions,
   with a piece repeated n to more times (n at least 1): then `relaxed` holds it with the
   assertions left out and that piece repeated n times (tail.c). Every match of `pattern` ends
   where one of `relaxed` does (its part after the first extra repeats), so the rule set can hold
   `relaxed` instead: it needs only where matches end, and a place where only `relaxed` ends is
   one where the rule's own scan finds nothing. */
bool scrub_head(const char *pattern, char *relaxed, size_t relaxed_size);

/* Rule `id` with its width known (scan.c): read from its pattern the first time it is asked for. */
const struct compiled *scrub_measured(struct rh_scrubber *scrubber, unsigned id);

/* The rule `id`'s own database of `kind` (rule_databases.c): made once, from the cache folder or
   compiled; NULL without memory, or when the rule has none of that kind. */
hs_database_t *scrub_own(struct rh_scrubber *scrubber, unsigned id, enum scrub_own kind);

/* Whether the cache folder holds that database (not read until first use). */
bool scrub_own_saved(const struct rh_scrubber *scrubber, unsigned id, enum scrub_own kind);

/* `pattern` read backwards into out (reverse.c): a pattern that matches the reversed bytes of
   every text `pattern` matches, without its assertions; *caseless when it is caseless whole;
   the shortest and longest match of `pattern` in *min_width and *max_width (SIZE_MAX: no
   bound). False when it uses what reverse.c does not read, or out is too small (3 times the
   pattern's length and 32 bytes is enough). */
bool scrub_reverse(const char *pattern, char *out, size_t out_size, bool *caseless, size_t *min_width, size_t *max_width);

/* Every match of every rule in text[0..size), with its start, appended to `found`; false when
   the engine or memory fails. */
bool scrub_scan(struct rh_scrubber *scrubber, const char *text, size_t size, struct matches *found);
