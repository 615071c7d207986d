/*
 * bench/scen_memory.c - memory per job (runs once: deterministic): INFO
 * used_memory per pending job with 16- and 256-byte payloads, and what an
 * acked job leaves behind in the done window.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <inttypes.h>
#include <math.h>

/* MEMORY USAGE of the queue's key dq:{bench}:SUFFIX, bytes (NAN if none). */
static double dqb_key_usage(const char *suffix) {
    redisReply *r = redisCommand(dqb_adm,
                                 "MEMORY USAGE dq:{%s}:%s SAMPLES 0",
                                 DQB_QUEUE, suffix);
    double v = r && r->type == REDIS_REPLY_INTEGER ? (double)r->integer : NAN;
    freeReplyObject(r);
    return v;
}

/* used_memory per pending job with plen-byte payloads: its row and the
 * "beyond the payload" row.  Returns -1 if no client could connect. */
static int dqb_memory_pending(const dqb_cfg *c, size_t plen) {
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        return -1;
    uint64_t seed = 5;
    dqb_fill(cl, 1, 1, plen, 0, 0, &seed); /* load the script */
    dqb_flushall();
    double m0 = dqb_info_field("memory", "used_memory");
    dqb_fill(cl, c->mem_n, 1000, plen, 3600000, 86400000, &seed);
    double m1 = dqb_info_field("memory", "used_memory");
    double per = (m1 - m0) / (double)c->mem_n;
    double due = dqb_key_usage("due") / (double)c->mem_n;
    double jobs = dqb_key_usage("jobs") / (double)c->mem_n;
    int64_t sch = 0;
    if (dq_stats(cl, DQB_QUEUE, &sch, NULL, NULL, NULL, NULL) != 0 ||
        sch != c->mem_n)
        dqb_fail("memory: %" PRId64 " scheduled, expected %ld", sch,
                 c->mem_n);
    dq_close(cl);
    dqb_log("memory %zu B: %.1f bytes/job (MEMORY USAGE: due ZSET %.1f, "
            "jobs HASH %.1f)", plen, per, due, jobs);
    char name[64];
    snprintf(name, sizeof(name), "memory/job, %zu-byte payload", plen);
    dqb_row *rw = dqb_add_row(name);
    snprintf(rw->value, sizeof(rw->value), "%.1f", per);
    snprintf(rw->unit, sizeof(rw->unit), "bytes");
    snprintf(rw->spread, sizeof(rw->spread), "zset %.0f + hash %.0f", due,
             jobs);
    dqb_row *ov = dqb_add_row("  beyond the payload");
    snprintf(ov->value, sizeof(ov->value), "%.1f", per - (double)plen);
    snprintf(ov->unit, sizeof(ov->unit), "bytes");
    dqb_set_target(ov, "<= 120", per - (double)plen, 120, 0);
    return 0;
}

/* What an ack leaves behind for DQ_OPT_DONE_TTL_MS (the done record that
 * answers retried pushes and acks): mem_n jobs pushed, polled and acked,
 * then used_memory against the empty server. */
static void dqb_memory_done_records(const dqb_cfg *c) {
    dqb_flushall();
    dq_client *cl = dqb_open_client();
    if (cl == NULL)
        return;
    uint64_t seed = 5;
    dqb_fill(cl, 1, 1, 16, 0, 0, &seed); /* load the scripts */
    dq_jobs *js = NULL;
    if (dq_poll(cl, DQB_QUEUE, 1, 60000, &js, NULL) == 1)
        dqb_ack_all(cl, js);
    dq_jobs_free(js);
    dqb_flushall();
    double m0 = dqb_info_field("memory", "used_memory");
    dqb_fill(cl, c->mem_n, 1000, 16, 0, 0, &seed);
    long acked = 0;
    for (;;) {
        js = NULL;
        int k = dq_poll(cl, DQB_QUEUE, 1000, 60000, &js, NULL);
        if (k > 0)
            acked += dqb_ack_all(cl, js);
        dq_jobs_free(js);
        if (k <= 0)
            break;
    }
    double m1 = dqb_info_field("memory", "used_memory");
    if (acked != c->mem_n)
        dqb_fail("memory: acked %ld, expected %ld", acked, c->mem_n);
    double done = dqb_key_usage("done") / (double)c->mem_n;
    dq_close(cl);
    dqb_log("memory of done records: %.1f bytes/acked job (MEMORY USAGE: "
            "done ZSET %.1f)", (m1 - m0) / (double)c->mem_n, done);
    dqb_row *rw = dqb_add_row("memory/acked job in the done window");
    snprintf(rw->value, sizeof(rw->value), "%.1f",
             (m1 - m0) / (double)c->mem_n);
    snprintf(rw->unit, sizeof(rw->unit), "bytes");
    snprintf(rw->spread, sizeof(rw->spread), "done zset %.0f", done);
}

void dqb_scen_memory_rows(const dqb_cfg *c) {
    char title[160];
    snprintf(title, sizeof(title),
             "memory: INFO used_memory per pending job over %ld jobs, delays "
             "1 h + U(0..24 h); 1 run (deterministic)", c->mem_n);
    dqb_add_section(title);
    static const size_t sizes[2] = {16, 256};
    for (int i = 0; i < 2; i++)
        if (dqb_memory_pending(c, sizes[i]) != 0)
            return;
    dqb_memory_done_records(c);
    dqb_flushall();
}
