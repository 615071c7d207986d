/*
 * sigpipe.h - keeps a write to a closed socket from killing the process.
 *
 * hiredis writes with write(2); on a connection Redis has closed that raises
 * SIGPIPE, whose default action ends the process.  A library must not change
 * the process's signal dispositions, so (as libpq does) the calling thread
 * blocks SIGPIPE around its I/O, swallows a SIGPIPE that the I/O raised, and
 * restores its mask.  The write then fails with EPIPE, which hiredis reports
 * as an I/O error.
 */
#ifndef DQ_SIGPIPE_H
#define DQ_SIGPIPE_H

#include <signal.h>

typedef struct dq_sigpipe {
    sigset_t old;    /* the thread's mask before */
    int active;      /* 1 if this guard blocked SIGPIPE */
    int was_pending; /* 1 if a SIGPIPE was already pending before */
} dq_sigpipe;

void dq_sigpipe_block(dq_sigpipe *s);
void dq_sigpipe_restore(dq_sigpipe *s);

#endif
