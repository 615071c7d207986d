/*
 * bench/bench_stats.c - small utilities of dqbench: progress and FAIL
 * lines, clocks, the reproducible random numbers, percentiles, medians
 * and the per-run series.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int dqb_failed;

void dqb_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dqbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void dqb_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("dqbench: FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    dqb_failed = 1;
}

int64_t dqb_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t dqb_real_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t dqb_rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

int64_t dqb_rng_range(uint64_t *s, int64_t n) {
    return (int64_t)(dqb_rng_next(s) % (uint64_t)n);
}

int dqb_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double dqb_pct_sorted(const double *v, size_t n, double p) {
    if (n == 0)
        return NAN;
    size_t k = (size_t)ceil(p * (double)n);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return v[k - 1];
}

double dqb_median(const double *v, size_t n) {
    if (n == 0)
        return NAN;
    double tmp[DQB_SERIES_MAX];
    double *w = n <= sizeof(tmp) / sizeof(tmp[0]) ? tmp : malloc(n * sizeof(double));
    if (w == NULL)
        return NAN;
    memcpy(w, v, n * sizeof(double));
    qsort(w, n, sizeof(double), dqb_cmp_double);
    double m = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
    if (w != tmp)
        free(w);
    return m;
}

double dqb_vmin(const double *v, size_t n) {
    double m = INFINITY;
    for (size_t i = 0; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

double dqb_vmax(const double *v, size_t n) {
    double m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

dqb_pctl dqb_percentiles(double *v, size_t n) {
    qsort(v, n, sizeof(double), dqb_cmp_double);
    dqb_pctl p = {dqb_pct_sorted(v, n, 0.50), dqb_pct_sorted(v, n, 0.95),
                  dqb_pct_sorted(v, n, 0.99), n ? v[n - 1] : NAN};
    return p;
}

void dqb_s_add(dqb_series *s, double x) {
    if (s->n < DQB_SERIES_MAX)
        s->v[s->n++] = x;
}

dqb_pctl dqb_s_add_pctl(dqb_series s[4], double *v, size_t n) {
    dqb_pctl p = dqb_percentiles(v, n);
    dqb_s_add(&s[0], p.p50);
    dqb_s_add(&s[1], p.p95);
    dqb_s_add(&s[2], p.p99);
    dqb_s_add(&s[3], p.max);
    return p;
}

double dqb_s_med(const dqb_series *s) {
    return dqb_median(s->v, (size_t)s->n);
}

double dqb_s_ratio(const dqb_series *a, const dqb_series *b) {
    double r[DQB_SERIES_MAX];
    int n = a->n < b->n ? a->n : b->n;
    for (int i = 0; i < n; i++)
        r[i] = a->v[i] / b->v[i];
    return dqb_median(r, (size_t)n);
}

void *dqb_shared_alloc(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
