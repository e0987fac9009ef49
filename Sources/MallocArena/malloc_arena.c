#include "rh_malloc_arena.h"

#include <malloc.h>

int rh_use_one_malloc_arena(void) { return mallopt(M_ARENA_MAX, 1); }
