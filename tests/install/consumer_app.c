/*
 * tests/install/consumer_app.c - a separate program built against the
 * INSTALLED libdelayq with nothing but `pkg-config --cflags --libs delayq`.
 * It pushes, polls, acks, cancels and dead-letters exactly as delayq.h
 * documents, and exits non-zero on the first mismatch.
 *
 *   consumer_app URI
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep under -std=c11 */

#include <delayq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *Q = "install-test";
static dq_client *c;
static int checks;

#define EXPECT(cond)                                                          \
    do {                                                                      \
        checks++;                                                             \
        if (!(cond)) {                                                        \
            fprintf(stderr, "consumer_app: %s:%d: expected %s (last error: "  \
                    "%s %s)\n", __FILE__, __LINE__, #cond,                    \
                    dq_errname(dq_errcode(c)), dq_errmsg(c));                 \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls exactly one job with the given lease. */
static dq_jobs *take_one(int64_t lease_ms) {
    dq_jobs *jobs = NULL;
    int64_t next = 42;
    EXPECT(dq_poll(c, Q, 1, lease_ms, &jobs, &next) == 1);
    EXPECT(dq_jobs_count(jobs) == 1);
    EXPECT(next == 0);
    return jobs;
}

static void expect_empty(void) {
    int64_t s = -1, d = -1, i = -1, x = -1, next = 0;
    EXPECT(dq_stats(c, Q, &s, &d, &i, &x, &next) == 0);
    EXPECT(s == 0 && d == 0 && i == 0 && x == 0 && next == -1);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer_app URI\n");
        return 2;
    }
    /* versions: header and loaded library agree */
    if (dq_version_number() != DQ_VERSION_NUMBER ||
        strcmp(dq_version_string(), DQ_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer_app: header %s, library %s\n",
                DQ_VERSION_STRING, dq_version_string());
        return 1;
    }
    dq_options *opts = dq_options_new();
    if (opts == NULL || dq_options_set_int(opts, DQ_OPT_MAX_ATTEMPTS, 2) != 0) {
        fprintf(stderr, "consumer_app: options\n");
        return 1;
    }
    int rc = dq_open(argv[1], opts, &c);
    dq_options_free(opts);
    if (rc != 0) {
        fprintf(stderr, "consumer_app: dq_open(%s): %s: %s\n", argv[1],
                dq_strerror(rc), dq_errmsg(c));
        dq_close(c);
        return 1;
    }
    expect_empty();

    /* 1. push a binary payload, poll it, ack it */
    static const char payload[] = {'h', 'i', '\0', 'x', '\xff'};
    char id[DQ_ID_BUF];
    int outcome = 0;
    EXPECT(dq_push(c, Q, payload, sizeof(payload), 0, NULL, DQ_PUSH_KEEP, id,
                   sizeof(id), &outcome) == 0);
    EXPECT(outcome == DQ_PUSHED);
    EXPECT(strlen(id) == 14);
    dq_jobs *jobs = take_one(5000);
    const dq_job *j = dq_jobs_at(jobs, 0);
    size_t len = 0;
    const char *p = dq_job_payload(j, &len);
    EXPECT(len == sizeof(payload) && memcmp(p, payload, len) == 0);
    EXPECT(strcmp(dq_job_id(j), id) == 0);
    EXPECT(dq_job_attempt(j) == 1);
    EXPECT(dq_job_token(j)[0] != '\0');
    EXPECT(dq_job_lease_deadline_ms(j) > dq_job_due_ms(j));
    EXPECT(dq_ack(c, Q, id, dq_job_token(j)) == 0);
    EXPECT(dq_ack(c, Q, id, dq_job_token(j)) == 0); /* its own, landed */
    EXPECT(dq_ack(c, Q, "never-pushed", dq_job_token(j)) == DQ_ENOTFOUND);
    dq_jobs_free(jobs);
    expect_empty();

    /* 2. a caller id: keep, replace, cancel before delivery */
    EXPECT(dq_push(c, Q, "close order 1042", 16, 60000, "order-1042",
                   DQ_PUSH_KEEP, NULL, 0, &outcome) == 0);
    EXPECT(outcome == DQ_PUSHED);
    EXPECT(dq_push(c, Q, "other", 5, 0, "order-1042", DQ_PUSH_KEEP, NULL, 0,
                   &outcome) == 0);
    EXPECT(outcome == DQ_KEPT);
    EXPECT(dq_push(c, Q, "close order 1042", 16, 90000, "order-1042",
                   DQ_PUSH_REPLACE, NULL, 0, &outcome) == 0);
    EXPECT(outcome == DQ_REPLACED);
    int64_t sched = 0, next = 0;
    EXPECT(dq_stats(c, Q, &sched, NULL, NULL, NULL, &next) == 0);
    EXPECT(sched == 1 && next > 60000 && next <= 90000);
    EXPECT(dq_cancel(c, Q, "order-1042", 0) == DQ_CANCELED_PENDING);
    EXPECT(dq_cancel(c, Q, "order-1042", 0) == 0);
    expect_empty();

    /* 3. cancel in flight: busy without the flag, removed with it */
    EXPECT(dq_push(c, Q, "x", 1, 0, "busy", 0, NULL, 0, NULL) == 0);
    jobs = take_one(5000);
    EXPECT(dq_cancel(c, Q, "busy", 0) == DQ_CANCEL_BUSY);
    EXPECT(dq_cancel(c, Q, "busy", DQ_CANCEL_INFLIGHT) == DQ_CANCELED_INFLIGHT);
    EXPECT(dq_ack(c, Q, "busy", dq_job_token(dq_jobs_at(jobs, 0))) ==
           DQ_ENOTFOUND);
    dq_jobs_free(jobs);
    expect_empty();

    /* 4. a lease runs out: redelivered with attempt 2, old token stale */
    EXPECT(dq_push(c, Q, "crash", 5, 0, "crash", 0, NULL, 0, NULL) == 0);
    jobs = take_one(100);
    sleep_ms(250);
    dq_jobs *again = take_one(5000);
    EXPECT(dq_job_attempt(dq_jobs_at(again, 0)) == 2);
    EXPECT(strcmp(dq_job_token(dq_jobs_at(again, 0)),
                  dq_job_token(dq_jobs_at(jobs, 0))) != 0);
    EXPECT(dq_ack(c, Q, "crash", dq_job_token(dq_jobs_at(jobs, 0))) ==
           DQ_ESTALE);
    /* 5. max attempts (2): the nack after the second delivery dead-letters */
    EXPECT(dq_nack(c, Q, "crash", dq_job_token(dq_jobs_at(again, 0)), 0, 0) == 1);
    dq_jobs_free(jobs);
    dq_jobs_free(again);
    int64_t dead = 0;
    EXPECT(dq_stats(c, Q, NULL, NULL, NULL, &dead, NULL) == 0 && dead == 1);
    dq_jobs *list = NULL;
    EXPECT(dq_dead_list(c, Q, 0, 10, &list) == 1);
    EXPECT(strcmp(dq_job_id(dq_jobs_at(list, 0)), "crash") == 0);
    EXPECT(dq_job_attempt(dq_jobs_at(list, 0)) == 2);
    dq_job *kept = dq_job_dup(dq_jobs_at(list, 0));
    dq_jobs_free(list);
    EXPECT(kept != NULL && strcmp(dq_job_payload(kept, NULL), "crash") == 0);
    dq_job_free(kept);
    /* requeue: attempts reset */
    EXPECT(dq_dead_requeue(c, Q, "crash", 0) == 1);
    jobs = take_one(5000);
    EXPECT(dq_job_attempt(dq_jobs_at(jobs, 0)) == 1);
    /* give up at once, then purge */
    EXPECT(dq_nack(c, Q, "crash", dq_job_token(dq_jobs_at(jobs, 0)), 0,
                   DQ_NACK_DEAD) == 1);
    dq_jobs_free(jobs);
    EXPECT(dq_dead_purge(c, Q, NULL) == 1);
    expect_empty();

    /* 6. nack with a delay, extend, blocking wait */
    EXPECT(dq_push(c, Q, "retry", 5, 0, "retry", 0, NULL, 0, NULL) == 0);
    jobs = take_one(5000);
    int64_t deadline = 0;
    EXPECT(dq_extend(c, Q, "retry", dq_job_token(dq_jobs_at(jobs, 0)), 10000,
                     &deadline) == 0);
    EXPECT(deadline > dq_job_lease_deadline_ms(dq_jobs_at(jobs, 0)));
    EXPECT(dq_nack(c, Q, "retry", dq_job_token(dq_jobs_at(jobs, 0)), 200, 0) == 0);
    dq_jobs_free(jobs);
    jobs = NULL;
    EXPECT(dq_poll_wait(c, Q, 1, 5000, 3000, &jobs) == 1);
    EXPECT(dq_job_attempt(dq_jobs_at(jobs, 0)) == 2);
    EXPECT(dq_ack(c, Q, "retry", dq_job_token(dq_jobs_at(jobs, 0))) == 0);
    dq_jobs_free(jobs);
    jobs = NULL;
    EXPECT(dq_poll_wait(c, Q, 1, 5000, 50, &jobs) == 0 && jobs == NULL);

    /* 7. batches */
    const void *pls[3] = {"a", "b", "c"};
    size_t lens[3] = {1, 1, 1};
    const char *ids[3] = {"b1", NULL, "b3"};
    char ids_out[3 * DQ_ID_BUF];
    int outcomes[3];
    EXPECT(dq_push_batch(c, Q, 3, pls, lens, NULL, ids, 0, ids_out, outcomes) == 3);
    EXPECT(strcmp(ids_out, "b1") == 0 && strlen(ids_out + DQ_ID_BUF) == 14);
    EXPECT(dq_poll(c, Q, 10, 5000, &jobs, NULL) == 3);
    const char *aids[4], *toks[4];
    for (size_t i = 0; i < 3; i++) {
        aids[i] = dq_job_id(dq_jobs_at(jobs, i));
        toks[i] = dq_job_token(dq_jobs_at(jobs, i));
    }
    aids[3] = "nobody";
    toks[3] = "1";
    int results[4];
    EXPECT(dq_ack_batch(c, Q, 4, aids, toks, results) == 3);
    EXPECT(results[0] == 0 && results[1] == 0 && results[2] == 0 &&
           results[3] == DQ_ENOTFOUND);
    dq_jobs_free(jobs);
    expect_empty();

    /* 8. bad input: a specific code and a message naming the argument */
    EXPECT(dq_push(c, "", "x", 1, 0, NULL, 0, NULL, 0, NULL) == DQ_EQUEUE);
    EXPECT(strstr(dq_errmsg(c), "queue") != NULL);
    EXPECT(dq_push(c, Q, "x", 1, -1, NULL, 0, NULL, 0, NULL) == DQ_EDELAY);
    EXPECT(dq_poll(c, Q, 1, -1, &jobs, NULL) == DQ_ELEASE);
    EXPECT(dq_ack(c, Q, "x", "not-a-token") == DQ_EINVAL);
    EXPECT(strcmp(dq_errname(DQ_ESTALE), "ESTALE") == 0);
    EXPECT(strcmp(dq_strerror(12345), "unknown error") == 0);
    dq_close(c);
    c = NULL;
    /* a bad URI still gives a client that carries the message */
    EXPECT(dq_open("bogus://", NULL, &c) == DQ_EURI && c != NULL &&
           dq_errmsg(c)[0] != '\0');
    dq_close(c);
    dq_close(NULL);
    printf("consumer_app: %d checks passed against %s\n", checks,
           dq_version_string());
    return 0;
}
