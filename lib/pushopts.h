/*
 * pushopts.h - the options of a push (pushopts.c) as push.lua takes them:
 * checked against the push's times, then one option string kept in each
 * job's meta and a repeating job's rule.  Pure: no I/O.
 */
#ifndef DQ_PUSHOPTS_H
#define DQ_PUSHOPTS_H

#include "internal.h"

/* The options of a push (NULL: none) checked against its times, and as
 * the string push.lua takes (buf of DQ_PUSH_OPTS_STR bytes); returns its
 * length. */
#define DQ_PUSH_OPTS_STR 192
int dq__check_push_opts(const dq_push_opts *o, size_t n, const int64_t *times,
                        int absolute, const char *const *ids, dq__err *err);
size_t dq__push_opts_str(const dq_push_opts *o, char *buf, size_t size);
/* The rules of DQ_PUSH_DEBOUNCE (flags, without DQ_PUSH_AT): the caller's
 * ids, delays, no repeat or expiry; DQ_PUSHOPT_DEBOUNCE_MAX_MS only with
 * it. */
int dq__check_debounce(const dq_push_opts *o, int flags, size_t n,
                       int absolute, const char *const *ids, dq__err *err);
/* The repeat rule push.lua takes ("" none): "e<ms>", or a cron rule
 * (cron.h, dq__cron_rule); buf of DQ_PUSH_RULE_STR bytes. */
#define DQ_PUSH_RULE_STR 640
size_t dq__push_rule_str(const dq_push_opts *o, char *buf, size_t size);

#endif
