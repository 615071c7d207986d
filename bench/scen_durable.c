/*
 * bench/scen_durable.c - what the durable mode (DQ_OPT_DURABLE) costs: a
 * primary of its own (TCP, so replicas can follow it) with 1, then 2
 * replicas on this machine, and in each setup the same three workloads in
 * the default mode and in the durable mode waiting for every replica:
 * single pushes (1 job per round trip), poll + ack of one job at a time,
 * and a drain (poll max 100 + ack_batch).  The durable mode adds one WAIT
 * round trip per call that writes; the ratio is to the default mode of the
 * same setup and run.  Loopback replicas: a network adds its round trip
 * to every WAIT.
 */
#include "bench.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define DQB_DUR_SETUPS 2 /* 1 replica, 2 replicas */
#define DQB_DUR_MAX 100  /* jobs per poll of the drain */

/* [setup][0 default, 1 durable] */
static dqb_series dqb_d_push[DQB_DUR_SETUPS][2], dqb_d_pa[DQB_DUR_SETUPS][2],
    dqb_d_drain[DQB_DUR_SETUPS][2];

/* Starts a primary on TCP and n replicas of it, every one streaming (a
 * write reached them all).  0, or -1 after dqb_fail. */
static int dqb_dur_start(th_redis *m, th_redis *reps, int n) {
    if (th_redis_start(m, 1, "repl-diskless-sync-delay 0\n") != 0) {
        dqb_fail("durable: cannot start the primary");
        return -1;
    }
    char conf[96];
    snprintf(conf, sizeof(conf), "replicaof 127.0.0.1 %d\n", m->port);
    for (int i = 0; i < n; i++)
        if (th_redis_start(&reps[i], 0, conf) != 0) {
            dqb_fail("durable: cannot start replica %d", i);
            return -1;
        }
    redisContext *pc = th_redis_connect(m);
    int64_t end = dqb_mono_ns() + INT64_C(30) * 1000000000;
    while (pc != NULL && dqb_mono_ns() < end) {
        redisReply *set = redisCommand(pc, "SET dqb-probe 1");
        redisReply *w = set ? redisCommand(pc, "WAIT %d 100", n) : NULL;
        int ok = w != NULL && w->type == REDIS_REPLY_INTEGER && w->integer >= n;
        freeReplyObject(set);
        freeReplyObject(w);
        if (ok) {
            freeReplyObject(redisCommand(pc, "FLUSHALL"));
            redisFree(pc);
            return 0;
        }
        th_sleep_ms(20);
    }
    if (pc != NULL)
        redisFree(pc);
    dqb_fail("durable: %d replicas not streaming after 30 s", n);
    return -1;
}

/* A client of m: the default mode (n 0) or durable waiting for n. */
static dq_client *dqb_dur_client(const th_redis *m, int n) {
    dq_options *o = dq_options_new();
    dq_client *c = NULL;
    if (o != NULL && n > 0) {
        dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS, n);
        dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS, 5000);
        dq_options_set_int(o, DQ_OPT_DURABLE, 1);
    }
    if (o == NULL || dq_open(m->uri, o, &c) != 0) {
        dqb_fail("durable: dq_open: %s", dq_errmsg(c));
        dq_close(c);
        c = NULL;
    }
    dq_options_free(o);
    return c;
}

/* Jobs per second of k jobs since t0 (ns). */
static double dqb_dur_rate(long k, int64_t t0) {
    return (double)k / ((double)(dqb_mono_ns() - t0) / 1e9);
}

/* n single pushes, due now; jobs/s or NAN. */
static double dqb_dur_push(dq_client *cl, long n) {
    int64_t t0 = dqb_mono_ns();
    for (long i = 0; i < n; i++)
        if (dq_push(cl, DQB_QUEUE, dqb_payload, 16, 0, NULL, 0, NULL, 0,
                    NULL) != 0) {
            dqb_fail("durable: dq_push: %s", dq_errmsg(cl));
            return NAN;
        }
    return dqb_dur_rate(n, t0);
}

/* Polls up to max jobs and acks them (one dq_ack, or a dq_ack_batch);
 * the count, or -1. */
static int dqb_dur_take(dq_client *cl, int max) {
    dq_jobs *js = NULL;
    int k = dq_poll(cl, DQB_QUEUE, max, DQB_LEASE_MS, &js, NULL);
    if (k < 0) {
        dqb_fail("durable: dq_poll: %s", dq_errmsg(cl));
        return -1;
    }
    const dq_job *j = dq_jobs_at(js, 0);
    int acked = k == 0 ? 0
                : max == 1 ? (dq_ack(cl, DQB_QUEUE, dq_job_id(j),
                                     dq_job_token(j)) == 0)
                           : dqb_ack_all(cl, js);
    dq_jobs_free(js);
    if (acked != k) {
        dqb_fail("durable: ack: %s", dq_errmsg(cl));
        return -1;
    }
    return k;
}

/* Takes n due jobs, max per poll; jobs/s or NAN. */
static double dqb_dur_drain(dq_client *cl, long n, int max) {
    long got = 0;
    int64_t t0 = dqb_mono_ns();
    while (got < n) {
        int k = dqb_dur_take(cl, max);
        if (k <= 0) {
            if (k == 0)
                dqb_fail("durable: drained %ld of %ld", got, n);
            return NAN;
        }
        got += k;
    }
    return dqb_dur_rate(n, t0);
}

/* The three workloads with client cl into slot [s][d]. */
static void dqb_dur_measure(const dqb_cfg *c, dq_client *cl, int s, int d) {
    long n1 = c->push1_n / 5, nd = c->drain_n / 2;
    uint64_t seed = 11;
    double push = dqb_dur_push(cl, n1);
    double pa = dqb_dur_drain(cl, n1, 1);
    dqb_fill(cl, nd, 1000, 16, 0, 0, &seed);
    double drain = dqb_dur_drain(cl, nd, DQB_DUR_MAX);
    dqb_expect_empty(cl, "durable");
    dqb_s_add(&dqb_d_push[s][d], push);
    dqb_s_add(&dqb_d_pa[s][d], pa);
    dqb_s_add(&dqb_d_drain[s][d], drain);
    dqb_log("durable: %d replica(s), %s mode: push %.0f/s, poll+ack %.0f/s, "
            "drain %.0f/s", s + 1, d ? "durable" : "default", push, pa,
            drain);
}

void dqb_scen_durable_run(const dqb_cfg *c, int run) {
    (void)run;
    for (int s = 0; s < DQB_DUR_SETUPS; s++) {
        th_redis m, reps[DQB_DUR_SETUPS];
        memset(reps, 0, sizeof(reps));
        if (dqb_dur_start(&m, reps, s + 1) == 0)
            for (int d = 0; d < 2; d++) {
                dq_client *cl = dqb_dur_client(&m, d ? s + 1 : 0);
                if (cl != NULL)
                    dqb_dur_measure(c, cl, s, d);
                dq_close(cl);
            }
        for (int i = 0; i < DQB_DUR_SETUPS; i++)
            th_redis_stop(&reps[i]);
        th_redis_stop(&m);
    }
}

void dqb_scen_durable_rows(const dqb_cfg *c) {
    char title[300];
    snprintf(title, sizeof(title),
             "durable mode (DQ_OPT_DURABLE, WAIT for every replica) against "
             "the default mode, same primary and replicas (loopback), same "
             "run; push (1 job a call) and poll+ack %ld jobs, drain %ld (poll "
             "max %d + ack_batch)",
             c->push1_n / 5, c->drain_n / 2, DQB_DUR_MAX);
    dqb_add_section(title);
    static const char *const what[3] = {"push", "poll + ack, 1 job a poll",
                                        "drain"};
    dqb_series(*const all[3])[2] = {dqb_d_push, dqb_d_pa, dqb_d_drain};
    for (int s = 0; s < DQB_DUR_SETUPS; s++)
        for (int w = 0; w < 3; w++) {
            char name[160];
            snprintf(name, sizeof(name), "%s, %d replica%s: default mode",
                     what[w], s + 1, s ? "s" : "");
            dqb_tput_row(name, &all[w][s][0], "itself", &all[w][s][0]);
            snprintf(name, sizeof(name), "%s, %d replica%s: durable", what[w],
                     s + 1, s ? "s" : "");
            dqb_tput_row(name, &all[w][s][1], "default", &all[w][s][0]);
        }
}
