/* Signal-safe crash capture (SPEC D-1): on SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT or
 * SIGTRAP, write a crash file into the repository's crashes/ folder, then hand the signal
 * to the handler installed before ours (or the default action), so the process still dies
 * with that signal.
 *
 * Everything the handler needs is prepared outside it (the file path prefix, the module map,
 * attributes, attachment paths, the plugins and the callback each thread is calling); the
 * handler itself only formats numbers into a stack buffer and calls open/write/fsync/close.
 *
 * Re-entry: the handled signals are blocked while the handler runs; a fault inside the
 * writer itself (the one thread writing) ends the file where it is and ends the process
 * with the original signal; a signal on another thread while one writes waits (bounded)
 * for the writer to end the process. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Installs the handlers on an alternate stack. crash_directory and session_id are copied.
 * Returns false when the path is too long or a handler cannot be installed. Installing again
 * (a later session in the same process) replaces the directory and session only. */
bool rh_crash_install(const char *crash_directory, const char *session_id);

/* Whether rh_crash_install succeeded in this process. */
bool rh_crash_is_installed(void);

/* Registers a host-wide attribute written into every crash file (copied; replaces an
 * earlier value of the key). Keys and values with a newline are refused. Not signal-safe:
 * call outside the handler. */
bool rh_crash_set_attribute(const char *key, const char *value);

/* Removes a registered attribute. Not signal-safe. */
void rh_crash_remove_attribute(const char *key);

/* Gives the calling thread an alternate signal stack, so a stack overflow on it still
 * reaches the handler. The stack is freed when the thread ends. Does nothing before
 * rh_crash_install, or when the thread has one already. */
bool rh_crash_prepare_thread(void);

/* Registers an attachment path recorded in every crash file (copied). */
bool rh_crash_add_attachment(const char *path);

/* Re-reads the module map (call after loading a library, so the crash file can name the
 * module holding a faulting address inside it). Not signal-safe. */
void rh_crash_refresh_modules(void);

/* --- attribution (which plugin, which callback, on which thread) ----------------------- */

/* The plugin members the host calls, named in crash files (`callback <name>`). */
typedef enum {
    RH_CRASH_CALL_NONE = 0,
    RH_CRASH_CALL_LOAD,              /* dlopen: the library's constructors */
    RH_CRASH_CALL_ENTRY,             /* rh_plugin_entry */
    RH_CRASH_CALL_BEFORE,            /* on_before_report_created */
    RH_CRASH_CALL_AFTER,             /* on_after_report_created */
    RH_CRASH_CALL_DESTROY,           /* destroy */
    RH_CRASH_CALL_ADD_FIELDS,        /* add_fields_before_report_created */
    RH_CRASH_CALL_CHECK_FIELDS,      /* check_fields_after_report_created */
    RH_CRASH_CALL_ATTACHMENTS,       /* attachments_for_report */
    RH_CRASH_CALL_ATTACHMENTS_ASYNC, /* attachments_for_report_async */
    RH_CRASH_CALL_COUNT
} rh_crash_call;

/* Registers a plugin before it is opened: its real path and the sha256 of its file (both
 * copied). Returns its id (1 or more), or 0 when the table is full or a string is too long.
 * The same path and digest registered again return the same id. Not signal-safe. */
int rh_crash_register_plugin(const char *path, const char *digest);

/* Names a registered plugin once its entry returned (copied). Not signal-safe. */
void rh_crash_name_plugin(int plugin, const char *name);

/* Marks the calling thread as running `call` of `plugin` until rh_crash_leave_plugin;
 * returns the mark it replaces (pass it to rh_crash_leave_plugin, so calls nest). */
uint32_t rh_crash_enter_plugin(int plugin, rh_crash_call call);

/* Restores the mark rh_crash_enter_plugin returned. */
void rh_crash_leave_plugin(uint32_t previous);

/* The member name of `call` ("on_before_report_created", ...). */
const char *rh_crash_call_name(rh_crash_call call);

/* --- chaining (for an interposed sigaction, e.g. the LD_PRELOAD capture library) ------ */

/* Declared here too, so a strict ISO C file (no POSIX feature macro) can include this one. */
struct sigaction;

/* Whether `signal_number` is one the writer handles (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
 * SIGABRT, SIGTRAP). Signal-safe. */
bool rh_crash_handles(int signal_number);

/* Records `action` (copied) as the handler ours chains to for `signal_number`, replacing
 * the one saved at install; ours stays installed. The writer treats it exactly as the
 * saved one: a handler is called after the crash file is written; SIG_DFL ends the
 * process with the signal; SIG_IGN ignores a sent signal and ends the process on a real
 * fault. Returns false for a signal the writer does not handle, before install, for a
 * NULL action, or for an action naming our own handler. Signal-safe (a copy), but not
 * atomic against a crash on another thread at the same moment. */
bool rh_crash_set_chained(int signal_number, const struct sigaction *action);

/* Copies the action ours chains to for `signal_number` into *out (what install saved, or
 * what rh_crash_set_chained recorded). Returns false for a signal the writer does not
 * handle, before install, or for a NULL out. Signal-safe. */
bool rh_crash_get_chained(int signal_number, struct sigaction *out);

/* --- testing --------------------------------------------------------------------------- */

/* Called by the writer once the file's first lines are written (stage 1), for tests that
 * need a fault inside the writer or a signal on another thread while it writes. NULL to
 * remove. Not for production use. */
void rh_crash_set_writer_hook(void (*hook)(int stage));

/* Threads currently waiting in the handler for another thread's writer (for tests). */
int rh_crash_waiting_threads(void);

/* Crashes on purpose with `signal_number` the way a real fault would (a NULL write for
 * SIGSEGV, a division by zero for SIGFPE, an invalid instruction for SIGILL, ...). */
void rh_crash_now(int signal_number);

#ifdef __cplusplus
}
#endif
