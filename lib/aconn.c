/*
 * aconn.c - the non-blocking link to one Redis: hiredis async on libevent,
 * used by lib/async.c through the dq__aconn functions of aconn.h.
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
 * sent in subscribed mode.  Neither version knows sharded pub/sub: see
 * dq__aconn_ssubscribe for how "smessage" still reaches the watch.  Every
 * hiredis version switch (TLS included) stays in conn.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <errno.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "aconn.h"
#include "resp.h"
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

/* The socket is readable: hiredis reads the replies. */
static void aev_read(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    aconn_ev *e = arg;
    redisAsyncHandleRead(e->ac);
}

/* The socket is writable: hiredis writes, with SIGPIPE blocked. */
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

/* hiredis drops the hooks (context freed): frees both events and e. */
static void aev_cleanup(void *p) {
    aconn_ev *e = p;
    e->ac->ev.cleanup = NULL; /* hiredis 0.14 may call cleanup twice */
    e->ac->ev.data = NULL;
    event_free(e->rev);
    event_free(e->wev);
    free(e);
}

/* Hooks ac's socket into base's loop; -1 when out of memory. */
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
    void *tls_ctx;              /* TLS context, outlives ac */
    struct event_base *base;    /* loop the context is attached to */
    const dq__uri *uri;         /* owner's URI and options (outlive us) */
    const dq_options *opts;
    struct evdns_getaddrinfo_request *dns_req; /* name being resolved */
    int in_open;                /* resolving inside dq__aconn_open */
    int open_rc;                /* ... and what failed there */
    dq__err open_err;
};

/* Frees a and what it owns (TLS context, AUTH copies). */
static void aconn_destroy(dq__aconn *a) {
    dq__tls_ctx_free(a->tls_ctx);
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

/* One hello step's reply: an error reports the connection dead; the PING's
 * reply reports it ready. */
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
    dq__hello h;
    dq__hello_build(&h, a->user, a->pass, a->db, 1);
    for (int i = 0; i < h.n; i++) {
        char buf[1024];
        size_t len = dq__resp_size(h.argc[i], h.argv[i], NULL);
        char *p = len < sizeof(buf) ? buf : malloc(len + 1);
        if (p == NULL)
            return;
        /* NUL after it: hiredis's async side peeks one byte further. */
        *dq__resp_put(p, h.argc[i], h.argv[i], NULL) = '\0';
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

/* hiredis's connect callback: on success starts the hello; on failure
 * reports it and drops the context's reference. */
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

/* hiredis's disconnect callback: reports the loss and drops the context's
 * reference. */
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

int dq__numeric_host(const char *host) {
    unsigned char buf[16];
    return inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

/* Connects to host (an address, or NULL for the URI's unix socket): the
 * hiredis context, TLS, the libevent hooks.  On success the context holds
 * a reference (a->refs is the caller's business). */
static int aconn_start(dq__aconn *a, const char *host, dq__err *err) {
    const dq__uri *u = a->uri;
    const dq_options *o = a->opts;
    redisAsyncContext *ac = host == NULL ? redisAsyncConnectUnix(u->path)
                                         : redisAsyncConnect(host, u->port);
    int rc = DQ_OK;
    if (ac == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory connecting");
    if (ac->err) {
        rc = dq__err_set(err, ac->err == REDIS_ERR_OOM ? DQ_ENOMEM : DQ_EIO,
                        "connect to %s: %s", a->where,
                        ac->errstr ? ac->errstr : "failed");
        goto fail;
    }
    if (dq__tls_wanted(o, u) &&
        (rc = dq__tls_attach(&ac->c, o, u, &a->tls_ctx, err)) != DQ_OK)
        goto fail;
    ac->data = a;
    if (aev_attach(ac, a->base) != 0) {
        rc = dq__err_set(err, DQ_ENOMEM, "cannot attach to the event base");
        goto fail;
    }
    /* After attaching: setting the connect callback arms the write event. */
    redisAsyncSetConnectCallback(ac, aconn_on_connect);
    redisAsyncSetDisconnectCallback(ac, aconn_on_disconnect);
    a->ac = ac;
    return DQ_OK;
fail:
    ac->data = NULL;
    redisAsyncFree(ac);
    return rc;
}

/* The resolver's answer for the URI's host: connect to its first IPv4
 * address (else its first address).  The request's reference becomes the
 * context's on success, and is dropped otherwise. */
static void aconn_on_resolved(int result, struct evutil_addrinfo *res,
                              void *arg) {
    dq__aconn *a = arg;
    a->dns_req = NULL;
    a->depth++;
    int rc = DQ_OK;
    dq__err e;
    if (result == EVUTIL_EAI_CANCEL || a->closed || a->dead) {
        rc = DQ_ECANCELED;
    } else {
        const struct evutil_addrinfo *pick = res;
        for (const struct evutil_addrinfo *r = res; r != NULL; r = r->ai_next)
            if (r->ai_family == AF_INET) {
                pick = r;
                break;
            }
        char ip[INET6_ADDRSTRLEN] = "";
        const void *addr = NULL;
        if (result == 0 && pick != NULL)
            addr = pick->ai_family == AF_INET
                       ? (const void *)&((const struct sockaddr_in *)
                                             pick->ai_addr)->sin_addr
                       : (const void *)&((const struct sockaddr_in6 *)
                                             pick->ai_addr)->sin6_addr;
        if (addr == NULL ||
            evutil_inet_ntop(pick->ai_family, addr, ip, sizeof(ip)) == NULL)
            rc = dq__err_set(&e, DQ_EIO, "resolve %s: %s", a->uri->host,
                            result != 0 ? evutil_gai_strerror(result)
                                        : "no address");
        else
            rc = aconn_start(a, ip, &e);
    }
    if (res != NULL)
        evutil_freeaddrinfo(res);
    if (rc != DQ_OK) {
        a->refs--; /* the request's: no context took it over */
        if (a->in_open) {
            a->open_rc = rc;
            a->open_err = e;
        } else if (rc != DQ_ECANCELED) {
            aconn_die(a, rc, e.msg);
        }
    }
    a->depth--;
    aconn_maybe_free(a);
}

int dq__aconn_open(const dq__conn_cfg *cfg, struct event_base *base,
                  dq__aconn_state_fn *state_fn, void *priv, dq__aconn **out,
                  dq__err *err) {
    const dq__uri *u = cfg->uri;
    const dq_options *o = cfg->opts;
    *out = NULL;
    int tls_rc = dq__tls_check(o, u, err);
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
    a->base = base;
    a->uri = u;
    a->opts = o;
    if (u->kind == DQ_URI_UNIX)
        snprintf(a->where, sizeof(a->where), "unix:%s", u->path);
    else
        snprintf(a->where, sizeof(a->where), "%s:%d", u->host, u->port);
    int rc;
    if (u->kind == DQ_URI_TCP && cfg->dns != NULL &&
        !dq__numeric_host(u->host)) {
        struct evutil_addrinfo hints;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_protocol = IPPROTO_TCP;
        a->refs = 2; /* the owner's and the request's */
        a->in_open = 1;
        /* The answer may come at once (hosts file): then the callback
         * has run, connected or recorded its error, before this returns. */
        struct evdns_getaddrinfo_request *req = evdns_getaddrinfo(
            cfg->dns, u->host, NULL, &hints, aconn_on_resolved, a);
        a->in_open = 0;
        if (a->open_rc != DQ_OK) {
            *err = a->open_err;
            aconn_destroy(a);
            return err->code;
        }
        if (a->ac == NULL)
            a->dns_req = req; /* still waiting for the answer */
        *out = a;
        return DQ_OK;
    }
    if ((rc = aconn_start(a, u->kind == DQ_URI_UNIX ? NULL : u->host, err)) !=
        DQ_OK) {
        aconn_destroy(a);
        return rc;
    }
    a->refs = 2; /* the owner's and the context's */
    *out = a;
    return DQ_OK;
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

int dq__aconn_subscribe_many(dq__aconn *a, int n, char *const *channels,
                             dq__aconn_reply_fn *fn, void *priv,
                             dq__err *err) {
    if (a->closed || a->dead || a->torn || a->ac == NULL || !a->ready)
        return dq__err_set(err, DQ_EIO, "connection to %s is down", a->where);
    const char **argv = malloc(sizeof(*argv) * (size_t)(n + 1));
    if (argv == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    argv[0] = "SUBSCRIBE";
    for (int i = 0; i < n; i++)
        argv[i + 1] = channels[i];
    a->sub_fn = fn;
    a->sub_priv = priv;
    int rc = redisAsyncCommandArgv(a->ac, aconn_on_sub, a, n + 1, argv, NULL);
    free(argv);
    if (rc != REDIS_OK)
        return dq__err_set(err, DQ_EIO, "SUBSCRIBE on %s failed", a->where);
    return DQ_OK;
}

int dq__aconn_ssubscribe(dq__aconn *a, const char *channel,
                        dq__aconn_reply_fn *fn, void *priv, dq__err *err) {
    if (a->closed || a->dead || a->torn || a->ac == NULL || !a->ready)
        return dq__err_set(err, DQ_EIO, "connection to %s is down", a->where);
    const char *argv[2] = {"SSUBSCRIBE", channel};
    size_t len = dq__resp_size(2, argv, NULL);
    char *p = malloc(len + 1);
    if (p == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    /* NUL after it: hiredis's async side peeks one byte further.  Sent
     * before the SUBSCRIBE, while hiredis does not consider the context
     * subscribed: its reply (or error) then comes to fn as a plain
     * command's. */
    *dq__resp_put(p, 2, argv, NULL) = '\0';
    int rc = aconn_queue_raw(a, p, len, fn, priv, 1);
    free(p);
    if (rc != DQ_OK)
        return dq__err_set(err, rc, "SSUBSCRIBE on %s failed", a->where);
    return dq__aconn_subscribe(a, channel, fn, priv, err);
}

int dq__aconn_alive(const dq__aconn *a) {
    if (a == NULL || a->closed || a->dead || a->torn || a->ac == NULL)
        return 0;
    char b;
    ssize_t n = recv(a->ac->c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 ||
           (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

void dq__aconn_close(dq__aconn *a) {
    if (a == NULL || a->closed)
        return;
    a->closed = 1;
    a->dead = 1;
    if (a->dns_req != NULL) {
        /* Its callback drops the request's reference (now or later). */
        struct evdns_getaddrinfo_request *req = a->dns_req;
        a->dns_req = NULL;
        a->depth++;
        evdns_getaddrinfo_cancel(req);
        a->depth--;
    }
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
