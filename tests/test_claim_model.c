/*
 * tests/test_claim_model.c - claiming against a reference model
 * (claim_model.h): groups, priorities, the queue-wide and the per-group
 * limit, nacks (retry after a delay, to dead), leases that run out and
 * holders that crash, acks, stale acks, extends, requeues and cancels in
 * random order from a printed seed (DQ_MODEL_SEED replays one), every
 * poll's answer checked against what fair.lua promises.  Runs again
 * partitioned (fairness per partition) and on the compact layouts; the
 * async suite runs the same model (async_claim_model).
 */
#include <stdio.h>
#include <string.h>

#include "claim_model.h"
#include "test_suite.h"
#include "test_utils.h"

static int s_push(void *cx, const char *q, const char *id,
                  const dq_push_opts *o, int64_t at) {
    int oc = 0;
    int rc = dq_push_ex(cx, q, "x", 1, at, id, DQ_PUSH_AT, o, NULL, 0, &oc);
    return rc < 0 ? rc : oc;
}

static int s_poll(void *cx, const char *q, int max, int64_t lease_ms,
                  cm_got *got) {
    dq_jobs *jobs = NULL;
    int n = dq_poll(cx, q, max, lease_ms, &jobs, NULL);
    for (int i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, (size_t)i);
        snprintf(got[i].id, sizeof(got[i].id), "%s", dq_job_id(j));
        snprintf(got[i].tok, sizeof(got[i].tok), "%s", dq_job_token(j));
        got[i].attempt = dq_job_attempt(j);
        got[i].due = dq_job_due_ms(j);
        got[i].deadline = dq_job_lease_deadline_ms(j);
    }
    dq_jobs_free(jobs);
    return n;
}

static int s_ack(void *cx, const char *q, const char *id, const char *tok) {
    return dq_ack(cx, q, id, tok);
}

static int s_nack(void *cx, const char *q, const char *id, const char *tok,
                  int64_t delay_ms, int flags) {
    return dq_nack(cx, q, id, tok, delay_ms, flags);
}

static int s_cancel(void *cx, const char *q, const char *id, int flags) {
    return dq_cancel(cx, q, id, flags);
}

static int s_extend(void *cx, const char *q, const char *id, const char *tok,
                    int64_t lease_ms, int64_t *deadline) {
    return dq_extend(cx, q, id, tok, lease_ms, deadline);
}

static int s_requeue(void *cx, const char *q, const char *id,
                     int64_t delay_ms) {
    return dq_dead_requeue(cx, q, id, delay_ms);
}

static const cm_ops sync_ops = {s_push,   s_poll,   s_ack,    s_nack,
                                s_cancel, s_extend, s_requeue};

/* Three rounds of 300 steps, within 20 s (DQ_MODEL_SECONDS for longer). */
START_TEST(claim_model) {
    dq_client *c = open_client();
    cm_test(&sync_ops, c, Q, 3, 300, 20);
    dq_close(c);
}
END_TEST

TEST_SUITE("claim_model", TU_SRV_UNIX,
    {"claim_model", claim_model, 120, NULL})
