/*
 * conn.h - the one unit that talks to hiredis.
 *
 * Everything that differs between hiredis 0.14 and 1.x (connect options,
 * timeouts, TLS) is handled in conn.c; the rest of the library sees only
 * these functions and the opaque dq_reply.  A dq_conn is one connection to
 * one node; a future cluster/sentinel layer holds several of them.
 */
#ifndef DQ_CONN_H
#define DQ_CONN_H

#include "internal.h"
#include "uri.h"

/* What a connection needs: the parsed URI and the client's options. */
typedef struct dq_conn_cfg {
    const dq_uri *uri;      /* where and as whom */
    const dq_options *opts; /* timeouts, credential overrides, TLS files */
} dq_conn_cfg;

typedef struct dq_conn dq_conn;
typedef struct dq_reply dq_reply; /* a reply; only accessors below */

enum dq_reply_type {
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
int dq_conn_open(const dq_conn_cfg *cfg, dq_conn **out, dq_err *err);
/* Closes and frees (NULL is a no-op). */
void dq_conn_free(dq_conn *c);

/* Sends one command and reads its reply.  Returns DQ_OK with *reply set
 * (error replies included: check dq_reply_type), or DQ_EIO/DQ_ETIMEDOUT/
 * DQ_ENOMEM with err set; after such an error the connection is broken. */
int dq_conn_call(dq_conn *c, int argc, const char **argv, const size_t *lens,
                 dq_reply **reply, dq_err *err);
/* Queues a command in the output buffer (pipelining); DQ_OK or DQ_ENOMEM. */
int dq_conn_append(dq_conn *c, int argc, const char **argv,
                   const size_t *lens, dq_err *err);
/* Flushes queued commands if needed and reads the next reply (blocking up to
 * the command timeout). */
int dq_conn_read(dq_conn *c, dq_reply **reply, dq_err *err);
/* Returns 1 and sets *reply if a complete reply is already buffered, 0 if
 * not, a negative code on a protocol error.  Never blocks. */
int dq_conn_buffered(dq_conn *c, dq_reply **reply, dq_err *err);
/* Waits up to timeout_us (>= 0, microseconds) for the socket to become
 * readable and reads what arrived into the buffer.  Returns 1 if data
 * arrived, 0 on timeout, a negative code if the connection failed. */
int dq_conn_wait_readable(dq_conn *c, int64_t timeout_us, dq_err *err);
/* 1 once an I/O error or timeout left the connection unusable. */
int dq_conn_broken(const dq_conn *c);

/* Maps an error reply's text to a code and sets err with Redis's message:
 * DQ_EOOM for OOM, DQ_EAUTH for NOAUTH/WRONGPASS (bad or missing
 * credentials), else DQ_EREDIS (NOPERM included: the credentials were fine,
 * the ACL forbids this key or command; Redis's text says which). */
int dq_reply_error(const dq_reply *r, const char *what, dq_err *err);
/* 1 if r is an error reply starting with prefix (e.g. "NOSCRIPT"). */
int dq_reply_is_error(const dq_reply *r, const char *prefix);

int dq_reply_type(const dq_reply *r);
long long dq_reply_int(const dq_reply *r);
/* String of a STRING/STATUS/ERROR reply; *len receives its length. */
const char *dq_reply_str(const dq_reply *r, size_t *len);
size_t dq_reply_len(const dq_reply *r);                  /* array length */
const dq_reply *dq_reply_at(const dq_reply *r, size_t i); /* array element */
void dq_reply_free(dq_reply *r);                         /* NULL is no-op */

/* 1 if the library was built with TLS support (hiredis >= 1.0 + ssl). */
int dq_conn_tls_supported(void);

/* ======================================================================
 * Async section (lib/async.c): hiredis async + its libevent
 * adapter.  Compiled only with libevent (DQ_HAVE_LIBEVENT).  A dq_aconn is
 * one non-blocking connection attached to a libevent base; it connects,
 * runs AUTH/SELECT/PING, then reports "ready" through its state callback.
 *
 * Callback rules (what lets the owner free things from inside callbacks):
 *  - state_fn is called at most once with DQ_OK (ready) and at most once
 *    with an error (the connection is dead: every command sent and not yet
 *    answered is lost, and reply_fn is never called for them).
 *  - reply_fn is called only with a real reply (error replies included),
 *    borrowed for the duration of the call.
 *  - After dq_aconn_close returns, no callback of that aconn is ever called
 *    again.  dq_aconn_close may be called from inside any of them.
 * ====================================================================== */
struct event_base;
typedef struct dq_aconn dq_aconn;

/* code: DQ_OK when ready, else DQ_EIO / DQ_EAUTH / DQ_EREDIS / ... */
typedef void dq_aconn_state_fn(void *priv, int code, const char *msg);
/* tag: the value given to dq_aconn_send (e.g. a chunk number). */
typedef void dq_aconn_reply_fn(void *priv, size_t tag, const dq_reply *r);

/* Starts connecting (never blocks).  Fails at once only for DQ_ENOMEM,
 * DQ_ENOTSUP (TLS without TLS support), or DQ_EIO when the address is
 * refused immediately (e.g. a missing unix socket). */
int dq_aconn_open(const dq_conn_cfg *cfg, struct event_base *base,
                  dq_aconn_state_fn *state_fn, void *priv, dq_aconn **out,
                  dq_err *err);
/* Queues one command (copied at once: argv may be freed on return).
 * Only after the ready callback.  DQ_OK, DQ_EIO (dead) or DQ_ENOMEM. */
int dq_aconn_send(dq_aconn *a, int argc, const char **argv,
                  const size_t *lens, dq_aconn_reply_fn *fn, void *priv,
                  size_t tag, dq_err *err);
/* SUBSCRIBE channel; fn then gets the "subscribe" confirmations and every
 * "message" (tag 0).  Calling it again for the same channel is a cheap
 * liveness check: Redis answers with another "subscribe" confirmation. */
int dq_aconn_subscribe(dq_aconn *a, const char *channel,
                       dq_aconn_reply_fn *fn, void *priv, dq_err *err);
/* Closes and frees (NULL is a no-op); see the callback rules above. */
void dq_aconn_close(dq_aconn *a);

#endif
