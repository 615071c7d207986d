/*
 * tests/test_settings.c - queue settings stored in Redis (dq_config_set/
 * get), push options (dq_push_ex: a job's own max attempts, expiry) and
 * what the scripts do with them: max attempts precedence, the default
 * lease, retry backoff, dead-letter retention, expired jobs and the rate
 * limit, over one and several clients.
 *
 * Times come from the server (TIME, lease deadlines, dq_get's now_ms);
 * sleeps only make a job due or let a short expiry pass, never bound how
 * fast something happens.
 */
#include <pthread.h>

#include "delayq-consumer.h"
#include "test_suite.h"
#include "test_utils.h"

static dq_client *C;
static redisContext *R;
static long long before;

/* ---- helpers ----------------------------------------------------------- */

static void set1(dq_client *c, const char *q, int s, int64_t v) {
    int rc = dq_config_set(c, q, 1, &s, &v);
    ck_assert_msg(rc == 0, "config set %s=%" PRId64 ": %d %s",
                  dq_setting_name(s), v, rc, dq_errmsg(c));
}

static void set2(dq_client *c, const char *q, int s1, int64_t v1, int s2,
                 int64_t v2) {
    int s[2] = {s1, s2};
    int64_t v[2] = {v1, v2};
    int rc = dq_config_set(c, q, 2, s, v);
    ck_assert_msg(rc == 0, "config set: %d %s", rc, dq_errmsg(c));
}

static int64_t get1(dq_client *c, const char *q, int s) {
    int64_t v = -99;
    int rc = dq_config_get(c, q, 1, &s, &v);
    ck_assert_msg(rc == 0, "config get: %d %s", rc, dq_errmsg(c));
    return v;
}

/* dq_get of id; the info (NULL when unknown). */
static dq_job_info *info_of(dq_client *c, const char *q, const char *id) {
    dq_job_info *in = NULL;
    int rc = dq_get(c, q, id, &in);
    ck_assert_msg(rc >= 0, "dq_get: %d %s", rc, dq_errmsg(c));
    return in;
}

/* Fails unless id is dead with last reason `why`. */
static void ck_dead(dq_client *c, const char *q, const char *id,
                    const char *why) {
    dq_job_info *in = info_of(c, q, id);
    ck_assert_msg(in != NULL, "%s is unknown, expected dead", id);
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_DEAD);
    size_t len = 0;
    const char *e = dq_job_info_last_error(in, &len);
    if (why[0] == '\0') /* none recorded */
        ck_assert_msg(e == NULL || len == 0, "%s: reason '%.*s'", id,
                      (int)len, e);
    else
        ck_assert_msg(e != NULL && len == strlen(why) &&
                          memcmp(e, why, len) == 0,
                  "%s: reason '%.*s', expected '%s'", id, (int)len,
                  e ? e : "", why);
    dq_job_info_free(in);
}

static void ck_unknown(dq_client *c, const char *q, const char *id) {
    dq_job_info *in = NULL;
    int rc = dq_get(c, q, id, &in);
    ck_assert_msg(rc == 0 && in == NULL, "%s: dq_get %d, expected unknown",
                  id, rc);
}

/* Makes a pending job due now (its due score to 0). */
static void make_due(const char *q, const char *id) {
    char key[512];
    tu_key(key, sizeof(key), "dq", q, "due", id);
    redisReply *rep = th_cmd(R, "ZADD %s XX CH 0 %s", key, id);
    ck_assert_int_eq((int)rep->integer, 1);
    freeReplyObject(rep);
}

/* Polls (lease_ms) until the job id is delivered (2 s); returns the list
 * holding it at index 0 (max 1). */
static dq_jobs *poll_id(dq_client *c, const char *q, const char *id,
                        int64_t lease_ms) {
    dq_jobs *j = poll_until(c, q, 1, lease_ms, 2000);
    ck_assert_msg(j != NULL, "%s not delivered", id);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), id);
    return j;
}

/* Pushes with options; returns the outcome. */
static int push_ex(dq_client *c, const char *q, const char *id, int64_t when,
                   int flags, const dq_push_opts *o) {
    int outcome = -1;
    char buf[DQ_ID_BUF];
    int rc = dq_push_ex(c, q, "x", 1, when, id, flags, o, buf, sizeof(buf),
                        &outcome);
    ck_assert_msg(rc == 0, "dq_push_ex %s: %d %s", id, rc, dq_errmsg(c));
    return outcome;
}

static dq_push_opts *opts1(int opt, int64_t v) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_push_opts_set(o, opt, v), 0);
    return o;
}

static void setup(void) {
    C = open_client();
    R = rconn();
}

static void teardown(void) {
    dq_close(C);
    redisFree(R);
}

static const tu_fixture fx = {setup, teardown};

static void mark(void) { before = commands_processed(R); }

static void nothing_sent(void) { tu_nothing_sent(R, before); }

#define BAD(call, code, word) tu_bad(C, call, code, word)

/* ---- config set / get -------------------------------------------------- */

START_TEST(roundtrip) {
    int all[DQ_SET__COUNT];
    int64_t v[DQ_SET__COUNT], got[DQ_SET__COUNT];
    int np = tu_parts();
    for (int i = 0; i < DQ_SET__COUNT; i++)
        all[i] = i + 1;
    v[DQ_SET_MAX_ATTEMPTS - 1] = 4;
    v[DQ_SET_LEASE_MS - 1] = 1234;
    v[DQ_SET_BACKOFF - 1] = DQ_BACKOFF_EXPONENTIAL;
    v[DQ_SET_BACKOFF_BASE_MS - 1] = 10;
    v[DQ_SET_BACKOFF_CAP_MS - 1] = 5000;
    v[DQ_SET_BACKOFF_JITTER - 1] = 25;
    v[DQ_SET_DEAD_MAX - 1] = 77;
    v[DQ_SET_DEAD_TTL_MS - 1] = 86400000;
    v[DQ_SET_EXPIRED - 1] = DQ_EXPIRED_DROP;
    v[DQ_SET_RATE_MAX - 1] = 10 * np;
    v[DQ_SET_RATE_WINDOW_MS - 1] = 1000;
    v[DQ_SET_LAYOUT - 1] = DQ_LAYOUT_COMPACT;
    v[DQ_SET_MAX_INFLIGHT - 1] = 7 * np;
    v[DQ_SET_GROUP_MAX_INFLIGHT - 1] = 3 * np;
    for (int i = 0; i < DQ_SET__COUNT; i++)
        got[i] = -99;
    /* nothing set yet: all DQ_UNSET */
    ck_assert_int_eq(dq_config_get(C, Q, DQ_SET__COUNT, all, got), 0);
    for (int i = 0; i < DQ_SET__COUNT; i++)
        ck_assert_int_eq(got[i], DQ_UNSET);
    ck_assert_int_eq(dq_config_set(C, Q, DQ_SET__COUNT, all, v), 0);
    ck_assert_int_eq(dq_config_get(C, Q, DQ_SET__COUNT, all, got), 0);
    for (int i = 0; i < DQ_SET__COUNT; i++)
        ck_assert_msg(got[i] == v[i], "%s: %" PRId64 ", set %" PRId64,
                      dq_setting_name(i + 1), got[i], v[i]);
    /* another client sees the same; a subset in any order */
    dq_client *c2 = open_client();
    int some[3] = {DQ_SET_RATE_MAX, DQ_SET_MAX_ATTEMPTS, DQ_SET_EXPIRED};
    ck_assert_int_eq(dq_config_get(c2, Q, 3, some, got), 0);
    ck_assert_int_eq(got[0], 10 * np);
    ck_assert_int_eq(got[1], 4);
    ck_assert_int_eq(got[2], DQ_EXPIRED_DROP);
    /* unset some, change one: the others stay */
    int ch[4] = {DQ_SET_MAX_ATTEMPTS, DQ_SET_RATE_MAX, DQ_SET_RATE_WINDOW_MS,
                 DQ_SET_LEASE_MS};
    int64_t cv[4] = {DQ_UNSET, DQ_UNSET, DQ_UNSET, 999};
    ck_assert_int_eq(dq_config_set(c2, Q, 4, ch, cv), 0);
    ck_assert_int_eq(dq_config_get(C, Q, DQ_SET__COUNT, all, got), 0);
    for (int i = 0; i < DQ_SET__COUNT; i++) {
        int64_t want = v[i];
        if (all[i] == DQ_SET_MAX_ATTEMPTS || all[i] == DQ_SET_RATE_MAX ||
            all[i] == DQ_SET_RATE_WINDOW_MS)
            want = DQ_UNSET;
        if (all[i] == DQ_SET_LEASE_MS)
            want = 999;
        ck_assert_msg(got[i] == want, "%s: %" PRId64 ", want %" PRId64,
                      dq_setting_name(i + 1), got[i], want);
    }
    /* boundary values are accepted */
    set1(C, Q, DQ_SET_MAX_ATTEMPTS, 0);
    ck_assert_int_eq(get1(C, Q, DQ_SET_MAX_ATTEMPTS), 0);
    set1(C, Q, DQ_SET_MAX_ATTEMPTS, DQ_ATTEMPTS_MAX);
    set1(C, Q, DQ_SET_LEASE_MS, DQ_LEASE_MAX);
    set1(C, Q, DQ_SET_BACKOFF_CAP_MS, DQ_DELAY_MAX);
    set1(C, Q, DQ_SET_BACKOFF_JITTER, 100);
    set2(C, Q, DQ_SET_RATE_MAX, DQ_RATE_MAX, DQ_SET_RATE_WINDOW_MS,
         DQ_RATE_WINDOW_MAX);
    ck_assert_int_eq(get1(C, Q, DQ_SET_RATE_MAX), DQ_RATE_MAX);
    /* unset everything: the conf hash is gone */
    for (int i = 0; i < DQ_SET__COUNT; i++)
        v[i] = DQ_UNSET;
    ck_assert_int_eq(dq_config_set(C, Q, DQ_SET__COUNT, all, v), 0);
    ck_assert_int_eq(dq_config_get(C, Q, DQ_SET__COUNT, all, got), 0);
    for (int i = 0; i < DQ_SET__COUNT; i++)
        ck_assert_int_eq(got[i], DQ_UNSET);
    ck_assert_int_eq(tu_sum(R, "EXISTS", "dq", Q, "conf"), 0);
    dq_close(c2);
}
END_TEST

START_TEST(setting_names) {
    for (int s = 1; s <= DQ_SET__COUNT; s++) {
        const char *n = dq_setting_name(s);
        ck_assert_ptr_nonnull(n);
        ck_assert_int_eq(dq_setting_by_name(n), s);
    }
    ck_assert_str_eq(dq_setting_name(DQ_SET_MAX_ATTEMPTS), "max_attempts");
    ck_assert_str_eq(dq_setting_name(DQ_SET_RATE_WINDOW_MS), "rate_window_ms");
    ck_assert_ptr_null(dq_setting_name(0));
    ck_assert_ptr_null(dq_setting_name(-1));
    ck_assert_ptr_null(dq_setting_name(DQ_SET__COUNT + 1));
    ck_assert_int_eq(dq_setting_by_name("nope"), DQ_EINVAL);
    ck_assert_int_eq(dq_setting_by_name(""), DQ_EINVAL);
    ck_assert_int_eq(dq_setting_by_name("MAX_ATTEMPTS"), DQ_EINVAL);
    ck_assert_int_eq(dq_setting_by_name("rate_part"), DQ_EINVAL);
    ck_assert_int_eq(dq_setting_by_name(NULL), DQ_ENULL);
}
END_TEST

START_TEST(bad_input) {
    int s1 = DQ_SET_LEASE_MS;
    int64_t v1 = 5000, out[DQ_SET__COUNT + 1];
    /* a queue with a setting, to see that nothing changes */
    set1(C, Q, DQ_SET_LEASE_MS, 4321);
    mark();
    ck_assert_int_eq(dq_config_set(NULL, Q, 1, &s1, &v1), DQ_ENULL);
    ck_assert_int_eq(dq_config_get(NULL, Q, 1, &s1, out), DQ_ENULL);
    BAD(dq_config_set(C, NULL, 1, &s1, &v1), DQ_ENULL, "queue");
    BAD(dq_config_set(C, "", 1, &s1, &v1), DQ_EQUEUE, "queue");
    BAD(dq_config_set(C, Q, 0, &s1, &v1), DQ_EINVAL, "n is 0");
    int many[DQ_SET__COUNT + 1];
    int64_t mv[DQ_SET__COUNT + 1];
    for (int i = 0; i <= DQ_SET__COUNT; i++)
        many[i] = (i % DQ_SET__COUNT) + 1, mv[i] = 1;
    BAD(dq_config_set(C, Q, DQ_SET__COUNT + 1, many, mv), DQ_EINVAL, "n is");
    BAD(dq_config_get(C, Q, DQ_SET__COUNT + 1, many, out), DQ_EINVAL, "n is");
    BAD(dq_config_get(C, Q, 0, many, out), DQ_EINVAL, "n is 0");
    BAD(dq_config_set(C, Q, 1, NULL, &v1), DQ_ENULL, "settings");
    BAD(dq_config_set(C, Q, 1, &s1, NULL), DQ_ENULL, "values");
    BAD(dq_config_get(C, Q, 1, NULL, out), DQ_ENULL, "settings");
    BAD(dq_config_get(C, Q, 1, &s1, NULL), DQ_ENULL, "values");
    int unknown[] = {0, -1, DQ_SET__COUNT + 1, 1000};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        BAD(dq_config_set(C, Q, 1, &unknown[i], &v1), DQ_EINVAL,
            "no such setting");
        BAD(dq_config_get(C, Q, 1, &unknown[i], out), DQ_EINVAL,
            "no such setting");
    }
    int dup[3] = {DQ_SET_LEASE_MS, DQ_SET_BACKOFF, DQ_SET_LEASE_MS};
    int64_t dv[3] = {5000, 1, 6000};
    BAD(dq_config_set(C, Q, 3, dup, dv), DQ_EINVAL, "twice");
    BAD(dq_config_get(C, Q, 3, dup, out), DQ_EINVAL, "twice");
    /* out of range, each setting: just below and just above (DQ_UNSET is
     * -1, so below 0 is -2) */
    static const struct {
        int s;
        int64_t lo, hi;
    } rng[] = {
        {DQ_SET_MAX_ATTEMPTS, 0, DQ_ATTEMPTS_MAX},
        {DQ_SET_LEASE_MS, DQ_LEASE_MIN, DQ_LEASE_MAX},
        {DQ_SET_BACKOFF, DQ_BACKOFF_FIXED, DQ_BACKOFF_EXPONENTIAL},
        {DQ_SET_BACKOFF_BASE_MS, 0, DQ_DELAY_MAX},
        {DQ_SET_BACKOFF_CAP_MS, 0, DQ_DELAY_MAX},
        {DQ_SET_BACKOFF_JITTER, 0, 100},
        {DQ_SET_DEAD_MAX, 1, INT64_C(1000000000)},
        {DQ_SET_DEAD_TTL_MS, 1, DQ_DELAY_MAX},
        {DQ_SET_EXPIRED, DQ_EXPIRED_DEAD, DQ_EXPIRED_DROP},
        {DQ_SET_RATE_MAX, 1, DQ_RATE_MAX},
        {DQ_SET_RATE_WINDOW_MS, 1, DQ_RATE_WINDOW_MAX},
    };
    for (size_t i = 0; i < sizeof(rng) / sizeof(rng[0]); i++) {
        int ss[2] = {rng[i].s, rng[i].s == DQ_SET_RATE_MAX
                                   ? DQ_SET_RATE_WINDOW_MS
                                   : DQ_SET_RATE_MAX};
        int64_t bad[3] = {rng[i].lo - 1 == DQ_UNSET ? -2 : rng[i].lo - 1,
                          rng[i].hi + 1, INT64_MIN};
        for (int k = 0; k < 3; k++) {
            int64_t vv[2] = {bad[k], 1000};
            BAD(dq_config_set(C, Q, 2, ss, vv), DQ_EINVAL,
                dq_setting_name(rng[i].s));
        }
    }
    /* a valid setting before a bad one: nothing is sent either */
    int mix[2] = {DQ_SET_MAX_ATTEMPTS, DQ_SET_BACKOFF_JITTER};
    int64_t mixv[2] = {3, 101};
    BAD(dq_config_set(C, Q, 2, mix, mixv), DQ_EINVAL, "backoff_jitter");
    /* rate_max below the partition count (only a partitioned queue has
     * one above 1) */
    if (tu_parts() > 1) {
        int rs[2] = {DQ_SET_RATE_MAX, DQ_SET_RATE_WINDOW_MS};
        int64_t rv[2] = {tu_parts() - 1, 1000};
        BAD(dq_config_set(C, Q, 2, rs, rv), DQ_EINVAL, "partitions");
    }
    nothing_sent();
    /* half a rate limit: refused before anything is sent */
    int rs[2] = {DQ_SET_RATE_MAX, DQ_SET_LEASE_MS};
    int64_t rv[2] = {10 * tu_parts(), 777};
    BAD(dq_config_set(C, Q, 2, rs, rv), DQ_EINVAL, "together");
    BAD(dq_config_set(C, Q, 1, (int[]){DQ_SET_RATE_WINDOW_MS},
                      (int64_t[]){100}),
        DQ_EINVAL, "together");
    ck_assert_int_eq(get1(C, Q, DQ_SET_LEASE_MS), 4321);
    ck_assert_int_eq(get1(C, Q, DQ_SET_RATE_MAX), DQ_UNSET);
    ck_assert_int_eq(get1(C, Q, DQ_SET_RATE_WINDOW_MS), DQ_UNSET);
    /* with a whole limit set, unsetting half of it is refused too */
    set2(C, Q, DQ_SET_RATE_MAX, 10 * tu_parts(), DQ_SET_RATE_WINDOW_MS, 100);
    BAD(dq_config_set(C, Q, 1, (int[]){DQ_SET_RATE_WINDOW_MS},
                      (int64_t[]){DQ_UNSET}),
        DQ_EINVAL, "together");
    ck_assert_int_eq(get1(C, Q, DQ_SET_RATE_WINDOW_MS), 100);
    ck_assert_int_eq(get1(C, Q, DQ_SET_RATE_MAX), 10 * tu_parts());
    /* changing one half alone is refused as well; both together is fine */
    BAD(dq_config_set(C, Q, 1, (int[]){DQ_SET_RATE_WINDOW_MS},
                      (int64_t[]){200}),
        DQ_EINVAL, "together");
    set2(C, Q, DQ_SET_RATE_MAX, 10 * tu_parts(), DQ_SET_RATE_WINDOW_MS, 200);
    ck_assert_int_eq(get1(C, Q, DQ_SET_RATE_WINDOW_MS), 200);

    /* push options */
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_push_opts_set(NULL, DQ_PUSHOPT_MAX_ATTEMPTS, 1),
                     DQ_ENULL);
    ck_assert_int_eq(dq_push_opts_set(o, 0, 1), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, 4, 1), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, -1),
                     DQ_EINVAL);
    ck_assert_int_eq(
        dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, DQ_ATTEMPTS_MAX + 1),
        DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_AT, DQ_AT_MAX + 1),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_AT, -5), DQ_EINVAL);
    ck_assert_int_eq(
        dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_IN_MS, DQ_DELAY_MAX + 1),
        DQ_EINVAL);
    dq_push_opts_free(NULL);
    /* an expiry not after the due time: refused, nothing sent */
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_IN_MS, 500), 0);
    mark();
    char idb[DQ_ID_BUF];
    int oc = -1;
    BAD(dq_push_ex(C, Q, "x", 1, 500, "e1", 0, o, idb, sizeof(idb), &oc),
        DQ_EINVAL, "expires");
    BAD(dq_push_ex(C, Q, "x", 1, 1000, "e1", 0, o, idb, sizeof(idb), &oc),
        DQ_EINVAL, "expires");
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_AT, 2000000), 0);
    BAD(dq_push_ex(C, Q, "x", 1, 2000000, "e1", DQ_PUSH_AT, o, idb,
                   sizeof(idb), &oc),
        DQ_EINVAL, "expires");
    const void *pls[2] = {"a", "b"};
    size_t lens[2] = {1, 1};
    int64_t times[2] = {1000000, 3000000};
    int ocs[2];
    BAD(dq_push_batch_ex(C, Q, 2, pls, lens, times, NULL, DQ_PUSH_AT, o, NULL,
                         ocs),
        DQ_EINVAL, "expires");
    /* the usual checks still come first */
    BAD(dq_push_ex(C, Q, NULL, 1, 0, "e1", 0, o, idb, sizeof(idb), &oc),
        DQ_ENULL, "payload");
    nothing_sent();
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", Q, "due"), 0);
    dq_push_opts_free(o);
}
END_TEST

/* ---- max attempts ------------------------------------------------------ */

/* Delivers id and nacks it (delay 0) until a nack dead-letters it;
 * returns the number of deliveries.  c[k % 2] polls the k-th time. */
static int deliveries_until_dead(dq_client *const *c, const char *q,
                                 const char *id) {
    for (int k = 1; k <= 20; k++) {
        dq_client *cl = c[k % 2];
        dq_jobs *j = poll_id(cl, q, id, 30000);
        const dq_job *job = dq_jobs_at(j, 0);
        ck_assert_int_eq(dq_job_attempt(job), k);
        int rc = dq_nack(cl, q, id, dq_job_token(job), 0, 0);
        dq_jobs_free(j);
        ck_assert_msg(rc == 0 || rc == 1, "nack: %d %s", rc, dq_errmsg(cl));
        if (rc == 1)
            return k;
    }
    ck_abort_msg("%s never dead-lettered", id);
    return -1;
}

START_TEST(max_attempts_precedence) {
    dq_client *a = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 5);
    dq_client *b = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1);
    dq_client *aa[2] = {a, a}, *ab[2] = {a, b};
    /* no setting: the client's option */
    push_text(a, Q, "x", 0, "j1", 0, NULL);
    ck_assert_int_eq(deliveries_until_dead(aa, Q, "j1"), 5);
    /* the queue's setting beats the client's option */
    set1(a, Q, DQ_SET_MAX_ATTEMPTS, 3);
    push_text(a, Q, "x", 0, "j2", 0, NULL);
    ck_assert_int_eq(deliveries_until_dead(aa, Q, "j2"), 3);
    /* clients with options 5 and 1 agree */
    push_text(a, Q, "x", 0, "j3", 0, NULL);
    ck_assert_int_eq(deliveries_until_dead(ab, Q, "j3"), 3);
    /* the job's own beats both */
    dq_push_opts *o = opts1(DQ_PUSHOPT_MAX_ATTEMPTS, 4);
    ck_assert_int_eq(push_ex(a, Q, "j4", 0, 0, o), DQ_PUSHED);
    ck_assert_int_eq(deliveries_until_dead(ab, Q, "j4"), 4);
    /* setting 0: unlimited, whatever the clients say */
    set1(a, Q, DQ_SET_MAX_ATTEMPTS, 0);
    push_text(a, Q, "x", 0, "j5", 0, NULL);
    for (int k = 1; k <= 7; k++) {
        dq_jobs *j = poll_id(b, Q, "j5", 30000);
        const char *tok = dq_job_token(dq_jobs_at(j, 0));
        if (k < 7)
            ck_assert_int_eq(dq_nack(b, Q, "j5", tok, 0, 0), 0);
        else
            ck_assert_int_eq(dq_ack(b, Q, "j5", tok), 0);
        dq_jobs_free(j);
    }
    /* a lease that runs out: the poll dead-letters, reason "max attempts" */
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, 2), 0);
    ck_assert_int_eq(push_ex(b, Q, "j6", 0, 0, o), DQ_PUSHED);
    dq_jobs_free(poll_id(b, Q, "j6", 1));
    th_sleep_ms(5);
    dq_jobs *j = poll_id(b, Q, "j6", 1);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(j, 0)), 2);
    dq_jobs_free(j);
    th_sleep_ms(5);
    dq_jobs *none = NULL;
    for (int i = 0; i < 3; i++) /* the other partitions' polls, if any */
        ck_assert_int_eq(poll_n(b, Q, 10, 30000, &none, NULL) >= 0, 1);
    ck_assert_ptr_null(none);
    ck_dead(a, Q, "j6", "max attempts");
    ck_dead(a, Q, "j2", "max attempts"); /* a nack past max attempts */
    dq_push_opts_free(o);
    dq_close(a);
    dq_close(b);
}
END_TEST

/* ---- default lease ----------------------------------------------------- */

/* Pushes id, polls it with lease 0 through c and checks the lease it
 * got: the poll ran between two TIMEs t0 and t1, so its deadline is in
 * [t0 + lease, t1 + lease] (no bound on how long the poll took). */
static void ck_lease_given(dq_client *c, const char *q, const char *id,
                           int64_t lease) {
    push_text(c, q, "x", 0, id, 0, NULL);
    int64_t t0 = server_ms(R);
    dq_jobs *j = poll_id(c, q, id, 0);
    int64_t t1 = server_ms(R);
    int64_t dl = dq_job_lease_deadline_ms(dq_jobs_at(j, 0));
    dq_jobs_free(j);
    dq_job_info *in = info_of(c, q, id);
    ck_assert_int_eq(dq_job_info_lease_deadline_ms(in), dl);
    dq_job_info_free(in);
    ck_assert_msg(dl >= t0 + lease && dl <= t1 + lease,
                  "%s: deadline %" PRId64 " not in [%" PRId64 ", %" PRId64
                  "] (lease %" PRId64 ")", id, dl, t0 + lease, t1 + lease,
                  lease);
}

START_TEST(default_lease) {
    dq_client *c = open_client_opt(DQ_OPT_LEASE_MS, 45000);
    ck_lease_given(C, Q, "d1", 30000); /* DQ_OPT_LEASE_MS's default */
    ck_lease_given(c, Q, "d2", 45000);
    set1(C, Q, DQ_SET_LEASE_MS, 7000);
    ck_lease_given(c, Q, "d3", 7000);
    ck_lease_given(C, Q, "d4", 7000);
    /* an explicit lease still wins */
    push_text(C, Q, "x", 0, "d5", 0, NULL);
    int64_t t0 = server_ms(R);
    dq_jobs *j = poll_id(C, Q, "d5", 100000);
    int64_t t1 = server_ms(R);
    int64_t dl = dq_job_lease_deadline_ms(dq_jobs_at(j, 0));
    ck_assert_msg(dl >= t0 + 100000 && dl <= t1 + 100000, "lease %" PRId64,
                  dl - t0);
    dq_jobs_free(j);
    /* poll_wait too */
    push_text(C, Q, "x", 0, "d6", 0, NULL);
    t0 = server_ms(R);
    j = NULL;
    ck_assert_int_eq(dq_poll_wait(C, Q, 1, 0, 1000, &j), 1);
    t1 = server_ms(R);
    dl = dq_job_lease_deadline_ms(dq_jobs_at(j, 0));
    ck_assert_msg(dl >= t0 + 7000 && dl <= t1 + 7000, "lease %" PRId64,
                  dl - t0);
    dq_jobs_free(j);
    set1(C, Q, DQ_SET_LEASE_MS, DQ_UNSET);
    ck_lease_given(c, Q, "d7", 45000);
    /* the option's range */
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_LEASE_MS, 0), DQ_EINVAL);
    ck_assert_int_eq(
        dq_options_set_int(o, DQ_OPT_LEASE_MS, DQ_LEASE_MAX + 1), DQ_EINVAL);
    dq_options_free(o);
    dq_close(c);
}
END_TEST

/* ---- consumers follow the queue's backoff ------------------------------ */

/* A handler that asks for a retry (the consumer's backoff) and stops. */
static int retry_once(dq_consumer *c, const dq_job *job, void *ud) {
    (void)job;
    (void)ud;
    dq_consumer_interrupt(c);
    return DQ_JOB_RETRY;
}

START_TEST(consumer_follows_queue_backoff) {
    /* the queue says 10 minutes; the consumer's own backoff says 1 s */
    set2(C, Q, DQ_SET_BACKOFF, DQ_BACKOFF_FIXED, DQ_SET_BACKOFF_BASE_MS,
         600000);
    push_text(C, Q, "x", 0, "cb", 0, NULL);
    dq_consumer *cons = NULL;
    ck_assert_int_eq(dq_consumer_new_sync(C, Q, retry_once, NULL, &cons), 0);
    ck_assert_int_eq(dq_consumer_set_int(cons, DQ_COPT_RETRY_BACKOFF,
                                         DQ_BACKOFF_FIXED), 0);
    ck_assert_int_eq(dq_consumer_set_int(cons, DQ_COPT_RETRY_BASE_MS, 1000),
                     0);
    int64_t t0 = server_ms(R);
    ck_assert_int_ge(dq_consumer_run(cons), 0);
    dq_consumer_free(cons);
    dq_job_info *in = info_of(C, Q, "cb");
    ck_assert_ptr_nonnull(in);
    ck_assert_int_eq(dq_job_info_state(in), DQ_JOB_SCHEDULED);
    int64_t d = dq_job_info_due_ms(in) - t0;
    dq_job_info_free(in);
    ck_assert_msg(d >= 600000 && d < 600000 + 30000, "retry in %" PRId64, d);
    /* without queue settings the consumer's own backoff holds again */
    set2(C, Q, DQ_SET_BACKOFF, DQ_UNSET, DQ_SET_BACKOFF_BASE_MS, DQ_UNSET);
    make_due(Q, "cb");
    ck_assert_int_eq(dq_consumer_new_sync(C, Q, retry_once, NULL, &cons), 0);
    dq_consumer_set_int(cons, DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_FIXED);
    dq_consumer_set_int(cons, DQ_COPT_RETRY_BASE_MS, 1000);
    t0 = server_ms(R);
    ck_assert_int_ge(dq_consumer_run(cons), 0);
    dq_consumer_free(cons);
    in = info_of(C, Q, "cb");
    ck_assert_ptr_nonnull(in);
    d = dq_job_info_due_ms(in) - t0;
    dq_job_info_free(in);
    ck_assert_msg(d >= 1000 && d < 31000, "retry in %" PRId64, d);
}
END_TEST

/* ---- backoff ----------------------------------------------------------- */

/* Nacks id (held by j) with DQ_NACK_BACKOFF and delay_ms; returns the
 * delay it got: due time minus the server time (bounded by a TIME before
 * and after: the returned value is the largest it can be). */
static int64_t nack_delay(dq_client *c, const char *q, dq_jobs *j,
                          int64_t delay_ms, int64_t *slack) {
    const dq_job *job = dq_jobs_at(j, 0);
    int64_t t0 = server_ms(R);
    int rc = dq_nack(c, q, dq_job_id(job), dq_job_token(job), delay_ms,
                     DQ_NACK_BACKOFF);
    int64_t t1 = server_ms(R);
    ck_assert_msg(rc == 0, "nack: %d %s", rc, dq_errmsg(c));
    dq_job_info *in = info_of(c, q, dq_job_id(job));
    ck_assert_ptr_nonnull(in);
    int64_t due = dq_job_info_due_ms(in);
    dq_job_info_free(in);
    *slack = t1 - t0;
    return due - t0;
}

/* Checks that a nack's delay d (measured as due - t0) is want: d is in
 * [want, want + slack]. */
#define CK_DELAY(d, slack, want)                                              \
    ck_assert_msg((d) >= (want) && (d) <= (want) + (slack),                   \
                  "delay %" PRId64 " (slack %" PRId64 "), want %" PRId64,     \
                  (int64_t)(d), (int64_t)(slack), (int64_t)(want))

START_TEST(backoff) {
    int64_t slack, d;
    /* without settings the given delay holds */
    push_text(C, Q, "x", 0, "b1", 0, NULL);
    dq_jobs *j = poll_id(C, Q, "b1", 30000);
    d = nack_delay(C, Q, j, 12345, &slack);
    CK_DELAY(d, slack, 12345);
    dq_jobs_free(j);
    /* fixed, default base 1000 */
    set1(C, Q, DQ_SET_BACKOFF, DQ_BACKOFF_FIXED);
    make_due(Q, "b1");
    j = poll_id(C, Q, "b1", 30000);
    d = nack_delay(C, Q, j, 12345, &slack);
    CK_DELAY(d, slack, 1000);
    dq_jobs_free(j);
    /* a nack without the flag keeps its own delay */
    make_due(Q, "b1");
    j = poll_id(C, Q, "b1", 30000);
    int64_t t0 = server_ms(R);
    ck_assert_int_eq(dq_nack(C, Q, "b1", dq_job_token(dq_jobs_at(j, 0)),
                             50000, 0),
                     0);
    dq_jobs_free(j);
    dq_job_info *in = info_of(C, Q, "b1");
    ck_assert_int_ge(dq_job_info_due_ms(in) - t0, 50000);
    ck_assert_int_lt(dq_job_info_due_ms(in) - t0, 52000);
    dq_job_info_free(in);
    /* fixed base: the same at every attempt */
    set1(C, Q, DQ_SET_BACKOFF_BASE_MS, 20000);
    for (int k = 0; k < 3; k++) {
        make_due(Q, "b1");
        j = poll_id(C, Q, "b1", 30000);
        d = nack_delay(C, Q, j, 1, &slack);
        CK_DELAY(d, slack, 20000);
        dq_jobs_free(j);
    }
    /* exponential: base * 2^(attempt-1), capped */
    set2(C, Q, DQ_SET_BACKOFF, DQ_BACKOFF_EXPONENTIAL,
         DQ_SET_BACKOFF_CAP_MS, 50000);
    set1(C, Q, DQ_SET_BACKOFF_BASE_MS, 10000);
    push_text(C, Q, "x", 0, "b2", 0, NULL);
    static const int64_t want[] = {10000, 20000, 40000, 50000, 50000};
    for (int k = 0; k < 5; k++) {
        if (k > 0)
            make_due(Q, "b2");
        j = poll_id(C, Q, "b2", 30000);
        ck_assert_int_eq(dq_job_attempt(dq_jobs_at(j, 0)), k + 1);
        d = nack_delay(C, Q, j, 1, &slack);
        CK_DELAY(d, slack, want[k]);
        dq_jobs_free(j);
    }
    /* base 0: due at once */
    set1(C, Q, DQ_SET_BACKOFF_BASE_MS, 0);
    make_due(Q, "b2");
    j = poll_id(C, Q, "b2", 30000);
    d = nack_delay(C, Q, j, 99999, &slack);
    CK_DELAY(d, slack, 0);
    dq_jobs_free(j);
    /* jitter: each delay in [d * (1 - j/100), d], and not all the same */
    set1(C, Q, DQ_SET_BACKOFF_CAP_MS, DQ_UNSET);
    set2(C, Q, DQ_SET_BACKOFF, DQ_BACKOFF_FIXED, DQ_SET_BACKOFF_JITTER, 30);
    set1(C, Q, DQ_SET_BACKOFF_BASE_MS, 100000);
    int64_t lo = INT64_MAX, hi = 0;
    for (int k = 0; k < 20; k++) {
        make_due(Q, "b2");
        j = poll_id(C, Q, "b2", 30000);
        d = nack_delay(C, Q, j, 1, &slack);
        ck_assert_msg(d >= 70000 && d <= 100000 + slack,
                      "jittered delay %" PRId64, d);
        if (d < lo)
            lo = d;
        if (d > hi)
            hi = d;
        dq_jobs_free(j);
    }
    ck_assert_msg(hi - lo > 1000, "20 jittered delays within %" PRId64 " ms",
                  hi - lo);
    /* jitter 100 of a fixed delay: anywhere in [0, d] */
    set1(C, Q, DQ_SET_BACKOFF_JITTER, 100);
    for (int k = 0; k < 5; k++) {
        make_due(Q, "b2");
        j = poll_id(C, Q, "b2", 30000);
        d = nack_delay(C, Q, j, 1, &slack);
        ck_assert_msg(d >= 0 && d <= 100000 + slack, "delay %" PRId64, d);
        dq_jobs_free(j);
    }
    /* unset: the nack's delay again */
    int all[4] = {DQ_SET_BACKOFF, DQ_SET_BACKOFF_BASE_MS,
                  DQ_SET_BACKOFF_CAP_MS, DQ_SET_BACKOFF_JITTER};
    int64_t un[4] = {DQ_UNSET, DQ_UNSET, DQ_UNSET, DQ_UNSET};
    ck_assert_int_eq(dq_config_set(C, Q, 4, all, un), 0);
    make_due(Q, "b2");
    j = poll_id(C, Q, "b2", 30000);
    d = nack_delay(C, Q, j, 3333, &slack);
    CK_DELAY(d, slack, 3333);
    dq_jobs_free(j);
}
END_TEST

/* An exponential backoff without a cap stays within DQ_DELAY_MAX, also
 * after very many attempts (the doubling stops at 2^60: without a bound
 * the due time would be a float far past any date). */
START_TEST(backoff_uncapped) {
    set2(C, Q, DQ_SET_BACKOFF, DQ_BACKOFF_EXPONENTIAL,
         DQ_SET_BACKOFF_BASE_MS, DQ_DELAY_MAX);
    push_text(C, Q, "x", 0, "u1", 0, NULL);
    dq_jobs *j = poll_id(C, Q, "u1", 30000);
    int64_t slack, d = nack_delay(C, Q, j, 1, &slack);
    CK_DELAY(d, slack, DQ_DELAY_MAX);
    dq_jobs_free(j);
    /* the 40th attempt: base 1000 * 2^39 > DQ_DELAY_MAX */
    set1(C, Q, DQ_SET_BACKOFF_BASE_MS, 1000);
    char key[512], field[64];
    tu_key(key, sizeof(key), "dq", Q, "jobs", "u1");
    for (int k = 0; k < 2; k++) {
        make_due(Q, "u1");
        j = poll_id(C, Q, "u1", 30000);
        /* pretend it had 39 deliveries before: rewrite the meta's count */
        const char *tok = dq_job_token(dq_jobs_at(j, 0));
        snprintf(field, sizeof(field), "%d:%s", k == 0 ? 40 : 70, tok);
        redisReply *rep = rcmd_try(R, "HSET %s %b %s", key, "u1\0",
                                   (size_t)3, field);
        ck_assert_ptr_nonnull(rep);
        freeReplyObject(rep);
        d = nack_delay(C, Q, j, 1, &slack);
        CK_DELAY(d, slack, DQ_DELAY_MAX);
        dq_jobs_free(j);
    }
}
END_TEST

/* ---- dead retention ---------------------------------------------------- */

/* Dead-letters a new job id (pushed, polled, nacked with DQ_NACK_DEAD). */
static void kill_one(dq_client *c, const char *q, const char *id) {
    push_text(c, q, "x", 0, id, 0, NULL);
    dq_jobs *j = poll_id(c, q, id, 30000);
    ck_assert_int_eq(
        dq_nack(c, q, id, dq_job_token(dq_jobs_at(j, 0)), 0, DQ_NACK_DEAD), 1);
    dq_jobs_free(j);
}

/* The dead count of partition part (the plain key on a plain run). */
static long long dead_in(const char *q, int part) {
    char key[512];
    tu_part_key(key, sizeof(key), "dq", q, "dead", tu_parts() > 1 ? part : -1);
    return rint_(R, "ZCARD", key, NULL);
}

/* The share of a total a partition keeps (config.lua share()). */
static long long share(long long total, int part) {
    int np = tu_parts();
    long long s = total / np + (part < total % np ? 1 : 0);
    return s < 1 ? 1 : s;
}

START_TEST(dead_max) {
    /* all jobs in partition 0, so that its share is what holds */
    set1(C, Q, DQ_SET_DEAD_MAX, 4 * tu_parts());
    long long max = share(4 * tu_parts(), 0);
    ck_assert_int_eq(max, 4);
    char ids[8][40];
    for (int i = 0; i < 8; i++) {
        char base[16];
        snprintf(base, sizeof(base), "dm%d", i);
        tu_id_in(ids[i], sizeof(ids[i]), base, 0);
        kill_one(C, Q, ids[i]);
        ck_assert_int_eq(dead_in(Q, 0), i + 1 < max ? i + 1 : max);
    }
    /* the oldest four are gone with all their data, the newest four dead */
    for (int i = 0; i < 4; i++)
        ck_unknown(C, Q, ids[i]);
    for (int i = 4; i < 8; i++)
        ck_dead(C, Q, ids[i], "");
    char key[512];
    tu_key(key, sizeof(key), "dq", Q, "jobs", ids[0]);
    ck_assert_int_eq(rint_(R, "HLEN", key, NULL), 4 * 1 + 4 /* metas */);
    dq_jobs *l = NULL;
    ck_assert_int_eq(dq_dead_list(C, Q, 0, 100, &l), 4);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(l, 0)), ids[4]);
    dq_jobs_free(l);
    /* a poll that dead-letters (max attempts) trims too */
    set1(C, Q, DQ_SET_MAX_ATTEMPTS, 1);
    char pid[40];
    tu_id_in(pid, sizeof(pid), "pm", 0);
    push_text(C, Q, "x", 0, pid, 0, NULL);
    dq_jobs_free(poll_id(C, Q, pid, 1));
    th_sleep_ms(5);
    dq_jobs *none = NULL;
    for (int i = 0; i < 3; i++)
        poll_n(C, Q, 10, 30000, &none, NULL);
    ck_dead(C, Q, pid, "max attempts");
    ck_unknown(C, Q, ids[4]);
    ck_assert_int_eq(dead_in(Q, 0), 4);
    /* unset: no more trimming */
    set1(C, Q, DQ_SET_DEAD_MAX, DQ_UNSET);
    char more[40];
    tu_id_in(more, sizeof(more), "more", 0);
    kill_one(C, Q, more);
    ck_assert_int_eq(dead_in(Q, 0), 5);
}
END_TEST

START_TEST(dead_ttl) {
    set1(C, Q, DQ_SET_DEAD_TTL_MS, 1000);
    char ids[4][40];
    for (int i = 0; i < 4; i++) {
        char base[16];
        snprintf(base, sizeof(base), "dt%d", i);
        tu_id_in(ids[i], sizeof(ids[i]), base, 0);
    }
    kill_one(C, Q, ids[0]);
    kill_one(C, Q, ids[1]);
    ck_assert_int_eq(dead_in(Q, 0), 2);
    th_sleep_ms(1100);
    /* still there until the next dead-lettering */
    ck_dead(C, Q, ids[0], "");
    kill_one(C, Q, ids[2]);
    ck_unknown(C, Q, ids[0]);
    ck_unknown(C, Q, ids[1]);
    ck_dead(C, Q, ids[2], "");
    ck_assert_int_eq(dead_in(Q, 0), 1);
    /* with both: the ttl and the count */
    set1(C, Q, DQ_SET_DEAD_MAX, tu_parts());
    kill_one(C, Q, ids[3]);
    ck_unknown(C, Q, ids[2]);
    ck_dead(C, Q, ids[3], "");
    ck_assert_int_eq(dead_in(Q, 0), 1);
}
END_TEST

/* 5000 dead jobs, then dead_max 10: each dead-lettering removes at most
 * what it adds + 16, so the set converges over calls. */
START_TEST(dead_trim_bounded) {
    enum { N = 5000 };
    static const void *pls[1000];
    static size_t lens[1000];
    static int64_t delays[1000];
    static int ocs[1000];
    for (int i = 0; i < 1000; i++)
        pls[i] = "x", lens[i] = 1, delays[i] = 0;
    dq_push_opts *o = opts1(DQ_PUSHOPT_EXPIRE_IN_MS, 1);
    for (int b = 0; b < N / 1000; b++)
        ck_assert_int_eq(dq_push_batch_ex(C, Q, 1000, pls, lens, delays, NULL,
                                          0, o, NULL, ocs),
                         1000);
    dq_push_opts_free(o);
    th_sleep_ms(10);
    dq_jobs *j = NULL;
    for (int i = 0; i < 40 && tu_sum(R, "ZCARD", "dq", Q, "dead") < N; i++) {
        ck_assert_int_eq(poll_n(C, Q, 1000, 30000, &j, NULL), 0);
    }
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", Q, "dead"), N);
    set1(C, Q, DQ_SET_DEAD_MAX, 10 * tu_parts());
    long long have = dead_in(Q, 0), max = share(10 * tu_parts(), 0);
    long long have0 = have;
    int calls = 0;
    for (int i = 0; have > max && i < N; i++) {
        char base[24], id[40];
        snprintf(base, sizeof(base), "k%d", i);
        tu_id_in(id, sizeof(id), base, 0);
        kill_one(C, Q, id);
        long long now = dead_in(Q, 0);
        long long want = have + 1 - 17 > max ? have + 1 - 17 : max;
        ck_assert_msg(now == want, "call %d: %lld dead, was %lld, want %lld",
                      i, now, have, want);
        have = now;
        calls++;
    }
    ck_assert_int_eq(have, max);
    ck_assert_int_le(calls, N / 16 + 2);
    fprintf(stderr, "dead_trim_bounded: %d dead jobs (%lld in partition 0) "
            "trimmed to %lld by %d dead-letterings (each: +1, -17 at "
            "most)\n", N, have0, max, calls);
    /* the trimmed jobs' data went with them: the jobs hash of partition 0
     * holds payload and meta of its dead jobs only */
    char key[512];
    tu_part_key(key, sizeof(key), "dq", Q, "jobs", tu_parts() > 1 ? 0 : -1);
    ck_assert_int_eq(rint_(R, "HLEN", key, NULL), 2 * max);
}
END_TEST

/* ---- expiry ------------------------------------------------------------ */

START_TEST(expiry) {
    dq_push_opts *o = opts1(DQ_PUSHOPT_EXPIRE_IN_MS, 100);
    ck_assert_int_eq(push_ex(C, Q, "e1", 0, 0, o), DQ_PUSHED);
    /* absolute: 100 ms from the server's now */
    dq_push_opts *oa = opts1(DQ_PUSHOPT_EXPIRE_AT, server_ms(R) + 100);
    ck_assert_int_eq(push_ex(C, Q, "e2", server_ms(R), DQ_PUSH_AT, oa),
                     DQ_PUSHED);
    /* one that does not expire, pushed in the same call shape */
    push_text(C, Q, "x", 0, "e3", 0, NULL);
    th_sleep_ms(200);
    dq_jobs *j = poll_until(C, Q, 10, 30000, 2000);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(dq_jobs_count(j), 1);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), "e3");
    dq_jobs_free(j);
    for (int i = 0; i < 4 && tu_sum(R, "ZCARD", "dq", Q, "dead") < 2; i++) {
        j = NULL;
        poll_n(C, Q, 10, 30000, &j, NULL);
        ck_assert_ptr_null(j);
    }
    ck_dead(C, Q, "e1", "expired");
    ck_dead(C, Q, "e2", "expired");
    dq_jobs *l = NULL;
    ck_assert_int_eq(dq_dead_list(C, Q, 0, 10, &l), 2);
    for (int i = 0; i < 2; i++) {
        size_t len = 0;
        const char *e = dq_job_last_error(dq_jobs_at(l, i), &len);
        ck_assert_int_eq(len, 7);
        ck_assert_int_eq(memcmp(e, "expired", 7), 0);
        ck_assert_int_eq(dq_job_attempt(dq_jobs_at(l, i)), 0);
    }
    dq_jobs_free(l);
    /* a requeue drops the expiry: it runs */
    ck_assert_int_eq(dq_dead_requeue(C, Q, "e1", 0), 1);
    j = poll_id(C, Q, "e1", 30000);
    dq_jobs_free(j);
    /* a job not yet expired is delivered; its retry after the expiry is
     * not */
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_IN_MS, 1500), 0);
    ck_assert_int_eq(push_ex(C, Q, "e4", 0, 0, o), DQ_PUSHED);
    j = poll_id(C, Q, "e4", 30000);
    ck_assert_int_eq(dq_nack(C, Q, "e4", dq_job_token(dq_jobs_at(j, 0)), 400,
                             0),
                     0);
    dq_jobs_free(j);
    make_due(Q, "e4");
    /* not expired yet (1.5 s): the retry runs at once */
    j = poll_id(C, Q, "e4", 50);
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(j, 0)), 2);
    dq_jobs_free(j);
    /* its lease runs out after the expiry: no third delivery */
    th_sleep_ms(1600);
    for (int i = 0; i < 4; i++) {
        j = NULL;
        poll_n(C, Q, 10, 30000, &j, NULL);
        ck_assert_ptr_null(j);
    }
    ck_dead(C, Q, "e4", "expired");
    dq_push_opts_free(o);
    dq_push_opts_free(oa);
}
END_TEST

START_TEST(expiry_drop) {
    set1(C, Q, DQ_SET_EXPIRED, DQ_EXPIRED_DROP);
    dq_push_opts *o = opts1(DQ_PUSHOPT_EXPIRE_IN_MS, 50);
    ck_assert_int_eq(push_ex(C, Q, "x1", 0, 0, o), DQ_PUSHED);
    ck_assert_int_eq(push_ex(C, Q, "x2", 0, 0, o), DQ_PUSHED);
    th_sleep_ms(100);
    for (int i = 0; i < 4; i++) {
        dq_jobs *j = NULL;
        poll_n(C, Q, 10, 30000, &j, NULL);
        ck_assert_ptr_null(j);
    }
    ck_unknown(C, Q, "x1");
    ck_unknown(C, Q, "x2");
    ck_stats(C, Q, 0, 0, 0, 0);
    ck_assert_int_eq(tu_sum(R, "EXISTS", "dq", Q, "jobs"), 0);
    dq_push_opts_free(o);
}
END_TEST

START_TEST(expiry_keep_replace) {
    dq_push_opts *o = opts1(DQ_PUSHOPT_EXPIRE_IN_MS, 50);
    /* keep of an existing id: its options stay (none) */
    push_text(C, Q, "x", 0, "k1", 0, NULL);
    ck_assert_int_eq(push_ex(C, Q, "k1", 0, DQ_PUSH_KEEP, o), DQ_KEPT);
    /* keep of one with an expiry: it stays */
    ck_assert_int_eq(push_ex(C, Q, "k2", 0, 0, o), DQ_PUSHED);
    ck_assert_int_eq(push_ex(C, Q, "k2", 0, DQ_PUSH_KEEP, NULL), DQ_KEPT);
    /* replace: only the new options */
    ck_assert_int_eq(push_ex(C, Q, "k3", 0, 0, o), DQ_PUSHED);
    ck_assert_int_eq(push_ex(C, Q, "k3", 0, DQ_PUSH_REPLACE, NULL),
                     DQ_REPLACED);
    push_text(C, Q, "x", 0, "k4", 0, NULL);
    ck_assert_int_eq(push_ex(C, Q, "k4", 0, DQ_PUSH_REPLACE, o), DQ_REPLACED);
    /* replace of a delivered job with options (in a queue of its own, so
     * that the poll takes it) */
    char q2[128];
    snprintf(q2, sizeof(q2), "%s_2", Q);
    push_text(C, q2, "x", 0, "k5", 0, NULL);
    dq_jobs_free(poll_id(C, q2, "k5", 30000));
    ck_assert_int_eq(push_ex(C, q2, "k5", 0, DQ_PUSH_REPLACE, o), DQ_REPLACED);
    th_sleep_ms(100);
    int got = 0, seen[6] = {0};
    for (int i = 0; i < 8; i++) {
        dq_jobs *j = NULL;
        int n = poll_n(C, Q, 10, 30000, &j, NULL);
        for (int k = 0; k < n; k++) {
            const char *id = dq_job_id(dq_jobs_at(j, (size_t)k));
            seen[id[1] - '0']++;
            got++;
        }
        dq_jobs_free(j);
    }
    ck_assert_int_eq(got, 2);
    ck_assert_int_eq(seen[1], 1);
    ck_assert_int_eq(seen[3], 1);
    ck_dead(C, Q, "k2", "expired");
    ck_dead(C, Q, "k4", "expired");
    for (int i = 0; i < 4; i++) {
        dq_jobs *j = NULL;
        ck_assert_int_eq(poll_n(C, q2, 10, 30000, &j, NULL), 0);
    }
    ck_dead(C, q2, "k5", "expired");
    dq_push_opts_free(o);
}
END_TEST

/* ---- rate limit -------------------------------------------------------- */

#define RATE_W 600
#define RATE_LEASE 60000

typedef struct rate_poller {
    dq_client *c;
    const char *q;
    int want;          /* stop when the shared count reaches it */
    int *total;        /* shared delivery count */
    int64_t *stamps;   /* shared: server ms of each delivery */
    pthread_mutex_t *mu;
    int err;
} rate_poller;

static void *rate_thread(void *arg) {
    rate_poller *p = arg;
    int64_t end = th_mono_ms() + 15000;
    while (th_mono_ms() < end) {
        pthread_mutex_lock(p->mu);
        int done = *p->total >= p->want;
        pthread_mutex_unlock(p->mu);
        if (done)
            break;
        dq_jobs *j = NULL;
        int64_t next = -1;
        int n = dq_poll(p->c, p->q, 7, RATE_LEASE, &j, &next);
        if (n < 0) {
            p->err = n;
            break;
        }
        pthread_mutex_lock(p->mu);
        for (int k = 0; k < n; k++) {
            if (*p->total < 1000)
                p->stamps[(*p->total)++] =
                    dq_job_lease_deadline_ms(dq_jobs_at(j, (size_t)k)) -
                    RATE_LEASE;
        }
        pthread_mutex_unlock(p->mu);
        dq_jobs_free(j);
        if (n == 0) /* sleep a little of what it said, to race the other */
            th_sleep_ms(next > 0 && next < 20 ? next : 3);
    }
    return NULL;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Pushes n jobs due now through one batch. */
static void push_many(dq_client *c, const char *q, int n) {
    const void *pls[200];
    size_t lens[200];
    int64_t d[200];
    ck_assert_int_le(n, 200);
    for (int i = 0; i < n; i++)
        pls[i] = "x", lens[i] = 1, d[i] = 0;
    ck_assert_int_eq(dq_push_batch(c, q, (size_t)n, pls, lens, d, NULL, 0,
                                   NULL, NULL),
                     n);
}

START_TEST(rate_limit) {
    int np = tu_parts();
    int N = 3 * np;
    set2(C, Q, DQ_SET_RATE_MAX, N, DQ_SET_RATE_WINDOW_MS, RATE_W);
    push_many(C, Q, 200);
    /* two clients, polling as fast as they like, for 3 windows' worth */
    int total = 0;
    int64_t stamps[1000];
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    rate_poller p[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        p[i] = (rate_poller){open_client(), Q, 3 * N + 1, &total, stamps, &mu,
                            0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, rate_thread, &p[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(p[i].err == 0, "poll: %d", p[i].err);
        dq_close(p[i].c);
    }
    ck_assert_msg(total >= 3 * N + 1, "%d deliveries in 15 s", total);
    qsort(stamps, (size_t)total, sizeof(stamps[0]), cmp64);
    fprintf(stderr, "rate_limit: %d deliveries (limit %d per %d ms) over %"
            PRId64 " ms of server time\n", total, N, RATE_W,
            stamps[total - 1] - stamps[0]);
    /* never more than N in any window [t, t + W) */
    for (int i = 0; i < total; i++) {
        int k = 0;
        for (int m = i; m < total && stamps[m] < stamps[i] + RATE_W; m++)
            k++;
        ck_assert_msg(k <= N, "%d deliveries in the window from %" PRId64,
                      k, stamps[i]);
    }
    /* a limited poll: 0 jobs, and when a slot frees */
    int64_t next = -2;
    dq_jobs *j = NULL;
    int n, polls = 0;
    do {
        n = poll_n(C, Q, 100, RATE_LEASE, &j, &next);
        dq_jobs_free(j);
        j = NULL;
    } while (n > 0 && ++polls < 10);
    ck_assert_int_eq(n, 0);
    ck_assert_msg(next > 0 && next <= RATE_W, "next %" PRId64, next);
    /* unset: everything due comes at once */
    set2(C, Q, DQ_SET_RATE_MAX, DQ_UNSET, DQ_SET_RATE_WINDOW_MS, DQ_UNSET);
    int64_t s[5];
    stats5(C, Q, s);
    int left = (int)s[1];
    ck_assert_int_gt(left, 50);
    int got = 0;
    for (int i = 0; i < 4 && got < left; i++) {
        got += poll_n(C, Q, 1000, RATE_LEASE, &j, NULL);
        dq_jobs_free(j);
        j = NULL;
    }
    ck_assert_int_eq(got, left);
    /* the log of the last limited window expires with that window */
    usleep((RATE_W + 50) * 1000);
    ck_assert_int_eq(tu_sum(R, "EXISTS", "dq", Q, "rate"), 0);
}
END_TEST

/* A limited waiter sleeps until a slot frees: it does not busy-poll. */
START_TEST(rate_limit_wait) {
    int np = tu_parts();
    int N = 2 * np;
    enum { W = 500 };
    set2(C, Q, DQ_SET_RATE_MAX, N, DQ_SET_RATE_WINDOW_MS, W);
    push_many(C, Q, 100);
    dq_client *c = open_client_opt(DQ_OPT_WAIT_CAP_MS, 60000);
    int got = 0, calls = 0;
    long long s0 = tu_script_calls(R);
    int64_t t0 = th_mono_ms();
    /* 4 windows' worth */
    while (got < 4 * N && calls < 200 && th_mono_ms() - t0 < 20000) {
        dq_jobs *j = NULL;
        int n = dq_poll_wait(c, Q, 100, RATE_LEASE, 5000, &j);
        ck_assert_msg(n >= 0, "poll_wait: %d %s", n, dq_errmsg(c));
        got += n;
        calls++;
        dq_jobs_free(j);
    }
    long long polls = tu_script_calls(R) - s0;
    int64_t took = th_mono_ms() - t0;
    ck_assert_int_ge(got, 4 * N);
    /* 4N jobs at N per window: at least 3 windows passed */
    ck_assert_msg(took >= 3 * W - 50, "%d jobs in %" PRId64 " ms", got, took);
    /* each window: a poll that takes the window's jobs, maybe one that
     * finds the limit; a partitioned queue polls each partition */
    long long windows = took / W + 1;
    fprintf(stderr, "rate_limit_wait: %d jobs (limit %d per %d ms) in %"
            PRId64 " ms, %d poll_wait calls, %lld script calls\n", got, N, W,
            took, calls, polls);
    ck_assert_msg(polls <= windows * 3 * np + 4 * np,
                  "%lld script calls in %" PRId64 " ms (%lld windows)", polls,
                  took, windows);
    dq_close(c);
}
END_TEST

/* Three waiters (dq_poll_wait) on one limited queue: together they never
 * get more than the limit in any window, and they do not busy-poll. */
typedef struct rate_waiter {
    dq_client *c;
    const char *q;
    int want;
    int *total;
    int64_t *stamps;
    pthread_mutex_t *mu;
    int err, calls;
} rate_waiter;

static void *rate_wait_thread(void *arg) {
    rate_waiter *w = arg;
    int64_t end = th_mono_ms() + 15000;
    while (th_mono_ms() < end && w->calls < 500) {
        pthread_mutex_lock(w->mu);
        int done = *w->total >= w->want;
        pthread_mutex_unlock(w->mu);
        if (done)
            break;
        dq_jobs *j = NULL;
        int n = dq_poll_wait(w->c, w->q, 100, RATE_LEASE, 300, &j);
        w->calls++;
        if (n < 0) {
            w->err = n;
            break;
        }
        pthread_mutex_lock(w->mu);
        for (int k = 0; k < n; k++)
            if (*w->total < 1000)
                w->stamps[(*w->total)++] =
                    dq_job_lease_deadline_ms(dq_jobs_at(j, (size_t)k)) -
                    RATE_LEASE;
        pthread_mutex_unlock(w->mu);
        dq_jobs_free(j);
    }
    return NULL;
}

START_TEST(rate_limit_waiters) {
    int np = tu_parts();
    int N = 2 * np;
    enum { W = 400, K = 3 };
    set2(C, Q, DQ_SET_RATE_MAX, N, DQ_SET_RATE_WINDOW_MS, W);
    push_many(C, Q, 200);
    int total = 0;
    int64_t stamps[1000];
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    rate_waiter w[K];
    pthread_t th[K];
    long long s0 = tu_script_calls(R);
    int64_t t0 = th_mono_ms();
    for (int i = 0; i < K; i++) {
        w[i] = (rate_waiter){open_client_opt(DQ_OPT_WAIT_CAP_MS, 60000), Q,
                             5 * N, &total, stamps, &mu, 0, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, rate_wait_thread, &w[i]),
                         0);
    }
    int calls = 0;
    for (int i = 0; i < K; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(w[i].err == 0, "waiter %d: %d %s", i, w[i].err,
                      dq_errmsg(w[i].c));
        calls += w[i].calls;
        dq_close(w[i].c);
    }
    int64_t took = th_mono_ms() - t0;
    long long polls = tu_script_calls(R) - s0;
    ck_assert_msg(total >= 5 * N, "%d deliveries in 15 s", total);
    qsort(stamps, (size_t)total, sizeof(stamps[0]), cmp64);
    for (int i = 0; i < total; i++) {
        int k = 0;
        for (int m = i; m < total && stamps[m] < stamps[i] + W; m++)
            k++;
        ck_assert_msg(k <= N, "%d deliveries in the window from %" PRId64,
                      k, stamps[i]);
    }
    long long windows = took / W + 1;
    fprintf(stderr, "rate_limit_waiters: %d jobs (limit %d per %d ms) to %d "
            "waiters in %" PRId64 " ms: %d poll_wait calls, %lld script "
            "calls\n", total, N, W, K, took, calls, polls);
    /* per window: about one poll per partition that takes the window's
     * jobs and one per waiter that times out (300 ms) or is woken */
    ck_assert_msg(polls <= windows * (K + 2) * np + 4 * K * np,
                  "%lld script calls in %" PRId64 " ms", polls, took);
}
END_TEST

/* ---- races ------------------------------------------------------------- */

typedef struct racer {
    dq_client *c;
    const char *q;
    int deliveries;
    int max_attempt;  /* highest attempt seen */
    int dead;         /* nacks that dead-lettered */
    int err;
    int *stop;
} racer;

static void *race_thread(void *arg) {
    racer *r = arg;
    int64_t end = th_mono_ms() + 15000;
    while (th_mono_ms() < end && !__atomic_load_n(r->stop, __ATOMIC_SEQ_CST)) {
        dq_jobs *j = NULL;
        int n = dq_poll(r->c, r->q, 3, 30000, &j, NULL);
        if (n < 0) {
            r->err = n;
            break;
        }
        for (int k = 0; k < n; k++) {
            const dq_job *job = dq_jobs_at(j, (size_t)k);
            r->deliveries++;
            if (dq_job_attempt(job) > r->max_attempt)
                r->max_attempt = (int)dq_job_attempt(job);
            int rc = dq_nack(r->c, r->q, dq_job_id(job), dq_job_token(job),
                             0, DQ_NACK_BACKOFF);
            if (rc < 0) {
                r->err = rc;
                break;
            }
            r->dead += rc == 1;
        }
        dq_jobs_free(j);
        if (n == 0)
            th_sleep_ms(1);
    }
    return NULL;
}

/* Two consumers with client max attempts 1 and 50 on a queue with the
 * setting 3, while a third client keeps changing the backoff settings
 * (base 0 or unset: a delay of 0 either way): every job gets exactly 3
 * deliveries, whoever polls it. */
START_TEST(race_two_clients) {
    enum { JOBS = 40 };
    set1(C, Q, DQ_SET_MAX_ATTEMPTS, 3);
    push_many(C, Q, JOBS);
    int stop = 0;
    racer r[2] = {{open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1), Q, 0, 0, 0, 0,
                   &stop},
                  {open_client_opt(DQ_OPT_MAX_ATTEMPTS, 50), Q, 0, 0, 0, 0,
                   &stop}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_thread, &r[i]), 0);
    int flips = 0;
    int64_t end = th_mono_ms() + 15000;
    while (tu_sum(R, "ZCARD", "dq", Q, "dead") < JOBS && th_mono_ms() < end) {
        if (flips % 2 == 0)
            set2(C, Q, DQ_SET_BACKOFF, DQ_BACKOFF_EXPONENTIAL,
                 DQ_SET_BACKOFF_BASE_MS, 0);
        else
            set2(C, Q, DQ_SET_BACKOFF, DQ_UNSET, DQ_SET_BACKOFF_BASE_MS,
                 DQ_UNSET);
        flips++;
        th_sleep_ms(1);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(r[i].err == 0, "racer %d: %d", i, r[i].err);
        ck_assert_int_le(r[i].max_attempt, 3);
        dq_close(r[i].c);
    }
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", Q, "dead"), JOBS);
    ck_assert_int_eq(r[0].deliveries + r[1].deliveries, 3 * JOBS);
    ck_assert_int_eq(r[0].dead + r[1].dead, JOBS);
    ck_assert_int_gt(flips, 1);
}
END_TEST

/* A nack with backoff while another client keeps changing the backoff
 * settings of the same queue (fixed base 10 s or exponential base 20 s,
 * both settings in one call): every nack's delay is one of the two whole
 * settings, never a mix (fixed 20 s or exponential 10 s) or an error. */
typedef struct flipper {
    const char *q;
    int *stop;
    int flips, err;
} flipper;

static void *flip_thread(void *arg) {
    flipper *f = arg;
    dq_client *c = open_client();
    int s[2] = {DQ_SET_BACKOFF, DQ_SET_BACKOFF_BASE_MS};
    int64_t end = th_mono_ms() + 20000;
    while (!__atomic_load_n(f->stop, __ATOMIC_SEQ_CST) &&
           th_mono_ms() < end) {
        int64_t v[2] = {f->flips % 2 ? DQ_BACKOFF_EXPONENTIAL
                                     : DQ_BACKOFF_FIXED,
                        f->flips % 2 ? 20000 : 10000};
        int rc = dq_config_set(c, f->q, 2, s, v);
        if (rc != 0) {
            __atomic_store_n(&f->err, rc, __ATOMIC_SEQ_CST);
            break;
        }
        __atomic_add_fetch(&f->flips, 1, __ATOMIC_SEQ_CST);
    }
    dq_close(c);
    return NULL;
}

START_TEST(race_nack_config) {
    set2(C, Q, DQ_SET_BACKOFF, DQ_BACKOFF_FIXED, DQ_SET_BACKOFF_BASE_MS,
         10000);
    push_text(C, Q, "x", 0, "r1", 0, NULL);
    int stop = 0;
    flipper f = {Q, &stop, 0, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, flip_thread, &f), 0);
    /* the flipper is under way before the first nack (on a busy machine
     * its thread may otherwise start after the last) */
    int64_t started = th_mono_ms() + 10000;
    while (__atomic_load_n(&f.flips, __ATOMIC_SEQ_CST) == 0 &&
           __atomic_load_n(&f.err, __ATOMIC_SEQ_CST) == 0 &&
           th_mono_ms() < started)
        th_sleep_ms(1);
    int seen[2] = {0, 0};
    for (int k = 0; k < 40; k++) {
        if (k > 0)
            make_due(Q, "r1");
        dq_jobs *j = poll_id(C, Q, "r1", 30000);
        int64_t attempt = dq_job_attempt(dq_jobs_at(j, 0));
        int64_t slack;
        int64_t d = nack_delay(C, Q, j, 5, &slack);
        /* exponential base 20 s at attempt a: 20 s * 2^(a-1), capped at
         * DQ_DELAY_MAX */
        int64_t e = 20000;
        for (int64_t a = 1; a < attempt && e < DQ_DELAY_MAX; a++)
            e *= 2;
        if (e > DQ_DELAY_MAX)
            e = DQ_DELAY_MAX;
        int fixed = d >= 10000 && d <= 10000 + slack;
        int expo = d >= e && d <= e + slack;
        ck_assert_msg(fixed || expo,
                      "attempt %" PRId64 ": delay %" PRId64 " (slack %" PRId64
                      "), want 10000 or %" PRId64, attempt, d, slack, e);
        seen[expo]++;
        dq_jobs_free(j);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(th, NULL);
    ck_assert_int_eq(f.err, 0);
    fprintf(stderr, "race_nack_config: %d config flips, %d fixed and %d "
            "exponential delays\n", f.flips, seen[0], seen[1]);
    ck_assert_int_gt(f.flips, 1);
}
END_TEST

TEST_SUITE("settings", TU_SRV_UNIX,
    {"roundtrip", roundtrip, 30, &fx},
    {"names", setting_names, 30, &fx},
    {"bad_input", bad_input, 30, &fx},
    {"max_attempts_precedence", max_attempts_precedence, 30, &fx},
    {"default_lease", default_lease, 30, &fx},
    {"backoff", backoff, 60, &fx},
    {"backoff_uncapped", backoff_uncapped, 30, &fx},
    {"dead_max", dead_max, 30, &fx},
    {"dead_ttl", dead_ttl, 30, &fx},
    {"dead_trim_bounded", dead_trim_bounded, 120, &fx},
    {"expiry", expiry, 30, &fx},
    {"expiry_drop", expiry_drop, 30, &fx},
    {"expiry_keep_replace", expiry_keep_replace, 30, &fx},
    {"rate_limit", rate_limit, 60, &fx},
    {"rate_limit_wait", rate_limit_wait, 60, &fx},
    {"rate_limit_waiters", rate_limit_waiters, 60, &fx},
    {"race_two_clients", race_two_clients, 60, &fx},
    {"race_nack_config", race_nack_config, 60, &fx},
    {"consumer_follows_queue_backoff", consumer_follows_queue_backoff, 60,
     &fx})
