/*
 * bench/bench.h - what the parts of dqbench share.
 *
 * The support units: statistics and small utilities (bench_stats.c), the
 * table (bench_table.c), the Redis server, its admin connection, clock
 * calibration and common libdelayq calls (bench_redis.c).  Every scenario
 * lives in a scen_*.c file of its own and is listed in scenarios.h; the
 * callgrind worker is cost_worker.c; main is dqbench.c.
 *
 * Every name of the benchmark starts with dqb_ (types dqb_*, constants
 * DQB_*), so none can clash with libdelayq's dq_ and dq__.
 */
#ifndef DQB_BENCH_H
#define DQB_BENCH_H

#include <delayq.h>

#include <hiredis/hiredis.h>

#include "harness.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* valgrind/callgrind.h present: the client-cost scenario can run. */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#define DQB_HAVE_CALLGRIND 1
#endif
#endif
#ifndef DQB_HAVE_CALLGRIND
#define DQB_HAVE_CALLGRIND 0
#endif

#define DQB_QUEUE "bench"
#define DQB_LEASE_MS 60000
#define DQB_MAXRUNS 15

/* ---- configuration (dqbench.c) --------------------------------------- */

typedef struct dqb_cfg {
    int mode;          /* 0 full, 1 quick, 2 smoke */
    int runs;
    const char *out;   /* output dir for data files */
    int64_t max_backlog;
    int callgrind;
    const char *only;  /* comma list of scenarios, NULL = all */
    const char *self;  /* path of this program (for valgrind) */
    /* sizes (set by mode) */
    long lim_n_p1, lim_n_p16, lim_n_c1;
    long push1_n, pushb_n[3];
    long drain_n;
    long e2e_n;
    long late_n;
    int64_t late_base_ms, late_spread_ms;
    long mem_n;
    long lay_n, lay_cancel_n, lay_drain_n; /* layout: pending, cancels,
                                              drained */
    long bl_ops;
    long cost_n;
    long cl_pushb_n, cl_push1_n, cl_drain_n, cl_late_n;
    /* cluster under callgrind (cl_cg_n 0: not run): jobs pushed, drained */
    long cl_cg_n, cl_cg_drain_n;
    int cl_late_pace_ms;
    long herd_light_n, herd_drain_n;
    int64_t herd_light_base_ms, herd_light_spread_ms;
    int herd_kmax; /* largest K of the herd scenario */
} dqb_cfg;

/* ---- utilities and statistics (bench_stats.c) ------------------------ */

extern int dqb_failed; /* a consistency check failed: exit 1 at the end */

/* Progress line on stderr ("dqbench: ..."). */
void dqb_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A failed consistency check: a FAIL line on stderr, and exit status 1. */
void dqb_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int64_t dqb_mono_ns(void); /* CLOCK_MONOTONIC in ns */
int64_t dqb_real_us(void); /* CLOCK_REALTIME in us */

/* xorshift64*: reproducible pseudo-random numbers per scenario. */
uint64_t dqb_rng_next(uint64_t *s);
/* Uniform in 0..n-1. */
int64_t dqb_rng_range(uint64_t *s, int64_t n);

/* qsort comparator of doubles, ascending. */
int dqb_cmp_double(const void *a, const void *b);
/* Nearest-rank percentile of n sorted values (p in 0..1). */
double dqb_pct_sorted(const double *v, size_t n, double p);
/* Median of n values (copied, not reordered). */
double dqb_median(const double *v, size_t n);
double dqb_vmin(const double *v, size_t n);
double dqb_vmax(const double *v, size_t n);

typedef struct dqb_pctl {
    double p50, p95, p99, max;
} dqb_pctl;

/* Sorts v and returns its p50, p95, p99 and max. */
dqb_pctl dqb_percentiles(double *v, size_t n);

/* One figure measured once per run, or a few times per run (the layout
 * drains, scen_layout.c: up to DQB_SERIES_MAX / DQB_MAXRUNS). */
#define DQB_SERIES_MAX (DQB_MAXRUNS * 4)
typedef struct dqb_series {
    double v[DQB_SERIES_MAX];
    int n;
} dqb_series;

void dqb_s_add(dqb_series *s, double x);
/* dqb_percentiles of v (sorted in place), each added to its series of s:
 * p50, p95, p99, max; returns them. */
dqb_pctl dqb_s_add_pctl(dqb_series s[4], double *v, size_t n);
double dqb_s_med(const dqb_series *s);
/* Median over runs of a[i] / b[i] (ratios only within one run). */
double dqb_s_ratio(const dqb_series *a, const dqb_series *b);

/* Shared (fork-inherited) zeroed memory for children's results. */
void *dqb_shared_alloc(size_t size);

/* ---- the table (bench_table.c) --------------------------------------- */

typedef struct dqb_row {
    char name[200], value[20], unit[10], spread[48], limit[28], lval[12],
        ratio[8], target[14], status[40];
} dqb_row;

/* Appends a row named name (all other columns empty). */
dqb_row *dqb_add_row(const char *name);
/* Appends a section line "[title]". */
void dqb_add_section(const char *title);
/* "123,456" with thousands separators (rounded); "n/a" for NAN. */
void dqb_fmt_int(char *buf, size_t size, double v);
/* Target column and status: higher is better (ge=1) or lower is better. */
void dqb_set_target(dqb_row *r, const char *text, double v, double target,
                    int ge);
/* A throughput row: median of runs, their spread, the limit of the same
 * runs and the median of the per-run ratios. */
dqb_row *dqb_tput_row(const char *name, const dqb_series *v,
                      const char *lname, const dqb_series *lim);
/* A "server time per job" row under a throughput row. */
void dqb_srv_row(const char *name, const dqb_series *us);
/* A row of a value in ms/us with its spread over runs. */
dqb_row *dqb_val_row(const char *name, const dqb_series *s, const char *unit,
                     const char *fmt);
/* A row of ops/s (a limit): the median with thousands separators, the
 * spread over runs as "123k..456k". */
dqb_row *dqb_ops_row(const char *name, const dqb_series *s);
/* Prints header and every row added so far. */
void dqb_print_table(FILE *f, const char *header);

/* ---- Redis and libdelayq (bench_redis.c) ----------------------------- */

extern th_redis dqb_srv;      /* the redis-server dqbench started */
extern redisContext *dqb_adm; /* its admin connection (plain hiredis) */

/* An admin command; fails the run on an error reply.  Caller frees. */
redisReply *dqb_adm_cmd(const char *fmt, ...);
/* An admin command without arguments whose reply is not needed. */
void dqb_adm_do(const char *fmt);
void dqb_flushall(void);
/* The server's clock (TIME), epoch ms; -1 when the reply is not one. */
int64_t dqb_adm_srv_ms(void);
/* Value of "field:" in INFO section as a double (NAN if missing). */
double dqb_info_field(const char *section, const char *field);
/* calls and usec of one command in INFO commandstats ("evalsha"). */
void dqb_cmdstat(const char *cmd, double *calls, double *usec);
/* Saves INFO commandstats (and SLOWLOG LEN) under out/profile-NAME.txt. */
void dqb_save_profile(const dqb_cfg *c, const char *name, double jobs);
/* Zeroes INFO commandstats and the slow log. */
void dqb_reset_stats(void);
/* Server us per job spent in EVALSHA since the last dqb_reset_stats(). */
double dqb_srv_us_per_job(double jobs);

typedef struct dqb_clk_cal {
    double offset_us; /* server time - local CLOCK_REALTIME (median) */
    double unc_us;    /* half the median round trip */
} dqb_clk_cal;

/* Offset of Redis TIME from the local clock, over k round trips. */
dqb_clk_cal dqb_calibrate(redisContext *ctx, int k);

extern char dqb_payload[257]; /* payload bytes of every job pushed */

/* Fills dqb_payload (the same bytes every run). */
void dqb_init_payload(void);
/* A client of dqb_srv, or NULL (and a FAIL line). */
dq_client *dqb_open_client(void);
/* Pushes n jobs to q in batches of `batch`, delays base + U(0..spread). */
int dqb_fill_q(dq_client *c, const char *q, long n, int batch, size_t plen,
               int64_t base, int64_t spread, uint64_t *seed);
/* dqb_fill_q with ids of our own when idpre is not NULL: idpre, then
 * *idn (incremented per job) zero-padded to 14 characters in all, as long
 * as a generated id; the same ids every run, so the same partitions. */
#define DQB_ID_LEN 32
int dqb_fill_ids(dq_client *c, const char *q, long n, int batch,
                 size_t plen, int64_t base, int64_t spread, uint64_t *seed,
                 const char *idpre, long *idn);
/* dqb_fill_q on DQB_QUEUE. */
int dqb_fill(dq_client *c, long n, int batch, size_t plen, int64_t base,
             int64_t spread, uint64_t *seed);
/* The push workload (push and cluster): n jobs of 16 bytes on DQB_QUEUE,
 * due 1 h..25 h on, one dq_push per job (batch 1) or dqb_fill's batches. */
void dqb_push_far(dq_client *c, long n, int batch, uint64_t *seed);
/* Acks every job of a list in one round trip.  Returns the number acked. */
int dqb_ack_all(dq_client *c, dq_jobs *js);
/* Checks that the queue is empty (nothing pending, in flight or dead). */
void dqb_expect_empty(dq_client *c, const char *what);

/* ---- figures one scenario shares with others ------------------------- */

/* scen_limits.c: Redis's own limits, the reference of the ratios. */
enum { DQB_L_C1, DQB_L_P1, DQB_L_P16, DQB_L_ZP1, DQB_L_ZP16, DQB_NLIM };
extern const char *const dqb_lim_short[DQB_NLIM];
extern dqb_series dqb_lim[DQB_NLIM];
/* Loads the minimal HSET+ZADD script redis-benchmark runs on dqb_srv. */
void dqb_limits_load_script(void);
/* Loads that script on the server of a (scen_cluster.c: on its own node
 * too); its sha into sha (size bytes), "" and a FAIL line if it failed. */
void dqb_lim_load_script(redisContext *a, char *sha, size_t size);
/* redis-benchmark --csv on the server that `server` names (its options,
 * NULL-terminated: "-s", path or "-h", host, "-p", port): n ops of that
 * script (sha) or, with zadd, of plain ZADD, by `clients` clients with
 * `pipeline` commands in flight each.  Returns ops/s, or NAN (and a FAIL
 * line).  The caller empties the server before and after. */
double dqb_limit_ops(char *const *server, const char *sha, int clients,
                     int pipeline, long n, int zadd);

/* scen_push.c: jobs/s per batch size (the throughput plot). */
#define DQB_NPUSH 4
extern const int dqb_push_batches[DQB_NPUSH];
extern dqb_series dqb_push[DQB_NPUSH];

/* scen_cost.c: the "summary:" Ir of a callgrind dump file (NAN if none),
 * its client-request trigger text into desc (dsize bytes; "" if none). */
double dqb_cg_total(const char *path, char *desc, size_t dsize);

/* scen_lateness.c: clock uncertainty of the lateness figures, ms. */
extern double dqb_late_unc;

/* Results of one consumer process that records lateness (shared memory,
 * dqb_shared_alloc: the header and one double per job). */
typedef struct dqb_late_res {
    volatile long got;
    volatile int64_t t_end;      /* mono ns of the last ack */
    volatile int ok;
    volatile int64_t srv0_ms;    /* e2e: start of the due window */
    volatile int64_t t_push_end; /* e2e: producer done (mono ns) */
    double lat_ms[];             /* one per job received */
} dqb_late_res;

/* scen_lateness.c: the dq_poll_wait consumer process (lateness, e2e and
 * cluster) on the queue DQB_QUEUE of uri: subscribes, says so on ready_fd,
 * waits for go_fd, then receives `expect` jobs, max per poll (or stops
 * after bound_ms) and records each one's lateness in the server clock;
 * never returns. */
void dqb_late_child(const char *uri, long expect, int max, double offset_us,
                    int64_t bound_ms, dqb_late_res *res, int ready_fd,
                    int go_fd) __attribute__((noreturn));

/* scen_lateness.c: one lateness measurement (lateness and cluster): a
 * consumer process records each job's lateness while this one pushes. */
typedef struct dqb_late_run {
    dqb_late_res *res;  /* the consumer's results (shared memory) */
    size_t rsize;
    pid_t pid;          /* the consumer process */
    int status;         /* its wait status (dqb_late_wait) */
    redisContext *adm;  /* the server whose clock is the reference */
    dqb_clk_cal before; /* that clock before the consumer started */
    double drift_us;    /* how far its offset moved (dqb_late_end) */
} dqb_late_run;

/* Room for n results, a calibration of adm's clock, then the consumer
 * process: dqb_late_child on uri (max jobs per poll) or, with event, the
 * libevent consumer of delayq-event.h (DQ_BENCH_EVENT builds only).
 * Returns once it is subscribed (a FAIL line naming `what` if it never
 * said so) and has been let go: 0, or -1 with nothing to undo. */
int dqb_late_begin(dqb_late_run *lr, redisContext *adm, const char *uri,
                   int event, long n, int max, int64_t bound_ms,
                   const char *what);
/* Waits for the consumer process to exit. */
void dqb_late_wait(dqb_late_run *lr);
/* Calibrates the clock again; a FAIL line naming `what` unless the
 * consumer exited 0 with all n jobs.  Returns the uncertainty of the
 * figures in ms: the calibration's or the drift, the larger. */
double dqb_late_end(dqb_late_run *lr, long n, const char *what);
/* Frees the results. */
void dqb_late_free(dqb_late_run *lr);
/* A lateness row: a series in ms, the clock uncertainty unc_ms as its
 * limit and, with target, the target "<= 5 ms" on its median. */
void dqb_late_row(const char *name, const dqb_series *s, double unc_ms,
                  int target);
/* The rows "lateness p50, <who>" (then p95, p99, max) of s[0..3]; with
 * target, the p99 row has the target of dqb_late_row. */
void dqb_late_rows(const char *who, const dqb_series s[4], double unc_ms,
                   int target);

/* ---- the scenarios (scen_*.c; their list is scenarios.h) ------------ */

/* _run: one run's measurements; _rows: its section and rows. */
void dqb_scen_limits_run(const dqb_cfg *c, int run);
void dqb_scen_limits_rows(const dqb_cfg *c);
void dqb_scen_push_run(const dqb_cfg *c, int run);
void dqb_scen_push_rows(const dqb_cfg *c);
void dqb_scen_drain_run(const dqb_cfg *c, int run);
void dqb_scen_drain_rows(const dqb_cfg *c);
void dqb_scen_e2e_run(const dqb_cfg *c, int run);
void dqb_scen_e2e_rows(const dqb_cfg *c);
void dqb_scen_lateness_run(const dqb_cfg *c, int run);
void dqb_scen_lateness_rows(const dqb_cfg *c);
void dqb_scen_cluster_run(const dqb_cfg *c, int run);
void dqb_scen_cluster_rows(const dqb_cfg *c);
void dqb_scen_herd_run(const dqb_cfg *c, int run);
void dqb_scen_herd_rows(const dqb_cfg *c);
void dqb_scen_memory_rows(const dqb_cfg *c);
void dqb_scen_layout_run(const dqb_cfg *c, int run);
void dqb_scen_layout_rows(const dqb_cfg *c);
void dqb_scen_features_run(const dqb_cfg *c, int run);
void dqb_scen_features_rows(const dqb_cfg *c);
void dqb_scen_fair_run(const dqb_cfg *c, int run);
void dqb_scen_fair_rows(const dqb_cfg *c);
void dqb_scen_promote_run(const dqb_cfg *c, int run);
void dqb_scen_promote_rows(const dqb_cfg *c);
void dqb_scen_durable_run(const dqb_cfg *c, int run);
void dqb_scen_durable_rows(const dqb_cfg *c);
void dqb_scen_debounce_run(const dqb_cfg *c, int run);
void dqb_scen_debounce_rows(const dqb_cfg *c);
void dqb_scen_cost_rows(const dqb_cfg *c);
void dqb_scen_backlog_rows(const dqb_cfg *c);

/* cost_worker.c: the client-cost workload (under callgrind). */
int dqb_cost_worker(const char *uri, long n);

#endif
