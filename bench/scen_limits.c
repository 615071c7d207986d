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
double dqb_redis_benchmark(char *const *args) {
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

/* One limit: n ops of the script (or of ZADD) by `clients` clients with
 * `pipeline` commands in flight each, on an empty server; ops/s. */
static double dqb_bench_limit(int clients, int pipeline, long n, int zadd) {
    char sn[24], sc[16], sp[16];
    snprintf(sn, sizeof(sn), "%ld", n);
    snprintf(sc, sizeof(sc), "%d", clients);
    snprintf(sp, sizeof(sp), "%d", pipeline);
    char pl[17];
    memcpy(pl, dqb_payload, 16); /* the 16-byte payload of the push runs */
    pl[16] = '\0';
    char *base[] = {"redis-benchmark", "-s", dqb_srv.sock, "-n", sn, "-c", sc,
                    "-P", sp, "-r", "100000000", "--csv", NULL};
    char *ev[] = {"EVALSHA", dqb_lim_sha, "2", "{lim}:jobs", "{lim}:due",
                  "__rand_int__", pl, "__rand_int__", NULL};
    char *za[] = {"ZADD", "{lim}:due", "__rand_int__", "__rand_int__", NULL};
    char *args[32];
    int a = 0;
    for (int i = 0; base[i]; i++)
        args[a++] = base[i];
    char **cmd = zadd ? za : ev;
    for (int i = 0; cmd[i]; i++)
        args[a++] = cmd[i];
    args[a] = NULL;
    dqb_flushall();
    double v = dqb_redis_benchmark(args);
    dqb_flushall();
    return v;
}

const char dqb_lim_script[] =
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
    "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) "
    "return 1";

void dqb_limits_load_script(void) {
    redisReply *r = dqb_adm_cmd("SCRIPT LOAD %s", dqb_lim_script);
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        snprintf(dqb_lim_sha, sizeof(dqb_lim_sha), "%s", r->str);
    freeReplyObject(r);
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
    for (int i = 0; i < DQB_NLIM; i++) {
        dqb_series *s = &dqb_lim[i];
        dqb_row *rw = dqb_val_row(dqb_lim_names[i], s, "ops/s", "%.0f");
        dqb_fmt_int(rw->value, sizeof(rw->value), dqb_s_med(s));
        if (s->n > 1) {
            char a[16], b[16];
            dqb_fmt_int(a, sizeof(a), dqb_vmin(s->v, (size_t)s->n) / 1000);
            dqb_fmt_int(b, sizeof(b), dqb_vmax(s->v, (size_t)s->n) / 1000);
            snprintf(rw->spread, sizeof(rw->spread), "%sk..%sk", a, b);
        }
    }
}
