/* ReportHost embedding API, version 1: run the host inside your own program.
 *
 * libreporthost.so exports the functions below (the plugin ABI in plugin.h is separate:
 * plugins never call these). Link with -lreporthost, or load it with dlopen / ctypes.
 * Plain C11, valid C++17.
 *
 * WARNING: this header only grows. The names, signatures and constant values below are
 * fixed (outside tools rely on them); a new function or constant needs a new minor
 * version; removing, renaming or retyping anything needs a new major version.
 *
 * Strings passed in are UTF-8, NUL-terminated, owned by the caller and copied before the
 * call returns; buffers passed in are the caller's and written only as each function
 * says. Thread tags end every function's comment:
 *   [any-thread]        any thread, at any time;
 *   [not-in-callback]   any thread except from inside a plugin callback (a plugin's entry,
 *                       handler, delegate or destroy function) or a thread the host runs
 *                       such a callback on.
 *
 * Rationale (own main thread): the plugin ABI runs running-app callbacks, rh_plugin_entry
 * and destroy on "the host's main thread" (SPEC H-8). A C program has no run loop the
 * library could borrow, and the thread that calls rh_embed_start may block, exit or call
 * back into us at any time. So the library starts its own dedicated host thread, which
 * plays the main thread of the ABI (docs/reference/abi.md) for every plugin it loads; the program's own main
 * thread is never used for plugin code. [main-thread] in plugin.h means that thread.
 *
 * Rationale (never unloaded): libreporthost.so must never be unloaded (it is linked with
 * -z nodelete, so dlclose is a no-op). After rh_embed_stop the crash handler still lives
 * in it, and unloading Swift code crashes the Swift runtime, exactly as for plugins.
 */
#pragma once

#include <stddef.h>

#include "version.h" /* RH_LOG_* for rh_embed_breadcrumb */

#ifdef __cplusplus
extern "C" {
#endif

#define RH_EMBED_VERSION_MAJOR 1
#define RH_EMBED_VERSION_MINOR 1

/* Results of the functions that return int. */
#define RH_EMBED_OK              0
#define RH_EMBED_ERR_INVALID   (-1) /* NULL or non-UTF-8 argument, unknown type, misuse   */
#define RH_EMBED_ERR_STOPPED   (-2) /* handle stopped, stopping, not the live one, or fork  */
#define RH_EMBED_ERR_STORAGE   (-3) /* the report could not be stored durably              */
#define RH_EMBED_ERR_CANCELLED (-4) /* the handler chain produced no report: nothing stored */

/* A running host inside this process. Opaque: never dereference it.
 *
 * The pointer is a token, compared by the library, never dereferenced by it: a handle
 * that was stopped (or never was one) returns RH_EMBED_ERR_STOPPED and changes nothing,
 * and a token is never reused within the process. */
typedef struct rh_embed rh_embed;

/* Starts the host in the calling process. Returns the handle, owned by the library until
 * rh_embed_stop, or NULL on failure. Returns quickly: it never waits on the network.
 *
 * config_path: a JSON configuration file, as for `reporthost --config` (a relative path
 * resolves against the working directory, paths inside the file against the file's
 * folder), or NULL for the embedded defaults. repository: replaces the configuration's
 * `repository` folder, or NULL to keep it (default `.reporthost` in the working
 * directory). Both are copied before return.
 *
 * error: the caller's buffer of error_cap bytes. On failure it receives a one-line,
 * NUL-terminated message naming what failed and the path or value involved (an invalid
 * configuration, a plugin that refuses to load, an unusable repository, a second live
 * handle), truncated to error_cap - 1 bytes at a UTF-8 character boundary; on success
 * it receives "". error may be NULL only when error_cap is 0.
 *
 * In order, start: takes the repository lock (below); marks its session as running
 * (SPEC D-16); installs crash capture in the calling process (handlers for SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGABRT and SIGTRAP that write a crash file into the
 * repository's crashes/ folder and then chain to the handler the program had installed
 * before: install yours first, since a handler installed after start replaces ours for
 * that signal); loads the configured plugins on the host's own main thread; and then,
 * in the background, recovers what earlier runs left (crash files, abnormal exits: SPEC
 * D-1) and delivers stored reports. Logging goes to the configuration's destinations (by
 * default stderr at `info`). Unlike the `reporthost` executable, start leaves the
 * process's file descriptors and its SIGINT, SIGTERM and SIGPIPE dispositions alone.
 *
 * Only one handle is live per process: a second start while one is live returns NULL
 * with a message. A start after rh_embed_stop is allowed (crash capture, installed
 * once, then writes into the new repository under the new session).
 *
 * Secondary process: when another process (another copy of the program, or a
 * `reporthost` command) holds the repository lock, start does not wait 10 s as the
 * command line does not either (SPEC I-2): it runs at once as a *secondary* process. A
 * secondary marks its session, writes crash files into the shared repository's crashes/
 * folder, stores its reports through SQLite (WAL, with a busy timeout), so nothing it
 * raises is lost, and makes the initial attempt of its own reports; but it recovers no
 * other session's crash files or abnormal exits and retries nothing. Those are left to the process holding
 * the lock, or to the next one that takes it (a later start, `reporthost launch`). A
 * secondary stays secondary until rh_embed_stop, even if the holder stops first, and a
 * session whose process is still running is never reported as an abnormal exit.
 *
 * Rationale (secondary process): a program that is started twice (two windows, a worker
 * pool) must not stall its start-up for 10 s, nor fail to capture crashes, because
 * another copy of itself is running; one process at a time recovering and delivering
 * keeps the SPEC's single-owner rules for recovery and submission.
 *
 * Call rh_embed_stop before the process exits normally: a session still marked at the
 * next start is reported as an abnormal exit (SPEC D-16).
 *
 * fork(): the handle belongs to the process that called rh_embed_start. In a forked child
 * every call with it returns RH_EMBED_ERR_STOPPED at once and stores nothing (the host's
 * threads, its main thread and its delivery worker, do not survive fork, and the parent
 * still owns the session and the lock); the child's rh_embed_stop returns at once and
 * leaves the parent's host running. Crash capture still writes the child's crash files
 * (under the parent's session). A child that needs reports starts a host of its own after
 * exec.
 *
 * Closed standard descriptors: when fd 0, 1 or 2 is closed at rh_embed_start, the library
 * opens /dev/null there (close-on-exec, for the life of the process), so its lock file,
 * database and sockets never become the program's standard input or output.
 * [not-in-callback] */
rh_embed *rh_embed_start(const char *config_path, const char *repository, char *error, size_t error_cap);

/* Sets a host-wide attribute, merged into every report whose first callback starts after
 * the call (SPEC R-4: above the configuration's `attributes`), and written into crash
 * files. value NULL removes the key (RH_EMBED_OK whether or not it existed). key and
 * value: copied before return.
 *
 * Returns RH_EMBED_OK; RH_EMBED_ERR_INVALID for a NULL or empty key, a key holding '='
 * or a newline, non-UTF-8 text, a key or value over 64 KiB, or a new key past 1,000
 * host-wide attributes (nothing changes); RH_EMBED_ERR_STOPPED for a handle that is not
 * the live one. Crash files carry at most 64 attributes, each `key=value` of at most 511 bytes
 * with no newline in the value; an attribute past those limits still applies to
 * running-app reports and the host logs that crash files omit it. [any-thread] */
int rh_embed_set_attribute(rh_embed *h, const char *key, const char *value);

/* Raises a running-app report and stores it durably; delivery happens later, in the
 * background (never during this call).
 *
 * type: "bug" (trigger `upload`), "error" (trigger `log_error`) or "exception" (trigger
 * `log_exception`, type error); anything else is RH_EMBED_ERR_INVALID. summary and
 * description: NULL for absent. All three are copied before return. The report carries
 * the host-wide attributes and the attachments this thread added since its last report
 * (rh_embed_add_attachment).
 *
 * Blocks the calling thread while the handler chain runs (SPEC H-6, is_terminating
 * false, callbacks on the host's own main thread) and until the report is stored: at
 * most the SPEC limits (30 s per callback, 60 s for the whole chain; configurable under
 * `limits`) plus the time to write it.
 *
 * report_id: the caller's buffer of 37 bytes, or NULL. On RH_EMBED_OK it receives the
 * report id (a lowercase UUID, 36 characters and a NUL), the id the receiving server
 * shows; on any other result it receives "".
 *
 * Returns RH_EMBED_OK once the report is stored; RH_EMBED_ERR_INVALID for a bad argument
 * or a call from inside a plugin callback (nothing is raised); RH_EMBED_ERR_STOPPED for
 * a handle that is not the live one, or one whose stop began before the report was
 * journaled; RH_EMBED_ERR_STORAGE when it could not be stored; RH_EMBED_ERR_CANCELLED
 * when the chain ended without a report (nothing stored; not reachable with the 1.0
 * types, which have no dialog: treat it as "nothing to do"). A stop that begins while the
 * chain runs skips the remaining callbacks (logged) and the report is still stored
 * (SPEC H-15).
 *
 * Rationale: a callback runs on the host's main thread and may wait on this very call's
 * chain, so a report raised from inside a callback would wait for itself; the library
 * refuses it instead of deadlocking for the callback limit. [not-in-callback] */
int rh_embed_report(rh_embed *h, const char *type, const char *summary, const char *description,
                    char report_id[37]);

/* Adds a file to send with the next report raised by the calling thread (rh_embed_report
 * on this thread), as the `extended` source of SPEC R-7: at most 3 files of at most 3 MB
 * (3 x 1024 x 1024 bytes) each per report.
 *
 * path: copied before return; a relative path resolves against the working directory at
 * this call. The file is read (and copied into the repository, SPEC D-3) when the report
 * is raised, not now; the attachment is named after the file's last path component. A
 * file that is then missing, unreadable, empty or over 3 MB is dropped and noted in the
 * report's internal log; the report is still stored. Paths not yet used are discarded by
 * rh_embed_stop. Crash files do not carry these files.
 *
 * Returns RH_EMBED_OK; RH_EMBED_ERR_INVALID for a NULL, empty or non-UTF-8 path, or a
 * fourth path pending on this thread (it is not kept); RH_EMBED_ERR_STOPPED for a handle
 * that is not the live one. [any-thread] */
int rh_embed_add_attachment(rh_embed *h, const char *path);

/* Stops the host cleanly. NULL, or a handle that is not the live one, is a no-op.
 *
 * New calls with h return RH_EMBED_ERR_STOPPED from the moment stop begins; reports
 * already journaled are finished and stored (SPEC H-15). A delivery attempt in flight is
 * given at most 2 s to finish, then cancelled (within about a second) and settled as a
 * retryable failure, due at once; what is not delivered stays stored for the next start
 * (or `reporthost launch`). Plugins' destroy functions run on the host's main thread, which
 * then ends; the library never dlcloses a plugin. The session mark is cleared and the
 * repository lock released. Returns once all of that is done; h is invalid afterwards.
 *
 * Crash capture stays installed after stop (the program may have chained its own
 * handler behind ours, so ours cannot be removed safely): a later crash is still written
 * into the last repository's crashes/ folder and recovered by the next start. Must not
 * be called from inside a plugin callback (it would wait for itself): such a call does
 * nothing. Called in a forked child, it returns at once and does nothing. [not-in-callback] */
void rh_embed_stop(rh_embed *h);

/* ---- 1.1 (SPEC B-1, B-3): breadcrumbs and crash loops ---- */

/* Leaves a breadcrumb: one line of what the program is doing, kept in the session's ring
 * file in the repository (breadcrumbs/<session>.ring, mapped into memory) and attached,
 * oldest first, to every report of this session and to the crash or abnormal exit the next
 * start recovers for it: the ring is in the page cache, so a SIGKILL or an OOM kill keeps
 * it. The last `breadcrumbs.max` (default 100) are kept.
 *
 * level: RH_LOG_DEBUG, RH_LOG_INFO, RH_LOG_WARN or RH_LOG_ERROR (plugin.h's values, 0-3).
 * category: a short name (NULL: "default"; cut to 64 bytes); message: the text (cut so
 * that category and message fit 988 bytes, at a UTF-8 character boundary). Both UTF-8,
 * copied before return.
 *
 * Never blocks: no lock, no allocation, no system call, no flush (a copy into a mapped slot
 * of a lane the calling thread writes alone, with a checksum that lets the reader skip a
 * slot a kill left half written; threads beyond the ring's lanes and signal handlers share
 * one lane, with one atomic operation). Breadcrumbs of several threads are ordered by the
 * processor's timestamp counter where the kernel's clock runs on it, by one shared
 * sequence elsewhere. Safe from any thread, and from a signal handler.
 *
 * Returns RH_EMBED_OK (also with breadcrumbs off, `breadcrumbs.max` 0: nothing is recorded);
 * RH_EMBED_ERR_INVALID for a level outside 0-3, a NULL message, or text that is not UTF-8
 * (nothing is written); RH_EMBED_ERR_STOPPED for a handle that is not the live one, once stop
 * has begun, or in a forked child. [any-thread] */
int rh_embed_breadcrumb(rh_embed *h, int level, const char *category, const char *message);

/* How many sessions in a row before this one ended in a crash or an abnormal exit (0 when
 * the last one stopped cleanly, or there was none): known when rh_embed_start returns, so
 * a program can choose a safe mode (no plugins, not its last document) before it loads
 * what crashed it. Sessions of other processes still running are not counted. Returns the
 * count, or RH_EMBED_ERR_STOPPED for a handle that is not the live one. [any-thread] */
int rh_embed_consecutive_crashes(rh_embed *h);

/* ---- 1.1 (SPEC B-4): app hangs ---- */

/* Watches the calling thread: when rh_embed_heartbeat does not come from it within
 * timeout_ms, the thread is hung. The host then reads its stack from outside (the helper
 * `reporthost-stack` beside the library traces the thread for a moment with ptrace; the
 * thread's blocking call goes on as if nothing happened) and raises one report of type
 * `error`, trigger `app_hang`, with the stack symbolicated like a crash's, the thread in the
 * attribute `_mod_faulting_tid`, and the session's breadcrumbs. One report per hang: the
 * next comes only after a heartbeat. When the heartbeat returns, the hang's length is set on
 * the report (`reporthost.hang_ms`) if it has not been sent yet, else logged.
 *
 * Threads found hung at the same moment share one report: `reporthost.hang_threads` says how
 * many, and `crash.threads` holds the stacks of the first 16. The helper has 1 s: a thread
 * that does not stop in that time (an uninterruptible wait: the parent of a vfork, a disk or
 * network file system) is reported without its stack, and `reporthost.hang_stack_missing`
 * says why. A watch ends with its thread: a watched thread that exits is never reported.
 * rh_embed_stop waits for a hang's report at most 2 s (the helper is killed at once). Where
 * Yama restricts ptrace, the process allows the helper to trace it while it runs
 * (prctl PR_SET_PTRACER), then allows no tracer again.
 *
 * timeout_ms: > 0; 0 stops watching the calling thread. Returns RH_EMBED_OK;
 * RH_EMBED_ERR_INVALID for a negative timeout; RH_EMBED_ERR_STORAGE when the watchdog thread
 * cannot be started; RH_EMBED_ERR_STOPPED for a handle that is not the live one. [any-thread] */
int rh_embed_watch_thread(rh_embed *h, int timeout_ms);

/* The calling thread is alive: call it from the watched thread's loop. Nothing for a thread
 * that is not watched or a handle that is not the live one. [any-thread] */
void rh_embed_heartbeat(rh_embed *h);

#ifdef __cplusplus
}
#endif
