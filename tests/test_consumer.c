/*
 * tests/test_consumer.c - the sync consumer (dq_consumer_run) acks the
 * jobs its handlers finished with success together, one dq_ack_batch per
 * claimed batch: every success acked exactly once, retries rescheduled and
 * failures dead as the handlers said, in a handful of script calls; held
 * acks go out before a slow handler's successor runs (and a stop asked
 * from their reports releases that successor unhandled), before the rest
 * of a batch is released at a stop, and before a free ends the loop; each
 * held job gets its own result (DQ_ESTALE, DQ_ENOTFOUND) in its report; a
 * job already finished is refused by dq_consumer_done.
 */
#include <delayq-consumer.h>

#include "test_suite.h"
#include "test_utils.h"

enum { MAXJ = 600 };

/* What a test's handler and outcome report saw. */
typedef struct seen {
    int calls[MAXJ];         /* handler calls per job */
    int reports[MAXJ];       /* outcome reports per job */
    int outcome[MAXJ];       /* last reported outcome */
    int status[MAXJ];        /* last reported status */
    int order[MAXJ];         /* jobs in the order their handlers ran */
    int ncalls, nreports;
    int expect;              /* reports after which to interrupt (0: none) */
    int mode;                /* test-specific behaviour */
    int done_einval;         /* dq_consumer_done refused a finished job */
    int inflight_seen;       /* test-specific: what a handler observed */
    const dq_job *last_ok;   /* a job finished with success, not reported */
    dq_client *obs;          /* a second client, for the handlers' checks */
    redisContext *r;         /* and a plain Redis connection */
    const char *q;
    dq_consumer *c;
} seen;

static int job_index(const dq_job *job) {
    int i = atoi(dq_job_id(job) + 1); /* ids are "j<i>" */
    ck_assert_msg(i >= 0 && i < MAXJ, "job id %s", dq_job_id(job));
    return i;
}

static void report(dq_consumer *c, const dq_job *job, int outcome,
                   int status, void *ud) {
    seen *s = ud;
    int i = job_index(job);
    s->reports[i]++;
    s->outcome[i] = outcome;
    s->status[i] = status;
    if (job == s->last_ok)
        s->last_ok = NULL; /* reported: the job may be freed after this */
    if (++s->nreports == s->expect)
        dq_consumer_interrupt(c);
}

static int record(seen *s, const dq_job *job) {
    int i = job_index(job);
    s->calls[i]++;
    s->order[s->ncalls++] = i;
    return i;
}

/* Pushes jobs "j<from>".."j<to-1>", due now. */
static void push_range(dq_client *cl, const char *q, int from, int to) {
    static char idbuf[MAXJ][16];
    const char *ids[MAXJ];
    const void *pl[MAXJ];
    size_t lens[MAXJ];
    int n = to - from;
    for (int k = 0; k < n; k++) {
        snprintf(idbuf[k], sizeof(idbuf[k]), "j%d", from + k);
        ids[k] = idbuf[k];
        pl[k] = idbuf[k];
        lens[k] = strlen(idbuf[k]);
    }
    int rc = dq_push_batch(cl, q, (size_t)n, pl, lens, NULL, ids, 0, NULL,
                           NULL);
    ck_assert_msg(rc == n, "push_batch: %d %s", rc, dq_errmsg(cl));
}

static dq_consumer *sync_consumer(dq_client *cc, const char *q,
                                  dq_handler_fn *h, seen *s, int conc) {
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new_sync(cc, q, h, s, &c), 0);
    ck_assert_int_eq(dq_consumer_set_outcome_cb(c, report, s), 0);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, conc), 0);
    s->c = c;
    s->q = q;
    return c;
}

/* Whether job "j<i>" has any data left in the queue's jobs hash. */
static int has_data(redisContext *r, const char *q, int i) {
    char id[16], key[512];
    snprintf(id, sizeof(id), "j%d", i);
    tu_key(key, sizeof(key), "dq", q, "jobs", id);
    return (int)rint_(r, "HEXISTS", key, id);
}

/* Whether the queue remembers job "j<i>" as acked (a DQ_PUSH_KEEP push of
 * its id answers DQ_DONE and writes nothing). */
static int acked(dq_client *cl, const char *q, int i) {
    char id[16];
    snprintf(id, sizeof(id), "j%d", i);
    int outcome = 0;
    int rc = dq_push(cl, q, "x", 1, 0, id, DQ_PUSH_KEEP, NULL, 0, &outcome);
    ck_assert_msg(rc == 0, "push: %s", dq_errmsg(cl));
    return outcome == DQ_DONE;
}

/* ---- success, retry and failure by job: exactly once each ---- */

/* j<i>: i % 3 == 0 succeeds (every other one through dq_consumer_done),
 * 1 asks for a retry, 2 fails.  A success held for the batch ack is no
 * longer running: dq_consumer_done refuses it. */
static int by_job_handler(dq_consumer *c, const dq_job *job, void *ud) {
    seen *s = ud;
    int i = record(s, job);
    if (s->last_ok != NULL &&
        dq_consumer_done(c, s->last_ok, DQ_JOB_RETRY, 0) == DQ_EINVAL)
        s->done_einval++;
    switch (i % 3) {
    case 0:
        s->last_ok = job;
        if (i % 2 == 0)
            return DQ_JOB_OK;
        ck_assert_int_eq(dq_consumer_done(c, job, DQ_JOB_OK, -1), 0);
        return DQ_JOB_ASYNC;
    case 1:
        return DQ_JOB_RETRY;
    default:
        return DQ_JOB_FAIL;
    }
}

START_TEST(by_job_exactly_once) {
    enum { N = 300, CONC = 100 };
    dq_client *cl = open_client();
    push_range(cl, Q, 0, N);
    static seen s;
    memset(&s, 0, sizeof(s));
    s.expect = N;
    dq_client *cc = open_client();
    dq_consumer *c = sync_consumer(cc, Q, by_job_handler, &s, CONC);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 600000);
    dq_consumer_set_int(c, DQ_COPT_RETRY_JITTER, 0);
    ck_assert_int_eq(dq_consumer_run(c), 0);
    dq_consumer_free(c);
    /* Every handler ran once and every job was reported once, with the
     * outcome its handler chose and no error. */
    for (int i = 0; i < N; i++) {
        ck_assert_msg(s.calls[i] == 1, "j%d: %d calls", i, s.calls[i]);
        ck_assert_msg(s.reports[i] == 1, "j%d: %d reports", i, s.reports[i]);
        int want = i % 3 == 0 ? DQ_JOB_OK
                   : i % 3 == 1 ? DQ_JOB_RETRY
                                : DQ_JOB_FAIL;
        ck_assert_msg(s.outcome[i] == want && s.status[i] == 0,
                      "j%d: outcome %d status %d", i, s.outcome[i],
                      s.status[i]);
    }
    ck_assert_int_gt(s.done_einval, 0);
    /* Redis: the retries scheduled (in 10 minutes), the failures dead, the
     * successes gone and remembered as acked. */
    ck_stats(cl, Q, N / 3, 0, 0, N / 3);
    dq_jobs *l = NULL;
    ck_assert_int_eq(dq_list(cl, Q, DQ_LIST_SCHEDULED, 0, N, &l, NULL), N / 3);
    for (size_t k = 0; k < dq_jobs_count(l); k++) {
        const dq_job *j = dq_jobs_at(l, k);
        ck_assert_msg(job_index(j) % 3 == 1, "%s scheduled", dq_job_id(j));
        ck_assert_int_eq(dq_job_attempt(j), 1);
    }
    dq_jobs_free(l);
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, N, &l), N / 3);
    for (size_t k = 0; k < dq_jobs_count(l); k++)
        ck_assert_msg(job_index(dq_jobs_at(l, k)) % 3 == 2, "%s dead",
                      dq_job_id(dq_jobs_at(l, k)));
    dq_jobs_free(l);
    redisContext *r = rconn();
    for (int i = 0; i < N; i += 3) {
        ck_assert_msg(!has_data(r, Q, i), "j%d still has data", i);
        ck_assert_msg(acked(cl, Q, i), "j%d not remembered as acked", i);
    }
    redisFree(r);
    ck_stats(cl, Q, N / 3, 0, 0, N / 3); /* the checks wrote nothing */
    dq_close(cc);
    dq_close(cl);
}
END_TEST

/* ---- successes share script calls ---- */

static int ok_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    record(ud, job);
    return DQ_JOB_OK;
}

START_TEST(acks_coalesced) {
    enum { N = 500, CONC = 100 };
    dq_client *cl = open_client();
    push_range(cl, Q, 0, N);
    static seen s;
    memset(&s, 0, sizeof(s));
    s.expect = N;
    dq_client *cc = open_client();
    dq_consumer *c = sync_consumer(cc, Q, ok_handler, &s, CONC);
    redisContext *r = rconn();
    long long before = tu_script_calls(r);
    ck_assert_int_eq(dq_consumer_run(c), 0);
    long long calls = tu_script_calls(r) - before;
    dq_consumer_free(c);
    for (int i = 0; i < N; i++)
        ck_assert_msg(s.calls[i] == 1 && s.reports[i] == 1 &&
                          s.status[i] == 0,
                      "j%d: %d calls, %d reports, status %d", i, s.calls[i],
                      s.reports[i], s.status[i]);
    ck_stats(cl, Q, 0, 0, 0, 0);
    /* One ack per job would be N script calls; a batch of CONC takes one
     * poll and one ack (a call per partition visited on a partitioned
     * run), and a rare early flush of a descheduled run a few more. */
    ck_assert_msg(calls <= N / 5, "%lld script calls for %d jobs", calls, N);
    redisFree(r);
    dq_close(cc);
    dq_close(cl);
}
END_TEST

/* ---- a slow handler does not keep earlier successes unacked ---- */

/* Call 1 succeeds at once, call 2 takes 50 ms, call 3 looks how many jobs
 * are still in flight. */
static int slow_second_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record(s, job);
    if (s->ncalls == 2)
        th_sleep_ms(50);
    if (s->ncalls == 3) {
        int64_t inflight = -1;
        ck_assert_int_eq(
            dq_stats(s->obs, s->q, NULL, NULL, &inflight, NULL, NULL), 0);
        s->inflight_seen = (int)inflight;
    }
    return DQ_JOB_OK;
}

START_TEST(held_acks_precede_next_handler) {
    dq_client *cl = open_client();
    push_range(cl, Q, 0, 3);
    static seen s;
    memset(&s, 0, sizeof(s));
    s.expect = 3;
    s.obs = cl;
    dq_client *cc = open_client();
    dq_consumer *c = sync_consumer(cc, Q, slow_second_handler, &s, 3);
    ck_assert_int_eq(dq_consumer_run(c), 0);
    dq_consumer_free(c);
    ck_assert_int_eq(s.ncalls, 3);
    /* The first two were acked before the third handler ran. */
    ck_assert_int_eq(s.inflight_seen, 1);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(s.status[i], 0);
    ck_stats(cl, Q, 0, 0, 0, 0);
    dq_close(cc);
    dq_close(cl);
}
END_TEST

/* ---- nor keeps them past half their lease ---- */

/* Call 2 takes 3 ms; call 3 looks whether the first two still have data
 * (not acked yet). */
static int short_lease_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record(s, job);
    if (s->ncalls == 2)
        th_sleep_ms(3);
    if (s->ncalls == 3)
        s->inflight_seen = has_data(s->r, s->q, s->order[0]) +
                           has_data(s->r, s->q, s->order[1]);
    return DQ_JOB_OK;
}

START_TEST(held_acks_within_half_lease) {
    dq_client *cl = open_client();
    push_range(cl, Q, 0, 3);
    static seen s;
    memset(&s, 0, sizeof(s));
    s.expect = 3;
    s.r = rconn();
    dq_client *cc = open_client();
    dq_consumer *c = sync_consumer(cc, Q, short_lease_handler, &s, 3);
    /* A 4 ms lease: 3 ms after the claim (less than the hold time), the
     * first two are acked before the third handler runs. */
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_LEASE_MS, 4), 0);
    ck_assert_int_eq(dq_consumer_run(c), 0);
    dq_consumer_free(c);
    ck_assert_int_eq(s.ncalls, 3);
    ck_assert_int_eq(s.inflight_seen, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(s.status[i], 0);
    ck_stats(cl, Q, 0, 0, 0, 0);
    redisFree(s.r);
    dq_close(cc);
    dq_close(cl);
}
END_TEST

/* ---- each held job gets its own result ---- */

/* Calls 1 and 2 succeed; call 3 (with the first two still held) makes
 * the first one's token stale (a replace) and removes the second (a
 * cancel of an in-flight job), then succeeds.  mode 1: the first two were
 * acked already (a descheduled test), the scenario is tried again. */
static int stale_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record(s, job);
    if (s->ncalls == 3) {
        int64_t inflight = -1;
        ck_assert_int_eq(
            dq_stats(s->obs, s->q, NULL, NULL, &inflight, NULL, NULL), 0);
        if (inflight != 3) {
            s->mode = 1;
            return DQ_JOB_OK;
        }
        char id[16];
        snprintf(id, sizeof(id), "j%d", s->order[0]);
        int outcome = 0;
        ck_assert_int_eq(dq_push(s->obs, s->q, "again", 5, 600000, id,
                                 DQ_PUSH_REPLACE, NULL, 0, &outcome),
                         0);
        ck_assert_int_eq(outcome, DQ_REPLACED);
        snprintf(id, sizeof(id), "j%d", s->order[1]);
        ck_assert_int_eq(dq_cancel(s->obs, s->q, id, DQ_CANCEL_INFLIGHT),
                         DQ_CANCELED_INFLIGHT);
    }
    return DQ_JOB_OK;
}

START_TEST(held_acks_own_results) {
    dq_client *cl = open_client();
    dq_client *cc = open_client();
    static seen s;
    int tries = 0;
    do {
        char q[64];
        snprintf(q, sizeof(q), "%s_%d", Q, tries);
        push_range(cl, q, 0, 3);
        memset(&s, 0, sizeof(s));
        s.expect = 3;
        s.obs = cl;
        dq_consumer *c = sync_consumer(cc, q, stale_handler, &s, 3);
        ck_assert_int_eq(dq_consumer_run(c), 0);
        ck_assert_int_eq(s.ncalls, 3);
        if (s.mode == 1) {
            dq_consumer_free(c);
            continue;
        }
        int first = s.order[0], second = s.order[1], third = s.order[2];
        ck_assert_int_eq(s.outcome[first], DQ_JOB_OK);
        ck_assert_int_eq(s.status[first], DQ_ESTALE);
        ck_assert_int_eq(s.outcome[second], DQ_JOB_OK);
        ck_assert_int_eq(s.status[second], DQ_ENOTFOUND);
        ck_assert_int_eq(s.status[third], 0);
        ck_assert_msg(strstr(dq_consumer_errmsg(c), "ack of job") != NULL,
                      "errmsg: %s", dq_consumer_errmsg(c));
        dq_consumer_free(c);
        /* The replaced job waits for its new run; nothing else is left. */
        ck_stats(cl, q, 1, 0, 0, 0);
        break;
    } while (++tries < 5);
    ck_assert_msg(tries < 5, "never had three jobs in flight at once");
    dq_close(cc);
    dq_close(cl);
}
END_TEST

/* ---- stop and free: held acks go out first ---- */

/* Call 5 stops the consumer (mode 0: interrupt, 1: free) and succeeds. */
static int stop_handler(dq_consumer *c, const dq_job *job, void *ud) {
    seen *s = ud;
    record(s, job);
    if (s->ncalls == 5) {
        if (s->mode == 0)
            dq_consumer_interrupt(c);
        else
            dq_consumer_free(c);
    }
    return DQ_JOB_OK;
}

/* The first report frees the consumer. */
static void free_in_report(dq_consumer *c, const dq_job *job, int outcome,
                           int status, void *ud) {
    report(c, job, outcome, status, ud);
    dq_consumer_free(c);
}

START_TEST(stop_flushes_held_acks) {
    dq_client *cl = open_client();
    dq_client *cc = open_client();
    redisContext *r = rconn();
    for (int mode = 0; mode < 2; mode++) {
        char q[64];
        snprintf(q, sizeof(q), "%s_%d", Q, mode);
        push_range(cl, q, 0, 10);
        static seen s;
        memset(&s, 0, sizeof(s));
        s.mode = mode;
        dq_consumer *c = sync_consumer(cc, q, stop_handler, &s, 10);
        /* 5 handled and acked (also when freed: they finished first), 5
         * released unstarted; the run frees a consumer freed inside. */
        ck_assert_int_eq(dq_consumer_run(c), 5);
        if (mode == 0)
            dq_consumer_free(c);
        ck_assert_int_eq(s.ncalls, 5);
        ck_assert_int_eq(s.nreports, 5);
        for (int k = 0; k < 5; k++) {
            int i = s.order[k];
            ck_assert_int_eq(s.reports[i], 1);
            ck_assert_int_eq(s.status[i], 0);
            ck_assert(!has_data(r, q, i));
        }
        ck_stats(cl, q, 0, 5, 0, 0);
    }

    /* Interrupted from a report of acks sent before the next handler (the
     * second handler was slow): that next job is released, not handled. */
    char q[64];
    snprintf(q, sizeof(q), "%s_hold", Q);
    push_range(cl, q, 0, 3);
    static seen h;
    memset(&h, 0, sizeof(h));
    h.expect = 1;
    dq_consumer *c = sync_consumer(cc, q, slow_second_handler, &h, 3);
    ck_assert_int_eq(dq_consumer_run(c), 1);
    dq_consumer_free(c);
    ck_assert_int_eq(h.ncalls, 2);
    ck_assert_int_eq(h.nreports, 2);
    ck_assert_int_eq(h.status[h.order[0]] + h.status[h.order[1]], 0);
    ck_stats(cl, q, 0, 1, 0, 0);

    /* Freed from the report of the batch's first ack: the batch was acked
     * as one, the other reports are not made. */
    snprintf(q, sizeof(q), "%s_report", Q);
    push_range(cl, q, 0, 4);
    static seen t;
    memset(&t, 0, sizeof(t));
    c = sync_consumer(cc, q, ok_handler, &t, 4);
    dq_consumer_set_outcome_cb(c, free_in_report, &t);
    ck_assert_int_eq(dq_consumer_run(c), 0);
    ck_assert_int_eq(t.ncalls, 4);
    ck_assert_int_eq(t.nreports, 1);
    ck_stats(cl, q, 0, 0, 0, 0);
    redisFree(r);
    dq_close(cc);
    dq_close(cl);
}
END_TEST

/* ---- a handler says why a job failed ---- */

/* A binary reason: a NUL and a high byte inside. */
static const char BIN_REASON[] = "bin\0ary\xff tail";
#define BIN_LEN (sizeof(BIN_REASON) - 1)

/* j0: bad calls only, then a retry (nothing recorded); j1: a retry with a
 * reason (a too long one after it is refused and changes nothing); j2: a
 * failure with a binary reason from a buffer gone before the nack; j3: a
 * success with a reason (ignored); j4: a reason replaced, then
 * dq_consumer_done(RETRY), after which the job is no longer running; j5:
 * a failure with a reason of exactly DQ_REASON_MAX bytes. */
static int reason_handler(dq_consumer *c, const dq_job *job, void *ud) {
    seen *s = ud;
    int i = record(s, job);
    static char big[DQ_REASON_MAX + 1];
    memset(big, 'r', sizeof(big));
    if (s->last_ok != NULL && s->last_ok != job) /* an earlier job, not
                                                    running any more */
        ck_assert_int_eq(dq_consumer_set_reason(c, s->last_ok, "x", 1),
                         DQ_EINVAL);
    s->last_ok = job;
    switch (i) {
    case 0:
        tu_reason_refused(c, job, s);
        return DQ_JOB_RETRY;
    case 1:
        tu_reason_retry_later(c, job);
        ck_assert(strstr(dq_consumer_errmsg(c), "set_reason") != NULL);
        return DQ_JOB_RETRY;
    case 2: {
        char *tmp = malloc(BIN_LEN);
        ck_assert_ptr_nonnull(tmp);
        memcpy(tmp, BIN_REASON, BIN_LEN);
        ck_assert_int_eq(dq_consumer_set_reason(c, job, tmp, BIN_LEN), 0);
        memset(tmp, 0, BIN_LEN);
        free(tmp);
        return DQ_JOB_FAIL;
    }
    case 3:
        ck_assert_int_eq(dq_consumer_set_reason(c, job, "unused", 6), 0);
        return DQ_JOB_OK;
    case 4:
        ck_assert_int_eq(dq_consumer_set_reason(c, job, "first", 5), 0);
        ck_assert_int_eq(dq_consumer_set_reason(c, job, "second", 6), 0);
        ck_assert_int_eq(dq_consumer_done(c, job, DQ_JOB_RETRY, -1), 0);
        ck_assert_int_eq(dq_consumer_set_reason(c, job, "late", 4),
                         DQ_EINVAL);
        return DQ_JOB_ASYNC;
    default:
        ck_assert_int_eq(
            dq_consumer_set_reason(c, job, big, DQ_REASON_MAX), 0);
        return DQ_JOB_FAIL;
    }
}

/* Reports: the job is finished, no reason can be set for it any more. */
static void reason_report(dq_consumer *c, const dq_job *job, int outcome,
                          int status, void *ud) {
    ck_assert_int_eq(dq_consumer_set_reason(c, job, "x", 1), DQ_EINVAL);
    report(c, job, outcome, status, ud);
}

/* Retries a job without a reason, or (j1) with one. */
static int retry_handler(dq_consumer *c, const dq_job *job, void *ud) {
    int i = record(ud, job);
    if (i == 1)
        ck_assert_int_eq(dq_consumer_set_reason(c, job, "flaky", 5), 0);
    return DQ_JOB_RETRY;
}

START_TEST(handler_reasons) {
    enum { N = 6 };
    dq_client *cl = open_client();
    dq_client *cc = open_client();
    push_range(cl, Q, 0, N);
    static seen s;
    memset(&s, 0, sizeof(s));
    s.expect = N;
    dq_consumer *c = sync_consumer(cc, Q, reason_handler, &s, 1);
    dq_consumer_set_outcome_cb(c, reason_report, &s);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 600000);
    ck_assert_int_eq(dq_consumer_run(c), 0);
    dq_consumer_free(c);
    for (int i = 0; i < N; i++)
        ck_assert_msg(s.calls[i] == 1 && s.reports[i] == 1 &&
                          s.status[i] == 0,
                      "j%d: %d calls, %d reports, status %d", i, s.calls[i],
                      s.reports[i], s.status[i]);
    tu_reasons_of_retries(cl, Q);
    static char buf[DQ_REASON_MAX + 1];
    int st = 0;
    ck_assert_int_eq(tu_last_error(cl, Q, "j4", buf, &st), 6);
    ck_assert(memcmp(buf, "second", 6) == 0);
    ck_assert_int_eq(st, DQ_JOB_SCHEDULED);
    ck_assert_int_eq(tu_last_error(cl, Q, "j5", buf, &st), DQ_REASON_MAX);
    for (int k = 0; k < DQ_REASON_MAX; k++)
        ck_assert_int_eq(buf[k], 'r');
    ck_assert_int_eq(st, DQ_JOB_DEAD);
    ck_assert(acked(cl, Q, 3));
    /* The dead listing shows the binary reason, NUL included. */
    dq_jobs *l = NULL;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 10, &l), 2);
    int found = 0;
    for (size_t k = 0; k < dq_jobs_count(l); k++) {
        const dq_job *j = dq_jobs_at(l, k);
        if (strcmp(dq_job_id(j), "j2") != 0)
            continue;
        size_t len = 0;
        const char *e = dq_job_last_error(j, &len);
        ck_assert_ptr_nonnull(e);
        ck_assert_uint_eq(len, BIN_LEN);
        ck_assert(memcmp(e, BIN_REASON, BIN_LEN) == 0);
        ck_assert_int_gt(dq_job_failed_ms(j), 0);
        found = 1;
    }
    dq_jobs_free(l);
    ck_assert(found);
    ck_stats(cl, Q, 3, 0, 0, 2);

    /* The consumer's max attempts: a retry without a reason dies with
     * "max attempts", one with a reason keeps the handler's. */
    char q[64];
    snprintf(q, sizeof(q), "%s_max", Q);
    push_range(cl, q, 0, 2);
    static seen m;
    memset(&m, 0, sizeof(m));
    m.expect = 2;
    c = sync_consumer(cc, q, retry_handler, &m, 2);
    dq_consumer_set_int(c, DQ_COPT_MAX_ATTEMPTS, 1);
    ck_assert_int_eq(dq_consumer_run(c), 0);
    dq_consumer_free(c);
    ck_assert_int_eq(m.outcome[0], DQ_JOB_FAIL);
    ck_assert_int_eq(m.outcome[1], DQ_JOB_FAIL);
    ck_assert_int_eq(tu_last_error(cl, q, "j0", buf, &st), 12);
    ck_assert(memcmp(buf, "max attempts", 12) == 0);
    ck_assert_int_eq(st, DQ_JOB_DEAD);
    ck_assert_int_eq(tu_last_error(cl, q, "j1", buf, &st), 5);
    ck_assert(memcmp(buf, "flaky", 5) == 0);
    ck_assert_int_eq(st, DQ_JOB_DEAD);
    dq_close(cc);
    dq_close(cl);
}
END_TEST

TEST_SUITE("consumer", TU_SRV_UNIX,
    {"by_job_exactly_once", by_job_exactly_once, 60, NULL},
    {"acks_coalesced", acks_coalesced, 60, NULL},
    {"held_acks_precede_next_handler", held_acks_precede_next_handler, 60,
     NULL},
    {"held_acks_within_half_lease", held_acks_within_half_lease, 60, NULL},
    {"held_acks_own_results", held_acks_own_results, 60, NULL},
    {"stop_flushes_held_acks", stop_flushes_held_acks, 60, NULL},
    {"handler_reasons", handler_reasons, 60, NULL})
