/* The LD_PRELOAD capture library (libreporthost-capture.so) that `reporthost run` injects
 * into an unmodified program. It has no functions to call: its constructor reads the
 * environment below and installs the crash writer (crash_capture.h), and it interposes
 * sigaction() and signal() so the program's own handlers run after ours (preload.c).
 *
 * The environment, read once at load:
 *   REPORTHOST_CAPTURE_DIR         the repository's crashes/ folder (at most 4096 bytes)
 *   REPORTHOST_CAPTURE_SESSION     the session id named in crash files (at most 128 bytes;
 *                                  the writer itself takes at most 63, no '/' or newline)
 *   REPORTHOST_CAPTURE_ATTRIBUTES  optional: newline-separated key=value pairs written into
 *                                  every crash file (at most 64 pairs, 4096 bytes in all)
 * With either of the first two unset or empty the library does nothing. */
#pragma once

#define RH_CAPTURE_ENV_DIR "REPORTHOST_CAPTURE_DIR"
#define RH_CAPTURE_ENV_SESSION "REPORTHOST_CAPTURE_SESSION"
#define RH_CAPTURE_ENV_ATTRIBUTES "REPORTHOST_CAPTURE_ATTRIBUTES"

#define RH_CAPTURE_DIR_MAX 4096
#define RH_CAPTURE_SESSION_MAX 128
#define RH_CAPTURE_ATTRIBUTES_MAX 4096
#define RH_CAPTURE_ATTRIBUTE_PAIRS_MAX 64
