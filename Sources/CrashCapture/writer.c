#define _GNU_SOURCE
#include "capture_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <ucontext.h>

/* --- the crash file --------------------------------------------------------------------- */

/* Prepared at install; read by the writer only. */
static char directory[PATH_CAP];
static char session[SESSION_CAP];

/* The crash file being written, and the test hook called while it is. */
static volatile int crash_fd = -1;
static char crash_path[PATH_CAP + 128];
static char crash_temporary[PATH_CAP + 160];
static void (*writer_hook)(int);

bool cc_set_destination(const char *crash_directory, const char *session_id) {
    /* The session names the crash files: never a path of its own. */
    if (strlen(crash_directory) >= PATH_CAP || strchr(session_id, '/') || !encode_into(session, SESSION_CAP, session_id)) return false;
    strcpy(directory, crash_directory);
    return true;
}

void rh_crash_set_writer_hook(void (*hook)(int stage)) { writer_hook = hook; }

/* Ends the file where it is: synced and renamed, so the next launch recovers what it holds. */
void cc_close_crash_file(void) {
    int fd = crash_fd;
    if (fd < 0) return;
    crash_fd = -1;
    fsync(fd);
    close(fd);
    rename(crash_temporary, crash_path);
    /* Make the rename durable. */
    int dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        fsync(dir);
        close(dir);
    }
}

/* Sets crash_path and crash_temporary (the same with `.partial`), built in `l`, which it
   leaves empty; returns the plugin call mark the name was chosen by. */
static uint32_t name_crash_file(struct line *l, const struct timespec *now) {
    /* <dir>/<session>-<seconds>-<pid>-<thread>-<n>.crash, written under a temporary name and
       renamed, so a file the recovery sees is never half-named. A crash inside a plugin call
       ends in `.plugin.crash`: the next start reads only those before it loads plugins (the
       quarantine), and leaves the rest to recovery in the background. */
    add(l, directory);
    add(l, "/");
    add(l, session);
    add(l, "-");
    add_unsigned(l, (uint64_t)now->tv_sec, 10);
    add(l, "-");
    add_unsigned(l, (uint64_t)getpid(), 10);
    add(l, "-");
    add_unsigned(l, (uint64_t)current_thread(), 10);
    /* A program that recovers from a signal (its own handler, chained) may crash again in the
       same second on the same thread: each file gets its own number. */
    static int files_written;
    add(l, "-");
    add_unsigned(l, (uint64_t)__atomic_add_fetch(&files_written, 1, __ATOMIC_SEQ_CST), 10);
    uint32_t mark = cc_current_call();
    add(l, cc_names_plugin_call(mark) ? ".plugin.crash" : ".crash");
    memcpy(crash_path, l->text, l->length);
    crash_path[l->length] = '\0';
    memcpy(crash_temporary, l->text, l->length);
    memcpy(crash_temporary + l->length, ".partial", 9);
    l->length = 0;
    return mark;
}

/* The general-purpose registers at the signal, one `register` line each (x86-64 only). */
static void write_registers(int fd, struct line *l, void *context) {
#if defined(__x86_64__)
    const ucontext_t *uc = context;
    static const struct { const char *name; int index; } registers[] = {
        {"rip", REG_RIP}, {"rsp", REG_RSP}, {"rbp", REG_RBP}, {"rax", REG_RAX}, {"rbx", REG_RBX},
        {"rcx", REG_RCX}, {"rdx", REG_RDX}, {"rsi", REG_RSI}, {"rdi", REG_RDI}, {"r8", REG_R8},
        {"r9", REG_R9}, {"r10", REG_R10}, {"r11", REG_R11}, {"r12", REG_R12}, {"r13", REG_R13},
        {"r14", REG_R14}, {"r15", REG_R15}};
    for (size_t i = 0; i < sizeof registers / sizeof *registers; i++) {
        add(l, "register "); add(l, registers[i].name); add(l, " ");
        add_unsigned(l, (uint64_t)uc->uc_mcontext.gregs[registers[i].index], 16);
        emit(fd, l);
    }
#else
    (void)fd;
    (void)l;
    (void)context;
#endif
}

void cc_write_crash_file(int signal_number, siginfo_t *info, void *context) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct line l = {.length = 0};
    uint32_t mark = name_crash_file(&l, &now);

    /* A fresh file, whatever was left under its name: never written through a link. */
    unlink(crash_temporary);
    int fd = open(crash_temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return;
    crash_fd = fd;
    add(&l, "reporthost-crash 1"); emit(fd, &l);
    add(&l, "session "); add(&l, session); emit(fd, &l);
    add(&l, "signal "); add_unsigned(&l, (uint64_t)signal_number, 10); emit(fd, &l);
    add(&l, "code "); add_signed(&l, info->si_code); emit(fd, &l);
    if (info->si_code > 0) {
        /* A fault (or the kernel's own signal): si_addr is the address it concerns. */
        add(&l, "address "); add_unsigned(&l, (uint64_t)(uintptr_t)info->si_addr, 16); emit(fd, &l);
    } else {
        /* Sent (kill, tgkill, sigqueue, abort): si_addr's bytes hold the sender instead. */
        add(&l, "sender_pid "); add_unsigned(&l, (uint64_t)info->si_pid, 10); emit(fd, &l);
        add(&l, "sender_uid "); add_unsigned(&l, (uint64_t)info->si_uid, 10); emit(fd, &l);
    }
    add(&l, "thread "); add_unsigned(&l, (uint64_t)current_thread(), 10); emit(fd, &l);
    add(&l, "pid "); add_unsigned(&l, (uint64_t)getpid(), 10); emit(fd, &l);
    add(&l, "time "); add_unsigned(&l, (uint64_t)now.tv_sec, 10); emit(fd, &l);
    cc_write_attribution(fd, &l, mark);
    if (writer_hook) writer_hook(1);
    write_registers(fd, &l, context);
    cc_write_registered(fd, &l);
    cc_write_module_map(fd);
    /* Last, because it is the riskiest step: unwinding a smashed stack may fault, and a fault
       here ends the file with everything above already in it. Both unwinders ran once at
       install, so neither loads anything here. */
    void *frames[FRAMES_CAP];
    int count = cc_unwind_frames(context, frames, FRAMES_CAP);
    for (int i = 0; i < count; i++) {
        add(&l, "frame "); add_unsigned(&l, (uint64_t)(uintptr_t)frames[i], 16); emit(fd, &l);
    }
    /* The map above was taken when the host last refreshed it; what is mapped now (also what
       the program loaded with dlopen since) comes from /proc/self/maps, with build ids read
       from the mapped headers. After the frames: a fault while reading it keeps them. */
    cc_write_mapped_modules(fd, &l);
    add(&l, "end"); emit(fd, &l);
    cc_close_crash_file();
}
