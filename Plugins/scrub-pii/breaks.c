/* What scan.c reads from a rule's pattern to choose where the stretch it scans for a match's
 * start begins:
 *   - the bytes after which the pattern reads the text as the whole text reads it: a byte
 *     outside words (so `\b` reads the same) that the pattern's leading boundary
 *     `(?:^|[^A-Za-z0-9])` takes, if it has one (a stretch that starts after the byte the
 *     boundary would take reads `^` there instead, and finds the same value);
 *   - the breaks: those of them that no match holds (a space for most tokens, a newline for a
 *     rule whose matches stay in one line), so no match ending after one starts before it.
 * The reading is conservative: a byte some match might hold is never a break, and a pattern
 * the reader does not understand (a byte by octal number, a property, a POSIX class, extended
 * syntax) or anchored at the text's start has neither. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"

/* A set of the 128 ASCII bytes. */
struct bytes {
    uint64_t bits[2];
};

static void add(struct bytes *set, unsigned c) {
    if (c < 128) set->bits[c >> 6] |= 1ull << (c & 63);
}

static bool has(const struct bytes *set, unsigned c) { return c < 128 && (set->bits[c >> 6] >> (c & 63)) & 1; }

static void add_range(struct bytes *set, unsigned from, unsigned to) {
    for (unsigned c = from; c <= to && c < 128; c++) add(set, c);
}

static void add_set(struct bytes *set, struct bytes other) {
    set->bits[0] |= other.bits[0];
    set->bits[1] |= other.bits[1];
}

static void add_all_but(struct bytes *set, struct bytes but) {
    set->bits[0] |= ~but.bits[0];
    set->bits[1] |= ~but.bits[1];
}

static struct bytes made(const char *members) {
    struct bytes set = {{0, 0}};
    for (const char *m = members; *m; m++) add(&set, (unsigned char)*m);
    return set;
}

static struct bytes whitespace(void) { return made("\t\n\v\f\r "); }
static struct bytes digits(void) { return made("0123456789"); }
static struct bytes words(void) { return made("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"); }

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* `\xH`, `\xHH` or `\x{H…}` at *c (after its `x`): its value, or -1 when it is none of them. */
static long hex_escape(const char **c) {
    long value = 0;
    int count = 0;
    if (**c == '{') {
        const char *p = *c + 1;
        for (; hex_digit(*p) >= 0 && count < 8; p++, count++) value = value * 16 + hex_digit(*p);
        if (*p != '}' || count == 0) return -1;
        *c = p + 1;
        return value;
    }
    for (; count < 2 && hex_digit(**c) >= 0; (*c)++, count++) value = value * 16 + hex_digit(**c);
    return count > 0 ? value : -1;
}

/* One escape at *c (after its backslash), moved past: the byte it stands for (`*value`, -1 for
   a class of bytes or none), its bytes added to `set`. False when the reader cannot tell what
   it holds. */
static bool escape(const char **c, struct bytes *set, long *value, bool in_class) {
    static const char single[][2] = {{'t', '\t'}, {'n', '\n'}, {'r', '\r'}, {'f', '\f'}, {'a', '\a'}, {'e', 27}};
    char e = *(*c)++;
    *value = -1;
    for (size_t k = 0; k < sizeof single / sizeof *single; k++)
        if (e == single[k][0]) *value = single[k][1];
    if (e == 'b' && in_class) *value = '\b';
    if (e == 'x' && (*value = hex_escape(c)) < 0) return false;
    if (*value >= 0) {
        add(set, (unsigned)*value);
        return true;
    }
    switch (e) {
    case 's': add_set(set, whitespace()); return true;
    case 'd': add_set(set, digits()); return true;
    case 'w': add_set(set, words()); return true;
    case 'h': add_set(set, made("\t ")); return true;
    case 'v': case 'R': add_set(set, made("\n\v\f\r")); return true;
    case 'S': add_all_but(set, whitespace()); return true;
    case 'D': add_all_but(set, digits()); return true;
    case 'W': add_all_but(set, words()); return true;
    case 'H': add_all_but(set, made("\t ")); return true;
    case 'V': add_all_but(set, made("\n\v\f\r")); return true;
    case 'N': add_all_but(set, made("\n")); return true;
    case 'b': case 'B': case 'A': case 'z': case 'Z': case 'G': return !in_class; /* no byte */
    default: break;
    }
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9') || e == '\0') return false;
    *value = (unsigned char)e; /* an escaped sign stands for itself */
    add(set, (unsigned char)e);
    return true;
}

/* One member of a class at *c, moved past: a byte (`*value`) or a class of bytes (-1). */
static bool member(const char **c, struct bytes *set, long *value) {
    if (**c == '[' && (*c)[1] == ':') return false; /* a POSIX class */
    if (**c == '\\') {
        (*c)++;
        return escape(c, set, value, true);
    }
    *value = (unsigned char)*(*c)++;
    add(set, (unsigned)*value);
    return true;
}

/* The class at *c (after its `[`), moved past: its members added to `held`, or every byte but
   them when it is negated. */
static bool class(const char **c, struct bytes *held) {
    const char *p = *c;
    bool negated = *p == '^';
    p += negated;
    struct bytes members = {{0, 0}};
    for (bool first = true; *p && (*p != ']' || first); first = false) {
        long low, high;
        if (!member(&p, &members, &low)) return false;
        if (p[0] != '-' || p[1] == ']' || p[1] == '\0') continue;
        p++;
        if (!member(&p, &members, &high) || low < 0 || high < low) return false;
        add_range(&members, (unsigned)low, (unsigned)high);
    }
    if (*p != ']') return false;
    *c = p + 1;
    if (negated) add_all_but(held, members);
    else add_set(held, members);
    return true;
}

/* A group's head at *c (after its `(?`), moved past; `*dot_all` when it sets the `s` flag. */
static bool group_head(const char **c, bool *dot_all) {
    const char *p = *c;
    if (*p == '=' || *p == '!') p++;
    else if (p[0] == '<' && (p[1] == '=' || p[1] == '!')) p += 2;
    else if (*p == '<' || (p[0] == 'P' && p[1] == '<')) {
        const char *close = strchr(p, '>');
        if (!close) return false;
        p = close + 1;
    } else {
        size_t flags = strspn(p, "ims-");
        if (p[flags] != ':' && p[flags] != ')') return false; /* `x` and what the reader does not know */
        *dot_all |= memchr(p, 's', flags) != NULL;
        p += flags + 1;
    }
    *c = p;
    return true;
}

/* Whether *c starts a counted repeat `{n}`, `{n,}` or `{n,m}`, moved past it if so. */
static bool repeat(const char **c) {
    const char *p = *c + 1;
    size_t low = strspn(p, "0123456789");
    if (low == 0) return false;
    p += low;
    if (*p == ',') p += 1 + strspn(p + 1, "0123456789");
    if (*p != '}') return false;
    *c = p + 1;
    return true;
}

/* The pattern's leading boundary `(?:^|[^…])`, after a `(?i)` if any (which changes only
   letters, never a byte read here): the ASCII bytes it takes (every one when there is none),
   and the pattern after it. */
static const char *leading_boundary(const char *pattern, struct bytes *takes) {
    const char *c = pattern + (strncmp(pattern, "(?i)", 4) == 0 ? 4 : 0), *p = c + 6;
    struct bytes members = {{0, 0}};
    *takes = (struct bytes){{~0ull, ~0ull}};
    if (strncmp(c, "(?:^|[^", 7) != 0 || !class(&p, &members) || *p != ')') return pattern;
    *takes = members;
    return p + 1;
}

/* The bytes some match of `pattern` may hold; false when the reader cannot tell, or when the
   pattern is anchored at the text's start (`^`, `\A`, `\G`: no stretch but the text's own start
   reads it as the text does). */
static bool held_bytes(const char *pattern, struct bytes *held) {
    const char *c = pattern;
    bool dot = false, dot_all = false;
    while (*c) {
        long value;
        bool known = true;
        switch (*c) {
        case '\\': c++, known = !strchr("AG", *c) && escape(&c, held, &value, false); break;
        case '[': c++, known = class(&c, held); break;
        case '(': c++, known = *c != '?' || (c++, group_head(&c, &dot_all)); break;
        case '{': if (!repeat(&c)) add(held, (unsigned char)*c++); break;
        case '.': dot = true, c++; break;
        case '^': return false;
        case ')': case '|': case '*': case '+': case '?': case '$': c++; break;
        default: add(held, (unsigned char)*c++); break;
        }
        if (!known) return false;
    }
    if (dot) add_all_but(held, dot_all ? (struct bytes){{0, 0}} : made("\n"));
    return true;
}

bool scrub_breaks(const char *pattern, bool breaks[256], bool starts[256]) {
    struct bytes takes, held = {{0, 0}}, word = words();
    bool known = held_bytes(leading_boundary(pattern, &takes), &held), any = false;
    breaks[0] = starts[0] = false;
    for (unsigned c = 1; c < 256; c++) {
        starts[c] = known && !has(&word, c) && (c >= 128 || has(&takes, c));
        breaks[c] = starts[c] && c < 128 && !has(&held, c);
        any |= breaks[c];
    }
    return any;
}
