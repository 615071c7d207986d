/*
 * tests/test_count_due.c - dq_count_due: the pending jobs of a queue per
 * due-time window, counted in Redis against its clock without reading a
 * job (one ZCOUNT per window); the partitions of a partitioned queue
 * summed (the suite runs again as count_due@p4); bad input refused before
 * anything is sent; a broken connection reopened and the read tried again.
 */
#include <stdio.h>
#include <string.h>

#include "test_suite.h"
#include "test_utils.h"

/* Counts, failing the test on an error. */
static void count(dq_client *c, const char *q, const int64_t *b, int n,
                  int64_t *out, int64_t *now) {
    int rc = dq_count_due(c, q, b, n, out, now);
    ck_assert_msg(rc == 0, "dq_count_due: %d %s", rc, dq_errmsg(c));
}

/* Jobs at known times, each well inside its window, are counted in it; a
 * job due exactly at a bound counts in the window that bound closes. */
START_TEST(windows) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    int64_t t0 = server_ms(r);
    /* due: one an hour ago (pushed at), two now */
    ck_assert_int_eq(dq_push_at(c, Q, "p", 1, t0 - 3600000, "past", 0, NULL, 0,
                                NULL), 0);
    push_text(c, Q, "n", 0, "now1", 0, NULL);
    push_text(c, Q, "n", 0, "now2", 0, NULL);
    static const int64_t delays[] = {30000, 30000, 30000, 300000, 7200000,
                                     7200000, 86400000 * 30LL};
    for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++)
        push_text(c, Q, "x", delays[i], NULL, 0, NULL);
    /* bounds: 30 min ago, now, 1 min, 10 min, 1 day */
    const int64_t b[] = {-1800000, 0, 60000, 600000, 86400000};
    int64_t got[6], now = 0;
    count(c, Q, b, 5, got, &now);
    int64_t t1 = server_ms(r);
    ck_assert(now >= t0 && now <= t1);
    const int64_t want[6] = {1, 2, 3, 1, 2, 1};
    for (int i = 0; i < 6; i++)
        ck_assert_msg(got[i] == want[i], "window %d: %lld, want %lld", i,
                      (long long)got[i], (long long)want[i]);
    /* they add up to the pending jobs */
    int64_t s[5];
    stats5(c, Q, s);
    ck_assert_int_eq(got[0] + got[1] + got[2] + got[3] + got[4] + got[5],
                     s[0] + s[1]);
    /* one bound: due by now, and later */
    const int64_t zero = 0;
    count(c, Q, &zero, 1, got, NULL);
    ck_assert_int_eq(got[0], 3);
    ck_assert_int_eq(got[1], 7);
    /* a job polled (in flight) is not pending: not counted */
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 2, 30000, &jobs, NULL), 2);
    dq_jobs_free(jobs);
    count(c, Q, &zero, 1, got, NULL);
    ck_assert_int_eq(got[0], 1);
    /* a bound exactly at a job's due time takes it in, the ms before it
     * does not: aim both at a job due in an hour, from a reading of the
     * server's now, until a call runs within the same ms as that reading */
    const int64_t at = t0 + 3600000;
    ck_assert_int_eq(dq_push_at(c, Q, "e", 1, at, "edge", 0, NULL, 0, NULL), 0);
    int aimed = 0;
    for (int tries = 0; tries < 2000 && !aimed; tries++) {
        int64_t g2[3], n2 = 0;
        count(c, Q, &zero, 1, got, &now);
        const int64_t nb[2] = {at - now - 1, at - now};
        count(c, Q, nb, 2, g2, &n2);
        if (n2 != now)
            continue; /* the clock moved between the two: aim again */
        aimed = 1;
        /* before the edge: the 3 due and in flight less 2, the 30 s, 5 min;
         * at it: the edge job alone; after: the 2 h and 30 d jobs */
        ck_assert_int_eq(g2[0], 1 + 3 + 1);
        ck_assert_int_eq(g2[1], 1);
        ck_assert_int_eq(g2[2], 3);
    }
    ck_assert_msg(aimed, "no two calls ran within one ms of the server");
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A queue without jobs (never used): every window 0, the server's time,
 * and no job key made. */
START_TEST(empty) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    long long keys = rint_(r, "DBSIZE", NULL, NULL);
    int64_t b[DQ_COUNT_DUE_MAX], got[DQ_COUNT_DUE_MAX + 1], now = 0;
    for (int i = 0; i < DQ_COUNT_DUE_MAX; i++)
        b[i] = (int64_t)(i - 32) * 60000;
    memset(got, 0x55, sizeof(got));
    count(c, Q, b, DQ_COUNT_DUE_MAX, got, &now);
    for (int i = 0; i <= DQ_COUNT_DUE_MAX; i++)
        ck_assert_int_eq(got[i], 0);
    ck_assert(now > 1600000000000LL);
    /* (a partitioned client records the partition count at its first
     * call on a queue, whatever the call: that one key) */
    ck_assert_int_eq(rint_(r, "DBSIZE", NULL, NULL),
                     keys + (tu_parts() > 1 ? 1 : 0));
    redisFree(r);
    dq_close(c);
}
END_TEST

/* The widest call: 64 bounds of one minute each, one job in each window,
 * and the bounds at the limits of their range. */
START_TEST(many_windows) {
    dq_client *c = open_client();
    int64_t b[DQ_COUNT_DUE_MAX], got[DQ_COUNT_DUE_MAX + 1];
    for (int i = 0; i < DQ_COUNT_DUE_MAX; i++) {
        b[i] = (int64_t)(i + 1) * 60000;
        push_text(c, Q, "x", (int64_t)i * 60000 + 30000, NULL, 0, NULL);
    }
    count(c, Q, b, DQ_COUNT_DUE_MAX, got, NULL);
    for (int i = 0; i < DQ_COUNT_DUE_MAX; i++)
        ck_assert_msg(got[i] == 1, "window %d: %lld", i, (long long)got[i]);
    ck_assert_int_eq(got[DQ_COUNT_DUE_MAX], 0);
    const int64_t lim[2] = {-DQ_DELAY_MAX, DQ_DELAY_MAX};
    count(c, Q, lim, 2, got, NULL);
    ck_assert_int_eq(got[0], 0);
    ck_assert_int_eq(got[1], DQ_COUNT_DUE_MAX);
    ck_assert_int_eq(got[2], 0);
    dq_close(c);
}
END_TEST

/* A partitioned queue (whatever the suite's partitions): jobs spread over
 * 4 partitions are summed, one job per partition in each window. */
/* An id of job base that lives in partition part of 4. */
static const char *id_in4(char *buf, size_t n, const char *base, int part) {
    for (int k = 0;; k++) {
        snprintf(buf, n, "%s_%d", base, k);
        if (tu_part_of(buf, 4) == part)
            return buf;
    }
}

START_TEST(partitioned) {
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_PARTITIONS, 4), 0);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    char id[64];
    for (int p = 0; p < 4; p++) {
        push_text(c, Q, "a", 0, id_in4(id, sizeof(id), "a", p), 0, NULL);
        push_text(c, Q, "b", 120000, id_in4(id, sizeof(id), "b", p), 0, NULL);
        push_text(c, Q, "c", 7200000, id_in4(id, sizeof(id), "c", p), 0,
                  NULL);
    }
    push_text(c, Q, "d", 7200000, id_in4(id, sizeof(id), "d", 2), 0, NULL);
    const int64_t b[2] = {0, 3600000};
    int64_t got[3], now = 0;
    count(c, Q, b, 2, got, &now);
    ck_assert_int_eq(got[0], 4);
    ck_assert_int_eq(got[1], 4);
    ck_assert_int_eq(got[2], 5);
    ck_assert(now > 1600000000000LL);
    /* each partition holds its share, the plain queue none */
    redisContext *r = rconn();
    char key[1024];
    for (int p = 0; p < 4; p++) {
        /* pending jobs: native (due) and compact (cm's n) */
        tu_part_key(key, sizeof(key), "dq", Q, "due", p);
        long long n = rint_(r, "ZCARD", key, NULL);
        tu_part_key(key, sizeof(key), "dq", Q, "cm", p);
        redisReply *rep = th_cmd(r, "HGET %s n", key);
        if (rep->type == REDIS_REPLY_STRING)
            n += atoll(rep->str);
        freeReplyObject(rep);
        ck_assert_int_eq(n, p == 2 ? 4 : 3);
    }
    tu_part_key(key, sizeof(key), "dq", Q, "due", -1);
    ck_assert_int_eq(rint_(r, "ZCARD", key, NULL), 0);
    /* a client with another partition count is refused, as by dq_stats */
    dq_client *plain = NULL;
    o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_PARTITIONS, 2), 0);
    plain = open_uri(g_srv.uri, o);
    dq_options_free(o);
    ck_assert_int_eq(dq_count_due(plain, Q, b, 2, got, NULL), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(plain), "partitions"));
    dq_close(plain);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* Bad input: its code and a message naming the argument, nothing sent,
 * counts and now left as they were. */
START_TEST(bad_input) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    long long before = commands_processed(r);
    int64_t got[DQ_COUNT_DUE_MAX + 2], now = 77;
    for (int i = 0; i < DQ_COUNT_DUE_MAX + 2; i++)
        got[i] = -5;
    int64_t b[DQ_COUNT_DUE_MAX + 1];
    for (int i = 0; i <= DQ_COUNT_DUE_MAX; i++)
        b[i] = i;
    ck_assert_int_eq(dq_count_due(c, Q, NULL, 1, got, &now), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "bounds_ms"));
    ck_assert_int_eq(dq_count_due(c, Q, b, 0, got, &now), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "nbounds"));
    ck_assert_int_eq(dq_count_due(c, Q, b, -1, got, &now), DQ_EINVAL);
    ck_assert_int_eq(dq_count_due(c, Q, b, DQ_COUNT_DUE_MAX + 1, got, &now),
                     DQ_EINVAL);
    int64_t same[3] = {0, 1000, 1000};
    ck_assert_int_eq(dq_count_due(c, Q, same, 3, got, &now), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "bounds_ms[2]"));
    int64_t down[2] = {1000, -1000};
    ck_assert_int_eq(dq_count_due(c, Q, down, 2, got, &now), DQ_EINVAL);
    int64_t big[1] = {DQ_DELAY_MAX + 1};
    ck_assert_int_eq(dq_count_due(c, Q, big, 1, got, &now), DQ_EINVAL);
    int64_t low[1] = {-DQ_DELAY_MAX - 1};
    ck_assert_int_eq(dq_count_due(c, Q, low, 1, got, &now), DQ_EINVAL);
    ck_assert_int_eq(dq_count_due(c, Q, b, 1, NULL, &now), DQ_ENULL);
    ck_assert_int_eq(dq_count_due(c, "", b, 1, got, &now), DQ_EQUEUE);
    ck_assert_int_eq(dq_count_due(c, NULL, b, 1, got, &now), DQ_ENULL);
    ck_assert_int_eq(dq_count_due(NULL, Q, b, 1, got, &now), DQ_ENULL);
    ck_assert_int_eq(dq_errcode(c), DQ_ENULL);
    for (int i = 0; i < DQ_COUNT_DUE_MAX + 2; i++)
        ck_assert_int_eq(got[i], -5);
    ck_assert_int_eq(now, 77);
    ck_assert_msg(commands_processed(r) - before == 1,
                  "%lld commands reached Redis (expected only the INFO)",
                  commands_processed(r) - before);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A connection the server closed (CLIENT KILL) is reopened, and the read
 * goes once more by itself: the first call after the break succeeds. */
START_TEST(read_again_after_break) {
    dq_client *c = open_client();
    push_text(c, Q, "x", 0, NULL, 0, NULL);
    const int64_t zero = 0;
    int64_t got[2];
    count(c, Q, &zero, 1, got, NULL);
    redisContext *r = rconn();
    freeReplyObject(th_cmd(r, "CLIENT KILL TYPE normal SKIPME yes"));
    count(c, Q, &zero, 1, got, NULL);
    ck_assert_int_eq(got[0], 1);
    ck_assert_int_eq(got[1], 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("count_due", TU_SRV_UNIX,
    {"windows", windows, 30, NULL},
    {"empty", empty, 30, NULL},
    {"many_windows", many_windows, 30, NULL},
    {"partitioned", partitioned, 30, NULL},
    {"bad_input", bad_input, 30, NULL},
    {"read_again_after_break", read_again_after_break, 30, NULL})
