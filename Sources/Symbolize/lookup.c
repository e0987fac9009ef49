/* The lookup of an address: its frames (inlined ones first), their names and places. */
#include "symbolize_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* libstdc++'s demangler (link with -lstdc++). */
extern char *__cxa_demangle(const char *mangled, char *output, size_t *length, int *status);

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
    sym_copy_str(out, cap, plain != NULL ? plain : name);
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
    const char *s = sym_elfutils.dwarf_formstring(sym_elfutils.dwarf_attr_integrate(die, name, &attr));
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
    const char *name = sym_elfutils.dwfl_module_addrinfo(mod, addr, &offset, &sym, NULL, NULL, NULL);
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
    Dwfl_Line *row = sym_elfutils.dwfl_module_getsrc(mod, addr);
    if (row == NULL) return;
    int line = 0;
    const char *file = sym_elfutils.dwfl_lineinfo(row, NULL, &line, NULL, NULL, NULL);
    sym_join_path(loc->file, sizeof loc->file, sym_elfutils.dwfl_line_comp_dir(row), file);
    loc->line = line > 0 ? line : 0;
}

static const char *cu_comp_dir(Dwarf_Die *cu) {
    Dwarf_Attribute attr;
    return sym_elfutils.dwarf_formstring(sym_elfutils.dwarf_attr(cu, DW_AT_comp_dir, &attr));
}

/* Where an inlined call was made: DW_AT_call_file / DW_AT_call_line of the inlined DIE. The
   file number indexes the line table's file list of the DIE's own compilation unit. */
static void call_site_location(Dwarf_Die *inlined, Dwarf_Die *fallback_cu, location *loc) {
    loc->file[0] = '\0';
    loc->line = 0;
    Dwarf_Attribute attr;
    Dwarf_Word value = 0;
    if (sym_elfutils.dwarf_formudata(sym_elfutils.dwarf_attr(inlined, DW_AT_call_line, &attr), &value) == 0)
        loc->line = clamp_line(value);

    Dwarf_Die cu_mem, *cu = sym_elfutils.dwarf_diecu(inlined, &cu_mem, NULL, NULL);
    if (cu == NULL) cu = fallback_cu;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (sym_elfutils.dwarf_formudata(sym_elfutils.dwarf_attr(inlined, DW_AT_call_file, &attr), &value) != 0) return;
    if (sym_elfutils.dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || value >= nfiles) return;
    sym_join_path(loc->file, sizeof loc->file, cu_comp_dir(cu), sym_elfutils.dwarf_filesrc(files, value, NULL, NULL));
}

/* ---------------------------------------------------------------- lookup */

static void write_symbol(const rh_symbolizer *h, rh_symbol *out, const char *name,
                         const location *loc, bool inlined) {
    demangle_into(h, name != NULL ? name : "", out->function, sizeof out->function);
    sym_copy_str(out->file, sizeof out->file, loc->file);
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
    int n = sym_elfutils.dwarf_getscopes(cudie, pc, &found);
    if (n <= 0) {
        free(found);
        return 0;
    }
    Dwarf_Die innermost = found[0];
    free(found);
    n = sym_elfutils.dwarf_getscopes_die(&innermost, scopes);
    return n > 0 ? n : 0;
}

/* DWARF frames for `addr`: inlined functions innermost first, then the real function. */
static int dwarf_frames(const rh_symbolizer *h, Dwfl_Module *mod, Dwarf_Addr addr, rh_symbol *out,
                        int cap) {
    Dwarf_Addr bias = 0;
    Dwarf_Die *cudie = sym_elfutils.dwfl_module_addrdie(mod, addr, &bias);
    if (cudie == NULL) return 0;
    Dwarf_Die *scopes = NULL;
    int nscopes = concrete_scopes(cudie, addr - bias, &scopes);

    location loc;
    line_table_location(mod, addr, &loc); /* the innermost frame's place */
    int written = 0;
    for (int i = 0; i < nscopes && written < cap; i++) {
        int tag = sym_elfutils.dwarf_tag(&scopes[i]);
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
