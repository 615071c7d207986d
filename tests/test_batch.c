/*
 * tests/test_batch.c - dq_push_batch (chunks of 1000, ids_out, outcomes,
 * keep/replace per job) and dq_ack_batch (a result per job).
 */
#include "test_suite.h"
#include "test_utils.h"

enum { N = 2500 };

START_TEST(push_batch_crosses_chunks) {
    dq_client *c = open_client();
    static char bufs[N][16];
    const void *pl[N];
    size_t lens[N];
    int64_t delays[N];
    int outcomes[N];
    char *ids = malloc((size_t)N * DQ_ID_BUF);
    for (int i = 0; i < N; i++) {
        /* binary payloads that say which job they belong to */
        lens[i] = (size_t)snprintf(bufs[i], sizeof(bufs[i]), "j%d", i) + 2;
        bufs[i][lens[i] - 1] = '\x01';
        pl[i] = bufs[i];
        delays[i] = i < 2000 ? 0 : 60000; /* the last 500 are scheduled */
        outcomes[i] = -1;
    }
    ck_assert_int_eq(
        dq_push_batch(c, Q, N, pl, lens, delays, NULL, 0, ids, outcomes), N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(outcomes[i], DQ_PUSHED);
        ck_assert_uint_eq(strlen(ids + (size_t)i * DQ_ID_BUF), 14);
    }
    ck_stats(c, Q, 500, 2000, 0, 0);

    /* Every due job arrives once, with the payload of its index. */
    static unsigned char seen[N];
    memset(seen, 0, sizeof(seen));
    int got = 0;
    for (int round = 0; round < 5 && got < 2000; round++) {
        dq_jobs *jobs = NULL;
        int n = poll_n(c, Q, 1000, 30000, &jobs, NULL);
        for (int k = 0; k < n; k++) {
            const dq_job *j = dq_jobs_at(jobs, (size_t)k);
            size_t len;
            const char *p = dq_job_payload(j, &len);
            int idx = atoi(p + 1);
            ck_assert_int_lt(idx, 2000);
            ck_assert_uint_eq(len, lens[idx]);
            ck_assert_int_eq(memcmp(p, bufs[idx], len), 0);
            ck_assert_str_eq(dq_job_id(j), ids + (size_t)idx * DQ_ID_BUF);
            ck_assert_int_eq(seen[idx], 0);
            seen[idx] = 1;
        }
        got += n;
        dq_jobs_free(jobs);
    }
    ck_assert_int_eq(got, 2000);
    ck_stats(c, Q, 500, 0, 2000, 0);
    free(ids);
    dq_close(c);
}
END_TEST

START_TEST(push_batch_keep_replace) {
    dq_client *c = open_client();
    push_text(c, Q, "old-a", 60000, "a", 0, NULL);
    push_text(c, Q, "old-b", 60000, "b", 0, NULL);
    const void *pl[4] = {"new-a", "new-c", "new-b", NULL};
    size_t lens[4] = {5, 5, 5, 0};
    const char *ids[4] = {"a", "c", "b", NULL}; /* NULL: generated */
    int outcomes[4];
    char out[4 * DQ_ID_BUF];
    ck_assert_int_eq(dq_push_batch(c, Q, 4, pl, lens, NULL, ids, DQ_PUSH_KEEP,
                                   out, outcomes),
                     2);
    ck_assert_int_eq(outcomes[0], DQ_KEPT);
    ck_assert_int_eq(outcomes[1], DQ_PUSHED);
    ck_assert_int_eq(outcomes[2], DQ_KEPT);
    ck_assert_int_eq(outcomes[3], DQ_PUSHED);
    ck_assert_str_eq(out, "a");
    ck_assert_str_eq(out + DQ_ID_BUF, "c");
    ck_assert_str_eq(out + 2 * DQ_ID_BUF, "b");
    ck_assert_uint_eq(strlen(out + 3 * DQ_ID_BUF), 14);
    ck_stats(c, Q, 2, 2, 0, 0);

    /* Replace: existing ones rescheduled to now, a new one pushed. */
    const char *ids2[3] = {"a", "b", "d"};
    ck_assert_int_eq(dq_push_batch(c, Q, 3, pl, lens, NULL, ids2,
                                   DQ_PUSH_REPLACE, NULL, outcomes),
                     3);
    ck_assert_int_eq(outcomes[0], DQ_REPLACED);
    ck_assert_int_eq(outcomes[1], DQ_REPLACED);
    ck_assert_int_eq(outcomes[2], DQ_PUSHED);
    ck_stats(c, Q, 0, 5, 0, 0);
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, NULL), 5);
    for (size_t i = 0; i < 5; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        if (strcmp(dq_job_id(j), "a") == 0)
            ck_assert_str_eq(dq_job_payload(j, NULL), "new-a");
        if (strcmp(dq_job_id(j), "b") == 0)
            ck_assert_str_eq(dq_job_payload(j, NULL), "new-c");
    }
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

/* The same id twice in one batch: with keep the first wins. */
START_TEST(push_batch_duplicate_ids) {
    dq_client *c = open_client();
    const void *pl[2] = {"first", "second"};
    size_t lens[2] = {5, 6};
    const char *ids[2] = {"dup", "dup"};
    int outcomes[2];
    ck_assert_int_eq(
        dq_push_batch(c, Q, 2, pl, lens, NULL, ids, 0, NULL, outcomes), 1);
    ck_assert_int_eq(outcomes[0], DQ_PUSHED);
    ck_assert_int_eq(outcomes[1], DQ_KEPT);
    dq_jobs *jobs = poll_one(c, Q, 5000);
    ck_assert_str_eq(dq_job_payload(dq_jobs_at(jobs, 0), NULL), "first");
    dq_jobs_free(jobs);
    ck_stats(c, Q, 0, 0, 1, 0);
    dq_close(c);
}
END_TEST

/* The job with this id in a list (fails the test if there is none). */
static const dq_job *job_by_id(const dq_jobs *jobs, const char *id) {
    for (size_t i = 0; i < dq_jobs_count(jobs); i++)
        if (strcmp(dq_job_id(dq_jobs_at(jobs, i)), id) == 0)
            return dq_jobs_at(jobs, i);
    ck_abort_msg("job %s not in the list", id);
    return NULL;
}

START_TEST(ack_batch_mixed) {
    dq_client *c = open_client();
    for (int i = 0; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof(id), "k%d", i);
        push_text(c, Q, id, 0, id, 0, NULL);
    }
    dq_jobs *jobs = NULL;
    ck_assert_int_eq(poll_n(c, Q, 10, 5000, &jobs, NULL), 4);
    /* by id: a partitioned poll returns them partition by partition */
    const dq_job *k[4];
    for (int i = 0; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof(id), "k%d", i);
        k[i] = job_by_id(jobs, id);
    }
    /* k0 good, k1 stale token, nobody unknown, k2 good, k3 token "0" */
    const char *ids[5] = {"k0", "k1", "nobody", "k2", "k3"};
    char stale[DQ_TOKEN_BUF];
    snprintf(stale, sizeof(stale), "%lld", atoll(dq_job_token(k[1])) + 1000);
    const char *toks[5] = {dq_job_token(k[0]), stale, "1", dq_job_token(k[2]),
                           "0"};
    int results[5] = {9, 9, 9, 9, 9};
    ck_assert_int_eq(dq_ack_batch(c, Q, 5, ids, toks, results), 2);
    ck_assert_int_eq(results[0], 0);
    ck_assert_int_eq(results[1], DQ_ESTALE);
    ck_assert_int_eq(results[2], DQ_ENOTFOUND);
    ck_assert_int_eq(results[3], 0);
    ck_assert_int_eq(results[4], DQ_ESTALE);
    /* nothing changed for the refused ones */
    ck_stats(c, Q, 0, 0, 2, 0);
    /* results may be NULL; acking k0 twice with its token: the second ack
     * finds its own done record and counts as landed */
    const char *ids2[3] = {"k1", "k3", "k0"};
    const char *toks2[3] = {dq_job_token(k[1]), dq_job_token(k[3]),
                            dq_job_token(k[0])};
    ck_assert_int_eq(dq_ack_batch(c, Q, 3, ids2, toks2, NULL), 3);
    ck_stats(c, Q, 0, 0, 0, 0);
    dq_jobs_free(jobs);
    dq_close(c);
}
END_TEST

START_TEST(ack_batch_large) {
    dq_client *c = open_client();
    const void **pl = calloc(N, sizeof(*pl));
    size_t *lens = calloc(N, sizeof(*lens));
    ck_assert_int_eq(dq_push_batch(c, Q, N, pl, lens, NULL, NULL, 0, NULL, NULL),
                     N);
    const char **ids = calloc(N, sizeof(*ids));
    const char **toks = calloc(N, sizeof(*toks));
    int *results = calloc(N, sizeof(*results));
    dq_jobs *lists[3] = {NULL, NULL, NULL};
    size_t k = 0;
    for (int r = 0; r < 3; r++) {
        int n = poll_n(c, Q, 1000, 30000, &lists[r], NULL);
        for (int i = 0; i < n; i++, k++) {
            ids[k] = dq_job_id(dq_jobs_at(lists[r], (size_t)i));
            toks[k] = dq_job_token(dq_jobs_at(lists[r], (size_t)i));
        }
    }
    ck_assert_uint_eq(k, N);
    ck_assert_int_eq(dq_ack_batch(c, Q, N, ids, toks, results), N);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(results[i], 0);
    ck_stats(c, Q, 0, 0, 0, 0);
    for (int r = 0; r < 3; r++)
        dq_jobs_free(lists[r]);
    free(pl);
    free(lens);
    free(ids);
    free(toks);
    free(results);
    dq_close(c);
}
END_TEST

TEST_SUITE("batch", TU_SRV_UNIX,
    {"push_chunks", push_batch_crosses_chunks, 30, NULL},
    {"push_keep_replace", push_batch_keep_replace, 30, NULL},
    {"push_duplicates", push_batch_duplicate_ids, 30, NULL},
    {"ack_mixed", ack_batch_mixed, 30, NULL},
    {"ack_large", ack_batch_large, 30, NULL})
