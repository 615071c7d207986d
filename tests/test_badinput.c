/*
 * tests/test_badinput.c - bad input, one test per argument of every public
 * function: each returns its documented code, dq_errmsg names the argument,
 * and nothing at all reaches Redis (the server's total_commands_processed
 * grows by exactly one between two readings: the first INFO itself).
 * Also: error texts for every code, NULL-safe frees and accessors.
 */
#include "test_suite.h"
#include "test_utils.h"

#include <limits.h>

static dq_client *C;     /* client under test (DQ_OPT_MAX_PAYLOAD = 100) */
static redisContext *R;  /* separate connection that reads INFO */
static long long before; /* total_commands_processed at the test's start */

static char Q201[DQ_QUEUE_MAX + 2];
static char ID129[DQ_ID_MAX + 2];
static char BIG[101];

/* Makes the over-long names, opens C and R, and reads the command count. */
static void setup(void) {
    memset(Q201, 'q', DQ_QUEUE_MAX + 1);
    Q201[DQ_QUEUE_MAX + 1] = '\0';
    memset(ID129, 'i', DQ_ID_MAX + 1);
    ID129[DQ_ID_MAX + 1] = '\0';
    memset(BIG, 'b', sizeof(BIG));
    C = open_client_opt(DQ_OPT_MAX_PAYLOAD, 100);
    R = rconn();
    before = commands_processed(R);
}

/* Closes C and R. */
static void teardown(void) {
    dq_close(C);
    redisFree(R);
}

/* The checked fixture of every test but accessors_on_list. */
static const tu_fixture fixture = {setup, teardown};

/* Ends every test: nothing was sent since setup. */
static void nothing_sent(void) { tu_nothing_sent(R, before); }

/* call must return code, with the code and a message naming word on C. */
#define BAD(call, code, word) tu_bad(C, call, code, word)

/* A NULL client: only the code (there is no client to hold a message). */
#define BAD_NULL_CLIENT(call)                                                 \
    do {                                                                      \
        int rc_ = (call);                                                     \
        ck_assert_msg(rc_ == DQ_ENULL, "%s: %d", #call, rc_);                 \
    } while (0)

/* Bad queue names for a call written with QUEUE in place of the queue. */
#define BAD_QUEUES(call_with_QUEUE)                                           \
    do {                                                                      \
        const char *QUEUE = NULL;                                             \
        BAD(call_with_QUEUE, DQ_ENULL, "queue");                              \
        QUEUE = "";                                                           \
        BAD(call_with_QUEUE, DQ_EQUEUE, "queue");                             \
        QUEUE = Q201;                                                         \
        BAD(call_with_QUEUE, DQ_EQUEUE, "queue");                             \
        ck_assert_ptr_nonnull(strstr(dq_errmsg(C), "201"));                   \
    } while (0)

/* Bad ids (NULL only where NULL is not allowed). */
#define BAD_IDS(call_with_ID, null_allowed)                                   \
    do {                                                                      \
        const char *ID = NULL;                                                \
        if (!(null_allowed))                                                  \
            BAD(call_with_ID, DQ_ENULL, "id");                                \
        ID = "";                                                              \
        BAD(call_with_ID, DQ_EID, "id");                                      \
        ID = ID129;                                                           \
        BAD(call_with_ID, DQ_EID, "id");                                      \
        ck_assert_ptr_nonnull(strstr(dq_errmsg(C), "129"));                   \
    } while (0)

static const char *const bad_tokens[] = {
    "", "abc", "12a", "-1", " 1", "1 ", "0x10", "123456789012345678901234",
};

#define BAD_TOKENS(call_with_TOK)                                             \
    do {                                                                      \
        const char *TOK = NULL;                                               \
        BAD(call_with_TOK, DQ_ENULL, "token");                                \
        for (size_t t_ = 0; t_ < sizeof(bad_tokens) / sizeof(bad_tokens[0]);  \
             t_++) {                                                          \
            TOK = bad_tokens[t_];                                             \
            BAD(call_with_TOK, DQ_EINVAL, "token");                           \
        }                                                                     \
    } while (0)

static const int64_t bad_delays[] = {-1, DQ_DELAY_MAX + 1, INT64_MIN, INT64_MAX};
static const int64_t bad_leases[] = {0, -1, DQ_LEASE_MAX + 1, INT64_MIN};
/* A poll's lease 0 means the queue's (or client's) default. */
static const int64_t bad_poll_leases[] = {-1, DQ_LEASE_MAX + 1, INT64_MIN};

/* ---- dq_push -------------------------------------------------------------- */

START_TEST(push_client) {
    BAD_NULL_CLIENT(dq_push(NULL, "q", "x", 1, 0, NULL, 0, NULL, 0, NULL));
    nothing_sent();
}
END_TEST

START_TEST(push_queue) {
    BAD_QUEUES(dq_push(C, QUEUE, "x", 1, 0, NULL, 0, NULL, 0, NULL));
    nothing_sent();
}
END_TEST

START_TEST(push_payload) {
    BAD(dq_push(C, "q", NULL, 5, 0, NULL, 0, NULL, 0, NULL), DQ_ENULL, "payload");
    nothing_sent();
}
END_TEST

START_TEST(push_len) {
    BAD(dq_push(C, "q", BIG, 101, 0, NULL, 0, NULL, 0, NULL), DQ_ETOOBIG,
        "payload");
    ck_assert_ptr_nonnull(strstr(dq_errmsg(C), "101"));
    BAD(dq_push(C, "q", BIG, SIZE_MAX, 0, NULL, 0, NULL, 0, NULL), DQ_ETOOBIG,
        "payload");
    nothing_sent();
}
END_TEST

START_TEST(push_delay) {
    for (size_t i = 0; i < sizeof(bad_delays) / sizeof(bad_delays[0]); i++)
        BAD(dq_push(C, "q", "x", 1, bad_delays[i], NULL, 0, NULL, 0, NULL),
            DQ_EDELAY, "delay_ms");
    nothing_sent();
}
END_TEST

START_TEST(push_id) {
    BAD_IDS(dq_push(C, "q", "x", 1, 0, ID, 0, NULL, 0, NULL), 1);
    nothing_sent();
}
END_TEST

START_TEST(push_flags) {
    const int flags[] = {2, -1, 4, INT_MIN};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        BAD(dq_push(C, "q", "x", 1, 0, "id", flags[i], NULL, 0, NULL),
            DQ_EINVAL, "flags");
    nothing_sent();
}
END_TEST

START_TEST(push_id_out_size) {
    char buf[DQ_ID_BUF];
    BAD(dq_push(C, "q", "x", 1, 0, NULL, 0, buf, 14, NULL), DQ_EINVAL,
        "id_out_size");
    BAD(dq_push(C, "q", "x", 1, 0, "abc", 0, buf, 3, NULL), DQ_EINVAL,
        "id_out_size");
    BAD(dq_push(C, "q", "x", 1, 0, NULL, 0, buf, 0, NULL), DQ_EINVAL,
        "id_out_size");
    nothing_sent();
}
END_TEST

/* ---- dq_push_at ------------------------------------------------------------ */

START_TEST(push_at_args) {
    BAD_NULL_CLIENT(dq_push_at(NULL, "q", "x", 1, 0, NULL, 0, NULL, 0, NULL));
    BAD_QUEUES(dq_push_at(C, QUEUE, "x", 1, 0, NULL, 0, NULL, 0, NULL));
    BAD(dq_push_at(C, "q", NULL, 1, 0, NULL, 0, NULL, 0, NULL), DQ_ENULL,
        "payload");
    BAD(dq_push_at(C, "q", BIG, 101, 0, NULL, 0, NULL, 0, NULL), DQ_ETOOBIG,
        "payload");
    BAD_IDS(dq_push_at(C, "q", "x", 1, 0, ID, 0, NULL, 0, NULL), 1);
    BAD(dq_push_at(C, "q", "x", 1, 0, NULL, 7, NULL, 0, NULL), DQ_EINVAL, "flags");
    char buf[8];
    BAD(dq_push_at(C, "q", "x", 1, 0, NULL, 0, buf, sizeof(buf), NULL),
        DQ_EINVAL, "id_out_size");
    nothing_sent();
}
END_TEST

START_TEST(push_at_time) {
    const int64_t bad[] = {-1, DQ_AT_MAX + 1, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        BAD(dq_push_at(C, "q", "x", 1, bad[i], NULL, 0, NULL, 0, NULL), DQ_EDELAY,
            "at_ms");
    nothing_sent();
}
END_TEST

/* ---- dq_push_batch --------------------------------------------------------- */

static const void *PL[3] = {"a", "b", "c"};
static const size_t LENS[3] = {1, 1, 1};

START_TEST(batch_client_queue) {
    BAD_NULL_CLIENT(dq_push_batch(NULL, "q", 3, PL, LENS, NULL, NULL, 0, NULL, NULL));
    BAD_QUEUES(dq_push_batch(C, QUEUE, 3, PL, LENS, NULL, NULL, 0, NULL, NULL));
    nothing_sent();
}
END_TEST

START_TEST(batch_n) {
    BAD(dq_push_batch(C, "q", 0, PL, LENS, NULL, NULL, 0, NULL, NULL), DQ_EINVAL,
        "n is");
    BAD(dq_push_batch(C, "q", (size_t)DQ_BATCH_MAX + 1, PL, LENS, NULL, NULL, 0,
                      NULL, NULL),
        DQ_EINVAL, "n is");
    nothing_sent();
}
END_TEST

START_TEST(batch_payloads) {
    BAD(dq_push_batch(C, "q", 3, NULL, LENS, NULL, NULL, 0, NULL, NULL), DQ_ENULL,
        "payloads");
    const void *pl[3] = {"a", NULL, "c"};
    BAD(dq_push_batch(C, "q", 3, pl, LENS, NULL, NULL, 0, NULL, NULL), DQ_ENULL,
        "payload of job 1");
    nothing_sent();
}
END_TEST

START_TEST(batch_lens) {
    BAD(dq_push_batch(C, "q", 3, PL, NULL, NULL, NULL, 0, NULL, NULL), DQ_ENULL,
        "lens");
    const void *pl[3] = {"a", BIG, "c"};
    size_t lens[3] = {1, 101, 1};
    BAD(dq_push_batch(C, "q", 3, pl, lens, NULL, NULL, 0, NULL, NULL), DQ_ETOOBIG,
        "payload of job 1");
    nothing_sent();
}
END_TEST

START_TEST(batch_delays) {
    int64_t delays[3] = {0, 0, -1};
    BAD(dq_push_batch(C, "q", 3, PL, LENS, delays, NULL, 0, NULL, NULL),
        DQ_EDELAY, "delay_ms of job 2");
    delays[2] = DQ_DELAY_MAX + 1;
    BAD(dq_push_batch(C, "q", 3, PL, LENS, delays, NULL, 0, NULL, NULL),
        DQ_EDELAY, "delay_ms of job 2");
    nothing_sent();
}
END_TEST

START_TEST(batch_ids) {
    const char *ids[3] = {"a", "", NULL};
    BAD(dq_push_batch(C, "q", 3, PL, LENS, NULL, ids, 0, NULL, NULL), DQ_EID,
        "id of job 1");
    ids[1] = ID129;
    BAD(dq_push_batch(C, "q", 3, PL, LENS, NULL, ids, 0, NULL, NULL), DQ_EID,
        "id of job 1");
    nothing_sent();
}
END_TEST

START_TEST(batch_flags) {
    BAD(dq_push_batch(C, "q", 3, PL, LENS, NULL, NULL, 3, NULL, NULL), DQ_EINVAL,
        "flags");
    nothing_sent();
}
END_TEST

/* ---- dq_cancel ------------------------------------------------------------- */

START_TEST(cancel_args) {
    BAD_NULL_CLIENT(dq_cancel(NULL, "q", "id", 0));
    BAD_QUEUES(dq_cancel(C, QUEUE, "id", 0));
    BAD_IDS(dq_cancel(C, "q", ID, 0), 0);
    BAD(dq_cancel(C, "q", "id", 2), DQ_EINVAL, "flags");
    BAD(dq_cancel(C, "q", "id", -1), DQ_EINVAL, "flags");
    nothing_sent();
}
END_TEST

/* ---- dq_poll / dq_poll_wait -------------------------------------------------- */

START_TEST(poll_client_queue) {
    dq_jobs *jobs = NULL;
    BAD_NULL_CLIENT(dq_poll(NULL, "q", 1, 1000, &jobs, NULL));
    BAD_QUEUES(dq_poll(C, QUEUE, 1, 1000, &jobs, NULL));
    ck_assert_ptr_null(jobs);
    nothing_sent();
}
END_TEST

START_TEST(poll_max) {
    dq_jobs *jobs = (dq_jobs *)&jobs; /* reset to NULL even on error */
    BAD(dq_poll(C, "q", 0, 1000, &jobs, NULL), DQ_EINVAL, "max");
    ck_assert_ptr_null(jobs);
    BAD(dq_poll(C, "q", DQ_POLL_MAX + 1, 1000, &jobs, NULL), DQ_EINVAL, "max");
    BAD(dq_poll(C, "q", -1, 1000, &jobs, NULL), DQ_EINVAL, "max");
    nothing_sent();
}
END_TEST

START_TEST(poll_lease) {
    dq_jobs *jobs = NULL;
    for (size_t i = 0; i < sizeof(bad_poll_leases) / sizeof(bad_poll_leases[0]);
         i++)
        BAD(dq_poll(C, "q", 1, bad_poll_leases[i], &jobs, NULL), DQ_ELEASE,
            "lease_ms");
    nothing_sent();
}
END_TEST

START_TEST(poll_out) {
    int64_t next = 0;
    BAD(dq_poll(C, "q", 1, 1000, NULL, &next), DQ_ENULL, "out");
    nothing_sent();
}
END_TEST

START_TEST(poll_wait_args) {
    dq_jobs *jobs = NULL;
    BAD_NULL_CLIENT(dq_poll_wait(NULL, "q", 1, 1000, 10, &jobs));
    BAD_QUEUES(dq_poll_wait(C, QUEUE, 1, 1000, 10, &jobs));
    BAD(dq_poll_wait(C, "q", 0, 1000, 10, &jobs), DQ_EINVAL, "max");
    BAD(dq_poll_wait(C, "q", 1001, 1000, 10, &jobs), DQ_EINVAL, "max");
    for (size_t i = 0; i < sizeof(bad_poll_leases) / sizeof(bad_poll_leases[0]);
         i++)
        BAD(dq_poll_wait(C, "q", 1, bad_poll_leases[i], 10, &jobs), DQ_ELEASE,
            "lease_ms");
    BAD(dq_poll_wait(C, "q", 1, 1000, 10, NULL), DQ_ENULL, "out");
    nothing_sent();
}
END_TEST

START_TEST(poll_wait_timeout) {
    dq_jobs *jobs = NULL;
    for (size_t i = 0; i < sizeof(bad_delays) / sizeof(bad_delays[0]); i++)
        BAD(dq_poll_wait(C, "q", 1, 1000, bad_delays[i], &jobs), DQ_EDELAY,
            "timeout_ms");
    nothing_sent();
}
END_TEST

/* ---- dq_ack / dq_ack_batch ------------------------------------------------- */

START_TEST(ack_args) {
    BAD_NULL_CLIENT(dq_ack(NULL, "q", "id", "1"));
    BAD_QUEUES(dq_ack(C, QUEUE, "id", "1"));
    BAD_IDS(dq_ack(C, "q", ID, "1"), 0);
    nothing_sent();
}
END_TEST

START_TEST(ack_token) {
    BAD_TOKENS(dq_ack(C, "q", "id", TOK));
    nothing_sent();
}
END_TEST

START_TEST(ack_batch_args) {
    const char *ids[2] = {"a", "b"}, *toks[2] = {"1", "2"};
    BAD_NULL_CLIENT(dq_ack_batch(NULL, "q", 2, ids, toks, NULL));
    BAD_QUEUES(dq_ack_batch(C, QUEUE, 2, ids, toks, NULL));
    BAD(dq_ack_batch(C, "q", 0, ids, toks, NULL), DQ_EINVAL, "n is");
    BAD(dq_ack_batch(C, "q", (size_t)DQ_BATCH_MAX + 1, ids, toks, NULL),
        DQ_EINVAL, "n is");
    BAD(dq_ack_batch(C, "q", 2, NULL, toks, NULL), DQ_ENULL, "ids");
    BAD(dq_ack_batch(C, "q", 2, ids, NULL, NULL), DQ_ENULL, "tokens");
    nothing_sent();
}
END_TEST

START_TEST(ack_batch_entries) {
    const char *ids[2] = {"a", NULL}, *toks[2] = {"1", "2"};
    BAD(dq_ack_batch(C, "q", 2, ids, toks, NULL), DQ_ENULL, "id");
    ids[1] = "";
    BAD(dq_ack_batch(C, "q", 2, ids, toks, NULL), DQ_EID, "id");
    ids[1] = ID129;
    BAD(dq_ack_batch(C, "q", 2, ids, toks, NULL), DQ_EID, "id");
    ids[1] = "b";
    toks[1] = NULL;
    BAD(dq_ack_batch(C, "q", 2, ids, toks, NULL), DQ_ENULL, "token");
    toks[1] = "x1";
    BAD(dq_ack_batch(C, "q", 2, ids, toks, NULL), DQ_EINVAL, "token");
    nothing_sent();
}
END_TEST

/* ---- dq_nack / dq_extend ----------------------------------------------------- */

START_TEST(nack_args) {
    BAD_NULL_CLIENT(dq_nack(NULL, "q", "id", "1", 0, 0));
    BAD_QUEUES(dq_nack(C, QUEUE, "id", "1", 0, 0));
    BAD_IDS(dq_nack(C, "q", ID, "1", 0, 0), 0);
    BAD_TOKENS(dq_nack(C, "q", "id", TOK, 0, 0));
    nothing_sent();
}
END_TEST

START_TEST(nack_delay) {
    for (size_t i = 0; i < sizeof(bad_delays) / sizeof(bad_delays[0]); i++)
        BAD(dq_nack(C, "q", "id", "1", bad_delays[i], 0), DQ_EDELAY, "delay_ms");
    nothing_sent();
}
END_TEST

START_TEST(nack_flags) {
    BAD(dq_nack(C, "q", "id", "1", 0, 4), DQ_EINVAL, "flags");
    BAD(dq_nack(C, "q", "id", "1", 0, -1), DQ_EINVAL, "flags");
    nothing_sent();
}
END_TEST

START_TEST(extend_args) {
    int64_t dl = 0;
    BAD_NULL_CLIENT(dq_extend(NULL, "q", "id", "1", 1000, &dl));
    BAD_QUEUES(dq_extend(C, QUEUE, "id", "1", 1000, &dl));
    BAD_IDS(dq_extend(C, "q", ID, "1", 1000, &dl), 0);
    BAD_TOKENS(dq_extend(C, "q", "id", TOK, 1000, &dl));
    nothing_sent();
}
END_TEST

START_TEST(extend_lease) {
    for (size_t i = 0; i < sizeof(bad_leases) / sizeof(bad_leases[0]); i++)
        BAD(dq_extend(C, "q", "id", "1", bad_leases[i], NULL), DQ_ELEASE,
            "lease_ms");
    nothing_sent();
}
END_TEST

/* ---- dead letters and stats ---------------------------------------------------- */

START_TEST(dead_list_args) {
    dq_jobs *jobs = (dq_jobs *)&jobs;
    BAD_NULL_CLIENT(dq_dead_list(NULL, "q", 0, 10, &jobs));
    BAD_QUEUES(dq_dead_list(C, QUEUE, 0, 10, &jobs));
    ck_assert_ptr_null(jobs);
    BAD(dq_dead_list(C, "q", 0, 10, NULL), DQ_ENULL, "out");
    nothing_sent();
}
END_TEST

START_TEST(dead_list_offset) {
    dq_jobs *jobs = NULL;
    BAD(dq_dead_list(C, "q", -1, 10, &jobs), DQ_EINVAL, "offset");
    BAD(dq_dead_list(C, "q", (int64_t)INT32_MAX + 1, 10, &jobs), DQ_EINVAL,
        "offset");
    BAD(dq_dead_list(C, "q", INT64_MIN, 10, &jobs), DQ_EINVAL, "offset");
    nothing_sent();
}
END_TEST

START_TEST(dead_list_count) {
    dq_jobs *jobs = NULL;
    BAD(dq_dead_list(C, "q", 0, 0, &jobs), DQ_EINVAL, "count");
    BAD(dq_dead_list(C, "q", 0, DQ_POLL_MAX + 1, &jobs), DQ_EINVAL, "count");
    BAD(dq_dead_list(C, "q", 0, -5, &jobs), DQ_EINVAL, "count");
    nothing_sent();
}
END_TEST

START_TEST(dead_requeue_args) {
    BAD_NULL_CLIENT(dq_dead_requeue(NULL, "q", NULL, 0));
    BAD_QUEUES(dq_dead_requeue(C, QUEUE, NULL, 0));
    BAD_IDS(dq_dead_requeue(C, "q", ID, 0), 1);
    for (size_t i = 0; i < sizeof(bad_delays) / sizeof(bad_delays[0]); i++)
        BAD(dq_dead_requeue(C, "q", NULL, bad_delays[i]), DQ_EDELAY, "delay_ms");
    nothing_sent();
}
END_TEST

START_TEST(dead_purge_args) {
    BAD_NULL_CLIENT(dq_dead_purge(NULL, "q", NULL));
    BAD_QUEUES(dq_dead_purge(C, QUEUE, NULL));
    BAD_IDS(dq_dead_purge(C, "q", ID), 1);
    nothing_sent();
}
END_TEST

START_TEST(stats_args) {
    int64_t v = 0;
    BAD_NULL_CLIENT(dq_stats(NULL, "q", &v, &v, &v, &v, &v));
    BAD_QUEUES(dq_stats(C, QUEUE, &v, &v, &v, &v, &v));
    nothing_sent();
}
END_TEST

/* ---- options ------------------------------------------------------------------ */

START_TEST(options_set_int) {
    ck_assert_int_eq(dq_options_set_int(NULL, DQ_OPT_MAX_PAYLOAD, 1), DQ_ENULL);
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    /* unknown and string keys */
    const int keys[] = {0, DQ_OPT_DURABLE + 1, 99, -1, DQ_OPT_NAMESPACE, DQ_OPT_PASSWORD,
                        DQ_OPT_TLS_SERVER_NAME, 107};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        ck_assert_msg(dq_options_set_int(o, keys[i], 1) == DQ_EINVAL, "key %d",
                      keys[i]);
    struct {
        int key;
        int64_t lo, hi; /* valid range */
    } ranges[] = {
        {DQ_OPT_CONNECT_TIMEOUT_MS, 0, 3600000},
        {DQ_OPT_COMMAND_TIMEOUT_MS, 0, 3600000},
        {DQ_OPT_MAX_PAYLOAD, 0, 512LL * 1024 * 1024},
        {DQ_OPT_MAX_ATTEMPTS, 0, 1000000},
        {DQ_OPT_WAIT_CAP_MS, 10, 60000},
        {DQ_OPT_WAIT_REPLICAS, 0, 1000},
        {DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS, 0, 3600000},
        {DQ_OPT_DONE_TTL_MS, 0, INT64_C(604800000)},
        {DQ_OPT_PARTITIONS, 0, 1024},
        {DQ_OPT_COUNTERS, 0, 1},
        {DQ_OPT_DURABLE, 0, 1},
    };
    for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
        int k = ranges[i].key;
        ck_assert_msg(dq_options_set_int(o, k, ranges[i].lo) == 0, "key %d lo", k);
        ck_assert_msg(dq_options_set_int(o, k, ranges[i].hi) == 0, "key %d hi", k);
        ck_assert_msg(dq_options_set_int(o, k, ranges[i].lo - 1) == DQ_EINVAL,
                      "key %d below", k);
        ck_assert_msg(dq_options_set_int(o, k, ranges[i].hi + 1) == DQ_EINVAL,
                      "key %d above", k);
        ck_assert_msg(dq_options_set_int(o, k, INT64_MIN) == DQ_EINVAL,
                      "key %d min", k);
    }
    /* a refused value leaves the set unchanged: the limit stays 100 */
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_MAX_PAYLOAD, 100), 0);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_MAX_PAYLOAD, -5), DQ_EINVAL);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    before = commands_processed(R); /* dq_open talked to Redis */
    ck_assert_int_eq(dq_push(c, "q", BIG, 101, 0, NULL, 0, NULL, 0, NULL),
                     DQ_ETOOBIG);
    dq_close(c);
    nothing_sent();
}
END_TEST

START_TEST(options_set_str) {
    ck_assert_int_eq(dq_options_set_str(NULL, DQ_OPT_NAMESPACE, "x"), DQ_ENULL);
    dq_options *o = dq_options_new();
    const int keys[] = {0, DQ_OPT_MAX_PAYLOAD, DQ_OPT_WAIT_CAP_MS, 99, 107, -1};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        ck_assert_msg(dq_options_set_str(o, keys[i], "x") == DQ_EINVAL, "key %d",
                      keys[i]);
    char ns65[66];
    memset(ns65, 'n', 65);
    ns65[65] = '\0';
    const char *bad_ns[] = {"", ns65, "a{b", "a}b", "a b", "caf\xc3\xa9", "a/b",
                            "a*", "a%"};
    for (size_t i = 0; i < sizeof(bad_ns) / sizeof(bad_ns[0]); i++)
        ck_assert_msg(dq_options_set_str(o, DQ_OPT_NAMESPACE, bad_ns[i]) ==
                          DQ_EINVAL,
                      "namespace '%s'", bad_ns[i]);
    ns65[64] = '\0';
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, ns65), 0);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, "A-z_0.9:x"), 0);
    /* a refused namespace leaves the previous one; NULL resets */
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, "bad ns"), DQ_EINVAL);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_PASSWORD, NULL), 0);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_USERNAME, NULL), 0);
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, NULL), 0);
    dq_options_free(o);
    nothing_sent();
}
END_TEST

START_TEST(open_args) {
    ck_assert_int_eq(dq_open(g_srv.uri, NULL, NULL), DQ_ENULL);
    dq_client *c = NULL;
    ck_assert_int_eq(dq_open(NULL, NULL, &c), DQ_ENULL);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(strstr(dq_errmsg(c), "uri"));
    ck_assert_int_eq(dq_errcode(c), DQ_ENULL);
    dq_close(c);
    nothing_sent();
}
END_TEST

/* ---- errors, frees, accessors ---------------------------------------------------- */

START_TEST(error_texts) {
    static const struct {
        int code;
        const char *name;
    } codes[] = {
#define XX(name, value, msg) {DQ_##name, #name},
        DQ_ERRNO_MAP(XX)
#undef XX
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);
    ck_assert_uint_eq(n, (size_t)-DQ_ERRNO_MIN);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(codes[i].code, -(int)(i + 1));
        ck_assert_str_eq(dq_errname(codes[i].code), codes[i].name);
        const char *t = dq_strerror(codes[i].code);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_ne(t, "");
        ck_assert_str_ne(t, "unknown error");
        for (size_t k = 0; k < i; k++)
            ck_assert_str_ne(t, dq_strerror(codes[k].code));
    }
    ck_assert_str_eq(dq_errname(DQ_ESTALE), "ESTALE");
    ck_assert_str_eq(dq_errname(0), "OK");
    ck_assert_str_ne(dq_strerror(0), "");
    const int unknown[] = {1, 2, 100, DQ_ERRNO_MIN - 1, -1000, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        ck_assert_str_eq(dq_strerror(unknown[i]), "unknown error");
        ck_assert_str_eq(dq_errname(unknown[i]), "UNKNOWN");
    }
    ck_assert_ptr_nonnull(dq_errmsg(NULL));
    ck_assert_str_ne(dq_errmsg(NULL), "");
    ck_assert_int_eq(dq_errcode(NULL), DQ_ENULL);
    ck_assert_str_eq(dq_warnings(NULL), "");
    /* a failed call's message is replaced by "" after a success */
    BAD(dq_poll(C, "q", 0, 1000, NULL, NULL), DQ_ENULL, "out");
    ck_assert_str_eq(dq_warnings(C), "");
    nothing_sent();
}
END_TEST

START_TEST(null_frees_and_accessors) {
    dq_close(NULL);
    dq_jobs_free(NULL);
    dq_job_free(NULL);
    dq_options_free(NULL);
    ck_assert_uint_eq(dq_jobs_count(NULL), 0);
    ck_assert_ptr_null(dq_jobs_at(NULL, 0));
    ck_assert_ptr_null(dq_job_id(NULL));
    size_t len = 77;
    ck_assert_ptr_null(dq_job_payload(NULL, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_ptr_null(dq_job_payload(NULL, NULL));
    ck_assert_int_eq(dq_job_attempt(NULL), 0);
    ck_assert_int_eq(dq_job_due_ms(NULL), 0);
    ck_assert_int_eq(dq_job_lease_deadline_ms(NULL), 0);
    ck_assert_ptr_null(dq_job_token(NULL));
    ck_assert_ptr_null(dq_job_dup(NULL));
    nothing_sent();
}
END_TEST

/* The checks on a real list: out-of-range index, accessors without len. */
START_TEST(accessors_on_list) {
    dq_client *c = open_client();
    push_text(c, Q, "hello", 0, "acc", 0, NULL);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_ptr_null(dq_jobs_at(jobs, 1));
    ck_assert_ptr_null(dq_jobs_at(jobs, SIZE_MAX));
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "hello");
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

TEST_SUITE("badinput", TU_SRV_UNIX,
    {"push_client", push_client, 30, &fixture},
    {"push_queue", push_queue, 30, &fixture},
    {"push_payload", push_payload, 30, &fixture},
    {"push_len", push_len, 30, &fixture},
    {"push_delay", push_delay, 30, &fixture},
    {"push_id", push_id, 30, &fixture},
    {"push_flags", push_flags, 30, &fixture},
    {"push_id_out_size", push_id_out_size, 30, &fixture},
    {"push_at_args", push_at_args, 30, &fixture},
    {"push_at_time", push_at_time, 30, &fixture},
    {"batch_client_queue", batch_client_queue, 30, &fixture},
    {"batch_n", batch_n, 30, &fixture},
    {"batch_payloads", batch_payloads, 30, &fixture},
    {"batch_lens", batch_lens, 30, &fixture},
    {"batch_delays", batch_delays, 30, &fixture},
    {"batch_ids", batch_ids, 30, &fixture},
    {"batch_flags", batch_flags, 30, &fixture},
    {"cancel_args", cancel_args, 30, &fixture},
    {"poll_client_queue", poll_client_queue, 30, &fixture},
    {"poll_max", poll_max, 30, &fixture},
    {"poll_lease", poll_lease, 30, &fixture},
    {"poll_out", poll_out, 30, &fixture},
    {"poll_wait_args", poll_wait_args, 30, &fixture},
    {"poll_wait_timeout", poll_wait_timeout, 30, &fixture},
    {"ack_args", ack_args, 30, &fixture},
    {"ack_token", ack_token, 30, &fixture},
    {"ack_batch_args", ack_batch_args, 30, &fixture},
    {"ack_batch_entries", ack_batch_entries, 30, &fixture},
    {"nack_args", nack_args, 30, &fixture},
    {"nack_delay", nack_delay, 30, &fixture},
    {"nack_flags", nack_flags, 30, &fixture},
    {"extend_args", extend_args, 30, &fixture},
    {"extend_lease", extend_lease, 30, &fixture},
    {"dead_list_args", dead_list_args, 30, &fixture},
    {"dead_list_offset", dead_list_offset, 30, &fixture},
    {"dead_list_count", dead_list_count, 30, &fixture},
    {"dead_requeue_args", dead_requeue_args, 30, &fixture},
    {"dead_purge_args", dead_purge_args, 30, &fixture},
    {"stats_args", stats_args, 30, &fixture},
    {"options_set_int", options_set_int, 30, &fixture},
    {"options_set_str", options_set_str, 30, &fixture},
    {"open_args", open_args, 30, &fixture},
    {"error_texts", error_texts, 30, &fixture},
    {"null_frees", null_frees_and_accessors, 30, &fixture},
    {"accessors_on_list", accessors_on_list, 30, NULL})
