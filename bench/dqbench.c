/*
 * bench/dqbench.c - how close libdelayq runs to Redis's own limit.
 *
 * Starts its own redis-server (tests/harness.c: default configuration,
 * save "", appendonly no, a private unix socket in a temp dir, stopped by
 * pid), measures Redis's raw limit with redis-benchmark on the same socket,
 * then every libdelayq scenario, and prints ONE table on stdout
 * (progress goes to stderr).  Data for the plots and the server-side
 * profiles go to --out DIR.  Usually run through bench/run.sh; method and
 * results in bench/RESULTS.md.
 *
 *   dqbench [--quick | --smoke] [--runs N] [--out DIR] [--max-backlog N]
 *           [--no-callgrind] [--only a,b,...]
 *   dqbench --cost-worker URI N     (internal: runs under callgrind)
 *
 * Each run measures the limits, then push, drain, end to end and lateness
 * (the sync dq_poll_wait loop, and the libevent consumer when built with
 * DQ_BENCH_EVENT), then a partitioned queue over a local 3-primary Redis
 * Cluster against one node (scen_cluster.c: servers of its own, started
 * and stopped within each run), then K consumers on one queue (scen_herd.c:
 * 1..100 processes or threads, light load and backlog drain, and one
 * consumer of each kind); a ratio compares figures of the same run,
 * and the table shows medians over --runs runs (default 3).  Memory,
 * client cost and backlog run once (backlog interleaves its queue with a
 * 1k-job queue).
 * Every scenario checks that each job was acked exactly once.
 *
 * This file is main: options, the server, the order of the scenarios
 * (listed in scenarios.h, one scen_*.c each) and the output files.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"
#include "scenarios.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Prints the usage and the scenarios --only takes. */
static void dqb_usage(FILE *f) {
    fputs("usage: dqbench [--quick | --smoke] [--runs N] [--out DIR]\n"
          "               [--max-backlog N] [--no-callgrind] [--only LIST]\n"
          "  LIST: comma-separated scenarios (default: all):\n",
          f);
    for (size_t i = 0; i < DQB_NSCENARIOS; i++)
        fprintf(f, "    %-9s %s\n", dqb_scenarios[i].name,
                dqb_scenarios[i].desc);
}

/* The scenario named by len bytes at name, or NULL. */
static const dqb_scenario *dqb_find(const char *name, size_t len) {
    for (size_t i = 0; i < DQB_NSCENARIOS; i++)
        if (strlen(dqb_scenarios[i].name) == len &&
            memcmp(dqb_scenarios[i].name, name, len) == 0)
            return &dqb_scenarios[i];
    return NULL;
}

/* Whether --only selects scenario s (no --only: every one). */
static int dqb_want(const dqb_cfg *c, const dqb_scenario *s) {
    if (c->only == NULL)
        return 1;
    for (const char *p = c->only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (dqb_find(p, len) == s)
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

/* Checks that every name of --only is a scenario; complains if not. */
static int dqb_only_valid(const char *only) {
    for (const char *p = only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && dqb_find(p, len) == NULL) {
            fprintf(stderr, "dqbench: --only: no scenario '%.*s'\n",
                    (int)len, p);
            return 0;
        }
        p += len + (e != NULL);
    }
    return 1;
}

/* Sets the sizes of every scenario for the mode (full, quick, smoke). */
static void dqb_cfg_sizes(dqb_cfg *c) {
    switch (c->mode) {
    case 0: /* full */
        c->lim_n_p1 = 200000, c->lim_n_p16 = 400000, c->lim_n_c1 = 60000;
        c->push1_n = 30000;
        c->pushb_n[0] = 200000, c->pushb_n[1] = 300000, c->pushb_n[2] = 500000;
        c->drain_n = 50000;
        c->e2e_n = 300000;
        c->late_n = 2000, c->late_base_ms = 1000, c->late_spread_ms = 2000;
        c->mem_n = 1000000;
        c->lay_n = 1000000, c->lay_cancel_n = 10000, c->lay_drain_n = 100000;
        c->bl_ops = 2000;
        c->cost_n = 2000;
        c->cl_pushb_n = 200000, c->cl_push1_n = 30000, c->cl_drain_n = 100000;
        c->cl_late_n = 1000, c->cl_late_pace_ms = 5;
        c->cl_cg_n = 4000, c->cl_cg_drain_n = 50000;
        c->herd_light_n = 2000, c->herd_light_base_ms = 300;
        c->herd_light_spread_ms = 2000;
        c->herd_drain_n = 20000, c->herd_kmax = 100;
        break;
    case 1: /* quick */
        c->lim_n_p1 = 100000, c->lim_n_p16 = 200000, c->lim_n_c1 = 30000;
        c->push1_n = 10000;
        c->pushb_n[0] = 50000, c->pushb_n[1] = 100000, c->pushb_n[2] = 200000;
        c->drain_n = 50000;
        c->e2e_n = 200000;
        c->late_n = 2000, c->late_base_ms = 1000, c->late_spread_ms = 2000;
        c->mem_n = 100000;
        c->lay_n = 200000, c->lay_cancel_n = 10000, c->lay_drain_n = 100000;
        c->bl_ops = 1000;
        c->cost_n = 500;
        c->cl_pushb_n = 50000, c->cl_push1_n = 10000, c->cl_drain_n = 50000;
        c->cl_late_n = 400, c->cl_late_pace_ms = 5;
        c->cl_cg_n = 4000, c->cl_cg_drain_n = 50000; /* as full: exact */
        c->herd_light_n = 2000, c->herd_light_base_ms = 300;
        c->herd_light_spread_ms = 2000;
        c->herd_drain_n = 5000, c->herd_kmax = 32;
        break;
    default: /* smoke: tiny, checks that everything runs and adds up */
        c->lim_n_p1 = 2000, c->lim_n_p16 = 4000, c->lim_n_c1 = 1000;
        c->push1_n = 300;
        c->pushb_n[0] = 1000, c->pushb_n[1] = 2000, c->pushb_n[2] = 3000;
        c->drain_n = 2000;
        c->e2e_n = 2000;
        c->late_n = 100, c->late_base_ms = 200, c->late_spread_ms = 300;
        c->mem_n = 3000;
        c->lay_n = 3000, c->lay_cancel_n = 300, c->lay_drain_n = 3000;
        c->bl_ops = 200;
        c->cost_n = 100;
        c->cl_pushb_n = 2000, c->cl_push1_n = 200, c->cl_drain_n = 2000;
        c->cl_late_n = 40, c->cl_late_pace_ms = 5;
        c->herd_light_n = 100, c->herd_light_base_ms = 200;
        c->herd_light_spread_ms = 300;
        c->herd_drain_n = 500, c->herd_kmax = 8;
        break;
    }
}

/* Parses the options into c; returns -1 to go on, else the exit status. */
static int dqb_parse_args(dqb_cfg *c, int argc, char **argv) {
    memset(c, 0, sizeof(*c));
    c->runs = -1;
    c->out = ".";
    c->max_backlog = -1;
    c->callgrind = 1;
    c->self = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0)
            c->mode = 1;
        else if (strcmp(a, "--smoke") == 0)
            c->mode = 2;
        else if (strcmp(a, "--no-callgrind") == 0)
            c->callgrind = 0;
        else if (strcmp(a, "--runs") == 0 && i + 1 < argc)
            c->runs = atoi(argv[++i]);
        else if (strcmp(a, "--out") == 0 && i + 1 < argc)
            c->out = argv[++i];
        else if (strcmp(a, "--max-backlog") == 0 && i + 1 < argc)
            c->max_backlog = atoll(argv[++i]);
        else if (strcmp(a, "--only") == 0 && i + 1 < argc)
            c->only = argv[++i];
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            dqb_usage(stdout);
            return 0;
        } else {
            dqb_usage(stderr);
            return 2;
        }
    }
    if (c->only != NULL && !dqb_only_valid(c->only))
        return 2;
    if (c->runs < 0)
        c->runs = c->mode == 0 ? 3 : 1;
    if (c->runs < 1 || c->runs > DQB_MAXRUNS) {
        fprintf(stderr, "dqbench: --runs must be 1..%d\n", DQB_MAXRUNS);
        return 2;
    }
    if (c->max_backlog < 0)
        c->max_backlog = c->mode == 0 ? 10000000 : c->mode == 1 ? 100000 : 1000;
    dqb_cfg_sizes(c);
    return -1;
}

/* Writes out/throughput.dat (push jobs/s per batch size) and out/vars.gp
 * (the limits and the clock uncertainty) for bench/plots.gp. */
static void dqb_write_plot_data(const dqb_cfg *c, const char *header) {
    char path[512];
    snprintf(path, sizeof(path), "%s/throughput.dat", c->out);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# batch jobs_per_s min max (median of %d runs)\n",
                dqb_push[0].n);
        for (int b = 0; b < DQB_NPUSH; b++)
            if (dqb_push[b].n > 0)
                fprintf(f, "%d %.0f %.0f %.0f\n", dqb_push_batches[b],
                        dqb_s_med(&dqb_push[b]),
                        dqb_vmin(dqb_push[b].v, (size_t)dqb_push[b].n),
                        dqb_vmax(dqb_push[b].v, (size_t)dqb_push[b].n));
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/vars.gp", c->out);
    f = fopen(path, "w");
    if (f) {
        static const char *const vn[DQB_NLIM] = {"lim_c1", "lim_p1",
                                                 "lim_p16", "zadd_p1",
                                                 "zadd_p16"};
        fprintf(f, "# written by dqbench: figures of this run for plots.gp\n");
        for (int i = 0; i < DQB_NLIM; i++) {
            double m = dqb_s_med(&dqb_lim[i]);
            if (isnan(m))
                fprintf(f, "%s = NaN\n", vn[i]);
            else
                fprintf(f, "%s = %.0f\n", vn[i], m);
        }
        fprintf(f, "late_unc = %.3f\ntitle_run = \"%s\"\n", dqb_late_unc,
                header);
        fclose(f);
    }
}

/* Starts redis-server and the admin connection; reads its version and hz.
 * Returns 0, or -1 (nothing left running). */
static int dqb_start_server(char *rver, size_t rsize, double *hz) {
    if (th_redis_start(&dqb_srv, 0, NULL) != 0) {
        fprintf(stderr, "dqbench: cannot start redis-server\n");
        return -1;
    }
    dqb_adm = th_redis_connect(&dqb_srv);
    if (dqb_adm == NULL) {
        th_redis_stop(&dqb_srv);
        return -1;
    }
    struct timeval tv = {120, 0};
    redisSetTimeout(dqb_adm, tv);
    redisReply *ver = redisCommand(dqb_adm, "INFO server");
    snprintf(rver, rsize, "?");
    if (ver && ver->type == REDIS_REPLY_STRING) {
        const char *p = strstr(ver->str, "redis_version:");
        if (p)
            sscanf(p + 14, "%31[^\r\n]", rver);
    }
    freeReplyObject(ver);
    *hz = dqb_info_field("server", "hz");
    return 0;
}

/* Prints the table on stdout and into out/table.txt, then the plot data. */
static void dqb_output(const dqb_cfg *c, const char *mode, const char *rver,
                       double hz) {
    char header[400];
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M", localtime(&now));
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const char *rev = getenv("DQBENCH_REV"); /* set by bench/run.sh */
    snprintf(header, sizeof(header),
             "libdelayq %s%s%s bench, %s, redis-server %s (hz %.0f, unix "
             "socket, no persistence), %ld CPUs, mode %s, median of %d run(s)",
             dq_version_string(), rev ? " " : "", rev ? rev : "", date, rver,
             hz, ncpu, mode, c->runs);
    dqb_print_table(stdout, header);
    fflush(stdout);
    char path[512];
    snprintf(path, sizeof(path), "%s/table.txt", c->out);
    FILE *f = fopen(path, "w");
    if (f) {
        dqb_print_table(f, header);
        fclose(f);
    }
    dqb_write_plot_data(c, header);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--cost-worker") == 0)
        return dqb_cost_worker(argv[2], atol(argv[3]));
    dqb_cfg c;
    int rc = dqb_parse_args(&c, argc, argv);
    if (rc >= 0)
        return rc;
    mkdir(c.out, 0755);
    dqb_init_payload();
    signal(SIGPIPE, SIG_IGN);

    char rver[32];
    double hz;
    if (dqb_start_server(rver, sizeof(rver), &hz) != 0)
        return 1;
    const char *mode = c.mode == 0 ? "full" : c.mode == 1 ? "quick" : "smoke";
    dqb_log("redis-server %s (hz %.0f) on %s, libdelayq %s, mode %s, %d "
            "run(s)", rver, hz, dqb_srv.sock, dq_version_string(), mode,
            c.runs);
    dqb_limits_load_script();

    /* Throughput and lateness: each run measures the limits and then every
     * scenario, so each ratio compares figures taken minutes apart at most. */
    for (int r = 0; r < c.runs; r++) {
        dqb_log("---- run %d of %d", r + 1, c.runs);
        for (size_t i = 0; i < DQB_NSCENARIOS; i++)
            if (dqb_scenarios[i].run != NULL && dqb_want(&c, &dqb_scenarios[i]))
                dqb_scenarios[i].run(&c, r);
    }
    /* Then the rows, in the same order; memory, cost and backlog measure
     * here, once. */
    for (size_t i = 0; i < DQB_NSCENARIOS; i++)
        if (dqb_want(&c, &dqb_scenarios[i]))
            dqb_scenarios[i].rows(&c);

    dqb_output(&c, mode, rver, hz);
    redisFree(dqb_adm);
    th_redis_stop(&dqb_srv);
    if (dqb_failed)
        fprintf(stderr, "dqbench: FAILED: a consistency check failed "
                        "(see FAIL lines above)\n");
    return dqb_failed ? 1 : 0;
}
