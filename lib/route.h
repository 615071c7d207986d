/*
 * route.h - where a command goes: the Redis Cluster slot map (CRC16 of the
 * hash tag, 16384 slots, owners learnt from CLUSTER SHARDS or CLUSTER
 * SLOTS and from MOVED redirections) and the node table both drivers index
 * their links by.  Pure: no I/O; the drivers ask, send and feed replies.
 *
 * Node indexes are stable for the life of a map: a node is only ever
 * appended, so a driver may keep its links in an array parallel to
 * map->nodes.
 */
#ifndef DQ_ROUTE_H
#define DQ_ROUTE_H

#include "internal.h"
#include "reply.h"

#define DQ_SLOTS 16384
#define DQ_MAX_NODES 512

/* The hash slot of key (the part between the first '{' and the next '}'
 * when that part is not empty, else the whole key). */
int dq__key_slot(const char *key, size_t len);

typedef struct dq__node_addr {
    char host[256];
    int port;
} dq__node_addr;

typedef struct dq__slotmap {
    int nnodes, cap;
    dq__node_addr *nodes;  /* nnodes, grown on demand */
    short owner[DQ_SLOTS]; /* node index, -1 unknown */
    int tls;               /* take TLS ports from CLUSTER SHARDS */
    unsigned version;      /* bumped by every change */
} dq__slotmap;

/* Empties m (every slot unknown, no nodes). */
void dq__slotmap_init(dq__slotmap *m, int tls);
/* Frees the node table. */
void dq__slotmap_clear(dq__slotmap *m);
/* Index of host:port, appended if new; -1 when the table is full (or out
 * of memory). */
int dq__slotmap_node(dq__slotmap *m, const char *host, int port);
/* Loads the owners of every slot from a CLUSTER SHARDS reply (shards = 1)
 * or a CLUSTER SLOTS reply (0) sent by the node at asked_host (which
 * stands in for an empty or "?" address).  Slots the reply does not cover
 * become unknown.  DQ_OK, or DQ_EREDIS with err set when the reply is not
 * such a listing (m unchanged). */
int dq__slotmap_load(dq__slotmap *m, const dq__reply *r, int shards,
                     const char *asked_host, dq__err *err);
/* A MOVED redirection: slot now lives at host:port.  DQ_OK or DQ_ENOMEM
 * (node table full). */
int dq__slotmap_moved(dq__slotmap *m, int slot, const char *host, int port);
/* Number of slots with a known owner. */
int dq__slotmap_covered(const dq__slotmap *m);

#endif
