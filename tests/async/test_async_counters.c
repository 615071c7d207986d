/*
 * tests/async/test_async_counters.c - dq_async_counters, the twin of
 * dq_counters, and DQ_OPT_COUNTERS on the async client: deliveries, acks,
 * retries and failures counted by its polls, acks and nacks.
 */
#include "test_async.h"

/* dq_counters_cb: the four totals into r->s[0..3]. */
static void counters_rec(dq_async *a, int64_t delivered, int64_t acked,
                         int64_t retried, int64_t failed, int status,
                         void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->s[0] = delivered;
    r->s[1] = acked;
    r->s[2] = retried;
    r->s[3] = failed;
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

START_TEST(async_counted) {
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_COUNTERS, 1), 0);
    dq_async *a = aopen_uri(g_srv.uri, o, NULL);
    dq_options_free(o);
    res c0 = {0};
    ck_assert_int_eq(dq_async_counters(a, Q, counters_rec, &c0), 0);
    WAIT_CB(c0, 0);
    ck_assert(c0.s[0] == 0 && c0.s[1] == 0 && c0.s[2] == 0 && c0.s[3] == 0);
    for (int i = 0; i < 4; i++) {
        res p = {0};
        ck_assert_int_eq(dq_async_push(a, Q, "x", 1, 0, NULL, 0, push_rec, &p),
                         0);
        WAIT_CB(p, 0);
    }
    res pl = {0};
    ck_assert_int_eq(dq_async_poll(a, Q, 10, 30000, jobs_rec, &pl), 0);
    WAIT_CB(pl, 4);
    const char *ids[2] = {dq_job_id(kept(&pl, 0)), dq_job_id(kept(&pl, 1))};
    const char *toks[2] = {dq_job_token(kept(&pl, 0)),
                           dq_job_token(kept(&pl, 1))};
    res ab = {0}, n1 = {0}, n2 = {0}, ct = {0};
    ck_assert_int_eq(dq_async_ack_batch(a, Q, 2, ids, toks, results_rec, &ab),
                     0);
    WAIT_CB(ab, 2);
    ck_assert_int_eq(dq_async_nack(a, Q, dq_job_id(kept(&pl, 2)),
                                   dq_job_token(kept(&pl, 2)), 0, 0, st_rec,
                                   &n1),
                     0);
    WAIT_CB(n1, 0);
    ck_assert_int_eq(dq_async_nack(a, Q, dq_job_id(kept(&pl, 3)),
                                   dq_job_token(kept(&pl, 3)), 0,
                                   DQ_NACK_DEAD, st_rec, &n2),
                     0);
    WAIT_CB(n2, 1);
    ck_assert_int_eq(dq_async_counters(a, Q, counters_rec, &ct), 0);
    WAIT_CB(ct, 0);
    ck_assert_int_eq(ct.s[0], 4);
    ck_assert_int_eq(ct.s[1], 2);
    ck_assert_int_eq(ct.s[2], 1);
    ck_assert_int_eq(ct.s[3], 1);
    /* bad input: refused at once, no callback */
    res bad = {0};
    ck_assert_int_eq(dq_async_counters(a, "", counters_rec, &bad), DQ_EQUEUE);
    ck_assert_int_eq(dq_async_counters(NULL, Q, counters_rec, &bad), DQ_ENULL);
    run_for(50);
    ck_assert_int_eq(bad.calls, 0);
    res_clear(&pl);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_counters", TU_SRV_UNIX,
    {"async_counted", async_counted, 30, &async_fixture})
