/*
 * tests/test_idlife.c - the lives of one job id: a done record answers a
 * keep push (DQ_DONE) only for the incarnation that was acked; a push that
 * creates the id again and a cancel leave no record that refuses a later
 * push, while a retried ack of the acked delivery still hears that it
 * landed.  The story that lost a reminder, then every order of
 * push/replace/poll/ack/nack/cancel/requeue/purge against the model of
 * idlife_model.h (the async suite runs the same model, async_idlife; both
 * run again partitioned and on the compact layouts).
 */
#include <stdio.h>
#include <string.h>

#include "idlife_model.h"
#include "test_suite.h"
#include "test_utils.h"

/* The reminder: pushed, run and acked; pushed again (replace) to run once
 * more; cancelled (the order was paid); pushed again in keep mode: a new
 * job, not a retry of the first push. */
START_TEST(done_record_next_life) {
    dq_client *c = open_client();
    ck_assert_int_eq(push_text(c, Q, "r1", 0, "order-1", DQ_PUSH_KEEP, NULL),
                     DQ_PUSHED);
    dq_jobs *jobs = poll_one(c, Q, 60000);
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", dq_job_token(dq_jobs_at(jobs, 0)));
    dq_jobs_free(jobs);
    ck_assert_int_eq(dq_ack(c, Q, "order-1", tok), 0);
    ck_assert_int_eq(
        push_text(c, Q, "r2", 0, "order-1", DQ_PUSH_REPLACE, NULL),
        DQ_PUSHED);
    ck_assert_int_eq(dq_cancel(c, Q, "order-1", 0), DQ_CANCELED_PENDING);
    int oc = push_text(c, Q, "r3", 1000, "order-1", DQ_PUSH_KEEP, NULL);
    ck_assert_msg(oc == DQ_PUSHED, "keep push after replace and cancel: "
                  "outcome %d, want DQ_PUSHED (%d)", oc, DQ_PUSHED);
    ck_stats(c, Q, 1, 0, 0, 0);
    /* the first delivery's retried ack still hears that it landed */
    ck_assert_int_eq(dq_ack(c, Q, "order-1", tok), 0);
    dq_close(c);
}
END_TEST

/* A keep push that found the record out of its own window creates the id
 * again: a later keep push with a longer window is not refused by it (after
 * a cancel), and a batch push says the same. */
START_TEST(done_record_outside_window) {
    dq_client *c = open_client();
    dq_client *shortw = open_client_opt(DQ_OPT_DONE_TTL_MS, 30);
    push_text(c, Q, "a", 0, "order-2", DQ_PUSH_KEEP, NULL);
    dq_jobs *jobs = poll_one(c, Q, 60000);
    ck_assert_int_eq(
        dq_ack(c, Q, "order-2", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    th_sleep_ms(60);
    ck_assert_int_eq(
        push_text(shortw, Q, "b", 0, "order-2", DQ_PUSH_KEEP, NULL),
        DQ_PUSHED);
    ck_assert_int_eq(dq_cancel(c, Q, "order-2", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(push_text(c, Q, "c", 0, "order-2", DQ_PUSH_KEEP, NULL),
                     DQ_PUSHED);
    ck_assert_int_eq(dq_cancel(c, Q, "order-2", 0), DQ_CANCELED_PENDING);
    /* a cancel of an id with nothing pending retires the record too */
    push_text(c, Q, "d", 0, "order-3", DQ_PUSH_KEEP, NULL);
    jobs = poll_one(c, Q, 60000);
    ck_assert_int_eq(
        dq_ack(c, Q, "order-3", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    ck_assert_int_eq(dq_cancel(c, Q, "order-3", 0), 0);
    const void *pl[2] = {"e", "f"};
    size_t lens[2] = {1, 1};
    const char *ids[2] = {"order-2", "order-3"};
    int ocs[2] = {0, 0};
    ck_assert_int_eq(
        dq_push_batch(c, Q, 2, pl, lens, NULL, ids, DQ_PUSH_KEEP, NULL, ocs),
        2);
    ck_assert_int_eq(ocs[0], DQ_PUSHED);
    ck_assert_int_eq(ocs[1], DQ_PUSHED);
    dq_close(shortw);
    dq_close(c);
}
END_TEST

/* ---- the model, on the sync client ---- */

static int s_push(void *cx, const char *q, const char *id, const char *pl,
                  int flags, int *oc) {
    return dq_push(cx, q, pl, strlen(pl), 0, id, flags, NULL, 0, oc);
}

static int s_poll(void *cx, const char *q, char *tok, char *pl, size_t plsz) {
    dq_jobs *jobs = NULL;
    int n = dq_poll(cx, q, 1, 60000, &jobs, NULL);
    if (n == 1) {
        const dq_job *j = dq_jobs_at(jobs, 0);
        size_t len = 0;
        const char *p = dq_job_payload(j, &len);
        snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(j));
        snprintf(pl, plsz, "%.*s", (int)len, p);
    }
    dq_jobs_free(jobs);
    return n;
}

static int s_ack(void *cx, const char *q, const char *id, const char *tok) {
    return dq_ack(cx, q, id, tok);
}

static int s_nack(void *cx, const char *q, const char *id, const char *tok,
                  int flags) {
    return dq_nack(cx, q, id, tok, 0, flags);
}

static int s_cancel(void *cx, const char *q, const char *id, int flags) {
    return dq_cancel(cx, q, id, flags);
}

static int s_requeue(void *cx, const char *q, const char *id) {
    return dq_dead_requeue(cx, q, id, 0);
}

static int s_purge(void *cx, const char *q, const char *id) {
    return dq_dead_purge(cx, q, id);
}

static const im_ops sync_ops = {s_push, s_poll, s_ack, s_nack,
                                s_cancel, s_requeue, s_purge};

START_TEST(model_one_id) {
    dq_client *c = open_client();
    int steps = im_run(&sync_ops, c, Q, 150, 40, 20000);
    ck_assert_int_ge(steps, 400);
    dq_close(c);
}
END_TEST

TEST_SUITE("idlife", TU_SRV_UNIX,
    {"done_record_next_life", done_record_next_life, 30, NULL},
    {"done_record_outside_window", done_record_outside_window, 30, NULL},
    {"model_one_id", model_one_id, 60, NULL})
