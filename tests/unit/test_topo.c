/*
 * tests/unit/test_topo.c - white-box tests of lib/topo.c, the routing state
 * machine both clients drive: replies (made from RESP text by hiredis's
 * own reply parser), failures and times are fed in, and the actions it
 * answers are checked; and the Sentinel replies it reads (the primary's
 * address, +switch-master).  No Redis involved.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "reply_text.h"
#include "topo.h"

static dq__uri uri;
static dq__topo T;

/* T for the URI s (blocking or not), commands timing out after 1 s. */
static void start(const char *s, int blocking) {
    dq__err e;
    ck_assert_int_eq(dq__uri_parse(s, &uri, &e), DQ_OK);
    ck_assert_int_eq(dq__topo_init(&T, &uri, blocking, 1000, &e), DQ_OK);
}

static void stop(void) {
    dq__topo_clear(&T);
    dq__uri_clear(&uri);
}

/* Feeds RESP text resp as the reply to a's SEND (a gets the next one). */
static void feed(dq__tact *a, const char *resp) {
    dq__reply *r = parse(resp);
    dq__topo_feed(&T, a->seq, r, 1000000, a);
    freeReplyObject(r);
}

/* A pub/sub message on channel with text msg, as RESP. */
static void *message(const char *kind, const char *channel, const char *msg) {
    char buf[512];
    snprintf(buf, sizeof(buf), "*3\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
             strlen(kind), kind, strlen(channel), channel, strlen(msg), msg);
    return parse(buf);
}

/* A +switch-master message with text. */
static dq__reply *switch_msg(const char *text) {
    return message("message", DQ_SENTINEL_SWITCH, text);
}

/* a is a SEND of cmd to (to, idx) at host:port. */
static void is_send(const dq__tact *a, int cmd, int to, int idx,
                    const char *host, int port) {
    ck_assert_int_eq(a->kind, DQ_TA_SEND);
    ck_assert_int_eq(a->cmd, cmd);
    ck_assert_int_eq(a->to, to);
    if (to != DQ_TT_PRIMARY)
        ck_assert_int_eq(a->idx, idx);
    ck_assert_str_eq(a->host, host);
    ck_assert_int_eq(a->port, port);
}

/* CLUSTER SLOTS: 0-8191 at h1:7000, 8192-16383 at h2:7001. */
static const char slots[] =
    "*2\r\n"
    "*3\r\n:0\r\n:8191\r\n*2\r\n$2\r\nh1\r\n:7000\r\n"
    "*3\r\n:8192\r\n:16383\r\n*2\r\n$2\r\nh2\r\n:7001\r\n";
/* CLUSTER SHARDS: one shard of every slot at h3:7002. */
static const char shards[] =
    "*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n"
    "$5\r\nnodes\r\n*1\r\n*6\r\n$2\r\nip\r\n$2\r\nh3\r\n"
    "$4\r\nport\r\n:7002\r\n$4\r\nrole\r\n$6\r\nmaster\r\n";

/* A dead seed is skipped for the next; CLUSTER SHARDS refused (before
 * Redis 7) is asked again as CLUSTER SLOTS on the same node. */
START_TEST(cluster_dead_seed_and_slots) {
    start("redis+cluster://s1:1,s2:2", 1);
    dq__tact a;
    dq__topo_refresh(&T, 0, &a);
    is_send(&a, DQ_TC_SHARDS, DQ_TT_NODE, 0, "s1", 1);
    dq__topo_fail(&T, a.seq, DQ_EIO, "connection refused", &a);
    is_send(&a, DQ_TC_SHARDS, DQ_TT_NODE, 1, "s2", 2);
    feed(&a, "-ERR unknown subcommand 'SHARDS'\r\n");
    is_send(&a, DQ_TC_SLOTS, DQ_TT_NODE, 1, "s2", 2);
    feed(&a, slots);
    ck_assert_int_eq(a.kind, DQ_TA_READY);
    ck_assert_int_eq(T.stale, 0);
    ck_assert_int_eq(T.loaded, 1);
    ck_assert_str_eq(T.map.nodes[T.map.owner[100]].host, "h1");
    ck_assert_str_eq(T.map.nodes[T.map.owner[9000]].host, "h2");
    const char *h;
    int p;
    ck_assert_int_eq(dq__topo_target(&T, 9000, &h, &p), 1);
    ck_assert_str_eq(h, "h2");
    ck_assert_int_eq(p, 7001);
    /* the drivers' links, by node index */
    int x;
    ck_assert_int_eq(dq__topo_set_link(&T, T.map.owner[9000], &x), DQ_OK);
    ck_assert_ptr_eq(dq__topo_link(&T, T.map.owner[9000]), &x);
    ck_assert_ptr_null(dq__topo_link(&T, T.map.owner[100]));
    /* two primaries, iterable */
    int s0 = dq__topo_node_slot(&T, 0), s1 = dq__topo_node_slot(&T, 1);
    ck_assert_int_ge(s0, 0);
    ck_assert_int_ge(s1, 0);
    ck_assert_str_eq(T.map.nodes[T.map.owner[s0]].host, "h1");
    ck_assert_int_eq(T.map.nodes[T.map.owner[s1]].port, 7001);
    ck_assert_int_eq(dq__topo_node_slot(&T, 2), -1);
    /* the text both drivers put in messages (and the sync wake-ups group
     * their channels by) */
    char buf[64] = "";
    ck_assert_str_eq(dq__topo_addr(&T, 9000, buf, sizeof(buf)), "h2:7001");
    dq__topo_where(&T, 9000, "-", buf, sizeof(buf));
    ck_assert_str_eq(buf, "h2:7001 (hash slot 9000)");
    /* not stale: nothing to do */
    dq__topo_refresh(&T, 0, &a);
    ck_assert_int_eq(a.kind, DQ_TA_IDLE);
    stop();
}
END_TEST

/* MOVED moves the slot at once and makes the map stale; the next refresh
 * asks the nodes with a live link first, and a reply to an older step is
 * ignored. */
START_TEST(cluster_moved) {
    start("redis+cluster://s1:1", 1);
    dq__tact a;
    dq__topo_refresh(&T, 0, &a);
    unsigned old = a.seq;
    feed(&a, shards);
    ck_assert_int_eq(a.kind, DQ_TA_READY);
    ck_assert_str_eq(T.map.nodes[T.map.owner[42]].host, "h3");
    dq__topo_moved(&T, 42, "h4", 7003);
    ck_assert_int_eq(T.stale, 1);
    const char *h;
    int p;
    ck_assert_int_eq(dq__topo_target(&T, 42, &h, &p), 0); /* to be learnt */
    int h4 = T.map.owner[42];
    ck_assert_str_eq(T.map.nodes[h4].host, "h4");
    ck_assert_int_eq(T.map.nodes[h4].port, 7003);
    dq__topo_node_up(&T, h4, 1);
    dq__topo_refresh(&T, 0, &a);
    is_send(&a, DQ_TC_SHARDS, DQ_TT_NODE, h4, "h4", 7003);
    dq__tact b;
    dq__topo_fail(&T, old, DQ_EIO, "late", &b);
    ck_assert_int_eq(b.kind, DQ_TA_IDLE);
    /* every candidate fails: a blocking refresh fails with the last error */
    int n = 0;
    while (a.kind == DQ_TA_SEND && n++ < 10)
        dq__topo_fail(&T, a.seq, DQ_EIO, "down", &a);
    ck_assert_int_eq(a.kind, DQ_TA_FAILED);
    ck_assert_int_eq(a.code, DQ_EIO);
    ck_assert_str_eq(T.err.msg, "down");
    ck_assert_int_eq(T.stale, 1);
    stop();
}
END_TEST

/* The async driver only asks nodes that are up (else it opens links),
 * in turn; a map without slots is a failure. */
START_TEST(cluster_nonblocking) {
    start("redis+cluster://s1:1,s2:2", 0);
    dq__tact a;
    dq__topo_refresh(&T, 0, &a);
    ck_assert_int_eq(a.kind, DQ_TA_CONNECT);
    dq__topo_node_up(&T, 1, 1);
    dq__topo_refresh(&T, 0, &a);
    is_send(&a, DQ_TC_SHARDS, DQ_TT_NODE, 1, "s2", 2);
    feed(&a, "*0\r\n");
    ck_assert_int_eq(a.kind, DQ_TA_FAILED);
    ck_assert_ptr_nonnull(strstr(T.err.msg, "no slots assigned"));
    dq__topo_node_up(&T, 0, 1);
    dq__topo_refresh(&T, 0, &a);
    is_send(&a, DQ_TC_SHARDS, DQ_TT_NODE, 0, "s1", 1); /* in turn */
    stop();
}
END_TEST

static const char master_a[] = "*2\r\n$2\r\nma\r\n$4\r\n6379\r\n";
static const char master_b[] = "*2\r\n$2\r\nmb\r\n$4\r\n6380\r\n";
static const char role_master[] = "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n";
static const char role_replica[] =
    "*5\r\n$5\r\nslave\r\n$2\r\nma\r\n:6379\r\n$9\r\nconnected\r\n:0\r\n";

/* A blocking T over two Sentinels whose first names the primary ma, which
 * says ROLE master. */
static void start_on_a(dq__tact *a) {
    start("redis+sentinel://s1:1,s2:2/mymaster", 1);
    dq__topo_resolve(&T, a);
    feed(a, master_a);
    feed(a, role_master);
    ck_assert_int_eq(a->kind, DQ_TA_READY);
}

/* The first Sentinel down: the second is asked; its primary is checked
 * with ROLE. */
START_TEST(sentinel_first_down) {
    start("redis+sentinel://s1:1,s2:2/mymaster", 1);
    dq__tact a;
    dq__topo_resolve(&T, &a);
    is_send(&a, DQ_TC_MASTER, DQ_TT_SENTINEL, 0, "s1", 1);
    const char *argv[3];
    ck_assert_int_eq(dq__topo_argv(&T, a.cmd, argv), 3);
    ck_assert_str_eq(argv[2], "mymaster");
    dq__topo_fail(&T, a.seq, DQ_EIO, "connection refused", &a);
    is_send(&a, DQ_TC_MASTER, DQ_TT_SENTINEL, 1, "s2", 2);
    feed(&a, master_a);
    is_send(&a, DQ_TC_ROLE, DQ_TT_PRIMARY, 0, "ma", 6379);
    const char *h;
    int p;
    ck_assert_int_eq(dq__topo_target(&T, 0, &h, &p), 1);
    ck_assert_str_eq(h, "ma");
    unsigned epoch = T.epoch;
    feed(&a, role_master);
    ck_assert_int_eq(a.kind, DQ_TA_READY);
    ck_assert_int_eq(T.pok, 1);
    ck_assert_uint_ne(T.epoch, epoch);
    stop();
}
END_TEST

/* ROLE says replica: the next Sentinel; one that knows no such primary
 * too; a blocking resolve fails after one round of them. */
START_TEST(sentinel_replica_next) {
    start("redis+sentinel://s1:1,s2:2,s3:3/mymaster", 1);
    dq__tact a;
    dq__topo_resolve(&T, &a);
    feed(&a, master_a);
    feed(&a, role_replica);
    is_send(&a, DQ_TC_MASTER, DQ_TT_SENTINEL, 1, "s2", 2);
    ck_assert_ptr_nonnull(strstr(T.err.msg, "not (yet) a primary"));
    feed(&a, "*-1\r\n");
    is_send(&a, DQ_TC_MASTER, DQ_TT_SENTINEL, 2, "s3", 3);
    ck_assert_ptr_nonnull(strstr(T.err.msg, "knows no primary"));
    feed(&a, master_b);
    is_send(&a, DQ_TC_ROLE, DQ_TT_PRIMARY, 0, "mb", 6380);
    dq__topo_fail(&T, a.seq, DQ_EIO, "refused", &a);
    ck_assert_int_eq(a.kind, DQ_TA_FAILED);
    ck_assert_int_eq(a.code, DQ_EIO);
    /* the async driver goes on asking, round after round */
    stop();
    start("redis+sentinel://s1:1,s2:2/mymaster", 0);
    dq__topo_resolve(&T, &a);
    for (int i = 0; i < 5; i++) {
        is_send(&a, DQ_TC_MASTER, DQ_TT_SENTINEL, i % 2, i % 2 ? "s2" : "s1",
                i % 2 + 1);
        dq__topo_fail(&T, a.seq, DQ_EIO, "refused", &a);
    }
    stop();
}
END_TEST

/* +switch-master for our name: the route goes stale, the new primary is
 * tried first (a step out is dropped); other names and the primary in
 * use change nothing. */
START_TEST(sentinel_switch_master) {
    dq__tact a;
    start_on_a(&a);
    dq__reply *same = switch_msg("mymaster mb 6380 ma 6379");
    dq__reply *other = switch_msg("other ma 6379 mb 6380");
    dq__reply *sw = switch_msg("mymaster ma 6379 mb 6380");
    ck_assert_int_eq(dq__topo_switch(&T, same), 0);
    ck_assert_int_eq(dq__topo_switch(&T, other), 0);
    ck_assert_int_eq(T.stale, 0);
    ck_assert_int_eq(dq__topo_switch(&T, sw), 1);
    ck_assert_int_eq(T.stale, 1);
    unsigned epoch = T.epoch;
    dq__topo_resolve(&T, &a);
    is_send(&a, DQ_TC_ROLE, DQ_TT_PRIMARY, 0, "mb", 6380);
    feed(&a, role_master);
    ck_assert_int_eq(a.kind, DQ_TA_READY);
    ck_assert_uint_ne(T.epoch, epoch);
    /* a failover announced while a Sentinel is being asked */
    dq__topo_stale(&T);
    dq__topo_resolve(&T, &a);
    is_send(&a, DQ_TC_MASTER, DQ_TT_SENTINEL, 0, "s1", 1);
    dq__tact b = a;
    ck_assert_int_eq(dq__topo_switch(&T, sw), 1);
    feed(&b, master_a); /* the dropped step's answer */
    ck_assert_int_eq(b.kind, DQ_TA_IDLE);
    dq__topo_resolve(&T, &a);
    is_send(&a, DQ_TC_ROLE, DQ_TT_PRIMARY, 0, "mb", 6380);
    freeReplyObject(same);
    freeReplyObject(other);
    freeReplyObject(sw);
    stop();
}
END_TEST

/* The subscriber: reopened after 100 ms doubling to 30 s while it fails
 * (the next Sentinel each time), probed after 5 s of silence, dead when
 * the answer is later than the command timeout. */
START_TEST(sentinel_sub_backoff) {
    dq__tact a;
    start_on_a(&a);
    int64_t now = 1000000, at;
    ck_assert_int_eq(dq__topo_sub_tick(&T, now, &at), DQ_TS_OPEN);
    int64_t gap = 100000;
    for (int i = 0; i < 12; i++) {
        int idx = T.sub_idx;
        dq__topo_sub_failed(&T, now);
        ck_assert_int_eq(T.sub_idx, (idx + 1) % 2);
        ck_assert_int_eq(dq__topo_sub_tick(&T, now + gap - 1, &at),
                         DQ_TS_NONE);
        ck_assert_int_eq(at, now + gap);
        ck_assert_int_eq(dq__topo_sub_tick(&T, now + gap, &at), DQ_TS_OPEN);
        now += gap;
        gap = gap * 2 > 30000000 ? 30000000 : gap * 2;
    }
    ck_assert_int_eq(gap, 30000000); /* capped */
    dq__topo_sub_up(&T, 1, now);
    ck_assert_int_eq(T.sub_gap_us, 100000); /* reset */
    ck_assert_int_eq(dq__topo_sub_tick(&T, now + 5000000, &at), DQ_TS_NONE);
    ck_assert_int_eq(dq__topo_sub_tick(&T, now + 5000001, &at), DQ_TS_PROBE);
    ck_assert_int_eq(dq__topo_sub_tick(&T, now + 6000001, &at), DQ_TS_NONE);
    ck_assert_int_eq(dq__topo_sub_tick(&T, now + 6000002, &at), DQ_TS_DEAD);
    dq__topo_sub_heard(&T, now + 6000002);
    ck_assert_int_eq(dq__topo_sub_tick(&T, now + 6000003, &at), DQ_TS_NONE);
    /* its Sentinel's own answer names another primary: stale */
    dq__reply *r = parse(master_b);
    ck_assert_int_eq(dq__topo_sub_master(&T, r), 1);
    ck_assert_int_eq(T.stale, 1);
    freeReplyObject(r);
    stop();
    /* the async driver: 50 ms doubling to 2 s */
    start("redis+sentinel://s1:1/mymaster", 0);
    for (int i = 0; i < 8; i++)
        dq__topo_sub_failed(&T, 0);
    ck_assert_int_eq(T.sub_gap_us, 2000000);
    ck_assert_int_eq(T.sub_next_us, 2000000);
    stop();
}
END_TEST

START_TEST(sentinel_addr) {
    char host[16] = "keep";
    int port = -1;
    void *r = parse("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
    ck_assert_int_eq(dq__sentinel_addr(r, host, sizeof(host), &port), DQ_OK);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(port, 6380);
    freeReplyObject(r);
    /* no such primary, malformed or unfitting answers: nothing written */
    const char *bad[] = {
        "*-1\r\n", "$-1\r\n", "-ERR no such master\r\n",
        "*1\r\n$1\r\nh\r\n",
        "*2\r\n$0\r\n\r\n$4\r\n6380\r\n",                 /* empty host */
        "*2\r\n$1\r\nh\r\n$1\r\n0\r\n",                    /* port 0 */
        "*2\r\n$1\r\nh\r\n$5\r\n65536\r\n",                /* too big */
        "*2\r\n$1\r\nh\r\n$3\r\n12x\r\n",                  /* not a number */
        "*2\r\n$1\r\nh\r\n$9\r\n000006380\r\n",            /* too long */
        "*2\r\n$16\r\n0123456789abcdef\r\n$2\r\n80\r\n", /* host too long */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        strcpy(host, "keep");
        port = -1;
        r = parse(bad[i]);
        ck_assert_msg(dq__sentinel_addr(r, host, sizeof(host), &port) ==
                          DQ_ENOTFOUND,
                      "case %zu", i);
        ck_assert_str_eq(host, "keep");
        ck_assert_int_eq(port, -1);
        freeReplyObject(r);
    }
}
END_TEST

START_TEST(sentinel_switch) {
    char host[16] = "keep";
    int port = -1;
    void *r = message("message", "+switch-master",
                      "mymaster 127.0.0.1 6379 127.0.0.2 6380");
    ck_assert_int_eq(dq__sentinel_switch(r, "mymaster", host, sizeof(host),
                                         &port), 1);
    ck_assert_str_eq(host, "127.0.0.2");
    ck_assert_int_eq(port, 6380);
    /* another primary's switch is not ours */
    strcpy(host, "keep");
    ck_assert_int_eq(dq__sentinel_switch(r, "other", host, sizeof(host),
                                         &port), 0);
    ck_assert_int_eq(dq__sentinel_switch(r, "mymaste", host, sizeof(host),
                                         &port), 0);
    ck_assert_str_eq(host, "keep");
    freeReplyObject(r);
    const char *bad[][3] = {
        {"subscribe", "+switch-master", "1"},
        {"message", "+sdown", "mymaster 127.0.0.1 6379 127.0.0.2 6380"},
        {"message", "+switch-master", "mymaster 127.0.0.1 6379 127.0.0.2"},
        {"message", "+switch-master", "mymaster 127.0.0.1 6379 127.0.0.2 0"},
        {"message", "+switch-master", "mymaster 127.0.0.1 6379 127.0.0.2 70000"},
        {"message", "+switch-master",
         "mymaster 127.0.0.1 6379 a-host-name-too-long-for-it 6380"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = message(bad[i][0], bad[i][1], bad[i][2]);
        ck_assert_msg(dq__sentinel_switch(r, "mymaster", host, sizeof(host),
                                          &port) == 0,
                      "case %zu", i);
        ck_assert_str_eq(host, "keep");
        freeReplyObject(r);
    }
    r = parse(":1\r\n");
    ck_assert_int_eq(dq__sentinel_switch(r, "mymaster", host, sizeof(host),
                                         &port), 0);
    freeReplyObject(r);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("topo");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, cluster_dead_seed_and_slots);
    tcase_add_test(tc, cluster_moved);
    tcase_add_test(tc, cluster_nonblocking);
    tcase_add_test(tc, sentinel_first_down);
    tcase_add_test(tc, sentinel_replica_next);
    tcase_add_test(tc, sentinel_switch_master);
    tcase_add_test(tc, sentinel_sub_backoff);
    tcase_add_test(tc, sentinel_addr);
    tcase_add_test(tc, sentinel_switch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
