/*
 * delayq-consumer.h - ready-made consumer loops for libdelayq.
 *
 * A consumer claims due jobs of one queue (or of several, see
 * dq_consumer_add_queue) and hands each to a handler you write; the handler's outcome decides what happens to the job:
 *
 *   DQ_JOB_OK     success: the job is acked (deleted)
 *   DQ_JOB_RETRY  failure: the job is nacked and due again after the retry
 *                 backoff (DQ_COPT_RETRY_*), or dead-lettered once it has
 *                 had its maximum number of attempts
 *   DQ_JOB_FAIL   give up: the job goes to the dead set now
 *
 * Before a retry or failure the handler may say why with
 * dq_consumer_set_reason: the consumer's nack records it as the job's last
 * failure reason, shown by dq_get and the dead listings.
 *
 * The same handler contract serves both loops:
 *  - the handler returns one of the outcomes above; or
 *  - it calls dq_consumer_done(c, job, outcome, delay_ms) and returns
 *    DQ_JOB_ASYNC.  With the libevent consumer (delayq-event.h) it may call
 *    dq_consumer_done later, from any callback of the same event loop; the
 *    sync consumer needs the call before the handler returns.
 * Any other return value counts as DQ_JOB_RETRY: a handler that fails never
 * stops the loop, and one job's failure never affects another.
 *
 * This header has the handler contract, the consumer options and the sync
 * consumer (for programs without an event loop, built on dq_poll_wait).
 * The libevent consumer is declared in delayq-event.h.  Same conventions as
 * delayq.h: int codes, opaque handles, no structs by value, no varargs.
 *
 * Thread safety: a consumer is used from one thread at a time, the thread
 * that runs its loop; dq_consumer_interrupt is the exception (any thread,
 * or a signal handler).
 */
#ifndef DELAYQ_CONSUMER_H
#define DELAYQ_CONSUMER_H

#include "delayq.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dq_consumer dq_consumer;

/* Handler outcomes (return values of dq_handler_fn, outcome arguments of
 * dq_consumer_done and dq_outcome_cb). */
#define DQ_JOB_ASYNC 0 /* handler returns it: dq_consumer_done reports */
#define DQ_JOB_OK 1    /* success: ack */
#define DQ_JOB_RETRY 2 /* retry after a backoff (or dead at max attempts) */
#define DQ_JOB_FAIL 3  /* dead-letter now */

/*
 * Handler of one job.  job stays valid until the job is finished: until
 * the handler returns an outcome, or until dq_consumer_done is called for
 * it (or the consumer is freed).  Copy what you need to keep longer
 * (dq_job_dup).  dq_job_attempt(job) is 1 on the first delivery.
 */
typedef int dq_handler_fn(dq_consumer *c, const dq_job *job, void *userdata);

/*
 * Optional report after a job was finished in Redis (dq_consumer_set_
 * outcome_cb): outcome is what was applied (DQ_JOB_OK acked, DQ_JOB_RETRY
 * requeued, DQ_JOB_FAIL dead-lettered, also when the max attempts turned a
 * retry into a death) and status the result of that Redis call: 0, or a
 * negative code such as DQ_ESTALE (the lease was lost: the job was claimed
 * again elsewhere) or DQ_EIO.  job is borrowed for the call.
 */
typedef void dq_outcome_cb(dq_consumer *c, const dq_job *job, int outcome,
                           int status, void *userdata);

/* Consumer options (dq_consumer_set_int), before the consumer starts. */
enum dq_consumer_option {
    DQ_COPT_CONCURRENCY = 1,    /* handlers running at once (libevent
                                   consumer; finished jobs whose batched
                                   ack is still on its way hold a lease too,
                                   so up to twice this many leases) or jobs
                                   claimed per poll (sync), 1..1000,
                                   default 1 */
    DQ_COPT_LEASE_MS = 2,       /* lease per delivery, default 30000 (the
                                   consumers time their extends and handler
                                   timeouts by it, so they pass it on every
                                   poll: a queue's DQ_SET_LEASE_MS is for
                                   polls that ask for lease 0) */
    DQ_COPT_EXTEND = 3,         /* 1 (default): the libevent consumer renews
                                   the lease of a running job every lease/2;
                                   0: never */
    DQ_COPT_RETRY_BACKOFF = 4,  /* DQ_BACKOFF_EXPONENTIAL (default) or
                                   DQ_BACKOFF_FIXED; this and the RETRY_*
                                   options below hold for queues without
                                   backoff settings: a queue's DQ_SET_BACKOFF
                                   settings decide every consumer's retry
                                   delays (the retries are nacks with
                                   DQ_NACK_BACKOFF); a delay the handler
                                   gives dq_consumer_done always holds */
    DQ_COPT_RETRY_BASE_MS = 5,  /* first retry delay, default 1000 */
    DQ_COPT_RETRY_MAX_MS = 6,   /* cap of the exponential delay, default
                                   300000 */
    DQ_COPT_RETRY_JITTER = 7,   /* percent 0..100 taken off at random,
                                   default 20 */
    DQ_COPT_MAX_ATTEMPTS = 8,   /* deliveries before dead, default 0 = as
                                   the scripts decide: the job's own, the
                                   queue's DQ_SET_MAX_ATTEMPTS, then the
                                   client's DQ_OPT_MAX_ATTEMPTS (0 there =
                                   unlimited); set, this consumer also gives
                                   a job up after that many */
    DQ_COPT_HANDLER_TIMEOUT_MS = 9, /* libevent consumer: a job whose handler
                                   has not finished after this long is
                                   released for a retry and its slot freed
                                   (a later dq_consumer_done returns
                                   DQ_ESTALE); default 0 = no limit */
    DQ_COPT_PRIORITY = 10       /* how a consumer of several queues
                                   (dq_consumer_add_queue) picks the queue
                                   of its next claim: DQ_PRIO_WEIGHTED
                                   (default; in proportion to the weights)
                                   or DQ_PRIO_STRICT (list order), as
                                   dq_poll_wait_multi */
};

/* Sets an option.  Returns 0, DQ_ENULL, DQ_EINVAL (unknown option or value
 * out of range) or DQ_EINVAL when the consumer already runs. */
DQ_EXTERN int dq_consumer_set_int(dq_consumer *c, int option, int64_t value);

/*
 * Several queues: adds queue (1..DQ_QUEUE_MAX bytes) to the queues the
 * consumer serves, with weight 1..DQ_WEIGHT_MAX, before it starts.  The
 * queue given at creation is the first (index 0, weight 1); adding a queue
 * the consumer serves already sets its weight.  Each claim takes jobs of
 * one queue, chosen as DQ_COPT_PRIORITY says (see dq_poll_wait_multi);
 * the consumer waits on all of them with one wake-up connection and
 * polls an idle queue only when told of due work or once per idle cap.
 * A job's ack, nack and lease extensions go to its own queue;
 * dq_consumer_job_queue tells the handler which one it is.  At most
 * DQ_MULTI_MAX queues.  queue is copied.
 * Returns the queue's index (>= 1; 0 for the first queue), DQ_ENULL,
 * DQ_EQUEUE (a bad name), DQ_EINVAL (weight out of range, DQ_MULTI_MAX
 * queues already, or the consumer runs) or DQ_ENOMEM.
 */
DQ_EXTERN int dq_consumer_add_queue(dq_consumer *c, const char *queue,
                                    int weight);

/*
 * The queue of a job this consumer handed to its handler: valid while the
 * job is (during the handler, until dq_consumer_done, and in the job's
 * outcome report); the string belongs to the consumer.  NULL if c or job
 * is NULL or the job is not one of this consumer's running jobs.
 */
DQ_EXTERN const char *dq_consumer_job_queue(const dq_consumer *c,
                                            const dq_job *job);

/* Sets (or clears, with NULL) the outcome report.  Returns 0 or DQ_ENULL. */
DQ_EXTERN int dq_consumer_set_outcome_cb(dq_consumer *c, dq_outcome_cb *cb,
                                         void *userdata);

/*
 * Finishes a job handed to the handler: outcome DQ_JOB_OK, DQ_JOB_RETRY or
 * DQ_JOB_FAIL.  delay_ms applies to DQ_JOB_RETRY: -1 for the consumer's
 * backoff, else 0..DQ_DELAY_MAX.  Returns 0; DQ_EINVAL if the job is not
 * one this consumer is running (already finished, or never handed out) or
 * an argument is out of range; DQ_ESTALE if the consumer already gave the
 * job up (handler timeout or stop deadline) - the job is then released
 * and the pointer invalid after this call.
 */
DQ_EXTERN int dq_consumer_done(dq_consumer *c, const dq_job *job,
                               int outcome, int64_t delay_ms);

/*
 * Says why a job handed to the handler failed: when the job is retried or
 * dead-lettered (DQ_JOB_RETRY or DQ_JOB_FAIL, returned or through
 * dq_consumer_done), the consumer's nack records reason as the job's last
 * failure reason (as dq_nack_reason: dq_get, dq_list and dq_dead_list show
 * it).  Call it from the handler, or before dq_consumer_done for a job
 * finished later, for the job being handled; a second call replaces the
 * reason.  reason: len bytes, binary-safe, at most DQ_REASON_MAX; it is
 * copied (the buffer may go away after the call); NULL only with len 0,
 * which records an empty reason.  A success (DQ_JOB_OK) records nothing.
 * Without a reason a retry or failure keeps the job's last one, except
 * where the consumer decides itself: a retry that DQ_COPT_MAX_ATTEMPTS
 * turns into a death records "max attempts" (unless the handler gave a
 * reason; a death by the client's DQ_OPT_MAX_ATTEMPTS, applied by the
 * server, records only the handler's), a job delivered more often than
 * DQ_COPT_MAX_ATTEMPTS is dead-lettered with "max attempts" without
 * running the handler, and a job released after DQ_COPT_HANDLER_TIMEOUT_MS
 * records "handler timeout" (instead of the handler's reason).  A release
 * at a stop records nothing.
 * Returns 0; DQ_ENULL (c or job NULL, or reason NULL with len > 0);
 * DQ_EINVAL if len > DQ_REASON_MAX or the job is not one this consumer is
 * running (already finished, or never handed out) - nothing is kept, an
 * earlier reason stays; DQ_ESTALE if the consumer already gave the job up
 * (handler timeout or stop: dq_consumer_done says so too); DQ_ENOMEM.
 */
DQ_EXTERN int dq_consumer_set_reason(dq_consumer *c, const dq_job *job,
                                     const void *reason, size_t len);

/* Retry delay the consumer's backoff gives a job at this delivery number
 * (1 = first), jitter included.  For logging and tests. */
DQ_EXTERN int64_t dq_consumer_backoff_ms(dq_consumer *c,
                                         int64_t attempt);

/* Detailed message of the consumer's last error ("" if none): a failed
 * poll, ack or nack.  The consumer keeps going after such errors. */
DQ_EXTERN const char *dq_consumer_errmsg(const dq_consumer *c);

/*
 * Frees a consumer (NULL is a no-op) without waiting: jobs still running
 * are abandoned (their leases run out and they are delivered again).
 * Use a graceful stop first to release them at once.  Safe from inside the
 * consumer's own callbacks.  The client must outlive its consumers - or
 * dq_async_free frees the libevent consumers of its client itself.
 */
DQ_EXTERN void dq_consumer_free(dq_consumer *c);

/* ---- Sync consumer ------------------------------------------------------ */

/*
 * Creates a consumer that runs on a blocking client: the loop in
 * dq_consumer_run claims up to DQ_COPT_CONCURRENCY jobs at a time with
 * dq_poll_wait_multi over its queues (sleeping until the next job is due, woken early by pushes)
 * and runs the handler for each in turn.  Leases are not extended while a
 * handler runs, and the jobs of one claim run one after another under
 * leases taken at the same moment: choose DQ_COPT_LEASE_MS above the time
 * a whole claim takes (or a smaller concurrency).  Jobs whose handler
 * succeeded are acked together with one dq_ack_batch: before the next
 * poll, before a stop releases the rest of the claim, and before the next
 * handler once the oldest waiting ack is 5 ms old or half the lease has
 * passed since the claim; their outcome reports (dq_consumer_set_outcome_cb)
 * come with that ack.
 * On failure *out is NULL.  Returns 0, DQ_ENULL, DQ_EQUEUE or DQ_ENOMEM.
 */
DQ_EXTERN int dq_consumer_new_sync(dq_client *client, const char *queue,
                                   dq_handler_fn *handler, void *userdata,
                                   dq_consumer **out);

/*
 * Runs the loop until dq_consumer_interrupt is called (from the handler,
 * another thread or a signal handler; the loop notices within
 * DQ_OPT_WAIT_CAP_MS when idle).  Graceful stop: the running handler
 * finishes, jobs claimed but not started are released (nacked without
 * delay; their attempt still counts).  Returns the number of jobs released
 * (>= 0), or DQ_EINVAL for a libevent consumer.  Errors from Redis do not
 * end the loop: it retries with a backoff (50 ms doubling to 2 s).
 */
DQ_EXTERN int dq_consumer_run(dq_consumer *c);

/* Asks dq_consumer_run to stop.  Only sets a flag: async-signal-safe. */
DQ_EXTERN void dq_consumer_interrupt(dq_consumer *c);

#ifdef __cplusplus
}
#endif
#endif /* DELAYQ_CONSUMER_H */
