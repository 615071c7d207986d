/*
 * bench/scen_backlog.c - backlog scaling (runs once): the time of one
 * poll(max 1)+ack round trip with 1k..10M far-future jobs pending, against
 * a 1,000-job queue measured in interleaved blocks (the ratio's base).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define DQB_REF_QUEUE "bench-ref"
#define DQB_BL_BLOCK 100

/* Figures of one backlog level over all runs. */
typedef struct dqb_bl_figs {
    dqb_series big, ref;   /* median round trip, us: big queue, 1k queue */
    dqb_series sbig, sref; /* server time in EVALSHA per round trip, us */
    dqb_series ratio;      /* big / ref of the same run */
} dqb_bl_figs;

/* DQB_BL_BLOCK poll(max 1)+ack round trips on q, each timed; appends the
 * latencies (us) to lat and adds the server's EVALSHA time to *srv_us. */
static void dqb_bl_block(dq_client *cl, const char *q, double *lat, long *k,
                         double *srv_us) {
    dqb_reset_stats();
    for (int i = 0; i < DQB_BL_BLOCK; i++) {
        dq_jobs *js = NULL;
        int64_t t0 = dqb_mono_ns();
        int n = dq_poll(cl, q, 1, DQB_LEASE_MS, &js, NULL);
        if (n == 1) {
            const dq_job *j = dq_jobs_at(js, 0);
            if (dq_ack(cl, q, dq_job_id(j), dq_job_token(j)) != 0)
                dqb_fail("backlog: dq_ack: %s", dq_errmsg(cl));
        }
        int64_t t1 = dqb_mono_ns();
        dq_jobs_free(js);
        if (n != 1) {
            dqb_fail("backlog: dq_poll returned %d: %s", n, dq_errmsg(cl));
            return;
        }
        lat[(*k)++] = (double)(t1 - t0) / 1e3;
    }
    double calls, usec;
    dqb_cmdstat("evalsha", &calls, &usec);
    *srv_us += usec;
}

/* MemAvailable of /proc/meminfo in kB (0 if unknown). */
static long dqb_mem_available_kb(void) {
    long kb = 0;
    FILE *mi = fopen("/proc/meminfo", "r");
    if (mi) {
        char ln[128];
        while (fgets(ln, sizeof(ln), mi))
            if (sscanf(ln, "MemAvailable: %ld kB", &kb) == 1)
                break;
        fclose(mi);
    }
    return kb;
}

/* Checks that q holds want_sch scheduled jobs and none due or in flight. */
static void dqb_bl_check_pending(dq_client *cl, const char *q,
                                 int64_t want_sch) {
    int64_t sch = 0, due = 0, inf = 0;
    if (dq_stats(cl, q, &sch, &due, &inf, NULL, NULL) != 0 ||
        sch != want_sch || due != 0 || inf != 0)
        dqb_fail("backlog: %s: %" PRId64 " scheduled / %" PRId64 " due / "
                 "%" PRId64 " in flight, expected %" PRId64 " / 0 / 0",
                 q, sch, due, inf, want_sch);
}

/* Every run at one backlog level: nops due jobs on each queue, drained by
 * blocks of round trips in ABBA order; lb and lr hold nops latencies. */
static void dqb_bl_measure(const dqb_cfg *c, dq_client *cl, long nops,
                           double *lb, double *lr, uint64_t *seed,
                           dqb_bl_figs *fg) {
    memset(fg, 0, sizeof(*fg));
    for (int r = 0; r < c->runs; r++) {
        dqb_fill_q(cl, DQB_QUEUE, nops, 1000, 16, 0, 0, seed);
        dqb_fill_q(cl, DQB_REF_QUEUE, nops, 1000, 16, 0, 0, seed);
        long kb = 0, kr = 0;
        double ub = 0, ur = 0;
        for (long b = 0; b < nops / DQB_BL_BLOCK; b++) {
            /* ABBA order: drift in machine speed cancels out. */
            if (b % 2 == 0) {
                dqb_bl_block(cl, DQB_REF_QUEUE, lr, &kr, &ur);
                dqb_bl_block(cl, DQB_QUEUE, lb, &kb, &ub);
            } else {
                dqb_bl_block(cl, DQB_QUEUE, lb, &kb, &ub);
                dqb_bl_block(cl, DQB_REF_QUEUE, lr, &kr, &ur);
            }
        }
        double mb = dqb_median(lb, (size_t)kb), mr = dqb_median(lr, (size_t)kr);
        dqb_s_add(&fg->big, mb);
        dqb_s_add(&fg->ref, mr);
        dqb_s_add(&fg->ratio, mb / mr);
        dqb_s_add(&fg->sbig, ub / (double)kb);
        dqb_s_add(&fg->sref, ur / (double)kr);
    }
}

/* The two rows of one backlog level (round trip and server time). */
static void dqb_bl_rows(int64_t level, const dqb_bl_figs *fg) {
    char name[64], num[24];
    dqb_fmt_int(num, sizeof(num), (double)level);
    snprintf(name, sizeof(name), "poll+ack, %s pending", num);
    dqb_row *rw = dqb_val_row(name, &fg->big, "us", "%.1f");
    snprintf(rw->limit, sizeof(rw->limit), "1,000-job queue");
    snprintf(rw->lval, sizeof(rw->lval), "%.1f", dqb_s_med(&fg->ref));
    snprintf(rw->ratio, sizeof(rw->ratio), "%.2f", dqb_s_med(&fg->ratio));
    if (level == 1000000)
        dqb_set_target(rw, "<= 1.5x", dqb_s_med(&fg->ratio), 1.5, 0);
    dqb_row *sr = dqb_val_row("  server time in EVALSHA (both)", &fg->sbig,
                              "us", "%.1f");
    snprintf(sr->limit, sizeof(sr->limit), "1,000-job queue");
    snprintf(sr->lval, sizeof(sr->lval), "%.1f", dqb_s_med(&fg->sref));
    snprintf(sr->ratio, sizeof(sr->ratio), "%.2f",
             dqb_s_ratio(&fg->sbig, &fg->sref));
}

/* False (and a log line and a row) if filling the queue up to `level`
 * from `have` jobs would not fit in the memory available. */
static int dqb_bl_fits(int64_t level, long have) {
    double need = (double)(level - have) * 300.0 * 1.3;
    long avail_kb = dqb_mem_available_kb();
    if (avail_kb > 0 && need > (double)avail_kb * 1024.0 * 0.8) {
        dqb_log("backlog: skipping %" PRId64 " pending: needs ~%.1f GB, "
                "%.1f GB available", level, need / 1e9,
                (double)avail_kb / 1e6);
        dqb_add_row("(larger backlog skipped: memory)");
        return 0;
    }
    return 1;
}

void dqb_scen_backlog_rows(const dqb_cfg *c) {
    char title[240];
    snprintf(title, sizeof(title),
             "backlog: one poll(max 1)+ack round trip with N far-future jobs "
             "pending, median of %ld; interleaved in blocks of %d with a "
             "1,000-job queue (the ratio's base)", c->bl_ops * c->runs,
             DQB_BL_BLOCK);
    dqb_add_section(title);
    static const int64_t levels[] = {1000, 100000, 1000000, 10000000};
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        return;
    uint64_t seed = 17;
    int64_t far = 86400000LL, spread = 365LL * 86400000LL;
    dqb_fill_q(cl, DQB_REF_QUEUE, 1000, 1000, 16, far, spread, &seed);
    long have = 0;
    long nops = (c->bl_ops + DQB_BL_BLOCK - 1) / DQB_BL_BLOCK * DQB_BL_BLOCK;
    double *lb = malloc(sizeof(double) * (size_t)nops);
    double *lr = malloc(sizeof(double) * (size_t)nops);
    if (lb == NULL || lr == NULL)
        goto out;
    for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
        int64_t L = levels[li];
        if (L > c->max_backlog || !dqb_bl_fits(L, have))
            break;
        int64_t tf = dqb_mono_ns();
        if (dqb_fill(cl, L - have, 1000, 16, far, spread, &seed) != 0)
            break;
        have = L;
        dqb_log("backlog: %" PRId64 " pending (filled in %.1f s, used_memory "
                "%.0f MB)", L, (double)(dqb_mono_ns() - tf) / 1e9,
                dqb_info_field("memory", "used_memory") / 1e6);
        dqb_bl_figs fg;
        dqb_bl_measure(c, cl, nops, lb, lr, &seed, &fg);
        dqb_bl_check_pending(cl, DQB_QUEUE, L);
        dqb_bl_check_pending(cl, DQB_REF_QUEUE, 1000);
        dqb_bl_rows(L, &fg);
        char prof[32];
        snprintf(prof, sizeof(prof), "backlog-%" PRId64, L);
        dqb_save_profile(c, prof, DQB_BL_BLOCK);
        dqb_log("backlog %" PRId64 ": poll+ack median %.1f us vs %.1f us on "
                "the 1k queue (x%.2f); server %.1f vs %.1f us", L,
                dqb_s_med(&fg.big), dqb_s_med(&fg.ref), dqb_s_med(&fg.ratio),
                dqb_s_med(&fg.sbig), dqb_s_med(&fg.sref));
    }
out:
    free(lb);
    free(lr);
    dq_close(cl);
    /* Dropping 10M jobs takes seconds: let Redis do it lazily. */
    dqb_adm_do("FLUSHALL ASYNC");
}
