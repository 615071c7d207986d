/*
 * tests/fault/test_rediscrash.c - redis-server SIGKILLed during pushes and
 * restarted (appendonly yes, appendfsync always).
 *
 * A producer pushes 3,000 jobs (single pushes and batches of up to 20) while
 * a consumer polls and acks; every 200..600 ms the test SIGKILLs Redis and
 * restarts it on the same AOF.  Calls that fail while it is down are
 * repeated (pushes with the same ids and DQ_PUSH_KEEP, acks with the same
 * token).  Every push that returned success must survive and be acked
 * exactly once; an ack that returned success must not come back.
 *
 * What this does NOT show: survival of a machine crash or power loss (the
 * page cache dies with the kernel); appendfsync always is what covers that,
 * at the cost of one fsync per write.
 */
#include "fault.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#define NJOBS 3000

START_TEST(redis_sigkilled) {
    uint64_t seed = ft_seed();
    th_redis r;
    ft_start(&r, 0, "appendonly yes\nappendfsync always\n");
    ft_ledger *L = ft_ledger_new("rcrash", "job", NJOBS, 32);
    ft_consumer cons = {.uri = r.uri, .L = L, .inc = 1, .max = 8,
                        .lease_ms = 1500, .work_us = 200};
    ft_producer prod = {.uri = r.uri, .L = L, .lo = 0, .hi = NJOBS,
                        .batch_max = 20, .min_delay_ms = 0,
                        .max_delay_ms = 500, .pace_us = 10000};
    pid_t cpid = ft_fork(ft_consume, &cons);
    pid_t ppid = ft_fork(ft_produce, &prod);

    int64_t t0 = th_mono_ms();
    long kills = 0;
    int64_t down_ms = 0;
    int st = 0, reaped = 0;
    while (!(reaped = waitpid(ppid, &st, WNOHANG) == ppid) && kills < 12 &&
           th_mono_ms() - t0 < 60000) {
        th_sleep_ms(ft_rand_range(200, 600));
        int64_t k0 = th_mono_ms();
        th_redis_kill(&r);
        kills++;
        th_sleep_ms(ft_rand_range(0, 100));
        ck_assert_msg(th_redis_restart(&r) == 0, "restart %ld failed", kills);
        down_ms += th_mono_ms() - k0;
    }
    if (!reaped)
        st = ft_reap(ppid, 60000);
    ft_assert_exit_ok(st, "producer");

    dq_client *c = open_uri(r.uri, NULL);
    int empty = ft_wait_empty(c, "rcrash", 60000);
    int64_t secs = th_mono_ms() - t0;
    L->stop = 1;
    st = ft_reap(cpid, 10000);
    ft_assert_exit_ok(st, "consumer");

    redisContext *admin = th_redis_connect(&r);
    char aof[16] = "?";
    ck_assert_ptr_nonnull(admin);
    ft_info_field(admin, "persistence", "aof_enabled", aof, sizeof(aof));

    ft_report rep;
    ft_analyze(L, NULL, 0, &rep);
    ft_figures("redis_crash", &rep, kills,
               "(SIGKILL of redis-server) downtime_ms=%" PRId64
               " client_io_errors=%" PRId64 " retried_calls=%" PRId64
               " retried_pushes_kept=%" PRId64 " redelivered=%ld "
               "lost_poll_replies=%ld aof_enabled=%s seconds=%.1f seed=%"
               PRIu64,
               down_ms, L->io_errors, L->retries, L->kept, rep.redelivered,
               rep.unrecorded, aof, secs / 1000.0, seed);
    ck_assert_str_eq(aof, "1");
    ck_assert_msg(empty, "queue not empty after 60 s");
    ft_assert_all_done(L, &rep, NJOBS);
    ck_assert_msg(kills > 0 && L->io_errors > 0,
                  "no crash reached the clients");
    redisFree(admin);
    dq_close(c);
    ft_ledger_free(L);
    th_redis_stop(&r);
}
END_TEST

TEST_SUITE("fault_rediscrash", TU_SRV_NONE,
    {"redis_sigkilled", redis_sigkilled, 240, NULL})
