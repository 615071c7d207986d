/*
 * tests/async/test_async_settings.c - the async twins of the queue
 * settings and push options: dq_async_config_set/get (round trip, unset,
 * bad input, half a rate limit too, refused at once without a callback)
 * and dq_async_push_ex (a job's own max attempts,
 * an expiry, DQ_PUSH_AT), seen through the sync client; and
 * dq_async_group_stats (counts per tenant group, jobs in flight per
 * group without a limit, bad input refused at once); dq_async_extend of
 * a lease that ran out under a full limit on jobs in flight.
 */
#include "test_async.h"

/* dq_config_cb: the values (a get) into r->s[], the count into r->n. */
static void conf_rec(dq_async *a, size_t n, const int64_t *values,
                     int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->n = n;
    r->v = values != NULL; /* whether values came */
    for (size_t i = 0; values != NULL && i < n && i < 5; i++)
        r->s[i] = values[i];
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

START_TEST(async_config) {
    dq_async *a = aopen();
    int s[3] = {DQ_SET_MAX_ATTEMPTS, DQ_SET_LEASE_MS, DQ_SET_EXPIRED};
    int64_t v[3] = {3, 2500, DQ_EXPIRED_DROP};
    res g0 = {0}, st = {0}, g1 = {0};
    ck_assert_int_eq(dq_async_config_get(a, Q, 3, s, conf_rec, &g0), 0);
    WAIT_CB(g0, 0);
    ck_assert_int_eq(g0.v, 1);
    ck_assert_uint_eq(g0.n, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(g0.s[i], DQ_UNSET);
    ck_assert_int_eq(dq_async_config_set(a, Q, 3, s, v, conf_rec, &st), 0);
    WAIT_CB(st, 0);
    ck_assert_int_eq(st.v, 0); /* a set: values NULL */
    ck_assert_int_eq(dq_async_config_get(a, Q, 3, s, conf_rec, &g1), 0);
    WAIT_CB(g1, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(g1.s[i], v[i]);
    /* the sync client sees the same */
    dq_client *c = open_client();
    int64_t got[3];
    ck_assert_int_eq(dq_config_get(c, Q, 3, s, got), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(got[i], v[i]);
    /* unset one */
    res st2 = {0}, g2 = {0};
    int64_t un = DQ_UNSET;
    ck_assert_int_eq(dq_async_config_set(a, Q, 1, &s[1], &un, conf_rec, &st2),
                     0);
    WAIT_CB(st2, 0);
    ck_assert_int_eq(dq_async_config_get(a, Q, 3, s, conf_rec, &g2), 0);
    WAIT_CB(g2, 0);
    ck_assert_int_eq(g2.s[0], 3);
    ck_assert_int_eq(g2.s[1], DQ_UNSET);
    ck_assert_int_eq(g2.s[2], DQ_EXPIRED_DROP);
    /* half a rate limit: refused at once, no callback */
    res half = {0};
    int rs = DQ_SET_RATE_MAX;
    int64_t rv = 10 * tu_parts();
    ck_assert_int_eq(dq_async_config_set(a, Q, 1, &rs, &rv, conf_rec, &half),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_async_errmsg(a), "together"));
    ck_assert_int_eq(dq_config_get(c, Q, 1, &rs, got), 0);
    ck_assert_int_eq(got[0], DQ_UNSET);
    /* bad input: refused at once, no callback */
    res bad = {0};
    int unknown = 99, dup[2] = {1, 1};
    int64_t big = DQ_ATTEMPTS_MAX + 1, two[2] = {1, 1};
    ck_assert_int_eq(dq_async_config_set(a, Q, 1, &s[0], &big, conf_rec, &bad),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_async_errmsg(a), "max_attempts"));
    ck_assert_int_eq(
        dq_async_config_set(a, Q, 1, &unknown, &v[0], conf_rec, &bad),
        DQ_EINVAL);
    ck_assert_int_eq(dq_async_config_set(a, Q, 2, dup, two, conf_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_config_set(a, Q, 0, s, v, conf_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_config_set(a, Q, 1, s, NULL, conf_rec, &bad),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_config_set(a, Q, 1, NULL, v, conf_rec, &bad),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_config_get(a, Q, 1, NULL, conf_rec, &bad),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_config_get(a, Q, 1, &unknown, conf_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_config_get(a, "", 1, s, conf_rec, &bad),
                     DQ_EQUEUE);
    ck_assert_int_eq(dq_async_config_get(NULL, Q, 1, s, conf_rec, &bad),
                     DQ_ENULL);
    run_for(50);
    ck_assert_int_eq(bad.calls, 0);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

START_TEST(async_push_ex) {
    dq_async *a = aopen();
    dq_client *c = open_client();
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, 1), 0);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_IN_MS, 60000), 0);
    res p1 = {0}, p2 = {0}, p3 = {0}, p4 = {0};
    /* a job with its own max attempts 1 (and an expiry far ahead) */
    ck_assert_int_eq(dq_async_push_ex(a, Q, "x", 1, 0, "m1", 0, o, push_rec,
                                      &p1),
                     0);
    WAIT_CB(p1, 0);
    ck_assert_int_eq(p1.outcome, DQ_PUSHED);
    ck_assert_str_eq(p1.id, "m1");
    /* an absolute expiry soon, due now (DQ_PUSH_AT) */
    redisContext *r = rconn();
    int64_t now = server_ms(r);
    dq_push_opts *oe = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(oe, DQ_PUSHOPT_EXPIRE_AT, now + 50), 0);
    ck_assert_int_eq(dq_async_push_ex(a, Q, "x", 1, now, "x1", DQ_PUSH_AT, oe,
                                      push_rec, &p2),
                     0);
    WAIT_CB(p2, 0);
    ck_assert_int_eq(p2.outcome, DQ_PUSHED);
    /* NULL options: a plain push, keep mode */
    ck_assert_int_eq(dq_async_push_ex(a, Q, "x", 1, 0, "x1", DQ_PUSH_KEEP,
                                      NULL, push_rec, &p3),
                     0);
    WAIT_CB(p3, 0);
    ck_assert_int_eq(p3.outcome, DQ_KEPT);
    /* an expiry before the due time: refused at once, no callback */
    ck_assert_int_eq(dq_async_push_ex(a, Q, "x", 1, now + 60000, "bad",
                                      DQ_PUSH_AT, oe, push_rec, &p4),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_async_errmsg(a), "expires"));
    run_for(20);
    ck_assert_int_eq(p4.calls, 0);
    th_sleep_ms(100);
    /* x1 expired: dead-lettered; m1 delivered once, then its lease runs
     * out and the next poll dead-letters it for max attempts */
    res pl = {0};
    ck_assert_int_eq(dq_async_poll(a, Q, 10, 1, jobs_rec, &pl), 0);
    WAIT_CB(pl, pl.status);
    int delivered = (int)pl.n;
    for (int i = 0; i < 8 && delivered == 0; i++) {
        res_clear(&pl);
        ck_assert_int_eq(dq_async_poll(a, Q, 10, 1, jobs_rec, &pl), 0);
        WAIT_CB(pl, pl.status);
        delivered = (int)pl.n;
    }
    ck_assert_int_eq(delivered, 1);
    ck_assert_str_eq(dq_job_id(kept(&pl, 0)), "m1");
    res_clear(&pl);
    th_sleep_ms(5);
    for (int i = 0; i < 4; i++) {
        res q = {0};
        ck_assert_int_eq(dq_async_poll(a, Q, 10, 30000, jobs_rec, &q), 0);
        WAIT_CB(q, 0);
        res_clear(&q);
    }
    const char *ids[2] = {"x1", "m1"}, *why[2] = {"expired", "max attempts"};
    for (int i = 0; i < 2; i++) {
        dq_job_info *in = NULL;
        ck_assert_int_eq(dq_get(c, Q, ids[i], &in), 1);
        ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
        size_t len = 0;
        const char *e = dq_job_info_last_error(in, &len);
        ck_assert_int_eq(len, strlen(why[i]));
        ck_assert_int_eq(memcmp(e, why[i], len), 0);
        dq_job_info_free(in);
    }
    dq_push_opts_free(o);
    dq_push_opts_free(oe);
    redisFree(r);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

/* The limit on jobs in flight (DQ_SET_MAX_INFLIGHT) holds for async
 * polls: they lease at most the limit, a poll held back says when the
 * first lease ends, and an async ack frees its slot at once. */
static int apoll(dq_async *a, const char *q, res *r) {
    res_clear(r);
    ck_assert_int_eq(dq_async_poll(a, q, 100, 30000, jobs_rec, r), 0);
    ck_assert_msg(RUN_UNTIL(r->calls > 0, 5000), "no callback");
    ck_assert_msg(r->status == (int)r->n, "poll status %d: %s", r->status,
                  r->msg);
    return (int)r->n;
}

START_TEST(async_inflight_limit) {
    int L = 2 * tu_parts();
    dq_client *c = open_client();
    int s = DQ_SET_MAX_INFLIGHT;
    int64_t v = L;
    ck_assert_int_eq(dq_config_set(c, Q, 1, &s, &v), 0);
    for (int i = 0; i < 20 * tu_parts(); i++)
        push_text(c, Q, "x", 0, NULL, 0, NULL);
    dq_async *a = aopen();
    res r = {0}, first = {0};
    int got = apoll(a, Q, &first);
    for (int k = 0; k < 4 * tu_parts() && got < L; k++)
        got += apoll(a, Q, &r);
    ck_assert_int_eq(got, L);
    ck_assert_int_eq(apoll(a, Q, &r), 0);
    ck_assert_msg(r.v > 25000 && r.v <= 30000, "next %" PRId64, r.v);
    const dq_job *j = kept(&first, 0);
    res ack = {0};
    ck_assert_int_eq(dq_async_ack(a, Q, dq_job_id(j), dq_job_token(j),
                                  st_rec, &ack),
                     0);
    WAIT_CB(ack, 0);
    got = 0;
    for (int k = 0; k < 4 * tu_parts() && got < 1; k++)
        got += apoll(a, Q, &r);
    ck_assert_int_eq(got, 1);
    ck_assert_int_eq(apoll(a, Q, &r), 0);
    res_clear(&r);
    res_clear(&first);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

/* dq_group_stats_cb: the count into r->n, group A's due and later into
 * s[0..1], B's into s[2..3], whether a list came into v. */
static void groups_rec(dq_async *a, const dq_group_list *l, int status,
                       void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->v = l != NULL;
    r->n = dq_group_list_count(l);
    for (size_t i = 0; i < r->n; i++) {
        int b = strcmp(dq_group_list_name(l, i), "B") == 0 ? 2 : 0;
        r->s[b] = dq_group_list_due(l, i);
        r->s[b + 1] = dq_group_list_later(l, i);
    }
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

/* n jobs of group g due in delay_ms (ids "<g><k>"), by the sync client. */
static void push_grouped(dq_client *c, const char *q, const char *g, int n,
                         int64_t delay_ms) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g), 0);
    for (int k = 0; k < n; k++) {
        char id[16];
        snprintf(id, sizeof(id), "%s%d", g, k);
        const char *ids[1] = {id};
        const void *pls[1] = {"x"};
        size_t lens[1] = {1};
        int64_t d[1] = {delay_ms};
        ck_assert_int_eq(dq_push_batch_ex(c, q, 1, pls, lens, d, ids, 0, o,
                                          NULL, NULL),
                         1);
    }
    dq_push_opts_free(o);
}

START_TEST(async_group_stats) {
    dq_client *c = open_client();
    push_grouped(c, Q, "A", 3, 0);
    push_grouped(c, Q, "B", 2, 600000);
    dq_async *a = aopen();
    res r = {0};
    ck_assert_int_eq(dq_async_group_stats(a, Q, 10, groups_rec, &r), 0);
    WAIT_CB(r, 2);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.s[0], 3); /* A: 3 due */
    ck_assert_int_eq(r.s[1], 0);
    ck_assert_int_eq(r.s[2], 0); /* B: 2 later */
    ck_assert_int_eq(r.s[3], 2);
    /* bad input: refused at once, no callback */
    res bad = {0};
    ck_assert_int_eq(dq_async_group_stats(a, Q, 0, groups_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_group_stats(a, "", 10, groups_rec, &bad),
                     DQ_EQUEUE);
    RUN_UNTIL(0, 100);
    ck_assert_int_eq(bad.calls, 0);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

/* dq_group_stats_cb: the count into r->n, group A's jobs in flight into
 * s[0], B's into s[1], their due into s[2], s[3]. */
static void inflight_rec(dq_async *a, const dq_group_list *l, int status,
                         void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->n = dq_group_list_count(l);
    for (size_t i = 0; i < r->n; i++) {
        int b = strcmp(dq_group_list_name(l, i), "B") == 0;
        r->s[b] = dq_group_list_inflight(l, i);
        r->s[2 + b] = dq_group_list_due(l, i);
    }
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

/* Jobs in flight per group without a limit per group: every group whose
 * jobs are all leased is listed with them; an ack takes one out. */
START_TEST(async_group_inflight) {
    dq_client *c = open_client();
    push_grouped(c, Q, "A", 3, 0);
    push_grouped(c, Q, "B", 2, 0);
    dq_jobs *held[20] = {NULL};
    int got = 0, nh = 0;
    for (; nh < 20 && got < 5; nh++)
        got += poll_n(c, Q, 100, 30000, &held[nh], NULL);
    ck_assert_int_eq(got, 5);
    dq_async *a = aopen();
    res r = {0};
    ck_assert_int_eq(dq_async_group_stats(a, Q, 10, inflight_rec, &r), 0);
    WAIT_CB(r, 2);
    ck_assert_int_eq(r.n, 2);
    ck_assert_int_eq(r.s[0], 3); /* A: 3 in flight, none due */
    ck_assert_int_eq(r.s[1], 2);
    ck_assert_int_eq(r.s[2], 0);
    ck_assert_int_eq(r.s[3], 0);
    const dq_job *j = NULL;
    for (int k = 0; k < nh && j == NULL; k++)
        for (size_t i = 0; i < dq_jobs_count(held[k]); i++)
            if (dq_job_id(dq_jobs_at(held[k], i))[0] == 'A')
                j = dq_jobs_at(held[k], i);
    ck_assert_int_eq(dq_ack(c, Q, dq_job_id(j), dq_job_token(j)), 0);
    res r2 = {0};
    ck_assert_int_eq(dq_async_group_stats(a, Q, 10, inflight_rec, &r2), 0);
    WAIT_CB(r2, 2);
    ck_assert_int_eq(r2.s[0], 2);
    ck_assert_int_eq(r2.s[1], 2);
    for (int k = 0; k < nh; k++)
        dq_jobs_free(held[k]);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

/* The sync client claims job id (max 1, lease lease_ms); the list. */
static dq_jobs *claim_sync(dq_client *c, const char *q, int64_t lease_ms,
                           const char *id) {
    dq_jobs *j = poll_until(c, q, 1, lease_ms, 2000);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), id);
    return j;
}

/* An async extend of a lease that ran out while its slot (the limit on
 * jobs in flight, one per partition; both jobs in partition 0) went to
 * another job: refused as lost (DQ_ESTALE); once that job is acked the
 * extend brings the lease back. */
START_TEST(async_extend_lapsed) {
    dq_client *c = open_client();
    int s = DQ_SET_MAX_INFLIGHT;
    int64_t v = tu_parts();
    ck_assert_int_eq(dq_config_set(c, Q, 1, &s, &v), 0);
    char e0[40], e1[40];
    push_text(c, Q, "x", 0, tu_id_in(e0, sizeof(e0), "e0", 0), 0, NULL);
    th_sleep_ms(5);
    push_text(c, Q, "x", 0, tu_id_in(e1, sizeof(e1), "e1", 0), 0, NULL);
    dq_jobs *j0 = claim_sync(c, Q, 100, e0);
    th_sleep_ms(200);
    dq_jobs *j1 = claim_sync(c, Q, 30000, e1);
    dq_async *a = aopen();
    const char *tok = dq_job_token(dq_jobs_at(j0, 0));
    res r = {0};
    ck_assert_int_eq(dq_async_extend(a, Q, e0, tok, 30000, extend_rec, &r),
                     0);
    WAIT_CB(r, DQ_ESTALE);
    ck_assert_int_eq(dq_ack(c, Q, e1, dq_job_token(dq_jobs_at(j1, 0))), 0);
    res_clear(&r);
    int64_t before = wall_ms();
    ck_assert_int_eq(dq_async_extend(a, Q, e0, tok, 30000, extend_rec, &r),
                     0);
    WAIT_CB(r, 0);
    ck_assert_msg(r.v >= before + 29000, "deadline %" PRId64, r.v);
    dq_jobs *none = NULL;
    ck_assert_int_eq(poll_n(c, Q, 100, 30000, &none, NULL), 0);
    dq_jobs_free(j0);
    dq_jobs_free(j1);
    dq_close(c);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_settings", TU_SRV_UNIX,
    {"async_config", async_config, 30, &async_fixture},
    {"async_push_ex", async_push_ex, 30, &async_fixture},
    {"async_inflight_limit", async_inflight_limit, 30, &async_fixture},
    {"async_group_stats", async_group_stats, 30, &async_fixture},
    {"async_group_inflight", async_group_inflight, 30, &async_fixture},
    {"async_extend_lapsed", async_extend_lapsed, 30, &async_fixture})
