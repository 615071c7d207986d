/*
 * tests/fault/test_scriptflush.c - the script cache flushed again and again
 * (SCRIPT FLUSH, SYNC and ASYNC) while producers and consumers run.
 *
 * Every EVALSHA may meet NOSCRIPT: the client must run the script with EVAL
 * instead, for single calls and for every chunk of a pipelined batch (2,500
 * jobs = 3 chunks).  Nothing may fail: every worker error counts, and every
 * job is acked exactly once.
 */
#include "fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define NJOBS 20000
#define NPROD 2
#define NCONS 2

/* calls=N of a command in INFO commandstats, or -1. */
static long long cmd_calls(redisContext *ctx, const char *cmd) {
    char field[64], v[256];
    snprintf(field, sizeof(field), "cmdstat_%s", cmd);
    if (ft_info_field(ctx, "commandstats", field, v, sizeof(v)) != 0)
        return 0;
    const char *p = strstr(v, "calls=");
    return p ? strtoll(p + 6, NULL, 10) : -1;
}

START_TEST(script_cache_flushed) {
    uint64_t seed = ft_seed();
    th_redis r;
    ft_start(&r, 0, NULL);
    ft_ledger *L = ft_ledger_new("flush", "job", NJOBS, 8);
    ft_consumer cons[NCONS];
    ft_producer prod[NPROD];
    pid_t cpid[NCONS], ppid[NPROD];
    for (int k = 0; k < NCONS; k++) {
        cons[k] = (ft_consumer){.uri = r.uri, .L = L, .inc = k + 1,
                                .max = 50, .lease_ms = 30000,
                                .batch_ack = k % 2, .strict = 1};
        cpid[k] = ft_fork(ft_consume, &cons[k]);
    }
    for (int k = 0; k < NPROD; k++) {
        prod[k] = (ft_producer){.uri = r.uri, .L = L,
                                .lo = (size_t)k * NJOBS / NPROD,
                                .hi = (size_t)(k + 1) * NJOBS / NPROD,
                                .batch_max = 2500, .big_pct = 3,
                                .min_delay_ms = 0, .max_delay_ms = 300,
                                .pace_us = 10000, .strict = 1};
        ppid[k] = ft_fork(ft_produce, &prod[k]);
    }

    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    dq_client *c = open_uri(r.uri, NULL);
    int64_t t0 = th_mono_ms();
    long flushes = 0;
    int producers_left = NPROD, st, empty = 0;
    while (th_mono_ms() - t0 < 120000) {
        th_sleep_ms(ft_rand_range(2, 20));
        redisReply *x = rcmd_try(admin, "SCRIPT FLUSH %s",
                               ft_rand_range(0, 1) ? "SYNC" : "ASYNC");
        ck_assert_msg(x != NULL && x->type == REDIS_REPLY_STATUS,
                      "SCRIPT FLUSH failed");
        freeReplyObject(x);
        flushes++;
        for (int k = 0; k < NPROD; k++) {
            if (ppid[k] > 0 && waitpid(ppid[k], &st, WNOHANG) == ppid[k]) {
                ppid[k] = 0;
                producers_left--;
                ft_assert_exit_ok(st, "producer");
            }
        }
        if (producers_left == 0 && (empty = ft_queue_empty(c, "flush")))
            break;
    }
    int64_t secs = th_mono_ms() - t0;
    L->stop = 1;
    for (int k = 0; k < NCONS; k++)
        ft_assert_exit_ok(ft_reap(cpid[k], 10000), "consumer");
    for (int k = 0; k < NPROD; k++)
        if (ppid[k] > 0)
            ft_reap(ppid[k], 1000);
    long long evals = cmd_calls(admin, "eval");
    long long evalshas = cmd_calls(admin, "evalsha");

    ft_report rep;
    ft_analyze(L, NULL, 0, &rep);
    ft_figures("script_flush", &rep, flushes,
               "(SCRIPT FLUSH) evalsha_calls=%lld eval_reloads=%lld "
               "worker_errors=%" PRId64 " seconds=%.1f seed=%" PRIu64,
               evalshas, evals, L->errors, secs / 1000.0, seed);
    ck_assert_msg(producers_left == 0, "producers did not finish");
    ck_assert_msg(empty, "queue not empty after 120 s");
    ft_assert_all_done(L, &rep, NJOBS);
    ck_assert_int_eq(rep.redelivered, 0);
    ck_assert_msg(evals > 0, "no script was ever reloaded");
    redisFree(admin);
    dq_close(c);
    ft_ledger_free(L);
    th_redis_stop(&r);
}
END_TEST

/* The same, deterministic: flush, then one call of every kind, each of
 * which must reload its script and succeed. */
START_TEST(every_call_after_flush) {
    th_redis r;
    ft_start(&r, 0, NULL);
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    dq_client *c = open_uri(r.uri, NULL);
#define FLUSH()                                                        \
    do {                                                               \
        redisReply *x_ = rcmd_try(admin, "SCRIPT FLUSH");                \
        ck_assert_ptr_nonnull(x_);                                     \
        freeReplyObject(x_);                                           \
    } while (0)
#define OK(call)                                                       \
    do {                                                               \
        int rc_ = (call);                                              \
        ck_assert_msg(rc_ >= 0, "%s: %s: %s", #call, dq_errname(rc_),  \
                      dq_errmsg(c));                                   \
    } while (0)
    static const void *pl[2500];
    static size_t lens[2500];
    for (int i = 0; i < 2500; i++)
        pl[i] = "p", lens[i] = 1;
    FLUSH();
    OK(dq_push(c, "f", "a", 1, 60000, "a", 0, NULL, 0, NULL));
    FLUSH();
    int n = dq_push_batch(c, "f", 2500, pl, lens, NULL, NULL, 0, NULL, NULL);
    ck_assert_msg(n == 2500, "batch after flush: %d %s", n, dq_errmsg(c));
    FLUSH();
    dq_jobs *jobs = NULL;
    n = dq_poll(c, "f", 3, 60000, &jobs, NULL);
    ck_assert_msg(n == 3, "poll after flush: %d %s", n, dq_errmsg(c));
    const dq_job *j0 = dq_jobs_at(jobs, 0), *j1 = dq_jobs_at(jobs, 1),
                 *j2 = dq_jobs_at(jobs, 2);
    FLUSH();
    OK(dq_ack(c, "f", dq_job_id(j0), dq_job_token(j0)));
    FLUSH();
    OK(dq_extend(c, "f", dq_job_id(j1), dq_job_token(j1), 1000, NULL));
    FLUSH();
    OK(dq_nack(c, "f", dq_job_id(j1), dq_job_token(j1), 0, DQ_NACK_DEAD));
    FLUSH();
    const char *ids[1] = {dq_job_id(j2)}, *toks[1] = {dq_job_token(j2)};
    OK(dq_ack_batch(c, "f", 1, ids, toks, NULL));
    FLUSH();
    dq_jobs *dead = NULL;
    OK(dq_dead_list(c, "f", 0, 10, &dead));
    ck_assert_int_eq(dq_jobs_count(dead), 1);
    dq_jobs_free(dead);
    FLUSH();
    OK(dq_dead_requeue(c, "f", NULL, 0));
    FLUSH();
    ck_assert_int_eq(dq_cancel(c, "f", "a", 0), DQ_CANCELED_PENDING);
    FLUSH();
    int64_t due = -1;
    OK(dq_stats(c, "f", NULL, &due, NULL, NULL, NULL));
    ck_assert_int_eq(due, 2498);
    FLUSH();
    dq_jobs_free(jobs);
    jobs = NULL;
    n = dq_poll_wait(c, "f", 1, 1000, 1000, &jobs);
    ck_assert_msg(n == 1, "poll_wait after flush: %d %s", n, dq_errmsg(c));
    FLUSH();
    OK(dq_dead_purge(c, "f", NULL));
    dq_jobs_free(jobs);
    dq_close(c);
    redisFree(admin);
    th_redis_stop(&r);
#undef FLUSH
#undef OK
}
END_TEST

TEST_SUITE("fault_scriptflush", TU_SRV_NONE,
    {"script_cache_flushed", script_cache_flushed, 240, NULL},
    {"every_call_after_flush", every_call_after_flush, 60, NULL})
