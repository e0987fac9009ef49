/* Figures for the README's embedding section: the cost of rh_embed_start on the calling
 * thread, the memory it adds to a C program (VmRSS before and after), and rh_embed_report
 * latency through the configured plugins (stored durably), against the same reports with no
 * plugin, and against the baseline the host must be compared with: one raw SQLite insert of a
 * report-sized row (WAL, synchronous=FULL) in the same program, interleaved in rounds.
 * Usage: embed-bench CONFIG_WITH_PLUGINS REPOSITORY CONFIG_WITHOUT_PLUGINS REPOSITORY2 RAW_DB */
#define _GNU_SOURCE
#include <reporthost/embed.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f)) if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

static double median_report_ms(const char *config, const char *repository, int n, double *start_ms, long *added_kb) {
    char error[256];
    long before = rss_kb();
    double t0 = now_ms();
    rh_embed *h = rh_embed_start(config, repository, error, sizeof error);
    double t1 = now_ms();
    if (!h) { fprintf(stderr, "start: %s\n", error); exit(1); }
    if (start_ms) *start_ms = t1 - t0;
    if (added_kb) *added_kb = rss_kb() - before;
    double *times = calloc((size_t)n, sizeof *times);
    char id[37];
    for (int i = 0; i < n; i++) {
        double a = now_ms();
        if (rh_embed_report(h, "error", "bench", "latency", id) != RH_EMBED_OK) { fprintf(stderr, "report failed\n"); exit(1); }
        times[i] = now_ms() - a;
    }
    rh_embed_stop(h);
    for (int i = 0; i < n; i++) for (int j = i + 1; j < n; j++) if (times[j] < times[i]) { double x = times[i]; times[i] = times[j]; times[j] = x; }
    double median = times[n / 2];
    free(times);
    return median;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The baseline: one insert of a 700-byte document per transaction, WAL, synchronous=FULL. */
static double median_insert_ms(const char *path, int n) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) { fprintf(stderr, "sqlite: cannot open %s\n", path); exit(1); }
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE IF NOT EXISTS r(id INTEGER PRIMARY KEY, doc TEXT)", 0, 0, 0);
    char doc[701];
    memset(doc, 'x', 700);
    doc[700] = 0;
    double *times = calloc((size_t)n, sizeof *times);
    for (int i = 0; i < n; i++) {
        double a = now_ms();
        sqlite3_stmt *s;
        sqlite3_prepare_v2(db, "INSERT INTO r(doc) VALUES(?)", -1, &s, 0);
        sqlite3_bind_text(s, 1, doc, -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE) { fprintf(stderr, "sqlite: insert failed\n"); exit(1); }
        sqlite3_finalize(s);
        times[i] = now_ms() - a;
    }
    sqlite3_close(db);
    qsort(times, (size_t)n, sizeof *times, compare);
    double median = times[n / 2];
    free(times);
    return median;
}

int main(int argc, char **argv) {
    if (argc < 6) return 2;
    double start_ms; long added_kb;
    double raw = median_insert_ms(argv[5], 50);
    double with = median_report_ms(argv[1], argv[2], 50, &start_ms, &added_kb);
    double without = median_report_ms(argv[3], argv[4], 50, NULL, NULL);
    double raw_again = median_insert_ms(argv[5], 50);
    raw = raw < raw_again ? raw : raw_again;
    printf("rh_embed_start on the calling thread: %.1f ms\n", start_ms);
    printf("memory added by rh_embed_start (VmRSS): %ld KB\n", added_kb);
    printf("one raw SQLite insert, WAL, synchronous=FULL (baseline): %.3f ms\n", raw);
    printf("rh_embed_report median, no plugin, stored durably: %.3f ms (%.2f x the raw insert)\n", without, without / raw);
    printf("rh_embed_report median, wrapper-sim and scrub-pii: %.3f ms (%.2f x the raw insert)\n", with, with / raw);
    return 0;
}
