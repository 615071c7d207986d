/*
 * tests/async/test_async_repeat.c - repeating jobs through the libevent
 * client: dq_async_push_ex registers a series (once per id), an async poll
 * and ack reschedule it to its next slot, dq_async_get tells its rule, and
 * a repeating push without an id is refused at once (no callback).
 */
#include "test_async.h"

/* dq_async_get of id, which must exist. */
static dq_job_info *aget(dq_async *a, const char *q, const char *id) {
    info_res r = {0};
    ck_assert_int_eq(dq_async_get(a, q, id, info_rec, &r), 0);
    WAIT_CB(r, 1);
    return r.info;
}

START_TEST(async_every_reschedules) {
    dq_async *a = aopen();
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 500), DQ_OK);
    res p1 = {0}, p2 = {0};
    ck_assert_int_eq(dq_async_push_ex(a, Q, "x", 1, 0, "series", DQ_PUSH_KEEP,
                                      o, push_rec, &p1),
                     0);
    ck_assert_int_eq(dq_async_push_ex(a, Q, "x", 1, 0, "series", DQ_PUSH_KEEP,
                                      o, push_rec, &p2),
                     0);
    WAIT_CB(p1, 0);
    WAIT_CB(p2, 0);
    ck_assert_int_eq(p1.outcome, DQ_PUSHED);
    ck_assert_int_eq(p2.outcome, DQ_KEPT);
    int64_t last_due = 0;
    for (int run = 0; run < 3; run++) {
        dq_job_info *in = aget(a, Q, "series");
        int64_t due = dq_job_info_due_ms(in);
        ck_assert_ptr_nonnull(dq_job_info_repeat(in));
        ck_assert_int_gt(due, last_due);
        last_due = due;
        dq_job_info_free(in);
        /* poll until this run is delivered (bounded) */
        res pl = {0};
        for (int i = 0; i < 100 && pl.status <= 0; i++) {
            res_clear(&pl);
            ck_assert_int_eq(dq_async_poll(a, Q, 5, 60000, jobs_rec, &pl), 0);
            ck_assert(RUN_UNTIL(pl.calls > 0, 5000));
            ck_assert_msg(pl.status >= 0, "poll: %s", pl.msg);
            if (pl.status == 0)
                run_for(50);
        }
        ck_assert_int_eq(pl.status, 1);
        ck_assert_str_eq(dq_job_id(kept(&pl, 0)), "series");
        ck_assert_int_eq(dq_job_due_ms(kept(&pl, 0)), due);
        res ak = {0};
        ck_assert_int_eq(dq_async_ack(a, Q, "series",
                                      dq_job_token(kept(&pl, 0)), st_rec,
                                      &ak),
                         0);
        WAIT_CB(ak, 0);
        res_clear(&pl);
        in = aget(a, Q, "series");
        ck_assert_int_eq(dq_job_info_state(in) == DQ_JOB_SCHEDULED ||
                             dq_job_info_state(in) == DQ_JOB_DUE,
                         1);
        ck_assert_int_gt(dq_job_info_due_ms(in), due);
        ck_assert_int_eq((dq_job_info_due_ms(in) - due) % 500, 0);
        dq_job_info_free(in);
    }
    /* no id: refused at once, no callback */
    res bad = {0};
    ck_assert_int_eq(dq_async_push_ex(a, Q, "x", 1, 0, NULL, DQ_PUSH_KEEP, o,
                                      push_rec, &bad),
                     DQ_EINVAL);
    ck_assert_int_eq(bad.calls, 0);
    dq_push_opts_free(o);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_repeat", TU_SRV_UNIX,
    {"async_every_reschedules", async_every_reschedules, 60, &async_fixture})
