/*
 * links.c - the blocking client's links to one node, a cluster or a
 * Sentinel-named primary (see links.h).
 *
 * Sentinel, without a thread: the connection to the Sentinel that named
 * the primary stays open, subscribed to "+switch-master" (the SUBSCRIBE
 * goes in the same pipeline as the SENTINEL GET-MASTER-ADDR-BY-NAME, so
 * no failover falls between the answer and the subscription).  Before each
 * operation is routed (client.c), and whenever dq_poll_wait subscribes or
 * sleeps (wake.c), the subscriber is read without blocking - not between
 * the calls of one operation, whose calls and WAIT stay on one primary.
 * A message for our master name makes the route stale and names the new
 * primary, which is tried first (ROLE master): a demoted primary that
 * stays reachable is left at once, not when it first answers READONLY.
 * A subscriber that died (closed, or quiet for 5 s and then silent to a
 * PING for the command timeout) is reopened on demand, one Sentinel per
 * try (waiting at most 500 ms for it), at most every 100 ms doubling to
 * 30 s while they fail; its first answer is compared with the primary in
 * use (a failover missed meanwhile).  With every Sentinel down the client
 * works as it did before: READONLY or a broken link sends it to the
 * Sentinels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "links.h"
#include "uri.h"

#define SUB_GAP_MIN_US 100000  /* a failed subscriber: the next try after */
#define SUB_GAP_MAX_US 30000000 /* ... 100 ms, doubling to 30 s */
#define SUB_OPEN_MS 500        /* a reopen inside a call waits at most this
                                  for the connect and for the answer */
#define SUB_QUIET_US 5000000   /* a subscriber quiet this long gets a PING */

struct dq__links {
    const dq__uri *uri;
    const dq_options *opts;
    dq__conn *one;        /* the one node, or the primary Sentinels named */
    dq__slotmap map;      /* cluster: slot -> node */
    dq__conn **conns;     /* cluster: links by node index (NULL: none) */
    int nconns;
    char phost[256];      /* Sentinel: the primary's address */
    int pport;
    int stale;            /* learn the topology before the next get */
    char where[300];
    /* Sentinel: failovers announced by the Sentinels */
    dq__conn *sub;        /* subscribed to +switch-master, NULL: none */
    int sub_idx;          /* the Sentinel it is on, or to try next */
    int64_t sub_next_us;  /* no new subscriber before (after failures) */
    int64_t sub_gap_us;   /* the pause after the next failure */
    int64_t sub_heard_us; /* its last reply (or its opening) */
    int64_t sub_ping_us;  /* a PING awaits its answer since, 0: none */
    char nhost[256];      /* the new primary +switch-master named, "" */
    int nport;
    unsigned epoch;       /* changes with the primary's address */
};

int dq__links_new(const dq__uri *uri, const dq_options *opts,
                  dq__links **out, dq__err *err) {
    dq__links *L = calloc(1, sizeof(*L));
    *out = L;
    if (L == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    L->uri = uri;
    L->opts = opts;
    dq__slotmap_init(&L->map, uri->tls);
    L->stale = 1;
    L->sub_gap_us = SUB_GAP_MIN_US;
    return DQ_OK;
}

void dq__links_free(dq__links *L) {
    if (L == NULL)
        return;
    dq__conn_free(L->one);
    dq__conn_free(L->sub);
    for (int i = 0; i < L->nconns; i++)
        dq__conn_free(L->conns[i]);
    free(L->conns);
    dq__slotmap_clear(&L->map);
    free(L);
}

int dq__links_routed(const dq__links *L) {
    return L->uri->kind == DQ_URI_CLUSTER || L->uri->kind == DQ_URI_SENTINEL;
}

int dq__links_cluster(const dq__links *L) {
    return L->uri->kind == DQ_URI_CLUSTER;
}

/* Connects to host:port with the URI's TLS, database and credentials
 * (creds = 0: none and database 0, for a Sentinel). */
static int open_with(dq__links *L, const char *host, int port, int creds,
                     const dq_options *opts, dq__conn **out, dq__err *err) {
    dq__uri node;
    dq__uri_node(L->uri, host, port, &node);
    dq_options o = *opts;
    if (!creds) {
        node.user = node.password = NULL;
        node.db = 0;
        o.user = o.password = NULL;
    }
    dq__conn_cfg cfg = {&node, &o, NULL};
    return dq__conn_open(&cfg, out, err);
}

/* open_with the client's own timeouts. */
static int open_at(dq__links *L, const char *host, int port, int creds,
                   dq__conn **out, dq__err *err) {
    return open_with(L, host, port, creds, L->opts, out, err);
}

/* ---- Sentinel ---- */


/* 1 if string reply r is exactly s. */

/* Asks the Sentinel at seed for the primary's address, into host/port.
 * subscribe: the same connection then subscribes to +switch-master (in
 * one pipeline: nothing the Sentinel does falls between the two) and is
 * kept as L->sub. */
static int ask_sentinel(dq__links *L, const dq__seed *seed, char *host,
                        size_t hsize, int *port, int subscribe,
                        dq__err *err) {
    dq__conn *s;
    /* A reopen (the primary is known) runs inside a call: a Sentinel that
     * hangs must not hold that call for the whole timeouts. */
    dq_options o = *L->opts;
    if (subscribe && L->one != NULL) {
        if (o.connect_timeout_ms <= 0 || o.connect_timeout_ms > SUB_OPEN_MS)
            o.connect_timeout_ms = SUB_OPEN_MS;
        if (o.command_timeout_ms <= 0 || o.command_timeout_ms > SUB_OPEN_MS)
            o.command_timeout_ms = SUB_OPEN_MS;
    }
    int rc = open_with(L, seed->host, seed->port, 0, &o, &s, err);
    if (rc != DQ_OK)
        return rc;
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                           L->uri->master};
    const char *sub[2] = {"SUBSCRIBE", DQ_SENTINEL_SWITCH};
    dq__reply *r = NULL;
    rc = dq__conn_append(s, 3, argv, NULL, err);
    if (rc == DQ_OK && subscribe)
        rc = dq__conn_append(s, 2, sub, NULL, err);
    if (rc == DQ_OK)
        rc = dq__conn_read(s, &r, err);
    if (rc == DQ_OK && dq__sentinel_addr(r, host, hsize, port) != DQ_OK)
        rc = dq__err_set(err, DQ_EREDIS,
                        "Sentinel %s:%d knows no primary named '%s'",
                        seed->host, seed->port, L->uri->master);
    dq__reply_free(r);
    r = NULL;
    if (rc == DQ_OK && subscribe) {
        /* ["subscribe", "+switch-master", 1]; anything else (an ACL that
         * refuses it): no subscriber, the answer still counts. */
        dq__err e;
        if (dq__conn_read(s, &r, &e) == DQ_OK &&
            dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) == 3 &&
            dq__reply_is(dq__reply_at(r, 0), "subscribe")) {
            dq__conn_free(L->sub);
            L->sub = s;
            s = NULL;
            L->sub_heard_us = dq__mono_us();
            L->sub_ping_us = 0;
        }
        dq__reply_free(r);
    }
    dq__conn_free(s);
    return rc;
}

/* 1 if the node behind c says ROLE master. */
static int is_primary(dq__conn *c, dq__err *err) {
    const char *argv[1] = {"ROLE"};
    dq__reply *r = NULL;
    int yes = 0;
    if (dq__conn_call(c, 1, argv, NULL, &r, err) == DQ_OK &&
        dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) >= 1)
        yes = dq__reply_is(dq__reply_at(r, 0), "master");
    dq__reply_free(r);
    return yes;
}

/* Makes c (at host:port, ROLE master) the primary's link. */
static void use_primary(dq__links *L, dq__conn *c, const char *host,
                        int port) {
    if (port != L->pport || strcmp(host, L->phost) != 0)
        L->epoch++; /* subscribers of the old primary must follow */
    L->one = c;
    snprintf(L->phost, sizeof(L->phost), "%s", host);
    L->pport = port;
    snprintf(L->where, sizeof(L->where), "%s:%d", host, port);
    L->stale = 0;
}

/* Connects to host:port if it answers ROLE master (DQ_OK), else the code
 * with err set (DQ_EIO when it is no primary (yet)). */
static int try_primary(dq__links *L, const char *host, int port,
                       dq__err *err) {
    dq__conn *c;
    int rc = open_at(L, host, port, 1, &c, err);
    if (rc != DQ_OK)
        return rc;
    if (!is_primary(c, err)) {
        dq__conn_free(c);
        return dq__err_set(err, DQ_EIO,
                          "Sentinel named %s:%d as primary '%s', but it is "
                          "not (yet) a primary",
                          host, port, L->uri->master);
    }
    use_primary(L, c, host, port);
    return DQ_OK;
}

/* Connects to the primary: first the one a +switch-master named (if it
 * is a primary already), else the address each Sentinel in turn gives,
 * the first that answers ROLE master.  Without a subscriber, the first
 * Sentinel that answers keeps its connection as one. */
static int find_primary(dq__links *L, dq__err *err) {
    dq__conn_free(L->one);
    L->one = NULL;
    if (L->nhost[0] != '\0') {
        char host[256];
        snprintf(host, sizeof(host), "%s", L->nhost);
        L->nhost[0] = '\0';
        int rc = try_primary(L, host, L->nport, err);
        if (rc == DQ_OK || rc == DQ_EAUTH || rc == DQ_ENOMEM)
            return rc;
    }
    int rc = DQ_EIO;
    for (int i = 0; i < L->uri->nseeds; i++) {
        char host[256];
        int port = 0;
        int sub = L->sub == NULL;
        if ((rc = ask_sentinel(L, &L->uri->seeds[i], host, sizeof(host),
                               &port, sub, err)) != DQ_OK)
            continue;
        if (sub && L->sub != NULL) {
            L->sub_idx = i;
            L->sub_gap_us = SUB_GAP_MIN_US;
        }
        if ((rc = try_primary(L, host, port, err)) == DQ_OK)
            return DQ_OK;
        if (rc == DQ_EAUTH || rc == DQ_ENOMEM)
            return rc;
    }
    if (err != NULL && err->code == DQ_OK)
        dq__err_set(err, DQ_EIO, "no Sentinel answered");
    return rc == DQ_OK ? DQ_EIO : rc;
}

/* Takes one reply of the subscriber: a +switch-master for our master
 * name ("<name> <old ip> <old port> <new ip> <new port>") that names
 * another primary than ours makes the route stale and names the new one.
 * Returns 1 then. */
static int take_switch(dq__links *L, const dq__reply *r) {
    char nh[256];
    int np;
    if (!dq__sentinel_switch(r, L->uri->master, nh, sizeof(nh), &np))
        return 0;
    if (L->one != NULL && np == L->pport && strcmp(nh, L->phost) == 0)
        return 0; /* followed already */
    snprintf(L->nhost, sizeof(L->nhost), "%s", nh);
    L->nport = np;
    L->stale = 1;
    return 1;
}

/* A subscriber failed now: the next try waits the pause, which doubles. */
static void sub_failed(dq__links *L, int64_t now) {
    dq__conn_free(L->sub);
    L->sub = NULL;
    L->sub_next_us = now + L->sub_gap_us;
    L->sub_gap_us = L->sub_gap_us * 2 > SUB_GAP_MAX_US ? SUB_GAP_MAX_US
                                                       : L->sub_gap_us * 2;
}

/* A new subscriber on the next Sentinel in turn (one connect at most);
 * if it names another primary than ours, a failover was missed while
 * nobody listened: the route goes stale (the Sentinels are asked). */
static void sub_reopen(dq__links *L, int64_t now) {
    int n = L->uri->nseeds;
    int i = L->sub_idx % n;
    char host[256];
    int port = 0;
    dq__err e;
    if (ask_sentinel(L, &L->uri->seeds[i], host, sizeof(host), &port, 1,
                     &e) != DQ_OK ||
        L->sub == NULL) {
        L->sub_idx = (i + 1) % n;
        sub_failed(L, now);
        return;
    }
    L->sub_idx = i;
    L->sub_gap_us = SUB_GAP_MIN_US;
    if (port != L->pport || strcmp(host, L->phost) != 0)
        L->stale = 1;
}

int dq__links_listen(dq__links *L) {
    if (L->uri->kind != DQ_URI_SENTINEL || L->uri->nseeds < 1)
        return 0;
    int64_t now = dq__mono_us();
    if (L->sub == NULL) {
        /* None yet (find_primary opens one) or it died: on demand. */
        if (L->one != NULL && now >= L->sub_next_us)
            sub_reopen(L, now);
        return L->stale;
    }
    dq__err e;
    int rc = dq__conn_broken(L->sub) ? -1
                                     : dq__conn_wait_readable(L->sub, 0, &e);
    dq__reply *r;
    int got;
    while ((got = dq__conn_buffered(L->sub, &r, &e)) == 1) {
        take_switch(L, r);
        dq__reply_free(r);
        L->sub_heard_us = now; /* a message or the PING's answer */
        L->sub_ping_us = 0;
    }
    /* A Sentinel that hangs (its host cut off, the process stopped) never
     * closes the link: one quiet for SUB_QUIET_US gets a PING, answered
     * within the command timeout or the link counts as dead. */
    int64_t limit = L->opts->command_timeout_ms > 0
                        ? L->opts->command_timeout_ms * 1000
                        : SUB_QUIET_US;
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    if (rc >= 0 && got >= 0 && L->sub_ping_us > 0 &&
        now - L->sub_ping_us > limit)
        rc = -1;
    else if (rc >= 0 && got >= 0 && L->sub_ping_us == 0 &&
             now - L->sub_heard_us > SUB_QUIET_US) {
        if (dq__conn_append_raw(L->sub, ping, sizeof(ping) - 1, &e) != DQ_OK ||
            dq__conn_flush(L->sub, &e) != DQ_OK)
            rc = -1;
        L->sub_ping_us = now;
    }
    if (rc < 0 || got < 0) {
        /* That Sentinel died or hangs: reopened on demand, on the next. */
        L->sub_idx = (L->sub_idx + 1) % L->uri->nseeds;
        sub_failed(L, now);
    }
    return L->stale;
}

dq__conn *dq__links_sentinel_sub(dq__links *L) {
    return L->sub != NULL && !dq__conn_broken(L->sub) ? L->sub : NULL;
}

unsigned dq__links_epoch(const dq__links *L) { return L->epoch; }

/* ---- Cluster ---- */

/* Drops links that broke (their node may be gone for good). */
static void drop_broken(dq__links *L) {
    for (int i = 0; i < L->nconns; i++)
        if (L->conns[i] != NULL && dq__conn_broken(L->conns[i])) {
            dq__conn_free(L->conns[i]);
            L->conns[i] = NULL;
        }
}

/* The link to node i of the map, opened if needed. */
static int node_link(dq__links *L, int i, dq__conn **out, dq__err *err) {
    if (i >= L->nconns) {
        int n = L->map.nnodes;
        dq__conn **c = realloc(L->conns, sizeof(*c) * (size_t)n);
        if (c == NULL)
            return dq__err_set(err, DQ_ENOMEM, "out of memory");
        memset(c + L->nconns, 0, sizeof(*c) * (size_t)(n - L->nconns));
        L->conns = c;
        L->nconns = n;
    }
    if (L->conns[i] != NULL && dq__conn_broken(L->conns[i])) {
        dq__conn_free(L->conns[i]);
        L->conns[i] = NULL;
    }
    if (L->conns[i] == NULL) {
        const dq__node_addr *a = &L->map.nodes[i];
        int rc = open_at(L, a->host, a->port, 1, &L->conns[i], err);
        if (rc != DQ_OK)
            return rc;
    }
    *out = L->conns[i];
    return DQ_OK;
}

/* Loads the slot map from the node at link c (host: its address). */
static int load_map(dq__links *L, dq__conn *c, const char *host,
                    dq__err *err) {
    static const char *const shards[2] = {"CLUSTER", "SHARDS"};
    static const char *const slots[2] = {"CLUSTER", "SLOTS"};
    dq__reply *r = NULL;
    int rc = dq__conn_call(c, 2, (const char **)shards, NULL, &r, err);
    int use_shards = 1;
    if (rc == DQ_OK && (dq__reply_is_error(r, "ERR") ||
                        dq__reply_is_error(r, "NOPERM"))) {
        /* Before Redis 7 there is no CLUSTER SHARDS; an ACL may grant
         * only CLUSTER SLOTS (if it refuses that too, its NOPERM is the
         * error). */
        dq__reply_free(r);
        r = NULL;
        use_shards = 0;
        rc = dq__conn_call(c, 2, (const char **)slots, NULL, &r, err);
    }
    if (rc == DQ_OK)
        rc = dq__slotmap_load(&L->map, r, use_shards, host, err);
    dq__reply_free(r);
    if (rc == DQ_OK && dq__slotmap_covered(&L->map) == 0)
        rc = dq__err_set(err, DQ_EREDIS,
                        "%s: the cluster has no slots assigned yet", host);
    return rc;
}

/* Asks node i of the map for the slot map (connecting when needed). */
static int load_from(dq__links *L, int i, dq__err *err) {
    dq__conn *c = NULL;
    char host[256];
    snprintf(host, sizeof(host), "%s", L->map.nodes[i].host);
    int rc = node_link(L, i, &c, err);
    return rc == DQ_OK ? load_map(L, c, host, err) : rc;
}

/* 1 if node i of the map is one of the URI's seeds. */
static int is_seed(const dq__links *L, int i) {
    for (int k = 0; k < L->uri->nseeds; k++)
        if (L->uri->seeds[k].port == L->map.nodes[i].port &&
            strcmp(L->uri->seeds[k].host, L->map.nodes[i].host) == 0)
            return 1;
    return 0;
}

/* Learns the slot map from the first node that answers: those with a live
 * link first (no connect to wait for), then the seeds of the URI, then the
 * other known nodes (a dead one may cost a connect timeout). */
static int refresh_map(dq__links *L, dq__err *err) {
    drop_broken(L);
    int rc = DQ_EIO;
    for (int pass = 0; pass < 3; pass++) {
        int n = pass == 1 ? L->uri->nseeds : L->map.nnodes;
        for (int i = 0; i < n; i++) {
            int node = i;
            if (pass == 1) {
                const dq__seed *s = &L->uri->seeds[i];
                if ((node = dq__slotmap_node(&L->map, s->host, s->port)) < 0)
                    return dq__err_set(err, DQ_ENOMEM, "out of memory");
            }
            int linked = node < L->nconns && L->conns[node] != NULL;
            if ((pass == 0) != linked || (pass == 2 && is_seed(L, node)))
                continue;
            if ((rc = load_from(L, node, err)) == DQ_OK) {
                L->stale = 0;
                return DQ_OK;
            }
            if (rc == DQ_EAUTH || rc == DQ_ENOMEM)
                return rc;
        }
    }
    return rc;
}

/* ---- Entry points ---- */

int dq__links_get(dq__links *L, int slot, dq__conn **out, dq__err *err) {
    int kind = L->uri->kind;
    if (kind == DQ_URI_SENTINEL) {
        if (L->one != NULL && (dq__conn_broken(L->one) || L->stale)) {
            dq__conn_free(L->one);
            L->one = NULL;
        }
        int rc = L->one ? DQ_OK : find_primary(L, err);
        *out = L->one;
        return rc;
    }
    if (kind != DQ_URI_CLUSTER) {
        if (L->one != NULL && dq__conn_broken(L->one)) {
            dq__conn_free(L->one);
            L->one = NULL;
        }
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
    if (L->stale && (rc = refresh_map(L, err)) != DQ_OK)
        return rc;
    int i = L->map.owner[slot];
    if (i < 0) {
        L->stale = 1;
        return dq__err_set(err, DQ_EIO,
                          "cluster: no node serves hash slot %d (the "
                          "cluster is not fully covered)",
                          slot);
    }
    if ((rc = node_link(L, i, out, err)) != DQ_OK)
        L->stale = 1; /* its node may have failed over */
    return rc;
}

int dq__links_at(dq__links *L, const char *host, int port, dq__conn **out,
                 dq__err *err) {
    int i = dq__slotmap_node(&L->map, host, port);
    if (i < 0)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    return node_link(L, i, out, err);
}

void dq__links_moved(dq__links *L, int slot, const char *host, int port) {
    if (dq__slotmap_moved(&L->map, slot, host, port) != DQ_OK)
        L->stale = 1;
    /* One slot moved usually means a resharding or failover moved more. */
    L->stale = 1;
}

void dq__links_stale(dq__links *L) { L->stale = 1; }

int dq__links_open_new(dq__links *L, int slot, dq__conn **out,
                       dq__err *err) {
    dq__conn *c;
    int rc = dq__links_get(L, slot, &c, err);
    if (rc != DQ_OK)
        return rc;
    if (L->uri->kind == DQ_URI_CLUSTER) {
        const dq__node_addr *a = &L->map.nodes[L->map.owner[slot]];
        return open_at(L, a->host, a->port, 1, out, err);
    }
    if (L->uri->kind == DQ_URI_SENTINEL)
        return open_at(L, L->phost, L->pport, 1, out, err);
    dq__conn_cfg cfg = {L->uri, L->opts, NULL};
    return dq__conn_open(&cfg, out, err);
}

const char *dq__links_where(dq__links *L, int slot) {
    if (L->uri->kind == DQ_URI_CLUSTER) {
        int i = slot >= 0 && slot < DQ_SLOTS ? L->map.owner[slot] : -1;
        if (i < 0)
            return "?";
        snprintf(L->where, sizeof(L->where), "%s:%d", L->map.nodes[i].host,
                 L->map.nodes[i].port);
    }
    return L->where;
}

int dq__links_owns(const dq__links *L, const dq__conn *c) {
    if (c != NULL && c == L->one)
        return 1;
    for (int i = 0; c != NULL && i < L->nconns; i++)
        if (L->conns[i] == c)
            return 1;
    return 0;
}

/* ---- Every primary (node-wide calls: dq_queues) ---- */

int dq__links_node_slot(const dq__links *L, int i) {
    if (L->uri->kind != DQ_URI_CLUSTER)
        return i == 0 ? 0 : -1;
    unsigned char seen[DQ_MAX_NODES] = {0};
    int k = 0;
    for (int s = 0; s < DQ_SLOTS; s++) {
        int o = L->map.owner[s];
        if (o < 0 || o >= DQ_MAX_NODES || seen[o])
            continue;
        seen[o] = 1;
        if (k++ == i)
            return s;
    }
    return -1;
}
