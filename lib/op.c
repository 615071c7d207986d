/*
 * op.c - the operation engine (see op.h): one place that knows what each
 * call sends, how a batch is cut, and what each reply means.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gstats.h"
#include "op.h"
#include "resp.h"

static void op_init(dq__op *op, int kind, const char *what) {
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->what = what;
}

/* Records an error (the first one wins); returns code.  A partitioned
 * poll or requeue/purge-all that already changed earlier partitions stops
 * there instead: it returns what it did (a call that returns an error must
 * have written nothing), and the error is not the call's. */
static int op_error(dq__op *op, int code, const dq__err *e) {
    int partial = op->nparts > 1 && !op->checking &&
                  ((op->kind == DQ_OPK_POLL && op->status > 0) ||
                   ((op->kind == DQ_OPK_DEAD_REQUEUE ||
                     op->kind == DQ_OPK_DEAD_PURGE) &&
                    op->part >= 0 && op->v > 0));
    /* Once its WAIT is out, an op's writes are all made: any failure is
     * the call's (a durable poll hands out nothing unconfirmed). */
    partial = partial && !op->wait_sent;
    if (partial) {
        op->visited = op->nparts;  /* poll: no further partition */
        op->part = op->nparts;     /* requeue/purge: the same */
        return code;
    }
    if (!op->failed) {
        op->failed = 1;
        op->status = code;
        op->err = *e;
    }
    return code;
}

/* A builder's failure: copies the message to the caller's err too. */
static int built(dq__op *op, int rc, dq__err *err) {
    if (rc != DQ_OK) {
        op_error(op, rc, err);
        return rc;
    }
    return DQ_OK;
}

/* One script call on queue, built by the caller into op->one. */
static void single(dq__op *op, dq__core *core, const char *queue) {
    dq__core_keys(core, queue);
    op->cmds = &op->one;
    op->ncmds = 1;
}

/* Passes a build's DQ_OK through; any failure becomes DQ_ENOMEM, recorded on
 * op and in err. */
static int oom(dq__op *op, int rc, dq__err *err) {
    if (rc == DQ_OK)
        return DQ_OK;
    dq__err_set(err, DQ_ENOMEM, "%s: out of memory", op->what);
    return built(op, DQ_ENOMEM, err);
}

/* ---- Partitioned queues ---- */

/* Notes the queue of op; 1 when it is partitioned (core->partitions > 1). */
static int parted(dq__op *op, dq__core *core, const char *queue) {
    op->core = core;
    op->nparts = core->partitions > 1 ? core->partitions : 1;
    snprintf(op->queue, sizeof(op->queue), "%s", queue);
    return op->nparts > 1;
}

/* Puts the partition-count check before op's calls, the first time this
 * client uses the partitioned queue. */
static int with_check(dq__op *op, dq__err *err) {
    if (op->nparts <= 1)
        return DQ_OK;
    dq__qparts *q = dq__core_qparts(op->core, op->queue);
    if (q == NULL)
        return oom(op, DQ_ENOMEM, err);
    if (q->checked)
        return DQ_OK;
    dq__core_keys_part(op->core, op->queue, -1);
    if (dq__build_parts(&op->check, op->core) != DQ_OK)
        return oom(op, DQ_ENOMEM, err);
    op->main_cmds = op->cmds;
    op->main_n = op->ncmds;
    op->cmds = &op->check;
    op->ncmds = 1;
    op->checking = 1;
    return DQ_OK;
}

/* A write that, in the durable mode (DQ_OPT_DURABLE), WAITs for the
 * replicas before it reports success. */
static void durable(dq__op *op, const dq__core *core) {
    if (!core->opts.durable)
        return;
    op->wait_n = core->opts.wait_replicas;
    op->wait_ms = core->opts.wait_replicas_timeout_ms;
}

/* The keys of the partition that holds job id (or of the plain queue). */
static void keys_of(dq__op *op, dq__core *core, const char *queue,
                    const char *id) {
    dq__core_keys_part(core, queue,
                       op->nparts > 1 ? dq__part_of(id, op->nparts) : -1);
}

/* Readies op for its one script call on job id: the keys of the
 * partition that holds it (or of the plain queue); op->id names the job
 * in messages. */
static void on_job(dq__op *op, dq__core *core, const char *queue,
                   const char *id) {
    parted(op, core, queue);
    single(op, core, queue);
    keys_of(op, core, queue, id);
    snprintf(op->id, sizeof(op->id), "%s", id);
}

/* The end of a builder: rc of building its call (any failure is
 * DQ_ENOMEM), then the partition-count check put before it if due. */
static int sealed(dq__op *op, int rc, dq__err *err) {
    rc = oom(op, rc, err);
    return rc == DQ_OK ? with_check(op, err) : rc;
}

/* An array of nparts calls, built by fn for each partition. */
static int each_part(dq__op *op, dq__core *core, const char *queue,
                     int (*fn)(dq__op *, dq__cmd *, dq__core *),
                     dq__err *err) {
    op->cmds = calloc((size_t)op->nparts, sizeof(dq__cmd));
    if (op->cmds == NULL)
        return oom(op, DQ_ENOMEM, err);
    for (int p = 0; p < op->nparts; p++) {
        dq__core_keys_part(core, queue, p);
        if (fn(op, &op->cmds[p], core) != DQ_OK)
            return oom(op, DQ_ENOMEM, err); /* cmds are zeroed: freeable */
        op->ncmds = (size_t)p + 1;
    }
    return with_check(op, err);
}

int dq__op_push(dq__op *op, dq__core *core, int batch, const char *queue,
               size_t n, const void *const *payloads, const size_t *lens,
               const int64_t *times, int absolute, const char *const *ids,
               int flags, const dq_push_opts *po, dq__err *err) {
    op_init(op, batch ? DQ_OPK_PUSH_BATCH : DQ_OPK_PUSH, "push");
    int rc = dq__push_plan_make(&op->plan, core, queue, n, payloads, lens,
                               times, absolute, ids, flags, po, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->cmds = op->plan.cmds;
    op->ncmds = op->plan.nchunks;
    op->wait_n = core->opts.wait_replicas;
    op->wait_ms = core->opts.wait_replicas_timeout_ms;
    durable(op, core);
    parted(op, core, queue);
    return with_check(op, err);
}

int dq__op_cancel(dq__op *op, dq__core *core, const char *queue, const char *id,
                 int flags, dq__err *err) {
    op_init(op, DQ_OPK_CANCEL, "cancel");
    int rc = dq__check_cancel(queue, id, flags, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    on_job(op, core, queue, id);
    durable(op, core);
    return sealed(op, dq__build_cancel(&op->one, core, id, flags), err);
}

/* The next partition a poll visits (from the cursor on, each once; with
 * op->known only those that may have due work), or -1. */
static int next_part(dq__op *op, const dq__qparts *q) {
    int64_t now = dq__mono_us();
    while (op->visited < op->nparts) {
        int p = (q->cursor + op->visited++) % op->nparts;
        if (!op->known || q->due_us[p] <= now)
            return p;
    }
    return -1;
}

/* Builds the poll of op->part (a partition, or -1: the plain queue). */
static int build_poll(dq__op *op) {
    dq__cmd_free(&op->one);
    memset(&op->one, 0, sizeof(op->one));
    dq__core_keys_part(op->core, op->queue, op->part);
    if (op->known) { /* see feed_poll */
        dq__qparts *q = dq__core_qparts(op->core, op->queue);
        op->told_sent = q ? q->told[op->part < 0 ? 0 : op->part] : 0;
    }
    return dq__build_poll(&op->one, op->core, op->max - op->status,
                          op->lease_ms, op->known);
}

static int poll_common(dq__op *op, dq__core *core, const char *queue,
                       int max, int64_t lease_ms, int known, dq__err *err) {
    op_init(op, DQ_OPK_POLL, "poll");
    int rc = dq__check_poll(queue, max, lease_ms, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->lease_ms = lease_ms;
    op->max = max;
    op->known = known;
    durable(op, core);
    op->part = -1;
    op->next_us = -1;
    single(op, core, queue);
    if (parted(op, core, queue)) {
        dq__qparts *q = dq__core_qparts(core, queue);
        if (q == NULL)
            return oom(op, DQ_ENOMEM, err);
        q->cursor = (q->cursor + 1) % op->nparts; /* fair start */
        if ((op->part = next_part(op, q)) < 0)
            op->ncmds = 0; /* nothing known due: no call */
    } else if (known) {
        /* A waiting consumer of a plain queue: its one entry says when it
         * is to poll (its registration among the waiting consumers). */
        dq__qparts *q = dq__core_qparts(core, queue);
        if (q == NULL)
            return oom(op, DQ_ENOMEM, err);
        if (q->due_us[0] > dq__mono_us())
            op->ncmds = 0;
    }
    if (op->ncmds > 0 && (rc = oom(op, build_poll(op), err)) != DQ_OK)
        return rc;
    return with_check(op, err);
}

int dq__op_poll(dq__op *op, dq__core *core, const char *queue, int max,
               int64_t lease_ms, dq__err *err) {
    return poll_common(op, core, queue, max, lease_ms, 0, err);
}

int dq__op_poll_known(dq__op *op, dq__core *core, const char *queue, int max,
                     int64_t lease_ms, dq__err *err) {
    return poll_common(op, core, queue, max, lease_ms, 1, err);
}

/* Builds the call of one chunk of a batch: its m jobs' ids (and tokens,
 * or NULL), all of one partition, whose keys are set. */
typedef int (*chunk_fn)(dq__op *op, dq__cmd *c, size_t m,
                        const char *const *ids, const char *const *toks);

/* Cuts a batch of n jobs into chunks: op->order groups them by partition
 * (stable; part[i] is job i's), op->first[c] is where chunk c starts (at
 * most DQ_CHUNK jobs of one partition each), op->ncmds their number. */
static void cut_chunks(dq__op *op, size_t n, const char *const *ids,
                       int *part) {
    for (size_t i = 0; i < n; i++) {
        part[i] = op->nparts > 1 ? dq__part_of(ids[i], op->nparts) : 0;
        op->order[i] = i;
    }
    if (op->nparts > 1) {
        size_t pos = 0;
        for (int p = 0; p < op->nparts; p++)
            for (size_t i = 0; i < n; i++)
                if (part[i] == p)
                    op->order[pos++] = i;
    }
    op->first[0] = 0;
    size_t nch = 0;
    for (size_t k = 1; k < n; k++)
        if (k - op->first[nch] == DQ_CHUNK ||
            part[op->order[k]] != part[op->order[k - 1]])
            op->first[++nch] = k;
    op->first[++nch] = n;
    op->ncmds = nch;
}

/* Builds the chunks' calls (cut_chunks) with fn; pid/ptok are scratch
 * room for n ids and tokens in chunk order. */
static int build_chunks(dq__op *op, const char *queue, const char *const *ids,
                        const char *const *toks, const int *part,
                        const char **pid, const char **ptok, chunk_fn fn) {
    for (size_t k = 0; k < op->n; k++) {
        pid[k] = ids[op->order[k]];
        ptok[k] = toks ? toks[op->order[k]] : NULL;
    }
    for (size_t i = 0; i < op->ncmds; i++) {
        size_t lo = op->first[i], m = op->first[i + 1] - lo;
        dq__core_keys_part(op->core, queue,
                           op->nparts > 1 ? part[op->order[lo]] : -1);
        int rc = fn(op, &op->cmds[i], m, pid + lo, toks ? ptok + lo : NULL);
        if (rc != DQ_OK) {
            op->ncmds = i; /* the ones to free */
            return rc;
        }
    }
    return DQ_OK;
}

/* A batch of n jobs by id (tokens, or NULL): grouped by partition and cut
 * into chunks (cut_chunks), each chunk's call built by fn; op->results
 * gets one result per job (feed_each). */
static int by_chunk(dq__op *op, dq__core *core, const char *queue, size_t n,
                    const char *const *ids, const char *const *toks,
                    chunk_fn fn, dq__err *err) {
    parted(op, core, queue);
    op->n = n;
    op->results = calloc(n, sizeof(int));
    op->first = malloc((n + 1) * sizeof(size_t));
    op->order = malloc(n * sizeof(size_t));
    const char **pid = malloc(n * sizeof(char *) * 2);
    int *part = malloc(n * sizeof(int));
    int rc = DQ_ENOMEM;
    if (op->results != NULL && op->first != NULL && op->order != NULL &&
        pid != NULL && part != NULL) {
        cut_chunks(op, n, ids, part);
        op->cmds = op->ncmds == 1 ? &op->one
                                  : calloc(op->ncmds, sizeof(dq__cmd));
        if (op->cmds == NULL)
            op->ncmds = 0;
        else
            rc = build_chunks(op, queue, ids, toks, part, pid, pid + n, fn);
    }
    if (n == 1)
        snprintf(op->id, sizeof(op->id), "%s", ids[0]);
    free(pid);
    free(part);
    return sealed(op, rc, err);
}

static int ack_chunk(dq__op *op, dq__cmd *c, size_t m, const char *const *ids,
                     const char *const *toks) {
    return dq__build_ack(c, op->core, m, ids, toks);
}

int dq__op_ack(dq__op *op, dq__core *core, int batch, const char *queue,
              size_t n, const char *const *ids, const char *const *tokens,
              dq__err *err) {
    op_init(op, batch ? DQ_OPK_ACK_BATCH : DQ_OPK_ACK, "ack");
    int rc = dq__check_ack(queue, n, ids, tokens, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    durable(op, core);
    return by_chunk(op, core, queue, n, ids, tokens, ack_chunk, err);
}

static int resched_chunk(dq__op *op, dq__cmd *c, size_t m,
                         const char *const *ids, const char *const *toks) {
    (void)toks;
    return dq__build_resched(c, op->core, m, ids, op->when, op->when_flags);
}

int dq__op_resched(dq__op *op, dq__core *core, int batch, const char *queue,
                   size_t n, const char *const *ids, int64_t when, int flags,
                   dq__err *err) {
    op_init(op, batch ? DQ_OPK_RESCHED_BATCH : DQ_OPK_RESCHED, "reschedule");
    int rc = dq__check_resched(queue, n, ids, when, flags, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->when = when;
    op->when_flags = flags;
    durable(op, core);
    return by_chunk(op, core, queue, n, ids, NULL, resched_chunk, err);
}

int dq__op_promote(dq__op *op, dq__core *core, const char *queue,
                   const char *id, int flags, dq__err *err) {
    if ((flags & ~DQ_RESCHED_REVIVE) != 0) {
        op_init(op, DQ_OPK_RESCHED, "promote");
        dq__err_set(err, DQ_EINVAL,
                    "promote: flags is %d; use 0 or DQ_RESCHED_REVIVE", flags);
        return built(op, DQ_EINVAL, err);
    }
    return dq__op_resched(op, core, 0, queue, 1, &id, 0, flags, err);
}

int dq__op_nack(dq__op *op, dq__core *core, const char *queue, const char *id,
               const char *token, int64_t delay_ms, int flags,
               int with_reason, const void *reason, size_t reason_len,
               dq__err *err) {
    op_init(op, DQ_OPK_NACK, "nack");
    int rc = dq__check_nack(queue, id, token, delay_ms, flags, err);
    if (rc == DQ_OK && with_reason)
        rc = dq__check_reason(reason, reason_len, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    on_job(op, core, queue, id);
    durable(op, core);
    if (with_reason && reason == NULL)
        reason = ""; /* an empty reason is recorded too */
    return sealed(op,
                  dq__build_nack(&op->one, core, id, token, delay_ms, flags,
                                 with_reason ? reason : NULL, reason_len),
                  err);
}

int dq__op_get(dq__op *op, dq__core *core, const char *queue, const char *id,
              dq__err *err) {
    op_init(op, DQ_OPK_GET, "get");
    int rc = dq__check_get(queue, id, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    on_job(op, core, queue, id);
    return sealed(op, dq__build_get(&op->one, core, id), err);
}

int dq__op_extend(dq__op *op, dq__core *core, const char *queue, const char *id,
                 const char *token, int64_t lease_ms, dq__err *err) {
    op_init(op, DQ_OPK_EXTEND, "extend");
    int rc = dq__check_extend(queue, id, token, lease_ms, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    on_job(op, core, queue, id);
    durable(op, core);
    return sealed(op, dq__build_extend(&op->one, core, id, token, lease_ms),
                  err);
}

/* A partitioned listing asks every partition for its first offset+count
 * jobs and keeps the page of the merge: bounded, but not for deep pages. */
#define DQ_PART_LIST_DEPTH 100000

static int build_list_part(dq__op *op, dq__cmd *c, dq__core *core) {
    return dq__build_list(c, core, op->which, 0,
                          (int)(op->offset + op->count));
}

int dq__op_list(dq__op *op, dq__core *core, const char *queue, int which,
               int64_t offset, int count, dq__err *err) {
    op_init(op, DQ_OPK_LIST, which == DQ_LIST_DEAD ? "dead list" : "list");
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = dq__check_page(which, offset, count, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->which = which;
    op->offset = offset;
    op->count = count;
    if (parted(op, core, queue)) {
        if (offset + count > DQ_PART_LIST_DEPTH) {
            dq__err_set(err, DQ_EINVAL,
                       "%s: offset + count is %" PRId64 "; a partitioned "
                       "queue lists at most %d deep",
                       op->what, offset + count, DQ_PART_LIST_DEPTH);
            return built(op, DQ_EINVAL, err);
        }
        return each_part(op, core, queue, build_list_part, err);
    }
    single(op, core, queue);
    return oom(op, dq__build_list(&op->one, core, which, offset, count), err);
}

/* Builds the requeue/purge-all call of partition op->part: as many jobs as
 * the batch has room left for. */
static int build_dead_part(dq__op *op) {
    dq__cmd_free(&op->one);
    memset(&op->one, 0, sizeof(op->one));
    dq__core_keys_part(op->core, op->queue, op->part);
    return dq__build_dead_change(&op->one, op->core, op->what, NULL,
                                 op->lease_ms, DQ_DEAD_BATCH - (int)op->v);
}

int dq__op_dead(dq__op *op, dq__core *core, int purge, const char *queue,
               const char *id, int64_t delay_ms, dq__err *err) {
    op_init(op, purge ? DQ_OPK_DEAD_PURGE : DQ_OPK_DEAD_REQUEUE,
            purge ? "purge" : "requeue");
    int rc = dq__check_dead_change(queue, id, delay_ms, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    durable(op, core);
    op->part = -1;
    if (parted(op, core, queue) && id == NULL) {
        /* Partition after partition, until the batch is full. */
        op->lease_ms = delay_ms;
        op->part = 0;
        return sealed(op, build_dead_part(op), err);
    }
    if (id != NULL)
        keys_of(op, core, queue, id);
    return sealed(op,
                  dq__build_dead_change(&op->one, core, op->what, id,
                                        delay_ms, DQ_DEAD_BATCH),
                  err);
}

static int build_stats_part(dq__op *op, dq__cmd *c, dq__core *core) {
    (void)op;
    return dq__build_stats(c, core);
}

int dq__op_stats(dq__op *op, dq__core *core, const char *queue, dq__err *err) {
    op_init(op, DQ_OPK_STATS, "stats");
    int rc = dq__check_queue(queue, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->stats[4] = -1;
    if (parted(op, core, queue))
        return each_part(op, core, queue, build_stats_part, err);
    single(op, core, queue);
    return oom(op, dq__build_stats(&op->one, core), err);
}

static int build_config_part(dq__op *op, dq__cmd *c, dq__core *core) {
    return dq__build_config(c, core, op->conf_n, op->conf_keys,
                            op->conf_in);
}

int dq__op_config(dq__op *op, dq__core *core, const char *queue, size_t n,
                  const int *settings, const int64_t *values, dq__err *err) {
    op_init(op, values ? DQ_OPK_CONFIG_SET : DQ_OPK_CONFIG_GET, "config");
    int parts = core->partitions > 1 ? core->partitions : 1;
    int rc = dq__check_config(queue, n, settings, values,
                              values ? parts : -1, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->conf_n = n;
    if (values != NULL)
        durable(op, core);
    if (parted(op, core, queue)) {
        if (values == NULL) { /* every partition holds the totals */
            single(op, core, queue);
            dq__core_keys_part(core, queue, 0);
            return sealed(op, dq__build_config(&op->one, core, n, settings,
                                               NULL), err);
        }
        op->conf_keys = settings; /* read during the build only */
        op->conf_in = values;
        rc = each_part(op, core, queue, build_config_part, err);
        op->conf_keys = NULL;
        op->conf_in = NULL;
        return rc;
    }
    single(op, core, queue);
    return oom(op, dq__build_config(&op->one, core, n, settings, values),
               err);
}

static int build_counts_part(dq__op *op, dq__cmd *c, dq__core *core) {
    (void)op;
    return dq__build_counts(c, core);
}

int dq__op_counts(dq__op *op, dq__core *core, const char *queue,
                 dq__err *err) {
    op_init(op, DQ_OPK_COUNTS, "counters");
    int rc = dq__check_queue(queue, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    if (parted(op, core, queue))
        return each_part(op, core, queue, build_counts_part, err);
    single(op, core, queue);
    return oom(op, dq__build_counts(&op->one, core), err);
}

static int build_count_due_part(dq__op *op, dq__cmd *c, dq__core *core) {
    return dq__build_count_due(c, core, op->bounds, op->nbounds);
}

int dq__op_count_due(dq__op *op, dq__core *core, const char *queue,
                     const int64_t *bounds_ms, int nbounds, dq__err *err) {
    op_init(op, DQ_OPK_COUNT_DUE, "count due");
    int rc = dq__check_count_due(queue, bounds_ms, nbounds, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->nbounds = nbounds;
    memcpy(op->bounds, bounds_ms, (size_t)nbounds * sizeof(*bounds_ms));
    if (parted(op, core, queue))
        return each_part(op, core, queue, build_count_due_part, err);
    single(op, core, queue);
    return oom(op, build_count_due_part(op, &op->one, core), err);
}

static int build_group_stats_part(dq__op *op, dq__cmd *c, dq__core *core) {
    return dq__build_group_stats(c, core, op->gmax);
}

int dq__op_group_stats(dq__op *op, dq__core *core, const char *queue,
                       int max, dq__err *err) {
    op_init(op, DQ_OPK_GROUP_STATS, "group stats");
    int rc = dq__check_group_stats(queue, max, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->gmax = max;
    op->groups = dq__glist_new(max);
    if (op->groups == NULL)
        return oom(op, DQ_ENOMEM, err);
    if (parted(op, core, queue))
        return each_part(op, core, queue, build_group_stats_part, err);
    single(op, core, queue);
    return oom(op, build_group_stats_part(op, &op->one, core), err);
}

/* ---- Replies ---- */

/* What a write that the replicas did not confirm did: a poll's jobs stay
 * leased on the primary, not handed out. */
static const char *unconfirmed(const dq__op *op) {
    return op->kind == DQ_OPK_POLL
               ? "; the jobs were not handed out (due again when their "
                 "lease runs out)"
               : "";
}

/* The WAIT reply of a push, or of any write in the durable mode. */
static void feed_wait(dq__op *op, const dq__reply *r) {
    dq__err e;
    if (dq__reply_type(r) == DQ_R_ERROR) {
        op_error(op, dq__reply_error(r, "WAIT", &e), &e);
    } else if (dq__reply_type(r) != DQ_R_INTEGER ||
               dq__reply_int(r) < op->wait_n) {
        dq__err_set(&e, DQ_EREPLICAS,
                   "%s: written, but only %lld of %" PRId64
                   " replicas acknowledged it within %" PRId64 " ms%s",
                   op->what,
                   dq__reply_type(r) == DQ_R_INTEGER ? dq__reply_int(r) : 0,
                   op->wait_n, op->wait_ms, unconfirmed(op));
        op_error(op, DQ_EREPLICAS, &e);
    }
}

void dq__op_wait_lost(dq__op *op) {
    dq__err e;
    dq__err_set(&e, DQ_EREPLICAS,
               "%s: written, but the connection it went through was lost "
               "before the WAIT for replicas: not confirmed%s",
               op->what, unconfirmed(op));
    op_error(op, DQ_EREPLICAS, &e);
}

/* An integer result of a single-job script: v >= 0, or -16 / -17. */
static int int_result(dq__op *op, const dq__reply *r, dq__err *e) {
    int rc = dq__decode_int(r, &op->v, e);
    if (rc == DQ_OK && op->v < 0)
        rc = dq__result_code(op->v, op->what, op->id, e);
    return rc;
}

/* Parses "MOVED <slot> <host>:<port>" or "ASK ..." into op->redir; 1 if
 * the reply is one of them. */
static int parse_redirect(dq__op *op, const dq__reply *r) {
    int ask = dq__reply_is_error(r, "ASK ");
    if (!ask && !dq__reply_is_error(r, "MOVED "))
        return 0;
    size_t len;
    const char *s = dq__reply_str(r, &len);
    char buf[300];
    if (len >= sizeof(buf))
        return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *sp = strchr(buf, ' ');
    char *addr = sp ? strchr(sp + 1, ' ') : NULL;
    char *colon = addr ? strrchr(addr + 1, ':') : NULL;
    if (colon == NULL)
        return 0;
    long slot = strtol(sp + 1, NULL, 10);
    long port = strtol(colon + 1, NULL, 10);
    if (slot < 0 || slot > 16383 || port <= 0 || port > 65535)
        return 0;
    *colon = '\0';
    dq__redirect *d = &op->redir;
    d->ask = ask;
    d->slot = (int)slot;
    d->port = (int)port;
    snprintf(d->host, sizeof(d->host), "%s", addr + 1);
    return 1;
}

/* A redirection that no driver follows (one node): the op fails with a
 * message that names it. */
static void unroutable(dq__op *op) {
    dq__err e;
    const dq__redirect *d = &op->redir;
    dq__err_set(&e, DQ_EREDIS,
               "%s: Redis answered %s %d %s:%d: the server is a Redis Cluster "
               "node and the queue's slot lives on another node; this client "
               "talks to one node",
               op->what, d->ask ? "ASK" : "MOVED", d->slot, d->host, d->port);
    op_error(op, DQ_EREDIS, &e);
}

/* Errors a node answers without running the call, that a later try (once
 * the cluster or the Sentinels settled, or the slot finished moving) can
 * get past. */
static int is_transient(const dq__reply *r) {
    static const char *const prefixes[] = {"TRYAGAIN", "CLUSTERDOWN",
                                           "READONLY", "LOADING",
                                           "MASTERDOWN"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (dq__reply_is_error(r, prefixes[i]))
            return 1;
    return 0;
}

/* The reply of the partition-count check. */
static void feed_check(dq__op *op, const dq__reply *r) {
    dq__err e;
    long long v = 0;
    int rc = dq__decode_int(r, &v, &e);
    if (rc == DQ_OK && v != op->nparts) {
        if (v == 1)
            rc = dq__err_set(&e, DQ_EINVAL,
                            "%s: queue '%s' holds jobs unpartitioned; this "
                            "client uses %d partitions (DQ_OPT_PARTITIONS)",
                            op->what, op->queue, op->nparts);
        else
            rc = dq__err_set(&e, DQ_EINVAL,
                            "%s: queue '%s' has %lld partitions (recorded "
                            "in Redis when it was first used); this client "
                            "uses %d (DQ_OPT_PARTITIONS)",
                            op->what, op->queue, v, op->nparts);
    }
    if (rc != DQ_OK) {
        op_error(op, rc, &e);
        return;
    }
    dq__qparts *q = dq__core_qparts(op->core, op->queue);
    if (q != NULL)
        q->checked = 1;
}

/* A poll's reply: its jobs join the op's; on a partitioned queue the
 * client's view of that partition is updated. */
static int feed_poll(dq__op *op, const dq__reply *r, dq__err *e) {
    int asked = op->max - op->status;
    dq_jobs *got = NULL;
    int64_t next_us = -1;
    int rc = dq__decode_poll(r, &got, &next_us, e);
    if (rc < 0)
        return rc;
    if (dq__jobs_append(&op->jobs, got) != DQ_OK)
        return dq__err_set(e, DQ_ENOMEM, "poll: out of memory");
    op->status += rc;
    /* Of a waiting consumer's poll, next_us is when it is to poll this
     * partition again (its registration, see lua/poll.lua): its client
     * keeps it.  Of any other poll it is only news (the earliest over the
     * partitions visited, 0 when one may have more due). */
    if (op->known) {
        dq__qparts *q = dq__core_qparts(op->core, op->queue);
        int ix = op->part < 0 ? 0 : op->part;
        int64_t mine = next_us == 0  ? 0
                       : next_us < 0 ? INT64_MAX
                                     : dq__mono_us() + next_us;
        /* A wake-up read while the poll was out (a script that ran after
         * it told this consumer when to poll) stands if it is sooner, or
         * it would be lost until the cap. */
        if (q != NULL)
            q->due_us[ix] = q->told[ix] != op->told_sent && q->due_us[ix] < mine
                                ? q->due_us[ix]
                                : mine;
    } else {
        int64_t mine = rc >= asked ? 0 : next_us;
        if (op->next_us < 0 || (mine >= 0 && mine < op->next_us))
            op->next_us = mine;
    }
    return rc;
}

/* The reply of chunk tag of a batch by id (by_chunk): one result per job,
 * into op->results at the caller's index; op->acked counts the acked (or
 * moved) jobs.  A single ack's failure is the call's. */
static int feed_each(dq__op *op, size_t tag, const dq__reply *r, dq__err *e) {
    size_t lo = op->first[tag], m = op->first[tag + 1] - lo;
    int small[16], *res = m <= 16 ? small : malloc(m * sizeof(int));
    if (res == NULL)
        return dq__err_set(e, DQ_ENOMEM, "%s: out of memory", op->what);
    int ack = op->kind == DQ_OPK_ACK || op->kind == DQ_OPK_ACK_BATCH;
    int rc = ack ? dq__decode_ack(r, m, res, e)
                 : dq__decode_resched(r, m, res, e);
    for (size_t k = 0; rc >= 0 && k < m; k++)
        op->results[op->order[lo + k]] = res[k];
    if (res != small)
        free(res);
    if (rc >= 0)
        op->acked += rc;
    if (rc >= 0 && op->kind == DQ_OPK_ACK && op->results[0] != 0)
        rc = dq__result_code(op->results[0], "ack", op->id, e);
    return rc;
}

int dq__op_feed(dq__op *op, size_t tag, const dq__reply *r) {
    if (tag == op->ncmds) {
        feed_wait(op, r);
        return DQ_FEED_OK;
    }
    dq__cmd *cmd = &op->cmds[tag];
    dq__err e;
    if (parse_redirect(op, r)) {
        if (op->routed)
            return DQ_FEED_REDIRECT;
        unroutable(op);
        return DQ_FEED_OK;
    }
    if (op->routed && is_transient(r)) {
        size_t len;
        const char *s = dq__reply_str(r, &len);
        snprintf(op->retry_why, sizeof(op->retry_why), "%.*s",
                 (int)(len > 120 ? 120 : len), s);
        return DQ_FEED_RETRY;
    }
    if (dq__reply_is_error(r, "NOSCRIPT") && !dq__cmd_is_eval(cmd)) {
        /* Not run (SCRIPT FLUSH, a restarted or failed-over server): the
         * same call again as EVAL, which also reloads the script. */
        if (dq__cmd_use_eval(cmd) == DQ_OK)
            return DQ_FEED_RESEND;
        dq__err_set(&e, DQ_ENOMEM, "%s: out of memory", op->what);
        op_error(op, DQ_ENOMEM, &e);
        return DQ_FEED_OK;
    }
    int rc = DQ_OK;
    if (dq__reply_type(r) == DQ_R_ERROR) {
        rc = dq__reply_error(r, op->what, &e);
        op_error(op, rc, &e);
        return DQ_FEED_OK;
    }
    if (op->checking) {
        feed_check(op, r);
        return DQ_FEED_OK;
    }
    switch (op->kind) {
    case DQ_OPK_PUSH:
    case DQ_OPK_PUSH_BATCH:
        rc = dq__push_plan_decode(&op->plan, tag, r, &e);
        break;
    case DQ_OPK_POLL:
        rc = feed_poll(op, r, &e);
        break;
    case DQ_OPK_LIST: {
        dq_jobs *got = NULL;
        rc = dq__decode_list(r, op->which, &got, &op->now_ms, &e);
        if (rc >= 0 && dq__jobs_append(&op->jobs, got) != DQ_OK)
            rc = dq__err_set(&e, DQ_ENOMEM, "%s: out of memory", op->what);
        if (rc >= 0)
            op->status = (int)dq_jobs_count(op->jobs);
        break;
    }
    case DQ_OPK_ACK:
    case DQ_OPK_ACK_BATCH:
    case DQ_OPK_RESCHED:
    case DQ_OPK_RESCHED_BATCH:
        rc = feed_each(op, tag, r, &e);
        break;
    case DQ_OPK_NACK:
    case DQ_OPK_EXTEND:
        rc = int_result(op, r, &e);
        break;
    case DQ_OPK_GET:
        dq_job_info_free(op->info);
        rc = dq__decode_get(r, op->id, &op->info, &e);
        if (rc >= 0)
            op->v = rc;
        break;
    case DQ_OPK_CANCEL:
    case DQ_OPK_DEAD_REQUEUE:
    case DQ_OPK_DEAD_PURGE: {
        long long v = 0;
        rc = dq__decode_int(r, &v, &e);
        if (rc >= 0)
            op->v += v; /* summed over partitions */
        break;
    }
    case DQ_OPK_CONFIG_SET:
    case DQ_OPK_CONFIG_GET:
        rc = dq__decode_config(r, op->conf_n,
                               op->kind == DQ_OPK_CONFIG_GET ? op->conf : NULL,
                               &e);
        break;
    case DQ_OPK_COUNTS: {
        int64_t ct[4];
        rc = dq__decode_counts(r, ct, &e);
        for (int i = 0; rc >= 0 && i < 4; i++)
            op->stats[i] += ct[i]; /* summed over partitions */
        break;
    }
    case DQ_OPK_COUNT_DUE: {
        int64_t ct[DQ_COUNT_DUE_MAX + 1], now = 0;
        rc = dq__decode_count_due(r, op->nbounds, ct, &now, &e);
        for (int i = 0; rc >= 0 && i <= op->nbounds; i++)
            op->due_counts[i] += ct[i]; /* summed over partitions */
        if (rc >= 0 && now > op->now_ms)
            op->now_ms = now;
        break;
    }
    case DQ_OPK_GROUP_STATS:
        rc = dq__glist_feed(op->groups, r, &op->now_ms, &e);
        break;
    case DQ_OPK_STATS: {
        int64_t st[5];
        rc = dq__decode_stats(r, st, &e);
        for (int i = 0; rc >= 0 && i < 4; i++)
            op->stats[i] += st[i];
        if (rc >= 0 && st[4] >= 0 && (op->stats[4] < 0 || st[4] < op->stats[4]))
            op->stats[4] = st[4];
        break;
    }
    }
    if (rc < 0)
        op_error(op, rc, &e);
    return DQ_FEED_OK;
}

void dq__op_fail(dq__op *op, int code, const dq__err *e) { op_error(op, code, e); }

/* A waiting consumer's poll is over: the time until it is to poll one of
 * the queue's partitions again, as far as its client knows (-1: none). */
static void poll_done(dq__op *op) {
    if (!op->known)
        return; /* feed_poll kept the earliest the replies told */
    dq__qparts *q = dq__core_qparts(op->core, op->queue);
    if (q == NULL)
        return;
    int64_t now = dq__mono_us(), best = -1;
    for (int p = 0; p < op->nparts; p++) {
        if (q->due_us[p] == INT64_MAX)
            continue;
        int64_t d = q->due_us[p] > now ? q->due_us[p] - now : 0;
        if (best < 0 || d < best)
            best = d;
    }
    op->next_us = best;
}

int dq__op_next(dq__op *op) {
    if (op->failed)
        return 0;
    if (op->checking) {
        op->checking = 0;
        op->cmds = op->main_cmds;
        op->ncmds = op->main_n;
        op->main_cmds = NULL;
        if (op->ncmds > 0)
            return 1;
    }
    if (op->kind == DQ_OPK_POLL && op->nparts <= 1 && op->known)
        poll_done(op);
    if (op->kind == DQ_OPK_POLL && op->nparts > 1) {
        dq__qparts *q = dq__core_qparts(op->core, op->queue);
        if (q != NULL && op->status < op->max &&
            (op->part = next_part(op, q)) >= 0) {
            if (build_poll(op) != DQ_OK) {
                dq__err e;
                dq__err_set(&e, DQ_ENOMEM, "poll: out of memory");
                op_error(op, DQ_ENOMEM, &e);
                return 0;
            }
            op->cmds = &op->one;
            op->ncmds = 1;
            return 1;
        }
        poll_done(op);
    }
    if ((op->kind == DQ_OPK_DEAD_REQUEUE || op->kind == DQ_OPK_DEAD_PURGE) &&
        op->part >= 0 && op->part + 1 < op->nparts && op->v < DQ_DEAD_BATCH) {
        op->part++;
        if (build_dead_part(op) != DQ_OK) {
            dq__err e;
            dq__err_set(&e, DQ_ENOMEM, "%s: out of memory", op->what);
            op_error(op, DQ_ENOMEM, &e);
            return 0;
        }
        op->cmds = &op->one;
        op->ncmds = 1;
        return 1;
    }
    if (op->kind == DQ_OPK_LIST && op->nparts > 1) {
        dq__jobs_slice(op->jobs, (size_t)op->offset, (size_t)op->count);
        op->status = (int)dq_jobs_count(op->jobs);
        if (op->status == 0) { /* as on a plain queue: no list */
            dq_jobs_free(op->jobs);
            op->jobs = NULL;
        }
    }
    return 0;
}

int dq__op_wait_cmd(dq__op *op, const char **resp, size_t *len) {
    if (op->failed || op->wait_sent || op->wait_n <= 0)
        return 0;
    if (op->kind == DQ_OPK_POLL && op->status <= 0)
        return 0; /* nothing handed out: nothing to confirm */
    op->wait_sent = 1;
    char n[24], t[24];
    snprintf(n, sizeof(n), "%" PRId64, op->wait_n);
    snprintf(t, sizeof(t), "%" PRId64, op->wait_ms);
    const char *argv[3] = {"WAIT", n, t};
    char *end = dq__resp_put(op->wait_resp, 3, argv, NULL);
    *end = '\0'; /* see dq__cmd: hiredis peeks one byte further */
    *len = (size_t)(end - op->wait_resp);
    *resp = op->wait_resp;
    return 1;
}

int dq__op_status(const dq__op *op) {
    if (op->failed)
        return op->status;
    switch (op->kind) {
    case DQ_OPK_PUSH:
    case DQ_OPK_ACK:
    case DQ_OPK_EXTEND:
    case DQ_OPK_STATS:
    case DQ_OPK_COUNTS:
    case DQ_OPK_CONFIG_SET:
    case DQ_OPK_CONFIG_GET:
    case DQ_OPK_COUNT_DUE:
        return DQ_OK;
    case DQ_OPK_PUSH_BATCH:
        return dq__push_plan_count(&op->plan);
    case DQ_OPK_ACK_BATCH:
    case DQ_OPK_RESCHED_BATCH:
        return op->acked;
    case DQ_OPK_RESCHED:
        return op->results[0];
    case DQ_OPK_POLL:
    case DQ_OPK_LIST:
        return op->status;
    default: /* nack, cancel, dead requeue/purge, get */
        return (int)op->v;
    }
}

void dq__op_clear(dq__op *op) {
    if (op->checking) { /* cmds is the check; the op's own calls wait */
        op->cmds = op->main_cmds;
        op->ncmds = op->main_n;
        op->checking = 0;
    }
    if (op->kind == DQ_OPK_PUSH || op->kind == DQ_OPK_PUSH_BATCH) {
        dq__push_plan_free(&op->plan);
    } else if (op->cmds == &op->one) {
        dq__cmd_free(&op->one);
    } else if (op->cmds != NULL) {
        for (size_t i = 0; i < op->ncmds; i++)
            dq__cmd_free(&op->cmds[i]);
        free(op->cmds);
    }
    dq__cmd_free(&op->check);
    free(op->results);
    free(op->order);
    free(op->first);
    dq_jobs_free(op->jobs);
    dq_job_info_free(op->info);
    dq_group_list_free(op->groups);
    op->groups = NULL;
    op->order = op->first = NULL;
    op->cmds = NULL;
    op->results = NULL;
    op->jobs = NULL;
    op->info = NULL;
}

int dq__asks_index(dq__asks *a, const dq__redirect *d) {
    for (int i = 0; i < a->n; i++)
        if (a->to[i].port == d->port && strcmp(a->to[i].host, d->host) == 0)
            return i;
    if (a->n == DQ_ASKS_MAX)
        return -1;
    a->to[a->n] = *d;
    return a->n++;
}
