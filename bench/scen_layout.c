/*
 * bench/scen_layout.c - the default, compact and compact-push layouts
 * side by side (DQ_SET_LAYOUT; lib/lua/include/compact/keys.lua):
 * for each payload size (16, 36, 256 B) and each layout, on a fresh server
 * (the one dqbench started, FLUSHALL between):
 *
 *   A. lay_n pending jobs, delays 1 h + U(0..24 h), generated ids,
 *      dq_push_batch of 1000, one client: the push rate, INFO used_memory
 *      per job beyond the payload (against the empty queue, its layout
 *      already set), and (first run) where the bytes go: every key's
 *      MEMORY USAGE, HLEN and OBJECT ENCODING, by kind (native due/jobs,
 *      compact buckets, id shards, the rest).  Then lay_cancel_n
 *      dq_cancel round trips of jobs picked at random among those pushed
 *      (every (lay_n / lay_cancel_n)-th in push order, whose due times
 *      are random; cancelled in a shuffled order).  In compact, whose
 *      pushes move nothing, idle dq_polls first move the pushed jobs into
 *      buckets until the native due set stops shrinking (the catch-up:
 *      moved jobs/s, server time per moved job, polls); memory and
 *      cancels are measured after it.
 *   B. The drain, on a fresh server again: lay_drain_n jobs pushed exactly
 *      as in A (same batches, same delays, same seed) but with absolute
 *      times 26 h in the past (DQ_PUSH_AT: due from 25 h to 1 h ago), so
 *      the mover builds the same buckets from the same sequence of pushes
 *      as in A, every job already due; then one client drains them with
 *      dq_poll (max 1000) + dq_ack_batch until the queue is empty.  In
 *      compact those due jobs are never moved (a poll that finds jobs due
 *      moves nothing): its drain is the native one, and compact-push's is
 *      the drain of jobs held in buckets.
 *
 * Each run measures A for every layout of one payload size, then B for
 * every layout back to back, three times in a rotated order, before the
 * next size.  The table shows medians over runs (A) or over all drains
 * (B) of the values and of the ratios of figures measured together: A's
 * minutes apart, the drains' seconds apart.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DQB_LAY_NP 3
#define DQB_LAY_B 1000 /* jobs per dq_push_batch, per poll */
static const size_t dqb_lay_sizes[DQB_LAY_NP] = {16, 36, 256};
#define DQB_LAY_NL 3 /* default, compact (moved by idle polls), compact-push */
static const char *const dqb_lay_name[DQB_LAY_NL] = {"default", "compact",
                                                     "compact-push"};

/* Per layout (0 default, 1 compact) and payload size: one value per run. */
static dqb_series dqb_l_mem[DQB_LAY_NL][DQB_LAY_NP];    /* B/job beyond payload */
static dqb_series dqb_l_push[DQB_LAY_NL][DQB_LAY_NP];   /* jobs/s (A) */
static dqb_series dqb_l_push_srv[DQB_LAY_NL][DQB_LAY_NP];
static dqb_series dqb_l_pushd[DQB_LAY_NL][DQB_LAY_NP];  /* jobs/s (B: due jobs) */
static dqb_series dqb_l_drain[DQB_LAY_NL][DQB_LAY_NP];  /* jobs/s */
static dqb_series dqb_l_drain_srv[DQB_LAY_NL][DQB_LAY_NP];
static dqb_series dqb_l_cancel[DQB_LAY_NL][DQB_LAY_NP]; /* us per round trip */
static dqb_series dqb_l_cancel_srv[DQB_LAY_NL][DQB_LAY_NP];
static dqb_series dqb_l_native[DQB_LAY_NL][DQB_LAY_NP]; /* share still native */
/* commands the scripts ran (redis.call) per job or per cancel */
static dqb_series dqb_l_push_calls[DQB_LAY_NL][DQB_LAY_NP];
static dqb_series dqb_l_drain_calls[DQB_LAY_NL][DQB_LAY_NP];
static dqb_series dqb_l_cancel_calls[DQB_LAY_NL][DQB_LAY_NP];

/* compact: the idle polls' catch-up after the pushes, moved jobs/s, the
 * server's us per moved job, and polls */
static dqb_series dqb_l_catch[DQB_LAY_NL][DQB_LAY_NP];
static dqb_series dqb_l_catch_srv[DQB_LAY_NL][DQB_LAY_NP];
static dqb_series dqb_l_catch_polls[DQB_LAY_NL][DQB_LAY_NP];

/* Where the bytes go (first run): MEMORY USAGE totals by kind of key. */
enum { DQB_K_DUE, DQB_K_JOBS, DQB_K_BUCKET, DQB_K_SHARD, DQB_K_OTHER,
       DQB_NK };
typedef struct dqb_lay_kind {
    double keys, bytes, entries;
    double lp;                /* keys encoded as listpacks */
    double min_b, max_b;      /* smallest, largest MEMORY USAGE */
    double min_e, max_e;      /* fewest, most entries */
} dqb_lay_kind;
typedef struct dqb_lay_where {
    int have;
    double used;              /* used_memory delta, bytes */
    double jobs;              /* pending jobs then */
    double native;            /* of them native (ZCARD due) */
    dqb_lay_kind k[DQB_NK];
    char bucket_enc[48];      /* encodings of the buckets */
} dqb_lay_where;
static dqb_lay_where dqb_l_where[DQB_LAY_NL][DQB_LAY_NP];

/* Commands the scripts ran since the last dqb_reset_stats(): every
 * cmdstat_ line's calls but EVALSHA's and the admin connection's. */
static double dqb_lay_calls(void) {
    redisReply *r = redisCommand(dqb_adm, "INFO commandstats");
    double n = 0;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        for (const char *p = strstr(r->str, "cmdstat_"); p;
             p = strstr(p + 1, "cmdstat_")) {
            static const char *const skip[] = {
                "cmdstat_evalsha:", "cmdstat_info:",
                "cmdstat_config|resetstat:", "cmdstat_slowlog|reset:"};
            int own = 0;
            for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
                own |= strncmp(p, skip[i], strlen(skip[i])) == 0;
            const char *c = strstr(p, ":calls=");
            if (!own && c)
                n += strtod(c + 7, NULL);
        }
    }
    freeReplyObject(r);
    return n;
}

/* Sets (compact, compact-push) or leaves unset (default) the queue's
 * layout. */
static int dqb_lay_set(dq_client *cl, int layout) {
    if (layout == 0)
        return 0;
    const int k[1] = {DQ_SET_LAYOUT};
    const int64_t v[1] = {layout == 1 ? DQ_LAYOUT_COMPACT
                                      : DQ_LAYOUT_COMPACT_PUSH};
    if (dq_config_set(cl, DQB_QUEUE, 1, k, v) != 0) {
        dqb_fail("layout: dq_config_set: %s", dq_errmsg(cl));
        return -1;
    }
    return 0;
}

/* An integer reply of an admin command (NAN if it is not one). */
static double dqb_lay_int(const char *fmt, const char *arg) {
    redisReply *r = redisCommand(dqb_adm, fmt, DQB_QUEUE, arg);
    double v = NAN;
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = (double)r->integer;
    else if (r && r->type == REDIS_REPLY_STRING)
        v = strtod(r->str, NULL);
    freeReplyObject(r);
    return v;
}

/* Pushes n jobs of plen bytes, delays 1 h + U(0..24 h) from the seed, in
 * batches of DQB_LAY_B; with at0 > 0 as absolute times at0 + delay
 * (DQ_PUSH_AT).  Every stride-th job's id (from job stride / 2 on, at most
 * ncap) goes to pick.  Returns jobs/s, or NAN. */
static double dqb_lay_push(dq_client *cl, long n, size_t plen, int64_t at0,
                           long stride, char (*pick)[DQB_ID_LEN], long ncap,
                           long *npick) {
    static char ids[DQB_LAY_B * DQ_ID_BUF];
    const void *pl[DQB_LAY_B];
    size_t lens[DQB_LAY_B];
    int64_t t[DQB_LAY_B];
    uint64_t seed = 5;
    for (int i = 0; i < DQB_LAY_B; i++) {
        pl[i] = dqb_payload;
        lens[i] = plen;
    }
    if (npick)
        *npick = 0;
    int64_t t0 = dqb_mono_ns();
    for (long done = 0; done < n; done += DQB_LAY_B) {
        size_t m = n - done < DQB_LAY_B ? (size_t)(n - done) : DQB_LAY_B;
        for (size_t i = 0; i < m; i++)
            t[i] = at0 + 3600000 + dqb_rng_range(&seed, 86400001);
        int k = dq_push_batch_ex(cl, DQB_QUEUE, m, pl, lens, t, NULL,
                                 at0 > 0 ? DQ_PUSH_AT : 0, NULL,
                                 pick ? ids : NULL, NULL);
        if (k != (int)m) {
            dqb_fail("layout: dq_push_batch returned %d (of %zu): %s", k, m,
                     dq_errmsg(cl));
            return NAN;
        }
        for (size_t i = 0; pick && i < m; i++) {
            long j = done + (long)i;
            if (j % stride == stride / 2 && *npick < ncap) {
                /* generated ids are 14 characters */
                memcpy(pick[*npick], ids + i * DQ_ID_BUF, DQB_ID_LEN - 1);
                pick[(*npick)++][DQB_ID_LEN - 1] = '\0';
            }
        }
    }
    return (double)n / ((double)(dqb_mono_ns() - t0) / 1e9);
}

/* The kind of key name (under the bench queue's prefix). */
static int dqb_lay_kind_of(const char *key) {
    static const char pfx[] = "dq:{" DQB_QUEUE "}:";
    size_t n = sizeof(pfx) - 1;
    if (strncmp(key, pfx, n) != 0)
        return DQB_K_OTHER;
    key += n;
    if (strcmp(key, "due") == 0)
        return DQB_K_DUE;
    if (strcmp(key, "jobs") == 0)
        return DQB_K_JOBS;
    if (strncmp(key, "c:", 2) == 0)
        return DQB_K_BUCKET;
    if (strncmp(key, "s:", 2) == 0)
        return DQB_K_SHARD;
    return DQB_K_OTHER;
}

/* Every key of the server: SCAN, then MEMORY USAGE (SAMPLES 0), OBJECT
 * ENCODING and its length (ZCARD of due, HLEN of jobs, buckets and shards;
 * 0 for the rest), pipelined, summed by kind. */
static void dqb_lay_census(dqb_lay_where *w) {
    for (int k = 0; k < DQB_NK; k++) {
        memset(&w->k[k], 0, sizeof(w->k[k]));
        w->k[k].min_b = w->k[k].min_e = INFINITY;
        w->k[k].max_b = w->k[k].max_e = -INFINITY;
    }
    double enc_lp = 0, enc_ht = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = dqb_adm_cmd("SCAN %s COUNT 2000", cursor);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            freeReplyObject(r);
            return;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        redisReply *keys = r->element[1];
        for (size_t i = 0; i < keys->elements; i++) {
            const char *key = keys->element[i]->str;
            int kind = dqb_lay_kind_of(key);
            redisAppendCommand(dqb_adm, "MEMORY USAGE %s SAMPLES 0", key);
            redisAppendCommand(dqb_adm, "OBJECT ENCODING %s", key);
            redisAppendCommand(dqb_adm, "%s %s",
                               kind == DQB_K_DUE     ? "ZCARD"
                               : kind == DQB_K_OTHER ? "EXISTS"
                                                     : "HLEN",
                               key);
        }
        for (size_t i = 0; i < keys->elements; i++) {
            redisReply *mu = NULL, *en = NULL, *len = NULL;
            if (redisGetReply(dqb_adm, (void **)&mu) != REDIS_OK ||
                redisGetReply(dqb_adm, (void **)&en) != REDIS_OK ||
                redisGetReply(dqb_adm, (void **)&len) != REDIS_OK) {
                dqb_fail("layout: census: %s", dqb_adm->errstr);
                freeReplyObject(r);
                return;
            }
            int kind = dqb_lay_kind_of(keys->element[i]->str);
            dqb_lay_kind *k = &w->k[kind];
            double b = mu && mu->type == REDIS_REPLY_INTEGER
                           ? (double)mu->integer : 0;
            int lp = en && en->type == REDIS_REPLY_STRING &&
                     strcmp(en->str, "listpack") == 0;
            double e = kind != DQB_K_OTHER && len &&
                               len->type == REDIS_REPLY_INTEGER
                           ? (double)len->integer : 0;
            k->keys++;
            k->bytes += b;
            k->lp += lp;
            k->min_b = b < k->min_b ? b : k->min_b;
            k->max_b = b > k->max_b ? b : k->max_b;
            k->entries += e;
            k->min_e = e < k->min_e ? e : k->min_e;
            k->max_e = e > k->max_e ? e : k->max_e;
            if (kind == DQB_K_BUCKET) {
                if (lp)
                    enc_lp++;
                else
                    enc_ht++;
            }
            freeReplyObject(mu);
            freeReplyObject(en);
            freeReplyObject(len);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    if (enc_lp + enc_ht > 0)
        snprintf(w->bucket_enc, sizeof(w->bucket_enc),
                 "%.0f listpack, %.0f hashtable", enc_lp, enc_ht);
    else
        snprintf(w->bucket_enc, sizeof(w->bucket_enc), "no buckets");
}

/* Fisher-Yates over n ids. */
static void dqb_lay_shuffle(char (*ids)[DQB_ID_LEN], long n, uint64_t *s) {
    char tmp[DQB_ID_LEN];
    for (long i = n - 1; i > 0; i--) {
        long j = (long)dqb_rng_range(s, i + 1);
        memcpy(tmp, ids[i], DQB_ID_LEN);
        memcpy(ids[i], ids[j], DQB_ID_LEN);
        memcpy(ids[j], tmp, DQB_ID_LEN);
    }
}

/* A fresh queue in layout L with the scripts loaded, and its client (or
 * NULL). */
static dq_client *dqb_lay_fresh(int L) {
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        return NULL;
    /* Warm-up: loads push, poll, ack, cancel and stats. */
    if (dqb_lay_set(cl, L) != 0) {
        dq_close(cl);
        return NULL;
    }
    uint64_t seed = 1;
    dqb_fill(cl, 2, 2, 16, 0, 0, &seed);
    dq_jobs *js = NULL;
    if (dq_poll(cl, DQB_QUEUE, 2, DQB_LEASE_MS, &js, NULL) > 0)
        dqb_ack_all(cl, js);
    dq_jobs_free(js);
    dq_cancel(cl, DQB_QUEUE, "none", 0);
    dq_stats(cl, DQB_QUEUE, NULL, NULL, NULL, NULL, NULL);
    dqb_flushall();
    if (dqb_lay_set(cl, L) != 0) {
        dq_close(cl);
        return NULL;
    }
    return cl;
}

/* The compact layout's catch-up: idle dq_polls (nothing is due, each
 * moves up to 256 pushed jobs into buckets) until the native due set has
 * not shrunk for 20 polls in a row (jobs too big to move stay native).
 * Adds moved jobs/s, server us per moved job and polls. */
static void dqb_lay_catch_up(dq_client *cl, int L, int p) {
    double left = dqb_lay_int("ZCARD dq:{%s}:%s", "due"), start = left;
    long polls = 0, still = 0;
    dqb_reset_stats();
    int64_t t0 = dqb_mono_ns();
    while (still < 20) {
        dq_jobs *js = NULL;
        int k = dq_poll(cl, DQB_QUEUE, 1, DQB_LEASE_MS, &js, NULL);
        dq_jobs_free(js);
        if (k != 0) {
            dqb_fail("layout: idle poll returned %d: %s", k, dq_errmsg(cl));
            return;
        }
        polls++;
        double now = dqb_lay_int("ZCARD dq:{%s}:%s", "due");
        still = now < left ? 0 : still + 1;
        left = now;
    }
    double secs = (double)(dqb_mono_ns() - t0) / 1e9, moved = start - left;
    double srv = moved > 0 ? dqb_srv_us_per_job(moved) : NAN;
    dqb_s_add(&dqb_l_catch[L][p], moved > 0 ? moved / secs : 0);
    dqb_s_add(&dqb_l_catch_srv[L][p], srv);
    dqb_s_add(&dqb_l_catch_polls[L][p], (double)polls);
    dqb_log("layout %s %zu B: idle polls moved %.0f jobs in %.1f s (%ld "
            "polls, server %.2f us per moved job), %.0f left native",
            dqb_lay_name[L], dqb_lay_sizes[p], moved, secs, polls, srv,
            left);
}

/* Phase A: pending jobs, memory, push rate, cancel. */
static void dqb_lay_pending(const dqb_cfg *c, int run, int L, int p) {
    size_t plen = dqb_lay_sizes[p];
    long n = c->lay_n, nc = c->lay_cancel_n;
    char (*pick)[DQB_ID_LEN] = calloc((size_t)nc, DQB_ID_LEN);
    dq_client *cl = pick ? dqb_lay_fresh(L) : NULL;
    if (cl == NULL) {
        free(pick);
        return;
    }
    double m0 = dqb_info_field("memory", "used_memory");
    dqb_reset_stats();
    long npick = 0;
    double rate = dqb_lay_push(cl, n, plen, 0, n / nc, pick, nc, &npick);
    double srv = dqb_srv_us_per_job((double)n);
    double calls = dqb_lay_calls() / (double)n;
    if (L == 1)
        dqb_lay_catch_up(cl, L, p); /* memory and cancels after it */
    double m1 = dqb_info_field("memory", "used_memory");
    double per = (m1 - m0) / (double)n - (double)plen;
    double native = dqb_lay_int("ZCARD dq:{%s}:%s", "due");
    int64_t sch = -1;
    if (dq_stats(cl, DQB_QUEUE, &sch, NULL, NULL, NULL, NULL) != 0 ||
        sch != n)
        dqb_fail("layout: %" PRId64 " scheduled, expected %ld", sch, n);
    dqb_s_add(&dqb_l_mem[L][p], per);
    dqb_s_add(&dqb_l_push[L][p], rate);
    dqb_s_add(&dqb_l_push_srv[L][p], srv);
    dqb_s_add(&dqb_l_push_calls[L][p], calls);
    dqb_s_add(&dqb_l_native[L][p], native / (double)n);
    char prof[48];
    snprintf(prof, sizeof(prof), "layout-push-%s-%zu", dqb_lay_name[L],
             plen);
    dqb_save_profile(c, prof, (double)n);
    dqb_log("layout %s %zu B: push %.0f jobs/s (server %.2f us/job), "
            "%.1f B/job beyond the payload, %.1f%% native",
            dqb_lay_name[L], plen, rate, srv, per,
            100 * native / (double)n);
    if (run == 0) {
        dqb_lay_where *w = &dqb_l_where[L][p];
        int64_t t0 = dqb_mono_ns();
        dqb_lay_census(w);
        w->have = 1;
        w->used = m1 - m0;
        w->jobs = (double)n;
        w->native = native;
        dqb_log("layout %s %zu B: census %.0f buckets, %.0f shards, %.0f "
                "other keys (%.1f s)", dqb_lay_name[L], plen,
                w->k[DQB_K_BUCKET].keys, w->k[DQB_K_SHARD].keys,
                w->k[DQB_K_OTHER].keys,
                (double)(dqb_mono_ns() - t0) / 1e9);
    }
    /* cancel: random pending jobs, one round trip each */
    uint64_t s = 11;
    dqb_lay_shuffle(pick, npick, &s);
    dqb_reset_stats();
    long ok = 0;
    int64_t t0 = dqb_mono_ns();
    for (long i = 0; i < npick; i++)
        ok += dq_cancel(cl, DQB_QUEUE, pick[i], 0) == DQ_CANCELED_PENDING;
    double us = (double)(dqb_mono_ns() - t0) / 1e3 / (double)npick;
    double cs = dqb_srv_us_per_job((double)npick);
    dqb_s_add(&dqb_l_cancel_calls[L][p], dqb_lay_calls() / (double)npick);
    if (ok != npick || npick != nc)
        dqb_fail("layout: %ld of %ld cancels removed a pending job (%ld "
                 "picked)", ok, nc, npick);
    if (dq_stats(cl, DQB_QUEUE, &sch, NULL, NULL, NULL, NULL) != 0 ||
        sch != n - ok)
        dqb_fail("layout: %" PRId64 " scheduled after cancels, expected %ld",
                 sch, n - ok);
    dqb_s_add(&dqb_l_cancel[L][p], us);
    dqb_s_add(&dqb_l_cancel_srv[L][p], cs);
    dqb_log("layout %s %zu B: cancel %.1f us per round trip (server %.2f "
            "us)", dqb_lay_name[L], plen, us, cs);
    dq_close(cl);
    free(pick);
}

/* Phase B: the same pushes 26 h in the past, then a drain. */
static void dqb_lay_drain(const dqb_cfg *c, int L, int p) {
    size_t plen = dqb_lay_sizes[p];
    long n = c->lay_drain_n;
    dq_client *cl = dqb_lay_fresh(L);
    if (cl == NULL)
        return;
    int64_t at0 = dqb_adm_srv_ms() - 26 * INT64_C(3600000);
    double prate = dqb_lay_push(cl, n, plen, at0, 1, NULL, 0, NULL);
    double native = dqb_lay_int("ZCARD dq:{%s}:%s", "due");
    dqb_reset_stats();
    long got = 0;
    int64_t t0 = dqb_mono_ns();
    for (;;) {
        dq_jobs *js = NULL;
        int k = dq_poll(cl, DQB_QUEUE, DQB_LAY_B, DQB_LEASE_MS, &js, NULL);
        if (k < 0)
            dqb_fail("layout: dq_poll: %s", dq_errmsg(cl));
        if (k > 0)
            got += dqb_ack_all(cl, js);
        dq_jobs_free(js);
        if (k <= 0)
            break;
    }
    double secs = (double)(dqb_mono_ns() - t0) / 1e9;
    double srv = dqb_srv_us_per_job((double)n);
    dqb_s_add(&dqb_l_drain_calls[L][p], dqb_lay_calls() / (double)n);
    if (got != n)
        dqb_fail("layout: drained %ld, expected %ld", got, n);
    dqb_expect_empty(cl, "layout drain");
    char prof[48];
    snprintf(prof, sizeof(prof), "layout-drain-%s-%zu", dqb_lay_name[L],
             plen);
    dqb_save_profile(c, prof, (double)n);
    dqb_s_add(&dqb_l_pushd[L][p], prate);
    dqb_s_add(&dqb_l_drain[L][p], (double)got / secs);
    dqb_s_add(&dqb_l_drain_srv[L][p], srv);
    dqb_log("layout %s %zu B: %ld due jobs pushed at %.0f jobs/s (%.1f%% "
            "native), drained at %.0f jobs/s (server %.2f us/job)",
            dqb_lay_name[L], plen, n, prate, 100 * native / (double)n,
            (double)got / secs, srv);
    dq_close(cl);
}

/* Drains of one payload size per run and layout: a drain takes a second
 * or two, and this machine's speed drifts by tens of percent over a
 * minute, so one drain per layout minutes apart (after each layout's
 * phase A) compared noise more than layouts. */
#define DQB_LAY_DRAINS 3

void dqb_scen_layout_run(const dqb_cfg *c, int run) {
    for (int p = 0; p < DQB_LAY_NP; p++) {
        for (int L = 0; L < DQB_LAY_NL; L++)
            dqb_lay_pending(c, run, L, p);
        /* Every layout's drain back to back, DQB_LAY_DRAINS times, the
         * order rotated each time: the k-th drains of the layouts are
         * seconds apart, and no layout always goes first. */
        for (int k = 0; k < DQB_LAY_DRAINS; k++)
            for (int i = 0; i < DQB_LAY_NL; i++)
                dqb_lay_drain(c, (i + k + run) % DQB_LAY_NL, p);
    }
    dqb_flushall();
}

/* A ratio to the default layout of the same runs in the limit columns. */
static void dqb_lay_ratio(dqb_row *r, const dqb_series *v,
                          const dqb_series *base, const char *fmt) {
    snprintf(r->limit, sizeof(r->limit), "default");
    snprintf(r->lval, sizeof(r->lval), fmt, dqb_s_med(base));
    snprintf(r->ratio, sizeof(r->ratio), "%.2f", dqb_s_ratio(v, base));
}

/* A "B/job" row: bytes b over n jobs. */
static dqb_row *dqb_lay_pj(const char *name, double b, double n) {
    dqb_row *r = dqb_add_row(name);
    snprintf(r->value, sizeof(r->value), "%.1f", b / n);
    snprintf(r->unit, sizeof(r->unit), "B/job");
    return r;
}

/* The rows of one kind of compact key (buckets or shards): bytes per job,
 * encodings, MEMORY USAGE of one key. */
static void dqb_lay_kind_rows(const char *name, const dqb_lay_kind *k,
                              double n, double compact_jobs) {
    dqb_row *r = dqb_lay_pj(name, k->bytes, n);
    snprintf(r->spread, sizeof(r->spread), "%.0f keys, %.1f jobs each",
             k->keys, k->entries / k->keys);
    snprintf(r->status, sizeof(r->status), "%.1f B per compact job",
             k->bytes / compact_jobs);
    r = dqb_add_row("    OBJECT ENCODING listpack");
    snprintf(r->value, sizeof(r->value), "%.0f", k->lp);
    snprintf(r->unit, sizeof(r->unit), "keys");
    snprintf(r->spread, sizeof(r->spread), "%.0f hashtable",
             k->keys - k->lp);
    r = dqb_add_row("    MEMORY USAGE of one (mean)");
    snprintf(r->value, sizeof(r->value), "%.0f", k->bytes / k->keys);
    snprintf(r->unit, sizeof(r->unit), "bytes");
    snprintf(r->spread, sizeof(r->spread), "%.0f..%.0f", k->min_b,
             k->max_b);
    snprintf(r->status, sizeof(r->status), "%.0f..%.0f entries", k->min_e,
             k->max_e);
}

/* The where-the-bytes-go rows of one layout and payload size. */
static void dqb_lay_where_rows(int L, int p) {
    const dqb_lay_where *w = &dqb_l_where[L][p];
    if (!w->have)
        return;
    double n = w->jobs;
    const char *ln = dqb_lay_name[L];
    size_t plen = dqb_lay_sizes[p];
    char name[200];
    const dqb_lay_kind *due = &w->k[DQB_K_DUE], *jobs = &w->k[DQB_K_JOBS],
                       *ot = &w->k[DQB_K_OTHER];
    double sum = 0;
    for (int k = 0; k < DQB_NK; k++)
        sum += w->k[k].bytes;
    snprintf(name, sizeof(name), "%s %zu B: used_memory per job", ln, plen);
    dqb_row *r = dqb_lay_pj(name, w->used, n);
    snprintf(r->spread, sizeof(r->spread), "%.1f beyond the payload",
             w->used / n - (double)plen);
    snprintf(name, sizeof(name), "  native due ZSET + jobs HASH");
    r = dqb_lay_pj(name, due->bytes + jobs->bytes, n);
    snprintf(r->spread, sizeof(r->spread), "%.1f%% of jobs native",
             100 * w->native / n);
    snprintf(r->status, sizeof(r->status), "due %.1f + jobs %.1f B/job",
             due->bytes / n, jobs->bytes / n);
    if (w->k[DQB_K_BUCKET].keys > 0)
        dqb_lay_kind_rows("  compact buckets c:<b>", &w->k[DQB_K_BUCKET], n,
                          n - w->native);
    if (w->k[DQB_K_SHARD].keys > 0)
        dqb_lay_kind_rows("  id shards s:<h>", &w->k[DQB_K_SHARD], n,
                          n - w->native);
    if (ot->keys > 0) {
        r = dqb_lay_pj("  other keys (cb, cm, conf, mv)", ot->bytes, n);
        snprintf(r->spread, sizeof(r->spread), "%.0f keys", ot->keys);
    }
    r = dqb_lay_pj("  rest: keyspace table, allocator", w->used - sum, n);
    snprintf(r->spread, sizeof(r->spread), "used_memory - MEMORY USAGE");
}

void dqb_scen_layout_rows(const dqb_cfg *c) {
    char title[300];
    snprintf(title, sizeof(title),
             "layouts: %ld pending jobs (1 h + U(0..24 h), generated ids, "
             "push_batch 1000); drain: %ld pushed alike, due 25..1 h ago, poll "
             "1000 + ack_batch, %d per run and layout, the layouts back to "
             "back; cancel: %ld random ids; ratio: to default",
             c->lay_n, c->lay_drain_n, DQB_LAY_DRAINS, c->lay_cancel_n);
    dqb_add_section(title);
    char name[200];
    for (int p = 0; p < DQB_LAY_NP; p++) {
        size_t plen = dqb_lay_sizes[p];
        for (int L = 0; L < DQB_LAY_NL; L++) {
            const char *ln = dqb_lay_name[L];
            dqb_row *r;
            snprintf(name, sizeof(name), "%s %zu B: memory beyond payload",
                     ln, plen);
            r = dqb_val_row(name, &dqb_l_mem[L][p], "B/job", "%.1f");
            if (L >= 1)
                dqb_lay_ratio(r, &dqb_l_mem[L][p], &dqb_l_mem[0][p],
                              "%.1f");
            double m = dqb_s_med(&dqb_l_mem[L][p]);
            if (L == 0)
                dqb_set_target(r, "<= 180", m, 180, 0);
            else if (plen == 36)
                dqb_set_target(r, "<= 120", m, 120, 0);
            snprintf(name, sizeof(name), "%s %zu B: push_batch 1000", ln,
                     plen);
            r = dqb_tput_row(name, &dqb_l_push[L][p],
                             L ? "default" : NULL, &dqb_l_push[0][p]);
            if (L >= 1)
                dqb_set_target(r, L == 1 ? ">= 0.9x" : ">= 0.7x",
                               dqb_s_ratio(&dqb_l_push[L][p],
                                           &dqb_l_push[0][p]),
                               L == 1 ? 0.9 : 0.7, 1);
            dqb_srv_row("  server time in EVALSHA per job",
                        &dqb_l_push_srv[L][p]);
            dqb_val_row("  redis.call per job (commandstats)",
                        &dqb_l_push_calls[L][p], "calls", "%.3f");
            if (L == 1) {
                r = dqb_tput_row("  then idle polls move them (jobs/s)",
                                 &dqb_l_catch[L][p], NULL, NULL);
                dqb_srv_row("  server time in EVALSHA per moved job",
                            &dqb_l_catch_srv[L][p]);
                dqb_val_row("  idle polls until caught up",
                            &dqb_l_catch_polls[L][p], "polls", "%.0f");
            }
            snprintf(name, sizeof(name), "%s %zu B: drain, poll 1000 + ack%s",
                     ln, plen, L == 1 ? " (due at push: native)" : "");
            r = dqb_tput_row(name, &dqb_l_drain[L][p],
                             L ? "default" : NULL, &dqb_l_drain[0][p]);
            if (L == 2)
                dqb_set_target(r, ">= 1.0x",
                               dqb_s_ratio(&dqb_l_drain[L][p],
                                           &dqb_l_drain[0][p]), 1.0, 1);
            dqb_srv_row("  server time in EVALSHA per job",
                        &dqb_l_drain_srv[L][p]);
            dqb_val_row("  redis.call per job (commandstats)",
                        &dqb_l_drain_calls[L][p], "calls", "%.3f");
            snprintf(name, sizeof(name), "  push of those due jobs");
            r = dqb_tput_row(name, &dqb_l_pushd[L][p],
                             L ? "default" : NULL, &dqb_l_pushd[0][p]);
            snprintf(name, sizeof(name), "%s %zu B: dq_cancel round trip",
                     ln, plen);
            r = dqb_val_row(name, &dqb_l_cancel[L][p], "us", "%.1f");
            if (L >= 1) {
                dqb_lay_ratio(r, &dqb_l_cancel[L][p], &dqb_l_cancel[0][p],
                              "%.1f");
                dqb_set_target(r, "<= 2x",
                               dqb_s_ratio(&dqb_l_cancel[L][p],
                                           &dqb_l_cancel[0][p]), 2.0, 0);
            }
            r = dqb_val_row("  server time in EVALSHA per cancel",
                            &dqb_l_cancel_srv[L][p], "us", "%.2f");
            if (L >= 1)
                dqb_lay_ratio(r, &dqb_l_cancel_srv[L][p],
                              &dqb_l_cancel_srv[0][p], "%.2f");
            dqb_val_row("  redis.call per cancel (commandstats)",
                        &dqb_l_cancel_calls[L][p], "calls", "%.2f");
        }
    }
    snprintf(title, sizeof(title),
             "layouts: where the bytes go after pushing %ld jobs (first "
             "run; MEMORY USAGE SAMPLES 0 of every key, per pending job)",
             c->lay_n);
    dqb_add_section(title);
    for (int p = 0; p < DQB_LAY_NP; p++)
        for (int L = 0; L < DQB_LAY_NL; L++)
            dqb_lay_where_rows(L, p);
}
