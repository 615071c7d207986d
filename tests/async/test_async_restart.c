/*
 * tests/async/test_async_restart.c - redis-server killed (SIGKILL) and
 * restarted in the middle of a run: the libevent consumer reconnects (both
 * its connections), every job is acked exactly once, and wake-ups work
 * again afterwards.  Each test has its own server with an fsynced AOF, so
 * what Redis acknowledged survives the kill.
 */
#include "test_async.h"


enum { N = 300 };

typedef struct tally {
    int calls[N + 1];  /* handler calls per job */
    int ok[N + 1];     /* acks that succeeded per job */
    int total_ok;      /* sum of ok */
    int failed;        /* outcomes with an error (e.g. a stale ack) */
    int64_t late_at_us; /* when job N (pushed after the restart) ran */
} tally;

static int idx(const dq_job *job) {
    int i = atoi(dq_job_id(job) + 1);
    ck_assert_msg(i >= 0 && i <= N, "job %s", dq_job_id(job));
    return i;
}

static int handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    tally *t = ud;
    int i = idx(job);
    t->calls[i]++;
    if (i == N)
        t->late_at_us = wall_us();
    return DQ_JOB_OK;
}

static void outcome(dq_consumer *c, const dq_job *job, int oc, int status,
                    void *ud) {
    tally *t = ud;
    if (status != 0 || oc != DQ_JOB_OK) {
        t->failed++;
        fprintf(stderr, "restart: %s outcome %d status %s: %s\n",
                dq_job_id(job), oc, dq_errname(status),
                dq_consumer_errmsg(c));
        return;
    }
    t->ok[idx(job)]++;
    t->total_ok++;
}

static void push(dq_client *cl, const char *q, int i, int64_t delay_ms) {
    char id[16];
    snprintf(id, sizeof(id), "j%d", i);
    ck_assert_msg(dq_push(cl, q, id, strlen(id), delay_ms, id, 0, NULL, 0,
                          NULL) == 0,
                  "push: %s", dq_errmsg(cl));
}

START_TEST(kill_and_restart_mid_run) {
    th_redis srv;
    ck_assert_int_eq(
        th_redis_start(&srv, 0, "appendonly yes\nappendfsync always"), 0);
    char uri[600]; /* partitioned as the suite's runs are (tu_uri) */
    tu_uri(srv.uri, NULL, uri, sizeof(uri));
    dq_client *cl = open_uri(uri, NULL);
    static tally t;
    memset(&t, 0, sizeof(t));
    dq_options *o = dq_options_new();
    dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 20000); /* wake-ups must work */
    states st = {0};
    dq_async *a = aopen_uri(uri, o, &st);
    dq_options_free(o);
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(a, Q, handler, &t, &c), 0);
    dq_consumer_set_outcome_cb(c, outcome, &t);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 8);
    dq_consumer_set_int(c, DQ_COPT_LEASE_MS, 3000);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    for (int i = 0; i < N; i++)
        push(cl, Q, i, (i * 7) % 2000);
    dq_close(cl);

    run_for(700);
    ck_assert_msg(t.total_ok > 0 && t.total_ok < N, "%d acked before the kill",
                  t.total_ok);
    th_redis_kill(&srv);
    run_for(400); /* connections drop, attempts fail */
    ck_assert_int_ge(st.disconnected, 1);
    ck_assert_int_eq(dq_async_connected(a), 0);
    ck_assert_int_eq(th_redis_restart(&srv), 0);
    ck_assert_msg(RUN_UNTIL(t.total_ok == N, 20000), "%d of %d acked",
                  t.total_ok, N);
    ck_assert_int_ge(st.connected, 2);
    run_for(300);
    for (int i = 0; i < N; i++)
        ck_assert_msg(t.ok[i] == 1, "job j%d acked %d times (%d calls)", i,
                      t.ok[i], t.calls[i]);

    /* The wake-up subscription came back too: an earlier job pushed from
     * another connection runs on time although the consumer's idle sleep
     * is 20 s. */
    cl = open_uri(uri, NULL);
    run_for(300);
    int64_t t0 = wall_us();
    push(cl, Q, N, 300);
    ck_assert_msg(RUN_UNTIL(t.ok[N] == 1, 5000), "not woken after restart");
    ck_assert_msg(t.late_at_us - t0 < 2000000, "ran %" PRId64 " us after push",
                  t.late_at_us - t0);
    ck_stats(cl, Q, 0, 0, 0, 0);
    dq_close(cl);
    dq_async_free(a);
    th_redis_stop(&srv);
}
END_TEST

/* Killed while idle, restarted after the client gave up a few attempts:
 * operations started during the outage fail with DQ_EIO, later ones
 * work. */
START_TEST(outage_while_idle) {
    th_redis srv;
    ck_assert_int_eq(
        th_redis_start(&srv, 0, "appendonly yes\nappendfsync always"), 0);
    states st = {0};
    char uri[600];
    dq_async *a =
        aopen_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), NULL, &st);
    res p = {0};
    dq_async_push(a, Q, "before", 6, 0, "before", 0, push_rec, &p);
    WAIT_CB(p, 0);
    th_redis_kill(&srv);
    ck_assert(RUN_UNTIL(st.disconnected >= 1, 3000));
    res q = {0};
    dq_async_push(a, Q, "during", 6, 0, NULL, 0, push_rec, &q);
    WAIT_CB(q, DQ_EIO);
    ck_assert_int_eq(th_redis_restart(&srv), 0);
    ck_assert(RUN_UNTIL(dq_async_connected(a), 5000));
    res s = {0};
    dq_async_stats(a, Q, stats_rec, &s);
    WAIT_CB(s, 0);
    ck_assert_int_eq(s.s[1], 1); /* "before" survived in the AOF */
    dq_async_free(a);
    th_redis_stop(&srv);
}
END_TEST

TEST_SUITE("async_restart", TU_SRV_NONE,
    {"kill_and_restart_mid_run", kill_and_restart_mid_run, 90, &async_fixture},
    {"outage_while_idle", outage_while_idle, 60, &async_fixture})
