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
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
#include <hiredis/hiredis_ssl.h>
#include <pthread.h>
#endif

#include "conn.h"

struct dq_conn {
    redisContext *ctx; /* the hiredis connection */
    int broken;        /* set after an I/O error or timeout */
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    redisSSLContext *ssl; /* TLS context, outlives ctx */
#endif
};

static struct timeval tv_ms(int64_t ms) {
    struct timeval tv;
    tv.tv_sec = (time_t)(ms / 1000);
    tv.tv_usec = (suseconds_t)((ms % 1000) * 1000);
    return tv;
}

int dq_conn_tls_supported(void) {
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    return 1;
#else
    return 0;
#endif
}

/* Maps a failed hiredis context to a code; errno_saved is errno right after
 * the failing call. */
static int ctx_error(redisContext *ctx, int errno_saved, const char *what,
                     dq_err *err) {
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
    return dq_err_set(err, code, "%s: %s", what,
                      ctx->errstr[0] ? ctx->errstr : dq_strerror(code));
}

int dq_reply_is_error(const dq_reply *r, const char *prefix) {
    const redisReply *rr = (const redisReply *)r;
    size_t n = strlen(prefix);
    return rr != NULL && rr->type == REDIS_REPLY_ERROR && rr->len >= n &&
           memcmp(rr->str, prefix, n) == 0;
}

int dq_reply_error(const dq_reply *r, const char *what, dq_err *err) {
    const redisReply *rr = (const redisReply *)r;
    int code = DQ_EREDIS;
    if (dq_reply_is_error(r, "OOM"))
        code = DQ_EOOM;
    else if (dq_reply_is_error(r, "NOAUTH") ||
             dq_reply_is_error(r, "WRONGPASS") ||
             dq_reply_is_error(r, "ERR invalid password") ||
             dq_reply_is_error(r, "ERR invalid username-password") ||
             dq_reply_is_error(r, "ERR AUTH"))
        code = DQ_EAUTH;
    return dq_err_set(err, code, "%s: Redis error: %.*s", what,
                      (int)(rr->len > 400 ? 400 : rr->len), rr->str);
}

/* Runs one setup command (AUTH, SELECT) and checks for an error reply. */
static int setup_cmd(dq_conn *c, int argc, const char **argv, const char *what,
                     dq_err *err) {
    dq_reply *r;
    int rc = dq_conn_call(c, argc, argv, NULL, &r, err);
    if (rc != DQ_OK)
        return rc;
    if (dq_reply_type(r) == DQ_R_ERROR)
        rc = dq_reply_error(r, what, err);
    dq_reply_free(r);
    return rc;
}

#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
static pthread_once_t ssl_once = PTHREAD_ONCE_INIT;
static void ssl_init(void) { redisInitOpenSSL(); }

static int tls_start(dq_conn *c, const dq_options *o, const dq_uri *u,
                     dq_err *err) {
    pthread_once(&ssl_once, ssl_init);
    redisSSLContextError se = REDIS_SSL_CTX_NONE;
    const char *sni = o->tls_sni ? o->tls_sni
                                 : (u->kind == DQ_URI_TCP ? u->host : NULL);
    c->ssl = redisCreateSSLContext(o->tls_ca, NULL, o->tls_cert, o->tls_key,
                                   sni, &se);
    if (c->ssl == NULL)
        return dq_err_set(err, DQ_EIO, "TLS setup failed: %s",
                          redisSSLContextGetError(se));
    if (redisInitiateSSLWithContext(c->ctx, c->ssl) != REDIS_OK)
        return dq_err_set(err, DQ_EIO, "TLS handshake failed: %s",
                          c->ctx->errstr[0] ? c->ctx->errstr : "unknown");
    return DQ_OK;
}
#endif

static int want_tls(const dq_options *o, const dq_uri *u) {
    return u->tls || o->tls_ca || o->tls_cert || o->tls_key || o->tls_sni;
}

int dq_conn_open(const dq_conn_cfg *cfg, dq_conn **out, dq_err *err) {
    const dq_uri *u = cfg->uri;
    const dq_options *o = cfg->opts;
    *out = NULL;
    if (want_tls(o, u) && !dq_conn_tls_supported())
        return dq_err_set(err, DQ_ENOTSUP,
                          "TLS requested but this libdelayq was built "
                          "without TLS (needs hiredis >= 1.0 with "
                          "hiredis_ssl and -Dtls=enabled)");
    dq_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return dq_err_set(err, DQ_ENOMEM, "out of memory");
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
        rc = dq_err_set(err, DQ_ENOMEM, "out of memory connecting");
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
    const char *user = o->user ? o->user : u->user;
    const char *pass = o->password ? o->password : u->password;
    if (pass != NULL || user != NULL) {
        /* AUTH [user] password: Redis 6 ACL form when a user is given. */
        const char *argv[3] = {"AUTH", user, pass ? pass : ""};
        int argc = 3;
        if (user == NULL)
            argv[1] = pass, argc = 2;
        rc = setup_cmd(c, argc, argv, "AUTH", err);
        if (rc != DQ_OK)
            goto fail;
    }
    if (u->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", u->db);
        const char *argv[2] = {"SELECT", db};
        if ((rc = setup_cmd(c, 2, argv, "SELECT", err)) != DQ_OK)
            goto fail;
    }
    *out = c;
    return DQ_OK;
fail:
    dq_conn_free(c);
    return rc;
}

void dq_conn_free(dq_conn *c) {
    if (c == NULL)
        return;
    if (c->ctx != NULL)
        redisFree(c->ctx);
#if HIREDIS_MAJOR >= 1 && defined(DQ_HAVE_TLS)
    if (c->ssl != NULL)
        redisFreeSSLContext(c->ssl);
#endif
    free(c);
}

int dq_conn_broken(const dq_conn *c) { return c == NULL || c->broken; }

static int conn_fail(dq_conn *c, int saved, const char *what, dq_err *err) {
    c->broken = 1;
    return ctx_error(c->ctx, saved, what, err);
}

int dq_conn_append(dq_conn *c, int argc, const char **argv,
                   const size_t *lens, dq_err *err) {
    if (redisAppendCommandArgv(c->ctx, argc, argv, lens) != REDIS_OK)
        return conn_fail(c, errno, "queue command", err);
    return DQ_OK;
}

int dq_conn_read(dq_conn *c, dq_reply **reply, dq_err *err) {
    void *r = NULL;
    *reply = NULL;
    if (redisGetReply(c->ctx, &r) != REDIS_OK || r == NULL)
        return conn_fail(c, errno, "read reply", err);
    *reply = r;
    return DQ_OK;
}

int dq_conn_call(dq_conn *c, int argc, const char **argv, const size_t *lens,
                 dq_reply **reply, dq_err *err) {
    int rc = dq_conn_append(c, argc, argv, lens, err);
    return rc != DQ_OK ? rc : dq_conn_read(c, reply, err);
}

int dq_conn_buffered(dq_conn *c, dq_reply **reply, dq_err *err) {
    void *r = NULL;
    *reply = NULL;
    if (redisReaderGetReply(c->ctx->reader, &r) != REDIS_OK) {
        c->broken = 1;
        return dq_err_set(err, DQ_EPROTO, "protocol error: %s",
                          c->ctx->reader->errstr);
    }
    if (r == NULL)
        return 0;
    *reply = r;
    return 1;
}

int dq_conn_wait_readable(dq_conn *c, int64_t timeout_ms, dq_err *err) {
    struct pollfd p = {.fd = c->ctx->fd, .events = POLLIN, .revents = 0};
    int n;
    do {
        n = poll(&p, 1, (int)(timeout_ms > 86400000 ? 86400000 : timeout_ms));
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        c->broken = 1;
        return dq_err_set(err, DQ_EIO, "poll: %s", strerror(errno));
    }
    if (n == 0)
        return 0;
    if (redisBufferRead(c->ctx) != REDIS_OK)
        return conn_fail(c, errno, "read", err);
    return 1;
}

int dq_reply_type(const dq_reply *r) {
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

long long dq_reply_int(const dq_reply *r) {
    return ((const redisReply *)r)->integer;
}

const char *dq_reply_str(const dq_reply *r, size_t *len) {
    const redisReply *rr = (const redisReply *)r;
    *len = rr->str ? (size_t)rr->len : 0;
    return rr->str ? rr->str : "";
}

size_t dq_reply_len(const dq_reply *r) {
    const redisReply *rr = (const redisReply *)r;
    return rr->type == REDIS_REPLY_ARRAY ? rr->elements : 0;
}

const dq_reply *dq_reply_at(const dq_reply *r, size_t i) {
    const redisReply *rr = (const redisReply *)r;
    return (const dq_reply *)rr->element[i];
}

void dq_reply_free(dq_reply *r) {
    if (r != NULL)
        freeReplyObject(r);
}
