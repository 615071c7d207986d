/*
 * tests/test_cluster.c - the sync client over a Redis Cluster (3 primaries,
 * 1 replica each) and over Sentinel, on plain and partitioned queues.
 *
 *  core_plain / core_partitioned
 *      every operation (push, poll, ack, nack, extend, cancel, reschedule,
 *      promote, debounce, stats, list, dead list / requeue / purge) on 12
 *      queues whose slots (or whose partitions' slots) cover all 3
 *      primaries, with each job's keys checked on the node that owns them;
 *      a debounced job's follow-up started by the ack; a done record that
 *      no longer answers after a replace and a cancel; push_batch and
 *      ack_batch of 5000 jobs; dq_poll_wait woken by another client's push
 *      within 200 ms although its wait cap is 10 s; (partitioned) a client
 *      with another partition count gets DQ_EINVAL.
 *  poll_wait_resubscribe
 *      a partitioned dq_poll_wait after its slot moved and after its
 *      wake-up links broke.
 *  ask_and_moved
 *      one call of a partitioned queue redirected with ASK for one
 *      partition and MOVED for another succeeds, each ASKed call sent once
 *      to its own target (a regression test, see there).
 *  reshard_partitioned / reshard_plain
 *      producers and a consumer (forked workers of the fault suite's
 *      ledger, support/fault.h) run while the test migrates the slots of
 *      some partitions (or the plain queue's slot, three times) between
 *      primaries, one key a step.  Every key of the queue exists throughout
 *      (anchor jobs: one pending, one leased, one dead, one acked), so the
 *      migrations go through all of Redis's answers: served, ASK, TRYAGAIN
 *      (some keys moved), ASK served by the target with ASKING, MOVED.
 *      The workers treat every error as a failure: redirections must be
 *      invisible.  Then 0 lost, 0 acked twice, 0 delivered twice within a
 *      lease, and the anchors are as they were.
 *  fair_migrate
 *      a grouped queue with priorities and a limit per group while its
 *      slot migrates: its fair-claiming keys under the queue's hash tag
 *      move with it, every job delivered once, the limit and dq_group_stats
 *      hold throughout, a small group is served first after it (see there).
 *  failover
 *      DQ_OPT_WAIT_REPLICAS=1: the primary that owns the queue's slot is
 *      SIGKILLed while the client pushes; every push acknowledged before
 *      (and after) is on the promoted replica; the same client (never
 *      reopened) lands a push soon after the kill (with DQ_EREPLICAS: the
 *      promoted replica has no replica of its own).  On Valkey 8 this also
 *      checks that the slot map takes the shard's online primary (see
 *      there).
 *  sentinel
 *      the same with a primary, 1 replica and 3 Sentinels.
 *  sentinel_switch
 *      SENTINEL FAILOVER with the old primary alive (still writable for
 *      seconds): the clients follow +switch-master, so the old primary
 *      runs none of their scripts and never answers READONLY; a blocked
 *      dq_poll_wait moves its wake-ups to the new primary and is woken
 *      there; pushes with DQ_OPT_WAIT_REPLICAS land throughout and are
 *      acknowledged again once the old primary replicates the new one.
 *  sentinel_resubscribe / sentinel_hung
 *      the Sentinel the client listens on dies (or hangs: SIGSTOP): the
 *      subscription moves to another Sentinel without slowing calls, and
 *      a SENTINEL FAILOVER that one runs is followed; with every Sentinel
 *      dead the known primary keeps serving.
 *  sync_consumer
 *      dq_consumer_new_sync on a plain and a 4-partition queue over the
 *      3 primaries: every job handled once, an idle consumer woken by a
 *      push long before its wait cap.
 *  slots_fallback
 *      an ACL user refused CLUSTER SHARDS (NOPERM) but granted CLUSTER
 *      SLOTS: the client learns the map from CLUSTER SLOTS.
 *
 * Each test starts its own topology (cluster_harness.h; loopback only) and
 * stops it; a failing test's servers die with it (PDEATHSIG) and its dirs
 * are removed at exit.  Every test prints one "figures: " line.
 */
#include "fault.h"

#include "cluster_harness.h"
#include "delayq-consumer.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- topologies ---------------------------------------------------------- */

static thc_cluster g_cl;
static thc_sentinel g_sn;
static int g_cl_up, g_sn_up;

/* A test that fails exits from the middle: its servers die with it
 * (PDEATHSIG), this removes their dirs. */
static void stop_topologies(void) {
    if (g_cl_up)
        thc_cluster_stop(&g_cl);
    if (g_sn_up)
        thc_sentinel_stop(&g_sn);
    g_cl_up = g_sn_up = 0;
}

static void at_exit_once(void) {
    static int done;
    if (!done)
        atexit(stop_topologies);
    done = 1;
}

static thc_cluster *cluster_up(char *uri, size_t n) {
    at_exit_once();
    ck_assert_msg(thc_cluster_start(&g_cl, 3, 1, NULL) == 0,
                  "thc_cluster_start failed (see stderr)");
    g_cl_up = 1;
    thc_cluster_uri(&g_cl, uri, n);
    ck_assert_msg(uri[0] != '\0', "cluster URI too long");
    return &g_cl;
}

/* A primary with one replica, watched under the name master by that many
 * Sentinels (sentinels); its redis+sentinel:// URI into uri (n bytes). */
static void sentinel_up(int sentinels, const char *master, char *uri,
                        size_t n) {
    at_exit_once();
    ck_assert_msg(thc_sentinel_start(&g_sn, 1, sentinels, master) == 0,
                  "thc_sentinel_start failed (see stderr)");
    g_sn_up = 1;
    thc_sentinel_uri(&g_sn, uri, n);
}

static void cluster_down(void) {
    thc_cluster_stop(&g_cl);
    g_cl_up = 0;
}


/* ---- keys, slots, partitions -------------------------------------------- */


static int slot_of_part(const char *q, int p) {
    char t[256];
    thc_part_tag(q, p, t, sizeof(t));
    return thc_slot_of(t);
}

static int owner_of_part(thc_cluster *cl, const char *q, int p) {
    int slot = slot_of_part(q, p);
    int o = thc_owner(cl, slot);
    ck_assert_msg(o >= 0, "no owner for slot %d (queue %s part %d)", slot, q,
                  p);
    return o;
}

/* The partition a job id lives in (FNV-1a 32 of the id, mod n), as the
 * library documents it; -1 for a plain queue. */
static int part_of(const char *id, int n) {
    return n > 1 ? tu_part_of(id, n) : -1;
}

/* A reply of one command on node i (fresh connection); fails on I/O. */
static redisReply *node_cmd(thc_cluster *cl, int i, const char *fmt, ...) {
    redisContext *ctx = thc_connect(cl->nodes[i].r.port);
    ck_assert_msg(ctx != NULL, "cannot connect to node %d", i);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "node %d: %s: %s", i, fmt, ctx->errstr);
    redisFree(ctx);
    return r;
}

static long long node_int(thc_cluster *cl, int i, const char *fmt,
                          const char *a1, const char *a2) {
    redisReply *r = node_cmd(cl, i, fmt, a1, a2);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "node %d: %s %s %s: %s", i,
                  fmt, a1, a2 ? a2 : "",
                  r->type == REDIS_REPLY_ERROR ? r->str : "not an integer");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Job id is stored in the jobs hash of its queue (partition) on the node
 * that owns that slot, or, on a compact run, maybe in its shard there
 * (lib/lua/include/compact/keys.lua, c_code). */
static void check_stored(thc_cluster *cl, const char *q, int parts,
                         const char *id) {
    int p = part_of(id, parts);
    char tag[256], key[300];
    thc_part_tag(q, p, tag, sizeof(tag));
    snprintf(key, sizeof(key), "dq:{%s}:jobs", tag);
    int o = owner_of_part(cl, q, p);
    long long in = node_int(cl, o, "HEXISTS %s %s", key, id);
    if (in == 0 && tu_compact()) {
        char sfx[TU_SHARD_SUFFIX];
        tu_shard_suffix(id, sfx);
        snprintf(key, sizeof(key), "dq:{%s}:%s", tag, sfx);
        in = node_int(cl, o, "HEXISTS %s %s", key, id);
    }
    ck_assert_msg(in == 1,
                  "job %s of %s is not in %s on node %d (owner of slot %d)",
                  id, q, key, o, slot_of_part(q, p));
}

/* Sum over the live nodes of "<field>:...<sub>=N" in INFO <section>. */
static long long info_sum(thc_cluster *cl, const char *section,
                          const char *field, const char *sub) {
    long long sum = 0;
    for (int i = 0; i < cl->count; i++) {
        if (cl->nodes[i].r.pid <= 0)
            continue;
        redisContext *ctx = thc_connect(cl->nodes[i].r.port);
        if (ctx == NULL)
            continue;
        char v[256];
        if (ft_info_field(ctx, section, field, v, sizeof(v)) == 0) {
            const char *s = strstr(v, sub);
            if (s != NULL)
                sum += atoll(s + strlen(sub));
        }
        redisFree(ctx);
    }
    return sum;
}

/* ---- clients ------------------------------------------------------------ */

static dq_options *opts_new(void) {
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    return o;
}

static void opt(dq_options *o, int key, int64_t v) {
    ck_assert_msg(dq_options_set_int(o, key, v) == 0, "option %d = %" PRId64,
                  key, v);
}

#define CK_OK(rc, c, what)                                                    \
    ck_assert_msg((rc) >= 0, "%s: %s: %s", (what), dq_errname(rc),          \
                  dq_errmsg(c))

#define CK_RC(rc, want, c, what)                                              \
    ck_assert_msg((rc) == (want), "%s: got %d (%s), want %d: %s", (what),    \
                  (rc), dq_errname(rc), (want), dq_errmsg(c))

static const dq_job *find_job(dq_jobs *jobs, const char *id) {
    for (size_t i = 0; i < dq_jobs_count(jobs); i++)
        if (strcmp(dq_job_id(dq_jobs_at(jobs, i)), id) == 0)
            return dq_jobs_at(jobs, i);
    return NULL;
}

/* ---- 1. every operation on one queue ------------------------------------- */

static void payload_of(char *buf, size_t n, const char *q, const char *id) {
    int w = snprintf(buf, n, "p-%s-%s", q, id);
    ck_assert_int_lt(w, (int)n); /* (a test's own names: they fit) */
}

static void push_now(dq_client *c, const char *q, const char *id,
                     int64_t delay) {
    char pl[300], out[DQ_ID_BUF] = "";
    payload_of(pl, sizeof(pl), q, id);
    int oc = 0;
    int rc = dq_push(c, q, pl, strlen(pl), delay, id, DQ_PUSH_KEEP, out,
                     sizeof(out), &oc);
    CK_RC(rc, 0, c, "push");
    ck_assert_int_eq(oc, DQ_PUSHED);
    ck_assert_str_eq(out, id);
}

/* Polls exactly n jobs (in one call), checks ids are among want and
 * payloads; returns the list. */
static dq_jobs *poll_exact(dq_client *c, const char *q, int n,
                           int64_t lease_ms) {
    dq_jobs *jobs = NULL;
    int64_t next = -2;
    int rc = dq_poll(c, q, 100, lease_ms, &jobs, &next);
    CK_RC(rc, n, c, "poll");
    ck_assert_int_eq((int)dq_jobs_count(jobs), n);
    for (int i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, (size_t)i);
        char want[300];
        size_t len;
        const char *pl = dq_job_payload(j, &len);
        payload_of(want, sizeof(want), q, dq_job_id(j));
        ck_assert_msg(len == strlen(want) && memcmp(pl, want, len) == 0,
                      "%s: payload of %s is '%.*s'", q, dq_job_id(j),
                      (int)len, pl);
        ck_assert_msg(dq_job_token(j)[0] != '\0', "no token");
        ck_assert_msg(dq_job_lease_deadline_ms(j) > 0, "no deadline");
    }
    return jobs;
}

static void ack_job(dq_client *c, const char *q, const dq_job *j) {
    int rc = dq_ack(c, q, dq_job_id(j), dq_job_token(j));
    CK_RC(rc, 0, c, "ack");
}

static int list_count(dq_client *c, const char *q, int which) {
    dq_jobs *jobs = NULL;
    int64_t now = 0;
    int rc = dq_list(c, q, which, 0, 100, &jobs, &now);
    CK_OK(rc, c, "list");
    ck_assert_int_eq((int)dq_jobs_count(jobs), rc);
    ck_assert_msg(now > 0, "list: no server time");
    dq_jobs_free(jobs);
    return rc;
}

/* Reschedule and promote on an empty queue: moved (payload kept), in
 * flight, dead, unknown; then a batch over ids of different partitions
 * (and so nodes) that revives the dead one. */
static void resched_queue(dq_client *c, const char *q) {
    push_now(c, q, "r1", 600000);
    push_now(c, q, "r2", 600000);
    push_now(c, q, "r3", 0);
    CK_RC(dq_reschedule(c, q, "r1", 300000, 0), DQ_RESCHED_MOVED, c,
          "reschedule");
    CK_RC(dq_promote(c, q, "r2", 0), DQ_RESCHED_MOVED, c, "promote");
    dq_jobs *jobs = poll_exact(c, q, 2, 30000);
    const dq_job *r3 = find_job(jobs, "r3");
    ck_assert_ptr_nonnull(find_job(jobs, "r2"));
    CK_RC(dq_promote(c, q, "r3", 0), DQ_RESCHED_INFLIGHT, c,
          "promote in flight");
    CK_RC(dq_nack(c, q, "r3", dq_job_token(r3), 0, DQ_NACK_DEAD), 1, c,
          "nack dead");
    CK_RC(dq_promote(c, q, "r3", 0), DQ_RESCHED_DEAD, c, "promote dead");
    ack_job(c, q, find_job(jobs, "r2"));
    dq_jobs_free(jobs);
    const char *ids[4] = {"r1", "r3", "nope", "r2"};
    int out[4];
    CK_RC(dq_reschedule_batch(c, q, 4, ids, 0, DQ_RESCHED_REVIVE, out), 2, c,
          "reschedule batch");
    ck_assert_int_eq(out[0], DQ_RESCHED_MOVED);
    ck_assert_int_eq(out[1], DQ_RESCHED_REVIVED);
    ck_assert_int_eq(out[2], DQ_RESCHED_UNKNOWN);
    ck_assert_int_eq(out[3], DQ_RESCHED_UNKNOWN);
    jobs = poll_exact(c, q, 2, 30000);
    for (int i = 0; i < 2; i++)
        ack_job(c, q, dq_jobs_at(jobs, (size_t)i));
    dq_jobs_free(jobs);
    ck_stats(c, q, 0, 0, 0, 0);
}

/* One push of a text payload; returns the outcome.  With DQ_PUSH_DEBOUNCE
 * in flags, max_ms is the max wait. */
static int push_ex(dq_client *c, const char *q, const char *id,
                   const char *pl, int64_t delay, int flags, int64_t max_ms) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    if (flags & DQ_PUSH_DEBOUNCE)
        ck_assert_int_eq(
            dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, max_ms), 0);
    int oc = 0;
    int rc = dq_push_ex(c, q, pl, strlen(pl), delay, id, flags, o, NULL, 0,
                        &oc);
    dq_push_opts_free(o);
    CK_RC(rc, 0, c, "push_ex");
    return oc;
}

/* dq_get of a job that exists: its state, payload (into pl), due time and
 * the server time of the read. */
static int get_job(dq_client *c, const char *q, const char *id, char *pl,
                   size_t n, int64_t *due, int64_t *now) {
    dq_job_info *in = NULL;
    CK_RC(dq_get(c, q, id, &in), 1, c, "get");
    size_t len = 0;
    const char *p = dq_job_info_payload(in, &len);
    snprintf(pl, n, "%.*s", (int)len, p);
    *due = dq_job_info_due_ms(in);
    *now = dq_job_info_now_ms(in);
    int state = dq_job_info_state(in);
    dq_job_info_free(in);
    return state;
}

/* Polls the one job of q (due now); its token into tok, payload into pl. */
static void take_one(dq_client *c, const char *q, char *tok, char *pl,
                     size_t n) {
    dq_jobs *jobs = NULL;
    CK_RC(dq_poll(c, q, 10, 30000, &jobs, NULL), 1, c, "poll one");
    const dq_job *j = dq_jobs_at(jobs, 0);
    size_t len = 0;
    const char *p = dq_job_payload(j, &len);
    snprintf(pl, n, "%.*s", (int)len, p);
    snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(j));
    ck_assert_int_eq(dq_job_attempt(j), 1);
    dq_jobs_free(jobs);
}

/* Debounce on the job's node: created; moved (latest payload, the due time
 * capped at first push + max wait, both on the server clock); pushes while
 * it runs coalesce into one follow-up that the ack starts with the latest
 * payload. */
static void debounce_queue(dq_client *c, const char *q) {
    char pl[64], tok[DQ_TOKEN_BUF];
    int64_t t0 = 0, t1 = 0, due = 0, now = 0;
    dq_jobs *none = NULL;
    CK_OK(dq_list(c, q, DQ_LIST_SCHEDULED, 0, 1, &none, &t0), c, "list");
    dq_jobs_free(none);
    ck_assert_int_eq(push_ex(c, q, "db", "a", 200, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_CREATED);
    ck_assert_int_eq(get_job(c, q, "db", pl, sizeof(pl), &due, &t1),
                     DQ_JOB_SCHEDULED);
    ck_assert_msg(due >= t0 + 200 && due <= t1 + 200, "%s: created due %"
                  PRId64 ", pushed in %" PRId64 "..%" PRId64, q, due, t0, t1);
    ck_assert_int_eq(push_ex(c, q, "db", "b", 600000, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_MOVED);
    get_job(c, q, "db", pl, sizeof(pl), &due, &now);
    ck_assert_str_eq(pl, "b");
    ck_assert_msg(due >= t0 + 5000 && due <= t1 + 5000, "%s: due %" PRId64
                  " past the max wait %" PRId64 "..%" PRId64, q, due,
                  t0 + 5000, t1 + 5000);
    CK_RC(dq_promote(c, q, "db", 0), DQ_RESCHED_MOVED, c, "promote");
    take_one(c, q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "b");
    ck_assert_int_eq(push_ex(c, q, "db", "c", 0, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(push_ex(c, q, "db", "d", 0, DQ_PUSH_DEBOUNCE, 5000),
                     DQ_DEBOUNCE_FOLLOWUP);
    ck_stats(c, q, 0, 0, 1, 0);
    CK_RC(dq_ack(c, q, "db", tok), 0, c, "ack starts the follow-up");
    ck_stats(c, q, 0, 1, 0, 0);
    take_one(c, q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "d");
    CK_RC(dq_ack(c, q, "db", tok), 0, c, "ack of the follow-up");
    ck_stats(c, q, 0, 0, 0, 0);
}

/* A done record answers only for the incarnation that was acked: after a
 * replace and a cancel, a keep push creates the job. */
static void done_record_queue(dq_client *c, const char *q) {
    char pl[64], tok[DQ_TOKEN_BUF];
    ck_assert_int_eq(push_ex(c, q, "order-1", "r1", 0, DQ_PUSH_KEEP, 0),
                     DQ_PUSHED);
    take_one(c, q, tok, pl, sizeof(pl));
    CK_RC(dq_ack(c, q, "order-1", tok), 0, c, "ack");
    ck_assert_int_eq(push_ex(c, q, "order-1", "r1", 0, DQ_PUSH_KEEP, 0),
                     DQ_DONE);
    ck_assert_int_eq(push_ex(c, q, "order-1", "r2", 0, DQ_PUSH_REPLACE, 0),
                     DQ_PUSHED);
    CK_RC(dq_cancel(c, q, "order-1", 0), DQ_CANCELED_PENDING, c, "cancel");
    ck_assert_int_eq(push_ex(c, q, "order-1", "r3", 1000, DQ_PUSH_KEEP, 0),
                     DQ_PUSHED);
    ck_stats(c, q, 1, 0, 0, 0);
    CK_RC(dq_ack(c, q, "order-1", tok), 0, c, "the first ack retried");
    CK_RC(dq_cancel(c, q, "order-1", 0), DQ_CANCELED_PENDING, c, "cancel");
}

static void core_queue(dq_client *c, thc_cluster *cl, const char *q,
                       int parts) {
    static const char *const ids[6] = {"j1", "j2", "j3", "j4", "j5", "j6"};
    int rc, oc;
    for (int i = 0; i < 6; i++) {
        push_now(c, q, ids[i], 0);
        check_stored(cl, q, parts, ids[i]);
    }
    push_now(c, q, "late", 600000);
    check_stored(cl, q, parts, "late");
    rc = dq_push(c, q, "x", 1, 0, "j1", DQ_PUSH_KEEP, NULL, 0, &oc);
    CK_RC(rc, 0, c, "push again");
    ck_assert_int_eq(oc, DQ_KEPT);
    ck_stats(c, q, 1, 6, 0, 0);
    ck_assert_int_eq(list_count(c, q, DQ_LIST_SCHEDULED), 7);

    /* cancel a pending job; an unknown one */
    CK_RC(dq_cancel(c, q, "late", 0), DQ_CANCELED_PENDING, c, "cancel");
    CK_RC(dq_cancel(c, q, "nope", 0), 0, c, "cancel unknown");

    /* poll all six */
    dq_jobs *jobs = poll_exact(c, q, 6, 30000);
    for (int i = 0; i < 6; i++) {
        const dq_job *j = find_job(jobs, ids[i]);
        ck_assert_msg(j != NULL, "%s: %s not polled", q, ids[i]);
        ck_assert_int_eq(dq_job_attempt(j), 1);
    }
    ck_stats(c, q, 0, 0, 6, 0);
    ck_assert_int_eq(list_count(c, q, DQ_LIST_INFLIGHT), 6);

    /* ack; the same ack again says "yours landed" */
    const dq_job *j1 = find_job(jobs, "j1");
    ack_job(c, q, j1);
    CK_RC(dq_ack(c, q, "j1", dq_job_token(j1)), 0, c, "ack retried");

    /* nack: delivered again with attempt 2; the old token is stale */
    const dq_job *j2 = find_job(jobs, "j2");
    CK_RC(dq_nack(c, q, "j2", dq_job_token(j2), 0, 0), 0, c, "nack");
    dq_jobs *again = poll_exact(c, q, 1, 30000);
    const dq_job *j2b = dq_jobs_at(again, 0);
    ck_assert_str_eq(dq_job_id(j2b), "j2");
    ck_assert_int_eq(dq_job_attempt(j2b), 2);
    ack_job(c, q, j2b);
    CK_RC(dq_ack(c, q, "j2", dq_job_token(j2)), DQ_ESTALE, c,
          "ack with the old token");
    dq_jobs_free(again);

    /* nack to dead */
    CK_RC(dq_nack(c, q, "j3", dq_job_token(find_job(jobs, "j3")), 0,
                  DQ_NACK_DEAD),
          1, c, "nack dead");
    CK_RC(dq_nack(c, q, "j4", dq_job_token(find_job(jobs, "j4")), 0,
                  DQ_NACK_DEAD),
          1, c, "nack dead");
    ck_stats(c, q, 0, 0, 2, 2);
    dq_jobs *dead = NULL;
    rc = dq_dead_list(c, q, 0, 10, &dead);
    CK_RC(rc, 2, c, "dead_list");
    ck_assert_ptr_nonnull(find_job(dead, "j3"));
    ck_assert_ptr_nonnull(find_job(dead, "j4"));
    ck_assert_int_eq(dq_job_attempt(find_job(dead, "j3")), 1);
    dq_jobs_free(dead);
    ck_assert_int_eq(list_count(c, q, DQ_LIST_DEAD), 2);

    /* extend, then ack */
    const dq_job *j5 = find_job(jobs, "j5");
    int64_t dl = 0;
    CK_RC(dq_extend(c, q, "j5", dq_job_token(j5), 120000, &dl), 0, c,
          "extend");
    ck_assert_msg(dl > dq_job_lease_deadline_ms(j5) + 60000,
                  "extend: deadline %" PRId64 " after %" PRId64, dl,
                  dq_job_lease_deadline_ms(j5));
    ack_job(c, q, j5);

    /* cancel in flight: busy without the flag, removed with it */
    const dq_job *j6 = find_job(jobs, "j6");
    CK_RC(dq_cancel(c, q, "j6", 0), DQ_CANCEL_BUSY, c, "cancel busy");
    CK_RC(dq_cancel(c, q, "j6", DQ_CANCEL_INFLIGHT), DQ_CANCELED_INFLIGHT, c,
          "cancel inflight");
    CK_RC(dq_ack(c, q, "j6", dq_job_token(j6)), DQ_ENOTFOUND, c,
          "ack of a cancelled job");
    dq_jobs_free(jobs);
    ck_stats(c, q, 0, 0, 0, 2);

    /* requeue one dead job by id */
    CK_RC(dq_dead_requeue(c, q, "j3", 0), 1, c, "dead_requeue j3");
    again = poll_exact(c, q, 1, 30000);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(again, 0)), "j3");
    ack_job(c, q, dq_jobs_at(again, 0));
    dq_jobs_free(again);
    ck_stats(c, q, 0, 0, 0, 1);

    /* three more dead, then requeue all, kill them again, purge */
    push_now(c, q, "k1", 0);
    push_now(c, q, "k2", 0);
    push_now(c, q, "k3", 0);
    jobs = poll_exact(c, q, 3, 30000);
    for (int i = 0; i < 3; i++) {
        const dq_job *j = dq_jobs_at(jobs, (size_t)i);
        CK_RC(dq_nack(c, q, dq_job_id(j), dq_job_token(j), 0, DQ_NACK_DEAD),
              1, c, "nack dead");
    }
    dq_jobs_free(jobs);
    ck_stats(c, q, 0, 0, 0, 4);
    CK_RC(dq_dead_requeue(c, q, NULL, 0), 4, c, "dead_requeue all");
    ck_stats(c, q, 0, 4, 0, 0);
    jobs = poll_exact(c, q, 4, 30000);
    for (int i = 0; i < 4; i++) {
        const dq_job *j = dq_jobs_at(jobs, (size_t)i);
        ck_assert_int_eq(dq_job_attempt(j), 1); /* reset by the requeue */
        CK_RC(dq_nack(c, q, dq_job_id(j), dq_job_token(j), 0, DQ_NACK_DEAD),
              1, c, "nack dead");
    }
    dq_jobs_free(jobs);
    CK_RC(dq_dead_purge(c, q, "k1"), 1, c, "dead_purge k1");
    CK_RC(dq_dead_purge(c, q, NULL), 3, c, "dead_purge all");
    CK_RC(dq_dead_purge(c, q, NULL), 0, c, "dead_purge none left");
    ck_stats(c, q, 0, 0, 0, 0);
    int64_t next = 0;
    CK_RC(dq_stats(c, q, NULL, NULL, NULL, NULL, &next), 0, c, "stats");
    ck_assert_int_eq(next, -1);
    ck_assert_int_eq(list_count(c, q, DQ_LIST_SCHEDULED), 0);
    resched_queue(c, q);
    debounce_queue(c, q);
    done_record_queue(c, q);
}

/* 12 queue names (prefix-k) whose slots -- or, partitioned, whose
 * partitions' slots -- cover every primary; owners counted per primary. */
static void pick_queues(thc_cluster *cl, const char *prefix, int parts,
                        char names[12][32], int per_node[THC_MAX_NODES]) {
    int prim[THC_MAX_NODES], np = thc_primaries(cl, prim);
    ck_assert_int_eq(np, 3);
    memset(per_node, 0, sizeof(int) * THC_MAX_NODES);
    int n = 0;
    for (int k = 0; n < 12 && k < 1000; k++) {
        char q[32];
        snprintf(q, sizeof(q), "%s-%d", prefix, k);
        if (parts <= 1) {
            /* plain: 4 queues on each primary */
            int o = owner_of_part(cl, q, -1);
            if (per_node[o] >= 4)
                continue;
            per_node[o]++;
        } else {
            for (int p = 0; p < parts; p++)
                per_node[owner_of_part(cl, q, p)]++;
        }
        snprintf(names[n++], 32, "%s", q);
    }
    ck_assert_int_eq(n, 12);
    for (int i = 0; i < np; i++)
        ck_assert_msg(per_node[prim[i]] > 0,
                      "primary %d owns none of the queues' slots", prim[i]);
}

/* push_batch of 5000 jobs, polled in pages, one ack_batch of 5000. */
static void batch_5000(dq_client *c, thc_cluster *cl, const char *q,
                       int parts, int64_t *push_ms, int64_t *ack_ms) {
    enum { N = 5000 };
    static char idb[N][16], plb[N][24];
    static const char *ids[N], *toks[N];
    static const void *pls[N];
    static size_t lens[N];
    static int outcomes[N], results[N];
    static char tokb[N][DQ_TOKEN_BUF];
    static uint8_t seen[N];
    int count[64] = {0};
    memset(seen, 0, sizeof(seen));
    for (int i = 0; i < N; i++) {
        snprintf(idb[i], sizeof(idb[i]), "b-%d", i);
        ids[i] = idb[i];
        lens[i] = (size_t)snprintf(plb[i], sizeof(plb[i]), "pb-%d", i);
        pls[i] = plb[i];
        count[parts > 1 ? part_of(ids[i], parts) : 0]++;
    }
    int64_t t = th_mono_ms();
    int rc = dq_push_batch(c, q, N, pls, lens, NULL, ids, DQ_PUSH_KEEP, NULL,
                           outcomes);
    *push_ms = th_mono_ms() - t;
    CK_RC(rc, N, c, "push_batch 5000");
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(outcomes[i], DQ_PUSHED);
    /* Each partition's jobs hash holds its share, on its own node (with
     * its compact jobs, counted in its cm hash, on a compact run). */
    int nparts = parts > 1 ? parts : 1;
    for (int p = 0; p < nparts; p++) {
        char tag[64], key[96];
        thc_part_tag(q, parts > 1 ? p : -1, tag, sizeof(tag));
        snprintf(key, sizeof(key), "dq:{%s}:jobs", tag);
        int o = owner_of_part(cl, q, parts > 1 ? p : -1);
        long long held = node_int(cl, o, "HLEN %s", key, NULL);
        snprintf(key, sizeof(key), "dq:{%s}:cm", tag);
        redisReply *cm = node_cmd(cl, o, "HGET %s n", key, NULL);
        if (cm->type == REDIS_REPLY_STRING)
            held += atoll(cm->str);
        freeReplyObject(cm);
        ck_assert_msg(held == count[p], "%s on node %d: %lld jobs, not %d",
                      tag, o, held, count[p]);
    }
    ck_stats(c, q, 0, N, 0, 0);
    int got = 0;
    for (int tries = 0; got < N && tries < 100; tries++) {
        dq_jobs *jobs = NULL;
        rc = dq_poll(c, q, 1000, 120000, &jobs, NULL);
        CK_OK(rc, c, "poll");
        for (size_t k = 0; k < dq_jobs_count(jobs); k++) {
            const dq_job *j = dq_jobs_at(jobs, k);
            long i = ft_job_index(dq_job_id(j), "b");
            ck_assert_msg(i >= 0 && i < N, "unknown job %s", dq_job_id(j));
            ck_assert_msg(!seen[i], "job %s polled twice", dq_job_id(j));
            size_t len;
            const char *pl = dq_job_payload(j, &len);
            ck_assert(len == lens[i] && memcmp(pl, plb[i], len) == 0);
            seen[i] = 1;
            snprintf(tokb[got], sizeof(tokb[got]), "%s", dq_job_token(j));
            ids[got] = idb[i];
            toks[got] = tokb[got];
            got++;
        }
        dq_jobs_free(jobs);
    }
    ck_assert_int_eq(got, N);
    t = th_mono_ms();
    rc = dq_ack_batch(c, q, N, ids, toks, results);
    *ack_ms = th_mono_ms() - t;
    CK_RC(rc, N, c, "ack_batch 5000");
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(results[i], 0);
    ck_stats(c, q, 0, 0, 0, 0);
}

/* ---- dq_poll_wait woken by another client's push ------------------------- */


/* Waits until node o has a (sharded) subscriber on a consumer's own
 * channel of chan ("<chan>:<consumer id>"). */
static void wait_subscribed(thc_cluster *cl, int o, const char *chan) {
    int64_t end = th_mono_ms() + 10000;
    for (;;) {
        redisReply *r = node_cmd(cl, o, "PUBSUB SHARDCHANNELS %s:*", chan);
        long long n = r->type == REDIS_REPLY_ARRAY ? (long long)r->elements
                                                   : -1;
        freeReplyObject(r);
        if (n >= 1)
            return;
        ck_assert_msg(th_mono_ms() < end,
                      "nobody subscribed to %s on node %d after 10 s", chan,
                      o);
        th_sleep_ms(5);
    }
}

/* Three rounds: a tu_waiter (wait cap 10 s) on q, woken by producer's push;
 * returns the slowest wake-up (ms). */
static int64_t wake_rounds(thc_cluster *cl, const char *uri, int parts,
                           dq_client *producer, const char *q) {
    dq_options *o = opts_new();
    opt(o, DQ_OPT_WAIT_CAP_MS, 10000);
    if (parts > 1)
        opt(o, DQ_OPT_PARTITIONS, parts);
    dq_client *wc = open_uri(uri, o);
    int64_t worst = 0;
    for (int r = 0; r < 3; r++) {
        char id[32], tag[64], chan[128];
        snprintf(id, sizeof(id), "w-%d", r);
        int p = part_of(id, parts);
        thc_part_tag(q, p, tag, sizeof(tag));
        snprintf(chan, sizeof(chan), "dq:{%s}:wake:0", tag);
        tu_waiter w = {.c = wc, .q = q};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, tu_wait_thread, &w), 0);
        wait_subscribed(cl, owner_of_part(cl, q, p), chan);
        th_sleep_ms(150); /* let it poll once and go to sleep */
        int64_t t0 = th_mono_us();
        push_now(producer, q, id, 0);
        pthread_join(th, NULL);
        int64_t ms = (w.done_us - t0) / 1000;
        ck_assert_msg(w.rc == 1, "poll_wait on %s returned %d (%s) after "
                      "%" PRId64 " ms: %s", q, w.rc, dq_errname(w.rc), ms,
                      w.err);
        ck_assert_str_eq(w.id, id);
        ck_assert_msg(ms < 200,
                      "poll_wait on %s woken %" PRId64 " ms after the push "
                      "(round %d; wait cap 10 s)", q, ms, r);
        if (ms > worst)
            worst = ms;
        CK_RC(dq_ack(wc, q, w.id, w.token), 0, wc, "ack");
    }
    dq_close(wc);
    dq_options_free(o);
    return worst;
}

/* ---- 1. tests ------------------------------------------------------------ */

/* Fair claiming on the cluster: the limit on jobs in flight holds over
 * the partitions (each its share) and an ack frees its slot; a lone job of
 * a small group beside a burst of a big one comes within the first polls
 * (one per partition). */
static void fair_queue(dq_client *c, const char *q, int parts) {
    int s = DQ_SET_MAX_INFLIGHT;
    int64_t v = 2 * parts;
    CK_RC(dq_config_set(c, q, 1, &s, &v), 0, c, "config inflight_max");
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, "big"), 0);
    for (int i = 0; i < 40 * parts; i++) {
        char id[32];
        snprintf(id, sizeof(id), "big%d", i);
        CK_RC(dq_push_ex(c, q, "x", 1, 0, id, 0, o, NULL, 0, NULL), 0, c,
              "push big");
    }
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, "small"), 0);
    CK_RC(dq_push_ex(c, q, "x", 1, 0, "small", 0, o, NULL, 0, NULL), 0, c,
          "push small");
    dq_push_opts_free(o);
    int got = 0, small = 0;
    dq_jobs *keep = NULL;
    for (int k = 0; k < 3 * parts; k++) {
        dq_jobs *j = NULL;
        int n = dq_poll(c, q, 2, 30000, &j, NULL);
        CK_RC(n < 0 ? n : 0, 0, c, "poll");
        for (int i = 0; i < n; i++)
            small |= strcmp(dq_job_id(dq_jobs_at(j, (size_t)i)), "small") == 0;
        got += n;
        if (keep == NULL && n > 0)
            keep = j;
        else
            dq_jobs_free(j);
    }
    ck_assert_msg(small, "%s: the small group's job not polled", q);
    ck_assert_int_eq(got, 2 * parts);
    const dq_job *a = dq_jobs_at(keep, 0);
    CK_RC(dq_ack(c, q, dq_job_id(a), dq_job_token(a)), 0, c, "ack");
    int more = 0;
    for (int k = 0; k < 2 * parts && more == 0; k++) {
        dq_jobs *j = NULL;
        more = dq_poll(c, q, 2, 30000, &j, NULL);
        dq_jobs_free(j);
    }
    ck_assert_int_eq(more, 1);
    dq_jobs_free(keep);
}

/* A job of priority 5 goes before the due jobs of priority 0 (per
 * partition: within the polls that visit every partition). */
static void prio_queue(dq_client *c, const char *q, int parts) {
    for (int i = 0; i < 20 * parts; i++) {
        char id[32];
        snprintf(id, sizeof(id), "low%d", i);
        CK_RC(dq_push(c, q, "x", 1, 0, id, 0, NULL, 0, NULL), 0, c,
              "push low");
    }
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, 5), 0);
    CK_RC(dq_push_ex(c, q, "x", 1, 0, "hi", 0, o, NULL, 0, NULL), 0, c,
          "push hi");
    dq_push_opts_free(o);
    int hi = 0;
    for (int k = 0; k < parts && !hi; k++) {
        dq_jobs *j = NULL;
        int n = dq_poll(c, q, 1, 30000, &j, NULL);
        CK_RC(n < 0 ? n : 0, 0, c, "poll");
        hi = n == 1 && strcmp(dq_job_id(dq_jobs_at(j, 0)), "hi") == 0;
        dq_jobs_free(j);
    }
    ck_assert_msg(hi, "%s: the priority job not polled first", q);
}

START_TEST(core_plain) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    char names[12][32];
    int per[THC_MAX_NODES];
    pick_queues(cl, "cq", 1, names, per);
    dq_client *c = open_uri(uri, NULL);
    for (int i = 0; i < 12; i++)
        core_queue(c, cl, names[i], 1);
    fair_queue(c, "cq-fair", 1);
    prio_queue(c, "cq-prio", 1);
    int64_t push_ms, ack_ms;
    batch_5000(c, cl, "cq-batch", 1, &push_ms, &ack_ms);
    int64_t wake = wake_rounds(cl, uri, 1, c, "cq-wake");
    int prim[THC_MAX_NODES];
    thc_primaries(cl, prim);
    printf("figures: cluster_core_plain: queues=12 per_primary=%d/%d/%d "
           "push_batch_5000_ms=%" PRId64 " ack_batch_5000_ms=%" PRId64
           " wake_ms_max=%" PRId64 "\n",
           per[prim[0]], per[prim[1]], per[prim[2]], push_ms, ack_ms, wake);
    fflush(stdout);
    dq_close(c);
    cluster_down();
}
END_TEST

START_TEST(core_partitioned) {
    char uri[512], puri[600];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    char names[12][32];
    int per[THC_MAX_NODES];
    pick_queues(cl, "pq", 8, names, per);
    /* The URI form of the partition count. */
    snprintf(puri, sizeof(puri), "%s?partitions=8", uri);
    dq_client *c = open_uri(puri, NULL);
    for (int i = 0; i < 12; i++)
        core_queue(c, cl, names[i], 8);
    fair_queue(c, "pq-fair", 8);
    prio_queue(c, "pq-prio", 8);
    int64_t push_ms, ack_ms;
    batch_5000(c, cl, "pq-batch", 8, &push_ms, &ack_ms);
    int64_t wake = wake_rounds(cl, uri, 8, c, "pq-wake");

    /* Another count on the same queue: DQ_EINVAL, every time, and nothing
     * written. */
    push_now(c, "pq-count", "one", 0);
    dq_options *o4 = opts_new();
    opt(o4, DQ_OPT_PARTITIONS, 4);
    dq_client *c4 = open_uri(uri, o4);
    for (int k = 0; k < 2; k++) {
        int rc = dq_push(c4, "pq-count", "x", 1, 0, "two", 0, NULL, 0, NULL);
        CK_RC(rc, DQ_EINVAL, c4, "push with 4 partitions");
        ck_assert_msg(strstr(dq_errmsg(c4), "partitions") != NULL, "%s",
                      dq_errmsg(c4));
    }
    dq_jobs *jobs = NULL;
    CK_RC(dq_poll(c4, "pq-count", 10, 1000, &jobs, NULL), DQ_EINVAL, c4,
          "poll with 4 partitions");
    ck_assert_ptr_null(jobs);
    CK_RC(dq_stats(c4, "pq-count", NULL, NULL, NULL, NULL, NULL), DQ_EINVAL,
          c4, "stats with 4 partitions");
    ck_stats(c, "pq-count", 0, 1, 0, 0);
    /* A queue used unpartitioned: a partitioned client is refused too. */
    dq_client *plain = open_uri(uri, NULL);
    push_now(plain, "pq-wasplain", "one", 0);
    CK_RC(dq_push(c, "pq-wasplain", "x", 1, 0, "two", 0, NULL, 0, NULL),
          DQ_EINVAL, c, "partitioned push on a plain queue");
    ck_assert_msg(strstr(dq_errmsg(c), "unpartitioned") != NULL, "%s",
                  dq_errmsg(c));
    ck_stats(plain, "pq-wasplain", 0, 1, 0, 0);

    int prim[THC_MAX_NODES];
    thc_primaries(cl, prim);
    printf("figures: cluster_core_partitioned: queues=12 partitions=8 "
           "partitions_per_primary=%d/%d/%d push_batch_5000_ms=%" PRId64
           " ack_batch_5000_ms=%" PRId64 " wake_ms_max=%" PRId64 "\n",
           per[prim[0]], per[prim[1]], per[prim[2]], push_ms, ack_ms, wake);
    fflush(stdout);
    dq_close(plain);
    dq_close(c4);
    dq_options_free(o4);
    dq_close(c);
    cluster_down();
}
END_TEST

/*
 * A partitioned dq_poll_wait whose subscriptions go away (regression
 * tests of two fixed faults):
 *
 *  A. partition 0's slot migrates: its subscriber gets SUNSUBSCRIBE; the
 *     client's slot map is stale for that slot (a poll of the known-due
 *     partitions sent nothing there), so subscribing again meets MOVED --
 *     which must not fail the call (it used to: DQ_EREDIS "SSUBSCRIBE:
 *     ... MOVED ...").
 *  B. the subscriber links break and a job is pushed meanwhile (its
 *     wake-up is lost): calls of 100 ms, shorter than the 1 s wait cap,
 *     must still claim it (they used to poll only the partitions believed
 *     due, forever).
 */
START_TEST(poll_wait_resubscribe) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    const char *q = "rw-part";
    dq_options *o = opts_new();
    opt(o, DQ_OPT_PARTITIONS, 4);
    dq_client *w = open_uri(uri, o), *p = open_uri(uri, o);
    dq_jobs *jobs = NULL;
    char tag[64], chan[128];

    /* A: subscribed to all 4 partitions; partition 0's slot moves. */
    CK_RC(dq_poll_wait(w, q, 1, 30000, 100, &jobs), 0, w, "poll_wait");
    thc_part_tag(q, 0, tag, sizeof(tag));
    snprintf(chan, sizeof(chan), "dq:{%s}:wake:0", tag);
    int slot = slot_of_part(q, 0), src = thc_owner(cl, slot), to = -1;
    int prim[THC_MAX_NODES], np = thc_primaries(cl, prim);
    wait_subscribed(cl, src, chan);
    for (int i = 0; i < np; i++)
        if (prim[i] == src)
            to = prim[(i + 1) % np];
    ck_assert_msg(thc_migrate_slot(cl, slot, to, 1, NULL, NULL) == 0,
                  "thc_migrate_slot failed (see stderr)");
    int errs_a = 0;
    char msg_a[300] = "";
    for (int k = 0; k < 5; k++) {
        int rc = dq_poll_wait(w, q, 1, 30000, 100, &jobs);
        if (rc < 0) {
            errs_a++;
            snprintf(msg_a, sizeof(msg_a), "%s: %s", dq_errname(rc),
                     dq_errmsg(w));
        }
        dq_jobs_free(jobs);
        jobs = NULL;
    }
    /* Subscribed again where the slot lives now: a push wakes it. */
    wait_subscribed(cl, to, chan);

    /* B: the subscriber links break; a job is pushed meanwhile. */
    CK_RC(dq_poll_wait(w, q, 1, 30000, 100, &jobs), 0, w, "poll_wait");
    for (int i = 0; i < np; i++) {
        redisReply *r = node_cmd(cl, prim[i], "CLIENT KILL TYPE pubsub");
        freeReplyObject(r);
    }
    push_now(p, q, "lost-wake", 0);
    int64_t t0 = th_mono_ms(), got_ms = -1;
    while (th_mono_ms() - t0 < 5000) {
        int rc = dq_poll_wait(w, q, 1, 30000, 100, &jobs);
        CK_OK(rc, w, "poll_wait after the links broke");
        if (rc == 1) {
            got_ms = th_mono_ms() - t0;
            ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "lost-wake");
            dq_jobs_free(jobs);
            break;
        }
    }
    printf("figures: cluster_poll_wait_resubscribe: errors_after_migration=%d"
           " lost_wake_found_ms=%" PRId64 " (timeout 100 ms a call, wait "
           "cap 1000 ms)\n", errs_a, got_ms);
    fflush(stdout);
    ck_assert_msg(errs_a == 0,
                  "dq_poll_wait failed %d times after a "
                  "migration of a partition's slot (the re-subscription "
                  "does not follow MOVED): %s", errs_a, msg_a);
    ck_assert_msg(got_ms >= 0 && got_ms < 3000,
                  "a job pushed while the wake-up links were "
                  "down was not claimed by dq_poll_wait (100 ms calls) within "
                  "%s ms (it is due; wait cap 1 s)", got_ms < 0 ? "5000"
                  : "3000");
    dq_close(w);
    dq_close(p);
    dq_options_free(o);
    cluster_down();
}
END_TEST

/* ---- 2. resharding under load -------------------------------------------- */

/* Anchor jobs that keep all five keys of every partition (or of the plain
 * queue) in existence: one pending (due in an hour), one leased (10 min),
 * one dead, one acked (its done record). */
#define ANCHOR_MAX 64
typedef struct anchors {
    int n; /* partitions (1: plain) */
    char pend[ANCHOR_MAX][16], lease[ANCHOR_MAX][16], dead[ANCHOR_MAX][16],
        done[ANCHOR_MAX][16];
    char token[ANCHOR_MAX][DQ_TOKEN_BUF]; /* of the leased ones */
} anchors;

static void anchors_seed(dq_client *c, const char *q, int parts,
                         anchors *a) {
    int n = parts > 1 ? parts : 1, have[ANCHOR_MAX] = {0};
    ck_assert_int_le(n, ANCHOR_MAX);
    a->n = n;
    for (int k = 0, left = 4 * n; left > 0; k++) {
        char id[16];
        snprintf(id, sizeof(id), "anc-%d", k);
        int p = parts > 1 ? part_of(id, parts) : 0;
        char(*dst)[16] = have[p] == 0   ? a->pend
                         : have[p] == 1 ? a->lease
                         : have[p] == 2 ? a->dead
                         : have[p] == 3 ? a->done
                                        : NULL;
        if (dst == NULL)
            continue;
        snprintf(dst[p], 16, "%s", id);
        have[p]++;
        left--;
    }
    for (int p = 0; p < n; p++) {
        push_now(c, q, a->lease[p], 0);
        push_now(c, q, a->dead[p], 0);
        push_now(c, q, a->done[p], 0);
        push_now(c, q, a->pend[p], 3600000);
    }
    dq_jobs *jobs = NULL;
    int rc = dq_poll(c, q, 1000, 600000, &jobs, NULL);
    CK_RC(rc, 3 * n, c, "poll of the anchors");
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        const char *id = dq_job_id(j);
        for (int p = 0; p < n; p++) {
            if (strcmp(id, a->lease[p]) == 0)
                snprintf(a->token[p], DQ_TOKEN_BUF, "%s", dq_job_token(j));
            else if (strcmp(id, a->dead[p]) == 0)
                CK_RC(dq_nack(c, q, id, dq_job_token(j), 0, DQ_NACK_DEAD), 1,
                      c, "nack anchor");
            else if (strcmp(id, a->done[p]) == 0)
                CK_RC(dq_ack(c, q, id, dq_job_token(j)), 0, c, "ack anchor");
        }
    }
    dq_jobs_free(jobs);
    ck_stats(c, q, n, 0, n, n);
}

/* The anchors are as they were: then the leased ones are acked with their
 * tokens from before the migrations. */
static void anchors_check(dq_client *c, const char *q, const anchors *a) {
    ck_stats(c, q, a->n, 0, a->n, a->n);
    dq_jobs *dead = NULL;
    CK_RC(dq_dead_list(c, q, 0, 100, &dead), a->n, c, "dead_list");
    for (int p = 0; p < a->n; p++)
        ck_assert_msg(find_job(dead, a->dead[p]) != NULL, "dead anchor %s "
                      "gone", a->dead[p]);
    dq_jobs_free(dead);
    for (int p = 0; p < a->n; p++) {
        int oc = 0;
        CK_RC(dq_push(c, q, "x", 1, 0, a->done[p], DQ_PUSH_KEEP, NULL, 0,
                      &oc),
              0, c, "push of an acked anchor");
        ck_assert_msg(oc == DQ_DONE, "acked anchor %s: outcome %d, not "
                      "DQ_DONE (its done record is gone)", a->done[p], oc);
        CK_RC(dq_ack(c, q, a->lease[p], a->token[p]), 0, c,
              "ack of a leased anchor");
        CK_RC(dq_cancel(c, q, a->pend[p], 0), DQ_CANCELED_PENDING, c,
              "cancel of a pending anchor");
    }
    CK_RC(dq_dead_purge(c, q, NULL), a->n, c, "purge of the dead anchors");
    ck_stats(c, q, 0, 0, 0, 0);
}

typedef struct mig_arg {
    thc_cluster *cl;
    int slot, src;
    ft_ledger *L;
    int calls;
    int64_t empty_ms; /* time spent with the source empty (ASK served) */
} mig_arg;

/* Between two migration steps the load runs; once the source holds no
 * key of the slot (the target has them all, the source answers ASK) a
 * little longer. */
static void between(void *arg) {
    mig_arg *m = arg;
    char s[16];
    snprintf(s, sizeof(s), "%d", m->slot);
    m->calls++;
    long long left =
        node_int(m->cl, m->src, "CLUSTER COUNTKEYSINSLOT %s", s, NULL);
    int ms = left == 0 ? 400 : 120;
    if (left == 0)
        m->empty_ms += ms;
    th_sleep_ms(ms);
}

/* Jobs of the ledger acked at least once. */
static size_t ledger_acked(const ft_ledger *L) {
    size_t n = 0;
    for (size_t i = 0; i < L->njobs; i++)
        for (int a = 0; a < L->maxatt; a++) {
            int st = __atomic_load_n(&L->d[i * (size_t)L->maxatt + (size_t)a]
                                          .state,
                                     __ATOMIC_SEQ_CST);
            if (st == FT_ACKED || st == FT_ACKED_RETRY) {
                n++;
                break;
            }
        }
    return n;
}

static size_t ledger_pushed(const ft_ledger *L) {
    size_t n = 0;
    for (size_t i = 0; i < L->njobs; i++)
        n += __atomic_load_n(&L->pushed[i], __ATOMIC_SEQ_CST) != 0;
    return n;
}

/* Claims what is left of the ledger's queue with dq_poll (every
 * partition) and acks it, recorded as incarnation inc.  Returns how many
 * jobs it claimed. */
static long drain_ledger(dq_client *c, ft_ledger *L, int inc,
                         int64_t lease_ms) {
    long n = 0;
    for (int tries = 0; tries < 100; tries++) {
        dq_jobs *jobs = NULL;
        int rc = dq_poll(c, L->queue, 1000, lease_ms, &jobs, NULL);
        CK_OK(rc, c, "poll (drain)");
        if (rc == 0)
            break;
        for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            long idx = ft_job_index(dq_job_id(j), L->prefix);
            int64_t att = dq_job_attempt(j);
            ck_assert_msg(idx >= 0 && (size_t)idx < L->njobs && att >= 1 &&
                              att <= L->maxatt,
                          "drain: unexpected job %s attempt %" PRId64,
                          dq_job_id(j), att);
            ft_deliv *d = &L->d[(size_t)idx * (size_t)L->maxatt +
                                (size_t)(att - 1)];
            ck_assert_msg(d->state == FT_NONE, "drain: %s attempt %" PRId64
                          " delivered before", dq_job_id(j), att);
            d->inc = inc;
            d->deadline_ms = dq_job_lease_deadline_ms(j);
            d->claim_ms = d->deadline_ms - lease_ms;
            d->state = FT_CLAIMED;
            rc = dq_ack(c, L->queue, dq_job_id(j), dq_job_token(j));
            CK_RC(rc, 0, c, "ack (drain)");
            d->state = FT_ACKED;
            n++;
        }
        dq_jobs_free(jobs);
    }
    return n;
}

static void reshard(int parts) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    const char *q = parts > 1 ? "rs-part" : "rs-plain";
    enum { N = 4000 };
    dq_options *o = opts_new();
    if (parts > 1)
        opt(o, DQ_OPT_PARTITIONS, parts);
    dq_client *c = open_uri(uri, o);
    static anchors anc;
    memset(&anc, 0, sizeof(anc));
    anchors_seed(c, q, parts, &anc);

    /* The moves: partitions 0, 1, 2 each to the next primary, then
     * partition 0 once more; or the plain queue's slot around all three
     * primaries. */
    int prim[THC_MAX_NODES], np = thc_primaries(cl, prim);
    ck_assert_int_eq(np, 3);
    int slots[8], nmoves = 0;
    if (parts > 1) {
        for (int p = 0; p < 3; p++)
            slots[nmoves++] = slot_of_part(q, p);
        slots[nmoves++] = slot_of_part(q, 0);
    } else {
        for (int k = 0; k < 3; k++)
            slots[nmoves++] = slot_of_part(q, -1);
    }

    ft_ledger *L = ft_ledger_new(q, "rj", N, 4);
    ft_consumer cc = {.uri = uri, .opts = o, .L = L, .inc = 1, .max = 20,
                      .lease_ms = 30000, .batch_ack = parts > 1,
                      .strict = 1};
    ft_producer pp[2];
    for (int i = 0; i < 2; i++)
        pp[i] = (ft_producer){.uri = uri, .opts = o, .L = L,
                              .lo = (size_t)i * N / 2,
                              .hi = (size_t)(i + 1) * N / 2, .batch_max = 16,
                              .min_delay_ms = 0, .max_delay_ms = 30,
                              .pace_us = 20000, .strict = 1};
    uint64_t seed = ft_seed();
    pid_t cons = ft_fork(ft_consume, &cc);
    pid_t prod[2] = {ft_fork(ft_produce, &pp[0]), ft_fork(ft_produce, &pp[1])};

    th_sleep_ms(300);
    int64_t polls0 = __atomic_load_n(&L->polls, __ATOMIC_SEQ_CST);
    size_t pushed0 = ledger_pushed(L);
    int64_t t0 = th_mono_ms(), empty_ms = 0;
    int steps = 0;
    for (int k = 0; k < nmoves; k++) {
        int src = thc_owner(cl, slots[k]), to = -1;
        ck_assert_msg(src >= 0, "no owner of slot %d", slots[k]);
        for (int i = 0; i < np; i++)
            if (prim[i] == src)
                to = prim[(i + 1) % np];
        ck_assert_msg(to >= 0, "owner %d of slot %d is not a primary", src,
                      slots[k]);
        mig_arg m = {.cl = cl, .slot = slots[k], .src = src, .L = L};
        ck_assert_msg(thc_migrate_slot(cl, slots[k], to, 1, between, &m) == 0,
                      "thc_migrate_slot %d %d -> %d failed (see stderr)",
                      slots[k], src, to);
        ck_assert_int_eq(thc_owner(cl, slots[k]), to);
        steps += m.calls;
        empty_ms += m.empty_ms;
    }
    int64_t mig_ms = th_mono_ms() - t0;
    int64_t polls_during =
        __atomic_load_n(&L->polls, __ATOMIC_SEQ_CST) - polls0;
    size_t pushed_during = ledger_pushed(L) - pushed0;

    for (int i = 0; i < 2; i++)
        ft_assert_exit_ok(ft_reap(prod[i], 120000), "producer");
    /* All pushed: the consumer should finish within seconds.  When it
     * makes no progress for 4 s while jobs are due, it is stalled (see
     * poll_wait_resubscribe): the rest is claimed here with dq_poll, into
     * the ledger, so the accounting stays complete. */
    int64_t end = th_mono_ms() + 60000, last_t = th_mono_ms(), stall_ms = 0;
    size_t last_n = ledger_acked(L), target = ledger_pushed(L);
    long stalled = 0;
    while (ledger_acked(L) < target && th_mono_ms() < end) {
        th_sleep_ms(20);
        size_t n = ledger_acked(L);
        if (n != last_n) {
            last_n = n;
            last_t = th_mono_ms();
        } else if (th_mono_ms() - last_t > 4000) {
            stall_ms = th_mono_ms() - last_t;
            break;
        }
    }
    L->stop = 1;
    ft_assert_exit_ok(ft_reap(cons, 20000), "consumer");
    if (ledger_acked(L) < target)
        stalled = drain_ledger(c, L, 2, cc.lease_ms);
    int64_t total_ms = th_mono_ms() - t0;

    ft_report rep;
    ft_analyze(L, NULL, 0, &rep);
    long long asking = info_sum(cl, "commandstats", "cmdstat_asking",
                                "calls=");
    long long ask = info_sum(cl, "errorstats", "errorstat_ASK", "count=");
    long long moved = info_sum(cl, "errorstats", "errorstat_MOVED", "count=");
    long long tryagain =
        info_sum(cl, "errorstats", "errorstat_TRYAGAIN", "count=");
    printf("figures: cluster_reshard: jobs=%ld lost=%ld dup_ack=%ld "
           "dup_in_lease=%ld migrated_slots=%d asking=%lld ms=%" PRId64
           " queue=%s partitions=%d steps=%d migrate_ms=%" PRId64
           " ask_served_window_ms=%" PRId64 " ask=%lld moved=%lld "
           "tryagain=%lld pushed_during=%zu polls_during=%" PRId64
           " deliveries=%ld redelivered=%ld errors=%" PRId64
           " stalled_jobs=%ld stall_ms=%" PRId64 " seed=%" PRIu64 "\n",
           rep.pushed, rep.lost, rep.dup_ack, rep.dup_lease, nmoves, asking,
           total_ms, q, parts > 1 ? parts : 1, steps, mig_ms, empty_ms, ask,
           moved, tryagain, pushed_during, polls_during, rep.deliveries,
           rep.redelivered, L->errors, stalled, stall_ms, seed);
    fflush(stdout);

    ck_assert_msg(L->errors == 0,
                  "%" PRId64 " errors reached the workers (redirections "
                  "must be followed): last: %s",
                  L->errors, L->last_error);
    ck_assert_int_eq(rep.pushed, N);
    ft_assert_clean(L, &rep);
    ck_assert_msg(stalled == 0,
                  "the consumer's dq_poll_wait stopped claiming for %" PRId64
                  " ms with %ld jobs due (wake-ups lost while a partition's "
                  "subscription moved, and nothing made up for them?)",
                  stall_ms, stalled);
    ck_assert_msg(rep.redelivered == 0, "%ld jobs delivered again (leases "
                  "are 30 s and nothing failed)", rep.redelivered);
    /* A plain queue's three moves run back to back and its polls wait out
     * each migration (TRYAGAIN: the slot's keys are split between two
     * nodes), so a run may finish none inside the window (seen: 0..11);
     * a partitioned queue's other partitions stay pollable throughout. */
    ck_assert_msg(pushed_during > 0 && (parts == 1 || polls_during > 0),
                  "no load ran during the migrations (pushed %zu, polls "
                  "%" PRId64 ")", pushed_during, polls_during);
    ck_assert_msg(moved + ask > 0, "the client never saw a redirection");
    anchors_check(c, q, &anc);

    ft_ledger_free(L);
    dq_close(c);
    dq_options_free(o);
    cluster_down();
}

/*
 * Regression test: one call of a partitioned queue gets ASK for one
 * partition and MOVED for another in the same round.  Each ASKed call
 * keeps its own target (lib/client.c), so the MOVED read after it cannot
 * overwrite it: the call is sent once with ASKING to its target, the moved
 * one to its new owner, and the stats come back complete.  (A client that
 * lost the ASK target would send nothing, not pause, and give up with
 * DQ_EREDIS "redirected more than 64 times" within a millisecond or two,
 * after writing the other partitions' calls.)
 */
typedef struct am_arg {
    dq_client *c;
    const char *q;
    int rc, calls;
    int64_t us, st[4];
    char msg[300];
} am_arg;

/* Mid-migration of partition 0's slot, its keys all on the target. */
static void am_between(void *arg) {
    am_arg *a = arg;
    if (a->calls++ > 0)
        return;
    int64_t t = th_mono_us();
    a->rc = dq_stats(a->c, a->q, &a->st[0], &a->st[1], &a->st[2], &a->st[3],
                     NULL);
    a->us = th_mono_us() - t;
    snprintf(a->msg, sizeof(a->msg), "%s", dq_errmsg(a->c));
}

START_TEST(ask_and_moved) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    const char *q = "am-part";
    dq_options *o = opts_new();
    opt(o, DQ_OPT_PARTITIONS, 4);
    dq_client *c = open_uri(uri, o);
    static anchors anc;
    memset(&anc, 0, sizeof(anc));
    anchors_seed(c, q, 4, &anc); /* every key of every partition exists */
    int prim[THC_MAX_NODES], np = thc_primaries(cl, prim);
    int sa = slot_of_part(q, 1), sb = slot_of_part(q, 0);
    ck_assert_int_ne(sa, sb);
    int moves[2] = {sa, sb}, to[2] = {-1, -1};
    am_arg a = {.c = c, .q = q, .rc = 1};
    for (int k = 0; k < 2; k++) {
        int src = thc_owner(cl, moves[k]);
        for (int i = 0; i < np; i++)
            if (prim[i] == src)
                to[k] = prim[(i + 1) % np];
        /* First partition 1's slot moves (the client does not hear of
         * it), then partition 0's: one stats call in between gets ASK for
         * partition 0 and MOVED for partition 1. */
        ck_assert_msg(thc_migrate_slot(cl, moves[k], to[k], 100,
                                       k ? am_between : NULL, &a) == 0,
                      "thc_migrate_slot failed (see stderr)");
    }
    printf("figures: cluster_ask_and_moved: stats_rc=%s us=%" PRId64
           " counts=%" PRId64 "/%" PRId64 "/%" PRId64 "/%" PRId64 "\n",
           a.rc == 0 ? "OK" : dq_errname(a.rc), a.us, a.st[0], a.st[1],
           a.st[2], a.st[3]);
    fflush(stdout);
    ck_assert_int_eq(a.calls, 1);
    ck_assert_msg(a.rc == 0,
                  "a call that got ASK (partition 0) and MOVED "
                  "(partition 1) failed after %" PRId64 " us: %s: %s", a.us,
                  dq_errname(a.rc), a.msg);
    ck_assert_msg(a.st[0] == 4 && a.st[1] == 0 && a.st[2] == 4 &&
                      a.st[3] == 4,
                  "stats mid-migration: %" PRId64 " %" PRId64 " %" PRId64
                  " %" PRId64 ", want 4 0 4 4", a.st[0], a.st[1], a.st[2],
                  a.st[3]);
    anchors_check(c, q, &anc);
    dq_close(c);
    dq_options_free(o);
    cluster_down();
}
END_TEST

START_TEST(reshard_partitioned) { reshard(6); }
END_TEST

START_TEST(reshard_plain) { reshard(1); }
END_TEST

/*
 * fair_migrate: fair claiming while its slot migrates.  A grouped queue
 * with priorities and a limit per group keeps, besides due, lease and
 * jobs, the keys of include/fair.lua: gq, g:<group>, g<p>:<group> and
 * gl:<group>, all under the queue's hash tag (checked: each exists on the
 * slot's owner and hashes to its slot).  A worker thread pushes grouped
 * jobs of several priorities, polls, acks and reads dq_group_stats while
 * the slot moves one key a step (ASK, TRYAGAIN while a script's keys are
 * split, MOVED); every job is delivered once, no poll gives a group more
 * than its limit, dq_group_stats never fails, and after the migration the
 * keys are on the new owner, the limit per group holds and a small
 * group's job comes in the first poll beside a big group's burst.
 */
enum { FM_LIMIT = 3, FM_SEED = 60, FM_MAX = 4000 };

typedef struct fm_work {
    const char *uri, *q;
    volatile int stop;
    int pushed;                /* ids "w<k>", k < pushed */
    unsigned char got[FM_MAX]; /* deliveries of w<k> (and seeds s<k>) */
    int polls, gstats, over, dups, errors;
    volatile int started; /* loops begun */
    char last_error[300];
} fm_work;

/* The ledger slot of id ("s<k>": seeds, "w<k>": the worker's); -1 for
 * the jobs kept aside (group "held", "far"). */
static int fm_index(const char *id) {
    if (id[0] == 's')
        return atoi(id + 1);
    if (id[0] == 'w')
        return FM_SEED + atoi(id + 1);
    return -1;
}

static void fm_fail(fm_work *w, dq_client *c, const char *what) {
    w->errors++;
    snprintf(w->last_error, sizeof(w->last_error), "%s: %s", what,
             dq_errmsg(c));
}

/* One grouped push of id (group g, priority p, due after delay ms). */
static int fm_push(dq_client *c, const char *q, const char *id,
                   const char *g, int p, int64_t delay) {
    dq_push_opts *o = dq_push_opts_new();
    if (o == NULL || dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g) != 0 ||
        dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, p) != 0) {
        dq_push_opts_free(o);
        return -1;
    }
    int rc = dq_push_ex(c, q, id, strlen(id), delay, id, 0, o, NULL, 0,
                        NULL);
    dq_push_opts_free(o);
    return rc;
}

/* Records a poll's jobs (a group over its limit, a job twice) and acks
 * them; returns how many it took. */
static int fm_take(fm_work *w, dq_client *c, dq_jobs *jobs) {
    int per[5] = {0}; /* g0..g2, small, big */
    size_t n = dq_jobs_count(jobs);
    for (size_t i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        const char *id = dq_job_id(j);
        int k = fm_index(id);
        if (k < 0 || k >= FM_MAX)
            continue;
        if (w->got[k]++ > 0)
            w->dups++;
        per[id[0] == 'w' ? (k - FM_SEED) % 3 : k == 0 ? 3 : 4]++;
        if (dq_ack(c, w->q, id, dq_job_token(j)) != 0)
            fm_fail(w, c, "ack");
    }
    for (int g = 0; g < 5; g++)
        w->over += per[g] > FM_LIMIT;
    return (int)n;
}

/* The worker: pushes of groups g0..g2 (priority 0..3), polls of 5, acks,
 * group stats, until told to stop. */
static void *fm_worker(void *arg) {
    fm_work *w = arg;
    dq_client *c = NULL;
    /* a call waits out a migration (TRYAGAIN) for up to this timeout */
    dq_options *o = dq_options_new();
    int rc = o == NULL ? -1
                       : dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS,
                                            30000);
    if (rc == 0)
        rc = dq_open(w->uri, o, &c);
    dq_options_free(o);
    if (rc != 0) {
        fm_fail(w, c, "open");
        dq_close(c);
        return NULL;
    }
    while (!w->stop && FM_SEED + w->pushed + 2 < FM_MAX) {
        w->started++;
        for (int i = 0; i < 2; i++) {
            char id[16], g[8];
            int k = w->pushed;
            snprintf(id, sizeof(id), "w%d", k);
            snprintf(g, sizeof(g), "g%d", k % 3);
            if (fm_push(c, w->q, id, g, k % 4, 0) != 0)
                fm_fail(w, c, "push");
            else
                w->pushed++;
        }
        dq_jobs *jobs = NULL;
        int n = dq_poll(c, w->q, 5, 30000, &jobs, NULL);
        if (n < 0)
            fm_fail(w, c, "poll");
        else
            fm_take(w, c, jobs);
        dq_jobs_free(jobs);
        w->polls++;
        dq_group_list *l = NULL;
        if (dq_group_stats(c, w->q, 100, &l) < 0)
            fm_fail(w, c, "group_stats");
        else
            w->gstats++;
        dq_group_list_free(l);
        th_sleep_ms(5);
    }
    dq_close(c);
    return NULL;
}

/* Key dq:{q}:<suffix> exists on node o and hashes to slot. */
static void fm_key_on(thc_cluster *cl, int o, const char *q,
                      const char *suffix, int slot) {
    char key[200];
    snprintf(key, sizeof(key), "dq:{%s}:%s", q, suffix);
    ck_assert_msg(node_int(cl, o, "EXISTS %s", key, NULL) == 1,
                  "%s not on node %d (owner of slot %d)", key, o, slot);
    ck_assert_int_eq(node_int(cl, o, "CLUSTER KEYSLOT %s", key, NULL), slot);
}

/* Group g as dq_group_stats lists it: its jobs due now, due later and in
 * flight into v (-1 each: not listed). */
static void fm_group(dq_client *c, const char *q, const char *g,
                     int64_t v[3]) {
    dq_group_list *l = NULL;
    int n = dq_group_stats(c, q, 100, &l);
    CK_OK(n, c, "group_stats");
    v[0] = v[1] = v[2] = -1;
    for (int i = 0; i < n; i++)
        if (strcmp(dq_group_list_name(l, (size_t)i), g) == 0) {
            v[0] = dq_group_list_due(l, (size_t)i);
            v[1] = dq_group_list_later(l, (size_t)i);
            v[2] = dq_group_list_inflight(l, (size_t)i);
        }
    dq_group_list_free(l);
}

/* After the migration: a burst of a big group (and one job of priority 5
 * in it) and one job of a small group: the first poll of 2 takes the
 * small job and the priority job; the big group gets no more than its
 * limit in flight. */
static void fm_fair_after(dq_client *c, const char *q) {
    for (int i = 0; i < 30; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%d", i);
        CK_RC(fm_push(c, q, id, "big", 0, 0), 0, c, "push big");
    }
    CK_RC(fm_push(c, q, "bhi", "big", 5, 0), 0, c, "push big priority");
    CK_RC(fm_push(c, q, "small", "small", 0, 0), 0, c, "push small");
    dq_jobs *first = NULL;
    CK_RC(dq_poll(c, q, 2, 30000, &first, NULL), 2, c, "first poll");
    ck_assert_msg(find_job(first, "small") && find_job(first, "bhi"),
                  "first poll after the migration: %s, %s (want small and "
                  "bhi)", dq_job_id(dq_jobs_at(first, 0)),
                  dq_job_id(dq_jobs_at(first, 1)));
    dq_jobs *more = NULL;
    CK_RC(dq_poll(c, q, 50, 30000, &more, NULL), FM_LIMIT - 1, c,
          "poll of the big group up to its limit");
    int64_t g[3];
    fm_group(c, q, "big", g);
    /* (due: the index, a hint: a job taken by the fill from due stays
     * in it until a poll of its group drops it) */
    ck_assert_msg(g[0] >= 28 && g[0] <= 30 && g[1] == 0 && g[2] == FM_LIMIT,
                  "group stats of big: %" PRId64 " due, %" PRId64
                  " later, %" PRId64 " in flight; want 28..30, 0, %d", g[0],
                  g[1], g[2], FM_LIMIT);
    dq_jobs *l[2] = {first, more};
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < dq_jobs_count(l[k]); i++)
            ack_job(c, q, dq_jobs_at(l[k], i));
        dq_jobs_free(l[k]);
    }
    for (int left = 28; left > 0;) { /* the rest, FM_LIMIT at a time */
        dq_jobs *j = NULL;
        int n = dq_poll(c, q, 50, 30000, &j, NULL);
        CK_OK(n, c, "poll of the rest");
        ck_assert_msg(n > 0 && n <= FM_LIMIT, "a poll of the big group "
                      "took %d (limit %d)", n, FM_LIMIT);
        for (int i = 0; i < n; i++)
            ack_job(c, q, dq_jobs_at(j, (size_t)i));
        dq_jobs_free(j);
        left -= n;
    }
}

START_TEST(fair_migrate) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    const char *q = "fm-fair";
    dq_client *c = open_uri(uri, NULL);
    int s = DQ_SET_GROUP_MAX_INFLIGHT;
    int64_t v = FM_LIMIT;
    CK_RC(dq_config_set(c, q, 1, &s, &v), 0, c, "config group limit");
    /* Seeds: a big group with two levels, a small one; a job of group
     * "held" kept in flight and one of "far" due in an hour, so gq,
     * g2:far and gl:held exist throughout. */
    static fm_work w;
    memset(&w, 0, sizeof(w));
    w.uri = uri;
    w.q = q;
    for (int i = 0; i < FM_SEED; i++) {
        char id[16];
        snprintf(id, sizeof(id), "s%d", i);
        CK_RC(fm_push(c, q, id, i == 0 ? "small" : "big", i % 5 == 0 ? 3 : 0,
                      0),
              0, c, "push seed");
    }
    CK_RC(fm_push(c, q, "held", "held", 0, 0), 0, c, "push held");
    CK_RC(fm_push(c, q, "far", "far", 2, 3600000), 0, c, "push far");
    dq_jobs *held = NULL;
    int n = dq_poll(c, q, 4, 600000, &held, NULL);
    CK_OK(n, c, "first poll");
    const dq_job *hj = find_job(held, "held");
    ck_assert_msg(hj != NULL && find_job(held, "s0") != NULL,
                  "the first poll (max 4) missed a small group's job");
    char htok[DQ_TOKEN_BUF];
    snprintf(htok, sizeof(htok), "%s", dq_job_token(hj));
    fm_take(&w, c, held); /* acks the others */
    ck_assert_msg(w.errors == 0, "%s", w.last_error);
    dq_jobs_free(held);
    int slot = slot_of_part(q, -1), src = thc_owner(cl, slot);
    /* (g:big and g3:big are drained during the migration) */
    const char *keys[] = {"gq",  "g2:far", "gl:held", "due",
                          "lease", "jobs",  "g:big",   "g3:big"};
    for (size_t k = 0; k < 8; k++)
        fm_key_on(cl, src, q, keys[k], slot);

    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, fm_worker, &w), 0);
    th_sleep_ms(200);
    int prim[THC_MAX_NODES], np = thc_primaries(cl, prim), to = -1;
    for (int i = 0; i < np; i++)
        if (prim[i] == src)
            to = prim[(i + 1) % np];
    int started0 = w.started;
    mig_arg m = {.cl = cl, .slot = slot, .src = src};
    int64_t t0 = th_mono_ms();
    int mrc = thc_migrate_slot(cl, slot, to, 1, between, &m);
    int started_during = w.started - started0;
    /* Then on to the next primary, every key in one step (ASK). */
    int to2 = -1;
    for (int i = 0; i < np; i++)
        if (prim[i] == to)
            to2 = prim[(i + 1) % np];
    mig_arg m2 = {.cl = cl, .slot = slot, .src = to};
    int mrc2 = mrc == 0 ? thc_migrate_slot(cl, slot, to2, 1000, between, &m2)
                        : -1;
    started_during = w.started - started0;
    int64_t mig_ms = th_mono_ms() - t0;
    th_sleep_ms(200);
    w.stop = 1;
    pthread_join(t, NULL);
    ck_assert_msg(mrc == 0 && mrc2 == 0,
                  "thc_migrate_slot failed (see stderr)");
    ck_assert_int_eq(thc_owner(cl, slot), to2);
    to = to2;
    for (size_t k = 0; k < 6; k++)
        fm_key_on(cl, to, q, keys[k], slot);
    /* The rest, drained here. */
    for (int tries = 0; tries < 200; tries++) {
        dq_jobs *j = NULL;
        int got = dq_poll(c, q, 100, 30000, &j, NULL);
        CK_OK(got, c, "poll (drain)");
        fm_take(&w, c, j);
        dq_jobs_free(j);
        if (got == 0)
            break;
    }
    int lost = 0;
    for (int k = 0; k < FM_SEED + w.pushed; k++)
        lost += w.got[k] == 0;
    long long ask = info_sum(cl, "errorstats", "errorstat_ASK", "count=");
    long long moved = info_sum(cl, "errorstats", "errorstat_MOVED", "count=");
    long long tryagain =
        info_sum(cl, "errorstats", "errorstat_TRYAGAIN", "count=");
    printf("figures: cluster_fair_migrate: jobs=%d lost=%d dups=%d "
           "over_limit=%d polls=%d started_during=%d group_stats=%d "
           "errors=%d steps=%d migrate_ms=%" PRId64
           " ask=%lld moved=%lld tryagain=%lld\n",
           FM_SEED + w.pushed, lost, w.dups, w.over, w.polls, started_during,
           w.gstats, w.errors, m.calls + m2.calls, mig_ms, ask, moved,
           tryagain);
    fflush(stdout);
    ck_assert_msg(w.errors == 0, "%d errors reached the worker: last: %s",
                  w.errors, w.last_error);
    ck_assert_msg(lost == 0 && w.dups == 0, "%d jobs lost, %d delivered "
                  "twice", lost, w.dups);
    ck_assert_msg(w.over == 0, "%d polls gave a group more than %d", w.over,
                  FM_LIMIT);
    /* (its calls wait out a migration while the keys they name are split
     * or not all on the target: TRYAGAIN, as a plain queue's in
     * reshard_plain; the grouped ones name keys of groups that may not
     * exist) */
    ck_assert_msg(started_during > 0, "no load ran during the migrations");
    ck_assert_msg(moved + ask > 0, "the client never saw a redirection");
    int64_t g[3];
    fm_group(c, q, "far", g);
    ck_assert_msg(g[0] == 0 && g[1] == 1, "group stats of far after the "
                  "migration: %" PRId64 " due, %" PRId64 " later", g[0],
                  g[1]);
    CK_RC(dq_ack(c, q, "held", htok), 0, c, "ack of the held job");
    fm_fair_after(c, q);
    CK_RC(dq_cancel(c, q, "far", 0), DQ_CANCELED_PENDING, c, "cancel far");
    dq_close(c);
    cluster_down();
}
END_TEST

/* ---- 3, 4. failover ------------------------------------------------------ */

/* Watches a server's pid: the time it died (th_mono_us), 0 until then. */
typedef struct watch {
    pid_t pid;
    volatile int stop;
    int64_t gone_us;
} watch;

static int pid_alive(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X' &&
           p[2] != 'x';
}

static void *watch_thread(void *arg) {
    watch *w = arg;
    while (!w->stop) {
        if (!pid_alive(w->pid)) {
            __atomic_store_n(&w->gone_us, th_mono_us(), __ATOMIC_SEQ_CST);
            break;
        }
        usleep(200);
    }
    return NULL;
}

/* One push call of the pusher thread. */
typedef struct pcall {
    int64_t t0, t1; /* us */
    int rc, outcome, idx;
} pcall;

enum { LIVE_MAX = 20000, CALLS_MAX = 40000 };

/* Pushes live-0, live-1, ... one by one with the test's client, until
 * stop; an I/O error is retried with the same id and DQ_PUSH_KEEP (the
 * documented retry). */
typedef struct pusher {
    dq_client *c;
    const char *q;
    watch *w;
    volatile int stop;
    volatile int landed_after_kill; /* a push begun after the kill landed */
    int nidx;
    uint8_t acked[LIVE_MAX];  /* returned 0: on a replica too */
    uint8_t landed[LIVE_MAX]; /* returned 0, or DQ_EREPLICAS with it written */
    pcall calls[CALLS_MAX];
    int ncalls;
    int unexpected;
    char unexpected_msg[256];
    char io_msg[256]; /* the last I/O error or timeout */
} pusher;

static void *push_thread(void *arg) {
    pusher *p = arg;
    int idx = 0;
    while (!p->stop && idx < LIVE_MAX && p->ncalls < CALLS_MAX) {
        char id[32], pl[48];
        snprintf(id, sizeof(id), "live-%d", idx);
        int len = snprintf(pl, sizeof(pl), "payload-live-%d", idx);
        int oc = 0;
        int64_t t0 = th_mono_us();
        int rc = dq_push(p->c, p->q, pl, (size_t)len, 0, id, DQ_PUSH_KEEP,
                         NULL, 0, &oc);
        int64_t t1 = th_mono_us();
        p->calls[p->ncalls++] = (pcall){t0, t1, rc, oc, idx};
        if (idx >= p->nidx)
            p->nidx = idx + 1;
        int64_t kill = __atomic_load_n(&p->w->gone_us, __ATOMIC_SEQ_CST);
        if (rc == 0 ||
            (rc == DQ_EREPLICAS && (oc == DQ_PUSHED || oc == DQ_KEPT))) {
            p->acked[idx] = rc == 0;
            p->landed[idx] = 1;
            idx++;
            if (kill > 0 && t0 >= kill)
                p->landed_after_kill = 1;
        } else if (rc == DQ_EIO || rc == DQ_ETIMEDOUT) {
            snprintf(p->io_msg, sizeof(p->io_msg), "push %s: %s: %s", id,
                     dq_errname(rc), dq_errmsg(p->c));
            usleep(5000);
        } else {
            p->unexpected++;
            snprintf(p->unexpected_msg, sizeof(p->unexpected_msg),
                     "push %s: %s: %s", id, dq_errname(rc), dq_errmsg(p->c));
            idx++;
            usleep(5000);
        }
        usleep(2000);
    }
    return NULL;
}

/* What the calls after the kill did. */
typedef struct after_kill {
    int64_t ms_to_first_ok; /* kill -> end of the first push begun after
                               it that landed; -1 if none */
    int failed;             /* calls that ended after the kill with an
                               I/O error or timeout */
    int64_t longest_ms;     /* longest call that ended after the kill */
    int first_rc;           /* result of the first call begun after it */
    int acked_after;        /* pushes begun after the kill that got 0 */
    int landed_after;       /* ... that landed (0 or DQ_EREPLICAS) */
} after_kill;

static void analyse_calls(const pusher *p, int64_t kill_us, after_kill *a) {
    memset(a, 0, sizeof(*a));
    a->ms_to_first_ok = -1;
    a->first_rc = 1;
    for (int i = 0; i < p->ncalls; i++) {
        const pcall *k = &p->calls[i];
        if (k->t1 < kill_us)
            continue;
        int landed = k->rc == 0 || (k->rc == DQ_EREPLICAS &&
                                    (k->outcome == DQ_PUSHED ||
                                     k->outcome == DQ_KEPT));
        if (k->rc == DQ_EIO || k->rc == DQ_ETIMEDOUT)
            a->failed++;
        if ((k->t1 - k->t0) / 1000 > a->longest_ms)
            a->longest_ms = (k->t1 - k->t0) / 1000;
        if (k->t0 < kill_us)
            continue;
        if (a->first_rc == 1)
            a->first_rc = k->rc;
        a->acked_after += k->rc == 0;
        a->landed_after += landed;
        if (landed && a->ms_to_first_ok < 0)
            a->ms_to_first_ok = (k->t1 - kill_us) / 1000;
    }
}

/* Which jobs a queue holds: polls them all (and acks them). */
typedef struct seen {
    uint8_t pre[2000], preb[2000], live[LIVE_MAX], part[2000];
    long dup, unknown, total;
    char unknown_id[DQ_ID_BUF];
} seen;

static uint8_t *seen_slot(seen *s, const char *id) {
    long i;
    if ((i = ft_job_index(id, "pre")) >= 0 && i < 2000)
        return &s->pre[i];
    if ((i = ft_job_index(id, "preb")) >= 0 && i < 2000)
        return &s->preb[i];
    if ((i = ft_job_index(id, "live")) >= 0 && i < LIVE_MAX)
        return &s->live[i];
    if ((i = ft_job_index(id, "pp")) >= 0 && i < 2000)
        return &s->part[i];
    return NULL;
}

/* A first call after a failover may be the one that finds its link
 * broken (DQ_EIO, documented); stats is read-only, so it is tried twice.
 * Returns the failures (0 or 1), or -1 with msg set if both failed. */
static int stats_settle(dq_client *c, const char *q, char *msg, size_t n) {
    for (int fails = 0; fails < 2; fails++) {
        int rc = dq_stats(c, q, NULL, NULL, NULL, NULL, NULL);
        if (rc == 0)
            return fails;
        size_t used = fails ? strlen(msg) : 0;
        snprintf(msg + used, n - used, "%sstats on %s: %s: %s",
                 fails ? "; then " : "", q, dq_errname(rc), dq_errmsg(c));
    }
    return -1;
}

static void drain_into(dq_client *c, const char *q, seen *s) {
    const char *ids[1000], *toks[1000];
    int results[1000];
    for (int tries = 0; tries < 200; tries++) {
        dq_jobs *jobs = NULL;
        int rc = dq_poll(c, q, 1000, 120000, &jobs, NULL);
        CK_OK(rc, c, "poll after the failover");
        if (rc == 0)
            break;
        size_t n = dq_jobs_count(jobs);
        for (size_t i = 0; i < n; i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            ids[i] = dq_job_id(j);
            toks[i] = dq_job_token(j);
            uint8_t *slot = seen_slot(s, ids[i]);
            s->total++;
            if (slot == NULL) {
                s->unknown++;
                snprintf(s->unknown_id, sizeof(s->unknown_id), "%s", ids[i]);
            } else if (*slot) {
                s->dup++;
            } else {
                *slot = 1;
            }
        }
        rc = dq_ack_batch(c, q, n, ids, toks, results);
        CK_RC(rc, (int)n, c, "ack_batch after the failover");
        dq_jobs_free(jobs);
    }
    ck_stats(c, q, 0, 0, 0, 0);
}

/* A push that must end acknowledged by a replica (0): DQ_EREPLICAS (the
 * replica was slow, e.g. on a loaded machine) is retried with the same ids
 * and DQ_PUSH_KEEP, whose WAIT then covers the earlier write too; counts
 * the retries. */
static int push_acked(dq_client *c, const char *q, size_t n,
                      const void *const *pls, const size_t *lens,
                      const char *const *ids, int *retries) {
    int rc = 0;
    for (int k = 0; k < 10; k++) {
        if (n == 1)
            rc = dq_push(c, q, pls[0], lens[0], 0, ids[0], DQ_PUSH_KEEP, NULL,
                         0, NULL);
        else
            rc = dq_push_batch(c, q, n, pls, lens, NULL, ids, DQ_PUSH_KEEP,
                               NULL, NULL);
        if (rc != DQ_EREPLICAS)
            break;
        (*retries)++;
    }
    return rc;
}

/* Pushes before the failover: 300 single pushes and a batch of 1000
 * (plain queue, client c), a batch of 1200 on the partitioned queue
 * (client cp); each ends acknowledged by a replica (0). */
static int push_before(dq_client *c, const char *q, dq_client *cp,
                       const char *pq) {
    int retries = 0;
    for (int i = 0; i < 300; i++) {
        char id[32], pl[48];
        snprintf(id, sizeof(id), "pre-%d", i);
        size_t len = (size_t)snprintf(pl, sizeof(pl), "payload-pre-%d", i);
        const char *ids[1] = {id};
        const void *pls[1] = {pl};
        int rc = push_acked(c, q, 1, pls, &len, ids, &retries);
        ck_assert_msg(rc == 0, "push %s before the kill: %s: %s", id,
                      dq_errname(rc), dq_errmsg(c));
    }
    static char idb[1200][16];
    static const char *ids[1200];
    static const void *pls[1200];
    static size_t lens[1200];
    for (int i = 0; i < 1200; i++) {
        pls[i] = "payload";
        lens[i] = 7;
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(idb[i], sizeof(idb[i]), "preb-%d", i);
        ids[i] = idb[i];
    }
    int rc = push_acked(c, q, 1000, pls, lens, ids, &retries);
    CK_OK(rc, c, "push_batch before the kill");
    for (int i = 0; i < 1200; i++) {
        snprintf(idb[i], sizeof(idb[i]), "pp-%d", i);
        ids[i] = idb[i];
    }
    rc = push_acked(cp, pq, 1200, pls, lens, ids, &retries);
    CK_OK(rc, cp, "partitioned push_batch before the kill");
    return retries;
}

/* Everything acknowledged is there: returns the acknowledged jobs not
 * found (plain queue), and counts the partitioned queue's missing in
 * *part_lost. */
static long check_after(dq_client *c, const char *q, dq_client *cp,
                        const char *pq, const pusher *p, long *acknowledged,
                        long *part_lost, long *landed_lost) {
    static seen s;
    memset(&s, 0, sizeof(s));
    drain_into(c, q, &s);
    drain_into(cp, pq, &s);
    ck_assert_msg(s.unknown == 0, "%ld jobs never pushed, e.g. %s", s.unknown,
                  s.unknown_id);
    ck_assert_msg(s.dup == 0, "%ld jobs delivered twice", s.dup);
    long lost = 0, ack = 0;
    for (int i = 0; i < 300; i++, ack++)
        lost += !s.pre[i];
    for (int i = 0; i < 1000; i++, ack++)
        lost += !s.preb[i];
    *landed_lost = 0;
    for (int i = 0; i < p->nidx; i++) {
        if (p->acked[i]) {
            ack++;
            lost += !s.live[i];
        } else if (p->landed[i]) {
            *landed_lost += !s.live[i];
        }
    }
    *part_lost = 0;
    for (int i = 0; i < 1200; i++)
        *part_lost += !s.part[i];
    *acknowledged = ack + 1200;
    return lost;
}

static dq_options *failover_opts(int parts) {
    dq_options *o = opts_new();
    opt(o, DQ_OPT_WAIT_REPLICAS, 1);
    opt(o, DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS, 500);
    opt(o, DQ_OPT_COMMAND_TIMEOUT_MS, 15000);
    if (parts > 1)
        opt(o, DQ_OPT_PARTITIONS, parts);
    return o;
}

/* Runs the pusher over kill(), which SIGKILLs the server whose pid is
 * victim and returns once a replica took over (>= 0) or failed (< 0);
 * fills *a and returns kill()'s result and the failover's ms. */
typedef int (*kill_fn)(void *arg);

static int run_over_kill(pusher *p, pid_t victim, kill_fn kill_it,
                         void *arg, after_kill *a, int64_t *failover_ms) {
    static watch w;
    memset(&w, 0, sizeof(w));
    w.pid = victim;
    p->w = &w;
    pthread_t wt, pt;
    ck_assert_int_eq(pthread_create(&wt, NULL, watch_thread, &w), 0);
    ck_assert_int_eq(pthread_create(&pt, NULL, push_thread, p), 0);
    th_sleep_ms(300);
    int64_t t = th_mono_ms();
    int rc = kill_it(arg);
    *failover_ms = th_mono_ms() - t;
    /* The client's push begun after the kill lands, or 20 s pass. */
    int64_t end = th_mono_ms() + 20000;
    while (rc >= 0 && !p->landed_after_kill && th_mono_ms() < end)
        th_sleep_ms(10);
    th_sleep_ms(300);
    p->stop = 1;
    pthread_join(pt, NULL);
    w.stop = 1;
    pthread_join(wt, NULL);
    int64_t kill_us = __atomic_load_n(&w.gone_us, __ATOMIC_SEQ_CST);
    ck_assert_msg(kill_us > 0, "the server (pid %ld) did not die",
                  (long)victim);
    analyse_calls(p, kill_us, a);
    return rc;
}

/* After the failover: the pusher's results, then every acknowledged job
 * there; prints the figures line. */
static void failover_verdict(const char *name, dq_client *c, const char *q,
                             dq_client *cp, const char *pq, pusher *p,
                             const after_kill *a, int64_t failover_ms,
                             int pre_retries, int victim_port) {
    long acknowledged = -1, part_lost = -1, landed_lost = -1, lost = -1;
    char msg[512] = "";
    /* Without a push landed after the kill, the client did not find the
     * new primary: the checks below would only wait for more timeouts. */
    int s1 = a->ms_to_first_ok < 0 ? -1 : stats_settle(c, q, msg, sizeof(msg));
    int s2 = s1 < 0 ? -1 : stats_settle(cp, pq, msg, sizeof(msg));
    if (s1 >= 0 && s2 >= 0)
        lost = check_after(c, q, cp, pq, p, &acknowledged, &part_lost,
                           &landed_lost);
    printf("figures: %s: ms_to_first_ok_push=%" PRId64
           " lost_acknowledged=%ld acknowledged=%ld partitioned_lost=%ld "
           "landed_unacknowledged_lost=%ld first_call_after_kill=%s "
           "failed_calls_after_kill=%d longest_call_ms=%" PRId64
           " pushes_after_kill=%d acked_after_kill=%d failover_ms=%" PRId64
           " live_pushes=%d settle_failures=%d wait_retries_before=%d\n",
           name, a->ms_to_first_ok, lost < 0 ? -1 : lost + part_lost,
           acknowledged, part_lost, landed_lost,
           a->first_rc == 1 ? "none" : dq_errname(a->first_rc), a->failed,
           a->longest_ms, a->landed_after, a->acked_after, failover_ms,
           p->nidx, s1 < 0 || s2 < 0 ? -1 : s1 + s2, pre_retries);
    fflush(stdout);
    ck_assert_msg(p->unexpected == 0, "%d unexpected push errors: last: %s",
                  p->unexpected, p->unexpected_msg);
    ck_assert_msg(a->ms_to_first_ok >= 0,
                  "no push landed within 20 s of the kill (the killed "
                  "primary was 127.0.0.1:%d); %d calls failed, the last: %s",
                  victim_port, a->failed, p->io_msg);
    /* Only the first call may fail (it finds its link broken): replies of
     * an EPROTO or a NOSCRIPT error in the next one are read out of step
     * (a reply left on a link by the failed call). */
    ck_assert_msg(s1 >= 0 && s2 >= 0,
                  "the clients keep failing after the failover (the killed "
                  "primary was 127.0.0.1:%d): %s", victim_port, msg);
    ck_assert_msg(lost == 0, "%ld acknowledged jobs lost", lost);
    ck_assert_msg(part_lost == 0,
                  "%ld acknowledged jobs of the partitioned queue lost",
                  part_lost);
    ck_assert_msg(a->ms_to_first_ok >= 0 && a->ms_to_first_ok < 15000,
                  "no push landed within 15 s of the kill (%" PRId64 " ms)",
                  a->ms_to_first_ok);
    /* At most the call that found its link broken fails; the next one
     * follows the failover within its command timeout. */
    ck_assert_msg(a->failed <= 1,
                  "%d push calls failed after the kill (at most the one "
                  "that saw the link break may)", a->failed);
}

/* The value after key in a flat key/value reply, or NULL. */
static const redisReply *field_of(const redisReply *r, const char *key) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t i = 0; i + 1 < r->elements; i += 2)
        if (r->element[i]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[i]->str, key) == 0)
            return r->element[i + 1];
    return NULL;
}

static int str_is(const redisReply *r, const char *s) {
    return r != NULL && (r->type == REDIS_REPLY_STRING ||
                         r->type == REDIS_REPLY_STATUS) &&
           strcmp(r->str, s) == 0;
}

/* 1 if node np's CLUSTER SHARDS lists, in np's own shard, a failed node
 * with role "master" before np itself (Valkey 8 does after a failover,
 * Redis 7.0 gives the failed primary a shard of its own); 0 if not, -1 if
 * the reply is not understood. */
static int shards_failed_primary_first(thc_cluster *cl, int np) {
    redisReply *r = node_cmd(cl, np, "CLUSTER SHARDS");
    int res = -1;
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *nodes = field_of(r->element[i], "nodes");
        int failed_before = 0;
        for (size_t k = 0; nodes && nodes->type == REDIS_REPLY_ARRAY &&
                           k < nodes->elements; k++) {
            const redisReply *n = nodes->element[k];
            if (str_is(field_of(n, "id"), cl->nodes[np].id)) {
                res = failed_before;
                break;
            }
            if (str_is(field_of(n, "role"), "master") &&
                str_is(field_of(n, "health"), "fail"))
                failed_before = 1;
        }
        if (res >= 0)
            break;
    }
    freeReplyObject(r);
    return res;
}

static int kill_cluster_primary(void *arg) {
    int *v = arg; /* [0] node in, [1] new primary out */
    v[1] = thc_kill_primary(&g_cl, v[0], 30000);
    return v[1];
}

/*
 * On Valkey 8 (DQ_REDIS_SERVER=valkey-server, DQ_REDIS_CLI=valkey-cli)
 * this is also the regression test of the slot map after a failover:
 * CLUSTER SHARDS then lists the failed old primary (role "master", health
 * "fail") in the same shard as, and before, the promoted replica, and
 * lib/route.c takes the shard's online primary, so calls for its slots go
 * to the promoted node (a map that named the dead node would spend every
 * call's command timeout connecting there: DQ_EIO "Connection refused").
 * Redis 7.0 gives the failed primary a shard of its own.  The line printed
 * before the figures says which of the two the server did.
 */
START_TEST(failover) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    const char *q = "fo-plain", *pq = "fo-part";
    int victim = owner_of_part(cl, q, -1);
    int on_victim = 0;
    for (int p = 0; p < 6; p++)
        on_victim += owner_of_part(cl, pq, p) == victim;
    ck_assert_msg(on_victim > 0, "no partition of %s on node %d", pq, victim);
    dq_options *o = failover_opts(1), *op = failover_opts(6);
    dq_client *c = open_uri(uri, o), *cp = open_uri(uri, op);
    int pre_retries = push_before(c, q, cp, pq);

    pusher *p = calloc(1, sizeof(*p));
    ck_assert_ptr_nonnull(p);
    p->c = c;
    p->q = q;
    after_kill a;
    int64_t fo_ms = 0;
    int v[2] = {victim, -1};
    int rc = run_over_kill(p, cl->nodes[victim].r.pid, kill_cluster_primary,
                           v, &a, &fo_ms);
    ck_assert_msg(rc >= 0, "thc_kill_primary failed (see stderr)");
    ck_assert_int_eq(thc_owner(cl, slot_of_part(q, -1)), v[1]);
    /* What the client's slot map is built from (see the report of
     * failover_verdict when the client keeps going to the dead node). */
    printf("cluster_failover: CLUSTER SHARDS lists the failed primary "
           "before the promoted one: %d\n",
           shards_failed_primary_first(cl, v[1]));
    failover_verdict("cluster_failover", c, q, cp, pq, p, &a, fo_ms,
                     pre_retries, cl->nodes[victim].r.port);
    free(p);
    dq_close(c);
    dq_close(cp);
    dq_options_free(o);
    dq_options_free(op);
    cluster_down();
}
END_TEST

static int kill_sentinel_primary(void *arg) {
    (void)arg;
    return thc_sentinel_failover(&g_sn, 1, 30000);
}

START_TEST(sentinel) {
    char uri[512], puri[600];
    sentinel_up(3, "dqmaster", uri, sizeof(uri));
    snprintf(puri, sizeof(puri), "%s?partitions=4", uri);
    const char *q = "so-plain", *pq = "so-part";
    dq_options *o = failover_opts(1);
    dq_client *c = open_uri(uri, o), *cp = open_uri(puri, o);
    int pre_retries = push_before(c, q, cp, pq);

    pusher *p = calloc(1, sizeof(*p));
    ck_assert_ptr_nonnull(p);
    p->c = c;
    p->q = q;
    after_kill a;
    int64_t fo_ms = 0;
    int old = g_sn.primary;
    int rc = run_over_kill(p, g_sn.data[old].pid, kill_sentinel_primary,
                           NULL, &a, &fo_ms);
    ck_assert_msg(rc >= 0 && rc != old,
                  "thc_sentinel_failover failed (see stderr)");
    failover_verdict("sentinel_failover", c, q, cp, pq, p, &a, fo_ms,
                     pre_retries, g_sn.data[old].port);
    free(p);
    dq_close(c);
    dq_close(cp);
    dq_options_free(o);
    thc_sentinel_stop(&g_sn);
    g_sn_up = 0;
}
END_TEST

/* ---- 6. the sync consumer over a cluster -------------------------------- */

enum { SC_JOBS = 300 };

/* What the consumer's handler saw. */
typedef struct sc_state {
    int count[SC_JOBS];      /* handled, per job "c-<i>" */
    int others;              /* jobs with another id */
    volatile int handled;    /* all jobs "c-*" handled so far */
    volatile int64_t wake_us; /* when "wake" was handled (th_mono_us) */
} sc_state;

static int sc_handler(dq_consumer *c, const dq_job *job, void *ud) {
    sc_state *st = ud;
    const char *id = dq_job_id(job);
    long i = ft_job_index(id, "c");
    if (i >= 0 && i < SC_JOBS) {
        st->count[i]++;
        __atomic_add_fetch(&st->handled, 1, __ATOMIC_SEQ_CST);
    } else if (strcmp(id, "wake") == 0) {
        __atomic_store_n(&st->wake_us, th_mono_us(), __ATOMIC_SEQ_CST);
        dq_consumer_interrupt(c); /* the loop ends after this job */
    } else {
        st->others++;
    }
    return DQ_JOB_OK;
}

typedef struct sc_run {
    dq_consumer *c;
    int rc;
} sc_run;

static void *sc_thread(void *arg) {
    sc_run *r = arg;
    r->rc = dq_consumer_run(r->c);
    return NULL;
}

/* A queue name "<prefix>-<k>" whose slot (parts 1) or partitions' slots
 * (parts > 1) belong to every primary (parts > 1) or any (parts 1). */
static void sc_queue(thc_cluster *cl, const char *prefix, int parts,
                     char *q, size_t n) {
    for (int k = 0; k < 1000; k++) {
        snprintf(q, n, "%s-%d", prefix, k);
        if (parts <= 1)
            return;
        int on[THC_MAX_NODES] = {0}, distinct = 0;
        for (int p = 0; p < parts; p++)
            distinct += on[owner_of_part(cl, q, p)]++ == 0;
        if (distinct == 3)
            return;
    }
    ck_abort_msg("no queue name of %s spans the 3 primaries", prefix);
}

/* One run of dq_consumer_new_sync on queue q (parts partitions): 300 jobs
 * pushed in one batch are each handled once, then an idle consumer (wait
 * cap 5 s) is woken by a push; returns the wake-up's ms. */
static int64_t sync_consumer_run(const char *uri, int parts, const char *q,
                                 int64_t *drain_ms) {
    dq_options *o = opts_new();
    opt(o, DQ_OPT_WAIT_CAP_MS, 5000);
    if (parts > 1)
        opt(o, DQ_OPT_PARTITIONS, parts);
    dq_client *pc = open_uri(uri, o), *cc = open_uri(uri, o);
    static sc_state st;
    memset(&st, 0, sizeof(st));
    dq_consumer *cons = NULL;
    int rc = dq_consumer_new_sync(cc, q, sc_handler, &st, &cons);
    CK_RC(rc, 0, cc, "dq_consumer_new_sync");
    ck_assert_int_eq(dq_consumer_set_int(cons, DQ_COPT_CONCURRENCY, 10), 0);
    sc_run run = {.c = cons, .rc = -999};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, sc_thread, &run), 0);

    static char ids[SC_JOBS][16];
    static const char *idv[SC_JOBS];
    static const void *pls[SC_JOBS];
    static size_t lens[SC_JOBS];
    for (int i = 0; i < SC_JOBS; i++) {
        snprintf(ids[i], sizeof(ids[i]), "c-%d", i);
        idv[i] = pls[i] = ids[i];
        lens[i] = strlen(ids[i]);
    }
    int64_t t0 = th_mono_ms();
    rc = dq_push_batch(pc, q, SC_JOBS, pls, lens, NULL, idv, 0, NULL, NULL);
    CK_RC(rc, SC_JOBS, pc, "push_batch");
    while (__atomic_load_n(&st.handled, __ATOMIC_SEQ_CST) < SC_JOBS &&
           th_mono_ms() - t0 < 30000)
        th_sleep_ms(5);
    *drain_ms = th_mono_ms() - t0;
    int handled = __atomic_load_n(&st.handled, __ATOMIC_SEQ_CST);
    /* Idle now (asleep on its wake channels, cap 5 s): a push wakes it. */
    th_sleep_ms(700);
    int64_t tw = th_mono_us();
    push_now(pc, q, "wake", 0);
    while (__atomic_load_n(&st.wake_us, __ATOMIC_SEQ_CST) == 0 &&
           th_mono_us() - tw < 15000000)
        th_sleep_ms(2);
    int64_t wake_us = __atomic_load_n(&st.wake_us, __ATOMIC_SEQ_CST);
    if (wake_us == 0)
        dq_consumer_interrupt(cons); /* noticed within the wait cap */
    pthread_join(th, NULL);
    int once = 0, twice = 0;
    for (int i = 0; i < SC_JOBS; i++) {
        once += st.count[i] == 1;
        twice += st.count[i] > 1;
    }
    int64_t wake_ms = wake_us > 0 ? (wake_us - tw) / 1000 : -1;
    printf("figures: cluster_sync_consumer: queue=%s partitions=%d "
           "jobs=%d handled_once=%d handled_twice=%d others=%d "
           "drain_ms=%" PRId64 " wake_ms=%" PRId64 " released=%d\n",
           q, parts, SC_JOBS, once, twice, st.others, *drain_ms, wake_ms,
           run.rc);
    fflush(stdout);
    ck_assert_msg(handled == SC_JOBS, "%d of %d jobs handled in 30 s",
                  handled, SC_JOBS);
    ck_assert_int_eq(once, SC_JOBS);
    ck_assert_int_eq(twice, 0);
    ck_assert_int_eq(st.others, 0);
    ck_assert_msg(run.rc >= 0, "dq_consumer_run: %s: %s", dq_errname(run.rc),
                  dq_errmsg(cc));
    ck_assert_msg(wake_ms >= 0 && wake_ms < 500,
                  "the idle consumer handled a push after %" PRId64
                  " ms (wait cap 5 s)", wake_ms);
    ck_stats(pc, q, 0, 0, 0, 0);
    dq_consumer_free(cons);
    dq_close(pc);
    dq_close(cc);
    dq_options_free(o);
    return wake_ms;
}

/*
 * The sync consumer (dq_consumer_new_sync) over the 3-primary cluster, on
 * a plain queue and on one of 4 partitions spread over every primary:
 * every job of a batch is handled exactly once and acked, and an idle
 * consumer is woken by a push through sharded pub/sub, long before its
 * wait cap.
 */
START_TEST(sync_consumer) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    char q[32], pq[32];
    sc_queue(cl, "sc-plain", 1, q, sizeof(q));
    sc_queue(cl, "sc-part", 4, pq, sizeof(pq));
    int64_t d1 = 0, d4 = 0;
    sync_consumer_run(uri, 1, q, &d1);
    sync_consumer_run(uri, 4, pq, &d4);
    cluster_down();
}
END_TEST

/* ---- 6b. dq_queues on every primary -------------------------------------- */

/* The listing's name i, failing the test past its end. */
static const char *listed(const dq_queue_list *l, size_t i) {
    const char *n = dq_queue_list_name(l, i);
    ck_assert_ptr_nonnull(n);
    return n;
}

/*
 * dq_queues on a 3-primary cluster: 12 plain queues whose slots lie 4 on
 * each primary, a partitioned queue (8 partitions over every primary) and
 * a compact one are each listed once, sorted, the partitioned one
 * flagged; a queue of another namespace is not.
 */
START_TEST(queues_every_primary) {
    char uri[512];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    char names[12][32];
    int per[THC_MAX_NODES];
    pick_queues(cl, "lq", 1, names, per);
    dq_client *c = open_uri(uri, NULL);
    for (int i = 0; i < 12; i++)
        push_now(c, names[i], "j1", 60000);
    dq_options *o = opts_new();
    opt(o, DQ_OPT_PARTITIONS, 8);
    dq_client *cp = open_uri(uri, o);
    for (int i = 0; i < 40; i++) {
        char id[16];
        snprintf(id, sizeof(id), "p%d", i);
        push_now(cp, "lq-parted", id, 60000);
    }
    dq_options_free(o);
    int on[THC_MAX_NODES] = {0}, owners = 0;
    for (int p = 0; p < 8; p++)
        if (on[owner_of_part(cl, "lq-parted", p)]++ == 0)
            owners++;
    ck_assert_msg(owners >= 2, "every partition on one primary");
    o = opts_new();
    opt(o, DQ_OPT_LAYOUT, DQ_LAYOUT_COMPACT_PUSH);
    dq_client *cc = open_uri(uri, o);
    push_now(cc, "lq-compact", "c1", 60000);
    dq_options_free(o);
    o = opts_new();
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, "other"), 0);
    dq_client *co = open_uri(uri, o);
    push_now(co, "lq-elsewhere", "e1", 60000);
    dq_options_free(o);

    dq_queue_list *l = NULL;
    int n = dq_queues(cp, DQ_QUEUES_MAX, &l);
    CK_OK(n, cp, "dq_queues");
    ck_assert_int_eq(n, 14);
    ck_assert_int_eq(dq_queue_list_complete(l), 1);
    /* sorted: lq-0.. (digits sort before letters), lq-compact, lq-parted */
    for (size_t i = 1; i < (size_t)n; i++)
        ck_assert_msg(strcmp(listed(l, i - 1), listed(l, i)) < 0,
                      "not sorted: %s, %s", listed(l, i - 1), listed(l, i));
    for (int k = 0; k < 12; k++) {
        int found = 0;
        for (size_t i = 0; i < (size_t)n; i++)
            if (strcmp(listed(l, i), names[k]) == 0) {
                found = 1;
                ck_assert_int_eq(dq_queue_list_partitioned(l, i), 0);
            }
        ck_assert_msg(found, "queue %s not listed", names[k]);
    }
    ck_assert_str_eq(listed(l, 12), "lq-compact");
    ck_assert_str_eq(listed(l, 13), "lq-parted");
    ck_assert_int_eq(dq_queue_list_partitioned(l, 12), 0);
    ck_assert_int_eq(dq_queue_list_partitioned(l, 13), 1);
    dq_queue_list_free(l);
    /* the other namespace: its one queue */
    CK_RC(dq_queues(co, 10, &l), 1, co, "dq_queues other");
    ck_assert_str_eq(listed(l, 0), "lq-elsewhere");
    dq_queue_list_free(l);
    dq_close(c);
    dq_close(cp);
    dq_close(cc);
    dq_close(co);
    cluster_down();
}
END_TEST

/* dq_queues behind Sentinel: the queues of the primary the Sentinels
 * name, a partitioned one once. */
START_TEST(queues_sentinel) {
    char uri[512], puri[600];
    sentinel_up(1, "dqqueues", uri, sizeof(uri));
    snprintf(puri, sizeof(puri), "%s?partitions=4", uri);
    dq_client *c = open_uri(uri, NULL), *cp = open_uri(puri, NULL);
    push_now(c, "sq-plain", "j1", 60000);
    for (int i = 0; i < 8; i++) {
        char id[16];
        snprintf(id, sizeof(id), "p%d", i);
        push_now(cp, "sq-parted", id, 60000);
    }
    dq_queue_list *l = NULL;
    CK_RC(dq_queues(c, 10, &l), 2, c, "dq_queues");
    ck_assert_str_eq(listed(l, 0), "sq-parted");
    ck_assert_str_eq(listed(l, 1), "sq-plain");
    ck_assert_int_eq(dq_queue_list_partitioned(l, 0), 1);
    ck_assert_int_eq(dq_queue_list_partitioned(l, 1), 0);
    ck_assert_int_eq(dq_queue_list_complete(l), 1);
    dq_queue_list_free(l);
    dq_close(c);
    dq_close(cp);
    thc_sentinel_stop(&g_sn);
    g_sn_up = 0;
}
END_TEST

/* ---- 7. CLUSTER SLOTS when an ACL refuses CLUSTER SHARDS ---------------- */

/*
 * A user whose ACL grants CLUSTER SLOTS but not CLUSTER SHARDS (Redis
 * answers NOPERM): the client learns the slot map from CLUSTER SLOTS and
 * works on queues of every primary.  Shows the fallback against real
 * nodes (Redis 7 and Valkey 8 have CLUSTER SHARDS, so its "unknown
 * subcommand" only comes from servers before 7).
 */
START_TEST(slots_fallback) {
    char uri[512], curi[600];
    thc_cluster *cl = cluster_up(uri, sizeof(uri));
    for (int i = 0; i < cl->count; i++) {
        redisReply *r = node_cmd(cl, i,
                                 "ACL SETUSER dqslots on >pw-slots ~* &* "
                                 "+@all -cluster|shards");
        ck_assert_msg(r->type == REDIS_REPLY_STATUS, "ACL SETUSER: %s",
                      r->type == REDIS_REPLY_ERROR ? r->str : "odd reply");
        freeReplyObject(r);
    }
    /* What such a user is told. */
    redisContext *ctx = thc_connect(cl->nodes[0].r.port);
    ck_assert_ptr_nonnull(ctx);
    redisReply *r = redisCommand(ctx, "AUTH dqslots pw-slots");
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS, "AUTH failed");
    freeReplyObject(r);
    r = redisCommand(ctx, "CLUSTER SHARDS");
    ck_assert_ptr_nonnull(r);
    char refusal[200];
    snprintf(refusal, sizeof(refusal), "%s",
             r->type == REDIS_REPLY_ERROR ? r->str : "(not refused)");
    int refused = r->type == REDIS_REPLY_ERROR;
    freeReplyObject(r);
    redisFree(ctx);
    ck_assert_msg(refused, "CLUSTER SHARDS was not refused to dqslots");
    const char *scheme = "redis+cluster://";
    ck_assert(strncmp(uri, scheme, strlen(scheme)) == 0);
    snprintf(curi, sizeof(curi), "%sdqslots:pw-slots@%s", scheme,
             uri + strlen(scheme));
    long long slots0 = info_sum(cl, "commandstats", "cmdstat_cluster|slots",
                                "calls=");
    long long noperm0 = info_sum(cl, "errorstats", "errorstat_NOPERM",
                                 "count=");
    char names[12][32];
    int per[THC_MAX_NODES];
    pick_queues(cl, "sf", 1, names, per);
    dq_client *c = open_uri(curi, NULL);
    int done = 0;
    for (int i = 0; i < 12; i++) {
        push_now(c, names[i], "j", 0);
        check_stored(cl, names[i], 1, "j");
        dq_jobs *jobs = poll_exact(c, names[i], 1, 30000);
        ack_job(c, names[i], dq_jobs_at(jobs, 0));
        dq_jobs_free(jobs);
        ck_stats(c, names[i], 0, 0, 0, 0);
        done++;
    }
    long long slots1 = info_sum(cl, "commandstats", "cmdstat_cluster|slots",
                                "calls=");
    long long noperm1 = info_sum(cl, "errorstats", "errorstat_NOPERM",
                                 "count=");
    printf("figures: cluster_slots_fallback: shards_refusal=\"%s\" "
           "queues_ok=%d cluster_slots_calls=%lld noperm=%lld\n",
           refusal, done, slots1 - slots0, noperm1 - noperm0);
    fflush(stdout);
    ck_assert_msg(slots1 > slots0, "the client never asked CLUSTER SLOTS");
    ck_assert_msg(noperm1 > noperm0, "CLUSTER SHARDS was never refused");
    dq_close(c);
    cluster_down();
}
END_TEST

/* ---- 5. Sentinel announces a failover ---------------------------------- */

/* READONLY errors a server gave. */
static long long readonly_errors(int port) {
    return tu_info_at(port, "errorstats", "errorstat_READONLY", "count=");
}

/* A reply of one command on 127.0.0.1:port (fresh connection). */
static redisReply *port_cmd(int port, const char *fmt, ...) {
    redisContext *ctx = thc_connect(port);
    ck_assert_msg(ctx != NULL, "cannot connect to 127.0.0.1:%d", port);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "127.0.0.1:%d: %s: %s", port, fmt, ctx->errstr);
    redisFree(ctx);
    return r;
}

/* 1 if the server at port says ROLE master. */
static int port_is_master(int port) {
    redisReply *r = port_cmd(port, "ROLE");
    int yes = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
              r->element[0]->type == REDIS_REPLY_STRING &&
              strcmp(r->element[0]->str, "master") == 0;
    freeReplyObject(r);
    return yes;
}

/* Waits (at most ms) until somebody listens on a wake channel of q at
 * port; the ms it took, or -1. */
static int64_t wait_listener(int port, const char *q, int64_t ms) {
    int64_t t0 = th_mono_ms();
    while (th_mono_ms() - t0 < ms) {
        redisReply *r = port_cmd(port, "PUBSUB CHANNELS dq:{%s}:wake:*", q);
        size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
        freeReplyObject(r);
        if (n > 0)
            return th_mono_ms() - t0;
        th_sleep_ms(5);
    }
    return -1;
}

/* A dq_poll_wait of up to 40 s (its client's wait cap is longer), in a
 * thread: a wake-up is the only way it returns early. */
typedef struct long_waiter {
    dq_client *c;
    const char *q;
    int rc;
    volatile int done;
    int64_t done_us;
    char id[DQ_ID_BUF], token[DQ_TOKEN_BUF], err[256];
} long_waiter;

static void *long_wait_thread(void *arg) {
    long_waiter *w = arg;
    dq_jobs *jobs = NULL;
    w->rc = dq_poll_wait(w->c, w->q, 1, 30000, 40000, &jobs);
    w->done_us = th_mono_us();
    if (w->rc == 1) {
        const dq_job *j = dq_jobs_at(jobs, 0);
        snprintf(w->id, sizeof(w->id), "%s", dq_job_id(j));
        snprintf(w->token, sizeof(w->token), "%s", dq_job_token(j));
    } else {
        snprintf(w->err, sizeof(w->err), "%s", dq_errmsg(w->c));
    }
    dq_jobs_free(jobs);
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* A push with WAIT after a failover: 0, or DQ_EREPLICAS with the job
 * written (the new primary may have no replica yet).  Anything else is
 * counted in *bad (its message kept in bad_msg) for the verdict after the
 * figures line.  Returns rc. */
static char bad_msg[300];
static int push_landed(dq_client *c, const char *q, const char *id,
                       int *bad) {
    int oc = 0;
    int rc = dq_push(c, q, id, strlen(id), 0, id, DQ_PUSH_KEEP, NULL, 0, &oc);
    if (!(rc == 0 ||
          (rc == DQ_EREPLICAS && (oc == DQ_PUSHED || oc == DQ_KEPT)))) {
        (*bad)++;
        snprintf(bad_msg, sizeof(bad_msg), "push %s: %s (outcome %d): %s",
                 id, dq_errname(rc), oc, dq_errmsg(c));
    }
    return rc;
}

/* Polls and acks everything in q; returns how many jobs, failing on a
 * job seen twice (ids are unique per queue in this test). */
static long drain_count(dq_client *c, const char *q) {
    static char seen_ids[4000][DQ_ID_BUF];
    long n = 0;
    for (int round = 0; round < 100; round++) {
        dq_jobs *jobs = NULL;
        int rc = dq_poll(c, q, 1000, 60000, &jobs, NULL);
        CK_OK(rc, c, "poll (drain)");
        if (rc == 0)
            break;
        for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            for (long k = 0; k < n; k++)
                ck_assert_msg(strcmp(seen_ids[k], dq_job_id(j)) != 0,
                              "%s delivered twice", dq_job_id(j));
            ck_assert_int_lt(n, 4000);
            snprintf(seen_ids[n++], DQ_ID_BUF, "%s", dq_job_id(j));
            CK_RC(dq_ack(c, q, dq_job_id(j), dq_job_token(j)), 0, c, "ack");
        }
        dq_jobs_free(jobs);
    }
    return n;
}

/*
 * SENTINEL FAILOVER with the old primary kept alive: it stays a writable
 * primary for seconds (until a Sentinel turns it into a replica), so only
 * the Sentinels' +switch-master tells a client to leave it.  The next calls
 * of a plain and a partitioned client go to the new primary (the old one
 * runs no script of theirs and never answers READONLY), a consumer blocked
 * in dq_poll_wait (wait cap 60 s) subscribes at the new primary by itself
 * and is woken by a push there, and pushes with DQ_OPT_WAIT_REPLICAS land
 * throughout and are acknowledged again once the old primary replicates
 * the new one.  Every job is delivered once.
 */
START_TEST(sentinel_switch) {
    char uri[512], puri[600];
    sentinel_up(3, "dqswitch", uri, sizeof(uri));
    snprintf(puri, sizeof(puri), "%s?partitions=4", uri);
    const char *q = "sw-plain", *pq = "sw-part", *wq = "sw-wait";
    dq_options *o = failover_opts(1);
    dq_options *wo = opts_new();
    opt(wo, DQ_OPT_WAIT_CAP_MS, 60000);
    dq_client *c = open_uri(uri, o), *cp = open_uri(puri, o);
    dq_client *wc = open_uri(uri, wo);
    int pre_retries = push_before(c, q, cp, pq);

    int old = g_sn.primary, oport = g_sn.data[old].port;
    long_waiter w = {.c = wc, .q = wq};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, long_wait_thread, &w), 0);
    ck_assert_msg(wait_listener(oport, wq, 10000) >= 0,
                  "the waiter never subscribed at the primary");
    th_sleep_ms(150); /* polled once, asleep on its channel */
    long long calls0 = tu_script_calls_at(oport), ro0 = readonly_errors(oport);

    int64_t t0 = th_mono_ms();
    int np = thc_sentinel_failover(&g_sn, 0, 30000);
    int64_t fo_ms = th_mono_ms() - t0;
    ck_assert_msg(np >= 0 && np != old,
                  "thc_sentinel_failover failed (see stderr)");
    int nport = g_sn.data[np].port;
    int old_master = port_is_master(oport); /* still writable? */

    /* The next calls: the new primary, nothing at the old one. */
    int64_t t1 = th_mono_us();
    int bad = 0;
    int first_rc = push_landed(c, q, "after-0", &bad);
    int64_t first_push_us = th_mono_us() - t1;
    static char pids[50][16];
    static const char *pidv[50];
    static const void *ppl[50];
    static size_t plen[50];
    int outc[50];
    for (int i = 0; i < 50; i++) {
        snprintf(pids[i], sizeof(pids[i]), "pa-%d", i);
        pidv[i] = pids[i];
        ppl[i] = pids[i];
        plen[i] = strlen(pids[i]);
    }
    int rc = dq_push_batch(cp, pq, 50, ppl, plen, NULL, pidv, DQ_PUSH_KEEP,
                           NULL, outc);
    ck_assert_msg(rc == 0 || rc == DQ_EREPLICAS,
                  "partitioned push after the failover: %s: %s",
                  dq_errname(rc), dq_errmsg(cp));
    int64_t sched = -1;
    CK_RC(dq_stats(c, q, &sched, NULL, NULL, NULL, NULL), 0, c, "stats");
    long long calls1 = tu_script_calls_at(oport);
    redisReply *hx = port_cmd(nport, "HEXISTS dq:{%s}:jobs after-0", q);
    long long on_new = hx->type == REDIS_REPLY_INTEGER ? hx->integer : -1;
    freeReplyObject(hx);

    /* The waiter follows by itself: its wake channel moves to the new
     * primary, and a push there wakes it. */
    int64_t resub_ms = wait_listener(nport, wq, 10000);
    int64_t wake_ms = -1;
    if (resub_ms >= 0) {
        th_sleep_ms(150);
        int64_t tw = th_mono_us();
        push_landed(c, wq, "wake-1", &bad);
        for (int64_t end = th_mono_ms() + 5000;
             !__atomic_load_n(&w.done, __ATOMIC_SEQ_CST) && th_mono_ms() < end;)
            th_sleep_ms(2);
        if (__atomic_load_n(&w.done, __ATOMIC_SEQ_CST))
            wake_ms = (w.done_us - tw) / 1000;
    } else {
        push_landed(c, wq, "wake-1", &bad); /* ends the waiter */
    }
    pthread_join(th, NULL);
    if (w.rc == 1)
        CK_RC(dq_ack(wc, wq, w.id, w.token), 0, wc, "ack of the waiter");

    /* WAIT again: once the old primary replicates the new one (a
     * Sentinel demotes it within about 10 s), pushes return 0. */
    int64_t t2 = th_mono_ms();
    int nrep = 0, ereplicas = 0, acked = 0;
    while (th_mono_ms() - t2 < 30000 && nrep < 200) {
        char id[32];
        snprintf(id, sizeof(id), "rep-%d", nrep++);
        int prc = push_landed(c, q, id, &bad);
        if (prc == 0) {
            acked = 1;
            break;
        }
        ereplicas += prc == DQ_EREPLICAS;
        th_sleep_ms(100);
    }
    int64_t replicated_ms = th_mono_ms() - t2;
    /* The demoted primary closed its clients' links: a client that still
     * used it finds its link broken once (stats_settle); ours did not. */
    char smsg[512] = "";
    int settle = stats_settle(c, q, smsg, sizeof(smsg));
    int settle_p = settle < 0 ? -1 : stats_settle(cp, pq, smsg, sizeof(smsg));
    long got_q = -1, got_pq = -1, got_wq = -1;
    if (settle >= 0 && settle_p >= 0) {
        got_q = drain_count(c, q);
        got_pq = drain_count(cp, pq);
        got_wq = drain_count(c, wq);
    }
    long long ro1 = readonly_errors(oport);
    int old_replica = !port_is_master(oport);

    printf("figures: sentinel_switch: failover_ms=%" PRId64
           " old_primary_still_master=%d first_push_us=%" PRId64
           " first_push=%s script_calls_at_old_after=%lld "
           "readonly_at_old=%lld waiter_resubscribed_ms=%" PRId64
           " waiter_woken_ms=%" PRId64 " pushes_until_replicated=%d "
           "ereplicas=%d replicated_after_ms=%" PRId64
           " jobs=%ld/%ld/%ld old_now_replica=%d failed_pushes=%d "
           "settle_failures=%d wait_retries_before=%d\n",
           fo_ms, old_master, first_push_us, dq_errname(first_rc),
           calls1 - calls0, ro1 - ro0, resub_ms, wake_ms, nrep, ereplicas,
           replicated_ms, got_q, got_pq, got_wq, old_replica, bad,
           settle < 0 || settle_p < 0 ? -1 : settle + settle_p, pre_retries);
    fflush(stdout);
    ck_assert_msg(bad == 0, "%d pushes after the failover failed; the last: "
                  "%s", bad, bad_msg);
    ck_assert_msg(calls1 == calls0,
                  "%lld script calls reached the old primary 127.0.0.1:%d "
                  "after the failover", calls1 - calls0, oport);
    ck_assert_msg(on_new == 1, "after-0 is not on the new primary");
    ck_assert_msg(ro1 == ro0, "the old primary answered READONLY %lld times",
                  ro1 - ro0);
    ck_assert_msg(resub_ms >= 0,
                  "the waiter did not subscribe at the new primary within "
                  "10 s of the failover");
    ck_assert_msg(w.rc == 1 && strcmp(w.id, "wake-1") == 0,
                  "the waiter returned %d (%s): %s", w.rc, w.id, w.err);
    ck_assert_msg(wake_ms >= 0 && wake_ms < 1000,
                  "the waiter was woken %" PRId64 " ms after the push "
                  "(wait cap 60 s)", wake_ms);
    ck_assert_msg(acked, "no push acknowledged by a replica within 30 s of "
                  "the failover (%d tried)", nrep);
    ck_assert_msg(settle == 0 && settle_p == 0,
                  "calls failed after the failover: %s", smsg);
    ck_assert_int_eq(got_q, 300 + 1000 + 1 + nrep);
    ck_assert_int_eq(got_pq, 1200 + 50);
    ck_assert_int_eq(got_wq, 0); /* wake-1: the waiter's, acked */
    dq_close(c);
    dq_close(cp);
    dq_close(wc);
    dq_options_free(o);
    dq_options_free(wo);
    thc_sentinel_stop(&g_sn);
    g_sn_up = 0;
}
END_TEST

/* The primary's port as every live Sentinel of g_sn reports it, or -1
 * while they disagree. */
static int sentinels_agree(void) {
    int agreed = -2;
    for (int k = 0; k < g_sn.nsentinels; k++) {
        if (g_sn.sentinels[k].pid <= 0)
            continue;
        redisReply *r = port_cmd(g_sn.sentinels[k].port,
                                 "SENTINEL GET-MASTER-ADDR-BY-NAME %s",
                                 g_sn.master_name);
        int p = r->type == REDIS_REPLY_ARRAY && r->elements == 2
                    ? atoi(r->element[1]->str)
                    : -1;
        freeReplyObject(r);
        agreed = agreed == -2 || agreed == p ? p : -1;
    }
    return agreed;
}

/* Longest of n dq_stats calls on q, 10 ms apart (ms); fails on an error. */
static int64_t stats_calls(dq_client *c, const char *q, int n) {
    int64_t worst = 0;
    for (int i = 0; i < n; i++) {
        int64_t t = th_mono_us();
        int rc = dq_stats(c, q, NULL, NULL, NULL, NULL, NULL);
        CK_RC(rc, 0, c, "stats");
        if ((th_mono_us() - t) / 1000 > worst)
            worst = (th_mono_us() - t) / 1000;
        th_sleep_ms(10);
    }
    return worst;
}

/*
 * The Sentinel the client listens on dies: the next calls open the
 * subscription again on another Sentinel (without slowing them), and a
 * SENTINEL FAILOVER run by that one is followed as in sentinel_switch (no
 * script at the old primary, no READONLY).  Then every Sentinel dies: the
 * client keeps working on the primary it knows, each call still quick
 * (a reopen is tried at most every 100 ms doubling to 30 s, and
 * refused at once here).
 */
START_TEST(sentinel_resubscribe) {
    char uri[512];
    sentinel_up(3, "dqresub", uri, sizeof(uri));
    const char *q = "rs-q";
    dq_options *o = opts_new();
    opt(o, DQ_OPT_COMMAND_TIMEOUT_MS, 5000);
    dq_client *c = open_uri(uri, o);
    push_now(c, q, "j-0", 60000);
    /* The client listens on the first Sentinel that answered: the first. */
    th_proc_stop(g_sn.sentinels[0].pid, SIGKILL);
    g_sn.sentinels[0].pid = 0;
    int64_t worst_one_down = stats_calls(c, q, 30);

    int old = g_sn.primary, oport = g_sn.data[old].port;
    long long calls0 = tu_script_calls_at(oport), ro0 = readonly_errors(oport);
    int64_t t0 = th_mono_ms();
    int asked = 0;
    while (!asked && th_mono_ms() - t0 < 20000) {
        redisReply *r = port_cmd(g_sn.sentinels[1].port,
                                 "SENTINEL FAILOVER %s", g_sn.master_name);
        asked = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!asked)
            th_sleep_ms(200); /* no replica it can promote yet */
    }
    ck_assert_msg(asked, "SENTINEL FAILOVER refused for 20 s");
    int nport = -1;
    while (th_mono_ms() - t0 < 30000 &&
           ((nport = sentinels_agree()) <= 0 || nport == oport))
        th_sleep_ms(20);
    ck_assert_msg(nport > 0 && nport != oport,
                  "the Sentinels did not agree on a new primary in 30 s");
    int64_t fo_ms = th_mono_ms() - t0;
    for (int i = 0; i < g_sn.ndata; i++)
        if (g_sn.data[i].port == nport)
            g_sn.primary = i;
    int old_master = port_is_master(oport);
    push_now(c, q, "j-1", 60000);
    int64_t sched = 0;
    int rc = dq_stats(c, q, &sched, NULL, NULL, NULL, NULL);
    CK_RC(rc, 0, c, "stats after the failover");
    long long calls1 = tu_script_calls_at(oport);

    /* Every Sentinel gone: the known primary still serves. */
    for (int k = 1; k < g_sn.nsentinels; k++) {
        th_proc_stop(g_sn.sentinels[k].pid, SIGKILL);
        g_sn.sentinels[k].pid = 0;
    }
    int64_t t1 = th_mono_ms();
    int64_t worst_all_down = stats_calls(c, q, 50);
    for (int i = 2; i < 12; i++) {
        char id[16];
        snprintf(id, sizeof(id), "j-%d", i);
        push_now(c, q, id, 60000);
    }
    int64_t all_down_ms = th_mono_ms() - t1;
    int64_t sched2 = 0;
    rc = dq_stats(c, q, &sched2, NULL, NULL, NULL, NULL);
    CK_RC(rc, 0, c, "stats without Sentinels");
    long long ro1 = readonly_errors(oport);
    printf("figures: sentinel_resubscribe: worst_call_ms_one_sentinel_down=%"
           PRId64 " failover_ms=%" PRId64 " old_primary_still_master=%d "
           "script_calls_at_old_after=%lld readonly_at_old=%lld "
           "scheduled=%" PRId64 "/%" PRId64 " worst_call_ms_all_down=%" PRId64
           " all_down_ms=%" PRId64 "\n",
           worst_one_down, fo_ms, old_master, calls1 - calls0, ro1 - ro0,
           sched, sched2, worst_all_down, all_down_ms);
    fflush(stdout);
    ck_assert_msg(calls1 == calls0,
                  "%lld script calls reached the old primary after the "
                  "failover (the subscription was not reopened)",
                  calls1 - calls0);
    ck_assert_msg(ro1 == ro0, "the old primary answered READONLY");
    ck_assert_int_eq(sched, 2);
    ck_assert_int_eq(sched2, 12);
    ck_assert_msg(worst_one_down < 200 && worst_all_down < 200,
                  "calls took up to %" PRId64 " / %" PRId64 " ms with "
                  "Sentinels down", worst_one_down, worst_all_down);
    dq_close(c);
    dq_options_free(o);
    thc_sentinel_stop(&g_sn);
    g_sn_up = 0;
}
END_TEST

/* 1 if some client of the Sentinel at port is subscribed (CLIENT LIST). */
static int sentinel_has_subscriber(int port) {
    redisReply *r = port_cmd(port, "CLIENT LIST");
    int yes = r->type == REDIS_REPLY_STRING && strstr(r->str, " sub=1") != NULL;
    freeReplyObject(r);
    return yes;
}

/*
 * The Sentinel the client listens on hangs (SIGSTOP: the link stays open,
 * nothing comes): the client's calls go on without waiting for it, the
 * quiet subscription is checked with a PING (after 5 s) and, unanswered
 * within the command timeout, reopened on another Sentinel, which then
 * brings the +switch-master of a SENTINEL FAILOVER: no script runs at the
 * old primary after it.
 */
START_TEST(sentinel_hung) {
    char uri[512];
    sentinel_up(3, "dqhung", uri, sizeof(uri));
    const char *q = "hg-q";
    dq_options *o = opts_new();
    opt(o, DQ_OPT_COMMAND_TIMEOUT_MS, 2000);
    dq_client *c = open_uri(uri, o);
    push_now(c, q, "j-0", 60000);
    ck_assert_msg(sentinel_has_subscriber(g_sn.sentinels[0].port),
                  "the client does not listen on the first Sentinel");
    pid_t stopped = g_sn.sentinels[0].pid;
    ck_assert_int_eq(kill(stopped, SIGSTOP), 0);
    g_sn.sentinels[0].pid = 0; /* the harness asks only the others */
    /* Calls every 50 ms until another Sentinel has the subscription. */
    int64_t t0 = th_mono_ms(), worst = 0;
    int moved = 0, calls = 0;
    while (!moved && th_mono_ms() - t0 < 20000) {
        int64_t t = th_mono_us();
        int rc = dq_stats(c, q, NULL, NULL, NULL, NULL, NULL);
        CK_RC(rc, 0, c, "stats with a Sentinel hung");
        calls++;
        if ((th_mono_us() - t) / 1000 > worst)
            worst = (th_mono_us() - t) / 1000;
        th_sleep_ms(50);
        moved = sentinel_has_subscriber(g_sn.sentinels[1].port) ||
                sentinel_has_subscriber(g_sn.sentinels[2].port);
    }
    int64_t moved_ms = th_mono_ms() - t0;
    int old = g_sn.primary, oport = g_sn.data[old].port;
    long long calls0 = tu_script_calls_at(oport);
    int64_t t1 = th_mono_ms();
    int asked = 0;
    while (moved && !asked && th_mono_ms() - t1 < 20000) {
        redisReply *r = port_cmd(g_sn.sentinels[1].port,
                                 "SENTINEL FAILOVER %s", g_sn.master_name);
        asked = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!asked)
            th_sleep_ms(200);
    }
    int nport = -1;
    while (asked && th_mono_ms() - t1 < 30000 &&
           ((nport = sentinels_agree()) <= 0 || nport == oport))
        th_sleep_ms(20);
    for (int i = 0; i < g_sn.ndata; i++)
        if (g_sn.data[i].port == nport)
            g_sn.primary = i;
    int64_t fo_ms = th_mono_ms() - t1;
    int rc = -1;
    long long calls1 = calls0;
    if (nport > 0 && nport != oport) {
        char id[] = "j-1";
        int oc = 0;
        rc = dq_push(c, q, id, 3, 60000, id, 0, NULL, 0, &oc);
        calls1 = tu_script_calls_at(oport);
    }
    kill(stopped, SIGCONT);
    g_sn.sentinels[0].pid = stopped;
    printf("figures: sentinel_hung: resubscribed_after_ms=%" PRId64
           " calls_meanwhile=%d worst_call_ms=%" PRId64 " failover_ms=%"
           PRId64 " push_after=%s script_calls_at_old_after=%lld\n",
           moved_ms, calls, worst, fo_ms, rc == -1 ? "none" : dq_errname(rc),
           calls1 - calls0);
    fflush(stdout);
    ck_assert_msg(moved, "no other Sentinel got the subscription in 20 s");
    ck_assert_msg(moved_ms < 12000, "resubscribed only after %" PRId64 " ms "
                  "(quiet 5 s + PING 2 s + reopen)", moved_ms);
    ck_assert_msg(worst < 500, "a call took %" PRId64 " ms with a Sentinel "
                  "hung", worst);
    ck_assert_msg(nport > 0 && nport != oport,
                  "the failover did not complete in 30 s");
    ck_assert_msg(rc == 0, "push after the failover: %s: %s", dq_errname(rc),
                  dq_errmsg(c));
    ck_assert_msg(calls1 == calls0, "%lld script calls at the old primary",
                  calls1 - calls0);
    dq_close(c);
    dq_options_free(o);
    thc_sentinel_stop(&g_sn);
    g_sn_up = 0;
}
END_TEST

TEST_SUITE("cluster", TU_SRV_NONE,
    {"core_plain", core_plain, 120, NULL},
    {"core_partitioned", core_partitioned, 120, NULL},
    {"poll_wait_resubscribe", poll_wait_resubscribe, 90, NULL},
    {"ask_and_moved", ask_and_moved, 90, NULL},
    {"reshard_partitioned", reshard_partitioned, 150, NULL},
    {"reshard_plain", reshard_plain, 150, NULL},
    {"fair_migrate", fair_migrate, 150, NULL},
    {"failover", failover, 120, NULL},
    {"sentinel", sentinel, 120, NULL},
    {"sentinel_switch", sentinel_switch, 150, NULL},
    {"sentinel_resubscribe", sentinel_resubscribe, 120, NULL},
    {"sentinel_hung", sentinel_hung, 120, NULL},
    {"sync_consumer", sync_consumer, 120, NULL},
    {"queues_every_primary", queues_every_primary, 120, NULL},
    {"queues_sentinel", queues_sentinel, 90, NULL},
    {"slots_fallback", slots_fallback, 90, NULL})
