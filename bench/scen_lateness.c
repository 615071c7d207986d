/*
 * bench/scen_lateness.c - lateness at light load: a consumer process waits,
 * then this process pushes late_n jobs due late_base..late_base+late_spread
 * ms on; each job's lateness is its receive time minus its due time, both
 * in the server's clock (calibrated against Redis TIME).  Measured for the
 * sync dq_poll_wait loop and, built with DQ_BENCH_EVENT, for the libevent
 * consumer of delayq-event.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#ifdef DQ_BENCH_EVENT
#include <delayq-event.h>
#include <event2/event.h>
#endif

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Lateness per consumer kind: 0 = dq_poll_wait loop, 1 = the libevent
 * consumer of delayq-event.h (when the library has it). */
#ifdef DQ_BENCH_EVENT
#define DQB_NLATE 2
#else
#define DQB_NLATE 1
#endif
static const char *const dqb_late_kind[2] = {"dq_poll_wait", "event_consumer"};
static const char *const dqb_late_desc[2] = {"dq_poll_wait (max 100)",
                                             "event consumer (conc 100)"};
static dqb_series dqb_late[DQB_NLATE][4]; /* p50 p95 p99 max, ms */
double dqb_late_unc;                          /* ms, worst over runs */
static double *dqb_late_all[DQB_NLATE];       /* samples of all runs */
static size_t dqb_late_nall[DQB_NLATE];

void dqb_late_child(const char *uri, long expect, int max, double offset_us,
                    int64_t bound_ms, dqb_late_res *res, int ready_fd,
                    int go_fd) {
    dq_client *c = NULL;
    if (dq_open(uri, NULL, &c) != 0) {
        dqb_fail("lateness: dq_open %s: %s", uri, dq_errmsg(c));
        _exit(2);
    }
    dq_jobs *js = NULL;
    /* The first call opens and subscribes the wake-up connection(s). */
    if (dq_poll_wait(c, DQB_QUEUE, 1, DQB_LEASE_MS, 0, &js) < 0)
        _exit(2);
    dq_jobs_free(js);
    char x = 1;
    if (write(ready_fd, &x, 1) != 1 || read(go_fd, &x, 1) < 0)
        _exit(2);
    int64_t deadline = dqb_mono_ns() + bound_ms * 1000000;
    while (res->got < expect && dqb_mono_ns() < deadline) {
        js = NULL;
        int n = dq_poll_wait(c, DQB_QUEUE, max, DQB_LEASE_MS, 500, &js);
        int64_t now = dqb_real_us();
        if (n < 0) {
            dqb_fail("lateness: dq_poll_wait: %s", dq_errmsg(c));
            _exit(3);
        }
        double srv_now_ms = ((double)now + offset_us) / 1000.0;
        for (int i = 0; i < n && res->got < expect; i++)
            res->lat_ms[res->got++] =
                srv_now_ms - (double)dq_job_due_ms(dq_jobs_at(js, (size_t)i));
        if (n > 0 && dqb_ack_all(c, js) != n)
            _exit(3);
        dq_jobs_free(js);
        res->t_end = dqb_mono_ns();
    }
    res->ok = res->got == expect;
    dq_close(c);
    _exit(0);
}

#ifdef DQ_BENCH_EVENT
/* The libevent consumer in a process of its own: its handler
 * records the lateness and returns DQ_JOB_OK (the consumer acks). */
typedef struct dqb_ev_ctx {
    dqb_late_res *res;
    long expect;
    double offset_us;
    struct event_base *base;
    dq_async *a;
    dq_consumer *cons;
    int64_t deadline, t_conn;
    int ready_fd, signalled;
} dqb_ev_ctx;

/* The consumer's job handler: records one job's lateness. */
static int dqb_ev_handler(dq_consumer *cons, const dq_job *job, void *ud) {
    dqb_ev_ctx *x = ud;
    int64_t now = dqb_real_us();
    (void)cons;
    if (x->res->got < x->expect)
        x->res->lat_ms[x->res->got++] =
            ((double)now + x->offset_us) / 1000.0 -
            (double)dq_job_due_ms(job);
    return DQ_JOB_OK;
}

/* Every 5 ms: says "ready" 200 ms after connecting, stops when every job
 * was received and acked (or at the time bound). */
static void dqb_ev_tick(evutil_socket_t fd, short what, void *ud) {
    dqb_ev_ctx *x = ud;
    (void)fd;
    (void)what;
    int64_t now = dqb_mono_ns();
    if (!x->signalled && dq_async_connected(x->a)) {
        if (x->t_conn == 0)
            x->t_conn = now;
        else if (now - x->t_conn > 200000000) {
            char b = 1;
            if (write(x->ready_fd, &b, 1) != 1)
                event_base_loopbreak(x->base);
            x->signalled = 1;
        }
    }
    if ((x->res->got >= x->expect && dq_consumer_running(x->cons) == 0 &&
         dq_async_pending(x->a) == 0) ||
        now > x->deadline)
        event_base_loopbreak(x->base);
}

/* The consumer process of kind 1: runs a dq_consumer (concurrency 100) on
 * its own event base until every job was acked or bound_ms passed. */
static void dqb_late_child_event(const char *uri, long expect,
                                 double offset_us, int64_t bound_ms,
                                 dqb_late_res *res, int ready_fd) {
    dqb_ev_ctx x;
    memset(&x, 0, sizeof(x));
    x.res = res;
    x.expect = expect;
    x.offset_us = offset_us;
    x.ready_fd = ready_fd;
    x.deadline = dqb_mono_ns() + bound_ms * 1000000;
    x.base = event_base_new();
    if (x.base == NULL ||
        dq_async_open(x.base, uri, NULL, &x.a) != 0 ||
        dq_consumer_new(x.a, DQB_QUEUE, dqb_ev_handler, &x, &x.cons) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_CONCURRENCY, 100) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_LEASE_MS, DQB_LEASE_MS) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_EXTEND, 0) != 0 ||
        dq_consumer_start(x.cons) != 0) {
        dqb_fail("event consumer: cannot start: %s", dq_async_errmsg(x.a));
        _exit(2);
    }
    struct event *tick = event_new(x.base, -1, EV_PERSIST, dqb_ev_tick, &x);
    struct timeval tv = {0, 5000};
    event_add(tick, &tv);
    event_base_dispatch(x.base);
    event_free(tick);
    res->t_end = dqb_mono_ns();
    res->ok = res->got == expect;
    dq_consumer_free(x.cons);
    dq_async_free(x.a);
    event_base_free(x.base);
    _exit(0);
}
#endif

/* Adds one run's lateness samples of a consumer kind to the figures;
 * returns that run's percentiles. */
static dqb_pctl dqb_late_record(int kind, dqb_late_res *res) {
    size_t got = (size_t)res->got;
    if (dqb_late_all[kind]) {
        memcpy(dqb_late_all[kind] + dqb_late_nall[kind], res->lat_ms,
               got * sizeof(double));
        dqb_late_nall[kind] += got;
    }
    return dqb_s_add_pctl(dqb_late[kind], res->lat_ms, got);
}

int dqb_late_begin(dqb_late_run *lr, redisContext *adm, const char *uri,
                   int event, long n, int max, int64_t bound_ms,
                   const char *what) {
    memset(lr, 0, sizeof(*lr));
    lr->rsize = sizeof(dqb_late_res) + sizeof(double) * (size_t)n;
    lr->res = dqb_shared_alloc(lr->rsize);
    if (lr->res == NULL)
        return -1;
    lr->adm = adm;
    lr->before = dqb_calibrate(adm, 15);
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) {
        dqb_late_free(lr);
        return -1;
    }
    lr->pid = fork();
    if (lr->pid == 0) {
        close(ready[0]);
        close(go[1]);
#ifdef DQ_BENCH_EVENT
        if (event)
            dqb_late_child_event(uri, n, lr->before.offset_us, bound_ms,
                                 lr->res, ready[1]);
#else
        (void)event;
#endif
        dqb_late_child(uri, n, max, lr->before.offset_us, bound_ms, lr->res,
                       ready[1], go[0]);
    }
    close(ready[1]);
    close(go[0]);
    char x;
    if (read(ready[0], &x, 1) != 1)
        dqb_fail("%s: consumer did not start", what);
    close(ready[0]);
    close(go[1]);
    return 0;
}

void dqb_late_wait(dqb_late_run *lr) {
    waitpid(lr->pid, &lr->status, 0);
}

double dqb_late_end(dqb_late_run *lr, long n, const char *what) {
    dqb_clk_cal after = dqb_calibrate(lr->adm, 15);
    int st = lr->status;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !lr->res->ok)
        dqb_fail("%s: consumer got %ld of %ld jobs", what, lr->res->got, n);
    lr->drift_us = fabs(after.offset_us - lr->before.offset_us);
    return (lr->before.unc_us > lr->drift_us ? lr->before.unc_us
                                             : lr->drift_us) / 1000.0;
}

void dqb_late_free(dqb_late_run *lr) {
    if (lr->res != NULL)
        munmap(lr->res, lr->rsize);
    lr->res = NULL;
}

/* One lateness run: a consumer process of the given kind waits, then this
 * process pushes late_n jobs due late_base..late_base+late_spread ms on. */
static void dqb_late_run_kind(const dqb_cfg *c, int run, int kind) {
    long n = c->late_n;
    int64_t bound_ms = c->late_base_ms + c->late_spread_ms + 10000;
    char what[64];
    snprintf(what, sizeof(what), "lateness (%s)", dqb_late_kind[kind]);
    if (dqb_late_all[kind] == NULL)
        dqb_late_all[kind] =
            malloc(sizeof(double) * (size_t)n * (size_t)c->runs);
    dqb_flushall();
    dqb_late_run lr;
    if (dqb_late_begin(&lr, dqb_adm, dqb_srv.uri, kind == 1, n, 100,
                       bound_ms, what) != 0)
        return;
    dq_client *cl = dqb_open_client();
    uint64_t seed = 1000 + (uint64_t)run;
    if (cl)
        dqb_fill(cl, n, (int)(n < 1000 ? n : 1000), 16, c->late_base_ms,
                 c->late_spread_ms, &seed);
    dqb_late_wait(&lr);
    double u = dqb_late_end(&lr, n, what);
    dqb_expect_empty(cl, "lateness");
    dq_close(cl);
    dqb_late_unc = u > dqb_late_unc ? u : dqb_late_unc;
    dqb_pctl p = dqb_late_record(kind, lr.res);
    dqb_log("lateness %s: p50 %.2f p95 %.2f p99 %.2f max %.2f ms (clock "
            "offset %.1f us +-%.1f us, drift %.1f us)", dqb_late_kind[kind],
            p.p50, p.p95, p.p99, p.max, lr.before.offset_us,
            lr.before.unc_us, lr.drift_us);
    dqb_late_free(&lr);
}

void dqb_scen_lateness_run(const dqb_cfg *c, int run) {
    for (int k = 0; k < DQB_NLATE; k++)
        dqb_late_run_kind(c, run, k);
}

/* Writes out/lateness-KIND.dat: the sorted samples of every run and their
 * cumulative fraction (the lateness plot). */
static void dqb_late_write_cdf(const dqb_cfg *c, int k) {
    qsort(dqb_late_all[k], dqb_late_nall[k], sizeof(double), dqb_cmp_double);
    char path[512];
    snprintf(path, sizeof(path), "%s/lateness-%s.dat", c->out,
             dqb_late_kind[k]);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    fprintf(f, "# lateness_ms cumulative_fraction (%zu jobs, %d runs "
               "pooled; clock calibration +-%.3f ms)\n",
            dqb_late_nall[k], c->runs, dqb_late_unc);
    for (size_t i = 0; i < dqb_late_nall[k]; i++)
        fprintf(f, "%.4f %.6f\n", dqb_late_all[k][i],
                (double)(i + 1) / (double)dqb_late_nall[k]);
    fclose(f);
}

void dqb_late_row(const char *name, const dqb_series *s, double unc_ms,
                  int target) {
    dqb_row *rw = dqb_val_row(name, s, "ms", "%.2f");
    snprintf(rw->limit, sizeof(rw->limit), "clock +-%.3f ms", unc_ms);
    if (target)
        dqb_set_target(rw, "<= 5 ms", dqb_s_med(s), 5.0, 0);
}

void dqb_late_rows(const char *who, const dqb_series s[4], double unc_ms,
                   int target) {
    static const char *const names[4] = {"p50", "p95", "p99", "max"};
    for (int i = 0; i < 4; i++) {
        char nm[64];
        snprintf(nm, sizeof(nm), "lateness %s, %s", names[i], who);
        dqb_late_row(nm, &s[i], unc_ms, target && i == 2);
    }
}

void dqb_scen_lateness_rows(const dqb_cfg *c) {
    char title[200];
    snprintf(title, sizeof(title),
             "lateness at light load: %ld jobs due %" PRId64 "..%" PRId64
             " ms after push, 1 consumer process, receive time - due time, "
             "both server clock", c->late_n, c->late_base_ms,
             c->late_base_ms + c->late_spread_ms);
    dqb_add_section(title);
    for (int k = 0; k < DQB_NLATE; k++) {
        dqb_late_rows(dqb_late_desc[k], dqb_late[k], dqb_late_unc, 1);
        dqb_late_write_cdf(c, k);
        free(dqb_late_all[k]);
        dqb_late_all[k] = NULL;
        dqb_late_nall[k] = 0;
    }
}
