/*
 * tests/test_recover.c - the library recovers by itself: after SCRIPT FLUSH
 * (NOSCRIPT) every operation reloads its script, and after a Redis restart
 * the call that sees the break fails (DQ_EIO/DQ_ETIMEDOUT) and the next one
 * reconnects.
 */
#include "test_suite.h"
#include "test_utils.h"

static void script_flush(void) {
    redisContext *r = rconn();
    redisReply *rep = th_cmd(r, "SCRIPT FLUSH");
    ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    redisFree(r);
}

START_TEST(noscript_every_op) {
    dq_client *c = open_client();
    char id[DQ_ID_BUF];
    /* warm: the scripts are loaded */
    push_text(c, Q, "warm", 0, "warm", 0, NULL);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_ack(c, Q, "warm", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);

    script_flush();
    push_text(c, Q, "one", 0, NULL, 0, id);
    script_flush();
    jobs = poll_one(c, Q, 5000);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), id);
    script_flush();
    ck_assert_int_eq(dq_extend(c, Q, id, dq_job_token(dq_jobs_at(jobs, 0)), 5000,
                               NULL),
                     0);
    script_flush();
    ck_assert_int_eq(dq_nack(c, Q, id, dq_job_token(dq_jobs_at(jobs, 0)), 0, 0),
                     0);
    dq_jobs_free(jobs);
    jobs = poll_one(c, Q, 5000);
    script_flush();
    ck_assert_int_eq(dq_ack(c, Q, id, dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    script_flush();
    push_text(c, Q, "c", 60000, "cancel-me", 0, NULL);
    script_flush();
    ck_assert_int_eq(dq_cancel(c, Q, "cancel-me", 0), DQ_CANCELED_PENDING);
    script_flush();
    ck_stats(c, Q, 0, 0, 0, 0);
    /* dead letters */
    push_text(c, Q, "d", 0, "dead", 0, NULL);
    jobs = poll_one(c, Q, 5000);
    script_flush();
    ck_assert_int_eq(
        dq_nack(c, Q, "dead", dq_job_token(dq_jobs_at(jobs, 0)), 0, DQ_NACK_DEAD),
        1);
    dq_jobs_free(jobs);
    script_flush();
    dq_jobs *dead = NULL;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &dead), 1);
    dq_jobs_free(dead);
    script_flush();
    ck_assert_int_eq(dq_dead_requeue(c, Q, "dead", 0), 1);
    jobs = poll_one(c, Q, 5000);
    ck_assert_int_eq(
        dq_nack(c, Q, "dead", dq_job_token(dq_jobs_at(jobs, 0)), 0, DQ_NACK_DEAD),
        1);
    script_flush();
    ck_assert_int_eq(dq_dead_purge(c, Q, NULL), 1);
    dq_jobs_free(jobs);
    script_flush();
    /* poll_wait */
    push_text(c, Q, "w", 50, "w", 0, NULL);
    script_flush();
    jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(c, Q, 1, 5000, 3000, &jobs), 1);
    script_flush();
    const char *ids[1] = {"w"};
    const char *toks[1] = {dq_job_token(dq_jobs_at(jobs, 0))};
    int res[1] = {9};
    ck_assert_int_eq(dq_ack_batch(c, Q, 1, ids, toks, res), 1);
    ck_assert_int_eq(res[0], 0);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* A batch of several chunks after SCRIPT FLUSH: every chunk gets NOSCRIPT in
 * the pipeline and must be retried; the connection stays in step. */
START_TEST(noscript_batch_push) {
    enum { N = 2500 };
    dq_client *c = open_client();
    push_text(c, Q, "warm", 60000, "warm", 0, NULL);
    script_flush();
    const void **pl = calloc(N, sizeof(*pl));
    size_t *lens = calloc(N, sizeof(*lens));
    int *outcomes = calloc(N, sizeof(int));
    char *ids = malloc((size_t)N * DQ_ID_BUF);
    int rc = dq_push_batch(c, Q, N, pl, lens, NULL, NULL, 0, ids, outcomes);
    ck_assert_msg(rc == N, "push_batch after SCRIPT FLUSH: %d %s", rc,
                  dq_errmsg(c));
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(outcomes[i], DQ_PUSHED);
    /* the connection answers the next calls with their own replies */
    ck_stats(c, Q, 1, N, 0, 0);
    int got = 0;
    for (int r = 0; r < 4; r++) {
        dq_jobs *jobs = NULL;
        got += poll_n(c, Q, 1000, 5000, &jobs, NULL);
        dq_jobs_free(jobs);
    }
    ck_assert_int_eq(got, N);
    /* and an ack batch of several chunks too */
    script_flush();
    const char **aids = calloc(N, sizeof(*aids));
    const char **toks = calloc(N, sizeof(*toks));
    for (int i = 0; i < N; i++) {
        aids[i] = ids + (size_t)i * DQ_ID_BUF;
        toks[i] = "999999999"; /* wrong tokens: all refused as stale */
    }
    int *results = calloc(N, sizeof(int));
    ck_assert_int_eq(dq_ack_batch(c, Q, N, aids, toks, results), 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(results[i], DQ_ESTALE);
    ck_stats(c, Q, 1, 0, N, 0);
    free(pl);
    free(lens);
    free(outcomes);
    free(ids);
    free(aids);
    free(toks);
    free(results);
    dq_close(c);
}
END_TEST

/* Restart with a per-test server (it dies with this test's process). */
START_TEST(restart_reconnects) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, "appendonly yes\nappendfsync always"),
                     0);
    char uri[500];
    dq_client *c = open_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), NULL);
    push_text(c, Q, "survives", 0, "s", 0, NULL);
    th_redis_kill(&srv);
    /* while Redis is down: a clean error, no crash */
    int64_t s[5];
    int rc = dq_stats(c, Q, &s[0], &s[1], &s[2], &s[3], &s[4]);
    ck_assert_msg(rc == DQ_EIO || rc == DQ_ETIMEDOUT, "stats while down: %d %s",
                  rc, dq_errmsg(c));
    ck_assert_str_ne(dq_errmsg(c), "");
    rc = dq_stats(c, Q, &s[0], &s[1], &s[2], &s[3], &s[4]);
    ck_assert_msg(rc == DQ_EIO || rc == DQ_ETIMEDOUT, "reconnect while down: %d",
                  rc);
    ck_assert_int_eq(th_redis_restart(&srv), 0);
    /* up again: reconnects by itself, scripts reloaded, data kept (AOF) */
    ck_stats(c, Q, 0, 1, 0, 0);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "survives");
    ck_assert_int_eq(dq_ack(c, Q, "s", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    dq_close(c);
    th_redis_stop(&srv);
}
END_TEST

/* A restart between two calls (no call while down): the first call after it
 * sees the broken connection and fails; the one after works. */
START_TEST(restart_between_calls) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, NULL), 0);
    char uri[500];
    dq_client *c = open_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), NULL);
    push_text(c, Q, "x", 0, "x", 0, NULL);
    th_redis_kill(&srv);
    ck_assert_int_eq(th_redis_restart(&srv), 0);
    int outcome = 0;
    int rc = dq_push(c, Q, "y", 1, 0, "y", DQ_PUSH_KEEP, NULL, 0, &outcome);
    ck_assert_msg(rc == DQ_EIO || rc == DQ_ETIMEDOUT, "first call: %d %s", rc,
                  dq_errmsg(c));
    /* safe to retry a push with a caller id and DQ_PUSH_KEEP */
    rc = dq_push(c, Q, "y", 1, 0, "y", DQ_PUSH_KEEP, NULL, 0, &outcome);
    ck_assert_msg(rc == 0, "retry: %d %s", rc, dq_errmsg(c));
    ck_assert_int_eq(outcome, DQ_PUSHED); /* no persistence: the data is gone */
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "y");
    dq_jobs_free(jobs);
    dq_close(c);
    th_redis_stop(&srv);
}
END_TEST

/* dq_poll_wait across a restart: its wake-up connection breaks too; after
 * the restart a wait still wakes on a push from another process.  The wait
 * cap is set high (5 s) so only the wake-up can make it return early. */
START_TEST(restart_poll_wait) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, NULL), 0);
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 5000), 0);
    char uri[500];
    dq_client *c = open_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), o);
    dq_options_free(o);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(c, Q, 1, 1000, 50, &jobs), 0); /* subscribes */
    th_redis_kill(&srv);
    ck_assert_int_eq(th_redis_restart(&srv), 0);
    int rc = -1;
    for (int i = 0; i < 3 && rc != 0; i++) {
        rc = dq_poll_wait(c, Q, 1, 1000, 100, &jobs);
        ck_assert_msg(rc == 0 || rc == DQ_EIO || rc == DQ_ETIMEDOUT,
                      "poll_wait after restart: %d %s", rc, dq_errmsg(c));
    }
    ck_assert_int_eq(rc, 0);
    /* A partitioned wait polls only the partitions it knows may have due
     * work: with every partition empty the waits above may not have used
     * the command connection at all.  The call that sees its break fails,
     * the next one reconnects (as the waits do on a plain queue). */
    for (int i = 0; i < 2 && tu_parts() > 1; i++) {
        int64_t s[5];
        rc = dq_stats(c, Q, &s[0], &s[1], &s[2], &s[3], &s[4]);
        ck_assert_msg(rc == 0 || rc == DQ_EIO || rc == DQ_ETIMEDOUT,
                      "stats after restart: %d %s", rc, dq_errmsg(c));
        if (rc == 0)
            break;
    }
    ck_assert_int_eq(rc, 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        th_sleep_ms(300);
        dq_client *p = NULL;
        if (dq_open(uri, NULL, &p) != 0)
            _exit(2);
        _exit(dq_push(p, Q, "late", 4, 0, NULL, 0, NULL, 0, NULL) == 0 ? 0 : 3);
    }
    int64_t t0 = th_mono_ms();
    rc = dq_poll_wait(c, Q, 1, 1000, 4000, &jobs);
    int64_t took = th_mono_ms() - t0;
    ck_assert_msg(rc == 1, "poll_wait: %d %s", rc, dq_errmsg(c));
    ck_assert_msg(took < 1500, "woke after %" PRId64 " ms", took);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "late");
    dq_jobs_free(jobs);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    dq_close(c);
    th_redis_stop(&srv);
}
END_TEST

/* A wake-up lost with the subscriber link (killed between two waits, the
 * command connection intact): the job pushed meanwhile is due, so the next
 * waits return it at once, well before the 5 s cap, although no wake-up
 * came for it. */
START_TEST(lost_wakeup_poll_wait) {
    dq_client *c = open_client_opt(DQ_OPT_WAIT_CAP_MS, 5000);
    dq_client *p = open_client();
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(c, Q, 1, 1000, 50, &jobs), 0); /* subscribes */
    redisContext *r = rconn();
    redisReply *rep = th_cmd(r, "CLIENT KILL TYPE pubsub");
    ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
    ck_assert_int_ge(rep->integer, 1);
    freeReplyObject(rep);
    redisFree(r);
    push_text(p, Q, "lost wake-up", 0, "lost", 0, NULL);
    int64_t t0 = th_mono_ms();
    int n = 0;
    for (int i = 0; i < 4 && n <= 0; i++) {
        n = dq_poll_wait(c, Q, 1, 1000, 500, &jobs);
        ck_assert_msg(n >= 0 || n == DQ_EIO || n == DQ_ETIMEDOUT,
                      "poll_wait after the subscriber link was killed: %d %s",
                      n, dq_errmsg(c));
    }
    int64_t took = th_mono_ms() - t0;
    ck_assert_msg(n == 1, "a due job not returned by 4 waits of 500 ms "
                  "(%" PRId64 " ms) after a lost wake-up: %d", took, n);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "lost");
    ck_assert_msg(took < 1500, "returned after %" PRId64 " ms", took);
    dq_jobs_free(jobs);
    dq_close(p);
    dq_close(c);
}
END_TEST

TEST_SUITE("recover", TU_SRV_UNIX,
    {"noscript", noscript_every_op, 30, NULL},
    {"noscript_batch", noscript_batch_push, 30, NULL},
    {"restart", restart_reconnects, 30, NULL},
    {"restart_between", restart_between_calls, 30, NULL},
    {"restart_poll_wait", restart_poll_wait, 30, NULL},
    {"lost_wakeup", lost_wakeup_poll_wait, 30, NULL})
