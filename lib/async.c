/*
 * async.c - the libevent client: the engine's ops (op.h) over the links and
 * routes of alinks.h, with timeouts, retries and safe frees from inside
 * callbacks.
 *
 * Shape.  The routes hold the links to what the URI names: the one node,
 * the primary that Sentinels name, or one link per node of a Redis Cluster;
 * each consumer's watch (its wake-up subscription) has a link of its own.
 *
 * An operation (aop) is an engine op (op.h: checked, chunked, its calls
 * sealed into owned RESP bytes, so the caller's buffers may change once we
 * return) plus its callback.  Each call goes to the link of the node that
 * owns its slot (the one link of a single node), the calls to one node
 * pipelined; a call whose link is not up yet waits for it.  The op sits in
 * `inflight` while replies are out, in `waiting` while none are and calls
 * wait (for a link, the slot map, the primary, or the pause before a
 * retry), bounded by the command timeout.  The engine decides what each
 * reply means: done, again as EVAL (NOSCRIPT), again elsewhere (MOVED;
 * ASK, after an ASKING), again after a pause (TRYAGAIN, CLUSTERDOWN,
 * READONLY...: 1 ms doubling to 100 ms); once every reply is in, maybe
 * more calls (dq__op_next), then a push's WAIT.
 *
 * A reply names its call by its tag: the call's index (with ASK_TAG: the
 * +OK of the ASKING sent before it; ncmds: the WAIT), and each call
 * records the link it went on.  So a link that fails takes exactly its own
 * calls with it: their ops fail with the link's error (a lost call may or
 * may not have run), each once its replies on other links are in, while
 * calls that were still waiting keep waiting for the route to come back.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "alinks.h"
#include "async_int.h"
#include "aconn.h"
#include "op.h"
#include "route.h"
#include "uri.h"

/* ---- Operations -------------------------------------------------------- */

enum { IN_NONE = 0, IN_WAITING, IN_FLIGHT };

/* Callback shapes (which one an op has follows from op.kind). */
enum { CB_STATUS, CB_PUSH, CB_BATCH, CB_JOBS, CB_LIST, CB_RESULTS, CB_EXTEND,
       CB_STATS, CB_COUNTS, CB_GET, CB_CONFIG, CB_COUNT_DUE,
       CB_GROUPS };

/* What a call of an op is at (cst[]): to send, to send to its ASK target
 * (op->asks.to[op->cask[i]]) after an
 * ASKING, sent, done; with flags for a call sent behind an ASKING and for
 * that ASKING's +OK still awaited. */
enum { C_TODO = 0, C_ASK = 1, C_FLIGHT = 2, C_DONE = 3 };
#define C_STATE 0x03
#define C_ASKED 0x04
#define C_OKWAIT 0x08
/* Tag of an ASKING's reply: the call's index with this bit.  The WAIT
 * sent on the k-th connection an op wrote through has tag ncmds + k. */
#define ASK_TAG ((size_t)1 << (sizeof(size_t) * 8 - 1))

/* A connection an op wrote through: its WAIT goes there. */
typedef struct used {
    dq__alink *l;      /* the link */
    dq__aconn *conn;   /* its connection then (a new one saw no writes) */
    int wait_out;      /* the WAIT's reply is awaited */
} used;

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
        dq_counters_cb *counts;
        dq_get_cb *get;
        dq_config_cb *conf;
        dq_count_due_cb *due;
        dq_group_stats_cb *groups;
        void (*any)(void);
    } cb;                 /* caller's callback (see has_cb) */
    int has_cb;           /* cb set and not forgotten */
    void *ud;             /* caller's userdata */
    int us;               /* poll: next_due in microseconds */
    int64_t deadline_us;  /* waiting gives up then (0 = never) */
    int64_t retry_end_us; /* retries give up then */
    int64_t retry_at_us;  /* no call goes out before (0 = no pause) */
    int64_t pause_us;     /* the last pause before a retry */
    size_t bytes_out;     /* bytes of calls sent and not answered yet */
    size_t outstanding;   /* replies awaited, on every link */
    size_t ntodo;         /* calls to send (C_TODO, C_ASK) */
    size_t first_todo;    /* no call before it is to send */
    size_t ncap;          /* room in cst / clink */
    unsigned char *cst;   /* per call: C_* and flags */
    dq__alink **clink;    /* per call: the link it went on */
    unsigned char *cask;  /* per call: its ASK target (C_ASK), in asks */
    unsigned char cst1;   /* room for one call */
    dq__alink *clink1;
    unsigned char cask1;
    used *usedv;          /* the connections its calls ran on */
    int nused, capused;
    used used1;           /* room for one */
    size_t wait_out;      /* WAIT replies awaited */
    int aborted;          /* failed by the client: nothing more is sent */
    int lost;             /* a link took calls of it */
    int redirects;        /* MOVED replies so far */
    dq__asks asks;        /* where C_ASK calls go */
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
    dq__routes *routes;       /* the links to the node(s) */
    oplist waiting;          /* nothing out: calls wait for a route */
    oplist inflight;         /* replies outstanding */
    struct event *wait_ev;   /* next deadline or retry of a waiting op */
    int64_t wait_armed_us;   /* when wait_ev fires (if pending) */
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
    struct evdns_base *dns;  /* resolver of host names, or NULL */
    dq__watch *watches;      /* open watches (list) */
    dq__watch_follow_fn *follow; /* awake.c's, told of route changes */
    dq__ahost host;          /* what the links see of the client */
    int reported;            /* connected, as last told the state cb */
};

/* ---- Depth and deferred frees ---- */

/* The last of dq_async_free, at depth 0: frees the routes, the resolver
 * and the client. */
static void real_free(dq_async *a) {
    dq__routes_free(a->routes);
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
dq__routes *dq__async_routes(const dq_async *a) { return a->routes; }
const dq__ahost *dq__async_host(const dq_async *a) { return &a->host; }
const dq__uri *dq__async_uri(const dq_async *a) { return &a->uri; }
dq__core *dq__async_core(dq_async *a) { return &a->core; }
const char *dq__async_where(const dq_async *a) { return a->where; }
dq__watch **dq__async_watches(dq_async *a) { return &a->watches; }
void dq__async_on_routes(dq_async *a, dq__watch_follow_fn *fn) { a->follow = fn; }
const dq_options *dq__async_opts(const dq_async *a) { return &a->core.opts; }

void dq__async_wake_channel(dq_async *a, const char *queue, int part,
                           char *out, size_t size) {
    dq__core_keys_part(&a->core, queue, part);
    /* the client's own channel: see lua/include/wake.lua */
    snprintf(out, size, "%s:%s", a->core.keys.chan, dq__core_me(&a->core));
}

int dq__async_partitions(const dq_async *a) { return a->core.partitions; }

void dq__async_woken_all(dq_async *a, const char *queue) {
    dq__core_woken_all(&a->core, queue);
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

/* ---- The client as the links' host (alink.h) ---- */

static void host_enter(void *ud) { dq__async_enter(ud); }
static int host_leave(void *ud) { return dq__async_leave(ud); }
static int host_closing(const void *ud) { return dq__async_closing(ud); }

/* The resolver for a link to u: the client's, made on first use for a
 * host name (NULL for an address or a unix socket). */
static struct evdns_base *host_dns(void *ud, const dq__uri *u) {
    dq_async *a = ud;
    if (u == NULL || u->kind != DQ_URI_TCP || dq__numeric_host(u->host))
        return a->dns;
    /* A host name is resolved by libevent's evdns (hosts file, then the
     * system's name servers) instead of a blocking getaddrinfo inside the
     * loop; DISABLE_WHEN_INACTIVE keeps an idle resolver from holding the
     * loop open. */
    if (a->dns == NULL)
        a->dns = evdns_base_new(a->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                             EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    return a->dns;
}

static void host_state(void *ud, int state, int code, const char *msg) {
    dq_async *a = ud;
    if (a->state_cb != NULL)
        a->state_cb(a, state, code, msg, a->state_ud);
}

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
    if (op->cst != &op->cst1)
        free(op->cst);
    if (op->clink != &op->clink1)
        free(op->clink);
    if (op->cask != &op->cask1)
        free(op->cask);
    if (op->usedv != &op->used1)
        free(op->usedv);
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
            op->cb.res(a, o->n, ok ? o->results : NULL, st, op->ud);
            break;
        case CB_EXTEND:
            op->cb.ext(a, st >= 0 ? o->v : 0, st, op->ud);
            break;
        case CB_STATS: {
            const int64_t *s = o->stats;
            op->cb.stats(a, s[0], s[1], s[2], s[3], s[4], st, op->ud);
            break;
        }
        case CB_COUNTS: {
            int got = st == DQ_OK;
            const int64_t *s = o->stats;
            op->cb.counts(a, got ? s[0] : 0, got ? s[1] : 0, got ? s[2] : 0,
                          got ? s[3] : 0, st, op->ud);
            break;
        }
        case CB_GET:
            op->cb.get(a, st == 1 ? o->info : NULL, st, op->ud);
            break;
        case CB_COUNT_DUE:
            op->cb.due(a, st == DQ_OK ? (size_t)o->nbounds + 1 : 0,
                       st == DQ_OK ? o->due_counts : NULL,
                       st == DQ_OK ? o->now_ms : 0, st, op->ud);
            break;
        case CB_GROUPS:
            op->cb.groups(a, st == DQ_OK ? o->groups : NULL,
                          st == DQ_OK ? (int)dq_group_list_count(o->groups)
                                      : st,
                          op->ud);
            break;
        case CB_CONFIG:
            op->cb.conf(a, o->conf_n,
                        st == DQ_OK && o->kind == DQ_OPK_CONFIG_GET ? o->conf
                                                                    : NULL,
                        st, op->ud);
            break;
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

/* ---- Calls: where they go, their replies ---- */

static void on_reply(void *priv, size_t tag, const dq__reply *r);

/* Readies the per-call state for op's current calls (all to send).
 * DQ_OK or DQ_ENOMEM. */
static int calls_init(aop *op) {
    size_t n = op->op.ncmds;
    if (n > op->ncap) {
        unsigned char *cst = malloc(n), *cask = malloc(n);
        dq__alink **clink = malloc(n * sizeof(*clink));
        if (cst == NULL || clink == NULL || cask == NULL) {
            free(cst);
            free(clink);
            free(cask);
            return DQ_ENOMEM;
        }
        if (op->cst != &op->cst1)
            free(op->cst);
        if (op->clink != &op->clink1)
            free(op->clink);
        if (op->cask != &op->cask1)
            free(op->cask);
        op->cst = cst;
        op->clink = clink;
        op->cask = cask;
        op->ncap = n;
    } else if (op->cst == NULL) {
        op->cst = &op->cst1;
        op->clink = &op->clink1;
        op->cask = &op->cask1;
        op->ncap = 1;
    }
    op->asks.n = 0;
    if (n > 0) {
        memset(op->cst, C_TODO, n);
        memset(op->clink, 0, n * sizeof(*op->clink));
    }
    op->ntodo = n;
    op->first_todo = 0;
    return DQ_OK;
}

/* Call i is to be sent again (st: C_TODO or C_ASK). */
static void call_again(aop *op, size_t i, unsigned char st) {
    op->cst[i] = st;
    op->ntodo++;
    if (i < op->first_todo)
        op->first_todo = i;
}

/* Fails op with e (first error wins) and sends nothing more of it: the
 * calls still to send are dropped; it ends once its replies are in. */
static void op_abort(aop *op, const dq__err *e) {
    dq__op_fail(&op->op, e->code, e);
    for (size_t i = 0; op->ntodo > 0 && i < op->op.ncmds; i++) {
        int st = op->cst[i] & C_STATE;
        if (st == C_TODO || st == C_ASK) {
            op->cst[i] = (unsigned char)((op->cst[i] & ~C_STATE) | C_DONE);
            op->ntodo--;
        }
    }
    op->ntodo = 0;
    op->retry_at_us = 0;
    op->aborted = 1;
}

/* A node said "not now" (op->op.retry_why): the calls to send wait 1 ms,
 * doubling to 100 ms, until the command timeout (then op fails). */
static void op_retry_later(dq_async *a, aop *op) {
    int64_t now = dq__mono_us();
    op->pause_us = op->pause_us == 0       ? 1000
                   : op->pause_us >= 50000 ? 100000
                                           : op->pause_us * 2;
    if (now + op->pause_us > op->retry_end_us) {
        dq__err e;
        int64_t t = a->core.opts.command_timeout_ms;
        dq__err_set(&e, DQ_ETIMEDOUT, "%s: still '%s' after %" PRId64
                                     " ms (not run)",
                   op->op.what, op->op.retry_why, t > 0 ? t : 5000);
        op_abort(op, &e);
        return;
    }
    op->retry_at_us = now + op->pause_us;
}

/* Sends call i of op on l (after an ASKING when ask).  DQ_OK, or the op
 * is aborted with the error. */
static int call_send(aop *op, size_t i, dq__alink *l, int ask) {
    static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
    dq__cmd *c = &op->op.cmds[i];
    dq__err e;
    int rc = DQ_OK;
    if (ask && (rc = dq__alink_send(l, asking, sizeof(asking) - 1, on_reply,
                                    op, i | ASK_TAG, &e)) == DQ_OK) {
        op->cst[i] = C_DONE | C_OKWAIT; /* until the call is sent too */
        op->clink[i] = l;
        op->outstanding++;
    }
    if (rc == DQ_OK)
        rc = dq__alink_send(l, c->resp, c->resp_len, on_reply, op, i, &e);
    if (rc != DQ_OK) {
        if (!(op->cst[i] & C_OKWAIT))
            op->cst[i] = C_DONE;
        op->ntodo--;
        op_abort(op, &e);
        return rc;
    }
    op->cst[i] = (unsigned char)(C_FLIGHT | (ask ? C_ASKED | C_OKWAIT : 0));
    op->clink[i] = l;
    op->ntodo--;
    op->outstanding++;
    op->bytes_out += c->resp_len;
    return DQ_OK;
}

/* Sends the calls of op that can go now: each to the up link of the node
 * that owns its slot (an ASK'd one to the ASK's target, after an ASKING),
 * while at most DQ_CHUNK_BYTES of them await their replies (at least one):
 * a batch of big payloads then never sits whole in hiredis's output
 * buffer, which a non-blocking link drains with a memmove of the rest
 * after every partial write (quadratic in its size).  Like the sync
 * client's pipeline, later calls go out even after one failed in Redis:
 * each call stands on its own.  A call whose link is not up waits (its
 * link is being opened); one for an ASK target that is not up is retried
 * after a pause, at the slot's owner. */
static void op_pump(dq_async *a, aop *op) {
    if (op->ntodo == 0 || op->retry_at_us > dq__mono_us())
        return;
    op->retry_at_us = 0;
    while (op->first_todo < op->op.ncmds &&
           (op->cst[op->first_todo] & C_STATE) != C_TODO &&
           (op->cst[op->first_todo] & C_STATE) != C_ASK)
        op->first_todo++;
    for (size_t i = op->first_todo; i < op->op.ncmds && op->ntodo > 0; i++) {
        int st = op->cst[i] & C_STATE;
        if (st != C_TODO && st != C_ASK)
            continue;
        dq__cmd *c = &op->op.cmds[i];
        if (op->bytes_out > 0 && op->bytes_out + c->resp_len > DQ_CHUNK_BYTES)
            break;
        const dq__redirect *to =
            st == C_ASK ? &op->asks.to[op->cask[i]] : NULL;
        dq__alink *l = to != NULL ? dq__routes_at(a->routes, to->host, to->port)
                                  : dq__routes_get(a->routes, c->slot);
        if (l == NULL && to != NULL) {
            op->cst[i] = (unsigned char)((op->cst[i] & ~C_STATE) | C_TODO);
            snprintf(op->op.retry_why, sizeof(op->op.retry_why),
                     "ASK %d %.80s:%d (not connected yet)", to->slot,
                     to->host, to->port);
            op_retry_later(a, op);
            break;
        }
        if (l == NULL)
            continue;
        if (call_send(op, i, l, st == C_ASK) != DQ_OK)
            break;
    }
}

/* Files op in list `where` (IN_WAITING: the wait timer covers it). */
static void op_file(dq_async *a, aop *op, int where) {
    if (op->where != where) {
        list_unlink(a, op);
        list_push(where == IN_WAITING ? &a->waiting : &a->inflight, op,
                  where);
    }
    if (where != IN_WAITING)
        return;
    int64_t t = op->deadline_us;
    if (op->retry_at_us != 0 && (t == 0 || op->retry_at_us < t))
        t = op->retry_at_us;
    if (t != 0 && (!evtimer_pending(a->wait_ev, NULL) || t < a->wait_armed_us)) {
        struct timeval tv;
        int64_t us = t - dq__mono_us();
        if (us < 0)
            us = 0;
        tv.tv_sec = (time_t)(us / 1000000);
        tv.tv_usec = (suseconds_t)(us % 1000000);
        evtimer_add(a->wait_ev, &tv);
        a->wait_armed_us = t;
    }
}

/* Arms the wait timer for the earliest deadline or retry of the waiting
 * ops, or stops it. */
static void arm_wait(dq_async *a) {
    evtimer_del(a->wait_ev);
    for (aop *op = a->waiting.head; op != NULL; op = op->next)
        op_file(a, op, IN_WAITING);
}

/* Moves op on: sends what can go, files it where it belongs, or - every
 * reply in - starts its next calls (dq__op_next), its WAIT, or ends it. */
static void op_advance(dq_async *a, aop *op) {
    for (;;) {
        op_pump(a, op);
        if (op->outstanding > 0) {
            op_file(a, op, IN_FLIGHT);
            return;
        }
        if (op->ntodo > 0) {
            op_file(a, op, IN_WAITING);
            return;
        }
        if (!op->aborted && dq__op_next(&op->op)) {
            if (calls_init(op) != DQ_OK) {
                dq__err e;
                dq__err_set(&e, DQ_ENOMEM, "%s: out of memory", op->op.what);
                dq__op_fail(&op->op, DQ_ENOMEM, &e);
                break;
            }
            continue;
        }
        const char *wait;
        size_t wlen;
        if (!op->aborted && dq__op_wait_cmd(&op->op, &wait, &wlen)) {
            /* On every connection the writes went through (a partitioned
             * push may write to several primaries): WAIT counts those. */
            for (int k = 0; k < op->nused; k++) {
                used *u = &op->usedv[k];
                dq__err e;
                if (u->l->state != DQ_AL_UP || u->l->conn != u->conn) {
                    /* Replaced after a failure: a WAIT on the new link
                     * would not count these writes. */
                    dq__op_wait_lost(&op->op);
                    break;
                }
                int rc = dq__alink_send(u->l, wait, wlen, on_reply, op,
                                        op->op.ncmds + (size_t)k, &e);
                if (rc != DQ_OK) {
                    dq__op_fail(&op->op, rc, &e);
                    break;
                }
                u->wait_out = 1;
                op->wait_out++;
                op->outstanding++;
            }
            if (op->outstanding > 0) {
                op_file(a, op, IN_FLIGHT);
                return;
            }
        }
        break;
    }
    op_finish(a, op);
}

/* Queues a built op: what can go is sent now, the rest waits (op_file).
 * Returns DQ_OK (the callback will come) or an error (nothing was sent,
 * op freed, no callback). */
static int op_submit(dq_async *a, aop *op) {
    int64_t now = dq__mono_us(), t = a->core.opts.command_timeout_ms * 1000;
    op->deadline_us = t > 0 ? now + t : 0;
    op->retry_end_us = now + (t > 0 ? t : 5000000);
    op->op.routed = dq__routes_routed(a->routes);
    if (calls_init(op) != DQ_OK) {
        int rc = dq__err_set(&a->err, DQ_ENOMEM, "%s: out of memory",
                            op->op.what);
        op_free(op);
        return rc;
    }
    op_pump(a, op);
    if (op->outstanding == 0 && op->op.failed) {
        /* The first send failed: the call fails, without callback. */
        int rc = op->op.status;
        a->err = op->op.err;
        op_free(op);
        return rc;
    }
    if (op->outstanding == 0 && op->ntodo == 0)
        op->retry_at_us = now; /* no call yet: moves on from the loop */
    op_file(a, op, op->outstanding > 0 ? IN_FLIGHT : IN_WAITING);
    return DQ_OK;
}

/* Adds l (its connection now) to those op wrote through. */
static void note_used(aop *op, dq__alink *l) {
    for (int k = 0; k < op->nused; k++)
        if (op->usedv[k].l == l && op->usedv[k].conn == l->conn)
            return;
    if (op->usedv == NULL) {
        op->usedv = &op->used1;
        op->capused = 1;
    } else if (op->nused == op->capused) {
        int cap = op->capused * 2;
        used *v = malloc(sizeof(*v) * (size_t)cap);
        if (v == NULL)
            return; /* out of memory: that WAIT is not sent */
        memcpy(v, op->usedv, sizeof(*v) * (size_t)op->nused);
        if (op->usedv != &op->used1)
            free(op->usedv);
        op->usedv = v;
        op->capused = cap;
    }
    op->usedv[op->nused].l = l;
    op->usedv[op->nused].conn = l->conn;
    op->usedv[op->nused].wait_out = 0;
    op->nused++;
}

/* What the engine made of call i's reply (act), which came on l. */
static void call_took(dq_async *a, aop *op, size_t i, dq__alink *l, int act,
                      int asked) {
    dq__op *o = &op->op;
    if (op->aborted || act == DQ_FEED_OK) {
        op->cst[i] = C_DONE;
        if (act == DQ_FEED_OK)
            note_used(op, l);
        return;
    }
    op->cst[i] = C_DONE;
    /* MOVED loops are bounded here; an ASK is followed by a paused retry
     * whenever its target cannot serve it yet, so the command timeout
     * bounds those. */
    if (act == DQ_FEED_REDIRECT && !o->redir.ask &&
        ++op->redirects > 64 + (int)o->ncmds) {
        dq__err e;
        dq__err_set(&e, DQ_EREDIS, "%s: redirected more than 64 times",
                   o->what);
        op_abort(op, &e);
        return;
    }
    if (act == DQ_FEED_REDIRECT && o->redir.ask) {
        int k = asked ? -1 : dq__asks_index(&op->asks, &o->redir);
        if (k >= 0) { /* once, to its own target, after an ASKING */
            op->cask[i] = (unsigned char)k;
            call_again(op, i, C_ASK);
            return;
        }
        /* ASKed again, or too many targets: after a pause, to the slot's
         * owner (an ASK says nothing lasting about the map). */
        call_again(op, i, C_TODO);
        snprintf(o->retry_why, sizeof(o->retry_why), "ASK %d %.80s:%d",
                 o->redir.slot, o->redir.host, o->redir.port);
        op_retry_later(a, op);
        return;
    }
    call_again(op, i, C_TODO);
    if (act == DQ_FEED_REDIRECT) {
        dq__routes_moved(a->routes, o->redir.slot, o->redir.host,
                         o->redir.port);
    } else if (act == DQ_FEED_RETRY) {
        if (strncmp(o->retry_why, "TRYAGAIN", 8) != 0)
            dq__routes_stale(a->routes); /* a failover: ask again */
        op_retry_later(a, op);
    }
}

/* A reply for op: the engine decides what it means (call_took); then op
 * moves on. */
static void on_reply(void *priv, size_t tag, const dq__reply *r) {
    aop *op = priv;
    dq_async *a = op->a;
    dq__async_enter(a);
    if (tag & ASK_TAG) {
        /* The ASKING's +OK: the call's own reply tells how it went. */
        size_t i = tag & ~ASK_TAG;
        dq__alink_replied(op->clink[i]);
        op->outstanding--;
        op->cst[i] &= (unsigned char)~C_OKWAIT;
        if (op->outstanding == 0)
            op_advance(a, op);
    } else if (tag >= op->op.ncmds) {
        used *u = &op->usedv[tag - op->op.ncmds];
        dq__alink_replied(u->l);
        u->wait_out = 0;
        op->wait_out--;
        op->outstanding--;
        dq__op_feed(&op->op, op->op.ncmds, r);
        op_advance(a, op);
    } else {
        dq__alink *l = op->clink[tag];
        int asked = (op->cst[tag] & C_ASKED) != 0;
        dq__alink_replied(l);
        op->outstanding--;
        op->bytes_out -= op->op.cmds[tag].resp_len;
        call_took(a, op, tag, l, dq__op_feed(&op->op, tag, r), asked);
        op_advance(a, op);
    }
    dq__async_leave(a);
}

/* ---- What the routes report ---- */

static void tell_state(dq_async *a, int code, const char *msg, int failed);

static void host_changed(void *ud) {
    dq_async *a = ud;
    /* In flight with calls that waited: those may go (no callback runs:
     * replies are out). */
    for (aop *op = a->inflight.head; op != NULL; op = op->next)
        if (op->ntodo > 0)
            op_pump(a, op);
    /* Waiting: each moves on once, in order (callbacks may add ops). */
    size_t n = a->waiting.count;
    for (size_t k = 0; k < n && !a->freeing; k++) {
        aop *op = a->waiting.head;
        if (op == NULL)
            break;
        list_unlink(a, op);
        op_advance(a, op);
    }
    if (a->freeing)
        return;
    if (a->follow != NULL)
        a->follow(a->watches); /* runs no user code */
    arm_wait(a);
    if (!a->freeing)
        tell_state(a, 0, "", 0);
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

/* Routed or not: whether a failure (failed = 1) or a change is to be
 * told to the state callback now: the client stopped being connected, or
 * an attempt failed while it is not.  Records what is told. */
static int state_report(dq_async *a, int failed) {
    int now = dq__routes_connected(a->routes);
    if (now != a->reported) {
        a->reported = now;
        return !now;
    }
    return !now && failed;
}

/* Tells the state callback what state_report says, or a connection. */
static void tell_state(dq_async *a, int code, const char *msg, int failed) {
    int was = a->reported;
    if (state_report(a, failed))
        host_state(a, DQ_DISCONNECTED, code, msg);
    else if (!was && a->reported)
        host_state(a, DQ_CONNECTED, 0, "");
}

/* The topology failed (a Sentinel, the slot map). */
static void host_failed(void *ud, int code, const char *msg) {
    tell_state(ud, code, msg, 1);
}

static void host_link_down(void *ud, dq__alink *l, int code,
                           const char *msg, int was_up) {
    dq_async *a = ud;
    int report = state_report(a, 1);
    int routed = dq__routes_routed(a->routes);
    size_t nwait = routed || was_up ? 0 : a->waiting.count;
    if (report) {
        host_state(a, DQ_DISCONNECTED, code, msg);
        if (a->freeing)
            return;
    }
    /* In flight on l: lost with the connection (may or may not have
     * run).  Their ops fail, once their replies on other links are in. */
    for (aop *op = a->inflight.head; op != NULL; op = op->next) {
        size_t lost = 0;
        for (size_t i = 0; i < op->op.ncmds; i++) {
            unsigned char s = op->cst[i];
            if (op->clink[i] != l ||
                ((s & C_STATE) != C_FLIGHT && !(s & C_OKWAIT)))
                continue;
            if ((s & C_STATE) == C_FLIGHT) {
                lost++;
                op->bytes_out -= op->op.cmds[i].resp_len;
            }
            lost += (s & C_OKWAIT) != 0;
            op->cst[i] = C_DONE;
        }
        for (int k = 0; k < op->nused; k++)
            if (op->usedv[k].wait_out && op->usedv[k].l == l) {
                op->usedv[k].wait_out = 0;
                op->wait_out--;
                lost++;
            }
        if (lost > 0) {
            dq__err e;
            dq__err_set(&e, code, "%s: %s", op->op.what, msg);
            op->outstanding -= lost;
            op->lost = 1;
            op_abort(op, &e);
        }
    }
    for (;;) {
        aop *op = a->inflight.head;
        while (op != NULL && !(op->lost && op->outstanding == 0))
            op = op->next;
        if (op == NULL)
            break;
        op_finish(a, op);
        if (a->freeing)
            return;
    }
    /* One node: the ops that waited for this attempt fail with it. */
    fail_ops(a, &a->waiting, nwait, code, msg);
    if (!a->freeing)
        arm_wait(a);
}

/* Why waiting op gave up, into msg. */
static void wait_msg(dq_async *a, aop *op, char *msg, size_t n) {
    int64_t t = a->core.opts.command_timeout_ms;
    if (!dq__routes_routed(a->routes)) {
        snprintf(msg, n,
                 "not connected to %s within %" PRId64
                 " ms (DQ_OPT_COMMAND_TIMEOUT_MS)",
                 a->where, t);
        return;
    }
    if (op->op.retry_why[0] != '\0') {
        snprintf(msg, n, "still '%s' after %" PRId64 " ms (not run)",
                 op->op.retry_why, t);
        return;
    }
    size_t i = op->first_todo < op->op.ncmds ? op->first_todo : 0;
    char where[400];
    dq__routes_where(a->routes, op->op.ncmds > 0 ? op->op.cmds[i].slot : 0,
                     where, sizeof(where));
    const char *why = dq__routes_why(a->routes);
    snprintf(msg, n,
             "not connected to %s within %" PRId64
             " ms (DQ_OPT_COMMAND_TIMEOUT_MS)%s%s",
             where, t, why[0] ? "; last failure: " : "", why);
}

/* The wait timer: fails the waiting ops whose deadline passed, moves on
 * those whose pause before a retry is over. */
static void on_wait_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq_async *a = arg;
    char msg[900];
    dq__async_enter(a);
    int64_t now = dq__mono_us();
    size_t n = a->waiting.count;
    for (size_t k = 0; k < n && !a->freeing; k++) {
        aop *op = a->waiting.head;
        if (op == NULL)
            break;
        list_unlink(a, op);
        if (op->deadline_us != 0 && op->deadline_us <= now) {
            wait_msg(a, op, msg, sizeof(msg));
            op_finish_code(a, op, DQ_ETIMEDOUT, msg);
        } else if (op->retry_at_us != 0 && op->retry_at_us <= now) {
            op_advance(a, op);
        } else {
            list_push(&a->waiting, op, IN_WAITING);
        }
    }
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
    else if ((rc = dq__options_check(&a->core.opts, &a->err)) == DQ_OK)
        rc = dq__uri_parse(uri, &a->uri, &a->err);
    if (rc != DQ_OK)
        goto fail;
    a->core.db = a->uri.db;
    /* In a cluster the scripts wake consumers over sharded pub/sub: a
     * plain PUBLISH there goes to every node. */
    a->core.sharded = a->uri.kind == DQ_URI_CLUSTER;
    a->core.counting = a->core.opts.counters > 0;
    dq__core_set_partitions(&a->core, a->core.opts.partitions > 0
                                         ? (int)a->core.opts.partitions
                                         : a->uri.partitions);
    a->core.layout = a->core.opts.layout >= 0 ? (int)a->core.opts.layout
                                              : a->uri.layout;
    if ((rc = dq__tls_check(&a->core.opts, &a->uri, &a->err)) != DQ_OK)
        goto fail;
    /* The URI's host name gets its resolver now (see host_dns). */
    if (a->uri.kind == DQ_URI_TCP && !dq__numeric_host(a->uri.host) &&
        host_dns(a, &a->uri) == NULL) {
        rc = dq__err_set(&a->err, DQ_ENOMEM, "cannot start a resolver for %s",
                        a->uri.host);
        goto fail;
    }
    if (a->uri.kind == DQ_URI_UNIX)
        snprintf(a->where, sizeof(a->where), "unix:%s", a->uri.path);
    else if (a->uri.kind == DQ_URI_SENTINEL)
        snprintf(a->where, sizeof(a->where), "primary '%s'", a->uri.master);
    else
        snprintf(a->where, sizeof(a->where), "%s:%d", a->uri.host,
                 a->uri.port);
    a->wait_ev = evtimer_new(base, on_wait_timer, a);
    if (a->wait_ev == NULL) {
        rc = dq__err_set(&a->err, DQ_ENOMEM, "out of memory");
        goto fail;
    }
    a->host = (dq__ahost){a,           a->base,      &a->core.opts,
                          host_enter,  host_leave,  host_closing,
                          host_dns,    host_changed, host_link_down,
                          host_failed};
    if ((rc = dq__routes_new(&a->host, &a->uri, &a->core.opts, a->where, &a->routes,
                             &a->err)) != DQ_OK)
        goto fail;
    dq__routes_start(a->routes);
    return DQ_OK;
fail:
    /* The client holds the message; calls on it return this code. */
    a->open_rc = rc;
    dq__routes_close(a->routes);
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
    dq__routes_close(a->routes);
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
    return a != NULL && a->routes != NULL && a->open_rc == DQ_OK &&
           !a->freeing && dq__routes_connected(a->routes);
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
                    int flags, const dq_push_opts *po, dq_push_cb *cb,
                    void *userdata) {
    ENTER(a);
    NEW_OP(a);
    const void *pl[1] = {payload};
    const char *ids[1] = {id};
    int rc = dq__op_push(&op->op, &a->core, 0, queue, 1, pl, &len, &t,
                        absolute, ids, flags, po, &a->err);
    return submit(a, op, rc, CB_PUSH, CB(cb), userdata);
}

int dq_async_push(dq_async *a, const char *queue, const void *payload,
                  size_t len, int64_t delay_ms, const char *id, int flags,
                  dq_push_cb *cb, void *userdata) {
    return push_one(a, queue, payload, len, delay_ms, 0, id, flags, NULL, cb,
                    userdata);
}

int dq_async_push_at(dq_async *a, const char *queue, const void *payload,
                     size_t len, int64_t at_ms, const char *id, int flags,
                     dq_push_cb *cb, void *userdata) {
    return push_one(a, queue, payload, len, at_ms, 1, id, flags, NULL, cb,
                    userdata);
}

int dq_async_push_ex(dq_async *a, const char *queue, const void *payload,
                     size_t len, int64_t when, const char *id, int flags,
                     const dq_push_opts *opts, dq_push_cb *cb,
                     void *userdata) {
    return push_one(a, queue, payload, len, when, (flags & DQ_PUSH_AT) != 0,
                    id, flags & ~DQ_PUSH_AT, opts, cb, userdata);
}

int dq_async_push_batch(dq_async *a, const char *queue, size_t n,
                        const void *const *payloads, const size_t *lens,
                        const int64_t *delays_ms, const char *const *ids,
                        int flags, dq_batch_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_push(&op->op, &a->core, 1, queue, n, payloads, lens,
                        delays_ms, 0, ids, flags, NULL, &a->err);
    return submit(a, op, rc, CB_BATCH, CB(cb), userdata);
}

int dq_async_cancel(dq_async *a, const char *queue, const char *id,
                    int flags, dq_status_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_cancel(&op->op, &a->core, queue, id, flags, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_reschedule(dq_async *a, const char *queue, const char *id,
                        int64_t when, int flags, dq_status_cb *cb,
                        void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_resched(&op->op, &a->core, 0, queue, 1, &id, when, flags,
                            &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_promote(dq_async *a, const char *queue, const char *id,
                     int flags, dq_status_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_promote(&op->op, &a->core, queue, id, flags, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_reschedule_batch(dq_async *a, const char *queue, size_t n,
                              const char *const *ids, int64_t when, int flags,
                              dq_results_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_resched(&op->op, &a->core, 1, queue, n, ids, when, flags,
                            &a->err);
    return submit(a, op, rc, CB_RESULTS, CB(cb), userdata);
}

/* dq_async_poll and dq__async_poll_us (us: next due in microseconds). */
static int poll_common(dq_async *a, const char *queue, int max,
                       int64_t lease_ms, int us, dq_jobs_cb *cb,
                       void *userdata) {
    ENTER(a);
    NEW_OP(a);
    op->us = us;
    int rc = us ? dq__op_poll_known(&op->op, &a->core, queue, max, lease_ms,
                                   &a->err)
                : dq__op_poll(&op->op, &a->core, queue, max, lease_ms,
                             &a->err);
    return submit(a, op, rc, CB_JOBS, CB(cb), userdata);
}

int dq_async_poll(dq_async *a, const char *queue, int max, int64_t lease_ms,
                  dq_jobs_cb *cb, void *userdata) {
    return poll_common(a, queue, max, lease_ms, 0, cb, userdata);
}

int dq__async_sharded(const dq_async *a) { return a->core.sharded; }

int dq__async_pick(dq_async *a, size_t n, const char *const *queues,
                   const int *weights, int mode, const unsigned char *skip,
                   int64_t *wait_us) {
    return dq__multi_pick(&a->core, n, queues, weights, mode, skip, wait_us);
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
                        0, NULL, 0, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_nack_reason(dq_async *a, const char *queue, const char *id,
                         const char *token, int64_t delay_ms, int flags,
                         const void *reason, size_t reason_len,
                         dq_status_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_nack(&op->op, &a->core, queue, id, token, delay_ms, flags,
                        1, reason, reason_len, &a->err);
    return submit(a, op, rc, CB_STATUS, CB(cb), userdata);
}

int dq_async_get(dq_async *a, const char *queue, const char *id,
                 dq_get_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_get(&op->op, &a->core, queue, id, &a->err);
    return submit(a, op, rc, CB_GET, CB(cb), userdata);
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

int dq_async_count_due(dq_async *a, const char *queue,
                       const int64_t *bounds_ms, int nbounds,
                       dq_count_due_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_count_due(&op->op, &a->core, queue, bounds_ms, nbounds,
                              &a->err);
    return submit(a, op, rc, CB_COUNT_DUE, CB(cb), userdata);
}

int dq_async_group_stats(dq_async *a, const char *queue, int max,
                         dq_group_stats_cb *cb, void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_group_stats(&op->op, &a->core, queue, max, &a->err);
    return submit(a, op, rc, CB_GROUPS, CB(cb), userdata);
}

int dq_async_counters(dq_async *a, const char *queue, dq_counters_cb *cb,
                      void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_counts(&op->op, &a->core, queue, &a->err);
    return submit(a, op, rc, CB_COUNTS, CB(cb), userdata);
}

int dq_async_config_set(dq_async *a, const char *queue, size_t n,
                        const int *settings, const int64_t *values,
                        dq_config_cb *cb, void *userdata) {
    ENTER(a);
    if (values == NULL) /* a get is not a set: refuse, as dq_config_set */
        return dq__err_set(&a->err, DQ_ENULL, "values is NULL");
    NEW_OP(a);
    int rc = dq__op_config(&op->op, &a->core, queue, n, settings, values,
                           &a->err);
    return submit(a, op, rc, CB_CONFIG, CB(cb), userdata);
}

int dq_async_config_get(dq_async *a, const char *queue, size_t n,
                        const int *settings, dq_config_cb *cb,
                        void *userdata) {
    ENTER(a);
    NEW_OP(a);
    int rc = dq__op_config(&op->op, &a->core, queue, n, settings, NULL,
                           &a->err);
    return submit(a, op, rc, CB_CONFIG, CB(cb), userdata);
}
