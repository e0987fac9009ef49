/* libcurl's loading: the functions of CURL_FUNCTIONS (http_post_internal.h), resolved with
 * dlsym at the first client, then curl_global_init. */
#define _GNU_SOURCE
#include "rh_http_post.h"
#include "http_post_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

struct hp_libcurl_functions hp_libcurl;

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
/* Why libcurl cannot be used; "" once it is loaded and initialised. */
static char load_failure[256] = "libcurl was not loaded";

static void global_init(void) {
    /* Never closed: a library that keeps threads and a connection cache stays for the process. */
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == NULL) {
        const char *error = dlerror();
        snprintf(load_failure, sizeof load_failure, "libcurl could not be loaded: %s", error ? error : "libcurl.so.4");
        return;
    }
#define LOAD(field, symbol)                                                                                    \
    if ((*(void **)&hp_libcurl.field = dlsym(library, #symbol)) == NULL) {                                        \
        snprintf(load_failure, sizeof load_failure, "libcurl.so.4 has no %s: it is too old", #symbol);                    \
        return;                                                                                                \
    }
    CURL_FUNCTIONS(LOAD)
#undef LOAD
    if (hp_libcurl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_failure, sizeof load_failure, "libcurl could not start (curl_global_init failed)");
        return;
    }
    load_failure[0] = 0;
}

const char *rh_http_load_failure(void) {
    pthread_once(&global_once, global_init);
    return load_failure[0] ? load_failure : NULL;
}
