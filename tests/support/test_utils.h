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

/* ck_assert_msg(cond, ...) and ck_assert(cond) for checks in loops over
 * thousands of jobs or keys: Check records every passing ck_assert* (a
 * write to its log file each), which there costs more than the check
 * itself; these record only a failure. */
#define tu_require(cond, ...)                                                 \
    do {                                                                      \
        if (!(cond))                                                          \
            ck_abort_msg(__VA_ARGS__);                                        \
    } while (0)
#define tu_check(cond) tu_require(cond, "Assertion '%s' failed", #cond)

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
/* n ids "<prefix><i>" (i = 0..n-1) in one allocation: free() it. */
const char **tu_ids(size_t n, const char *prefix);
/* Pushes n jobs of payload "z" with ids in one batch, each delay_ms away;
 * fails the test unless every one is created. */
void tu_push_ids(dq_client *c, const char *queue, size_t n,
                 const char *const *ids, int64_t delay_ms);
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

/* dq_get that must find job id (fails the test otherwise); free the info. */
dq_job_info *tu_must_get(dq_client *c, const char *queue, const char *id);
/* The state of job id (tu_must_get) and, when t is not NULL, its due time
 * (or other time) into *t. */
int tu_state_of(dq_client *c, const char *queue, const char *id, int64_t *t);

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

/* call must return code, and leave that code and a message naming word on
 * client c. */
#define tu_bad(c, call, code, word)                                           \
    do {                                                                      \
        int rc_ = (call);                                                     \
        ck_assert_msg(rc_ == (code), "%s: %d (%s), expected %s", #call, rc_,  \
                      dq_errname(rc_), dq_errname(code));                     \
        ck_assert_int_eq(dq_errcode(c), (code));                              \
        ck_assert_msg(strstr(dq_errmsg(c), (word)) != NULL,                   \
                      "%s: message '%s' does not name '%s'", #call,           \
                      dq_errmsg(c), (word));                                  \
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
/* Fails unless nothing reached the server since commands_processed gave
 * before (the INFO of that reading aside). */
void tu_nothing_sent(redisContext *r, long long before);
/* The integer field "<field>:" of INFO <section>. */
long long tu_info_int(redisContext *r, const char *section, const char *field);
/* Commands clients sent (INFO commandstats), without the commands that
 * scripts run inside EVAL/EVALSHA and without INFO itself. */
long long client_commands(redisContext *r);
/* The server's clock (TIME) in epoch ms. */
int64_t server_ms(redisContext *r);
/* Scripts the server has run so far: the calls of EVAL, EVALSHA, their
 * _RO forms and FCALL(_RO) (INFO commandstats). */
long long tu_script_calls(redisContext *r);
/* "<field>:...<sub>N" of INFO <section> on 127.0.0.1:port (a fresh
 * connection): N, 0 when the field is absent (no such command or error
 * yet).  tu_script_calls_at: tu_script_calls of that server. */
long long tu_info_at(int port, const char *section, const char *field,
                     const char *sub);
long long tu_script_calls_at(int port);
/* What the queue recorded as job id's last failure reason: its length, or
 * -1 when none; the bytes go to buf (DQ_REASON_MAX + 1 bytes), the job's
 * state to *state.  Fails the test unless the job exists. */
long tu_last_error(dq_client *c, const char *q, const char *id, char *buf,
                   int *state);

/* ---- key layout oracle -------------------------------------------------- */

/* Percent-encodes a queue name as the library documents its keys: bytes
 * outside [A-Za-z0-9._-] become %XX (upper-case hex).  out holds at least
 * 3 * strlen(q) + 1 bytes. */
void pct_encode(const char *q, char *out);
/* "<ns>:{<enc>}:<suffix>", the documented key of a queue. */
void queue_key(const char *ns, const char *q, const char *suffix, char *out,
               size_t size);

/* ---- partitioned runs (DQ_TEST_PARTITIONS) ------------------------------ */

/* The suites run on plain queues, or, with DQ_TEST_PARTITIONS=N > 1, on
 * queues of N partitions: tu_main appends "?partitions=N" to g_srv.uri, so
 * every client opened on it (open_client, uri_with...) uses N partitions.
 * A partitioned queue "q" keeps its jobs in N partitions, keys
 * "<ns>:{<enc>#i}:<suffix>" (i = 0..N-1, wake channel
 * "<ns>:{<enc>#i}:wake:<db>"); job X lives in partition tu_part_of(X, N).
 * The plain jobs hash "<ns>:{<enc>}:jobs" then holds one field, "\0parts"
 * (the recorded partition count), and nothing else of the queue is under
 * the plain name. */

/* N of DQ_TEST_PARTITIONS when it is > 1, else 1 (plain queues). */
int tu_parts(void);
/* Whether DQ_TEST_LAYOUT is compact or compact-push: tu_main then
 * appends "layout=<that>" to g_srv.uri's query, and tu_uri too, so the
 * suite's queues use that layout (lib/lua/include/compact/keys.lua): with compact-push
 * every push moves its jobs into compact buckets, with compact every poll
 * that finds nothing due moves some. */
int tu_compact(void);
/* uri as the run lays queues out: with "layout=<DQ_TEST_LAYOUT>" added to
 * its query on a compact run (unless it names a layout already), written
 * to buf; else uri itself.  For the clients that tests and workers open on a
 * server of their own (open_uri, aopen_uri and the fault workers use it). */
const char *tu_layout_uri(const char *uri, char *buf, size_t n);
/* The partition of job id on a queue of n partitions (FNV-1a 32-bit of the
 * id, mod n); 0 when n <= 1. */
int tu_part_of(const char *id, int n);
/* An id for tests whose property needs their jobs in one partition: base
 * itself on a plain run or when it already hashes to partition part, else
 * "<base>_<k>" with the smallest k >= 1 that does.  Written to buf (n
 * bytes, at least strlen(base) + 12); returns buf. */
const char *tu_id_in(char *buf, size_t n, const char *base, int part);
/* The key of a queue's suffix ("jobs", "due", "wake:0"...) where job id
 * lives: the plain key "<ns>:{<enc>}:<suffix>" on a plain run or when id is
 * NULL (on a partitioned run: the key holding the partition count; sum
 * over the partitions with tu_sum), else "<ns>:{<enc>#i}:<suffix>" with
 * i = tu_part_of(id, tu_parts()). */
void tu_key(char *buf, size_t n, const char *ns, const char *queue,
            const char *suffix, const char *id);
/* The key of partition part (-1: the plain key), whatever the run. */
void tu_part_key(char *buf, size_t n, const char *ns, const char *queue,
                 const char *suffix, int part);
/* The sum of the integer replies of "<cmd> <key>" (HLEN, ZCARD, EXISTS...)
 * over the queue's keys of suffix: the plain key on a plain run, every
 * partition's on a partitioned one (the plain key, which holds only the
 * partition count, not included). */
long long tu_sum(redisContext *r, const char *cmd, const char *ns,
                 const char *queue, const char *suffix);
/* Jobs stored in the queue's hashes: the fields of its jobs hash (as
 * tu_sum "HLEN" of "jobs": payloads, metas...) plus its compact jobs (the
 * "n" of its "cm" hash, lib/lua/include/compact/keys.lua), over all partitions. */
long long tu_job_fields(redisContext *r, const char *ns, const char *queue);
#define TU_SHARD_SUFFIX 6 /* "s:" + 3 bytes + NUL */
/* The shard of a compact job's id (0..2^18-1), and its key's suffix
 * "s:<code>" (lib/lua/include/compact/keys.lua, c_code: the shard as 3 bytes, 6 bits
 * each, '0' + digit, most significant first) into buf. */
unsigned tu_shard_of(const char *id);
void tu_shard_suffix(const char *id, char buf[TU_SHARD_SUFFIX]);
/* Whether job id is stored, in the default layout (its payload in the
 * jobs hash of its partition) or the compact one (its id in its shard). */
int tu_job_stored(redisContext *r, const char *ns, const char *queue,
                  const char *id);
/* Fails unless the plain keys of a partitioned queue hold nothing but the
 * partition count: no due, lease, dead, done or meta key, and a jobs hash
 * that is absent or has the one field "\0parts".  Nothing on a plain run
 * (the plain keys are the queue's own). */
void tu_assert_plain_clean(redisContext *r, const char *ns, const char *queue);

/* A dq_poll_wait (max 1, lease 30 s, waiting up to 10 s) run in a thread
 * (pthread_create(..., tu_wait_thread, &w)): its result, when it returned
 * (th_mono_us) and the job's id and token, or the client's error. */
typedef struct tu_waiter {
    dq_client *c;
    const char *q;
    int rc;
    int64_t done_us;
    char id[DQ_ID_BUF], token[DQ_TOKEN_BUF], err[256];
} tu_waiter;
void *tu_wait_thread(void *arg);

/* ---- handler reasons (dq_consumer_set_reason) ---------------------------- */

typedef struct dq_consumer dq_consumer;
/* Inside consumer c's handler of job: every bad call of
 * dq_consumer_set_reason is refused (NULL consumer, job or reason, a reason
 * over DQ_REASON_MAX, not_job, which is no job of c). */
void tu_reason_refused(dq_consumer *c, const dq_job *job, const void *not_job);
/* Inside the handler of job: sets the reason "retry later"; a too long one
 * after it is refused (and changes nothing). */
void tu_reason_retry_later(dq_consumer *c, const dq_job *job);
/* After the handlers above ran for j0 (refused calls, then a retry) and j1
 * (retry later): j0 has no reason, j1 "retry later", both scheduled. */
void tu_reasons_of_retries(dq_client *c, const char *queue);

/* ---- TLS certificates and ports ------------------------------------------ */

/* In dir (openssl on PATH, its output appended to dir/openssl.log; a
 * failure fails the test): tu_make_ca a CA name.crt / name.key with CN cn,
 * tu_make_cert name.crt / name.key signed by CA ca, with CN cn and, when
 * san is not NULL, that subjectAltName.  EC P-256 keys, 2 days. */
void tu_make_ca(const char *dir, const char *name, const char *cn);
void tu_make_cert(const char *dir, const char *name, const char *ca,
                  const char *cn, const char *san);
/* Removes the directory dir (rm -rf) when it starts with prefix (a test's
 * mkdtemp template); says so on stderr if it cannot. */
void tu_rm_dir(const char *dir, const char *prefix);
/* A free TCP port on 127.0.0.1 (th_free_port); fails the test if none. */
int tu_free_port(void);

/* ---- worker processes --------------------------------------------------- */

/* A worker process's body: k its index, fd the write end of the shared
 * pipe; the process exits with what it returns. */
typedef int (*tu_proc_fn)(int k, int fd, const void *arg);
/* Forks n workers (pids[k]) around one pipe, each running proc(k, fd, arg)
 * with the read end closed; returns the read end, the write end closed in
 * this process.  A failed pipe or fork fails the test. */
int tu_fork_writers(pid_t *pids, int n, tu_proc_fn proc, const void *arg);
/* SIGKILLs pid and reaps it; fails the test if either fails. */
void tu_kill(pid_t pid);
/* Reaps the n workers; fails unless each exited with status 0. */
void tu_reap(const pid_t *pids, int n);

/* g_srv.uri with the query parameters extra ("db=5", "db=3&user=u") added
 * after '?' or, when the URI already has a query (a partitioned run),
 * '&'.  Written to buf; returns buf.  Fails the test if it does not fit. */
const char *uri_with(const char *extra, char *buf, size_t n);
/* The URI of a server the test started itself (base: th_redis.uri, a
 * redis:// URI...), partitioned and laid out as g_srv.uri is, with extra (may be NULL)
 * added.  Written to buf; returns buf. */
const char *tu_uri(const char *base, const char *extra, char *buf, size_t n);

#endif
