/* Passing signals sent to `reporthost run` on to its child (Sources/reporthost/ChildProgram.swift).
 *
 * In C because the handler must be async-signal-safe: it reads the child's pid and a pending
 * flag with lock-free atomics, calls only kill(), and keeps errno. A signal that comes
 * before the child's pid is known is kept pending and sent once the pid is set, so a signal
 * sent while the child starts is never lost, whichever thread the kernel delivers it to. */
#pragma once

#include <sys/types.h>

/* Installs the handler for `count` signals (SA_SIGINFO | SA_RESTART), keeping what each did
 * before. Only signals sent by a process (si_code <= 0: kill, sigqueue, tgkill) are passed
 * on: one from the terminal already reached the child, which shares the process group. (A
 * signal a process sends to the whole group, such as `kill -TERM -PGID` or `timeout`'s,
 * reaches the child directly too, and is passed on as well: the child gets it twice.) */
void rh_forward_install(const int *signals, int count);

/* From now on, passes the installed signals to `pid`, first sending those that came while
 * no pid was set (each at most once). */
void rh_forward_start(pid_t pid);

/* Stops passing signals on and gives each signal back what it did before install (call it
 * once the child has ended, before its pid can be reused: before it is reaped). */
void rh_forward_stop(void);
