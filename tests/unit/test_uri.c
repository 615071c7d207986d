/*
 * tests/unit/test_uri.c - white-box tests of lib/uri.c (dq__uri_parse): every
 * URI form, percent-decoding, IPv6 literals, ports, databases, bad escapes
 * and over-long parts.  No Redis involved.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "uri.h"

/* Parses s, which must succeed; returns the parsed URI (caller clears). */
static dq__uri parse_ok(const char *s) {
    dq__uri u;
    dq__err err = {0, ""};
    int rc = dq__uri_parse(s, &u, &err);
    ck_assert_msg(rc == DQ_OK, "'%s': %d %s", s, rc, err.msg);
    return u;
}

/* Parses s, which must fail with code; the message must not be empty and
 * nothing may be left allocated (u zeroed). */
static void parse_bad(const char *s, int code) {
    dq__uri u;
    dq__err err = {0, ""};
    int rc = dq__uri_parse(s, &u, &err);
    ck_assert_msg(rc == code, "'%s': %d (%s), expected %d", s ? s : "(null)",
                  rc, err.msg, code);
    ck_assert_int_eq(err.code, code);
    ck_assert_msg(err.msg[0] != '\0', "'%s': empty message", s ? s : "(null)");
    ck_assert_ptr_null(u.host);
    ck_assert_ptr_null(u.path);
    ck_assert_ptr_null(u.user);
    ck_assert_ptr_null(u.password);
}

#define ck_str_or_null(got, want)                                             \
    do {                                                                      \
        if ((want) == NULL)                                                   \
            ck_assert_ptr_null(got);                                          \
        else {                                                                \
            ck_assert_ptr_nonnull(got);                                       \
            ck_assert_str_eq((got), (want));                                  \
        }                                                                     \
    } while (0)

static void tcp_case(const char *s, const char *host, int port, int db,
                     const char *user, const char *password, int tls) {
    dq__uri u = parse_ok(s);
    ck_assert_int_eq(u.kind, DQ_URI_TCP);
    ck_assert_int_eq(u.tls, tls);
    ck_assert_str_eq(u.host, host);
    ck_assert_int_eq(u.port, port);
    ck_assert_int_eq(u.db, db);
    ck_assert_ptr_null(u.path);
    ck_str_or_null(u.user, user);
    ck_str_or_null(u.password, password);
    dq__uri_clear(&u);
    ck_assert_ptr_null(u.host);
}

static void unix_case(const char *s, const char *path, int db,
                      const char *user, const char *password) {
    dq__uri u = parse_ok(s);
    ck_assert_int_eq(u.kind, DQ_URI_UNIX);
    ck_assert_int_eq(u.tls, 0);
    ck_assert_str_eq(u.path, path);
    ck_assert_ptr_null(u.host);
    ck_assert_int_eq(u.db, db);
    ck_str_or_null(u.user, user);
    ck_str_or_null(u.password, password);
    dq__uri_clear(&u);
}

START_TEST(tcp_forms) {
    tcp_case("redis://localhost", "localhost", 6379, 0, NULL, NULL, 0);
    tcp_case("redis://127.0.0.1:6380", "127.0.0.1", 6380, 0, NULL, NULL, 0);
    tcp_case("redis://h:1/15", "h", 1, 15, NULL, NULL, 0);
    tcp_case("redis://h:65535/", "h", 65535, 0, NULL, NULL, 0);
    tcp_case("redis://h/0", "h", 6379, 0, NULL, NULL, 0);
    tcp_case("redis://h/1000000", "h", 6379, 1000000, NULL, NULL, 0);
    tcp_case("redis://redis.example.com:7000/2", "redis.example.com", 7000, 2,
             NULL, NULL, 0);
    tcp_case("rediss://h:6390", "h", 6390, 0, NULL, NULL, 1);
}
END_TEST

START_TEST(tcp_credentials) {
    tcp_case("redis://user:pw@h", "h", 6379, 0, "user", "pw", 0);
    tcp_case("redis://:pw@h:1", "h", 1, 0, NULL, "pw", 0);
    tcp_case("redis://user@h", "h", 6379, 0, "user", NULL, 0);
    tcp_case("redis://user:@h", "h", 6379, 0, "user", "", 0);
    tcp_case("redis://@h", "h", 6379, 0, NULL, NULL, 0);
    /* the last '@' ends the credentials; the first ':' splits them */
    tcp_case("redis://u:p@ss@h", "h", 6379, 0, "u", "p@ss", 0);
    tcp_case("redis://u:p:w@h", "h", 6379, 0, "u", "p:w", 0);
    /* percent-decoding of user and password */
    tcp_case("redis://al%69ce:p%40ss%3Aw%2Frd%20%25@h/3", "h", 6379, 3, "alice",
             "p@ss:w/rd %", 0);
    tcp_case("redis://u:%e6%97%a5@h", "h", 6379, 0, "u", "\xe6\x97\xa5", 0);
    tcp_case("rediss://u:p@h:1/1", "h", 1, 1, "u", "p", 1);
}
END_TEST

START_TEST(ipv6) {
    tcp_case("redis://[::1]:6380", "::1", 6380, 0, NULL, NULL, 0);
    tcp_case("redis://[::1]", "::1", 6379, 0, NULL, NULL, 0);
    tcp_case("redis://[::1]/4", "::1", 6379, 4, NULL, NULL, 0);
    tcp_case("redis://u:p@[fe80::1:2]:7000/1", "fe80::1:2", 7000, 1, "u", "p", 0);
    parse_bad("redis://[::1", DQ_EURI);
    parse_bad("redis://[::1]x", DQ_EURI);
    parse_bad("redis://[::1]:", DQ_EURI);
    parse_bad("redis://[::1]:0", DQ_EURI);
    parse_bad("redis://[]:6379", DQ_EURI);
}
END_TEST

START_TEST(bad_ports) {
    const char *bad[] = {
        "redis://h:0",      "redis://h:65536",   "redis://h:99999",
        "redis://h:-1",     "redis://h:abc",     "redis://h:",
        "redis://h:6379x",  "redis://h:1234567890", "redis://h: 6379",
        "redis://h:+80",    "redis://h:6379:1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        parse_bad(bad[i], DQ_EURI);
}
END_TEST

START_TEST(bad_db) {
    parse_bad("redis://h/x", DQ_EURI);
    parse_bad("redis://h/-1", DQ_EURI);
    parse_bad("redis://h/1000001", DQ_EURI);
    parse_bad("redis://h/1/2", DQ_EURI);
    parse_bad("redis://h/1?x=y", DQ_EURI);
    parse_bad("unix:///s?db=1000001", DQ_EURI);
    parse_bad("unix:///s?db=x", DQ_EURI);
    parse_bad("unix:///s?db=", DQ_EURI);
    parse_bad("unix:///s?db=-2", DQ_EURI);
}
END_TEST

START_TEST(bad_hosts) {
    parse_bad("redis://", DQ_EURI);
    parse_bad("redis://:6379", DQ_EURI);
    parse_bad("redis://u:p@", DQ_EURI);
    parse_bad("redis:///0", DQ_EURI);
    parse_bad("redis://a b", DQ_EURI);
    parse_bad("redis://a\tb", DQ_EURI);
    parse_bad("redis://a%20b", DQ_EURI);
    parse_bad("redis://a?b", DQ_EURI);
    parse_bad("redis://a#b", DQ_EURI);
    char host[300] = "redis://";
    memset(host + 8, 'h', 256);
    host[8 + 256] = '\0';
    parse_bad(host, DQ_EURI);
    host[8 + 255] = '\0';
    dq__uri u = parse_ok(host);
    ck_assert_uint_eq(strlen(u.host), 255);
    dq__uri_clear(&u);
}
END_TEST

START_TEST(bad_escapes) {
    const char *bad[] = {
        "redis://u:%zz@h",  "redis://u:%4@h",    "redis://u:%@h",
        "redis://u:p%@h",   "redis://u:%00@h",   "redis://%g1:p@h",
        "redis://%:p@h",    "unix:///s?password=%",
        "unix:///s?password=%0",  "unix:///s?user=%00",
        "unix:///tmp/%zz",  "unix:///tmp/%00x",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        parse_bad(bad[i], DQ_EURI);
}
END_TEST

START_TEST(unix_forms) {
    unix_case("unix:///tmp/redis.sock", "/tmp/redis.sock", 0, NULL, NULL);
    unix_case("unix:///tmp/r.sock?db=2", "/tmp/r.sock", 2, NULL, NULL);
    unix_case("unix:///r.sock?db=2&user=bob&password=s%20e%26cret", "/r.sock", 2,
              "bob", "s e&cret");
    unix_case("unix:///r.sock?password=pw", "/r.sock", 0, NULL, "pw");
    unix_case("unix:///r.sock?user=u&db=9", "/r.sock", 9, "u", NULL);
    unix_case("unix:///a%20dir/r.sock", "/a dir/r.sock", 0, NULL, NULL);
    unix_case("unix://relative.sock", "relative.sock", 0, NULL, NULL);
    /* the longest path a sockaddr_un holds */
    char s[200] = "unix://";
    memset(s + 7, 'p', 107);
    s[7 + 107] = '\0';
    dq__uri u = parse_ok(s);
    ck_assert_uint_eq(strlen(u.path), 107);
    dq__uri_clear(&u);
}
END_TEST

START_TEST(unix_bad) {
    parse_bad("unix://", DQ_EURI);
    parse_bad("unix://?db=1", DQ_EURI);
    parse_bad("unix:///s?", DQ_EURI);
    parse_bad("unix:///s?db", DQ_EURI);
    parse_bad("unix:///s?foo=1", DQ_EURI);
    parse_bad("unix:///s?db=1&", DQ_EURI);
    parse_bad("unix:///s?db=1&&user=u", DQ_EURI);
    char s[200] = "unix://";
    memset(s + 7, 'p', 108);
    s[7 + 108] = '\0';
    parse_bad(s, DQ_EURI);
}
END_TEST

START_TEST(schemes_and_lengths) {
    parse_bad(NULL, DQ_ENULL);
    parse_bad("", DQ_EURI);
    parse_bad("http://h", DQ_EURI);
    parse_bad("REDIS://h", DQ_EURI);
    parse_bad("redis:/h", DQ_EURI);
    parse_bad("redis:h", DQ_EURI);
    parse_bad("tcp://h:6379", DQ_EURI);
    parse_bad("unix:/tmp/s", DQ_EURI);
    parse_bad(" redis://h", DQ_EURI);
    /* a URI over 4096 bytes is refused before parsing */
    char *s = malloc(5000);
    strcpy(s, "unix:///");
    memset(s + 8, 'x', 4089);
    s[4097] = '\0';
    parse_bad(s, DQ_EURI);
    free(s);
}
END_TEST

/* dq__uri_clear is safe on a zeroed struct and twice in a row. */
START_TEST(clear_twice) {
    dq__uri u;
    memset(&u, 0, sizeof(u));
    dq__uri_clear(&u);
    u = parse_ok("redis://u:p@h:1/2");
    dq__uri_clear(&u);
    dq__uri_clear(&u);
    /* err may be NULL */
    ck_assert_int_eq(dq__uri_parse("bogus", &u, NULL), DQ_EURI);
    ck_assert_int_eq(dq__uri_parse("redis://h", &u, NULL), DQ_OK);
    dq__uri_clear(&u);
}
END_TEST

/* Cluster and Sentinel URIs: several hosts, default ports, the primary's
 * name, partitions. */
START_TEST(cluster_and_sentinel) {
    dq__uri u = parse_ok("redis+cluster://u:p@h1:7000,[::1]:7001,h3");
    ck_assert_int_eq(u.kind, DQ_URI_CLUSTER);
    ck_assert_int_eq(u.nseeds, 3);
    ck_assert_str_eq(u.seeds[0].host, "h1");
    ck_assert_int_eq(u.seeds[0].port, 7000);
    ck_assert_str_eq(u.seeds[1].host, "::1");
    ck_assert_int_eq(u.seeds[1].port, 7001);
    ck_assert_str_eq(u.seeds[2].host, "h3");
    ck_assert_int_eq(u.seeds[2].port, 6379);
    ck_assert_str_eq(u.host, "h1"); /* the first seed */
    ck_assert_str_eq(u.user, "u");
    ck_assert_str_eq(u.password, "p");
    ck_assert_int_eq(u.partitions, 0);
    dq__uri_clear(&u);
    u = parse_ok("rediss+cluster://h:1/?partitions=16");
    ck_assert_int_eq(u.tls, 1);
    ck_assert_int_eq(u.partitions, 16);
    dq__uri_clear(&u);
    u = parse_ok("redis+cluster://h:1/0");
    ck_assert_int_eq(u.db, 0);
    dq__uri_clear(&u);

    u = parse_ok("redis+sentinel://s1,s2:26380/my%20master/3?partitions=4");
    ck_assert_int_eq(u.kind, DQ_URI_SENTINEL);
    ck_assert_int_eq(u.nseeds, 2);
    ck_assert_int_eq(u.seeds[0].port, 26379);
    ck_assert_int_eq(u.seeds[1].port, 26380);
    ck_assert_str_eq(u.master, "my master");
    ck_assert_int_eq(u.db, 3);
    ck_assert_int_eq(u.partitions, 4);
    dq__uri_clear(&u);
    u = parse_ok("redis://h/2?partitions=1024");
    ck_assert_int_eq(u.partitions, 1024);
    dq__uri_clear(&u);
    u = parse_ok("unix:///s?db=2&partitions=3");
    ck_assert_int_eq(u.partitions, 3);
    ck_assert_int_eq(u.layout, DQ_LAYOUT_DEFAULT);
    dq__uri_clear(&u);
    u = parse_ok("redis://h?layout=compact&partitions=2");
    ck_assert_int_eq(u.layout, DQ_LAYOUT_COMPACT);
    dq__uri_clear(&u);
    u = parse_ok("redis://h?layout=compact-push");
    ck_assert_int_eq(u.layout, DQ_LAYOUT_COMPACT_PUSH);
    dq__uri_clear(&u);
    u = parse_ok("redis://h?layout=default");
    ck_assert_int_eq(u.layout, DQ_LAYOUT_DEFAULT);
    dq__uri_clear(&u);

    parse_bad("redis+cluster://h:1/1", DQ_EURI);      /* db 0 only */
    parse_bad("redis+cluster://h1,,h2", DQ_EURI);     /* empty host */
    parse_bad("redis+cluster://h1,", DQ_EURI);
    parse_bad("redis+sentinel://s1,s2", DQ_EURI);     /* no primary name */
    parse_bad("redis+sentinel://s1/", DQ_EURI);
    parse_bad("redis+sentinel://s1/m/x", DQ_EURI);
    parse_bad("redis://h1,h2", DQ_EURI);              /* one node: one host */
    parse_bad("redis://h?partitions=0", DQ_EURI);
    parse_bad("redis://h?partitions=1025", DQ_EURI);
    parse_bad("redis://h?layout=compactpush", DQ_EURI);
    parse_bad("redis://h?layout=", DQ_EURI);
    parse_bad("redis://h?db=1", DQ_EURI);             /* db goes in the path */
    parse_bad("redis+cluster://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", DQ_EURI);
}
END_TEST

static Suite *uri_suite(void) {
    Suite *s = suite_create("uri");
    struct {
        const char *name;
        const TTest *test;
    } tests[] = {
        {"tcp_forms", tcp_forms},     {"tcp_credentials", tcp_credentials},
        {"ipv6", ipv6},               {"bad_ports", bad_ports},
        {"bad_db", bad_db},           {"bad_hosts", bad_hosts},
        {"bad_escapes", bad_escapes}, {"unix_forms", unix_forms},
        {"unix_bad", unix_bad},       {"schemes", schemes_and_lengths},
        {"clear", clear_twice},       {"cluster", cluster_and_sentinel},
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(uri_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
