/*
 * tests/async/test_async_multi.c - the libevent consumer over several
 * queues: strict order drains the first queue first; weights 3:1 share
 * deliveries about 3:1 between full queues (measured over 400); a push
 * to an idle queue wakes the consumer with one poll, over its one wake-up
 * connection subscribed to every queue's channel; the handler learns each
 * job's queue and acks and failures land on that queue.
 *
 * Polls are counted on the server (INFO commandstats), never timed.
 */
#include "test_async.h"

#include <delayq-consumer.h>

enum { MAXD = 1000 };

/* What the handler saw. */
typedef struct mseen {
    int n;                 /* handler calls */
    char first[MAXD];      /* first letter of each job's id, in order */
    int qi[MAXD];          /* index of each job's queue (by name) */
    int wrong;             /* queue name not the one of the id's letter */
    int reports, bad;      /* outcome reports; with status < 0 */
    const char *qs[3];     /* the queues, by index; id letter 'a' + index */
} mseen;

static int m_handler(dq_consumer *c, const dq_job *job, void *ud) {
    mseen *s = ud;
    const char *q = dq_consumer_job_queue(c, job);
    const char *id = dq_job_id(job);
    int k = id[0] - 'a';
    if (q == NULL || k < 0 || k > 2 || s->qs[k] == NULL ||
        strcmp(q, s->qs[k]) != 0)
        s->wrong++;
    if (s->n < MAXD) {
        s->first[s->n] = id[0];
        s->qi[s->n] = k;
    }
    s->n++;
    return strncmp(id + 1, "fail", 4) == 0 ? DQ_JOB_FAIL : DQ_JOB_OK;
}

static void m_report(dq_consumer *c, const dq_job *job, int outcome,
                     int status, void *ud) {
    (void)outcome;
    mseen *s = ud;
    const char *q = dq_consumer_job_queue(c, job);
    int k = dq_job_id(job)[0] - 'a';
    if (q == NULL || strcmp(q, s->qs[k]) != 0)
        s->wrong++;
    s->reports++;
    s->bad += status < 0;
}

/* Pushes n jobs due now, ids "<letter><i>". */
static void push_many(dq_client *c, const char *q, char letter, int n) {
    static char idbuf[MAXD][16];
    const char *ids[MAXD];
    const void *pl[MAXD];
    size_t lens[MAXD];
    for (int i = 0; i < n; i++) {
        snprintf(idbuf[i], sizeof(idbuf[i]), "%c%d", letter, i);
        ids[i] = idbuf[i];
        pl[i] = "x";
        lens[i] = 1;
    }
    ck_assert_int_eq(dq_push_batch(c, q, (size_t)n, pl, lens, NULL, ids, 0,
                                   NULL, NULL),
                     n);
}

static void qname(char *buf, size_t n, const char *test, const char *sfx) {
    snprintf(buf, n, "%s.%s", test, sfx);
}

/* Strict: every job of the first queue before any of the second; acks
 * and a failure on each job's own queue. */
START_TEST(strict_order_own_queue) {
    char a[128], b[128];
    qname(a, sizeof(a), Q, "a");
    qname(b, sizeof(b), Q, "b");
    dq_client *cl = open_client();
    push_many(cl, b, 'b', 10);
    push_many(cl, a, 'a', 10);
    push_text(cl, b, "x", 0, "bfail", 0, NULL);
    dq_async *as = aopen();
    static mseen s;
    memset(&s, 0, sizeof(s));
    s.qs[0] = a;
    s.qs[1] = b;
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(as, a, m_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_add_queue(c, b, 5), 1);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_PRIORITY, DQ_PRIO_STRICT),
                     0);
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 1), 0);
    dq_consumer_set_outcome_cb(c, m_report, &s);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert_int_eq(dq_consumer_add_queue(c, "late", 1), DQ_EINVAL);
    ck_assert_msg(RUN_UNTIL(s.reports == 21, 5000), "%d reports", s.reports);
    ck_assert_int_eq(s.wrong, 0);
    ck_assert_int_eq(s.bad, 0);
    for (int i = 0; i < 21; i++)
        ck_assert_msg(s.first[i] == (i < 10 ? 'a' : 'b'),
                      "delivery %d from queue %c", i, s.first[i]);
    dq_async_free(as);
    ck_stats(cl, a, 0, 0, 0, 0);
    ck_stats(cl, b, 0, 0, 0, 1);
    dq_close(cl);
}
END_TEST

/* Weighted 3:1 with both queues full: the first 400 deliveries go about
 * three quarters to the heavy queue. */
START_TEST(weighted_share) {
    char a[128], b[128];
    qname(a, sizeof(a), Q, "a");
    qname(b, sizeof(b), Q, "b");
    dq_client *cl = open_client();
    push_many(cl, a, 'a', 450);
    push_many(cl, b, 'b', 450);
    dq_async *as = aopen();
    static mseen s;
    memset(&s, 0, sizeof(s));
    s.qs[0] = a;
    s.qs[1] = b;
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(as, a, m_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_add_queue(c, b, 1), 1);
    ck_assert_int_eq(dq_consumer_add_queue(c, a, 3), 0); /* its weight */
    ck_assert_int_eq(dq_consumer_set_int(c, DQ_COPT_CONCURRENCY, 1), 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    ck_assert_msg(RUN_UNTIL(s.n >= 400, 20000), "%d deliveries", s.n);
    int heavy = 0;
    for (int i = 0; i < 400; i++)
        heavy += s.first[i] == 'a';
    double share = heavy / 400.0;
    fprintf(stderr, "async weighted_share: heavy (3) %d of 400: %.3f\n",
            heavy, share);
    ck_assert_msg(share >= 0.65 && share <= 0.85, "heavy share %.3f", share);
    ck_assert_int_eq(s.wrong, 0);
    dq_async_free(as);
    dq_close(cl);
}
END_TEST

/* Subscriber connections on the server and the channels they hold. */
static void subscribers(redisContext *r, int *conns, int *channels) {
    redisReply *rep = th_cmd(r, "CLIENT LIST");
    *conns = *channels = 0;
    for (const char *p = strstr(rep->str, " sub="); p != NULL;
         p = strstr(p + 1, " sub=")) {
        int n = atoi(p + 5);
        if (n > 0) {
            (*conns)++;
            *channels += n;
        }
    }
    freeReplyObject(rep);
}

/* Three idle queues on one wake-up connection: a job pushed to the third
 * wakes the consumer with one poll. */
START_TEST(idle_push_one_poll) {
    char q0[128], q1[128], q2[128];
    qname(q0, sizeof(q0), Q, "a");
    qname(q1, sizeof(q1), Q, "b");
    qname(q2, sizeof(q2), Q, "c");
    redisContext *r = rconn();
    dq_client *prod = open_client();
    push_text(prod, q2, "x", 3600000, "cwarm", 0, NULL);
    ck_assert_int_eq(dq_cancel(prod, q2, "cwarm", 0), 1);
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 60000), 0);
    dq_async *as = aopen_uri(g_srv.uri, o, NULL);
    dq_options_free(o);
    static mseen s;
    memset(&s, 0, sizeof(s));
    s.qs[0] = q0;
    s.qs[1] = q1;
    s.qs[2] = q2;
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(as, q0, m_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_add_queue(c, q1, 1), 1);
    ck_assert_int_eq(dq_consumer_add_queue(c, q2, 1), 2);
    dq_consumer_set_outcome_cb(c, m_report, &s);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    int parts = tu_parts();
    const char *qs[3] = {q0, q1, q2};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(RUN_UNTIL(tu_sum(r, "ZCARD", "dq", qs[i], "idle") ==
                                    parts,
                                3000),
                      "%s: not registered", qs[i]);
    run_for(100);
    int conns = 0, chans = 0;
    subscribers(r, &conns, &chans);
    ck_assert_int_eq(conns, 1);
    ck_assert_int_eq(chans, 3 * parts);
    long long before = tu_script_calls(r);
    push_text(prod, q2, "x", 0, "clate", 0, NULL);
    ck_assert(RUN_UNTIL(s.reports == 1, 3000));
    run_for(100);
    long long polls = tu_script_calls(r) - before - 1 - 1; /* push, ack */
    ck_assert_msg(polls == 1, "%lld polls for one push to an idle queue",
                  polls);
    ck_assert_int_eq(s.wrong, 0);
    ck_assert_int_eq(s.qi[0], 2);
    dq_async_free(as);
    ck_stats(prod, q2, 0, 0, 0, 0);
    dq_close(prod);
    redisFree(r);
}
END_TEST

TEST_SUITE("async_multi", TU_SRV_UNIX,
    {"strict_order_own_queue", strict_order_own_queue, 60, &async_fixture},
    {"weighted_share", weighted_share, 60, &async_fixture},
    {"idle_push_one_poll", idle_push_one_poll, 60, &async_fixture})
