/* wrapper-sim: stands in for a cross-platform wrapper's handler (React Native, Flutter...)
 * in the wrapper slot. It records which wrapper made the report, assigns a `wrapper` label
 * idempotently, and completes from its runtime's thread, as wrappers that hop to their own
 * runtime do: one long-lived thread, started at the first report, that calls the completions
 * handed to it in order. */
#include <reporthost/plugin.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const rh_host_api *host;

enum { MAX_LABELS = 256 };

struct label_list {
    const char *items[MAX_LABELS];
    char *copies[MAX_LABELS];
    size_t count;
};

static bool collect_label(void *context, const char *label) {
    struct label_list *list = context;
    if (list->count == MAX_LABELS) return false;
    list->copies[list->count] = strdup(label);
    list->items[list->count] = list->copies[list->count];
    list->count++;
    return true;
}

/* The runtime's thread and the completions waiting for it (a wrapper's message queue). */
enum { QUEUE_MAX = 64 };
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
static rh_completion queue[QUEUE_MAX];
static size_t queue_head, queue_count;
static bool runtime_started;

static void *runtime(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        while (queue_count == 0) pthread_cond_wait(&queue_ready, &queue_lock);
        rh_completion completion = queue[queue_head];
        queue_head = (queue_head + 1) % QUEUE_MAX;
        queue_count--;
        pthread_mutex_unlock(&queue_lock);
        completion();
    }
    return NULL;
}

/* Hands `completion` to the runtime's thread; false when it cannot (no thread, queue full). */
static bool complete_on_runtime(rh_completion completion) {
    pthread_mutex_lock(&queue_lock);
    if (!runtime_started) {
        pthread_t thread;
        runtime_started = pthread_create(&thread, NULL, runtime, NULL) == 0;
        if (runtime_started) pthread_detach(thread);
    }
    bool queued = runtime_started && queue_count < QUEUE_MAX;
    if (queued) {
        queue[(queue_head + queue_count) % QUEUE_MAX] = completion;
        queue_count++;
        pthread_cond_signal(&queue_ready);
    }
    pthread_mutex_unlock(&queue_lock);
    return queued;
}

static void on_before(void *context, rh_report *r, bool is_terminating, rh_completion completion) {
    (void)context;
    host->set_attribute(r, "wrapper.name", "wrapper-sim");
    host->set_attribute(r, "wrapper.version", "1.0.0");
    /* Assign the whole list rather than add: a second run over the report is harmless. */
    if (!host->has_label(r, "wrapper")) {
        struct label_list list = {.count = 0};
        host->each_label(r, collect_label, &list);
        if (list.count < MAX_LABELS) {
            list.items[list.count++] = "wrapper";
            host->set_labels(r, list.items, list.count);
            list.count--;
        }
        for (size_t i = 0; i < list.count; i++) free(list.copies[i]);
    }
    if (is_terminating) {  /* the process ends soon: finish before returning */
        completion();
        return;
    }
    if (!complete_on_runtime(completion)) completion();
}

static rh_handler handler = {
    RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler),
    "wrapper-sim", "1.0.0", NULL, on_before, NULL, NULL, NULL,
};

const rh_handler *rh_plugin_entry(const rh_host_api *h) {
    host = h;
    return &handler;
}
