/*
 * op.c - the operation engine (see op.h): one place that knows what each
 * call sends, how a batch is cut, and what each reply means.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"
#include "resp.h"

static void op_init(dq__op *op, int kind, const char *what) {
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->what = what;
}

/* Records an error (the first one wins); returns code. */
static int op_error(dq__op *op, int code, const dq__err *e) {
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
    op->slot = core->keys.slot;
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

int dq__op_push(dq__op *op, dq__core *core, int batch, const char *queue,
               size_t n, const void *const *payloads, const size_t *lens,
               const int64_t *times, int absolute, const char *const *ids,
               int flags, dq__err *err) {
    op_init(op, batch ? DQ_OPK_PUSH_BATCH : DQ_OPK_PUSH, "push");
    int rc = dq__push_plan_make(&op->plan, core, queue, n, payloads, lens,
                               times, absolute, ids, flags, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    op->cmds = op->plan.cmds;
    op->ncmds = op->plan.nchunks;
    op->slot = core->keys.slot;
    op->wait_n = core->opts.wait_replicas;
    op->wait_ms = core->opts.wait_replicas_timeout_ms;
    return DQ_OK;
}

int dq__op_cancel(dq__op *op, dq__core *core, const char *queue, const char *id,
                 int flags, dq__err *err) {
    op_init(op, DQ_OPK_CANCEL, "cancel");
    int rc = dq__check_cancel(queue, id, flags, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    snprintf(op->id, sizeof(op->id), "%s", id);
    return oom(op, dq__build_cancel(&op->one, core, id, flags), err);
}

int dq__op_poll(dq__op *op, dq__core *core, const char *queue, int max,
               int64_t lease_ms, dq__err *err) {
    op_init(op, DQ_OPK_POLL, "poll");
    int rc = dq__check_poll(queue, max, lease_ms, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    op->lease_ms = lease_ms;
    return oom(op, dq__build_poll(&op->one, core, max, lease_ms), err);
}

int dq__op_ack(dq__op *op, dq__core *core, int batch, const char *queue,
              size_t n, const char *const *ids, const char *const *tokens,
              dq__err *err) {
    op_init(op, batch ? DQ_OPK_ACK_BATCH : DQ_OPK_ACK, "ack");
    int rc = dq__check_ack(queue, n, ids, tokens, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    dq__core_keys(core, queue);
    op->slot = core->keys.slot;
    op->n = n;
    op->ncmds = (n + DQ_CHUNK - 1) / DQ_CHUNK;
    op->results = calloc(n, sizeof(int));
    op->cmds = op->ncmds == 1 ? &op->one : calloc(op->ncmds, sizeof(dq__cmd));
    if (op->results == NULL || op->cmds == NULL) {
        if (op->cmds == NULL)
            op->ncmds = 0;
        return oom(op, DQ_ENOMEM, err);
    }
    if (n == 1)
        snprintf(op->id, sizeof(op->id), "%s", ids[0]);
    for (size_t i = 0; i < op->ncmds; i++) {
        size_t lo = i * DQ_CHUNK;
        size_t m = n - lo < DQ_CHUNK ? n - lo : DQ_CHUNK;
        if ((rc = dq__build_ack(&op->cmds[i], core, m, ids + lo,
                               tokens + lo)) != DQ_OK) {
            op->ncmds = i; /* the ones to free */
            return oom(op, rc, err);
        }
    }
    return DQ_OK;
}

int dq__op_nack(dq__op *op, dq__core *core, const char *queue, const char *id,
               const char *token, int64_t delay_ms, int flags, dq__err *err) {
    op_init(op, DQ_OPK_NACK, "nack");
    int rc = dq__check_nack(queue, id, token, delay_ms, flags, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    snprintf(op->id, sizeof(op->id), "%s", id);
    return oom(op, dq__build_nack(&op->one, core, id, token, delay_ms, flags),
               err);
}

int dq__op_extend(dq__op *op, dq__core *core, const char *queue, const char *id,
                 const char *token, int64_t lease_ms, dq__err *err) {
    op_init(op, DQ_OPK_EXTEND, "extend");
    int rc = dq__check_extend(queue, id, token, lease_ms, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    snprintf(op->id, sizeof(op->id), "%s", id);
    return oom(op, dq__build_extend(&op->one, core, id, token, lease_ms), err);
}

int dq__op_list(dq__op *op, dq__core *core, const char *queue, int which,
               int64_t offset, int count, dq__err *err) {
    op_init(op, DQ_OPK_LIST, which == DQ_LIST_DEAD ? "dead list" : "list");
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = dq__check_page(which, offset, count, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    op->which = which;
    return oom(op, dq__build_list(&op->one, core, which, offset, count), err);
}

int dq__op_dead(dq__op *op, dq__core *core, int purge, const char *queue,
               const char *id, int64_t delay_ms, dq__err *err) {
    op_init(op, purge ? DQ_OPK_DEAD_PURGE : DQ_OPK_DEAD_REQUEUE,
            purge ? "purge" : "requeue");
    int rc = dq__check_dead_change(queue, id, delay_ms, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    return oom(op, dq__build_dead_change(&op->one, core, op->what, id,
                                        delay_ms),
               err);
}

int dq__op_stats(dq__op *op, dq__core *core, const char *queue, dq__err *err) {
    op_init(op, DQ_OPK_STATS, "stats");
    int rc = dq__check_queue(queue, err);
    if (rc != DQ_OK)
        return built(op, rc, err);
    single(op, core, queue);
    return oom(op, dq__build_stats(&op->one, core), err);
}

/* ---- Replies ---- */

/* The WAIT reply of a push. */
static void feed_wait(dq__op *op, const dq__reply *r) {
    dq__err e;
    if (dq__reply_type(r) == DQ_R_ERROR) {
        op_error(op, dq__reply_error(r, "WAIT", &e), &e);
    } else if (dq__reply_type(r) != DQ_R_INTEGER ||
               dq__reply_int(r) < op->wait_n) {
        dq__err_set(&e, DQ_EREPLICAS,
                   "push: written, but only %lld of %" PRId64
                   " replicas acknowledged it within %" PRId64 " ms",
                   dq__reply_type(r) == DQ_R_INTEGER ? dq__reply_int(r) : 0,
                   op->wait_n, op->wait_ms);
        op_error(op, DQ_EREPLICAS, &e);
    }
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
    switch (op->kind) {
    case DQ_OPK_PUSH:
    case DQ_OPK_PUSH_BATCH:
        rc = dq__push_plan_decode(&op->plan, tag, r, &e);
        break;
    case DQ_OPK_POLL:
        dq_jobs_free(op->jobs);
        op->jobs = NULL;
        rc = dq__decode_poll(r, op->lease_ms, &op->jobs, &op->next_us, &e);
        if (rc >= 0)
            op->status = rc;
        break;
    case DQ_OPK_LIST:
        dq_jobs_free(op->jobs);
        op->jobs = NULL;
        rc = dq__decode_list(r, op->which, &op->jobs, &op->now_ms, &e);
        if (rc >= 0)
            op->status = rc;
        break;
    case DQ_OPK_ACK:
    case DQ_OPK_ACK_BATCH: {
        size_t lo = tag * DQ_CHUNK;
        size_t m = op->n - lo < DQ_CHUNK ? op->n - lo : DQ_CHUNK;
        rc = dq__decode_ack(r, m, op->results + lo, &e);
        if (rc >= 0)
            op->acked += rc;
        if (rc >= 0 && op->kind == DQ_OPK_ACK && op->results[0] != 0)
            rc = dq__result_code(op->results[0], "ack", op->id, &e);
        break;
    }
    case DQ_OPK_NACK:
    case DQ_OPK_EXTEND:
        rc = int_result(op, r, &e);
        break;
    case DQ_OPK_CANCEL:
    case DQ_OPK_DEAD_REQUEUE:
    case DQ_OPK_DEAD_PURGE:
        rc = dq__decode_int(r, &op->v, &e);
        break;
    case DQ_OPK_STATS:
        rc = dq__decode_stats(r, op->stats, &e);
        break;
    }
    if (rc < 0)
        op_error(op, rc, &e);
    return DQ_FEED_OK;
}

void dq__op_fail(dq__op *op, int code, const dq__err *e) { op_error(op, code, e); }

int dq__op_wait_cmd(dq__op *op, const char **resp, size_t *len) {
    if (op->failed || op->wait_sent || op->wait_n <= 0)
        return 0;
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
        return DQ_OK;
    case DQ_OPK_PUSH_BATCH:
        return dq__push_plan_count(&op->plan);
    case DQ_OPK_ACK_BATCH:
        return op->acked;
    case DQ_OPK_POLL:
    case DQ_OPK_LIST:
        return op->status;
    default: /* nack, cancel, dead requeue/purge */
        return (int)op->v;
    }
}

void dq__op_clear(dq__op *op) {
    if (op->kind == DQ_OPK_PUSH || op->kind == DQ_OPK_PUSH_BATCH) {
        dq__push_plan_free(&op->plan);
    } else if (op->cmds == &op->one) {
        dq__cmd_free(&op->one);
    } else if (op->cmds != NULL) {
        for (size_t i = 0; i < op->ncmds; i++)
            dq__cmd_free(&op->cmds[i]);
        free(op->cmds);
    }
    free(op->results);
    dq_jobs_free(op->jobs);
    op->cmds = NULL;
    op->results = NULL;
    op->jobs = NULL;
}
