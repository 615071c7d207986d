/*
 * alink.h - one connection of the async client that reconnects by itself
 * (lib/alink.c, used by alinks.c and async.c).  Compiled only with
 * libevent.
 *
 * A link (dq__alink) is a dq__aconn while connecting or up, a backoff
 * timer (50 ms doubling to 2 s) while not, and one timer that bounds both
 * the connection attempt (DQ_OPT_CONNECT_TIMEOUT_MS) and the silence of
 * the server while replies are awaited (DQ_OPT_COMMAND_TIMEOUT_MS;
 * replies come in order, so "no reply for T ms while some are pending" is
 * exactly "the oldest pending command is T ms late").  Before each
 * attempt its owner may pick the address (target) or park it (no attempt
 * until dq__alink_kick).
 *
 * The links and routes know their client only through a dq__ahost: the
 * client (async.c) fills one in and the links call up through it, never
 * into async.c by name.
 */
#ifndef DQ_ALINK_H
#define DQ_ALINK_H

#include "aconn.h"

struct event;
struct event_base;
struct evdns_base;
typedef struct dq__alink dq__alink;

/* What the links need of their client.  Every entry from the loop runs
 * between enter and leave (leave returns 1 if the client is being
 * freed: touch nothing then); changed, link_down and failed may run user
 * callbacks that free the client (closing says so). */
typedef struct dq__ahost {
    void *ud;                  /* the client */
    struct event_base *base;
    const dq_options *opts;
    void (*enter)(void *ud);
    int (*leave)(void *ud);
    int (*closing)(const void *ud);
    /* The resolver for a link to u (NULL: none needed). */
    struct evdns_base *(*dns)(void *ud, const dq__uri *u);
    /* Calls that waited for a link, the slot map or the primary may go
     * now; subscribers follow their slot's owner; the state callback is
     * told when the client became connected. */
    void (*changed)(void *ud);
    /* Link l failed (was_up: it was ready): the calls in flight on it are
     * lost (the state callback is told first when the client stopped
     * being connected). */
    void (*link_down)(void *ud, dq__alink *l, int code, const char *msg,
                      int was_up);
    /* The topology failed (a Sentinel, the slot map): the state callback
     * is told while the client is not connected. */
    void (*failed)(void *ud, int code, const char *msg);
} dq__ahost;

/* States of a link. */
enum {
    DQ_AL_IDLE = 0,   /* parked: no attempt until dq__alink_kick */
    DQ_AL_WAIT,       /* backoff timer armed */
    DQ_AL_CONNECTING, /* connection not ready yet */
    DQ_AL_UP,         /* ready */
    DQ_AL_CLOSED      /* closed for good */
};

struct dq__alink {
    const dq__ahost *h;          /* its client */
    dq__aconn *conn;             /* NULL unless connecting or up */
    int state;                   /* DQ_AL_* */
    int64_t backoff_ms;          /* delay before the next attempt */
    struct event *retry_ev;      /* next connection attempt */
    struct event *tick_ev;       /* connect / reply timeout */
    int64_t connect_deadline_us; /* monotonic */
    int64_t last_us;             /* last reply, first send while idle, or
                                    the moment it came up */
    size_t pending;              /* commands awaiting replies */
    int doomed;                  /* found closed by the server: fails from
                                    the loop */
    int keep_backoff;            /* a ready connection does not reset the
                                    backoff: the owner does, once the
                                    link did its job (Sentinels) */
    void *owner;                 /* whoever the callbacks are for */
    const dq__uri *uri;          /* where to connect (outlives the attempt) */
    const dq_options *opts;      /* credentials, TLS (idem) */
    char where[300];             /* "host:port" or "unix:path", messages */
    /* Before each attempt: 1 to connect to uri (which it may set), 0 to
     * park.  NULL: always connect. */
    int (*target)(dq__alink *l);
    /* Connection ready (after AUTH / SELECT / PING). */
    void (*up)(dq__alink *l);
    /* Connection lost (was_up) or attempt failed: every command sent on it
     * and not answered is lost.  Always the last thing link code does, so
     * the owner may free everything from inside. */
    void (*down)(dq__alink *l, int code, const char *msg, int was_up);
};

/* Sets l up (not started): callbacks, timers, uri / opts / where.  DQ_OK or
 * DQ_ENOMEM (dq__alink_close is due either way). */
int dq__alink_init(dq__alink *l, const dq__ahost *h, void *owner,
                   const dq__uri *uri, const dq_options *opts,
                   void (*up)(dq__alink *),
                   void (*down)(dq__alink *, int, const char *, int));
/* First attempt after delay_ms, from the loop (so it never calls back). */
void dq__alink_start(dq__alink *l, int64_t delay_ms);
/* A parked link: attempt now (from the loop).  Other states: no-op. */
void dq__alink_kick(dq__alink *l);
/* Drops the connection, schedules the next attempt, calls down (last). */
void dq__alink_fail(dq__alink *l, int code, const char *msg);
/* The next attempt after a failure waits the shortest backoff again. */
void dq__alink_reset_backoff(dq__alink *l);
/* Drops the connection quietly (no down call) and parks the link. */
void dq__alink_park(dq__alink *l);
/* Makes the link inert for good: no callback of it runs after this. */
void dq__alink_close(dq__alink *l);
/* Queues one RESP command on an up link (reply to fn(priv, tag)) and
 * counts it pending.  DQ_OK, DQ_EIO (down) or DQ_ENOMEM. */
int dq__alink_send(dq__alink *l, const char *resp, size_t len,
                   dq__aconn_reply_fn *fn, void *priv, size_t tag,
                   dq__err *err);
/* dq__alink_send of the command argv (argc words). */
int dq__alink_send_argv(dq__alink *l, int argc, const char **argv,
                        dq__aconn_reply_fn *fn, void *priv, size_t tag,
                        dq__err *err);
/* One more command awaits its reply (sent by other means than send). */
void dq__alink_sent(dq__alink *l);
/* A reply came (call from every reply callback of a command counted). */
void dq__alink_replied(dq__alink *l);
/* 1 if l is up and, when no reply is due on it, its socket is not closed
 * by the server (one non-blocking peek; else the link is failed from the
 * loop and 0 is returned). */
int dq__alink_usable(dq__alink *l);
/* Arms timer ev to fire in us microseconds (negative: now). */
void dq__alink_arm(struct event *ev, int64_t us);

#endif
