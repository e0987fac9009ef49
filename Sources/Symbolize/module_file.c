/* A module's file, vetted before libdwfl reads it: a regular file, opened without waiting, a
 * loadable ELF module, with the crash's build id. */
#include "symbolize_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Largest build id we show in a message (bytes of hex); real ones are 40. */
#define SHOWN_BUILD_ID_MAX 128

/* ---------------------------------------------------------------- build ids */

void sym_hex_of(const unsigned char *bytes, size_t len, char *out, size_t cap) {
    static const char digits[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < len && o + 2 < cap; i++) {
        out[o++] = digits[bytes[i] >> 4];
        out[o++] = digits[bytes[i] & 15];
    }
    if (cap > 0) out[o] = '\0';
}

/* The crash's build id may be upper or lower case; anything that is not the same hex differs. */
static bool build_id_matches(const unsigned char *bytes, size_t len, const char *wanted) {
    static const char digits[] = "0123456789abcdef";
    if (strlen(wanted) != len * 2) return false;
    for (size_t i = 0; i < len; i++) {
        if (tolower((unsigned char)wanted[2 * i]) != digits[bytes[i] >> 4]) return false;
        if (tolower((unsigned char)wanted[2 * i + 1]) != digits[bytes[i] & 15]) return false;
    }
    return true;
}

/* The crash's build id as it may be shown in a message: it comes from the crash file and may
   be garbage, so only printable ASCII survives (anything else becomes '?'), at most
   SHOWN_BUILD_ID_MAX characters. */
static void printable_id(const char *wanted, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; wanted[i] != '\0' && o + 1 < cap && i < SHOWN_BUILD_ID_MAX; i++) {
        unsigned char c = (unsigned char)wanted[i];
        out[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (cap > 0) out[o] = '\0';
}

#define PAGE_MASK_4K (~(uint64_t)0xfff)

/* The address span of the PT_LOAD segments. False when there are none (or they are nonsense). */
static bool load_span(Elf *elf, elf_facts *facts) {
    size_t phnum = 0;
    if (sym_elfutils.elf_getphdrnum(elf, &phnum) != 0) return false;
    bool seen = false;
    uint64_t last_end = 0;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (sym_elfutils.gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD) continue;
        if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr) return false; /* wraps around */
        if (!seen) facts->first = ph.p_vaddr & PAGE_MASK_4K;
        seen = true;
        if (ph.p_vaddr + ph.p_memsz > last_end) last_end = ph.p_vaddr + ph.p_memsz;
    }
    if (!seen || last_end <= facts->first) return false;
    facts->size = last_end - facts->first;
    return true;
}

/* Is this ELF file a loadable module whose build id is `wanted` ("" = anything)? */
static bool verify_elf(Elf *elf, const char *path, const char *wanted, elf_facts *facts, char *why,
                       size_t cap) {
    if (sym_elfutils.elf_kind(elf) != ELF_K_ELF) {
        sym_set_why(why, cap, "%s: not an ELF file", path);
        return false;
    }
    GElf_Ehdr ehdr;
    if (sym_elfutils.gelf_getehdr(elf, &ehdr) == NULL) {
        sym_set_why(why, cap, "%s: unreadable ELF header (%s)", path, sym_elfutils.elf_errmsg(-1));
        return false;
    }
    facts->type = ehdr.e_type;
    if (ehdr.e_type != ET_DYN && ehdr.e_type != ET_EXEC) {
        sym_set_why(why, cap, "%s: not an executable or shared object (ELF type %u)", path,
                    (unsigned)ehdr.e_type);
        return false;
    }
    if (!load_span(elf, facts)) {
        sym_set_why(why, cap, "%s: no usable loadable segments", path);
        return false;
    }
    const void *id = NULL;
    ssize_t len = sym_elfutils.dwelf_elf_gnu_build_id(elf, &id);
    facts->id_len = len > 0 && id != NULL && (size_t)len <= sizeof facts->id ? (size_t)len : 0;
    if (facts->id_len > 0) memcpy(facts->id, id, facts->id_len);
    if (wanted[0] == '\0') return true;

    char shown[SHOWN_BUILD_ID_MAX + 1];
    printable_id(wanted, shown, sizeof shown);
    if (len <= 0 || id == NULL) {
        sym_set_why(why, cap, "%s: no GNU build id on disk; the crash's is %s", path, shown);
        return false;
    }
    if (!build_id_matches(id, (size_t)len, wanted)) {
        char disk[SHOWN_BUILD_ID_MAX + 1];
        sym_hex_of(id, (size_t)len, disk, sizeof disk);
        sym_set_why(why, cap, "%s: build id on disk %s differs from the crash's %s", path, disk, shown);
        return false;
    }
    return true;
}

/* Opens `path` for reading only if it is a regular file, and never waits. A module's path
   comes from the crashed process, which may have left a FIFO or a device there (opening a
   FIFO blocks until a writer comes): stat refuses one before it is opened, O_NONBLOCK covers
   one swapped in meanwhile, and fstat on what was opened decides. O_NOFOLLOW: a symbolic link
   (Debian's sonames are links) is opened at its resolved path, vetted the same way. Returns
   the descriptor, or -1 with `why` (NULL: no message). */
int sym_open_regular(const char *path, char *why, size_t cap) {
    struct stat st;
    if (stat(path, &st) != 0) {
        sym_set_why(why, cap, "%s: cannot open (%s)", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        sym_set_why(why, cap, "%s: not a regular file", path);
        return -1;
    }
    const int flags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(path, flags);
    if (fd < 0 && errno == ELOOP) {
        char *resolved = realpath(path, NULL);
        fd = resolved != NULL ? open(resolved, flags) : -1;
        int error = errno;
        free(resolved);
        errno = error;
    }
    if (fd < 0) {
        sym_set_why(why, cap, "%s: cannot open (%s)", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        sym_set_why(why, cap, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* Opens `path` and vets it (fills *facts). Returns the descriptor, which libdwfl is given so
   that the file vetted is the file read, or -1 with `why`. */
int sym_vet_file(const char *path, const char *wanted, elf_facts *facts, char *why, size_t cap) {
    int fd = sym_open_regular(path, why, cap);
    if (fd < 0) return -1;
    struct stat st;
    bool ok = false;
    Elf *elf = sym_elfutils.elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (elf == NULL)
        sym_set_why(why, cap, "%s: not readable as ELF (%s)", path, sym_elfutils.elf_errmsg(-1));
    else if (fstat(fd, &st) != 0)
        sym_set_why(why, cap, "%s: cannot open (%s)", path, strerror(errno));
    else
        ok = verify_elf(elf, path, wanted, facts, why, cap);
    sym_elfutils.elf_end(elf);
    if (!ok) {
        close(fd);
        return -1;
    }
    facts->device = st.st_dev;
    facts->inode = st.st_ino;
    facts->bytes = st.st_size;
    facts->changed = st.st_ctim;
    return fd;
}

/* /proc/self/maps names a file unlinked after it was mapped "<path> (deleted)": whatever is
   at that path now (a FIFO the program made, or a file of that name) is not what it ran. */
bool sym_is_deleted(const char *path) {
    static const char mark[] = " (deleted)";
    size_t length = strlen(path), mark_length = sizeof mark - 1;
    return length > mark_length && strcmp(path + length - mark_length, mark) == 0;
}
