/*
 * config.h - queue settings stored in Redis (config.c, lua/config.lua):
 * the argument check, the script call that reads or changes them and its
 * reply.  Pure, like ops.h: the sync and async clients both run these.
 */
#ifndef DQ_CONFIG_H
#define DQ_CONFIG_H

#include "ops.h"

/* n settings (DQ_SET_*, each once) of queue, with values to set (range or
 * DQ_UNSET) when partitions >= 1 (the client's partition count), or to
 * read when partitions < 0. */
int dq__check_config(const char *queue, size_t n, const int *settings,
                     const int64_t *values, int partitions, dq__err *err);
/* A set (values) or a get (values NULL) on the partition (or plain queue)
 * whose keys are core's current ones. */
int dq__build_config(dq__cmd *c, dq__core *core, size_t n,
                     const int *settings, const int64_t *values);
/* A set's reply (values NULL), or a get's into values[n]. */
int dq__decode_config(const dq__reply *r, size_t n, int64_t *values,
                      dq__err *err);

#endif
