/*
 * tests/test_cluster_tls.c - rediss+cluster://: the clients over a Redis
 * Cluster whose nodes serve clients over TLS.
 *
 * The cluster (cluster_harness.h, thc_cluster_start_tls): 3 primaries with
 * 1 replica each, every node with a tls-port, tls-cluster yes (so CLUSTER
 * SHARDS lists each node's "tls-port") and tls-replication yes, clients
 * required to show a certificate (tls-auth-clients, Redis's default).  Each
 * node keeps a plain port on 127.0.0.1 for the harness's admin connection;
 * the tests check with CLIENT LIST that the library never uses it.  A
 * throwaway CA, server and client certificates are made with openssl, as
 * tests/fault/test_auth.c does.
 *
 *  sync_ops        (builds with TLS, -DDQ_TEST_TLS) dq_open on one seed's
 *                  TLS port: push / poll / ack / stats on 12 queues whose
 *                  slots cover all 3 primaries and on a queue of 6
 *                  partitions (?partitions=6) spread over them, each job
 *                  found on the node that owns its slot; every primary then
 *                  has connections of the client on its tls-port and none
 *                  more on its plain port; dq_poll_wait (wait cap 10 s) of
 *                  a second client woken by a push, plain and partitioned.
 *  async_ops       (with TLS and libevent) dq_async_open on the same kind
 *                  of URI: push / poll / ack on the 12 queues and on the
 *                  partitioned queue.
 *  unsupported     (builds without TLS) the same TLS cluster: rediss+cluster://
 *                  and redis+cluster:// with a TLS option are refused with
 *                  DQ_ENOTSUP (dq_open, and dq_async_open with libevent),
 *                  while redis+cluster:// on the plain ports works.
 *
 * Every test prints one "figures: " line.
 */
#include "fault.h"

#include "cluster_harness.h"

#ifdef DQ_TEST_ASYNC
#include "test_async.h"
#endif

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NQ 12
#define PARTS 6

/* ---- certificates ------------------------------------------------------- */

static char g_dir[256];

static void rm_certs(void) {
    tu_rm_dir(g_dir, "/tmp/dq-cluster-tls");
    g_dir[0] = '\0';
}

/* A CA, a server certificate for 127.0.0.1 / localhost (the nodes also
 * present it to each other on the bus) and a client certificate. */
static void make_certs(void) {
    snprintf(g_dir, sizeof(g_dir), "/tmp/dq-cluster-tlsXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    atexit(rm_certs);
    tu_make_ca(g_dir, "ca", "dq-test-ca");
    tu_make_cert(g_dir, "server", "ca", "localhost",
                 "IP:127.0.0.1,DNS:localhost");
    tu_make_cert(g_dir, "client", "ca", "dq-client", NULL);
}

static dq_options *tls_opts(int parts) {
    char path[400];
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    snprintf(path, sizeof(path), "%s/ca.crt", g_dir);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_TLS_CA_FILE, path), 0);
    snprintf(path, sizeof(path), "%s/client.crt", g_dir);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_TLS_CERT_FILE, path), 0);
    snprintf(path, sizeof(path), "%s/client.key", g_dir);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_TLS_KEY_FILE, path), 0);
    if (parts > 1)
        ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_PARTITIONS, parts), 0);
    return o;
}

/* ---- the cluster -------------------------------------------------------- */

static thc_cluster g_cl;
static int g_tls[THC_MAX_NODES];
static int g_up;

static void cluster_stop(void) {
    if (g_up)
        thc_cluster_stop(&g_cl);
    g_up = 0;
}

/* Certificates, then the TLS cluster; uri: one seed, the TLS port of the
 * first primary (the library must learn the others' from CLUSTER SHARDS). */
static void cluster_up(char *uri, size_t n) {
    make_certs();
    atexit(cluster_stop);
    ck_assert_msg(thc_cluster_start_tls(&g_cl, 3, 1, NULL, g_dir, g_tls) == 0,
                  "thc_cluster_start_tls failed (see stderr)");
    g_up = 1;
    for (int i = 0; i < g_cl.count; i++) {
        if (g_cl.nodes[i].role == THC_PRIMARY) {
            snprintf(uri, n, "rediss+cluster://127.0.0.1:%d", g_tls[i]);
            return;
        }
    }
    ck_abort_msg("no primary");
}

#define CK_RC(rc, want, c, what)                                              \
    ck_assert_msg((rc) == (want), "%s: got %d (%s), want %d: %s", (what),    \
                  (rc), dq_errname(rc), (want), dq_errmsg(c))

#ifdef DQ_TEST_TLS

/* ---- helpers of the TLS tests ------------------------------------------- */


static int owner_of_part(const char *q, int p) {
    char t[256];
    thc_part_tag(q, p, t, sizeof(t));
    int o = thc_owner(&g_cl, thc_slot_of(t));
    ck_assert_msg(o >= 0, "no owner for %s", t);
    return o;
}

/* FNV-1a 32 of the id mod n, as the library documents it; -1 if plain. */
static int part_of(const char *id, int n) {
    return n > 1 ? tu_part_of(id, n) : -1;
}

static redisReply *node_cmd(int i, const char *fmt, ...) {
    redisContext *ctx = thc_connect(g_cl.nodes[i].r.port);
    ck_assert_msg(ctx != NULL, "cannot connect to node %d", i);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "node %d: %s: %s", i, fmt, ctx->errstr);
    redisFree(ctx);
    return r;
}

/* The job is in its queue's (partition's) jobs hash on the slot's owner. */
static void check_stored(const char *q, int parts, const char *id) {
    int p = part_of(id, parts);
    char tag[256];
    thc_part_tag(q, p, tag, sizeof(tag));
    int o = owner_of_part(q, p);
    redisReply *r = node_cmd(o, "HEXISTS dq:{%s}:jobs %s", tag, id);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 1,
                  "job %s of %s is not in dq:{%s}:jobs on node %d", id, q,
                  tag, o);
    freeReplyObject(r);
}

/* 12 plain queues, 4 on each primary; a partitioned queue whose PARTS
 * partitions lie on all 3 primaries. */
static void pick_queues(char names[NQ][32], char *pq, size_t n) {
    int prim[THC_MAX_NODES], per[THC_MAX_NODES] = {0};
    ck_assert_int_eq(thc_primaries(&g_cl, prim), 3);
    int k = 0, got = 0;
    for (; got < NQ && k < 1000; k++) {
        char q[32];
        snprintf(q, sizeof(q), "tq-%d", k);
        int o = owner_of_part(q, -1);
        if (per[o] >= 4)
            continue;
        per[o]++;
        snprintf(names[got++], 32, "%s", q);
    }
    ck_assert_int_eq(got, NQ);
    for (k = 0; k < 1000; k++) {
        int on[THC_MAX_NODES] = {0}, cover = 0;
        snprintf(pq, n, "tp-%d", k);
        for (int p = 0; p < PARTS; p++)
            on[owner_of_part(pq, p)] = 1;
        for (int i = 0; i < 3; i++)
            cover += on[prim[i]];
        if (cover == 3)
            return;
    }
    ck_abort_msg("no partitioned queue name over all 3 primaries");
}

/* Clients of primary i (not its replica's link: flags S) whose laddr is
 * 127.0.0.1:port. */
static int clients_on(int i, int port) {
    redisReply *r = node_cmd(i, "CLIENT LIST");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    char want[64];
    snprintf(want, sizeof(want), " laddr=127.0.0.1:%d ", port);
    int n = 0;
    for (char *line = r->str; line && *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        const char *fl = strstr(line, " flags=");
        int replica = fl && strchr(fl + 7, 'S') != NULL &&
                      strchr(fl + 7, 'S') < strchr(fl + 7, ' ');
        if (strstr(line, want) && !replica)
            n++;
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(r);
    return n;
}

/* ---- sync --------------------------------------------------------------- */

/* Pushes n jobs (ids <q>-<k>), checks where they are stored, polls them
 * all, acks them all, checks the queue is empty.  Returns the jobs acked. */
static int round_trip(dq_client *c, const char *q, int parts, int n) {
    for (int k = 0; k < n; k++) {
        char id[64], pl[96];
        snprintf(id, sizeof(id), "%s-%d", q, k);
        snprintf(pl, sizeof(pl), "payload of %s", id);
        int oc = 0;
        int rc = dq_push(c, q, pl, strlen(pl), 0, id, 0, NULL, 0, &oc);
        CK_RC(rc, 0, c, "push");
        ck_assert_int_eq(oc, DQ_PUSHED);
        check_stored(q, parts, id);
    }
    int64_t due = -1;
    CK_RC(dq_stats(c, q, NULL, &due, NULL, NULL, NULL), 0, c, "stats");
    ck_assert_int_eq(due, n);
    int acked = 0;
    for (int round = 0; acked < n && round < 20; round++) {
        dq_jobs *jobs = NULL;
        int rc = dq_poll(c, q, n, 60000, &jobs, NULL);
        ck_assert_msg(rc >= 0, "poll %s: %s: %s", q, dq_errname(rc),
                      dq_errmsg(c));
        for (int i = 0; i < rc; i++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)i);
            char pl[96];
            snprintf(pl, sizeof(pl), "payload of %s", dq_job_id(j));
            size_t len = 0;
            const void *got = dq_job_payload(j, &len);
            ck_assert_uint_eq(len, strlen(pl));
            ck_assert(memcmp(got, pl, len) == 0);
            CK_RC(dq_ack(c, q, dq_job_id(j), dq_job_token(j)), 0, c, "ack");
            acked++;
        }
        dq_jobs_free(jobs);
    }
    ck_assert_int_eq(acked, n);
    int64_t sched = -1, infl = -1;
    due = -1;
    CK_RC(dq_stats(c, q, &sched, &due, &infl, NULL, NULL), 0, c, "stats");
    ck_assert_msg(sched == 0 && due == 0 && infl == 0,
                  "%s after the acks: %" PRId64 " scheduled, %" PRId64
                  " due, %" PRId64 " in flight", q, sched, due, infl);
    return acked;
}


/* A tu_waiter on q (its own client, wait cap 10 s) woken by producer's push
 * of job id; returns the wake-up time (ms). */
static int64_t wake(const char *uri, int parts, dq_client *producer,
                    const char *q, const char *id) {
    dq_options *o = tls_opts(parts);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 10000), 0);
    dq_client *wc = NULL;
    int rc = dq_open(uri, o, &wc);
    CK_RC(rc, 0, wc, "open (tu_waiter)");
    char tag[64], chan[128];
    int p = part_of(id, parts);
    thc_part_tag(q, p, tag, sizeof(tag));
    snprintf(chan, sizeof(chan), "dq:{%s}:wake:0", tag);
    int o_node = owner_of_part(q, p);
    tu_waiter w = {.c = wc, .q = q};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, tu_wait_thread, &w), 0);
    int64_t end = th_mono_ms() + 10000;
    for (;;) {
        /* the waiter's own channel: "<chan>:<consumer id>" */
        redisReply *r = node_cmd(o_node, "PUBSUB SHARDCHANNELS %s:*", chan);
        long long subs = r->type == REDIS_REPLY_ARRAY ? (long long)r->elements
                                                      : -1;
        freeReplyObject(r);
        if (subs >= 1)
            break;
        ck_assert_msg(th_mono_ms() < end,
                      "nobody subscribed to %s on node %d after 10 s", chan,
                      o_node);
        th_sleep_ms(5);
    }
    th_sleep_ms(150); /* let it poll once and go to sleep */
    int64_t t0 = th_mono_us();
    rc = dq_push(producer, q, "w", 1, 0, id, 0, NULL, 0, NULL);
    CK_RC(rc, 0, producer, "push (wake)");
    pthread_join(th, NULL);
    int64_t ms = (w.done_us - t0) / 1000;
    ck_assert_msg(w.rc == 1, "poll_wait on %s returned %d (%s) after %" PRId64
                  " ms: %s", q, w.rc, dq_errname(w.rc), ms, w.err);
    ck_assert_str_eq(w.id, id);
    ck_assert_msg(ms < 1000, "poll_wait on %s woken %" PRId64
                  " ms after the push (wait cap 10 s)", q, ms);
    CK_RC(dq_ack(wc, q, w.id, w.token), 0, wc, "ack (tu_waiter)");
    dq_close(wc);
    dq_options_free(o);
    return ms;
}

START_TEST(sync_ops) {
    char uri[256], puri[300], names[NQ][32], pq[32];
    cluster_up(uri, sizeof(uri));
    pick_queues(names, pq, sizeof(pq));
    int prim[THC_MAX_NODES];
    ck_assert_int_eq(thc_primaries(&g_cl, prim), 3);
    int plain_before[3];
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(clients_on(prim[i], g_tls[prim[i]]), 0);
        plain_before[i] = clients_on(prim[i], g_cl.nodes[prim[i]].r.port);
    }

    dq_options *o = tls_opts(1);
    dq_client *c = NULL;
    int64_t t0 = th_mono_ms();
    int rc = dq_open(uri, o, &c);
    CK_RC(rc, 0, c, "dq_open over TLS");
    int acked = 0;
    for (int i = 0; i < NQ; i++)
        acked += round_trip(c, names[i], 1, 5);

    snprintf(puri, sizeof(puri), "%s?partitions=%d", uri, PARTS);
    dq_client *pc = NULL;
    rc = dq_open(puri, o, &pc);
    CK_RC(rc, 0, pc, "dq_open over TLS, partitioned");
    acked += round_trip(pc, pq, PARTS, 60);
    int64_t ops_ms = th_mono_ms() - t0;

    /* Both clients talked to every primary, over its TLS port only. */
    int tls_conns[3], plain_extra = 0;
    for (int i = 0; i < 3; i++) {
        tls_conns[i] = clients_on(prim[i], g_tls[prim[i]]);
        int plain = clients_on(prim[i], g_cl.nodes[prim[i]].r.port);
        ck_assert_msg(tls_conns[i] >= 1,
                      "primary %d has no client on its tls-port %d", prim[i],
                      g_tls[prim[i]]);
        ck_assert_msg(plain == plain_before[i],
                      "primary %d: %d clients on its plain port %d, %d "
                      "before the library's", prim[i], plain,
                      g_cl.nodes[prim[i]].r.port, plain_before[i]);
        plain_extra += plain - plain_before[i];
    }

    int64_t wake_plain = wake(uri, 1, c, names[0], "wake-1");
    int64_t wake_part = wake(puri, PARTS, pc, pq, "wake-2");
    dq_close(c);
    dq_close(pc);
    dq_options_free(o);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(clients_on(prim[i], g_tls[prim[i]]), 0);
    printf("figures: cluster_tls_sync: primaries=3 replicas=3 queues=%d "
           "partitioned=1 partitions=%d pushed=%d acked=%d lost=0 "
           "tls_conns=%d,%d,%d plain_conns_added=%d ops_ms=%" PRId64
           " wake_ms=%" PRId64 ",%" PRId64 " (plain, partitioned; cap "
           "10000)\n",
           NQ, PARTS, acked + 2, acked + 2, tls_conns[0], tls_conns[1],
           tls_conns[2], plain_extra, ops_ms, wake_plain, wake_part);
    fflush(stdout);
    cluster_stop();
}
END_TEST

#ifdef DQ_TEST_ASYNC

/* ---- async -------------------------------------------------------------- */

/* Push n, poll them all, ack them all, over the async client. */
static int async_round_trip(dq_async *a, const char *q, int parts, int n) {
    for (int k = 0; k < n; k++) {
        char id[64];
        snprintf(id, sizeof(id), "%s-a%d", q, k);
        res r = {0};
        ck_assert_int_eq(dq_async_push(a, q, id, strlen(id), 0, id, 0,
                                       push_rec, &r), 0);
        WAIT_CB(r, 0);
        ck_assert_int_eq(r.outcome, DQ_PUSHED);
        check_stored(q, parts, id);
    }
    int acked = 0;
    for (int round = 0; acked < n && round < 20; round++) {
        res r = {0};
        ck_assert_int_eq(dq_async_poll(a, q, n, 60000, jobs_rec, &r), 0);
        ck_assert_msg(RUN_UNTIL(r.calls > 0, 5000), "no poll callback");
        ck_assert_msg(r.status >= 0, "poll %s: %s: %s", q,
                      dq_errname(r.status), r.msg);
        for (size_t i = 0; i < r.n; i++) {
            const dq_job *j = kept(&r, i);
            size_t len = 0;
            const void *got = dq_job_payload(j, &len);
            ck_assert_uint_eq(len, strlen(dq_job_id(j)));
            ck_assert(memcmp(got, dq_job_id(j), len) == 0);
            res ar = {0};
            ck_assert_int_eq(dq_async_ack(a, q, dq_job_id(j), dq_job_token(j),
                                          st_rec, &ar), 0);
            WAIT_CB(ar, 0);
            acked++;
        }
        res_clear(&r);
    }
    ck_assert_int_eq(acked, n);
    res s = {0};
    ck_assert_int_eq(dq_async_stats(a, q, stats_rec, &s), 0);
    WAIT_CB(s, 0);
    ck_assert_msg(s.s[0] == 0 && s.s[1] == 0 && s.s[2] == 0,
                  "%s after the acks: %" PRId64 "/%" PRId64 "/%" PRId64, q,
                  s.s[0], s.s[1], s.s[2]);
    return acked;
}

START_TEST(async_ops) {
    char uri[256], puri[300], names[NQ][32], pq[32];
    cluster_up(uri, sizeof(uri));
    pick_queues(names, pq, sizeof(pq));
    int prim[THC_MAX_NODES];
    ck_assert_int_eq(thc_primaries(&g_cl, prim), 3);
    int plain_before[3];
    for (int i = 0; i < 3; i++)
        plain_before[i] = clients_on(prim[i], g_cl.nodes[prim[i]].r.port);
    base_setup();
    dq_options *o = tls_opts(1);
    states st = {0}, pst = {0};
    int64_t t0 = th_mono_ms();
    dq_async *a = aopen_uri(uri, o, &st);
    int acked = 0;
    for (int i = 0; i < NQ; i++)
        acked += async_round_trip(a, names[i], 1, 3);
    snprintf(puri, sizeof(puri), "%s?partitions=%d", uri, PARTS);
    dq_async *pa = aopen_uri(puri, o, &pst);
    acked += async_round_trip(pa, pq, PARTS, 30);
    int64_t ops_ms = th_mono_ms() - t0;
    int tls_conns[3];
    for (int i = 0; i < 3; i++) {
        tls_conns[i] = clients_on(prim[i], g_tls[prim[i]]);
        ck_assert_msg(tls_conns[i] >= 1,
                      "primary %d has no client on its tls-port %d", prim[i],
                      g_tls[prim[i]]);
        ck_assert_int_eq(clients_on(prim[i], g_cl.nodes[prim[i]].r.port),
                         plain_before[i]);
    }
    ck_assert_int_eq(st.disconnected, 0);
    ck_assert_int_eq(pst.disconnected, 0);
    dq_async_free(a);
    dq_async_free(pa);
    dq_options_free(o);
    base_teardown();
    printf("figures: cluster_tls_async: primaries=3 queues=%d partitioned=1 "
           "partitions=%d pushed=%d acked=%d lost=0 tls_conns=%d,%d,%d "
           "plain_conns_added=0 ops_ms=%" PRId64 "\n",
           NQ, PARTS, acked, acked, tls_conns[0], tls_conns[1], tls_conns[2],
           ops_ms);
    fflush(stdout);
    cluster_stop();
}
END_TEST

#endif /* DQ_TEST_ASYNC */

#else /* no TLS in this build */

/* ---- refused ------------------------------------------------------------ */

START_TEST(unsupported) {
    char uri[256], plain[512];
    cluster_up(uri, sizeof(uri));
    int faults = 0;

    dq_options *o = tls_opts(1);
    dq_client *c = NULL;
    int rc = dq_open(uri, o, &c);
    ck_assert_msg(rc == DQ_ENOTSUP, "rediss+cluster:// without TLS: %s: %s",
                  dq_errname(rc), dq_errmsg(c));
    ck_assert_msg(strstr(dq_errmsg(c), "TLS") != NULL, "message: %s",
                  dq_errmsg(c));
    printf("rediss+cluster:// in a build without TLS: %s\n", dq_errmsg(c));
    dq_close(c);
    faults++;
    c = NULL;
    rc = dq_open(uri, NULL, &c);
    ck_assert_msg(rc == DQ_ENOTSUP, "rediss+cluster:// without options: %s",
                  dq_errname(rc));
    dq_close(c);
    faults++;

    /* The plain ports: the cluster itself is fine; a TLS option on a plain
     * cluster URI is refused the same way. */
    thc_cluster_uri(&g_cl, plain, sizeof(plain));
    c = NULL;
    rc = dq_open(plain, o, &c);
    ck_assert_msg(rc == DQ_ENOTSUP, "redis+cluster:// with a TLS CA: %s",
                  dq_errname(rc));
    dq_close(c);
    faults++;
    c = open_uri(plain, NULL);
    rc = dq_push(c, "tq", "x", 1, 0, "j1", 0, NULL, 0, NULL);
    CK_RC(rc, 0, c, "push on the plain ports");
    dq_jobs *jobs = NULL;
    rc = dq_poll(c, "tq", 1, 60000, &jobs, NULL);
    CK_RC(rc, 1, c, "poll on the plain ports");
    CK_RC(dq_ack(c, "tq", "j1", dq_job_token(dq_jobs_at(jobs, 0))), 0, c,
          "ack");
    dq_jobs_free(jobs);
    dq_close(c);

#ifdef DQ_TEST_ASYNC
    base_setup();
    dq_async *a = NULL;
    rc = dq_async_open(g_base, uri, o, &a);
    ck_assert_msg(rc == DQ_ENOTSUP, "dq_async_open rediss+cluster://: %s: %s",
                  dq_errname(rc), a ? dq_async_errmsg(a) : "");
    dq_async_free(a);
    faults++;
    base_teardown();
#endif
    dq_options_free(o);
    printf("figures: cluster_tls_unsupported: pushed=1 acked=1 lost=0 "
           "faults=%d (TLS asked of a build without it: DQ_ENOTSUP; the "
           "same cluster over its plain ports works)\n",
           faults);
    fflush(stdout);
    cluster_stop();
}
END_TEST

#endif

#ifdef DQ_TEST_TLS
#ifdef DQ_TEST_ASYNC
#define TLS_TESTS                                                             \
    {"sync_ops", sync_ops, 180, NULL}, {"async_ops", async_ops, 180, NULL}
#else
#define TLS_TESTS {"sync_ops", sync_ops, 180, NULL}
#endif
#else
#define TLS_TESTS {"unsupported", unsupported, 180, NULL}
#endif

TEST_SUITE("cluster_tls", TU_SRV_NONE, TLS_TESTS)
