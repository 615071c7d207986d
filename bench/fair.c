/*
 * bench/fair.c - the driver of bench/fair.sh: fair claiming measured on a
 * private redis-server (its unix socket is argv[2]).
 *
 *   dqfair burst SOCK GROUPS   100,000 jobs of group A and GROUPS small
 *                              groups of one job, all due at one moment:
 *                              the small jobs' lateness p99 (server
 *                              clock) against the same jobs on an idle
 *                              queue, and A's drain rate against a plain
 *                              queue's (one consumer, polls of 100)
 *   dqfair limit SOCK PROCS    DQ_SET_MAX_INFLIGHT = 10, PROCS consumer
 *                              processes: most leased at once (sampled
 *                              from Redis every ms), throughput against
 *                              the same queue unlimited, polls per job
 *   dqfair prio SOCK N         N jobs of priority 0 due, then one of
 *                              priority 5 pushed due now: the poll (max
 *                              1) it comes in and its lateness (server
 *                              clock) against an idle queue's, and the
 *                              drain of the N against a plain queue's
 *
 * Prints one line per figure.  Timed figures are noisy on a shared
 * machine; the ratios are of the same run.
 */
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "delayq.h"

static const char *g_sock;
static char g_uri[600];

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what, dq_client *c) {
    fprintf(stderr, "dqfair: %s: %s\n", what, c ? dq_errmsg(c) : "");
    exit(1);
}

static dq_client *client(void) {
    dq_client *c = NULL;
    if (dq_open(g_uri, NULL, &c) != 0)
        die("open", c);
    return c;
}

static long long rcmd_int(redisContext *r, const char *cmd) {
    redisReply *rep = redisCommand(r, cmd);
    long long v = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    if (rep)
        freeReplyObject(rep);
    return v;
}

static int64_t server_ms(redisContext *r) {
    redisReply *rep = redisCommand(r, "TIME");
    int64_t ms = atoll(rep->element[0]->str) * 1000 +
                 atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

/* Pushes n jobs of group g (NULL: none) and priority prio due at server
 * ms at; ids "<prefix><k>". */
static void push_prio(dq_client *c, const char *q, const char *g, int prio,
                      const char *prefix, long n, int64_t at) {
    dq_push_opts *o = dq_push_opts_new();
    if (g != NULL && dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g) != 0)
        die("group", NULL);
    if (dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, prio) != 0)
        die("priority", NULL);
    enum { B = 1000 };
    static char idb[B][48];
    const char *ids[B];
    const void *pls[B];
    size_t lens[B];
    int64_t times[B];
    for (long done = 0; done < n;) {
        int k = n - done < B ? (int)(n - done) : B;
        for (int i = 0; i < k; i++) {
            snprintf(idb[i], sizeof(idb[i]), "%s%ld", prefix, done + i);
            ids[i] = idb[i], pls[i] = "payload", lens[i] = 7, times[i] = at;
        }
        if (dq_push_batch_ex(c, q, (size_t)k, pls, lens, times, ids,
                             DQ_PUSH_AT, o, NULL, NULL) != k)
            die("push", c);
        done += k;
    }
    dq_push_opts_free(o);
}

static void push_at(dq_client *c, const char *q, const char *g,
                    const char *prefix, long n, int64_t at) {
    push_prio(c, q, g, 0, prefix, n, at);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double p99(double *v, long n) {
    if (n == 0)
        return -1;
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return v[(long)((double)(n - 1) * 0.99)];
}

/* Drains q (polls of 100, ack_batch) until total jobs were taken: the
 * lateness (server ms after due) of the jobs whose id starts with 's'
 * into late (n_late of them), and the ms the others took from start_ms
 * (server) to the last one's delivery. */
enum { LEASE = 60000 };
static double drain(dq_client *c, const char *q, long total, double *late,
                    long *n_late, int64_t start_ms) {
    long got = 0;
    int64_t last_big = start_ms;
    *n_late = 0;
    while (got < total) {
        dq_jobs *j = NULL;
        int n = dq_poll(c, q, 100, LEASE, &j, NULL);
        if (n < 0)
            die("poll", c);
        if (n == 0) {
            usleep(1000);
            continue;
        }
        const char *ids[100], *toks[100];
        for (int i = 0; i < n; i++) {
            const dq_job *job = dq_jobs_at(j, (size_t)i);
            int64_t at = dq_job_lease_deadline_ms(job) - LEASE;
            ids[i] = dq_job_id(job), toks[i] = dq_job_token(job);
            if (ids[i][0] == 's')
                late[(*n_late)++] = (double)(at - dq_job_due_ms(job));
            else
                last_big = at;
        }
        if (dq_ack_batch(c, q, (size_t)n, ids, toks, NULL) < 0)
            die("ack", c);
        got += n;
        dq_jobs_free(j);
    }
    return (double)(last_big - start_ms);
}

/* One job ("s<g>_0") of each of groups small groups s<g>, due at at. */
static void push_small(dq_client *c, const char *q, int groups, int64_t at) {
    for (int g = 0; g < groups; g++) {
        char name[16], pfx[16];
        snprintf(name, sizeof(name), "s%d", g);
        snprintf(pfx, sizeof(pfx), "s%d_", g);
        push_at(c, q, name, pfx, 1, at);
    }
}

static int burst(int groups) {
    enum { BIG = 100000 };
    dq_client *c = client();
    redisContext *r = redisConnectUnix(g_sock);
    double *late = calloc((size_t)groups + BIG, sizeof(double));
    long nl;
    /* a plain queue's drain of the same 100,000 */
    int64_t t0 = server_ms(r) + 2000;
    push_at(c, "plain", NULL, "a", BIG, t0);
    while (server_ms(r) < t0)
        usleep(1000);
    double plain_ms = drain(c, "plain", BIG, late, &nl, t0);
    /* the small groups alone: the idle lateness */
    t0 = server_ms(r) + 500;
    push_small(c, "idle", groups, t0);
    while (server_ms(r) < t0)
        usleep(200);
    drain(c, "idle", groups, late, &nl, t0);
    double idle_p99 = p99(late, nl);
    /* the burst: A, then the small groups, all due at t0 */
    t0 = server_ms(r) + 3000;
    push_at(c, "burst", "A", "a", BIG, t0);
    push_small(c, "burst", groups, t0);
    while (server_ms(r) < t0)
        usleep(200);
    double big_ms = drain(c, "burst", BIG + groups, late, &nl, t0);
    double burst_p99 = p99(late, nl);
    printf("burst groups=%d: small jobs' lateness p99 %.0f ms (idle queue "
           "%.0f ms); A drained 100000 in %.0f ms = %.0f jobs/s, plain "
           "queue %.0f ms = %.0f jobs/s: %.2fx\n",
           groups, burst_p99, idle_p99, big_ms, BIG / big_ms * 1000,
           plain_ms, BIG / plain_ms * 1000, plain_ms / big_ms);
    free(late);
    redisFree(r);
    dq_close(c);
    return 0;
}

/* One consumer process: poll_wait (max 1), a 2 ms handler, ack, until the
 * shared count reaches total. */
static void consumer(const char *q, long total, long *done) {
    dq_client *c = client();
    while (__atomic_load_n(done, __ATOMIC_SEQ_CST) < total) {
        dq_jobs *j = NULL;
        int n = dq_poll_wait(c, q, 1, 30000, 200, &j);
        if (n < 0)
            _exit(3);
        for (int i = 0; i < n; i++) {
            const dq_job *job = dq_jobs_at(j, (size_t)i);
            usleep(2000);
            if (dq_ack(c, q, dq_job_id(job), dq_job_token(job)) != 0)
                _exit(4);
            __atomic_add_fetch(done, 1, __ATOMIC_SEQ_CST);
        }
        dq_jobs_free(j);
    }
    dq_close(c);
    _exit(0);
}

/* A command's calls from INFO commandstats (info), 0 if none. */
static long long stat_calls(const char *info, const char *cmd) {
    char key[64];
    snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
    const char *p = strstr(info, key);
    return p ? atoll(p + strlen(key)) : 0;
}

/* Runs procs consumers on q (total jobs due): ms taken, most leased at
 * once (sampled), script calls (EVALSHA and EVAL) and wake-ups sent
 * (PUBLISH, from the scripts). */
static double consume(const char *q, int procs, long total, long *most,
                      long long *calls, long long *wakes) {
    long *done = mmap(NULL, sizeof(long), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    *done = 0;
    redisContext *r = redisConnectUnix(g_sock);
    freeReplyObject(redisCommand(r, "CONFIG RESETSTAT"));
    char key[200];
    snprintf(key, sizeof(key), "dq:{%s}:lease", q);
    pid_t pids[256];
    int64_t t0 = mono_ms();
    for (int i = 0; i < procs; i++)
        if ((pids[i] = fork()) == 0)
            consumer(q, total, done);
    *most = 0;
    while (__atomic_load_n(done, __ATOMIC_SEQ_CST) < total) {
        int st;
        pid_t gone = waitpid(-1, &st, WNOHANG);
        if (gone > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            for (int i = 0; i < procs; i++)
                kill(pids[i], SIGKILL);
            die("a consumer failed (poll 3, ack 4)", NULL);
        }
        redisReply *rep = redisCommand(r, "ZCOUNT %s (%lld +inf", key,
                                       (long long)server_ms(r));
        if (rep->integer > *most)
            *most = rep->integer;
        freeReplyObject(rep);
        usleep(1000);
    }
    double ms = (double)(mono_ms() - t0);
    for (int i = 0; i < procs; i++)
        waitpid(pids[i], NULL, 0);
    redisReply *rep = redisCommand(r, "INFO commandstats");
    *calls = stat_calls(rep->str, "evalsha") + stat_calls(rep->str, "eval");
    *wakes = stat_calls(rep->str, "publish");
    freeReplyObject(rep);
    redisFree(r);
    munmap(done, sizeof(long));
    return ms;
}

static int limit(int procs) {
    enum { JOBS = 3000, LIM = 10 };
    dq_client *c = client();
    redisContext *r = redisConnectUnix(g_sock);
    const char *qs[2] = {"unlimited", "limited"};
    double ms[2];
    long most[2];
    long long calls[2], wakes[2], left[2];
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            int s = DQ_SET_MAX_INFLIGHT;
            int64_t v = LIM;
            if (dq_config_set(c, qs[k], 1, &s, &v) != 0)
                die("config", c);
        }
        push_at(c, qs[k], NULL, "j", JOBS, server_ms(r) - 10);
        ms[k] = consume(qs[k], procs, JOBS, &most[k], &calls[k],
                        &wakes[k]);
        char cmd[200]; /* the queue's jobs gone, nothing stays behind */
        snprintf(cmd, sizeof(cmd), "EXISTS dq:{%s}:jobs", qs[k]);
        left[k] = rcmd_int(r, cmd);
    }
    for (int k = 0; k < 2; k++) {
        long long polls = calls[k] - JOBS; /* one ack per job */
        printf("limit %s, %d consumer processes: %d jobs (2 ms handler) in "
               "%.0f ms = %.0f jobs/s; most leased at once %ld; %lld polls "
               "= %.2f per job; %lld wake-ups sent; jobs hash left %lld\n",
               qs[k], procs, JOBS, ms[k], JOBS / ms[k] * 1000, most[k], polls,
               (double)polls / JOBS, wakes[k], left[k]);
    }
    printf("limit: throughput limited/unlimited %.2fx\n", ms[0] / ms[1]);
    redisFree(r);
    dq_close(c);
    return 0;
}

/* Polls q (max 1, acking each) until the job "s0": how many polls it
 * took, its lateness (server ms after due) to late. */
static int polls_until_s0(dq_client *c, const char *q, double *late) {
    for (int k = 1;; k++) {
        dq_jobs *j = NULL;
        int n = dq_poll(c, q, 1, LEASE, &j, NULL);
        if (n < 0)
            die("poll", c);
        if (n == 0)
            continue;
        const dq_job *job = dq_jobs_at(j, 0);
        int64_t at = dq_job_lease_deadline_ms(job) - LEASE;
        int hit = strcmp(dq_job_id(job), "s0") == 0;
        *late = (double)(at - dq_job_due_ms(job));
        if (dq_ack(c, q, dq_job_id(job), dq_job_token(job)) != 0)
            die("ack", c);
        dq_jobs_free(j);
        if (hit)
            return k;
    }
}

static int prio(long n) {
    dq_client *c = client();
    redisContext *r = redisConnectUnix(g_sock);
    double *late = calloc((size_t)n + 1, sizeof(double)), idle, busy;
    long nl;
    push_prio(c, "warm", NULL, 5, "s", 1, server_ms(r)); /* loads scripts */
    polls_until_s0(c, "warm", &idle);
    push_prio(c, "idle", NULL, 5, "s", 1, server_ms(r));
    polls_until_s0(c, "idle", &idle);
    int64_t t0 = server_ms(r) - 10;
    push_at(c, "prio", NULL, "a", n, t0);
    push_prio(c, "prio", NULL, 5, "s", 1, server_ms(r));
    int k = polls_until_s0(c, "prio", &busy);
    t0 = server_ms(r);
    double prio_ms = drain(c, "prio", n - (k - 1), late, &nl, t0);
    t0 = server_ms(r) - 10;
    push_at(c, "plain", NULL, "a", n, t0);
    t0 = server_ms(r);
    double plain_ms = drain(c, "plain", n, late, &nl, t0);
    printf("prio %ld due of priority 0: the priority-5 job in poll %d, "
           "lateness %.0f ms (idle queue %.0f ms); the rest drained in "
           "%.0f ms = %.0f jobs/s, plain queue %.0f ms = %.0f jobs/s: "
           "%.2fx\n",
           n, k, busy, idle, prio_ms, (double)(n - (k - 1)) / prio_ms * 1000,
           plain_ms, n / plain_ms * 1000,
           (plain_ms / n) / (prio_ms / (double)(n - (k - 1))));
    free(late);
    redisFree(r);
    dq_close(c);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dqfair burst|limit|prio SOCK N\n");
        return 2;
    }
    g_sock = argv[2];
    snprintf(g_uri, sizeof(g_uri), "unix://%s", g_sock);
    if (strcmp(argv[1], "burst") == 0)
        return burst(atoi(argv[3]));
    if (strcmp(argv[1], "limit") == 0)
        return limit(atoi(argv[3]));
    if (strcmp(argv[1], "prio") == 0)
        return prio(atol(argv[3]));
    fprintf(stderr, "dqfair: no section '%s'\n", argv[1]);
    return 2;
}
