/*
 * tests/cluster_selftest.c - self-test of tests/cluster_harness.c (plain main,
 * no Check): a 3-primary / 1-replica cluster (slot hashing against the
 * server's, a live slot migration with ASK seen in between, a primary killed
 * and replaced), then a sentinel setup (1 replica, 3 sentinels: a SENTINEL
 * FAILOVER, then a failover by kill).  Prints one "figures: cluster_harness:"
 * line with the timings.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cluster_harness.h"
#include "support/selftest.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NKEYS 10

/* 1 if pid is gone (or a zombie). */
static int dead(pid_t pid)
{
    return pid <= 0 || (kill(pid, 0) == -1 && errno == ESRCH);
}

/* The reply of one command on a fresh TCP connection; NULL on I/O error. */
static redisReply *run(int port, const char *fmt, const char *arg)
{
    redisContext *ctx = thc_connect(port);
    redisReply *rep;

    if (!ctx)
        return NULL;
    rep = redisCommand(ctx, fmt, arg);
    if (!rep)
        fprintf(stderr, "selftest: 127.0.0.1:%d: %s\n", port, ctx->errstr);
    redisFree(ctx);
    return rep;
}

/* 1 if GET key on port returns want. */
static int get_is(int port, const char *key, const char *want)
{
    redisReply *rep = run(port, "GET %s", key);
    int ok = rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, want) == 0;

    if (!ok)
        fprintf(stderr, "selftest: GET %s on 127.0.0.1:%d: type %d \"%s\", want \"%s\"\n", key,
                port, rep ? rep->type : -1, rep && rep->str ? rep->str : "", want);
    if (rep)
        freeReplyObject(rep);
    return ok;
}

/* 1 if the reply to GET key on port is an error starting with prefix. */
static int get_err(int port, const char *key, const char *prefix)
{
    redisReply *rep = run(port, "GET %s", key);
    int ok = rep && rep->type == REDIS_REPLY_ERROR &&
             strncmp(rep->str, prefix, strlen(prefix)) == 0;

    if (!ok)
        fprintf(stderr, "selftest: GET %s on 127.0.0.1:%d: type %d \"%s\", want error \"%s...\"\n",
                key, port, rep ? rep->type : -1, rep && rep->str ? rep->str : "", prefix);
    if (rep)
        freeReplyObject(rep);
    return ok;
}

static void check_slots(thc_cluster *c)
{
    static const char *keys[] = {
        "123456789", "foo", "{user1000}.following", "{user1000}.followers", "foo{}{bar}",
        "foo{{bar}}zap", "foo{bar}{zap}", "{", "}{", "a{b", "{}", "{a}", "x{a}y", "",
    };
    size_t i;

    CHECK(thc_slot_of("123456789") == 0x31C3); /* the spec's CRC16 check value */
    CHECK(thc_slot_of("{user1000}.following") == thc_slot_of("{user1000}.followers"));
    CHECK(thc_slot_of("foo{bar}{zap}") == thc_slot_of("bar"));
    CHECK(thc_slot_of("foo{{bar}}zap") == thc_slot_of("{bar"));
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        redisReply *rep = run(c->nodes[0].r.port, "CLUSTER KEYSLOT %s", keys[i]);
        int ok = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == thc_slot_of(keys[i]);

        if (!ok)
            fprintf(stderr, "selftest: slot of \"%s\": ours %d, server's %lld\n", keys[i],
                    thc_slot_of(keys[i]),
                    rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1LL);
        CHECK(ok);
        if (rep)
            freeReplyObject(rep);
    }
}

typedef struct mig {
    int src_port, dst_port, slot;
    const char *probe; /* a key of the slot that exists nowhere */
    int steps, ask_ok;
} mig;

/* Mid-migration: a missing key of the slot is redirected with ASK to the target. */
static void between(void *arg)
{
    mig *m = arg;
    char want[64];

    m->steps++;
    snprintf(want, sizeof want, "ASK %d 127.0.0.1:%d", m->slot, m->dst_port);
    m->ask_ok += get_err(m->src_port, m->probe, want);
}

static int count_primaries(const thc_cluster *c)
{
    int i, n = 0;

    for (i = 0; i < c->count; i++)
        n += c->nodes[i].r.pid > 0 && c->nodes[i].role == THC_PRIMARY;
    return n;
}

static void cluster_part(int64_t *create_ms, int64_t *migrate_ms, int64_t *failover_ms,
                         int *steps)
{
    static thc_cluster c;
    char uri[512], key[32], val[32], moved[64];
    char dirs[THC_MAX_NODES][256];
    pid_t pids[THC_MAX_NODES];
    int64_t t;
    int i, slot, src, dst = -1, np, ncomma = 0, ok, rep_of_dst;
    redisContext *ctx;
    mig m;

    t = th_mono_ms();
    if (thc_cluster_start(&c, 3, 1, NULL) != 0) {
        CHECK(!"thc_cluster_start");
        return;
    }
    *create_ms = th_mono_ms() - t;
    CHECK(c.count == 6);
    CHECK(count_primaries(&c) == 3);
    for (i = 0; i < c.count; i++) {
        CHECK(strlen(c.nodes[i].id) == 40);
        if (c.nodes[i].role == THC_REPLICA)
            CHECK(c.nodes[i].primary >= 0 && c.nodes[c.nodes[i].primary].role == THC_PRIMARY);
        else
            CHECK(c.nodes[i].primary == -1);
    }
    thc_cluster_uri(&c, uri, sizeof uri);
    for (i = 0; uri[i]; i++)
        ncomma += uri[i] == ',';
    CHECK(strncmp(uri, "redis+cluster://127.0.0.1:", 26) == 0 && ncomma == 2);
    printf("cluster: %s\n", uri);
    check_slots(&c);

    /* NKEYS keys in one slot, written at its owner. */
    slot = thc_slot_of("{thc}k0");
    src = thc_owner(&c, slot);
    CHECK(src >= 0 && c.nodes[src].role == THC_PRIMARY);
    if (src < 0)
        goto out;
    ctx = thc_connect(c.nodes[src].r.port);
    CHECK(ctx != NULL);
    for (i = 0; ctx && i < NKEYS; i++) {
        redisReply *rep;

        snprintf(key, sizeof key, "{thc}k%d", i);
        snprintf(val, sizeof val, "v%d", i);
        rep = redisCommand(ctx, "SET %s %s", key, val);
        CHECK(rep && rep->type == REDIS_REPLY_STATUS);
        if (rep)
            freeReplyObject(rep);
    }
    if (ctx)
        redisFree(ctx);

    /* Live migration to another primary, 3 keys a step. */
    for (i = 0; i < c.count && dst < 0; i++)
        if (i != src && c.nodes[i].role == THC_PRIMARY)
            dst = i;
    memset(&m, 0, sizeof m);
    m.src_port = c.nodes[src].r.port;
    m.dst_port = c.nodes[dst].r.port;
    m.slot = slot;
    m.probe = "{thc}missing";
    t = th_mono_ms();
    CHECK(thc_migrate_slot(&c, slot, dst, 3, between, &m) == 0);
    *migrate_ms = th_mono_ms() - t;
    *steps = m.steps;
    CHECK(m.steps == (NKEYS + 2) / 3);
    CHECK(m.ask_ok == m.steps);
    CHECK(thc_owner(&c, slot) == dst);
    for (i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "{thc}k%d", i);
        snprintf(val, sizeof val, "v%d", i);
        CHECK(get_is(m.dst_port, key, val));
    }
    snprintf(moved, sizeof moved, "MOVED %d 127.0.0.1:%d", slot, m.dst_port);
    CHECK(get_err(m.src_port, "{thc}k0", moved));
    /* An empty slot moves too, in one step (between() still runs once). */
    {
        int eslot = thc_slot_of("{thc-empty}"), eown = thc_owner(&c, eslot), eto = -1;

        for (i = 0; i < c.count && eto < 0; i++)
            if (i != eown && c.nodes[i].role == THC_PRIMARY)
                eto = i;
        CHECK(eown >= 0 && eto >= 0);
        if (eown >= 0 && eto >= 0) {
            memset(&m, 0, sizeof m);
            m.src_port = c.nodes[eown].r.port;
            m.dst_port = c.nodes[eto].r.port;
            m.slot = eslot;
            m.probe = "{thc-empty}missing";
            CHECK(thc_migrate_slot(&c, eslot, eto, 5, between, &m) == 0);
            CHECK(m.steps == 1 && m.ask_ok == 1);
            CHECK(thc_owner(&c, eslot) == eto);
        }
    }

    /* The new owner dies: its replica takes over, with the keys (written
     * before the call: thc_kill_primary waits until the replica has them). */
    for (i = 0, rep_of_dst = -1; i < c.count; i++)
        if (c.nodes[i].role == THC_REPLICA && c.nodes[i].primary == dst)
            rep_of_dst = i;
    CHECK(rep_of_dst >= 0);
    t = th_mono_ms();
    np = thc_kill_primary(&c, dst, 20000);
    *failover_ms = th_mono_ms() - t;
    CHECK(np >= 0 && np == rep_of_dst);
    if (np >= 0) {
        CHECK(c.nodes[np].role == THC_PRIMARY && c.nodes[dst].r.pid == 0);
        CHECK(thc_owner(&c, slot) == np);
        for (i = 0; i < NKEYS; i++) {
            snprintf(key, sizeof key, "{thc}k%d", i);
            snprintf(val, sizeof val, "v%d", i);
            CHECK(get_is(c.nodes[np].r.port, key, val));
        }
        CHECK(count_primaries(&c) == 3);
        thc_cluster_uri(&c, uri, sizeof uri);
        CHECK(strstr(uri, "127.0.0.1:") != NULL);
    }
    CHECK(thc_wait_ok(&c, 5000) == 0);

out:
    for (i = 0; i < c.count; i++) {
        memcpy(dirs[i], c.nodes[i].r.dir, sizeof dirs[i]);
        pids[i] = c.nodes[i].r.pid;
    }
    ok = c.count;
    thc_cluster_stop(&c);
    for (i = 0; i < ok; i++) {
        CHECK(!is_dir(dirs[i]));
        CHECK(dead(pids[i]));
    }
    CHECK(c.count == 0);
}

/* 1 once data node i answers ROLE slave with its link up (waits up to ms). */
static int wait_replica(thc_sentinel *s, int i, int64_t ms)
{
    int64_t end = th_mono_ms() + ms;

    while (th_mono_ms() < end) {
        redisReply *rep = run(s->data[i].port, "INFO %s", "replication");
        int up = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "role:slave") &&
                 strstr(rep->str, "master_link_status:up");

        if (rep)
            freeReplyObject(rep);
        if (up)
            return 1;
        th_sleep_ms(50);
    }
    return 0;
}

static void sentinel_part(int64_t *start_ms, int64_t *manual_ms, int64_t *demote_ms,
                          int64_t *kill_ms)
{
    static thc_sentinel s;
    char uri[512], dirs[THC_MAX_SENTINELS][256];
    int64_t t;
    int i, np, n;
    redisReply *rep;

    t = th_mono_ms();
    if (thc_sentinel_start(&s, 1, 3, "thcmaster") != 0) {
        CHECK(!"thc_sentinel_start");
        return;
    }
    *start_ms = th_mono_ms() - t;
    CHECK(s.ndata == 2 && s.nsentinels == 3 && s.primary == 0);
    thc_sentinel_uri(&s, uri, sizeof uri);
    printf("sentinel: %s\n", uri);
    CHECK(strncmp(uri, "redis+sentinel://127.0.0.1:", 27) == 0 &&
          strcmp(uri + strlen(uri) - 10, "/thcmaster") == 0);

    rep = run(s.data[0].port, "SET thc %s", "one");
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    if (rep)
        freeReplyObject(rep);

    /* SENTINEL FAILOVER: the replica is promoted; the old primary is
     * turned into its replica later (measured, not promised). */
    t = th_mono_ms();
    np = thc_sentinel_failover(&s, 0, 30000);
    *manual_ms = th_mono_ms() - t;
    CHECK(np == 1 && s.primary == 1);
    CHECK(get_is(s.data[1].port, "thc", "one"));
    t = th_mono_ms();
    CHECK(wait_replica(&s, 0, 30000));
    *demote_ms = th_mono_ms() - t;

    /* By kill: the old primary, a replica again, comes back as primary. */
    t = th_mono_ms();
    np = thc_sentinel_failover(&s, 1, 30000);
    *kill_ms = th_mono_ms() - t;
    CHECK(np == 0 && s.primary == 0 && s.data[1].pid == 0);
    if (np == 0) {
        rep = run(s.data[0].port, "ROLE", NULL);
        CHECK(rep && rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
              rep->element[0]->type == REDIS_REPLY_STRING &&
              strcmp(rep->element[0]->str, "master") == 0);
        if (rep)
            freeReplyObject(rep);
        CHECK(get_is(s.data[0].port, "thc", "one"));
    }

    n = s.nsentinels;
    for (i = 0; i < n; i++)
        memcpy(dirs[i], s.sentinels[i].dir, sizeof dirs[i]);
    thc_sentinel_stop(&s);
    for (i = 0; i < n; i++)
        CHECK(!is_dir(dirs[i]));
    CHECK(s.nsentinels == 0);
}

int main(void)
{
    int64_t t0 = th_mono_ms();
    int64_t create_ms = -1, migrate_ms = -1, cfail_ms = -1, sstart_ms = -1, smanual_ms = -1,
            sdemote_ms = -1, skill_ms = -1;
    int steps = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    cluster_part(&create_ms, &migrate_ms, &cfail_ms, &steps);
    sentinel_part(&sstart_ms, &smanual_ms, &sdemote_ms, &skill_ms);
    printf("figures: cluster_harness: create_ms=%lld migrate_ms=%lld migrate_steps=%d "
           "cluster_failover_ms=%lld sentinel_start_ms=%lld sentinel_failover_ms=%lld "
           "sentinel_demote_ms=%lld sentinel_kill_failover_ms=%lld total_ms=%lld\n",
           (long long)create_ms, (long long)migrate_ms, steps, (long long)cfail_ms,
           (long long)sstart_ms, (long long)smanual_ms, (long long)sdemote_ms,
           (long long)skill_ms, (long long)(th_mono_ms() - t0));
    printf("%d checks passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
