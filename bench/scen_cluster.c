/*
 * bench/scen_cluster.c - a partitioned queue over a local Redis Cluster of
 * 3 primaries against the same workload on one node.
 *
 * Each run starts servers of its own and stops them (by pid) at its end:
 * one plain redis-server and a cluster of 3 primaries without replicas
 * (tests/cluster_harness.h), all on 127.0.0.1; the clients use TCP
 * everywhere (the admin connection to the single node uses its unix
 * socket).  Three setups run the same phases, one setup after the other
 * within each phase:
 *   1 node            redis://127.0.0.1:P, a plain queue
 *   1 node 16p        redis://127.0.0.1:P?partitions=16
 *   3 primaries 16p   redis+cluster://...?partitions=16
 * Phases: push_batch of 1000 far-future jobs; one dq_push per job; drain
 * (N due jobs, one consumer in this process: poll max 1000 + ack_batch);
 * lateness at light load (a consumer process in dq_poll_wait max 100, this
 * process pushing one job every pace ms, due 50..150 ms after its push;
 * receive time - due time on the server clock, as scen_lateness.c does).
 * The limit of the run is redis-benchmark on the single node (TCP), with
 * the minimal HSET+ZADD script of scen_limits.c.
 *
 * Server time per job: INFO commandstats of every node before and after a
 * phase; the usec of the commands the clients sent (the commands the Lua
 * scripts call are counted twice by Redis, on their own and inside
 * EVAL/EVALSHA, so they are left out, as are the bench's own admin
 * commands), and INFO cpu (the server process's CPU: I/O, parsing and the
 * cluster bus included).  Client CPU per job: getrusage of this process.
 * Modelled throughput of N primaries on N cores when clients are not the
 * limit: 1e6 / the busiest node's server us per job (each primary gets the
 * share of the jobs its partitions hash to).
 *
 * Those times are wall time on a shared machine; once per invocation the
 * same servers are also started under callgrind (bench/cg-redis.sh) and
 * the instructions each node spends on a job's life are counted
 * (push_batch, then a drain the size of the quick run's), for the same
 * setups and for the cluster with 24 partitions, whose tags split 8/8/8
 * over the primaries (16 split 5/5/6): the sum over the nodes against one
 * node, and the model as one node's count / the busiest primary's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include "cluster_harness.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DQB_CL_NODES 3
#define DQB_CL_PARTS 16
#define DQB_CL_EVEN 24         /* partitions whose tags split 8/8/8 */
#define DQB_CL_LATE_BASE 50    /* ms: a lateness job is due 50.. */
#define DQB_CL_LATE_SPREAD 100 /* ..150 ms after its push */

/* The setups: the timed phases run the first DQB_NCS; the callgrind
 * count runs them all (DQB_CS_CLEVEN: the same cluster, DQB_CL_EVEN
 * partitions). */
enum { DQB_CS_ONE, DQB_CS_ONE16, DQB_CS_CL16, DQB_NCS };
enum { DQB_CS_CLEVEN = DQB_NCS, DQB_NCS_ALL };
static const char *const dqb_cs_name[DQB_NCS_ALL] = {
    "1 node", "1 node 16p", "3 primaries 16p", "3 primaries 24p"};

/* The throughput phases. */
enum { DQB_CP_PUSHB, DQB_CP_PUSH1, DQB_CP_DRAIN, DQB_NCP };
static const char *const dqb_cp_name[DQB_NCP] = {
    "push_batch of 1000", "push 1/round trip", "drain max 1000"};

/* The servers of the current run and their admin connections. */
static th_redis dqb_cl_one;
static thc_cluster dqb_cl_cl;
static redisContext *dqb_cl_adm_one, *dqb_cl_adm_cl[DQB_CL_NODES];

typedef struct dqb_cl_setup {
    char uri[600];
    int n;                           /* nodes */
    redisContext *adm[DQB_CL_NODES]; /* admin connection of each node */
    th_redis *srv[DQB_CL_NODES];     /* each node's server */
    int parts;                       /* partitions (0: a plain queue) */
} dqb_cl_setup;
static dqb_cl_setup dqb_cs[DQB_NCS_ALL];

/* Partitions per primary (by the slot map of the run's cluster), with
 * DQB_CL_PARTS and DQB_CL_EVEN partitions. */
static int dqb_cl_share[DQB_CL_NODES], dqb_cl_share_even[DQB_CL_NODES];

/* Figures per run (medians in the table). */
static dqb_series dqb_cl_lim_p16, dqb_cl_lim_c1;
static dqb_series dqb_cl_tput[DQB_NCP][DQB_NCS];
static dqb_series dqb_cl_srv[DQB_NCP][DQB_NCS];    /* us/job, nodes summed */
static dqb_series dqb_cl_srvmax[DQB_NCP][DQB_NCS]; /* busiest node's */
/* A job's life: push_batch + drain, us per job. */
static dqb_series dqb_cl_cli[DQB_NCS];     /* client CPU */
static dqb_series dqb_cl_life[DQB_NCS];    /* server time, nodes summed */
static dqb_series dqb_cl_lifemax[DQB_NCS]; /* busiest node's */
static dqb_series dqb_cl_cpu[DQB_NCS];     /* server CPU, nodes summed */
static dqb_series dqb_cl_model[DQB_NCS];   /* 1e6 / busiest node's */
static dqb_series dqb_cl_late[DQB_NCS][3]; /* p50 p99 max, ms */
static double dqb_cl_late_unc;             /* ms, worst over runs */
static FILE *dqb_cl_fig;                   /* out/cluster-figures.txt */

/* ---- server time per node ------------------------------------------- */

/* Commands that only the Lua scripts call (Redis counts each of their
 * calls on its own and again inside EVAL/EVALSHA) and the bench's admin
 * commands: not part of what the clients cost the server. */
static const char *const dqb_cl_skip[] = {
    /* called by the scripts of lib/lua */
    "hdel", "hexists", "hget", "hmget", "hset", "hsetnx", "pexpire", "time",
    "zadd", "zcard", "zcount", "zmscore", "zrange", "zrangebyscore", "zrem",
    "zremrangebyrank", "zscore", "publish", "spublish",
    /* the bench's own */
    "info", "config", "flushall", "slowlog", "script", NULL};

/* One node's counters at one moment. */
typedef struct dqb_cl_snap {
    double usec;    /* commands the clients sent, usec */
    double evalsha; /* EVALSHA alone, usec */
    double calls;   /* EVALSHA and EVAL calls */
    double cpu_us;  /* used_cpu_user + used_cpu_sys, us */
} dqb_cl_snap;

/* What one phase of one setup cost (node by node) and took. */
typedef struct dqb_cl_meas {
    long jobs;
    double secs, cli_us;
    double usec[DQB_CL_NODES], evalsha[DQB_CL_NODES], cpu_us[DQB_CL_NODES];
    double calls[DQB_CL_NODES];
} dqb_cl_meas;

static int dqb_cl_skipped(const char *name, size_t len) {
    const char *bar = memchr(name, '|', len);
    if (bar != NULL)
        len = (size_t)(bar - name);
    for (int i = 0; dqb_cl_skip[i]; i++)
        if (strlen(dqb_cl_skip[i]) == len &&
            strncasecmp(dqb_cl_skip[i], name, len) == 0)
            return 1;
    return 0;
}

/* Value of "\nfield:" in an INFO text, or NAN. */
static double dqb_cl_info_num(const char *text, const char *field) {
    char key[64];
    snprintf(key, sizeof(key), "\n%s:", field);
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

static void dqb_cl_snap_node(redisContext *a, dqb_cl_snap *s) {
    memset(s, 0, sizeof(*s));
    redisReply *r = redisCommand(a, "INFO commandstats");
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        dqb_fail("cluster: INFO commandstats: %s",
                 r ? r->str : a->errstr);
        freeReplyObject(r);
        return;
    }
    for (const char *p = r->str; p && *p;) {
        const char *e = strchr(p, '\n');
        const char *end = e ? e : p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(end - p));
        const char *u = strstr(p, ",usec=");
        if (strncmp(p, "cmdstat_", 8) == 0 && colon && u && u < end) {
            double usec = strtod(u + 6, NULL);
            size_t nl = (size_t)(colon - (p + 8));
            if (nl == 7 && strncmp(p + 8, "evalsha", 7) == 0)
                s->evalsha = usec;
            if ((nl == 7 && strncmp(p + 8, "evalsha", 7) == 0) ||
                (nl == 4 && strncmp(p + 8, "eval", 4) == 0))
                s->calls += strtod(colon + 7, NULL); /* ":calls=" */
            if (!dqb_cl_skipped(p + 8, nl))
                s->usec += usec;
        }
        p = e ? e + 1 : NULL;
    }
    freeReplyObject(r);
    r = redisCommand(a, "INFO cpu");
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        s->cpu_us = (dqb_cl_info_num(r->str, "used_cpu_user") +
                     dqb_cl_info_num(r->str, "used_cpu_sys")) * 1e6;
    else
        dqb_fail("cluster: INFO cpu failed");
    freeReplyObject(r);
}

/* CPU time of this process (user + system), us. */
static double dqb_cl_self_us(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec * 1e6 + (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec * 1e6 + (double)u.ru_stime.tv_usec;
}

/* Start of a phase: every node's counters, this process's CPU, the clock. */
typedef struct dqb_cl_mark {
    dqb_cl_snap node[DQB_CL_NODES];
    double self_us;
    int64_t t_ns;
} dqb_cl_mark;

static void dqb_cl_begin(int s, dqb_cl_mark *m) {
    for (int i = 0; i < dqb_cs[s].n; i++)
        dqb_cl_snap_node(dqb_cs[s].adm[i], &m->node[i]);
    m->self_us = dqb_cl_self_us();
    m->t_ns = dqb_mono_ns();
}

static void dqb_cl_end(int s, const dqb_cl_mark *m, long jobs,
                       dqb_cl_meas *out) {
    int64_t t1 = dqb_mono_ns();
    double self1 = dqb_cl_self_us();
    memset(out, 0, sizeof(*out));
    out->jobs = jobs;
    out->secs = (double)(t1 - m->t_ns) / 1e9;
    out->cli_us = self1 - m->self_us;
    for (int i = 0; i < dqb_cs[s].n; i++) {
        dqb_cl_snap a;
        dqb_cl_snap_node(dqb_cs[s].adm[i], &a);
        out->usec[i] = a.usec - m->node[i].usec;
        out->evalsha[i] = a.evalsha - m->node[i].evalsha;
        out->calls[i] = a.calls - m->node[i].calls;
        out->cpu_us[i] = a.cpu_us - m->node[i].cpu_us;
    }
}

/* Sum and busiest node of a per-node figure, per job. */
static double dqb_cl_sum(int s, const double *v, long jobs) {
    double t = 0;
    for (int i = 0; i < dqb_cs[s].n; i++)
        t += v[i];
    return t / (double)jobs;
}

static double dqb_cl_max(int s, const double *v, long jobs) {
    double m = 0;
    for (int i = 0; i < dqb_cs[s].n; i++)
        m = v[i] > m ? v[i] : m;
    return m / (double)jobs;
}

/* One line of out/cluster-figures.txt (and none if it cannot be opened). */
static void dqb_cl_fig_line(int run, int s, const char *phase,
                            const dqb_cl_meas *m) {
    if (dqb_cl_fig == NULL)
        return;
    long j = m->jobs;
    fprintf(dqb_cl_fig,
            "figures: run %d | %-15s | %-18s | %7ld jobs %8.3f s %9.0f "
            "jobs/s | server us/job by node", run + 1, dqb_cs_name[s], phase,
            j, m->secs, (double)j / m->secs);
    for (int i = 0; i < dqb_cs[s].n; i++)
        fprintf(dqb_cl_fig, " %.3f", m->usec[i] / (double)j);
    fprintf(dqb_cl_fig, " (sum %.3f, busiest %.3f; EVALSHA alone %.3f) | "
            "server CPU us/job by node",
            dqb_cl_sum(s, m->usec, j), dqb_cl_max(s, m->usec, j),
            dqb_cl_sum(s, m->evalsha, j));
    for (int i = 0; i < dqb_cs[s].n; i++)
        fprintf(dqb_cl_fig, " %.3f", m->cpu_us[i] / (double)j);
    fprintf(dqb_cl_fig, " (sum %.3f) | client CPU us/job %.3f | script "
            "calls/job %.4f\n", dqb_cl_sum(s, m->cpu_us, j),
            m->cli_us / (double)j, dqb_cl_sum(s, m->calls, j));
    fflush(dqb_cl_fig);
}

/* ---- servers ---------------------------------------------------------- */

static void dqb_cl_adm_do(redisContext *a, const char *cmd) {
    redisReply *r = redisCommand(a, cmd);
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        dqb_fail("cluster: '%s': %s", cmd, r ? r->str : a->errstr);
    freeReplyObject(r);
}

static void dqb_cl_flush(int s) {
    for (int i = 0; i < dqb_cs[s].n; i++)
        dqb_cl_adm_do(dqb_cs[s].adm[i], "FLUSHALL");
}

static void dqb_cl_stop(void) {
    if (dqb_cl_adm_one)
        redisFree(dqb_cl_adm_one);
    dqb_cl_adm_one = NULL;
    for (int i = 0; i < DQB_CL_NODES; i++) {
        if (dqb_cl_adm_cl[i])
            redisFree(dqb_cl_adm_cl[i]);
        dqb_cl_adm_cl[i] = NULL;
    }
    thc_cluster_stop(&dqb_cl_cl);
    th_redis_stop(&dqb_cl_one);
}

/* Which primary holds each of `parts` partitions ({bench#i}): counts per
 * node into share. */
static void dqb_cl_shares(int parts, int *share) {
    memset(share, 0, sizeof(int) * DQB_CL_NODES);
    for (int p = 0; p < parts; p++) {
        char key[64];
        snprintf(key, sizeof(key), "dq:{%s#%d}:due", DQB_QUEUE, p);
        int o = thc_owner(&dqb_cl_cl, thc_slot_of(key));
        if (o >= 0 && o < DQB_CL_NODES)
            share[o]++;
    }
}

/* Starts the single node and the cluster; fills dqb_cs.  0 or -1 (a FAIL
 * line, nothing left running). */
static int dqb_cl_start(void) {
    struct timeval tv = {120, 0};
    if (th_redis_start(&dqb_cl_one, 1, NULL) != 0) {
        dqb_fail("cluster: cannot start the single redis-server");
        return -1;
    }
    if (thc_cluster_start(&dqb_cl_cl, DQB_CL_NODES, 0, NULL) != 0) {
        dqb_fail("cluster: cannot start a cluster of %d primaries",
                 DQB_CL_NODES);
        th_redis_stop(&dqb_cl_one);
        return -1;
    }
    dqb_cl_adm_one = th_redis_connect(&dqb_cl_one);
    int ok = dqb_cl_adm_one != NULL && dqb_cl_cl.count == DQB_CL_NODES;
    if (ok)
        redisSetTimeout(dqb_cl_adm_one, tv);
    for (int i = 0; ok && i < DQB_CL_NODES; i++) {
        dqb_cl_adm_cl[i] = thc_connect(dqb_cl_cl.nodes[i].r.port);
        ok = dqb_cl_adm_cl[i] != NULL &&
             dqb_cl_cl.nodes[i].role == THC_PRIMARY;
        if (ok)
            redisSetTimeout(dqb_cl_adm_cl[i], tv);
    }
    if (!ok) {
        dqb_fail("cluster: no admin connection to a node");
        dqb_cl_stop();
        return -1;
    }
    for (int s = 0; s < DQB_NCS_ALL; s++)
        memset(&dqb_cs[s], 0, sizeof(dqb_cs[s]));
    snprintf(dqb_cs[DQB_CS_ONE].uri, sizeof(dqb_cs[0].uri),
             "redis://127.0.0.1:%d", dqb_cl_one.port);
    snprintf(dqb_cs[DQB_CS_ONE16].uri, sizeof(dqb_cs[0].uri),
             "redis://127.0.0.1:%d?partitions=%d", dqb_cl_one.port,
             DQB_CL_PARTS);
    for (int s = DQB_CS_ONE; s <= DQB_CS_ONE16; s++) {
        dqb_cs[s].n = 1;
        dqb_cs[s].adm[0] = dqb_cl_adm_one;
        dqb_cs[s].srv[0] = &dqb_cl_one;
    }
    dqb_cs[DQB_CS_ONE16].parts = DQB_CL_PARTS;
    char cu[500];
    thc_cluster_uri(&dqb_cl_cl, cu, sizeof(cu));
    for (int s = DQB_CS_CL16; s <= DQB_CS_CLEVEN; s++) {
        dqb_cs[s].parts = s == DQB_CS_CL16 ? DQB_CL_PARTS : DQB_CL_EVEN;
        snprintf(dqb_cs[s].uri, sizeof(dqb_cs[0].uri), "%s?partitions=%d",
                 cu, dqb_cs[s].parts);
        dqb_cs[s].n = DQB_CL_NODES;
        for (int i = 0; i < DQB_CL_NODES; i++) {
            dqb_cs[s].adm[i] = dqb_cl_adm_cl[i];
            dqb_cs[s].srv[i] = &dqb_cl_cl.nodes[i].r;
        }
    }
    dqb_cl_shares(DQB_CL_PARTS, dqb_cl_share);
    dqb_cl_shares(DQB_CL_EVEN, dqb_cl_share_even);
    return 0;
}

static dq_client *dqb_cl_open(int s) {
    dq_client *c = NULL;
    if (dq_open(dqb_cs[s].uri, NULL, &c) != 0) {
        dqb_fail("cluster: dq_open %s: %s", dqb_cs[s].uri, dq_errmsg(c));
        dq_close(c);
        return NULL;
    }
    return c;
}

/* Loads the scripts this client runs on every node (a first call answers
 * NOSCRIPT and is sent again as EVAL) and its slot map and partition
 * check, then empties the nodes.  push: push_batch of 1000; poll: also a
 * drain of them. */
static void dqb_cl_warm(int s, dq_client *c, int poll) {
    uint64_t seed = 3;
    dqb_fill(c, 1000, 1000, 16, poll ? 0 : 3600000, 0, &seed);
    while (poll) {
        dq_jobs *js = NULL;
        int n = dq_poll(c, DQB_QUEUE, DQ_POLL_MAX, DQB_LEASE_MS, &js, NULL);
        if (n > 0)
            dqb_ack_all(c, js);
        dq_jobs_free(js);
        if (n <= 0)
            break;
    }
    dq_stats(c, DQB_QUEUE, NULL, NULL, NULL, NULL, NULL);
    dqb_cl_flush(s);
}

/* Start of a throughput phase of setup s: *m zeroed, the nodes emptied,
 * then a client of the setup warmed up by dqb_cl_warm; NULL if none. */
static dq_client *dqb_cl_phase_client(int s, int poll, dqb_cl_meas *m) {
    memset(m, 0, sizeof(*m));
    dqb_cl_flush(s);
    dq_client *cl = dqb_cl_open(s);
    if (cl != NULL)
        dqb_cl_warm(s, cl, poll);
    return cl;
}

/* ---- the limit of the run: redis-benchmark on the single node --------- */

static double dqb_cl_limit(const char *sha, int clients, int pipeline,
                           long n) {
    char port[16];
    snprintf(port, sizeof(port), "%d", dqb_cl_one.port);
    char *server[] = {"-h", "127.0.0.1", "-p", port, NULL};
    dqb_cl_flush(DQB_CS_ONE);
    double v = dqb_limit_ops(server, sha, clients, pipeline, n, 0);
    dqb_cl_flush(DQB_CS_ONE);
    return v;
}

static void dqb_cl_limits(const dqb_cfg *c) {
    char sha[48];
    dqb_lim_load_script(dqb_cl_adm_one, sha, sizeof(sha));
    dqb_s_add(&dqb_cl_lim_p16, dqb_cl_limit(sha, 50, 16, c->lim_n_p16));
    dqb_s_add(&dqb_cl_lim_c1, dqb_cl_limit(sha, 1, 1, c->lim_n_c1));
}

/* ---- throughput phases ------------------------------------------------ */

/* push_batch of 1000 (batch 1000) or one dq_push per job (batch 1) of n
 * far-future jobs, as scen_push.c does. */
static void dqb_cl_push(int s, int batch, long n, dqb_cl_meas *m) {
    dq_client *cl = dqb_cl_phase_client(s, 0, m);
    if (cl == NULL)
        return;
    uint64_t seed = 7;
    dqb_cl_mark mk;
    dqb_cl_begin(s, &mk);
    dqb_push_far(cl, n, batch, &seed);
    dqb_cl_end(s, &mk, n, m);
    int64_t sch = 0;
    if (dq_stats(cl, DQB_QUEUE, &sch, NULL, NULL, NULL, NULL) != 0 || sch != n)
        dqb_fail("cluster (%s): push batch %d: %" PRId64 " scheduled, "
                 "expected %ld", dqb_cs_name[s], batch, sch, n);
    dq_close(cl);
}

/* The consumer of a drain: polls max 1000 and acks each poll with one
 * ack_batch until n jobs are acked, nothing more is due or secs passed
 * (a FAIL line if a call failed).  Returns the jobs acked. */
static long dqb_cl_drain_n(dq_client *cl, long n, int64_t secs) {
    long got = 0;
    int64_t deadline = dqb_mono_ns() + secs * 1000000000;
    while (got < n && dqb_mono_ns() < deadline) {
        dq_jobs *js = NULL;
        int64_t next = 0;
        int k = dq_poll(cl, DQB_QUEUE, DQ_POLL_MAX, DQB_LEASE_MS, &js, &next);
        if (k < 0) {
            dqb_fail("cluster: drain: dq_poll: %s", dq_errmsg(cl));
            break;
        }
        if (k > 0 && dqb_ack_all(cl, js) != k) {
            dq_jobs_free(js);
            break;
        }
        dq_jobs_free(js);
        got += k;
        if (k == 0 && next != 0)
            break; /* nothing due, nothing more to come */
    }
    return got;
}

/* n due jobs, then one consumer (this process) polls max 1000 and acks
 * each poll with one ack_batch until nothing is left. */
static void dqb_cl_drain(int s, long n, dqb_cl_meas *m) {
    dq_client *cl = dqb_cl_phase_client(s, 1, m);
    if (cl == NULL)
        return;
    uint64_t seed = 11;
    dqb_fill(cl, n, 1000, 16, 0, 0, &seed);
    dq_stats(cl, DQB_QUEUE, NULL, NULL, NULL, NULL, NULL);
    dqb_cl_mark mk;
    dqb_cl_begin(s, &mk);
    long got = dqb_cl_drain_n(cl, n, 120);
    dqb_cl_end(s, &mk, n, m);
    if (got != n)
        dqb_fail("cluster (%s): drain: %ld jobs acked, expected %ld",
                 dqb_cs_name[s], got, n);
    dqb_expect_empty(cl, "cluster drain");
    dq_close(cl);
}

/* ---- lateness --------------------------------------------------------- */

/* Sleeps until CLOCK_MONOTONIC reaches t_ns. */
static void dqb_cl_sleep_until(int64_t t_ns) {
    struct timespec ts = {(time_t)(t_ns / 1000000000),
                          (long)(t_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
           EINTR)
        ;
}

/* One lateness run of setup s: p50, p99, max into *p (NAN if it failed). */
static void dqb_cl_lateness(const dqb_cfg *c, int run, int s, dqb_pctl *p,
                            dqb_cl_meas *m) {
    long n = c->cl_late_n;
    int64_t pace_ns = (int64_t)c->cl_late_pace_ms * 1000000;
    int64_t bound_ms = n * c->cl_late_pace_ms + DQB_CL_LATE_BASE +
                       DQB_CL_LATE_SPREAD + 10000;
    char what[64];
    snprintf(what, sizeof(what), "cluster lateness (%s)", dqb_cs_name[s]);
    p->p50 = p->p95 = p->p99 = p->max = NAN;
    memset(m, 0, sizeof(*m));
    dqb_cl_flush(s);
    /* From here: the consumer's first poll counts too (the clock
     * calibration in between sends TIME, not among the counted calls). */
    dqb_cl_mark mk;
    dqb_cl_begin(s, &mk);
    /* Every node runs on this machine's clock: node 0 stands for all. */
    dqb_late_run lr;
    if (dqb_late_begin(&lr, dqb_cs[s].adm[0], dqb_cs[s].uri, 0, n, 100,
                       bound_ms, what) != 0)
        return;
    dq_client *cl = dqb_cl_open(s);
    uint64_t seed = 2000 + (uint64_t)run;
    int64_t t0 = dqb_mono_ns();
    for (long i = 0; cl != NULL && i < n; i++) {
        dqb_cl_sleep_until(t0 + i * pace_ns);
        int64_t d = DQB_CL_LATE_BASE +
                    dqb_rng_range(&seed, DQB_CL_LATE_SPREAD + 1);
        if (dq_push(cl, DQB_QUEUE, dqb_payload, 16, d, NULL, 0, NULL, 0,
                    NULL) != 0) {
            dqb_fail("cluster lateness: dq_push: %s", dq_errmsg(cl));
            break;
        }
    }
    dqb_late_wait(&lr);
    dqb_cl_end(s, &mk, n, m);
    double u = dqb_late_end(&lr, n, what);
    dqb_expect_empty(cl, "cluster lateness");
    dq_close(cl);
    dqb_cl_late_unc = u > dqb_cl_late_unc ? u : dqb_cl_late_unc;
    if (lr.res->got > 0)
        *p = dqb_percentiles(lr.res->lat_ms, (size_t)lr.res->got);
    dqb_late_free(&lr);
}

/* ---- deterministic: Redis instructions per job (callgrind) ------------ */

/* The same servers, each under callgrind (bench/cg-redis.sh, through
 * DQ_REDIS_SERVER: only what the clients' commands cost is counted, from
 * reading a command to writing its reply); every setup of DQB_NCS_ALL:
 * cl_cg_drain_n due jobs pushed (not counted: they also take every
 * partition's hashes past their listpack sizes), then the two phases of a
 * job's life, each counted on every node between a vgdb "zero" and
 * "dump": push_batch of 1000 of cl_cg_n far-future jobs, and the drain of
 * the due jobs, as the timed drain does.  Ids are the bench's own, so
 * every node gets the same jobs every time.  The single node's setups run
 * in a child process while this one counts the cluster's: a count does not
 * depend on the timing. */
static double (*dqb_cg_ir)[2][DQB_CL_NODES]; /* [setup]: Ir per job, shared */
static int dqb_cg_dumps[1 + DQB_CL_NODES]; /* dumps so far per server */
static int dqb_cg_ok;                        /* counted (rows follow) */

/* Index of a server in dqb_cg_dumps: 0 the single node, 1.. the cluster's. */
static int dqb_cg_slot(const th_redis *r) {
    for (int i = 0; i < DQB_CL_NODES; i++)
        if (r == &dqb_cl_cl.nodes[i].r)
            return 1 + i;
    return 0;
}

/* Sends callgrind's monitor command cmd ("zero", "dump", ...) to each node of
 * setup s with vgdb; for "dump", stores each node's Ir / jobs into ir.
 * 0, or -1 (and a FAIL line). */
static int dqb_cg_ctl(int s, const char *cmd, long jobs, double *ir) {
    char vg[4096], pidarg[32], out[600], path[600], desc[128];
    if (th_find_bin("DQB_VGDB", "vgdb", "/usr/bin/vgdb", vg, sizeof(vg)) != 0)
        return -1;
    for (int i = 0; i < dqb_cs[s].n; i++) {
        th_redis *r = dqb_cs[s].srv[i];
        snprintf(pidarg, sizeof(pidarg), "--pid=%ld", (long)r->pid);
        snprintf(out, sizeof(out), "%s/vgdb.out", r->dir);
        char *argv[] = {vg, pidarg, (char *)cmd, NULL};
        int st = 0;
        pid_t p = th_spawn(argv, out);
        if (p <= 0 || !th_proc_wait(p, 60000, &st) || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0) {
            dqb_fail("cluster callgrind: vgdb %s on pid %ld failed (see %s)",
                     cmd, (long)r->pid, out);
            return -1;
        }
        if (strcmp(cmd, "dump") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/cg.out.%d", r->dir,
                 ++dqb_cg_dumps[dqb_cg_slot(r)]);
        ir[i] = dqb_cg_total(path, desc, sizeof(desc)) / (double)jobs;
        if (isnan(ir[i])) {
            dqb_fail("cluster callgrind: no count in %s", path);
            return -1;
        }
    }
    return 0;
}

/* Setup s's job's life under callgrind into dqb_cg_ir[s]. 0 or -1. */
static int dqb_cg_setup(const dqb_cfg *c, int s) {
    int64_t t0 = dqb_mono_ns();
    dqb_cl_meas unused;
    dq_client *cl = dqb_cl_phase_client(s, 1, &unused);
    if (cl == NULL)
        return -1;
    long n = c->cl_cg_n, nd = c->cl_cg_drain_n, idn = 0;
    uint64_t seed = 17;
    int rc = dqb_fill_ids(cl, DQB_QUEUE, nd, 1000, 16, 0, 0, &seed, "d",
                          &idn);
    idn = 0;
    rc = rc ? rc : dqb_cg_ctl(s, "instrumentation on", n, NULL);
    rc = rc ? rc : dqb_cg_ctl(s, "zero", n, NULL);
    rc = rc ? rc : dqb_fill_ids(cl, DQB_QUEUE, n, 1000, 16, 3600000,
                                86400000, &seed, "p", &idn);
    rc = rc ? rc : dqb_cg_ctl(s, "dump", n, dqb_cg_ir[s][0]);
    rc = rc ? rc : dqb_cg_ctl(s, "zero", nd, NULL);
    long got = rc ? 0 : dqb_cl_drain_n(cl, nd, 900); /* callgrind: slow */
    rc = rc ? rc : dqb_cg_ctl(s, "dump", nd, dqb_cg_ir[s][1]);
    rc = rc ? rc : dqb_cg_ctl(s, "instrumentation off", nd, NULL);
    int64_t sch = -1, inf = -1;
    if (rc == 0 && (got != nd ||
                    dq_stats(cl, DQB_QUEUE, &sch, NULL, &inf, NULL, NULL) ||
                    sch != n || inf != 0)) {
        dqb_fail("cluster callgrind (%s): %ld acked of %ld, %" PRId64
                 " scheduled, %" PRId64 " in flight afterwards",
                 dqb_cs_name[s], got, nd, sch, inf);
        rc = -1;
    }
    dq_close(cl);
    dqb_cl_flush(s);
    dqb_log("cluster callgrind, %s: %s in %.1f s", dqb_cs_name[s],
            rc ? "failed" : "counted", (double)(dqb_mono_ns() - t0) / 1e9);
    return rc;
}

/* Setups from..to (0 each counted), or -1. */
static int dqb_cg_setups(const dqb_cfg *c, int from, int to) {
    int rc = 0;
    for (int s = from; s <= to && rc == 0; s++)
        rc = dqb_cg_setup(c, s);
    return rc;
}

/* The whole count: servers under callgrind, every setup, servers stopped. */
static void dqb_cg_count(const dqb_cfg *c) {
    if (dqb_cg_ir == NULL)
        dqb_cg_ir = dqb_shared_alloc(sizeof(*dqb_cg_ir) * DQB_NCS_ALL);
    if (dqb_cg_ir == NULL) {
        dqb_fail("cluster callgrind: no shared memory");
        return;
    }
    char wrap[4096];
    snprintf(wrap, sizeof(wrap), "%s/cg-redis.sh", DQB_SRCDIR);
    const char *old = getenv("DQ_REDIS_SERVER");
    char *keep = old ? strdup(old) : NULL;
    setenv("DQB_CG_SERVER", keep ? keep : "redis-server", 1);
    setenv("DQ_REDIS_SERVER", wrap, 1);
    memset(dqb_cg_dumps, 0, sizeof(dqb_cg_dumps));
    int64_t t0 = dqb_mono_ns();
    int rc = dqb_cl_start();
    if (keep)
        setenv("DQ_REDIS_SERVER", keep, 1);
    else
        unsetenv("DQ_REDIS_SERVER");
    free(keep);
    if (rc != 0)
        return;
    dqb_log("cluster: the servers again, under callgrind (%s): started in "
            "%.1f s", wrap, (double)(dqb_mono_ns() - t0) / 1e9);
    fflush(NULL);
    pid_t kid = fork();
    if (kid == 0)
        _exit(dqb_cg_setups(c, DQB_CS_ONE, DQB_CS_ONE16) || dqb_failed);
    if (kid < 0) /* then one after the other */
        rc = dqb_cg_setups(c, DQB_CS_ONE, DQB_CS_ONE16);
    rc |= dqb_cg_setups(c, DQB_CS_CL16, DQB_CS_CLEVEN);
    int st = 0;
    if (kid > 0 && (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) ||
                    WEXITSTATUS(st) != 0)) {
        dqb_fail("cluster callgrind: the single node's count failed");
        rc = -1;
    }
    dqb_cg_ok = rc == 0;
    for (int s = 0; s < DQB_NCS_ALL && dqb_cg_ok && dqb_cl_fig; s++)
        for (int ph = 0; ph < 2; ph++) {
            fprintf(dqb_cl_fig, "figures: callgrind | %-15s | %-18s | %ld "
                    "jobs | Ir/job by node", dqb_cs_name[s],
                    ph ? "drain max 1000" : "push_batch of 1000",
                    ph ? c->cl_cg_drain_n : c->cl_cg_n);
            for (int i = 0; i < dqb_cs[s].n; i++)
                fprintf(dqb_cl_fig, " %.0f", dqb_cg_ir[s][ph][i]);
            fprintf(dqb_cl_fig, "\n");
        }
    dqb_log("cluster callgrind: %.1f s in all",
            (double)(dqb_mono_ns() - t0) / 1e9);
    dqb_cl_stop();
}

/* ---- one run ---------------------------------------------------------- */

void dqb_scen_cluster_run(const dqb_cfg *c, int run) {
    char path[512];
    snprintf(path, sizeof(path), "%s/cluster-figures.txt", c->out);
    if (dqb_cl_fig == NULL) {
        dqb_cl_fig = fopen(path, "w");
        if (dqb_cl_fig)
            fprintf(dqb_cl_fig,
                    "# dqbench cluster: per run, setup and phase; server "
                    "us/job = INFO commandstats usec of the commands the "
                    "clients sent (script-internal commands left out), "
                    "server CPU = INFO cpu user+sys, client CPU = "
                    "getrusage of dqbench\n");
    }
    if (dqb_cl_start() != 0)
        return;
    if (dqb_cl_fig)
        fprintf(dqb_cl_fig, "figures: run %d | partitions per primary "
                            "%d/%d/%d | %s\n", run + 1, dqb_cl_share[0],
                dqb_cl_share[1], dqb_cl_share[2], dqb_cs[DQB_CS_CL16].uri);
    dqb_cl_limits(c);
    dqb_log("cluster: limit on 1 node (TCP): EVALSHA c50 P16 %.0f, c1 %.0f "
            "ops/s; partitions per primary %d/%d/%d",
            dqb_cl_lim_p16.v[dqb_cl_lim_p16.n - 1],
            dqb_cl_lim_c1.v[dqb_cl_lim_c1.n - 1], dqb_cl_share[0],
            dqb_cl_share[1], dqb_cl_share[2]);

    /* Phase after phase, the setups one after the other. */
    dqb_cl_meas m[DQB_NCP][DQB_NCS];
    for (int ph = 0; ph < DQB_NCP; ph++)
        for (int s = 0; s < DQB_NCS; s++) {
            if (ph == DQB_CP_PUSHB)
                dqb_cl_push(s, 1000, c->cl_pushb_n, &m[ph][s]);
            else if (ph == DQB_CP_PUSH1)
                dqb_cl_push(s, 1, c->cl_push1_n, &m[ph][s]);
            else
                dqb_cl_drain(s, c->cl_drain_n, &m[ph][s]);
            dqb_cl_meas *x = &m[ph][s];
            if (x->jobs == 0) {
                dqb_s_add(&dqb_cl_tput[ph][s], NAN);
                dqb_s_add(&dqb_cl_srv[ph][s], NAN);
                dqb_s_add(&dqb_cl_srvmax[ph][s], NAN);
                continue;
            }
            double v = (double)x->jobs / x->secs;
            dqb_s_add(&dqb_cl_tput[ph][s], v);
            dqb_s_add(&dqb_cl_srv[ph][s], dqb_cl_sum(s, x->usec, x->jobs));
            dqb_s_add(&dqb_cl_srvmax[ph][s],
                      dqb_cl_max(s, x->usec, x->jobs));
            dqb_cl_fig_line(run, s, dqb_cp_name[ph], x);
            dqb_log("cluster %s, %s: %.0f jobs/s (server %.2f us/job, "
                    "busiest node %.2f; client CPU %.2f us/job)",
                    dqb_cp_name[ph], dqb_cs_name[s], v,
                    dqb_cl_sum(s, x->usec, x->jobs),
                    dqb_cl_max(s, x->usec, x->jobs),
                    x->cli_us / (double)x->jobs);
        }

    /* A job's life: push_batch + drain. */
    for (int s = 0; s < DQB_NCS; s++) {
        const dqb_cl_meas *a = &m[DQB_CP_PUSHB][s], *b = &m[DQB_CP_DRAIN][s];
        double life = NAN, lmax = NAN, cpu = NAN, cli = NAN;
        if (a->jobs > 0 && b->jobs > 0) {
            life = lmax = cpu = 0;
            for (int i = 0; i < dqb_cs[s].n; i++) {
                double u = a->usec[i] / (double)a->jobs +
                           b->usec[i] / (double)b->jobs;
                life += u;
                lmax = u > lmax ? u : lmax;
                cpu += a->cpu_us[i] / (double)a->jobs +
                       b->cpu_us[i] / (double)b->jobs;
            }
            cli = a->cli_us / (double)a->jobs + b->cli_us / (double)b->jobs;
        }
        dqb_s_add(&dqb_cl_life[s], life);
        dqb_s_add(&dqb_cl_lifemax[s], lmax);
        dqb_s_add(&dqb_cl_cpu[s], cpu);
        dqb_s_add(&dqb_cl_cli[s], cli);
        dqb_s_add(&dqb_cl_model[s], 1e6 / lmax);
        if (dqb_cl_fig)
            fprintf(dqb_cl_fig,
                    "figures: run %d | %-15s | a job's life (push_batch + "
                    "drain): server %.3f us (busiest node %.3f: modelled "
                    "%.0f jobs/s on %d core%s), server CPU %.3f us, client "
                    "CPU %.3f us\n", run + 1, dqb_cs_name[s], life, lmax,
                    1e6 / lmax, dqb_cs[s].n, dqb_cs[s].n > 1 ? "s" : "", cpu,
                    cli);
    }

    for (int s = 0; s < DQB_NCS; s++) {
        dqb_pctl p;
        dqb_cl_meas lm;
        dqb_cl_lateness(c, run, s, &p, &lm);
        dqb_s_add(&dqb_cl_late[s][0], p.p50);
        dqb_s_add(&dqb_cl_late[s][1], p.p99);
        dqb_s_add(&dqb_cl_late[s][2], p.max);
        if (dqb_cl_fig)
            fprintf(dqb_cl_fig, "figures: run %d | %-15s | lateness (%ld "
                                "jobs, one every %d ms, due %d..%d ms on): "
                                "p50 %.3f p95 %.3f p99 %.3f max %.3f ms | "
                                "script calls/job %.2f (push, polls, acks "
                                "of producer and consumer)\n",
                    run + 1, dqb_cs_name[s], c->cl_late_n,
                    c->cl_late_pace_ms, DQB_CL_LATE_BASE,
                    DQB_CL_LATE_BASE + DQB_CL_LATE_SPREAD, p.p50, p.p95,
                    p.p99, p.max,
                    lm.jobs > 0 ? dqb_cl_sum(s, lm.calls, lm.jobs) : NAN);
        dqb_log("cluster lateness, %s: p50 %.2f p99 %.2f max %.2f ms",
                dqb_cs_name[s], p.p50, p.p99, p.max);
    }
    if (dqb_cl_fig)
        fflush(dqb_cl_fig);
    dqb_cl_stop();
}

/* ---- rows of the callgrind count -------------------------------------- */

/* Ir of a job's life (push_batch + drain) on node i of setup s. */
static double dqb_cg_life(int s, int i) {
    return dqb_cg_ir[s][0][i] + dqb_cg_ir[s][1][i];
}

/* Summed over the nodes of setup s (busiest = 0), or its busiest node's. */
static double dqb_cg_of(int s, int busiest) {
    double t = 0;
    for (int i = 0; i < dqb_cs[s].n; i++)
        t = busiest ? fmax(t, dqb_cg_life(s, i)) : t + dqb_cg_life(s, i);
    return t;
}

/* A row of Ir per job, beside one node's when one is a number. */
static dqb_row *dqb_cg_row(const char *name, double v, double one) {
    dqb_row *rw = dqb_add_row(name);
    dqb_fmt_int(rw->value, sizeof(rw->value), v);
    snprintf(rw->unit, sizeof(rw->unit), "Ir");
    snprintf(rw->spread, sizeof(rw->spread), "counted once");
    if (!isnan(one)) {
        snprintf(rw->limit, sizeof(rw->limit), "1 node");
        dqb_fmt_int(rw->lval, sizeof(rw->lval), one);
        snprintf(rw->ratio, sizeof(rw->ratio), "%.3f", v / one);
    }
    return rw;
}

static void dqb_cg_rows(const dqb_cfg *c) {
    char title[400];
    snprintf(title, sizeof(title),
             "cluster, callgrind: Redis instructions per job's life (read "
             "to reply), no timing noise; push_batch of %ld onto %ld due "
             "jobs + their drain; model: 1 node / busiest", c->cl_cg_n,
             c->cl_cg_drain_n);
    dqb_add_section(dqb_cg_ok ? title
                              : "cluster, callgrind: Redis instructions per "
                                "job's life");
    if (!dqb_cg_ok) {
        dqb_row *rw = dqb_add_row("(skipped)");
        snprintf(rw->status, sizeof(rw->status), "%s",
                 !c->callgrind ? "--no-callgrind"
                 : c->cl_cg_n > 0 ? "failed (see above)" : "smoke run");
        return;
    }
    double one = dqb_cg_life(DQB_CS_ONE, 0);
    dqb_cg_row("instructions, 1 node", one, NAN);
    dqb_cg_row("instructions, 1 node 16p", dqb_cg_life(DQB_CS_ONE16, 0), one);
    for (int s = DQB_CS_CL16; s <= DQB_CS_CLEVEN; s++) {
        const int *sh = s == DQB_CS_CL16 ? dqb_cl_share : dqb_cl_share_even;
        char name[80];
        snprintf(name, sizeof(name), "instructions, %s (sum)",
                 dqb_cs_name[s]);
        dqb_row *rw = dqb_cg_row(name, dqb_cg_of(s, 0), one);
        if (s == DQB_CS_CL16)
            dqb_set_target(rw, "<= 1.2x", dqb_cg_of(s, 0) / one, 1.2, 0);
        for (int i = 0; i < dqb_cs[s].n; i++) {
            snprintf(name, sizeof(name), "  primary %d (%d of %d partitions)",
                     i + 1, sh[i], dqb_cs[s].parts);
            dqb_cg_row(name, dqb_cg_life(s, i), one);
        }
        int most = 0;
        for (int i = 0; i < DQB_CL_NODES; i++)
            most = sh[i] > most ? sh[i] : most;
        snprintf(name, sizeof(name), "modelled %dp, 1 node / busiest (cap "
                 "%.2f)", dqb_cs[s].parts, (double)dqb_cs[s].parts / most);
        rw = dqb_add_row(name);
        double mr = one / dqb_cg_of(s, 1);
        snprintf(rw->value, sizeof(rw->value), "%.2f", mr);
        snprintf(rw->unit, sizeof(rw->unit), "x");
        snprintf(rw->spread, sizeof(rw->spread), "counted once");
        dqb_set_target(rw, ">= 2.5x", mr, 2.5, 1);
        if (dqb_cl_fig)
            fprintf(dqb_cl_fig, "figures: callgrind | %s | a job's life: "
                    "Ir sum %.0f (1 node %.0f: %.3fx), busiest %.0f, "
                    "modelled %.3fx (cap %.3fx)\n", dqb_cs_name[s],
                    dqb_cg_of(s, 0), one, dqb_cg_of(s, 0) / one,
                    dqb_cg_of(s, 1), mr, (double)dqb_cs[s].parts / most);
    }
}

/* ---- rows ------------------------------------------------------------- */

/* A row compared with the 1 node setup of the same runs. */
static dqb_row *dqb_cl_vs_one(const char *name, const dqb_series *v,
                              const dqb_series *one, const char *unit,
                              const char *fmt) {
    dqb_row *rw = dqb_val_row(name, v, unit, fmt);
    snprintf(rw->limit, sizeof(rw->limit), "1 node");
    snprintf(rw->lval, sizeof(rw->lval), fmt, dqb_s_med(one));
    snprintf(rw->ratio, sizeof(rw->ratio), "%.2f", dqb_s_ratio(v, one));
    return rw;
}

void dqb_scen_cluster_rows(const dqb_cfg *c) {
    if (c->callgrind && c->cl_cg_n > 0)
        dqb_cg_count(c);
    char title[400];
    snprintf(title, sizeof(title),
             "cluster: 16 partitions (16p) over 3 local primaries (%d/%d/%d "
             "partitions each) vs one redis-server; clients on TCP "
             "127.0.0.1; %ld CPUs: overhead, not speed-up",
             dqb_cl_share[0], dqb_cl_share[1], dqb_cl_share[2],
             sysconf(_SC_NPROCESSORS_ONLN));
    dqb_add_section(title);
    dqb_ops_row("limit 1 node, EVALSHA -c 50 -P 16", &dqb_cl_lim_p16);
    dqb_ops_row("limit 1 node, EVALSHA -c 1 -P 1", &dqb_cl_lim_c1);
    for (int ph = 0; ph < DQB_NCP; ph++)
        for (int s = 0; s < DQB_NCS; s++) {
            char name[80];
            snprintf(name, sizeof(name), "%s, %s", dqb_cp_name[ph],
                     dqb_cs_name[s]);
            const dqb_series *lim =
                ph == DQB_CP_PUSH1 ? &dqb_cl_lim_c1 : &dqb_cl_lim_p16;
            dqb_tput_row(name, &dqb_cl_tput[ph][s],
                         ph == DQB_CP_PUSH1 ? "EVALSHA -c 1 -P 1"
                                            : "EVALSHA -c 50 -P 16",
                         lim);
            if (s != DQB_CS_CL16) {
                dqb_srv_row("  server time per job", &dqb_cl_srv[ph][s]);
            } else {
                dqb_row *rw = dqb_val_row("  server time per job, 3 nodes",
                                          &dqb_cl_srv[ph][s], "us", "%.2f");
                double mx = dqb_s_med(&dqb_cl_srvmax[ph][s]);
                snprintf(rw->status, sizeof(rw->status),
                         "busiest %.2f us = %.0fk/s on 3 cores", mx,
                         1e3 / mx);
            }
        }

    dqb_add_section("cluster: us per job of push_batch + drain (a job's "
                    "life); server time: INFO commandstats, CPU: INFO cpu; "
                    "model: 1e6 / busiest node's server time, clients not "
                    "the limit");
    for (int s = 0; s < DQB_NCS; s++) {
        char name[80];
        snprintf(name, sizeof(name), "client CPU, %s", dqb_cs_name[s]);
        if (s == DQB_CS_ONE)
            dqb_val_row(name, &dqb_cl_cli[s], "us", "%.2f");
        else
            dqb_cl_vs_one(name, &dqb_cl_cli[s], &dqb_cl_cli[DQB_CS_ONE], "us",
                          "%.2f");
    }
    for (int s = 0; s < DQB_NCS; s++) {
        char name[80];
        snprintf(name, sizeof(name), "server time, %s%s",
                 dqb_cs_name[s], s == DQB_CS_CL16 ? " (sum)" : "");
        if (s == DQB_CS_ONE) {
            dqb_val_row(name, &dqb_cl_life[s], "us", "%.2f");
            continue;
        }
        dqb_row *rw = dqb_cl_vs_one(name, &dqb_cl_life[s],
                                    &dqb_cl_life[DQB_CS_ONE], "us", "%.2f");
        if (s == DQB_CS_CL16)
            dqb_set_target(rw, "<= 1.2x",
                           dqb_s_ratio(&dqb_cl_life[s],
                                       &dqb_cl_life[DQB_CS_ONE]),
                           1.2, 0);
    }
    dqb_cl_vs_one("  busiest primary of the 3", &dqb_cl_lifemax[DQB_CS_CL16],
                  &dqb_cl_life[DQB_CS_ONE], "us", "%.2f");
    for (int s = 0; s < DQB_NCS; s++) {
        char name[80];
        snprintf(name, sizeof(name), "server CPU, %s%s",
                 dqb_cs_name[s], s == DQB_CS_CL16 ? " (sum)" : "");
        if (s == DQB_CS_ONE)
            dqb_val_row(name, &dqb_cl_cpu[s], "us", "%.2f");
        else
            dqb_cl_vs_one(name, &dqb_cl_cpu[s], &dqb_cl_cpu[DQB_CS_ONE], "us",
                          "%.2f");
    }
    dqb_tput_row("modelled, 1 node on 1 core", &dqb_cl_model[DQB_CS_ONE],
                 NULL, NULL);
    dqb_row *rw = dqb_tput_row("modelled, 3 primaries on 3 cores",
                      &dqb_cl_model[DQB_CS_CL16], NULL, NULL);
    snprintf(rw->limit, sizeof(rw->limit), "1 node");
    dqb_fmt_int(rw->lval, sizeof(rw->lval),
                dqb_s_med(&dqb_cl_model[DQB_CS_ONE]));
    double mr = dqb_s_ratio(&dqb_cl_model[DQB_CS_CL16],
                            &dqb_cl_model[DQB_CS_ONE]);
    snprintf(rw->ratio, sizeof(rw->ratio), "%.2f", mr);
    dqb_set_target(rw, ">= 2.5x", mr, 2.5, 1);
    dqb_cg_rows(c);

    char lt[300];
    snprintf(lt, sizeof(lt),
             "cluster: lateness at light load, %ld jobs, one pushed every %d "
             "ms, due %d..%d ms after its push; 1 consumer process in "
             "dq_poll_wait (max 100); receive - due, server clock",
             c->cl_late_n, c->cl_late_pace_ms, DQB_CL_LATE_BASE,
             DQB_CL_LATE_BASE + DQB_CL_LATE_SPREAD);
    dqb_add_section(lt);
    static const char *const pn[3] = {"p50", "p99", "max"};
    for (int s = 0; s < DQB_NCS; s++)
        for (int i = 0; i < 3; i++) {
            char name[80];
            snprintf(name, sizeof(name), "lateness %s, %s", pn[i],
                     dqb_cs_name[s]);
            dqb_late_row(name, &dqb_cl_late[s][i], dqb_cl_late_unc,
                         i == 1 && s != DQB_CS_ONE);
        }

    if (dqb_cl_fig) {
        fprintf(dqb_cl_fig,
                "figures: medians of %d run(s) | a job's life: server us 1 "
                "node %.3f, 1 node 16p %.3f, 3 primaries 16p %.3f (busiest "
                "%.3f) | cluster / 1 node %.2f (target <= 1.2) | modelled "
                "jobs/s 1 node %.0f, 3 primaries %.0f, ratio %.2f (target >= "
                "2.5) | lateness p99 1 node 16p %.2f ms, 3 primaries 16p "
                "%.2f ms (target <= 5)\n",
                c->runs, dqb_s_med(&dqb_cl_life[DQB_CS_ONE]),
                dqb_s_med(&dqb_cl_life[DQB_CS_ONE16]),
                dqb_s_med(&dqb_cl_life[DQB_CS_CL16]),
                dqb_s_med(&dqb_cl_lifemax[DQB_CS_CL16]),
                dqb_s_ratio(&dqb_cl_life[DQB_CS_CL16],
                            &dqb_cl_life[DQB_CS_ONE]),
                dqb_s_med(&dqb_cl_model[DQB_CS_ONE]),
                dqb_s_med(&dqb_cl_model[DQB_CS_CL16]), mr,
                dqb_s_med(&dqb_cl_late[DQB_CS_ONE16][1]),
                dqb_s_med(&dqb_cl_late[DQB_CS_CL16][1]));
        fclose(dqb_cl_fig);
        dqb_cl_fig = NULL;
    }
}
