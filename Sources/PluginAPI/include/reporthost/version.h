/* ReportHost plugin ABI: version and common constants.
 *
 * Part of the fixed plugin ABI, version 1 (see docs/reference/abi.md). Plain C11, valid C++17.
 * WARNING: names, values and struct member order in these headers are fixed. Changes are
 * append-only and need a new minor version; anything else needs a new major version.
 */
#pragma once

#include <stdint.h>

#define RH_ABI_VERSION_MAJOR 1
#define RH_ABI_VERSION_MINOR 1

/* Result of every host function that can fail. */
typedef int32_t rh_status;
#define RH_OK              0
#define RH_ERR_CLOSED     -1  /* handle closed or unknown: nothing changed             */
#define RH_ERR_INVALID    -2  /* NULL where a value is required, or invalid UTF-8       */
#define RH_ERR_NOT_FOUND  -3  /* no such attribute, label or attachment; field absent    */
#define RH_ERR_TRUNCATED  -4  /* buffer too small: *len_out holds the needed length      */
#define RH_ERR_RANGE      -5  /* severity outside 1..5 (0 included): ignored and logged  */
#define RH_ERR_DROPPED    -6  /* attachment empty, over 3 MB or past its source's third  */

/* What kind of report this is. The trigger decides the type (SPEC R-2). */
typedef int32_t rh_report_type;
#define RH_REPORT_BUG   1
#define RH_REPORT_CRASH 2
#define RH_REPORT_ERROR 3

/* What raised the report (SPEC R-2). */
typedef int32_t rh_trigger;
#define RH_TRIGGER_DIALOG        1
#define RH_TRIGGER_UPLOAD        2
#define RH_TRIGGER_LOG_ERROR     3
#define RH_TRIGGER_LOG_EXCEPTION 4
#define RH_TRIGGER_CRASH         5
#define RH_TRIGGER_ABNORMAL_EXIT 6
/* 1.1 (SPEC B-4): a watched thread missed its heartbeat (type error). A plugin that declared
   minor 0 is shown RH_TRIGGER_LOG_ERROR instead. */
#define RH_TRIGGER_APP_HANG      7

/* Levels for rh_host_api.log. */
typedef int32_t rh_log_level;
#define RH_LOG_DEBUG 0
#define RH_LOG_INFO  1
#define RH_LOG_WARN  2
#define RH_LOG_ERROR 3

/* Severity: 0 reads as "none"; only 1..5 can be set (SPEC R-3). */
#define RH_SEVERITY_NONE    0
#define RH_SEVERITY_LOW     1
#define RH_SEVERITY_BLOCKER 5

/* Attachment budget of one source (one callback invocation, the delegate, or an
   extended report): at most RH_ATTACHMENTS_PER_SOURCE attachments of at most
   RH_ATTACHMENT_MAX_BYTES each (SPEC R-7). */
#define RH_ATTACHMENT_MAX_BYTES (3u * 1024u * 1024u)
#define RH_ATTACHMENTS_PER_SOURCE 3
