/*
 * op.h - the operation engine: what one public call means, run the same by
 * the blocking client (client.c) and the libevent one (async.c).
 *
 * An operation is built once (arguments checked, nothing sent when that
 * fails; batches cut into script calls), then driven by a client:
 *
 *   dq__op_<name>(&op, core, ...)     check + build: op->cmds[0..ncmds-1]
 *   send every op->cmds[i].resp      (tag i; owned RESP bytes) in one
 *                                    pipeline, in any order, each to the
 *                                    node that owns cmds[i].slot
 *   dq__op_feed(&op, tag, reply)      for each reply; DQ_FEED_RESEND: the
 *                                    script was not loaded (NOSCRIPT), the
 *                                    engine switched cmds[tag] to EVAL:
 *                                    send it again with the same tag;
 *                                    only when the driver set op->routed
 *                                    (it can reach other nodes):
 *                                    DQ_FEED_REDIRECT, a cluster node sent
 *                                    the call to op->redir (MOVED / ASK);
 *                                    DQ_FEED_RETRY, the node did not run
 *                                    it and may later (TRYAGAIN,
 *                                    CLUSTERDOWN, READONLY, LOADING,
 *                                    MASTERDOWN): send it again after a
 *                                    pause, to the owner the route knows
 *                                    by then.  Without op->routed these
 *                                    replies fail the op.
 *   dq__op_next(&op)                 once all replies are in: 1 when the
 *                                    op has more calls to make (they
 *                                    depend on these replies); cmds and
 *                                    ncmds now name them, tags start
 *                                    at 0 again: send them the same way
 *   dq__op_wait_cmd(&op, ...)        once all replies are in: a WAIT for
 *                                    replicas to send (tag op->ncmds), or 0
 *                                    (pushes with DQ_OPT_WAIT_REPLICAS;
 *                                    every write with DQ_OPT_DURABLE);
 *                                    on every connection the op wrote
 *                                    through (dq__op_wait_lost when one
 *                                    is gone)
 *   dq__op_status(&op)                exactly what the sync call returns;
 *                                    op->err holds its message
 *   dq__op_clear(&op)
 *
 * A client only moves bytes, times out and reconnects; the NOSCRIPT
 * resend, the WAIT step, chunking and the mapping of script results to
 * codes and messages live here, once.  Pure: no I/O.
 */
#ifndef DQ_OP_H
#define DQ_OP_H

#include "ops.h"

enum dq__op_kind {
    DQ_OPK_PUSH, DQ_OPK_PUSH_BATCH, DQ_OPK_CANCEL, DQ_OPK_POLL, DQ_OPK_ACK,
    DQ_OPK_ACK_BATCH, DQ_OPK_NACK, DQ_OPK_EXTEND, DQ_OPK_LIST,
    DQ_OPK_DEAD_REQUEUE, DQ_OPK_DEAD_PURGE, DQ_OPK_STATS, DQ_OPK_COUNTS,
    DQ_OPK_GET, DQ_OPK_CONFIG_SET, DQ_OPK_CONFIG_GET, DQ_OPK_COUNT_DUE,
    DQ_OPK_RESCHED, DQ_OPK_RESCHED_BATCH,
    DQ_OPK_GROUP_STATS
};

/* What a driver does after dq__op_feed. */
enum {
    DQ_FEED_OK = 0,       /* reply taken */
    DQ_FEED_RESEND = 1,   /* send cmds[tag] again (switched to EVAL) */
    DQ_FEED_REDIRECT = 2, /* a cluster node sent it elsewhere: op->redir
                             (MOVED, or ASK: send ASKING first) */
    DQ_FEED_RETRY = 3     /* not run; send again later (op->retry_why) */
};

/* Where a Redis Cluster node redirected one call. */
typedef struct dq__redirect {
    int ask;        /* 1 for ASK (once, after ASKING), 0 for MOVED */
    int slot;       /* hash slot, 0..16383 */
    int port;
    char host[256]; /* as the node wrote it (IPv6 without brackets) */
} dq__redirect;

/* The ASK targets of one operation's calls: each ASKed call is sent once,
 * after an ASKING, to the node its own ASK named (calls of one operation
 * may be ASKed to different nodes when several slots migrate at once).  A
 * driver keeps one per operation and, per call, the index that
 * dq__asks_index gave. */
#define DQ_ASKS_MAX 8
typedef struct dq__asks {
    dq__redirect to[DQ_ASKS_MAX];
    int n;
} dq__asks;

/* Index of redirect d's node among a's targets (added if new); -1 when
 * DQ_ASKS_MAX nodes are there already (the call then waits and goes to
 * its slot's owner again). */
int dq__asks_index(dq__asks *a, const dq__redirect *d);

typedef struct dq__op {
    int kind;             /* DQ_OPK_* */
    const char *what;     /* "push", "poll", ... for messages */
    size_t ncmds;         /* script calls */
    dq__cmd *cmds;         /* &one, plan.cmds or a chunk array */
    int failed;           /* status holds an error */
    int status;           /* result: count or code (first error wins) */
    dq__err err;           /* message of that error */
    int64_t wait_n;       /* replicas to WAIT for after a push (0: none) */
    int64_t wait_ms;      /* WAIT timeout */
    int wait_sent;        /* dq__op_wait_cmd handed out the WAIT */
    char wait_resp[80];   /* the WAIT command, formatted */
    dq__redirect redir;   /* the last DQ_FEED_REDIRECT */
    int routed;           /* set by a driver that follows redirections
                             and retries (cluster, Sentinel) */
    char retry_why[128];  /* the last DQ_FEED_RETRY's error text */
    int64_t lease_ms;     /* poll: for the lease deadline of jobs */
    int which;            /* list: DQ_LIST_* */
    size_t n;             /* ack, reschedule: number of jobs */
    int *results;         /* ack, reschedule: per job (n) */
    int acked;            /* ack: acked so far; reschedule: moved */
    dq_jobs *jobs;        /* poll, list: taken over by the caller */
    dq_job_info *info;    /* get: the job found (taken over), or NULL */
    dq_group_list *groups; /* group stats: summed over partitions */
    int gmax;             /* group stats: max (checked) */
    int64_t next_us;      /* poll: us until the next job is due, -1 none */
    int64_t now_ms;       /* list: the server's time of the listing */
    long long v;          /* integer result */
    int64_t stats[5];     /* stats; counters: delivered, acked, retried,
                             failed */
    char id[DQ_ID_BUF];   /* job id, for messages */
    dq__cmd one;           /* single-call operations */
    dq__push_plan plan;    /* pushes */
    /* A partitioned queue (core->partitions > 1): */
    dq__core *core;        /* the client's (partition state) */
    char queue[DQ_QUEUE_MAX + 1];
    int nparts;           /* 1 for a plain queue */
    int checking;         /* the calls are the partition-count check */
    dq__cmd check;         /* that check (sent before anything else) */
    dq__cmd *main_cmds;    /* the op's own calls, after the check */
    size_t main_n;
    int max;              /* poll: jobs wanted */
    int known;            /* poll: visit only partitions known due */
    int visited;          /* poll: partitions visited so far */
    int part;             /* poll: the partition of the current call */
    int64_t told_sent;    /* poll: wake-ups its client had taken for that
                             partition when the call was built (feed_poll) */
    size_t *order;        /* ack: chunk positions -> the caller's index */
    size_t *first;        /* ack: chunk i holds positions first[i].. */
    int64_t conf[DQ_SET__COUNT]; /* config get: the values read */
    size_t conf_n;        /* config: settings named */
    const int *conf_keys; /* config set: the caller's, during the build */
    const int64_t *conf_in;
    int64_t offset;       /* list: the page wanted */
    int count;
    int nbounds;          /* count due: windows' bounds (checked) */
    int64_t bounds[DQ_COUNT_DUE_MAX]; /* count due: the bounds (copied) */
    int64_t due_counts[DQ_COUNT_DUE_MAX + 1]; /* count due: per window,
                                                 summed over partitions */
    int64_t when;         /* reschedule: the time (checked) */
    int when_flags;       /* reschedule: DQ_RESCHED_* */
} dq__op;

/* Builders: check every argument, then build.  DQ_OK, or the code with
 * err (and op->err) set and nothing to send; dq__op_clear is due either
 * way.  The caller's arrays and payloads are read during the call only:
 * the commands own their bytes. */
int dq__op_push(dq__op *op, dq__core *core, int batch, const char *queue,
               size_t n, const void *const *payloads, const size_t *lens,
               const int64_t *times, int absolute, const char *const *ids,
               int flags, const dq_push_opts *po, dq__err *err);
/* Queue settings: a set of n settings (on every partition), or with
 * values NULL a get (from partition 0), its values left in op->conf. */
int dq__op_config(dq__op *op, dq__core *core, const char *queue, size_t n,
                  const int *settings, const int64_t *values, dq__err *err);
int dq__op_cancel(dq__op *op, dq__core *core, const char *queue, const char *id,
                 int flags, dq__err *err);
int dq__op_poll(dq__op *op, dq__core *core, const char *queue, int max,
               int64_t lease_ms, dq__err *err);
/* A poll that, on a partitioned queue, visits only the partitions the
 * client knows may have due work (from earlier polls and from wake-ups,
 * dq__core_woken): for a caller that watches every partition's wake-ups.
 * It may have no calls at all (ncmds 0): then its result is 0 jobs and the
 * time until the earliest partition is due. */
int dq__op_poll_known(dq__op *op, dq__core *core, const char *queue, int max,
                     int64_t lease_ms, dq__err *err);

int dq__op_ack(dq__op *op, dq__core *core, int batch, const char *queue,
              size_t n, const char *const *ids, const char *const *tokens,
              dq__err *err);
/* Reschedules n jobs (batch 0: one, its outcome the status) to when. */
int dq__op_resched(dq__op *op, dq__core *core, int batch, const char *queue,
                   size_t n, const char *const *ids, int64_t when, int flags,
                   dq__err *err);
/* dq_promote: a reschedule of job id to now (flags 0 or
 * DQ_RESCHED_REVIVE). */
int dq__op_promote(dq__op *op, dq__core *core, const char *queue,
                   const char *id, int flags, dq__err *err);
/* with_reason: record reason (reason_len bytes; NULL only with 0) as the
 * job's last failure reason (dq_nack_reason); 0: record none (dq_nack). */
int dq__op_nack(dq__op *op, dq__core *core, const char *queue, const char *id,
               const char *token, int64_t delay_ms, int flags,
               int with_reason, const void *reason, size_t reason_len,
               dq__err *err);
int dq__op_get(dq__op *op, dq__core *core, const char *queue, const char *id,
              dq__err *err);
int dq__op_extend(dq__op *op, dq__core *core, const char *queue, const char *id,
                 const char *token, int64_t lease_ms, dq__err *err);
int dq__op_list(dq__op *op, dq__core *core, const char *queue, int which,
               int64_t offset, int count, dq__err *err);
/* purge = 0: requeue after delay_ms; 1: purge.  id NULL for a batch. */
int dq__op_dead(dq__op *op, dq__core *core, int purge, const char *queue,
               const char *id, int64_t delay_ms, dq__err *err);
int dq__op_stats(dq__op *op, dq__core *core, const char *queue, dq__err *err);
int dq__op_counts(dq__op *op, dq__core *core, const char *queue,
                 dq__err *err);
/* The pending jobs per due-time window (dq_count_due): op->due_counts
 * (nbounds + 1) summed over the partitions, op->now_ms the latest of
 * their times. */
int dq__op_count_due(dq__op *op, dq__core *core, const char *queue,
                     const int64_t *bounds_ms, int nbounds, dq__err *err);
/* The counts per tenant group (dq_group_stats): op->groups, summed by
 * name over the partitions, op->now_ms the latest server time. */
int dq__op_group_stats(dq__op *op, dq__core *core, const char *queue,
                       int max, dq__err *err);

/* Takes the reply to command tag (0..ncmds-1, or ncmds for the WAIT). */
int dq__op_feed(dq__op *op, size_t tag, const dq__reply *r);
/* Records a transport error (I/O, timeout) for the whole op. */
void dq__op_fail(dq__op *op, int code, const dq__err *e);
/* After the replies of every call: 1 if there are more calls to make. */
int dq__op_next(dq__op *op);
/* After the last script reply: 1 and the WAIT command's RESP bytes (they
 * live in op) when one is due, else 0. */
int dq__op_wait_cmd(dq__op *op, const char **resp, size_t *len);
/* A driver could not send a WAIT that was due (the connection the writes
 * went through was replaced meanwhile): the op fails with DQ_EREPLICAS,
 * its writes made but not confirmed (a poll hands out nothing). */
void dq__op_wait_lost(dq__op *op);
/* The call's result: what the sync function returns. */
int dq__op_status(const dq__op *op);
void dq__op_clear(dq__op *op);

#endif
