/*
 * conn.h - the blocking link to one Redis node (conn.c), and what both
 * links share: the opening AUTH/SELECT/PING and TLS.
 *
 * Everything that differs between hiredis 0.14 and 1.x (connect options,
 * timeouts, TLS) is handled in conn.c; the rest of the library sees only
 * these functions and the reply view (reply.h).  A dq__conn is one
 * connection to one node; a cluster or Sentinel route holds several.
 */
#ifndef DQ_CONN_H
#define DQ_CONN_H

#include "internal.h"
#include "reply.h"
#include "uri.h"

/* What a connection needs: the parsed URI and the client's options. */
struct evdns_base;
typedef struct dq__conn_cfg {
    const dq__uri *uri;      /* where and as whom */
    const dq_options *opts; /* timeouts, credential overrides, TLS files */
    struct evdns_base *dns;  /* async links: resolves host names without
                                blocking the loop (NULL: numeric or unix) */
} dq__conn_cfg;

typedef struct dq__conn dq__conn;

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
/* Writes every queued command out (blocking up to the command timeout),
 * so several links can carry a pipeline at once before any is read. */
int dq__conn_flush(dq__conn *c, dq__err *err);
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
/* The same over n connections: 1 with *which set to one that got data,
 * 0 on timeout, a negative code (*which: the link that failed). */
int dq__conn_wait_any(dq__conn *const *cs, int n, int64_t timeout_us,
                      int *which, dq__err *err);
/* Marks the connection unusable (replies it still owes would be read by
 * the wrong call): its owner opens a new one. */
void dq__conn_break(dq__conn *c);
/* 1 once an I/O error or timeout left the connection unusable. */
int dq__conn_broken(const dq__conn *c);


/* 1 if the library was built with TLS support (hiredis >= 1.0 + ssl). */
int dq__conn_tls_supported(void);

/* ---- Opening a link (used by conn.c and aconn.c) ---- */

/* The commands that open every connection, sync or async: AUTH (the Redis
 * 6 ACL form when a user is given), SELECT when the database is not 0, and
 * PING when ping is set.  One builder, so both links say the same thing. */
typedef struct dq__hello {
    int n;                  /* commands */
    int argc[3];
    const char *argv[3][3];
    const char *what[3];    /* "AUTH", "SELECT", "PING" for messages */
    char db[16];
} dq__hello;
void dq__hello_build(dq__hello *h, const char *user, const char *pass,
                     int db, int ping);

/* TLS, the same for both links (hiredis version switches stay in conn.c):
 * whether the URI or the options ask for it; DQ_ENOTSUP when a build
 * without TLS is asked for it; the handshake over a connected hiredis
 * context (*tls_ctx receives what dq__tls_ctx_free frees after the
 * context). */
struct redisContext;
int dq__tls_wanted(const dq_options *o, const dq__uri *u);
int dq__tls_check(const dq_options *o, const dq__uri *u, dq__err *err);
int dq__tls_attach(struct redisContext *ctx, const dq_options *o,
                   const dq__uri *u, void **tls_ctx, dq__err *err);
void dq__tls_ctx_free(void *tls_ctx);

#endif
