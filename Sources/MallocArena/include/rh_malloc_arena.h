/* The CLI's malloc arenas (glibc's mallopt, which Swift's Glibc module does not declare). */
#pragma once

/* Makes every thread allocate from the main arena. Call first thing in main, before any
 * thread starts. Returns mallopt's result (1: done). */
int rh_use_one_malloc_arena(void);

/* Maps every block of 256 KB or more on its own, so that freeing it gives it back to the
 * system at once (glibc otherwise raises this threshold as large blocks are freed, and keeps
 * them in arenas that never shrink). For a long-running server whose requests are large. */
int rh_return_large_blocks(void);
