/*
 * tests/fuzz/fuzz_reply.c - fuzz target: decoding whatever Redis (or
 * something pretending to be Redis) answers.
 *
 * The input is fed to a hiredis reply parser (redisReader: the same code
 * that parses real replies, in 0.14 and 1.x); every complete reply it yields
 * goes to every decoder of lib/ops.h (poll, ack, int, stats, lists, get, and
 * push chunks of a plan of 1 and of n jobs) and to the cluster slot map
 * loader (route.h).  Decoders must reject what
 * they do not expect with DQ_EPROTO (never crash, leak or misread), and what
 * they accept must be coherent (counts, NUL-terminated ids and payloads).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "conn.h"
#include "ops.h"
#include "route.h"

#define CHECK(cond)     \
    do {                \
        if (!(cond))    \
            abort();    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int rc, const dq__err *err) {
    CHECK(rc < 0 && rc >= DQ_ERRNO_MIN);
    CHECK(err->code == rc && err->msg[0] != '\0');
}

/* A decoded list must be exactly rc jobs with readable fields. */
static void check_jobs(const dq_jobs *jobs, int rc, int with_token) {
    CHECK(rc >= 0);
    CHECK(dq_jobs_count(jobs) == (size_t)rc);
    CHECK((rc == 0) == (jobs == NULL));
    for (size_t i = 0; i < (size_t)rc; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        CHECK(j != NULL);
        const char *id = dq_job_id(j);
        size_t len = 0;
        const char *pl = dq_job_payload(j, &len);
        CHECK(id != NULL && pl != NULL);
        CHECK(pl[len] == '\0');
        (void)strlen(id);
        const char *tok = dq_job_token(j);
        CHECK(tok != NULL && strlen(tok) < DQ_TOKEN_BUF);
        if (!with_token)
            CHECK(tok[0] == '\0');
        dq_job *copy = dq_job_dup(j);
        CHECK(copy != NULL);
        size_t len2 = 0;
        CHECK(memcmp(dq_job_payload(copy, &len2), pl, len) == 0);
        CHECK(len2 == len && strcmp(dq_job_id(copy), id) == 0);
        dq_job_free(copy);
    }
    CHECK(dq_jobs_at(jobs, (size_t)rc) == NULL);
}

/* A job's failure reason: none (NULL, length 0, time 0), or bytes with a
 * NUL after them, copied by dq_job_dup. */
static void check_reason(const dq_job *j) {
    size_t len = 0, len2 = 0;
    const char *e = dq_job_last_error(j, &len);
    CHECK(e != NULL || (len == 0 && dq_job_failed_ms(j) == 0));
    CHECK(e == NULL || e[len] == '\0');
    dq_job *copy = dq_job_dup(j);
    CHECK(copy != NULL);
    const char *e2 = dq_job_last_error(copy, &len2);
    CHECK((e == NULL) == (e2 == NULL) && len == len2);
    CHECK(e == NULL || memcmp(e, e2, len) == 0);
    CHECK(dq_job_failed_ms(copy) == dq_job_failed_ms(j));
    dq_job_free(copy);
}

/* A listed or polled job's group (NULL, or 1..DQ_GROUP_MAX bytes) and
 * priority, kept by a copy. */
static void check_group(const dq_job *j) {
    const char *g = dq_job_group(j);
    CHECK(g == NULL || (strlen(g) >= 1 && strlen(g) <= DQ_GROUP_MAX));
    CHECK(dq_job_priority(j) >= 0 && dq_job_priority(j) <= DQ_PRIORITY_MAX);
    dq_job *copy = dq_job_dup(j);
    CHECK(copy != NULL);
    const char *g2 = dq_job_group(copy);
    CHECK((g == NULL) == (g2 == NULL) && (g == NULL || strcmp(g, g2) == 0));
    CHECK(dq_job_priority(copy) == dq_job_priority(j));
    dq_job_free(copy);
}

/* Oracle, independent of the library: 1 if element i of array r is a
 * number a decoder may accept: an integer reply, or a string that strtod
 * reads whole as a finite value inside int64_t.  Anything else (1e300,
 * inf, nan) has no int64_t value: converting it would be undefined. */
static int num_ok(const dq__reply *dr, size_t i) {
    const redisReply *r = (const redisReply *)dr;
    if (r->type != REDIS_REPLY_ARRAY || i >= r->elements)
        return 0;
    const redisReply *e = r->element[i];
    if (e->type == REDIS_REPLY_INTEGER)
        return 1;
    if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len >= 32)
        return 0;
    char buf[32], *end;
    memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    double d = strtod(buf, &end);
    return *end == '\0' && d >= -9223372036854775808.0 &&
           d < 9223372036854775808.0;
}

/* The cluster slot map from a CLUSTER SHARDS / SLOTS reply: refused
 * with a code and message, or every known slot names a node. */
static void decode_slotmap(const dq__reply *r) {
    static dq__slotmap m;
    for (int shards = 0; shards < 2; shards++) {
        dq__slotmap_init(&m, shards);
        dq__err err;
        dq__err_clear(&err);
        int rc = dq__slotmap_load(&m, r, shards, "asked", &err);
        if (rc < 0)
            check_err(rc, &err);
        for (int i = 0; i < DQ_SLOTS; i++)
            CHECK(m.owner[i] >= -1 && m.owner[i] < m.nnodes);
        for (int i = 0; i < m.nnodes; i++)
            CHECK(m.nodes[i].port > 0 && m.nodes[i].port <= 65535);
        dq__slotmap_clear(&m);
    }
}

static void decode_all(const dq__reply *r, dq__core *core) {
    dq__err err;
    decode_slotmap(r);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    dq__err_clear(&err);
    int rc = dq__decode_poll(r, &jobs, &next, &err);
    if (rc < 0) {
        check_err(rc, &err);
        CHECK(jobs == NULL);
    } else {
        check_jobs(jobs, rc, 1);
        /* now, next, lease, then per job id, payload, attempt, due,
         * token */
        CHECK(num_ok(r, 0) && num_ok(r, 1) && num_ok(r, 2));
        for (int i = 0; i < rc; i++) {
            CHECK(num_ok(r, 5 + 5 * (size_t)i) &&
                  num_ok(r, 6 + 5 * (size_t)i));
            check_group(dq_jobs_at(jobs, (size_t)i));
        }
    }
    dq_jobs_free(jobs);

    for (int which = DQ_LIST_SCHEDULED; which <= DQ_LIST_DEAD; which++) {
        int64_t now = 0;
        jobs = NULL;
        dq__err_clear(&err);
        rc = dq__decode_list(r, which, &jobs, &now, &err);
        if (rc < 0) {
            check_err(rc, &err);
            CHECK(jobs == NULL);
        } else {
            check_jobs(jobs, rc, 0);
            for (int i = 0; i < rc; i++) {
                CHECK(num_ok(r, 3 + 5 * (size_t)i) &&
                      num_ok(r, 4 + 5 * (size_t)i));
                check_reason(dq_jobs_at(jobs, (size_t)i));
                check_group(dq_jobs_at(jobs, (size_t)i));
            }
        }
        dq_jobs_free(jobs);
    }

    dq_job_info *info = NULL;
    dq__err_clear(&err);
    rc = dq__decode_get(r, "id", &info, &err);
    if (rc < 0) {
        check_err(rc, &err);
    } else {
        CHECK(rc <= 1 && (rc == 1) == (info != NULL));
        CHECK(num_ok(r, 0));
        if (rc == 1) {
            int st = dq_job_info_state(info);
            CHECK(st >= DQ_JOB_SCHEDULED && st <= DQ_JOB_DEAD);
            CHECK(strcmp(dq_job_info_id(info), "id") == 0);
            size_t len = 0;
            const char *pl = dq_job_info_payload(info, &len);
            CHECK(pl != NULL && pl[len] == '\0');
            CHECK(num_ok(r, 2) && num_ok(r, 3));
            dq_job_info *copy = dq_job_info_dup(info);
            CHECK(copy != NULL);
            size_t l1 = 0, l2 = 0;
            const char *e1 = dq_job_info_last_error(info, &l1);
            const char *e2 = dq_job_info_last_error(copy, &l2);
            CHECK((e1 == NULL) == (e2 == NULL) && l1 == l2);
            CHECK(e1 == NULL || (memcmp(e1, e2, l1) == 0 && e2[l2] == '\0'));
            dq_job_info_free(copy);
        }
    }
    dq_job_info_free(info);

    size_t n = dq__reply_type(r) == DQ_R_ARRAY ? dq__reply_len(r) : 1;
    if (n == 0)
        n = 1;
    if (n > 2000)
        n = 2000;
    int *results = malloc(n * sizeof(int));
    CHECK(results != NULL);
    dq__err_clear(&err);
    rc = dq__decode_ack(r, n, results, &err);
    if (rc < 0)
        check_err(rc, &err);
    else
        CHECK((size_t)rc <= n);
    dq__err_clear(&err);
    rc = dq__decode_ack(r, 1, NULL, &err);
    if (rc < 0)
        check_err(rc, &err);
    dq__err_clear(&err);
    rc = dq__decode_resched(r, n, results, &err);
    if (rc < 0)
        check_err(rc, &err);
    else
        CHECK((size_t)rc <= n);
    for (size_t i = 0; rc >= 0 && i < n; i++)
        CHECK(results[i] >= DQ_RESCHED_UNKNOWN &&
              results[i] <= DQ_RESCHED_REVIVED);
    free(results);

    long long v;
    dq__err_clear(&err);
    rc = dq__decode_int(r, &v, &err);
    if (rc < 0)
        check_err(rc, &err);
    int64_t st[5];
    dq__err_clear(&err);
    rc = dq__decode_stats(r, st, &err);
    if (rc < 0)
        check_err(rc, &err);
    else
        for (size_t i = 0; i < 5; i++)
            CHECK(num_ok(r, i));

    /* Push plans of 1 job and of n jobs (chunks of DQ_PUSH_CHUNK): every
     * chunk decodes the same reply. */
    size_t sizes[2] = {1, n};
    for (int k = 0; k < 2; k++) {
        size_t m = sizes[k];
        const void **pl = calloc(m, sizeof(*pl));
        size_t *lens = calloc(m, sizeof(*lens));
        CHECK(pl != NULL && lens != NULL);
        dq__push_plan p;
        dq__err_clear(&err);
        rc = dq__push_plan_make(&p, core, "fuzz", m, pl, lens, NULL, 0, NULL,
                               DQ_PUSH_KEEP, NULL, &err);
        CHECK(rc == DQ_OK);
        for (size_t i = 0; i < p.nchunks; i++) {
            dq__err_clear(&err);
            rc = dq__push_plan_decode(&p, i, r, &err);
            if (rc < 0)
                check_err(rc, &err);
        }
        int count = dq__push_plan_count(&p);
        CHECK(count >= 0 && (size_t)count <= m);
        dq__push_plan_free(&p);
        free(pl);
        free(lens);
    }
}

/* 1 if some aggregate or bulk header announces more than 65536 elements or
 * bytes: hiredis (0.14 has no limit) would allocate that up front, which
 * is hiredis's business, not ours, and would only make the fuzzer run out
 * of memory.  Any type byte counts, not only one at the start of a line:
 * hiredis skips the two bytes after a bulk's content without checking that
 * they are "\r\n", so a header can follow any byte. */
static int huge_header(const uint8_t *d, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (d[i] != '\0' && strchr("*$%~>|=!", d[i])) {
            size_t j = i + 1;
            if (j < n && d[j] == '-')
                j++;
            long long v = 0;
            while (j < n && d[j] >= '0' && d[j] <= '9' && v <= 65536)
                v = v * 10 + (d[j++] - '0');
            if (v > 65536)
                return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static dq__core core;
    static int ready;
    if (!ready) {
        CHECK(dq__core_init(&core, NULL) == DQ_OK);
        ready = 1;
    }
    if (huge_header(data, size))
        return 0;
    redisReader *rd = redisReaderCreate();
    CHECK(rd != NULL);
    if (redisReaderFeed(rd, (const char *)data, size) == REDIS_OK) {
        for (int k = 0; k < 16; k++) {
            void *reply = NULL;
            if (redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL)
                break;
            decode_all((const dq__reply *)reply, &core);
            freeReplyObject(reply);
        }
    }
    redisReaderFree(rd);
    return 0;
}
