/*
 * awake.c - the async client's wake-up watches (see async_int.h, "Watch"):
 * one subscription per consumer to its wake-up channel(s), on a link of
 * its own that follows the routes (the node that owns the channel's slot
 * in a cluster, with SSUBSCRIBE; the primary with Sentinel) - the async
 * counterpart of the blocking client's wake.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alinks.h"
#include "async_int.h"
#include "ops.h"
#include "route.h"
#include "uri.h"

struct dq__watch {
    dq__watch *next, *prev; /* in the client's list */
    dq_async *a;            /* client */
    dq__alink l;            /* its own connection */
    char *channel;          /* channel subscribed to (the first) */
    char **chans;           /* all of them (plain pub/sub only: more than
                               one); chans[0] is channel */
    int nch;
    int slot;               /* its hash slot */
    int sharded;            /* SSUBSCRIBE (a cluster) */
    dq__watch_fn *fn;        /* consumer's callback */
    void *ud;               /* its userdata */
    int subscribed;         /* confirmation received on this connection */
    char host[256];         /* routed: the node it connects to */
    int port;
    dq__uri uri;             /* ... and its URI (host: the above) */
};

/* Where the watch connects: the URI (one node), the node that owns its
 * channel's slot (cluster) or the primary (Sentinel); 0 parks it until the
 * routes know (follow_all kicks it then). */
static int watch_target(dq__alink *l) {
    dq__watch *w = l->owner;
    dq_async *a = w->a;
    char host[256];
    int port = 0;
    int rc = dq__routes_target(dq__async_routes(a), w->slot, host, sizeof(host), &port);
    if (rc == 0)
        return 0;
    if (rc == 2) {
        l->uri = dq__async_uri(a);
        return 1;
    }
    snprintf(w->host, sizeof(w->host), "%s", host);
    w->port = port;
    dq__uri_node(dq__async_uri(a), w->host, w->port, &w->uri);
    l->uri = &w->uri;
    snprintf(l->where, sizeof(l->where), "%s:%d", w->host, w->port);
    return 1;
}

/* After a change of the routes: a parked watch connects; one connected to
 * a node that no longer owns its slot (or to a former primary) moves. */
static void watch_follow(dq__watch *w) {
    dq_async *a = w->a;
    if (w->l.state == DQ_AL_IDLE) {
        dq__alink_kick(&w->l);
        return;
    }
    if (!dq__routes_routed(dq__async_routes(a)) ||
        (w->l.state != DQ_AL_UP && w->l.state != DQ_AL_CONNECTING))
        return;
    char host[256], msg[600];
    int port = 0;
    if (dq__routes_target(dq__async_routes(a), w->slot, host, sizeof(host), &port) != 1 ||
        (port == w->port && strcmp(host, w->host) == 0))
        return;
    snprintf(msg, sizeof(msg), "wake-ups of %s moved to %s:%d", w->channel,
             host, port);
    dq__alink_fail(&w->l, DQ_EIO, msg);
    if (w->l.state == DQ_AL_WAIT)
        dq__alink_start(&w->l, 0);
}

/* After a change of the routes, each watch of the list w: a parked one
 * connects; one connected to a node that no longer owns its slot (or to a
 * former primary) moves.  Runs no user code. */
static void follow_all(dq__watch *w) {
    for (; w != NULL; w = w->next)
        watch_follow(w);
}

/* Subscription replies: the first confirmation on a connection (of
 * SSUBSCRIBE in a cluster) reports ready, a message a wake-up; any
 * "subscribe" answers a health check.  A refused SSUBSCRIBE (MOVED...) or
 * a "sunsubscribe" (the slot moved away) reconnects the watch where the
 * refreshed map says. */
static void watch_on_sub(void *priv, size_t tag, const dq__reply *r) {
    (void)tag;
    dq__watch *w = priv;
    dq_async *a = w->a;
    int ev = 0;
    dq__async_enter(a);
    if (dq__reply_type(r) == DQ_R_ERROR) {
        dq__err e;
        dq__reply_error(r, "SSUBSCRIBE", &e);
        dq__routes_stale(dq__async_routes(a));
        dq__alink_fail(&w->l, e.code, e.msg);
        dq__async_leave(a);
        return;
    }
    if (dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) >= 1) {
        size_t len, chlen = 0;
        const char *kind = dq__reply_str(dq__reply_at(r, 0), &len);
        /* the channel it is about (a watch may have several) */
        const char *ch = dq__reply_len(r) >= 2
                             ? dq__reply_str(dq__reply_at(r, 1), &chlen)
                             : NULL;
        if (ch == NULL) {
            ch = w->channel;
            chlen = strlen(ch);
        }
        if (kind == NULL)
            len = 0;
        if ((len == 9 && memcmp(kind, "subscribe", 9) == 0) ||
            (len == 10 && memcmp(kind, "ssubscribe", 10) == 0)) {
            dq__alink_replied(&w->l);
            if (!w->subscribed && (len == 10 || !w->sharded)) {
                w->subscribed = 1;
                ev = DQ_WATCH_READY;
            }
            if (ev == DQ_WATCH_READY || (w->nch > 1 && !w->sharded))
                /* wake-ups may have been missed while unsubscribed */
                dq__core_wake_msg(dq__async_core(a), ch, chlen, NULL, 0);
        } else if ((len == 7 && memcmp(kind, "message", 7) == 0) ||
                   (len == 8 && memcmp(kind, "smessage", 8) == 0)) {
            w->l.last_us = dq__mono_us();
            ev = DQ_WATCH_WAKE;
            /* when the consumer is to poll that partition: now, or the
             * time a consumer's own channel names */
            size_t mlen = 0;
            const char *msg = dq__reply_len(r) >= 3
                                  ? dq__reply_str(dq__reply_at(r, 2), &mlen)
                                  : NULL;
            dq__core_wake_msg(dq__async_core(a), ch, chlen, msg ? msg : "0",
                              msg ? mlen : 1);
        } else if (len == 12 && memcmp(kind, "sunsubscribe", 12) == 0) {
            char msg[600];
            snprintf(msg, sizeof(msg),
                     "%s dropped the subscription to %s (its slot moved)",
                     w->l.where, w->channel);
            dq__routes_stale(dq__async_routes(a));
            dq__alink_fail(&w->l, DQ_EIO, msg);
        }
    }
    if (ev != 0)
        w->fn(w->ud, ev); /* last: it may close the watch */
    dq__async_leave(a);
}

/* The watch's link is up: subscribes (a failed send fails the link). */
static void watch_up(dq__alink *l) {
    dq__watch *w = l->owner;
    dq__err e;
    int rc;
    if (w->sharded) {
        rc = dq__aconn_ssubscribe(l->conn, w->channel, watch_on_sub, w, &e);
        if (rc == DQ_OK)
            dq__alink_sent(l); /* SSUBSCRIBE, then SUBSCRIBE */
    } else {
        rc = dq__aconn_subscribe_many(l->conn, w->nch, w->chans, watch_on_sub,
                                      w, &e);
        for (int i = 1; rc == DQ_OK && i < w->nch; i++)
            dq__alink_sent(l); /* one confirmation per channel */
    }
    if (rc != DQ_OK)
        dq__alink_fail(l, rc, e.msg);
    else
        dq__alink_sent(l);
}

/* The subscription went with the link: the next confirmation reports ready
 * again.  A cluster node or a primary that failed may have failed over:
 * the routes learn the topology again before the watch reconnects. */
static void watch_down(dq__alink *l, int code, const char *msg, int was_up) {
    (void)code;
    (void)msg;
    (void)was_up;
    dq__watch *w = l->owner;
    w->subscribed = 0;
    if (dq__routes_routed(dq__async_routes(w->a)))
        dq__routes_stale(dq__async_routes(w->a));
}

static void watch_free(void *p) {
    dq__watch *w = p;
    for (int i = 0; i < w->nch; i++)
        free(w->chans[i]);
    free(w->chans);
    free(w);
}

int dq__watch_open(dq_async *a, const char *channel, dq__watch_fn *fn,
                  void *userdata, dq__watch **out) {
    return dq__watch_open_many(a, 1, &channel, fn, userdata, out);
}

int dq__watch_open_many(dq_async *a, int n, const char *const *channels,
                        dq__watch_fn *fn, void *userdata, dq__watch **out) {
    *out = NULL;
    dq__watch *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return DQ_ENOMEM;
    w->a = a;
    w->fn = fn;
    w->ud = userdata;
    w->sharded = dq__async_sharded(a);
    int ok = (w->chans = calloc((size_t)n, sizeof(*w->chans))) != NULL;
    for (int i = 0; ok && i < n; i++, w->nch++)
        ok = (w->chans[i] = strdup(channels[i])) != NULL;
    if (ok)
        w->channel = w->chans[0];
    if (!ok || dq__alink_init(&w->l, dq__async_host(a), w,
                              dq__async_uri(a), dq__async_opts(a),
                              watch_up, watch_down) != DQ_OK) {
        dq__alink_close(&w->l);
        watch_free(w);
        return DQ_ENOMEM;
    }
    w->slot = dq__key_slot(w->channel, strlen(w->channel));
    w->l.target = watch_target;
    snprintf(w->l.where, sizeof(w->l.where), "%s", dq__async_where(a));
    dq__async_on_routes(a, follow_all);
    dq__watch **head = dq__async_watches(a);
    w->next = *head;
    if (*head != NULL)
        (*head)->prev = w;
    *head = w;
    dq__alink_start(&w->l, 0);
    *out = w;
    return DQ_OK;
}

void dq__watch_check(dq__watch *w) {
    if (w == NULL || w->l.state != DQ_AL_UP || w->l.pending > 0)
        return;
    dq__err e;
    int rc = dq__aconn_subscribe_many(w->l.conn, w->nch, w->chans,
                                      watch_on_sub, w, &e);
    for (int i = 0; rc == DQ_OK && i < w->nch; i++)
        dq__alink_sent(&w->l); /* one confirmation per channel */
}

int dq__watch_ready(const dq__watch *w) { return w != NULL && w->subscribed; }

void dq__watch_close(dq__watch *w) {
    if (w == NULL)
        return;
    if (w->prev != NULL)
        w->prev->next = w->next;
    else if (*dq__async_watches(w->a) == w)
        *dq__async_watches(w->a) = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
    dq__alink_close(&w->l);
    dq__async_bury(w->a, watch_free, w);
}
