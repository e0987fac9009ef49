/* A rule's tail: a pattern each of whose top-level branches ends with one atom repeated more
 * times than its least (`C*`, `C+`, `C{n,}`, `C{n,m}`; the same atom, and the same number of
 * repeats past the least, in every branch), such as a secret's value `[^\s'"&,;]*` or the last
 * part of a Discord token, `[A-Za-z0-9_-]{27,38}`. Every place in the run of C bytes after a
 * match's least tail, up to that number of bytes, is an end of it: the whole rule set's scan,
 * which reports every end, would report each of them (a third of its reports), and a repeat with
 * a bound of its own costs the engine more than one without (the Discord token's `{27,38}` made
 * it a seventh of the rule set's scan; `{27}` takes an eighth of that). The rule set is compiled
 * with each tail cut to its least (`C{n}`, nothing for `C*`); scan.c takes the run of C bytes
 * after each end it reports, at most `extra` of them, as ends too (`member`), and so learns the
 * same ends.
 *
 * A rule's head (scrub_head): the rule set needs only where matches end, so a leading repeat
 * `C{n,m}` is held as `C{n}`, the assertions before it left out; it ends wherever the rule does,
 * and where only it ends the rule's own scan finds nothing. The Telegram token's
 * `\b[0-9]{5,16}:` cost the rule set's scan 0.58 ms over the bench corpus, `[0-9]{5}:` 0.06. */
#include "engine.h"
#include "pattern.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* The end of the piece's atom at `at`: past a group, a class, an escape or one byte; NULL when
   it is not one this reads. *atom when it is one that matches one byte (a class, an escape that
   is not an assertion, `.`, a byte). */
static const char *atom_end(const char *at, bool *atom) {
    bool assertion = false;
    *atom = false;
    if (*at == '[') {
        *atom = true;
        return scrub_class_end(at);
    }
    if (*at == '\\') {
        size_t n = scrub_escape_length(at, &assertion);
        *atom = !assertion;
        return n ? at + n : NULL;
    }
    if (*at == '(') {
        /* A group; one that sets an option other than for itself would change what follows. */
        if (at[1] == '?' && strncmp(at, "(?:", 3) != 0 && strncmp(at, "(?i:", 4) != 0) return NULL;
        int depth = 0;
        while (at && *at) {
            if (*at == '[') {
                at = scrub_class_end(at);
            } else if (*at == '\\') {
                size_t n = scrub_escape_length(at, &assertion);
                at = n ? at + n : NULL;
            } else {
                depth += *at == '(' ? 1 : *at == ')' ? -1 : 0;
                at++;
                if (depth == 0) break;
            }
        }
        return at && depth == 0 ? at : NULL;
    }
    if (*at == '\0' || strchr("*+?{|)", *at)) return NULL;
    *atom = *at != '^' && *at != '$';
    return at + 1;
}

/* The bytes of an escape that stands for a set (`\s`, `\d`, `\w` and their negations) into
   member; false when `c` names no set. */
static bool escape_set(char c, bool member[256]) {
    char lower = (char)tolower((unsigned char)c);
    if (lower != 's' && lower != 'd' && lower != 'w') return false;
    for (int b = 0; b < 256; b++) {
        bool in = lower == 's' ? (b == ' ' || (b >= '\t' && b <= '\r')) : lower == 'd' ? (b >= '0' && b <= '9') : (isalnum(b) && b < 128) || b == '_';
        if (in != (c != lower)) member[b] = true;
    }
    return true;
}

/* The byte an escape inside or outside a class stands for, or -1 when it is a set or one this
   does not read (`\v` and `\h` are sets of whitespace to the engine, `\b` a backspace in a
   class and an assertion out of one). */
static int escaped_byte(const char *at) {
    static const char named[] = "tnrfae", bytes[] = "\t\n\r\f\a\x1b";
    const char *name = strchr(named, at[1]);
    if (at[1] == 'x' && at[2] != '{') {
        unsigned value = 0;
        for (int k = 2; k < 4 && isxdigit((unsigned char)at[k]); k++) value = value * 16 + (unsigned)(isdigit((unsigned char)at[k]) ? at[k] - '0' : tolower((unsigned char)at[k]) - 'a' + 10);
        return (int)value;
    }
    if (name && at[1]) return (unsigned char)bytes[name - named];
    return ispunct((unsigned char)at[1]) || at[1] == ' ' ? (unsigned char)at[1] : -1;
}

/* The bytes the atom [at, end) matches into member; false when it is one this does not read. */
static bool atom_bytes(const char *at, const char *end, bool caseless, bool member[256]) {
    memset(member, 0, 256);
    if (*at == '.') {
        memset(member, 1, 256);
        member['\n'] = false;
    } else if (*at == '\\') {
        if (!escape_set(at[1], member)) {
            int byte = escaped_byte(at);
            if (byte < 0) return false;
            member[byte] = true;
        }
    } else if (*at == '[') {
        bool negated = at[1] == '^';
        const char *p = at + 1 + negated;
        while (p < end - 1) {
            int low = (unsigned char)*p, length = 1;
            if (*p == '\\') {
                if (escape_set(p[1], member)) {
                    p += 2;
                    continue;
                }
                bool assertion;
                if ((low = escaped_byte(p)) < 0) return false;
                length = (int)scrub_escape_length(p, &assertion);
            }
            p += length;
            int high = low;
            if (*p == '-' && p + 1 < end - 1) {
                p++;
                high = (unsigned char)*p;
                bool assertion;
                if (*p == '\\' && (high = escaped_byte(p)) < 0) return false;
                p += *p == '\\' ? scrub_escape_length(p, &assertion) : 1;
                if (high < low) return false;
            }
            for (int b = low; b <= high; b++) member[b] = true;
        }
        if (negated)
            for (int b = 0; b < 256; b++) member[b] = !member[b];
    } else {
        member[(unsigned char)*at] = true;
    }
    if (caseless)
        for (int b = 0; b < 256; b++)
            if (member[b] && isalpha(b) && b < 128) member[tolower(b)] = member[toupper(b)] = true;
    return true;
}

/* One piece of a sequence: an atom, its repeat (a lazy `?` after it taken too). */
struct piece {
    const char *start, *atom_end, *end;
    bool atom; /* the atom matches one byte (atom_end's *atom) */
    struct width times; /* {1, 1} without a repeat */
};

/* The piece at `at` into *piece; false when it is not one this reads (a possessive repeat too). */
static bool read_piece(const char *at, struct piece *piece) {
    bool refused = false;
    piece->start = at;
    if (!(piece->atom_end = atom_end(at, &piece->atom))) return false;
    size_t repeat = scrub_repeat_length(piece->atom_end, &piece->times, &refused);
    piece->end = piece->atom_end + repeat + (repeat > 0 && piece->atom_end[repeat] == '?');
    return !refused;
}

bool scrub_tail(const char *pattern, char *cut, size_t cut_size, bool member[256], size_t *extra, const char **atom, size_t *atom_length) {
    bool caseless = strncmp(pattern, "(?i)", 4) == 0;
    const char *at = pattern + (caseless ? 4 : 0), *tail = NULL;
    size_t tail_length = 0, tail_extra = 0, used = (size_t)snprintf(cut, cut_size, "%s", caseless ? "(?i)" : "");
    for (;;) {
        const char *branch = at;
        struct piece last = {0};
        for (; *at && *at != '|'; at = last.end)
            if (!read_piece(at, &last)) return false;
        /* The branch's last piece: one atom repeated more than its least, the same atom as many
           times more in every branch. */
        struct width times = last.times;
        if (!last.start || !last.atom || times.max <= times.min) return false;
        size_t length = (size_t)(last.atom_end - last.start), more = times.max == SIZE_MAX ? SIZE_MAX : times.max - times.min;
        if (tail && (length != tail_length || strncmp(tail, last.start, length) != 0 || more != tail_extra)) return false;
        tail = last.start, tail_length = length, tail_extra = more;
        int wrote = snprintf(cut + used, cut_size - used, "%.*s%.*s", (int)(last.start - branch), branch, times.min > 0 ? (int)length : 0,
                             last.start);
        if (wrote < 0 || (size_t)wrote >= cut_size - used) return false;
        used += (size_t)wrote;
        if (times.min > 0) {
            wrote = snprintf(cut + used, cut_size - used, "{%zu}", times.min);
            if (wrote < 0 || (size_t)wrote >= cut_size - used) return false;
            used += (size_t)wrote;
        }
        if (*at != '|') break;
        if (used + 2 > cut_size) return false;
        cut[used++] = '|', cut[used] = '\0';
        at++;
    }
    *extra = tail_extra;
    if (atom) *atom = tail;
    if (atom_length) *atom_length = tail_length;
    return atom_bytes(tail, tail + tail_length, caseless, member);
}

/* Whether `at` (a pattern after its `(?i)`) has a `|` outside every group, or a piece this does
   not read. */
static bool branches(const char *at) {
    struct piece piece;
    for (; *at; at = piece.end)
        if (*at == '|' || !read_piece(at, &piece)) return true;
    return false;
}

bool scrub_head(const char *pattern, char *relaxed, size_t relaxed_size) {
    bool caseless = strncmp(pattern, "(?i)", 4) == 0, assertion = false;
    const char *at = pattern + (caseless ? 4 : 0);
    if (branches(at)) return false;
    for (size_t n; *at == '^' || (*at == '\\' && (n = scrub_escape_length(at, &assertion)) && assertion);) at += *at == '^' ? 1 : n;
    struct piece head;
    if (!read_piece(at, &head) || head.times.min == 0 || head.times.max <= head.times.min) return false;
    int wrote = snprintf(relaxed, relaxed_size, "%s%.*s{%zu}%s", caseless ? "(?i)" : "", (int)(head.atom_end - at), at, head.times.min,
                         head.end);
    return wrote > 0 && (size_t)wrote < relaxed_size;
}
