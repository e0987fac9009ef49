/* Strings: copies that stay valid UTF-8, messages, paths. */
#include "symbolize_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies `src` into `dst` (capacity `cap`), cutting at a UTF-8 character boundary when it does
   not fit, so a truncated name is still valid UTF-8. */
void sym_copy_str(char *dst, size_t cap, const char *src) {
    if (dst == NULL || cap == 0) return;
    if (src == NULL) src = "";
    size_t len = strlen(src);
    if (len >= cap) {
        len = cap - 1;
        /* src[len] is the first byte left out; if it continues a character, drop that
           character's first bytes too. */
        while (len > 0 && ((unsigned char)src[len] & 0xC0) == 0x80) len--;
    }
    memcpy(dst, src, len);
    dst[len] = '\0';
}

void sym_set_why(char *why, size_t cap, const char *fmt, ...) {
    if (why == NULL || cap == 0) return;
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    sym_copy_str(why, cap, n < 0 ? "out of memory" : text);
    if (n >= 0) free(text);
}

/* `dir`/`file` unless `file` is already absolute or there is no dir. */
void sym_join_path(char *dst, size_t cap, const char *dir, const char *file) {
    if (file == NULL || file[0] == '\0') {
        sym_copy_str(dst, cap, "");
        return;
    }
    if (file[0] == '/' || dir == NULL || dir[0] == '\0') {
        sym_copy_str(dst, cap, file);
        return;
    }
    char *joined = NULL;
    bool slash = dir[strlen(dir) - 1] == '/';
    if (asprintf(&joined, "%s%s%s", dir, slash ? "" : "/", file) < 0) {
        sym_copy_str(dst, cap, file);
        return;
    }
    sym_copy_str(dst, cap, joined);
    free(joined);
}
