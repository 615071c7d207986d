/*
 * tests/unit/test_decode.c - white-box tests of the decoders of lib/ops.c
 * for the jobs of a poll and of a listing: one reader of the groups and
 * priorities both scripts may add as a last element (runs { pos, fair,
 * ... }, lua/include/meta.lua), a reply without it read as before, and a
 * malformed one refused with DQ_EPROTO and nothing handed out.  Replies are
 * made from RESP text by hiredis's own parser.  No Redis involved.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "ops.h"
#include "reply_text.h"

/* A poll reply (list: a listing's) of n jobs "j1".."jn", then tail (RESP
 * text of one more element, or NULL), in buf. */
static const char *reply_of(char *buf, size_t size, int list, int n,
                            const char *tail) {
    int k = snprintf(buf, size, "*%d\r\n:1700000000000\r\n",
                     (list ? 1 : 3) + 5 * n + (tail != NULL));
    if (!list)
        k += snprintf(buf + k, size - (size_t)k, ":0\r\n:30000\r\n");
    for (int i = 1; i <= n; i++)
        k += snprintf(buf + k, size - (size_t)k,
                      list ? "$2\r\nj%d\r\n$1\r\nx\r\n:1\r\n:17\r\n$-1\r\n"
                           : "$2\r\nj%d\r\n$1\r\nx\r\n:1\r\n:17\r\n$2\r\n42\r\n",
                      i);
    if (tail != NULL)
        k += snprintf(buf + k, size - (size_t)k, "%s", tail);
    ck_assert_uint_lt((size_t)k, size);
    return buf;
}

/* Decodes the len bytes of text as a poll (list: a listing) reply into
 * *jobs. */
static int decode_len(const char *text, size_t len, int list, dq_jobs **jobs,
                      dq__err *err) {
    redisReader *rd = redisReaderCreate();
    void *r = NULL;
    ck_assert_ptr_nonnull(rd);
    ck_assert_int_eq(redisReaderFeed(rd, text, len), REDIS_OK);
    ck_assert_int_eq(redisReaderGetReply(rd, &r), REDIS_OK);
    ck_assert_ptr_nonnull(r);
    redisReaderFree(rd);
    int64_t v = 0;
    dq__err_clear(err);
    int rc = list ? dq__decode_list(r, DQ_LIST_SCHEDULED, jobs, &v, err)
                  : dq__decode_poll(r, jobs, &v, err);
    freeReplyObject(r);
    return rc;
}

static int decode(const char *text, int list, dq_jobs **jobs, dq__err *err) {
    return decode_len(text, strlen(text), list, jobs, err);
}

/* Job i of jobs has group g (NULL none) and priority p. */
static void fair_is(const dq_jobs *jobs, size_t i, const char *g, int p) {
    const dq_job *j = dq_jobs_at(jobs, i);
    ck_assert_ptr_nonnull(j);
    if (g == NULL)
        ck_assert_ptr_null(dq_job_group(j));
    else
        ck_assert_str_eq(dq_job_group(j), g);
    ck_assert_int_eq(dq_job_priority(j), p);
}

/* Runs: each element holds for its jobs up to the next run's; "" none. */
static const char *const RUNS = "*8\r\n:1\r\n$5\r\n7acme\r\n:3\r\n$0\r\n\r\n"
                                ":4\r\n$1\r\n5\r\n:5\r\n$3\r\n0bb\r\n";

START_TEST(runs_read_alike) {
    for (int list = 0; list < 2; list++) {
        char buf[1024];
        dq_jobs *jobs = NULL;
        dq__err err;
        int rc = decode(reply_of(buf, sizeof(buf), list, 6, RUNS), list,
                        &jobs, &err);
        ck_assert_msg(rc == 6, "%s: %d %s", list ? "list" : "poll", rc,
                      err.msg);
        fair_is(jobs, 0, "acme", 7);
        fair_is(jobs, 1, "acme", 7);
        fair_is(jobs, 2, NULL, 0);
        fair_is(jobs, 3, NULL, 5);
        fair_is(jobs, 4, "bb", 0);
        fair_is(jobs, 5, "bb", 0);
        if (!list) /* the poll's own fields as before */
            ck_assert_str_eq(dq_job_token(dq_jobs_at(jobs, 5)), "42");
        dq_job *d = dq_job_dup(dq_jobs_at(jobs, 1));
        ck_assert_str_eq(dq_job_group(d), "acme");
        ck_assert_int_eq(dq_job_priority(d), 7);
        dq_job_free(d);
        dq_jobs_free(jobs);
    }
}
END_TEST

/* Jobs before the first run, and every job of a reply without the
 * element, have neither. */
START_TEST(none_before_runs) {
    for (int list = 0; list < 2; list++) {
        char buf[1024];
        dq_jobs *jobs = NULL;
        dq__err err;
        ck_assert_int_eq(decode(reply_of(buf, sizeof(buf), list, 3,
                                         "*2\r\n:3\r\n$2\r\n9g\r\n"),
                                list, &jobs, &err),
                         3);
        fair_is(jobs, 0, NULL, 0);
        fair_is(jobs, 1, NULL, 0);
        fair_is(jobs, 2, "g", 9);
        dq_jobs_free(jobs);
        ck_assert_int_eq(
            decode(reply_of(buf, sizeof(buf), list, 2, NULL), list, &jobs,
                   &err),
            2);
        fair_is(jobs, 0, NULL, 0);
        fair_is(jobs, 1, NULL, 0);
        dq_jobs_free(jobs);
    }
}
END_TEST

/* A group with a NUL: the text up to the NUL, then the rest. */
#define NUL_GROUP "*2\r\n:1\r\n$3\r\n1"
#define NUL_GROUP_END "\0b\r\n"

/* A malformed last element (of 2 jobs): DQ_EPROTO, no jobs. */
START_TEST(bad_runs_refused) {
    static const char *const bad[] = {
        "*0\r\n",                                 /* no run */
        "*1\r\n:1\r\n",                           /* a place alone */
        "*2\r\n:0\r\n$1\r\n1\r\n",                /* place 0 */
        "*2\r\n:3\r\n$1\r\n1\r\n",                /* past the last job */
        "*4\r\n:2\r\n$1\r\n1\r\n:1\r\n$1\r\n2\r\n", /* not increasing */
        "*4\r\n:1\r\n$1\r\n1\r\n:1\r\n$1\r\n2\r\n", /* twice one place */
        "*2\r\n$1\r\nx\r\n$1\r\n1\r\n",           /* a place not a number */
        "*2\r\n:1\r\n:5\r\n",                     /* an integer element */
        "*2\r\n:1\r\n$-1\r\n",                    /* nil */
        "*2\r\n:1\r\n$5\r\nxacme\r\n",            /* no priority digit */
        "*2\r\n:1\r\n$1\r\n/\r\n",                /* below '0' */
        NUL_GROUP, /* a NUL in the group (NUL_GROUP_END after it) */
        "*2\r\n:1\r\n*1\r\n$1\r\n1\r\n",          /* an array element */
        "$3\r\nabc\r\n",                          /* not an array */
        ":7\r\n",                                 /* nor this */
    };
    char buf[1024];
    for (int list = 0; list < 2; list++)
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            dq_jobs *jobs = NULL;
            dq__err err;
            reply_of(buf, sizeof(buf), list, 2, bad[i]);
            size_t len = strlen(buf);
            if (strcmp(bad[i], NUL_GROUP) == 0) { /* "1\0b" in all */
                memcpy(buf + len, NUL_GROUP_END, sizeof(NUL_GROUP_END) - 1);
                len += sizeof(NUL_GROUP_END) - 1;
            }
            ck_assert_msg(decode_len(buf, len, list, &jobs, &err) ==
                              DQ_EPROTO,
                          "%s case %zu", list ? "list" : "poll", i);
            ck_assert_ptr_null(jobs);
            ck_assert_int_eq(err.code, DQ_EPROTO);
        }
    /* a group one byte too long; the element without jobs */
    char tail[128] = "*2\r\n:1\r\n$66\r\n1";
    memset(tail + strlen(tail), 'g', 65);
    strcat(tail, "\r\n");
    dq_jobs *jobs = NULL;
    dq__err err;
    ck_assert_int_eq(decode(reply_of(buf, sizeof(buf), 0, 2, tail), 0, &jobs,
                            &err),
                     DQ_EPROTO);
    ck_assert_int_eq(decode(reply_of(buf, sizeof(buf), 0, 0,
                                     "*2\r\n:1\r\n$1\r\n1\r\n"),
                            0, &jobs, &err),
                     DQ_EPROTO);
    ck_assert_ptr_null(jobs);
}
END_TEST

int main(void) {
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("decode");
    tcase_add_test(tc, runs_read_alike);
    tcase_add_test(tc, none_before_runs);
    tcase_add_test(tc, bad_runs_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
