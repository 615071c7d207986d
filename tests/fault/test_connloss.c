/*
 * tests/fault/test_connloss.c - connections killed under producers and
 * consumers (CLIENT KILL TYPE normal / TYPE pubsub).
 *
 * Two producers push 6,000 jobs (single pushes and batches of up to 20, due
 * in 0.1..1.5 s) while two consumers poll and ack; every 20..120 ms the test
 * kills all their connections (the main ones, or the pub/sub wake-up ones).
 * The clients reconnect by themselves on their next call.  A call that
 * failed with DQ_EIO may or may not have taken effect: producers repeat it
 * with the same ids and DQ_PUSH_KEEP, consumers repeat an ack with the same
 * token (DQ_ENOTFOUND then means the first one landed).  Every push that
 * returned success must be acked exactly once.
 */
#include "fault.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NJOBS 6000
#define NPROD 2
#define NCONS 2

START_TEST(connections_killed) {
    uint64_t seed = ft_seed();
    th_redis r;
    ft_start(&r, 0, NULL);
    ft_ledger *L = ft_ledger_new("connloss", "job", NJOBS, 32);
    ft_consumer cons[NCONS];
    ft_producer prod[NPROD];
    pid_t cpid[NCONS], ppid[NPROD];
    for (int k = 0; k < NCONS; k++) {
        cons[k] = (ft_consumer){.uri = r.uri, .L = L, .inc = k + 1,
                                .max = 8, .lease_ms = 2000,
                                .batch_ack = k % 2, .work_us = 200};
        cpid[k] = ft_fork(ft_consume, &cons[k]);
    }
    for (int k = 0; k < NPROD; k++) {
        prod[k] = (ft_producer){.uri = r.uri, .L = L,
                                .lo = (size_t)k * NJOBS / NPROD,
                                .hi = (size_t)(k + 1) * NJOBS / NPROD,
                                .batch_max = 20, .min_delay_ms = 100,
                                .max_delay_ms = 1500, .pace_us = 10000};
        ppid[k] = ft_fork(ft_produce, &prod[k]);
    }

    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    int64_t t0 = th_mono_ms();
    long kill_cmds = 0, killed = 0, producers_left = NPROD;
    int died = 0, died_sig = 0, st;
    while (producers_left > 0 && th_mono_ms() - t0 < 60000) {
        th_sleep_ms(ft_rand_range(20, 120));
        const char *type = ft_rand_range(0, 9) < 7 ? "normal" : "pubsub";
        killed += ft_cmd_int(admin, "CLIENT KILL TYPE %s", type);
        kill_cmds++;
        producers_left = 0;
        for (int k = 0; k < NPROD; k++) {
            if (ppid[k] > 0 && waitpid(ppid[k], &st, WNOHANG) == ppid[k]) {
                ppid[k] = 0;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    died++, died_sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
            }
            producers_left += ppid[k] > 0;
        }
    }
    dq_client *c = open_uri(r.uri, NULL);
    int empty = ft_wait_empty(c, "connloss", 60000);
    int64_t secs = th_mono_ms() - t0;
    L->stop = 1;
    for (int k = 0; k < NCONS; k++) {
        st = ft_reap(cpid[k], 10000);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            died++, died_sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    }
    for (int k = 0; k < NPROD; k++)
        if (ppid[k] > 0)
            ft_reap(ppid[k], 10000);

    ft_report rep;
    ft_analyze(L, NULL, 0, &rep);
    ft_figures("connection_loss", &rep, killed,
               "(connections killed) kill_commands=%ld client_io_errors=%"
               PRId64 " retried_calls=%" PRId64 " retried_pushes_kept=%"
               PRId64 " redelivered=%ld lost_poll_replies=%ld "
               "stale_acks=%ld seconds=%.1f seed=%" PRIu64,
               kill_cmds, L->io_errors, L->retries, L->kept,
               rep.redelivered, rep.unrecorded, rep.stale, secs / 1000.0,
               seed);
    /* A process whose connection Redis closes must not die of SIGPIPE:
     * the library, not the application, has to deal with it. */
    ck_assert_msg(died == 0, "%d worker processes died (last: signal %d%s)",
                  died, died_sig,
                  died_sig == SIGPIPE ? ", SIGPIPE: a write on a connection "
                                        "Redis had closed" : "");
    ck_assert_msg(producers_left == 0, "producers did not finish in 60 s");
    ck_assert_msg(empty, "queue not empty after 60 s");
    ft_assert_all_done(L, &rep, NJOBS);
    ck_assert_msg(killed > 0 && L->io_errors > 0,
                  "no fault reached the clients (%ld killed)", killed);
    redisFree(admin);
    dq_close(c);
    ft_ledger_free(L);
    th_redis_stop(&r);
}
END_TEST

/* The child of sigpipe_not_fatal: default SIGPIPE action, like most
 * programs.  Pushes, waits for the parent to kill its connection, then
 * pushes a multi-chunk batch (its write hits the closed socket: EPIPE),
 * then pushes again.  Exits 0 if the calls failed and recovered as the
 * header says. */
static int sp_fd[2], sp_back[2];
static const char *sp_uri;

static void sigpipe_child(void *arg) {
    (void)arg;
    signal(SIGPIPE, SIG_DFL);
    dq_client *c = NULL;
    if (dq_open(sp_uri, NULL, &c) != 0 ||
        dq_push(c, "sp", "x", 1, 0, NULL, 0, NULL, 0, NULL) != 0)
        _exit(10);
    char b = 'r';
    if (write(sp_fd[1], &b, 1) != 1 || read(sp_back[0], &b, 1) != 1)
        _exit(11);
    /* 3 chunks, ~3 MB: far more than a socket buffer. */
    static char big[1000];
    static const void *pl[2500];
    static size_t lens[2500];
    for (int i = 0; i < 2500; i++)
        pl[i] = big, lens[i] = sizeof(big);
    int rc = dq_push_batch(c, "sp", 2500, pl, lens, NULL, NULL, 0, NULL,
                           NULL);
    if (rc != DQ_EIO && rc != 2500)
        _exit(12);
    if (dq_push(c, "sp", "y", 1, 0, NULL, 0, NULL, 0, NULL) != 0)
        _exit(13);
    dq_close(c);
    _exit(0);
}

START_TEST(sigpipe_not_fatal) {
    th_redis r;
    ft_start(&r, 0, NULL);
    sp_uri = r.uri;
    ck_assert_int_eq(pipe(sp_fd), 0);
    ck_assert_int_eq(pipe(sp_back), 0);
    pid_t pid = ft_fork(sigpipe_child, NULL);
    char b;
    ck_assert_int_eq(read(sp_fd[0], &b, 1), 1);
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    long long n = ft_cmd_int(admin, "CLIENT KILL TYPE normal");
    ck_assert_int_eq(write(sp_back[1], &b, 1), 1);
    int st = ft_reap(pid, 20000);
    printf("figures: sigpipe: pushed=2 acked=0 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=%lld (connections killed) child=%s%d\n",
           n, WIFSIGNALED(st) ? "signal " : "exit ",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    fflush(stdout);
    ck_assert_msg(!(WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE),
                  "the client process died of SIGPIPE writing to a "
                  "connection Redis had closed");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "child status 0x%x", st);
    redisFree(admin);
    th_redis_stop(&r);
}
END_TEST

/* ---- wake-ups after the links were cut ---- */

#define ROUNDS 3
typedef struct wake_shared {
    volatile int64_t got_ms[ROUNDS]; /* when the consumer got round i's job */
    volatile int errors;
    char uri[400];
} wake_shared;

static void wake_consumer(void *arg) {
    wake_shared *w = arg;
    dq_client *c = NULL;
    /* A 10 s cap: a job found only by the periodic poll shows. */
    dq_options *o = dq_options_new();
    dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 10000);
    char buf[1024];
    int rc0 = dq_open(tu_layout_uri(w->uri, buf, sizeof(buf)), o, &c);
    dq_options_free(o);
    if (rc0 != 0) {
        w->errors++;
        dq_close(c);
        return;
    }
    int got = 0;
    int64_t end = th_mono_ms() + 60000;
    while (got < ROUNDS && th_mono_ms() < end) {
        dq_jobs *jobs = NULL;
        int rc = dq_poll_wait(c, "wake", 1, 60000, 30000, &jobs);
        if (rc == 1) {
            w->got_ms[got++] = th_mono_ms();
            const dq_job *j = dq_jobs_at(jobs, 0);
            dq_ack(c, "wake", dq_job_id(j), dq_job_token(j));
        } else if (rc < 0 && rc != DQ_EIO && rc != DQ_ETIMEDOUT) {
            w->errors++;
        }
        dq_jobs_free(jobs);
    }
    dq_close(c);
}

/* A consumer blocked in dq_poll_wait on an empty queue has both its links
 * cut (CLIENT KILL TYPE pubsub, then TYPE normal); a job pushed after that
 * must still reach it at once, not after the next DQ_OPT_WAIT_CAP_MS tick
 * or never (peers' workers that "stop taking due jobs after a
 * reconnect"). */
START_TEST(wakeup_after_reconnect) {
    th_redis r;
    ft_start(&r, 0, NULL);
    wake_shared *w = mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(w, MAP_FAILED);
    memset(w, 0, sizeof(*w));
    snprintf(w->uri, sizeof(w->uri), "%s", r.uri);
    pid_t pid = ft_fork(wake_consumer, w);
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    dq_client *c = open_uri(r.uri, NULL);
    int64_t lat[ROUNDS], worst = 0;
    long killed = 0;
    for (int i = 0; i < ROUNDS; i++) {
        th_sleep_ms(400); /* the consumer is waiting */
        killed += ft_cmd_int(admin, "CLIENT KILL TYPE pubsub");
        killed += ft_cmd_int(admin, "CLIENT KILL TYPE normal");
        th_sleep_ms(200);
        int64_t t = th_mono_ms();
        int rc;
        while ((rc = dq_push(c, "wake", "x", 1, 0, NULL, 0, NULL, 0, NULL)) ==
               DQ_EIO)
            ; /* our own link was cut too: the retry reconnects */
        ck_assert_msg(rc == 0, "push: %s", dq_errmsg(c));
        int64_t end = t + 20000;
        while (w->got_ms[i] == 0 && th_mono_ms() < end)
            th_sleep_ms(2);
        ck_assert_msg(w->got_ms[i] != 0, "round %d: job not taken in 20 s",
                      i);
        lat[i] = w->got_ms[i] - t;
        if (lat[i] > worst)
            worst = lat[i];
    }
    ft_assert_exit_ok(ft_reap(pid, 20000), "consumer");
    printf("figures: wakeup_after_reconnect: pushed=%d acked=%d lost=0 "
           "dup_ack=0 dup_in_lease=0 faults=%ld (connections killed) "
           "latency_ms=%" PRId64 ",%" PRId64 ",%" PRId64 "\n",
           ROUNDS, ROUNDS, killed, lat[0], lat[1], lat[2]);
    fflush(stdout);
    ck_assert_int_eq(w->errors, 0);
    /* Loose: woken by the publish, not found by the 10 s periodic poll. */
    ck_assert_msg(worst < 3000, "a job waited %" PRId64 " ms", worst);
    dq_close(c);
    redisFree(admin);
    munmap(w, sizeof(*w));
    th_redis_stop(&r);
}
END_TEST

TEST_SUITE("fault_connloss", TU_SRV_NONE,
    {"connections_killed", connections_killed, 180, NULL},
    {"wakeup_after_reconnect", wakeup_after_reconnect, 60, NULL},
    {"sigpipe_not_fatal", sigpipe_not_fatal, 60, NULL})
