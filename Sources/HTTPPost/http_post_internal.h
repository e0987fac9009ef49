/* HTTPPost's parts: the requests (http_post.c) and libcurl's loading (libcurl.c). This header
 * is what they give each other, hidden from the libraries they are linked into. */
#pragma once

#include <curl/curl.h>

/* libcurl is loaded at the first client (dlopen), not linked: linked, it and the 31 libraries
 * it needs would be loaded, and their symbols bound, at the start of every program that links
 * the host, whether it delivers or not (a third of a one-shot `reporthost report`). */
#define CURL_FUNCTIONS(X)                                                                                      \
    X(global_init, curl_global_init)                                                                        \
    X(easy_init, curl_easy_init)                                                                            \
    X(easy_setopt, curl_easy_setopt)                                                                        \
    X(easy_getinfo, curl_easy_getinfo)                                                                      \
    X(easy_strerror, curl_easy_strerror)                                                                    \
    X(easy_cleanup, curl_easy_cleanup)                                                                      \
    X(slist_append, curl_slist_append)                                                                      \
    X(slist_free_all, curl_slist_free_all)                                                                  \
    X(multi_init, curl_multi_init)                                                                          \
    X(multi_add_handle, curl_multi_add_handle)                                                              \
    X(multi_remove_handle, curl_multi_remove_handle)                                                        \
    X(multi_perform, curl_multi_perform)                                                                    \
    X(multi_info_read, curl_multi_info_read)                                                                \
    X(multi_poll, curl_multi_poll)                                                                          \
    X(multi_cleanup, curl_multi_cleanup)                                                                    \
    X(url, curl_url)                                                                                        \
    X(url_set, curl_url_set)                                                                                \
    X(url_get, curl_url_get)                                                                                \
    X(url_strerror, curl_url_strerror)                                                                      \
    X(url_cleanup, curl_url_cleanup)                                                                        \
    X(free, curl_free)

/* The functions used, typed by curl.h's own prototypes. */
struct hp_libcurl_functions {
#define FIELD(field, symbol) __typeof__(symbol) *field;
    CURL_FUNCTIONS(FIELD)
#undef FIELD
};

#pragma GCC visibility push(hidden)

/* libcurl.c: libcurl's functions, set once rh_http_load_failure returns NULL. */
extern struct hp_libcurl_functions hp_libcurl;

#pragma GCC visibility pop
