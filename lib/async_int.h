/*
 * async_int.h - what the libevent consumer (aconsumer.c) needs from the
 * async client (async.c) beyond the public API.  Not installed.
 *
 * Re-entrancy: every entry from the event loop into async.c / aconsumer.c
 * (timers, replies, state changes) runs between dq__async_enter and
 * dq__async_leave.  Objects closed while that depth is > 0 are handed to
 * dq__async_bury and freed when the outermost entry returns, so code that
 * called a user callback can still look at its own (now inert) objects.
 */
#ifndef DQ_ASYNC_INT_H
#define DQ_ASYNC_INT_H

#include "delayq-event.h"
#include "internal.h"

struct event_base;

void dq__async_enter(dq_async *a);
/* Returns 1 if the client is being freed (callers then touch nothing). */
int dq__async_leave(dq_async *a);
/* 1 once dq_async_free started. */
int dq__async_closing(const dq_async *a);
/* Frees p with fn now (depth 0) or when the outermost entry returns. */
void dq__async_bury(dq_async *a, void (*fn)(void *), void *p);

struct event_base *dq__async_base(const dq_async *a);
const dq_options *dq__async_opts(const dq_async *a);

/* The client's own wake channel of queue (of its partition part; -1: the
 * plain queue), where scripts tell it when to poll (lua/include/wake.lua). */
void dq__async_wake_channel(dq_async *a, const char *queue, int part,
                           char *out, size_t size);
/* Partitions of every queue of the client (1: plain queues). */
int dq__async_partitions(const dq_async *a);
/* Every partition of queue may have due work (an idle cap passed). */
void dq__async_woken_all(dq_async *a, const char *queue);

/* Operations started while owner is set carry it; dq__async_forget(a,
 * owner) then completes them silently (their callbacks are dropped).  Used
 * by a consumer that is freed while its operations are outstanding. */
void dq__async_set_owner(dq_async *a, void *owner);
void dq__async_forget(dq_async *a, void *owner);

/* dq_async_poll whose callback gets next_due in microseconds (the
 * script's own figure, -1 for none) instead of rounded-up milliseconds,
 * and that on a partitioned queue visits only the partitions known to
 * have due work (the caller watches every partition's wake-ups, which mark
 * theirs). */
int dq__async_poll_us(dq_async *a, const char *queue, int max,
                     int64_t lease_ms, dq_jobs_cb *cb, void *userdata);

/* Children (consumers) freed by dq_async_free. */
typedef struct dq__child {
    struct dq__child *prev, *next; /* in the client's list */
    void (*release)(struct dq__child *); /* frees the child */
} dq__child;
void dq__async_adopt(dq_async *a, dq__child *ch);
void dq__async_disown(dq_async *a, dq__child *ch);

/* ---- For the wake-up watches (awake.c) ---- */
struct dq__routes;
struct dq__ahost;
struct dq__uri;
struct dq__core;
struct dq__routes *dq__async_routes(const dq_async *a);
const struct dq__ahost *dq__async_host(const dq_async *a);
const struct dq__uri *dq__async_uri(const dq_async *a);
struct dq__core *dq__async_core(dq_async *a);
/* The server of the URI, for messages. */
const char *dq__async_where(const dq_async *a);

/* ---- Watch: a subscription to one channel on its own connection, kept
 * alive with reconnects.  fn gets DQ_WATCH_READY each time the
 * subscription is (re)established - wake-ups may have been missed before -
 * and DQ_WATCH_WAKE for each message.  fn is always the last thing a watch
 * callback does, so it may close the watch. ---- */
enum { DQ_WATCH_READY = 1, DQ_WATCH_WAKE = 2 };
typedef struct dq__watch dq__watch;
typedef void dq__watch_fn(void *userdata, int event);
int dq__watch_open(dq_async *a, const char *channel, dq__watch_fn *fn,
                  void *userdata, dq__watch **out);
/* One watch over n channels (1..) on one connection: for plain pub/sub
 * only (not sharded, where each channel lives on its slot's node).  fn
 * gets DQ_WATCH_READY at the first confirmation of each subscription. */
int dq__watch_open_many(dq_async *a, int n, const char *const *channels,
                        dq__watch_fn *fn, void *userdata, dq__watch **out);
/* 1 when wake-ups go over sharded pub/sub (a cluster): one watch per
 * channel then. */
int dq__async_sharded(const dq_async *a);
/* dq__multi_pick (ops.h) on the client's state. */
int dq__async_pick(dq_async *a, size_t n, const char *const *queues,
                   const int *weights, int mode, const unsigned char *skip,
                   int64_t *wait_us);
/* In a cluster (sharded wake-ups) the watch subscribes with SSUBSCRIBE on
 * the node that owns the channel's slot and moves with it (a "sunsubscribe"
 * from the server, a failover); with Sentinel it follows the primary.
 * Liveness check (a repeated SUBSCRIBE); a silent server makes the watch
 * drop and reconnect after the command timeout. */
void dq__watch_check(dq__watch *w);
/* 1 while subscribed. */
int dq__watch_ready(const dq__watch *w);
void dq__watch_close(dq__watch *w);
/* The client's list of watches (awake.c keeps it). */
dq__watch **dq__async_watches(dq_async *a);
/* What to run with the list of watches after each change of the routes:
 * awake.c hands its follower in when it opens a watch, so the driver
 * calls nothing of awake.c by name (awake.c is above none of it). */
typedef void dq__watch_follow_fn(dq__watch *list);
void dq__async_on_routes(dq_async *a, dq__watch_follow_fn *fn);

#endif
