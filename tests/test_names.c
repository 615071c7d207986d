/*
 * tests/test_names.c - hostile queue names and the namespace option: every
 * key a queue creates lies under "<ns>:{<percent-encoded name>}:", and no
 * name can reach another queue's keys.
 */
#include "test_suite.h"
#include "test_utils.h"

/* Names chosen to break a naive key scheme; some look like other names'
 * keys or tags. */
static const char *const hostile[] = {
    "a",
    "a}:due",
    "a}",
    "{a}",
    "a:due",
    "a%7D",
    "a%7d",
    "orders with spaces",
    "colons:in:name",
    "}{",
    "{",
    "}",
    "%",
    "%25",
    "100%",
    "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80", /* UTF-8 */
    "\xff\xfe\x01\x7f",                                     /* not UTF-8 */
    "tab\tnew\nline\r",
    "dq:{a}:due",
    "*",
    "?",
    "[a]",
    "a*",
    "\\",
    "\"quoted\"",
    "A",
};
#define NHOSTILE (sizeof(hostile) / sizeof(hostile[0]))

/* Lists every key on the server (SCAN, bounded). */
static size_t all_keys(redisContext *r, char keys[][700], size_t max) {
    size_t n = 0;
    char cursor[32] = "0";
    for (int rounds = 0; rounds < 10000; rounds++) {
        redisReply *rep = th_cmd(r, "SCAN %s COUNT 1000", cursor);
        ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
        redisReply *ks = rep->element[1];
        for (size_t i = 0; i < ks->elements; i++) {
            ck_assert_uint_lt(n, max);
            ck_assert_uint_lt(ks->element[i]->len, 700);
            memcpy(keys[n], ks->element[i]->str, ks->element[i]->len);
            keys[n][ks->element[i]->len] = '\0';
            n++;
        }
        freeReplyObject(rep);
        if (strcmp(cursor, "0") == 0)
            return n;
    }
    ck_abort_msg("SCAN did not finish");
    return n;
}

/* 1 if rest is the suffix of one of a queue's keys. */
static int key_kind(const char *rest) {
    /* cb, cm, mv, c:<bucket>, s:<shard>: the compact layout's
     * (lib/lua/include/compact/keys.lua), and conf with its flag "compact" */
    return strcmp(rest, "due") == 0 || strcmp(rest, "lease") == 0 ||
           strcmp(rest, "jobs") == 0 || strcmp(rest, "meta") == 0 ||
           strcmp(rest, "dead") == 0 || strcmp(rest, "done") == 0 ||
           strcmp(rest, "cb") == 0 || strcmp(rest, "cm") == 0 ||
           strcmp(rest, "conf") == 0 ||
           strcmp(rest, "mv") == 0 || strncmp(rest, "c:", 2) == 0 ||
           strncmp(rest, "s:", 2) == 0;
}

/* Checks that every key of the db starts with the prefix of one of names
 * (under ns), and that the hash tag is exactly the encoded name.  On a
 * partitioned run the tag is "<encoded name>#<i>", i < tu_parts(), and
 * under the bare name there is only the jobs hash (with the partition
 * count: tu_assert_plain_clean), also under the default namespace "dq":
 * a partitioned client records the count the first time it uses a queue,
 * a poll of an empty queue included. */
static void check_keys(redisContext *r, const char *ns, const char *const *names,
                       size_t nnames) {
    static char keys[4096][700];
    size_t n = all_keys(r, keys, 4096);
    ck_assert_uint_gt(n, 0);
    for (size_t i = 0; i < nnames; i++)
        tu_assert_plain_clean(r, ns, names[i]);
    for (size_t k = 0; k < n; k++) {
        int ok = 0;
        for (size_t i = 0; i < nnames && !ok; i++) {
            char enc[DQ_QUEUE_MAX * 3 + 1], prefix[800];
            pct_encode(names[i], enc);
            snprintf(prefix, sizeof(prefix), "%s:{%s}:", ns, enc);
            if (strncmp(keys[k], prefix, strlen(prefix)) == 0) {
                const char *rest = keys[k] + strlen(prefix);
                ok = tu_parts() == 1 ? key_kind(rest) : strcmp(rest, "jobs") == 0;
                continue;
            }
            snprintf(prefix, sizeof(prefix), "dq:{%s}:jobs", enc);
            if (tu_parts() > 1 && strcmp(keys[k], prefix) == 0) {
                tu_assert_plain_clean(r, "dq", names[i]);
                ok = 1;
                continue;
            }
            for (int p = 0; p < tu_parts() && tu_parts() > 1 && !ok; p++) {
                snprintf(prefix, sizeof(prefix), "%s:{%s#%d}:", ns, enc, p);
                if (strncmp(keys[k], prefix, strlen(prefix)) == 0)
                    ok = key_kind(keys[k] + strlen(prefix));
            }
        }
        ck_assert_msg(ok, "key '%s' is not under any expected prefix", keys[k]);
        /* Redis hashes the text between the first '{' and the next '}':
         * it must be the whole encoded name (no brace inside). */
        const char *open = strchr(keys[k], '{');
        ck_assert_ptr_nonnull(open);
        const char *close = strchr(open, '}');
        ck_assert_ptr_nonnull(close);
        ck_assert_ptr_null(strchr(open + 1, '{'));
        ck_assert_ptr_null(strchr(close + 1, '}'));
    }
}

START_TEST(hostile_names_isolated) {
    redisContext *r = rconn();
    redisReply *rep = th_cmd(r, "SELECT 5"); /* a db of its own */
    freeReplyObject(rep);
    char uri[500];
    uri_with("db=5", uri, sizeof(uri));
    dq_client *c = open_uri(uri, NULL);
    /* one job per name, payload = the name; each gets a dead job too, so
     * every kind of key exists */
    for (size_t i = 0; i < NHOSTILE; i++) {
        char id[DQ_ID_BUF];
        int outcome = 0;
        ck_assert_int_eq(dq_push(c, hostile[i], hostile[i], strlen(hostile[i]),
                                 0, "same-id", 0, id, sizeof(id), &outcome),
                         0);
        ck_assert_int_eq(outcome, DQ_PUSHED); /* ids are per queue */
        push_text(c, hostile[i], "dead", 0, "dead-id", 0, NULL);
        push_text(c, hostile[i], "later", 60000, "later-id", 0, NULL);
    }
    for (size_t i = 0; i < NHOSTILE; i++) {
        dq_jobs *jobs = NULL;
        ck_assert_int_eq(poll_n(c, hostile[i], 10, 60000, &jobs, NULL), 2);
        for (size_t k = 0; k < 2; k++) {
            const dq_job *j = dq_jobs_at(jobs, k);
            if (strcmp(dq_job_id(j), "same-id") == 0) {
                size_t len;
                const char *p = dq_job_payload(j, &len);
                ck_assert_msg(len == strlen(hostile[i]) &&
                                  memcmp(p, hostile[i], len) == 0,
                              "queue %zu got another queue's job", i);
            } else {
                ck_assert_str_eq(dq_job_id(j), "dead-id");
                ck_assert_int_eq(dq_nack(c, hostile[i], "dead-id",
                                         dq_job_token(j), 0, DQ_NACK_DEAD),
                                 1);
            }
        }
        dq_jobs_free(jobs);
        ck_stats(c, hostile[i], 1, 0, 1, 1);
    }
    check_keys(r, "dq", hostile, NHOSTILE);
    /* cancelling in one queue leaves the look-alikes alone */
    ck_assert_int_eq(dq_cancel(c, "a}:due", "later-id", 0), DQ_CANCELED_PENDING);
    ck_stats(c, "a}:due", 0, 0, 1, 1);
    ck_stats(c, "a", 1, 0, 1, 1);
    ck_stats(c, "a}", 1, 0, 1, 1);
    ck_stats(c, "A", 1, 0, 1, 1);
    ck_assert_int_eq(dq_dead_purge(c, "a", NULL), 1);
    ck_stats(c, "a%7D", 1, 0, 1, 1);
    ck_stats(c, "a", 1, 0, 1, 0);
    dq_close(c);
    redisFree(r);
}
END_TEST

/* The longest name (200 bytes), all bytes that need escaping. */
START_TEST(longest_name) {
    char name[DQ_QUEUE_MAX + 1];
    memset(name, '{', DQ_QUEUE_MAX);
    name[DQ_QUEUE_MAX] = '\0';
    char name2[DQ_QUEUE_MAX + 1];
    for (int i = 0; i < DQ_QUEUE_MAX; i++)
        name2[i] = (char)(0x80 + i % 128);
    name2[DQ_QUEUE_MAX] = '\0';
    redisContext *r = rconn();
    freeReplyObject(th_cmd(r, "SELECT 6"));
    char uri[500];
    uri_with("db=6", uri, sizeof(uri));
    dq_client *c = open_uri(uri, NULL);
    push_text(c, name, "x", 0, NULL, 0, NULL);
    push_text(c, name2, "y", 0, NULL, 0, NULL);
    dq_jobs *jobs = poll_one(c, name, 5000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "x");
    dq_jobs_free(jobs);
    jobs = poll_one(c, name2, 5000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "y");
    dq_jobs_free(jobs);
    const char *names[2] = {name, name2};
    check_keys(r, "dq", names, 2);
    dq_close(c);
    redisFree(r);
}
END_TEST

/* dq_poll_wait on a hostile name wakes on a push from another client. */
START_TEST(hostile_name_wakes) {
    const char *name = "wake {me}: caf\xc3\xa9";
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_WAIT_CAP_MS, 5000), 0);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(dq_poll_wait(c, name, 1, 1000, 10, &jobs), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dq_client *p = NULL;
        if (dq_open(g_srv.uri, NULL, &p) != 0)
            _exit(2);
        th_sleep_ms(200);
        /* a push to a look-alike queue must not deliver anything here */
        dq_push(p, "wake {me}", "no", 2, 0, NULL, 0, NULL, 0, NULL);
        th_sleep_ms(100);
        _exit(dq_push(p, name, "yes", 3, 0, NULL, 0, NULL, 0, NULL) == 0 ? 0 : 3);
    }
    int64_t t0 = th_mono_ms();
    ck_assert_int_eq(dq_poll_wait(c, name, 1, 1000, 4000, &jobs), 1);
    ck_assert_int_lt(th_mono_ms() - t0, 2000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "yes");
    dq_jobs_free(jobs);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    dq_close(c);
}
END_TEST

START_TEST(namespace_prefix) {
    redisContext *r = rconn();
    freeReplyObject(th_cmd(r, "SELECT 7"));
    char uri[500];
    uri_with("db=7", uri, sizeof(uri));
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, "my-app:prod.v1_x"),
                     0);
    dq_client *c = open_uri(uri, o);
    dq_options_free(o);
    dq_client *plain = open_uri(uri, NULL);
    push_text(c, "orders", "namespaced", 0, "j", 0, NULL);
    /* the default namespace does not see it */
    dq_jobs *jobs = NULL;
    int64_t next = 0;
    ck_assert_int_eq(poll_n(plain, "orders", 10, 1000, &jobs, &next), 0);
    ck_assert_int_eq(next, -1);
    jobs = poll_one(c, "orders", 5000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "namespaced");
    dq_jobs_free(jobs);
    const char *names[1] = {"orders"};
    check_keys(r, "my-app:prod.v1_x", names, 1);
    /* a default-namespace queue's keys are under "dq:" */
    push_text(plain, "orders", "plain", 0, "j", 0, NULL);
    char key[700];
    ck_assert_int_eq(tu_job_stored(r, "dq", "orders", "j"), 1);
    tu_key(key, sizeof(key), "my-app:prod.v1_x", "orders", "jobs", "j");
    ck_assert_int_eq(rint_(r, "HEXISTS", key, "j"), 1); /* still in flight */
    dq_close(plain);
    dq_close(c);
    redisFree(r);
}
END_TEST

TEST_SUITE("names", TU_SRV_UNIX,
    {"hostile", hostile_names_isolated, 30, NULL},
    {"longest", longest_name, 30, NULL},
    {"hostile_wake", hostile_name_wakes, 30, NULL},
    {"namespace", namespace_prefix, 30, NULL})
