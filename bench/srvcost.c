/*
 * bench/srvcost.c - drives one fixed workload against a redis-server, for
 * bench/srvcost.sh, which runs that server under callgrind and counts the
 * instructions Redis spends inside EVAL/EVALSHA (the Lua scripts and the
 * commands they call).  Instruction counts are deterministic, unlike times
 * on a shared machine, so they show small script changes reliably.
 *
 *   dqsrvcost SECTION SOCKET N
 *   SECTION: push1 (N x dq_push), push100 / push1000 (dq_push_batch of
 *            100 / 1000, N jobs in all), pollack1 (N x poll(max 1) + ack),
 *            drain100 / drain1000 (N due jobs: poll(max) + ack_batch),
 *            c... (the drain of jobs pushed in the compact-push layout),
 *            g... (the drain of jobs pushed all of one group, "A": the
 *            big group of a burst, bench/fair.sh), m... (of ten groups,
 *            G0..G9, N/10 jobs each: the round-robin pick at work).
 * The due jobs of the poll sections are written with plain HSET/ZADD (not
 * scripts), so they are not counted.  Exit 1 if any call failed.
 */
#include <delayq.h>

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE "bench"

static const char payload[] = "abcdefghijklmnop"; /* 16 bytes */

/* n due jobs (due at epoch ms 1) in the library's layout. */
static int raw_due(const char *sock, long n) {
    redisContext *r = redisConnectUnix(sock);
    if (r == NULL || r->err)
        return -1;
    for (long i = 0; i < n; i++) {
        redisAppendCommand(r, "HSET dq:{%s}:jobs j%07ld %s", QUEUE, i,
                           payload);
        redisAppendCommand(r, "ZADD dq:{%s}:due 1 j%07ld", QUEUE, i);
    }
    int rc = 0;
    for (long i = 0; i < 2 * n; i++) {
        void *x = NULL;
        if (redisGetReply(r, &x) != REDIS_OK)
            rc = -1;
        freeReplyObject(x);
    }
    redisFree(r);
    return rc;
}

/* Epoch ms by the server's clock, or -1. */
static int64_t server_ms(const char *sock) {
    redisContext *r = redisConnectUnix(sock);
    if (r == NULL || r->err) {
        redisFree(r);
        return -1;
    }
    redisReply *t = redisCommand(r, "TIME");
    int64_t ms = -1;
    if (t != NULL && t->type == REDIS_REPLY_ARRAY && t->elements == 2)
        ms = atoll(t->element[0]->str) * 1000 +
             atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    redisFree(r);
    return ms;
}

/* n jobs due from 25 h to 1 h ago, pushed in batches of 1000 (pls and
 * lens: 1000 payloads) with options po (NULL: none). */
static int pushed_due(dq_client *c, const char *sock, long n,
                      const void *const *pls, const size_t *lens,
                      const dq_push_opts *po) {
    int64_t now = server_ms(sock);
    if (now < 0)
        return -1;
    int64_t at[1000];
    for (long i = 0; i < n; i += 1000) {
        size_t b = (size_t)(n - i < 1000 ? n - i : 1000);
        for (size_t j = 0; j < b; j++)
            at[j] = now - 3600000 - (i + (long)j) * 7919 % 86400000;
        if (dq_push_batch_ex(c, QUEUE, b, pls, lens, at, NULL, DQ_PUSH_AT,
                             po, NULL, NULL) != (int)b)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "setup") == 0)) {
        fprintf(stderr, "usage: dqsrvcost SECTION SOCKET N [setup]\n");
        return 2;
    }
    const char *sec = argv[1], *sock = argv[2];
    long n = atol(argv[3]);
    /* Compact buckets and grouped jobs are made for the drain sections
     * only, pushed by a setup run. */
    int compact = sec[0] == 'c', groups = sec[0] == 'g'   ? 1
                                          : sec[0] == 'm' ? 10
                                                          : 0;
    int pushed = compact || groups;
    if (pushed)
        sec++;
    if ((pushed && strncmp(sec, "drain", 5) != 0) || (argc == 5 && !pushed)) {
        fprintf(stderr, "dqsrvcost: no such section: %s%s\n", argv[1],
                argc == 5 ? " setup" : "");
        return 2;
    }
    char uri[600];
    snprintf(uri, sizeof(uri), "unix://%s%s", sock,
             compact ? "?layout=compact-push" : "");
    /* No command timeout: the server runs under callgrind, some 50 times
     * slower, and a compact push of 1000 jobs took over the default 5 s. */
    dq_options *o = dq_options_new();
    dq_client *c = NULL;
    if (o == NULL || dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, 0) != 0 ||
        dq_open(uri, o, &c) != 0) {
        fprintf(stderr, "dqsrvcost: %s\n", c ? dq_errmsg(c) : "no options");
        dq_close(c);
        dq_options_free(o);
        return 1;
    }
    dq_options_free(o);
    const void *pls[1000];
    size_t lens[1000];
    int64_t d[1000];
    for (int i = 0; i < 1000; i++) {
        pls[i] = payload;
        lens[i] = 16;
        d[i] = 3600000 + (int64_t)i * 7919 % 86400000;
    }
    if (argc == 5) {
        /* cdrain, gdrain, mdrain: the setup run pushes, the counted one
         * only drains. */
        int rc = groups == 0 ? pushed_due(c, sock, n, pls, lens, NULL) : 0;
        for (int g = 0; g < groups && rc == 0; g++) {
            char name[8];
            snprintf(name, sizeof(name), groups == 1 ? "A" : "G%d", g);
            dq_push_opts *po = dq_push_opts_new();
            rc = po == NULL || dq_push_opts_set_str(po, DQ_PUSHOPT_GROUP, name)
                     ? -1
                     : pushed_due(c, sock, n / groups, pls, lens, po);
            dq_push_opts_free(po);
        }
        if (rc != 0)
            fprintf(stderr, "dqsrvcost: %s setup: %s\n", argv[1],
                    dq_errmsg(c));
        dq_close(c);
        return rc != 0;
    }
    int bad = 0;
    if (strncmp(sec, "push", 4) == 0) {
        int b = atoi(sec + 4);
        if (b == 1) {
            for (long i = 0; i < n; i++)
                bad |= dq_push(c, QUEUE, payload, 16,
                               3600000 + i * 7919 % 86400000, NULL, 0, NULL,
                               0, NULL) != 0;
        } else if (b > 1 && b <= 1000) {
            for (long i = 0; i < n / b; i++)
                bad |= dq_push_batch(c, QUEUE, (size_t)b, pls, lens, d, NULL,
                                     0, NULL, NULL) != b;
        } else {
            bad = 1;
        }
    } else {
        int m = strcmp(sec, "pollack1") == 0   ? 1
                : strcmp(sec, "drain100") == 0 ? 100
                : strcmp(sec, "drain1000") == 0 ? 1000
                                                : 0;
        if (m == 0 || (!pushed && raw_due(sock, n) != 0)) {
            fprintf(stderr, "dqsrvcost: bad section or setup failed\n");
            dq_close(c);
            return 1;
        }
        for (long i = 0; i < n / m; i++) {
            dq_jobs *js = NULL;
            int k = dq_poll(c, QUEUE, m, 60000, &js, NULL);
            if (k != m) {
                bad = 1;
                dq_jobs_free(js);
                break;
            }
            const char *ids[1000], *toks[1000];
            for (int j = 0; j < k; j++) {
                ids[j] = dq_job_id(dq_jobs_at(js, (size_t)j));
                toks[j] = dq_job_token(dq_jobs_at(js, (size_t)j));
            }
            bad |= dq_ack_batch(c, QUEUE, (size_t)k, ids, toks, NULL) != k;
            dq_jobs_free(js);
        }
    }
    if (bad)
        fprintf(stderr, "dqsrvcost %s: a call failed: %s\n", sec,
                dq_errmsg(c));
    dq_close(c);
    return bad;
}
