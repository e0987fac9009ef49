/* HTTP(S) POSTs through libcurl, for delivery (Sources/Host/Delivery/HTTPClient.swift).
 *
 * What a server sends is bounded here: the status line and two headers (Retry-After,
 * X-Sentry-Rate-Limits) are kept, within fixed buffers; the answer is known at the end of its final head. A body the
 * head announces (Content-Length) at 16 KB or less is read and dropped, so the connection can
 * carry the next request; one still coming a second after the head is given up with its
 * connection, and any other body ends the transfer at the end of the head, closing the
 * connection. Redirects are not followed; only http and https are spoken. */
#pragma once

#include <stddef.h>

/* What rh_http_client_post returns for a request its cancel flag ended. */
#define RH_HTTP_CANCELLED (-2)
/* What rh_http_client_post returns for a request that no attempt can carry, whatever the
 * network does: the configuration is at fault (a URL libcurl refuses, a protocol or feature
 * this libcurl was built without). results[i].failure says why. */
#define RH_HTTP_CONFIGURATION (-3)

/* What one attempt came to. */
typedef struct {
    /* The final answer's HTTP status (100…999), or 0 when there was no answer. */
    int status;
    /* The answer's Retry-After value, trimmed, NUL-terminated; "" when absent or over 64 bytes. */
    char retry_after[65];
    /* Its X-Sentry-Rate-Limits value (SPEC S-3), the same way; "" when absent or over 255 bytes. */
    char rate_limits[256];
    /* Without an answer: what went wrong, in a few words ("connection refused", "timed out",
     * "host not found (DNS)", "TLS failure", "not an HTTP answer", or curl's own message). */
    char failure[320];
} rh_http_result;

/* Sets a cancel flag (atomically) for rh_http_client_post. Any thread. */
void rh_cancel_set(int *flag);

/* Why libcurl cannot be used (it could not be loaded, or could not start), or NULL when it can.
 * libcurl.so.4 is loaded at the first call of this or rh_http_client_new, not linked. Any thread. */
const char *rh_http_load_failure(void);

/* Parses url with libcurl's own URL parser (curl_url_set, with the flags libcurl's transfers
 * use), so what a transfer would refuse as malformed is refused here first. Returns 1 when it
 * parses, with its scheme and host (lowercase as libcurl keeps them; an IPv6 host in
 * brackets) copied into the buffers, NUL-terminated; 0 when it does not, with libcurl's reason
 * in why; -1 when libcurl cannot be loaded (why says so). Any thread. */
int rh_http_parse_url(const char *url, char *scheme, size_t scheme_cap, char *host, size_t host_cap, char *why,
                      size_t why_cap);

/* A client for delivery passes: its connections stay open between requests (keep-alive).
 * One thread at a time. NULL when libcurl cannot be used (rh_http_load_failure says why). */
typedef struct rh_http_client rh_http_client;
rh_http_client *rh_http_client_new(void);
void rh_http_client_free(rh_http_client *client);

/* One request body of rh_http_client_post: the file at body_path, or, when body_path is NULL,
 * the `length` bytes at `bytes` (read in place: they must live until the call returns). */
typedef struct {
    const char *content_type;
    /* One more header line ("Name: value", no line break), or NULL. */
    const char *header;
    const char *body_path;
    const void *bytes;
    size_t length;
} rh_http_body;

/* POSTs each of `count` bodies to url, started in order, at most `in_flight` at once, over
 * the client's connections. Returns when every request has ended.
 *
 * idle_timeout_ms: the limit for connecting, and for any stretch in which no byte moves
 * (counted in whole seconds, rounded up, at least 1 s). total_timeout_ms: the limit for each
 * whole request. cancel: NULL, or a flag another thread may set (read atomically) to end the
 * requests within about a second. direct: nonzero to connect straight to the server whatever
 * the environment's proxy variables say (a loopback destination must never go through a
 * proxy: it would see the token in clear and could answer for the server). returns[i] is 0
 * with results[i].status set when the server answered body i, RH_HTTP_CANCELLED when `cancel`
 * ended it, RH_HTTP_CONFIGURATION when no attempt could carry it, -1 with results[i].failure
 * set when it did not answer. Blocks the calling thread;
 * never raises a signal (CURLOPT_NOSIGNAL). */
void rh_http_client_post(rh_http_client *client, const char *url, const rh_http_body *bodies, size_t count,
                         size_t in_flight, long idle_timeout_ms, long total_timeout_ms, int direct, const int *cancel,
                         rh_http_result *results, int *returns);
