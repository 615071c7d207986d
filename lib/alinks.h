/*
 * alinks.h - the async client's routes (lib/alinks.c, used by lib/async.c)
 * over the reconnecting links of alink.h.  Compiled only with libevent.
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
 * What to ask and what the answers mean is topo.h's, shared with the
 * blocking client.
 *
 * What the routes tell the client, through its dq__ahost: changed when
 * calls that waited may go now (a link came up, the map or the primary
 * changed), link_down when a link that may carry calls failed (with
 * whether to report it to the state callback), state for the other state
 * changes.
 */
#ifndef DQ_ALINKS_H
#define DQ_ALINKS_H

#include "alink.h"

/* ---- Routes ---- */

typedef struct dq__routes dq__routes;

/* For the client behind h with its parsed uri and options (all outlive
 * the routes); where names the URI's server in messages.  No I/O yet. */
int dq__routes_new(const dq__ahost *h, const dq__uri *uri,
                   const dq_options *opts,
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
 * the host's changed will tell. */
dq__alink *dq__routes_get(dq__routes *R, int slot);
/* The up link to the cluster node host:port (an ASK target), or NULL (it
 * is being opened). */
dq__alink *dq__routes_at(dq__routes *R, const char *host, int port);
/* A MOVED redirection: slot lives at host:port (map refreshed too). */
void dq__routes_moved(dq__routes *R, int slot, const char *host, int port);
/* Learn the topology again: refresh the map, resolve the primary again. */
void dq__routes_stale(dq__routes *R);
/* Where a subscriber for slot connects: 2 the URI itself (one node), 1
 * host:port, 0 not known yet (being learnt: the host's changed will
 * tell). */
int dq__routes_target(dq__routes *R, int slot, char *host, size_t hsize,
                      int *port);
/* The server of slot, for messages. */
void dq__routes_where(const dq__routes *R, int slot, char *out, size_t n);
/* The last failure of the topology (a Sentinel, a node), "" if none. */
const char *dq__routes_why(const dq__routes *R);

#endif
