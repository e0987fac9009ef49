/* A minimal handler for benchmarks: sets one attribute and completes inline. With the option
 * `{"attachments": "put-back"}` it also reads each attachment and puts it back under the same
 * name, as a scrubber that finds nothing would: scripts/bench's baseline for what scrubbing an
 * attachment adds. */
#include <reporthost/plugin.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const rh_host_api *host;
static bool put_back;

struct names {
    char *name[8], *filename[8];
    size_t count;
};

static bool note(void *context, const char *name, const char *filename, size_t size) {
    (void)size;
    struct names *names = context;
    if (names->count < 8) {
        names->name[names->count] = strdup(name);
        names->filename[names->count++] = strdup(filename ? filename : name);
    }
    return true;
}

static void read_and_put_back(rh_report *r, const char *name, const char *filename) {
    size_t size = 0;
    if (host->attachment_data(r, name, NULL, 0, &size) != RH_ERR_TRUNCATED) return;
    char *data = malloc(size);
    if (data && host->attachment_data(r, name, data, size, &size) == RH_OK) {
        host->remove_attachment(r, name);
        host->add_attachment(r, name, filename, data, size);
    }
    free(data);
}

static void on_callback(void *context, rh_report *r, bool is_terminating, rh_completion completion) {
    (void)context;
    (void)is_terminating;
    host->set_attribute(r, "bench", "1");
    if (put_back) {
        struct names names = {{NULL}, {NULL}, 0};
        host->each_attachment(r, note, &names);
        for (size_t k = 0; k < names.count; k++) {
            if (names.name[k] && names.filename[k]) read_and_put_back(r, names.name[k], names.filename[k]);
            free(names.name[k]);
            free(names.filename[k]);
        }
    }
    completion();
}

static rh_handler handler = {RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler), "bench", "1.0", NULL,
                             on_callback, on_callback, NULL, NULL};

const rh_handler *rh_plugin_entry(const rh_host_api *h) {
    host = h;
    char options[256];
    size_t length = 0;
    bool has_options = h->struct_size >= offsetof(rh_host_api, options_json) + sizeof h->options_json;
    put_back = has_options && h->options_json(options, sizeof options, &length) == RH_OK && strstr(options, "\"put-back\"") != NULL;
    return &handler;
}
