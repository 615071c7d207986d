#!/usr/bin/env bash
# tests/partition/run.sh: the partition matrix in one command (as root).
#   bash tests/partition/run.sh                 short loads (as the suite)
#   bash tests/partition/run.sh --long --repeat 5 --json out.json
#   bash tests/partition/run.sh --mode wait --scenario sentinel:jepsen
# Builds dqload and the clock shim in build-partition/ (once), then runs
# run.py with every argument given here.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${DQJ_BUILD:-$root/build-partition}
if [[ ! -f $build/build.ninja ]]; then
    meson setup "$build" "$root" -Dbuildtype=debugoptimized >/dev/null
fi
meson compile -C "$build" tests/partition/dqload \
    tests/partition/clockshift >/dev/null
exec /usr/bin/python3 "$root/tests/partition/run.py" \
    --dqload "$build/tests/partition/dqload" \
    --clockshift "$build/tests/partition/libclockshift.so" "$@"
