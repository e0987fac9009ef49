#include "embed_calls.h"

#include <stdint.h>
#include <string.h>

#include "breadcrumb_ring.h"

int rh_embed_breadcrumb(rh_embed *h, int level, const char *category, const char *message) {
    if (!rh_crumb_is_live((uintptr_t)h)) return RH_EMBED_ERR_STOPPED;
    if (level < RH_LOG_DEBUG || level > RH_LOG_ERROR || message == NULL) return RH_EMBED_ERR_INVALID;
    size_t category_len = category ? strlen(category) : 0;
    size_t message_len = strlen(message);
    if ((category && !rh_crumb_valid_utf8(category, category_len)) || !rh_crumb_valid_utf8(message, message_len))
        return RH_EMBED_ERR_INVALID;
    void *ring = rh_crumb_live_ring((uintptr_t)h);
    if (ring == NULL) return RH_EMBED_OK; /* breadcrumbs off: a valid call records nothing */
    return rh_crumb_write(ring, rh_crumb_now_ms(), level, category, category_len, message, message_len) ? RH_EMBED_OK
                                                                                                      : RH_EMBED_ERR_STOPPED;
}
