#!/usr/bin/env bash
# bench/srvcost.sh: instructions Redis executes per job inside EVAL/EVALSHA
# (libdelayq's Lua scripts and the commands they call), counted by callgrind.
#
#   bash bench/srvcost.sh [BUILD_DIR] [SECTION...]
#   BUILD_DIR  a meson build dir of this tree (default build-bench; built
#              with bench/dqsrvcost if needed)
#   SECTION    push1 push100 push1000 pollack1 drain100 drain1000, and
#              cdrain100 cdrain1000 (the drain of jobs held in compact
#              buckets, layout compact-push), gdrain100 gdrain1000 (the
#              drain of jobs all of one group, the big group of a burst in
#              bench/fair.sh), mdrain100 mdrain1000 (of ten groups at once:
#              the round-robin pick) (default all)
#
# Each section runs twice, with N and 2N jobs, each time on a fresh
# redis-server (save "", private unix socket) under
# valgrind --tool=callgrind --toggle-collect=evalGenericCommand; the figure
# is (Ir(2N) - Ir(N)) / N, so script loading and warm-up cancel out.  A
# cdrain, gdrain or mdrain section pushes its jobs through the library
# first (dqsrvcost ... setup), then zeroes the counters
# (callgrind_control -z), then drains.
# Deterministic: compare Lua script changes without the machine's noise.
set -euo pipefail
cd "$(dirname -- "$0")/.."
case ${1:-} in
    -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
BUILD=${1:-build-bench}
[[ $# -gt 0 ]] && shift
SECTIONS=("$@")
[[ ${#SECTIONS[@]} -gt 0 ]] ||
    SECTIONS=(push1 push100 push1000 pollack1 drain100 drain1000 cdrain100 cdrain1000
              gdrain100 gdrain1000 mdrain100 mdrain1000)
for tool in valgrind callgrind_control redis-server redis-cli; do
    command -v "$tool" >/dev/null || { echo "srvcost.sh: $tool not found" >&2; exit 1; }
done
# A missing build dir is set up in release mode, as bench/run.sh does; one
# configured before this target existed needs a reconfigure.
[[ -f $BUILD/meson-private/coredata.dat ]] ||
    meson setup "$BUILD" --buildtype=release -Dwerror=true >&2
meson compile -C "$BUILD" bench/dqsrvcost >&2 2>/dev/null ||
    { meson setup --reconfigure "$BUILD" >&2 && meson compile -C "$BUILD" bench/dqsrvcost >&2; }
DRIVER=$BUILD/bench/dqsrvcost

# Ir inside evalGenericCommand for one section of n jobs.
measure() {
    local sec=$1 n=$2 d pid ir
    d=$(mktemp -d "${TMPDIR:-/tmp}/dq-srvcost-XXXXXX")
    valgrind --tool=callgrind --toggle-collect=evalGenericCommand \
        --callgrind-out-file="$d/cg.out" \
        redis-server --port 0 --unixsocket "$d/r.sock" --save '' \
        --appendonly no --dir "$d" >"$d/log" 2>&1 &
    pid=$!
    for _ in $(seq 200); do
        redis-cli -s "$d/r.sock" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    if [[ $sec == [cgm]* ]]; then
        "$DRIVER" "$sec" "$d/r.sock" "$n" setup ||
            { echo "srvcost.sh: $sec $n setup failed" >&2; touch "$FAILED"; }
        callgrind_control -z "$pid" >/dev/null 2>&1
    fi
    if ! "$DRIVER" "$sec" "$d/r.sock" "$n"; then
        echo "srvcost.sh: $sec $n failed" >&2
        touch "$FAILED"
    fi
    kill -TERM "$pid"
    wait "$pid" || true
    ir=$(awk '/^summary:/ {print $2}' "$d/cg.out")
    rm -rf -- "$d"
    echo "${ir:-0}"
}

# A section whose driver failed prints no figure and the script fails:
# a count of nothing is no measurement.
FAILED=$(mktemp -u "${TMPDIR:-/tmp}/dq-srvcost-failed-XXXXXX")
trap 'rm -f -- "$FAILED"' EXIT
printf '%-10s %8s %14s\n' section N "instr/job"
for sec in "${SECTIONS[@]}"; do
    case $sec in
        push1 | pollack1) n=1000 ;;
        push100 | drain100 | cdrain100 | gdrain100 | mdrain100) n=2000 ;;
        *) n=5000 ;;
    esac
    a=$(measure "$sec" "$n")
    b=$(measure "$sec" $((2 * n)))
    if [[ -e $FAILED ]]; then
        printf '%-10s %8d %14s\n' "$sec" "$n" failed
        exit 1
    fi
    printf '%-10s %8d %14d\n' "$sec" "$n" $(((b - a) / n))
done
