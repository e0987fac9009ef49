#include "scrub.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <regex.h>

/* A growing output buffer. */
struct out {
    char *data;
    size_t length, capacity;
    bool failed;
};

static void put(struct out *o, const char *text, size_t length) {
    if (o->failed) return;
    if (o->length + length + 1 > o->capacity) {
        size_t capacity = (o->capacity + length + 1) * 2;
        char *data = realloc(o->data, capacity);
        if (!data) { o->failed = true; return; }
        o->data = data;
        o->capacity = capacity;
    }
    memcpy(o->data + o->length, text, length);
    o->length += length;
    o->data[o->length] = '\0';
}

static void puts_(struct out *o, const char *text) { put(o, text, strlen(text)); }

static bool is_word(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* --- e-mail: local@domain.tld ------------------------------------------------------- */

/* strchr finds the terminator too, so '\0' is ruled out first. */
static bool is_one_of(char c, const char *set) { return c != '\0' && strchr(set, c) != NULL; }

static bool is_local(char c) { return isalnum((unsigned char)c) || is_one_of(c, "._%+-"); }
static bool is_domain(char c) { return isalnum((unsigned char)c) || c == '-'; }

/* Length of an e-mail address starting at s, or 0. */
static size_t match_email(const char *s) {
    size_t i = 0;
    while (is_local(s[i])) i++;
    if (i == 0 || s[i] != '@') return 0;
    i++;
    size_t labels = 0, last_start = i, end = 0;
    for (;;) {
        size_t start = i;
        while (is_domain(s[i])) i++;
        if (i == start) break;
        labels++;
        last_start = start;
        end = i;
        if (s[i] == '.' && is_domain(s[i + 1])) { i++; continue; }
        break;
    }
    if (labels < 2) return 0;
    /* The top-level label is letters only, two or more. */
    if (end - last_start < 2) return 0;
    for (size_t k = last_start; k < end; k++) if (!isalpha((unsigned char)s[k])) return 0;
    return end;
}

/* --- IPv4: four octets of at most 255 ------------------------------------------------ */

static size_t match_ipv4(const char *s) {
    size_t i = 0;
    for (int octet = 0; octet < 4; octet++) {
        if (!isdigit((unsigned char)s[i])) return 0;
        int value = 0, digits = 0;
        while (isdigit((unsigned char)s[i]) && digits < 4) { value = value * 10 + (s[i] - '0'); i++; digits++; }
        if (digits > 3 || value > 255) return 0;
        if (octet < 3) {
            if (s[i] != '.') return 0;
            i++;
        }
    }
    /* Not part of a longer dotted or digit run (a version string like 1.2.3.4.5). */
    if (isdigit((unsigned char)s[i]) || (s[i] == '.' && isdigit((unsigned char)s[i + 1]))) return 0;
    return i;
}

/* --- cards: 13-19 digits, single spaces or dashes between, passing Luhn --------------- */

static bool luhn(const char *digits, size_t count) {
    int sum = 0;
    for (size_t k = 0; k < count; k++) {
        int d = digits[count - 1 - k] - '0';
        if (k % 2 == 1) { d *= 2; if (d > 9) d -= 9; }
        sum += d;
    }
    return sum % 10 == 0;
}

/* Length of digits joined by single spaces or dashes. */
static size_t digit_run(const char *s) {
    size_t i = 0, end = 0;
    while (isdigit((unsigned char)s[i])) {
        while (isdigit((unsigned char)s[i])) i++;
        end = i;
        if ((s[i] == ' ' || s[i] == '-') && isdigit((unsigned char)s[i + 1])) i++;
    }
    return end;
}

/* Whether a number of `count` digits could be a card by its issuer prefix (IIN): Visa 4
   (13, 16-19), Mastercard 51-55 and 2221-2720, Amex 34/37, Diners 30/36/38, Discover and
   UnionPay 6, JCB 35 and 1800/2131 (15), Maestro 50 and 56-69 (12-19). A barcode or an id
   that happens to pass Luhn seldom also has a card's prefix and length. */
static bool issuer_prefix(const char *d, size_t count) {
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

static size_t match_card(const char *s) {
    char digits[20];
    size_t count = 0, i = 0, end = 0;
    while (isdigit((unsigned char)s[i])) {
        if (count == 19) return 0;  /* a longer digit run is not a card */
        digits[count++] = s[i++];
        end = i;
        if ((s[i] == ' ' || s[i] == '-') && isdigit((unsigned char)s[i + 1])) i++;
    }
    /* A card ends where a word ends: not the digits of a UUID or hex id ("…-2651-4ffb"). */
    if (is_word(s[end])) return 0;
    if (count < 12 || !luhn(digits, count) || !issuer_prefix(digits, count)) return 0;
    return end;
}

/* --- secrets: "Bearer <token>" and <name>key=, token=, secret=, password= ------------ */

static bool is_token(char c) { return isalnum((unsigned char)c) || is_one_of(c, "-._~+/="); }
static bool ends_value(char c) { return c == '\0' || isspace((unsigned char)c) || is_one_of(c, "&,;\"'"); }

static bool has_prefix_ci(const char *s, const char *prefix) {
    for (; *prefix; s++, prefix++) if (tolower((unsigned char)*s) != *prefix) return false;
    return true;
}

/* "Bearer <token>": length of the keyword and spaces (kept) and of the token (replaced). */
static bool match_bearer(const char *s, size_t *keep, size_t *length) {
    if (!has_prefix_ci(s, "bearer") || !isspace((unsigned char)s[6])) return false;
    size_t i = 6;
    while (s[i] == ' ' || s[i] == '\t') i++;
    size_t start = i;
    while (is_token(s[i])) i++;
    if (i == start || s[start] == '[') return false;
    *keep = start;
    *length = i;
    return true;
}

static const char *const secret_names[] = {"key", "token", "secret", "password"};

/* "<name>=<value>" where the name is a secret's: the name and '=' are kept. */
static bool match_assignment(const char *s, size_t *keep, size_t *length) {
    if (!isalpha((unsigned char)s[0]) && s[0] != '_') return false;  /* names start like identifiers */
    size_t i = 0;
    while (is_word(s[i]) || s[i] == '-') i++;
    if (i == 0 || s[i] != '=') return false;
    /* The name is one of secret_names, or ends with one after '_', '-' or a camel-case
       hump (api_key, client-secret, accessToken), so "monkey=" stays. */
    bool secret = false;
    for (size_t k = 0; k < sizeof secret_names / sizeof *secret_names; k++) {
        size_t n = strlen(secret_names[k]), p = i - n;
        if (i < n || !has_prefix_ci(s + p, secret_names[k])) continue;
        if (p == 0 || s[p - 1] == '_' || s[p - 1] == '-' ||
            (isupper((unsigned char)s[p]) && islower((unsigned char)s[p - 1])))
            secret = true;
    }
    if (!secret) return false;
    size_t start = i + 1, end = start;
    while (!ends_value(s[end])) end++;
    if (end == start || strncmp(s + start, "[secret]", 8) == 0) return false;
    *keep = start;
    *length = end;
    return true;
}

/* --- tokens: JWTs (eyJ….….…) and AWS access key ids (AKIA/ASIA + 16) ------------------- */

static bool is_base64url(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

static size_t match_jwt(const char *s) {
    if (strncmp(s, "eyJ", 3) != 0) return 0;
    size_t i = 0, dots = 0;
    for (;;) {
        size_t start = i;
        while (is_base64url(s[i])) i++;
        if (i == start && dots < 2) return 0;
        if (s[i] != '.' || dots == 2) break;
        dots++;
        i++;
    }
    return dots == 2 && i >= 20 ? i : 0;
}

static size_t match_aws_key(const char *s) {
    if (strncmp(s, "AKIA", 4) != 0 && strncmp(s, "ASIA", 4) != 0) return 0;
    for (size_t i = 4; i < 20; i++)
        if (!isupper((unsigned char)s[i]) && !isdigit((unsigned char)s[i])) return 0;
    return is_word(s[20]) ? 0 : 20;
}

/* --- IPv6: hex groups joined by ':' (8 of them, or fewer around one '::') -------------- */

static size_t match_ipv6(const char *s) {
    size_t i = 0, groups = 0, end = 0;
    bool compressed = false;
    if (s[0] == ':' && s[1] == ':') { compressed = true; i = 2; end = 2; }
    for (;;) {
        size_t start = i;
        while (isxdigit((unsigned char)s[i]) && i - start < 5) i++;
        if (i == start || i - start > 4) break;
        groups++;
        end = i;
        if (s[i] != ':') break;
        if (s[i + 1] == ':') {
            if (compressed) break;
            compressed = true;
            i += 2;
            end = i;
        } else {
            i++;
        }
    }
    /* Not "a::b" in code, nor a time of day: a full address, or at least 3 groups around "::". */
    bool full = groups == 8 && !compressed;
    if (!(full || (compressed && groups >= 3 && groups < 8))) return 0;
    if (isxdigit((unsigned char)s[end]) || s[end] == ':' || is_word(s[end])) return 0;
    return end;
}

/* --- phone numbers: +CC groups, (NNN) NNN-NNNN, NNN-NNN-NNNN ------------------------ */

/* Digits in groups joined by single spaces, dashes or dots; counts the digits. */
static size_t digit_groups(const char *s, size_t *digits) {
    size_t i = 0, end = 0;
    *digits = 0;
    while (isdigit((unsigned char)s[i])) {
        while (isdigit((unsigned char)s[i])) { i++; (*digits)++; }
        end = i;
        if (is_one_of(s[i], " -.") && isdigit((unsigned char)s[i + 1])) i++;
    }
    return end;
}

/* Ten digits alone: not part of a longer run, a word or a decimal. */
static bool is_bare_ten(const char *s) {
    size_t k = 0;
    while (isdigit((unsigned char)s[k])) k++;
    return k == 10 && !is_word(s[10]) && !(s[10] == '.' && isdigit((unsigned char)s[11]));
}

static size_t match_phone(const char *s) {
    size_t digits = 0, length = 0;
    /* +CC groups, or the same after the international prefix 00 in three groups at least
       (001-201-555-0123; 0012345678905 is a barcode, not a number to dial). */
    if ((s[0] == '+' && isdigit((unsigned char)s[1])) || (s[0] == '0' && s[1] == '0' && s[2] != '0' && isdigit((unsigned char)s[2]))) {
        size_t skip = s[0] == '+' ? 1 : 2;
        length = skip + digit_groups(s + skip, &digits);
        size_t separators = 0;
        for (size_t k = skip; k < length; k++) separators += !isdigit((unsigned char)s[k]);
        return digits >= 8 && digits <= 15 && (skip == 1 || separators >= 2) ? length : 0;
    }
    /* Ten bare digits: a national number (the caller keeps Unix seconds, which look so). */
    if (is_bare_ten(s)) return 10;
    if (s[0] == '(' && isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) && isdigit((unsigned char)s[3]) && s[4] == ')') {
        size_t i = s[5] == ' ' ? 6 : 5;
        length = digit_groups(s + i, &digits);
        return digits == 7 ? i + length : 0;
    }
    /* NNN-NNN-NNNN (or with dots), one separator throughout; read no further than the text. */
    if (!isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[2])) return 0;
    char separator = s[3];
    if (!is_one_of(separator, "-.")) return 0;
    for (size_t k = 0; k < 12; k++) {
        bool want_separator = k == 3 || k == 7;
        if (want_separator ? s[k] != separator : !isdigit((unsigned char)s[k])) return 0;
    }
    return isdigit((unsigned char)s[12]) || (is_one_of(s[12], "-.") && isdigit((unsigned char)s[13])) ? 0 : 12;
}

static const char *const kind_names[RH_SCRUB_KINDS] = {
    "email", "card", "ipv4", "ipv6", "phone", "jwt", "aws_key", "bearer", "secret",
};
static const char *const masks[RH_SCRUB_KINDS] = {
    "[email]", "[card]", "[ip]", "[ip]", "[phone]", "[secret]", "[secret]", "[secret]", "[secret]",
};

const char *rh_scrub_kind_name(enum rh_scrub_kind kind) { return kind < RH_SCRUB_KINDS ? kind_names[kind] : "?"; }

/* What replaces value[0..length) of `kind`. */
static void replace(struct out *o, enum rh_scrub_kind kind, const char *value, size_t length, const struct rh_scrub_style *style) {
    switch (style->method) {
    case RH_SCRUB_REMOVE: return;
    case RH_SCRUB_HASH:
        if (style->pseudonym) {
            char hex[13];
            style->pseudonym(style->context, value, length, hex);
            puts_(o, "[");
            puts_(o, kind_names[kind]);
            puts_(o, ":");
            put(o, hex, 12);
            puts_(o, "]");
            return;
        }
        break;  /* no key: masked, never left */
    case RH_SCRUB_MASK: break;
    }
    puts_(o, masks[kind]);
}

/* Whether the word before position i is one a time follows (`at`, `ts=`, `"timestamp": `):
   ten bare digits starting with 1 after it are Unix seconds, not a phone number. */
static bool after_time_word(const char *text, size_t i) {
    static const char *const words[] = {"at", "time", "ts", "timestamp", "since", "until", "epoch", "expires", "expiry",
                                        "created", "updated", "modified", "date", "when", "t"};
    size_t end = i;
    while (end > 0 && is_one_of(text[end - 1], " =:\"'\t")) end--;
    if (end == i) return false;
    size_t start = end;
    while (start > 0 && (isalpha((unsigned char)text[start - 1]) || text[start - 1] == '_')) start--;
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
        size_t n = strlen(words[k]);
        if (end - start == n && strncasecmp(text + start, words[k], n) == 0) return true;
    }
    /* A key that ends in a time word: created_at, updatedAt, last_seen_ts. */
    return end - start > 3 && (strncasecmp(text + end - 3, "_at", 3) == 0 || strncmp(text + end - 2, "At", 2) == 0 ||
                               strncasecmp(text + end - 3, "_ts", 3) == 0);
}

/* Whether the word before position i (one space between) says an id or a version follows:
   "version 1.2.3.4" is a version, not an address; "build 6425210041" or "id 1234567890" (ten
   bare digits) not a phone number. */
static bool after_id_word(const char *text, size_t i) {
    static const char *const words[] = {"version", "ver", "v", "build", "release", "id", "order", "ref", "invoice", "ticket",
                                        "pid", "tid"};
    if (i < 2 || text[i - 1] != ' ') return false;
    size_t end = i - 1, start = end;
    while (start > 0 && isalpha((unsigned char)text[start - 1])) start--;
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
        size_t n = strlen(words[k]);
        if (end - start == n && strncasecmp(text + start, words[k], n) == 0) return true;
    }
    return false;
}

/* The length of a pseudonym `[kind:<12 hex>]` at s, or 0. */
static size_t pseudonym_length(const char *s) {
    if (s[0] != '[') return 0;
    for (size_t k = 0; k < RH_SCRUB_KINDS; k++) {
        size_t n = strlen(kind_names[k]);
        if (strncmp(s + 1, kind_names[k], n) != 0 || s[1 + n] != ':') continue;
        size_t i = 2 + n;
        for (size_t d = 0; d < 12; d++, i++) if (!isxdigit((unsigned char)s[i])) return 0;
        return s[i] == ']' ? i + 1 : 0;
    }
    return 0;
}

char *rh_scrub(const char *text) { return rh_scrub_styled(text, NULL); }

char *rh_scrub_styled(const char *text, const struct rh_scrub_style *given) {
    static const struct rh_scrub_style masked = {0, RH_SCRUB_MASK, NULL, NULL};
    const struct rh_scrub_style *style = given ? given : &masked;
#define ON(kind) ((style->disabled & (1u << (kind))) == 0)
    struct out o = {NULL, 0, 0, false};
    put(&o, "", 0);
    size_t i = 0;
    /* Right after a replacement counts as a boundary, as the ']' that ends it will on the
       next run: that keeps the scrubber idempotent. */
    bool replaced = false;
    while (text[i]) {
        const char *s = text + i;
        bool boundary = i == 0 || replaced || !is_word(text[i - 1]);
        bool digit_boundary = boundary && (i == 0 || replaced || (text[i - 1] != '.' && text[i - 1] != '-'));
        size_t before = o.length;
        size_t keep = 0, length = 0;
        if ((length = pseudonym_length(s)) > 0) {
            put(&o, s, length);  /* a pseudonym written earlier: never scanned again (idempotent) */
        } else if (ON(RH_SCRUB_JWT) && boundary && (length = match_jwt(s)) > 0) {
            replace(&o, RH_SCRUB_JWT, s, length, style);
        } else if (ON(RH_SCRUB_AWS_KEY) && boundary && (length = match_aws_key(s)) > 0) {
            replace(&o, RH_SCRUB_AWS_KEY, s, length, style);
        } else if (ON(RH_SCRUB_IPV6) && boundary && (i == 0 || text[i - 1] != ':') && (length = match_ipv6(s)) > 0) {
            replace(&o, RH_SCRUB_IPV6, s, length, style);
        } else if (ON(RH_SCRUB_CARD) && digit_boundary && (length = match_card(s)) > 0) {
            replace(&o, RH_SCRUB_CARD, s, length, style);
        } else if (ON(RH_SCRUB_PHONE) && digit_boundary && !(is_bare_ten(s) && after_id_word(text, i)) &&
                   !(s[0] == '1' && is_bare_ten(s) && after_time_word(text, i)) && (length = match_phone(s)) > 0) {
            replace(&o, RH_SCRUB_PHONE, s, length, style);
        } else if (ON(RH_SCRUB_BEARER) && boundary && match_bearer(s, &keep, &length)) {
            put(&o, s, keep);
            replace(&o, RH_SCRUB_BEARER, s + keep, length - keep, style);
        } else if (ON(RH_SCRUB_SECRET) && boundary && match_assignment(s, &keep, &length)) {
            put(&o, s, keep);
            replace(&o, RH_SCRUB_SECRET, s + keep, length - keep, style);
        } else if (ON(RH_SCRUB_EMAIL) && boundary && is_local(*s) && (length = match_email(s)) > 0) {
            replace(&o, RH_SCRUB_EMAIL, s, length, style);
        } else if (ON(RH_SCRUB_IPV4) && digit_boundary && !after_id_word(text, i) && (length = match_ipv4(s)) > 0) {
            replace(&o, RH_SCRUB_IPV4, s, length, style);
        } else if (digit_boundary && isdigit((unsigned char)*s)) {
            /* Not a card: copy the whole run of digit groups, so no card is found inside it. */
            length = digit_run(s);
            put(&o, s, length);
        } else {
            /* Skip a whole word or digit run at once, so matches start only at boundaries. */
            length = 1;
            if (is_word(*s)) while (is_word(s[length])) length++;
            put(&o, s, length);
        }
        i += length;
        replaced = o.length - before != length || memcmp(o.data + before, s, length) != 0;
    }
#undef ON
    if (o.failed) { free(o.data); return NULL; }
    return o.data;
}

/* The length of a replacement written earlier at s (`[word]` or `[word:<12 hex>]`), or 0. */
static size_t written_token(const char *s) {
    if (s[0] != '[') return 0;
    size_t i = 1;
    while (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-') i++;
    if (i == 1) return 0;
    if (s[i] == ':') {
        size_t start = ++i;
        while (isxdigit((unsigned char)s[i])) i++;
        if (i - start != 12) return 0;
    }
    return s[i] == ']' ? i + 1 : 0;
}

/* One stretch of text between replacements: each match of `pattern` replaced. */
static void replace_matches(struct out *o, const char *text, size_t length, const char *name, const regex_t *pattern,
                            const struct rh_scrub_style *style) {
    char *piece = malloc(length + 1);
    if (!piece) { o->failed = true; return; }
    memcpy(piece, text, length);
    piece[length] = '\0';
    const char *at = piece;
    regmatch_t match;
    int flags = 0;
    while (*at && regexec(pattern, at, 1, &match, flags) == 0) {
        if (match.rm_eo <= match.rm_so) {  /* an empty match: step over one byte */
            put(o, at, 1);
            at++;
        } else {
            put(o, at, (size_t)match.rm_so);
            if (style->method == RH_SCRUB_HASH && style->pseudonym) {
                char hex[13];
                style->pseudonym(style->context, at + match.rm_so, (size_t)(match.rm_eo - match.rm_so), hex);
                puts_(o, "[");
                puts_(o, name);
                puts_(o, ":");
                put(o, hex, 12);
                puts_(o, "]");
            } else if (style->method != RH_SCRUB_REMOVE) {
                puts_(o, "[");
                puts_(o, name);
                puts_(o, "]");
            }
            at += match.rm_eo;
        }
        flags = REG_NOTBOL;
    }
    puts_(o, at);
    free(piece);
}

char *rh_scrub_pattern(const char *text, const char *name, const regex_t *pattern, const struct rh_scrub_style *given) {
    static const struct rh_scrub_style masked = {0, RH_SCRUB_MASK, NULL, NULL};
    const struct rh_scrub_style *style = given ? given : &masked;
    struct out o = {NULL, 0, 0, false};
    put(&o, "", 0);
    /* Replacements written before (`[email]`, `[ticket:3f9a…]`) are never matched again: the
       result is idempotent whatever the pattern. */
    size_t start = 0, i = 0;
    while (text[i]) {
        size_t token = written_token(text + i);
        if (token == 0) { i++; continue; }
        replace_matches(&o, text + start, i - start, name, pattern, style);
        put(&o, text + i, token);
        i += token;
        start = i;
    }
    replace_matches(&o, text + start, i - start, name, pattern, style);
    if (o.failed) { free(o.data); return NULL; }
    return o.data;
}
