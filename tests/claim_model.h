/*
 * tests/claim_model.h - claiming checked against a reference model, shared
 * by the sync suite (test_claim_model.c) and the async one
 * (async/test_async_claim_model.c).
 *
 * Each round makes a queue with random limits (DQ_SET_MAX_INFLIGHT,
 * DQ_SET_GROUP_MAX_INFLIGHT, either or both may be unset) and jobs of the
 * groups "A" "B" "C" and none, of priorities 0, 3 and 7, due around now,
 * then runs random steps from a seeded PRNG: polls (max 1..6; a quarter of
 * them with a short lease whose holder "crashes" and never calls again,
 * a quarter with a short lease that runs out while its holder still works),
 * acks, nacks (a retry after a delay, or to dead), cancels, extends,
 * requeues of dead jobs, pushes, stale-token acks and nacks, and sleeps.
 * The model keeps every job's state in C: pending (due time, group,
 * priority, whether it is in its group's index), leased (deadline, token),
 * dead, done.  After each poll it checks what Redis handed out (a
 * partitioned queue: each partition's part of the answer, which is one
 * script call with its own clock, read from the lease deadlines):
 *  - due: every job was due at the poll's now (server clock: a job's lease
 *    deadline minus the lease), pending or a lease that ran out, with the
 *    due time and attempt the model expects and a token above its last;
 *  - limits: never more leased in a partition than its share of the
 *    queue-wide limit, never more of one group than its share of the
 *    group limit (also sampled from Redis after every step: ZCOUNT of the
 *    live leases is exactly the model's count);
 *  - priority, for one poll, per partition p and group g: let H be g's
 *    jobs in p due at the poll's now there (pending with due <= now, or
 *    leased with deadline <= now, due at the deadline) and R those of H
 *    handed out, in answer order; "better" is higher priority, then older
 *    due.  Relaxed: R's first is the best of H whenever fair.lua's picks
 *    promise it (every job of H in g's index, no hint entry in the way,
 *    g's turn read, g below its limit).  With CM_STRICT_PRIO_FILL (the
 *    default; the public promise of DQ_PUSHOPT_PRIORITY): R is in order
 *    and no job of H left behind is better than one of R, max jobs or
 *    not (H and R: jobs pending in due; leases that ran out and compact
 *    jobs are left to the share);
 *  - fairness (fair.lua's promise, per partition): let k be the groups
 *    with due jobs there in their index (jobs without a group being one
 *    group) and room under their group limit, and u 1 when jobs that no
 *    index holds are due there too (leases that ran out, jobs a compact
 *    layout holds outside due: they keep a turn of their own, the share
 *    of F.pick), else 0.  When the poll could take max_eff jobs there
 *    (its max less what earlier partitions gave, and the free slots)
 *    and max_eff >= k + u (and >= 2 with u), each of the k groups gets
 *    at least one, and so do the jobs no index holds unless one of them
 *    is of a group with a limit (its group's picks may use its room up).
 *    So with 100,000 jobs of A and one of B due together, B's is in a
 *    poll with max >= 2, or max >= 3 while leases ran out.  Relaxed
 *    where fair.lua says its index is a hint: a group whose index holds
 *    an entry due by then whose job left due (acked, cancelled, leased,
 *    moved into a compact bucket) may lose its turn in that poll, and
 *    when more groups have their turn than max_eff - u the turn order
 *    decides;
 *  - slots: at the end of a round every holder vanishes; once the last
 *    lease has ended nothing counts in flight (ZCOUNT, dq_group_stats),
 *    and the next poll takes as many as the limits allow;
 *  - every job is finished (acked or cancelled) exactly once, a retried
 *    ack of the finishing delivery still answers 0, an ack, nack or extend
 *    with a stale token is refused (DQ_ESTALE), and the queue is empty at
 *    the end.
 * Every job that enters due on a grouped queue is indexed (fair.lua), so
 * the strict checks are on by default: CM_STRICT_UNINDEXED holds jobs
 * requeued from dead to their group's promise like any other, allows no
 * excuse for an index entry whose job is still pending;
 * CM_STRICT_PRIO_FILL holds every job a group gets
 * to the priority promise, the fill from due included.  Build with either
 * defined to 0 for the relaxed check that the picks alone promise (env
 * DQ_MODEL_STRICT_UNINDEXED=1 and DQ_MODEL_STRICT_PRIO=1 turn them on
 * in such a build).  Leases that ran out and compact jobs are served by
 * the share (oldest first, not by group or priority): the checks hold
 * them to that only.  Under a group limit a poll whose first reads leave
 * room (the leases that ran out and the due jobs read of groups at their
 * limit dropped, the share kept for them unused) reads on, a bounded few
 * rounds (fair.lua, F.refill), so CM_STRICT_REFILL is on by default: the
 * first poll after the holders vanished takes all it could under a group
 * limit too (build with it defined to 0 to check that without a group
 * limit only; env DQ_MODEL_STRICT_REFILL=1 turns it on in such a build).
 * An extend of a lease that ran out but
 * was not claimed again brings it back (extend.lua) only if the limits have
 * room (refused, DQ_ESTALE, only when one is full), so CM_STRICT_EXTEND is
 * on by default too: the samples allow no lease above the limits (build
 * with it defined to 0 to allow those brought back by an extend).
 *
 * Seed: printed at the start and in every failure; DQ_MODEL_SEED=<n>
 * replays its choices (which jobs are due when still depends on timing).
 * Bounded: DQ_MODEL_ROUNDS rounds (default: the caller's) of at most
 * steps steps each, within DQ_MODEL_SECONDS (default: the caller's
 * limit); a longer run also needs CK_TIMEOUT_MULTIPLIER, e.g.
 *   DQ_MODEL_SECONDS=300 DQ_MODEL_ROUNDS=1000 CK_TIMEOUT_MULTIPLIER=4 \
 *       build/tests/test_claim_model
 */
#ifndef DQ_TEST_CLAIM_MODEL_H
#define DQ_TEST_CLAIM_MODEL_H

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delayq.h"
#include "harness.h"
#include "test_utils.h"

#ifndef CM_STRICT_UNINDEXED
#define CM_STRICT_UNINDEXED 1
#endif
#ifndef CM_STRICT_PRIO_FILL
#define CM_STRICT_PRIO_FILL 1
#endif
#ifndef CM_STRICT_EXTEND
#define CM_STRICT_EXTEND 1
#endif
#ifndef CM_STRICT_REFILL
#define CM_STRICT_REFILL 1
#endif

/* One job as a poll handed it out. */
typedef struct cm_got {
    char id[DQ_ID_BUF];
    char tok[DQ_TOKEN_BUF];
    int64_t attempt, due, deadline;
} cm_got;

/* The client under test, one call each; each returns what the
 * corresponding sync call returns. */
typedef struct cm_ops {
    int (*push)(void *cx, const char *q, const char *id,
                const dq_push_opts *o, int64_t at_ms);
    /* at most max jobs into got; their count or an error */
    int (*poll)(void *cx, const char *q, int max, int64_t lease_ms,
                cm_got *got);
    int (*ack)(void *cx, const char *q, const char *id, const char *tok);
    int (*nack)(void *cx, const char *q, const char *id, const char *tok,
                int64_t delay_ms, int flags);
    int (*cancel)(void *cx, const char *q, const char *id, int flags);
    int (*extend)(void *cx, const char *q, const char *id, const char *tok,
                  int64_t lease_ms, int64_t *deadline);
    int (*requeue)(void *cx, const char *q, const char *id,
                   int64_t delay_ms);
} cm_ops;

enum { CM_PEND = 1, CM_LEASE, CM_DEAD, CM_DONE };
enum { CM_MAXJ = 200, CM_NG = 4, CM_MAXP = 8, CM_POLLMAX = 64 };
static const char *const cm_gname[CM_NG] = {"", "A", "B", "C"};
static const int cm_levels[3] = {0, 3, 7};

/* Why a pending job is not in its group's index. */
enum { CM_IX = 0, CM_IX_EARLY, CM_IX_REQUEUED };

typedef struct cm_job {
    char id[DQ_ID_BUF];
    int g, prio, part, state;
    int64_t due, deadline, attempts;
    char tok[DQ_TOKEN_BUF];   /* current (or last) delivery's token */
    char old[DQ_TOKEN_BUF];   /* an earlier delivery's token, "" none */
    char acked[DQ_TOKEN_BUF]; /* the token whose ack finished it */
    int ix;                   /* pending: CM_IX or why not */
    int plain_new;            /* no options, never delivered: a compact
                                 layout may hold it outside due */
    int held;                 /* pending outside due (a compact bucket),
                                 as read before a poll */
    int crashed;              /* its holder never calls again */
    int revived;              /* leased by an extend of a lease that may
                                 have run out (CM_STRICT_EXTEND) */
    int finished;             /* times finished (must end at 1) */
} cm_job;

/* An index entry read before a poll. */
typedef struct cm_entry {
    int job; /* -1: an id the model does not know */
    int64_t score;
} cm_entry;

typedef struct cm_model {
    const cm_ops *o;
    void *cx;
    dq_client *obs; /* a sync client for settings and dq_get */
    redisContext *r;
    char q[128];
    unsigned seed;
    uint64_t x;
    int step, np, L, GL, flagged[CM_MAXP];
    cm_job j[CM_MAXJ];
    int n;
    cm_entry ent[CM_MAXP][CM_NG][CM_MAXJ];
    int nent[CM_MAXP][CM_NG];
    int64_t turns[CM_MAXP][CM_NG + 1];
    char tname[CM_MAXP][CM_NG + 1][8]; /* the groups of turns */
    int nturns[CM_MAXP];
    /* counts of what was checked, printed at the end */
    long polls, handed, fair_checked, fair_groups, fair_excused, prio_checked;
    long refilled; /* slots found free again after the holders vanished */
    char trace[3000];
} cm_model;

static int cm_env_flag(const char *name) {
    const char *v = getenv(name);
    return v != NULL && atoi(v) != 0;
}

static int cm_strict_unindexed(void) {
    return CM_STRICT_UNINDEXED || cm_env_flag("DQ_MODEL_STRICT_UNINDEXED");
}

static int cm_strict_prio(void) {
    return CM_STRICT_PRIO_FILL || cm_env_flag("DQ_MODEL_STRICT_PRIO");
}

static int cm_strict_refill(void) {
    return CM_STRICT_REFILL || cm_env_flag("DQ_MODEL_STRICT_REFILL");
}

static int cm_strict_extend(void) {
    return CM_STRICT_EXTEND || cm_env_flag("DQ_MODEL_STRICT_EXTEND");
}

static uint64_t cm_rnd(cm_model *m) {
    m->x ^= m->x >> 12;
    m->x ^= m->x << 25;
    m->x ^= m->x >> 27;
    return m->x * 2685821657736338717ULL;
}

static int cm_pick(cm_model *m, int n) {
    return n <= 0 ? 0 : (int)(cm_rnd(m) % (uint64_t)n);
}

static void cm_note(cm_model *m, const char *fmt, const char *id, long v) {
    char one[128];
    snprintf(one, sizeof(one), " %d:", m->step);
    size_t k = strlen(one);
    snprintf(one + k, sizeof(one) - k, fmt, id, v);
    size_t have = strlen(m->trace);
    if (have + strlen(one) + 1 >= sizeof(m->trace)) {
        memmove(m->trace, m->trace + 1000, have - 1000 + 1);
        have -= 1000;
    }
    memcpy(m->trace + have, one, strlen(one) + 1);
}

#define CM_CK(m, cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            char cm_msg_[1024];                                               \
            snprintf(cm_msg_, sizeof(cm_msg_), __VA_ARGS__);                  \
            ck_abort_msg("claim model: seed %u (DQ_MODEL_SEED=%u replays) "   \
                         "queue %s step %d: %s\nlast steps:%s", (m)->seed,    \
                         (m)->seed, (m)->q, (m)->step, cm_msg_, (m)->trace);  \
        }                                                                     \
    } while (0)

/* ---- the model's views ------------------------------------------------- */

static int cm_find(const cm_model *m, const char *id) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->j[i].id, id) == 0)
            return i;
    return -1;
}

/* A partition's share of a limit (config.lua: split evenly, at least 1). */
static int cm_share(const cm_model *m, int total, int p) {
    int s = total / m->np + (p < total % m->np ? 1 : 0);
    return s < 1 ? 1 : s;
}

/* Leases of partition p (of group g, -1: any) live at t; revived: only
 * those an extend brought back after they may have run out. */
static int cm_live_of(const cm_model *m, int p, int g, int64_t t,
                      int revived) {
    int k = 0;
    for (int i = 0; i < m->n; i++) {
        const cm_job *j = &m->j[i];
        k += j->state == CM_LEASE && j->part == p && j->deadline > t &&
             (g < 0 || j->g == g) && (!revived || j->revived);
    }
    return k;
}

static int cm_live(const cm_model *m, int p, int g, int64_t t) {
    return cm_live_of(m, p, g, t, 0);
}

/* What a limit allows in partition p at t beyond its share: the leases
 * that an extend brought back after they ran out, which no limit checks
 * today (strict: none). */
static int cm_over(const cm_model *m, int p, int g, int64_t t) {
    return cm_strict_extend() ? 0 : cm_live_of(m, p, g, t, 1);
}

/* The room of group g in partition p at t (INT32_MAX: not limited). */
static int cm_groom(const cm_model *m, int p, int g, int64_t t) {
    if (m->GL == 0 || g == 0)
        return INT32_MAX;
    return cm_share(m, m->GL, p) - cm_live(m, p, g, t);
}

/* Whether job j may be handed out at t, and the time it counts as due. */
static int cm_eligible(const cm_job *j, int64_t t, int64_t *due) {
    if (j->state == CM_PEND && j->due <= t) {
        *due = j->due;
        return 1;
    }
    if (j->state == CM_LEASE && j->deadline <= t) {
        *due = j->deadline;
        return 1;
    }
    return 0;
}

/* Whether an eligible job is one fair.lua's picks promise to serve: in
 * its group's index, pending in due (strict: requeued ones too; never
 * those pushed before the queue had groups, which fair.lua's fill
 * indexes later). */
static int cm_promised(const cm_job *j) {
    if (j->state != CM_PEND || j->held)
        return 0;
    if (cm_strict_unindexed())
        return j->ix != CM_IX_EARLY;
    return j->ix == CM_IX;
}

/* Whether an eligible job is one that no index holds and fair.lua's
 * share serves: a lease that ran out, or a job a compact layout holds
 * outside due. */
static int cm_unindexed(const cm_job *j) {
    return j->state == CM_LEASE || (j->state == CM_PEND && j->held);
}

/* Better: higher priority, then older due (a before b). */
static int cm_better(int pa, int64_t da, int pb, int64_t db) {
    return pa > pb || (pa == pb && da < db);
}

/* ---- Redis samples ------------------------------------------------------ */

static int cm_key_part(const cm_model *m, int p) {
    return m->np == 1 ? -1 : p;
}

/* Live leases of partition p at t, from Redis. */
static long long cm_redis_live(cm_model *m, int p, int64_t t) {
    char key[400];
    tu_part_key(key, sizeof(key), "dq", m->q, "lease", cm_key_part(m, p));
    redisReply *rep = th_cmd(m->r, "ZCOUNT %s (%lld +inf", key, (long long)t);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

/* After every step: Redis's live leases are exactly the model's, within
 * the limits. */
static void cm_sample(cm_model *m) {
    int64_t t = server_ms(m->r);
    for (int p = 0; p < m->np; p++) {
        long long got = cm_redis_live(m, p, t);
        int want = cm_live(m, p, -1, t);
        CM_CK(m, got == want, "partition %d: %lld live leases in Redis, "
              "the model holds %d", p, got, want);
        if (m->L > 0)
            CM_CK(m, got <= cm_share(m, m->L, p) + cm_over(m, p, -1, t),
                  "partition %d: %lld leased, limit %d (%d brought back by "
                  "an extend after they ran out)", p, got,
                  cm_share(m, m->L, p), cm_live_of(m, p, -1, t, 1));
        for (int g = 1; g < CM_NG && m->GL > 0; g++)
            CM_CK(m, cm_live(m, p, g, t) <=
                      cm_share(m, m->GL, p) + cm_over(m, p, g, t),
                  "partition %d: %d of group %s leased, limit %d (%d "
                  "brought back by an extend after they ran out)", p,
                  cm_live(m, p, g, t), cm_gname[g], cm_share(m, m->GL, p),
                  cm_live_of(m, p, g, t, 1));
    }
}

/* Reads reply entries (member, score pairs) of group g, partition p. */
static void cm_take_entries(cm_model *m, int p, int g, redisReply *rep) {
    for (size_t k = 0; k + 1 < rep->elements; k += 2) {
        if (m->nent[p][g] >= CM_MAXJ)
            return;
        cm_entry *e = &m->ent[p][g][m->nent[p][g]++];
        e->job = cm_find(m, rep->element[k]->str);
        e->score = strtoll(rep->element[k + 1]->str, NULL, 10);
    }
}

/* Before a poll on a compact layout: which pending jobs without options
 * are held outside due (j->held), one ZSCORE each, pipelined. */
static void cm_read_held(cm_model *m) {
    char key[400];
    int ask[CM_MAXJ], n = 0;
    for (int i = 0; i < m->n; i++) {
        m->j[i].held = 0;
        if (!tu_compact() || m->j[i].state != CM_PEND || !m->j[i].plain_new)
            continue;
        tu_part_key(key, sizeof(key), "dq", m->q, "due",
                    cm_key_part(m, m->j[i].part));
        redisAppendCommand(m->r, "ZSCORE %s %s", key, m->j[i].id);
        ask[n++] = i;
    }
    for (int k = 0; k < n; k++) {
        redisReply *rep = NULL;
        CM_CK(m, redisGetReply(m->r, (void **)&rep) == REDIS_OK &&
              rep != NULL, "reading due");
        m->j[ask[k]].held = rep->type == REDIS_REPLY_NIL;
        freeReplyObject(rep);
    }
}

/* Before a poll: every group's index entries and the turns (gq) of every
 * partition, in one pipeline. */
static void cm_read_index(cm_model *m) {
    char key[400], suf[32];
    cm_read_held(m);
    for (int p = 0; p < m->np; p++) {
        for (int g = 0; g < CM_NG; g++)
            for (int l = 0; l < 3; l++) {
                if (l)
                    snprintf(suf, sizeof(suf), "g%d:%s", cm_levels[l],
                             cm_gname[g]);
                else
                    snprintf(suf, sizeof(suf), "g:%s", cm_gname[g]);
                tu_part_key(key, sizeof(key), "dq", m->q, suf,
                            cm_key_part(m, p));
                redisAppendCommand(m->r, "ZRANGE %s 0 -1 WITHSCORES", key);
            }
        tu_part_key(key, sizeof(key), "dq", m->q, "gq", cm_key_part(m, p));
        redisAppendCommand(m->r, "ZRANGE %s 0 -1 WITHSCORES", key);
    }
    for (int p = 0; p < m->np; p++) {
        for (int g = 0; g < CM_NG; g++) {
            m->nent[p][g] = 0;
            for (int l = 0; l < 3; l++) {
                redisReply *rep = NULL;
                CM_CK(m, redisGetReply(m->r, (void **)&rep) == REDIS_OK &&
                      rep != NULL && rep->type == REDIS_REPLY_ARRAY,
                      "reading the index");
                cm_take_entries(m, p, g, rep);
                freeReplyObject(rep);
            }
        }
        redisReply *rep = NULL;
        CM_CK(m, redisGetReply(m->r, (void **)&rep) == REDIS_OK &&
              rep != NULL && rep->type == REDIS_REPLY_ARRAY, "reading gq");
        m->nturns[p] = 0;
        for (size_t k = 1; k < rep->elements && m->nturns[p] <= CM_NG;
             k += 2) {
            snprintf(m->tname[p][m->nturns[p]], sizeof(m->tname[p][0]),
                     "%s", rep->element[k - 1]->str);
            m->turns[p][m->nturns[p]++] =
                strtoll(rep->element[k]->str, NULL, 10);
        }
        freeReplyObject(rep);
    }
}

/* Whether group g of partition p may lose its turn in a poll by hi for
 * an entry of its index that fair.lua calls a hint: due by then, and its
 * job left due (or, not strict, may be held outside due or was moved
 * there without its index). */
static int cm_excused(const cm_model *m, int p, int g, int64_t hi) {
    for (int k = 0; k < m->nent[p][g]; k++) {
        const cm_entry *e = &m->ent[p][g][k];
        if (e->score > hi)
            continue;
        if (e->job < 0 || m->j[e->job].state != CM_PEND ||
            m->j[e->job].held)
            return 1; /* left due: dropped when read */
        const cm_job *j = &m->j[e->job];
        if (cm_strict_unindexed())
            continue;
        if (j->due != e->score || j->ix != CM_IX)
            return 1;
    }
    return 0;
}

/* Groups of partition p whose turn has come by hi. */
static int cm_turns_come(const cm_model *m, int p, int64_t hi) {
    int k = 0;
    for (int i = 0; i < m->nturns[p]; i++)
        k += m->turns[p][i] <= hi + 1;
    return k;
}

/* ---- a poll, checked ---------------------------------------------------- */

/* What one poll handed out, by partition. */
typedef struct cm_poll {
    int max, n, crash;
    int64_t lease, lo, hi;
    cm_got got[CM_POLLMAX];
    int job[CM_POLLMAX];
    int seg[CM_MAXP];     /* jobs handed out from partition p */
    int before[CM_MAXP];  /* jobs handed out before p's: its ask was
                             max - before[p] */
    int64_t now[CM_MAXP]; /* its clock; -1: gave nothing */
} cm_poll;

/* Job k of the answer: known, due at the poll's now, with the due time,
 * attempt and a token the model expects; its partition's part of the
 * answer in one piece. */
static void cm_check_got(cm_model *m, cm_poll *P, int k, int *last) {
    const cm_got *g = &P->got[k];
    int i = cm_find(m, g->id);
    CM_CK(m, i >= 0, "poll handed out %s, a job never pushed", g->id);
    for (int e = 0; e < k; e++)
        CM_CK(m, P->job[e] != i, "poll handed out %s twice", g->id);
    P->job[k] = i;
    const cm_job *j = &m->j[i];
    int p = j->part;
    int64_t now = g->deadline - P->lease, due = 0;
    CM_CK(m, now >= P->lo && now <= P->hi, "%s: its lease deadline %" PRId64
          " less the lease %" PRId64 " is not within the poll's clock [%"
          PRId64 ", %" PRId64 "]", g->id, g->deadline, P->lease, P->lo,
          P->hi);
    if (P->seg[p] == 0) {
        CM_CK(m, *last != p && P->now[p] < 0, "partition %d's jobs are not "
              "in one piece", p);
        P->now[p] = now, P->before[p] = k;
    }
    CM_CK(m, P->now[p] == now, "%s: two clocks in one partition's answer",
          g->id);
    *last = p;
    P->seg[p]++;
    CM_CK(m, cm_eligible(j, now, &due), "%s handed out at %" PRId64
          " but it is %s (due %" PRId64 ", lease deadline %" PRId64 ")",
          g->id, now,
          j->state == CM_PEND    ? "pending, not due yet"
          : j->state == CM_LEASE ? "leased, its lease not over"
          : j->state == CM_DEAD  ? "dead"
                                 : "finished",
          j->due, j->deadline);
    CM_CK(m, g->due == due, "%s: due %" PRId64 ", the model says %" PRId64,
          g->id, g->due, due);
    CM_CK(m, g->attempt == j->attempts + 1, "%s: attempt %" PRId64
          ", want %" PRId64, g->id, g->attempt, j->attempts + 1);
    CM_CK(m, j->tok[0] == '\0' ||
          strtoll(g->tok, NULL, 10) > strtoll(j->tok, NULL, 10),
          "%s: token %s not above its last %s", g->id, g->tok, j->tok);
}

/* Jobs of group g (-1: any) handed out from partition p. */
static int cm_count(const cm_model *m, const cm_poll *P, int p, int g) {
    int k = 0;
    for (int e = 0; e < P->n; e++) {
        const cm_job *j = &m->j[P->job[e]];
        k += j->part == p && (g < 0 || j->g == g);
    }
    return k;
}

/* No more than the free slots of a partition and of each group. */
static void cm_check_limits(cm_model *m, const cm_poll *P, int p) {
    int64_t now = P->now[p];
    if (m->L > 0) {
        int room = cm_share(m, m->L, p) - cm_live(m, p, -1, now);
        CM_CK(m, P->seg[p] <= (room > 0 ? room : 0), "partition %d: %d "
              "handed out with %d slots free", p, P->seg[p], room);
    }
    for (int g = 1; g < CM_NG && m->GL > 0; g++) {
        /* a lease an extend brought back may have left the group's lease
         * index (fair.lua trims entries whose deadline passed): it is not
         * counted there (strict: it must be) */
        int room = cm_groom(m, p, g, now) + cm_over(m, p, g, now);
        int got = cm_count(m, P, p, g);
        CM_CK(m, got <= (room > 0 ? room : 0), "partition %d: %d of group "
              "%s handed out with %d of its slots free", p, got, cm_gname[g],
              room);
    }
}

/* How many the poll could take in partition p by its clock t: its ask,
 * and the free slots (-1: not known to be visited). */
static int cm_ask(const cm_poll *P, int p) {
    if (P->seg[p] == 0 && P->n >= P->max)
        return -1;
    return P->seg[p] > 0 ? P->max - P->before[p] : P->max - P->n;
}

static int cm_max_eff(const cm_model *m, const cm_poll *P, int p, int64_t t) {
    int ask = cm_ask(P, p);
    if (ask < 0)
        return -1;
    if (m->L > 0) {
        int room = cm_share(m, m->L, p) - cm_live(m, p, -1, t);
        if (room < ask)
            ask = room;
    }
    return ask;
}

/* The best due job of group g in partition p at t (-1: none), and
 * whether every due one of them is promised (in the index). */
static int cm_best(const cm_model *m, int p, int g, int64_t t, int *all) {
    int best = -1;
    int64_t bd = 0, d = 0;
    *all = 1;
    for (int i = 0; i < m->n; i++) {
        const cm_job *j = &m->j[i];
        if (j->part != p || j->g != g || !cm_eligible(j, t, &d))
            continue;
        *all &= cm_promised(j);
        if (best < 0 || cm_better(j->prio, d, m->j[best].prio, bd))
            best = i, bd = d;
    }
    return best;
}

/* On a failed check: partition p's due jobs at t, its index
 * entries and turns as read before the poll, to stderr. */
static void cm_dump(const cm_model *m, const cm_poll *P, int p, int64_t t) {
    int64_t d;
    fprintf(stderr, "partition %d at %" PRId64 ", %d handed out there:\n",
            p, t, P->seg[p]);
    for (int i = 0; i < m->n; i++) {
        const cm_job *j = &m->j[i];
        if (j->part == p && cm_eligible(j, t, &d))
            fprintf(stderr, "  %s group '%s' prio %d state %d due %" PRId64
                    " ix %d plain %d\n", j->id, cm_gname[j->g], j->prio,
                    j->state, d, j->ix, j->plain_new);
    }
    for (int g = 0; g < CM_NG; g++)
        for (int k = 0; k < m->nent[p][g]; k++)
            fprintf(stderr, "  index '%s': %s at %" PRId64 "\n", cm_gname[g],
                    m->ent[p][g][k].job < 0 ? "?"
                                            : m->j[m->ent[p][g][k].job].id,
                    m->ent[p][g][k].score);
    for (int e = 0; e < P->n; e++)
        fprintf(stderr, "  out %s group '%s' prio %d\n", P->got[e].id,
                cm_gname[m->j[P->job[e]].g], m->j[P->job[e]].prio);
    for (int k = 0; k < m->nturns[p]; k++)
        fprintf(stderr, "  turn '%s' %" PRId64 "\n", m->tname[p][k],
                m->turns[p][k]);
}

/* Strict: group g's jobs handed out from partition p are the best of its
 * due jobs there, in order (of those the picks promise: cm_promised). */
static void cm_check_prefix(cm_model *m, const cm_poll *P, int p, int g) {
    int64_t t = P->now[p], dr = 0, dh = 0, dprev = 0;
    int prev = -1;
    for (int e = 0; e < P->n; e++) {
        const cm_job *r = &m->j[P->job[e]];
        if (r->part != p || r->g != g || !cm_promised(r))
            continue;
        cm_eligible(r, t, &dr);
        CM_CK(m, prev < 0 || !cm_better(r->prio, dr, m->j[prev].prio, dprev),
              "group '%s': %s (priority %d, due %" PRId64 ") handed out "
              "after %s (priority %d, due %" PRId64 ")", cm_gname[g], r->id,
              r->prio, dr, m->j[prev].id, m->j[prev].prio, dprev);
        prev = P->job[e], dprev = dr;
        for (int i = 0; i < m->n; i++) {
            const cm_job *h = &m->j[i];
            int out = 0;
            for (int f = 0; f < P->n; f++)
                out |= P->job[f] == i;
            if (out || h->part != p || h->g != g ||
                !cm_eligible(h, t, &dh) || !cm_promised(h))
                continue;
            if (cm_better(h->prio, dh, r->prio, dr))
                cm_dump(m, P, p, t);
            CM_CK(m, !cm_better(h->prio, dh, r->prio, dr), "group '%s': %s "
                  "(priority %d, due %" PRId64 ") handed out while %s "
                  "(priority %d, due %" PRId64 ") was left at %" PRId64,
                  cm_gname[g], r->id, r->prio, dr, h->id, h->prio, dh, t);
        }
    }
}

/* Jobs of partition p due at t that no index holds (cm_unindexed); of
 * those, in *sure, the ones fair.lua's share must take: their group has
 * no limit (F.admit keeps them; a group's picks may use its room up). */
static int cm_unindexed_due(const cm_model *m, int p, int64_t t, int *sure) {
    int64_t d;
    int k = 0;
    *sure = 0;
    for (int i = 0; i < m->n; i++) {
        const cm_job *j = &m->j[i];
        if (j->part != p || !cm_eligible(j, t, &d) || !cm_unindexed(j))
            continue;
        k++;
        *sure += cm_groom(m, p, j->g, t) == INT32_MAX;
    }
    return k;
}

/* Jobs handed out from partition p that no index held. */
static int cm_count_unindexed(const cm_model *m, const cm_poll *P, int p) {
    int k = 0;
    for (int e = 0; e < P->n; e++) {
        const cm_job *j = &m->j[P->job[e]];
        k += j->part == p && cm_unindexed(j);
    }
    return k;
}

/* The jobs no index holds, a turn of their own (the share): 1 when the
 * poll in partition p (clock within [lo, hi]) may find one, else 0. */
static int cm_share_turn(const cm_model *m, int p, int64_t hi) {
    int sure = 0;
    return cm_unindexed_due(m, p, hi, &sure) > 0;
}

/* Priorities within group g in partition p: its first job handed out is
 * its best due job whenever the picks promise it (every due job of the
 * group in its index, the group read and not at its limit); strict: all
 * of them (cm_check_prefix). */
static void cm_check_prio(cm_model *m, const cm_poll *P, int p, int g) {
    int64_t t = P->now[p], d = 0, db = 0;
    int first = -1;
    for (int e = 0; e < P->n && first < 0; e++)
        if (m->j[P->job[e]].part == p && m->j[P->job[e]].g == g)
            first = P->job[e];
    if (first < 0)
        return;
    if (cm_strict_prio()) {
        m->prio_checked++;
        cm_check_prefix(m, P, p, g);
        return;
    }
    int all = 0, best = cm_best(m, p, g, t, &all);
    if (!all || cm_excused(m, p, g, t) ||
        cm_turns_come(m, p, t) + cm_share_turn(m, p, t) >
            cm_max_eff(m, P, p, t))
        return;
    m->prio_checked++;
    cm_eligible(&m->j[first], t, &d);
    cm_eligible(&m->j[best], t, &db);
    CM_CK(m, !cm_better(m->j[best].prio, db, m->j[first].prio, d),
          "group '%s' in partition %d: first handed out %s (priority %d, "
          "due %" PRId64 "), its best due job is %s (priority %d, due %"
          PRId64 ") at %" PRId64, cm_gname[g], p, m->j[first].id,
          m->j[first].prio, d, m->j[best].id, m->j[best].prio, db, t);
}

/* The ids handed out, for messages. */
static void cm_list(const cm_poll *P, char *buf, size_t n) {
    buf[0] = '\0';
    for (int e = 0; e < P->n; e++) {
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, " %s", P->got[e].id);
    }
}

/* Fairness in partition p (fair.lua's promise): k groups have promised
 * due jobs there and room, u is 1 when jobs no index holds (leases that
 * ran out, compact jobs) are due too, which take a turn of their own (a
 * share of at least one slot of a poll with max >= 2); when the poll
 * could take max_eff >= k + u (and >= 2 with u), each of the k groups
 * gets one, and so do the jobs no index holds when none of them is of
 * a group with a limit (a group that fair.lua's hints may cost
 * its turn excused, and every group when more turns came than max_eff
 * less u). */
static void cm_check_fair(cm_model *m, const cm_poll *P, int p) {
    int64_t lo = P->seg[p] > 0 ? P->now[p] : P->lo;
    int64_t hi = P->seg[p] > 0 ? P->now[p] : P->hi;
    int meff = cm_max_eff(m, P, p, lo), in[CM_NG] = {0}, k = 0, all = 0;
    for (int g = 0; g < CM_NG; g++) {
        int b = cm_best(m, p, g, lo, &all);
        int promised = 0;
        for (int i = 0; b >= 0 && i < m->n; i++) {
            int64_t d;
            const cm_job *j = &m->j[i];
            promised |= j->part == p && j->g == g && cm_eligible(j, lo, &d) &&
                        cm_promised(j);
        }
        in[g] = promised && cm_groom(m, p, g, lo) > 0;
        k += in[g];
    }
    int u = cm_share_turn(m, p, hi), sure = 0;
    int nu = cm_unindexed_due(m, p, hi, &sure);
    int need = k + u < 2 && u ? 2 : k + u;
    if (k + u == 0 || meff < need)
        return;
    if (cm_turns_come(m, p, hi) + u > meff) {
        m->fair_excused += k;
        return;
    }
    m->fair_checked++;
    char ids[400]; /* the first few: the message holds 1 KiB */
    cm_list(P, ids, sizeof(ids));
    if (nu == sure && cm_unindexed_due(m, p, lo, &sure) > 0) {
        m->fair_groups++;
        if (cm_count_unindexed(m, P, p) == 0)
            cm_dump(m, P, p, lo);
        CM_CK(m, cm_count_unindexed(m, P, p) > 0, "fairness: partition %d, "
              "%d groups with due jobs and room and jobs no index holds "
              "(leases that ran out, compact jobs), the poll could take %d "
              "there (max %d), but none of the latter; handed out:%s", p, k,
              meff, P->max, ids);
    }
    for (int g = 0; g < CM_NG; g++) {
        if (!in[g])
            continue;
        if (cm_excused(m, p, g, hi)) {
            m->fair_excused++;
            continue;
        }
        m->fair_groups++;
        if (cm_count(m, P, p, g) == 0)
            cm_dump(m, P, p, lo);
        CM_CK(m, cm_count(m, P, p, g) > 0, "fairness: partition %d, %d "
              "groups with due jobs and room%s, the poll could take %d there "
              "(max %d), but group '%s' got nothing; handed out:%s", p, k,
              u ? " and jobs no index holds" : "", meff, P->max,
              cm_gname[g], ids);
    }
}

/* Copies a token (dst: DQ_TOKEN_BUF bytes; the two may be one job's). */
static void cm_tokcpy(char *dst, const char *src) {
    size_t n = strlen(src);
    if (n >= DQ_TOKEN_BUF)
        n = DQ_TOKEN_BUF - 1;
    memmove(dst, src, n);
    dst[n] = '\0';
}

/* The model after the poll: its jobs are leased. */
static void cm_apply_poll(cm_model *m, const cm_poll *P) {
    for (int e = 0; e < P->n; e++) {
        cm_job *j = &m->j[P->job[e]];
        if (j->tok[0] != '\0')
            cm_tokcpy(j->old, j->tok);
        cm_tokcpy(j->tok, P->got[e].tok);
        j->state = CM_LEASE;
        j->deadline = P->got[e].deadline;
        j->attempts = P->got[e].attempt;
        j->crashed = P->crash;
        j->revived = 0;
        j->plain_new = 0, j->held = 0;
    }
    m->handed += P->n;
}

/* Polls max jobs for lease_ms and checks the answer against the model. */
static void cm_poll_checked(cm_model *m, cm_poll *P, int max,
                            int64_t lease_ms, int crash) {
    memset(P, 0, sizeof(*P));
    P->max = max, P->lease = lease_ms, P->crash = crash;
    for (int p = 0; p < CM_MAXP; p++)
        P->now[p] = -1;
    cm_read_index(m);
    P->lo = server_ms(m->r);
    P->n = m->o->poll(m->cx, m->q, max, lease_ms, P->got);
    P->hi = server_ms(m->r);
    cm_note(m, "poll%s=%ld", crash ? "!" : "", P->n);
    CM_CK(m, P->n >= 0 && P->n <= max, "poll (max %d): %d", max, P->n);
    int last = -1;
    for (int k = 0; k < P->n; k++)
        cm_check_got(m, P, k, &last);
    for (int p = 0; p < m->np; p++) {
        if (P->seg[p] > 0)
            cm_check_limits(m, P, p);
        for (int g = 0; g < CM_NG && P->seg[p] > 0; g++)
            cm_check_prio(m, P, p, g);
        cm_check_fair(m, P, p);
    }
    cm_apply_poll(m, P);
    m->polls++;
}

/* ---- the other operations ------------------------------------------------ */

static void cm_finish(cm_model *m, cm_job *j, const char *tok) {
    CM_CK(m, j->finished == 0, "%s finished twice", j->id);
    j->finished++;
    j->state = CM_DONE;
    cm_tokcpy(j->acked, tok);
}

/* A random job in state st (0: any; CM_LEASE: a live holder's), or -1. */
static int cm_any(cm_model *m, int st) {
    int c[CM_MAXJ], k = 0;
    for (int i = 0; i < m->n; i++)
        if ((st == 0 || m->j[i].state == st) &&
            !(st == CM_LEASE && m->j[i].crashed))
            c[k++] = i;
    return k == 0 ? -1 : c[cm_pick(m, k)];
}

/* The due time Redis gave job j (dq_get), within [lo, hi]. */
static int64_t cm_due_of(cm_model *m, const cm_job *j, int64_t lo,
                         int64_t hi) {
    dq_job_info *in = NULL;
    int rc = dq_get(m->obs, m->q, j->id, &in);
    CM_CK(m, rc == 1, "get %s: %d", j->id, rc);
    int st = dq_job_info_state(in);
    int64_t due = dq_job_info_due_ms(in);
    dq_job_info_free(in);
    CM_CK(m, st == DQ_JOB_SCHEDULED || st == DQ_JOB_DUE, "%s: state %d, "
          "want pending", j->id, st);
    CM_CK(m, due >= lo && due <= hi, "%s: due %" PRId64 ", want within [%"
          PRId64 ", %" PRId64 "]", j->id, due, lo, hi);
    return due;
}

/* A live holder's job whose lease has run out by t, or -1. */
static int cm_any_late(cm_model *m, int64_t t) {
    int c[CM_MAXJ], k = 0;
    for (int i = 0; i < m->n; i++)
        if (m->j[i].state == CM_LEASE && !m->j[i].crashed &&
            m->j[i].deadline <= t)
            c[k++] = i;
    return k == 0 ? -1 : c[cm_pick(m, k)];
}

/* A live holder's job, half the time one whose lease ran out (it is
 * still the holder's until a poll claims the job again), or -1. */
static int cm_holder(cm_model *m) {
    int i = cm_pick(m, 2) ? cm_any_late(m, server_ms(m->r)) : -1;
    return i >= 0 ? i : cm_any(m, CM_LEASE);
}

static void cm_ack(cm_model *m) {
    int i = cm_holder(m);
    if (i < 0)
        return;
    cm_job *j = &m->j[i];
    int rc = m->o->ack(m->cx, m->q, j->id, j->tok);
    cm_note(m, "ack %s=%ld", j->id, rc);
    CM_CK(m, rc == 0, "ack of %s with its current token: %d", j->id, rc);
    cm_finish(m, j, j->tok);
    if (cm_pick(m, 4) == 0) { /* a retried ack of the same delivery */
        rc = m->o->ack(m->cx, m->q, j->id, j->tok);
        CM_CK(m, rc == 0, "retried ack of %s: %d", j->id, rc);
    }
}

/* An ack, nack or extend with a token that is not the job's current one:
 * refused, nothing changes. */
static void cm_stale(cm_model *m) {
    int i = cm_any(m, 0);
    if (i < 0)
        return;
    cm_job *j = &m->j[i];
    const char *tok = j->old[0] ? j->old : j->tok;
    if (tok[0] == '\0' || (j->state == CM_LEASE && tok == j->tok))
        return;
    int what = cm_pick(m, 3), rc, want = DQ_ESTALE;
    if (j->state == CM_DONE) { /* ack only: the done record answers */
        what = 0;
        want = j->acked[0] == '\0'          ? DQ_ENOTFOUND /* cancelled */
               : strcmp(tok, j->acked) == 0 ? 0
                                            : DQ_ESTALE;
    }
    if (what == 0)
        rc = m->o->ack(m->cx, m->q, j->id, tok);
    else if (what == 1)
        rc = m->o->nack(m->cx, m->q, j->id, tok, 0, 0);
    else
        rc = m->o->extend(m->cx, m->q, j->id, tok, 1000, NULL);
    cm_note(m, "stale %s=%ld", j->id, rc);
    CM_CK(m, rc == want, "%s of %s (state %d) with a stale token: %d, "
          "want %d", what == 0 ? "ack" : what == 1 ? "nack" : "extend",
          j->id, j->state, rc, want);
}

static void cm_nack(cm_model *m) {
    int i = cm_holder(m);
    if (i < 0)
        return;
    cm_job *j = &m->j[i];
    int dead = cm_pick(m, 10) < 3;
    int64_t delay = cm_pick(m, 3) == 0 ? 0 : 1 + cm_pick(m, 300);
    int64_t lo = server_ms(m->r);
    int rc = m->o->nack(m->cx, m->q, j->id, j->tok, delay,
                        dead ? DQ_NACK_DEAD : 0);
    int64_t hi = server_ms(m->r);
    cm_note(m, dead ? "nack_dead %s=%ld" : "nack %s=%ld", j->id, rc);
    CM_CK(m, rc == dead, "nack%s of %s: %d", dead ? " to dead" : "", j->id,
          rc);
    cm_tokcpy(j->old, j->tok);
    if (dead) {
        j->state = CM_DEAD;
        return;
    }
    j->state = CM_PEND;
    j->due = cm_due_of(m, j, lo + delay, hi + delay);
    j->ix = m->flagged[j->part] ? CM_IX : CM_IX_EARLY;
}

static void cm_cancel(cm_model *m) {
    int i = cm_any(m, 0);
    if (i < 0)
        return;
    cm_job *j = &m->j[i];
    int fl = cm_pick(m, 2) ? DQ_CANCEL_INFLIGHT : 0;
    int rc = m->o->cancel(m->cx, m->q, j->id, fl);
    cm_note(m, fl ? "cancel_all %s=%ld" : "cancel %s=%ld", j->id, rc);
    int want = j->state == CM_PEND    ? DQ_CANCELED_PENDING
               : j->state == CM_LEASE ? (fl ? DQ_CANCELED_INFLIGHT
                                            : DQ_CANCEL_BUSY)
                                      : 0;
    CM_CK(m, rc == want, "cancel of %s (state %d): %d, want %d", j->id,
          j->state, rc, want);
    if (want == DQ_CANCELED_PENDING || want == DQ_CANCELED_INFLIGHT) {
        if (j->state == CM_LEASE)
            cm_tokcpy(j->old, j->tok);
        cm_finish(m, j, "");
    }
}

/* Whether a limit of job j's partition (or of its group there) had no
 * room at lo for j, whose lease ran out by the extend's clock: extend.lua
 * then refuses to bring it back (the live leases only end after lo). */
static int cm_full(const cm_model *m, const cm_job *j, int64_t lo) {
    int self = j->deadline > lo; /* counted at lo, not by then */
    if (m->L > 0 && cm_live(m, j->part, -1, lo) - self >=
                        cm_share(m, m->L, j->part))
        return 1;
    return j->g != 0 && cm_groom(m, j->part, j->g, lo) + self <= 0;
}

static void cm_extend(cm_model *m) {
    int i = cm_holder(m);
    if (i < 0)
        return;
    cm_job *j = &m->j[i];
    int64_t lease = 200 + cm_pick(m, 1300), dl = 0;
    int64_t lo = server_ms(m->r);
    int rc = m->o->extend(m->cx, m->q, j->id, j->tok, lease, &dl);
    int64_t hi = server_ms(m->r);
    cm_note(m, "extend %s=%ld", j->id, rc);
    /* a lease that ran out takes a slot anew: refused while none is free,
     * and nothing changes */
    if (rc == DQ_ESTALE && j->deadline <= hi && cm_full(m, j, lo))
        return;
    CM_CK(m, rc == 0, "extend of %s: %d", j->id, rc);
    j->revived |= j->deadline <= hi; /* it may have run out */
    CM_CK(m, dl >= lo + lease && dl <= hi + lease, "extend of %s: deadline %"
          PRId64 ", want within [%" PRId64 ", %" PRId64 "]", j->id, dl,
          lo + lease, hi + lease);
    j->deadline = dl;
}

static void cm_requeue(cm_model *m) {
    int i = cm_any(m, CM_DEAD);
    if (i < 0)
        return;
    cm_job *j = &m->j[i];
    int64_t delay = cm_pick(m, 2) ? 0 : cm_pick(m, 200);
    int64_t lo = server_ms(m->r);
    int rc = m->o->requeue(m->cx, m->q, j->id, delay);
    int64_t hi = server_ms(m->r);
    cm_note(m, "requeue %s=%ld", j->id, rc);
    CM_CK(m, rc == 1, "requeue of dead %s: %d", j->id, rc);
    j->state = CM_PEND;
    j->attempts = 0;
    j->due = cm_due_of(m, j, lo + delay, hi + delay);
    j->ix = CM_IX_REQUEUED;
}

/* Pushes a new job of group g and priority prio due at offset ms from the
 * server's now, id "<base><n>" or given. */
static void cm_push(cm_model *m, int g, int prio, int64_t offset,
                    const char *id) {
    if (m->n >= CM_MAXJ)
        return;
    cm_job *j = &m->j[m->n];
    memset(j, 0, sizeof(*j));
    if (id != NULL)
        snprintf(j->id, sizeof(j->id), "%s", id);
    else
        snprintf(j->id, sizeof(j->id), "j%d", m->n);
    j->g = g, j->prio = prio, j->part = tu_part_of(j->id, m->np);
    j->due = server_ms(m->r) + offset;
    dq_push_opts *o = dq_push_opts_new();
    CM_CK(m, o != NULL, "push opts");
    if (g > 0)
        dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, cm_gname[g]);
    if (prio > 0)
        dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, prio);
    int rc = m->o->push(m->cx, m->q, j->id, g || prio ? o : NULL, j->due);
    dq_push_opts_free(o);
    cm_note(m, "push %s=%ld", j->id, rc);
    CM_CK(m, rc == DQ_PUSHED, "push of %s: %d", j->id, rc);
    j->state = CM_PEND;
    j->ix = m->flagged[j->part] || g || prio ? CM_IX : CM_IX_EARLY;
    j->plain_new = !g && !prio;
    if (g || prio)
        m->flagged[j->part] = 1;
    m->n++;
}

static int cm_rand_prio(cm_model *m) {
    int x = cm_pick(m, 20);
    return x < 12 ? 0 : x < 17 ? cm_levels[1] : cm_levels[2];
}

static void cm_push_random(cm_model *m) {
    cm_push(m, cm_pick(m, CM_NG), cm_rand_prio(m), -100 + cm_pick(m, 500),
            NULL);
}

/* One random step. */
static void cm_step(cm_model *m) {
    int x = cm_pick(m, 100);
    cm_poll P;
    if (x < 34) {
        /* a holder that crashes, one too slow for its lease (it still
         * acks, nacks or extends, late), or one in time */
        int kind = cm_pick(m, 8), crash = kind < 2;
        int64_t lease = crash ? 80 + cm_pick(m, 170)
                        : kind < 4 ? 15 + cm_pick(m, 60)
                                   : 600 + cm_pick(m, 900);
        cm_poll_checked(m, &P, 1 + cm_pick(m, 6), lease, crash);
    } else if (x < 54)
        cm_ack(m);
    else if (x < 66)
        cm_nack(m);
    else if (x < 72)
        cm_cancel(m);
    else if (x < 77)
        cm_extend(m);
    else if (x < 82)
        cm_requeue(m);
    else if (x < 88)
        cm_stale(m);
    else if (x < 95)
        cm_push_random(m);
    else
        th_sleep_ms(10 + cm_pick(m, 50));
}

/* ---- a round ---------------------------------------------------------------- */

static void cm_set(cm_model *m, int s, int64_t v) {
    int rc = dq_config_set(m->obs, m->q, 1, &s, &v);
    CM_CK(m, rc == 0, "config set %d=%" PRId64 ": %d %s", s, v, rc,
          dq_errmsg(m->obs));
}

/* Before the holders vanish: more due work than the slots, and holders
 * with short leases take what they can. */
static void cm_fill_up(cm_model *m) {
    int want = 3 * (m->L > 0 ? m->L : 6 * m->np);
    for (int i = 0; i < want && m->n < CM_MAXJ; i++)
        cm_push(m, cm_pick(m, CM_NG), cm_rand_prio(m), -50, NULL);
    cm_poll P;
    for (int k = 0; k < 12; k++) {
        cm_poll_checked(m, &P, 6, 150 + cm_pick(m, 150), 1);
        cm_sample(m);
        if (P.n == 0)
            break;
    }
}

/* Holders vanish; once the last lease has ended nothing counts in flight
 * (Redis and dq_group_stats), and the next poll takes as many as the
 * limits allow: no slot leaked. */
static void cm_vanish(cm_model *m) {
    int64_t last = 0;
    for (int i = 0; i < m->n; i++)
        if (m->j[i].state == CM_LEASE) {
            m->j[i].crashed = 1;
            if (m->j[i].deadline > last)
                last = m->j[i].deadline;
        }
    int64_t now;
    while ((now = server_ms(m->r)) <= last)
        th_sleep_ms(last - now + 1 < 50 ? last - now + 1 : 50);
    for (int p = 0; p < m->np; p++)
        CM_CK(m, cm_redis_live(m, p, now) == 0, "partition %d: leases "
              "live after the last deadline", p);
    dq_group_list *l = NULL;
    CM_CK(m, dq_group_stats(m->obs, m->q, 10, &l) >= 0, "group stats: %s",
          dq_errmsg(m->obs));
    for (size_t i = 0; i < dq_group_list_count(l); i++)
        CM_CK(m, dq_group_list_inflight(l, i) == 0, "group '%s': %" PRId64
              " in flight after every lease ended",
              dq_group_list_name(l, i), dq_group_list_inflight(l, i));
    dq_group_list_free(l);
}

/* The due jobs of partition p at t that a poll may take at once, under the
 * group limit. */
static int cm_avail(const cm_model *m, int p, int64_t t) {
    int per[CM_NG] = {0}, k = 0;
    int64_t d;
    for (int i = 0; i < m->n; i++)
        if (m->j[i].part == p && cm_eligible(&m->j[i], t, &d))
            per[m->j[i].g]++;
    for (int g = 0; g < CM_NG; g++) {
        int room = cm_groom(m, p, g, t);
        k += per[g] < room ? per[g] : room;
    }
    return k;
}

/* The first poll after the holders vanished takes, in each partition it
 * visits, as many as its ask, the limit and the due jobs allow (under a
 * group limit: strict). */
static void cm_refill(cm_model *m) {
    cm_poll P;
    int max = m->L > 0 ? m->L : 40;
    int64_t t = server_ms(m->r);
    int want[CM_MAXP];
    for (int p = 0; p < m->np; p++)
        want[p] = cm_avail(m, p, t);
    cm_poll_checked(m, &P, max, 30000, 0);
    if (m->GL > 0 && !cm_strict_refill())
        return;
    for (int p = 0; p < m->np; p++) {
        int ask = cm_ask(&P, p), w = want[p];
        if (ask < 0)
            continue;
        if (m->L > 0 && cm_share(m, m->L, p) < w)
            w = cm_share(m, m->L, p); /* every slot free before the poll */
        w = w < ask ? w : ask;
        if (P.seg[p] < w)
            cm_dump(m, &P, p, t);
        CM_CK(m, P.seg[p] >= w, "after every lease ended, partition %d gave "
              "%d of the %d it could", p, P.seg[p], w);
        m->refilled += w;
    }
}

/* Every job finished: requeue the dead, poll and ack until none is left,
 * then the queue is empty. */
static void cm_drain(cm_model *m) {
    cm_poll P;
    for (int it = 0; it < 500; it++) {
        int left = 0;
        for (int i = 0; i < m->n; i++)
            left += m->j[i].state != CM_DONE;
        if (left == 0)
            break;
        int i;
        while ((i = cm_any(m, CM_DEAD)) >= 0)
            cm_requeue(m);
        cm_poll_checked(m, &P, 20, 30000, 0);
        while ((i = cm_any(m, CM_LEASE)) >= 0)
            cm_ack(m);
        if (P.n == 0)
            th_sleep_ms(20);
        cm_sample(m);
        m->step++;
    }
    for (int i = 0; i < m->n; i++)
        CM_CK(m, m->j[i].state == CM_DONE && m->j[i].finished == 1,
              "%s: state %d, finished %d times at the end", m->j[i].id,
              m->j[i].state, m->j[i].finished);
    int64_t s[5];
    stats5(m->obs, m->q, s);
    CM_CK(m, s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0, "queue not "
          "empty at the end: %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64,
          s[0], s[1], s[2], s[3]);
}

/* One round on queue "<base>-<round>"; returns the steps run. */
static int cm_round(cm_model *m, const char *base, int round, int steps,
                    int64_t end) {
    snprintf(m->q, sizeof(m->q), "%s-%d", base, round);
    m->n = 0, m->step = 0, m->trace[0] = '\0';
    memset(m->flagged, 0, sizeof(m->flagged));
    /* the limits: both, the queue-wide one, the group one, none, in turn
     * from a random start */
    int kind = (round + (int)(m->seed % 4)) % 4;
    m->L = kind < 2 ? 2 * m->np + cm_pick(m, 3 * m->np) : 0;
    m->GL = kind % 3 == 0 ? m->np + cm_pick(m, 2 * m->np) : 0;
    if (m->L > 0)
        cm_set(m, DQ_SET_MAX_INFLIGHT, m->L);
    if (m->GL > 0)
        cm_set(m, DQ_SET_GROUP_MAX_INFLIGHT, m->GL);
    char id[DQ_ID_BUF];
    for (int p = 0; p < m->np; p++) /* every partition gets groups first */
        cm_push(m, 1 + cm_pick(m, CM_NG - 1), cm_rand_prio(m), -200,
                tu_id_in(id, sizeof(id), "f", p));
    for (int i = 0; i < 40; i++)
        cm_push_random(m);
    for (m->step = 0; m->step < steps && th_mono_ms() < end; m->step++) {
        cm_step(m);
        cm_sample(m);
    }
    int ran = m->step;
    cm_fill_up(m);
    cm_vanish(m);
    cm_refill(m);
    cm_drain(m);
    fprintf(stderr, "claim model: queue %s limit %d group limit %d: %d "
            "steps, %d jobs\n", m->q, m->L, m->GL, ran, m->n);
    return ran;
}

/* The seed: DQ_MODEL_SEED, else the clock. */
static unsigned cm_seed(void) {
    const char *v = getenv("DQ_MODEL_SEED");
    if (v != NULL && *v)
        return (unsigned)strtoul(v, NULL, 10);
    return (unsigned)wall_us();
}

/* Runs the rounds (DQ_MODEL_ROUNDS, default rounds) of steps steps within
 * DQ_MODEL_SECONDS (default limit_s); returns the steps run. */
static int cm_run(cm_model *m, const cm_ops *o, void *cx, const char *base,
                  int rounds, int steps, int limit_s) {
    const char *v = getenv("DQ_MODEL_ROUNDS");
    if (v != NULL && atoi(v) > 0)
        rounds = atoi(v);
    v = getenv("DQ_MODEL_SECONDS");
    if (v != NULL && atoi(v) > 0)
        limit_s = atoi(v);
    m->o = o, m->cx = cx, m->np = tu_parts();
    ck_assert_int_le(m->np, CM_MAXP);
    m->seed = cm_seed();
    m->x = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)m->seed * 7919u + 1);
    fprintf(stderr, "claim model: seed %u (replay: DQ_MODEL_SEED=%u), "
            "strict unindexed %d, priority %d, extend %d, refill %d\n",
            m->seed, m->seed, cm_strict_unindexed(), cm_strict_prio(),
            cm_strict_extend(), cm_strict_refill());
    int64_t t0 = th_mono_ms(), end = t0 + (int64_t)limit_s * 1000;
    int total = 0, r;
    for (r = 0; r < rounds && th_mono_ms() < end; r++)
        total += cm_round(m, base, r, steps, end);
    fprintf(stderr, "claim model: seed %u: %d rounds, %d steps, %ld polls, "
            "%ld jobs handed out, fairness checked in %ld polls for %ld "
            "groups (%ld excused), priority checked %ld times, %ld slots "
            "back after holders vanished, %" PRId64 " ms\n", m->seed, r,
            total, m->polls, m->handed, m->fair_checked, m->fair_groups,
            m->fair_excused, m->prio_checked, m->refilled,
            th_mono_ms() - t0);
    return total;
}

/* A test's whole run: the model with its own observers (a sync client,
 * a hiredis link) over the client cx under test; at least 100 steps and
 * some fairness checked. */
static void cm_test(const cm_ops *o, void *cx, const char *base, int rounds,
                    int steps, int limit_s) {
    static cm_model m;
    memset(&m, 0, sizeof(m));
    m.obs = open_client();
    m.r = rconn();
    int ran = cm_run(&m, o, cx, base, rounds, steps, limit_s);
    ck_assert_int_ge(ran, 100);
    ck_assert_int_gt(m.fair_groups, 0);
    dq_close(m.obs);
    redisFree(m.r);
}

#endif
