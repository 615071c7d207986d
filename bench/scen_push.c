/*
 * bench/scen_push.c - push throughput: one client pushes far-future jobs
 * (16-byte payloads, generated ids), one job per round trip (dq_push) and
 * in batches of 10, 100 and 1000 (dq_push_batch).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <inttypes.h>
#include <math.h>

const int dqb_push_batches[DQB_NPUSH] = {1, 10, 100, 1000};
dqb_series dqb_push[DQB_NPUSH];
static dqb_series dqb_push_srv[DQB_NPUSH];

/* One push run: n jobs, one client, batch 1 = dq_push.  Returns jobs/s;
 * *srv_us = server time in EVALSHA per job. */
static double dqb_push_once(int batch, long n, double *srv_us) {
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        return NAN;
    uint64_t seed = 7;
    /* Warm-up: loads the scripts (first EVALSHA -> NOSCRIPT -> EVAL). */
    dqb_fill(cl, 1, 1, 16, 3600000, 0, &seed);
    dq_stats(cl, DQB_QUEUE, NULL, NULL, NULL, NULL, NULL);
    dqb_flushall();
    dqb_reset_stats();
    int64_t t0 = dqb_mono_ns();
    dqb_push_far(cl, n, batch, &seed);
    int64_t t1 = dqb_mono_ns();
    *srv_us = dqb_srv_us_per_job((double)n);
    int64_t sch = 0;
    if (dq_stats(cl, DQB_QUEUE, &sch, NULL, NULL, NULL, NULL) != 0 || sch != n)
        dqb_fail("push batch %d: %" PRId64 " scheduled, expected %ld", batch,
                 sch, n);
    dq_close(cl);
    return (double)n / ((double)(t1 - t0) / 1e9);
}

void dqb_scen_push_run(const dqb_cfg *c, int run) {
    (void)run;
    for (int b = 0; b < DQB_NPUSH; b++) {
        long n = b == 0 ? c->push1_n : c->pushb_n[b - 1];
        double srv = NAN;
        double v = dqb_push_once(dqb_push_batches[b], n, &srv);
        dqb_s_add(&dqb_push[b], v);
        dqb_s_add(&dqb_push_srv[b], srv);
        char prof[32];
        snprintf(prof, sizeof(prof), "push%d", dqb_push_batches[b]);
        dqb_save_profile(c, prof, (double)n);
        dqb_log("push batch %d: %.0f jobs/s (server %.2f us/job in EVALSHA)",
                dqb_push_batches[b], v, srv);
    }
}

void dqb_scen_push_rows(const dqb_cfg *c) {
    (void)c;
    dqb_add_section("push: one client, 16-byte payloads, delays 1 h + "
                    "U(0..24 h), generated ids");
    for (int b = 0; b < DQB_NPUSH; b++) {
        char name[64];
        if (b == 0)
            snprintf(name, sizeof(name), "push, 1 job per round trip");
        else
            snprintf(name, sizeof(name), "push_batch of %d",
                     dqb_push_batches[b]);
        int lim = b > 0 ? DQB_L_P16 : DQB_L_C1;
        dqb_row *rw = dqb_tput_row(name, &dqb_push[b], dqb_lim_short[lim],
                                   &dqb_lim[lim]);
        if (b == 0)
            dqb_set_target(rw, ">= 25,000", dqb_s_med(&dqb_push[b]), 25000,
                           1);
        else if (dqb_push_batches[b] == 1000)
            dqb_set_target(rw, ">= 150,000", dqb_s_med(&dqb_push[b]), 150000,
                           1);
        dqb_srv_row("  server time in EVALSHA per job", &dqb_push_srv[b]);
    }
}
