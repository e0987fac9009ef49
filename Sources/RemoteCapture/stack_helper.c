/* reporthost-stack: the stacks of hung threads of another process, within a deadline (SPEC B-4). */
#define _GNU_SOURCE
#include "remote_capture.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static void pause_ms(long ms) {
    struct timespec wait = {0, ms * 1000 * 1000};
    nanosleep(&wait, NULL);
}

/* Field 22 of /proc/PID/task/TID/stat (the thread's start time), or -1 when it is not a
   thread of PID. The name (field 2) may hold spaces and parentheses: fields are counted from
   its last ')'. */
static long long start_time(pid_t pid, pid_t tid) {
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    FILE *in = fopen(path, "re");
    if (!in) return -1;
    size_t got = fread(line, 1, sizeof line - 1, in);
    fclose(in);
    line[got] = '\0';
    char *field = strrchr(line, ')');
    for (int index = 2; field && index < 22; index++) field = strchr(field + 1, ' ');
    return field ? strtoll(field + 1, NULL, 10) : -1;
}

struct target {
    pid_t tid;
    long long start;
    bool pending; /* interrupted, its stop not seen yet */
};

/* Seizes and interrupts `target` (still the thread watched, before and after the seize);
   false, with its line written, when it cannot be. */
static bool interrupt(pid_t pid, struct target *target, long long deadline) {
    if (start_time(pid, target->tid) != target->start) {
        printf("thread_gone %d\n", (int)target->tid);
        return false;
    }
    /* Under Yama the parent allows this process to trace it just after it started it. */
    long seized;
    while ((seized = ptrace(PTRACE_SEIZE, target->tid, NULL, NULL)) != 0 && errno == EPERM && now_ms() < deadline) pause_ms(10);
    if (seized != 0) {
        printf("thread_unstopped %d cannot be traced (%s)\n", (int)target->tid, strerror(errno));
        return false;
    }
    /* Traced, its id cannot pass to another thread: check it once more. */
    if (start_time(pid, target->tid) != target->start) {
        ptrace(PTRACE_DETACH, target->tid, NULL, NULL);
        printf("thread_gone %d\n", (int)target->tid);
        return false;
    }
    if (ptrace(PTRACE_INTERRUPT, target->tid, NULL, NULL) != 0) {
        printf("thread_unstopped %d cannot be interrupted (%s)\n", (int)target->tid, strerror(errno));
        return false;
    }
    return true;
}

static struct target *pending_target(struct target *targets, int count, pid_t tid) {
    for (int i = 0; i < count; i++)
        if (targets[i].tid == tid && targets[i].pending) return &targets[i];
    return NULL;
}

/* Writes each interrupted thread's stack as it stops, and detaches it at once; returns how
   many stacks were written. Threads still running at the deadline are left (this process's
   exit detaches them). */
static int collect(pid_t pid, struct target *targets, int count, int pending, long long deadline) {
    int written = 0;
    while (pending > 0) {
        int status = 0;
        pid_t tid = waitpid(-1, &status, __WALL | WNOHANG);
        if (tid < 0 && errno == EINTR) continue;
        if (tid < 0) break;
        if (tid == 0) {
            if (now_ms() >= deadline) break;
            pause_ms(1);
            continue;
        }
        struct target *target = pending_target(targets, count, tid);
        if (!target) continue;
        target->pending = false;
        pending--;
        if (!WIFSTOPPED(status)) {
            printf("thread_gone %d\n", (int)tid);
            continue;
        }
        printf("thread_stack %d\n", (int)tid);
        rh_trace_write_stack(stdout, pid, tid);
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        written++;
    }
    for (int i = 0; i < count; i++) {
        if (targets[i].pending)
            printf("thread_unstopped %d did not stop within %d ms (an uninterruptible wait)\n", (int)targets[i].tid, RH_STACK_DEADLINE_MS);
    }
    return written;
}

int rh_stack_main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: reporthost-stack PID TID:START...\n");
        return 2;
    }
    long long deadline = now_ms() + RH_STACK_DEADLINE_MS;
    pid_t pid = (pid_t)atoi(argv[1]);
    struct target targets[RH_STACK_THREADS_MAX];
    int count = 0, pending = 0;
    for (int i = 2; i < argc; i++) {
        char *colon = strchr(argv[i], ':');
        if (!colon) {
            fprintf(stderr, "reporthost-stack: '%s' is not TID:START\n", argv[i]);
            return 2;
        }
        struct target target = {(pid_t)atoi(argv[i]), strtoll(colon + 1, NULL, 10), false};
        if (count == RH_STACK_THREADS_MAX) {
            printf("thread_skipped %d\n", (int)target.tid);
            continue;
        }
        target.pending = interrupt(pid, &target, deadline);
        pending += target.pending;
        targets[count++] = target;
    }
    if (collect(pid, targets, count, pending, deadline) > 0) rh_trace_write_modules(stdout, pid);
    fflush(stdout);
    return 0;
}
