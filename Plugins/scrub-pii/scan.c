/* Scanning a text (engine.c's steps before the selection): the whole rule set once, to learn
 * which rules match, then each rule that matched alone, for the start of each of its matches. */
#include "engine.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

/* The first scan: notes the rule. */
static int on_rule(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)from;
    (void)to;
    (void)flags;
    ((struct matches *)context)->matched[id] = true;
    return 0;
}

static int on_match(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)flags;
    struct matches *found = context;
    if (found->count == found->capacity) {
        size_t capacity = found->capacity ? found->capacity * 2 : 64;
        struct match *grown = realloc(found->items, capacity * sizeof *grown);
        if (!grown) {
            found->failed = true;
            return 1; /* stops the scan: the text is not returned half scrubbed */
        }
        found->items = grown;
        found->capacity = capacity;
    }
    (void)id;
    found->items[found->count++] = (struct match){found->id, (size_t)from, (size_t)to};
    return 0;
}

/* The rule alone, with the start of each match: loaded from the cache folder, or compiled (and
   saved there) on first use; NULL without memory. */
hs_database_t *scrub_alone(struct rh_scrubber *scrubber, unsigned id) {
    pthread_mutex_lock(&scrubber->lock);
    struct compiled *rule = &scrubber->rules[id];
    if (!rule->alone) {
        unsigned flags = HS_FLAG_SOM_LEFTMOST;
        uint8_t digest[32];
        scrub_cache_digest(&rule->pattern, &flags, 1, digest);
        if (scrubber->cache_folder) rule->alone = scrub_cache_load(scrubber->cache_folder, digest);
        hs_compile_error_t *why = NULL;
        if (!rule->alone && hs_compile(rule->pattern, flags, HS_MODE_BLOCK, NULL, &rule->alone, &why) == HS_SUCCESS && scrubber->cache_folder)
            scrub_cache_store(scrubber->cache_folder, digest, rule->alone);
        hs_free_compile_error(why);
    }
    hs_database_t *database = rule->alone;
    pthread_mutex_unlock(&scrubber->lock);
    return database;
}

/* One scratch per thread, grown to each database it scans. Growing it checks the whole
   database (about 100 us for the rule set): done once per thread and database, noted here. */
#define NOTED_MAX 512
static __thread hs_scratch_t *scratch;
static __thread unsigned noted_generation;
static __thread bool noted_main, noted[NOTED_MAX];

static bool ready_for(const struct rh_scrubber *scrubber, hs_database_t *database, int id) {
    if (noted_generation != scrubber->generation) {
        noted_generation = scrubber->generation;
        noted_main = false;
        memset(noted, 0, sizeof noted);
    }
    bool *note = id < 0 ? &noted_main : id < NOTED_MAX ? &noted[id] : NULL;
    if (note && *note) return true;
    if (hs_alloc_scratch(database, &scratch) != HS_SUCCESS) return false;
    if (note) *note = true;
    return true;
}

bool scrub_scan(struct rh_scrubber *scrubber, const char *text, size_t size, struct matches *found) {
    bool matched[scrubber->count];
    memset(matched, 0, sizeof matched);
    found->matched = matched;
    if (!ready_for(scrubber, scrubber->database, -1) ||
        hs_scan(scrubber->database, text, (unsigned)size, 0, scratch, on_rule, found) != HS_SUCCESS)
        return false;
    for (unsigned id = 0; id < scrubber->count; id++) {
        if (!matched[id]) continue;
        hs_database_t *database = scrub_alone(scrubber, id);
        found->id = id;
        if (!database || !ready_for(scrubber, database, (int)id) ||
            hs_scan(database, text, (unsigned)size, 0, scratch, on_match, found) != HS_SUCCESS || found->failed)
            return false;
    }
    found->matched = NULL;
    return true;
}

