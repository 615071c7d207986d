/*
 * topo.h - routing without I/O: how both clients learn the topology that a
 * URI names, as a state machine that links.c (blocking) and alinks.c
 * (libevent) drive the way client.c and async.c drive the engine of op.h.
 *
 * Cluster: the slot map of route.h and its refresh - which node to ask
 * next (nodes with a live link first; a blocking driver then the seeds and
 * the other known nodes), CLUSTER SHARDS else CLUSTER SLOTS, MOVED, stale.
 * Sentinel: which Sentinel to ask (in turn), its SENTINEL
 * GET-MASTER-ADDR-BY-NAME answer checked with ROLE on the address it
 * gives (a replica: the next Sentinel).  One Sentinel link stays
 * subscribed to +switch-master: a message for our master name makes the
 * route stale and names the new primary, tried first - a demoted primary
 * that stays reachable is left at once, not when it first answers
 * READONLY.  Its subscriber's liveness (probed after 5 s of silence, dead
 * when the answer is later than the command timeout) and backoff (the
 * next Sentinel each time, doubling to a cap) are timed here; its
 * Sentinel's own answer is compared with the primary in use (a failover
 * missed while nobody listened).  With every Sentinel down the clients
 * work as before: READONLY or a broken link sends them to the Sentinels.
 *
 * A driver asks for an action (dq__topo_refresh, dq__topo_resolve,
 * dq__topo_check), carries it out (DQ_TA_SEND: send cmd to that address),
 * and feeds back the reply (dq__topo_feed) or the failure to reach it
 * (dq__topo_fail), which answer the next action; times are passed in.
 */
#ifndef DQ_TOPO_H
#define DQ_TOPO_H

#include "route.h"
#include "uri.h"

/* Commands an action sends (dq__topo_argv gives their argv). */
enum { DQ_TC_SHARDS = 1, DQ_TC_SLOTS, DQ_TC_MASTER, DQ_TC_ROLE };
/* Actions. */
enum {
    DQ_TA_IDLE = 0, /* nothing to do now (one is out, or nothing stale) */
    DQ_TA_SEND,     /* send cmd to the target, feed the reply or failure */
    DQ_TA_READY,    /* the route is usable (map loaded / primary checked) */
    DQ_TA_FAILED,   /* the refresh failed: code, message in T->err */
    DQ_TA_CONNECT   /* no node is up to ask: open links to the known ones */
};
/* Targets of a DQ_TA_SEND. */
enum { DQ_TT_NODE = 0, DQ_TT_SENTINEL, DQ_TT_PRIMARY };
/* What the Sentinel subscriber needs (dq__topo_sub_tick). */
enum { DQ_TS_NONE = 0, DQ_TS_OPEN, DQ_TS_PROBE, DQ_TS_DEAD };

typedef struct dq__tact {
    int kind;         /* DQ_TA_* */
    int cmd;          /* SEND: DQ_TC_* */
    int to;           /* SEND: DQ_TT_* */
    int idx;          /* SEND: node index in the map / Sentinel seed index */
    const char *host; /* SEND: the address (valid until the next call) */
    int port;
    unsigned seq;     /* SEND: its number, to feed back with */
    int code;         /* FAILED: the code (T->err has the message) */
} dq__tact;

typedef struct dq__topo {
    const dq__uri *uri;
    int blocking;          /* the driver connects while it asks (sync) */
    dq__slotmap map;       /* cluster: slot -> node (seeds listed first) */
    unsigned char *up;     /* up[i]: node i has a live link (drivers say) */
    void **link;           /* link[i]: the driver's link to node i, NULL */
    int nup;               /* entries in up and link */
    int stale;             /* cluster: learn the map; Sentinel: the primary */
    int loaded;            /* cluster: the map was learnt once */
    int64_t asked_us;      /* cluster: when a refresh last asked a node */
    int pass, k, rr;       /* cluster: the refresh's candidate cursor */
    /* The SEND out (step 0: none). */
    int step, to, idx;
    unsigned seq;
    /* Sentinel */
    int sidx;              /* the Sentinel to ask next */
    int tried;             /* Sentinels asked in this resolve */
    int from_switch;       /* the candidate came from +switch-master */
    int pknown;            /* host:port was named (ROLE may be pending) */
    int pok;               /* ... and said ROLE master */
    char host[256];        /* the primary, or the candidate checked */
    int port;
    char nhost[256];       /* named by +switch-master, tried first; "" */
    int nport;
    char ehost[256];       /* the last primary that said ROLE master */
    int eport;
    unsigned epoch;        /* changes with that primary's address */
    /* Sentinel subscriber (+switch-master) */
    int sub, sub_idx;      /* subscribed; the Sentinel it is on / next */
    int64_t sub_next_us;   /* no new one before (after failures) */
    int64_t sub_gap_us;    /* the pause after the next failure */
    int64_t gap_min_us, gap_max_us;
    int64_t heard_us;      /* its last reply */
    int64_t ping_us;       /* a probe awaits its answer since, 0: none */
    int64_t limit_us;      /* a probe's answer is due within */
    dq__err err;           /* the last failure */
} dq__topo;

/* The quiet time after which the subscriber is probed. */
#define DQ_TOPO_QUIET_US 5000000
/* A cluster refresh asks at most once per this (non-blocking drivers). */
#define DQ_TOPO_REFRESH_GAP_US 100000

/* For uri (outlives T).  blocking: the driver connects while it asks
 * (a refresh also tries seeds and nodes without a link; a resolve gives
 * up after one round of Sentinels; the subscriber backs off 100 ms to
 * 30 s), else 50 ms to 2 s and the Sentinels are asked round after round.
 * cmd_timeout_ms: a probe's answer is due within (0: 5 s).  DQ_OK or
 * DQ_ENOMEM. */
int dq__topo_init(dq__topo *T, const dq__uri *uri, int blocking,
                  int64_t cmd_timeout_ms, dq__err *err);
void dq__topo_clear(dq__topo *T);
/* The URI of the node host:port (host copied into buf of size bytes, which
 * u points to): the client's TLS, credentials and database; creds 0 (a
 * Sentinel): no credentials, database 0. */
void dq__topo_uri(const dq__topo *T, const char *host, int port, int creds,
                  char *buf, size_t size, dq__uri *u);
/* 1 for a cluster or Sentinel (commands may be redirected or retried). */
int dq__topo_routed(const dq__topo *T);
/* argv of command cmd (at most 3 words); returns argc. */
int dq__topo_argv(const dq__topo *T, int cmd, const char **argv);

/* Feeds the reply to SEND number seq (ignored if another one is out):
 * the next action into a. */
void dq__topo_feed(dq__topo *T, unsigned seq, const dq__reply *r,
                   int64_t now_us, dq__tact *a);
/* SEND number seq failed (its target unreachable, its link lost). */
void dq__topo_fail(dq__topo *T, unsigned seq, int code, const char *msg,
                   dq__tact *a);

/* ---- Cluster ---- */
/* Node i has a live link (up 1) or not. */
void dq__topo_node_up(dq__topo *T, int i, int up);
/* 1 if some node has a live link. */
int dq__topo_any_up(const dq__topo *T);
/* The driver's link to node i (NULL: none), and setting it (DQ_OK or
 * DQ_ENOMEM): a table drivers and their users iterate by node index. */
void *dq__topo_link(const dq__topo *T, int i);
int dq__topo_set_link(dq__topo *T, int i, void *link);
/* Learn the topology again (a broken link, READONLY, CLUSTERDOWN). */
void dq__topo_stale(dq__topo *T);
/* MOVED: slot lives at host:port (and the map is stale). */
void dq__topo_moved(dq__topo *T, int slot, const char *host, int port);
/* Starts a refresh if the map is stale and none is out. */
void dq__topo_refresh(dq__topo *T, int64_t now_us, dq__tact *a);
/* The node index that owns slot, -1: unknown (or no such slot). */
int dq__topo_owner(const dq__topo *T, int slot);
/* 1 if node i owns a slot. */
int dq__topo_owns(const dq__topo *T, int i);
/* Every primary, for calls that go to each one (dq_queues): a slot owned
 * by the i-th node that owns slots (from 0, nodes in the order of their
 * lowest slot), or -1 past the last; the map as last learnt.  One node or
 * Sentinel: slot 0 for i 0, then -1. */
int dq__topo_node_slot(const dq__topo *T, int i);
/* "host:port" of the node of slot (cluster; "?" while unknown) or of the
 * last primary that passed ROLE (Sentinel), written into buf (n bytes)
 * and returned; buf is left as it was when neither is known.  Links to
 * one node share this text. */
const char *dq__topo_addr(const dq__topo *T, int slot, char *buf,
                          size_t n);
/* 1 if the step out is command cmd to a target of kind to. */
int dq__topo_step_is(const dq__topo *T, int cmd, int to);
/* Where the calls of slot go, for messages: "host:port (hash slot S)" of
 * its cluster node, the primary the Sentinels named, or single (one
 * node's own address). */
void dq__topo_where(const dq__topo *T, int slot, const char *single,
                    char *out, size_t n);

/* Where the node of slot is: 1 with its address (the cluster node that
 * owns slot, the primary the Sentinels named), 0 while that is to be
 * learnt (stale, a refresh out, no owner known), 2 for one node (the
 * URI's own). */
int dq__topo_target(const dq__topo *T, int slot, const char **host,
                    int *port);

/* ---- Sentinel ---- */
/* Starts finding the primary (a +switch-master's first, then the
 * Sentinels in turn) unless a Sentinel is being asked (DQ_TA_IDLE then);
 * a ROLE check out is dropped. */
void dq__topo_resolve(dq__topo *T, dq__tact *a);
/* A link to the primary came up: check it with ROLE (IDLE if no primary
 * is known or a resolve is under way). */
void dq__topo_check(dq__topo *T, dq__tact *a);
/* A reply on the subscriber: 1 if it is a +switch-master naming a new
 * primary for our name (the route is stale then and the next resolve
 * tries it first; a step out is dropped). */
int dq__topo_switch(dq__topo *T, const dq__reply *r);
/* What the subscriber needs now; *at_us: when to ask again. */
int dq__topo_sub_tick(dq__topo *T, int64_t now_us, int64_t *at_us);
/* 1 if r confirms a SUBSCRIBE (["subscribe", channel, count]). */
int dq__topo_sub_confirmed(const dq__reply *r);
/* A subscriber is up on Sentinel idx. */
void dq__topo_sub_up(dq__topo *T, int idx, int64_t now_us);
/* It answered (a message, a probe's answer). */
void dq__topo_sub_heard(dq__topo *T, int64_t now_us);
/* It failed or died: the next Sentinel after the backoff. */
void dq__topo_sub_failed(dq__topo *T, int64_t now_us);
/* The subscriber's Sentinel's own GET-MASTER-ADDR-BY-NAME answer: 1 if
 * it names another primary than ours (a failover missed: stale), 0 if
 * not, -1 if it names none. */
int dq__topo_sub_master(dq__topo *T, const dq__reply *r);

/* ---- Sentinel replies ---- */

/* The Sentinels' channel that announces a new primary. */
#define DQ_SENTINEL_SWITCH "+switch-master"

/* The primary's address from a SENTINEL GET-MASTER-ADDR-BY-NAME reply
 * ([host, port]) into host (hsize bytes) and *port: DQ_OK, or DQ_ENOTFOUND
 * when the reply names none (nil: the Sentinel knows no such primary; or
 * an address that does not fit), host and port unchanged then. */
int dq__sentinel_addr(const dq__reply *r, char *host, size_t hsize,
                      int *port);
/* A pub/sub message on +switch-master ("<name> <old ip> <old port> <new
 * ip> <new port>") for the primary named master: its new address into host
 * (hsize bytes) and *port, and 1; 0 for any other reply or name. */
int dq__sentinel_switch(const dq__reply *r, const char *master, char *host,
                        size_t hsize, int *port);

#endif
