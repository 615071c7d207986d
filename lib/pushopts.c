/*
 * pushopts.c - the options a push can carry (dq_push_opts) and how they
 * travel to push.lua: one "|<tag><value>" string for the whole call, kept
 * in each job's meta (lua/include/meta.lua, parse_meta), and a repeating job's
 * rule (every or cron, cron.c parses) as an argument of its own.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "pushopts.h"

dq_push_opts *dq_push_opts_new(void) {
    return calloc(1, sizeof(dq_push_opts));
}

void dq_push_opts_free(dq_push_opts *o) { free(o); }

/* Records why a set failed (dq_push_opts_errmsg); returns DQ_EINVAL. */
static int opt_bad(dq_push_opts *o, const char *msg) {
    snprintf(o->errmsg, sizeof(o->errmsg), "%s", msg);
    return DQ_EINVAL;
}

int dq_push_opts_set(dq_push_opts *o, int opt, int64_t value) {
    if (o == NULL)
        return DQ_ENULL;
    o->errmsg[0] = '\0';
    switch (opt) {
    case DQ_PUSHOPT_MAX_ATTEMPTS:
        if (value < 0 || value > DQ_ATTEMPTS_MAX)
            return opt_bad(o, "max attempts must be 0..DQ_ATTEMPTS_MAX");
        o->max_attempts = value;
        return DQ_OK;
    case DQ_PUSHOPT_EXPIRE_AT:
        if (value < 0 || value > DQ_AT_MAX)
            return opt_bad(o, "expire at must be 0..DQ_AT_MAX");
        o->expire = value;
        o->expire_rel = 0;
        return DQ_OK;
    case DQ_PUSHOPT_EXPIRE_IN_MS:
        if (value < 0 || value > DQ_DELAY_MAX)
            return opt_bad(o, "expire in ms must be 0..DQ_DELAY_MAX");
        o->expire = value;
        o->expire_rel = value > 0;
        return DQ_OK;
    case DQ_PUSHOPT_EVERY_MS:
        if (value != 0 && (value < DQ_EVERY_MIN || value > DQ_DELAY_MAX))
            return opt_bad(o, "every ms must be 0 (none) or "
                              "DQ_EVERY_MIN..DQ_DELAY_MAX");
        o->every = value;
        if (value > 0)
            o->has_cron = 0;
        return DQ_OK;
    case DQ_PUSHOPT_TZ_OFFSET_MIN:
        if (value < -DQ_TZ_OFFSET_MAX || value > DQ_TZ_OFFSET_MAX)
            return opt_bad(o, "tz offset must be -840..840 minutes");
        o->tz_min = (int)value;
        return DQ_OK;
    case DQ_PUSHOPT_CRON:
        return opt_bad(o, "DQ_PUSHOPT_CRON is text: use "
                          "dq_push_opts_set_str");
    case DQ_PUSHOPT_DEBOUNCE_MAX_MS:
        if (value < 0 || value > DQ_DELAY_MAX)
            return opt_bad(o, "debounce max ms must be 0 (none) or "
                              "1..DQ_DELAY_MAX");
        o->debounce_max = value;
        return DQ_OK;
    case DQ_PUSHOPT_GROUP:
        return opt_bad(o, "DQ_PUSHOPT_GROUP is text: use "
                          "dq_push_opts_set_str");
    case DQ_PUSHOPT_PRIORITY:
        if (value < 0 || value > DQ_PRIORITY_MAX)
            return opt_bad(o, "priority must be 0..DQ_PRIORITY_MAX (9)");
        o->priority = (int)value;
        return DQ_OK;
    default:
        return opt_bad(o, "unknown option");
    }
}

/* A group name: 1..DQ_GROUP_MAX bytes of letters, digits and "_-.:@"
 * (never the '|' of the option string, nor bytes a key name would need
 * quoted in the CLI's output). */
static int set_group(dq_push_opts *o, const char *value) {
    size_t n = value == NULL ? 0 : strlen(value);
    if (n > DQ_GROUP_MAX)
        return opt_bad(o, "a group name is at most DQ_GROUP_MAX (64) bytes");
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)value[i]) &&
            strchr("_-.:@", value[i]) == NULL)
            return opt_bad(o, "a group name has letters, digits and "
                              "\"_-.:@\" only");
    memcpy(o->group, value == NULL ? "" : value, n);
    o->group[n] = '\0';
    return DQ_OK;
}

int dq_push_opts_set_str(dq_push_opts *o, int opt, const char *value) {
    if (o == NULL)
        return DQ_ENULL;
    o->errmsg[0] = '\0';
    if (opt == DQ_PUSHOPT_GROUP)
        return set_group(o, value);
    if (opt != DQ_PUSHOPT_CRON)
        return opt_bad(o, "not a text option: dq_push_opts_set_str takes "
                          "DQ_PUSHOPT_CRON or DQ_PUSHOPT_GROUP");
    if (value == NULL || value[0] == '\0') {
        o->has_cron = 0;
        o->cron_text[0] = '\0';
        return DQ_OK;
    }
    dq__cron c;
    dq__err err;
    dq__err_clear(&err);
    if (dq__cron_parse(value, &c, &err) != DQ_OK)
        return opt_bad(o, err.msg);
    o->cron = c;
    o->has_cron = 1;
    o->every = 0;
    snprintf(o->cron_text, sizeof(o->cron_text), "%s", value);
    return DQ_OK;
}

const char *dq_push_opts_errmsg(const dq_push_opts *o) {
    return o == NULL ? "" : o->errmsg;
}

/* Whether the options make jobs repeat. */
static int repeats(const dq_push_opts *o) {
    return o != NULL && (o->every > 0 || o->has_cron);
}

int dq__check_push_opts(const dq_push_opts *o, size_t n, const int64_t *times,
                        int absolute, const char *const *ids, dq__err *err) {
    if (repeats(o)) {
        if (o->expire > 0)
            return dq__err_set(err, DQ_EINVAL,
                               "a repeating job cannot expire: set either a "
                               "repeat (every, cron) or an expiry");
        for (size_t i = 0; i < n; i++)
            if (ids == NULL || ids[i] == NULL)
                return dq__err_set(err, DQ_EINVAL,
                                   "job %zu repeats but has no id: a "
                                   "repeating job needs the caller's id "
                                   "(pushes of one id register it once)",
                                   i);
    }
    if (o == NULL || o->expire == 0 || times == NULL)
        return DQ_OK;
    /* A job whose expiry is not after its due time could never run; where
     * both count the same way (from the push, or on the epoch) say so now. */
    if (absolute == !o->expire_rel) {
        for (size_t i = 0; i < n; i++)
            if (o->expire <= times[i])
                return dq__err_set(err, DQ_EINVAL,
                                   "job %zu expires (%" PRId64 ") before it "
                                   "is due (%" PRId64 "): it could never run",
                                   i, o->expire, times[i]);
    }
    return DQ_OK;
}

size_t dq__push_opts_str(const dq_push_opts *o, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    if (o == NULL)
        return 0;
    if (o->max_attempts > 0)
        len += (size_t)snprintf(buf + len, size - len, "|m%" PRId64,
                                o->max_attempts);
    if (o->expire > 0)
        len += (size_t)snprintf(buf + len, size - len, "|%c%" PRId64,
                                o->expire_rel ? 'X' : 'x', o->expire);
    if (repeats(o))
        len += (size_t)snprintf(buf + len, size - len, "|r");
    if (o->debounce_max > 0)
        len += (size_t)snprintf(buf + len, size - len, "|b%" PRId64,
                                o->debounce_max);
    if (o->group[0] != '\0')
        len += (size_t)snprintf(buf + len, size - len, "|g%s", o->group);
    if (o->priority > 0)
        len += (size_t)snprintf(buf + len, size - len, "|p%d", o->priority);
    return len;
}

int dq__check_debounce(const dq_push_opts *o, int flags, size_t n,
                       int absolute, const char *const *ids, dq__err *err) {
    if (flags != DQ_PUSH_DEBOUNCE) {
        if (o != NULL && o->debounce_max > 0)
            return dq__err_set(err, DQ_EINVAL,
                               "DQ_PUSHOPT_DEBOUNCE_MAX_MS needs the flag "
                               "DQ_PUSH_DEBOUNCE");
        return DQ_OK;
    }
    if (absolute)
        return dq__err_set(err, DQ_EINVAL,
                           "DQ_PUSH_DEBOUNCE counts delays from each push: "
                           "it takes no DQ_PUSH_AT");
    if (repeats(o) || (o != NULL && o->expire > 0))
        return dq__err_set(err, DQ_EINVAL,
                           "a debounced push takes no repeat and no expiry");
    for (size_t i = 0; i < n; i++)
        if (ids == NULL || ids[i] == NULL)
            return dq__err_set(err, DQ_EINVAL,
                               "job %zu is debounced but has no id: "
                               "DQ_PUSH_DEBOUNCE needs the caller's id", i);
    return DQ_OK;
}

size_t dq__push_rule_str(const dq_push_opts *o, char *buf, size_t size) {
    buf[0] = '\0';
    if (o == NULL)
        return 0;
    if (o->every > 0)
        return (size_t)snprintf(buf, size, "e%" PRId64, o->every);
    if (o->has_cron)
        return dq__cron_rule(&o->cron, o->tz_min, o->cron_text, buf, size);
    return 0;
}
