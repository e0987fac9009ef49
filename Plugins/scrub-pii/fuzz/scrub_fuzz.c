/* A property test for rh_scrub: random inputs built from the characters the matchers care
 * about, checked under AddressSanitizer for memory errors, for idempotence (scrubbing a
 * scrubbed text changes nothing), for the memo of clean texts (a text seen again is scrubbed
 * as the first time) and for the saved rules (a scrubber that loads each rule's database from
 * the cache folder on first use scrubs as one that compiled them). Usage: scrub_fuzz ITERATIONS SEED EMPTY_FOLDER */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../scrub.h"

static const char *const pieces[] = {
    "a", "Z", "0", "1", "4", "9", " ", "-", ".", "@", "=", "&", ";", "_", "[", "]", "\t",
    "token=", "Bearer ", "bearer\t", "api_key=", "secret=", "[secret]", "[email]", "[card]", "[ip]",
    "4111 1111 1111 1111", "4111-1111-1111-1111", "378282246310005", "192.168.0.1", "255.255.255.255",
    "alice@example.com", "x.y@z.co", "@@", "..", "é", "\xff",
};

/* Two scrubbers of every rule sharing a fresh cache folder: the first compiles and saves each
   rule's own database, the second finds them saved and loads each when its rule first matches. */
static struct rh_scrubber *saved_rules(const char *folder) {
    char error[512];
    struct rh_scrubber *compiling = rh_scrubber_new(NULL, 0, NULL, 0, folder, error, sizeof error);
    if (!compiling) return NULL;
    rh_scrubber_prepare_every_rule(compiling);
    rh_scrubber_free(compiling);
    struct rh_scrubber *loading = rh_scrubber_new(NULL, 0, NULL, 0, folder, error, sizeof error);
    if (loading) rh_scrubber_prepare_every_rule(loading);
    return loading;
}

static int differs(const char *what, const char *input, const char *once, const char *other) {
    printf("%s:\n  input: [%s]\n  once:  [%s]\n  then:  [%s]\n", what, input, once, other);
    return 1;
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 10000;
    srand(argc > 2 ? (unsigned)atol(argv[2]) : 1u);
    struct rh_scrubber *loading = argc > 3 ? saved_rules(argv[3]) : NULL;
    if (!loading) {
        printf("no scrubber from a cache folder (usage: scrub_fuzz ITERATIONS SEED EMPTY_FOLDER)\n");
        return 1;
    }
    char input[512];
    for (long n = 0; n < iterations; n++) {
        size_t length = 0;
        int count = rand() % 24;
        input[0] = '\0';
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
        int failed = 0;
        if (!once || !twice || strcmp(once, twice) != 0) failed = differs("not idempotent", input, once, twice);
        else if (!loaded || strcmp(once, loaded) != 0) failed = differs("not the same from saved rules", input, once, loaded);
        else if (!again || strcmp(once, again) != 0) failed = differs("not the same when seen again", input, once, again);
        free(once);
        free(twice);
        free(again);
        free(loaded);
        if (failed) return 1;
    }
    rh_scrubber_free(loading);
    printf("%ld inputs: no memory errors, idempotent, the same when seen again and from saved rules\n", iterations);
    return 0;
}
