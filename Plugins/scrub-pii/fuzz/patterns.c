/* The fuzz driver's checks of what scrub-pii reads from its patterns without the engine:
 * reverse.c's widths and tail.c's tails and heads, each against what the engine reads. */
#include "patterns.h"

#include <hs/hs.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine.h"
#include "../rules.h"

static int count_match(unsigned id, unsigned long long from, unsigned long long to, unsigned flags, void *context) {
    (void)id, (void)from, (void)to, (void)flags;
    *(bool *)context = true;
    return 0;
}

/* Every built-in rule read by reverse.c (a rule it could not read would lose the backward start
   search without a word), with the shortest and longest match the engine reads from it: a
   rule taken as all one length has each start computed from its end. */
static bool rules_read_as_the_engine_reads(void) {
    for (size_t k = 0; k < scrub_rule_count; k++) {
        char reversed[8192];
        bool caseless;
        size_t shortest = 0, longest = 0;
        hs_expr_info_t *info = NULL;
        hs_compile_error_t *why = NULL;
        if (!scrub_reverse(scrub_rules[k].pattern, reversed, sizeof reversed, &caseless, &shortest, &longest)) {
            printf("reverse.c does not read rule %zu (%s): %s\n", k, scrub_rules[k].kind, scrub_rules[k].pattern);
            return false;
        }
        if (hs_expression_info(scrub_rules[k].pattern, HS_FLAG_SOM_LEFTMOST, &info, &why) != HS_SUCCESS || !info) abort();
        size_t engine_longest = info->max_width == UINT_MAX ? SIZE_MAX : info->max_width, engine_shortest = info->min_width;
        free(info);
        if (shortest != engine_shortest || longest != engine_longest) {
            printf("rule %zu (%s): reverse.c reads matches of %zu to %zu bytes, the engine %zu to %zu\n", k, scrub_rules[k].kind, shortest, longest,
                   engine_shortest, engine_longest);
            return false;
        }
    }
    return true;
}

/* Each built-in rule with a tail (tail.c) read as the engine reads it: the bytes tail.c says its
   atom matches are those the engine matches it with, every one of the 256; and `secret`, whose
   value is an unbounded tail, and `discord_token`, whose last part is a bounded one (11 bytes
   past its least), are among them. */
static bool tails_read_as_the_engine_reads(void) {
    bool secret_has_one = false, discord_has_one = false;
    for (size_t k = 0; k < scrub_rule_count; k++) {
        char cut[8192], atom[256];
        bool member[256];
        const char *at = NULL;
        size_t length = 0, extra = 0;
        if (!scrub_tail(scrub_rules[k].pattern, cut, sizeof cut, member, &extra, &at, &length)) continue;
        secret_has_one |= strcmp(scrub_rules[k].kind, "secret") == 0 && extra == SIZE_MAX;
        discord_has_one |= strcmp(scrub_rules[k].kind, "discord_token") == 0 && extra == 11;
        snprintf(atom, sizeof atom, "%.*s", (int)length, at);
        unsigned flags = strncmp(scrub_rules[k].pattern, "(?i)", 4) == 0 ? HS_FLAG_CASELESS : 0;
        hs_database_t *database = NULL;
        hs_compile_error_t *why = NULL;
        hs_scratch_t *scratch = NULL;
        if (hs_compile(atom, flags, HS_MODE_BLOCK, NULL, &database, &why) != HS_SUCCESS || hs_alloc_scratch(database, &scratch) != HS_SUCCESS) abort();
        for (int byte = 0; byte < 256; byte++) {
            char text = (char)byte;
            bool matched = false;
            if (hs_scan(database, &text, 1, 0, scratch, count_match, &matched) != HS_SUCCESS) abort();
            if (matched != member[byte]) {
                printf("rule %zu (%s): tail.c reads its tail %s as %s byte %d, the engine does not\n", k, scrub_rules[k].kind, atom,
                       member[byte] ? "matching" : "not matching", byte);
                return false;
            }
        }
        hs_free_scratch(scratch);
        hs_free_database(database);
    }
    if (!secret_has_one || !discord_has_one) printf("tail.c finds no unbounded tail in secret, or none 11 bytes past its least in discord_token\n");
    return secret_has_one && discord_has_one;
}

/* tail.c relaxes a head as it says: the Telegram token's `\b[0-9]{5,16}` to `[0-9]{5}` (the rule
   set holds that), a head repeated a fixed number of times or a pattern with branches not at all. */
static bool heads_relaxed(void) {
    const char *cases[][2] = {{"\\b[0-9]{5,16}:[A-Za-z0-9_-]{35}", "[0-9]{5}:[A-Za-z0-9_-]{35}"}, {"(?i)\\b(?:ab|c)+?x", "(?i)(?:ab|c){1}x"},
                              {"\\b[0-9]{5}:x", NULL}, {"[0-9]*x", NULL}, {"[0-9]{2,}x|y", NULL}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char relaxed[256];
        bool done = scrub_head(cases[k][0], relaxed, sizeof relaxed);
        if (done == (cases[k][1] != NULL) && (!done || strcmp(relaxed, cases[k][1]) == 0)) continue;
        printf("tail.c relaxes the head of %s as %s, not as %s\n", cases[k][0], done ? relaxed : "nothing", cases[k][1] ? cases[k][1] : "nothing");
        return false;
    }
    return true;
}

bool patterns_read_as_the_engine_reads(void) {
    return rules_read_as_the_engine_reads() && tails_read_as_the_engine_reads() && heads_relaxed();
}
