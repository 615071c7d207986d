/*
 * tests/test_lifecycle.c - a job's life as dq_get tells it, and why it
 * failed: dq_get in every state (scheduled, due, in flight, a lease that
 * ran out, dead, unknown), dq_nack_reason's reason through the retry, the
 * dead list and dq_get (binary, empty, at the limit), where the reason
 * goes (kept by dq_nack and dq_dead_requeue, dropped by a replacing push,
 * deleted with the job's data), "max attempts" from a poll, bad inputs
 * that change nothing in Redis, and two clients racing on one job.
 */
#include "test_suite.h"
#include "test_utils.h"

#include <pthread.h>

/* dq_get that must find no job. */
static void must_miss(dq_client *c, const char *q, const char *id) {
    dq_job_info *in = (dq_job_info *)&in;
    int rc = dq_get(c, q, id, &in);
    ck_assert_msg(rc == 0, "dq_get %s: %d (%s) %s, want 0 (unknown)", id, rc,
                  dq_errname(rc), dq_errmsg(c));
    ck_assert_ptr_null(in);
}

/* The info's reason is exactly want (wlen bytes), NUL after it. */
static void reason_is(const dq_job_info *in, const void *want, size_t wlen) {
    size_t len = 99;
    const char *e = dq_job_info_last_error(in, &len);
    ck_assert_msg(e != NULL, "%s: no reason recorded", dq_job_info_id(in));
    ck_assert_uint_eq(len, wlen);
    ck_assert_msg(memcmp(e, want, wlen) == 0, "%s: reason differs",
                  dq_job_info_id(in));
    ck_assert_int_eq(e[len], '\0');
    ck_assert_int_gt(dq_job_info_failed_ms(in), 0);
}

static void no_reason(const dq_job_info *in) {
    size_t len = 99;
    ck_assert_ptr_null(dq_job_info_last_error(in, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(dq_job_info_failed_ms(in), 0);
}

/* Polls exactly job id; copies its token; returns its lease deadline. */
static int64_t take(dq_client *c, const char *q, const char *id,
                    int64_t lease_ms, char tok[DQ_TOKEN_BUF]) {
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(c, q, 1, lease_ms, &j, NULL), 1);
    const dq_job *job = dq_jobs_at(j, 0);
    ck_assert_str_eq(dq_job_id(job), id);
    snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(job));
    int64_t dl = dq_job_lease_deadline_ms(job);
    dq_jobs_free(j);
    return dl;
}

/* 1 if job id has a reason field in Redis (its partition's jobs hash). */
static long long has_reason_field(redisContext *r, const char *q,
                                  const char *id) {
    char key[700], field[DQ_ID_BUF + 2];
    tu_key(key, sizeof(key), "dq", q, "jobs", id);
    size_t n = strlen(id);
    memcpy(field, id, n);
    field[n] = '\0';
    field[n + 1] = 'e';
    redisReply *rep = rcmd_try(r, "HEXISTS %s %b", key, field, n + 2);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

/* Fields of the queue's jobs hashes, summed over partitions. */
static long long job_fields(redisContext *r, const char *q) {
    return tu_sum(r, "HLEN", "dq", q, "jobs");
}

/* ---- dq_get in every state ------------------------------------------------ */

START_TEST(get_every_state) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    int64_t t0 = server_ms(r);
    push_text(c, Q, "later", 60000, "s1", 0, NULL);
    push_text(c, Q, "now", 0, "d1", 0, NULL);

    dq_job_info *in = tu_must_get(c, Q, "s1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_SCHEDULED);
    ck_assert_int_ge(dq_job_info_due_ms(in), t0 + 60000);
    ck_assert_int_le(dq_job_info_due_ms(in), server_ms(r) + 60000);
    ck_assert_int_eq(dq_job_info_attempts(in), 0);
    ck_assert_int_eq(dq_job_info_lease_deadline_ms(in), 0);
    ck_assert_int_ge(dq_job_info_now_ms(in), t0);
    size_t len = 0;
    ck_assert_str_eq(dq_job_info_payload(in, &len), "later");
    ck_assert_uint_eq(len, 5);
    no_reason(in);
    dq_job_info_free(in);

    in = tu_must_get(c, Q, "d1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DUE);
    ck_assert_int_le(dq_job_info_due_ms(in), dq_job_info_now_ms(in));
    dq_job_info_free(in);

    /* in flight: the lease deadline the poll gave, attempt 1 */
    char tok[DQ_TOKEN_BUF];
    int64_t dl = take(c, Q, "d1", 60000, tok);
    in = tu_must_get(c, Q, "d1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_INFLIGHT);
    ck_assert_int_eq(dq_job_info_lease_deadline_ms(in), dl);
    ck_assert_int_eq(dq_job_info_due_ms(in), dl);
    ck_assert_int_eq(dq_job_info_attempts(in), 1);
    ck_assert_str_eq(dq_job_info_payload(in, NULL), "now");
    /* a copy outlives the original */
    dq_job_info *copy = dq_job_info_dup(in);
    dq_job_info_free(in);
    ck_assert_int_eq(dq_job_info_state(copy), DQ_JOB_INFLIGHT);
    ck_assert_str_eq(dq_job_info_id(copy), "d1");
    dq_job_info_free(copy);

    /* dead: due_ms is the time of death */
    int64_t before = server_ms(r);
    ck_assert_int_eq(dq_nack(c, Q, "d1", tok, 0, DQ_NACK_DEAD), 1);
    in = tu_must_get(c, Q, "d1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
    ck_assert_int_ge(dq_job_info_due_ms(in), before);
    ck_assert_int_le(dq_job_info_due_ms(in), server_ms(r));
    ck_assert_int_eq(dq_job_info_attempts(in), 1);
    ck_assert_int_eq(dq_job_info_lease_deadline_ms(in), 0);
    no_reason(in); /* dq_nack records none */
    dq_job_info_free(in);

    /* unknown: never pushed, purged, acked, cancelled */
    must_miss(c, Q, "never");
    ck_assert_int_eq(dq_dead_purge(c, Q, "d1"), 1);
    must_miss(c, Q, "d1");
    push_text(c, Q, "x", 0, "a1", 0, NULL);
    take(c, Q, "a1", 60000, tok);
    ck_assert_int_eq(dq_ack(c, Q, "a1", tok), 0);
    must_miss(c, Q, "a1");
    ck_assert_int_eq(dq_cancel(c, Q, "s1", 0), DQ_CANCELED_PENDING);
    must_miss(c, Q, "s1");

    /* NULL-safe accessors */
    ck_assert_int_eq(dq_job_info_state(NULL), DQ_JOB_UNKNOWN);
    ck_assert_ptr_null(dq_job_info_id(NULL));
    ck_assert_ptr_null(dq_job_info_payload(NULL, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_ptr_null(dq_job_info_last_error(NULL, NULL));
    ck_assert_int_eq(dq_job_info_due_ms(NULL) + dq_job_info_attempts(NULL) +
                         dq_job_info_lease_deadline_ms(NULL) +
                         dq_job_info_failed_ms(NULL) + dq_job_info_now_ms(NULL),
                     0);
    ck_assert_ptr_null(dq_job_info_dup(NULL));
    dq_job_info_free(NULL);
    ck_assert_ptr_null(dq_job_last_error(NULL, &len));
    ck_assert_int_eq(dq_job_failed_ms(NULL), 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A lease that ran out and no poll claimed the job again: still in flight
 * (its holder may ack it), with a deadline before now. */
START_TEST(get_expired_lease) {
    dq_client *c = open_client();
    push_text(c, Q, "x", 0, "e1", 0, NULL);
    char tok[DQ_TOKEN_BUF];
    int64_t dl = take(c, Q, "e1", 20, tok);
    th_sleep_ms(60);
    dq_job_info *in = tu_must_get(c, Q, "e1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_INFLIGHT);
    ck_assert_int_eq(dq_job_info_lease_deadline_ms(in), dl);
    ck_assert_int_lt(dq_job_info_lease_deadline_ms(in),
                     dq_job_info_now_ms(in));
    dq_job_info_free(in);
    ck_assert_int_eq(dq_ack(c, Q, "e1", tok), 0);
    must_miss(c, Q, "e1");
    dq_close(c);
}
END_TEST

/* ---- reasons ---------------------------------------------------------------- */

/* nack with a reason -> retry -> dead with another -> dead list and get. */
START_TEST(reason_through_dead_list) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    push_text(c, Q, "job", 0, "r1", 0, NULL);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "r1", 60000, tok);
    int64_t t0 = server_ms(r);
    ck_assert_int_eq(dq_nack_reason(c, Q, "r1", tok, 0, 0, "db timeout", 10),
                     0);
    int64_t t1 = server_ms(r);
    dq_job_info *in = tu_must_get(c, Q, "r1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DUE);
    reason_is(in, "db timeout", 10);
    ck_assert_int_ge(dq_job_info_failed_ms(in), t0);
    ck_assert_int_le(dq_job_info_failed_ms(in), t1);
    dq_job_info_free(in);

    /* listed with it while scheduled; kept through the next delivery */
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_list(c, Q, DQ_LIST_SCHEDULED, 0, 10, &jobs, NULL), 1);
    size_t len = 0;
    ck_assert_str_eq(dq_job_last_error(dq_jobs_at(jobs, 0), &len),
                     "db timeout");
    dq_jobs_free(jobs);
    take(c, Q, "r1", 60000, tok);
    in = tu_must_get(c, Q, "r1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_INFLIGHT);
    ck_assert_int_eq(dq_job_info_attempts(in), 2);
    reason_is(in, "db timeout", 10);
    dq_job_info_free(in);
    /* jobs from a poll carry none */
    push_text(c, Q, "p", 0, "plain", 0, NULL);
    jobs = poll_one(c, Q, 60000);
    ck_assert_ptr_null(dq_job_last_error(dq_jobs_at(jobs, 0), &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(dq_ack(c, Q, "plain", dq_job_token(dq_jobs_at(jobs, 0))),
                     0);
    dq_jobs_free(jobs);

    /* dead, with the reason of the last nack */
    ck_assert_int_eq(
        dq_nack_reason(c, Q, "r1", tok, 0, DQ_NACK_DEAD, "gave up", 7), 1);
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &jobs), 1);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_str_eq(dq_job_id(j), "r1");
    ck_assert_str_eq(dq_job_last_error(j, &len), "gave up");
    ck_assert_uint_eq(len, 7);
    ck_assert_int_ge(dq_job_failed_ms(j), t1);
    dq_job *kept = dq_job_dup(j);
    dq_jobs_free(jobs);
    ck_assert_str_eq(dq_job_last_error(kept, NULL), "gave up");
    in = tu_must_get(c, Q, "r1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
    reason_is(in, "gave up", 7);
    ck_assert_int_eq(dq_job_info_failed_ms(in), dq_job_failed_ms(kept));
    dq_job_info_free(in);
    dq_job_free(kept);

    /* a requeue keeps it (why it had died); a plain nack keeps it too */
    ck_assert_int_eq(dq_dead_requeue(c, Q, "r1", 0), 1);
    in = tu_must_get(c, Q, "r1");
    ck_assert_int_eq(dq_job_info_attempts(in), 0);
    reason_is(in, "gave up", 7);
    dq_job_info_free(in);
    take(c, Q, "r1", 60000, tok);
    ck_assert_int_eq(dq_nack(c, Q, "r1", tok, 0, 0), 0);
    in = tu_must_get(c, Q, "r1");
    reason_is(in, "gave up", 7);
    dq_job_info_free(in);

    /* a replacing push starts afresh: no reason */
    int oc = push_text(c, Q, "v2", 0, "r1", DQ_PUSH_REPLACE, NULL);
    ck_assert_int_eq(oc, DQ_REPLACED);
    ck_assert_int_eq(has_reason_field(r, Q, "r1"), 0);
    in = tu_must_get(c, Q, "r1");
    no_reason(in);
    dq_job_info_free(in);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* Binary reasons (NUL bytes, non-UTF-8), one of DQ_REASON_MAX bytes, and
 * an empty one (recorded: not NULL, length 0). */
START_TEST(reason_binary) {
    dq_client *c = open_client();
    static const char bin[] = {'a', '\0', 'b', '\xff', '\0', '\n'};
    char big[DQ_REASON_MAX];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)(i * 7);
    struct {
        const char *id;
        const void *reason;
        size_t len;
    } cases[] = {{"b1", bin, sizeof(bin)}, {"b2", big, sizeof(big)},
                 {"b3", NULL, 0}, {"b4", "", 0}};
    for (size_t k = 0; k < 4; k++) {
        push_text(c, Q, "x", 0, cases[k].id, 0, NULL);
        char tok[DQ_TOKEN_BUF];
        take(c, Q, cases[k].id, 60000, tok);
        ck_assert_int_eq(dq_nack_reason(c, Q, cases[k].id, tok, 0,
                                        DQ_NACK_DEAD, cases[k].reason,
                                        cases[k].len),
                         1);
        dq_job_info *in = tu_must_get(c, Q, cases[k].id);
        reason_is(in, cases[k].reason ? cases[k].reason : "", cases[k].len);
        dq_job_info_free(in);
    }
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &jobs), 4);
    for (size_t i = 0; i < 4; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        size_t k = 0;
        while (strcmp(cases[k].id, dq_job_id(j)) != 0)
            k++;
        size_t len = 99;
        const char *e = dq_job_last_error(j, &len);
        ck_assert_ptr_nonnull(e);
        ck_assert_uint_eq(len, cases[k].len);
        ck_assert(len == 0 || memcmp(e, cases[k].reason, len) == 0);
        ck_assert_int_eq(e[len], '\0');
        ck_assert_int_gt(dq_job_failed_ms(j), 0);
    }
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* A poll that dead-letters a job for DQ_OPT_MAX_ATTEMPTS records "max
 * attempts" (replacing an earlier reason). */
START_TEST(reason_max_attempts) {
    dq_client *c = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 2);
    push_text(c, Q, "x", 0, "m1", 0, NULL);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "m1", 60000, tok);
    ck_assert_int_eq(dq_nack_reason(c, Q, "m1", tok, 0, 0, "flaky", 5), 0);
    take(c, Q, "m1", 1, tok); /* attempt 2, 1 ms lease: runs out */
    th_sleep_ms(30);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 60000, &jobs, NULL), 0);
    ck_stats(c, Q, 0, 0, 0, 1);
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &jobs), 1);
    ck_assert_str_eq(dq_job_last_error(dq_jobs_at(jobs, 0), NULL),
                     "max attempts");
    dq_jobs_free(jobs);
    dq_job_info *in = tu_must_get(c, Q, "m1");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
    ck_assert_int_eq(dq_job_info_attempts(in), 2);
    reason_is(in, "max attempts", 12);
    dq_job_info_free(in);
    /* its holder may still finish it: the ack deletes every field */
    ck_assert_int_eq(dq_ack(c, Q, "m1", tok), 0);
    redisContext *r = rconn();
    ck_assert_int_eq(has_reason_field(r, Q, "m1"), 0);
    ck_assert_int_eq(job_fields(r, Q), 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* Ack, cancel (in flight), purge and purge-all delete the reason with the
 * job: no field is left behind. */
START_TEST(reason_deleted_with_job) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    const char *ids[4] = {"k1", "k2", "k3", "k4"};
    char tok[4][DQ_TOKEN_BUF];
    for (int i = 0; i < 4; i++) {
        push_text(c, Q, "x", 0, ids[i], 0, NULL);
        take(c, Q, ids[i], 60000, tok[i]);
        ck_assert_int_eq(dq_nack_reason(c, Q, ids[i], tok[i], 0,
                                        i >= 2 ? DQ_NACK_DEAD : 0, "why", 3),
                         i >= 2);
        ck_assert_int_eq(has_reason_field(r, Q, ids[i]), 1);
        if (i < 2) /* held again, with its reason */
            take(c, Q, ids[i], 60000, tok[i]);
    }
    ck_assert_int_eq(dq_ack(c, Q, "k1", tok[0]), 0);
    ck_assert_int_eq(dq_cancel(c, Q, "k2", DQ_CANCEL_INFLIGHT),
                     DQ_CANCELED_INFLIGHT);
    ck_assert_int_eq(dq_dead_purge(c, Q, "k3"), 1);
    ck_assert_int_eq(dq_dead_purge(c, Q, NULL), 1);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(has_reason_field(r, Q, ids[i]), 0);
        must_miss(c, Q, ids[i]);
    }
    ck_assert_int_eq(job_fields(r, Q), 0);
    /* a pending job cancelled after a reason */
    push_text(c, Q, "x", 0, "k5", 0, NULL);
    take(c, Q, "k5", 60000, tok[0]);
    ck_assert_int_eq(dq_nack_reason(c, Q, "k5", tok[0], 60000, 0, "w", 1), 0);
    ck_assert_int_eq(dq_cancel(c, Q, "k5", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(job_fields(r, Q), 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A deep page: a partitioned queue asks each partition for offset + count
 * jobs (with their payloads, metas and reasons), more than one unpack in a
 * script takes; the script reads them in slices. */
START_TEST(list_deep_page) {
    dq_client *c = open_client();
    enum { N = 12000 };
    static const void *pl[N];
    static size_t lens[N];
    static int64_t delays[N];
    for (int i = 0; i < N; i++) {
        pl[i] = "x";
        lens[i] = 1;
        delays[i] = 60000 + i;
    }
    ck_assert_int_eq(dq_push_batch(c, Q, N, pl, lens, delays, NULL, 0, NULL,
                                   NULL),
                     N);
    dq_jobs *jobs = NULL;
    int rc = dq_list(c, Q, DQ_LIST_SCHEDULED, N - 10, 10, &jobs, NULL);
    ck_assert_msg(rc == 10, "dq_list: %d %s", rc, dq_errmsg(c));
    for (size_t i = 1; i < 10; i++)
        ck_assert_int_le(dq_job_due_ms(dq_jobs_at(jobs, i - 1)),
                         dq_job_due_ms(dq_jobs_at(jobs, i)));
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* ---- bad inputs: a code, a message, nothing sent, nothing changed -------- */

START_TEST(bad_inputs) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    push_text(c, Q, "x", 0, "h1", 0, NULL);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "h1", 60000, tok);
    dq_job_info *before = tu_must_get(c, Q, "h1");
    long long fields = job_fields(r, Q);
    char longq[DQ_QUEUE_MAX + 2], longid[DQ_ID_MAX + 2];
    memset(longq, 'q', sizeof(longq) - 1);
    longq[sizeof(longq) - 1] = '\0';
    memset(longid, 'i', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    static char toolong[DQ_REASON_MAX + 1];
    memset(toolong, 'r', sizeof(toolong));

    long long sent = client_commands(r);
    dq_job_info *in = (dq_job_info *)&in;
    ck_assert_int_eq(dq_get(NULL, Q, "h1", &in), DQ_ENULL);
    ck_assert_int_eq(dq_get(c, Q, "h1", NULL), DQ_ENULL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "out"));
    struct {
        const char *q, *id;
        int want;
        const char *names;
    } bad[] = {{NULL, "h1", DQ_ENULL, "queue"}, {"", "h1", DQ_EQUEUE, "queue"},
               {longq, "h1", DQ_EQUEUE, "queue"}, {Q, NULL, DQ_ENULL, "id"},
               {Q, "", DQ_EID, "id"}, {Q, longid, DQ_EID, "id"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        in = (dq_job_info *)&in;
        int rc = dq_get(c, bad[i].q, bad[i].id, &in);
        ck_assert_msg(rc == bad[i].want, "case %zu: %d (%s)", i, rc,
                      dq_errname(rc));
        ck_assert_int_eq(dq_errcode(c), bad[i].want);
        ck_assert_msg(strstr(dq_errmsg(c), bad[i].names) != NULL,
                      "case %zu: message '%s' does not name %s", i,
                      dq_errmsg(c), bad[i].names);
        ck_assert_ptr_null(in);
    }
    /* too long a reason: refused, not cut */
    ck_assert_int_eq(dq_nack_reason(c, Q, "h1", tok, 0, 0, toolong,
                                    sizeof(toolong)),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "reason is 1025 bytes"));
    ck_assert_int_eq(dq_nack_reason(c, Q, "h1", tok, 0, DQ_NACK_DEAD, NULL, 5),
                     DQ_ENULL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "reason"));
    /* the checks dq_nack makes come first, the same */
    ck_assert_int_eq(dq_nack_reason(c, Q, "h1", "x1", 0, 0, "r", 1),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_nack_reason(c, Q, "h1", tok, -1, 0, "r", 1),
                     DQ_EDELAY);
    ck_assert_int_eq(dq_nack_reason(c, Q, "h1", tok, 0, 8, "r", 1), DQ_EINVAL);
    ck_assert_int_eq(dq_nack_reason(c, "", "h1", tok, 0, 0, "r", 1), DQ_EQUEUE);
    ck_assert_int_eq(dq_nack_reason(c, Q, longid, tok, 0, 0, "r", 1), DQ_EID);
    ck_assert_int_eq(dq_nack_reason(NULL, Q, "h1", tok, 0, 0, "r", 1),
                     DQ_ENULL);
    ck_assert_int_eq(client_commands(r), sent); /* nothing reached Redis */

    /* nothing changed: the job is as it was and still its holder's */
    ck_assert_int_eq(job_fields(r, Q), fields);
    ck_assert_int_eq(has_reason_field(r, Q, "h1"), 0);
    dq_job_info *after = tu_must_get(c, Q, "h1");
    ck_assert_int_eq(dq_job_info_state(after), dq_job_info_state(before));
    ck_assert_int_eq(dq_job_info_due_ms(after), dq_job_info_due_ms(before));
    ck_assert_int_eq(dq_job_info_attempts(after),
                     dq_job_info_attempts(before));
    no_reason(after);
    dq_job_info_free(after);
    dq_job_info_free(before);
    /* the stale and unknown answers of nack, with a reason: nothing written */
    ck_assert_int_eq(dq_nack_reason(c, Q, "h1", "1", 0, 0, "r", 1), DQ_ESTALE);
    ck_assert_int_eq(dq_nack_reason(c, Q, "nobody", "1", 0, 0, "r", 1),
                     DQ_ENOTFOUND);
    ck_assert_int_eq(has_reason_field(r, Q, "h1"), 0);
    ck_assert_int_eq(has_reason_field(r, Q, "nobody"), 0);
    ck_assert_int_eq(job_fields(r, Q), fields);
    ck_assert_int_eq(dq_ack(c, Q, "h1", tok), 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* ---- two clients on one job ------------------------------------------------ */

enum { RACE_ROUNDS = 150 };

typedef struct racer {
    const char *q;
    pthread_barrier_t *bar;
    char id[32];
    char tok[DQ_TOKEN_BUF];
    int rc[RACE_ROUNDS];
    char err[256];
} racer;

/* Each round: after the barrier, nack the job with a reason. */
static void *nack_side(void *arg) {
    racer *x = arg;
    dq_client *c = NULL;
    if (dq_open(g_srv.uri, NULL, &c) != 0) {
        snprintf(x->err, sizeof(x->err), "open: %s", dq_errmsg(c));
        dq_close(c);
        return NULL;
    }
    for (int i = 0; i < RACE_ROUNDS; i++) {
        pthread_barrier_wait(&x->bar[0]);
        char reason[32];
        int n = snprintf(reason, sizeof(reason), "round %d", i);
        x->rc[i] = dq_nack_reason(c, x->q, x->id, x->tok, 0, DQ_NACK_DEAD,
                                  reason, (size_t)n);
        pthread_barrier_wait(&x->bar[1]);
    }
    dq_close(c);
    return NULL;
}

/* One client nacks a job (dead, with a reason) while the other looks it
 * up and acks it with the same token: exactly one of ack and nack wins; the
 * get sees the job whole (in flight without a reason, or dead with this
 * round's); an ack that won leaves no reason field behind, a nack that won
 * leaves the dead job with its reason, which the next round's replacing
 * push drops. */
START_TEST(race_nack_reason_ack_get) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    pthread_barrier_t bar[2];
    pthread_barrier_init(&bar[0], NULL, 2);
    pthread_barrier_init(&bar[1], NULL, 2);
    racer x;
    memset(&x, 0, sizeof(x));
    x.q = Q;
    x.bar = bar;
    snprintf(x.id, sizeof(x.id), "job");
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, nack_side, &x), 0);
    int acked = 0, nacked = 0;
    for (int i = 0; i < RACE_ROUNDS; i++) {
        push_text(c, Q, "x", 0, x.id, DQ_PUSH_REPLACE, NULL);
        ck_assert_int_eq(has_reason_field(r, Q, x.id), 0);
        take(c, Q, x.id, 60000, x.tok);
        char want[32];
        snprintf(want, sizeof(want), "round %d", i);
        pthread_barrier_wait(&bar[0]);
        dq_job_info *in = NULL;
        int g = dq_get(c, Q, x.id, &in);
        ck_assert_msg(g == 1, "get: %d %s", g, dq_errmsg(c));
        int st = dq_job_info_state(in);
        ck_assert_msg(st == DQ_JOB_INFLIGHT || st == DQ_JOB_DEAD,
                      "round %d: state %d", i, st);
        if (st == DQ_JOB_DEAD)
            reason_is(in, want, strlen(want));
        else
            no_reason(in);
        dq_job_info_free(in);
        int a = dq_ack(c, Q, x.id, x.tok);
        pthread_barrier_wait(&bar[1]);
        int n = x.rc[i];
        ck_assert_msg((a == 0 && n == DQ_ENOTFOUND) ||
                          (n == 1 && a == DQ_ESTALE),
                      "round %d: ack %d, nack %d", i, a, n);
        if (a == 0) {
            acked++;
            ck_assert_int_eq(has_reason_field(r, Q, x.id), 0);
            ck_assert_int_eq(job_fields(r, Q), 0);
        } else {
            nacked++;
            in = tu_must_get(c, Q, x.id);
            ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
            reason_is(in, want, strlen(want));
            dq_job_info_free(in);
        }
    }
    pthread_join(th, NULL);
    ck_assert_msg(x.err[0] == '\0', "%s", x.err);
    ck_assert_int_eq(acked + nacked, RACE_ROUNDS);
    dq_dead_purge(c, Q, NULL);
    ck_assert_int_eq(job_fields(r, Q), 0);
    pthread_barrier_destroy(&bar[0]);
    pthread_barrier_destroy(&bar[1]);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("lifecycle", TU_SRV_UNIX,
    {"get_every_state", get_every_state, 30, NULL},
    {"get_expired_lease", get_expired_lease, 30, NULL},
    {"reason_through_dead_list", reason_through_dead_list, 30, NULL},
    {"reason_binary", reason_binary, 30, NULL},
    {"reason_max_attempts", reason_max_attempts, 30, NULL},
    {"reason_deleted_with_job", reason_deleted_with_job, 30, NULL},
    {"list_deep_page", list_deep_page, 60, NULL},
    {"bad_inputs", bad_inputs, 30, NULL},
    {"race_nack_reason_ack_get", race_nack_reason_ack_get, 60, NULL})
