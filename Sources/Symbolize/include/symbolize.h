/* Symbolize: turns crash frame addresses into function, file and line, at recovery time.
 *
 * Built on elfutils' libdwfl (offline: the crashed process is gone; the modules are read from
 * disk and placed at the addresses they had in it). Not async-signal-safe: it allocates, opens
 * files and may read separate debug info. One handle must be used by one thread at a time;
 * separate handles are independent.
 */
#ifndef RH_SYMBOLIZE_H
#define RH_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rh_symbolizer rh_symbolizer;

typedef struct rh_symbol {
    char function[512];   /* demangled; "" when unknown */
    char file[1024];      /* source path as DWARF names it (absolute when comp_dir known); "" when unknown */
    int line;             /* 0 when unknown */
    bool inlined;         /* true for a frame that DWARF says was inlined into the next one */
} rh_symbol;

/* The module files opened for symbolication, kept for as long as the cache lives: symbolizers
   made with rh_symbolizer_new_cached share them (a file's DWARF is read once, whatever
   process mapped it where). One thread at a time. NULL only when out of memory; free accepts
   NULL and comes after every symbolizer made with the cache is freed. */
typedef struct rh_symbol_cache rh_symbol_cache;
rh_symbol_cache *rh_symbol_cache_new(void);
void rh_symbol_cache_free(rh_symbol_cache *);

/* How a cache reads a separate debug file's compressed DWARF sections. RH_DEBUG_INFLATED (a new
   cache's): into a copy in memory that libdw reads as the debug file, inflated by libdeflate,
   without the sections no lookup reads (variables' locations, macros); when libdeflate.so.0
   cannot be loaded, as RH_DEBUG_AS_LIBELF: libelf inflates every section itself. The symbols
   found are the same either way. Set before the cache's first module. */
typedef enum { RH_DEBUG_INFLATED = 0, RH_DEBUG_AS_LIBELF = 1 } rh_debug_reading;
void rh_symbol_cache_set_reading(rh_symbol_cache *, rh_debug_reading);
/* What inflated the last debug file the cache opened: "libdeflate", "libelf" (also when no
   copy could be made, or the file had nothing compressed), or "" before any. */
const char *rh_symbol_cache_last_inflater(const rh_symbol_cache *);

/* Why symbolication cannot be done (libdw.so.1 could not be loaded), or NULL when it can.
   libdw is loaded at the first call of this or of a symbolizer constructor, not linked. Any
   thread. */
const char *rh_symbolize_load_failure(void);

/* One crashed process's modules. rh_symbolizer_new has a cache of its own; one made with
   rh_symbolizer_new_cached uses `cache`, which must outlive it. NULL when out of memory or
   when libdw cannot be loaded (rh_symbolize_load_failure says why). */
rh_symbolizer *rh_symbolizer_new(void);
rh_symbolizer *rh_symbolizer_new_cached(rh_symbol_cache *cache);
/* Accepts NULL. */
void rh_symbolizer_free(rh_symbolizer *);

/* Adds a module mapped at `base` (the address of its ELF header in the crashed process).
   Opens the file on disk, only when it is a regular file (never a FIFO or a device, and
   without waiting), and libdw reads it through that descriptor; a path ending " (deleted)"
   (how /proc/pid/maps names an unlinked file) is not opened at all. When the file is
   missing, not regular, unreadable, not ELF or deleted, or `build_id` is non-empty and the
   file's GNU build id differs (or it has none), the module is NOT used for symbols and
   `why` (cap why_cap) says why in plain words. Returns true when the module will be used
   (then `why` is ""). `why` may be NULL. For a non-PIE executable (ET_EXEC) `base` is
   ignored: its addresses are absolute. Separate debug files are looked up by build id under
   /usr/lib/debug only (never through debuginfod), opened the same way. */
bool rh_symbolizer_add_module(rh_symbolizer *, const char *path, uint64_t base, const char *build_id,
                              char *why, size_t why_cap);

/* Symbolicates `address`. `is_return_address` is true for every frame but the crashed one
   (frame #0): address-1 is looked up so the call's line is found, not the next line.
   Writes up to `cap` symbols, innermost first: for an address inside inlined code, first the
   inlined function(s) (inlined=true, file:line of the code in them), then the function they
   were inlined into (file:line = the call site of the outermost inlined call). Returns how many
   were written (0 when nothing is known). Without DWARF, a function named by .symtab/.dynsym
   gives 1 symbol with an empty file and line 0. */
int rh_symbolizer_lookup(rh_symbolizer *, uint64_t address, bool is_return_address, rh_symbol *out, int cap);

#ifdef __cplusplus
}
#endif

#endif
