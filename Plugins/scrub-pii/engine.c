/* The scrubber: the rules of rules.c that are not disabled, and the `extraPatterns`, compiled
 * once into one Hyperscan database, so a text is scanned once for all of them in time linear
 * in its length, whatever the patterns (no backtracking: a pattern like `(a|aa)*c` costs what
 * `a*c` costs). That database reports only which rules match and where their matches end
 * (without the start of each match, it compiles in a third of the time; each rule's tail held
 * cut to its least, the run of tail bytes after an end taken as ends too: tail.c). Each rule
 * that matched then scans the text again alone
 * (scan.c), for every end of every match with its leftmost start: in its own database compiled
 * with HS_FLAG_SOM_LEFTMOST, or, for a rule whose matches have a bounded length, backwards
 * (the same matches, without the engine's costly start tracking); each database is made on
 * first use (rule_databases.c: a few milliseconds). The work stays linear, at most one such
 * scan per rule that matched. The selection below turns those into the spans replaced:
 *   1. per (rule, start), the longest end whose check passes (the shortest for a group
 *      `whole(first_end)`: two PEM keys in one text stay two matches);
 *   2. each match becomes the part its group replaces (a keyword and its `=` are only
 *      context: `cl_pwd = value` replaces `value`, so a rule may match inside another's
 *      context: `SECRET=cl_pwd := value` replaces both `cl_pwd` and `value`);
 *   3. left to right, the earliest replaced part wins; at the same start the earlier row, then
 *      the longer part; a part overlapping one already taken is dropped;
 *   4. a part inside what a replacement wrote (`[email]`, `[github_token:0a1b…]`) is dropped;
 *   5. a part dropped in step 3 that ran past the one kept may hide another that starts after
 *      it (only the leftmost start of each end is reported): then its line is scrubbed again
 *      (the whole text, when the rule can span lines), so scrubbing twice changes nothing; a
 *      part dropped in step 4 that runs on past the replacement it starts in may too: then
 *      the whole text is scrubbed again. */
#define _GNU_SOURCE
#include "scrub.h"

#include <hs/hs.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "checks.h"
#include "engine.h"
#include "rules.h"

/* The mask of a kind: the T-4 kinds keep their masks ([ip] for both addresses, [secret] for
   every credential T-4 named); the others are `[kind]`. */
static const char *const t4_masks[][2] = {
    {"ipv4", "ip"}, {"ipv6", "ip"}, {"jwt", "secret"}, {"aws_key", "secret"}, {"bearer", "secret"}, {"secret", "secret"},
};

static const char *mask_of(const char *kind) {
    for (size_t k = 0; k < sizeof t4_masks / sizeof *t4_masks; k++)
        if (strcmp(t4_masks[k][0], kind) == 0) return t4_masks[k][1];
    return kind;
}

bool rh_scrub_kind_known(const char *kind) {
    for (size_t k = 0; k < scrub_rule_count; k++)
        if (strcmp(scrub_rules[k].kind, kind) == 0) return true;
    return false;
}

static bool disabled(const char *kind, const char *const *disable, size_t disable_count) {
    for (size_t k = 0; k < disable_count; k++)
        if (strcmp(disable[k], kind) == 0) return true;
    return false;
}

void rh_scrubber_free(struct rh_scrubber *scrubber) {
    if (!scrubber) return;
    hs_free_database(scrubber->database);
    for (size_t k = 0; k < scrubber->count; k++)
        for (int kind = 0; kind < SCRUB_OWN_KINDS; kind++) hs_free_database(scrubber->rules[k].own[kind]);
    for (size_t k = 0; k < scrubber->owned_count; k++) free(scrubber->owned[k]);
    scrub_memo_free(&scrubber->memo);
    free(scrubber->cache_folder);
    free(scrubber->owned);
    free(scrubber->rules);
    free(scrubber);
}

/* Each extra pattern alone first: a refusal names the pattern, never a whole-set index. */
bool rh_scrub_extras_valid(const struct rh_scrub_extra *extras, size_t count, char *error, size_t error_size) {
    for (size_t k = 0; k < count; k++) {
        hs_database_t *alone = NULL;
        hs_compile_error_t *why = NULL;
        if (hs_compile(extras[k].pattern, HS_FLAG_SOM_LEFTMOST, HS_MODE_BLOCK, NULL, &alone, &why) == HS_SUCCESS) {
            hs_free_database(alone);
            continue;
        }
        snprintf(error, error_size, "extraPatterns \"%s\": \"%s\" is not a pattern the engine (Hyperscan) takes: %s", extras[k].name,
                 extras[k].pattern, why && why->message ? why->message : "refused");
        hs_free_compile_error(why);
        return false;
    }
    return true;
}

/* The database of `patterns`: from the cache in `cache_folder` when it holds it, else compiled
   (and saved there). */
static bool compile(const char **patterns, const unsigned *flags, const unsigned *ids, size_t count, const char *cache_folder,
                    hs_database_t **database, char *error, size_t error_size) {
    uint8_t digest[32];
    scrub_cache_digest(patterns, flags, count, digest);
    if (cache_folder && (*database = scrub_cache_load(cache_folder, digest))) return true;
    hs_compile_error_t *why = NULL;
    if (hs_compile_multi(patterns, flags, ids, (unsigned)count, HS_MODE_BLOCK, NULL, database, &why) != HS_SUCCESS) {
        snprintf(error, error_size, "the rules do not compile (rule %d): %s", why ? why->expression : -1,
                 why && why->message ? why->message : "refused");
        hs_free_compile_error(why);
        return false;
    }
    if (cache_folder) scrub_cache_store(cache_folder, digest, *database);
    return true;
}

/* The rule's pattern as the rule set holds it (tail.c): its tail cut and its head relaxed, in
   *cut (freed by the caller), or as it is written. */
static const char *set_pattern(struct compiled *rule, char **cut) {
    size_t room = 2 * strlen(rule->pattern) + 32;
    if (!(*cut = malloc(2 * room))) return rule->pattern;
    rule->has_tail = scrub_tail(rule->pattern, *cut, room, rule->tail, &rule->tail_extra, NULL, NULL);
    const char *held = rule->has_tail ? *cut : rule->pattern;
    return scrub_head(held, *cut + room, room) ? *cut + room : held;
}

struct rh_scrubber *rh_scrubber_new(const char *const *disable, size_t disable_count, const struct rh_scrub_extra *extras, size_t extra_count,
                                    const char *cache_folder, char *error, size_t error_size) {
    if (!rh_scrub_extras_valid(extras, extra_count, error, error_size)) return NULL;
    size_t capacity = scrub_rule_count + extra_count;
    struct rh_scrubber *scrubber = calloc(1, sizeof *scrubber);
    const char **patterns = calloc(capacity + 1, sizeof *patterns);
    char **cuts = calloc(capacity + 1, sizeof *cuts);
    unsigned *flags = calloc(capacity + 1, sizeof *flags), *ids = calloc(capacity + 1, sizeof *ids);
    if (scrubber) scrubber->rules = calloc(capacity + 1, sizeof *scrubber->rules);
    if (scrubber) scrubber->owned = calloc(extra_count + 1, sizeof *scrubber->owned);
    bool ok = scrubber && patterns && cuts && flags && ids && scrubber->rules && scrubber->owned;
    for (size_t k = 0; ok && k < scrub_rule_count; k++) {
        if (disabled(scrub_rules[k].kind, disable, disable_count)) continue;
        scrubber->rules[scrubber->count] = (struct compiled){
            .kind = scrub_rules[k].kind, .pattern = scrub_rules[k].pattern, .group = scrub_rules[k].group, .check = scrub_rules[k].check};
        patterns[scrubber->count++] = scrub_rules[k].pattern;
    }
    for (size_t k = 0; ok && k < extra_count; k++) {
        char *name = strdup(extras[k].name);
        ok = name != NULL;
        if (!ok) break;
        scrubber->owned[scrubber->owned_count++] = name;
        scrubber->rules[scrubber->count] = (struct compiled){.kind = name, .pattern = extras[k].pattern, .group = "whole", .check = "none"};
        patterns[scrubber->count++] = extras[k].pattern;
    }
    for (size_t k = 0; ok && k < scrubber->count; k++) {
        ids[k] = (unsigned)k;
        struct compiled *rule = &scrubber->rules[k];
        rule->first_end = strstr(rule->group, "first_end") != NULL;
        rule->unchecked = strcmp(rule->check, "none") == 0;
        rule->width = SIZE_MAX;
        rule->has_breaks = scrub_breaks(patterns[k], rule->breaks, rule->starts);
        patterns[k] = set_pattern(rule, &cuts[k]);
    }
    if (ok) {
        pthread_mutex_init(&scrubber->lock, NULL);
        scrub_memo_init(&scrubber->memo);
    }
    static atomic_uint generations;
    if (ok) scrubber->generation = atomic_fetch_add(&generations, 1) + 1;
    if (ok && cache_folder) ok = (scrubber->cache_folder = strdup(cache_folder)) != NULL;
    if (!ok) snprintf(error, error_size, "out of memory compiling the rules");
    if (ok && scrubber->count > 0) ok = compile(patterns, flags, ids, scrubber->count, cache_folder, &scrubber->database, error, error_size);
    for (size_t k = 0; cuts && k < capacity; k++) free(cuts[k]);
    free(cuts);
    free(patterns);
    free(flags);
    free(ids);
    if (ok) return scrubber;
    rh_scrubber_free(scrubber);
    return NULL;
}

static int by_start(const void *a, const void *b) {
    const struct match *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->to > y->to ? -1 : x->to < y->to; /* longer first */
}

/* Whether text[from..) lies inside a replacement already written: `[name]` or `[name:hex]`,
   where name is a kind or an extra pattern's name. */
static bool inside_replacement(const struct rh_scrubber *scrubber, const char *text, size_t from) {
    size_t open = from;
    while (open > 0 && from - open < 64 && text[open] != '[' && text[open] != ']') open--;
    if (text[open] != '[') return false;
    size_t name = open + 1, end = name;
    while (text[end] && text[end] != ']' && text[end] != ':' && end - name < 64) end++;
    if (text[end] != ']' && text[end] != ':') return false;
    for (size_t k = 0; k < scrubber->count; k++) {
        const char *candidates[2] = {scrubber->rules[k].kind, mask_of(scrubber->rules[k].kind)};
        for (int c = 0; c < 2; c++)
            if (strlen(candidates[c]) == end - name && strncmp(candidates[c], text + name, end - name) == 0) return true;
    }
    return false;
}

/* Steps 1 to 4 above, in place; true when step 5 needs the whole text scrubbed again (the
   parts kept over a one-line part that ran past them are marked `hides`). */
static bool select_matches(const struct rh_scrubber *scrubber, struct matches *found, const char *text, size_t size) {
    if (found->count == 0) return false;
    scrub_sort(found->items, found->count, by_start);
    size_t kept = 0;
    bool hidden = false;
    for (size_t i = 0; i < found->count;) {
        const struct compiled *rule = &scrubber->rules[found->items[i].id];
        bool passed = false;
        struct match best = found->items[i];
        size_t j = i;
        for (; j < found->count && found->items[j].from == found->items[i].from && found->items[j].id == found->items[i].id; j++) {
            if (passed && !rule->first_end) continue;
            if (rule->unchecked || scrub_check(rule->check, text, size, found->items[j].from, found->items[j].to)) {
                best = found->items[j];
                passed = true;
            }
        }
        if (passed) {
            scrub_group(rule->group, text, best.from, best.to, &best.from, &best.to);
            if (best.from < best.to) found->items[kept++] = best;
        }
        i = j;
    }
    scrub_sort(found->items, kept, by_start);
    size_t out = 0, end = 0;
    for (size_t i = 0; i < kept; i++) {
        if (inside_replacement(scrubber, text, found->items[i].from)) {
            /* Step 5 too: a part that starts in a replacement and runs on past it may hide a
               match ending where it ends (`[email]token=@` behind `=[email]token=@`). */
            const char *close = memchr(text + found->items[i].from, ']', found->items[i].to - found->items[i].from);
            hidden |= close && (size_t)(close - text) + 1 < found->items[i].to;
            continue;
        }
        if (out > 0 && found->items[i].from < end) {
            /* One-line: a newline is a break of its rule (no match holds one). */
            bool one_line = scrubber->rules[found->items[i].id].breaks['\n'];
            if (found->items[i].to > end && one_line) found->items[out - 1].hides = true;
            else hidden |= found->items[i].to > end;
            continue;
        }
        found->items[out++] = found->items[i];
        end = found->items[i].to;
    }
    found->count = out;
    return hidden;
}

/* --- writing --------------------------------------------------------------------------- */

struct out {
    char *text;
    size_t length, capacity;
    bool failed;
};

static void put(struct out *o, const char *bytes, size_t n) {
    if (o->failed) return;
    if (o->length + n + 1 > o->capacity) {
        size_t capacity = (o->length + n + 1) * 2;
        char *grown = realloc(o->text, capacity);
        if (!grown) {
            o->failed = true;
            return;
        }
        o->text = grown;
        o->capacity = capacity;
    }
    memcpy(o->text + o->length, bytes, n);
    o->length += n;
    o->text[o->length] = '\0';
}

/* An empty text with room for `size` bytes (a text about as long as the one scrubbed). */
static struct out sized_for(size_t size) {
    struct out o = {malloc(size + 1), 0, size + 1, false};
    if (o.text) o.text[0] = '\0';
    else o.failed = true;
    return o;
}

static void puts_(struct out *o, const char *text) { put(o, text, strlen(text)); }

/* What replaces value[0..length) of `kind`: its mask, nothing, or `[kind:<12 hex>]`. */
static void replace(struct out *o, const char *kind, const char *value, size_t length, const struct rh_scrub_style *style) {
    if (style->method == RH_SCRUB_REMOVE) return;
    puts_(o, "[");
    if (style->method == RH_SCRUB_HASH && style->pseudonym) {
        char hex[13];
        style->pseudonym(style->context, value, length, hex);
        puts_(o, kind);
        puts_(o, ":");
        put(o, hex, 12);
    } else {
        puts_(o, mask_of(kind)); /* no key: masked, never left */
    }
    puts_(o, "]");
}


/* Where a pass wrote replacements whose edges changed, in its output. */
struct marks {
    size_t *at;
    size_t count, capacity;
    bool failed;
};

static void mark(struct marks *marks, size_t at) {
    if (marks->count == marks->capacity) {
        size_t capacity = marks->capacity ? marks->capacity * 2 : 16;
        size_t *grown = realloc(marks->at, capacity * sizeof *grown);
        if (!grown) {
            marks->failed = true;
            return;
        }
        marks->at = grown;
        marks->capacity = capacity;
    }
    marks->at[marks->count++] = at;
}

/* One pass: the text with what was found replaced (the offsets of each replacement in
   `marks`); *again when step 4 is needed. */
static char *pass(struct rh_scrubber *scrubber, const char *text, size_t size, const struct rh_scrub_style *style, bool *again,
                  struct marks *marks) {
    struct match room[128];
    struct matches found = scrub_matches_in(room, sizeof room / sizeof *room);
    if (scrubber->database && size > 0) {
        if (!scrub_scan(scrubber, text, size, &found)) {
            scrub_matches_free(&found);
            return NULL;
        }
        *again = select_matches(scrubber, &found, text, size);
    }
    struct out o = sized_for(size);
    size_t at = 0;
    for (size_t k = 0; k < found.count; k++) {
        size_t from = found.items[k].from, to = found.items[k].to;
        put(&o, text + at, from - at);
        /* Its line is scrubbed again when the replacement has a neighbour on it: what the rules
           and checks read beside it then changes (`co4111` becomes `]4111`, a boundary;
           `4111.255.255.255.255` is no longer a dotted run), and a rule may read the
           replacement's own text with what follows (`[private_key] ` and 44 letters: a keyword,
           its separator and a value to ibm_cloud_key). */
        bool beside = (from > 0 && text[from - 1] != '\n') || (to < size && text[to] != '\n');
        if (marks && (beside || found.items[k].hides)) mark(marks, o.length);
        replace(&o, scrubber->rules[found.items[k].id].kind, text + from, to - from, style);
        at = to;
    }
    put(&o, text + at, size - at);
    scrub_matches_free(&found);
    if (!o.failed && !(marks && marks->failed)) return o.text;
    free(o.text);
    return NULL;
}

/* `text` scrubbed until a pass changes nothing more (step 5, and a line a replacement changed
   the context of: `co4111` became `[email]4111`, where a card now starts at a boundary). */
static char *settle(struct rh_scrubber *scrubber, const char *text, size_t size, const struct rh_scrub_style *style) {
    char *result = NULL;
    for (int passes = 0; passes < 8; passes++) {
        bool again = false;
        char *next = pass(scrubber, result ? result : text, result ? strlen(result) : size, style, &again, NULL);
        bool same = next && strcmp(next, result ? result : text) == 0;
        free(result);
        result = next;
        if (!result || same) break;
    }
    return result;
}

char *rh_scrubber_apply(struct rh_scrubber *scrubber, const char *text, const struct rh_scrub_style *given) {
    static const struct rh_scrub_style masked = {RH_SCRUB_MASK, NULL, NULL};
    const struct rh_scrub_style *style = given ? given : &masked;
    bool again = false;
    struct marks marks = {NULL, 0, 0, false};
    char *first = pass(scrubber, text, strlen(text), style, &again, &marks);
    /* Removing leaves no mark to tell a value from the text around it: one pass. */
    if (style->method == RH_SCRUB_REMOVE) {
        again = false;
        marks.count = 0;
    }
    if (!first || marks.count == 0 || again) {
        free(marks.at);
        if (!first || !again) return first;
        char *settled = settle(scrubber, first, strlen(first), style);
        free(first);
        return settled;
    }
    /* Each line a replacement was written into is scrubbed again, alone, until it settles;
       the others are kept as they are (most of a long text). */
    struct out o = sized_for(strlen(first));
    size_t line = 0, mark_index = 0, length = strlen(first);
    while (line < length && !o.failed) {
        const char *newline = memchr(first + line, '\n', length - line);
        size_t end = newline ? (size_t)(newline - first) + 1 : length;
        bool touched = mark_index < marks.count && marks.at[mark_index] < end;
        while (mark_index < marks.count && marks.at[mark_index] < end) mark_index++;
        char *settled = touched ? settle(scrubber, first + line, end - line, style) : NULL;
        if (touched && !settled) o.failed = true;
        put(&o, settled ? settled : first + line, settled ? strlen(settled) : end - line);
        free(settled);
        line = end;
    }
    free(marks.at);
    free(first);
    if (!o.failed) return o.text;
    free(o.text);
    return NULL;
}

static struct rh_scrubber *every_rule;
static pthread_once_t every_rule_once = PTHREAD_ONCE_INIT;

static void compile_every_rule(void) {
    char error[512];
    every_rule = rh_scrubber_new(NULL, 0, NULL, 0, NULL, error, sizeof error);
}

char *rh_scrub(const char *text) {
    pthread_once(&every_rule_once, compile_every_rule);
    return every_rule ? rh_scrubber_apply(every_rule, text, NULL) : NULL;
}

void rh_scrubber_prepare_every_rule(struct rh_scrubber *scrubber) {
    for (unsigned id = 0; id < scrubber->count; id++) {
        /* The databases a scan can ask for: none for a rule whose matches all have one length
           (each end gives its start), the backward search's for one whose length is bounded
           (scan.c), the start-of-match scan's for every other (and for a bounded one's stretch
           with too many places). */
        const struct compiled *rule = scrub_measured(scrubber, id);
        for (int kind = 0; !rule->fixed && kind < SCRUB_OWN_KINDS; kind++)
            if ((kind == SCRUB_STARTS || rule->width != SIZE_MAX) && !scrub_own_saved(scrubber, id, (enum scrub_own)kind))
                scrub_own(scrubber, id, (enum scrub_own)kind);
    }
}
