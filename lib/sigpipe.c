/*
 * sigpipe.c - per-thread SIGPIPE guard around the library's socket I/O.
 */
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "sigpipe.h"

void dq__sigpipe_block(dq__sigpipe *s) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    s->active = 0;
    s->was_pending = 0;
    if (pthread_sigmask(SIG_BLOCK, &set, &s->old) != 0)
        return;
    if (sigismember(&s->old, SIGPIPE)) {
        /* Already blocked by the caller (or an outer guard): nothing to do,
         * and a pending SIGPIPE is the caller's to handle. */
        return;
    }
    s->active = 1;
    sigset_t pend;
    if (sigpending(&pend) == 0)
        s->was_pending = sigismember(&pend, SIGPIPE);
}

void dq__sigpipe_restore(dq__sigpipe *s) {
    if (!s->active)
        return;
    sigset_t pend;
    if (!s->was_pending && sigpending(&pend) == 0 &&
        sigismember(&pend, SIGPIPE)) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        struct timespec zero = {0, 0};
        sigtimedwait(&set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &s->old, NULL);
    s->active = 0;
}
