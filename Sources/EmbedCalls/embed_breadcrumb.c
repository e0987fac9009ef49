#include "embed_calls.h"

#include <stdint.h>

#include "breadcrumb_ring.h"

int rh_embed_breadcrumb(rh_embed *h, int level, const char *category, const char *message) {
    if (level < RH_LOG_DEBUG || level > RH_LOG_ERROR || message == NULL)
        return rh_crumb_is_live((uintptr_t)h) ? RH_EMBED_ERR_INVALID : RH_EMBED_ERR_STOPPED;
    switch (rh_crumb_record((uintptr_t)h, level, category, message)) {
    case RH_CRUMB_RECORDED:
    case RH_CRUMB_OFF: return RH_EMBED_OK; /* breadcrumbs off: a valid call records nothing */
    case RH_CRUMB_INVALID_TEXT: return RH_EMBED_ERR_INVALID;
    case RH_CRUMB_NOT_LIVE: break;
    }
    return RH_EMBED_ERR_STOPPED;
}
