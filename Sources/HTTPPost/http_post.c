#define _GNU_SOURCE
#include "rh_http_post.h"

#include <curl/curl.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* The head of the answer as it arrives, a line at a time. */
typedef struct {
    int status;
    int in_head;  /* a status line began a head that has not ended yet */
    int complete; /* the final (non-1xx) head ended: stop the transfer */
    char retry_after[65];
} head_state;

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_status = CURLE_FAILED_INIT;

static void global_init(void) { global_status = curl_global_init(CURL_GLOBAL_DEFAULT); }

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

static void keep_retry_after(head_state *head, const char *value, size_t length) {
    while (length > 0 && (*value == ' ' || *value == '\t')) {
        value++;
        length--;
    }
    while (length > 0 && isspace((unsigned char)value[length - 1])) length--;
    if (length >= sizeof head->retry_after) length = 0; /* over-long: unreadable, ignored */
    memcpy(head->retry_after, value, length);
    head->retry_after[length] = 0;
}

/* Called once per complete header line (libcurl bounds a line at 100 KB). Returning a count
 * other than the line's length ends the transfer: done at the end of the final head. */
static size_t on_header(char *line, size_t size, size_t count, void *context) {
    head_state *head = context;
    size_t length = size * count;
    if (!head->in_head) {
        /* A head starts with its status line (a 1xx head may come before the final one). */
        head->in_head = 1;
        head->status = length >= 5 && strncmp(line, "HTTP/", 5) == 0 ? parse_status(line, length) : 0;
        head->retry_after[0] = 0;
    } else if (length <= 2 && (line[0] == '\r' || line[0] == '\n')) {
        head->in_head = 0;
        if (head->status >= 200 || head->status == 0) {
            head->complete = 1;
            return 0;
        }
    } else if (length > 12 && strncasecmp(line, "Retry-After:", 12) == 0) {
        keep_retry_after(head, line + 12, length - 12);
    }
    return length;
}

/* The body is never read: a byte of it ends the transfer. */
static size_t on_body(char *data, size_t size, size_t count, void *context) {
    (void)data;
    (void)size;
    (void)count;
    (void)context;
    return 0;
}

static size_t on_read(char *buffer, size_t size, size_t count, void *context) {
    FILE *body = context;
    size_t got = fread(buffer, size, count, body);
    if (got == 0 && ferror(body)) return CURL_READFUNC_ABORT;
    return got;
}

/* Called by libcurl about once a second, and at every transfer: a non-zero return ends the
 * request (CURLE_ABORTED_BY_CALLBACK). */
static int on_progress(void *context, curl_off_t download_total, curl_off_t downloaded, curl_off_t upload_total,
                       curl_off_t uploaded) {
    (void)download_total;
    (void)downloaded;
    (void)upload_total;
    (void)uploaded;
    const int *cancel = context;
    return cancel != NULL && __atomic_load_n(cancel, __ATOMIC_ACQUIRE) != 0;
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

int rh_http_post(const char *url, const char *content_type, const char *body_path, long idle_timeout_ms,
                 long total_timeout_ms, int direct, const int *cancel, rh_http_result *result) {
    memset(result, 0, sizeof *result);
    if (strpbrk(content_type, "\r\n") != NULL || strlen(content_type) > 200) {
        set_failure(result, "an invalid Content-Type");
        return -1;
    }
    pthread_once(&global_once, global_init);
    if (global_status != CURLE_OK) {
        set_failure(result, "libcurl could not start");
        return -1;
    }
    FILE *body = fopen(body_path, "rbe");
    struct stat info;
    if (body == NULL || fstat(fileno(body), &info) != 0) {
        if (body != NULL) fclose(body);
        set_failure(result, "cannot read the request body");
        return -1;
    }
    CURL *curl = curl_easy_init();
    char content_header[256];
    snprintf(content_header, sizeof content_header, "Content-Type: %s", content_type);
    struct curl_slist *headers = curl_slist_append(NULL, content_header);
    /* No "Expect: 100-continue" wait before the body. */
    struct curl_slist *more = headers ? curl_slist_append(headers, "Expect:") : NULL;
    if (curl == NULL || more == NULL) {
        curl_slist_free_all(more ? more : headers);
        if (curl != NULL) curl_easy_cleanup(curl);
        fclose(body);
        set_failure(result, "out of memory");
        return -1;
    }
    headers = more;
    long idle_seconds = idle_timeout_ms <= 1000 ? 1 : (idle_timeout_ms + 999) / 1000;
    head_state head = {0};
    char detail[CURL_ERROR_SIZE] = {0};

    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    /* "*": no proxy for any host, whatever http_proxy, all_proxy or no_proxy say. */
    if (direct) curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    /* Proxies from the environment (https_proxy, no_proxy) are honoured; their CONNECT
     * answer ("200 Connection established") is not the server's and never reaches on_header. */
    curl_easy_setopt(curl, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "reporthost/1");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(curl, CURLOPT_READDATA, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)info.st_size);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &head);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, idle_seconds * 1000);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, idle_seconds);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, total_timeout_ms > 0 ? total_timeout_ms : 1L);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)cancel);

    CURLcode code = curl_easy_perform(curl);
    int answered = head.complete && head.status != 0;
    if (!answered && code == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status <= 999) { /* a 1xx alone is no answer */
            head.status = (int)status;
            answered = 1;
        }
    }
    if (answered) {
        result->status = head.status;
        memcpy(result->retry_after, head.retry_after, sizeof result->retry_after);
    } else if (head.complete) {
        set_failure(result, "an answer without a readable status line");
    } else {
        long os_error = 0;
        curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_error);
        const char *text = describe(code, os_error);
        /* libcurl refuses a header line over 100 KB as "out of memory". */
        if (code == CURLE_OUT_OF_MEMORY && head.status != 0) text = "an answer head over libcurl's limits";
        if (text == NULL) text = detail[0] ? detail : curl_easy_strerror(code);
        snprintf(result->failure, sizeof result->failure, "%s", text);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    fclose(body);
    if (!answered && code == CURLE_ABORTED_BY_CALLBACK) return RH_HTTP_CANCELLED;
    return answered ? 0 : -1;
}

void rh_cancel_set(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
