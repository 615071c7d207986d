/*
 * internal.h - types shared by the library's units.  Not installed.
 */
#ifndef DQ_INTERNAL_H
#define DQ_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "delayq.h"

#if defined(__GNUC__)
#define DQ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DQ_PRINTF(a, b)
#endif

/* The error of the last call: a code and a message that names what failed. */
typedef struct dq__err {
    int code;       /* DQ_OK or a DQ_E* code */
    char msg[512];  /* NUL-terminated detail, "" when code is DQ_OK */
} dq__err;

/* Sets err (if not NULL) to code with a printf-style message; returns code.
 * Internal only: the public API has no varargs. */
int dq__err_set(dq__err *err, int code, const char *fmt, ...) DQ_PRINTF(3, 4);
/* Clears err to DQ_OK / "". */
void dq__err_clear(dq__err *err);

/* Option set (public opaque type dq_options). */
struct dq_options {
    int64_t connect_timeout_ms;       /* 0 = none */
    int64_t command_timeout_ms;       /* 0 = none */
    int64_t max_payload;              /* bytes */
    int64_t max_attempts;             /* 0 = unlimited */
    int64_t wait_cap_ms;              /* longest single wait in poll_wait */
    int64_t lease_ms;                 /* lease of a poll with lease_ms 0 in
                                         a queue without that setting */
    int64_t wait_replicas;            /* WAIT after push when > 0 */
    int64_t wait_replicas_timeout_ms; /* WAIT timeout */
    int64_t durable;                  /* every write WAITs (poll: no
                                         delivery unconfirmed) */
    int64_t done_ttl_ms;              /* how long acks are remembered */
    int64_t partitions;               /* 0 = as the URI says (else 1) */
    int64_t counters;                 /* scripts keep the queue counters */
    int64_t layout;                   /* DQ_LAYOUT_* of queues without the
                                         setting; -1: as the URI says */
    char *ns;                         /* key namespace, NULL = "dq" */
    char *user;                       /* ACL user override */
    char *password;                   /* password override */
    char *tls_ca;                     /* CA bundle */
    char *tls_cert;                   /* client certificate */
    char *tls_key;                    /* client key */
    char *tls_sni;                    /* server name */
};

/* Fills o with defaults (no allocation). */
void dq__options_defaults(dq_options *o);
/* Deep-copies src (NULL = defaults) into dst; DQ_OK or DQ_ENOMEM. */
int dq__options_copy(dq_options *dst, const dq_options *src);
/* DQ_OPT_DURABLE needs DQ_OPT_WAIT_REPLICAS >= 1: DQ_OK, or DQ_EINVAL
 * with err set (for dq_open and dq_async_open). */
int dq__options_check(const dq_options *o, dq__err *err);
/* Frees the strings of an option set held by value. */
void dq__options_clear(dq_options *o);

/* One job.  id, payload and reason live in one allocation (buf). */
struct dq_job {
    char *id;                  /* NUL-terminated, points into buf */
    char *payload;             /* len bytes + NUL, points into buf */
    size_t len;                /* payload length */
    char *reason;              /* last failure reason (reason_len bytes +
                                  NUL, in buf), NULL when none */
    size_t reason_len;
    int64_t failed_ms;         /* when it was recorded, 0 if none */
    int64_t attempt;           /* deliveries so far */
    int64_t due_ms;            /* due time (or death time), server ms */
    int64_t lease_deadline_ms; /* 0 if not leased */
    char token[DQ_TOKEN_BUF];  /* lease token, "" if none */
    char *buf;                 /* the allocation behind id and payload */
    char *group;               /* its group (NUL-terminated, in buf), NULL
                                  when none or not filled in */
    int priority;              /* its priority (0 none or not filled in) */
};

/* A list of jobs returned by one call. */
struct dq_jobs {
    size_t count;  /* jobs in use */
    dq_job *jobs;  /* count jobs */
};

/* One job as dq_get saw it: the job (no token) and where it is. */
struct dq_job_info {
    dq_job job;     /* id, payload, attempt, times, reason */
    int state;      /* DQ_JOB_* */
    int64_t now_ms; /* the server's time of the lookup */
    char repeat[256]; /* the repeat rule as people read it ("" none) */
    char group[DQ_GROUP_MAX + 1]; /* the job's group ("" none) */
    int64_t followup_ms; /* a debounced job's follow-up: earliest due (0
                            none) */
    int priority;                 /* the job's priority (0 none) */
};

/* A parsed cron expression (cron.c): bit v of a field set = value v
 * matches. */
typedef struct dq__cron {
    uint64_t min;  /* minutes 0..59 */
    uint32_t hour; /* hours 0..23 */
    uint32_t dom;  /* days of the month 1..31 */
    uint32_t mon;  /* months 1..12 */
    uint32_t dow;  /* days of the week 0..6, 0 = Sunday (7 read as 0) */
    int day_or;    /* both dom and dow restricted (neither starts with '*'):
                      a day matches if either does (Vixie cron) */
} dq__cron;

/* Options of a push (dq_push_opts_*): 0 = not set. */
struct dq_push_opts {
    int64_t max_attempts; /* the job's own max attempts */
    int64_t expire;       /* expiry: epoch ms, or ms from the push */
    int expire_rel;       /* expire counts from the push */
    int64_t every;        /* repeat every this many ms (0: no) */
    int has_cron;         /* repeat on cron (then every is 0) */
    int tz_min;           /* the cron's offset from UTC, minutes */
    dq__cron cron;        /* the parsed cron */
    char cron_text[201];  /* its text (at most DQ_CRON_TEXT_MAX bytes) */
    int64_t debounce_max; /* DQ_PUSH_DEBOUNCE's max wait, ms (0: none) */
    char group[DQ_GROUP_MAX + 1]; /* the job's group ("" none) */
    int priority;         /* DQ_PUSHOPT_PRIORITY (0: none) */
    char errmsg[512];     /* why the last set failed ("" none) */
};

/* Allocates a list with room for n jobs (count 0).  NULL on ENOMEM. */
dq_jobs *dq__jobs_new(size_t n);
/* The text of a job a decoder hands over, each as bytes and length:
 * reason and group NULL when none. */
typedef struct dq__job_text {
    const char *id, *payload, *reason, *group;
    size_t idlen, len, reason_len, group_len;
} dq__job_text;

/* Appends a job with copies of t's bytes; returns it, NULL on ENOMEM. */
dq_job *dq__jobs_add_text(dq_jobs *list, const dq__job_text *t);
/* A new info holding copies of id/payload and reason (NULL: none); NULL on
 * ENOMEM. */
dq_job_info *dq__job_info_new(const char *id, size_t idlen,
                             const char *payload, size_t len,
                             const char *reason, size_t reason_len);

/* Moves src's jobs to the end of *dst (creating it when NULL) and frees
 * src; DQ_OK or DQ_ENOMEM (then src is freed, *dst unchanged). */
int dq__jobs_append(dq_jobs **dst, dq_jobs *src);
/* Sorts l by due_ms (ties by id), then keeps jobs [offset, offset+count). */
void dq__jobs_slice(dq_jobs *l, size_t offset, size_t count);

/* Monotonic clock in microseconds. */
int64_t dq__mono_us(void);

#endif
