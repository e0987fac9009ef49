#define _GNU_SOURCE
#include "capture_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

/* --- the exception handler ----------------------------------------------------------- */

static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
enum { SIGNAL_COUNT = sizeof signals / sizeof *signals };

/* Set at install; read by the handler only. */
static struct sigaction previous[SIGNAL_COUNT];
/* Whether previous[i] is the Swift runtime's own crash handler: never chained to (see
   is_swift_runtime_handler). */
static bool previous_is_swift_runtime[SIGNAL_COUNT];
static bool installed;

/* The writer: the thread writing (0: none), the signal it handles, and how many threads
   wait for it to end the process. */
static pid_t writer;
static int original_signal;
static int waiting;

/* Ends the process with `signal_number` now, whatever handler or mask is in place. */
static void die_with(int signal_number) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal_number);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    syscall(SYS_tgkill, getpid(), current_thread(), signal_number);
    _exit(128 + signal_number); /* not reached: the default action of these signals ends the process */
}

static void sleep_briefly(void) {
    struct timespec step = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    nanosleep(&step, NULL);
}

static int signal_index(int signal_number) {
    for (int i = 0; i < SIGNAL_COUNT; i++) {
        if (signals[i] == signal_number) return i;
    }
    return -1;
}

static void on_signal(int signal_number, siginfo_t *info, void *context) {
    int index = signal_index(signal_number);
    if (index < 0) die_with(signal_number);
    struct sigaction *before = &previous[index];
    /* A sent signal the program ignored before us stays ignored: no crash happened. */
    if (info->si_code <= 0 && !(before->sa_flags & SA_SIGINFO) && before->sa_handler == SIG_IGN) return;
    pid_t self = current_thread();
    pid_t none = 0;
    if (!__atomic_compare_exchange_n(&writer, &none, self, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        if (none == self) {
            /* A fault inside the writer: keep what is written and end with the original signal. */
            cc_close_crash_file();
            die_with(original_signal);
        }
        /* Another thread is writing: it ends the process. If it never does, end it here. */
        __atomic_add_fetch(&waiting, 1, __ATOMIC_SEQ_CST);
        for (int i = 0; i < WAIT_STEPS; i++) sleep_briefly();
        die_with(signal_number);
    }
    original_signal = signal_number;
    /* Every handled signal is blocked here (sa_mask); let the synchronous ones through on
       this thread, so a fault inside the writer re-enters above instead of killing the
       process with the new signal. */
    sigset_t faults;
    sigemptyset(&faults);
    sigaddset(&faults, SIGSEGV);
    sigaddset(&faults, SIGBUS);
    sigaddset(&faults, SIGILL);
    sigaddset(&faults, SIGFPE);
    sigaddset(&faults, SIGTRAP);
    pthread_sigmask(SIG_UNBLOCK, &faults, NULL);
    cc_write_crash_file(signal_number, info, context);
    pthread_sigmask(SIG_BLOCK, &faults, NULL);

    /* Chain: hand the signal to the handler that was there before ours (an embedding
       program's), called directly so ours stays installed for later signals; with none, the
       default action ends the process. If that handler returns (it recovered), so do we: the
       program goes on, and a later crash is captured again. */
    bool custom = (before->sa_flags & SA_SIGINFO) ? before->sa_sigaction != NULL
                                                  : before->sa_handler != SIG_DFL && before->sa_handler != SIG_IGN;
    if (!custom || previous_is_swift_runtime[index]) die_with(signal_number);
    /* The crash file is closed: a handler that escapes with siglongjmp (a runtime that
       recovers from faults on purpose) must find the writer free at its next fault. */
    __atomic_store_n(&writer, 0, __ATOMIC_SEQ_CST);
    if (before->sa_flags & SA_SIGINFO) {
        before->sa_sigaction(signal_number, info, context);
    } else {
        before->sa_handler(signal_number);
    }
    __atomic_store_n(&writer, 0, __ATOMIC_SEQ_CST);
}

/* --- install time ---------------------------------------------------------------------- */

/* Whether `action` is the Swift runtime's own crash handler (libswiftCore's backtracer). It
   starts `swift-backtrace`, which outlives the crash, ignores SIGTERM and keeps the program's
   stdout and stderr open: whatever reads them (a pipe, `$(…)`, a CI step) then waits for
   ever, and it prints a second crash log. The crash file already holds what it would say, so
   a crash handed to it ends the process with the default action instead. Decided at install
   (dladdr is not async-signal-safe), never in the handler. */
struct module_lookup {
    uintptr_t address;
    const char *name; /* the module holding address ("" for the program), NULL if none */
};

static int find_module(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct module_lookup *lookup = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
        if (lookup->address >= start && lookup->address < start + info->dlpi_phdr[i].p_memsz) {
            lookup->name = info->dlpi_name;
            return 1;
        }
    }
    return 0;
}

static bool is_swift_runtime_handler(const struct sigaction *action) {
    void *function = (action->sa_flags & SA_SIGINFO) ? (void *)action->sa_sigaction : (void *)action->sa_handler;
    if (function == NULL || function == (void *)SIG_DFL || function == (void *)SIG_IGN) return false;
    /* The module from the loaded segments: dladdr would also search its symbol table, half a
       millisecond for the Swift runtime's, at every start. */
    struct module_lookup lookup = {(uintptr_t)function, NULL};
    dl_iterate_phdr(find_module, &lookup);
    if (lookup.name == NULL) return false;
    const char *name = strrchr(lookup.name, '/');
    name = name != NULL ? name + 1 : lookup.name;
    if (strncmp(name, "libswiftCore.so", strlen("libswiftCore.so")) == 0) return true;
    if (lookup.name[0] != '\0') return false; /* another library's handler */
    /* A program linked with the Swift runtime statically: the handler is in the program. */
    Dl_info info;
    if (dladdr(function, &info) == 0) return false;
    return info.dli_sname != NULL && strstr(info.dli_sname, "swift") != NULL && strstr(info.dli_sname, "acktrac") != NULL;
}

/* The work of rh_crash_install, once: the unwinders, the module map, the handlers. */
static bool install(void) {
    cc_note_executable();
    cc_open_unwinder();
    rh_crash_refresh_modules();
    cc_warm_unwinders();
    cc_prepare_stack_key();
    installed = true;
    if (!rh_crash_prepare_thread()) {
        installed = false;
        return false;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < SIGNAL_COUNT; i++) sigaddset(&action.sa_mask, signals[i]);
    for (int i = 0; i < SIGNAL_COUNT; i++) {
        if (sigaction(signals[i], &action, &previous[i]) != 0) {
            installed = false;
            return false;
        }
        previous_is_swift_runtime[i] = is_swift_runtime_handler(&previous[i]);
    }
    return true;
}

bool rh_crash_install(const char *crash_directory, const char *session_id) {
    if (!cc_set_destination(crash_directory, session_id)) return false;
    if (installed) return true;
    return install();
}

bool rh_crash_is_installed(void) { return installed; }

int rh_crash_waiting_threads(void) { return __atomic_load_n(&waiting, __ATOMIC_SEQ_CST); }

void rh_crash_now(int signal_number) {
    switch (signal_number) {
    case SIGSEGV: {
        volatile int *nothing = NULL;
        *nothing = 1;
        break;
    }
    case SIGFPE: {
        volatile int zero = 0;
        volatile int result = 1 / zero;
        (void)result;
        break;
    }
#if defined(__x86_64__)
    case SIGILL: __asm__ volatile("ud2"); break;
    case SIGTRAP: __asm__ volatile("int3"); break;
#endif
    case SIGABRT: abort();
    default: break;
    }
    raise(signal_number); /* SIGBUS, and any signal the cases above did not produce */
}

/* --- chaining, for an interposed sigaction (the LD_PRELOAD capture library) ------------ */

bool rh_crash_handles(int signal_number) { return signal_index(signal_number) >= 0; }

bool rh_crash_set_chained(int signal_number, const struct sigaction *action) {
    int index = signal_index(signal_number);
    if (index < 0 || action == NULL || !installed) return false;
    /* Chaining to our own handler would only re-enter it. */
    if ((action->sa_flags & SA_SIGINFO) && action->sa_sigaction == on_signal) return false;
    /* Never a moment when the Swift runtime's handler is stored but not yet flagged. */
    bool swift_runtime = is_swift_runtime_handler(action);
    if (swift_runtime) previous_is_swift_runtime[index] = true;
    memcpy(&previous[index], action, sizeof previous[index]);
    if (!swift_runtime) previous_is_swift_runtime[index] = false;
    return true;
}

bool rh_crash_get_chained(int signal_number, struct sigaction *out) {
    int index = signal_index(signal_number);
    if (index < 0 || out == NULL || !installed) return false;
    memcpy(out, &previous[index], sizeof *out);
    return true;
}
