/*
 * alinks.c - the async client's routes (see alinks.h): one node, a
 * Sentinel-named primary, the nodes of a Redis Cluster, over links that
 * reconnect by themselves (alink.c).  Which node or Sentinel to ask and
 * what the answers mean is the state machine of topo.c; this unit carries
 * its steps out on the loop.
 *
 * Every entry from the loop (timers, replies, state changes) runs between
 * the host's enter and leave, like the rest of the async client; a call
 * up that may run user code (changed, link_down, state) may free the
 * client, so code checks closing() before it touches anything after one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "alinks.h"
#include "delayq-event.h"
#include "topo.h"
#include "uri.h"

#define WANTED_US 10000000 /* a node wanted this recently reconnects */

/* A cluster node and its link (first: a node is its link; the link's
 * owner is the routes, like every link's here). */
typedef struct node {
    dq__alink l;
    int idx;           /* in the map's node table */
    int failed;        /* its last attempt failed or it was lost */
    int64_t wanted_us; /* last time a call or a refresh wanted it */
    char host[256];    /* its address (the link's URI points here) */
    dq__uri uri;
} node;

struct dq__routes {
    const dq__ahost *h;      /* the client */
    const dq__uri *uri;      /* the client's */
    const dq_options *opts;  /* the client's */
    int kind;                /* uri->kind */
    char where[300];         /* the URI's server, for messages */
    dq__topo t;              /* the topology: map, primary, subscriber */
    dq__alink main;          /* the one node; Sentinel: the primary */
    dq__err why;             /* the last failure of the topology */
    struct event *tick_ev;   /* cluster: the next refresh; Sentinel: the
                                subscriber's check and reopening */
    /* Sentinel */
    dq__alink sent;          /* to the Sentinel being asked */
    unsigned sseq;           /* the step it carries */
    dq__uri suri;            /* its URI: no credentials, database 0 */
    dq_options sopts;        /* the options without credentials */
    char shost[256];
    char chost[256];         /* the address the primary's link uses */
    int cport;
    dq__uri puri;            /* its URI (host: chost) */
    unsigned mseq;           /* the ROLE step the primary's link carries */
    int role_ok;             /* ROLE said master on this connection */
    int switching;           /* main dropped for a new primary address */
    dq__alink ssub;          /* to one Sentinel, kept: +switch-master */
    dq__uri ssuri;           /* its URI: no credentials, database 0 */
    char sshost[256];
};

static void act(dq__routes *R, dq__tact *a);

static int closing(const dq__routes *R) { return R->h->closing(R->h->ud); }

int dq__routes_routed(const dq__routes *R) { return dq__topo_routed(&R->t); }

/* Points l at host:port (creds: see dq__topo_uri), its URI in buf and
 * u. */
static void aim(dq__routes *R, dq__alink *l, const char *host, int port,
                int creds, char *buf, dq__uri *u) {
    dq__topo_uri(&R->t, host, port, creds, buf, 256, u);
    l->uri = u;
    snprintf(l->where, sizeof(l->where), "%s:%d", buf, port);
}

int dq__routes_connected(const dq__routes *R) {
    if (R->kind == DQ_URI_CLUSTER)
        return R->t.loaded && dq__topo_any_up(&R->t);
    if (R->kind == DQ_URI_SENTINEL)
        return R->main.state == DQ_AL_UP && R->role_ok;
    return R->main.state == DQ_AL_UP;
}

const char *dq__routes_why(const dq__routes *R) { return R->why.msg; }

/* Calls that waited may go now (the client tells the state callback
 * when it became connected). */
static void changed(dq__routes *R) { R->h->changed(R->h->ud); }

/* Sends the topology's command cmd on l (reply to fn(priv, seq)).  DQ_OK,
 * or a code with e set. */
static int send_cmd(dq__routes *R, dq__alink *l, int cmd,
                    dq__aconn_reply_fn *fn, void *priv, unsigned seq,
                    dq__err *e) {
    const char *argv[3];
    int argc = dq__topo_argv(&R->t, cmd, argv);
    return dq__alink_send_argv(l, argc, argv, fn, priv, seq, e);
}

/* A reply to the topology's step on l: a node's map, a Sentinel's answer
 * (the sent link) or the ROLE of what it named (the primary's link,
 * dropped when it is no primary). */
static void on_step(void *priv, size_t tag, const dq__reply *r) {
    dq__alink *l = priv;
    dq__routes *R = l->owner;
    R->h->enter(R->h->ud);
    dq__alink_replied(l);
    dq__tact a;
    dq__topo_feed(&R->t, (unsigned)tag, r, dq__mono_us(), &a);
    if (l == &R->main && a.kind == DQ_TA_SEND)
        dq__alink_fail(l, DQ_EIO, R->t.err.msg);
    if (!closing(R))
        act(R, &a);
    R->h->leave(R->h->ud);
}

/* ---- One node ---- */

static void single_up(dq__alink *l) { changed(l->owner); }

/* Every failure is reported, then the calls in flight fail and (an
 * attempt failed) the ops that waited for it. */
static void single_down(dq__alink *l, int code, const char *msg, int was_up) {
    dq__routes *R = l->owner;
    R->h->link_down(R->h->ud, l, code, msg, was_up);
}

/* ---- Cluster ---- */

static void request_refresh(dq__routes *R);
static void node_up(dq__alink *l);
static void node_down(dq__alink *l, int code, const char *msg, int was_up);
static int node_target(dq__alink *l);

/* Node i of the map with its link (parked until kicked), or NULL when out
 * of memory. */
static node *node_at(dq__routes *R, int i) {
    node *n = dq__topo_link(&R->t, i);
    if (n != NULL || i < 0 || i >= R->t.map.nnodes)
        return n;
    if ((n = calloc(1, sizeof(*n))) == NULL)
        return NULL;
    n->idx = i;
    if (dq__alink_init(&n->l, R->h, R, NULL, R->opts, node_up, node_down) !=
            DQ_OK ||
        dq__topo_set_link(&R->t, i, n) != DQ_OK) {
        dq__alink_close(&n->l);
        free(n);
        return NULL;
    }
    n->l.target = node_target;
    aim(R, &n->l, R->t.map.nodes[i].host, R->t.map.nodes[i].port, 1, n->host,
        &n->uri);
    return n;
}

/* Node n's link is wanted now: noted, and started if parked; 1 if up. */
static int want(node *n) {
    n->wanted_us = dq__mono_us();
    if (dq__alink_usable(&n->l))
        return 1;
    dq__alink_kick(&n->l);
    return 0;
}

/* A parked node reconnects when it owns a slot, was wanted lately, or is
 * needed to learn the map (no node is up). */
static int node_target(dq__alink *l) {
    node *n = (node *)l;
    dq__routes *R = l->owner;
    return dq__mono_us() - n->wanted_us < WANTED_US ||
           (R->t.stale && !dq__topo_any_up(&R->t)) || dq__topo_owns(&R->t, n->idx);
}

static void node_up(dq__alink *l) {
    node *n = (node *)l;
    dq__routes *R = l->owner;
    n->failed = 0;
    dq__topo_node_up(&R->t, n->idx, 1);
    if (R->t.stale)
        request_refresh(R);
    changed(R);
}

/* A node's link failed: the map may be out of date (a failover), the
 * calls in flight on it fail. */
static void node_down(dq__alink *l, int code, const char *msg, int was_up) {
    node *n = (node *)l;
    dq__routes *R = l->owner;
    n->failed = 1;
    dq__topo_node_up(&R->t, n->idx, 0);
    dq__err_set(&R->why, code, "%s", msg);
    if (R->t.step != 0 && R->t.to == DQ_TT_NODE && R->t.idx == n->idx) {
        dq__tact a;
        dq__topo_fail(&R->t, R->t.seq, code, msg, &a);
        if (a.kind == DQ_TA_SEND)
            act(R, &a); /* the next up node is asked */
    }
    request_refresh(R);
    R->h->link_down(R->h->ud, l, code, msg, was_up);
}

static void ssub_check(dq__routes *R);

/* The routes' one timer: a cluster's refresh, a Sentinel subscriber's
 * check. */
static void on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__routes *R = arg;
    dq__tact a;
    R->h->enter(R->h->ud);
    if (R->kind == DQ_URI_CLUSTER) {
        dq__topo_refresh(&R->t, dq__mono_us(), &a);
        act(R, &a);
    } else {
        ssub_check(R);
    }
    R->h->leave(R->h->ud);
}

/* Marks the map for a refresh, at most one per DQ_TOPO_REFRESH_GAP_US. */
static void request_refresh(dq__routes *R) {
    if (R->kind != DQ_URI_CLUSTER)
        return;
    dq__topo_stale(&R->t);
    if (R->t.step != 0 || R->tick_ev == NULL ||
        evtimer_pending(R->tick_ev, NULL))
        return;
    dq__alink_arm(R->tick_ev,
                  R->t.asked_us + DQ_TOPO_REFRESH_GAP_US - dq__mono_us());
}

/* Asks the node of a for the map; 0 if it could not be sent (a then
 * holds the next action). */
static int ask_map(dq__routes *R, dq__tact *a) {
    node *n = node_at(R, a->idx);
    dq__err e;
    if (n != NULL && dq__alink_usable(&n->l) &&
        send_cmd(R, &n->l, a->cmd, on_step, &n->l, a->seq, &e) == DQ_OK)
        return 1;
    dq__topo_fail(&R->t, a->seq, DQ_EIO, "cluster: node link down", a);
    return 0;
}

/* The up link of the node that owns slot, or NULL (getting one started). */
static dq__alink *cluster_get(dq__routes *R, int slot) {
    if (!R->t.loaded) {
        request_refresh(R);
        return NULL;
    }
    node *n = node_at(R, dq__topo_owner(&R->t, slot));
    if (n == NULL) {
        request_refresh(R); /* no owner known (or out of memory) */
        return NULL;
    }
    if (want(n))
        return &n->l;
    if (n->failed)
        request_refresh(R); /* its node may have failed over */
    return NULL;
}

/* ---- Sentinel ---- */

/* Finds the primary, unless that is under way. */
static void resolve(dq__routes *R) {
    dq__tact a;
    dq__topo_resolve(&R->t, &a);
    act(R, &a);
}

/* Points l at Sentinel number idx (of the URI's), host in host and URI
 * in u.  0 when the URI names none. */
static int sentinel_at(dq__routes *R, dq__alink *l, int idx, char *host,
                       dq__uri *u) {
    if (R->uri->nseeds < 1)
        return 0;
    const dq__seed *s = &R->uri->seeds[idx % R->uri->nseeds];
    aim(R, l, s->host, s->port, 0, host, u);
    return 1;
}

/* The Sentinel link connects only while a Sentinel is to be asked. */
static int sentinel_target(dq__alink *l) {
    dq__routes *R = l->owner;
    return dq__topo_step_is(&R->t, DQ_TC_MASTER, DQ_TT_SENTINEL) &&
           sentinel_at(R, l, R->t.idx, R->shost, &R->suri);
}

static void sentinel_up(dq__alink *l) {
    dq__routes *R = l->owner;
    dq__err e;
    int rc = DQ_OK;
    R->sseq = R->t.seq;
    if (!dq__topo_step_is(&R->t, DQ_TC_MASTER, DQ_TT_SENTINEL))
        dq__alink_park(l); /* the primary was named meanwhile */
    else if ((rc = send_cmd(R, l, DQ_TC_MASTER, on_step, l, R->sseq, &e)))
        dq__alink_fail(l, rc, e.msg);
}

/* A Sentinel failed us (unreachable, or knows no such primary): the next
 * one is asked after the backoff. */
static void sentinel_down(dq__alink *l, int code, const char *msg,
                          int was_up) {
    (void)was_up;
    dq__routes *R = l->owner;
    dq__tact a;
    dq__topo_fail(&R->t, R->sseq, code, msg, &a);
    act(R, &a);
    dq__err_set(&R->why, code, "%s", msg);
    if (!closing(R))
        R->h->failed(R->h->ud, code, msg);
}

/* Ask the Sentinel of a (the sent link retries by itself when it failed;
 * one that answered without an address is dropped for the next). */
static void ask_sentinel(dq__routes *R, const dq__tact *a) {
    R->sseq = 0;
    if (R->sent.state == DQ_AL_UP)
        dq__alink_fail(&R->sent, R->t.err.code, R->t.err.msg);
    if (closing(R))
        return;
    R->sseq = a->seq;
    dq__alink_kick(&R->sent);
}

/* The primary is to be checked at a's address (a Sentinel's answer, or a
 * failover announced): asking stops, and the primary's link goes there
 * (dropped first if it is up or connecting elsewhere); subscribers
 * follow. */
static void take_primary(dq__routes *R, const dq__tact *a) {
    dq__alink_reset_backoff(&R->sent);
    dq__alink_park(&R->sent);
    R->mseq = a->seq;
    dq__alink *m = &R->main;
    int there = strcmp(R->chost, a->host) == 0 && R->cport == a->port;
    dq__err e;
    if (m->state == DQ_AL_IDLE) {
        dq__alink_kick(m);
    } else if (m->state == DQ_AL_UP && there) {
        R->role_ok = 0;
        if (send_cmd(R, m, DQ_TC_ROLE, on_step, m, a->seq, &e) != DQ_OK)
            dq__alink_fail(m, e.code, e.msg);
    } else if ((m->state == DQ_AL_UP || m->state == DQ_AL_CONNECTING) &&
               !there) {
        char msg[700];
        snprintf(msg, sizeof(msg), "primary '%s' moved from %s:%d to %s:%d",
                 R->uri->master, R->chost, R->cport, a->host, a->port);
        R->switching = 1;
        dq__alink_fail(m, DQ_EIO, msg);
        if (closing(R))
            return;
        if (m->state == DQ_AL_WAIT)
            dq__alink_start(m, 0);
    }
    if (!closing(R))
        changed(R); /* subscribers follow the primary */
}

/* The primary's link connects only to an address the Sentinels gave and
 * that is not to be asked again; else it waits for them. */
static int primary_target(dq__alink *l) {
    dq__routes *R = l->owner;
    const char *host;
    int port;
    if (dq__topo_target(&R->t, 0, &host, &port) != 1) {
        resolve(R);
        return 0;
    }
    aim(R, l, host, port, 1, R->chost, &R->puri);
    R->cport = port;
    return 1;
}

/* Connected to what the Sentinels named: used once ROLE says master. */
static void primary_up(dq__alink *l) {
    dq__routes *R = l->owner;
    dq__err e;
    R->role_ok = 0;
    if (!dq__topo_step_is(&R->t, DQ_TC_ROLE, DQ_TT_PRIMARY)) {
        dq__tact a;
        dq__topo_check(&R->t, &a); /* a reconnect: checked again */
    }
    R->mseq = R->t.seq;
    if (dq__topo_step_is(&R->t, DQ_TC_ROLE, DQ_TT_PRIMARY) &&
        send_cmd(R, l, DQ_TC_ROLE, on_step, l, R->mseq, &e) != DQ_OK)
        dq__alink_fail(l, e.code, e.msg);
}

/* The primary's link failed: ask the Sentinels again before reconnecting
 * (unless it was dropped for the address they just gave). */
static void primary_down(dq__alink *l, int code, const char *msg,
                         int was_up) {
    dq__routes *R = l->owner;
    int sw = R->switching;
    R->role_ok = 0;
    R->switching = 0;
    dq__err_set(&R->why, code, "%s", msg);
    R->h->link_down(R->h->ud, l, code, msg, was_up);
    if (closing(R) || sw)
        return;
    dq__tact a;
    if (dq__topo_step_is(&R->t, DQ_TC_ROLE, DQ_TT_PRIMARY) && R->mseq == R->t.seq)
        dq__topo_fail(&R->t, R->mseq, code, msg, &a);
    else
        dq__topo_resolve(&R->t, &a);
    act(R, &a);
}

/* ---- Sentinel: failovers announced ----
 *
 * One more link (topo.h), to one Sentinel at a time: SENTINEL
 * GET-MASTER-ADDR-BY-NAME, then SUBSCRIBE +switch-master in the same
 * pipeline; its probe is the SUBSCRIBE again (Redis confirms it once
 * more), its confirmation also due within the command timeout (the
 * link's own timer). */

static void on_switch(void *priv, size_t tag, const dq__reply *r);

/* Checks the subscriber now and arms the next check. */
static void ssub_check(dq__routes *R) {
    dq__alink *l = &R->ssub;
    int64_t now = dq__mono_us(), at;
    dq__err e;
    int what = dq__topo_sub_tick(&R->t, now, &at);
    if (what == DQ_TS_OPEN)
        dq__alink_kick(l);
    else if (what == DQ_TS_DEAD)
        dq__alink_fail(l, DQ_ETIMEDOUT, "Sentinel subscriber: no answer");
    else if (what == DQ_TS_PROBE && l->state == DQ_AL_UP &&
             dq__aconn_subscribe(l->conn, DQ_SENTINEL_SWITCH, on_switch, R,
                                 &e) == DQ_OK)
        dq__alink_sent(l);
    if (!closing(R) && l->state != DQ_AL_CLOSED && R->tick_ev != NULL)
        dq__alink_arm(R->tick_ev, at > now ? at - now : DQ_TOPO_QUIET_US);
}

/* The subscriber listens on the Sentinels in turn, after the backoff. */
static int ssub_target(dq__alink *l) {
    dq__routes *R = l->owner;
    int64_t at;
    int64_t now = dq__mono_us();
    if (dq__topo_sub_tick(&R->t, now, &at) != DQ_TS_OPEN) {
        dq__alink_arm(R->tick_ev, at - now);
        return 0;
    }
    return sentinel_at(R, l, R->t.sub_idx, R->sshost, &R->ssuri);
}

/* The subscriber's Sentinel's answer before it subscribed (tag 1), a
 * message or confirmation of the +switch-master subscription (0). */
static void on_switch(void *priv, size_t tag, const dq__reply *r) {
    dq__routes *R = priv;
    dq__topo_sub_heard(&R->t, dq__mono_us());
    if (tag || dq__topo_sub_confirmed(r))
        dq__alink_replied(&R->ssub); /* each command counted pending */
    if (tag ? dq__topo_sub_master(&R->t, r) != 1 : !dq__topo_switch(&R->t, r))
        return;
    R->h->enter(R->h->ud);
    resolve(R);
    R->h->leave(R->h->ud);
}

static void ssub_up(dq__alink *l) {
    dq__routes *R = l->owner;
    dq__err e;
    int rc = send_cmd(R, l, DQ_TC_MASTER, on_switch, R, 1, &e);
    if (rc == DQ_OK)
        rc = dq__aconn_subscribe(l->conn, DQ_SENTINEL_SWITCH, on_switch, R, &e);
    if (rc != DQ_OK) {
        dq__alink_fail(l, rc, e.msg);
        return;
    }
    dq__alink_sent(l); /* its confirmation is due within the timeout */
    dq__topo_sub_up(&R->t, R->t.sub_idx, dq__mono_us());
    ssub_check(R);
}

/* The subscriber's Sentinel is gone: the next one, after the backoff.
 * No call rides on it: nothing to report. */
static void ssub_down(dq__alink *l, int code, const char *msg, int was_up) {
    (void)code;
    (void)msg;
    (void)was_up;
    dq__routes *R = l->owner;
    dq__topo_sub_failed(&R->t, dq__mono_us());
}

/* ---- Carrying out the topology's actions ---- */

static void act(dq__routes *R, dq__tact *a) {
    while (a->kind == DQ_TA_SEND && a->to == DQ_TT_NODE && !ask_map(R, a))
        ;
    if (a->kind == DQ_TA_SEND && a->to == DQ_TT_SENTINEL) {
        ask_sentinel(R, a);
    } else if (a->kind == DQ_TA_SEND && a->to == DQ_TT_PRIMARY) {
        take_primary(R, a);
    } else if (a->kind == DQ_TA_READY) {
        if (R->kind == DQ_URI_SENTINEL) {
            R->role_ok = 1;
            dq__alink_reset_backoff(&R->main);
        } else if (R->t.stale) { /* asked for again meanwhile */
            request_refresh(R);
        }
        changed(R);
    } else if (a->kind == DQ_TA_FAILED) {
        R->why = R->t.err;
        request_refresh(R);
        R->h->failed(R->h->ud, a->code, R->t.err.msg);
    } else if (a->kind == DQ_TA_CONNECT) {
        for (int i = 0; i < R->t.map.nnodes; i++) {
            node *n = node_at(R, i);
            if (n != NULL && n->l.state == DQ_AL_IDLE)
                want(n);
        }
    }
}

/* ---- Entry points ---- */

/* Sets up the links of a Sentinel URI. */
static int sentinel_new(dq__routes *R) {
    const dq__ahost *h = R->h;
    R->sopts = *R->opts;
    R->sopts.user = R->sopts.password = NULL;
    int rc = dq__alink_init(&R->main, h, R, NULL, R->opts, primary_up,
                            primary_down);
    if (rc == DQ_OK)
        rc = dq__alink_init(&R->sent, h, R, NULL, &R->sopts, sentinel_up,
                            sentinel_down);
    if (rc == DQ_OK)
        rc = dq__alink_init(&R->ssub, h, R, NULL, &R->sopts, ssub_up,
                            ssub_down);
    R->main.target = primary_target;
    R->sent.target = sentinel_target;
    R->ssub.target = ssub_target;
    /* Reachable but of no use (no such primary, not a primary yet):
     * the backoff keeps growing until they did their job. */
    R->main.keep_backoff = R->sent.keep_backoff = 1;
    return rc;
}

int dq__routes_new(const dq__ahost *h, const dq__uri *uri,
                   const dq_options *opts, const char *where,
                   dq__routes **out, dq__err *err) {
    dq__routes *R = calloc(1, sizeof(*R));
    *out = R;
    if (R == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    R->h = h;
    R->uri = uri;
    R->opts = opts;
    R->kind = uri->kind;
    snprintf(R->where, sizeof(R->where), "%s", where);
    int rc = dq__topo_init(&R->t, uri, 0, opts->command_timeout_ms, err);
    if (rc == DQ_OK && dq__topo_routed(&R->t) &&
        (R->tick_ev = evtimer_new(h->base, on_tick, R)) == NULL)
        rc = DQ_ENOMEM;
    if (rc == DQ_OK && R->kind == DQ_URI_SENTINEL) {
        rc = sentinel_new(R);
    } else if (rc == DQ_OK && R->kind != DQ_URI_CLUSTER) {
        rc = dq__alink_init(&R->main, h, R, uri, opts, single_up,
                            single_down);
        snprintf(R->main.where, sizeof(R->main.where), "%s", where);
    }
    if (rc != DQ_OK)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    return DQ_OK;
}

void dq__routes_start(dq__routes *R) {
    if (R->kind == DQ_URI_CLUSTER) {
        request_refresh(R);
    } else if (R->kind == DQ_URI_SENTINEL) {
        resolve(R);
        dq__alink_start(&R->ssub, 0);
    } else {
        dq__alink_start(&R->main, 0);
    }
}

void dq__routes_close(dq__routes *R) {
    if (R == NULL)
        return;
    dq__alink_close(&R->main);
    dq__alink_close(&R->sent);
    dq__alink_close(&R->ssub);
    for (int i = 0; i < R->t.nup; i++)
        if (dq__topo_link(&R->t, i) != NULL)
            dq__alink_close(dq__topo_link(&R->t, i));
    if (R->tick_ev != NULL)
        event_free(R->tick_ev);
    R->tick_ev = NULL;
}

void dq__routes_free(dq__routes *R) {
    if (R == NULL)
        return;
    dq__routes_close(R);
    for (int i = 0; i < R->t.nup; i++)
        free(dq__topo_link(&R->t, i));
    dq__topo_clear(&R->t);
    free(R);
}

dq__alink *dq__routes_get(dq__routes *R, int slot) {
    if (R->kind == DQ_URI_CLUSTER)
        return cluster_get(R, slot);
    if (R->kind == DQ_URI_SENTINEL)
        return R->role_ok && dq__alink_usable(&R->main) ? &R->main : NULL;
    return R->main.state == DQ_AL_UP ? &R->main : NULL;
}

dq__alink *dq__routes_at(dq__routes *R, const char *host, int port) {
    if (R->kind != DQ_URI_CLUSTER)
        return NULL;
    node *n = node_at(R, dq__slotmap_node(&R->t.map, host, port));
    return n != NULL && want(n) ? &n->l : NULL;
}

void dq__routes_moved(dq__routes *R, int slot, const char *host, int port) {
    if (R->kind != DQ_URI_CLUSTER)
        return;
    dq__topo_moved(&R->t, slot, host, port);
    request_refresh(R);
}

void dq__routes_stale(dq__routes *R) {
    if (R->kind == DQ_URI_CLUSTER) {
        request_refresh(R);
    } else if (R->kind == DQ_URI_SENTINEL) {
        dq__topo_stale(&R->t);
        resolve(R);
    }
}

int dq__routes_target(dq__routes *R, int slot, char *host, size_t hsize,
                      int *port) {
    const char *h;
    int k = dq__topo_target(&R->t, slot, &h, port);
    if (k == 0 && R->kind == DQ_URI_SENTINEL)
        resolve(R);
    else if (k == 0)
        request_refresh(R);
    else if (k == 1)
        snprintf(host, hsize, "%s", h);
    return k;
}

void dq__routes_where(const dq__routes *R, int slot, char *out, size_t n) {
    dq__topo_where(&R->t, slot, R->where, out, n);
}
