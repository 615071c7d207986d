/*
 * bench/scen_features.c - what the lifecycle features cost beside a plain
 * queue, in the same run and the same process: a drain (poll max 100 +
 * ack_batch) of a queue with a rate limit that never binds (the price of
 * logging each delivery), a rate limit that binds (how close deliveries
 * come to it and how often dq_poll_wait polls meanwhile), a drain of
 * repeating jobs (each ack reschedules instead of deleting), and batched
 * pushes of jobs that carry push options (their meta is written at push).
 * Ratios are to the plain queue's figure of the same run.
 */
#include "bench.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define DQB_FEAT_MAX 100       /* jobs per poll */
#define DQB_RATE_N 2000        /* jobs of the binding limit */
#define DQB_RATE_MAX 500       /* ... at most this many */
#define DQB_RATE_WINDOW 250    /* ... per this many ms: 2,000 jobs/s */

static dqb_series dqb_f_plain, dqb_f_rated, dqb_f_push, dqb_f_push_opts,
    dqb_f_repeat;
static dqb_series dqb_f_rate_got, dqb_f_rate_lim, dqb_f_rate_polls,
    dqb_f_rate_peak;

/* Sets the bench queue's rate limit (max 0: none). */
static int dqb_feat_rate(dq_client *cl, int64_t max, int64_t window) {
    const int keys[2] = {DQ_SET_RATE_MAX, DQ_SET_RATE_WINDOW_MS};
    const int64_t vals[2] = {max > 0 ? max : DQ_UNSET,
                             max > 0 ? window : DQ_UNSET};
    if (dq_config_set(cl, DQB_QUEUE, 2, keys, vals) != 0) {
        dqb_fail("features: dq_config_set: %s", dq_errmsg(cl));
        return -1;
    }
    return 0;
}

/* Drains n due jobs with dq_poll + ack_batch; jobs/s, or NAN. */
static double dqb_feat_drain(dq_client *cl, long n) {
    long got = 0;
    int64_t t0 = dqb_mono_ns(), deadline = t0 + INT64_C(120) * 1000000000;
    while (got < n && dqb_mono_ns() < deadline) {
        dq_jobs *js = NULL;
        int k = dq_poll(cl, DQB_QUEUE, DQB_FEAT_MAX, DQB_LEASE_MS, &js, NULL);
        if (k < 0) {
            dqb_fail("features: dq_poll: %s", dq_errmsg(cl));
            return NAN;
        }
        if (k > 0 && dqb_ack_all(cl, js) != k)
            return NAN;
        dq_jobs_free(js);
        got += k;
    }
    if (got != n) {
        dqb_fail("features: drained %ld of %ld", got, n);
        return NAN;
    }
    return (double)n / ((double)(dqb_mono_ns() - t0) / 1e9);
}

/* Pushes n far jobs in batches of 1000, with opts (or none); jobs/s. */
static double dqb_feat_push(dq_client *cl, long n, const dq_push_opts *o) {
    enum { B = 1000 };
    const void *pl[B];
    size_t lens[B];
    int64_t times[B];
    uint64_t seed = 5;
    for (int i = 0; i < B; i++) {
        pl[i] = dqb_payload;
        lens[i] = 16;
    }
    int64_t t0 = dqb_mono_ns();
    for (long done = 0; done < n; done += B) {
        size_t m = n - done < B ? (size_t)(n - done) : B;
        for (size_t i = 0; i < m; i++)
            times[i] = 3600000 + dqb_rng_range(&seed, 86400001);
        if (dq_push_batch_ex(cl, DQB_QUEUE, m, pl, lens, times, NULL, 0, o,
                             NULL, NULL) != (int)m) {
            dqb_fail("features: dq_push_batch_ex: %s", dq_errmsg(cl));
            return NAN;
        }
    }
    return (double)n / ((double)(dqb_mono_ns() - t0) / 1e9);
}

/* n repeating jobs (every hour, ids r0..), all due now: each ack
 * reschedules its job an hour on instead of deleting it.  Returns the
 * drain's jobs/s, or NAN. */
static double dqb_feat_repeat(dq_client *cl, long n) {
    enum { B = 1000 };
    static char idb[B][24];
    const char *ids[B];
    const void *pl[B];
    size_t lens[B];
    dq_push_opts *o = dq_push_opts_new();
    if (o == NULL || dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 3600000) != 0) {
        dq_push_opts_free(o);
        return NAN;
    }
    for (long done = 0; done < n; done += B) {
        size_t m = n - done < B ? (size_t)(n - done) : B;
        for (size_t i = 0; i < m; i++) {
            snprintf(idb[i], sizeof(idb[i]), "r%ld", done + (long)i);
            ids[i] = idb[i];
            pl[i] = dqb_payload;
            lens[i] = 16;
        }
        if (dq_push_batch_ex(cl, DQB_QUEUE, m, pl, lens, NULL, ids, 0, o,
                             NULL, NULL) != (int)m) {
            dqb_fail("features: repeating push: %s", dq_errmsg(cl));
            dq_push_opts_free(o);
            return NAN;
        }
    }
    dq_push_opts_free(o);
    double v = dqb_feat_drain(cl, n);
    int64_t sched = -1;
    dq_stats(cl, DQB_QUEUE, &sched, NULL, NULL, NULL, NULL);
    if (sched != n)
        dqb_fail("features: %" PRId64 " repeating jobs rescheduled, not %ld",
                 sched, n);
    return v;
}

/* The binding limit: DQB_RATE_N due jobs taken with dq_poll_wait by one
 * consumer; records the rate reached, the most deliveries in any window
 * (server ms) and script calls per job. */
static void dqb_feat_binding(dq_client *cl) {
    static int64_t at[DQB_RATE_N];
    uint64_t seed = 3;
    dqb_fill(cl, DQB_RATE_N, 1000, 16, 0, 0, &seed);
    if (dqb_feat_rate(cl, DQB_RATE_MAX, DQB_RATE_WINDOW) != 0)
        return;
    dqb_reset_stats();
    long got = 0;
    int64_t t0 = dqb_mono_ns(), deadline = t0 + INT64_C(60) * 1000000000;
    while (got < DQB_RATE_N && dqb_mono_ns() < deadline) {
        dq_jobs *js = NULL;
        int k = dq_poll_wait(cl, DQB_QUEUE, DQB_FEAT_MAX, DQB_LEASE_MS, 1000,
                             &js);
        if (k < 0) {
            dqb_fail("features: dq_poll_wait: %s", dq_errmsg(cl));
            return;
        }
        /* the server ms of the delivery: its lease deadline - the lease */
        for (int i = 0; i < k && got < DQB_RATE_N; i++)
            at[got++] = dq_job_lease_deadline_ms(dq_jobs_at(js, i)) -
                        DQB_LEASE_MS;
        if (k > 0)
            dqb_ack_all(cl, js);
        dq_jobs_free(js);
    }
    double secs = (double)(dqb_mono_ns() - t0) / 1e9;
    /* After the first window (a full window's worth may go at once), the
     * limit allows rate_max per window: the rate from the first delivery
     * to the last, leaving out the first window's jobs. */
    double span_s = got > 0 ? (double)(at[got - 1] - at[0]) / 1e3 : NAN;
    double steady = (double)(got - DQB_RATE_MAX) / span_s;
    double calls = 0, usec = 0;
    dqb_cmdstat("evalsha", &calls, &usec);
    /* The busiest window (t - W, t] of the deliveries' server ms (the
     * limit's own terms; sliding, two pointers). */
    long peak = 0;
    for (long i = 0, j = 0; i < got; i++) {
        while (at[i] - at[j] >= DQB_RATE_WINDOW)
            j++;
        if (i - j + 1 > peak)
            peak = i - j + 1;
    }
    dqb_s_add(&dqb_f_rate_got, steady);
    dqb_s_add(&dqb_f_rate_lim, DQB_RATE_MAX * 1000.0 / DQB_RATE_WINDOW);
    /* polls: script calls minus the acks (one per poll that got jobs) */
    dqb_s_add(&dqb_f_rate_polls, calls / (double)got);
    dqb_s_add(&dqb_f_rate_peak, (double)peak);
    dqb_feat_rate(cl, 0, 0);
    dqb_log("features: rate limit %d per %d ms: %ld jobs in %.2f s (%.0f/s "
            "after the first window), busiest window %ld, %.0f script calls",
            DQB_RATE_MAX, DQB_RATE_WINDOW, got, secs, steady, peak, calls);
}

void dqb_scen_features_run(const dqb_cfg *c, int run) {
    (void)run;
    long n = c->drain_n;
    uint64_t seed = 17;
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        return;
    /* plain, then the same with a limit that never binds (1,000,000/s) */
    dqb_fill(cl, n, 1000, 16, 0, 0, &seed);
    double plain = dqb_feat_drain(cl, n);
    dqb_fill(cl, n, 1000, 16, 0, 0, &seed);
    if (dqb_feat_rate(cl, DQ_RATE_MAX, 100) != 0)
        goto out;
    double rated = dqb_feat_drain(cl, n);
    dqb_feat_rate(cl, 0, 0);
    dqb_s_add(&dqb_f_plain, plain);
    dqb_s_add(&dqb_f_rated, rated);
    dqb_expect_empty(cl, "features");
    double rep = dqb_feat_repeat(cl, n);
    dqb_s_add(&dqb_f_repeat, rep);
    dqb_flushall();
    dqb_feat_binding(cl);
    dqb_expect_empty(cl, "features (rate limit)");
    /* pushes with and without options */
    dqb_flushall();
    double p0 = dqb_feat_push(cl, n, NULL);
    dqb_flushall();
    dq_push_opts *o = dq_push_opts_new();
    if (o != NULL && dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, 5) == 0) {
        double p1 = dqb_feat_push(cl, n, o);
        dqb_s_add(&dqb_f_push, p0);
        dqb_s_add(&dqb_f_push_opts, p1);
        dqb_log("features: push_batch 1000: %.0f jobs/s plain, %.0f with "
                "max attempts", p0, p1);
    }
    dq_push_opts_free(o);
    dqb_flushall();
    dqb_log("features: drain %ld (max %d): %.0f jobs/s plain, %.0f with a "
            "rate limit that never binds, %.0f repeating (acks reschedule)",
            n, DQB_FEAT_MAX, plain, rated, rep);
out:
    dq_close(cl);
}

void dqb_scen_features_rows(const dqb_cfg *c) {
    char title[200];
    snprintf(title, sizeof(title),
             "lifecycle features beside a plain queue: one process, %ld "
             "jobs (16 B); ratio = to the plain queue of the same run",
             c->drain_n);
    dqb_add_section(title);
    dqb_tput_row("drain, plain queue (poll max 100 + ack_batch)",
                 &dqb_f_plain, "itself", &dqb_f_plain);
    dqb_tput_row("drain, rate limit set but never reached (1,000,000/s)",
                 &dqb_f_rated, "plain", &dqb_f_plain);
    dqb_tput_row("drain, repeating jobs (every ack reschedules its job)",
                 &dqb_f_repeat, "plain", &dqb_f_plain);
    dqb_tput_row("push_batch 1000, plain jobs", &dqb_f_push, "itself",
                 &dqb_f_push);
    dqb_tput_row("push_batch 1000, each with its own max attempts",
                 &dqb_f_push_opts, "plain", &dqb_f_push);
    char name[160];
    snprintf(name, sizeof(name),
             "rate limit %d per %d ms, dq_poll_wait: jobs/s after the "
             "first window",
             DQB_RATE_MAX, DQB_RATE_WINDOW);
    dqb_tput_row(name, &dqb_f_rate_got, "limit", &dqb_f_rate_lim);
    snprintf(name, sizeof(name),
             "  busiest %d ms window (server ms of delivery; limit %d)",
             DQB_RATE_WINDOW, DQB_RATE_MAX);
    dqb_val_row(name, &dqb_f_rate_peak, "jobs", "%.0f");
    dqb_val_row("  script calls per job (polls + acks; 100 jobs a poll: >= 0.02)",
                &dqb_f_rate_polls, "calls", "%.3f");
}
