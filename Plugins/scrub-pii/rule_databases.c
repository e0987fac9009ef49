/* Each rule's own databases (engine.h's `enum scrub_own`), made the first time a scan needs
 * one: loaded from the cache folder, or compiled and saved there. Once made, a database stays
 * until the scrubber goes, so it is read without the lock. */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The patterns and flags of one of a rule's own databases; `texts` holds the patterns written
   for it (freed by own_free). */
struct own_set {
    const char *patterns[2];
    unsigned flags[2];
    unsigned count;
    char *texts;
};

/* The set of the rule's database of `kind`; false when the rule has none (its pattern does not
   read backwards) or without memory. */
static bool own_set(const struct compiled *rule, enum scrub_own kind, struct own_set *set) {
    if (kind == SCRUB_STARTS) {
        *set = (struct own_set){{rule->pattern}, {HS_FLAG_SOM_LEFTMOST}, 1, NULL};
        return true;
    }
    /* Read backwards, a pattern is at most three times as long (each `(` becomes `(?:`). */
    size_t room = 3 * strlen(rule->pattern) + 32;
    *set = (struct own_set){.texts = malloc(2 * room)};
    if (!set->texts) return false;
    bool caseless = false;
    size_t shortest, longest;
    switch (kind) {
    case SCRUB_REVERSED:
        if (!scrub_reverse(rule->pattern, set->texts, room, &caseless, &shortest, &longest)) return false;
        *set = (struct own_set){{set->texts}, {caseless ? HS_FLAG_CASELESS : 0}, 1, set->texts};
        return true;
    case SCRUB_ANCHORED:
        snprintf(set->texts, room, "^[\\s\\S](?:%s)", rule->pattern);
        snprintf(set->texts + room, room, "^(?:%s)", rule->pattern);
        *set = (struct own_set){{set->texts, set->texts + room}, {0, 0}, 2, set->texts};
        return true;
    case SCRUB_STARTS:
    case SCRUB_OWN_KINDS:
        break;
    }
    return false;
}

static void own_free(struct own_set *set) { free(set->texts); }

bool scrub_own_saved(const struct rh_scrubber *scrubber, unsigned id, enum scrub_own kind) {
    struct own_set set = {0};
    bool saved = false;
    if (scrubber->cache_folder && own_set(&scrubber->rules[id], kind, &set)) {
        uint8_t digest[32];
        scrub_cache_digest(set.patterns, set.flags, set.count, digest);
        saved = scrub_cache_has(scrubber->cache_folder, digest);
    }
    own_free(&set);
    return saved;
}

/* The database of `set`, from the cache folder or compiled (and saved there); NULL when the
   engine refuses it or without memory. */
static hs_database_t *made(const struct rh_scrubber *scrubber, const struct own_set *set) {
    uint8_t digest[32];
    scrub_cache_digest(set->patterns, set->flags, set->count, digest);
    hs_database_t *database = scrubber->cache_folder ? scrub_cache_load(scrubber->cache_folder, digest) : NULL;
    if (database) return database;
    static const unsigned ids[2] = {0, 1};
    hs_compile_error_t *why = NULL;
    if (hs_compile_multi(set->patterns, set->flags, ids, set->count, HS_MODE_BLOCK, NULL, &database, &why) != HS_SUCCESS) database = NULL;
    else if (scrubber->cache_folder) scrub_cache_store(scrubber->cache_folder, digest, database);
    hs_free_compile_error(why);
    return database;
}

hs_database_t *scrub_own(struct rh_scrubber *scrubber, unsigned id, enum scrub_own kind) {
    struct compiled *rule = &scrubber->rules[id];
    if (__atomic_load_n(&rule->own_tried[kind], __ATOMIC_ACQUIRE)) return rule->own[kind];
    pthread_mutex_lock(&scrubber->lock);
    if (!rule->own_tried[kind]) {
        struct own_set set;
        bool known = own_set(rule, kind, &set);
        rule->own[kind] = known ? made(scrubber, &set) : NULL;
        own_free(&set);
        /* The start-of-match scan is what every rule needs: without memory now, it is tried
           again next time (the scan fails meanwhile). The backward search is only faster: a
           rule that cannot have it keeps the start-of-match scan. */
        if (rule->own[kind] || kind != SCRUB_STARTS) __atomic_store_n(&rule->own_tried[kind], 1, __ATOMIC_RELEASE);
    }
    hs_database_t *database = rule->own[kind];
    pthread_mutex_unlock(&scrubber->lock);
    return database;
}
