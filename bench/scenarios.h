/*
 * bench/scenarios.h - the list of dqbench scenarios, in table order.
 *
 * One entry per scen_*.c file: the name --only takes, what it runs and the
 * line --help prints.  main runs `run` of every selected scenario once per
 * run (in this order), then `rows` of each: the per-run scenarios add their
 * medians there; those without `run` (memory, cost, backlog) measure there,
 * once, and add their rows.  Only dqbench.c includes this file.
 */
#ifndef DQB_SCENARIOS_H
#define DQB_SCENARIOS_H

#include "bench.h"

/* The scenario functions are declared in bench.h. */
typedef struct dqb_scenario {
    const char *name;                        /* as --only LIST names it */
    void (*run)(const dqb_cfg *c, int run);  /* once per run, or NULL */
    void (*rows)(const dqb_cfg *c);          /* after the runs: its rows */
    const char *desc;                        /* one line for --help */
} dqb_scenario;

static const dqb_scenario dqb_scenarios[] = {
    {"limits", dqb_scen_limits_run, dqb_scen_limits_rows,
     "Redis's own limit: redis-benchmark, minimal script and plain ZADD"},
    {"push", dqb_scen_push_run, dqb_scen_push_rows,
     "one client pushing, 1 job per round trip and batches of 10..1000"},
    {"drain", dqb_scen_drain_run, dqb_scen_drain_rows,
     "due jobs drained by 1..4 consumer processes, poll + ack_batch"},
    {"e2e", dqb_scen_e2e_run, dqb_scen_e2e_rows,
     "end to end: 1 producer and 1 consumer at once, jobs due over 2 s"},
    {"lateness", dqb_scen_lateness_run, dqb_scen_lateness_rows,
     "receive time - due time at light load, per consumer kind"},
    {"cluster", dqb_scen_cluster_run, dqb_scen_cluster_rows,
     "16 partitions over 3 local cluster primaries vs one node (TCP)"},
    {"herd", dqb_scen_herd_run, dqb_scen_herd_rows,
     "K consumers (1..100 processes, 8/32 threads) on one queue; kinds"},
    {"features", dqb_scen_features_run, dqb_scen_features_rows,
     "rate-limited, repeating and optioned jobs beside a plain queue"},
    {"fair", dqb_scen_fair_run, dqb_scen_fair_rows,
     "fair claiming: group burst, limit on jobs in flight, priorities"},
    {"promote", dqb_scen_promote_run, dqb_scen_promote_rows,
     "lateness of promoted jobs vs jobs pushed due now, 1 waiting consumer"},
    {"durable", dqb_scen_durable_run, dqb_scen_durable_rows,
     "durable mode vs default: push, poll+ack, drain with 1 and 2 replicas"},
    {"debounce", dqb_scen_debounce_run, dqb_scen_debounce_rows,
     "debounced pushes of one id at 10,000/s: pending instances, runs"},
    {"memory", NULL, dqb_scen_memory_rows,
     "used_memory per pending job and per acked job (1 run)"},
    {"layout", dqb_scen_layout_run, dqb_scen_layout_rows,
     "default vs compact layout: bytes/job, push, drain, cancel (~10 min)"},
    {"cost", NULL, dqb_scen_cost_rows,
     "client instructions per call under callgrind (1 run)"},
    {"backlog", NULL, dqb_scen_backlog_rows,
     "poll+ack round trip with up to --max-backlog jobs pending"},
};

#define DQB_NSCENARIOS (sizeof(dqb_scenarios) / sizeof(dqb_scenarios[0]))

#endif
