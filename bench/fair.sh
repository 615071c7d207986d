#!/usr/bin/env bash
# bench/fair.sh: fair claiming, each section on a fresh private redis-server
# (save "", unix socket), driven by bench/fair.c (dqfair).
#
#   bash bench/fair.sh [BUILD_DIR] [SECTION...]
#   BUILD_DIR  a meson build dir of this tree (default build-bench)
#   SECTION    burst1 burst10 burst1000 (100,000 jobs of one group and 1,
#              10 or 1,000 small groups due at one moment), limit32
#              (DQ_SET_MAX_INFLIGHT = 10, 32 consumer processes), prio10000
#              (10,000 due jobs of priority 0, one of priority 5 pushed
#              due now) (default all)
set -euo pipefail
cd "$(dirname -- "$0")/.."
BUILD=${1:-build-bench}
[[ $# -gt 0 ]] && shift
SECTIONS=("$@")
[[ ${#SECTIONS[@]} -gt 0 ]] || SECTIONS=(burst1 burst10 burst1000 limit32 prio10000)
[[ -f $BUILD/meson-private/coredata.dat ]] ||
    meson setup "$BUILD" --buildtype=release -Dwerror=true >&2
meson compile -C "$BUILD" bench/dqfair >&2
for sec in "${SECTIONS[@]}"; do
    d=$(mktemp -d "${TMPDIR:-/tmp}/dq-fair-XXXXXX")
    redis-server --port 0 --unixsocket "$d/r.sock" --save '' \
        --appendonly no --dir "$d" >"$d/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        redis-cli -s "$d/r.sock" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    # (a failed section still stops its server)
    case $sec in
        burst*) "$BUILD/bench/dqfair" burst "$d/r.sock" "${sec#burst}" ;;
        limit*) "$BUILD/bench/dqfair" limit "$d/r.sock" "${sec#limit}" ;;
        prio*) "$BUILD/bench/dqfair" prio "$d/r.sock" "${sec#prio}" ;;
        *) echo "fair.sh: no section $sec" >&2 ;;
    esac || failed=1
    kill "$pid"
    wait "$pid" || true
    rm -rf -- "$d"
done
exit "${failed:-0}"
