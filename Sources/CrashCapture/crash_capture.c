#define _GNU_SOURCE
#include "crash_capture.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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
};

static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};

/* Prepared at install and registration time; read by the handler only. */
static char directory[PATH_CAP];
static char session[SESSION_CAP];
static char attributes[ATTR_CAP][ATTR_TEXT_CAP];
static volatile sig_atomic_t attribute_count;
static char attachments[ATTACH_CAP][PATH_CAP];
static volatile sig_atomic_t attachment_count;
static char modules[MODULES_CAP];
static size_t modules_length;
static int handling;
static struct sigaction previous[sizeof signals / sizeof *signals];

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

static void emit(int fd, struct line *l) {
    add(l, "\n");
    size_t done = 0;
    while (done < l->length) {
        ssize_t n = write(fd, l->text + done, l->length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    l->length = 0;
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

/* --- the handler ---------------------------------------------------------------------- */

static void write_crash_file(int signal_number, siginfo_t *info, void *context) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct line l = {.length = 0};
    /* <dir>/<session>-<seconds>-<pid>.crash, written under a temporary name and renamed, so a
       file the recovery sees is never half-named. */
    char path[PATH_CAP + 128], temporary[PATH_CAP + 160];
    add(&l, directory);
    add(&l, "/");
    add(&l, session);
    add(&l, "-");
    add_unsigned(&l, (uint64_t)now.tv_sec, 10);
    add(&l, "-");
    add_unsigned(&l, (uint64_t)getpid(), 10);
    add(&l, ".crash");
    memcpy(path, l.text, l.length);
    path[l.length] = '\0';
    memcpy(temporary, l.text, l.length);
    memcpy(temporary + l.length, ".partial", 9);
    l.length = 0;

    int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    add(&l, "reporthost-crash 1"); emit(fd, &l);
    add(&l, "session "); add(&l, session); emit(fd, &l);
    add(&l, "signal "); add_unsigned(&l, (uint64_t)signal_number, 10); emit(fd, &l);
    add(&l, "code "); add_unsigned(&l, (uint64_t)(uint32_t)info->si_code, 10); emit(fd, &l);
    add(&l, "address "); add_unsigned(&l, (uint64_t)(uintptr_t)info->si_addr, 16); emit(fd, &l);
    add(&l, "thread "); add_unsigned(&l, (uint64_t)syscall(SYS_gettid), 10); emit(fd, &l);
    add(&l, "pid "); add_unsigned(&l, (uint64_t)getpid(), 10); emit(fd, &l);
    add(&l, "time "); add_unsigned(&l, (uint64_t)now.tv_sec, 10); emit(fd, &l);
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
    /* backtrace() was called once at install, so it does not load libgcc here. */
    void *frames[FRAMES_CAP];
    int count = backtrace(frames, FRAMES_CAP);
    for (int i = 0; i < count; i++) {
        add(&l, "frame "); add_unsigned(&l, (uint64_t)(uintptr_t)frames[i], 16); emit(fd, &l);
    }
    for (int i = 0; i < attribute_count; i++) {
        if (attributes[i][0] == '\0') continue;  /* removed */
        add(&l, "attribute "); add(&l, attributes[i]); emit(fd, &l);
    }
    for (int i = 0; i < attachment_count; i++) { add(&l, "attachment "); add(&l, attachments[i]); emit(fd, &l); }
    write_all(fd, modules, modules_length);
    add(&l, "end"); emit(fd, &l);
    fsync(fd);
    close(fd);
    rename(temporary, path);
    /* Make the rename durable. */
    int dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) { fsync(dir); close(dir); }
}

static void on_signal(int signal_number, siginfo_t *info, void *context) {
    /* One writer: a second thread faulting at the same time waits for the first to end the
       process instead of racing it (or killing it mid-write). */
    if (__atomic_exchange_n(&handling, 1, __ATOMIC_SEQ_CST) != 0) {
        for (;;) pause();
    }
    write_crash_file(signal_number, info, context);
    /* Restore the default action and re-raise: the process dies with this signal. */
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

/* --- install time ---------------------------------------------------------------------- */

static char executable[PATH_CAP];

static int add_module(struct dl_phdr_info *info, size_t size, void *unused) {
    (void)size;
    (void)unused;
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
    int n = snprintf(modules + modules_length, MODULES_CAP - modules_length, "module 0x%lx 0x%lx %s\n",
                     (unsigned long)low, (unsigned long)high, name);
    if (n > 0 && (size_t)n < MODULES_CAP - modules_length) modules_length += (size_t)n;
    return 0;
}

bool rh_crash_install(const char *crash_directory, const char *session_id) {
    if (strlen(crash_directory) >= PATH_CAP || strlen(session_id) >= SESSION_CAP) return false;
    strcpy(directory, crash_directory);
    strcpy(session, session_id);
    modules_length = 0;
    ssize_t length = readlink("/proc/self/exe", executable, sizeof executable - 1);
    if (length > 0) {
        executable[length] = '\0';
    } else {
        strcpy(executable, "[main]");
    }
    dl_iterate_phdr(add_module, NULL);
    void *warm[1];
    backtrace(warm, 1);

    if (!rh_crash_prepare_thread()) return false;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++) {
        if (sigaction(signals[i], &action, &previous[i]) != 0) return false;
    }
    return true;
}

bool rh_crash_prepare_thread(void) {
    enum { STACK_SIZE = 64 * 1024 };
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return true;  /* has one */
    void *memory = malloc(STACK_SIZE);
    if (!memory) return false;
    stack_t stack = {.ss_sp = memory, .ss_size = STACK_SIZE, .ss_flags = 0};
    return sigaltstack(&stack, NULL) == 0;
}

void rh_crash_remove_attribute(const char *key) {
    size_t key_length = strlen(key);
    for (int i = 0; i < attribute_count; i++) {
        if (strncmp(attributes[i], key, key_length) == 0 && attributes[i][key_length] == '=') attributes[i][0] = '\0';
    }
}

bool rh_crash_set_attribute(const char *key, const char *value) {
    if (strchr(key, '\n') || strchr(value, '\n') || strchr(key, '=')) return false;
    size_t key_length = strlen(key);
    if (key_length + strlen(value) + 2 > ATTR_TEXT_CAP) return false;
    int slot = attribute_count;
    for (int i = 0; i < attribute_count; i++) {
        if (strncmp(attributes[i], key, key_length) == 0 && attributes[i][key_length] == '=') slot = i;
    }
    if (slot == ATTR_CAP) return false;
    snprintf(attributes[slot], ATTR_TEXT_CAP, "%s=%s", key, value);
    if (slot == attribute_count) attribute_count = slot + 1;
    return true;
}

bool rh_crash_add_attachment(const char *path) {
    if (attachment_count == ATTACH_CAP || strlen(path) >= PATH_CAP || strchr(path, '\n')) return false;
    strcpy(attachments[attachment_count], path);
    attachment_count = attachment_count + 1;
    return true;
}

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
    raise(signal_number);  /* SIGBUS, and any signal the cases above did not produce */
}
