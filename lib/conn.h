/*
 * conn.h - the one unit that talks to hiredis.
 *
 * Everything that differs between hiredis 0.14 and 1.x (connect options,
 * timeouts, TLS) is handled in conn.c; the rest of the library sees only
 * these functions and the opaque dq__reply.  A dq__conn is one connection to
 * one node; a future cluster/sentinel layer holds several of them.
 */
#ifndef DQ_CONN_H
#define DQ_CONN_H

#include "internal.h"
#include "uri.h"

/* What a connection needs: the parsed URI and the client's options. */
typedef struct dq__conn_cfg {
    const dq__uri *uri;      /* where and as whom */
    const dq_options *opts; /* timeouts, credential overrides, TLS files */
} dq__conn_cfg;

typedef struct dq__conn dq__conn;
typedef struct dq__reply dq__reply; /* a reply; only accessors below */

enum dq__reply_type {
    DQ_R_OTHER = 0,
    DQ_R_STRING,  /* bulk string */
    DQ_R_ARRAY,
    DQ_R_INTEGER,
    DQ_R_NIL,
    DQ_R_STATUS,
    DQ_R_ERROR
};

/* Connects, then AUTH and SELECT as the URI/options say.  On success *out
 * is the connection; on failure *out is NULL and err says why (DQ_EIO,
 * DQ_ETIMEDOUT, DQ_EAUTH, DQ_EREDIS, DQ_ENOTSUP, DQ_ENOMEM). */
int dq__conn_open(const dq__conn_cfg *cfg, dq__conn **out, dq__err *err);
/* Closes and frees (NULL is a no-op). */
void dq__conn_free(dq__conn *c);

/* Sends one command and reads its reply.  Returns DQ_OK with *reply set
 * (error replies included: check dq__reply_type), or DQ_EIO/DQ_ETIMEDOUT/
 * DQ_ENOMEM with err set; after such an error the connection is broken. */
int dq__conn_call(dq__conn *c, int argc, const char **argv, const size_t *lens,
                 dq__reply **reply, dq__err *err);
/* Queues a command in the output buffer (pipelining); DQ_OK or DQ_ENOMEM. */
int dq__conn_append(dq__conn *c, int argc, const char **argv,
                   const size_t *lens, dq__err *err);
/* Queues a command already formatted as RESP (hiredis copies it). */
int dq__conn_append_raw(dq__conn *c, const char *resp, size_t len,
                        dq__err *err);
/* Flushes queued commands if needed and reads the next reply (blocking up to
 * the command timeout). */
int dq__conn_read(dq__conn *c, dq__reply **reply, dq__err *err);
/* Returns 1 and sets *reply if a complete reply is already buffered, 0 if
 * not, a negative code on a protocol error.  Never blocks. */
int dq__conn_buffered(dq__conn *c, dq__reply **reply, dq__err *err);
/* Waits up to timeout_us (>= 0, microseconds) for the socket to become
 * readable and reads what arrived into the buffer.  Returns 1 if data
 * arrived, 0 on timeout, a negative code if the connection failed. */
int dq__conn_wait_readable(dq__conn *c, int64_t timeout_us, dq__err *err);
/* 1 once an I/O error or timeout left the connection unusable. */
int dq__conn_broken(const dq__conn *c);

/* Maps an error reply's text to a code and sets err with Redis's message:
 * DQ_EOOM for OOM, DQ_EAUTH for NOAUTH/WRONGPASS (bad or missing
 * credentials), else DQ_EREDIS (NOPERM included: the credentials were fine,
 * the ACL forbids this key or command; Redis's text says which). */
int dq__reply_error(const dq__reply *r, const char *what, dq__err *err);
/* 1 if r is an error reply starting with prefix (e.g. "NOSCRIPT"). */
int dq__reply_is_error(const dq__reply *r, const char *prefix);

int dq__reply_type(const dq__reply *r);
long long dq__reply_int(const dq__reply *r);
/* String of a STRING/STATUS/ERROR reply; *len receives its length. */
const char *dq__reply_str(const dq__reply *r, size_t *len);
size_t dq__reply_len(const dq__reply *r);                  /* array length */
const dq__reply *dq__reply_at(const dq__reply *r, size_t i); /* array element */
void dq__reply_free(dq__reply *r);                         /* NULL is no-op */

/* 1 if the library was built with TLS support (hiredis >= 1.0 + ssl). */
int dq__conn_tls_supported(void);

/* ======================================================================
 * Async section (lib/async.c): hiredis async + its libevent
 * adapter.  Compiled only with libevent (DQ_HAVE_LIBEVENT).  A dq__aconn is
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
 * ====================================================================== */
struct event_base;
typedef struct dq__aconn dq__aconn;

/* code: DQ_OK when ready, else DQ_EIO / DQ_EAUTH / DQ_EREDIS / ... */
typedef void dq__aconn_state_fn(void *priv, int code, const char *msg);
/* tag: the value given to dq__aconn_send_raw (e.g. a chunk number). */
typedef void dq__aconn_reply_fn(void *priv, size_t tag, const dq__reply *r);

/* Starts connecting (never blocks).  Fails at once only for DQ_ENOMEM,
 * DQ_ENOTSUP (TLS without TLS support), or DQ_EIO when the address is
 * refused immediately (e.g. a missing unix socket). */
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
/* Closes and frees (NULL is a no-op); see the callback rules above. */
void dq__aconn_close(dq__aconn *a);

#endif
