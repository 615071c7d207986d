/*
 * tests/test_reschedule.c - dq_reschedule, dq_promote and
 * dq_reschedule_batch: a pending job (scheduled or due) moves to a new due
 * time (delay or DQ_RESCHED_AT, server clock) keeping payload, attempts,
 * options and last failure reason; a repeating job moves its next run
 * only; in-flight and dead jobs are left alone and say so (a dead one is
 * revived with DQ_RESCHED_REVIVE); a compact job goes back to the default
 * layout; a batch answers per id across chunks and partitions; a promote
 * wakes a waiting consumer at once; bad input sends nothing.
 */
#include <pthread.h>

#include "test_suite.h"
#include "test_utils.h"

/* dq_reschedule that must succeed; returns its outcome. */
static int resched(dq_client *c, const char *q, const char *id, int64_t when,
                   int flags) {
    int rc = dq_reschedule(c, q, id, when, flags);
    ck_assert_msg(rc >= 0, "reschedule %s: %d %s", id, rc, dq_errmsg(c));
    return rc;
}

/* Takes one job that must be due now; its token to tok. */
static void take(dq_client *c, const char *q, const char *id,
                 char tok[DQ_TOKEN_BUF]) {
    dq_jobs *j = poll_one(c, q, 30000);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), id);
    snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(dq_jobs_at(j, 0)));
    dq_jobs_free(j);
}

/* dq_push_ex of payload pl, id, delay_ms with one option set. */
static void push_opt(dq_client *c, const char *q, const char *pl,
                     const char *id, int64_t delay_ms, int key, int64_t v) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, key, v), DQ_OK);
    int rc = dq_push_ex(c, q, pl, strlen(pl), delay_ms, id, 0, o, NULL, 0,
                        NULL);
    ck_assert_msg(rc >= 0, "push %s: %d %s", id, rc, dq_errmsg(c));
    dq_push_opts_free(o);
}

/* The payload of a delivered job must be want. */
static void payload_is(const dq_job *j, const char *want) {
    size_t len = 0;
    const void *p = dq_job_payload(j, &len);
    ck_assert_msg(len == strlen(want) && memcmp(p, want, len) == 0,
                  "payload of %s: %.*s, expected %s", dq_job_id(j), (int)len,
                  (const char *)p, want);
}

/* A job an hour away moves to a delay of 300 ms on the server's clock,
 * and to an absolute time; it is delivered at its new time, not before,
 * with its payload. */
START_TEST(moves_scheduled) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    push_text(c, Q, "pay", 3600000, "a", 0, NULL);
    int64_t at = server_ms(r) + 7200000, due = 0;
    ck_assert_int_eq(resched(c, Q, "a", at, DQ_RESCHED_AT), DQ_RESCHED_MOVED);
    ck_assert_int_eq(tu_state_of(c, Q, "a", &due), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(due, at);
    int64_t t0 = server_ms(r);
    ck_assert_int_eq(resched(c, Q, "a", 300, 0), DQ_RESCHED_MOVED);
    int64_t t1 = server_ms(r);
    ck_assert_int_eq(tu_state_of(c, Q, "a", &due), DQ_JOB_SCHEDULED);
    ck_assert_msg(due >= t0 + 300 && due <= t1 + 300,
                  "due %" PRId64 " not in [%" PRId64 ", %" PRId64 "]", due,
                  t0 + 300, t1 + 300);
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(c, Q, 1, 30000, &j, NULL), 0);
    j = poll_until(c, Q, 1, 30000, 5000);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_ge(server_ms(r), due);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), "a");
    payload_is(dq_jobs_at(j, 0), "pay");
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(j, 0)), 1);
    dq_jobs_free(j);
    ck_stats(c, Q, 0, 0, 1, 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A promoted job is delivered by the next poll, ahead of jobs due later;
 * a job already due can be promoted too, and a job moved later is no
 * longer due. */
START_TEST(promote_now) {
    dq_client *c = open_client();
    push_text(c, Q, "far", 3600000, "far", 0, NULL);
    push_text(c, Q, "due", 0, "due", 0, NULL);
    ck_assert_int_eq(dq_promote(c, Q, "far", 0), DQ_RESCHED_MOVED);
    ck_assert_int_eq(dq_promote(c, Q, "due", 0), DQ_RESCHED_MOVED);
    ck_stats(c, Q, 0, 2, 0, 0);
    ck_assert_int_eq(resched(c, Q, "due", 3600000, 0), DQ_RESCHED_MOVED);
    ck_stats(c, Q, 1, 1, 0, 0);
    dq_jobs *j = poll_one(c, Q, 30000);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), "far");
    payload_is(dq_jobs_at(j, 0), "far");
    dq_jobs_free(j);
    ck_assert_int_eq(poll_n(c, Q, 1, 30000, &j, NULL), 0);
    dq_close(c);
}
END_TEST

/* A job that was delivered, nacked with a reason and is pending again
 * keeps its attempts, reason and options (its own max attempts) when it
 * moves: its next delivery is attempt 2 and its third is dead-lettered by
 * the max of 2. */
START_TEST(keeps_everything) {
    dq_client *c = open_client();
    push_opt(c, Q, "kp", "k", 0, DQ_PUSHOPT_MAX_ATTEMPTS, 2);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "k", tok);
    ck_assert_int_eq(dq_nack_reason(c, Q, "k", tok, 3600000, 0, "boom", 4), 0);
    ck_assert_int_eq(dq_promote(c, Q, "k", 0), DQ_RESCHED_MOVED);
    char why[DQ_REASON_MAX + 1];
    int st = 0;
    ck_assert_int_eq(tu_last_error(c, Q, "k", why, &st), 4);
    ck_assert_int_eq(st, DQ_JOB_DUE);
    ck_assert_mem_eq(why, "boom", 4);
    dq_job_info *in = tu_must_get(c, Q, "k");
    ck_assert_int_eq(dq_job_info_attempts(in), 1);
    dq_job_info_free(in);
    dq_jobs *j = poll_one(c, Q, 30000);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(j, 0)), 2);
    payload_is(dq_jobs_at(j, 0), "kp");
    snprintf(tok, sizeof(tok), "%s", dq_job_token(dq_jobs_at(j, 0)));
    dq_jobs_free(j);
    /* the nack sees the job's own max attempts (2): dead */
    ck_assert_int_eq(dq_nack(c, Q, "k", tok, 0, 0), 1);
    dq_close(c);
}
END_TEST

/* Unknown ids answer 0 and create nothing; an in-flight job is left
 * alone (its holder still acks it), also once its lease ran out. */
START_TEST(unknown_and_inflight) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    ck_assert_int_eq(resched(c, Q, "nope", 0, 0), DQ_RESCHED_UNKNOWN);
    ck_assert_int_eq(dq_promote(c, Q, "nope", DQ_RESCHED_REVIVE),
                     DQ_RESCHED_UNKNOWN);
    ck_assert_int_eq(tu_sum(r, "EXISTS", "dq", Q, "due"), 0);
    ck_assert_int_eq(tu_job_fields(r, "dq", Q), 0);
    push_text(c, Q, "x", 0, "i", 0, NULL);
    dq_jobs *j = poll_one(c, Q, 200);
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", dq_job_token(dq_jobs_at(j, 0)));
    dq_jobs_free(j);
    ck_assert_int_eq(dq_promote(c, Q, "i", 0), DQ_RESCHED_INFLIGHT);
    ck_assert_int_eq(resched(c, Q, "i", 5000, DQ_RESCHED_REVIVE),
                     DQ_RESCHED_INFLIGHT);
    ck_stats(c, Q, 0, 0, 1, 0);
    th_sleep_ms(250);
    ck_assert_int_eq(dq_promote(c, Q, "i", 0), DQ_RESCHED_INFLIGHT);
    ck_assert_int_eq(dq_ack(c, Q, "i", tok), 0);
    ck_assert_int_eq(resched(c, Q, "i", 0, 0), DQ_RESCHED_UNKNOWN);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A dead job is left alone unless DQ_RESCHED_REVIVE: then it is pending
 * at the new time with attempts restarted and its reason kept. */
START_TEST(dead_and_revive) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    push_text(c, Q, "dp", 0, "d", 0, NULL);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "d", tok);
    ck_assert_int_eq(dq_nack_reason(c, Q, "d", tok, 0, DQ_NACK_DEAD, "bad", 3),
                     1);
    ck_assert_int_eq(dq_promote(c, Q, "d", 0), DQ_RESCHED_DEAD);
    ck_assert_int_eq(resched(c, Q, "d", 10, 0), DQ_RESCHED_DEAD);
    ck_stats(c, Q, 0, 0, 0, 1);
    int64_t at = server_ms(r) + 3600000, due = 0;
    ck_assert_int_eq(resched(c, Q, "d", at, DQ_RESCHED_AT | DQ_RESCHED_REVIVE),
                     DQ_RESCHED_REVIVED);
    ck_assert_int_eq(tu_state_of(c, Q, "d", &due), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(due, at);
    ck_stats(c, Q, 1, 0, 0, 0);
    char why[DQ_REASON_MAX + 1];
    int st = 0;
    ck_assert_int_eq(tu_last_error(c, Q, "d", why, &st), 3);
    ck_assert_mem_eq(why, "bad", 3);
    ck_assert_int_eq(dq_promote(c, Q, "d", DQ_RESCHED_REVIVE),
                     DQ_RESCHED_MOVED);
    dq_jobs *j = poll_one(c, Q, 30000);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(j, 0)), 1);
    payload_is(dq_jobs_at(j, 0), "dp");
    /* the old holder's token is stale, the new one acks */
    ck_assert_int_eq(dq_ack(c, Q, "d", tok), DQ_ESTALE);
    ck_assert_int_eq(dq_ack(c, Q, "d", dq_job_token(dq_jobs_at(j, 0))), 0);
    dq_jobs_free(j);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A repeating job (every 10 minutes, first run at start) promoted runs
 * now, in place of the run at start; its rule stays, and the ack
 * schedules the run after on the series' own grid (start + 10 minutes),
 * not 10 minutes from the early run. */
START_TEST(repeat_next_run_only) {
    dq_client *c = open_client();
    push_opt(c, Q, "rp", "r", 600000, DQ_PUSHOPT_EVERY_MS, 600000);
    int64_t start = 0;
    ck_assert_int_eq(tu_state_of(c, Q, "r", &start), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(dq_promote(c, Q, "r", 0), DQ_RESCHED_MOVED);
    dq_job_info *in = tu_must_get(c, Q, "r");
    ck_assert_str_ne(dq_job_info_repeat(in), "");
    dq_job_info_free(in);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "r", tok);
    ck_assert_int_eq(dq_ack(c, Q, "r", tok), 0);
    int64_t next = 0;
    ck_assert_int_eq(tu_state_of(c, Q, "r", &next), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(next, start + 600000);
    dq_close(c);
}
END_TEST

/* A batch of 2500 ids (three chunks; on a partitioned run, calls per
 * partition) answers per id in the caller's order: moved, unknown, in
 * flight, dead, and an id named twice twice the same. */
START_TEST(batch_mixed) {
    enum { N = 2500 };
    dq_client *c = open_client();
    const char **ids = tu_ids(N + 4, "b");
    tu_push_ids(c, Q, N, ids, 3600000);
    push_text(c, Q, "x", 0, "fl", 0, NULL);
    dq_jobs *j = poll_one(c, Q, 30000);
    dq_jobs_free(j);
    push_text(c, Q, "x", 0, "dd", 0, NULL);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "dd", tok);
    ck_assert_int_eq(dq_nack(c, Q, "dd", tok, 0, DQ_NACK_DEAD), 1);
    ids[N] = "fl";
    ids[N + 1] = "none";
    ids[N + 2] = "dd";
    ids[N + 3] = "b7"; /* twice */
    int out[N + 4];
    memset(out, 0xff, sizeof(out));
    int rc = dq_reschedule_batch(c, Q, N + 4, ids, 0, 0, out);
    ck_assert_msg(rc == N + 1, "batch: %d %s", rc, dq_errmsg(c));
    for (int i = 0; i < N; i++)
        tu_require(out[i] == DQ_RESCHED_MOVED, "%s: %d", ids[i], out[i]);
    ck_assert_int_eq(out[N], DQ_RESCHED_INFLIGHT);
    ck_assert_int_eq(out[N + 1], DQ_RESCHED_UNKNOWN);
    ck_assert_int_eq(out[N + 2], DQ_RESCHED_DEAD);
    ck_assert_int_eq(out[N + 3], DQ_RESCHED_MOVED);
    ck_stats(c, Q, 0, N, 1, 1);
    rc = dq_reschedule_batch(c, Q, 2, ids + N + 1, 60000, DQ_RESCHED_REVIVE,
                             NULL);
    ck_assert_int_eq(rc, 1);
    ck_stats(c, Q, 1, N, 1, 0);
    free(ids);
    dq_close(c);
}
END_TEST

/* The shard key of job id (a compact job is listed there). */
static void shard_key(char *buf, size_t n, const char *q, const char *id) {
    char suf[TU_SHARD_SUFFIX];
    tu_shard_suffix(id, suf);
    tu_key(buf, n, "dq", q, suf, id);
}

/* A job held in compact buckets is found by its id, moved back to the
 * default layout at its new time, and delivered with its payload. */
START_TEST(compact_job) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    int k = DQ_SET_LAYOUT;
    int64_t lay = DQ_LAYOUT_COMPACT_PUSH;
    ck_assert_int_eq(dq_config_set(c, Q, 1, &k, &lay), 0);
    push_text(c, Q, "small", 3600000, "cj", 0, NULL);
    push_text(c, Q, "other", 3600000, "co", 0, NULL);
    char skey[512], jkey[512];
    shard_key(skey, sizeof(skey), Q, "cj");
    tu_key(jkey, sizeof(jkey), "dq", Q, "jobs", "cj");
    redisReply *rep = th_cmd(r, "HEXISTS %s cj", skey);
    ck_assert_int_eq(rep->integer, 1); /* compact */
    freeReplyObject(rep);
    int64_t at = server_ms(r) + 250, due = 0;
    ck_assert_int_eq(resched(c, Q, "cj", at, DQ_RESCHED_AT), DQ_RESCHED_MOVED);
    rep = th_cmd(r, "HEXISTS %s cj", skey);
    ck_assert_int_eq(rep->integer, 0);
    freeReplyObject(rep);
    rep = th_cmd(r, "HGET %s cj", jkey);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    ck_assert_str_eq(rep->str, "small");
    freeReplyObject(rep);
    ck_assert_int_eq(tu_state_of(c, Q, "cj", &due), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(due, at);
    ck_assert_int_eq(tu_job_fields(r, "dq", Q), 2);
    dq_jobs *j = poll_until(c, Q, 1, 30000, 5000);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), "cj");
    payload_is(dq_jobs_at(j, 0), "small");
    dq_jobs_free(j);
    ck_assert_int_eq(dq_promote(c, Q, "co", 0), DQ_RESCHED_MOVED);
    j = poll_one(c, Q, 30000);
    payload_is(dq_jobs_at(j, 0), "other");
    dq_jobs_free(j);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A consumer waiting in dq_poll_wait (idle cap 10 s) on a queue whose only
 * job is an hour away gets it within a second of its promote. */
START_TEST(promote_wakes) {
    dq_client *c = open_client();
    dq_client *wc = open_client_opt(DQ_OPT_WAIT_CAP_MS, 10000);
    redisContext *r = rconn();
    push_text(c, Q, "w", 3600000, "w", 0, NULL);
    tu_waiter w = {.c = wc, .q = Q};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, tu_wait_thread, &w), 0);
    for (int i = 0; i < 500 && tu_sum(r, "ZCARD", "dq", Q, "idle") <
                                   tu_parts(); i++)
        th_sleep_ms(10);
    th_sleep_ms(100);
    int64_t t0 = th_mono_us();
    ck_assert_int_eq(dq_promote(c, Q, "w", 0), DQ_RESCHED_MOVED);
    pthread_join(th, NULL);
    ck_assert_msg(w.rc == 1, "waiter: %d %s", w.rc, w.err);
    ck_assert_str_eq(w.id, "w");
    ck_assert_msg(w.done_us - t0 < 1000000, "woken after %" PRId64 " us",
                  w.done_us - t0);
    redisFree(r);
    dq_close(wc);
    dq_close(c);
}
END_TEST

/* Bad input: each call returns its code and message and sends nothing. */
START_TEST(bad_input) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    char longid[DQ_ID_MAX + 2];
    memset(longid, 'x', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    const char *ids[2] = {"a", NULL};
    long long before = commands_processed(r);
    ck_assert_int_eq(dq_reschedule(NULL, Q, "a", 0, 0), DQ_ENULL);
    ck_assert_int_eq(dq_promote(NULL, Q, "a", 0), DQ_ENULL);
    ck_assert_int_eq(dq_reschedule_batch(NULL, Q, 1, ids, 0, 0, NULL),
                     DQ_ENULL);
    tu_bad(c, dq_reschedule(c, NULL, "a", 0, 0), DQ_ENULL, "queue");
    tu_bad(c, dq_reschedule(c, "", "a", 0, 0), DQ_EQUEUE, "queue");
    tu_bad(c, dq_reschedule(c, Q, NULL, 0, 0), DQ_ENULL, "id");
    tu_bad(c, dq_reschedule(c, Q, "", 0, 0), DQ_EID, "id");
    tu_bad(c, dq_reschedule(c, Q, longid, 0, 0), DQ_EID, "id");
    tu_bad(c, dq_reschedule(c, Q, "a", -1, 0), DQ_EDELAY, "when");
    tu_bad(c, dq_reschedule(c, Q, "a", DQ_DELAY_MAX + 1, 0), DQ_EDELAY,
           "when");
    tu_bad(c, dq_reschedule(c, Q, "a", -5, DQ_RESCHED_AT), DQ_EDELAY,
           "when");
    tu_bad(c, dq_reschedule(c, Q, "a", DQ_AT_MAX + 1, DQ_RESCHED_AT),
           DQ_EDELAY, "when");
    tu_bad(c, dq_reschedule(c, Q, "a", 0, 8), DQ_EINVAL, "flags");
    tu_bad(c, dq_promote(c, Q, "a", DQ_RESCHED_AT), DQ_EINVAL, "flags");
    tu_bad(c, dq_promote(c, Q, NULL, 0), DQ_ENULL, "id");
    tu_bad(c, dq_reschedule_batch(c, Q, 0, ids, 0, 0, NULL), DQ_EINVAL, "n");
    tu_bad(c, dq_reschedule_batch(c, Q, DQ_BATCH_MAX + 1, ids, 0, 0, NULL),
           DQ_EINVAL, "n");
    tu_bad(c, dq_reschedule_batch(c, Q, 1, NULL, 0, 0, NULL), DQ_ENULL,
           "ids");
    tu_bad(c, dq_reschedule_batch(c, Q, 2, ids, 0, 0, NULL), DQ_ENULL, "id");
    tu_nothing_sent(r, before);
    /* the largest times are taken */
    push_text(c, Q, "x", 0, "a", 0, NULL);
    ck_assert_int_eq(resched(c, Q, "a", DQ_DELAY_MAX, 0), DQ_RESCHED_MOVED);
    ck_assert_int_eq(resched(c, Q, "a", DQ_AT_MAX, DQ_RESCHED_AT),
                     DQ_RESCHED_MOVED);
    ck_assert_int_eq(resched(c, Q, "a", 0, DQ_RESCHED_AT), DQ_RESCHED_MOVED);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("reschedule", TU_SRV_UNIX,
           {"moves_scheduled", moves_scheduled, 30, NULL},
           {"promote_now", promote_now, 30, NULL},
           {"keeps_everything", keeps_everything, 30, NULL},
           {"unknown_and_inflight", unknown_and_inflight, 30, NULL},
           {"dead_and_revive", dead_and_revive, 30, NULL},
           {"repeat_next_run_only", repeat_next_run_only, 30, NULL},
           {"batch_mixed", batch_mixed, 60, NULL},
           {"compact_job", compact_job, 30, NULL},
           {"promote_wakes", promote_wakes, 30, NULL},
           {"bad_input", bad_input, 30, NULL})
