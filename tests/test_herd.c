/*
 * tests/test_herd.c - many consumers waiting on one queue: a push wakes one
 * of them, not all (no thundering herd); a consumer that leaves due work
 * behind wakes the next; only one consumer polls for the next due time;
 * and no job is stranded when waiting consumers are SIGKILLed, whoever of
 * them was owed the wake-up.
 *
 * Polls are counted on the server (INFO commandstats: EVALSHA and EVAL
 * calls), never timed.  The waiters use a 60 s idle cap (the most) so that no cap poll
 * falls in a counting window.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_suite.h"
#include "test_utils.h"

#define K 8

/* Waits (up to 5 s) until n consumers are registered as waiting in every
 * partition of q. */
static void wait_registered(redisContext *r, const char *q, long long n) {
    long long want = n * tu_parts(), got = 0;
    for (int i = 0; i < 500; i++) {
        got = tu_sum(r, "ZCARD", "dq", q, "idle");
        if (got == want)
            return;
        th_sleep_ms(10);
    }
    ck_abort_msg("%lld of %lld registrations of waiting consumers", got, want);
}

/* How many of the waiters have returned. */
static int returned(tu_waiter *w, int n) {
    int k = 0;
    for (int i = 0; i < n; i++)
        k += __atomic_load_n(&w[i].done_us, __ATOMIC_SEQ_CST) != 0;
    return k;
}

/* Waits (up to 5 s) until n waiters have returned; returns how many did. */
static int wait_returned(tu_waiter *w, int k, int n) {
    for (int i = 0; i < 500 && returned(w, k) < n; i++)
        th_sleep_ms(10);
    return returned(w, k);
}

/* Opens the producer of a test: its first push and cancel on q have
 * loaded their scripts and (partitioned) checked the partition count, so
 * that its later pushes are one script call each. */
static dq_client *producer(const char *q) {
    dq_client *c = open_client();
    push_text(c, q, "x", 3600000, "warm", 0, NULL);
    ck_assert_int_eq(dq_cancel(c, q, "warm", 0), 1); /* 1: cancelled */
    return c;
}

/* A waiter that closes its client as soon as it returns: a client that
 * stays open but no longer waits could be told of due work for up to its
 * idle cap (its registration lives that long). */
static void *waiter_thread(void *arg) {
    tu_waiter *w = arg;
    dq_client *c = w->c;
    tu_wait_thread(w);
    dq_close(c);
    return NULL;
}

/* Starts k waiters (max 1, own clients with a 60 s idle cap) on q. */
static void start_waiters(tu_waiter *w, pthread_t *th, int k, const char *q) {
    memset(w, 0, sizeof(*w) * (size_t)k);
    for (int i = 0; i < k; i++) {
        w[i].c = open_client_opt(DQ_OPT_WAIT_CAP_MS, 60000);
        w[i].q = q;
        ck_assert_int_eq(pthread_create(&th[i], NULL, waiter_thread, &w[i]),
                         0);
    }
}

/* Joins the waiters (each returns by its 10 s timeout at the latest) and
 * checks that each got a job, distinct ones. */
static void join_waiters(tu_waiter *w, pthread_t *th, int k) {
    for (int i = 0; i < k; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(w[i].rc == 1, "waiter %d: %d %s", i, w[i].rc, w[i].err);
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(w[i].id, w[j].id);
    }
}

/* A test of K waiters: a hiredis link, the warmed producer, and the K
 * waiters on q, all registered. */
typedef struct herd {
    redisContext *r;
    dq_client *c;
    tu_waiter w[K];
    pthread_t th[K];
} herd;

static void herd_start(herd *h, const char *q) {
    h->r = rconn();
    h->c = producer(q);
    start_waiters(h->w, h->th, K, q);
    wait_registered(h->r, q, K);
}

/* Joins the waiters (join_waiters) and closes the rest. */
static void herd_end(herd *h) {
    join_waiters(h->w, h->th, K);
    dq_close(h->c);
    redisFree(h->r);
}

/* Pushes the n-th job (due in delay_ms) while K waiters wait on q and
 * checks that exactly one more waiter got a job, no earlier than due, with
 * exactly one poll (a herd would poll in the 100 ms after). */
static void push_one_poll(herd *h, const char *q, int n, int64_t delay_ms) {
    long long before = tu_script_calls(h->r);
    int64_t t0 = wall_ms();
    push_text(h->c, q, "x", delay_ms, NULL, 0, NULL);
    ck_assert_int_eq(wait_returned(h->w, K, n), n);
    int64_t took = wall_ms() - t0;
    th_sleep_ms(100);
    ck_assert_int_eq(returned(h->w, K), n);
    long long polls = tu_script_calls(h->r) - before - 1; /* - the push */
    ck_assert_msg(polls == 1, "job %d: %lld polls by %d waiters", n, polls,
                  K - n + 1);
    ck_assert_msg(took >= delay_ms - 10, "delivered after %lld ms",
                  (long long)took);
}

/* A job due now wakes exactly one of K waiting consumers: one poll. */
START_TEST(one_consumer_per_push) {
    herd h;
    herd_start(&h, Q);
    for (int n = 1; n <= K; n++)
        push_one_poll(&h, Q, n, 0);
    herd_end(&h);
}
END_TEST

/* A poll that leaves due work behind wakes one more consumer: K jobs due
 * at once reach K waiters (max 1 each), with one poll each. */
START_TEST(handoff_to_next) {
    herd h;
    herd_start(&h, Q);
    long long before = tu_script_calls(h.r);
    const void *pl[K];
    size_t len[K];
    int64_t delays[K];
    for (int i = 0; i < K; i++) {
        pl[i] = "x";
        len[i] = 1;
        delays[i] = 0;
    }
    /* one partition, so that the chain of hand-offs is one queue's */
    char id[K][40];
    const char *ids[K];
    for (int i = 0; i < K; i++) {
        char base[16];
        snprintf(base, sizeof(base), "h%d", i);
        ids[i] = tu_id_in(id[i], sizeof(id[i]), base, 0);
    }
    ck_assert_int_eq(dq_push_batch(h.c, Q, K, pl, len, delays, ids, 0, NULL,
                                   NULL),
                     K);
    ck_assert_int_eq(wait_returned(h.w, K, K), K);
    th_sleep_ms(100);
    long long polls = tu_script_calls(h.r) - before - 1;
    ck_assert_msg(polls <= K + 1, "%lld polls for %d jobs", polls, K);
    herd_end(&h);
}
END_TEST

/* A job due later is polled for by the one consumer that owns its due
 * time, when it is due. */
START_TEST(one_owner_per_due_time) {
    herd h;
    herd_start(&h, Q);
    for (int n = 1; n <= 3; n++)
        push_one_poll(&h, Q, n, 300);
    /* the rest get one job each, due at once, one after the other (a
     * waiter that just returned is still registered until its thread
     * closed its client: a push in between could be told to it) */
    for (int n = 4; n <= K; n++)
        push_one_poll(&h, Q, n, 0);
    herd_end(&h);
}
END_TEST

/* The idle key of q's partition part (-1 plain; the job's on a partitioned
 * run when id is given). */
static void idle_key(char *buf, size_t n, const char *q, const char *id) {
    if (id != NULL)
        tu_key(buf, n, "dq", q, "idle", id);
    else
        tu_part_key(buf, n, "dq", q, "idle", tu_parts() > 1 ? 0 : -1);
}

/* Waits (up to 5 s) until the idle key holds n registrations. */
static void wait_zcard(redisContext *r, const char *key, long long n) {
    long long got = -1;
    for (int i = 0; i < 500 && got != n; i++) {
        if (i > 0)
            th_sleep_ms(10);
        got = rint_(r, "ZCARD", key, NULL);
    }
    ck_assert_msg(got == n, "%s: %lld registrations, not %lld", key, got, n);
}

/* A consumer a poll just gave a job (it may still run its handler) is told
 * of new due work only when no waiting consumer is registered: here the
 * waiting one gets it, although the busy one's registration is earlier. */
START_TEST(waiting_consumer_told_before_busy_one) {
    redisContext *r = rconn();
    dq_client *c = producer(Q);
    char id0[40], id1[40], key[256];
    tu_id_in(id0, sizeof(id0), "busy", 0);
    tu_id_in(id1, sizeof(id1), "next", 0);
    idle_key(key, sizeof(key), Q, id0);
    push_text(c, Q, "x", 0, id0, 0, NULL);
    dq_client *busy = open_client_opt(DQ_OPT_WAIT_CAP_MS, 5000);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(busy, Q, 1, 30000, 5000, &jobs), 1);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), id0);
    /* busy now "runs its handler"; a consumer starts waiting (cap 60 s:
     * its registration is later than busy's) */
    tu_waiter w[1];
    pthread_t th[1];
    start_waiters(w, th, 1, Q);
    wait_zcard(r, key, 2);
    push_text(c, Q, "x", 0, id1, 0, NULL);
    ck_assert_int_eq(wait_returned(w, 1, 1), 1);
    join_waiters(w, th, 1);
    ck_assert_str_eq(w[0].id, id1);
    const dq_job *j = dq_jobs_at(jobs, 0);
    ck_assert_int_eq(dq_ack(busy, Q, dq_job_id(j), dq_job_token(j)), 0);
    dq_jobs_free(jobs);
    dq_close(busy);
    dq_close(c);
    redisFree(r);
}
END_TEST

/* A client with a short idle cap never shortens the life of the idle key
 * below a longer cap's registration: the waiter with the long cap stays
 * registered, and a push still reaches it at once. */
START_TEST(short_cap_keeps_long_registration) {
    redisContext *r = rconn();
    dq_client *c = producer(Q);
    char key[256];
    idle_key(key, sizeof(key), Q, NULL);
    tu_waiter w[1];
    pthread_t th[1];
    start_waiters(w, th, 1, Q); /* cap 60 s */
    wait_registered(r, Q, 1);
    dq_client *quick = open_client_opt(DQ_OPT_WAIT_CAP_MS, 10);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(quick, Q, 1, 30000, 0, &jobs), 0);
    dq_jobs_free(jobs);
    dq_close(quick);
    long long ttl = rint_(r, "PTTL", key, NULL);
    ck_assert_msg(ttl > 30000, "%s: %lld ms left", key, ttl);
    char id[40];
    push_text(c, Q, "x", 0, tu_id_in(id, sizeof(id), "late", 0), 0, NULL);
    ck_assert_int_eq(wait_returned(w, 1, 1), 1);
    join_waiters(w, th, 1);
    dq_close(c);
    redisFree(r);
}
END_TEST

/* ---- SIGKILL: no job stranded ---- */

#define NPROC 6
#define CAP_MS 300
/* Lateness bound after the waiters it was owed to died: the survivor's cap
 * (it polls then at the latest), the slack after which a registration
 * counts as dead (250 ms, lua/include/wake.lua), and room for a loaded machine. */
#define BOUND_MS (CAP_MS + 250 + 1200)

/* A consumer process on queue arg: polls (max 1) and acks until killed or
 * 15 s passed; writes "<id> <due ms> <received ms>\n" per job to fd. */
static int consumer_proc(int k, int fd, const void *arg) {
    const char *q = arg;
    (void)k;
    dq_options *o = dq_options_new();
    dq_client *c = NULL;
    if (o == NULL || dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, CAP_MS) != 0 ||
        dq_open(g_srv.uri, o, &c) != 0)
        _exit(2);
    dq_options_free(o);
    int64_t end = wall_ms() + 15000;
    while (wall_ms() < end) {
        dq_jobs *jobs = NULL;
        int n = dq_poll_wait(c, q, 1, 30000, 500, &jobs);
        if (n < 0)
            _exit(3);
        for (int i = 0; i < n; i++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)i);
            char line[128];
            int len = snprintf(line, sizeof(line), "%s %lld %lld\n",
                               dq_job_id(j), (long long)dq_job_due_ms(j),
                               (long long)wall_ms());
            if (dq_ack(c, q, dq_job_id(j), dq_job_token(j)) != 0 ||
                write(fd, line, (size_t)len) != len)
                _exit(4);
        }
        dq_jobs_free(jobs);
    }
    dq_close(c);
    return 0;
}

START_TEST(killed_waiters_strand_nothing) {
    redisContext *r = rconn();
    dq_client *c = open_client();
    pid_t pids[NPROC];
    int rd = tu_fork_writers(pids, NPROC, consumer_proc, Q);
    wait_registered(r, Q, NPROC);
    /* Jobs due over the next second: the wake-ups for them are owed to
     * some of the waiters, which then die. */
    const int njobs = 12;
    char id[40];
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof(id), "before%d", i);
        push_text(c, Q, "x", 150 + 150 * i, id, 0, NULL);
    }
    th_sleep_ms(50);
    for (int i = 0; i < NPROC - 1; i++)
        tu_kill(pids[i]);
    /* and jobs pushed after the deaths: their wake-ups go to dead
     * consumers first */
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof(id), "after%d", i);
        push_text(c, Q, "x", i % 2 ? 0 : 100 * i, id, 0, NULL);
    }
    /* Read what the survivor (and the others before dying) delivered. */
    char buf[8192];
    size_t used = 0;
    int64_t end = wall_ms() + 8000;
    int lines = 0;
    while (lines < njobs && wall_ms() < end) {
        struct pollfd pfd = {rd, POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0)
            continue;
        ssize_t n = read(rd, buf + used, sizeof(buf) - 1 - used);
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            lines += buf[used + (size_t)i] == '\n';
        used += (size_t)n;
    }
    buf[used] = '\0';
    kill(pids[NPROC - 1], SIGKILL);
    waitpid(pids[NPROC - 1], NULL, 0);
    close(rd);
    ck_assert_msg(lines == njobs, "%d of %d jobs delivered:\n%s", lines,
                  njobs, buf);
    char seen[njobs][40];
    int k = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char jid[40];
        long long due, got;
        ck_assert_int_eq(sscanf(line, "%39s %lld %lld", jid, &due, &got), 3);
        for (int j = 0; j < k; j++)
            ck_assert_msg(strcmp(seen[j], jid) != 0, "%s delivered twice",
                          jid);
        snprintf(seen[k++], sizeof(seen[0]), "%s", jid);
        ck_assert_msg(got - due <= BOUND_MS, "%s delivered %lld ms late", jid,
                      got - due);
    }
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_close(c);
    redisFree(r);
}
END_TEST

TEST_SUITE("herd", TU_SRV_UNIX,
    {"one_consumer_per_push", one_consumer_per_push, 60, NULL},
    {"handoff_to_next", handoff_to_next, 60, NULL},
    {"one_owner_per_due_time", one_owner_per_due_time, 60, NULL},
    {"waiting_consumer_told_before_busy_one",
     waiting_consumer_told_before_busy_one, 60, NULL},
    {"short_cap_keeps_long_registration", short_cap_keeps_long_registration,
     60, NULL},
    {"killed_waiters_strand_nothing", killed_waiters_strand_nothing, 60, NULL})
