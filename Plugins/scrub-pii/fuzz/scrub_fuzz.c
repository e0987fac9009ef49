/* A property test for rh_scrub: random inputs built from the characters the matchers care
 * about, checked under AddressSanitizer for memory errors and for idempotence
 * (scrubbing a scrubbed text changes nothing). Usage: scrub_fuzz ITERATIONS SEED */
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

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 10000;
    srand(argc > 2 ? (unsigned)atol(argv[2]) : 1u);
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
        if (!once || !twice || strcmp(once, twice) != 0) {
            printf("not idempotent:\n  input: [%s]\n  once:  [%s]\n  twice: [%s]\n", input, once, twice);
            free(once);
            free(twice);
            return 1;
        }
        free(once);
        free(twice);
    }
    printf("%ld inputs: no memory errors, idempotent\n", iterations);
    return 0;
}
