/*
 * bench/scen_debounce.c - debounced pushes of one id (DQ_PUSH_DEBOUNCE,
 * delay 50 ms, max wait 100 ms) at 10,000 pushes/s from two producer
 * threads, in calls of 20 pushes of the id (a batch applies them in
 * order), for a bounded time (2 s; smoke 0.3 s), while one consumer polls
 * and acks at once and a sampler reads the queue's counts every 2 ms.
 * Without the max wait the job would never run while pushes keep coming;
 * with it the job runs about every max wait.  Figures: the push rate
 * reached, the most pending instances and in-flight jobs seen at once
 * (at most 1 each), runs per second, and the longest interval between two
 * runs while pushing (at most the max wait plus one poll and ack).
 */
#include "bench.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define DQB_DB_DELAY 50
#define DQB_DB_WAIT 100
#define DQB_DB_RATE 10000 /* pushes per second, both producers together */
#define DQB_DB_BATCH 20   /* pushes of the id per call (applied in order) */

static dqb_series dqb_d_rate, dqb_d_pending, dqb_d_inflight, dqb_d_runs,
    dqb_d_gap;

typedef struct dqb_dbx {
    atomic_int stop, pushing;
    atomic_long pushes, runs, bad;
    int64_t end_ns;
    int64_t last_run, max_gap; /* ns, consumer thread only */
    int64_t max_pending, max_inflight;
} dqb_dbx;

static void *dqb_db_producer(void *arg) {
    dqb_dbx *x = arg;
    dq_client *c = dqb_open_client();
    dq_push_opts *o = dq_push_opts_new();
    if (c == NULL || o == NULL ||
        dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, DQB_DB_WAIT) != 0) {
        atomic_fetch_add(&x->bad, 1);
    } else {
        int64_t step = 2 * INT64_C(1000000000) * DQB_DB_BATCH / DQB_DB_RATE,
                next = dqb_mono_ns();
        char pl[DQB_DB_BATCH][24];
        const void *pls[DQB_DB_BATCH];
        size_t lens[DQB_DB_BATCH];
        int64_t delays[DQB_DB_BATCH];
        const char *ids[DQB_DB_BATCH];
        int ocs[DQB_DB_BATCH];
        for (long i = 0; dqb_mono_ns() < x->end_ns; i++) {
            for (int k = 0; k < DQB_DB_BATCH; k++) {
                lens[k] = (size_t)snprintf(pl[k], sizeof(pl[k]), "%ld",
                                           i * DQB_DB_BATCH + k);
                pls[k] = pl[k];
                delays[k] = DQB_DB_DELAY;
                ids[k] = "hot";
            }
            if (dq_push_batch_ex(c, DQB_QUEUE, DQB_DB_BATCH, pls, lens,
                                 delays, ids, DQ_PUSH_DEBOUNCE, o, NULL,
                                 ocs) != DQB_DB_BATCH)
                atomic_fetch_add(&x->bad, 1);
            atomic_fetch_add(&x->pushes, DQB_DB_BATCH);
            next += step;
            int64_t wait = next - dqb_mono_ns();
            if (wait > 0)
                usleep((useconds_t)(wait / 1000));
        }
    }
    dq_push_opts_free(o);
    dq_close(c);
    atomic_fetch_sub(&x->pushing, 1);
    return NULL;
}

static void *dqb_db_consumer(void *arg) {
    dqb_dbx *x = arg;
    dq_client *c = dqb_open_client();
    while (c != NULL && !atomic_load(&x->stop)) {
        dq_jobs *js = NULL;
        int n = dq_poll(c, DQB_QUEUE, 1, 30000, &js, NULL);
        if (n == 1) {
            int64_t now = dqb_mono_ns();
            if (atomic_load(&x->pushing) > 0 && x->last_run > 0 &&
                now - x->last_run > x->max_gap)
                x->max_gap = now - x->last_run;
            x->last_run = now;
            atomic_fetch_add(&x->runs, 1);
            dqb_ack_all(c, js);
        } else {
            usleep(500);
        }
        dq_jobs_free(js);
    }
    dq_close(c);
    return NULL;
}

static void *dqb_db_sampler(void *arg) {
    dqb_dbx *x = arg;
    dq_client *c = dqb_open_client();
    while (c != NULL && !atomic_load(&x->stop)) {
        int64_t s = 0, d = 0, f = 0, dead = 0, next = 0;
        if (dq_stats(c, DQB_QUEUE, &s, &d, &f, &dead, &next) == 0) {
            if (s + d > x->max_pending)
                x->max_pending = s + d;
            if (f > x->max_inflight)
                x->max_inflight = f;
        }
        usleep(2000);
    }
    dq_close(c);
    return NULL;
}

void dqb_scen_debounce_run(const dqb_cfg *c, int run) {
    (void)run;
    dqb_flushall();
    dqb_dbx x;
    memset(&x, 0, sizeof(x));
    int64_t secs_ns = c->mode == 2 ? 300000000 : 2000000000;
    int64_t t0 = dqb_mono_ns();
    x.end_ns = t0 + secs_ns;
    atomic_store(&x.pushing, 2);
    pthread_t p[2], cons, samp;
    pthread_create(&cons, NULL, dqb_db_consumer, &x);
    pthread_create(&samp, NULL, dqb_db_sampler, &x);
    for (int i = 0; i < 2; i++)
        pthread_create(&p[i], NULL, dqb_db_producer, &x);
    for (int i = 0; i < 2; i++)
        pthread_join(p[i], NULL);
    double secs = (double)(dqb_mono_ns() - t0) / 1e9;
    usleep((DQB_DB_WAIT + 100) * 1000); /* the last instance runs */
    atomic_store(&x.stop, 1);
    pthread_join(cons, NULL);
    pthread_join(samp, NULL);
    long pushes = atomic_load(&x.pushes), runs = atomic_load(&x.runs);
    if (atomic_load(&x.bad) > 0)
        dqb_fail("debounce: %ld pushes failed", atomic_load(&x.bad));
    if (x.max_pending > 1 || x.max_inflight > 1)
        dqb_fail("debounce: %" PRId64 " pending, %" PRId64 " in flight at "
                 "once", x.max_pending, x.max_inflight);
    dqb_s_add(&dqb_d_rate, (double)pushes / secs);
    dqb_s_add(&dqb_d_pending, (double)x.max_pending);
    dqb_s_add(&dqb_d_inflight, (double)x.max_inflight);
    dqb_s_add(&dqb_d_runs, (double)runs / secs);
    dqb_s_add(&dqb_d_gap, (double)x.max_gap / 1e6);
    dqb_log("debounce: %ld pushes of one id in %.2f s (%.0f/s), %ld runs, "
            "at most %" PRId64 " pending and %" PRId64 " in flight, longest "
            "interval between runs %.1f ms (max wait %d ms)",
            pushes, secs, (double)pushes / secs, runs, x.max_pending,
            x.max_inflight, (double)x.max_gap / 1e6, DQB_DB_WAIT);
    dqb_flushall();
}

void dqb_scen_debounce_rows(const dqb_cfg *c) {
    (void)c;
    char title[200];
    snprintf(title, sizeof(title),
             "debounced pushes of one id: 2 producers at %d/s together "
             "(calls of %d), delay %d ms, max wait %d ms, 1 consumer acking "
             "at once",
             DQB_DB_RATE, DQB_DB_BATCH, DQB_DB_DELAY, DQB_DB_WAIT);
    dqb_add_section(title);
    dqb_val_row("pushes per second reached", &dqb_d_rate, "pushes/s",
                "%.0f");
    dqb_val_row("most pending instances seen at once (sampled every 2 ms)",
                &dqb_d_pending, "jobs", "%.0f");
    dqb_val_row("most jobs in flight seen at once", &dqb_d_inflight, "jobs",
                "%.0f");
    dqb_val_row("runs per second (about 1000 / max wait)", &dqb_d_runs,
                "runs/s", "%.1f");
    dqb_val_row("longest interval between two runs while pushing",
                &dqb_d_gap, "ms", "%.1f");
}
