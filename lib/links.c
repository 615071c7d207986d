/*
 * links.c - the blocking client's links to one node, a cluster or a
 * Sentinel-named primary (see links.h).
 *
 * The topology's logic (which node or Sentinel to ask, what their replies
 * mean, the subscriber's timing) is topo.c's; this unit carries out its
 * steps with blocking I/O.
 *
 * Sentinel, without a thread: the connection to the Sentinel that named
 * the primary stays open, subscribed to "+switch-master" (in the same
 * pipeline as its SENTINEL GET-MASTER-ADDR-BY-NAME).  Before each
 * operation is routed (client.c), and whenever dq_poll_wait subscribes or
 * sleeps (wake.c), it is read without blocking - not between the calls of
 * one operation, whose calls and WAIT stay on one primary.  A dead one is
 * reopened on demand, one Sentinel per try waiting at most 500 ms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "links.h"
#include "topo.h"
#include "uri.h"

#define SUB_OPEN_MS 500 /* a reopen inside a call waits at most this for
                           the connect and for the answer */

struct dq__links {
    const dq__uri *uri;
    const dq_options *opts;
    dq__topo t;       /* the topology (slot map, primary, subscriber) */
    dq__conn *one;    /* the one node, or the primary Sentinels named */
    char where[300];
    dq__conn *sub;    /* Sentinel: subscribed to +switch-master, or NULL */
};

int dq__links_new(const dq__uri *uri, const dq_options *opts,
                  dq__links **out, dq__err *err) {
    dq__links *L = calloc(1, sizeof(*L));
    *out = L;
    if (L == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    L->uri = uri;
    L->opts = opts;
    return dq__topo_init(&L->t, uri, 1, opts->command_timeout_ms, err);
}

void dq__links_free(dq__links *L) {
    if (L == NULL)
        return;
    dq__conn_free(L->one);
    dq__conn_free(L->sub);
    for (int i = 0; i < L->t.map.nnodes; i++)
        dq__conn_free(dq__topo_link(&L->t, i));
    dq__topo_clear(&L->t);
    free(L);
}

int dq__links_routed(const dq__links *L) { return dq__topo_routed(&L->t); }

int dq__links_cluster(const dq__links *L) {
    return L->uri->kind == DQ_URI_CLUSTER;
}

/* Connects to host:port with the URI's TLS, database and credentials
 * (creds = 0: none and database 0, for a Sentinel) and options opts. */
static int open_with(dq__links *L, const char *host, int port, int creds,
                     const dq_options *opts, dq__conn **out, dq__err *err) {
    char buf[256];
    dq__uri node;
    dq__topo_uri(&L->t, host, port, creds, buf, sizeof(buf), &node);
    dq_options o = *opts;
    if (!creds)
        o.user = o.password = NULL;
    dq__conn_cfg cfg = {&node, &o, NULL};
    return dq__conn_open(&cfg, out, err);
}

/* Drops *c if it broke (or must go: drop). */
static void drop_if(dq__conn **c, int drop) {
    if (*c != NULL && (drop || dq__conn_broken(*c))) {
        dq__conn_free(*c);
        *c = NULL;
    }
}

/* The link to node i of the map, opened if needed. */
static int node_link(dq__links *L, int i, dq__conn **out, dq__err *err) {
    dq__conn *c = dq__topo_link(&L->t, i);
    const dq__node_addr *a = &L->t.map.nodes[i];
    drop_if(&c, 0);
    int rc = c != NULL ? DQ_OK : open_with(L, a->host, a->port, 1, L->opts, &c, err);
    if (dq__topo_set_link(&L->t, i, c) != DQ_OK) {
        dq__conn_free(c);
        c = NULL;
        rc = dq__err_set(err, DQ_ENOMEM, "out of memory");
    }
    *out = c;
    return rc;
}

/* ---- Carrying out the topology's steps ---- */

/* Asks Sentinel idx at host:port for the primary's address (*r).
 * subscribe: the same connection then subscribes to +switch-master (in
 * one pipeline: nothing the Sentinel does falls between the two) and,
 * confirmed after an answer that names a primary, is kept as L->sub.
 * quick: a reopen inside a call, where a Sentinel that hangs must not
 * hold that call for the whole timeouts. */
static int ask_sentinel(dq__links *L, int idx, const char *host, int port,
                        int subscribe, int quick, dq__reply **r,
                        dq__err *err) {
    dq__conn *s;
    dq_options o = *L->opts;
    if (quick && (o.connect_timeout_ms <= 0 || o.connect_timeout_ms > SUB_OPEN_MS))
        o.connect_timeout_ms = SUB_OPEN_MS;
    if (quick && (o.command_timeout_ms <= 0 || o.command_timeout_ms > SUB_OPEN_MS))
        o.command_timeout_ms = SUB_OPEN_MS;
    int rc = open_with(L, host, port, 0, &o, &s, err);
    if (rc != DQ_OK)
        return rc;
    const char *argv[3];
    int argc = dq__topo_argv(&L->t, DQ_TC_MASTER, argv);
    const char *sub[2] = {"SUBSCRIBE", DQ_SENTINEL_SWITCH};
    rc = dq__conn_append(s, argc, argv, NULL, err);
    if (rc == DQ_OK && subscribe)
        rc = dq__conn_append(s, 2, sub, NULL, err);
    if (rc == DQ_OK)
        rc = dq__conn_read(s, r, err);
    char h[256];
    int p;
    dq__reply *c = NULL;
    dq__err e;
    /* Not confirmed (an ACL that refuses it): no subscriber, the answer
     * still counts. */
    if (rc == DQ_OK && subscribe &&
        dq__sentinel_addr(*r, h, sizeof(h), &p) == DQ_OK &&
        dq__conn_read(s, &c, &e) == DQ_OK && dq__topo_sub_confirmed(c)) {
        dq__conn_free(L->sub);
        L->sub = s;
        s = NULL;
        dq__topo_sub_up(&L->t, idx, dq__mono_us());
    }
    dq__reply_free(c);
    dq__conn_free(s);
    return rc;
}

/* Carries out SEND a with blocking I/O; its reply or failure goes to the
 * topology, whose next action lands in a.  A primary that passed ROLE
 * becomes L->one. */
static void step(dq__links *L, dq__tact *a) {
    dq__reply *r = NULL;
    dq__conn *c = NULL;
    dq__err e;
    const char *argv[3];
    int argc = dq__topo_argv(&L->t, a->cmd, argv);
    int rc, to = a->to;
    if (to == DQ_TT_SENTINEL)
        rc = ask_sentinel(L, a->idx, a->host, a->port, L->sub == NULL, 0, &r,
                          &e);
    else if (to == DQ_TT_NODE)
        rc = node_link(L, a->idx, &c, &e);
    else
        rc = open_with(L, a->host, a->port, 1, L->opts, &c, &e);
    if (rc == DQ_OK && to != DQ_TT_SENTINEL)
        rc = dq__conn_call(c, argc, argv, NULL, &r, &e);
    if (rc == DQ_OK)
        dq__topo_feed(&L->t, a->seq, r, dq__mono_us(), a);
    else
        dq__topo_fail(&L->t, a->seq, rc, e.msg, a);
    dq__reply_free(r);
    if (to == DQ_TT_PRIMARY && a->kind == DQ_TA_READY)
        L->one = c;
    else if (to == DQ_TT_PRIMARY)
        dq__conn_free(c);
}

/* Runs the topology's steps from action a until it is ready or failed. */
static int run(dq__links *L, dq__tact *a, dq__err *err) {
    while (a->kind == DQ_TA_SEND)
        step(L, a);
    if (a->kind != DQ_TA_FAILED)
        return DQ_OK;
    return dq__err_set(err, a->code, "%s", L->t.err.msg);
}

/* ---- Sentinel: failovers announced ---- */

/* A new subscriber on the next Sentinel in turn (one connect at most);
 * if it names another primary than ours, a failover was missed while
 * nobody listened: the route goes stale (the Sentinels are asked). */
static void sub_reopen(dq__links *L, int64_t now) {
    const dq__seed *s = &L->uri->seeds[L->t.sub_idx % L->uri->nseeds];
    dq__reply *r = NULL;
    dq__err e;
    if (ask_sentinel(L, L->t.sub_idx, s->host, s->port, 1, 1, &r, &e) !=
            DQ_OK ||
        L->sub == NULL)
        dq__topo_sub_failed(&L->t, now);
    else
        dq__topo_sub_master(&L->t, r);
    dq__reply_free(r);
}

int dq__links_listen(dq__links *L) {
    if (L->uri->kind != DQ_URI_SENTINEL || L->uri->nseeds < 1)
        return 0;
    int64_t now = dq__mono_us(), at;
    if (L->sub == NULL) {
        /* None yet (a resolve opens one) or it died: on demand. */
        if (L->one != NULL && dq__topo_sub_tick(&L->t, now, &at) == DQ_TS_OPEN)
            sub_reopen(L, now);
        return L->t.stale;
    }
    dq__err e;
    int rc = dq__conn_broken(L->sub) ? -1
                                     : dq__conn_wait_readable(L->sub, 0, &e);
    dq__reply *r;
    int got;
    while ((got = dq__conn_buffered(L->sub, &r, &e)) == 1) {
        dq__topo_switch(&L->t, r);
        dq__reply_free(r);
        dq__topo_sub_heard(&L->t, now); /* a message or the PING's answer */
    }
    int what = rc >= 0 && got >= 0 ? dq__topo_sub_tick(&L->t, now, &at)
                                   : DQ_TS_DEAD;
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    if (what == DQ_TS_PROBE &&
        (dq__conn_append_raw(L->sub, ping, sizeof(ping) - 1, &e) != DQ_OK ||
         dq__conn_flush(L->sub, &e) != DQ_OK))
        what = DQ_TS_DEAD;
    if (what == DQ_TS_DEAD) {
        /* That Sentinel died or hangs: reopened on demand, on the next. */
        dq__conn_free(L->sub);
        L->sub = NULL;
        dq__topo_sub_failed(&L->t, now);
    }
    return L->t.stale;
}

dq__conn *dq__links_sentinel_sub(dq__links *L) {
    return L->sub != NULL && !dq__conn_broken(L->sub) ? L->sub : NULL;
}

unsigned dq__links_epoch(const dq__links *L) { return L->t.epoch; }

/* ---- Entry points ---- */

/* Learns the slot map (links that broke are dropped first: their node may
 * be gone for good). */
static int refresh_map(dq__links *L, dq__err *err) {
    for (int i = 0; i < L->t.nup; i++) {
        dq__conn *c = dq__topo_link(&L->t, i);
        drop_if(&c, 0);
        dq__topo_set_link(&L->t, i, c);
        dq__topo_node_up(&L->t, i, c != NULL);
    }
    dq__tact a;
    dq__topo_refresh(&L->t, dq__mono_us(), &a);
    return run(L, &a, err);
}

/* The primary's link, found first if needed. */
static int primary_get(dq__links *L, dq__conn **out, dq__err *err) {
    drop_if(&L->one, L->t.stale);
    int rc = DQ_OK;
    if (L->one == NULL) {
        dq__tact a;
        dq__topo_resolve(&L->t, &a);
        rc = run(L, &a, err);
    }
    if (rc == DQ_OK && L->one == NULL)
        rc = dq__err_set(err, DQ_EIO, "no Sentinel answered");
    *out = L->one;
    return rc;
}

int dq__links_get(dq__links *L, int slot, dq__conn **out, dq__err *err) {
    int kind = L->uri->kind;
    if (kind == DQ_URI_SENTINEL)
        return primary_get(L, out, err);
    if (kind != DQ_URI_CLUSTER) {
        drop_if(&L->one, 0);
        if (L->one == NULL) {
            dq__conn_cfg cfg = {L->uri, L->opts, NULL};
            int rc = dq__conn_open(&cfg, &L->one, err);
            if (rc != DQ_OK)
                return rc;
        }
        *out = L->one;
        return DQ_OK;
    }
    int rc;
    if (L->t.stale && (rc = refresh_map(L, err)) != DQ_OK)
        return rc;
    int i = L->t.map.owner[slot];
    if (i < 0) {
        L->t.stale = 1;
        return dq__err_set(err, DQ_EIO,
                          "cluster: no node serves hash slot %d (the "
                          "cluster is not fully covered)",
                          slot);
    }
    if ((rc = node_link(L, i, out, err)) != DQ_OK)
        L->t.stale = 1; /* its node may have failed over */
    return rc;
}

int dq__links_at(dq__links *L, const char *host, int port, dq__conn **out,
                 dq__err *err) {
    int i = dq__slotmap_node(&L->t.map, host, port);
    if (i < 0)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    return node_link(L, i, out, err);
}

void dq__links_moved(dq__links *L, int slot, const char *host, int port) {
    dq__topo_moved(&L->t, slot, host, port);
}

void dq__links_stale(dq__links *L) { dq__topo_stale(&L->t); }

int dq__links_open_new(dq__links *L, int slot, dq__conn **out,
                       dq__err *err) {
    dq__conn *c;
    int rc = dq__links_get(L, slot, &c, err);
    if (rc != DQ_OK)
        return rc;
    const char *host;
    int port, k = dq__topo_target(&L->t, slot, &host, &port);
    if (k == 1)
        return open_with(L, host, port, 1, L->opts, out, err);
    if (k == 0)
        return dq__err_set(err, DQ_EIO, "the topology is being learnt");
    dq__conn_cfg cfg = {L->uri, L->opts, NULL};
    return dq__conn_open(&cfg, out, err);
}

const char *dq__links_where(dq__links *L, int slot) {
    return dq__topo_addr(&L->t, slot, L->where, sizeof(L->where));
}

int dq__links_owns(const dq__links *L, const dq__conn *c) {
    if (c != NULL && c == L->one)
        return 1;
    for (int i = 0; c != NULL && i < L->t.nup; i++)
        if (dq__topo_link(&L->t, i) == c)
            return 1;
    return 0;
}

int dq__links_node_slot(const dq__links *L, int i) {
    return dq__topo_node_slot(&L->t, i);
}
