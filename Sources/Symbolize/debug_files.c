/* A module's debug file and the dwz file its DWARF shares, found on this machine only. */
#include "symbolize_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- debug files */

/* Where the debug file of build id `id` is kept: /usr/lib/debug/.build-id/xx/rest.debug
   (Debian's -dbgsym packages; the only absolute entry of libdwfl's default path). NULL for
   an id libdwfl would not look up either. */
static char *build_id_path(const unsigned char *id, size_t len) {
    if (len < 3 || len > 64) return NULL;
    char hex[2 * 64 + 1];
    sym_hex_of(id, len, hex, sizeof hex);
    char *path = NULL;
    return asprintf(&path, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2) < 0 ? NULL : path;
}

/* The descriptor of the regular ELF file at `path` when its build id is `id`; else -1. */
static int open_debug_file(const char *path, const unsigned char *id, size_t len) {
    int fd = path != NULL ? sym_open_regular(path, NULL, 0) : -1;
    if (fd < 0) return -1;
    Elf *elf = sym_elfutils.elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *found = NULL;
    ssize_t found_len = elf != NULL ? sym_elfutils.dwelf_elf_gnu_build_id(elf, &found) : -1;
    bool same = found_len == (ssize_t)len && found != NULL && memcmp(found, id, len) == 0;
    sym_elfutils.elf_end(elf);
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
    ssize_t len = sym_elfutils.dwelf_dwarf_gnu_debugaltlink(dwarf, &name, &id);
    if (len <= 0 || owner->alt != NULL) return;
    char *path = build_id_path(id, (size_t)len);
    int fd = open_debug_file(path, id, (size_t)len);
    free(path);
    if (fd < 0 && name != NULL && (path = beside(dwarf_file, name)) != NULL) {
        fd = open_debug_file(path, id, (size_t)len);
        free(path);
    }
    Dwarf *alt = fd >= 0 ? sym_elfutils.dwarf_begin(fd, DWARF_C_READ) : NULL;
    if (alt == NULL && fd >= 0) close(fd);
    sym_elfutils.dwarf_setalt(dwarf, alt != NULL ? alt : NO_ALT);
    if (alt != NULL) {
        owner->alt = alt;
        owner->alt_fd = fd;
    }
}

/* libdwfl's find_debuginfo: the module's separate debug file, and the dwz file its DWARF
   shares. Both are looked up on this machine only, by build id, and opened by sym_open_regular.
   dwfl_standard_find_debuginfo would also send each missing build id to the servers in
   DEBUGINFOD_URLS (Debian's login shells set it): what leaves the machine is decided by the
   host, never by an environment variable, and recovery never waits on a network. A name is
   never left in *found_name without a descriptor: libdwfl would open that path itself. The
   descriptor given is that of the debug file's inflated copy when one is made (inflate.c). */
int sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, const char *file_name,
                       const char *debuglink, GElf_Word crc, char **found_name) {
    (void)modname; (void)base; (void)debuglink; (void)crc;
    image *owner = *userdata;
    free(*found_name);
    *found_name = NULL;
    if (owner == NULL) return -1; /* reported, not yet ours (cached_image): cannot happen */
    /* Asked for the dwz file once the DWARF is loaded (then its bias is known), for the
       debug file before: the test elfutils' own dwfl_build_id_find_debuginfo describes. */
    Dwarf_Addr dwarf_bias = (Dwarf_Addr)-1;
    sym_elfutils.dwfl_module_info(mod, NULL, NULL, NULL, &dwarf_bias, NULL, NULL, NULL);
    if (dwarf_bias != (Dwarf_Addr)-1) {
        Dwarf_Addr bias;
        Dwarf *dwarf = sym_elfutils.dwfl_module_getdwarf(mod, &bias); /* loaded: returns it at once */
        if (dwarf != NULL) set_alt(owner, dwarf, file_name);
        return -1;
    }
    char *path = build_id_path(owner->facts.id, owner->facts.id_len);
    int fd = open_debug_file(path, owner->facts.id, owner->facts.id_len);
    if (fd < 0) {
        free(path);
        return -1;
    }
    *found_name = path; /* libdwfl's now, as the descriptor */
    int copy = owner->cache->reading == RH_DEBUG_AS_LIBELF ? -1 : sym_inflated_copy(fd);
    owner->cache->last_inflater = copy >= 0 ? "libdeflate" : "libelf";
    if (copy < 0) return fd;
    close(fd);
    return copy;
}
