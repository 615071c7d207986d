/*
 * client.c - the blocking client: ops over one hiredis connection, plus a
 * second (subscriber) connection for dq_poll_wait's early wake-ups.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ops.h"
#include "sigpipe.h"
#include "uri.h"

struct dq_client {
    dq_core core;          /* options, key cache, id generator */
    dq_uri uri;            /* where to (re)connect */
    dq_conn *conn;         /* main connection; NULL while disconnected */
    dq_conn *sub;          /* subscriber for poll_wait; NULL until used */
    char sub_channel[DQ_KEY_MAX]; /* channel sub listens on, "" if none */
    dq_err err;            /* last error */
    char warnings[256];    /* findings at connect time */
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
        dq_err_clear(&(c)->err);  \
    } while (0)

static int open_conn(dq_client *c, dq_conn **out) {
    dq_conn_cfg cfg = {&c->uri, &c->core.opts};
    dq_sigpipe g;
    dq_sigpipe_block(&g);
    int rc = dq_conn_open(&cfg, out, &c->err);
    dq_sigpipe_restore(&g);
    return rc;
}

/* Makes sure the main connection is up, reconnecting after a break. */
static int ensure_conn(dq_client *c) {
    if (c->conn != NULL && !dq_conn_broken(c->conn))
        return DQ_OK;
    dq_conn_free(c->conn);
    c->conn = NULL;
    return open_conn(c, &c->conn);
}

/* Reads the server's eviction policy: a policy that can evict keys without
 * a TTL (allkeys-*) can silently drop queued jobs.  Best effort: a server
 * or ACL that refuses CONFIG leaves no warning.  A server that wants AUTH
 * we did not send fails the open with DQ_EAUTH now rather than on the first
 * operation. */
static int check_server(dq_client *c) {
    const char *argv[3] = {"CONFIG", "GET", "maxmemory-policy"};
    dq_reply *r = NULL;
    int rc = dq_conn_call(c->conn, 3, argv, NULL, &r, &c->err);
    if (rc != DQ_OK)
        return rc;
    if (dq_reply_is_error(r, "NOAUTH")) {
        rc = dq_err_set(&c->err, DQ_EAUTH,
                        "Redis requires AUTH: give a password in the URI or "
                        "DQ_OPT_PASSWORD");
    } else if (dq_reply_type(r) == DQ_R_ARRAY && dq_reply_len(r) == 2) {
        size_t len;
        const char *pol = dq_reply_str(dq_reply_at(r, 1), &len);
        if (len > 8 && memcmp(pol, "allkeys-", 8) == 0)
            snprintf(c->warnings, sizeof(c->warnings),
                     "maxmemory-policy is %.*s: Redis may evict queue keys "
                     "and lose jobs; use noeviction",
                     (int)(len > 40 ? 40 : len), pol);
    }
    dq_reply_free(r);
    return rc;
}

int dq_open(const char *uri, const dq_options *opts, dq_client **out) {
    if (out == NULL)
        return DQ_ENULL;
    dq_client *c = calloc(1, sizeof(*c));
    *out = c;
    if (c == NULL)
        return DQ_ENOMEM;
    if (dq_core_init(&c->core, opts) != DQ_OK)
        return dq_err_set(&c->err, DQ_ENOMEM, "out of memory");
    int rc = dq_uri_parse(uri, &c->uri, &c->err);
    if (rc != DQ_OK)
        return rc;
    if ((rc = ensure_conn(c)) != DQ_OK)
        return rc;
    dq_sigpipe g;
    dq_sigpipe_block(&g);
    rc = check_server(c);
    dq_sigpipe_restore(&g);
    return rc;
}

void dq_close(dq_client *c) {
    if (c == NULL)
        return;
    dq_conn_free(c->conn);
    dq_conn_free(c->sub);
    dq_uri_clear(&c->uri);
    dq_core_clear(&c->core);
    free(c);
}

/* Checks a reply: an error reply becomes a code with Redis's text. */
static int reply_ok(dq_client *c, const dq_reply *r, const char *what) {
    if (dq_reply_type(r) == DQ_R_ERROR)
        return dq_reply_error(r, what, &c->err);
    return DQ_OK;
}

/* Runs one script call; reloads the script (EVAL) after NOSCRIPT, which
 * happens after SCRIPT FLUSH or a server restart.  On DQ_OK *r is a
 * non-error reply the caller frees. */
static int run_io(dq_client *c, dq_cmd *cmd, dq_reply **r,
                  const char *what) {
    *r = NULL;
    int rc = ensure_conn(c);
    if (rc != DQ_OK)
        return rc;
    rc = dq_conn_call(c->conn, cmd->argc, cmd->argv, cmd->lens, r, &c->err);
    if (rc == DQ_OK && dq_reply_is_error(*r, "NOSCRIPT")) {
        dq_reply_free(*r);
        dq_cmd_use_eval(cmd);
        rc = dq_conn_call(c->conn, cmd->argc, cmd->argv, cmd->lens, r,
                          &c->err);
        dq_cmd_use_evalsha(cmd);
    }
    if (rc == DQ_OK && (rc = reply_ok(c, *r, what)) != DQ_OK) {
        dq_reply_free(*r);
        *r = NULL;
    }
    return rc;
}

/* run_io() with SIGPIPE blocked (see sigpipe.h); every command the sync
 * client sends goes through a guard like this one. */
static int run(dq_client *c, dq_cmd *cmd, dq_reply **r, const char *what) {
    dq_sigpipe g;
    dq_sigpipe_block(&g);
    int rc = run_io(c, cmd, r, what);
    dq_sigpipe_restore(&g);
    return rc;
}

/* Runs a script call that returns one integer. */
static int run_int(dq_client *c, dq_cmd *cmd, long long *v, const char *what) {
    dq_reply *r;
    int rc = run(c, cmd, &r, what);
    dq_cmd_free(cmd);
    if (rc == DQ_OK)
        rc = dq_decode_int(r, v, &c->err);
    dq_reply_free(r);
    return rc;
}

/* Sends WAIT replicas timeout after a write; DQ_EREPLICAS if too few. */
static int wait_replicas(dq_client *c) {
    char n[24], t[24];
    snprintf(n, sizeof(n), "%" PRId64, c->core.opts.wait_replicas);
    snprintf(t, sizeof(t), "%" PRId64, c->core.opts.wait_replicas_timeout_ms);
    const char *argv[3] = {"WAIT", n, t};
    dq_reply *r;
    int rc = dq_conn_call(c->conn, 3, argv, NULL, &r, &c->err);
    if (rc != DQ_OK)
        return rc;
    if ((rc = reply_ok(c, r, "WAIT")) == DQ_OK &&
        (dq_reply_type(r) != DQ_R_INTEGER ||
         dq_reply_int(r) < c->core.opts.wait_replicas))
        rc = dq_err_set(&c->err, DQ_EREPLICAS,
                        "push: written, but only %lld of %" PRId64
                        " replicas acknowledged it within %" PRId64 " ms",
                        dq_reply_type(r) == DQ_R_INTEGER ? dq_reply_int(r) : 0,
                        c->core.opts.wait_replicas,
                        c->core.opts.wait_replicas_timeout_ms);
    dq_reply_free(r);
    return rc;
}

/* Decodes the (non-error) reply of command i of a pipeline. */
typedef int (*chunk_fn)(dq_client *c, size_t i, const dq_reply *r, void *ctx);

/* Sends n script calls in one pipeline, then reads the replies in order and
 * hands each to done().  Calls refused with NOSCRIPT (script cache flushed)
 * did not run: they are sent again as EVAL, in order, once the pipeline has
 * been read.  Returns the first error. */
static int run_pipeline_io(dq_client *c, dq_cmd *cmds, size_t n,
                           chunk_fn done, void *ctx, const char *what) {
    int rc = ensure_conn(c);
    for (size_t i = 0; rc == DQ_OK && i < n; i++)
        rc = dq_conn_append(c->conn, cmds[i].argc, cmds[i].argv, cmds[i].lens,
                            &c->err);
    if (rc != DQ_OK)
        return rc;
    unsigned char *retry = calloc(n, 1);
    if (retry == NULL)
        return dq_err_set(&c->err, DQ_ENOMEM, "out of memory");
    int first_err = DQ_OK;
    size_t nretry = 0;
    for (size_t pass = 0; pass < 2 && rc == DQ_OK; pass++) {
        for (size_t i = 0; rc == DQ_OK && i < n; i++) {
            dq_reply *r;
            if (pass == 0) {
                rc = dq_conn_read(c->conn, &r, &c->err);
            } else {
                if (!retry[i])
                    continue;
                dq_cmd_use_eval(&cmds[i]);
                rc = dq_conn_call(c->conn, cmds[i].argc, cmds[i].argv,
                                  cmds[i].lens, &r, &c->err);
                dq_cmd_use_evalsha(&cmds[i]);
            }
            if (rc != DQ_OK)
                break;
            if (pass == 0 && dq_reply_is_error(r, "NOSCRIPT")) {
                retry[i] = 1;
                nretry++;
            } else {
                int one = reply_ok(c, r, what);
                if (one == DQ_OK)
                    one = done(c, i, r, ctx);
                if (one != DQ_OK && first_err == DQ_OK)
                    first_err = one;
            }
            dq_reply_free(r);
        }
        if (nretry == 0)
            break;
    }
    free(retry);
    return rc != DQ_OK ? rc : first_err;
}

static int run_pipeline(dq_client *c, dq_cmd *cmds, size_t n, chunk_fn done,
                        void *ctx, const char *what) {
    dq_sigpipe g;
    dq_sigpipe_block(&g);
    int rc = run_pipeline_io(c, cmds, n, done, ctx, what);
    dq_sigpipe_restore(&g);
    return rc;
}

static int push_chunk_done(dq_client *c, size_t i, const dq_reply *r,
                           void *ctx) {
    return dq_push_plan_decode(ctx, i, r, &c->err);
}

/* Runs every chunk of a push, then WAITs for replicas if asked to. */
static int run_push(dq_client *c, dq_push_plan *p) {
    int rc = run_pipeline(c, p->cmds, p->nchunks, push_chunk_done, p, "push");
    if (rc == DQ_OK && c->core.opts.wait_replicas > 0) {
        dq_sigpipe g;
        dq_sigpipe_block(&g);
        rc = wait_replicas(c);
        dq_sigpipe_restore(&g);
    }
    return rc;
}

static int push_common(dq_client *c, const char *queue, size_t n,
                       const void *const *payloads, const size_t *lens,
                       const int64_t *times, int absolute,
                       const char *const *ids, int flags, char *ids_out,
                       size_t id_stride, int *outcomes) {
    dq_push_plan p;
    int rc = dq_push_plan_make(&p, &c->core, queue, n, payloads, lens, times,
                               absolute, ids, flags, &c->err);
    if (rc != DQ_OK)
        return rc;
    rc = run_push(c, &p);
    if (rc == DQ_OK || rc == DQ_EREPLICAS) {
        for (size_t i = 0; i < n; i++) {
            if (ids_out != NULL)
                snprintf(ids_out + i * id_stride, id_stride, "%s",
                         p.ids + i * DQ_ID_BUF);
            if (outcomes != NULL)
                outcomes[i] = p.outcomes[i];
        }
        if (rc == DQ_OK)
            rc = dq_push_plan_count(&p);
    }
    dq_push_plan_free(&p);
    return rc;
}

static int push_one(dq_client *c, const char *queue, const void *payload,
                    size_t len, int64_t t, int absolute, const char *id,
                    int flags, char *id_out, size_t id_out_size,
                    int *outcome) {
    ENTER(c);
    int rc;
    if (id != NULL && (rc = dq_check_id(id, "id", &c->err)) != DQ_OK)
        return rc;
    if (id_out != NULL) {
        size_t need = id ? strlen(id) + 1 : 23;
        if (id_out_size < need)
            return dq_err_set(&c->err, DQ_EINVAL,
                              "id_out_size is %zu; the id needs %zu bytes "
                              "(DQ_ID_BUF always fits)",
                              id_out_size, need);
    }
    const void *pl[1] = {payload};
    const char *ids[1] = {id};
    int oc = 0;
    rc = push_common(c, queue, 1, pl, &len, &t, absolute, ids, flags, id_out,
                     id_out_size, &oc);
    if (outcome != NULL)
        *outcome = oc;
    return rc < 0 ? rc : DQ_OK;
}

int dq_push(dq_client *c, const char *queue, const void *payload, size_t len,
            int64_t delay_ms, const char *id, int flags, char *id_out,
            size_t id_out_size, int *outcome) {
    return push_one(c, queue, payload, len, delay_ms, 0, id, flags, id_out,
                    id_out_size, outcome);
}

int dq_push_at(dq_client *c, const char *queue, const void *payload,
               size_t len, int64_t at_ms, const char *id, int flags,
               char *id_out, size_t id_out_size, int *outcome) {
    return push_one(c, queue, payload, len, at_ms, 1, id, flags, id_out,
                    id_out_size, outcome);
}

int dq_push_batch(dq_client *c, const char *queue, size_t n,
                  const void *const *payloads, const size_t *lens,
                  const int64_t *delays_ms, const char *const *ids, int flags,
                  char *ids_out, int *outcomes) {
    ENTER(c);
    return push_common(c, queue, n, payloads, lens, delays_ms, 0, ids, flags,
                       ids_out, DQ_ID_BUF, outcomes);
}

int dq_cancel(dq_client *c, const char *queue, const char *id, int flags) {
    ENTER(c);
    int rc = dq_check_cancel(queue, id, flags, &c->err);
    if (rc != DQ_OK)
        return rc;
    dq_core_keys(&c->core, queue);
    dq_cmd cmd;
    long long v = 0;
    if ((rc = dq_build_cancel(&cmd, &c->core, id, flags)) != DQ_OK)
        return dq_err_set(&c->err, rc, "out of memory");
    rc = run_int(c, &cmd, &v, "cancel");
    return rc != DQ_OK ? rc : (int)v;
}

/* Checks the arguments shared by poll and poll_wait. */
static int check_poll(dq_client *c, const char *queue, int max,
                      int64_t lease_ms, dq_jobs **out) {
    if (out == NULL)
        return dq_err_set(&c->err, DQ_ENULL, "out is NULL");
    *out = NULL;
    return dq_check_poll(queue, max, lease_ms, &c->err);
}

/* One poll script call; *next_us as the script returned it. */
static int poll_once(dq_client *c, const char *queue, int max,
                     int64_t lease_ms, dq_jobs **out, int64_t *next_us) {
    dq_core_keys(&c->core, queue);
    dq_cmd cmd;
    int rc = dq_build_poll(&cmd, &c->core, max, lease_ms);
    if (rc != DQ_OK)
        return dq_err_set(&c->err, rc, "out of memory");
    dq_reply *r;
    rc = run(c, &cmd, &r, "poll");
    dq_cmd_free(&cmd);
    if (rc == DQ_OK)
        rc = dq_decode_poll(r, lease_ms, out, next_us, &c->err);
    dq_reply_free(r);
    return rc;
}

int dq_poll(dq_client *c, const char *queue, int max, int64_t lease_ms,
            dq_jobs **out, int64_t *next_due_ms) {
    ENTER(c);
    int rc = check_poll(c, queue, max, lease_ms, out);
    if (rc != DQ_OK)
        return rc;
    int64_t next_us = 0;
    rc = poll_once(c, queue, max, lease_ms, out, &next_us);
    if (next_due_ms != NULL)
        *next_due_ms = rc != 0 ? 0 : next_us < 0 ? -1 : (next_us + 999) / 1000;
    return rc;
}

/* ---- Blocking wait ---- */

/* The pub/sub channel of the current queue: its due key, "due" -> "wake". */
static void wake_channel(const dq_keys *k, char *out, size_t size) {
    snprintf(out, size, "%.*swake", (int)(k->len[0] - 3), k->key[0]);
}

/* Reads replies until one that is not a pub/sub message (the answer to a
 * command we sent); messages only mean "poll again" and are dropped. */
static int sub_read_answer(dq_client *c, dq_reply **r) {
    for (;;) {
        int rc = dq_conn_read(c->sub, r, &c->err);
        if (rc != DQ_OK)
            return rc;
        if (dq_reply_type(*r) == DQ_R_ARRAY && dq_reply_len(*r) >= 1) {
            size_t len;
            const char *kind = dq_reply_str(dq_reply_at(*r, 0), &len);
            if (len == 7 && memcmp(kind, "message", 7) == 0) {
                dq_reply_free(*r);
                continue;
            }
        }
        return DQ_OK;
    }
}

/* Makes sure sub is connected and subscribed to channel. */
static int ensure_sub(dq_client *c, const char *channel) {
    if (c->sub != NULL && !dq_conn_broken(c->sub) &&
        strcmp(c->sub_channel, channel) == 0)
        return DQ_OK;
    /* A new queue or a broken link: a fresh connection is simplest and
     * leaves no stale subscription behind. */
    dq_conn_free(c->sub);
    c->sub = NULL;
    c->sub_channel[0] = '\0';
    int rc = open_conn(c, &c->sub);
    if (rc != DQ_OK)
        return rc;
    const char *argv[2] = {"SUBSCRIBE", channel};
    dq_reply *r;
    if ((rc = dq_conn_call(c->sub, 2, argv, NULL, &r, &c->err)) != DQ_OK)
        return rc;
    rc = reply_ok(c, r, "SUBSCRIBE");
    dq_reply_free(r);
    if (rc == DQ_OK)
        snprintf(c->sub_channel, sizeof(c->sub_channel), "%s", channel);
    return rc;
}

/* Drops wake-up messages already buffered on sub.  Returns how many. */
static int sub_drain(dq_client *c) {
    int n = 0;
    dq_reply *r;
    while (dq_conn_buffered(c->sub, &r, &c->err) == 1) {
        dq_reply_free(r);
        n++;
    }
    return n;
}

/* Checks that sub is alive with a PING (answered as a pub/sub "pong"). */
static int sub_ping(dq_client *c) {
    const char *argv[1] = {"PING"};
    dq_reply *r;
    int rc = dq_conn_append(c->sub, 1, argv, NULL, &c->err);
    if (rc == DQ_OK)
        rc = sub_read_answer(c, &r);
    if (rc == DQ_OK)
        dq_reply_free(r);
    return rc;
}

static int poll_wait_io(dq_client *c, const char *queue, int max,
                        int64_t lease_ms, int64_t timeout_ms, dq_jobs **out) {
    int rc = check_poll(c, queue, max, lease_ms, out);
    if (rc == DQ_OK)
        rc = dq_check_delay(timeout_ms, "timeout_ms", &c->err);
    if (rc != DQ_OK)
        return rc;
    int64_t deadline = dq_mono_us() + timeout_ms * 1000;
    char channel[DQ_KEY_MAX + 8];
    dq_core_keys(&c->core, queue);
    wake_channel(&c->core.keys, channel, sizeof(channel));
    /* Subscribe before the first poll: a push that lands between that poll
     * and the wait below still wakes us. */
    if ((rc = ensure_sub(c, channel)) != DQ_OK)
        return rc;
    sub_drain(c);
    for (;;) {
        int64_t next_us = 0;
        rc = poll_once(c, queue, max, lease_ms, out, &next_us);
        if (rc != 0)
            return rc;
        int64_t left_us = deadline - dq_mono_us();
        if (left_us <= 0)
            return 0;
        /* Sleep until the next due time (server offset, our clock), the
         * caller's deadline or the cap, whichever is first. */
        int64_t cap_us = c->core.opts.wait_cap_ms * 1000;
        int64_t sleep_us = next_us < 0 ? cap_us : next_us;
        int capped = sleep_us >= cap_us;
        if (capped)
            sleep_us = cap_us;
        if (sleep_us > left_us) {
            sleep_us = left_us;
            capped = 0;
        }
        if (sub_drain(c) > 0)
            continue;
        rc = dq_conn_wait_readable(c->sub, sleep_us, &c->err);
        if (rc < 0) {
            /* The wake-up link broke: reconnect it and poll again. */
            if ((rc = ensure_sub(c, channel)) != DQ_OK)
                return rc;
            continue;
        }
        if (rc == 0 && capped && (rc = sub_ping(c)) != DQ_OK &&
            (rc = ensure_sub(c, channel)) != DQ_OK)
            return rc;
        sub_drain(c);
    }
}

int dq_poll_wait(dq_client *c, const char *queue, int max, int64_t lease_ms,
                 int64_t timeout_ms, dq_jobs **out) {
    ENTER(c);
    dq_sigpipe g;
    dq_sigpipe_block(&g);
    int rc = poll_wait_io(c, queue, max, lease_ms, timeout_ms, out);
    dq_sigpipe_restore(&g);
    /* A wake-up link that broke and was reconnected during the wait left
     * its error behind; the call as a whole succeeded. */
    if (rc >= 0)
        dq_err_clear(&c->err);
    return rc;
}

/* ---- Ack, nack, extend ---- */

int dq_ack(dq_client *c, const char *queue, const char *id,
           const char *token) {
    ENTER(c);
    const char *ids[1] = {id};
    const char *toks[1] = {token};
    int res = 0;
    int rc = dq_ack_batch(c, queue, 1, ids, toks, &res);
    if (rc < 0)
        return rc;
    return res == 0 ? DQ_OK : dq_result_code(res, "ack", id, &c->err);
}

/* Where the replies of an ack batch go. */
typedef struct ack_ctx {
    size_t n;     /* jobs in the batch */
    int *results; /* NULL or n results */
    int acked;    /* jobs acked so far */
} ack_ctx;

static int ack_chunk_done(dq_client *c, size_t i, const dq_reply *r,
                          void *ctx) {
    ack_ctx *a = ctx;
    size_t lo = i * DQ_PUSH_CHUNK;
    size_t m = a->n - lo < DQ_PUSH_CHUNK ? a->n - lo : DQ_PUSH_CHUNK;
    int rc = dq_decode_ack(r, m, a->results ? a->results + lo : NULL, &c->err);
    if (rc < 0)
        return rc;
    a->acked += rc;
    return DQ_OK;
}

int dq_ack_batch(dq_client *c, const char *queue, size_t n,
                 const char *const *ids, const char *const *tokens,
                 int *results) {
    ENTER(c);
    int rc = dq_check_ack(queue, n, ids, tokens, &c->err);
    if (rc != DQ_OK)
        return rc;
    dq_core_keys(&c->core, queue);
    /* Chunks of DQ_PUSH_CHUNK keep every script call bounded. */
    size_t nchunks = (n + DQ_PUSH_CHUNK - 1) / DQ_PUSH_CHUNK;
    dq_cmd *cmds = calloc(nchunks, sizeof(*cmds));
    if (cmds == NULL)
        return dq_err_set(&c->err, DQ_ENOMEM, "out of memory");
    size_t built = 0;
    for (; built < nchunks; built++) {
        size_t lo = built * DQ_PUSH_CHUNK;
        size_t m = n - lo < DQ_PUSH_CHUNK ? n - lo : DQ_PUSH_CHUNK;
        if ((rc = dq_build_ack(&cmds[built], &c->core, m, ids + lo,
                               tokens + lo)) != DQ_OK)
            break;
    }
    ack_ctx a = {n, results, 0};
    if (rc == DQ_OK)
        rc = run_pipeline(c, cmds, nchunks, ack_chunk_done, &a, "ack");
    else
        rc = dq_err_set(&c->err, rc, "out of memory");
    for (size_t i = 0; i < built; i++)
        dq_cmd_free(&cmds[i]);
    free(cmds);
    return rc != DQ_OK ? rc : a.acked;
}

int dq_nack(dq_client *c, const char *queue, const char *id,
            const char *token, int64_t delay_ms, int flags) {
    ENTER(c);
    int rc = dq_check_nack(queue, id, token, delay_ms, flags, &c->err);
    if (rc != DQ_OK)
        return rc;
    dq_core_keys(&c->core, queue);
    dq_cmd cmd;
    long long v = 0;
    if ((rc = dq_build_nack(&cmd, &c->core, id, token, delay_ms, flags)))
        return dq_err_set(&c->err, rc, "out of memory");
    if ((rc = run_int(c, &cmd, &v, "nack")) != DQ_OK)
        return rc;
    return v >= 0 ? (int)v : dq_result_code(v, "nack", id, &c->err);
}

int dq_extend(dq_client *c, const char *queue, const char *id,
              const char *token, int64_t lease_ms, int64_t *deadline_ms) {
    ENTER(c);
    int rc = dq_check_extend(queue, id, token, lease_ms, &c->err);
    if (rc != DQ_OK)
        return rc;
    dq_core_keys(&c->core, queue);
    dq_cmd cmd;
    long long v = 0;
    if ((rc = dq_build_extend(&cmd, &c->core, id, token, lease_ms)))
        return dq_err_set(&c->err, rc, "out of memory");
    if ((rc = run_int(c, &cmd, &v, "extend")) != DQ_OK)
        return rc;
    if (v < 0)
        return dq_result_code(v, "extend", id, &c->err);
    if (deadline_ms != NULL)
        *deadline_ms = v;
    return DQ_OK;
}

/* ---- Dead letters and stats ---- */

/* One page of a listing (dq_list, dq_dead_list). */
static int list_page(dq_client *c, const char *queue, int which,
                     int64_t offset, int count, dq_jobs **out,
                     int64_t *now_ms, const char *what) {
    if (out == NULL)
        return dq_err_set(&c->err, DQ_ENULL, "out is NULL");
    *out = NULL;
    int rc = dq_check_queue(queue, &c->err);
    if (rc == DQ_OK)
        rc = dq_check_page(which, offset, count, &c->err);
    if (rc != DQ_OK)
        return rc;
    dq_core_keys(&c->core, queue);
    dq_cmd cmd;
    if ((rc = dq_build_list(&cmd, &c->core, which, offset, count)) != DQ_OK)
        return dq_err_set(&c->err, rc, "out of memory");
    dq_reply *r;
    rc = run(c, &cmd, &r, what);
    dq_cmd_free(&cmd);
    if (rc == DQ_OK)
        rc = dq_decode_list(r, which, out, now_ms, &c->err);
    dq_reply_free(r);
    return rc;
}

int dq_dead_list(dq_client *c, const char *queue, int64_t offset, int count,
                 dq_jobs **out) {
    ENTER(c);
    return list_page(c, queue, DQ_LIST_DEAD, offset, count, out, NULL,
                     "dead list");
}

int dq_list(dq_client *c, const char *queue, int which, int64_t offset,
            int count, dq_jobs **out, int64_t *now_ms) {
    ENTER(c);
    return list_page(c, queue, which, offset, count, out, now_ms, "list");
}

static int dead_change(dq_client *c, const char *queue, const char *action,
                       const char *id, int64_t delay_ms) {
    int rc = dq_check_dead_change(queue, id, delay_ms, &c->err);
    if (rc != DQ_OK)
        return rc;
    dq_core_keys(&c->core, queue);
    dq_cmd cmd;
    long long v = 0;
    if ((rc = dq_build_dead_change(&cmd, &c->core, action, id, delay_ms)))
        return dq_err_set(&c->err, rc, "out of memory");
    rc = run_int(c, &cmd, &v, action);
    return rc != DQ_OK ? rc : (int)v;
}

int dq_dead_requeue(dq_client *c, const char *queue, const char *id,
                    int64_t delay_ms) {
    ENTER(c);
    return dead_change(c, queue, "requeue", id, delay_ms);
}

int dq_dead_purge(dq_client *c, const char *queue, const char *id) {
    ENTER(c);
    return dead_change(c, queue, "purge", id, 0);
}

int dq_stats(dq_client *c, const char *queue, int64_t *scheduled,
             int64_t *due, int64_t *inflight, int64_t *dead,
             int64_t *next_due_ms) {
    ENTER(c);
    int rc = dq_check_queue(queue, &c->err);
    if (rc != DQ_OK)
        return rc;
    dq_core_keys(&c->core, queue);
    dq_cmd cmd;
    if ((rc = dq_build_stats(&cmd, &c->core)) != DQ_OK)
        return dq_err_set(&c->err, rc, "out of memory");
    dq_reply *r;
    rc = run(c, &cmd, &r, "stats");
    dq_cmd_free(&cmd);
    int64_t v[5];
    if (rc == DQ_OK)
        rc = dq_decode_stats(r, v, &c->err);
    dq_reply_free(r);
    if (rc != DQ_OK)
        return rc;
    int64_t *outs[5] = {scheduled, due, inflight, dead, next_due_ms};
    for (int i = 0; i < 5; i++)
        if (outs[i] != NULL)
            *outs[i] = v[i];
    return DQ_OK;
}
