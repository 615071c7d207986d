/*
 * consumer.c - what both consumer loops share (options, the retry policy,
 * dq_consumer_done) and the sync loop over dq_poll_wait.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer_int.h"
#include "ops.h"

/* ---- Shared ---- */

void dq__cons_init(dq_consumer *c, int mode, const char *queue,
                  dq_handler_fn *handler, void *ud) {
    c->mode = mode;
    snprintf(c->queue, sizeof(c->queue), "%s", queue);
    c->handler = handler;
    c->ud = ud;
    c->nq = 1;
    c->qs[0] = c->queue;
    c->weights[0] = 1;
    c->priority = DQ_PRIO_WEIGHTED;
    c->batch_qi = 0;
    c->concurrency = mode == CM_SYNC ? 1 : 10;
    c->lease_ms = 30000;
    c->extend = 1;
    c->backoff = DQ_BACKOFF_EXPONENTIAL;
    c->retry_base_ms = 1000;
    c->retry_max_ms = 300000;
    c->jitter = 20;
    c->rng = ((uint64_t)dq__mono_us() << 16) ^ (uint64_t)(uintptr_t)c ^
             0x9E3779B97F4A7C15ULL;
}

void dq__cons_free_queues(dq_consumer *c) {
    for (size_t i = 1; i < c->nq; i++)
        free((char *)c->qs[i]);
    c->nq = 1;
}

int dq_consumer_add_queue(dq_consumer *c, const char *queue, int weight) {
    if (c == NULL)
        return DQ_ENULL;
    if (c->started)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "queues are added before the consumer starts");
    int rc = dq__check_queue(queue, &c->err);
    if (rc != DQ_OK)
        return rc;
    if (weight < 1 || weight > DQ_WEIGHT_MAX)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "weight is %d; it must be 1..%d", weight,
                          DQ_WEIGHT_MAX);
    for (size_t i = 0; i < c->nq; i++)
        if (strcmp(c->qs[i], queue) == 0) {
            c->weights[i] = weight; /* served already: a new weight */
            return (int)i;
        }
    if (c->nq == DQ_MULTI_MAX)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "the consumer serves %d queues already (the "
                          "most, DQ_MULTI_MAX)",
                          DQ_MULTI_MAX);
    char *copy = strdup(queue);
    if (copy == NULL)
        return dq__err_set(&c->err, DQ_ENOMEM, "out of memory");
    c->qs[c->nq] = copy;
    c->weights[c->nq] = weight;
    return (int)c->nq++;
}

const char *dq_consumer_job_queue(const dq_consumer *c, const dq_job *job) {
    if (c == NULL || job == NULL)
        return NULL;
    for (const dq__delivery *d = c->list; d != NULL; d = d->next)
        if (d->job == job)
            return DQ__DQUEUE(d);
    /* sync: a job of the claim being handled (its outcome report) */
    for (size_t i = 0; c->batch != NULL && i < dq_jobs_count(c->batch); i++)
        if (dq_jobs_at(c->batch, i) == job)
            return c->qs[c->batch_qi];
    return NULL;
}

void dq__cons_link(dq_consumer *c, dq__delivery *d) {
    d->prev = NULL;
    d->next = c->list;
    if (c->list != NULL)
        c->list->prev = d;
    c->list = d;
}

void dq__cons_unlink(dq_consumer *c, dq__delivery *d) {
    if (d->prev != NULL)
        d->prev->next = d->next;
    else if (c->list == d)
        c->list = d->next;
    if (d->next != NULL)
        d->next->prev = d->prev;
    d->prev = d->next = NULL;
}

int dq__cons_outcome(int r) {
    return r == DQ_JOB_OK || r == DQ_JOB_FAIL || r == DQ_JOB_ASYNC
               ? r
               : DQ_JOB_RETRY;
}

int dq__cons_over_max(const dq_consumer *c, const dq_job *job) {
    return c->max_attempts > 0 && dq_job_attempt(job) > c->max_attempts;
}

int dq__cons_plan(dq_consumer *c, const dq_job *job, int outcome,
                 int64_t delay_ms, int64_t *delay, int *flags) {
    *delay = 0;
    *flags = 0;
    if (outcome == DQ_JOB_RETRY && c->max_attempts > 0 &&
        dq_job_attempt(job) >= c->max_attempts)
        outcome = DQ_JOB_FAIL;
    if (outcome == DQ_JOB_FAIL) {
        *flags = DQ_NACK_DEAD;
    } else if (outcome == DQ_JOB_RETRY && delay_ms >= 0) {
        *delay = delay_ms; /* the handler chose it */
    } else if (outcome == DQ_JOB_RETRY) {
        /* The consumer's own backoff, unless the queue has backoff
         * settings, which every consumer of the queue then follows. */
        *delay = dq_consumer_backoff_ms(c, dq_job_attempt(job));
        *flags = DQ_NACK_BACKOFF;
    }
    return outcome;
}

int dq__cons_plan_d(dq_consumer *c, dq__delivery *d, int outcome,
                   int64_t delay_ms, int64_t *delay, int *flags) {
    int applied = dq__cons_plan(c, d->job, outcome, delay_ms, delay, flags);
    if (applied == DQ_JOB_FAIL && outcome == DQ_JOB_RETRY && !d->has_reason &&
        d->fixed == NULL)
        d->fixed = DQ__WHY_MAX;
    return applied;
}

int dq__cons_reason(const dq__delivery *d, const void **r, size_t *len) {
    if (d->fixed != NULL) {
        *r = d->fixed;
        *len = strlen(d->fixed);
        return 1;
    }
    if (d->has_reason) {
        *r = d->reason;
        *len = d->reason_len;
        return 1;
    }
    *r = NULL;
    *len = 0;
    return 0;
}

void dq__cons_reason_clear(dq__delivery *d) {
    free(d->reason);
    d->reason = NULL;
    d->reason_len = 0;
    d->has_reason = 0;
    d->fixed = NULL;
}

/* The next number of the consumer's own generator (for the jitter). */
static uint64_t cons_rand(dq_consumer *c) {
    /* xorshift64* */
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 0x2545F4914F6CDD1DULL;
}

int64_t dq_consumer_backoff_ms(dq_consumer *c, int64_t attempt) {
    if (c == NULL)
        return 0;
    if (attempt < 1)
        attempt = 1;
    int64_t d = c->retry_base_ms;
    if (c->backoff == DQ_BACKOFF_EXPONENTIAL) {
        for (int64_t i = 1; i < attempt && d < c->retry_max_ms; i++)
            d *= 2;
        if (d > c->retry_max_ms)
            d = c->retry_max_ms;
    }
    if (c->jitter > 0 && d > 0) {
        uint64_t cut = (uint64_t)d * (uint64_t)c->jitter / 100;
        d -= (int64_t)(cons_rand(c) % (cut + 1));
    }
    return d;
}

int dq_consumer_set_int(dq_consumer *c, int option, int64_t v) {
    if (c == NULL)
        return DQ_ENULL;
    if (c->started)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "options are set before the consumer starts");
    int64_t lo = 0, hi = 0, *slot = NULL;
    switch (option) {
    case DQ_COPT_CONCURRENCY:
        slot = &c->concurrency, lo = 1, hi = 1000;
        break;
    case DQ_COPT_LEASE_MS:
        slot = &c->lease_ms, lo = DQ_LEASE_MIN, hi = DQ_LEASE_MAX;
        break;
    case DQ_COPT_EXTEND:
        slot = &c->extend, hi = 1;
        break;
    case DQ_COPT_RETRY_BACKOFF:
        slot = &c->backoff, lo = DQ_BACKOFF_FIXED, hi = DQ_BACKOFF_EXPONENTIAL;
        break;
    case DQ_COPT_RETRY_BASE_MS:
        slot = &c->retry_base_ms, hi = DQ_DELAY_MAX;
        break;
    case DQ_COPT_RETRY_MAX_MS:
        slot = &c->retry_max_ms, hi = DQ_DELAY_MAX;
        break;
    case DQ_COPT_RETRY_JITTER:
        slot = &c->jitter, hi = 100;
        break;
    case DQ_COPT_MAX_ATTEMPTS:
        slot = &c->max_attempts, hi = INT32_MAX;
        break;
    case DQ_COPT_HANDLER_TIMEOUT_MS:
        slot = &c->handler_timeout_ms, hi = DQ_DELAY_MAX;
        break;
    case DQ_COPT_PRIORITY:
        slot = &c->priority, lo = DQ_PRIO_STRICT, hi = DQ_PRIO_WEIGHTED;
        break;
    default:
        return dq__err_set(&c->err, DQ_EINVAL, "unknown consumer option %d",
                          option);
    }
    if (v < lo || v > hi)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "consumer option %d is %" PRId64
                          "; it must be %" PRId64 "..%" PRId64,
                          option, v, lo, hi);
    *slot = v;
    return DQ_OK;
}

int dq_consumer_set_outcome_cb(dq_consumer *c, dq_outcome_cb *cb,
                               void *userdata) {
    if (c == NULL)
        return DQ_ENULL;
    c->outcome_cb = cb;
    c->outcome_ud = userdata;
    return DQ_OK;
}

const char *dq_consumer_errmsg(const dq_consumer *c) {
    return c == NULL ? "consumer is NULL" : c->err.msg;
}

int dq_consumer_done(dq_consumer *c, const dq_job *job, int outcome,
                     int64_t delay_ms) {
    if (c == NULL || job == NULL)
        return DQ_ENULL;
    if (outcome != DQ_JOB_OK && outcome != DQ_JOB_RETRY &&
        outcome != DQ_JOB_FAIL)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "outcome is %d; use DQ_JOB_OK, DQ_JOB_RETRY or "
                          "DQ_JOB_FAIL",
                          outcome);
    if (delay_ms < -1 || delay_ms > DQ_DELAY_MAX)
        return dq__err_set(&c->err, DQ_EDELAY,
                          "delay_ms is %" PRId64 "; use -1 or 0..%" PRId64,
                          delay_ms, (int64_t)DQ_DELAY_MAX);
    dq__delivery *d = c->list;
    while (d != NULL && d->job != job)
        d = d->next;
    if (d == NULL || d->state == D_FINISHING || d->state == D_ENDED ||
        d->late_done)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "dq_consumer_done: that job is not running on "
                          "this consumer (finished already?)");
    return c->finish(c, d, outcome, delay_ms);
}

int dq_consumer_set_reason(dq_consumer *c, const dq_job *job,
                           const void *reason, size_t len) {
    if (c == NULL || job == NULL || (reason == NULL && len > 0))
        return DQ_ENULL;
    if (len > DQ_REASON_MAX)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "dq_consumer_set_reason: the reason has %zu "
                          "bytes; at most %d",
                          len, DQ_REASON_MAX);
    dq__delivery *d = c->list;
    while (d != NULL && d->job != job)
        d = d->next;
    if (d != NULL && (d->state == D_RELEASING || d->state == D_ABANDONED) &&
        !d->late_done)
        return dq__err_set(&c->err, DQ_ESTALE,
                          "dq_consumer_set_reason: the consumer gave this "
                          "job up already (handler timeout or stop)");
    if (d == NULL || d->state != D_RUNNING || d->done_called)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "dq_consumer_set_reason: that job is not running "
                          "on this consumer (finished already?)");
    void *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL)
        return dq__err_set(&c->err, DQ_ENOMEM, "out of memory");
    if (len > 0)
        memcpy(copy, reason, len);
    free(d->reason);
    d->reason = copy;
    d->reason_len = len;
    d->has_reason = 1;
    return DQ_OK;
}

void dq_consumer_free(dq_consumer *c) {
    if (c == NULL || c->dead)
        return;
    c->destroy(c);
}

/* ---- Sync consumer ---- */

/* dq_consumer_done from inside a sync handler: records the outcome (once)
 * for sync_handle to apply. */
static int sync_finish(dq_consumer *c, dq__delivery *d, int outcome,
                       int64_t delay_ms) {
    if (!c->in_handler || d->done_called)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "dq_consumer_done: a sync consumer's job is "
                          "finished once, before its handler returns");
    d->done_called = 1;
    d->outcome = outcome;
    d->delay_ms = delay_ms;
    return DQ_OK;
}

/* Frees the consumer, or, while dq_consumer_run runs it, marks it dead for
 * the run to free when it returns. */
static void sync_destroy(dq_consumer *c) {
    c->dead = 1;
    c->interrupted = 1;
    if (!c->in_handler && !c->started) {
        dq__cons_free_queues(c);
        free(c);
    }
    /* else dq_consumer_run frees it when it returns */
}

int dq_consumer_new_sync(dq_client *client, const char *queue,
                         dq_handler_fn *handler, void *userdata,
                         dq_consumer **out) {
    if (out == NULL)
        return DQ_ENULL;
    *out = NULL;
    if (client == NULL || handler == NULL)
        return DQ_ENULL;
    int rc = dq__check_queue(queue, NULL);
    if (rc != DQ_OK)
        return rc;
    dq_consumer *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return DQ_ENOMEM;
    dq__cons_init(c, CM_SYNC, queue, handler, userdata);
    c->client = client;
    c->finish = sync_finish;
    c->destroy = sync_destroy;
    *out = c;
    return DQ_OK;
}

void dq_consumer_interrupt(dq_consumer *c) {
    if (c != NULL)
        c->interrupted = 1;
}

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Runs nack for a finished job, or ack when it is not held for a batch
 * (sync_flush); retries a few times after an I/O error (the client
 * reconnects on the next call).  A retried ack answers for itself: 0 when
 * the lost one landed (the job's done record holds our token), DQ_ESTALE
 * when another holder finished it. */
static int sync_apply(dq_consumer *c, dq__delivery *d, int *outcome,
                      int64_t delay_ms) {
    const dq_job *job = d->job;
    int64_t delay;
    int flags;
    *outcome = dq__cons_plan_d(c, d, *outcome, delay_ms, &delay, &flags);
    const void *why = NULL;
    size_t wlen = 0;
    int with_reason = *outcome != DQ_JOB_OK && dq__cons_reason(d, &why, &wlen);
    int rc = 0;
    for (int tries = 0; tries < 5; tries++) {
        if (tries > 0)
            sleep_ms(50 << tries);
        const char *q = c->qs[c->batch_qi]; /* the claim's queue */
        if (*outcome == DQ_JOB_OK)
            rc = dq_ack(c->client, q, dq_job_id(job), dq_job_token(job));
        else if (with_reason)
            rc = dq_nack_reason(c->client, q, dq_job_id(job),
                                dq_job_token(job), delay, flags, why, wlen);
        else
            rc = dq_nack(c->client, q, dq_job_id(job), dq_job_token(job),
                         delay, flags);
        if (rc != DQ_EIO && rc != DQ_ETIMEDOUT)
            break;
    }
    if (rc == 1) { /* nack: dead-lettered by the server's max attempts */
        *outcome = DQ_JOB_FAIL;
        rc = 0;
    }
    if (rc < 0)
        dq__err_set(&c->err, rc, "%s of job '%.200s': %s",
                   *outcome == DQ_JOB_OK ? "ack" : "nack", dq_job_id(job),
                   dq_errmsg(c->client));
    return rc;
}

/* Reports a finished job to the outcome callback, if any. */
static void sync_report(dq_consumer *c, const dq_job *job, int outcome,
                        int status) {
    if (c->outcome_cb != NULL) {
        c->in_handler = 1; /* a free inside is deferred to the loop */
        c->outcome_cb(c, job, outcome, status, c->outcome_ud);
        c->in_handler = 0;
    }
}

/* The longest an ack is held for the batch while the handlers of the jobs
 * after it run (see sync_hold_over): quick handlers share one ack call,
 * a slow one does not keep finished jobs from being acked. */
#define SYNC_HOLD_US 5000

/* Jobs of one claimed batch whose handler succeeded, acked together with
 * one dq_ack_batch (sync_flush) instead of one dq_ack each.  Their acks go
 * out before the next poll, before the rest of the batch is released at a
 * stop, and before the next handler once they were held SYNC_HOLD_US or
 * half the lease has passed since the claim.  cap 0 (no memory for the
 * arrays): every ack goes out at once, as dq_ack. */
typedef struct sync_acks {
    size_t n, cap;
    const dq_job **jobs;
    const char **ids, **toks;
    int *res;
    int64_t claimed_us; /* dq__mono_us when the poll of the batch returned */
    int64_t first_us;   /* when the first of the n finished */
} sync_acks;

static void sync_acks_init(sync_acks *a, size_t cap) {
    memset(a, 0, sizeof(*a));
    a->jobs = malloc(cap * sizeof(*a->jobs));
    a->ids = malloc(cap * sizeof(*a->ids));
    a->toks = malloc(cap * sizeof(*a->toks));
    a->res = malloc(cap * sizeof(*a->res));
    if (a->jobs != NULL && a->ids != NULL && a->toks != NULL &&
        a->res != NULL)
        a->cap = cap;
}

static void sync_acks_free(sync_acks *a) {
    free(a->jobs);
    free(a->ids);
    free(a->toks);
    free(a->res);
    memset(a, 0, sizeof(*a));
}

/* Whether the held acks must go out before another handler runs: held
 * long enough, or the leases they were claimed under half gone (a slow
 * handler next could otherwise let them run out before their ack). */
static int sync_hold_over(const dq_consumer *c, const sync_acks *a) {
    if (a->n == 0)
        return 0;
    int64_t now = dq__mono_us();
    return now - a->first_us >= SYNC_HOLD_US ||
           now - a->claimed_us >= c->lease_ms * 500;
}

/* Acks the held jobs in one dq_ack_batch (retried after an I/O error as
 * sync_apply retries an ack: a retried ack answers for itself), then
 * reports each with its own result. */
static void sync_flush(dq_consumer *c, sync_acks *a) {
    if (a->n == 0)
        return;
    int rc = 0;
    for (int tries = 0; tries < 5; tries++) {
        if (tries > 0)
            sleep_ms(50 << tries);
        rc = dq_ack_batch(c->client, c->qs[c->batch_qi], a->n, a->ids,
                          a->toks, a->res);
        if (rc != DQ_EIO && rc != DQ_ETIMEDOUT)
            break;
    }
    char why[sizeof(c->err.msg)];
    snprintf(why, sizeof(why), "%s",
             rc < 0 ? dq_errmsg(c->client) : ""); /* before any report */
    size_t n = a->n;
    a->n = 0; /* a report may stop the loop: nothing is held any more */
    /* A report that frees the consumer ends the reports, as it ends them
     * when each job is acked on its own; a free from a handler before
     * (which stops the loop) does not: those jobs were finished first. */
    int dead = c->dead;
    for (size_t i = 0; i < n; i++) {
        int st = rc < 0 ? rc : a->res[i];
        if (st < 0)
            dq__err_set(&c->err, st, "ack of job '%.200s': %s",
                       a->ids[i],
                       rc < 0 ? why : dq_strerror(st));
        if (c->dead == dead)
            sync_report(c, a->jobs[i], DQ_JOB_OK, st);
    }
}

/* Runs the handler for one job and applies its outcome: a success is held
 * in a for the batch ack, a retry or failure is nacked at once. */
static void sync_handle(dq_consumer *c, const dq_job *job, sync_acks *a) {
    dq__delivery d;
    memset(&d, 0, sizeof(d));
    d.c = c;
    d.qi = c->batch_qi;
    d.job = (dq_job *)job;
    d.state = D_RUNNING;
    int outcome;
    int64_t delay_ms = -1;
    if (dq__cons_over_max(c, job)) {
        outcome = DQ_JOB_FAIL;
        d.fixed = DQ__WHY_MAX;
    } else {
        dq__cons_link(c, &d);
        c->in_handler = 1;
        int r = c->handler(c, job, c->ud);
        c->in_handler = 0;
        dq__cons_unlink(c, &d);
        if (d.done_called) {
            outcome = d.outcome;
            delay_ms = d.delay_ms;
        } else {
            outcome = dq__cons_outcome(r);
            if (outcome == DQ_JOB_ASYNC)
                outcome = DQ_JOB_RETRY; /* nobody will finish it later */
        }
    }
    if (outcome == DQ_JOB_OK && a->n < a->cap) {
        if (a->n == 0)
            a->first_us = dq__mono_us();
        a->jobs[a->n] = job;
        a->ids[a->n] = dq_job_id(job);
        a->toks[a->n] = dq_job_token(job);
        a->n++;
        dq__cons_reason_clear(&d); /* a success records none */
        return;
    }
    int rc = sync_apply(c, &d, &outcome, delay_ms);
    dq__cons_reason_clear(&d);
    sync_report(c, job, outcome, rc);
}

int dq_consumer_run(dq_consumer *c) {
    if (c == NULL)
        return DQ_ENULL;
    if (c->mode != CM_SYNC || c->started)
        return dq__err_set(&c->err, DQ_EINVAL,
                          c->mode != CM_SYNC
                              ? "dq_consumer_run is for sync consumers"
                              : "the consumer is already running");
    c->started = 1;
    int released = 0;
    int64_t backoff = 50;
    sync_acks acks;
    sync_acks_init(&acks, (size_t)c->concurrency);
    while (!c->interrupted && !c->dead) {
        dq_jobs *jobs = NULL;
        /* As many jobs as the consumer takes at a time, of one of its
         * queues; the acks of the last batch went out before this poll
         * (sync_flush below). */
        int qi = -1;
        int n = dq_poll_wait_multi(c->client, c->nq, c->qs, c->weights,
                                   (int)c->priority, (int)c->concurrency,
                                   c->lease_ms, 1000, &jobs, &qi);
        if (n < 0) {
            dq__err_set(&c->err, n, "poll: %s", dq_errmsg(c->client));
            for (int64_t t = 0; t < backoff && !c->interrupted; t += 50)
                sleep_ms(50);
            backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
            continue;
        }
        backoff = 50;
        acks.claimed_us = dq__mono_us();
        c->batch = jobs;
        c->batch_qi = qi >= 0 ? qi : 0;
        for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
            const dq_job *job = dq_jobs_at(jobs, i);
            if (sync_hold_over(c, &acks))
                sync_flush(c, &acks); /* its reports may stop the loop */
            if (c->interrupted || c->dead) {
                /* Stopping: the finished jobs are acked, the rest given
                 * back at once. */
                sync_flush(c, &acks);
                if (dq_nack(c->client, c->qs[c->batch_qi], dq_job_id(job),
                            dq_job_token(job), 0, 0) >= 0)
                    released++;
                continue;
            }
            sync_handle(c, job, &acks);
        }
        sync_flush(c, &acks);
        c->batch = NULL;
        dq_jobs_free(jobs);
    }
    sync_acks_free(&acks);
    c->started = 0;
    if (c->dead) {
        dq__cons_free_queues(c);
        free(c);
    }
    return released;
}
