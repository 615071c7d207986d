/*
 * tests/support/test_async.c - see test_async.h.
 */
#include "test_async.h"

struct event_base *g_base;
struct event *g_beat;

const tu_fixture async_fixture = {base_setup, base_teardown};

/* The heartbeat: does nothing, only makes EVLOOP_ONCE return. */
static void beat_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
}

void base_setup(void) {
    g_base = event_base_new();
    ck_assert_ptr_nonnull(g_base);
    g_beat = event_new(g_base, -1, EV_PERSIST, beat_cb, NULL);
    struct timeval tv = {0, 5000};
    event_add(g_beat, &tv);
}

void base_teardown(void) {
    if (g_beat != NULL)
        event_free(g_beat);
    if (g_base != NULL)
        event_base_free(g_base);
    g_beat = NULL;
    g_base = NULL;
}

/* Runs the loop for ms. */
void run_for(int64_t ms) {
    int64_t end = th_mono_ms() + ms;
    while (th_mono_ms() < end)
        event_base_loop(g_base, EVLOOP_ONCE);
}

void state_rec(dq_async *a, int state, int status, const char *reason,
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
dq_async *aopen_uri(const char *uri, const dq_options *opts,
                                  states *st) {
    dq_async *a = NULL;
    char buf[1024];
    uri = tu_layout_uri(uri, buf, sizeof(buf));
    int rc = dq_async_open(g_base, uri, opts, &a);
    ck_assert_msg(rc == 0, "dq_async_open: %d %s", rc, dq_async_errmsg(a));
    if (st != NULL)
        dq_async_set_state_cb(a, state_rec, st);
    ck_assert_msg(RUN_UNTIL(dq_async_connected(a), 2000),
                  "async client did not connect: %s",
                  st != NULL ? st->reason : "");
    return a;
}

dq_async *aopen(void) { return aopen_uri(g_srv.uri, NULL, NULL); }

void st_rec(dq_async *a, int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

void push_rec(dq_async *a, const char *id, int outcome, int status,
                     void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->outcome = outcome;
    snprintf(r->id, sizeof(r->id), "%s", id ? id : "");
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

/* Keeps the jobs by copying them (they are borrowed). */
void jobs_rec(dq_async *a, const dq_jobs *jobs, int64_t next,
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
const dq_job *kept(const res *r, size_t i) {
    ck_assert_uint_lt(i, r->n);
    return ((dq_job **)r->jobs)[i];
}

void res_clear(res *r) {
    if (r->jobs != NULL) {
        for (size_t i = 0; i < r->n; i++)
            dq_job_free(((dq_job **)r->jobs)[i]);
        free(r->jobs);
    }
    memset(r, 0, sizeof(*r));
}

int res_wait(int rc, res *r) {
    if (rc != 0)
        return rc;
    ck_assert_msg(RUN_UNTIL(r->calls > 0, 5000), "no callback");
    ck_assert_int_eq(r->calls, 1);
    return r->status;
}

int ta_ack(dq_async *a, const char *q, const char *id, const char *tok) {
    res r = {0};
    return res_wait(dq_async_ack(a, q, id, tok, st_rec, &r), &r);
}

int ta_cancel(dq_async *a, const char *q, const char *id, int flags) {
    res r = {0};
    return res_wait(dq_async_cancel(a, q, id, flags, st_rec, &r), &r);
}

void batch_rec(dq_async *a, size_t n, const char *ids,
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

void results_rec(dq_async *a, size_t n, const int *results,
                        int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->n = n;
    for (size_t i = 0; results != NULL && i < n && i < 16; i++)
        r->results[i] = results[i];
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

void extend_rec(dq_async *a, int64_t deadline, int status, void *ud) {
    res *r = ud;
    r->calls++;
    r->status = status;
    r->v = deadline;
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

void info_rec(dq_async *a, const dq_job_info *info, int status, void *ud) {
    info_res *r = ud;
    r->calls++;
    r->status = status;
    r->info = dq_job_info_dup(info);
    ck_assert((info != NULL) == (status == 1));
    ck_assert((info != NULL) == (r->info != NULL));
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

void stats_rec(dq_async *a, int64_t sched, int64_t due, int64_t infl,
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

