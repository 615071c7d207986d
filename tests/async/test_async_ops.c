/*
 * tests/async/test_async_ops.c - the libevent client: every operation's
 * callback path, argument errors (no callback), NOSCRIPT reload, frees
 * from inside callbacks, operations before the connection, unreachable
 * servers, reconnects after CLIENT KILL, command and connect timeouts
 * (a SIGSTOPped server), AUTH and SELECT.
 */
#include "test_async.h"


/* Finds the kept job with this id (NULL if none). */
static const dq_job *find_job(const res *r, const char *id) {
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(dq_job_id(kept(r, i)), id) == 0)
            return kept(r, i);
    return NULL;
}

START_TEST(push_poll_ack) {
    states st = {0};
    dq_async *a = aopen_uri(g_srv.uri, NULL, &st);
    ck_assert_int_eq(st.connected, 1);

    res p = {0}, k = {0}, rp = {0}, at = {0};
    ck_assert_int_eq(dq_async_push(a, Q, "hello", 5, 0, NULL, DQ_PUSH_KEEP,
                                   push_rec, &p),
                     0);
    WAIT_CB(p, 0);
    ck_assert_int_eq(p.outcome, DQ_PUSHED);
    ck_assert_uint_eq(strlen(p.id), 14);
    ck_assert_int_eq(dq_async_push(a, Q, "x", 1, 0, p.id, DQ_PUSH_KEEP,
                                   push_rec, &k),
                     0);
    ck_assert_int_eq(dq_async_push(a, Q, "hello2", 6, 0, p.id,
                                   DQ_PUSH_REPLACE, push_rec, &rp),
                     0);
    /* The poll below checks due order, which a partitioned queue keeps
     * within a partition only: "at-job" goes to the partition of p.id. */
    char atid[32];
    tu_id_in(atid, sizeof(atid), "at-job", tu_part_of(p.id, tu_parts()));
    ck_assert_int_eq(dq_async_push_at(a, Q, "at", 2, 1000, atid,
                                      DQ_PUSH_KEEP, push_rec, &at),
                     0);
    ck_assert_uint_eq(dq_async_pending(a), 3);
    WAIT_CB(k, 0);
    WAIT_CB(rp, 0);
    WAIT_CB(at, 0);
    ck_assert_int_eq(k.outcome, DQ_KEPT);
    ck_assert_str_eq(k.id, p.id);
    ck_assert_int_eq(rp.outcome, DQ_REPLACED);
    ck_assert_int_eq(at.outcome, DQ_PUSHED);
    ck_assert_str_eq(at.id, atid);

    res pl = {0};
    ck_assert_int_eq(dq_async_poll(a, Q, 10, 5000, jobs_rec, &pl), 0);
    WAIT_CB(pl, 2);
    ck_assert_uint_eq(pl.n, 2);
    ck_assert_int_eq(pl.v, 0);
    ck_assert_str_eq(dq_job_id(kept(&pl, 0)), atid); /* oldest first */
    const dq_job *j = find_job(&pl, p.id);
    ck_assert_ptr_nonnull(j);
    size_t len = 0;
    ck_assert_str_eq(dq_job_payload(j, &len), "hello2");
    ck_assert_uint_eq(len, 6);
    ck_assert_int_eq(dq_job_attempt(j), 1);
    ck_assert_str_ne(dq_job_token(j), "");
    ck_assert_int_gt(dq_job_lease_deadline_ms(j), wall_ms());

    /* Nothing due: the next event is a lease deadline, ~5 s away. */
    res empty = {0};
    ck_assert_int_eq(dq_async_poll(a, Q, 10, 5000, jobs_rec, &empty), 0);
    WAIT_CB(empty, 0);
    ck_assert_ptr_null(empty.jobs);
    ck_assert_msg(empty.v > 3000 && empty.v <= 5000, "next %" PRId64, empty.v);

    res ak = {0}, ak2 = {0}, stale = {0};
    ck_assert_int_eq(dq_async_ack(a, Q, dq_job_id(j), dq_job_token(j), st_rec,
                                  &ak),
                     0);
    WAIT_CB(ak, 0);
    /* The same ack again lands on its own done record: success. */
    ck_assert_int_eq(dq_async_ack(a, Q, dq_job_id(j), dq_job_token(j), st_rec,
                                  &ak2),
                     0);
    WAIT_CB(ak2, 0);
    ak2 = (res){0};
    ck_assert_int_eq(dq_async_ack(a, Q, "never-pushed", dq_job_token(j),
                                  st_rec, &ak2),
                     0);
    WAIT_CB(ak2, DQ_ENOTFOUND);
    ck_assert_msg(strstr(ak2.msg, "no job") != NULL, "%s", ak2.msg);
    ck_assert_int_eq(dq_async_ack(a, Q, atid, "999999", st_rec, &stale),
                     0);
    WAIT_CB(stale, DQ_ESTALE);
    ck_assert_msg(strstr(stale.msg, "stale") != NULL, "%s", stale.msg);

    res sr = {0};
    ck_assert_int_eq(dq_async_stats(a, Q, stats_rec, &sr), 0);
    WAIT_CB(sr, 0);
    ck_assert_int_eq(sr.s[0], 0);
    ck_assert_int_eq(sr.s[1], 0);
    ck_assert_int_eq(sr.s[2], 1);
    ck_assert_int_eq(sr.s[3], 0);
    ck_assert_uint_eq(dq_async_pending(a), 0);
    res_clear(&pl);
    res_clear(&empty);
    dq_async_free(a);
}
END_TEST

START_TEST(batch_ops) {
    dq_async *a = aopen();
    /* Three script calls of up to 1000 on a plain queue; on a partitioned
     * one, chunks of up to 1000 within each partition. */
    enum { N = 2500 };
    static const void *pls[N];
    static size_t lens[N];
    static int64_t delays[N];
    for (int i = 0; i < N; i++) {
        pls[i] = "batch";
        lens[i] = 5;
        delays[i] = i < 3 ? 0 : 60000;
    }
    res b = {0};
    ck_assert_int_eq(dq_async_push_batch(a, Q, N, pls, lens, delays, NULL,
                                         DQ_PUSH_KEEP, batch_rec, &b),
                     0);
    WAIT_CB(b, N);
    ck_assert_uint_eq(b.n, N);
    ck_assert_int_eq(b.results[0], DQ_PUSHED);
    ck_assert_uint_eq(strlen(b.id), 14);

    res pl = {0};
    ck_assert_int_eq(dq_async_poll(a, Q, 1000, 5000, jobs_rec, &pl), 0);
    WAIT_CB(pl, 3);
    const char *ids[3], *toks[3] = {NULL, NULL, "999999"};
    for (int i = 0; i < 3; i++) {
        ids[i] = dq_job_id(kept(&pl, (size_t)i));
        if (i < 2)
            toks[i] = dq_job_token(kept(&pl, (size_t)i));
    }
    res ab = {0};
    ck_assert_int_eq(dq_async_ack_batch(a, Q, 3, ids, toks, results_rec, &ab),
                     0);
    WAIT_CB(ab, 2);
    ck_assert_uint_eq(ab.n, 3);
    ck_assert_int_eq(ab.results[0], 0);
    ck_assert_int_eq(ab.results[1], 0);
    ck_assert_int_eq(ab.results[2], DQ_ESTALE);

    /* Ids chosen by the caller, some already there. */
    const char *myids[3] = {"b-1", "b-2", "b-1"};
    res b2 = {0};
    ck_assert_int_eq(dq_async_push_batch(a, Q, 3, pls, lens, NULL, myids,
                                         DQ_PUSH_KEEP, batch_rec, &b2),
                     0);
    WAIT_CB(b2, 2);
    ck_assert_str_eq(b2.id, "b-1");
    ck_assert_int_eq(b2.results[0], DQ_PUSHED);
    ck_assert_int_eq(b2.results[2], DQ_KEPT);
    res_clear(&pl);
    dq_async_free(a);
}
END_TEST

START_TEST(nack_extend_cancel) {
    dq_async *a = aopen();
    res p = {0}, pl = {0}, nk = {0};
    dq_async_push(a, Q, "n", 1, 0, "n1", 0, push_rec, &p);
    WAIT_CB(p, 0);
    dq_async_poll(a, Q, 1, 5000, jobs_rec, &pl);
    WAIT_CB(pl, 1);
    char tok1[DQ_TOKEN_BUF];
    snprintf(tok1, sizeof(tok1), "%s", dq_job_token(kept(&pl, 0)));
    ck_assert_int_eq(dq_async_nack(a, Q, "n1", tok1, 0, 0, st_rec, &nk), 0);
    WAIT_CB(nk, 0);
    res pl2 = {0};
    dq_async_poll(a, Q, 1, 5000, jobs_rec, &pl2);
    WAIT_CB(pl2, 1);
    ck_assert_int_eq(dq_job_attempt(kept(&pl2, 0)), 2);
    const char *tok2 = dq_job_token(kept(&pl2, 0));

    res ex = {0}, ex_stale = {0};
    int64_t before = wall_ms();
    ck_assert_int_eq(dq_async_extend(a, Q, "n1", tok2, 20000, extend_rec, &ex),
                     0);
    WAIT_CB(ex, 0);
    ck_assert_msg(ex.v >= before + 19000 && ex.v <= wall_ms() + 21000,
                  "deadline %" PRId64, ex.v);
    ck_assert_int_eq(
        dq_async_extend(a, Q, "n1", tok1, 20000, extend_rec, &ex_stale), 0);
    WAIT_CB(ex_stale, DQ_ESTALE);
    ck_assert_int_eq(ex_stale.v, 0);

    res dead = {0};
    ck_assert_int_eq(
        dq_async_nack(a, Q, "n1", tok2, 0, DQ_NACK_DEAD, st_rec, &dead), 0);
    WAIT_CB(dead, 1);

    res c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, q1 = {0}, q2 = {0}, pl3 = {0};
    dq_async_push(a, Q, "c", 1, 10000, "c1", 0, push_rec, &q1);
    dq_async_push(a, Q, "c", 1, 0, "c2", 0, push_rec, &q2);
    WAIT_CB(q2, 0);
    dq_async_poll(a, Q, 1, 5000, jobs_rec, &pl3);
    WAIT_CB(pl3, 1);
    ck_assert_int_eq(dq_async_cancel(a, Q, "c1", 0, st_rec, &c1), 0);
    ck_assert_int_eq(dq_async_cancel(a, Q, "c2", 0, st_rec, &c2), 0);
    WAIT_CB(c1, DQ_CANCELED_PENDING);
    WAIT_CB(c2, DQ_CANCEL_BUSY);
    ck_assert_int_eq(
        dq_async_cancel(a, Q, "c2", DQ_CANCEL_INFLIGHT, st_rec, &c3), 0);
    WAIT_CB(c3, DQ_CANCELED_INFLIGHT);
    ck_assert_int_eq(dq_async_cancel(a, Q, "nope", 0, st_rec, &c4), 0);
    WAIT_CB(c4, 0);
    res_clear(&pl);
    res_clear(&pl2);
    res_clear(&pl3);
    dq_async_free(a);
}
END_TEST

START_TEST(dead_ops) {
    dq_async *a = aopen();
    const char *ids[3] = {"d1", "d2", "d3"};
    res p[3] = {{0}}, pl = {0};
    for (int i = 0; i < 3; i++)
        dq_async_push(a, Q, "dead", 4, 0, ids[i], 0, push_rec, &p[i]);
    WAIT_CB(p[2], 0);
    dq_async_poll(a, Q, 3, 5000, jobs_rec, &pl);
    WAIT_CB(pl, 3);
    res nk[3] = {{0}};
    for (int i = 0; i < 3; i++)
        dq_async_nack(a, Q, dq_job_id(kept(&pl, (size_t)i)),
                      dq_job_token(kept(&pl, (size_t)i)), 0, DQ_NACK_DEAD,
                      st_rec, &nk[i]);
    for (int i = 0; i < 3; i++)
        WAIT_CB(nk[i], 1);

    res dl = {0};
    ck_assert_int_eq(dq_async_dead_list(a, Q, 0, 10, jobs_rec, &dl), 0);
    WAIT_CB(dl, 3);
    ck_assert_int_eq(dq_job_attempt(kept(&dl, 0)), 1);
    ck_assert_str_eq(dq_job_payload(kept(&dl, 0), NULL), "dead");
    ck_assert_int_gt(dq_job_due_ms(kept(&dl, 0)), wall_ms() - 60000);

    res rq = {0}, pg = {0}, dl2 = {0}, rq2 = {0};
    ck_assert_int_eq(dq_async_dead_requeue(a, Q, "d1", 0, st_rec, &rq), 0);
    WAIT_CB(rq, 1);
    ck_assert_int_eq(dq_async_dead_purge(a, Q, NULL, st_rec, &pg), 0);
    WAIT_CB(pg, 2);
    ck_assert_int_eq(dq_async_dead_list(a, Q, 0, 10, jobs_rec, &dl2), 0);
    WAIT_CB(dl2, 0);
    ck_assert_ptr_null(dl2.jobs);
    ck_assert_int_eq(dq_async_dead_requeue(a, Q, NULL, 0, st_rec, &rq2), 0);
    WAIT_CB(rq2, 0);

    /* The listing twin: d1 is scheduled (due), nothing dead. */
    res ls = {0}, ld = {0}, lbad = {0};
    int64_t before = wall_ms();
    ck_assert_int_eq(
        dq_async_list(a, Q, DQ_LIST_SCHEDULED, 0, 10, jobs_rec, &ls), 0);
    WAIT_CB(ls, 1);
    ck_assert_str_eq(dq_job_id(kept(&ls, 0)), "d1");
    ck_assert_str_eq(dq_job_token(kept(&ls, 0)), "");
    ck_assert_msg(ls.v >= before - 1000 && ls.v <= wall_ms() + 1000,
                  "server now %" PRId64, ls.v);
    ck_assert_int_eq(dq_async_list(a, Q, DQ_LIST_DEAD, 0, 10, jobs_rec, &ld),
                     0);
    WAIT_CB(ld, 0);
    ck_assert_int_eq(dq_async_list(a, Q, 9, 0, 10, jobs_rec, &lbad),
                     DQ_EINVAL);
    res_clear(&ls);

    res sr = {0};
    dq_async_stats(a, Q, stats_rec, &sr);
    WAIT_CB(sr, 0);
    ck_assert_int_eq(sr.s[1], 1); /* d1 is due again */
    ck_assert_int_eq(sr.s[3], 0);
    res_clear(&pl);
    res_clear(&dl);
    dq_async_free(a);
}
END_TEST

/* The listing twins carry each job's group and priority (as dq_list and
 * dq_dead_list do, tests/test_listing.c), kept by dq_job_dup (kept()). */
START_TEST(list_group_priority) {
    dq_async *a = aopen();
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, "acme"), 0);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, 7), 0);
    res p1 = {0}, p2 = {0}, ls = {0}, pl = {0}, nk = {0}, dl = {0}, ld = {0};
    dq_async_push_ex(a, Q, "g", 1, 0, "grouped", 0, o, push_rec, &p1);
    dq_async_push(a, Q, "p", 1, 0, "plain", 0, push_rec, &p2);
    dq_push_opts_free(o);
    WAIT_CB(p1, 0);
    WAIT_CB(p2, 0);
    ck_assert_int_eq(
        dq_async_list(a, Q, DQ_LIST_SCHEDULED, 0, 10, jobs_rec, &ls), 0);
    WAIT_CB(ls, 2);
    ck_assert_uint_eq(ls.n, 2);
    for (size_t i = 0; i < 2; i++) {
        const dq_job *j = kept(&ls, i);
        int g = strcmp(dq_job_id(j), "grouped") == 0;
        if (g)
            ck_assert_str_eq(dq_job_group(j), "acme");
        else
            ck_assert_ptr_null(dq_job_group(j));
        ck_assert_int_eq(dq_job_priority(j), g ? 7 : 0);
    }
    /* the grouped job to the dead set, then both dead-list twins */
    dq_async_cancel(a, Q, "plain", 0, st_rec, &nk);
    WAIT_CB(nk, DQ_CANCELED_PENDING);
    ck_assert_int_eq(dq_async_poll(a, Q, 1, 5000, jobs_rec, &pl), 0);
    WAIT_CB(pl, 1);
    ck_assert_uint_eq(pl.n, 1);
    nk = (res){0};
    dq_async_nack(a, Q, "grouped", dq_job_token(kept(&pl, 0)), 0,
                  DQ_NACK_DEAD, st_rec, &nk);
    WAIT_CB(nk, 1);
    dq_async_dead_list(a, Q, 0, 10, jobs_rec, &dl);
    dq_async_list(a, Q, DQ_LIST_DEAD, 0, 10, jobs_rec, &ld);
    WAIT_CB(dl, 1);
    WAIT_CB(ld, 1);
    ck_assert_uint_eq(dl.n, 1);
    ck_assert_uint_eq(ld.n, 1);
    ck_assert_str_eq(dq_job_group(kept(&dl, 0)), "acme");
    ck_assert_int_eq(dq_job_priority(kept(&dl, 0)), 7);
    ck_assert_str_eq(dq_job_group(kept(&ld, 0)), "acme");
    ck_assert_int_eq(dq_job_priority(kept(&ld, 0)), 7);
    res_clear(&ls);
    res_clear(&pl);
    res_clear(&dl);
    res_clear(&ld);
    dq_async_free(a);
}
END_TEST

/* Async polls of q (leases of lease_ms) until want jobs came, copied into
 * got (a partitioned queue hands them out partition by
 * partition). */
static void apoll_all(dq_async *a, const char *q, int64_t lease_ms,
                      size_t want, dq_job **got) {
    size_t n = 0;
    for (int64_t end = wall_ms() + 10000; n < want;) {
        ck_assert_msg(wall_ms() < end, "polled %zu of %zu", n, want);
        res pl = {0};
        int rc = res_wait(dq_async_poll(a, q, 10, lease_ms, jobs_rec, &pl),
                          &pl);
        ck_assert_msg(rc >= 0, "poll: %d %s", rc, pl.msg);
        ck_assert_uint_le(n + pl.n, want);
        for (size_t i = 0; i < pl.n; i++)
            got[n++] = dq_job_dup(kept(&pl, i));
        res_clear(&pl);
    }
}

/* A polled job is "g7" (group acme, priority 7), "p5" (priority 5, no
 * group) or "plain" (neither), as pushed. */
static void apolled_is(const dq_job *j) {
    const char *id = dq_job_id(j), *g = dq_job_group(j);
    int p = dq_job_priority(j);
    if (strcmp(id, "g7") == 0)
        ck_assert_msg(g != NULL && strcmp(g, "acme") == 0 && p == 7,
                      "g7: group %s, priority %d", g ? g : "(none)", p);
    else
        ck_assert_msg(g == NULL && p == (strcmp(id, "p5") == 0 ? 5 : 0),
                      "%s: group %s, priority %d", id, g ? g : "(none)", p);
}

/* dq_async_poll hands out each job with its group and priority (as
 * dq_poll, tests/test_listing.c), a plain one with neither, and again
 * when its lease ran out and a poll claims it anew. */
START_TEST(poll_group_priority) {
    dq_async *a = aopen();
    dq_push_opts *o = dq_push_opts_new(), *o5 = dq_push_opts_new();
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_GROUP, "acme"), 0);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_PRIORITY, 7), 0);
    ck_assert_int_eq(dq_push_opts_set(o5, DQ_PUSHOPT_PRIORITY, 5), 0);
    res p1 = {0}, p2 = {0}, p3 = {0};
    dq_async_push(a, Q, "p", 1, 0, "plain", 0, push_rec, &p1);
    dq_async_push_ex(a, Q, "g", 1, 0, "g7", 0, o, push_rec, &p2);
    dq_async_push_ex(a, Q, "5", 1, 0, "p5", 0, o5, push_rec, &p3);
    dq_push_opts_free(o);
    dq_push_opts_free(o5);
    WAIT_CB(p1, 0);
    WAIT_CB(p2, 0);
    WAIT_CB(p3, 0);
    dq_job *got[3], *again[3];
    apoll_all(a, Q, 100, 3, got);
    run_for(150); /* every lease runs out */
    apoll_all(a, Q, 5000, 3, again);
    for (size_t i = 0; i < 3; i++) {
        apolled_is(got[i]);
        apolled_is(again[i]);
        ck_assert_int_eq(dq_job_attempt(again[i]), 2);
        dq_job_free(got[i]);
        dq_job_free(again[i]);
    }
    dq_async_free(a);
}
END_TEST

/* Every argument error: returned at once, no callback, nothing queued. */
START_TEST(bad_args_no_callback) {
    dq_options *o = dq_options_new();
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_MAX_PAYLOAD, 10), 0);
    dq_async *a = aopen_uri(g_srv.uri, o, NULL);
    dq_options_free(o);
    res r = {0};
    const char *one[1] = {"id"}, *tok[1] = {"1"}, *badtok[1] = {"abc"};
    ck_assert_int_eq(dq_async_push(NULL, Q, "x", 1, 0, NULL, 0, push_rec, &r),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_push(a, "", "x", 1, 0, NULL, 0, push_rec, &r),
                     DQ_EQUEUE);
    ck_assert_msg(strstr(dq_async_errmsg(a), "queue") != NULL, "%s",
                  dq_async_errmsg(a));
    ck_assert_int_eq(dq_async_push(a, Q, NULL, 3, 0, NULL, 0, push_rec, &r),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_push(a, Q, "x", 1, -1, NULL, 0, push_rec, &r),
                     DQ_EDELAY);
    ck_assert_int_eq(dq_async_push(a, Q, "x", 1, 0, NULL, 7, push_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_push(a, Q, "x", 1, 0, "", 0, push_rec, &r),
                     DQ_EID);
    ck_assert_int_eq(
        dq_async_push(a, Q, "0123456789ab", 12, 0, NULL, 0, push_rec, &r),
        DQ_ETOOBIG);
    ck_assert_int_eq(dq_async_push_at(a, Q, "x", 1, -5, NULL, 0, push_rec, &r),
                     DQ_EDELAY);
    ck_assert_int_eq(dq_async_push_batch(a, Q, 0, NULL, NULL, NULL, NULL, 0,
                                         batch_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_poll(a, Q, 0, 1000, jobs_rec, &r), DQ_EINVAL);
    ck_assert_int_eq(dq_async_poll(a, Q, 1, -1, jobs_rec, &r), DQ_ELEASE);
    ck_assert_int_eq(dq_async_ack(a, Q, "id", "abc", st_rec, &r), DQ_EINVAL);
    ck_assert_int_eq(dq_async_ack(a, Q, NULL, "1", st_rec, &r), DQ_ENULL);
    ck_assert_int_eq(dq_async_ack_batch(a, Q, 1, one, badtok, results_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_ack_batch(a, Q, 1, NULL, tok, results_rec, &r),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_nack(a, Q, "id", "1", -1, 0, st_rec, &r),
                     DQ_EDELAY);
    ck_assert_int_eq(dq_async_nack(a, Q, "id", "1", 0, 4, st_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_extend(a, Q, "id", "1", 0, extend_rec, &r),
                     DQ_ELEASE);
    ck_assert_int_eq(dq_async_cancel(a, Q, "id", 9, st_rec, &r), DQ_EINVAL);
    ck_assert_int_eq(dq_async_dead_list(a, Q, -1, 10, jobs_rec, &r),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_async_dead_list(a, Q, 0, 0, jobs_rec, &r), DQ_EINVAL);
    ck_assert_int_eq(dq_async_dead_requeue(a, Q, "", 0, st_rec, &r), DQ_EID);
    ck_assert_int_eq(dq_async_dead_purge(a, NULL, NULL, st_rec, &r),
                     DQ_ENULL);
    ck_assert_int_eq(dq_async_stats(a, NULL, stats_rec, &r), DQ_ENULL);
    ck_assert_uint_eq(dq_async_pending(a), 0);
    run_for(100);
    ck_assert_int_eq(r.calls, 0);
    dq_async_free(a);
}
END_TEST

/* SCRIPT FLUSH: every call (and every chunk of a batch) reloads by EVAL. */
START_TEST(noscript_reload) {
    dq_async *a = aopen();
    redisContext *r = rconn();
    freeReplyObject(th_cmd(r, "SCRIPT FLUSH"));
    res p = {0};
    dq_async_push(a, Q, "x", 1, 0, NULL, 0, push_rec, &p);
    WAIT_CB(p, 0);
    freeReplyObject(th_cmd(r, "SCRIPT FLUSH"));
    enum { N = 2100 };
    static const void *pls[N];
    static size_t lens[N];
    for (int i = 0; i < N; i++)
        pls[i] = "y", lens[i] = 1;
    res b = {0};
    dq_async_push_batch(a, Q, N, pls, lens, NULL, NULL, 0, batch_rec, &b);
    WAIT_CB(b, N);
    freeReplyObject(th_cmd(r, "SCRIPT FLUSH"));
    res pl = {0}, sr = {0}, sr2 = {0};
    /* Both issued at once: both meet NOSCRIPT and reload by EVAL. */
    dq_async_poll(a, Q, 1000, 5000, jobs_rec, &pl);
    dq_async_stats(a, Q, stats_rec, &sr);
    WAIT_CB(pl, 1000);
    WAIT_CB(sr, 0);
    if (tu_parts() == 1) {
        ck_assert_int_eq(sr.s[1], N + 1 - 1000); /* ran after the poll */
    } else {
        /* A partitioned poll is one call per partition it visits, and the
         * stats may run between them: only the total is fixed. */
        ck_assert_msg(sr.s[1] >= N + 1 - 1000 && sr.s[1] <= N + 1,
                      "due %" PRId64, sr.s[1]);
        ck_assert_int_eq(sr.s[1] + sr.s[2], N + 1);
    }
    /* Issued once the poll's callback came, so it counts what the poll
     * claimed on any queue. */
    dq_async_stats(a, Q, stats_rec, &sr2);
    WAIT_CB(sr2, 0);
    ck_assert_int_eq(sr2.s[1], N + 1 - 1000);
    ck_assert_int_eq(sr2.s[2], 1000);
    res_clear(&pl);
    redisFree(r);
    dq_async_free(a);
}
END_TEST

/* ---- frees inside callbacks ---- */

typedef struct freer {
    int calls;      /* callbacks */
    int rc_inside;  /* what a call inside a canceled callback returned */
    int status;     /* status of the last call */
} freer;

static void free_in_push(dq_async *a, const char *id, int outcome, int status,
                         void *ud) {
    (void)id;
    (void)outcome;
    freer *f = ud;
    f->calls++;
    f->status = status;
    dq_async_free(a);
    dq_async_free(a); /* a second free inside is a no-op */
}

static void canceled_push(dq_async *a, const char *id, int outcome,
                          int status, void *ud) {
    (void)id;
    (void)outcome;
    freer *f = ud;
    f->calls++;
    f->status = status;
    f->rc_inside = dq_async_push(a, "other", "z", 1, 0, NULL, 0, NULL, NULL);
}

START_TEST(free_inside_callback) {
    dq_async *a = aopen();
    freer first = {0}, rest[5] = {{0}};
    ck_assert_int_eq(dq_async_push(a, Q, "a", 1, 0, NULL, 0, free_in_push,
                                   &first),
                     0);
    for (int i = 0; i < 5; i++)
        dq_async_push(a, Q, "b", 1, 0, NULL, 0, canceled_push, &rest[i]);
    ck_assert(RUN_UNTIL(first.calls == 1, 5000));
    ck_assert_int_eq(first.status, 0);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(rest[i].calls, 1);
        ck_assert_int_eq(rest[i].status, DQ_ECANCELED);
        ck_assert_int_eq(rest[i].rc_inside, DQ_ECLOSED);
    }
    run_for(50); /* nothing of the freed client may run now */
    ck_assert_int_eq(first.calls, 1);
}
END_TEST

static void free_in_state(dq_async *a, int state, int status,
                          const char *reason, void *ud) {
    (void)status;
    (void)reason;
    int *n = ud;
    (*n)++;
    if (state == DQ_DISCONNECTED)
        dq_async_free(a);
}

/* Free at depth 0 with work pending; free inside the state callback. */
START_TEST(free_with_pending) {
    dq_async *a = aopen();
    freer f[3] = {{0}};
    for (int i = 0; i < 3; i++)
        dq_async_push(a, Q, "p", 1, 0, NULL, 0, canceled_push, &f[i]);
    dq_async_free(a);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(f[i].calls, 1);
        ck_assert_int_eq(f[i].status, DQ_ECANCELED);
    }

    /* Unreachable server: the first failed attempt frees the client. */
    int n = 0;
    dq_async *b = NULL;
    ck_assert_int_eq(
        dq_async_open(g_base, "unix:///nonexistent/dq-test.sock", NULL, &b),
        0);
    dq_async_set_state_cb(b, free_in_state, &n);
    freer g = {0};
    dq_async_push(b, Q, "p", 1, 0, NULL, 0, canceled_push, &g);
    ck_assert(RUN_UNTIL(n == 1, 3000));
    ck_assert_int_eq(g.calls, 1);
    ck_assert_int_eq(g.status, DQ_ECANCELED);
    run_for(200);
    ck_assert_int_eq(n, 1);

    /* Freed before the loop ever ran. */
    dq_async *c = NULL;
    ck_assert_int_eq(dq_async_open(g_base, g_srv.uri, NULL, &c), 0);
    dq_async_free(c);
    dq_async_free(NULL);
    run_for(50);
}
END_TEST

START_TEST(ops_before_connect) {
    dq_async *a = NULL;
    ck_assert_int_eq(dq_async_open(g_base, g_srv.uri, NULL, &a), 0);
    ck_assert_int_eq(dq_async_connected(a), 0);
    res p = {0}, s = {0};
    ck_assert_int_eq(dq_async_push(a, Q, "early", 5, 0, NULL, 0, push_rec, &p),
                     0);
    ck_assert_int_eq(dq_async_stats(a, Q, stats_rec, &s), 0);
    ck_assert_int_eq(p.calls, 0); /* never from inside the call */
    WAIT_CB(p, 0);
    WAIT_CB(s, 0);
    if (tu_parts() == 1) {
        ck_assert_int_eq(s.s[1], 1); /* sent in the order they were made */
    } else {
        /* On a partitioned queue each op first checks the partition count
         * (a call of its own) and the stats then asks every partition: the
         * two are not applied in issue order, so the stats may or may not
         * see the push... */
        ck_assert_msg(s.s[1] == 0 || s.s[1] == 1, "due %" PRId64, s.s[1]);
        /* ...while one issued after the push's callback must. */
        res s2 = {0};
        ck_assert_int_eq(dq_async_stats(a, Q, stats_rec, &s2), 0);
        WAIT_CB(s2, 0);
        ck_assert_int_eq(s2.s[1], 1);
    }
    dq_async_free(a);
}
END_TEST

START_TEST(open_errors) {
    dq_async *a = NULL;
    ck_assert_int_eq(dq_async_open(g_base, "http://x", NULL, &a), DQ_EURI);
    ck_assert_ptr_nonnull(a);
    ck_assert_str_ne(dq_async_errmsg(a), "");
    res r = {0};
    ck_assert_int_eq(dq_async_push(a, Q, "x", 1, 0, NULL, 0, push_rec, &r),
                     DQ_EURI);
    dq_async_free(a);
    ck_assert_int_eq(dq_async_open(NULL, g_srv.uri, NULL, &a), DQ_ENULL);
    dq_async_free(a);
    ck_assert_int_eq(dq_async_open(g_base, g_srv.uri, NULL, NULL), DQ_ENULL);
    ck_assert_int_eq(dq_async_set_state_cb(NULL, NULL, NULL), DQ_ENULL);
    ck_assert_int_eq(dq_async_connected(NULL), 0);
    ck_assert_uint_eq(dq_async_pending(NULL), 0);
    ck_assert_str_ne(dq_async_errmsg(NULL), "");
}
END_TEST

START_TEST(unreachable_server) {
    states st = {0};
    dq_async *a = NULL;
    ck_assert_int_eq(
        dq_async_open(g_base, "unix:///nonexistent/dq-test.sock", NULL, &a),
        0);
    dq_async_set_state_cb(a, state_rec, &st);
    res p = {0};
    ck_assert_int_eq(dq_async_push(a, Q, "x", 1, 0, NULL, 0, push_rec, &p), 0);
    WAIT_CB(p, DQ_EIO);
    ck_assert_msg(strstr(p.msg, "nonexistent") != NULL, "%s", p.msg);
    ck_assert_int_ge(st.disconnected, 1);
    ck_assert_int_eq(st.connected, 0);
    ck_assert_int_eq(st.last_status, DQ_EIO);
    /* It keeps trying with a backoff: a few attempts in 400 ms, not 100s. */
    int before = st.disconnected;
    run_for(400);
    ck_assert_msg(st.disconnected - before >= 1 && st.disconnected - before <= 5,
                  "%d attempts", st.disconnected - before);
    dq_async_free(a);
}
END_TEST

START_TEST(client_kill_reconnect) {
    states st = {0};
    dq_async *a = aopen_uri(g_srv.uri, NULL, &st);
    redisContext *r = rconn();
    freeReplyObject(th_cmd(r, "CLIENT KILL TYPE normal SKIPME yes"));
    ck_assert_msg(RUN_UNTIL(st.disconnected >= 1 && st.connected >= 2, 3000),
                  "disconnected %d connected %d", st.disconnected,
                  st.connected);
    res p = {0};
    dq_async_push(a, Q, "again", 5, 0, NULL, 0, push_rec, &p);
    WAIT_CB(p, 0);

    /* Killed with a command outstanding: it fails with DQ_EIO (or ran in
     * time), nothing hangs, and the client comes back. */
    res q = {0};
    dq_async_push(a, Q, "racing", 6, 0, NULL, 0, push_rec, &q);
    freeReplyObject(th_cmd(r, "CLIENT KILL TYPE normal SKIPME yes"));
    ck_assert(RUN_UNTIL(q.calls == 1, 5000));
    ck_assert_msg(q.status == 0 || q.status == DQ_EIO, "%d %s", q.status,
                  q.msg);
    ck_assert(RUN_UNTIL(dq_async_connected(a), 3000));
    redisFree(r);
    dq_async_free(a);
}
END_TEST

/* A frozen server: replies time out, the connection is dropped, attempts
 * time out too, and everything resumes once it runs again. */
START_TEST(command_timeout) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, NULL), 0);
    dq_options *o = dq_options_new();
    dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, 300);
    dq_options_set_int(o, DQ_OPT_CONNECT_TIMEOUT_MS, 300);
    states st = {0};
    char uri[600];
    dq_async *a = aopen_uri(tu_uri(srv.uri, NULL, uri, sizeof(uri)), o, &st);
    dq_options_free(o);
    ck_assert_int_eq(kill(srv.pid, SIGSTOP), 0);
    res p = {0};
    int64_t t0 = th_mono_ms();
    dq_async_push(a, Q, "x", 1, 0, NULL, 0, push_rec, &p);
    WAIT_CB(p, DQ_ETIMEDOUT);
    int64_t took = th_mono_ms() - t0;
    ck_assert_msg(took >= 250 && took < 2000, "timed out after %" PRId64,
                  took);
    ck_assert_int_ge(st.disconnected, 1);
    ck_assert_msg(strstr(p.msg, "300 ms") != NULL, "%s", p.msg);
    /* Attempts while frozen: connected socket, but no PING answer. */
    res q = {0};
    dq_async_push(a, Q, "y", 1, 0, NULL, 0, push_rec, &q);
    WAIT_CB(q, DQ_ETIMEDOUT);
    ck_assert_int_eq(dq_async_connected(a), 0);
    ck_assert_int_eq(kill(srv.pid, SIGCONT), 0);
    ck_assert(RUN_UNTIL(dq_async_connected(a), 5000));
    res z = {0};
    dq_async_push(a, Q, "z", 1, 0, NULL, 0, push_rec, &z);
    WAIT_CB(z, 0);
    dq_async_free(a);
    th_redis_stop(&srv);
}
END_TEST

START_TEST(auth_and_select) {
    th_redis srv;
    ck_assert_int_eq(th_redis_start(&srv, 0, "requirepass s3cret"), 0);
    char uri[600];
    tu_uri(srv.uri, "password=wrong", uri, sizeof(uri));
    states st = {0};
    dq_async *bad = NULL;
    ck_assert_int_eq(dq_async_open(g_base, uri, NULL, &bad), 0);
    dq_async_set_state_cb(bad, state_rec, &st);
    res p = {0};
    dq_async_push(bad, Q, "x", 1, 0, NULL, 0, push_rec, &p);
    WAIT_CB(p, DQ_EAUTH);
    ck_assert_int_eq(st.last_status, DQ_EAUTH);
    ck_assert_msg(strstr(st.reason, "AUTH") != NULL, "%s", st.reason);
    dq_async_free(bad);

    tu_uri(srv.uri, "db=3&password=s3cret", uri, sizeof(uri));
    dq_async *a = aopen_uri(uri, NULL, NULL);
    res q = {0};
    dq_async_push(a, Q, "x", 1, 0, "in-db-3", 0, push_rec, &q);
    WAIT_CB(q, 0);
    redisContext *r = th_redis_connect(&srv);
    ck_assert_ptr_nonnull(r);
    freeReplyObject(th_cmd(r, "AUTH s3cret"));
    freeReplyObject(th_cmd(r, "SELECT 3"));
    ck_assert_int_eq(tu_job_stored(r, "dq", Q, "in-db-3"), 1);
    redisFree(r);
    dq_async_free(a);
    th_redis_stop(&srv);
}
END_TEST

#ifdef DQ_TEST_TLS
/* hiredis >= 1.0 only: the TLS handshake runs inside the async connect. */
START_TEST(tls_round_trip) {
    char dir[64] = "/tmp/dq-async-tlsXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    tu_make_ca(dir, "ca", "ca");
    tu_make_cert(dir, "server", "ca", "localhost",
                 "IP:127.0.0.1,DNS:localhost");
    th_redis srv;
    int port = 0, started = -1;
    for (int i = 0; i < 5 && started != 0; i++) {
        char conf[1200];
        port = tu_free_port();
        snprintf(conf, sizeof(conf),
                 "tls-port %d\ntls-cert-file %s/server.crt\n"
                 "tls-key-file %s/server.key\ntls-ca-cert-file %s/ca.crt\n"
                 "tls-auth-clients no\n",
                 port, dir, dir, dir);
        started = th_redis_start(&srv, 0, conf);
    }
    ck_assert_int_eq(started, 0);
    char base[100], uri[200], ca[128];
    snprintf(base, sizeof(base), "rediss://127.0.0.1:%d", port);
    tu_uri(base, NULL, uri, sizeof(uri));
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    dq_options *o = dq_options_new();
    dq_options_set_str(o, DQ_OPT_TLS_CA_FILE, ca);
    dq_async *a = aopen_uri(uri, o, NULL);
    dq_options_free(o);
    res p = {0}, pl = {0}, ak = {0};
    dq_async_push(a, Q, "secret", 6, 0, "t1", 0, push_rec, &p);
    WAIT_CB(p, 0);
    dq_async_poll(a, Q, 1, 5000, jobs_rec, &pl);
    WAIT_CB(pl, 1);
    ck_assert_str_eq(dq_job_payload(kept(&pl, 0), NULL), "secret");
    dq_async_ack(a, Q, "t1", dq_job_token(kept(&pl, 0)), st_rec, &ak);
    WAIT_CB(ak, 0);
    res_clear(&pl);
    dq_async_free(a);
    th_redis_stop(&srv);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST
#else
/* Without TLS support rediss:// is refused at once. */
START_TEST(tls_round_trip) {
    dq_async *a = NULL;
    ck_assert_int_eq(dq_async_open(g_base, "rediss://127.0.0.1:1", NULL, &a),
                     DQ_ENOTSUP);
    dq_async_free(a);
}
END_TEST
#endif

TEST_SUITE("async_ops", TU_SRV_UNIX,
    {"push_poll_ack", push_poll_ack, 60, &async_fixture},
    {"batch", batch_ops, 60, &async_fixture},
    {"nack_extend_cancel", nack_extend_cancel, 60, &async_fixture},
    {"dead", dead_ops, 60, &async_fixture},
    {"list_group_priority", list_group_priority, 60, &async_fixture},
    {"poll_group_priority", poll_group_priority, 60, &async_fixture},
    {"bad_args", bad_args_no_callback, 60, &async_fixture},
    {"noscript", noscript_reload, 60, &async_fixture},
    {"free_inside_callback", free_inside_callback, 60, &async_fixture},
    {"free_with_pending", free_with_pending, 60, &async_fixture},
    {"ops_before_connect", ops_before_connect, 60, &async_fixture},
    {"open_errors", open_errors, 60, &async_fixture},
    {"unreachable", unreachable_server, 60, &async_fixture},
    {"client_kill", client_kill_reconnect, 60, &async_fixture},
    {"command_timeout", command_timeout, 60, &async_fixture},
    {"auth_select", auth_and_select, 60, &async_fixture},
    {"tls", tls_round_trip, 60, &async_fixture})
