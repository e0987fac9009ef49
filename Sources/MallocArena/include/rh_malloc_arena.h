/* The CLI's malloc arenas (glibc's mallopt, which Swift's Glibc module does not declare). */
#pragma once

/* Makes every thread allocate from the main arena. Call first thing in main, before any
 * thread starts. Returns mallopt's result (1: done). */
int rh_use_one_malloc_arena(void);
