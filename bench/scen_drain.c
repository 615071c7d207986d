/*
 * bench/scen_drain.c - drain throughput: N due jobs, then 1, 2 or 4
 * consumer processes poll(max) and ack_batch until nothing is due; the
 * time runs from a common start barrier to the last ack of any of them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define DQB_NDRAIN 4
#define DQB_DRAIN_MAXPROC 16

static const struct {
    int k, max; /* consumer processes, max jobs per poll */
} dqb_drain_conf[DQB_NDRAIN] = {{1, 100}, {1, 1000}, {2, 1000}, {4, 1000}};
static dqb_series dqb_drain[DQB_NDRAIN], dqb_drain_srv[DQB_NDRAIN];

/* What one consumer process reports (in shared memory). */
typedef struct dqb_drain_slot {
    volatile long count;
    volatile int64_t t_end;
    volatile int ok;
} dqb_drain_slot;

/* A consumer process: polls (max) and acks in batches until nothing is due.
 * Says it is ready, then waits for the barrier (EOF on go_fd). */
static void dqb_drain_child(int max, dqb_drain_slot *s, int ready_fd,
                            int go_fd) {
    dq_client *c = dqb_open_client();
    char x = 1;
    if (c == NULL || write(ready_fd, &x, 1) != 1)
        _exit(2);
    if (read(go_fd, &x, 1) < 0)
        _exit(2);
    int64_t deadline = dqb_mono_ns() + INT64_C(120) * 1000000000;
    while (dqb_mono_ns() < deadline) {
        dq_jobs *js = NULL;
        int64_t next = 0;
        int n = dq_poll(c, DQB_QUEUE, max, DQB_LEASE_MS, &js, &next);
        if (n < 0) {
            dqb_fail("drain: dq_poll: %s", dq_errmsg(c));
            _exit(3);
        }
        if (n == 0) {
            if (next != 0)
                break; /* nothing due: the other consumers hold the rest */
            continue;
        }
        int k = dqb_ack_all(c, js);
        dq_jobs_free(js);
        if (k != n)
            _exit(3);
        s->count += n;
        s->t_end = dqb_mono_ns();
    }
    s->ok = 1;
    dq_close(c);
    _exit(0);
}

/* Runs k consumer processes; returns the wall seconds from the barrier to
 * the last ack of any of them, or NAN. */
static double dqb_drain_consumers(int k, int max, dqb_drain_slot *slots,
                                  long expect) {
    int ready[2], go[2];
    if (pipe(ready) || pipe(go))
        return NAN;
    pid_t pids[DQB_DRAIN_MAXPROC];
    for (int i = 0; i < k; i++) {
        memset(&slots[i], 0, sizeof(dqb_drain_slot));
        pids[i] = fork();
        if (pids[i] == 0) {
            close(ready[0]);
            close(go[1]);
            dqb_drain_child(max, &slots[i], ready[1], go[0]);
        }
    }
    close(ready[1]);
    close(go[0]);
    char x;
    for (int i = 0; i < k; i++)
        if (read(ready[0], &x, 1) != 1)
            dqb_fail("drain: a consumer did not start");
    close(ready[0]);
    int64_t t0 = dqb_mono_ns();
    close(go[1]); /* go */
    long total = 0;
    int64_t t_end = t0;
    for (int i = 0; i < k; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !slots[i].ok)
            dqb_fail("drain: consumer %d failed", i);
        total += slots[i].count;
        if (slots[i].t_end > t_end)
            t_end = slots[i].t_end;
    }
    if (total != expect)
        dqb_fail("drain: %ld jobs acked, expected %ld", total, expect);
    return (double)(t_end - t0) / 1e9;
}

void dqb_scen_drain_run(const dqb_cfg *c, int run) {
    (void)run;
    size_t ssize = sizeof(dqb_drain_slot) * DQB_DRAIN_MAXPROC;
    dqb_drain_slot *slots = dqb_shared_alloc(ssize);
    if (slots == NULL)
        return;
    for (int ci = 0; ci < DQB_NDRAIN; ci++) {
        dqb_flushall();
        dq_client *cl = dqb_open_client();
        if (cl == NULL)
            break;
        uint64_t seed = 11;
        dqb_fill(cl, c->drain_n, 1000, 16, 0, 0, &seed);
        dq_stats(cl, DQB_QUEUE, NULL, NULL, NULL, NULL, NULL);
        dqb_reset_stats();
        double secs = dqb_drain_consumers(dqb_drain_conf[ci].k,
                                          dqb_drain_conf[ci].max, slots,
                                          c->drain_n);
        double v = (double)c->drain_n / secs;
        double srv = dqb_srv_us_per_job((double)c->drain_n);
        dqb_s_add(&dqb_drain[ci], v);
        dqb_s_add(&dqb_drain_srv[ci], srv);
        char prof[32];
        snprintf(prof, sizeof(prof), "drain-%dc-max%d", dqb_drain_conf[ci].k,
                 dqb_drain_conf[ci].max);
        dqb_save_profile(c, prof, (double)c->drain_n);
        dqb_expect_empty(cl, "drain");
        dq_close(cl);
        dqb_log("drain %ld, %d consumer(s), max %d: %.0f jobs/s (server "
                "%.2f us/job in EVALSHA)", c->drain_n, dqb_drain_conf[ci].k,
                dqb_drain_conf[ci].max, v, srv);
    }
    munmap(slots, ssize);
}

void dqb_scen_drain_rows(const dqb_cfg *c) {
    char title[160];
    snprintf(title, sizeof(title),
             "drain: %ld due jobs (16 B), consumer processes poll(max) + "
             "ack_batch, lease 60 s", c->drain_n);
    dqb_add_section(title);
    for (int ci = 0; ci < DQB_NDRAIN; ci++) {
        int k = dqb_drain_conf[ci].k, max = dqb_drain_conf[ci].max;
        char name[64];
        snprintf(name, sizeof(name), "drain, %d consumer%s, max %d", k,
                 k > 1 ? "s" : "", max);
        dqb_row *rw = dqb_tput_row(name, &dqb_drain[ci],
                                   dqb_lim_short[DQB_L_P16],
                                   &dqb_lim[DQB_L_P16]);
        if (k == 1 && max == 1000)
            dqb_set_target(rw, ">= 100,000", dqb_s_med(&dqb_drain[ci]),
                           100000, 1);
        if (k == 1)
            dqb_srv_row("  server time in EVALSHA per job",
                        &dqb_drain_srv[ci]);
    }
}
