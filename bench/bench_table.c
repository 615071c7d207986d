/*
 * bench/bench_table.c - the ONE table dqbench prints: rows and section
 * lines in the order the scenarios add them, then printed at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <math.h>
#include <string.h>

/* A --quick run adds ~260 rows and a full one more: the table holds four
 * times that, and says how many rows it had to leave out rather than
 * cutting a section short without a word. */
static dqb_row dqb_rows[1024];
static int dqb_nrows, dqb_dropped;

dqb_row *dqb_add_row(const char *name) {
    static dqb_row spare;
    if (dqb_nrows >= (int)(sizeof(dqb_rows) / sizeof(dqb_rows[0]))) {
        dqb_dropped++;
        return &spare;
    }
    dqb_row *r = &dqb_rows[dqb_nrows++];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name);
    return r;
}

void dqb_add_section(const char *title) {
    dqb_row *r = dqb_add_row(title);
    r->unit[0] = '\x01'; /* printed as a section line */
}

void dqb_fmt_int(char *buf, size_t size, double v) {
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

void dqb_set_target(dqb_row *r, const char *text, double v, double target,
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

dqb_row *dqb_tput_row(const char *name, const dqb_series *v,
                      const char *lname, const dqb_series *lim) {
    dqb_row *r = dqb_add_row(name);
    dqb_fmt_int(r->value, sizeof(r->value), dqb_s_med(v));
    snprintf(r->unit, sizeof(r->unit), "jobs/s");
    if (v->n > 1) {
        char a[16], b[16];
        dqb_fmt_int(a, sizeof(a), dqb_vmin(v->v, (size_t)v->n) / 1000);
        dqb_fmt_int(b, sizeof(b), dqb_vmax(v->v, (size_t)v->n) / 1000);
        snprintf(r->spread, sizeof(r->spread), "%sk..%sk", a, b);
    }
    if (lname != NULL && lim != NULL && lim->n > 0) {
        snprintf(r->limit, sizeof(r->limit), "%s", lname);
        dqb_fmt_int(r->lval, sizeof(r->lval), dqb_s_med(lim));
        snprintf(r->ratio, sizeof(r->ratio), "%.2f", dqb_s_ratio(v, lim));
    }
    return r;
}

void dqb_srv_row(const char *name, const dqb_series *us) {
    dqb_row *r = dqb_add_row(name);
    double m = dqb_s_med(us);
    snprintf(r->value, sizeof(r->value), "%.2f", m);
    snprintf(r->unit, sizeof(r->unit), "us");
    snprintf(r->status, sizeof(r->status), "= %.0fk jobs/s if Redis-bound",
             1e3 / m);
}

dqb_row *dqb_val_row(const char *name, const dqb_series *s, const char *unit,
                     const char *fmt) {
    dqb_row *r = dqb_add_row(name);
    snprintf(r->value, sizeof(r->value), fmt, dqb_s_med(s));
    snprintf(r->unit, sizeof(r->unit), "%s", unit);
    if (s->n > 1) {
        char a[20], b[20];
        snprintf(a, sizeof(a), fmt, dqb_vmin(s->v, (size_t)s->n));
        snprintf(b, sizeof(b), fmt, dqb_vmax(s->v, (size_t)s->n));
        snprintf(r->spread, sizeof(r->spread), "%s..%s", a, b);
    }
    return r;
}

dqb_row *dqb_ops_row(const char *name, const dqb_series *s) {
    dqb_row *rw = dqb_val_row(name, s, "ops/s", "%.0f");
    dqb_fmt_int(rw->value, sizeof(rw->value), dqb_s_med(s));
    if (s->n > 1) {
        char a[16], b[16];
        dqb_fmt_int(a, sizeof(a), dqb_vmin(s->v, (size_t)s->n) / 1000);
        dqb_fmt_int(b, sizeof(b), dqb_vmax(s->v, (size_t)s->n) / 1000);
        snprintf(rw->spread, sizeof(rw->spread), "%sk..%sk", a, b);
    }
    return rw;
}

void dqb_print_table(FILE *f, const char *header) {
    const char *fmt = "%-40s %11s %-6s %-17s %-21s %9s %5s  %-10s %s\n";
    char line[160];
    fprintf(f, "%s\n", header);
    fprintf(f, fmt, "scenario", "value", "unit", "runs min..max",
            "limit (same runs)", "limit", "ratio", "target", "status");
    memset(line, '-', 147);
    line[147] = '\0';
    fprintf(f, "%s\n", line);
    for (int i = 0; i < dqb_nrows; i++) {
        dqb_row *r = &dqb_rows[i];
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
    if (dqb_dropped > 0)
        fprintf(f, "(%d rows left out: the table holds %d)\n", dqb_dropped,
                (int)(sizeof(dqb_rows) / sizeof(dqb_rows[0])));
}
