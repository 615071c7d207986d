/*
 * tests/fault/test_crash.c - consumers SIGKILLed at random moments.
 *
 * 20,000 jobs due over 4 s; 4 consumer processes (two ack one by one, two
 * in batches); a supervisor SIGKILLs a random consumer every 50..350 ms and
 * starts a new one.  Every job must be acked exactly once, the queue must
 * end empty, no job may be delivered while an earlier lease on it was still
 * valid, and the redeliveries must be exactly the jobs the killed consumers
 * held (minus those whose ack was cut short but had taken effect).
 */
#include "fault.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define NJOBS 20000
#define NCONS 4
#define SPREAD_MS 4000
#define LEASE_MS 1000
#define MAXINC 512

START_TEST(consumers_sigkilled) {
    uint64_t seed = ft_seed();
    th_redis r;
    ft_start(&r, 0, NULL);
    ft_ledger *L = ft_ledger_new("crash", "job", NJOBS, 32);
    static uint8_t killed[MAXINC];
    static ft_consumer cfg[MAXINC];
    pid_t pid[NCONS];
    int inc_of[NCONS], next_inc = 1;
    for (int k = 0; k < NCONS; k++) {
        int inc = next_inc++;
        cfg[inc] = (ft_consumer){.uri = r.uri, .L = L, .inc = inc, .max = 8,
                                 .lease_ms = LEASE_MS, .batch_ack = k % 2,
                                 .work_us = 400};
        inc_of[k] = inc;
        pid[k] = ft_fork(ft_consume, &cfg[inc]);
    }

    /* All jobs in batches of 1000, due evenly over SPREAD_MS. */
    dq_client *c = open_uri(r.uri, NULL);
    int64_t t0 = th_mono_ms();
    static char idbuf[NJOBS][24], plbuf[NJOBS][24];
    static const char *ids[NJOBS];
    static const void *pls[NJOBS];
    static size_t lens[NJOBS];
    static int64_t delays[NJOBS];
    for (size_t i = 0; i < NJOBS; i++) {
        ft_job_id(idbuf[i], sizeof(idbuf[i]), "job", i);
        ids[i] = idbuf[i];
        lens[i] = ft_payload(plbuf[i], sizeof(plbuf[i]), i);
        pls[i] = plbuf[i];
        delays[i] = (int64_t)(i * SPREAD_MS / NJOBS);
    }
    for (size_t i = 0; i < NJOBS; i += 1000) {
        int rc = dq_push_batch(c, "crash", 1000, pls + i, lens + i,
                               delays + i, ids + i, DQ_PUSH_KEEP, NULL, NULL);
        ck_assert_msg(rc == 1000, "push_batch: %d %s", rc, dq_errmsg(c));
        memset(L->pushed + i, 1, 1000);
    }

    /* Kill while jobs come due. */
    long kills = 0;
    while (th_mono_ms() - t0 < SPREAD_MS + 500 && next_inc < MAXINC) {
        th_sleep_ms(ft_rand_range(50, 350));
        int k = (int)ft_rand_range(0, NCONS - 1);
        kill(pid[k], SIGKILL);
        ft_reap(pid[k], 5000);
        killed[inc_of[k]] = 1;
        kills++;
        int inc = next_inc++;
        cfg[inc] = cfg[inc_of[k]];
        cfg[inc].inc = inc;
        inc_of[k] = inc;
        pid[k] = ft_fork(ft_consume, &cfg[inc]);
    }

    /* Leases of killed consumers run out after LEASE_MS: then everything
     * must drain. */
    int empty = ft_wait_empty(c, "crash", 60000);
    int64_t secs = th_mono_ms() - t0;
    L->stop = 1;
    int status[NCONS];
    for (int k = 0; k < NCONS; k++)
        status[k] = ft_reap(pid[k], 10000);

    ft_report rep;
    ft_analyze(L, killed, MAXINC, &rep);
    ft_figures("consumer_crash", &rep, kills,
               "(SIGKILL) consumers=%d redelivered=%ld "
               "in_flight_at_kills=%ld redelivered_after_kill=%ld "
               "acked_before_death=%ld unrecorded_claims=%ld "
               "max_attempt=%ld seconds=%.1f seed=%" PRIu64,
               NCONS, rep.redelivered, rep.kill_inflight, rep.kill_redeliv,
               rep.resolved, rep.unrecorded, rep.max_attempt, secs / 1000.0,
               seed);
    for (int k = 0; k < NCONS; k++)
        ft_assert_exit_ok(status[k], "consumer");
    ck_assert_msg(empty, "queue not empty after 60 s");
    ft_assert_all_done(L, &rep, NJOBS);
    ck_assert_msg(kills > 0, "no consumer was killed");
    /* Every delivery a killed consumer left unacked came back (or its ack
     * had already landed), and every redelivery is such a one (or follows
     * a poll whose reply a kill cut off). */
    ck_assert_int_eq(rep.kill_inflight, rep.kill_redeliv + rep.resolved);
    ck_assert_int_le(rep.redelivered,
                     rep.kill_redeliv + rep.unrecorded + rep.stale);
    ck_assert_msg(rep.unrecorded <= kills * 8,
                  "%ld unrecorded claims for %ld kills", rep.unrecorded,
                  kills);
    dq_close(c);
    ft_ledger_free(L);
    th_redis_stop(&r);
}
END_TEST

TEST_SUITE("fault_crash", TU_SRV_NONE,
    {"consumers_sigkilled", consumers_sigkilled, 180, NULL})
