/*
 * tests/test_listing.c - what the listings say of fair claiming: every
 * listed job carries its group (DQ_PUSHOPT_GROUP) and priority
 * (DQ_PUSHOPT_PRIORITY) in dq_list of each kind and dq_dead_list, through
 * a delivery, a nack to the dead set and a requeue, with a copy
 * (dq_job_dup) keeping them; jobs without them (plain, or pushed with
 * other options only) list as before with none; a poll's jobs carry none
 * (documented: dq_get tells).  Run on every layout and on 4 partitions
 * (meson suites compact and partitioned), so compact jobs listed beside
 * grouped ones (which stay native) are covered too.
 */
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

/* Polls until every job of W is held (a partitioned queue hands them out
 * partition by partition); copies of them in out. */
static void poll_all(dq_client *c, const char *q, dq_job *out[NW]) {
    size_t n = 0;
    int64_t end = wall_ms() + 10000;
    while (n < NW) {
        ck_assert_msg(wall_ms() < end, "polled %zu of %zu jobs", n, NW);
        dq_jobs *got = NULL;
        int k = poll_n(c, q, (int)NW, 60000, &got, NULL);
        ck_assert_uint_le(n + (size_t)k, NW);
        for (int i = 0; i < k; i++)
            out[n++] = dq_job_dup(dq_jobs_at(got, (size_t)i));
        dq_jobs_free(got);
    }
}

START_TEST(every_kind) {
    dq_client *c = open_client();
    const char *q = "lst-every";
    for (size_t i = 0; i < NW; i++)
        push_want(c, q, &W[i], 0);
    list_has(c, q, DQ_LIST_SCHEDULED, 0, NW, "scheduled");

    dq_job *got[NW];
    poll_all(c, q, got);
    for (size_t i = 0; i < NW; i++) { /* documented: a poll fills none in */
        ck_assert_ptr_null(dq_job_group(got[i]));
        ck_assert_int_eq(dq_job_priority(got[i]), 0);
    }
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

TEST_SUITE("listing", TU_SRV_UNIX,
    {"every_kind", every_kind, 60, NULL},
    {"plain_has_none", plain_has_none, 60, NULL},
    {"mixed_pages", mixed_pages, 60, NULL})
