/*
 * bench/scen_fair.c - fair claiming (tenant groups, the limit on jobs in
 * flight, priorities) beside a plain queue, every figure in the server's
 * clock and every ratio within one run.  Each phase starts from an empty
 * server (FLUSHALL) and ends with the queue checked empty.
 *
 * burst     N jobs of group A and 1 / 10 / 1,000 small groups of one job
 *           each, all due at one server-clock moment, drained by one
 *           process (poll max 100 + ack_batch, lease 60 s): A's drain
 *           against a plain queue's drain of the same N (measured back to
 *           back, their order alternating between runs), and the small
 *           jobs' lateness p99 against the same small jobs on an idle queue.
 * limit     DQ_SET_MAX_INFLIGHT = 10, 32 consumer processes (poll_wait max
 *           1, a 2 ms handler, ack): the most leased at once (sampled from
 *           Redis every ms), throughput against the same queue unlimited,
 *           polls per job.
 * prio      10,000 due jobs of priority 0, then one of priority 5 pushed
 *           due now: the poll (max 1) it comes in and its lateness against
 *           an idle queue's, then the rest's drain against a plain queue's.
 *
 * bench/fair.sh runs this scenario alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define DQB_FAIR_MAX 100      /* jobs per poll of the drains */
#define DQB_FAIR_NG 3         /* small-group counts of the burst */
#define DQB_FAIR_INFLIGHT 10  /* DQ_SET_MAX_INFLIGHT of the limit */
#define DQB_FAIR_PROCS_MAX 32 /* consumer processes of the limit */
#define DQB_FAIR_PRIO 5       /* the one job's priority in prio */

static const int dqb_fair_groups[DQB_FAIR_NG] = {1, 10, 1000};

/* Sizes per mode: quick halves the burst; smoke is tiny. */
typedef struct dqb_fair_size {
    long big;   /* burst: jobs of group A (and of the plain queue) */
    long jobs;  /* limit: due jobs */
    int procs;  /* limit: consumer processes */
    long prio;  /* prio: jobs of priority 0 */
} dqb_fair_size;

static dqb_fair_size dqb_fair_sizes(const dqb_cfg *c) {
    static const dqb_fair_size sz[3] = {{100000, 3000, 32, 10000},
                                        {50000, 3000, 32, 10000},
                                        {2000, 200, 16, 500}};
    return sz[c->mode < 0 || c->mode > 2 ? 2 : c->mode];
}

/* burst, per small-group count: lateness p99 of the small jobs on the
 * idle queue and in the burst, A's drain and the plain queue's (jobs/s) */
static dqb_series dqb_fb_idle[DQB_FAIR_NG], dqb_fb_late[DQB_FAIR_NG],
    dqb_fb_big[DQB_FAIR_NG], dqb_fb_plain[DQB_FAIR_NG];
/* limit, [0] unlimited [1] limited */
static dqb_series dqb_fl_rate[2], dqb_fl_most[2], dqb_fl_polls[2],
    dqb_fl_wakes[2];
/* prio */
static dqb_series dqb_fp_poll, dqb_fp_late, dqb_fp_idle, dqb_fp_rest,
    dqb_fp_plain;

/* ---- the server clock, pushes and drains ------------------------------ */

/* The server ms a job was delivered at: its lease deadline - the lease. */
static int64_t dqb_fair_got_ms(const dq_job *j) {
    return dq_job_lease_deadline_ms(j) - DQB_LEASE_MS;
}

/* n jobs per second from server ms `from` to `to` (at least 1 ms). */
static double dqb_fair_rate(long n, int64_t from, int64_t to) {
    return (double)n * 1000.0 / (double)(to > from ? to - from : 1);
}

/* Push options of group g (NULL: none) and priority prio; NULL when
 * neither is set (a plain job). */
static dq_push_opts *dqb_fair_opts(const char *g, int prio) {
    if (g == NULL && prio == 0)
        return NULL;
    dq_push_opts *o = dq_push_opts_new();
    if (o == NULL ||
        (g != NULL && dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, g) != 0) ||
        (prio != 0 && dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, prio) != 0))
        dqb_fail("fair: push options");
    return o;
}

/* Pushes n jobs (ids "<prefix><k>") of group g and priority prio to the
 * bench queue, due at server ms `at`.  0, or -1 (a FAIL line). */
static int dqb_fair_push(dq_client *cl, const char *g, int prio,
                         const char *prefix, long n, int64_t at) {
    enum { B = 1000 };
    static char idb[B][DQB_ID_LEN];
    const char *ids[B];
    const void *pl[B];
    size_t lens[B];
    int64_t times[B];
    dq_push_opts *o = dqb_fair_opts(g, prio);
    int rc = 0;
    for (long done = 0; done < n && rc == 0; done += B) {
        int k = n - done < B ? (int)(n - done) : B;
        for (int i = 0; i < k; i++) {
            snprintf(idb[i], sizeof(idb[i]), "%s%ld", prefix, done + i);
            ids[i] = idb[i], pl[i] = dqb_payload, lens[i] = 16;
            times[i] = at;
        }
        if (dq_push_batch_ex(cl, DQB_QUEUE, (size_t)k, pl, lens, times, ids,
                             DQ_PUSH_AT, o, NULL, NULL) != k) {
            dqb_fail("fair: dq_push_batch_ex: %s", dq_errmsg(cl));
            rc = -1;
        }
    }
    dq_push_opts_free(o);
    return rc;
}

/* One job ("s<g>_0") in each of `groups` small groups s<g>, due at at. */
static int dqb_fair_push_small(dq_client *cl, int groups, int64_t at) {
    for (int g = 0; g < groups; g++) {
        char name[16], pfx[16];
        snprintf(name, sizeof(name), "s%d", g);
        snprintf(pfx, sizeof(pfx), "s%d_", g);
        if (dqb_fair_push(cl, name, 0, pfx, 1, at) != 0)
            return -1;
    }
    return 0;
}

/* What a drain saw: the lateness (server ms after due) of the jobs whose
 * id starts with 's', and when the last of the others came. */
typedef struct dqb_fair_seen {
    double *late; /* room for every 's' job */
    long n_late;
    int64_t last_big; /* server ms */
} dqb_fair_seen;

/* Records the jobs of one poll into s. */
static void dqb_fair_note(dqb_fair_seen *s, dq_jobs *js, int n) {
    for (int i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(js, (size_t)i);
        if (dq_job_id(j)[0] == 's')
            s->late[s->n_late++] =
                (double)(dqb_fair_got_ms(j) - dq_job_due_ms(j));
        else
            s->last_big = dqb_fair_got_ms(j);
    }
}

/* Drains `total` due jobs of the bench queue (poll max 100 + ack_batch)
 * into s.  0, or -1 (a FAIL line). */
static int dqb_fair_drain(dq_client *cl, long total, dqb_fair_seen *s) {
    long got = 0;
    int64_t deadline = dqb_mono_ns() + INT64_C(120) * 1000000000;
    while (got < total && dqb_mono_ns() < deadline) {
        dq_jobs *js = NULL;
        int n = dq_poll(cl, DQB_QUEUE, DQB_FAIR_MAX, DQB_LEASE_MS, &js, NULL);
        if (n < 0) {
            dqb_fail("fair: dq_poll: %s", dq_errmsg(cl));
            return -1;
        }
        dqb_fair_note(s, js, n);
        if (n > 0 && dqb_ack_all(cl, js) != n)
            return -1;
        dq_jobs_free(js);
        got += n;
        if (n == 0)
            usleep(1000);
    }
    if (got != total)
        dqb_fail("fair: drained %ld of %ld jobs", got, total);
    return got == total ? 0 : -1;
}

/* ---- burst ------------------------------------------------------------ */

/* One burst phase on an empty server: `big` jobs of group g (NULL: a
 * plain queue) and `groups` small groups, all due at one moment a little
 * ahead (time to push them all), drained.  Sets *rate (the big jobs/s
 * from that moment to the last one's delivery) and *p99 (the small
 * jobs' lateness, ms).  0, or -1. */
static int dqb_fair_phase(dq_client *cl, const char *g, long big, int groups,
                          double *rate, double *p99) {
    dqb_flushall();
    dqb_fair_seen s = {calloc((size_t)groups + 1, sizeof(double)), 0, 0};
    int64_t t0 = dqb_adm_srv_ms() + 300 + big / 40 + groups / 2;
    int rc = s.late == NULL ? -1 : 0;
    if (rc == 0 && big > 0)
        rc = dqb_fair_push(cl, g, 0, "a", big, t0);
    if (rc == 0)
        rc = dqb_fair_push_small(cl, groups, t0);
    int64_t now = dqb_adm_srv_ms(), start = now > t0 ? now : t0;
    if (now > t0)
        dqb_log("fair: pushing ran %lld ms past the due moment: timed "
                "from its end", (long long)(now - t0));
    while (rc == 0 && dqb_adm_srv_ms() < t0)
        usleep(200);
    s.last_big = start;
    if (rc == 0)
        rc = dqb_fair_drain(cl, big + groups, &s);
    *rate = dqb_fair_rate(big, start, s.last_big);
    *p99 = groups > 0 ? dqb_percentiles(s.late, (size_t)s.n_late).p99 : NAN;
    free(s.late);
    dqb_expect_empty(cl, "fair burst");
    return rc;
}

/* One count of small groups: the idle queue, then the plain queue and the
 * burst back to back (plain first in even runs). */
static void dqb_fair_burst(dq_client *cl, long big, int gi, int run) {
    int groups = dqb_fair_groups[gi];
    double idle, plain, late, rate, none;
    if (dqb_fair_phase(cl, NULL, 0, groups, &none, &idle) != 0)
        return;
    for (int k = 0; k < 2; k++) {
        int is_plain = (k + run) % 2 == 0;
        if (dqb_fair_phase(cl, is_plain ? NULL : "A", big,
                           is_plain ? 0 : groups, is_plain ? &plain : &rate,
                           is_plain ? &none : &late) != 0)
            return;
    }
    dqb_s_add(&dqb_fb_idle[gi], idle);
    dqb_s_add(&dqb_fb_late[gi], late);
    dqb_s_add(&dqb_fb_big[gi], rate);
    dqb_s_add(&dqb_fb_plain[gi], plain);
    dqb_log("fair: burst, %d small group(s): small jobs' lateness p99 %.0f "
            "ms (idle queue %.0f ms); A %.0f jobs/s, plain queue %.0f "
            "jobs/s: %.2fx", groups, late, idle, rate, plain, rate / plain);
}

/* ---- limit ------------------------------------------------------------ */

/* One consumer process: poll_wait (max 1), a 2 ms handler, ack, until
 * the shared count reaches total; never returns. */
static void dqb_fair_consumer(long total, long *done) {
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        _exit(2);
    int64_t deadline = dqb_mono_ns() + INT64_C(120) * 1000000000;
    while (__atomic_load_n(done, __ATOMIC_SEQ_CST) < total &&
           dqb_mono_ns() < deadline) {
        dq_jobs *js = NULL;
        int n = dq_poll_wait(cl, DQB_QUEUE, 1, 30000, 200, &js);
        if (n < 0)
            _exit(3);
        for (int i = 0; i < n; i++) {
            const dq_job *j = dq_jobs_at(js, (size_t)i);
            usleep(2000);
            if (dq_ack(cl, DQB_QUEUE, dq_job_id(j), dq_job_token(j)) != 0)
                _exit(4);
            __atomic_add_fetch(done, 1, __ATOMIC_SEQ_CST);
        }
        dq_jobs_free(js);
    }
    dq_close(cl);
    _exit(0);
}

/* Jobs the bench queue holds leased now (lease deadline ahead). */
static long dqb_fair_leased(void) {
    int64_t now = dqb_adm_srv_ms();
    redisReply *r = dqb_adm_cmd("ZCOUNT dq:{" DQB_QUEUE "}:lease (%lld +inf",
                                (long long)now);
    long v = r != NULL && r->type == REDIS_REPLY_INTEGER ? (long)r->integer
                                                        : 0;
    freeReplyObject(r);
    return v;
}

/* Waits for the consumer processes; a FAIL line unless each exited 0
 * (or one was already reaped by the sampler). */
static void dqb_fair_reap(const pid_t *pids, int n, int kill_them) {
    for (int i = 0; i < n; i++) {
        int st = 0;
        if (kill_them)
            kill(pids[i], SIGKILL);
        if (waitpid(pids[i], &st, 0) == pids[i] && !kill_them &&
            !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            dqb_fail("fair: consumer process exited %d (poll 3, ack 4)",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}

/* Runs procs consumer processes on the bench queue (total jobs due):
 * returns jobs/s, sets the most leased at once (sampled every ms). */
static double dqb_fair_consume(int procs, long total, long *done,
                               long *most) {
    pid_t pids[DQB_FAIR_PROCS_MAX];
    int n = 0, bad = 0;
    *done = 0;
    *most = 0;
    dqb_reset_stats();
    int64_t t0 = dqb_mono_ns(), deadline = t0 + INT64_C(120) * 1000000000;
    for (; n < procs; n++)
        if ((pids[n] = fork()) == 0)
            dqb_fair_consumer(total, done);
        else if (pids[n] < 0)
            break;
    while (__atomic_load_n(done, __ATOMIC_SEQ_CST) < total && !bad) {
        int st;
        pid_t gone = waitpid(-1, &st, WNOHANG);
        bad = (gone > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) ||
              n < procs || dqb_mono_ns() > deadline;
        long now = dqb_fair_leased();
        *most = now > *most ? now : *most;
        usleep(1000);
    }
    double secs = (double)(dqb_mono_ns() - t0) / 1e9;
    dqb_fair_reap(pids, n, bad);
    if (bad || *done != total)
        dqb_fail("fair: limit: %ld of %ld jobs acked", *done, total);
    return (double)total / secs;
}

/* One queue of the limit section (limited: DQ_SET_MAX_INFLIGHT = 10). */
static void dqb_fair_limit1(dq_client *cl, const dqb_fair_size *z,
                            int limited, long *done) {
    dqb_flushall();
    int key = DQ_SET_MAX_INFLIGHT;
    int64_t v = DQB_FAIR_INFLIGHT;
    if (limited && dq_config_set(cl, DQB_QUEUE, 1, &key, &v) != 0) {
        dqb_fail("fair: dq_config_set: %s", dq_errmsg(cl));
        return;
    }
    if (dqb_fair_push(cl, NULL, 0, "j", z->jobs, dqb_adm_srv_ms() - 10))
        return;
    long most;
    double rate = dqb_fair_consume(z->procs, z->jobs, done, &most);
    double calls, c2, wakes, usec;
    dqb_cmdstat("evalsha", &calls, &usec);
    dqb_cmdstat("eval", &c2, &usec);
    dqb_cmdstat("publish", &wakes, &usec);
    double polls = (calls + c2 - (double)z->jobs) / (double)z->jobs;
    dqb_s_add(&dqb_fl_rate[limited], rate);
    dqb_s_add(&dqb_fl_most[limited], (double)most);
    dqb_s_add(&dqb_fl_polls[limited], polls);
    dqb_s_add(&dqb_fl_wakes[limited], wakes / (double)z->jobs);
    dqb_expect_empty(cl, "fair limit");
    dqb_log("fair: limit %s, %d processes: %.0f jobs/s, most leased %ld, "
            "%.2f polls and %.2f wake-ups per job",
            limited ? "10" : "none", z->procs, rate, most, polls,
            wakes / (double)z->jobs);
}

/* ---- prio ------------------------------------------------------------- */

/* Polls (max 1, acking each) until the job "s0"; returns the poll it came
 * in, its lateness into *late; -1 on failure. */
static int dqb_fair_polls_to_s0(dq_client *cl, double *late) {
    int64_t deadline = dqb_mono_ns() + INT64_C(60) * 1000000000;
    for (int k = 1; dqb_mono_ns() < deadline; k++) {
        dq_jobs *js = NULL;
        int n = dq_poll(cl, DQB_QUEUE, 1, DQB_LEASE_MS, &js, NULL);
        if (n < 0 || (n > 0 && dqb_ack_all(cl, js) != n)) {
            dqb_fail("fair: prio poll: %s", dq_errmsg(cl));
            return -1;
        }
        const dq_job *j = n > 0 ? dq_jobs_at(js, 0) : NULL;
        int hit = j != NULL && strcmp(dq_job_id(j), "s0") == 0;
        if (hit)
            *late = (double)(dqb_fair_got_ms(j) - dq_job_due_ms(j));
        dq_jobs_free(js);
        if (hit)
            return k;
    }
    dqb_fail("fair: the priority job never came");
    return -1;
}

/* The priority job alone on an empty server ("s0" due now); with n > 0,
 * n due jobs of priority 0 before it, then they are drained: their
 * jobs/s into *rest.  Returns the poll it came in, or -1. */
static int dqb_fair_prio1(dq_client *cl, long n, double *late,
                          double *rest) {
    dqb_flushall();
    if (n > 0 &&
        dqb_fair_push(cl, NULL, 0, "a", n, dqb_adm_srv_ms() - 10) != 0)
        return -1;
    if (dqb_fair_push(cl, NULL, DQB_FAIR_PRIO, "s", 1, dqb_adm_srv_ms()))
        return -1;
    int k = dqb_fair_polls_to_s0(cl, late);
    long left = n - (k - 1);
    dqb_fair_seen s = {NULL, 0, dqb_adm_srv_ms()};
    int64_t start = s.last_big;
    if (k > 0 && left > 0 && dqb_fair_drain(cl, left, &s) == 0)
        *rest = dqb_fair_rate(left, start, s.last_big);
    dqb_expect_empty(cl, "fair prio");
    return k;
}

/* A plain queue's drain of n due jobs; jobs/s, or NAN. */
static double dqb_fair_plain(dq_client *cl, long n) {
    dqb_flushall();
    if (dqb_fair_push(cl, NULL, 0, "a", n, dqb_adm_srv_ms() - 10) != 0)
        return NAN;
    dqb_fair_seen s = {NULL, 0, dqb_adm_srv_ms()};
    int64_t start = s.last_big;
    if (dqb_fair_drain(cl, n, &s) != 0)
        return NAN;
    dqb_expect_empty(cl, "fair prio (plain)");
    return dqb_fair_rate(n, start, s.last_big);
}

static void dqb_fair_prio(dq_client *cl, long n, int run) {
    double idle = NAN, late = NAN, rest = NAN, plain = NAN, none;
    dqb_fair_prio1(cl, 0, &idle, &none);
    if (run % 2)
        plain = dqb_fair_plain(cl, n);
    int k = dqb_fair_prio1(cl, n, &late, &rest);
    if (run % 2 == 0)
        plain = dqb_fair_plain(cl, n);
    dqb_s_add(&dqb_fp_poll, k);
    dqb_s_add(&dqb_fp_late, late);
    dqb_s_add(&dqb_fp_idle, idle);
    dqb_s_add(&dqb_fp_rest, rest);
    dqb_s_add(&dqb_fp_plain, plain);
    dqb_log("fair: prio: the priority-%d job in poll %d, lateness %.0f ms "
            "(idle queue %.0f ms); the rest %.0f jobs/s, plain queue %.0f "
            "jobs/s: %.2fx", DQB_FAIR_PRIO, k, late, idle, rest, plain,
            rest / plain);
}

void dqb_scen_fair_run(const dqb_cfg *c, int run) {
    dqb_fair_size z = dqb_fair_sizes(c);
    long *done = dqb_shared_alloc(sizeof(long));
    dq_client *cl = dqb_open_client();
    if (cl == NULL || done == NULL) {
        dq_close(cl);
        if (done != NULL)
            munmap(done, sizeof(long));
        return;
    }
    for (int gi = 0; gi < DQB_FAIR_NG; gi++)
        dqb_fair_burst(cl, z.big, gi, run);
    for (int k = 0; k < 2; k++)
        dqb_fair_limit1(cl, &z, (k + run) % 2, done);
    dqb_fair_prio(cl, z.prio, run);
    dqb_flushall();
    dq_close(cl);
    munmap(done, sizeof(long));
}

/* ---- the rows --------------------------------------------------------- */

/* A row of s with, as its limit, the same figure of base (same runs) and,
 * with ratio, the median of the per-run ratios. */
static dqb_row *dqb_fair_vs(const char *name, const dqb_series *s,
                            const char *unit, const char *fmt,
                            const char *bname, const dqb_series *base,
                            int ratio) {
    dqb_row *rw = dqb_val_row(name, s, unit, fmt);
    snprintf(rw->limit, sizeof(rw->limit), "%s", bname);
    snprintf(rw->lval, sizeof(rw->lval), fmt, dqb_s_med(base));
    if (ratio)
        snprintf(rw->ratio, sizeof(rw->ratio), "%.2f", dqb_s_ratio(s, base));
    return rw;
}

/* A drain row against Redis's limit when the limits scenario ran. */
static void dqb_fair_lim_row(const char *name, const dqb_series *s) {
    dqb_tput_row(name, s, dqb_lim_short[DQB_L_P16], &dqb_lim[DQB_L_P16]);
}

static void dqb_fair_burst_rows(const dqb_fair_size *z) {
    char title[200], nm[96];
    snprintf(title, sizeof(title),
             "fair, burst: %ld jobs of group A + 1/10/1,000 small groups "
             "of 1 job, all due at once; 1 process, poll max %d + "
             "ack_batch; ratio = to a plain queue's %ld, same run",
             z->big, DQB_FAIR_MAX, z->big);
    dqb_add_section(title);
    for (int gi = 0; gi < DQB_FAIR_NG; gi++) {
        int g = dqb_fair_groups[gi];
        char gs[16];
        dqb_fmt_int(gs, sizeof(gs), g);
        snprintf(nm, sizeof(nm), "%s small group%s: A's drain", gs,
                 g > 1 ? "s" : "");
        dqb_row *rw = dqb_tput_row(nm, &dqb_fb_big[gi], "plain queue",
                                   &dqb_fb_plain[gi]);
        dqb_set_target(rw, ">= 0.70x", dqb_s_ratio(&dqb_fb_big[gi],
                                                   &dqb_fb_plain[gi]),
                       0.7, 1);
        if (dqb_lim[DQB_L_P16].n > 0)
            dqb_fair_lim_row("  A's drain against Redis's limit",
                             &dqb_fb_big[gi]);
        dqb_fair_lim_row("  plain queue's drain", &dqb_fb_plain[gi]);
        dqb_fair_vs("  small jobs' lateness p99", &dqb_fb_late[gi], "ms",
                    "%.0f", "idle queue", &dqb_fb_idle[gi], 0);
    }
}

static void dqb_fair_limit_rows(const dqb_fair_size *z) {
    char title[200];
    snprintf(title, sizeof(title),
             "fair, limit: %ld due jobs, %d consumer processes, poll_wait "
             "max 1 + 2 ms handler + ack; DQ_SET_MAX_INFLIGHT = %d vs "
             "unlimited, same run", z->jobs, z->procs, DQB_FAIR_INFLIGHT);
    dqb_add_section(title);
    dqb_tput_row("unlimited", &dqb_fl_rate[0], "itself", &dqb_fl_rate[0]);
    dqb_tput_row("limited to 10 in flight", &dqb_fl_rate[1], "unlimited",
                 &dqb_fl_rate[0]);
    dqb_row *rw = dqb_fair_vs("  most leased at once (sampled every ms)",
                              &dqb_fl_most[1], "jobs", "%.0f",
                              "unlimited", &dqb_fl_most[0], 0);
    dqb_set_target(rw, "<= 10", dqb_s_med(&dqb_fl_most[1]),
                   DQB_FAIR_INFLIGHT, 0);
    rw = dqb_fair_vs("  polls per job (script calls - acks)",
                     &dqb_fl_polls[1], "polls", "%.2f", "unlimited",
                     &dqb_fl_polls[0], 1);
    dqb_set_target(rw, "<= 1.5", dqb_s_med(&dqb_fl_polls[1]), 1.5, 0);
    dqb_fair_vs("  wake-ups sent per job (PUBLISH)", &dqb_fl_wakes[1],
                "msgs", "%.2f", "unlimited", &dqb_fl_wakes[0], 0);
}

static void dqb_fair_prio_rows(const dqb_fair_size *z) {
    char title[200], nm[96];
    snprintf(title, sizeof(title),
             "fair, priorities: %ld due jobs of priority 0, then 1 of "
             "priority %d pushed due now; 1 process, poll max 1 until it "
             "comes, the rest by poll max %d", z->prio, DQB_FAIR_PRIO,
             DQB_FAIR_MAX);
    dqb_add_section(title);
    snprintf(nm, sizeof(nm), "priority-%d job: in poll number",
             DQB_FAIR_PRIO);
    dqb_row *rw = dqb_val_row(nm, &dqb_fp_poll, "poll", "%.0f");
    dqb_set_target(rw, "<= 1", dqb_s_med(&dqb_fp_poll), 1, 0);
    dqb_fair_vs("  its lateness", &dqb_fp_late, "ms", "%.0f", "idle queue",
                &dqb_fp_idle, 0);
    dqb_tput_row("the rest's drain", &dqb_fp_rest, "plain queue",
                 &dqb_fp_plain);
    dqb_fair_lim_row("  plain queue's drain", &dqb_fp_plain);
}

void dqb_scen_fair_rows(const dqb_cfg *c) {
    dqb_fair_size z = dqb_fair_sizes(c);
    dqb_fair_burst_rows(&z);
    dqb_fair_limit_rows(&z);
    dqb_fair_prio_rows(&z);
}
