/*
 * bench/scen_cost.c - client cost (runs once: deterministic): user-space
 * instructions per call in the client process (libdelayq + hiredis +
 * libc), counted by callgrind over cost_worker.c's phases.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define DQB_NCOST 4

/* The phases cost_worker.c dumps (tag) and their rows (name). */
static const struct {
    const char *tag, *name;
} dqb_cost_phase[DQB_NCOST] = {
    {"push1", "instructions per dq_push"},
    {"push100", "  per job in push_batch of 100"},
    {"pollack1", "per poll(max 1) + ack"},
    {"pollack100", "  per job in poll(100)+ack_batch"},
};

double dqb_cg_total(const char *path, char *desc, size_t dsize) {
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

/* Runs this program's --cost-worker under callgrind, dumps in dir;
 * returns 0 if it succeeded. */
static int dqb_cost_callgrind(const dqb_cfg *c, const char *dir) {
    char outfile[600], nbuf[24];
    snprintf(outfile, sizeof(outfile), "--callgrind-out-file=%s/cg.out", dir);
    snprintf(nbuf, sizeof(nbuf), "%ld", c->cost_n);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execlp("valgrind", "valgrind", "--tool=callgrind", outfile,
               c->self, "--cost-worker", dqb_srv.uri, nbuf, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        dqb_fail("callgrind run failed (exit %d); is valgrind installed?",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    return 0;
}

void dqb_scen_cost_rows(const dqb_cfg *c) {
    char title[160];
    snprintf(title, sizeof(title),
             "client cost: user-space instructions in the client process "
             "(callgrind Ir: libdelayq+hiredis+libc), %ld ops", c->cost_n);
    dqb_add_section(title);
    if (!DQB_HAVE_CALLGRIND || !c->callgrind) {
        dqb_row *rw = dqb_add_row("(skipped)");
        snprintf(rw->status, sizeof(rw->status), "%s",
                 DQB_HAVE_CALLGRIND ? "--no-callgrind"
                                    : "no valgrind/callgrind.h");
        return;
    }
    dqb_flushall();
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/callgrind", c->out);
    mkdir(dir, 0755);
    if (dqb_cost_callgrind(c, dir) != 0)
        return;
    double got[DQB_NCOST] = {NAN, NAN, NAN, NAN};
    for (int i = 1; i <= 8; i++) {
        char path[700], desc[128];
        snprintf(path, sizeof(path), "%s/cg.out.%d", dir, i);
        double v = dqb_cg_total(path, desc, sizeof(desc));
        for (int k = 0; k < DQB_NCOST; k++)
            if (strcmp(desc, dqb_cost_phase[k].tag) == 0)
                got[k] = v;
    }
    for (int k = 0; k < DQB_NCOST; k++) {
        dqb_row *rw = dqb_add_row(dqb_cost_phase[k].name);
        dqb_fmt_int(rw->value, sizeof(rw->value), got[k] / (double)c->cost_n);
        snprintf(rw->unit, sizeof(rw->unit), "instr");
        snprintf(rw->spread, sizeof(rw->spread), "deterministic");
        dqb_log("client cost %s: %.0f instructions per op",
                dqb_cost_phase[k].tag, got[k] / (double)c->cost_n);
    }
}
