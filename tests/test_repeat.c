/*
 * tests/test_repeat.c - repeating jobs (DQ_PUSHOPT_EVERY_MS,
 * DQ_PUSHOPT_CRON): an ack reschedules the job to its next slot; cron
 * first and next runs equal times this file computes on its own (a
 * minute-by-minute walk over gmtime of the server's TIME, with the offset);
 * one job per id however many producers register it, also at once; cancel
 * stops the series (pending and in flight); missed runs run once; a retry
 * keeps the series, dead-lettering stops it until a requeue; two
 * consumers racing never see two instances or one run twice; replace
 * drops or changes the rule; bad inputs send nothing.
 */
#include "test_suite.h"
#include "test_utils.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

/* Options with a repeat every ms. */
static dq_push_opts *every_opts(int64_t ms) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, ms), DQ_OK);
    return o;
}

/* Options with a cron repeat at tz minutes from UTC. */
static dq_push_opts *cron_opts(const char *expr, int tz) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_msg(dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, expr) == DQ_OK,
                  "%s: %s", expr, dq_push_opts_errmsg(o));
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_TZ_OFFSET_MIN, tz), DQ_OK);
    return o;
}

/* dq_push_ex of payload "x" that must succeed; returns the outcome. */
static int push_rep(dq_client *c, const char *q, const char *id, int64_t when,
                    int flags, const dq_push_opts *o) {
    int outcome = -1;
    int rc = dq_push_ex(c, q, "x", 1, when, id, flags, o, NULL, 0, &outcome);
    ck_assert_msg(rc >= 0, "push %s: %d %s", id, rc, dq_errmsg(c));
    return outcome;
}

/* The due time of the scheduled (pending) job id. */
static int64_t due_of(dq_client *c, const char *q, const char *id) {
    dq_job_info *in = tu_must_get(c, q, id);
    ck_assert_msg(dq_job_info_state(in) == DQ_JOB_SCHEDULED ||
                      dq_job_info_state(in) == DQ_JOB_DUE,
                  "%s: state %d", id, dq_job_info_state(in));
    int64_t d = dq_job_info_due_ms(in);
    dq_job_info_free(in);
    return d;
}

/* Polls job id, which must be due now; copies its token; returns its due
 * time. */
static int64_t take(dq_client *c, const char *q, const char *id,
                    char tok[DQ_TOKEN_BUF], int64_t *attempt) {
    dq_jobs *j = poll_until(c, q, 1, 30000, 10000);
    ck_assert_msg(j != NULL, "%s: nothing delivered", id);
    const dq_job *job = dq_jobs_at(j, 0);
    ck_assert_str_eq(dq_job_id(job), id);
    snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(job));
    int64_t due = dq_job_due_ms(job);
    if (attempt != NULL)
        *attempt = dq_job_attempt(job);
    dq_jobs_free(j);
    return due;
}

/* Pending + in flight (all partitions). */
static int64_t live(dq_client *c, const char *q) {
    int64_t s[5];
    stats5(c, q, s);
    return s[0] + s[1] + s[2];
}

/* ---- interval ------------------------------------------------------------ */

START_TEST(every_reschedules_on_ack) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = every_opts(1000);
    int64_t t0 = server_ms(r);
    ck_assert_int_eq(push_rep(c, Q, "tick", 0, DQ_PUSH_KEEP, o), DQ_PUSHED);
    dq_job_info *in = tu_must_get(c, Q, "tick");
    ck_assert_ptr_nonnull(dq_job_info_repeat(in));
    ck_assert_msg(strncmp(dq_job_info_repeat(in), "every 1000 ms from ", 19) ==
                      0,
                  "%s", dq_job_info_repeat(in));
    dq_job_info_free(in);
    for (int run = 0; run < 3; run++) {
        char tok[DQ_TOKEN_BUF];
        int64_t att = 0;
        int64_t due = take(c, Q, "tick", tok, &att);
        ck_assert_int_eq(att, 1); /* every run starts at attempt 1 */
        ck_assert_int_ge(due, t0);
        int64_t a0 = server_ms(r);
        ck_assert_int_eq(dq_ack(c, Q, "tick", tok), 0);
        int64_t a1 = server_ms(r);
        ck_assert_int_eq(dq_ack(c, Q, "tick", tok), 0); /* retried ack */
        int64_t next = due_of(c, Q, "tick");
        /* the first start + k * 1000 strictly after the ack */
        ck_assert_int_gt(next, a0);
        ck_assert_int_le(next, a1 + 1000);
        in = tu_must_get(c, Q, "tick");
        ck_assert_int_eq(dq_job_info_attempts(in), 0);
        const char *rule = dq_job_info_repeat(in);
        long long every = 0, start = 0;
        ck_assert_int_eq(sscanf(rule, "every %lld ms from %lld", &every,
                                &start), 2);
        ck_assert_int_eq(every, 1000);
        ck_assert_int_ge(start, t0);
        ck_assert_int_eq((next - start) % 1000, 0);
        dq_job_info_free(in);
        ck_assert_int_eq(live(c, Q), 1);
    }
    /* a keep push of the registered id changes nothing */
    int64_t d = due_of(c, Q, "tick");
    ck_assert_int_eq(push_rep(c, Q, "tick", 0, DQ_PUSH_KEEP, o), DQ_KEPT);
    ck_assert_int_eq(due_of(c, Q, "tick"), d);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* ---- cron against an independent computation ------------------------------ */

/* A schedule as the test sees it: a predicate on a civil time. */
typedef int (*cron_match_fn)(const struct tm *t);

static int m_every2(const struct tm *t) { return t->tm_min % 2 == 0; }
static int m_930_weekdays(const struct tm *t) {
    return t->tm_min == 30 && t->tm_hour == 9 && t->tm_wday >= 1 &&
           t->tm_wday <= 5;
}
/* "0 0 1,15 * mon": both day fields restricted, either matches */
static int m_or_days(const struct tm *t) {
    return t->tm_min == 0 && t->tm_hour == 0 &&
           (t->tm_mday == 1 || t->tm_mday == 15 || t->tm_wday == 1);
}
static int m_quarter_3h(const struct tm *t) {
    return t->tm_min == 15 && t->tm_hour % 3 == 0;
}

/* The first minute (epoch ms) >= t (> t when after) whose civil time at
 * tz minutes from UTC matches, walking minute by minute (at most 40
 * days). */
static int64_t expect_next(cron_match_fn f, int tz, int64_t t, int after) {
    int64_t m = t / 60000;
    if (after || m * 60000 < t)
        m++;
    for (int64_t k = 0; k < 40 * 1440; k++, m++) {
        time_t s = (time_t)((m + tz) * 60);
        struct tm tm;
        gmtime_r(&s, &tm);
        if (f(&tm))
            return m * 60000;
    }
    ck_abort_msg("no match within 40 days");
    return -1;
}

/* One case: the first run (pushed now) is the first match at or after the
 * push; the run after an ack is the first match strictly after the ack. */
static void cron_case(const char *q, const char *expr, int tz,
                      cron_match_fn f) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = cron_opts(expr, tz);
    char id[64];
    snprintf(id, sizeof(id), "c%+d", tz);
    int64_t p0 = server_ms(r);
    ck_assert_int_eq(push_rep(c, q, id, 0, DQ_PUSH_KEEP, o), DQ_PUSHED);
    int64_t p1 = server_ms(r);
    int64_t first = due_of(c, q, id);
    ck_assert_msg(first == expect_next(f, tz, p0, 0) ||
                      first == expect_next(f, tz, p1, 0),
                  "%s tz %d: first run %lld, expected %lld", expr, tz,
                  (long long)first, (long long)expect_next(f, tz, p0, 0));
    dq_job_info *in = tu_must_get(c, q, id);
    char want[128];
    snprintf(want, sizeof(want), "cron %s tz %+d", expr, tz);
    ck_assert_str_eq(dq_job_info_repeat(in), want);
    dq_job_info_free(in);

    /* A run due now: replace with an absolute time 50 days back (its
     * first match is then in the past), take it, ack it. */
    ck_assert_int_eq(dq_push_ex(c, q, "x", 1, p1 - 50LL * 86400000, id,
                                DQ_PUSH_REPLACE | DQ_PUSH_AT, o, NULL, 0,
                                NULL),
                     0);
    int64_t back = due_of(c, q, id);
    ck_assert_int_eq(back, expect_next(f, tz, p1 - 50LL * 86400000, 0));
    char tok[DQ_TOKEN_BUF];
    take(c, q, id, tok, NULL);
    int64_t a0 = server_ms(r);
    ck_assert_int_eq(dq_ack(c, q, id, tok), 0);
    int64_t a1 = server_ms(r);
    int64_t next = due_of(c, q, id);
    ck_assert_msg(next == expect_next(f, tz, a0, 1) ||
                      next == expect_next(f, tz, a1, 1),
                  "%s tz %d: next run %lld, expected %lld", expr, tz,
                  (long long)next, (long long)expect_next(f, tz, a0, 1));
    ck_assert_int_gt(next, a0);
    ck_assert_int_eq(live(c, q), 1);
    dq_cancel(c, q, id, 0);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}

START_TEST(cron_first_and_next) {
    static const int tzs[] = {0, 330, -300, 840, -840, 45};
    for (size_t i = 0; i < sizeof(tzs) / sizeof(tzs[0]); i++) {
        cron_case(Q, "*/2 * * * *", tzs[i], m_every2);
        cron_case(Q, "30 9 * * 1-5", tzs[i], m_930_weekdays);
        cron_case(Q, "0 0 1,15 * mon", tzs[i], m_or_days);
        cron_case(Q, "15 */3 * * *", tzs[i], m_quarter_3h);
    }
}
END_TEST

/* An absolute first time in the future: the first match at or after it,
 * also across month and year ends and a leap day. */
START_TEST(cron_absolute_dates) {
    dq_client *c = open_client();
    static const struct {
        const char *expr;
        int64_t at;   /* pushed time, epoch ms */
        int64_t want; /* first run */
    } cases[] = {
        /* 2031-12-31 23:59:30 UTC -> 2032-01-01 00:00 */
        {"0 0 * * *", INT64_C(1956527970000), INT64_C(1956528000000)},
        /* 2031-03-01 00:00 UTC, "0 12 29 2 *" -> 2032-02-29 12:00 */
        {"0 12 29 2 *", INT64_C(1930089600000), INT64_C(1961668800000)},
        /* exactly on a match: that minute */
        {"0 0 * * *", INT64_C(1956528000000), INT64_C(1956528000000)},
        /* 2031-01-31 10:00 UTC, "0 9 31 * *" -> 2031-03-31 09:00 */
        {"0 9 31 * *", INT64_C(1927620000000), INT64_C(1932714000000)},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dq_push_opts *o = cron_opts(cases[i].expr, 0);
        char id[16];
        snprintf(id, sizeof(id), "abs%zu", i);
        ck_assert_int_eq(dq_push_ex(c, Q, "x", 1, cases[i].at, id,
                                    DQ_PUSH_KEEP | DQ_PUSH_AT, o, NULL, 0,
                                    NULL),
                         0);
        ck_assert_msg(due_of(c, Q, id) == cases[i].want,
                      "%s at %lld: %lld, want %lld", cases[i].expr,
                      (long long)cases[i].at, (long long)due_of(c, Q, id),
                      (long long)cases[i].want);
        dq_push_opts_free(o);
    }
    dq_close(c);
}
END_TEST

/* A random field as text and as the set of values it means (the test's
 * own reading, not the library's parser): '*', a value, a range, a step. */
static unsigned rnd(unsigned *seed, unsigned n) {
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) % n;
}

static uint64_t rand_field(unsigned *seed, int lo, int hi, char *out) {
    int span = hi - lo + 1;
    int a = lo + (int)rnd(seed, (unsigned)span);
    int b = a + (int)rnd(seed, (unsigned)(hi - a + 1));
    int step = 1 + (int)rnd(seed, 7);
    uint64_t bits = 0;
    switch (rnd(seed, 5)) {
    case 0:
        strcpy(out, "*");
        a = lo, b = hi, step = 1;
        break;
    case 1:
        sprintf(out, "%d", a);
        b = a, step = 1;
        break;
    case 2:
        sprintf(out, "%d-%d", a, b);
        step = 1;
        break;
    case 3:
        sprintf(out, "*/%d", step);
        a = lo, b = hi;
        break;
    default:
        sprintf(out, "%d-%d/%d", a, b, step);
    }
    for (int v = a; v <= b; v += step)
        bits |= UINT64_C(1) << v;
    return bits;
}

/* The first minute >= t (ms) matching the sets at tz, stepping day by day
 * with gmtime (at most 40 years), then through the day's minutes. */
static int64_t expect_sets(const uint64_t set[5], int day_or, int tz,
                           int64_t t) {
    int64_t m = t / 60000;
    if (m * 60000 < t)
        m++;
    int64_t local = m + tz;
    int64_t day = local / 1440 - (local % 1440 < 0);
    for (int64_t d = day; d < day + 40 * 366; d++) {
        time_t s = (time_t)(d * 86400);
        struct tm tm;
        gmtime_r(&s, &tm);
        int dom = (set[2] >> tm.tm_mday) & 1, dow = (set[4] >> tm.tm_wday) & 1;
        if (!((set[3] >> (tm.tm_mon + 1)) & 1) ||
            !(day_or ? dom || dow : dom && dow))
            continue;
        for (int h = 0; h < 24; h++)
            for (int mi = 0; mi < 60; mi++)
                if (((set[1] >> h) & 1) && ((set[0] >> mi) & 1) &&
                    d * 1440 + h * 60 + mi >= local)
                    return (d * 1440 + h * 60 + mi - tz) * 60000;
    }
    return -1;
}

/* Random rules pushed at random absolute times (1970..2100) and offsets:
 * the first run equals the test's own day-by-day search. */
START_TEST(cron_random_rules) {
    dq_client *c = open_client();
    unsigned seed = 4242;
    int checked = 0;
    for (int i = 0; i < 300; i++) {
        char f[5][32], text[200];
        uint64_t set[5];
        set[0] = rand_field(&seed, 0, 59, f[0]);
        set[1] = rand_field(&seed, 0, 23, f[1]);
        set[2] = rand_field(&seed, 1, 31, f[2]);
        set[3] = rand_field(&seed, 1, 12, f[3]);
        set[4] = rand_field(&seed, 0, 7, f[4]);
        if (set[4] & (UINT64_C(1) << 7))
            set[4] = (set[4] | 1) & 0x7f; /* 7 is Sunday */
        int day_or = f[2][0] != '*' && f[4][0] != '*';
        snprintf(text, sizeof(text), "%s %s %s %s %s", f[0], f[1], f[2], f[3],
                 f[4]);
        int tz = (int)rnd(&seed, 1681) - 840;
        /* 0 .. ~4.1e12 ms (year 2100), any second */
        int64_t hi16 = rnd(&seed, 65536), lo16 = rnd(&seed, 65536);
        int64_t at = (hi16 * 65536 + lo16) * 960 + (int64_t)rnd(&seed, 60000);
        dq_push_opts *o = dq_push_opts_new();
        dq_push_opts_set(o, DQ_PUSHOPT_TZ_OFFSET_MIN, tz);
        int rc = dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, text);
        int64_t want = expect_sets(set, day_or, tz, at);
        if (rc != DQ_OK) {
            /* refused only when it can never fire */
            ck_assert_msg(strstr(dq_push_opts_errmsg(o), "never") != NULL,
                          "'%s': %s", text, dq_push_opts_errmsg(o));
            dq_push_opts_free(o);
            continue;
        }
        ck_assert_msg(want >= 0, "'%s' accepted, no run in 40 years", text);
        ck_assert_int_eq(dq_push_ex(c, Q, "x", 1, at, "rr",
                                    DQ_PUSH_REPLACE | DQ_PUSH_AT, o, NULL, 0,
                                    NULL),
                         0);
        int64_t got = due_of(c, Q, "rr");
        ck_assert_msg(got == want, "'%s' tz %d at %lld: %lld, want %lld",
                      text, tz, (long long)at, (long long)got,
                      (long long)want);
        checked++;
        dq_push_opts_free(o);
    }
    ck_assert_int_gt(checked, 200);
    dq_close(c);
}
END_TEST

/* ---- one job per id ------------------------------------------------------- */

#define REG_ROUNDS 200

typedef struct reg_arg {
    const char *q;
    pthread_barrier_t *bar;
    int pushed, kept, errors;
} reg_arg;

/* Registers the same ids REG_ROUNDS times from its own client. */
static void *register_many(void *p) {
    reg_arg *a = p;
    dq_client *c = open_client();
    dq_push_opts *o = every_opts(60000);
    pthread_barrier_wait(a->bar);
    for (int i = 0; i < REG_ROUNDS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "reg%d", i % 20);
        int outcome = 0;
        int rc = dq_push_ex(c, a->q, "x", 1, 1000, id, DQ_PUSH_KEEP, o, NULL,
                            0, &outcome);
        if (rc < 0)
            a->errors++;
        else if (outcome == DQ_PUSHED)
            a->pushed++;
        else if (outcome == DQ_KEPT)
            a->kept++;
        else
            a->errors++;
    }
    dq_push_opts_free(o);
    dq_close(c);
    return NULL;
}

START_TEST(idempotent_by_id_concurrent) {
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    reg_arg a[2] = {{Q, &bar, 0, 0, 0}, {Q, &bar, 0, 0, 0}};
    pthread_t th;
    pthread_create(&th, NULL, register_many, &a[1]);
    register_many(&a[0]);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&bar);
    ck_assert_int_eq(a[0].errors + a[1].errors, 0);
    ck_assert_int_eq(a[0].pushed + a[1].pushed, 20);
    ck_assert_int_eq(a[0].kept + a[1].kept, 2 * REG_ROUNDS - 20);
    dq_client *c = open_client();
    ck_assert_int_eq(live(c, Q), 20);
    dq_close(c);
}
END_TEST

/* ---- stopping --------------------------------------------------------------- */

START_TEST(cancel_stops_series) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = every_opts(100);
    /* pending */
    push_rep(c, Q, "p", 60000, DQ_PUSH_KEEP, o);
    ck_assert_int_eq(dq_cancel(c, Q, "p", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(live(c, Q), 0);
    ck_assert_int_eq(tu_sum(r, "HLEN", "dq", Q, "jobs"), 0);
    /* in flight */
    push_rep(c, Q, "f", 0, DQ_PUSH_KEEP, o);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "f", tok, NULL);
    ck_assert_int_eq(dq_cancel(c, Q, "f", 0), DQ_CANCEL_BUSY);
    ck_assert_int_eq(dq_cancel(c, Q, "f", DQ_CANCEL_INFLIGHT),
                     DQ_CANCELED_INFLIGHT);
    ck_assert_int_eq(dq_ack(c, Q, "f", tok), DQ_ENOTFOUND);
    ck_assert_int_eq(live(c, Q), 0);
    ck_assert_int_eq(tu_sum(r, "HLEN", "dq", Q, "jobs"), 0);
    /* registering again after a cancel starts a new series, done record
     * of an earlier ack or not */
    push_rep(c, Q, "g", 0, DQ_PUSH_KEEP, o);
    take(c, Q, "g", tok, NULL);
    ck_assert_int_eq(dq_ack(c, Q, "g", tok), 0);
    ck_assert_int_eq(dq_cancel(c, Q, "g", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(push_rep(c, Q, "g", 0, DQ_PUSH_KEEP, o), DQ_PUSHED);
    ck_assert_int_eq(live(c, Q), 1);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}
END_TEST

START_TEST(missed_runs_run_once) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = every_opts(100);
    int64_t t0 = server_ms(r);
    push_rep(c, Q, "m", 0, DQ_PUSH_KEEP, o);
    /* nobody polls for about a second: ~10 slots pass */
    for (int i = 0; i < 200 && server_ms(r) < t0 + 1100; i++)
        usleep(20000);
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 30000, &j, NULL), 1);
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", dq_job_token(dq_jobs_at(j, 0)));
    dq_jobs_free(j);
    /* no second instance while it runs */
    j = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 30000, &j, NULL), 0);
    int64_t a0 = server_ms(r);
    ck_assert_int_eq(dq_ack(c, Q, "m", tok), 0);
    int64_t a1 = server_ms(r);
    int64_t next = due_of(c, Q, "m");
    ck_assert_int_gt(next, a0);
    ck_assert_int_le(next, a1 + 100);
    ck_assert_int_eq(live(c, Q), 1);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}
END_TEST

START_TEST(nack_retry_keeps_series) {
    dq_client *c = open_client();
    dq_push_opts *o = every_opts(60000);
    push_rep(c, Q, "n", 0, DQ_PUSH_KEEP, o);
    char tok[DQ_TOKEN_BUF];
    int64_t att = 0;
    take(c, Q, "n", tok, &att);
    ck_assert_int_eq(att, 1);
    ck_assert_int_eq(dq_nack_reason(c, Q, "n", tok, 0, 0, "boom", 4), 0);
    take(c, Q, "n", tok, &att);
    ck_assert_int_eq(att, 2);
    ck_assert_int_eq(dq_ack(c, Q, "n", tok), 0);
    dq_job_info *in = tu_must_get(c, Q, "n");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_SCHEDULED);
    ck_assert_int_eq(dq_job_info_attempts(in), 0);
    size_t len = 9;
    ck_assert_ptr_null(dq_job_info_last_error(in, &len)); /* cleared */
    ck_assert_ptr_nonnull(dq_job_info_repeat(in));
    dq_job_info_free(in);
    dq_push_opts_free(o);
    dq_close(c);
}
END_TEST

START_TEST(dead_stops_until_requeue) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = every_opts(100);
    push_rep(c, Q, "d", 0, DQ_PUSH_KEEP, o);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "d", tok, NULL);
    ck_assert_int_eq(dq_nack(c, Q, "d", tok, 0, DQ_NACK_DEAD), 1);
    int64_t t = server_ms(r);
    for (int i = 0; i < 100 && server_ms(r) < t + 400; i++)
        usleep(20000);
    ck_assert_int_eq(live(c, Q), 0); /* no run while it is dead */
    ck_stats(c, Q, 0, 0, 0, 1);
    dq_job_info *in = tu_must_get(c, Q, "d");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
    ck_assert_ptr_nonnull(dq_job_info_repeat(in));
    dq_job_info_free(in);
    ck_assert_int_eq(dq_dead_requeue(c, Q, "d", 0), 1);
    take(c, Q, "d", tok, NULL);
    ck_assert_int_eq(dq_ack(c, Q, "d", tok), 0);
    ck_assert_int_eq(live(c, Q), 1); /* the series goes on */
    ck_stats(c, Q, 1, 0, 0, 0);
    /* max attempts dead-letters too; purge ends the series */
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, 1), DQ_OK);
    push_rep(c, Q, "d2", 0, DQ_PUSH_KEEP, o);
    take(c, Q, "d2", tok, NULL);
    /* a retry nack past max attempts dead-letters it */
    ck_assert_int_eq(dq_nack(c, Q, "d2", tok, 0, 0), 1);
    in = tu_must_get(c, Q, "d2");
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
    dq_job_info_free(in);
    ck_assert_int_eq(dq_dead_purge(c, Q, "d2"), 1);
    dq_cancel(c, Q, "d", 0);
    ck_assert_int_eq(tu_sum(r, "HLEN", "dq", Q, "jobs"), 0);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}
END_TEST

START_TEST(replace_changes_rule) {
    dq_client *c = open_client();
    dq_push_opts *o = every_opts(60000);
    push_rep(c, Q, "x", 0, DQ_PUSH_KEEP, o);
    /* replace with a cron rule */
    dq_push_opts *k = cron_opts("0 3 * * *", 0);
    ck_assert_int_eq(push_rep(c, Q, "x", 0, DQ_PUSH_REPLACE, k), DQ_REPLACED);
    dq_job_info *in = tu_must_get(c, Q, "x");
    ck_assert_str_eq(dq_job_info_repeat(in), "cron 0 3 * * * tz +0");
    dq_job_info_free(in);
    /* replace without a rule: a one-off job, gone after its ack */
    ck_assert_int_eq(dq_push_ex(c, Q, "x", 1, 0, "x", DQ_PUSH_REPLACE, NULL,
                                NULL, 0, NULL),
                     0);
    in = tu_must_get(c, Q, "x");
    ck_assert_ptr_null(dq_job_info_repeat(in));
    dq_job_info_free(in);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "x", tok, NULL);
    ck_assert_int_eq(dq_ack(c, Q, "x", tok), 0);
    ck_assert_int_eq(live(c, Q), 0);
    dq_push_opts_free(k);
    dq_push_opts_free(o);
    dq_close(c);
}
END_TEST

/* One ack call of a repeating and a one-off job: the one goes on, the
 * other is gone. */
START_TEST(ack_batch_mixed) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = every_opts(60000);
    push_rep(c, Q, "rep", 0, DQ_PUSH_KEEP, o);
    push_text(c, Q, "once", 0, "one", 0, NULL);
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(c, Q, 2, 30000, &j, NULL), 2);
    const char *ids[2], *toks[2];
    for (int i = 0; i < 2; i++) {
        ids[i] = dq_job_id(dq_jobs_at(j, (size_t)i));
        toks[i] = dq_job_token(dq_jobs_at(j, (size_t)i));
    }
    int res[2] = {9, 9};
    ck_assert_int_eq(dq_ack_batch(c, Q, 2, ids, toks, res), 2);
    ck_assert_int_eq(res[0], 0);
    ck_assert_int_eq(res[1], 0);
    dq_jobs_free(j);
    ck_assert_int_eq(live(c, Q), 1);
    dq_job_info *in = NULL;
    ck_assert_int_eq(dq_get(c, Q, "one", &in), 0);
    ck_assert_int_gt(due_of(c, Q, "rep"), server_ms(r) + 50000);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A repeating ack that fails in Redis (its due key has the wrong type)
 * writes nothing: the job stays in flight under its token, and a retry
 * once the key is fixed reschedules it. */
START_TEST(ack_failure_writes_nothing) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    dq_push_opts *o = every_opts(60000);
    push_rep(c, Q, "fa", 0, DQ_PUSH_KEEP, o);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "fa", tok, NULL);
    char due_key[700], lease_key[700];
    tu_key(due_key, sizeof(due_key), "dq", Q, "due", "fa");
    tu_key(lease_key, sizeof(lease_key), "dq", Q, "lease", "fa");
    freeReplyObject(th_cmd(r, "SET %s wrongtype", due_key));
    int rc = dq_ack(c, Q, "fa", tok);
    ck_assert_msg(rc == DQ_EREDIS, "ack: %d %s", rc, dq_errmsg(c));
    redisReply *rep = th_cmd(r, "ZSCORE %s fa", lease_key);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING); /* still in flight */
    freeReplyObject(rep);
    freeReplyObject(th_cmd(r, "DEL %s", due_key));
    ck_assert_int_eq(dq_ack(c, Q, "fa", tok), 0);
    ck_assert_int_gt(due_of(c, Q, "fa"), server_ms(r));
    ck_assert_int_eq(live(c, Q), 1);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* ---- two consumers race on one series ------------------------------------- */

#define RACE_RUNS 5

typedef struct race {
    const char *q;
    pthread_mutex_t mu;
    int64_t dues[64];   /* due time of each delivery */
    int ndues;
    int acked;
    int errors;
    int64_t deadline;   /* wall ms */
} race;

static void *race_consumer(void *p) {
    race *x = p;
    dq_client *c = open_client();
    for (;;) {
        pthread_mutex_lock(&x->mu);
        int done = x->acked >= RACE_RUNS || x->errors > 0 ||
                   wall_ms() > x->deadline;
        pthread_mutex_unlock(&x->mu);
        if (done)
            break;
        dq_jobs *j = NULL;
        int n = dq_poll_wait(c, x->q, 1, 30000, 200, &j);
        if (n < 0) {
            pthread_mutex_lock(&x->mu);
            x->errors++;
            pthread_mutex_unlock(&x->mu);
            break;
        }
        if (n == 0)
            continue;
        const dq_job *job = dq_jobs_at(j, 0);
        pthread_mutex_lock(&x->mu);
        if (x->ndues < 64)
            x->dues[x->ndues++] = dq_job_due_ms(job);
        if (dq_job_attempt(job) != 1)
            x->errors++;
        pthread_mutex_unlock(&x->mu);
        int a = dq_ack(c, x->q, dq_job_id(job), dq_job_token(job));
        pthread_mutex_lock(&x->mu);
        if (a == 0)
            x->acked++;
        else
            x->errors++;
        pthread_mutex_unlock(&x->mu);
        dq_jobs_free(j);
    }
    dq_close(c);
    return NULL;
}

START_TEST(two_consumers_race) {
    dq_client *c = open_client();
    dq_push_opts *o = every_opts(200);
    push_rep(c, Q, "race", 0, DQ_PUSH_KEEP, o);
    race x = {.q = Q, .deadline = wall_ms() + 30000};
    pthread_mutex_init(&x.mu, NULL);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, race_consumer, &x);
    /* meanwhile: never more or less than one instance */
    int bad = 0;
    for (int i = 0; i < 3000; i++) {
        pthread_mutex_lock(&x.mu);
        int done = x.acked >= RACE_RUNS || x.errors > 0 ||
                   wall_ms() > x.deadline;
        pthread_mutex_unlock(&x.mu);
        if (done)
            break;
        if (live(c, Q) != 1)
            bad++;
        usleep(5000);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_eq(x.errors, 0);
    ck_assert_int_ge(x.acked, RACE_RUNS);
    /* one delivery per run: each due slot once, in order */
    for (int i = 1; i < x.ndues; i++)
        ck_assert_msg(x.dues[i] > x.dues[i - 1], "run %d delivered twice", i);
    ck_assert_int_eq(live(c, Q), 1);
    pthread_mutex_destroy(&x.mu);
    dq_push_opts_free(o);
    dq_close(c);
}
END_TEST

/* ---- bad inputs -------------------------------------------------------------- */

START_TEST(bad_inputs_send_nothing) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    long long before = commands_processed(r);
    dq_push_opts *o = dq_push_opts_new();
    static const char *const bad[] = {"", "* * * *", "61 * * * *",
                                      "0 0 30 2 *", "*/0 * * * *",
                                      "1-0 * * * *", "* * * * mon-"};
    for (size_t i = 1; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, bad[i]) ==
                          DQ_EINVAL,
                      "'%s' accepted", bad[i]);
        ck_assert_str_ne(dq_push_opts_errmsg(o), "");
    }
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 9), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS,
                                      DQ_DELAY_MAX + 1), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_TZ_OFFSET_MIN, 900),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_MAX_ATTEMPTS, "3"),
                     DQ_EINVAL);
    /* no id */
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 1000), DQ_OK);
    ck_assert_int_eq(dq_push_ex(c, Q, "x", 1, 0, NULL, DQ_PUSH_KEEP, o, NULL,
                                0, NULL),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "id"));
    const void *pl[2] = {"a", "b"};
    size_t lens[2] = {1, 1};
    const char *ids[2] = {"a", NULL};
    ck_assert_int_eq(dq_push_batch_ex(c, Q, 2, pl, lens, NULL, ids,
                                      DQ_PUSH_KEEP, o, NULL, NULL),
                     DQ_EINVAL);
    /* repeat + expiry */
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_IN_MS, 5000), DQ_OK);
    ck_assert_int_eq(dq_push_ex(c, Q, "x", 1, 0, "id", DQ_PUSH_KEEP, o, NULL,
                                0, NULL),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "expire"));
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, "0 * * * *"),
                     DQ_OK);
    ck_assert_int_eq(dq_push_ex(c, Q, "x", 1, 0, "id", DQ_PUSH_KEEP, o, NULL,
                                0, NULL),
                     DQ_EINVAL);
    long long after = commands_processed(r);
    ck_assert_msg(after - before == 1,
                  "%lld commands reached Redis (expected only the INFO)",
                  after - before);
    dq_push_opts_free(o);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("repeat", TU_SRV_UNIX,
    {"every_reschedules_on_ack", every_reschedules_on_ack, 60, NULL},
    {"cron_first_and_next", cron_first_and_next, 120, NULL},
    {"cron_absolute_dates", cron_absolute_dates, 30, NULL},
    {"cron_random_rules", cron_random_rules, 120, NULL},
    {"idempotent_by_id_concurrent", idempotent_by_id_concurrent, 60, NULL},
    {"cancel_stops_series", cancel_stops_series, 30, NULL},
    {"missed_runs_run_once", missed_runs_run_once, 60, NULL},
    {"nack_retry_keeps_series", nack_retry_keeps_series, 30, NULL},
    {"dead_stops_until_requeue", dead_stops_until_requeue, 60, NULL},
    {"replace_changes_rule", replace_changes_rule, 30, NULL},
    {"ack_batch_mixed", ack_batch_mixed, 30, NULL},
    {"ack_failure_writes_nothing", ack_failure_writes_nothing, 30, NULL},
    {"two_consumers_race", two_consumers_race, 90, NULL},
    {"bad_inputs_send_nothing", bad_inputs_send_nothing, 30, NULL})
