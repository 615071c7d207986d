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
 * DQ_BENCH_EVENT); a ratio compares figures of the same run, and the table
 * shows medians over --runs runs (default 3).  Memory, client cost and
 * backlog run once (backlog interleaves its queue with a 1k-job queue).
 * Every scenario checks that each job was acked exactly once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <delayq.h>

#include "harness.h"

#ifdef DQ_BENCH_EVENT
#include <delayq-event.h>
#include <event2/event.h>
#endif

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
    /* sizes (cfg_sizes) */
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
        c->lim_n_p1 = 200000, c->lim_n_p16 = 400000, c->lim_n_c1 = 60000;
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
        c->e2e_n = 200000;
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

/* ---- per-run figures ------------------------------------------------- */

/* One figure measured once per run. */
typedef struct series {
    double v[MAXRUNS];
    int n;
} series;

static void s_add(series *s, double x) {
    if (s->n < MAXRUNS)
        s->v[s->n++] = x;
}

static double s_med(const series *s) { return median(s->v, (size_t)s->n); }

/* Median over runs of a[i] / b[i] (ratios only within one run). */
static double s_ratio(const series *a, const series *b) {
    double r[MAXRUNS];
    int n = a->n < b->n ? a->n : b->n;
    for (int i = 0; i < n; i++)
        r[i] = a->v[i] / b->v[i];
    return median(r, (size_t)n);
}

/* ---- the table ------------------------------------------------------- */

typedef struct row {
    char name[200], value[20], unit[10], spread[48], limit[28], lval[12],
        ratio[8], target[14], status[40];
} row;

static row g_rows[80];
static int g_nrows;

static row *add_row(const char *name) {
    static row spare;
    if (g_nrows >= (int)(sizeof(g_rows) / sizeof(g_rows[0])))
        return &spare;
    row *r = &g_rows[g_nrows++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    return r;
}

static void add_section(const char *title) {
    row *r = add_row(title);
    r->unit[0] = '\x01'; /* printed as a section line */
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

/* Target column and status: higher is better (ge=1) or lower is better. */
static void set_target(row *r, const char *text, double v, double target,
                       int ge) {
    snprintf(r->target, sizeof(r->target), "%s", text);
    if (isnan(v)) {
        snprintf(r->status, sizeof(r->status), "n/a");
        return;
    }
    int met = ge ? v >= target : v <= target;
    double pct = (v / target - 1) * 100;
    snprintf(r->status, sizeof(r->status), "%s (%+.0f%%)",
             met ? "met" : "MISSED", pct);
}

/* A throughput row: median of runs, their spread, the limit of the same
 * runs and the median of the per-run ratios. */
static row *tput_row(const char *name, const series *v, const char *lname,
                     const series *lim) {
    row *r = add_row(name);
    fmt_int(r->value, sizeof(r->value), s_med(v));
    snprintf(r->unit, sizeof(r->unit), "jobs/s");
    if (v->n > 1) {
        char a[16], b[16];
        fmt_int(a, sizeof(a), vmin(v->v, (size_t)v->n) / 1000);
        fmt_int(b, sizeof(b), vmax(v->v, (size_t)v->n) / 1000);
        snprintf(r->spread, sizeof(r->spread), "%sk..%sk", a, b);
    }
    if (lname != NULL && lim != NULL && lim->n > 0) {
        snprintf(r->limit, sizeof(r->limit), "%s", lname);
        fmt_int(r->lval, sizeof(r->lval), s_med(lim));
        snprintf(r->ratio, sizeof(r->ratio), "%.2f", s_ratio(v, lim));
    }
    return r;
}

/* A "server time per job" row under a throughput row. */
static void srv_row(const char *name, const series *us) {
    row *r = add_row(name);
    double m = s_med(us);
    snprintf(r->value, sizeof(r->value), "%.2f", m);
    snprintf(r->unit, sizeof(r->unit), "us");
    snprintf(r->status, sizeof(r->status), "= %.0fk jobs/s if Redis-bound",
             1e3 / m);
}

/* A row of a value in ms/us with its spread over runs. */
static row *val_row(const char *name, const series *s, const char *unit,
                    const char *fmt) {
    row *r = add_row(name);
    snprintf(r->value, sizeof(r->value), fmt, s_med(s));
    snprintf(r->unit, sizeof(r->unit), "%s", unit);
    if (s->n > 1) {
        char a[20], b[20];
        snprintf(a, sizeof(a), fmt, vmin(s->v, (size_t)s->n));
        snprintf(b, sizeof(b), fmt, vmax(s->v, (size_t)s->n));
        snprintf(r->spread, sizeof(r->spread), "%s..%s", a, b);
    }
    return r;
}

static void print_table(FILE *f, const char *header) {
    const char *fmt = "%-40s %11s %-6s %-17s %-21s %9s %5s  %-10s %s\n";
    char line[160];
    fprintf(f, "%s\n", header);
    fprintf(f, fmt, "scenario", "value", "unit", "runs min..max",
            "limit (same runs)", "limit", "ratio", "target", "status");
    memset(line, '-', 147);
    line[147] = '\0';
    fprintf(f, "%s\n", line);
    for (int i = 0; i < g_nrows; i++) {
        row *r = &g_rows[i];
        if (r->unit[0] == '\x01') {
            fprintf(f, "[%s]\n", r->name);
            continue;
        }
        char out[400];
        snprintf(out, sizeof(out), fmt, r->name, r->value, r->unit,
                 r->spread, r->limit, r->lval, r->ratio, r->target,
                 r->status);
        /* no trailing blanks */
        size_t n = strlen(out);
        while (n > 1 && out[n - 2] == ' ')
            out[--n - 1] = '\n', out[n] = '\0';
        fputs(out, f);
    }
}


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

/* Pushes n jobs to q in batches of `batch`, delays base + U(0..spread). */
static int fill_q(dq_client *c, const char *q, long n, int batch, size_t plen,
                  int64_t base, int64_t spread, uint64_t *seed) {
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
        int k = dq_push_batch(c, q, (size_t)b, pl, lens, d, NULL, 0, NULL,
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

static int fill(dq_client *c, long n, int batch, size_t plen, int64_t base,
                int64_t spread, uint64_t *seed) {
    return fill_q(c, QUEUE, n, batch, plen, base, spread, seed);
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
    if (c == NULL)
        return;
    if (dq_stats(c, QUEUE, &sch, &due, &inf, &dead, NULL) != 0)
        fail("%s: dq_stats: %s", what, dq_errmsg(c));
    else if (sch || due || inf || dead)
        fail("%s: queue not empty afterwards: scheduled %" PRId64
             " due %" PRId64 " inflight %" PRId64 " dead %" PRId64,
             what, sch, due, inf, dead);
}


/* ---- figures of all runs ---------------------------------------------- */

enum { L_C1, L_P1, L_P16, L_ZP1, L_ZP16, NLIM };
static const char *const lim_names[NLIM] = {
    "EVALSHA HSET+ZADD  -c 1  -P 1", "EVALSHA HSET+ZADD  -c 50 -P 1",
    "EVALSHA HSET+ZADD  -c 50 -P 16", "ZADD               -c 50 -P 1",
    "ZADD               -c 50 -P 16"};
static const char *const lim_short[NLIM] = {
    "EVALSHA -c 1 -P 1", "EVALSHA -c 50 -P 1", "EVALSHA -c 50 -P 16",
    "ZADD -c 50 -P 1", "ZADD -c 50 -P 16"};
static series g_lim[NLIM];

static const int push_batches[4] = {1, 10, 100, 1000};
static series g_push[4], g_push_srv[4];

static const struct {
    int k, max;
} drain_conf[4] = {{1, 100}, {1, 1000}, {2, 1000}, {4, 1000}};
static series g_drain[4], g_drain_srv[4];

static series g_e2e, g_e2e_prod, g_e2e_l50, g_e2e_l99;

/* Lateness per consumer kind: 0 = dq_poll_wait loop, 1 = the libevent
 * consumer of delayq-event.h (when the library has it). */
#ifdef DQ_BENCH_EVENT
#define NLATE 2
#else
#define NLATE 1
#endif
static const char *const late_kind[2] = {"dq_poll_wait", "event_consumer"};
static const char *const late_desc[2] = {"dq_poll_wait (max 100)",
                                         "event consumer (conc 100)"};
static series g_late[NLATE][4]; /* p50 p95 p99 max, ms */
static double g_late_unc;         /* ms, worst over runs */
static double *g_late_all[NLATE]; /* samples of all runs */
static size_t g_late_nall[NLATE];

/* ---- limits: redis-benchmark on the same socket ---------------------- */

static char g_sha[48]; /* the minimal HSET+ZADD script */

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

static double bench_limit(int clients, int pipeline, long n, int zadd) {
    char sn[24], sc[16], sp[16];
    snprintf(sn, sizeof(sn), "%ld", n);
    snprintf(sc, sizeof(sc), "%d", clients);
    snprintf(sp, sizeof(sp), "%d", pipeline);
    char pl[17];
    memcpy(pl, g_payload, 16); /* the 16-byte payload of the push runs */
    pl[16] = '\0';
    char *base[] = {"redis-benchmark", "-s", g_srv.sock, "-n", sn, "-c", sc,
                    "-P", sp, "-r", "100000000", "--csv", NULL};
    char *ev[] = {"EVALSHA", g_sha, "2", "{lim}:jobs", "{lim}:due",
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
    flushall();
    double v = redis_benchmark(args);
    flushall();
    return v;
}

static void load_limit_script(void) {
    redisReply *r = adm("SCRIPT LOAD %s",
                        "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) "
                        "redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) "
                        "return 1");
    if (r != NULL && r->type == REDIS_REPLY_STRING)
        snprintf(g_sha, sizeof(g_sha), "%s", r->str);
    freeReplyObject(r);
}

static void run_limits(const cfg *c) {
    s_add(&g_lim[L_C1], bench_limit(1, 1, c->lim_n_c1, 0));
    s_add(&g_lim[L_P1], bench_limit(50, 1, c->lim_n_p1, 0));
    s_add(&g_lim[L_P16], bench_limit(50, 16, c->lim_n_p16, 0));
    s_add(&g_lim[L_ZP1], bench_limit(50, 1, c->lim_n_p1, 1));
    s_add(&g_lim[L_ZP16], bench_limit(50, 16, c->lim_n_p16 * 2, 1));
    logf_("limits: EVALSHA c1 %.0f, c50 %.0f, c50 P16 %.0f; ZADD c50 %.0f, "
          "P16 %.0f ops/s", g_lim[L_C1].v[g_lim[L_C1].n - 1],
          g_lim[L_P1].v[g_lim[L_P1].n - 1], g_lim[L_P16].v[g_lim[L_P16].n - 1],
          g_lim[L_ZP1].v[g_lim[L_ZP1].n - 1],
          g_lim[L_ZP16].v[g_lim[L_ZP16].n - 1]);
}

/* ---- push ------------------------------------------------------------ */

/* One push run: n jobs, one client, batch 1 = dq_push.  Returns jobs/s;
 * *srv_us = server time in EVALSHA per job. */
static double push_run(int batch, long n, double *srv_us) {
    flushall();
    dq_client *cl = open_client();
    if (cl == NULL)
        return NAN;
    uint64_t seed = 7;
    /* Warm-up: loads the scripts (first EVALSHA -> NOSCRIPT -> EVAL). */
    fill(cl, 1, 1, 16, 3600000, 0, &seed);
    dq_stats(cl, QUEUE, NULL, NULL, NULL, NULL, NULL);
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

static void run_push(const cfg *c) {
    for (int b = 0; b < 4; b++) {
        long n = b == 0 ? c->push1_n : c->pushb_n[b - 1];
        double srv = NAN;
        double v = push_run(push_batches[b], n, &srv);
        s_add(&g_push[b], v);
        s_add(&g_push_srv[b], srv);
        char prof[32];
        snprintf(prof, sizeof(prof), "push%d", push_batches[b]);
        save_profile(c, prof, (double)n);
        logf_("push batch %d: %.0f jobs/s (server %.2f us/job in EVALSHA)",
              push_batches[b], v, srv);
    }
}

/* ---- drain: N due jobs, k consumer processes ------------------------- */

typedef struct slot {
    volatile long count;
    volatile int64_t t_end;
    volatile int ok;
} slot;

/* A consumer process: polls (max) and acks in batches until nothing is due.
 * Says it is ready, then waits for the barrier (EOF on go_fd). */
static void drain_child(int max, slot *s, int ready_fd, int go_fd) {
    dq_client *c = open_client();
    char x = 1;
    if (c == NULL || write(ready_fd, &x, 1) != 1)
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

/* Runs k consumer processes; returns the wall seconds from the barrier to
 * the last ack of any of them, or NAN. */
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

static void run_drain(const cfg *c) {
    slot *slots = shared_alloc(sizeof(slot) * 16);
    if (slots == NULL)
        return;
    for (int ci = 0; ci < 4; ci++) {
        flushall();
        dq_client *cl = open_client();
        if (cl == NULL)
            break;
        uint64_t seed = 11;
        fill(cl, c->drain_n, 1000, 16, 0, 0, &seed);
        dq_stats(cl, QUEUE, NULL, NULL, NULL, NULL, NULL);
        reset_stats();
        double secs = run_consumers(drain_conf[ci].k, drain_conf[ci].max,
                                    slots, c->drain_n);
        double v = (double)c->drain_n / secs;
        double srv = srv_us_per_job((double)c->drain_n);
        s_add(&g_drain[ci], v);
        s_add(&g_drain_srv[ci], srv);
        char prof[32];
        snprintf(prof, sizeof(prof), "drain-%dc-max%d", drain_conf[ci].k,
                 drain_conf[ci].max);
        save_profile(c, prof, (double)c->drain_n);
        expect_empty(cl, "drain");
        dq_close(cl);
        logf_("drain %ld, %d consumer(s), max %d: %.0f jobs/s (server %.2f "
              "us/job in EVALSHA)", c->drain_n, drain_conf[ci].k,
              drain_conf[ci].max, v, srv);
    }
    munmap(slots, sizeof(slot) * 16);
}

/* ---- lateness and end to end ---------------------------------------- */

/* Results of one consumer process that records lateness. */
typedef struct late_res {
    volatile long got;
    volatile int64_t t_end; /* mono ns of the last ack */
    volatile int ok;
    volatile int64_t srv0_ms;    /* e2e: start of the due window */
    volatile int64_t t_push_end; /* e2e: producer done (mono ns) */
    double lat_ms[];             /* one per job received */
} late_res;

/* Consumer using dq_poll_wait: receives jobs until `expect` or the time
 * bound; lateness = (receive time in server clock) - due time. */
static void late_child(long expect, int max, double offset_us,
                       int64_t bound_ms, late_res *res, int ready_fd,
                       int go_fd) {
    dq_client *c = open_client();
    if (c == NULL)
        _exit(2);
    dq_jobs *js = NULL;
    /* The first call opens and subscribes the wake-up connection. */
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

#ifdef DQ_BENCH_EVENT
/* The libevent consumer in a process of its own: its handler
 * records the lateness and returns DQ_JOB_OK (the consumer acks). */
typedef struct ev_ctx {
    late_res *res;
    long expect;
    double offset_us;
    struct event_base *base;
    dq_async *a;
    dq_consumer *cons;
    int64_t deadline, t_conn;
    int ready_fd, signalled;
} ev_ctx;

static int ev_handler(dq_consumer *cons, const dq_job *job, void *ud) {
    ev_ctx *x = ud;
    int64_t now = real_us();
    (void)cons;
    if (x->res->got < x->expect)
        x->res->lat_ms[x->res->got++] =
            ((double)now + x->offset_us) / 1000.0 -
            (double)dq_job_due_ms(job);
    return DQ_JOB_OK;
}

/* Every 5 ms: says "ready" 200 ms after connecting, stops when every job
 * was received and acked (or at the time bound). */
static void ev_tick(evutil_socket_t fd, short what, void *ud) {
    ev_ctx *x = ud;
    (void)fd;
    (void)what;
    int64_t now = mono_ns();
    if (!x->signalled && dq_async_connected(x->a)) {
        if (x->t_conn == 0)
            x->t_conn = now;
        else if (now - x->t_conn > 200000000) {
            char b = 1;
            if (write(x->ready_fd, &b, 1) != 1)
                event_base_loopbreak(x->base);
            x->signalled = 1;
        }
    }
    if ((x->res->got >= x->expect && dq_consumer_running(x->cons) == 0 &&
         dq_async_pending(x->a) == 0) ||
        now > x->deadline)
        event_base_loopbreak(x->base);
}

static void late_child_event(long expect, double offset_us, int64_t bound_ms,
                             late_res *res, int ready_fd) {
    ev_ctx x;
    memset(&x, 0, sizeof(x));
    x.res = res;
    x.expect = expect;
    x.offset_us = offset_us;
    x.ready_fd = ready_fd;
    x.deadline = mono_ns() + bound_ms * 1000000;
    x.base = event_base_new();
    if (x.base == NULL || dq_async_open(x.base, g_srv.uri, NULL, &x.a) != 0 ||
        dq_consumer_new(x.a, QUEUE, ev_handler, &x, &x.cons) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_CONCURRENCY, 100) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_LEASE_MS, LEASE_MS) != 0 ||
        dq_consumer_set_int(x.cons, DQ_COPT_EXTEND, 0) != 0 ||
        dq_consumer_start(x.cons) != 0) {
        fail("event consumer: cannot start: %s", dq_async_errmsg(x.a));
        _exit(2);
    }
    struct event *tick = event_new(x.base, -1, EV_PERSIST, ev_tick, &x);
    struct timeval tv = {0, 5000};
    event_add(tick, &tv);
    event_base_dispatch(x.base);
    event_free(tick);
    res->t_end = mono_ns();
    res->ok = res->got == expect;
    dq_consumer_free(x.cons);
    dq_async_free(x.a);
    event_base_free(x.base);
    _exit(0);
}
#endif

/* One lateness run: a consumer process of the given kind waits, then this
 * process pushes late_n jobs due late_base..late_base+late_spread ms on. */
static void run_lateness(const cfg *c, int run, int kind) {
    long n = c->late_n;
    size_t rsize = sizeof(late_res) + sizeof(double) * (size_t)n;
    late_res *res = shared_alloc(rsize);
    if (res == NULL)
        return;
    if (g_late_all[kind] == NULL)
        g_late_all[kind] = malloc(sizeof(double) * (size_t)n * (size_t)c->runs);
    flushall();
    clk_cal before = calibrate(g_adm, 15);
    int ready[2], go[2];
    if (pipe(ready) || pipe(go))
        return;
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
#ifdef DQ_BENCH_EVENT
        if (kind == 1)
            late_child_event(n, before.offset_us,
                             c->late_base_ms + c->late_spread_ms + 10000, res,
                             ready[1]);
#endif
        late_child(n, 100, before.offset_us,
                   c->late_base_ms + c->late_spread_ms + 10000, res, ready[1],
                   go[0]);
    }
    close(ready[1]);
    close(go[0]);
    char x;
    if (read(ready[0], &x, 1) != 1)
        fail("lateness: consumer did not start");
    close(ready[0]);
    close(go[1]);
    dq_client *cl = open_client();
    uint64_t seed = 1000 + (uint64_t)run;
    if (cl)
        fill(cl, n, (int)(n < 1000 ? n : 1000), 16, c->late_base_ms,
             c->late_spread_ms, &seed);
    int st;
    waitpid(pid, &st, 0);
    clk_cal after = calibrate(g_adm, 15);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !res->ok)
        fail("lateness (%s): consumer got %ld of %ld jobs", late_kind[kind],
             res->got, n);
    expect_empty(cl, "lateness");
    dq_close(cl);
    double drift = fabs(after.offset_us - before.offset_us);
    double u = (before.unc_us > drift ? before.unc_us : drift) / 1000.0;
    g_late_unc = u > g_late_unc ? u : g_late_unc;
    size_t got = (size_t)res->got;
    if (g_late_all[kind]) {
        memcpy(g_late_all[kind] + g_late_nall[kind], res->lat_ms,
               got * sizeof(double));
        g_late_nall[kind] += got;
    }
    pctl p = percentiles(res->lat_ms, got);
    s_add(&g_late[kind][0], p.p50);
    s_add(&g_late[kind][1], p.p95);
    s_add(&g_late[kind][2], p.p99);
    s_add(&g_late[kind][3], p.max);
    logf_("lateness %s: p50 %.2f p95 %.2f p99 %.2f max %.2f ms (clock offset "
          "%.1f us +-%.1f us, drift %.1f us)", late_kind[kind], p.p50, p.p95,
          p.p99, p.max,
          before.offset_us, before.unc_us, drift);
    munmap(res, rsize);
}

/* Producer process of the end-to-end run: pushes n jobs in batches of 100,
 * as fast as it can, each due at a uniform point of the 2 s window that
 * starts at res->srv0_ms (server clock; a job pushed after its due time is
 * due at once). */
static void e2e_producer(long n, double offset_us, late_res *res,
                         int ready_fd, int go_fd) {
    dq_client *c = open_client();
    char x = 1;
    if (c == NULL || write(ready_fd, &x, 1) != 1 || read(go_fd, &x, 1) < 0)
        _exit(2);
    uint64_t seed = 99;
    const void *pl[100];
    size_t lens[100];
    int64_t d[100];
    int rc = 0;
    for (long done = 0; done < n && rc == 0;) {
        int b = (int)(n - done < 100 ? n - done : 100);
        int64_t now_ms = (int64_t)(((double)real_us() + offset_us) / 1000.0);
        for (int i = 0; i < b; i++) {
            int64_t at = res->srv0_ms + rng_range(&seed, 2001);
            pl[i] = g_payload;
            lens[i] = 16;
            d[i] = at > now_ms ? at - now_ms : 0;
        }
        if (dq_push_batch(c, QUEUE, (size_t)b, pl, lens, d, NULL, 0, NULL,
                          NULL) != b) {
            fail("e2e: dq_push_batch: %s", dq_errmsg(c));
            rc = 3;
        }
        done += b;
    }
    res->t_push_end = mono_ns();
    dq_close(c);
    _exit(rc);
}

static void run_e2e(const cfg *c) {
    long n = c->e2e_n;
    size_t rsize = sizeof(late_res) + sizeof(double) * (size_t)n;
    late_res *res = shared_alloc(rsize);
    if (res == NULL)
        return;
    flushall();
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
        e2e_producer(n, cal.offset_us, res, ready[1], go[0]);
    }
    close(ready[1]);
    close(go[0]);
    char x;
    for (int i = 0; i < 2; i++)
        if (read(ready[0], &x, 1) != 1)
            fail("e2e: a process did not start");
    close(ready[0]);
    int64_t t0 = mono_ns();
    res->srv0_ms = (int64_t)(((double)real_us() + cal.offset_us) / 1000.0);
    close(go[1]);
    int st1, st2;
    waitpid(pp, &st1, 0);
    waitpid(pc, &st2, 0);
    if (!WIFEXITED(st1) || WEXITSTATUS(st1) != 0 || !WIFEXITED(st2) ||
        WEXITSTATUS(st2) != 0 || !res->ok)
        fail("e2e: consumer got %ld of %ld jobs", res->got, n);
    double v = (double)n / ((double)(res->t_end - t0) / 1e9);
    double pv = (double)n / ((double)(res->t_push_end - t0) / 1e9);
    pctl p = percentiles(res->lat_ms, (size_t)res->got);
    s_add(&g_e2e, v);
    s_add(&g_e2e_prod, pv);
    s_add(&g_e2e_l50, p.p50);
    s_add(&g_e2e_l99, p.p99);
    logf_("e2e: %.0f jobs/s end to end (offered %.0f/s), producer %.0f "
          "jobs/s, lateness p50 %.1f p99 %.1f max %.1f ms",
          v, (double)n / 2.0, pv, p.p50, p.p99, p.max);
    dq_client *cl = open_client();
    expect_empty(cl, "e2e");
    dq_close(cl);
    munmap(res, rsize);
}

/* ---- memory ---------------------------------------------------------- */

static double key_usage(const char *suffix) {
    redisReply *r = redisCommand(g_adm, "MEMORY USAGE dq:{%s}:%s SAMPLES 0",
                                 QUEUE, suffix);
    double v = r && r->type == REDIS_REPLY_INTEGER ? (double)r->integer : NAN;
    freeReplyObject(r);
    return v;
}

/* What an ack leaves behind for DQ_OPT_DONE_TTL_MS (the done record that
 * answers retried pushes and acks): mem_n jobs pushed, polled and acked,
 * then used_memory against the empty server. */
static void memory_done_records(const cfg *c) {
    flushall();
    dq_client *cl = open_client();
    if (cl == NULL)
        return;
    uint64_t seed = 5;
    fill(cl, 1, 1, 16, 0, 0, &seed); /* load the scripts */
    dq_jobs *js = NULL;
    if (dq_poll(cl, QUEUE, 1, 60000, &js, NULL) == 1)
        ack_all(cl, js);
    dq_jobs_free(js);
    flushall();
    double m0 = info_field("memory", "used_memory");
    fill(cl, c->mem_n, 1000, 16, 0, 0, &seed);
    long acked = 0;
    for (;;) {
        js = NULL;
        int k = dq_poll(cl, QUEUE, 1000, 60000, &js, NULL);
        if (k > 0)
            acked += ack_all(cl, js);
        dq_jobs_free(js);
        if (k <= 0)
            break;
    }
    double m1 = info_field("memory", "used_memory");
    if (acked != c->mem_n)
        fail("memory: acked %ld, expected %ld", acked, c->mem_n);
    double done = key_usage("done") / (double)c->mem_n;
    dq_close(cl);
    logf_("memory of done records: %.1f bytes/acked job (MEMORY USAGE: done "
          "ZSET %.1f)", (m1 - m0) / (double)c->mem_n, done);
    row *rw = add_row("memory/acked job in the done window");
    snprintf(rw->value, sizeof(rw->value), "%.1f", (m1 - m0) / (double)c->mem_n);
    snprintf(rw->unit, sizeof(rw->unit), "bytes");
    snprintf(rw->spread, sizeof(rw->spread), "done zset %.0f", done);
}

static void scen_memory(const cfg *c) {
    char title[160];
    snprintf(title, sizeof(title),
             "memory: INFO used_memory per pending job over %ld jobs, delays "
             "1 h + U(0..24 h); 1 run (deterministic)", c->mem_n);
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
        snprintf(rw->spread, sizeof(rw->spread), "zset %.0f + hash %.0f", due,
                 jobs);
        row *ov = add_row("  beyond the payload");
        snprintf(ov->value, sizeof(ov->value), "%.1f", per - (double)sizes[i]);
        snprintf(ov->unit, sizeof(ov->unit), "bytes");
        set_target(ov, "<= 120", per - (double)sizes[i], 120, 0);
    }
    memory_done_records(c);
    flushall();
}

/* ---- backlog scaling ------------------------------------------------- */

#define REF_QUEUE "bench-ref"
#define BL_BLOCK 100

/* BL_BLOCK poll(max 1)+ack round trips on q, each timed; appends the
 * latencies (us) to lat and adds the server's EVALSHA time to *srv_us. */
static void bl_block(dq_client *cl, const char *q, double *lat, long *k,
                     double *srv_us) {
    reset_stats();
    for (int i = 0; i < BL_BLOCK; i++) {
        dq_jobs *js = NULL;
        int64_t t0 = mono_ns();
        int n = dq_poll(cl, q, 1, LEASE_MS, &js, NULL);
        if (n == 1) {
            const dq_job *j = dq_jobs_at(js, 0);
            if (dq_ack(cl, q, dq_job_id(j), dq_job_token(j)) != 0)
                fail("backlog: dq_ack: %s", dq_errmsg(cl));
        }
        int64_t t1 = mono_ns();
        dq_jobs_free(js);
        if (n != 1) {
            fail("backlog: dq_poll returned %d: %s", n, dq_errmsg(cl));
            return;
        }
        lat[(*k)++] = (double)(t1 - t0) / 1e3;
    }
    double calls, usec;
    cmdstat("evalsha", &calls, &usec);
    *srv_us += usec;
}

static long mem_available_kb(void) {
    long kb = 0;
    FILE *mi = fopen("/proc/meminfo", "r");
    if (mi) {
        char ln[128];
        while (fgets(ln, sizeof(ln), mi))
            if (sscanf(ln, "MemAvailable: %ld kB", &kb) == 1)
                break;
        fclose(mi);
    }
    return kb;
}

static void check_pending(dq_client *cl, const char *q, int64_t want_sch) {
    int64_t sch = 0, due = 0, inf = 0;
    if (dq_stats(cl, q, &sch, &due, &inf, NULL, NULL) != 0 ||
        sch != want_sch || due != 0 || inf != 0)
        fail("backlog: %s: %" PRId64 " scheduled / %" PRId64 " due / %" PRId64
             " in flight, expected %" PRId64 " / 0 / 0",
             q, sch, due, inf, want_sch);
}

static void scen_backlog(const cfg *c) {
    char title[240];
    snprintf(title, sizeof(title),
             "backlog: one poll(max 1)+ack round trip with N far-future jobs "
             "pending, median of %ld; interleaved in blocks of %d with a "
             "1,000-job queue (the ratio's base)", c->bl_ops * c->runs,
             BL_BLOCK);
    add_section(title);
    static const int64_t levels[] = {1000, 100000, 1000000, 10000000};
    flushall();
    dq_client *cl = open_client();
    if (cl == NULL)
        return;
    uint64_t seed = 17;
    int64_t far = 86400000LL, spread = 365LL * 86400000LL;
    fill_q(cl, REF_QUEUE, 1000, 1000, 16, far, spread, &seed);
    long have = 0;
    long nops = (c->bl_ops + BL_BLOCK - 1) / BL_BLOCK * BL_BLOCK;
    double *lb = malloc(sizeof(double) * (size_t)nops);
    double *lr = malloc(sizeof(double) * (size_t)nops);
    if (lb == NULL || lr == NULL)
        goto out;
    for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
        int64_t L = levels[li];
        if (L > c->max_backlog)
            break;
        double need = (double)(L - have) * 300.0 * 1.3;
        long avail_kb = mem_available_kb();
        if (avail_kb > 0 && need > (double)avail_kb * 1024.0 * 0.8) {
            logf_("backlog: skipping %" PRId64 " pending: needs ~%.1f GB, "
                  "%.1f GB available", L, need / 1e9, (double)avail_kb / 1e6);
            row *rw = add_row("(larger backlog skipped: memory)");
            (void)rw;
            break;
        }
        int64_t tf = mono_ns();
        if (fill(cl, L - have, 1000, 16, far, spread, &seed) != 0)
            break;
        have = L;
        logf_("backlog: %" PRId64 " pending (filled in %.1f s, used_memory "
              "%.0f MB)", L, (double)(mono_ns() - tf) / 1e9,
              info_field("memory", "used_memory") / 1e6);
        series big, ref, sbig, sref, ratio;
        memset(&big, 0, sizeof(big));
        ref = sbig = sref = ratio = big;
        for (int r = 0; r < c->runs; r++) {
            fill_q(cl, QUEUE, nops, 1000, 16, 0, 0, &seed);
            fill_q(cl, REF_QUEUE, nops, 1000, 16, 0, 0, &seed);
            long kb = 0, kr = 0;
            double ub = 0, ur = 0;
            for (long b = 0; b < nops / BL_BLOCK; b++) {
                /* ABBA order: drift in machine speed cancels out. */
                if (b % 2 == 0) {
                    bl_block(cl, REF_QUEUE, lr, &kr, &ur);
                    bl_block(cl, QUEUE, lb, &kb, &ub);
                } else {
                    bl_block(cl, QUEUE, lb, &kb, &ub);
                    bl_block(cl, REF_QUEUE, lr, &kr, &ur);
                }
            }
            double mb = median(lb, (size_t)kb), mr = median(lr, (size_t)kr);
            s_add(&big, mb);
            s_add(&ref, mr);
            s_add(&ratio, mb / mr);
            s_add(&sbig, ub / (double)kb);
            s_add(&sref, ur / (double)kr);
        }
        check_pending(cl, QUEUE, L);
        check_pending(cl, REF_QUEUE, 1000);
        char name[64], num[24];
        fmt_int(num, sizeof(num), (double)L);
        snprintf(name, sizeof(name), "poll+ack, %s pending", num);
        row *rw = val_row(name, &big, "us", "%.1f");
        snprintf(rw->limit, sizeof(rw->limit), "1,000-job queue");
        snprintf(rw->lval, sizeof(rw->lval), "%.1f", s_med(&ref));
        snprintf(rw->ratio, sizeof(rw->ratio), "%.2f", s_med(&ratio));
        if (L == 1000000)
            set_target(rw, "<= 1.5x", s_med(&ratio), 1.5, 0);
        row *sr = val_row("  server time in EVALSHA (both)", &sbig, "us",
                          "%.1f");
        snprintf(sr->limit, sizeof(sr->limit), "1,000-job queue");
        snprintf(sr->lval, sizeof(sr->lval), "%.1f", s_med(&sref));
        snprintf(sr->ratio, sizeof(sr->ratio), "%.2f", s_ratio(&sbig, &sref));
        char prof[32];
        snprintf(prof, sizeof(prof), "backlog-%" PRId64, L);
        save_profile(c, prof, BL_BLOCK);
        logf_("backlog %" PRId64 ": poll+ack median %.1f us vs %.1f us on the "
              "1k queue (x%.2f); server %.1f vs %.1f us", L, s_med(&big),
              s_med(&ref), s_med(&ratio), s_med(&sbig), s_med(&sref));
    }
out:
    free(lb);
    free(lr);
    dq_close(cl);
    /* Dropping 10M jobs takes seconds: let Redis do it lazily. */
    adm_do("FLUSHALL ASYNC");
}

/* ---- rows of the per-run scenarios ------------------------------------- */

static void rows_limits(void) {
    add_section("limit: redis-benchmark on the same socket, minimal script "
                "(1 HSET + 1 ZADD) and plain ZADD, ops/s");
    for (int i = 0; i < NLIM; i++) {
        row *rw = val_row(lim_names[i], &g_lim[i], "ops/s", "%.0f");
        fmt_int(rw->value, sizeof(rw->value), s_med(&g_lim[i]));
        if (g_lim[i].n > 1) {
            char a[16], b[16];
            fmt_int(a, sizeof(a), vmin(g_lim[i].v, (size_t)g_lim[i].n) / 1000);
            fmt_int(b, sizeof(b), vmax(g_lim[i].v, (size_t)g_lim[i].n) / 1000);
            snprintf(rw->spread, sizeof(rw->spread), "%sk..%sk", a, b);
        }
    }
}

static void rows_push(void) {
    add_section("push: one client, 16-byte payloads, delays 1 h + U(0..24 h), "
                "generated ids");
    for (int b = 0; b < 4; b++) {
        char name[64];
        if (b == 0)
            snprintf(name, sizeof(name), "push, 1 job per round trip");
        else
            snprintf(name, sizeof(name), "push_batch of %d", push_batches[b]);
        int p16 = b > 0;
        row *rw = tput_row(name, &g_push[b], lim_short[p16 ? L_P16 : L_C1],
                           &g_lim[p16 ? L_P16 : L_C1]);
        if (b == 0)
            set_target(rw, ">= 25,000", s_med(&g_push[b]), 25000, 1);
        else if (push_batches[b] == 1000)
            set_target(rw, ">= 150,000", s_med(&g_push[b]), 150000, 1);
        srv_row("  server time in EVALSHA per job", &g_push_srv[b]);
    }
}

static void rows_drain(const cfg *c) {
    char title[160];
    snprintf(title, sizeof(title),
             "drain: %ld due jobs (16 B), consumer processes poll(max) + "
             "ack_batch, lease 60 s", c->drain_n);
    add_section(title);
    for (int ci = 0; ci < 4; ci++) {
        char name[64];
        snprintf(name, sizeof(name), "drain, %d consumer%s, max %d",
                 drain_conf[ci].k, drain_conf[ci].k > 1 ? "s" : "",
                 drain_conf[ci].max);
        row *rw = tput_row(name, &g_drain[ci], lim_short[L_P16],
                           &g_lim[L_P16]);
        if (drain_conf[ci].k == 1 && drain_conf[ci].max == 1000)
            set_target(rw, ">= 100,000", s_med(&g_drain[ci]), 100000, 1);
        if (drain_conf[ci].k == 1)
            srv_row("  server time in EVALSHA per job", &g_drain_srv[ci]);
    }
}

static void rows_e2e(const cfg *c) {
    char title[200];
    snprintf(title, sizeof(title),
             "end to end: %ld jobs due over 2 s (offered %ld/s): 1 producer "
             "(batches of 100) + 1 consumer (poll_wait max 1000) at once",
             c->e2e_n, c->e2e_n / 2);
    add_section(title);
    tput_row("jobs through (first push..last ack)", &g_e2e, lim_short[L_P16],
             &g_lim[L_P16]);
    tput_row("  producer push rate meanwhile", &g_e2e_prod, lim_short[L_P16],
             &g_lim[L_P16]);
    val_row("  lateness p50 (backlog of consumer)", &g_e2e_l50, "ms", "%.1f");
    val_row("  lateness p99", &g_e2e_l99, "ms", "%.1f");
}

static void rows_lateness(const cfg *c) {
    char title[200];
    snprintf(title, sizeof(title),
             "lateness at light load: %ld jobs due %" PRId64 "..%" PRId64
             " ms after push, 1 consumer process, receive time - due time, "
             "both server clock", c->late_n, c->late_base_ms,
             c->late_base_ms + c->late_spread_ms);
    add_section(title);
    static const char *const names[4] = {"p50", "p95", "p99", "max"};
    for (int k = 0; k < NLATE; k++) {
        for (int i = 0; i < 4; i++) {
            char nm[64];
            snprintf(nm, sizeof(nm), "lateness %s, %s", names[i],
                     late_desc[k]);
            row *rw = val_row(nm, &g_late[k][i], "ms", "%.2f");
            snprintf(rw->limit, sizeof(rw->limit), "clock +-%.3f ms",
                     g_late_unc);
            if (i == 2)
                set_target(rw, "<= 5 ms", s_med(&g_late[k][i]), 5.0, 0);
        }
        qsort(g_late_all[k], g_late_nall[k], sizeof(double), cmp_double);
        char path[512];
        snprintf(path, sizeof(path), "%s/lateness-%s.dat", c->out,
                 late_kind[k]);
        FILE *f = fopen(path, "w");
        if (f) {
            fprintf(f, "# lateness_ms cumulative_fraction (%zu jobs, %d runs "
                       "pooled; clock calibration +-%.3f ms)\n",
                    g_late_nall[k], c->runs, g_late_unc);
            for (size_t i = 0; i < g_late_nall[k]; i++)
                fprintf(f, "%.4f %.6f\n", g_late_all[k][i],
                        (double)(i + 1) / (double)g_late_nall[k]);
            fclose(f);
        }
    }
}

static void write_plot_data(const cfg *c, const char *header) {
    char path[512];
    snprintf(path, sizeof(path), "%s/throughput.dat", c->out);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "# batch jobs_per_s min max (median of %d runs)\n",
                g_push[0].n);
        for (int b = 0; b < 4; b++)
            if (g_push[b].n > 0)
                fprintf(f, "%d %.0f %.0f %.0f\n", push_batches[b],
                        s_med(&g_push[b]),
                        vmin(g_push[b].v, (size_t)g_push[b].n),
                        vmax(g_push[b].v, (size_t)g_push[b].n));
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/vars.gp", c->out);
    f = fopen(path, "w");
    if (f) {
        static const char *const vn[NLIM] = {"lim_c1", "lim_p1", "lim_p16",
                                             "zadd_p1", "zadd_p16"};
        fprintf(f, "# written by dqbench: figures of this run for plots.gp\n");
        for (int i = 0; i < NLIM; i++) {
            double m = s_med(&g_lim[i]);
            if (isnan(m))
                fprintf(f, "%s = NaN\n", vn[i]);
            else
                fprintf(f, "%s = %.0f\n", vn[i], m);
        }
        fprintf(f, "late_unc = %.3f\ntitle_run = \"%s\"\n", g_late_unc,
                header);
        fclose(f);
    }
}
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
        int devnull = open("/dev/null", O_WRONLY);
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
    } sec[] = {
        {"push1", "instructions per dq_push"},
        {"push100", "  per job in push_batch of 100"},
        {"pollack1", "per poll(max 1) + ack"},
        {"pollack100", "  per job in poll(100)+ack_batch"},
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
        snprintf(rw->spread, sizeof(rw->spread), "deterministic");
        logf_("client cost %s: %.0f instructions per op", sec[k].tag,
              got[k] / (double)c->cost_n);
    }
}

/* ---- main ------------------------------------------------------------ */

static void usage(FILE *f) {
    fputs("usage: dqbench [--quick | --smoke] [--runs N] [--out DIR]\n"
          "               [--max-backlog N] [--no-callgrind] [--only LIST]\n"
          "  LIST: comma-separated of limits,push,drain,e2e,lateness,memory,\n"
          "        cost,backlog (default: all)\n",
          f);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--cost-worker") == 0)
        return cost_worker(argv[2], atol(argv[3]));
    cfg c;
    memset(&c, 0, sizeof(c));
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
    const char *mode = c.mode == 0 ? "full" : c.mode == 1 ? "quick" : "smoke";
    logf_("redis-server %s (hz %.0f) on %s, libdelayq %s, mode %s, %d run(s)",
          rver, hz, g_srv.sock, dq_version_string(), mode, c.runs);
    load_limit_script();

    /* Throughput and lateness: each run measures the limits and then every
     * scenario, so each ratio compares figures taken minutes apart at most. */
    for (int r = 0; r < c.runs; r++) {
        logf_("---- run %d of %d", r + 1, c.runs);
        if (want(&c, "limits"))
            run_limits(&c);
        if (want(&c, "push"))
            run_push(&c);
        if (want(&c, "drain"))
            run_drain(&c);
        if (want(&c, "e2e"))
            run_e2e(&c);
        if (want(&c, "lateness"))
            for (int k = 0; k < NLATE; k++)
                run_lateness(&c, r, k);
    }
    if (want(&c, "limits"))
        rows_limits();
    if (want(&c, "push"))
        rows_push();
    if (want(&c, "drain"))
        rows_drain(&c);
    if (want(&c, "e2e"))
        rows_e2e(&c);
    if (want(&c, "lateness"))
        rows_lateness(&c);
    if (want(&c, "memory"))
        scen_memory(&c);
    if (want(&c, "cost"))
        scen_cost(&c);
    if (want(&c, "backlog"))
        scen_backlog(&c);

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
             hz, ncpu, mode, c.runs);
    print_table(stdout, header);
    fflush(stdout);
    char path[512];
    snprintf(path, sizeof(path), "%s/table.txt", c.out);
    FILE *f = fopen(path, "w");
    if (f) {
        print_table(f, header);
        fclose(f);
    }
    write_plot_data(&c, header);
    redisFree(g_adm);
    th_redis_stop(&g_srv);
    for (int k = 0; k < NLATE; k++)
        free(g_late_all[k]);
    if (g_failed)
        fprintf(stderr, "dqbench: FAILED: a consistency check failed "
                        "(see FAIL lines above)\n");
    return g_failed ? 1 : 0;
}
