/*
 * queues.h - the queues of a namespace, found by SCAN on every node that
 * owns slots (dq_queues; queues.c).
 */
#ifndef DQ_QUEUES_H
#define DQ_QUEUES_H

#include "links.h"

/* Lists the queues of namespace ns (up to max, 1..DQ_QUEUES_MAX, checked
 * by the caller) on every node of L into a new *out.  DQ_OK, or a code
 * with err set and *out NULL. */
int dq__queues_scan(dq__links *L, const char *ns, int max,
                    dq_queue_list **out, dq__err *err);

#endif
