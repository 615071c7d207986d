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

typedef struct dq__sigpipe {
    sigset_t old;    /* the thread's mask before */
    int active;      /* 1 if this guard blocked SIGPIPE */
    int was_pending; /* 1 if a SIGPIPE was already pending before */
} dq__sigpipe;

void dq__sigpipe_block(dq__sigpipe *s);
void dq__sigpipe_restore(dq__sigpipe *s);

#endif
