/*
 * aconsumer.c - the consumer on a libevent loop, built on the public async
 * operations (poll, ack, nack, extend) plus a watch (async.c) for wake-ups.
 *
 * Scheduling.  One poll at a time claims up to the free slots.  When it
 * claims nothing more, the server says how long until the next job is due
 * (microseconds, from its own clock); the consumer sleeps exactly that long
 * on its monotonic clock, measured from the middle of the poll's round trip
 * (about when the script ran), capped at DQ_OPT_WAIT_CAP_MS.  A message on
 * the queue's wake channel (published by a push that made a job the
 * earliest) cuts the sleep short.  On Linux the sleep is a timerfd watched
 * by the base, so it is as precise as the kernel's timers whatever the
 * base's own timer settings; elsewhere a libevent timer is used and an
 * early expiry (coarse clocks) is simply re-armed.
 *
 * Acks.  A job whose handler succeeded is acked in a batch: the jobs that
 * finish in one turn of the loop, or while an earlier batch is out, go
 * together in one dq_async_ack_batch per partition (one script call of at
 * most DQ_CHUNK jobs each, so each batch is all or nothing, like a single
 * ack), and each job still gets its own result (0, DQ_ESTALE,
 * DQ_ENOTFOUND, or the batch's error) and its own outcome report.  A
 * job gives its slot back when its ack is sent, not when it is answered:
 * the next poll goes out with the acks instead of one round trip later.
 * The jobs whose acks are out are at most the last batch, so the consumer
 * holds at most twice its concurrency in leases.  A graceful stop waits
 * for the answers.  Nacks (retries, failures, releases) are single calls
 * and hold their slot until answered.
 *
 * Lifetimes.  Every operation the consumer starts carries the consumer as
 * owner: when it is freed they complete silently (dq__async_forget).  Its
 * memory, its deliveries and its watch go through dq__async_bury, so code
 * that ran a user callback can look at them afterwards.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/timerfd.h>
#endif

#include <event2/event.h>

#include "async_int.h"
#include "consumer_int.h"
#include "ops.h"

typedef struct acons {
    dq__child child;            /* in the client's children: first member */
    dq_consumer *c;            /* the consumer */
    dq__watch **watches;        /* wake-up subscriptions: one per
                                   partition of the queue (one if plain) */
    int nwatches;
    struct event *timer_ev;    /* sleep: timerfd read event or a timer */
    int tfd;                   /* timerfd, -1 if none */
    int64_t target_us;         /* when the sleep ends (0 = not sleeping) */
    int capped;                /* the sleep is the idle cap */
    int polling;               /* a poll is outstanding */
    int poll_qi;               /* of which queue (index in c->qs) */
    unsigned char skip[DQ_MULTI_MAX]; /* several queues: polled since the
                                         last jobs or sleep, none found */
    int poll_again;            /* a wake-up came during that poll */
    int saturated;             /* the last poll filled every free slot */
    int requested;             /* max of the outstanding poll */
    int64_t poll_sent_us;      /* when it was sent */
    int64_t err_backoff_ms;    /* delay after a failed poll */
    size_t active;             /* deliveries holding a slot */
    int stopping, stopped;     /* graceful stop */
    struct event *stop_ev;     /* its deadline */
    dq_stopped_cb *stopped_cb; /* its callback */
    void *stopped_ud;          /* its userdata */
    int released;              /* jobs released unfinished */
    /* acks in batches (see "Acks" above) */
    dq__delivery **ackq;       /* finished (DQ_JOB_OK), ack not sent yet */
    size_t nackq, ackq_cap;
    int acks_out;              /* ack batch calls not answered yet */
    size_t acking;             /* deliveries whose ack is sent or queued
                                  again after holding their slot */
    struct ackbatch *batches;  /* the calls out (freed with the consumer) */
    struct event *flush_ev;    /* sends the queued acks later in this
                                  turn of the loop */
    int flush_armed;           /* flush_ev is active */
} acons;

/* One ack batch call: its deliveries, in the order of its ids. */
typedef struct ackbatch {
    struct ackbatch *prev, *next; /* in the consumer's batches */
    acons *s;
    int rc;                       /* the send's result */
    size_t n;
    dq__delivery *d[];
} ackbatch;

static void kick(acons *s);
static void send_completion(acons *s, dq__delivery *d);
static void send_single(acons *s, dq__delivery *d);
static void ack_queue(acons *s, dq__delivery *d);
static void on_stop_deadline(evutil_socket_t fd, short what, void *arg);

/* ---- Sleep timer ---- */

/* Sleeps until target_us (monotonic); capped: the sleep is the idle cap. */
static void timer_set(acons *s, int64_t target_us, int capped) {
    s->target_us = target_us;
    s->capped = capped;
#ifdef __linux__
    if (s->tfd >= 0) {
        struct itimerspec its;
        memset(&its, 0, sizeof(its));
        its.it_value.tv_sec = (time_t)(target_us / 1000000);
        its.it_value.tv_nsec = (long)(target_us % 1000000) * 1000;
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1; /* 0 would disarm */
        timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL);
        return;
    }
#endif
    int64_t us = target_us - dq__mono_us();
    if (us < 0)
        us = 0;
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
    evtimer_add(s->timer_ev, &tv);
}

/* Cancels the sleep, if any. */
static void timer_clear(acons *s) {
    if (s->target_us == 0)
        return;
    s->target_us = 0;
#ifdef __linux__
    if (s->tfd >= 0) {
        struct itimerspec its;
        memset(&its, 0, sizeof(its));
        timerfd_settime(s->tfd, 0, &its, NULL);
        return;
    }
#endif
    evtimer_del(s->timer_ev);
}

/* The sleep ended: re-armed if it woke early, else a poll (after an idle
 * cap, the subscriber is checked too). */
static void on_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    acons *s = arg;
    dq_consumer *c = s->c;
    dq_async *a = c->a;
    if (s->tfd >= 0) {
        uint64_t n;
        if (read(s->tfd, &n, sizeof(n)) < 0 && errno != EAGAIN) {
            /* nothing to do: the time check below decides */
        }
    }
    dq__async_enter(a);
    if (!c->dead && s->target_us != 0) {
        if (dq__mono_us() + 100 < s->target_us) {
            timer_set(s, s->target_us, s->capped); /* woke early */
        } else {
            int capped = s->capped;
            s->target_us = 0;
            if (capped) {
                /* idle: check the subscribers, and let the poll visit
                 * every partition once (a lost wake-up is made up for) */
                for (int i = 0; i < s->nwatches; i++)
                    dq__watch_check(s->watches[i]);
                for (size_t i = 0; i < c->nq; i++)
                    dq__async_woken_all(a, c->qs[i]);
            }
            kick(s);
        }
    }
    dq__async_leave(a);
}

/* ---- Deliveries ---- */

/* Frees d's lease-extend and handler-timeout timers. */
static void timers_clear(dq__delivery *d) {
    if (d->extend_ev != NULL)
        event_free(d->extend_ev);
    if (d->timeout_ev != NULL)
        event_free(d->timeout_ev);
    d->extend_ev = d->timeout_ev = NULL;
}

/* Frees a delivery with its timers and its copy of the job. */
static void delivery_free(void *p) {
    dq__delivery *d = p;
    timers_clear(d);
    dq__cons_reason_clear(d);
    dq_job_free(d->job);
    free(d);
}

/* Frees d once no operation refers to it any more. */
static void delivery_release(acons *s, dq__delivery *d) {
    d->state = D_ENDED;
    if (d->ops == 0)
        dq__async_bury(s->c->a, delivery_free, d);
}

static void arm_ms(struct event *ev, int64_t ms) {
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(ev, &tv);
}

/* Ends a graceful stop once no job holds a slot, no ack is unanswered and
 * no poll is out, and calls the stopped callback. */
static void check_stopped(acons *s) {
    if (!s->stopping || s->stopped || s->active > 0 || s->acking > 0 ||
        s->polling)
        return;
    s->stopped = 1;
    if (s->stop_ev != NULL)
        evtimer_del(s->stop_ev);
    if (s->stopped_cb != NULL)
        s->stopped_cb(s->c, s->released, s->stopped_ud); /* last */
}

/* A delivery gave its slot back. */
static void slot_freed(acons *s) {
    s->active--;
    if (s->stopping)
        check_stopped(s);
    else if (s->saturated)
        kick(s);
}

/* The ack/nack of d is done (status: its result; msg: the message of a
 * failure, NULL when c->err holds it already).  Gives d's slot back if it
 * still holds one. */
static void completed(acons *s, dq__delivery *d, int status,
                      const char *msg) {
    dq_consumer *c = s->c;
    int outcome = d->outcome;
    if (status == 1) { /* nack: dead-lettered (max attempts) */
        outcome = DQ_JOB_FAIL;
        status = 0;
    } else if (status > 0) {
        status = 0;
    }
    if (status < 0 && msg != NULL) /* it names the op and the job */
        dq__err_set(&c->err, status, "%s", msg);
    int releasing = d->state == D_RELEASING;
    int slot = d->slot;
    d->slot = 0;
    if (c->outcome_cb != NULL) {
        c->outcome_cb(c, d->job, outcome, status, c->outcome_ud);
        if (c->dead)
            return;
    }
    if (releasing && !d->late_done) {
        d->state = D_ABANDONED; /* kept for the handler's late done */
    } else {
        dq__cons_unlink(c, d);
        delivery_release(s, d);
    }
    if (slot) {
        slot_freed(s);
    } else { /* an ack sent in a batch: its slot went back then */
        s->acking--;
        check_stopped(s);
    }
}

/* Reply to an ack/nack: one lost with the connection is sent again (unless
 * stopping, up to 20 tries); else d is completed. */
static void on_completed(dq_async *a, int status, void *ud) {
    dq__delivery *d = ud;
    acons *s = d->c->as;
    d->ops--;
    /* The reply was lost with the connection: send it again once the
     * client has reconnected (a lease outlives a short outage). */
    if ((status == DQ_EIO || status == DQ_ETIMEDOUT) && d->tries < 20 &&
        !s->stopping) {
        send_completion(s, d);
        return;
    }
    /* A retried ack answers for itself: 0 when the lost one landed (the
     * job's done record holds our token), DQ_ESTALE when another holder
     * finished it, DQ_ENOTFOUND when nothing says who did. */
    completed(s, d, status, dq_async_errmsg(a));
}

/* Sends d's ack (DQ_JOB_OK: queued for the next batch) or nack, as its
 * outcome says. */
static void send_completion(acons *s, dq__delivery *d) {
    if (d->outcome == DQ_JOB_OK)
        ack_queue(s, d);
    else
        send_single(s, d);
}

/* Sends d's ack or nack in a call of its own; a send that fails at once
 * completes d with the error. */
static void send_single(acons *s, dq__delivery *d) {
    dq_consumer *c = s->c;
    dq_async *a = c->a;
    int rc;
    const void *why;
    size_t wlen;
    d->tries++;
    dq__async_set_owner(a, c);
    if (d->outcome == DQ_JOB_OK)
        rc = dq_async_ack(a, DQ__DQUEUE(d), dq_job_id(d->job),
                          dq_job_token(d->job),
                          on_completed, d);
    else if (dq__cons_reason(d, &why, &wlen))
        rc = dq_async_nack_reason(a, DQ__DQUEUE(d), dq_job_id(d->job),
                                  dq_job_token(d->job), d->delay_ms,
                                  d->nack_flags, why, wlen, on_completed, d);
    else
        rc = dq_async_nack(a, DQ__DQUEUE(d), dq_job_id(d->job),
                           dq_job_token(d->job), d->delay_ms, d->nack_flags,
                           on_completed, d);
    dq__async_set_owner(a, NULL);
    if (rc < 0)
        completed(s, d, rc, dq_async_errmsg(a));
    else
        d->ops++;
}

/* ---- Acks in batches ---- */

static void flush_acks(acons *s);

/* Runs flush_acks later in this turn of the loop (after the reply or
 * timer being handled, and whatever else is ready now). */
static void on_flush(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    acons *s = arg;
    dq_async *a = s->c->a;
    s->flush_armed = 0;
    dq__async_enter(a);
    if (!s->c->dead)
        flush_acks(s);
    dq__async_leave(a);
}

/* Sends the queued acks now unless a batch is out (its answer does), or
 * later in this turn, so the jobs finishing in it go together. */
static void schedule_flush(acons *s) {
    if (s->acks_out > 0 || s->nackq == 0 || s->flush_armed)
        return;
    if (s->flush_ev == NULL)
        s->flush_ev = event_new(dq__async_base(s->c->a), -1, 0, on_flush, s);
    if (s->flush_ev == NULL) { /* out of memory: at once */
        flush_acks(s);
        return;
    }
    s->flush_armed = 1;
    event_active(s->flush_ev, EV_TIMEOUT, 1);
}

/* Queues d's ack for the next batch (out of memory: sent alone). */
static void ack_queue(acons *s, dq__delivery *d) {
    if (s->nackq == s->ackq_cap) {
        size_t cap = s->ackq_cap == 0 ? 64 : s->ackq_cap * 2;
        dq__delivery **q = realloc(s->ackq, cap * sizeof(*q));
        if (q == NULL) {
            send_single(s, d);
            return;
        }
        s->ackq = q;
        s->ackq_cap = cap;
    }
    s->ackq[s->nackq++] = d;
    schedule_flush(s);
}

/* A queued ack: its queue, partition, id and place in the queue. */
typedef struct ackent {
    int qi;
    int part;
    size_t idx;
    const char *id;
} ackent;

/* By queue, partition, then id (a job delivered twice, e.g. after its
 * lease ran out, may be queued twice), then place. */
static int ackent_cmp(const void *x, const void *y) {
    const ackent *a = x, *b = y;
    if (a->qi != b->qi)
        return a->qi < b->qi ? -1 : 1;
    if (a->part != b->part)
        return a->part < b->part ? -1 : 1;
    int r = strcmp(a->id, b->id);
    if (r != 0)
        return r;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* The answer to one batch: each job gets its own result.  The acks that
 * were lost with the connection are queued again (unless stopping, up to
 * 20 tries): a retried ack answers 0 when the lost one landed. */
static void on_acked(dq_async *a, size_t n, const int *results, int status,
                     void *ud) {
    ackbatch *b = ud;
    acons *s = b->s;
    dq_consumer *c = s->c;
    if (b->prev != NULL)
        b->prev->next = b->next;
    else
        s->batches = b->next;
    if (b->next != NULL)
        b->next->prev = b->prev;
    s->acks_out--;
    char msg[sizeof(c->err.msg)];
    if (status < 0) /* kept: the reports below may make other calls */
        snprintf(msg, sizeof(msg), "%s", dq_async_errmsg(a));
    int lost = (status == DQ_EIO || status == DQ_ETIMEDOUT) && !s->stopping;
    for (size_t i = 0; i < b->n; i++)
        b->d[i]->ops--;
    for (size_t i = 0; i < b->n && !c->dead; i++) {
        dq__delivery *d = b->d[i];
        if (lost && d->tries < 20) {
            ack_queue(s, d);
        } else if (status < 0 || results == NULL || i >= n) {
            completed(s, d, status < 0 ? status : DQ_EPROTO,
                      status < 0 ? msg : "ack: unexpected reply");
        } else if (results[i] == 0) {
            completed(s, d, 0, NULL);
        } else {
            int rc = dq__result_code(results[i], "ack", dq_job_id(d->job),
                                     &c->err);
            completed(s, d, rc, NULL);
        }
    }
    free(b);
    if (!c->dead)
        schedule_flush(s);
}

/* Sends the queued acks: one batch call per queue and partition, of at most
 * DQ_CHUNK jobs, each id once (a second delivery of an id waits for the
 * next batch: a script call answers a repeated id DQ_ENOTFOUND).  The
 * jobs sent give their slots back, which may poll. */
static void flush_acks(acons *s) {
    dq_consumer *c = s->c;
    dq_async *a = c->a;
    if (s->acks_out > 0 || s->nackq == 0)
        return;
    size_t n = s->nackq;
    int parts = dq__async_partitions(a);
    ackent *e = malloc(n * sizeof(*e));
    const char **ids = malloc(2 * n * sizeof(*ids));
    dq__delivery **alone = malloc(n * sizeof(*alone));
    unsigned char *take = calloc(n, 1); /* 1: in a batch, 2: alone */
    if (e == NULL || ids == NULL || alone == NULL || take == NULL) {
        free(e);
        free(ids);
        free(alone);
        free(take);
        /* out of memory: each alone */
        dq__delivery **q = s->ackq;
        s->ackq = NULL;
        s->nackq = s->ackq_cap = 0;
        for (size_t i = 0; i < n && !c->dead; i++)
            send_single(s, q[i]);
        free(q);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        e[i].id = dq_job_id(s->ackq[i]->job);
        e[i].qi = s->ackq[i]->qi;
        e[i].part = parts > 1 ? dq__part_of(e[i].id, parts) : 0;
        e[i].idx = i;
    }
    if (n > 1)
        qsort(e, n, sizeof(*e), ackent_cmp);
    /* One batch per run of a queue's partition. */
    ackbatch *list = NULL;
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo; hi < n && e[hi].part == e[lo].part && e[hi].qi == e[lo].qi;
             hi++) {
        }
        size_t cap = hi - lo < DQ_CHUNK ? hi - lo : DQ_CHUNK;
        ackbatch *b = malloc(sizeof(*b) + cap * sizeof(b->d[0]));
        size_t m = 0;
        for (size_t k = lo; k < hi && m < cap; k++) {
            if (k > lo && strcmp(e[k].id, e[k - 1].id) == 0)
                continue; /* the same id: next batch */
            take[e[k].idx] = b != NULL ? 1 : 2; /* out of memory: alone */
            if (b != NULL)
                b->d[m] = s->ackq[e[k].idx];
            m++;
        }
        if (b != NULL) {
            b->s = s;
            b->n = m;
            b->next = list;
            list = b;
        }
    }
    free(e);
    /* The rest stays queued, in order; the ones sent give their slots
     * back. */
    size_t nalone = 0, keep = 0, freed = 0;
    for (size_t i = 0; i < n; i++) {
        dq__delivery *d = s->ackq[i];
        if (take[i] == 0) {
            s->ackq[keep++] = d;
            continue;
        }
        if (d->slot) {
            d->slot = 0;
            s->active--;
            s->acking++;
            freed++;
        }
        if (take[i] == 2)
            alone[nalone++] = d;
    }
    s->nackq = keep;
    free(take);
    /* Send.  A call that cannot be made completes its jobs with the error,
     * once every call went out (the reports may free the consumer). */
    ackbatch *failed = NULL;
    char fmsg[sizeof(c->err.msg)] = "";
    while (list != NULL) {
        ackbatch *b = list;
        list = b->next;
        for (size_t k = 0; k < b->n; k++) {
            ids[k] = dq_job_id(b->d[k]->job);
            ids[n + k] = dq_job_token(b->d[k]->job);
            b->d[k]->tries++;
        }
        dq__async_set_owner(a, c);
        b->rc = dq_async_ack_batch(a, DQ__DQUEUE(b->d[0]), b->n, ids, ids + n,
                                   on_acked, b);
        dq__async_set_owner(a, NULL);
        if (b->rc < 0) {
            snprintf(fmsg, sizeof(fmsg), "%s", dq_async_errmsg(a));
            b->next = failed;
            failed = b;
            continue;
        }
        for (size_t k = 0; k < b->n; k++)
            b->d[k]->ops++;
        b->prev = NULL;
        b->next = s->batches;
        if (s->batches != NULL)
            s->batches->prev = b;
        s->batches = b;
        s->acks_out++;
    }
    free(ids);
    for (size_t k = 0; k < nalone && !c->dead; k++)
        send_single(s, alone[k]);
    free(alone);
    while (failed != NULL) {
        ackbatch *b = failed;
        failed = b->next;
        for (size_t k = 0; k < b->n && !c->dead; k++)
            completed(s, b->d[k], b->rc, fmsg);
        free(b);
    }
    if (c->dead)
        return;
    if (freed > 0) { /* as slot_freed, once for them all */
        if (s->stopping)
            check_stopped(s);
        else if (s->saturated)
            kick(s);
    }
    schedule_flush(s); /* what waited (a repeated id, a full batch) */
}

/* Applies a handler's outcome to a running delivery. */
static void finish_apply(acons *s, dq__delivery *d, int outcome,
                         int64_t delay_ms) {
    int64_t delay;
    int flags;
    timers_clear(d);
    d->outcome = dq__cons_plan_d(s->c, d, outcome, delay_ms, &delay, &flags);
    d->delay_ms = delay;
    d->nack_flags = flags;
    d->state = D_FINISHING;
    send_completion(s, d);
}

/* Gives a running job back: after a handler timeout (policy backoff, may
 * dead-letter) or at a stop deadline (at once, never dead-letters). */
static void release(acons *s, dq__delivery *d, int at_stop) {
    timers_clear(d);
    if (at_stop) {
        d->outcome = DQ_JOB_RETRY;
        d->delay_ms = 0;
        d->nack_flags = 0;
        dq__cons_reason_clear(d); /* no failure: nothing recorded */
        s->released++;
    } else {
        int64_t delay;
        int flags;
        d->fixed = DQ__WHY_TIMEOUT;
        d->outcome = dq__cons_plan_d(s->c, d, DQ_JOB_RETRY, -1, &delay,
                                    &flags);
        d->delay_ms = delay;
        d->nack_flags = flags;
    }
    d->state = D_RELEASING;
    send_completion(s, d);
}

/* The extend's reply callback, defined after the timer that sends it. */
static void on_extended(dq_async *a, int64_t deadline_ms, int status,
                        void *ud);

/* Time to extend a running job's lease; a send that fails is tried again
 * soon. */
static void on_extend_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__delivery *d = arg;
    dq_consumer *c = d->c;
    dq_async *a = c->a;
    dq__async_enter(a);
    if (d->state == D_RUNNING && !c->dead && !d->lost) {
        dq__async_set_owner(a, c);
        int rc = dq_async_extend(a, DQ__DQUEUE(d), dq_job_id(d->job),
                                 dq_job_token(d->job), c->lease_ms,
                                 on_extended, d);
        dq__async_set_owner(a, NULL);
        if (rc == DQ_OK)
            d->ops++;
        else
            arm_ms(d->extend_ev, c->lease_ms / 8 + 10);
    }
    dq__async_leave(a);
}

/* An extend's reply: records the new deadline and re-arms at half a lease; a
 * job that is someone else's now stops extending; other errors retry soon.
 * Frees an ended delivery once its last op is back. */
static void on_extended(dq_async *a, int64_t deadline_ms, int status,
                        void *ud) {
    (void)a;
    dq__delivery *d = ud;
    dq_consumer *c = d->c;
    d->ops--;
    if (d->state == D_ENDED) {
        if (d->ops == 0)
            dq__async_bury(c->a, delivery_free, d);
        return;
    }
    if (d->state != D_RUNNING || d->extend_ev == NULL)
        return;
    if (status == DQ_OK) {
        d->job->lease_deadline_ms = deadline_ms;
        arm_ms(d->extend_ev, c->lease_ms / 2);
    } else if (status == DQ_ESTALE || status == DQ_ENOTFOUND) {
        d->lost = 1; /* the job is someone else's now */
        dq__err_set(&c->err, status, "%s", dq_async_errmsg(c->a));
    } else {
        arm_ms(d->extend_ev, c->lease_ms / 8 + 10); /* try again soon */
    }
}

/* The handler ran too long: its job is given back (policy backoff). */
static void on_handler_timeout(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__delivery *d = arg;
    dq_consumer *c = d->c;
    dq_async *a = c->a;
    dq__async_enter(a);
    if (d->state == D_RUNNING && !c->dead)
        release(c->as, d, 0);
    dq__async_leave(a);
}

/* Hands one claimed job to the handler. */
static void dispatch(acons *s, const dq_job *job) {
    dq_consumer *c = s->c;
    struct event_base *base = dq__async_base(c->a);
    dq__delivery *d = calloc(1, sizeof(*d));
    if (d != NULL && (d->job = dq_job_dup(job)) == NULL) {
        free(d);
        d = NULL;
    }
    if (d == NULL) { /* its lease runs out and it comes back */
        dq__err_set(&c->err, DQ_ENOMEM, "out of memory for job '%.200s'",
                   dq_job_id(job));
        return;
    }
    d->c = c;
    d->qi = s->poll_qi;
    d->state = D_RUNNING;
    d->slot = 1;
    dq__cons_link(c, d);
    s->active++;
    if (dq__cons_over_max(c, d->job)) { /* delivered too often already */
        d->fixed = DQ__WHY_MAX;
        finish_apply(s, d, DQ_JOB_FAIL, -1);
        return;
    }
    if (c->extend) {
        d->extend_ev = evtimer_new(base, on_extend_timer, d);
        if (d->extend_ev != NULL)
            arm_ms(d->extend_ev, c->lease_ms / 2);
    }
    if (c->handler_timeout_ms > 0) {
        d->timeout_ev = evtimer_new(base, on_handler_timeout, d);
        if (d->timeout_ev != NULL)
            arm_ms(d->timeout_ev, c->handler_timeout_ms);
    }
    int r = c->handler(c, d->job, c->ud);
    if (c->dead)
        return;
    r = dq__cons_outcome(r);
    if (d->state == D_RUNNING && r != DQ_JOB_ASYNC)
        finish_apply(s, d, r, -1);
}

/* A job claimed after the stop began: straight back. */
static void give_back(acons *s, const dq_job *job) {
    dq_consumer *c = s->c;
    dq__delivery *d = calloc(1, sizeof(*d));
    if (d != NULL && (d->job = dq_job_dup(job)) == NULL) {
        free(d);
        d = NULL;
    }
    if (d == NULL)
        return; /* its lease runs out */
    d->c = c;
    d->qi = s->poll_qi;
    d->late_done = 1; /* nobody holds it */
    d->slot = 1;
    dq__cons_link(c, d);
    s->active++;
    release(s, d, 1);
}

/* ---- Polling ---- */

/* A poll's reply: dispatches the claimed jobs (gives them back when
 * stopping), then polls again or sleeps until the next is due; a failure
 * backs off (doubling, up to 2 s). */
static void on_polled(dq_async *a, const dq_jobs *jobs, int64_t next_us,
                      int status, void *ud) {
    acons *s = ud;
    dq_consumer *c = s->c;
    int64_t recv = dq__mono_us();
    s->polling = 0;
    if (status < 0) {
        dq__err_set(&c->err, status, "poll: %s", dq_async_errmsg(a));
        int64_t b = s->err_backoff_ms;
        s->err_backoff_ms = b * 2 > 2000 ? 2000 : b * 2;
        if (s->stopping)
            check_stopped(s);
        else
            timer_set(s, recv + b * 1000, 0);
        return;
    }
    s->err_backoff_ms = 50;
    size_t n = dq_jobs_count(jobs);
    s->saturated = (int)n >= s->requested;
    for (size_t i = 0; i < n; i++) {
        const dq_job *job = dq_jobs_at(jobs, i);
        if (s->stopping)
            give_back(s, job);
        else
            dispatch(s, job);
        if (c->dead)
            return; /* freed by a handler */
    }
    if (s->stopping) {
        check_stopped(s);
        return;
    }
    if (c->nq > 1) {
        /* Several queues: the next poll goes to another queue known to
         * have due work (this one is skipped until jobs come or a
         * wake-up), else kick sleeps until the first is due. */
        if (n > 0 || s->poll_again)
            memset(s->skip, 0, sizeof(s->skip));
        else /* unless more is due now (it dead-lettered what it found) */
            s->skip[s->poll_qi] = next_us != 0;
        s->poll_again = 0;
        kick(s);
        return;
    }
    if (s->saturated || next_us == 0 || s->poll_again) {
        s->poll_again = 0;
        kick(s);
        if (s->polling || s->saturated)
            return;
    }
    /* Sleep until the next job is due (server offset, measured from about
     * when the script ran), or the idle cap. */
    int64_t cap = dq__async_opts(a)->wait_cap_ms * 1000;
    /* A consumer that does not own the next event is registered until its
     * cap (next_us within a millisecond of it): an idle sleep, which also
     * checks the watches (see lua/include/wake.lua). */
    if (next_us < 0 || next_us + 1000 >= cap)
        timer_set(s, recv + cap, 1);
    else
        timer_set(s, (s->poll_sent_us + recv) / 2 + next_us, 0);
}

/* Polls for as many jobs as there are free slots, unless stopping or a poll
 * is out; a failed send retries after the backoff. */
static void kick(acons *s) {
    dq_consumer *c = s->c;
    dq_async *a = c->a;
    if (c->dead || s->stopping || s->polling)
        return;
    int64_t free_slots = c->concurrency - (int64_t)s->active;
    if (free_slots <= 0) {
        s->saturated = 1; /* a finishing job polls again */
        return;
    }
    int max = free_slots > DQ_POLL_MAX ? DQ_POLL_MAX : (int)free_slots;
    int qi = 0;
    if (c->nq > 1) {
        /* the queue with due work that the consumer's priority picks */
        int64_t wait_us = -1;
        qi = dq__async_pick(a, c->nq, c->qs, c->weights, (int)c->priority,
                            s->skip, &wait_us);
        if (qi < 0) {
            /* none: sleep until the first is to be polled (a due time
             * this consumer owns, or an idle cap, which checks the
             * watches) */
            memset(s->skip, 0, sizeof(s->skip));
            int64_t cap = dq__async_opts(a)->wait_cap_ms * 1000;
            if (wait_us < 0 || wait_us + 1000 >= cap)
                timer_set(s, dq__mono_us() + cap, 1);
            else
                timer_set(s, dq__mono_us() + wait_us, 0);
            return;
        }
    }
    timer_clear(s);
    s->poll_qi = qi;
    dq__async_set_owner(a, c);
    int rc = dq__async_poll_us(a, c->qs[qi], max, c->lease_ms, on_polled, s);
    dq__async_set_owner(a, NULL);
    if (rc < 0) {
        dq__err_set(&c->err, rc, "poll: %s", dq_async_errmsg(a));
        timer_set(s, dq__mono_us() + s->err_backoff_ms * 1000, 0);
        return;
    }
    s->polling = 1;
    s->requested = max;
    s->poll_sent_us = dq__mono_us();
}

/* The subscriber is ready or a wake-up came: polls now, or again once the
 * outstanding poll is back. */
static void on_watch(void *ud, int event) {
    (void)event; /* ready or wake: either way, look now */
    acons *s = ud;
    if (s->c->dead || s->stopping)
        return;
    memset(s->skip, 0, sizeof(s->skip)); /* a queue may be due again */
    if (s->polling)
        s->poll_again = 1;
    else
        kick(s);
}

/* ---- Lifecycle ---- */

static void acons_free_mem(void *p) {
    dq_consumer *c = p;
    acons *s = c->as;
    while (s->batches != NULL) { /* calls forgotten with the consumer */
        ackbatch *b = s->batches;
        s->batches = b->next;
        free(b);
    }
    free(s->ackq);
    free(c->as);
    dq__cons_free_queues(c);
    free(c);
}

/* Closes the wake-up subscriptions. */
static void close_watches(acons *s) {
    for (int i = 0; i < s->nwatches; i++)
        dq__watch_close(s->watches[i]);
    free(s->watches);
    s->watches = NULL;
    s->nwatches = 0;
}

/* Frees the consumer: forgets its ops, closes its watch and timers, buries
 * its deliveries and its memory. */
static void as_destroy(dq_consumer *c) {
    acons *s = c->as;
    dq_async *a = c->a;
    c->dead = 1;
    dq__async_forget(a, c);
    dq__async_disown(a, &s->child);
    close_watches(s);
    if (s->timer_ev != NULL)
        event_free(s->timer_ev);
    if (s->stop_ev != NULL)
        event_free(s->stop_ev);
    if (s->flush_ev != NULL)
        event_free(s->flush_ev);
    s->timer_ev = s->stop_ev = s->flush_ev = NULL;
    if (s->tfd >= 0)
        close(s->tfd);
    s->tfd = -1;
    while (c->list != NULL) {
        dq__delivery *d = c->list;
        dq__cons_unlink(c, d);
        timers_clear(d);
        dq__async_bury(a, delivery_free, d);
    }
    dq__async_bury(a, acons_free_mem, c);
}

static void as_release(dq__child *ch) {
    acons *s = (acons *)ch;
    as_destroy(s->c);
}

/* dq_consumer_done for a libevent consumer: applies the outcome, unless the
 * job was given up (handler timeout or stop). */
static int as_finish(dq_consumer *c, dq__delivery *d, int outcome,
                     int64_t delay_ms) {
    acons *s = c->as;
    if (d->state == D_ABANDONED) {
        dq__cons_unlink(c, d);
        delivery_release(s, d);
        return dq__err_set(&c->err, DQ_ESTALE,
                          "dq_consumer_done: the consumer gave this job up "
                          "already (handler timeout or stop)");
    }
    if (d->state == D_RELEASING) {
        d->late_done = 1;
        return dq__err_set(&c->err, DQ_ESTALE,
                          "dq_consumer_done: the consumer is giving this "
                          "job up (handler timeout or stop)");
    }
    dq__async_enter(c->a);
    finish_apply(s, d, outcome, delay_ms);
    dq__async_leave(c->a);
    return DQ_OK;
}

int dq_consumer_new(dq_async *a, const char *queue, dq_handler_fn *handler,
                    void *userdata, dq_consumer **out) {
    if (out == NULL)
        return DQ_ENULL;
    *out = NULL;
    if (a == NULL || handler == NULL)
        return DQ_ENULL;
    int rc = dq__check_queue(queue, NULL);
    if (rc != DQ_OK)
        return rc;
    if (dq__async_closing(a))
        return DQ_ECLOSED;
    dq_consumer *c = calloc(1, sizeof(*c));
    acons *s = calloc(1, sizeof(*s));
    if (c == NULL || s == NULL) {
        free(c);
        free(s);
        return DQ_ENOMEM;
    }
    dq__cons_init(c, CM_ASYNC, queue, handler, userdata);
    c->a = a;
    c->as = s;
    c->finish = as_finish;
    c->destroy = as_destroy;
    s->c = c;
    s->tfd = -1;
    s->err_backoff_ms = 50;
    s->child.release = as_release;
    dq__async_adopt(a, &s->child);
    *out = c;
    return DQ_OK;
}

int dq_consumer_start(dq_consumer *c) {
    if (c == NULL)
        return DQ_ENULL;
    if (c->mode != CM_ASYNC || c->started)
        return dq__err_set(&c->err, DQ_EINVAL,
                          c->mode != CM_ASYNC
                              ? "dq_consumer_start is for libevent consumers"
                              : "the consumer was started already");
    acons *s = c->as;
    struct event_base *base = dq__async_base(c->a);
#ifdef __linux__
    s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
#endif
    if (s->tfd >= 0) {
        s->timer_ev = event_new(base, s->tfd, EV_READ | EV_PERSIST, on_timer,
                                s);
        if (s->timer_ev != NULL && event_add(s->timer_ev, NULL) != 0) {
            event_free(s->timer_ev);
            s->timer_ev = NULL;
        }
    } else {
        s->timer_ev = evtimer_new(base, on_timer, s);
    }
    s->stop_ev = evtimer_new(base, on_stop_deadline, s);
    if (s->timer_ev == NULL || s->stop_ev == NULL)
        return dq__err_set(&c->err, DQ_ENOMEM, "out of memory");
    /* The wake channels of every queue's partitions: all on one
     * connection, or in a cluster one subscription per channel (each
     * lives in its own slot, on its own node). */
    int parts = dq__async_partitions(c->a);
    int nch = (int)c->nq * parts, sharded = dq__async_sharded(c->a);
    char (*chans)[DQ_KEY_MAX + 24] = calloc((size_t)nch, sizeof(*chans));
    const char **ptrs = calloc((size_t)nch, sizeof(*ptrs));
    s->watches = calloc(sharded ? (size_t)nch : 1, sizeof(*s->watches));
    int rc = chans && ptrs && s->watches ? DQ_OK : DQ_ENOMEM;
    for (int k = 0; rc == DQ_OK && k < nch; k++) {
        int p = k % parts;
        dq__async_wake_channel(c->a, c->qs[k / parts], parts > 1 ? p : -1,
                               chans[k], sizeof(chans[k]));
        ptrs[k] = chans[k];
    }
    for (int k = 0; rc == DQ_OK && k < (sharded ? nch : 1); k++) {
        rc = sharded ? dq__watch_open(c->a, ptrs[k], on_watch, s,
                                      &s->watches[s->nwatches])
                     : dq__watch_open_many(c->a, nch, ptrs, on_watch, s,
                                           &s->watches[s->nwatches]);
        if (rc == DQ_OK)
            s->nwatches++;
    }
    free(chans);
    free(ptrs);
    if (rc != DQ_OK)
        return dq__err_set(&c->err, DQ_ENOMEM, "out of memory");
    c->started = 1;
    kick(s);
    return DQ_OK;
}

/* The stop's deadline (or, with nothing running, the next loop turn): gives
 * every running job back, then ends the stop if it can. */
static void on_stop_deadline(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    acons *s = arg;
    dq_consumer *c = s->c;
    dq_async *a = c->a;
    dq__async_enter(a);
    /* A release may call back and change the list: start over each time
     * (a released job is no longer D_RUNNING). */
    for (int again = 1; again && !c->dead;) {
        again = 0;
        for (dq__delivery *d = c->list; d != NULL; d = d->next)
            if (d->state == D_RUNNING) {
                release(s, d, 1);
                again = 1;
                break;
            }
    }
    if (!c->dead)
        check_stopped(s);
    dq__async_leave(a);
}

int dq_consumer_stop(dq_consumer *c, int64_t timeout_ms, dq_stopped_cb *cb,
                     void *userdata) {
    if (c == NULL)
        return DQ_ENULL;
    acons *s = c->as;
    if (c->mode != CM_ASYNC || !c->started || s->stopping)
        return dq__err_set(&c->err, DQ_EINVAL,
                          c->mode != CM_ASYNC
                              ? "dq_consumer_stop is for libevent consumers "
                                "(use dq_consumer_interrupt)"
                              : "the consumer is not running");
    int rc = dq__check_delay(timeout_ms, "timeout_ms", &c->err);
    if (rc != DQ_OK)
        return rc;
    s->stopping = 1;
    s->stopped_cb = cb;
    s->stopped_ud = userdata;
    timer_clear(s);
    close_watches(s);
    /* The deadline (or, with nothing running, the next loop turn) calls
     * back from the loop, never from inside this call. */
    arm_ms(s->stop_ev, s->active == 0 && !s->polling ? 0 : timeout_ms);
    return DQ_OK;
}

size_t dq_consumer_running(const dq_consumer *c) {
    if (c == NULL)
        return 0;
    if (c->mode == CM_SYNC)
        return c->in_handler ? 1 : 0;
    size_t n = 0;
    for (const dq__delivery *d = c->list; d != NULL; d = d->next)
        n += d->state == D_RUNNING;
    return n;
}
