/*
 * async.c - the libevent client: the ops of ops.c over dq__aconn (conn.c),
 * with reconnects, timeouts and safe frees from inside callbacks.
 *
 * Shape.  A "link" is one connection slot that reconnects by itself: a
 * dq__aconn while connected, a backoff timer while not, and one timer that
 * bounds both the connection attempt (DQ_OPT_CONNECT_TIMEOUT_MS) and the
 * silence of Redis while replies are awaited (DQ_OPT_COMMAND_TIMEOUT_MS;
 * replies come in order, so "no reply for T ms while some are pending" is
 * exactly "the oldest pending command is T ms late").  The client has one
 * link for operations; each consumer's watch (the wake-up subscription) has
 * its own.
 *
 * An operation (aop) is an engine op (op.h: checked, chunked, its commands
 * sealed into owned RESP bytes, so the caller's buffers may change once we
 * return) plus its callback.  It waits in `waiting` until the link is up,
 * then sits in `inflight` until every reply came back; the engine decides
 * what each reply means (a NOSCRIPT'd call goes out again as EVAL, a push
 * may still send its WAIT).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "async_int.h"
#include "aconn.h"
#include "op.h"
#include "uri.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

/* ---- Links ------------------------------------------------------------- */

enum { L_WAIT = 0, L_CONNECTING, L_UP, L_CLOSED };

typedef struct link link;
struct link {
    dq_async *a;                 /* client (base, URI, options) */
    dq__aconn *conn;              /* NULL unless connecting or up */
    int state;                   /* L_* */
    int64_t backoff_ms;          /* delay before the next attempt */
    struct event *retry_ev;      /* next connection attempt */
    struct event *tick_ev;       /* connect / reply timeout */
    int64_t connect_deadline_us; /* monotonic */
    int64_t last_us;             /* last reply, or first send while idle */
    size_t pending;              /* commands awaiting replies */
    void *owner;                 /* client or watch */
    void (*up)(link *l);         /* connection ready */
    /* connection lost (was_up) or attempt failed; always the last thing
     * link code does, so the owner may free everything from inside */
    void (*down)(link *l, int code, const char *msg, int was_up);
};

/* ---- Operations -------------------------------------------------------- */

enum { IN_NONE = 0, IN_WAITING, IN_FLIGHT };

/* Callback shapes (which one an op has follows from op.kind). */
enum { CB_STATUS, CB_PUSH, CB_BATCH, CB_JOBS, CB_LIST, CB_RESULTS, CB_EXTEND,
       CB_STATS };

typedef struct aop aop;
struct aop {
    aop *prev, *next;     /* in the client's waiting or inflight list */
    dq_async *a;          /* client */
    int where;            /* IN_* */
    int shape;            /* CB_* */
    void *owner;          /* internal tag (dq__async_set_owner) */
    union {
        dq_status_cb *st;
        dq_push_cb *push;
        dq_batch_cb *batch;
        dq_jobs_cb *jobs;
        dq_list_cb *list;
        dq_results_cb *res;
        dq_extend_cb *ext;
        dq_stats_cb *stats;
        void (*any)(void);
    } cb;                 /* caller's callback (see has_cb) */
    int has_cb;           /* cb set and not forgotten */
    void *ud;             /* caller's userdata */
    int us;               /* poll: next_due in microseconds */
    int64_t deadline_us;  /* waiting: when it gives up (0 = never) */
    size_t next_cmd;      /* next call of op.cmds to send */
    size_t bytes_out;     /* bytes of calls sent and not answered yet */
    size_t outstanding;   /* replies awaited */
    dq__op op;             /* the operation (engine) */
};

typedef struct oplist {
    aop *head, *tail;
    size_t count;
} oplist;

typedef struct grave {
    void (*fn)(void *); /* frees p */
    void *p;
} grave;

struct dq_async {
    dq__core core;            /* options, key cache, id generator */
    dq__uri uri;              /* where to connect */
    struct event_base *base; /* caller's loop */
    dq__err err;              /* last failed call / running callback */
    link main;               /* the operations' connection */
    oplist waiting;          /* not sent yet (link down) */
    oplist inflight;         /* sent, replies outstanding */
    struct event *wait_ev;   /* expiry of the oldest waiting op */
    dq_state_cb *state_cb;   /* state changes */
    void *state_ud;          /* its userdata */
    void *owner;             /* tag for new ops (dq__async_set_owner) */
    int depth;               /* entries from the loop running */
    int freeing;             /* dq_async_free started */
    dq__child children;       /* consumers (list head) */
    grave *graves;           /* objects to free at depth 0 */
    size_t ngraves, graves_cap;
    char where[300];         /* server address for messages */
    int open_rc;             /* error of dq_async_open, 0 if it worked */
    struct evdns_base *dns;  /* resolver of the URI's host name, or NULL */
};

static void link_start(link *l, int64_t delay_ms);

/* ---- Depth and deferred frees ---- */

/* The last of dq_async_free, at depth 0: frees the resolver and the client. */
static void real_free(dq_async *a) {
    if (a->dns != NULL)
        evdns_base_free(a->dns, 1); /* links are closed: nothing waits */
    free(a->graves);
    dq__uri_clear(&a->uri);
    dq__core_clear(&a->core);
    free(a);
}

void dq__async_enter(dq_async *a) { a->depth++; }

int dq__async_leave(dq_async *a) {
    if (--a->depth > 0)
        return a->freeing;
    /* Graves may bury more graves while freed: loop by index. */
    a->depth++;
    for (size_t i = 0; i < a->ngraves; i++)
        a->graves[i].fn(a->graves[i].p);
    a->ngraves = 0;
    a->depth--;
    if (a->freeing) {
        real_free(a);
        return 1;
    }
    return 0;
}

int dq__async_closing(const dq_async *a) { return a->freeing; }

void dq__async_bury(dq_async *a, void (*fn)(void *), void *p) {
    if (a->depth == 0) {
        fn(p);
        return;
    }
    if (a->ngraves == a->graves_cap) {
        size_t cap = a->graves_cap ? a->graves_cap * 2 : 8;
        grave *g = realloc(a->graves, cap * sizeof(*g));
        if (g == NULL)
            return; /* out of memory: leak rather than free too early */
        a->graves = g;
        a->graves_cap = cap;
    }
    a->graves[a->ngraves].fn = fn;
    a->graves[a->ngraves].p = p;
    a->ngraves++;
}

struct event_base *dq__async_base(const dq_async *a) { return a->base; }
const dq_options *dq__async_opts(const dq_async *a) { return &a->core.opts; }

void dq__async_wake_channel(dq_async *a, const char *queue, char *out,
                           size_t size) {
    dq__core_keys(&a->core, queue);
    snprintf(out, size, "%s", a->core.keys.chan);
}

void dq__async_set_owner(dq_async *a, void *owner) { a->owner = owner; }

void dq__async_adopt(dq_async *a, dq__child *ch) {
    ch->prev = &a->children;
    ch->next = a->children.next;
    a->children.next->prev = ch;
    a->children.next = ch;
}

void dq__async_disown(dq_async *a, dq__child *ch) {
    (void)a;
    if (ch->next == NULL)
        return;
    ch->prev->next = ch->next;
    ch->next->prev = ch->prev;
    ch->prev = ch->next = NULL;
}

/* ---- Link mechanics ---- */

/* us microseconds as a timeval (negative: 0). */
static struct timeval tv_us(int64_t us) {
    struct timeval tv;
    if (us < 0)
        us = 0;
    tv.tv_sec = (time_t)(us / 1000000);
    tv.tv_usec = (suseconds_t)(us % 1000000);
    return tv;
}

static void link_arm(struct event *ev, int64_t us) {
    struct timeval tv = tv_us(us);
    evtimer_add(ev, &tv);
}

static int64_t cmd_timeout_us(const link *l) {
    return l->a->core.opts.command_timeout_ms * 1000;
}

/* Drops the connection (if any), schedules the next attempt and tells the
 * owner - as the very last step. */
static void link_fail(link *l, int code, const char *msg) {
    int was_up = l->state == L_UP;
    dq__aconn_close(l->conn);
    l->conn = NULL;
    l->pending = 0;
    evtimer_del(l->tick_ev);
    l->state = L_WAIT;
    link_arm(l->retry_ev, l->backoff_ms * 1000);
    l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                       : l->backoff_ms * 2;
    l->down(l, code, msg, was_up);
}

/* The connection's state: ready means up (backoff reset, owner told);
 * anything else fails the link. */
static void link_on_state(void *priv, int code, const char *msg) {
    link *l = priv;
    dq_async *a = l->a;
    dq__async_enter(a);
    if (code == DQ_OK) {
        l->state = L_UP;
        l->backoff_ms = BACKOFF_MIN_MS;
        l->pending = 0;
        evtimer_del(l->tick_ev);
        l->up(l);
    } else {
        link_fail(l, code, msg);
    }
    dq__async_leave(a);
}

/* The retry timer: opens a new connection, bounded by the connect timeout. */
static void link_on_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    link *l = arg;
    dq_async *a = l->a;
    dq__async_enter(a);
    dq__conn_cfg cfg = {&a->uri, &a->core.opts, a->dns};
    dq__err e;
    int rc = dq__aconn_open(&cfg, a->base, link_on_state, l, &l->conn, &e);
    if (rc != DQ_OK) {
        link_fail(l, rc, e.msg);
    } else {
        l->state = L_CONNECTING;
        int64_t ct = a->core.opts.connect_timeout_ms * 1000;
        if (ct > 0) {
            l->connect_deadline_us = dq__mono_us() + ct;
            link_arm(l->tick_ev, ct);
        }
    }
    dq__async_leave(a);
}

/* The link's one timer: fails a connection not ready by its deadline, or one
 * whose replies are later than the command timeout; else re-arms. */
static void link_on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    link *l = arg;
    dq_async *a = l->a;
    char msg[400];
    dq__async_enter(a);
    int64_t now = dq__mono_us();
    if (l->state == L_CONNECTING) {
        if (now >= l->connect_deadline_us) {
            snprintf(msg, sizeof(msg),
                     "connect to %s: not ready within %" PRId64
                     " ms (DQ_OPT_CONNECT_TIMEOUT_MS)",
                     a->where, a->core.opts.connect_timeout_ms);
            link_fail(l, DQ_ETIMEDOUT, msg);
        } else {
            link_arm(l->tick_ev, l->connect_deadline_us - now);
        }
    } else if (l->state == L_UP && l->pending > 0 && cmd_timeout_us(l) > 0) {
        int64_t due = l->last_us + cmd_timeout_us(l);
        if (now >= due) {
            snprintf(msg, sizeof(msg),
                     "%s did not answer within %" PRId64
                     " ms (DQ_OPT_COMMAND_TIMEOUT_MS): connection dropped",
                     a->where, a->core.opts.command_timeout_ms);
            link_fail(l, DQ_ETIMEDOUT, msg);
        } else {
            link_arm(l->tick_ev, due - now);
        }
    }
    dq__async_leave(a);
}

/* Sets l up for owner (not started yet): its callbacks and its two timers. */
static int link_init(link *l, dq_async *a, void *owner, void (*up)(link *),
                     void (*down)(link *, int, const char *, int)) {
    memset(l, 0, sizeof(*l));
    l->a = a;
    l->owner = owner;
    l->up = up;
    l->down = down;
    l->backoff_ms = BACKOFF_MIN_MS;
    l->retry_ev = evtimer_new(a->base, link_on_retry, l);
    l->tick_ev = evtimer_new(a->base, link_on_tick, l);
    if (l->retry_ev == NULL || l->tick_ev == NULL)
        return DQ_ENOMEM;
    return DQ_OK;
}

/* First attempt, from the loop (so open never calls back). */
static void link_start(link *l, int64_t delay_ms) {
    l->state = L_WAIT;
    link_arm(l->retry_ev, delay_ms * 1000);
}

/* Makes the link inert: no callback of it runs after this. */
static void link_close(link *l) {
    dq__aconn_close(l->conn);
    l->conn = NULL;
    if (l->retry_ev != NULL)
        event_free(l->retry_ev);
    if (l->tick_ev != NULL)
        event_free(l->tick_ev);
    l->retry_ev = l->tick_ev = NULL;
    l->state = L_CLOSED;
}

/* One more command awaits its reply. */
static void link_sent(link *l) {
    if (l->pending++ == 0) {
        l->last_us = dq__mono_us();
        if (cmd_timeout_us(l) > 0)
            link_arm(l->tick_ev, cmd_timeout_us(l));
    }
}

static void link_replied(link *l) {
    if (l->pending > 0)
        l->pending--;
    l->last_us = dq__mono_us();
}

/* ---- Operation lists ---- */

/* Appends op to L, which is the list `where` names. */
static void list_push(oplist *L, aop *op, int where) {
    op->prev = L->tail;
    op->next = NULL;
    if (L->tail != NULL)
        L->tail->next = op;
    else
        L->head = op;
    L->tail = op;
    L->count++;
    op->where = where;
}

/* Takes op out of whichever list holds it (if any). */
static void list_unlink(dq_async *a, aop *op) {
    oplist *L = op->where == IN_WAITING  ? &a->waiting
                : op->where == IN_FLIGHT ? &a->inflight
                                         : NULL;
    if (L == NULL)
        return;
    if (op->prev != NULL)
        op->prev->next = op->next;
    else
        L->head = op->next;
    if (op->next != NULL)
        op->next->prev = op->prev;
    else
        L->tail = op->prev;
    L->count--;
    op->prev = op->next = NULL;
    op->where = IN_NONE;
}

static void op_free(aop *op) {
    dq__op_clear(&op->op);
    free(op);
}

/* Calls op's callback (if any) with the engine's result and frees it.  The
 * op is unlinked first: the callback may start ops or free the client. */
static void op_finish(dq_async *a, aop *op) {
    list_unlink(a, op);
    const dq__op *o = &op->op;
    int st = dq__op_status(o);
    if (op->has_cb) {
        if (o->failed)
            a->err = o->err;
        else
            dq__err_clear(&a->err);
        int ok = st >= 0 || st == DQ_EREPLICAS;
        dq_jobs *jobs = st > 0 ? o->jobs : NULL;
        switch (op->shape) {
        case CB_PUSH:
            op->cb.push(a, ok ? o->plan.ids : NULL, ok ? o->plan.outcomes[0] : 0,
                        st, op->ud);
            break;
        case CB_BATCH:
            op->cb.batch(a, o->plan.n, ok ? o->plan.ids : NULL,
                         ok ? o->plan.outcomes : NULL, st, op->ud);
            break;
        case CB_JOBS: {
            int64_t next = 0;
            if (st == 0 && o->kind == DQ_OPK_POLL)
                next = op->us ? o->next_us
                       : o->next_us < 0 ? -1
                                        : (o->next_us + 999) / 1000;
            op->cb.jobs(a, jobs, next, st, op->ud);
            break;
        }
        case CB_LIST:
            op->cb.list(a, jobs, st >= 0 ? o->now_ms : 0, st, op->ud);
            break;
        case CB_RESULTS:
            op->cb.res(a, o->n, st >= 0 ? o->results : NULL, st, op->ud);
            break;
        case CB_EXTEND:
            op->cb.ext(a, st >= 0 ? o->v : 0, st, op->ud);
            break;
        case CB_STATS: {
            const int64_t *s = o->stats;
            op->cb.stats(a, s[0], s[1], s[2], s[3], s[4], st, op->ud);
            break;
        }
        default: /* ack, nack, cancel, dead requeue/purge */
            op->cb.st(a, st, op->ud);
            break;
        }
        if (!a->freeing)
            dq__err_clear(&a->err);
    }
    op_free(op);
}

/* Fails op with code (msg prefixed with the op's name) and finishes it. */
static void op_finish_code(dq_async *a, aop *op, int code, const char *msg) {
    dq__err e;
    dq__err_set(&e, code, "%s: %s", op->op.what, msg);
    dq__op_fail(&op->op, code, &e);
    op_finish(a, op);
}

/* ---- Sending and replies ---- */

static void on_reply(void *priv, size_t tag, const dq__reply *r);

/* Sends command tag of op (its engine-made RESP bytes; tag == ncmds: the
 * WAIT). */
static int op_send_one(dq_async *a, aop *op, size_t tag, const char *resp,
                       size_t len) {
    dq__err e;
    int rc = dq__aconn_send_raw(a->main.conn, resp, len, on_reply, op, tag,
                                &e);
    if (rc != DQ_OK) {
        dq__op_fail(&op->op, rc, &e);
        return rc;
    }
    link_sent(&a->main);
    op->outstanding++;
    return DQ_OK;
}

/* Sends op's next calls while at most DQ_CHUNK_BYTES of them await their
 * replies (at least one): a batch of big payloads then never sits whole in
 * hiredis's output buffer, which a non-blocking link drains with a memmove
 * of the rest after every partial write (quadratic in its size).  Returns
 * the number sent; on a send failure op has the error. */
static size_t op_send_more(dq_async *a, aop *op) {
    size_t sent = 0;
    /* Like the sync client's pipeline, later calls go out even after one
     * failed in Redis: each call stands on its own. */
    while (op->next_cmd < op->op.ncmds) {
        dq__cmd *c = &op->op.cmds[op->next_cmd];
        if (op->bytes_out > 0 && op->bytes_out + c->resp_len > DQ_CHUNK_BYTES)
            break;
        if (op_send_one(a, op, op->next_cmd, c->resp, c->resp_len) != DQ_OK)
            break;
        op->bytes_out += c->resp_len;
        op->next_cmd++;
        sent++;
    }
    return sent;
}

/* Starts sending op on the main link.  Returns the number of calls sent;
 * 0 means a send failed and op has the error. */
static size_t op_send(dq_async *a, aop *op) {
    size_t sent = op_send_more(a, op);
    if (sent > 0)
        list_push(&a->inflight, op, IN_FLIGHT);
    return sent;
}

/* Arms the wait timer for the oldest waiting op's deadline, or stops it. */
static void arm_wait(dq_async *a) {
    if (a->waiting.head == NULL || a->waiting.head->deadline_us == 0) {
        evtimer_del(a->wait_ev);
        return;
    }
    link_arm(a->wait_ev, a->waiting.head->deadline_us - dq__mono_us());
}

/* Queues a built op: sent now when the link is up, else waits.  Returns
 * DQ_OK (the callback will come) or an error (op freed, no callback). */
static int op_submit(dq_async *a, aop *op) {
    if (a->main.state == L_UP) {
        if (op_send(a, op) == 0) {
            int rc = op->op.status;
            a->err = op->op.err;
            op_free(op);
            return rc;
        }
        return DQ_OK;
    }
    int64_t t = a->core.opts.command_timeout_ms * 1000;
    op->deadline_us = t > 0 ? dq__mono_us() + t : 0;
    list_push(&a->waiting, op, IN_WAITING);
    if (a->waiting.head == op)
        arm_wait(a);
    return DQ_OK;
}

/* A reply for op: the engine decodes it; a NOSCRIPT'd call goes out again
 * as EVAL, and after the last reply a push may still send its WAIT. */
static void on_reply(void *priv, size_t tag, const dq__reply *r) {
    aop *op = priv;
    dq_async *a = op->a;
    dq__async_enter(a);
    link_replied(&a->main);
    op->outstanding--;
    if (tag < op->op.ncmds)
        op->bytes_out -= op->op.cmds[tag].resp_len;
    int act = dq__op_feed(&op->op, tag, r);
    if (act == DQ_FEED_RESEND) {
        dq__cmd *c = &op->op.cmds[tag];
        if (op_send_one(a, op, tag, c->resp, c->resp_len) == DQ_OK)
            op->bytes_out += c->resp_len;
    }
    op_send_more(a, op);
    const char *wait;
    size_t wlen;
    if (op->outstanding == 0 && dq__op_wait_cmd(&op->op, &wait, &wlen))
        op_send_one(a, op, op->op.ncmds, wait, wlen);
    if (op->outstanding == 0)
        op_finish(a, op);
    dq__async_leave(a);
}

/* ---- The main link's owner: the client ---- */

/* The main link is up: sends the waiting ops, then reports DQ_CONNECTED. */
static void main_up(link *l) {
    dq_async *a = l->owner;
    size_t n = a->waiting.count;
    for (size_t i = 0; i < n && !a->freeing && a->main.state == L_UP; i++) {
        aop *op = a->waiting.head;
        if (op == NULL)
            break;
        list_unlink(a, op);
        if (op_send(a, op) == 0)
            op_finish(a, op);
    }
    if (a->freeing)
        return;
    arm_wait(a);
    if (a->state_cb != NULL && a->main.state == L_UP)
        a->state_cb(a, DQ_CONNECTED, 0, "", a->state_ud);
}

/* Fails the first n ops of list L (later ones were added by callbacks). */
static void fail_ops(dq_async *a, oplist *L, size_t n, int code,
                     const char *msg) {
    for (size_t i = 0; i < n && !a->freeing; i++) {
        aop *op = L->head;
        if (op == NULL)
            break;
        op_finish_code(a, op, code, msg);
    }
}

/* The main link went down: reports it, fails the ops in flight and, when an
 * attempt failed, those that waited for it. */
static void main_down(link *l, int code, const char *msg, int was_up) {
    dq_async *a = l->owner;
    size_t nfl = a->inflight.count;
    size_t nwait = was_up ? 0 : a->waiting.count;
    if (a->state_cb != NULL) {
        a->state_cb(a, DQ_DISCONNECTED, code, msg, a->state_ud);
        if (a->freeing)
            return;
    }
    /* In flight: lost with the connection (may or may not have run).
     * Waiting: they waited for this attempt, which failed. */
    fail_ops(a, &a->inflight, nfl, code, msg);
    fail_ops(a, &a->waiting, nwait, code, msg);
    if (!a->freeing)
        arm_wait(a);
}

/* Fails the waiting ops whose deadline passed before the link came up. */
static void on_wait_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq_async *a = arg;
    char msg[400];
    dq__async_enter(a);
    int64_t now = dq__mono_us();
    aop *op;
    snprintf(msg, sizeof(msg),
             "not connected to %s within %" PRId64
             " ms (DQ_OPT_COMMAND_TIMEOUT_MS)",
             a->where, a->core.opts.command_timeout_ms);
    while (!a->freeing && (op = a->waiting.head) != NULL &&
           op->deadline_us != 0 && op->deadline_us <= now)
        op_finish_code(a, op, DQ_ETIMEDOUT, msg);
    if (!a->freeing)
        arm_wait(a);
    dq__async_leave(a);
}

/* ---- Client ---- */

int dq_async_open(struct event_base *base, const char *uri,
                  const dq_options *opts, dq_async **out) {
    if (out == NULL)
        return DQ_ENULL;
    dq_async *a = calloc(1, sizeof(*a));
    *out = a;
    if (a == NULL)
        return DQ_ENOMEM;
    a->children.next = a->children.prev = &a->children;
    a->base = base;
    int rc = DQ_OK;
    if (dq__core_init(&a->core, opts) != DQ_OK)
        rc = dq__err_set(&a->err, DQ_ENOMEM, "out of memory");
    else if (base == NULL)
        rc = dq__err_set(&a->err, DQ_ENULL, "base is NULL");
    else
        rc = dq__uri_parse(uri, &a->uri, &a->err);
    if (rc != DQ_OK)
        goto fail;
    a->core.db = a->uri.db;
    if ((rc = dq__tls_check(&a->core.opts, &a->uri, &a->err)) != DQ_OK)
        goto fail;
    /* A host name is resolved by libevent's evdns (hosts file, then the
     * system's name servers) instead of a blocking getaddrinfo inside the
     * loop; DISABLE_WHEN_INACTIVE keeps an idle resolver from holding the
     * loop open. */
    if (a->uri.kind == DQ_URI_TCP && !dq__numeric_host(a->uri.host) &&
        (a->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                           EVDNS_BASE_DISABLE_WHEN_INACTIVE)) ==
            NULL) {
        rc = dq__err_set(&a->err, DQ_ENOMEM, "cannot start a resolver for %s",
                        a->uri.host);
        goto fail;
    }
    if (a->uri.kind == DQ_URI_UNIX)
        snprintf(a->where, sizeof(a->where), "unix:%s", a->uri.path);
    else
        snprintf(a->where, sizeof(a->where), "%s:%d", a->uri.host,
                 a->uri.port);
    a->wait_ev = evtimer_new(base, on_wait_timer, a);
    if (a->wait_ev == NULL ||
        link_init(&a->main, a, a, main_up, main_down) != DQ_OK) {
        rc = dq__err_set(&a->err, DQ_ENOMEM, "out of memory");
        goto fail;
    }
    link_start(&a->main, 0);
    return DQ_OK;
fail:
    /* The client holds the message; calls on it return this code. */
    a->open_rc = rc;
    a->main.state = L_CLOSED;
    return rc;
}

void dq_async_free(dq_async *a) {
    if (a == NULL || a->freeing)
        return;
    a->freeing = 1;
    dq__async_enter(a);
    while (a->children.next != NULL && a->children.next != &a->children) {
        dq__child *ch = a->children.next;
        dq__async_disown(a, ch);
        ch->release(ch);
    }
    link_close(&a->main);
    if (a->wait_ev != NULL)
        event_free(a->wait_ev);
    a->wait_ev = NULL;
    aop *op;
    while ((op = a->inflight.head) != NULL || (op = a->waiting.head) != NULL)
        op_finish_code(a, op, DQ_ECANCELED,
                       "canceled: the client is being freed");
    dq__async_leave(a);
}

int dq_async_set_state_cb(dq_async *a, dq_state_cb *cb, void *userdata) {
    if (a == NULL)
        return DQ_ENULL;
    a->state_cb = cb;
    a->state_ud = userdata;
    return DQ_OK;
}

int dq_async_connected(const dq_async *a) {
    return a != NULL && a->main.state == L_UP;
}

const char *dq_async_errmsg(const dq_async *a) {
    if (a == NULL)
        return "client is NULL (out of memory, or NULL passed)";
    return a->err.msg;
}

size_t dq_async_pending(const dq_async *a) {
    return a == NULL ? 0 : a->waiting.count + a->inflight.count;
}

void dq__async_forget(dq_async *a, void *owner) {
    for (aop *op = a->waiting.head; op != NULL; op = op->next)
        if (op->owner == owner)
            op->has_cb = 0;
    for (aop *op = a->inflight.head; op != NULL; op = op->next)
        if (op->owner == owner)
            op->has_cb = 0;
}

/* Entry of every operation: clears the last error. */
#define ENTER(a)                                                          \
    do {                                                                  \
        if ((a) == NULL)                                                  \
            return DQ_ENULL;                                              \
        if ((a)->open_rc != DQ_OK)                                        \
            return (a)->open_rc;                                          \
        if ((a)->freeing)                                                 \
            return dq__err_set(&(a)->err, DQ_ECLOSED,                      \
                              "the client is being freed");               \
        dq__err_clear(&(a)->err);                                          \
    } while (0)

/* ---- Operations: build with the engine, then submit ---- */

/* Starts op (built with build_rc; its commands own their bytes) with
 * callback cb of shape: sent now, or queued until the link is up.  Returns
 * DQ_OK (the callback will come) or the error (nothing sent, no
 * callback). */
static int submit(dq_async *a, aop *op, int build_rc, int shape,
                  void (*cb)(void), void *userdata) {
    if (build_rc != DQ_OK) {
        op_free(op);
        return build_rc;
    }
    op->shape = shape;
    op->cb.any = cb;
    op->has_cb = cb != NULL;
    op->ud = userdata;
    return op_submit(a, op);
}

/* A new op, or NULL (a->err says why). */
static aop *op_new(dq_async *a) {
    aop *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        dq__err_set(&a->err, DQ_ENOMEM, "out of memory");
        return NULL;
    }
    op->a = a;
    op->owner = a->owner;
    return op;
}

/* Casts a typed callback to the union's generic slot (same representation
 * for every function pointer; called back through its own type). */
#define CB(f) ((void (*)(void))(f))

/* Declares `aop *op` for the calling operation (DQ_ENOMEM when out of
 * memory). */
#define NEW_OP(a)                    \
    aop *op = op_new(a);             \
    if (op == NULL)                  \
        return DQ_ENOMEM

/* dq_async_push and dq_async_push_at: one job, t a delay or (absolute) a
 * time. */
static int push_one(dq_async *a, const char *queue, const void *payload,
                    size_t len, int64_t t, int absolute, const char *id,
                    int flags, dq_push_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    const void *pl[1] = {payload};
    const char *ids[1] = {id};
    int rc = dq__op_push(&op->op, &a->core, 0, queue, 1, pl, &len, &t,
                        absolute, ids, flags, &a->err);
    return submit(a, op, rc, CB_PUSH, CB(cb), userdata);
}

int dq_async_push(dq_async *a, const char *queue, const void *payload,
                  size_t len, int64_t delay_ms, const char *id, int flags,
                  dq_push_cb *cb, void *userdata) {
    return push_one(a, queue, payload, len, delay_ms, 0, id, flags, cb,
                    userdata);
}

int dq_async_push_at(dq_async *a, const char *queue, const void *payload,
                     size_t len, int64_t at_ms, const char *id, int flags,
                     dq_push_cb *cb, void *userdata) {
    return push_one(a, queue, payload, len, at_ms, 1, id, flags, cb,
                    userdata);
}

int dq_async_push_batch(dq_async *a, const char *queue, size_t n,
                        const void *const *payloads, const size_t *lens,
                        const int64_t *delays_ms, const char *const *ids,
                        int flags, dq_batch_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_push(&op->op, &a->core, 1, queue, n, payloads, lens,
                        delays_ms, 0, ids, flags, &a->err);
    return submit(a, op, rc, CB_BATCH, CB(cb), userdata);
}

int dq_async_cancel(dq_async *a, const char *queue, const char *id,
                    int flags, dq_status_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_cancel(&op->op, &a->core, queue, id, flags, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

/* dq_async_poll and dq__async_poll_us (us: next due in microseconds). */
static int poll_common(dq_async *a, const char *queue, int max,
                       int64_t lease_ms, int us, dq_jobs_cb *cb,
                       void *userdata) {
    ENTER(a);
    NEW_OP(a);
    op->us = us;
    int rc = dq__op_poll(&op->op, &a->core, queue, max, lease_ms, &a->err);
    return submit(a, op, rc, CB_JOBS, CB(cb), userdata);
}

int dq_async_poll(dq_async *a, const char *queue, int max, int64_t lease_ms,
                  dq_jobs_cb *cb, void *userdata) {
    return poll_common(a, queue, max, lease_ms, 0, cb, userdata);
}

int dq__async_poll_us(dq_async *a, const char *queue, int max,
                     int64_t lease_ms, dq_jobs_cb *cb, void *userdata) {
    return poll_common(a, queue, max, lease_ms, 1, cb, userdata);
}

int dq_async_ack(dq_async *a, const char *queue, const char *id,
                 const char *token, dq_status_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    const char *ids[1] = {id};
    const char *toks[1] = {token};
    int rc = dq__op_ack(&op->op, &a->core, 0, queue, 1, ids, toks, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_ack_batch(dq_async *a, const char *queue, size_t n,
                       const char *const *ids, const char *const *tokens,
                       dq_results_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_ack(&op->op, &a->core, 1, queue, n, ids, tokens, &a->err);
    return submit(a, op, rc, CB_RESULTS, CB(cb), userdata);
}

int dq_async_nack(dq_async *a, const char *queue, const char *id,
                  const char *token, int64_t delay_ms, int flags,
                  dq_status_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_nack(&op->op, &a->core, queue, id, token, delay_ms, flags,
                        &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_extend(dq_async *a, const char *queue, const char *id,
                    const char *token, int64_t lease_ms, dq_extend_cb *cb,
                    void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_extend(&op->op, &a->core, queue, id, token, lease_ms,
                          &a->err);
    return submit(a, op, rc, CB_EXTEND, CB(cb), userdata);
}

int dq_async_dead_list(dq_async *a, const char *queue, int64_t offset,
                       int count, dq_jobs_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_list(&op->op, &a->core, queue, DQ_LIST_DEAD, offset, count,
                        &a->err);
    return submit(a, op, rc, CB_JOBS, CB(cb), userdata);
}

int dq_async_list(dq_async *a, const char *queue, int which, int64_t offset,
                  int count, dq_list_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_list(&op->op, &a->core, queue, which, offset, count,
                        &a->err);
    return submit(a, op, rc, CB_LIST, CB(cb), userdata);
}

int dq_async_dead_requeue(dq_async *a, const char *queue, const char *id,
                          int64_t delay_ms, dq_status_cb *cb,
                          void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_dead(&op->op, &a->core, 0, queue, id, delay_ms, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_dead_purge(dq_async *a, const char *queue, const char *id,
                        dq_status_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_dead(&op->op, &a->core, 1, queue, id, 0, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_stats(dq_async *a, const char *queue, dq_stats_cb *cb,
                   void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_stats(&op->op, &a->core, queue, &a->err);
    return submit(a, op, rc, CB_STATS, CB(cb), userdata);
}

/* ---- Watch: the wake-up subscription of a consumer ---- */

struct dq__watch {
    dq_async *a;      /* client */
    link l;           /* its own connection */
    char *channel;    /* channel subscribed to */
    dq__watch_fn *fn;  /* consumer's callback */
    void *ud;         /* its userdata */
    int subscribed;   /* confirmation received on this connection */
};

/* Subscription replies: the first confirmation on a connection reports
 * ready, a message a wake-up; any confirmation answers a health check. */
static void watch_on_sub(void *priv, size_t tag, const dq__reply *r) {
    (void)tag;
    dq__watch *w = priv;
    dq_async *a = w->a;
    int ev = 0;
    dq__async_enter(a);
    if (dq__reply_type(r) == DQ_R_ARRAY && dq__reply_len(r) >= 1) {
        size_t len;
        const char *kind = dq__reply_str(dq__reply_at(r, 0), &len);
        if (len == 9 && memcmp(kind, "subscribe", 9) == 0) {
            link_replied(&w->l);
            if (!w->subscribed) {
                w->subscribed = 1;
                ev = DQ_WATCH_READY;
            }
        } else if (len == 7 && memcmp(kind, "message", 7) == 0) {
            w->l.last_us = dq__mono_us();
            ev = DQ_WATCH_WAKE;
        }
    }
    if (ev != 0)
        w->fn(w->ud, ev); /* last: it may close the watch */
    dq__async_leave(a);
}

/* The watch's link is up: subscribes (a failed send fails the link). */
static void watch_up(link *l) {
    dq__watch *w = l->owner;
    dq__err e;
    int rc = dq__aconn_subscribe(l->conn, w->channel, watch_on_sub, w, &e);
    if (rc != DQ_OK)
        link_fail(l, rc, e.msg);
    else
        link_sent(l);
}

/* The subscription went with the link: the next confirmation reports ready
 * again. */
static void watch_down(link *l, int code, const char *msg, int was_up) {
    (void)code;
    (void)msg;
    (void)was_up;
    dq__watch *w = l->owner;
    w->subscribed = 0;
}

static void watch_free(void *p) {
    dq__watch *w = p;
    free(w->channel);
    free(w);
}

int dq__watch_open(dq_async *a, const char *channel, dq__watch_fn *fn,
                  void *userdata, dq__watch **out) {
    *out = NULL;
    dq__watch *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return DQ_ENOMEM;
    w->a = a;
    w->fn = fn;
    w->ud = userdata;
    if ((w->channel = strdup(channel)) == NULL ||
        link_init(&w->l, a, w, watch_up, watch_down) != DQ_OK) {
        link_close(&w->l);
        watch_free(w);
        return DQ_ENOMEM;
    }
    link_start(&w->l, 0);
    *out = w;
    return DQ_OK;
}

void dq__watch_check(dq__watch *w) {
    if (w == NULL || w->l.state != L_UP || w->l.pending > 0)
        return;
    dq__err e;
    int rc = dq__aconn_subscribe(w->l.conn, w->channel, watch_on_sub, w, &e);
    if (rc == DQ_OK)
        link_sent(&w->l);
}

int dq__watch_ready(const dq__watch *w) { return w != NULL && w->subscribed; }

void dq__watch_close(dq__watch *w) {
    if (w == NULL)
        return;
    link_close(&w->l);
    dq__async_bury(w->a, watch_free, w);
}
