/* The fuzz driver's checks of what scrub-pii reads from its patterns (patterns.c). */
#pragma once

#include <stdbool.h>

/* reverse.c reads every built-in rule, with the engine's shortest and longest match; tail.c reads
   each tail's bytes as the engine does, and relaxes a head as it says. Says what differs. */
bool patterns_read_as_the_engine_reads(void);
