#define _GNU_SOURCE
#include "capture_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* --- what threads and the host set up ahead of a crash --------------------------------- */

/* Set by the host ahead of a crash (any thread, under their locks); read by the handler
   without them. */
static char attributes[ATTR_CAP][ATTR_TEXT_CAP];
static volatile sig_atomic_t attribute_count;
static char attachments[ATTACH_CAP][PATH_CAP];
static volatile sig_atomic_t attachment_count;

/* Plugins, registered before they are opened; entries are never removed. */
static struct {
    char path[PATH_CAP];
    char digest[DIGEST_CAP];
    char name[NAME_CAP];
} plugins[PLUGINS_CAP];
static int plugin_count;
static pthread_mutex_t plugins_lock = PTHREAD_MUTEX_INITIALIZER;

/* Which plugin call this thread is in: (plugin << 8) | call, 0 for none. initial-exec, so the
   handler reads it without calling into the dynamic linker. */
static __thread uint32_t current_call __attribute__((tls_model("initial-exec")));

static const char *const call_names[RH_CRASH_CALL_COUNT] = {
    [RH_CRASH_CALL_NONE] = "",
    [RH_CRASH_CALL_LOAD] = "dlopen",
    [RH_CRASH_CALL_ENTRY] = "rh_plugin_entry",
    [RH_CRASH_CALL_BEFORE] = "on_before_report_created",
    [RH_CRASH_CALL_AFTER] = "on_after_report_created",
    [RH_CRASH_CALL_DESTROY] = "destroy",
    [RH_CRASH_CALL_ADD_FIELDS] = "add_fields_before_report_created",
    [RH_CRASH_CALL_CHECK_FIELDS] = "check_fields_after_report_created",
    [RH_CRASH_CALL_ATTACHMENTS] = "attachments_for_report",
    [RH_CRASH_CALL_ATTACHMENTS_ASYNC] = "attachments_for_report_async",
};

bool cc_names_plugin_call(uint32_t mark) {
    int plugin = (int)(mark >> 8);
    int call = (int)(mark & 0xff);
    return plugin >= 1 && plugin <= plugin_count && call > 0 && call < RH_CRASH_CALL_COUNT;
}

void cc_write_attribution(int fd, struct line *l, uint32_t mark) {
    if (!cc_names_plugin_call(mark)) return;
    int plugin = (int)(mark >> 8);
    int call = (int)(mark & 0xff);
    add(l, "plugin_path "); add(l, plugins[plugin - 1].path); emit(fd, l);
    add(l, "plugin_digest "); add(l, plugins[plugin - 1].digest); emit(fd, l);
    if (plugins[plugin - 1].name[0]) { add(l, "plugin_name "); add(l, plugins[plugin - 1].name); emit(fd, l); }
    add(l, "callback "); add(l, call_names[call]); emit(fd, l);
}

void cc_write_registered(int fd, struct line *l) {
    int attributes_written = __atomic_load_n(&attribute_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < attributes_written; i++) {
        if (__atomic_load_n(&attributes[i][0], __ATOMIC_ACQUIRE) == '\0') continue; /* removed, or being rewritten */
        add(l, "attribute "); add(l, attributes[i]); emit(fd, l);
    }
    for (int i = 0; i < attachment_count; i++) { add(l, "attachment "); add(l, attachments[i]); emit(fd, l); }
}

static pthread_key_t stack_key;
static pthread_once_t stack_key_once = PTHREAD_ONCE_INIT;

/* Runs when a prepared thread ends: switch its alternate stack off, then free it. */
static void release_stack(void *memory) {
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    free(memory);
}

static void make_stack_key(void) { pthread_key_create(&stack_key, release_stack); }

void cc_prepare_stack_key(void) { pthread_once(&stack_key_once, make_stack_key); }

bool rh_crash_prepare_thread(void) {
    if (!rh_crash_is_installed()) return true;
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return true; /* has one */
    void *memory = malloc(ALT_STACK_SIZE);
    if (!memory) return false;
    stack_t stack = {.ss_sp = memory, .ss_size = ALT_STACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&stack, NULL) != 0) {
        free(memory);
        return false;
    }
    pthread_setspecific(stack_key, memory);
    return true;
}

/* Setters may run on any thread at once; the crash handler reads without this lock. */
static pthread_mutex_t attributes_lock = PTHREAD_MUTEX_INITIALIZER;

/* Writes `text` (shorter than ATTR_TEXT_CAP) into `slot` so that the handler, reading without
 * the lock, sees the old text, nothing (a cleared first byte: skipped), or the new text,
 * never a mix: the first byte is cleared first and set last. */
static void publish_attribute(int slot, const char *text) {
    __atomic_store_n(&attributes[slot][0], '\0', __ATOMIC_SEQ_CST);
    memcpy(&attributes[slot][1], text + 1, strlen(text));
    __atomic_store_n(&attributes[slot][0], text[0], __ATOMIC_RELEASE);
}

static bool holds_key(int slot, const char *key, size_t key_length) {
    return strncmp(attributes[slot], key, key_length) == 0 && attributes[slot][key_length] == '=';
}

void rh_crash_remove_attribute(const char *raw_key) {
    char key[ATTR_TEXT_CAP];
    if (!encode_into(key, sizeof key, raw_key)) return;
    size_t key_length = strlen(key);
    pthread_mutex_lock(&attributes_lock);
    for (int i = 0; i < attribute_count; i++) {
        if (holds_key(i, key, key_length)) __atomic_store_n(&attributes[i][0], '\0', __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&attributes_lock);
}

bool rh_crash_set_attribute(const char *raw_key, const char *raw_value) {
    if (strchr(raw_key, '=') || raw_key[0] == '\0') return false;
    char key[ATTR_TEXT_CAP], value[ATTR_TEXT_CAP];
    if (!encode_into(key, sizeof key, raw_key) || !encode_into(value, sizeof value, raw_value)) return false;
    size_t key_length = strlen(key);
    if (key_length + strlen(value) + 2 > ATTR_TEXT_CAP) return false;
    char text[ATTR_TEXT_CAP];
    memcpy(text, key, key_length);
    text[key_length] = '=';
    memcpy(text + key_length + 1, value, strlen(value) + 1);
    pthread_mutex_lock(&attributes_lock);
    /* The key's own slot, else the first one a removal emptied, else a new one. */
    int slot = -1, emptied = -1;
    for (int i = 0; i < attribute_count; i++) {
        if (holds_key(i, key, key_length)) slot = i;
        else if (attributes[i][0] == '\0' && emptied < 0) emptied = i;
    }
    if (slot < 0) slot = emptied >= 0 ? emptied : attribute_count;
    bool stored = slot < ATTR_CAP;
    if (stored) {
        publish_attribute(slot, text);
        if (slot == attribute_count) __atomic_store_n(&attribute_count, slot + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&attributes_lock);
    return stored;
}

bool rh_crash_add_attachment(const char *path) {
    if (attachment_count == ATTACH_CAP || !encode_into(attachments[attachment_count], PATH_CAP, path)) return false;
    attachment_count = attachment_count + 1;
    return true;
}

int rh_crash_register_plugin(const char *raw_path, const char *raw_digest) {
    char path[PATH_CAP], digest[DIGEST_CAP];
    if (!encode_into(path, sizeof path, raw_path) || !encode_into(digest, sizeof digest, raw_digest)) return 0;
    pthread_mutex_lock(&plugins_lock);
    int id = 0;
    for (int i = 0; i < plugin_count && id == 0; i++) {
        if (strcmp(plugins[i].path, path) == 0 && strcmp(plugins[i].digest, digest) == 0) id = i + 1;
    }
    if (id == 0 && plugin_count < PLUGINS_CAP) {
        strcpy(plugins[plugin_count].path, path);
        strcpy(plugins[plugin_count].digest, digest);
        plugins[plugin_count].name[0] = '\0';
        /* Published after the entry is complete: the handler reads up to plugin_count. */
        __atomic_store_n(&plugin_count, plugin_count + 1, __ATOMIC_RELEASE);
        id = plugin_count;
    }
    pthread_mutex_unlock(&plugins_lock);
    return id;
}

void rh_crash_name_plugin(int plugin, const char *raw_name) {
    char name[NAME_CAP];
    if (plugin < 1 || plugin > plugin_count || !encode_into(name, sizeof name, raw_name)) return;
    pthread_mutex_lock(&plugins_lock);
    snprintf(plugins[plugin - 1].name, NAME_CAP, "%s", name);
    pthread_mutex_unlock(&plugins_lock);
}

uint32_t rh_crash_enter_plugin(int plugin, rh_crash_call call) {
    uint32_t previous_mark = current_call;
    if (plugin > 0 && plugin <= PLUGINS_CAP) current_call = ((uint32_t)plugin << 8) | ((uint32_t)call & 0xff);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return previous_mark;
}

void rh_crash_leave_plugin(uint32_t previous_mark) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    current_call = previous_mark;
}

uint32_t cc_current_call(void) { return current_call; }

const char *rh_crash_call_name(rh_crash_call call) {
    return call > RH_CRASH_CALL_NONE && call < RH_CRASH_CALL_COUNT ? call_names[call] : "";
}
