#define _GNU_SOURCE
#include "remote_capture.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FRAMES_MAX 256

/* libunwind-ptrace and what it needs (libunwind's remote unwinder, liblzma), loaded with dlopen
 * at the first trace, never linked: only `run --capture=ptrace` and reporthost-stack unwind
 * another process, and every other command would pay for loading them at its start. The
 * names are libunwind's own for this architecture (`unw_step` is `_Ux86_64_step`). */
#define NAME2(x) #x
#define NAME(x) NAME2(x)
static struct {
    unw_accessors_t *accessors;
    void *(*create)(pid_t);
    void (*destroy)(void *);
    unw_addr_space_t (*create_space)(unw_accessors_t *, int);
    void (*destroy_space)(unw_addr_space_t);
    int (*init_remote)(unw_cursor_t *, unw_addr_space_t, void *);
    int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
    int (*step)(unw_cursor_t *);
} unwinder;
static pthread_once_t unwinder_once = PTHREAD_ONCE_INIT;

/* Never closed (RTLD_NODELETE). liblzma and libunwind go in the global scope: libunwind-ptrace
   names their functions without depending on them. */
static void load_unwinder(void) {
    int flags = RTLD_NOW | RTLD_NODELETE;
    void *lzma = dlopen("liblzma.so.5", flags | RTLD_GLOBAL);
    void *generic = lzma ? dlopen("libunwind-x86_64.so.8", flags | RTLD_GLOBAL) : NULL;
    void *ptrace = generic ? dlopen("libunwind-ptrace.so.0", flags | RTLD_LOCAL) : NULL;
    if (!ptrace) return;
    *(void **)&unwinder.create = dlsym(ptrace, "_UPT_create");
    *(void **)&unwinder.destroy = dlsym(ptrace, "_UPT_destroy");
    *(void **)&unwinder.create_space = dlsym(generic, NAME(unw_create_addr_space));
    *(void **)&unwinder.destroy_space = dlsym(generic, NAME(unw_destroy_addr_space));
    *(void **)&unwinder.init_remote = dlsym(generic, NAME(unw_init_remote));
    *(void **)&unwinder.get_reg = dlsym(generic, NAME(unw_get_reg));
    *(void **)&unwinder.step = dlsym(generic, NAME(unw_step));
    bool complete = unwinder.create && unwinder.destroy && unwinder.create_space && unwinder.destroy_space &&
                    unwinder.init_remote && unwinder.get_reg && unwinder.step;
    /* Last: a non-NULL accessors table says every function is there. */
    if (complete) unwinder.accessors = dlsym(ptrace, "_UPT_accessors");
}

int rh_trace_unwind(pid_t tid, unsigned long *frames, int max) {
    pthread_once(&unwinder_once, load_unwinder);
    if (!unwinder.accessors) return -1;
    unw_addr_space_t space = unwinder.create_space(unwinder.accessors, 0);
    if (!space) return -1;
    void *context = unwinder.create(tid);
    if (!context) {
        unwinder.destroy_space(space);
        return -1;
    }
    unw_cursor_t cursor;
    int count = 0;
    if (unwinder.init_remote(&cursor, space, context) == 0) {
        int step = 0;
        do {
            unw_word_t ip = 0;
            if (unwinder.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
            frames[count++] = (unsigned long)ip;
        } while (count < max && (step = unwinder.step(&cursor)) > 0);
        (void)step;
    }
    unwinder.destroy(context);
    unwinder.destroy_space(space);
    return count;
}

/* The executable mappings of `pid` (from /proc/<pid>/maps), for stack scanning. */
struct ranges {
    unsigned long start[512], end[512];
    int count;
};

static void executable_ranges(pid_t pid, struct ranges *out) {
    char maps[64], line[4352];
    snprintf(maps, sizeof maps, "/proc/%d/maps", (int)pid);
    out->count = 0;
    FILE *in = fopen(maps, "re");
    if (!in) return;
    while (out->count < 512 && fgets(line, sizeof line, in)) {
        unsigned long start, end;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && perms[2] == 'x') {
            out->start[out->count] = start;
            out->end[out->count++] = end;
        }
    }
    fclose(in);
}

static bool executable(const struct ranges *ranges, unsigned long address) {
    for (int i = 0; i < ranges->count; i++)
        if (address >= ranges->start[i] && address < ranges->end[i]) return true;
    return false;
}

/* Whether the bytes before `address` in `pid` end with a call instruction: a direct `call
   rel32` (E8), or an indirect `call r/m` (FF /2) of 2 to 7 bytes. */
static bool follows_call(pid_t pid, unsigned long address) {
    unsigned char code[8];
    struct iovec local = {code, sizeof code}, remote = {(void *)(address - sizeof code), sizeof code};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof code) return false;
    if (code[8 - 5] == 0xE8) return true;
    for (int length = 2; length <= 7; length++) {
        if (code[8 - length] == 0xFF && ((code[8 - length + 1] >> 3) & 7) == 2) return true;
    }
    return false;
}

/* The fallback when the unwind tables end the walk at the first frame (a static program
   linked without .eh_frame_hdr): the words of the stack from `sp` up that point into
   executable code right after a call, as crash reporters' stack scanning takes them. */
static int scan_stack(pid_t pid, pid_t tid, unsigned long sp, unsigned long *frames, int count, int max) {
    struct ranges ranges;
    executable_ranges(pid, &ranges);
    unsigned long words[2048];
    struct iovec local = {words, sizeof words}, remote = {(void *)sp, sizeof words};
    ssize_t got = process_vm_readv(tid, &local, 1, &remote, 1, 0);
    for (ssize_t i = 0; got > 0 && i < got / (ssize_t)sizeof *words && count < max; i++) {
        if (executable(&ranges, words[i]) && follows_call(pid, words[i])) frames[count++] = words[i];
    }
    return count;
}

/* The GNU build id of the ELF file at `path` (its PT_NOTE segments), as lowercase hex. */
static void build_id_of(const char *path, char *out, size_t cap) {
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return;
    Elf64_Ehdr header;
    if (pread(fd, &header, sizeof header, 0) != (ssize_t)sizeof header || memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
        header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum > 256) {
        close(fd);
        return;
    }
    for (int i = 0; i < header.e_phnum && !out[0]; i++) {
        Elf64_Phdr segment;
        if (pread(fd, &segment, sizeof segment, (off_t)(header.e_phoff + (uint64_t)i * sizeof segment)) != (ssize_t)sizeof segment) break;
        if (segment.p_type != PT_NOTE || segment.p_filesz > 65536) continue;
        unsigned char notes[65536];
        if (pread(fd, notes, segment.p_filesz, (off_t)segment.p_offset) != (ssize_t)segment.p_filesz) break;
        size_t at = 0;
        while (at + sizeof(Elf64_Nhdr) <= segment.p_filesz) {
            Elf64_Nhdr note;
            memcpy(&note, notes + at, sizeof note);
            size_t name = at + sizeof note, desc = name + ((note.n_namesz + 3) & ~3u);
            size_t next = desc + ((note.n_descsz + 3) & ~3u);
            if (next > segment.p_filesz) break;
            if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && memcmp(notes + name, "GNU", 4) == 0 && note.n_descsz <= 64 &&
                note.n_descsz * 2 + 1 <= cap) {
                for (size_t k = 0; k < note.n_descsz; k++) snprintf(out + 2 * k, 3, "%02x", notes[desc + k]);
                break;
            }
            at = next;
        }
    }
    close(fd);
}

/* `module <start> <end> <path>` and `build_id` lines for each file mapped in `pid`: its
   lowest and highest addresses (what the in-process writer's map says of a module). */
void rh_trace_write_modules(FILE *out, pid_t pid) {
    char maps[64];
    snprintf(maps, sizeof maps, "/proc/%d/maps", (int)pid);
    FILE *in = fopen(maps, "re");
    if (!in) return;
    fprintf(out, "modules_at_crash\n");
    char line[4352], current[4096] = "";
    unsigned long low = 0, high = 0;
    while (fgets(line, sizeof line, in)) {
        unsigned long start, end;
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &start, &end, &path_at) < 2 || path_at == 0) continue;
        char *path = line + path_at;
        path[strcspn(path, "\n")] = '\0';
        if (path[0] != '/') continue;
        if (strcmp(path, current) == 0 && start >= high) {
            high = end;
            continue;
        }
        if (current[0]) {
            char id[129];
            build_id_of(current, id, sizeof id);
            fprintf(out, "module 0x%lx 0x%lx %s\n", low, high, current);
            if (id[0]) fprintf(out, "build_id %s\n", id);
        }
        snprintf(current, sizeof current, "%s", path);
        low = start;
        high = end;
    }
    if (current[0]) {
        char id[129];
        build_id_of(current, id, sizeof id);
        fprintf(out, "module 0x%lx 0x%lx %s\n", low, high, current);
        if (id[0]) fprintf(out, "build_id %s\n", id);
    }
    fclose(in);
}

void rh_trace_write_stack(FILE *out, pid_t pid, pid_t tid) {
#if defined(__x86_64__)
    struct user_regs_struct regs;
    bool have_registers = ptrace(PTRACE_GETREGS, tid, NULL, &regs) == 0;
    if (have_registers) {
        const struct { const char *name; unsigned long long value; } named[] = {
            {"rip", regs.rip}, {"rsp", regs.rsp}, {"rbp", regs.rbp}, {"rax", regs.rax}, {"rbx", regs.rbx}, {"rcx", regs.rcx},
            {"rdx", regs.rdx}, {"rsi", regs.rsi}, {"rdi", regs.rdi}, {"r8", regs.r8}, {"r9", regs.r9}, {"r10", regs.r10},
            {"r11", regs.r11}, {"r12", regs.r12}, {"r13", regs.r13}, {"r14", regs.r14}, {"r15", regs.r15}};
        for (size_t i = 0; i < sizeof named / sizeof *named; i++) fprintf(out, "register %s 0x%llx\n", named[i].name, named[i].value);
    }
#endif
    unsigned long frames[FRAMES_MAX];
    int count = rh_trace_unwind(tid, frames, FRAMES_MAX);
#if defined(__x86_64__)
    if (count < 2 && have_registers) {
        if (count == 0) frames[count++] = regs.rip;
        fprintf(out, "unwind scanned\n");
        count = scan_stack(pid, tid, regs.rsp, frames, count, 64);
    }
#endif
    for (int i = 0; i < count; i++) fprintf(out, "frame 0x%lx\n", frames[i]);
}

void rh_trace_write_thread(FILE *out, pid_t pid, pid_t tid) {
    rh_trace_write_stack(out, pid, tid);
    rh_trace_write_modules(out, pid);
}
