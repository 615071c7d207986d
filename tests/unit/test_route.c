/*
 * tests/unit/test_route.c - white-box tests of lib/route.c: the hash slot of
 * a key (the Cluster specification's CRC16 and hash tags) and the slot map
 * loaded from CLUSTER SHARDS and CLUSTER SLOTS replies (made from RESP text
 * by hiredis's own reply parser) and from MOVED.  No Redis involved.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "reply_text.h"
#include "route.h"

START_TEST(key_slots) {
    /* the specification's examples and the CRC16 check value */
    ck_assert_int_eq(dq__key_slot("123456789", 9), 0x31C3 & 16383);
    ck_assert_int_eq(dq__key_slot("foo", 3), 12182);
    ck_assert_int_eq(dq__key_slot("bar", 3), 5061);
    /* a hash tag: only what is between the first { and the next } */
    ck_assert_int_eq(dq__key_slot("{user1000}.following", 20),
                     dq__key_slot("user1000", 8));
    ck_assert_int_eq(dq__key_slot("{user1000}.followers", 20),
                     dq__key_slot("{user1000}.following", 20));
    ck_assert_int_eq(dq__key_slot("dq:{orders}:due", 15),
                     dq__key_slot("dq:{orders}:wake:0", 18));
    ck_assert_int_eq(dq__key_slot("dq:{orders#3}:due", 17),
                     dq__key_slot("orders#3", 8));
    /* an empty tag or none: the whole key */
    ck_assert_int_eq(dq__key_slot("foo{}{bar}", 10),
                     dq__key_slot("foo{}{bar}", 10));
    ck_assert_int_ne(dq__key_slot("foo{}{bar}", 10), dq__key_slot("bar", 3));
    ck_assert_int_eq(dq__key_slot("foo{{bar}}zap", 13),
                     dq__key_slot("{bar", 4));
    ck_assert_int_eq(dq__key_slot("foo{bar", 7), dq__key_slot("foo{bar", 7));
}
END_TEST

/* A CLUSTER SHARDS reply of two shards (Redis 7 shape, RESP2): the
 * primary of each (an endpoint, an empty one standing for the asked
 * host), replicas ignored, and a failed old primary listed before the
 * promoted one is skipped. */
START_TEST(load_shards) {
    const char *resp =
        "*2\r\n"
        /* shard 1: slots 0-99 and 200-299, primary at 10.0.0.1:7000 */
        "*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:299\r\n"
        "$5\r\nnodes\r\n*2\r\n"
        "*8\r\n$2\r\nid\r\n$1\r\na\r\n$4\r\nport\r\n:7000\r\n"
        "$8\r\nendpoint\r\n$8\r\n10.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
        "*8\r\n$2\r\nid\r\n$1\r\nb\r\n$4\r\nport\r\n:7001\r\n"
        "$8\r\nendpoint\r\n$8\r\n10.0.0.2\r\n$4\r\nrole\r\n$7\r\nreplica\r\n"
        /* shard 2: 100-199; a failed primary first, then the online one
         * whose endpoint is empty (the asked node's host stands in) */
        "*4\r\n$5\r\nslots\r\n*2\r\n:100\r\n:199\r\n$5\r\nnodes\r\n*2\r\n"
        "*8\r\n$4\r\nport\r\n:7002\r\n$8\r\nendpoint\r\n$4\r\ndead\r\n"
        "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$4\r\nfail\r\n"
        "*8\r\n$4\r\nport\r\n:7003\r\n$8\r\nendpoint\r\n$0\r\n\r\n"
        "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";
    void *r = parse(resp);
    dq__slotmap m;
    memset(&m, 0, sizeof(m));
    dq__slotmap_init(&m, 0);
    dq__err err = {0, ""};
    ck_assert_int_eq(dq__slotmap_load(&m, r, 1, "seed", &err), DQ_OK);
    ck_assert_int_eq(dq__slotmap_covered(&m), 300);
    const dq__node_addr *a = &m.nodes[m.owner[0]];
    ck_assert_str_eq(a->host, "10.0.0.1");
    ck_assert_int_eq(a->port, 7000);
    ck_assert_int_eq(m.owner[299], m.owner[0]);
    a = &m.nodes[m.owner[150]];
    ck_assert_str_eq(a->host, "seed");
    ck_assert_int_eq(a->port, 7003);
    ck_assert_int_eq(m.owner[300], -1);
    /* MOVED moves one slot to a new node */
    ck_assert_int_eq(dq__slotmap_moved(&m, 5, "10.0.0.9", 7009), DQ_OK);
    ck_assert_str_eq(m.nodes[m.owner[5]].host, "10.0.0.9");
    ck_assert_int_eq(m.owner[6], m.owner[0]);
    freeReplyObject(r);
    dq__slotmap_clear(&m);
}
END_TEST

/* CLUSTER SLOTS (before Redis 7): start, end, [host, port, id], replicas;
 * "?" or "" stands for the asked host. */
START_TEST(load_slots) {
    const char *resp =
        "*2\r\n"
        "*4\r\n:0\r\n:8191\r\n*3\r\n$1\r\nx\r\n:7000\r\n$1\r\na\r\n"
        "*3\r\n$1\r\ny\r\n:7001\r\n$1\r\nb\r\n"
        "*3\r\n:8192\r\n:16383\r\n*3\r\n$1\r\n?\r\n:7002\r\n$1\r\nc\r\n";
    void *r = parse(resp);
    dq__slotmap m;
    memset(&m, 0, sizeof(m));
    dq__slotmap_init(&m, 0);
    dq__err err = {0, ""};
    ck_assert_int_eq(dq__slotmap_load(&m, r, 0, "asked", &err), DQ_OK);
    ck_assert_int_eq(dq__slotmap_covered(&m), DQ_SLOTS);
    ck_assert_str_eq(m.nodes[m.owner[0]].host, "x");
    ck_assert_str_eq(m.nodes[m.owner[16383]].host, "asked");
    ck_assert_int_eq(m.nodes[m.owner[16383]].port, 7002);
    freeReplyObject(r);
    dq__slotmap_clear(&m);
}
END_TEST

/* What is not a listing is refused, leaving the map as it was. */
START_TEST(load_bad) {
    const char *bad[] = {
        ":1\r\n",
        "-ERR unknown command\r\n",
        "*1\r\n*3\r\n:5\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n", /* start > end */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n", /* port 0 */
        "*1\r\n*2\r\n:0\r\n:1\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        void *r = parse(bad[i]);
        dq__slotmap m;
        memset(&m, 0, sizeof(m));
        dq__slotmap_init(&m, 0);
        ck_assert_int_eq(dq__slotmap_moved(&m, 7, "h", 1), DQ_OK);
        dq__err err = {0, ""};
        int rc = dq__slotmap_load(&m, r, 0, "h", &err);
        ck_assert_msg(rc < 0 && err.msg[0] != '\0', "case %zu: %d", i, rc);
        ck_assert_int_eq(dq__slotmap_covered(&m), 1);
        freeReplyObject(r);
        dq__slotmap_clear(&m);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("route");
    TCase *tc = tcase_create("route");
    tcase_add_test(tc, key_slots);
    tcase_add_test(tc, load_shards);
    tcase_add_test(tc, load_slots);
    tcase_add_test(tc, load_bad);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
