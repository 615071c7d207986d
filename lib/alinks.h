/*
 * alinks.h - the async client's links (lib/alinks.c, used by lib/async.c).
 * Compiled only with libevent.
 *
 * A link (dq__alink) is one connection that reconnects by itself: a
 * dq__aconn while connecting or up, a backoff timer (50 ms doubling to 2 s)
 * while not, and one timer that bounds both the connection attempt
 * (DQ_OPT_CONNECT_TIMEOUT_MS) and the silence of the server while replies
 * are awaited (DQ_OPT_COMMAND_TIMEOUT_MS; replies come in order, so "no
 * reply for T ms while some are pending" is exactly "the oldest pending
 * command is T ms late").  Before each attempt its owner may pick the
 * address (target) or park it (no attempt until dq__alink_kick).
 *
 * The routes (dq__routes) are the links to what the URI names:
 *  - one node (redis://, rediss://, unix://): one link, always wanted;
 *  - the primary that Sentinels name: a link to a Sentinel asks
 *    SENTINEL GET-MASTER-ADDR-BY-NAME (each Sentinel in turn), then the
 *    primary's link connects and is used once ROLE said "master"; it is
 *    resolved again when it fails or a reply said READONLY, and it moves
 *    at once when a Sentinel announces +switch-master for its name (one
 *    more link stays subscribed to that on one Sentinel at a time);
 *  - a Redis Cluster: the slot map of route.h, learnt (CLUSTER SHARDS, else
 *    CLUSTER SLOTS) from an up node or the seeds, again after MOVED, a
 *    failed link or a "not now" reply (at most every 100 ms); one link per
 *    node, opened when a slot it owns (or an ASK) wants it, reconnecting
 *    while it owns slots.
 *
 * What the routes tell the client (async.c, see async_int.h):
 * dq__async_routes_changed when calls that waited may go now (a link came
 * up, the map or the primary changed), dq__async_link_down when a link that
 * may carry calls failed (with whether to report it to the state callback),
 * dq__async_state for the other state changes.
 */
#ifndef DQ_ALINKS_H
#define DQ_ALINKS_H

#include "aconn.h"
#include "async_int.h"

/* States of a link. */
enum {
    DQ_AL_IDLE = 0,   /* parked: no attempt until dq__alink_kick */
    DQ_AL_WAIT,       /* backoff timer armed */
    DQ_AL_CONNECTING, /* connection not ready yet */
    DQ_AL_UP,         /* ready */
    DQ_AL_CLOSED      /* closed for good */
};

typedef struct dq__alink dq__alink;
struct dq__alink {
    dq_async *a;                 /* client (base, options) */
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
int dq__alink_init(dq__alink *l, dq_async *a, void *owner,
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
/* One more command awaits its reply (sent by other means than send). */
void dq__alink_sent(dq__alink *l);
/* A reply came (call from every reply callback of a command counted). */
void dq__alink_replied(dq__alink *l);
/* 1 if l is up and, when no reply is due on it, its socket is not closed
 * by the server (one non-blocking peek; else the link is failed from the
 * loop and 0 is returned). */
int dq__alink_usable(dq__alink *l);

/* ---- Routes ---- */

typedef struct dq__routes dq__routes;

/* For the client a with its parsed uri and options (both outlive the
 * routes); where names the URI's server in messages.  No I/O yet. */
int dq__routes_new(dq_async *a, const dq__uri *uri, const dq_options *opts,
                   const char *where, dq__routes **out, dq__err *err);
/* Starts connecting, from the loop. */
void dq__routes_start(dq__routes *R);
/* Closes every link (no callback after this). */
void dq__routes_close(dq__routes *R);
/* Frees R (closed first); NULL is a no-op. */
void dq__routes_free(dq__routes *R);

/* 1 for a cluster or Sentinel (calls may be redirected or retried). */
int dq__routes_routed(const dq__routes *R);
/* One node: its link is up.  Sentinel: the primary's link is up and said
 * ROLE master.  Cluster: the slot map is known and a node link is up. */
int dq__routes_connected(const dq__routes *R);

/* The up link to the node that owns slot, or NULL: then what gets one is
 * under way (a connection, the slot map, the primary's address) and
 * dq__async_routes_changed will tell. */
dq__alink *dq__routes_get(dq__routes *R, int slot);
/* The up link to the cluster node host:port (an ASK target), or NULL (it
 * is being opened). */
dq__alink *dq__routes_at(dq__routes *R, const char *host, int port);
/* A MOVED redirection: slot lives at host:port (map refreshed too). */
void dq__routes_moved(dq__routes *R, int slot, const char *host, int port);
/* Learn the topology again: refresh the map, resolve the primary again. */
void dq__routes_stale(dq__routes *R);
/* Where a subscriber for slot connects: 2 the URI itself (one node), 1
 * host:port, 0 not known yet (being learnt: dq__async_routes_changed will
 * tell). */
int dq__routes_target(dq__routes *R, int slot, char *host, size_t hsize,
                      int *port);
/* The server of slot, for messages. */
void dq__routes_where(const dq__routes *R, int slot, char *out, size_t n);
/* The last failure of the topology (a Sentinel, a node), "" if none. */
const char *dq__routes_why(const dq__routes *R);

#endif
