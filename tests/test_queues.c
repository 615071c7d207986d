/*
 * tests/test_queues.c - dq_queues: the queues of a namespace, found by
 * SCAN on the one node: a plain queue, a partitioned one (listed once,
 * by name), one in the compact layout (also when its compact keys are
 * all it has), names that need encoding; another namespace's queues and keys
 * that are no queue's are not listed; an empty namespace lists nothing;
 * the bound on the count; bad arguments refused before anything is sent;
 * NULL-safe accessors and free; a broken connection reopened and the
 * listing tried again.  Every test uses a namespace of its own (the
 * suite's server is shared) and sets partitions and layout itself, so it
 * holds whatever DQ_TEST_PARTITIONS / DQ_TEST_LAYOUT say.
 */
#include <stdio.h>
#include <string.h>

#include "test_suite.h"
#include "test_utils.h"

/* A client on g_srv in namespace ns with that many partitions and layout. */
static dq_client *open_ns(const char *ns, int64_t parts, int64_t layout) {
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, ns), 0);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_PARTITIONS, parts), 0);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_LAYOUT, layout), 0);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    return c;
}

/* The queues of c's namespace, failing the test on an error; the count
 * must be the list's. */
static dq_queue_list *list_all(dq_client *c) {
    dq_queue_list *l = NULL;
    int n = dq_queues(c, DQ_QUEUES_MAX, &l);
    ck_assert_msg(n >= 0, "dq_queues: %d %s", n, dq_errmsg(c));
    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq((size_t)n, dq_queue_list_count(l));
    ck_assert_int_eq(dq_queue_list_complete(l), 1);
    return l;
}

/* Pushes n jobs to queue q on c, due in an hour. */
static void push_n(dq_client *c, const char *q, int n) {
    for (int i = 0; i < n; i++)
        push_text(c, q, "x", 3600000, NULL, 0, NULL);
}

/* Asserts that l lists exactly names (n of them, sorted) with the
 * partitioned flags parted. */
static void expect(const dq_queue_list *l, int n, const char *const *names,
                   const int *parted) {
    ck_assert_int_eq(dq_queue_list_count(l), (size_t)n);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(dq_queue_list_name(l, (size_t)i), names[i]);
        ck_assert_int_eq(dq_queue_list_partitioned(l, (size_t)i), parted[i]);
    }
}

/* A plain queue, a partitioned one and a compact one are each listed
 * once, sorted by name, with the partitioned one flagged. */
START_TEST(plain_partitioned_compact) {
    const char *ns = "lq1";
    dq_client *plain = open_ns(ns, 1, DQ_LAYOUT_DEFAULT);
    dq_client *parts = open_ns(ns, 4, DQ_LAYOUT_DEFAULT);
    dq_client *cpush = open_ns(ns, 1, DQ_LAYOUT_COMPACT_PUSH);
    push_n(plain, "orders", 3);
    push_n(parts, "mails", 20); /* in every partition */
    push_n(cpush, "backlog", 5);
    /* a job in flight and a dead one: keys other than due */
    dq_jobs *jobs = NULL;
    push_text(plain, "inflight", "x", 0, NULL, 0, NULL);
    ck_assert_int_eq(poll_n(plain, "inflight", 1, 60000, &jobs, NULL), 1);
    dq_jobs_free(jobs);
    dq_queue_list *l = list_all(plain);
    const char *names[] = {"backlog", "inflight", "mails", "orders"};
    const int parted[] = {0, 0, 1, 0};
    expect(l, 4, names, parted);
    dq_queue_list_free(l);
    /* every client of the namespace sees the same */
    l = list_all(parts);
    expect(l, 4, names, parted);
    dq_queue_list_free(l);
    dq_close(plain);
    dq_close(parts);
    dq_close(cpush);
}
END_TEST

/* A compact queue whose only keys are compact ones (its native keys
 * deleted: the compact meta and bucket index name it) is still listed;
 * keys of the namespace that are no queue's are not. */
START_TEST(compact_keys_and_strangers) {
    const char *ns = "lq2";
    dq_client *c = open_ns(ns, 1, DQ_LAYOUT_COMPACT_PUSH);
    push_n(c, "cq", 5);
    redisContext *r = rconn();
    char key[256];
    queue_key(ns, "cq", "cm", key, sizeof(key));
    ck_assert_int_eq(rint_(r, "EXISTS", key, NULL), 1);
    /* only the compact keys left */
    static const char *const native[] = {"due",  "lease", "jobs",
                                         "dead", "done",  "idle",
                                         "conf", "rate",  "counts"};
    for (size_t i = 0; i < sizeof(native) / sizeof(native[0]); i++) {
        queue_key(ns, "cq", native[i], key, sizeof(key));
        rint_(r, "DEL", key, NULL);
    }
    /* strangers: an unknown suffix, no hash tag, a bad escape, an empty
     * name, a partition that is no number, another namespace */
    static const char *const strangers[] = {
        "lq2:{a}:bogus", "lq2:b:due",    "lq2:{%ZZ}:due", "lq2:{}:due",
        "lq2:{c#x}:due", "lq2x:{d}:due", "lq:{e}:due",    "lq2:{f}due",
        "lq2:{g}:due:x", "lq2:{h#}:jobs"};
    for (size_t i = 0; i < sizeof(strangers) / sizeof(strangers[0]); i++)
        freeReplyObject(th_cmd(r, "SET %s 1", strangers[i]));
    /* a name that needs encoding */
    push_n(c, "a b{c}", 1);
    dq_queue_list *l = list_all(c);
    const char *names[] = {"a b{c}", "cq"};
    const int parted[] = {0, 0};
    expect(l, 2, names, parted);
    dq_queue_list_free(l);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* Queues of another namespace are not listed; an empty namespace lists
 * none (an empty list, not NULL). */
START_TEST(namespaces) {
    dq_client *a = open_ns("lq3", 1, DQ_LAYOUT_DEFAULT);
    dq_client *b = open_ns("lq3:b", 1, DQ_LAYOUT_DEFAULT);
    dq_client *e = open_ns("lq3e", 1, DQ_LAYOUT_DEFAULT);
    push_n(a, "one", 1);
    push_n(b, "two", 1);
    dq_queue_list *l = list_all(a);
    const char *na[] = {"one"};
    const char *nb[] = {"two"};
    const int parted[] = {0};
    expect(l, 1, na, parted);
    dq_queue_list_free(l);
    l = list_all(b);
    expect(l, 1, nb, parted);
    dq_queue_list_free(l);
    l = list_all(e);
    ck_assert_int_eq(dq_queue_list_count(l), 0);
    ck_assert_ptr_null(dq_queue_list_name(l, 0));
    dq_queue_list_free(l);
    dq_close(a);
    dq_close(b);
    dq_close(e);
}
END_TEST

/* More queues than max: max of them listed, and the list says it is not
 * complete. */
START_TEST(bounded) {
    dq_client *c = open_ns("lq4", 1, DQ_LAYOUT_DEFAULT);
    char q[16];
    for (int i = 0; i < 5; i++) {
        snprintf(q, sizeof(q), "q%d", i);
        push_n(c, q, 1);
    }
    dq_queue_list *l = NULL;
    ck_assert_int_eq(dq_queues(c, 3, &l), 3);
    ck_assert_int_eq(dq_queue_list_count(l), 3);
    ck_assert_int_eq(dq_queue_list_complete(l), 0);
    dq_queue_list_free(l);
    ck_assert_int_eq(dq_queues(c, 5, &l), 5);
    ck_assert_int_eq(dq_queue_list_complete(l), 1);
    dq_queue_list_free(l);
    dq_close(c);
}
END_TEST

/* Bad arguments: a code and a message, nothing sent; NULL-safe
 * accessors and free. */
START_TEST(bad_input) {
    dq_client *c = open_ns("lq5", 1, DQ_LAYOUT_DEFAULT);
    redisContext *r = rconn();
    dq_queue_list *l = (dq_queue_list *)&l; /* must be set to NULL */
    long long before = client_commands(r);
    ck_assert_int_eq(dq_queues(c, 0, &l), DQ_EINVAL);
    ck_assert_ptr_null(l);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "max"));
    ck_assert_int_eq(dq_errcode(c), DQ_EINVAL);
    ck_assert_int_eq(dq_queues(c, DQ_QUEUES_MAX + 1, &l), DQ_EINVAL);
    ck_assert_int_eq(dq_queues(c, -1, &l), DQ_EINVAL);
    ck_assert_int_eq(dq_queues(c, 10, NULL), DQ_ENULL);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "out"));
    ck_assert_int_eq(dq_queues(NULL, 10, &l), DQ_ENULL);
    ck_assert_int_eq(client_commands(r), before);
    /* a good call clears the error */
    ck_assert_int_eq(dq_queues(c, 10, &l), 0);
    ck_assert_str_eq(dq_errmsg(c), "");
    dq_queue_list_free(l);
    /* NULL everywhere */
    dq_queue_list_free(NULL);
    ck_assert_int_eq(dq_queue_list_count(NULL), 0);
    ck_assert_ptr_null(dq_queue_list_name(NULL, 0));
    ck_assert_int_eq(dq_queue_list_partitioned(NULL, 0), 0);
    ck_assert_int_eq(dq_queue_list_complete(NULL), 0);
    redisFree(r);
    dq_close(c);
}
END_TEST

/* A connection the server closed (CLIENT KILL) is reopened and the
 * listing goes once more by itself. */
START_TEST(read_again_after_break) {
    dq_client *c = open_ns("lq6", 1, DQ_LAYOUT_DEFAULT);
    push_n(c, "q", 1);
    redisContext *r = rconn();
    freeReplyObject(th_cmd(r, "CLIENT KILL TYPE normal SKIPME yes"));
    dq_queue_list *l = list_all(c);
    ck_assert_int_eq(dq_queue_list_count(l), 1);
    dq_queue_list_free(l);
    redisFree(r);
    dq_close(c);
}
END_TEST

TEST_SUITE("queues", TU_SRV_UNIX,
    {"plain_partitioned_compact", plain_partitioned_compact, 30, NULL},
    {"compact_keys_and_strangers", compact_keys_and_strangers, 30, NULL},
    {"namespaces", namespaces, 30, NULL},
    {"bounded", bounded, 30, NULL},
    {"bad_input", bad_input, 30, NULL},
    {"read_again_after_break", read_again_after_break, 30, NULL})
