#define _GNU_SOURCE
#include "crash_capture.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum {
    PATH_CAP = 1024,
    SESSION_CAP = 64,
    ATTR_CAP = 64,
    ATTR_TEXT_CAP = 512,
    ATTACH_CAP = 16,
    MODULES_CAP = 64 * 1024,
    FRAMES_CAP = 128,
    PLUGINS_CAP = 64,
    NAME_CAP = 128,
    DIGEST_CAP = 80,
    ALT_STACK_SIZE = 64 * 1024,
    /* How long a thread that faults while another writes waits for it (10 ms steps). */
    WAIT_STEPS = 500,
};

static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
enum { SIGNAL_COUNT = sizeof signals / sizeof *signals };

/* Prepared at install and registration time; read by the handler only. */
static char directory[PATH_CAP];
static char session[SESSION_CAP];
static char attributes[ATTR_CAP][ATTR_TEXT_CAP];
static volatile sig_atomic_t attribute_count;
static char attachments[ATTACH_CAP][PATH_CAP];
static volatile sig_atomic_t attachment_count;
static struct sigaction previous[SIGNAL_COUNT];
/* Whether previous[i] is the Swift runtime's own crash handler: never chained to (see
   is_swift_runtime_handler). */
static bool previous_is_swift_runtime[SIGNAL_COUNT];
static bool installed;

/* The module map, double-buffered: a refresh writes the buffer the handler is not reading
   and then publishes it. */
static char modules[2][MODULES_CAP];
static size_t modules_length[2];
static int modules_current;
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;

/* Plugins, registered before they are opened; entries are never removed. */
static struct {
    char path[PATH_CAP];
    char digest[DIGEST_CAP];
    char name[NAME_CAP];
} plugins[PLUGINS_CAP];
static int plugin_count;
static pthread_mutex_t plugins_lock = PTHREAD_MUTEX_INITIALIZER;

/* Which plugin call this thread is in: (plugin << 8) | call, 0 for none. initial-exec, so the
   handler reads it without calling into the dynamic linker. */
static __thread uint32_t current_call __attribute__((tls_model("initial-exec")));

/* The writer: the thread writing (0: none), the signal it handles, and its open file. */
static pid_t writer;
static int original_signal;
static volatile int crash_fd = -1;
static char crash_path[PATH_CAP + 128];
static char crash_temporary[PATH_CAP + 160];
static int waiting;
static void (*writer_hook)(int);

static const char *const call_names[RH_CRASH_CALL_COUNT] = {
    [RH_CRASH_CALL_NONE] = "",
    [RH_CRASH_CALL_LOAD] = "dlopen",
    [RH_CRASH_CALL_ENTRY] = "rh_plugin_entry",
    [RH_CRASH_CALL_BEFORE] = "on_before_report_created",
    [RH_CRASH_CALL_AFTER] = "on_after_report_created",
    [RH_CRASH_CALL_DESTROY] = "destroy",
    [RH_CRASH_CALL_ADD_FIELDS] = "add_fields_before_report_created",
    [RH_CRASH_CALL_CHECK_FIELDS] = "check_fields_after_report_created",
    [RH_CRASH_CALL_ATTACHMENTS] = "attachments_for_report",
    [RH_CRASH_CALL_ATTACHMENTS_ASYNC] = "attachments_for_report_async",
};

/* --- async-signal-safe formatting into a fixed buffer -------------------------------- */

struct line {
    char text[2048];
    size_t length;
};

static void add(struct line *l, const char *s) {
    while (*s && l->length < sizeof l->text - 1) l->text[l->length++] = *s++;
}

static void add_unsigned(struct line *l, uint64_t value, unsigned base) {
    char digits[24];
    int n = 0;
    do {
        unsigned d = (unsigned)(value % base);
        digits[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        value /= base;
    } while (value && n < (int)sizeof digits);
    if (base == 16) add(l, "0x");
    while (n > 0 && l->length < sizeof l->text - 1) l->text[l->length++] = digits[--n];
}

static void write_all(int fd, const char *data, size_t length) {
    size_t done = 0;
    while (done < length) {
        ssize_t n = write(fd, data + done, length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
}

static void add_signed(struct line *l, int64_t value) {
    if (value < 0) add(l, "-");
    add_unsigned(l, value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value, 10);
}

/* Values (paths, names, attributes) are written so that no byte of theirs can end a line or
   start a field: control bytes, DEL and '%' become %XX; recovery decodes them. */
static bool needs_escape(unsigned char c) { return c < 0x20 || c == 0x7f || c == '%'; }

static void add_encoded(struct line *l, const char *s) {
    static const char digits[] = "0123456789ABCDEF";
    for (; *s && l->length < sizeof l->text - 4; s++) {
        unsigned char c = (unsigned char)*s;
        if (needs_escape(c)) {
            l->text[l->length++] = '%';
            l->text[l->length++] = digits[c >> 4];
            l->text[l->length++] = digits[c & 15];
        } else {
            l->text[l->length++] = (char)c;
        }
    }
}

/* add_encoded into `out` (capacity `cap`), outside the handler; false when it does not fit. */
static bool encode_into(char *out, size_t cap, const char *text) {
    struct line l = {.length = 0};
    add_encoded(&l, text);
    if (strlen(text) >= sizeof l.text - 4 || l.length >= cap) return false;
    memcpy(out, l.text, l.length);
    out[l.length] = '\0';
    return true;
}

static void emit(int fd, struct line *l) {
    add(l, "\n");
    write_all(fd, l->text, l->length);
    l->length = 0;
}

static pid_t current_thread(void) { return (pid_t)syscall(SYS_gettid); }

static void sleep_briefly(void) {
    struct timespec step = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    nanosleep(&step, NULL);
}

/* --- build ids and the modules mapped at the crash ------------------------------------ */

/* The GNU build id of an object whose program headers are `headers` (count `count`, loaded
   with `bias`), as lowercase hex into `out` (at least 2 * 64 + 1 bytes); "" when it has none.
   Reads only memory inside [low, high), the object's readable first mapping: notes elsewhere
   are skipped, never read. Async-signal-safe: no call, no allocation. */
static void find_build_id(const ElfW(Phdr) *headers, int count, uintptr_t bias, uintptr_t low, uintptr_t high, char *out) {
    out[0] = '\0';
    for (int i = 0; i < count; i++) {
        if (headers[i].p_type != PT_NOTE) continue;
        uintptr_t note = bias + headers[i].p_vaddr;
        uintptr_t end = note + headers[i].p_memsz;
        if (note < low || end > high || end < note) continue;
        while (note + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *header = (const ElfW(Nhdr) *)note;
            uintptr_t name = note + sizeof *header;
            uintptr_t desc = name + ((header->n_namesz + 3) & ~3u);
            uintptr_t next = desc + ((header->n_descsz + 3) & ~3u);
            if (next > end || next <= note) break;
            const char *text = (const char *)name;
            if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 && text[0] == 'G' && text[1] == 'N' &&
                text[2] == 'U' && text[3] == '\0' && header->n_descsz > 0 && header->n_descsz <= 64) {
                static const char digits[] = "0123456789abcdef";
                const unsigned char *bytes = (const unsigned char *)desc;
                for (unsigned j = 0; j < header->n_descsz; j++) {
                    out[2 * j] = digits[bytes[j] >> 4];
                    out[2 * j + 1] = digits[bytes[j] & 15];
                }
                out[2 * header->n_descsz] = '\0';
                return;
            }
            note = next;
        }
    }
}

/* One object gathered from /proc/self/maps: from its mapping at file offset 0 (its ELF
   header) to the end of its last mapping. */
struct mapped_object {
    uintptr_t start, end;
    /* End of the first mapping, when it is readable (the header and notes are read there). */
    uintptr_t header_end;
    char path[PATH_CAP];
};

/* Writes `module <start> <end> <path>` (and `build_id <hex>`) for `object` when it is an ELF
   object whose header is mapped readable. */
static void write_mapped_object(int fd, struct line *l, const struct mapped_object *object) {
    if (object->header_end == 0 || object->header_end - object->start < sizeof(ElfW(Ehdr))) return;
    const ElfW(Ehdr) *header = (const ElfW(Ehdr) *)object->start;
    if (header->e_ident[EI_MAG0] != ELFMAG0 || header->e_ident[EI_MAG1] != ELFMAG1 || header->e_ident[EI_MAG2] != ELFMAG2 ||
        header->e_ident[EI_MAG3] != ELFMAG3 || header->e_ident[EI_CLASS] != ELFCLASS64)
        return;
    add(l, "module "); add_unsigned(l, object->start, 16); add(l, " "); add_unsigned(l, object->end, 16);
    add(l, " "); add_encoded(l, object->path); emit(fd, l);
    uintptr_t table = object->start + header->e_phoff;
    uintptr_t table_end = table + (uintptr_t)header->e_phnum * sizeof(ElfW(Phdr));
    if (header->e_phentsize != sizeof(ElfW(Phdr)) || table < object->start || table_end > object->header_end) return;
    const ElfW(Phdr) *headers = (const ElfW(Phdr) *)table;
    /* The load bias: where the segment holding file offset 0 (the header) was placed. */
    uintptr_t bias = object->start;
    for (int i = 0; i < header->e_phnum; i++) {
        if (headers[i].p_type == PT_LOAD && headers[i].p_offset == 0) {
            bias = object->start - headers[i].p_vaddr;
            break;
        }
    }
    char build_id[2 * 64 + 1];
    find_build_id(headers, header->e_phnum, bias, object->start, object->header_end, build_id);
    if (build_id[0]) { add(l, "build_id "); add(l, build_id); emit(fd, l); }
}

static uintptr_t parse_hex(const char **cursor) {
    uintptr_t value = 0;
    for (const char *c = *cursor;; c++) {
        int digit = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
        if (digit < 0) {
            *cursor = c;
            return value;
        }
        value = value * 16 + (uintptr_t)digit;
    }
}

/* One line of /proc/self/maps: `start-end perms offset dev inode   path`. Adds the mapping to
   `object`, or writes `object` and starts the next one at a new file's offset-0 mapping. */
static void take_maps_line(int fd, struct line *l, const char *text, struct mapped_object *object) {
    const char *c = text;
    uintptr_t start = parse_hex(&c);
    if (*c++ != '-') return;
    uintptr_t end = parse_hex(&c);
    if (*c++ != ' ') return;
    bool readable = c[0] == 'r';
    c += 5;
    uintptr_t offset = parse_hex(&c);
    for (int fields = 0; fields < 2 && *c; fields++) { /* dev, inode */
        while (*c == ' ') c++;
        while (*c && *c != ' ') c++;
    }
    while (*c == ' ') c++;
    if (*c != '/') return; /* anonymous memory, the stack, the vdso: no file */
    size_t length = strnlen(c, PATH_CAP - 1);
    if (offset == 0) {
        write_mapped_object(fd, l, object);
        object->start = start;
        object->end = end;
        object->header_end = readable ? end : 0;
        memcpy(object->path, c, length);
        object->path[length] = '\0';
    } else if (object->header_end != 0 && strncmp(object->path, c, PATH_CAP) == 0 && start >= object->end) {
        object->end = end;
    }
}

/* Writes every ELF object mapped now, read from /proc/self/maps with read(2) into fixed
   buffers: a `modules_at_crash` line, then `module` and `build_id` lines. Nothing when /proc
   cannot be read (the map taken outside the handler stands). Used by the writer thread only. */
static void write_mapped_modules(int fd, struct line *l) {
    static char chunk[4096];
    static char text[PATH_CAP + 256];
    static struct mapped_object object;
    int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (maps < 0) return;
    add(l, "modules_at_crash"); emit(fd, l);
    object.header_end = 0;
    size_t length = 0;
    for (;;) {
        ssize_t n = read(maps, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] != '\n') {
                if (length < sizeof text - 1) text[length++] = chunk[i];
                continue;
            }
            text[length] = '\0';
            take_maps_line(fd, l, text, &object);
            length = 0;
        }
    }
    close(maps);
    write_mapped_object(fd, l, &object);
}

/* --- the handler ---------------------------------------------------------------------- */

/* Ends the file where it is: synced and renamed, so the next launch recovers what it holds. */
static void close_crash_file(void) {
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

/* Whether `mark` names a registered plugin's call (the crash is attributed to it). */
static int names_plugin_call(uint32_t mark) {
    int plugin = (int)(mark >> 8);
    int call = (int)(mark & 0xff);
    return plugin >= 1 && plugin <= plugin_count && call > 0 && call < RH_CRASH_CALL_COUNT;
}

static void write_attribution(int fd, struct line *l, uint32_t mark) {
    if (!names_plugin_call(mark)) return;
    int plugin = (int)(mark >> 8);
    int call = (int)(mark & 0xff);
    add(l, "plugin_path "); add(l, plugins[plugin - 1].path); emit(fd, l);
    add(l, "plugin_digest "); add(l, plugins[plugin - 1].digest); emit(fd, l);
    if (plugins[plugin - 1].name[0]) { add(l, "plugin_name "); add(l, plugins[plugin - 1].name); emit(fd, l); }
    add(l, "callback "); add(l, call_names[call]); emit(fd, l);
}

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

static void open_unwinder(void) {
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
static int unwind_frames(void *context, void **frames, int cap) {
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
static void warm_unwinders(void) {
    void *frames[4];
    backtrace(frames, 4);
    ucontext_t here;
    if (getcontext(&here) == 0 && unwind_init != NULL) {
        unw_cursor_t cursor;
        if (unwind_init(&cursor, (unw_context_t *)&here, 0) >= 0) unwind_step(&cursor);
    }
}

static void write_crash_file(int signal_number, siginfo_t *info, void *context) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct line l = {.length = 0};
    /* <dir>/<session>-<seconds>-<pid>-<thread>-<n>.crash, written under a temporary name and
       renamed, so a file the recovery sees is never half-named. A crash inside a plugin call
       ends in `.plugin.crash`: the next start reads only those before it loads plugins (the
       quarantine), and leaves the rest to recovery in the background. */
    add(&l, directory);
    add(&l, "/");
    add(&l, session);
    add(&l, "-");
    add_unsigned(&l, (uint64_t)now.tv_sec, 10);
    add(&l, "-");
    add_unsigned(&l, (uint64_t)getpid(), 10);
    add(&l, "-");
    add_unsigned(&l, (uint64_t)current_thread(), 10);
    /* A program that recovers from a signal (its own handler, chained) may crash again in the
       same second on the same thread: each file gets its own number. */
    static int files_written;
    add(&l, "-");
    add_unsigned(&l, (uint64_t)__atomic_add_fetch(&files_written, 1, __ATOMIC_SEQ_CST), 10);
    add(&l, names_plugin_call(current_call) ? ".plugin.crash" : ".crash");
    memcpy(crash_path, l.text, l.length);
    crash_path[l.length] = '\0';
    memcpy(crash_temporary, l.text, l.length);
    memcpy(crash_temporary + l.length, ".partial", 9);
    l.length = 0;

    int fd = open(crash_temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
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
    write_attribution(fd, &l, current_call);
    if (writer_hook) writer_hook(1);
#if defined(__x86_64__)
    const ucontext_t *uc = context;
    static const struct { const char *name; int index; } registers[] = {
        {"rip", REG_RIP}, {"rsp", REG_RSP}, {"rbp", REG_RBP}, {"rax", REG_RAX}, {"rbx", REG_RBX},
        {"rcx", REG_RCX}, {"rdx", REG_RDX}, {"rsi", REG_RSI}, {"rdi", REG_RDI}, {"r8", REG_R8},
        {"r9", REG_R9}, {"r10", REG_R10}, {"r11", REG_R11}, {"r12", REG_R12}, {"r13", REG_R13},
        {"r14", REG_R14}, {"r15", REG_R15}};
    for (size_t i = 0; i < sizeof registers / sizeof *registers; i++) {
        add(&l, "register "); add(&l, registers[i].name); add(&l, " ");
        add_unsigned(&l, (uint64_t)uc->uc_mcontext.gregs[registers[i].index], 16);
        emit(fd, &l);
    }
#else
    (void)context;
#endif
    int attributes_written = __atomic_load_n(&attribute_count, __ATOMIC_ACQUIRE);
    for (int i = 0; i < attributes_written; i++) {
        if (__atomic_load_n(&attributes[i][0], __ATOMIC_ACQUIRE) == '\0') continue; /* removed, or being rewritten */
        add(&l, "attribute "); add(&l, attributes[i]); emit(fd, &l);
    }
    for (int i = 0; i < attachment_count; i++) { add(&l, "attachment "); add(&l, attachments[i]); emit(fd, &l); }
    int map = __atomic_load_n(&modules_current, __ATOMIC_ACQUIRE);
    write_all(fd, modules[map], modules_length[map]);
    /* Last, because it is the riskiest step: unwinding a smashed stack may fault, and a fault
       here ends the file with everything above already in it. Both unwinders ran once at
       install, so neither loads anything here. */
    void *frames[FRAMES_CAP];
    int count = unwind_frames(context, frames, FRAMES_CAP);
    for (int i = 0; i < count; i++) {
        add(&l, "frame "); add_unsigned(&l, (uint64_t)(uintptr_t)frames[i], 16); emit(fd, &l);
    }
    /* The map above was taken when the host last refreshed it; what is mapped now (also what
       the program loaded with dlopen since) comes from /proc/self/maps, with build ids read
       from the mapped headers. After the frames: a fault while reading it keeps them. */
    write_mapped_modules(fd, &l);
    add(&l, "end"); emit(fd, &l);
    close_crash_file();
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
            close_crash_file();
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
    write_crash_file(signal_number, info, context);
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

static char executable[PATH_CAP];

struct module_buffer {
    char *text;
    size_t length;
};

static int add_module(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct module_buffer *buffer = data;
    uintptr_t low = UINTPTR_MAX, high = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
        uintptr_t end = start + info->dlpi_phdr[i].p_memsz;
        if (start < low) low = start;
        if (end > high) high = end;
    }
    if (high == 0) return 0;
    /* The main program has no name here: use the executable's path. */
    const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : executable;
    char encoded[PATH_CAP];
    if (!encode_into(encoded, sizeof encoded, name)) return 0;
    int n = snprintf(buffer->text + buffer->length, MODULES_CAP - buffer->length, "module 0x%lx 0x%lx %s\n",
                     (unsigned long)low, (unsigned long)high, encoded);
    if (n > 0 && (size_t)n < MODULES_CAP - buffer->length) buffer->length += (size_t)n;
    char build_id[2 * 64 + 1];
    find_build_id(info->dlpi_phdr, info->dlpi_phnum, info->dlpi_addr, low, high, build_id);
    if (build_id[0]) {
        n = snprintf(buffer->text + buffer->length, MODULES_CAP - buffer->length, "build_id %s\n", build_id);
        if (n > 0 && (size_t)n < MODULES_CAP - buffer->length) buffer->length += (size_t)n;
    }
    return 0;
}

void rh_crash_refresh_modules(void) {
    pthread_mutex_lock(&refresh_lock);
    int next = 1 - __atomic_load_n(&modules_current, __ATOMIC_ACQUIRE);
    struct module_buffer buffer = {.text = modules[next], .length = 0};
    dl_iterate_phdr(add_module, &buffer);
    modules_length[next] = buffer.length;
    __atomic_store_n(&modules_current, next, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&refresh_lock);
}

static pthread_key_t stack_key;
static pthread_once_t stack_key_once = PTHREAD_ONCE_INIT;

/* Runs when a prepared thread ends: switch its alternate stack off, then free it. */
static void release_stack(void *memory) {
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    free(memory);
}

static void make_stack_key(void) { pthread_key_create(&stack_key, release_stack); }

/* The work of rh_crash_install, once: the unwinders, the module map, the handlers. */
static bool install(void) {
    ssize_t length = readlink("/proc/self/exe", executable, sizeof executable - 1);
    if (length > 0) {
        executable[length] = '\0';
    } else {
        strcpy(executable, "[main]");
    }
    open_unwinder();
    rh_crash_refresh_modules();
    warm_unwinders();
    pthread_once(&stack_key_once, make_stack_key);
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
    /* The session names the crash files: never a path of its own. */
    if (strlen(crash_directory) >= PATH_CAP || strchr(session_id, '/') || !encode_into(session, SESSION_CAP, session_id)) return false;
    strcpy(directory, crash_directory);
    if (installed) return true;
    return install();
}

bool rh_crash_is_installed(void) { return installed; }

bool rh_crash_prepare_thread(void) {
    if (!installed) return true;
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return true; /* has one */
    void *memory = malloc(ALT_STACK_SIZE);
    if (!memory) return false;
    stack_t stack = {.ss_sp = memory, .ss_size = ALT_STACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&stack, NULL) != 0) {
        free(memory);
        return false;
    }
    pthread_setspecific(stack_key, memory);
    return true;
}

/* Setters may run on any thread at once; the crash handler reads without this lock. */
static pthread_mutex_t attributes_lock = PTHREAD_MUTEX_INITIALIZER;

/* Writes `text` (shorter than ATTR_TEXT_CAP) into `slot` so that the handler, reading without
 * the lock, sees the old text, nothing (a cleared first byte: skipped), or the new text,
 * never a mix: the first byte is cleared first and set last. */
static void publish_attribute(int slot, const char *text) {
    __atomic_store_n(&attributes[slot][0], '\0', __ATOMIC_SEQ_CST);
    memcpy(&attributes[slot][1], text + 1, strlen(text));
    __atomic_store_n(&attributes[slot][0], text[0], __ATOMIC_RELEASE);
}

static bool holds_key(int slot, const char *key, size_t key_length) {
    return strncmp(attributes[slot], key, key_length) == 0 && attributes[slot][key_length] == '=';
}

void rh_crash_remove_attribute(const char *raw_key) {
    char key[ATTR_TEXT_CAP];
    if (!encode_into(key, sizeof key, raw_key)) return;
    size_t key_length = strlen(key);
    pthread_mutex_lock(&attributes_lock);
    for (int i = 0; i < attribute_count; i++) {
        if (holds_key(i, key, key_length)) __atomic_store_n(&attributes[i][0], '\0', __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&attributes_lock);
}

bool rh_crash_set_attribute(const char *raw_key, const char *raw_value) {
    if (strchr(raw_key, '=') || raw_key[0] == '\0') return false;
    char key[ATTR_TEXT_CAP], value[ATTR_TEXT_CAP];
    if (!encode_into(key, sizeof key, raw_key) || !encode_into(value, sizeof value, raw_value)) return false;
    size_t key_length = strlen(key);
    if (key_length + strlen(value) + 2 > ATTR_TEXT_CAP) return false;
    char text[ATTR_TEXT_CAP];
    memcpy(text, key, key_length);
    text[key_length] = '=';
    memcpy(text + key_length + 1, value, strlen(value) + 1);
    pthread_mutex_lock(&attributes_lock);
    /* The key's own slot, else the first one a removal emptied, else a new one. */
    int slot = -1, emptied = -1;
    for (int i = 0; i < attribute_count; i++) {
        if (holds_key(i, key, key_length)) slot = i;
        else if (attributes[i][0] == '\0' && emptied < 0) emptied = i;
    }
    if (slot < 0) slot = emptied >= 0 ? emptied : attribute_count;
    bool stored = slot < ATTR_CAP;
    if (stored) {
        publish_attribute(slot, text);
        if (slot == attribute_count) __atomic_store_n(&attribute_count, slot + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&attributes_lock);
    return stored;
}

bool rh_crash_add_attachment(const char *path) {
    if (attachment_count == ATTACH_CAP || !encode_into(attachments[attachment_count], PATH_CAP, path)) return false;
    attachment_count = attachment_count + 1;
    return true;
}

int rh_crash_register_plugin(const char *raw_path, const char *raw_digest) {
    char path[PATH_CAP], digest[DIGEST_CAP];
    if (!encode_into(path, sizeof path, raw_path) || !encode_into(digest, sizeof digest, raw_digest)) return 0;
    pthread_mutex_lock(&plugins_lock);
    int id = 0;
    for (int i = 0; i < plugin_count && id == 0; i++) {
        if (strcmp(plugins[i].path, path) == 0 && strcmp(plugins[i].digest, digest) == 0) id = i + 1;
    }
    if (id == 0 && plugin_count < PLUGINS_CAP) {
        strcpy(plugins[plugin_count].path, path);
        strcpy(plugins[plugin_count].digest, digest);
        plugins[plugin_count].name[0] = '\0';
        /* Published after the entry is complete: the handler reads up to plugin_count. */
        __atomic_store_n(&plugin_count, plugin_count + 1, __ATOMIC_RELEASE);
        id = plugin_count;
    }
    pthread_mutex_unlock(&plugins_lock);
    return id;
}

void rh_crash_name_plugin(int plugin, const char *raw_name) {
    char name[NAME_CAP];
    if (plugin < 1 || plugin > plugin_count || !encode_into(name, sizeof name, raw_name)) return;
    pthread_mutex_lock(&plugins_lock);
    snprintf(plugins[plugin - 1].name, NAME_CAP, "%s", name);
    pthread_mutex_unlock(&plugins_lock);
}

uint32_t rh_crash_enter_plugin(int plugin, rh_crash_call call) {
    uint32_t previous_mark = current_call;
    if (plugin > 0 && plugin <= PLUGINS_CAP) current_call = ((uint32_t)plugin << 8) | ((uint32_t)call & 0xff);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return previous_mark;
}

void rh_crash_leave_plugin(uint32_t previous_mark) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    current_call = previous_mark;
}

const char *rh_crash_call_name(rh_crash_call call) {
    return call > RH_CRASH_CALL_NONE && call < RH_CRASH_CALL_COUNT ? call_names[call] : "";
}

void rh_crash_set_writer_hook(void (*hook)(int stage)) { writer_hook = hook; }

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
