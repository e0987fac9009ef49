/* Symbolize: crash frame addresses → function, file, line (inlined frames expanded).
 *
 * Runs at recovery time, never in a signal handler. elfutils' libdwfl does the work offline:
 * each module that was mapped in the crashed process is reported at the address it had there,
 * so frame addresses can be looked up as they were recorded.
 *
 * Every file read is opened here (open_regular: regular files only, never waiting) and handed
 * to elfutils as a descriptor: the module, its debug file and its dwz file (find_debuginfo,
 * set_alt). What libdw (0.188) would still open by a path itself is a split-DWARF unit's .dwo,
 * and only through dwarf_get_units or dwarf_cu_info asked for a subdie, which nothing here
 * calls: a split-DWARF module gives its function from the symbol table and its line from the
 * skeleton's line table.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT, vasprintf */
#endif

#include "symbolize.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libelf.h>

/* libdw and libelf are loaded at the first symbolizer (dlopen), not linked: linked, they and
 * the compression libraries they need would be loaded at the start of every program that links
 * the host, while only recovery symbolicates. dlsym on libdw's handle also finds libelf's
 * functions (a dependency of libdw). */
#define ELFUTILS_FUNCTIONS(X) \
    X(dwarf_attr) \
    X(dwarf_attr_integrate) \
    X(dwarf_begin) \
    X(dwarf_diecu) \
    X(dwarf_end) \
    X(dwarf_filesrc) \
    X(dwarf_formstring) \
    X(dwarf_formudata) \
    X(dwarf_getscopes) \
    X(dwarf_getscopes_die) \
    X(dwarf_getsrcfiles) \
    X(dwarf_setalt) \
    X(dwarf_tag) \
    X(dwelf_dwarf_gnu_debugaltlink) \
    X(dwelf_elf_gnu_build_id) \
    X(dwfl_begin) \
    X(dwfl_end) \
    X(dwfl_errmsg) \
    X(dwfl_line_comp_dir) \
    X(dwfl_lineinfo) \
    X(dwfl_module_addrdie) \
    X(dwfl_module_addrinfo) \
    X(dwfl_module_getdwarf) \
    X(dwfl_module_getsrc) \
    X(dwfl_module_info) \
    X(dwfl_offline_section_address) \
    X(dwfl_report_begin) \
    X(dwfl_report_elf) \
    X(dwfl_report_end) \
    X(elf_begin) \
    X(elf_end) \
    X(elf_errmsg) \
    X(elf_getphdrnum) \
    X(elf_kind) \
    X(elf_version) \
    X(gelf_getehdr) \
    X(gelf_getphdr)

/* The functions used, typed by elfutils' own prototypes. */
static struct {
#define FIELD(symbol) __typeof__(symbol) *symbol;
    ELFUTILS_FUNCTIONS(FIELD)
#undef FIELD
} elfutils;

static pthread_once_t elfutils_once = PTHREAD_ONCE_INIT;
/* Why libdw cannot be used; "" once it is loaded. */
static char elfutils_failure[256] = "libdw was not loaded";

static void load_elfutils(void) {
    /* Never closed: the symbol cache keeps its modules open for a whole recovery. */
    void *library = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == NULL) {
        const char *error = dlerror();
        snprintf(elfutils_failure, sizeof elfutils_failure, "libdw could not be loaded: %s", error ? error : "libdw.so.1");
        return;
    }
#define LOAD(symbol)                                                                                           \
    if ((*(void **)&elfutils.symbol = dlsym(library, #symbol)) == NULL) {                                      \
        snprintf(elfutils_failure, sizeof elfutils_failure, "libdw.so.1 has no %s: it is too old", #symbol);   \
        return;                                                                                                \
    }
    ELFUTILS_FUNCTIONS(LOAD)
#undef LOAD
    elfutils_failure[0] = 0;
}

const char *rh_symbolize_load_failure(void) {
    pthread_once(&elfutils_once, load_elfutils);
    return elfutils_failure[0] ? elfutils_failure : NULL;
}

/* libstdc++'s demangler (link with -lstdc++). */
extern char *__cxa_demangle(const char *mangled, char *output, size_t *length, int *status);

/* The Swift runtime's demangler; present only when the process links the Swift runtime. */
typedef char *(*swift_demangle_fn)(const char *mangled, size_t length, char *output,
                                   size_t *output_size, uint32_t flags);

/* What add_module needs to know of a file besides the crash's build id. */
typedef struct elf_facts {
    int type;       /* ET_DYN or ET_EXEC */
    uint64_t first; /* page-aligned p_vaddr of the first PT_LOAD: what `base` maps */
    uint64_t size;  /* from `first` to the end of the last PT_LOAD */
    unsigned char id[64]; /* the file's own GNU build id (id_len 0: none): finds its debug file */
    size_t id_len;
    dev_t device;   /* which file was vetted (see report_module) */
    ino_t inode;
} elf_facts;

/* One module file, opened once for a whole cache and reported at its link-time addresses:
   the crashes of many processes look their frames up in it, each address translated from
   where that process had the file mapped. Reading a library's DWARF (often compressed) is
   the dear part of symbolication: a crash loop pays it once per library, not per crash. */
typedef struct image {
    char *path;
    char *build_id;
    elf_facts facts;
    Dwfl_Callbacks callbacks; /* libdwfl keeps a pointer to it: must live as long as dwfl */
    Dwfl *dwfl;
    Dwfl_Module *mod;
    Dwarf *alt; /* the dwz file its DWARF shares (set_alt), ended after dwfl */
    int alt_fd;
} image;

struct rh_symbol_cache {
    image **images;
    size_t count, cap;
};

/* Where one crashed process had an image mapped. */
typedef struct mapping {
    uint64_t start, end;
    image *image;
} mapping;

struct rh_symbolizer {
    rh_symbol_cache *cache;
    bool owns_cache;
    mapping *maps;
    size_t count, cap;
    swift_demangle_fn swift_demangle;
};

/* Largest build id we show in a message (bytes of hex); real ones are 40. */
#define SHOWN_BUILD_ID_MAX 128

/* ---------------------------------------------------------------- strings */

/* Copies `src` into `dst` (capacity `cap`), cutting at a UTF-8 character boundary when it does
   not fit, so a truncated name is still valid UTF-8. */
static void copy_str(char *dst, size_t cap, const char *src) {
    if (dst == NULL || cap == 0) return;
    if (src == NULL) src = "";
    size_t len = strlen(src);
    if (len >= cap) {
        len = cap - 1;
        /* src[len] is the first byte left out; if it continues a character, drop that
           character's first bytes too. */
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80) len--;
    }
    memcpy(dst, src, len);
    dst[len] = '\0';
}

static void set_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_why(char *why, size_t cap, const char *fmt, ...) {
    if (why == NULL || cap == 0) return;
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    copy_str(why, cap, n < 0 ? "out of memory" : text);
    if (n >= 0) free(text);
}

/* `dir`/`file` unless `file` is already absolute or there is no dir. */
static void join_path(char *dst, size_t cap, const char *dir, const char *file) {
    if (file == NULL || file[0] == '\0') {
        copy_str(dst, cap, "");
        return;
    }
    if (file[0] == '/' || dir == NULL || dir[0] == '\0') {
        copy_str(dst, cap, file);
        return;
    }
    char *joined = NULL;
    bool slash = dir[strlen(dir) - 1] == '/';
    if (asprintf(&joined, "%s%s%s", dir, slash ? "" : "/", file) < 0) {
        copy_str(dst, cap, file);
        return;
    }
    copy_str(dst, cap, joined);
    free(joined);
}

/* ---------------------------------------------------------------- build ids */

static void hex_of(const unsigned char *bytes, size_t len, char *out, size_t cap) {
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
    if (elfutils.elf_getphdrnum(elf, &phnum) != 0) return false;
    bool seen = false;
    uint64_t last_end = 0;
    for (size_t i = 0; i < phnum; i++) {
        GElf_Phdr ph;
        if (elfutils.gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD) continue;
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
    if (elfutils.elf_kind(elf) != ELF_K_ELF) {
        set_why(why, cap, "%s: not an ELF file", path);
        return false;
    }
    GElf_Ehdr ehdr;
    if (elfutils.gelf_getehdr(elf, &ehdr) == NULL) {
        set_why(why, cap, "%s: unreadable ELF header (%s)", path, elfutils.elf_errmsg(-1));
        return false;
    }
    facts->type = ehdr.e_type;
    if (ehdr.e_type != ET_DYN && ehdr.e_type != ET_EXEC) {
        set_why(why, cap, "%s: not an executable or shared object (ELF type %u)", path,
                (unsigned)ehdr.e_type);
        return false;
    }
    if (!load_span(elf, facts)) {
        set_why(why, cap, "%s: no usable loadable segments", path);
        return false;
    }
    const void *id = NULL;
    ssize_t len = elfutils.dwelf_elf_gnu_build_id(elf, &id);
    facts->id_len = len > 0 && id != NULL && (size_t)len <= sizeof facts->id ? (size_t)len : 0;
    if (facts->id_len > 0) memcpy(facts->id, id, facts->id_len);
    if (wanted[0] == '\0') return true;

    char shown[SHOWN_BUILD_ID_MAX + 1];
    printable_id(wanted, shown, sizeof shown);
    if (len <= 0 || id == NULL) {
        set_why(why, cap, "%s: no GNU build id on disk; the crash's is %s", path, shown);
        return false;
    }
    if (!build_id_matches(id, (size_t)len, wanted)) {
        char disk[SHOWN_BUILD_ID_MAX + 1];
        hex_of(id, (size_t)len, disk, sizeof disk);
        set_why(why, cap, "%s: build id on disk %s differs from the crash's %s", path, disk, shown);
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
static int open_regular(const char *path, char *why, size_t cap) {
    struct stat st;
    if (stat(path, &st) != 0) {
        set_why(why, cap, "%s: cannot open (%s)", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        set_why(why, cap, "%s: not a regular file", path);
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
        set_why(why, cap, "%s: cannot open (%s)", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        set_why(why, cap, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* Opens `path` and vets it (fills *facts). Returns the descriptor, which libdwfl is given so
   that the file vetted is the file read, or -1 with `why`. */
static int vet_file(const char *path, const char *wanted, elf_facts *facts, char *why, size_t cap) {
    int fd = open_regular(path, why, cap);
    if (fd < 0) return -1;
    struct stat st;
    bool ok = false;
    Elf *elf = elfutils.elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (elf == NULL)
        set_why(why, cap, "%s: not readable as ELF (%s)", path, elfutils.elf_errmsg(-1));
    else if (fstat(fd, &st) != 0)
        set_why(why, cap, "%s: cannot open (%s)", path, strerror(errno));
    else
        ok = verify_elf(elf, path, wanted, facts, why, cap);
    elfutils.elf_end(elf);
    if (!ok) {
        close(fd);
        return -1;
    }
    facts->device = st.st_dev;
    facts->inode = st.st_ino;
    return fd;
}

/* /proc/self/maps names a file unlinked after it was mapped "<path> (deleted)": whatever is
   at that path now (a FIFO the program made, or a file of that name) is not what it ran. */
static bool is_deleted(const char *path) {
    static const char mark[] = " (deleted)";
    size_t length = strlen(path), mark_length = sizeof mark - 1;
    return length > mark_length && strcmp(path + length - mark_length, mark) == 0;
}

/* ---------------------------------------------------------------- debug files */

/* Where the debug file of build id `id` is kept: /usr/lib/debug/.build-id/xx/rest.debug
   (Debian's -dbgsym packages; the only absolute entry of libdwfl's default path). NULL for
   an id libdwfl would not look up either. */
static char *build_id_path(const unsigned char *id, size_t len) {
    if (len < 3 || len > 64) return NULL;
    char hex[2 * 64 + 1];
    hex_of(id, len, hex, sizeof hex);
    char *path = NULL;
    return asprintf(&path, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2) < 0 ? NULL : path;
}

/* The descriptor of the regular ELF file at `path` when its build id is `id`; else -1. */
static int open_debug_file(const char *path, const unsigned char *id, size_t len) {
    int fd = path != NULL ? open_regular(path, NULL, 0) : -1;
    if (fd < 0) return -1;
    Elf *elf = elfutils.elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *found = NULL;
    ssize_t found_len = elf != NULL ? elfutils.dwelf_elf_gnu_build_id(elf, &found) : -1;
    bool same = found_len == (ssize_t)len && found != NULL && memcmp(found, id, len) == 0;
    elfutils.elf_end(elf);
    if (!same) close(fd);
    return same ? fd : -1;
}

/* `name` as libdw resolves a .gnu_debugaltlink path: as is when absolute, else beside `file`. */
static char *beside(const char *file, const char *name) {
    if (name[0] == '/') return strdup(name);
    const char *slash = file != NULL ? strrchr(file, '/') : NULL;
    char *path = NULL;
    if (slash == NULL || asprintf(&path, "%.*s/%s", (int)(slash - file), file, name) < 0) return NULL;
    return path;
}

/* libdw's own mark for "looked for, none" (dwarf_getalt). Left unset, libdw would look for the
   file itself at its first DW_FORM_GNU_*_alt: open(2) without O_NONBLOCK at a path the DWARF
   names, which blocks for ever on a FIFO. */
#define NO_ALT ((Dwarf *)-1)

/* Gives `dwarf` the dwz file its .gnu_debugaltlink names (a path and a build id), opened here:
   by build id, else at that path (beside `dwarf_file`, the file holding the DWARF); else
   NO_ALT. */
static void set_alt(image *owner, Dwarf *dwarf, const char *dwarf_file) {
    const char *name = NULL;
    const void *id = NULL;
    ssize_t len = elfutils.dwelf_dwarf_gnu_debugaltlink(dwarf, &name, &id);
    if (len <= 0 || owner->alt != NULL) return;
    char *path = build_id_path(id, (size_t)len);
    int fd = open_debug_file(path, id, (size_t)len);
    free(path);
    if (fd < 0 && name != NULL && (path = beside(dwarf_file, name)) != NULL) {
        fd = open_debug_file(path, id, (size_t)len);
        free(path);
    }
    Dwarf *alt = fd >= 0 ? elfutils.dwarf_begin(fd, DWARF_C_READ) : NULL;
    if (alt == NULL && fd >= 0) close(fd);
    elfutils.dwarf_setalt(dwarf, alt != NULL ? alt : NO_ALT);
    if (alt != NULL) {
        owner->alt = alt;
        owner->alt_fd = fd;
    }
}

/* libdwfl's find_debuginfo: the module's separate debug file, and the dwz file its DWARF
   shares. Both are looked up on this machine only, by build id, and opened by open_regular.
   dwfl_standard_find_debuginfo would also send each missing build id to the servers in
   DEBUGINFOD_URLS (Debian's login shells set it): what leaves the machine is decided by the
   host, never by an environment variable, and recovery never waits on a network. A name is
   never left in *found_name without a descriptor: libdwfl would open that path itself. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, const char *file_name,
                          const char *debuglink, GElf_Word crc, char **found_name) {
    (void)modname; (void)base; (void)debuglink; (void)crc;
    image *owner = *userdata;
    free(*found_name);
    *found_name = NULL;
    if (owner == NULL) return -1; /* reported, not yet ours (cached_image): cannot happen */
    /* Asked for the dwz file once the DWARF is loaded (then its bias is known), for the
       debug file before: the test elfutils' own dwfl_build_id_find_debuginfo describes. */
    Dwarf_Addr dwarf_bias = (Dwarf_Addr)-1;
    elfutils.dwfl_module_info(mod, NULL, NULL, NULL, &dwarf_bias, NULL, NULL, NULL);
    if (dwarf_bias != (Dwarf_Addr)-1) {
        Dwarf_Addr bias;
        Dwarf *dwarf = elfutils.dwfl_module_getdwarf(mod, &bias); /* loaded: returns it at once */
        if (dwarf != NULL) set_alt(owner, dwarf, file_name);
        return -1;
    }
    char *path = build_id_path(owner->facts.id, owner->facts.id_len);
    int fd = open_debug_file(path, owner->facts.id, owner->facts.id_len);
    if (fd >= 0) *found_name = path; /* libdwfl's now, as the descriptor */
    else free(path);
    return fd;
}

/* ---------------------------------------------------------------- handle */

/* Every module is reported with its file (dwfl_report_elf): libdwfl never has to find one,
   and must not ask a debuginfod server for it (dwfl_build_id_find_elf would). */
static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, char **file_name,
                       Elf **elfp) {
    (void)mod; (void)userdata; (void)modname; (void)base; (void)file_name;
    *elfp = NULL;
    return -1;
}

rh_symbol_cache *rh_symbol_cache_new(void) { return calloc(1, sizeof(rh_symbol_cache)); }

void rh_symbol_cache_free(rh_symbol_cache *cache) {
    if (cache == NULL) return;
    for (size_t i = 0; i < cache->count; i++) {
        elfutils.dwfl_end(cache->images[i]->dwfl); /* closes the module's files and frees its DWARF */
        if (cache->images[i]->alt != NULL) {
            elfutils.dwarf_end(cache->images[i]->alt);
            close(cache->images[i]->alt_fd);
        }
        free(cache->images[i]->path);
        free(cache->images[i]->build_id);
        free(cache->images[i]);
    }
    free(cache->images);
    free(cache);
}

rh_symbolizer *rh_symbolizer_new_cached(rh_symbol_cache *cache) {
    if (cache == NULL || rh_symbolize_load_failure() != NULL) return NULL;
    rh_symbolizer *h = calloc(1, sizeof *h);
    if (h == NULL) return NULL;
    elfutils.elf_version(EV_CURRENT); /* libelf refuses elf_begin until told which version we speak */
    h->cache = cache;
    /* dlsym returns an object pointer; copy its bits, as POSIX allows, to get the function. */
    void *found = dlsym(RTLD_DEFAULT, "swift_demangle");
    memcpy(&h->swift_demangle, &found, sizeof found);
    return h;
}

rh_symbolizer *rh_symbolizer_new(void) {
    rh_symbol_cache *cache = rh_symbol_cache_new();
    rh_symbolizer *h = rh_symbolizer_new_cached(cache);
    if (h == NULL) {
        rh_symbol_cache_free(cache);
        return NULL;
    }
    h->owns_cache = true;
    return h;
}

void rh_symbolizer_free(rh_symbolizer *h) {
    if (h == NULL) return;
    if (h->owns_cache) rh_symbol_cache_free(h->cache);
    free(h->maps);
    free(h);
}

/* Reports the vetted file open at `fd` to libdwfl, which reads it through that descriptor
   (never opening `path` again) and owns it on success ("FD is consumed by the library").
   On failure it is ours to close, unless libdwfl found a compressed image there and closed
   it itself (vet_file read an ELF header through it: only a concurrent write could do that),
   so a number another thread reopened meanwhile is never closed. */
static Dwfl_Module *report_module(image *made, const char *path, int fd) {
    elfutils.dwfl_report_begin(made->dwfl);
    Dwfl_Module *mod = elfutils.dwfl_report_elf(made->dwfl, path, path, fd, (GElf_Addr)made->facts.first, false);
    elfutils.dwfl_report_end(made->dwfl, NULL, NULL);
    struct stat st;
    if (mod == NULL && fstat(fd, &st) == 0 && st.st_dev == made->facts.device && st.st_ino == made->facts.inode) close(fd);
    return mod;
}

/* The cache's image of `path` with `build_id` (vetted: `facts` are its, `fd` is open on it and
   always consumed), opened and reported at its link-time addresses when it is not there yet;
   NULL with `why` when libdwfl refuses it. */
static image *cached_image(rh_symbol_cache *cache, const char *path, const char *build_id, const elf_facts *facts,
                           int fd, char *why, size_t why_cap) {
    for (size_t i = 0; i < cache->count; i++) {
        image *found = cache->images[i];
        if (strcmp(found->path, path) == 0 && strcmp(found->build_id, build_id) == 0) {
            close(fd);
            return found;
        }
    }
    if (cache->count == cache->cap) {
        size_t cap = cache->cap ? cache->cap * 2 : 16;
        image **grown = realloc(cache->images, cap * sizeof *grown);
        if (grown == NULL) {
            close(fd);
            set_why(why, why_cap, "%s: out of memory", path);
            return NULL;
        }
        cache->images = grown;
        cache->cap = cap;
    }
    image *made = calloc(1, sizeof *made);
    if (made == NULL || (made->path = strdup(path)) == NULL || (made->build_id = strdup(build_id)) == NULL) {
        if (made != NULL) free(made->path);
        free(made);
        close(fd);
        set_why(why, why_cap, "%s: out of memory", path);
        return NULL;
    }
    made->facts = *facts;
    made->alt_fd = -1;
    made->callbacks.find_elf = no_find_elf;
    made->callbacks.find_debuginfo = find_debuginfo;
    made->callbacks.section_address = elfutils.dwfl_offline_section_address;
    made->dwfl = elfutils.dwfl_begin(&made->callbacks);
    /* add_p_vaddr=false: `base` is where the first PT_LOAD (page-aligned p_vaddr) was
       mapped, and libdwfl sets the load bias to base - that p_vaddr: reported at `first`,
       the bias is 0 and addresses are the file's own. (A non-PIE executable is at its
       link-time addresses whatever base says.) */
    if (made->dwfl != NULL) {
        made->mod = report_module(made, path, fd);
    } else {
        close(fd);
    }
    if (made->mod == NULL) {
        const char *err = elfutils.dwfl_errmsg(-1);
        set_why(why, why_cap, "%s: cannot load (%s)", path, err != NULL ? err : "unknown error");
        if (made->dwfl != NULL) elfutils.dwfl_end(made->dwfl);
        free(made->path);
        free(made->build_id);
        free(made);
        return NULL;
    }
    /* find_debuginfo's way back to this image. */
    void **userdata = NULL;
    elfutils.dwfl_module_info(made->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
    *userdata = made;
    cache->images[cache->count++] = made;
    return made;
}

bool rh_symbolizer_add_module(rh_symbolizer *h, const char *path, uint64_t base, const char *build_id,
                              char *why, size_t why_cap) {
    copy_str(why, why_cap, "");
    if (h == NULL) return false;
    if (path == NULL || path[0] == '\0') {
        set_why(why, why_cap, "module without a path");
        return false;
    }
    if (is_deleted(path)) {
        set_why(why, why_cap, "%s: the module was deleted after the process mapped it; not opened", path);
        return false;
    }
    if (build_id == NULL) build_id = "";
    elf_facts facts;
    int fd = vet_file(path, build_id, &facts, why, why_cap);
    if (fd < 0) return false;

    /* A non-PIE executable sits at its link-time addresses, whatever base says. */
    uint64_t start = facts.type == ET_EXEC ? facts.first : base;
    if (start + facts.size < start) {
        set_why(why, why_cap, "%s: base 0x%llx leaves no room for its %llu bytes", path,
                (unsigned long long)base, (unsigned long long)facts.size);
        close(fd);
        return false;
    }
    /* An address must name one module: a second module on the same addresses is refused, and
       the same one at the same place again is the one already there. */
    uint64_t end = start + facts.size;
    for (size_t i = 0; i < h->count; i++) {
        mapping *m = &h->maps[i];
        if (m->end <= start || m->start >= end) continue;
        close(fd);
        if (m->start == start && strcmp(m->image->path, path) == 0) return true;
        set_why(why, why_cap, "%s: its addresses 0x%llx-0x%llx overlap %s", path, (unsigned long long)start,
                (unsigned long long)end, m->image->path);
        return false;
    }
    image *found = cached_image(h->cache, path, build_id, &facts, fd, why, why_cap);
    if (found == NULL) return false;
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        mapping *grown = realloc(h->maps, cap * sizeof *grown);
        if (grown == NULL) {
            set_why(why, why_cap, "%s: out of memory", path);
            return false;
        }
        h->maps = grown;
        h->cap = cap;
    }
    h->maps[h->count++] = (mapping){.start = start, .end = end, .image = found};
    return true;
}

/* ---------------------------------------------------------------- names */

static bool has_prefix(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool is_swift_mangled(const char *s) {
    return has_prefix(s, "$s") || has_prefix(s, "_$s") || has_prefix(s, "$S") ||
           has_prefix(s, "_$S") || has_prefix(s, "$e") || has_prefix(s, "_$e") ||
           has_prefix(s, "_T0");
}

/* Demangles C++ and (when the Swift runtime is loaded) Swift names; anything else as is. */
static void demangle_into(const rh_symbolizer *h, const char *name, char *out, size_t cap) {
    char *plain = NULL;
    if (has_prefix(name, "_Z")) {
        int status = 0;
        plain = __cxa_demangle(name, NULL, NULL, &status);
        if (status != 0) { free(plain); plain = NULL; }
    } else if (is_swift_mangled(name) && h->swift_demangle != NULL) {
        plain = h->swift_demangle(name, strlen(name), NULL, NULL, 0);
    }
    copy_str(out, cap, plain != NULL ? plain : name);
    free(plain);
}

/* A linkage name that demangles to more than DW_AT_name says (C++, Rust, Swift). A C linkage
   name is at best DW_AT_name again, or an asm alias like glibc's "__GI_qsort". */
static bool is_mangled(const char *s) {
    return has_prefix(s, "_Z") || has_prefix(s, "_R") || is_swift_mangled(s);
}

/* DW_AT_* string of the DIE, following DW_AT_abstract_origin / DW_AT_specification. */
static const char *die_string(Dwarf_Die *die, int name) {
    Dwarf_Attribute attr;
    const char *s = elfutils.dwarf_formstring(elfutils.dwarf_attr_integrate(die, name, &attr));
    return s != NULL && s[0] != '\0' ? s : NULL;
}

/* The name to show for a function DIE: a mangled linkage name (it demangles to the qualified
   name with parameters), else the source name, else whatever linkage name there is. */
static const char *die_function_name(Dwarf_Die *die) {
    const char *linkage = die_string(die, DW_AT_linkage_name);
    if (linkage == NULL) linkage = die_string(die, DW_AT_MIPS_linkage_name);
    if (linkage != NULL && is_mangled(linkage)) return linkage;
    const char *name = die_string(die, DW_AT_name);
    return name != NULL ? name : linkage;
}

static const char *elf_symbol_name(Dwfl_Module *mod, Dwarf_Addr addr) {
    GElf_Off offset = 0;
    GElf_Sym sym;
    const char *name = elfutils.dwfl_module_addrinfo(mod, addr, &offset, &sym, NULL, NULL, NULL);
    return name != NULL && name[0] != '\0' ? name : NULL;
}

/* ---------------------------------------------------------------- locations */

typedef struct location {
    char file[1024];
    int line;
} location;

static int clamp_line(uint64_t v) {
    return v > INT_MAX ? 0 : (int)v;
}

/* The line table's row for `addr`: where the instruction at addr came from. */
static void line_table_location(Dwfl_Module *mod, Dwarf_Addr addr, location *loc) {
    loc->file[0] = '\0';
    loc->line = 0;
    Dwfl_Line *row = elfutils.dwfl_module_getsrc(mod, addr);
    if (row == NULL) return;
    int line = 0;
    const char *file = elfutils.dwfl_lineinfo(row, NULL, &line, NULL, NULL, NULL);
    join_path(loc->file, sizeof loc->file, elfutils.dwfl_line_comp_dir(row), file);
    loc->line = line > 0 ? line : 0;
}

static const char *cu_comp_dir(Dwarf_Die *cu) {
    Dwarf_Attribute attr;
    return elfutils.dwarf_formstring(elfutils.dwarf_attr(cu, DW_AT_comp_dir, &attr));
}

/* Where an inlined call was made: DW_AT_call_file / DW_AT_call_line of the inlined DIE. The
   file number indexes the line table's file list of the DIE's own compilation unit. */
static void call_site_location(Dwarf_Die *inlined, Dwarf_Die *fallback_cu, location *loc) {
    loc->file[0] = '\0';
    loc->line = 0;
    Dwarf_Attribute attr;
    Dwarf_Word value = 0;
    if (elfutils.dwarf_formudata(elfutils.dwarf_attr(inlined, DW_AT_call_line, &attr), &value) == 0)
        loc->line = clamp_line(value);

    Dwarf_Die cu_mem, *cu = elfutils.dwarf_diecu(inlined, &cu_mem, NULL, NULL);
    if (cu == NULL) cu = fallback_cu;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (elfutils.dwarf_formudata(elfutils.dwarf_attr(inlined, DW_AT_call_file, &attr), &value) != 0) return;
    if (elfutils.dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || value >= nfiles) return;
    join_path(loc->file, sizeof loc->file, cu_comp_dir(cu), elfutils.dwarf_filesrc(files, value, NULL, NULL));
}

/* ---------------------------------------------------------------- lookup */

static void write_symbol(const rh_symbolizer *h, rh_symbol *out, const char *name,
                         const location *loc, bool inlined) {
    demangle_into(h, name != NULL ? name : "", out->function, sizeof out->function);
    copy_str(out->file, sizeof out->file, loc->file);
    out->line = loc->line;
    out->inlined = inlined;
}

static bool is_function_tag(int tag) {
    return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

/* The DIEs enclosing `addr`, innermost first, following the concrete tree (dwarf_getscopes
   alone would detour through an inlined function's abstract definition). */
static int concrete_scopes(Dwarf_Die *cudie, Dwarf_Addr pc, Dwarf_Die **scopes) {
    Dwarf_Die *found = NULL;
    int n = elfutils.dwarf_getscopes(cudie, pc, &found);
    if (n <= 0) {
        free(found);
        return 0;
    }
    Dwarf_Die innermost = found[0];
    free(found);
    n = elfutils.dwarf_getscopes_die(&innermost, scopes);
    return n > 0 ? n : 0;
}

/* DWARF frames for `addr`: inlined functions innermost first, then the real function. */
static int dwarf_frames(const rh_symbolizer *h, Dwfl_Module *mod, Dwarf_Addr addr, rh_symbol *out,
                        int cap) {
    Dwarf_Addr bias = 0;
    Dwarf_Die *cudie = elfutils.dwfl_module_addrdie(mod, addr, &bias);
    if (cudie == NULL) return 0;
    Dwarf_Die *scopes = NULL;
    int nscopes = concrete_scopes(cudie, addr - bias, &scopes);

    location loc;
    line_table_location(mod, addr, &loc); /* the innermost frame's place */
    int written = 0;
    for (int i = 0; i < nscopes && written < cap; i++) {
        int tag = elfutils.dwarf_tag(&scopes[i]);
        if (!is_function_tag(tag)) continue; /* lexical blocks etc. */
        bool inlined = tag == DW_TAG_inlined_subroutine;
        const char *name = die_function_name(&scopes[i]);
        if (name == NULL && !inlined) name = elf_symbol_name(mod, addr);
        write_symbol(h, &out[written++], name, &loc, inlined);
        if (!inlined) break; /* reached the function everything was inlined into */
        call_site_location(&scopes[i], cudie, &loc); /* the caller's place is this call */
    }
    free(scopes);
    return written;
}

int rh_symbolizer_lookup(rh_symbolizer *h, uint64_t address, bool is_return_address, rh_symbol *out,
                         int cap) {
    if (h == NULL || out == NULL || cap <= 0) return 0;
    if (is_return_address) {
        if (address == 0) return 0;
        address -= 1; /* inside the call instruction, not after it */
    }
    /* The file's own address: where this process had it mapped, taken away. */
    Dwfl_Module *mod = NULL;
    for (size_t i = 0; i < h->count && mod == NULL; i++) {
        mapping *m = &h->maps[i];
        if (address < m->start || address >= m->end) continue;
        address = address - m->start + m->image->facts.first;
        mod = m->image->mod;
    }
    if (mod == NULL) return 0;

    int n = dwarf_frames(h, mod, address, out, cap);
    if (n > 0) return n;

    /* No DWARF function here: the symbol table may still name it. */
    const char *name = elf_symbol_name(mod, address);
    if (name == NULL) return 0;
    location loc;
    line_table_location(mod, address, &loc);
    write_symbol(h, &out[0], name, &loc, false);
    return 1;
}
