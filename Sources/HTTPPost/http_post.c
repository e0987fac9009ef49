#define _GNU_SOURCE
#include "rh_http_post.h"
#include "http_post_internal.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

/* The most of an answer's body read: a body the head announces at this size or less is read
 * (then the connection can carry the next request); any other ends the transfer at the end of
 * the head, and its connection is closed. */
#define BODY_CAP 16384

/* The head of the answer as it arrives, a line at a time, and what was read of its body. */
typedef struct {
    int status;
    int in_head;  /* a status line began a head that has not ended yet */
    int complete; /* the final (non-1xx) head ended: the answer is known */
    long long length; /* the head's Content-Length, -1 when it has none */
    size_t body;      /* body bytes read */
    struct timespec completed_at;
    char retry_after[65];
    char rate_limits[256];
} head_state;

/* One request of a batch: its handle, body, headers and what came back. */
typedef struct {
    CURL *curl;
    FILE *body;
    struct curl_slist *headers;
    head_state head;
    const int *cancel;
    char detail[CURL_ERROR_SIZE];
} transfer;

struct rh_http_client {
    CURLM *multi; /* its connection cache keeps connections open between requests */
};

int rh_http_parse_url(const char *url, char *scheme, size_t scheme_cap, char *host, size_t host_cap, char *why,
                      size_t why_cap) {
    const char *failure = rh_http_load_failure();
    if (failure != NULL) {
        snprintf(why, why_cap, "%s", failure);
        return -1;
    }
    CURLU *parsed = hp_libcurl.url();
    if (parsed == NULL) {
        snprintf(why, why_cap, "out of memory");
        return 0;
    }
    /* The flags a transfer parses its URL with (libcurl's url.c), so both agree. */
    CURLUcode code = hp_libcurl.url_set(parsed, CURLUPART_URL, url, CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME);
    char *part = NULL;
    if (code == CURLUE_OK) code = hp_libcurl.url_get(parsed, CURLUPART_SCHEME, &part, 0);
    if (code == CURLUE_OK) {
        snprintf(scheme, scheme_cap, "%s", part);
        hp_libcurl.free(part);
        part = NULL;
        /* In punycode, as a transfer converts it: a name that cannot be converted is refused. */
        code = hp_libcurl.url_get(parsed, CURLUPART_HOST, &part, CURLU_PUNYCODE);
    }
    if (code == CURLUE_OK) {
        snprintf(host, host_cap, "%s", part);
        hp_libcurl.free(part);
    }
    hp_libcurl.url_cleanup(parsed);
    if (code != CURLUE_OK) {
        snprintf(why, why_cap, "%s", hp_libcurl.url_strerror(code));
        return 0;
    }
    return 1;
}

/* Whether a transfer's code means the configuration is at fault, not the network or the
 * server: no later attempt could go differently. */
static int is_configuration_failure(CURLcode code) {
    switch (code) {
    case CURLE_URL_MALFORMAT:
    case CURLE_NOT_BUILT_IN:
    case CURLE_UNKNOWN_OPTION:
    case CURLE_BAD_FUNCTION_ARGUMENT:
        return 1;
    default:
        return 0;
    }
}

static void set_failure(rh_http_result *result, const char *text) {
    snprintf(result->failure, sizeof result->failure, "%s", text);
}

/* "HTTP/1.1 503 Busy" -> 503; 0 when the line holds no three-digit status. */
static int parse_status(const char *line, size_t length) {
    size_t at = 5;
    while (at < length && line[at] != ' ') at++;
    while (at < length && line[at] == ' ') at++;
    if (at + 3 > length) return 0;
    int status = 0;
    for (size_t i = at; i < at + 3; i++) {
        if (!isdigit((unsigned char)line[i])) return 0;
        status = status * 10 + (line[i] - '0');
    }
    if (at + 3 < length && isdigit((unsigned char)line[at + 3])) return 0;
    return status >= 100 ? status : 0;
}

/* A Content-Length value: its digits, or -1 (absent, unreadable, or too large to matter). */
static long long parse_length(const char *value, size_t length) {
    while (length > 0 && (*value == ' ' || *value == '\t')) {
        value++;
        length--;
    }
    long long number = 0;
    size_t digits = 0;
    while (digits < length && isdigit((unsigned char)value[digits])) {
        if (number > BODY_CAP) return -1;
        number = number * 10 + (value[digits++] - '0');
    }
    return digits == 0 ? -1 : number;
}

/* A header's value, trimmed, into `kept` (`capacity` bytes with its NUL); an over-long one is
   unreadable: kept empty. */
static void keep_value(char *kept, size_t capacity, const char *value, size_t length) {
    while (length > 0 && (*value == ' ' || *value == '\t')) {
        value++;
        length--;
    }
    while (length > 0 && isspace((unsigned char)value[length - 1])) length--;
    if (length >= capacity) length = 0;
    memcpy(kept, value, length);
    kept[length] = 0;
}

/* Called once per complete header line (libcurl bounds a line at 100 KB). Returning a count
 * other than the line's length ends the transfer. At the end of the final head the answer is
 * known: the transfer goes on only to read a body announced at BODY_CAP bytes or less. */
static size_t on_header(char *line, size_t size, size_t count, void *context) {
    head_state *head = context;
    size_t length = size * count;
    if (!head->in_head) {
        /* A head starts with its status line (a 1xx head may come before the final one). */
        head->in_head = 1;
        head->status = length >= 5 && strncmp(line, "HTTP/", 5) == 0 ? parse_status(line, length) : 0;
        head->retry_after[0] = 0;
        head->rate_limits[0] = 0;
        head->length = -1;
    } else if (length <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        head->in_head = 0;
        if (head->status >= 200 || head->status == 0) {
            head->complete = 1;
            clock_gettime(CLOCK_MONOTONIC, &head->completed_at);
            return head->status != 0 && head->length >= 0 && head->length <= BODY_CAP ? length : 0;
        }
    } else if (length > 12 && strncasecmp(line, "Retry-After:", 12) == 0) {
        keep_value(head->retry_after, sizeof head->retry_after, line + 12, length - 12);
    } else if (length > 21 && strncasecmp(line, "X-Sentry-Rate-Limits:", 21) == 0) {
        keep_value(head->rate_limits, sizeof head->rate_limits, line + 21, length - 21);
    } else if (length > 15 && strncasecmp(line, "Content-Length:", 15) == 0) {
        head->length = parse_length(line + 15, length - 15);
    }
    return length;
}

/* The body is read and dropped, up to the length the head announced (at most BODY_CAP). */
static size_t on_body(char *data, size_t size, size_t count, void *context) {
    (void)data;
    head_state *head = context;
    head->body += size * count;
    return head->body > BODY_CAP ? 0 : size * count;
}

static size_t on_read(char *buffer, size_t size, size_t count, void *context) {
    FILE *body = context;
    size_t got = fread(buffer, size, count, body);
    if (got == 0 && ferror(body)) return CURL_READFUNC_ABORT;
    return got;
}

/* Called by libcurl about once a second, and at every transfer: a non-zero return ends the
 * request (CURLE_ABORTED_BY_CALLBACK): when the cancel flag is set, or when the answer is
 * known and its announced body has taken more than a second (a server that stalls there
 * costs its connection, never the answer). */
static int on_progress(void *context, curl_off_t download_total, curl_off_t downloaded, curl_off_t upload_total,
                       curl_off_t uploaded) {
    (void)download_total;
    (void)downloaded;
    (void)upload_total;
    (void)uploaded;
    transfer *t = context;
    if (t->cancel != NULL && __atomic_load_n(t->cancel, __ATOMIC_ACQUIRE) != 0) return 1;
    if (!t->head.complete) return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long waited_ms = (long long)(now.tv_sec - t->head.completed_at.tv_sec) * 1000 +
                          (now.tv_nsec - t->head.completed_at.tv_nsec) / 1000000;
    return waited_ms > 1000;
}

/* The few failures delivery tells apart, in fixed words; NULL for the rest (then curl's own
 * message is used). */
static const char *describe(CURLcode code, long os_error) {
    switch (code) {
    case CURLE_OPERATION_TIMEDOUT: return "timed out";
    case CURLE_COULDNT_CONNECT:
        if (os_error == ECONNREFUSED) return "connection refused";
        if (os_error == EHOSTUNREACH || os_error == ENETUNREACH) return "host unreachable";
        return "could not connect";
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR: return os_error == ECONNRESET || os_error == EPIPE ? "connection reset" : NULL;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return "host not found (DNS)";
    case CURLE_GOT_NOTHING: return "connection closed without an answer";
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE: return "TLS failure";
    /* The URL was checked before: at this point it means an answer that is not HTTP/1.x
     * or HTTP/2 (HTTP/0.9 is refused). */
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_WEIRD_SERVER_REPLY: return "not an HTTP answer";
    default: return NULL;
    }
}

/* Sets `t` up to POST `body` to url; -1 with result->failure set when it cannot. */
static int start_transfer(transfer *t, const char *url, const rh_http_body *body, long idle_timeout_ms,
                          long total_timeout_ms, int direct, const int *cancel, rh_http_result *result) {
    const char *content_type = body->content_type;
    memset(t, 0, sizeof *t);
    t->cancel = cancel;
    t->head.length = -1;
    if (strpbrk(content_type, "\r\n") != NULL || strlen(content_type) > 200) {
        set_failure(result, "an invalid Content-Type");
        return -1;
    }
    if (body->header != NULL && (strpbrk(body->header, "\r\n") != NULL || strlen(body->header) > 1024)) {
        set_failure(result, "an invalid header");
        return -1;
    }
    /* A file is streamed; a body in memory goes as it is (libcurl sends a small one in the
     * same write as the head). */
    struct stat info = {.st_size = (off_t)body->length};
    if (body->body_path != NULL) {
        t->body = fopen(body->body_path, "rbe");
        if (t->body == NULL || fstat(fileno(t->body), &info) != 0) {
            if (t->body != NULL) fclose(t->body);
            t->body = NULL;
            set_failure(result, "cannot read the request body");
            return -1;
        }
    }
    t->curl = hp_libcurl.easy_init();
    char content_header[256];
    snprintf(content_header, sizeof content_header, "Content-Type: %s", content_type);
    struct curl_slist *headers = hp_libcurl.slist_append(NULL, content_header);
    /* No "Expect: 100-continue" wait before the body. */
    struct curl_slist *more = headers ? hp_libcurl.slist_append(headers, "Expect:") : NULL;
    if (more != NULL && body->header != NULL) more = hp_libcurl.slist_append(more, body->header);
    if (t->curl == NULL || more == NULL) {
        hp_libcurl.slist_free_all(more ? more : headers);
        if (t->curl != NULL) hp_libcurl.easy_cleanup(t->curl);
        t->curl = NULL;
        if (t->body != NULL) fclose(t->body);
        t->body = NULL;
        set_failure(result, "out of memory");
        return -1;
    }
    t->headers = more;
    long idle_seconds = idle_timeout_ms <= 1000 ? 1 : (idle_timeout_ms + 999) / 1000;
    CURL *curl = t->curl;
    hp_libcurl.easy_setopt(curl, CURLOPT_PRIVATE, t);
    hp_libcurl.easy_setopt(curl, CURLOPT_ERRORBUFFER, t->detail);
    hp_libcurl.easy_setopt(curl, CURLOPT_URL, url);
    /* "*": no proxy for any host, whatever http_proxy, all_proxy or no_proxy say. */
    if (direct) hp_libcurl.easy_setopt(curl, CURLOPT_NOPROXY, "*");
    hp_libcurl.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    hp_libcurl.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    /* Proxies from the environment (https_proxy, no_proxy) are honoured; their CONNECT
     * answer ("200 Connection established") is not the server's and never reaches on_header. */
    hp_libcurl.easy_setopt(curl, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    hp_libcurl.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    hp_libcurl.easy_setopt(curl, CURLOPT_USERAGENT, "reporthost/1");
    hp_libcurl.easy_setopt(curl, CURLOPT_HTTPHEADER, t->headers);
    hp_libcurl.easy_setopt(curl, CURLOPT_POST, 1L);
    hp_libcurl.easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)info.st_size);
    if (t->body != NULL) {
        hp_libcurl.easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
        hp_libcurl.easy_setopt(curl, CURLOPT_READDATA, t->body);
    } else {
        /* Never NULL: libcurl would then read the body from standard input. */
        hp_libcurl.easy_setopt(curl, CURLOPT_POSTFIELDS, body->bytes != NULL ? body->bytes : (const void *)"");
    }
    hp_libcurl.easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    hp_libcurl.easy_setopt(curl, CURLOPT_HEADERDATA, &t->head);
    hp_libcurl.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    hp_libcurl.easy_setopt(curl, CURLOPT_WRITEDATA, &t->head);
    hp_libcurl.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, idle_seconds * 1000);
    hp_libcurl.easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    hp_libcurl.easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, idle_seconds);
    hp_libcurl.easy_setopt(curl, CURLOPT_TIMEOUT_MS, total_timeout_ms > 0 ? total_timeout_ms : 1L);
    hp_libcurl.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    hp_libcurl.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    hp_libcurl.easy_setopt(curl, CURLOPT_XFERINFODATA, t);
    return 0;
}

/* What a finished transfer came to, into result; its return code (see rh_http_client_post). */
static int finish_transfer(transfer *t, CURLcode code, rh_http_result *result) {
    head_state *head = &t->head;
    int answered = head->complete && head->status != 0;
    if (!answered && code == CURLE_OK) {
        long status = 0;
        hp_libcurl.easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status <= 999) { /* a 1xx alone is no answer */
            head->status = (int)status;
            answered = 1;
        }
    }
    if (answered) {
        result->status = head->status;
        memcpy(result->retry_after, head->retry_after, sizeof result->retry_after);
        memcpy(result->rate_limits, head->rate_limits, sizeof result->rate_limits);
    } else if (head->complete) {
        set_failure(result, "an answer without a readable status line");
    } else {
        long os_error = 0;
        hp_libcurl.easy_getinfo(t->curl, CURLINFO_OS_ERRNO, &os_error);
        const char *text = describe(code, os_error);
        /* libcurl refuses a header line over 100 KB as "out of memory". */
        if (code == CURLE_OUT_OF_MEMORY && head->status != 0) text = "an answer head over libcurl's limits";
        if (text == NULL) text = t->detail[0] ? t->detail : hp_libcurl.easy_strerror(code);
        snprintf(result->failure, sizeof result->failure, "%s", text);
    }
    hp_libcurl.slist_free_all(t->headers);
    hp_libcurl.easy_cleanup(t->curl);
    if (t->body != NULL) fclose(t->body);
    t->curl = NULL;
    if (!answered && code == CURLE_ABORTED_BY_CALLBACK) return RH_HTTP_CANCELLED;
    if (!answered && is_configuration_failure(code)) return RH_HTTP_CONFIGURATION;
    return answered ? 0 : -1;
}

rh_http_client *rh_http_client_new(void) {
    if (rh_http_load_failure() != NULL) return NULL;
    rh_http_client *client = calloc(1, sizeof *client);
    if (client == NULL) return NULL;
    client->multi = hp_libcurl.multi_init();
    if (client->multi == NULL) {
        free(client);
        return NULL;
    }
    return client;
}

void rh_http_client_free(rh_http_client *client) {
    if (client == NULL) return;
    hp_libcurl.multi_cleanup(client->multi);
    free(client);
}

void rh_http_client_post(rh_http_client *client, const char *url, const rh_http_body *bodies, size_t count,
                         size_t in_flight, long idle_timeout_ms, long total_timeout_ms, int direct, const int *cancel,
                         rh_http_result *results, int *returns) {
    transfer *transfers = calloc(count ? count : 1, sizeof *transfers);
    for (size_t i = 0; i < count; i++) {
        memset(&results[i], 0, sizeof results[i]);
        returns[i] = -1;
    }
    if (transfers == NULL) {
        for (size_t i = 0; i < count; i++) set_failure(&results[i], "out of memory");
        return;
    }
    if (in_flight < 1) in_flight = 1;
    size_t next = 0, running = 0;
    for (;;) {
        /* Start requests, in order, while fewer than in_flight run. */
        while (next < count && running < in_flight) {
            size_t i = next++;
            if (start_transfer(&transfers[i], url, &bodies[i], idle_timeout_ms, total_timeout_ms, direct, cancel,
                               &results[i]) != 0) continue;
            if (hp_libcurl.multi_add_handle(client->multi, transfers[i].curl) != CURLM_OK) {
                returns[i] = finish_transfer(&transfers[i], CURLE_FAILED_INIT, &results[i]);
                continue;
            }
            running++;
        }
        if (running == 0) break;
        int active = 0;
        hp_libcurl.multi_perform(client->multi, &active);
        CURLMsg *message;
        int left = 0;
        while ((message = hp_libcurl.multi_info_read(client->multi, &left)) != NULL) {
            if (message->msg != CURLMSG_DONE) continue;
            transfer *t = NULL;
            hp_libcurl.easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&t);
            CURLcode code = message->data.result;
            hp_libcurl.multi_remove_handle(client->multi, message->easy_handle);
            size_t i = (size_t)(t - transfers);
            returns[i] = finish_transfer(t, code, &results[i]);
            running--;
        }
        /* At most a second between turns, so progress (the cancel flag) is looked at. */
        if (running > 0 && active > 0) hp_libcurl.multi_poll(client->multi, NULL, 0, 1000, NULL);
    }
    free(transfers);
}

void rh_cancel_set(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
