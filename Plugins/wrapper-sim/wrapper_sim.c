/* wrapper-sim: stands in for a cross-platform wrapper's handler (React Native, Flutter...)
 * in the wrapper slot. It records which wrapper made the report, assigns a `wrapper` label
 * idempotently, and completes from a thread of its own, as wrappers that hop to their own
 * runtime do. */
#include <reporthost/plugin.h>

#include <pthread.h>
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

static void *complete_later(void *completion) {
    ((rh_completion)completion)();
    return NULL;
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
    pthread_t thread;
    if (pthread_create(&thread, NULL, complete_later, (void *)completion) == 0) {
        pthread_detach(thread);
    } else {
        completion();
    }
}

static rh_handler handler = {
    RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler),
    "wrapper-sim", "1.0.0", NULL, on_before, NULL, NULL, NULL,
};

const rh_handler *rh_plugin_entry(const rh_host_api *h) {
    host = h;
    return &handler;
}
