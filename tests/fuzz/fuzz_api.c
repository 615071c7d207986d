/*
 * tests/fuzz/fuzz_api.c - fuzz target: the public API, driven by random
 * sequences of calls with random arguments, against a real redis-server.
 *
 * LLVMFuzzerInitialize starts one private redis-server (tests/harness.c, on
 * a unix socket) for the whole run.  Each input is a program of at most 8
 * calls, with a client in the default, compact or compact-push layout;
 * the server is flushed first.  Arguments come from the input:
 * hostile queue names and ids (braces, colons, '%', any byte, too long,
 * empty), empty and large payloads (<= 64 KiB), delays, leases, counts and
 * flags in and out of range, tokens real and forged.  Between calls the
 * test may flush the script cache or kill the client's connections.
 *
 * What must hold, besides no crash, leak or undefined behaviour:
 *  - every result is 0/a count or a known negative code; dq_errcode and
 *    dq_errmsg agree with it (a message on failure, "" on success);
 *  - argument errors (ENULL, EINVAL, EQUEUE, EID, EDELAY, ELEASE, ETOOBIG)
 *    send nothing to Redis (its command counter moves by our INFO only);
 *  - on a healthy server no call fails with EIO, ETIMEDOUT, EPROTO, EREDIS,
 *    ENOMEM (except right after the test killed the connection);
 *  - every job delivered or listed was pushed in this program, to that
 *    queue, with that payload.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delayq.h"
#include "harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static th_redis srv;
static redisContext *admin;

#define FAIL(...)                                                \
    do {                                                         \
        fprintf(stderr, "fuzz_api: " __VA_ARGS__);               \
        fprintf(stderr, "\n");                                   \
        abort();                                                 \
    } while (0)

static void stop_server(void) {
    if (admin != NULL)
        redisFree(admin);
    admin = NULL;
    th_redis_stop(&srv);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (th_redis_start(&srv, 0, NULL) != 0)
        FAIL("cannot start redis-server");
    admin = th_redis_connect(&srv);
    if (admin == NULL)
        FAIL("cannot connect to redis-server");
    atexit(stop_server);
    return 0;
}

/* ---- input reader ---- */

typedef struct src {
    const uint8_t *p;
    size_t n;
} src;

static uint8_t u8(src *s) {
    if (s->n == 0)
        return 0;
    s->n--;
    return *s->p++;
}

static uint64_t u64(src *s) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | u8(s);
    return v;
}

/* Bytes (no NUL: C strings) of length u8 % (max + 1). */
static size_t raw_str(src *s, char *buf, size_t max) {
    size_t len = u8(s) % (max + 1), i;
    for (i = 0; i < len && s->n > 0; i++) {
        uint8_t b = u8(s);
        buf[i] = (char)(b ? b : '}');
    }
    buf[i] = '\0';
    return i;
}

/* ---- the model: what was pushed in this program ---- */

#define MAXREC 256
typedef struct rec {
    char queue[DQ_QUEUE_MAX + 1];
    char id[DQ_ID_BUF];
    uint64_t hash; /* of the payload */
    size_t len;
    int any_id;    /* pushed with a generated id we never saw */
} rec;
static rec recs[MAXREC];
static int nrecs, overflow;

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static void remember(const char *q, const char *id, const void *pl,
                     size_t len) {
    if (nrecs >= MAXREC) {
        overflow = 1;
        return;
    }
    rec *r = &recs[nrecs++];
    snprintf(r->queue, sizeof(r->queue), "%s", q);
    snprintf(r->id, sizeof(r->id), "%s", id ? id : "");
    r->any_id = id == NULL;
    r->hash = fnv(pl, len);
    r->len = len;
}

static void check_job(const char *q, const dq_job *j, int leased) {
    const char *id = dq_job_id(j);
    size_t len = 0;
    const void *pl = dq_job_payload(j, &len);
    if (id == NULL || pl == NULL || ((const char *)pl)[len] != '\0')
        FAIL("job without id or payload");
    if (leased) {
        const char *t = dq_job_token(j);
        if (dq_job_attempt(j) < 1 || t[0] == '\0' ||
            strspn(t, "0123456789") != strlen(t) ||
            dq_job_lease_deadline_ms(j) <= 0)
            FAIL("bad lease fields for job %s", id);
    }
    if (overflow)
        return;
    uint64_t h = fnv(pl, len);
    for (int i = 0; i < nrecs; i++)
        if (strcmp(recs[i].queue, q) == 0 &&
            (recs[i].any_id || strcmp(recs[i].id, id) == 0) &&
            recs[i].hash == h && recs[i].len == len)
            return;
    FAIL("queue '%s' delivered job '%s' (%zu bytes) never pushed there", q,
         id, len);
}

/* ---- argument pickers ---- */

static const char *const QUEUES[] = {
    "q", "q2", "{q}", "q}:jobs", "%", "%7Bq%7D", ":", "*", "dq:{q}:due"};
#define NQ (sizeof(QUEUES) / sizeof(QUEUES[0]))

static char qbuf[4][DQ_QUEUE_MAX + 16];

static const char *pick_queue(src *s, int slot) {
    uint8_t k = u8(s);
    if (k < 200)
        return QUEUES[k % NQ];
    if (k < 250) {
        raw_str(s, qbuf[slot], DQ_QUEUE_MAX + 10);
        return qbuf[slot];
    }
    if (k < 253) {
        size_t n = k == 250 ? DQ_QUEUE_MAX : DQ_QUEUE_MAX + 1;
        memset(qbuf[slot], k == 252 ? '{' : '}', n);
        qbuf[slot][n] = '\0';
        return qbuf[slot];
    }
    return k == 253 ? "" : NULL;
}

static const char *const IDS[] = {"j1", "j2", "j3", "*", "}", "{q}:jobs"};
#define NIDS (sizeof(IDS) / sizeof(IDS[0]))
static char idbuf[8][DQ_ID_MAX + 16];

static const char *pick_id(src *s, int slot, int allow_null) {
    uint8_t k = u8(s);
    if (k < 40 && allow_null)
        return NULL;
    if (k < 220)
        return IDS[k % NIDS];
    if (k < 250) {
        raw_str(s, idbuf[slot], DQ_ID_MAX + 5);
        return idbuf[slot];
    }
    if (k < 253) {
        size_t n = k == 250 ? DQ_ID_MAX : DQ_ID_MAX + 1;
        memset(idbuf[slot], '%', n);
        idbuf[slot][n] = '\0';
        return idbuf[slot];
    }
    return k == 253 ? "" : NULL;
}

static int64_t pick_delay(src *s) {
    static const int64_t v[] = {0, 0, 0, 1, 5, 30, -1, DQ_DELAY_MAX,
                                DQ_DELAY_MAX + 1, INT64_MIN, INT64_MAX,
                                3600000};
    uint8_t k = u8(s);
    return k < 240 ? v[k % (sizeof(v) / sizeof(v[0]))] : (int64_t)u64(s);
}

static int64_t pick_lease(src *s) {
    static const int64_t v[] = {1, 20, 1000, 60000, 0, -1, DQ_LEASE_MAX,
                                DQ_LEASE_MAX + 1, INT64_MIN, INT64_MAX};
    uint8_t k = u8(s);
    return k < 240 ? v[k % (sizeof(v) / sizeof(v[0]))] : (int64_t)u64(s);
}

static int pick_count(src *s, int limit) {
    static const int v[] = {1, 2, 5, 10, 0, -1, INT32_MIN, INT32_MAX};
    uint8_t k = u8(s);
    if (k < 16)
        return k == 0 ? limit : limit + 1;
    return v[k % (sizeof(v) / sizeof(v[0]))];
}

static int pick_flags(src *s, int valid_max) {
    uint8_t k = u8(s);
    return k < 240 ? k % (valid_max + 1) : (int)(int8_t)u8(s);
}

#define PAYLOAD_MAX (64 * 1024)
static char pbuf[4][PAYLOAD_MAX];

/* A payload: empty, a few input bytes (NULs allowed), or up to 64 KiB of a
 * pattern.  *len may exceed the client's max payload (ETOOBIG). */
static const void *pick_payload(src *s, int slot, size_t *len) {
    uint8_t k = u8(s);
    char *b = pbuf[slot];
    if (k < 20) {
        *len = 0;
        return k < 10 ? NULL : "";
    }
    if (k < 200) {
        size_t n = u8(s) % 48, i;
        for (i = 0; i < n && s->n > 0; i++)
            b[i] = (char)u8(s);
        *len = i;
        return b;
    }
    size_t n = ((size_t)u8(s) << 8 | u8(s)) % (PAYLOAD_MAX + 1);
    for (size_t i = 0; i < n; i++)
        b[i] = (char)('a' + (i * 7 + k) % 26);
    *len = n;
    return k == 255 ? NULL : b; /* NULL with a length: ENULL */
}

/* ---- held leases (tokens to ack/nack/extend) ---- */

#define MAXHELD 16
typedef struct held {
    char queue[DQ_QUEUE_MAX + 1];
    char id[DQ_ID_BUF];
    char token[DQ_TOKEN_BUF];
} held;
static held helds[MAXHELD];
static int nheld;

static void hold(const char *q, const dq_jobs *jobs) {
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        held *h = &helds[nheld++ % MAXHELD];
        snprintf(h->queue, sizeof(h->queue), "%s", q);
        snprintf(h->id, sizeof(h->id), "%s", dq_job_id(j));
        snprintf(h->token, sizeof(h->token), "%s", dq_job_token(j));
    }
}

static const char *const TOKENS[] = {"", "1", "0", "abc", "-1", "12a",
                                     "99999999999999999999999",
                                     "18446744073709551616"};

/* (queue, id, token) for ack/nack/extend: a held lease (sometimes with a
 * forged part), or anything. */
static void pick_held(src *s, const char **q, const char **id,
                      const char **tok) {
    uint8_t k = u8(s);
    int n = nheld < MAXHELD ? nheld : MAXHELD;
    if (n > 0 && k < 160) {
        held *h = &helds[u8(s) % n];
        *q = h->queue;
        *id = h->id;
        *tok = h->token;
        if (k >= 130)
            *tok = TOKENS[k % (sizeof(TOKENS) / sizeof(TOKENS[0]))];
        if (k >= 145)
            *q = pick_queue(s, 3);
        return;
    }
    *q = pick_queue(s, 3);
    *id = pick_id(s, 7, 0);
    *tok = k >= 250 ? NULL
                    : TOKENS[k % (sizeof(TOKENS) / sizeof(TOKENS[0]))];
}

/* ---- checking one result ---- */

static long long total_commands(void) {
    redisReply *r = redisCommand(admin, "INFO stats");
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        FAIL("INFO stats failed");
    const char *p = strstr(r->str, "total_commands_processed:");
    long long v = p ? atoll(p + 25) : -1;
    freeReplyObject(r);
    return v;
}

static int is_arg_error(int rc) {
    return rc == DQ_ENULL || rc == DQ_EINVAL || rc == DQ_EQUEUE ||
           rc == DQ_EID || rc == DQ_EDELAY || rc == DQ_ELEASE ||
           rc == DQ_ETOOBIG;
}

static long expect_io; /* connections the test killed: that many EIOs */

static void check_rc(dq_client *c, const char *what, int rc,
                     long long before) {
    if (rc < DQ_ERRNO_MIN)
        FAIL("%s: unknown code %d", what, rc);
    if (dq_errcode(c) != (rc < 0 ? rc : 0))
        FAIL("%s: returned %d but dq_errcode says %d", what, rc,
             dq_errcode(c));
    const char *msg = dq_errmsg(c);
    if ((rc < 0) != (msg[0] != '\0'))
        FAIL("%s: code %d with message \"%s\"", what, rc, msg);
    if (rc < 0 && strcmp(dq_errname(rc), "UNKNOWN") == 0)
        FAIL("%s: code %d has no name", what, rc);
    if (is_arg_error(rc)) {
        long long after = total_commands();
        if (after != before + 1)
            FAIL("%s: argument error %s (%s) but %lld commands reached "
                 "Redis",
                 what, dq_errname(rc), msg, after - before - 1);
        return;
    }
    if ((rc == DQ_EIO || rc == DQ_ETIMEDOUT) && expect_io > 0) {
        expect_io--;
        return;
    }
    if (rc == DQ_EIO || rc == DQ_ETIMEDOUT || rc == DQ_EPROTO ||
        rc == DQ_EREDIS || rc == DQ_ENOMEM || rc == DQ_EAUTH ||
        rc == DQ_EOOM || rc == DQ_ENOTSUP || rc == DQ_EURI)
        FAIL("%s: %s: %s", what, dq_errname(rc), msg);
}

/* ---- one program ---- */

enum op {
    OP_PUSH, OP_PUSH_AT, OP_BATCH, OP_POLL, OP_POLL_WAIT, OP_ACK,
    OP_ACK_BATCH, OP_NACK, OP_EXTEND, OP_CANCEL, OP_DEAD_LIST,
    OP_DEAD_REQUEUE, OP_DEAD_PURGE, OP_STATS, OP_FLUSH_SCRIPTS,
    OP_KILL_CONN, OP_PUSH_EX, OP_CONFIG, OP_RESCHEDULE, OP_COUNT
};

/* A setting's value: DQ_UNSET, in range for most settings, or out. */
static int64_t pick_setting_value(src *s) {
    static const int64_t v[] = {DQ_UNSET, 0,    1,  2, 3, 5, 100, 1000,
                                60000,    -2,   DQ_DELAY_MAX + 1, INT64_MAX,
                                INT64_MIN, 250};
    uint8_t k = u8(s);
    return k < 240 ? v[k % (sizeof(v) / sizeof(v[0]))] : (int64_t)u64(s);
}

/* Push options from the input (the setters may refuse a value: then that
 * option stays as it was), or NULL. */
static dq_push_opts *pick_push_opts(src *s) {
    uint8_t k = u8(s);
    if (k < 40)
        return NULL;
    dq_push_opts *o = dq_push_opts_new();
    if (o == NULL)
        FAIL("dq_push_opts_new");
    if (k & 1)
        dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, pick_setting_value(s));
    if (k & 2)
        dq_push_opts_set(o, k & 4 ? DQ_PUSHOPT_EXPIRE_IN_MS
                                  : DQ_PUSHOPT_EXPIRE_AT,
                         pick_delay(s));
    if (k & 8) { /* an unknown option: refused, nothing changes */
        uint8_t b = u8(s);
        int opt = b & 1 ? -(int)b : 100 + b;
        if (dq_push_opts_set(o, opt, 1) != DQ_EINVAL)
            FAIL("dq_push_opts_set took unknown option %d", opt);
    }
    return o;
}

static void run_op(dq_client *c, src *s) {
    int op = u8(s) % OP_COUNT;
    long long before = total_commands();
    const char *q = pick_queue(s, 0);
    int rc = 0;
    const char *what = "?";
    dq_jobs *jobs = NULL;
    switch (op) {
    case OP_PUSH:
    case OP_PUSH_AT: {
        size_t len;
        const void *pl = pick_payload(s, 0, &len);
        const char *id = pick_id(s, 0, 1);
        int64_t t = pick_delay(s);
        int flags = pick_flags(s, 1);
        char out[DQ_ID_BUF];
        int outcome = 0;
        size_t osize = u8(s) < 240 ? sizeof(out) : u8(s) % 24;
        char *outp = u8(s) < 200 ? out : NULL;
        if (op == OP_PUSH_AT) {
            what = "push_at";
            if (t > 0 && t < DQ_DELAY_MAX)
                t = t % 2 ? 1 : INT64_C(1700000000000); /* in the past */
            rc = dq_push_at(c, q, pl, len, t, id, flags, outp, osize,
                            &outcome);
        } else {
            what = "push";
            rc = dq_push(c, q, pl, len, t, id, flags, outp, osize, &outcome);
        }
        check_rc(c, what, rc, before);
        if (rc == 0) {
            /* DQ_DONE: the id was acked moments ago (a retried push) */
            if (outcome < DQ_PUSHED || outcome > DQ_DONE)
                FAIL("push outcome %d", outcome);
            int wrote = outcome == DQ_PUSHED || outcome == DQ_REPLACED;
            if (outp != NULL && id != NULL && strcmp(out, id) != 0)
                FAIL("push returned id '%s' for '%s'", out, id);
            if (outp != NULL && wrote)
                remember(q, out, pl, len);
            else if (outp == NULL && wrote)
                remember(q, id, pl, len); /* id NULL: generated, unseen */
        }
        break;
    }
    case OP_BATCH: {
        what = "push_batch";
        size_t n = u8(s) % 12;
        if (u8(s) > 250)
            n = DQ_BATCH_MAX + 1;
        size_t cap = n > 12 ? 12 : n;
        static const void *pls[12];
        static size_t lens[12];
        static int64_t delays[12];
        static const char *ids[12];
        static char ids_out[12 * DQ_ID_BUF];
        static int outcomes[12];
        for (size_t i = 0; i < cap; i++) {
            pls[i] = pick_payload(s, i % 4, &lens[i]);
            if (lens[i] > 64) /* the 4 buffers are shared: keep it small */
                lens[i] = 64;
            delays[i] = pick_delay(s);
            ids[i] = pick_id(s, i % 8, 1);
        }
        uint8_t k = u8(s);
        rc = dq_push_batch(c, q, n, k == 1 ? NULL : pls, k == 2 ? NULL : lens,
                           k < 128 ? NULL : delays, k % 2 ? ids : NULL,
                           pick_flags(s, 1), ids_out, outcomes);
        check_rc(c, what, rc, before);
        if (rc >= 0) {
            if ((size_t)rc > n)
                FAIL("push_batch created %d of %zu", rc, n);
            for (size_t i = 0; i < cap; i++) {
                if (outcomes[i] < DQ_PUSHED || outcomes[i] > DQ_DONE)
                    FAIL("push_batch outcome %d", outcomes[i]);
                if (outcomes[i] == DQ_PUSHED || outcomes[i] == DQ_REPLACED)
                    remember(q, ids_out + i * DQ_ID_BUF, pls[i], lens[i]);
            }
        }
        break;
    }
    case OP_POLL:
    case OP_POLL_WAIT: {
        int max = pick_count(s, DQ_POLL_MAX);
        int64_t lease = pick_lease(s);
        int64_t next = -99;
        dq_jobs **outp = u8(s) < 250 ? &jobs : NULL;
        if (op == OP_POLL) {
            what = "poll";
            rc = dq_poll(c, q, max, lease, outp, u8(s) < 128 ? &next : NULL);
        } else {
            what = "poll_wait";
            uint8_t k = u8(s);
            int64_t timeout = k < 250 ? k % 51 : k == 250 ? -1
                                                           : DQ_DELAY_MAX + 1;
            rc = dq_poll_wait(c, q, max, lease, timeout, outp);
        }
        check_rc(c, what, rc, before);
        if (rc >= 0) {
            if ((size_t)rc != dq_jobs_count(jobs) || rc > max)
                FAIL("%s: %d jobs, list of %zu", what, rc,
                     dq_jobs_count(jobs));
            if (next != -99 && next < -1)
                FAIL("poll: next_due_ms %" PRId64, next);
            for (int i = 0; i < rc; i++)
                check_job(q, dq_jobs_at(jobs, (size_t)i), 1);
            hold(q, jobs);
        }
        break;
    }
    case OP_ACK:
    case OP_NACK:
    case OP_EXTEND: {
        const char *hq, *id, *tok;
        pick_held(s, &hq, &id, &tok);
        q = hq;
        if (op == OP_ACK) {
            what = "ack";
            rc = dq_ack(c, q, id, tok);
        } else if (op == OP_NACK) {
            what = "nack";
            rc = dq_nack(c, q, id, tok, pick_delay(s), pick_flags(s, 1));
            if (rc > 1)
                FAIL("nack returned %d", rc);
        } else {
            what = "extend";
            int64_t deadline = 0;
            rc = dq_extend(c, q, id, tok, pick_lease(s), &deadline);
            if (rc == 0 && deadline <= 0)
                FAIL("extend: deadline %" PRId64, deadline);
        }
        check_rc(c, what, rc, before);
        break;
    }
    case OP_ACK_BATCH: {
        what = "ack_batch";
        size_t n = u8(s) % 6;
        const char *ids[6], *toks[6], *hq = q;
        int results[6];
        for (size_t i = 0; i < n; i++)
            pick_held(s, i == 0 ? &hq : &(const char *){NULL}, &ids[i],
                      &toks[i]);
        q = hq;
        rc = dq_ack_batch(c, q, n, ids, toks, u8(s) < 200 ? results : NULL);
        check_rc(c, what, rc, before);
        if (rc > (int)n)
            FAIL("ack_batch acked %d of %zu", rc, n);
        break;
    }
    case OP_CANCEL:
        what = "cancel";
        rc = dq_cancel(c, q, pick_id(s, 0, 0), pick_flags(s, 1));
        check_rc(c, what, rc, before);
        if (rc > DQ_CANCELED_INFLIGHT)
            FAIL("cancel returned %d", rc);
        break;
    case OP_RESCHEDULE: {
        what = "reschedule";
        const char *ids[3];
        size_t n = u8(s) % 4;
        for (size_t i = 0; i < n; i++)
            ids[i] = pick_id(s, 0, 0);
        int out[3], flags = pick_flags(s, DQ_RESCHED_AT | DQ_RESCHED_REVIVE);
        int64_t when = pick_delay(s);
        rc = n == 1 && u8(s) < 128
                 ? dq_reschedule(c, q, ids[0], when, flags)
                 : dq_reschedule_batch(c, q, n, ids, when, flags, out);
        check_rc(c, what, rc, before);
        if (rc > (n <= 1 ? DQ_RESCHED_REVIVED : (int)n))
            FAIL("reschedule returned %d for %zu ids", rc, n);
        break;
    }
    case OP_DEAD_LIST: {
        what = "dead_list";
        static const int64_t offs[] = {0, 1, -1, INT32_MAX,
                                       (int64_t)INT32_MAX + 1};
        int64_t off = offs[u8(s) % 5];
        int count = pick_count(s, DQ_POLL_MAX);
        rc = dq_dead_list(c, q, off, count, u8(s) < 250 ? &jobs : NULL);
        check_rc(c, what, rc, before);
        for (int i = 0; i < rc; i++)
            check_job(q, dq_jobs_at(jobs, (size_t)i), 0);
        break;
    }
    case OP_DEAD_REQUEUE:
        what = "dead_requeue";
        rc = dq_dead_requeue(c, q, pick_id(s, 0, 1), pick_delay(s));
        check_rc(c, what, rc, before);
        break;
    case OP_DEAD_PURGE:
        what = "dead_purge";
        rc = dq_dead_purge(c, q, pick_id(s, 0, 1));
        check_rc(c, what, rc, before);
        break;
    case OP_STATS: {
        what = "stats";
        int64_t v[5] = {-9, -9, -9, -9, -9};
        uint8_t k = u8(s);
        rc = dq_stats(c, q, k & 1 ? &v[0] : NULL, k & 2 ? &v[1] : NULL,
                      k & 4 ? &v[2] : NULL, k & 8 ? &v[3] : NULL,
                      k & 16 ? &v[4] : NULL);
        check_rc(c, what, rc, before);
        if (rc == 0)
            for (int i = 0; i < 5; i++)
                if ((k >> i & 1) && v[i] < (i == 4 ? -1 : 0))
                    FAIL("stats[%d] = %" PRId64, i, v[i]);
        break;
    }
    case OP_FLUSH_SCRIPTS: {
        redisReply *r = redisCommand(admin, "SCRIPT FLUSH");
        if (r == NULL)
            FAIL("SCRIPT FLUSH");
        freeReplyObject(r);
        break;
    }
    case OP_PUSH_EX: {
        what = "push_ex";
        size_t len;
        const void *pl = pick_payload(s, 0, &len);
        const char *id = pick_id(s, 0, 1);
        int64_t t = pick_delay(s);
        int flags = pick_flags(s, 3); /* KEEP/REPLACE, | DQ_PUSH_AT */
        if ((flags & DQ_PUSH_AT) && t > 0 && t < DQ_DELAY_MAX)
            t = t % 2 ? 1 : INT64_C(1700000000000); /* in the past */
        dq_push_opts *o = pick_push_opts(s);
        char out[DQ_ID_BUF];
        int outcome = 0;
        rc = dq_push_ex(c, q, pl, len, t, id, flags, o, out, sizeof(out),
                        &outcome);
        dq_push_opts_free(o);
        check_rc(c, what, rc, before);
        if (rc == 0) {
            if (outcome < DQ_PUSHED || outcome > DQ_DONE)
                FAIL("push_ex outcome %d", outcome);
            if (outcome == DQ_PUSHED || outcome == DQ_REPLACED)
                remember(q, out, pl, len);
        }
        break;
    }
    case OP_CONFIG: {
        size_t n = u8(s) % (DQ_SET__COUNT + 2);
        int keys[DQ_SET__COUNT + 2];
        int64_t vals[DQ_SET__COUNT + 2];
        for (size_t i = 0; i < n; i++) {
            keys[i] = (int)(u8(s) % (DQ_SET__COUNT + 3)) - 1;
            vals[i] = pick_setting_value(s);
        }
        uint8_t k = u8(s);
        if (k & 1) {
            what = "config_set";
            rc = dq_config_set(c, q, n, k & 2 ? keys : NULL,
                               k & 4 ? vals : NULL);
        } else {
            what = "config_get";
            rc = dq_config_get(c, q, n, k & 2 ? keys : NULL,
                               k & 4 ? vals : NULL);
            for (size_t i = 0; rc == 0 && i < n; i++)
                if (vals[i] != DQ_UNSET && vals[i] < 0)
                    FAIL("config_get: %s is %" PRId64,
                         dq_setting_name(keys[i]), vals[i]);
        }
        check_rc(c, what, rc, before);
        break;
    }
    case OP_KILL_CONN: {
        redisReply *r = redisCommand(admin, "CLIENT KILL TYPE %s",
                                     u8(s) % 2 ? "normal" : "pubsub");
        if (r == NULL)
            FAIL("CLIENT KILL");
        if (r->type == REDIS_REPLY_INTEGER && r->integer > 0)
            expect_io += r->integer;
        freeReplyObject(r);
        break;
    }
    }
    dq_jobs_free(jobs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (admin == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    src s = {data, size};
    redisReply *r = redisCommand(admin, "FLUSHALL");
    if (r == NULL)
        FAIL("FLUSHALL: %s", admin->errstr);
    freeReplyObject(r);
    nrecs = 0;
    overflow = 0;
    nheld = 0;
    expect_io = 0;

    /* Options: a namespace and a payload limit from the input sometimes. */
    dq_options *o = dq_options_new();
    if (o == NULL)
        FAIL("dq_options_new");
    uint8_t k = u8(&s);
    if (k & 1)
        dq_options_set_int(o, DQ_OPT_MAX_PAYLOAD, 1000);
    if (k & 2)
        dq_options_set_str(o, DQ_OPT_NAMESPACE, k & 4 ? "dq:x" : "n.s-1_");
    if (k & 8)
        dq_options_set_int(o, DQ_OPT_MAX_ATTEMPTS, 1 + (k >> 4) % 3);
    /* The compact layouts for queues without the setting (the top two
     * bits: 1 compact, 2 compact-push): half the programs move jobs into
     * buckets and claim them there, not only those that set the layout. */
    if (k >> 6 == DQ_LAYOUT_COMPACT || k >> 6 == DQ_LAYOUT_COMPACT_PUSH)
        dq_options_set_int(o, DQ_OPT_LAYOUT, k >> 6);
    dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 10);
    dq_client *c = NULL;
    int rc = dq_open(srv.uri, o, &c);
    dq_options_free(o);
    if (rc != 0)
        FAIL("dq_open: %s", dq_errmsg(c));
    for (int i = 0; i < 8 && s.n > 0; i++)
        run_op(c, &s);
    dq_close(c);
    return 0;
}
