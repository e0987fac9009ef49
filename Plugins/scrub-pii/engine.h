/* The scrubber's parts shared by engine.c (compiling, selecting, writing) and scan.c
 * (scanning). Not part of scrub.h: the plugin sees only the scrubber. */
#pragma once

#include <hs/hs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "cache.h"
#include "scrub.h"

struct compiled {
    const char *kind;
    const char *pattern;
    const char *group;
    const char *check;
    bool first_end;       /* the group says `first_end` (a PEM block: engine.c's step 1) */
    bool unchecked;       /* the check is `none` */
    hs_database_t *alone; /* the rule alone, with the start of each match: made on first use */
    bool breaks[256];     /* the bytes no match holds (scrub_breaks): a stretch starts after one */
    bool starts[256];     /* the bytes after which the pattern reads the text as the whole text does */
    bool has_breaks;      /* some byte is a break (one a rule whose matches stay in one line has: '\n') */
    /* Known once the rule first matched (scan.c's `measured`: reading them from the pattern
       costs ~0.2 ms a rule, 17 ms for the table, which a one-shot process would pay whole). */
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
    pthread_mutex_t lock;    /* over each rule's `alone` and its measures */
    unsigned generation;     /* tells scrubbers apart for each thread's scratch */
    char *cache_folder;      /* where compiled databases are kept; NULL: none */
    struct scrub_memo memo;  /* texts it found nothing in */
    bool whole_text;         /* each rule that matched scans the whole text: scrub_fuzz's reference */
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
    unsigned id;   /* the rule scanned alone */
    size_t offset; /* where the stretch it scans starts in the text */
    bool trusted;  /* a match at its start counts: the text's start, or after one of the rule's `starts` */
    size_t first;  /* the first item of this stretch's scan */
    bool collapse; /* keep one item per start: its longest end */
};

/* The rule `id` alone, with the start of each match (scan.c): made once, from the cache folder
   or compiled; NULL without memory. */
hs_database_t *scrub_alone(struct rh_scrubber *scrubber, unsigned id);

/* Whether the cache folder holds the rule `id`'s own database (not read until first use). */
bool scrub_alone_saved(const struct rh_scrubber *scrubber, unsigned id);

/* Every match of every rule in text[0..size), with its start, appended to `found`; false when
   the engine or memory fails. */
bool scrub_scan(struct rh_scrubber *scrubber, const char *text, size_t size, struct matches *found);
