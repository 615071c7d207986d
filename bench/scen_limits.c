/*
 * bench/scen_limits.c - Redis's own limit, the reference of every ratio:
 * redis-benchmark on the same socket runs a minimal script (1 HSET + 1
 * ZADD, what a push must do at least) and plain ZADD, with 1 and 50
 * clients, pipelined or not.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const dqb_lim_names[DQB_NLIM] = {
    "EVALSHA HSET+ZADD  -c 1  -P 1", "EVALSHA HSET+ZADD  -c 50 -P 1",
    "EVALSHA HSET+ZADD  -c 50 -P 16", "ZADD               -c 50 -P 1",
    "ZADD               -c 50 -P 16"};
const char *const dqb_lim_short[DQB_NLIM] = {
    "EVALSHA -c 1 -P 1", "EVALSHA -c 50 -P 1", "EVALSHA -c 50 -P 16",
    "ZADD -c 50 -P 1", "ZADD -c 50 -P 16"};
dqb_series dqb_lim[DQB_NLIM];

static char dqb_lim_sha[48]; /* the minimal HSET+ZADD script */

/* Runs redis-benchmark with args; returns the rps of its CSV line. */
static double dqb_redis_benchmark(char *const *args) {
    int p[2];
    if (pipe(p) != 0)
        return NAN;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execvp("redis-benchmark", args);
        _exit(127);
    }
    close(p[1]);
    char buf[8192];
    size_t used = 0;
    ssize_t k;
    while (used < sizeof(buf) - 1 &&
           (k = read(p[0], buf + used, sizeof(buf) - 1 - used)) > 0)
        used += (size_t)k;
    close(p[0]);
    buf[used] = '\0';
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        dqb_fail("redis-benchmark failed (exit status %d); is redis-tools "
                 "installed?", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return NAN;
    }
    /* Last line: "<test>","<rps>",... */
    char *last = NULL;
    for (char *q = strstr(buf, "\n\""); q; q = strstr(q + 1, "\n\""))
        last = q + 1;
    if (last == NULL || strncmp(last, "\"test\"", 6) == 0) {
        dqb_fail("redis-benchmark: no result line in: %.200s", buf);
        return NAN;
    }
    char *comma = strstr(last, "\",\"");
    return comma ? strtod(comma + 3, NULL) : NAN;
}

double dqb_limit_ops(char *const *server, const char *sha, int clients,
                     int pipeline, long n, int zadd) {
    char sn[24], sc[16], sp[16];
    snprintf(sn, sizeof(sn), "%ld", n);
    snprintf(sc, sizeof(sc), "%d", clients);
    snprintf(sp, sizeof(sp), "%d", pipeline);
    char pl[17];
    memcpy(pl, dqb_payload, 16); /* the 16-byte payload of the push runs */
    pl[16] = '\0';
    char *opts[] = {"-n", sn, "-c", sc, "-P", sp, "-r", "100000000", "--csv",
                    NULL};
    char *ev[] = {"EVALSHA", (char *)sha, "2", "{lim}:jobs", "{lim}:due",
                  "__rand_int__", pl, "__rand_int__", NULL};
    char *za[] = {"ZADD", "{lim}:due", "__rand_int__", "__rand_int__", NULL};
    char *args[40];
    int a = 0;
    args[a++] = "redis-benchmark";
    for (int i = 0; i < 8 && server[i]; i++)
        args[a++] = server[i];
    for (int i = 0; opts[i]; i++)
        args[a++] = opts[i];
    char **cmd = zadd ? za : ev;
    for (int i = 0; cmd[i]; i++)
        args[a++] = cmd[i];
    args[a] = NULL;
    return dqb_redis_benchmark(args);
}

/* One limit: n ops of the script (or of ZADD) by `clients` clients with
 * `pipeline` commands in flight each, on an empty server; ops/s. */
static double dqb_bench_limit(int clients, int pipeline, long n, int zadd) {
    char *server[] = {"-s", dqb_srv.sock, NULL};
    dqb_flushall();
    double v = dqb_limit_ops(server, dqb_lim_sha, clients, pipeline, n, zadd);
    dqb_flushall();
    return v;
}

void dqb_lim_load_script(redisContext *a, char *sha, size_t size) {
    redisReply *r = redisCommand(a, "SCRIPT LOAD %s",
                                 "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                                 "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) "
                                 "return 1");
    sha[0] = '\0';
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        snprintf(sha, size, "%s", r->str);
    else
        dqb_fail("SCRIPT LOAD of the limit script: %s",
                 r == NULL ? a->errstr
                 : r->type == REDIS_REPLY_ERROR ? r->str : "not a string");
    freeReplyObject(r);
}

void dqb_limits_load_script(void) {
    dqb_lim_load_script(dqb_adm, dqb_lim_sha, sizeof(dqb_lim_sha));
}

void dqb_scen_limits_run(const dqb_cfg *c, int run) {
    (void)run;
    dqb_s_add(&dqb_lim[DQB_L_C1], dqb_bench_limit(1, 1, c->lim_n_c1, 0));
    dqb_s_add(&dqb_lim[DQB_L_P1], dqb_bench_limit(50, 1, c->lim_n_p1, 0));
    dqb_s_add(&dqb_lim[DQB_L_P16], dqb_bench_limit(50, 16, c->lim_n_p16, 0));
    dqb_s_add(&dqb_lim[DQB_L_ZP1], dqb_bench_limit(50, 1, c->lim_n_p1, 1));
    dqb_s_add(&dqb_lim[DQB_L_ZP16],
              dqb_bench_limit(50, 16, c->lim_n_p16 * 2, 1));
    dqb_log("limits: EVALSHA c1 %.0f, c50 %.0f, c50 P16 %.0f; ZADD c50 %.0f, "
            "P16 %.0f ops/s", dqb_lim[DQB_L_C1].v[dqb_lim[DQB_L_C1].n - 1],
            dqb_lim[DQB_L_P1].v[dqb_lim[DQB_L_P1].n - 1],
            dqb_lim[DQB_L_P16].v[dqb_lim[DQB_L_P16].n - 1],
            dqb_lim[DQB_L_ZP1].v[dqb_lim[DQB_L_ZP1].n - 1],
            dqb_lim[DQB_L_ZP16].v[dqb_lim[DQB_L_ZP16].n - 1]);
}

void dqb_scen_limits_rows(const dqb_cfg *c) {
    (void)c;
    dqb_add_section("limit: redis-benchmark on the same socket, minimal "
                    "script (1 HSET + 1 ZADD) and plain ZADD, ops/s");
    for (int i = 0; i < DQB_NLIM; i++)
        dqb_ops_row(dqb_lim_names[i], &dqb_lim[i]);
}
