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
 *            drain100 / drain1000 (N due jobs: poll(max) + ack_batch).
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

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: dqsrvcost SECTION SOCKET N\n");
        return 2;
    }
    const char *sec = argv[1], *sock = argv[2];
    long n = atol(argv[3]);
    char uri[600];
    snprintf(uri, sizeof(uri), "unix://%s", sock);
    dq_client *c = NULL;
    if (dq_open(uri, NULL, &c) != 0) {
        fprintf(stderr, "dqsrvcost: %s\n", dq_errmsg(c));
        dq_close(c);
        return 1;
    }
    const void *pls[1000];
    size_t lens[1000];
    int64_t d[1000];
    for (int i = 0; i < 1000; i++) {
        pls[i] = payload;
        lens[i] = 16;
        d[i] = 3600000 + (int64_t)i * 7919 % 86400000;
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
        if (m == 0 || raw_due(sock, n) != 0) {
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
