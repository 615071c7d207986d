/*
 * bench/scen_e2e.c - end to end: one producer process pushes e2e_n jobs in
 * batches of 100, as fast as it can, each due at a uniform point of a 2 s
 * window, while one consumer process (dq_poll_wait, max 1000) receives and
 * acks them; jobs through per second from the first push to the last ack.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static dqb_series dqb_e2e, dqb_e2e_prod, dqb_e2e_l50, dqb_e2e_l99;

/* Producer process of the end-to-end run: pushes n jobs in batches of 100,
 * as fast as it can, each due at a uniform point of the 2 s window that
 * starts at res->srv0_ms (server clock; a job pushed after its due time is
 * due at once). */
static void dqb_e2e_producer(long n, double offset_us, dqb_late_res *res,
                             int ready_fd, int go_fd) {
    dq_client *c = dqb_open_client();
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
        int64_t now_ms =
            (int64_t)(((double)dqb_real_us() + offset_us) / 1000.0);
        for (int i = 0; i < b; i++) {
            int64_t at = res->srv0_ms + dqb_rng_range(&seed, 2001);
            pl[i] = dqb_payload;
            lens[i] = 16;
            d[i] = at > now_ms ? at - now_ms : 0;
        }
        if (dq_push_batch(c, DQB_QUEUE, (size_t)b, pl, lens, d, NULL, 0, NULL,
                          NULL) != b) {
            dqb_fail("e2e: dq_push_batch: %s", dq_errmsg(c));
            rc = 3;
        }
        done += b;
    }
    res->t_push_end = dqb_mono_ns();
    dq_close(c);
    _exit(rc);
}

void dqb_scen_e2e_run(const dqb_cfg *c, int run) {
    (void)run;
    long n = c->e2e_n;
    size_t rsize = sizeof(dqb_late_res) + sizeof(double) * (size_t)n;
    dqb_late_res *res = dqb_shared_alloc(rsize);
    if (res == NULL)
        return;
    dqb_flushall();
    dqb_clk_cal cal = dqb_calibrate(dqb_adm, 15);
    int ready[2], go[2];
    if (pipe(ready) || pipe(go))
        return;
    pid_t pc = fork();
    if (pc == 0) {
        close(ready[0]);
        close(go[1]);
        dqb_late_child(dqb_srv.uri, n, 1000, cal.offset_us, 120000, res,
                       ready[1], go[0]);
    }
    pid_t pp = fork();
    if (pp == 0) {
        close(ready[0]);
        close(go[1]);
        dqb_e2e_producer(n, cal.offset_us, res, ready[1], go[0]);
    }
    close(ready[1]);
    close(go[0]);
    char x;
    for (int i = 0; i < 2; i++)
        if (read(ready[0], &x, 1) != 1)
            dqb_fail("e2e: a process did not start");
    close(ready[0]);
    int64_t t0 = dqb_mono_ns();
    res->srv0_ms = (int64_t)(((double)dqb_real_us() + cal.offset_us) / 1000.0);
    close(go[1]);
    int st1, st2;
    waitpid(pp, &st1, 0);
    waitpid(pc, &st2, 0);
    if (!WIFEXITED(st1) || WEXITSTATUS(st1) != 0 || !WIFEXITED(st2) ||
        WEXITSTATUS(st2) != 0 || !res->ok)
        dqb_fail("e2e: consumer got %ld of %ld jobs", res->got, n);
    double v = (double)n / ((double)(res->t_end - t0) / 1e9);
    double pv = (double)n / ((double)(res->t_push_end - t0) / 1e9);
    dqb_pctl p = dqb_percentiles(res->lat_ms, (size_t)res->got);
    dqb_s_add(&dqb_e2e, v);
    dqb_s_add(&dqb_e2e_prod, pv);
    dqb_s_add(&dqb_e2e_l50, p.p50);
    dqb_s_add(&dqb_e2e_l99, p.p99);
    dqb_log("e2e: %.0f jobs/s end to end (offered %.0f/s), producer %.0f "
            "jobs/s, lateness p50 %.1f p99 %.1f max %.1f ms",
            v, (double)n / 2.0, pv, p.p50, p.p99, p.max);
    dq_client *cl = dqb_open_client();
    dqb_expect_empty(cl, "e2e");
    dq_close(cl);
    munmap(res, rsize);
}

void dqb_scen_e2e_rows(const dqb_cfg *c) {
    char title[200];
    snprintf(title, sizeof(title),
             "end to end: %ld jobs due over 2 s (offered %ld/s): 1 producer "
             "(batches of 100) + 1 consumer (poll_wait max 1000) at once",
             c->e2e_n, c->e2e_n / 2);
    dqb_add_section(title);
    const char *lname = dqb_lim_short[DQB_L_P16];
    const dqb_series *lim = &dqb_lim[DQB_L_P16];
    dqb_tput_row("jobs through (first push..last ack)", &dqb_e2e, lname, lim);
    dqb_tput_row("  producer push rate meanwhile", &dqb_e2e_prod, lname, lim);
    dqb_val_row("  lateness p50 (backlog of consumer)", &dqb_e2e_l50, "ms",
                "%.1f");
    dqb_val_row("  lateness p99", &dqb_e2e_l99, "ms", "%.1f");
}
