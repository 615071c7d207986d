/*
 * tests/fault/test_isolation.c - no queue name, id or namespace, however
 * crafted, reads or writes another queue's keys.
 *
 * Three victim queues ("a", "victim" and "v{i}c:t%m") hold pending,
 * in-flight and dead jobs.  Then every operation of the API runs on ~40
 * hostile queue names (braces, colons, '%', glob characters, bytes
 * 0x01..0xff, 200-byte names, the victims' own key names and encoded
 * forms), with the victims' job ids and lease tokens, under several
 * namespaces.  Afterwards:
 *   - every victim key is byte-for-byte what it was (DUMP);
 *   - every key on the server is a victim key or starts with
 *     "<ns>:{<hostile name percent-encoded>}:" for a name that was used;
 *   - nothing was published on the victims' wake-up channels.
 */
#include "fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXNAMES 64
#define MAXKEYS 4096

static char *names[MAXNAMES];
static int nnames;

/* Appends a name to the list of hostile names. */
static void add_name(const char *s) {
    ck_assert_int_lt(nnames, MAXNAMES);
    names[nnames] = strdup(s);
    ck_assert_ptr_nonnull(names[nnames]);
    nnames++;
}

/* Adds a name made of the bytes from..to (inclusive). */
static void add_bytes(int from, int to) {
    char buf[DQ_QUEUE_MAX + 1];
    int n = 0;
    for (int b = from; b <= to && n < DQ_QUEUE_MAX; b++)
        buf[n++] = (char)b;
    buf[n] = '\0';
    add_name(buf);
}

/* Adds a name of n times ch. */
static void add_repeat(char ch, int n) {
    char buf[DQ_QUEUE_MAX + 1];
    memset(buf, ch, (size_t)n);
    buf[n] = '\0';
    add_name(buf);
}

/* Builds the list of hostile names. */
static void make_names(void) {
    static const char *const fixed[] = {
        "a}:jobs", "a}:due", "a}", "{a}", "a:", ":a", "a%", "A", "a ",
        "victim}:jobs", "{victim}", "victim}", "victim:due", "victim%7D",
        "}", "{", ":", "%", "%25", "%7B", "%7D", "%7Ba%7D", "*", "?",
        "[a]", "\\", " ", "\n", "\r\n", "a\x7f", "\xff", "dq:{a}:due",
        "{a}:due", "dq:{victim}:jobs", "v%7Bi%7Dc%3At%25m",
        "v{i}c:t%m}", "v{i}c:t%m:due", "\xc3\xbc\xe2\x82\xac"};
    nnames = 0;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        add_name(fixed[i]);
    add_bytes(0x01, 0xc8);  /* 200 bytes */
    add_bytes(0x38, 0xff);  /* 200 bytes */
    add_repeat('}', DQ_QUEUE_MAX);
    add_repeat('%', DQ_QUEUE_MAX);
    add_repeat('{', DQ_QUEUE_MAX);
}

/* The key prefix a queue must live under: "<ns>:{<encoded>}:" (the
 * key-layout oracle queue_key with an empty suffix). */
static void prefix_of(const char *ns, const char *q, char *out, size_t size) {
    queue_key(ns, q, "", out, size);
    ck_assert_int_lt(strlen(out) + 1, size);
}

/* ---- snapshot of every key ---- */

typedef struct keyval {
    char *key;
    size_t klen;
    char *dump;
    size_t dlen;
    long long pttl; /* -1: no expiry */
} keyval;

/* Reads every key, its DUMP and its time to live into kv (SCAN); returns
 * the count.  A key that expires between the SCAN and the DUMP is left
 * out. */
static size_t snapshot(redisContext *ctx, keyval *kv) {
    size_t n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = rcmd_try(ctx, "SCAN %s COUNT 1000", cursor);
        ck_assert_msg(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2,
                      "SCAN");
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            redisReply *k = r->element[1]->element[i];
            ck_assert_int_lt(n, MAXKEYS);
            redisReply *d = rcmd_try(ctx, "DUMP %b", k->str, (size_t)k->len);
            ck_assert_msg(d && (d->type == REDIS_REPLY_STRING ||
                                d->type == REDIS_REPLY_NIL), "DUMP");
            if (d->type == REDIS_REPLY_NIL) {
                freeReplyObject(d);
                continue;
            }
            redisReply *t = rcmd_try(ctx, "PTTL %b", k->str, (size_t)k->len);
            ck_assert_msg(t && t->type == REDIS_REPLY_INTEGER, "PTTL");
            kv[n].pttl = t->integer;
            freeReplyObject(t);
            kv[n].klen = k->len;
            kv[n].key = malloc(k->len + 1);
            memcpy(kv[n].key, k->str, k->len);
            kv[n].key[k->len] = '\0';
            kv[n].dlen = d->len;
            kv[n].dump = malloc(d->len);
            memcpy(kv[n].dump, d->str, d->len);
            freeReplyObject(d);
            n++;
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return n;
}

/* Frees what snapshot read. */
static void free_snapshot(keyval *kv, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].dump);
    }
}

/* ---- victims ---- */

static const char *const victims[] = {"a", "victim", "v{i}c:t%m"};
#define NVICTIMS 3
static char vtok[NVICTIMS][3][DQ_TOKEN_BUF]; /* tokens of v4, v5, v6 */

static void make_victim(dq_client *c, int v) {
    const char *q = victims[v];
    for (int i = 1; i <= 3; i++) {
        char id[8];
        snprintf(id, sizeof(id), "v%d", i);
        ck_assert_int_eq(dq_push(c, q, "victim-data", 11, 3600000, id, 0,
                                 NULL, 0, NULL), 0);
    }
    for (int i = 4; i <= 6; i++) {
        char id[8];
        snprintf(id, sizeof(id), "v%d", i);
        ck_assert_int_eq(dq_push(c, q, "victim-due", 10, 0, id, 0, NULL, 0,
                                 NULL), 0);
    }
    dq_jobs *jobs = NULL;
    int64_t end = th_mono_ms() + 5000;
    while (dq_jobs_count(jobs) < 3) {
        dq_jobs_free(jobs);
        ck_assert_int_ge(dq_poll(c, q, 3, 3600000, &jobs, NULL), 0);
        ck_assert_int_eq(dq_jobs_count(jobs), 3);
        ck_assert(th_mono_ms() < end);
    }
    for (int i = 0; i < 3; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        int k = dq_job_id(j)[1] - '4';
        ck_assert(k >= 0 && k < 3);
        snprintf(vtok[v][k], DQ_TOKEN_BUF, "%s", dq_job_token(j));
    }
    ck_assert_int_eq(dq_nack(c, q, "v6", vtok[v][2], 0, DQ_NACK_DEAD), 1);
    dq_jobs_free(jobs);
}

/* ---- the hostile operations ---- */

static long calls;

/* Every operation on queue q with the victims' ids and tokens.  Results
 * are not checked (most must fail cleanly: ENOTFOUND, ESTALE), only that
 * no call crosses into another queue; codes must be known ones. */
static void hostile_ops(dq_client *c, const char *q) {
    static const char *const hids[] = {"v1", "v4", "v6", "*", "dq:{a}:jobs",
                                       "\xff\x01", "}"};
    char big_id[DQ_ID_MAX + 1];
    memset(big_id, '}', DQ_ID_MAX);
    big_id[DQ_ID_MAX] = '\0';
    int rc;
#define CALL(x)                                                        \
    do {                                                               \
        rc = (x);                                                      \
        calls++;                                                       \
        ck_assert_msg(rc >= DQ_ERRNO_MIN, "%s: code %d", #x, rc);      \
        ck_assert_msg(rc != DQ_EPROTO && rc != DQ_EIO,                 \
                      "%s: %s: %s", #x, dq_errname(rc), dq_errmsg(c)); \
    } while (0)
    for (size_t i = 0; i < sizeof(hids) / sizeof(hids[0]); i++) {
        CALL(dq_push(c, q, "hostile", 7, 0, hids[i], DQ_PUSH_KEEP, NULL, 0,
                     NULL));
        CALL(dq_push(c, q, "hostile2", 8, 0, hids[i], DQ_PUSH_REPLACE, NULL,
                     0, NULL));
    }
    CALL(dq_push(c, q, "far", 3, 3600000, big_id, 0, NULL, 0, NULL));
    CALL(dq_push(c, q, "gen", 3, 0, NULL, 0, NULL, 0, NULL));
    const void *pl[3] = {"x", "y", "z"};
    size_t lens[3] = {1, 1, 1};
    const char *bids[3] = {"v2", "v5", "v3"};
    CALL(dq_push_batch(c, q, 3, pl, lens, NULL, bids, DQ_PUSH_REPLACE, NULL,
                       NULL));
    /* The victims' tokens against the hostile queue. */
    for (int v = 0; v < NVICTIMS; v++) {
        for (int k = 0; k < 3; k++) {
            char id[8];
            snprintf(id, sizeof(id), "v%d", k + 4);
            CALL(dq_ack(c, q, id, vtok[v][k]));
            CALL(dq_extend(c, q, id, vtok[v][k], 1000, NULL));
            CALL(dq_nack(c, q, id, vtok[v][k], 0, DQ_NACK_DEAD));
        }
    }
    dq_jobs *jobs = NULL;
    CALL(dq_poll(c, q, 5, 60000, &jobs, NULL));
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        size_t len;
        const char *p = dq_job_payload(j, &len);
        /* Never a victim's payload. */
        ck_assert_msg(strncmp(p, "victim", 6) != 0,
                      "queue got a victim's job %s", dq_job_id(j));
        if (i % 3 == 0)
            CALL(dq_ack(c, q, dq_job_id(j), dq_job_token(j)));
        else if (i % 3 == 1)
            CALL(dq_nack(c, q, dq_job_id(j), dq_job_token(j), 0,
                         DQ_NACK_DEAD));
        else
            CALL(dq_extend(c, q, dq_job_id(j), dq_job_token(j), 5000, NULL));
    }
    dq_jobs_free(jobs);
    jobs = NULL;
    CALL(dq_poll_wait(c, q, 2, 60000, 0, &jobs));
    dq_jobs_free(jobs);
    jobs = NULL;
    for (int k = 1; k <= 6; k++) {
        char id[8];
        snprintf(id, sizeof(id), "v%d", k);
        CALL(dq_cancel(c, q, id, 0));
        CALL(dq_cancel(c, q, id, DQ_CANCEL_INFLIGHT));
        CALL(dq_dead_requeue(c, q, id, 0));
        CALL(dq_dead_purge(c, q, id));
    }
    CALL(dq_dead_list(c, q, 0, 100, &jobs));
    dq_jobs_free(jobs);
    CALL(dq_dead_requeue(c, q, NULL, 0));
    CALL(dq_dead_purge(c, q, NULL));
    int64_t s, d, f, x, nd;
    CALL(dq_stats(c, q, &s, &d, &f, &x, &nd));
#undef CALL
}

START_TEST(hostile_names) {
    th_redis r;
    ft_start(&r, 0, NULL);
    make_names();
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    dq_client *vc = open_uri(r.uri, NULL);
    for (int v = 0; v < NVICTIMS; v++)
        make_victim(vc, v);
    static keyval before[MAXKEYS], after[MAXKEYS];
    size_t nbefore = snapshot(admin, before);
    ck_assert_int_ge(nbefore, NVICTIMS * 4);

    /* Namespaces that could be mistaken for a victim's key are refused. */
    static const char *const bad_ns[] = {"dq:{a}", "dq}", "{dq", "dq:{",
                                         "dq a", "", "dq%7B"};
    dq_options *o = dq_options_new();
    for (size_t i = 0; i < sizeof(bad_ns) / sizeof(bad_ns[0]); i++)
        ck_assert_msg(dq_options_set_str(o, DQ_OPT_NAMESPACE, bad_ns[i]) ==
                          DQ_EINVAL,
                      "namespace \"%s\" accepted", bad_ns[i]);

    /* Watch the victims' wake-up channels. */
    redisContext *sub = th_redis_connect(&r);
    ck_assert_ptr_nonnull(sub);
    char chan[NVICTIMS][160];
    for (int v = 0; v < NVICTIMS; v++) {
        char pre[128];
        prefix_of("dq", victims[v], pre, sizeof(pre));
        snprintf(chan[v], sizeof(chan[v]), "%swake:0", pre);
        redisReply *x = rcmd_try(sub, "SUBSCRIBE %s", chan[v]);
        ck_assert_ptr_nonnull(x);
        freeReplyObject(x);
    }

    static const char *const nss[] = {"dq", "dq:", "dq:x", "d", "DQ",
                                      "dq.a-b_c"};
#define NNS (sizeof(nss) / sizeof(nss[0]))
    dq_client *hc[NNS];
    for (size_t i = 0; i < NNS; i++) {
        ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, nss[i]), 0);
        hc[i] = open_uri(r.uri, o);
    }
    /* Every name under "dq" (the victims' namespace), the first ten under
     * the others. */
    for (int i = 0; i < nnames; i++)
        for (size_t k = 0; k < NNS; k++)
            if (k == 0 || i < 10)
                hostile_ops(hc[k], names[i]);

    /* 1. The victims' keys are untouched, byte for byte. */
    size_t nafter = snapshot(admin, after);
    for (size_t i = 0; i < nbefore; i++) {
        size_t j;
        for (j = 0; j < nafter; j++)
            if (after[j].klen == before[i].klen &&
                memcmp(after[j].key, before[i].key, before[i].klen) == 0)
                break;
        /* a key with a time to live may expire on its own (the compact
         * layout's mover cursor lives 1.5 s): gone is not changed */
        if (j == nafter && before[i].pttl >= 0)
            continue;
        ck_assert_msg(j < nafter, "victim key %s is gone", before[i].key);
        ck_assert_msg(after[j].dlen == before[i].dlen &&
                          memcmp(after[j].dump, before[i].dump,
                                 before[i].dlen) == 0,
                      "victim key %s changed", before[i].key);
    }
    /* 2. Every other key lives under the prefix of a hostile queue. */
    static char pre[4 * DQ_QUEUE_MAX + 80];
    long hostile_keys = 0;
    for (size_t j = 0; j < nafter; j++) {
        int known = 0;
        for (size_t i = 0; i < nbefore && !known; i++)
            known = after[j].klen == before[i].klen &&
                    memcmp(after[j].key, before[i].key, after[j].klen) == 0;
        if (known)
            continue;
        for (int v = 0; v < NVICTIMS && !known; v++) {
            prefix_of("dq", victims[v], pre, sizeof(pre));
            ck_assert_msg(strncmp(after[j].key, pre, strlen(pre)) != 0,
                          "new key %s in victim %s's space", after[j].key,
                          victims[v]);
        }
        for (int i = 0; i < nnames && !known; i++) {
            for (size_t k = 0; k < NNS && !known; k++) {
                if (!(k == 0 || i < 10))
                    continue;
                prefix_of(nss[k], names[i], pre, sizeof(pre));
                known = after[j].klen > strlen(pre) &&
                        memcmp(after[j].key, pre, strlen(pre)) == 0;
            }
        }
        ck_assert_msg(known, "key %s belongs to no queue used", after[j].key);
        hostile_keys++;
    }
    /* 3. Nothing published on the victims' channels. */
    struct timeval tv = {0, 300000};
    redisSetTimeout(sub, tv);
    void *msg = NULL;
    int got = redisGetReply(sub, &msg);
    if (got == REDIS_OK && msg != NULL) {
        redisReply *m = msg;
        ck_abort_msg("a victim's wake-up channel got a message (%s)",
                     m->type == REDIS_REPLY_ARRAY && m->elements > 1
                         ? m->element[1]->str
                         : "?");
    }
    printf("figures: isolation: pushed=0 acked=0 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=%ld (hostile calls) hostile_names=%d "
           "namespaces=%zu victim_keys_unchanged=%zu hostile_keys=%ld\n",
           calls, nnames, NNS, nbefore, hostile_keys);
    fflush(stdout);
    redisFree(sub);
    for (size_t i = 0; i < NNS; i++)
        dq_close(hc[i]);
    dq_options_free(o);
    free_snapshot(before, nbefore);
    free_snapshot(after, nafter);
    for (int i = 0; i < nnames; i++)
        free(names[i]);
    dq_close(vc);
    redisFree(admin);
    th_redis_stop(&r);
#undef NNS
}
END_TEST

TEST_SUITE("fault_isolation", TU_SRV_NONE,
    {"hostile_names", hostile_names, 120, NULL})
