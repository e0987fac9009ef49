/* The crash writer's parts (breakpad's lines): the exception handler (handler.c), the crash
 * file's writer (writer.c), the module map (module_map.c), the unwinder (unwinder.c) and
 * the registry of what threads and the host set up ahead of a crash (registry.c). Each
 * keeps its state to itself; this header is what they give each other, hidden from the
 * libraries they are linked into. Everything the handler reaches is async-signal-safe. */
#pragma once

#include "crash_capture.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

enum {
    PATH_CAP = 1024,
    SESSION_CAP = 64,
    ATTR_CAP = 64,
    ATTR_TEXT_CAP = 512,
    ATTACH_CAP = 16,
    MODULES_CAP = 64 * 1024,
    FRAMES_CAP = 128,
    PLUGINS_CAP = 64,
    NAME_CAP = 128,
    DIGEST_CAP = 80,
    ALT_STACK_SIZE = 64 * 1024,
    /* How long a thread that faults while another writes waits for it (10 ms steps). */
    WAIT_STEPS = 500,
};

/* --- async-signal-safe formatting into a fixed buffer -------------------------------- */

struct line {
    char text[2048];
    size_t length;
};

static inline void add(struct line *l, const char *s) {
    while (*s && l->length < sizeof l->text - 1) l->text[l->length++] = *s++;
}

static inline void add_unsigned(struct line *l, uint64_t value, unsigned base) {
    char digits[24];
    int n = 0;
    do {
        unsigned d = (unsigned)(value % base);
        digits[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        value /= base;
    } while (value && n < (int)sizeof digits);
    if (base == 16) add(l, "0x");
    while (n > 0 && l->length < sizeof l->text - 1) l->text[l->length++] = digits[--n];
}

static inline void write_all(int fd, const char *data, size_t length) {
    size_t done = 0;
    while (done < length) {
        ssize_t n = write(fd, data + done, length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
}

static inline void add_signed(struct line *l, int64_t value) {
    if (value < 0) add(l, "-");
    add_unsigned(l, value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value, 10);
}

/* Values (paths, names, attributes) are written so that no byte of theirs can end a line or
   start a field: control bytes, DEL and '%' become %XX; recovery decodes them. */
static inline bool needs_escape(unsigned char c) { return c < 0x20 || c == 0x7f || c == '%'; }

static inline void add_encoded(struct line *l, const char *s) {
    static const char digits[] = "0123456789ABCDEF";
    for (; *s && l->length < sizeof l->text - 4; s++) {
        unsigned char c = (unsigned char)*s;
        if (needs_escape(c)) {
            l->text[l->length++] = '%';
            l->text[l->length++] = digits[c >> 4];
            l->text[l->length++] = digits[c & 15];
        } else {
            l->text[l->length++] = (char)c;
        }
    }
}

/* add_encoded into `out` (capacity `cap`), outside the handler; false when it does not fit. */
static inline bool encode_into(char *out, size_t cap, const char *text) {
    struct line l = {.length = 0};
    add_encoded(&l, text);
    if (strlen(text) >= sizeof l.text - 4 || l.length >= cap) return false;
    memcpy(out, l.text, l.length);
    out[l.length] = '\0';
    return true;
}

static inline void emit(int fd, struct line *l) {
    add(l, "\n");
    write_all(fd, l->text, l->length);
    l->length = 0;
}

static inline pid_t current_thread(void) { return (pid_t)syscall(SYS_gettid); }

#pragma GCC visibility push(hidden)

/* writer.c: the crash file. */
/* Where crash files go and the session that names them; false when they do not fit. */
bool cc_set_destination(const char *crash_directory, const char *session_id);
/* Writes the crash file of `signal_number` on this thread, then closes it. */
void cc_write_crash_file(int signal_number, siginfo_t *info, void *context);
/* Ends the file where it is (a fault inside the writer): synced and renamed. */
void cc_close_crash_file(void);

/* module_map.c: the modules mapped, taken outside the handler and read from /proc at the crash. */
/* Notes the executable's path (the main program has no name in the loader's list). */
void cc_note_executable(void);
/* Writes the map taken at the last refresh. */
void cc_write_module_map(int fd);
/* Writes `modules_at_crash` and every ELF object mapped now, from /proc/self/maps. */
void cc_write_mapped_modules(int fd, struct line *l);

/* unwinder.c: libunwind from the signal's context, or backtrace(). */
void cc_open_unwinder(void);
void cc_warm_unwinders(void);
int cc_unwind_frames(void *context, void **frames, int cap);

/* registry.c: what the host registered ahead of a crash, and the thread's plugin mark. */
/* Makes the key that frees a prepared thread's alternate stack when it ends. */
void cc_prepare_stack_key(void);
/* This thread's mark, (plugin << 8) | call, 0 outside a plugin call. */
uint32_t cc_current_call(void);
/* Whether `mark` names a registered plugin's call (the crash is attributed to it). */
bool cc_names_plugin_call(uint32_t mark);
/* Writes the plugin and callback lines of `mark`, when it names one. */
void cc_write_attribution(int fd, struct line *l, uint32_t mark);
/* Writes an `attribute` line for each attribute set and an `attachment` line for each
   registered attachment. */
void cc_write_registered(int fd, struct line *l);

#pragma GCC visibility pop
