/*
 * bench/scen_promote.c - how fast a promoted job is delivered, beside a
 * pushed one, at light load: a consumer process waits in dq_poll_wait
 * (scen_lateness.c's) while this process, one event every
 * DQB_PROMO_PACE_MS, pushes a job due at once and promotes (dq_promote) a
 * job pushed an hour away before the consumer started, taking turns.  Each
 * job's lateness is its receive time minus its due time: the push's or the
 * promote's time on the server, both in the server's clock (calibrated
 * against Redis TIME).  A
 * promote must wake the waiting consumer as a push does (the README's
 * "Waking on time"), so the two should match.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define DQB_PROMO_PACE_MS 5

/* Per kind (0 pushed due now, 1 promoted): p50 p95 p99 max, ms. */
static dqb_series dqb_promo[2][4];
static double dqb_promo_unc;
static const char *const dqb_promo_kind[2] = {"pushed due now", "promoted"};

/* Jobs of each kind per run. */
static long dqb_promo_n(const dqb_cfg *c) { return c->late_n / 2; }

/* Sleeps until mono ns t. */
static void dqb_promo_until(int64_t t) {
    struct timespec ts = {(time_t)(t / 1000000000), (long)(t % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

/* Event i: even, a push of a job due now; odd, the promote of a job pushed
 * an hour away before the consumer started (dqb_promo_far). */
static int dqb_promo_one(dq_client *cl, long i) {
    char id[32];
    snprintf(id, sizeof(id), "%s-%06ld", i % 2 ? "far" : "now", i / 2);
    if (i % 2 == 0)
        return dq_push(cl, DQB_QUEUE, dqb_payload, 16, 0, id, 0, NULL, 0,
                       NULL);
    return dq_promote(cl, DQB_QUEUE, id, 0) == DQ_RESCHED_MOVED ? 0 : -1;
}

/* The n jobs an hour away that the odd events promote. */
static void dqb_promo_far(dq_client *cl, long n) {
    for (long i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "far-%06ld", i);
        if (dq_push(cl, DQB_QUEUE, dqb_payload, 16, 3600000, id, 0, NULL, 0,
                    NULL) != 0)
            dqb_fail("promote: dq_push: %s", dq_errmsg(cl));
    }
}

/* Adds the percentiles of every other sample (from first on) of res to
 * kind's series; returns its p99. */
static double dqb_promo_record(dqb_late_res *res, int kind) {
    size_t m = 0;
    double *v = malloc(sizeof(double) * ((size_t)res->got / 2 + 1));
    for (long i = kind; v != NULL && i < res->got; i += 2)
        v[m++] = res->lat_ms[i];
    dqb_pctl p = dqb_s_add_pctl(dqb_promo[kind], v, m);
    dqb_log("promote, %s: p50 %.2f p95 %.2f p99 %.2f max %.2f ms",
            dqb_promo_kind[kind], p.p50, p.p95, p.p99, p.max);
    free(v);
    return p.p99;
}

/* One run: 2n events, pushes and promotes taking turns, one every
 * DQB_PROMO_PACE_MS, so both kinds meet the same load.  A single waiting
 * consumer receives them in due order, which is the events' order: the
 * i-th received is event i. */
void dqb_scen_promote_run(const dqb_cfg *c, int run) {
    (void)run;
    long n = dqb_promo_n(c), total = 2 * n;
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        return;
    dqb_promo_far(cl, n);
    dqb_late_run lr;
    int64_t bound_ms = total * DQB_PROMO_PACE_MS + 10000;
    if (dqb_late_begin(&lr, dqb_adm, dqb_srv.uri, 0, total, 100, bound_ms,
                       "promote") != 0) {
        dq_close(cl);
        return;
    }
    int64_t t0 = dqb_mono_ns();
    for (long i = 0; i < total; i++) {
        dqb_promo_until(t0 + i * DQB_PROMO_PACE_MS * INT64_C(1000000));
        if (dqb_promo_one(cl, i) != 0)
            dqb_fail("promote: event %ld: %s", i, dq_errmsg(cl));
    }
    dqb_late_wait(&lr);
    double u = dqb_late_end(&lr, total, "promote");
    dqb_expect_empty(cl, "promote");
    dq_close(cl);
    dqb_promo_unc = u > dqb_promo_unc ? u : dqb_promo_unc;
    for (int k = 0; k < 2; k++)
        dqb_promo_record(lr.res, k);
    dqb_late_free(&lr);
}

void dqb_scen_promote_rows(const dqb_cfg *c) {
    char title[200];
    snprintf(title, sizeof(title),
             "promote vs push at light load: %ld jobs each, taking turns, "
             "one every %d ms, 1 waiting consumer process, receive time - "
             "due time (the push's or the promote's), both server clock",
             dqb_promo_n(c), DQB_PROMO_PACE_MS);
    dqb_add_section(title);
    for (int k = 0; k < 2; k++)
        dqb_late_rows(dqb_promo_kind[k], dqb_promo[k], dqb_promo_unc, 0);
}
