/* Compile-time checks that the fixed ABI layout holds on this platform. */
#include "reporthost/plugin.h"

_Static_assert(offsetof(rh_host_api, struct_size) == 8, "header fields come first");
_Static_assert(offsetof(rh_handler, name) == 16, "rh_handler: name follows the header");
_Static_assert(sizeof(rh_attachment) == 4 * sizeof(void *), "rh_attachment is frozen");
_Static_assert(RH_ATTACHMENT_MAX_BYTES == 3145728u, "3 MB");
