/* ReportHost plugin ABI: what a plugin exports (handler, delegate, entry point).
 *
 * WARNING: rh_handler and rh_delegate only grow at the end (new minor version);
 * rh_attachment is used in arrays and is frozen.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One attachment offered by a delegate's asynchronous decision. Frozen (used in arrays).
   All pointers are the plugin's; the host copies them during the decision call. */
typedef struct rh_attachment {
    const char *name; const char *filename; const void *data; size_t size;
} rh_attachment;

/* The decision of attachments_for_report_async. A libffi closure like rh_completion: call
   it exactly once, from any thread, within the decision limit (10 s by default). items are
   copied during the call; NULL/0 means "none". [any-thread] */
typedef void (*rh_attachments_decision)(const rh_attachment *items_or_null, size_t count);

/* The optional second interface: fields and attachments hooks (SPEC A-1 ... A-5).
   Used only when the plugin is loaded in the delegate slot. */
typedef struct rh_delegate {
    uint32_t abi_major, abi_minor, struct_size;
    /* Dialog reports only, step 2 of SPEC H-5. The host has already cleared summary,
       description and labels (they are replaced outright); set them, and the severity if
       you wish, with the ordinary setters during this call. [main-thread] */
    void (*add_fields_before_report_created)(void *context, rh_report *r);
    /* Dialog reports only, SPEC H-5 step 5. [main-thread] */
    void (*check_fields_after_report_created)(void *context, rh_report *r);
    /* SPEC A-1: synchronous; add attachments with add_attachment during the call (the
       delegate's own source budget). The host waits for it to return. [background] */
    void (*attachments_for_report)(void *context, rh_report *r);
    /* SPEC A-2: the handle stays open until decide is called or the limit passes; decide
       is owned by the host. [main-thread] */
    void (*attachments_for_report_async)(void *context, rh_report *r, rh_attachments_decision decide);
} rh_delegate;

/* A report handler (SPEC H). The struct is the plugin's: the host copies it once at load
   and never writes to it. */
typedef struct rh_handler {
    uint32_t abi_major, abi_minor, struct_size;
    const char *name;          /* required, non-empty; the plugin's, valid until destroy */
    const char *version;       /* may be NULL; the plugin's, valid until destroy */
    void *context;             /* the plugin's own pointer, passed back to every call */
    /* Each may be NULL (SPEC H-3). r is open for this invocation only; completion is owned
       by the host (see rh_completion). [main-thread] for running-app reports,
       [background] for recovered ones; the handle is [handle-open]. */
    void (*on_before_report_created)(void *context, rh_report *r, bool is_terminating, rh_completion completion);
    /* Same contract as on_before_report_created, after the report is created.
       [main-thread] for running-app reports, [background] for recovered ones. */
    void (*on_after_report_created)(void *context, rh_report *r, bool is_terminating, rh_completion completion);
    /* Called once, when the handler is replaced, removed or at shutdown, after no callback
       of it runs. The library itself is never unloaded. [main-thread] */
    void (*destroy)(void *context);
    /* May be NULL; used only in the delegate slot, with this handler's context; validated
       like the handler (version, struct_size). The plugin's, valid until destroy. */
    const rh_delegate *delegate;
} rh_handler;

/* The one exported symbol. Called once per slot the plugin is loaded into (a plugin in two
 * slots, or in two hosts of one process, is entered twice: RTLD_NODELETE keeps one image,
 * so its globals are shared). host is owned by the host and valid for the life of the
 * process. The returned struct is the plugin's and must stay valid until destroy. Return
 * NULL to refuse loading (say why through host->log). [main-thread]
 *
 * Rationale: the host never dlclose()s a plugin, because unloading Swift code crashes the
 * Swift runtime; "unloading" calls destroy only. */
const rh_handler *rh_plugin_entry(const rh_host_api *host);

/* The signature of rh_plugin_entry, for hosts that look it up with dlsym. */
typedef const rh_handler *(*rh_plugin_entry_fn)(const rh_host_api *host);

#ifdef __cplusplus
}
#endif
