/* scrub-pii: removes personal data and secrets from a report before it leaves the machine:
 * summary, description and every attribute value go through rh_scrub (scrub.c). It runs in
 * both callbacks, so it also sees what other handlers added before it. Idempotent. */
#include <reporthost/plugin.h>

#include <stdlib.h>
#include <string.h>

#include "scrub.h"

static const rh_host_api *host;

typedef rh_status (*getter)(rh_report *, char *, size_t, size_t *);
typedef rh_status (*setter)(rh_report *, const char *);

/* Reads a field into a new buffer (NULL when absent). */
static char *read_field(rh_report *r, getter get) {
    size_t length = 0;
    rh_status status = get(r, NULL, 0, &length);
    if (status != RH_OK && status != RH_ERR_TRUNCATED) return NULL;
    char *buffer = malloc(length + 1);
    if (buffer && get(r, buffer, length + 1, &length) != RH_OK) { free(buffer); return NULL; }
    return buffer;
}

static void scrub_field(rh_report *r, getter get, setter set) {
    char *value = read_field(r, get);
    if (!value) return;
    char *clean = rh_scrub(value);
    if (clean && strcmp(clean, value) != 0) set(r, clean);
    free(clean);
    free(value);
}

static bool scrub_attribute(void *context, const char *key, const char *value) {
    rh_report *r = context;
    char *clean = rh_scrub(value);
    /* The visitor sees a snapshot and the host holds no lock: setting here is allowed. */
    if (clean && strcmp(clean, value) != 0) host->set_attribute(r, key, clean);
    free(clean);
    return true;
}

static void scrub(void *context, rh_report *r, bool is_terminating, rh_completion completion) {
    (void)context;
    (void)is_terminating;
    scrub_field(r, host->summary, host->set_summary);
    scrub_field(r, host->description, host->set_description);
    host->each_attribute(r, scrub_attribute, r);
    completion();
}

static rh_handler handler = {
    RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler),
    "scrub-pii", "1.0.0", NULL, scrub, scrub, NULL, NULL,
};

const rh_handler *rh_plugin_entry(const rh_host_api *h) {
    host = h;
    return &handler;
}
