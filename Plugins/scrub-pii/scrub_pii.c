/* scrub-pii: removes personal data and secrets from a report before it leaves the machine:
 * summary, description, every attribute value (but those of `safeAttributes`), every label,
 * every breadcrumb's message (ABI 1.1) and every text attachment go through one scan of the
 * compiled rules and `extraPatterns` (engine.c); an attribute whose key names a secret loses
 * its whole value (keys.c). It runs in both callbacks, so it also sees what other handlers
 * added before it. Idempotent. Its options (options.c) come from the host's options_json
 * (ABI 1.1); a 1.0 host gives none. */
#include <reporthost/plugin.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "options.h"
#include "scrub.h"

static const rh_host_api *host;
static struct scrub_options options;
static struct rh_scrubber *scrubber;
/* The rules are compiled on a thread the entry starts (about half a second), or loaded in a
   millisecond from where they were saved: the user's cache folder
   (`$XDG_CACHE_HOME/reporthost-scrub-pii`, else `~/.cache/…`), or the plugin's data folder
   when there is none. The `hash` key is read on first use: the data folder is not known while
   the entry runs. The first callback waits for both. */
static pthread_t preparing;
static bool is_preparing;
static pthread_once_t ready_once = PTHREAD_ONCE_INIT;

/* The plugin's data folder, once the host knows it (after the entry returns); false when it
   has none. */
static bool data_folder(char *folder, size_t size, int tries) {
    if (host->struct_size < offsetof(rh_host_api, data_folder) + sizeof host->data_folder) return false;
    size_t length = 0;
    for (int k = 0; k < tries; k++) {
        if (host->data_folder(folder, size, &length) == RH_OK) return true;
        struct timespec wait = {0, 2 * 1000 * 1000};
        nanosleep(&wait, NULL);
    }
    return false;
}

/* `$XDG_CACHE_HOME/reporthost-scrub-pii` (or `$HOME/.cache/…`), made 0700; false when neither
   variable names a folder or it cannot be made. */
static bool user_cache(char *folder, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char parent[4096];
    if (xdg && xdg[0] == '/') snprintf(parent, sizeof parent, "%s", xdg);
    else if (home && home[0] == '/') snprintf(parent, sizeof parent, "%s/.cache", home);
    else return false;
    mkdir(parent, 0700);
    if (snprintf(folder, size, "%s/reporthost-scrub-pii", parent) >= (int)size) return false;
    struct stat status;
    return (mkdir(folder, 0700) == 0 || errno == EEXIST) && lstat(folder, &status) == 0 && S_ISDIR(status.st_mode) &&
           status.st_uid == geteuid();
}

static void *prepare(void *unused) {
    (void)unused;
    char folder[4096], error[512];
    bool has_folder = user_cache(folder, sizeof folder) || data_folder(folder, sizeof folder, 100);
    scrubber = rh_scrubber_new((const char *const *)options.disabled, options.disabled_count, options.extras, options.extra_count,
                               has_folder ? folder : NULL, error, sizeof error);
    if (scrubber) rh_scrubber_prepare_every_rule(scrubber);
    else host->log(NULL, RH_LOG_ERROR, error);
    return NULL;
}

static void load_key(const char *folder, bool has_folder) {
    char error[512];
    if (has_folder && scrub_options_load_key(&options, folder, error, sizeof error)) {
        options.style.pseudonym = scrub_options_pseudonym;
        options.style.context = &options;
    } else {
        /* Without a key, values are masked: never left in the report. */
        host->log(NULL, RH_LOG_WARN, has_folder ? error : "scrub-pii: the host gives no data folder for the hash key: masking instead");
    }
}

static void get_ready(void) {
    char folder[4096];
    if (options.style.method == RH_SCRUB_HASH) load_key(folder, data_folder(folder, sizeof folder, 1));
    if (is_preparing) pthread_join(preparing, NULL);
    else prepare(NULL);
}

/* A scrubbed copy of `text` (NULL when out of memory: the caller leaves the field as it is). */
static char *clean(const char *text) {
    pthread_once(&ready_once, get_ready);
    return scrubber ? rh_scrubber_apply_remembering(scrubber, text, &options.style) : NULL;
}

/* `text` scrubbed when it held something to scrub; NULL when it held nothing (no copy made)
   or without memory: the caller leaves the field as it is. */
static char *changed(const char *text) {
    pthread_once(&ready_once, get_ready);
    bool unchanged = false;
    return scrubber ? rh_scrubber_apply_if_changed(scrubber, text, &options.style, &unchanged) : NULL;
}

/* What replaces the value of an attribute whose key names a secret, as `method` says; NULL
   when the value already is that (scrubbing twice changes nothing). */
static char *secret_value(const char *value) {
    pthread_once(&ready_once, get_ready);
    char replaced[32] = "";
    if (options.style.method == RH_SCRUB_HASH && options.style.pseudonym) {
        char hex[13];
        options.style.pseudonym(options.style.context, value, strlen(value), hex);
        snprintf(replaced, sizeof replaced, "[secret:%s]", hex);
    } else if (options.style.method != RH_SCRUB_REMOVE) {
        snprintf(replaced, sizeof replaced, "[secret]");
    }
    bool done = strcmp(value, replaced) == 0 || (strncmp(value, "[secret:", 8) == 0 && strlen(value) == 21 && value[20] == ']');
    return done ? NULL : strdup(replaced);
}

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
    char *cleaned = changed(value);
    if (cleaned) set(r, cleaned);
    free(cleaned);
    free(value);
}

static bool scrub_attribute(void *context, const char *key, const char *value) {
    rh_report *r = context;
    if (scrub_options_is_safe_attribute(&options, key)) return true;
    const char *const *words = options.has_sensitive_keys ? (const char *const *)options.sensitive_keys : NULL;
    bool secret = rh_scrub_key_is_secret(key, words, options.sensitive_key_count);
    char *cleaned = secret ? secret_value(value) : changed(value);
    /* The visitor sees a snapshot and the host holds no lock: setting here is allowed. */
    if (cleaned && strcmp(cleaned, value) != 0) host->set_attribute(r, key, cleaned);
    free(cleaned);
    return true;
}

/* Labels: collected, scrubbed each, and set again only when one changed (in their order, so
   the labels other handlers set stay). */
struct labels {
    char **items;
    size_t count, capacity;
    bool changed, failed;
};

static bool collect_label(void *context, const char *label) {
    struct labels *l = context;
    if (l->count == l->capacity) {
        size_t capacity = l->capacity ? l->capacity * 2 : 16;
        char **items = realloc(l->items, capacity * sizeof *items);
        if (!items) { l->failed = true; return false; }
        l->items = items;
        l->capacity = capacity;
    }
    char *cleaned = clean(label);
    if (!cleaned) { l->failed = true; return false; }
    l->changed |= strcmp(cleaned, label) != 0;
    l->items[l->count++] = cleaned;
    return true;
}

static void scrub_labels(rh_report *r) {
    struct labels l = {NULL, 0, 0, false, false};
    host->each_label(r, collect_label, &l);
    if (l.changed && !l.failed) host->set_labels(r, (const char *const *)l.items, l.count);
    for (size_t k = 0; k < l.count; k++) free(l.items[k]);
    free(l.items);
}

/* Text attachments (no NUL byte) are scrubbed and put back under the same name; a binary one
   (a minidump) is left alone. Each callback may add 3 attachments: one that cannot be put back
   stays removed (a report leaves without it, never with the personal data), with a warning. */
struct attachment_names {
    char *names[RH_ATTACHMENTS_PER_SOURCE * 4];
    char *filenames[RH_ATTACHMENTS_PER_SOURCE * 4];
    size_t count;
};

static bool note_attachment(void *context, const char *name, const char *filename, size_t size) {
    struct attachment_names *a = context;
    if (size == 0 || size > RH_ATTACHMENT_MAX_BYTES) return true;
    if (a->count == sizeof a->names / sizeof *a->names) return false;
    a->names[a->count] = strdup(name);
    a->filenames[a->count] = strdup(filename);
    a->count++;
    return true;
}

static void scrub_attachment(rh_report *r, const char *name, const char *filename) {
    size_t size = 0;
    if (host->attachment_data(r, name, NULL, 0, &size) != RH_ERR_TRUNCATED || size == 0) return;
    char *data = malloc(size + 1);
    if (!data) return;
    if (host->attachment_data(r, name, data, size, &size) == RH_OK && memchr(data, '\0', size) == NULL) {
        data[size] = '\0';
        char *cleaned = changed(data);
        if (cleaned) {
            host->remove_attachment(r, name);
            if (strlen(cleaned) == 0 || host->add_attachment(r, name, filename, cleaned, strlen(cleaned)) != RH_OK)
                host->log(r, RH_LOG_WARN, "scrub-pii: an attachment held personal data and could not be put back scrubbed: removed");
        }
        free(cleaned);
    }
    free(data);
}

static void scrub_attachments(rh_report *r) {
    struct attachment_names a = {{NULL}, {NULL}, 0};
    host->each_attachment(r, note_attachment, &a);
    for (size_t k = 0; k < a.count; k++) {
        if (a.names[k] && a.filenames[k]) scrub_attachment(r, a.names[k], a.filenames[k]);
        free(a.names[k]);
        free(a.filenames[k]);
    }
}

/* Breadcrumbs (ABI 1.1): each message scrubbed and set again by its index when it changed;
   set_breadcrumb_message changes one message in place, so the indexes of the snapshot hold. */
struct breadcrumb_visit {
    rh_report *report;
};

static bool scrub_breadcrumb(void *context, size_t index, const char *timestamp, int32_t level, const char *category,
                             const char *message) {
    (void)timestamp;
    (void)level;
    (void)category;
    struct breadcrumb_visit *visit = context;
    char *cleaned = changed(message);
    if (cleaned) host->set_breadcrumb_message(visit->report, index, cleaned);
    free(cleaned);
    return true;
}

static void scrub_breadcrumbs(rh_report *r) {
    if (host->struct_size < offsetof(rh_host_api, set_breadcrumb_message) + sizeof host->set_breadcrumb_message) return;
    struct breadcrumb_visit visit = {r};
    host->each_breadcrumb(r, scrub_breadcrumb, &visit);
}

static void scrub(void *context, rh_report *r, bool is_terminating, rh_completion completion) {
    (void)context;
    (void)is_terminating;
    scrub_field(r, host->summary, host->set_summary);
    scrub_field(r, host->description, host->set_description);
    host->each_attribute(r, scrub_attribute, r);
    scrub_labels(r);
    scrub_breadcrumbs(r);
    scrub_attachments(r);
    completion();
}

static rh_handler handler = {
    RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR, sizeof(rh_handler),
    "scrub-pii", "2.0.0", NULL, scrub, scrub, NULL, NULL,
};

/* Reads the options; options it cannot use (an unknown key, a bad pattern) refuse the load,
   saying which, rather than scrub less than the configuration asked. */
const rh_handler *rh_plugin_entry(const rh_host_api *h) {
    host = h;
    char text[65536], error[512];
    size_t length = 0;
    bool has_options = h->struct_size >= offsetof(rh_host_api, options_json) + sizeof h->options_json;
    if (has_options && h->options_json(text, sizeof text, &length) != RH_OK) {
        h->log(NULL, RH_LOG_ERROR, "scrub-pii: its options are over 64 KB");
        return NULL;
    }
    if (has_options && !scrub_options_parse(text, &options, error, sizeof error)) {
        char message[600];
        snprintf(message, sizeof message, "scrub-pii: options: %s", error);
        h->log(NULL, RH_LOG_ERROR, message);
        return NULL;
    }
    /* Once per process: entered again (after destroy), the rules being compiled are the same. */
    if (!is_preparing) is_preparing = pthread_create(&preparing, NULL, prepare, NULL) == 0;
    return &handler;
}
