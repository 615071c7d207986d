/*
 * client.c - the blocking client: ops over one hiredis connection, plus a
 * second (subscriber) connection for dq_poll_wait's early wake-ups.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "links.h"
#include "wake.h"
#include "op.h"
#include "queues.h"
#include "sigpipe.h"
#include "uri.h"

struct dq_client {
    dq__core core;          /* options, key cache, id generator */
    dq__uri uri;            /* where to (re)connect */
    dq__links *links;       /* the node(s): one, a cluster, a primary */
    dq__conn *conn;         /* link of the last command (owned by links) */
    dq__wake wake;          /* poll_wait's wake-up subscribers */
    dq__err err;            /* last error */
    char warnings[1024];    /* findings at connect time */
};

int dq_version_number(void) { return DQ_VERSION_NUMBER; }
const char *dq_version_string(void) { return DQ_VERSION_STRING; }

const char *dq_errmsg(const dq_client *c) {
    if (c == NULL)
        return "client is NULL (out of memory, or NULL passed)";
    return c->err.msg;
}

int dq_errcode(const dq_client *c) { return c == NULL ? DQ_ENULL : c->err.code; }

const char *dq_warnings(const dq_client *c) {
    return c == NULL ? "" : c->warnings;
}

/* Entry of every call on a client: clears the last error. */
#define ENTER(c)                  \
    do {                          \
        if ((c) == NULL)          \
            return DQ_ENULL;      \
        dq__err_clear(&(c)->err);  \
    } while (0)

/* Makes c->conn the link to the node that owns slot (connecting, or
 * learning where the slot lives, first). */
static int ensure_conn(dq_client *c, int slot) {
    return dq__links_get(c->links, slot, &c->conn, &c->err);
}

/* The compact layout keeps buckets of up to 120 entries and shards of about
 * as many (at 30 million jobs per queue) with values of up to 64 bytes
 * (C_CAP, C_VMAX in lua/include/compact/lib.lua): a server whose listpack limits are
 * lower stores them as native hashes instead, which cost more than the
 * default layout. */
enum { COMPACT_ENTRIES = 120, COMPACT_VALUE = 64 };

/* Appends a finding to c->warnings ("; " between two), cut to fit. */
static void warn(dq_client *c, const char *text) {
    size_t n = strlen(c->warnings);
    snprintf(c->warnings + n, sizeof(c->warnings) - n, "%s%s",
             n > 0 ? "; " : "", text);
}

/* Reads the server's eviction policy and hash listpack limits: a policy
 * that can evict keys without a TTL (allkeys-*) can silently drop queued
 * jobs, and limits below the compact layout's make it cost memory instead
 * of saving it.  Best effort: a server or ACL that refuses CONFIG leaves no
 * warning.  A server that wants AUTH we did not send fails the open with
 * DQ_EAUTH now rather than on the first operation. */
static int check_server(dq_client *c) {
    const char *argv[5] = {"CONFIG", "GET", "maxmemory-policy",
                           "hash-max-listpack-entries",
                           "hash-max-listpack-value"};
    dq__reply *r = NULL;
    int rc = dq__conn_call(c->conn, 5, argv, NULL, &r, &c->err);
    if (rc != DQ_OK)
        return rc;
    if (dq__reply_is_error(r, "NOAUTH")) {
        rc = dq__err_set(&c->err, DQ_EAUTH,
                        "Redis requires AUTH: give a password in the URI or "
                        "DQ_OPT_PASSWORD");
    } else if (dq__reply_type(r) == DQ_R_ARRAY) {
        char text[160];
        /* name, value pairs, in no set order */
        for (size_t i = 0; i + 1 < dq__reply_len(r); i += 2) {
            const dq__reply *name = dq__reply_at(r, i);
            const dq__reply *val = dq__reply_at(r, i + 1);
            size_t nlen, len;
            const char *ns = dq__reply_str(name, &nlen);
            const char *vs = dq__reply_str(val, &len);
            long long need = dq__reply_is(name, "hash-max-listpack-entries")
                                 ? COMPACT_ENTRIES
                             : dq__reply_is(name, "hash-max-listpack-value")
                                 ? COMPACT_VALUE
                                 : 0;
            long long have;
            if (dq__reply_is(name, "maxmemory-policy") && len > 8 &&
                memcmp(vs, "allkeys-", 8) == 0) {
                snprintf(text, sizeof(text),
                         "maxmemory-policy is %.*s: Redis may evict queue "
                         "keys and lose jobs; use noeviction",
                         (int)(len > 40 ? 40 : len), vs);
                warn(c, text);
            } else if (need > 0 && dq__reply_ll(val, &have) && have < need) {
                snprintf(text, sizeof(text),
                         "%.*s is %lld, below the %lld the compact layout "
                         "needs: its hashes would not be listpacks",
                         (int)nlen, ns, have, need);
                warn(c, text);
            }
        }
    }
    dq__reply_free(r);
    return rc;
}

/* The replicas the primary has now ("connected_slaves:" of INFO
 * replication), or -1 when it does not say. */
static long long replicas_now(dq_client *c) {
    const char *argv[2] = {"INFO", "replication"};
    dq__reply *r = NULL;
    dq__err e;
    long long n = -1;
    if (dq__conn_call(c->conn, 2, argv, NULL, &r, &e) != DQ_OK)
        return -1;
    size_t len;
    const char *s = dq__reply_type(r) == DQ_R_STRING ? dq__reply_str(r, &len)
                                                    : NULL;
    const char *at = s ? strstr(s, "connected_slaves:") : NULL;
    if (at != NULL)
        n = strtoll(at + 17, NULL, 10);
    dq__reply_free(r);
    return n;
}

/* One durable-mode finding about a min-replicas-* setting (value v). */
static void warn_min_replicas(dq_client *c, const dq__reply *name,
                              long long v) {
    long long want = c->core.opts.wait_replicas;
    char text[300];
    if (dq__reply_is(name, "min-replicas-max-lag") && v == 0) {
        warn(c, "durable mode: min-replicas-max-lag is 0, which turns "
                "min-replicas-to-write off");
        return;
    }
    if (!dq__reply_is(name, "min-replicas-to-write") || v >= want)
        return;
    snprintf(text, sizeof(text),
             "durable mode: min-replicas-to-write is %lld, below the %lld "
             "replicas its writes wait for: a primary cut off from them "
             "%s", v, want,
             v == 0 ? "keeps taking writes (those of non-durable clients "
                      "are lost in a failover)"
                    : "still takes writes it cannot confirm");
    warn(c, text);
}

/* The durable mode's findings (DQ_OPT_DURABLE): the primary's
 * min-replicas-to-write / -max-lag, and its replicas against the number
 * DQ_OPT_WAIT_REPLICAS waits for.  Best effort, as check_server. */
static void check_durable(dq_client *c) {
    const char *argv[4] = {"CONFIG", "GET", "min-replicas-to-write",
                           "min-replicas-max-lag"};
    dq__reply *r = NULL;
    dq__err e;
    if (dq__conn_call(c->conn, 4, argv, NULL, &r, &e) == DQ_OK &&
        dq__reply_type(r) == DQ_R_ARRAY)
        for (size_t i = 0; i + 1 < dq__reply_len(r); i += 2) {
            long long v;
            if (dq__reply_ll(dq__reply_at(r, i + 1), &v))
                warn_min_replicas(c, dq__reply_at(r, i), v);
        }
    dq__reply_free(r);
    long long have = replicas_now(c), want = c->core.opts.wait_replicas;
    char text[300];
    if (have > want)
        snprintf(text, sizeof(text),
                 "durable mode: the primary has %lld replicas but writes "
                 "wait for %lld (DQ_OPT_WAIT_REPLICAS): a failover may "
                 "promote one that lacks confirmed writes; wait for all",
                 have, want);
    else if (have >= 0 && have < want)
        snprintf(text, sizeof(text),
                 "durable mode: the primary has %lld of the %lld replicas "
                 "writes wait for: they fail with DQ_EREPLICAS until the "
                 "others are back", have, want);
    if (have >= 0 && have != want)
        warn(c, text);
}

int dq_open(const char *uri, const dq_options *opts, dq_client **out) {
    if (out == NULL)
        return DQ_ENULL;
    dq_client *c = calloc(1, sizeof(*c));
    *out = c;
    if (c == NULL)
        return DQ_ENOMEM;
    if (dq__core_init(&c->core, opts) != DQ_OK)
        return dq__err_set(&c->err, DQ_ENOMEM, "out of memory");
    int rc = dq__options_check(&c->core.opts, &c->err);
    if (rc == DQ_OK)
        rc = dq__uri_parse(uri, &c->uri, &c->err);
    if (rc != DQ_OK)
        return rc;
    c->core.db = c->uri.db;
    c->core.sharded = c->uri.kind == DQ_URI_CLUSTER;
    c->core.counting = c->core.opts.counters > 0;
    dq__core_set_partitions(&c->core, c->core.opts.partitions > 0
                                         ? (int)c->core.opts.partitions
                                         : c->uri.partitions);
    c->core.layout = c->core.opts.layout >= 0 ? (int)c->core.opts.layout
                                              : c->uri.layout;
    if ((rc = dq__links_new(&c->uri, &c->core.opts, &c->links, &c->err)))
        return rc;
    dq__sigpipe g;
    dq__sigpipe_block(&g);
    rc = ensure_conn(c, 0);
    if (rc == DQ_OK)
        rc = check_server(c);
    if (rc == DQ_OK && c->core.opts.durable)
        check_durable(c);
    dq__sigpipe_restore(&g);
    return rc;
}

void dq_close(dq_client *c) {
    if (c == NULL)
        return;
    dq__links_free(c->links);
    dq__wake_clear(&c->wake);
    dq__uri_clear(&c->uri);
    dq__core_clear(&c->core);
    free(c);
}

/* Hands reply r of call tag to the engine and frees it; returns the
 * engine's answer. */
static int feed(dq__op *op, size_t tag, dq__reply *r) {
    int act = dq__op_feed(op, tag, r);
    dq__reply_free(r);
    return act;
}

/* Sends one formatted command of op (tag) on its own and feeds its reply. */
static int call_one(dq_client *c, dq__op *op, size_t tag, const char *resp,
                    size_t len) {
    dq__reply *r;
    int rc = dq__conn_append_raw(c->conn, resp, len, &c->err);
    if (rc == DQ_OK && (rc = dq__conn_read(c->conn, &r, &c->err)) == DQ_OK)
        feed(op, tag, r);
    return rc;
}

/* What is left to do for each call of an op: T_SEND, T_ASK (once, with
 * ASKING, to the node an ASK named), T_DONE; T_MARK flags the calls of the
 * node a round is sending to. */
enum { T_DONE = 0, T_SEND = 1, T_ASK = 2, T_MARK = 0x80 };

/* The links an op wrote through: its WAIT goes to each of them. */
#define DQ_USED_MAX 64
typedef struct used_links {
    dq__conn *conn[DQ_USED_MAX];
    int n;
} used_links;

/* Adds conn to the links op wrote through; its index, or -1 when full. */
static int note_used(used_links *u, dq__conn *conn) {
    for (int i = 0; i < u->n; i++)
        if (u->conn[i] == conn)
            return i;
    if (u->n == DQ_USED_MAX)
        return -1;
    u->conn[u->n] = conn;
    return u->n++;
}

/* One round: what is left of op's calls, each to its node - every node's
 * calls written out before any reply is read, so the nodes work at once.
 * grp[i] is the node (an index into rd->links) of call i. */
typedef struct round {
    unsigned char want;  /* T_SEND, or T_ASK: each to its ASK target */
    int retry;           /* a node said "not now" (TRYAGAIN, ...) */
    int connect_failed;  /* some node was unreachable: nothing sent to it */
    dq__asks *asks;      /* the op's ASK targets; a T_ASK call's grp
                            indexes them between rounds */
    used_links links;    /* the nodes of this round */
    used_links ran;      /* those that ran a call (its WAIT goes there) */
} round;

/* Picks the node of every call left (marking it want|T_MARK).  A call
 * whose node cannot be reached stays for a later round. */
static int pick_nodes(dq_client *c, dq__op *op, unsigned char *todo,
                      unsigned char *grp, round *rd) {
    int rc = DQ_OK, marked = 0;
    for (size_t i = 0; i < op->ncmds; i++) {
        if (todo[i] != rd->want)
            continue;
        dq__conn *to = NULL;
        if (rd->want == T_ASK) {
            const dq__redirect *d = &rd->asks->to[grp[i]];
            rc = dq__links_at(c->links, d->host, d->port, &to, &c->err);
        } else {
            rc = dq__links_get(c->links, op->cmds[i].slot, &to, &c->err);
        }
        if (rc != DQ_OK) {
            rd->connect_failed = 1;
            if (rd->want == T_ASK)
                todo[i] = T_SEND; /* the target is gone: route it again */
            continue;
        }
        int g = note_used(&rd->links, to);
        if (g < 0)
            continue; /* more nodes than one round takes: the next one */
        grp[i] = (unsigned char)g;
        todo[i] = (unsigned char)(rd->want | T_MARK);
        marked++;
    }
    return marked > 0 ? DQ_OK : rc;
}

/* Sends the marked calls (each after an ASKING when want is T_ASK), every
 * node's in one pipeline and all nodes' before any reply is read; then
 * reads and feeds the replies: each call becomes done, or is to be sent
 * again (NOSCRIPT: as EVAL; MOVED: to the slot's new owner, recorded in
 * links; ASK: once, with ASKING, to the target it names; "not now": after
 * a pause, rd->retry).  A failed read leaves the op's fate unknown: the
 * error is returned. */
static int send_marked(dq_client *c, dq__op *op, unsigned char *todo,
                       unsigned char *grp, round *rd) {
    static const char asking[] = "*1\r\n$6\r\nASKING\r\n";
    unsigned char mark = (unsigned char)(rd->want | T_MARK);
    int rc = DQ_OK;
    for (size_t i = 0; rc == DQ_OK && i < op->ncmds; i++) {
        if (todo[i] != mark)
            continue;
        dq__conn *to = rd->links.conn[grp[i]];
        if (rd->want == T_ASK)
            rc = dq__conn_append_raw(to, asking, sizeof(asking) - 1, &c->err);
        if (rc == DQ_OK)
            rc = dq__conn_append_raw(to, op->cmds[i].resp,
                                     op->cmds[i].resp_len, &c->err);
    }
    for (int g = 0; rc == DQ_OK && rd->links.n > 1 && g < rd->links.n; g++)
        rc = dq__conn_flush(rd->links.conn[g], &c->err);
    for (size_t i = 0; rc == DQ_OK && i < op->ncmds; i++) {
        if (todo[i] != mark)
            continue;
        dq__conn *from = rd->links.conn[grp[i]];
        dq__reply *r;
        if (rd->want == T_ASK) {
            if ((rc = dq__conn_read(from, &r, &c->err)) != DQ_OK)
                break;
            dq__reply_free(r); /* +OK */
        }
        if ((rc = dq__conn_read(from, &r, &c->err)) != DQ_OK)
            break;
        int act = feed(op, i, r);
        todo[i] = act == DQ_FEED_OK ? T_DONE : T_SEND;
        if (act == DQ_FEED_OK) /* not a redirect, "not now" or NOSCRIPT */
            note_used(&rd->ran, from);
        int k = act == DQ_FEED_REDIRECT && op->redir.ask && rd->want != T_ASK
                    ? dq__asks_index(rd->asks, &op->redir)
                    : -1;
        if (k >= 0) {
            todo[i] = T_ASK; /* once, to its own target, after ASKING */
            grp[i] = (unsigned char)k;
        } else if (act == DQ_FEED_REDIRECT && op->redir.ask) {
            rd->retry = 1; /* an ASK we cannot take now: later, routed */
        } else if (act == DQ_FEED_REDIRECT) {
            dq__links_moved(c->links, op->redir.slot, op->redir.host,
                            op->redir.port);
        } else if (act == DQ_FEED_RETRY) {
            rd->retry = 1;
            if (strncmp(op->retry_why, "TRYAGAIN", 8) != 0)
                dq__links_stale(c->links); /* failover: ask again */
        }
    }
    for (size_t i = 0; i < op->ncmds; i++)
        if (todo[i] == mark) {
            /* Not reached: a read failed.  The other nodes of the round
             * still owe this call's reply: their links cannot be trusted
             * with the next call. */
            todo[i] = rd->want;
            dq__conn_break(rd->links.conn[grp[i]]);
        }
    return rc;
}

/* Sleeps us microseconds. */
static void pause_us(int64_t us) {
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Runs the calls op->cmds: each to the node that owns its slot, those of
 * one node in one pipeline; then again the calls the engine wants again
 * (as EVAL after NOSCRIPT, to a new owner after MOVED, with ASKING after
 * ASK, after a pause after TRYAGAIN / CLUSTERDOWN / a failover).  A
 * cluster or Sentinel route keeps trying to reach a node (nothing was sent
 * yet) and to get past "not now" answers for up to the command timeout. */
static int run_calls(dq_client *c, dq__op *op, unsigned char *todo,
                     unsigned char *grp, used_links *used) {
    memset(todo, T_SEND, op->ncmds);
    int64_t limit_ms = c->core.opts.command_timeout_ms > 0
                           ? c->core.opts.command_timeout_ms
                           : 5000;
    int64_t deadline = dq__mono_us() + limit_ms * 1000, pause = 1000;
    dq__asks ask_to;
    ask_to.n = 0;
    for (int rounds = 0;;) {
        round rd;
        memset(&rd, 0, sizeof(rd));
        rd.asks = &ask_to;
        rd.want = memchr(todo, T_ASK, op->ncmds) ? T_ASK : T_SEND;
        int rc = pick_nodes(c, op, todo, grp, &rd);
        if (rc == DQ_OK)
            rc = send_marked(c, op, todo, grp, &rd);
        for (int g = 0; g < rd.ran.n; g++)
            note_used(used, rd.ran.conn[g]);
        if (rc == DQ_OK && rd.connect_failed) {
            /* Some node was unreachable: its calls wait for a failover. */
            dq__links_stale(c->links);
            rd.retry = 1;
        }
        if (rc != DQ_OK && rd.connect_failed && op->routed &&
            rc != DQ_EAUTH && rc != DQ_ENOMEM &&
            dq__mono_us() + pause < deadline) {
            /* Nothing sent: the route may be waiting for a failover. */
            dq__links_stale(c->links);
            rd.retry = 1;
            rc = DQ_OK;
        }
        if (rc != DQ_OK) {
            if (op->routed)
                dq__links_stale(c->links);
            return rc;
        }
        if (memchr(todo, T_SEND, op->ncmds) == NULL &&
            memchr(todo, T_ASK, op->ncmds) == NULL)
            return DQ_OK;
        if (rd.retry && dq__mono_us() + pause > deadline)
            return dq__err_set(&c->err, DQ_ETIMEDOUT,
                              "%s: still '%s' after %" PRId64
                              " ms (not run)",
                              op->what, op->retry_why[0] ? op->retry_why
                                                        : c->err.msg,
                              limit_ms);
        /* Redirections without a pause between them are bounded; a slot
         * that stays "not now" is bounded by the command timeout above. */
        if (!rd.retry && ++rounds > 64 + (int)op->ncmds)
            return dq__err_set(&c->err, DQ_EREDIS,
                              "%s: redirected more than 64 times", op->what);
        if (rd.retry) {
            pause_us(pause);
            pause = pause * 2 > 100000 ? 100000 : pause * 2;
        }
    }
}

/* Runs op: its calls (run_calls), more calls while the engine has more,
 * then its WAIT.  Returns what the public call returns; c->err has the
 * op's message. */
static int run_op_io(dq_client *c, dq__op *op) {
    op->routed = dq__links_routed(c->links);
    /* Behind Sentinel: a failover the Sentinels announced sends this op
     * to the new primary (read without blocking, see links.h). */
    dq__links_listen(c->links);
    used_links used;
    used.n = 0;
    int rc = DQ_OK;
    do {
        /* Per call: what is left to do, and its node in a round. */
        unsigned char small[32];
        unsigned char *todo = op->ncmds * 2 <= sizeof(small)
                                  ? small
                                  : malloc(op->ncmds * 2);
        if (todo == NULL) {
            rc = dq__err_set(&c->err, DQ_ENOMEM, "%s: out of memory",
                            op->what);
            break;
        }
        rc = run_calls(c, op, todo, todo + op->ncmds, &used);
        if (todo != small)
            free(todo);
    } while (rc == DQ_OK && !op->failed && dq__op_next(op));
    /* WAIT on every node the op wrote to (a partitioned push may have
     * written to several primaries). */
    const char *wait;
    size_t wlen;
    if (rc == DQ_OK && dq__op_wait_cmd(op, &wait, &wlen))
        for (int i = 0; rc == DQ_OK && i < used.n; i++) {
            if (!dq__links_owns(c->links, used.conn[i])) {
                /* Replaced after a failure: a WAIT on the new link would
                 * not count these writes. */
                dq__op_wait_lost(op);
                break;
            }
            c->conn = used.conn[i];
            rc = call_one(c, op, op->ncmds, wait, wlen);
        }
    if (rc != DQ_OK)
        dq__op_fail(op, rc, &c->err);
    if (op->failed)
        c->err = op->err;
    else
        dq__err_clear(&c->err); /* a partitioned call kept what it did */
    return dq__op_status(op);
}

/* run_op_io() with SIGPIPE blocked (see sigpipe.h); every command the sync
 * client sends goes through a guard like this one.  A build that failed
 * (rc) is returned as it is: nothing was sent. */
static int run_op(dq_client *c, dq__op *op, int rc) {
    if (rc == DQ_OK) {
        dq__sigpipe g;
        dq__sigpipe_block(&g);
        rc = run_op_io(c, op);
        dq__sigpipe_restore(&g);
    }
    return rc;
}

/* Runs a push of n jobs; on success (or DQ_EREPLICAS) copies out their ids
 * (id_stride apart) and outcomes. */
static int push_common(dq_client *c, int batch, const char *queue, size_t n,
                       const void *const *payloads, const size_t *lens,
                       const int64_t *times, int absolute,
                       const char *const *ids, int flags,
                       const dq_push_opts *po, char *ids_out,
                       size_t id_stride, int *outcomes) {
    dq__op op;
    int rc = run_op(c, &op,
                    dq__op_push(&op, &c->core, batch, queue, n, payloads,
                               lens, times, absolute, ids, flags, po,
                               &c->err));
    if (rc >= 0 || rc == DQ_EREPLICAS) {
        for (size_t i = 0; i < n; i++) {
            if (ids_out != NULL)
                snprintf(ids_out + i * id_stride, id_stride, "%s",
                         op.plan.ids + i * DQ_ID_BUF);
            if (outcomes != NULL)
                outcomes[i] = op.plan.outcomes[i];
        }
    }
    dq__op_clear(&op);
    return rc;
}

/* dq_push and dq_push_at: checks id and the size of id_out, then pushes one
 * job. */
static int push_one(dq_client *c, const char *queue, const void *payload,
                    size_t len, int64_t t, int absolute, const char *id,
                    int flags, const dq_push_opts *po, char *id_out,
                    size_t id_out_size, int *outcome) {
    ENTER(c);
    int rc;
    if (id != NULL && (rc = dq__check_id(id, "id", &c->err)) != DQ_OK)
        return rc;
    if (id_out != NULL) {
        size_t need = id ? strlen(id) + 1 : DQ_GEN_ID_LEN + 1;
        if (id_out_size < need)
            return dq__err_set(&c->err, DQ_EINVAL,
                              "id_out_size is %zu; the id needs %zu bytes "
                              "(DQ_ID_BUF always fits)",
                              id_out_size, need);
    }
    const void *pl[1] = {payload};
    const char *ids[1] = {id};
    int oc = 0;
    rc = push_common(c, 0, queue, 1, pl, &len, &t, absolute, ids, flags, po,
                     id_out, id_out_size, &oc);
    if (outcome != NULL)
        *outcome = oc;
    return rc;
}

int dq_push(dq_client *c, const char *queue, const void *payload, size_t len,
            int64_t delay_ms, const char *id, int flags, char *id_out,
            size_t id_out_size, int *outcome) {
    return push_one(c, queue, payload, len, delay_ms, 0, id, flags, NULL,
                    id_out, id_out_size, outcome);
}

int dq_push_at(dq_client *c, const char *queue, const void *payload,
               size_t len, int64_t at_ms, const char *id, int flags,
               char *id_out, size_t id_out_size, int *outcome) {
    return push_one(c, queue, payload, len, at_ms, 1, id, flags, NULL,
                    id_out, id_out_size, outcome);
}

int dq_push_ex(dq_client *c, const char *queue, const void *payload,
               size_t len, int64_t when, const char *id, int flags,
               const dq_push_opts *opts, char *id_out, size_t id_out_size,
               int *outcome) {
    return push_one(c, queue, payload, len, when, (flags & DQ_PUSH_AT) != 0,
                    id, flags & ~DQ_PUSH_AT, opts, id_out, id_out_size,
                    outcome);
}

int dq_push_batch(dq_client *c, const char *queue, size_t n,
                  const void *const *payloads, const size_t *lens,
                  const int64_t *delays_ms, const char *const *ids, int flags,
                  char *ids_out, int *outcomes) {
    ENTER(c);
    return push_common(c, 1, queue, n, payloads, lens, delays_ms, 0, ids,
                       flags, NULL, ids_out, DQ_ID_BUF, outcomes);
}

int dq_push_batch_ex(dq_client *c, const char *queue, size_t n,
                     const void *const *payloads, const size_t *lens,
                     const int64_t *times, const char *const *ids, int flags,
                     const dq_push_opts *opts, char *ids_out, int *outcomes) {
    ENTER(c);
    return push_common(c, 1, queue, n, payloads, lens, times,
                       (flags & DQ_PUSH_AT) != 0, ids, flags & ~DQ_PUSH_AT,
                       opts, ids_out, DQ_ID_BUF, outcomes);
}

/* Runs an op whose whole result is its status. */
static int run_simple(dq_client *c, dq__op *op, int build_rc) {
    int rc = run_op(c, op, build_rc);
    dq__op_clear(op);
    return rc;
}

int dq_cancel(dq_client *c, const char *queue, const char *id, int flags) {
    ENTER(c);
    dq__op op;
    return run_simple(c, &op,
                      dq__op_cancel(&op, &c->core, queue, id, flags, &c->err));
}

/* Runs a reschedule of n jobs; copies out each job's outcome on success. */
static int resched_common(dq_client *c, int batch, const char *queue,
                          size_t n, const char *const *ids, int64_t when,
                          int flags, int *outcomes) {
    dq__op op;
    int rc = run_op(c, &op,
                    dq__op_resched(&op, &c->core, batch, queue, n, ids, when,
                                   flags, &c->err));
    if (rc >= 0 && outcomes != NULL)
        memcpy(outcomes, op.results, n * sizeof(int));
    dq__op_clear(&op);
    return rc;
}

int dq_reschedule(dq_client *c, const char *queue, const char *id,
                  int64_t when, int flags) {
    ENTER(c);
    return resched_common(c, 0, queue, 1, &id, when, flags, NULL);
}

int dq_promote(dq_client *c, const char *queue, const char *id, int flags) {
    ENTER(c);
    dq__op op;
    return run_simple(c, &op,
                      dq__op_promote(&op, &c->core, queue, id, flags,
                                     &c->err));
}

int dq_reschedule_batch(dq_client *c, const char *queue, size_t n,
                        const char *const *ids, int64_t when, int flags,
                        int *outcomes) {
    ENTER(c);
    return resched_common(c, 1, queue, n, ids, when, flags, outcomes);
}

/* One poll; *next_us as the script returned it. */
static int poll_once(dq_client *c, const char *queue, int max,
                     int64_t lease_ms, int known, dq_jobs **out,
                     int64_t *next_us) {
    dq__op op;
    int rc = run_op(c, &op,
                    known ? dq__op_poll_known(&op, &c->core, queue, max,
                                             lease_ms, &c->err)
                          : dq__op_poll(&op, &c->core, queue, max, lease_ms,
                                       &c->err));
    if (rc >= 0) {
        *out = op.jobs;
        op.jobs = NULL;
        *next_us = op.next_us;
    }
    dq__op_clear(&op);
    return rc;
}

/* Checks the out argument shared by poll and poll_wait. */
static int check_out(dq_client *c, dq_jobs **out) {
    if (out == NULL)
        return dq__err_set(&c->err, DQ_ENULL, "out is NULL");
    *out = NULL;
    return DQ_OK;
}

int dq_poll(dq_client *c, const char *queue, int max, int64_t lease_ms,
            dq_jobs **out, int64_t *next_due_ms) {
    ENTER(c);
    int rc = check_out(c, out);
    if (rc != DQ_OK)
        return rc;
    int64_t next_us = 0;
    rc = poll_once(c, queue, max, lease_ms, 0, out, &next_us);
    if (next_due_ms != NULL)
        *next_due_ms = rc != 0 ? 0 : next_us < 0 ? -1 : (next_us + 999) / 1000;
    return rc;
}

/* ---- Blocking wait ---- */

/* Makes sure the wake-up subscribers listen for the n queues.  On a
 * cluster or behind Sentinel a subscription that cannot be made now (a
 * slot moving, a failover under way) is not the call's failure: the wait
 * goes on without it, looking again every 100 ms, and subscribes next
 * turn. */
static int wake_ready(dq_client *c, size_t n, const char *const *queues) {
    int rc = dq__wake_ensure(&c->wake, c->links, &c->core, n, queues,
                             &c->err);
    if (rc != DQ_OK && dq__links_routed(c->links) && rc != DQ_EAUTH &&
        rc != DQ_ENOMEM) {
        c->wake.lost = 1;
        return DQ_OK;
    }
    return rc;
}

/* dq_poll_wait_multi's work (dq_poll_wait's with one queue): polls the
 * queues known to have due work, in the order mode picks them, until one
 * gives jobs; when none does, sleeps on the wake channels until the first
 * queue is to be polled again (a due time it owns, or its cap, which pings
 * the subscriber), a wake-up, or the deadline; again until jobs or the
 * deadline. */
static int poll_wait_io(dq_client *c, size_t n, const char *const *queues,
                        const int *weights, int mode, int max,
                        int64_t lease_ms, int64_t timeout_ms, dq_jobs **out,
                        int *queue_index) {
    if (queue_index != NULL)
        *queue_index = -1;
    int rc = check_out(c, out);
    if (rc == DQ_OK)
        rc = dq__check_multi(n, queues, weights, mode, &c->err);
    if (rc == DQ_OK)
        rc = dq__check_poll(queues[0], max, lease_ms, &c->err);
    if (rc == DQ_OK)
        rc = dq__check_delay(timeout_ms, "timeout_ms", &c->err);
    if (rc != DQ_OK)
        return rc;
    int64_t deadline = dq__mono_us() + timeout_ms * 1000;
    /* Subscribe before the first poll: a push that lands between that poll
     * and the wait below still wakes us. */
    dq__wake *w = &c->wake;
    if ((rc = wake_ready(c, n, queues)) != DQ_OK)
        return rc;
    dq__wake_drain(w, &c->core);
    unsigned char skip[DQ_MULTI_MAX]; /* polled in this round, no jobs */
    for (;;) {
        if (!dq__wake_current(w, c->links) &&
            (rc = wake_ready(c, n, queues)) != DQ_OK)
            return rc;
        /* One round: each queue known due at most once, until one gives
         * jobs.  A queue's poll that finds nothing registers this client
         * as its waiting consumer and says when to look again. */
        memset(skip, 0, n);
        int64_t wait_us = -1;
        for (size_t polls = 0;; polls++) {
            if (polls > 8 * n + 8) {
                wait_us = 0; /* a long round: see the deadline, go on */
                break;
            }
            int i = dq__multi_pick(&c->core, n, queues, weights, mode, skip,
                                   &wait_us);
            if (i < 0)
                break;
            int64_t next_us = 0;
            rc = poll_once(c, queues[i], max, lease_ms, 1, out, &next_us);
            if (rc != 0) {
                if (rc > 0 && queue_index != NULL)
                    *queue_index = i;
                return rc;
            }
            /* No jobs: not again in this round, unless the poll said more
             * is due now (it dead-lettered or dropped what it found). */
            skip[i] = next_us != 0;
        }
        int64_t left_us = deadline - dq__mono_us();
        if (left_us <= 0)
            return 0;
        /* Sleep until the first queue is to be polled again (this
         * consumer's registration among its waiting consumers, see
         * lua/include/wake.lua: the next due time if it owns it,
         * else the cap), a wake-up on one of its own channels, or the
         * caller's deadline, whichever is first. */
        int64_t cap_us = c->core.opts.wait_cap_ms * 1000;
        int64_t sleep_us = wait_us < 0 || wait_us > cap_us ? cap_us : wait_us;
        if (w->lost && sleep_us > 100000)
            sleep_us = 100000; /* no subscriber yet: look again soon */
        if (sleep_us > left_us)
            sleep_us = left_us;
        if (dq__wake_drain(w, &c->core) > 0)
            continue;
        rc = dq__wake_wait(w, c->links, sleep_us, &c->err);
        if (rc < 0)
            continue; /* a wake-up link broke: subscribe again, poll */
        if (rc == 0 && dq__mono_us() - w->alive_us >= cap_us) {
            /* Quiet for a while: check that the links still listen (a
             * broken one subscribes again, and then polls everything). */
            dq__wake_ping(w, &c->core, &c->err);
        }
        dq__wake_drain(w, &c->core);
    }
}

/* Runs poll_wait_io with SIGPIPE blocked. */
static int poll_wait_run(dq_client *c, size_t n, const char *const *queues,
                         const int *weights, int mode, int max,
                         int64_t lease_ms, int64_t timeout_ms, dq_jobs **out,
                         int *queue_index) {
    dq__sigpipe g;
    dq__sigpipe_block(&g);
    int rc = poll_wait_io(c, n, queues, weights, mode, max, lease_ms,
                          timeout_ms, out, queue_index);
    dq__sigpipe_restore(&g);
    /* A wake-up link that broke and was reconnected during the wait left
     * its error behind; the call as a whole succeeded. */
    if (rc >= 0)
        dq__err_clear(&c->err);
    return rc;
}

int dq_poll_wait(dq_client *c, const char *queue, int max, int64_t lease_ms,
                 int64_t timeout_ms, dq_jobs **out) {
    ENTER(c);
    /* A NULL queue is DQ_ENULL here, as for every single-queue call. */
    int rc = check_out(c, out);
    if (rc == DQ_OK)
        rc = dq__check_queue(queue, &c->err);
    if (rc != DQ_OK)
        return rc;
    const char *qs[1] = {queue};
    return poll_wait_run(c, 1, qs, NULL, DQ_PRIO_STRICT, max, lease_ms,
                         timeout_ms, out, NULL);
}

int dq_poll_wait_multi(dq_client *c, size_t n, const char *const *queues,
                       const int *weights, int mode, int max,
                       int64_t lease_ms, int64_t timeout_ms, dq_jobs **out,
                       int *queue_index) {
    ENTER(c);
    return poll_wait_run(c, n, queues, weights, mode, max, lease_ms,
                         timeout_ms, out, queue_index);
}

/* ---- Ack, nack, extend ---- */

/* Runs an ack of n jobs; copies out each job's result on success. */
static int ack_common(dq_client *c, int batch, const char *queue, size_t n,
                      const char *const *ids, const char *const *tokens,
                      int *results) {
    dq__op op;
    int rc = run_op(c, &op,
                    dq__op_ack(&op, &c->core, batch, queue, n, ids, tokens,
                              &c->err));
    if ((rc >= 0 || rc == DQ_EREPLICAS) && results != NULL)
        memcpy(results, op.results, n * sizeof(int));
    dq__op_clear(&op);
    return rc;
}

int dq_ack(dq_client *c, const char *queue, const char *id,
           const char *token) {
    ENTER(c);
    const char *ids[1] = {id};
    const char *toks[1] = {token};
    return ack_common(c, 0, queue, 1, ids, toks, NULL);
}

int dq_ack_batch(dq_client *c, const char *queue, size_t n,
                 const char *const *ids, const char *const *tokens,
                 int *results) {
    ENTER(c);
    return ack_common(c, 1, queue, n, ids, tokens, results);
}

int dq_nack(dq_client *c, const char *queue, const char *id,
            const char *token, int64_t delay_ms, int flags) {
    ENTER(c);
    dq__op op;
    return run_simple(c, &op,
                      dq__op_nack(&op, &c->core, queue, id, token, delay_ms,
                                 flags, 0, NULL, 0, &c->err));
}

int dq_nack_reason(dq_client *c, const char *queue, const char *id,
                   const char *token, int64_t delay_ms, int flags,
                   const void *reason, size_t reason_len) {
    ENTER(c);
    dq__op op;
    return run_simple(c, &op,
                      dq__op_nack(&op, &c->core, queue, id, token, delay_ms,
                                 flags, 1, reason, reason_len, &c->err));
}

int dq_extend(dq_client *c, const char *queue, const char *id,
              const char *token, int64_t lease_ms, int64_t *deadline_ms) {
    ENTER(c);
    dq__op op;
    int rc = run_op(c, &op,
                    dq__op_extend(&op, &c->core, queue, id, token, lease_ms,
                                 &c->err));
    if (rc == DQ_OK && deadline_ms != NULL)
        *deadline_ms = op.v;
    dq__op_clear(&op);
    return rc;
}

/* ---- Dead letters and stats ---- */

/* 1 if a read-only call (stats, listings, counters) that failed with rc
 * goes once more: a connection found broken (the server restarted, an
 * idle link was cut) is reopened by the next try, and a read changes
 * nothing, so trying again is safe.  A timeout is not retried. */
static int read_again(int rc, int again) {
    return again && rc == DQ_EIO;
}

/* rc = call, a read; once more when read_again says so, after undo (which
 * drops what the failed try left).  call is evaluated again for the second
 * try: that is the point, each try is built afresh. */
#define READ_TWICE(rc, call, undo)                  \
    for (int again_ = 1;; again_ = 0) {             \
        (rc) = (call);                              \
        if (!read_again((rc), again_))              \
            break;                                  \
        undo;                                       \
    }

/* rc = run_op() of the read op that build makes (built again for the
 * second try). */
#define RUN_READ(rc, c, op, build) \
    READ_TWICE(rc, run_op((c), (op), (build)), dq__op_clear(op))

/* One page of a listing (dq_list, dq_dead_list). */
static int list_page(dq_client *c, const char *queue, int which,
                     int64_t offset, int count, dq_jobs **out,
                     int64_t *now_ms) {
    int rc = check_out(c, out);
    if (rc != DQ_OK)
        return rc;
    dq__op op;
    RUN_READ(rc, c, &op,
             dq__op_list(&op, &c->core, queue, which, offset, count,
                         &c->err));
    if (rc >= 0) {
        *out = op.jobs;
        op.jobs = NULL;
        if (now_ms != NULL)
            *now_ms = op.now_ms;
    }
    dq__op_clear(&op);
    return rc;
}

int dq_dead_list(dq_client *c, const char *queue, int64_t offset, int count,
                 dq_jobs **out) {
    ENTER(c);
    return list_page(c, queue, DQ_LIST_DEAD, offset, count, out, NULL);
}

int dq_list(dq_client *c, const char *queue, int which, int64_t offset,
            int count, dq_jobs **out, int64_t *now_ms) {
    ENTER(c);
    return list_page(c, queue, which, offset, count, out, now_ms);
}

int dq_get(dq_client *c, const char *queue, const char *id,
           dq_job_info **out) {
    ENTER(c);
    if (out == NULL)
        return dq__err_set(&c->err, DQ_ENULL, "out is NULL");
    *out = NULL;
    dq__op op;
    int rc;
    RUN_READ(rc, c, &op, dq__op_get(&op, &c->core, queue, id, &c->err));
    if (rc == 1) {
        *out = op.info;
        op.info = NULL;
    }
    dq__op_clear(&op);
    return rc;
}

int dq_dead_requeue(dq_client *c, const char *queue, const char *id,
                    int64_t delay_ms) {
    ENTER(c);
    dq__op op;
    return run_simple(c, &op,
                      dq__op_dead(&op, &c->core, 0, queue, id, delay_ms,
                                 &c->err));
}

int dq_dead_purge(dq_client *c, const char *queue, const char *id) {
    ENTER(c);
    dq__op op;
    return run_simple(c, &op,
                      dq__op_dead(&op, &c->core, 1, queue, id, 0, &c->err));
}

int dq_stats(dq_client *c, const char *queue, int64_t *scheduled,
             int64_t *due, int64_t *inflight, int64_t *dead,
             int64_t *next_due_ms) {
    ENTER(c);
    dq__op op;
    int rc;
    RUN_READ(rc, c, &op, dq__op_stats(&op, &c->core, queue, &c->err));
    int64_t *outs[5] = {scheduled, due, inflight, dead, next_due_ms};
    for (int i = 0; rc == DQ_OK && i < 5; i++)
        if (outs[i] != NULL)
            *outs[i] = op.stats[i];
    dq__op_clear(&op);
    return rc;
}

int dq_group_stats(dq_client *c, const char *queue, int max,
                   dq_group_list **out) {
    ENTER(c);
    if (out == NULL)
        return dq__err_set(&c->err, DQ_ENULL, "out is NULL");
    *out = NULL;
    dq__op op;
    int rc;
    RUN_READ(rc, c, &op,
             dq__op_group_stats(&op, &c->core, queue, max, &c->err));
    if (rc == DQ_OK) {
        *out = op.groups;
        op.groups = NULL;
        rc = (int)dq_group_list_count(*out);
    }
    dq__op_clear(&op);
    return rc;
}

int dq_count_due(dq_client *c, const char *queue, const int64_t *bounds_ms,
                 int nbounds, int64_t *counts, int64_t *now_ms) {
    ENTER(c);
    if (counts == NULL)
        return dq__err_set(&c->err, DQ_ENULL, "counts is NULL");
    dq__op op;
    int rc;
    RUN_READ(rc, c, &op,
             dq__op_count_due(&op, &c->core, queue, bounds_ms, nbounds,
                              &c->err));
    if (rc == DQ_OK) {
        memcpy(counts, op.due_counts,
               ((size_t)op.nbounds + 1) * sizeof(*counts));
        if (now_ms != NULL)
            *now_ms = op.now_ms;
    }
    dq__op_clear(&op);
    return rc;
}

int dq_config_set(dq_client *c, const char *queue, size_t n,
                  const int *settings, const int64_t *values) {
    ENTER(c);
    if (values == NULL) /* a NULL here must not turn the set into a get */
        return dq__err_set(&c->err, DQ_ENULL, "values is NULL");
    dq__op op;
    return run_simple(c, &op,
                      dq__op_config(&op, &c->core, queue, n, settings, values,
                                    &c->err));
}

int dq_config_get(dq_client *c, const char *queue, size_t n,
                  const int *settings, int64_t *values) {
    ENTER(c);
    if (values == NULL)
        return dq__err_set(&c->err, DQ_ENULL, "values is NULL");
    dq__op op;
    int rc;
    RUN_READ(rc, c, &op,
             dq__op_config(&op, &c->core, queue, n, settings, NULL,
                           &c->err));
    for (size_t i = 0; rc == DQ_OK && i < n; i++)
        values[i] = op.conf[i];
    dq__op_clear(&op);
    return rc;
}

int dq_counters(dq_client *c, const char *queue, int64_t *delivered,
                int64_t *acked, int64_t *retried, int64_t *failed) {
    ENTER(c);
    dq__op op;
    int rc;
    RUN_READ(rc, c, &op, dq__op_counts(&op, &c->core, queue, &c->err));
    int64_t *outs[4] = {delivered, acked, retried, failed};
    for (int i = 0; i < 4; i++)
        if (outs[i] != NULL)
            *outs[i] = rc == DQ_OK ? op.stats[i] : 0;
    dq__op_clear(&op);
    return rc;
}

/* ---- The queues of the namespace ---- */

int dq_queues(dq_client *c, int max, dq_queue_list **out) {
    ENTER(c);
    if (out == NULL)
        return dq__err_set(&c->err, DQ_ENULL, "out is NULL");
    *out = NULL;
    if (max < 1 || max > DQ_QUEUES_MAX)
        return dq__err_set(&c->err, DQ_EINVAL,
                          "max %d is out of range (1..%d)", max,
                          DQ_QUEUES_MAX);
    const char *ns = c->core.opts.ns ? c->core.opts.ns : "dq";
    dq__sigpipe g;
    dq__sigpipe_block(&g);
    dq__links_listen(c->links);
    int rc;
    READ_TWICE(rc, dq__queues_scan(c->links, ns, max, out, &c->err),
               dq__err_clear(&c->err));
    dq__sigpipe_restore(&g);
    return rc < 0 ? rc : (int)dq_queue_list_count(*out);
}
