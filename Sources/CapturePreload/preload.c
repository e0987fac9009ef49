/* libreporthost-capture.so: crash capture for an unmodified program, by LD_PRELOAD.
 *
 * `reporthost run -- PROGRAM` starts PROGRAM with LD_PRELOAD naming this library and the
 * environment of capture_preload.h. How it works:
 *
 * 1. Load. A constructor reads REPORTHOST_CAPTURE_DIR and REPORTHOST_CAPTURE_SESSION. When
 *    either is unset or empty it does nothing at all and every call below passes straight
 *    through: the program runs as if we were not there. Otherwise it checks them, installs
 *    the signal-safe crash writer (rh_crash_install: handlers for SIGSEGV, SIGBUS, SIGILL,
 *    SIGFPE, SIGABRT and SIGTRAP on an alternate stack, chaining to whatever was installed
 *    before), registers REPORTHOST_CAPTURE_ATTRIBUTES, and then puts a thin trampoline
 *    (on_capture_signal) in front of the writer's handler. It prints nothing unless the
 *    variables are set but capture cannot be installed: then one line on fd 2, prefixed
 *    "reporthost-capture: ", and the program still runs, uncaptured.
 *
 * 2. sigaction() and signal() are interposed (the real sigaction is found with
 *    dlsym(RTLD_NEXT), at load or on first use). While capture is on, a program setting a
 *    handler for one of the writer's signals does not replace ours: its action (a handler,
 *    SIG_DFL or SIG_IGN) is recorded with rh_crash_set_chained and `oldact` is filled from
 *    rh_crash_get_chained, so the program sees its own previous action. On a crash the
 *    writer writes the crash file, then applies the recorded action as it does for the one
 *    saved at install: a handler is called (SA_SIGINFO or not); SIG_DFL ends the process
 *    with the signal; SIG_IGN ignores a signal sent with kill() and ends the process on a
 *    real fault (as the kernel does). Other signals, and every call before capture is on,
 *    pass straight through. signal(), bsd_signal() (BSD: SA_RESTART, the signal blocked in
 *    its handler) and sysv_signal() / __sysv_signal() (what signal() becomes in a strict
 *    ISO C program: SA_RESETHAND | SA_NODEFER) are built on the interposed sigaction.
 *
 * 3. Calls that must reach the kernel do. rh_crash_install runs before capture is on, so
 *    its sigaction calls pass through. Inside the handler (the trampoline counts the
 *    depth per thread), every sigaction call for a handled signal passes through too: the
 *    writer's own die_with() reset to SIG_DFL, and a program handler that restores the
 *    default and re-raises (the usual pattern, e.g. Python's faulthandler), which then
 *    dies with its signal after one crash file instead of re-entering ours. Once such a
 *    call has replaced our handler, that signal is "released" and later calls for it pass
 *    through (until the program puts back the action it read, which is ours).
 *    A recorded handler with SA_RESETHAND is honoured as the kernel would: on delivery the
 *    signal is reset to SIG_DFL (released) before the writer runs and calls the handler
 *    once, so a handler that returns from a fault lets the re-fault end the process.
 *
 * Limits:
 * - A statically linked program, one that calls the rt_sigaction system call itself (Go's
 *   runtime does) or glibc's internal paths (sigset(), siginterrupt(), abort()'s own
 *   reset) bypass the interposer; a setuid or setgid program ignores LD_PRELOAD.
 * - A recorded handler is called from inside ours: its sa_mask and SA_NODEFER are not
 *   applied, and it runs on our alternate stack. A handler that leaves by siglongjmp
 *   leaves the writer (and the depth count above) as if still inside the handler, so a
 *   later crash on that thread ends the process without a new crash file.
 * - Only the main thread gets an alternate signal stack: a stack overflow on a thread the
 *   program creates is not captured (the process still dies with SIGSEGV).
 * - Child processes inherit LD_PRELOAD and the variables, so they are captured too (crash
 *   file names carry the pid); a program that clears its environment stops that.
 * - A crash exactly while another thread swaps its handler may chain to either one.
 * - A program that embeds ReportHost (libreporthost.so: its handler's object exports
 *   rh_embed_start) captures its own crashes: each signal its host installs is handed to it
 *   whole (the host writes the one crash file, with the program's breadcrumbs) and stays
 *   released, so a crash after the program stops its host is not captured here.
 */
#define _GNU_SOURCE
#include "capture_preload.h"
#include "crash_capture.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*sigaction_function)(int, const struct sigaction *, struct sigaction *);
typedef void (*siginfo_handler)(int, siginfo_t *, void *);

/* The libc sigaction, published once resolved. */
static sigaction_function next_sigaction;
/* Set once the writer is installed and the trampoline is in front of it. */
static volatile sig_atomic_t capturing;
/* Signals whose handler in the kernel is no longer ours (see 3. above). */
static volatile sig_atomic_t released[NSIG];
/* The writer's handler, called by the trampoline. */
static siginfo_handler writer_handler;
/* How deep the calling thread is inside our handler. initial-exec: read without calling
   into the dynamic linker, in a handler. */
static __thread int handler_depth __attribute__((tls_model("initial-exec")));
/* Serialises record-and-read of chained actions between threads (signals blocked). */
static int table_lock;

static sigaction_function resolve_next_sigaction(void) {
    sigaction_function function = __atomic_load_n(&next_sigaction, __ATOMIC_ACQUIRE);
    if (function != NULL) return function;
    void *symbol = dlsym(RTLD_NEXT, "sigaction");
    if (symbol == NULL) return NULL;
    memcpy(&function, &symbol, sizeof function);
    __atomic_store_n(&next_sigaction, function, __ATOMIC_RELEASE);
    return function;
}

static int real_sigaction(int signal_number, const struct sigaction *action, struct sigaction *old) {
    sigaction_function function = resolve_next_sigaction();
    if (function == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return function(signal_number, action, old);
}

static bool is_custom(const struct sigaction *action) {
    if (action->sa_flags & SA_SIGINFO) return action->sa_sigaction != NULL;
    return action->sa_handler != SIG_DFL && action->sa_handler != SIG_IGN;
}

static void on_capture_signal(int signal_number, siginfo_t *info, void *context);

static bool is_ours(const struct sigaction *action) {
    return (action->sa_flags & SA_SIGINFO) && action->sa_sigaction == on_capture_signal;
}

/* --- the trampoline ------------------------------------------------------------------- */

static void on_capture_signal(int signal_number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    handler_depth++;
    if (signal_number > 0 && signal_number < NSIG && !released[signal_number]) {
        struct sigaction chained;
        if (rh_crash_get_chained(signal_number, &chained) && is_custom(&chained) &&
            (chained.sa_flags & SA_RESETHAND)) {
            /* The kernel would reset the disposition on delivery: do it for the program's
               handler, so its return from a fault lets the re-fault end the process. */
            struct sigaction default_action;
            memset(&default_action, 0, sizeof default_action);
            default_action.sa_handler = SIG_DFL;
            if (sigemptyset(&default_action.sa_mask) == 0 &&
                real_sigaction(signal_number, &default_action, NULL) == 0) {
                released[signal_number] = 1;
            }
        }
    }
    writer_handler(signal_number, info, context);
    handler_depth--;
    errno = saved_errno;
}

/* --- a program that embeds ReportHost ----------------------------------------------------- */

/* Whether `action` is the crash handler of ReportHost embedded in the program: its object
 * exports rh_embed_start itself (not through a dependency). Called outside any handler. */
static bool is_embedded_host(const struct sigaction *action) {
    if (!is_custom(action)) return false;
    void *handler;
    if (action->sa_flags & SA_SIGINFO) memcpy(&handler, &action->sa_sigaction, sizeof handler);
    else memcpy(&handler, &action->sa_handler, sizeof handler);
    Dl_info where, entry;
    if (dladdr(handler, &where) == 0 || where.dli_fname == NULL) return false;
    void *object = dlopen(where.dli_fname[0] != '\0' ? where.dli_fname : NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (object == NULL) return false;
    void *start = dlsym(object, "rh_embed_start");
    bool embedded = start != NULL && dladdr(start, &entry) != 0 && entry.dli_fbase == where.dli_fbase;
    dlclose(object); /* a RTLD_NOLOAD handle: only its reference, the object stays */
    return embedded;
}

/* `<crash folder>/<session>.host`: tells `reporthost run` that the program's own host keeps
 * its session (and its crash files, under that session), so run records none of its own. */
static char host_marker[RH_CAPTURE_DIR_MAX + RH_CAPTURE_SESSION_MAX + 8];

/* Gives the signal to the embedded host whole: it writes the crash file (with the program's
 * breadcrumbs and attributes), so one crash is one report, never two. The host reads the
 * program's own previous action as the one before it, never ours, and chains to that. The
 * signal stays released afterwards (see Limits). */
static int hand_over(int signal_number, const struct sigaction *host, struct sigaction *old) {
    struct sigaction previous;
    if (!rh_crash_get_chained(signal_number, &previous)) return -1;
    if (real_sigaction(signal_number, host, NULL) != 0) return -1;
    released[signal_number] = 1;
    if (old != NULL) memcpy(old, &previous, sizeof *old);
    int marker = host_marker[0] ? open(host_marker, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    if (marker >= 0) close(marker);
    return 0;
}

/* --- the interposed functions ---------------------------------------------------------- */

static void lock_table(void) {
    while (__atomic_exchange_n(&table_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
}

static void unlock_table(void) { __atomic_store_n(&table_lock, 0, __ATOMIC_RELEASE); }

/* Passes a call through to the kernel and keeps `released` in step with what is there. */
static int pass_through(int signal_number, const struct sigaction *action, struct sigaction *old) {
    int result = real_sigaction(signal_number, action, old);
    if (result == 0 && action != NULL) released[signal_number] = is_ours(action) ? 0 : 1;
    return result;
}

int sigaction(int signal_number, const struct sigaction *restrict action, struct sigaction *restrict old) {
    if (!capturing || !rh_crash_handles(signal_number)) return real_sigaction(signal_number, action, old);
    if (handler_depth > 0 || released[signal_number]) return pass_through(signal_number, action, old);

    /* Copied first, so a bad pointer faults here, outside the lock, and old may alias it. */
    struct sigaction wanted;
    if (action != NULL) memcpy(&wanted, action, sizeof wanted);
    if (action != NULL && is_embedded_host(&wanted) && hand_over(signal_number, &wanted, old) == 0) return 0;

    sigset_t all, saved;
    if (sigfillset(&all) != 0 || pthread_sigmask(SIG_SETMASK, &all, &saved) != 0) {
        errno = EINVAL;
        return -1;
    }
    lock_table();
    bool through = released[signal_number] != 0;
    struct sigaction chained;
    bool recorded = false;
    if (!through && rh_crash_get_chained(signal_number, &chained)) {
        /* Putting back ours (read earlier through a passed-through call) changes nothing. */
        recorded = action == NULL || is_ours(&wanted) || rh_crash_set_chained(signal_number, &wanted);
    }
    unlock_table();
    if (pthread_sigmask(SIG_SETMASK, &saved, NULL) != 0) {
        /* Cannot happen with a mask pthread_sigmask itself returned; nothing to undo. */
    }
    if (through || !recorded) return pass_through(signal_number, action, old);
    if (old != NULL) memcpy(old, &chained, sizeof *old);
    return 0;
}

static sighandler_t set_simple(int signal_number, sighandler_t handler, int flags) {
    if (handler == SIG_ERR || signal_number < 1 || signal_number >= NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction action, old;
    memset(&action, 0, sizeof action);
    memset(&old, 0, sizeof old);
    action.sa_handler = handler;
    action.sa_flags = flags;
    if (sigemptyset(&action.sa_mask) != 0) return SIG_ERR;
    if (!(flags & SA_NODEFER) && sigaddset(&action.sa_mask, signal_number) != 0) return SIG_ERR;
    if (sigaction(signal_number, &action, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

/* glibc's signal(): BSD semantics. */
sighandler_t signal(int signal_number, sighandler_t handler) {
    return set_simple(signal_number, handler, SA_RESTART);
}

sighandler_t bsd_signal(int signal_number, sighandler_t handler);
sighandler_t bsd_signal(int signal_number, sighandler_t handler) {
    return set_simple(signal_number, handler, SA_RESTART);
}

/* System V semantics: what signal() is in a program built without _DEFAULT_SOURCE. */
sighandler_t __sysv_signal(int signal_number, sighandler_t handler) {
    return set_simple(signal_number, handler, SA_RESETHAND | SA_NODEFER);
}

sighandler_t sysv_signal(int signal_number, sighandler_t handler) {
    return set_simple(signal_number, handler, SA_RESETHAND | SA_NODEFER);
}

/* --- load ----------------------------------------------------------------------------- */

static void say(const char *text) {
    size_t length = strlen(text), done = 0;
    while (done < length) {
        ssize_t n = write(STDERR_FILENO, text + done, length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        done += (size_t)n;
    }
}

static void fail(const char *reason) {
    say("reporthost-capture: crash capture not installed: ");
    say(reason);
    say("\n");
}

static void register_attributes(const char *text) {
    if (text == NULL) return;
    size_t length = strnlen(text, RH_CAPTURE_ATTRIBUTES_MAX + 1);
    if (length > RH_CAPTURE_ATTRIBUTES_MAX) return; /* over the bound: ignored as a whole */
    char copy[RH_CAPTURE_ATTRIBUTES_MAX + 1];
    memcpy(copy, text, length);
    copy[length] = '\0';
    int pairs = 0;
    char *line = copy;
    while (line != NULL && pairs < RH_CAPTURE_ATTRIBUTE_PAIRS_MAX) {
        char *next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        char *equals = strchr(line, '=');
        if (equals != NULL && equals != line) {
            *equals = '\0';
            pairs++;
            /* A pair the writer refuses (too long, table full) is left out of crash files. */
            bool kept = rh_crash_set_attribute(line, equals + 1);
            (void)kept;
        }
        line = next;
    }
}

/* Puts the trampoline in front of the writer's handler for every handled signal. */
static bool install_trampoline(void) {
    for (int signal_number = 1; signal_number < NSIG; signal_number++) {
        if (!rh_crash_handles(signal_number)) continue;
        struct sigaction current;
        if (real_sigaction(signal_number, NULL, &current) != 0) return false;
        if (!(current.sa_flags & SA_SIGINFO) || current.sa_sigaction == NULL) return false;
        if (current.sa_sigaction == on_capture_signal) continue;
        if (writer_handler != NULL && writer_handler != current.sa_sigaction) return false;
        writer_handler = current.sa_sigaction;
        current.sa_sigaction = on_capture_signal;
        if (real_sigaction(signal_number, &current, NULL) != 0) return false;
    }
    return writer_handler != NULL;
}

__attribute__((constructor)) static void capture_load(void) {
    if (resolve_next_sigaction() == NULL) return; /* nothing installed; calls fail with ENOSYS */
    const char *folder = getenv(RH_CAPTURE_ENV_DIR);
    const char *session = getenv(RH_CAPTURE_ENV_SESSION);
    if (folder == NULL || session == NULL || folder[0] == '\0' || session[0] == '\0') return;
    if (strnlen(folder, RH_CAPTURE_DIR_MAX + 1) > RH_CAPTURE_DIR_MAX) {
        fail(RH_CAPTURE_ENV_DIR " is longer than 4096 bytes");
        return;
    }
    if (strnlen(session, RH_CAPTURE_SESSION_MAX + 1) > RH_CAPTURE_SESSION_MAX) {
        fail(RH_CAPTURE_ENV_SESSION " is longer than 128 bytes");
        return;
    }
    if (strpbrk(session, "/\n") != NULL) {
        fail(RH_CAPTURE_ENV_SESSION " holds '/' or a newline");
        return;
    }
    int probe = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (probe < 0) {
        fail(RH_CAPTURE_ENV_DIR " is not an openable folder");
        return;
    }
    if (close(probe) != 0) {
        /* The descriptor is gone either way; the folder was there. */
    }
    if (!rh_crash_install(folder, session)) {
        fail("the crash folder path or the session id is too long for the writer, or sigaction failed");
        return;
    }
    if (!install_trampoline()) {
        /* The writer stays in place, but a handler the program sets replaces it. */
        fail("the writer's handler could not be wrapped (capture lasts until the program sets a handler)");
        return;
    }
    /* Already done by rh_crash_install for this thread; true when the stack is there. */
    if (!rh_crash_prepare_thread()) fail("no alternate signal stack (a stack overflow is not captured)");
    register_attributes(getenv(RH_CAPTURE_ENV_ATTRIBUTES));
    snprintf(host_marker, sizeof host_marker, "%s/%s.host", folder, session);
    capturing = 1;
}
