/*
 * tests/test_lease.c - leases: a crashed consumer's job is redelivered after
 * its lease with attempt + 1 and a new token, stale tokens change nothing,
 * max attempts dead-letters, and dead jobs are listed, requeued and purged.
 */
#include "test_suite.h"
#include "test_utils.h"

/* A consumer process that claims one job and "crashes" (exits without ack).
 * Writes the job's token to fd so the parent can try it later. */
static void crash_child(const char *queue, int64_t lease_ms, int fd) {
    dq_client *c = NULL;
    if (dq_open(g_srv.uri, NULL, &c) != 0)
        _exit(2);
    dq_jobs *jobs = NULL;
    if (dq_poll(c, queue, 1, lease_ms, &jobs, NULL) != 1)
        _exit(3);
    const char *tok = dq_job_token(dq_jobs_at(jobs, 0));
    if (write(fd, tok, strlen(tok) + 1) < 0)
        _exit(4);
    _exit(0); /* no ack, no close: a crash */
}

START_TEST(crash_redelivery) {
    dq_client *c = open_client();
    char id[DQ_ID_BUF];
    push_text(c, Q, "charge card", 0, NULL, 0, id);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    int64_t t0 = th_mono_ms();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        crash_child(Q, 400, fds[1]);
    close(fds[1]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child status %d", status);
    char tok1[DQ_TOKEN_BUF] = "";
    ck_assert_int_gt(read(fds[0], tok1, sizeof(tok1)), 0);
    close(fds[0]);
    ck_stats(c, Q, 0, 0, 1, 0);

    /* Within the lease nobody else gets it. */
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 0);
    ck_assert_msg(next > 0 && next <= 400, "next %" PRId64, next);

    jobs = poll_until(c, Q, 10, 5000, 3000);
    int64_t waited = th_mono_ms() - t0;
    ck_assert_ptr_nonnull(jobs);
    ck_assert_msg(waited >= 350, "redelivered after %" PRId64 " ms", waited);
    ck_assert_uint_eq(dq_jobs_count(jobs), 1);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_str_eq(dq_job_id(j), id);
    ck_assert_str_eq(dq_job_payload(j, NULL), "charge card");
    ck_assert_int_eq(dq_job_attempt(j), 2);
    ck_assert_str_ne(dq_job_token(j), tok1);

    /* The crashed holder's token is stale and changes nothing. */
    ck_assert_int_eq(dq_ack(c, Q, id, tok1), DQ_ESTALE);
    ck_assert_int_eq(dq_nack(c, Q, id, tok1, 0, DQ_NACK_DEAD), DQ_ESTALE);
    ck_assert_int_eq(dq_extend(c, Q, id, tok1, 100, NULL), DQ_ESTALE);
    ck_stats(c, Q, 0, 0, 1, 0);
    ck_assert_int_eq(dq_ack(c, Q, id, dq_job_token(j)), 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* Repeated crashes: each redelivery raises the attempt by one. */
START_TEST(attempts_count_up) {
    dq_client *c = open_client();
    push_text(c, Q, "flaky", 0, "f", 0, NULL);
    char prev[DQ_TOKEN_BUF] = "";
    for (int attempt = 1; attempt <= 3; attempt++) {
        dq_jobs *jobs = poll_until(c, Q, 1, 200, 2000);
        ck_assert_ptr_nonnull(jobs);
        ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), attempt);
        ck_assert_str_ne(dq_job_token(dq_jobs_at(jobs, 0)), prev);
        snprintf(prev, sizeof(prev), "%s", dq_job_token(dq_jobs_at(jobs, 0)));
        dq_jobs_free(jobs);
    }
    dq_close(c);
}
END_TEST

START_TEST(no_double_delivery_within_lease) {
    dq_client *a = open_client(), *b = open_client();
    push_text(a, Q, "once", 0, "o", 0, NULL);
    dq_jobs *held = poll_one(a, Q, 1500);
    int64_t end = th_mono_ms() + 700;
    int polls = 0;
    while (th_mono_ms() < end) {
        dq_jobs *jobs = NULL;
        ck_assert_int_eq(poll_n(b, Q, 10, 1000, &jobs, NULL), 0);
        polls++;
        th_sleep_ms(20);
    }
    ck_assert_int_gt(polls, 5);
    ck_assert_int_eq(dq_ack(a, Q, "o", dq_job_token(dq_jobs_at(held, 0))), 0);
    dq_jobs_free(held);
    dq_close(a);
    dq_close(b);
}
END_TEST

/* An ack after the lease ran out still succeeds while nobody claimed it. */
START_TEST(late_ack_unclaimed) {
    dq_client *c = open_client();
    push_text(c, Q, "slow", 0, "s", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 100);
    th_sleep_ms(200);
    ck_stats(c, Q, 0, 1, 0, 0);
    ck_assert_int_eq(dq_ack(c, Q, "s", dq_job_token(dq_jobs_at(held, 0))), 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 100, &jobs, &next), 0);
    ck_assert_int_eq(next, -1);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

/* A late extend takes the job back the same way. */
START_TEST(late_extend_unclaimed) {
    dq_client *c = open_client();
    push_text(c, Q, "slow", 0, "s", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 100);
    th_sleep_ms(200);
    ck_assert_int_eq(
        dq_extend(c, Q, "s", dq_job_token(dq_jobs_at(held, 0)), 5000, NULL), 0);
    ck_stats(c, Q, 0, 0, 1, 0);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 100, &jobs, NULL), 0);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

/* ---- max attempts and dead letters ------------------------------------- */

START_TEST(max_attempts_via_lease) {
    dq_client *c = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 2);
    push_text(c, Q, "doomed", 0, "m", 0, NULL);
    for (int attempt = 1; attempt <= 2; attempt++) {
        dq_jobs *jobs = poll_until(c, Q, 1, 150, 2000);
        ck_assert_ptr_nonnull(jobs);
        ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), attempt);
        dq_jobs_free(jobs);
    }
    /* The second lease runs out: the next poll dead-letters it instead of
     * delivering a third time. */
    th_sleep_ms(250);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 150, &jobs, &next), 0);
    ck_assert_int_eq(next, -1);
    ck_stats(c, Q, 0, 0, 0, 1);
    dq_jobs *dead = NULL;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 100, &dead), 1);
    const dq_job *d = dq_jobs_at(dead, 0);
    ck_assert_str_eq(dq_job_id(d), "m");
    ck_assert_str_eq(dq_job_payload(d, NULL), "doomed");
    ck_assert_int_eq(dq_job_attempt(d), 2);
    ck_assert_int_gt(dq_job_due_ms(d), 0);
    ck_assert_str_eq(dq_job_token(d), "");
    dq_jobs_free(dead);
    /* Requeue by id: attempts reset, delivered as attempt 1 again. */
    ck_assert_int_eq(dq_dead_requeue(c, Q, "m", 0), 1);
    ck_assert_int_eq(dq_dead_requeue(c, Q, "m", 0), 0);
    ck_stats(c, Q, 0, 1, 0, 0);
    jobs = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 1);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "doomed");
    ck_assert_int_eq(dq_ack(c, Q, "m", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(max_attempts_via_nack) {
    dq_client *c = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 2);
    push_text(c, Q, "retry", 0, "r", 0, NULL);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_nack(c, Q, "r", dq_job_token(dq_jobs_at(jobs, 0)), 0, 0),
                     0);
    dq_jobs_free(jobs);
    jobs = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 2);
    /* the second delivery was the last: a nack dead-letters it */
    ck_assert_int_eq(dq_nack(c, Q, "r", dq_job_token(dq_jobs_at(jobs, 0)), 0, 0),
                     1);
    dq_jobs_free(jobs);
    ck_stats(c, Q, 0, 0, 0, 1);
    dq_jobs *dead = NULL;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &dead), 1);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(dead, 0)), 2);
    dq_jobs_free(dead);
    /* unlimited by default: many nacks never dead-letter */
    dq_client *u = open_client();
    char q2[80];
    snprintf(q2, sizeof(q2), "%s-unlimited", Q);
    push_text(u, q2, "x", 0, "x", 0, NULL);
    for (int i = 1; i <= 5; i++) {
        jobs = poll_one(u, q2, 5000);
        ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), i);
        ck_assert_int_eq(
            dq_nack(u, q2, "x", dq_job_token(dq_jobs_at(jobs, 0)), 0, 0), 0);
        dq_jobs_free(jobs);
    }
    ck_stats(u, q2, 0, 1, 0, 0);
    dq_close(u);
    dq_close(c);
}
END_TEST

/* Puts n jobs named <prefix><i> in the dead set, in order.  one_part: on a
 * partitioned run, ids that all hash to partition 0 (tu_id_in) instead. */
static void make_dead(dq_client *c, const char *queue, const char *prefix,
                      int n, int one_part) {
    for (int i = 0; i < n; i++) {
        char id[48], base[32];
        snprintf(base, sizeof(base), "%s%d", prefix, i);
        if (one_part)
            tu_id_in(id, sizeof(id), base, 0);
        else
            snprintf(id, sizeof(id), "%s", base);
        push_text(c, queue, id, 0, id, 0, NULL);
        dq_jobs *jobs = poll_one(c, queue, 5000);
        ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), id);
        ck_assert_int_eq(
            dq_nack(c, queue, id, dq_job_token(dq_jobs_at(jobs, 0)), 0,
                    DQ_NACK_DEAD),
            1);
        dq_jobs_free(jobs);
    }
}

START_TEST(dead_list_paging) {
    dq_client *c = open_client();
    dq_jobs *dead = (dq_jobs *)&dead;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &dead), 0);
    ck_assert_ptr_null(dead);
    make_dead(c, Q, "d", 5, 0);
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 1000, &dead), 5);
    for (int i = 0; i < 5; i++) {
        char id[8];
        snprintf(id, sizeof(id), "d%d", i);
        ck_assert_str_eq(dq_job_id(dq_jobs_at(dead, (size_t)i)), id);
        ck_assert_str_eq(dq_job_payload(dq_jobs_at(dead, (size_t)i), NULL), id);
        ck_assert_int_eq(dq_job_attempt(dq_jobs_at(dead, (size_t)i)), 1);
        if (i > 0)
            ck_assert_int_ge(dq_job_due_ms(dq_jobs_at(dead, (size_t)i)),
                             dq_job_due_ms(dq_jobs_at(dead, (size_t)i - 1)));
    }
    dq_jobs_free(dead);
    ck_assert_int_eq(dq_dead_list(c, Q, 1, 2, &dead), 2);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(dead, 0)), "d1");
    ck_assert_str_eq(dq_job_id(dq_jobs_at(dead, 1)), "d2");
    dq_jobs_free(dead);
    ck_assert_int_eq(dq_dead_list(c, Q, 4, 10, &dead), 1);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(dead, 0)), "d4");
    dq_jobs_free(dead);
    ck_assert_int_eq(dq_dead_list(c, Q, 5, 10, &dead), 0);
    ck_assert_ptr_null(dead);
    dq_close(c);
}
END_TEST

START_TEST(dead_requeue_all) {
    dq_client *c = open_client();
    /* One partition: a requeue of all is one script per partition, each
     * dating its jobs from its own server time, so over several partitions
     * the three would not come due at the same moment for the one poll
     * below. */
    make_dead(c, Q, "r", 3, 1);
    ck_stats(c, Q, 0, 0, 0, 3);
    ck_assert_int_eq(dq_dead_requeue(c, Q, NULL, 300), 3);
    ck_assert_int_eq(dq_dead_requeue(c, Q, NULL, 0), 0);
    int64_t s[5];
    stats5(c, Q, s);
    ck_assert_int_eq(s[0], 3);
    ck_assert_int_eq(s[3], 0);
    ck_assert_msg(s[4] > 0 && s[4] <= 300, "next %" PRId64, s[4]);
    dq_jobs *jobs = poll_until(c, Q, 10, 5000, 2000);
    ck_assert_ptr_nonnull(jobs);
    ck_assert_uint_eq(dq_jobs_count(jobs), 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, i)), 1);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(dead_requeue_many) {
    /* More than the 1000 per call of dq_dead_requeue(NULL). */
    dq_client *c = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1);
    enum { N = 1500 };
    const void **pl = calloc(N, sizeof(*pl));
    size_t *lens = calloc(N, sizeof(*lens));
    ck_assert_int_eq(dq_push_batch(c, Q, N, pl, lens, NULL, NULL, 0, NULL, NULL),
                     N);
    int got = 0;
    for (int i = 0; i < 5 && got < N; i++) {
        dq_jobs *jobs = NULL;
        got += poll_n(c, Q, 1000, 1, &jobs, NULL);
        dq_jobs_free(jobs);
    }
    ck_assert_int_eq(got, N);
    th_sleep_ms(20);
    /* every lease has run out: polls dead-letter them (max attempts 1) */
    for (int i = 0; i < 5; i++) {
        dq_jobs *jobs = NULL;
        ck_assert_int_eq(poll_n(c, Q, 1000, 1000, &jobs, NULL), 0);
    }
    ck_stats(c, Q, 0, 0, 0, N);
    ck_assert_int_eq(dq_dead_requeue(c, Q, NULL, 0), 1000);
    ck_assert_int_eq(dq_dead_requeue(c, Q, NULL, 0), N - 1000);
    ck_assert_int_eq(dq_dead_requeue(c, Q, NULL, 0), 0);
    ck_stats(c, Q, 0, N, 0, 0);
    free(pl);
    free(lens);
    dq_close(c);
}
END_TEST

START_TEST(dead_purge) {
    dq_client *c = open_client();
    make_dead(c, Q, "p", 4, 0);
    redisContext *r = rconn();
    char p0_key[700]; /* the jobs hash holding p0 (its partition's) */
    tu_key(p0_key, sizeof(p0_key), "dq", Q, "jobs", "p0");
    ck_assert_int_eq(rint_(r, "HEXISTS", p0_key, "p0"), 1);
    /* each dead job holds two fields: its payload and its meta */
    ck_assert_int_eq(tu_sum(r, "HLEN", "dq", Q, "jobs"), 8);
    ck_assert_int_eq(dq_dead_purge(c, Q, "p0"), 1);
    ck_assert_int_eq(dq_dead_purge(c, Q, "p0"), 0);
    ck_assert_int_eq(dq_dead_purge(c, Q, "unknown"), 0);
    ck_assert_int_eq(rint_(r, "HEXISTS", p0_key, "p0"), 0);
    ck_assert_int_eq(tu_sum(r, "HLEN", "dq", Q, "jobs"), 6);
    ck_stats(c, Q, 0, 0, 0, 3);
    /* purge does not touch pending jobs */
    push_text(c, Q, "alive", 60000, "alive", 0, NULL);
    ck_assert_int_eq(dq_dead_purge(c, Q, "alive"), 0);
    ck_assert_int_eq(dq_dead_purge(c, Q, NULL), 3);
    ck_assert_int_eq(dq_dead_purge(c, Q, NULL), 0);
    ck_stats(c, Q, 1, 0, 0, 0);
    /* only "alive": its payload, no meta (never delivered) */
    ck_assert_int_eq(tu_job_fields(r, "dq", Q), 1);
    tu_assert_plain_clean(r, "dq", Q);
    dq_jobs *dead = NULL;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &dead), 0);
    /* requeue of a purged id finds nothing */
    ck_assert_int_eq(dq_dead_requeue(c, Q, "p1", 0), 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("lease", TU_SRV_UNIX,
    {"crash_redelivery", crash_redelivery, 30, NULL},
    {"attempts_count_up", attempts_count_up, 30, NULL},
    {"no_double_delivery", no_double_delivery_within_lease, 30, NULL},
    {"late_ack", late_ack_unclaimed, 30, NULL},
    {"late_extend", late_extend_unclaimed, 30, NULL},
    {"max_attempts_lease", max_attempts_via_lease, 30, NULL},
    {"max_attempts_nack", max_attempts_via_nack, 30, NULL},
    {"dead_list", dead_list_paging, 30, NULL},
    {"dead_requeue_all", dead_requeue_all, 30, NULL},
    {"dead_requeue_many", dead_requeue_many, 30, NULL},
    {"dead_purge", dead_purge, 30, NULL})
