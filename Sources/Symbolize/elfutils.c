/* libdw's loading: the functions of ELFUTILS_FUNCTIONS (symbolize_internal.h), resolved with
 * dlsym at the first symbolizer. */
#include "symbolize_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

struct sym_elfutils_functions sym_elfutils;

static pthread_once_t elfutils_once = PTHREAD_ONCE_INIT;
/* Why libdw cannot be used; "" once it is loaded. */
static char elfutils_failure[256] = "libdw was not loaded";

static void load_elfutils(void) {
    /* Never closed: the symbol cache keeps its modules open for a whole recovery. */
    void *library = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == NULL) {
        const char *error = dlerror();
        snprintf(elfutils_failure, sizeof elfutils_failure, "libdw could not be loaded: %s", error ? error : "libdw.so.1");
        return;
    }
#define LOAD(symbol)                                                                                           \
    if ((*(void **)&sym_elfutils.symbol = dlsym(library, #symbol)) == NULL) {                                  \
        snprintf(elfutils_failure, sizeof elfutils_failure, "libdw.so.1 has no %s: it is too old", #symbol);   \
        return;                                                                                                \
    }
    ELFUTILS_FUNCTIONS(LOAD)
#undef LOAD
    elfutils_failure[0] = 0;
}

const char *rh_symbolize_load_failure(void) {
    pthread_once(&elfutils_once, load_elfutils);
    return elfutils_failure[0] ? elfutils_failure : NULL;
}
