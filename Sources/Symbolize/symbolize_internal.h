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
 *
 * The parts: libdw's loading (elfutils.c), strings (text.c), the module files vetted before
 * they are read (module_file.c), their debug and dwz files (debug_files.c), a debug file's
 * compressed sections inflated into a copy in memory (inflate.c), the cache and
 * symbolizer handles (handle.c) and the lookup of an address (lookup.c). This header is what
 * they give each other, hidden from the libraries they are linked into. It is every file's
 * first include: _GNU_SOURCE must come before any system header.
 */
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT, vasprintf */
#endif

#include "symbolize.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
struct sym_elfutils_functions {
#define FIELD(symbol) __typeof__(symbol) *symbol;
    ELFUTILS_FUNCTIONS(FIELD)
#undef FIELD
};

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
    off_t bytes;    /* its size and last change when vetted: a later stat that differs is another file */
    struct timespec changed;
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
    struct rh_symbol_cache *cache; /* its holder: how to read its debug file, what read it */
} image;

struct rh_symbol_cache {
    image **images;
    size_t count, cap;
    rh_debug_reading reading;
    const char *last_inflater;
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

#pragma GCC visibility push(hidden)

/* elfutils.c: libdw's functions, set once rh_symbolize_load_failure returns NULL. */
extern struct sym_elfutils_functions sym_elfutils;

/* text.c: strings. */
/* Copies `src` into `dst` (capacity `cap`), cut at a UTF-8 character boundary when it does
   not fit. */
void sym_copy_str(char *dst, size_t cap, const char *src);
/* Formats into `why` (capacity `cap`; NULL: nothing). */
void sym_set_why(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* `dir`/`file` unless `file` is already absolute or there is no dir. */
void sym_join_path(char *dst, size_t cap, const char *dir, const char *file);

/* module_file.c: a module's file, vetted before libdwfl reads it. */
/* `len` bytes as lowercase hex into `out` (capacity `cap`). */
void sym_hex_of(const unsigned char *bytes, size_t len, char *out, size_t cap);
/* The descriptor of `path` when it is a regular file, opened without waiting; -1 with `why`. */
int sym_open_regular(const char *path, char *why, size_t cap);
/* The descriptor of `path` when it is a loadable ELF module with build id `wanted` ("" =
   anything), with *facts filled; -1 with `why`. */
int sym_vet_file(const char *path, const char *wanted, elf_facts *facts, char *why, size_t cap);
/* Whether /proc/self/maps marked `path` " (deleted)". */
bool sym_is_deleted(const char *path);

/* debug_files.c: libdwfl's find_debuginfo callback, on this machine only. */
int sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, const char *file_name,
                       const char *debuglink, GElf_Word crc, char **found_name);

/* inflate.c: a debug file's compressed sections inflated into a copy in memory. */
/* The descriptor of a copy of the debug file open at `fd` (left open), its compressed
   sections inflated by libdeflate; -1 when no copy was made (no libdeflate, nothing
   compressed, anything unexpected): libdw reads `fd`. */
int sym_inflated_copy(int fd);

#pragma GCC visibility pop
