/*
 * tests/test_counters.c - DQ_OPT_COUNTERS and dq_counters: deliveries, acks,
 * retries and failures counted per queue by the scripts of the clients that
 * ask for it, summed over partitions; a client without the option adds
 * nothing; a counts key of the wrong type fails a counting call before it
 * wrote anything.
 */
#include "test_suite.h"
#include "test_utils.h"

/* Reads the four counters; fails the test on an error. */
static void counters(dq_client *c, const char *q, int64_t v[4]) {
    int rc = dq_counters(c, q, &v[0], &v[1], &v[2], &v[3]);
    ck_assert_msg(rc == 0, "dq_counters: %d %s", rc, dq_errmsg(c));
}

START_TEST(counted) {
    dq_client *c = open_client_opt(DQ_OPT_COUNTERS, 1);
    dq_client *quiet = open_client(); /* does not count */
    int64_t v[4] = {9, 9, 9, 9};
    counters(c, Q, v);
    ck_assert(v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0);
    for (int i = 0; i < 10; i++)
        push_text(c, Q, "x", 0, NULL, 0, NULL);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 30000, &jobs, NULL), 10);
    /* 5 acked (one batch), 2 retried, 1 failed, 2 left in flight */
    const char *ids[5], *toks[5];
    for (int i = 0; i < 5; i++) {
        ids[i] = dq_job_id(dq_jobs_at(jobs, (size_t)i));
        toks[i] = dq_job_token(dq_jobs_at(jobs, (size_t)i));
    }
    ck_assert_int_eq(dq_ack_batch(c, Q, 5, ids, toks, NULL), 5);
    for (int i = 5; i < 7; i++) {
        const dq_job *j = dq_jobs_at(jobs, (size_t)i);
        ck_assert_int_eq(dq_nack(c, Q, dq_job_id(j), dq_job_token(j), 0, 0), 0);
    }
    const dq_job *j = dq_jobs_at(jobs, 7);
    ck_assert_int_eq(dq_nack(c, Q, dq_job_id(j), dq_job_token(j), 0,
                             DQ_NACK_DEAD), 1);
    /* a client without the option counts nothing */
    j = dq_jobs_at(jobs, 8);
    ck_assert_int_eq(dq_ack(quiet, Q, dq_job_id(j), dq_job_token(j)), 0);
    counters(c, Q, v);
    ck_assert_int_eq(v[0], 10);
    ck_assert_int_eq(v[1], 5);
    ck_assert_int_eq(v[2], 2);
    ck_assert_int_eq(v[3], 1);
    /* the 2 retried jobs are delivered again: 2 more deliveries; a stale
     * ack changes nothing */
    dq_jobs *again = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 30000, &again, NULL), 2);
    ck_assert_int_eq(dq_ack(c, Q, ids[0], toks[0]), 0); /* retried ack */
    counters(quiet, Q, v); /* anyone can read them */
    ck_assert_int_eq(v[0], 12);
    ck_assert_int_eq(v[1], 5);
    dq_jobs_free(again);
    dq_jobs_free(jobs);
    /* NULL outs are allowed; a bad queue name is refused */
    ck_assert_int_eq(dq_counters(c, Q, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_eq(dq_counters(c, "", v, v, v, v), DQ_EQUEUE);
    ck_assert_int_eq(dq_counters(NULL, Q, v, v, v, v), DQ_ENULL);
    dq_close(quiet);
    dq_close(c);
}
END_TEST

/* Out of attempts: a poll dead-letters and counts a failure. */
START_TEST(max_attempts_counted) {
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_COUNTERS, 1), 0);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_MAX_ATTEMPTS, 1), 0);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    push_text(c, Q, "x", 0, "once", 0, NULL);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 1, 1, &jobs, NULL), 1); /* 1 ms lease */
    dq_jobs_free(jobs);
    th_sleep_ms(20);
    ck_assert_int_eq(dq_poll(c, Q, 1, 1000, &jobs, NULL), 0);
    int64_t v[4];
    counters(c, Q, v);
    ck_assert_int_eq(v[0], 1);
    ck_assert_int_eq(v[3], 1);
    dq_close(c);
}
END_TEST

/* A counts key of the wrong type fails a counting poll, ack and nack
 * before anything is written; a client that does not count is not hurt. */
START_TEST(counts_key_wrong_type) {
    dq_client *c = open_client_opt(DQ_OPT_COUNTERS, 1);
    dq_client *quiet = open_client();
    push_text(quiet, Q, "x", 0, "w", 0, NULL);
    redisContext *r = rconn();
    char key[512];
    tu_key(key, sizeof(key), "dq", Q, "counts", "w");
    freeReplyObject(th_cmd(r, "SET %s spoiled", key));
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll(c, Q, 1, 30000, &jobs, NULL), DQ_EREDIS);
    ck_assert_ptr_null(jobs);
    int64_t s[5];
    stats5(quiet, Q, s);
    ck_assert_int_eq(s[1], 1); /* still due: the poll wrote nothing */
    ck_assert_int_eq(poll_n(quiet, Q, 1, 30000, &jobs, NULL), 1);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_int_eq(dq_ack(c, Q, dq_job_id(j), dq_job_token(j)), DQ_EREDIS);
    ck_assert_int_eq(dq_nack(c, Q, dq_job_id(j), dq_job_token(j), 0, 0),
                     DQ_EREDIS);
    stats5(quiet, Q, s);
    ck_assert_int_eq(s[2], 1); /* still in flight */
    ck_assert_int_eq(dq_ack(quiet, Q, dq_job_id(j), dq_job_token(j)), 0);
    dq_jobs_free(jobs);
    redisFree(r);
    dq_close(quiet);
    dq_close(c);
}
END_TEST

TEST_SUITE("counters", TU_SRV_UNIX,
    {"counted", counted, 30, NULL},
    {"max_attempts_counted", max_attempts_counted, 30, NULL},
    {"counts_key_wrong_type", counts_key_wrong_type, 30, NULL})
