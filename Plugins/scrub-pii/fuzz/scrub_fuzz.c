/* A property test for rh_scrub: random inputs built from the characters the matchers care
 * about, checked under AddressSanitizer for memory errors, for idempotence (scrubbing a
 * scrubbed text changes nothing), for the memo of clean texts (a text seen again is scrubbed
 * as the first time; rh_scrubber_apply_if_changed says unchanged exactly when it is), for
 * the saved rules (a scrubber that loads each rule's database from the cache folder on first
 * use scrubs as one that compiled them, and a saved database that was damaged is compiled
 * again, never loaded), for the stretches (scrubbing with each rule's
 * second scan over the stretches scan.c chooses equals scrubbing with each over the whole
 * text) and, on a quarter of them, for the backward start search and the cut tails (each
 * rule's matches are those the start-of-match scan of the rules as written finds, match for
 * match). Also: reverse.c reads every built-in rule, with the engine's shortest and longest
 * match; tail.c reads each tail's bytes as the engine does; every rule of bounded
 * length can be searched backwards, and one is, not with its start-of-match scan. The texts of
 * CORPUS (NUL-separated) are checked for idempotence, the stretches and the backward search,
 * and texts spliced from them (a fifth as many as the random inputs) for the backward search
 * and the cut tails. First, sort.c's sort against a stable one, and a line holding more matches
 * than a scan keeps on its stack against the whole-text scan.
 * Usage: scrub_fuzz ITERATIONS SEED EMPTY_FOLDER [CORPUS] */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cache.h"
#include "../engine.h"
#include "../rules.h"
#include "../scrub.h"
#include "patterns.h"

static const char *const pieces[] = {
    "a", "Z", "0", "1", "4", "9", " ", "-", ".", "@", "=", "&", ";", "_", "[", "]", "\t",
    "token=", "Bearer ", "bearer\t", "api_key=", "secret=", "[secret]", "[email]", "[card]", "[ip]",
    "4111 1111 1111 1111", "4111-1111-1111-1111", "378282246310005", "192.168.0.1", "255.255.255.255",
    "alice@example.com", "x.y@z.co", "@@", "..", "é", "\xff",
    /* around the breaks: what ends a value for some rules and not for others */
    "\n", "\"", "'", ",", "&", "/", ":", "#", "?", "(", ")", "%", "+", "Authorization: Basic ", "https://", "u:pw@", "/home/al ice",
    "ghp_", "0a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R", "sk-", "AKIA", "+49 30 1234567", "eyJhbGciOiJIUzI1NiJ9", "password: ",
    /* what the backward start search reads: prefixes inside the runs they start, runs as long
       as a repeat's bounds */
    "EAAA", "sq0atp-", "discord.com/api/webhooks/", "12345678901234567", ".atlasv1.", "eyJ", "xoxb-", "glpat-", "AIza",
    "T3BlbkFJ", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "2001:db8::", "fe80::1%",
};

/* A saved database, as damage left it. */
struct damaged {
    char path[4200];
    char *bytes;
    long size;
};

static char *read_file(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    char *bytes = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0 && (*size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (bytes = malloc((size_t)*size)) &&
        fread(bytes, 1, (size_t)*size, f) != (size_t)*size) {
        free(bytes);
        bytes = NULL;
    }
    if (f) fclose(f);
    return bytes;
}

/* Damages every saved database in `folder`, one in two with a byte flipped in the middle of
   its database, the others cut short (a torn write): what each file holds then. */
static size_t damage_saved(const char *folder, struct damaged *out, size_t cap) {
    DIR *dir = opendir(folder);
    size_t count = 0;
    for (struct dirent *entry; dir && count < cap && (entry = readdir(dir));) {
        if (strncmp(entry->d_name, "rules-", 6) != 0 || !strstr(entry->d_name, ".hsdb")) continue;
        struct damaged *file = &out[count];
        snprintf(file->path, sizeof file->path, "%s/%s", folder, entry->d_name);
        if (!(file->bytes = read_file(file->path, &file->size)) || file->size < 200) continue;
        if (count % 2 == 0) file->bytes[file->size / 2] ^= 0x10;
        else file->size -= 100;
        FILE *f = fopen(file->path, "wb");
        if (!f || fwrite(file->bytes, 1, (size_t)file->size, f) != (size_t)file->size) abort();
        fclose(f);
        count++;
    }
    if (dir) closedir(dir);
    return count;
}

/* Two scrubbers of every rule sharing a fresh cache folder: the first compiles and saves each
   rule's own database, the second finds them saved and loads them. Every saved database is
   damaged in between: the second must refuse each, compile it again and save it whole. Else
   it would scrub with a broken database (which this driver's checks and AddressSanitizer
   catch) or leave the file damaged (checked here). */
static struct rh_scrubber *saved_rules(const char *folder) {
    char error[512];
    struct rh_scrubber *compiling = rh_scrubber_new(NULL, 0, NULL, 0, folder, error, sizeof error);
    if (!compiling) {
        printf("no scrubber: %s\n", error);
        return NULL;
    }
    rh_scrubber_prepare_every_rule(compiling);
    rh_scrubber_free(compiling);
    static struct damaged files[512];
    size_t damaged = damage_saved(folder, files, sizeof files / sizeof *files);
    struct rh_scrubber *loading = rh_scrubber_new(NULL, 0, NULL, 0, folder, error, sizeof error);
    if (!loading) {
        printf("no scrubber from the saved rules: %s\n", error);
        return NULL;
    }
    /* Every rule's own database now, not when it first matches: each damaged file is read. */
    for (unsigned id = 0; id < loading->count; id++)
        for (int kind = 0; kind < SCRUB_OWN_KINDS; kind++) scrub_own(loading, id, (enum scrub_own)kind);
    for (size_t k = 0; k < damaged; k++) {
        long size = 0;
        char *now = read_file(files[k].path, &size);
        if (!now || (size == files[k].size && memcmp(now, files[k].bytes, (size_t)size) == 0)) {
            printf("a damaged saved database was loaded, not compiled again: %s\n", files[k].path);
            return NULL;
        }
        free(now);
        free(files[k].bytes);
    }
    if (damaged < 2) {
        printf("no saved databases to damage in %s\n", folder);
        return NULL;
    }
    return loading;
}

/* Inputs earlier runs found wanting, checked before the random ones. */
static const char *const found_before[] = {
    /* seed 7: `=[email]token=@` (the secret rule, dropped where it starts inside a mask) hid
       `token=@`, which ends where it ends: left for a second scrub. */
    "bearer\t_key==[email]token=@",
    "Zapi_key=[ip]Ztoken==0255.255.255.255[card]bearer\tapi_key==[email]192.168.0.1secret=a@@token=..@",
    /* scripts/sanitize, seed 7: the mask `[private_key]` followed by a space and 44 letters read
       as an IBM key's keyword, separator and value: found only by a second scrub. */
    ".atlasv1.u:pw@4111-1111-1111-1111\n-----BEGIN RSA PRIVATE KEY-----0-----BEGIN RSA PRIVATE KEY----- "
    "123456789012345674111-1111-1111-1111sq0atp-xoxb-+\xc3\xa9",
};

/* `scrubber` with its rule set compiled again from the patterns as they are written, every tail
   whole: the reference the cut rule set must find the same ends as. */
static void uncut(struct rh_scrubber *scrubber) {
    const char *patterns[512];
    unsigned flags[512] = {0}, ids[512];
    hs_compile_error_t *why = NULL;
    if (scrubber->count > 512) abort();
    for (unsigned k = 0; k < scrubber->count; k++) {
        patterns[k] = scrubber->rules[k].pattern;
        ids[k] = k;
        scrubber->rules[k].has_tail = false;
    }
    hs_free_database(scrubber->database);
    if (hs_compile_multi(patterns, flags, ids, (unsigned)scrubber->count, HS_MODE_BLOCK, NULL, &scrubber->database, &why) != HS_SUCCESS) abort();
}

/* Every built-in rule as it is written (no tail cut), its matches' starts found only by the
   start-of-match scan: over the stretches (`whole_text` false), what the backward start search
   and the cut tails must find, match for match; over the whole text, what scrubbing with
   stretches must equal. */
static struct rh_scrubber *reference_scrubber(bool whole_text) {
    char error[512];
    struct rh_scrubber *reference = rh_scrubber_new(NULL, 0, NULL, 0, NULL, error, sizeof error);
    if (!reference) {
        printf("no scrubber: %s\n", error);
        return NULL;
    }
    reference->whole_text = whole_text;
    reference->starts_only = !whole_text;
    uncut(reference);
    return reference;
}

static int by_rule(const void *a, const void *b) {
    const struct match *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    return (x->to > y->to) - (x->to < y->to);
}

/* Whether `scrubber` finds in `text` the matches `reference` finds (said when not). Their order
   may differ: the rules' runs come in the order of their first ends, and two rules' first ends
   at one byte come in the order of the rule set's reports, which a cut tail changes. */
static bool matches_alike(struct rh_scrubber *scrubber, struct rh_scrubber *reference, const char *text) {
    struct matches found = {0}, expected = {0};
    size_t size = strlen(text), k = 0;
    bool scanned = size == 0 || (scrub_scan(scrubber, text, size, &found) && scrub_scan(reference, text, size, &expected));
    if (found.count > 1) qsort(found.items, found.count, sizeof *found.items, by_rule);
    if (expected.count > 1) qsort(expected.items, expected.count, sizeof *expected.items, by_rule);
    while (scanned && k < found.count && k < expected.count && found.items[k].id == expected.items[k].id &&
           found.items[k].from == expected.items[k].from && found.items[k].to == expected.items[k].to)
        k++;
    bool alike = scanned && k == found.count && k == expected.count;
    if (!alike) {
        printf("the backward start search or the cut tails differ from the start-of-match scan of the whole rules:\n  input: [%s]\n", text);
        if (k < found.count) printf("  found:    %s [%zu, %zu)\n", scrubber->rules[found.items[k].id].kind, found.items[k].from, found.items[k].to);
        if (k < expected.count)
            printf("  expected: %s [%zu, %zu)\n", reference->rules[expected.items[k].id].kind, expected.items[k].from, expected.items[k].to);
    }
    free(found.items);
    free(expected.items);
    return alike;
}

static int differs(const char *what, const char *input, const char *once, const char *other);

/* scrub_sort against an insertion sort (stable) on random runs of matches, some longer than the
   room it keeps on the stack, ordered by start alone so that ties show whether it is stable. */
static int by_from(const void *a, const void *b) {
    const struct match *x = a, *y = b;
    return (x->from > y->from) - (x->from < y->from);
}

static bool sorts_stably(void) {
    struct match items[300], expected[300];
    for (int round = 0; round < 2000; round++) {
        size_t count = (size_t)(rand() % 300), runs = 1 + (size_t)(rand() % 6);
        for (size_t k = 0; k < count; k++) /* `runs` rising runs, with repeated starts */
            items[k] = (struct match){(unsigned)k, (k * runs / (count ? count : 1)) * 7 + (size_t)(rand() % 40) / 3, 0, false};
        for (size_t k = 0; k < count; k++) {
            size_t at = k;
            for (; at > 0 && by_from(&expected[at - 1], &items[k]) > 0; at--) expected[at] = expected[at - 1];
            expected[at] = items[k];
        }
        scrub_sort(items, count, by_from);
        for (size_t k = 0; k < count; k++)
            if (items[k].id != expected[k].id) {
                printf("scrub_sort: %zu matches in %zu runs, item %zu: id %u where a stable sort puts %u\n", count, runs, k, items[k].id,
                       expected[k].id);
                return false;
            }
    }
    return true;
}

/* One line holding more matches than any scan keeps on the stack (sort.c, scan.c, engine.c):
   scrubbed whole, and as when each rule's second scan covers the whole text. */
static bool many_matches_scrub_alike(struct rh_scrubber *reference) {
    char text[300 * 40];
    size_t length = 0;
    for (unsigned k = 0; k < 300; k++)
        length += (size_t)snprintf(text + length, sizeof text - length, "user%u@example.com 10.0.%u.%u ", k, k / 200, k % 200);
    char *once = rh_scrub(text), *whole = rh_scrubber_apply(reference, text, NULL);
    bool alike = once && whole && strcmp(once, whole) == 0 && !strstr(once, "example.com") && !strstr(once, "10.0.");
    if (!alike) differs("300 matches on one line: not all scrubbed, or not as scanning the whole text", text, once, whole);
    free(once);
    free(whole);
    return alike;
}

static int differs(const char *what, const char *input, const char *once, const char *other) {
    printf("%s:\n  input: [%s]\n  once:  [%s]\n  then:  [%s]\n", what, input, once, other);
    return 1;
}

/* The rule of `kind` whose pattern starts with `start`, in `scrubber`. */
static unsigned rule_id(const struct rh_scrubber *scrubber, const char *kind, const char *start) {
    for (unsigned id = 0; id < scrubber->count; id++)
        if (strcmp(scrubber->rules[id].kind, kind) == 0 && strncmp(scrubber->rules[id].pattern, start, strlen(start)) == 0) return id;
    abort();
}

/* Which of its own databases a rule was scanned with, in a scrubber that made none before: a
   rule whose matches have a bounded length (a Square token) only the backward search's, one
   without a bound (a GitLab token) only the start-of-match scan's. Else the comparisons with the
   start-of-match scan would hold without the backward search ever running. */
static bool bounded_rules_search_backward(void) {
    char error[512];
    struct rh_scrubber *fresh = rh_scrubber_new(NULL, 0, NULL, 0, NULL, error, sizeof error);
    if (!fresh) abort();
    char *scrubbed = rh_scrubber_apply(fresh, "sent EAAA_XZHqChs2xvLOfXXuGQIfOkbNaxWXhlpAZ4GTU2f4OCIdWfZwiCkz-8UI0i6 and glpat-abcdefghij0123456789xy", NULL);
    const struct compiled *square = &fresh->rules[rule_id(fresh, "square_token", "\\b(?:EAAA")];
    const struct compiled *gitlab = &fresh->rules[rule_id(fresh, "gitlab_token", "glpat-")];
    bool as_expected = scrubbed && strcmp(scrubbed, "sent [square_token] and [gitlab_token]") == 0 && square->own[SCRUB_REVERSED] &&
                       square->own[SCRUB_ANCHORED] && !square->own[SCRUB_STARTS] && gitlab->own[SCRUB_STARTS] && !gitlab->own[SCRUB_REVERSED];
    if (!as_expected)
        printf("the backward start search did not run as it should: [%s]; square_token's databases: starts %d, reversed %d, anchored %d; "
               "gitlab_token's: starts %d, reversed %d\n", scrubbed ? scrubbed : "(null)", !!square->own[SCRUB_STARTS], !!square->own[SCRUB_REVERSED],
               !!square->own[SCRUB_ANCHORED], !!gitlab->own[SCRUB_STARTS], !!gitlab->own[SCRUB_REVERSED]);
    /* And every built-in rule of bounded length can be searched backwards: its pattern read
       backwards and anchored compile (else it would keep the start-of-match scan unsaid). */
    for (unsigned id = 0; as_expected && id < fresh->count; id++) {
        const struct compiled *rule = scrub_measured(fresh, id);
        if (rule->fixed || rule->width == SIZE_MAX) continue;
        as_expected = scrub_own(fresh, id, SCRUB_REVERSED) && scrub_own(fresh, id, SCRUB_ANCHORED);
        if (!as_expected) printf("rule %u (%s) has a bounded length but cannot be searched backwards: %s\n", id, rule->kind, rule->pattern);
    }
    free(scrubbed);
    rh_scrubber_free(fresh);
    return as_expected;
}

/* The memo's hash against the SipHash reference's 128-bit vectors (key 00..0f, input 00 01 ..
 * of each length). */
static bool siphash_matches_reference(void) {
    static const struct {
        size_t length;
        const char *hex;
    } vectors[] = {
        {0, "a3817f04ba25a8e66df67214c7550293"},
        {1, "da87c1d86b99af44347659119b22fc45"},
        {8, "3b62a9ba6258f5610f83e264f31497b4"},
        {15, "5493e99933b0a8117e08ec0f97cfc3d9"},
        {63, "5150d1772f50834a503e069a973fbd7c"},
    };
    uint64_t key[2];
    char input[64];
    for (int k = 0; k < 64; k++) input[k] = (char)k;
    for (int k = 0; k < 16; k++) ((uint8_t *)key)[k] = (uint8_t)k;
    for (size_t v = 0; v < sizeof vectors / sizeof *vectors; v++) {
        uint8_t out[16];
        char hex[33];
        scrub_siphash128(key, input, vectors[v].length, out);
        for (int k = 0; k < 16; k++) snprintf(hex + 2 * k, 3, "%02x", out[k]);
        if (strcmp(hex, vectors[v].hex) != 0) {
            printf("the memo's SipHash of %zu bytes is %s, not the reference's %s\n", vectors[v].length, hex, vectors[v].hex);
            return false;
        }
    }
    return true;
}

/* Each NUL-separated text of the file at `path`: scrubbed twice as once, and as `reference`
   scrubs it; its matches found by `scrubber` as `starts` finds them. Then `splices` texts made of
   up to four slices of them (a token cut anywhere, glued to another): their matches alike too.
   The number of texts, or -1 (said why). */
static long corpus_scrubs_alike(const char *path, struct rh_scrubber *reference, struct rh_scrubber *scrubber, struct rh_scrubber *starts,
                                long splices) {
    long size = 0, count = 0;
    char *texts = read_file(path, &size);
    if (!texts || texts[size - 1] != '\0') {
        printf("no NUL-separated texts in %s\n", path);
        return -1;
    }
    for (long at = 0; at < size; at += (long)strlen(texts + at) + 1, count++) {
        char *once = rh_scrub(texts + at), *twice = once ? rh_scrub(once) : NULL;
        char *whole = rh_scrubber_apply(reference, texts + at, NULL);
        int failed = 0;
        if (!once || !twice || strcmp(once, twice) != 0) failed = differs("a corpus text not idempotent", texts + at, once, twice);
        else if (!whole || strcmp(once, whole) != 0) failed = differs("a corpus text not the same as scanning the whole text", texts + at, once, whole);
        else if (!matches_alike(scrubber, starts, texts + at)) failed = 1;
        free(once);
        free(twice);
        free(whole);
        if (failed) return -1;
    }
    char splice[1024];
    for (long n = 0; n < splices; n++) {
        size_t length = 0;
        for (int slices = 1 + rand() % 4; slices > 0; slices--) {
            long from = rand() % (size - 1), most = 1 + rand() % 160;
            size_t take = strnlen(texts + from, (size_t)most);
            if (length + take + 1 > sizeof splice) break;
            memcpy(splice + length, texts + from, take);
            length += take;
        }
        splice[length] = '\0';
        if (!matches_alike(scrubber, starts, splice)) return -1;
    }
    free(texts);
    return count;
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 10000;
    srand(argc > 2 ? (unsigned)atol(argv[2]) : 1u);
    if (argc <= 3) {
        printf("usage: scrub_fuzz ITERATIONS SEED EMPTY_FOLDER [CORPUS]\n");
        return 2;
    }
    if (!siphash_matches_reference() || !patterns_read_as_the_engine_reads() || !bounded_rules_search_backward())
        return 1;
    struct rh_scrubber *loading = saved_rules(argv[3]), *reference = reference_scrubber(true),
                       *starts = reference_scrubber(false);
    if (!loading || !reference || !starts || !sorts_stably() || !many_matches_scrub_alike(reference)) return 1;
    long splices = iterations / 5, corpus = argc > 4 ? corpus_scrubs_alike(argv[4], reference, loading, starts, splices) : 0;
    if (corpus < 0) return 1;
    char input[512];
    size_t known = sizeof found_before / sizeof *found_before;
    for (long n = 0; n < iterations + (long)known; n++) {
        size_t length = 0;
        int count = n < (long)known ? 0 : rand() % 24;
        snprintf(input, sizeof input, "%s", n < (long)known ? found_before[n] : "");
        for (int k = 0; k < count; k++) {
            const char *piece = pieces[rand() % (sizeof pieces / sizeof *pieces)];
            size_t size = strlen(piece);
            if (length + size + 1 > sizeof input) break;
            memcpy(input + length, piece, size + 1);
            length += size;
        }
        char *once = rh_scrub(input);
        char *twice = once ? rh_scrub(once) : NULL;
        char *loaded = rh_scrubber_apply_remembering(loading, input, NULL);
        char *again = rh_scrubber_apply_remembering(loading, input, NULL);
        char *whole = rh_scrubber_apply(reference, input, NULL);
        bool unchanged = false;
        char *if_changed = rh_scrubber_apply_if_changed(loading, input, NULL, &unchanged);
        int failed = 0;
        if (!once || !twice || strcmp(once, twice) != 0) failed = differs("not idempotent", input, once, twice);
        else if (!whole || strcmp(once, whole) != 0) failed = differs("not the same as scanning the whole text", input, once, whole);
        else if (!loaded || strcmp(once, loaded) != 0) failed = differs("not the same from saved rules", input, once, loaded);
        else if (!again || strcmp(once, again) != 0) failed = differs("not the same when seen again", input, once, again);
        else if (n % 4 == 0 && !matches_alike(loading, starts, input)) failed = 1;
        else if (unchanged ? if_changed || strcmp(once, input) != 0 : !if_changed || strcmp(once, if_changed) != 0)
            failed = differs(unchanged ? "said unchanged, or copied" : "said changed, not as the first time", input, once, if_changed);
        free(once);
        free(twice);
        free(again);
        free(loaded);
        free(whole);
        free(if_changed);
        if (failed) return 1;
    }
    rh_scrubber_free(loading);
    rh_scrubber_free(reference);
    rh_scrubber_free(starts);
    printf("%ld inputs: no memory errors, idempotent, the same when seen again, from saved rules (each damaged, then compiled again) "
           "and as scanning the whole text\n", iterations);
    if (argc > 4)
        printf("%ld corpus texts: idempotent and the same as scanning the whole text; these and %ld texts spliced from them: "
               "the backward start search and the cut tails find the matches of the rules as written\n", corpus, splices);
    return 0;
}
