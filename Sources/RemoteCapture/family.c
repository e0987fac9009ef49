/* `run --capture=ptrace`: tracing a program and its whole family (threads, fork, vfork,
   clone, exec) and writing one crash file for each process that crashes (SPEC B-6). */
#define _GNU_SOURCE
#include "remote_capture.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long the program's family is given to stop for detaching once the program ended. */
#define DETACH_DEADLINE_MS 1000

static void fail(char *error, size_t cap, const char *format, ...) {
    if (!error || cap == 0) return;
    va_list args;
    va_start(args, format);
    vsnprintf(error, cap, format, args);
    va_end(args);
}

/* The tracees (each thread of the program and of every process it started) and the
   processes (by thread group id) that already have their crash file. */
struct family {
    pid_t *members;
    int count, cap;
    pid_t *recorded; /* processes with a crash file (forgotten at exec) */
    int recorded_count, recorded_cap;
    int written;     /* crash files written (each file's name counts them) */
};

static pid_t *member(struct family *family, pid_t tid) {
    for (int i = 0; i < family->count; i++)
        if (family->members[i] == tid) return &family->members[i];
    return NULL;
}

/* Adds `tid` (false: it was known). Memory that cannot grow leaves it untracked: it is still
   traced, only not detached by name at the end (the tracer's exit detaches it). */
static bool join(struct family *family, pid_t tid) {
    if (member(family, tid)) return false;
    if (family->count == family->cap) {
        int cap = family->cap ? family->cap * 2 : 64;
        pid_t *grown = realloc(family->members, (size_t)cap * sizeof *grown);
        if (!grown) return true;
        family->members = grown;
        family->cap = cap;
    }
    family->members[family->count++] = tid;
    return true;
}

static void leave(struct family *family, pid_t tid) {
    pid_t *found = member(family, tid);
    if (found) *found = family->members[--family->count];
}

static bool was_recorded(const struct family *family, pid_t process) {
    for (int i = 0; i < family->recorded_count; i++)
        if (family->recorded[i] == process) return true;
    return false;
}

static void set_recorded(struct family *family, pid_t process, bool recorded) {
    for (int i = 0; i < family->recorded_count; i++) {
        if (family->recorded[i] != process) continue;
        if (!recorded) family->recorded[i] = family->recorded[--family->recorded_count];
        return;
    }
    if (!recorded) return;
    if (family->recorded_count == family->recorded_cap) {
        int cap = family->recorded_cap ? family->recorded_cap * 2 : 16;
        pid_t *grown = realloc(family->recorded, (size_t)cap * sizeof *grown);
        if (!grown) return;
        family->recorded = grown;
        family->recorded_cap = cap;
    }
    family->recorded[family->recorded_count++] = process;
}

/* The process (thread group) of thread `tid`, from /proc/<tid>/status; `tid` when unknown. */
static pid_t process_of(pid_t tid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)tid);
    FILE *in = fopen(path, "re");
    if (!in) return tid;
    pid_t process = tid;
    while (fgets(line, sizeof line, in)) {
        if (strncmp(line, "Tgid:", 5) == 0) {
            process = (pid_t)atoi(line + 5);
            break;
        }
    }
    fclose(in);
    return process;
}

/* Writes the crash file of thread `tid` (of `pid`), stopped at the delivery of `info`. The
   file is made `.partial`, flushed, then renamed: recovery never reads half of it. */
static bool write_crash(const char *dir, const char *session, int number, pid_t pid, pid_t tid, const siginfo_t *info) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char path[4096], partial[4200];
    snprintf(path, sizeof path, "%s/%s-%lld-%d-%d-%d.crash", dir, session, (long long)now.tv_sec, (int)pid, (int)tid, number);
    snprintf(partial, sizeof partial, "%s.partial", path);
    int fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    FILE *out = fdopen(fd, "w");
    if (!out) {
        close(fd);
        unlink(partial);
        return false;
    }
    fprintf(out, "reporthost-crash 1\nsession %s\nsignal %d\ncode %d\n", session, info->si_signo, info->si_code);
    bool fault = info->si_signo == SIGSEGV || info->si_signo == SIGBUS || info->si_signo == SIGILL || info->si_signo == SIGFPE;
    if (fault && info->si_code > 0) fprintf(out, "address 0x%lx\n", (unsigned long)(uintptr_t)info->si_addr);
    if (info->si_code <= 0) fprintf(out, "sender_pid %d\nsender_uid %u\n", (int)info->si_pid, (unsigned)info->si_uid);
    fprintf(out, "thread %d\npid %d\ntime %lld\ncapture ptrace\n", (int)tid, (int)pid, (long long)now.tv_sec);
    rh_trace_write_thread(out, pid, tid);
    fprintf(out, "end\n");
    bool ok = fflush(out) == 0 && fsync(fd) == 0;
    fclose(out);
    if (ok && rename(partial, path) == 0) return true;
    unlink(partial);
    return false;
}

static bool is_fatal(int signal) {
    return signal == SIGSEGV || signal == SIGBUS || signal == SIGILL || signal == SIGFPE || signal == SIGABRT || signal == SIGTRAP ||
           signal == SIGSYS;
}

/* A fatal signal on its way to `tid`: the crash file of its process, unless the process has
   one already (a crash of many threads, a handler that raises the signal again: one record). */
static void crashed(struct family *family, const char *dir, const char *session, pid_t tid, int signal) {
    siginfo_t info;
    pid_t process = process_of(tid);
    if (!is_fatal(signal) || was_recorded(family, process) || ptrace(PTRACE_GETSIGINFO, tid, NULL, &info) != 0) return;
    if (write_crash(dir, session, family->written + 1, process, tid, &info)) {
        family->written++;
        set_recorded(family, process, true);
    }
}

static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Once the program ended, lets the processes it left go on untraced: each is interrupted and
   detached as it stops (with the signal it was stopped for). One that does not stop within
   the deadline stays traced until this process exits, which detaches it (children are traced
   without PTRACE_O_EXITKILL: the tracer's end never kills them). */
static void detach_family(struct family *family) {
    for (int i = 0; i < family->count; i++) ptrace(PTRACE_INTERRUPT, family->members[i], NULL, NULL);
    long long deadline = now_ms() + DETACH_DEADLINE_MS;
    while (family->count > 0 && now_ms() < deadline) {
        int status = 0;
        pid_t tid = waitpid(-1, &status, __WALL | WNOHANG);
        if (tid < 0 && errno == EINTR) continue;
        if (tid < 0) break;
        if (tid == 0) {
            struct timespec wait = {0, 1000 * 1000};
            nanosleep(&wait, NULL);
            continue;
        }
        if (!WIFSTOPPED(status)) {
            leave(family, tid);
            continue;
        }
        /* An event stop (the interrupt) has no signal to pass on; a signal-delivery stop has. */
        ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)((status >> 16) != 0 ? 0 : WSTOPSIG(status)));
        leave(family, tid);
    }
}

/* Seizes the stopped trampoline; false with `error` filled when it cannot be traced (it is
   then killed and reaped). */
static bool seize(pid_t pid, char *error, size_t error_cap) {
    long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL;
    if (ptrace(PTRACE_SEIZE, pid, NULL, (void *)options) == 0) return true;
    fail(error, error_cap, "cannot trace the program (PTRACE_SEIZE: %s)", strerror(errno));
    kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return false;
}

/* A new tracee's first stop: a process the program started is traced without
   PTRACE_O_EXITKILL (if the tracer dies, it goes on; the program itself is killed). */
static void adopt(struct family *family, pid_t pid, pid_t tid) {
    if (!join(family, tid) || tid == pid || process_of(tid) != tid) return;
    long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC;
    ptrace(PTRACE_SETOPTIONS, tid, NULL, (void *)options);
}

int rh_trace_program(pid_t pid, const char *crash_dir, const char *session, char *error, size_t error_cap) {
    int status = 0;
    /* The trampoline stops itself before its exec: seized while stopped, nothing of the
       program has run yet. */
    while (waitpid(pid, &status, WUNTRACED) < 0) {
        if (errno != EINTR) {
            fail(error, error_cap, "cannot wait for the program (%s)", strerror(errno));
            return -1;
        }
    }
    if (!WIFSTOPPED(status)) return status;
    if (!seize(pid, error, error_cap)) return -1;
    struct family family = {0};
    join(&family, pid);
    kill(pid, SIGCONT);
    for (;;) {
        pid_t tid = waitpid(-1, &status, __WALL);
        if (tid < 0) {
            if (errno == EINTR) continue;
            fail(error, error_cap, "lost the traced program (%s)", strerror(errno));
            status = -1;
            break;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            leave(&family, tid);
            if (tid == pid) break;
            continue; /* a thread or a process of the family ended */
        }
        if (!WIFSTOPPED(status)) continue;
        int signal = WSTOPSIG(status), event = status >> 16;
        if (event == PTRACE_EVENT_STOP) {
            adopt(&family, pid, tid);
            /* A group stop (SIGSTOP, SIGTSTP…) stays one; any other event stop goes on. */
            bool group = signal == SIGSTOP || signal == SIGTSTP || signal == SIGTTIN || signal == SIGTTOU;
            ptrace(group ? PTRACE_LISTEN : PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        if (event == PTRACE_EVENT_EXEC) set_recorded(&family, process_of(tid), false); /* a new program: its own crash */
        if (event != 0) { /* clone, fork, vfork, exec: the new tracees arrive with a stop of their own */
            ptrace(PTRACE_CONT, tid, NULL, NULL);
            continue;
        }
        crashed(&family, crash_dir, session, tid, signal);
        /* The signal goes on as it came: the program's handler, or its default action. */
        ptrace(PTRACE_CONT, tid, NULL, (void *)(long)signal);
    }
    detach_family(&family);
    free(family.members);
    free(family.recorded);
    return status;
}
