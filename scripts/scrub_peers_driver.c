/* scripts/scrub-peers' driver for scrub-pii: reads NUL-separated texts on stdin, scrubs each with
 * every built-in rule (masked, as the plugin does), writes the results NUL-separated on stdout
 * and, on stderr, the nanoseconds the scrubbing took (reading and writing not counted): the
 * second of two passes, so compiling the rules (on first use) is not counted either. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scrub.h"

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(void) {
    size_t size = 0, capacity = 1 << 20;
    char *input = malloc(capacity);
    for (size_t got; input && (got = fread(input + size, 1, capacity - size - 1, stdin)) > 0;) {
        size += got;
        if (size + 1 == capacity) input = realloc(input, capacity *= 2);
    }
    if (!input) return 1;
    input[size] = '\0';
    long long spent = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t at = 0; at < size;) {
            const char *text = input + at;
            size_t length = strlen(text);
            long long start = now_ns();
            char *scrubbed = rh_scrub(text);
            if (pass == 1) spent += now_ns() - start;
            if (!scrubbed) return 1;
            if (pass == 1) fwrite(scrubbed, 1, strlen(scrubbed) + 1, stdout);
            free(scrubbed);
            at += length + 1;
        }
    }
    fprintf(stderr, "%lld\n", spent);
    return 0;
}
