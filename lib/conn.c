/*
 * conn.c - the one unit that includes hiredis (sync side).
 *
 * hiredis 0.14 (Debian 12) and 1.x differ in how connections are opened
 * (options struct, TLS through hiredis_ssl) and in how a read timeout is
 * reported (1.x: REDIS_ERR_TIMEOUT; 0.14: REDIS_ERR_IO with EAGAIN).  All of
 * that is decided here, behind #if HIREDIS_MAJOR >= 1.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
#include <arpa/inet.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#endif

#include "conn.h"
#include "resp.h"

struct dq__conn {
    redisContext *ctx; /* the hiredis connection */
    int broken;        /* set after an I/O error or timeout */
    char *fmt;         /* reusable buffer for formatting commands */
    size_t fmt_cap;    /* bytes allocated in fmt */
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    SSL_CTX *ssl_ctx;     /* TLS context, outlives ctx */
#endif
};

static struct timeval tv_ms(int64_t ms) {
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

int dq__conn_tls_supported(void) {
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    return 1;
#else
    return 0;
#endif
}

/* Maps a failed hiredis context to a code; errno_saved is errno right after
 * the failing call. */
static int ctx_error(redisContext *ctx, int errno_saved, const char *what,
                     dq__err *err) {
    int code = DQ_EIO;
#ifdef REDIS_ERR_TIMEOUT
    if (ctx->err == REDIS_ERR_TIMEOUT)
        code = DQ_ETIMEDOUT;
#endif
    if (ctx->err == REDIS_ERR_IO &&
        (errno_saved == EAGAIN || errno_saved == EWOULDBLOCK ||
         errno_saved == ETIMEDOUT || errno_saved == EINPROGRESS))
        code = DQ_ETIMEDOUT;
    if (ctx->err == REDIS_ERR_OOM)
        code = DQ_ENOMEM;
    if (ctx->err == REDIS_ERR_PROTOCOL)
        code = DQ_EPROTO;
    return dq__err_set(err, code, "%s: %s", what,
                      ctx->errstr[0] ? ctx->errstr : dq_strerror(code));
}

int dq__reply_is_error(const dq__reply *r, const char *prefix) {
    const redisReply *rr = (const redisReply *)r;
    size_t n = strlen(prefix);
    return rr != NULL && rr->type == REDIS_REPLY_ERROR && rr->len >= n &&
           memcmp(rr->str, prefix, n) == 0;
}

int dq__reply_error(const dq__reply *r, const char *what, dq__err *err) {
    const redisReply *rr = (const redisReply *)r;
    int code = DQ_EREDIS;
    if (dq__reply_is_error(r, "OOM"))
        code = DQ_EOOM;
    else if (dq__reply_is_error(r, "NOAUTH") ||
             dq__reply_is_error(r, "WRONGPASS") ||
             dq__reply_is_error(r, "ERR invalid password") ||
             dq__reply_is_error(r, "ERR invalid username-password") ||
             dq__reply_is_error(r, "ERR AUTH"))
        code = DQ_EAUTH;
    return dq__err_set(err, code, "%s: Redis error: %.*s", what,
                      (int)(rr->len > 400 ? 400 : rr->len), rr->str);
}

/* Runs one setup command (AUTH, SELECT) and checks for an error reply. */
static int setup_cmd(dq__conn *c, int argc, const char **argv, const char *what,
                     dq__err *err) {
    dq__reply *r;
    int rc = dq__conn_call(c, argc, argv, NULL, &r, err);
    if (rc != DQ_OK)
        return rc;
    if (dq__reply_type(r) == DQ_R_ERROR)
        rc = dq__reply_error(r, what, err);
    dq__reply_free(r);
    return rc;
}

/* The commands that open every connection, sync or async: AUTH (the Redis
 * 6 ACL form when a user is given), SELECT when the database is not 0, and
 * optionally PING.  One builder, so both links say the same thing. */
typedef struct hello {
    int n;                  /* commands */
    int argc[3];
    const char *argv[3][3];
    const char *what[3];    /* "AUTH", "SELECT", "PING" for messages */
    char db[16];
} hello;

static void hello_build(hello *h, const char *user, const char *pass, int db,
                        int ping) {
    h->n = 0;
    if (pass != NULL || user != NULL) {
        int i = h->n++;
        h->what[i] = h->argv[i][0] = "AUTH";
        h->argv[i][1] = user != NULL ? user : pass;
        h->argv[i][2] = pass != NULL ? pass : "";
        h->argc[i] = user != NULL ? 3 : 2;
    }
    if (db != 0) {
        int i = h->n++;
        snprintf(h->db, sizeof(h->db), "%d", db);
        h->what[i] = h->argv[i][0] = "SELECT";
        h->argv[i][1] = h->db;
        h->argc[i] = 2;
    }
    if (ping) {
        int i = h->n++;
        h->what[i] = h->argv[i][0] = "PING";
        h->argc[i] = 1;
    }
}

#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
static pthread_once_t ssl_once = PTHREAD_ONCE_INIT;
static void ssl_init(void) { redisInitOpenSSL(); }

/* Sets err from OpenSSL's error queue: "TLS setup: what arg: reason". */
static int tls_fail(dq__err *err, const char *what, const char *arg) {
    char buf[256] = "unknown error";
    unsigned long e = ERR_peek_last_error();
    if (e != 0)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    return dq__err_set(err, DQ_EIO, "TLS setup: %s%s%s: %s", what,
                      arg ? " " : "", arg ? arg : "", buf);
}

/*
 * Makes the SSL object of one connection.  Not redisCreateSSLContext: that
 * verifies the server's certificate chain but not its NAME (hiredis only
 * sends the name as SNI), so any certificate the CA ever signed, for any
 * host, would be accepted.  Here the name the client connects to (the URI's
 * host, or DQ_OPT_TLS_SERVER_NAME) must match the certificate's SAN/CN: as
 * a DNS name, or as an IP address for an IP literal.  *ctx_out receives the
 * SSL_CTX, to free after the connection.  NULL with err set on failure.
 */
static SSL *tls_new(const dq_options *o, const dq__uri *u, SSL_CTX **ctx_out,
                    dq__err *err) {
    pthread_once(&ssl_once, ssl_init);
    *ctx_out = NULL;
    SSL *ssl = NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        tls_fail(err, "SSL_CTX_new", NULL);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if ((o->tls_ca ? SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL)
                   : SSL_CTX_set_default_verify_paths(ctx)) != 1) {
        tls_fail(err, "cannot load the CA file", o->tls_ca);
        goto fail;
    }
    if (o->tls_cert &&
        SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1) {
        tls_fail(err, "cannot load the client certificate", o->tls_cert);
        goto fail;
    }
    if (o->tls_key &&
        SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1) {
        tls_fail(err, "cannot load the client key", o->tls_key);
        goto fail;
    }
    if ((ssl = SSL_new(ctx)) == NULL) {
        tls_fail(err, "SSL_new", NULL);
        goto fail;
    }
    const char *name = o->tls_sni ? o->tls_sni
                                  : (u->kind == DQ_URI_TCP ? u->host : NULL);
    if (name != NULL) {
        unsigned char addr[16];
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        int ip = inet_pton(AF_INET, name, addr) == 1 ||
                 inet_pton(AF_INET6, name, addr) == 1;
        /* An IP literal is checked against the certificate's IP SANs and
         * never sent as SNI (RFC 6066). */
        if (ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name) != 1
               : (SSL_set_tlsext_host_name(ssl, name) != 1 ||
                  X509_VERIFY_PARAM_set1_host(vp, name, 0) != 1)) {
            tls_fail(err, "cannot set the server name", name);
            goto fail;
        }
    }
    *ctx_out = ctx;
    return ssl;
fail:
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return NULL;
}

static int tls_start(dq__conn *c, const dq_options *o, const dq__uri *u,
                     dq__err *err) {
    SSL *ssl = tls_new(o, u, &c->ssl_ctx, err);
    if (ssl == NULL)
        return err->code;
    if (redisInitiateSSL(c->ctx, ssl) != REDIS_OK) {
        /* Not taken over by hiredis on failure: still ours. */
        long v = SSL_get_verify_result(ssl);
        SSL_free(ssl);
        return dq__err_set(err, DQ_EIO, "TLS handshake failed: %s%s%s%s",
                          c->ctx->errstr[0] ? c->ctx->errstr : "unknown",
                          v != X509_V_OK ? " (" : "",
                          v != X509_V_OK ? X509_verify_cert_error_string(v)
                                         : "",
                          v != X509_V_OK ? ")" : "");
    }
    return DQ_OK;
}
#endif

static int want_tls(const dq_options *o, const dq__uri *u) {
    return u->tls || o->tls_ca || o->tls_cert || o->tls_key || o->tls_sni;
}

/* DQ_ENOTSUP when TLS is asked of a build without it, else DQ_OK. */
static int check_tls(const dq_options *o, const dq__uri *u, dq__err *err) {
    if (want_tls(o, u) && !dq__conn_tls_supported())
        return dq__err_set(err, DQ_ENOTSUP,
                          "TLS requested but this libdelayq was built "
                          "without TLS (needs hiredis >= 1.0 with "
                          "hiredis_ssl and -Dtls=enabled)");
    return DQ_OK;
}

int dq__conn_open(const dq__conn_cfg *cfg, dq__conn **out, dq__err *err) {
    const dq__uri *u = cfg->uri;
    const dq_options *o = cfg->opts;
    *out = NULL;
    int tls_rc = check_tls(o, u, err);
    if (tls_rc != DQ_OK)
        return tls_rc;
    dq__conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    struct timeval ct = tv_ms(o->connect_timeout_ms);
#if HIREDIS_MAJOR >= 1
    redisOptions ro;
    memset(&ro, 0, sizeof(ro));
    if (u->kind == DQ_URI_UNIX)
        REDIS_OPTIONS_SET_UNIX(&ro, u->path);
    else
        REDIS_OPTIONS_SET_TCP(&ro, u->host, u->port);
    if (o->connect_timeout_ms > 0)
        ro.connect_timeout = &ct;
    c->ctx = redisConnectWithOptions(&ro);
#else
    if (u->kind == DQ_URI_UNIX)
        c->ctx = o->connect_timeout_ms > 0
                     ? redisConnectUnixWithTimeout(u->path, ct)
                     : redisConnectUnix(u->path);
    else
        c->ctx = o->connect_timeout_ms > 0
                     ? redisConnectWithTimeout(u->host, u->port, ct)
                     : redisConnect(u->host, u->port);
#endif
    int saved = errno;
    int rc = DQ_OK;
    if (c->ctx == NULL) {
        rc = dq__err_set(err, DQ_ENOMEM, "out of memory connecting");
        goto fail;
    }
    if (c->ctx->err) {
        char where[300];
        if (u->kind == DQ_URI_UNIX)
            snprintf(where, sizeof(where), "connect to unix:%s", u->path);
        else
            snprintf(where, sizeof(where), "connect to %s:%d", u->host,
                     u->port);
        rc = ctx_error(c->ctx, saved, where, err);
        goto fail;
    }
    if (o->command_timeout_ms > 0 &&
        redisSetTimeout(c->ctx, tv_ms(o->command_timeout_ms)) != REDIS_OK) {
        rc = ctx_error(c->ctx, errno, "set command timeout", err);
        goto fail;
    }
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    if (want_tls(o, u) && (rc = tls_start(c, o, u, err)) != DQ_OK)
        goto fail;
#endif
    hello h;
    hello_build(&h, o->user ? o->user : u->user,
                o->password ? o->password : u->password, u->db, 0);
    for (int i = 0; i < h.n; i++)
        if ((rc = setup_cmd(c, h.argc[i], h.argv[i], h.what[i], err)) !=
            DQ_OK)
            goto fail;
    *out = c;
    return DQ_OK;
fail:
    dq__conn_free(c);
    return rc;
}

void dq__conn_free(dq__conn *c) {
    if (c == NULL)
        return;
    if (c->ctx != NULL)
        redisFree(c->ctx);
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    SSL_CTX_free(c->ssl_ctx); /* after redisFree: the SSL object is gone */
#endif
    free(c->fmt);
    free(c);
}

int dq__conn_broken(const dq__conn *c) { return c == NULL || c->broken; }

static int conn_fail(dq__conn *c, int saved, const char *what, dq__err *err) {
    c->broken = 1;
    return ctx_error(c->ctx, saved, what, err);
}

/* Formats the command as RESP in one pass (resp.c) into a buffer kept on
 * the connection, and hands hiredis the finished text. */
int dq__conn_append(dq__conn *c, int argc, const char **argv,
                   const size_t *lens, dq__err *err) {
    size_t total = dq__resp_size(argc, argv, lens);
    if (total > c->fmt_cap) {
        char *nb = realloc(c->fmt, total);
        if (nb == NULL)
            return dq__err_set(err, DQ_ENOMEM, "out of memory formatting a "
                                              "command of %zu bytes", total);
        c->fmt = nb;
        c->fmt_cap = total;
    }
    dq__resp_put(c->fmt, argc, argv, lens);
    return dq__conn_append_raw(c, c->fmt, total, err);
}

int dq__conn_append_raw(dq__conn *c, const char *resp, size_t len,
                        dq__err *err) {
    int rc = redisAppendFormattedCommand(c->ctx, resp, len);
    if (c->fmt_cap > 1024 * 1024) {
        /* A big command: do not keep its buffer for the client's life. */
        free(c->fmt);
        c->fmt = NULL;
        c->fmt_cap = 0;
    }
    if (rc != REDIS_OK)
        return conn_fail(c, errno, "queue command", err);
    return DQ_OK;
}

int dq__conn_read(dq__conn *c, dq__reply **reply, dq__err *err) {
    void *r = NULL;
    *reply = NULL;
    if (redisGetReply(c->ctx, &r) != REDIS_OK || r == NULL)
        return conn_fail(c, errno, "read reply", err);
    *reply = r;
    return DQ_OK;
}

int dq__conn_call(dq__conn *c, int argc, const char **argv, const size_t *lens,
                 dq__reply **reply, dq__err *err) {
    int rc = dq__conn_append(c, argc, argv, lens, err);
    return rc != DQ_OK ? rc : dq__conn_read(c, reply, err);
}

int dq__conn_buffered(dq__conn *c, dq__reply **reply, dq__err *err) {
    void *r = NULL;
    *reply = NULL;
    if (redisReaderGetReply(c->ctx->reader, &r) != REDIS_OK) {
        c->broken = 1;
        return dq__err_set(err, DQ_EPROTO, "protocol error: %s",
                          c->ctx->reader->errstr);
    }
    if (r == NULL)
        return 0;
    *reply = r;
    return 1;
}

int dq__conn_wait_readable(dq__conn *c, int64_t timeout_us, dq__err *err) {
    struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN, .revents = 0};
    if (timeout_us > INT64_C(86400000000))
        timeout_us = INT64_C(86400000000);
    /* ppoll sleeps in nanoseconds: a wait for a job due in 2.3 ms is not
     * rounded up to 3 ms as poll()'s milliseconds would. */
    int64_t deadline = dq__mono_us() + timeout_us;
    int n;
    for (;;) {
        int64_t left = deadline - dq__mono_us();
        if (left < 0)
            left = 0;
        struct timespec ts = {(time_t)(left / 1000000),
                              (long)(left % 1000000) * 1000};
        n = ppoll(&p, 1, &ts, NULL);
        if (n >= 0 || errno != EINTR)
            break;
    }
    if (n < 0) {
        c->broken = 1;
        return dq__err_set(err, DQ_EIO, "poll: %s", strerror(errno));
    }
    if (n == 0)
        return 0;
    if (redisBufferRead(c->ctx) != REDIS_OK)
        return conn_fail(c, errno, "read", err);
    return 1;
}

int dq__reply_type(const dq__reply *r) {
    switch (((const redisReply *)r)->type) {
    case REDIS_REPLY_STRING:
        return DQ_R_STRING;
    case REDIS_REPLY_ARRAY:
        return DQ_R_ARRAY;
    case REDIS_REPLY_INTEGER:
        return DQ_R_INTEGER;
    case REDIS_REPLY_NIL:
        return DQ_R_NIL;
    case REDIS_REPLY_STATUS:
        return DQ_R_STATUS;
    case REDIS_REPLY_ERROR:
        return DQ_R_ERROR;
    default:
        return DQ_R_OTHER;
    }
}

long long dq__reply_int(const dq__reply *r) {
    return ((const redisReply *)r)->integer;
}

const char *dq__reply_str(const dq__reply *r, size_t *len) {
    const redisReply *rr = (const redisReply *)r;
    *len = rr->str ? (size_t)rr->len : 0;
    return rr->str ? rr->str : "";
}

size_t dq__reply_len(const dq__reply *r) {
    const redisReply *rr = (const redisReply *)r;
    return rr->type == REDIS_REPLY_ARRAY ? rr->elements : 0;
}

const dq__reply *dq__reply_at(const dq__reply *r, size_t i) {
    const redisReply *rr = (const redisReply *)r;
    return (const dq__reply *)rr->element[i];
}

void dq__reply_free(dq__reply *r) {
    if (r != NULL)
        freeReplyObject(r);
}

/* ======================================================================
 * Async section: hiredis async on libevent, used by lib/async.c
 * through the dq__aconn functions of conn.h.
 *
 * Lifetime.  hiredis frees an async context itself when the connection
 * fails, and defers redisAsyncFree() called from inside a reply callback
 * until that callback returns; while it tears a context down it calls every
 * pending reply callback with a NULL reply and then (only if the context was
 * connected) the disconnect callback.  So a dq__aconn holds two references:
 * its owner's (dropped by dq__aconn_close) and the hiredis context's
 * (dropped when hiredis can no longer call us: in the disconnect callback,
 * in a failed connect callback, or right after a synchronous free of a
 * context that never connected).  It is freed when both are gone and no
 * callback of ours is running (depth).  Nothing is sent before the connect
 * callback reported success, so a failed connect has no pending callbacks.
 *
 * hiredis 0.14 vs 1.x: both reset REDIS_CONNECTED in redisAsyncInitialize
 * and call the connect callback on the first write event (unix sockets
 * too); 1.x also has connect/command timeouts (redisAsyncSetTimeout), which
 * we do not use so that both behave alike (async.c keeps its own timers).
 * TLS needs hiredis >= 1.0.  Health checks on the subscriber use a repeated
 * SUBSCRIBE rather than PING: hiredis 0.14 drops the callback of a PING
 * sent in subscribed mode.
 * ====================================================================== */
#ifdef DQ_HAVE_LIBEVENT
#include <event2/event.h>
#include <hiredis/async.h>

#include "sigpipe.h"

/* The libevent hooks (what hiredis's adapters/libevent.h does, in the
 * 0.14 style that works on both versions), plus a SIGPIPE guard around
 * writes: hiredis writes with write(2) from inside these events, and a
 * write to a connection Redis closed must fail with EPIPE instead of
 * killing the process (see sigpipe.h). */
typedef struct aconn_ev {
    redisAsyncContext *ac; /* its context */
    struct event *rev;     /* readable */
    struct event *wev;     /* writable */
} aconn_ev;

static void aev_read(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    aconn_ev *e = arg;
    redisAsyncHandleRead(e->ac);
}

static void aev_write(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    aconn_ev *e = arg;
    dq__sigpipe g;
    dq__sigpipe_block(&g);
    redisAsyncHandleWrite(e->ac); /* may free e */
    dq__sigpipe_restore(&g);
}

static void aev_add_read(void *p) { event_add(((aconn_ev *)p)->rev, NULL); }
static void aev_del_read(void *p) { event_del(((aconn_ev *)p)->rev); }
static void aev_add_write(void *p) { event_add(((aconn_ev *)p)->wev, NULL); }
static void aev_del_write(void *p) { event_del(((aconn_ev *)p)->wev); }

static void aev_cleanup(void *p) {
    aconn_ev *e = p;
    e->ac->ev.cleanup = NULL; /* hiredis 0.14 may call cleanup twice */
    e->ac->ev.data = NULL;
    event_free(e->rev);
    event_free(e->wev);
    free(e);
}

static int aev_attach(redisAsyncContext *ac, struct event_base *base) {
    aconn_ev *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return -1;
    e->ac = ac;
    e->rev = event_new(base, ac->c.fd, EV_READ | EV_PERSIST, aev_read, e);
    e->wev = event_new(base, ac->c.fd, EV_WRITE | EV_PERSIST, aev_write, e);
    if (e->rev == NULL || e->wev == NULL) {
        if (e->rev != NULL)
            event_free(e->rev);
        if (e->wev != NULL)
            event_free(e->wev);
        free(e);
        return -1;
    }
    ac->ev.data = e;
    ac->ev.addRead = aev_add_read;
    ac->ev.delRead = aev_del_read;
    ac->ev.addWrite = aev_add_write;
    ac->ev.delWrite = aev_del_write;
    ac->ev.cleanup = aev_cleanup;
    return 0;
}

/* One command awaiting its reply. */
typedef struct aconn_req {
    dq__aconn *a;           /* connection it was sent on */
    dq__aconn_reply_fn *fn; /* owner's callback; NULL for a hello step */
    void *priv;            /* owner's pointer */
    size_t tag;            /* owner's tag, or the hello step */
} aconn_req;

enum { HELLO_AUTH = 1, HELLO_SELECT = 2, HELLO_PING = 3 };

struct dq__aconn {
    redisAsyncContext *ac;      /* NULL once hiredis owns its teardown */
    dq__aconn_state_fn *state_fn; /* owner's state callback */
    void *priv;                 /* its pointer */
    dq__aconn_reply_fn *sub_fn;  /* subscription callback */
    void *sub_priv;             /* its pointer */
    int refs;                   /* owner + hiredis context */
    int depth;                  /* our callbacks running right now */
    int closed;                 /* owner closed: no more upcalls */
    int torn;                   /* context freed or being freed */
    int dead;                   /* failure reported (or closed) */
    int ready;                  /* hello done, ready reported */
    char *user, *pass;          /* AUTH arguments (copies), may be NULL */
    int db;                     /* SELECT argument, 0 = none */
    char where[300];            /* "unix:/path" or "host:port" */
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    SSL_CTX *ssl_ctx;           /* TLS context, outlives ac */
#endif
};

static void aconn_destroy(dq__aconn *a) {
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    SSL_CTX_free(a->ssl_ctx);
#endif
    free(a->user);
    free(a->pass);
    free(a);
}

/* Frees a once nobody can reach it any more. */
static void aconn_maybe_free(dq__aconn *a) {
    if (a->refs == 0 && a->depth == 0)
        aconn_destroy(a);
}

static void aconn_unref(dq__aconn *a) {
    a->refs--;
    aconn_maybe_free(a);
}

/* Reports the death of the connection once (unless the owner closed). */
static void aconn_die(dq__aconn *a, int code, const char *msg) {
    if (a->dead)
        return;
    a->dead = 1;
    if (!a->closed)
        a->state_fn(a->priv, code, msg);
}

/* hiredis tears the context down: record why and report it. */
static void aconn_torn(dq__aconn *a, const redisAsyncContext *ac) {
    char msg[400];
    a->torn = 1;
    snprintf(msg, sizeof(msg), "connection to %s lost: %s", a->where,
             ac != NULL && ac->errstr != NULL && ac->errstr[0]
                 ? ac->errstr
                 : "closed by the server");
    aconn_die(a, DQ_EIO, msg);
}

static void aconn_hello_reply(dq__aconn *a, size_t step, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) {
        dq__err e;
        const char *what = step == HELLO_AUTH     ? "AUTH"
                           : step == HELLO_SELECT ? "SELECT"
                                                  : "PING";
        int code = dq__reply_error((const dq__reply *)r, what, &e);
        aconn_die(a, code, e.msg);
        return;
    }
    if (step == HELLO_PING && !a->dead) {
        a->ready = 1;
        if (!a->closed)
            a->state_fn(a->priv, DQ_OK, "");
    }
}

/* Reply (or NULL at teardown) of one command. */
static void aconn_on_reply(redisAsyncContext *ac, void *reply, void *privdata) {
    aconn_req *q = privdata;
    dq__aconn *a = q->a;
    a->depth++;
    if (reply == NULL)
        aconn_torn(a, ac);
    else if (!a->closed && !a->dead) {
        if (q->fn != NULL)
            q->fn(q->priv, q->tag, (const dq__reply *)reply);
        else
            aconn_hello_reply(a, q->tag, reply);
    }
    free(q);
    a->depth--;
    aconn_maybe_free(a);
}

/* Subscription replies ("subscribe" confirmations and messages). */
static void aconn_on_sub(redisAsyncContext *ac, void *reply, void *privdata) {
    dq__aconn *a = privdata;
    a->depth++;
    if (reply == NULL)
        aconn_torn(a, ac);
    else if (!a->closed && !a->dead && a->sub_fn != NULL)
        a->sub_fn(a->sub_priv, 0, (const dq__reply *)reply);
    a->depth--;
    aconn_maybe_free(a);
}

/* Queues one formatted command; its reply goes to fn (NULL: the hello
 * steps, tag = step). */
static int aconn_queue_raw(dq__aconn *a, const char *resp, size_t len,
                           dq__aconn_reply_fn *fn, void *priv, size_t tag) {
    aconn_req *q = malloc(sizeof(*q));
    if (q == NULL)
        return DQ_ENOMEM;
    q->a = a;
    q->fn = fn;
    q->priv = priv;
    q->tag = tag;
    if (redisAsyncFormattedCommand(a->ac, aconn_on_reply, q, resp, len) !=
        REDIS_OK) {
        free(q);
        return a->ac->err == REDIS_ERR_OOM ? DQ_ENOMEM : DQ_EIO;
    }
    return DQ_OK;
}

/* Sends AUTH / SELECT / PING (hello_build); the PING reply means ready.
 * Runs inside hiredis's connect handling, where (0.14) the context must
 * not be freed: so it reports nothing; if a send fails the owner's connect
 * timeout notices that the connection never became ready. */
static void aconn_hello(dq__aconn *a) {
    hello h;
    hello_build(&h, a->user, a->pass, a->db, 1);
    for (int i = 0; i < h.n; i++) {
        char buf[1024];
        size_t len = dq__resp_size(h.argc[i], h.argv[i], NULL);
        char *p = len <= sizeof(buf) ? buf : malloc(len);
        if (p == NULL)
            return;
        dq__resp_put(p, h.argc[i], h.argv[i], NULL);
        size_t step = h.what[i][0] == 'A'   ? HELLO_AUTH
                      : h.what[i][0] == 'S' ? HELLO_SELECT
                                            : HELLO_PING;
        int rc = aconn_queue_raw(a, p, len, NULL, NULL, step);
        if (p != buf)
            free(p);
        if (rc != DQ_OK)
            return;
    }
}

static void aconn_on_connect(const redisAsyncContext *ac, int status) {
    dq__aconn *a = ac->data;
    if (a == NULL || a->torn)
        return;
    if (status == REDIS_OK) {
        aconn_hello(a);
        return;
    }
    /* hiredis frees the context when we return and calls nothing of ours
     * (nothing was queued): drop its reference now. */
    char msg[400];
    a->depth++;
    a->torn = 1;
    a->ac = NULL;
    snprintf(msg, sizeof(msg), "connect to %s: %s", a->where,
             ac->errstr != NULL && ac->errstr[0] ? ac->errstr
                                                 : "connection refused");
    aconn_die(a, DQ_EIO, msg);
    a->depth--;
    aconn_unref(a);
}

static void aconn_on_disconnect(const redisAsyncContext *ac, int status) {
    (void)status;
    dq__aconn *a = ac->data;
    if (a == NULL)
        return;
    a->depth++;
    aconn_torn(a, ac);
    a->ac = NULL;
    a->depth--;
    aconn_unref(a); /* the context's reference: hiredis is done with us */
}

int dq__aconn_open(const dq__conn_cfg *cfg, struct event_base *base,
                  dq__aconn_state_fn *state_fn, void *priv, dq__aconn **out,
                  dq__err *err) {
    const dq__uri *u = cfg->uri;
    const dq_options *o = cfg->opts;
    *out = NULL;
    int tls_rc = check_tls(o, u, err);
    if (tls_rc != DQ_OK)
        return tls_rc;
    dq__aconn *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    const char *user = o->user ? o->user : u->user;
    const char *pass = o->password ? o->password : u->password;
    if ((user != NULL && (a->user = strdup(user)) == NULL) ||
        (pass != NULL && (a->pass = strdup(pass)) == NULL)) {
        aconn_destroy(a);
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    }
    a->db = u->db;
    a->state_fn = state_fn;
    a->priv = priv;
    if (u->kind == DQ_URI_UNIX)
        snprintf(a->where, sizeof(a->where), "unix:%s", u->path);
    else
        snprintf(a->where, sizeof(a->where), "%s:%d", u->host, u->port);
    redisAsyncContext *ac = u->kind == DQ_URI_UNIX
                                ? redisAsyncConnectUnix(u->path)
                                : redisAsyncConnect(u->host, u->port);
    int rc = DQ_OK;
    if (ac == NULL) {
        rc = dq__err_set(err, DQ_ENOMEM, "out of memory connecting");
        goto fail;
    }
    if (ac->err) {
        rc = dq__err_set(err, ac->err == REDIS_ERR_OOM ? DQ_ENOMEM : DQ_EIO,
                        "connect to %s: %s", a->where,
                        ac->errstr ? ac->errstr : "failed");
        goto fail;
    }
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    if (want_tls(o, u)) {
        SSL *ssl = tls_new(o, u, &a->ssl_ctx, err);
        if (ssl == NULL) {
            rc = err->code;
            goto fail;
        }
        if (redisInitiateSSL(&ac->c, ssl) != REDIS_OK) {
            SSL_free(ssl); /* still ours on failure */
            rc = dq__err_set(err, DQ_EIO, "TLS handshake failed: %s",
                            ac->c.errstr[0] ? ac->c.errstr : "unknown");
            goto fail;
        }
    }
#endif
    ac->data = a;
    if (aev_attach(ac, base) != 0) {
        rc = dq__err_set(err, DQ_ENOMEM, "cannot attach to the event base");
        goto fail;
    }
    /* After attaching: setting the connect callback arms the write event. */
    redisAsyncSetConnectCallback(ac, aconn_on_connect);
    redisAsyncSetDisconnectCallback(ac, aconn_on_disconnect);
    a->ac = ac;
    a->refs = 2;
    *out = a;
    return DQ_OK;
fail:
    if (ac != NULL) {
        ac->data = NULL;
        redisAsyncFree(ac);
    }
    aconn_destroy(a);
    return rc;
}

int dq__aconn_send_raw(dq__aconn *a, const char *resp, size_t len,
                       dq__aconn_reply_fn *fn, void *priv, size_t tag,
                       dq__err *err) {
    if (a->closed || a->dead || a->torn || a->ac == NULL || !a->ready)
        return dq__err_set(err, DQ_EIO, "connection to %s is down", a->where);
    int rc = aconn_queue_raw(a, resp, len, fn, priv, tag);
    if (rc != DQ_OK)
        return dq__err_set(err, rc, "send to %s: %s", a->where,
                          dq_strerror(rc));
    return DQ_OK;
}

int dq__aconn_subscribe(dq__aconn *a, const char *channel,
                       dq__aconn_reply_fn *fn, void *priv, dq__err *err) {
    if (a->closed || a->dead || a->torn || a->ac == NULL || !a->ready)
        return dq__err_set(err, DQ_EIO, "connection to %s is down", a->where);
    a->sub_fn = fn;
    a->sub_priv = priv;
    const char *argv[2] = {"SUBSCRIBE", channel};
    if (redisAsyncCommandArgv(a->ac, aconn_on_sub, a, 2, argv, NULL) !=
        REDIS_OK)
        return dq__err_set(err, DQ_EIO, "SUBSCRIBE on %s failed", a->where);
    return DQ_OK;
}

void dq__aconn_close(dq__aconn *a) {
    if (a == NULL || a->closed)
        return;
    a->closed = 1;
    a->dead = 1;
    if (a->ac != NULL && !a->torn) {
        redisAsyncContext *ac = a->ac;
        /* A connected context reports its end through the disconnect
         * callback (now, or after the reply callback we may be in); one
         * that never connected is freed synchronously and silently. */
        int connected = (ac->c.flags & REDIS_CONNECTED) != 0;
        a->torn = 1;
        redisAsyncFree(ac);
        if (!connected) {
            a->ac = NULL;
            a->refs--; /* the context's reference */
        }
    }
    aconn_unref(a);
}
#endif /* DQ_HAVE_LIBEVENT */
