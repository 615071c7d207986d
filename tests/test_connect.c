/*
 * tests/test_connect.c - dq_open: URI forms (TCP, unix socket, database
 * selection), bad URIs, refused connections, AUTH with a password or an ACL
 * user, connect-time warnings and the version functions.
 */
#include "test_suite.h"
#include "test_utils.h"

/* Checks that a push through c lands in database db (and not in db 0). */
static void check_db(dq_client *c, const char *queue, int db) {
    push_text(c, queue, "x", 60000, "in-db", 0, NULL);
    redisContext *r = rconn();
    if (db != 0)
        ck_assert_int_eq(tu_job_stored(r, "dq", queue, "in-db"), 0);
    redisReply *rep = th_cmd(r, "SELECT %d", db);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    ck_assert_int_eq(tu_job_stored(r, "dq", queue, "in-db"), 1);
    redisFree(r);
}

/* The TCP URIs: "redis://127.0.0.1:<port><path>", partitioned as g_srv.uri
 * is (tu_uri). */
static const char *tcp(char *uri, size_t n, const char *host, const char *path) {
    char base[128];
    snprintf(base, sizeof(base), "redis://%s:%d%s", host, g_srv.port, path);
    return tu_uri(base, NULL, uri, n);
}

START_TEST(tcp_uri) {
    ck_assert_int_gt(g_srv.port, 0);
    char uri[160];
    dq_client *c = open_uri(tcp(uri, sizeof(uri), "127.0.0.1", ""), NULL);
    ck_assert_str_eq(dq_warnings(c), "");
    push_text(c, Q, "tcp", 0, "t", 0, NULL);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "tcp");
    ck_assert_int_eq(dq_ack(c, Q, "t", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    check_db(c, "tcp-db0", 0);
    dq_close(c);
    /* with a database and a trailing slash form */
    c = open_uri(tcp(uri, sizeof(uri), "127.0.0.1", "/3"), NULL);
    check_db(c, "tcp-db3", 3);
    dq_close(c);
    c = open_uri(tcp(uri, sizeof(uri), "127.0.0.1", "/"), NULL);
    dq_close(c);
    c = open_uri(tcp(uri, sizeof(uri), "localhost", ""), NULL);
    dq_close(c);
}
END_TEST

START_TEST(unix_uri_db) {
    char uri[500];
    uri_with("db=2", uri, sizeof(uri));
    dq_client *c = open_uri(uri, NULL);
    check_db(c, Q, 2);
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(c, Q, 10, 1000, &jobs, &next), 0);
    ck_assert_msg(next > 59000, "next %" PRId64, next);
    dq_close(c);
    /* the same queue in db 0 is a different queue */
    c = open_client();
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_close(c);
}
END_TEST

START_TEST(bad_uris) {
    static const char *const bad[] = {
        "",
        "http://127.0.0.1:6379",
        "redis:/127.0.0.1",
        "redis://",
        "redis://:6379",
        "redis://127.0.0.1:0",
        "redis://127.0.0.1:65536",
        "redis://127.0.0.1:abc",
        "redis://127.0.0.1:",
        "redis://127.0.0.1/x",
        "redis://127.0.0.1/-1",
        "redis://[::1",
        "redis://[::1]x",
        "redis://a b",
        "redis://u:p%zz@127.0.0.1",
        "redis://u:p%4@127.0.0.1",
        "redis://u:p%00@127.0.0.1",
        "unix://",
        "unix:///tmp/x.sock?db=abc",
        "unix:///tmp/x.sock?db=",
        "unix:///tmp/x.sock?db=-1",
        "unix:///tmp/x.sock?nodb",
        "unix:///tmp/x.sock?color=red",
        "unix:///tmp/%zz.sock",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dq_client *c = NULL;
        int rc = dq_open(bad[i], NULL, &c);
        ck_assert_msg(rc == DQ_EURI, "'%s': %d, expected DQ_EURI", bad[i], rc);
        ck_assert_msg(c != NULL, "'%s': *out is NULL", bad[i]);
        ck_assert_msg(dq_errmsg(c)[0] != '\0', "'%s': empty message", bad[i]);
        ck_assert_int_eq(dq_errcode(c), DQ_EURI);
        dq_close(c);
    }
    /* 4097 bytes */
    char *huge = malloc(4200);
    strcpy(huge, "redis://");
    memset(huge + 8, 'h', 4089);
    huge[4097] = '\0';
    dq_client *c = NULL;
    ck_assert_int_eq(dq_open(huge, NULL, &c), DQ_EURI);
    ck_assert_ptr_nonnull(c);
    dq_close(c);
    free(huge);
    /* unix socket path over 107 bytes */
    char path[200] = "unix:///tmp/";
    memset(path + 12, 'p', 120);
    path[132] = '\0';
    ck_assert_int_eq(dq_open(path, NULL, &c), DQ_EURI);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "path"));
    dq_close(c);
}
END_TEST

START_TEST(refused) {
    dq_client *c = NULL;
    /* nothing listens on port 1 */
    int rc = dq_open("redis://127.0.0.1:1", NULL, &c);
    ck_assert_msg(rc == DQ_EIO, "refused TCP: %d %s", rc, dq_errmsg(c));
    ck_assert_ptr_nonnull(c);
    ck_assert_str_ne(dq_errmsg(c), "");
    dq_close(c);
    char uri[600];
    snprintf(uri, sizeof(uri), "unix://%s/no-such.sock", g_srv.dir);
    rc = dq_open(uri, NULL, &c);
    ck_assert_msg(rc == DQ_EIO, "missing socket: %d %s", rc, dq_errmsg(c));
    ck_assert_ptr_nonnull(c);
    ck_assert_str_ne(dq_errmsg(c), "");
    dq_close(c);
    /* NULL uri: a client that holds the message */
    rc = dq_open(NULL, NULL, &c);
    ck_assert_int_eq(rc, DQ_ENULL);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "uri"));
    dq_close(c);
    ck_assert_int_eq(dq_open(g_srv.uri, NULL, NULL), DQ_ENULL);
}
END_TEST

/* A database the server does not have: SELECT is refused. */
START_TEST(select_refused) {
    char uri[500];
    uri_with("db=999", uri, sizeof(uri));
    dq_client *c = NULL;
    int rc = dq_open(uri, NULL, &c);
    ck_assert_msg(rc == DQ_EREDIS, "SELECT 999: %d %s", rc, dq_errmsg(c));
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "SELECT"));
    dq_close(c);
}
END_TEST

START_TEST(auth_password) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 1, "requirepass s3cr@t:/x"), 0);
    char uri[600];
    dq_client *c = NULL;
    char base[600];
    /* good, percent-encoded in a TCP URI */
    snprintf(base, sizeof(base), "redis://:s3cr%%40t%%3A%%2Fx@127.0.0.1:%d",
             srv.port);
    c = open_uri(tu_uri(base, NULL, uri, sizeof(uri)), NULL);
    push_text(c, Q, "authed", 0, NULL, 0, NULL);
    dq_close(c);
    /* good, in a unix URI */
    c = open_uri(tu_uri(srv.uri, "password=s3cr%40t%3A%2Fx&db=1", uri,
                        sizeof(uri)),
                 NULL);
    push_text(c, Q, "authed", 0, NULL, 0, NULL);
    dq_close(c);
    /* bad password */
    snprintf(base, sizeof(base), "redis://:wrong@127.0.0.1:%d", srv.port);
    int rc = dq_open(tu_uri(base, NULL, uri, sizeof(uri)), NULL, &c);
    ck_assert_msg(rc == DQ_EAUTH, "bad password: %d %s", rc, dq_errmsg(c));
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "AUTH"));
    dq_close(c);
    /* DQ_OPT_PASSWORD overrides the URI's */
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_PASSWORD, "s3cr@t:/x"), 0);
    c = open_uri(uri, o);
    push_text(c, Q, "override", 0, NULL, 0, NULL);
    dq_close(c);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_PASSWORD, "nope"), 0);
    rc = dq_open(tu_uri(srv.uri, "password=s3cr%40t%3A%2Fx", uri, sizeof(uri)),
                 o, &c);
    ck_assert_int_eq(rc, DQ_EAUTH);
    dq_close(c);
    dq_options_free(o);
    /* no password at all: refused with DQ_EAUTH, by dq_open or by the first
     * command (Redis answers an unauthenticated EVALSHA with "ERR Protocol
     * error: unauthenticated multibulk length" and closes the link) */
    rc = dq_open(tu_uri(srv.uri, NULL, uri, sizeof(uri)), NULL, &c);
    if (rc == 0) {
        rc = dq_push(c, Q, "x", 1, 0, NULL, 0, NULL, 0, NULL);
        ck_assert_msg(rc == DQ_EAUTH, "push without AUTH: %d %s", rc,
                      dq_errmsg(c));
    } else {
        ck_assert_int_eq(rc, DQ_EAUTH);
    }
    dq_close(c);
    th_redis_stop(&srv);
}
END_TEST

START_TEST(auth_acl_user) {
    th_redis srv;
    ck_assert_int_eq(
        th_redis_start(&srv, 1,
                       "user default off\n"
                       "user alice on >wonder#land ~* &* +@all\n"
                       "user bob on >builder ~other:* &* +@all"),
        0);
    char uri[600], base[600];
    snprintf(base, sizeof(base), "redis://alice:wonder%%23land@127.0.0.1:%d/2",
             srv.port);
    dq_client *c = open_uri(tu_uri(base, NULL, uri, sizeof(uri)), NULL);
    push_text(c, Q, "alice", 0, "a", 0, NULL);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_int_eq(dq_ack(c, Q, "a", dq_job_token(dq_jobs_at(jobs, 0))), 0);
    dq_jobs_free(jobs);
    dq_close(c);
    c = open_uri(tu_uri(srv.uri, "user=alice&password=wonder%23land", uri,
                        sizeof(uri)),
                 NULL);
    dq_close(c);
    /* user from the options */
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_USERNAME, "alice"), 0);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_PASSWORD, "wonder#land"), 0);
    c = open_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), o);
    dq_close(c);
    dq_options_free(o);
    /* wrong password for the user */
    snprintf(base, sizeof(base), "redis://alice:rabbit@127.0.0.1:%d", srv.port);
    int rc = dq_open(tu_uri(base, NULL, uri, sizeof(uri)), NULL, &c);
    ck_assert_msg(rc == DQ_EAUTH, "bad ACL password: %d %s", rc, dq_errmsg(c));
    dq_close(c);
    /* a user without access to our keys: Redis's NOPERM text is carried */
    snprintf(base, sizeof(base), "redis://bob:builder@127.0.0.1:%d", srv.port);
    c = open_uri(tu_uri(base, NULL, uri, sizeof(uri)), NULL);
    rc = dq_push(c, Q, "x", 1, 0, NULL, 0, NULL, 0, NULL);
    ck_assert_msg(rc < 0, "push without key permission: %d", rc);
    ck_assert_msg(strstr(dq_errmsg(c), "NOPERM") != NULL ||
                      strstr(dq_errmsg(c), "permission") != NULL,
                  "message: %s", dq_errmsg(c));
    dq_close(c);
    th_redis_stop(&srv);
}
END_TEST

/* Listpack limits below the compact layout's (120 entries, 64-byte values)
 * are reported, each by name, beside an eviction warning; stock limits are
 * not. */
START_TEST(warnings_listpack) {
    redisContext *r = rconn();
    redisReply *e = th_cmd(r, "CONFIG GET hash-max-listpack-entries");
    redisReply *v = th_cmd(r, "CONFIG GET hash-max-listpack-value");
    ck_assert(e->type == REDIS_REPLY_ARRAY && e->elements == 2);
    ck_assert(v->type == REDIS_REPLY_ARRAY && v->elements == 2);
    dq_client *c = open_client();
    ck_assert_str_eq(dq_warnings(c), "");
    dq_close(c);
    freeReplyObject(th_cmd(r, "CONFIG SET hash-max-listpack-value 32"));
    c = open_client();
    ck_assert_msg(strstr(dq_warnings(c), "hash-max-listpack-value is 32") &&
                      !strstr(dq_warnings(c), "entries"),
                  "warnings: %s", dq_warnings(c));
    dq_close(c);
    freeReplyObject(th_cmd(r, "CONFIG SET hash-max-listpack-entries 64"));
    freeReplyObject(th_cmd(r, "CONFIG SET maxmemory-policy allkeys-lru"));
    c = open_client();
    const char *w = dq_warnings(c);
    ck_assert_msg(strstr(w, "hash-max-listpack-value is 32") &&
                      strstr(w, "hash-max-listpack-entries is 64") &&
                      strstr(w, "allkeys-lru") && strstr(w, "; "),
                  "warnings: %s", w);
    dq_close(c);
    freeReplyObject(th_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
    freeReplyObject(th_cmd(r, "CONFIG SET hash-max-listpack-entries %s",
                           e->element[1]->str));
    freeReplyObject(th_cmd(r, "CONFIG SET hash-max-listpack-value %s",
                           v->element[1]->str));
    c = open_client();
    ck_assert_str_eq(dq_warnings(c), "");
    dq_close(c);
    freeReplyObject(e);
    freeReplyObject(v);
    redisFree(r);
}
END_TEST

START_TEST(warnings_eviction) {
    redisContext *r = rconn();
    freeReplyObject(th_cmd(r, "CONFIG SET maxmemory-policy allkeys-lru"));
    dq_client *c = open_client();
    ck_assert_ptr_nonnull(strstr(dq_warnings(c), "allkeys-lru"));
    dq_close(c);
    freeReplyObject(th_cmd(r, "CONFIG SET maxmemory-policy noeviction"));
    c = open_client();
    ck_assert_str_eq(dq_warnings(c), "");
    dq_close(c);
    ck_assert_str_eq(dq_warnings(NULL), "");
    redisFree(r);
}
END_TEST

START_TEST(versions) {
    ck_assert_int_eq(dq_version_number(), DQ_VERSION_NUMBER);
    ck_assert_str_eq(dq_version_string(), DQ_VERSION_STRING);
    ck_assert(DQ_AT_LEAST_VERSION(0, 1, 0));
    ck_assert(!DQ_AT_LEAST_VERSION(99, 0, 0));
    char buf[32];
    snprintf(buf, sizeof(buf), "%d.%d.%d", DQ_VERSION_MAJOR, DQ_VERSION_MINOR,
             DQ_VERSION_PATCH);
    ck_assert_str_eq(buf, DQ_VERSION_STRING);
}
END_TEST

/* Options set on the opts object are copied: freeing it right after
 * dq_open changes nothing. */
START_TEST(options_copied) {
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_MAX_PAYLOAD, 10), 0);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, "copied"), 0);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    ck_assert_int_eq(dq_push(c, Q, "12345678901", 11, 0, NULL, 0, NULL, 0, NULL),
                     DQ_ETOOBIG);
    push_text(c, Q, "1234567890", 0, "k", 0, NULL);
    redisContext *r = rconn();
    ck_assert_int_eq(tu_job_stored(r, "copied", Q, "k"), 1);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("connect", TU_SRV_TCP,
    {"tcp", tcp_uri, 30, NULL},
    {"unix_db", unix_uri_db, 30, NULL},
    {"bad_uris", bad_uris, 30, NULL},
    {"refused", refused, 30, NULL},
    {"select_refused", select_refused, 30, NULL},
    {"auth_password", auth_password, 30, NULL},
    {"auth_acl_user", auth_acl_user, 30, NULL},
    {"warnings", warnings_eviction, 30, NULL},
    {"warnings_listpack", warnings_listpack, 30, NULL},
    {"versions", versions, 30, NULL},
    {"options_copied", options_copied, 30, NULL})
