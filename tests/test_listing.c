/*
 * tests/test_listing.c - what the listings say of fair claiming: every
 * listed job carries its group (DQ_PUSHOPT_GROUP) and priority
 * (DQ_PUSHOPT_PRIORITY) in dq_list of each kind and dq_dead_list, through
 * a delivery, a nack to the dead set and a requeue, with a copy
 * (dq_job_dup) keeping them; jobs without them (plain, or pushed with
 * other options only) list as before with none.  Polled jobs carry them
 * too, on every poll path (dq_poll, dq_poll_wait, dq_poll_wait_multi, the
 * sync consumer), beside plain ones that carry none, and again when their
 * lease ran out and a poll hands them out anew.  Run on every layout and on 4 partitions
 * (meson suites compact and partitioned), so compact jobs listed beside
 * grouped ones (which stay native) are covered too.
 */
#include <delayq-consumer.h>

#include "test_suite.h"
#include "test_utils.h"

/* A job of the test: its id, group (NULL none), priority, and whether it
 * is pushed with another option (a max attempts) but no group. */
typedef struct want {
    const char *id;
    const char *group;
    int prio;
    int other_opt;
} want;

/* The longest group name, of every kind of byte a name may hold. */
#define LONG_GROUP                                                            \
    "a-b_c.d:e@f0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq"

_Static_assert(sizeof(LONG_GROUP) == DQ_GROUP_MAX + 1, "longest name");

static const want W[] = {
    {"j-acme", "acme", 0, 0},    {"j-acme-p3", "acme", 3, 0},
    {"j-p5", NULL, 5, 0},        {"j-plain", NULL, 0, 0},
    {"j-opt", NULL, 0, 1},       {"j-long-p9", LONG_GROUP, 9, 0},
};
#define NW (sizeof(W) / sizeof(W[0]))

/* Pushes w due after delay_ms with its options. */
static void push_want(dq_client *c, const char *q, const want *w,
                      int64_t delay_ms) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    if (w->group != NULL)
        ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, w->group),
                         0);
    if (w->prio > 0)
        ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, w->prio),
                         0);
    if (w->other_opt)
        ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, 5), 0);
    int outcome = -1;
    int rc = dq_push_ex(c, q, w->id, strlen(w->id), delay_ms, w->id,
                        DQ_PUSH_KEEP, o, NULL, 0, &outcome);
    ck_assert_msg(rc == 0, "push %s: %d %s", w->id, rc, dq_errmsg(c));
    ck_assert_int_eq(outcome, DQ_PUSHED);
    dq_push_opts_free(o);
}

/* Pushes n plain jobs, due now, ids "<prefix><i>". */
static void push_plain(dq_client *c, const char *q, size_t n,
                       const char *prefix) {
    const char **ids = tu_ids(n, prefix);
    tu_push_ids(c, q, n, ids, 0);
    free(ids);
}

/* The wanted job with this id (fails the test when there is none). */
static const want *want_of(const char *id) {
    for (size_t i = 0; i < NW; i++)
        if (strcmp(W[i].id, id) == 0)
            return &W[i];
    ck_abort_msg("listed an unknown job '%s'", id);
    return NULL;
}

/* j carries w's group and priority, and so does a copy of it. */
static void fair_is(const dq_job *j, const want *w, const char *where) {
    for (int copy = 0; copy < 2; copy++) {
        dq_job *d = copy ? dq_job_dup(j) : NULL;
        const dq_job *x = copy ? d : j;
        const char *g = dq_job_group(x);
        ck_assert_msg(w->group == NULL ? g == NULL
                                       : g != NULL && strcmp(g, w->group) == 0,
                      "%s%s: %s has group '%s', want '%s'", where,
                      copy ? " (copy)" : "", w->id, g ? g : "(none)",
                      w->group ? w->group : "(none)");
        ck_assert_msg(dq_job_priority(x) == w->prio,
                      "%s%s: %s has priority %d, want %d", where,
                      copy ? " (copy)" : "", w->id, dq_job_priority(x),
                      w->prio);
        size_t len = 0;
        ck_assert_str_eq(dq_job_payload(x, &len), w->id);
        ck_assert_uint_eq(len, strlen(w->id));
        dq_job_free(d);
    }
}

/* Lists every job of kind which (dead: dq_dead_list when dead_call); each
 * is one of W with its fields, and there are n of them. */
static void list_has(dq_client *c, const char *q, int which, int dead_call,
                     size_t n, const char *where) {
    dq_jobs *jobs = NULL;
    int rc = dead_call ? dq_dead_list(c, q, 0, 100, &jobs)
                       : dq_list(c, q, which, 0, 100, &jobs, NULL);
    ck_assert_msg(rc == (int)n, "%s: listed %d (%s), want %zu", where, rc,
                  dq_errmsg(c), n);
    for (size_t i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        fair_is(j, want_of(dq_job_id(j)), where);
    }
    dq_jobs_free(jobs);
}

/* Polls until every job of W is held under leases of lease_ms (a
 * partitioned queue hands them out partition by partition); copies of them
 * in out. */
static void poll_all_lease(dq_client *c, const char *q, int64_t lease_ms,
                           dq_job *out[NW]) {
    size_t n = 0;
    int64_t end = wall_ms() + 10000;
    while (n < NW) {
        ck_assert_msg(wall_ms() < end, "polled %zu of %zu jobs", n, NW);
        dq_jobs *got = NULL;
        int k = poll_n(c, q, (int)NW, lease_ms, &got, NULL);
        ck_assert_uint_le(n + (size_t)k, NW);
        for (int i = 0; i < k; i++)
            out[n++] = dq_job_dup(dq_jobs_at(got, (size_t)i));
        dq_jobs_free(got);
    }
}

/* poll_all_lease with leases of a minute. */
static void poll_all(dq_client *c, const char *q, dq_job *out[NW]) {
    poll_all_lease(c, q, 60000, out);
}

START_TEST(every_kind) {
    dq_client *c = open_client();
    const char *q = "lst-every";
    for (size_t i = 0; i < NW; i++)
        push_want(c, q, &W[i], 0);
    list_has(c, q, DQ_LIST_SCHEDULED, 0, NW, "scheduled");

    dq_job *got[NW];
    poll_all(c, q, got);
    for (size_t i = 0; i < NW; i++) /* copies of polled jobs (dq_job_dup) */
        fair_is(got[i], want_of(dq_job_id(got[i])), "polled");
    list_has(c, q, DQ_LIST_INFLIGHT, 0, NW, "in flight");
    list_has(c, q, DQ_LIST_SCHEDULED, 0, 0, "scheduled after the poll");

    for (size_t i = 0; i < NW; i++) {
        const dq_job *j = got[i];
        ck_assert_int_eq(dq_nack_reason(c, q, dq_job_id(j), dq_job_token(j), 0,
                                        DQ_NACK_DEAD, "no", 2),
                         1);
        dq_job_free(got[i]);
    }
    list_has(c, q, DQ_LIST_DEAD, 0, NW, "dead (dq_list)");
    list_has(c, q, DQ_LIST_DEAD, 1, NW, "dead (dq_dead_list)");

    int requeued = 0;
    for (int rc; (rc = dq_dead_requeue(c, q, NULL, 0)) > 0;)
        requeued += rc;
    ck_assert_int_eq(requeued, (int)NW);
    list_has(c, q, DQ_LIST_SCHEDULED, 0, NW, "requeued");
    list_has(c, q, DQ_LIST_DEAD, 0, 0, "dead after the requeue");
    dq_close(c);
}
END_TEST

/* A plain queue lists as before: no group, priority 0, its other fields
 * as they were; a later page of a big one too (compact buckets merged). */
START_TEST(plain_has_none) {
    dq_client *c = open_client();
    const char *q = "lst-plain";
    enum { N = 300 };
    push_plain(c, q, N, "p");
    dq_jobs *jobs = NULL;
    int64_t now = 0;
    ck_assert_int_eq(dq_list(c, q, DQ_LIST_SCHEDULED, 100, 150, &jobs, &now),
                     150);
    ck_assert_int_gt(now, 0);
    for (size_t i = 0; i < 150; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        ck_assert_ptr_null(dq_job_group(j));
        ck_assert_int_eq(dq_job_priority(j), 0);
        ck_assert_ptr_null(dq_job_last_error(j, NULL));
        ck_assert_int_eq(dq_job_attempt(j), 0);
        ck_assert_int_eq(dq_job_lease_deadline_ms(j), 0);
        dq_job *d = dq_job_dup(j);
        ck_assert_ptr_null(dq_job_group(d));
        ck_assert_str_eq(dq_job_id(d), dq_job_id(j));
        dq_job_free(d);
    }
    dq_jobs_free(jobs);
    ck_assert_ptr_null(dq_job_group(NULL));
    ck_assert_int_eq(dq_job_priority(NULL), 0);
    dq_close(c);
}
END_TEST

/* Grouped jobs scheduled among many plain ones: each page lists them in
 * due order with their fields, the plain ones with none. */
START_TEST(mixed_pages) {
    dq_client *c = open_client();
    const char *q = "lst-mixed";
    enum { N = 200 };
    push_plain(c, q, N, "m");
    for (size_t i = 0; i < NW; i++)
        push_want(c, q, &W[i], 3600000);
    size_t seen = 0, total = 0;
    for (int64_t off = 0;; off += 37) {
        dq_jobs *jobs = NULL;
        int rc = dq_list(c, q, DQ_LIST_SCHEDULED, off, 37, &jobs, NULL);
        ck_assert_msg(rc >= 0, "list: %d %s", rc, dq_errmsg(c));
        for (size_t i = 0; i < (size_t)rc; i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            if (strncmp(dq_job_id(j), "j-", 2) == 0) {
                fair_is(j, want_of(dq_job_id(j)), "mixed");
                ck_assert_uint_ge(total, N); /* after the plain jobs */
                seen++;
            } else {
                ck_assert_ptr_null(dq_job_group(j));
                ck_assert_int_eq(dq_job_priority(j), 0);
            }
            total++;
        }
        dq_jobs_free(jobs);
        if (rc < 37)
            break;
    }
    ck_assert_uint_eq(seen, NW);
    ck_assert_uint_eq(total, N + NW);
    dq_close(c);
}
END_TEST

/* A polled job: one of W with its group and priority, or a plain one
 * (id "m<i>") with neither; counts them in *fair and *plain. */
static void polled_is(const dq_job *j, size_t *fair, size_t *plain,
                      const char *where) {
    if (strncmp(dq_job_id(j), "j-", 2) == 0) {
        fair_is(j, want_of(dq_job_id(j)), where);
        ++*fair;
        return;
    }
    ck_assert_msg(dq_job_group(j) == NULL && dq_job_priority(j) == 0,
                  "%s: plain job %s has group '%s', priority %d", where,
                  dq_job_id(j), dq_job_group(j) ? dq_job_group(j) : "",
                  dq_job_priority(j));
    ck_assert_str_eq(dq_job_payload(j, NULL), "z");
    ++*plain;
}

/* Pushes n plain jobs and (with_w) the jobs of W, all due now, to q. */
static void push_mixed(dq_client *c, const char *q, size_t n, int with_w) {
    push_plain(c, q, n, "m");
    for (size_t i = 0; with_w && i < NW; i++)
        push_want(c, q, &W[i], 0);
}

/* Every poll path hands out each job with its group and priority, plain
 * jobs beside them with none, several in one poll (their places in the
 * reply): dq_poll_wait by 4, dq_poll_wait_multi on a second queue; a
 * plain queue's jobs (a third one) with neither. */
START_TEST(poll_paths) {
    dq_client *c = open_client();
    const char *qs[3] = {"lst-pw", "lst-pwm", "lst-pplain"};
    enum { N = 30 };
    for (int k = 0; k < 3; k++) {
        size_t nw = k < 2 ? NW : 0;
        push_mixed(c, qs[k], N, nw > 0);
        size_t fair = 0, plain = 0;
        int64_t end = wall_ms() + 10000;
        while (fair + plain < N + nw) {
            ck_assert_msg(wall_ms() < end, "%s: polled %zu of %zu", qs[k],
                          fair + plain, N + nw);
            dq_jobs *got = NULL;
            int ix = -1;
            int rc = k != 1 ? dq_poll_wait(c, qs[k], 4, 60000, 1000, &got)
                            : dq_poll_wait_multi(c, 2, qs, NULL,
                                                 DQ_PRIO_STRICT, 4, 60000,
                                                 1000, &got, &ix);
            ck_assert_msg(rc >= 0, "%s: %d %s", qs[k], rc, dq_errmsg(c));
            ck_assert(k != 1 || rc == 0 || ix == 1);
            for (size_t i = 0; i < (size_t)rc; i++)
                polled_is(dq_jobs_at(got, i), &fair, &plain, qs[k]);
            dq_jobs_free(got);
        }
        ck_assert_uint_eq(fair, nw);
        ck_assert_uint_eq(plain, N);
    }
    dq_close(c);
}
END_TEST

/* A lease that ran out: the next poll hands the job out again (attempt
 * 2, a new token) with its group and priority. */
START_TEST(expired_lease_repolled) {
    dq_client *c = open_client();
    const char *q = "lst-expired";
    for (size_t i = 0; i < NW; i++)
        push_want(c, q, &W[i], 0);
    dq_job *first[NW], *again[NW];
    poll_all_lease(c, q, 100, first);
    th_sleep_ms(150);
    poll_all(c, q, again);
    for (size_t i = 0; i < NW; i++) {
        fair_is(again[i], want_of(dq_job_id(again[i])), "re-polled");
        ck_assert_int_eq(dq_job_attempt(again[i]), 2);
        ck_assert_int_eq(dq_ack(c, q, dq_job_id(again[i]),
                                dq_job_token(again[i])),
                         0);
        dq_job_free(first[i]);
        dq_job_free(again[i]);
    }
    dq_close(c);
}
END_TEST

/* The sync consumer's handler sees each job's group and priority. */
typedef struct seen {
    size_t fair, plain, want;
} seen;

static int seen_handler(dq_consumer *co, const dq_job *job, void *ud) {
    seen *s = ud;
    polled_is(job, &s->fair, &s->plain, "consumer");
    if (s->fair + s->plain >= s->want)
        dq_consumer_interrupt(co);
    return DQ_JOB_OK;
}

START_TEST(consumer_sees_them) {
    dq_client *c = open_client();
    const char *q = "lst-consumer";
    enum { N = 10 };
    push_mixed(c, q, N, 1);
    seen s = {0, 0, N + NW};
    dq_consumer *co = NULL;
    ck_assert_int_eq(dq_consumer_new_sync(c, q, seen_handler, &s, &co), 0);
    ck_assert_int_eq(dq_consumer_set_int(co, DQ_COPT_CONCURRENCY, 4), 0);
    ck_assert_int_ge(dq_consumer_run(co), 0);
    dq_consumer_free(co);
    ck_assert_uint_eq(s.fair, NW);
    ck_assert_uint_eq(s.plain, N);
    dq_close(c);
}
END_TEST

TEST_SUITE("listing", TU_SRV_UNIX,
    {"every_kind", every_kind, 60, NULL},
    {"plain_has_none", plain_has_none, 60, NULL},
    {"mixed_pages", mixed_pages, 60, NULL},
    {"poll_paths", poll_paths, 60, NULL},
    {"expired_lease_repolled", expired_lease_repolled, 60, NULL},
    {"consumer_sees_them", consumer_sees_them, 60, NULL})
