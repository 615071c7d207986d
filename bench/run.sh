#!/usr/bin/env bash
# bench/run.sh: THE command that runs the libdelayq benchmark.
#
#   bash bench/run.sh            full run (~30 min): 3 runs per figure,
#                                1M-job memory figures, backlog up to 10M,
#                                up to 100 consumers on one queue (herd),
#                                both layouts at 1M jobs (layout, ~10 min)
#   bash bench/run.sh --quick    ~4 min: 1 run, smaller N, backlog to 100k
#   bash bench/run.sh --save     full run, then copy table and plots to bench/
#   Other arguments go to dqbench: --runs N, --max-backlog N, --no-callgrind,
#   --only limits,push,drain,e2e,lateness,cluster,herd,features,fair,
#   debounce,promote,memory,layout,cost,backlog,durable  (e.g. --only
#   layout: default vs compact layout; --only fair: fair claiming)
#   DQBENCH_BUILD=DIR: build and run in DIR instead of build-bench/.
#
# Builds libdelayq and bench/dqbench in build-bench/ (buildtype=release),
# then dqbench starts its own redis-server (default configuration, save "",
# appendonly no, a private unix socket in a temp dir; stopped by pid),
# measures Redis's own limit with redis-benchmark on that socket and every
# scenario (cluster: its own single TCP node and 3-primary Redis Cluster on
# 127.0.0.1, per run, also stopped by pid), and prints ONE table on stdout
# (progress on stderr).  Data, server-side profiles (INFO commandstats per
# scenario), callgrind dumps and the plots land in build-bench/bench-out/.
set -euo pipefail
cd "$(dirname -- "$0")/.."

usage() { sed -n '2,23s/^# \{0,1\}//p' "$0"; }

SAVE=0
ARGS=()
for arg in "$@"; do
    case $arg in
        --save) SAVE=1 ;;
        -h | --help) usage; exit 0 ;;
        *) ARGS+=("$arg") ;;
    esac
done

for tool in redis-server redis-benchmark meson ninja; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "run.sh: $tool not found (bash tools/deps.sh installs it)" >&2
        exit 1
    }
done

BUILD=${DQBENCH_BUILD:-build-bench}
OUT=$BUILD/bench-out
if [[ ! -f $BUILD/meson-private/coredata.dat ]]; then
    meson setup "$BUILD" --buildtype=release -Dwerror=true >&2
elif [[ $(meson introspect "$BUILD" --buildoptions | python3 -c '
import json, sys
print({o["name"]: o["value"] for o in json.load(sys.stdin)}.get("buildtype"))') != release ]]; then
    meson setup --reconfigure "$BUILD" --buildtype=release >&2
fi
meson compile -C "$BUILD" bench/dqbench >&2 2>/dev/null ||
    { meson setup --reconfigure "$BUILD" >&2 && meson compile -C "$BUILD" bench/dqbench >&2; }

# The table names the library revision it measured (-dirty: lib/ or
# include/ differ from that commit).
if REV=$(git rev-parse --short HEAD 2>/dev/null); then
    git diff --quiet HEAD -- lib include 2>/dev/null || REV+=-dirty
    export DQBENCH_REV="git $REV"
fi

rm -rf -- "$OUT"
mkdir -p "$OUT"
rc=0
"$BUILD/bench/dqbench" --out "$OUT" ${ARGS[@]+"${ARGS[@]}"} || rc=$?

if command -v gnuplot >/dev/null 2>&1 && [[ -f $OUT/vars.gp ]]; then
    gnuplot -e "dir='$OUT'" bench/plots.gp 2>"$OUT/gnuplot.log" ||
        echo "run.sh: gnuplot failed (see $OUT/gnuplot.log)" >&2
    echo "run.sh: plots: $OUT/throughput.png $OUT/lateness.png" >&2
else
    echo "run.sh: gnuplot-nox not installed: no plots" >&2
fi
if [[ $SAVE -eq 1 ]]; then
    cp -- "$OUT/table.txt" bench/table.txt
    for p in throughput.png lateness.png; do
        [[ -f $OUT/$p ]] && cp -- "$OUT/$p" "bench/$p"
    done
    echo "run.sh: saved bench/table.txt and the plots" >&2
fi
exit "$rc"
