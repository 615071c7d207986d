#!/usr/bin/env bash
# bench/fair.sh: fair claiming alone, as the benchmark measures it: the
# `fair` scenario of bench/dqbench (bench/scen_fair.c) through bench/run.sh,
# on dqbench's own private redis-server.
#
#   bash bench/fair.sh [BUILD_DIR] [RUNS]
#   BUILD_DIR  a meson build dir of this tree (default build-bench; made
#              with buildtype=release if missing)
#   RUNS       runs of the scenario (default 3); the table shows the median
#              over runs and their min..max, each ratio of the same run
#
# It runs `bash bench/run.sh --only fair --runs RUNS`: one table with three
# sections (they replace the sections burst1 burst10 burst1000, limit32 and
# prio10000 of the former driver):
#   burst   100,000 jobs of group A and 1, 10 or 1,000 small groups of one
#           job, all due at one moment (A's drain against a plain queue's,
#           the small jobs' lateness p99 against an idle queue's)
#   limit   DQ_SET_MAX_INFLIGHT = 10, 32 consumer processes
#   prio    10,000 due jobs of priority 0, one of priority 5 pushed due now
# The drains as a fraction of Redis's own limit as well:
#   bash bench/run.sh --only limits,fair --runs RUNS
set -euo pipefail
cd "$(dirname -- "$0")/.."
BUILD=${1:-build-bench}
RUNS=${2:-3}
DQBENCH_BUILD=$BUILD exec bash bench/run.sh --only fair --runs "$RUNS"
