/*
 * tests/test_contract.c - the queue's contract where earlier versions broke
 * it:
 *
 *  - failure atomicity: a script that fails (a key of the wrong type) has
 *    written nothing, for every operation (reschedule and promote too) and
 *    every one of the five keys;
 *  - a late ack (and extend) of a job a poll dead-lettered for
 *    DQ_OPT_MAX_ATTEMPTS while nobody else claimed it still counts;
 *  - dq_cancel of a job whose lease ran out answers DQ_CANCEL_BUSY whether
 *    or not a poll ran since;
 *  - the wake-up channel names the database: a push in db 3 neither
 *    publishes on db 0's channel nor wakes a dq_poll_wait in db 0;
 *  - an id named twice in dq_ack_batch is acked once;
 *  - a huge dq_push_batch is cut into commands Redis accepts;
 *  - a queue without jobs leaves no key behind;
 *  - done records: a retried keep push after the ack answers DQ_DONE, a
 *    retried ack tells "yours landed" (0) from "someone else's"
 *    (DQ_ESTALE);
 *  - batches of 9,000 (more than Lua's unpack() limit) in one call.
 */
#include "test_suite.h"
#include "test_utils.h"

#include <pthread.h>

#define NKINDS 5
static const char *const KINDS[NKINDS] = {"due", "lease", "jobs", "dead",
                                          "done"};

/* ---- small helpers ------------------------------------------------------ */

/* Runs a command that must not fail and frees its reply. */
static void rdo(redisContext *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void rdo(redisContext *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    ck_assert_msg(rep != NULL, "redis command %s failed: %s", fmt, r->errstr);
    ck_assert_msg(rep->type != REDIS_REPLY_ERROR, "redis command %s: %s", fmt,
                  rep->str);
    freeReplyObject(rep);
}

/* Waits (bounded) until the server's clock has passed at_ms. */
static void wait_server_past(redisContext *r, int64_t at_ms) {
    int64_t end = th_mono_ms() + 3000;
    while (server_ms(r) <= at_ms) {
        ck_assert_msg(th_mono_ms() < end, "server clock did not pass %" PRId64,
                      at_ms);
        th_sleep_ms(5);
    }
}

/* The job with this id in a list (NULL if none). */
static const dq_job *job_by_id(const dq_jobs *jobs, const char *id) {
    for (size_t i = 0; i < dq_jobs_count(jobs); i++)
        if (strcmp(dq_job_id(dq_jobs_at(jobs, i)), id) == 0)
            return dq_jobs_at(jobs, i);
    return NULL;
}

/* Polls exactly one job, checks its id, copies its token; returns the
 * lease deadline. */
static int64_t take(dq_client *c, const char *q, const char *id,
                    int64_t lease_ms, char tok[DQ_TOKEN_BUF]) {
    dq_jobs *j = NULL;
    int n = poll_n(c, q, 1, lease_ms, &j, NULL);
    ck_assert_msg(n == 1, "%s: expected to claim %s, got %d jobs", q, id, n);
    const dq_job *job = dq_jobs_at(j, 0);
    ck_assert_msg(strcmp(dq_job_id(job), id) == 0, "%s: claimed %s, not %s", q,
                  dq_job_id(job), id);
    snprintf(tok, DQ_TOKEN_BUF, "%s", dq_job_token(job));
    int64_t dl = dq_job_lease_deadline_ms(job);
    dq_jobs_free(j);
    return dl;
}

/* ---- canonical dump of a queue's five keys -------------------------------- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_putc(sbuf *b, char ch) {
    if (b->n + 2 > b->cap) {
        b->cap = b->cap ? b->cap * 2 : 512;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    b->p[b->n++] = ch;
    b->p[b->n] = '\0';
}

static void sb_lit(sbuf *b, const char *s) {
    while (*s)
        sb_putc(b, *s++);
}

/* Bytes, escaped so that separators and binary bytes are unambiguous. */
static void sb_bytes(sbuf *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x21 || ch > 0x7e || ch == '\\' || ch == ',' || ch == '=' ||
            ch == ';' || ch == '|') {
            sb_putc(b, '\\');
            sb_putc(b, 'x');
            sb_putc(b, hex[ch >> 4]);
            sb_putc(b, hex[ch & 15]);
        } else {
            sb_putc(b, (char)ch);
        }
    }
}

static void sb_free(sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof(*b));
}

typedef struct hpair {
    const redisReply *f, *v;
} hpair;

static int hpair_cmp(const void *a, const void *b) {
    const redisReply *x = ((const hpair *)a)->f, *y = ((const hpair *)b)->f;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->str, y->str, n);
    if (c != 0)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* "kind=<type>[ttl]:<content>;" for one key. */
static void dump_key(redisContext *r, const char *key, const char *kind,
                     sbuf *b) {
    sb_lit(b, kind);
    sb_putc(b, '=');
    redisReply *t = th_cmd(r, "TYPE %s", key);
    ck_assert_int_eq(t->type, REDIS_REPLY_STATUS);
    sb_lit(b, t->str);
    int type_none = strcmp(t->str, "none") == 0;
    int type_str = strcmp(t->str, "string") == 0;
    int type_zset = strcmp(t->str, "zset") == 0;
    int type_hash = strcmp(t->str, "hash") == 0;
    freeReplyObject(t);
    if (type_none) {
        sb_putc(b, ';');
        return;
    }
    redisReply *ttl = th_cmd(r, "PTTL %s", key);
    ck_assert_int_eq(ttl->type, REDIS_REPLY_INTEGER);
    sb_lit(b, ttl->integer >= 0 ? "[ttl]" : "");
    freeReplyObject(ttl);
    sb_putc(b, ':');
    redisReply *v = NULL;
    if (type_str) {
        v = th_cmd(r, "GET %s", key);
        ck_assert_int_eq(v->type, REDIS_REPLY_STRING);
        sb_bytes(b, v->str, v->len);
    } else if (type_zset) {
        v = th_cmd(r, "ZRANGE %s 0 -1 WITHSCORES", key);
        ck_assert_int_eq(v->type, REDIS_REPLY_ARRAY);
        /* ordered by (score, member): canonical */
        for (size_t i = 0; i + 1 < v->elements; i += 2) {
            sb_bytes(b, v->element[i]->str, v->element[i]->len);
            sb_putc(b, '|');
            sb_bytes(b, v->element[i + 1]->str, v->element[i + 1]->len);
            sb_putc(b, ',');
        }
    } else if (type_hash) {
        v = th_cmd(r, "HGETALL %s", key);
        ck_assert_int_eq(v->type, REDIS_REPLY_ARRAY);
        size_t n = v->elements / 2;
        hpair *ps = calloc(n + 1, sizeof(*ps));
        ck_assert_ptr_nonnull(ps);
        for (size_t i = 0; i < n; i++) {
            ps[i].f = v->element[2 * i];
            ps[i].v = v->element[2 * i + 1];
        }
        qsort(ps, n, sizeof(*ps), hpair_cmp);
        for (size_t i = 0; i < n; i++) {
            sb_bytes(b, ps[i].f->str, ps[i].f->len);
            sb_putc(b, '|');
            sb_bytes(b, ps[i].v->str, ps[i].v->len);
            sb_putc(b, ',');
        }
        free(ps);
    } else {
        sb_lit(b, "(unexpected type)");
    }
    if (v != NULL)
        freeReplyObject(v);
    sb_putc(b, ';');
}

/* The five keys of queue q, canonically; on a partitioned run the five
 * plain keys (the jobs hash holds the partition count) and the five of
 * every partition. */
static void dump_queue(redisContext *r, const char *q, sbuf *b) {
    b->n = 0;
    sb_putc(b, '\0');
    b->n = 0;
    int np = tu_parts();
    for (int p = -1; p < (np > 1 ? np : 0); p++) {
        for (int k = 0; k < NKINDS; k++) {
            char key[700], kind[32];
            tu_part_key(key, sizeof(key), "dq", q, KINDS[k], p);
            snprintf(kind, sizeof(kind), p < 0 ? "%s" : "%s#%d", KINDS[k], p);
            dump_key(r, key, kind, b);
        }
    }
}

/* Fails with both dumps (around the first difference) unless equal. */
static void same_state(const char *what, const sbuf *want, const sbuf *got) {
    if (want->n == got->n && memcmp(want->p, got->p, want->n) == 0)
        return;
    size_t i = 0;
    while (i < want->n && i < got->n && want->p[i] == got->p[i])
        i++;
    size_t from = i > 200 ? i - 200 : 0;
    ck_abort_msg("%s: the queue changed although the call failed\n"
                 "  before: ...%.700s\n  after:  ...%.700s",
                 what, want->p + from, got->p + from);
}

/* A key moved aside (DUMP) and replaced by a string. */
typedef struct saved {
    int existed;
    long long pttl;
    char *blob;
    size_t len;
} saved;

static void spoil(redisContext *r, const char *key, saved *s) {
    memset(s, 0, sizeof(*s));
    redisReply *d = th_cmd(r, "DUMP %s", key);
    if (d->type == REDIS_REPLY_STRING) {
        s->existed = 1;
        s->len = d->len;
        s->blob = malloc(d->len + 1);
        ck_assert_ptr_nonnull(s->blob);
        memcpy(s->blob, d->str, d->len);
        redisReply *t = th_cmd(r, "PTTL %s", key);
        s->pttl = t->integer > 0 ? t->integer : 0;
        freeReplyObject(t);
    } else {
        ck_assert_int_eq(d->type, REDIS_REPLY_NIL);
    }
    freeReplyObject(d);
    rdo(r, "DEL %s", key);
    rdo(r, "SET %s x", key);
}

static void unspoil(redisContext *r, const char *key, saved *s) {
    rdo(r, "DEL %s", key);
    if (s->existed) {
        redisReply *rep = redisCommand(r, "RESTORE %s %lld %b", key, s->pttl,
                                       s->blob, s->len);
        ck_assert_ptr_nonnull(rep);
        ck_assert_msg(rep->type != REDIS_REPLY_ERROR, "RESTORE: %s", rep->str);
        freeReplyObject(rep);
    }
    free(s->blob);
    memset(s, 0, sizeof(*s));
}

/* ---- 1. failure atomicity ------------------------------------------------ */

/* The job ids of the atomicity test, by name ("a1", "nobody"...).  Each
 * script of a partitioned queue works on one partition, so a call whose
 * jobs span partitions (a batch: one script per partition) is atomic per
 * partition only.  On a partitioned run every id of the test hashes to
 * partition ATOM_PART: each operation is one script on that partition
 * again (a poll or a requeue/purge of all also visits the other, empty,
 * partitions), and spoiling that partition's keys checks what spoiling
 * the queue's keys checks on a plain run.  On a plain run the id is the
 * name. */
enum { ATOM_PART = 0 };

static const char *jid(const char *name) {
    static struct {
        char name[8];
        char id[32];
    } tab[16];
    static int n;
    for (int i = 0; i < n; i++)
        if (strcmp(tab[i].name, name) == 0)
            return tab[i].id;
    ck_assert_int_lt(n, 16);
    snprintf(tab[n].name, sizeof(tab[n].name), "%s", name);
    tu_id_in(tab[n].id, sizeof(tab[n].id), name, ATOM_PART);
    return tab[n++].id;
}

/* The state an operation runs on.  Every queue starts with jobs in all five
 * keys: a1 acked (done), d1 dead, l1 in flight (60 s lease), p1
 * scheduled (60 s); each operation adds what it needs. */
typedef struct actx {
    char q[96];
    dq_client *c;  /* no max attempts */
    dq_client *cm; /* DQ_OPT_MAX_ATTEMPTS = 2 */
    dq_client *c1; /* DQ_OPT_MAX_ATTEMPTS = 1 */
    redisContext *r;
    char tok_a1[DQ_TOKEN_BUF], tok_l1[DQ_TOKEN_BUF];
    char tok_b1[DQ_TOKEN_BUF], tok_b2[DQ_TOKEN_BUF], tok_x1[DQ_TOKEN_BUF];
} actx;

static void base_state(actx *x) {
    push_text(x->c, x->q, "A1", 0, jid("a1"), 0, NULL);
    take(x->c, x->q, jid("a1"), 60000, x->tok_a1);
    ck_assert_int_eq(dq_ack(x->c, x->q, jid("a1"), x->tok_a1), 0);
    push_text(x->c, x->q, "D1", 0, jid("d1"), 0, NULL);
    char t[DQ_TOKEN_BUF];
    take(x->c, x->q, jid("d1"), 60000, t);
    ck_assert_int_eq(dq_nack(x->c, x->q, jid("d1"), t, 0, DQ_NACK_DEAD), 1);
    push_text(x->c, x->q, "L1", 0, jid("l1"), 0, NULL);
    take(x->c, x->q, jid("l1"), 60000, x->tok_l1);
    push_text(x->c, x->q, "P1", 60000, jid("p1"), 0, NULL);
}

static void setup_none(actx *x) { (void)x; }

static void setup_ack_batch(actx *x) {
    push_text(x->c, x->q, "B1", 0, jid("b1"), 0, NULL);
    take(x->c, x->q, jid("b1"), 60000, x->tok_b1);
    push_text(x->c, x->q, "B2", 0, jid("b2"), 0, NULL);
    take(x->c, x->q, jid("b2"), 60000, x->tok_b2);
}

/* e1: delivered twice, lease expired (dies under max attempts 2);
 * e2: delivered once, lease expired (redelivered); e3: due now. */
static void setup_poll(actx *x) {
    char t[DQ_TOKEN_BUF];
    push_text(x->c, x->q, "E1", 0, jid("e1"), 0, NULL);
    int64_t dl = take(x->c, x->q, jid("e1"), 1, t);
    wait_server_past(x->r, dl);
    int64_t dl1 = take(x->c, x->q, jid("e1"), 300, t); /* attempt 2 */
    push_text(x->c, x->q, "E2", 0, jid("e2"), 0, NULL);
    int64_t dl2 = take(x->c, x->q, jid("e2"), 1, t);
    push_text(x->c, x->q, "E3", 0, jid("e3"), 0, NULL);
    wait_server_past(x->r, dl1 > dl2 ? dl1 : dl2);
}

/* x1: dead-lettered by a poll (max attempts 1) after its lease ran out;
 * its holder still has the token. */
static void setup_extend_dead(actx *x) {
    push_text(x->c1, x->q, "X1", 0, jid("x1"), 0, NULL);
    int64_t dl = take(x->c1, x->q, jid("x1"), 1, x->tok_x1);
    wait_server_past(x->r, dl);
    dq_jobs *j = NULL;
    ck_assert_int_eq(poll_n(x->c1, x->q, 10, 60000, &j, NULL), 0);
}

static int op_push_keep(actx *x) {
    int oc = 0;
    char id[DQ_ID_BUF];
    return dq_push(x->c, x->q, "N1", 2, 0, jid("n1"), DQ_PUSH_KEEP, id,
                   sizeof(id), &oc);
}

static int op_push_replace_leased(actx *x) {
    int oc = 0;
    return dq_push(x->c, x->q, "L1b", 3, 0, jid("l1"), DQ_PUSH_REPLACE, NULL,
                   0, &oc);
}

static int op_push_replace_done(actx *x) {
    int oc = 0;
    return dq_push(x->c, x->q, "A1b", 3, 0, jid("a1"), DQ_PUSH_REPLACE, NULL,
                   0, &oc);
}

static int op_push_batch_keep(actx *x) {
    const void *pl[4] = {"N1", "P1b", "A1b", "N2"};
    size_t lens[4] = {2, 3, 3, 2};
    const char *ids[4] = {jid("n1"), jid("p1"), jid("a1"), jid("n2")};
    int oc[4];
    return dq_push_batch(x->c, x->q, 4, pl, lens, NULL, ids, DQ_PUSH_KEEP,
                         NULL, oc);
}

static int op_push_batch_replace(actx *x) {
    const void *pl[5] = {"P1b", "L1b", "D1b", "A1b", "N1"};
    size_t lens[5] = {3, 3, 3, 3, 2};
    const char *ids[5] = {jid("p1"), jid("l1"), jid("d1"), jid("a1"),
                          jid("n1")};
    int oc[5];
    return dq_push_batch(x->c, x->q, 5, pl, lens, NULL, ids, DQ_PUSH_REPLACE,
                         NULL, oc);
}

static int op_poll(actx *x) {
    dq_jobs *j = NULL;
    int64_t next = 0;
    int n = dq_poll(x->cm, x->q, 10, 60000, &j, &next);
    dq_jobs_free(j);
    return n;
}

static int op_ack(actx *x) {
    return dq_ack(x->c, x->q, jid("l1"), x->tok_l1);
}

static int op_ack_batch(actx *x) {
    const char *ids[4] = {jid("b1"), jid("l1"), jid("nobody"), jid("b2")};
    const char *toks[4] = {x->tok_b1, x->tok_l1, "1", x->tok_b2};
    int res[4];
    return dq_ack_batch(x->c, x->q, 4, ids, toks, res);
}

static int op_nack_requeue(actx *x) {
    return dq_nack(x->c, x->q, jid("l1"), x->tok_l1, 0, 0);
}

static int op_nack_dead(actx *x) {
    return dq_nack(x->c, x->q, jid("l1"), x->tok_l1, 0, DQ_NACK_DEAD);
}

static int op_extend(actx *x) {
    int64_t dl = 0;
    return dq_extend(x->c, x->q, jid("l1"), x->tok_l1, 60000, &dl);
}

static int op_extend_dead(actx *x) {
    int64_t dl = 0;
    return dq_extend(x->c, x->q, jid("x1"), x->tok_x1, 60000, &dl);
}

static int op_cancel_pending(actx *x) {
    return dq_cancel(x->c, x->q, jid("p1"), 0);
}

static int op_cancel_inflight(actx *x) {
    return dq_cancel(x->c, x->q, jid("l1"), DQ_CANCEL_INFLIGHT);
}

static int op_dead_requeue_one(actx *x) {
    return dq_dead_requeue(x->c, x->q, jid("d1"), 0);
}

static int op_dead_requeue_all(actx *x) {
    return dq_dead_requeue(x->c, x->q, NULL, 0);
}

static int op_dead_purge_one(actx *x) {
    return dq_dead_purge(x->c, x->q, jid("d1"));
}

static int op_dead_purge_all(actx *x) { return dq_dead_purge(x->c, x->q, NULL); }

/* a1 was acked with tok_a1: the retry hits its done record. */
static int op_ack_retry(actx *x) {
    return dq_ack(x->c, x->q, jid("a1"), x->tok_a1);
}

static int op_nack_reason_requeue(actx *x) {
    return dq_nack_reason(x->c, x->q, jid("l1"), x->tok_l1, 0, 0, "r\0x", 3);
}

static int op_nack_reason_dead(actx *x) {
    return dq_nack_reason(x->c, x->q, jid("l1"), x->tok_l1, 0, DQ_NACK_DEAD,
                          "why", 3);
}

static int op_promote(actx *x) { return dq_promote(x->c, x->q, jid("p1"), 0); }

/* p1 moves, d1 is revived, l1 stays in flight, nobody is unknown. */
static int op_reschedule_batch(actx *x) {
    const char *ids[4] = {jid("p1"), jid("l1"), jid("d1"), jid("nobody")};
    int out[4];
    return dq_reschedule_batch(x->c, x->q, 4, ids, 5000, DQ_RESCHED_REVIVE,
                               out);
}

/* Read-only: a spoiled key fails it, and it writes nothing either way. */
static int op_get(actx *x) {
    dq_job_info *in = NULL;
    int rc = dq_get(x->c, x->q, jid("l1"), &in);
    dq_job_info_free(in);
    return rc;
}

typedef struct aop {
    const char *name;
    void (*setup)(actx *);
    int (*run)(actx *);
    int want; /* what the call returns when no key is spoiled */
} aop;

static const aop AOPS[] = {
    {"push_keep", setup_none, op_push_keep, 0},
    {"push_replace_leased", setup_none, op_push_replace_leased, 0},
    {"push_replace_done", setup_none, op_push_replace_done, 0},
    {"push_batch_keep", setup_none, op_push_batch_keep, 2},
    {"push_batch_replace", setup_none, op_push_batch_replace, 5},
    {"poll_expired_max_attempts", setup_poll, op_poll, 2},
    {"ack", setup_none, op_ack, 0},
    {"ack_batch", setup_ack_batch, op_ack_batch, 3},
    {"nack_requeue", setup_none, op_nack_requeue, 0},
    {"nack_dead", setup_none, op_nack_dead, 1},
    {"extend", setup_none, op_extend, 0},
    {"extend_dead_lettered", setup_extend_dead, op_extend_dead, 0},
    {"cancel_pending", setup_none, op_cancel_pending, DQ_CANCELED_PENDING},
    {"cancel_inflight", setup_none, op_cancel_inflight, DQ_CANCELED_INFLIGHT},
    {"dead_requeue_one", setup_none, op_dead_requeue_one, 1},
    {"dead_requeue_all", setup_none, op_dead_requeue_all, 1},
    {"dead_purge_one", setup_none, op_dead_purge_one, 1},
    {"dead_purge_all", setup_none, op_dead_purge_all, 1},
    {"ack_retry_done_record", setup_none, op_ack_retry, 0},
    {"nack_reason_requeue", setup_none, op_nack_reason_requeue, 0},
    {"nack_reason_dead", setup_none, op_nack_reason_dead, 1},
    {"get", setup_none, op_get, 1},
    {"promote", setup_none, op_promote, DQ_RESCHED_MOVED},
    {"reschedule_batch_revive", setup_none, op_reschedule_batch, 2},
};

START_TEST(failure_atomicity) {
    actx x;
    memset(&x, 0, sizeof(x));
    x.c = open_client();
    x.cm = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 2);
    x.c1 = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1);
    x.r = rconn();
    sbuf before = {0}, spoiled = {0}, after = {0}, restored = {0};
    const size_t nops = sizeof(AOPS) / sizeof(AOPS[0]);
    for (size_t o = 0; o < nops; o++) {
        const aop *op = &AOPS[o];
        int rc, failed = 0;
        for (int k = 0; k < NKINDS; k++) {
            snprintf(x.q, sizeof(x.q), "%s_%zu_%d", Q, o, k);
            base_state(&x);
            op->setup(&x);
            char key[700], what[200];
            /* the key of the partition holding the test's jobs (the plain
             * key on a plain run) */
            tu_key(key, sizeof(key), "dq", x.q, KINDS[k], jid("a1"));
            snprintf(what, sizeof(what), "%s with %s of the wrong type",
                     op->name, KINDS[k]);
            dump_queue(x.r, x.q, &before);
            saved sv;
            spoil(x.r, key, &sv);
            dump_queue(x.r, x.q, &spoiled);
            rc = op->run(&x);
            dump_queue(x.r, x.q, &after);
            unspoil(x.r, key, &sv);
            dump_queue(x.r, x.q, &restored);
            if (rc >= 0)
                continue; /* the operation does not touch that key */
            failed++;
            ck_assert_msg(rc == DQ_EREDIS, "%s: returned %d (%s), want "
                          "DQ_EREDIS or success: %s", what, rc,
                          dq_errname(rc), dq_errmsg(x.c));
            same_state(what, &spoiled, &after);
            same_state(what, &before, &restored);
        }
        ck_assert_msg(failed > 0, "%s: no spoiled key made it fail",
                      op->name);
        /* Unspoiled: the operation does what it should on this state. */
        snprintf(x.q, sizeof(x.q), "%s_%zu_ok", Q, o);
        base_state(&x);
        op->setup(&x);
        rc = op->run(&x);
        ck_assert_msg(rc == op->want, "%s (no key spoiled) returned %d (%s), "
                      "want %d: %s", op->name, rc, dq_errname(rc), op->want,
                      dq_errmsg(x.c));
    }
    sb_free(&before);
    sb_free(&spoiled);
    sb_free(&after);
    sb_free(&restored);
    redisFree(x.r);
    dq_close(x.c);
    dq_close(x.cm);
    dq_close(x.c1);
}
END_TEST

/* ---- 2. late ack of a job a poll dead-lettered ---------------------------- */

/* Job "j" of q held by a (DQ_OPT_MAX_ATTEMPTS 1, token in tok, 20 ms
 * lease) whose lease ran out, then dead-lettered by b's poll: nobody else
 * claimed it, so a's token is still the job's. */
static void held_then_dead_lettered(dq_client *a, dq_client *b,
                                    const char *q, char tok[DQ_TOKEN_BUF]) {
    push_text(a, q, "late", 0, "j", 0, NULL);
    take(a, q, "j", 20, tok);
    th_sleep_ms(50);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(b, q, 10, 5000, &jobs, NULL), 0);
    ck_stats(b, q, 0, 0, 0, 1);
}

START_TEST(late_ack_after_max_attempts) {
    dq_client *a = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1);
    dq_client *b = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1);
    char tok[DQ_TOKEN_BUF];
    held_then_dead_lettered(a, b, Q, tok);
    int rc = dq_ack(a, Q, "j", tok);
    ck_assert_msg(rc == 0, "late ack of the dead-lettered job: %d (%s) %s", rc,
                  dq_errname(rc), dq_errmsg(a));
    ck_stats(a, Q, 0, 0, 0, 0);
    ck_assert_int_eq(dq_dead_requeue(a, Q, NULL, 0), 0);
    ck_stats(a, Q, 0, 0, 0, 0);
    dq_close(a);
    dq_close(b);
}
END_TEST

/* Its holder extends it instead: back in flight, not dead. */
START_TEST(extend_after_max_attempts) {
    dq_client *a = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1);
    dq_client *b = open_client_opt(DQ_OPT_MAX_ATTEMPTS, 1);
    char tok[DQ_TOKEN_BUF];
    held_then_dead_lettered(a, b, Q, tok);
    int64_t dl = 0;
    int rc = dq_extend(a, Q, "j", tok, 60000, &dl);
    ck_assert_msg(rc == 0, "extend of the dead-lettered job: %d (%s) %s", rc,
                  dq_errname(rc), dq_errmsg(a));
    ck_assert_int_gt(dl, 0);
    ck_stats(a, Q, 0, 0, 1, 0);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(b, Q, 10, 5000, &jobs, NULL), 0);
    ck_assert_int_eq(dq_ack(a, Q, "j", tok), 0);
    ck_stats(a, Q, 0, 0, 0, 0);
    dq_close(a);
    dq_close(b);
}
END_TEST

/* ---- 3. cancel of a job whose lease ran out: one answer ------------------- */

START_TEST(cancel_expired_lease_busy) {
    dq_client *c = open_client();
    dq_client *other = open_client();
    redisContext *r = rconn();

    /* (a) nothing ran since the lease ran out */
    ck_assert_int_eq(push_text(c, Q, "x", 0, "xa", 0, NULL), DQ_PUSHED);
    char tok[DQ_TOKEN_BUF];
    int64_t dl = take(c, Q, "xa", 20, tok);
    wait_server_past(r, dl);
    dq_jobs *jobs = NULL;
    ck_assert_int_ge(dq_stats(other, Q, NULL, NULL, NULL, NULL, NULL), 0);
    ck_assert_int_ge(dq_list(other, Q, DQ_LIST_INFLIGHT, 0, 10, &jobs, NULL),
                     0);
    dq_jobs_free(jobs);
    jobs = NULL;
    ck_assert_int_eq(dq_cancel(other, Q, "xa", 0), DQ_CANCEL_BUSY);
    ck_assert_int_eq(dq_ack(c, Q, "xa", tok), 0);
    ck_stats(c, Q, 0, 0, 0, 0);

    /* (b) a poll ran after the lease ran out but claimed an earlier job z
     * (due before x's lease deadline) and not x.  "Earlier first" holds
     * within a partition: on a partitioned run z goes to xb's. */
    ck_assert_int_eq(push_text(c, Q, "x", 0, "xb", 0, NULL), DQ_PUSHED);
    dl = take(c, Q, "xb", 300, tok);
    int oc = 0;
    char z[32];
    tu_id_in(z, sizeof(z), "z", tu_part_of("xb", tu_parts()));
    ck_assert_int_eq(dq_push_at(c, Q, "z", 1, dl - 1000, z, 0, NULL, 0, &oc),
                     0);
    ck_assert_int_eq(oc, DQ_PUSHED);
    wait_server_past(r, dl);
    char ztok[DQ_TOKEN_BUF];
    take(other, Q, z, 60000, ztok);
    int rc = dq_cancel(other, Q, "xb", 0);
    ck_assert_msg(rc == DQ_CANCEL_BUSY,
                  "cancel of an expired, unclaimed lease after a poll: %d", rc);
    rc = dq_ack(c, Q, "xb", tok);
    ck_assert_msg(rc == 0, "holder's ack after the refused cancel: %d (%s)", rc,
                  dq_errname(rc));
    ck_assert_int_eq(dq_ack(other, Q, z, ztok), 0);
    ck_stats(c, Q, 0, 0, 0, 0);

    /* (c) the expired lease was claimed again by someone else: busy too, and
     * the first holder's token is stale */
    ck_assert_int_eq(push_text(c, Q, "x", 0, "xc", 0, NULL), DQ_PUSHED);
    dl = take(c, Q, "xc", 20, tok);
    wait_server_past(r, dl);
    char tok2[DQ_TOKEN_BUF];
    take(other, Q, "xc", 60000, tok2);
    ck_assert_int_eq(dq_cancel(c, Q, "xc", 0), DQ_CANCEL_BUSY);
    ck_assert_int_eq(dq_ack(c, Q, "xc", tok), DQ_ESTALE);
    ck_assert_int_eq(dq_ack(other, Q, "xc", tok2), 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    redisFree(r);
    dq_close(c);
    dq_close(other);
}
END_TEST

/* ---- 4. the wake-up channel names the database ---------------------------- */

/* Reads one pub/sub message (fails after the context's timeout). */
static void next_message(redisContext *sub, char *chan, size_t chsize,
                         char *msg, size_t msize) {
    redisReply *m = NULL;
    int rc = redisGetReply(sub, (void **)&m);
    ck_assert_msg(rc == REDIS_OK && m != NULL,
                  "no pub/sub message within the timeout: %s", sub->errstr);
    ck_assert_int_eq(m->type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(m->elements, 3);
    ck_assert_str_eq(m->element[0]->str, "message");
    snprintf(chan, chsize, "%s", m->element[1]->str);
    snprintf(msg, msize, "%s", m->element[2]->str);
    freeReplyObject(m);
}

START_TEST(wake_channel_per_db) {
    char ch0[700], ch3[700], uri3[600], want[700];
    /* A push publishes on the channel of its job's partition (on a
     * partitioned run): j0 goes to the partition of j3, and the test
     * listens to that partition's channels of db 0 and db 3. */
    int part = tu_part_of("j3", tu_parts());
    char j0[32];
    tu_id_in(j0, sizeof(j0), "j0", part);
    tu_key(ch0, sizeof(ch0), "dq", Q, "wake:0", "j3");
    tu_key(ch3, sizeof(ch3), "dq", Q, "wake:3", "j3");
    if (tu_parts() == 1)
        snprintf(want, sizeof(want), "dq:{wake_channel_per_db_fn}:wake:0");
    else
        snprintf(want, sizeof(want), "dq:{wake_channel_per_db_fn#%d}:wake:0",
                 part);
    ck_assert_str_eq(ch0, want);
    uri_with("db=3", uri3, sizeof(uri3));

    redisContext *sub = rconn();
    struct timeval tv = {2, 0};
    redisSetTimeout(sub, tv);
    redisReply *rep = th_cmd(sub, "SUBSCRIBE %s %s", ch0, ch3);
    freeReplyObject(rep);
    rep = NULL;
    ck_assert_int_eq(redisGetReply(sub, (void **)&rep), REDIS_OK);
    freeReplyObject(rep);
    redisContext *pub = rconn();

    /* A push in db 3 wakes db 3's consumers only. */
    dq_client *c3 = open_uri(uri3, NULL);
    push_text(c3, Q, "in db 3", 0, "j3", 0, NULL);
    char chan[800], msg[100];
    next_message(sub, chan, sizeof(chan), msg, sizeof(msg));
    ck_assert_msg(strcmp(chan, ch3) == 0, "first message on %s (%s), want %s",
                  chan, msg, ch3);
    /* Nothing reached db 0's channel before this marker. */
    rep = th_cmd(pub, "PUBLISH %s marker0", ch0);
    freeReplyObject(rep);
    next_message(sub, chan, sizeof(chan), msg, sizeof(msg));
    ck_assert_str_eq(chan, ch0);
    ck_assert_str_eq(msg, "marker0");

    /* And a push in db 0 wakes db 0's only. */
    dq_client *c0 = open_client();
    push_text(c0, Q, "in db 0", 0, j0, 0, NULL);
    next_message(sub, chan, sizeof(chan), msg, sizeof(msg));
    ck_assert_msg(strcmp(chan, ch0) == 0, "message on %s (%s), want %s", chan,
                  msg, ch0);
    rep = th_cmd(pub, "PUBLISH %s marker3", ch3);
    freeReplyObject(rep);
    next_message(sub, chan, sizeof(chan), msg, sizeof(msg));
    ck_assert_str_eq(chan, ch3);
    ck_assert_str_eq(msg, "marker3");

    /* The two queues are separate. */
    ck_stats(c0, Q, 0, 1, 0, 0);
    ck_stats(c3, Q, 0, 1, 0, 0);
    redisFree(sub);
    redisFree(pub);
    dq_close(c0);
    dq_close(c3);
}
END_TEST

typedef struct waiter {
    dq_client *c;
    const char *q;
    int rc;
    int64_t took_ms;
} waiter;

static void *wait_thread(void *arg) {
    waiter *w = arg;
    dq_jobs *jobs = NULL;
    int64_t t0 = th_mono_ms();
    w->rc = dq_poll_wait(w->c, w->q, 1, 60000, 700, &jobs);
    w->took_ms = th_mono_ms() - t0;
    dq_jobs_free(jobs);
    return NULL;
}

/* A consumer waiting in db 0 is not woken by a push to the same queue name
 * in db 3: it polls once and sleeps until its timeout. */
START_TEST(wake_other_db_no_wakeup) {
    char uri3[600], pattern[700], enc[DQ_QUEUE_MAX * 3 + 1];
    uri_with("db=3", uri3, sizeof(uri3));
    /* the wake channels: "dq:{Q}:wake:<db>", or "dq:{Q#i}:wake:<db>" for
     * each partition i */
    pct_encode(Q, enc);
    snprintf(pattern, sizeof(pattern),
             tu_parts() > 1 ? "dq:{%s#*}:wake*" : "dq:{%s}:wake*", enc);
    redisContext *r = rconn();
    dq_client *c3 = open_uri(uri3, NULL);
    /* load the scripts before counting */
    ck_assert_int_eq(push_text(c3, Q, "warm", 60000, "warm", 0, NULL),
                     DQ_PUSHED);
    waiter w = {open_client(), Q, -99, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, wait_thread, &w), 0);
    /* wait until it subscribed, then let its first poll pass */
    int64_t end = th_mono_ms() + 2000;
    for (;;) {
        redisReply *rep = th_cmd(r, "PUBSUB CHANNELS %s", pattern);
        size_t n = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0;
        freeReplyObject(rep);
        if (n > 0)
            break;
        ck_assert_msg(th_mono_ms() < end, "the waiter never subscribed");
        th_sleep_ms(5);
    }
    th_sleep_ms(100);
    long long before = tu_script_calls(r);
    push_text(c3, Q, "db3", 0, "j3", 0, NULL); /* earliest in db 3: wakes */
    th_sleep_ms(150);
    long long after = tu_script_calls(r);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(w.rc, 0);
    ck_assert_msg(after - before == 1,
                  "%lld script calls around the db-3 push, want 1 (the push): "
                  "the db-0 waiter was woken and polled again",
                  after - before);
    ck_assert_int_ge(w.took_ms, 650);
    ck_stats(w.c, Q, 0, 0, 0, 0);
    ck_stats(c3, Q, 1, 1, 0, 0);
    dq_close(w.c);
    dq_close(c3);
    redisFree(r);
}
END_TEST

/* ---- 5. an id twice in one ack batch --------------------------------------- */

START_TEST(ack_batch_same_id_twice) {
    dq_client *c = open_client();
    push_text(c, Q, "d", 0, "d", 0, NULL);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "d", 60000, tok);
    const char *ids[2] = {"d", "d"};
    const char *toks[2] = {tok, tok};
    int results[2] = {99, 99};
    int rc = dq_ack_batch(c, Q, 2, ids, toks, results);
    ck_assert_msg(rc == 1, "dq_ack_batch {d, d}: %d (%s) %s", rc,
                  dq_errname(rc), dq_errmsg(c));
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], DQ_ENOTFOUND);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_close(c);
}
END_TEST

/* ---- 7. 100 payloads of 1 MiB in one batch --------------------------------- */

enum { BIG_N = 100, MIB = 1024 * 1024 };

/* Byte k of the pattern the big payloads are windows of. */
static unsigned char pat(size_t k) {
    return (unsigned char)((k * 131u + (k >> 11) * 7u + 3u) & 0xff);
}

START_TEST(push_batch_100_mib) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, NULL), 0);
    redisContext *r = th_redis_connect(&srv);
    ck_assert_ptr_nonnull(r);
    /* Redis 7.0 does not count the arguments already read against the
     * query-buffer limit, so a 100 MiB command passes it; the client memory
     * limit (eviction) does count them and refuses such a command. */
    rdo(r, "CONFIG SET client-query-buffer-limit 16mb");
    rdo(r, "CONFIG SET maxmemory-clients 32mb");

    /* payload i = pattern bytes i .. i + 1 MiB - 1 */
    unsigned char *buf = malloc(MIB + BIG_N);
    ck_assert_ptr_nonnull(buf);
    for (size_t k = 0; k < (size_t)MIB + BIG_N; k++)
        buf[k] = pat(k);
    const void *pl[BIG_N];
    size_t lens[BIG_N];
    char idbuf[BIG_N][16];
    const char *ids[BIG_N];
    int outcomes[BIG_N];
    for (int i = 0; i < BIG_N; i++) {
        pl[i] = buf + i;
        lens[i] = MIB;
        snprintf(idbuf[i], sizeof(idbuf[i]), "big%03d", i);
        ids[i] = idbuf[i];
        outcomes[i] = -1;
    }
    char uri[500];
    dq_client *c = open_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), NULL);
    int rc = dq_push_batch(c, Q, BIG_N, pl, lens, NULL, ids, DQ_PUSH_KEEP,
                           NULL, outcomes);
    ck_assert_msg(rc == BIG_N, "dq_push_batch of 100 x 1 MiB: %d (%s) %s", rc,
                  dq_errname(rc), dq_errmsg(c));
    for (int i = 0; i < BIG_N; i++)
        ck_assert_int_eq(outcomes[i], DQ_PUSHED);
    ck_stats(c, Q, 0, BIG_N, 0, 0); /* all pushed with delay 0: due now */

    static unsigned char seen[BIG_N];
    memset(seen, 0, sizeof(seen));
    const char *aids[BIG_N];
    char toks[BIG_N][DQ_TOKEN_BUF];
    const char *atoks[BIG_N];
    int got = 0;
    for (int round = 0; round < 20 && got < BIG_N; round++) {
        dq_jobs *jobs = NULL;
        int n = dq_poll(c, Q, 10, 60000, &jobs, NULL);
        ck_assert_msg(n > 0, "poll %d: %d %s", round, n, dq_errmsg(c));
        for (int k = 0; k < n; k++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)k);
            int idx = atoi(dq_job_id(j) + 3);
            ck_assert(idx >= 0 && idx < BIG_N && !seen[idx]);
            seen[idx] = 1;
            size_t len = 0;
            const unsigned char *p = dq_job_payload(j, &len);
            ck_assert_uint_eq(len, MIB);
            ck_assert_msg(memcmp(p, buf + idx, MIB) == 0,
                          "payload of %s differs", dq_job_id(j));
            aids[got] = ids[idx];
            snprintf(toks[got], DQ_TOKEN_BUF, "%s", dq_job_token(j));
            atoks[got] = toks[got];
            got++;
        }
        dq_jobs_free(jobs);
    }
    ck_assert_int_eq(got, BIG_N);
    int results[BIG_N];
    ck_assert_int_eq(dq_ack_batch(c, Q, BIG_N, aids, atoks, results), BIG_N);
    ck_stats(c, Q, 0, 0, 0, 0);
    free(buf);
    dq_close(c);
    redisFree(r);
    th_redis_stop(&srv);
}
END_TEST

/* ---- 8. no key left behind -------------------------------------------------- */

/* Keys of queue q (SCAN MATCH dq:{q}:*, and dq:{q#*}:* for the partitions
 * on a partitioned run), written to out (space-separated list, for
 * messages); returns the count.  On a partitioned run the plain jobs hash
 * is not counted: it keeps the partition count (by design; the caller
 * checks it holds nothing else, tu_assert_plain_clean). */
static int queue_keys(redisContext *r, const char *q, char *out, size_t size) {
    char enc[DQ_QUEUE_MAX * 3 + 1], patterns[2][700], plain_jobs[700];
    pct_encode(q, enc);
    snprintf(patterns[0], sizeof(patterns[0]), "dq:{%s}:*", enc);
    snprintf(patterns[1], sizeof(patterns[1]), "dq:{%s#*}:*", enc);
    tu_part_key(plain_jobs, sizeof(plain_jobs), "dq", q, "jobs", -1);
    int count = 0;
    out[0] = '\0';
    for (int pt = 0; pt < (tu_parts() > 1 ? 2 : 1); pt++) {
        char cursor[32] = "0";
        for (int guard = 0; guard < 10000; guard++) {
            redisReply *rep = th_cmd(r, "SCAN %s MATCH %s COUNT 1000", cursor,
                                     patterns[pt]);
            ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
            snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
            redisReply *keys = rep->element[1];
            for (size_t i = 0; i < keys->elements; i++) {
                if (tu_parts() > 1 &&
                    strcmp(keys->element[i]->str, plain_jobs) == 0)
                    continue;
                count++;
                size_t l = strlen(out);
                snprintf(out + l, size - l, "%s ", keys->element[i]->str);
            }
            freeReplyObject(rep);
            if (strcmp(cursor, "0") == 0)
                break;
        }
    }
    return count;
}

START_TEST(no_key_left_behind) {
    dq_client *c = open_client_opt(DQ_OPT_DONE_TTL_MS, 200);
    redisContext *r = rconn();
    push_text(c, Q, "a", 0, "a", 0, NULL);
    push_text(c, Q, "b", 60000, "b", 0, NULL);
    push_text(c, Q, "c", 0, "c", 0, NULL);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 60000, &jobs, NULL), 2);
    const dq_job *ja = job_by_id(jobs, "a"), *jc = job_by_id(jobs, "c");
    ck_assert_ptr_nonnull(ja);
    ck_assert_ptr_nonnull(jc);
    ck_assert_int_eq(dq_ack(c, Q, "a", dq_job_token(ja)), 0);
    ck_assert_int_eq(dq_cancel(c, Q, "b", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(dq_nack(c, Q, "c", dq_job_token(jc), 0, DQ_NACK_DEAD), 1);
    ck_assert_int_eq(dq_dead_purge(c, Q, "c"), 1);
    dq_jobs_free(jobs);
    ck_stats(c, Q, 0, 0, 0, 0);

    char left[4096];
    int64_t end = th_mono_ms() + 2000;
    int n;
    for (;;) {
        /* EXISTS lets Redis expire the done records lazily too (of every
         * partition on a partitioned run) */
        for (int k = 0; k < NKINDS; k++) {
            char key[700];
            queue_key("dq", Q, KINDS[k], key, sizeof(key));
            redisReply *rep = th_cmd(r, "EXISTS %s", key);
            freeReplyObject(rep);
            tu_sum(r, "EXISTS", "dq", Q, KINDS[k]);
        }
        n = queue_keys(r, Q, left, sizeof(left));
        if (n == 0 || th_mono_ms() >= end)
            break;
        th_sleep_ms(20);
    }
    ck_assert_msg(n == 0, "keys left 2 s after the queue emptied: %s", left);
    tu_assert_plain_clean(r, "dq", Q);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* ---- 9. a retried push after the ack ---------------------------------------- */

START_TEST(retried_push_after_ack) {
    dq_client *c = open_client();
    int oc = 0;
    ck_assert_int_eq(push_text(c, Q, "v1", 0, "order-1", DQ_PUSH_KEEP, NULL),
                     DQ_PUSHED);
    char tok[DQ_TOKEN_BUF];
    take(c, Q, "order-1", 60000, tok);
    ck_assert_int_eq(dq_ack(c, Q, "order-1", tok), 0);
    oc = push_text(c, Q, "v2", 0, "order-1", DQ_PUSH_KEEP, NULL);
    ck_assert_msg(oc == DQ_DONE, "keep push of an acked id: outcome %d", oc);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 60000, &jobs, NULL), 0);

    /* the batch push says the same */
    const void *pl[2] = {"v2", "v3"};
    size_t lens[2] = {2, 2};
    const char *ids[2] = {"order-1", "order-x"};
    int ocs[2] = {0, 0};
    ck_assert_int_eq(
        dq_push_batch(c, Q, 2, pl, lens, NULL, ids, DQ_PUSH_KEEP, NULL, ocs),
        1);
    ck_assert_int_eq(ocs[0], DQ_DONE);
    ck_assert_int_eq(ocs[1], DQ_PUSHED);
    ck_assert_int_eq(dq_cancel(c, Q, "order-x", 0), DQ_CANCELED_PENDING);

    /* replace runs the id again */
    oc = push_text(c, Q, "v4", 0, "order-1", DQ_PUSH_REPLACE, NULL);
    ck_assert_int_eq(oc, DQ_PUSHED);
    ck_stats(c, Q, 0, 1, 0, 0);
    jobs = poll_one(c, Q, 60000);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "order-1");
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "v4");
    ck_assert_int_eq(dq_job_attempt(dq_jobs_at(jobs, 0)), 1);
    ck_assert_int_eq(
        dq_ack(c, Q, "order-1", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);

    /* an acker that keeps no done record: a keep push creates it anew */
    dq_client *c0 = open_client_opt(DQ_OPT_DONE_TTL_MS, 0);
    push_text(c, Q, "w1", 0, "order-2", DQ_PUSH_KEEP, NULL);
    take(c0, Q, "order-2", 60000, tok);
    ck_assert_int_eq(dq_ack(c0, Q, "order-2", tok), 0);
    ck_assert_int_eq(push_text(c, Q, "w2", 0, "order-2", DQ_PUSH_KEEP, NULL),
                     DQ_PUSHED);
    ck_stats(c, Q, 0, 1, 0, 0);
    dq_close(c0);
    dq_close(c);
}
END_TEST

/* The push's reply is lost (command timeout while Redis sleeps in DEBUG
 * SLEEP): it landed, ran and was acked; the retry answers DQ_DONE. */
START_TEST(retried_push_lost_reply) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, "enable-debug-command local"), 0);
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, 100), 0);
    char uri[500];
    dq_client *p = open_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), o);
    dq_options_free(o);
    dq_client *cons = open_uri(uri, NULL);
    /* load the scripts first so the push is one EVALSHA */
    ck_assert_int_eq(push_text(p, Q, "warm", 0, "warm", 0, NULL), DQ_PUSHED);
    ck_assert_int_eq(dq_cancel(p, Q, "warm", 0), DQ_CANCELED_PENDING);

    redisContext *r = th_redis_connect(&srv);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(redisAppendCommand(r, "DEBUG SLEEP 0.4"), REDIS_OK);
    int done = 0;
    for (int i = 0; i < 100 && !done; i++)
        ck_assert_int_eq(redisBufferWrite(r, &done), REDIS_OK);
    ck_assert(done);
    th_sleep_ms(30); /* Redis is asleep now */
    int oc = 0;
    int rc = dq_push(p, Q, "pay", 3, 0, "order-9", DQ_PUSH_KEEP, NULL, 0, &oc);
    ck_assert_msg(rc == DQ_ETIMEDOUT, "push during DEBUG SLEEP: %d (%s) %s",
                  rc, dq_errname(rc), dq_errmsg(p));
    redisReply *rep = NULL;
    ck_assert_int_eq(redisGetReply(r, (void **)&rep), REDIS_OK);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);

    /* it landed: a consumer runs and acks it */
    dq_jobs *jobs = poll_until(cons, Q, 1, 60000, 2000);
    ck_assert_ptr_nonnull(jobs);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), "order-9");
    ck_assert_int_eq(
        dq_ack(cons, Q, "order-9", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    /* the producer retries */
    oc = 0;
    rc = dq_push(p, Q, "pay", 3, 0, "order-9", DQ_PUSH_KEEP, NULL, 0, &oc);
    ck_assert_msg(rc == 0, "retried push: %d %s", rc, dq_errmsg(p));
    ck_assert_int_eq(oc, DQ_DONE);
    ck_stats(cons, Q, 0, 0, 0, 0);
    redisFree(r);
    dq_close(p);
    dq_close(cons);
    th_redis_stop(&srv);
}
END_TEST

/* ---- 10. a retried ack ------------------------------------------------------- */

START_TEST(retried_ack) {
    dq_client *a = open_client();
    dq_client *b = open_client();
    redisContext *r = rconn();

    /* someone else finished it: stale, not "not found" */
    push_text(a, Q, "j", 0, "j1", 0, NULL);
    char ta[DQ_TOKEN_BUF], tb[DQ_TOKEN_BUF];
    int64_t dl = take(a, Q, "j1", 30, ta);
    wait_server_past(r, dl);
    take(b, Q, "j1", 60000, tb);
    ck_assert_int_eq(dq_ack(b, Q, "j1", tb), 0);
    int rc = dq_ack(a, Q, "j1", ta);
    ck_assert_msg(rc == DQ_ESTALE, "ack by the first holder after another "
                  "finished the job: %d (%s)", rc, dq_errname(rc));
    /* b's own retry: landed */
    ck_assert_int_eq(dq_ack(b, Q, "j1", tb), 0);

    /* my own ack landed: the retry says 0 */
    push_text(a, Q, "j", 0, "j2", 0, NULL);
    take(a, Q, "j2", 60000, ta);
    ck_assert_int_eq(dq_ack(a, Q, "j2", ta), 0);
    rc = dq_ack(a, Q, "j2", ta);
    ck_assert_msg(rc == 0, "retried ack: %d (%s)", rc, dq_errname(rc));
    /* a made-up token is not mine */
    ck_assert_int_eq(dq_ack(a, Q, "j2", "12345"), DQ_ESTALE);
    ck_stats(a, Q, 0, 0, 0, 0);

    /* no done record: not found */
    dq_client *c0 = open_client_opt(DQ_OPT_DONE_TTL_MS, 0);
    push_text(a, Q, "j", 0, "j3", 0, NULL);
    take(c0, Q, "j3", 60000, ta);
    ck_assert_int_eq(dq_ack(c0, Q, "j3", ta), 0);
    ck_assert_int_eq(dq_ack(c0, Q, "j3", ta), DQ_ENOTFOUND);
    redisFree(r);
    dq_close(c0);
    dq_close(a);
    dq_close(b);
}
END_TEST

/* ---- 9,000 jobs in one batch call --------------------------------------------- */

enum { N9 = 9000 };

START_TEST(batch_9000) {
    dq_client *c = open_client();
    const void **pl = calloc(N9, sizeof(*pl));
    size_t *lens = calloc(N9, sizeof(*lens));
    int *outcomes = calloc(N9, sizeof(*outcomes));
    ck_assert(pl && lens && outcomes);
    for (int i = 0; i < N9; i++) {
        pl[i] = "nine";
        lens[i] = 4;
    }
    int rc = dq_push_batch(c, Q, N9, pl, lens, NULL, NULL, DQ_PUSH_KEEP, NULL,
                           outcomes);
    ck_assert_msg(rc == N9, "dq_push_batch 9000: %d (%s) %s", rc,
                  dq_errname(rc), dq_errmsg(c));
    for (int i = 0; i < N9; i++)
        ck_assert_int_eq(outcomes[i], DQ_PUSHED);
    ck_stats(c, Q, 0, N9, 0, 0);

    const char **ids = calloc(N9, sizeof(*ids));
    const char **toks = calloc(N9, sizeof(*toks));
    int *results = calloc(N9, sizeof(*results));
    dq_jobs *lists[N9 / 1000];
    size_t k = 0;
    for (int r = 0; r < N9 / 1000; r++) {
        int n = poll_n(c, Q, 1000, 60000, &lists[r], NULL);
        ck_assert_int_eq(n, 1000);
        for (int i = 0; i < n; i++, k++) {
            ids[k] = dq_job_id(dq_jobs_at(lists[r], (size_t)i));
            toks[k] = dq_job_token(dq_jobs_at(lists[r], (size_t)i));
        }
    }
    ck_assert_uint_eq(k, N9);
    ck_stats(c, Q, 0, 0, N9, 0);
    for (int i = 0; i < N9; i++)
        results[i] = 99;
    rc = dq_ack_batch(c, Q, N9, ids, toks, results);
    ck_assert_msg(rc == N9, "dq_ack_batch 9000: %d (%s) %s", rc,
                  dq_errname(rc), dq_errmsg(c));
    for (int i = 0; i < N9; i++)
        ck_assert_int_eq(results[i], 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    for (int r = 0; r < N9 / 1000; r++)
        dq_jobs_free(lists[r]);
    free(pl);
    free(lens);
    free(outcomes);
    free(ids);
    free(toks);
    free(results);
    dq_close(c);
}
END_TEST

/* ---- a Redis Cluster node that redirects -------------------------------- */

/* Starts a cluster node on 127.0.0.1.  Its bus listens on port + 10000,
 * so a free port above 55535 (or a bus port in use) makes Redis refuse to
 * start: take another free port, a bounded number of times. */
static int start_cluster_node(th_redis *r, const char *conf) {
    for (int i = 0; i < 30; i++)
        if (th_redis_start(r, 1, conf) == 0)
            return 1;
    return 0;
}

/* Two cluster nodes on 127.0.0.1: A serves every slot, B knows it.  A
 * client of B (one node: it has no route) gets MOVED for the queue's slot:
 * the call fails with DQ_EREDIS and a message naming the redirection, and
 * nothing is written anywhere. */
START_TEST(cluster_redirect_reported) {
    static const char conf[] = "cluster-enabled yes\n"
                               "cluster-config-file nodes.conf\n"
                               "cluster-node-timeout 5000\n";
    th_redis na, nb;
    ck_assert(start_cluster_node(&na, conf) && start_cluster_node(&nb, conf));
    redisContext *ra = th_redis_connect(&na), *rb = th_redis_connect(&nb);
    ck_assert(ra != NULL && rb != NULL);
    rdo(ra, "CLUSTER ADDSLOTSRANGE 0 16383");
    rdo(rb, "CLUSTER MEET 127.0.0.1 %d", na.port);
    /* B learns A's slots through the cluster bus. */
    int64_t end = th_mono_ms() + 10000;
    int known = 0;
    while (!known && th_mono_ms() < end) {
        redisReply *x = redisCommand(rb, "CLUSTER COUNTKEYSINSLOT 0");
        freeReplyObject(x);
        x = redisCommand(rb, "CLUSTER INFO");
        known = x != NULL && x->type == REDIS_REPLY_STRING &&
                strstr(x->str, "cluster_state:ok") != NULL;
        freeReplyObject(x);
        if (!known)
            th_sleep_ms(50);
    }
    ck_assert_msg(known, "node B never saw the slots of node A");

    char uri[64];
    snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d", nb.port);
    dq_client *c = open_uri(uri, NULL);
    int rc = dq_push(c, Q, "x", 1, 0, "r1", 0, NULL, 0, NULL);
    ck_assert_int_eq(rc, DQ_EREDIS);
    ck_assert_msg(strstr(dq_errmsg(c), "MOVED") != NULL &&
                      strstr(dq_errmsg(c), "Cluster") != NULL,
                  "%s", dq_errmsg(c));
    dq_jobs *j = NULL;
    ck_assert_int_eq(dq_poll(c, Q, 1, 1000, &j, NULL), DQ_EREDIS);
    ck_assert_msg(strstr(dq_errmsg(c), "MOVED") != NULL, "%s", dq_errmsg(c));
    ck_assert_int_eq(th_redis_int(ra, 1, (const char *[]){"DBSIZE"}), 0);
    ck_assert_int_eq(th_redis_int(rb, 1, (const char *[]){"DBSIZE"}), 0);
    dq_close(c);
    redisFree(ra);
    redisFree(rb);
    th_redis_stop(&nb);
    th_redis_stop(&na);
}
END_TEST

TEST_SUITE("contract", TU_SRV_UNIX,
    {"cluster_redirect_reported", cluster_redirect_reported, 30, NULL},
    {"failure_atomicity", failure_atomicity, 60, NULL},
    {"late_ack_after_max_attempts", late_ack_after_max_attempts, 20, NULL},
    {"extend_after_max_attempts", extend_after_max_attempts, 20, NULL},
    {"cancel_expired_lease_busy", cancel_expired_lease_busy, 20, NULL},
    {"wake_channel_per_db", wake_channel_per_db, 20, NULL},
    {"wake_other_db_no_wakeup", wake_other_db_no_wakeup, 20, NULL},
    {"ack_batch_same_id_twice", ack_batch_same_id_twice, 20, NULL},
    {"push_batch_100_mib", push_batch_100_mib, 60, NULL},
    {"no_key_left_behind", no_key_left_behind, 20, NULL},
    {"retried_push_after_ack", retried_push_after_ack, 20, NULL},
    {"retried_push_lost_reply", retried_push_lost_reply, 20, NULL},
    {"retried_ack", retried_ack, 20, NULL},
    {"batch_9000", batch_9000, 60, NULL})
