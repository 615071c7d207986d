/*
 * tests/test_common.h - helpers shared by the core Check suites (tests/test_*.c).
 *
 * Every suite starts one private redis-server in its main() (TEST_MAIN:
 * the srunner process owns it, the forked tests use it)
 * and gives each test its own queue name (Q = the test function's name), so
 * tests never see each other's jobs.  Tests that kill or restart Redis start
 * their own server instead.
 */
#ifndef DQ_TEST_COMMON_H
#define DQ_TEST_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "delayq.h"
#include "harness.h"

/* The suite's server, started by the unchecked fixture. */
static th_redis g_srv;

/* Queue name unique to the running test (Check names it <test>_fn). */
#define Q __func__

static inline void srv_start(void) {
    if (th_redis_start(&g_srv, 0, NULL) != 0) {
        fprintf(stderr, "test: cannot start redis-server (is it installed? "
                        "run tools/deps.sh)\n");
        exit(1); /* a missing redis-server is a failure, never a skip */
    }
}

static inline void srv_start_tcp(void) {
    if (th_redis_start(&g_srv, 1, NULL) != 0) {
        fprintf(stderr, "test: cannot start redis-server\n");
        exit(1);
    }
}

static inline void srv_stop(void) { th_redis_stop(&g_srv); }

/* Monotonic milliseconds. */
static inline int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Opens a client on uri with opts (may be NULL); fails the test if it can't. */
static inline dq_client *open_uri(const char *uri, const dq_options *opts) {
    dq_client *c = NULL;
    int rc = dq_open(uri, opts, &c);
    ck_assert_msg(rc == 0, "dq_open(%s): %d %s", uri, rc, dq_errmsg(c));
    ck_assert_ptr_nonnull(c);
    return c;
}

static inline dq_client *open_client(void) { return open_uri(g_srv.uri, NULL); }

/* A client with one integer option set. */
static inline dq_client *open_client_opt(int key, int64_t value) {
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_options_set_int(o, key, value), 0);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    return c;
}

/* Pushes a text payload, fails the test on error; returns the outcome and
 * writes the id to id_out (DQ_ID_BUF bytes) if not NULL. */
static inline int push_text(dq_client *c, const char *queue, const char *payload,
                     int64_t delay_ms, const char *id, int flags,
                     char *id_out) {
    int outcome = -1;
    char buf[DQ_ID_BUF];
    int rc = dq_push(c, queue, payload, strlen(payload), delay_ms, id, flags,
                     id_out ? id_out : buf, DQ_ID_BUF, &outcome);
    ck_assert_msg(rc == 0, "dq_push: %d %s", rc, dq_errmsg(c));
    return outcome;
}

/* Polls once (lease_ms), fails on error; returns the count. */
static inline int poll_n(dq_client *c, const char *queue, int max, int64_t lease_ms,
                  dq_jobs **out, int64_t *next) {
    int n = dq_poll(c, queue, max, lease_ms, out, next);
    ck_assert_msg(n >= 0, "dq_poll: %d %s", n, dq_errmsg(c));
    ck_assert_int_eq((int)dq_jobs_count(*out), n);
    if (n == 0)
        ck_assert_ptr_null(*out);
    return n;
}

/* Polls until a job arrives (or limit_ms passes); returns the list or NULL. */
static inline dq_jobs *poll_until(dq_client *c, const char *queue, int max,
                           int64_t lease_ms, int64_t limit_ms) {
    int64_t end = mono_ms() + limit_ms;
    for (;;) {
        dq_jobs *j = NULL;
        int n = poll_n(c, queue, max, lease_ms, &j, NULL);
        if (n > 0)
            return j;
        if (mono_ms() >= end)
            return NULL;
        sleep_ms(10);
    }
}

/* Polls exactly one job that must be there now; returns the list. */
static inline dq_jobs *poll_one(dq_client *c, const char *queue, int64_t lease_ms) {
    dq_jobs *j = NULL;
    int n = poll_n(c, queue, 1, lease_ms, &j, NULL);
    ck_assert_msg(n == 1, "expected one due job in %s, got %d", queue, n);
    return j;
}

/* Stats as an array: scheduled, due, inflight, dead, next_due_ms. */
static inline void stats5(dq_client *c, const char *queue, int64_t s[5]) {
    int rc = dq_stats(c, queue, &s[0], &s[1], &s[2], &s[3], &s[4]);
    ck_assert_msg(rc == 0, "dq_stats: %d %s", rc, dq_errmsg(c));
}

/* Checks the counts (next_due_ms not compared). */
#define ck_stats(c, q, sched, due, infl, dead)                                \
    do {                                                                      \
        int64_t s_[5];                                                        \
        stats5((c), (q), s_);                                                 \
        ck_assert_msg(s_[0] == (sched) && s_[1] == (due) &&                   \
                          s_[2] == (infl) && s_[3] == (dead),                 \
                      "stats of %s: scheduled %" PRId64 " due %" PRId64       \
                      " inflight %" PRId64 " dead %" PRId64                   \
                      ", expected %d %d %d %d",                               \
                      (q), s_[0], s_[1], s_[2], s_[3], (int)(sched),          \
                      (int)(due), (int)(infl), (int)(dead));                  \
    } while (0)

/* ---- direct Redis access (hiredis) ------------------------------------ */

static inline redisContext *rconn(void) {
    redisContext *r = th_redis_connect(&g_srv);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Runs a command (printf-style, as redisCommand) and returns the reply;
 * fails the test on an I/O error. */
static inline redisReply *th_cmd(redisContext *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline redisReply *th_cmd(redisContext *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    ck_assert_msg(rep != NULL, "redis command failed: %s", r->errstr);
    return rep;
}

/* Integer reply of a command (fails the test if it is not one). */
static inline long long rint_(redisContext *r, const char *cmd, const char *arg1,
                       const char *arg2) {
    redisReply *rep =
        arg2 ? redisCommand(r, "%s %s %s", cmd, arg1, arg2)
             : arg1 ? redisCommand(r, "%s %s", cmd, arg1) : redisCommand(r, cmd);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER, "%s: not an integer reply",
                  cmd);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

/* Commands the server has processed so far (INFO stats); the INFO itself is
 * counted by the next reading. */
static inline long long commands_processed(redisContext *r) {
    redisReply *rep = th_cmd(r, "INFO stats");
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    const char *p = strstr(rep->str, "total_commands_processed:");
    ck_assert_ptr_nonnull(p);
    long long v = atoll(p + strlen("total_commands_processed:"));
    freeReplyObject(rep);
    return v;
}

/* Commands clients sent (INFO commandstats), without the commands that
 * scripts run inside EVAL/EVALSHA (which total_commands_processed counts
 * too) and without INFO itself. */
static inline long long client_commands(redisContext *r) {
    static const char *const internal[] = {
        "time",  "zrangebyscore", "zrange", "zadd", "zrem",    "zcard",
        "zcount", "zscore",       "hmget",  "hset", "hget",    "hdel",
        "hexists", "hlen",        "incrby", "publish", "info", NULL};
    redisReply *rep = th_cmd(r, "INFO commandstats");
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    long long sum = 0;
    for (const char *p = strstr(rep->str, "cmdstat_"); p != NULL;
         p = strstr(p + 1, "cmdstat_")) {
        const char *name = p + 8, *colon = strchr(name, ':');
        const char *calls = strstr(name, "calls=");
        if (colon == NULL || calls == NULL)
            break;
        int skip = 0;
        for (int i = 0; internal[i] != NULL; i++)
            if ((size_t)(colon - name) == strlen(internal[i]) &&
                strncmp(name, internal[i], strlen(internal[i])) == 0)
                skip = 1;
        if (!skip)
            sum += atoll(calls + 6);
    }
    freeReplyObject(rep);
    return sum;
}

/* The server's clock (TIME) in epoch ms. */
static inline int64_t server_ms(redisContext *r) {
    redisReply *rep = th_cmd(r, "TIME");
    ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq((int)rep->elements, 2);
    int64_t ms = atoll(rep->element[0]->str) * 1000 +
                 atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

/* Percent-encodes a queue name as the library documents its keys:
 * bytes outside [A-Za-z0-9._-] become %XX (upper-case hex). */
static inline void pct_encode(const char *q, char *out) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)q; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-') {
            *out++ = (char)*p;
        } else {
            *out++ = '%';
            *out++ = hex[*p >> 4];
            *out++ = hex[*p & 15];
        }
    }
    *out = '\0';
}

/* "dq:{<enc>}:<suffix>" for the default namespace. */
static inline void queue_key(const char *ns, const char *q, const char *suffix,
                      char *out, size_t size) {
    char enc[DQ_QUEUE_MAX * 3 + 1];
    pct_encode(q, enc);
    snprintf(out, size, "%s:{%s}:%s", ns, enc, suffix);
}

/* Standard main: starts the suite's server (TCP too when tcp != 0) in this
 * process (so it outlives every forked test), runs the suite with CK_ENV
 * (CK_FORK etc. from the environment), stops the server and exits 1 if
 * anything failed. */
#define TEST_MAIN_SRV(make_suite, tcp)                                        \
    int main(void) {                                                          \
        if ((tcp) ? 1 : 0)                                                    \
            srv_start_tcp();                                                  \
        else                                                                  \
            srv_start();                                                      \
        SRunner *sr_ = srunner_create(make_suite());                          \
        srunner_run_all(sr_, CK_ENV);                                         \
        int failed_ = srunner_ntests_failed(sr_);                             \
        srunner_free(sr_);                                                    \
        srv_stop();                                                           \
        return failed_ == 0 ? 0 : 1;                                          \
    }
#define TEST_MAIN(make_suite) TEST_MAIN_SRV(make_suite, 0)

/* Adds a TCase named name holding one test, with a timeout in seconds. */
#define ADD_TEST(suite, name, test, timeout)                                  \
    do {                                                                      \
        TCase *tc_ = tcase_create(name);                                      \
        tcase_set_timeout(tc_, (timeout));                                    \
        tcase_add_test(tc_, test);                                            \
        suite_add_tcase((suite), tc_);                                        \
    } while (0)

#endif
