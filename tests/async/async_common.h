/*
 * tests/async/async_common.h - helpers of the async suites: an event base
 * per test, a bounded "run the loop until" and an async client that is
 * connected before the test goes on.  Builds on tests/test_common.h (the
 * suite's redis-server g_srv, mono_ms, direct hiredis access).
 */
#ifndef DQ_ASYNC_COMMON_H
#define DQ_ASYNC_COMMON_H

#include <event2/event.h>

#include "delayq-event.h"
#include "test_common.h"

/* The test's loop, with a 5 ms heartbeat so EVLOOP_ONCE always returns. */
static struct event_base *g_base;
static struct event *g_beat;

static inline void beat_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
}

static inline void base_setup(void) {
    g_base = event_base_new();
    ck_assert_ptr_nonnull(g_base);
    g_beat = event_new(g_base, -1, EV_PERSIST, beat_cb, NULL);
    struct timeval tv = {0, 5000};
    event_add(g_beat, &tv);
}

static inline void base_teardown(void) {
    if (g_beat != NULL)
        event_free(g_beat);
    if (g_base != NULL)
        event_base_free(g_base);
    g_beat = NULL;
    g_base = NULL;
}

/* Runs the loop until cond holds or ms pass; evaluates to cond. */
#define RUN_UNTIL(cond, ms)                                                   \
    ({                                                                        \
        int64_t end_ = mono_ms() + (ms);                                      \
        while (!(cond) && mono_ms() < end_)                                   \
            event_base_loop(g_base, EVLOOP_ONCE);                             \
        (cond);                                                               \
    })

/* Runs the loop for ms. */
static inline void run_for(int64_t ms) {
    int64_t end = mono_ms() + ms;
    while (mono_ms() < end)
        event_base_loop(g_base, EVLOOP_ONCE);
}

/* State changes seen by state_rec. */
typedef struct states {
    int connected;    /* DQ_CONNECTED reports */
    int disconnected; /* DQ_DISCONNECTED reports */
    int last_status;  /* status of the last one */
    char reason[300]; /* its reason */
} states;

static inline void state_rec(dq_async *a, int state, int status, const char *reason,
                      void *ud) {
    (void)a;
    states *s = ud;
    if (state == DQ_CONNECTED)
        s->connected++;
    else
        s->disconnected++;
    s->last_status = status;
    snprintf(s->reason, sizeof(s->reason), "%s", reason);
}

/* Opens an async client on uri/opts and waits (2 s) until it is connected. */
static inline dq_async *aopen_uri(const char *uri, const dq_options *opts,
                                  states *st) {
    dq_async *a = NULL;
    int rc = dq_async_open(g_base, uri, opts, &a);
    ck_assert_msg(rc == 0, "dq_async_open: %d %s", rc, dq_async_errmsg(a));
    if (st != NULL)
        dq_async_set_state_cb(a, state_rec, st);
    ck_assert_msg(RUN_UNTIL(dq_async_connected(a), 2000),
                  "async client did not connect: %s",
                  st != NULL ? st->reason : "");
    return a;
}

static inline dq_async *aopen(void) { return aopen_uri(g_srv.uri, NULL, NULL); }

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

static inline void st_rec(dq_async *a, int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

static inline void push_rec(dq_async *a, const char *id, int outcome, int status,
                     void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->outcome = outcome;
    snprintf(r->id, sizeof(r->id), "%s", id ? id : "");
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

/* Keeps the jobs by copying them (they are borrowed). */
static inline void jobs_rec(dq_async *a, const dq_jobs *jobs, int64_t next,
                     int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->v = next;
    r->n = dq_jobs_count(jobs);
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
    /* Keep copies: a dq_job_dup per job, stored in a heap array. */
    if (r->n > 0) {
        dq_job **keep = calloc(r->n, sizeof(*keep));
        ck_assert_ptr_nonnull(keep);
        for (size_t i = 0; i < r->n; i++)
            keep[i] = dq_job_dup(dq_jobs_at(jobs, i));
        r->jobs = (dq_jobs *)keep; /* see kept() */
    }
}

/* The i-th job kept by jobs_rec. */
static inline const dq_job *kept(const res *r, size_t i) {
    ck_assert_uint_lt(i, r->n);
    return ((dq_job **)r->jobs)[i];
}

static inline void res_clear(res *r) {
    if (r->jobs != NULL) {
        for (size_t i = 0; i < r->n; i++)
            dq_job_free(((dq_job **)r->jobs)[i]);
        free(r->jobs);
    }
    memset(r, 0, sizeof(*r));
}

static inline void batch_rec(dq_async *a, size_t n, const char *ids,
                      const int *outcomes, int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->n = n;
    if (ids != NULL)
        snprintf(r->id, sizeof(r->id), "%s", ids); /* first id */
    for (size_t i = 0; outcomes != NULL && i < n && i < 16; i++)
        r->results[i] = outcomes[i];
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

static inline void results_rec(dq_async *a, size_t n, const int *results,
                        int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->n = n;
    for (size_t i = 0; results != NULL && i < n && i < 16; i++)
        r->results[i] = results[i];
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

static inline void extend_rec(dq_async *a, int64_t deadline, int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->v = deadline;
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

static inline void stats_rec(dq_async *a, int64_t sched, int64_t due, int64_t infl,
                      int64_t dead, int64_t next, int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->s[0] = sched;
    r->s[1] = due;
    r->s[2] = infl;
    r->s[3] = dead;
    r->s[4] = next;
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

/* Waits (5 s) for one callback into r and checks its status. */
#define WAIT_CB(r, want_status)                                               \
    do {                                                                      \
        ck_assert_msg(RUN_UNTIL((r).calls > 0, 5000), "no callback");         \
        ck_assert_int_eq((r).calls, 1);                                       \
        ck_assert_msg((r).status == (want_status),                            \
                      "status %d (%s), want %d: %s", (r).status,              \
                      dq_errname((r).status), (want_status), (r).msg);        \
    } while (0)

/* Wall clock in ms (same clock as the server's TIME on this machine). */
static inline int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
