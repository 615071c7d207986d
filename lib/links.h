/*
 * links.h - the blocking client's links to what its URI names: one node, a
 * Redis Cluster (one link per node, opened on demand, chosen by the slot
 * map of route.h) or the primary that Sentinels name.  client.c asks for
 * "the link to the owner of slot S" and reports what it learns (MOVED, a
 * broken link, READONLY); this unit keeps the topology up to date.
 */
#ifndef DQ_LINKS_H
#define DQ_LINKS_H

#include "conn.h"
#include "route.h"

typedef struct dq__links dq__links;

/* No I/O yet.  uri and opts must outlive the links. */
int dq__links_new(const dq__uri *uri, const dq_options *opts,
                  dq__links **out, dq__err *err);
void dq__links_free(dq__links *L); /* NULL is a no-op */

/* 1 for a cluster or Sentinel (commands may be redirected or retried). */
int dq__links_routed(const dq__links *L);
/* 1 for a cluster (sharded pub/sub, database 0 only). */
int dq__links_cluster(const dq__links *L);

/* The link to the node that owns slot (the one node, or the primary),
 * connected first if needed: for a cluster the slot map is learnt (or
 * learnt again after dq__links_stale) from known nodes and the seeds; for
 * Sentinel the primary is asked for and checked with ROLE.  The link stays
 * owned by L.  DQ_OK, or DQ_EIO / DQ_ETIMEDOUT / DQ_EAUTH / DQ_EREDIS /
 * DQ_ENOMEM with err set (nothing was sent then). */
int dq__links_get(dq__links *L, int slot, dq__conn **out, dq__err *err);
/* The link to the cluster node host:port (an ASK target). */
int dq__links_at(dq__links *L, const char *host, int port, dq__conn **out,
                 dq__err *err);
/* A MOVED redirection: slot lives at host:port from now on. */
void dq__links_moved(dq__links *L, int slot, const char *host, int port);
/* Learn the topology again before the next dq__links_get (a broken link,
 * READONLY, CLUSTERDOWN); broken links are dropped then. */
void dq__links_stale(dq__links *L);
/* A new connection, not kept by L, to the node that owns slot (a
 * subscriber's). */
int dq__links_open_new(dq__links *L, int slot, dq__conn **out,
                       dq__err *err);
/* 1 if c is still one of L's links (links are replaced after failures). */
int dq__links_owns(const dq__links *L, const dq__conn *c);
/* Sentinel: reads what the +switch-master subscriber got, without
 * blocking (reopening it first when it died or stays silent to a PING,
 * at most every 100 ms doubling to 30 s); a failover of our master name
 * makes the route stale and the next dq__links_get goes to the new
 * primary.  Returns 1 while
 * the route is stale (the primary is to be found again), else 0; 0 for
 * other kinds.  Called before an operation is routed, not between its
 * calls (dq__links_get does not): an operation's calls and its WAIT stay
 * on the links it started with unless one of them fails. */
int dq__links_listen(dq__links *L);
/* Sentinel: the subscriber link, for a blocking wait to include (its data
 * is then taken by dq__links_listen), or NULL. */
dq__conn *dq__links_sentinel_sub(dq__links *L);
/* Changes each time the primary's address changes: connections opened
 * with dq__links_open_new before belong to the old primary. */
unsigned dq__links_epoch(const dq__links *L);
/* "host:port" of the node that owns slot, or "?" (for messages). */
const char *dq__links_where(dq__links *L, int slot);

/* A slot owned by the i-th node that owns slots (i from 0; nodes in the
 * order of their lowest slot), or -1 past the last: dq__links_get of each
 * reaches every primary once.  The map as last learnt (dq__links_get learns
 * it when stale).  One node or Sentinel: slot 0 for i 0, then -1. */
int dq__links_node_slot(const dq__links *L, int i);

#endif
