/*
 * wake.h - the blocking client's wake-up subscribers (dq_poll_wait): one
 * connection subscribed to the client's own wake channel of each queue it
 * waits on (see lua/include/wake.lua; several with
 * dq_poll_wait_multi), or to those of every partition of a partitioned
 * queue - in a cluster one connection per node that owns some of them,
 * with SSUBSCRIBE (sharded pub/sub).
 */
#ifndef DQ_WAKE_H
#define DQ_WAKE_H

#include "links.h"
#include "ops.h"

typedef struct dq__wake {
    dq__conn **conns;              /* subscribers, one per node */
    int n;
    char (*queues)[DQ_QUEUE_MAX + 1]; /* the queues they listen for */
    size_t nq;
    char ns[65];
    char me[DQ_GEN_ID_LEN + 1];    /* the consumer id they listen as */
    int parts;                     /* its partitions (1: plain) */
    int64_t alive_us;              /* when the links last answered */
    int lost;                      /* a subscription was dropped (its slot
                                      moved, the primary changed):
                                      subscribe again */
    unsigned epoch;                /* dq__links_epoch they were opened in */
} dq__wake;

/* Subscribes (again) when w does not listen for exactly the n queues yet,
 * a link broke, a subscription was dropped or (Sentinel) the primary
 * changed or is to be found again; then every partition of
 * each queue counts as possibly due (wake-ups may have been missed).
 * DQ_OK or the code with err set. */
int dq__wake_ensure(dq__wake *w, dq__links *links, dq__core *core, size_t n,
                    const char *const *queues, dq__err *err);
/* Takes the messages already buffered: each marks its partition woken in
 * core.  Returns how many. */
int dq__wake_drain(dq__wake *w, dq__core *core);
/* Waits up to timeout_us for a message: 1, 0 on timeout, < 0 when a link
 * failed (w then subscribes again on the next ensure).  Behind Sentinel
 * the +switch-master subscriber of links is waited on too: a failover
 * ends the wait (1) with w->lost set, so the next ensure subscribes at
 * the new primary. */
int dq__wake_wait(dq__wake *w, dq__links *links, int64_t timeout_us,
                  dq__err *err);
/* 0 when w must subscribe again (lost, or opened for an earlier primary
 * than links has now). */
int dq__wake_current(const dq__wake *w, const dq__links *links);
/* Checks every link with a PING; DQ_OK or the code of the first failure. */
int dq__wake_ping(dq__wake *w, dq__core *core, dq__err *err);
void dq__wake_clear(dq__wake *w);

#endif
