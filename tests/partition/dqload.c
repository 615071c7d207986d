/*
 * dqload: one client process of the partition harness (run.py).  It runs
 * one role against a queue and logs every call it makes to a history file,
 * one line per event, times from CLOCK_MONOTONIC (one clock for every
 * network namespace of the host):
 *
 *   T PROC invoke push ID          T PROC ok|fail|info push ID CODE
 *   T PROC invoke poll             T PROC ok poll ID/TOKEN/ATTEMPT ...
 *                                  T PROC fail|info poll CODE
 *   T PROC invoke ack ID TOKEN     T PROC ok|fail|info ack ID TOKEN CODE
 *   T PROC lapse ID TOKEN          (work outlived the lease: no ack sent)
 *
 * ok: the call took effect; fail: it did not; info: unknown (connection
 * lost, timeout, or a push that reached the primary only).  A consumer
 * holds a job from its poll's ok to its ack's invoke (or lapse): the
 * checker (check.py) compares those intervals across processes.
 *
 * A producer pushes a job every EVERY_MS ms (20 unless given; ids PROC-1,
 * PROC-2, ...), due 0, 1, ... DELAYS - 1 s later in turn (DELAYS 4 unless
 * given).
 *
 * Usage: dqload ROLE URI QUEUE HISTORY PROC RUN_MS [WAIT [LEASE_MS
 *        [WORK_MS [DELAYS [EVERY_MS]]]]]
 * WAIT: N for DQ_OPT_WAIT_REPLICAS = N, dN for the durable mode with N.
 * ROLE: producer | sync | event | drain.  SIGTERM ends the run early.
 * A drain polls until the queue is empty (or RUN_MS passed) and acks all.
 */
#include <delayq-event.h>
#include <delayq.h>

#include <event2/event.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct load {
    const char *role, *uri, *queue, *proc;
    FILE *hist;
    int64_t end_ns, lease_ms, work_ms, delays, every_ms;
    int wait_replicas, durable;
};

static volatile sig_atomic_t stop_flag;

static void on_term(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stop_flag) {
    }
}

static int running(const struct load *l)
{
    return !stop_flag && now_ns() < l->end_ns;
}

/* ok, fail or info for a call's return code. */
static const char *outcome(int rc)
{
    if (rc >= 0)
        return "ok";
    if (rc == DQ_EIO || rc == DQ_ETIMEDOUT || rc == DQ_EREPLICAS ||
        rc == DQ_ECANCELED || rc == DQ_ECLOSED)
        return "info";
    return "fail";
}

static void logf_line(const struct load *l, const char *fmt, const char *a,
                      const char *b, int code)
{
    fprintf(l->hist, "%" PRId64 " %s ", now_ns(), l->proc);
    fprintf(l->hist, fmt, a ? a : "", b ? b : "", code);
    fputc('\n', l->hist);
    fflush(l->hist);
}

static dq_options *load_options(const struct load *l)
{
    dq_options *o = dq_options_new();
    if (!o)
        return NULL;
    dq_options_set_int(o, DQ_OPT_CONNECT_TIMEOUT_MS, 500);
    dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, 1000);
    dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 200);
    dq_options_set_int(o, DQ_OPT_LEASE_MS, l->lease_ms);
    if (l->wait_replicas > 0) {
        dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS, l->wait_replicas);
        dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS, 500);
    }
    if (l->durable && dq_options_set_int(o, DQ_OPT_DURABLE, 1) != 0) {
        dq_options_free(o);
        return NULL;
    }
    return o;
}

/* ---- producer --------------------------------------------------------- */

static void produce_one(struct load *l, dq_client *c, long seq)
{
    char id[64];
    snprintf(id, sizeof id, "%s-%ld", l->proc, seq);
    logf_line(l, "invoke push %s%s", id, NULL, 0);
    /* a delayed job pushed on a primary that loses its data is lost; one
     * due at once may have run on that side first */
    int64_t delay_ms = (seq % l->delays) * 1000;
    int rc = dq_push(c, l->queue, "x", 1, delay_ms, id, DQ_PUSH_KEEP, NULL, 0,
                     NULL);
    logf_line(l, "%s push %s %d", outcome(rc), id, rc);
}

static int run_producer(struct load *l, dq_client *c)
{
    for (long seq = 1; running(l); seq++) {
        produce_one(l, c, seq);
        sleep_ms(l->every_ms);
    }
    return 0;
}

/* ---- sync consumer and drain ------------------------------------------ */

static void log_jobs(const struct load *l, const dq_jobs *jobs)
{
    fprintf(l->hist, "%" PRId64 " %s ok poll", now_ns(), l->proc);
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        fprintf(l->hist, " %s/%s/%" PRId64, dq_job_id(j), dq_job_token(j),
                dq_job_attempt(j));
    }
    fputc('\n', l->hist);
    fflush(l->hist);
}

/* 1 when the work ended inside the lease that began at the poll's invoke
 * (by this host's clock); else the job is logged as lapsed, not acked. */
static int within_lease(const struct load *l, const dq_job *j,
                        int64_t polled_ns)
{
    if (now_ns() - polled_ns < l->lease_ms * 1000000 - 100000000)
        return 1;
    logf_line(l, "lapse %s %s", dq_job_id(j), dq_job_token(j), 0);
    return 0;
}

static void ack_sync(struct load *l, dq_client *c, const dq_job *j)
{
    logf_line(l, "invoke ack %s %s", dq_job_id(j), dq_job_token(j), 0);
    int rc = dq_ack(c, l->queue, dq_job_id(j), dq_job_token(j));
    fprintf(l->hist, "%" PRId64 " %s %s ack %s %s %d\n", now_ns(), l->proc,
            outcome(rc), dq_job_id(j), dq_job_token(j), rc);
    fflush(l->hist);
}

static int poll_sync(struct load *l, dq_client *c, int drain)
{
    dq_jobs *jobs = NULL;
    int64_t t0 = now_ns();
    logf_line(l, "invoke poll%s%s", NULL, NULL, 0);
    int rc = drain ? dq_poll(c, l->queue, 100, 0, &jobs, NULL)
                   : dq_poll_wait(c, l->queue, 4, 0, 200, &jobs);
    if (rc < 0) {
        logf_line(l, "%s poll %s%d", outcome(rc), "", rc);
        sleep_ms(50);
        return rc;
    }
    log_jobs(l, jobs);
    if (!drain)
        sleep_ms(l->work_ms);
    for (size_t i = 0; i < dq_jobs_count(jobs); i++)
        if (within_lease(l, dq_jobs_at(jobs, i), t0))
            ack_sync(l, c, dq_jobs_at(jobs, i));
    dq_jobs_free(jobs);
    return rc;
}

static int run_sync(struct load *l, dq_client *c)
{
    while (running(l))
        poll_sync(l, c, 0);
    return 0;
}

/* The queue is drained when nothing is scheduled, due or in flight. */
static int drained(dq_client *c, const char *queue)
{
    int64_t sched = -1, due = -1, infl = -1, dead = -1;
    if (dq_stats(c, queue, &sched, &due, &infl, &dead, NULL) < 0)
        return 0;
    return sched == 0 && due == 0 && infl == 0;
}

static int run_drain(struct load *l, dq_client *c)
{
    while (running(l)) {
        int n = poll_sync(l, c, 1);
        if (n == 0 && drained(c, l->queue))
            return 0;
        if (n == 0)
            sleep_ms(100);
    }
    fprintf(stderr, "dqload %s: queue not drained in time\n", l->proc);
    return 1;
}

/* ---- libevent consumer ------------------------------------------------ */

struct ev_state {
    struct load *l;
    struct event_base *base;
    dq_async *a;
    struct event *tick;
    int64_t polled_ns;
    size_t pending;
};

struct ev_ack {
    struct ev_state *s;
    char id[DQ_ID_BUF], token[DQ_TOKEN_BUF];
};

static void ev_next(struct ev_state *s, int64_t delay_ms)
{
    struct timeval tv = {(time_t)(delay_ms / 1000),
                         (suseconds_t)(delay_ms % 1000) * 1000};
    if (!running(s->l)) {
        event_base_loopbreak(s->base);
        return;
    }
    evtimer_add(s->tick, &tv);
}

static void ev_acked(dq_async *a, int status, void *ud)
{
    struct ev_ack *k = ud;
    struct ev_state *s = k->s;
    (void)a;
    fprintf(s->l->hist, "%" PRId64 " %s %s ack %s %s %d\n", now_ns(),
            s->l->proc, outcome(status), k->id, k->token, status);
    fflush(s->l->hist);
    free(k);
    if (--s->pending == 0)
        ev_next(s, 0);
}

static void ev_ack_one(struct ev_state *s, const dq_job *j)
{
    struct ev_ack *k = calloc(1, sizeof *k);
    if (!k)
        return;
    k->s = s;
    snprintf(k->id, sizeof k->id, "%s", dq_job_id(j));
    snprintf(k->token, sizeof k->token, "%s", dq_job_token(j));
    logf_line(s->l, "invoke ack %s %s", k->id, k->token, 0);
    s->pending++;
    if (dq_async_ack(s->a, s->l->queue, k->id, k->token, ev_acked, k) != 0) {
        s->pending--;
        free(k);
    }
}

static void ev_polled(dq_async *a, const dq_jobs *jobs, int64_t next_due,
                      int status, void *ud)
{
    struct ev_state *s = ud;
    (void)a;
    (void)next_due;
    if (status < 0) {
        logf_line(s->l, "%s poll %s%d", outcome(status), "", status);
        ev_next(s, 50);
        return;
    }
    log_jobs(s->l, jobs);
    if (status == 0) {
        ev_next(s, 20);
        return;
    }
    sleep_ms(s->l->work_ms); /* the handlers' work, before their acks */
    s->pending = 1;
    for (size_t i = 0; i < dq_jobs_count(jobs); i++)
        if (within_lease(s->l, dq_jobs_at(jobs, i), s->polled_ns))
            ev_ack_one(s, dq_jobs_at(jobs, i));
    if (--s->pending == 0)
        ev_next(s, 0);
}

static void ev_tick(evutil_socket_t fd, short what, void *ud)
{
    struct ev_state *s = ud;
    (void)fd;
    (void)what;
    if (!running(s->l)) {
        event_base_loopbreak(s->base);
        return;
    }
    s->polled_ns = now_ns();
    logf_line(s->l, "invoke poll%s%s", NULL, NULL, 0);
    int rc = dq_async_poll(s->a, s->l->queue, 4, 0, ev_polled, s);
    if (rc != 0) {
        logf_line(s->l, "%s poll %s%d", "fail", "", rc);
        ev_next(s, 50);
    }
}

static int run_event(struct load *l, const dq_options *o)
{
    struct ev_state s = {l, event_base_new(), NULL, NULL, 0, 0};
    if (!s.base)
        return 1;
    int rc = dq_async_open(s.base, l->uri, o, &s.a);
    if (rc == 0) {
        s.tick = evtimer_new(s.base, ev_tick, &s);
        ev_next(&s, 0);
        event_base_dispatch(s.base);
        event_free(s.tick);
    } else {
        fprintf(stderr, "dqload %s: %s\n", l->proc, dq_async_errmsg(s.a));
    }
    dq_async_free(s.a);
    event_base_free(s.base);
    return rc != 0;
}

/* ---- main ------------------------------------------------------------- */

static int run_sync_role(struct load *l, const dq_options *o)
{
    dq_client *c = NULL;
    int rc = dq_open(l->uri, o, &c);
    /* Open fails while the side has no primary: try again until the end. */
    while (rc != 0 && running(l)) {
        dq_close(c);
        c = NULL;
        sleep_ms(100);
        rc = dq_open(l->uri, o, &c);
    }
    if (rc == 0 && !strcmp(l->role, "producer"))
        rc = run_producer(l, c);
    else if (rc == 0 && !strcmp(l->role, "drain"))
        rc = run_drain(l, c);
    else if (rc == 0)
        rc = run_sync(l, c);
    else
        fprintf(stderr, "dqload %s: %s\n", l->proc, dq_errmsg(c));
    dq_close(c);
    return rc != 0;
}

static int parse(struct load *l, int argc, char **argv)
{
    if (argc < 7)
        return -1;
    l->role = argv[1];
    l->uri = argv[2];
    l->queue = argv[3];
    l->proc = argv[5];
    l->end_ns = now_ns() + strtoll(argv[6], NULL, 10) * 1000000;
    l->durable = argc > 7 && argv[7][0] == 'd';
    l->wait_replicas = argc > 7 ? atoi(argv[7] + l->durable) : 0;
    l->lease_ms = argc > 8 ? strtoll(argv[8], NULL, 10) : 3000;
    l->work_ms = argc > 9 ? strtoll(argv[9], NULL, 10) : 100;
    l->delays = argc > 10 ? strtoll(argv[10], NULL, 10) : 4;
    l->every_ms = argc > 11 ? strtoll(argv[11], NULL, 10) : 20;
    if (l->delays < 1 || l->every_ms < 1)
        return -1;
    l->hist = fopen(argv[4], "a");
    return l->hist ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct load l;
    if (parse(&l, argc, argv) != 0) {
        fprintf(stderr, "usage: dqload producer|sync|event|drain URI QUEUE "
                        "HISTORY PROC RUN_MS [WAIT [LEASE_MS [WORK_MS [DELAYS "
                        "[EVERY_MS]]]]]\n");
        return 2;
    }
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    signal(SIGPIPE, SIG_IGN);
    fprintf(l.hist, "# %s role %s\n", l.proc, l.role);
    dq_options *o = load_options(&l);
    if (!o)
        return 2;
    int rc = !strcmp(l.role, "event") ? run_event(&l, o)
                                       : run_sync_role(&l, o);
    dq_options_free(o);
    fclose(l.hist);
    return rc;
}
