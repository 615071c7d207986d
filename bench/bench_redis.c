/*
 * bench/bench_redis.c - the Redis side of dqbench: the server and its admin
 * connection (plain hiredis: INFO, commandstats, profiles), the clock
 * calibration against Redis TIME, and the libdelayq calls every scenario
 * uses (a client, filling a queue, acking a list, checking it is empty).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- Redis administration (plain hiredis) ---------------------------- */

th_redis dqb_srv;
redisContext *dqb_adm;

redisReply *dqb_adm_cmd(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(dqb_adm, fmt, ap);
    va_end(ap);
    if (r == NULL) {
        dqb_fail("redis admin command failed: %s", dqb_adm->errstr);
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR)
        dqb_fail("redis admin command '%s': %s", fmt, r->str);
    return r;
}

int64_t dqb_adm_srv_ms(void) {
    redisReply *r = dqb_adm_cmd("TIME");
    int64_t ms = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        ms = strtoll(r->element[0]->str, NULL, 10) * 1000 +
             strtoll(r->element[1]->str, NULL, 10) / 1000;
    freeReplyObject(r);
    return ms;
}

void dqb_adm_do(const char *fmt) {
    redisReply *r = redisCommand(dqb_adm, fmt);
    if (r == NULL || r->type == REDIS_REPLY_ERROR)
        dqb_fail("redis '%s': %s", fmt, r ? r->str : dqb_adm->errstr);
    freeReplyObject(r);
}

void dqb_flushall(void) { dqb_adm_do("FLUSHALL"); }

double dqb_info_field(const char *section, const char *field) {
    redisReply *r = redisCommand(dqb_adm, "INFO %s", section);
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

void dqb_cmdstat(const char *cmd, double *calls, double *usec) {
    *calls = *usec = 0;
    redisReply *r = redisCommand(dqb_adm, "INFO commandstats");
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

void dqb_save_profile(const dqb_cfg *c, const char *name, double jobs) {
    char path[512];
    snprintf(path, sizeof(path), "%s/profile-%s.txt", c->out, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return;
    redisReply *r = redisCommand(dqb_adm, "INFO commandstats");
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
    r = redisCommand(dqb_adm, "SLOWLOG LEN");
    if (r && r->type == REDIS_REPLY_INTEGER)
        fprintf(f, "slowlog_len (>10 ms): %lld\n", r->integer);
    freeReplyObject(r);
    fclose(f);
}

void dqb_reset_stats(void) {
    dqb_adm_do("CONFIG RESETSTAT");
    dqb_adm_do("SLOWLOG RESET");
}

double dqb_srv_us_per_job(double jobs) {
    double calls, usec;
    dqb_cmdstat("evalsha", &calls, &usec);
    return usec / jobs;
}

/* ---- clock calibration against Redis TIME ---------------------------- */

dqb_clk_cal dqb_calibrate(redisContext *ctx, int k) {
    double off[64], half[64];
    dqb_clk_cal cal = {NAN, NAN};
    if (k > 64)
        k = 64;
    int n = 0;
    for (int i = 0; i < k; i++) {
        int64_t t0 = dqb_real_us();
        redisReply *r = redisCommand(ctx, "TIME");
        int64_t t1 = dqb_real_us();
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
        cal.offset_us = dqb_median(off, (size_t)n);
        cal.unc_us = dqb_median(half, (size_t)n);
    }
    return cal;
}

/* ---- libdelayq helpers ------------------------------------------------ */

char dqb_payload[257];

void dqb_init_payload(void) {
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof(dqb_payload) - 1; i++)
        dqb_payload[i] = (char)('a' + dqb_rng_range(&s, 26));
}

dq_client *dqb_open_client(void) {
    dq_client *c = NULL;
    if (dq_open(dqb_srv.uri, NULL, &c) != 0) {
        dqb_fail("dq_open: %s", dq_errmsg(c));
        dq_close(c);
        return NULL;
    }
    return c;
}

int dqb_fill_ids(dq_client *c, const char *q, long n, int batch,
                 size_t plen, int64_t base, int64_t spread, uint64_t *seed,
                 const char *idpre, long *idn) {
    const void **pl = malloc(sizeof(void *) * (size_t)batch);
    size_t *lens = malloc(sizeof(size_t) * (size_t)batch);
    int64_t *d = malloc(sizeof(int64_t) * (size_t)batch);
    char *idbuf = idpre ? malloc(DQB_ID_LEN * (size_t)batch) : NULL;
    const char **ids = idpre ? malloc(sizeof(char *) * (size_t)batch) : NULL;
    int rc = 0;
    if (!pl || !lens || !d || (idpre && (!idbuf || !ids))) {
        rc = -1;
        goto out;
    }
    for (long done = 0; done < n;) {
        int b = (int)(n - done < batch ? n - done : batch);
        for (int i = 0; i < b; i++) {
            pl[i] = dqb_payload;
            lens[i] = plen;
            d[i] = base + (spread > 0 ? dqb_rng_range(seed, spread + 1) : 0);
            if (ids) {
                /* As long as a generated id (14 characters). */
                char *id = idbuf + (size_t)i * DQB_ID_LEN;
                int pre = (int)strlen(idpre);
                snprintf(id, DQB_ID_LEN, "%s%0*ld", idpre,
                         pre < 14 ? 14 - pre : 1, (*idn)++);
                ids[i] = id;
            }
        }
        int k = dq_push_batch(c, q, (size_t)b, pl, lens, d, ids, 0, NULL,
                              NULL);
        if (k != b) {
            dqb_fail("dq_push_batch returned %d (of %d): %s", k, b,
                     dq_errmsg(c));
            rc = -1;
            goto out;
        }
        done += b;
    }
out:
    free(pl);
    free(lens);
    free(d);
    free(idbuf);
    free(ids);
    return rc;
}

int dqb_fill_q(dq_client *c, const char *q, long n, int batch, size_t plen,
               int64_t base, int64_t spread, uint64_t *seed) {
    return dqb_fill_ids(c, q, n, batch, plen, base, spread, seed, NULL,
                        NULL);
}

int dqb_fill(dq_client *c, long n, int batch, size_t plen, int64_t base,
             int64_t spread, uint64_t *seed) {
    return dqb_fill_q(c, DQB_QUEUE, n, batch, plen, base, spread, seed);
}

void dqb_push_far(dq_client *c, long n, int batch, uint64_t *seed) {
    if (batch != 1) {
        dqb_fill(c, n, batch, 16, 3600000, 86400000, seed);
        return;
    }
    for (long i = 0; i < n; i++) {
        int64_t d = 3600000 + dqb_rng_range(seed, 86400001);
        if (dq_push(c, DQB_QUEUE, dqb_payload, 16, d, NULL, 0, NULL, 0,
                    NULL) != 0) {
            dqb_fail("dq_push: %s", dq_errmsg(c));
            break;
        }
    }
}

int dqb_ack_all(dq_client *c, dq_jobs *js) {
    size_t n = dq_jobs_count(js);
    const char *ids[DQ_POLL_MAX], *toks[DQ_POLL_MAX];
    for (size_t i = 0; i < n; i++) {
        ids[i] = dq_job_id(dq_jobs_at(js, i));
        toks[i] = dq_job_token(dq_jobs_at(js, i));
    }
    int k = dq_ack_batch(c, DQB_QUEUE, n, ids, toks, NULL);
    if (k != (int)n)
        dqb_fail("dq_ack_batch returned %d (of %zu): %s", k, n,
                 dq_errmsg(c));
    return k;
}

void dqb_expect_empty(dq_client *c, const char *what) {
    int64_t sch = -1, due = -1, inf = -1, dead = -1;
    if (c == NULL)
        return;
    if (dq_stats(c, DQB_QUEUE, &sch, &due, &inf, &dead, NULL) != 0)
        dqb_fail("%s: dq_stats: %s", what, dq_errmsg(c));
    else if (sch || due || inf || dead)
        dqb_fail("%s: queue not empty afterwards: scheduled %" PRId64
                 " due %" PRId64 " inflight %" PRId64 " dead %" PRId64,
                 what, sch, due, inf, dead);
}
