/* Sorting matches (engine.c's selection, scan.c's backward search): a natural merge sort. The
 * matches of a scan come in a few runs already in order (a rule's matches by end, the rules one
 * after the other), so it merges those runs, in about one pass over them when there are few;
 * the spare room it merges into is on the stack for most texts. glibc's qsort took a heap block
 * for more than 1 KB of them, and compared each pair through its generic path. */
#include "engine.h"

#include <string.h>

#define ROOM 128

/* Where the run in order that starts at items[at] ends. */
static size_t run_end(const struct match *items, size_t at, size_t count, int (*compare)(const void *, const void *)) {
    size_t end = at + 1;
    while (end < count && compare(&items[end - 1], &items[end]) <= 0) end++;
    return end;
}

/* a[0..na) and b[0..nb), each in order, into out: stable (a's first on a tie). */
static void merge(const struct match *a, size_t na, const struct match *b, size_t nb, struct match *out,
                  int (*compare)(const void *, const void *)) {
    size_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) out[k++] = compare(&b[j], &a[i]) < 0 ? b[j++] : a[i++];
    memcpy(out + k, a + i, (na - i) * sizeof *out);
    memcpy(out + k + (na - i), b + j, (nb - j) * sizeof *out);
}

void scrub_sort(struct match *items, size_t count, int (*compare)(const void *, const void *)) {
    if (count < 2 || run_end(items, 0, count, compare) == count) return;
    struct match room[ROOM];
    struct match *spare = count <= ROOM ? room : malloc(count * sizeof *spare);
    if (!spare) {
        qsort(items, count, sizeof *items, compare); /* without memory: in place */
        return;
    }
    /* Each round merges the runs two by two from one buffer into the other, until one is left. */
    struct match *from = items, *to = spare;
    for (size_t runs = 0; runs != 1;) {
        runs = 0;
        for (size_t at = 0; at < count; runs++) {
            size_t middle = run_end(from, at, count, compare);
            size_t end = middle < count ? run_end(from, middle, count, compare) : count;
            merge(from + at, middle - at, from + middle, end - middle, to + at, compare);
            at = end;
        }
        struct match *merged = to;
        to = from;
        from = merged;
    }
    if (from != items) memcpy(items, from, count * sizeof *items);
    if (spare != room) free(spare);
}
