/*
 * aconn.h - the async link (lib/aconn.c, used by lib/async.c): hiredis
 * async + its libevent adapter.  Compiled only with libevent.  A dq__aconn is
 * one non-blocking connection attached to a libevent base; it connects,
 * runs AUTH/SELECT/PING, then reports "ready" through its state callback.
 *
 * Callback rules (what lets the owner free things from inside callbacks):
 *  - state_fn is called at most once with DQ_OK (ready) and at most once
 *    with an error (the connection is dead: every command sent and not yet
 *    answered is lost, and reply_fn is never called for them).
 *  - reply_fn is called only with a real reply (error replies included),
 *    borrowed for the duration of the call.
 *  - After dq__aconn_close returns, no callback of that aconn is ever called
 *    again.  dq__aconn_close may be called from inside any of them.
 */
#ifndef DQ_ACONN_H
#define DQ_ACONN_H

#include "conn.h"

struct event_base;
typedef struct dq__aconn dq__aconn;

/* code: DQ_OK when ready, else DQ_EIO / DQ_EAUTH / DQ_EREDIS / ... */
typedef void dq__aconn_state_fn(void *priv, int code, const char *msg);
/* tag: the value given to dq__aconn_send_raw (e.g. a chunk number). */
typedef void dq__aconn_reply_fn(void *priv, size_t tag, const dq__reply *r);

/* Starts connecting (never blocks): a host name is first resolved with
 * cfg->dns (evdns), then the first IPv4 address (else the first) is
 * connected.  Fails at once only for DQ_ENOMEM, DQ_ENOTSUP (TLS without TLS
 * support), or DQ_EIO when the address is refused immediately (e.g. a
 * missing unix socket) or the name is known at once not to resolve;
 * otherwise every failure comes through state_fn. */
int dq__aconn_open(const dq__conn_cfg *cfg, struct event_base *base,
                  dq__aconn_state_fn *state_fn, void *priv, dq__aconn **out,
                  dq__err *err);
/* Queues one command already formatted as RESP (copied at once).  Only
 * after the ready callback.  DQ_OK, DQ_EIO (dead) or DQ_ENOMEM. */
int dq__aconn_send_raw(dq__aconn *a, const char *resp, size_t len,
                       dq__aconn_reply_fn *fn, void *priv, size_t tag,
                       dq__err *err);
/* SUBSCRIBE channel; fn then gets the "subscribe" confirmations and every
 * "message" (tag 0).  Calling it again for the same channel is a cheap
 * liveness check: Redis answers with another "subscribe" confirmation. */
int dq__aconn_subscribe(dq__aconn *a, const char *channel,
                       dq__aconn_reply_fn *fn, void *priv, dq__err *err);
/* The same for n channels in one SUBSCRIBE (one confirmation each). */
int dq__aconn_subscribe_many(dq__aconn *a, int n, char *const *channels,
                             dq__aconn_reply_fn *fn, void *priv,
                             dq__err *err);
/* SSUBSCRIBE channel (sharded pub/sub, in a cluster): fn gets its
 * confirmation, or its error (MOVED...), with tag 1.  hiredis knows no
 * sharded pub/sub, so the same channel is also SUBSCRIBEd as by
 * dq__aconn_subscribe: that registers fn for the channel's name, and
 * hiredis (0.14 and 1.x alike) then hands the pushed "smessage" and
 * "sunsubscribe" arrays to it (tag 0) instead of finding no callback for
 * them.  (In a cluster nothing PUBLISHes on it: the plain subscription
 * only ever brings its own confirmations.) */
int dq__aconn_ssubscribe(dq__aconn *a, const char *channel,
                        dq__aconn_reply_fn *fn, void *priv, dq__err *err);
/* 0 if the server closed the connection (a non-blocking peek at the
 * socket finds its end), else 1. */
int dq__aconn_alive(const dq__aconn *a);
/* 1 if host is an IPv4 or IPv6 literal (nothing to resolve). */
int dq__numeric_host(const char *host);
/* Closes and frees (NULL is a no-op); see the callback rules above. */
void dq__aconn_close(dq__aconn *a);

#endif
