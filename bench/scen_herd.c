/*
 * bench/scen_herd.c - many consumers on one queue: what each due job costs
 * when K consumers wait for it at once.
 *
 * K consumers (processes, each its own dq_client; or threads of one
 * process, each its own client) loop dq_poll_wait(max 10, lease 30 s,
 * timeout 500 ms) + one dq_ack_batch of what they got, on one queue:
 *  - light load: herd_light_n jobs falling due over herd_light_spread_ms,
 *    pushed by this process (batches of 1000) while the consumers wait,
 *    the first due herd_light_base_ms after the push; the window starts
 *    150 ms after the push returned (its wake-ups are not counted) and ends
 *    at the last ack;
 *  - backlog drain: herd_drain_n jobs already due (pushed while the
 *    consumers wait at a barrier); the window runs from the barrier to the
 *    last ack.
 * Per window: polls = the EVALSHA + EVAL calls of INFO commandstats minus
 * the dq_ack_batch calls the consumers count (shared memory); Redis CPU =
 * used_cpu_user + used_cpu_sys of INFO cpu; both per job.  Lateness =
 * receive time - dq_job_due_ms, both on the server's clock, calibrated as
 * in scen_lateness.c.
 * Then one consumer of each kind on the same workloads: the dq_poll_wait
 * loop (max 100), the sync consumer of delayq-consumer.h (concurrency 100)
 * and, built with DQ_BENCH_EVENT, the libevent consumer (concurrency 100).
 * Every job must be received and acked exactly once, and the queue empty.
 * Detail of every measurement (script calls, ack calls, server time in the
 * scripts, lateness p95/max, calls per job of every command):
 * out/herd-figures.txt, lines starting "figures:".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <delayq-consumer.h>
#ifdef DQ_BENCH_EVENT
#include <delayq-event.h>
#include <event2/event.h>
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DQB_HERD_LEASE_MS 30000
#define DQB_HERD_MAX 10        /* jobs per poll of the herd consumers */
#define DQB_HERD_KIND_MAX 100  /* max / concurrency of the kind rows */
#define DQB_HERD_TIMEOUT_MS 500
#define DQB_HERD_SETTLE_MS 150 /* push -> start of the light-load window */
#define DQB_HERD_MAXK 100

/* The K-consumer configurations, in table order; quick runs those with
 * k <= 32, smoke those with k <= 8 (herd_kmax). */
#define DQB_NHERD 6
static const struct {
    int k, threads;
} dqb_herd_conf[DQB_NHERD] = {{1, 0}, {8, 0}, {32, 0}, {100, 0},
                              {8, 1}, {32, 1}};

/* Consumer kinds of the kind rows: 0 the dq_poll_wait loop, 1 the sync
 * consumer, 2 the libevent consumer (DQ_BENCH_EVENT builds only). */
#ifdef DQ_BENCH_EVENT
#define DQB_NHKIND 3
#else
#define DQB_NHKIND 2
#endif
static const char *const dqb_hkind_desc[3] = {
    "dq_poll_wait loop (max 100)", "sync consumer (conc 100)",
    "event consumer (conc 100)"};

/* Per configuration, per run. */
typedef struct dqb_herd_fig {
    dqb_series l_polls, l_cpu, l_p50, l_p99; /* light load */
    dqb_series d_tput, d_polls, d_cpu;       /* backlog drain */
} dqb_herd_fig;
static dqb_herd_fig dqb_herd[DQB_NHERD];
static dqb_series dqb_hk_tput[3], dqb_hk_p50[3], dqb_hk_p99[3];
static double dqb_herd_unc; /* clock uncertainty, ms, worst over runs */
static FILE *dqb_herd_figf; /* out/herd-figures.txt */

/* What the consumers of one measurement share (dqb_shared_alloc). */
typedef struct dqb_herd_sh {
    long n;             /* jobs expected */
    double offset_us;   /* server clock - local CLOCK_REALTIME */
    int64_t deadline;   /* mono ns: every consumer gives up */
    long recv;          /* jobs received (index into lat_ms) */
    long acked;         /* jobs acked */
    long ack_calls;     /* dq_ack_batch calls (poll loop) */
    int64_t t_end;      /* mono ns of the last ack */
    int stop;           /* set by the parent: leave the loop */
    int bad;            /* a consumer saw an error */
    double lat_ms[];    /* one per job received */
} dqb_herd_sh;

/* What one measurement gives. */
typedef struct dqb_herd_res {
    double secs;       /* drain: barrier -> last ack */
    double scripts;    /* EVALSHA + EVAL calls in the window */
    double ack_calls;  /* of which dq_ack_batch (poll loop only) */
    double cpu_us;     /* Redis used_cpu_user + used_cpu_sys */
    double esha_us;    /* Redis usec inside EVALSHA + EVAL */
    dqb_pctl lat;      /* light load */
    char cmds[600];    /* calls per job of every command (INFO excepted) */
} dqb_herd_res;

/* ---- the consumers ---------------------------------------------------- */

/* Records the lateness of n jobs received at local time now_us. */
static void dqb_herd_record(dqb_herd_sh *s, const dq_jobs *js, size_t n,
                            int64_t now_us) {
    long at = __atomic_fetch_add(&s->recv, (long)n, __ATOMIC_RELAXED);
    double srv_ms = ((double)now_us + s->offset_us) / 1000.0;
    for (size_t i = 0; i < n; i++)
        if (at + (long)i < s->n)
            s->lat_ms[at + (long)i] =
                srv_ms - (double)dq_job_due_ms(dq_jobs_at(js, i));
}

/* k jobs acked just now. */
static void dqb_herd_acked(dqb_herd_sh *s, long k) {
    __atomic_fetch_add(&s->acked, k, __ATOMIC_RELAXED);
    int64_t now = dqb_mono_ns();
    int64_t old = __atomic_load_n(&s->t_end, __ATOMIC_RELAXED);
    while (old < now &&
           !__atomic_compare_exchange_n(&s->t_end, &old, now, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static int dqb_herd_stopping(dqb_herd_sh *s) {
    return __atomic_load_n(&s->stop, __ATOMIC_RELAXED) ||
           dqb_mono_ns() > s->deadline;
}

/* Opens a client and subscribes it to the queue's wake-ups (one
 * dq_poll_wait with timeout 0 on the still empty queue).  NULL on error. */
static dq_client *dqb_herd_open(void) {
    dq_client *c = NULL;
    if (dq_open(dqb_srv.uri, NULL, &c) != 0) {
        dqb_fail("herd: dq_open: %s", dq_errmsg(c));
        dq_close(c);
        return NULL;
    }
    dq_jobs *js = NULL;
    int n = dq_poll_wait(c, DQB_QUEUE, 1, DQB_HERD_LEASE_MS, 0, &js);
    dq_jobs_free(js);
    if (n != 0) {
        dqb_fail("herd: first dq_poll_wait returned %d: %s", n,
                 dq_errmsg(c));
        dq_close(c);
        return NULL;
    }
    return c;
}

/* Says ready ('1') or failed ('0') on ready_fd, then (ready) waits for the
 * barrier: EOF on go_fd.  Returns 0 to go on. */
static int dqb_herd_barrier(int ok, int ready_fd, int go_fd) {
    char x = ok ? '1' : '0';
    if (write(ready_fd, &x, 1) != 1 || !ok)
        return -1;
    while (read(go_fd, &x, 1) < 0 && errno == EINTR)
        ;
    return 0;
}

/* The dq_poll_wait loop: poll_wait(max) + one ack_batch per poll that got
 * jobs, until the parent says stop.  Returns 0 or an exit status. */
static int dqb_herd_poll_loop(dqb_herd_sh *s, int max, int ready_fd,
                              int go_fd) {
    dq_client *c = dqb_herd_open();
    if (dqb_herd_barrier(c != NULL, ready_fd, go_fd) != 0) {
        dq_close(c);
        return 2;
    }
    int rc = 0;
    while (!dqb_herd_stopping(s)) {
        dq_jobs *js = NULL;
        int n = dq_poll_wait(c, DQB_QUEUE, max, DQB_HERD_LEASE_MS,
                             DQB_HERD_TIMEOUT_MS, &js);
        int64_t now = dqb_real_us();
        if (n < 0) {
            dqb_fail("herd: dq_poll_wait: %s", dq_errmsg(c));
            rc = 3;
            break;
        }
        if (n > 0) {
            dqb_herd_record(s, js, (size_t)n, now);
            int k = dqb_ack_all(c, js);
            __atomic_fetch_add(&s->ack_calls, 1, __ATOMIC_RELAXED);
            if (k > 0)
                dqb_herd_acked(s, k);
            if (k != n)
                rc = 3;
        }
        dq_jobs_free(js);
        if (rc != 0)
            break;
    }
    if (rc != 0)
        __atomic_store_n(&s->bad, 1, __ATOMIC_RELAXED);
    dq_close(c);
    return rc;
}

/* Handler of both consumers: records the job's lateness; the consumer
 * acks it (the outcome report counts it). */
static int dqb_herd_handler(dq_consumer *cons, const dq_job *job, void *ud) {
    dqb_herd_sh *s = ud;
    int64_t now = dqb_real_us();
    (void)cons;
    long at = __atomic_fetch_add(&s->recv, 1, __ATOMIC_RELAXED);
    if (at < s->n)
        s->lat_ms[at] =
            ((double)now + s->offset_us) / 1000.0 - (double)dq_job_due_ms(job);
    return DQ_JOB_OK;
}

/* Outcome report of both consumers: one ack done (or failed). */
static void dqb_herd_outcome(dq_consumer *cons, const dq_job *job,
                             int outcome, int status, void *ud) {
    dqb_herd_sh *s = ud;
    (void)job;
    if (outcome != DQ_JOB_OK || status != 0) {
        dqb_fail("herd: consumer: outcome %d status %d: %s", outcome, status,
                 dq_consumer_errmsg(cons));
        __atomic_store_n(&s->bad, 1, __ATOMIC_RELAXED);
        return;
    }
    dqb_herd_acked(s, 1);
}

/* The sync consumer (one per process): interrupted by its outcome report
 * once every job is acked, or by SIGALRM at the deadline. */
static dq_consumer *dqb_herd_sync_cons;

static void dqb_herd_sync_outcome(dq_consumer *cons, const dq_job *job,
                                  int outcome, int status, void *ud) {
    dqb_herd_sh *s = ud;
    dqb_herd_outcome(cons, job, outcome, status, ud);
    if (__atomic_load_n(&s->acked, __ATOMIC_RELAXED) >= s->n ||
        __atomic_load_n(&s->bad, __ATOMIC_RELAXED))
        dq_consumer_interrupt(cons);
}

static void dqb_herd_alarm(int sig) {
    (void)sig;
    if (dqb_herd_sync_cons != NULL)
        dq_consumer_interrupt(dqb_herd_sync_cons);
}

static int dqb_herd_sync_child(dqb_herd_sh *s, int ready_fd, int go_fd) {
    dq_client *c = dqb_herd_open();
    dq_consumer *cons = NULL;
    int ok = c != NULL &&
             dq_consumer_new_sync(c, DQB_QUEUE, dqb_herd_handler, s,
                                  &cons) == 0 &&
             dq_consumer_set_int(cons, DQ_COPT_CONCURRENCY,
                                 DQB_HERD_KIND_MAX) == 0 &&
             dq_consumer_set_int(cons, DQ_COPT_LEASE_MS,
                                 DQB_HERD_LEASE_MS) == 0 &&
             dq_consumer_set_outcome_cb(cons, dqb_herd_sync_outcome, s) == 0;
    if (c != NULL && !ok)
        dqb_fail("herd: sync consumer: cannot set up: %s", dq_errmsg(c));
    if (dqb_herd_barrier(ok, ready_fd, go_fd) != 0) {
        dq_consumer_free(cons);
        dq_close(c);
        return 2;
    }
    dqb_herd_sync_cons = cons;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = dqb_herd_alarm;
    sigaction(SIGALRM, &sa, NULL);
    int64_t left_ms = (s->deadline - dqb_mono_ns()) / 1000000;
    alarm(left_ms > 1000 ? (unsigned)(left_ms / 1000) : 1);
    int rc = dq_consumer_run(cons);
    alarm(0);
    if (rc < 0)
        dqb_fail("herd: dq_consumer_run: %s", dq_consumer_errmsg(cons));
    dq_consumer_free(cons);
    dq_close(c);
    return rc == 0 ? 0 : 3;
}

#ifdef DQ_BENCH_EVENT
/* The libevent consumer (one per process). */
typedef struct dqb_herd_ev {
    dqb_herd_sh *s;
    struct event_base *base;
    dq_async *a;
    dq_consumer *cons;
    int drain;               /* start only at the barrier */
    int ready_fd, go_fd, passed;
    int64_t t_conn;
} dqb_herd_ev;

/* Every 5 ms: 200 ms after connecting (time for the consumer to poll and
 * subscribe) says ready and waits for the barrier; ends the loop once
 * every job was acked, or at stop. */
static void dqb_herd_ev_tick(evutil_socket_t fd, short what, void *ud) {
    dqb_herd_ev *x = ud;
    (void)fd;
    (void)what;
    int64_t now = dqb_mono_ns();
    if (!x->passed && dq_async_connected(x->a)) {
        if (x->t_conn == 0)
            x->t_conn = now;
        else if (now - x->t_conn > 200000000) {
            x->passed = 1;
            if (dqb_herd_barrier(1, x->ready_fd, x->go_fd) != 0 ||
                (x->drain && dq_consumer_start(x->cons) != 0)) {
                __atomic_store_n(&x->s->bad, 1, __ATOMIC_RELAXED);
                event_base_loopbreak(x->base);
            }
        }
    }
    dqb_herd_sh *s = x->s;
    if ((x->passed && __atomic_load_n(&s->acked, __ATOMIC_RELAXED) >= s->n &&
         dq_consumer_running(x->cons) == 0 && dq_async_pending(x->a) == 0) ||
        dqb_herd_stopping(s) || __atomic_load_n(&s->bad, __ATOMIC_RELAXED))
        event_base_loopbreak(x->base);
}

static int dqb_herd_event_child(dqb_herd_sh *s, int drain, int ready_fd,
                                int go_fd) {
    dqb_herd_ev x;
    memset(&x, 0, sizeof(x));
    x.s = s;
    x.drain = drain;
    x.ready_fd = ready_fd;
    x.go_fd = go_fd;
    x.base = event_base_new();
    if (x.base == NULL ||
        dq_async_open(x.base, dqb_srv.uri, NULL, &x.a) != 0 ||
        dq_consumer_new(x.a, DQB_QUEUE, dqb_herd_handler, s, &x.cons) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_CONCURRENCY,
                            DQB_HERD_KIND_MAX) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_LEASE_MS, DQB_HERD_LEASE_MS) !=
            0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_EXTEND, 0) != 0 ||
        dq_consumer_set_outcome_cb(x.cons, dqb_herd_outcome, s) != 0 ||
        (!drain && dq_consumer_start(x.cons) != 0)) {
        dqb_fail("herd: event consumer: cannot start: %s",
                 dq_async_errmsg(x.a));
        dqb_herd_barrier(0, ready_fd, go_fd);
        return 2;
    }
    struct event *tick = event_new(x.base, -1, EV_PERSIST, dqb_herd_ev_tick,
                                   &x);
    struct timeval tv = {0, 5000};
    event_add(tick, &tv);
    event_base_dispatch(x.base);
    event_free(tick);
    if (!x.passed) /* never connected: the parent still waits */
        dqb_herd_barrier(0, ready_fd, go_fd);
    dq_consumer_free(x.cons);
    dq_async_free(x.a);
    event_base_free(x.base);
    return x.passed ? 0 : 2;
}
#endif

/* ---- one measurement -------------------------------------------------- */

typedef struct dqb_herd_thr {
    pthread_t t;
    dqb_herd_sh *s;
    int max, ready_fd, go_fd, rc;
} dqb_herd_thr;

static void *dqb_herd_thread(void *arg) {
    dqb_herd_thr *t = arg;
    t->rc = dqb_herd_poll_loop(t->s, t->max, t->ready_fd, t->go_fd);
    return NULL;
}

/* INFO commandstats (calls and usec of every command) and Redis's CPU. */
#define DQB_HERD_NCMD 64
typedef struct dqb_herd_snap {
    int n;
    char name[DQB_HERD_NCMD][40];
    double calls[DQB_HERD_NCMD], usec[DQB_HERD_NCMD];
    double cpu_us; /* used_cpu_user + used_cpu_sys */
} dqb_herd_snap;

static void dqb_herd_snapshot(dqb_herd_snap *s) {
    s->n = 0;
    redisReply *r = redisCommand(dqb_adm, "INFO commandstats");
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        for (const char *p = r->str; p && *p && s->n < DQB_HERD_NCMD;) {
            double calls, usec;
            if (sscanf(p, "cmdstat_%39[^:]:calls=%lf,usec=%lf",
                       s->name[s->n], &calls, &usec) == 3) {
                s->calls[s->n] = calls;
                s->usec[s->n] = usec;
                s->n++;
            }
            p = strchr(p, '\n');
            if (p)
                p++;
        }
    freeReplyObject(r);
    s->cpu_us = (dqb_info_field("cpu", "used_cpu_user") +
                 dqb_info_field("cpu", "used_cpu_sys")) * 1e6;
}

/* calls and usec of cmd in s (0 if absent). */
static void dqb_herd_cmd(const dqb_herd_snap *s, const char *cmd,
                         double *calls, double *usec) {
    *calls = *usec = 0;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], cmd) == 0)
            *calls = s->calls[i], *usec = s->usec[i];
}

/* Fills res from the snapshots a (window start) and b (end): the script
 * calls and their time, Redis's CPU, and the calls of every command per
 * job (those the scripts call included: Redis counts them too). */
static void dqb_herd_delta(const dqb_herd_snap *a, const dqb_herd_snap *b,
                           long n, dqb_herd_res *res) {
    double ca, ua, cb, ub;
    res->scripts = res->esha_us = 0;
    for (int k = 0; k < 2; k++) {
        const char *cmd = k ? "eval" : "evalsha";
        dqb_herd_cmd(a, cmd, &ca, &ua);
        dqb_herd_cmd(b, cmd, &cb, &ub);
        res->scripts += cb - ca;
        res->esha_us += ub - ua;
    }
    res->cpu_us = b->cpu_us - a->cpu_us;
    size_t o = 0;
    res->cmds[0] = '\0';
    for (int i = 0; i < b->n; i++) {
        dqb_herd_cmd(a, b->name[i], &ca, &ua);
        double d = b->calls[i] - ca;
        if (d > 0 && strcmp(b->name[i], "info") != 0 &&
            o < sizeof(res->cmds))
            o += (size_t)snprintf(res->cmds + o, sizeof(res->cmds) - o,
                                  " %s %.3f", b->name[i], d / (double)n);
    }
}

static void dqb_herd_sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* One measurement: k consumers of a kind (0 poll loop with max, 1 sync, 2
 * event; processes unless threads), on the light load or (drain) a backlog
 * of n due jobs.  Returns 0 and the figures, or -1 (a FAIL line). */
static int dqb_herd_measure(const dqb_cfg *c, int run, int kind, int k,
                            int threads, int max, int drain, long n,
                            const char *what, dqb_herd_res *res) {
    memset(res, 0, sizeof(*res));
    int64_t bound_ms = drain ? 90000
                             : c->herd_light_base_ms +
                                   c->herd_light_spread_ms + 15000;
    dqb_flushall();
    dqb_clk_cal cal = dqb_calibrate(dqb_adm, 15);
    size_t ssize = sizeof(dqb_herd_sh) + sizeof(double) * (size_t)n;
    dqb_herd_sh *s = dqb_shared_alloc(ssize);
    if (s == NULL)
        return -1;
    s->n = n;
    s->offset_us = cal.offset_us;
    s->deadline = dqb_mono_ns() + (bound_ms + 5000) * 1000000;
    int ready[2], go[2];
    if (pipe(ready) || pipe(go)) {
        munmap(s, ssize);
        return -1;
    }
    pid_t pids[DQB_HERD_MAXK];
    dqb_herd_thr thr[DQB_HERD_MAXK];
    int started = 0;
    for (int i = 0; i < k; i++, started++) {
        if (threads) {
            thr[i].s = s, thr[i].max = max, thr[i].rc = 0;
            thr[i].ready_fd = ready[1], thr[i].go_fd = go[0];
            if (pthread_create(&thr[i].t, NULL, dqb_herd_thread, &thr[i]) !=
                0)
                break;
            continue;
        }
        pids[i] = fork();
        if (pids[i] < 0)
            break;
        if (pids[i] == 0) {
            close(ready[0]);
            close(go[1]);
            int rc;
            if (kind == 1)
                rc = dqb_herd_sync_child(s, ready[1], go[0]);
#ifdef DQ_BENCH_EVENT
            else if (kind == 2)
                rc = dqb_herd_event_child(s, drain, ready[1], go[0]);
#endif
            else
                rc = dqb_herd_poll_loop(s, max, ready[1], go[0]);
            _exit(rc);
        }
    }
    if (!threads)
        close(ready[1]);
    int nready = 0;
    char x;
    for (int i = 0; i < started; i++) {
        if (read(ready[0], &x, 1) != 1)
            break;
        nready += x == '1';
    }
    int ok = started == k && nready == k;
    if (!ok)
        dqb_fail("%s: %d of %d consumers started", what, nready, k);

    dq_client *cl = dqb_open_client();
    uint64_t seed = 7000 + (uint64_t)run;
    static dqb_herd_snap a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    int64_t t0 = 0;
    if (ok && cl != NULL) {
        if (drain) {
            ok = dqb_fill(cl, n, 1000, 16, 0, 0, &seed) == 0;
            dqb_herd_snapshot(&a);
            t0 = dqb_mono_ns();
            close(go[1]);
            go[1] = -1;
        } else {
            /* The consumers go to sleep in dq_poll_wait first. */
            close(go[1]);
            go[1] = -1;
            dqb_herd_sleep_ms(50);
            ok = dqb_fill(cl, n, 1000, 16, c->herd_light_base_ms,
                          c->herd_light_spread_ms, &seed) == 0;
            dqb_herd_sleep_ms(DQB_HERD_SETTLE_MS);
            dqb_herd_snapshot(&a);
            t0 = dqb_mono_ns();
        }
    }
    /* Until the last ack (or a consumer ended early, or the bound). */
    int64_t until = dqb_mono_ns() + bound_ms * 1000000;
    int alive = ok;
    for (int tick = 0; alive; tick++) {
        if (__atomic_load_n(&s->acked, __ATOMIC_RELAXED) >= n ||
            __atomic_load_n(&s->bad, __ATOMIC_RELAXED) ||
            dqb_mono_ns() > until)
            break;
        dqb_herd_sleep_ms(1);
        if (!threads && tick % 100 == 99)
            for (int i = 0; i < started; i++) {
                int st;
                if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                    pids[i] = -1; /* ended before stop: a failure */
                    alive = 0;
                    dqb_fail("%s: consumer %d ended early (status %d)", what,
                             i, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
                }
            }
    }
    if (ok)
        dqb_herd_snapshot(&b);
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
    if (go[1] >= 0)
        close(go[1]);
    for (int i = 0; i < started; i++) {
        if (threads) {
            pthread_join(thr[i].t, NULL);
            if (thr[i].rc != 0)
                ok = 0;
            continue;
        }
        int st;
        if (pids[i] > 0 && (waitpid(pids[i], &st, 0) != pids[i] ||
                            !WIFEXITED(st) || WEXITSTATUS(st) != 0))
            ok = 0;
        else if (pids[i] < 0)
            ok = 0;
    }
    if (threads)
        close(ready[1]);
    close(ready[0]);
    close(go[0]);
    if (s->acked != n || s->recv != n || s->bad)
        dqb_fail("%s: %ld jobs received, %ld acked, expected %ld%s", what,
                 s->recv, s->acked, n, s->bad ? " (a consumer failed)" : "");
    else if (!ok)
        dqb_fail("%s: a consumer failed", what);
    ok = ok && s->acked == n && s->recv == n && !s->bad;
    dqb_expect_empty(cl, what);
    dq_close(cl);

    dqb_clk_cal after = dqb_calibrate(dqb_adm, 15);
    double drift = fabs(after.offset_us - cal.offset_us);
    double unc = (cal.unc_us > drift ? cal.unc_us : drift) / 1000.0;
    if (ok && !drain && unc > dqb_herd_unc)
        dqb_herd_unc = unc;
    if (ok) {
        res->secs = (double)(s->t_end - t0) / 1e9;
        dqb_herd_delta(&a, &b, n, res);
        res->ack_calls = (double)s->ack_calls;
        res->lat = dqb_percentiles(s->lat_ms, (size_t)n);
    }
    munmap(s, ssize);
    return ok ? 0 : -1;
}

/* One line of out/herd-figures.txt. */
static void dqb_herd_figline(int run, const char *label, int drain, long n,
                             const dqb_herd_res *r) {
    if (dqb_herd_figf == NULL)
        return;
    fprintf(dqb_herd_figf,
            "figures: run %d | %-28s | %-5s | %6ld jobs | %7.3f s %9.0f "
            "jobs/s | scripts/job %8.3f | ack calls %6.0f | polls/job %8.3f "
            "| redis cpu us/job %8.2f | in scripts us/job %8.2f",
            run + 1, label, drain ? "drain" : "light", n, r->secs,
            drain ? (double)n / r->secs : NAN, r->scripts / (double)n,
            r->ack_calls, (r->scripts - r->ack_calls) / (double)n,
            r->cpu_us / (double)n, r->esha_us / (double)n);
    if (!drain)
        fprintf(dqb_herd_figf,
                " | lateness ms p50 %.3f p95 %.3f p99 %.3f max %.3f",
                r->lat.p50, r->lat.p95, r->lat.p99, r->lat.max);
    fprintf(dqb_herd_figf, " | calls/job:%s\n", r->cmds);
    fflush(dqb_herd_figf);
}

static int dqb_herd_enabled(const dqb_cfg *c, int i) {
    return dqb_herd_conf[i].k <= c->herd_kmax;
}

/* Loads every script a consumer runs (push, poll, ack of one job), so no
 * measured window has a first call answered NOSCRIPT and sent again. */
static void dqb_herd_warm(void) {
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    uint64_t seed = 1;
    dq_jobs *js = NULL;
    if (cl == NULL || dqb_fill(cl, 1, 1, 16, 0, 0, &seed) != 0)
        goto out;
    if (dq_poll(cl, DQB_QUEUE, 1, DQB_HERD_LEASE_MS, &js, NULL) != 1)
        dqb_fail("herd: warm-up poll: %s", dq_errmsg(cl));
    else
        dqb_ack_all(cl, js);
    dqb_expect_empty(cl, "herd warm-up");
out:
    dq_jobs_free(js);
    dq_close(cl);
}

void dqb_scen_herd_run(const dqb_cfg *c, int run) {
    dqb_herd_warm();
    if (dqb_herd_figf == NULL) {
        char path[512];
        snprintf(path, sizeof(path), "%s/herd-figures.txt", c->out);
        dqb_herd_figf = fopen(path, "w");
    }
    for (int i = 0; i < DQB_NHERD; i++) {
        if (!dqb_herd_enabled(c, i))
            continue;
        int k = dqb_herd_conf[i].k, thr = dqb_herd_conf[i].threads;
        char label[64], what[96];
        snprintf(label, sizeof(label), "%d %s", k,
                 thr ? (k > 1 ? "threads" : "thread")
                     : (k > 1 ? "processes" : "process"));
        dqb_herd_res r;
        snprintf(what, sizeof(what), "herd light, %s", label);
        if (dqb_herd_measure(c, run, 0, k, thr, DQB_HERD_MAX, 0,
                             c->herd_light_n, what, &r) == 0) {
            double nj = (double)c->herd_light_n;
            dqb_herd_fig *f = &dqb_herd[i];
            dqb_s_add(&f->l_polls, (r.scripts - r.ack_calls) / nj);
            dqb_s_add(&f->l_cpu, r.cpu_us / nj);
            dqb_s_add(&f->l_p50, r.lat.p50);
            dqb_s_add(&f->l_p99, r.lat.p99);
            dqb_herd_figline(run, label, 0, c->herd_light_n, &r);
            dqb_log("%s: %.2f polls/job, Redis CPU %.1f us/job, lateness "
                    "p50 %.2f p99 %.2f ms", what,
                    (r.scripts - r.ack_calls) / nj, r.cpu_us / nj, r.lat.p50,
                    r.lat.p99);
        }
        snprintf(what, sizeof(what), "herd drain, %s", label);
        if (dqb_herd_measure(c, run, 0, k, thr, DQB_HERD_MAX, 1,
                             c->herd_drain_n, what, &r) == 0) {
            double nj = (double)c->herd_drain_n;
            dqb_herd_fig *f = &dqb_herd[i];
            dqb_s_add(&f->d_tput, nj / r.secs);
            dqb_s_add(&f->d_polls, (r.scripts - r.ack_calls) / nj);
            dqb_s_add(&f->d_cpu, r.cpu_us / nj);
            dqb_herd_figline(run, label, 1, c->herd_drain_n, &r);
            dqb_log("%s: %.0f jobs/s, %.3f polls/job, Redis CPU %.1f us/job",
                    what, nj / r.secs, (r.scripts - r.ack_calls) / nj,
                    r.cpu_us / nj);
        }
    }
    static const char *const klabel[3] = {"kind: dq_poll_wait max 100",
                                          "kind: sync consumer",
                                          "kind: event consumer"};
    for (int kind = 0; kind < DQB_NHKIND; kind++) {
        dqb_herd_res r;
        char what[96];
        snprintf(what, sizeof(what), "herd %s, drain", dqb_hkind_desc[kind]);
        if (dqb_herd_measure(c, run, kind, 1, 0, DQB_HERD_KIND_MAX, 1,
                             c->herd_drain_n, what, &r) == 0) {
            dqb_s_add(&dqb_hk_tput[kind], (double)c->herd_drain_n / r.secs);
            if (kind != 0)
                r.ack_calls = NAN; /* the consumers' acks are not counted */
            dqb_herd_figline(run, klabel[kind], 1, c->herd_drain_n, &r);
            dqb_log("%s: %.0f jobs/s", what, (double)c->herd_drain_n / r.secs);
        }
        snprintf(what, sizeof(what), "herd %s, light", dqb_hkind_desc[kind]);
        if (dqb_herd_measure(c, run, kind, 1, 0, DQB_HERD_KIND_MAX, 0,
                             c->herd_light_n, what, &r) == 0) {
            dqb_s_add(&dqb_hk_p50[kind], r.lat.p50);
            dqb_s_add(&dqb_hk_p99[kind], r.lat.p99);
            if (kind != 0)
                r.ack_calls = NAN;
            dqb_herd_figline(run, klabel[kind], 0, c->herd_light_n, &r);
            dqb_log("%s: lateness p50 %.2f p99 %.2f ms", what, r.lat.p50,
                    r.lat.p99);
        }
    }
}

/* ---- the rows ---------------------------------------------------------- */

/* A row of a per-job figure with, as its limit, the same figure of one
 * consumer process (same runs) and the median of the per-run ratios. */
static void dqb_herd_rel_row(const char *name, const dqb_series *s,
                             const char *unit, const char *fmt,
                             const char *lname, const dqb_series *base) {
    dqb_row *rw = dqb_val_row(name, s, unit, fmt);
    if (base == NULL || base->n == 0 || s->n == 0)
        return;
    snprintf(rw->limit, sizeof(rw->limit), "%s", lname);
    snprintf(rw->lval, sizeof(rw->lval), fmt, dqb_s_med(base));
    double q = dqb_s_ratio(s, base);
    snprintf(rw->ratio, sizeof(rw->ratio), q < 10 ? "%.2f" : "%.1f", q);
}

void dqb_scen_herd_rows(const dqb_cfg *c) {
    char title[240];
    snprintf(title, sizeof(title),
             "herd, light load: %ld jobs due %" PRId64 "..%" PRId64
             " ms after one push; K consumers of one queue, poll_wait(max "
             "%d, lease 30 s, timeout %d ms) + ack_batch; polls = script "
             "calls - acks; Redis CPU = INFO cpu",
             c->herd_light_n, c->herd_light_base_ms,
             c->herd_light_base_ms + c->herd_light_spread_ms, DQB_HERD_MAX,
             DQB_HERD_TIMEOUT_MS);
    dqb_add_section(title);
    const dqb_herd_fig *one = &dqb_herd[0]; /* 1 process */
    for (int i = 0; i < DQB_NHERD; i++) {
        if (!dqb_herd_enabled(c, i))
            continue;
        int k = dqb_herd_conf[i].k, thr = dqb_herd_conf[i].threads;
        const dqb_herd_fig *f = &dqb_herd[i];
        char who[32], nm[96];
        snprintf(who, sizeof(who), "%d %s", k,
                 thr ? (k > 1 ? "threads" : "thread")
                     : (k > 1 ? "processes" : "process"));
        snprintf(nm, sizeof(nm), "light, %s: polls/job", who);
        dqb_herd_rel_row(nm, &f->l_polls, "polls", "%.2f", "1 process",
                         i ? &one->l_polls : NULL);
        snprintf(nm, sizeof(nm), "light, %s: Redis CPU/job", who);
        dqb_herd_rel_row(nm, &f->l_cpu, "us", "%.1f", "1 process",
                         i ? &one->l_cpu : NULL);
        snprintf(nm, sizeof(nm), "light, %s: lateness p50", who);
        dqb_late_row(nm, &f->l_p50, dqb_herd_unc, 0);
        snprintf(nm, sizeof(nm), "light, %s: lateness p99", who);
        dqb_late_row(nm, &f->l_p99, dqb_herd_unc, 0);
    }
    snprintf(title, sizeof(title),
             "herd, backlog drain: %ld due jobs; K consumers of one queue, "
             "poll_wait(max %d, lease 30 s) + ack_batch; from a barrier to "
             "the last ack", c->herd_drain_n, DQB_HERD_MAX);
    dqb_add_section(title);
    for (int i = 0; i < DQB_NHERD; i++) {
        if (!dqb_herd_enabled(c, i))
            continue;
        int k = dqb_herd_conf[i].k, thr = dqb_herd_conf[i].threads;
        const dqb_herd_fig *f = &dqb_herd[i];
        char nm[96];
        snprintf(nm, sizeof(nm), "drain, %d %s", k,
                 thr ? (k > 1 ? "threads" : "thread")
                     : (k > 1 ? "processes" : "process"));
        dqb_tput_row(nm, &f->d_tput, dqb_lim_short[DQB_L_P16],
                     &dqb_lim[DQB_L_P16]);
        dqb_herd_rel_row("  polls/job", &f->d_polls, "polls", "%.3f",
                         "1 process", i ? &one->d_polls : NULL);
        dqb_herd_rel_row("  Redis CPU/job", &f->d_cpu, "us", "%.1f",
                         "1 process", i ? &one->d_cpu : NULL);
    }
    snprintf(title, sizeof(title),
             "herd, consumer kinds: one consumer each; drain of %ld due "
             "jobs, and lateness at the light load above", c->herd_drain_n);
    dqb_add_section(title);
    for (int kind = 0; kind < DQB_NHKIND; kind++) {
        char nm[96];
        snprintf(nm, sizeof(nm), "drain, %s", dqb_hkind_desc[kind]);
        if (kind == 0)
            dqb_tput_row(nm, &dqb_hk_tput[0], dqb_lim_short[DQB_L_P16],
                         &dqb_lim[DQB_L_P16]);
        else
            dqb_tput_row(nm, &dqb_hk_tput[kind], "dq_poll_wait loop",
                         &dqb_hk_tput[0]);
    }
    for (int kind = 0; kind < DQB_NHKIND; kind++) {
        char nm[96];
        snprintf(nm, sizeof(nm), "lateness p99, %s", dqb_hkind_desc[kind]);
        dqb_late_row(nm, &dqb_hk_p99[kind], dqb_herd_unc, 0);
    }
    if (dqb_herd_figf != NULL) {
        fclose(dqb_herd_figf);
        dqb_herd_figf = NULL;
    }
}
