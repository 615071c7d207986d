/*
 * tests/async/test_async_resched.c - the async twins of dq_reschedule,
 * dq_promote and dq_reschedule_batch: the same outcomes as the sync calls
 * (moved, unknown, in flight, dead, revived), the new due time on the
 * server's clock, a batch answered per id across chunks (and partitions
 * on a partitioned run), a promoted job polled at once, and every argument
 * error returned at once with no callback.
 */
#include "test_async.h"

START_TEST(outcomes) {
    dq_async *a = aopen();
    dq_client *c = open_client();
    redisContext *r = rconn();
    push_text(c, Q, "p", 3600000, "p", 0, NULL);
    push_text(c, Q, "f", 0, "f", 0, NULL);
    push_text(c, Q, "d", 0, "d", 0, NULL);
    dq_jobs *j = poll_one(c, Q, 30000); /* f or d, due at once */
    char tok[DQ_TOKEN_BUF], held[DQ_ID_BUF];
    snprintf(held, sizeof(held), "%s", dq_job_id(dq_jobs_at(j, 0)));
    dq_jobs_free(j);
    const char *other = strcmp(held, "f") == 0 ? "d" : "f";
    j = poll_one(c, Q, 30000);
    snprintf(tok, sizeof(tok), "%s", dq_job_token(dq_jobs_at(j, 0)));
    dq_jobs_free(j);
    ck_assert_int_eq(dq_nack(c, Q, other, tok, 0, DQ_NACK_DEAD), 1);

    res mv = {0}, un = {0}, fl = {0}, dd = {0}, rv = {0}, pr = {0};
    int64_t at = server_ms(r) + 7200000, due = 0;
    ck_assert_int_eq(dq_async_reschedule(a, Q, "p", at, DQ_RESCHED_AT, st_rec,
                                         &mv), 0);
    ck_assert_int_eq(dq_async_reschedule(a, Q, "zz", 0, 0, st_rec, &un), 0);
    ck_assert_int_eq(dq_async_promote(a, Q, held, 0, st_rec, &fl), 0);
    ck_assert_int_eq(dq_async_promote(a, Q, other, 0, st_rec, &dd), 0);
    WAIT_CB(mv, DQ_RESCHED_MOVED);
    WAIT_CB(un, DQ_RESCHED_UNKNOWN);
    WAIT_CB(fl, DQ_RESCHED_INFLIGHT);
    WAIT_CB(dd, DQ_RESCHED_DEAD);
    ck_assert_int_eq(tu_state_of(c, Q, "p", &due), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(due, at);
    ck_assert_int_eq(dq_async_reschedule(a, Q, other, 3600000,
                                         DQ_RESCHED_REVIVE, st_rec, &rv), 0);
    WAIT_CB(rv, DQ_RESCHED_REVIVED);
    ck_assert_int_eq(tu_state_of(c, Q, other, &due), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(dq_async_promote(a, Q, "p", 0, st_rec, &pr), 0);
    WAIT_CB(pr, DQ_RESCHED_MOVED);
    res pl = {0};
    dq_async_poll(a, Q, 5, 30000, jobs_rec, &pl);
    WAIT_CB(pl, 1);
    ck_assert_str_eq(dq_job_id(kept(&pl, 0)), "p");
    res_clear(&pl);
    redisFree(r);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

/* 1500 ids (two chunks) plus an unknown one: results per id. */
START_TEST(batch) {
    enum { N = 1500 };
    dq_async *a = aopen();
    dq_client *c = open_client();
    const char **ids = tu_ids(N + 1, "b");
    ids[N] = "none";
    tu_push_ids(c, Q, N, ids, 3600000);
    res b = {0};
    ck_assert_int_eq(dq_async_reschedule_batch(a, Q, N + 1, ids, 0, 0,
                                               results_rec, &b), 0);
    WAIT_CB(b, N);
    ck_assert_uint_eq(b.n, N + 1);
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(b.results[i], DQ_RESCHED_MOVED);
    ck_stats(c, Q, 0, N, 0, 0);
    /* the last result, beyond what results_rec keeps: the sync call */
    int out[2];
    ck_assert_int_eq(dq_reschedule_batch(c, Q, 2, ids + N - 1, 60000, 0, out),
                     1);
    ck_assert_int_eq(out[0], DQ_RESCHED_MOVED);
    ck_assert_int_eq(out[1], DQ_RESCHED_UNKNOWN);
    free(ids);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

/* Every argument error: returned at once, no callback, nothing queued. */
START_TEST(bad_args) {
    dq_async *a = aopen();
    res r = {0};
    const char *ids[2] = {"a", ""};
    ck_assert_int_eq(dq_async_reschedule(NULL, Q, "a", 0, 0, st_rec, &r),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_promote(NULL, Q, "a", 0, st_rec, &r), DQ_ENULL);
    ck_assert_int_eq(dq_async_reschedule(a, NULL, "a", 0, 0, st_rec, &r),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_reschedule(a, Q, "", 0, 0, st_rec, &r), DQ_EID);
    ck_assert_int_eq(dq_async_reschedule(a, Q, "a", -1, 0, st_rec, &r),
                     DQ_EDELAY);
    ck_assert_msg(strstr(dq_async_errmsg(a), "when") != NULL, "%s",
                  dq_async_errmsg(a));
    ck_assert_int_eq(dq_async_reschedule(a, Q, "a", DQ_AT_MAX + 1,
                                         DQ_RESCHED_AT, st_rec, &r),
                     DQ_EDELAY);
    ck_assert_int_eq(dq_async_reschedule(a, Q, "a", 0, 16, st_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_promote(a, Q, "a", DQ_RESCHED_AT, st_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_reschedule_batch(a, Q, 0, ids, 0, 0,
                                               results_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_reschedule_batch(a, Q, 2, ids, 0, 0,
                                               results_rec, &r),
                     DQ_EID);
    ck_assert_int_eq(dq_async_reschedule_batch(a, Q, 1, NULL, 0, 0,
                                               results_rec, &r),
                     DQ_ENULL);
    ck_assert_uint_eq(dq_async_pending(a), 0);
    run_for(100);
    ck_assert_int_eq(r.calls, 0);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_resched", TU_SRV_UNIX,
    {"outcomes", outcomes, 60, &async_fixture},
    {"batch", batch, 60, &async_fixture},
    {"bad_args", bad_args, 60, &async_fixture})
