/*
 * tests/fault/test_auth.c - AUTH with a password, an ACL user restricted to
 * one queue, and TLS.
 *
 *  password            requirepass: the password through the URI
 *                      (percent-encoded, unix and TCP) or DQ_OPT_PASSWORD
 *                      works; a wrong or missing one fails dq_open with
 *                      DQ_EAUTH.
 *  acl_user            a user holding exactly ACL_RULE (below) on
 *                      ~dq:{orders}:* can run every call on queue "orders"
 *                      (EVAL after SCRIPT FLUSH, poll_wait's SUBSCRIBE and
 *                      PING, WAIT, SELECT), gets NOPERM on queue
 *                      "payments", and dq_open degrades quietly when it may
 *                      not read CONFIG (no warning, no error).
 *  acl_rule_minimal    every command in ACL_RULE is needed: a user lacking
 *                      any one of them fails some call.
 *  tls_*               (builds with TLS, -DDQ_TEST_TLS) redis-server's own
 *                      tls-port with a throwaway CA made by openssl: server
 *                      verification, a required client certificate, and
 *                      refused connections on bad certificates.
 *  tls_unsupported     (builds without TLS) rediss:// and DQ_OPT_TLS_* fail
 *                      with DQ_ENOTSUP.
 */
#include "fault.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The commands the library needs, as README states them.  Keys and
 * channels are added per queue: ~<ns>:{<queue>}:* &<ns>:{<queue>}:* */
static const char *const ACL_CMDS[] = {
    "evalsha", "eval",   "subscribe", "select", "wait",
    "time",    "zrange", "zrangebyscore", "zadd", "zrem", "zscore",
    "zcard",   "zcount", "hmget", "hset",  "hdel",  "hsetnx",
    "zmscore", "pexpire", "pttl", "zremrangebyscore", "zremrangebyrank",
    "publish"};
#define NCMDS (sizeof(ACL_CMDS) / sizeof(ACL_CMDS[0]))
/* What the compact layout needs on top (README), given to every user of a
 * run on it (DQ_TEST_LAYOUT=compact); acl_rule_minimal still drops each
 * command of ACL_CMDS in turn. */
static const char *const ACL_COMPACT[] = {
    "+hlen", "+hincrby", "+hgetall", "+hvals", "+hrandfield",
    "+zrevrangebyscore", "+get", "+set", "+del"};

/* ACL SETUSER name reset on >pw ~dq:{orders}:* &dq:{orders}:* -@all +...,
 * leaving out command `skip` (NULL: none).  Runs as the default user. */
static void set_user(redisContext *admin, const char *name, const char *pw,
                     const char *skip) {
    const char *argv[64];
    char pass[64];
    int argc = 0;
    static char plus[NCMDS][32];
    snprintf(pass, sizeof(pass), ">%s", pw);
    argv[argc++] = "ACL";
    argv[argc++] = "SETUSER";
    argv[argc++] = name;
    argv[argc++] = "reset";
    argv[argc++] = "on";
    argv[argc++] = pass;
    argv[argc++] = "~dq:{orders}:*";
    argv[argc++] = "&dq:{orders}:*";
    argv[argc++] = "-@all";
    for (size_t i = 0; i < NCMDS; i++) {
        if (skip != NULL && strcmp(skip, ACL_CMDS[i]) == 0)
            continue;
        snprintf(plus[i], sizeof(plus[i]), "+%s", ACL_CMDS[i]);
        argv[argc++] = plus[i];
    }
    for (size_t i = 0; tu_compact() && i < sizeof(ACL_COMPACT) /
                                          sizeof(ACL_COMPACT[0]); i++)
        argv[argc++] = ACL_COMPACT[i];
    redisReply *r = redisCommandArgv(admin, argc, argv, NULL);
    ck_assert_msg(r != NULL && r->type == REDIS_REPLY_STATUS,
                  "ACL SETUSER: %s", r && r->str ? r->str : admin->errstr);
    freeReplyObject(r);
}

static void admin_cmd(redisContext *admin, const char *cmd) {
    redisReply *r = rcmd_try(admin, cmd);
    ck_assert_msg(r != NULL && r->type != REDIS_REPLY_ERROR, "%s: %s", cmd,
                  r && r->str ? r->str : "no reply");
    freeReplyObject(r);
}

/* ---- the scenario: every kind of call on one queue ---- */

typedef struct outcome {
    int rc;          /* 0, or the code of the first unexpected result */
    char step[48];   /* which call */
    char msg[512];   /* its dq_errmsg */
} outcome;

/* Runs every call kind on queue q as the client of uri/o sees it; the
 * first result other than the expected one ends it.  admin (default user)
 * flushes the script cache first so the EVAL fallback is exercised. */
static void scenario(const char *uri, const char *q, redisContext *admin,
                     outcome *out) {
    memset(out, 0, sizeof(*out));
    dq_options *o = dq_options_new();
    dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 10); /* idle PINGs */
    /* a done window the drain's acks outlast (they sleep), so that the
     * last of them trims the first ack's record (ZREMRANGEBYRANK) */
    dq_options_set_int(o, DQ_OPT_DONE_TTL_MS, 200);
    dq_client *c = NULL;
    dq_jobs *jobs = NULL;
    int rc;
#define STEP(name, call, expect)                                        \
    do {                                                                \
        rc = (call);                                                    \
        if (rc != (expect)) {                                           \
            out->rc = rc < 0 ? rc : DQ_EPROTO;                          \
            snprintf(out->step, sizeof(out->step), "%s", name);         \
            snprintf(out->msg, sizeof(out->msg), "%s (rc %d)",          \
                     dq_errmsg(c), rc);                                 \
            goto done;                                                  \
        }                                                               \
    } while (0)
    STEP("open", dq_open(uri, o, &c), 0);
    admin_cmd(admin, "SCRIPT FLUSH");
    STEP("push", dq_push(c, q, "a", 1, 0, "a", 0, NULL, 0, NULL), 0);
    STEP("push later", dq_push(c, q, "z", 1, 3600000, "z", 0, NULL, 0, NULL),
         0);
    static const void *pl[1500];
    static size_t lens[1500];
    for (int i = 0; i < 1500; i++)
        pl[i] = "b", lens[i] = 1;
    STEP("push_batch", dq_push_batch(c, q, 1500, pl, lens, NULL, NULL, 0,
                                     NULL, NULL),
         1500);
    STEP("poll", dq_poll(c, q, 3, 60000, &jobs, NULL), 3);
    const dq_job *j0 = dq_jobs_at(jobs, 0), *j1 = dq_jobs_at(jobs, 1),
                 *j2 = dq_jobs_at(jobs, 2);
    STEP("ack", dq_ack(c, q, dq_job_id(j0), dq_job_token(j0)), 0);
    /* a retried push of the job just acked: its done record answers */
    int pushed = 0;
    STEP("push done", dq_push(c, q, "r", 1, 0, dq_job_id(j0), 0, NULL, 0,
                              &pushed),
         0);
    if (pushed != DQ_DONE) {
        rc = pushed;
        STEP("push done outcome", DQ_EPROTO, 0);
    }
    STEP("ack stale", dq_ack(c, q, dq_job_id(j1), "999999"), DQ_ESTALE);
    STEP("extend", dq_extend(c, q, dq_job_id(j1), dq_job_token(j1), 1000,
                             NULL),
         0);
    STEP("nack dead", dq_nack_reason(c, q, dq_job_id(j1), dq_job_token(j1),
                                     0, DQ_NACK_DEAD, "why", 3),
         1);
    dq_job_info *info = NULL;
    STEP("get", dq_get(c, q, dq_job_id(j1), &info), 1);
    dq_job_info_free(info);
    dq_jobs *dead = NULL;
    STEP("dead_list", dq_dead_list(c, q, 0, 10, &dead), 1);
    dq_jobs_free(dead);
    STEP("dead_requeue", dq_dead_requeue(c, q, NULL, 0), 1);
    STEP("dead_purge", dq_dead_purge(c, q, NULL), 0);
    STEP("cancel in flight", dq_cancel(c, q, dq_job_id(j2),
                                       DQ_CANCEL_INFLIGHT),
         DQ_CANCELED_INFLIGHT);
    STEP("cancel pending", dq_cancel(c, q, "z", 0), DQ_CANCELED_PENDING);
    int64_t due = -1;
    STEP("stats", dq_stats(c, q, NULL, &due, NULL, NULL, NULL), 0);
    if (due != 1499) {
        rc = (int)due;
        STEP("stats count", DQ_EPROTO, 0);
    }
    /* Job control: reschedule, promote, debounced pushes. */
    STEP("push later 2", dq_push(c, q, "y", 1, 3600000, "y", 0, NULL, 0, NULL),
         0);
    STEP("reschedule", dq_reschedule(c, q, "y", 7200000, 0), DQ_RESCHED_MOVED);
    STEP("promote", dq_promote(c, q, "y", 0), DQ_RESCHED_MOVED);
    STEP("cancel promoted", dq_cancel(c, q, "y", 0), DQ_CANCELED_PENDING);
    int db = 0;
    for (int k = 0; k < 2; k++) {
        STEP("push debounce", dq_push_ex(c, q, "d", 1, 60000, "db",
                                         DQ_PUSH_DEBOUNCE, NULL, NULL, 0, &db),
             0);
        if (db != (k == 0 ? DQ_DEBOUNCE_CREATED : DQ_DEBOUNCE_MOVED)) {
            rc = db;
            STEP("push debounce outcome", DQ_EPROTO, 0);
        }
    }
    STEP("cancel debounced", dq_cancel(c, q, "db", 0), DQ_CANCELED_PENDING);
    /* Queue settings: set (a rate limit too), read, unset. */
    int sets[3] = {DQ_SET_MAX_ATTEMPTS, DQ_SET_RATE_MAX,
                   DQ_SET_RATE_WINDOW_MS};
    int64_t vals[3] = {5, 100000, 1000}, got[3] = {0, 0, 0};
    STEP("config set", dq_config_set(c, q, 3, sets, vals), 0);
    STEP("config get", dq_config_get(c, q, 3, sets, got), 0);
    if (got[1] != 100000)
        STEP("config value", DQ_EPROTO, 0);
    vals[0] = vals[1] = vals[2] = DQ_UNSET;
    STEP("config unset", dq_config_set(c, q, 3, sets, vals), 0);
    /* Drain, then wait idle: SUBSCRIBE, then PINGs every 10 ms. */
    for (int k = 0; k < 10; k++) {
        dq_jobs_free(jobs);
        jobs = NULL;
        rc = dq_poll(c, q, 1000, 60000, &jobs, NULL);
        if (rc <= 0)
            break;
        const char *ids[1000], *toks[1000];
        if (k < 2) /* renew the done key, then outlast its first record */
            th_sleep_ms(120);
        for (int i = 0; i < rc; i++) {
            ids[i] = dq_job_id(dq_jobs_at(jobs, (size_t)i));
            toks[i] = dq_job_token(dq_jobs_at(jobs, (size_t)i));
        }
        /* (the count apart: STEP assigns rc before comparing) */
        int polled = rc;
        STEP("ack_batch", dq_ack_batch(c, q, (size_t)polled, ids, toks, NULL),
             polled);
    }
    STEP("drain poll", rc, 0);
    dq_jobs_free(jobs);
    jobs = NULL;
    STEP("poll_wait", dq_poll_wait(c, q, 1, 1000, 150, &jobs), 0);
    dq_close(c);
    c = NULL;
    /* WAIT: no replica here, so DQ_EREPLICAS (not NOPERM) is success. */
    dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS, 1);
    dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS, 10);
    STEP("open (wait)", dq_open(uri, o, &c), 0);
    STEP("push + WAIT", dq_push(c, q, "w", 1, 0, NULL, 0, NULL, 0, NULL),
         DQ_EREPLICAS);
done:
    dq_jobs_free(jobs);
    dq_close(c);
    dq_options_free(o);
#undef STEP
}

/* ---- password ---- */

#define PW "p@ss:w/rd%x"
#define PW_ENC "p%40ss%3Aw%2Frd%25x"

static int try_open(const char *uri, const dq_options *o, char *msg,
                    size_t size) {
    dq_client *c = NULL;
    int rc = dq_open(uri, o, &c);
    if (rc == 0)
        rc = dq_push(c, "pw", "x", 1, 0, NULL, 0, NULL, 0, NULL);
    snprintf(msg, size, "%s", dq_errmsg(c));
    dq_close(c);
    return rc;
}

START_TEST(password) {
    th_redis r;
    ft_start(&r, 1, "requirepass " PW "\n");
    char uri[600], msg[512];
    long checks = 0;
    snprintf(uri, sizeof(uri), "%s?password=%s", r.uri, PW_ENC);
    ck_assert_msg(try_open(uri, NULL, msg, sizeof(msg)) == 0, "unix: %s",
                  msg);
    snprintf(uri, sizeof(uri), "redis://:%s@127.0.0.1:%d", PW_ENC, r.port);
    ck_assert_msg(try_open(uri, NULL, msg, sizeof(msg)) == 0, "tcp: %s",
                  msg);
    snprintf(uri, sizeof(uri), "redis://default:%s@127.0.0.1:%d/3",
             PW_ENC, r.port);
    ck_assert_msg(try_open(uri, NULL, msg, sizeof(msg)) == 0,
                  "tcp, user default, db 3: %s", msg);
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_PASSWORD, PW), 0);
    ck_assert_msg(try_open(r.uri, o, msg, sizeof(msg)) == 0, "option: %s",
                  msg);
    checks += 4;
    /* The option overrides a wrong password in the URI. */
    snprintf(uri, sizeof(uri), "%s?password=wrong", r.uri);
    ck_assert_msg(try_open(uri, o, msg, sizeof(msg)) == 0,
                  "option over URI: %s", msg);
    dq_options_free(o);
    /* Wrong and missing credentials. */
    int rc = try_open(uri, NULL, msg, sizeof(msg));
    ck_assert_msg(rc == DQ_EAUTH, "wrong password: %s %s", dq_errname(rc),
                  msg);
    ck_assert_msg(strstr(msg, "AUTH") != NULL, "message: %s", msg);
    printf("wrong password: %s\n", msg);
    rc = try_open(r.uri, NULL, msg, sizeof(msg));
    ck_assert_msg(rc == DQ_EAUTH, "no password: %s %s", dq_errname(rc), msg);
    printf("no password: %s\n", msg);
    snprintf(uri, sizeof(uri), "redis://nobody:%s@127.0.0.1:%d",
             PW_ENC, r.port);
    rc = try_open(uri, NULL, msg, sizeof(msg));
    ck_assert_msg(rc == DQ_EAUTH, "unknown user: %s %s", dq_errname(rc),
                  msg);
    checks += 4;
    printf("figures: auth_password: pushed=5 acked=0 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=3 (bad credentials refused with "
           "DQ_EAUTH) checks=%ld\n",
           checks + 0);
    fflush(stdout);
    th_redis_stop(&r);
}
END_TEST

/* ---- ACL ---- */

START_TEST(acl_user) {
    th_redis r;
    ft_start(&r, 0, NULL);
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    set_user(admin, "orders", "opw", NULL);
    char uri[600];
    snprintf(uri, sizeof(uri), "%s?db=1&user=orders&password=opw", r.uri);

    /* Every call on its own queue. */
    outcome out;
    scenario(uri, "orders", admin, &out);
    ck_assert_msg(out.rc == 0, "queue orders, step %s: %s: %s", out.step,
                  dq_errname(out.rc), out.msg);

    /* CONFIG is denied: no warning, no error. */
    dq_client *c = open_uri(uri, NULL);
    ck_assert_str_eq(dq_warnings(c), "");

    /* Another queue: NOPERM, before anything runs. */
    int rc = dq_push(c, "payments", "x", 1, 0, NULL, 0, NULL, 0, NULL);
    char push_msg[512];
    snprintf(push_msg, sizeof(push_msg), "%s", dq_errmsg(c));
    ck_assert_msg(rc == DQ_EREDIS || rc == DQ_EAUTH, "push payments: %s",
                  dq_errname(rc));
    ck_assert_msg(strstr(push_msg, "NOPERM") != NULL, "message: %s",
                  push_msg);
    dq_jobs *jobs = NULL;
    rc = dq_poll(c, "payments", 1, 1000, &jobs, NULL);
    ck_assert_msg(rc == DQ_EREDIS || rc == DQ_EAUTH, "poll payments: %s",
                  dq_errname(rc));
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "NOPERM"));
    rc = dq_poll_wait(c, "payments", 1, 1000, 100, &jobs);
    ck_assert_msg(rc == DQ_EREDIS || rc == DQ_EAUTH, "poll_wait payments: %s",
                  dq_errname(rc));
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "NOPERM"));
    char wait_msg[512];
    snprintf(wait_msg, sizeof(wait_msg), "%s", dq_errmsg(c));
    /* Still usable for its own queue afterwards. */
    ck_assert_int_eq(dq_push(c, "orders", "x", 1, 0, NULL, 0, NULL, 0, NULL),
                     0);
    dq_close(c);

    /* Wrong password for the user. */
    snprintf(uri, sizeof(uri), "%s?user=orders&password=nope", r.uri);
    c = NULL;
    rc = dq_open(uri, NULL, &c);
    ck_assert_msg(rc == DQ_EAUTH, "wrong user password: %s", dq_errname(rc));
    dq_close(c);

    printf("payments push: %s\npayments poll_wait: %s\n", push_msg, wait_msg);
    printf("figures: auth_acl: pushed=1504 acked=1500 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=4 (calls outside the user's keys refused "
           "with NOPERM, wrong password DQ_EAUTH) cancelled=2\n");
    fflush(stdout);
    redisFree(admin);
    th_redis_stop(&r);
}
END_TEST

START_TEST(acl_rule_minimal) {
    th_redis r;
    ft_start(&r, 0, NULL);
    redisContext *admin = th_redis_connect(&r);
    ck_assert_ptr_nonnull(admin);
    char uri[600], report[2048] = "";
    size_t used = 0;
    for (size_t i = 0; i < NCMDS; i++) {
        char name[48];
        snprintf(name, sizeof(name), "no_%s", ACL_CMDS[i]);
        set_user(admin, name, "pw", ACL_CMDS[i]);
        snprintf(uri, sizeof(uri), "%s?db=1&user=%s&password=pw", r.uri,
                 name);
        admin_cmd(admin, "SELECT 1");
        admin_cmd(admin, "FLUSHDB");
        admin_cmd(admin, "SELECT 0");
        outcome out;
        scenario(uri, "orders", admin, &out);
        ck_assert_msg(out.rc != 0,
                      "every call works without +%s: drop it from the rule",
                      ACL_CMDS[i]);
        used += (size_t)snprintf(report + used, sizeof(report) - used,
                                 " %s->%s", ACL_CMDS[i], out.step);
        ck_assert_int_lt(used, sizeof(report));
    }
    printf("figures: acl_rule_minimal: pushed=0 acked=0 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=%zu (users each lacking one command) "
           "needed_by:%s\n",
           NCMDS, report);
    fflush(stdout);
    redisFree(admin);
    th_redis_stop(&r);
}
END_TEST

/* ---- TLS ---- */

#ifdef DQ_TEST_TLS

static char tls_dir[256];

static void tls_setup(void) {
    snprintf(tls_dir, sizeof(tls_dir), "/tmp/dq-redis-tlsXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tls_dir));
    /* CAs, and certificates they sign */
    tu_make_ca(tls_dir, "ca", "ca");
    tu_make_ca(tls_dir, "otherca", "otherca");
    tu_make_cert(tls_dir, "server", "ca", "localhost",
                 "IP:127.0.0.1,DNS:localhost");
    tu_make_cert(tls_dir, "wrongname", "ca", "wrong.example",
                 "DNS:wrong.example");
    tu_make_cert(tls_dir, "client", "ca", "dq-client", NULL);
    tu_make_cert(tls_dir, "badclient", "otherca", "dq-bad-client", NULL);
}

static void tls_teardown(void) { tu_rm_dir(tls_dir, "/tmp/dq-redis-tls"); }

/* A server with a tls-port presenting cert (in tls_dir), trusting ca for
 * client certificates when auth_clients is "yes". */
static int start_tls(th_redis *r, const char *cert, const char *auth) {
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = tu_free_port();
        char conf[1200];
        snprintf(conf, sizeof(conf),
                 "tls-port %d\ntls-cert-file %s/%s.crt\n"
                 "tls-key-file %s/%s.key\ntls-ca-cert-file %s/ca.crt\n"
                 "tls-auth-clients %s\n",
                 port, tls_dir, cert, tls_dir, cert, tls_dir, auth);
        if (th_redis_start(r, 0, conf) == 0)
            return port;
    }
    ck_abort_msg("cannot start redis-server with a tls-port (is it built "
                 "with TLS?)");
    return -1;
}

static dq_options *tls_opts(const char *ca, const char *cert) {
    char path[400];
    dq_options *o = dq_options_new();
    snprintf(path, sizeof(path), "%s/%s.crt", tls_dir, ca);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_TLS_CA_FILE, path), 0);
    if (cert != NULL) {
        snprintf(path, sizeof(path), "%s/%s.crt", tls_dir, cert);
        ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_TLS_CERT_FILE, path),
                         0);
        snprintf(path, sizeof(path), "%s/%s.key", tls_dir, cert);
        ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_TLS_KEY_FILE, path), 0);
    }
    return o;
}

/* Opens and runs a push/poll/ack round trip; returns the first error. */
static int tls_round_trip(const char *uri, const dq_options *o, char *msg,
                          size_t size) {
    dq_client *c = NULL;
    dq_jobs *jobs = NULL;
    int rc = dq_open(uri, o, &c);
    if (rc == 0)
        rc = dq_push(c, "tls", "secret", 6, 0, "t1", 0, NULL, 0, NULL);
    if (rc == 0 && (rc = dq_poll_wait(c, "tls", 1, 5000, 2000, &jobs)) == 1)
        rc = dq_ack(c, "tls", "t1", dq_job_token(dq_jobs_at(jobs, 0)));
    snprintf(msg, size, "%s", dq_errmsg(c));
    dq_jobs_free(jobs);
    dq_close(c);
    return rc;
}

START_TEST(tls_server_verified) {
    th_redis r;
    int port = start_tls(&r, "server", "no");
    char uri[128], msg[512];
    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", port);
    dq_options *good = tls_opts("ca", NULL);
    int rc = tls_round_trip(uri, good, msg, sizeof(msg));
    ck_assert_msg(rc == 0, "TLS with the right CA: %s: %s", dq_errname(rc),
                  msg);
    snprintf(uri, sizeof(uri), "rediss://localhost:%d", port);
    rc = tls_round_trip(uri, good, msg, sizeof(msg));
    ck_assert_msg(rc == 0, "TLS to localhost: %s: %s", dq_errname(rc), msg);
    /* A server certificate the client's CA did not sign: refused. */
    dq_options *other = tls_opts("otherca", NULL);
    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", port);
    rc = tls_round_trip(uri, other, msg, sizeof(msg));
    ck_assert_msg(rc == DQ_EIO, "TLS with the wrong CA: %s: %s",
                  dq_errname(rc), msg);
    ck_assert_msg(strstr(msg, "TLS") != NULL, "message: %s", msg);
    printf("wrong CA: %s\n", msg);
    /* Plain redis:// to a TLS port fails too (no silent downgrade). */
    snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d", port);
    dq_options *o = dq_options_new();
    dq_options_set_int(o, DQ_OPT_CONNECT_TIMEOUT_MS, 1000);
    dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, 1000);
    rc = tls_round_trip(uri, o, msg, sizeof(msg));
    ck_assert_msg(rc != 0, "plain text to a TLS port worked");
    printf("figures: tls_server: pushed=2 acked=2 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=2 (wrong CA refused: DQ_EIO; plain text "
           "refused: %s)\n",
           dq_errname(rc));
    fflush(stdout);
    dq_options_free(o);
    dq_options_free(good);
    dq_options_free(other);
    th_redis_stop(&r);
}
END_TEST

START_TEST(tls_client_certificate) {
    th_redis r;
    int port = start_tls(&r, "server", "yes");
    char uri[128], msg[512];
    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", port);
    dq_options *with = tls_opts("ca", "client");
    int rc = tls_round_trip(uri, with, msg, sizeof(msg));
    ck_assert_msg(rc == 0, "client certificate given: %s: %s",
                  dq_errname(rc), msg);
    dq_options *without = tls_opts("ca", NULL);
    rc = tls_round_trip(uri, without, msg, sizeof(msg));
    ck_assert_msg(rc == DQ_EIO, "no client certificate: %s: %s",
                  dq_errname(rc), msg);
    char no_cert[512];
    snprintf(no_cert, sizeof(no_cert), "%s", msg);
    dq_options *bad = tls_opts("ca", "badclient");
    rc = tls_round_trip(uri, bad, msg, sizeof(msg));
    ck_assert_msg(rc == DQ_EIO, "client certificate of another CA: %s: %s",
                  dq_errname(rc), msg);
    printf("no client cert: %s\nbad client cert: %s\n", no_cert, msg);
    printf("figures: tls_client_cert: pushed=1 acked=1 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=2 (missing and foreign client "
           "certificates refused)\n");
    fflush(stdout);
    dq_options_free(with);
    dq_options_free(without);
    dq_options_free(bad);
    th_redis_stop(&r);
}
END_TEST

START_TEST(tls_server_name_checked) {
    /* The server presents a certificate from the trusted CA, but for
     * another name: a client connecting to 127.0.0.1 must refuse it, or
     * anyone holding any certificate of that CA can impersonate Redis. */
    th_redis r;
    int port = start_tls(&r, "wrongname", "no");
    char uri[128], msg[512];
    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", port);
    dq_options *o = tls_opts("ca", NULL);
    int rc = tls_round_trip(uri, o, msg, sizeof(msg));
    printf("certificate for wrong.example at 127.0.0.1: %s %s\n",
           dq_errname(rc), msg);
    printf("figures: tls_server_name: pushed=%d acked=%d lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=1 (certificate of the right CA for "
           "another name: %s)\n",
           rc == 0, rc == 0, rc == DQ_EIO ? "refused" : "ACCEPTED");
    fflush(stdout);
    ck_assert_msg(rc == DQ_EIO,
                  "a certificate for wrong.example was accepted for "
                  "127.0.0.1 (%s): the server name is not verified",
                  dq_errname(rc));
    dq_options_free(o);
    th_redis_stop(&r);
}
END_TEST

#else /* no TLS in this build */

START_TEST(tls_unsupported) {
    th_redis r;
    ft_start(&r, 1, NULL);
    char uri[128];
    snprintf(uri, sizeof(uri), "rediss://127.0.0.1:%d", r.port);
    dq_client *c = NULL;
    int rc = dq_open(uri, NULL, &c);
    ck_assert_msg(rc == DQ_ENOTSUP, "rediss:// without TLS: %s",
                  dq_errname(rc));
    ck_assert_msg(strstr(dq_errmsg(c), "TLS") != NULL, "message: %s",
                  dq_errmsg(c));
    printf("rediss:// in a build without TLS: %s\n", dq_errmsg(c));
    dq_close(c);
    static const int keys[] = {DQ_OPT_TLS_CA_FILE, DQ_OPT_TLS_CERT_FILE,
                               DQ_OPT_TLS_KEY_FILE, DQ_OPT_TLS_SERVER_NAME};
    snprintf(uri, sizeof(uri), "redis://127.0.0.1:%d", r.port);
    for (size_t i = 0; i < 4; i++) {
        dq_options *o = dq_options_new();
        ck_assert_int_eq(dq_options_set_str(o, keys[i], "/nonexistent"), 0);
        c = NULL;
        rc = dq_open(uri, o, &c);
        ck_assert_msg(rc == DQ_ENOTSUP, "TLS option %d: %s", keys[i],
                      dq_errname(rc));
        dq_close(c);
        dq_options_free(o);
    }
    printf("figures: tls_unsupported: pushed=0 acked=0 lost=0 dup_ack=0 "
           "dup_in_lease=0 faults=5 (TLS asked of a build without it: "
           "DQ_ENOTSUP)\n");
    fflush(stdout);
    th_redis_stop(&r);
}
END_TEST

#endif

/* The TLS tests (with hiredis_ssl) or the test that TLS is refused
 * (without); #ifdef cannot sit inside TEST_SUITE's arguments. */
#ifdef DQ_TEST_TLS
static const tu_fixture tls_fixture = {tls_setup, tls_teardown};
#define AUTH_TLS_TESTS \
    {"tls_server_verified", tls_server_verified, 60, &tls_fixture}, \
    {"tls_client_certificate", tls_client_certificate, 60, &tls_fixture}, \
    {"tls_server_name_checked", tls_server_name_checked, 60, &tls_fixture}
#else
#define AUTH_TLS_TESTS \
    {"tls_unsupported", tls_unsupported, 60, NULL}
#endif

TEST_SUITE("fault_auth", TU_SRV_NONE,
    {"password", password, 60, NULL},
    {"acl_user", acl_user, 60, NULL},
    {"acl_rule_minimal", acl_rule_minimal, 120, NULL},
    AUTH_TLS_TESTS)
