/*
 * tests/support/fault.h - shared pieces of the fault-injection suites.
 *
 * A fault test runs producers and consumers in forked processes (each with
 * its own dq_client, opened after the fork), injects faults from the test
 * process, and keeps a ledger of every delivery and ack in shared memory:
 *
 *   ledger  one slot per (job, attempt): which consumer incarnation got the
 *           delivery, its claim time and lease deadline (server clock), and
 *           what became of its ack.  A consumer writes the slot right after
 *           its poll returns and marks it FT_ACKING before it calls dq_ack,
 *           so a SIGKILL leaves at worst an unrecorded claim or an ack whose
 *           outcome the analysis resolves (the queue must end empty: a
 *           pending ack of a job nobody else acked took effect).
 *
 * Jobs are named "<prefix>-<index>" and carry the payload "payload-<index>",
 * so every delivery can be checked against the job it claims to be.
 *
 * Every test prints exactly one line that starts with "figures: " (see
 * ft_figures) and fails on any lost job or duplicate ack.
 */
#ifndef DQ_TESTS_FAULT_H
#define DQ_TESTS_FAULT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "delayq.h"
#include "harness.h"
#include "test_suite.h"
#include "test_utils.h" /* clocks (harness.h), rcmd_try, open_uri */

/* ---- randomness, processes ---- */

/* Seeds the generator from $DQ_FAULT_SEED or the clock; returns the seed
 * (printed in the figures line so a failing run can be replayed). */
uint64_t ft_seed(void);
uint64_t ft_rand(void);
/* Uniform in [lo, hi]. */
long ft_rand_range(long lo, long hi);

/* Forks a child that dies with this process (PR_SET_PDEATHSIG SIGKILL),
 * runs fn(arg) and _exits 0.  Returns the pid (the test fails if fork
 * fails). */
pid_t ft_fork(void (*fn)(void *), void *arg);
/* Waits up to timeout_ms for pid; SIGKILLs it after that.  Returns its exit
 * status as waitpid gives it, or -1. */
int ft_reap(pid_t pid, long timeout_ms);

/* Fails the test unless status (from waitpid) is a clean exit 0; names
 * SIGPIPE, which a library user must never die of. */
void ft_assert_exit_ok(int status, const char *who);

/* ---- Redis ---- */

/* th_redis_start, failing the test (never skipping) if it cannot. */
void ft_start(th_redis *r, int tcp, const char *conf);
/* Integer reply of a command, or the test fails. */
long long ft_cmd_int(redisContext *ctx, const char *fmt, ...);
/* Value of "field:" in INFO <section> (copied to out), 0 if found. */
int ft_info_field(redisContext *ctx, const char *section, const char *field,
                  char *out, size_t size);

/* Options of a client whose writes wait for n replicas (up to timeout_ms),
 * in the durable mode (DQ_OPT_DURABLE) when durable is 1. */
dq_options *ft_wait_opts(int n, int timeout_ms, int durable);

/* 1 when dq_stats says the queue holds nothing (pending, in flight, dead). */
int ft_queue_empty(dq_client *c, const char *queue);
/* Waits up to timeout_ms for the queue to be empty; 1 if it became so. */
int ft_wait_empty(dq_client *c, const char *queue, long timeout_ms);

/* ---- jobs ---- */

void ft_job_id(char *buf, size_t size, const char *prefix, size_t index);
/* Index of an id made by ft_job_id with this prefix, or -1. */
long ft_job_index(const char *id, const char *prefix);
/* "payload-<index>" into buf; returns its length. */
size_t ft_payload(char *buf, size_t size, size_t index);

/* ---- the ledger ---- */

enum ft_state {
    FT_NONE = 0,       /* no delivery recorded for this attempt */
    FT_CLAIMED = 1,    /* delivered, not acked yet */
    FT_ACKING = 2,     /* dq_ack called, no answer yet */
    FT_ACKED = 3,      /* dq_ack returned 0 */
    FT_ACKED_RETRY = 4,/* an ack failed with an I/O error, its retry said
                          DQ_ENOTFOUND: the first one took effect */
    FT_STALE = 5,      /* dq_ack said DQ_ESTALE: the lease was lost */
    FT_NOTFOUND = 6    /* dq_ack said DQ_ENOTFOUND at once (unexpected) */
};

typedef struct ft_deliv {
    int32_t inc;         /* consumer incarnation that got the delivery */
    int32_t state;       /* enum ft_state; written last */
    int64_t claim_ms;    /* server time of the poll that delivered it */
    int64_t deadline_ms; /* lease deadline of that delivery */
} ft_deliv;

typedef struct ft_ledger {
    size_t njobs;         /* jobs 0..njobs-1 */
    int maxatt;           /* attempts recorded per job */
    char prefix[32];      /* job id prefix */
    char queue[64];       /* queue name */
    volatile int stop;    /* set by the test: workers finish and exit */
    volatile int pause;   /* set by the test: producers wait */
    int64_t errors;       /* unexpected errors seen by workers */
    int64_t io_errors;    /* DQ_EIO / DQ_ETIMEDOUT seen by workers */
    int64_t retries;      /* calls repeated after an error */
    int64_t kept;         /* retried pushes answered DQ_KEPT */
    int64_t overflow;     /* deliveries with attempt > maxatt */
    int64_t bad_payload;  /* deliveries whose id/payload did not match */
    int64_t polls;        /* successful poll calls */
    char last_error[256]; /* text of the last unexpected error */
    uint8_t *pushed;      /* njobs: 1 once a push of the job succeeded */
    ft_deliv *d;          /* njobs * maxatt */
} ft_ledger;

/* A ledger in shared memory (visible to forked children). */
ft_ledger *ft_ledger_new(const char *queue, const char *prefix, size_t njobs,
                         int maxatt);
void ft_ledger_free(ft_ledger *L);
/* Records an unexpected error (counted, text kept). */
void ft_ledger_error(ft_ledger *L, const char *what, int rc,
                     const char *msg);

/* What a consumer process does. */
typedef struct ft_consumer {
    const char *uri;       /* where */
    const dq_options *opts;/* may be NULL */
    ft_ledger *L;          /* ledger; L->queue is the queue */
    int inc;               /* incarnation number (>= 1) */
    int max;               /* jobs per poll */
    int64_t lease_ms;      /* lease per poll */
    int batch_ack;         /* 1: dq_ack_batch, 0: dq_ack per job */
    int strict;            /* 1: every error is unexpected (no faults) */
    int work_us;           /* > 0: "handles" each job for 0..work_us us */
} ft_consumer;

/* Consumer loop (run in a forked child): dq_poll_wait, record, ack; until
 * L->stop.  Errors of the I/O kind are retried (the client reconnects by
 * itself); acks after an I/O error are retried with the same token. */
void ft_consume(void *cfg);

/* What a producer process does: pushes jobs lo..hi-1 with their ledger
 * ids, in calls of 1..batch_max jobs (dq_push for 1, dq_push_batch
 * otherwise), each due after min..max delay ms.  A call that fails with an
 * I/O error is repeated with the same ids and DQ_PUSH_KEEP until it
 * succeeds (the documented idempotent retry); L->pushed marks the jobs of
 * every call that returned success. */
typedef struct ft_producer {
    const char *uri;        /* where */
    const dq_options *opts; /* may be NULL */
    ft_ledger *L;           /* ledger; L->queue is the queue */
    size_t lo, hi;          /* job indexes */
    int batch_max;          /* largest call (1..DQ_BATCH_MAX) */
    int big_pct;            /* 0: every call 1..batch_max jobs; else this
                               percentage of calls is 1..batch_max jobs and
                               the others 1..8 */
    int64_t min_delay_ms, max_delay_ms;
    int pace_us;            /* pause between calls */
    int strict;             /* 1: every error is unexpected (no faults) */
} ft_producer;

/* Producer loop (run in a forked child). */
void ft_produce(void *cfg);

/* What the analysis found. */
typedef struct ft_report {
    long pushed;         /* jobs whose push returned success */
    long acked;          /* jobs acked exactly once */
    long lost;           /* pushed jobs never acked */
    long dup_ack;        /* jobs acked more than once */
    long dup_lease;      /* deliveries made while an earlier lease of the
                            same job was still valid */
    long phantom;        /* deliveries of jobs never pushed successfully */
    long deliveries;     /* recorded deliveries */
    long redelivered;    /* recorded deliveries with attempt > 1 */
    long unrecorded;     /* attempts below a recorded one, never recorded
                            (poll reply lost to a kill or a dropped link) */
    long stale;          /* acks refused with DQ_ESTALE */
    long unexplained;    /* redeliveries whose previous delivery was held by
                            a live consumer that acked it */
    long resolved;       /* acks cut by a SIGKILL that took effect */
    long kill_inflight;  /* deliveries held by killed consumers, not acked */
    long kill_redeliv;   /* ... of which were delivered again later */
    long max_attempt;    /* highest attempt seen */
} ft_report;

/* Analyses the ledger.  killed[inc] != 0 marks incarnations that were
 * SIGKILLed (killed may be NULL; ninc entries). */
void ft_analyze(const ft_ledger *L, const uint8_t *killed, int ninc,
                ft_report *rep);

/* Prints "figures: <test>: pushed=.. acked=.. lost=.. dup_ack=..
 * dup_in_lease=.. faults=.. <extra>" on stdout (one line, flushed). */
void ft_figures(const char *test, const ft_report *rep, long faults,
                const char *extra_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails the test unless the report shows no loss, no duplicate ack, no
 * delivery within a valid lease, no phantom and no bad payload. */
void ft_assert_clean(const ft_ledger *L, const ft_report *rep);
/* ft_assert_clean, and no unexpected worker error, and each of the njobs
 * pushed and acked: the end of a run that delivered everything. */
void ft_assert_all_done(const ft_ledger *L, const ft_report *rep,
                        long njobs);

#endif
