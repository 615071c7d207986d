/*
 * cron.h - the one cron parser (5 fields), for DQ_PUSHOPT_CRON.  The
 * scripts never see cron text: push.lua gets the parsed form as explicit
 * value lists (dq__cron_rule) and does only arithmetic with them.
 */
#ifndef DQ_CRON_H
#define DQ_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Longest cron text accepted, and the size of a rule string. */
#define DQ_CRON_TEXT_MAX 200
#define DQ_CRON_RULE_MAX 640

/* Parses text into out.  Refuses (DQ_EINVAL, with a message in err that
 * names the field) bad syntax, values out of range, reversed ranges,
 * steps of 0 or longer than the field, and an expression that can never
 * fire (no day of the month in its months: "0 0 30 2 *").  out is written
 * only on success. */
int dq__cron_parse(const char *text, dq__cron *out, dq__err *err);

/* The rule string push.lua stores (lua/include/repeat.lua, cron_next):
 * "c<tz>;<min>;<hour>;<dom>;<mon>;<dow>;<a|o>;<text>", each list comma
 * separated values, a/o: a day needs both dom and dow / either; text the
 * expression with its blanks squeezed (for people, dq_job_info_repeat).
 * Returns the length, or 0 if it does not fit size. */
size_t dq__cron_rule(const dq__cron *c, int tz_min, const char *text,
                     char *buf, size_t size);

/* A stored rule (rf(id), lua/include/meta.lua) as people read it, into buf:
 * "every <ms> ms from <start ms>" or "cron <text> tz <+-minutes>"; "" for
 * a rule it does not know. */
void dq__repeat_text(const char *rule, size_t len, char *buf, size_t size);

#endif
