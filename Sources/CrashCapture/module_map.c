#define _GNU_SOURCE
#include "capture_internal.h"

#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>

/* --- build ids and the modules mapped, at refresh and at the crash ------------------- */

/* The module map, double-buffered: a refresh writes the buffer the handler is not reading
   and then publishes it. */
static char modules[2][MODULES_CAP];
static size_t modules_length[2];
static int modules_current;
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;

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
void cc_write_mapped_modules(int fd, struct line *l) {
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

static char executable[PATH_CAP];

void cc_note_executable(void) {
    ssize_t length = readlink("/proc/self/exe", executable, sizeof executable - 1);
    if (length > 0) {
        executable[length] = '\0';
    } else {
        strcpy(executable, "[main]");
    }
}

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

void cc_write_module_map(int fd) {
    int map = __atomic_load_n(&modules_current, __ATOMIC_ACQUIRE);
    write_all(fd, modules[map], modules_length[map]);
}
