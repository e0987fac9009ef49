#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include "capture_internal.h"

#include <libunwind.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <ucontext.h>

/* libunwind (Debian's libunwind8), opened at install with RTLD_LOCAL: its local unwinding is
 * safe in a signal handler and starts at the faulting instruction, from the signal's
 * context. Local, because the library also exports the C++ exception ABI (_Unwind_*), which
 * must not replace the program's own (a C++ program under `reporthost run` throws through
 * libgcc's). Without it the writer falls back to glibc's backtrace().
 *
 * Its memory reads are ours (read_word). 1.6.2 validates an address (at every step: Debian
 * builds it with CONSERVATIVE_CHECKS) by reading a pipe it opened at its first use, for the
 * life of the process, and writing a byte of the address into it. A program that closes
 * what it inherited and opens its own files at those numbers (a daemon) had its stack written
 * into them at a crash, their position moved, or both closed (a failed read "reopens" the
 * pipe). With read_word in place nothing reaches that code, and install closes the pipe. */
static int (*unwind_init)(unw_cursor_t *, unw_context_t *, int);
static int (*unwind_step)(unw_cursor_t *);
static int (*unwind_get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);

#define SYMBOL_NAME(x) SYMBOL_TEXT(x)
#define SYMBOL_TEXT(x) #x

/* Set once process_vm_readv is refused (a seccomp filter): read_word then uses a pipe. */
static volatile sig_atomic_t vm_reads_refused;

/* libunwind's access_mem: reads a word of this process through the kernel, so an address
 * from a smashed stack is an error, not a fault, and no descriptor but ours is touched.
 * Async-signal-safe. getpid() each time: a forked child must not read its parent. */
static int read_word(unw_addr_space_t space, unw_word_t address, unw_word_t *value, int writing, void *argument) {
    (void)space;
    (void)argument;
    if (writing) { /* as libunwind's own: only unw_set_reg and resume write, never called here */
        *(unw_word_t *)address = *value;
        return 0;
    }
    if (!vm_reads_refused) {
        struct iovec here = {value, sizeof *value}, there = {(void *)address, sizeof *value};
        ssize_t n = process_vm_readv(getpid(), &here, 1, &there, 1, 0);
        if (n == (ssize_t)sizeof *value) return 0;
        if (n >= 0 || (errno != ENOSYS && errno != EPERM)) return -1;
        vm_reads_refused = 1;
    }
    /* write(2) reads the memory in the kernel too (EFAULT, no fault), through a pipe of ours
       that lives for this one read. */
    int ends[2];
    if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
    bool copied = write(ends[1], (const void *)address, sizeof *value) == (ssize_t)sizeof *value &&
                  read(ends[0], value, sizeof *value) == (ssize_t)sizeof *value;
    close(ends[0]);
    close(ends[1]);
    return copied ? 0 : -1;
}

/* The lowest closed descriptor above `after`: where the next one opened lands. */
static int next_free_fd(int after) {
    int fd = after + 1;
    while (fcntl(fd, F_GETFD) != -1 || errno != EBADF) fd++;
    return fd;
}

/* Closes libunwind's pipe, which pipe2 put at the two lowest free numbers, `read_end` and
 * `write_end`: only when they now hold one pipe's two ends with its flags. A descriptor
 * another thread opened there meanwhile is never closed; libunwind's, then elsewhere, is
 * never used. */
static void close_validation_pipe(int read_end, int write_end) {
    struct stat in, out;
    int in_status = fcntl(read_end, F_GETFL), out_status = fcntl(write_end, F_GETFL);
    if (fstat(read_end, &in) != 0 || fstat(write_end, &out) != 0 || !S_ISFIFO(in.st_mode) || in.st_ino != out.st_ino ||
        in.st_dev != out.st_dev || in_status < 0 || out_status < 0 || (in_status & O_ACCMODE) != O_RDONLY ||
        (out_status & O_ACCMODE) != O_WRONLY || !(in_status & out_status & O_NONBLOCK) ||
        !(fcntl(read_end, F_GETFD) & fcntl(write_end, F_GETFD) & FD_CLOEXEC))
        return;
    close(read_end);
    close(write_end);
}

void cc_open_unwinder(void) {
    void *library = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == NULL) return;
    void *init = dlsym(library, SYMBOL_NAME(unw_init_local2));
    void *step = dlsym(library, SYMBOL_NAME(unw_step));
    void *get_reg = dlsym(library, SYMBOL_NAME(unw_get_reg));
    void *get_accessors = dlsym(library, SYMBOL_NAME(unw_get_accessors));
    unw_addr_space_t *local_space = dlsym(library, SYMBOL_NAME(unw_local_addr_space));
    /* Without our reads in place libunwind would use its pipe: then it is not used at all. */
    if (init == NULL || step == NULL || get_reg == NULL || get_accessors == NULL || local_space == NULL) return;
    /* Its first call initialises the library, which opens the pipe (and sets its own reads). */
    int read_end = next_free_fd(-1), write_end = next_free_fd(read_end);
    unw_accessors_t *accessors = ((unw_accessors_t * (*)(unw_addr_space_t)) get_accessors)(*local_space);
    close_validation_pipe(read_end, write_end);
    if (accessors == NULL) return;
    accessors->access_mem = read_word;
    unwind_step = (int (*)(unw_cursor_t *))step;
    unwind_get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))get_reg;
    unwind_init = (int (*)(unw_cursor_t *, unw_context_t *, int))init;
}

/* The stack of the thread that got the signal, innermost frame first: from the signal's
 * context with libunwind, else from here with backtrace() (the handler's own frames first). */
int cc_unwind_frames(void *context, void **frames, int cap) {
    unw_cursor_t cursor;
    if (unwind_init == NULL || context == NULL || unwind_init(&cursor, (unw_context_t *)context, UNW_INIT_SIGNAL_FRAME) < 0) {
        return backtrace(frames, cap);
    }
    int count = 0;
    do {
        unw_word_t ip = 0;
        if (unwind_get_reg(&cursor, UNW_REG_IP, &ip) < 0) break;
        /* A call through a NULL pointer faults at 0: keep that frame, and let unw_step find
           the caller from the return address on the stack. Later, 0 is the end. */
        if (ip == 0 && count > 0) break;
        frames[count++] = (void *)(uintptr_t)ip;
    } while (count < cap && unwind_step(&cursor) > 0);
    return count;
}

/* Runs both unwinders once, outside any signal handler, so neither loads or sets anything
 * up for the first time inside one. */
void cc_warm_unwinders(void) {
    void *frames[4];
    backtrace(frames, 4);
    ucontext_t here;
    if (getcontext(&here) == 0 && unwind_init != NULL) {
        unw_cursor_t cursor;
        if (unwind_init(&cursor, (unw_context_t *)&here, 0) >= 0) unwind_step(&cursor);
    }
}
