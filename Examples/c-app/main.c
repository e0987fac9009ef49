/* c-app: a C program embedding ReportHost through reporthost/embed.h.
 *
 *   c-app [--config FILE] [--repository DIR] report|crash|both
 *
 * report: raises an "error" report and prints `report <id>`; crash: prints `crashing` and
 * dies by a real SIGSEGV (the next start recovers it); both: the report, then the crash.
 * Each step leaves a breadcrumb, and a start after crashed sessions says how many (where a
 * real program would choose a safe mode). */
#include <reporthost/embed.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: c-app [--config FILE] [--repository DIR] report|crash|both\n");
    return 2;
}

static int fail(rh_embed *host, const char *what, int code) {
    fprintf(stderr, "c-app: %s failed (%d)\n", what, code);
    rh_embed_stop(host);
    return 1;
}

int main(int argc, char **argv) {
    const char *config = NULL, *repository = NULL, *command = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(argv[i], "--repository") == 0 && i + 1 < argc) {
            repository = argv[++i];
        } else if (command == NULL && argv[i][0] != '-') {
            command = argv[i];
        } else {
            return usage();
        }
    }
    if (command == NULL) return usage();
    bool report = strcmp(command, "report") == 0, crash = strcmp(command, "crash") == 0;
    if (strcmp(command, "both") == 0) report = crash = true;
    if (!report && !crash) return usage();

    char error[512];
    rh_embed *host = rh_embed_start(config, repository, error, sizeof error);
    if (host == NULL) {
        fprintf(stderr, "c-app: %s\n", error);
        return 1;
    }
    int status = rh_embed_set_attribute(host, "example", "c-app");
    if (status != RH_EMBED_OK) return fail(host, "rh_embed_set_attribute", status);
    int crashes = rh_embed_consecutive_crashes(host);
    if (crashes > 0) fprintf(stderr, "c-app: the last %d session(s) crashed; a real program would start in safe mode\n", crashes);
    rh_embed_breadcrumb(host, RH_LOG_INFO, "c-app", "started");

    if (report) {
        char id[37];
        rh_embed_breadcrumb(host, RH_LOG_INFO, "c-app", "raising an error report");
        status = rh_embed_report(host, "error", "c-app error", NULL, id);
        if (status != RH_EMBED_OK) return fail(host, "rh_embed_report", status);
        if (printf("report %s\n", id) < 0 || fflush(stdout) != 0) return fail(host, "writing stdout", 0);
    }
    if (crash) {
        if (printf("crashing\n") < 0 || fflush(stdout) != 0) return fail(host, "writing stdout", 0);
        rh_embed_breadcrumb(host, RH_LOG_WARN, "c-app", "about to write through a NULL pointer");
        volatile int *nothing = NULL;
        *nothing = 1; /* a real SIGSEGV: the crash writer records it, then the process dies */
    }
    rh_embed_stop(host);
    return 0;
}
