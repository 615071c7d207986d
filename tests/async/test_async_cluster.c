/*
 * tests/async/test_async_cluster.c - the libevent client over a Redis
 * Cluster and a Sentinel-named primary (tests/cluster_harness.h starts a
 * private topology per test): operations on queues spread over every
 * primary through one client (with debounce, its follow-up started by the
 * ack, and a done record that stops answering after a replace and a
 * cancel, on plain and partitioned queues), a big batch, a consumer woken through sharded
 * pub/sub, a slot migrated under the client's feet (TRYAGAIN / ASK / MOVED,
 * and the consumer's subscription moving with the slot; a grouped queue
 * with priorities and a limit per group, fair after it), a primary killed
 * with a push issued right after, a Sentinel failover by kill, one by
 * SENTINEL FAILOVER with the old primary alive (followed through
 * +switch-master, never READONLY), and an ACL user refused CLUSTER SHARDS
 * (the map from CLUSTER SLOTS).  Every wait is bounded.  Prints "figures: async_cluster: ..." lines (redirects seen,
 * failover times).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_harness.h"
#include "test_async.h"

static thc_cluster g_c;
static thc_sentinel g_s;
static char g_uri[1024];

static void cl_setup(void) {
    base_setup();
    memset(&g_c, 0, sizeof(g_c));
    memset(&g_s, 0, sizeof(g_s));
}

static void cl_teardown(void) {
    thc_cluster_stop(&g_c);
    thc_sentinel_stop(&g_s);
    base_teardown();
}

static const tu_fixture cl_fixture = {cl_setup, cl_teardown};

/* 3 primaries with one replica each; g_uri names them. */
static void cluster_up(void) {
    ck_assert_msg(thc_cluster_start(&g_c, 3, 1, NULL) == 0,
                  "cluster did not start (see thc: messages)");
    thc_cluster_uri(&g_c, g_uri, sizeof(g_uri));
    ck_assert(g_uri[0] != '\0');
}

/* Options: command timeout and wait cap (0: default), WAIT replicas. */
static dq_options *opts(int64_t cmd_ms, int64_t cap_ms, int64_t replicas) {
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    if (cmd_ms > 0)
        dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, cmd_ms);
    if (cap_ms > 0)
        dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, cap_ms);
    if (replicas > 0)
        dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS, replicas);
    return o;
}

/* A client on uri (connected within 10 s). */
static dq_async *copen(const char *uri, const dq_options *o, states *st) {
    dq_async *a = NULL;
    int rc = dq_async_open(g_base, uri, o, &a);
    ck_assert_msg(rc == 0, "dq_async_open(%s): %d %s", uri, rc,
                  dq_async_errmsg(a));
    if (st != NULL)
        dq_async_set_state_cb(a, state_rec, st);
    ck_assert_msg(RUN_UNTIL(dq_async_connected(a), 10000),
                  "not connected to %s: %s", uri, st ? st->reason : "");
    return a;
}

/* Waits (ms) for the one callback into r and checks its status. */
#define WAIT_CB_MS(r, want_status, ms)                                        \
    do {                                                                      \
        ck_assert_msg(RUN_UNTIL((r).calls > 0, (ms)), "no callback");         \
        ck_assert_int_eq((r).calls, 1);                                       \
        ck_assert_msg((r).status == (want_status),                            \
                      "status %d (%s), want %d: %s", (r).status,              \
                      dq_errname((r).status), (want_status), (r).msg);        \
    } while (0)

/* The node that owns queue's keys (their hash tag is the queue's name). */
static int owner_of(const char *queue) {
    char tag[300];
    snprintf(tag, sizeof(tag), "{%s}", queue);
    return thc_owner(&g_c, thc_slot_of(tag));
}

static int slot_of_queue(const char *queue) {
    char tag[300];
    snprintf(tag, sizeof(tag), "{%s}", queue);
    return thc_slot_of(tag);
}

/* Sum over the live nodes of INFO errorstats' errorstat_<name> counts. */
static long long errorstat(const char *name) {
    long long sum = 0;
    char key[64];
    snprintf(key, sizeof(key), "errorstat_%s:count=", name);
    for (int i = 0; i < g_c.count; i++) {
        if (g_c.nodes[i].r.pid <= 0)
            continue;
        redisContext *r = thc_connect(g_c.nodes[i].r.port);
        if (r == NULL)
            continue;
        redisReply *rep = redisCommand(r, "INFO errorstats");
        if (rep != NULL && rep->type == REDIS_REPLY_STRING) {
            const char *p = strstr(rep->str, key);
            if (p != NULL)
                sum += atoll(p + strlen(key));
        }
        if (rep != NULL)
            freeReplyObject(rep);
        redisFree(r);
    }
    return sum;
}

static void reset_stats(void) {
    for (int i = 0; i < g_c.count; i++) {
        if (g_c.nodes[i].r.pid <= 0)
            continue;
        redisContext *r = thc_connect(g_c.nodes[i].r.port);
        if (r == NULL)
            continue;
        redisReply *rep = redisCommand(r, "CONFIG RESETSTAT");
        if (rep != NULL)
            freeReplyObject(rep);
        redisFree(r);
    }
}

/* ---- debounce and done records on each queue's node ---- */

/* One push (max_ms: the max wait, with DQ_PUSH_DEBOUNCE); its outcome. */
static int apush(dq_async *a, const char *q, const char *id, const char *pl,
                 int64_t delay, int flags, int64_t max_ms) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    if (flags & DQ_PUSH_DEBOUNCE)
        ck_assert_int_eq(
            dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, max_ms), 0);
    res r = {0};
    ck_assert_int_eq(dq_async_push_ex(a, q, pl, strlen(pl), delay, id, flags,
                                      o, push_rec, &r),
                     0);
    dq_push_opts_free(o);
    WAIT_CB_MS(r, 0, 10000);
    return r.outcome;
}

/* A call answered by st_rec; its status. */
static int await_st(int rc, res *r) {
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(RUN_UNTIL(r->calls > 0, 10000), "no callback");
    return r->status;
}

/* The job's state, payload (into pl), due time and read time (server). */
static int aget(dq_async *a, const char *q, const char *id, char *pl,
                size_t n, int64_t *due, int64_t *now) {
    info_res r = {0};
    ck_assert_int_eq(dq_async_get(a, q, id, info_rec, &r), 0);
    ck_assert_msg(RUN_UNTIL(r.calls > 0, 10000), "no get callback");
    ck_assert_msg(r.status == 1, "get %s: %d %s", id, r.status, r.msg);
    size_t len = 0;
    const char *p = dq_job_info_payload(r.info, &len);
    snprintf(pl, n, "%.*s", (int)len, p);
    *due = dq_job_info_due_ms(r.info);
    *now = dq_job_info_now_ms(r.info);
    int state = dq_job_info_state(r.info);
    dq_job_info_free(r.info);
    return state;
}

/* Polls q's one due job: its token into tok, payload into pl. */
static void apoll_one(dq_async *a, const char *q, char *tok, char *pl,
                      size_t n) {
    res r = {0};
    ck_assert_int_eq(dq_async_poll(a, q, 10, 30000, jobs_rec, &r), 0);
    WAIT_CB_MS(r, 1, 10000);
    size_t len = 0;
    const char *p = dq_job_payload(kept(&r, 0), &len);
    snprintf(pl, n, "%.*s", (int)len, p);
    snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(kept(&r, 0)));
    ck_assert_int_eq(dq_job_attempt(kept(&r, 0)), 1);
    res_clear(&r);
}

static int aack(dq_async *a, const char *q, const char *id, const char *tok) {
    res r = {0};
    return await_st(dq_async_ack(a, q, id, tok, st_rec, &r), &r);
}

static int acancel(dq_async *a, const char *q, const char *id) {
    res r = {0};
    return await_st(dq_async_cancel(a, q, id, 0, st_rec, &r), &r);
}

/* Debounce: created; moved with the latest payload, due at the first
 * push's deadline (its time + max wait, exact on the server clock); two
 * pushes while it runs make one follow-up that the ack starts. */
static void adebounce(dq_async *a, const char *q) {
    char pl[64], tok[DQ_TOKEN_BUF];
    int64_t due1 = 0, now = 0, due2 = 0;
    ck_assert_int_eq(apush(a, q, "db", "a", 200, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_CREATED);
    ck_assert_int_eq(aget(a, q, "db", pl, sizeof(pl), &due1, &now),
                     DQ_JOB_SCHEDULED);
    ck_assert_msg(now >= due1 - 200, "%s: read at %" PRId64 " before the "
                  "push at %" PRId64, q, now, due1 - 200);
    ck_assert_int_eq(apush(a, q, "db", "b", 600000, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_MOVED);
    aget(a, q, "db", pl, sizeof(pl), &due2, &now);
    ck_assert_str_eq(pl, "b");
    ck_assert_msg(due2 == due1 - 200 + 5000, "%s: due %" PRId64 ", want the "
                  "first push + max wait %" PRId64, q, due2, due1 + 4800);
    res pr = {0};
    ck_assert_int_eq(await_st(dq_async_promote(a, q, "db", 0, st_rec, &pr),
                              &pr),
                     DQ_RESCHED_MOVED);
    apoll_one(a, q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "b");
    ck_assert_int_eq(apush(a, q, "db", "c", 0, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(apush(a, q, "db", "d", 0, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(aack(a, q, "db", tok), 0);
    ck_assert_int_eq(aget(a, q, "db", pl, sizeof(pl), &due2, &now),
                     DQ_JOB_DUE);
    ck_assert_str_eq(pl, "d");
    apoll_one(a, q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "d");
    ck_assert_int_eq(aack(a, q, "db", tok), 0);
}

/* The done record answers only for the acked incarnation: after a replace
 * and a cancel, a keep push creates the job again. */
static void adone_record(dq_async *a, const char *q) {
    char pl[64], tok[DQ_TOKEN_BUF];
    ck_assert_int_eq(apush(a, q, "order-1", "r1", 0, DQ_PUSH_KEEP, 0),
                     DQ_PUSHED);
    apoll_one(a, q, tok, pl, sizeof(pl));
    ck_assert_int_eq(aack(a, q, "order-1", tok), 0);
    ck_assert_int_eq(apush(a, q, "order-1", "r1", 0, DQ_PUSH_KEEP, 0),
                     DQ_DONE);
    ck_assert_int_eq(apush(a, q, "order-1", "r2", 0, DQ_PUSH_REPLACE, 0),
                     DQ_PUSHED);
    ck_assert_int_eq(acancel(a, q, "order-1"), DQ_CANCELED_PENDING);
    ck_assert_int_eq(apush(a, q, "order-1", "r3", 1000, DQ_PUSH_KEEP, 0),
                     DQ_PUSHED);
    ck_assert_int_eq(acancel(a, q, "order-1"), DQ_CANCELED_PENDING);
}

/* ---- operations on queues spread over every primary ---- */

enum { NQ = 12 };

START_TEST(spread_ops) {
    cluster_up();
    /* 12 queues, 4 on each primary. */
    char qs[NQ][32];
    int per[THC_MAX_NODES] = {0}, nq = 0, owners = 0;
    for (int i = 0; nq < NQ && i < 10000; i++) {
        char q[32];
        snprintf(q, sizeof(q), "cq%d", i);
        int o = owner_of(q);
        ck_assert_int_ge(o, 0);
        if (per[o] >= NQ / 3)
            continue;
        owners += per[o]++ == 0;
        snprintf(qs[nq++], sizeof(qs[0]), "%s", q);
    }
    ck_assert_int_eq(nq, NQ);
    ck_assert_int_eq(owners, 3);
    states st;
    memset(&st, 0, sizeof(st));
    dq_async *a = copen(g_uri, NULL, &st);
    ck_assert_int_eq(st.connected, 1);

    /* Two jobs per queue (one due, one in a minute), all at once. */
    static res p[NQ][2], s[NQ], pl[NQ], ak[NQ], cn[NQ], s2[NQ], rs[NQ];
    memset(p, 0, sizeof(p));
    for (int i = 0; i < NQ; i++) {
        ck_assert_int_eq(dq_async_push(a, qs[i], "now", 3, 0, "a", 0,
                                       push_rec, &p[i][0]),
                         0);
        ck_assert_int_eq(dq_async_push(a, qs[i], "later", 5, 60000, "b", 0,
                                       push_rec, &p[i][1]),
                         0);
    }
    for (int i = 0; i < NQ; i++) {
        WAIT_CB_MS(p[i][0], 0, 10000);
        WAIT_CB_MS(p[i][1], 0, 10000);
        ck_assert_str_eq(p[i][0].id, "a");
    }
    memset(s, 0, sizeof(s));
    for (int i = 0; i < NQ; i++)
        ck_assert_int_eq(dq_async_stats(a, qs[i], stats_rec, &s[i]), 0);
    for (int i = 0; i < NQ; i++) {
        WAIT_CB_MS(s[i], 0, 10000);
        ck_assert_int_eq(s[i].s[0] + s[i].s[1], 2); /* scheduled + due */
        ck_assert_int_eq(s[i].s[2], 0);
    }
    /* Every primary holds keys of its four queues. */
    for (int n = 0; n < g_c.count; n++) {
        if (g_c.nodes[n].role != THC_PRIMARY)
            continue;
        redisContext *r = thc_connect(g_c.nodes[n].r.port);
        ck_assert_ptr_nonnull(r);
        redisReply *rep = redisCommand(r, "DBSIZE");
        ck_assert_ptr_nonnull(rep);
        ck_assert_msg(rep->integer > 0, "node %d holds no key", n);
        freeReplyObject(rep);
        redisFree(r);
    }
    memset(pl, 0, sizeof(pl));
    for (int i = 0; i < NQ; i++)
        ck_assert_int_eq(dq_async_poll(a, qs[i], 10, 30000, jobs_rec, &pl[i]),
                         0);
    for (int i = 0; i < NQ; i++) {
        WAIT_CB_MS(pl[i], 1, 10000);
        ck_assert_str_eq(dq_job_id(kept(&pl[i], 0)), "a");
    }
    memset(ak, 0, sizeof(ak));
    memset(cn, 0, sizeof(cn));
    memset(rs, 0, sizeof(rs));
    for (int i = 0; i < NQ; i++) {
        ck_assert_int_eq(dq_async_ack(a, qs[i], "a",
                                      dq_job_token(kept(&pl[i], 0)), st_rec,
                                      &ak[i]),
                         0);
        ck_assert_int_eq(dq_async_reschedule(a, qs[i], "b", 120000, 0, st_rec,
                                             &rs[i]),
                         0);
        ck_assert_int_eq(dq_async_cancel(a, qs[i], "b", 0, st_rec, &cn[i]),
                         0);
    }
    for (int i = 0; i < NQ; i++) {
        WAIT_CB_MS(ak[i], 0, 10000);
        WAIT_CB_MS(rs[i], DQ_RESCHED_MOVED, 10000);
        ck_assert_msg(RUN_UNTIL(cn[i].calls > 0, 10000), "no cancel callback");
        ck_assert_msg(cn[i].status >= 0, "cancel: %d %s", cn[i].status,
                      cn[i].msg);
    }
    memset(s2, 0, sizeof(s2));
    for (int i = 0; i < NQ; i++)
        ck_assert_int_eq(dq_async_stats(a, qs[i], stats_rec, &s2[i]), 0);
    for (int i = 0; i < NQ; i++) {
        WAIT_CB_MS(s2[i], 0, 10000);
        for (int k = 0; k < 4; k++)
            ck_assert_int_eq(s2[i].s[k], 0);
        res_clear(&pl[i]);
    }
    /* Debounce and the done record on each queue, plain and partitioned
     * (8 partitions: ids on other slots than the queue's name). */
    char puri[1100];
    snprintf(puri, sizeof(puri), "%s?partitions=8", g_uri);
    dq_async *ap = copen(puri, NULL, NULL);
    for (int i = 0; i < NQ; i++) {
        char pq[40];
        snprintf(pq, sizeof(pq), "%.30s-p", qs[i]);
        adebounce(a, qs[i]);
        adone_record(a, qs[i]);
        adebounce(ap, pq);
        adone_record(ap, pq);
    }
    ck_assert_int_eq(dq_async_pending(ap), 0);
    dq_async_free(ap);
    ck_assert_int_eq(dq_async_pending(a), 0);
    ck_assert_int_eq(st.disconnected, 0);
    dq_async_free(a);
}
END_TEST

/* ---- a batch of 3000, acked in one batch ---- */

enum { NB = 3000 };

typedef struct bigres {
    int calls, status;
    size_t n;
    char (*ids)[DQ_ID_BUF];
    char (*toks)[DQ_TOKEN_BUF];
    size_t got;     /* jobs polled so far */
    int *results;
    int ok;         /* results that are 0 */
} bigres;

static void big_batch_rec(dq_async *a, size_t n, const char *ids,
                          const int *outcomes, int status, void *ud) {
    (void)a;
    (void)outcomes;
    bigres *b = ud;
    b->calls++;
    b->status = status;
    b->n = n;
    for (size_t i = 0; status >= 0 && i < n && i < NB; i++)
        snprintf(b->ids[i], DQ_ID_BUF, "%s", ids + i * DQ_ID_BUF);
}

static void big_poll_rec(dq_async *a, const dq_jobs *jobs, int64_t next,
                         int status, void *ud) {
    (void)a;
    (void)next;
    bigres *b = ud;
    b->calls++;
    b->status = status;
    for (size_t i = 0; status > 0 && i < dq_jobs_count(jobs); i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        if (b->got < NB) {
            snprintf(b->ids[b->got], DQ_ID_BUF, "%s", dq_job_id(j));
            snprintf(b->toks[b->got], DQ_TOKEN_BUF, "%s", dq_job_token(j));
            b->got++;
        }
    }
}

static void big_ack_rec(dq_async *a, size_t n, const int *results, int status,
                        void *ud) {
    (void)a;
    bigres *b = ud;
    b->calls++;
    b->status = status;
    b->n = n;
    for (size_t i = 0; status >= 0 && i < n; i++)
        b->ok += results[i] == 0;
}

START_TEST(batch_3000) {
    cluster_up();
    dq_async *a = copen(g_uri, NULL, NULL);
    const char *q = "bigq";
    static char pls[NB][16];
    static const void *payloads[NB];
    static size_t lens[NB];
    for (int i = 0; i < NB; i++) {
        lens[i] = (size_t)snprintf(pls[i], sizeof(pls[i]), "p%d", i);
        payloads[i] = pls[i];
    }
    bigres pb;
    memset(&pb, 0, sizeof(pb));
    pb.ids = calloc(NB, sizeof(*pb.ids));
    ck_assert_ptr_nonnull(pb.ids);
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(dq_async_push_batch(a, q, NB, payloads, lens, NULL, NULL,
                                         0, big_batch_rec, &pb),
                     0);
    ck_assert_msg(RUN_UNTIL(pb.calls > 0, 20000), "no batch callback");
    ck_assert_msg(pb.status == NB, "push_batch: %d %s", pb.status,
                  dq_async_errmsg(a));
    int64_t push_ms = th_mono_ms() - t0;

    bigres pp;
    memset(&pp, 0, sizeof(pp));
    pp.ids = calloc(NB, sizeof(*pp.ids));
    pp.toks = calloc(NB, sizeof(*pp.toks));
    ck_assert(pp.ids != NULL && pp.toks != NULL);
    for (int round = 0; pp.got < NB && round < 10; round++) {
        int before = pp.calls;
        ck_assert_int_eq(dq_async_poll(a, q, DQ_POLL_MAX, 60000, big_poll_rec,
                                       &pp),
                         0);
        ck_assert_msg(RUN_UNTIL(pp.calls > before, 20000), "no poll callback");
        ck_assert_msg(pp.status > 0, "poll: %d", pp.status);
    }
    ck_assert_int_eq(pp.got, NB);
    const char *ids[NB], *toks[NB];
    for (int i = 0; i < NB; i++) {
        ids[i] = pp.ids[i];
        toks[i] = pp.toks[i];
    }
    bigres ab;
    memset(&ab, 0, sizeof(ab));
    t0 = th_mono_ms();
    ck_assert_int_eq(dq_async_ack_batch(a, q, NB, ids, toks, big_ack_rec, &ab),
                     0);
    ck_assert_msg(RUN_UNTIL(ab.calls > 0, 20000), "no ack callback");
    ck_assert_msg(ab.status >= 0, "ack_batch: %d %s", ab.status,
                  dq_async_errmsg(a));
    ck_assert_int_eq(ab.n, NB);
    ck_assert_int_eq(ab.ok, NB);
    int64_t ack_ms = th_mono_ms() - t0;
    res s;
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(dq_async_stats(a, q, stats_rec, &s), 0);
    WAIT_CB_MS(s, 0, 10000);
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(s.s[k], 0);
    printf("figures: async_cluster: batch of %d: push %" PRId64
           " ms, ack %" PRId64 " ms\n",
           NB, push_ms, ack_ms);
    free(pb.ids);
    free(pp.ids);
    free(pp.toks);
    dq_async_free(a);
}
END_TEST

/* ---- a consumer woken through sharded pub/sub ---- */

enum { MAXJ = 64 };

typedef struct seen {
    int ok[MAXJ];
    int64_t at_us[MAXJ]; /* wall clock of the first handling */
    int64_t due_ms[MAXJ];
} seen;

/* Records the jobs "j<i>" (others are just acked). */
static int ok_handler(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    seen *s = ud;
    const char *id = dq_job_id(job);
    int i = id[0] == 'j' ? atoi(id + 1) : -1;
    if (i >= 0 && i < MAXJ) {
        if (s->ok[i]++ == 0) {
            s->at_us[i] = wall_us();
            s->due_ms[i] = dq_job_due_ms(job);
        }
    }
    return DQ_JOB_OK;
}

/* Pushes job "j<i>" on q through the sync client cl. */
static void push_j(dq_client *cl, const char *q, int i, int64_t delay_ms) {
    char id[16];
    snprintf(id, sizeof(id), "j%d", i);
    int rc = dq_push(cl, q, id, strlen(id), delay_ms, id, 0, NULL, 0, NULL);
    ck_assert_msg(rc == 0, "push %s: %d %s", id, rc, dq_errmsg(cl));
}

START_TEST(consumer_wake) {
    cluster_up();
    dq_client *cl = NULL;
    ck_assert_msg(dq_open(g_uri, NULL, &cl) == 0, "dq_open: %s",
                  dq_errmsg(cl));
    dq_options *o = opts(0, 10000, 0); /* idle: one poll per 10 s */
    dq_async *a = copen(g_uri, o, NULL);
    dq_options_free(o);
    static seen s;
    memset(&s, 0, sizeof(s));
    const char *q = "wakeq";
    push_j(cl, q, 1, 60000); /* the consumer sleeps towards this one */
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(a, q, ok_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    run_for(500); /* idle, subscribed on the queue's node */
    int64_t t0 = wall_us();
    push_j(cl, q, 2, 0);
    ck_assert_msg(RUN_UNTIL(s.ok[2] == 1, 3000), "not woken");
    int64_t now_us = s.at_us[2] - t0;
    ck_assert_msg(now_us < 1000000, "handled %" PRId64 " us after the push",
                  now_us);
    run_for(200);
    t0 = wall_us();
    push_j(cl, q, 3, 300);
    ck_assert_msg(RUN_UNTIL(s.ok[3] == 1, 3000), "not woken");
    int64_t late_us = s.at_us[3] - s.due_ms[3] * 1000;
    ck_assert_msg(late_us < 1000000 && s.at_us[3] - t0 >= 250000,
                  "handled %" PRId64 " us after due", late_us);
    ck_assert_int_eq(s.ok[1], 0);
    printf("figures: async_cluster: wake: due now handled after %" PRId64
           " us, due in 300 ms handled %" PRId64 " us late (wait cap 10 s)\n",
           now_us, late_us);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* A queue name "<base><n>" whose keys live on node owner. */
static void queue_on(int owner, const char *base, char *out, size_t n) {
    for (int i = 0; i < 10000; i++) {
        snprintf(out, n, "%s%d", base, i);
        if (owner_of(out) == owner)
            return;
    }
    ck_abort_msg("no queue name on node %d", owner);
}

/* Pushes id on q through a and waits (ms) for its callback; returns it. */
static res push_wait(dq_async *a, const char *q, const char *id, int64_t ms) {
    res r;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(dq_async_push(a, q, id, strlen(id), 0, id, 0, push_rec,
                                   &r),
                     0);
    ck_assert_msg(RUN_UNTIL(r.calls > 0, ms), "no callback for %s", id);
    return r;
}

/* Polls q through a: exactly the jobs id1 and id2. */
static void poll_two(dq_async *a, const char *q, const char *id1,
                     const char *id2) {
    res pl;
    memset(&pl, 0, sizeof(pl));
    ck_assert_int_eq(dq_async_poll(a, q, 10, 30000, jobs_rec, &pl), 0);
    WAIT_CB_MS(pl, 2, 15000);
    int n1 = 0, n2 = 0;
    for (int i = 0; i < 2; i++) {
        n1 += strcmp(dq_job_id(kept(&pl, i)), id1) == 0;
        n2 += strcmp(dq_job_id(kept(&pl, i)), id2) == 0;
    }
    ck_assert_msg(n1 == 1 && n2 == 1, "polled %s, %s",
                  dq_job_id(kept(&pl, 0)), dq_job_id(kept(&pl, 1)));
    res_clear(&pl);
}

/* ---- a slot migrated under the client ---- */

typedef struct mig {
    dq_async *a;
    const char *q;
    res p[64];
    int n;
} mig;

/* Between two steps of the migration: starts a push (it completes once
 * the slot is stable: TRYAGAIN until then) and runs the loop a little. */
static void between(void *arg) {
    mig *m = arg;
    if (m->n < 64) {
        char id[16];
        snprintf(id, sizeof(id), "m%d", m->n);
        ck_assert_int_eq(dq_async_push(m->a, m->q, id, strlen(id), 0, id, 0,
                                       push_rec, &m->p[m->n]),
                         0);
        m->n++;
    }
    run_for(30);
}

/* A sync client and an async one (command timeout 15 s, wait cap 10 s)
 * on the cluster. */
static dq_async *mig_clients(dq_client **cl) {
    ck_assert_msg(dq_open(g_uri, NULL, cl) == 0, "dq_open: %s",
                  dq_errmsg(*cl));
    dq_options *o = opts(15000, 10000, 0);
    dq_async *a = copen(g_uri, o, NULL);
    dq_options_free(o);
    return a;
}

/* A live primary other than the owner of queue's slot. */
static int mig_target(const char *queue) {
    int from = owner_of(queue), to = -1;
    for (int i = 0; i < g_c.count && to < 0; i++)
        if (i != from && g_c.nodes[i].role == THC_PRIMARY &&
            g_c.nodes[i].r.pid > 0)
            to = i;
    ck_assert(from >= 0 && to >= 0);
    return to;
}

START_TEST(slot_moves) {
    cluster_up();
    dq_client *cl = NULL;
    dq_async *a = mig_clients(&cl);
    const char *q = "migq";
    int slot = slot_of_queue(q), to = mig_target(q);
    /* Jobs, and a consumer whose wake-ups must follow the slot. */
    for (int i = 1; i <= 5; i++)
        push_j(cl, q, i, 60000);
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(a, q, ok_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    res st0;
    memset(&st0, 0, sizeof(st0));
    ck_assert_int_eq(dq_async_stats(a, q, stats_rec, &st0), 0);
    WAIT_CB_MS(st0, 0, 10000);
    ck_assert_int_eq(st0.s[0], 5);
    /* b learns the map now and stays quiet during the migration: its
     * first call after it meets MOVED. */
    dq_async *b = copen(g_uri, NULL, NULL);
    memset(&st0, 0, sizeof(st0));
    ck_assert_int_eq(dq_async_stats(b, q, stats_rec, &st0), 0);
    WAIT_CB_MS(st0, 0, 10000);
    run_for(300);
    reset_stats();

    static mig m;
    memset(&m, 0, sizeof(m));
    m.a = a;
    m.q = q;
    int64_t t0 = th_mono_ms();
    ck_assert_msg(thc_migrate_slot(&g_c, slot, to, 1, between, &m) == 0,
                  "migration failed");
    int64_t mig_ms = th_mono_ms() - t0;
    ck_assert_int_eq(owner_of(q), to);
    /* The pushes made during the migration all complete, once. */
    for (int i = 0; i < m.n; i++) {
        WAIT_CB_MS(m.p[i], 0, 16000);
    }
    /* The same clients go on: stats (a followed the slot already, through
     * its consumer's subscription; b meets MOVED, then the new owner). */
    res st1;
    memset(&st1, 0, sizeof(st1));
    ck_assert_int_eq(dq_async_stats(a, q, stats_rec, &st1), 0);
    WAIT_CB_MS(st1, 0, 10000);
    ck_assert_int_eq(st1.s[0], 5);
    res st2, pb;
    memset(&st2, 0, sizeof(st2));
    ck_assert_int_eq(dq_async_stats(b, q, stats_rec, &st2), 0);
    WAIT_CB_MS(st2, 0, 10000);
    ck_assert_int_eq(st2.s[0], 5);
    pb = push_wait(b, q, "j41", 10000);
    ck_assert_msg(pb.status == 0, "%d %s", pb.status, pb.msg);
    ck_assert_msg(RUN_UNTIL(s.ok[41] == 1, 5000), "consumer did not get it");
    long long moved = errorstat("MOVED"), ask = errorstat("ASK"),
              tryagain = errorstat("TRYAGAIN");
    /* The consumer took the jobs pushed meanwhile; its wake-ups moved
     * with the slot (sunsubscribe, then SSUBSCRIBE at the new owner):
     * a job due now is handled at once, not at the 10 s wait cap. */
    run_for(500);
    int64_t w0 = wall_us();
    push_j(cl, q, 40, 0);
    ck_assert_msg(RUN_UNTIL(s.ok[40] == 1, 5000), "not woken after the move");
    int64_t wake_us = s.at_us[40] - w0;
    ck_assert_msg(wake_us < 1500000, "handled %" PRId64 " us after the push",
                  wake_us);
    printf("figures: async_cluster: slot %d moved in %" PRId64
           " ms with %d pushes during it: redirects seen MOVED %lld, ASK "
           "%lld, TRYAGAIN %lld; consumer woken %" PRId64
           " us after a push at the new owner\n",
           slot, mig_ms, m.n, moved, ask, tryagain, wake_us);
    ck_assert_int_ge(moved, 1);
    ck_assert_int_ge(ask + tryagain, 1);
    dq_consumer_free(c);
    dq_async_free(a);
    dq_async_free(b);
    dq_close(cl);
}
END_TEST

/* ---- fair claiming while its slot migrates ---- */

/* A grouped queue with priorities and a limit per group (its keys gq,
 * g:<group>, g<p>:<group>, gl:<group> under the queue's hash tag move with
 * the slot): between the migration's steps the client pushes grouped jobs
 * of several priorities, polls, acks what earlier polls gave and reads
 * dq_async_group_stats; every job comes once, no poll gives a group more
 * than its limit, every group stats call answers, and after the move a
 * small group's job comes in the first poll beside a big group's burst
 * (with its priority job first) and the limit per group holds. */
enum { AF_LIMIT = 3, AF_SEED = 40, AF_STEPS = 64, AF_IDS = 200 };

typedef struct afm {
    dq_async *a;
    const char *q;
    int n, nack;
    res push[AF_STEPS], poll[AF_STEPS], ack[AF_STEPS * 5];
    unsigned char acked[AF_STEPS];
    int gs_calls, gs_fail, over;
    int64_t big_inflight;
    char gs_msg[300];
} afm;

static void afm_gstats(dq_async *a, const dq_group_list *l, int status,
                       void *ud) {
    afm *m = ud;
    m->gs_calls++;
    if (status < 0) {
        m->gs_fail++;
        snprintf(m->gs_msg, sizeof(m->gs_msg), "%s", dq_async_errmsg(a));
    }
    m->big_inflight = -1;
    for (size_t i = 0; i < dq_group_list_count(l); i++)
        if (strcmp(dq_group_list_name(l, i), "big") == 0)
            m->big_inflight = dq_group_list_inflight(l, i);
}

static dq_push_opts *afm_opts(const char *g, int prio) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g), 0);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, prio), 0);
    return o;
}

/* A grouped push through the sync client (due after delay ms). */
static void afm_spush(dq_client *cl, const char *q, const char *id,
                      const char *g, int prio, int64_t delay) {
    dq_push_opts *o = afm_opts(g, prio);
    int rc = dq_push_ex(cl, q, id, strlen(id), delay, id, 0, o, NULL, 0,
                        NULL);
    dq_push_opts_free(o);
    ck_assert_msg(rc == 0, "push %s: %s", id, dq_errmsg(cl));
}

/* The ledger slot of id ("s<k>" seeds, "m<k>" pushed in between); -1 for
 * the others. */
static int afm_index(const char *id) {
    if (id[0] == 's' && id[1] >= '0' && id[1] <= '9')
        return atoi(id + 1);
    if (id[0] == 'm')
        return AF_SEED + atoi(id + 1);
    return -1;
}

/* Counts a poll's jobs into got (and a group over its limit), acks them
 * (async). */
static void afm_take(afm *m, int i, int *got) {
    int per[5] = {0}; /* g0..g2, small, big */
    for (size_t k = 0; k < m->poll[i].n; k++) {
        const dq_job *j = kept(&m->poll[i], k);
        int x = afm_index(dq_job_id(j));
        if (x < 0)
            continue;
        got[x]++;
        per[x >= AF_SEED ? (x - AF_SEED) % 3 : x == 0 ? 3 : 4]++;
        ck_assert_int_lt(m->nack, AF_STEPS * 5);
        ck_assert_int_eq(dq_async_ack(m->a, m->q, dq_job_id(j),
                                      dq_job_token(j), st_rec,
                                      &m->ack[m->nack++]),
                         0);
    }
    for (int g = 0; g < 5; g++)
        m->over += per[g] > AF_LIMIT;
    m->acked[i] = 1;
}

static int afm_seen[AF_IDS];

static void afm_between(void *arg) {
    afm *m = arg;
    for (int i = 0; i < m->n; i++)
        if (m->poll[i].calls > 0 && !m->acked[i])
            afm_take(m, i, afm_seen);
    if (m->n < AF_STEPS) {
        char id[16], g[8];
        snprintf(id, sizeof(id), "m%d", m->n);
        snprintf(g, sizeof(g), "g%d", m->n % 3);
        dq_push_opts *o = afm_opts(g, m->n % 4);
        ck_assert_int_eq(dq_async_push_ex(m->a, m->q, id, strlen(id), 0, id,
                                          0, o, push_rec, &m->push[m->n]),
                         0);
        dq_push_opts_free(o);
        ck_assert_int_eq(dq_async_poll(m->a, m->q, 5, 30000, jobs_rec,
                                       &m->poll[m->n]),
                         0);
        ck_assert_int_eq(dq_async_group_stats(m->a, m->q, 100, afm_gstats,
                                              m),
                         0);
        m->n++;
    }
    run_for(30);
}

/* After the move: a big group's burst (one job of priority 5 in it) and a
 * small group's job; the first poll of 2 takes the small one and the
 * priority one, the big group then gets no more than its limit. */
static void afm_fair_after(dq_client *cl, afm *m) {
    for (int i = 0; i < 20; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%d", i);
        afm_spush(cl, m->q, id, "big", 0, 0);
    }
    afm_spush(cl, m->q, "bhi", "big", 5, 0);
    afm_spush(cl, m->q, "small", "small", 0, 0);
    res p1, p2;
    memset(&p1, 0, sizeof(p1));
    memset(&p2, 0, sizeof(p2));
    ck_assert_int_eq(dq_async_poll(m->a, m->q, 2, 30000, jobs_rec, &p1), 0);
    WAIT_CB_MS(p1, 2, 10000);
    int small = 0, hi = 0;
    for (size_t k = 0; k < p1.n; k++) {
        small |= strcmp(dq_job_id(kept(&p1, k)), "small") == 0;
        hi |= strcmp(dq_job_id(kept(&p1, k)), "bhi") == 0;
    }
    ck_assert_msg(small && hi, "first poll after the move: %s, %s (want "
                  "small and bhi)", dq_job_id(kept(&p1, 0)),
                  dq_job_id(kept(&p1, 1)));
    ck_assert_int_eq(dq_async_poll(m->a, m->q, 50, 30000, jobs_rec, &p2), 0);
    WAIT_CB_MS(p2, AF_LIMIT - 1, 10000);
    int calls = m->gs_calls;
    ck_assert_int_eq(dq_async_group_stats(m->a, m->q, 100, afm_gstats, m),
                     0);
    ck_assert_msg(RUN_UNTIL(m->gs_calls > calls, 10000), "no group stats");
    ck_assert_int_eq(m->big_inflight, AF_LIMIT);
    res_clear(&p1);
    res_clear(&p2);
}

START_TEST(fair_slot_moves) {
    cluster_up();
    dq_client *cl = NULL;
    dq_async *a = mig_clients(&cl);
    const char *q = "fmigq";
    int s = DQ_SET_GROUP_MAX_INFLIGHT;
    int64_t v = AF_LIMIT;
    ck_assert_msg(dq_config_set(cl, q, 1, &s, &v) == 0, "config: %s",
                  dq_errmsg(cl));
    /* Seeds: a big group on two levels, a small one, one job of "far"
     * due in an hour (gq and g2:far exist throughout). */
    for (int i = 0; i < AF_SEED; i++) {
        char id[16];
        snprintf(id, sizeof(id), "s%d", i);
        afm_spush(cl, q, id, i == 0 ? "small" : "big", i % 5 == 0 ? 3 : 0,
                  0);
    }
    afm_spush(cl, q, "far", "far", 2, 3600000);
    static afm m;
    memset(&m, 0, sizeof(m));
    memset(afm_seen, 0, sizeof(afm_seen));
    m.a = a;
    m.q = q;
    int slot = slot_of_queue(q), to = mig_target(q);
    reset_stats();
    int64_t t0 = th_mono_ms();
    ck_assert_msg(thc_migrate_slot(&g_c, slot, to, 1, afm_between, &m) == 0,
                  "migration failed");
    int64_t mig_ms = th_mono_ms() - t0;
    ck_assert_int_eq(owner_of(q), to);
    /* Every call made in between completes; the last polls' jobs acked. */
    for (int i = 0; i < m.n; i++) {
        WAIT_CB_MS(m.push[i], 0, 16000);
        ck_assert_msg(RUN_UNTIL(m.poll[i].calls > 0, 16000), "poll %d", i);
        ck_assert_msg(m.poll[i].status >= 0, "poll %d: %s", i,
                      m.poll[i].msg);
        if (!m.acked[i])
            afm_take(&m, i, afm_seen);
    }
    ck_assert_msg(RUN_UNTIL(m.gs_calls == m.n, 16000), "group stats: %d "
                  "answers of %d", m.gs_calls, m.n);
    for (int i = 0; i < m.nack; i++) {
        ck_assert_msg(RUN_UNTIL(m.ack[i].calls > 0, 16000), "ack %d", i);
        ck_assert_msg(m.ack[i].status == 0, "ack %d: %d %s", i,
                      m.ack[i].status, m.ack[i].msg);
    }
    /* What is left, through the sync client. */
    for (int tries = 0; tries < 100; tries++) {
        dq_jobs *jobs = NULL;
        int n = dq_poll(cl, q, 100, 30000, &jobs, NULL);
        ck_assert_msg(n >= 0, "drain: %s", dq_errmsg(cl));
        for (int k = 0; k < n; k++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)k);
            int x = afm_index(dq_job_id(j));
            if (x >= 0)
                afm_seen[x]++;
            ck_assert_int_eq(dq_ack(cl, q, dq_job_id(j), dq_job_token(j)),
                             0);
        }
        dq_jobs_free(jobs);
        if (n == 0)
            break;
    }
    int lost = 0, twice = 0;
    for (int x = 0; x < AF_SEED + m.n; x++) {
        lost += afm_seen[x] == 0;
        twice += afm_seen[x] > 1;
    }
    long long moved = errorstat("MOVED"), ask = errorstat("ASK"),
              tryagain = errorstat("TRYAGAIN");
    printf("figures: async_cluster: fair queue's slot %d moved in %" PRId64
           " ms, %d steps with a push, poll and group stats each: jobs %d, "
           "lost %d, twice %d, polls over a group's limit %d; MOVED %lld, "
           "ASK %lld, TRYAGAIN %lld\n",
           slot, mig_ms, m.n, AF_SEED + m.n, lost, twice, m.over, moved,
           ask, tryagain);
    fflush(stdout);
    ck_assert_msg(m.gs_fail == 0, "%d group stats calls failed: %s",
                  m.gs_fail, m.gs_msg);
    ck_assert_msg(lost == 0 && twice == 0, "%d jobs lost, %d delivered "
                  "twice", lost, twice);
    ck_assert_int_eq(m.over, 0);
    ck_assert_int_ge(moved + ask, 1);
    afm_fair_after(cl, &m);
    for (int i = 0; i < m.n; i++)
        res_clear(&m.poll[i]);
    dq_async_free(a);
    dq_close(cl);
}
END_TEST

/* ---- two slots of one operation ASKed to two different nodes ---- */

typedef struct two_ask {
    thc_cluster *cl;
    dq_async *a;
    const char *q;
    int slot_b, to_b, calls;
    long long moved, ask;
    res st;
} two_ask;

/* Both slots mid-migration, all their keys on the targets: one stats call
 * of the partitioned queue gets ASK for two partitions, each to another
 * node. */
static void two_ask_inner(void *arg) {
    two_ask *t = arg;
    if (t->calls++ > 0)
        return;
    long long moved0 = errorstat("MOVED"), ask0 = errorstat("ASK");
    ck_assert_int_eq(dq_async_stats(t->a, t->q, stats_rec, &t->st), 0);
    ck_assert_msg(RUN_UNTIL(t->st.calls > 0, 10000), "no stats callback");
    t->moved = errorstat("MOVED") - moved0;
    t->ask = errorstat("ASK") - ask0;
}

static void two_ask_outer(void *arg) {
    two_ask *t = arg;
    if (t->calls > 0)
        return;
    ck_assert_msg(thc_migrate_slot(t->cl, t->slot_b, t->to_b, 100,
                                   two_ask_inner, t) == 0,
                  "inner migration failed");
}

START_TEST(two_asks) {
    cluster_up();
    const char *q = "ta-part";
    enum { NP = 4 };
    char uri[1100];
    snprintf(uri, sizeof(uri), "%s?partitions=%d", g_uri, NP);
    dq_client *cl = NULL;
    ck_assert_msg(dq_open(uri, NULL, &cl) == 0, "dq_open: %s", dq_errmsg(cl));
    /* Two partitions whose slots can move to two different primaries. */
    int prim[THC_MAX_NODES], np = thc_primaries(&g_c, prim);
    ck_assert_int_eq(np, 3);
    int pa = 0, pb = -1, slot[NP], owner[NP];
    for (int p = 0; p < NP; p++) {
        char tag[64];
        thc_part_tag(q, p, tag, sizeof(tag));
        slot[p] = thc_slot_of(tag);
        owner[p] = thc_owner(&g_c, slot[p]);
    }
    for (int p = 1; p < NP && pb < 0; p++)
        if (slot[p] != slot[pa])
            pb = p;
    ck_assert_int_ge(pb, 0);
    int to_a = -1, to_b = -1;
    for (int i = 0; i < np && to_b < 0; i++)
        for (int j = 0; j < np && to_b < 0; j++)
            if (prim[i] != owner[pa] && prim[j] != owner[pb] && i != j) {
                to_a = prim[i];
                to_b = prim[j];
            }
    ck_assert(to_a >= 0 && to_b >= 0 && to_a != to_b);
    /* Every key the stats script names exists in both partitions (a
     * missing one makes a migrating slot answer TRYAGAIN, not ASK): a
     * job due later (due, jobs), one leased, one dead, one acked (done). */
    const int parts[2] = {pa, pb};
    for (int k = 0; k < 2; k++) {
        char id[4][32];
        for (int n = 0, i = 0; n < 4; i++) {
            snprintf(id[n], sizeof(id[n]), "ta%d-%d", parts[k], i);
            if (tu_part_of(id[n], NP) == parts[k])
                n++;
        }
        for (int n = 0; n < 4; n++)
            ck_assert_int_eq(dq_push(cl, q, "x", 1, n == 0 ? 3600000 : 0,
                                     id[n], DQ_PUSH_KEEP, NULL, 0, NULL),
                             0);
        dq_jobs *jobs = NULL;
        ck_assert_int_eq(dq_poll(cl, q, 10, 600000, &jobs, NULL), 3);
        for (size_t i = 0; i < 3; i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            if (strcmp(dq_job_id(j), id[2]) == 0)
                ck_assert_int_eq(dq_nack(cl, q, id[2], dq_job_token(j), 0,
                                         DQ_NACK_DEAD),
                                 1);
            else if (strcmp(dq_job_id(j), id[3]) == 0)
                ck_assert_int_eq(dq_ack(cl, q, id[3], dq_job_token(j)), 0);
        }
        dq_jobs_free(jobs);
    }
    dq_options *o = opts(15000, 0, 0);
    static two_ask t;
    memset(&t, 0, sizeof(t));
    t.cl = &g_c;
    t.a = copen(uri, o, NULL);
    dq_options_free(o);
    t.q = q;
    t.slot_b = slot[pb];
    t.to_b = to_b;
    res st0; /* the client learns the map before the moves */
    memset(&st0, 0, sizeof(st0));
    ck_assert_int_eq(dq_async_stats(t.a, q, stats_rec, &st0), 0);
    WAIT_CB_MS(st0, 0, 10000);
    ck_assert_msg(thc_migrate_slot(&g_c, slot[pa], to_a, 100, two_ask_outer,
                                   &t) == 0,
                  "outer migration failed");
    printf("figures: async_cluster: one stats call ASKed for two slots to "
           "two nodes: status %s, ASK replies %lld, MOVED replies %lld, "
           "counts %" PRId64 "/%" PRId64 "/%" PRId64 "/%" PRId64 "\n",
           dq_errname(t.st.status), t.ask, t.moved, t.st.s[0], t.st.s[1],
           t.st.s[2], t.st.s[3]);
    fflush(stdout);
    ck_assert_int_eq(t.calls, 1);
    ck_assert_msg(t.st.status == 0, "stats: %d %s", t.st.status, t.st.msg);
    ck_assert_msg(t.ask >= 2, "%lld ASK replies: the slots were not both "
                  "mid-migration", t.ask);
    /* Each ASKed call went to its own target: none bounced off the other
     * target with MOVED. */
    ck_assert_msg(t.moved == 0, "%lld MOVED replies during the call",
                  t.moved);
    ck_assert_int_eq(t.st.s[0], 2); /* the two due later */
    ck_assert_int_eq(t.st.s[1], 0);
    ck_assert_int_eq(t.st.s[2], 2); /* leased */
    ck_assert_int_eq(t.st.s[3], 2); /* dead */
    dq_async_free(t.a);
    dq_close(cl);
}
END_TEST

/* ---- a primary killed, a push issued right after ---- */

START_TEST(failover) {
    cluster_up();
    /* Two queues on two different primaries. */
    int p1 = -1, p2 = -1;
    for (int i = 0; i < g_c.count; i++)
        if (g_c.nodes[i].role == THC_PRIMARY) {
            if (p1 < 0)
                p1 = i;
            else if (p2 < 0)
                p2 = i;
        }
    ck_assert(p1 >= 0 && p2 >= 0);
    char qa[32], qb[32], qc[32];
    queue_on(p1, "fa", qa, sizeof(qa));
    queue_on(p2, "fb", qb, sizeof(qb));
    queue_on(p2, "fc", qc, sizeof(qc));
    /* a: WAIT for one replica, so the first jobs survive the failovers;
     * b: no WAIT (a promoted replica has no replica of its own). */
    dq_options *o = opts(15000, 0, 1);
    dq_async *a = copen(g_uri, o, NULL);
    dq_options_free(o);
    o = opts(15000, 0, 0);
    states sb;
    memset(&sb, 0, sizeof(sb));
    dq_async *b = copen(g_uri, o, &sb);
    dq_options_free(o);
    /* A consumer of qc (on qb's node too), idle polls 10 s apart. */
    o = opts(15000, 10000, 0);
    dq_async *cc = copen(g_uri, o, NULL);
    dq_options_free(o);
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(cc, qc, ok_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    res r = push_wait(a, qa, "fa1", 10000);
    ck_assert_msg(r.status == 0, "%d %s", r.status, r.msg);
    r = push_wait(a, qb, "fb1", 10000);
    ck_assert_msg(r.status == 0, "%d %s", r.status, r.msg);
    res s0;
    memset(&s0, 0, sizeof(s0));
    ck_assert_int_eq(dq_async_stats(b, qa, stats_rec, &s0), 0); /* b's links */
    WAIT_CB_MS(s0, 0, 10000);
    memset(&s0, 0, sizeof(s0));
    ck_assert_int_eq(dq_async_stats(b, qb, stats_rec, &s0), 0);
    WAIT_CB_MS(s0, 0, 10000);
    run_for(200);

    /* 1. thc_kill_primary returns once the replica took over; b still
     * holds an idle link to the dead node and the old map: the push right
     * after finds the link closed, learns the map again and goes to the
     * new primary. */
    ck_assert_msg(thc_kill_primary(&g_c, p1, 30000) >= 0, "kill failed");
    int64_t t0 = th_mono_ms();
    r = push_wait(b, qa, "fa2", 20000);
    int64_t after_ms = th_mono_ms() - t0;
    ck_assert_msg(r.status == 0, "push after the failover: %d %s", r.status,
                  r.msg);
    poll_two(b, qa, "fa1", "fa2");

    /* 2. The primary of qb killed (SIGKILL, reaped: its sockets are
     * closed) and a push issued at once: it waits for the cluster to
     * promote the replica, then goes there.  (A push written before the
     * node's end reaches us fails instead, its fate unknown.) */
    t0 = th_mono_ms();
    th_redis_kill(&g_c.nodes[p2].r);
    ck_assert_int_eq(g_c.nodes[p2].r.pid, 0);
    r = push_wait(b, qb, "fb2", 20000);
    int64_t during_ms = th_mono_ms() - t0;
    ck_assert_msg(r.status == 0, "push during the failover: %d %s", r.status,
                  r.msg);
    ck_assert_msg(during_ms < 15000, "took %" PRId64 " ms", during_ms);
    ck_assert_int_eq(thc_wait_ok(&g_c, 30000), 0);
    ck_assert(owner_of(qb) >= 0 && owner_of(qb) != p2);
    poll_two(b, qb, "fb1", "fb2");

    /* a follows too (its WAIT finds no replica now: the job is stored). */
    r = push_wait(a, qb, "fb3", 20000);
    ck_assert_msg(r.status == 0 || r.status == DQ_EREPLICAS, "%d %s",
                  r.status, r.msg);
    ck_assert(dq_async_connected(a) && dq_async_connected(b));
    ck_assert_int_eq(sb.disconnected, 0); /* other nodes stayed up */
    /* The consumer's wake-ups moved to the promoted replica. */
    run_for(1000);
    int64_t w0 = wall_us();
    r = push_wait(b, qc, "j9", 10000);
    ck_assert_msg(r.status == 0, "%d %s", r.status, r.msg);
    ck_assert_msg(RUN_UNTIL(s.ok[9] == 1, 5000), "consumer not woken");
    int64_t wake_us = s.at_us[9] - w0;
    ck_assert_msg(wake_us < 1500000, "woken %" PRId64 " us after the push",
                  wake_us);
    printf("figures: async_cluster: failover: a push right after "
           "thc_kill_primary took %" PRId64
           " ms; one issued right after SIGKILL of its primary, waiting "
           "for the promotion, %" PRId64
           " ms (cluster-node-timeout 2000); the consumer was woken %" PRId64
           " us after a push at the promoted replica\n",
           after_ms, during_ms, wake_us);
    dq_consumer_free(c);
    dq_async_free(cc);
    dq_async_free(a);
    dq_async_free(b);
}
END_TEST

/* ---- Sentinel ---- */

START_TEST(sentinel) {
    ck_assert_msg(thc_sentinel_start(&g_s, 1, 3, "dqprimary") == 0,
                  "sentinels did not start (see thc: messages)");
    thc_sentinel_uri(&g_s, g_uri, sizeof(g_uri));
    dq_options *o = opts(15000, 10000, 0);
    states st;
    memset(&st, 0, sizeof(st));
    dq_async *a = copen(g_uri, o, &st);
    dq_options_free(o);
    const char *q = "sentq";
    res p1, pl;
    memset(&p1, 0, sizeof(p1));
    memset(&pl, 0, sizeof(pl));
    ck_assert_int_eq(dq_async_push(a, q, "x", 1, 0, "s1", 0, push_rec, &p1),
                     0);
    WAIT_CB_MS(p1, 0, 10000);
    ck_assert_int_eq(dq_async_poll(a, q, 10, 30000, jobs_rec, &pl), 0);
    WAIT_CB_MS(pl, 1, 10000);
    ck_assert_str_eq(dq_job_id(kept(&pl, 0)), "s1");
    res ak;
    memset(&ak, 0, sizeof(ak));
    ck_assert_int_eq(dq_async_ack(a, q, "s1", dq_job_token(kept(&pl, 0)),
                                  st_rec, &ak),
                     0);
    WAIT_CB_MS(ak, 0, 10000);
    res_clear(&pl);
    /* A consumer: its wake-ups follow the primary too. */
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(a, q, ok_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    run_for(300);

    int64_t t0 = th_mono_ms();
    int np = thc_sentinel_failover(&g_s, 1, 60000);
    ck_assert_msg(np >= 0, "failover failed");
    int64_t fo_ms = th_mono_ms() - t0;
    t0 = th_mono_ms();
    res p2;
    memset(&p2, 0, sizeof(p2));
    ck_assert_int_eq(dq_async_push(a, q, "y", 1, 0, "j7", 0, push_rec, &p2),
                     0);
    ck_assert_msg(RUN_UNTIL(p2.calls > 0, 20000), "no callback");
    int64_t push_ms = th_mono_ms() - t0;
    ck_assert_msg(p2.status == 0, "push after the failover: %d %s", p2.status,
                  p2.msg);
    ck_assert_msg(RUN_UNTIL(s.ok[7] == 1, 5000), "consumer did not get it");
    run_for(500);
    int64_t w0 = wall_us();
    res p3;
    memset(&p3, 0, sizeof(p3));
    ck_assert_int_eq(dq_async_push(a, q, "z", 1, 0, "j8", 0, push_rec, &p3),
                     0);
    WAIT_CB_MS(p3, 0, 10000);
    ck_assert_msg(RUN_UNTIL(s.ok[8] == 1, 5000), "consumer not woken");
    int64_t wake_us = s.at_us[8] - w0;
    ck_assert_msg(wake_us < 1500000, "woken %" PRId64 " us after the push",
                  wake_us);
    ck_assert(dq_async_connected(a));
    ck_assert_int_ge(st.disconnected, 1);
    ck_assert_int_ge(st.connected, 2);
    printf("figures: async_cluster: sentinel: failover by kill took %" PRId64
           " ms (harness), then a push succeeded in %" PRId64
           " ms and the consumer was woken %" PRId64
           " us after a push at the new primary\n",
           fo_ms, push_ms, wake_us);
    dq_consumer_free(c);
    dq_async_free(a);
}
END_TEST

/* ---- CLUSTER SLOTS when an ACL refuses CLUSTER SHARDS ---- */

/*
 * A user whose ACL grants CLUSTER SLOTS but not CLUSTER SHARDS (NOPERM):
 * the async client learns the map from CLUSTER SLOTS and works on a queue
 * of each primary.
 */
START_TEST(slots_fallback) {
    cluster_up();
    for (int i = 0; i < g_c.count; i++) {
        redisContext *r = thc_connect(g_c.nodes[i].r.port);
        ck_assert_ptr_nonnull(r);
        redisReply *rep = redisCommand(r, "ACL SETUSER dqslots on >pw-slots "
                                          "~* &* +@all -cluster|shards");
        ck_assert_msg(rep != NULL && rep->type == REDIS_REPLY_STATUS,
                      "ACL SETUSER on node %d failed", i);
        freeReplyObject(rep);
        redisFree(r);
    }
    const char *scheme = "redis+cluster://";
    ck_assert(strncmp(g_uri, scheme, strlen(scheme)) == 0);
    char curi[1100];
    snprintf(curi, sizeof(curi), "%sdqslots:pw-slots@%s", scheme,
             g_uri + strlen(scheme));
    reset_stats();
    dq_options *o = opts(0, 0, 0);
    dq_async *a = copen(curi, o, NULL);
    dq_options_free(o);
    int prim[THC_MAX_NODES], np = thc_primaries(&g_c, prim);
    ck_assert_int_eq(np, 3);
    for (int k = 0; k < np; k++) {
        char q[32];
        queue_on(prim[k], "sfq", q, sizeof(q));
        res p1 = push_wait(a, q, "a1", 10000), p2 = push_wait(a, q, "a2", 10000);
        ck_assert_msg(p1.status == 0 && p2.status == 0, "push on %s: %s %s",
                      q, p1.msg, p2.msg);
        poll_two(a, q, "a1", "a2");
    }
    long long noperm = errorstat("NOPERM");
    long long slots = 0;
    for (int i = 0; i < g_c.count; i++) {
        redisContext *r = thc_connect(g_c.nodes[i].r.port);
        redisReply *rep = r ? redisCommand(r, "INFO commandstats") : NULL;
        const char *p = rep && rep->type == REDIS_REPLY_STRING
                            ? strstr(rep->str, "cmdstat_cluster|slots:calls=")
                            : NULL;
        if (p != NULL)
            slots += atoll(p + strlen("cmdstat_cluster|slots:calls="));
        if (rep != NULL)
            freeReplyObject(rep);
        if (r != NULL)
            redisFree(r);
    }
    printf("figures: async_cluster: slots_fallback: queues_ok=%d "
           "cluster_slots_calls=%lld noperm=%lld\n",
           np, slots, noperm);
    ck_assert_msg(slots > 0, "the client never asked CLUSTER SLOTS");
    ck_assert_msg(noperm > 0, "CLUSTER SHARDS was never refused");
    dq_async_free(a);
}
END_TEST

/* ---- Sentinel announces a failover ---- */

/* A reply of one command on 127.0.0.1:port (fresh connection). */
static redisReply *port_cmd(int port, const char *cmd) {
    redisContext *r = thc_connect(port);
    ck_assert_msg(r != NULL, "cannot connect to 127.0.0.1:%d", port);
    redisReply *rep = redisCommand(r, cmd);
    ck_assert_msg(rep != NULL, "127.0.0.1:%d: %s: %s", port, cmd, r->errstr);
    redisFree(r);
    return rep;
}

static long long readonly_errors(int port) {
    return tu_info_at(port, "errorstats", "errorstat_READONLY", "count=");
}

/* The primary's port as every live Sentinel reports it, or -1 while they
 * disagree (asked at most every 20 ms: this runs as a loop condition). */
static int agreed_port(void) {
    static int64_t last;
    static int port;
    if (th_mono_ms() - last < 20)
        return port;
    last = th_mono_ms();
    int agreed = -2;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "SENTINEL GET-MASTER-ADDR-BY-NAME %s",
             g_s.master_name);
    for (int k = 0; k < g_s.nsentinels; k++) {
        if (g_s.sentinels[k].pid <= 0)
            continue;
        redisReply *rep = port_cmd(g_s.sentinels[k].port, cmd);
        int p = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2
                    ? atoi(rep->element[1]->str)
                    : -1;
        freeReplyObject(rep);
        agreed = agreed == -2 || agreed == p ? p : -1;
    }
    port = agreed;
    return port;
}

/*
 * SENTINEL FAILOVER with the old primary alive (it stays a writable
 * primary for seconds, until a Sentinel demotes it) while the client's
 * loop runs, as a service's does: the +switch-master it hears moves it.
 * The next push (DQ_OPT_WAIT_REPLICAS = 1) lands on the new primary, the
 * old one runs no script of ours and never answers READONLY, an idle
 * consumer (wait cap 60 s) is woken by a push at the new primary, and
 * pushes are acknowledged by a replica again once the old primary
 * replicates the new one.
 */
START_TEST(sentinel_switch) {
    ck_assert_msg(thc_sentinel_start(&g_s, 1, 3, "dqaswitch") == 0,
                  "sentinels did not start (see thc: messages)");
    thc_sentinel_uri(&g_s, g_uri, sizeof(g_uri));
    dq_options *o = opts(15000, 60000, 1);
    dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS, 500);
    dq_async *a = copen(g_uri, o, NULL);
    dq_options_free(o);
    const char *q = "aswq";
    res p1;
    memset(&p1, 0, sizeof(p1));
    ck_assert_int_eq(dq_async_push(a, q, "x", 1, 60000, "pre", 0, push_rec,
                                   &p1),
                     0);
    WAIT_CB_MS(p1, 0, 10000);
    static seen s;
    memset(&s, 0, sizeof(s));
    dq_consumer *c = NULL;
    ck_assert_int_eq(dq_consumer_new(a, q, ok_handler, &s, &c), 0);
    ck_assert_int_eq(dq_consumer_start(c), 0);
    run_for(500); /* idle, subscribed at the primary */

    int old = g_s.primary, oport = g_s.data[old].port;
    long long calls0 = tu_script_calls_at(oport), ro0 = readonly_errors(oport);
    int64_t t0 = th_mono_ms();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "SENTINEL FAILOVER %s", g_s.master_name);
    int asked = 0;
    for (int64_t end = t0 + 20000; !asked && th_mono_ms() < end;) {
        redisReply *rep = port_cmd(g_s.sentinels[0].port, cmd);
        asked = rep->type == REDIS_REPLY_STATUS;
        freeReplyObject(rep);
        if (!asked)
            run_for(200); /* no replica it can promote yet */
    }
    ck_assert_msg(asked, "SENTINEL FAILOVER refused for 20 s");
    int nport = -1;
    ck_assert_msg(RUN_UNTIL((nport = agreed_port()) > 0 && nport != oport,
                            30000),
                  "the Sentinels did not agree on a new primary in 30 s");
    int64_t fo_ms = th_mono_ms() - t0;
    /* The loop goes on as a service's would: the Sentinel's message,
     * published as it switched, is on its way to the client while the
     * test asks the Sentinels over its own links.  (A call made at the
     * very moment of the switch, with the old primary's link just
     * dropped, may get DQ_EIO like any call on a link that breaks.) */
    run_for(200);
    int np = -1;
    for (int i = 0; i < g_s.ndata; i++)
        if (g_s.data[i].port == nport)
            np = i;
    ck_assert_int_ge(np, 0);
    g_s.primary = np;
    redisReply *role = port_cmd(oport, "ROLE");
    int old_master = role->type == REDIS_REPLY_ARRAY &&
                     strcmp(role->element[0]->str, "master") == 0;
    freeReplyObject(role);

    int64_t t1 = th_mono_us();
    res p2;
    memset(&p2, 0, sizeof(p2));
    ck_assert_int_eq(dq_async_push(a, q, "y", 1, 0, "j1", 0, push_rec, &p2),
                     0);
    ck_assert_msg(RUN_UNTIL(p2.calls > 0, 20000), "no callback");
    int64_t push_us = th_mono_us() - t1;
    long long calls1 = tu_script_calls_at(oport);
    int got1 = RUN_UNTIL(s.ok[1] == 1, 5000);
    run_for(300);
    int64_t w0 = wall_us();
    res p3;
    memset(&p3, 0, sizeof(p3));
    ck_assert_int_eq(dq_async_push(a, q, "z", 1, 0, "j2", 0, push_rec, &p3),
                     0);
    ck_assert_msg(RUN_UNTIL(p3.calls > 0, 20000), "no callback");
    int woken = RUN_UNTIL(s.ok[2] == 1, 5000);
    int64_t wake_us = woken ? s.at_us[2] - w0 : -1;

    /* Acknowledged by a replica again once the old primary follows. */
    int64_t t2 = th_mono_ms();
    int tries = 0, ereplicas = 0, acked = 0, bad = 0;
    char bad_msg[600] = "";
    while (!acked && th_mono_ms() - t2 < 30000 && tries < 200) {
        char id[16];
        snprintf(id, sizeof(id), "r%d", tries++);
        res pr;
        memset(&pr, 0, sizeof(pr));
        ck_assert_int_eq(dq_async_push(a, q, "r", 1, 60000, id, 0, push_rec,
                                       &pr),
                         0);
        ck_assert_msg(RUN_UNTIL(pr.calls > 0, 20000), "no callback");
        acked = pr.status == 0;
        ereplicas += pr.status == DQ_EREPLICAS;
        if (pr.status != 0 && pr.status != DQ_EREPLICAS) {
            bad++;
            snprintf(bad_msg, sizeof(bad_msg), "push %s: %s: %s", id,
                     dq_errname(pr.status), pr.msg);
        }
        if (!acked)
            run_for(100);
    }
    int64_t replicated_ms = th_mono_ms() - t2;
    long long ro1 = readonly_errors(oport);
    printf("figures: async_cluster: sentinel_switch: failover_ms=%" PRId64
           " old_primary_still_master=%d push_us=%" PRId64 " push=%s/%s "
           "script_calls_at_old_after=%lld readonly_at_old=%lld "
           "consumer_woken_us=%" PRId64 " pushes_until_replicated=%d "
           "ereplicas=%d failed=%d replicated_after_ms=%" PRId64 "\n",
           fo_ms, old_master, push_us, dq_errname(p2.status),
           dq_errname(p3.status), calls1 - calls0, ro1 - ro0, wake_us, tries,
           ereplicas, bad, replicated_ms);
    fflush(stdout);
    ck_assert_msg(p2.status == 0 || p2.status == DQ_EREPLICAS,
                  "push after the failover: %s: %s", dq_errname(p2.status),
                  p2.msg);
    ck_assert_msg(calls1 == calls0,
                  "%lld script calls reached the old primary 127.0.0.1:%d "
                  "after the failover", calls1 - calls0, oport);
    ck_assert_msg(ro1 == ro0, "the old primary answered READONLY %lld times",
                  ro1 - ro0);
    ck_assert_msg(p3.status == 0 || p3.status == DQ_EREPLICAS,
                  "push j2: %s: %s", dq_errname(p3.status), p3.msg);
    ck_assert_msg(woken && wake_us < 1500000,
                  "consumer woken %" PRId64 " us after a push at the new "
                  "primary (wait cap 60 s)", wake_us);
    ck_assert_msg(bad == 0, "%d pushes failed: %s", bad, bad_msg);
    ck_assert_msg(acked, "no push acknowledged by a replica within 30 s");
    ck_assert_msg(got1, "the consumer did not get j1 within 5 s");
    ck_assert_int_eq(s.ok[1], 1);
    ck_assert_int_eq(s.ok[2], 1);
    res st;
    memset(&st, 0, sizeof(st));
    ck_assert_int_eq(dq_async_stats(a, q, stats_rec, &st), 0);
    WAIT_CB_MS(st, 0, 10000);
    /* pre and r0..: scheduled in 60 s; j1, j2 acked */
    ck_assert_int_eq(st.s[0], 1 + tries);
    dq_consumer_free(c);
    dq_async_free(a);
}
END_TEST

/* 1 if some client of the Sentinel at port is subscribed (CLIENT LIST). */
static int has_subscriber(int port) {
    redisReply *rep = port_cmd(port, "CLIENT LIST");
    int yes = rep->type == REDIS_REPLY_STRING &&
              strstr(rep->str, " sub=1") != NULL;
    freeReplyObject(rep);
    return yes;
}

/* Sentinel 1 or 2 has a subscriber (asked at most every 50 ms: a loop
 * condition). */
static int others_subscribed(void) {
    static int64_t last;
    static int yes;
    if (th_mono_ms() - last >= 50) {
        last = th_mono_ms();
        yes = has_subscriber(g_s.sentinels[1].port) ||
              has_subscriber(g_s.sentinels[2].port);
    }
    return yes;
}

/*
 * The Sentinel the client listens on hangs (SIGSTOP): the subscription,
 * renewed every 5 s, gets no confirmation within the command timeout, so
 * the link moves to another Sentinel, whose +switch-master of a SENTINEL
 * FAILOVER then moves the client (no script at the old primary).
 */
START_TEST(sentinel_hung) {
    ck_assert_msg(thc_sentinel_start(&g_s, 1, 3, "dqahung") == 0,
                  "sentinels did not start (see thc: messages)");
    thc_sentinel_uri(&g_s, g_uri, sizeof(g_uri));
    dq_options *o = opts(2000, 0, 0);
    dq_async *a = copen(g_uri, o, NULL);
    dq_options_free(o);
    ck_assert_msg(RUN_UNTIL(has_subscriber(g_s.sentinels[0].port), 5000),
                  "the client does not listen on the first Sentinel");
    pid_t stopped = g_s.sentinels[0].pid;
    ck_assert_int_eq(kill(stopped, SIGSTOP), 0);
    g_s.sentinels[0].pid = 0; /* not asked while stopped */
    int64_t t0 = th_mono_ms();
    int moved = RUN_UNTIL(others_subscribed(), 20000);
    int64_t moved_ms = th_mono_ms() - t0;
    int old = g_s.primary, oport = g_s.data[old].port;
    long long calls0 = tu_script_calls_at(oport);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "SENTINEL FAILOVER %s", g_s.master_name);
    int asked = 0;
    for (int64_t end = th_mono_ms() + 20000; moved && !asked &&
                                             th_mono_ms() < end;) {
        redisReply *rep = port_cmd(g_s.sentinels[1].port, cmd);
        asked = rep->type == REDIS_REPLY_STATUS;
        freeReplyObject(rep);
        if (!asked)
            run_for(200);
    }
    int nport = -1;
    int agreed = asked && RUN_UNTIL((nport = agreed_port()) > 0 &&
                                        nport != oport,
                                    30000);
    run_for(200); /* the loop runs on, as a service's does */
    res p1;
    memset(&p1, 0, sizeof(p1));
    if (agreed) {
        ck_assert_int_eq(dq_async_push(a, "ahq", "x", 1, 0, "h1", 0,
                                       push_rec, &p1),
                         0);
        ck_assert_msg(RUN_UNTIL(p1.calls > 0, 10000), "no callback");
    }
    long long calls1 = tu_script_calls_at(oport);
    kill(stopped, SIGCONT);
    g_s.sentinels[0].pid = stopped;
    for (int i = 0; i < g_s.ndata; i++)
        if (g_s.data[i].port == nport)
            g_s.primary = i;
    printf("figures: async_cluster: sentinel_hung: resubscribed_after_ms=%"
           PRId64 " push_after=%s script_calls_at_old_after=%lld\n",
           moved_ms, p1.calls ? dq_errname(p1.status) : "none",
           calls1 - calls0);
    fflush(stdout);
    ck_assert_msg(moved, "no other Sentinel got the subscription in 20 s");
    ck_assert_msg(moved_ms < 9000, "resubscribed after %" PRId64 " ms "
                  "(check every 5 s, confirmation due in 2 s)", moved_ms);
    ck_assert_msg(agreed, "the failover did not complete");
    ck_assert_msg(p1.status == 0, "push after the failover: %s: %s",
                  dq_errname(p1.status), p1.msg);
    ck_assert_msg(calls1 == calls0, "%lld script calls at the old primary",
                  calls1 - calls0);
    dq_async_free(a);
}
END_TEST

TEST_SUITE("async_cluster", TU_SRV_NONE,
           {"spread_ops", spread_ops, 120, &cl_fixture},
           {"batch_3000", batch_3000, 120, &cl_fixture},
           {"consumer_wake", consumer_wake, 120, &cl_fixture},
           {"slot_moves", slot_moves, 180, &cl_fixture},
           {"fair_slot_moves", fair_slot_moves, 180, &cl_fixture},
           {"two_asks", two_asks, 120, &cl_fixture},
           {"failover", failover, 180, &cl_fixture},
           {"sentinel", sentinel, 180, &cl_fixture},
           {"sentinel_switch", sentinel_switch, 180, &cl_fixture},
           {"sentinel_hung", sentinel_hung, 120, &cl_fixture},
           {"slots_fallback", slots_fallback, 120, &cl_fixture})
