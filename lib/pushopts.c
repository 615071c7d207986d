/*
 * pushopts.c - the options a push can carry (dq_push_opts) and how they
 * travel to push.lua: one "|<tag><value>" string for the whole call, kept
 * in each job's meta (lua/common.lua, parse_meta).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops.h"

dq_push_opts *dq_push_opts_new(void) {
    return calloc(1, sizeof(dq_push_opts));
}

void dq_push_opts_free(dq_push_opts *o) { free(o); }

int dq_push_opts_set(dq_push_opts *o, int opt, int64_t value) {
    if (o == NULL)
        return DQ_ENULL;
    switch (opt) {
    case DQ_PUSHOPT_MAX_ATTEMPTS:
        if (value < 0 || value > DQ_ATTEMPTS_MAX)
            return DQ_EINVAL;
        o->max_attempts = value;
        return DQ_OK;
    case DQ_PUSHOPT_EXPIRE_AT:
        if (value < 0 || value > DQ_AT_MAX)
            return DQ_EINVAL;
        o->expire = value;
        o->expire_rel = 0;
        return DQ_OK;
    case DQ_PUSHOPT_EXPIRE_IN_MS:
        if (value < 0 || value > DQ_DELAY_MAX)
            return DQ_EINVAL;
        o->expire = value;
        o->expire_rel = value > 0;
        return DQ_OK;
    default:
        return DQ_EINVAL;
    }
}

int dq__check_push_opts(const dq_push_opts *o, size_t n, const int64_t *times,
                        int absolute, dq__err *err) {
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
    return len;
}
