/*
 * tests/async/test_async_lifecycle.c - the async twins of dq_get and
 * dq_nack_reason: a job looked up in every state through the callback
 * (the info is borrowed: a dup outlives it), a reason recorded by the
 * async nack and seen by dq_async_get and dq_async_dead_list, and bad
 * arguments refused at once with no callback and nothing sent.
 */
#include "test_async.h"

/* dq_async_get of id; waits for its callback with status want. */
static dq_job_info *aget(dq_async *a, const char *q, const char *id,
                         int want) {
    info_res r = {0};
    ck_assert_int_eq(dq_async_get(a, q, id, info_rec, &r), 0);
    WAIT_CB(r, want);
    return r.info;
}

START_TEST(get_and_reasons) {
    dq_async *a = aopen();
    res p1 = {0}, p2 = {0}, pl = {0};
    dq_async_push(a, Q, "later", 5, 60000, "s1", 0, push_rec, &p1);
    dq_async_push(a, Q, "now", 3, 0, "d1", 0, push_rec, &p2);
    WAIT_CB(p1, 0);
    WAIT_CB(p2, 0);
    dq_job_info *in = aget(a, Q, "s1", 1);
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_SCHEDULED);
    ck_assert_str_eq(dq_job_info_payload(in, NULL), "later");
    ck_assert_ptr_null(dq_job_info_last_error(in, NULL));
    dq_job_info_free(in);
    in = aget(a, Q, "d1", 1);
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DUE);
    dq_job_info_free(in);
    ck_assert_ptr_null(aget(a, Q, "nobody", 0));

    ck_assert_int_eq(dq_async_poll(a, Q, 1, 60000, jobs_rec, &pl), 0);
    WAIT_CB(pl, 1);
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", dq_job_token(kept(&pl, 0)));
    in = aget(a, Q, "d1", 1);
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_INFLIGHT);
    ck_assert_int_eq(dq_job_info_lease_deadline_ms(in),
                     dq_job_lease_deadline_ms(kept(&pl, 0)));
    ck_assert_int_eq(dq_job_info_attempts(in), 1);
    dq_job_info_free(in);

    /* retried with a reason, then dead with a binary one */
    res nk = {0};
    ck_assert_int_eq(dq_async_nack_reason(a, Q, "d1", tok, 0, 0, "slow", 4,
                                          st_rec, &nk),
                     0);
    WAIT_CB(nk, 0);
    in = aget(a, Q, "d1", 1);
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DUE);
    size_t len = 0;
    ck_assert_str_eq(dq_job_info_last_error(in, &len), "slow");
    ck_assert_int_gt(dq_job_info_failed_ms(in), 0);
    dq_job_info_free(in);
    res pl2 = {0};
    ck_assert_int_eq(dq_async_poll(a, Q, 1, 60000, jobs_rec, &pl2), 0);
    WAIT_CB(pl2, 1);
    static const char bin[] = {'e', '\0', '\xfe', 'r'};
    res dead = {0};
    ck_assert_int_eq(dq_async_nack_reason(a, Q, "d1",
                                          dq_job_token(kept(&pl2, 0)), 0,
                                          DQ_NACK_DEAD, bin, sizeof(bin),
                                          st_rec, &dead),
                     0);
    WAIT_CB(dead, 1);
    in = aget(a, Q, "d1", 1);
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
    ck_assert_int_eq(dq_job_info_attempts(in), 2);
    const char *e = dq_job_info_last_error(in, &len);
    ck_assert_uint_eq(len, sizeof(bin));
    ck_assert(memcmp(e, bin, len) == 0 && e[len] == '\0');
    res dl = {0};
    ck_assert_int_eq(dq_async_dead_list(a, Q, 0, 10, jobs_rec, &dl), 0);
    WAIT_CB(dl, 1);
    size_t dlen = 0;
    const char *de = dq_job_last_error(kept(&dl, 0), &dlen);
    ck_assert_uint_eq(dlen, sizeof(bin));
    ck_assert(memcmp(de, bin, dlen) == 0);
    ck_assert_int_eq(dq_job_failed_ms(kept(&dl, 0)), dq_job_info_failed_ms(in));
    dq_job_info_free(in);

    /* a stale token with a reason: refused by Redis, nothing written */
    res stale = {0};
    ck_assert_int_eq(dq_async_nack_reason(a, Q, "d1", tok, 0, 0, "no", 2,
                                          st_rec, &stale),
                     0);
    WAIT_CB(stale, DQ_ESTALE);
    in = aget(a, Q, "d1", 1);
    ck_assert_ptr_nonnull(dq_job_info_last_error(in, &len));
    ck_assert_uint_eq(len, sizeof(bin));
    dq_job_info_free(in);
    res_clear(&pl);
    res_clear(&pl2);
    res_clear(&dl);
    dq_async_free(a);
}
END_TEST

/* Bad arguments: the code at once, no callback, nothing sent. */
START_TEST(bad_args) {
    dq_async *a = aopen();
    redisContext *r = rconn();
    info_res g = {0};
    res st = {0};
    static char toolong[DQ_REASON_MAX + 1];
    long long sent = client_commands(r);
    ck_assert_int_eq(dq_async_get(NULL, Q, "x", info_rec, &g), DQ_ENULL);
    ck_assert_int_eq(dq_async_get(a, NULL, "x", info_rec, &g), DQ_ENULL);
    ck_assert_int_eq(dq_async_get(a, "", "x", info_rec, &g), DQ_EQUEUE);
    ck_assert_int_eq(dq_async_get(a, Q, "", info_rec, &g), DQ_EID);
    ck_assert_ptr_nonnull(strstr(dq_async_errmsg(a), "id"));
    ck_assert_int_eq(dq_async_get(a, Q, NULL, info_rec, &g), DQ_ENULL);
    ck_assert_int_eq(dq_async_nack_reason(a, Q, "x", "1", 0, 0, toolong,
                                          sizeof(toolong), st_rec, &st),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_async_errmsg(a), "reason"));
    ck_assert_int_eq(dq_async_nack_reason(a, Q, "x", "1", 0, 0, NULL, 3,
                                          st_rec, &st),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_nack_reason(a, Q, "x", "t", 0, 0, "r", 1,
                                          st_rec, &st),
                     DQ_EINVAL);
    ck_assert_uint_eq(dq_async_pending(a), 0);
    run_for(50);
    ck_assert_int_eq(g.calls, 0);
    ck_assert_int_eq(st.calls, 0);
    ck_assert_int_eq(client_commands(r), sent);
    redisFree(r);
    dq_async_free(a);
}
END_TEST

/* The client freed inside the get callback. */
static void free_in_cb(dq_async *a, const dq_job_info *info, int status,
                       void *ud) {
    (void)info;
    *(int *)ud = status + 10;
    dq_async_free(a);
}

START_TEST(free_inside_get_callback) {
    dq_async *a = aopen();
    res p = {0};
    dq_async_push(a, Q, "x", 1, 0, "f1", 0, push_rec, &p);
    WAIT_CB(p, 0);
    int got = 0;
    ck_assert_int_eq(dq_async_get(a, Q, "f1", free_in_cb, &got), 0);
    ck_assert(RUN_UNTIL(got != 0, 5000));
    ck_assert_int_eq(got, 11);
}
END_TEST

TEST_SUITE("async_lifecycle", TU_SRV_UNIX,
    {"get_and_reasons", get_and_reasons, 60, &async_fixture},
    {"bad_args", bad_args, 60, &async_fixture},
    {"free_inside_get_callback", free_inside_get_callback, 60,
     &async_fixture})
