/*
 * tests/async/test_async_count_due.c - dq_async_count_due, the twin of
 * dq_count_due: the same script, checks and sums over partitions (the
 * suite runs again as async_count_due@p4), the counts handed to the
 * callback.
 */
#include "test_async.h"

/* dq_count_due_cb: up to 5 counts into r->s, their number into r->n, the
 * time into r->v. */
static void due_rec(dq_async *a, size_t n, const int64_t *counts,
                    int64_t now_ms, int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->n = n;
    r->v = now_ms;
    for (size_t i = 0; i < n && i < 5; i++)
        r->s[i] = counts[i];
    if (counts == NULL)
        r->s[0] = -1;
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

START_TEST(async_windows) {
    dq_async *a = aopen_uri(g_srv.uri, NULL, NULL);
    static const int64_t delays[] = {0, 0, 30000, 120000, 120000, 120000,
                                     7200000};
    for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++) {
        res p = {0};
        ck_assert_int_eq(dq_async_push(a, Q, "x", 1, delays[i], NULL, 0,
                                       push_rec, &p),
                         0);
        WAIT_CB(p, 0);
    }
    int64_t b[3] = {0, 60000, 3600000};
    res r = {0};
    ck_assert_int_eq(dq_async_count_due(a, Q, b, 3, due_rec, &r), 0);
    b[0] = b[1] = b[2] = -7; /* read during the call only */
    WAIT_CB(r, 0);
    ck_assert_uint_eq(r.n, 4);
    ck_assert_int_eq(r.s[0], 2);
    ck_assert_int_eq(r.s[1], 1);
    ck_assert_int_eq(r.s[2], 3);
    ck_assert_int_eq(r.s[3], 1);
    ck_assert(r.v > 1600000000000LL);
    /* an empty queue */
    res e = {0};
    const int64_t zero = 0;
    ck_assert_int_eq(dq_async_count_due(a, "async-empty", &zero, 1, due_rec,
                                        &e),
                     0);
    WAIT_CB(e, 0);
    ck_assert_uint_eq(e.n, 2);
    ck_assert(e.s[0] == 0 && e.s[1] == 0);
    /* bad input: refused at once, no callback */
    res bad = {0};
    const int64_t same[2] = {5, 5};
    ck_assert_int_eq(dq_async_count_due(a, Q, same, 2, due_rec, &bad),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_async_errmsg(a), "bounds_ms[1]"));
    ck_assert_int_eq(dq_async_count_due(a, Q, NULL, 1, due_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_count_due(a, Q, &zero, 0, due_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_count_due(a, Q, &zero, DQ_COUNT_DUE_MAX + 1,
                                        due_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_count_due(a, "", &zero, 1, due_rec, &bad),
                     DQ_EQUEUE);
    ck_assert_int_eq(dq_async_count_due(NULL, Q, &zero, 1, due_rec, &bad),
                     DQ_ENULL);
    run_for(50);
    ck_assert_int_eq(bad.calls, 0);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_count_due", TU_SRV_UNIX,
    {"async_windows", async_windows, 30, &async_fixture})
