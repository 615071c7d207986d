/*
 * tests/test_fair.c - fair claiming: the queue-wide limit on jobs in
 * flight (DQ_SET_MAX_INFLIGHT, lib/lua/include/fair.lua).  Every way out of
 * flight frees a slot (ack, nack, cancel, a lease that runs out, a consumer
 * killed while holding every slot), a held-back poll says when to come
 * back, a freed slot wakes a waiter; tenant groups (DQ_PUSHOPT_GROUP) are
 * served round-robin, a lone job of a small group beside a burst of a big
 * one in the first poll, a rescheduled, promoted or debounced job indexed
 * at its new time; and a randomized run of claims of grouped and
 * plain jobs, acks, nacks, cancels and expiries never has more leased
 * than the limit (sampled from Redis), agrees with a reference model of
 * the holds, finishes every job once and leaves no group index behind.
 * An extend of a lease that ran out takes a slot anew: refused while the
 * limit (queue-wide or its group's) is full, counted in its group after.
 *
 * The count in flight is read from Redis (leases whose deadline is after
 * the server's now), never trusted from the clients.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_suite.h"
#include "test_utils.h"

static dq_client *C;
static redisContext *R;

static void setup(void) {
    C = open_client();
    R = rconn();
}

static void teardown(void) {
    dq_close(C);
    redisFree(R);
}

static const tu_fixture fx = {setup, teardown};

static void set_limit(dq_client *c, const char *q, int64_t v) {
    int s = DQ_SET_MAX_INFLIGHT;
    int rc = dq_config_set(c, q, 1, &s, &v);
    ck_assert_msg(rc == 0, "config set inflight_max=%" PRId64 ": %d %s", v,
                  rc, dq_errmsg(c));
}

static void push_due(dq_client *c, const char *q, int n) {
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

/* Jobs in flight, from Redis: leases whose deadline is after the server's
 * now, over every partition. */
static long long leased_now(redisContext *r, const char *q) {
    int np = tu_parts();
    int64_t now = server_ms(r);
    long long sum = 0;
    char key[800];
    for (int p = np == 1 ? -1 : 0; p < (np == 1 ? 0 : np); p++) {
        tu_part_key(key, sizeof(key), "dq", q, "lease", p);
        redisReply *rep = th_cmd(r, "ZCOUNT %s (%lld +inf", key,
                                 (long long)now);
        sum += rep->integer;
        freeReplyObject(rep);
    }
    return sum;
}

/* The lists of jobs a test claimed, read as one. */
typedef struct bag {
    dq_jobs *l[64];
    int n;
} bag;

static const dq_job *bag_at(const bag *b, int i) {
    for (int k = 0; k < b->n; k++) {
        int c = (int)dq_jobs_count(b->l[k]);
        if (i < c)
            return dq_jobs_at(b->l[k], (size_t)i);
        i -= c;
    }
    ck_abort_msg("job %d not claimed", i);
    return NULL;
}

static void bag_free(bag *b) {
    for (int k = 0; k < b->n; k++)
        dq_jobs_free(b->l[k]);
    b->n = 0;
}

/* Polls (max 100) until nothing more is claimed; keeps the lists in b;
 * returns how many were claimed. */
static int fill(dq_client *c, const char *q, int64_t lease_ms, bag *b,
                int64_t *next) {
    int got = 0;
    for (int k = 0; k < 4 * tu_parts() + 4; k++) {
        dq_jobs *j = NULL;
        int n = poll_n(c, q, 100, lease_ms, &j, next);
        if (n == 0)
            break;
        got += n;
        ck_assert_int_lt(b->n, 64);
        b->l[b->n++] = j;
    }
    return got;
}

/* ---- the limit ----------------------------------------------------------- */

/* At most the limit is leased; a poll held back says when to come back
 * (at the latest when the first lease ends); ack, nack and cancel each
 * free one slot at once. */
START_TEST(limit_holds_and_frees) {
    int np = tu_parts();
    int L = 4 * np;
    set_limit(C, Q, L);
    push_due(C, Q, 100);
    bag all = {.n = 0}, j = {.n = 0};
    int64_t next = -9;
    int got = fill(C, Q, 30000, &all, &next);
    ck_assert_int_eq(got, L);
    ck_assert_int_eq(leased_now(R, Q), L);
    /* held back: nothing claimed, and the time to the first lease's end */
    dq_jobs *none = NULL;
    ck_assert_int_eq(poll_n(C, Q, 100, 30000, &none, &next), 0);
    ck_assert_msg(next > 25000 && next <= 30000, "next %" PRId64, next);
    /* each way out frees its slot: one more claim each */
    const dq_job *a = bag_at(&all, 0), *b = bag_at(&all, 1),
                 *c = bag_at(&all, 2);
    ck_assert_int_eq(dq_ack(C, Q, dq_job_id(a), dq_job_token(a)), 0);
    ck_assert_int_eq(fill(C, Q, 30000, &j, &next), 1);
    ck_assert_int_eq(dq_nack(C, Q, dq_job_id(b), dq_job_token(b), 0, 0), 0);
    ck_assert_int_eq(fill(C, Q, 30000, &j, &next), 1);
    ck_assert_int_eq(dq_nack(C, Q, dq_job_id(c), dq_job_token(c), 0,
                             DQ_NACK_DEAD),
                     1);
    ck_assert_int_eq(fill(C, Q, 30000, &j, &next), 1);
    const dq_job *d = bag_at(&all, 3);
    ck_assert_int_eq(dq_cancel(C, Q, dq_job_id(d), DQ_CANCEL_INFLIGHT), 3);
    ck_assert_int_eq(fill(C, Q, 30000, &j, &next), 1);
    ck_assert_int_eq(leased_now(R, Q), L);
    bag_free(&j);
    bag_free(&all);
    /* unset: no limit */
    set_limit(C, Q, DQ_UNSET);
    ck_assert_int_gt(fill(C, Q, 30000, &all, &next), 50);
    bag_free(&all);
}
END_TEST

/* Leases that run out free their slots: nobody acks, and the jobs come
 * back within a lease. */
START_TEST(limit_lease_expiry) {
    int np = tu_parts();
    int L = 2 * np;
    set_limit(C, Q, L);
    push_due(C, Q, 20 * np);
    bag all = {.n = 0}, again = {.n = 0};
    int64_t next = -9;
    ck_assert_int_eq(fill(C, Q, 400, &all, &next), L);
    dq_jobs *none = NULL;
    ck_assert_int_eq(poll_n(C, Q, 100, 400, &none, &next), 0);
    ck_assert_msg(next > 0 && next <= 400, "next %" PRId64, next);
    th_sleep_ms(next + 20);
    ck_assert_int_eq(fill(C, Q, 400, &again, &next), L);
    ck_assert_int_le(leased_now(R, Q), L);
    bag_free(&again);
    bag_free(&all);
}
END_TEST

/* A consumer waiting for a slot (dq_poll_wait, cap 60 s, leases of 30 s)
 * gets one within a second of an ack freeing it: the ack wakes it. */
typedef struct waiter {
    dq_client *c;
    const char *q;
    int got;
    int64_t took;
} waiter;

static void *wait_thread(void *arg) {
    waiter *w = arg;
    dq_jobs *j = NULL;
    int64_t t0 = th_mono_ms();
    w->got = dq_poll_wait(w->c, w->q, 1, 30000, 10000, &j);
    w->took = th_mono_ms() - t0;
    dq_jobs_free(j);
    return NULL;
}

START_TEST(limit_wakes_waiter) {
    set_limit(C, Q, tu_parts());
    /* every partition gets some (20 random ids left one of 4 empty about
     * once in 80 runs, and its slot unfilled) */
    push_due(C, Q, 20 * tu_parts());
    bag all = {.n = 0};
    int64_t next = -9;
    int got = fill(C, Q, 30000, &all, &next);
    ck_assert_int_eq(got, tu_parts());
    waiter w = {open_client_opt(DQ_OPT_WAIT_CAP_MS, 60000), Q, 0, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &w), 0);
    th_sleep_ms(300); /* it polled, was held back, and waits */
    int64_t t0 = th_mono_ms();
    for (int i = 0; i < got; i++) {
        const dq_job *a = bag_at(&all, i);
        ck_assert_int_eq(dq_ack(C, Q, dq_job_id(a), dq_job_token(a)), 0);
    }
    pthread_join(th, NULL);
    int64_t after = th_mono_ms() - t0;
    fprintf(stderr, "limit_wakes_waiter: got %d, %" PRId64
            " ms after the acks\n", w.got, after);
    ck_assert_int_eq(w.got, 1);
    ck_assert_msg(after < 1500, "woken %" PRId64 " ms after the ack", after);
    dq_close(w.c);
    bag_free(&all);
}
END_TEST

/* Consumer processes that hold every slot are killed: the slots come back
 * within a lease, and nothing more than the limit is ever leased. */
enum { NPROC = 4, CRASH_LEASE = 800 };

static void holder_proc(int fd, const char *q) {
    dq_client *c = open_client_opt(DQ_OPT_WAIT_CAP_MS, 500);
    int64_t end = wall_ms() + 20000;
    while (wall_ms() < end) {
        dq_jobs *jobs = NULL;
        int n = dq_poll_wait(c, q, 2, CRASH_LEASE, 500, &jobs);
        if (n < 0)
            _exit(3);
        if (n > 0 && write(fd, "g", 1) != 1)
            _exit(4);
        dq_jobs_free(jobs); /* holds them: never acks */
        if (n > 0)
            th_sleep_ms(5);
    }
    _exit(0);
}

START_TEST(limit_killed_holders) {
    int np = tu_parts();
    int L = 2 * np;
    set_limit(C, Q, L);
    push_due(C, Q, 100);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            close(fds[0]);
            holder_proc(fds[1], Q);
        }
    }
    close(fds[1]);
    /* every slot taken, sampled from Redis, never above the limit */
    int64_t end = wall_ms() + 5000;
    long long most = 0, cur = 0;
    while ((cur = leased_now(R, Q)) < L && wall_ms() < end) {
        if (cur > most)
            most = cur;
        th_sleep_ms(2);
    }
    ck_assert_int_eq(cur, L);
    for (int i = 0; i < NPROC; i++) {
        ck_assert_int_eq(kill(pids[i], SIGKILL), 0);
        ck_assert_int_eq(waitpid(pids[i], NULL, 0), pids[i]);
    }
    close(fds[0]);
    ck_assert_int_le(leased_now(R, Q), L);
    /* the dead holders' slots free when their leases end */
    int64_t t0 = th_mono_ms();
    bag all = {.n = 0};
    int got = 0;
    int64_t next;
    while (got < L && th_mono_ms() - t0 < CRASH_LEASE + 1000) {
        got += fill(C, Q, 30000, &all, &next);
        th_sleep_ms(10);
    }
    int64_t took = th_mono_ms() - t0;
    fprintf(stderr, "limit_killed_holders: %d slots back in %" PRId64
            " ms (lease %d), at most %lld leased while filling\n", got, took,
            CRASH_LEASE, most);
    ck_assert_int_eq(got, L);
    ck_assert_int_le(took, CRASH_LEASE + 500);
    ck_assert_int_le(most, L);
    ck_assert_int_le(leased_now(R, Q), L);
    bag_free(&all);
}
END_TEST

/* ---- groups -------------------------------------------------------------- */

/* Pushes n jobs of group g (NULL: none) and priority prio due at the
 * absolute server time at, with ids "<prefix><k>". */
static void push_prio(dq_client *c, const char *q, const char *g, int prio,
                      const char *prefix, int n, int64_t at) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    if (g != NULL)
        ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g), 0);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, prio), 0);
    enum { B = 500 };
    static char idb[B][40];
    const char *ids[B];
    const void *pls[B];
    size_t lens[B];
    int64_t times[B];
    for (int done = 0; done < n;) {
        int k = n - done < B ? n - done : B;
        for (int i = 0; i < k; i++) {
            snprintf(idb[i], sizeof(idb[i]), "%s%d", prefix, done + i);
            ids[i] = idb[i], pls[i] = "x", lens[i] = 1, times[i] = at;
        }
        int rc = dq_push_batch_ex(c, q, (size_t)k, pls, lens, times, ids,
                                  DQ_PUSH_AT, o, NULL, NULL);
        ck_assert_msg(rc == k, "push: %d %s", rc, dq_errmsg(c));
        done += k;
    }
    dq_push_opts_free(o);
}

static void push_group(dq_client *c, const char *q, const char *g,
                       const char *prefix, int n, int64_t at) {
    push_prio(c, q, g, 0, prefix, n, at);
}

/* The promise: many jobs of A and one of B due at the same moment; B's
 * job is in the first poll with max 2 (a partitioned queue keeps the
 * promise per partition: in the first poll of B's partition, so within
 * the first polls that visit every partition). */
START_TEST(group_burst) {
    int np = tu_parts();
    int64_t at = server_ms(R) - 1000;
    push_group(C, Q, "A", "a", 3000, at);
    push_group(C, Q, "B", "b", 1, at);
    int found = -1;
    for (int k = 0; k < np && found < 0; k++) {
        dq_jobs *j = NULL;
        int n = poll_n(C, Q, 2, 30000, &j, NULL);
        ck_assert_int_gt(n, 0);
        for (int i = 0; i < n; i++)
            if (strcmp(dq_job_id(dq_jobs_at(j, (size_t)i)), "b0") == 0)
                found = k;
        dq_jobs_free(j);
    }
    ck_assert_msg(found >= 0, "B's job not in the first %d polls", np);
}
END_TEST

/* One group with jobs: its polls read due as an unflagged queue's do (no
 * other group to turn to) and keep the group's index in step (the jobs
 * taken leave it), so a second group that comes is served at once and
 * nothing of the index is left at the end. */
START_TEST(group_solo_drain) {
    int np = tu_parts();
    int64_t at = server_ms(R) - 1000;
    push_group(C, Q, "A", "a", 40, at);
    /* (a group whose turn comes in an hour changes nothing now) */
    push_group(C, Q, "L", "l", np, at + 3600000);
    int got = 0;
    for (int k = 0; k < 2; k++) {
        dq_jobs *j = NULL;
        int n = poll_n(C, Q, 10, 30000, &j, NULL);
        ck_assert_int_gt(n, 0);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(dq_job_id(dq_jobs_at(j, (size_t)i))[0], 'a');
        got += n;
        dq_jobs_free(j);
    }
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", Q, "g:A"), 40 - got);
    /* such a poll reads due as an unflagged queue's does: no group index
     * read, no id checked against due */
    redisReply *x = redisCommand(R, "CONFIG RESETSTAT");
    freeReplyObject(x);
    dq_jobs *j1 = NULL;
    got += poll_n(C, Q, 5, 30000, &j1, NULL);
    dq_jobs_free(j1);
    x = redisCommand(R, "INFO commandstats");
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_null(strstr(x->str, "cmdstat_zmscore:"));
    freeReplyObject(x);
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", Q, "g:A"), 40 - got);
    /* B's job, due before A's: in the next polls */
    push_group(C, Q, "B", "b", 1, at - 1000);
    int found = -1;
    for (int k = 0; k < np && found < 0; k++) {
        dq_jobs *j = NULL;
        int n = poll_n(C, Q, 2, 30000, &j, NULL);
        for (int i = 0; i < n; i++)
            if (strcmp(dq_job_id(dq_jobs_at(j, (size_t)i)), "b0") == 0)
                found = k;
        got += n;
        dq_jobs_free(j);
    }
    ck_assert_msg(found >= 0, "B's job not in the first %d polls", np);
    for (int k = 0; k < 100 && got < 41; k++) {
        dq_jobs *j = NULL;
        got += poll_n(C, Q, 10, 30000, &j, NULL);
        dq_jobs_free(j);
    }
    ck_assert_int_eq(got, 41);
    dq_jobs *none = NULL;
    ck_assert_int_eq(poll_n(C, Q, 10, 30000, &none, NULL), 0);
    ck_assert_int_eq(tu_sum(R, "EXISTS", "dq", Q, "g:A"), 0);
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", Q, "gq"),
                     tu_sum(R, "EXISTS", "dq", Q, "g:L")); /* L's turns */
}
END_TEST

/* Round-robin: four groups (one of them the jobs without a group) with
 * due jobs; every poll of max 4 takes one of each, and each group's jobs
 * come oldest first. */
START_TEST(group_round_robin) {
    if (tu_parts() > 1)
        return; /* fairness is per partition: the ids spread over them */
    int64_t now = server_ms(R);
    push_group(C, Q, "x", "x", 5, now - 400);
    push_group(C, Q, "y", "y", 5, now - 300);
    push_group(C, Q, "z", "z", 5, now - 200);
    /* (jobs without a group join the round once the queue has groups) */
    push_group(C, Q, NULL, "n", 5, now - 500);
    int last[128];
    memset(last, -1, sizeof(last));
    for (int round = 0; round < 5; round++) {
        dq_jobs *j = NULL;
        ck_assert_int_eq(poll_n(C, Q, 4, 30000, &j, NULL), 4);
        int seen[128] = {0};
        for (int i = 0; i < 4; i++) {
            const char *id = dq_job_id(dq_jobs_at(j, (size_t)i));
            unsigned char g = (unsigned char)id[0];
            int k = atoi(id + 1);
            ck_assert_msg(!seen[g], "round %d: two jobs of group %c", round,
                          g);
            seen[g] = 1;
            ck_assert_int_eq(k, last[g] + 1); /* oldest first */
            last[g] = k;
        }
        dq_jobs_free(j);
    }
    ck_stats(C, Q, 0, 0, 20, 0);
    /* dq_get tells a job's group; a job without one has none */
    dq_job_info *in = NULL;
    ck_assert_int_eq(dq_get(C, Q, "x1", &in), 1);
    ck_assert_str_eq(dq_job_info_group(in), "x");
    dq_job_info_free(in);
    ck_assert_int_eq(dq_get(C, Q, "n1", &in), 1);
    ck_assert_ptr_null(dq_job_info_group(in));
    dq_job_info_free(in);
}
END_TEST

/* Whether a poll of max 2 takes the job id (the others are B's). */
static int first_poll_has(const char *q, const char *id) {
    dq_jobs *j = NULL;
    int n = poll_n(C, q, 2, 30000, &j, NULL), got = 0;
    ck_assert_msg(n == 2, "poll for %s: %d %s", id, n, dq_errmsg(C));
    for (int i = 0; i < n; i++)
        got |= strcmp(dq_job_id(dq_jobs_at(j, (size_t)i)), id) == 0;
    dq_jobs_free(j);
    return got;
}

/* A job moved to a new due time keeps its group's index at that time:
 * one rescheduled later leaves no stale head entry that takes its
 * group's pick (which would hand a poll two of B's jobs and none of A's),
 * and one promoted or debounced to now is served by its group's turn,
 * not only by the fill from due behind older jobs of other groups. */
START_TEST(group_moved_jobs) {
    if (tu_parts() > 1)
        return; /* the ids spread over partitions */
    int64_t now = server_ms(R);
    push_group(C, Q, "A", "a", 1, now - 1000);
    push_group(C, Q, "B", "b", 3, now - 900);
    push_group(C, Q, "A", "c", 1, now - 800);
    ck_assert_int_eq(dq_reschedule(C, Q, "a0", 3600000, 0), DQ_RESCHED_MOVED);
    ck_assert_msg(first_poll_has(Q, "c0"), "A's due job not served");
    push_group(C, Q, "A", "p", 1, now + 3600000);
    ck_assert_int_eq(dq_promote(C, Q, "p0", 0), DQ_RESCHED_MOVED);
    ck_assert_msg(first_poll_has(Q, "p0"), "the promoted job not served");
    push_group(C, Q, "B", "e", 3, now - 700);
    push_group(C, Q, "A", "d", 1, now + 3600000);
    int oc = 0;
    ck_assert_int_eq(dq_push_ex(C, Q, "y", 1, 0, "d0", DQ_PUSH_DEBOUNCE, NULL,
                                NULL, 0, &oc),
                     0);
    ck_assert_int_eq(oc, 6); /* moved */
    ck_assert_msg(first_poll_has(Q, "d0"), "the debounced job not served");
    const char *kept[] = {"a0", "d0"}; /* both keep their group */
    for (int i = 0; i < 2; i++) {
        dq_job_info *in = NULL;
        ck_assert_int_eq(dq_get(C, Q, kept[i], &in), 1);
        ck_assert_str_eq(dq_job_info_group(in), "A");
        dq_job_info_free(in);
    }
}
END_TEST

/* Whether one of the first polls of max (one per partition) takes id. */
static int polls_take(const char *q, int max, const char *id) {
    int got = 0;
    for (int k = 0; k < tu_parts() && !got; k++) {
        dq_jobs *j = NULL;
        int n = poll_n(C, q, max, 30000, &j, NULL);
        ck_assert_msg(n > 0, "poll for %s: %d %s", id, n, dq_errmsg(C));
        for (int i = 0; i < n; i++)
            got |= strcmp(dq_job_id(dq_jobs_at(j, (size_t)i)), id) == 0;
        dq_jobs_free(j);
    }
    return got;
}

/* The one job of q (polls of max 1, one per partition at most): a list
 * of it, leased for lease_ms. */
static dq_jobs *claim_one(const char *q, int64_t lease_ms) {
    dq_jobs *j = NULL;
    for (int k = 0; k < tu_parts() && dq_jobs_count(j) == 0; k++) {
        dq_jobs_free(j);
        j = NULL;
        poll_n(C, q, 1, lease_ms, &j, NULL);
    }
    ck_assert_int_eq(dq_jobs_count(j), 1);
    return j;
}

/* A job pushed before the queue's first grouped push (not indexed then)
 * does not wait behind a big group's burst: the first polls of max 2
 * take it. */
START_TEST(group_before_flag) {
    int64_t at = server_ms(R) - 2000;
    push_group(C, Q, NULL, "u", 1, at);
    push_group(C, Q, "A", "a", 2000, at + 1000);
    ck_assert_msg(polls_take(Q, 2, "u0"), "the job pushed before the "
                  "queue's first grouped push waits behind A's");
}
END_TEST

/* Many jobs pushed before the flag at one and the same time (batch edges
 * fall inside one score): every poll of max 2 takes one of them beside
 * one of A's burst, and after a few polls every one still pending is
 * indexed (the fill's cursor gone; in compact-push they wait in compact
 * buckets, which no index holds). */
START_TEST(group_before_flag_many) {
    int np = tu_parts();
    int64_t at = server_ms(R) - 2000;
    push_group(C, Q, NULL, "u", 500, at);
    push_group(C, Q, "A", "a", 2000, at + 1000);
    int taken_u = 0;
    for (int k = 0; k < 8 * np; k++) {
        dq_jobs *j = NULL;
        ck_assert_int_eq(poll_n(C, Q, 2, 30000, &j, NULL), 2);
        int u = 0;
        for (int i = 0; i < 2; i++)
            u += dq_job_id(dq_jobs_at(j, (size_t)i))[0] == 'u';
        ck_assert_msg(u == 1, "poll %d took %d of the 500", k, u);
        taken_u += u;
        dq_jobs_free(j);
    }
    const char *lay = getenv("DQ_TEST_LAYOUT");
    if (lay != NULL && strcmp(lay, "compact-push") == 0)
        return;
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", Q, "g:"), 500 - taken_u);
    char key[800];
    for (int p = np == 1 ? -1 : 0; p < (np == 1 ? 0 : np); p++) {
        tu_part_key(key, sizeof(key), "dq", Q, "conf", p);
        redisReply *rep = th_cmd(R, "HEXISTS %s gfill", key);
        ck_assert_int_eq(rep->integer, 0);
        freeReplyObject(rep);
    }
}
END_TEST

/* A job requeued from dead enters its group's turn: not left to the fill
 * from due behind a big group's burst. */
START_TEST(group_dead_requeued) {
    push_group(C, Q, "B", "d", 1, server_ms(R) - 3000);
    dq_jobs *j = claim_one(Q, 30000);
    const dq_job *d = dq_jobs_at(j, 0);
    ck_assert_int_eq(dq_nack(C, Q, dq_job_id(d), dq_job_token(d), 0,
                             DQ_NACK_DEAD),
                     1);
    dq_jobs_free(j);
    push_group(C, Q, "A", "a", 2000, server_ms(R) - 1000);
    ck_assert_int_eq(dq_dead_requeue(C, Q, "d0", 0), 1);
    ck_assert_msg(polls_take(Q, 2, "d0"), "the requeued job waits behind "
                  "A's");
}
END_TEST

/* A repeating job's next run (set by its ack) enters its group's turn. */
START_TEST(group_repeat_next_run) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, "B"), 0);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 300), 0);
    int oc = 0;
    ck_assert_int_eq(dq_push_ex(C, Q, "r", 1, 0, "r0", 0, o, NULL, 0, &oc),
                     0);
    dq_push_opts_free(o);
    dq_jobs *j = claim_one(Q, 30000);
    const dq_job *r = dq_jobs_at(j, 0);
    ck_assert_int_eq(dq_ack(C, Q, dq_job_id(r), dq_job_token(r)), 0);
    dq_jobs_free(j);
    push_group(C, Q, "A", "a", 2000, server_ms(R) - 1000);
    th_sleep_ms(400); /* the next run is due */
    ck_assert_msg(polls_take(Q, 2, "r0"), "the repeating job's next run "
                  "waits behind A's");
}
END_TEST

/* A debounced job's follow-up, started by the ack of its running
 * delivery, enters the turn of the jobs without a group. */
START_TEST(group_debounce_follow_up) {
    int oc = 0;
    ck_assert_int_eq(dq_push_ex(C, Q, "1", 1, 0, "f0", DQ_PUSH_DEBOUNCE, NULL,
                                NULL, 0, &oc),
                     0);
    dq_jobs *j = claim_one(Q, 30000);
    const dq_job *f = dq_jobs_at(j, 0);
    ck_assert_int_eq(dq_push_ex(C, Q, "2", 1, 0, "f0", DQ_PUSH_DEBOUNCE, NULL,
                                NULL, 0, &oc),
                     0);
    ck_assert_int_eq(oc, 7); /* a follow-up */
    push_group(C, Q, "A", "a", 2000, server_ms(R) - 1000);
    ck_assert_int_eq(dq_ack(C, Q, dq_job_id(f), dq_job_token(f)), 0);
    dq_jobs_free(j);
    ck_assert_msg(polls_take(Q, 2, "f0"), "the follow-up waits behind A's");
}
END_TEST

/* A job whose lease ran out (its holder crashed) is not left behind a
 * big group's burst either: expired leases keep a share of the poll. */
START_TEST(group_expired_lease) {
    push_group(C, Q, "B", "e", 1, server_ms(R) - 3000);
    dq_jobs *j = claim_one(Q, 300);
    dq_jobs_free(j); /* never acked */
    push_group(C, Q, "A", "a", 2000, server_ms(R) - 1000);
    th_sleep_ms(400);
    ck_assert_msg(polls_take(Q, 2, "e0"), "the job whose lease ran out "
                  "waits behind A's");
}
END_TEST

/* ---- priorities ------------------------------------------------------------ */

/* The promise: with 10,000 due jobs of priority 0, a job of priority 5
 * pushed due now is in the next poll (per partition: within the polls
 * that visit every partition). */
START_TEST(prio_promise) {
    int np = tu_parts();
    push_group(C, Q, NULL, "a", 10000, server_ms(R) - 1000);
    push_prio(C, Q, NULL, 5, "hi", 1, server_ms(R));
    int found = -1;
    for (int k = 0; k < np && found < 0; k++) {
        dq_jobs *j = NULL;
        int n = poll_n(C, Q, 1, 30000, &j, NULL);
        ck_assert_int_eq(n, 1);
        if (strcmp(dq_job_id(dq_jobs_at(j, 0)), "hi0") == 0)
            found = k;
        dq_jobs_free(j);
    }
    ck_assert_msg(found >= 0, "the priority job not in the first %d polls",
                  np);
}
END_TEST

/* Order: higher priority first, oldest first within a level, never a job
 * before its due time; within a group, beside round-robin over groups;
 * dq_get tells the priority; a bad one is refused. */
START_TEST(prio_order) {
    if (tu_parts() > 1)
        return; /* the ids spread over partitions */
    int64_t now = server_ms(R);
    push_prio(C, Q, NULL, 0, "z", 2, now - 900);
    push_prio(C, Q, NULL, 3, "m", 2, now - 500);
    push_prio(C, Q, NULL, 7, "h", 1, now - 100);
    push_prio(C, Q, NULL, 9, "f", 1, now + 3600000); /* not due */
    const char *want[] = {"h0", "m0", "m1", "z0", "z1"};
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(C, Q, 10, 30000, &j, NULL), 5);
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(dq_job_id(dq_jobs_at(j, (size_t)i)), want[i]);
    dq_jobs_free(j);
    /* groups: each group's highest first, one of each per round */
    push_prio(C, Q, "A", 0, "a", 2, now - 800);
    push_prio(C, Q, "A", 4, "p", 1, now - 10);
    push_prio(C, Q, "B", 0, "b", 2, now - 700);
    ck_assert_int_eq(poll_n(C, Q, 2, 30000, &j, NULL), 2);
    int seen_p = 0, seen_b = 0;
    for (int i = 0; i < 2; i++) {
        const char *id = dq_job_id(dq_jobs_at(j, (size_t)i));
        seen_p |= strcmp(id, "p0") == 0;
        seen_b |= strcmp(id, "b0") == 0;
    }
    ck_assert_msg(seen_p && seen_b, "A's priority job and B's oldest");
    dq_jobs_free(j);
    dq_job_info *in = NULL;
    ck_assert_int_eq(dq_get(C, Q, "f0", &in), 1);
    ck_assert_int_eq(dq_job_info_priority(in), 9);
    dq_job_info_free(in);
    ck_assert_int_eq(dq_get(C, Q, "a0", &in), 1);
    ck_assert_int_eq(dq_job_info_priority(in), 0);
    dq_job_info_free(in);
    ck_assert_int_eq(dq_job_info_priority(NULL), 0);
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, 10), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, -1), DQ_EINVAL);
    dq_push_opts_free(o);
}
END_TEST

/* ---- the limit per group ------------------------------------------------------ */

static void set_group_limit(dq_client *c, const char *q, int64_t v) {
    int s = DQ_SET_GROUP_MAX_INFLIGHT;
    int rc = dq_config_set(c, q, 1, &s, &v);
    ck_assert_msg(rc == 0, "config set group_inflight_max=%" PRId64 ": %d %s",
                  v, rc, dq_errmsg(c));
}

/* Polls q (max 20, lease lease_ms): how many of the jobs taken are of
 * group prefix letter a; the jobs to *b (NULL: freed). */
static int poll_count(const char *q, int64_t lease_ms, char a, int *total,
                      dq_jobs **keep) {
    dq_jobs *j = NULL;
    int n = poll_n(C, q, 20, lease_ms, &j, NULL), of_a = 0;
    for (int i = 0; i < n; i++)
        of_a += dq_job_id(dq_jobs_at(j, (size_t)i))[0] == a;
    *total = n;
    if (keep != NULL)
        *keep = j;
    else
        dq_jobs_free(j);
    return of_a;
}

/* At most N of one group's jobs leased at once; a held-back group is
 * skipped while other groups (and jobs without a group) are served; an
 * ack, a nack and a lease that runs out free a slot. */
START_TEST(group_limit) {
    if (tu_parts() > 1)
        return; /* the limit is split over the partitions */
    set_group_limit(C, Q, 2);
    int64_t now = server_ms(R);
    push_group(C, Q, "A", "a", 10, now - 1000);
    push_group(C, Q, "B", "b", 10, now - 900);
    push_group(C, Q, NULL, "n", 3, now - 800);
    int total = 0;
    dq_jobs *held = NULL;
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, &held), 2);
    ck_assert_int_eq(total, 2 + 2 + 3); /* A 2, B 2, the 3 without group */
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 0);
    ck_assert_int_eq(total, 0);
    /* an ack of one of A's frees one slot of A's, nothing of B's */
    const dq_job *a0 = NULL;
    for (size_t i = 0; i < dq_jobs_count(held); i++)
        if (dq_job_id(dq_jobs_at(held, i))[0] == 'a')
            a0 = dq_jobs_at(held, i);
    ck_assert_int_eq(dq_ack(C, Q, dq_job_id(a0), dq_job_token(a0)), 0);
    ck_assert_int_eq(poll_count(Q, 300, 'a', &total, NULL), 1);
    ck_assert_int_eq(total, 1);
    dq_jobs_free(held);
    /* that lease runs out: its slot frees (and the job comes back) */
    usleep(400 * 1000);
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 1);
    ck_assert_int_eq(total, 1);
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 0);
    /* unset: A and B flow again */
    set_group_limit(C, Q, DQ_UNSET);
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 7);
    ck_assert_int_eq(total, 15); /* A 7, B 8 */
}
END_TEST

/* Consumers killed while holding every slot of a group: the slots come
 * back within a lease. */
START_TEST(group_limit_killed_holders) {
    if (tu_parts() > 1)
        return;
    set_group_limit(C, Q, 3);
    push_group(C, Q, "A", "a", 10, server_ms(R) - 100);
    for (int k = 0; k < 3; k++) {
        pid_t p = fork();
        if (p == 0) {
            dq_client *c = open_client();
            dq_jobs *j = NULL;
            int n = dq_poll(c, Q, 1, 500, &j, NULL);
            _exit(n == 1 ? 0 : 1);
        }
        int st = 0;
        waitpid(p, &st, 0);
        ck_assert_int_eq(WEXITSTATUS(st), 0);
    }
    int total = 0;
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 0);
    usleep(600 * 1000);
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 3);
}
END_TEST

/* Polls q once (max, lease_ms): how many jobs it hands out. */
static int poll_took(const char *q, int max, int64_t lease_ms) {
    dq_jobs *j = NULL;
    int n = poll_n(C, q, max, lease_ms, &j, NULL);
    dq_jobs_free(j);
    return n;
}

/* Polls q once (max, lease 30 s): it hands out job id only. */
static void poll_only(const char *q, int max, const char *id) {
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(C, q, max, 30000, &j, NULL), 1);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), id);
    dq_jobs_free(j);
}

/* Group A at its limit of 2, both of its slots held, and two leases of
 * A's that ran out (a0 a1, never claimed again: A has no room).  Then
 * job n0 (no group) is leased for 200 ms after them. */
static void refill_setup(const char *q) {
    set_group_limit(C, q, 2);
    push_group(C, q, "A", "a", 4, server_ms(R) - 5000);
    for (int k = 0; k < 2; k++) /* a0 a1 on short leases */
        ck_assert_int_eq(poll_took(q, 1, 200), 1);
    usleep(250 * 1000);
    for (int k = 0; k < 2; k++) /* a2 a3 take A's room */
        ck_assert_int_eq(poll_took(q, 1, 30000), 1);
    ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", q, "g:A"), 0);
    push_group(C, q, NULL, "n", 1, server_ms(R) - 4000);
    ck_assert_int_eq(poll_took(q, 1, 200), 1); /* n0 */
}

/* The oldest leases that ran out all of a group at its limit: a poll
 * reads on past them to a later one of a group with room (here n0's,
 * whose lease ran out after a0's and a1's), rather than hand out none. */
START_TEST(group_limit_reads_on_leases) {
    if (tu_parts() > 1)
        return; /* the limit is split over the partitions */
    refill_setup(Q);
    usleep(250 * 1000); /* n0's lease runs out too */
    poll_only(Q, 2, "n0");
}
END_TEST

/* The share of the poll kept for leases that ran out, unused when those
 * read are all of a group at its limit, goes back to the groups' picks:
 * a poll of 2 with three jobs without a group due takes two of them. */
START_TEST(group_limit_share_left) {
    if (tu_parts() > 1)
        return;
    refill_setup(Q);
    push_group(C, Q, NULL, "p", 3, server_ms(R) - 3000);
    ck_assert_int_eq(poll_took(Q, 2, 30000), 2);
}
END_TEST

/* A due job that no index holds (as one pushed while its slot migrated,
 * when the push could not read conf: its index entry removed here), due
 * after the oldest due jobs of a group at its limit: the fill from due
 * reads on past those to it. */
START_TEST(group_limit_reads_on_due) {
    if (tu_parts() > 1)
        return;
    set_group_limit(C, Q, 1);
    push_group(C, Q, "A", "a", 4, server_ms(R) - 5000);
    ck_assert_int_eq(poll_took(Q, 1, 30000), 1); /* A at its limit */
    push_group(C, Q, NULL, "u", 1, server_ms(R) - 1000);
    char k[256];
    tu_key(k, sizeof(k), "dq", Q, "g:", NULL);
    redisReply *r = redisCommand(R, "ZREM %s u0", k);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->integer, 1);
    freeReplyObject(r);
    poll_only(Q, 2, "u0");
}
END_TEST

/* ---- a randomized run against a reference model --------------------------- */

/* The model: the jobs each client holds (id, token, lease deadline on the
 * server clock), and the jobs finished.  After every step: Redis has at
 * most L leased; the model's live holds are exactly what Redis counts
 * (every live lease is one we hold); a poll on a queue with due work and
 * free slots (by the model) claims something; every job is finished
 * exactly once in the end. */
enum { MJOBS = 60, MHOLD = 64 };

typedef struct hold {
    char id[DQ_ID_BUF];
    char tok[48];
    int64_t deadline;
} hold;

typedef struct model {
    hold h[MHOLD];
    int n;
    int done[MJOBS];
    int finished;
} model;

/* "j<k>" or, pushed with a group, "j<k>_0" (push_group's ids). */
static int job_no(const char *id) { return atoi(id + 1); }

static int live_holds(const model *m, int64_t now) {
    int k = 0;
    for (int i = 0; i < m->n; i++)
        k += m->h[i].deadline > now;
    return k;
}

static void drop_hold(model *m, int i) { m->h[i] = m->h[--m->n]; }

/* Holds of expired leases are forgotten once the job is claimed again. */
static void forget_id(model *m, const char *id) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->h[i].id, id) == 0) {
            drop_hold(m, i);
            return;
        }
}

static void model_poll(model *m, dq_client *c, const char *q, int L,
                       unsigned *seed) {
    int max = 1 + (int)(rand_r(seed) % 6);
    int64_t lease = rand_r(seed) % 3 == 0 ? 150 : 20000;
    dq_jobs *j = NULL;
    int n = poll_n(c, q, max, lease, &j, NULL);
    /* the slots free by the time after the poll bound those it found */
    int free_slots = L - live_holds(m, server_ms(R));
    ck_assert_int_le(n, free_slots > 0 ? free_slots : 0);
    for (int k = 0; k < n; k++) {
        const dq_job *job = dq_jobs_at(j, (size_t)k);
        forget_id(m, dq_job_id(job));
        ck_assert_int_lt(m->n, MHOLD);
        hold *h = &m->h[m->n++];
        snprintf(h->id, sizeof(h->id), "%s", dq_job_id(job));
        snprintf(h->tok, sizeof(h->tok), "%s", dq_job_token(job));
        h->deadline = dq_job_lease_deadline_ms(job);
    }
    dq_jobs_free(j);
}

/* Acks, nacks (retry or dead) or cancels a random hold.  A hold whose
 * lease ran out may have been claimed again: its answer then says stale,
 * and the model drops it. */
static void model_release(model *m, dq_client *c, const char *q,
                          unsigned *seed) {
    if (m->n == 0)
        return;
    int i = (int)(rand_r(seed) % (unsigned)m->n);
    hold *h = &m->h[i];
    int what = (int)(rand_r(seed) % 4), rc;
    if (what == 0 || what == 1) {
        rc = dq_ack(c, q, h->id, h->tok);
        ck_assert_msg(rc == 0 || rc == DQ_ESTALE, "ack %s: %d", h->id, rc);
        if (rc == 0 && !m->done[job_no(h->id)]) {
            m->done[job_no(h->id)] = 1;
            m->finished++;
        }
    } else if (what == 2) {
        rc = dq_nack(c, q, h->id, h->tok, rand_r(seed) % 2 ? 0 : 50, 0);
        ck_assert_msg(rc == 0 || rc == DQ_ESTALE, "nack %s: %d", h->id, rc);
    } else {
        rc = dq_cancel(c, q, h->id, DQ_CANCEL_INFLIGHT);
        ck_assert_msg(rc == 3 || rc == 1 || rc == 0, "cancel %s: %d", h->id,
                      rc);
        if (rc != 0 && !m->done[job_no(h->id)]) {
            m->done[job_no(h->id)] = 1;
            m->finished++;
        }
    }
    drop_hold(m, i);
}

START_TEST(limit_model) {
    int np = tu_parts();
    unsigned seed = (unsigned)wall_us();
    fprintf(stderr, "limit_model: seed %u\n", seed);
    dq_client *cs[3] = {C, open_client(), open_client()};
    for (int round = 0; round < 3; round++) {
        char q[64];
        snprintf(q, sizeof(q), "model%d", round);
        int L = np * (1 + (int)(rand_r(&seed) % 4));
        set_limit(C, q, L);
        model m = {.n = 0};
        /* a third without a group, the others in one of three */
        static const char *const gname[4] = {NULL, "g0", "g1", "g2"};
        for (int i = 0; i < MJOBS; i++) {
            char id[16];
            const char *g = gname[rand_r(&seed) % 4];
            snprintf(id, sizeof(id), g ? "j%d_" : "j%d", i);
            if (g == NULL) {
                push_text(C, q, "x", (int64_t)(rand_r(&seed) % 200), id, 0,
                          NULL);
                continue;
            }
            push_group(C, q, g, id, 1, server_ms(R) + rand_r(&seed) % 200);
        }
        int64_t end = th_mono_ms() + 8000;
        int steps = 0;
        while (m.finished < MJOBS && th_mono_ms() < end) {
            dq_client *c = cs[rand_r(&seed) % 3];
            if (rand_r(&seed) % 2)
                model_poll(&m, c, q, L, &seed);
            else
                model_release(&m, c, q, &seed);
            if (rand_r(&seed) % 16 == 0)
                th_sleep_ms(20);
            /* every live lease in Redis is one the model holds */
            int64_t now = server_ms(R);
            long long inflight = leased_now(R, q);
            ck_assert_msg(inflight <= L, "%lld leased, limit %d", inflight,
                          L);
            ck_assert_int_le(inflight, live_holds(&m, now));
            steps++;
        }
        fprintf(stderr, "limit_model: queue %s limit %d: %d of %d jobs "
                "finished in %d steps\n", q, L, m.finished, MJOBS, steps);
        ck_assert_int_eq(m.finished, MJOBS);
        ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", q, "due"), 0);
        ck_assert_int_eq(tu_sum(R, "ZCARD", "dq", q, "lease"), 0);
        /* the groups' index: one poll drops what is left of it */
        dq_jobs *none = NULL;
        ck_assert_int_eq(poll_n(C, q, 10, 1000, &none, NULL), 0);
        ck_assert_int_eq(tu_sum(R, "EXISTS", "dq", q, "gq"), 0);
    }
    dq_close(cs[1]);
    dq_close(cs[2]);
}
END_TEST

/* ---- counts per group ---------------------------------------------------- */

/* The index of group g in l, or -1. */
static int gfind(const dq_group_list *l, const char *g) {
    for (size_t i = 0; i < dq_group_list_count(l); i++)
        if (strcmp(dq_group_list_name(l, i), g) == 0)
            return (int)i;
    return -1;
}

/* Group g's counts in l are due, later, inflight (absent: all 0). */
static void gcheck(const dq_group_list *l, const char *g, int64_t due,
                   int64_t later, int64_t inflight) {
    int i = gfind(l, g);
    int64_t got[3] = {0, 0, 0};
    if (i >= 0) {
        got[0] = dq_group_list_due(l, (size_t)i);
        got[1] = dq_group_list_later(l, (size_t)i);
        got[2] = dq_group_list_inflight(l, (size_t)i);
    }
    ck_assert_msg(got[0] == due && got[1] == later && got[2] == inflight,
                  "group '%s': due %" PRId64 " later %" PRId64 " inflight %"
                  PRId64 ", want %" PRId64 " %" PRId64 " %" PRId64,
                  g, got[0], got[1], got[2], due, later, inflight);
}

static dq_group_list *gstats(const char *q, int max, int want) {
    dq_group_list *l = NULL;
    int rc = dq_group_stats(C, q, max, &l);
    ck_assert_msg(rc == want, "group stats: %d (want %d) %s", rc, want,
                  dq_errmsg(C));
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(dq_group_list_count(l), (size_t)want);
    return l;
}

/* One job of group g due at at in every partition (ids "l<p>..."). */
static void push_later_each_part(const char *q, const char *g, int64_t at) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g), 0);
    for (int p = 0; p < tu_parts(); p++) {
        char base[16], id[40];
        snprintf(base, sizeof(base), "l%d", p);
        const char *ids[1] = {tu_id_in(id, sizeof(id), base, p)};
        const void *pls[1] = {"x"};
        size_t lens[1] = {1};
        int64_t times[1] = {at};
        ck_assert_int_eq(dq_push_batch_ex(C, q, 1, pls, lens, times, ids,
                                          DQ_PUSH_AT, o, NULL, NULL),
                         1);
    }
    dq_push_opts_free(o);
}

/* Known jobs of three groups (and none, and a priority): the counts due,
 * later and in flight match, before and after they are claimed, and an
 * ack takes one out of flight. */
START_TEST(group_stats_counts) {
    set_group_limit(C, Q, 40);
    int64_t now = server_ms(R);
    push_group(C, Q, "A", "a", 6, now - 1000);
    int np = tu_parts();
    push_later_each_part(Q, "A", now + 600000); /* A stays listed */
    push_group(C, Q, "B", "b", 3, now - 900);
    push_prio(C, Q, "B", 5, "p", 2, now - 800);
    push_group(C, Q, NULL, "n", 1, now - 700);
    dq_group_list *l = gstats(Q, 10, 3);
    ck_assert_int_eq(gfind(l, "C"), -1);
    gcheck(l, "A", 6, np, 0);
    gcheck(l, "B", 5, 0, 0);
    gcheck(l, "", 1, 0, 0);
    dq_group_list_free(l);
    /* claim all 12 due jobs (a partitioned poll may need several) */
    dq_jobs *held[20] = {NULL};
    int got = 0;
    for (int k = 0; k < 20 && got < 12; k++)
        got += poll_n(C, Q, 100, 30000, &held[k], NULL);
    ck_assert_int_eq(got, 12);
    /* B and '' have nothing pending: no turn; B is listed for its jobs
     * in flight, '' (no group: not counted by group) is not */
    ck_assert_int_eq(dq_group_stats(C, Q, 10, &l), 2);
    gcheck(l, "A", 0, np, 6);
    gcheck(l, "B", 0, 0, 5);
    ck_assert_int_eq(gfind(l, ""), -1);
    dq_group_list_free(l);
    /* an ack of one of A's: five in flight */
    const dq_job *a0 = NULL;
    for (int k = 0; k < 20 && a0 == NULL; k++)
        for (size_t i = 0; held[k] != NULL && i < dq_jobs_count(held[k]); i++)
            if (dq_job_id(dq_jobs_at(held[k], i))[0] == 'a')
                a0 = dq_jobs_at(held[k], i);
    ck_assert_int_eq(dq_ack(C, Q, dq_job_id(a0), dq_job_token(a0)), 0);
    ck_assert_int_eq(dq_group_stats(C, Q, 10, &l), 2);
    gcheck(l, "A", 0, np, 5);
    gcheck(l, "B", 0, 0, 5);
    dq_group_list_free(l);
    /* max 1: one group */
    dq_group_list_free(gstats(Q, 1, 1));
    for (int k = 0; k < 20; k++)
        dq_jobs_free(held[k]);
}
END_TEST

/* Without a limit per group the jobs in flight are counted per group
 * too, and a group whose jobs are all in flight is listed; an ack takes
 * one out, a group with nothing left is not listed. */
START_TEST(group_stats_inflight) {
    int64_t now = server_ms(R);
    push_group(C, Q, "A", "a", 5, now - 1000);
    push_group(C, Q, "B", "b", 3, now - 900);
    push_group(C, Q, NULL, "n", 2, now - 800);
    dq_jobs *held[40] = {NULL};
    int got = 0, nh = 0;
    for (; nh < 40 && got < 10; nh++)
        got += poll_n(C, Q, 100, 30000, &held[nh], NULL);
    ck_assert_int_eq(got, 10);
    dq_group_list *l = gstats(Q, 10, 2);
    gcheck(l, "A", 0, 0, 5);
    gcheck(l, "B", 0, 0, 3);
    dq_group_list_free(l);
    /* acks: one of B's, all of A's */
    int acked_b = 0;
    for (int k = 0; k < nh; k++)
        for (size_t i = 0; i < dq_jobs_count(held[k]); i++) {
            const dq_job *j = dq_jobs_at(held[k], i);
            char g = dq_job_id(j)[0];
            if (g == 'a' || (g == 'b' && !acked_b)) {
                ck_assert_int_eq(dq_ack(C, Q, dq_job_id(j), dq_job_token(j)),
                                 0);
                acked_b += g == 'b';
            }
        }
    l = gstats(Q, 10, 1);
    gcheck(l, "B", 0, 0, 2);
    ck_assert_int_eq(gfind(l, "A"), -1);
    dq_group_list_free(l);
    /* max 1 with a group pending: that one only */
    push_group(C, Q, "C", "c", 1, now - 700);
    l = gstats(Q, 1, 1);
    gcheck(l, "C", 1, 0, 0);
    dq_group_list_free(l);
    for (int k = 0; k < nh; k++)
        dq_jobs_free(held[k]);
}
END_TEST

/* A limit per group set while the group's jobs are in flight (leased with
 * no limit, so no poll indexed them): they count at once.  A holds 2 and
 * the limit is 2: no more of A's until one is acked; B is served. */
START_TEST(group_limit_set_in_flight) {
    if (tu_parts() > 1)
        return; /* the limit is split over the partitions */
    int64_t now = server_ms(R);
    push_group(C, Q, "A", "a", 6, now - 1000);
    push_group(C, Q, "B", "b", 2, now - 900);
    dq_jobs *held = NULL;
    ck_assert_int_eq(poll_n(C, Q, 3, 30000, &held, NULL), 3);
    const dq_job *a0 = NULL;
    int of_a = 0, total = 0;
    for (size_t i = 0; i < 3; i++)
        if (dq_job_id(dq_jobs_at(held, i))[0] == 'a')
            a0 = dq_jobs_at(held, i), of_a++;
    ck_assert_int_eq(of_a, 2);
    set_group_limit(C, Q, 2);
    dq_group_list *l = gstats(Q, 10, 2);
    gcheck(l, "A", 4, 0, 2);
    dq_group_list_free(l);
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 0);
    ck_assert_int_eq(total, 1); /* B's last one only */
    ck_assert_int_eq(dq_ack(C, Q, dq_job_id(a0), dq_job_token(a0)), 0);
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 1);
    ck_assert_int_eq(total, 1);
    dq_jobs_free(held);
    /* set again at another value: counted as before */
    set_group_limit(C, Q, 3);
    ck_assert_int_eq(poll_count(Q, 30000, 'a', &total, NULL), 1);
    ck_assert_int_eq(total, 1);
}
END_TEST

/* Without a limit per group the jobs in flight are counted from the
 * leases, a thousand a read: 2,200 in flight over three pages. */
START_TEST(group_stats_inflight_pages) {
    int64_t now = server_ms(R);
    push_group(C, Q, "A", "a", 1500, now - 1000);
    push_group(C, Q, "B", "b", 700, now - 900);
    int got = 0;
    for (int k = 0; k < 100 && got < 2200; k++) {
        dq_jobs *j = NULL;
        got += poll_n(C, Q, 1000, 60000, &j, NULL);
        dq_jobs_free(j);
    }
    ck_assert_int_eq(got, 2200);
    dq_group_list *l = gstats(Q, 10, 2);
    gcheck(l, "A", 0, 0, 1500);
    gcheck(l, "B", 0, 0, 700);
    dq_group_list_free(l);
}
END_TEST

/* A queue without groups: an empty list; bad input: refused, nothing
 * sent; the accessors take NULL and out-of-range indexes. */
START_TEST(group_stats_bad_input) {
    push_due(C, Q, 3);
    dq_group_list_free(gstats(Q, 10, 0));
    dq_group_list *l = (dq_group_list *)1;
    ck_assert_int_eq(dq_group_stats(C, Q, 0, &l), DQ_EINVAL);
    ck_assert_ptr_null(l);
    ck_assert_int_eq(dq_group_stats(C, Q, DQ_GROUP_STATS_MAX + 1, &l),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_group_stats(C, "", 10, &l), DQ_EQUEUE);
    ck_assert_int_eq(dq_group_stats(C, NULL, 10, &l), DQ_ENULL);
    ck_assert_int_eq(dq_group_stats(C, Q, 10, NULL), DQ_ENULL);
    ck_assert_int_eq(dq_group_list_count(NULL), 0);
    ck_assert_ptr_null(dq_group_list_name(NULL, 0));
    ck_assert_int_eq(dq_group_list_due(NULL, 0), 0);
    ck_assert_int_eq(dq_group_list_later(NULL, 0), 0);
    ck_assert_int_eq(dq_group_list_inflight(NULL, 0), 0);
    dq_group_list_free(NULL);
    push_group(C, Q, "A", "a", 2, server_ms(R) - 10);
    l = gstats(Q, 5, 1); /* A (the jobs pushed before the flag are not
                            indexed: no group '') */
    ck_assert_ptr_null(dq_group_list_name(l, 2));
    ck_assert_int_eq(dq_group_list_due(l, 99), 0);
    gcheck(l, "A", 2, 0, 0);
    dq_group_list_free(l);
}
END_TEST

/* ---- an extend of a lease that ran out ----------------------------------- */

/* Pushes n jobs of group g (NULL: none), all in partition 0 (ids
 * "<base><k>" or tu_id_in's), the k-th due at at + k ms; ids to out. */
static void push_in0(const char *q, const char *g, const char *base, int n,
                     int64_t at, char out[][40]) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    if (g != NULL)
        ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g), 0);
    for (int k = 0; k < n; k++) {
        char b[16];
        snprintf(b, sizeof(b), "%s%d", base, k);
        const char *ids[1] = {tu_id_in(out[k], 40, b, 0)};
        const void *pls[1] = {"x"};
        size_t lens[1] = {1};
        int64_t times[1] = {at + k};
        ck_assert_int_eq(dq_push_batch_ex(C, q, 1, pls, lens, times, ids,
                                          DQ_PUSH_AT, o, NULL, NULL),
                         1);
    }
    dq_push_opts_free(o);
}

/* Polls one job (max 1, lease lease_ms), which must be job id. */
static dq_jobs *claim_id(const char *q, int64_t lease_ms, const char *id) {
    dq_jobs *j = poll_until(C, q, 1, lease_ms, 2000);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(j, 0)), id);
    return j;
}

/* Pushes n jobs (push_in0, due 5 s ago, ids "<base><k>"), claims the
 * first with a lease that runs out (100 ms), waits for it to run out,
 * then claims the second: *first, *second. */
static void lapse_then_claim(const char *q, const char *g, const char *base,
                             int n, char id[][40], dq_jobs **first,
                             dq_jobs **second) {
    push_in0(q, g, base, n, server_ms(R) - 5000, id);
    *first = claim_id(q, 100, id[0]);
    th_sleep_ms(200);
    *second = claim_id(q, 30000, id[1]);
}

/* The extend, and the ack, of the job of list j (as claim_id's). */
static int extend_of(const char *q, const dq_jobs *j, int64_t lease_ms,
                     int64_t *dl) {
    const dq_job *x = dq_jobs_at(j, 0);
    return dq_extend(C, q, dq_job_id(x), dq_job_token(x), lease_ms, dl);
}

static int ack_of(const char *q, const dq_jobs *j) {
    const dq_job *x = dq_jobs_at(j, 0);
    return dq_ack(C, q, dq_job_id(x), dq_job_token(x));
}

/* The limit on jobs in flight (one per partition; both jobs in partition
 * 0): a's lease runs out and b takes its slot; an extend of a's lease is
 * then refused as lost (DQ_ESTALE) and changes nothing, never two in
 * flight; once b is acked the extend brings a back, and it holds the
 * slot (a poll takes nothing). */
START_TEST(extend_lapsed_limit) {
    set_limit(C, Q, tu_parts());
    char id[2][40];
    dq_jobs *a, *b;
    lapse_then_claim(Q, NULL, "e", 2, id, &a, &b);
    int64_t dl = -9;
    ck_assert_int_eq(extend_of(Q, a, 30000, &dl), DQ_ESTALE);
    ck_assert_int_eq(dl, -9);
    ck_assert_int_eq(leased_now(R, Q), 1);
    ck_assert_int_eq(ack_of(Q, b), 0);
    int64_t lo = server_ms(R);
    ck_assert_int_eq(extend_of(Q, a, 30000, &dl), 0);
    ck_assert_int_ge(dl, lo + 30000);
    ck_assert_int_eq(leased_now(R, Q), 1);
    dq_jobs *none = NULL;
    ck_assert_int_eq(poll_n(C, Q, 100, 30000, &none, NULL), 0);
    /* a live lease's extend needs no room: the slot is its own */
    ck_assert_int_eq(extend_of(Q, a, 30000, &dl), 0);
    ck_assert_int_eq(ack_of(Q, a), 0);
    dq_jobs_free(a);
    dq_jobs_free(b);
}
END_TEST

/* The limit per group (one per partition; A's jobs in partition 0): a0's
 * lease runs out and a1 takes A's slot; the extend of a0 is refused; a1
 * acked, it brings a0 back, counted in A's lease index (dq_group_stats:
 * one in flight) so the next poll leaves a2 waiting; a0 acked, a2 is
 * handed out. */
START_TEST(extend_lapsed_group_limit) {
    set_group_limit(C, Q, tu_parts());
    char id[3][40];
    dq_jobs *a0, *a1;
    lapse_then_claim(Q, "A", "a", 3, id, &a0, &a1);
    ck_assert_int_eq(extend_of(Q, a0, 30000, NULL), DQ_ESTALE);
    dq_group_list *l = gstats(Q, 10, 1);
    gcheck(l, "A", 1, 0, 1);
    dq_group_list_free(l);
    ck_assert_int_eq(ack_of(Q, a1), 0);
    ck_assert_int_eq(extend_of(Q, a0, 30000, NULL), 0);
    l = gstats(Q, 10, 1);
    gcheck(l, "A", 1, 0, 1);
    dq_group_list_free(l);
    dq_jobs *none = NULL;
    ck_assert_int_eq(poll_n(C, Q, 20, 30000, &none, NULL), 0);
    ck_assert_int_eq(leased_now(R, Q), 1);
    ck_assert_int_eq(ack_of(Q, a0), 0);
    dq_jobs *a2 = claim_id(Q, 30000, id[2]);
    ck_assert_int_eq(leased_now(R, Q), 1);
    dq_jobs_free(a0);
    dq_jobs_free(a1);
    dq_jobs_free(a2);
}
END_TEST

/* A queue with groups and no limit: a lease of A's that ran out and was
 * dropped from A's lease index (a later poll groomed it) is counted in
 * flight again once an extend brings it back. */
START_TEST(extend_lapsed_group_counted) {
    char id[2][40];
    dq_jobs *a0, *a1;
    lapse_then_claim(Q, "A", "a", 2, id, &a0, &a1);
    dq_group_list *l = gstats(Q, 10, 1);
    gcheck(l, "A", 0, 0, 1);
    dq_group_list_free(l);
    ck_assert_int_eq(extend_of(Q, a0, 30000, NULL), 0);
    l = gstats(Q, 10, 1);
    gcheck(l, "A", 0, 0, 2);
    dq_group_list_free(l);
    ck_assert_int_eq(ack_of(Q, a0), 0);
    ck_assert_int_eq(ack_of(Q, a1), 0);
    dq_jobs_free(a0);
    dq_jobs_free(a1);
}
END_TEST

/* The priority promise beside the room groups leave: A's three jobs of
 * priority 0, then three of priority 5, then B's one, all due; a poll of
 * 4 hands out B's job and A's three of priority 5 (the room B leaves goes
 * to A's next best, not to the oldest in due, A's priority 0 ones). */
START_TEST(prio_room_left) {
    if (tu_parts() > 1)
        return; /* the ids spread over partitions */
    int64_t now = server_ms(R);
    push_prio(C, Q, "A", 0, "a_low", 3, now - 100);
    push_prio(C, Q, "A", 5, "a_hi", 3, now - 50);
    push_prio(C, Q, "B", 0, "b", 1, now - 40);
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(C, Q, 4, 30000, &j, NULL), 4);
    const char *want[] = {"a_hi0", "b0", "a_hi1", "a_hi2"};
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(dq_job_id(dq_jobs_at(j, (size_t)i)), want[i]);
    dq_jobs_free(j);
    ck_assert_int_eq(poll_n(C, Q, 4, 30000, &j, NULL), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_str_eq(dq_job_id(dq_jobs_at(j, (size_t)i)),
                         i == 0 ? "a_low0" : i == 1 ? "a_low1" : "a_low2");
    dq_jobs_free(j);
}
END_TEST

TEST_SUITE("fair", TU_SRV_UNIX,
    {"limit_holds_and_frees", limit_holds_and_frees, 30, &fx},
    {"limit_lease_expiry", limit_lease_expiry, 30, &fx},
    {"limit_wakes_waiter", limit_wakes_waiter, 30, &fx},
    {"limit_killed_holders", limit_killed_holders, 60, &fx},
    {"group_burst", group_burst, 60, &fx},
    {"group_round_robin", group_round_robin, 30, &fx},
    {"group_solo_drain", group_solo_drain, 30, &fx},
    {"group_moved_jobs", group_moved_jobs, 30, &fx},
    {"group_before_flag", group_before_flag, 60, &fx},
    {"group_before_flag_many", group_before_flag_many, 60, &fx},
    {"group_dead_requeued", group_dead_requeued, 60, &fx},
    {"group_repeat_next_run", group_repeat_next_run, 60, &fx},
    {"group_debounce_follow_up", group_debounce_follow_up, 60, &fx},
    {"group_expired_lease", group_expired_lease, 60, &fx},
    {"prio_promise", prio_promise, 60, &fx},
    {"prio_order", prio_order, 30, &fx},
    {"prio_room_left", prio_room_left, 30, &fx},
    {"group_limit", group_limit, 30, &fx},
    {"group_limit_killed_holders", group_limit_killed_holders, 30, &fx},
    {"group_limit_reads_on_leases", group_limit_reads_on_leases, 30, &fx},
    {"group_limit_share_left", group_limit_share_left, 30, &fx},
    {"group_limit_reads_on_due", group_limit_reads_on_due, 30, &fx},
    {"group_limit_set_in_flight", group_limit_set_in_flight, 30, &fx},
    {"limit_model", limit_model, 60, &fx},
    {"group_stats_counts", group_stats_counts, 30, &fx},
    {"group_stats_inflight", group_stats_inflight, 30, &fx},
    {"group_stats_inflight_pages", group_stats_inflight_pages, 30, &fx},
    {"group_stats_bad_input", group_stats_bad_input, 30, &fx},
    {"extend_lapsed_limit", extend_lapsed_limit, 30, &fx},
    {"extend_lapsed_group_limit", extend_lapsed_group_limit, 30, &fx},
    {"extend_lapsed_group_counted", extend_lapsed_group_counted, 30, &fx})
