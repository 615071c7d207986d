/*
 * tests/support/test_async.h - helpers of the async suites: an event base
 * per test, a bounded "run the loop until" and an async client that is
 * connected before the test goes on, and callbacks that record what they
 * were given.  Builds on test_utils.h (the suite's redis-server g_srv, direct
 * hiredis access).
 */
#ifndef DQ_TEST_ASYNC_H
#define DQ_TEST_ASYNC_H

#include <event2/event.h>

#include "delayq-event.h"
#include "test_suite.h"
#include "test_utils.h"

/* The test's loop, with a 5 ms heartbeat so EVLOOP_ONCE always returns;
 * made by base_setup, freed by base_teardown. */
extern struct event_base *g_base;
extern struct event *g_beat;

void base_setup(void);
void base_teardown(void);
/* The checked fixture of every async test: base_setup, base_teardown. */
extern const tu_fixture async_fixture;

/* Runs the loop until cond holds or ms pass; evaluates to cond. */
#define RUN_UNTIL(cond, ms)                                                   \
    ({                                                                        \
        int64_t end_ = th_mono_ms() + (ms);                                   \
        while (!(cond) && th_mono_ms() < end_)                                \
            event_base_loop(g_base, EVLOOP_ONCE);                             \
        (cond);                                                               \
    })

/* Runs the loop for ms. */
void run_for(int64_t ms);

/* State changes seen by state_rec. */
typedef struct states {
    int connected;    /* DQ_CONNECTED reports */
    int disconnected; /* DQ_DISCONNECTED reports */
    int last_status;  /* status of the last one */
    char reason[300]; /* its reason */
} states;

/* State callback: counts into the states given as ud. */
void state_rec(dq_async *a, int state, int status, const char *reason,
               void *ud);

/* Opens an async client on uri/opts and waits (2 s) until it is connected. */
dq_async *aopen_uri(const char *uri, const dq_options *opts, states *st);
/* An async client on g_srv. */
dq_async *aopen(void);

/* Results of one callback, filled by the *_rec callbacks below. */
typedef struct res {
    int calls;        /* times called */
    int status;       /* status */
    int outcome;      /* push outcome */
    char id[DQ_ID_BUF];
    int64_t v;        /* next_due_ms / deadline */
    int64_t s[5];     /* stats */
    dq_jobs *jobs;    /* copy of the jobs (dq_job_dup'ed into a list) */
    size_t n;         /* jobs / results / batch size */
    int results[16];  /* first results / outcomes */
    char msg[512];    /* dq_async_errmsg inside the callback */
} res;

/* Callbacks recording into the res given as ud. */
void st_rec(dq_async *a, int status, void *ud);
void push_rec(dq_async *a, const char *id, int outcome, int status, void *ud);
/* Keeps the jobs by copying them (they are borrowed); see kept(). */
void jobs_rec(dq_async *a, const dq_jobs *jobs, int64_t next, int status,
              void *ud);
void batch_rec(dq_async *a, size_t n, const char *ids, const int *outcomes,
               int status, void *ud);
void results_rec(dq_async *a, size_t n, const int *results, int status,
                 void *ud);
void extend_rec(dq_async *a, int64_t deadline, int status, void *ud);
void stats_rec(dq_async *a, int64_t sched, int64_t due, int64_t infl,
               int64_t dead, int64_t next, int status, void *ud);

/* What a dq_get_cb was given (the info copied: it is borrowed), recorded
 * by info_rec; the caller frees info. */
typedef struct info_res {
    int calls;
    int status;
    dq_job_info *info;
    char msg[512];
} info_res;
void info_rec(dq_async *a, const dq_job_info *info, int status, void *ud);

/* The i-th job kept by jobs_rec. */
const dq_job *kept(const res *r, size_t i);
/* Frees what r kept and zeroes it. */
void res_clear(res *r);
/* Waits (5 s) for the one callback into r of a call that returned rc;
 * returns its status (the call's result) or rc when the call itself
 * failed.  The model tests' async operations are built on it. */
int res_wait(int rc, res *r);
/* dq_async_ack and dq_async_cancel, waited for (res_wait). */
int ta_ack(dq_async *a, const char *q, const char *id, const char *tok);
int ta_cancel(dq_async *a, const char *q, const char *id, int flags);

/* Waits (5 s) for one callback into r and checks its status. */
#define WAIT_CB(r, want_status)                                               \
    do {                                                                      \
        ck_assert_msg(RUN_UNTIL((r).calls > 0, 5000), "no callback");         \
        ck_assert_int_eq((r).calls, 1);                                       \
        ck_assert_msg((r).status == (want_status),                            \
                      "status %d (%s), want %d: %s", (r).status,              \
                      dq_errname((r).status), (want_status), (r).msg);        \
    } while (0)

#endif
