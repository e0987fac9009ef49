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

/* The crash files the last rh_trace_program wrote. */
int rh_trace_crash_files_written(void);

/* Unwinds thread `tid`, stopped under ptrace by this thread, from outside: at most `max`
 * instruction addresses into frames, the first the faulting one. Returns how many, or -1. */
int rh_trace_unwind(pid_t tid, unsigned long *frames, int max);

#ifdef __cplusplus
}
#endif
