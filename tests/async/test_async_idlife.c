/*
 * tests/async/test_async_idlife.c - the lives of one job id on the async
 * client: the story of test_idlife.c (a keep push after replace and cancel
 * creates the id again) and the same model of one id's incarnations
 * (idlife_model.h), every call through dq_async_* (the suite runs again
 * partitioned and on the compact layouts).
 */
#include <stdio.h>
#include <string.h>

#include "../idlife_model.h"
#include "test_async.h"

static int a_push(void *cx, const char *q, const char *id, const char *pl,
                  int flags, int *oc) {
    res r = {0};
    int rc = res_wait(dq_async_push(cx, q, pl, strlen(pl), 0, id, flags,
                                  push_rec, &r), &r);
    *oc = r.outcome;
    return rc;
}

static int a_poll(void *cx, const char *q, char *tok, char *pl, size_t plsz) {
    res r = {0};
    int rc = res_wait(dq_async_poll(cx, q, 1, 60000, jobs_rec, &r), &r);
    int n = rc < 0 ? rc : (int)r.n;
    if (n == 1) {
        const dq_job *j = kept(&r, 0);
        size_t len = 0;
        const char *p = dq_job_payload(j, &len);
        snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(j));
        snprintf(pl, plsz, "%.*s", (int)len, p);
    }
    res_clear(&r);
    return n;
}

static int a_ack(void *cx, const char *q, const char *id, const char *tok) {
    return ta_ack(cx, q, id, tok);
}

static int a_nack(void *cx, const char *q, const char *id, const char *tok,
                  int flags) {
    res r = {0};
    return res_wait(dq_async_nack(cx, q, id, tok, 0, flags, st_rec, &r), &r);
}

static int a_cancel(void *cx, const char *q, const char *id, int flags) {
    return ta_cancel(cx, q, id, flags);
}

static int a_requeue(void *cx, const char *q, const char *id) {
    res r = {0};
    return res_wait(dq_async_dead_requeue(cx, q, id, 0, st_rec, &r), &r);
}

static int a_purge(void *cx, const char *q, const char *id) {
    res r = {0};
    return res_wait(dq_async_dead_purge(cx, q, id, st_rec, &r), &r);
}

static const im_ops async_ops = {a_push, a_poll, a_ack, a_nack,
                                 a_cancel, a_requeue, a_purge};

START_TEST(async_done_record_next_life) {
    dq_async *a = aopen_uri(g_srv.uri, NULL, NULL);
    int oc = 0;
    ck_assert_int_eq(a_push(a, Q, "order-1", "r1", DQ_PUSH_KEEP, &oc), 0);
    ck_assert_int_eq(oc, DQ_PUSHED);
    char tok[DQ_TOKEN_BUF], pl[8];
    ck_assert_int_eq(a_poll(a, Q, tok, pl, sizeof(pl)), 1);
    ck_assert_int_eq(a_ack(a, Q, "order-1", tok), 0);
    ck_assert_int_eq(a_push(a, Q, "order-1", "r2", DQ_PUSH_REPLACE, &oc), 0);
    ck_assert_int_eq(oc, DQ_PUSHED);
    ck_assert_int_eq(a_cancel(a, Q, "order-1", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(a_push(a, Q, "order-1", "r3", DQ_PUSH_KEEP, &oc), 0);
    ck_assert_msg(oc == DQ_PUSHED, "keep push after replace and cancel: "
                  "outcome %d", oc);
    /* the first delivery's retried ack still hears that it landed */
    ck_assert_int_eq(a_ack(a, Q, "order-1", tok), 0);
    dq_async_free(a);
}
END_TEST

START_TEST(async_model_one_id) {
    dq_async *a = aopen_uri(g_srv.uri, NULL, NULL);
    int steps = im_run(&async_ops, a, Q, 100, 40, 20000);
    ck_assert_int_ge(steps, 400);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_idlife", TU_SRV_UNIX,
    {"async_done_record_next_life", async_done_record_next_life, 30,
     &async_fixture},
    {"async_model_one_id", async_model_one_id, 60, &async_fixture})
