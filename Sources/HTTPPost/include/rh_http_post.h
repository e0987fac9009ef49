/* One HTTP(S) POST through libcurl, for delivery (Sources/Host/Delivery/HTTPClient.swift).
 *
 * What a server sends is bounded here: the status line and one header (Retry-After) are
 * kept, within fixed buffers; the response body is never read (the transfer ends at the
 * end of the final head); redirects are not followed; only http and https are spoken. */
#pragma once

#include <stddef.h>

/* What rh_http_post returns when its cancel flag ended the request. */
#define RH_HTTP_CANCELLED (-2)

/* What one attempt came to. */
typedef struct {
    /* The final answer's HTTP status (100…999), or 0 when there was no answer. */
    int status;
    /* The answer's Retry-After value, trimmed, NUL-terminated; "" when absent or over 64 bytes. */
    char retry_after[65];
    /* Without an answer: what went wrong, in a few words ("connection refused", "timed out",
     * "host not found (DNS)", "TLS failure", "not an HTTP answer", or curl's own message). */
    char failure[320];
} rh_http_result;

/* POSTs the file at body_path to url with the Content-Type content_type.
 *
 * idle_timeout_ms: the limit for connecting, and for any stretch in which no byte moves
 * (counted in whole seconds, rounded up, at least 1 s). total_timeout_ms: the limit for the
 * whole request. cancel: NULL, or a flag another thread may set (read atomically) to end
 * the request within about a second. direct: nonzero to connect straight to the server
 * whatever the environment's proxy variables say (a loopback destination must never go
 * through a proxy: it would see the token in clear and could answer for the server). Returns 0 with result->status set when the server
 * answered, RH_HTTP_CANCELLED when `cancel` ended it, -1 with result->failure set when it
 * did not answer. Blocks the calling
 * thread; any thread; never raises a signal (CURLOPT_NOSIGNAL). */
int rh_http_post(const char *url, const char *content_type, const char *body_path, long idle_timeout_ms,
                 long total_timeout_ms, int direct, const int *cancel, rh_http_result *result);

/* Sets a cancel flag (atomically) for rh_http_post. Any thread. */
void rh_cancel_set(int *flag);
