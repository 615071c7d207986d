/*
 * topo.c - routing as a state machine without I/O (see topo.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

int dq__topo_init(dq__topo *T, const dq__uri *uri, int blocking,
                  int64_t cmd_timeout_ms, dq__err *err) {
    memset(T, 0, sizeof(*T));
    T->uri = uri;
    T->blocking = blocking;
    T->stale = 1;
    T->gap_min_us = blocking ? 100000 : 50000;
    T->gap_max_us = blocking ? 30000000 : 2000000;
    T->sub_gap_us = T->gap_min_us;
    T->limit_us = cmd_timeout_ms > 0 ? cmd_timeout_ms * 1000 : DQ_TOPO_QUIET_US;
    T->asked_us = -DQ_TOPO_REFRESH_GAP_US;
    dq__slotmap_init(&T->map, uri->tls);
    for (int i = 0; uri->kind == DQ_URI_CLUSTER && i < uri->nseeds; i++)
        if (dq__slotmap_node(&T->map, uri->seeds[i].host,
                             uri->seeds[i].port) < 0)
            return dq__err_set(err, DQ_ENOMEM, "out of memory");
    return DQ_OK;
}

void dq__topo_clear(dq__topo *T) {
    dq__slotmap_clear(&T->map);
    free(T->up);
    free(T->link);
    T->up = NULL;
    T->link = NULL;
    T->nup = 0;
}

void dq__topo_uri(const dq__topo *T, const char *host, int port, int creds,
                  char *buf, size_t size, dq__uri *u) {
    snprintf(buf, size, "%s", host);
    dq__uri_node(T->uri, buf, port, u);
    if (!creds) {
        u->user = u->password = NULL;
        u->db = 0;
    }
}

int dq__topo_any_up(const dq__topo *T) {
    for (int i = 0; i < T->nup; i++)
        if (T->up[i])
            return 1;
    return 0;
}

int dq__topo_routed(const dq__topo *T) {
    return T->uri->kind == DQ_URI_CLUSTER || T->uri->kind == DQ_URI_SENTINEL;
}

int dq__topo_argv(const dq__topo *T, int cmd, const char **argv) {
    if (cmd == DQ_TC_ROLE) {
        argv[0] = "ROLE";
        return 1;
    }
    if (cmd == DQ_TC_MASTER) {
        argv[0] = "SENTINEL";
        argv[1] = "GET-MASTER-ADDR-BY-NAME";
        argv[2] = T->uri->master;
        return 3;
    }
    argv[0] = "CLUSTER";
    argv[1] = cmd == DQ_TC_SHARDS ? "SHARDS" : "SLOTS";
    return 2;
}

/* Puts SEND cmd to target (to, idx, host:port) out, into a. */
static void send(dq__topo *T, int cmd, int to, int idx, const char *host,
                 int port, dq__tact *a) {
    T->step = cmd;
    T->to = to;
    T->idx = idx;
    *a = (dq__tact){DQ_TA_SEND, cmd, to, idx, host, port, ++T->seq, 0};
}

/* Nothing out any more; a gets kind. */
static void done(dq__topo *T, int kind, dq__tact *a) {
    T->step = 0;
    *a = (dq__tact){kind, 0, 0, 0, NULL, 0, 0, T->err.code};
}

/* 1 if a blocking driver gives up on code at once (bad credentials are
 * bad everywhere). */
static int fatal(const dq__topo *T, int code) {
    return T->blocking && (code == DQ_EAUTH || code == DQ_ENOMEM);
}

/* ---- Cluster ---- */

static int is_up(const dq__topo *T, int i) { return i < T->nup && T->up[i]; }

/* Grows the tables parallel to the map's nodes to hold node i: DQ_OK,
 * or DQ_ENOMEM (or no such node). */
static int grow(dq__topo *T, int i) {
    int n = T->map.nnodes;
    if (i < T->nup)
        return DQ_OK;
    unsigned char *u = i < n ? realloc(T->up, (size_t)n) : NULL;
    if (u != NULL)
        T->up = u;
    void **l = u != NULL ? realloc(T->link, sizeof(*l) * (size_t)n) : NULL;
    if (l == NULL)
        return DQ_ENOMEM;
    T->link = l;
    memset(u + T->nup, 0, (size_t)(n - T->nup));
    memset(l + T->nup, 0, sizeof(*l) * (size_t)(n - T->nup));
    T->nup = n;
    return DQ_OK;
}

void dq__topo_node_up(dq__topo *T, int i, int up) {
    if (grow(T, i) == DQ_OK)
        T->up[i] = (unsigned char)(up != 0); /* else counts as down */
}

void *dq__topo_link(const dq__topo *T, int i) {
    return i >= 0 && i < T->nup ? T->link[i] : NULL;
}

int dq__topo_set_link(dq__topo *T, int i, void *link) {
    if (link == NULL && i >= T->nup)
        return DQ_OK;
    int rc = grow(T, i);
    if (rc == DQ_OK)
        T->link[i] = link;
    return rc;
}

void dq__topo_stale(dq__topo *T) { T->stale = 1; }

void dq__topo_moved(dq__topo *T, int slot, const char *host, int port) {
    dq__slotmap_moved(&T->map, slot, host, port);
    /* One slot moved usually means a resharding or failover moved more. */
    T->stale = 1;
}

/* 1 if node i of the map is one of the URI's seeds. */
static int is_seed(const dq__topo *T, int i) {
    for (int k = 0; k < T->uri->nseeds; k++)
        if (T->uri->seeds[k].port == T->map.nodes[i].port &&
            strcmp(T->uri->seeds[k].host, T->map.nodes[i].host) == 0)
            return 1;
    return 0;
}

/* The next node this refresh asks, or -1: those with a live link first
 * (in turn, no connect to wait for), then (blocking) the seeds, then the
 * other known nodes (a dead one may cost a connect timeout). */
static int candidate(dq__topo *T) {
    int n = T->map.nnodes;
    for (; T->pass < (T->blocking ? 3 : 1); T->pass++, T->k = 0) {
        int lim = T->pass == 1 ? T->uri->nseeds : n;
        while (T->k < lim) {
            int i = T->k++;
            if (T->pass == 0)
                i = (T->rr + i) % n;
            else if (T->pass == 1)
                i = dq__slotmap_node(&T->map, T->uri->seeds[i].host,
                                     T->uri->seeds[i].port);
            if (i < 0 || (T->pass == 0) != is_up(T, i) ||
                (T->pass == 2 && is_seed(T, i)))
                continue;
            if (T->pass == 0 && !T->blocking)
                T->rr = i + 1;
            return i;
        }
    }
    return -1;
}

/* Asks the next candidate, or ends the refresh (asked: one was). */
static void next_node(dq__topo *T, int64_t now, dq__tact *a) {
    int asked = T->step != 0;
    int i = candidate(T);
    if (i >= 0) {
        T->asked_us = now;
        send(T, DQ_TC_SHARDS, DQ_TT_NODE, i, T->map.nodes[i].host,
             T->map.nodes[i].port, a);
        return;
    }
    T->stale = 1;
    if (!asked && !T->blocking) {
        done(T, DQ_TA_CONNECT, a);
        return;
    }
    if (T->err.code == DQ_OK)
        dq__err_set(&T->err, DQ_EIO, "cluster: no node answered");
    done(T, DQ_TA_FAILED, a);
}

void dq__topo_refresh(dq__topo *T, int64_t now_us, dq__tact *a) {
    if (!T->stale || T->step != 0) {
        *a = (dq__tact){0};
        return;
    }
    T->stale = 0; /* set again if asked for meanwhile */
    T->pass = T->k = 0;
    dq__err_set(&T->err, DQ_OK, "%s", "");
    next_node(T, now_us, a);
}

/* The map as node T->idx sent it. */
static void feed_map(dq__topo *T, const dq__reply *r, int64_t now,
                     dq__tact *a) {
    const dq__node_addr *n = &T->map.nodes[T->idx];
    if (T->step == DQ_TC_SHARDS && (dq__reply_is_error(r, "ERR") ||
                                    dq__reply_is_error(r, "NOPERM"))) {
        /* Before Redis 7 there is no CLUSTER SHARDS; an ACL may grant
         * only CLUSTER SLOTS (if it refuses that too, its NOPERM is the
         * error). */
        send(T, DQ_TC_SLOTS, DQ_TT_NODE, T->idx, n->host, n->port, a);
        return;
    }
    dq__node_addr at = *n; /* loading may move the table */
    int rc = dq__slotmap_load(&T->map, r, T->step == DQ_TC_SHARDS, at.host,
                              &T->err);
    if (rc == DQ_OK && dq__slotmap_covered(&T->map) == 0)
        rc = dq__err_set(&T->err, DQ_EREDIS,
                        "%s:%d: the cluster has no slots assigned yet",
                        at.host, at.port);
    if (rc == DQ_OK) {
        T->loaded = 1;
        done(T, DQ_TA_READY, a);
    } else if (fatal(T, rc)) {
        T->stale = 1;
        done(T, DQ_TA_FAILED, a);
    } else {
        next_node(T, now, a);
    }
}

int dq__topo_owner(const dq__topo *T, int slot) {
    return slot >= 0 && slot < DQ_SLOTS ? T->map.owner[slot] : -1;
}

int dq__topo_owns(const dq__topo *T, int i) {
    for (int s = 0; s < DQ_SLOTS; s++)
        if (T->map.owner[s] == i)
            return 1;
    return 0;
}

int dq__topo_node_slot(const dq__topo *T, int i) {
    if (T->uri->kind != DQ_URI_CLUSTER)
        return i == 0 ? 0 : -1;
    unsigned char seen[DQ_MAX_NODES] = {0};
    for (int s = 0; s < DQ_SLOTS; s++) {
        int o = T->map.owner[s];
        if (o < 0 || o >= DQ_MAX_NODES || seen[o])
            continue;
        seen[o] = 1;
        if (i-- == 0)
            return s;
    }
    return -1;
}

const char *dq__topo_addr(const dq__topo *T, int slot, char *buf,
                          size_t n) {
    int i = dq__topo_owner(T, slot);
    const dq__node_addr *a = i >= 0 ? &T->map.nodes[i] : NULL;
    if (T->uri->kind == DQ_URI_CLUSTER && a == NULL)
        return "?";
    if (a != NULL || T->ehost[0] != '\0')
        snprintf(buf, n, "%s:%d", a ? a->host : T->ehost,
                 a ? a->port : T->eport);
    return buf;
}

int dq__topo_step_is(const dq__topo *T, int cmd, int to) {
    return T->step == cmd && T->to == to;
}

void dq__topo_where(const dq__topo *T, int slot, const char *single,
                    char *out, size_t n) {
    int i = dq__topo_owner(T, slot);
    if (T->uri->kind == DQ_URI_SENTINEL && T->pknown)
        snprintf(out, n, "primary '%s' at %s:%d", T->uri->master, T->host,
                 T->port);
    else if (T->uri->kind == DQ_URI_SENTINEL)
        snprintf(out, n, "primary '%s' (not named by a Sentinel yet)",
                 T->uri->master);
    else if (T->uri->kind != DQ_URI_CLUSTER)
        snprintf(out, n, "%s", single);
    else if (i >= 0)
        snprintf(out, n, "%s:%d (hash slot %d)", T->map.nodes[i].host,
                 T->map.nodes[i].port, slot);
    else
        snprintf(out, n, "the node of hash slot %d (not known yet)", slot);
}

/* ---- Sentinel ---- */

/* Asks Sentinel T->sidx for the primary. */
static void ask_sentinel(dq__topo *T, dq__tact *a) {
    const dq__seed *s = &T->uri->seeds[T->sidx];
    T->tried++;
    send(T, DQ_TC_MASTER, DQ_TT_SENTINEL, T->sidx, s->host, s->port, a);
}

/* The candidate failed: the next Sentinel (the same one after a
 * +switch-master's candidate); blocking, one round at most. */
static void next_sentinel(dq__topo *T, int advance, dq__tact *a) {
    int n = T->uri->nseeds;
    if (n < 1 || (T->blocking && T->tried >= n)) {
        if (T->err.code == DQ_OK)
            dq__err_set(&T->err, DQ_EIO, "no Sentinel answered");
        done(T, DQ_TA_FAILED, a);
        return;
    }
    if (advance)
        T->sidx = (T->sidx + 1) % n;
    ask_sentinel(T, a);
}

void dq__topo_resolve(dq__topo *T, dq__tact *a) {
    if (T->step == DQ_TC_MASTER) { /* a ROLE check out is dropped */
        *a = (dq__tact){0};
        return;
    }
    T->stale = 1;
    T->pok = 0;
    T->tried = 0;
    dq__err_set(&T->err, DQ_OK, "%s", "");
    T->from_switch = T->nhost[0] != '\0';
    if (T->from_switch) {
        snprintf(T->host, sizeof(T->host), "%s", T->nhost);
        T->port = T->nport;
        T->nhost[0] = '\0';
        T->pknown = 1;
        T->stale = 0;
        send(T, DQ_TC_ROLE, DQ_TT_PRIMARY, -1, T->host, T->port, a);
        return;
    }
    next_sentinel(T, 0, a);
}

void dq__topo_check(dq__topo *T, dq__tact *a) {
    if (T->step != 0 || !T->pknown || T->stale) {
        *a = (dq__tact){0};
        return;
    }
    T->pok = 0;
    T->tried = 0;
    T->from_switch = 1; /* a replica now: ask the Sentinel in turn */
    send(T, DQ_TC_ROLE, DQ_TT_PRIMARY, -1, T->host, T->port, a);
}

int dq__topo_target(const dq__topo *T, int slot, const char **host,
                    int *port) {
    if (T->uri->kind == DQ_URI_SENTINEL) {
        *host = T->host;
        *port = T->port;
        return T->pknown && !T->stale;
    }
    if (T->uri->kind != DQ_URI_CLUSTER)
        return 2;
    int i = dq__topo_owner(T, slot);
    if (!T->loaded || T->stale || T->step != 0 || i < 0)
        return 0;
    *host = T->map.nodes[i].host;
    *port = T->map.nodes[i].port;
    return 1;
}

/* A Sentinel's answer: check the address it gives with ROLE. */
static void feed_master(dq__topo *T, const dq__reply *r, dq__tact *a) {
    char host[sizeof(T->host)];
    int port;
    if (dq__sentinel_addr(r, host, sizeof(host), &port) != DQ_OK) {
        const dq__seed *s = &T->uri->seeds[T->sidx];
        dq__err_set(&T->err, DQ_EREDIS,
                   "Sentinel %s:%d knows no primary named '%s'", s->host,
                   s->port, T->uri->master);
        next_sentinel(T, 1, a);
        return;
    }
    memcpy(T->host, host, sizeof(host));
    T->port = port;
    T->pknown = 1;
    T->stale = 0;
    T->from_switch = 0;
    send(T, DQ_TC_ROLE, DQ_TT_PRIMARY, -1, T->host, T->port, a);
}

/* The candidate's ROLE: a primary is taken, anything else sends the
 * resolve on. */
static void feed_role(dq__topo *T, const dq__reply *r, dq__tact *a) {
    if (dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) >= 1 &&
        dq__reply_is(dq__reply_at(r, 0), "master")) {
        if (T->port != T->eport || strcmp(T->host, T->ehost) != 0)
            T->epoch++; /* subscribers of the old primary must follow */
        memcpy(T->ehost, T->host, sizeof(T->host));
        T->eport = T->port;
        T->pok = 1;
        done(T, DQ_TA_READY, a);
        return;
    }
    dq__err_set(&T->err, DQ_EIO,
               "Sentinel named %s:%d as primary '%s', but it is not (yet) "
               "a primary",
               T->host, T->port, T->uri->master);
    T->stale = 1;
    next_sentinel(T, !T->from_switch, a);
}

void dq__topo_feed(dq__topo *T, unsigned seq, const dq__reply *r,
                   int64_t now_us, dq__tact *a) {
    if (seq != T->seq || T->step == 0)
        *a = (dq__tact){0};
    else if (T->step == DQ_TC_MASTER)
        feed_master(T, r, a);
    else if (T->step == DQ_TC_ROLE)
        feed_role(T, r, a);
    else
        feed_map(T, r, now_us, a);
}

void dq__topo_fail(dq__topo *T, unsigned seq, int code, const char *msg,
                   dq__tact *a) {
    if (seq != T->seq || T->step == 0) {
        *a = (dq__tact){0};
        return;
    }
    dq__err_set(&T->err, code, "%s", msg);
    int stop = fatal(T, code) && T->to != DQ_TT_SENTINEL;
    if (T->to == DQ_TT_NODE && !stop) {
        next_node(T, T->asked_us, a);
    } else if (T->to != DQ_TT_NODE && !stop) {
        if (T->to == DQ_TT_PRIMARY)
            T->stale = 1;
        next_sentinel(T, T->to == DQ_TT_SENTINEL || !T->from_switch, a);
    } else {
        T->stale = 1;
        done(T, DQ_TA_FAILED, a);
    }
}

/* ---- Sentinel subscriber ---- */

int dq__topo_switch(dq__topo *T, const dq__reply *r) {
    char nh[sizeof(T->nhost)];
    int np;
    if (!dq__sentinel_switch(r, T->uri->master, nh, sizeof(nh), &np))
        return 0;
    if (T->pknown && !T->stale && np == T->port && strcmp(nh, T->host) == 0)
        return 0; /* followed already */
    memcpy(T->nhost, nh, sizeof(nh));
    T->nport = np;
    T->stale = 1;
    T->step = 0; /* a resolve under way is dropped: its replies too */
    T->seq++;
    return 1;
}

int dq__topo_sub_tick(dq__topo *T, int64_t now, int64_t *at_us) {
    if (!T->sub) {
        *at_us = T->sub_next_us;
        return now >= T->sub_next_us && (T->pknown || !T->blocking)
                   ? DQ_TS_OPEN
                   : DQ_TS_NONE;
    }
    /* A Sentinel that hangs (its host cut off, the process stopped) never
     * closes the link: one quiet for a while gets a probe, answered within
     * the limit or the link counts as dead. */
    if (T->ping_us > 0) {
        *at_us = T->ping_us + T->limit_us + 1;
        return now - T->ping_us > T->limit_us ? DQ_TS_DEAD : DQ_TS_NONE;
    }
    *at_us = T->heard_us + DQ_TOPO_QUIET_US + 1;
    if (now - T->heard_us <= DQ_TOPO_QUIET_US)
        return DQ_TS_NONE;
    T->ping_us = now;
    *at_us = now + T->limit_us + 1;
    return DQ_TS_PROBE;
}

int dq__topo_sub_confirmed(const dq__reply *r) {
    return dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) == 3 &&
           dq__reply_is(dq__reply_at(r, 0), "subscribe");
}

void dq__topo_sub_up(dq__topo *T, int idx, int64_t now_us) {
    T->sub = 1;
    T->sub_idx = idx;
    T->sub_gap_us = T->gap_min_us;
    dq__topo_sub_heard(T, now_us);
}

void dq__topo_sub_heard(dq__topo *T, int64_t now_us) {
    T->heard_us = now_us;
    T->ping_us = 0;
}

void dq__topo_sub_failed(dq__topo *T, int64_t now_us) {
    T->sub = 0;
    T->ping_us = 0;
    T->sub_idx = (T->sub_idx + 1) % (T->uri->nseeds > 0 ? T->uri->nseeds : 1);
    T->sub_next_us = now_us + T->sub_gap_us;
    T->sub_gap_us = T->sub_gap_us * 2 > T->gap_max_us ? T->gap_max_us
                                                      : T->sub_gap_us * 2;
}

int dq__topo_sub_master(dq__topo *T, const dq__reply *r) {
    char host[sizeof(T->host)];
    int port;
    if (dq__sentinel_addr(r, host, sizeof(host), &port) != DQ_OK)
        return -1;
    if (!T->pknown || (port == T->port && strcmp(host, T->host) == 0))
        return 0;
    T->stale = 1; /* missed while nobody listened: ask again */
    return 1;
}

/* ---- Sentinel replies ---- */

/* Copies the len bytes at s into out (size bytes) as a C string; 0 if
 * they do not fit or are empty. */
static int copy_str(char *out, size_t size, const char *s, size_t len) {
    if (s == NULL || len == 0 || len >= size)
        return 0;
    memcpy(out, s, len);
    out[len] = '\0';
    return 1;
}

int dq__sentinel_addr(const dq__reply *r, char *host, size_t hsize,
                      int *port) {
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) != 2)
        return DQ_ENOTFOUND;
    size_t hl = 0, pl = 0;
    const char *h = dq__reply_str(dq__reply_at(r, 0), &hl);
    const char *p = dq__reply_str(dq__reply_at(r, 1), &pl);
    char hb[256], pb[8];
    if (!copy_str(hb, sizeof(hb), h, hl) || hl >= hsize ||
        !copy_str(pb, sizeof(pb), p, pl))
        return DQ_ENOTFOUND;
    char *end;
    long n = strtol(pb, &end, 10);
    if (*end != '\0' || n <= 0 || n > 65535)
        return DQ_ENOTFOUND;
    memcpy(host, hb, hl + 1);
    *port = (int)n;
    return DQ_OK;
}

int dq__sentinel_switch(const dq__reply *r, const char *master, char *host,
                        size_t hsize, int *port) {
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) != 3 ||
        !dq__reply_is(dq__reply_at(r, 0), "message") ||
        !dq__reply_is(dq__reply_at(r, 1), DQ_SENTINEL_SWITCH))
        return 0;
    size_t len;
    const char *m = dq__reply_str(dq__reply_at(r, 2), &len);
    char buf[600], name[256], oh[256], nh[256];
    int op, np;
    if (!copy_str(buf, sizeof(buf), m, len))
        return 0;
    if (sscanf(buf, "%255s %255s %d %255s %d", name, oh, &op, nh, &np) != 5 ||
        strcmp(name, master) != 0 || np <= 0 || np > 65535 ||
        strlen(nh) >= hsize)
        return 0;
    memcpy(host, nh, strlen(nh) + 1);
    *port = np;
    return 1;
}
