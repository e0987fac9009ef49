/* ReportHost plugin ABI, version 1: the umbrella header. Include this one.
 *
 * A plugin is a shared library exporting rh_plugin_entry (handler.h). The host calls it
 * with a table of host functions (host.h) and gets back a handler description. Thread
 * tags end every function pointer's comment:
 *   [any-thread]  any thread, at any time the object is valid;
 *   [handle-open] any thread, while the report handle is open (SPEC R-8); callbacks of
 *                 one plugin may run at the same time for different reports;
 *   [main-thread] the host's main thread;
 *   [background]  a host worker thread, not the main thread.
 */
#pragma once

#include "version.h"
#include "host.h"
#include "handler.h"
