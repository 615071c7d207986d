/*
 * tests/fault/test_replica.c - DQ_OPT_WAIT_REPLICAS: a push returns success
 * only once N replicas have the job (WAIT after the push).
 *
 *  - with a replica online, pushes succeed and the jobs are already on the
 *    replica when the call returns;
 *  - with the replica gone, a push fails with DQ_EREPLICAS after the WAIT
 *    timeout, but the job IS written on the master (the outcome says so; a
 *    retry with the same id and DQ_PUSH_KEEP answers DQ_KEPT);
 *  - failover: a job whose push succeeded survives the master's death on
 *    the promoted replica.
 */
#include "fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Starts a master (TCP) and a replica of it; waits until the link is up. */
static void start_pair(th_redis *m, th_redis *rep) {
    ft_start(m, 1, NULL);
    char conf[128];
    snprintf(conf, sizeof(conf), "replicaof 127.0.0.1 %d\n", m->port);
    ft_start(rep, 0, conf);
    redisContext *mc = th_redis_connect(m), *rc = th_redis_connect(rep);
    ck_assert_ptr_nonnull(mc);
    ck_assert_ptr_nonnull(rc);
    int64_t end = th_mono_ms() + 20000;
    char link[32] = "", slaves[32] = "";
    for (;;) {
        ft_info_field(rc, "replication", "master_link_status", link,
                      sizeof(link));
        ft_info_field(mc, "replication", "connected_slaves", slaves,
                      sizeof(slaves));
        if (strcmp(link, "up") == 0 && strcmp(slaves, "1") == 0)
            break;
        ck_assert_msg(th_mono_ms() < end,
                      "replica link not up after 20 s (link=%s slaves=%s)",
                      link, slaves);
        th_sleep_ms(20);
    }
    redisFree(mc);
    redisFree(rc);
}

static int64_t pending(dq_client *c, const char *q) {
    int64_t s = -1, d = -1, f = -1;
    int rc = dq_stats(c, q, &s, &d, &f, NULL, NULL);
    ck_assert_msg(rc == 0, "stats: %s", dq_errmsg(c));
    return s + d + f;
}

START_TEST(wait_replicas) {
    th_redis m, rep;
    start_pair(&m, &rep);
    dq_options *o = ft_wait_opts(1, 1000, 0);
    dq_client *c = open_uri(m.uri, o);
    /* The replica is read-only; stats is a no-writes script. */
    dq_client *rc = open_uri(rep.uri, NULL);

    int64_t t = th_mono_ms();
    int outcome = 0;
    int r = dq_push(c, "rq", "one", 3, 60000, "j1", DQ_PUSH_KEEP, NULL, 0,
                    &outcome);
    int64_t ok_ms = th_mono_ms() - t;
    ck_assert_msg(r == 0, "push: %s: %s", dq_errname(r), dq_errmsg(c));
    ck_assert_int_eq(outcome, DQ_PUSHED);
    ck_assert_int_eq(pending(rc, "rq"), 1); /* already there: no waiting */

    const void *pl[100];
    size_t lens[100];
    for (int i = 0; i < 100; i++)
        pl[i] = "b", lens[i] = 1;
    r = dq_push_batch(c, "rq", 100, pl, lens, NULL, NULL, 0, NULL, NULL);
    ck_assert_msg(r == 100, "push_batch: %d %s", r, dq_errmsg(c));
    ck_assert_int_eq(pending(rc, "rq"), 101);

    /* Two replicas asked, one there: DQ_EREPLICAS, written anyway. */
    dq_options *o2 = ft_wait_opts(2, 300, 0);
    dq_client *c2 = open_uri(m.uri, o2);
    r = dq_push(c2, "rq", "two", 3, 60000, "j2", 0, NULL, 0, &outcome);
    ck_assert_msg(r == DQ_EREPLICAS, "push with 2 of 1: %s", dq_errname(r));
    ck_assert_int_eq(outcome, DQ_PUSHED);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c2), "1 of 2"));

    /* Replica gone: the push times out, the job is on the master. */
    th_redis_stop(&rep);
    dq_close(rc);
    char id[DQ_ID_BUF] = "";
    t = th_mono_ms();
    r = dq_push(c, "rq", "three", 5, 60000, "j3", DQ_PUSH_KEEP, id,
                sizeof(id), &outcome);
    int64_t fail_ms = th_mono_ms() - t;
    ck_assert_msg(r == DQ_EREPLICAS, "push without replica: %s: %s",
                  dq_errname(r), dq_errmsg(c));
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "written"));
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "0 of 1"));
    ck_assert_int_eq(outcome, DQ_PUSHED);
    ck_assert_str_eq(id, "j3");
    ck_assert_int_ge(fail_ms, 900); /* the WAIT timeout, loosely */
    ck_assert_int_eq(pending(c, "rq"), 103);
    /* The idempotent retry finds it there. */
    r = dq_push(c, "rq", "three", 5, 60000, "j3", DQ_PUSH_KEEP, NULL, 0,
                &outcome);
    ck_assert_int_eq(r, DQ_EREPLICAS);
    ck_assert_int_eq(outcome, DQ_KEPT);

    printf("figures: replica_wait: pushed=103 acked=0 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=1 (replica stopped) push_ms_with_replica="
           "%" PRId64 " push_ms_replica_gone=%" PRId64 " (timeout 1000)\n",
           ok_ms, fail_ms);
    fflush(stdout);
    dq_close(c);
    dq_close(c2);
    dq_options_free(o);
    dq_options_free(o2);
    th_redis_stop(&m);
}
END_TEST

START_TEST(failover_keeps_waited_jobs) {
    th_redis m, rep;
    start_pair(&m, &rep);
    dq_options *o = ft_wait_opts(1, 2000, 0);
    dq_client *c = open_uri(m.uri, o);
    enum { N = 500 };
    const void *pl[N];
    size_t lens[N];
    for (int i = 0; i < N; i++)
        pl[i] = "payload", lens[i] = 7;
    int r = dq_push_batch(c, "fo", N, pl, lens, NULL, NULL, 0, NULL, NULL);
    ck_assert_msg(r == N, "push_batch: %d %s", r, dq_errmsg(c));
    /* The master dies at once (no persistence): only the replica has the
     * jobs.  Promote it, as Sentinel would. */
    th_redis_kill(&m);
    redisContext *rc = th_redis_connect(&rep);
    ck_assert_ptr_nonnull(rc);
    redisReply *x = rcmd_try(rc, "REPLICAOF NO ONE");
    ck_assert_ptr_nonnull(x);
    freeReplyObject(x);
    dq_client *n = open_uri(rep.uri, NULL);
    long acked = 0;
    int64_t end = th_mono_ms() + 20000;
    while (acked < N && th_mono_ms() < end) {
        dq_jobs *jobs = NULL;
        r = dq_poll(n, "fo", 100, 10000, &jobs, NULL);
        ck_assert_msg(r >= 0, "poll on the promoted replica: %s",
                      dq_errmsg(n));
        for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            ck_assert_int_eq(dq_ack(n, "fo", dq_job_id(j), dq_job_token(j)),
                             0);
            acked++;
        }
        dq_jobs_free(jobs);
        if (r == 0)
            break;
    }
    printf("figures: replica_failover: pushed=%d acked=%ld lost=%ld "
           "dup_ack=0 dup_in_lease=0 faults=1 (master SIGKILLed, replica "
           "promoted)\n",
           N, acked, N - acked);
    fflush(stdout);
    ck_assert_int_eq(acked, N);
    ck_assert_msg(ft_queue_empty(n, "fo"), "jobs left on the new master");
    redisFree(rc);
    dq_close(n);
    dq_close(c);
    dq_options_free(o);
    th_redis_stop(&rep);
    th_redis_stop(&m);
}
END_TEST

TEST_SUITE("fault_replica", TU_SRV_NONE,
    {"wait_replicas", wait_replicas, 120, NULL},
    {"failover_keeps_waited_jobs", failover_keeps_waited_jobs, 120, NULL})
