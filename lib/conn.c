/*
 * conn.c - the blocking link to one Redis, and the one unit that knows
 * which hiredis it is built against.
 *
 * hiredis 0.14 (Debian 12) and 1.x differ in how connections are opened
 * (options struct, TLS through hiredis_ssl) and in how a read timeout is
 * reported (1.x: REDIS_ERR_TIMEOUT; 0.14: REDIS_ERR_IO with EAGAIN).  All of
 * that is decided here, behind #if HIREDIS_MAJOR >= 1: the async link
 * (aconn.c) and the OpenSSL side of TLS (tls.c) call the functions below
 * instead of switching on the version themselves.  Replies are read
 * through reply.c; commands are formatted by resp.c.
 */
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
#include <hiredis/hiredis_ssl.h>
#include <openssl/ssl.h>
#include <pthread.h>

#include "tls.h"
#endif

#include "conn.h"
#include "resp.h"

struct dq__conn {
    redisContext *ctx; /* the hiredis connection */
    int broken;        /* set after an I/O error or timeout */
    char *fmt;         /* reusable buffer for formatting commands */
    size_t fmt_cap;    /* bytes allocated in fmt */
    void *tls_ctx;     /* TLS context (dq__tls_ctx_free), outlives ctx */
};

/* ms milliseconds as a timeval. */
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

void dq__hello_build(dq__hello *h, const char *user, const char *pass, int db,
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
#endif

int dq__tls_wanted(const dq_options *o, const dq__uri *u) {
    return u->tls || o->tls_ca || o->tls_cert || o->tls_key || o->tls_sni;
}

int dq__tls_check(const dq_options *o, const dq__uri *u, dq__err *err) {
    if (dq__tls_wanted(o, u) && !dq__conn_tls_supported())
        return dq__err_set(err, DQ_ENOTSUP,
                          "TLS requested but this libdelayq was built "
                          "without TLS (needs hiredis >= 1.0 with "
                          "hiredis_ssl and -Dtls=enabled)");
    return DQ_OK;
}

int dq__tls_attach(struct redisContext *ctx, const dq_options *o,
                   const dq__uri *u, void **tls_ctx, dq__err *err) {
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    pthread_once(&ssl_once, ssl_init);
    SSL_CTX *sctx = NULL;
    SSL *ssl = dq__tls_new(o, u, &sctx, err);
    if (ssl == NULL)
        return err->code;
    *tls_ctx = sctx;
    if (redisInitiateSSL(ctx, ssl) != REDIS_OK) {
        /* Not taken over by hiredis on failure: still ours. */
        char why[200];
        dq__tls_verify_result(ssl, why, sizeof(why));
        SSL_free(ssl);
        return dq__err_set(err, DQ_EIO, "TLS handshake failed: %s%s",
                          ctx->errstr[0] ? ctx->errstr : "unknown", why);
    }
    return DQ_OK;
#else
    (void)ctx;
    (void)tls_ctx;
    return dq__tls_check(o, u, err);
#endif
}

void dq__tls_ctx_free(void *tls_ctx) {
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    SSL_CTX_free(tls_ctx);
#else
    (void)tls_ctx;
#endif
}

int dq__conn_open(const dq__conn_cfg *cfg, dq__conn **out, dq__err *err) {
    const dq__uri *u = cfg->uri;
    const dq_options *o = cfg->opts;
    *out = NULL;
    int tls_rc = dq__tls_check(o, u, err);
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
    if (dq__tls_wanted(o, u) &&
        (rc = dq__tls_attach(c->ctx, o, u, &c->tls_ctx, err)) != DQ_OK)
        goto fail;
    dq__hello h;
    dq__hello_build(&h, o->user ? o->user : u->user,
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
    dq__tls_ctx_free(c->tls_ctx); /* after redisFree: the SSL is gone */
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

void dq__conn_break(dq__conn *c) {
    if (c != NULL)
        c->broken = 1;
}

int dq__conn_flush(dq__conn *c, dq__err *err) {
    int done = 0;
    while (!done)
        if (redisBufferWrite(c->ctx, &done) != REDIS_OK)
            return conn_fail(c, errno, "write", err);
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

int dq__conn_wait_any(dq__conn *const *cs, int n, int64_t timeout_us,
                      int *which, dq__err *err) {
    struct pollfd small[8];
    struct pollfd *p = n <= 8 ? small : malloc(sizeof(*p) * (size_t)n);
    if (p == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        p[i].fd = cs[i]->ctx->fd;
        p[i].events = POLLIN;
        p[i].revents = 0;
    }
    if (timeout_us > INT64_C(86400000000))
        timeout_us = INT64_C(86400000000);
    /* ppoll sleeps in nanoseconds: a wait for a job due in 2.3 ms is not
     * rounded up to 3 ms as poll()'s milliseconds would. */
    int64_t deadline = dq__mono_us() + timeout_us;
    int got;
    for (;;) {
        int64_t left = deadline - dq__mono_us();
        if (left < 0)
            left = 0;
        struct timespec ts = {(time_t)(left / 1000000),
                              (long)(left % 1000000) * 1000};
        got = ppoll(p, (nfds_t)n, &ts, NULL);
        if (got >= 0 || errno != EINTR)
            break;
    }
    int rc = 0;
    if (got < 0) {
        *which = 0;
        if (n > 0)
            cs[0]->broken = 1;
        rc = dq__err_set(err, DQ_EIO, "poll: %s", strerror(errno));
    }
    for (int i = 0; got > 0 && i < n; i++) {
        if (p[i].revents == 0)
            continue;
        *which = i;
        rc = redisBufferRead(cs[i]->ctx) != REDIS_OK
                 ? conn_fail(cs[i], errno, "read", err)
                 : 1;
        break;
    }
    if (p != small)
        free(p);
    return rc;
}

int dq__conn_wait_readable(dq__conn *c, int64_t timeout_us, dq__err *err) {
    int which;
    return dq__conn_wait_any(&c, 1, timeout_us, &which, err);
}

