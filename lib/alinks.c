/*
 * alinks.c - the async client's links and routes (see alinks.h): one
 * reconnecting link, then the routes of a URI over such links - one node,
 * a Sentinel-named primary, the nodes of a Redis Cluster.
 *
 * Every entry from the loop (timers, replies, state changes) runs between
 * dq__async_enter and dq__async_leave, like the rest of the async client;
 * a call into async.c that may run user code (dq__async_routes_changed,
 * dq__async_link_down, dq__async_state) may free the client, so code
 * checks dq__async_closing before it touches anything after one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "alinks.h"
#include "resp.h"
#include "route.h"
#include "uri.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000
#define REFRESH_GAP_US 100000 /* at most one map refresh per 100 ms */
#define WANTED_US 10000000    /* a node wanted this recently reconnects */
#define SSUB_CHECK_US 5000000 /* the Sentinel subscription's liveness check */

/* ---- Link mechanics ---- */

/* us microseconds as a timeval (negative: 0). */
static struct timeval tv_us(int64_t us) {
    struct timeval tv;
    if (us < 0)
        us = 0;
    tv.tv_sec = (time_t)(us / 1000000);
    tv.tv_usec = (suseconds_t)(us % 1000000);
    return tv;
}

static void arm(struct event *ev, int64_t us) {
    struct timeval tv = tv_us(us);
    evtimer_add(ev, &tv);
}

static int64_t cmd_timeout_us(const dq__alink *l) {
    return dq__async_opts(l->a)->command_timeout_ms * 1000;
}

/* "host:port" or "unix:path" of u into l->where. */
static void set_where(dq__alink *l, const dq__uri *u) {
    if (u == NULL)
        snprintf(l->where, sizeof(l->where), "?");
    else if (u->kind == DQ_URI_UNIX)
        snprintf(l->where, sizeof(l->where), "unix:%s", u->path);
    else
        snprintf(l->where, sizeof(l->where), "%s:%d", u->host, u->port);
}

void dq__alink_fail(dq__alink *l, int code, const char *msg) {
    int was_up = l->state == DQ_AL_UP;
    dq__aconn_close(l->conn);
    l->conn = NULL;
    l->pending = 0;
    l->doomed = 0;
    evtimer_del(l->tick_ev);
    l->state = DQ_AL_WAIT;
    arm(l->retry_ev, l->backoff_ms * 1000);
    l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                       : l->backoff_ms * 2;
    l->down(l, code, msg, was_up);
}

/* The connection's state: ready means up (backoff reset, owner told);
 * anything else fails the link. */
static void link_on_state(void *priv, int code, const char *msg) {
    dq__alink *l = priv;
    dq_async *a = l->a;
    dq__async_enter(a);
    if (code == DQ_OK) {
        l->state = DQ_AL_UP;
        if (!l->keep_backoff)
            l->backoff_ms = BACKOFF_MIN_MS;
        l->pending = 0;
        l->last_us = dq__mono_us();
        evtimer_del(l->tick_ev);
        l->up(l);
    } else {
        dq__alink_fail(l, code, msg);
    }
    dq__async_leave(a);
}

/* The retry timer: opens a new connection (unless the owner parks the
 * link), bounded by the connect timeout. */
static void link_on_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__alink *l = arg;
    dq_async *a = l->a;
    dq__async_enter(a);
    if (l->target != NULL && !l->target(l)) {
        l->state = DQ_AL_IDLE;
        dq__async_leave(a);
        return;
    }
    dq__conn_cfg cfg = {l->uri, l->opts, dq__async_dns(a, l->uri)};
    dq__err e;
    int rc = dq__aconn_open(&cfg, dq__async_base(a), link_on_state, l,
                            &l->conn, &e);
    if (rc != DQ_OK) {
        dq__alink_fail(l, rc, e.msg);
    } else {
        l->state = DQ_AL_CONNECTING;
        int64_t ct = dq__async_opts(a)->connect_timeout_ms * 1000;
        if (ct > 0) {
            l->connect_deadline_us = dq__mono_us() + ct;
            arm(l->tick_ev, ct);
        }
    }
    dq__async_leave(a);
}

/* The link's one timer: fails a connection not ready by its deadline, one
 * whose replies are later than the command timeout, or one found closed
 * by the server; else re-arms. */
static void link_on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__alink *l = arg;
    dq_async *a = l->a;
    const dq_options *o = dq__async_opts(a);
    char msg[400];
    dq__async_enter(a);
    int64_t now = dq__mono_us();
    if (l->state == DQ_AL_CONNECTING) {
        if (now >= l->connect_deadline_us) {
            snprintf(msg, sizeof(msg),
                     "connect to %s: not ready within %" PRId64
                     " ms (DQ_OPT_CONNECT_TIMEOUT_MS)",
                     l->where, o->connect_timeout_ms);
            dq__alink_fail(l, DQ_ETIMEDOUT, msg);
        } else {
            arm(l->tick_ev, l->connect_deadline_us - now);
        }
    } else if (l->state == DQ_AL_UP && l->doomed) {
        snprintf(msg, sizeof(msg), "connection to %s lost: closed by the server",
                 l->where);
        dq__alink_fail(l, DQ_EIO, msg);
    } else if (l->state == DQ_AL_UP && l->pending > 0 && cmd_timeout_us(l) > 0) {
        int64_t due = l->last_us + cmd_timeout_us(l);
        if (now >= due) {
            snprintf(msg, sizeof(msg),
                     "%s did not answer within %" PRId64
                     " ms (DQ_OPT_COMMAND_TIMEOUT_MS): connection dropped",
                     l->where, o->command_timeout_ms);
            dq__alink_fail(l, DQ_ETIMEDOUT, msg);
        } else {
            arm(l->tick_ev, due - now);
        }
    }
    dq__async_leave(a);
}

int dq__alink_init(dq__alink *l, dq_async *a, void *owner,
                   const dq__uri *uri, const dq_options *opts,
                   void (*up)(dq__alink *),
                   void (*down)(dq__alink *, int, const char *, int)) {
    memset(l, 0, sizeof(*l));
    l->a = a;
    l->owner = owner;
    l->uri = uri;
    l->opts = opts;
    l->up = up;
    l->down = down;
    l->state = DQ_AL_IDLE;
    l->backoff_ms = BACKOFF_MIN_MS;
    set_where(l, uri);
    l->retry_ev = evtimer_new(dq__async_base(a), link_on_retry, l);
    l->tick_ev = evtimer_new(dq__async_base(a), link_on_tick, l);
    if (l->retry_ev == NULL || l->tick_ev == NULL)
        return DQ_ENOMEM;
    return DQ_OK;
}

void dq__alink_start(dq__alink *l, int64_t delay_ms) {
    l->state = DQ_AL_WAIT;
    arm(l->retry_ev, delay_ms * 1000);
}

void dq__alink_kick(dq__alink *l) {
    if (l->state == DQ_AL_IDLE && l->retry_ev != NULL)
        dq__alink_start(l, 0);
}

void dq__alink_reset_backoff(dq__alink *l) { l->backoff_ms = BACKOFF_MIN_MS; }

void dq__alink_park(dq__alink *l) {
    dq__aconn_close(l->conn);
    l->conn = NULL;
    l->pending = 0;
    l->doomed = 0;
    if (l->tick_ev != NULL)
        evtimer_del(l->tick_ev);
    if (l->retry_ev != NULL)
        evtimer_del(l->retry_ev);
    if (l->state != DQ_AL_CLOSED)
        l->state = DQ_AL_IDLE;
}

void dq__alink_close(dq__alink *l) {
    dq__aconn_close(l->conn);
    l->conn = NULL;
    if (l->retry_ev != NULL)
        event_free(l->retry_ev);
    if (l->tick_ev != NULL)
        event_free(l->tick_ev);
    l->retry_ev = l->tick_ev = NULL;
    l->state = DQ_AL_CLOSED;
}

void dq__alink_sent(dq__alink *l) {
    if (l->pending++ == 0) {
        l->last_us = dq__mono_us();
        if (cmd_timeout_us(l) > 0)
            arm(l->tick_ev, cmd_timeout_us(l));
    }
}

void dq__alink_replied(dq__alink *l) {
    if (l->pending > 0)
        l->pending--;
    l->last_us = dq__mono_us();
}

int dq__alink_send(dq__alink *l, const char *resp, size_t len,
                   dq__aconn_reply_fn *fn, void *priv, size_t tag,
                   dq__err *err) {
    if (l->state != DQ_AL_UP || l->conn == NULL)
        return dq__err_set(err, DQ_EIO, "connection to %s is down", l->where);
    int rc = dq__aconn_send_raw(l->conn, resp, len, fn, priv, tag, err);
    if (rc == DQ_OK)
        dq__alink_sent(l);
    return rc;
}

int dq__alink_usable(dq__alink *l) {
    if (l->state != DQ_AL_UP || l->doomed)
        return 0;
    if (l->pending > 0)
        return 1; /* replies are due: a dead server fails them anyway */
    /* Idle: a server that died meanwhile (a failover) may have left an end
     * of file the loop has not read yet; a call sent now would be lost
     * with it, its fate unknown.  Fail the link from the loop instead. */
    if (dq__aconn_alive(l->conn))
        return 1;
    l->doomed = 1;
    event_active(l->tick_ev, EV_TIMEOUT, 1);
    return 0;
}

/* ---- Routes ---- */

/* A cluster node and its link. */
typedef struct node {
    dq__alink l;
    dq__routes *R;
    int idx;           /* in R->map.nodes */
    int failed;        /* its last attempt failed or it was lost */
    int64_t wanted_us; /* last time a call or a refresh wanted it */
    char host[256];    /* its address (the link's URI points here) */
    int port;
    dq__uri uri;
} node;

struct dq__routes {
    dq_async *a;
    const dq__uri *uri;      /* the client's */
    const dq_options *opts;  /* the client's */
    int kind;                /* uri->kind */
    char where[300];         /* the URI's server, for messages */
    dq__alink main;          /* the one node; Sentinel: the primary */
    int reported;            /* routed: connected as last reported */
    dq__err why;             /* the last failure of the topology */
    /* Cluster */
    dq__slotmap map;         /* slot -> node */
    node **nodes;            /* parallel to map.nodes; NULL: no link yet */
    int nnodes;              /* entries in nodes */
    int loaded;              /* the map was learnt once */
    int stale;               /* learn it again */
    node *asking;            /* the node a refresh is out on, or NULL */
    int64_t last_refresh_us;
    struct event *topo_ev;   /* the next refresh */
    int rr;                  /* refreshes ask the up nodes in turn */
    /* Sentinel */
    dq__alink sent;          /* to one Sentinel */
    dq__uri suri;            /* its URI: no credentials, database 0 */
    dq_options sopts;        /* the options without credentials */
    char shost[256];
    int sidx;                /* the Sentinel to ask next */
    int resolving;           /* the Sentinels are being asked */
    int pknown, pstale;      /* the primary's address: known, to ask again */
    char phost[256];         /* the primary as the Sentinels name it */
    int pport;
    char chost[256];         /* the address the primary's link uses */
    int cport;
    dq__uri puri;            /* its URI (host: chost) */
    int role_ok;             /* ROLE said master on this connection */
    int switching;           /* main dropped for a new primary address */
    dq__alink ssub;          /* to one Sentinel, kept: +switch-master */
    dq__uri ssuri;           /* its URI: no credentials, database 0 */
    char sshost[256];
    int ssidx;               /* the Sentinel it is on, or to try next */
    struct event *ssub_ev;   /* its liveness check */
};

int dq__routes_routed(const dq__routes *R) {
    return R->kind == DQ_URI_CLUSTER || R->kind == DQ_URI_SENTINEL;
}

static int any_up(const dq__routes *R) {
    for (int i = 0; i < R->nnodes; i++)
        if (R->nodes[i] != NULL && R->nodes[i]->l.state == DQ_AL_UP)
            return 1;
    return 0;
}

int dq__routes_connected(const dq__routes *R) {
    if (R->kind == DQ_URI_CLUSTER)
        return R->loaded && any_up(R);
    if (R->kind == DQ_URI_SENTINEL)
        return R->main.state == DQ_AL_UP && R->role_ok;
    return R->main.state == DQ_AL_UP;
}

const char *dq__routes_why(const dq__routes *R) { return R->why.msg; }

/* Routed: whether a failure (failed = 1) or a change is to be reported
 * to the state callback now: the client stopped being connected, or an
 * attempt failed while it is not.  Records what is reported. */
static int state_report(dq__routes *R, int failed) {
    int now = dq__routes_connected(R);
    if (now != R->reported) {
        R->reported = now;
        return !now;
    }
    return !now && failed;
}

/* Routed: reports to the state callback what state_report says, or a
 * connection.  Returns 1 if the client is being freed. */
static int tell_state(dq__routes *R, int code, const char *msg, int failed) {
    int was = R->reported;
    if (state_report(R, failed))
        dq__async_state(R->a, DQ_DISCONNECTED, code, msg);
    else if (!was && R->reported)
        dq__async_state(R->a, DQ_CONNECTED, 0, "");
    return dq__async_closing(R->a);
}

/* Calls that waited may go now; then the state, if it changed. */
static void changed(dq__routes *R) {
    dq__async_routes_changed(R->a);
    if (!dq__async_closing(R->a))
        tell_state(R, 0, "", 0);
}

/* ---- One node ---- */

static void single_up(dq__alink *l) {
    dq__routes *R = l->owner;
    dq__async_routes_changed(R->a);
    if (!dq__async_closing(R->a) && l->state == DQ_AL_UP)
        dq__async_state(R->a, DQ_CONNECTED, 0, "");
}

/* Every failure is reported, then the calls in flight fail and (an
 * attempt failed) the ops that waited for it. */
static void single_down(dq__alink *l, int code, const char *msg, int was_up) {
    dq__routes *R = l->owner;
    dq__async_link_down(R->a, l, code, msg, was_up, 1);
}

/* ---- Cluster ---- */

static void request_refresh(dq__routes *R);
static void node_up(dq__alink *l);
static void node_down(dq__alink *l, int code, const char *msg, int was_up);
static int node_target(dq__alink *l);

/* Node i of the map with its link (parked until kicked), or NULL when out
 * of memory. */
static node *node_at(dq__routes *R, int i) {
    if (i < 0 || i >= R->map.nnodes)
        return NULL;
    if (i >= R->nnodes) {
        int n = R->map.nnodes;
        node **v = realloc(R->nodes, sizeof(*v) * (size_t)n);
        if (v == NULL)
            return NULL;
        memset(v + R->nnodes, 0, sizeof(*v) * (size_t)(n - R->nnodes));
        R->nodes = v;
        R->nnodes = n;
    }
    if (R->nodes[i] == NULL) {
        node *n = calloc(1, sizeof(*n));
        if (n == NULL)
            return NULL;
        n->R = R;
        n->idx = i;
        snprintf(n->host, sizeof(n->host), "%s", R->map.nodes[i].host);
        n->port = R->map.nodes[i].port;
        dq__uri_node(R->uri, n->host, n->port, &n->uri);
        if (dq__alink_init(&n->l, R->a, n, &n->uri, R->opts, node_up,
                           node_down) != DQ_OK) {
            dq__alink_close(&n->l);
            free(n);
            return NULL;
        }
        n->l.target = node_target;
        R->nodes[i] = n;
    }
    return R->nodes[i];
}

/* Wants node n's link: notes it and starts it if parked. */
static void want(node *n) {
    n->wanted_us = dq__mono_us();
    dq__alink_kick(&n->l);
}

/* A parked node reconnects when it owns a slot, was wanted lately, or is
 * needed to learn the map (no node is up). */
static int node_target(dq__alink *l) {
    node *n = l->owner;
    dq__routes *R = n->R;
    if (dq__mono_us() - n->wanted_us < WANTED_US)
        return 1;
    if (R->stale && !any_up(R))
        return 1;
    for (int s = 0; s < DQ_SLOTS; s++)
        if (R->map.owner[s] == n->idx)
            return 1;
    return 0;
}

static void node_up(dq__alink *l) {
    node *n = l->owner;
    dq__routes *R = n->R;
    n->failed = 0;
    if (R->stale)
        request_refresh(R);
    changed(R);
}

/* A node's link failed: the map may be out of date (a failover), the
 * calls in flight on it fail. */
static void node_down(dq__alink *l, int code, const char *msg, int was_up) {
    node *n = l->owner;
    dq__routes *R = n->R;
    n->failed = 1;
    dq__err_set(&R->why, code, "%s", msg);
    if (R->asking == n)
        R->asking = NULL;
    request_refresh(R);
    dq__async_link_down(R->a, l, code, msg, was_up, state_report(R, 1));
}

static void on_map(void *priv, size_t tag, const dq__reply *r);

static const char cmd_shards[] = "*2\r\n$7\r\nCLUSTER\r\n$6\r\nSHARDS\r\n";
static const char cmd_slots[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

/* Asks for the map (CLUSTER SHARDS: tag 1, CLUSTER SLOTS: tag 0) on n's
 * link.  1 if sent. */
static int ask_map(dq__routes *R, node *n, int shards) {
    dq__err e;
    if (dq__alink_send(&n->l, shards ? cmd_shards : cmd_slots,
                       shards ? sizeof(cmd_shards) - 1 : sizeof(cmd_slots) - 1,
                       on_map, n, (size_t)shards, &e) != DQ_OK)
        return 0;
    R->asking = n;
    return 1;
}

/* Learns the map from an up node, taken in turn; with none up, opens the
 * links of the known nodes and the seeds (the first up asks). */
static void refresh(dq__routes *R) {
    if (!R->stale || R->asking != NULL)
        return;
    for (int k = 0; k < R->nnodes; k++) {
        int i = (R->rr + k) % R->nnodes;
        node *n = R->nodes[i];
        if (n == NULL || !dq__alink_usable(&n->l))
            continue;
        R->rr = i + 1;
        if (ask_map(R, n, 1)) {
            R->stale = 0;
            R->last_refresh_us = dq__mono_us();
            return;
        }
    }
    for (int i = 0; i < R->map.nnodes; i++) {
        node *n = node_at(R, i);
        if (n != NULL && n->l.state == DQ_AL_IDLE)
            want(n);
    }
}

static void on_topo(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__routes *R = arg;
    dq__async_enter(R->a);
    refresh(R);
    dq__async_leave(R->a);
}

/* Marks the map for a refresh, at most one per REFRESH_GAP_US. */
static void request_refresh(dq__routes *R) {
    if (R->kind != DQ_URI_CLUSTER)
        return;
    R->stale = 1;
    if (R->asking != NULL || R->topo_ev == NULL ||
        evtimer_pending(R->topo_ev, NULL))
        return;
    arm(R->topo_ev, R->last_refresh_us + REFRESH_GAP_US - dq__mono_us());
}

/* The map, as node n sent it. */
static void on_map(void *priv, size_t tag, const dq__reply *r) {
    node *n = priv;
    dq__routes *R = n->R;
    dq_async *a = R->a;
    dq__async_enter(a);
    dq__alink_replied(&n->l);
    R->asking = NULL;
    if (tag == 1 && (dq__reply_is_error(r, "ERR") ||
                     dq__reply_is_error(r, "NOPERM"))) {
        /* Before Redis 7 there is no CLUSTER SHARDS; an ACL may grant
         * only CLUSTER SLOTS. */
        if (!ask_map(R, n, 0))
            request_refresh(R);
        dq__async_leave(a);
        return;
    }
    dq__err e;
    int rc = dq__slotmap_load(&R->map, r, (int)tag, n->host, &e);
    if (rc == DQ_OK && dq__slotmap_covered(&R->map) == 0)
        rc = dq__err_set(&e, DQ_EREDIS,
                        "%s: the cluster has no slots assigned yet",
                        n->l.where);
    if (rc != DQ_OK) {
        R->why = e;
        request_refresh(R);
        tell_state(R, rc, e.msg, 1);
    } else {
        R->loaded = 1;
        if (R->stale) /* asked for again meanwhile */
            request_refresh(R);
        changed(R);
    }
    dq__async_leave(a);
}

/* The up link of the node that owns slot, or NULL (getting one started). */
static dq__alink *cluster_get(dq__routes *R, int slot) {
    if (!R->loaded) {
        request_refresh(R);
        return NULL;
    }
    int i = slot >= 0 && slot < DQ_SLOTS ? R->map.owner[slot] : -1;
    node *n = i >= 0 ? node_at(R, i) : NULL;
    if (n == NULL) {
        request_refresh(R); /* no owner known (or out of memory) */
        return NULL;
    }
    n->wanted_us = dq__mono_us();
    if (dq__alink_usable(&n->l))
        return &n->l;
    dq__alink_kick(&n->l);
    if (n->failed)
        request_refresh(R); /* its node may have failed over */
    return NULL;
}

/* ---- Sentinel ---- */

static void resolve(dq__routes *R) {
    if (R->resolving)
        return;
    R->resolving = 1;
    dq__alink_kick(&R->sent); /* one that failed retries by itself */
}

/* Points l at Sentinel number idx (of the URI's, in turn), through host
 * (hsize bytes) and u, which l keeps using: Sentinels are asked without
 * the URI's credentials and database.  0 when the URI names none. */
static int sentinel_at(dq__alink *l, int idx, char *host, size_t hsize,
                       dq__uri *u) {
    dq__routes *R = l->owner;
    if (R->uri->nseeds < 1)
        return 0;
    const dq__seed *s = &R->uri->seeds[idx % R->uri->nseeds];
    snprintf(host, hsize, "%s", s->host);
    dq__uri_node(R->uri, host, s->port, u);
    u->user = u->password = NULL;
    u->db = 0;
    l->uri = u;
    snprintf(l->where, sizeof(l->where), "%s:%d", host, s->port);
    return 1;
}

/* The Sentinel link asks the Sentinels in turn, and only while resolving. */
static int sentinel_target(dq__alink *l) {
    dq__routes *R = l->owner;
    return R->resolving &&
           sentinel_at(l, R->sidx, R->shost, sizeof(R->shost), &R->suri);
}

static void on_master(void *priv, size_t tag, const dq__reply *r);

/* Asks the Sentinel behind l for the primary's address; the answer goes
 * to fn.  DQ_OK, or a code with e set. */
static int ask_master(dq__alink *l, dq__aconn_reply_fn *fn, dq__err *e) {
    dq__routes *R = l->owner;
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                           R->uri->master};
    size_t len = dq__resp_size(3, argv, NULL);
    char *p = malloc(len + 1);
    int rc = p == NULL ? dq__err_set(e, DQ_ENOMEM, "out of memory") : DQ_OK;
    if (rc == DQ_OK) {
        /* NUL after it: hiredis's async side peeks one byte further. */
        *dq__resp_put(p, 3, argv, NULL) = '\0';
        rc = dq__alink_send(l, p, len, fn, R, 0, e);
    }
    free(p);
    return rc;
}

static void sentinel_up(dq__alink *l) {
    dq__err e;
    int rc = ask_master(l, on_master, &e);
    if (rc != DQ_OK)
        dq__alink_fail(l, rc, e.msg);
}

/* A Sentinel failed us (unreachable, or knows no such primary): the next
 * one is asked after the backoff. */
static void sentinel_down(dq__alink *l, int code, const char *msg,
                          int was_up) {
    (void)was_up;
    dq__routes *R = l->owner;
    R->sidx = (R->sidx + 1) % (R->uri->nseeds > 0 ? R->uri->nseeds : 1);
    dq__err_set(&R->why, code, "%s", msg);
    tell_state(R, code, msg, 1);
}

/* The primary is at host:port (a Sentinel's answer, or a failover it
 * announced): asking stops, and the primary's link goes there (dropped
 * first if it is up or connecting elsewhere); subscribers follow. */
static void take_primary(dq__routes *R, const char *host, int port) {
    dq_async *a = R->a;
    R->resolving = 0;
    dq__alink_reset_backoff(&R->sent);
    dq__alink_park(&R->sent);
    snprintf(R->phost, sizeof(R->phost), "%s", host);
    R->pport = port;
    R->pknown = 1;
    R->pstale = 0;
    dq__alink *m = &R->main;
    if (m->state == DQ_AL_IDLE) {
        dq__alink_kick(m);
    } else if ((m->state == DQ_AL_UP || m->state == DQ_AL_CONNECTING) &&
               (strcmp(R->chost, R->phost) != 0 || R->cport != R->pport)) {
        char msg[700];
        snprintf(msg, sizeof(msg), "primary '%s' moved from %s:%d to %s:%d",
                 R->uri->master, R->chost, R->cport, R->phost, R->pport);
        R->switching = 1;
        dq__alink_fail(m, DQ_EIO, msg);
        if (dq__async_closing(a))
            return;
        if (m->state == DQ_AL_WAIT)
            dq__alink_start(m, 0);
    }
    changed(R); /* subscribers follow the primary */
}

/* The Sentinel's answer: the primary's address. */
static void on_master(void *priv, size_t tag, const dq__reply *r) {
    (void)tag;
    dq__routes *R = priv;
    dq_async *a = R->a;
    dq__async_enter(a);
    dq__alink_replied(&R->sent);
    char host[sizeof(R->phost)];
    int port;
    if (dq__sentinel_addr(r, host, sizeof(host), &port) != DQ_OK) {
        char msg[600];
        snprintf(msg, sizeof(msg), "Sentinel %s knows no primary named '%s'",
                 R->sent.where, R->uri->master);
        dq__alink_fail(&R->sent, DQ_EREDIS, msg);
        dq__async_leave(a);
        return;
    }
    take_primary(R, host, port);
    dq__async_leave(a);
}

/* The primary's link connects only to an address the Sentinels gave and
 * that is not to be asked again; else it waits for them. */
static int primary_target(dq__alink *l) {
    dq__routes *R = l->owner;
    if (!R->pknown || R->pstale) {
        resolve(R);
        return 0;
    }
    snprintf(R->chost, sizeof(R->chost), "%s", R->phost);
    R->cport = R->pport;
    dq__uri_node(R->uri, R->chost, R->cport, &R->puri);
    l->uri = &R->puri;
    snprintf(l->where, sizeof(l->where), "%s:%d", R->chost, R->cport);
    return 1;
}

static void on_role(void *priv, size_t tag, const dq__reply *r);

/* Connected to what the Sentinels named: used once ROLE says master. */
static void primary_up(dq__alink *l) {
    dq__routes *R = l->owner;
    static const char role[] = "*1\r\n$4\r\nROLE\r\n";
    dq__err e;
    R->role_ok = 0;
    if (dq__alink_send(l, role, sizeof(role) - 1, on_role, R, 0, &e) != DQ_OK)
        dq__alink_fail(l, e.code, e.msg);
}

static void on_role(void *priv, size_t tag, const dq__reply *r) {
    (void)tag;
    dq__routes *R = priv;
    dq_async *a = R->a;
    dq__async_enter(a);
    dq__alink_replied(&R->main);
    size_t len = 0;
    const char *role = NULL;
    if (dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) >= 1)
        role = dq__reply_str(dq__reply_at(r, 0), &len);
    if (role != NULL && len == 6 && memcmp(role, "master", 6) == 0) {
        R->role_ok = 1;
        dq__alink_reset_backoff(&R->main);
        changed(R);
    } else {
        char msg[700];
        snprintf(msg, sizeof(msg),
                 "Sentinel named %s:%d as primary '%s', but it is not (yet) "
                 "a primary",
                 R->chost, R->cport, R->uri->master);
        R->pstale = 1;
        dq__alink_fail(&R->main, DQ_EIO, msg);
    }
    dq__async_leave(a);
}

/* The primary's link failed: ask the Sentinels again before reconnecting
 * (unless it was dropped for the address they just gave). */
static void primary_down(dq__alink *l, int code, const char *msg,
                         int was_up) {
    dq__routes *R = l->owner;
    R->role_ok = 0;
    if (!R->switching)
        R->pstale = 1;
    R->switching = 0;
    dq__err_set(&R->why, code, "%s", msg);
    dq__async_link_down(R->a, l, code, msg, was_up, state_report(R, 1));
    if (!dq__async_closing(R->a) && R->pstale)
        resolve(R);
}

/* ---- Sentinel: failovers announced ----
 *
 * One more link, to one Sentinel at a time, kept for the client's life:
 * SENTINEL GET-MASTER-ADDR-BY-NAME, then SUBSCRIBE +switch-master in the
 * same pipeline (the Sentinel does nothing between the two).  A
 * +switch-master for our master name moves the primary's link at once:
 * a demoted primary that stays reachable is left, not used until it
 * answers READONLY.  The answer before the subscription is compared with
 * the primary in use: another address means a failover was missed while
 * no subscriber listened, and the Sentinels are asked again.  The link
 * reconnects by itself (the next Sentinel each time, 50 ms doubling to
 * 2 s), also when its Sentinel hangs (the subscription is renewed every
 * 5 s, its confirmation due within the command timeout).  With every
 * Sentinel down nothing else changes: READONLY and broken links still
 * send the client to the Sentinels. */


/* The +switch-master subscriber listens on the Sentinels in turn. */
static int ssub_target(dq__alink *l) {
    dq__routes *R = l->owner;
    return sentinel_at(l, R->ssidx, R->sshost, sizeof(R->sshost), &R->ssuri);
}

/* The subscriber's Sentinel's answer before it subscribed. */
static void on_ssub_master(void *priv, size_t tag, const dq__reply *r) {
    (void)tag;
    dq__routes *R = priv;
    dq_async *a = R->a;
    dq__async_enter(a);
    dq__alink_replied(&R->ssub);
    char host[sizeof(R->phost)];
    int port;
    if (R->pknown &&
        dq__sentinel_addr(r, host, sizeof(host), &port) == DQ_OK &&
        (port != R->pport || strcmp(host, R->phost) != 0)) {
        R->pstale = 1; /* missed while nobody listened: ask again */
        resolve(R);
    }
    dq__async_leave(a);
}

/* A message (or confirmation) of the +switch-master subscription:
 * "<name> <old ip> <old port> <new ip> <new port>". */
static void on_switch(void *priv, size_t tag, const dq__reply *r) {
    (void)tag;
    dq__routes *R = priv;
    dq_async *a = R->a;
    if (dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) == 3 &&
        dq__reply_is(dq__reply_at(r, 0), "subscribe")) {
        dq__alink_replied(&R->ssub); /* each SUBSCRIBE counted pending */
        return;
    }
    char nh[sizeof(R->phost)];
    int np;
    if (!dq__sentinel_switch(r, R->uri->master, nh, sizeof(nh), &np))
        return;
    if (R->pknown && !R->pstale && np == R->pport &&
        strcmp(nh, R->phost) == 0)
        return; /* followed already */
    dq__async_enter(a);
    take_primary(R, nh, np);
    dq__async_leave(a);
}

static void ssub_up(dq__alink *l) {
    dq__routes *R = l->owner;
    dq__err e;
    int rc = ask_master(l, on_ssub_master, &e);
    if (rc == DQ_OK)
        rc = dq__aconn_subscribe(l->conn, DQ_SENTINEL_SWITCH, on_switch, R, &e);
    if (rc != DQ_OK) {
        dq__alink_fail(l, rc, e.msg);
        return;
    }
    dq__alink_sent(l); /* its confirmation is due within the timeout */
    if (!evtimer_pending(R->ssub_ev, NULL))
        arm(R->ssub_ev, SSUB_CHECK_US);
}

/* A Sentinel that hangs never closes the link: every SSUB_CHECK_US the
 * subscription is asked for again (Redis confirms it once more), and a
 * confirmation later than the command timeout fails the link (the link's
 * own timer), which then moves to the next Sentinel. */
static void on_ssub_check(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__routes *R = arg;
    dq_async *a = R->a;
    dq__async_enter(a);
    dq__alink *l = &R->ssub;
    dq__err e;
    if (l->state == DQ_AL_UP && l->pending == 0) {
        if (dq__aconn_subscribe(l->conn, DQ_SENTINEL_SWITCH, on_switch, R, &e) ==
            DQ_OK)
            dq__alink_sent(l);
        else
            dq__alink_fail(l, e.code, e.msg);
    }
    if (l->state != DQ_AL_CLOSED && R->ssub_ev != NULL)
        arm(R->ssub_ev, SSUB_CHECK_US);
    dq__async_leave(a);
}

/* The subscriber's Sentinel is gone: the next one, after the backoff.
 * No call rides on it: nothing to report. */
static void ssub_down(dq__alink *l, int code, const char *msg, int was_up) {
    (void)code;
    (void)msg;
    (void)was_up;
    dq__routes *R = l->owner;
    R->ssidx = (R->ssidx + 1) % (R->uri->nseeds > 0 ? R->uri->nseeds : 1);
}

/* ---- Entry points ---- */

int dq__routes_new(dq_async *a, const dq__uri *uri, const dq_options *opts,
                   const char *where, dq__routes **out, dq__err *err) {
    dq__routes *R = calloc(1, sizeof(*R));
    *out = R;
    if (R == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    R->a = a;
    R->uri = uri;
    R->opts = opts;
    R->kind = uri->kind;
    snprintf(R->where, sizeof(R->where), "%s", where);
    dq__slotmap_init(&R->map, uri->tls);
    int rc = DQ_OK;
    if (R->kind == DQ_URI_CLUSTER) {
        R->topo_ev = evtimer_new(dq__async_base(a), on_topo, R);
        if (R->topo_ev == NULL)
            rc = DQ_ENOMEM;
        for (int i = 0; rc == DQ_OK && i < uri->nseeds; i++)
            if (dq__slotmap_node(&R->map, uri->seeds[i].host,
                                 uri->seeds[i].port) < 0)
                rc = DQ_ENOMEM;
    } else if (R->kind == DQ_URI_SENTINEL) {
        R->sopts = *opts;
        R->sopts.user = R->sopts.password = NULL;
        rc = dq__alink_init(&R->main, a, R, NULL, opts, primary_up,
                            primary_down);
        if (rc == DQ_OK)
            rc = dq__alink_init(&R->sent, a, R, NULL, &R->sopts, sentinel_up,
                                sentinel_down);
        if (rc == DQ_OK)
            rc = dq__alink_init(&R->ssub, a, R, NULL, &R->sopts, ssub_up,
                                ssub_down);
        if (rc == DQ_OK &&
            (R->ssub_ev = evtimer_new(dq__async_base(a), on_ssub_check, R)) ==
                NULL)
            rc = DQ_ENOMEM;
        R->main.target = primary_target;
        R->sent.target = sentinel_target;
        R->ssub.target = ssub_target;
        /* Reachable but of no use (no such primary, not a primary yet):
         * the backoff keeps growing until they did their job. */
        R->main.keep_backoff = R->sent.keep_backoff = 1;
    } else {
        rc = dq__alink_init(&R->main, a, R, uri, opts, single_up,
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
        R->resolving = 1;
        dq__alink_start(&R->sent, 0);
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
    if (R->ssub_ev != NULL)
        event_free(R->ssub_ev);
    R->ssub_ev = NULL;
    for (int i = 0; i < R->nnodes; i++)
        if (R->nodes[i] != NULL)
            dq__alink_close(&R->nodes[i]->l);
    if (R->topo_ev != NULL)
        event_free(R->topo_ev);
    R->topo_ev = NULL;
}

void dq__routes_free(dq__routes *R) {
    if (R == NULL)
        return;
    dq__routes_close(R);
    for (int i = 0; i < R->nnodes; i++)
        free(R->nodes[i]);
    free(R->nodes);
    dq__slotmap_clear(&R->map);
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
    node *n = node_at(R, dq__slotmap_node(&R->map, host, port));
    if (n == NULL)
        return NULL;
    n->wanted_us = dq__mono_us();
    if (dq__alink_usable(&n->l))
        return &n->l;
    dq__alink_kick(&n->l);
    return NULL;
}

void dq__routes_moved(dq__routes *R, int slot, const char *host, int port) {
    if (R->kind != DQ_URI_CLUSTER)
        return;
    dq__slotmap_moved(&R->map, slot, host, port);
    /* One slot moved usually means a resharding or failover moved more. */
    request_refresh(R);
}

void dq__routes_stale(dq__routes *R) {
    if (R->kind == DQ_URI_CLUSTER) {
        request_refresh(R);
    } else if (R->kind == DQ_URI_SENTINEL) {
        R->pstale = 1;
        resolve(R);
    }
}

int dq__routes_target(dq__routes *R, int slot, char *host, size_t hsize,
                      int *port) {
    if (R->kind == DQ_URI_SENTINEL) {
        if (!R->pknown || R->pstale) {
            resolve(R);
            return 0;
        }
        snprintf(host, hsize, "%s", R->phost);
        *port = R->pport;
        return 1;
    }
    if (R->kind != DQ_URI_CLUSTER)
        return 2;
    int i = slot >= 0 && slot < DQ_SLOTS ? R->map.owner[slot] : -1;
    if (!R->loaded || R->stale || R->asking != NULL || i < 0) {
        request_refresh(R);
        return 0;
    }
    snprintf(host, hsize, "%s", R->map.nodes[i].host);
    *port = R->map.nodes[i].port;
    return 1;
}

void dq__routes_where(const dq__routes *R, int slot, char *out, size_t n) {
    if (R->kind == DQ_URI_SENTINEL) {
        if (R->pknown)
            snprintf(out, n, "primary '%s' at %s:%d", R->uri->master,
                     R->phost, R->pport);
        else
            snprintf(out, n, "primary '%s' (not named by a Sentinel yet)",
                     R->uri->master);
        return;
    }
    if (R->kind != DQ_URI_CLUSTER) {
        snprintf(out, n, "%s", R->where);
        return;
    }
    int i = slot >= 0 && slot < DQ_SLOTS ? R->map.owner[slot] : -1;
    if (i >= 0)
        snprintf(out, n, "%s:%d (hash slot %d)", R->map.nodes[i].host,
                 R->map.nodes[i].port, slot);
    else
        snprintf(out, n, "the node of hash slot %d (not known yet)", slot);
}
