/*
 * tests/test_time.c - server time and the blocking wait: due times are the
 * Redis server's clock, dq_poll_wait returns on time, wakes early on a push
 * from another process, and stays quiet while idle.  Bounds are loose
 * (lateness, not speed).
 */
#include "test_suite.h"
#include "test_utils.h"

#include <pthread.h>

/* Due times come from Redis TIME, not from this process's clock. */
START_TEST(server_clock) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    int64_t srv_now = server_ms(r);
    int64_t at = srv_now + 400;
    char id[DQ_ID_BUF];
    ck_assert_int_eq(dq_push_at(c, Q, "at", 2, at, NULL, 0, id, sizeof(id), NULL),
                     0);
    /* a job due 1 h ago by the server's clock is due now */
    ck_assert_int_eq(
        dq_push_at(c, Q, "old", 3, srv_now - 3600000, "old", 0, NULL, 0, NULL), 0);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 1);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "old");
    ck_assert_int_eq(dq_job_due_ms(dq_jobs_at(jobs, 0)), srv_now - 3600000);
    ck_assert_int_eq(dq_ack(c, Q, "old", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 0);
    ck_assert_msg(next > 0 && next <= 400, "next %" PRId64, next);
    int64_t t0 = server_ms(r);
    jobs = poll_until(c, Q, 10, 5000, 3000);
    int64_t t1 = server_ms(r);
    ck_assert_ptr_nonnull(jobs);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_str_eq(dq_job_id(j), id);
    ck_assert_int_eq(dq_job_due_ms(j), at);
    /* claimed at server time (deadline - lease) >= at, and within the
     * server-clock window of the polls */
    int64_t claimed = dq_job_lease_deadline_ms(j) - 5000;
    ck_assert_int_ge(claimed, at);
    ck_assert_int_ge(claimed, t0);
    ck_assert_int_le(claimed, t1);
    ck_assert_int_eq(dq_ack(c, Q, id, dq_job_token(j)), 0);
    dq_jobs_free(jobs);
    /* stats' next due is server-relative too */
    srv_now = server_ms(r);
    ck_assert_int_eq(
        dq_push_at(c, Q, "f", 1, srv_now + 50000, "f", 0, NULL, 0, NULL), 0);
    int64_t s[5];
    stats5(c, Q, s);
    ck_assert_msg(s[4] > 49000 && s[4] <= 50000, "next %" PRId64, s[4]);
    redisFree(r);
    dq_close(c);
}
END_TEST

START_TEST(poll_wait_timeout_empty) {
    dq_client *c = open_client();
    dq_jobs *jobs = (dq_jobs *)&jobs;
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(dq_poll_wait(c, Q, 10, 1000, 300, &jobs), 0);
    int64_t took = th_mono_ms() - t0;
    ck_assert_ptr_null(jobs);
    ck_assert_msg(took >= 290 && took < 1500, "took %" PRId64, took);
    /* timeout 0: one poll, no wait */
    t0 = th_mono_ms();
    ck_assert_int_eq(dq_poll_wait(c, Q, 10, 1000, 0, &jobs), 0);
    ck_assert_int_lt(th_mono_ms() - t0, 200);
    /* a job due after the timeout: still 0 at the timeout */
    push_text(c, Q, "later", 2000, NULL, 0, NULL);
    t0 = th_mono_ms();
    ck_assert_int_eq(dq_poll_wait(c, Q, 10, 1000, 300, &jobs), 0);
    took = th_mono_ms() - t0;
    ck_assert_msg(took >= 290 && took < 1500, "took %" PRId64, took);
    dq_close(c);
}
END_TEST

START_TEST(poll_wait_due) {
    dq_client *c = open_client();
    int64_t t0 = th_mono_ms();
    push_text(c, Q, "soon", 300, NULL, 0, NULL);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(c, Q, 10, 1000, 5000, &jobs), 1);
    int64_t took = th_mono_ms() - t0;
    ck_assert_msg(took >= 280 && took <= 1000, "returned after %" PRId64 " ms",
                  took);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "soon");
    dq_jobs_free(jobs);
    /* due now: returns at once */
    push_text(c, Q, "now", 0, NULL, 0, NULL);
    t0 = th_mono_ms();
    ck_assert_int_eq(dq_poll_wait(c, Q, 10, 1000, 5000, &jobs), 1);
    ck_assert_int_lt(th_mono_ms() - t0, 500);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* With a 5 s wait cap, a job due in 700 ms is returned at its due time: the
 * wait sleeps to the server-given offset, not to the cap. */
START_TEST(poll_wait_sleeps_to_due) {
    dq_client *c = open_client_opt(DQ_OPT_WAIT_CAP_MS, 5000);
    int64_t t0 = th_mono_ms();
    push_text(c, Q, "x", 700, NULL, 0, NULL);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(c, Q, 1, 1000, 4000, &jobs), 1);
    int64_t took = th_mono_ms() - t0;
    ck_assert_msg(took >= 680 && took <= 1400, "returned after %" PRId64 " ms",
                  took);
    dq_jobs_free(jobs);
    /* an expired lease is a due time too */
    t0 = th_mono_ms();
    push_text(c, Q, "y", 0, "y", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 400);
    ck_assert_int_eq(dq_poll_wait(c, Q, 1, 1000, 4000, &jobs), 1);
    took = th_mono_ms() - t0;
    ck_assert_msg(took >= 380 && took <= 1100, "redelivered after %" PRId64 " ms",
                  took);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 2);
    dq_jobs_free(jobs);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

/* The waiter waits for a job due in 10 s (timeout 5 s); another process
 * pushes a job due in 100 ms: the waiter returns it well before 1 s. */
static void early_wake(const char *queue, int64_t cap_ms) {
    dq_client *c = cap_ms ? open_client_opt(DQ_OPT_WAIT_CAP_MS, cap_ms)
                          : open_client();
    push_text(c, queue, "in 10 s", 10000, "late", 0, NULL);
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(go[1]);
        dq_client *p = NULL;
        if (dq_open(g_srv.uri, NULL, &p) != 0)
            _exit(2);
        char b;
        if (read(go[0], &b, 1) != 1) /* parent is about to wait */
            _exit(3);
        th_sleep_ms(150);
        int rc = dq_push(p, queue, "in 100 ms", 9, 100, "early", 0, NULL, 0, NULL);
        dq_close(p);
        _exit(rc == 0 ? 0 : 4);
    }
    close(go[0]);
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(write(go[1], "g", 1), 1);
    dq_jobs *jobs = NULL;
    int n = dq_poll_wait(c, queue, 10, 1000, 5000, &jobs);
    int64_t took = th_mono_ms() - t0;
    ck_assert_msg(n == 1, "poll_wait: %d %s", n, dq_errmsg(c));
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "early");
    ck_assert_msg(took >= 240 && took < 900, "returned after %" PRId64 " ms",
                  took);
    dq_jobs_free(jobs);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "producer status %d", status);
    close(go[1]);
    dq_close(c);
}

START_TEST(poll_wait_early_wake) { early_wake(Q, 3000); }
END_TEST

/* Same with the default cap (1 s): the wake-up still comes before it. */
START_TEST(poll_wait_early_wake_default_cap) { early_wake(Q, 0); }
END_TEST

/* Another dq_client in another thread pushes while we wait. */
struct pusher {
    const char *queue;
    int rc;
};

static void *push_later(void *arg) {
    struct pusher *p = arg;
    dq_client *c = NULL;
    p->rc = dq_open(g_srv.uri, NULL, &c);
    if (p->rc == 0) {
        th_sleep_ms(200);
        p->rc = dq_push(c, p->queue, "t", 1, 0, "thread", 0, NULL, 0, NULL);
    }
    dq_close(c);
    return NULL;
}

START_TEST(poll_wait_wake_from_thread) {
    dq_client *c = open_client_opt(DQ_OPT_WAIT_CAP_MS, 5000);
    dq_jobs *jobs = NULL;
    struct pusher p = {Q, -1};
    pthread_t th;
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(pthread_create(&th, NULL, push_later, &p), 0);
    int n = dq_poll_wait(c, Q, 10, 1000, 4000, &jobs);
    int64_t took = th_mono_ms() - t0;
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(p.rc, 0);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "thread");
    ck_assert_msg(took < 1000, "returned after %" PRId64 " ms", took);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* An idle dq_poll_wait sends at most ~2 commands per second (a poll and a
 * PING per 1 s cap): measured on the server (commands sent by clients, not
 * the ones the poll script runs inside Redis).  On a queue of N partitions
 * each cap polls every partition once (N polls and a PING instead of 1 + 1),
 * so the bound of the plain queue, 10, scales by (N + 1) / 2. */
START_TEST(idle_command_rate) {
    const long long most = 10 * (tu_parts() + 1) / 2;
    dq_client *c = open_client();
    redisContext *r = rconn();
    long long before = client_commands(r);
    dq_jobs *jobs = NULL;
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(dq_poll_wait(c, Q, 10, 1000, 2500, &jobs), 0);
    int64_t took = th_mono_ms() - t0;
    long long sent = client_commands(r) - before;
    ck_assert_msg(took >= 2400 && took < 4000, "took %" PRId64, took);
    ck_assert_msg(sent >= 3 && sent <= most,
                  "%lld commands in %" PRId64 " ms of idle wait (at most %lld)",
                  sent, took, most);
    /* a job scheduled far away does not make it busier */
    push_text(c, Q, "far", 600000, NULL, 0, NULL);
    before = client_commands(r);
    ck_assert_int_eq(dq_poll_wait(c, Q, 10, 1000, 2500, &jobs), 0);
    sent = client_commands(r) - before;
    ck_assert_msg(sent >= 3 && sent <= most,
                  "%lld commands with a far job (at most %lld)", sent, most);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("time", TU_SRV_UNIX,
    {"server_clock", server_clock, 30, NULL},
    {"wait_timeout", poll_wait_timeout_empty, 30, NULL},
    {"wait_due", poll_wait_due, 30, NULL},
    {"wait_sleeps_to_due", poll_wait_sleeps_to_due, 30, NULL},
    {"wait_early_wake", poll_wait_early_wake, 30, NULL},
    {"wait_early_wake_default", poll_wait_early_wake_default_cap, 30, NULL},
    {"wait_wake_thread", poll_wait_wake_from_thread, 30, NULL},
    {"idle_rate", idle_command_rate, 30, NULL})
