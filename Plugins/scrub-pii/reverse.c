/* A rule's pattern read backwards, for scan.c's backward start search: a pattern that matches
 * the reversed bytes of every text the rule matches (and maybe more: it is used only to find
 * where matches may start, each then checked by the rule itself).
 *
 * The pieces of each sequence come in reverse order, each group's inside reversed the same way;
 * a character class, an escape and a repeat are kept as they are (a repeat of a reversed piece
 * matches the reversed repeat). Assertions (`^`, `$`, `\b`, `\B`, `\A`, `\z`, `\Z`) are left
 * out: without them a pattern matches more, never less. `(?i)` at the very start makes the
 * whole pattern caseless (said in *caseless, for the compile flag); `(?i:...)` is kept. A
 * pattern with anything else (a back-reference, `\Q`, an option other than `i`, a class with
 * POSIX names, possessive repeats, `(?i)` past the start) is refused: false, and the rule keeps
 * its start-of-match scan. */
#include "engine.h"
#include "pattern.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    const char *at;
    char *out;
    size_t used, size;
    bool failed;
};

static void emit(struct reader *r, const char *bytes, size_t n) {
    if (r->failed || r->used + n + 1 > r->size) {
        r->failed = true;
        return;
    }
    memcpy(r->out + r->used, bytes, n);
    r->used += n;
    r->out[r->used] = '\0';
}

static size_t sum(size_t a, size_t b) { return a == SIZE_MAX || b == SIZE_MAX || a > SIZE_MAX - b ? SIZE_MAX : a + b; }

static size_t times(size_t a, size_t n) {
    if (a == 0 || n == 0) return 0;
    return a == SIZE_MAX || n == SIZE_MAX || a > SIZE_MAX / n ? SIZE_MAX : a * n;
}

static bool reverse_alternation(struct reader *r, struct width *width);

const char *scrub_class_end(const char *at) {
    const char *p = at + 1;
    if (*p == '^') p++;
    if (*p == ']') p++; /* a ']' first is a member */
    for (; *p && *p != ']'; p++) {
        if (*p == '[' && p[1] == ':') return NULL;
        if (*p == '\\' && !*++p) return NULL;
    }
    return *p == ']' ? p + 1 : NULL;
}

size_t scrub_escape_length(const char *at, bool *assertion) {
    char c = at[1];
    *assertion = strchr("bBAzZG", c) != NULL && c != '\0';
    if (c == '\0' || (c >= '0' && c <= '9') || strchr("QEkgcopPNRXKC", c)) return 0;
    if (c != 'x') return 2;
    if (at[2] == '{') {
        const char *close = strchr(at + 3, '}');
        return close ? (size_t)(close - at) + 1 : 0;
    }
    size_t n = 2;
    while (n < 4 && strchr("0123456789abcdefABCDEF", at[n]) && at[n]) n++;
    return n;
}

size_t scrub_repeat_length(const char *at, struct width *times_out, bool *refused) {
    size_t n = 0;
    *times_out = (struct width){1, 1};
    if (*at == '*' || *at == '+' || *at == '?') {
        n = 1;
        *times_out = (struct width){*at == '+' ? 1 : 0, *at == '?' ? 1 : SIZE_MAX};
    } else if (*at == '{') {
        char *end = NULL;
        if (!(at[1] >= '0' && at[1] <= '9')) return 0;
        unsigned long low = strtoul(at + 1, &end, 10), high = low;
        if (*end == ',') high = end[1] >= '0' && end[1] <= '9' ? strtoul(end + 1, &end, 10) : (end++, ULONG_MAX);
        if (*end != '}' || high < low) return 0;
        n = (size_t)(end - at) + 1;
        *times_out = (struct width){low, high == ULONG_MAX ? SIZE_MAX : high};
    }
    if (n > 0 && at[n] == '+') *refused = true; /* possessive */
    return n;
}

/* One piece (an atom and its repeat) at r->at, reversed, onto the output; its width in *width. */
static bool reverse_piece(struct reader *r, struct width *width) {
    const char *at = r->at;
    bool assertion = false, refused = false;
    struct width atom = {1, 1}, repeats;
    if (*at == '(') {
        bool caseless_group = strncmp(at, "(?i:", 4) == 0;
        if (at[1] == '?' && strncmp(at, "(?:", 3) != 0 && !caseless_group) return false;
        emit(r, caseless_group ? "(?i:" : "(?:", caseless_group ? 4 : 3);
        r->at = at + (at[1] == '?' ? (caseless_group ? 4 : 3) : 1);
        if (!reverse_alternation(r, &atom) || *r->at != ')') return false;
        emit(r, ")", 1);
        at = r->at + 1;
    } else if (*at == '[') {
        const char *end = scrub_class_end(at);
        if (!end) return false;
        emit(r, at, (size_t)(end - at));
        at = end;
    } else if (*at == '\\') {
        size_t n = scrub_escape_length(at, &assertion);
        if (n == 0) return false;
        if (!assertion) emit(r, at, n);
        at += n;
    } else if (*at == '^' || *at == '$') {
        assertion = true;
        at++;
    } else if (*at == '*' || *at == '+' || *at == '?' || *at == '{') {
        return false;
    } else {
        emit(r, at, 1);
        at++;
    }
    size_t repeat = scrub_repeat_length(at, &repeats, &refused);
    if (refused || (repeat > 0 && assertion)) return false;
    if (assertion) atom = (struct width){0, 0};
    *width = (struct width){times(atom.min, repeats.min), times(atom.max, repeats.max)};
    emit(r, at, repeat);
    at += repeat;
    if (repeat > 0 && *at == '?') at++;
    r->at = at;
    return !r->failed;
}

static void reverse_bytes(char *bytes, size_t length) {
    for (size_t k = 0; k < length / 2; k++) {
        char kept = bytes[k];
        bytes[k] = bytes[length - 1 - k];
        bytes[length - 1 - k] = kept;
    }
}

/* The sequence at r->at up to `|`, `)` or the end, its pieces in reverse order: each is written
   as it comes, then the whole stretch they take is reversed, then each piece in it, back to its
   own order. */
static bool reverse_sequence(struct reader *r, struct width *width) {
    enum { MOST = 256 };
    size_t starts[MOST + 1], count = 0, first = r->used;
    *width = (struct width){0, 0};
    while (*r->at && *r->at != '|' && *r->at != ')') {
        struct width piece;
        if (count == MOST) return false;
        starts[count++] = r->used;
        if (!reverse_piece(r, &piece)) return false;
        *width = (struct width){sum(width->min, piece.min), sum(width->max, piece.max)};
    }
    starts[count] = r->used;
    reverse_bytes(r->out + first, r->used - first);
    for (size_t k = 0; k < count; k++) {
        size_t length = starts[k + 1] - starts[k];
        reverse_bytes(r->out + first + (r->used - starts[k + 1]), length);
    }
    return !r->failed;
}

static bool reverse_alternation(struct reader *r, struct width *width) {
    if (!reverse_sequence(r, width)) return false;
    while (*r->at == '|') {
        struct width branch;
        r->at++;
        emit(r, "|", 1);
        if (!reverse_sequence(r, &branch)) return false;
        if (branch.min < width->min) width->min = branch.min;
        if (branch.max > width->max) width->max = branch.max;
    }
    return !r->failed;
}

bool scrub_reverse(const char *pattern, char *out, size_t out_size, bool *caseless, size_t *min_width, size_t *max_width) {
    *caseless = strncmp(pattern, "(?i)", 4) == 0;
    struct reader r = {pattern + (*caseless ? 4 : 0), out, 0, out_size, false};
    struct width width = {0, 0};
    if (out_size == 0) return false;
    out[0] = '\0';
    bool read = reverse_alternation(&r, &width) && *r.at == '\0' && !r.failed;
    *min_width = width.min;
    *max_width = width.max;
    return read;
}
