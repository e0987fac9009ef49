/* scrub-pii's engine alone, for scripts/scrub-peers and scripts/bench: reads NUL-separated texts
 * on stdin, scrubs each with every built-in rule (masked, as the plugin does; with `--pattern P`,
 * with P alone, as an `extraPatterns` entry), writes the results NUL-separated on stdout and, on
 * stderr, the nanoseconds one pass over the texts took (reading and writing not counted). The
 * texts are scrubbed `--repeat N` times after one pass that is not timed (it compiles the rules
 * on first use); the time is the mean of the timed passes. */
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

static char *read_input(size_t *size) {
    size_t capacity = 1 << 20;
    char *input = malloc(capacity);
    *size = 0;
    for (size_t got; input && (got = fread(input + *size, 1, capacity - *size - 1, stdin)) > 0;) {
        *size += got;
        if (*size + 1 == capacity) input = realloc(input, capacity *= 2);
    }
    if (input) input[*size] = '\0';
    return input;
}

int main(int argc, char **argv) {
    const char *pattern = NULL;
    int repeat = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--pattern") == 0) pattern = argv[i + 1];
        if (strcmp(argv[i], "--repeat") == 0) repeat = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
    }
    char error[512];
    struct rh_scrub_extra extra = {"pattern", pattern};
    const char *none[] = {NULL};
    struct rh_scrubber *scrubber = pattern ? rh_scrubber_new(none, 0, &extra, 1, NULL, error, sizeof error)
                                           : rh_scrubber_new(NULL, 0, NULL, 0, NULL, error, sizeof error);
    size_t size = 0;
    char *input = read_input(&size);
    if (!scrubber || !input) {
        fprintf(stderr, "%s\n", scrubber ? "out of memory" : error);
        return 1;
    }
    long long spent = 0;
    for (int pass = 0; pass <= repeat; pass++) {
        for (size_t at = 0; at < size;) {
            const char *text = input + at;
            size_t length = strlen(text);
            long long start = now_ns();
            char *scrubbed = rh_scrubber_apply(scrubber, text, NULL);
            if (pass > 0) spent += now_ns() - start;
            if (!scrubbed) return 1;
            if (pass == repeat) fwrite(scrubbed, 1, strlen(scrubbed) + 1, stdout);
            free(scrubbed);
            at += length + 1;
        }
    }
    fprintf(stderr, "%lld\n", spent / repeat);
    return 0;
}
