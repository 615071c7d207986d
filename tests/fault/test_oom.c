/*
 * tests/fault/test_oom.c - Redis at maxmemory with noeviction, and the
 * eviction-policy warning.
 *
 *  - pushes fail with DQ_EOOM and Redis's own text, and write nothing: a
 *    chunk of a push (up to 1000 jobs) is all there or not at all, because
 *    the scripts' #!lua shebang makes Redis refuse a writing script up front
 *    instead of failing one of its commands half-way;
 *  - everything that frees memory or only moves jobs keeps working at
 *    maxmemory (poll, ack, ack_batch, nack, extend, cancel, dead purge,
 *    stats, dead list): otherwise a full server could never be drained;
 *  - once drained, pushes work again;
 *  - dq_warnings() says so when the server's maxmemory-policy can evict
 *    queue keys (allkeys-*), and says nothing otherwise.
 */
#include "fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 200
#define PAYLOAD 1024
#define MAXCALLS 2000

static int64_t total(dq_client *c, const char *q) {
    int64_t s = -1, d = -1, f = -1, x = -1;
    int rc = dq_stats(c, q, &s, &d, &f, &x, NULL);
    ck_assert_msg(rc == 0, "stats at maxmemory: %s: %s", dq_errname(rc),
                  dq_errmsg(c));
    return s + d + f + x;
}

static char fail_msg[512]; /* dq_errmsg of the last failed push */

/* Calls that failed: their job range, to check chunk atomicity later. */
typedef struct failed_call {
    size_t lo, n;
} failed_call;
static failed_call oom_failed[64];
static int noom_failed;

/* Pushes calls of n jobs "job-<k>" (1 KiB each, k from *next on) until one
 * fails; returns the number of calls made, *rc_out the failure (0 if none
 * in MAXCALLS).  Memory drops back under maxmemory once a refused call's
 * arguments are freed, so a later small call may well succeed: only the
 * outcome of each call is checked, never which one fails. */
static long fill(dq_client *c, const char *q, size_t n, size_t *next,
                 int *rc_out) {
    static char payload[PAYLOAD];
    static char idb[2500][32];
    static const char *ids[2500];
    static const void *pl[2500];
    static size_t lens[2500];
    memset(payload, 'x', sizeof(payload));
    for (long call = 0; call < MAXCALLS; call++) {
        for (size_t j = 0; j < n; j++) {
            ft_job_id(idb[j], sizeof(idb[j]), "job", *next + j);
            ids[j] = idb[j];
            pl[j] = payload;
            lens[j] = sizeof(payload);
        }
        int64_t before = total(c, q);
        int rc = dq_push_batch(c, q, n, pl, lens, NULL, ids, 0, NULL, NULL);
        if (rc < 0) {
            snprintf(fail_msg, sizeof(fail_msg), "%s", dq_errmsg(c));
            int64_t delta = total(c, q) - before;
            /* Nothing half-written: whole chunks (<= 1000 jobs) or none. */
            ck_assert_msg(delta % 1000 == 0 && delta < (int64_t)n,
                          "failed push of %zu wrote %" PRId64 " jobs", n,
                          delta);
            ck_assert_int_lt(noom_failed, 64);
            oom_failed[noom_failed++] = (failed_call){*next, n};
            *rc_out = rc;
            *next += n;
            return call + 1;
        }
        ck_assert_int_eq(rc, (int)n);
        *next += n;
    }
    *rc_out = 0;
    return MAXCALLS;
}

/* Index of the failed call holding job idx, or -1. */
static int failed_of(size_t idx) {
    for (int i = 0; i < noom_failed; i++)
        if (idx >= oom_failed[i].lo && idx < oom_failed[i].lo + oom_failed[i].n)
            return i;
    return -1;
}

START_TEST(noeviction_full) {
    th_redis r;
    ft_start(&r, 0, "maxmemory 20mb\nmaxmemory-policy noeviction\n");
    dq_client *c = open_uri(r.uri, NULL);
    ck_assert_str_eq(dq_warnings(c), "");
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);

    size_t next = 0;
    int rc = 0;
    noom_failed = 0;
    long calls = fill(c, "oom", BATCH, &next, &rc);
    char used[32] = "?";
    ft_info_field(admin, "memory", "used_memory_human", used, sizeof(used));
    ck_assert_msg(rc == DQ_EOOM, "pushes never hit maxmemory (%ld calls): "
                  "%s", calls, dq_errname(rc));
    const char *msg = fail_msg;
    ck_assert_msg(strstr(msg, "OOM") && strstr(msg, "maxmemory"),
                  "unclear OOM message: %s", msg);
    char oom_msg[512];
    snprintf(oom_msg, sizeof(oom_msg), "%s", msg);
    /* Single pushes and 3-chunk batches meet the limit too. */
    calls += fill(c, "oom", 1, &next, &rc);
    ck_assert_int_eq(rc, DQ_EOOM);
    calls += fill(c, "oom", 2500, &next, &rc);
    ck_assert_int_eq(rc, DQ_EOOM);
    long refused = noom_failed;
    int64_t stored = total(c, "oom");

    /* At maxmemory: calls that free memory or move jobs still work. */
    dq_jobs *jobs = NULL;
    int n = dq_poll(c, "oom", 10, 60000, &jobs, NULL);
    ck_assert_msg(n == 10, "poll at maxmemory: %s: %s", dq_errname(n),
                  dq_errmsg(c));
    const dq_job *j[10];
    for (int i = 0; i < 10; i++)
        j[i] = dq_jobs_at(jobs, i);
#define WORKS(call)                                                        \
    do {                                                                   \
        int rc_ = (call);                                                  \
        ck_assert_msg(rc_ >= 0, "%s at maxmemory: %s: %s", #call,          \
                      dq_errname(rc_), dq_errmsg(c));                      \
    } while (0)
    WORKS(dq_ack(c, "oom", dq_job_id(j[0]), dq_job_token(j[0])));
    const char *ids[2] = {dq_job_id(j[1]), dq_job_id(j[2])};
    const char *toks[2] = {dq_job_token(j[1]), dq_job_token(j[2])};
    WORKS(dq_ack_batch(c, "oom", 2, ids, toks, NULL));
    WORKS(dq_extend(c, "oom", dq_job_id(j[3]), dq_job_token(j[3]), 60000,
                    NULL));
    WORKS(dq_nack(c, "oom", dq_job_id(j[3]), dq_job_token(j[3]), 0, 0));
    WORKS(dq_nack(c, "oom", dq_job_id(j[4]), dq_job_token(j[4]), 0,
                  DQ_NACK_DEAD));
    dq_jobs *dead = NULL;
    WORKS(dq_dead_list(c, "oom", 0, 10, &dead));
    dq_jobs_free(dead);
    WORKS(dq_dead_purge(c, "oom", NULL));
    WORKS(dq_cancel(c, "oom", dq_job_id(j[5]), DQ_CANCEL_INFLIGHT));
    char id6[DQ_ID_BUF];
    snprintf(id6, sizeof(id6), "%s", dq_job_id(j[6]));
    for (int i = 7; i < 10; i++)
        WORKS(dq_ack(c, "oom", dq_job_id(j[i]), dq_job_token(j[i])));
    /* j[6] stays in flight: the drain cancels it. */

    /* Drain: every stored job once; of each refused call, whole chunks
     * or nothing. */
    long acked = 8, dup = 0, phantom = 0;
    size_t njobs = next;
    uint8_t *seen = calloc(njobs, 1);
    ck_assert_ptr_nonnull(seen);
    for (int i = 0; i < 10; i++) {
        if (i == 3)
            continue; /* nacked: it comes again */
        long idx = ft_job_index(dq_job_id(j[i]), "job");
        if (idx >= 0 && (size_t)idx < njobs)
            seen[idx]++;
    }
    dq_jobs_free(jobs);
    int64_t end = th_mono_ms() + 60000;
    for (;;) {
        jobs = NULL;
        n = dq_poll(c, "oom", 1000, 60000, &jobs, NULL);
        WORKS(n);
        size_t k = dq_jobs_count(jobs);
        const char *bid[1000], *btok[1000];
        for (size_t i = 0; i < k; i++) {
            const dq_job *x = dq_jobs_at(jobs, i);
            long idx = ft_job_index(dq_job_id(x), "job");
            if (idx < 0 || (size_t)idx >= njobs)
                phantom++;
            else if (seen[idx]++)
                dup++;
            bid[i] = dq_job_id(x);
            btok[i] = dq_job_token(x);
        }
        if (k > 0) {
            int a = dq_ack_batch(c, "oom", k, bid, btok, NULL);
            ck_assert_msg(a == (int)k, "drain ack: %d %s", a, dq_errmsg(c));
            acked += a;
        }
        dq_jobs_free(jobs);
        if (n == 0) {
            if (total(c, "oom") == 0)
                break;
            /* j[6]'s lease: cancel it instead of waiting a minute. */
            WORKS(dq_cancel(c, "oom", id6, DQ_CANCEL_INFLIGHT));
            acked++;
        }
        ck_assert_msg(th_mono_ms() < end, "drain did not finish");
    }
    long half = 0, missing = 0;
    for (size_t lo = 0; lo < njobs;) {
        int f = failed_of(lo);
        size_t len = f < 0 ? 1 : (size_t)(oom_failed[f].lo + oom_failed[f].n - lo);
        if (f >= 0 && len > 1000)
            len = 1000;
        if (f >= 0 && (lo - oom_failed[f].lo) % 1000 != 0)
            len = 1000 - (lo - oom_failed[f].lo) % 1000;
        size_t got = 0;
        for (size_t i = lo; i < lo + len; i++)
            got += seen[i] > 0;
        if (f < 0 && got == 0)
            missing++; /* a push that succeeded, never delivered */
        if (f >= 0 && got != 0 && got != len)
            half++; /* part of a refused chunk was written */
        lo += len;
    }
    free(seen);
    /* Room again. */
    rc = dq_push(c, "oom", "again", 5, 0, NULL, 0, NULL, 0, NULL);
    ck_assert_msg(rc == 0, "push after draining: %s: %s", dq_errname(rc),
                  dq_errmsg(c));

    ft_report rep = {.pushed = (long)stored, .acked = acked,
                     .lost = missing, .dup_ack = dup};
    ft_figures("memory_pressure", &rep, refused,
               "(pushes refused at maxmemory 20mb) push_calls=%ld "
               "used_memory=%s half_written_chunks=%ld phantom=%ld "
               "message=\"%s\"",
               calls, used, half, phantom, oom_msg);
    ck_assert_int_eq(dup, 0);
    ck_assert_int_eq(phantom, 0);
    ck_assert_int_eq(missing, 0);
    ck_assert_int_eq(half, 0);
    ck_assert_int_eq(acked, stored);
    redisFree(admin);
    dq_close(c);
    th_redis_stop(&r);
#undef WORKS
}
END_TEST

START_TEST(eviction_policy_warning) {
    th_redis r;
    ft_start(&r, 0, NULL);
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    static const char *const policies[] = {
        "noeviction",  "volatile-lru", "volatile-lfu",   "volatile-random",
        "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random"};
    for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
        redisReply *x = rcmd_try(admin, "CONFIG SET maxmemory-policy %s",
                               policies[i]);
        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(x->type, REDIS_REPLY_STATUS);
        freeReplyObject(x);
        dq_client *c = open_uri(r.uri, NULL);
        const char *w = dq_warnings(c);
        int evicts = strncmp(policies[i], "allkeys-", 8) == 0;
        if (evicts) {
            ck_assert_msg(strstr(w, policies[i]) != NULL &&
                              strstr(w, "noeviction") != NULL,
                          "%s: warning \"%s\"", policies[i], w);
            printf("warning with %s: %s\n", policies[i], w);
        } else {
            ck_assert_msg(w[0] == '\0', "%s: unexpected warning \"%s\"",
                          policies[i], w);
        }
        /* Not cleared by calls that do not reconnect. */
        ck_assert_int_eq(dq_push(c, "w", "x", 1, 0, NULL, 0, NULL, 0, NULL),
                         0);
        dq_close(c);
    }
    redisFree(admin);
    th_redis_stop(&r);
}
END_TEST

TEST_SUITE("fault_oom", TU_SRV_NONE,
    {"noeviction_full", noeviction_full, 120, NULL},
    {"eviction_policy_warning", eviction_policy_warning, 60, NULL})
