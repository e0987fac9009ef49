/* A debug file's compressed DWARF, inflated into a copy in memory that libdwfl reads as the
 * debug file.
 *
 * libdw (0.188) inflates every compressed DWARF section of a debug file when it opens it,
 * with zlib, the sections no lookup here reads too: libc6-dbg's libc took 38-41 ms to its first
 * lookup, on the path of the first crash a recovery saves. The copy holds the same file with
 * each compressed section inflated by libdeflate (2.4 times zlib's speed on that .debug_info)
 * and the sections of variables' locations and of macros left out: 20-27 ms. (By zlib, the
 * copy took as long as libdw's own reading: without libdeflate, libdw reads the file.)
 * Everything else in the copy is at the offset it has in the file (the ELF and
 * program headers, notes, symbol tables), the inflated sections and a new section header table
 * after it. Anything unexpected (another compression, a header that does not fit) leaves the
 * file to libdw as it is.
 */
#include "symbolize_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- inflaters */

/* libdeflate.h's prototypes (its runtime library only is needed). */
struct libdeflate_decompressor;
static struct {
    struct libdeflate_decompressor *(*alloc)(void);
    int (*zlib_decompress)(struct libdeflate_decompressor *, const void *in, size_t in_bytes, void *out,
                           size_t out_bytes, size_t *actual_out_bytes);
    void (*free)(struct libdeflate_decompressor *);
} libdeflate;
static pthread_once_t libdeflate_once = PTHREAD_ONCE_INIT;

/* Loaded at the first copy, never linked: only a recovery reads debug files. Never closed. */
static void load_libdeflate(void) {
    void *library = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == NULL) return;
    *(void **)&libdeflate.alloc = dlsym(library, "libdeflate_alloc_decompressor");
    *(void **)&libdeflate.zlib_decompress = dlsym(library, "libdeflate_zlib_decompress");
    *(void **)&libdeflate.free = dlsym(library, "libdeflate_free_decompressor");
    if (libdeflate.zlib_decompress == NULL || libdeflate.free == NULL) libdeflate.alloc = NULL;
}

/* Inflates the zlib stream `in` into exactly `out_bytes` at `out`. */
static bool inflate_exactly(struct libdeflate_decompressor *deflater, const void *in, size_t in_bytes, void *out,
                            size_t out_bytes) {
    size_t got = 0;
    return libdeflate.zlib_decompress(deflater, in, in_bytes, out, out_bytes, &got) == 0 && got == out_bytes;
}

/* ---------------------------------------------------------------- the copy */

/* Sections no lookup reads (lookup.c asks for scopes, names, call sites and lines): variables'
   locations and macros. In the copy they have no name, so libdw neither knows nor inflates them. */
static bool unread(const char *name) {
    static const char *const names[] = {".debug_loc", ".debug_loclists", ".debug_macro", ".debug_macinfo"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

/* A compressed section of the file: where its bytes are, and where its inflated ones go. */
typedef struct compressed {
    size_t index;
    uint64_t from, to; /* its bytes in the file */
    uint64_t at;       /* in the copy; 0: left out */
    Elf64_Chdr header;
} compressed;

/* The file `bytes` (`size` long) read: its compressed sections in `found` (at most `cap`), each
   given its place after the file's end; the copy's size, its section table at *table. 0 when
   the copy cannot be made or would gain nothing. */
static uint64_t plan(const unsigned char *bytes, uint64_t size, compressed *found, size_t cap, size_t *count,
                     uint64_t *table) {
    Elf64_Ehdr eh;
    if (size < sizeof eh) return 0;
    memcpy(&eh, bytes, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64
        || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0
        || eh.e_shstrndx >= eh.e_shnum || eh.e_shoff > size || eh.e_shoff % 8 != 0
        || (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > size - eh.e_shoff)
        return 0;
    const Elf64_Shdr *sections = (const void *)(bytes + eh.e_shoff);
    const Elf64_Shdr *names = &sections[eh.e_shstrndx];
    if (names->sh_offset > size || names->sh_size > size - names->sh_offset || names->sh_size == 0
        || bytes[names->sh_offset + names->sh_size - 1] != 0 || (names->sh_flags & SHF_COMPRESSED))
        return 0;
    uint64_t end = size;
    *count = 0;
    for (size_t i = 0; i < eh.e_shnum; i++) {
        const Elf64_Shdr *s = &sections[i];
        if (!(s->sh_flags & SHF_COMPRESSED) || s->sh_type == SHT_NOBITS) continue;
        if (*count == cap) return 0;
        compressed *p = &found[(*count)++];
        if (s->sh_offset > size || s->sh_size > size - s->sh_offset || s->sh_size < sizeof p->header
            || s->sh_name >= names->sh_size)
            return 0;
        memcpy(&p->header, bytes + s->sh_offset, sizeof p->header);
        uint64_t align = p->header.ch_addralign ? p->header.ch_addralign : 1;
        if (p->header.ch_type != ELFCOMPRESS_ZLIB || (align & (align - 1)) || align > 4096
            || p->header.ch_size > ((uint64_t)1 << 32))
            return 0;
        p->index = i;
        p->from = s->sh_offset;
        p->to = s->sh_offset + s->sh_size;
        p->at = 0;
        if (unread((const char *)bytes + names->sh_offset + s->sh_name)) continue;
        p->at = (end + align - 1) & ~(align - 1);
        end = p->at + p->header.ch_size;
    }
    if (*count == 0) return 0;
    *table = (end + 7) & ~(uint64_t)7;
    return *table + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr);
}

static int by_offset(const void *a, const void *b) {
    const compressed *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

/* Writes the copy into `out`: the file's bytes but its compressed sections', those inflated,
   and the section table that describes them. */
static bool fill(const unsigned char *bytes, uint64_t size, compressed *found, size_t count,
                 uint64_t table, unsigned char *out) {
    Elf64_Ehdr eh;
    memcpy(&eh, bytes, sizeof eh);
    Elf64_Shdr *sections = (void *)(out + table);
    memcpy(sections, bytes + eh.e_shoff, (size_t)eh.e_shnum * sizeof *sections);
    qsort(found, count, sizeof *found, by_offset);
    uint64_t copied = 0;
    for (size_t i = 0; i < count; i++) {
        if (found[i].from > copied) memcpy(out + copied, bytes + copied, found[i].from - copied);
        if (found[i].to > copied) copied = found[i].to;
    }
    if (size > copied) memcpy(out + copied, bytes + copied, size - copied);
    eh.e_shoff = table;
    memcpy(out, &eh, sizeof eh);

    struct libdeflate_decompressor *deflater = libdeflate.alloc();
    bool inflated = deflater != NULL;
    for (size_t i = 0; i < count && inflated; i++) {
        Elf64_Shdr *s = &sections[found[i].index];
        s->sh_flags &= ~(uint64_t)SHF_COMPRESSED;
        if (found[i].at == 0) { /* left out: nameless and empty */
            *s = (Elf64_Shdr){.sh_type = SHT_NULL};
            continue;
        }
        const unsigned char *in = bytes + found[i].from + sizeof(Elf64_Chdr);
        inflated = inflate_exactly(deflater, in, found[i].to - found[i].from - sizeof(Elf64_Chdr),
                                   out + found[i].at, found[i].header.ch_size);
        s->sh_offset = found[i].at;
        s->sh_size = found[i].header.ch_size;
        s->sh_addralign = found[i].header.ch_addralign;
    }
    if (deflater != NULL) libdeflate.free(deflater);
    return inflated;
}

int sym_inflated_copy(int fd) {
    pthread_once(&libdeflate_once, load_libdeflate);
    if (libdeflate.alloc == NULL) return -1;

    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) return -1;
    uint64_t size = (uint64_t)st.st_size;
    const unsigned char *bytes = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (bytes == MAP_FAILED) return -1;
    compressed found[256];
    size_t count = 0;
    uint64_t table = 0;
    uint64_t total = plan(bytes, size, found, sizeof found / sizeof found[0], &count, &table);
    int copy = total != 0 ? memfd_create("reporthost-debug-file", MFD_CLOEXEC) : -1;
    unsigned char *out = MAP_FAILED;
    if (copy >= 0 && ftruncate(copy, (off_t)total) == 0)
        out = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, copy, 0);
    bool made = out != MAP_FAILED && fill(bytes, size, found, count, table, out);
    if (out != MAP_FAILED) munmap(out, total);
    munmap((void *)bytes, size);
    if (!made) {
        if (copy >= 0) close(copy);
        return -1;
    }
    return copy;
}
