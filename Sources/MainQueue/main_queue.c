#include "rh_main_queue.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <unistd.h>

/* libdispatch's interface for CoreFoundation's run loop (swift-corelibs-libdispatch,
 * private/queue_private.h): a descriptor (an eventfd on Linux) that becomes readable when the
 * main queue has work, and the call that runs that work on the calling thread. */
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *message);

_Noreturn void rh_serve_main_queue(void) {
    int handle = _dispatch_get_main_queue_handle_4CF();
    struct pollfd ready = {.fd = handle, .events = POLLIN};
    for (;;) {
        if (poll(&ready, 1, -1) < 0 && errno != EINTR) _exit(70);
        uint64_t count;
        /* Non-blocking: nothing to read is no error (libdispatch may have read it). */
        (void)!read(handle, &count, sizeof count);
        _dispatch_main_queue_callback_4CF(NULL);
    }
}
