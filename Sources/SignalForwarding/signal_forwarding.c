#define _GNU_SOURCE
#include "rh_signal_forwarding.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

/* The child's pid (0: none yet), and per signal whether one came while there was none. */
static int target_pid;
static int pending[NSIG];
/* What each signal did before install, given back by stop. */
static struct sigaction previous[NSIG];
static int installed[NSIG];

static void pass_on(int number, siginfo_t *info, void *context) {
    (void)context;
    int saved = errno;
    if (info != NULL && info->si_code <= 0 && number > 0 && number < NSIG) {
        __atomic_store_n(&pending[number], 1, __ATOMIC_SEQ_CST);
        /* Whichever of this handler and rh_forward_start sees both the pid and the flag
         * sends it; the exchange makes sure only one of them does. */
        int target = __atomic_load_n(&target_pid, __ATOMIC_SEQ_CST);
        if (target > 0 && __atomic_exchange_n(&pending[number], 0, __ATOMIC_SEQ_CST)) kill(target, number);
    }
    errno = saved;
}

void rh_forward_install(const int *signals, int count) {
    for (int i = 0; i < count; i++) {
        if (signals[i] <= 0 || signals[i] >= NSIG || installed[signals[i]]) continue;
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = pass_on;
        action.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&action.sa_mask);
        if (sigaction(signals[i], &action, &previous[signals[i]]) == 0) installed[signals[i]] = 1;
    }
}

void rh_forward_start(pid_t pid) {
    __atomic_store_n(&target_pid, (int)pid, __ATOMIC_SEQ_CST);
    for (int number = 1; number < NSIG; number++) {
        if (__atomic_exchange_n(&pending[number], 0, __ATOMIC_SEQ_CST)) kill(pid, number);
    }
}

void rh_forward_stop(void) {
    __atomic_store_n(&target_pid, 0, __ATOMIC_SEQ_CST);
    for (int number = 1; number < NSIG; number++) {
        if (!installed[number]) continue;
        sigaction(number, &previous[number], NULL);
        installed[number] = 0;
        __atomic_store_n(&pending[number], 0, __ATOMIC_SEQ_CST);
    }
}
