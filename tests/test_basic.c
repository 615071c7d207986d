/*
 * tests/test_basic.c - push, poll, ack, cancel, nack, extend and stats on
 * one client: the everyday round trips, against a real Redis.
 */
#include "test_suite.h"
#include "test_utils.h"

#include <ctype.h>

/* ---- push / poll / ack ------------------------------------------------- */

START_TEST(roundtrip_binary) {
    dq_client *c = open_client();
    static const char pl[] = {'a', '\0', 'b', '\0', '\xff', '\n', '\0', 'z'};
    char id[DQ_ID_BUF];
    int outcome = 0;
    ck_assert_int_eq(dq_push(c, Q, pl, sizeof(pl), 0, NULL, DQ_PUSH_KEEP, id,
                             sizeof(id), &outcome),
                     0);
    ck_assert_int_eq(outcome, DQ_PUSHED);
    ck_assert_str_eq(dq_errmsg(c), "");
    ck_assert_int_eq(dq_errcode(c), 0);

    dq_jobs *jobs = NULL;
    int64_t next = 12345;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 1);
    ck_assert_int_eq(next, 0);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_null(dq_jobs_at(jobs, 1));
    ck_assert_str_eq(dq_job_id(j), id);
    size_t len = 0;
    const char *got = dq_job_payload(j, &len);
    ck_assert_uint_eq(len, sizeof(pl));
    ck_assert_int_eq(memcmp(got, pl, sizeof(pl)), 0);
    ck_assert_int_eq(got[len], '\0'); /* documented trailing NUL */
    ck_assert_int_eq(dq_job_attempt(j), 1);
    ck_assert_str_ne(dq_job_token(j), "");
    ck_assert_int_gt(dq_job_due_ms(j), 0);
    /* lease deadline = claim time (server) + lease >= due + lease */
    ck_assert_int_ge(dq_job_lease_deadline_ms(j), dq_job_due_ms(j) + 5000);

    ck_assert_int_eq(dq_ack(c, Q, id, dq_job_token(j)), 0);
    dq_jobs_free(jobs);

    /* Gone: nothing to poll, the queue is empty, and no job data is left. */
    jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 0);
    ck_assert_int_eq(next, -1);
    ck_stats(c, Q, 0, 0, 0, 0);
    redisContext *r = rconn();
    char key[700];
    const char *kinds[] = {"due", "lease", "jobs", "meta", "dead"};
    for (int i = 0; i < 5; i++) {
        /* the key of the job's partition (the plain key on a plain run) */
        tu_key(key, sizeof(key), "dq", Q, kinds[i], id);
        ck_assert_msg(rint_(r, "EXISTS", key, NULL) == 0, "%s left behind", key);
        ck_assert_msg(tu_sum(r, "EXISTS", "dq", Q, kinds[i]) == 0,
                      "%s keys left behind", kinds[i]);
    }
    /* partitioned: the plain jobs hash keeps only the partition count */
    tu_assert_plain_clean(r, "dq", Q);
    redisFree(r);
    dq_close(c);
}
END_TEST

START_TEST(payload_empty) {
    dq_client *c = open_client();
    char id[DQ_ID_BUF];
    int outcome = 0;
    ck_assert_int_eq(
        dq_push(c, Q, NULL, 0, 0, NULL, 0, id, sizeof(id), &outcome), 0);
    ck_assert_int_eq(outcome, DQ_PUSHED);
    ck_assert_int_eq(dq_push(c, Q, "", 0, 0, "e2", 0, NULL, 0, NULL), 0);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, NULL), 2);
    for (size_t i = 0; i < 2; i++) {
        size_t len = 99;
        const char *p = dq_job_payload(dq_jobs_at(jobs, i), &len);
        ck_assert_uint_eq(len, 0);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(p[0], '\0');
        ck_assert_int_eq(dq_ack(c, Q, dq_job_id(dq_jobs_at(jobs, i)),
                                dq_job_token(dq_jobs_at(jobs, i))),
                         0);
    }
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* A payload of exactly the limit passes, one byte more is refused. */
static void check_limit(const char *queue, size_t limit, int set_option) {
    dq_client *c = set_option ? open_client_opt(DQ_OPT_MAX_PAYLOAD, (int64_t)limit)
                              : open_client();
    char *buf = malloc(limit + 1);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i <= limit; i++)
        buf[i] = (char)(i * 7 + 3); /* includes NUL bytes */
    char id[DQ_ID_BUF];
    ck_assert_int_eq(dq_push(c, queue, buf, limit, 0, NULL, 0, id, sizeof(id),
                             NULL),
                     0);
    int rc = dq_push(c, queue, buf, limit + 1, 0, "too-big", 0, NULL, 0, NULL);
    ck_assert_int_eq(rc, DQ_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "payload"));
    dq_jobs *jobs = poll_one(c, queue, 5000);
    size_t len = 0;
    const void *p = dq_job_payload(dq_jobs_at(jobs, 0), &len);
    ck_assert_uint_eq(len, limit);
    ck_assert_int_eq(memcmp(p, buf, limit), 0);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), id);
    dq_jobs_free(jobs);
    jobs = NULL;
    ck_assert_int_eq(poll_n(c, queue, 10, 5000, &jobs, NULL), 0);
    free(buf);
    dq_close(c);
}

START_TEST(payload_limit_option) { check_limit(Q, 100, 1); }
END_TEST

START_TEST(payload_limit_default) {
    check_limit(Q, DQ_DEFAULT_MAX_PAYLOAD, 0);
}
END_TEST

static int cmp_str(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

START_TEST(generated_ids_unique) {
    dq_client *c = open_client();
    enum { N = 10000 };
    char *ids = malloc((size_t)N * DQ_ID_BUF);
    ck_assert_ptr_nonnull(ids);
    /* 9,990 through the batch call, 10 one by one: both generators paths */
    size_t nb = N - 10;
    const void **pl = calloc(nb, sizeof(*pl));
    size_t *lens = calloc(nb, sizeof(*lens));
    ck_assert_int_eq(
        dq_push_batch(c, Q, nb, pl, lens, NULL, NULL, 0, ids, NULL), (int)nb);
    for (size_t i = nb; i < N; i++)
        push_text(c, Q, "x", 60000, NULL, 0, ids + i * DQ_ID_BUF);
    for (size_t i = 0; i < N; i++) {
        const char *id = ids + i * DQ_ID_BUF;
        ck_assert_uint_eq(strlen(id), 14);
        for (int k = 0; k < 14; k++)
            ck_assert_msg(isalnum((unsigned char)id[k]), "id %s", id);
    }
    qsort(ids, N, DQ_ID_BUF, cmp_str);
    for (size_t i = 1; i < N; i++)
        ck_assert_str_ne(ids + (i - 1) * DQ_ID_BUF, ids + i * DQ_ID_BUF);
    redisContext *r = rconn();
    ck_assert_int_eq(tu_job_fields(r, "dq", Q), N);
    redisFree(r);
    free(ids);
    free(pl);
    free(lens);
    dq_close(c);
}
END_TEST

/* A client used in a forked child (the parent waiting meanwhile) must not
 * repeat the ids its parent generates after the fork: both start from the
 * same generator state. */
START_TEST(generated_ids_after_fork) {
    enum { N = 500 };
    dq_client *c = open_client();
    push_text(c, Q, "warm", 60000, NULL, 0, NULL);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        for (int i = 0; i < N; i++) {
            char id[DQ_ID_BUF];
            if (dq_push(c, Q, "c", 1, 60000, NULL, 0, id, sizeof(id), NULL) != 0)
                _exit(2);
            id[14] = '\n';
            if (write(fds[1], id, 15) != 15)
                _exit(3);
        }
        _exit(0);
    }
    close(fds[1]);
    static char child_ids[N][DQ_ID_BUF];
    FILE *f = fdopen(fds[0], "r");
    int n = 0;
    while (n < N && fscanf(f, "%14s", child_ids[n]) == 1)
        n++;
    fclose(f);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d",
                  status);
    ck_assert_int_eq(n, N);
    for (int i = 0; i < N; i++) {
        char id[DQ_ID_BUF];
        int outcome = 0;
        ck_assert_int_eq(
            dq_push(c, Q, "p", 1, 60000, NULL, 0, id, sizeof(id), &outcome), 0);
        ck_assert_int_eq(outcome, DQ_PUSHED);
        for (int k = 0; k < N; k++)
            if (strcmp(id, child_ids[k]) == 0)
                ck_abort_msg("parent repeated the child's id %s", id);
    }
    ck_stats(c, Q, 1 + 2 * N, 0, 0, 0);
    dq_close(c);
}
END_TEST

/* ---- caller ids: keep / replace ---------------------------------------- */

START_TEST(keep_existing) {
    dq_client *c = open_client();
    char id[DQ_ID_BUF];
    ck_assert_int_eq(push_text(c, Q, "first", 300, "order-1", DQ_PUSH_KEEP, id),
                     DQ_PUSHED);
    ck_assert_str_eq(id, "order-1");
    /* Same id again, due now: kept untouched (payload and due time). */
    ck_assert_int_eq(push_text(c, Q, "second", 0, "order-1", DQ_PUSH_KEEP, id),
                     DQ_KEPT);
    ck_assert_str_eq(id, "order-1");
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 0);
    ck_assert_msg(next > 0 && next <= 300, "next %" PRId64, next);
    ck_stats(c, Q, 1, 0, 0, 0);
    jobs = poll_until(c, Q, 10, 5000, 3000);
    ck_assert_ptr_nonnull(jobs);
    ck_assert_uint_eq(dq_jobs_count(jobs), 1);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "first");
    /* Keep on an in-flight job: the holder is not disturbed. */
    ck_assert_int_eq(push_text(c, Q, "third", 0, "order-1", DQ_PUSH_KEEP, NULL),
                     DQ_KEPT);
    ck_assert_int_eq(dq_ack(c, Q, "order-1", dq_job_token(dq_jobs_at(jobs, 0))),
                     0);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(replace_later) {
    dq_client *c = open_client();
    ck_assert_int_eq(push_text(c, Q, "v1", 0, "sess-77", DQ_PUSH_REPLACE, NULL),
                     DQ_PUSHED);
    ck_assert_int_eq(
        push_text(c, Q, "v2", 60000, "sess-77", DQ_PUSH_REPLACE, NULL),
        DQ_REPLACED);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 0);
    ck_assert_msg(next > 59000 && next <= 60000, "next %" PRId64, next);
    ck_stats(c, Q, 1, 0, 0, 0);
    dq_close(c);
}
END_TEST

START_TEST(replace_earlier) {
    dq_client *c = open_client();
    ck_assert_int_eq(push_text(c, Q, "v1", 60000, "sess-1", 0, NULL), DQ_PUSHED);
    ck_assert_int_eq(push_text(c, Q, "v2", 0, "sess-1", DQ_PUSH_REPLACE, NULL),
                     DQ_REPLACED);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "sess-1");
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "v2");
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 1);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(replace_inflight) {
    dq_client *c = open_client();
    push_text(c, Q, "v1", 0, "job", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 5000);
    const char *tok1 = dq_job_token(dq_jobs_at(held, 0));
    ck_assert_int_eq(push_text(c, Q, "v2", 0, "job", DQ_PUSH_REPLACE, NULL),
                     DQ_REPLACED);
    /* The holder's token went stale: ack, nack and extend are refused. */
    ck_assert_int_eq(dq_ack(c, Q, "job", tok1), DQ_ESTALE);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "job"));
    ck_assert_int_eq(dq_extend(c, Q, "job", tok1, 1000, NULL), DQ_ESTALE);
    ck_assert_int_eq(dq_nack(c, Q, "job", tok1, 0, 0), DQ_ESTALE);
    /* The replacement is due now, with attempts reset. */
    dq_jobs *jobs = poll_one(c, Q, 5000);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_str_eq(dq_job_payload(j, NULL), "v2");
    ck_assert_int_eq(dq_job_attempt(j), 1);
    ck_assert_str_ne(dq_job_token(j), tok1);
    ck_assert_int_eq(dq_ack(c, Q, "job", tok1), DQ_ESTALE);
    ck_assert_int_eq(dq_ack(c, Q, "job", dq_job_token(j)), 0);
    dq_jobs_free(jobs);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

START_TEST(replace_dead_revives) {
    dq_client *c = open_client();
    push_text(c, Q, "v1", 0, "dj", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_nack(c, Q, "dj", dq_job_token(dq_jobs_at(held, 0)), 0,
                             DQ_NACK_DEAD),
                     1);
    dq_jobs_free(held);
    ck_stats(c, Q, 0, 0, 0, 1);
    /* Keep leaves the dead job dead... */
    ck_assert_int_eq(push_text(c, Q, "v2", 0, "dj", DQ_PUSH_KEEP, NULL), DQ_KEPT);
    ck_stats(c, Q, 0, 0, 0, 1);
    /* ...replace revives it. */
    ck_assert_int_eq(push_text(c, Q, "v3", 0, "dj", DQ_PUSH_REPLACE, NULL),
                     DQ_REPLACED);
    ck_stats(c, Q, 0, 1, 0, 0);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "v3");
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 1);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(id_out_forms) {
    dq_client *c = open_client();
    char small[15];
    /* A generated id needs 15 bytes; a caller id strlen+1. */
    ck_assert_int_eq(dq_push(c, Q, "a", 1, 0, NULL, 0, small, sizeof(small), NULL),
                     0);
    ck_assert_int_eq(dq_push(c, Q, "a", 1, 0, NULL, 0, small, 14, NULL),
                     DQ_EINVAL);
    ck_assert_uint_eq(strlen(small), 14);
    ck_assert_int_eq(dq_push(c, Q, "a", 1, 0, "abc", 0, small, 4, NULL), 0);
    ck_assert_str_eq(small, "abc");
    /* NULL id_out and NULL outcome are fine. */
    ck_assert_int_eq(dq_push(c, Q, "a", 1, 0, NULL, 0, NULL, 0, NULL), 0);
    char max_id[DQ_ID_MAX + 1];
    memset(max_id, 'i', DQ_ID_MAX);
    max_id[DQ_ID_MAX] = '\0';
    char out[DQ_ID_BUF];
    ck_assert_int_eq(push_text(c, Q, "m", 0, max_id, 0, out), DQ_PUSHED);
    ck_assert_str_eq(out, max_id);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, NULL), 4);
    int found = 0;
    for (size_t i = 0; i < 4; i++)
        found += strcmp(dq_job_id(dq_jobs_at(jobs, i)), max_id) == 0;
    ck_assert_int_eq(found, 1);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* ---- absolute times ------------------------------------------------------ */

START_TEST(push_at_past_is_due) {
    dq_client *c = open_client();
    char id[DQ_ID_BUF];
    ck_assert_int_eq(dq_push_at(c, Q, "p", 1, 1000, NULL, 0, id, sizeof(id), NULL),
                     0);
    /* Oldest due first holds within a partition (a poll visits partitions
     * in turn): on a partitioned run "zero" goes where the generated id
     * went. */
    char zero[64];
    tu_id_in(zero, sizeof(zero), "zero", tu_part_of(id, tu_parts()));
    ck_assert_int_eq(dq_push_at(c, Q, "z", 1, 0, zero, 0, NULL, 0, NULL), 0);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, NULL), 2);
    /* oldest due first: at 0, then at 1000 */
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), zero);
    ck_assert_int_eq(dq_job_due_ms(dq_jobs_at(jobs, 0)), 0);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 1)), id);
    ck_assert_int_eq(dq_job_due_ms(dq_jobs_at(jobs, 1)), 1000);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(poll_order_and_max) {
    dq_client *c = open_client();
    /* Pushed out of order with absolute times in the past.  The order is
     * the order of one partition (a poll visits partitions in turn): on a
     * partitioned run ids t1..t5 all hash to partition 0, so the order is
     * still checked. */
    const int64_t at[5] = {5000, 1000, 4000, 2000, 3000};
    char t[6][32]; /* t[k]: the id of the job due at k s */
    for (int k = 1; k <= 5; k++) {
        char base[8];
        snprintf(base, sizeof(base), "t%d", k);
        tu_id_in(t[k], sizeof(t[k]), base, 0);
    }
    for (int i = 0; i < 5; i++) {
        const char *id = t[at[i] / 1000];
        ck_assert_int_eq(dq_push_at(c, Q, id, strlen(id), at[i], id, 0, NULL, 0,
                                    NULL),
                         0);
    }
    dq_jobs *jobs = NULL;
    int64_t next = -5;
    ck_assert_int_eq(poll_n(c, Q, 2, 5000, &jobs, &next), 2);
    ck_assert_int_eq(next, 0);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), t[1]);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 1)), t[2]);
    dq_jobs_free(jobs);
    ck_assert_int_eq(poll_n(c, Q, 1000, 5000, &jobs, &next), 3);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), t[3]);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 1)), t[4]);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 2)), t[5]);
    ck_assert_int_eq(next, 0);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(poll_next_due) {
    dq_client *c = open_client();
    dq_jobs *jobs = (dq_jobs *)&jobs; /* must be reset to NULL */
    int64_t next = 0;
    ck_assert_int_eq(dq_poll(c, Q, 1, 1000, &jobs, &next), 0);
    ck_assert_ptr_null(jobs);
    ck_assert_int_eq(next, -1);
    push_text(c, Q, "later", 500, NULL, 0, NULL);
    ck_assert_int_eq(poll_n(c, Q, 1, 1000, &jobs, &next), 0);
    ck_assert_msg(next >= 1 && next <= 500, "next %" PRId64, next);
    push_text(c, Q, "later2", 2000, NULL, 0, NULL);
    ck_assert_int_eq(poll_n(c, Q, 1, 1000, &jobs, &next), 0);
    ck_assert_msg(next >= 1 && next <= 500, "next %" PRId64, next);
    /* next_due may be NULL */
    ck_assert_int_eq(dq_poll(c, Q, 1, 1000, &jobs, NULL), 0);
    /* An in-flight job counts: next due = its lease deadline. */
    dq_close(c);
    c = open_client();
    char q2[64];
    snprintf(q2, sizeof(q2), "%s-2", Q);
    push_text(c, q2, "x", 0, NULL, 0, NULL);
    dq_jobs *held = poll_one(c, q2, 800);
    ck_assert_int_eq(poll_n(c, q2, 1, 1000, &jobs, &next), 0);
    ck_assert_msg(next >= 1 && next <= 800, "next %" PRId64, next);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

/* ---- cancel -------------------------------------------------------------- */

START_TEST(cancel_pending) {
    dq_client *c = open_client();
    push_text(c, Q, "close order 1042", 200, "order-1042", 0, NULL);
    ck_assert_int_eq(dq_cancel(c, Q, "order-1042", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(dq_cancel(c, Q, "order-1042", 0), 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    th_sleep_ms(300);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 1000, &jobs, &next), 0);
    ck_assert_int_eq(next, -1);
    /* A due (not yet delivered) job is pending too. */
    push_text(c, Q, "due now", 0, "d", 0, NULL);
    ck_assert_int_eq(dq_cancel(c, Q, "d", DQ_CANCEL_INFLIGHT), DQ_CANCELED_PENDING);
    ck_assert_int_eq(poll_n(c, Q, 10, 1000, &jobs, &next), 0);
    redisContext *r = rconn();
    ck_assert_int_eq(tu_sum(r, "EXISTS", "dq", Q, "jobs"), 0);
    tu_assert_plain_clean(r, "dq", Q);
    redisFree(r);
    dq_close(c);
}
END_TEST

START_TEST(cancel_inflight_busy) {
    dq_client *c = open_client();
    push_text(c, Q, "p", 0, "busy", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_cancel(c, Q, "busy", 0), DQ_CANCEL_BUSY);
    ck_stats(c, Q, 0, 0, 1, 0);
    /* left alone: the holder still finishes it */
    ck_assert_int_eq(dq_ack(c, Q, "busy", dq_job_token(dq_jobs_at(held, 0))), 0);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

START_TEST(cancel_inflight_flag) {
    dq_client *c = open_client();
    push_text(c, Q, "p", 0, "gone", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 300);
    const char *tok = dq_job_token(dq_jobs_at(held, 0));
    ck_assert_int_eq(dq_cancel(c, Q, "gone", DQ_CANCEL_INFLIGHT),
                     DQ_CANCELED_INFLIGHT);
    ck_stats(c, Q, 0, 0, 0, 0);
    /* The holder can no longer finish it: the job no longer exists. */
    ck_assert_int_eq(dq_ack(c, Q, "gone", tok), DQ_ENOTFOUND);
    ck_assert_int_eq(dq_nack(c, Q, "gone", tok, 0, 0), DQ_ENOTFOUND);
    ck_assert_int_eq(dq_extend(c, Q, "gone", tok, 1000, NULL), DQ_ENOTFOUND);
    /* ...and it is never delivered again, even after its lease. */
    th_sleep_ms(400);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 1000, &jobs, &next), 0);
    ck_assert_int_eq(next, -1);
    ck_assert_int_eq(dq_cancel(c, Q, "gone", DQ_CANCEL_INFLIGHT), 0);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

START_TEST(cancel_unknown_and_dead) {
    dq_client *c = open_client();
    ck_assert_int_eq(dq_cancel(c, Q, "nobody", 0), 0);
    ck_assert_int_eq(dq_cancel(c, Q, "nobody", DQ_CANCEL_INFLIGHT), 0);
    push_text(c, Q, "p", 0, "dead-one", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_nack(c, Q, "dead-one", dq_job_token(dq_jobs_at(held, 0)),
                             0, DQ_NACK_DEAD),
                     1);
    dq_jobs_free(held);
    /* dead jobs are untouched by cancel */
    ck_assert_int_eq(dq_cancel(c, Q, "dead-one", DQ_CANCEL_INFLIGHT), 0);
    ck_stats(c, Q, 0, 0, 0, 1);
    dq_close(c);
}
END_TEST

START_TEST(ack_unknown) {
    dq_client *c = open_client();
    ck_assert_int_eq(dq_ack(c, Q, "no-such-job", "1"), DQ_ENOTFOUND);
    ck_assert_int_eq(dq_errcode(c), DQ_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "no-such-job"));
    /* a later success clears the error */
    ck_stats(c, Q, 0, 0, 0, 0);
    ck_assert_int_eq(dq_errcode(c), 0);
    ck_assert_str_eq(dq_errmsg(c), "");
    ck_assert_int_eq(dq_nack(c, Q, "no-such-job", "1", 0, 0), DQ_ENOTFOUND);
    ck_assert_int_eq(dq_extend(c, Q, "no-such-job", "1", 100, NULL), DQ_ENOTFOUND);
    dq_close(c);
}
END_TEST

/* ---- nack / extend ------------------------------------------------------- */

START_TEST(nack_delay) {
    dq_client *c = open_client();
    push_text(c, Q, "retry me", 0, "n1", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 5000);
    const char *tok = dq_job_token(dq_jobs_at(held, 0));
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(dq_nack(c, Q, "n1", tok, 300, 0), 0);
    ck_assert_int_eq(dq_ack(c, Q, "n1", tok), DQ_ESTALE); /* released */
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, &next), 0);
    ck_assert_msg(next >= 1 && next <= 300, "next %" PRId64, next);
    ck_stats(c, Q, 1, 0, 0, 0);
    jobs = poll_until(c, Q, 10, 5000, 3000);
    int64_t waited = th_mono_ms() - t0;
    ck_assert_ptr_nonnull(jobs);
    ck_assert_msg(waited >= 250, "redelivered after %" PRId64 " ms", waited);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_str_eq(dq_job_payload(j, NULL), "retry me");
    ck_assert_int_eq(dq_job_attempt(j), 2); /* attempts kept, +1 */
    ck_assert_str_ne(dq_job_token(j), tok);
    /* nack with 0 delay: due again at once */
    ck_assert_int_eq(dq_nack(c, Q, "n1", dq_job_token(j), 0, 0), 0);
    dq_jobs_free(jobs);
    jobs = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 3);
    ck_assert_int_eq(dq_ack(c, Q, "n1", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

START_TEST(nack_dead) {
    dq_client *c = open_client();
    push_text(c, Q, "poison", 0, "bad", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_nack(c, Q, "bad", dq_job_token(dq_jobs_at(held, 0)),
                             60000, DQ_NACK_DEAD),
                     1);
    ck_stats(c, Q, 0, 0, 0, 1);
    dq_jobs *dead = NULL;
    ck_assert_int_eq(dq_dead_list(c, Q, 0, 10, &dead), 1);
    const dq_job *d = dq_jobs_at(dead, 0);
    ck_assert_str_eq(dq_job_id(d), "bad");
    ck_assert_str_eq(dq_job_payload(d, NULL), "poison");
    ck_assert_int_eq(dq_job_attempt(d), 1);
    ck_assert_str_eq(dq_job_token(d), "");
    ck_assert_int_eq(dq_job_lease_deadline_ms(d), 0);
    ck_assert_int_ge(dq_job_due_ms(d), dq_job_due_ms(dq_jobs_at(held, 0)));
    ck_assert_int_eq(dq_ack(c, Q, "bad", dq_job_token(dq_jobs_at(held, 0))),
                     DQ_ESTALE);
    dq_jobs_free(dead);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

START_TEST(extend_lease) {
    dq_client *c = open_client();
    dq_client *other = open_client();
    push_text(c, Q, "long job", 0, "long", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 300);
    const dq_job *j = dq_jobs_at(held, 0);
    int64_t deadline = 0;
    ck_assert_int_eq(dq_extend(c, Q, "long", dq_job_token(j), 1500, &deadline), 0);
    ck_assert_int_ge(deadline, dq_job_lease_deadline_ms(j) + 1000);
    ck_assert_int_le(deadline, dq_job_lease_deadline_ms(j) + 1500 + 1000);
    /* Past the original lease: nobody else gets it. */
    th_sleep_ms(600);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(other, Q, 10, 1000, &jobs, &next), 0);
    ck_assert_msg(next > 0 && next <= 1000, "next %" PRId64, next);
    ck_stats(other, Q, 0, 0, 1, 0);
    /* extend with NULL deadline_ms */
    ck_assert_int_eq(dq_extend(c, Q, "long", dq_job_token(j), 200, NULL), 0);
    /* Let the lease run out and another consumer claim it: the old token
     * is stale for extend and ack. */
    jobs = poll_until(other, Q, 10, 5000, 3000);
    ck_assert_ptr_nonnull(jobs);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 2);
    ck_assert_int_eq(dq_extend(c, Q, "long", dq_job_token(j), 1000, &deadline),
                     DQ_ESTALE);
    ck_assert_int_eq(dq_ack(c, Q, "long", dq_job_token(j)), DQ_ESTALE);
    ck_assert_int_eq(
        dq_ack(other, Q, "long", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    dq_jobs_free(held);
    dq_close(other);
    dq_close(c);
}
END_TEST

/* ---- stats ---------------------------------------------------------------- */

START_TEST(stats_counts) {
    dq_client *c = open_client();
    int64_t s[5];
    stats5(c, Q, s);
    ck_assert_msg(s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 && s[4] == -1,
                  "empty stats");
    /* one dead */
    push_text(c, Q, "a", 0, "A", 0, NULL);
    dq_jobs *a = poll_one(c, Q, 60000);
    ck_assert_int_eq(dq_nack(c, Q, "A", dq_job_token(dq_jobs_at(a, 0)), 0,
                             DQ_NACK_DEAD),
                     1);
    /* one in flight */
    push_text(c, Q, "b", 0, "B", 0, NULL);
    dq_jobs *b = poll_one(c, Q, 60000);
    /* three due, two scheduled */
    push_text(c, Q, "c", 0, "C", 0, NULL);
    push_text(c, Q, "d", 0, "D", 0, NULL);
    push_text(c, Q, "e", 0, "E", 0, NULL);
    push_text(c, Q, "f", 60000, "F", 0, NULL);
    push_text(c, Q, "g", 120000, "G", 0, NULL);
    stats5(c, Q, s);
    ck_assert_int_eq(s[0], 2);
    ck_assert_int_eq(s[1], 3);
    ck_assert_int_eq(s[2], 1);
    ck_assert_int_eq(s[3], 1);
    ck_assert_int_eq(s[4], 0);
    /* NULL outputs are allowed */
    ck_assert_int_eq(dq_stats(c, Q, NULL, NULL, NULL, NULL, NULL), 0);
    /* take the due ones: next due is F's */
    dq_jobs *due = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 60000, &due, NULL), 3);
    stats5(c, Q, s);
    ck_assert_int_eq(s[0], 2);
    ck_assert_int_eq(s[1], 0);
    ck_assert_int_eq(s[2], 4);
    ck_assert_msg(s[4] > 59000 && s[4] <= 60000, "next %" PRId64, s[4]);
    dq_jobs_free(due);
    dq_jobs_free(a);
    dq_jobs_free(b);
    dq_close(c);
}
END_TEST

START_TEST(stats_expired_lease_is_due) {
    dq_client *c = open_client();
    push_text(c, Q, "x", 0, "x", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 200);
    ck_stats(c, Q, 0, 0, 1, 0);
    th_sleep_ms(300);
    int64_t s[5];
    stats5(c, Q, s);
    ck_assert_int_eq(s[1], 1);
    ck_assert_int_eq(s[2], 0);
    ck_assert_int_eq(s[4], 0);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

/* stats' next_due_ms is about pending jobs (scheduled or due, expired
 * leases included): "ms until the earliest pending job is due (0 if one is
 * due, -1 if none is pending)".  A job in flight under a valid lease is not
 * pending. */
START_TEST(stats_next_due_ignores_inflight) {
    dq_client *c = open_client();
    push_text(c, Q, "x", 0, "x", 0, NULL);
    dq_jobs *held = poll_one(c, Q, 5000);
    int64_t s[5];
    stats5(c, Q, s);
    ck_assert_int_eq(s[2], 1);
    ck_assert_msg(s[4] == -1,
                  "only a job in flight (lease 5 s): next_due_ms %" PRId64
                  ", header says -1 (none pending)",
                  s[4]);
    push_text(c, Q, "y", 30000, "y", 0, NULL);
    stats5(c, Q, s);
    ck_assert_msg(s[4] > 29000 && s[4] <= 30000,
                  "pending job due in 30 s, lease ends in 5 s: next_due_ms "
                  "%" PRId64,
                  s[4]);
    dq_jobs_free(held);
    dq_close(c);
}
END_TEST

/* ---- job objects ----------------------------------------------------------- */

START_TEST(job_dup_outlives_list) {
    dq_client *c = open_client();
    static const char pl[] = {'x', '\0', 'y'};
    ck_assert_int_eq(dq_push(c, Q, pl, 3, 0, "dup", 0, NULL, 0, NULL), 0);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    const dq_job *orig = dq_jobs_at(jobs, 0);
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", dq_job_token(orig));
    int64_t due = dq_job_due_ms(orig), dl = dq_job_lease_deadline_ms(orig);
    dq_job *copy = dq_job_dup(orig);
    ck_assert_ptr_nonnull(copy);
    dq_jobs_free(jobs);
    ck_assert_str_eq(dq_job_id(copy), "dup");
    size_t len = 0;
    const char *p = dq_job_payload(copy, &len);
    ck_assert_uint_eq(len, 3);
    ck_assert_int_eq(memcmp(p, pl, 3), 0);
    ck_assert_int_eq(p[3], '\0');
    ck_assert_int_eq(dq_job_attempt(copy), 1);
    ck_assert_int_eq(dq_job_due_ms(copy), due);
    ck_assert_int_eq(dq_job_lease_deadline_ms(copy), dl);
    ck_assert_str_eq(dq_job_token(copy), tok);
    dq_job *copy2 = dq_job_dup(copy);
    dq_job_free(copy);
    ck_assert_int_eq(dq_ack(c, Q, dq_job_id(copy2), dq_job_token(copy2)), 0);
    dq_job_free(copy2);
    ck_assert_ptr_null(dq_job_dup(NULL));
    dq_close(c);
}
END_TEST

TEST_SUITE("basic", TU_SRV_UNIX,
    {"roundtrip", roundtrip_binary, 30, NULL},
    {"payload_empty", payload_empty, 30, NULL},
    {"payload_limit_option", payload_limit_option, 30, NULL},
    {"payload_limit_default", payload_limit_default, 30, NULL},
    {"generated_ids", generated_ids_unique, 30, NULL},
    {"generated_ids_fork", generated_ids_after_fork, 30, NULL},
    {"keep", keep_existing, 30, NULL},
    {"replace_later", replace_later, 30, NULL},
    {"replace_earlier", replace_earlier, 30, NULL},
    {"replace_inflight", replace_inflight, 30, NULL},
    {"replace_dead", replace_dead_revives, 30, NULL},
    {"id_out", id_out_forms, 30, NULL},
    {"push_at_past", push_at_past_is_due, 30, NULL},
    {"poll_order", poll_order_and_max, 30, NULL},
    {"poll_next_due", poll_next_due, 30, NULL},
    {"cancel_pending", cancel_pending, 30, NULL},
    {"cancel_inflight_busy", cancel_inflight_busy, 30, NULL},
    {"cancel_inflight_flag", cancel_inflight_flag, 30, NULL},
    {"cancel_unknown", cancel_unknown_and_dead, 30, NULL},
    {"ack_unknown", ack_unknown, 30, NULL},
    {"nack_delay", nack_delay, 30, NULL},
    {"nack_dead", nack_dead, 30, NULL},
    {"extend", extend_lease, 30, NULL},
    {"stats", stats_counts, 30, NULL},
    {"stats_expired", stats_expired_lease_is_due, 30, NULL},
    {"stats_next_due_inflight", stats_next_due_ignores_inflight, 30, NULL},
    {"job_dup", job_dup_outlives_list, 30, NULL})
