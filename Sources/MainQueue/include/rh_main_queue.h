/* The main thread serving the main dispatch queue, without Foundation's run loop.
 *
 * `dispatchMain()` will not do on Linux: it ends the main thread and lets a pool thread serve
 * the queue, so work for "the main thread" (SPEC H-8: running-app callbacks) would run on
 * another. Foundation's RunLoop serves it on the calling thread through two functions
 * libdispatch exports for CoreFoundation; this does the same with nothing else loaded. */
#pragma once

/* Serves DispatchQueue.main (and the main actor) on the calling thread, the process's main
 * thread, until the process exits. Never returns. */
_Noreturn void rh_serve_main_queue(void);
