/* What a rule's `check` and `group` words mean (rules.c): whether a match found by the engine
 * is the kind it claims, and which part of it is replaced. Only the engine calls these, on the
 * few spans the patterns already matched, so they may look at the text around a match. */
#define _GNU_SOURCE
#include "checks.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Luhn over the digits of s[0..n); `digits` 0: 12 to 19 of them (a card), else exactly that many
   (an IMEI: 15; 16 is an IMEISV, which has no check digit). */
static bool luhn(const char *s, size_t n, int digits) {
    int d[32], count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) continue;
        if (count == 32) return false;
        d[count++] = s[i] - '0';
    }
    if (digits && count != digits) return digits == 15 && count == 16;
    int sum = 0;
    for (int i = count - 1, twice = 0; i >= 0; i--, twice ^= 1) {
        int x = twice ? d[i] * 2 : d[i];
        sum += x > 9 ? x - 9 : x;
    }
    return count >= 12 && sum % 10 == 0;
}

/* Whether a number could be a card by its issuer prefix (IIN) and length: Visa 4 (13, 16-19),
   Mastercard 51-55 and 2221-2720, Amex 34/37, Diners 30/36/38, Discover and UnionPay 6, JCB 35
   and 1800/2131 (15), Maestro 50 and 56-69 (12-19). A barcode or an id that happens to pass
   Luhn seldom also has a card's prefix and length. */
static bool card_issuer(const char *s, size_t n) {
    char d[20];
    size_t count = 0;
    for (size_t i = 0; i < n && count < sizeof d; i++)
        if (isdigit((unsigned char)s[i])) d[count++] = s[i];
    if (count < 4) return false;
    if (count == 12) return d[0] == '6' || (d[0] == '5' && (d[1] == '0' || d[1] >= '6')) || strncmp(d, "0604", 4) == 0;
    if (count == 15 && (strncmp(d, "1800", 4) == 0 || strncmp(d, "2131", 4) == 0)) return true;
    switch (d[0]) {
    case '2': return count == 16;
    case '3': return count >= 14;
    case '4': return count == 13 || count >= 16;
    case '5': case '6': return count >= 14;
    default: return false;
    }
}

/* The IBAN registry's country codes and lengths. */
static const char iban_lengths[] =
    "AD24AE23AL28AT20AZ28BA20BE16BG22BH22BR29BY28CH21CR22CY28CZ24DE22DK18DO28EE20EG29ES24FI18FO18FR27GB22GE22GI23GL18"
    "GR27GT28HR21HU28IE22IL23IQ23IS26IT27JO30KW30KZ20LB28LC32LI21LT20LU20LV21LY25MC27MD24ME22MK19MR27MT31MU30NL18NO15"
    "PK24PL28PS29PT25QA29RO24RS22SA24SC31SD18SE24SI19SK24SM27ST25SV28TL23TN24TR26UA29VA22VG24XK20";

/* An IBAN: its country's length and the ISO 13616 check (mod 97 == 1), spaces ignored. */
static bool iban(const char *s, size_t n) {
    char t[40];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') continue;
        if (m == sizeof t) return false;
        t[m++] = s[i];
    }
    bool known = false;
    for (const char *c = iban_lengths; *c && !known; c += 4) known = c[0] == t[0] && c[1] == t[1] && (size_t)atoi((char[]){c[2], c[3], 0}) == m;
    if (!known) return false;
    int rest = 0;
    for (size_t k = 0; k < m; k++) {
        char c = t[(k + 4) % m];
        if (isdigit((unsigned char)c)) rest = (rest * 10 + (c - '0')) % 97;
        else if (isupper((unsigned char)c)) rest = (rest * 100 + (c - 'A' + 10)) % 97;
        else return false;
    }
    return rest == 1;
}

/* Whether the word just before `from` (skipping ` =:#_-"'`) is one of `list` (`a,b,c`). */
static bool word_before_in(const char *text, size_t from, const char *list, size_t list_length) {
    size_t i = from;
    while (i > 0 && strchr(" =:#_-\"'", text[i - 1])) i--;
    size_t end = i;
    while (i > 0 && isalpha((unsigned char)text[i - 1])) i--;
    size_t n = end - i;
    if (n == 0 || n > 31) return false;
    for (const char *p = list, *stop = list + list_length; p < stop;) {
        size_t l = strcspn(p, ",");
        if (p + l > stop) l = (size_t)(stop - p);
        if (l == n && strncasecmp(p, text + i, n) == 0) return true;
        p += l + 1;
    }
    return false;
}

static bool starts_with_any(const char *s, size_t n, const char *list, size_t list_length) {
    for (const char *p = list, *stop = list + list_length; p < stop;) {
        size_t l = strcspn(p, ",");
        if (p + l > stop) l = (size_t)(stop - p);
        if (l <= n && strncmp(s, p, l) == 0) return true;
        p += l + 1;
    }
    return false;
}

/* One check word of length `length` on text[from..to). */
static bool check_one(const char *word, size_t length, const char *text, size_t size, size_t from, size_t to) {
    const char *s = text + from;
    size_t n = to - from;
#define IS(w) (length == sizeof w - 1 && strncmp(word, w, length) == 0)
#define HAS_PREFIX(w) (length > sizeof w - 1 && strncmp(word, w, sizeof w - 1) == 0)
    if (IS("none")) return true;
    if (IS("luhn")) return luhn(s, n, 0);
    if (IS("luhn15")) return luhn(s, n, 15);
    if (IS("iban_mod97")) return iban(s, n);
    if (IS("card_issuer")) return card_issuer(s, n);
    /* Glued to an identifier by `-` or `_` on either side (`ord-5922646438`, the first groups
       of a UUID `66028032-9823-4eba-…`): part of the id. */
    if (IS("not_in_identifier"))
        return !(from >= 2 && strchr("-_", text[from - 1]) && isalnum((unsigned char)text[from - 2])) &&
               !(to + 1 < size && strchr("-_", text[to]) && isalnum((unsigned char)text[to + 1]));
    if (HAS_PREFIX("not_prefix:")) return !starts_with_any(s, n, word + 11, length - 11);
    if (HAS_PREFIX("not_after:")) return !word_before_in(text, from, word + 10, length - 10);
    if (IS("no_alnum_before")) return from == 0 || !isalnum((unsigned char)text[from - 1]);
    if (IS("no_dotted_run")) {
        /* Part of a longer dotted number (a version 1.2.3.4.5) */
        if (from >= 2 && text[from - 1] == '.' && isdigit((unsigned char)text[from - 2])) return false;
        return !(to + 1 < size && text[to] == '.' && isdigit((unsigned char)text[to + 1]));
    }
    if (IS("not_unix_time")) {
        static const char times[] = "at,ts,t,time,timestamp,created,updated,modified,epoch,since,until,expires,expiry,date,when";
        return !(n == 10 && s[0] == '1' && word_before_in(text, from, times, sizeof times - 1));
    }
    if (HAS_PREFIX("ipv6_groups>=")) {
        int groups = 0;
        bool inside = false;
        for (size_t i = 0; i < n && s[i] != '.' && s[i] != '%'; i++) {
            bool hex = isxdigit((unsigned char)s[i]);
            groups += hex && !inside;
            inside = hex;
        }
        return groups >= atoi(word + 13) || memchr(s, '.', n) != NULL;
    }
#undef IS
#undef HAS_PREFIX
    return false; /* a word the table should not hold: the match is dropped, never guessed */
}

bool scrub_check(const char *check, const char *text, size_t size, size_t from, size_t to) {
    for (const char *c = check; *c;) {
        while (*c == ' ') c++;
        size_t length = strcspn(c, ";");
        if (!check_one(c, length, text, size, from, to)) return false;
        c += length + (c[length] == ';');
    }
    return true;
}

void scrub_group(const char *group, const char *text, size_t from, size_t to, size_t *replace_from, size_t *replace_to) {
    *replace_from = from;
    *replace_to = to;
    if (strncmp(group, "whole", 5) == 0) return;
    if (strncmp(group, "last:", 5) == 0) {
        size_t keep = (size_t)atoi(group + 5);
        if (keep < to - from) *replace_from = to - keep;
    } else if (strncmp(group, "first:", 6) == 0) {
        size_t skip = (size_t)atoi(group + 6);
        if (skip < to - from) *replace_from = from + skip;
    } else if (strcmp(group, "inner") == 0) {
        *replace_from = from + 1;
        *replace_to = to - 1;
    } else if (strcmp(group, "value") == 0 || strncmp(group, "after_last:", 11) == 0) {
        /* After the last separator: `= : " ' space tab >`, or the characters named. */
        const char *set = strcmp(group, "value") == 0 ? "=:\"'` \t>" : strcmp(group + 11, "space") == 0 ? " \t" : group + 11;
        for (size_t i = to; i > from; i--) {
            if (strchr(set, text[i - 1])) {
                *replace_from = i;
                break;
            }
        }
    } else if (strcmp(group, "assign_value") == 0 || strncmp(group, "after_first:", 12) == 0) {
        /* After the first `=` or `:` (after the first byte: a match may start at its boundary),
           and the spaces and quotes after it. */
        bool assign = strcmp(group, "assign_value") == 0;
        for (size_t i = from + assign; i < to; i++) {
            if (!strchr(assign ? "=:" : group + 12, text[i])) continue;
            for (i++; i < to && strchr(" \t\"'>=", text[i]); i++) {}
            *replace_from = i;
            break;
        }
    } else if (strcmp(group, "url_password") == 0 || strcmp(group, "url_userinfo") == 0) {
        /* `scheme://user:PASSWORD@` or `scheme://USERINFO@`. */
        const char *scheme = memmem(text + from, to - from, "://", 3);
        if (!scheme) return;
        size_t i = (size_t)(scheme - text) + 3;
        if (strcmp(group, "url_password") == 0) {
            while (i < to && text[i] != ':') i++;
            i++;
        }
        size_t end = i;
        while (end < to && text[end] != '@') end++;
        *replace_from = i;
        *replace_to = end;
    }
    if (*replace_from > *replace_to) *replace_from = *replace_to;
}
