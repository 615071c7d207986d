/*
 * gstats.h - the per-group counts of a queue (dq_group_stats; gstats.c):
 * the list the engine fills from groups.lua's replies, summed by name
 * over the partitions.
 */
#ifndef DQ_GSTATS_H
#define DQ_GSTATS_H

#include "internal.h"
#include "reply.h"

/* A new empty list that shows at most max groups; NULL when out of
 * memory. */
dq_group_list *dq__glist_new(int max);

/* Adds one reply of groups.lua to l: a group already listed (another
 * partition's) gets its counts added, a new one is appended; then those
 * with jobs pending go first, and l shows the first max.  *now_ms is
 * raised to the reply's time.  DQ_OK, DQ_EPROTO or DQ_ENOMEM with err
 * set. */
int dq__glist_feed(dq_group_list *l, const dq__reply *r, int64_t *now_ms,
                   dq__err *err);

#endif
