/*
 * tests/test_compact.c - the compact layout (delayq.h DQ_SET_LAYOUT,
 * lib/lua/include/compact/keys.lua), checked against Redis itself
 * and against a model kept by the test:
 *  - compact_is_compact: a backlog of small jobs lives in listpack buckets
 *    (at most 120 jobs each, disjoint time ranges, scored by their
 *    earliest job, found again through the shards), and costs much less
 *    Redis memory than on a default-layout queue;
 *  - model_random: a seeded random run of pushes (keep and replace, single
 *    and batches, ties, big payloads, options), cancels, lookups, polls,
 *    listings, due counts and stats compared with the model, every job
 *    delivered at most once (never after a cancel or a replace), and the
 *    Redis state checked against the model from time to time;
 *  - uniform_bucket: 1000 jobs due at one time (a bucket past the cap)
 *    polled 100 at a time: each delivered once, earliest first, and the
 *    queue leaves no key behind;
 *  - switch_back: a queue set back to the default layout sees its compact
 *    jobs in every operation, moves no new job into compact buckets, and
 *    its compact keys drain away;
 *  - big_batch_listpacks: one batch of 600 jobs per partition leaves
 *    every bucket a listpack;
 *  - lease_merge: a poll merges compact jobs, native ones and leases that
 *    ran out by time; a nacked job stays native;
 *  - uniform_first_bucket: jobs due on both sides of a uniform first
 *    bucket, moved by one push, land in buckets whose ranges hold them;
 *  - far_future: jobs due after 2286 (15-digit ms) with the longest
 *    compact payload never make a bucket value too long for a listpack;
 *  - many_buckets: over 256 buckets per partition (the scripts' pages over
 *    cb): counts, stats, deep listings and polls of 1000 against a model.
 * Every test sets the compact layout on its queue (dq_config_set), so it
 * holds whatever DQ_TEST_LAYOUT says; the suite also runs as compact@p4
 * (4 partitions per queue: the Redis checks then sum over partitions).
 * The random test's seed is printed with every failure; DQ_TEST_SEED
 * runs another.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_suite.h"
#include "test_utils.h"

#define NS "dq"
#define C_CAP 120       /* jobs in a bucket that do not share a due time */
#define C_PAYLOAD_MAX 53 /* the longest payload a compact job has */
#define C_ID_MAX 64      /* the longest id a compact job has */
#define HOUR_MS INT64_C(3600000)

/* The layout the tests set: compact-push, whose pushes move their jobs
 * into buckets, so the bucket machinery runs at once where a test checks
 * it; model_idle and idle_mover run DQ_LAYOUT_COMPACT, whose idle polls
 * move them. */
static int64_t g_layout = DQ_LAYOUT_COMPACT_PUSH;

/* ---- small helpers ------------------------------------------------------ */

static uint64_t rng_state;

static void rng_seed(uint64_t s) {
    rng_state = s * UINT64_C(0x9E3779B97F4A7C15) + 0x5851F42D4C957F2Dull;
    if (rng_state == 0)
        rng_state = 1;
}

static uint64_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

/* Uniform in lo..hi (inclusive). */
static int64_t urange(int64_t lo, int64_t hi) {
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* Sets the queue's layout and reads it back. */
static void set_layout(dq_client *c, const char *q, int64_t layout) {
    const int k = DQ_SET_LAYOUT;
    int rc = dq_config_set(c, q, 1, &k, &layout);
    ck_assert_msg(rc == 0, "dq_config_set(layout) on %s: %d %s", q, rc,
                  dq_errmsg(c));
    int64_t got = -7;
    rc = dq_config_get(c, q, 1, &k, &got);
    ck_assert_msg(rc == 0, "dq_config_get(layout): %d %s", rc, dq_errmsg(c));
    ck_assert_msg(got == layout, "layout of %s reads %lld, set %lld", q,
                  (long long)got, (long long)layout);
}

/* A test's client, with queue q in the run's layout (g_layout), and a
 * hiredis link into *r; end_test closes both. */
static dq_client *layout_client(const char *q, redisContext **r) {
    dq_client *c = open_client();
    *r = rconn();
    set_layout(c, q, g_layout);
    return c;
}

static void end_test(dq_client *c, redisContext *r) {
    redisFree(r);
    dq_close(c);
}

/* The partitions of a run: 0..nparts()-1, each named by pidx(i) for
 * tu_part_key (-1, the plain keys, on a plain run). */
static int nparts(void) { return tu_parts(); }
static int pidx(int i) { return tu_parts() > 1 ? i : -1; }
static int part_of(const char *id) { return tu_part_of(id, tu_parts()); }

static void pkey(char *buf, size_t n, const char *q, int i,
                 const char *suffix) {
    tu_part_key(buf, n, NS, q, suffix, pidx(i));
}

/* Whether job id is compact: its shard names it. */
static int is_compact(redisContext *r, const char *q,
                                 const char *id) {
    char key[600], suffix[TU_SHARD_SUFFIX];
    tu_shard_suffix(id, suffix);
    tu_key(key, sizeof(key), NS, q, suffix, id);
    return rint_(r, "HEXISTS", key, id) == 1;
}

static long long used_memory(redisContext *r) {
    return tu_info_int(r, "memory", "used_memory");
}

/* A bucket value of job id (lib/lua/include/compact/bucket.lua, c_val): the id's shard
 * code (3 bytes), its due time (8 bytes of 6 bits, '0' + digit, most
 * significant first) into *due, then the payload.  0, or -1 when the
 * value is not that. */
static int bucket_value(const char *id, const char *v, size_t len,
                        int64_t *due) {
    char sfx[TU_SHARD_SUFFIX];
    tu_shard_suffix(id, sfx);
    if (len < 11 || memcmp(v, sfx + 2, 3) != 0)
        return -1;
    int64_t d = 0;
    for (int k = 3; k < 11; k++) {
        int digit = (unsigned char)v[k] - '0';
        if (digit < 0 || digit > 63)
            return -1;
        d = d * 64 + digit;
    }
    *due = d;
    return 0;
}

static int64_t num_of(const redisReply *e) {
    tu_check(e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_INTEGER);
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    return (int64_t)strtod(e->str, NULL);
}

/* Every key of queue q (plain and partition keys): names and partitions
 * (-1 plain), and where the suffix starts. */
typedef struct qkey {
    char *name;
    int part;
    const char *suffix;
} qkey;

static size_t queue_keys(redisContext *r, const char *q, qkey **out) {
    char enc[DQ_QUEUE_MAX * 3 + 1], pat[DQ_QUEUE_MAX * 3 + 16];
    pct_encode(q, enc);
    snprintf(pat, sizeof(pat), NS ":{%s*", enc);
    size_t n = 0, cap = 64;
    qkey *v = malloc(cap * sizeof(*v));
    ck_assert_ptr_nonnull(v);
    char cursor[32] = "0";
    size_t head = strlen(NS) + 2 + strlen(enc);
    do {
        redisReply *rep =
            th_cmd(r, "SCAN %s MATCH %s COUNT 5000", cursor, pat);
        ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
        redisReply *keys = rep->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            const char *k = keys->element[i]->str;
            int part = -1;
            const char *s = k + head;
            if (*s == '#') {
                part = atoi(s + 1);
                s = strchr(s, '}');
                if (s == NULL)
                    continue;
            } else if (*s != '}') {
                continue; /* another queue whose name starts with q */
            }
            if (s[1] != ':')
                continue;
            if (n == cap) {
                cap *= 2;
                v = realloc(v, cap * sizeof(*v));
                ck_assert_ptr_nonnull(v);
            }
            v[n].name = strdup(k);
            v[n].part = part;
            v[n].suffix = v[n].name + (s + 2 - k);
            n++;
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    *out = v;
    return n;
}

static void qkeys_free(qkey *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

/* ---- the Redis state of a queue ----------------------------------------- */

/* One pending job as Redis holds it. */
typedef struct sj {
    char *id;
    int64_t due;
    char *pl;
    size_t plen;
    int compact; /* in a bucket (else in due + jobs) */
    int part;    /* partition index 0..nparts()-1 */
} sj;

typedef struct snap {
    sj *v;
    size_t n, cap;
    long long native, compact, buckets, uniform;
    long long max_uniform; /* entries of the biggest uniform bucket */
    long long part_buckets[64]; /* buckets per partition (first 64) */
} snap;

static void snap_add(snap *s, const char *id, size_t idlen, int64_t due,
                     const char *pl, size_t plen, int compact, int part) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        tu_check(s->v != NULL);
    }
    sj *j = &s->v[s->n++];
    j->id = strndup(id, idlen);
    j->due = due;
    j->pl = malloc(plen + 1);
    tu_check(j->id != NULL);
    tu_check(j->pl != NULL);
    memcpy(j->pl, pl, plen);
    j->pl[plen] = '\0';
    j->plen = plen;
    j->compact = compact;
    j->part = part;
}

static void snap_free(snap *s) {
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].id);
        free(s->v[i].pl);
    }
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static int sj_by_id(const void *a, const void *b) {
    return strcmp(((const sj *)a)->id, ((const sj *)b)->id);
}

/* Reads every pending job of queue q from Redis, both layouts, checking
 * the compact layout's invariants on the way (lua/include/compact/keys.lua):
 *  - every bucket in cb exists, holds at most C_CAP jobs or jobs that all
 *    share one due time, is a listpack when it holds at most C_CAP, and
 *    its score is its earliest due time; the buckets' ranges are disjoint
 *    and ordered (a bucket's last job is due before the next one's score);
 *  - every compact job is in its shard with its due time, and the shards
 *    hold nothing else; no c:<b> key outside cb;
 *  - cm n counts the compact jobs, cm is gone with the last of them;
 *  - no job is in both layouts, or twice in one; every native pending job
 *    has its payload, and the jobs hash holds no payload of a job that is
 *    in no index (pending, in flight or dead).
 * The jobs come out sorted by id; ctx names the check in messages. */
static void snap_take(redisContext *r, const char *q, snap *s,
                      const char *ctx) {
    memset(s, 0, sizeof(*s));
    qkey *keys = NULL;
    size_t nkeys = queue_keys(r, q, &keys);
    for (int i = 0; i < nparts(); i++) {
        char kdue[512], kjobs[512], kcb[512], kcm[512], pfx[512], klease[512],
            kdead[512];
        pkey(kdue, sizeof(kdue), q, i, "due");
        pkey(kjobs, sizeof(kjobs), q, i, "jobs");
        pkey(kcb, sizeof(kcb), q, i, "cb");
        pkey(kcm, sizeof(kcm), q, i, "cm");
        pkey(klease, sizeof(klease), q, i, "lease");
        pkey(kdead, sizeof(kdead), q, i, "dead");
        pkey(pfx, sizeof(pfx), q, i, "");

        /* native pending jobs: due + their payloads */
        redisReply *z = th_cmd(r, "ZRANGE %s 0 -1 WITHSCORES", kdue);
        tu_check(z->type == REDIS_REPLY_ARRAY);
        size_t nn = z->elements / 2;
        if (nn > 0) {
            const char **argv = malloc((nn + 2) * sizeof(*argv));
            size_t *lens = malloc((nn + 2) * sizeof(*lens));
            tu_check(argv && lens);
            argv[0] = "HMGET", lens[0] = 5;
            argv[1] = kjobs, lens[1] = strlen(kjobs);
            for (size_t k = 0; k < nn; k++) {
                argv[2 + k] = z->element[2 * k]->str;
                lens[2 + k] = z->element[2 * k]->len;
            }
            redisReply *h = redisCommandArgv(r, (int)(nn + 2), argv, lens);
            tu_check(h != NULL);
            tu_check(h->type == REDIS_REPLY_ARRAY);
            for (size_t k = 0; k < nn; k++) {
                redisReply *e = h->element[k];
                tu_require(e->type == REDIS_REPLY_STRING,
                           "%s: native job %s is in %s without a payload",
                           ctx, z->element[2 * k]->str, kdue);
                snap_add(s, z->element[2 * k]->str, z->element[2 * k]->len,
                         num_of(z->element[2 * k + 1]), e->str, e->len, 0,
                         i);
            }
            freeReplyObject(h);
            free(argv);
            free(lens);
        }
        s->native += (long long)nn;
        freeReplyObject(z);

        /* no payload without an index entry */
        long long indexed = rint_(r, "ZCARD", kdue, NULL) +
                            rint_(r, "ZCARD", klease, NULL) +
                            rint_(r, "ZCARD", kdead, NULL);
        redisReply *hk = th_cmd(r, "HKEYS %s", kjobs);
        tu_check(hk->type == REDIS_REPLY_ARRAY);
        long long payloads = 0;
        for (size_t k = 0; k < hk->elements; k++)
            if (memchr(hk->element[k]->str, '\0', hk->element[k]->len) ==
                NULL)
                payloads++;
        freeReplyObject(hk);
        tu_require(payloads == indexed,
                   "%s: %s holds %lld payloads, the indexes %lld jobs", ctx,
                   kjobs, payloads, indexed);

        /* buckets */
        redisReply *cb = th_cmd(r, "ZRANGE %s 0 -1 WITHSCORES", kcb);
        tu_check(cb->type == REDIS_REPLY_ARRAY);
        size_t nb = cb->elements / 2;
        long long in_buckets = 0;
        size_t first_compact = s->n;
        for (size_t k = 0; k < nb; k++) {
            const char *b = cb->element[2 * k]->str;
            int64_t score = num_of(cb->element[2 * k + 1]);
            char kb[600];
            snprintf(kb, sizeof(kb), "%sc:%s", pfx, b);
            redisReply *all = th_cmd(r, "HGETALL %s", kb);
            tu_check(all->type == REDIS_REPLY_ARRAY);
            size_t ne = all->elements / 2;
            tu_require(ne > 0, "%s: bucket %s (score %lld) is in %s but "
                       "empty", ctx, kb, (long long)score, kcb);
            int64_t mn = INT64_MAX, mx = INT64_MIN;
            for (size_t e = 0; e < ne; e++) {
                redisReply *f = all->element[2 * e], *v = all->element[2 * e + 1];
                int64_t d = 0;
                tu_require(bucket_value(f->str, v->str, v->len, &d) == 0,
                           "%s: %s field %s: value %.*s is not its shard "
                           "code, 8 bytes of due time and the payload",
                           ctx, kb, f->str, (int)v->len, v->str);
                if (d < mn)
                    mn = d;
                if (d > mx)
                    mx = d;
                tu_require(f->len <= C_ID_MAX && v->len <= 64,
                           "%s: %s holds %s (%zu B) -> %zu B: too long for "
                           "a listpack", ctx, kb, f->str, f->len, v->len);
                snap_add(s, f->str, f->len, d, v->str + 11, v->len - 11, 1,
                         i);
            }
            freeReplyObject(all);
            tu_require(mn == score, "%s: bucket %s scores %lld, its "
                       "earliest job is due %lld", ctx, kb,
                       (long long)score, (long long)mn);
            tu_require(ne <= C_CAP || mn == mx,
                       "%s: bucket %s holds %zu jobs due %lld..%lld (at "
                       "most %d unless all due at one time)", ctx, kb, ne,
                       (long long)mn, (long long)mx, C_CAP);
            if (ne > C_CAP) {
                s->uniform++;
                if ((long long)ne > s->max_uniform)
                    s->max_uniform = (long long)ne;
            }
            if (k + 1 < nb) {
                int64_t next = num_of(cb->element[2 * k + 3]);
                tu_require(mx < next, "%s: bucket %s holds a job due %lld, "
                           "the next bucket (%s) starts at %lld", ctx, kb,
                           (long long)mx, cb->element[2 * k + 2]->str,
                           (long long)next);
            }
            if (mn != mx) {
                /* (a bucket of one due time may have had more jobs than a
                 * listpack holds: hash-max-listpack-entries) */
                redisReply *enc = th_cmd(r, "OBJECT ENCODING %s", kb);
                tu_require(enc->type == REDIS_REPLY_STRING &&
                               strcmp(enc->str, "listpack") == 0,
                           "%s: bucket %s of %zu jobs (due %lld..%lld) is "
                           "encoded as %s, not a listpack", ctx, kb, ne,
                           (long long)mn, (long long)mx,
                           enc->type == REDIS_REPLY_STRING ? enc->str : "?");
                freeReplyObject(enc);
            }
            in_buckets += (long long)ne;
        }
        s->buckets += (long long)nb;
        if (i < 64)
            s->part_buckets[i] = (long long)nb;
        s->compact += in_buckets;

        /* cm */
        redisReply *cm = th_cmd(r, "HGET %s n", kcm);
        long long cmn = cm->type == REDIS_REPLY_STRING ? atoll(cm->str) : 0;
        freeReplyObject(cm);
        tu_require(cmn == in_buckets, "%s: %s says n = %lld, the buckets "
                   "hold %lld", ctx, kcm, cmn, in_buckets);
        tu_require(rint_(r, "EXISTS", kcm, NULL) == (in_buckets > 0),
                   "%s: %s %s with %lld compact jobs", ctx, kcm,
                   in_buckets > 0 ? "missing" : "left", in_buckets);

        /* shards: each compact job in its own with its due time */
        for (size_t k = first_compact; k < s->n; k++) {
            char ks[600], sfx[TU_SHARD_SUFFIX];
            tu_shard_suffix(s->v[k].id, sfx);
            snprintf(ks, sizeof(ks), "%s%s", pfx, sfx);
            redisAppendCommand(r, "HGET %s %s", ks, s->v[k].id);
        }
        for (size_t k = first_compact; k < s->n; k++) {
            redisReply *g = NULL;
            tu_check(redisGetReply(r, (void **)&g) == REDIS_OK);
            tu_require(g->type == REDIS_REPLY_STRING &&
                           strtoll(g->str, NULL, 10) == s->v[k].due,
                       "%s: compact job %s (due %lld) has shard entry %s",
                       ctx, s->v[k].id, (long long)s->v[k].due,
                       g->type == REDIS_REPLY_STRING ? g->str : "(none)");
            freeReplyObject(g);
        }
        /* and the shards and bucket keys hold nothing else */
        long long bucket_keys = 0, shard_entries = 0, shard_keys = 0;
        for (size_t k = 0; k < nkeys; k++) {
            if (keys[k].part != pidx(i))
                continue;
            if (strncmp(keys[k].suffix, "c:", 2) == 0)
                bucket_keys++;
            if (strncmp(keys[k].suffix, "s:", 2) == 0) {
                redisAppendCommand(r, "HLEN %s", keys[k].name);
                shard_keys++;
            }
        }
        for (long long k = 0; k < shard_keys; k++) {
            redisReply *g = NULL;
            tu_check(redisGetReply(r, (void **)&g) == REDIS_OK);
            tu_check(g->type == REDIS_REPLY_INTEGER);
            shard_entries += g->integer;
            freeReplyObject(g);
        }
        tu_require(bucket_keys == (long long)nb,
                   "%s: %lld bucket keys %sc:*, %zu buckets in %s", ctx,
                   bucket_keys, pfx, nb, kcb);
        tu_require(shard_entries == in_buckets,
                   "%s: the shards %ss:* hold %lld ids, the buckets %lld",
                   ctx, pfx, shard_entries, in_buckets);
        freeReplyObject(cb);
    }
    qkeys_free(keys, nkeys);
    if (s->n > 1) /* qsort wants a valid pointer even for no jobs */
        qsort(s->v, s->n, sizeof(*s->v), sj_by_id);
    for (size_t k = 1; k < s->n; k++)
        tu_require(strcmp(s->v[k - 1].id, s->v[k].id) != 0,
                   "%s: job %s is stored twice (%s and %s)", ctx,
                   s->v[k].id, s->v[k - 1].compact ? "compact" : "native",
                   s->v[k].compact ? "compact" : "native");
    for (size_t k = 0; k < s->n; k++)
        tu_require(s->v[k].part == part_of(s->v[k].id),
                   "%s: job %s is in partition %d, hashes to %d", ctx,
                   s->v[k].id, s->v[k].part, part_of(s->v[k].id));
}

static const sj *snap_find(const snap *s, const char *id) {
    sj key = {.id = (char *)id};
    if (s->n == 0) /* bsearch wants a valid pointer even for no jobs */
        return NULL;
    return bsearch(&key, s->v, s->n, sizeof(*s->v), sj_by_id);
}

/* ---- the model -------------------------------------------------------- */

#define M_IDS 5000
#define M_PL 96

/* One id of the model.  Ids are "<letter><number>[suffix]": the number is
 * the index. */
typedef struct mj {
    char id[DQ_ID_BUF];
    int state;   /* 0 never pushed, 1 pending, 2 in flight, 3 gone */
    int done;    /* acked, and not created or cancelled since: a keep push
                    answers DQ_DONE */
    int meta;    /* pushed with options: has a meta, must stay native */
    int64_t due;
    size_t plen;
    char pl[M_PL];
} mj;

typedef struct model {
    mj *j;
    int n;   /* ids in use: j[0..n-1] */
    int cap; /* room in j */
    redisContext *r;
    int64_t t0; /* server ms at the start: due <=> due < t0 */
    unsigned seed;
    int op;
    const char *q;
} model;

#define MCK(m, cond, ...)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            char m_msg_[1024];                                                \
            snprintf(m_msg_, sizeof(m_msg_), __VA_ARGS__);                    \
            ck_abort_msg("seed %u, op %d: %s", (m)->seed, (m)->op, m_msg_);   \
        }                                                                     \
    } while (0)

static mj *m_of(model *m, const char *id) {
    int k = atoi(id + 1);
    MCK(m, k >= 0 && k < m->n && strcmp(m->j[k].id, id) == 0,
        "id %s is not one of the model's", id);
    return &m->j[k];
}

static int m_is_due(const model *m, const mj *j) { return j->due < m->t0; }

/* Whether the job may be compact at all. */
static int m_fits(const mj *j) {
    return !j->meta && strlen(j->id) <= C_ID_MAX && j->plen <= C_PAYLOAD_MAX;
}

static int m_by_due(const void *a, const void *b) {
    const mj *x = *(const mj *const *)a, *y = *(const mj *const *)b;
    if (x->due != y->due)
        return x->due < y->due ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* The pending jobs in (due, id) order; returns their number. */
static size_t m_pending(model *m, mj ***out) {
    mj **v = malloc(((size_t)m->n + 1) * sizeof(*v));
    ck_assert_ptr_nonnull(v);
    size_t n = 0;
    for (int k = 0; k < m->n; k++)
        if (m->j[k].state == 1)
            v[n++] = &m->j[k];
    if (n > 1)
        qsort(v, n, sizeof(*v), m_by_due);
    *out = v;
    return n;
}

/* Redis holds exactly the model's pending jobs, each with its due time
 * and payload, and every one that must be native is. */
static void m_check_redis(model *m, redisContext *r, snap *s_out) {
    snap s;
    char ctx[96];
    snprintf(ctx, sizeof(ctx), "seed %u op %d", m->seed, m->op);
    snap_take(r, m->q, &s, ctx);
    size_t pending = 0;
    for (int k = 0; k < m->n; k++) {
        mj *j = &m->j[k];
        const sj *x = snap_find(&s, j->id);
        if (j->state != 1) {
            MCK(m, x == NULL, "job %s (state %d) is still stored as pending "
                "(%s, due %lld)", j->id, j->state,
                x->compact ? "compact" : "native", (long long)x->due);
            continue;
        }
        pending++;
        MCK(m, x != NULL, "pending job %s (due %lld) is not stored", j->id,
            (long long)j->due);
        MCK(m, x->due == j->due, "job %s stored due %lld, pushed for %lld",
            j->id, (long long)x->due, (long long)j->due);
        MCK(m, x->plen == j->plen && memcmp(x->pl, j->pl, j->plen) == 0,
            "job %s: stored payload of %zu B differs from the pushed one "
            "(%zu B)", j->id, x->plen, j->plen);
        MCK(m, !x->compact || m_fits(j), "job %s is compact but must stay "
            "native (meta %d, id %zu B, payload %zu B)", j->id, j->meta,
            strlen(j->id), j->plen);
    }
    MCK(m, s.n == pending, "Redis holds %zu pending jobs, the model %zu",
        s.n, pending);
    if (s_out)
        *s_out = s;
    else
        snap_free(&s);
}

/* A job's payload: mostly up to C_PAYLOAD_MAX bytes (compact), some
 * longer; bytes include ':' and NUL. */
static void gen_payload(char *buf, size_t *len) {
    size_t n = rnd() % 100 < 88 ? (size_t)urange(0, C_PAYLOAD_MAX)
                                : (size_t)urange(C_PAYLOAD_MAX + 1, M_PL - 6);
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789:;-_";
    for (size_t i = 0; i < n; i++) {
        uint64_t x = rnd() % 64;
        buf[i] = x == 0 ? '\0' : x == 1 ? '\xff' : alpha[x % (sizeof(alpha) - 1)];
    }
    *len = n;
}

/* A new id: k<index> and a few letters, 5% longer than a compact job's. */
static int m_new_id(model *m) {
    ck_assert_int_lt(m->n, m->cap);
    int k = m->n++;
    mj *j = &m->j[k];
    memset(j, 0, sizeof(*j));
    if (rnd() % 100 < 5) {
        int w = snprintf(j->id, sizeof(j->id), "k%d-", k);
        memset(j->id + w, 'L', (size_t)(C_ID_MAX + 10 - w));
        j->id[C_ID_MAX + 10] = '\0';
    } else {
        int w = snprintf(j->id, sizeof(j->id), "k%d", k);
        int extra = (int)urange(0, 8);
        for (int i = 0; i < extra; i++)
            j->id[w + i] = (char)('a' + rnd() % 26);
        j->id[w + extra] = '\0';
    }
    return k;
}

/* An id for a push: a used one about half the time, else a new one. */
static int m_pick_id(model *m) {
    if (m->n > 0 && (m->n >= m->cap || rnd() % 100 < 50))
        return (int)urange(0, m->n - 1);
    return m_new_id(m);
}

/* ---- model_random ------------------------------------------------------- */

/* Three due times many jobs share (uniform buckets): one due now, two
 * later. */
static int64_t g_ties[3];

static int64_t pick_time(const model *m) {
    uint64_t x = rnd() % 100;
    if (x < 30)
        return m->t0 - HOUR_MS - urange(0, HOUR_MS);
    if (x < 82)
        return m->t0 + 2 * HOUR_MS + urange(0, 48 * HOUR_MS);
    return g_ties[rnd() % 3];
}

/* Applies one push of id to the model (keep or replace); returns the
 * outcome it expects. */
static int m_push(model *m, mj *j, int replace, int64_t due, const char *pl,
                  size_t plen, int opts) {
    if (j->state == 1 || j->state == 2) {
        if (!replace)
            return DQ_KEPT;
        MCK(m, j->state == 1, "test error: replace of a job in flight");
        j->due = due;
        memcpy(j->pl, pl, plen);
        j->plen = plen;
        j->meta = j->meta || opts;
        return DQ_REPLACED;
    }
    if (!replace && j->done)
        return DQ_DONE;
    j->done = 0; /* a new incarnation: the record no longer answers */
    j->state = 1;
    j->due = due;
    memcpy(j->pl, pl, plen);
    j->plen = plen;
    j->meta = opts;
    return DQ_PUSHED;
}

static void m_check_get(model *m, dq_client *c, mj *j) {
    dq_job_info *in = NULL;
    int rc = dq_get(c, m->q, j->id, &in);
    MCK(m, rc >= 0, "dq_get(%s): %d %s", j->id, rc, dq_errmsg(c));
    if (j->state != 1 && j->state != 2) {
        MCK(m, rc == 0 && in == NULL, "dq_get(%s) of a job gone (state %d) "
            "found one (state %d, due %lld)", j->id, j->state,
            dq_job_info_state(in), (long long)dq_job_info_due_ms(in));
        return;
    }
    MCK(m, rc == 1 && in != NULL, "dq_get(%s) of a %s job found none", j->id,
        j->state == 1 ? "pending" : "leased");
    if (j->state == 2) {
        MCK(m, dq_job_info_state(in) == DQ_JOB_INFLIGHT,
            "dq_get(%s) of a leased job: state %d", j->id,
            dq_job_info_state(in));
        MCK(m, dq_job_info_attempts(in) == 1, "dq_get(%s): attempts %lld",
            j->id, (long long)dq_job_info_attempts(in));
    } else {
        int want = j->due <= dq_job_info_now_ms(in) ? DQ_JOB_DUE
                                                    : DQ_JOB_SCHEDULED;
        MCK(m, dq_job_info_state(in) == want,
            "dq_get(%s): state %d, want %d", j->id, dq_job_info_state(in),
            want);
        MCK(m, dq_job_info_due_ms(in) == j->due, "dq_get(%s): due %lld, "
            "want %lld", j->id, (long long)dq_job_info_due_ms(in),
            (long long)j->due);
        MCK(m, dq_job_info_attempts(in) == 0, "dq_get(%s): attempts %lld",
            j->id, (long long)dq_job_info_attempts(in));
    }
    size_t len = 0;
    const char *p = dq_job_info_payload(in, &len);
    MCK(m, len == j->plen && memcmp(p, j->pl, len) == 0,
        "dq_get(%s): payload of %zu B, want %zu B", j->id, len, j->plen);
    MCK(m, dq_job_info_last_error(in, NULL) == NULL &&
               dq_job_info_repeat(in) == NULL,
        "dq_get(%s): a reason or a repeat rule", j->id);
    MCK(m, strcmp(dq_job_info_id(in), j->id) == 0, "dq_get(%s): id %s",
        j->id, dq_job_info_id(in));
    dq_job_info_free(in);
}

/* Lists count scheduled jobs from offset and compares with the model's
 * (due, id) order. */
static void m_check_list(model *m, dq_client *c, int64_t offset, int count) {
    mj **v;
    size_t n = m_pending(m, &v);
    dq_jobs *jobs = NULL;
    int64_t now = 0;
    int got = dq_list(c, m->q, DQ_LIST_SCHEDULED, offset, count, &jobs, &now);
    MCK(m, got >= 0, "dq_list(%lld, %d): %d %s", (long long)offset, count,
        got, dq_errmsg(c));
    size_t want = (size_t)offset >= n ? 0
                  : n - (size_t)offset < (size_t)count ? n - (size_t)offset
                                                       : (size_t)count;
    MCK(m, (size_t)got == want, "dq_list(%lld, %d) of %zu pending: %d jobs, "
        "want %zu", (long long)offset, count, n, got, want);
    for (size_t i = 0; i < want; i++) {
        const dq_job *x = dq_jobs_at(jobs, i);
        const mj *j = v[(size_t)offset + i];
        size_t len = 0;
        const char *p = dq_job_payload(x, &len);
        MCK(m, strcmp(dq_job_id(x), j->id) == 0 && dq_job_due_ms(x) == j->due,
            "dq_list(%lld, %d) [%zu]: %s due %lld, want %s due %lld",
            (long long)offset, count, i, dq_job_id(x),
            (long long)dq_job_due_ms(x), j->id, (long long)j->due);
        MCK(m, len == j->plen && memcmp(p, j->pl, len) == 0,
            "dq_list: %s payload of %zu B, want %zu B", j->id, len, j->plen);
        MCK(m, dq_job_attempt(x) == 0 && dq_job_lease_deadline_ms(x) == 0,
            "dq_list: %s attempt %lld", j->id, (long long)dq_job_attempt(x));
    }
    dq_jobs_free(jobs);
    free(v);
}

/* dq_count_due over nb bounds compared with the model; a window with a
 * job within 3 s of one of its bounds (the clock moves) is not compared,
 * the total always is. */
static void m_check_count(model *m, dq_client *c, const int64_t *b, int nb) {
    int64_t got[DQ_COUNT_DUE_MAX + 1], now = 0;
    int rc = dq_count_due(c, m->q, b, nb, got, &now);
    MCK(m, rc == 0, "dq_count_due: %d %s", rc, dq_errmsg(c));
    int64_t want[DQ_COUNT_DUE_MAX + 1] = {0};
    int vague[DQ_COUNT_DUE_MAX + 1] = {0};
    int64_t total = 0, sum = 0;
    for (int k = 0; k < m->n; k++) {
        const mj *j = &m->j[k];
        if (j->state != 1)
            continue;
        total++;
        int w = 0;
        while (w < nb && j->due > now + b[w])
            w++;
        want[w]++;
        for (int i = 0; i < nb; i++)
            if (llabs((long long)(j->due - (now + b[i]))) <= 3000)
                vague[i] = vague[i + 1] = 1;
    }
    for (int i = 0; i <= nb; i++) {
        sum += got[i];
        MCK(m, vague[i] || got[i] == want[i],
            "dq_count_due window %d of %d (bound %lld ms from %lld): %lld, "
            "want %lld", i, nb + 1, (long long)(i < nb ? b[i] : 0),
            (long long)now, (long long)got[i], (long long)want[i]);
    }
    MCK(m, sum == total, "dq_count_due adds up to %lld, the model holds "
        "%lld pending", (long long)sum, (long long)total);
}

/* The earliest due time of the pending jobs, INT64_MAX when none. */
static int64_t m_first_due(const model *m) {
    int64_t first = INT64_MAX;
    for (int k = 0; k < m->n; k++)
        if (m->j[k].state == 1 && m->j[k].due < first)
            first = m->j[k].due;
    return first;
}

/* A next_due_ms (dq_poll, dq_stats) read between server times t1 and t2
 * when nothing is due: the ms to the earliest pending job (-1 none). */
static void m_check_next(model *m, const char *what, int64_t next,
                         int64_t t1, int64_t t2) {
    int64_t first = m_first_due(m);
    if (first == INT64_MAX) {
        MCK(m, next == -1, "%s: next_due_ms %lld with nothing pending", what,
            (long long)next);
        return;
    }
    MCK(m, next >= first - t2 - 1 && next <= first - t1 + 1,
        "%s: next_due_ms %lld, the earliest job is due %lld (server time "
        "%lld..%lld)", what, (long long)next, (long long)first,
        (long long)t1, (long long)t2);
}

static void m_check_stats(model *m, dq_client *c) {
    int64_t s[5];
    int64_t t1 = server_ms(m->r);
    int rc = dq_stats(c, m->q, &s[0], &s[1], &s[2], &s[3], &s[4]);
    int64_t t2 = server_ms(m->r);
    MCK(m, rc == 0, "dq_stats: %d %s", rc, dq_errmsg(c));
    int64_t sched = 0, due = 0, infl = 0;
    for (int k = 0; k < m->n; k++) {
        const mj *j = &m->j[k];
        if (j->state == 1)
            m_is_due(m, j) ? due++ : sched++;
        else if (j->state == 2)
            infl++;
    }
    MCK(m, s[0] == sched && s[1] == due && s[2] == infl && s[3] == 0,
        "dq_stats: scheduled %lld due %lld inflight %lld dead %lld, want "
        "%lld %lld %lld 0", (long long)s[0], (long long)s[1],
        (long long)s[2], (long long)s[3], (long long)sched, (long long)due,
        (long long)infl);
    if (due > 0)
        MCK(m, s[4] == 0, "dq_stats: next_due_ms %lld with %lld due",
            (long long)s[4], (long long)due);
    else
        m_check_next(m, "dq_stats", s[4], t1, t2);
}

/* Polls up to max and checks the delivery against the model: each job
 * pending and due, with its payload, due time and attempt 1; as many as
 * are due up to max; within a partition earliest due first (no due job
 * of the partition left that is due before one delivered).  The jobs are
 * then in flight in the model; returns them (NULL when none). */
static dq_jobs *m_poll(model *m, dq_client *c, int max) {
    dq_jobs *jobs = NULL;
    int64_t next = -5, t1 = server_ms(m->r);
    int n = dq_poll(c, m->q, max, 60000, &jobs, &next);
    int64_t t2 = server_ms(m->r);
    MCK(m, n >= 0, "dq_poll(%d): %d %s", max, n, dq_errmsg(c));
    if (n == 0)
        m_check_next(m, "dq_poll", next, t1, t2);
    else
        MCK(m, next == 0, "dq_poll: %d jobs, next_due_ms %lld", n,
            (long long)next);
    int64_t due_total = 0;
    for (int k = 0; k < m->n; k++)
        if (m->j[k].state == 1 && m_is_due(m, &m->j[k]))
            due_total++;
    int64_t want = due_total < max ? due_total : max;
    int np = nparts();
    int64_t *last = calloc((size_t)np, sizeof(int64_t));
    ck_assert_ptr_nonnull(last);
    for (int p = 0; p < np; p++)
        last[p] = INT64_MIN;
    for (int i = 0; i < n; i++) {
        const dq_job *x = dq_jobs_at(jobs, (size_t)i);
        mj *j = m_of(m, dq_job_id(x));
        MCK(m, j->state == 1, "poll delivered %s, which is %s", j->id,
            j->state == 2 ? "already in flight (delivered twice)"
            : j->state == 3 ? (j->done ? "acked already (delivered twice)"
                                       : "cancelled")
                            : "never pushed");
        MCK(m, m_is_due(m, j), "poll delivered %s due %lld, not due yet",
            j->id, (long long)j->due);
        size_t len = 0;
        const char *p = dq_job_payload(x, &len);
        MCK(m, len == j->plen && memcmp(p, j->pl, len) == 0,
            "poll: %s payload of %zu B, want %zu B (an older push's?)",
            j->id, len, j->plen);
        MCK(m, dq_job_due_ms(x) == j->due && dq_job_attempt(x) == 1,
            "poll: %s due %lld attempt %lld, want due %lld attempt 1", j->id,
            (long long)dq_job_due_ms(x), (long long)dq_job_attempt(x),
            (long long)j->due);
        int part = part_of(j->id);
        MCK(m, j->due >= last[part], "poll: %s due %lld delivered after a "
            "job due %lld of its partition", j->id, (long long)j->due,
            (long long)last[part]);
        last[part] = j->due;
        j->state = 2;
    }
    MCK(m, n == want, "poll(%d) delivered %d jobs, %lld are due", max, n,
        (long long)due_total);
    for (int k = 0; k < m->n; k++) {
        const mj *j = &m->j[k];
        if (j->state == 1 && m_is_due(m, j))
            MCK(m, j->due >= last[part_of(j->id)],
                "poll: %s due %lld left behind, a job of its partition due "
                "%lld delivered", j->id, (long long)j->due,
                (long long)last[part_of(j->id)]);
    }
    free(last);
    return jobs;
}

/* Acks a poll's jobs; the model forgets them. */
static void m_ack(model *m, dq_client *c, dq_jobs *jobs) {
    size_t n = dq_jobs_count(jobs);
    if (n == 0)
        return;
    const char **ids = malloc(n * sizeof(*ids)), **toks =
        malloc(n * sizeof(*toks));
    int *res = malloc(n * sizeof(*res));
    ck_assert(ids && toks && res);
    for (size_t i = 0; i < n; i++) {
        ids[i] = dq_job_id(dq_jobs_at(jobs, i));
        toks[i] = dq_job_token(dq_jobs_at(jobs, i));
    }
    int rc = dq_ack_batch(c, m->q, n, ids, toks, res);
    MCK(m, rc == (int)n, "dq_ack_batch of %zu: %d %s", n, rc, dq_errmsg(c));
    for (size_t i = 0; i < n; i++) {
        MCK(m, res[i] == 0, "ack of %s: %d", ids[i], res[i]);
        mj *j = m_of(m, ids[i]);
        j->state = 3;
        j->done = 1;
    }
    free(ids);
    free(toks);
    free(res);
}

/* Pushes the listed model ids (absolute times, keep or replace, with
 * options or not) in one batch call and checks the outcomes. */
static void m_push_batch(model *m, dq_client *c, const int *idx, size_t n,
                         const int64_t *at, char (*pls)[M_PL],
                         const size_t *lens, int replace,
                         const dq_push_opts *o) {
    const void **pp = malloc(n * sizeof(*pp));
    const char **ids = malloc(n * sizeof(*ids));
    int *out = malloc(n * sizeof(*out)), *want = malloc(n * sizeof(*want));
    ck_assert(pp && ids && out && want);
    int created = 0;
    for (size_t i = 0; i < n; i++) {
        pp[i] = pls[i];
        ids[i] = m->j[idx[i]].id;
        want[i] = m_push(m, &m->j[idx[i]], replace, at[i], pls[i], lens[i],
                         o != NULL);
        created += want[i] == DQ_PUSHED || want[i] == DQ_REPLACED;
        out[i] = -99;
    }
    int rc = dq_push_batch_ex(c, m->q, n, pp, lens, at, ids,
                              (replace ? DQ_PUSH_REPLACE : DQ_PUSH_KEEP) |
                                  DQ_PUSH_AT,
                              o, NULL, out);
    MCK(m, rc == created, "dq_push_batch of %zu (%s%s): %d, want %d (%s)", n,
        replace ? "replace" : "keep", o ? ", options" : "", rc, created,
        rc < 0 ? dq_errmsg(c) : "");
    for (size_t i = 0; i < n; i++)
        MCK(m, out[i] == want[i], "dq_push_batch [%zu] %s (%s): outcome %d, "
            "want %d", i, ids[i], replace ? "replace" : "keep", out[i],
            want[i]);
    free(pp);
    free(ids);
    free(out);
    free(want);
}

/* A random batch: ordinary (2..300 jobs at random times) or a tie batch
 * (121..300 jobs at one shared time: a uniform bucket). */
static void op_batch(model *m, dq_client *c, const dq_push_opts *o) {
    int tie = rnd() % 100 < 15;
    size_t n = tie ? (size_t)urange(C_CAP + 1, 300) * (size_t)nparts()
               : rnd() % 100 < 75 ? (size_t)urange(2, 60)
                                  : (size_t)urange(61, 300);
    int replace = rnd() % 100 < 35;
    int *idx = malloc(n * sizeof(*idx));
    int64_t *at = malloc(n * sizeof(*at));
    char (*pls)[M_PL] = malloc(n * sizeof(*pls));
    size_t *lens = malloc(n * sizeof(*lens));
    ck_assert(idx && at && pls && lens);
    int64_t t = g_ties[rnd() % 3];
    int in_flight = 0;
    for (size_t i = 0; i < n; i++) {
        idx[i] = m_pick_id(m);
        in_flight |= m->j[idx[i]].state == 2;
        at[i] = tie ? t : pick_time(m);
        gen_payload(pls[i], &lens[i]);
    }
    if (!in_flight)
        m_push_batch(m, c, idx, n, at, pls, lens, replace,
                     rnd() % 100 < 6 ? o : NULL);
    free(idx);
    free(at);
    free(pls);
    free(lens);
}

/* One push of one job: absolute time (dq_push_ex) or, for a later job, a
 * delay (dq_push: its due time is read back with dq_get and must be the
 * delay from the server's time of the push). */
static void op_single(model *m, dq_client *c, redisContext *r,
                      const dq_push_opts *o) {
    mj *j = &m->j[m_pick_id(m)];
    if (j->state == 2)
        return;
    int replace = rnd() % 100 < 40;
    int flags = replace ? DQ_PUSH_REPLACE : DQ_PUSH_KEEP;
    char pl[M_PL];
    size_t len;
    gen_payload(pl, &len);
    int out = -99, rc;
    const dq_push_opts *opts = rnd() % 100 < 8 ? o : NULL;
    if (rnd() % 100 < 15) {
        int64_t delay = 2 * HOUR_MS + urange(0, 48 * HOUR_MS);
        int64_t t1 = server_ms(r);
        rc = dq_push(c, m->q, pl, len, delay, j->id, flags, NULL, 0, &out);
        int64_t t2 = server_ms(r);
        MCK(m, rc == 0, "dq_push(%s): %d %s", j->id, rc, dq_errmsg(c));
        int want = m_push(m, j, replace, 0, pl, len, 0);
        MCK(m, out == want, "dq_push(%s, %s): outcome %d, want %d", j->id,
            replace ? "replace" : "keep", out, want);
        if (want == DQ_PUSHED || want == DQ_REPLACED) {
            dq_job_info *in = NULL;
            MCK(m, dq_get(c, m->q, j->id, &in) == 1, "dq_get(%s) after its "
                "push: %s", j->id, dq_errmsg(c));
            j->due = dq_job_info_due_ms(in);
            dq_job_info_free(in);
            MCK(m, j->due >= t1 + delay && j->due <= t2 + delay,
                "dq_push(%s) with a delay of %lld between server times %lld "
                "and %lld: due %lld", j->id, (long long)delay, (long long)t1,
                (long long)t2, (long long)j->due);
        }
        return;
    }
    int64_t at = pick_time(m);
    rc = dq_push_ex(c, m->q, pl, len, at, j->id, flags | DQ_PUSH_AT, opts,
                    NULL, 0, &out);
    MCK(m, rc == 0, "dq_push_ex(%s): %d %s", j->id, rc, dq_errmsg(c));
    int want = m_push(m, j, replace, at, pl, len, opts != NULL);
    MCK(m, out == want, "dq_push_ex(%s, %s%s, due %lld): outcome %d, want %d",
        j->id, replace ? "replace" : "keep", opts ? ", options" : "",
        (long long)at, out, want);
}

static void op_cancel(model *m, dq_client *c) {
    if (m->n == 0)
        return;
    mj *j = &m->j[urange(0, m->n - 1)];
    for (int tries = 0; tries < 20 && j->state != 1 && rnd() % 100 < 70;
         tries++)
        j = &m->j[urange(0, m->n - 1)];
    int rc = dq_cancel(c, m->q, j->id, 0);
    int want = j->state == 1 ? DQ_CANCELED_PENDING
               : j->state == 2 ? DQ_CANCEL_BUSY
                               : 0;
    MCK(m, rc == want, "dq_cancel(%s) of a job in state %d: %d, want %d (%s)",
        j->id, j->state, rc, want, rc < 0 ? dq_errmsg(c) : "");
    if (j->state != 2)
        j->done = 0; /* a cancel retires the id's done record */
    if (j->state == 1)
        j->state = 3;
}

/* Tokens no delivery gave: a pending job (compact or not) answers
 * DQ_ESTALE to an ack and an extend, an id never pushed DQ_ENOTFOUND. */
static void op_bad_token(model *m, dq_client *c) {
    mj *j = NULL;
    for (int tries = 0; tries < 30 && m->n > 0; tries++) {
        mj *x = &m->j[urange(0, m->n - 1)];
        if (x->state == 1) {
            j = x;
            break;
        }
    }
    if (j != NULL) {
        int rc = dq_ack(c, m->q, j->id, "1000");
        MCK(m, rc == DQ_ESTALE, "dq_ack(%s) of a pending job with a made-up "
            "token: %d, want DQ_ESTALE", j->id, rc);
        rc = dq_extend(c, m->q, j->id, "1000", 5000, NULL);
        MCK(m, rc == DQ_ESTALE, "dq_extend(%s) of a pending job: %d, want "
            "DQ_ESTALE", j->id, rc);
        rc = dq_nack(c, m->q, j->id, "1000", 0, 0);
        MCK(m, rc == DQ_ESTALE, "dq_nack(%s) of a pending job: %d, want "
            "DQ_ESTALE", j->id, rc);
    }
    int rc = dq_ack(c, m->q, "z-never-pushed", "1000");
    MCK(m, rc == DQ_ENOTFOUND, "dq_ack of an id never pushed: %d", rc);
}

/* A poll: the delivery checked, then one of its jobs looked up (in
 * flight), cancelled without the flag (busy) and pushed again in keep
 * mode (kept), before all are acked. */
static void op_poll(model *m, dq_client *c) {
    dq_jobs *jobs = m_poll(m, c, (int)urange(1, 60));
    size_t n = dq_jobs_count(jobs);
    if (n > 0) {
        mj *j = m_of(m, dq_job_id(dq_jobs_at(jobs, rnd() % n)));
        m_check_get(m, c, j);
        int rc = dq_cancel(c, m->q, j->id, 0);
        MCK(m, rc == DQ_CANCEL_BUSY, "dq_cancel(%s) in flight: %d", j->id, rc);
        int out = -1;
        rc = dq_push(c, m->q, "x", 1, 0, j->id, DQ_PUSH_KEEP, NULL, 0, &out);
        MCK(m, rc == 0 && out == DQ_KEPT, "keep push of %s in flight: %d, "
            "outcome %d", j->id, rc, out);
    }
    m_ack(m, c, jobs);
    dq_jobs_free(jobs);
}

static void op_list(model *m, dq_client *c) {
    int64_t pending = 0;
    for (int k = 0; k < m->n; k++)
        pending += m->j[k].state == 1;
    int64_t offset = rnd() % 100 < 40 ? urange(0, 20)
                                      : urange(0, pending + 3);
    int count = rnd() % 100 < 70 ? (int)urange(1, 40) : (int)urange(41, 400);
    m_check_list(m, c, offset, count);
}

static void op_count(model *m, dq_client *c) {
    int nb = (int)urange(1, 6);
    int64_t b[8];
    for (int i = 0; i < nb; i++)
        b[i] = urange(-6 * HOUR_MS, 52 * HOUR_MS);
    /* sort, make strictly increasing */
    for (int i = 1; i < nb; i++)
        for (int k = i; k > 0 && b[k - 1] > b[k]; k--) {
            int64_t t = b[k];
            b[k] = b[k - 1];
            b[k - 1] = t;
        }
    for (int i = 1; i < nb; i++)
        if (b[i] <= b[i - 1])
            b[i] = b[i - 1] + 1;
    m_check_count(m, c, b, nb);
}

/* Pushes every pending job again (replace) due now, then polls them all,
 * 1000 at a time: each delivered exactly once. */
static void m_drain(model *m, dq_client *c) {
    int *idx = malloc((size_t)m->n * sizeof(*idx));
    int64_t *at = malloc((size_t)m->n * sizeof(*at));
    char (*pls)[M_PL] = malloc((size_t)m->n * sizeof(*pls));
    size_t *lens = malloc((size_t)m->n * sizeof(*lens));
    ck_assert(idx && at && pls && lens);
    size_t n = 0;
    for (int k = 0; k < m->n; k++) {
        if (m->j[k].state != 1)
            continue;
        idx[n] = k;
        at[n] = m->t0 - 3 * HOUR_MS - urange(0, 600000);
        memcpy(pls[n], m->j[k].pl, m->j[k].plen);
        lens[n] = m->j[k].plen;
        n++;
    }
    for (size_t lo = 0; lo < n; lo += 500) {
        size_t k = n - lo < 500 ? n - lo : 500;
        m_push_batch(m, c, idx + lo, k, at + lo, pls + lo, lens + lo, 1,
                     NULL);
    }
    size_t got = 0;
    for (int rounds = 0; rounds < 100; rounds++) {
        dq_jobs *jobs = m_poll(m, c, 1000);
        size_t k = dq_jobs_count(jobs);
        m_ack(m, c, jobs);
        dq_jobs_free(jobs);
        got += k;
        if (k == 0)
            break;
    }
    MCK(m, got == n, "drain: %zu of %zu pending jobs delivered", got, n);
    free(idx);
    free(at);
    free(pls);
    free(lens);
}

/* Fails unless the mover's cursor key (lib/lua/include/compact/move.lua: SET ... PX 1500)
 * is gone or on its way out, a TTL of at most 1.5 s. */
static void assert_cursor_expires(redisContext *r, const char *key) {
    long long ttl = rint_(r, "PTTL", key, NULL);
    ck_assert_msg(ttl == -2 || (ttl > 0 && ttl <= 1500),
                  "the mover's cursor %s has a TTL of %lld ms", key, ttl);
}

/* The keys a queue may keep without jobs: done records, its settings, on
 * a partitioned run the plain jobs hash with the partition count, and the
 * mover's cursor while it expires. */
static void assert_no_job_keys(redisContext *r, const char *q) {
    qkey *keys = NULL;
    size_t n = queue_keys(r, q, &keys);
    for (size_t i = 0; i < n; i++) {
        const char *s = keys[i].suffix;
        if (strcmp(s, "done") == 0 || strcmp(s, "conf") == 0)
            continue;
        if (keys[i].part == -1 && tu_parts() > 1 && strcmp(s, "jobs") == 0)
            continue;
        if (strcmp(s, "mv") == 0) {
            assert_cursor_expires(r, keys[i].name);
            continue;
        }
        ck_abort_msg("queue %s has no jobs but key %s is left", q,
                     keys[i].name);
    }
    qkeys_free(keys, n);
    tu_assert_plain_clean(r, NS, q);
}

static unsigned test_seed(void) {
    const char *s = getenv("DQ_TEST_SEED");
    return s != NULL && *s ? (unsigned)strtoul(s, NULL, 10) : 20240611u;
}

/* Drains what is due (polls of up to 1000, acked) down to a poll that
 * finds nothing due, then polls idle 0..3 times more: in the compact
 * layout each of those moves up to 256 pushed jobs into buckets. */
static void op_idle(model *m, dq_client *c) {
    for (int round = 0; round < 50; round++) {
        dq_jobs *jobs = m_poll(m, c, 1000);
        size_t k = dq_jobs_count(jobs);
        m_ack(m, c, jobs);
        dq_jobs_free(jobs);
        if (k == 0)
            break;
    }
    for (int extra = (int)urange(0, 3); extra > 0; extra--) {
        dq_jobs *jobs = m_poll(m, c, (int)urange(1, 60));
        m_ack(m, c, jobs);
        dq_jobs_free(jobs);
    }
}

/* A model of queue q over link r, empty, at the server's time now; the
 * test's seed (plus salt) seeds the random numbers and the due times of
 * the ties (g_ties) are set from now. */
static void model_init(model *m, redisContext *r, const char *q,
                       unsigned salt) {
    memset(m, 0, sizeof(*m));
    m->cap = M_IDS;
    m->r = r;
    m->j = calloc(M_IDS, sizeof(*m->j));
    ck_assert_ptr_nonnull(m->j);
    m->seed = test_seed();
    m->q = q;
    m->t0 = server_ms(r);
    rng_seed(m->seed + salt);
    g_ties[0] = m->t0 - 2 * HOUR_MS - 1;
    g_ties[1] = m->t0 + 5 * HOUR_MS;
    g_ties[2] = m->t0 + 30 * HOUR_MS + 7;
}

/* The random model run on queue q in layout lay (compact-push or compact;
 * in compact, idle polls (op_idle) are what moves jobs into buckets). */
static void model_run(const char *q, int64_t lay) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    set_layout(c, q, lay);
    model m;
    model_init(&m, r, q, 0);
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, 5), 0);
    const int ops = 2500;
    int64_t start = th_mono_ms();
    long long max_compact = 0, max_uniform = 0, checks = 0;
    for (m.op = 0; m.op < ops; m.op++) {
        uint64_t x = rnd() % 100;
        if (lay == DQ_LAYOUT_COMPACT && rnd() % 100 < 8)
            op_idle(&m, c);
        else if (x < 18)
            op_single(&m, c, r, o);
        else if (x < 28)
            op_batch(&m, c, o);
        else if (x < 40)
            op_cancel(&m, c);
        else if (x < 52) {
            if (m.n > 0)
                m_check_get(&m, c, &m.j[urange(0, m.n - 1)]);
        } else if (x < 66)
            op_poll(&m, c);
        else if (x < 80)
            op_list(&m, c);
        else if (x < 87)
            op_count(&m, c);
        else if (x < 90)
            op_bad_token(&m, c);
        else
            m_check_stats(&m, c);
        if (m.op % 100 == 99) {
            snap s;
            m_check_redis(&m, r, &s);
            if (s.compact > max_compact)
                max_compact = s.compact;
            if (s.max_uniform > max_uniform)
                max_uniform = s.max_uniform;
            checks++;
            snap_free(&s);
        }
    }
    m_check_redis(&m, r, NULL);
    m_check_stats(&m, c);
    /* the run went through the compact layout, uniform buckets too */
    MCK(&m, max_compact > 1000, "at most %lld jobs were compact",
        max_compact);
    MCK(&m, max_uniform > C_CAP, "no uniform bucket (largest %lld)",
        max_uniform);
    m_drain(&m, c);
    m_check_redis(&m, r, NULL);
    m_check_stats(&m, c);
    assert_no_job_keys(r, q);
    fprintf(stderr, "model %s: seed %u, %d ops, %d ids, %lld checks of "
            "Redis, up to %lld compact jobs, uniform bucket of %lld, %lld ms\n",
            lay == DQ_LAYOUT_COMPACT ? "compact" : "compact-push", m.seed,
            ops, m.n, checks, max_compact, max_uniform,
            (long long)(th_mono_ms() - start));
    dq_push_opts_free(o);
    free(m.j);
    redisFree(r);
    dq_close(c);
}

START_TEST(model_random) { model_run(Q, DQ_LAYOUT_COMPACT_PUSH); }
END_TEST

START_TEST(model_idle) { model_run(Q, DQ_LAYOUT_COMPACT); }
END_TEST

/* ---- compact_is_compact --------------------------------------------------- */

#define CI_N 5000
#define CI_BATCH 500

/* Pushes the jobs in batches; writes server times before and after each
 * batch. */
static void push_all(dq_client *c, const char *q, char (*ids)[24],
                     char (*pls)[40], const size_t *lens,
                     const int64_t *delays, redisContext *r, int64_t *t_lo,
                     int64_t *t_hi) {
    for (int lo = 0; lo < CI_N; lo += CI_BATCH) {
        const void *pp[CI_BATCH];
        const char *ip[CI_BATCH];
        int out[CI_BATCH];
        for (int i = 0; i < CI_BATCH; i++) {
            pp[i] = pls[lo + i];
            ip[i] = ids[lo + i];
        }
        int64_t t1 = r ? server_ms(r) : 0;
        int rc = dq_push_batch(c, q, CI_BATCH, pp, lens + lo, delays + lo, ip,
                               DQ_PUSH_KEEP, NULL, out);
        ck_assert_msg(rc == CI_BATCH, "dq_push_batch on %s: %d %s", q, rc,
                      dq_errmsg(c));
        int64_t t2 = r ? server_ms(r) : 0;
        for (int i = 0; i < CI_BATCH; i++) {
            ck_assert_int_eq(out[i], DQ_PUSHED);
            if (t_lo) {
                t_lo[lo + i] = t1;
                t_hi[lo + i] = t2;
            }
        }
    }
}

START_TEST(compact_is_compact) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    char qd[64];
    snprintf(qd, sizeof(qd), "ref-%s", Q);
    set_layout(c, Q, g_layout);
    set_layout(c, qd, DQ_LAYOUT_DEFAULT);
    /* warm up: scripts loaded, partition counts recorded */
    push_text(c, Q, "w", 0, "warm", 0, NULL);
    push_text(c, qd, "w", 0, "warm", 0, NULL);
    ck_assert_int_eq(dq_cancel(c, Q, "warm", 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(dq_cancel(c, qd, "warm", 0), DQ_CANCELED_PENDING);

    static char ids[CI_N][24], pls[CI_N][40];
    static size_t lens[CI_N];
    static int64_t delays[CI_N], t_lo[CI_N], t_hi[CI_N];
    rng_seed(test_seed());
    /* Ids that share 64 of the 2^18 shards (about 80 jobs a shard): the
     * shards as dense as in a backlog of ~20 million jobs, which is what
     * the layout is for.  (With ids spread over all shards, each compact
     * job of a backlog this small has a shard key of its own, which costs
     * about what the default layout saves.) */
    char cand[16] = "c0000000000000";
    for (int i = 0; i < CI_N; i++) {
        do {
            for (int d = 13; d > 0 && ++cand[d] > '9'; d--)
                cand[d] = '0';
        } while (tu_shard_of(cand) >= 64);
        memcpy(ids[i], cand, sizeof(cand));
        lens[i] = (size_t)urange(20, 36);
        for (size_t k = 0; k < lens[i]; k++)
            pls[i][k] = (char)('a' + rnd() % 26);
        delays[i] = HOUR_MS + urange(0, 24 * HOUR_MS);
    }
    long long m0 = used_memory(r);
    push_all(c, qd, ids, pls, lens, delays, NULL, NULL, NULL);
    long long m1 = used_memory(r);
    push_all(c, Q, ids, pls, lens, delays, r, t_lo, t_hi);
    long long m2 = used_memory(r);
    double per_d = (double)(m1 - m0) / CI_N, per_c = (double)(m2 - m1) / CI_N;
    fprintf(stderr, "compact_is_compact: memory per job: default %.1f B, "
            "compact %.1f B\n", per_d, per_c);
    ck_assert_msg(per_d > 100, "a default-layout job costs %.1f B?", per_d);
    ck_assert_msg(per_c < 0.6 * per_d, "a compact job costs %.1f B of Redis "
                  "memory, a default one %.1f B", per_c, per_d);

    snap s;
    snap_take(r, Q, &s, "compact_is_compact");
    ck_assert_msg(s.native + s.compact == CI_N, "%lld native + %lld compact "
                  "jobs stored, %d pushed", s.native, s.compact, CI_N);
    ck_assert_int_eq((long long)s.n, CI_N);
    /* The mover moves at most as many as a push pushed and fewer when it
     * reaches the bottom of the due set (push.lua): a share stays native
     * (about 18% here). */
    ck_assert_msg(s.native <= CI_N / 4, "%lld of %d jobs left native",
                  s.native, CI_N);
    ck_assert_msg(s.buckets >= CI_N / 2 / C_CAP, "%lld buckets for %lld "
                  "compact jobs", s.buckets, s.compact);
    ck_assert_msg(s.uniform == 0, "uniform buckets among random times");
    /* as pushed: the payload, and due the delay after the push's time */
    for (int i = 0; i < CI_N; i++) {
        const sj *x = snap_find(&s, ids[i]);
        ck_assert_msg(x != NULL, "job %s not stored", ids[i]);
        ck_assert_msg(x->plen == lens[i] && memcmp(x->pl, pls[i], lens[i]) == 0,
                      "job %s: payload differs", ids[i]);
        ck_assert_msg(x->due >= t_lo[i] + delays[i] &&
                          x->due <= t_hi[i] + delays[i],
                      "job %s due %lld, pushed with delay %lld between %lld "
                      "and %lld", ids[i], (long long)x->due,
                      (long long)delays[i], (long long)t_lo[i],
                      (long long)t_hi[i]);
    }
    /* the default-layout queue keeps them all native */
    ck_assert_int_eq(tu_sum(r, "ZCARD", NS, qd, "due"), CI_N);
    ck_assert_int_eq(tu_sum(r, "EXISTS", NS, qd, "cb"), 0);
    ck_stats(c, Q, CI_N, 0, 0, 0);
    ck_stats(c, qd, CI_N, 0, 0, 0);
    fprintf(stderr, "compact_is_compact: %lld native, %lld compact in %lld "
            "buckets\n", s.native, s.compact, s.buckets);
    snap_free(&s);
    end_test(c, r);
}
END_TEST

/* ---- idle_mover ----------------------------------------------------------- */

#define IM_FIT 3000 /* small jobs, no options: compact once moved */
#define IM_BIG 40   /* payloads too big for a bucket */
#define IM_OPT 20   /* jobs with a push option (a meta) */
#define IM_MOVE 256 /* jobs an idle poll moves (poll.lua, IDLE_MOVE) */

static void drop_queue(redisContext *r, const char *q);

/* Compact jobs stored for queue q. */
static long long compact_count(redisContext *r, const char *q) {
    snap s;
    snap_take(r, q, &s, "idle_mover");
    long long n = s.compact;
    snap_free(&s);
    return n;
}

/* In DQ_LAYOUT_COMPACT pushes store jobs natively and polls that find
 * nothing due move them into buckets, up to IM_MOVE a poll (per
 * partition), farthest due first; jobs with options or big payloads stay
 * native; a plain poll still says when the next job is due; a waiting
 * consumer comes back early while there is more to move, so one
 * dq_poll_wait of 1.5 s moves a backlog that its 1 s wait cap alone would
 * take a dozen seconds over; the mover's cursor goes when it is done. */
START_TEST(idle_mover) {
    dq_client *c = open_client();
    redisContext *r = rconn();
    set_layout(c, Q, DQ_LAYOUT_COMPACT);
    static char ids[CI_N][24], pls[CI_N][40];
    static size_t lens[CI_N];
    static int64_t delays[CI_N];
    rng_seed(test_seed());
    for (int i = 0; i < CI_N; i++) {
        snprintf(ids[i], sizeof(ids[i]), "im%06d", i);
        lens[i] = (size_t)urange(10, 36);
        for (size_t k = 0; k < lens[i]; k++)
            pls[i][k] = (char)('a' + rnd() % 26);
        delays[i] = HOUR_MS + urange(0, 24 * HOUR_MS);
    }
    /* CI_N pushed, of which IM_FIT are polled idle below: the rest are
     * acked at once to leave exactly IM_FIT (a batch of CI_BATCH each) */
    push_all(c, Q, ids, pls, lens, delays, NULL, NULL, NULL);
    ck_assert_int_eq(compact_count(r, Q), 0); /* pushes moved nothing */
    for (int i = IM_FIT; i < CI_N; i++)
        ck_assert_int_eq(dq_cancel(c, Q, ids[i], 0), DQ_CANCELED_PENDING);
    char big[200];
    memset(big, 'b', sizeof(big));
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_MAX_ATTEMPTS, 3), 0);
    for (int i = 0; i < IM_BIG + IM_OPT; i++) {
        char id[24];
        snprintf(id, sizeof(id), "%s%d", i < IM_BIG ? "big" : "opt", i);
        int64_t at = server_ms(r) + 2 * HOUR_MS + i * 1000;
        int rc = i < IM_BIG
                     ? dq_push_ex(c, Q, big, sizeof(big), at, id,
                                  DQ_PUSH_AT, NULL, NULL, 0, NULL)
                     : dq_push_ex(c, Q, "small", 5, at, id, DQ_PUSH_AT, o,
                                  NULL, 0, NULL);
        ck_assert_msg(rc == 0, "push %s: %d %s", id, rc, dq_errmsg(c));
    }
    const long long total = IM_FIT + IM_BIG + IM_OPT;
    int64_t first = INT64_MAX; /* the smallest delay left */
    for (int i = 0; i < IM_FIT; i++)
        if (delays[i] < first)
            first = delays[i];

    /* Plain idle polls: each moves at most IM_MOVE a partition and says
     * when the earliest job is due (first, less the time since the push). */
    long long before = 0, now_c = 0;
    int polls = 0;
    for (; polls < 4; polls++) {
        dq_jobs *jobs = NULL;
        int64_t next = -5;
        int n = dq_poll(c, Q, 10, 60000, &jobs, &next);
        ck_assert_msg(n == 0, "idle poll: %d jobs (%s)", n, dq_errmsg(c));
        ck_assert_msg(next > first - 60000 && next <= first,
                      "idle poll: next_due_ms %lld, the first job is due "
                      "%lld ms after its push", (long long)next,
                      (long long)first);
        now_c = compact_count(r, Q);
        ck_assert_msg((now_c > before || before == IM_FIT) &&
                          now_c - before <= (long long)IM_MOVE * nparts(),
                      "idle poll %d: compact jobs %lld -> %lld", polls,
                      before, now_c);
        before = now_c;
    }
    /* A waiting consumer paced by the mover: 1.5 s moves the rest. */
    if (nparts() == 1) {
        dq_jobs *jobs = NULL;
        int64_t t0 = th_mono_ms();
        int n = dq_poll_wait(c, Q, 10, 60000, 1500, &jobs);
        ck_assert_msg(n == 0, "dq_poll_wait: %d (%s)", n, dq_errmsg(c));
        now_c = compact_count(r, Q);
        fprintf(stderr, "idle_mover: one dq_poll_wait of %lld ms moved %lld "
                "jobs (%lld compact of %d)\n", (long long)(th_mono_ms() - t0),
                now_c - before, now_c, IM_FIT);
        ck_assert_msg(now_c == IM_FIT, "after a waiting poll of 1.5 s, %lld "
                      "of %d jobs compact (%lld before it)", now_c, IM_FIT,
                      before);
    }
    for (; polls < 60 && now_c < IM_FIT; polls++) {
        dq_jobs *jobs = NULL;
        ck_assert_int_eq(dq_poll(c, Q, 10, 60000, &jobs, NULL), 0);
        now_c = compact_count(r, Q);
    }
    ck_assert_msg(now_c == IM_FIT, "%lld of %d jobs compact after %d idle "
                  "polls", now_c, IM_FIT, polls);
    /* one more idle poll finds nothing to move: the cursor goes */
    dq_jobs *none = NULL;
    ck_assert_int_eq(dq_poll(c, Q, 10, 60000, &none, NULL), 0);
    ck_assert_int_eq(tu_sum(r, "EXISTS", NS, Q, "mv"), 0);

    snap s;
    snap_take(r, Q, &s, "idle_mover");
    ck_assert_int_eq(s.native, IM_BIG + IM_OPT);
    ck_assert_int_eq((long long)s.n, total);
    for (int i = 0; i < IM_FIT; i++) {
        const sj *x = snap_find(&s, ids[i]);
        ck_assert_msg(x != NULL && x->plen == lens[i] &&
                          memcmp(x->pl, pls[i], lens[i]) == 0,
                      "job %s lost or changed by the move", ids[i]);
    }
    snap_free(&s);
    ck_stats(c, Q, total, 0, 0, 0);
    int64_t bound = HOUR_MS * 26, cnt[2];
    ck_assert_int_eq(dq_count_due(c, Q, &bound, 1, cnt, NULL), 0);
    ck_assert_int_eq(cnt[0], total);
    /* the moved jobs still cancel, and the earliest comes first */
    ck_assert_int_eq(dq_cancel(c, Q, ids[0], 0), DQ_CANCELED_PENDING);
    ck_assert_int_eq(dq_cancel(c, Q, ids[0], 0), 0);
    drop_queue(r, Q);
    dq_push_opts_free(o);
    end_test(c, r);
}
END_TEST

/* ---- uniform_bucket ------------------------------------------------------ */

START_TEST(uniform_bucket) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    const int64_t now = server_ms(r), t = now - HOUR_MS;
    enum { NU = 1000, NE = 40, NL = 60, NF = 100 };
    static char ids[NU + NE + NL + NF][16];
    static int64_t at[NU + NE + NL + NF];
    int n = 0;
    for (int i = 0; i < NU; i++, n++) {
        snprintf(ids[n], sizeof(ids[n]), "u%04d", i);
        at[n] = t;
    }
    for (int i = 0; i < NE; i++, n++) { /* due before them */
        snprintf(ids[n], sizeof(ids[n]), "e%02d", i);
        at[n] = t - 5000 + i;
    }
    for (int i = 0; i < NL; i++, n++) { /* due after them, due too */
        snprintf(ids[n], sizeof(ids[n]), "l%02d", i);
        at[n] = t + 1000 + i;
    }
    for (int i = 0; i < NF; i++, n++) { /* later */
        snprintf(ids[n], sizeof(ids[n]), "f%03d", i);
        at[n] = now + 2 * HOUR_MS + i * 1000;
    }
    const void *pp[250];
    size_t lens[250];
    const char *ip[250];
    for (int lo = 0; lo < n; lo += 250) {
        int k = n - lo < 250 ? n - lo : 250;
        for (int i = 0; i < k; i++) {
            pp[i] = ids[lo + i];
            lens[i] = strlen(ids[lo + i]);
            ip[i] = ids[lo + i];
        }
        int rc = dq_push_batch_ex(c, Q, (size_t)k, pp, lens, at + lo, ip,
                                  DQ_PUSH_AT, NULL, NULL, NULL);
        ck_assert_msg(rc == k, "dq_push_batch_ex: %d %s", rc, dq_errmsg(c));
    }
    snap s;
    snap_take(r, Q, &s, "uniform_bucket");
    fprintf(stderr, "uniform_bucket: %lld native, %lld compact, %lld "
            "buckets, %lld uniform (largest %lld)\n", s.native, s.compact,
            s.buckets, s.uniform, s.max_uniform);
    ck_assert_int_eq((long long)s.n, n);
    ck_assert_msg(s.uniform >= 1 && s.max_uniform > C_CAP,
                  "no uniform bucket (largest %lld)", s.max_uniform);
    for (int i = 0; i < n; i++) {
        const sj *x = snap_find(&s, ids[i]);
        ck_assert_msg(x && x->due == at[i] && x->plen == strlen(ids[i]) &&
                          memcmp(x->pl, ids[i], x->plen) == 0,
                      "job %s stored wrong", ids[i]);
    }
    snap_free(&s);
    ck_stats(c, Q, NF, NU + NE + NL, 0, 0);
    /* bounds between the groups, 0.5 s or more from any of them (the
     * server's clock moves on from now) */
    const int64_t now2 = server_ms(r);
    const int64_t bounds[3] = {t - 2500 - now2, t + 500 - now2, 0};
    int64_t cnt[4];
    ck_assert_int_eq(dq_count_due(c, Q, bounds, 3, cnt, NULL), 0);
    ck_assert_msg(cnt[0] == NE && cnt[1] == NU && cnt[2] == NL &&
                      cnt[3] == NF,
                  "dq_count_due: %lld %lld %lld %lld", (long long)cnt[0],
                  (long long)cnt[1], (long long)cnt[2], (long long)cnt[3]);

    /* poll them all, 100 at a time */
    static char seen[NU + NE + NL + NF];
    memset(seen, 0, sizeof(seen));
    int np = nparts(), got = 0;
    int64_t last[1024];
    for (int p = 0; p < np; p++)
        last[p] = INT64_MIN;
    for (int polls = 0; polls < 100; polls++) {
        dq_jobs *jobs = NULL;
        int k = poll_n(c, Q, 100, 60000, &jobs, NULL);
        int left = NU + NE + NL - got;
        ck_assert_msg(k == (left < 100 ? left : 100),
                      "poll %d: %d jobs, %d due left", polls, k, left);
        if (k == 0)
            break;
        const char *ai[100], *at_[100];
        for (int i = 0; i < k; i++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)i);
            const char *id = dq_job_id(j);
            int idx = -1;
            for (int x = 0; x < n && idx < 0; x++)
                if (strcmp(ids[x], id) == 0)
                    idx = x;
            ck_assert_msg(idx >= 0 && idx < NU + NE + NL,
                          "poll delivered %s", id);
            ck_assert_msg(!seen[idx], "%s delivered twice", id);
            seen[idx] = 1;
            ck_assert_msg(dq_job_due_ms(j) == at[idx], "%s due %lld, pushed "
                          "for %lld", id, (long long)dq_job_due_ms(j),
                          (long long)at[idx]);
            size_t len;
            const char *pl = dq_job_payload(j, &len);
            ck_assert(len == strlen(id) && memcmp(pl, id, len) == 0);
            int p = part_of(id);
            ck_assert_msg(at[idx] >= last[p], "%s due %lld after a job due "
                          "%lld of its partition", id, (long long)at[idx],
                          (long long)last[p]);
            last[p] = at[idx];
            ai[i] = id;
            at_[i] = dq_job_token(j);
        }
        int res[100];
        ck_assert_int_eq(dq_ack_batch(c, Q, (size_t)k, ai, at_, res), k);
        dq_jobs_free(jobs);
        got += k;
    }
    ck_assert_int_eq(got, NU + NE + NL);
    ck_stats(c, Q, NF, 0, 0, 0);
    for (int i = NU + NE + NL; i < n; i++)
        ck_assert_int_eq(dq_cancel(c, Q, ids[i], 0), DQ_CANCELED_PENDING);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_jobs *none = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 1000, &none, &next), 0);
    ck_assert_int_eq(next, -1);
    assert_no_job_keys(r, Q);
    end_test(c, r);
}
END_TEST

/* ---- lease_merge --------------------------------------------------------- */

/* A poll merges three sources by time: compact jobs, native due jobs and
 * leases that ran out (due again at their deadline, with attempt + 1). */
START_TEST(lease_merge) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    const int64_t now = server_ms(r);
    enum { NA = 300, NB = 50, NL = 50 };
    static char ids[NA + NB][16];
    static int64_t at[NA + NB];
    const void *pp[NA];
    const char *ip[NA];
    size_t lens[NA];
    for (int i = 0; i < NA + NB; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%c%03d", i < NA ? 'a' : 'b', i);
        at[i] = i < NA ? now - HOUR_MS + i * 1000 : now - 2 * HOUR_MS + i;
    }
    for (int i = 0; i < NA; i++) {
        pp[i] = ids[i];
        ip[i] = ids[i];
        lens[i] = strlen(ids[i]);
    }
    ck_assert_int_eq(dq_push_batch_ex(c, Q, NA, pp, lens, at, ip, DQ_PUSH_AT,
                                      NULL, NULL, NULL), NA);
    snap s;
    snap_take(r, Q, &s, "lease_merge");
    ck_assert_msg(s.compact == NA, "%lld of %d compact", s.compact, NA);
    snap_free(&s);
    /* NL leased for 100 ms and left to run out */
    dq_jobs *held = NULL;
    ck_assert_int_eq(poll_n(c, Q, NL, 100, &held, NULL), NL);
    int64_t deadline[NL];
    char hid[NL][16];
    for (int i = 0; i < NL; i++) {
        const dq_job *j = dq_jobs_at(held, (size_t)i);
        snprintf(hid[i], sizeof(hid[i]), "%s", dq_job_id(j));
        deadline[i] = dq_job_lease_deadline_ms(j);
        ck_assert_int_eq(dq_job_attempt(j), 1);
    }
    dq_jobs_free(held);
    th_sleep_ms(250);
    /* NB more, due before all of them */
    for (int i = 0; i < NB; i++) {
        pp[i] = ids[NA + i];
        ip[i] = ids[NA + i];
        lens[i] = strlen(ids[NA + i]);
    }
    ck_assert_int_eq(dq_push_batch_ex(c, Q, NB, pp, lens, at + NA, ip,
                                      DQ_PUSH_AT, NULL, NULL, NULL), NB);
    ck_stats(c, Q, 0, NA + NB, 0, 0); /* the run-out leases count as due */
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 1000, 60000, &jobs, NULL), NA + NB);
    static char seen[NA + NB];
    memset(seen, 0, sizeof(seen));
    int64_t last[1024];
    for (int p = 0; p < nparts(); p++)
        last[p] = INT64_MIN;
    const char *ai[NA + NB], *at_[NA + NB];
    for (int i = 0; i < NA + NB; i++) {
        const dq_job *j = dq_jobs_at(jobs, (size_t)i);
        const char *id = dq_job_id(j);
        int k = atoi(id + 1);
        ck_assert_msg(k >= 0 && k < NA + NB && strcmp(ids[k], id) == 0 &&
                          !seen[k], "%s delivered (twice?)", id);
        seen[k] = 1;
        int h = -1;
        for (int x = 0; x < NL; x++)
            if (strcmp(hid[x], id) == 0)
                h = x;
        int64_t want_due = h >= 0 ? deadline[h] : at[k];
        ck_assert_msg(dq_job_due_ms(j) == want_due &&
                          dq_job_attempt(j) == (h >= 0 ? 2 : 1),
                      "%s: due %lld attempt %lld, want %lld %d", id,
                      (long long)dq_job_due_ms(j),
                      (long long)dq_job_attempt(j), (long long)want_due,
                      h >= 0 ? 2 : 1);
        int p = part_of(id);
        ck_assert_msg(want_due >= last[p], "%s (due %lld) delivered after a "
                      "job due %lld of its partition", id,
                      (long long)want_due, (long long)last[p]);
        last[p] = want_due;
        ai[i] = id;
        at_[i] = dq_job_token(j);
    }
    /* one nacked back: native (it has a meta now), delivered again */
    ck_assert_int_eq(dq_nack(c, Q, ai[0], at_[0], 0, 0), 0);
    char again[16];
    snprintf(again, sizeof(again), "%s", ai[0]);
    int res[NA + NB];
    ck_assert_int_eq(dq_ack_batch(c, Q, NA + NB - 1, ai + 1, at_ + 1, res),
                     NA + NB - 1);
    dq_jobs_free(jobs);
    /* a push whose mover looks at it first (the farthest due) */
    ck_assert_int_eq(dq_push_at(c, Q, "x", 1, now - HOUR_MS, "mover-food", 0,
                                NULL, 0, NULL), 0);
    ck_assert(!is_compact(r, Q, again));
    jobs = poll_until(c, Q, 10, 60000, 2000);
    ck_assert_int_eq((int)dq_jobs_count(jobs), 2);
    for (int i = 0; i < 2; i++) {
        const dq_job *j = dq_jobs_at(jobs, (size_t)i);
        ck_assert_int_eq(dq_job_attempt(j),
                         strcmp(dq_job_id(j), again) == 0 ? 2 : 1);
        ck_assert_int_eq(dq_ack(c, Q, dq_job_id(j), dq_job_token(j)), 0);
    }
    dq_jobs_free(jobs);
    ck_stats(c, Q, 0, 0, 0, 0);
    assert_no_job_keys(r, Q);
    end_test(c, r);
}
END_TEST

/* ---- uniform buckets ------------------------------------------------------ */

/* Pushes n jobs of payload "u" into q, all due at t, with ids in
 * partition 0 (prefix, then the job's number), kept in ids: one uniform
 * bucket. */
static void push_uniform(dq_client *c, const char *q, char prefix, int n,
                         int64_t t, char (*ids)[32]) {
    const char **ip = calloc((size_t)n, sizeof(*ip));
    const void **pp = calloc((size_t)n, sizeof(*pp));
    size_t *lens = calloc((size_t)n, sizeof(*lens));
    int64_t *at = calloc((size_t)n, sizeof(*at));
    ck_assert(ip && pp && lens && at);
    for (int i = 0; i < n; i++) {
        char base[16];
        snprintf(base, sizeof(base), "%c%03d", prefix, i);
        tu_id_in(ids[i], 32, base, 0);
        ip[i] = ids[i];
        pp[i] = "u";
        lens[i] = 1;
        at[i] = t;
    }
    ck_assert_int_eq(dq_push_batch_ex(c, q, (size_t)n, pp, lens, at, ip,
                                      DQ_PUSH_AT, NULL, NULL, NULL),
                     n);
    free(ip);
    free(pp);
    free(lens);
    free(at);
}

/* A uniform bucket (one due time) past hash-max-listpack-entries (128 in
 * stock Redis, 512 in Debian's build) is a native hash in Redis, which
 * never turns it back.  Once claims or cancels leave it at most C_CAP
 * jobs, jobs of other due times may join it: it must be a listpack again
 * by then (the snapshot checks every bucket of more than one due time).
 * Both ways it shrinks: a poll's claims (part A) and cancels (part B,
 * another due time). */
START_TEST(uniform_shrinks) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    const int64_t now = server_ms(r);
    enum { NU = 600, NCANCEL = NU - C_CAP + 10 };
    static char ids[2][NU][32];
    for (int part = 0; part < 2; part++) {
        /* A: due 5 h ago (claimed by the poll below); B: in 5 h */
        const int64_t t = part == 0 ? now - 5 * HOUR_MS : now + 5 * HOUR_MS;
        push_uniform(c, Q, part ? 'b' : 'a', NU, t, ids[part]);
        snap s;
        snap_take(r, Q, &s, "uniform_shrinks: the uniform bucket");
        ck_assert_msg(s.max_uniform == NU, "largest uniform bucket %lld",
                      s.max_uniform);
        snap_free(&s);
        int left = NU;
        if (part == 0) {
            dq_jobs *jobs = NULL;
            ck_assert_int_eq(poll_n(c, Q, NU - C_CAP + 20, 60000, &jobs,
                                    NULL),
                             NU - C_CAP + 20);
            left -= NU - C_CAP + 20;
            dq_jobs_free(jobs);
        } else {
            for (int i = 0; i < NCANCEL; i++)
                ck_assert_int_eq(dq_cancel(c, Q, ids[part][i], 0),
                                 DQ_CANCELED_PENDING);
            left -= NCANCEL;
        }
        /* a job due 1 ms later joins that bucket (it holds <= C_CAP) */
        char later[1][32];
        const int64_t lat = t + 1;
        push_uniform(c, Q, part ? 'B' : 'A', 1, lat, later);
        snap_take(r, Q, &s, part ? "uniform_shrinks: after cancels"
                                 : "uniform_shrinks: after claims");
        const sj *x = snap_find(&s, later[0]);
        ck_assert_msg(x != NULL && x->due == lat && x->compact,
                      "%s not stored in a bucket (%d jobs left beside it)",
                      later[0], left);
        snap_free(&s);
    }
    end_test(c, r);
}
END_TEST

/* A uniform bucket (200 jobs due at one time) that is the queue's first
 * one, then one push whose mover takes a job due an hour after that time
 * and one due an hour before it (in one partition): each must land in a
 * bucket whose range holds it, so it is found by id, listed and polled in
 * due order. */
START_TEST(uniform_first_bucket) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    const int64_t t = server_ms(r) - 5 * HOUR_MS;
    enum { NU = 200 };
    static char ids[NU][32];
    push_uniform(c, Q, 'u', NU, t, ids);
    snap s;
    snap_take(r, Q, &s, "uniform_first_bucket: the uniform bucket");
    ck_assert_msg(s.compact == NU && s.uniform == 1, "%lld compact, %lld "
                  "uniform buckets", s.compact, s.uniform);
    snap_free(&s);
    /* the mover's cursor expires (as it would within 1.5 s): the next
     * move starts on top */
    for (int i = 0; i < nparts(); i++) {
        char kmv[512];
        pkey(kmv, sizeof(kmv), Q, i, "mv");
        assert_cursor_expires(r, kmv);
        freeReplyObject(th_cmd(r, "UNLINK %s", kmv));
    }
    char above[32], below[32];
    tu_id_in(above, sizeof(above), "above", 0);
    tu_id_in(below, sizeof(below), "below", 0);
    const char *ip2[2] = {above, below};
    const void *pp2[2] = {"a", "b"};
    const size_t l2[2] = {1, 1};
    const int64_t at2[2] = {t + HOUR_MS, t - HOUR_MS};
    ck_assert_int_eq(dq_push_batch_ex(c, Q, 2, pp2, l2, at2, ip2, DQ_PUSH_AT,
                                      NULL, NULL, NULL), 2);
    ck_stats(c, Q, 0, NU + 2, 0, 0);
    for (int i = 0; i < 2; i++) {
        dq_job_info *in = NULL;
        int rc = dq_get(c, Q, ip2[i], &in);
        ck_assert_msg(rc == 1 && dq_job_info_due_ms(in) == at2[i],
                      "dq_get(%s) of a pending job due %lld: %d, due %lld",
                      ip2[i], (long long)at2[i], rc,
                      (long long)dq_job_info_due_ms(in));
        dq_job_info_free(in);
    }
    /* listed in due order: below, the 200, above */
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_list(c, Q, DQ_LIST_SCHEDULED, 0, 1000, &jobs, NULL),
                     NU + 2);
    for (size_t i = 1; i < NU + 2; i++)
        ck_assert_msg(dq_job_due_ms(dq_jobs_at(jobs, i - 1)) <=
                          dq_job_due_ms(dq_jobs_at(jobs, i)),
                      "dq_list [%zu] %s due %lld after %s due %lld", i,
                      dq_job_id(dq_jobs_at(jobs, i)),
                      (long long)dq_job_due_ms(dq_jobs_at(jobs, i)),
                      dq_job_id(dq_jobs_at(jobs, i - 1)),
                      (long long)dq_job_due_ms(dq_jobs_at(jobs, i - 1)));
    dq_jobs_free(jobs);
    snap_take(r, Q, &s, "uniform_first_bucket");
    snap_free(&s);
    /* polled in due order */
    jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 1000, 60000, &jobs, NULL), NU + 2);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, 0)), below);
    ck_assert_str_eq(dq_job_id(dq_jobs_at(jobs, NU + 1)), above);
    for (size_t i = 0; i < NU + 2; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        ck_assert_int_eq(dq_ack(c, Q, dq_job_id(j), dq_job_token(j)), 0);
    }
    dq_jobs_free(jobs);
    ck_stats(c, Q, 0, 0, 0, 0);
    assert_no_job_keys(r, Q);
    end_test(c, r);
}
END_TEST

/* ---- far_future ------------------------------------------------------------ */

/* Jobs due after the year 2286 (15-digit epoch ms, up to DQ_AT_MAX) with
 * payloads of C_PAYLOAD_MAX bytes: either native, or compact with a
 * bucket value of at most 64 bytes (hash-max-listpack-value), so their
 * bucket stays a listpack; and found, listed and cancelled like others. */
START_TEST(far_future) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    char pl[C_PAYLOAD_MAX];
    memset(pl, 'x', sizeof(pl));
    const int64_t when[] = {DQ_AT_MAX, DQ_AT_MAX - 1, DQ_AT_MAX - 2,
                            INT64_C(10000000000000), INT64_C(4102444800000)};
    enum { NW = sizeof(when) / sizeof(when[0]) };
    char ids[NW][8];
    for (int i = 0; i < NW; i++) {
        snprintf(ids[i], sizeof(ids[i]), "f%d", i);
        ck_assert_int_eq(dq_push_at(c, Q, pl, sizeof(pl), when[i], ids[i], 0,
                                    NULL, 0, NULL), 0);
    }
    for (int i = 0; i < NW; i++) {
        dq_job_info *in = NULL;
        ck_assert_int_eq(dq_get(c, Q, ids[i], &in), 1);
        ck_assert_int_eq(dq_job_info_due_ms(in), when[i]);
        dq_job_info_free(in);
    }
    snap s;
    snap_take(r, Q, &s, "far_future");
    ck_assert_int_eq((long long)s.n, NW);
    snap_free(&s);
    ck_assert_int_eq(dq_cancel(c, Q, ids[0], 0), DQ_CANCELED_PENDING);
    ck_stats(c, Q, NW - 1, 0, 0, 0);
    end_test(c, r);
}
END_TEST

/* ---- switch_back --------------------------------------------------------- */

START_TEST(switch_back) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    model m;
    model_init(&m, r, Q, 1);
    /* 1500 jobs, 100 per batch (a fifth of the batches at a tie) */
    enum { NB = 100 };
    int idx[NB];
    int64_t at[NB];
    static char pls[NB][M_PL];
    size_t lens[NB];
    for (int b = 0; b < 15; b++) {
        int tie = b % 5 == 4;
        for (int i = 0; i < NB; i++) {
            idx[i] = m_new_id(&m);
            at[i] = tie ? g_ties[b % 3] : pick_time(&m);
            gen_payload(pls[i], &lens[i]);
        }
        m_push_batch(&m, c, idx, NB, at, pls, lens, 0, NULL);
    }
    snap s;
    m_check_redis(&m, r, &s);
    long long compact0 = s.compact;
    MCK(&m, compact0 > 500, "only %lld of 1500 jobs compact", compact0);
    /* some compact jobs: due now and later */
    int cdue[100], cfut[200], ndue = 0, nfut = 0;
    for (size_t k = 0; k < s.n; k++) {
        if (!s.v[k].compact)
            continue;
        mj *j = m_of(&m, s.v[k].id);
        if (m_is_due(&m, j) && ndue < 100)
            cdue[ndue++] = (int)(j - m.j);
        else if (!m_is_due(&m, j) && nfut < 200)
            cfut[nfut++] = (int)(j - m.j);
    }
    snap_free(&s);
    MCK(&m, ndue >= 50 && nfut >= 200, "compact jobs: %d due, %d later",
        ndue, nfut);

    set_layout(c, Q, DQ_LAYOUT_DEFAULT);
    /* a client that asks for compact pushes: the setting decides */
    dq_client *c2 = open_client_opt(DQ_OPT_LAYOUT, DQ_LAYOUT_COMPACT);

    /* every job seen: by id, in the listing, counted */
    for (int k = 0; k < m.n; k++)
        m_check_get(&m, c, &m.j[k]);
    for (int64_t off = 0; off < m.n; off += 400)
        m_check_list(&m, c, off, 400);
    m_check_list(&m, c, 777, 3);
    m_check_stats(&m, c);
    const int64_t b[4] = {-2 * HOUR_MS, 0, 5 * HOUR_MS, 24 * HOUR_MS};
    m_check_count(&m, c, b, 4);

    /* cancel 50 compact ones (due and later) */
    for (int i = 0; i < 50; i++) {
        mj *j = &m.j[i < 25 ? cdue[i] : cfut[i]];
        ck_assert_int_eq(dq_cancel(c2, Q, j->id, 0), DQ_CANCELED_PENDING);
        j->state = 3;
        ck_assert_int_eq(dq_cancel(c2, Q, j->id, 0), 0);
        m_check_get(&m, c, j);
    }
    /* 300 new jobs through the compact-asking client: all stay native, no
     * job moves */
    for (int bt = 0; bt < 3; bt++) {
        for (int i = 0; i < NB; i++) {
            idx[i] = m_new_id(&m);
            at[i] = pick_time(&m);
            gen_payload(pls[i], &lens[i]);
        }
        m_push_batch(&m, c2, idx, NB, at, pls, lens, 0, NULL);
    }
    m_check_redis(&m, r, &s);
    MCK(&m, s.compact == compact0 - 50, "after 50 cancels and 300 pushes in "
        "the default layout: %lld compact jobs, want %lld", s.compact,
        compact0 - 50);
    snap_free(&s);
    /* replace 100 later compact ones: they come back native */
    for (int i = 0; i < NB; i++) {
        idx[i] = cfut[100 + i];
        at[i] = pick_time(&m);
        gen_payload(pls[i], &lens[i]);
    }
    m_push_batch(&m, c2, idx, NB, at, pls, lens, 1, NULL);
    m_check_redis(&m, r, &s);
    MCK(&m, s.compact == compact0 - 150, "after replacing 100 compact jobs: "
        "%lld compact, want %lld", s.compact, compact0 - 150);
    for (int i = 0; i < NB; i++)
        MCK(&m, !snap_find(&s, m.j[cfut[100 + i]].id)->compact,
            "replaced %s is still compact", m.j[cfut[100 + i]].id);
    snap_free(&s);
    m_check_stats(&m, c);
    m_check_list(&m, c, 0, 1000);
    m_check_list(&m, c, 1000, 1000);

    /* poll everything due (the compact ones among them), 50 at a time */
    for (int polls = 0; polls < 200; polls++) {
        m.op = polls;
        dq_jobs *jobs = m_poll(&m, c, 50);
        size_t k = dq_jobs_count(jobs);
        m_ack(&m, c, jobs);
        dq_jobs_free(jobs);
        if (k == 0)
            break;
    }
    m_check_redis(&m, r, &s);
    long long compact_later = s.compact;
    snap_free(&s);
    for (int k = 0; k < m.n; k++)
        MCK(&m, m.j[k].state != 1 || !m_is_due(&m, &m.j[k]),
            "%s due and not delivered", m.j[k].id);
    MCK(&m, compact_later > 0, "no compact job left to drain");
    m_check_stats(&m, c);
    /* the later compact ones drain too: pushed again due now (default
     * layout: they become native), then polled */
    m_drain(&m, c);
    m_check_redis(&m, r, &s);
    MCK(&m, s.n == 0 && s.compact == 0, "%zu jobs left", s.n);
    snap_free(&s);
    m_check_stats(&m, c);
    assert_no_job_keys(r, Q);
    dq_close(c2);
    free(m.j);
    end_test(c, r);
}
END_TEST

/* ---- big_batch_listpacks --------------------------------------------------- */

/* One batch of 600 jobs per partition, at distinct later times, into an
 * empty compact queue: its mover takes them all into buckets of at most
 * C_CAP jobs, every one of them a listpack (a hash written past
 * hash-max-listpack-entries, 512, becomes a hashtable for good, and a
 * hashtable bucket costs about what the default layout does). */
START_TEST(big_batch_listpacks) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    const size_t n = 600 * (size_t)nparts();
    char (*ids)[16] = malloc(n * sizeof(*ids));
    const char **ip = malloc(n * sizeof(*ip));
    const void **pp = malloc(n * sizeof(*pp));
    size_t *lens = malloc(n * sizeof(*lens));
    int64_t *at = malloc(n * sizeof(*at));
    ck_assert(ids && ip && pp && lens && at);
    const int64_t now = server_ms(r);
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], sizeof(ids[i]), "g%u", (unsigned)i);
        ip[i] = ids[i];
        pp[i] = "payload";
        lens[i] = 7;
        at[i] = now + 2 * HOUR_MS + (int64_t)i * 1000;
    }
    int rc = dq_push_batch_ex(c, Q, n, pp, lens, at, ip, DQ_PUSH_AT, NULL,
                              NULL, NULL);
    ck_assert_msg(rc == (int)n, "dq_push_batch_ex: %d %s", rc, dq_errmsg(c));
    snap s;
    snap_take(r, Q, &s, "big_batch_listpacks");
    ck_assert_msg(s.compact == (long long)n, "%lld of %zu jobs compact",
                  s.compact, n);
    for (size_t i = 0; i < n; i++) {
        const sj *x = snap_find(&s, ids[i]);
        ck_assert_msg(x && x->due == at[i], "%s stored wrong", ids[i]);
    }
    snap_free(&s);
    ck_stats(c, Q, (int)n, 0, 0, 0);
    free(ids);
    free(ip);
    free(pp);
    free(lens);
    free(at);
    end_test(c, r);
}
END_TEST

/* ---- many_buckets ---------------------------------------------------------- */

/* Deletes every key of a queue (a big one the later tests need not scan
 * past). */
static void drop_queue(redisContext *r, const char *q) {
    qkey *keys = NULL;
    size_t n = queue_keys(r, q, &keys);
    for (size_t i = 0; i < n; i++)
        redisAppendCommand(r, "UNLINK %s", keys[i].name);
    for (size_t i = 0; i < n; i++) {
        redisReply *g = NULL;
        ck_assert_int_eq(redisGetReply(r, (void **)&g), REDIS_OK);
        freeReplyObject(g);
    }
    qkeys_free(keys, n);
}

/* More than 256 buckets in each partition (the pages of the scripts that
 * walk cb: count_due reads 256 at a time, a poll 8): 19200 jobs per
 * partition, pushed in batches due ever earlier, so each push's mover
 * takes its own batch and buckets stay at about 64 jobs; the last 3000
 * per partition due now.  Counts, stats, deep listings and polls of 1000
 * (over 16 buckets each) against the model. */
START_TEST(many_buckets) {
    redisContext *r;
    dq_client *c = layout_client(Q, &r);
    const int np = nparts(), per = 19200, past = 3000;
    const int n = per * np, npast = past * np;
    const int64_t step = 10000;
    model m = {0};
    m.cap = n;
    m.r = r;
    m.q = Q;
    m.seed = test_seed();
    m.j = calloc((size_t)n, sizeof(*m.j));
    ck_assert_ptr_nonnull(m.j);
    m.t0 = server_ms(r);
    const int64_t top = m.t0 + 2 * HOUR_MS + (int64_t)(n - npast) * step;
    const size_t batch = 400 * (size_t)np;
    int *idx = malloc(batch * sizeof(*idx));
    int64_t *at = malloc(batch * sizeof(*at));
    char (*pls)[M_PL] = malloc(batch * sizeof(*pls));
    size_t *lens = malloc(batch * sizeof(*lens));
    ck_assert(idx && at && pls && lens);
    int64_t start = th_mono_ms();
    for (int lo = 0; lo < n; lo += (int)batch) {
        size_t k = (size_t)(n - lo) < batch ? (size_t)(n - lo) : batch;
        for (size_t i = 0; i < k; i++) {
            int g = lo + (int)i;
            snprintf(m.j[g].id, sizeof(m.j[g].id), "b%d", g);
            m.n = g + 1;
            idx[i] = g;
            at[i] = top - (int64_t)g * step - (g >= n - npast ? 4 * HOUR_MS : 0);
            lens[i] = (size_t)snprintf(pls[i], M_PL, "p%d", g);
        }
        m_push_batch(&m, c, idx, k, at, pls, lens, 0, NULL);
    }
    int64_t pushed_ms = th_mono_ms() - start;
    snap s;
    m_check_redis(&m, r, &s);
    for (int i = 0; i < np; i++)
        MCK(&m, s.part_buckets[i] > 256, "partition %d has %lld buckets", i,
            s.part_buckets[i]);
    MCK(&m, s.compact >= n - n / 20, "%lld of %d jobs compact", s.compact,
        n);
    fprintf(stderr, "many_buckets: %d jobs (%lld ms), %lld compact in %lld "
            "buckets, %lld native\n", n, (long long)pushed_ms, s.compact,
            s.buckets, s.native);
    snap_free(&s);
    m_check_stats(&m, c);
    /* windows ending 5 s after a job (5 s before the next) */
    const int at_k[] = {n - 1, n - npast + 7, n - npast - 1, 3};
    int64_t b[8], b2[2], now = server_ms(r);
    int nb = 0;
    for (size_t i = 0; i < sizeof(at_k) / sizeof(at_k[0]); i++)
        b[nb++] = m.j[at_k[i]].due + 5000 - now;
    b2[0] = m.j[n / 2].due + 5000 - now;
    b2[1] = m.j[700].due + 5000 - now;
    m_check_count(&m, c, b, nb); /* a window over ~290 buckets a partition */
    m_check_count(&m, c, b2, 2);
    const int64_t zero = 0;
    m_check_count(&m, c, &zero, 1);
    /* deep pages */
    m_check_list(&m, c, 0, 1000);
    m_check_list(&m, c, n / 2, 500);
    m_check_list(&m, c, n - npast - 300, 1000);
    m_check_list(&m, c, n - 700, 1000);
    /* everything due, 1000 at a time */
    int got = 0;
    for (int polls = 0; polls < 2 * np + 20; polls++) {
        m.op = polls;
        dq_jobs *jobs = m_poll(&m, c, 1000);
        int k = (int)dq_jobs_count(jobs);
        m_ack(&m, c, jobs);
        dq_jobs_free(jobs);
        got += k;
        if (k == 0)
            break;
    }
    MCK(&m, got == npast, "%d of %d due jobs delivered", got, npast);
    m_check_redis(&m, r, NULL);
    m_check_stats(&m, c);
    m_check_count(&m, c, b, nb);
    drop_queue(r, Q);
    free(idx);
    free(at);
    free(pls);
    free(lens);
    free(m.j);
    end_test(c, r);
}
END_TEST

TEST_SUITE("compact", TU_SRV_UNIX,
    {"compact_is_compact", compact_is_compact, 60, NULL},
    {"big_batch_listpacks", big_batch_listpacks, 60, NULL},
    {"model_random", model_random, 120, NULL},
    {"model_idle", model_idle, 120, NULL},
    {"idle_mover", idle_mover, 60, NULL},
    {"uniform_bucket", uniform_bucket, 60, NULL},
    {"lease_merge", lease_merge, 60, NULL},
    {"uniform_first_bucket", uniform_first_bucket, 60, NULL},
    {"uniform_shrinks", uniform_shrinks, 60, NULL},
    {"far_future", far_future, 60, NULL},
    {"switch_back", switch_back, 60, NULL},
    {"many_buckets", many_buckets, 120, NULL})
