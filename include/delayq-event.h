/*
 * delayq-event.h - libdelayq on a libevent loop: the async client and the
 * async consumer.
 *
 * A dq_async is attached to your struct event_base and never blocks: every
 * operation of the sync API (delayq.h) has a twin here that queues the work
 * and later calls a completion callback from the event loop.  It runs the
 * same Lua scripts with the same argument checks and reply decoding as the
 * sync client; only the transport differs.
 *
 * Conventions, in addition to those of delayq.h:
 *
 *  - An operation returns 0 when it was queued: its callback is then called
 *    exactly once, later, from the event loop (never from inside the call).
 *    An operation that returns a negative code (bad argument, client
 *    closing, out of memory) never calls its callback.
 *  - Callbacks get the client, the results, `status` (what the sync twin
 *    would have returned: 0 or a count on success, a negative DQ_E* code on
 *    failure) and your userdata.  Inside a callback with status < 0,
 *    dq_async_errmsg(a) gives the detailed message.
 *  - Everything a callback receives (jobs, ids, result arrays) is borrowed
 *    for the duration of the callback and freed after it returns.  Keep a
 *    job with dq_job_dup (free it with dq_job_free); copy the rest.
 *  - Pointer arguments (queue, payloads, ids, tokens) are copied before the
 *    call returns.
 *  - Every callback may call any function of this header, including
 *    dq_async_free and dq_consumer_free on its own client or consumer.
 *  - Timeouts: DQ_OPT_CONNECT_TIMEOUT_MS bounds each connection attempt and
 *    DQ_OPT_COMMAND_TIMEOUT_MS the wait for a reply: when Redis stays
 *    silent that long with commands outstanding, the connection is dropped,
 *    those operations fail with DQ_ETIMEDOUT, and the client reconnects.
 *  - Connection loss: operations in flight fail with DQ_EIO (they may or
 *    may not have taken effect, as with the sync client) and the client
 *    reconnects by itself with a backoff (50 ms doubling to 2 s).
 *    Operations started while disconnected wait for the connection; they
 *    fail with DQ_EIO if the next connection attempt fails, or DQ_ETIMEDOUT
 *    after the command timeout.
 *  - Cluster and Sentinel URIs (redis+cluster://, redis+sentinel://, see
 *    dq_open): each script call goes to the node that owns its queue's
 *    hash slot (one connection per node, opened when needed; the slot map
 *    is learnt without blocking and again after MOVED or a failure), the
 *    calls to one node pipelined.  MOVED and ASK are followed; TRYAGAIN,
 *    CLUSTERDOWN, READONLY, LOADING and MASTERDOWN (not run) are retried
 *    after a pause of 1 ms doubling to 100 ms, until the command timeout
 *    (then DQ_ETIMEDOUT).  A call whose node is unreachable waits, up to
 *    the command timeout, for the topology to heal (a replica promoted:
 *    a failover is followed) instead of failing with the next attempt;
 *    calls in flight on a connection that is lost fail as above.  With
 *    Sentinel the primary is asked of each Sentinel in turn and used once
 *    it answers ROLE master; it is asked again after a failure or
 *    READONLY.  Consumers' wake-ups use sharded pub/sub (SSUBSCRIBE) on
 *    the node of the queue's slot in a cluster, and follow the slot (and
 *    the primary) when it moves.
 *
 * Timer precision: the consumer sleeps on a timerfd watched by libevent
 * (Linux), so it fires on time whatever the base's timer settings; where
 * that is unavailable it uses a libevent timer, and a base created with
 * EVENT_BASE_FLAG_PRECISE_TIMER keeps that one precise too.
 *
 * Thread safety: a dq_async and its consumers belong to the thread that runs
 * their event base.
 *
 * Build: pkg-config --cflags --libs delayq-event (delayq + libevent).
 */
#ifndef DELAYQ_EVENT_H
#define DELAYQ_EVENT_H

#include "delayq-consumer.h"
#include "delayq.h"

#ifdef __cplusplus
extern "C" {
#endif

struct event_base; /* <event2/event.h> */

typedef struct dq_async dq_async;

/* ---- Client ----------------------------------------------------------- */

/* Connection states reported to a dq_state_cb. */
#define DQ_CONNECTED 1    /* a connection is ready (first one or again) */
#define DQ_DISCONNECTED 2 /* the connection was lost, or an attempt failed;
                             the client retries after its backoff */
/* With a cluster or Sentinel URI the client is connected while the slot map
 * is known and a connection to a node is ready (cluster), or while the
 * primary's connection is ready and it answered ROLE master (Sentinel):
 * DQ_CONNECTED / DQ_DISCONNECTED report changes of that, and each failed
 * attempt (a node, a Sentinel) while not connected is a DQ_DISCONNECTED
 * too.  The loss of one cluster node while others are up is no state
 * change (the calls it carried fail; later ones wait for its slots'
 * new owner). */

/* State changes.  status: 0 for DQ_CONNECTED, else the reason (DQ_EIO,
 * DQ_ETIMEDOUT, DQ_EAUTH, ...); reason: a text, borrowed for the call. */
typedef void dq_state_cb(dq_async *a, int state, int status,
                         const char *reason, void *userdata);

/*
 * Creates an async client on base and starts connecting (in the loop: this
 * call never blocks and never calls back).  uri and opts as for dq_open.
 * Even when the call fails, *out is set (unless out is NULL or memory ran
 * out) to a client that holds the message (dq_async_errmsg) and must be
 * freed with dq_async_free.  Returns 0, DQ_ENULL, DQ_EURI, DQ_ENOTSUP or
 * DQ_ENOMEM; an unreachable server is reported through the state callback.
 */
DQ_EXTERN int dq_async_open(struct event_base *base, const char *uri,
                            const dq_options *opts, dq_async **out);

/*
 * Frees the client.  NULL is a no-op.  Operations not yet completed are
 * completed with DQ_ECANCELED before this returns (inside those callbacks
 * every call on a returns DQ_ECLOSED), and the client's libevent consumers
 * are freed.  Safe from inside any callback of the client.
 */
DQ_EXTERN void dq_async_free(dq_async *a);

/* Sets (or clears) the state callback.  Returns 0 or DQ_ENULL. */
DQ_EXTERN int dq_async_set_state_cb(dq_async *a, dq_state_cb *cb,
                                    void *userdata);
/* 1 while a connection is ready (cluster, Sentinel: connected as above),
 * else 0. */
DQ_EXTERN int dq_async_connected(const dq_async *a);
/* Message of the last failed call, or of the failure being reported to the
 * callback that is running ("" otherwise).  Valid until the next call. */
DQ_EXTERN const char *dq_async_errmsg(const dq_async *a);
/* Operations started and not completed yet. */
DQ_EXTERN size_t dq_async_pending(const dq_async *a);

/* ---- Callback types --------------------------------------------------- */

/* status only: ack, nack (0 requeued, 1 dead), cancel, dead requeue/purge
 * (counts), reschedule and promote (the DQ_RESCHED_* outcome). */
typedef void dq_status_cb(dq_async *a, int status, void *userdata);
/* push / push_at: id of the job (NULL on failure) and its outcome
 * (DQ_PUSHED / DQ_KEPT / DQ_REPLACED / DQ_DONE, 0 on failure). */
typedef void dq_push_cb(dq_async *a, const char *id, int outcome, int status,
                        void *userdata);
/* push_batch: ids of job i at ids + i * DQ_ID_BUF, outcomes[i]; both NULL
 * when status < 0 (except DQ_EREPLICAS: written, too few replicas). */
typedef void dq_batch_cb(dq_async *a, size_t n, const char *ids,
                         const int *outcomes, int status, void *userdata);
/* poll, dead_list: jobs (NULL when none), next_due_ms as dq_poll gives it
 * (poll only; 0 for dead_list). */
typedef void dq_jobs_cb(dq_async *a, const dq_jobs *jobs, int64_t next_due_ms,
                        int status, void *userdata);
/* list: jobs (NULL when none) and the server's time of the listing
 * (epoch ms; 0 on failure). */
typedef void dq_list_cb(dq_async *a, const dq_jobs *jobs, int64_t now_ms,
                        int status, void *userdata);
/* ack_batch: results[i] = 0, DQ_ESTALE or DQ_ENOTFOUND (NULL when
 * status < 0, except DQ_EREPLICAS: made, not confirmed by the replicas);
 * reschedule_batch: results[i] = a DQ_RESCHED_* outcome. */
typedef void dq_results_cb(dq_async *a, size_t n, const int *results,
                           int status, void *userdata);
/* extend: the new lease deadline (server epoch ms), 0 on failure. */
typedef void dq_extend_cb(dq_async *a, int64_t deadline_ms, int status,
                          void *userdata);
/* stats: as dq_stats (all 0 on failure). */
typedef void dq_stats_cb(dq_async *a, int64_t scheduled, int64_t due,
                         int64_t inflight, int64_t dead, int64_t next_due_ms,
                         int status, void *userdata);

/* count due: as dq_count_due, counts[0..n-1] (n = nbounds + 1) valid
 * during the call (NULL and n 0 on failure), now_ms 0 on failure. */
typedef void dq_count_due_cb(dq_async *a, size_t n, const int64_t *counts,
                             int64_t now_ms, int status, void *userdata);

/* group stats: as dq_group_stats, status the number of groups or a
 * negative code; the list (NULL on failure) is borrowed for the
 * callback. */
typedef void dq_group_stats_cb(dq_async *a, const dq_group_list *list,
                               int status, void *userdata);

/* get: the job (NULL when status is not 1: unknown, or a failure),
 * borrowed for the callback (dq_job_info_dup keeps it). */
typedef void dq_get_cb(dq_async *a, const dq_job_info *info, int status,
                       void *userdata);

/* counters: as dq_counters (all 0 on failure). */
/* A config set (values NULL) or get (values[n]: DQ_UNSET when not set;
 * NULL on error), valid during the call. */
typedef void dq_config_cb(dq_async *a, size_t n, const int64_t *values,
                          int status, void *userdata);
typedef void dq_counters_cb(dq_async *a, int64_t delivered, int64_t acked,
                            int64_t retried, int64_t failed, int status,
                            void *userdata);

/* ---- Operations: twins of delayq.h, same arguments and checks --------- */

DQ_EXTERN int dq_async_push(dq_async *a, const char *queue,
                            const void *payload, size_t len, int64_t delay_ms,
                            const char *id, int flags, dq_push_cb *cb,
                            void *userdata);
DQ_EXTERN int dq_async_push_at(dq_async *a, const char *queue,
                               const void *payload, size_t len, int64_t at_ms,
                               const char *id, int flags, dq_push_cb *cb,
                               void *userdata);
/* As dq_push_ex: options (NULL: none), DQ_PUSH_AT in flags for an
 * absolute time; cb as for dq_async_push. */
DQ_EXTERN int dq_async_push_ex(dq_async *a, const char *queue,
                               const void *payload, size_t len, int64_t when,
                               const char *id, int flags,
                               const dq_push_opts *opts, dq_push_cb *cb,
                               void *userdata);
DQ_EXTERN int dq_async_push_batch(dq_async *a, const char *queue, size_t n,
                                  const void *const *payloads,
                                  const size_t *lens,
                                  const int64_t *delays_ms,
                                  const char *const *ids, int flags,
                                  dq_batch_cb *cb, void *userdata);
DQ_EXTERN int dq_async_cancel(dq_async *a, const char *queue, const char *id,
                              int flags, dq_status_cb *cb, void *userdata);
/* Twins of dq_reschedule and dq_promote: status is the job's
 * DQ_RESCHED_* outcome, or a negative code. */
DQ_EXTERN int dq_async_reschedule(dq_async *a, const char *queue,
                                  const char *id, int64_t when, int flags,
                                  dq_status_cb *cb, void *userdata);
DQ_EXTERN int dq_async_promote(dq_async *a, const char *queue, const char *id,
                               int flags, dq_status_cb *cb, void *userdata);
/* Twin of dq_reschedule_batch: results[i] is job i's DQ_RESCHED_* outcome
 * (NULL when status < 0), status the number moved or revived. */
DQ_EXTERN int dq_async_reschedule_batch(dq_async *a, const char *queue,
                                        size_t n, const char *const *ids,
                                        int64_t when, int flags,
                                        dq_results_cb *cb, void *userdata);
DQ_EXTERN int dq_async_poll(dq_async *a, const char *queue, int max,
                            int64_t lease_ms, dq_jobs_cb *cb, void *userdata);
DQ_EXTERN int dq_async_ack(dq_async *a, const char *queue, const char *id,
                           const char *token, dq_status_cb *cb,
                           void *userdata);
DQ_EXTERN int dq_async_ack_batch(dq_async *a, const char *queue, size_t n,
                                 const char *const *ids,
                                 const char *const *tokens, dq_results_cb *cb,
                                 void *userdata);
DQ_EXTERN int dq_async_nack(dq_async *a, const char *queue, const char *id,
                            const char *token, int64_t delay_ms, int flags,
                            dq_status_cb *cb, void *userdata);
/* Twin of dq_nack_reason (status as dq_nack: 0 requeued, 1 dead). */
DQ_EXTERN int dq_async_nack_reason(dq_async *a, const char *queue,
                                   const char *id, const char *token,
                                   int64_t delay_ms, int flags,
                                   const void *reason, size_t reason_len,
                                   dq_status_cb *cb, void *userdata);
DQ_EXTERN int dq_async_extend(dq_async *a, const char *queue, const char *id,
                              const char *token, int64_t lease_ms,
                              dq_extend_cb *cb, void *userdata);
DQ_EXTERN int dq_async_dead_list(dq_async *a, const char *queue,
                                 int64_t offset, int count, dq_jobs_cb *cb,
                                 void *userdata);
DQ_EXTERN int dq_async_dead_requeue(dq_async *a, const char *queue,
                                    const char *id, int64_t delay_ms,
                                    dq_status_cb *cb, void *userdata);
DQ_EXTERN int dq_async_dead_purge(dq_async *a, const char *queue,
                                  const char *id, dq_status_cb *cb,
                                  void *userdata);
DQ_EXTERN int dq_async_stats(dq_async *a, const char *queue, dq_stats_cb *cb,
                             void *userdata);
/* As dq_count_due: the same checks (bounds_ms is read during the call
 * only); the counts come to cb. */
DQ_EXTERN int dq_async_count_due(dq_async *a, const char *queue,
                                 const int64_t *bounds_ms, int nbounds,
                                 dq_count_due_cb *cb, void *userdata);
/* As dq_group_stats: the same checks (nothing sent on bad input). */
DQ_EXTERN int dq_async_group_stats(dq_async *a, const char *queue, int max,
                                   dq_group_stats_cb *cb, void *userdata);
/* As dq_config_set and dq_config_get. */
DQ_EXTERN int dq_async_config_set(dq_async *a, const char *queue, size_t n,
                                  const int *settings, const int64_t *values,
                                  dq_config_cb *cb, void *userdata);
DQ_EXTERN int dq_async_config_get(dq_async *a, const char *queue, size_t n,
                                  const int *settings, dq_config_cb *cb,
                                  void *userdata);
DQ_EXTERN int dq_async_counters(dq_async *a, const char *queue,
                                dq_counters_cb *cb, void *userdata);
/* Twin of dq_get: status 1 found, 0 unknown, or a negative code. */
DQ_EXTERN int dq_async_get(dq_async *a, const char *queue, const char *id,
                           dq_get_cb *cb, void *userdata);
/* Twin of dq_list (read-only listing of one state, for paging). */
DQ_EXTERN int dq_async_list(dq_async *a, const char *queue, int which,
                            int64_t offset, int count, dq_list_cb *cb,
                            void *userdata);

/* ---- Consumer on the event loop ---------------------------------------- */

/* Called once when a graceful stop has finished: status is the number of
 * jobs released unfinished (>= 0).  The consumer may be freed inside. */
typedef void dq_stopped_cb(dq_consumer *c, int status, void *userdata);

/*
 * Creates a consumer of queue on client a (see delayq-consumer.h for the
 * handler contract and options; dq_consumer_add_queue adds more queues,
 * all waited on over the consumer's one wake-up connection - in a Redis
 * Cluster one per channel, since each lives on its slot's node).  It does
 * nothing until dq_consumer_start.
 * On failure *out is NULL.  Returns 0, DQ_ENULL, DQ_EQUEUE, DQ_ECLOSED or
 * DQ_ENOMEM.
 */
DQ_EXTERN int dq_consumer_new(dq_async *a, const char *queue,
                              dq_handler_fn *handler, void *userdata,
                              dq_consumer **out);

/*
 * Starts consuming: up to DQ_COPT_CONCURRENCY jobs run at once.  The
 * consumer waits as dq_poll_wait does: registered among the queue's waiting
 * consumers, it sleeps until the next job is due if it owns that event, else
 * until DQ_OPT_WAIT_CAP_MS, and is woken early through a second connection
 * subscribed to its own wake channel when a script has due work for it
 * (README, "Waking on time").  Consumers of one queue on one dq_async share
 * that registration (one consumer per client is the efficient setup).
 * Idle, it sends Redis at most two commands per DQ_OPT_WAIT_CAP_MS (one
 * poll, one subscriber check).
 * Returns 0, DQ_ENULL, DQ_EINVAL (already started, or a sync consumer) or
 * DQ_ENOMEM.
 */
DQ_EXTERN int dq_consumer_start(dq_consumer *c);

/*
 * Graceful stop: takes no new jobs, waits up to timeout_ms (0..
 * DQ_DELAY_MAX) for running handlers to finish, releases (nacks without
 * delay) the jobs whose handlers did not, then calls cb (may be NULL).  A
 * later dq_consumer_done for a released job returns DQ_ESTALE.  Returns 0,
 * DQ_ENULL, DQ_EDELAY, or DQ_EINVAL (not running, or already stopping).
 */
DQ_EXTERN int dq_consumer_stop(dq_consumer *c, int64_t timeout_ms,
                               dq_stopped_cb *cb, void *userdata);

/* Jobs handed to the handler and not finished yet. */
DQ_EXTERN size_t dq_consumer_running(const dq_consumer *c);

#ifdef __cplusplus
}
#endif
#endif /* DELAYQ_EVENT_H */
