/*
 * config.c - queue settings stored in Redis (lua/config.lua): their names,
 * ranges and argument checks, and the script calls that read and change
 * them.  Pure, like ops.c: the sync and async clients both run these.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* Indexed by DQ_SET_*: the field in the conf hash, and the range. */
static const struct {
    const char *name;
    int64_t lo, hi;
} settings_tab[DQ_SET__COUNT + 1] = {
    [DQ_SET_MAX_ATTEMPTS] = {"max_attempts", 0, DQ_ATTEMPTS_MAX},
    [DQ_SET_LEASE_MS] = {"lease_ms", DQ_LEASE_MIN, DQ_LEASE_MAX},
    [DQ_SET_BACKOFF] = {"backoff", DQ_BACKOFF_FIXED, DQ_BACKOFF_EXPONENTIAL},
    [DQ_SET_BACKOFF_BASE_MS] = {"backoff_base_ms", 0, DQ_DELAY_MAX},
    [DQ_SET_BACKOFF_CAP_MS] = {"backoff_cap_ms", 0, DQ_DELAY_MAX},
    [DQ_SET_BACKOFF_JITTER] = {"backoff_jitter", 0, 100},
    [DQ_SET_DEAD_MAX] = {"dead_max", 1, INT64_C(1000000000)},
    [DQ_SET_DEAD_TTL_MS] = {"dead_ttl_ms", 1, DQ_DELAY_MAX},
    [DQ_SET_EXPIRED] = {"expired", DQ_EXPIRED_DEAD, DQ_EXPIRED_DROP},
    [DQ_SET_RATE_MAX] = {"rate_max", 1, DQ_RATE_MAX},
    [DQ_SET_RATE_WINDOW_MS] = {"rate_window_ms", 1, DQ_RATE_WINDOW_MAX},
    [DQ_SET_LAYOUT] = {"layout", DQ_LAYOUT_DEFAULT, DQ_LAYOUT_COMPACT_PUSH},
    [DQ_SET_MAX_INFLIGHT] = {"inflight_max", 1, DQ_INFLIGHT_MAX},
    [DQ_SET_GROUP_MAX_INFLIGHT] = {"group_inflight_max", 1, DQ_INFLIGHT_MAX},
};

const char *dq_setting_name(int setting) {
    if (setting < 1 || setting > DQ_SET__COUNT)
        return NULL;
    return settings_tab[setting].name;
}

int dq_setting_by_name(const char *name) {
    if (name == NULL)
        return DQ_ENULL;
    for (int i = 1; i <= DQ_SET__COUNT; i++)
        if (strcmp(settings_tab[i].name, name) == 0)
            return i;
    return DQ_EINVAL;
}

int dq__check_config(const char *queue, size_t n, const int *settings,
                     const int64_t *values, int partitions, dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc != DQ_OK)
        return rc;
    if (n == 0 || n > DQ_SET__COUNT)
        return dq__err_set(err, DQ_EINVAL, "n is %zu; it must be 1..%d", n,
                           DQ_SET__COUNT);
    /* a read (partitions < 0) passes values NULL: its caller checked
     * the array it reads into */
    if (settings == NULL || (values == NULL && partitions >= 0))
        return dq__err_set(err, DQ_ENULL, "%s is NULL",
                           settings == NULL ? "settings" : "values");
    int rate[2] = {-1, -1}; /* rate_max, rate_window_ms: unset 0 / set 1 */
    for (size_t i = 0; i < n; i++) {
        int s = settings[i];
        if (dq_setting_name(s) == NULL)
            return dq__err_set(err, DQ_EINVAL,
                               "settings[%zu] is %d: no such setting "
                               "(DQ_SET_*)", i, s);
        for (size_t j = 0; j < i; j++)
            if (settings[j] == s)
                return dq__err_set(err, DQ_EINVAL,
                                   "setting %s is named twice",
                                   settings_tab[s].name);
        if (partitions < 0) /* a read: no values to check */
            continue;
        int64_t v = values[i];
        if (s == DQ_SET_RATE_MAX || s == DQ_SET_RATE_WINDOW_MS)
            rate[s == DQ_SET_RATE_WINDOW_MS] = v != DQ_UNSET;
        if (v == DQ_UNSET)
            continue;
        if (v < settings_tab[s].lo || v > settings_tab[s].hi)
            return dq__err_set(err, DQ_EINVAL,
                               "%s is %" PRId64 "; it must be %" PRId64
                               "..%" PRId64 " (or DQ_UNSET)",
                               settings_tab[s].name, v, settings_tab[s].lo,
                               settings_tab[s].hi);
        if (s == DQ_SET_RATE_MAX && v < partitions)
            return dq__err_set(err, DQ_EINVAL,
                               "rate_max is %" PRId64 "; a queue of %d "
                               "partitions needs at least one delivery per "
                               "partition and window",
                               v, partitions);
        if ((s == DQ_SET_MAX_INFLIGHT || s == DQ_SET_GROUP_MAX_INFLIGHT) &&
            v < partitions)
            return dq__err_set(err, DQ_EINVAL,
                               "%s is %" PRId64 "; a queue of %d "
                               "partitions needs at least one job in flight "
                               "per partition", settings_tab[s].name, v,
                               partitions);
    }
    /* The two halves of a rate limit change together, so no stored state
     * ever has one without the other. */
    if (partitions >= 0 && rate[0] != rate[1])
        return dq__err_set(err, DQ_EINVAL,
                           "rate_max and rate_window_ms go together: set "
                           "both or unset both in one call");
    return DQ_OK;
}

int dq__build_config(dq__cmd *c, dq__core *core, size_t n,
                     const int *settings, const int64_t *values) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_CONFIG, &core->keys,
                           3 + (int)n * (values ? 2 : 1));
    if (rc != DQ_OK)
        return rc;
    dq__cmd_arg(c, values ? "set" : "get", 3);
    dq__cmd_int(c, core->keys.part < 0 ? 0 : core->keys.part);
    dq__cmd_int(c, core->partitions > 1 ? core->partitions : 1);
    for (size_t i = 0; i < n; i++) {
        const char *name = settings_tab[settings[i]].name;
        dq__cmd_arg(c, name, strlen(name));
        if (values == NULL)
            continue;
        if (values[i] == DQ_UNSET)
            dq__cmd_arg(c, "", 0);
        else
            dq__cmd_int(c, values[i]);
    }
    return dq__cmd_seal(c);
}

int dq__decode_config(const dq__reply *r, size_t n, int64_t *values,
                      dq__err *err) {
    if (values == NULL) { /* a set: 0 */
        if (dq__reply_type(r) != DQ_R_INTEGER || dq__reply_int(r) != 0)
            return dq__err_set(err, DQ_EPROTO, "config: unexpected reply");
        return DQ_OK;
    }
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) != n)
        return dq__err_set(err, DQ_EPROTO, "config: unexpected reply");
    for (size_t i = 0; i < n; i++) {
        const dq__reply *e = dq__reply_at(r, i);
        if (dq__reply_type(e) == DQ_R_NIL) {
            values[i] = DQ_UNSET;
            continue;
        }
        long long v;
        if (!dq__reply_ll(e, &v))
            return dq__err_set(err, DQ_EPROTO, "config: unexpected value");
        values[i] = v;
    }
    return DQ_OK;
}
