/*
 * tests/support/test_utils.h - helpers shared by the Check suites, compiled
 * once into the test support library (tests/support/meson.build).
 *
 * The suite's private redis-server is g_srv, started by the shared main of
 * test_suite.c before any test runs (the srunner process owns it, the forked
 * tests use it).  Each test uses its own queue name (Q = the test function's
 * name), so tests never see each other's jobs.  Tests that kill or restart
 * Redis start their own server through harness.h instead.
 *
 * The monotonic clock is th_mono_ms/th_mono_us of harness.h.
 */
#ifndef DQ_TEST_UTILS_H
#define DQ_TEST_UTILS_H

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

/* The suite's server (see test_suite.h); zeroed when the suite has none. */
extern th_redis g_srv;

/* Queue name unique to the running test (Check names it <test>_fn). */
#define Q __func__

/* ---- clocks ------------------------------------------------------------ */

/* Wall clock (CLOCK_REALTIME, the clock of the server's TIME on this
 * machine) in ms and in us. */
int64_t wall_ms(void);
int64_t wall_us(void);

/* ---- libdelayq clients ---------------------------------------------------- */

/* Opens a client on uri with opts (may be NULL); fails the test if it can't. */
dq_client *open_uri(const char *uri, const dq_options *opts);
/* A client on g_srv. */
dq_client *open_client(void);
/* A client on g_srv with one integer option set. */
dq_client *open_client_opt(int key, int64_t value);

/* Pushes a text payload, fails the test on error; returns the outcome and
 * writes the id to id_out (DQ_ID_BUF bytes) if not NULL. */
int push_text(dq_client *c, const char *queue, const char *payload,
              int64_t delay_ms, const char *id, int flags, char *id_out);
/* Polls once (lease_ms), fails on error; returns the count. */
int poll_n(dq_client *c, const char *queue, int max, int64_t lease_ms,
           dq_jobs **out, int64_t *next);
/* Polls until a job arrives (or limit_ms passes); returns the list or NULL. */
dq_jobs *poll_until(dq_client *c, const char *queue, int max,
                    int64_t lease_ms, int64_t limit_ms);
/* Polls exactly one job that must be there now; returns the list. */
dq_jobs *poll_one(dq_client *c, const char *queue, int64_t lease_ms);
/* Stats as an array: scheduled, due, inflight, dead, next_due_ms. */
void stats5(dq_client *c, const char *queue, int64_t s[5]);

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

/* A hiredis connection to g_srv; fails the test if it can't. */
redisContext *rconn(void);
/* Runs a command (formatted as redisCommand, %b included) and returns the
 * reply, or NULL on an I/O error.  The caller frees the reply. */
redisReply *rcmd_try(redisContext *r, const char *fmt, ...);
/* As rcmd_try, but fails the test on an I/O error. */
redisReply *th_cmd(redisContext *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Integer reply of "cmd [arg1 [arg2]]" (fails the test if it is not one). */
long long rint_(redisContext *r, const char *cmd, const char *arg1,
                const char *arg2);
/* Commands the server has processed so far (INFO stats); the INFO itself is
 * counted by the next reading. */
long long commands_processed(redisContext *r);
/* Commands clients sent (INFO commandstats), without the commands that
 * scripts run inside EVAL/EVALSHA and without INFO itself. */
long long client_commands(redisContext *r);
/* The server's clock (TIME) in epoch ms. */
int64_t server_ms(redisContext *r);

/* ---- key layout oracle -------------------------------------------------- */

/* Percent-encodes a queue name as the library documents its keys: bytes
 * outside [A-Za-z0-9._-] become %XX (upper-case hex).  out holds at least
 * 3 * strlen(q) + 1 bytes. */
void pct_encode(const char *q, char *out);
/* "<ns>:{<enc>}:<suffix>", the documented key of a queue. */
void queue_key(const char *ns, const char *q, const char *suffix, char *out,
               size_t size);

#endif
