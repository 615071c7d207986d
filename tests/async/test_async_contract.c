/*
 * tests/async/test_async_contract.c - the async client's side of the
 * contract (see tests/test_contract.c): ack batches of 5,000 and 9,000 jobs
 * and push batches of 9,000 in one call, 100 payloads of 1 MiB in one push
 * batch under a 16 MiB query-buffer limit, an id named twice in an ack
 * batch, and DQ_DONE for a keep push of an acked id.
 */
#include "test_async.h"


/* Every result of a big batch callback. */
typedef struct bigres {
    int calls;
    int status;
    size_t n;
    int *vals; /* results or outcomes, n of them (NULL on failure) */
    char msg[512];
} bigres;

static void big_results_rec(dq_async *a, size_t n, const int *results,
                            int status, void *ud) {
    bigres *r = ud;
    r->calls++;
    r->status = status;
    r->n = n;
    if (results != NULL && n > 0) {
        r->vals = malloc(n * sizeof(int));
        ck_assert_ptr_nonnull(r->vals);
        memcpy(r->vals, results, n * sizeof(int));
    }
    snprintf(r->msg, sizeof(r->msg), "%s", dq_async_errmsg(a));
}

static void big_batch_rec(dq_async *a, size_t n, const char *ids,
                          const int *outcomes, int status, void *ud) {
    (void)ids;
    big_results_rec(a, n, outcomes, status, ud);
}

static void bigres_clear(bigres *r) {
    free(r->vals);
    memset(r, 0, sizeof(*r));
}

#define WAIT_BIG(r, want_status, ms)                                          \
    do {                                                                      \
        ck_assert_msg(RUN_UNTIL((r).calls > 0, (ms)), "no callback");         \
        ck_assert_int_eq((r).calls, 1);                                       \
        ck_assert_msg((r).status == (want_status),                            \
                      "status %d (%s), want %d: %s", (r).status,              \
                      dq_errname((r).status), (want_status), (r).msg);        \
    } while (0)

/* Polls all n due jobs of q (sync client, 1000 at a time, 60 s lease) into
 * ids/toks (pointers into the lists, kept in lists[]). */
static void poll_all(dq_client *c, const char *q, size_t n, const char **ids,
                     const char **toks, dq_jobs **lists, size_t nlists) {
    size_t k = 0;
    for (size_t r = 0; r < nlists && k < n; r++) {
        int got = poll_n(c, q, 1000, 60000, &lists[r], NULL);
        ck_assert_int_gt(got, 0);
        for (int i = 0; i < got; i++, k++) {
            ids[k] = dq_job_id(dq_jobs_at(lists[r], (size_t)i));
            toks[k] = dq_job_token(dq_jobs_at(lists[r], (size_t)i));
        }
    }
    ck_assert_uint_eq(k, n);
}

/* ---- 6. ack batches larger than one unpack() --------------------------- */

/* Leases all n due jobs of queue q (sync polls), acks them with ONE async
 * ack_batch call and checks every result and that nothing is left. */
static void lease_then_async_ack(dq_client *c, dq_async *a, const char *q,
                                 size_t n) {
    size_t nl = (n + 999) / 1000;
    const char **ids = calloc(n, sizeof(*ids));
    const char **toks = calloc(n, sizeof(*toks));
    dq_jobs **lists = calloc(nl, sizeof(*lists));
    ck_assert(ids && toks && lists);
    poll_all(c, q, n, ids, toks, lists, nl);
    ck_stats(c, q, 0, 0, (int64_t)n, 0);
    bigres r = {0};
    ck_assert_int_eq(dq_async_ack_batch(a, q, n, ids, toks,
                                        big_results_rec, &r),
                     0);
    WAIT_BIG(r, (int)n, 15000);
    ck_assert_uint_eq(r.n, n);
    ck_assert_ptr_nonnull(r.vals);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(r.vals[i] == 0, "result %zu: %d", i, r.vals[i]);
    ck_stats(c, q, 0, 0, 0, 0);
    bigres_clear(&r);
    for (size_t i = 0; i < nl; i++)
        dq_jobs_free(lists[i]);
    free(lists);
    free(ids);
    free(toks);
}

START_TEST(ack_batch_5000) {
    enum { N = 5000 };
    dq_client *c = open_client();
    dq_async *a = aopen();
    const void **pl = calloc(N, sizeof(*pl));
    size_t *lens = calloc(N, sizeof(*lens));
    ck_assert(pl && lens);
    ck_assert_int_eq(dq_push_batch(c, Q, N, pl, lens, NULL, NULL, 0, NULL,
                                   NULL),
                     N);
    lease_then_async_ack(c, a, Q, N);
    free(pl);
    free(lens);
    dq_async_free(a);
    dq_close(c);
}
END_TEST

START_TEST(push_ack_batch_9000) {
    enum { N = 9000 };
    dq_client *c = open_client();
    dq_async *a = aopen();
    const void **pl = calloc(N, sizeof(*pl));
    size_t *lens = calloc(N, sizeof(*lens));
    ck_assert(pl && lens);
    for (int i = 0; i < N; i++) {
        pl[i] = "nine";
        lens[i] = 4;
    }
    bigres b = {0};
    ck_assert_int_eq(dq_async_push_batch(a, Q, N, pl, lens, NULL, NULL,
                                         DQ_PUSH_KEEP, big_batch_rec, &b),
                     0);
    WAIT_BIG(b, N, 15000);
    ck_assert_uint_eq(b.n, N);
    ck_assert_ptr_nonnull(b.vals);
    for (size_t i = 0; i < N; i++)
        ck_assert_int_eq(b.vals[i], DQ_PUSHED);
    ck_stats(c, Q, 0, N, 0, 0);
    lease_then_async_ack(c, a, Q, N);
    bigres_clear(&b);
    free(pl);
    free(lens);
    dq_async_free(a);
    dq_close(c);
}
END_TEST

/* ---- 7. 100 payloads of 1 MiB in one push batch -------------------------- */

START_TEST(push_batch_100_mib) {
    enum { N = 100, MIB = 1024 * 1024 };
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, NULL), 0);
    redisContext *rc = th_redis_connect(&srv);
    ck_assert_ptr_nonnull(rc);
    /* As in tests/test_contract.c: the client memory limit is what refuses
     * a single 100 MiB command on Redis 7.0. */
    redisReply *rep = th_cmd(rc, "CONFIG SET client-query-buffer-limit 16mb");
    ck_assert_int_ne(rep->type, REDIS_REPLY_ERROR);
    freeReplyObject(rep);
    rep = th_cmd(rc, "CONFIG SET maxmemory-clients 32mb");
    ck_assert_int_ne(rep->type, REDIS_REPLY_ERROR);
    freeReplyObject(rep);

    unsigned char *buf = malloc(MIB + N);
    ck_assert_ptr_nonnull(buf);
    for (size_t k = 0; k < (size_t)MIB + N; k++)
        buf[k] = (unsigned char)((k * 131u + (k >> 11) * 7u + 3u) & 0xff);
    const void *pl[N];
    size_t lens[N];
    char idbuf[N][16];
    const char *ids[N];
    for (int i = 0; i < N; i++) {
        pl[i] = buf + i;
        lens[i] = MIB;
        snprintf(idbuf[i], sizeof(idbuf[i]), "big%03d", i);
        ids[i] = idbuf[i];
    }
    char uri[600]; /* partitioned as the suite's runs are (tu_uri) */
    tu_uri(srv.uri, NULL, uri, sizeof(uri));
    dq_async *a = aopen_uri(uri, NULL, NULL);
    bigres b = {0};
    ck_assert_int_eq(dq_async_push_batch(a, Q, N, pl, lens, NULL, ids,
                                         DQ_PUSH_KEEP, big_batch_rec, &b),
                     0);
    WAIT_BIG(b, N, 20000);
    ck_assert_uint_eq(b.n, N);
    for (size_t i = 0; i < N; i++)
        ck_assert_int_eq(b.vals[i], DQ_PUSHED);

    /* the payloads arrived whole */
    dq_client *c = open_uri(uri, NULL);
    ck_stats(c, Q, 0, N, 0, 0);
    int got = 0;
    for (int round = 0; round < 20 && got < N; round++) {
        dq_jobs *jobs = NULL;
        int n = dq_poll(c, Q, 10, 60000, &jobs, NULL);
        ck_assert_msg(n > 0, "poll: %d %s", n, dq_errmsg(c));
        for (int k = 0; k < n; k++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)k);
            int idx = atoi(dq_job_id(j) + 3);
            ck_assert(idx >= 0 && idx < N);
            size_t len = 0;
            const void *p = dq_job_payload(j, &len);
            ck_assert_uint_eq(len, MIB);
            ck_assert_msg(memcmp(p, buf + idx, MIB) == 0,
                          "payload of %s differs", dq_job_id(j));
        }
        got += n;
        dq_jobs_free(jobs);
    }
    ck_assert_int_eq(got, N);
    bigres_clear(&b);
    free(buf);
    dq_close(c);
    dq_async_free(a);
    redisFree(rc);
    th_redis_stop(&srv);
}
END_TEST

/* ---- 5. an id twice in one ack batch; 9. DQ_DONE ------------------------- */

START_TEST(ack_batch_same_id_twice) {
    dq_client *c = open_client();
    dq_async *a = aopen();
    push_text(c, Q, "d", 0, "d", 0, NULL);
    dq_jobs *jobs = poll_one(c, Q, 60000);
    const char *tok = dq_job_token(dq_jobs_at(jobs, 0));
    const char *ids[2] = {"d", "d"};
    const char *toks[2] = {tok, tok};
    res r = {0};
    ck_assert_int_eq(dq_async_ack_batch(a, Q, 2, ids, toks, results_rec, &r),
                     0);
    WAIT_CB(r, 1);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_int_eq(r.results[0], 0);
    ck_assert_int_eq(r.results[1], DQ_ENOTFOUND);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_jobs_free(jobs);
    dq_async_free(a);
    dq_close(c);
}
END_TEST

START_TEST(push_keep_after_ack_done) {
    dq_client *c = open_client();
    dq_async *a = aopen();
    res p = {0};
    ck_assert_int_eq(dq_async_push(a, Q, "v1", 2, 0, "order-1", DQ_PUSH_KEEP,
                                   push_rec, &p),
                     0);
    WAIT_CB(p, 0);
    ck_assert_int_eq(p.outcome, DQ_PUSHED);
    dq_jobs *jobs = poll_one(c, Q, 60000);
    res ak = {0};
    ck_assert_int_eq(dq_async_ack(a, Q, "order-1",
                                  dq_job_token(dq_jobs_at(jobs, 0)), st_rec,
                                  &ak),
                     0);
    WAIT_CB(ak, 0);
    dq_jobs_free(jobs);

    res p2 = {0};
    ck_assert_int_eq(dq_async_push(a, Q, "v2", 2, 0, "order-1", DQ_PUSH_KEEP,
                                   push_rec, &p2),
                     0);
    WAIT_CB(p2, 0);
    ck_assert_msg(p2.outcome == DQ_DONE, "keep push of an acked id: "
                  "outcome %d", p2.outcome);
    ck_assert_str_eq(p2.id, "order-1");
    ck_stats(c, Q, 0, 0, 0, 0);

    /* the batch twin says the same */
    const void *pl[2] = {"v3", "v4"};
    size_t lens[2] = {2, 2};
    const char *ids[2] = {"order-1", "order-2"};
    res b = {0};
    ck_assert_int_eq(dq_async_push_batch(a, Q, 2, pl, lens, NULL, ids,
                                         DQ_PUSH_KEEP, batch_rec, &b),
                     0);
    WAIT_CB(b, 1);
    ck_assert_int_eq(b.results[0], DQ_DONE);
    ck_assert_int_eq(b.results[1], DQ_PUSHED);
    ck_stats(c, Q, 0, 1, 0, 0);
    dq_async_free(a);
    dq_close(c);
}
END_TEST

/* ---- a host name is resolved without blocking the loop ------------------ */

/* redis://localhost:PORT: the async client resolves the name with evdns
 * (the hosts file answers; nothing leaves the machine) and works as with
 * an address, and a watch (consumer wake-ups) resolves the same way. */
START_TEST(host_name_resolved) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 1, NULL), 0);
    char base[64], uri[128];
    snprintf(base, sizeof(base), "redis://localhost:%d", srv.port);
    tu_uri(base, NULL, uri, sizeof(uri));
    states st = {0};
    dq_async *a = aopen_uri(uri, NULL, &st);
    res p = {0}, pl = {0}, ak = {0};
    ck_assert_int_eq(dq_async_push(a, Q, "h", 1, 0, "h1", 0, push_rec, &p), 0);
    WAIT_CB(p, 0);
    ck_assert_int_eq(p.outcome, DQ_PUSHED);
    ck_assert_int_eq(dq_async_poll(a, Q, 1, 5000, jobs_rec, &pl), 0);
    WAIT_CB(pl, 1);
    ck_assert_int_eq(dq_async_ack(a, Q, "h1", dq_job_token(kept(&pl, 0)),
                                  st_rec, &ak),
                     0);
    WAIT_CB(ak, 0);
    ck_assert_int_ge(st.connected, 1);
    res_clear(&pl);
    dq_async_free(a);
    th_redis_stop(&srv);
}
END_TEST

/* A job delivered again right away (nack with no delay, a dead requeue, a
 * replace) gets a token above its previous one, never the same: tokens
 * come from the server clock, and the job's meta remembers the last. */
START_TEST(token_above_previous) {
    dq_client *c = open_client();
    push_text(c, Q, "t", 0, "t1", 0, NULL);
    char prev[DQ_TOKEN_BUF] = "";
    for (int round = 0; round < 60; round++) {
        dq_jobs *j = poll_one(c, Q, 60000);
        const char *tok = dq_job_token(dq_jobs_at(j, 0));
        ck_assert_msg(strlen(tok) > strlen(prev) ||
                          (strlen(tok) == strlen(prev) && strcmp(tok, prev) > 0),
                      "round %d: token %s not above %s", round, tok, prev);
        snprintf(prev, sizeof(prev), "%s", tok);
        if (round % 3 == 0) {
            ck_assert_int_eq(dq_nack(c, Q, "t1", tok, 0, 0), 0);
        } else if (round % 3 == 1) {
            ck_assert_int_eq(dq_nack(c, Q, "t1", tok, 0, DQ_NACK_DEAD), 1);
            ck_assert_int_eq(dq_dead_requeue(c, Q, "t1", 0), 1);
        } else {
            int oc = 0;
            ck_assert_int_eq(dq_push(c, Q, "t", 1, 0, "t1", DQ_PUSH_REPLACE,
                                     NULL, 0, &oc),
                             0);
            ck_assert_int_eq(oc, DQ_REPLACED);
        }
        /* the old holder's token is stale now */
        ck_assert_int_eq(dq_extend(c, Q, "t1", prev, 1000, NULL), DQ_ESTALE);
        dq_jobs_free(j);
    }
    dq_close(c);
}
END_TEST

TEST_SUITE("async_contract", TU_SRV_UNIX,
    {"host_name_resolved", host_name_resolved, 30, &async_fixture},
    {"token_above_previous", token_above_previous, 30, &async_fixture},
    {"ack_batch_5000", ack_batch_5000, 30, &async_fixture},
    {"push_ack_batch_9000", push_ack_batch_9000, 30, &async_fixture},
    {"push_batch_100_mib", push_batch_100_mib, 60, &async_fixture},
    {"ack_batch_same_id_twice", ack_batch_same_id_twice, 20, &async_fixture},
    {"push_keep_after_ack_done", push_keep_after_ack_done, 20, &async_fixture})
