/* A minimal handler for benchmarks: sets one attribute and completes inline. */
#include <reporthost/plugin.h>

static const rh_host_api *host;

static void on_callback(void *context, rh_report *r, bool is_terminating, rh_completion completion) {
    (void)context;
    (void)is_terminating;
    host->set_attribute(r, "bench", "1");
    completion();
}

static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "bench", "1.0", NULL,
                             on_callback, on_callback, NULL, NULL};

const rh_handler *rh_plugin_entry(const rh_host_api *h) {
    host = h;
    return &handler;
}
