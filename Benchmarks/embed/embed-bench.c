/* The C side of scripts/bench: one measurement per run, printed as `name value` lines, so the
 * orchestrator can interleave a figure's runs with its baseline's. Built twice: with
 * -DWITH_HOST (linked to libreporthost.so) and without (the baseline C program, SQLite only).
 *
 *   embed-bench rss                             VmRSS of this program as it starts (KB)
 *   embed-bench raw DB N                        median of N raw SQLite inserts + fsync (ms)
 *   embed-bench naive CRASHES DB                the naive crash-file loop: read each file,
 *                                               insert one row per transaction (ms)
 *   embed-bench list DB                         prints the columns `status --all` prints
 *   with -DWITH_HOST:
 *   embed-bench start CONFIG REPO               rh_embed_start on the calling thread, then
 *                                               rh_embed_stop (which waits for recovery), and
 *                                               the memory before, after start and at peak
 *   embed-bench report CONFIG REPO N [WARM]     median rh_embed_report, stored durably (ms), after WARM
 *                                               untimed reports (each adds a breadcrumb of the host's
 *                                               own, so 100 fill the ring every document carries)
 *   embed-bench crash CONFIG REPO               dies by SIGSEGV: a real crash file
 *   embed-bench breadcrumb CONFIG REPO N        ns per rh_embed_breadcrumb of a 48-byte
 *                                               message, and per write(2) of the same bytes
 *                                               to /dev/null; from 1 thread and 8 at once */
#define _GNU_SOURCE
#ifdef WITH_HOST
#include <reporthost/embed.h>
#endif
#include <dirent.h>
#include <pthread.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A line of /proc/self/status in KB (VmRSS, VmHWM). */
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t length = strlen(field);
    while (f && fgets(line, sizeof line, f)) if (strncmp(line, field, length) == 0) kb = atol(line + length);
    if (f) fclose(f);
    return kb;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *times, int n) {
    qsort(times, (size_t)n, sizeof *times, compare);
    return times[n / 2];
}

static sqlite3 *open_database(const char *path) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) { fprintf(stderr, "sqlite: cannot open %s\n", path); exit(1); }
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE IF NOT EXISTS r(id INTEGER PRIMARY KEY, doc TEXT)", 0, 0, 0);
    return db;
}

static void insert(sqlite3 *db, const char *doc, int length) {
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "INSERT INTO r(doc) VALUES(?)", -1, &s, 0);
    sqlite3_bind_text(s, 1, doc, length, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE) { fprintf(stderr, "sqlite: insert failed\n"); exit(1); }
    sqlite3_finalize(s);
}

/* The baseline of an embedded report: one insert of a 700-byte document per transaction. */
static int raw(const char *path, int n) {
    sqlite3 *db = open_database(path);
    char doc[701];
    memset(doc, 'x', 700);
    doc[700] = 0;
    double *times = calloc((size_t)n, sizeof *times);
    for (int i = 0; i < n; i++) {
        double a = now_ms();
        insert(db, doc, 700);
        times[i] = now_ms() - a;
    }
    sqlite3_close(db);
    printf("raw_insert_ms %.4f\n", median(times, n));
    free(times);
    return 0;
}

/* The baseline of crash-file recovery: read each file whole, insert it as one row in a
 * transaction of its own, unlink it. */
static int naive(const char *folder, const char *path) {
    sqlite3 *db = open_database(path);
    double a = now_ms();
    DIR *dir = opendir(folder);
    if (!dir) { fprintf(stderr, "cannot open %s\n", folder); return 1; }
    static char buffer[1 << 20];
    int files = 0;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
        if (!strstr(entry->d_name, ".crash")) continue;
        char name[4096];
        snprintf(name, sizeof name, "%s/%s", folder, entry->d_name);
        FILE *f = fopen(name, "r");
        if (!f) continue;
        size_t length = fread(buffer, 1, sizeof buffer - 1, f);
        fclose(f);
        insert(db, buffer, (int)length);
        unlink(name);
        files++;
    }
    closedir(dir);
    printf("naive_files %d\nnaive_ms %.3f\n", files, now_ms() - a);
    sqlite3_close(db);
    return 0;
}

/* `status --all`'s columns, one line a record, as `sqlite3` would list them. */
static int list(const char *path) {
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return 1;
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db, "SELECT report_id, trigger, state, attempts, bytes, created_at, next_attempt_at, outcome FROM reports ORDER BY rowid", -1, &s, 0) != SQLITE_OK) return 1;
    while (sqlite3_step(s) == SQLITE_ROW) {
        printf("%s|%s|%s|%d|%d|%lld|%s|%s\n", sqlite3_column_text(s, 0), sqlite3_column_text(s, 1), sqlite3_column_text(s, 2),
               sqlite3_column_int(s, 3), sqlite3_column_int(s, 4), sqlite3_column_int64(s, 5),
               sqlite3_column_text(s, 6) ? (const char *)sqlite3_column_text(s, 6) : "",
               sqlite3_column_text(s, 7) ? (const char *)sqlite3_column_text(s, 7) : "");
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return 0;
}

#ifdef WITH_HOST
static rh_embed *start_host(const char *config, const char *repository) {
    char error[512];
    rh_embed *h = rh_embed_start(config, repository, error, sizeof error);
    if (!h) { fprintf(stderr, "start: %s\n", error); exit(1); }
    return h;
}

static int start(const char *config, const char *repository) {
    long before = status_kb("VmRSS:");
    double a = now_ms();
    rh_embed *h = start_host(config, repository);
    double b = now_ms();
    long started = status_kb("VmRSS:");
    rh_embed_stop(h);
    double c = now_ms();
    printf("start_ms %.3f\nstart_to_stopped_ms %.3f\nrss_linked_kb %ld\nrss_started_kb %ld\nrss_peak_kb %ld\n", b - a, c - a,
           before, started, status_kb("VmHWM:"));
    return 0;
}

static void report_once(rh_embed *h) {
    char id[37];
    if (rh_embed_report(h, "error", "bench", "latency", id) != RH_EMBED_OK) { fprintf(stderr, "report failed\n"); exit(1); }
}

static int report(const char *config, const char *repository, int n, int warm) {
    rh_embed *h = start_host(config, repository);
    double *times = calloc((size_t)n, sizeof *times);
    for (int i = 0; i < warm; i++) report_once(h);
    for (int i = 0; i < n; i++) {
        double a = now_ms();
        report_once(h);
        times[i] = now_ms() - a;
    }
    rh_embed_stop(h);
    printf("report_ms %.4f\n", median(times, n));
    free(times);
    return 0;
}

/* The CPU time of the calling thread: with 8 threads on 2 cores, wall time would count the
 * time a thread waits for a core. */
static double thread_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static const char *crumb_category = "app", *crumb_message = "request 4211 finished in 12 ms with status 200";

typedef struct crumb_job {
    rh_embed *host; /* NULL: write(2) the same bytes to `fd` instead */
    int fd, n;
    double ns; /* per call, this thread's CPU time */
} crumb_job;

static void *crumb_loop(void *argument) {
    crumb_job *job = argument;
    char bytes[64];
    size_t length = strlen(crumb_category) + strlen(crumb_message);
    memcpy(bytes, crumb_category, strlen(crumb_category));
    memcpy(bytes + strlen(crumb_category), crumb_message, strlen(crumb_message));
    double a = thread_ns();
    for (int i = 0; i < job->n; i++) {
        if (job->host) rh_embed_breadcrumb(job->host, RH_LOG_INFO, crumb_category, crumb_message);
        else if (write(job->fd, bytes, length) != (ssize_t)length) abort();
    }
    job->ns = (thread_ns() - a) / job->n;
    return NULL;
}

/* ns per call over `threads` threads calling at once (the mean of each thread's CPU time). */
static double crumb_threads(rh_embed *host, int fd, int n, int threads) {
    pthread_t ids[8];
    crumb_job jobs[8];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (crumb_job){host, fd, n, 0};
        pthread_create(&ids[t], NULL, crumb_loop, &jobs[t]);
    }
    double total = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        total += jobs[t].ns;
    }
    return total / threads;
}

/* One breadcrumb against a write(2) of the same 48 bytes to /dev/null (the cheapest system
 * call that carries them), from 1 thread and from 8 threads at once. */
static int breadcrumb(const char *config, const char *repository, int n) {
    rh_embed *h = start_host(config, repository);
    int null = open("/dev/null", O_WRONLY);
    if (null < 0) { fprintf(stderr, "bench: cannot open /dev/null\n"); return 1; }
    double crumb = crumb_threads(h, null, n, 1), crumb8 = crumb_threads(h, null, n / 8, 8);
    double write1 = crumb_threads(NULL, null, n / 10, 1), write8 = crumb_threads(NULL, null, n / 80, 8);
    rh_embed_stop(h);
    close(null);
    printf("breadcrumb_ns %.3f\nwrite_ns %.3f\nbreadcrumb8_ns %.3f\nwrite8_ns %.3f\n", crumb, write1, crumb8, write8);
    return 0;
}

static int crash(const char *config, const char *repository) {
    start_host(config, repository);
    volatile int *null = NULL;
    return *null;
}
#endif

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "rss") == 0) return printf("rss_kb %ld\n", status_kb("VmRSS:")) < 0;
    if (strcmp(mode, "raw") == 0 && argc == 4) return raw(argv[2], atoi(argv[3]));
    if (strcmp(mode, "naive") == 0 && argc == 4) return naive(argv[2], argv[3]);
    if (strcmp(mode, "list") == 0 && argc == 3) return list(argv[2]);
#ifdef WITH_HOST
    if (strcmp(mode, "start") == 0 && argc == 4) return start(argv[2], argv[3]);
    if (strcmp(mode, "report") == 0 && (argc == 5 || argc == 6)) return report(argv[2], argv[3], atoi(argv[4]), argc == 6 ? atoi(argv[5]) : 0);
    if (strcmp(mode, "crash") == 0 && argc == 4) return crash(argv[2], argv[3]);
    if (strcmp(mode, "breadcrumb") == 0 && argc == 5) return breadcrumb(argv[2], argv[3], atoi(argv[4]));
#endif
    fprintf(stderr, "usage: see the comment at the top of embed-bench.c\n");
    return 2;
}
