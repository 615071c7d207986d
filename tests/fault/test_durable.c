/*
 * tests/fault/test_durable.c - the durable mode (DQ_OPT_DURABLE): every
 * write waits for the replicas, and a poll hands out jobs only once their
 * leases reached them.
 *
 *  - with 1 and 2 replicas online, poll / ack / ack_batch / nack / extend /
 *    cancel succeed, and the replicas already hold their effect when the
 *    call returns;
 *  - with the replica paused (SIGSTOP) or gone, a poll delivers nothing and
 *    answers DQ_EREPLICAS; the job stays leased on the primary and is
 *    delivered once the lease ran out and the replica is back; acks,
 *    nacks and cancels are made and answer DQ_EREPLICAS;
 *  - with min-replicas-to-write on the primary, a write it refuses
 *    (NOREPLICAS) is DQ_EREPLICAS and leaves nothing behind;
 *  - dq_warnings names the settings the mode needs; bad input is refused
 *    as in the default mode, before anything is sent.
 */
#include "fault.h"
#ifdef DQ_TEST_LIBEVENT
#include "test_async.h"
#endif

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* Starts a primary (TCP) and n replicas of it (extra: more primary
 * config, may be NULL); waits until every link is up. */
static void start_set(th_redis *m, th_redis *reps, int n, const char *extra) {
    char conf[256];
    /* no 5 s pause before each replica's first sync */
    snprintf(conf, sizeof(conf), "repl-diskless-sync-delay 0\n%s",
             extra ? extra : "");
    ft_start(m, 1, conf);
    snprintf(conf, sizeof(conf), "replicaof 127.0.0.1 %d\n", m->port);
    for (int i = 0; i < n; i++)
        ft_start(&reps[i], 0, conf);
    redisContext *mc = th_redis_connect(m);
    ck_assert_ptr_nonnull(mc);
    int64_t end = th_mono_ms() + 20000;
    char slaves[32] = "", want[32];
    snprintf(want, sizeof(want), "%d", n);
    while (ft_info_field(mc, "replication", "connected_slaves", slaves,
                         sizeof(slaves)),
           strcmp(slaves, want) != 0) {
        ck_assert_msg(th_mono_ms() < end, "%s of %d replicas up after 20 s",
                      slaves, n);
        th_sleep_ms(20);
    }
    redisFree(mc);
    for (int i = 0; i < n; i++) { /* and each is in sync (not loading) */
        redisContext *rc = th_redis_connect(&reps[i]);
        ck_assert_ptr_nonnull(rc);
        char link[32] = "";
        while (ft_info_field(rc, "replication", "master_link_status", link,
                             sizeof(link)),
               strcmp(link, "up") != 0) {
            ck_assert_msg(th_mono_ms() < end, "replica %d link %s", i, link);
            th_sleep_ms(20);
        }
        redisFree(rc);
    }
    /* ... and streams: a write reaches them all (a replica fresh from its
     * sync is sent the stream only after its first ack). */
    redisContext *pc = th_redis_connect(m);
    ck_assert_ptr_nonnull(pc);
    for (;;) {
        /* (min-replicas-to-write may refuse the SET until they stream) */
        redisReply *set = rcmd_try(pc, "SET dq-test-probe 1");
        int ok = set != NULL && set->type == REDIS_REPLY_STATUS;
        freeReplyObject(set);
        if (ok && ft_cmd_int(pc, "WAIT %d 100", n) >= n)
            break;
        ck_assert_msg(th_mono_ms() < end, "replicas not streaming");
        th_sleep_ms(20);
    }
    freeReplyObject(rcmd_try(pc, "DEL dq-test-probe"));
    redisFree(pc);
}

static void stop_set(th_redis *m, th_redis *reps, int n) {
    for (int i = 0; i < n; i++) {
        if (reps[i].pid > 0)
            kill(reps[i].pid, SIGCONT);
        th_redis_stop(&reps[i]);
    }
    th_redis_stop(m);
}

/* scheduled + due, and in flight, as client c (a replica's) sees them. */
static void counts(dq_client *c, const char *q, int64_t *pending,
                   int64_t *inflight) {
    int64_t s = -1, d = -1, f = -1;
    int rc = dq_stats(c, q, &s, &d, &f, NULL, NULL);
    ck_assert_msg(rc == 0, "stats: %s", dq_errmsg(c));
    *pending = s + d;
    *inflight = f;
}

/* Fails unless every replica client sees pending / inflight jobs now. */
static void on_replicas(dq_client **rc, int n, const char *q, int pending,
                        int inflight, const char *after) {
    for (int i = 0; i < n; i++) {
        int64_t p, f;
        counts(rc[i], q, &p, &f);
        ck_assert_msg(p == pending && f == inflight,
                      "replica %d after %s: pending %" PRId64 " inflight %"
                      PRId64 ", expected %d %d",
                      i, after, p, f, pending, inflight);
    }
}

static void push_id(dq_client *c, const char *q, const char *id) {
    int r = dq_push(c, q, "p", 1, 0, id, DQ_PUSH_KEEP, NULL, 0, NULL);
    ck_assert_msg(r == 0, "push %s: %s: %s", id, dq_errname(r),
                  dq_errmsg(c));
}

/* Polls exactly one job (id want), confirmed. */
static dq_jobs *poll_confirmed(dq_client *c, const char *q, const char *want,
                               int64_t lease_ms) {
    dq_jobs *jobs = NULL;
    int r = dq_poll(c, q, 1, lease_ms, &jobs, NULL);
    ck_assert_msg(r == 1, "poll: %d %s: %s", r, dq_errname(r), dq_errmsg(c));
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), want);
    return jobs;
}

/* Every write of the mode, with n replicas online: each returns what the
 * default mode returns, and the replicas hold its effect on return. */
static void confirmed_ops(int n) {
    th_redis m, reps[2];
    start_set(&m, reps, n, NULL);
    dq_options *o = ft_wait_opts(n, 2000, 1);
    dq_client *c = open_uri(m.uri, o);
    dq_client *rc[2];
    for (int i = 0; i < n; i++)
        rc[i] = open_uri(reps[i].uri, NULL);
    const char *q = "dur";

    push_id(c, q, "a");
    on_replicas(rc, n, q, 1, 0, "push");
    dq_jobs *jobs = poll_confirmed(c, q, "a", 30000);
    on_replicas(rc, n, q, 0, 1, "poll"); /* the lease is there already */
    const dq_job *j = dq_jobs_at(jobs, 0);
    int64_t deadline = 0;
    ck_assert_int_eq(dq_extend(c, q, "a", dq_job_token(j), 60000, &deadline),
                     0);
    ck_assert_int_gt(deadline, dq_job_lease_deadline_ms(j));
    ck_assert_int_eq(dq_nack(c, q, "a", dq_job_token(j), 0, 0), 0);
    on_replicas(rc, n, q, 1, 0, "nack");
    dq_jobs_free(jobs);
    jobs = poll_confirmed(c, q, "a", 30000);
    ck_assert_int_eq(dq_ack(c, q, "a", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    on_replicas(rc, n, q, 0, 0, "ack");
    dq_jobs_free(jobs);

    /* A batch ack, a cancel, a poll that finds nothing. */
    push_id(c, q, "b1");
    push_id(c, q, "b2");
    push_id(c, q, "x");
    ck_assert_int_eq(dq_cancel(c, q, "x", 0), DQ_CANCELED_PENDING);
    jobs = NULL;
    ck_assert_int_eq(dq_poll(c, q, 10, 30000, &jobs, NULL), 2);
    const char *ids[2], *toks[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = dq_job_id(dq_jobs_at(jobs, (size_t)i));
        toks[i] = dq_job_token(dq_jobs_at(jobs, (size_t)i));
    }
    int got[2] = {-99, -99};
    ck_assert_int_eq(dq_ack_batch(c, q, 2, ids, toks, got), 2);
    ck_assert_int_eq(got[0], 0);
    ck_assert_int_eq(got[1], 0);
    on_replicas(rc, n, q, 0, 0, "ack_batch");
    dq_jobs_free(jobs);
    jobs = NULL;
    ck_assert_int_eq(dq_poll(c, q, 1, 30000, &jobs, NULL), 0);
    ck_assert_ptr_null(jobs);

    /* A rejected ack (the token went stale with the nack) is the default
     * mode's answer. */
    push_id(c, q, "s");
    jobs = poll_confirmed(c, q, "s", 30000);
    const char *stale = dq_job_token(dq_jobs_at(jobs, 0));
    ck_assert_int_eq(dq_nack(c, q, "s", stale, 0, 0), 0);
    ck_assert_int_eq(dq_ack(c, q, "s", stale), DQ_ESTALE);
    dq_jobs_free(jobs);

    printf("figures: durable_confirmed_%d: replicas=%d ops=ok\n", n, n);
    fflush(stdout);
    for (int i = 0; i < n; i++)
        dq_close(rc[i]);
    dq_close(c);
    dq_options_free(o);
    stop_set(&m, reps, n);
}

START_TEST(confirmed_one_replica) { confirmed_ops(1); }
END_TEST

START_TEST(confirmed_two_replicas) { confirmed_ops(2); }
END_TEST

/* Polls while the replicas cannot confirm: DQ_EREPLICAS, no jobs. */
static void poll_refused(dq_client *c, const char *q, int64_t lease_ms) {
    dq_jobs *jobs = NULL;
    int64_t next = -5;
    int r = dq_poll(c, q, 10, lease_ms, &jobs, &next);
    ck_assert_msg(r == DQ_EREPLICAS, "poll: %d %s: %s", r, dq_errname(r),
                  dq_errmsg(c));
    ck_assert_ptr_null(jobs);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "not handed out"));
}

/* Polls until job want comes (its lease ran out), for up to ms. */
static dq_jobs *poll_back(dq_client *c, const char *q, const char *want,
                          int64_t ms) {
    int64_t end = th_mono_ms() + ms;
    for (;;) {
        dq_jobs *jobs = NULL;
        int r = dq_poll(c, q, 1, 30000, &jobs, NULL);
        ck_assert_msg(r >= 0, "poll: %s: %s", dq_errname(r), dq_errmsg(c));
        if (r == 1) {
            ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), want);
            return jobs;
        }
        ck_assert_msg(th_mono_ms() < end, "%s not delivered again", want);
        th_sleep_ms(50);
    }
}

/* A primary, one replica, and a durable client c of the primary (WAIT
 * 300 ms) with options o. */
typedef struct one_set {
    th_redis m, rep;
    dq_options *o;
    dq_client *c;
} one_set;

/* Starts s (extra: more primary config, may be NULL); returns s->c. */
static dq_client *one_replica(one_set *s, const char *extra) {
    start_set(&s->m, &s->rep, 1, extra);
    s->o = ft_wait_opts(1, 300, 1);
    s->c = open_uri(s->m.uri, s->o);
    return s->c;
}

/* Closes s->c and stops the servers (a paused replica is woken first). */
static void one_replica_end(one_set *s) {
    dq_close(s->c);
    dq_options_free(s->o);
    stop_set(&s->m, &s->rep, 1);
}

START_TEST(paused_replica) {
    one_set s;
    dq_client *c = one_replica(&s, NULL);
    const char *q = "pz";
    push_id(c, q, "aj");
    push_id(c, q, "held");
    dq_jobs *held = poll_confirmed(c, q, "aj", 30000);

    kill(s.rep.pid, SIGSTOP);
    int64_t t = th_mono_ms();
    poll_refused(c, q, 3000);
    int64_t refused_ms = th_mono_ms() - t;
    ck_assert_int_ge(refused_ms, 250); /* the WAIT timeout, loosely */
    /* The lease is on the primary: no one else gets the job meanwhile. */
    int64_t p, f;
    counts(c, q, &p, &f);
    ck_assert_int_eq(p, 0);
    ck_assert_int_eq(f, 2);
    /* Writes are made, and say they are not confirmed. */
    tu_bad(c, dq_ack(c, q, "aj", dq_job_token(dq_jobs_at(held, 0))),
           DQ_EREPLICAS, "written");
    int r = dq_push(c, q, "p", 1, 60000, "later", 0, NULL, 0, NULL);
    ck_assert_int_eq(r, DQ_EREPLICAS);
    tu_bad(c, dq_cancel(c, q, "later", 0), DQ_EREPLICAS, "0 of 1");
    counts(c, q, &p, &f);
    ck_assert_int_eq(p, 0); /* both made on the primary */
    ck_assert_int_eq(f, 1);

    kill(s.rep.pid, SIGCONT);
    dq_jobs *back = poll_back(c, q, "held", 5000);
    int64_t back_ms = th_mono_ms() - t;
    ck_assert_int_ge(back_ms, 2900); /* not before the lease ran out */
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(back, 0)), 2);
    ck_assert_int_eq(dq_ack(c, q, "held", dq_job_token(dq_jobs_at(back, 0))),
                     0);
    printf("figures: durable_paused: refused_poll_ms=%" PRId64
           " delivered_again_ms=%" PRId64 " (lease 3000, WAIT 300)\n",
           refused_ms, back_ms);
    fflush(stdout);
    dq_jobs_free(held);
    dq_jobs_free(back);
    one_replica_end(&s);
}
END_TEST

START_TEST(replica_gone) {
    one_set s;
    dq_client *c = one_replica(&s, NULL);
    const char *q = "gone";
    push_id(c, q, "n");
    push_id(c, q, "k");
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll(c, q, 2, 30000, &jobs, NULL), 2);

    th_redis_kill(&s.rep);
    /* A nack and a batch ack are made and say so; the batch's results are
     * those of the primary. */
    const dq_job *jn = dq_jobs_at(jobs, 0), *jk = dq_jobs_at(jobs, 1);
    const char *nid = dq_job_id(jn);
    tu_bad(c, dq_nack(c, q, nid, dq_job_token(jn), 0, 0), DQ_EREPLICAS,
           "nack: written");
    const char *ids[2] = {dq_job_id(jk), "nope"};
    const char *toks[2] = {dq_job_token(jk), dq_job_token(jk)};
    int got[2] = {-99, -99};
    ck_assert_int_eq(dq_ack_batch(c, q, 2, ids, toks, got), DQ_EREPLICAS);
    ck_assert_int_eq(got[0], 0);
    ck_assert_int_eq(got[1], DQ_ENOTFOUND);
    /* The nacked job is due: the poll leases it and hands out nothing. */
    int64_t t = th_mono_ms();
    poll_refused(c, q, 1000);
    /* The replica comes back (empty: it resyncs); after the lease the job
     * is delivered, confirmed. */
    ck_assert_int_eq(th_redis_restart(&s.rep), 0);
    dq_jobs *back = poll_back(c, q, nid, 20000);
    ck_assert_int_ge(th_mono_ms() - t, 900);
    ck_assert_int_eq(dq_ack(c, q, nid, dq_job_token(dq_jobs_at(back, 0))), 0);
    ck_assert(ft_queue_empty(c, q));
    dq_jobs_free(jobs);
    dq_jobs_free(back);
    one_replica_end(&s);
}
END_TEST

/* A call that writes nothing (here an ack answered from the done record)
 * on a connection that never wrote still confirms the state it saw: the
 * first ack was made, unreplicated, while the replica was paused, and the
 * retry on a fresh connection must not call it replicated.  (Redis 7.0
 * sets a client's WAIT offset to the primary's after every command, so
 * the WAIT after the read-only script covers the first ack's write.) */
START_TEST(nowrite_retry_unconfirmed) {
    one_set s;
    dq_client *c = one_replica(&s, NULL);
    const char *q = "nw";
    push_id(c, q, "k");
    dq_jobs *jobs = poll_confirmed(c, q, "k", 30000);
    const char *tok = dq_job_token(dq_jobs_at(jobs, 0));
    kill(s.rep.pid, SIGSTOP);
    ck_assert_int_eq(dq_ack(c, q, "k", tok), DQ_EREPLICAS);
    /* The retry, as after a lost reply: a new connection. */
    dq_client *again = open_uri(s.m.uri, s.o);
    int r = dq_ack(again, q, "k", tok);
    /* Valkey 8 keeps a connection's WAIT offset at its own writes, so
     * there the retry confirms without covering the first ack: the limit
     * the README's durable-mode guarantee names. */
    redisContext *pc = th_redis_connect(&s.m);
    ck_assert_ptr_nonnull(pc);
    redisReply *info = rcmd_try(pc, "INFO server");
    int valkey = info != NULL && info->type == REDIS_REPLY_STRING &&
                 strstr(info->str, "server_name:valkey") != NULL;
    freeReplyObject(info);
    redisFree(pc);
    ck_assert_msg(r == (valkey ? DQ_OK : DQ_EREPLICAS),
                  "retried ack on a fresh link (%s): %s",
                  valkey ? "valkey" : "redis", dq_errname(r));
    kill(s.rep.pid, SIGCONT);
    dq_jobs_free(jobs);
    dq_close(again);
    one_replica_end(&s);
}
END_TEST

/* min-replicas-to-write: the primary refuses writes while its replica is
 * away; the durable calls say DQ_EREPLICAS and nothing was written. */
START_TEST(min_replicas_refuse) {
    one_set s;
    dq_client *c = one_replica(
        &s, "min-replicas-to-write 1\nmin-replicas-max-lag 1\n");
    ck_assert_str_eq(dq_warnings(c), "");
    const char *q = "mr";
    push_id(c, q, "a");
    kill(s.rep.pid, SIGSTOP);
    /* The primary counts the replica out after the lag (1 s) passed. */
    int64_t end = th_mono_ms() + 10000;
    int r;
    while ((r = dq_push(c, q, "p", 1, 0, "b", 0, NULL, 0, NULL)) !=
               DQ_EREPLICAS ||
           strstr(dq_errmsg(c), "NOREPLICAS") == NULL) {
        ck_assert_msg(th_mono_ms() < end, "no NOREPLICAS: %s", dq_errmsg(c));
        th_sleep_ms(200);
    }
    dq_jobs *jobs = NULL;
    tu_bad(c, dq_poll(c, q, 10, 30000, &jobs, NULL), DQ_EREPLICAS,
           "NOREPLICAS");
    ck_assert_ptr_null(jobs);
    int64_t p, f;
    counts(c, q, &p, &f);
    ck_assert_int_eq(f, 0); /* refused before it ran: nothing leased */
    kill(s.rep.pid, SIGCONT);
    one_replica_end(&s);
}
END_TEST

/* dq_warnings names what the mode is missing. */
START_TEST(warnings) {
    th_redis m, reps[2];
    start_set(&m, reps, 2, NULL);
    dq_options *o = ft_wait_opts(1, 300, 1);
    dq_client *c = open_uri(m.uri, o);
    const char *w = dq_warnings(c);
    ck_assert_msg(strstr(w, "min-replicas-to-write is 0") != NULL, "%s", w);
    ck_assert_msg(strstr(w, "has 2 replicas but writes wait for 1") != NULL,
                  "%s", w);
    dq_close(c);
    dq_options_free(o);
    o = ft_wait_opts(3, 300, 1);
    c = open_uri(m.uri, o);
    w = dq_warnings(c);
    ck_assert_msg(strstr(w, "has 2 of the 3 replicas") != NULL, "%s", w);
    dq_close(c);
    dq_options_free(o);
    redisContext *mc = th_redis_connect(&m);
    ck_assert_ptr_nonnull(mc);
    freeReplyObject(rcmd_try(mc, "CONFIG SET min-replicas-to-write 1"));
    o = ft_wait_opts(2, 300, 1);
    c = open_uri(m.uri, o);
    w = dq_warnings(c);
    ck_assert_msg(strstr(w, "min-replicas-to-write is 1, below the 2") != NULL,
                  "%s", w);
    dq_close(c);
    freeReplyObject(rcmd_try(mc, "CONFIG SET min-replicas-to-write 2"));
    c = open_uri(m.uri, o);
    ck_assert_str_eq(dq_warnings(c), "");
    dq_close(c);
    /* The default mode says nothing of them. */
    freeReplyObject(rcmd_try(mc, "CONFIG SET min-replicas-to-write 0"));
    c = open_uri(m.uri, NULL);
    ck_assert_str_eq(dq_warnings(c), "");
    dq_close(c);
    redisFree(mc);
    dq_options_free(o);
    stop_set(&m, reps, 2);
}
END_TEST

/* The same bad call on a default and a durable client: the same code,
 * nothing sent. */
#define same_bad(call_d, call_x)                                              \
    do {                                                                      \
        int d_ = (call_d), x_ = (call_x);                                     \
        ck_assert_msg(d_ < 0 && d_ == x_, "%s: default %s, durable %s",       \
                      #call_x, dq_errname(d_), dq_errname(x_));               \
        ck_assert_int_eq(dq_errcode(x), x_);                                  \
    } while (0)

/* The mode needs replicas to wait for; bad input is what it always is. */
START_TEST(bad_input) {
    th_redis m, rep;
    start_set(&m, &rep, 1, NULL);
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_DURABLE, 2), DQ_EINVAL);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_DURABLE, -1), DQ_EINVAL);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_DURABLE, 1), 0);
    dq_client *x = NULL;
    ck_assert_int_eq(dq_open(m.uri, o, &x), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(x), "DQ_OPT_WAIT_REPLICAS"));
    dq_close(x);
    dq_options_free(o);

    o = ft_wait_opts(1, 300, 1);
    x = open_uri(m.uri, o);
    dq_client *d = open_uri(m.uri, NULL);
    redisContext *mc = th_redis_connect(&m);
    ck_assert_ptr_nonnull(mc);
    long long before = commands_processed(mc);
    dq_jobs *jobs = NULL;
    const char *ids[1] = {"i"}, *nul[1] = {NULL};
    same_bad(dq_poll(d, "q", 0, 1000, &jobs, NULL),
             dq_poll(x, "q", 0, 1000, &jobs, NULL));
    same_bad(dq_poll(d, "", 1, 1000, &jobs, NULL),
             dq_poll(x, "", 1, 1000, &jobs, NULL));
    same_bad(dq_ack(d, "q", NULL, "t"), dq_ack(x, "q", NULL, "t"));
    same_bad(dq_ack(d, "q", "i", "bad token"),
             dq_ack(x, "q", "i", "bad token"));
    same_bad(dq_ack_batch(d, "q", 1, ids, nul, NULL),
             dq_ack_batch(x, "q", 1, ids, nul, NULL));
    same_bad(dq_nack(d, "q", "i", "t", -1, 0), dq_nack(x, "q", "i", "t", -1, 0));
    same_bad(dq_extend(d, "q", "i", "t", 0, NULL),
             dq_extend(x, "q", "i", "t", 0, NULL));
    same_bad(dq_cancel(d, "q", "", 0), dq_cancel(x, "q", "", 0));
    same_bad(dq_push(d, "q", NULL, 1, 0, NULL, 0, NULL, 0, NULL),
             dq_push(x, "q", NULL, 1, 0, NULL, 0, NULL, 0, NULL));
    tu_nothing_sent(mc, before);
    redisFree(mc);
    dq_close(x);
    dq_close(d);
    dq_options_free(o);
    stop_set(&m, &rep, 1);
}
END_TEST

#ifdef DQ_TEST_LIBEVENT
/* Runs one async call (started by start, recording into r) to its
 * callback and checks its status. */
#define ACALL(r, start, want)                                                 \
    do {                                                                      \
        memset(&(r), 0, sizeof(r));                                           \
        ck_assert_int_eq((start), 0);                                         \
        WAIT_CB((r), (want));                                                 \
    } while (0)

/* The libevent client in the mode: confirmed ops succeed; with the
 * replica paused a poll delivers nothing, a batch ack and a cancel are
 * made and say so; the job comes back after its lease. */
START_TEST(async_durable) {
    one_set s;
    one_replica(&s, NULL); /* the durable sync client is not used */
    dq_client *rc = open_uri(s.rep.uri, NULL);
    dq_async *a = aopen_uri(s.m.uri, s.o, NULL);
    const char *q = "az";
    res r;
    ACALL(r, dq_async_push(a, q, "p", 1, 0, "a1", 0, push_rec, &r), 0);
    ACALL(r, dq_async_push(a, q, "p", 1, 0, "a2", 0, push_rec, &r), 0);
    ACALL(r, dq_async_push(a, q, "p", 1, 60000, "later", 0, push_rec, &r),
          0);
    on_replicas(&rc, 1, q, 3, 0, "async pushes");
    ACALL(r, dq_async_poll(a, q, 1, 30000, jobs_rec, &r), 1);
    on_replicas(&rc, 1, q, 2, 1, "async poll");
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", dq_job_token(kept(&r, 0)));
    ck_assert_str_eq(dq_job_id(kept(&r, 0)), "a1");
    res_clear(&r);
    res e;
    ACALL(e, dq_async_extend(a, q, "a1", tok, 60000, extend_rec, &e), 0);
    ck_assert_int_gt(e.v, 0);

    kill(s.rep.pid, SIGSTOP);
    ACALL(r, dq_async_poll(a, q, 10, 3000, jobs_rec, &r), DQ_EREPLICAS);
    ck_assert_int_eq((int)r.n, 0);
    ck_assert_ptr_nonnull(strstr(r.msg, "not handed out"));
    int64_t t = th_mono_ms();
    const char *ids[2] = {"a1", "none"}, *toks[2] = {tok, tok};
    ACALL(r, dq_async_ack_batch(a, q, 2, ids, toks, results_rec, &r),
          DQ_EREPLICAS);
    ck_assert_int_eq(r.results[0], 0);
    ck_assert_int_eq(r.results[1], DQ_ENOTFOUND);
    ACALL(r, dq_async_cancel(a, q, "later", 0, st_rec, &r), DQ_EREPLICAS);
    ck_assert_ptr_nonnull(strstr(r.msg, "cancel: written"));
    kill(s.rep.pid, SIGCONT);

    /* a2 was leased by the refused poll: back after its lease. */
    for (;;) {
        ACALL(r, dq_async_poll(a, q, 1, 30000, jobs_rec, &r), (int)r.n);
        if (r.n == 1)
            break;
        ck_assert_msg(th_mono_ms() - t < 8000, "a2 not delivered again");
        run_for(50);
    }
    ck_assert_int_ge(th_mono_ms() - t, 2500);
    ck_assert_str_eq(dq_job_id(kept(&r, 0)), "a2");
    ck_assert_int_eq(dq_job_attempt(kept(&r, 0)), 2);
    snprintf(tok, sizeof(tok), "%s", dq_job_token(kept(&r, 0)));
    res_clear(&r);
    ACALL(e, dq_async_nack(a, q, "a2", tok, 0, DQ_NACK_DEAD, st_rec, &e), 1);
    on_replicas(&rc, 1, q, 0, 0, "async nack");
    dq_async_free(a);
    dq_close(rc);
    one_replica_end(&s);
}
END_TEST

/* dq_async_open refuses the mode without replicas to wait for. */
START_TEST(async_bad_input) {
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_DURABLE, 1), 0);
    dq_async *a = NULL;
    ck_assert_int_eq(dq_async_open(g_base, "redis://127.0.0.1:1", o, &a),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_async_errmsg(a), "DQ_OPT_WAIT_REPLICAS"));
    dq_async_free(a);
    dq_options_free(o);
}
END_TEST

#define ASYNC_TESTS                                                           \
    , {"async_durable", async_durable, 60, &async_fixture},                   \
        {"async_bad_input", async_bad_input, 60, &async_fixture}
#else
#define ASYNC_TESTS
#endif

TEST_SUITE("fault_durable", TU_SRV_NONE,
    {"confirmed_one_replica", confirmed_one_replica, 60, NULL},
    {"confirmed_two_replicas", confirmed_two_replicas, 60, NULL},
    {"paused_replica", paused_replica, 60, NULL},
    {"replica_gone", replica_gone, 90, NULL},
    {"nowrite_retry_unconfirmed", nowrite_retry_unconfirmed, 60, NULL},
    {"min_replicas_refuse", min_replicas_refuse, 60, NULL},
    {"warnings", warnings, 60, NULL},
    {"bad_input", bad_input, 60, NULL} ASYNC_TESTS)
