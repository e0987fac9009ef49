/* ReportHost plugin ABI: the report handle, completions and the host function table.
 *
 * WARNING: rh_host_api only grows at the end. Never reorder, remove or retype a member;
 * a new member needs a new minor version (docs/reference/abi.md).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An open report as seen by one callback invocation. Opaque: never dereference it.
 *
 * The pointer is a token (an encoded id), never NULL, unique per callback invocation and
 * never reused within the process. It is open from the start of the callback until it
 * closes (SPEC R-8: completion, the host's wait limit, the method's return when
 * is_terminating, bundling). After that every host function returns RH_ERR_CLOSED
 * (getters write *len_out = 0; has_label returns false) and changes nothing.
 *
 * Rationale: a handle is an id, not a pointer to a host object, so a plugin that keeps
 * it past its callback (a bug) cannot make the host read freed memory. */
typedef struct rh_report rh_report;

/* Completes one callback. Call it exactly once, from any thread. [any-thread]
 *
 * The host makes one per callback with a libffi closure, so the plugin holds a
 * self-contained function pointer (the "block" of the source document). A call closes
 * the report handle before it returns and never blocks, so it may be made on the main
 * thread inside the callback itself. The first call completes the callback; later
 * calls are ignored and noted in the report's internal log.
 *
 * Rationale: a closure carries no argument, so the host cannot tell a late caller from
 * a new one. The host therefore never frees or reuses a closure within a validity window
 * after its handle closed (limits.completionWindowMs; default: the report budget,
 * 60 s). Calls inside the window are ignored and logged; after it the closure may serve
 * a new callback and a call is undefined behaviour. That keeps memory bounded by the
 * window. The conformance validator flags late calls. */
typedef void (*rh_completion)(void);

/* Visitors receive a snapshot taken before the first visit; the host holds no lock while
   visiting, so a visitor may call setters on the same report. Return false to stop.
   Strings are owned by the host and valid only during the visit. */
typedef bool (*rh_visit_pair)(void *ctx, const char *key, const char *value);
typedef bool (*rh_visit_string)(void *ctx, const char *value);
typedef bool (*rh_visit_attachment)(void *ctx, const char *name, const char *filename, size_t size);
/* 1.1: one breadcrumb (SPEC B-1). timestamp: ISO 8601 UTC with milliseconds
   ("2026-01-01T00:00:00.123Z"); level: an RH_LOG_* value; strings owned by the host, valid
   during the visit. Return false to stop. */
typedef bool (*rh_visit_breadcrumb)(void *ctx, size_t index, const char *timestamp, int32_t level,
                                    const char *category, const char *message);

/* The functions the host hands to a plugin (never linked against).
 *
 * Each host instance hands its own table to the plugins it loads; the table is owned by
 * the host and stays valid for the life of the process. Report functions find a handle
 * in one process-wide registry, so any table serves any handle; set_host_attribute and
 * log(NULL, ...) act on the host that handed out the table.
 *
 * Strings in either direction are UTF-8 and NUL-terminated. Strings passed in are owned
 * by the caller and copied by the host before the call returns.
 *
 * String getters copy into the caller's buffer, snprintf-style: they write *len_out
 * (bytes, excluding the NUL; len_out may be NULL), NUL-terminate when cap > 0, and return
 * RH_ERR_TRUNCATED when cap <= the length. buf may be NULL when cap is 0. An absent
 * (null) field returns RH_ERR_NOT_FOUND; an empty one RH_OK with "". The buffer is owned
 * by the caller.
 *
 * WARNING: this struct only grows at the end. */
typedef struct rh_host_api {
    uint32_t abi_major, abi_minor, struct_size;
    const char *host_name;     /* "reporthost"; owned by the host, valid for the process */
    const char *host_version;  /* owned by the host, valid for the process */

    /* The report's type, or RH_ERR_CLOSED when the handle is closed. [handle-open] */
    rh_report_type (*report_type)(rh_report *r);
    /* The report's trigger, or RH_ERR_CLOSED when the handle is closed. [handle-open] */
    rh_trigger     (*report_trigger)(rh_report *r);
    /* The report id: a lowercase UUID, read-only. buf: caller's. [handle-open] */
    rh_status (*report_id)(rh_report *r, char *buf, size_t cap, size_t *len_out);
    /* buf: caller's. [handle-open] */
    rh_status (*summary)(rh_report *r, char *buf, size_t cap, size_t *len_out);
    /* NULL makes the field absent; the string is copied before return. [handle-open] */
    rh_status (*set_summary)(rh_report *r, const char *utf8_or_null);
    /* buf: caller's. [handle-open] */
    rh_status (*description)(rh_report *r, char *buf, size_t cap, size_t *len_out);
    /* NULL makes the field absent; the string is copied before return. [handle-open] */
    rh_status (*set_description)(rh_report *r, const char *utf8_or_null);
    /* The reporter's e-mail. buf: caller's. [handle-open] */
    rh_status (*email)(rh_report *r, char *buf, size_t cap, size_t *len_out);
    /* NULL makes the field absent; the string is copied before return. [handle-open] */
    rh_status (*set_email)(rh_report *r, const char *utf8_or_null);
    /* 0 = none, 1..5, or RH_ERR_CLOSED when the handle is closed. [handle-open] */
    int32_t   (*severity)(rh_report *r);
    /* 1..5; any other value returns RH_ERR_RANGE, keeps the severity and is noted in the
       internal log (SPEC R-3). [handle-open] */
    rh_status (*set_severity)(rh_report *r, int32_t severity);

    /* key: caller's, copied. buf: caller's. [handle-open] */
    rh_status (*attribute)(rh_report *r, const char *key, char *buf, size_t cap, size_t *len_out);
    /* A NULL value removes the key and returns RH_OK whether or not it existed. key and
       value: caller's, copied before return. [handle-open] */
    rh_status (*set_attribute)(rh_report *r, const char *key, const char *value_or_null);
    /* RH_ERR_NOT_FOUND when the key was absent. key: caller's. [handle-open] */
    rh_status (*remove_attribute)(rh_report *r, const char *key);
    /* Removes every attribute of this report. [handle-open] */
    rh_status (*clear_attributes)(rh_report *r);
    /* Visits a snapshot of the attributes in key order; ctx: the caller's, passed back
       untouched. [handle-open] */
    rh_status (*each_attribute)(rh_report *r, rh_visit_pair visit, void *ctx);

    /* Replaces the whole list, all or nothing; NULL elements and invalid UTF-8 are
       dropped and the rest kept. labels: caller's, copied. [handle-open] */
    rh_status (*set_labels)(rh_report *r, const char *const *labels, size_t count);
    /* Appends, even a label already present (assign with set_labels, or test has_label
       first, so a second run of the handler is harmless). label: caller's. [handle-open] */
    rh_status (*add_label)(rh_report *r, const char *label);
    /* Appends each element, all or nothing; NULL and invalid UTF-8 elements are dropped.
       labels: caller's, copied. [handle-open] */
    rh_status (*add_labels)(rh_report *r, const char *const *labels, size_t count);
    /* Removes every occurrence; RH_ERR_NOT_FOUND when none. label: caller's. [handle-open] */
    rh_status (*remove_label)(rh_report *r, const char *label);
    /* Empties the list. [handle-open] */
    rh_status (*clear_labels)(rh_report *r);
    /* False when absent or when the handle is closed. label: caller's. [handle-open] */
    bool      (*has_label)(rh_report *r, const char *label);
    /* Visits a snapshot of the labels in order. ctx: the caller's. [handle-open] */
    rh_status (*each_label)(rh_report *r, rh_visit_string visit, void *ctx);

    /* Appends an attachment charged to this callback's source budget (SPEC R-7): empty,
       over RH_ATTACHMENT_MAX_BYTES or past the source's third returns RH_ERR_DROPPED and is
       noted in the internal log. name, filename and data: caller's, copied before return.
       [handle-open] */
    rh_status (*add_attachment)(rh_report *r, const char *name, const char *filename,
                                const void *data, size_t size);
    /* Copies the first attachment of that name (bytes, no NUL), truncated only when
       cap < size; *len_out gets the size. buf: caller's. [handle-open] */
    rh_status (*attachment_data)(rh_report *r, const char *name, void *buf, size_t cap,
                                 size_t *len_out);
    /* Removes every attachment of that name; removing never gives budget back.
       [handle-open] */
    rh_status (*remove_attachment)(rh_report *r, const char *name);
    /* Removes every attachment of the report, whoever added it. [handle-open] */
    rh_status (*clear_attachments)(rh_report *r);
    /* Visits a snapshot of the attachments in order. ctx: the caller's. [handle-open] */
    rh_status (*each_attachment)(rh_report *r, rh_visit_attachment visit, void *ctx);

    /* With an open report, also noted in that report's internal log under the plugin's
       name; with a closed one or NULL, only in the host's log. message: caller's, copied.
       [any-thread] */
    void      (*log)(rh_report *r_or_null, rh_log_level level, const char *message);
    /* Sets (NULL: removes) an attribute merged into every report whose first callback
       starts after the call. key, value: caller's, copied. [any-thread] */
    rh_status (*set_host_attribute)(const char *key, const char *value_or_null);

    /* ---- 1.1 (SPEC T-3, B-1). A plugin reads these only when struct_size covers them. ---- */

    /* The options the configuration gives the slot this table was handed to
       (plugins.options.<slot>), as one JSON object text ("{}" when none); getter rules.
       [any-thread] */
    rh_status (*options_json)(char *buf, size_t cap, size_t *len_out);
    /* The absolute path of a folder in the repository that belongs to this plugin (by its
       name; made 0700 on first use), for its own files: keys, caches; getter rules.
       RH_ERR_NOT_FOUND while rh_plugin_entry runs (the name is not known yet) and when the
       folder cannot be made. [any-thread] */
    rh_status (*data_folder)(char *buf, size_t cap, size_t *len_out);
    /* The report's breadcrumbs, oldest first (a snapshot taken at the call, visitor rules):
       what the program did before the report. [handle-open] */
    rh_status (*each_breadcrumb)(rh_report *r, rh_visit_breadcrumb visit, void *ctx);
    /* Replaces the message of the breadcrumb at index (as each_breadcrumb numbers them);
       utf8: caller's, copied; cut to 64 KiB (noted). RH_ERR_NOT_FOUND past the last one.
       [handle-open] */
    rh_status (*set_breadcrumb_message)(rh_report *r, size_t index, const char *utf8);
    /* Removes the breadcrumb at index; later indexes shift down. RH_ERR_NOT_FOUND past the
       last one. [handle-open] */
    rh_status (*remove_breadcrumb)(rh_report *r, size_t index);
} rh_host_api;

#ifdef __cplusplus
}
#endif
