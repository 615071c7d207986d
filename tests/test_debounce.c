/*
 * tests/test_debounce.c - DQ_PUSH_DEBOUNCE with DQ_PUSHOPT_DEBOUNCE_MAX_MS:
 * an unknown id is created, a pending one takes the latest payload and a
 * due time moved to now + delay but never past first push + max wait, a
 * running one keeps exactly one follow-up that the ack starts; never
 * DQ_DONE; batches; bad input refused before anything is sent; and many
 * producers (threads and processes) pushing one id while consumers run:
 * at most one pending instance and one follow-up at any moment, every push
 * served by a delivery after it, within the max wait on the server's
 * clock (the suite runs again partitioned and on the compact layouts).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_suite.h"
#include "test_utils.h"

/* One debounced push of a text payload; returns the outcome. */
static int dpush(dq_client *c, const char *q, const char *id, const char *pl,
                 int64_t delay, int64_t max_ms) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, max_ms),
                     0);
    int oc = 0;
    int rc = dq_push_ex(c, q, pl, strlen(pl), delay, id, DQ_PUSH_DEBOUNCE, o,
                        NULL, 0, &oc);
    dq_push_opts_free(o);
    ck_assert_msg(rc == 0, "debounced push: %d %s", rc, dq_errmsg(c));
    return oc;
}

/* The job's due time and payload (it must exist). */
static int64_t due_of(dq_client *c, const char *q, const char *id, char *pl,
                      size_t n) {
    dq_job_info *in = NULL;
    ck_assert_int_eq(dq_get(c, q, id, &in), 1);
    size_t len = 0;
    const char *p = dq_job_info_payload(in, &len);
    snprintf(pl, n, "%.*s", (int)len, p);
    int64_t due = dq_job_info_due_ms(in);
    dq_job_info_free(in);
    return due;
}

/* Pending: latest payload wins, due moves with each push, capped at the
 * first push + max wait. */
START_TEST(pending_moves_capped) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    int64_t t0 = server_ms(r);
    ck_assert_int_eq(dpush(c, Q, "d1", "a", 200, 1000), DQ_DEBOUNCE_CREATED);
    int64_t t1 = server_ms(r);
    char pl[16];
    int64_t due = due_of(c, Q, "d1", pl, sizeof(pl));
    ck_assert(due >= t0 + 200 && due <= t1 + 200);
    th_sleep_ms(50);
    ck_assert_int_eq(dpush(c, Q, "d1", "b", 200, 1000), DQ_DEBOUNCE_MOVED);
    int64_t due2 = due_of(c, Q, "d1", pl, sizeof(pl));
    ck_assert_str_eq(pl, "b");
    ck_assert_msg(due2 >= due + 50, "due %lld did not move from %lld",
                  (long long)due2, (long long)due);
    /* a long delay is capped at the first push's deadline */
    ck_assert_int_eq(dpush(c, Q, "d1", "c", 600000, 1000), DQ_DEBOUNCE_MOVED);
    int64_t due3 = due_of(c, Q, "d1", pl, sizeof(pl));
    ck_assert_str_eq(pl, "c");
    ck_assert_msg(due3 >= t0 + 1000 && due3 <= t1 + 1000,
                  "due %lld, want the deadline %lld..%lld", (long long)due3,
                  (long long)(t0 + 1000), (long long)(t1 + 1000));
    ck_stats(c, Q, 1, 0, 0, 0);
    /* no max wait: no cap */
    ck_assert_int_eq(dpush(c, Q, "d2", "x", 600000, 0), DQ_DEBOUNCE_CREATED);
    int64_t d2 = due_of(c, Q, "d2", pl, sizeof(pl));
    ck_assert(d2 >= t0 + 600000);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* Polls the one job of q now; its token and payload. */
static void take1(dq_client *c, const char *q, char *tok, char *pl,
                  size_t n) {
    dq_jobs *jobs = poll_until(c, q, 1, 60000, 3000);
    ck_assert_ptr_nonnull(jobs);
    const dq_job *j = dq_jobs_at(jobs, 0);
    size_t len = 0;
    const char *p = dq_job_payload(j, &len);
    snprintf(pl, n, "%.*s", (int)len, p);
    snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(j));
    dq_jobs_free(jobs);
}

/* In flight: pushes coalesce into one follow-up, started by the ack with
 * the latest payload; a nack for a retry keeps both. */
START_TEST(followup_after_ack) {
    dq_client *c = open_client();
    char tok[DQ_TOKEN_BUF], pl[16];
    ck_assert_int_eq(dpush(c, Q, "f1", "v1", 0, 1000), DQ_DEBOUNCE_CREATED);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "v1");
    ck_assert_int_eq(dpush(c, Q, "f1", "v2", 0, 1000), DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(dpush(c, Q, "f1", "v3", 0, 1000), DQ_DEBOUNCE_FOLLOWUP);
    ck_stats(c, Q, 0, 0, 1, 0);
    /* a nack for a retry: the same run again, then the follow-up */
    ck_assert_int_eq(dq_nack(c, Q, "f1", tok, 0, 0), 0);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "v1");
    ck_assert_int_eq(dpush(c, Q, "f1", "v4", 0, 1000), DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(dq_ack(c, Q, "f1", tok), 0);
    ck_stats(c, Q, 0, 1, 0, 0);
    dq_jobs *jobs = poll_one(c, Q, 60000);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_str_eq(dq_job_payload(j, NULL), "v4");
    ck_assert_int_eq(dq_job_attempt(j), 1);
    char tok2[DQ_TOKEN_BUF];
    snprintf(tok2, sizeof(tok2), "%s", dq_job_token(j));
    dq_jobs_free(jobs);
    /* the first delivery's retried ack still answers 0 */
    ck_assert_int_eq(dq_ack(c, Q, "f1", tok), 0);
    ck_assert_int_eq(dq_ack(c, Q, "f1", tok2), 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    /* never done: the acked id is created again */
    ck_assert_int_eq(dpush(c, Q, "f1", "v5", 0, 1000), DQ_DEBOUNCE_CREATED);
    /* a keep push after a plain ack is a retry, as for any job */
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_int_eq(dq_ack(c, Q, "f1", tok), 0);
    ck_assert_int_eq(push_text(c, Q, "k", 0, "f1", DQ_PUSH_KEEP, NULL),
                     DQ_DONE);
    dq_close(c);
}
END_TEST

/* dq_get's view of the id's follow-up: its earliest due time, 0 none. */
static int64_t followup_of(dq_client *c, const char *q, const char *id) {
    dq_job_info *in = NULL;
    ck_assert_int_eq(dq_get(c, q, id, &in), 1);
    int64_t fu = dq_job_info_followup_ms(in);
    dq_job_info_free(in);
    return fu;
}

/* The follow-up of a run waits for the later of the ack and last push +
 * delay, capped by its first push + max wait; dq_get shows it waiting. */
START_TEST(followup_due) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    char tok[DQ_TOKEN_BUF], pl[16];
    ck_assert_int_eq(dpush(c, Q, "g1", "v1", 0, 300), DQ_DEBOUNCE_CREATED);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_int_eq(followup_of(c, Q, "g1"), 0);
    int64_t t0 = server_ms(r);
    ck_assert_int_eq(dpush(c, Q, "g1", "v2", 100000, 300),
                     DQ_DEBOUNCE_FOLLOWUP);
    int64_t t1 = server_ms(r);
    int64_t fu = followup_of(c, Q, "g1");
    ck_assert_msg(fu >= t0 + 300 && fu <= t1 + 300, "follow-up shown due "
                  "%lld, want %lld..%lld", (long long)fu,
                  (long long)(t0 + 300), (long long)(t1 + 300));
    ck_assert_int_eq(dq_job_info_followup_ms(NULL), 0);
    ck_assert_int_eq(dq_ack(c, Q, "g1", tok), 0);
    ck_assert_int_eq(followup_of(c, Q, "g1"), 0);
    int64_t due = due_of(c, Q, "g1", pl, sizeof(pl));
    ck_assert_str_eq(pl, "v2");
    ck_assert_msg(due >= t0 + 300 && due <= t1 + 300, "follow-up due %lld, "
                  "want %lld..%lld", (long long)due, (long long)(t0 + 300),
                  (long long)(t1 + 300));
    /* more pushes to the pending follow-up keep its deadline */
    ck_assert_int_eq(dpush(c, Q, "g1", "v3", 100000, 300), DQ_DEBOUNCE_MOVED);
    ck_assert_int_eq(due_of(c, Q, "g1", pl, sizeof(pl)), due);
    /* a short delay after a slow run: due at the ack */
    ck_assert_int_eq(dq_cancel(c, Q, "g1", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(dpush(c, Q, "g2", "w1", 0, 300), DQ_DEBOUNCE_CREATED);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_int_eq(dpush(c, Q, "g2", "w2", 10, 300), DQ_DEBOUNCE_FOLLOWUP);
    th_sleep_ms(400);
    int64_t a0 = server_ms(r);
    ck_assert_int_eq(dq_ack(c, Q, "g2", tok), 0);
    int64_t a1 = server_ms(r);
    due = due_of(c, Q, "g2", pl, sizeof(pl));
    ck_assert(due >= a0 && due <= a1);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* Dead and cancelled: a debounced push of a dead id starts anew; a cancel
 * drops a running job's follow-up with it. */
START_TEST(dead_and_cancel) {
    dq_client *c = open_client();
    char tok[DQ_TOKEN_BUF], pl[16];
    ck_assert_int_eq(dpush(c, Q, "h1", "v1", 0, 0), DQ_DEBOUNCE_CREATED);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_int_eq(dpush(c, Q, "h1", "v2", 0, 0), DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(dq_nack_reason(c, Q, "h1", tok, 0, DQ_NACK_DEAD, "x", 1),
                     1);
    ck_assert_int_eq(dpush(c, Q, "h1", "v3", 0, 0), DQ_DEBOUNCE_CREATED);
    ck_stats(c, Q, 0, 1, 0, 0);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "v3");
    char why[DQ_REASON_MAX + 1];
    int state = 0;
    ck_assert_int_eq(tu_last_error(c, Q, "h1", why, &state), -1);
    ck_assert_int_eq(dpush(c, Q, "h1", "v4", 0, 0), DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(dq_cancel(c, Q, "h1", DQ_CANCEL_INFLIGHT),
                     DQ_CANCELED_INFLIGHT);
    ck_stats(c, Q, 0, 0, 0, 0);
    /* a dead run keeps its follow-up: requeued, it runs, then the
     * follow-up */
    ck_assert_int_eq(dpush(c, Q, "h2", "w1", 0, 0), DQ_DEBOUNCE_CREATED);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_int_eq(dpush(c, Q, "h2", "w2", 0, 0), DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(dq_nack(c, Q, "h2", tok, 0, DQ_NACK_DEAD), 1);
    ck_assert_int_eq(dq_dead_requeue(c, Q, "h2", 0), 1);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "w1");
    ck_assert_int_eq(dq_ack(c, Q, "h2", tok), 0);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_str_eq(pl, "w2");
    ck_assert_int_eq(dq_ack(c, Q, "h2", tok), 0);
    /* a purge drops a dead run's follow-up with it */
    ck_assert_int_eq(dpush(c, Q, "h3", "u1", 0, 0), DQ_DEBOUNCE_CREATED);
    take1(c, Q, tok, pl, sizeof(pl));
    ck_assert_int_eq(dpush(c, Q, "h3", "u2", 0, 0), DQ_DEBOUNCE_FOLLOWUP);
    ck_assert_int_eq(dq_nack(c, Q, "h3", tok, 0, DQ_NACK_DEAD), 1);
    ck_assert_int_eq(dq_dead_purge(c, Q, "h3"), 1);
    ck_stats(c, Q, 0, 0, 0, 0);
    redisContext *r = rconn();
    ck_assert_int_eq(tu_job_fields(r, "dq", Q), 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* Batches: an id twice in a call applies in order; all three outcomes
 * count. */
START_TEST(batch) {
    dq_client *c = open_client();
    const void *pl[3] = {"a1", "a2", "b1"};
    size_t lens[3] = {2, 2, 2};
    const char *ids[3] = {"a", "a", "b"};
    int64_t delays[3] = {1000, 1000, 1000};
    int ocs[3] = {0, 0, 0};
    ck_assert_int_eq(dq_push_batch_ex(c, Q, 3, pl, lens, delays, ids,
                                      DQ_PUSH_DEBOUNCE, NULL, NULL, ocs),
                     3);
    ck_assert_int_eq(ocs[0], DQ_DEBOUNCE_CREATED);
    ck_assert_int_eq(ocs[1], DQ_DEBOUNCE_MOVED);
    ck_assert_int_eq(ocs[2], DQ_DEBOUNCE_CREATED);
    char p[16];
    due_of(c, Q, "a", p, sizeof(p));
    ck_assert_str_eq(p, "a2");
    ck_stats(c, Q, 2, 0, 0, 0);
    dq_close(c);
}
END_TEST

/* Refused before anything is sent. */
START_TEST(bad_input) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    push_text(c, Q, "warm", 0, NULL, 0, NULL);
    long long before = commands_processed(r);
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, -1),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, 100), 0);
    tu_bad(c, dq_push_ex(c, Q, "x", 1, 0, NULL, DQ_PUSH_DEBOUNCE, o, NULL, 0,
                         NULL),
           DQ_EINVAL, "id");
    tu_bad(c, dq_push_ex(c, Q, "x", 1, 0, "i", DQ_PUSH_DEBOUNCE | DQ_PUSH_AT,
                         o, NULL, 0, NULL),
           DQ_EINVAL, "DQ_PUSH_AT");
    tu_bad(c, dq_push_ex(c, Q, "x", 1, 0, "i", DQ_PUSH_KEEP, o, NULL, 0, NULL),
           DQ_EINVAL, "DQ_PUSH_DEBOUNCE");
    tu_bad(c, dq_push(c, Q, "x", 1, 0, "i", DQ_PUSH_DEBOUNCE | DQ_PUSH_REPLACE,
                      NULL, 0, NULL),
           DQ_EINVAL, "flags");
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 1000), 0);
    tu_bad(c, dq_push_ex(c, Q, "x", 1, 0, "i", DQ_PUSH_DEBOUNCE, o, NULL, 0,
                         NULL),
           DQ_EINVAL, "repeat");
    dq_push_opts_free(o);
    tu_nothing_sent(r, before);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* ---- many producers, one id ---- */

#define C_PUSHES 4000     /* at most, and for at most C_PUSH_SECONDS */
#define C_PUSH_SECONDS 10 /* a sanitizer build on a loaded machine makes
                             about 100 pushes a second */
#define C_DELAY 50
#define C_WAIT 150
#define C_SLACK_US 400000 /* a loaded 2-core machine's scheduling */
#define C_LEASE 30000

typedef struct cpush {
    int64_t ts, tr; /* sent, answered (us, CLOCK_MONOTONIC) */
    int64_t ss, sr; /* the server's TIME (ms) just before and just after */
    int oc;
} cpush;

typedef struct cdeliv {
    int64_t claim;  /* poll answered (us) */
    int64_t sclaim; /* the poll's server time (ms): lease deadline - lease */
    int seq;        /* the payload: the push's number */
} cdeliv;

typedef struct cshared {
    atomic_int next;       /* the next push number */
    int64_t until_us;      /* no push starts after (CLOCK_MONOTONIC) */
    cpush p[C_PUSHES];
} cshared;

typedef struct cctx {
    cshared *sh;
    const char *q;
    atomic_int stop;
    atomic_int pushing; /* producers still running */
    pthread_mutex_t mu;
    cdeliv *d;
    int nd, capd;
    int max_pending, max_lease, max_both, max_fu;
    int bad_fu; /* a follow-up with no job pending or in flight */
    int early;  /* deliveries claimed before their due time (server) */
} cctx;

static int64_t mono_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void produce(cshared *sh, const char *q) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = dq_push_opts_new();
    dq_push_opts_set(o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, C_WAIT);
    for (;;) {
        if (mono_us() > sh->until_us)
            break;
        int seq = atomic_fetch_add(&sh->next, 1);
        if (seq >= C_PUSHES)
            break;
        char pl[16];
        int n = snprintf(pl, sizeof(pl), "%d", seq);
        cpush *p = &sh->p[seq];
        p->ss = server_ms(r);
        p->ts = mono_us();
        int oc = 0;
        int rc = dq_push_ex(c, q, pl, (size_t)n, C_DELAY, "hot",
                            DQ_PUSH_DEBOUNCE, o, NULL, 0, &oc);
        p->tr = mono_us();
        p->sr = server_ms(r);
        p->oc = rc == 0 ? oc : rc;
        usleep(800);
    }
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}

static void *producer_thread(void *arg) {
    cctx *x = arg;
    produce(x->sh, x->q);
    atomic_fetch_sub(&x->pushing, 1);
    return NULL;
}

static void *consumer_thread(void *arg) {
    cctx *x = arg;
    dq_client *c = open_client();
    while (!atomic_load(&x->stop)) {
        dq_jobs *jobs = NULL;
        int n = dq_poll(c, x->q, 1, C_LEASE, &jobs, NULL);
        int64_t now = mono_us();
        if (n != 1) {
            dq_jobs_free(jobs);
            usleep(1000);
            continue;
        }
        const dq_job *j = dq_jobs_at(jobs, 0);
        pthread_mutex_lock(&x->mu);
        int64_t sclaim = dq_job_lease_deadline_ms(j) - C_LEASE;
        if (x->nd < x->capd) {
            x->d[x->nd].claim = now;
            x->d[x->nd].sclaim = sclaim;
            x->d[x->nd].seq = atoi(dq_job_payload(j, NULL));
            x->nd++;
        }
        x->early += dq_job_due_ms(j) > sclaim;
        pthread_mutex_unlock(&x->mu);
        usleep(2000); /* the handler */
        dq_ack(c, x->q, dq_job_id(j), dq_job_token(j));
        dq_jobs_free(jobs);
    }
    dq_close(c);
    return NULL;
}

/* Samples the id's partition: pending, in flight, follow-up field. */
static void *sampler_thread(void *arg) {
    cctx *x = arg;
    redisContext *r = rconn();
    char due[600], lease[600], jobs[600];
    tu_key(due, sizeof(due), "dq", x->q, "due", "hot");
    tu_key(lease, sizeof(lease), "dq", x->q, "lease", "hot");
    tu_key(jobs, sizeof(jobs), "dq", x->q, "jobs", "hot");
    while (!atomic_load(&x->stop)) {
        redisReply *rep = th_cmd(
            r,
            "EVAL %s 3 %s %s %s",
            "return {redis.call('ZCARD', KEYS[1]), "
            "redis.call('ZCARD', KEYS[2]), "
            "redis.call('HEXISTS', KEYS[3], 'hot' .. string.char(0) .. 'n')}",
            due, lease, jobs);
        int pd = (int)rep->element[0]->integer;
        int ls = (int)rep->element[1]->integer;
        int fu = (int)rep->element[2]->integer;
        freeReplyObject(rep);
        if (pd > x->max_pending) x->max_pending = pd;
        if (ls > x->max_lease) x->max_lease = ls;
        if (pd + ls > x->max_both) x->max_both = pd + ls;
        if (fu > x->max_fu) x->max_fu = fu;
        if (fu && pd + ls == 0)
            x->bad_fu++;
        usleep(2000);
    }
    redisFree(r);
    return NULL;
}

static int by_claim(const void *a, const void *b) {
    const cdeliv *x = a, *y = b;
    return x->claim < y->claim ? -1 : x->claim > y->claim;
}

static int by_int64(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

/* The first of the n sorted values at or after t (n if none). */
static int first_from(const int64_t *v, int n, int64_t t) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Every push: on the server's clock, the first delivery claimed after it
 * was sent comes within the max wait of its answer (plus the handler and
 * scheduling slack; the job that serves it was first pushed at or before
 * it); on the client's, a delivery after it runs its payload or one sent
 * after it (none lost). */
static void check_served(cctx *x) {
    qsort(x->d, (size_t)x->nd, sizeof(cdeliv), by_claim);
    int64_t *sc = malloc(((size_t)x->nd + 1) * sizeof(int64_t));
    int64_t *mc = malloc(((size_t)x->nd + 1) * sizeof(int64_t));
    ck_assert(sc != NULL && mc != NULL);
    for (int k = 0; k < x->nd; k++) {
        sc[k] = x->d[k].sclaim;
        mc[k] = x->d[k].claim;
    }
    qsort(sc, (size_t)x->nd, sizeof(int64_t), by_int64);
    /* suffix max of the answer time of the push each delivery ran */
    int64_t *m = malloc(((size_t)x->nd + 1) * sizeof(int64_t));
    ck_assert_ptr_nonnull(m);
    m[x->nd] = -1;
    for (int k = x->nd - 1; k >= 0; k--) {
        int64_t tr = x->sh->p[x->d[k].seq].tr;
        m[k] = tr > m[k + 1] ? tr : m[k + 1];
    }
    int64_t worst = 0, made = 0;
    for (int i = 0; i < C_PUSHES; i++) {
        const cpush *p = &x->sh->p[i];
        if (p->ts == 0)
            continue; /* the time ran out before this one started */
        made++;
        ck_assert_msg(p->oc >= DQ_DEBOUNCE_CREATED &&
                      p->oc <= DQ_DEBOUNCE_FOLLOWUP, "push %d: %d", i, p->oc);
        int s = first_from(sc, x->nd, p->ss);
        ck_assert_msg(s < x->nd, "push %d: no delivery after it (server "
                      "clock)", i);
        int64_t late = (sc[s] - (p->sr + C_WAIT)) * 1000;
        if (late > worst)
            worst = late;
        int lo = first_from(mc, x->nd, p->ts);
        ck_assert_msg(lo < x->nd, "push %d: no delivery after it", i);
        ck_assert_msg(m[lo] >= p->ts, "push %d lost: no delivery after it "
                      "ran its payload or a later one", i);
    }
    ck_assert_msg(worst <= C_SLACK_US, "a push waited %lld us past its max "
                  "wait (server clock)", (long long)worst);
    fprintf(stderr, "debounce: %d pushes, %d runs, worst %lld us past the "
            "max wait (server clock)\n", (int)made, x->nd, (long long)worst);
    /* debounced: far fewer runs than pushes */
    ck_assert_msg(x->nd < made / 4, "%d runs for %lld pushes", x->nd,
                  (long long)made);
    free(sc);
    free(mc);
    free(m);
}

START_TEST(many_producers) {
    cshared *sh = mmap(NULL, sizeof(cshared), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(sh != MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    sh->until_us = mono_us() + C_PUSH_SECONDS * INT64_C(1000000);
    cctx x;
    memset(&x, 0, sizeof(x));
    x.sh = sh;
    x.q = Q;
    x.capd = 20000;
    x.d = calloc((size_t)x.capd, sizeof(cdeliv));
    pthread_mutex_init(&x.mu, NULL);
    pthread_t cons[2], prod[2], samp;
    /* The producer processes first: a fork beside running threads can
     * leave the child a lock one of them held (ASan's allocator's did,
     * and the child hung). */
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        ck_assert_int_ge(kids[i], 0);
        if (kids[i] == 0) {
            produce(sh, Q);
            _exit(0);
        }
    }
    for (int i = 0; i < 2; i++)
        pthread_create(&cons[i], NULL, consumer_thread, &x);
    pthread_create(&samp, NULL, sampler_thread, &x);
    atomic_store(&x.pushing, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&prod[i], NULL, producer_thread, &x);
    for (int i = 0; i < 2; i++) {
        int st = 0;
        ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        pthread_join(prod[i], NULL);
    }
    /* drain: nothing pending or in flight left */
    dq_client *c = open_client();
    int64_t end = th_mono_ms() + 5000;
    int64_t s[5];
    do {
        th_sleep_ms(50);
        stats5(c, Q, s);
    } while (s[0] + s[1] + s[2] > 0 && th_mono_ms() < end);
    ck_assert_msg(s[0] + s[1] + s[2] + s[3] == 0, "left: %lld %lld %lld %lld",
                  (long long)s[0], (long long)s[1], (long long)s[2],
                  (long long)s[3]);
    atomic_store(&x.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(cons[i], NULL);
    pthread_join(samp, NULL);
    ck_assert_int_le(x.max_pending, 1);
    ck_assert_int_le(x.max_lease, 1);
    ck_assert_int_le(x.max_both, 1);
    ck_assert_int_le(x.max_fu, 1);
    ck_assert_int_eq(x.bad_fu, 0);
    ck_assert_int_eq(x.early, 0);
    ck_assert_int_lt(x.nd, x.capd);
    check_served(&x);
    free(x.d);
    munmap(sh, sizeof(*sh));
    dq_close(c);
}
END_TEST

TEST_SUITE("debounce", TU_SRV_UNIX,
    {"pending_moves_capped", pending_moves_capped, 30, NULL},
    {"followup_after_ack", followup_after_ack, 30, NULL},
    {"followup_due", followup_due, 30, NULL},
    {"dead_and_cancel", dead_and_cancel, 30, NULL},
    {"batch", batch, 30, NULL},
    {"bad_input", bad_input, 30, NULL},
    {"many_producers", many_producers, 60, NULL})
