/*
 * bench/dqbench.c - how close libdelayq runs to Redis's own limit.
 *
 * Starts its own redis-server (tests/harness.c: default configuration,
 * save "", appendonly no, a private unix socket in a temp dir, stopped by
 * pid), measures Redis's raw limit with redis-benchmark on the same socket,
 * then every libdelayq scenario of issue 4, and prints ONE table on stdout
 * (progress goes to stderr).  Data for the plots and the server-side
 * profiles go to --out DIR.  Usually run through bench/run.sh.
 *
 *   dqbench [--quick | --smoke] [--runs N] [--out DIR] [--max-backlog N]
 *           [--no-callgrind] [--only a,b,...]
 *   dqbench --cost-worker URI N     (internal: runs under callgrind)
 *
 * Every figure is the median of --runs runs (default 3) unless the table
 * says otherwise; ratios are taken within this one run.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <delayq.h>

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND 1
#endif
#endif
#ifndef HAVE_CALLGRIND
#define HAVE_CALLGRIND 0
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(s) ((void)(s))
#endif

#define QUEUE "bench"
#define LEASE_MS 60000
#define MAXRUNS 15

/* ---- small utilities ------------------------------------------------ */

static int g_failed; /* a consistency check failed: exit 1 at the end */

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dqbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dqbench: FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    g_failed = 1;
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t real_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* xorshift64*: reproducible pseudo-random numbers per scenario. */
static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

static int64_t rng_range(uint64_t *s, int64_t n) {
    return (int64_t)(rng_next(s) % (uint64_t)n);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted values (p in 0..1). */
static double pct_sorted(const double *v, size_t n, double p) {
    if (n == 0)
        return NAN;
    size_t k = (size_t)ceil(p * (double)n);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

/* Median of n values (copied, not reordered). */
static double median(const double *v, size_t n) {
    if (n == 0)
        return NAN;
    double tmp[MAXRUNS * 4];
    double *w = n <= sizeof(tmp) / sizeof(tmp[0]) ? tmp : malloc(n * sizeof(double));
    if (w == NULL)
        return NAN;
    memcpy(w, v, n * sizeof(double));
    qsort(w, n, sizeof(double), cmp_double);
    double m = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
    if (w != tmp)
        free(w);
    return m;
}

static double vmin(const double *v, size_t n) {
    double m = INFINITY;
    for (size_t i = 0; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double vmax(const double *v, size_t n) {
    double m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* Shared (fork-inherited) zeroed memory for children's results. */
static void *shared_alloc(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- configuration -------------------------------------------------- */

typedef struct cfg {
    int mode;          /* 0 full, 1 quick, 2 smoke */
    int runs;
    const char *out;   /* output dir for data files */
    int64_t max_backlog;
    int callgrind;
    const char *only;  /* comma list of scenarios, NULL = all */
    const char *self;  /* path of this program (for valgrind) */
    /* sizes */
    long lim_n_p1, lim_n_p16, lim_n_c1;
    long push1_n, pushb_n[3];
    long drain_n;
    long e2e_n;
    long late_n;
    int64_t late_base_ms, late_spread_ms;
    long mem_n;
    long bl_ops;
    long cost_n;
} cfg;

static int want(const cfg *c, const char *name) {
    if (c->only == NULL)
        return 1;
    size_t n = strlen(name);
    for (const char *p = c->only; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return 1;
        p += len + (e != NULL);
    }
    return 0;
}

static void cfg_sizes(cfg *c) {
    switch (c->mode) {
    case 0: /* full */
        c->lim_n_p1 = 300000, c->lim_n_p16 = 600000, c->lim_n_c1 = 100000;
        c->push1_n = 30000;
        c->pushb_n[0] = 200000, c->pushb_n[1] = 300000, c->pushb_n[2] = 500000;
        c->drain_n = 50000;
        c->e2e_n = 300000;
        c->late_n = 2000, c->late_base_ms = 1000, c->late_spread_ms = 2000;
        c->mem_n = 1000000;
        c->bl_ops = 2000;
        c->cost_n = 2000;
        break;
    case 1: /* quick */
        c->lim_n_p1 = 100000, c->lim_n_p16 = 200000, c->lim_n_c1 = 30000;
        c->push1_n = 10000;
        c->pushb_n[0] = 50000, c->pushb_n[1] = 100000, c->pushb_n[2] = 200000;
        c->drain_n = 50000;
        c->e2e_n = 60000;
        c->late_n = 2000, c->late_base_ms = 1000, c->late_spread_ms = 2000;
        c->mem_n = 100000;
        c->bl_ops = 1000;
        c->cost_n = 500;
        break;
    default: /* smoke: tiny, checks that everything runs and adds up */
        c->lim_n_p1 = 2000, c->lim_n_p16 = 4000, c->lim_n_c1 = 1000;
        c->push1_n = 300;
        c->pushb_n[0] = 1000, c->pushb_n[1] = 2000, c->pushb_n[2] = 3000;
        c->drain_n = 2000;
        c->e2e_n = 2000;
        c->late_n = 100, c->late_base_ms = 200, c->late_spread_ms = 300;
        c->mem_n = 3000;
        c->bl_ops = 200;
        c->cost_n = 100;
        break;
    }
}

/* ---- the table ------------------------------------------------------- */

typedef struct row {
    char name[200], value[20], unit[10], spread[48], limit[28], lval[12],
        ratio[8], target[14], status[34];
} row;

static row g_rows[64];
static int g_nrows;

static row *add_row(const char *name) {
    if (g_nrows >= (int)(sizeof(g_rows) / sizeof(g_rows[0])))
        return &g_rows[g_nrows - 1];
    row *r = &g_rows[g_nrows++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    return r;
}

static void add_section(const char *title) {
    row *r = add_row(title);
    r->name[sizeof(r->name) - 1] = '\0';
    snprintf(r->unit, sizeof(r->unit), "%s", "\x01"); /* marker */
}

/* "123,456" with thousands separators (rounded). */
static void fmt_int(char *buf, size_t size, double v) {
    if (isnan(v)) {
        snprintf(buf, size, "n/a");
        return;
    }
    char tmp[32];
    snprintf(tmp, sizeof(tmp), "%.0f", v);
    size_t len = strlen(tmp), o = 0;
    size_t start = tmp[0] == '-';
    for (size_t i = 0; i < len && o + 2 < size; i++) {
        buf[o++] = tmp[i];
        size_t left = len - 1 - i;
        if (i >= start && left > 0 && left % 3 == 0)
            buf[o++] = ',';
    }
    buf[o] = '\0';
}

/* Status for a target: higher is better (ge=1) or lower is better. */
static void set_status(row *r, double v, double target, int ge) {
    if (isnan(v)) {
        snprintf(r->status, sizeof(r->status), "n/a");
        return;
    }
    int met = ge ? v >= target : v <= target;
    double pct = (v / target - 1) * 100;
    if (met)
        snprintf(r->status, sizeof(r->status), "met (%+.0f%%)", pct);
    else
        snprintf(r->status, sizeof(r->status), "MISSED (%+.0f%%)", pct);
}

/* A throughput row: median of runs, spread, limit and ratio. */
static row *tput_row(const char *name, const double *v, int n,
                     const char *limit_name, double limit) {
    row *r = add_row(name);
    double m = median(v, (size_t)n);
    fmt_int(r->value, sizeof(r->value), m);
    snprintf(r->unit, sizeof(r->unit), "jobs/s");
    if (n > 1) {
        char a[16], b[16];
        fmt_int(a, sizeof(a), vmin(v, (size_t)n) / 1000);
        fmt_int(b, sizeof(b), vmax(v, (size_t)n) / 1000);
        snprintf(r->spread, sizeof(r->spread), "%sk..%sk", a, b);
    }
    if (limit_name != NULL) {
        snprintf(r->limit, sizeof(r->limit), "%s", limit_name);
        fmt_int(r->lval, sizeof(r->lval), limit);
        snprintf(r->ratio, sizeof(r->ratio), "%.2f", m / limit);
    }
    return r;
}

static void print_table(FILE *f, const char *header) {
    fprintf(f, "%s\n", header);
    const char *fmt = "%-38s %11s %-7s %-17s %-26s %9s %6s  %-11s %s\n";
    char line[200];
    fprintf(f, fmt, "scenario", "value", "unit", "runs min..max",
            "limit (same run/server)", "limit", "ratio", "target", "status");
    memset(line, '-', 150);
    line[150] = '\0';
    fprintf(f, "%s\n", line);
    for (int i = 0; i < g_nrows; i++) {
        row *r = &g_rows[i];
        if (r->unit[0] == '\x01') {
            fprintf(f, "[%s]\n", r->name);
            continue;
        }
        fprintf(f, fmt, r->name, r->value, r->unit, r->spread, r->limit,
                r->lval, r->ratio, r->target, r->status);
    }
}

/* Figures the plots need (bench/plots.gp reads out/vars.gp). */
static double g_late_p50 = NAN, g_late_p99 = NAN, g_late_unc = NAN;

/* ---- Redis administration (plain hiredis) ---------------------------- */

static th_redis g_srv;
static redisContext *g_adm;

static redisReply *adm(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(g_adm, fmt, ap);
    va_end(ap);
    if (r == NULL) {
        fail("redis admin command failed: %s", g_adm->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR)
        fail("redis admin command '%s': %s", fmt, r->str);
    return r;
}

static void adm_do(const char *fmt) {
    redisReply *r = redisCommand(g_adm, fmt);
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        fail("redis '%s': %s", fmt, r ? r->str : g_adm->errstr);
    freeReplyObject(r);
}

static void flushall(void) { adm_do("FLUSHALL"); }

/* Value of "field:" in INFO section as a double (NAN if missing). */
static double info_field(const char *section, const char *field) {
    redisReply *r = redisCommand(g_adm, "INFO %s", section);
    double v = NAN;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        size_t n = strlen(field);
        for (const char *p = r->str; p && *p;) {
            if (strncmp(p, field, n) == 0 && p[n] == ':') {
                v = strtod(p + n + 1, NULL);
                break;
            }
            p = strchr(p, '\n');
            if (p)
                p++;
        }
    }
    freeReplyObject(r);
    return v;
}

/* calls and usec of one command in INFO commandstats ("evalsha"). */
static void cmdstat(const char *cmd, double *calls, double *usec) {
    *calls = *usec = 0;
    redisReply *r = redisCommand(g_adm, "INFO commandstats");
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        char key[64];
        snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
        const char *p = strstr(r->str, key);
        if (p) {
            *calls = strtod(p + strlen(key), NULL);
            const char *u = strstr(p, "usec=");
            if (u)
                *usec = strtod(u + 5, NULL);
        }
    }
    freeReplyObject(r);
}

/* Saves INFO commandstats (and SLOWLOG LEN) under out/profile-NAME.txt. */
static void save_profile(const cfg *c, const char *name, double jobs) {
    char path[512];
    snprintf(path, sizeof(path), "%s/profile-%s.txt", c->out, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    redisReply *r = redisCommand(g_adm, "INFO commandstats");
    fprintf(f, "# %s: %.0f jobs; per-call server time (usec_per_call) and "
               "usec per job\n", name, jobs);
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        for (char *p = r->str; p && *p;) {
            char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len > 0 && p[len - 1] == '\r')
                len--;
            const char *u = strstr(p, ",usec=");
            if (strncmp(p, "cmdstat_", 8) == 0 && u && u < p + len)
                fprintf(f, "%.*s  usec/job=%.3f\n", (int)len, p,
                        strtod(u + 6, NULL) / jobs);
            p = e ? e + 1 : NULL;
        }
    }
    freeReplyObject(r);
    r = redisCommand(g_adm, "SLOWLOG LEN");
    if (r && r->type == REDIS_REPLY_INTEGER)
        fprintf(f, "slowlog_len (>10 ms): %lld\n", r->integer);
    freeReplyObject(r);
    fclose(f);
}

static void reset_stats(void) {
    adm_do("CONFIG RESETSTAT");
    adm_do("SLOWLOG RESET");
}

/* Server µs per job spent in EVALSHA since the last reset_stats(). */
static double srv_us_per_job(double jobs) {
    double calls, usec;
    cmdstat("evalsha", &calls, &usec);
    return usec / jobs;
}

/* ---- clock calibration against Redis TIME ---------------------------- */

typedef struct clk_cal {
    double offset_us; /* server time - local CLOCK_REALTIME (median) */
    double unc_us;    /* half the median round trip */
} clk_cal;

static clk_cal calibrate(redisContext *ctx, int k) {
    double off[64], half[64];
    clk_cal cal = {NAN, NAN};
    if (k > 64)
        k = 64;
    int n = 0;
    for (int i = 0; i < k; i++) {
        int64_t t0 = real_us();
        redisReply *r = redisCommand(ctx, "TIME");
        int64_t t1 = real_us();
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            freeReplyObject(r);
            continue;
        }
        double srv = strtod(r->element[0]->str, NULL) * 1e6 +
                     strtod(r->element[1]->str, NULL);
        freeReplyObject(r);
        off[n] = srv - (double)(t0 + t1) / 2;
        half[n] = (double)(t1 - t0) / 2;
        n++;
    }
    if (n > 0) {
        cal.offset_us = median(off, (size_t)n);
        cal.unc_us = median(half, (size_t)n);
    }
    return cal;
}

/* ---- libdelayq helpers ------------------------------------------------ */

static dq_client *open_client(void) {
    dq_client *c = NULL;
    if (dq_open(g_srv.uri, NULL, &c) != 0) {
        fail("dq_open: %s", dq_errmsg(c));
        dq_close(c);
        return NULL;
    }
    return c;
}

static char g_payload[257];

static void init_payload(void) {
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof(g_payload) - 1; i++)
        g_payload[i] = (char)('a' + rng_range(&s, 26));
}

/* Pushes n jobs in batches of `batch` with delays base + U(0..spread). */
static int fill(dq_client *c, long n, int batch, size_t plen, int64_t base,
                int64_t spread, uint64_t *seed) {
    const void **pl = malloc(sizeof(void *) * (size_t)batch);
    size_t *lens = malloc(sizeof(size_t) * (size_t)batch);
    int64_t *d = malloc(sizeof(int64_t) * (size_t)batch);
    int rc = 0;
    if (!pl || !lens || !d) {
        rc = -1;
        goto out;
    }
    for (long done = 0; done < n;) {
        int b = (int)(n - done < batch ? n - done : batch);
        for (int i = 0; i < b; i++) {
            pl[i] = g_payload;
            lens[i] = plen;
            d[i] = base + (spread > 0 ? rng_range(seed, spread + 1) : 0);
        }
        int k = dq_push_batch(c, QUEUE, (size_t)b, pl, lens, d, NULL, 0, NULL,
                              NULL);
        if (k != b) {
            fail("dq_push_batch returned %d (of %d): %s", k, b, dq_errmsg(c));
            rc = -1;
            goto out;
        }
        done += b;
    }
out:
    free(pl);
    free(lens);
    free(d);
    return rc;
}

/* Acks every job of a list in one round trip.  Returns the number acked. */
static int ack_all(dq_client *c, dq_jobs *js) {
    size_t n = dq_jobs_count(js);
    const char *ids[DQ_POLL_MAX], *toks[DQ_POLL_MAX];
    for (size_t i = 0; i < n; i++) {
        ids[i] = dq_job_id(dq_jobs_at(js, i));
        toks[i] = dq_job_token(dq_jobs_at(js, i));
    }
    int k = dq_ack_batch(c, QUEUE, n, ids, toks, NULL);
    if (k != (int)n)
        fail("dq_ack_batch returned %d (of %zu): %s", k, n, dq_errmsg(c));
    return k;
}

/* Checks that the queue is empty (nothing pending, in flight or dead). */
static void expect_empty(dq_client *c, const char *what) {
    int64_t sch = -1, due = -1, inf = -1, dead = -1;
    if (dq_stats(c, QUEUE, &sch, &due, &inf, &dead, NULL) != 0)
        fail("%s: dq_stats: %s", what, dq_errmsg(c));
    else if (sch || due || inf || dead)
        fail("%s: queue not empty afterwards: scheduled %" PRId64
             " due %" PRId64 " inflight %" PRId64 " dead %" PRId64,
             what, sch, due, inf, dead);
}

/* ---- limits: redis-benchmark on the same socket ---------------------- */

typedef struct limits {
    double evalsha_c1;   /* 1 client, 1 command per round trip */
    double evalsha_p1;   /* 50 clients, no pipelining */
    double evalsha_p16;  /* 50 clients, -P 16 */
    double zadd_p1, zadd_p16;
} limits;

static limits g_lim = {NAN, NAN, NAN, NAN, NAN};

/* Runs redis-benchmark with args; returns the rps of its CSV line. */
static double redis_benchmark(char *const *args) {
    int p[2];
    if (pipe(p) != 0)
        return NAN;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        int devnull = open("/dev/null", 1);
        if (devnull >= 0)
            dup2(devnull, 2);
        execvp("redis-benchmark", args);
        _exit(127);
    }
    close(p[1]);
    char buf[8192];
    size_t used = 0;
    ssize_t k;
    while ((k = read(p[0], buf + used, sizeof(buf) - 1 - used)) > 0)
        used += (size_t)k;
    close(p[0]);
    buf[used] = '\0';
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fail("redis-benchmark failed (exit status %d); is redis-tools "
             "installed?", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return NAN;
    }
    /* Last line: "<test>","<rps>",... */
    char *last = NULL;
    for (char *q = strstr(buf, "\n\""); q; q = strstr(q + 1, "\n\""))
        last = q + 1;
    if (last == NULL || strncmp(last, "\"test\"", 6) == 0) {
        fail("redis-benchmark: no result line in: %.200s", buf);
        return NAN;
    }
    char *comma = strstr(last, "\",\"");
    return comma ? strtod(comma + 3, NULL) : NAN;
}

static double bench_limit(const cfg *c, const char *sha, int clients,
                          int pipeline, long n, int zadd) {
    char sn[24], sc[16], sp[16];
    snprintf(sn, sizeof(sn), "%ld", n);
    snprintf(sc, sizeof(sc), "%d", clients);
    snprintf(sp, sizeof(sp), "%d", pipeline);
    char shabuf[48];
    snprintf(shabuf, sizeof(shabuf), "%s", sha);
    char *base[] = {"redis-benchmark", "-s", g_srv.sock, "-n", sn, "-c", sc,
                    "-P", sp, "-r", "100000000", "--csv", NULL};
    char *ev[] = {"EVALSHA", shabuf, "2", "{lim}:jobs", "{lim}:due",
                  "__rand_int__", g_payload, "__rand_int__", NULL};
    char *za[] = {"ZADD", "{lim}:due", "__rand_int__", "__rand_int__", NULL};
    char *args[32];
    int a = 0;
    for (int i = 0; base[i]; i++)
        args[a++] = base[i];
    char **cmd = zadd ? za : ev;
    for (int i = 0; cmd[i]; i++)
        args[a++] = cmd[i];
    args[a] = NULL;
    double v[MAXRUNS];
    for (int r = 0; r < c->runs; r++) {
        flushall();
        v[r] = redis_benchmark(args);
    }
    flushall();
    return median(v, (size_t)c->runs);
}

static void scen_limits(const cfg *c) {
    /* The 16-byte payload is the one the push scenarios use. */
    g_payload[16] = '\0';
    redisReply *r = adm("SCRIPT LOAD %s",
                        "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                        "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) "
                        "return 1");
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        freeReplyObject(r);
        return;
    }
    char sha[48];
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    logf_("limits: redis-benchmark (EVALSHA HSET+ZADD, ZADD), %d runs each",
          c->runs);
    g_lim.evalsha_c1 = bench_limit(c, sha, 1, 1, c->lim_n_c1, 0);
    g_lim.evalsha_p1 = bench_limit(c, sha, 50, 1, c->lim_n_p1, 0);
    g_lim.evalsha_p16 = bench_limit(c, sha, 50, 16, c->lim_n_p16, 0);
    g_lim.zadd_p1 = bench_limit(c, sha, 50, 1, c->lim_n_p1, 1);
    g_lim.zadd_p16 = bench_limit(c, sha, 50, 16, c->lim_n_p16 * 2, 1);
    g_payload[16] = g_payload[15]; /* restore (any letter) */

    add_section("limit: redis-benchmark -s <same socket>, ops/s");
    struct {
        const char *name;
        double v;
    } L[] = {
        {"EVALSHA HSET+ZADD  -c 1  -P 1", g_lim.evalsha_c1},
        {"EVALSHA HSET+ZADD  -c 50 -P 1", g_lim.evalsha_p1},
        {"EVALSHA HSET+ZADD  -c 50 -P 16", g_lim.evalsha_p16},
        {"ZADD               -c 50 -P 1", g_lim.zadd_p1},
        {"ZADD               -c 50 -P 16", g_lim.zadd_p16},
    };
    char path[512];
    snprintf(path, sizeof(path), "%s/limits.dat", c->out);
    FILE *f = fopen(path, "w");
    for (size_t i = 0; i < sizeof(L) / sizeof(L[0]); i++) {
        row *rw = add_row(L[i].name);
        fmt_int(rw->value, sizeof(rw->value), L[i].v);
        snprintf(rw->unit, sizeof(rw->unit), "ops/s");
        if (f)
            fprintf(f, "\"%s\" %.0f\n", L[i].name, L[i].v);
    }
    if (f)
        fclose(f);
}

/* ---- push ------------------------------------------------------------ */

static double g_push_tput[4] = {NAN, NAN, NAN, NAN}; /* batch 1,10,100,1000 */
static double g_push_min[4], g_push_max[4];

static double push_run(int batch, long n, double *srv_us) {
    flushall();
    reset_stats();
    dq_client *cl = open_client();
    if (cl == NULL)
        return NAN;
    uint64_t seed = 7;
    /* Warm-up: loads the script (first EVALSHA -> NOSCRIPT -> EVAL). */
    fill(cl, 1, 1, 16, 3600000, 0, &seed);
    flushall();
    reset_stats();
    int64_t t0 = mono_ns();
    if (batch == 1) {
        for (long i = 0; i < n; i++) {
            int64_t d = 3600000 + rng_range(&seed, 86400001);
            if (dq_push(cl, QUEUE, g_payload, 16, d, NULL, 0, NULL, 0,
                        NULL) != 0) {
                fail("dq_push: %s", dq_errmsg(cl));
                break;
            }
        }
    } else {
        fill(cl, n, batch, 16, 3600000, 86400000, &seed);
    }
    int64_t t1 = mono_ns();
    *srv_us = srv_us_per_job((double)n);
    int64_t sch = 0;
    if (dq_stats(cl, QUEUE, &sch, NULL, NULL, NULL, NULL) != 0 || sch != n)
        fail("push batch %d: %" PRId64 " scheduled, expected %ld", batch, sch,
             n);
    dq_close(cl);
    return (double)n / ((double)(t1 - t0) / 1e9);
}

static void scen_push(const cfg *c) {
    add_section("push: one client, 16-byte payloads, delays 1 h + U(0..24 h)");
    static const int batches[4] = {1, 10, 100, 1000};
    for (int b = 0; b < 4; b++) {
        long n = b == 0 ? c->push1_n : c->pushb_n[b - 1];
        double v[MAXRUNS], s[MAXRUNS];
        for (int r = 0; r < c->runs; r++)
            v[r] = push_run(batches[b], n, &s[r]);
        char name[64], prof[32];
        if (b == 0)
            snprintf(name, sizeof(name), "push, 1 job per round trip");
        else
            snprintf(name, sizeof(name), "push_batch of %d", batches[b]);
        snprintf(prof, sizeof(prof), "push%d", batches[b]);
        save_profile(c, prof, (double)n);
        row *rw = tput_row(name, v, c->runs,
                           b == 0 ? "EVALSHA -c 1 -P 1" : "EVALSHA -c 50 -P 16",
                           b == 0 ? g_lim.evalsha_c1 : g_lim.evalsha_p16);
        g_push_tput[b] = median(v, (size_t)c->runs);
        g_push_min[b] = vmin(v, (size_t)c->runs);
        g_push_max[b] = vmax(v, (size_t)c->runs);
        logf_("push batch %d: %.0f jobs/s (server %.2f us/job in EVALSHA)",
              batches[b], g_push_tput[b], median(s, (size_t)c->runs));
        if (b == 0) {
            snprintf(rw->target, sizeof(rw->target), ">= 25,000");
            set_status(rw, g_push_tput[b], 25000, 1);
        } else if (batches[b] == 1000) {
            snprintf(rw->target, sizeof(rw->target), ">= 150,000");
            set_status(rw, g_push_tput[b], 150000, 1);
        }
        row *sr = add_row("  server time in EVALSHA per job");
        snprintf(sr->value, sizeof(sr->value), "%.2f",
                 median(s, (size_t)c->runs));
        snprintf(sr->unit, sizeof(sr->unit), "us");
        snprintf(sr->status, sizeof(sr->status), "= %.0fk jobs/s if CPU-bound",
                 1e3 / median(s, (size_t)c->runs));
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/throughput.dat", c->out);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# batch jobs_per_s min max\n");
        for (int b = 0; b < 4; b++)
            fprintf(f, "%d %.0f %.0f %.0f\n", batches[b], g_push_tput[b],
                    g_push_min[b], g_push_max[b]);
        fclose(f);
    }
}

/* ---- drain: N due jobs, k consumer processes ------------------------- */

typedef struct slot {
    volatile long count;
    volatile int64_t t_end;
    volatile int ok;
} slot;

/* A consumer process: polls (max) and acks in batches until nothing is due.
 * Waits for the barrier (EOF on go) after saying it is ready. */
static void drain_child(int max, slot *s, int ready_fd, int go_fd) {
    dq_client *c = open_client();
    char x = 1;
    if (write(ready_fd, &x, 1) != 1 || c == NULL)
        _exit(2);
    if (read(go_fd, &x, 1) < 0)
        _exit(2);
    int64_t deadline = mono_ns() + INT64_C(120) * 1000000000;
    while (mono_ns() < deadline) {
        dq_jobs *js = NULL;
        int64_t next = 0;
        int n = dq_poll(c, QUEUE, max, LEASE_MS, &js, &next);
        if (n < 0) {
            fail("drain: dq_poll: %s", dq_errmsg(c));
            _exit(3);
        }
        if (n == 0) {
            if (next != 0)
                break; /* nothing due: the other consumers hold the rest */
            continue;
        }
        int k = ack_all(c, js);
        dq_jobs_free(js);
        if (k != n)
            _exit(3);
        s->count += n;
        s->t_end = mono_ns();
    }
    s->ok = 1;
    dq_close(c);
    _exit(0);
}

/* Starts k children running fn-like consumers; returns wall seconds from
 * the barrier to the last child's last ack, or NAN. */
static double run_consumers(int k, int max, slot *slots, long expect) {
    int ready[2], go[2];
    if (pipe(ready) || pipe(go))
        return NAN;
    pid_t pids[16];
    for (int i = 0; i < k; i++) {
        memset(&slots[i], 0, sizeof(slot));
        pids[i] = fork();
        if (pids[i] == 0) {
            close(ready[0]);
            close(go[1]);
            drain_child(max, &slots[i], ready[1], go[0]);
        }
    }
    close(ready[1]);
    close(go[0]);
    char x;
    for (int i = 0; i < k; i++)
        if (read(ready[0], &x, 1) != 1)
            fail("drain: a consumer did not start");
    close(ready[0]);
    int64_t t0 = mono_ns();
    close(go[1]); /* go */
    long total = 0;
    int64_t t_end = t0;
    for (int i = 0; i < k; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !slots[i].ok)
            fail("drain: consumer %d failed", i);
        total += slots[i].count;
        if (slots[i].t_end > t_end)
            t_end = slots[i].t_end;
    }
    if (total != expect)
        fail("drain: %ld jobs acked, expected %ld", total, expect);
    return (double)(t_end - t0) / 1e9;
}

static void scen_drain(const cfg *c) {
    add_section("drain: N due jobs (16 B), consumer processes poll + ack_batch");
    slot *slots = shared_alloc(sizeof(slot) * 16);
    if (slots == NULL)
        return;
    struct {
        int k, max;
    } conf[] = {{1, 100}, {1, 1000}, {2, 1000}, {4, 1000}};
    for (size_t ci = 0; ci < sizeof(conf) / sizeof(conf[0]); ci++) {
        double v[MAXRUNS], s[MAXRUNS];
        for (int r = 0; r < c->runs; r++) {
            flushall();
            dq_client *cl = open_client();
            if (cl == NULL)
                return;
            uint64_t seed = 11;
            fill(cl, c->drain_n, 1000, 16, 0, 0, &seed);
            reset_stats();
            double secs =
                run_consumers(conf[ci].k, conf[ci].max, slots, c->drain_n);
            v[r] = (double)c->drain_n / secs;
            s[r] = srv_us_per_job((double)c->drain_n);
            expect_empty(cl, "drain");
            dq_close(cl);
        }
        char name[64], prof[32];
        snprintf(name, sizeof(name), "drain %ld, %d consumer%s, max %d",
                 c->drain_n, conf[ci].k, conf[ci].k > 1 ? "s" : "",
                 conf[ci].max);
        snprintf(prof, sizeof(prof), "drain-%dc-max%d", conf[ci].k,
                 conf[ci].max);
        save_profile(c, prof, (double)c->drain_n);
        row *rw = tput_row(name, v, c->runs, "EVALSHA -c 50 -P 16",
                           g_lim.evalsha_p16);
        logf_("%s: %.0f jobs/s (server %.2f us/job in EVALSHA)", name,
              median(v, (size_t)c->runs), median(s, (size_t)c->runs));
        if (conf[ci].k == 1 && conf[ci].max == 1000) {
            snprintf(rw->target, sizeof(rw->target), ">= 100,000");
            set_status(rw, median(v, (size_t)c->runs), 100000, 1);
        }
        if (conf[ci].k == 1) {
            row *sr = add_row("  server time in EVALSHA per job");
            snprintf(sr->value, sizeof(sr->value), "%.2f",
                     median(s, (size_t)c->runs));
            snprintf(sr->unit, sizeof(sr->unit), "us");
            snprintf(sr->status, sizeof(sr->status),
                     "= %.0fk jobs/s if CPU-bound",
                     1e3 / median(s, (size_t)c->runs));
        }
    }
    munmap(slots, sizeof(slot) * 16);
}

/* ---- lateness and end to end ---------------------------------------- */

/* Results of one consumer process that records lateness. */
typedef struct late_res {
    volatile long got;
    volatile int64_t t_end; /* mono ns of the last ack */
    volatile int ok;
    double lat_ms[]; /* one per job received */
} late_res;

/* Consumer using dq_poll_wait: receives jobs until `expect` or the time
 * bound; lateness = (receive time in server clock) - due. */
static void late_child(long expect, int max, double offset_us,
                       int64_t bound_ms, late_res *res, int ready_fd,
                       int go_fd) {
    dq_client *c = open_client();
    if (c == NULL)
        _exit(2);
    dq_jobs *js = NULL;
    /* First call subscribes the wake-up connection. */
    if (dq_poll_wait(c, QUEUE, 1, LEASE_MS, 0, &js) < 0)
        _exit(2);
    dq_jobs_free(js);
    char x = 1;
    if (write(ready_fd, &x, 1) != 1 || read(go_fd, &x, 1) < 0)
        _exit(2);
    int64_t deadline = mono_ns() + bound_ms * 1000000;
    while (res->got < expect && mono_ns() < deadline) {
        js = NULL;
        int n = dq_poll_wait(c, QUEUE, max, LEASE_MS, 500, &js);
        int64_t now = real_us();
        if (n < 0) {
            fail("lateness: dq_poll_wait: %s", dq_errmsg(c));
            _exit(3);
        }
        double srv_now_ms = ((double)now + offset_us) / 1000.0;
        for (int i = 0; i < n && res->got < expect; i++)
            res->lat_ms[res->got++] =
                srv_now_ms - (double)dq_job_due_ms(dq_jobs_at(js, (size_t)i));
        if (n > 0 && ack_all(c, js) != n)
            _exit(3);
        dq_jobs_free(js);
        res->t_end = mono_ns();
    }
    res->ok = res->got == expect;
    dq_close(c);
    _exit(0);
}

typedef struct pctl {
    double p50, p95, p99, max;
} pctl;

static pctl percentiles(double *v, size_t n) {
    qsort(v, n, sizeof(double), cmp_double);
    pctl p = {pct_sorted(v, n, 0.50), pct_sorted(v, n, 0.95),
              pct_sorted(v, n, 0.99), n ? v[n - 1] : NAN};
    return p;
}

static void scen_lateness(const cfg *c) {
    long n = c->late_n;
    char title[160];
    snprintf(title, sizeof(title),
             "lateness at light load: %ld jobs due in %" PRId64 "..%" PRId64
             " ms, 1 consumer process, dq_poll_wait(max 100)",
             n, c->late_base_ms, c->late_base_ms + c->late_spread_ms);
    add_section(title);
    size_t rsize = sizeof(late_res) + sizeof(double) * (size_t)n;
    late_res *res = shared_alloc(rsize);
    double *all = malloc(sizeof(double) * (size_t)n * (size_t)c->runs);
    if (res == NULL || all == NULL)
        return;
    size_t nall = 0;
    double p50[MAXRUNS], p95[MAXRUNS], p99[MAXRUNS], pmax[MAXRUNS];
    double unc = 0, offset = 0;
    for (int r = 0; r < c->runs; r++) {
        flushall();
        memset(res, 0, rsize);
        clk_cal before = calibrate(g_adm, 15);
        int ready[2], go[2];
        if (pipe(ready) || pipe(go))
            return;
        pid_t pid = fork();
        if (pid == 0) {
            close(ready[0]);
            close(go[1]);
            late_child(n, 100, before.offset_us,
                       c->late_base_ms + c->late_spread_ms + 10000, res,
                       ready[1], go[0]);
        }
        close(ready[1]);
        close(go[0]);
        char x;
        if (read(ready[0], &x, 1) != 1)
            fail("lateness: consumer did not start");
        close(ready[0]);
        close(go[1]);
        dq_client *cl = open_client();
        uint64_t seed = 1000 + (uint64_t)r;
        if (cl)
            fill(cl, n, (int)(n < 1000 ? n : 1000), 16, c->late_base_ms,
                 c->late_spread_ms, &seed);
        int st;
        waitpid(pid, &st, 0);
        clk_cal after = calibrate(g_adm, 15);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !res->ok)
            fail("lateness: consumer got %ld of %ld jobs", res->got, n);
        if (cl) {
            expect_empty(cl, "lateness");
            dq_close(cl);
        }
        double drift = fabs(after.offset_us - before.offset_us);
        double u = (before.unc_us > drift ? before.unc_us : drift) / 1000.0;
        unc = u > unc ? u : unc;
        offset = before.offset_us;
        size_t got = (size_t)res->got;
        memcpy(all + nall, res->lat_ms, got * sizeof(double));
        nall += got;
        pctl p = percentiles(res->lat_ms, got);
        p50[r] = p.p50, p95[r] = p.p95, p99[r] = p.p99, pmax[r] = p.max;
        logf_("lateness run %d: p50 %.2f p95 %.2f p99 %.2f max %.2f ms "
              "(clock offset %.1f us, +-%.1f us, drift %.1f us)",
              r + 1, p.p50, p.p95, p.p99, p.max, before.offset_us,
              before.unc_us, drift);
    }
    const char *names[4] = {"lateness p50", "lateness p95", "lateness p99",
                            "lateness max"};
    double *vals[4] = {p50, p95, p99, pmax};
    for (int i = 0; i < 4; i++) {
        char nm[64];
        snprintf(nm, sizeof(nm), "%s, dq_poll_wait", names[i]);
        row *rw = add_row(nm);
        double m = median(vals[i], (size_t)c->runs);
        snprintf(rw->value, sizeof(rw->value), "%.2f", m);
        snprintf(rw->unit, sizeof(rw->unit), "ms");
        if (c->runs > 1)
            snprintf(rw->spread, sizeof(rw->spread), "%.2f..%.2f",
                     vmin(vals[i], (size_t)c->runs),
                     vmax(vals[i], (size_t)c->runs));
        snprintf(rw->limit, sizeof(rw->limit), "clock cal. +-%.3f ms", unc);
        if (i == 2) {
            snprintf(rw->target, sizeof(rw->target), "<= 5 ms");
            set_status(rw, m, 5.0, 0);
        }
    }
    (void)offset;
    g_late_p50 = median(p50, (size_t)c->runs);
    g_late_p99 = median(p99, (size_t)c->runs);
    g_late_unc = unc;
    qsort(all, nall, sizeof(double), cmp_double);
    char path[512];
    snprintf(path, sizeof(path), "%s/lateness-poll_wait.dat", c->out);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# lateness_ms cumulative_fraction (%zu jobs, %d runs "
                   "pooled; clock calibration +-%.3f ms)\n", nall, c->runs,
                unc);
        for (size_t i = 0; i < nall; i++)
            fprintf(f, "%.4f %.6f\n", all[i], (double)(i + 1) / (double)nall);
        fclose(f);
    }
    free(all);
    munmap(res, rsize);
}

/* Producer process of the end-to-end run: pushes n jobs in batches of 100,
 * delays U(0..2000) ms, as fast as it can. */
static void e2e_producer(long n, int64_t *t_end, int ready_fd, int go_fd) {
    dq_client *c = open_client();
    char x = 1;
    if (c == NULL || write(ready_fd, &x, 1) != 1 || read(go_fd, &x, 1) < 0)
        _exit(2);
    uint64_t seed = 99;
    int rc = fill(c, n, 100, 16, 0, 2000, &seed);
    *t_end = mono_ns();
    dq_close(c);
    _exit(rc == 0 ? 0 : 3);
}

static void scen_e2e(const cfg *c) {
    long n = c->e2e_n;
    char title[160];
    snprintf(title, sizeof(title),
             "end to end: 1 producer (batches of 100, due U(0..2 s)) + 1 "
             "consumer (poll_wait max 1000) at once, %ld jobs", n);
    add_section(title);
    size_t rsize = sizeof(late_res) + sizeof(double) * (size_t)n;
    late_res *res = shared_alloc(rsize);
    int64_t *pend = shared_alloc(sizeof(int64_t));
    if (res == NULL || pend == NULL)
        return;
    double v[MAXRUNS], pv[MAXRUNS], l50[MAXRUNS], l99[MAXRUNS];
    for (int r = 0; r < c->runs; r++) {
        flushall();
        memset(res, 0, rsize);
        clk_cal cal = calibrate(g_adm, 15);
        int ready[2], go[2];
        if (pipe(ready) || pipe(go))
            return;
        pid_t pc = fork();
        if (pc == 0) {
            close(ready[0]);
            close(go[1]);
            late_child(n, 1000, cal.offset_us, 120000, res, ready[1], go[0]);
        }
        pid_t pp = fork();
        if (pp == 0) {
            close(ready[0]);
            close(go[1]);
            e2e_producer(n, pend, ready[1], go[0]);
        }
        close(ready[1]);
        close(go[0]);
        char x;
        for (int i = 0; i < 2; i++)
            if (read(ready[0], &x, 1) != 1)
                fail("e2e: a process did not start");
        close(ready[0]);
        int64_t t0 = mono_ns();
        close(go[1]);
        int st1, st2;
        waitpid(pp, &st1, 0);
        waitpid(pc, &st2, 0);
        if (!WIFEXITED(st1) || WEXITSTATUS(st1) != 0 || !WIFEXITED(st2) ||
            WEXITSTATUS(st2) != 0 || !res->ok)
            fail("e2e: consumer got %ld of %ld jobs", res->got, n);
        v[r] = (double)n / ((double)(res->t_end - t0) / 1e9);
        pv[r] = (double)n / ((double)(*pend - t0) / 1e9);
        pctl p = percentiles(res->lat_ms, (size_t)res->got);
        l50[r] = p.p50;
        l99[r] = p.p99;
        logf_("e2e run %d: %.0f jobs/s end to end, producer alone %.0f "
              "jobs/s, lateness p50 %.1f p99 %.1f max %.1f ms",
              r + 1, v[r], pv[r], p.p50, p.p99, p.max);
        dq_client *cl = open_client();
        if (cl) {
            expect_empty(cl, "e2e");
            dq_close(cl);
        }
    }
    tput_row("end to end (first push .. last ack)", v, c->runs,
             "EVALSHA -c 50 -P 16", g_lim.evalsha_p16);
    tput_row("  producer push rate meanwhile", pv, c->runs,
             "EVALSHA -c 50 -P 16", g_lim.evalsha_p16);
    row *rw = add_row("  lateness p50 / p99 under that load");
    snprintf(rw->value, sizeof(rw->value), "%.1f / %.1f",
             median(l50, (size_t)c->runs), median(l99, (size_t)c->runs));
    snprintf(rw->unit, sizeof(rw->unit), "ms");
    munmap(res, rsize);
    munmap(pend, sizeof(int64_t));
}

/* ---- memory ---------------------------------------------------------- */

static double key_usage(const char *suffix) {
    redisReply *r = redisCommand(g_adm, "MEMORY USAGE dq:{%s}:%s SAMPLES 0",
                                 QUEUE, suffix);
    double v = r && r->type == REDIS_REPLY_INTEGER ? (double)r->integer : NAN;
    freeReplyObject(r);
    return v;
}

static void scen_memory(const cfg *c) {
    char title[160];
    snprintf(title, sizeof(title),
             "memory: used_memory per pending job over %ld jobs, delays 1 h + "
             "U(0..24 h) (1 run: deterministic)", c->mem_n);
    add_section(title);
    static const size_t sizes[2] = {16, 256};
    for (int i = 0; i < 2; i++) {
        flushall();
        dq_client *cl = open_client();
        if (cl == NULL)
            return;
        uint64_t seed = 5;
        fill(cl, 1, 1, sizes[i], 0, 0, &seed); /* load the script */
        flushall();
        double m0 = info_field("memory", "used_memory");
        fill(cl, c->mem_n, 1000, sizes[i], 3600000, 86400000, &seed);
        double m1 = info_field("memory", "used_memory");
        double per = (m1 - m0) / (double)c->mem_n;
        double due = key_usage("due") / (double)c->mem_n;
        double jobs = key_usage("jobs") / (double)c->mem_n;
        int64_t sch = 0;
        if (dq_stats(cl, QUEUE, &sch, NULL, NULL, NULL, NULL) != 0 ||
            sch != c->mem_n)
            fail("memory: %" PRId64 " scheduled, expected %ld", sch, c->mem_n);
        dq_close(cl);
        logf_("memory %zu B: %.1f bytes/job (MEMORY USAGE: due ZSET %.1f, "
              "jobs HASH %.1f)", sizes[i], per, due, jobs);
        char name[64];
        snprintf(name, sizeof(name), "memory/job, %zu-byte payload", sizes[i]);
        row *rw = add_row(name);
        snprintf(rw->value, sizeof(rw->value), "%.1f", per);
        snprintf(rw->unit, sizeof(rw->unit), "bytes");
        snprintf(rw->spread, sizeof(rw->spread), "zset %.0f hash %.0f", due,
                 jobs);
        row *ov = add_row("  beyond the payload");
        snprintf(ov->value, sizeof(ov->value), "%.1f", per - (double)sizes[i]);
        snprintf(ov->unit, sizeof(ov->unit), "bytes");
        snprintf(ov->target, sizeof(ov->target), "<= 120");
        set_status(ov, per - (double)sizes[i], 120, 0);
    }
    flushall();
}

/* ---- backlog scaling ------------------------------------------------- */

static void scen_backlog(const cfg *c) {
    char title[200];
    snprintf(title, sizeof(title),
             "backlog: one poll(max 1)+ack round trip, median of %ld x %d "
             "runs, with N far-future jobs pending", c->bl_ops, c->runs);
    add_section(title);
    static const int64_t levels[] = {1000, 100000, 1000000, 10000000};
    flushall();
    dq_client *cl = open_client();
    if (cl == NULL)
        return;
    uint64_t seed = 17;
    long have = 0;
    double base = NAN;
    double *lat = malloc(sizeof(double) * (size_t)c->bl_ops);
    if (lat == NULL)
        return;
    for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
        int64_t L = levels[li];
        if (L > c->max_backlog)
            break;
        /* 10M jobs need ~2.5-3 GB in Redis: check there is room. */
        double avail = info_field("memory", "total_system_memory");
        double used = info_field("memory", "used_memory");
        double need = (double)(L - have) * 300.0 * 1.3;
        long avail_kb = 0;
        FILE *mi = fopen("/proc/meminfo", "r");
        if (mi) {
            char ln[128];
            while (fgets(ln, sizeof(ln), mi))
                if (sscanf(ln, "MemAvailable: %ld kB", &avail_kb) == 1)
                    break;
            fclose(mi);
        }
        if (avail_kb > 0 && need > (double)avail_kb * 1024.0 * 0.8) {
            logf_("backlog: skipping %" PRId64 " (needs ~%.1f GB, %.1f GB "
                  "available; total %.1f GB, used %.1f GB)", L, need / 1e9,
                  (double)avail_kb / 1e6, avail / 1e9, used / 1e9);
            break;
        }
        int64_t tf = mono_ns();
        if (fill(cl, L - have, 1000, 16, 86400000LL, 365LL * 86400000LL,
                 &seed) != 0)
            break;
        have = L;
        logf_("backlog: %" PRId64 " pending (filled in %.1f s, used_memory "
              "%.0f MB)", L, (double)(mono_ns() - tf) / 1e9,
              info_field("memory", "used_memory") / 1e6);
        double med[MAXRUNS];
        for (int r = 0; r < c->runs; r++) {
            fill(cl, c->bl_ops, 1000, 16, 0, 0, &seed);
            long k = 0;
            for (long i = 0; i < c->bl_ops; i++) {
                dq_jobs *js = NULL;
                int64_t t0 = mono_ns();
                int n = dq_poll(cl, QUEUE, 1, LEASE_MS, &js, NULL);
                if (n == 1) {
                    const dq_job *j = dq_jobs_at(js, 0);
                    if (dq_ack(cl, QUEUE, dq_job_id(j), dq_job_token(j)) != 0)
                        fail("backlog: dq_ack: %s", dq_errmsg(cl));
                }
                int64_t t1 = mono_ns();
                dq_jobs_free(js);
                if (n != 1) {
                    fail("backlog: dq_poll returned %d: %s", n,
                         dq_errmsg(cl));
                    break;
                }
                lat[k++] = (double)(t1 - t0) / 1e3;
            }
            med[r] = median(lat, (size_t)k);
        }
        int64_t sch = 0, due = 0;
        if (dq_stats(cl, QUEUE, &sch, &due, NULL, NULL, NULL) != 0 ||
            sch != L || due != 0)
            fail("backlog: %" PRId64 " scheduled / %" PRId64
                 " due, expected %" PRId64 " / 0", sch, due, L);
        double m = median(med, (size_t)c->runs);
        if (li == 0)
            base = m;
        char name[64], num[24];
        fmt_int(num, sizeof(num), (double)L);
        snprintf(name, sizeof(name), "poll+ack, %s pending", num);
        row *rw = add_row(name);
        snprintf(rw->value, sizeof(rw->value), "%.1f", m);
        snprintf(rw->unit, sizeof(rw->unit), "us");
        if (c->runs > 1)
            snprintf(rw->spread, sizeof(rw->spread), "%.1f..%.1f",
                     vmin(med, (size_t)c->runs), vmax(med, (size_t)c->runs));
        snprintf(rw->limit, sizeof(rw->limit), "the 1,000 figure");
        snprintf(rw->lval, sizeof(rw->lval), "%.1f", base);
        snprintf(rw->ratio, sizeof(rw->ratio), "%.2f", m / base);
        if (L == 1000000) {
            snprintf(rw->target, sizeof(rw->target), "<= 1.5x");
            set_status(rw, m / base, 1.5, 0);
        }
        logf_("backlog %" PRId64 ": poll+ack median %.1f us (x%.2f)", L, m,
              m / base);
    }
    free(lat);
    dq_close(cl);
    /* Dropping 10M keys' worth takes seconds: let Redis do it lazily. */
    adm_do("FLUSHALL ASYNC");
}

/* ---- client cost (callgrind) ----------------------------------------- */

/* Worker run under valgrind: each section is dumped on its own. */
static int cost_worker(const char *uri, long n) {
    dq_client *c = NULL;
    if (dq_open(uri, NULL, &c) != 0) {
        fprintf(stderr, "cost worker: %s\n", dq_errmsg(c));
        return 1;
    }
    init_payload();
    uint64_t seed = 3;
    fill(c, 10, 1, 16, 3600000, 0, &seed); /* warm up: script, buffers */
    const char *ids[100], *toks[100];
    int bad = 0;

    CALLGRIND_ZERO_STATS;
    for (long i = 0; i < n; i++)
        bad |= dq_push(c, QUEUE, g_payload, 16, 3600000, NULL, 0, NULL, 0,
                       NULL) != 0;
    CALLGRIND_DUMP_STATS_AT("push1");

    const void *pl[100];
    size_t lens[100];
    int64_t d[100];
    for (int i = 0; i < 100; i++)
        pl[i] = g_payload, lens[i] = 16, d[i] = 3600000;
    CALLGRIND_ZERO_STATS;
    for (long i = 0; i < n / 100; i++)
        bad |= dq_push_batch(c, QUEUE, 100, pl, lens, d, NULL, 0, NULL,
                             NULL) != 100;
    CALLGRIND_DUMP_STATS_AT("push100");

    for (int i = 0; i < 100; i++)
        d[i] = 0;
    for (long i = 0; i < n / 100 * 2; i++)
        bad |= dq_push_batch(c, QUEUE, 100, pl, lens, d, NULL, 0, NULL,
                             NULL) != 100;
    CALLGRIND_ZERO_STATS;
    for (long i = 0; i < n; i++) {
        dq_jobs *js = NULL;
        if (dq_poll(c, QUEUE, 1, LEASE_MS, &js, NULL) != 1) {
            bad = 1;
            break;
        }
        const dq_job *j = dq_jobs_at(js, 0);
        bad |= dq_ack(c, QUEUE, dq_job_id(j), dq_job_token(j)) != 0;
        dq_jobs_free(js);
    }
    CALLGRIND_DUMP_STATS_AT("pollack1");

    CALLGRIND_ZERO_STATS;
    for (long i = 0; i < n / 100; i++) {
        dq_jobs *js = NULL;
        if (dq_poll(c, QUEUE, 100, LEASE_MS, &js, NULL) != 100) {
            bad = 1;
            break;
        }
        for (int k = 0; k < 100; k++) {
            ids[k] = dq_job_id(dq_jobs_at(js, (size_t)k));
            toks[k] = dq_job_token(dq_jobs_at(js, (size_t)k));
        }
        bad |= dq_ack_batch(c, QUEUE, 100, ids, toks, NULL) != 100;
        dq_jobs_free(js);
    }
    CALLGRIND_DUMP_STATS_AT("pollack100");
    dq_close(c);
    if (bad)
        fprintf(stderr, "cost worker: a call failed\n");
    return bad;
}

/* Reads "totals:" (or "summary:") of a callgrind dump file. */
static double cg_total(const char *path, char *desc, size_t dsize) {
    desc[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NAN;
    char ln[512];
    double v = NAN;
    while (fgets(ln, sizeof(ln), f)) {
        if (strncmp(ln, "desc: Trigger: Client Request: ", 31) == 0) {
            snprintf(desc, dsize, "%.100s", ln + 31);
            desc[strcspn(desc, "\n")] = '\0';
        }
        if (strncmp(ln, "summary: ", 9) == 0)
            v = strtod(ln + 9, NULL);
    }
    fclose(f);
    return v;
}

static void scen_cost(const cfg *c) {
    char title[160];
    snprintf(title, sizeof(title),
             "client cost: user-space instructions in the client process "
             "(callgrind Ir: libdelayq+hiredis+libc), %ld ops", c->cost_n);
    add_section(title);
    if (!HAVE_CALLGRIND || !c->callgrind) {
        row *rw = add_row("(skipped)");
        snprintf(rw->status, sizeof(rw->status), "%s",
                 HAVE_CALLGRIND ? "--no-callgrind" : "no valgrind/callgrind.h");
        return;
    }
    flushall();
    char dir[512], outfile[600], nbuf[24];
    snprintf(dir, sizeof(dir), "%s/callgrind", c->out);
    mkdir(dir, 0755);
    snprintf(outfile, sizeof(outfile), "--callgrind-out-file=%s/cg.out", dir);
    snprintf(nbuf, sizeof(nbuf), "%ld", c->cost_n);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", 1);
        if (devnull >= 0)
            dup2(devnull, 2);
        execlp("valgrind", "valgrind", "--tool=callgrind", outfile,
               c->self, "--cost-worker", g_srv.uri, nbuf, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fail("callgrind run failed (exit %d); is valgrind installed?",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return;
    }
    static const struct {
        const char *tag, *name;
        double per;
    } sec[] = {
        {"push1", "instructions per dq_push", 1},
        {"push100", "  per job in push_batch of 100", 1},
        {"pollack1", "per poll(max 1) + ack", 1},
        {"pollack100", "  per job in poll(100)+ack_batch", 1},
    };
    double got[4] = {NAN, NAN, NAN, NAN};
    for (int i = 1; i <= 8; i++) {
        char path[700], desc[128];
        snprintf(path, sizeof(path), "%s/cg.out.%d", dir, i);
        double v = cg_total(path, desc, sizeof(desc));
        for (int k = 0; k < 4; k++)
            if (strcmp(desc, sec[k].tag) == 0)
                got[k] = v;
    }
    for (int k = 0; k < 4; k++) {
        row *rw = add_row(sec[k].name);
        fmt_int(rw->value, sizeof(rw->value), got[k] / (double)c->cost_n);
        snprintf(rw->unit, sizeof(rw->unit), "instr");
        logf_("client cost %s: %.0f instructions per op", sec[k].tag,
              got[k] / (double)c->cost_n);
    }
}

/* ---- main ------------------------------------------------------------ */

static void usage(FILE *f) {
    fputs("usage: dqbench [--quick | --smoke] [--runs N] [--out DIR]\n"
          "               [--max-backlog N] [--no-callgrind] [--only LIST]\n"
          "  LIST: comma-separated of limits,push,drain,e2e,lateness,memory,\n"
          "        backlog,cost (default: all)\n",
          f);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--cost-worker") == 0)
        return cost_worker(argv[2], atol(argv[3]));
    cfg c = {0};
    c.runs = -1;
    c.out = ".";
    c.max_backlog = -1;
    c.callgrind = 1;
    c.self = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0)
            c.mode = 1;
        else if (strcmp(a, "--smoke") == 0)
            c.mode = 2;
        else if (strcmp(a, "--no-callgrind") == 0)
            c.callgrind = 0;
        else if (strcmp(a, "--runs") == 0 && i + 1 < argc)
            c.runs = atoi(argv[++i]);
        else if (strcmp(a, "--out") == 0 && i + 1 < argc)
            c.out = argv[++i];
        else if (strcmp(a, "--max-backlog") == 0 && i + 1 < argc)
            c.max_backlog = atoll(argv[++i]);
        else if (strcmp(a, "--only") == 0 && i + 1 < argc)
            c.only = argv[++i];
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (c.runs < 0)
        c.runs = c.mode == 0 ? 3 : 1;
    if (c.runs < 1 || c.runs > MAXRUNS) {
        fprintf(stderr, "dqbench: --runs must be 1..%d\n", MAXRUNS);
        return 2;
    }
    if (c.max_backlog < 0)
        c.max_backlog = c.mode == 0 ? 10000000 : c.mode == 1 ? 100000 : 1000;
    cfg_sizes(&c);
    mkdir(c.out, 0755);
    init_payload();
    signal(SIGPIPE, SIG_IGN);

    if (th_redis_start(&g_srv, 0, NULL) != 0) {
        fprintf(stderr, "dqbench: cannot start redis-server\n");
        return 1;
    }
    g_adm = th_redis_connect(&g_srv);
    if (g_adm == NULL) {
        th_redis_stop(&g_srv);
        return 1;
    }
    struct timeval tv = {120, 0};
    redisSetTimeout(g_adm, tv);
    redisReply *ver = redisCommand(g_adm, "INFO server");
    char rver[32] = "?";
    if (ver && ver->type == REDIS_REPLY_STRING) {
        const char *p = strstr(ver->str, "redis_version:");
        if (p)
            sscanf(p + 14, "%31[^\r\n]", rver);
    }
    freeReplyObject(ver);
    double hz = info_field("server", "hz");
    logf_("redis-server %s (hz %.0f) on %s, libdelayq %s, mode %s, %d run(s)",
          rver, hz, g_srv.sock, dq_version_string(),
          c.mode == 0 ? "full" : c.mode == 1 ? "quick" : "smoke", c.runs);

    if (want(&c, "limits"))
        scen_limits(&c);
    if (want(&c, "push"))
        scen_push(&c);
    if (want(&c, "drain"))
        scen_drain(&c);
    if (want(&c, "e2e"))
        scen_e2e(&c);
    if (want(&c, "lateness"))
        scen_lateness(&c);
    if (want(&c, "memory"))
        scen_memory(&c);
    if (want(&c, "cost"))
        scen_cost(&c);
    if (want(&c, "backlog"))
        scen_backlog(&c);

    char header[300];
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M", localtime(&now));
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(header, sizeof(header),
             "libdelayq %s bench, %s, redis-server %s (hz %.0f, unix socket, "
             "no persistence), %ld CPUs, mode %s, median of %d run(s)",
             dq_version_string(), date, rver, hz, ncpu,
             c.mode == 0 ? "full" : c.mode == 1 ? "quick" : "smoke", c.runs);
    print_table(stdout, header);
    fflush(stdout);
    char path[512];
    snprintf(path, sizeof(path), "%s/table.txt", c.out);
    FILE *f = fopen(path, "w");
    if (f) {
        print_table(f, header);
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/vars.gp", c.out);
    f = fopen(path, "w");
    if (f) {
        fprintf(f, "# written by dqbench: figures of this run for plots.gp\n"
                   "lim_c1 = %.0f\nlim_p1 = %.0f\nlim_p16 = %.0f\n"
                   "zadd_p1 = %.0f\nzadd_p16 = %.0f\n"
                   "late_p50 = %.3f\nlate_p99 = %.3f\nlate_unc = %.3f\n"
                   "title_run = \"%s\"\n",
                g_lim.evalsha_c1, g_lim.evalsha_p1, g_lim.evalsha_p16,
                g_lim.zadd_p1, g_lim.zadd_p16, g_late_p50, g_late_p99,
                g_late_unc, header);
        fclose(f);
    }
    redisFree(g_adm);
    th_redis_stop(&g_srv);
    if (g_failed)
        fprintf(stderr, "dqbench: FAILED: a consistency check failed "
                        "(see FAIL lines above)\n");
    return g_failed ? 1 : 0;
}
