/*
 * tests/test_race.c - several consumers on separate connections racing on
 * one queue: every job is delivered exactly once (leases long enough that
 * none runs out), whether the consumers are processes or threads.
 */
#include "test_suite.h"
#include "test_utils.h"

#include <pthread.h>

enum { NJOBS = 2000, NCONS = 4 };

/* Pushes NJOBS jobs whose payload is their index ("%d"), due over the
 * first ~300 ms so consumers race both on due jobs and while waiting. */
static void push_jobs(dq_client *c, const char *queue, char *ids) {
    static char bufs[NJOBS][8];
    const void *pl[NJOBS];
    size_t lens[NJOBS];
    int64_t delays[NJOBS];
    for (int i = 0; i < NJOBS; i++) {
        lens[i] = (size_t)snprintf(bufs[i], sizeof(bufs[i]), "%d", i);
        pl[i] = bufs[i];
        delays[i] = (i % 4) * 100;
    }
    ck_assert_int_eq(
        dq_push_batch(c, queue, NJOBS, pl, lens, delays, NULL, 0, ids, NULL),
        NJOBS);
}

/* One consumer: claims with dq_poll_wait until the queue has nothing left
 * pending, reporting "index attempt\n" for each delivery on fd.
 * Returns 0 or a negative step number. */
static int consume(const char *queue, int fd, int max) {
    dq_client *c = NULL;
    if (dq_open(g_srv.uri, NULL, &c) != 0) {
        dq_close(c);
        return -1;
    }
    int64_t end = th_mono_ms() + 20000;
    int rc = 0;
    while (th_mono_ms() < end) {
        dq_jobs *jobs = NULL;
        int n = dq_poll_wait(c, queue, max, 30000, 200, &jobs);
        if (n < 0) {
            rc = -2;
            break;
        }
        if (n == 0) {
            int64_t sched = 0, due = 0;
            if (dq_stats(c, queue, &sched, &due, NULL, NULL, NULL) != 0) {
                rc = -3;
                break;
            }
            if (sched == 0 && due == 0)
                break;
            continue;
        }
        for (int i = 0; i < n; i++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)i);
            char line[64];
            int len = snprintf(line, sizeof(line), "%s %" PRId64 "\n",
                               (const char *)dq_job_payload(j, NULL),
                               dq_job_attempt(j));
            if (write(fd, line, (size_t)len) != len)
                rc = -4; /* < PIPE_BUF: atomic */
            if (dq_ack(c, queue, dq_job_id(j), dq_job_token(j)) != 0)
                rc = -5;
        }
        dq_jobs_free(jobs);
        if (rc != 0)
            break;
    }
    if (th_mono_ms() >= end)
        rc = -6;
    dq_close(c);
    return rc;
}

/* Reads "index attempt" lines from fd until EOF; checks every job came
 * exactly once, at attempt 1. */
static void check_deliveries(int fd) {
    static int count[NJOBS];
    memset(count, 0, sizeof(count));
    FILE *f = fdopen(fd, "r");
    ck_assert_ptr_nonnull(f);
    int idx, lines = 0;
    long long attempt;
    while (fscanf(f, "%d %lld", &idx, &attempt) == 2) {
        ck_assert_msg(idx >= 0 && idx < NJOBS, "bad index %d", idx);
        ck_assert_msg(attempt == 1, "job %d delivered with attempt %lld", idx,
                      attempt);
        count[idx]++;
        lines++;
    }
    fclose(f);
    for (int i = 0; i < NJOBS; i++)
        ck_assert_msg(count[i] == 1, "job %d delivered %d times", i, count[i]);
    ck_assert_int_eq(lines, NJOBS);
}

/* consume() as worker process k on queue arg: exits with 0, or 10 - its
 * negative step. */
static int consume_proc(int k, int fd, const void *arg) {
    int rc = consume(arg, fd, 1 + k * 3); /* max 1, 4, 7, 10 */
    return rc == 0 ? 0 : 10 - rc;
}

START_TEST(processes_race) {
    dq_client *c = open_client();
    push_jobs(c, Q, NULL);
    pid_t pids[NCONS];
    check_deliveries(tu_fork_writers(pids, NCONS, consume_proc, Q));
    tu_reap(pids, NCONS);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_close(c);
}
END_TEST

struct thread_arg {
    const char *queue;
    int fd;
    int max;
    int rc;
};

static void *thread_main(void *p) {
    struct thread_arg *a = p;
    a->rc = consume(a->queue, a->fd, a->max);
    return NULL;
}

START_TEST(threads_race) {
    dq_client *c = open_client();
    char *ids = malloc((size_t)NJOBS * DQ_ID_BUF);
    push_jobs(c, Q, ids);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    /* Drain the pipe in a forked reader so writers never block on it. */
    pid_t reader = fork();
    ck_assert_int_ge(reader, 0);
    if (reader == 0) {
        close(fds[1]);
        check_deliveries(fds[0]); /* ck_assert in a child exits non-zero */
        _exit(0);
    }
    close(fds[0]);
    pthread_t th[NCONS];
    struct thread_arg args[NCONS];
    for (int k = 0; k < NCONS; k++) {
        args[k] = (struct thread_arg){Q, fds[1], 2 + k, 0};
        ck_assert_int_eq(pthread_create(&th[k], NULL, thread_main, &args[k]), 0);
    }
    for (int k = 0; k < NCONS; k++) {
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
        ck_assert_msg(args[k].rc == 0, "thread %d: %d", k, args[k].rc);
    }
    close(fds[1]);
    int status = 0;
    ck_assert_int_eq(waitpid(reader, &status, 0), reader);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "delivery check failed in the reader (status %d)", status);
    ck_stats(c, Q, 0, 0, 0, 0);
    free(ids);
    dq_close(c);
}
END_TEST

enum { N = 60, LEASE = 150 };

/* A slow consumer of short_leases_never_overlap, worker process k on queue
 * arg: writes "<id> <lease from> <lease to>\n" per delivery to fd. */
static int slow_holder(int k, int fd, const void *arg) {
    const char *q = arg;
    (void)k;
    /* A lease that runs out is noticed by the consumer that owns
     * the queue's next event, or else by the others within their
     * idle cap: when the owner is a slow holder itself, that cap
     * must be shorter than its sleep for a redelivery to happen
     * while it still holds the job. */
    dq_options *o = dq_options_new();
    dq_client *cc = NULL;
    if (o == NULL ||
        dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, LEASE / 2) != 0 ||
        dq_open(g_srv.uri, o, &cc) != 0)
        _exit(2);
    dq_options_free(o);
    int64_t end = th_mono_ms() + 8000;
    unsigned seed = (unsigned)getpid();
    while (th_mono_ms() < end) {
        dq_jobs *jobs = NULL;
        int n = dq_poll_wait(cc, q, 1, LEASE, 300, &jobs);
        if (n < 0)
            _exit(3);
        if (n == 0) {
            int64_t s[5];
            if (dq_stats(cc, q, &s[0], &s[1], &s[2], NULL, NULL) != 0)
                _exit(4);
            if (s[0] + s[1] + s[2] == 0)
                break;
            continue;
        }
        const dq_job *j = dq_jobs_at(jobs, 0);
        char line[96];
        int64_t dl = dq_job_lease_deadline_ms(j);
        int len = snprintf(line, sizeof(line), "%s %" PRId64 " %" PRId64 "\n",
                           dq_job_id(j), dl - LEASE, dl);
        if (write(fd, line, (size_t)len) != len)
            _exit(5);
        /* a third of the jobs take four leases: a job whose lease
         * ran out sorts behind the jobs pushed before its deadline,
         * so a slow holder must outlast the rest of the queue for
         * the redelivery to happen before its late ack */
        seed = seed * 1103515245u + 12345u;
        int slow = (seed >> 16) % 3 == 0;
        th_sleep_ms(slow ? 4 * LEASE : 10);
        int rc = dq_ack(cc, q, dq_job_id(j), dq_job_token(j));
        if (rc != 0 && rc != DQ_ESTALE && rc != DQ_ENOTFOUND)
            _exit(6);
        dq_jobs_free(jobs);
    }
    dq_close(cc);
    return 0;
}

/* Short leases with slow consumers: a job may be redelivered after its lease,
 * but never while a lease on it is valid.  Each delivery is logged with its
 * server-side lease window [claim, deadline); windows of one job never
 * overlap. */
START_TEST(short_leases_never_overlap) {
    dq_client *c = open_client();
    for (int i = 0; i < N; i++) {
        char id[16];
        snprintf(id, sizeof(id), "j%d", i);
        push_text(c, Q, id, 0, id, 0, NULL);
    }
    pid_t pids[NCONS];
    int rd = tu_fork_writers(pids, NCONS, slow_holder, Q);
    enum { MAXD = 4000 };
    static int job[MAXD];
    static int64_t from[MAXD], to[MAXD];
    int nd = 0;
    FILE *f = fdopen(rd, "r");
    int idx;
    long long a, b;
    while (nd < MAXD && fscanf(f, " j%d %lld %lld", &idx, &a, &b) == 3) {
        job[nd] = idx, from[nd] = a, to[nd] = b;
        nd++;
    }
    fclose(f);
    tu_reap(pids, NCONS);
    /* slow consumers outlived some leases: those jobs came again */
    ck_assert_msg(nd > N, "only %d deliveries of %d jobs", nd, N);
    int seen[N];
    memset(seen, 0, sizeof(seen));
    for (int x = 0; x < nd; x++) {
        seen[job[x]] = 1;
        for (int y = x + 1; y < nd; y++)
            if (job[x] == job[y])
                ck_assert_msg(to[x] <= from[y] || to[y] <= from[x],
                              "job %d leased twice at once: [%lld,%lld) and "
                              "[%lld,%lld)",
                              job[x], (long long)from[x], (long long)to[x],
                              (long long)from[y], (long long)to[y]);
    }
    for (int i = 0; i < N; i++)
        ck_assert_msg(seen[i], "job %d never delivered", i);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_close(c);
}
END_TEST

TEST_SUITE("race", TU_SRV_UNIX,
    {"processes", processes_race, 60, NULL},
    {"threads", threads_race, 60, NULL},
    {"short_leases", short_leases_never_overlap, 60, NULL})
