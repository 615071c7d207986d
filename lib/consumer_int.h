/*
 * consumer_int.h - the consumer object shared by the sync loop
 * (consumer.c) and the libevent loop (aconsumer.c).  Not installed.
 */
#ifndef DQ_CONSUMER_INT_H
#define DQ_CONSUMER_INT_H

#include <signal.h>

#include "delayq-consumer.h"
#include "internal.h"

struct event;
struct dq_async;
struct dq__watch;

enum { CM_SYNC = 1, CM_ASYNC = 2 };

/* Delivery states. */
enum {
    D_RUNNING = 1, /* handler has it */
    D_FINISHING,   /* ack/nack sent */
    D_RELEASING,   /* given up by the consumer (timeout, stop): nack sent,
                      handler still holds the job */
    D_ABANDONED,   /* given up and released; waits for the handler's
                      dq_consumer_done (which returns DQ_ESTALE) */
    D_ENDED        /* finished; freed once no operation refers to it */
};

/* One job handed to the handler. */
typedef struct dq__delivery {
    struct dq__delivery *prev, *next; /* consumer's list */
    dq_consumer *c;           /* owner */
    int qi;                   /* its queue: c->qs[qi] */
    dq_job *job;              /* the handler's job (a copy in async mode) */
    int state;                /* D_* */
    int outcome;              /* outcome applied (DQ_JOB_*) */
    int done_called;          /* sync: dq_consumer_done ran in the handler */
    int late_done;            /* done called while releasing */
    int64_t delay_ms;         /* retry delay chosen by dq_consumer_done */
    int nack_flags;           /* the nack's flags (dq__cons_plan) */
    int ops;                  /* async operations referring to it */
    int tries;                /* ack/nack sends (retried after I/O errors) */
    int lost;                 /* an extend said the lease is gone */
    int slot;                 /* async: holds one of the consumer's slots
                                 (given back when its ack goes out, or
                                 when its nack is answered) */
    void *reason;             /* dq_consumer_set_reason's copy, or NULL */
    size_t reason_len;        /* its length */
    int has_reason;           /* set: a retry or failure records it */
    const char *fixed;        /* the consumer's own reason (DQ__WHY_*),
                                 recorded instead; NULL if none */
    struct event *extend_ev;  /* lease renewal timer */
    struct event *timeout_ev; /* handler timeout */
} dq__delivery;

struct dq_consumer {
    int mode;                    /* CM_SYNC or CM_ASYNC */
    char queue[DQ_QUEUE_MAX + 1];
    dq_handler_fn *handler;      /* the job handler */
    void *ud;                    /* its userdata */
    dq_outcome_cb *outcome_cb;   /* optional report */
    void *outcome_ud;            /* its userdata */
    /* options (DQ_COPT_*) */
    int64_t concurrency, lease_ms, extend, backoff, retry_base_ms,
        retry_max_ms, jitter, max_attempts, handler_timeout_ms;
    int started;                 /* loop started (options frozen) */
    int dead;                    /* freed (memory may be deferred) */
    dq__err err;                  /* last error */
    /* the queues served: qs[0] is queue, the others added with
       dq_consumer_add_queue (heap copies) */
    size_t nq;
    const char *qs[DQ_MULTI_MAX];
    int weights[DQ_MULTI_MAX];   /* 1..DQ_WEIGHT_MAX each */
    int64_t priority;            /* DQ_COPT_PRIORITY: DQ_PRIO_* */
    const dq_jobs *batch;        /* sync: the claim being handled */
    int batch_qi;                /* sync: its queue (index in qs) */
    uint64_t rng;                /* jitter generator */
    dq__delivery *list;           /* deliveries not freed yet */
    /* sync */
    dq_client *client;
    volatile sig_atomic_t interrupted; /* dq_consumer_interrupt */
    int in_handler;              /* sync: a handler is running */
    /* async */
    struct dq_async *a;          /* client */
    void *as;                    /* aconsumer.c's state */
    /* mode hooks */
    int (*finish)(dq_consumer *c, dq__delivery *d, int outcome,
                  int64_t delay_ms);
    void (*destroy)(dq_consumer *c);
};

/* Defaults for a new consumer. */
void dq__cons_init(dq_consumer *c, int mode, const char *queue,
                  dq_handler_fn *handler, void *ud);
/* Frees the names dq_consumer_add_queue copied (before c is freed). */
void dq__cons_free_queues(dq_consumer *c);
/* The queue of delivery d. */
#define DQ__DQUEUE(d) ((d)->c->qs[(d)->qi])
/* Delivery list. */
void dq__cons_link(dq_consumer *c, dq__delivery *d);
void dq__cons_unlink(dq_consumer *c, dq__delivery *d);
/* What a finished job turns into: *flags DQ_NACK_DEAD or 0, *delay.
 * Returns the outcome actually applied (a retry past the max attempts
 * becomes DQ_JOB_FAIL). */
int dq__cons_plan(dq_consumer *c, const dq_job *job, int outcome,
                 int64_t delay_ms, int64_t *delay, int *flags);
/* dq__cons_plan for a delivery: a retry the consumer's max attempts turn
 * into a death records DQ__WHY_MAX unless the handler gave a reason. */
int dq__cons_plan_d(dq_consumer *c, dq__delivery *d, int outcome,
                   int64_t delay_ms, int64_t *delay, int *flags);
/* The reason the nack of d records: 1 with *r and *len set (the consumer's
 * own, else the handler's), 0 for none (a plain nack). */
int dq__cons_reason(const dq__delivery *d, const void **r, size_t *len);
/* Drops d's reasons (a release at a stop is no failure). */
void dq__cons_reason_clear(dq__delivery *d);

/* The consumer's own failure reasons. */
#define DQ__WHY_TIMEOUT "handler timeout" /* libevent handler timeout */
#define DQ__WHY_MAX "max attempts"        /* DQ_COPT_MAX_ATTEMPTS */

/* Normalizes a handler's return value. */
int dq__cons_outcome(int r);
/* 1 if the job had more deliveries than the consumer allows. */
int dq__cons_over_max(const dq_consumer *c, const dq_job *job);

#endif
