/* The rule table (rules.c) and the kinds it names. */
#pragma once

#include <stddef.h>

struct scrub_rule {
    const char *kind;    /* snake case: what `disable` names, and the mask `[kind]` */
    const char *pattern; /* Hyperscan syntax, compiled with HS_FLAG_SOM_LEFTMOST */
    const char *group;   /* which part of a match is replaced: see engine.c */
    const char *check;   /* what must hold of a match, `;`-separated: see checks.c */
};

extern const struct scrub_rule scrub_rules[];
extern const size_t scrub_rule_count;
