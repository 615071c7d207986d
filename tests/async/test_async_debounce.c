/*
 * tests/async/test_async_debounce.c - DQ_PUSH_DEBOUNCE through the async
 * client (the same engine op as the sync one): created, moved within the
 * max wait, one follow-up while the job runs, started by the ack with the
 * latest payload; a batch; bad input refused before anything is sent (the
 * suite runs again partitioned and on the compact layouts).
 */
#include <stdio.h>
#include <string.h>

#include "test_async.h"

static int adpush(dq_async *a, const char *id, const char *pl, int64_t delay,
                  int64_t max_ms) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, max_ms),
                     0);
    res r = {0};
    ck_assert_int_eq(dq_async_push_ex(a, "aq", pl, strlen(pl), delay, id,
                                      DQ_PUSH_DEBOUNCE, o, push_rec, &r),
                     0);
    dq_push_opts_free(o);
    WAIT_CB(r, 0);
    return r.outcome;
}

static const dq_job *apoll1(dq_async *a, res *r) {
    ck_assert_int_eq(dq_async_poll(a, "aq", 1, 60000, jobs_rec, r), 0);
    WAIT_CB(*r, 1);
    return kept(r, 0);
}

START_TEST(async_debounce_states) {
    dq_async *a = aopen_uri(g_srv.uri, NULL, NULL);
    ck_assert_int_eq(adpush(a, "k", "v1", 3600000, 30), DQ_DEBOUNCE_CREATED);
    ck_assert_int_eq(adpush(a, "k", "v2", 3600000, 30), DQ_DEBOUNCE_MOVED);
    run_for(60); /* past the max wait: due */
    res p = {0};
    const dq_job *j = apoll1(a, &p);
    ck_assert_str_eq(dq_job_payload(j, NULL), "v2");
    ck_assert_int_eq(adpush(a, "k", "v3", 0, 30), DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(adpush(a, "k", "v4", 0, 30), DQ_DEBOUNCE_FOLLOWUP);
    res ack = {0};
    ck_assert_int_eq(dq_async_ack(a, "aq", "k", dq_job_token(j), st_rec,
                                  &ack), 0);
    WAIT_CB(ack, 0);
    res_clear(&p);
    j = apoll1(a, &p);
    ck_assert_str_eq(dq_job_payload(j, NULL), "v4");
    ck_assert_int_eq(dq_job_attempt(j), 1);
    res_clear(&p);
    /* batch: an id twice applies in order */
    const void *pl[2] = {"b1", "b2"};
    size_t lens[2] = {2, 2};
    const char *ids[2] = {"b", "b"};
    res b = {0};
    ck_assert_int_eq(dq_async_push_batch(a, "aq", 2, pl, lens, NULL, ids,
                                         DQ_PUSH_DEBOUNCE, batch_rec, &b),
                     0);
    WAIT_CB(b, 2);
    ck_assert_int_eq(b.results[0], DQ_DEBOUNCE_CREATED);
    ck_assert_int_eq(b.results[1], DQ_DEBOUNCE_MOVED);
    /* bad input: refused at the call, no callback */
    res bad = {0};
    ck_assert_int_eq(dq_async_push(a, "aq", "x", 1, 0, NULL, DQ_PUSH_DEBOUNCE,
                                   push_rec, &bad),
                     DQ_EINVAL);
    run_for(30);
    ck_assert_int_eq(bad.calls, 0);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_debounce", TU_SRV_UNIX,
    {"async_debounce_states", async_debounce_states, 30, &async_fixture})
