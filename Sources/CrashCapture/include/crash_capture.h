/* Signal-safe crash capture (SPEC D-1): on SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT or
 * SIGTRAP, write a crash file into the repository's crashes/ folder, then restore the
 * default action and re-raise, so the process still dies with that signal.
 *
 * Everything the handler needs is prepared at install time (the file path prefix, the
 * module map, attributes, attachment paths); the handler itself only formats numbers into a
 * stack buffer and calls open/write/fsync/close. */
#pragma once

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Installs the handlers on an alternate stack. crash_directory and session_id are copied.
 * Returns false when the path is too long or a handler cannot be installed. */
bool rh_crash_install(const char *crash_directory, const char *session_id);

/* Registers a host-wide attribute written into every crash file (copied; replaces an
 * earlier value of the key). Keys and values with a newline are refused. Not signal-safe:
 * call outside the handler. */
bool rh_crash_set_attribute(const char *key, const char *value);

/* Removes a registered attribute. Not signal-safe. */
void rh_crash_remove_attribute(const char *key);

/* Gives the calling thread an alternate signal stack (allocated here, never freed), so a
   stack overflow on it still reaches the handler. Call on every thread that runs plugin
   code; rh_crash_install covers the thread that calls it. */
bool rh_crash_prepare_thread(void);

/* Registers an attachment path recorded in every crash file (copied). */
bool rh_crash_add_attachment(const char *path);

/* Crashes on purpose with `signal_number` the way a real fault would (a NULL write for
 * SIGSEGV, a division by zero for SIGFPE, an invalid instruction for SIGILL, ...). */
void rh_crash_now(int signal_number);

#ifdef __cplusplus
}
#endif
