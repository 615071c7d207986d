/*
 * tests/async/test_async_consumer.c - the consumers: jobs spread over
 * delays with the right attempt counts and retries (lateness bounded
 * loosely: bench/ measures it), waking on an earlier push made on another
 * connection, retry / fail / bad return values / max attempts, handlers
 * that finish later, concurrency, lease extension, handler timeout,
 * graceful stop, frees from inside handlers, the idle command budget, acks
 * sent in batches with a result per job, and the sync consumer with the
 * same handler contract.
 */
#include "test_async.h"


enum { MAXJ = 400 };
/* seen.mode of the batched-ack tests: expected failures are not printed */
enum { MODE_QUIET = 77 };

/* What a test's handler and outcome callback saw. */
typedef struct seen {
    int calls[MAXJ];          /* handler calls per job */
    int64_t attempt[MAXJ][4]; /* attempt of each call */
    int64_t at_us[MAXJ][4];   /* wall clock of each call */
    int64_t due_ms[MAXJ];     /* due time of the first delivery */
    int ok[MAXJ];             /* DQ_JOB_OK outcomes with status 0 */
    int reports[MAXJ];        /* outcome reports of any kind */
    int last_outcome[MAXJ];   /* outcome of the last report */
    int last_status[MAXJ];    /* status of the last report */
    int retry[MAXJ];          /* DQ_JOB_RETRY outcomes */
    int fail[MAXJ];           /* DQ_JOB_FAIL outcomes */
    int bad_status;           /* outcomes with status < 0 */
    int total_ok;             /* sum of ok */
    int finished;             /* outcomes of any kind */
    int mode;                 /* test-specific behaviour */
    int mode2;                /* later_handler: ms for attempts > 1 */
    int running, max_running; /* handlers not finished */
    const dq_job *held[MAXJ]; /* jobs kept for a later done */
    int nheld;
    dq_consumer *c;           /* the consumer */
    dq_async *a;              /* its client */
    redisContext *counts_r;   /* drain_handler: reads the queue's leases */
    const char *counts_queue; /* of this queue */
    int max_leased;           /* drain_handler: most jobs in flight seen */
} seen;

static int job_index(const dq_job *job) {
    const char *id = dq_job_id(job);
    int i = atoi(id + 1); /* ids are "j<i>" */
    ck_assert_msg(i >= 0 && i < MAXJ, "job id %s", id);
    return i;
}

static void record_call(seen *s, const dq_job *job) {
    int i = job_index(job);
    int k = s->calls[i]++;
    if (k < 4) {
        s->attempt[i][k] = dq_job_attempt(job);
        s->at_us[i][k] = wall_us();
    }
    if (k == 0)
        s->due_ms[i] = dq_job_due_ms(job);
}

static void outcome_rec(dq_consumer *c, const dq_job *job, int outcome,
                        int status, void *ud) {
    (void)c;
    seen *s = ud;
    int i = job_index(job);
    s->finished++;
    s->reports[i]++;
    s->last_outcome[i] = outcome;
    s->last_status[i] = status;
    if (status < 0 && s->mode == MODE_QUIET) {
        s->bad_status++;
        return;
    }
    if (status < 0) {
        s->bad_status++;
        fprintf(stderr, "outcome %d of %s: status %s: %s\n", outcome,
                dq_job_id(job), dq_errname(status), dq_consumer_errmsg(c));
        return;
    }
    if (outcome == DQ_JOB_OK) {
        s->ok[i]++;
        s->total_ok++;
    } else if (outcome == DQ_JOB_RETRY) {
        s->retry[i]++;
    } else if (outcome == DQ_JOB_FAIL) {
        s->fail[i]++;
    }
}

/* Pushes job "j<i>" with this delay through a sync client. */
static void push_j(dq_client *cl, const char *q, int i, int64_t delay_ms) {
    char id[16];
    snprintf(id, sizeof(id), "j%d", i);
    int rc = dq_push(cl, q, id, strlen(id), delay_ms, id, 0, NULL, 0, NULL);
    ck_assert_msg(rc == 0, "push: %s", dq_errmsg(cl));
}

static dq_consumer *consumer(dq_async *a, const char *q, dq_handler_fn *h,
                             seen *s) {
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(a, q, h, s, &c), 0);
    ck_assert_int_eq(dq_consumer_set_outcome_cb(c, outcome_rec, s), 0);
    s->c = c;
    s->a = a;
    return c;
}

/* ---- jobs spread over delays, with retries ---- */

static int spread_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record_call(s, job);
    int i = job_index(job);
    if (i % 5 == 0 && dq_job_attempt(job) == 1)
        return DQ_JOB_RETRY;
    return DQ_JOB_OK;
}

START_TEST(spread_delays_and_retries) {
    enum { N = 200 };
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, spread_handler, &s);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 8), 0);
    ck_assert_int_eq(
        dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED), 0);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 50), 0);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_RETRY_JITTER, 0), 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 2),
                     DQ_EINVAL); /* running */
    for (int i = 0; i < N; i++)
        push_j(cl, Q, i, (i * 7) % 1500);
    ck_assert_msg(RUN_UNTIL(s.total_ok == N, 15000), "%d of %d acked",
                  s.total_ok, N);
    run_for(100); /* nothing more may come */
    ck_assert_int_eq(s.bad_status, 0);
    int64_t worst = 0;
    for (int i = 0; i < N; i++) {
        int retried = i % 5 == 0;
        ck_assert_int_eq(s.ok[i], 1);
        ck_assert_int_eq(s.calls[i], retried ? 2 : 1);
        ck_assert_int_eq(s.retry[i], retried ? 1 : 0);
        ck_assert_int_eq(s.attempt[i][0], 1);
        /* Never before its due time; late by (loosely) < 500 ms. */
        int64_t late_us = s.at_us[i][0] - s.due_ms[i] * 1000;
        ck_assert_msg(late_us >= -1000, "j%d fired %" PRId64 " us early", i,
                      -late_us);
        if (late_us > worst)
            worst = late_us;
        if (retried) {
            ck_assert_int_eq(s.attempt[i][1], 2);
            int64_t gap = s.at_us[i][1] - s.at_us[i][0];
            ck_assert_msg(gap >= 45000, "retry of j%d after %" PRId64 " us",
                          i, gap);
        }
    }
    fprintf(stderr, "spread: worst first-delivery lateness %.3f ms\n",
            worst / 1000.0);
    ck_assert_msg(worst < 500000, "lateness %" PRId64 " us", worst);
    ck_stats(cl, Q, 0, 0, 0, 0);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* ---- waking up early ---- */

static int ok_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    record_call(ud, job);
    return DQ_JOB_OK;
}

START_TEST(wake_on_earlier_push) {
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    /* A long idle cap: without the wake-up, the consumer would sleep 20 s. */
    dq_options *o = dq_options_new();
    dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 20000);
    dq_async *a = aopen_uri(g_srv.uri, o, NULL);
    dq_options_free(o);
    push_j(cl, Q, 1, 30000); /* the consumer sleeps towards this one */
    dq_consumer *c = consumer(a, Q, ok_handler, &s);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    run_for(300); /* idle, subscribed */
    int64_t t0 = wall_us();
    push_j(cl, Q, 2, 200); /* another connection, earlier job */
    ck_assert_msg(RUN_UNTIL(s.ok[2] == 1, 3000), "not woken");
    int64_t after = s.at_us[2][0] - t0;
    ck_assert_msg(after >= 150000 && after < 3000000,
                  "handled %" PRId64 " us after the push", after);
    t0 = wall_us();
    push_j(cl, Q, 3, 0);
    ck_assert(RUN_UNTIL(s.ok[3] == 1, 3000));
    after = s.at_us[3][0] - t0;
    ck_assert_msg(after < 2000000, "handled %" PRId64 " us after the push",
                  after);
    ck_assert_int_eq(s.calls[1], 0);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* ---- outcomes: retry, fail, bad return values, max attempts ---- */

static int outcome_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record_call(s, job);
    switch (job_index(job)) {
    case 1:
        return DQ_JOB_RETRY; /* always: dead after max attempts */
    case 2:
        return DQ_JOB_FAIL;
    case 3:
        return dq_job_attempt(job) == 1 ? 42 : DQ_JOB_OK; /* 42: retry */
    default:
        return DQ_JOB_OK;
    }
}

START_TEST(retry_fail_and_max_attempts) {
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, outcome_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_MAX_ATTEMPTS, 3);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 20);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    for (int i = 1; i <= 3; i++)
        push_j(cl, Q, i, 0);
    ck_assert(RUN_UNTIL(s.fail[1] == 1 && s.fail[2] == 1 && s.ok[3] == 1,
                        5000));
    run_for(100);
    ck_assert_int_eq(s.calls[1], 3);
    ck_assert_int_eq(s.retry[1], 2);
    ck_assert_int_eq(s.attempt[1][2], 3);
    ck_assert_int_eq(s.calls[2], 1);
    ck_assert_int_eq(s.retry[2], 0);
    ck_assert_int_eq(s.calls[3], 2);
    ck_assert_int_eq(s.retry[3], 1);
    ck_assert_int_eq(s.bad_status, 0);
    dq_jobs *dead = NULL;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 10, &dead), 2);
    for (size_t i = 0; i < 2; i++) {
        const dq_job *j = dq_jobs_at(dead, i);
        ck_assert_int_eq(dq_job_attempt(j),
                         strcmp(dq_job_id(j), "j1") == 0 ? 3 : 1);
    }
    dq_jobs_free(dead);
    ck_stats(cl, Q, 0, 0, 0, 2);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

START_TEST(backoff_policy) {
    dq_async *a = aopen();
    static seen s;
    dq_consumer *c = consumer(a, Q, ok_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 100);
    dq_consumer_set_int(c, DQ_COPT_RETRY_MAX_MS, 1000);
    dq_consumer_set_int(c, DQ_COPT_RETRY_JITTER, 0);
    const int64_t want[7] = {100, 100, 200, 400, 800, 1000, 1000};
    for (int k = 1; k <= 6; k++)
        ck_assert_int_eq(dq_consumer_backoff_ms(c, k), want[k]);
    ck_assert_int_eq(dq_consumer_backoff_ms(c, 1000), 1000);
    dq_consumer_set_int(c, DQ_COPT_RETRY_JITTER, 50);
    for (int k = 0; k < 200; k++) {
        int64_t d = dq_consumer_backoff_ms(c, 3);
        ck_assert_msg(d >= 200 && d <= 400, "jittered %" PRId64, d);
    }
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_JITTER, 0);
    ck_assert_int_eq(dq_consumer_backoff_ms(c, 5), 100);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 0),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_RETRY_JITTER, 101),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_consumer_set_int(c, 999, 1), DQ_EINVAL);
    ck_assert_int_eq(dq_consumer_set_int(NULL, DQ_COPT_LEASE_MS, 1),
                     DQ_ENULL);
    dq_consumer *bad = NULL;
    ck_assert_int_eq(dq_consumer_new(a, "", ok_handler, NULL, &bad),
                     DQ_EQUEUE);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(dq_consumer_new(a, Q, NULL, NULL, &bad), DQ_ENULL);
    ck_assert_int_eq(dq_consumer_run(c), DQ_EINVAL); /* not a sync one */
    ck_assert_int_eq(dq_consumer_stop(c, 0, NULL, NULL), DQ_EINVAL);
    dq_consumer_free(c);
    dq_consumer_free(NULL);
    dq_async_free(a);
}
END_TEST

/* ---- handlers that finish later; concurrency ---- */

typedef struct later {
    seen *s;
    const dq_job *job;
    int outcome;
    struct event *ev;
} later;

static void later_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    later *l = arg;
    seen *s = l->s;
    s->running--;
    int rc = dq_consumer_done(s->c, l->job, l->outcome, -1);
    ck_assert_int_eq(rc, 0);
    /* Twice: the job is no longer running. */
    ck_assert_int_eq(dq_consumer_done(s->c, l->job, l->outcome, -1),
                     DQ_EINVAL);
    event_free(l->ev);
    free(l);
}

static void finish_later(seen *s, const dq_job *job, int outcome,
                         int64_t ms) {
    later *l = calloc(1, sizeof(*l));
    ck_assert_ptr_nonnull(l);
    l->s = s;
    l->job = job;
    l->outcome = outcome;
    l->ev = evtimer_new(g_base, later_cb, l);
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(l->ev, &tv);
}

static int later_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record_call(s, job);
    if (++s->running > s->max_running)
        s->max_running = s->running;
    int64_t ms = s->mode2 > 0 && dq_job_attempt(job) > 1 ? s->mode2 : s->mode;
    finish_later(s, job, DQ_JOB_OK, ms);
    return DQ_JOB_ASYNC;
}

START_TEST(finish_later_and_concurrency) {
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    s.mode = 50; /* each job takes 50 ms */
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, later_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 4);
    for (int i = 0; i < 20; i++)
        push_j(cl, Q, i, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(s.total_ok == 20, 5000));
    ck_assert_int_eq(s.max_running, 4);
    ck_assert_int_eq(s.bad_status, 0);
    ck_assert_uint_eq(dq_consumer_running(c), 0);
    ck_stats(cl, Q, 0, 0, 0, 0);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* A 600 ms lease outlives a 2 s handler when extended, not otherwise. */
START_TEST(lease_extension) {
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    s.mode = 2000;
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, later_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_LEASE_MS, 600);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 2);
    push_j(cl, Q, 1, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(s.calls[1] == 1, 3000));
    run_for(1300);
    ck_stats(cl, Q, 0, 0, 1, 0); /* still leased at ~1.3 s */
    ck_assert_uint_eq(dq_consumer_running(c), 1);
    ck_assert(RUN_UNTIL(s.ok[1] == 1, 3000));
    ck_assert_int_eq(s.calls[1], 1);
    ck_assert_int_eq(s.bad_status, 0);
    dq_consumer_free(c);

    /* Without extension the job comes back (attempt 2) while the first
     * handler still runs, and the first ack is stale. */
    static seen t;
    memset(&t, 0, sizeof(t));
    t.mode = 700;
    t.mode2 = 10;
    const char *q2 = "lease_extension_off";
    c = consumer(a, q2, later_handler, &t);
    dq_consumer_set_int(c, DQ_COPT_LEASE_MS, 300);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 2);
    dq_consumer_set_int(c, DQ_COPT_EXTEND, 0);
    push_j(cl, q2, 1, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(t.ok[1] == 1 && t.bad_status == 1, 5000));
    ck_assert_int_eq(t.calls[1], 2);
    ck_assert_int_eq(t.attempt[1][1], 2);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* ---- handler timeout and graceful stop ---- */

static int hang_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record_call(s, job);
    if (s->mode == 1 && dq_job_attempt(job) > 1)
        return DQ_JOB_OK;
    s->held[s->nheld++] = job; /* never finished by the handler */
    return DQ_JOB_ASYNC;
}

START_TEST(handler_timeout) {
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    s.mode = 1;
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, hang_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_HANDLER_TIMEOUT_MS, 200);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 10);
    push_j(cl, Q, 1, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(s.ok[1] == 1, 3000));
    ck_assert_int_eq(s.calls[1], 2);
    ck_assert_int_eq(s.retry[1], 1);
    int64_t gap = s.at_us[1][1] - s.at_us[1][0];
    ck_assert_msg(gap >= 190000, "released after %" PRId64 " us", gap);
    ck_assert_int_eq(s.nheld, 1);
    ck_assert_int_eq(dq_consumer_done(c, s.held[0], DQ_JOB_OK, -1),
                     DQ_ESTALE);
    ck_assert_int_eq(dq_consumer_done(c, s.held[0], DQ_JOB_OK, -1),
                     DQ_EINVAL);
    ck_stats(cl, Q, 0, 0, 0, 0);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

typedef struct stopinfo {
    int calls;
    int status;
    int64_t at_ms;
    int free_inside;
} stopinfo;

static void stopped_rec(dq_consumer *c, int status, void *ud) {
    stopinfo *si = ud;
    si->calls++;
    si->status = status;
    si->at_ms = th_mono_ms();
    if (si->free_inside)
        dq_consumer_free(c);
}

START_TEST(graceful_stop) {
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, hang_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 5);
    for (int i = 0; i < 3; i++)
        push_j(cl, Q, i, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(s.nheld == 3, 3000));
    stopinfo si = {0};
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(dq_consumer_stop(c, 200, stopped_rec, &si), 0);
    ck_assert_int_eq(dq_consumer_stop(c, 200, stopped_rec, &si), DQ_EINVAL);
    ck_assert_int_eq(si.calls, 0);
    ck_assert(RUN_UNTIL(si.calls == 1, 3000));
    ck_assert_int_eq(si.status, 3);
    ck_assert_msg(si.at_ms - t0 >= 190, "stopped after %" PRId64 " ms",
                  si.at_ms - t0);
    ck_stats(cl, Q, 0, 3, 0, 0); /* released at once, due again */
    ck_assert_int_eq(dq_consumer_done(c, s.held[0], DQ_JOB_OK, -1),
                     DQ_ESTALE);
    run_for(100);
    ck_assert_int_eq(si.calls, 1);
    dq_consumer_free(c);

    /* A handler that finishes before the deadline: nothing released, and
     * the stop ends when it does (not at the deadline). */
    static seen t;
    memset(&t, 0, sizeof(t));
    t.mode = 100;
    const char *q2 = "graceful_stop_finish";
    push_j(cl, q2, 0, 0);
    c = consumer(a, q2, later_handler, &t);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(t.running == 1, 3000));
    stopinfo sj = {0};
    t0 = th_mono_ms();
    ck_assert_int_eq(dq_consumer_stop(c, 5000, stopped_rec, &sj), 0);
    ck_assert(RUN_UNTIL(sj.calls == 1, 3000));
    ck_assert_int_eq(sj.status, 0);
    ck_assert_msg(sj.at_ms - t0 < 2000, "stop took %" PRId64 " ms",
                  sj.at_ms - t0);
    ck_assert_int_eq(t.total_ok, 1);
    dq_consumer_free(c);

    /* Nothing running: called back from the loop, freed inside. */
    static seen u;
    memset(&u, 0, sizeof(u));
    c = consumer(a, "graceful_stop_idle", hang_handler, &u);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    run_for(50);
    stopinfo sk = {0};
    sk.free_inside = 1;
    ck_assert_int_eq(dq_consumer_stop(c, 1000, stopped_rec, &sk), 0);
    ck_assert_int_eq(sk.calls, 0);
    ck_assert(RUN_UNTIL(sk.calls == 1, 1000));
    ck_assert_int_eq(sk.status, 0);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* ---- frees from inside the consumer's callbacks ---- */

static int free_consumer_handler(dq_consumer *c, const dq_job *job,
                                 void *ud) {
    seen *s = ud;
    record_call(s, job);
    if (s->mode == 1)
        dq_consumer_free(c);
    else if (s->mode == 2)
        dq_async_free(s->a);
    return DQ_JOB_OK;
}

static void free_in_outcome(dq_consumer *c, const dq_job *job, int outcome,
                            int status, void *ud) {
    outcome_rec(c, job, outcome, status, ud);
    dq_consumer_free(c);
}

START_TEST(free_inside_handler) {
    dq_client *cl = open_client();
    for (int i = 0; i < 5; i++)
        push_j(cl, Q, i, 0);
    static seen s;
    memset(&s, 0, sizeof(s));
    s.mode = 1;
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, free_consumer_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 5);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(s.calls[0] + s.calls[1] + s.calls[2] + s.calls[3] +
                                s.calls[4] ==
                            1,
                        3000));
    run_for(200);
    int total = 0;
    for (int i = 0; i < 5; i++)
        total += s.calls[i];
    ck_assert_int_eq(total, 1); /* the rest of that poll was not handled */
    ck_assert_int_eq(s.finished, 0);

    /* The client freed from a handler frees its consumer too. */
    const char *q2 = "free_inside_handler_client";
    for (int i = 0; i < 3; i++)
        push_j(cl, q2, i, 0);
    static seen t;
    memset(&t, 0, sizeof(t));
    t.mode = 2;
    c = consumer(a, q2, free_consumer_handler, &t);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(t.calls[0] + t.calls[1] + t.calls[2] == 1, 3000));
    run_for(200);

    /* Freed from the outcome report. */
    const char *q3 = "free_inside_handler_outcome";
    push_j(cl, q3, 0, 0);
    push_j(cl, q3, 1, 0);
    static seen u;
    memset(&u, 0, sizeof(u));
    a = aopen();
    c = consumer(a, q3, ok_handler, &u);
    dq_consumer_set_outcome_cb(c, free_in_outcome, &u);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(u.finished == 1, 3000));
    run_for(200);
    ck_assert_int_eq(u.finished, 1);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* ---- idle: a bounded handful of commands per second ---- */

START_TEST(idle_command_budget) {
    dq_async *a = aopen();
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_consumer *c = consumer(a, Q, ok_handler, &s);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    run_for(500);
    redisContext *r = rconn();
    long long before = client_commands(r);
    run_for(3000);
    long long used = client_commands(r) - before;
    fprintf(stderr, "idle consumer: %lld commands in 3 s\n", used);
    /* Each idle cap (1 s) costs a poll and a re-SUBSCRIBE of the wake-up
     * link; on a queue of np partitions the consumer watches every
     * partition's channel and polls every partition once per cap, so the
     * budget (3 caps and one more at the edges of the window) is np
     * times the plain one. */
    int np = tu_parts();
    ck_assert_msg(used >= 2 * np && used <= (3 * 2 + 2) * np,
                  "%lld commands in 3 s (%d partitions)", used, np);
    redisFree(r);
    dq_async_free(a); /* frees the consumer too */
}
END_TEST

/* ---- acks in batches: one result per job ---- */

/* EVALSHA calls the server ran so far (every script call). */
static long long evalsha_calls(redisContext *r) {
    redisReply *rep = th_cmd(r, "INFO commandstats");
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    const char *p = strstr(rep->str, "cmdstat_evalsha:calls=");
    long long n = p != NULL ? atoll(p + strlen("cmdstat_evalsha:calls=")) : 0;
    freeReplyObject(rep);
    return n;
}

/* Holds every first delivery (s->held[i] = job j<i>); later deliveries
 * succeed at once. */
static int hold_first_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record_call(s, job);
    if (dq_job_attempt(job) > 1)
        return DQ_JOB_OK;
    s->held[job_index(job)] = job;
    s->nheld++;
    return DQ_JOB_ASYNC;
}

/* The outcome each held job of batched_ack_results gets from its handler:
 * j<i> with i % 4 == 1 retries, == 2 fails, the rest succeed. */
static int planned(int i) {
    return i % 4 == 1 ? DQ_JOB_RETRY : i % 4 == 2 ? DQ_JOB_FAIL : DQ_JOB_OK;
}

typedef struct finisher {
    seen *s;
    int n;
    int which;      /* the outcome finished by this call */
    int rc_bad;     /* dq_consumer_done calls that did not return 0 */
    struct event *ev;
} finisher;

/* One loop callback finishes every held job whose planned outcome is
 * f->which: their acks go out together. */
static void finish_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    finisher *f = arg;
    for (int i = 0; i < f->n; i++)
        if (planned(i) == f->which &&
            dq_consumer_done(f->s->c, f->s->held[i], f->which, 0) != 0)
            f->rc_bad++;
}

static void finish_in_loop(finisher *f, int which) {
    f->which = which;
    f->ev = evtimer_new(g_base, finish_cb, f);
    struct timeval tv = {0, 0};
    evtimer_add(f->ev, &tv);
    ck_assert(RUN_UNTIL(!evtimer_pending(f->ev, NULL), 1000));
    event_free(f->ev);
    ck_assert_int_eq(f->rc_bad, 0);
}

/* Handlers that finish together: their acks go in one batch (one script
 * call per partition), and each job still gets its own result: 0, or
 * DQ_ESTALE for a job whose lease another client took over, DQ_ENOTFOUND
 * for one cancelled while it ran; retries and failures are nacked; every
 * job is reported once per delivery and Redis ends exactly as the
 * outcomes say. */
START_TEST(batched_ack_results) {
    enum { N = 40, STOLEN = 7, CANCELLED = 8 };
    const char *q = "batched_ack_results";
    dq_client *cl = open_client();
    redisContext *r = rconn();
    static seen s;
    memset(&s, 0, sizeof(s));
    s.mode = MODE_QUIET;
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, q, hold_first_handler, &s);
    /* Exactly N slots: with every job held the consumer cannot poll, so
     * the stolen job goes to this test's client. */
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, N);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 30);
    for (int i = 0; i < N; i++)
        push_j(cl, q, i, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert_msg(RUN_UNTIL(s.nheld == N, 5000), "%d of %d held", s.nheld, N);

    /* Another client takes j7 over (the consumer's token goes stale) and
     * cancels j8 in flight. */
    static char tok[N][DQ_TOKEN_BUF];
    for (int i = 0; i < N; i++)
        snprintf(tok[i], sizeof(tok[i]), "%s", dq_job_token(s.held[i]));
    ck_assert_int_eq(dq_nack(cl, q, "j7", tok[STOLEN], 0, 0), 0);
    dq_jobs *mine = poll_one(cl, q, 30000);
    ck_assert_ptr_nonnull(mine);
    const dq_job *stolen = dq_jobs_at(mine, 0);
    ck_assert_str_eq(dq_job_id(stolen), "j7");
    ck_assert_int_eq(dq_cancel(cl, q, "j8", DQ_CANCEL_INFLIGHT),
                     DQ_CANCELED_INFLIGHT);

    /* The successes, together: one ack call per partition at most (polls
     * may follow, for the slots they gave back and the wake-ups of the
     * nack above), where single acks would take N / 2 calls. */
    finisher f = {&s, N, 0, 0, NULL};
    long long before = evalsha_calls(r);
    finish_in_loop(&f, DQ_JOB_OK);
    ck_assert_msg(RUN_UNTIL(s.finished == N / 2, 3000), "%d reports",
                  s.finished);
    run_for(50);
    long long calls = evalsha_calls(r) - before;
    ck_assert_msg(calls < N / 2, "%lld script calls for %d acks", calls,
                  N / 2);
    ck_assert_int_eq(s.finished, N / 2);
    for (int i = 0; i < N; i++) {
        if (planned(i) != DQ_JOB_OK)
            continue;
        int want = i == STOLEN ? DQ_ESTALE : i == CANCELLED ? DQ_ENOTFOUND : 0;
        ck_assert_msg(s.reports[i] == 1 && s.last_outcome[i] == DQ_JOB_OK &&
                          s.last_status[i] == want,
                      "j%d: %d reports, outcome %d, status %s", i,
                      s.reports[i], s.last_outcome[i],
                      dq_errname(s.last_status[i]));
    }
    ck_assert_int_eq(s.bad_status, 2);

    /* Then the retries and the failures (single nacks); the retried jobs
     * come back and succeed. */
    finish_in_loop(&f, DQ_JOB_RETRY);
    finish_in_loop(&f, DQ_JOB_FAIL);
    ck_assert_msg(RUN_UNTIL(s.finished == N + N / 4, 5000), "%d reports",
                  s.finished);
    run_for(100); /* nothing more may come */
    ck_assert_int_eq(s.finished, N + N / 4);
    ck_assert_int_eq(s.bad_status, 2);
    int acked = 0;
    for (int i = 0; i < N; i++) {
        int p = planned(i);
        ck_assert_int_eq(s.calls[i], p == DQ_JOB_RETRY ? 2 : 1);
        ck_assert_int_eq(s.reports[i], p == DQ_JOB_RETRY ? 2 : 1);
        ck_assert_int_eq(s.retry[i], p == DQ_JOB_RETRY ? 1 : 0);
        ck_assert_int_eq(s.fail[i], p == DQ_JOB_FAIL ? 1 : 0);
        ck_assert_int_eq(s.ok[i],
                         p == DQ_JOB_FAIL || i == STOLEN || i == CANCELLED
                             ? 0
                             : 1);
        if (p == DQ_JOB_RETRY)
            ck_assert_int_eq(s.attempt[i][1], 2);
        acked += s.ok[i];
    }
    ck_assert_int_eq(acked, N - N / 4 - 2);
    ck_assert_uint_eq(dq_consumer_running(c), 0);

    /* Redis: the failures dead (once each), j7 in flight with its new
     * holder, whose ack still works; nothing else left. */
    ck_stats(cl, q, 0, 0, 1, N / 4);
    dq_jobs *dead = NULL;
    ck_assert_int_eq(dq_dead_list(cl, q, 0, 100, &dead), N / 4);
    for (size_t k = 0; k < (size_t)(N / 4); k++) {
        const dq_job *j = dq_jobs_at(dead, k);
        ck_assert_int_eq(planned(job_index(j)), DQ_JOB_FAIL);
        ck_assert_int_eq(dq_job_attempt(j), 1);
    }
    dq_jobs_free(dead);
    ck_assert_int_eq(dq_ack(cl, q, "j7", dq_job_token(stolen)), 0);
    dq_jobs_free(mine);
    ck_stats(cl, q, 0, 0, 0, N / 4);
    /* Each success landed once, with the consumer's token: an ack retried
     * with it answers 0 (the job's done record), the stale one DQ_ESTALE,
     * the cancelled one DQ_ENOTFOUND. */
    for (int i = 0; i < N; i++) {
        char id[16];
        snprintf(id, sizeof(id), "j%d", i);
        if (planned(i) == DQ_JOB_OK)
            ck_assert_int_eq(dq_ack(cl, q, id, tok[i]),
                             i == STOLEN      ? DQ_ESTALE
                             : i == CANCELLED ? DQ_ENOTFOUND
                                              : 0);
    }
    ck_stats(cl, q, 0, 0, 0, N / 4);
    dq_consumer_free(c);
    dq_async_free(a);
    redisFree(r);
    dq_close(cl);
}
END_TEST

/* A drain with handlers that return at once: every job handled and acked
 * exactly once, some retried; acks go in batches (far fewer script calls
 * than jobs), polls go out with them, and the consumer never holds more
 * than twice its concurrency in leases. */
static int drain_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    record_call(s, job);
    long long leased = tu_sum(s->counts_r, "ZCARD", "dq", s->counts_queue,
                              "lease"); /* no script call */
    if (leased > s->max_leased)
        s->max_leased = (int)leased;
    if (job_index(job) % 10 == 0 && dq_job_attempt(job) == 1)
        return DQ_JOB_RETRY;
    return DQ_JOB_OK;
}

START_TEST(drain_batched_exactly_once) {
    enum { N = 300, C = 10 };
    const char *q = "drain_batched_exactly_once";
    dq_client *cl = open_client();
    redisContext *r = rconn();
    static seen s;
    memset(&s, 0, sizeof(s));
    s.mode = MODE_QUIET;
    s.counts_r = r;
    s.counts_queue = q;
    for (int i = 0; i < N; i++)
        push_j(cl, q, i, 0);
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, q, drain_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, C);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 10);
    long long before = evalsha_calls(r);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert_msg(RUN_UNTIL(s.total_ok == N, 15000), "%d of %d acked",
                  s.total_ok, N);
    run_for(100);
    long long calls = evalsha_calls(r) - before;
    ck_assert_int_eq(s.bad_status, 0);
    for (int i = 0; i < N; i++) {
        int retried = i % 10 == 0;
        ck_assert_int_eq(s.ok[i], 1);
        ck_assert_int_eq(s.calls[i], retried ? 2 : 1);
        ck_assert_int_eq(s.reports[i], retried ? 2 : 1);
    }
    ck_assert_msg(s.max_leased <= 2 * C, "%d leases held", s.max_leased);
    /* One ack call per job would be N calls on top of polls and nacks. */
    fprintf(stderr, "drain: %lld script calls for %d jobs\n", calls, N);
    ck_assert_msg(calls < N, "%lld script calls for %d jobs", calls, N);
    ck_stats(cl, q, 0, 0, 0, 0);
    dq_consumer_free(c);
    dq_async_free(a);
    redisFree(r);
    dq_close(cl);
}
END_TEST

/* A batch of acks lost with the connection (the server frozen past the
 * command timeout) is sent again once the client is back: each job is
 * reported once, acked (0: the first try landed, or the retry did), and
 * nothing is left in Redis. */
static void finish_all_ok_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    seen *s = arg;
    for (int i = 0; i < s->nheld; i++)
        ck_assert_int_eq(dq_consumer_done(s->c, s->held[i], DQ_JOB_OK, -1),
                         0);
}

START_TEST(batched_acks_lost_and_retried) {
    enum { N = 20 };
    const char *q = "batched_acks_lost_and_retried";
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, NULL), 0);
    char uri[600];
    tu_uri(srv.uri, NULL, uri, sizeof(uri));
    dq_client *cl = open_uri(uri, NULL);
    dq_options *o = dq_options_new();
    dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, 300);
    dq_options_set_int(o, DQ_OPT_CONNECT_TIMEOUT_MS, 300);
    dq_async *a = aopen_uri(uri, o, NULL);
    dq_options_free(o);
    static seen s;
    memset(&s, 0, sizeof(s));
    s.mode = MODE_QUIET;
    dq_consumer *c = consumer(a, q, hold_first_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, N);
    for (int i = 0; i < N; i++)
        push_j(cl, q, i, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(s.nheld == N, 5000));
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    struct event *ev = evtimer_new(g_base, finish_all_ok_cb, &s);
    struct timeval tv = {0, 0};
    evtimer_add(ev, &tv);
    run_for(800); /* the batch times out; attempts while frozen fail */
    ck_assert_int_eq(s.finished, 0);
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);
    ck_assert_msg(RUN_UNTIL(s.finished == N, 8000), "%d reports",
                  s.finished);
    run_for(100);
    ck_assert_int_eq(s.finished, N);
    ck_assert_int_eq(s.bad_status, 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(s.reports[i] == 1 && s.ok[i] == 1 && s.calls[i] == 1,
                      "j%d: %d reports, %d ok, %d calls", i, s.reports[i],
                      s.ok[i], s.calls[i]);
    ck_stats(cl, q, 0, 0, 0, 0);
    event_free(ev);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
    th_redis_stop(&srv);
}
END_TEST

/* A graceful stop waits for the answers to acks sent in a batch: the
 * stopped callback comes after every job's report. */
typedef struct stop_after {
    seen *s;
    int n;
    int reports_at_stop;
    int calls;
    int status;
} stop_after;

static void stopped_after(dq_consumer *c, int status, void *ud) {
    (void)c;
    stop_after *sa = ud;
    sa->calls++;
    sa->status = status;
    sa->reports_at_stop = sa->s->finished;
}

static void finish_and_stop_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    stop_after *sa = arg;
    for (int i = 0; i < sa->n; i++)
        ck_assert_int_eq(
            dq_consumer_done(sa->s->c, sa->s->held[i], DQ_JOB_OK, -1), 0);
    ck_assert_int_eq(dq_consumer_stop(sa->s->c, 5000, stopped_after, sa), 0);
}

START_TEST(stop_waits_for_batched_acks) {
    enum { N = 30 };
    const char *q = "stop_waits_for_batched_acks";
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, q, hold_first_handler, &s);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, N);
    for (int i = 0; i < N; i++)
        push_j(cl, q, i, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(s.nheld == N, 5000));
    stop_after sa = {&s, N, -1, 0, -1};
    struct event *ev = evtimer_new(g_base, finish_and_stop_cb, &sa);
    struct timeval tv = {0, 0};
    evtimer_add(ev, &tv);
    int64_t t0 = th_mono_ms();
    ck_assert(RUN_UNTIL(sa.calls == 1, 5000));
    ck_assert_msg(th_mono_ms() - t0 < 2000, "stop took %" PRId64 " ms",
                  th_mono_ms() - t0);
    ck_assert_int_eq(sa.status, 0);
    ck_assert_int_eq(sa.reports_at_stop, N);
    ck_assert_int_eq(s.total_ok, N);
    ck_assert_int_eq(s.bad_status, 0);
    ck_stats(cl, q, 0, 0, 0, 0);
    event_free(ev);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* ---- the sync consumer ---- */

static int sync_handler(dq_consumer *c, const dq_job *job, void *ud) {
    seen *s = ud;
    record_call(s, job);
    int first = dq_job_attempt(job) == 1;
    switch (job_index(job)) {
    case 1:
        return DQ_JOB_OK;
    case 2:
        return first ? DQ_JOB_RETRY : DQ_JOB_OK;
    case 3:
        return DQ_JOB_FAIL;
    case 4:
        ck_assert_int_eq(dq_consumer_done(c, job, DQ_JOB_OK, -1), 0);
        ck_assert_int_eq(dq_consumer_done(c, job, DQ_JOB_OK, -1), DQ_EINVAL);
        return DQ_JOB_ASYNC;
    case 5:
        return first ? 99 : DQ_JOB_OK;
    default:
        return DQ_JOB_OK;
    }
}

static void sync_outcome(dq_consumer *c, const dq_job *job, int outcome,
                         int status, void *ud) {
    seen *s = ud;
    outcome_rec(c, job, outcome, status, ud);
    if (s->total_ok == 4 && s->fail[3] == 1)
        dq_consumer_interrupt(c);
}

static int interrupt_handler(dq_consumer *c, const dq_job *job, void *ud) {
    record_call(ud, job);
    dq_consumer_interrupt(c);
    return DQ_JOB_OK;
}

START_TEST(sync_consumer) {
    dq_client *cl = open_client();
    for (int i = 1; i <= 5; i++)
        push_j(cl, Q, i, i == 5 ? 300 : 0);
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_client *cc = open_client();
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new_sync(cc, Q, sync_handler, &s, &c), 0);
    dq_consumer_set_outcome_cb(c, sync_outcome, &s);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 50);
    ck_assert_int_eq(dq_consumer_start(c), DQ_EINVAL); /* not libevent */
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(dq_consumer_run(c), 0);
    ck_assert_msg(th_mono_ms() - t0 < 5000, "ran %" PRId64 " ms",
                  th_mono_ms() - t0);
    ck_assert_int_eq(s.ok[1] + s.ok[2] + s.ok[4] + s.ok[5], 4);
    ck_assert_int_eq(s.calls[2], 2);
    ck_assert_int_eq(s.calls[5], 2);
    ck_assert_int_eq(s.fail[3], 1);
    ck_assert_int_eq(s.bad_status, 0);
    ck_stats(cl, Q, 0, 0, 0, 1);
    dq_consumer_free(c);

    /* Interrupted in the middle of a claimed batch: the rest is released. */
    const char *q2 = "sync_consumer_batch";
    for (int i = 0; i < 3; i++)
        push_j(cl, q2, i, 0);
    static seen t;
    memset(&t, 0, sizeof(t));
    ck_assert_int_eq(dq_consumer_new_sync(cc, q2, interrupt_handler, &t, &c),
                     0);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 3);
    ck_assert_int_eq(dq_consumer_run(c), 2);
    ck_stats(cl, q2, 0, 2, 0, 0);
    dq_consumer_free(c);
    ck_assert_int_eq(dq_consumer_new_sync(NULL, Q, sync_handler, NULL, &c),
                     DQ_ENULL);
    dq_close(cc);
    dq_close(cl);
}
END_TEST

/* ---- a handler says why a job failed ---- */

/* A binary reason: a NUL and a high byte inside. */
static const char BIN_REASON[] = "bin\0ary\xff tail";
#define BIN_LEN (sizeof(BIN_REASON) - 1)

/* A job finished later with a reason (from a buffer freed at once). */
typedef struct later_reason {
    seen *s;
    const dq_job *job;
    struct event *ev;
} later_reason;

static void later_reason_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    later_reason *l = arg;
    dq_consumer *c = l->s->c;
    char *tmp = malloc(BIN_LEN);
    ck_assert_ptr_nonnull(tmp);
    memcpy(tmp, BIN_REASON, BIN_LEN);
    ck_assert_int_eq(dq_consumer_set_reason(c, l->job, tmp, BIN_LEN), 0);
    memset(tmp, 0, BIN_LEN);
    free(tmp);
    ck_assert_int_eq(dq_consumer_done(c, l->job, DQ_JOB_FAIL, -1), 0);
    /* Finished: no longer running. */
    ck_assert_int_eq(dq_consumer_set_reason(c, l->job, "x", 1), DQ_EINVAL);
    event_free(l->ev);
    free(l);
}

/* j0: bad calls only, then a retry (nothing recorded); j1: a retry with a
 * reason (a too long one after it is refused and changes nothing); j2:
 * finished later as a failure with a binary reason; j3: a success with a
 * reason (ignored). */
static int reason_handler(dq_consumer *c, const dq_job *job, void *ud) {
    seen *s = ud;
    record_call(s, job);
    switch (job_index(job)) {
    case 0:
        tu_reason_refused(c, job, s);
        return DQ_JOB_RETRY;
    case 1:
        tu_reason_retry_later(c, job);
        return DQ_JOB_RETRY;
    case 2: {
        later_reason *l = calloc(1, sizeof(*l));
        ck_assert_ptr_nonnull(l);
        l->s = s;
        l->job = job;
        l->ev = evtimer_new(g_base, later_reason_cb, l);
        struct timeval tv = {0, 30000};
        evtimer_add(l->ev, &tv);
        return DQ_JOB_ASYNC;
    }
    default:
        ck_assert_int_eq(dq_consumer_set_reason(c, job, "unused", 6), 0);
        return DQ_JOB_OK;
    }
}

/* Reports: the job is finished, no reason can be set for it any more. */
static void reason_outcome(dq_consumer *c, const dq_job *job, int outcome,
                           int status, void *ud) {
    ck_assert_int_eq(dq_consumer_set_reason(c, job, "x", 1), DQ_EINVAL);
    outcome_rec(c, job, outcome, status, ud);
}

/* Retries a job without a reason, or (j1) with one. */
static int retry_reason_handler(dq_consumer *c, const dq_job *job,
                                void *ud) {
    record_call(ud, job);
    if (job_index(job) == 1)
        ck_assert_int_eq(dq_consumer_set_reason(c, job, "flaky", 5), 0);
    return DQ_JOB_RETRY;
}

START_TEST(handler_reasons) {
    dq_client *cl = open_client();
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_async *a = aopen();
    dq_consumer *c = consumer(a, Q, reason_handler, &s);
    dq_consumer_set_outcome_cb(c, reason_outcome, &s);
    dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 4);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 600000);
    for (int i = 0; i < 4; i++)
        push_j(cl, Q, i, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert_msg(RUN_UNTIL(s.finished == 4, 5000), "%d of 4 finished",
                  s.finished);
    ck_assert_int_eq(s.bad_status, 0);
    ck_assert_int_eq(s.retry[0] + s.retry[1] + s.fail[2] + s.ok[3], 4);
    tu_reasons_of_retries(cl, Q);
    static char buf[DQ_REASON_MAX + 1];
    int st = 0;
    ck_assert_int_eq(tu_last_error(cl, Q, "j2", buf, &st), (long)BIN_LEN);
    ck_assert(memcmp(buf, BIN_REASON, BIN_LEN) == 0);
    ck_assert_int_eq(st, DQ_JOB_DEAD);
    dq_jobs *l = NULL;
    ck_assert_int_eq(dq_dead_list(cl, Q, 0, 10, &l), 1);
    size_t len = 0;
    const char *e = dq_job_last_error(dq_jobs_at(l, 0), &len);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(len, BIN_LEN);
    ck_assert(memcmp(e, BIN_REASON, BIN_LEN) == 0);
    dq_jobs_free(l);
    ck_stats(cl, Q, 2, 0, 0, 1); /* j3 acked */
    dq_consumer_free(c);

    /* The consumer's max attempts: a retry without a reason dies with
     * "max attempts", one with a reason keeps the handler's, and a job
     * delivered too often already dies with "max attempts" unhandled. */
    const char *q2 = "handler_reasons_max";
    for (int i = 0; i < 3; i++)
        push_j(cl, q2, i, i == 2 ? 0 : 200);
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(cl, q2, 1, 30000, &j, NULL), 1);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), "j2");
    ck_assert_int_eq(dq_nack(cl, q2, "j2", dq_job_token(dq_jobs_at(j, 0)),
                             0, 0),
                     0);
    dq_jobs_free(j);
    static seen m;
    memset(&m, 0, sizeof(m));
    c = consumer(a, q2, retry_reason_handler, &m);
    dq_consumer_set_int(c, DQ_COPT_MAX_ATTEMPTS, 1);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert_msg(RUN_UNTIL(m.fail[0] + m.fail[1] + m.fail[2] == 3, 5000),
                  "%d finished", m.finished);
    ck_assert_int_eq(m.calls[2], 0);
    ck_assert_int_eq(tu_last_error(cl, q2, "j0", buf, &st), 12);
    ck_assert(memcmp(buf, "max attempts", 12) == 0);
    ck_assert_int_eq(tu_last_error(cl, q2, "j1", buf, &st), 5);
    ck_assert(memcmp(buf, "flaky", 5) == 0);
    ck_assert_int_eq(tu_last_error(cl, q2, "j2", buf, &st), 12);
    ck_assert(memcmp(buf, "max attempts", 12) == 0);
    ck_assert_int_eq(st, DQ_JOB_DEAD);
    ck_stats(cl, q2, 0, 0, 0, 3);
    dq_consumer_free(c);

    /* A handler timeout records "handler timeout"; the handler can no
     * longer set a reason for the job it was given. */
    const char *q3 = "handler_reasons_timeout";
    static seen t;
    memset(&t, 0, sizeof(t));
    c = consumer(a, q3, hang_handler, &t);
    dq_consumer_set_int(c, DQ_COPT_HANDLER_TIMEOUT_MS, 100);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(c, DQ_COPT_RETRY_BASE_MS, 600000);
    push_j(cl, q3, 1, 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert(RUN_UNTIL(t.nheld == 1, 3000));
    ck_assert_int_eq(dq_consumer_set_reason(c, t.held[0], "mine", 4), 0);
    ck_assert(RUN_UNTIL(t.retry[1] == 1, 3000));
    ck_assert_int_eq(dq_consumer_set_reason(c, t.held[0], "late", 4),
                     DQ_ESTALE);
    ck_assert_int_eq(dq_consumer_done(c, t.held[0], DQ_JOB_FAIL, -1),
                     DQ_ESTALE);
    ck_assert_int_eq(dq_consumer_set_reason(c, t.held[0], "late", 4),
                     DQ_EINVAL);
    ck_assert_int_eq(tu_last_error(cl, q3, "j1", buf, &st), 15);
    ck_assert(memcmp(buf, "handler timeout", 15) == 0);
    ck_assert_int_eq(st, DQ_JOB_SCHEDULED);
    ck_assert_int_eq(t.bad_status, 0);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

TEST_SUITE("async_consumer", TU_SRV_UNIX,
    {"spread_delays_and_retries", spread_delays_and_retries, 60, &async_fixture},
    {"wake_on_earlier_push", wake_on_earlier_push, 60, &async_fixture},
    {"retry_fail_max_attempts", retry_fail_and_max_attempts, 60, &async_fixture},
    {"backoff_policy", backoff_policy, 60, &async_fixture},
    {"finish_later_concurrency", finish_later_and_concurrency, 60, &async_fixture},
    {"lease_extension", lease_extension, 60, &async_fixture},
    {"handler_timeout", handler_timeout, 60, &async_fixture},
    {"graceful_stop", graceful_stop, 60, &async_fixture},
    {"free_inside_handler", free_inside_handler, 60, &async_fixture},
    {"idle_command_budget", idle_command_budget, 60, &async_fixture},
    {"batched_ack_results", batched_ack_results, 60, &async_fixture},
    {"drain_batched_exactly_once", drain_batched_exactly_once, 60, &async_fixture},
    {"stop_waits_for_batched_acks", stop_waits_for_batched_acks, 60, &async_fixture},
    {"batched_acks_lost_and_retried", batched_acks_lost_and_retried, 60, &async_fixture},
    {"sync_consumer", sync_consumer, 60, &async_fixture},
    {"handler_reasons", handler_reasons, 60, &async_fixture})
