/*
 * bench/cost_worker.c - the client-cost workload: `dqbench --cost-worker
 * URI N`, run under valgrind --tool=callgrind by scen_cost.c.  Each phase
 * (N dq_push, N jobs by push_batch of 100, N poll(max 1)+ack, N jobs by
 * poll(100)+ack_batch) is counted on its own: the stats are zeroed before
 * and dumped after it, tagged with the phase's name.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#if DQB_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(s) ((void)(s))
#endif

/* Phase "pollack1": n poll(max 1) + ack round trips; 0 if all succeeded. */
static int dqb_cost_pollack1(dq_client *c, long n) {
    int bad = 0;
    for (long i = 0; i < n; i++) {
        dq_jobs *js = NULL;
        if (dq_poll(c, DQB_QUEUE, 1, DQB_LEASE_MS, &js, NULL) != 1)
            return 1;
        const dq_job *j = dq_jobs_at(js, 0);
        bad |= dq_ack(c, DQB_QUEUE, dq_job_id(j), dq_job_token(j)) != 0;
        dq_jobs_free(js);
    }
    return bad;
}

/* Phase "pollack100": n/100 poll(max 100) + ack_batch; 0 if all succeeded. */
static int dqb_cost_pollack100(dq_client *c, long n) {
    const char *ids[100], *toks[100];
    int bad = 0;
    for (long i = 0; i < n / 100; i++) {
        dq_jobs *js = NULL;
        if (dq_poll(c, DQB_QUEUE, 100, DQB_LEASE_MS, &js, NULL) != 100)
            return 1;
        for (int k = 0; k < 100; k++) {
            ids[k] = dq_job_id(dq_jobs_at(js, (size_t)k));
            toks[k] = dq_job_token(dq_jobs_at(js, (size_t)k));
        }
        bad |= dq_ack_batch(c, DQB_QUEUE, 100, ids, toks, NULL) != 100;
        dq_jobs_free(js);
    }
    return bad;
}

int dqb_cost_worker(const char *uri, long n) {
    dq_client *c = NULL;
    if (dq_open(uri, NULL, &c) != 0) {
        fprintf(stderr, "cost worker: %s\n", dq_errmsg(c));
        return 1;
    }
    dqb_init_payload();
    uint64_t seed = 3;
    dqb_fill(c, 10, 1, 16, 3600000, 0, &seed); /* warm up: script, buffers */
    int bad = 0;

    CALLGRIND_ZERO_STATS;
    for (long i = 0; i < n; i++)
        bad |= dq_push(c, DQB_QUEUE, dqb_payload, 16, 3600000, NULL, 0, NULL,
                       0, NULL) != 0;
    CALLGRIND_DUMP_STATS_AT("push1");

    const void *pl[100];
    size_t lens[100];
    int64_t d[100];
    for (int i = 0; i < 100; i++)
        pl[i] = dqb_payload, lens[i] = 16, d[i] = 3600000;
    CALLGRIND_ZERO_STATS;
    for (long i = 0; i < n / 100; i++)
        bad |= dq_push_batch(c, DQB_QUEUE, 100, pl, lens, d, NULL, 0, NULL,
                             NULL) != 100;
    CALLGRIND_DUMP_STATS_AT("push100");

    /* Due jobs for the two poll phases. */
    for (int i = 0; i < 100; i++)
        d[i] = 0;
    for (long i = 0; i < n / 100 * 2; i++)
        bad |= dq_push_batch(c, DQB_QUEUE, 100, pl, lens, d, NULL, 0, NULL,
                             NULL) != 100;
    CALLGRIND_ZERO_STATS;
    bad |= dqb_cost_pollack1(c, n);
    CALLGRIND_DUMP_STATS_AT("pollack1");

    CALLGRIND_ZERO_STATS;
    bad |= dqb_cost_pollack100(c, n);
    CALLGRIND_DUMP_STATS_AT("pollack100");
    dq_close(c);
    if (bad)
        fprintf(stderr, "cost worker: a call failed\n");
    return bad;
}
