#include "rh_malloc_arena.h"

#include <malloc.h>

int rh_use_one_malloc_arena(void) { return mallopt(M_ARENA_MAX, 1); }

int rh_return_large_blocks(void) { return mallopt(M_MMAP_THRESHOLD, 256 * 1024); }
