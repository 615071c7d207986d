/*
 * tests/async/test_async_claim_model.c - the claim model of
 * ../claim_model.h on the async client: every push, poll, ack, nack,
 * cancel, extend and requeue through dq_async_*, checked poll by poll
 * against what fair.lua promises (a shorter run than the sync suite's
 * claim_model; DQ_MODEL_SEED replays a seed).  Runs again partitioned and
 * on the compact layouts.
 */
#include <stdio.h>
#include <string.h>

#include "../claim_model.h"
#include "test_async.h"

static int a_push(void *cx, const char *q, const char *id,
                  const dq_push_opts *o, int64_t at) {
    res r = {0};
    int rc = res_wait(dq_async_push_ex(cx, q, "x", 1, at, id, DQ_PUSH_AT, o,
                                     push_rec, &r),
                    &r);
    return rc < 0 ? rc : r.outcome;
}

static int a_poll(void *cx, const char *q, int max, int64_t lease_ms,
                  cm_got *got) {
    res r = {0};
    int rc = res_wait(dq_async_poll(cx, q, max, lease_ms, jobs_rec, &r), &r);
    int n = rc < 0 ? rc : (int)r.n;
    for (int i = 0; i < n; i++) {
        const dq_job *j = kept(&r, (size_t)i);
        snprintf(got[i].id, sizeof(got[i].id), "%s", dq_job_id(j));
        snprintf(got[i].tok, sizeof(got[i].tok), "%s", dq_job_token(j));
        got[i].attempt = dq_job_attempt(j);
        got[i].due = dq_job_due_ms(j);
        got[i].deadline = dq_job_lease_deadline_ms(j);
    }
    res_clear(&r);
    return n;
}

static int a_ack(void *cx, const char *q, const char *id, const char *tok) {
    return ta_ack(cx, q, id, tok);
}

static int a_nack(void *cx, const char *q, const char *id, const char *tok,
                  int64_t delay_ms, int flags) {
    res r = {0};
    return res_wait(dq_async_nack(cx, q, id, tok, delay_ms, flags, st_rec, &r),
                  &r);
}

static int a_cancel(void *cx, const char *q, const char *id, int flags) {
    return ta_cancel(cx, q, id, flags);
}

static int a_extend(void *cx, const char *q, const char *id, const char *tok,
                    int64_t lease_ms, int64_t *deadline) {
    res r = {0};
    int rc = res_wait(dq_async_extend(cx, q, id, tok, lease_ms, extend_rec, &r),
                    &r);
    if (deadline != NULL)
        *deadline = r.v;
    return rc;
}

static int a_requeue(void *cx, const char *q, const char *id,
                     int64_t delay_ms) {
    res r = {0};
    return res_wait(dq_async_dead_requeue(cx, q, id, delay_ms, st_rec, &r), &r);
}

static const cm_ops async_ops = {a_push,   a_poll,   a_ack,    a_nack,
                                 a_cancel, a_extend, a_requeue};

/* Three rounds of 200 steps, within 15 s (DQ_MODEL_SECONDS for longer). */
START_TEST(async_claim_model) {
    dq_async *a = aopen_uri(g_srv.uri, NULL, NULL);
    cm_test(&async_ops, a, Q, 3, 200, 15);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_claim_model", TU_SRV_UNIX,
    {"async_claim_model", async_claim_model, 120, &async_fixture})
