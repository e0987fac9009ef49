/* Crash capture from outside the process (SPEC B-6): `reporthost run --capture=ptrace`, and
 * `run` on a program the preload cannot reach (a static one). The tracer seizes the program
 * it started, lets it run untouched (no system call is traced: only signals stop it), and on
 * a fatal signal reads the thread's registers and unwinds its stack from outside with
 * libunwind-ptrace, writes the same crash file the in-process writer writes, and lets the
 * signal go on: the program's own handler runs, or it dies with its own status.
 *
 * All of it runs in the `run` process, on the thread that started the program (ptrace
 * requests must come from the tracing thread). Not signal-safe: it is ordinary code. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seizes `pid`, a child that stopped itself with SIGSTOP before its exec (the `run`
 * trampoline), resumes it, and traces it and its threads until it ends. Each fatal signal
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS) writes a crash file into
 * crash_dir naming session, then is delivered. Returns the wait status of `pid` (as
 * waitpid's), or -1 with error filled in when it cannot be traced (the child is then killed
 * and reaped, so nothing runs untraced when tracing was asked). */
int rh_trace_program(pid_t pid, const char *crash_dir, const char *session, char *error, size_t error_cap);

/* Unwinds thread `tid`, stopped under ptrace by this thread, from outside: at most `max`
 * instruction addresses into frames, the first the faulting one. Returns how many, or -1. */
int rh_trace_unwind(pid_t tid, unsigned long *frames, int max);

/* Writes, in the crash file's line format, the registers, the frames (unwound from outside;
 * scanned from the stack when the unwind tables stop at the first frame: an `unwind
 * scanned` line says so) and the modules mapped in `pid`, for thread `tid`, stopped under
 * ptrace by this thread. */
void rh_trace_write_thread(FILE *out, pid_t pid, pid_t tid);

/* The two halves of it: the registers and frames of `tid`, and the modules of `pid`. */
void rh_trace_write_stack(FILE *out, pid_t pid, pid_t tid);
void rh_trace_write_modules(FILE *out, pid_t pid);

/* `reporthost-stack PID TID:START...`: the stacks of running threads of another process (an
 * app hang, SPEC B-4), all within one deadline (`RH_STACK_DEADLINE_MS`). START is the
 * thread's start time (field 22 of /proc/PID/task/TID/stat): a thread whose start time
 * differs is no longer the one watched (it ended, its id was reused) and is never touched. It
 * interrupts the threads with PTRACE_INTERRUPT (their system calls resume as if nothing
 * happened), and writes for each, on stdout, one of:
 *   `thread_stack TID` then its `register` and `frame` lines;
 *   `thread_gone TID` (it ended, or its id is another thread's now);
 *   `thread_unstopped TID REASON` (no stop within the deadline: an uninterruptible wait; or
 *   it could not be traced);
 *   `thread_skipped TID` (past the first `RH_STACK_THREADS_MAX`);
 * then the modules once. Its parent allows it to trace with prctl(PR_SET_PTRACER) once it is
 * started (a refusal before that is retried until the deadline). Exits 0 when it wrote the
 * lines, 2 on bad arguments. */
int rh_stack_main(int argc, char **argv);

#define RH_STACK_DEADLINE_MS 1000
#define RH_STACK_THREADS_MAX 16

#ifdef __cplusplus
}
#endif
