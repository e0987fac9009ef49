/* The handles: the cache of module files, and a crashed process's symbolizer, which places
 * the cache's images at the addresses they had in it. */
#include "symbolize_internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- handle */

/* Every module is reported with its file (dwfl_report_elf): libdwfl never has to find one,
   and must not ask a debuginfod server for it (dwfl_build_id_find_elf would). */
static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, char **file_name,
                       Elf **elfp) {
    (void)mod; (void)userdata; (void)modname; (void)base; (void)file_name;
    *elfp = NULL;
    return -1;
}

rh_symbol_cache *rh_symbol_cache_new(void) {
    rh_symbol_cache *cache = calloc(1, sizeof(rh_symbol_cache));
    if (cache != NULL) cache->last_inflater = "";
    return cache;
}

void rh_symbol_cache_set_reading(rh_symbol_cache *cache, rh_debug_reading reading) { cache->reading = reading; }

const char *rh_symbol_cache_last_inflater(const rh_symbol_cache *cache) { return cache->last_inflater; }

void rh_symbol_cache_free(rh_symbol_cache *cache) {
    if (cache == NULL) return;
    for (size_t i = 0; i < cache->count; i++) {
        sym_elfutils.dwfl_end(cache->images[i]->dwfl); /* closes the module's files and frees its DWARF */
        if (cache->images[i]->alt != NULL) {
            sym_elfutils.dwarf_end(cache->images[i]->alt);
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
    sym_elfutils.elf_version(EV_CURRENT); /* libelf refuses elf_begin until told which version we speak */
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
   it itself (sym_vet_file read an ELF header through it: only a concurrent write could do that),
   so a number another thread reopened meanwhile is never closed. */
static Dwfl_Module *report_module(image *made, const char *path, int fd) {
    sym_elfutils.dwfl_report_begin(made->dwfl);
    Dwfl_Module *mod = sym_elfutils.dwfl_report_elf(made->dwfl, path, path, fd, (GElf_Addr)made->facts.first, false);
    sym_elfutils.dwfl_report_end(made->dwfl, NULL, NULL);
    struct stat st;
    if (mod == NULL && fstat(fd, &st) == 0 && st.st_dev == made->facts.device && st.st_ino == made->facts.inode) close(fd);
    return mod;
}

/* The image the cache holds of `path` with `build_id`, or NULL. */
static image *held_image(const rh_symbol_cache *cache, const char *path, const char *build_id) {
    for (size_t i = 0; i < cache->count; i++)
        if (strcmp(cache->images[i]->path, path) == 0 && strcmp(cache->images[i]->build_id, build_id) == 0) return cache->images[i];
    return NULL;
}

/* The cache's image of `path` with `build_id` (vetted: `facts` are its, `fd` is open on it and
   always consumed), opened and reported at its link-time addresses when it is not there yet;
   NULL with `why` when libdwfl refuses it. */
static image *cached_image(rh_symbol_cache *cache, const char *path, const char *build_id, const elf_facts *facts,
                           int fd, char *why, size_t why_cap) {
    image *held = held_image(cache, path, build_id);
    if (held != NULL) {
        close(fd);
        return held;
    }
    if (cache->count == cache->cap) {
        size_t cap = cache->cap ? cache->cap * 2 : 16;
        image **grown = realloc(cache->images, cap * sizeof *grown);
        if (grown == NULL) {
            close(fd);
            sym_set_why(why, why_cap, "%s: out of memory", path);
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
        sym_set_why(why, why_cap, "%s: out of memory", path);
        return NULL;
    }
    made->facts = *facts;
    made->alt_fd = -1;
    made->cache = cache;
    made->callbacks.find_elf = no_find_elf;
    made->callbacks.find_debuginfo = sym_find_debuginfo;
    made->callbacks.section_address = sym_elfutils.dwfl_offline_section_address;
    made->dwfl = sym_elfutils.dwfl_begin(&made->callbacks);
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
        const char *err = sym_elfutils.dwfl_errmsg(-1);
        sym_set_why(why, why_cap, "%s: cannot load (%s)", path, err != NULL ? err : "unknown error");
        if (made->dwfl != NULL) sym_elfutils.dwfl_end(made->dwfl);
        free(made->path);
        free(made->build_id);
        free(made);
        return NULL;
    }
    /* sym_find_debuginfo's way back to this image. */
    void **userdata = NULL;
    sym_elfutils.dwfl_module_info(made->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
    *userdata = made;
    cache->images[cache->count++] = made;
    return made;
}

/* The cache's image of `path` with `build_id` while the file at `path` is still the one vetted
   for it (the same device, inode, size and change time): a recovery's thousands of crash
   files vet each library once, not once per crash (an open, a map of the whole file and a
   read of its ELF headers each). A file replaced or written since is vetted again. */
static image *vetted_image(const rh_symbol_cache *cache, const char *path, const char *build_id) {
    image *held = held_image(cache, path, build_id);
    struct stat st;
    if (held == NULL || stat(path, &st) != 0) return NULL;
    const elf_facts *facts = &held->facts;
    bool same = S_ISREG(st.st_mode) && facts->device == st.st_dev && facts->inode == st.st_ino && facts->bytes == st.st_size
                && facts->changed.tv_sec == st.st_ctim.tv_sec && facts->changed.tv_nsec == st.st_ctim.tv_nsec;
    return same ? held : NULL;
}

bool rh_symbolizer_add_module(rh_symbolizer *h, const char *path, uint64_t base, const char *build_id,
                              char *why, size_t why_cap) {
    sym_copy_str(why, why_cap, "");
    if (h == NULL) return false;
    if (path == NULL || path[0] == '\0') {
        sym_set_why(why, why_cap, "module without a path");
        return false;
    }
    if (sym_is_deleted(path)) {
        sym_set_why(why, why_cap, "%s: the module was deleted after the process mapped it; not opened", path);
        return false;
    }
    if (build_id == NULL) build_id = "";
    elf_facts facts;
    int fd = -1;
    image *vetted = vetted_image(h->cache, path, build_id);
    if (vetted != NULL)
        facts = vetted->facts;
    else if ((fd = sym_vet_file(path, build_id, &facts, why, why_cap)) < 0)
        return false;

    /* A non-PIE executable sits at its link-time addresses, whatever base says. */
    uint64_t start = facts.type == ET_EXEC ? facts.first : base;
    if (start + facts.size < start) {
        sym_set_why(why, why_cap, "%s: base 0x%llx leaves no room for its %llu bytes", path,
                    (unsigned long long)base, (unsigned long long)facts.size);
        if (fd >= 0) close(fd);
        return false;
    }
    /* An address must name one module: a second module on the same addresses is refused, and
       the same one at the same place again is the one already there. */
    uint64_t end = start + facts.size;
    for (size_t i = 0; i < h->count; i++) {
        mapping *m = &h->maps[i];
        if (m->end <= start || m->start >= end) continue;
        if (fd >= 0) close(fd);
        if (m->start == start && strcmp(m->image->path, path) == 0) return true;
        sym_set_why(why, why_cap, "%s: its addresses 0x%llx-0x%llx overlap %s", path, (unsigned long long)start,
                    (unsigned long long)end, m->image->path);
        return false;
    }
    image *found = vetted != NULL ? vetted : cached_image(h->cache, path, build_id, &facts, fd, why, why_cap);
    if (found == NULL) return false;
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        mapping *grown = realloc(h->maps, cap * sizeof *grown);
        if (grown == NULL) {
            sym_set_why(why, why_cap, "%s: out of memory", path);
            return false;
        }
        h->maps = grown;
        h->cap = cap;
    }
    h->maps[h->count++] = (mapping){.start = start, .end = end, .image = found};
    return true;
}
