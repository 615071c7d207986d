#!/usr/bin/env bash
# tools/test.sh: THE command that runs the whole test suite.
#
#   bash tools/test.sh           deps, then three builds, each built and tested:
#                                  build            system hiredis 0.14, -Dwerror=true
#                                  build-asan       AddressSanitizer + UBSan
#                                  build-hiredis12  hiredis 1.2 from Debian trixie (+ TLS;
#                                                   of the cluster suite only
#                                                   cluster_tls, cluster_tools)
#                                (the re-runs of the same test programs on
#                                other layouts and partition counts, suites
#                                compact, compact_fault and partitioned, run
#                                under build, not the other two: they change
#                                what the server runs, not the C or hiredis
#                                calls that those builds exist for; the
#                                cluster suites cover partitioned queues in
#                                every build; build's partition suite,
#                                network partitions and failovers, which
#                                mostly waits, runs in the background
#                                beside the build-hiredis12, valkey and
#                                browser steps, and the run waits for it
#                                before pkgtest)
#                                then valkey: the core, async, fault and
#                                cluster suites of build and their
#                                compact-push runs (suite cpush), and the
#                                TLS cluster test of build-hiredis12, run
#                                again against Valkey 8.0.1 from Debian
#                                bookworm-backports (tools/valkey.sh,
#                                unpacked into .deps/valkey);
#                                then browser: `delayq web` in chromium
#                                (tools/webdeps.sh, meson suite 'browser',
#                                left out of the other meson test runs);
#                                then pkgtest: the Debian packages built,
#                                linted, ABI-checked, installed and tried
#                                as users would (tools/pkgtest.sh), then
#                                purged again;
#                                then build-fuzz: clang + libFuzzer, each fuzz
#                                target of tests/fuzz run for a bounded time
#   bash tools/test.sh --quick   only the first build, all its suites (no deps step)
#   bash tools/test.sh --fast    the fast tier: the first build, then only
#                                `meson test -C build --suite quick` (the
#                                unit tests, the core suite on the default
#                                layout and async_ops; under a minute on 2
#                                cores); run that command itself after a
#                                build
#
# Environment: DQ_TEST_JOBS=N  number of tests meson runs at once (default
#              4; the sanitizer build runs half as many, at least 1).  Most
#              tests spend their time waiting on leases, timeouts and
#              server start-ups (4 at once kept the plain build's run at
#              about 1.2 of the 2 cores); ASan's are CPU-bound, and 4 of
#              them at once starved its 100 x 1 MiB batch test into a
#              command timeout.  The cluster suite's tests, which mostly
#              wait, run beside these in a second meson run, 2 at once
#              (its log: meson-logs/testlog-lane.txt of the build dir).
#              DQ_FUZZ_SECONDS=N  time per fuzz target (default 25; 0 skips
#              the fuzz step).
# Existing build directories are reused (incremental); they are only
# reconfigured when their options differ from the ones below.
set -euo pipefail

cd "$(dirname -- "$0")/.."

# The comment block above, up to its first non-comment line.
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }

QUICK=0 FAST=0
for arg in "$@"; do
    case $arg in
        --quick) QUICK=1 ;;
        --fast) QUICK=1 FAST=1 ;;
        -h | --help) usage; exit 0 ;;
        *) printf 'test.sh: unknown argument: %s\n' "$arg" >&2; usage >&2; exit 2 ;;
    esac
done

JOBS=${DQ_TEST_JOBS:-4}
FUZZ_SECONDS=${DQ_FUZZ_SECONDS:-25}
if ! [[ $FUZZ_SECONDS =~ ^[0-9]+$ ]]; then
    printf 'test.sh: DQ_FUZZ_SECONDS must be a number, got "%s"\n' "$FUZZ_SECONDS" >&2
    exit 2
fi
if ! [[ $JOBS =~ ^[1-9][0-9]*$ ]]; then
    printf 'test.sh: DQ_TEST_JOBS must be a positive integer, got "%s"\n' "$JOBS" >&2
    exit 2
fi
ASAN_JOBS=$(((JOBS + 1) / 2))

# ---- bookkeeping for the summary printed at exit ---------------------------
declare -A RESULT=()
BUILDS=(build)
[[ $QUICK -eq 1 ]] || BUILDS+=(build-asan partition build-hiredis12 valkey browser pkgtest)
[[ $QUICK -eq 1 || $FUZZ_SECONDS -eq 0 ]] || BUILDS+=(build-fuzz)
for b in "${BUILDS[@]}"; do RESULT[$b]="not run"; done
PASSED=0 FAILED=0 SKIPPED=0
CURRENT=""

summary() {
    local rc=$? b line=""
    ! declare -F stop_partition >/dev/null || stop_partition
    if [[ -n $CURRENT && ${RESULT[$CURRENT]} == running ]]; then
        RESULT[$CURRENT]=FAILED
    fi
    for b in "${BUILDS[@]}"; do line+=" $b=${RESULT[$b]// /-}"; done
    echo
    echo "== summary:$line"
    # Plain closing line understood by CI (counts are meson tests, all builds).
    echo "tests: $PASSED passed, $FAILED failed, $SKIPPED skipped"
    if [[ $rc -ne 0 ]]; then
        echo "test.sh: FAILED (exit $rc)" >&2
    fi
}
trap summary EXIT

banner() { printf '\n== %s\n' "$*"; }

# Adds the results of the last `meson test` in build dir $1 to the totals
# ($2: its --logbase, default testlog).
count_results() {
    local log=$1/meson-logs/${2:-testlog}.json counts p f s
    [[ -f $log ]] || return 0
    counts=$(python3 - "$log" <<'EOF'
import json, sys
p = f = s = 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:
    for line in fh:
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line).get("result", "")
        except ValueError:
            continue
        if r in ("OK", "EXPECTEDFAIL"):
            p += 1
        elif r == "SKIP":
            s += 1
        else:
            f += 1
print(p, f, s)
EOF
    ) || return 0
    read -r p f s <<<"$counts"
    PASSED=$((PASSED + p)) FAILED=$((FAILED + f)) SKIPPED=$((SKIPPED + s))
    echo "$1: $p passed, $f failed, $s skipped (meson tests)"
}

# Prints the "figures: ..." lines that the fault and fuzz tests of the last
# `meson test` in build dir $1 ($2: its --logbase, default testlog) wrote to
# their stdout (one line per test).
print_figures() {
    local log=$1/meson-logs/${2:-testlog}.json
    [[ -f $log ]] || return 0
    python3 - "$log" <<'EOF'
import json, sys
with open(sys.argv[1], encoding="utf-8", errors="replace") as fh:
    for line in fh:
        try:
            out = json.loads(line).get("stdout", "") or ""
        except ValueError:
            continue
        for l in out.splitlines():
            if l.startswith("figures: "):
                print(l)
EOF
}

# meson_test DIR LOGBASE JOBS ARGS...: one `meson test` run in DIR, JOBS
# tests at once, logged to DIR/meson-logs/LOGBASE.{json,txt}.  No rebuild:
# every build dir is compiled just before its tests, and two runs side by
# side must not both regenerate it.
meson_test() {
    local dir=$1 base=$2 jobs=$3
    shift 3
    rm -f "$dir/meson-logs/$base.json"
    meson test -C "$dir" --no-rebuild --print-errorlogs --logbase "$base" \
        --num-processes "$jobs" "$@"
}

# run_tests DIR JOBS: the tests MAIN_ARGS select in DIR, JOBS at once, and
# beside them, in a second meson run, those LANE_ARGS select (none if
# empty), LANE_JOBS at once; then the counts and figures of both, and exit
# on a failure.  The lane is for the cluster suite: its tests mostly wait
# (cluster node timeouts, failovers, Sentinel elections; under ASan
# async_cluster used 11 s of CPU in 88 s), so they take little from the
# other tests, and the two longest of a build no longer hold a process
# slot of the main run for minutes.
LANE_JOBS=2
run_tests() {
    local dir=$1 jobs=$2 rc=0 lane_rc=0 lane_pid=""
    if [[ ${#LANE_ARGS[@]} -gt 0 ]]; then
        meson_test "$dir" testlog-lane "$LANE_JOBS" "${LANE_ARGS[@]}" \
            >"$dir/meson-logs/testlog-lane.out" 2>&1 &
        lane_pid=$!
    fi
    meson_test "$dir" testlog "$jobs" "${MAIN_ARGS[@]}" || rc=$?
    count_results "$dir"
    print_figures "$dir"
    if [[ -n $lane_pid ]]; then
        wait "$lane_pid" || lane_rc=$?
        banner "$dir: beside it: ${LANE_ARGS[*]}"
        cat "$dir/meson-logs/testlog-lane.out"
        count_results "$dir" testlog-lane
        print_figures "$dir" testlog-lane
    fi
    [[ $rc -eq 0 ]] || exit "$rc"
    [[ $lane_rc -eq 0 ]] || exit "$lane_rc"
}

# The partition suite of build (tests/partition: ~4.5 min on a quiet
# machine, partition_durable and partition_default, each is_parallel false)
# mostly waits on failovers, leases and its load's fixed hold times (13 s
# of CPU in partition_default's 45 s): alone at the end of build's run it
# left a core idle for minutes.  start_partition runs it in the
# background, in a meson run of its own (its log:
# build/meson-logs/testlog-partition.txt), beside the steps that follow;
# finish_partition waits for it, prints its output and counts, and exits on
# a failure; stop_partition (at exit) ends a run still going when an
# earlier step failed.
PART_PID=""
start_partition() {
    RESULT[partition]=running
    meson_test build testlog-partition 1 --suite partition \
        >build/meson-logs/testlog-partition.out 2>&1 &
    PART_PID=$!
}
finish_partition() {
    local rc=0
    [[ -n $PART_PID ]] || return 0
    CURRENT=partition
    banner "partition: build's partition suite (run beside the steps above)"
    wait "$PART_PID" || rc=$?
    PART_PID=""
    cat build/meson-logs/testlog-partition.out
    count_results build testlog-partition
    print_figures build testlog-partition
    [[ $rc -eq 0 ]] || exit "$rc"
    RESULT[partition]=ok
}
stop_partition() {
    [[ -n $PART_PID ]] || return 0
    RESULT[partition]="stopped"
    # $PART_PID is the subshell running meson_test: end its meson first
    # (meson stops the tests it runs, run.py tears its network down).
    pkill -TERM -P "$PART_PID" 2>/dev/null || true
    kill "$PART_PID" 2>/dev/null || true
    wait "$PART_PID" 2>/dev/null || true
    PART_PID=""
}

# Prints the names of options (NAME=VALUE args) whose value in build dir $1
# differs from the wanted one, or "?" if the build dir cannot be introspected.
options_differ() {
    local dir=$1
    shift
    meson introspect "$dir" --buildoptions 2>/dev/null | python3 -c '
import json, sys
try:
    opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
except ValueError:
    print("?"); sys.exit(0)
def norm(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)
for arg in sys.argv[1:]:
    name, _, want = arg.partition("=")
    if name not in opts or norm(opts[name]) != want:
        print(name)
' "$@" || echo "?"
}

# setup_build DIR NAME=VALUE...: creates DIR, or reconfigures it only when one
# of the wanted options differs (an incremental `meson compile` follows).
setup_build() {
    local dir=$1 args=() opt differ
    shift
    for opt in "$@"; do args+=("-D$opt"); done
    if [[ ! -f $dir/meson-private/coredata.dat ]]; then
        meson setup "$dir" "${args[@]}"
        return
    fi
    differ=$(options_differ "$dir" "$@")
    if [[ -z $differ ]]; then
        echo "$dir: configured, options unchanged"
    elif [[ $differ == "?" ]]; then
        echo "$dir: cannot read its configuration: wiping it"
        meson setup --wipe "$dir" "${args[@]}"
    else
        echo "$dir: reconfiguring ($(echo "$differ" | tr '\n' ' '))"
        meson setup --reconfigure "$dir" "${args[@]}"
    fi
}

# Defines a meson option named $1 in meson_options.txt / meson.options?
has_option() {
    local f
    for f in meson_options.txt meson.options; do
        [[ -f $f ]] && grep -Eq "option\([[:space:]]*['\"]$1['\"]" "$f" && return 0
    done
    return 1
}

# Prints the path of the shared libdelayq in build dir $1 (empty if none).
find_lib() {
    find "$1" -path "$1/meson-private" -prune -o \
        -type f -name 'libdelayq.so*' -print 2>/dev/null | sort | head -n 1
}

# ---- a. dependencies --------------------------------------------------------
if [[ $QUICK -eq 0 ]]; then
    banner "deps"
    bash tools/deps.sh
fi

# ---- b. build: system hiredis 0.14, warnings are errors ---------------------
CURRENT=build
RESULT[build]=running
banner "build: setup (system hiredis $(pkg-config --modversion hiredis 2>/dev/null || echo '?'))"
setup_build build buildtype=debugoptimized werror=true
banner "build: compile"
meson compile -C build
banner "build: test"
if [[ $FAST -eq 1 ]]; then
    # meson's own parallelism (one test per core), as a developer runs it
    rc=0
    rm -f build/meson-logs/testlog.json
    meson test -C build --print-errorlogs --suite quick || rc=$?
    count_results build
    [[ $rc -eq 0 ]] || exit "$rc"
else
    MAIN_ARGS=(--no-suite browser --no-suite cluster)
    # --quick: the partition suite in this run, alone at its end; else in
    # the background beside build-hiredis12, valkey and browser
    # (start_partition).
    [[ $QUICK -eq 1 ]] || MAIN_ARGS+=(--no-suite partition)
    LANE_ARGS=(--suite cluster)
    run_tests build "$JOBS"
fi
RESULT[build]=ok

if [[ $QUICK -eq 1 ]]; then
    exit 0
fi

# ---- c. build-asan: AddressSanitizer + UndefinedBehaviorSanitizer -----------
CURRENT=build-asan
RESULT[build-asan]=running
banner "build-asan: setup"
setup_build build-asan buildtype=debug b_sanitize=address,undefined b_lundef=false
banner "build-asan: compile"
meson compile -C build-asan
# The re-runs of the core, async and fault programs (suites compact,
# compact_fault, partitioned) run under build and, the compact ones, Valkey,
# not again here or under hiredis 1.2: a compact layout differs from the
# default only in the Lua the server runs, not in C; a partitioned queue's
# C (fan-out over partitions, merged replies) runs here in the cluster
# suite's runs on partitioned queues (cluster, async_cluster).
RERUNS=(--no-suite compact --no-suite compact_fault --no-suite partitioned)
# The partition suite (network namespaces, tests/partition/run.py) runs
# once, under build: its faults are in the network, not in the C.
RERUNS+=(--no-suite partition)
banner "build-asan: test (without suites bench, browser, compact, compact_fault, partitioned)"
MAIN_ARGS=(--timeout-multiplier 3 --no-suite bench --no-suite browser
           "${RERUNS[@]}" --no-suite cluster)
LANE_ARGS=(--timeout-multiplier 3 --suite cluster)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_tests build-asan "$ASAN_JOBS"
RESULT[build-asan]=ok

# ---- d0. build's partition suite, in the background (start_partition) -----
# Beside the hiredis 1.2, Valkey and browser steps, whose tests mostly wait
# too (not beside build-asan, whose tests are CPU-bound); waited for before
# pkgtest.
start_partition

# ---- d. build-hiredis12: hiredis 1.2 (Debian trixie), TLS on ----------------
CURRENT=build-hiredis12
RESULT[build-hiredis12]=running
banner "build-hiredis12: fetch hiredis 1.2"
H12_PC=$(bash tools/hiredis12.sh "$PWD/.deps/hiredis12" | tail -n 1)
H12_LIBDIR=$(PKG_CONFIG_PATH=$H12_PC pkg-config --variable=libdir hiredis)
echo "hiredis $(PKG_CONFIG_PATH=$H12_PC pkg-config --modversion hiredis) in $H12_LIBDIR"
H12_OPTS=("pkg_config_path=$H12_PC")
if has_option tls; then
    H12_OPTS+=(tls=enabled)
else
    echo "(meson_options.txt has no 'tls' option yet: building without -Dtls=enabled)"
fi
banner "build-hiredis12: setup"
PKG_CONFIG_PATH=$H12_PC setup_build build-hiredis12 "${H12_OPTS[@]}"
banner "build-hiredis12: compile"
PKG_CONFIG_PATH=$H12_PC meson compile -C build-hiredis12
LIB=$(find_lib build-hiredis12)
if [[ -n $LIB ]]; then
    echo "ldd $LIB | grep hiredis:"
    # ldd's whole output first: under pipefail, `ldd | grep -q` fails when
    # grep exits at its match while ldd still writes (SIGPIPE)
    LDD=$(LD_LIBRARY_PATH=$H12_LIBDIR ldd "$LIB")
    grep hiredis <<<"$LDD" || true
    if ! grep -q 'libhiredis\.so\.1\.' <<<"$LDD"; then
        echo "test.sh: $LIB does not link hiredis 1.x" >&2
        exit 1
    fi
else
    echo "(no libdelayq.so* under build-hiredis12: ldd check skipped)"
fi
# Every suite but the cluster one and the re-runs (RERUNS above), and
# beside them (run_tests' lane) of the cluster suite only the tests that
# are not the same routing again over another hiredis: cluster_tls (sync
# and async clients on a TLS cluster, plain and partitioned queues) and
# cluster_tools.  The long cluster and
# async_cluster runs (migrations, failovers) go through the hiredis calls
# that the other suites already cover, and run under build, build-asan and
# Valkey; leaving them out here keeps CI well under 30 minutes.
banner "build-hiredis12: test"
MAIN_ARGS=(--no-suite browser --no-suite cluster "${RERUNS[@]}")
LANE_ARGS=(cluster_tls cluster_tools)
LD_LIBRARY_PATH=$H12_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    run_tests build-hiredis12 "$JOBS"
RESULT[build-hiredis12]=ok

# ---- e. valkey: build's server-facing suites against Valkey 8.0.1 ----------
# Reuses build (compiled above); the harnesses take the server and cli
# binaries from DQ_REDIS_SERVER / DQ_REDIS_CLI.
CURRENT=valkey
RESULT[valkey]=running
banner "valkey: fetch Valkey 8.0.1 (Debian bookworm-backports)"
VK_BIN=$(bash tools/valkey.sh "$PWD/.deps/valkey" | tail -n 1)
VK_VERSION=$("$VK_BIN/valkey-server" --version)
echo "$VK_VERSION in $VK_BIN"
# A Redis binary under Valkey's name would pass every test and prove nothing.
if ! grep -q '^Valkey server' <<<"$VK_VERSION"; then
    echo "test.sh: $VK_BIN/valkey-server is not Valkey" >&2
    exit 1
fi
# The suites that talk to a server (partitioned queues run in the cluster
# suite; their one-node layout is the core suite's again), and the core,
# async and cluster programs on one compact layout, compact-push (suite
# cpush: its Lua on Valkey's engine, every operation meeting compact
# buckets; the other compact layout runs the same Lua under build); a
# suite meson does not know fails the run rather than being left out
# unseen.
VK_SUITES=(--suite core --suite async --suite fault --suite cpush)
banner "valkey: test (${VK_SUITES[*]} --suite cluster)"
MAIN_ARGS=("${VK_SUITES[@]}")
LANE_ARGS=(--suite cluster)
DQ_REDIS_SERVER=$VK_BIN/valkey-server DQ_REDIS_CLI=$VK_BIN/valkey-cli \
    run_tests build "$JOBS"
# rediss+cluster:// only exists in the TLS build (hiredis 1.2): its cluster
# test runs on a Valkey TLS cluster too.
banner "valkey: test cluster_tls of build-hiredis12"
rc=0
rm -f build-hiredis12/meson-logs/testlog.json
DQ_REDIS_SERVER=$VK_BIN/valkey-server DQ_REDIS_CLI=$VK_BIN/valkey-cli \
    LD_LIBRARY_PATH=$H12_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    meson test -C build-hiredis12 --print-errorlogs cluster_tls || rc=$?
count_results build-hiredis12
print_figures build-hiredis12
[[ $rc -eq 0 ]] || exit "$rc"
RESULT[valkey]=ok

# ---- e2. browser: the `delayq web` page in Debian's chromium ---------------
CURRENT=browser
RESULT[browser]=running
banner "browser: deps (tools/webdeps.sh) and meson test --suite browser"
bash tools/webdeps.sh
rc=0
rm -f build/meson-logs/testlog.json
meson test -C build --print-errorlogs --suite browser || rc=$?
count_results build
[[ $rc -eq 0 ]] || exit "$rc"
RESULT[browser]=ok

# build's partition suite, started before build-hiredis12 (start_partition),
# finished before pkgtest, whose package build keeps both cores busy.
finish_partition

# ---- e3. pkgtest: the Debian packages as users install them -----------------
# Builds the .debs from the `meson dist` tarball of HEAD, lintian, the ABI
# against abi/, installs them, runs debian/tests/ (pkg-config and CMake
# consumers, the CLI and man page, the Python binding), pip into a fresh
# venv, then purges the packages again (tools/pkgtest.sh).
CURRENT=pkgtest
RESULT[pkgtest]=running
banner "pkgtest: tools/pkgtest.sh"
bash tools/pkgtest.sh
RESULT[pkgtest]=ok

# ---- f. build-fuzz: clang + libFuzzer (tests/fuzz), bounded runs ------------
if [[ $FUZZ_SECONDS -eq 0 ]]; then
    exit 0
fi
CURRENT=build-fuzz
RESULT[build-fuzz]=running
if ! has_option fuzzing; then
    echo "(meson_options.txt has no 'fuzzing' option: fuzz step skipped)"
    RESULT[build-fuzz]="not run"
    exit 0
fi
banner "build-fuzz: setup (clang $(clang -dumpversion 2>/dev/null || echo '?'))"
CC=clang setup_build build-fuzz fuzzing=true buildtype=debugoptimized \
    b_sanitize=address,undefined b_lundef=false
banner "build-fuzz: compile"
FUZZ_TARGETS=(fuzz_uri fuzz_reply fuzz_api)
# A fixed seed by default, so a CI run explores the same inputs as the run
# before the submission (a slower machine explores a prefix of them);
# DQ_FUZZ_SEED=0 asks libFuzzer for a random seed when hunting for bugs.
FUZZ_SEED=${DQ_FUZZ_SEED:-1}
meson compile -C build-fuzz "${FUZZ_TARGETS[@]}"
FUZZ_WORK=build-fuzz/fuzz-run
mkdir -p "$FUZZ_WORK"

# fuzz_run TARGET: one bounded run (started in the background); its
# exit status lands in $FUZZ_WORK/<name>.rc.
fuzz_run() {
    local t=$1 name=${1#fuzz_} rc=0
    # New inputs go to a scratch dir (libFuzzer only reads the repo's
    # corpus, listed second); crashes land in build-fuzz/fuzz-run/<name>-*.
    rm -rf "${FUZZ_WORK:?}/$name" "$FUZZ_WORK/$name"-* "$FUZZ_WORK/$name.rc"
    mkdir -p "$FUZZ_WORK/$name"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "build-fuzz/tests/fuzz/$t" -max_total_time="$FUZZ_SECONDS" \
        -seed="$FUZZ_SEED" \
        -max_len=4096 -len_control=0 -timeout=30 -print_final_stats=1 \
        -artifact_prefix="$FUZZ_WORK/$name-" \
        "$FUZZ_WORK/$name" "tests/fuzz/corpus/$name" \
        >"$FUZZ_WORK/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$FUZZ_WORK/$name.rc"
}

# fuzz_report TARGET: its figures line; on a failure the log's end and how
# to reproduce it, then exit.
fuzz_report() {
    local t=$1 name=${1#fuzz_} rc runs eps cov
    rc=$(cat "$FUZZ_WORK/$name.rc" 2>/dev/null || echo 1)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$FUZZ_WORK/$name.log")
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$FUZZ_WORK/$name.log")
    cov=$(grep -o 'cov: [0-9]*' "$FUZZ_WORK/$name.log" | tail -n 1 || true)
    echo "figures: fuzz_$name: runs=${runs:-?} exec_per_s=${eps:-?} ${cov:-cov: ?} seconds=$FUZZ_SECONDS"
    if [[ $rc -ne 0 ]]; then
        FAILED=$((FAILED + 1))
        tail -n 60 "$FUZZ_WORK/$name.log" >&2
        echo "test.sh: $t found a bug; reproduce with: build-fuzz/tests/fuzz/$t" \
            "$(ls "$FUZZ_WORK/$name-"* 2>/dev/null | head -n 1)" >&2
        echo "test.sh: once fixed, add that input as tests/fuzz/corpus/$name/regress-<what>" >&2
        exit "$rc"
    fi
    PASSED=$((PASSED + 1))
}

# Two targets at a time, one core each (each libFuzzer process is single
# threaded; fuzz_api's server mostly waits on it): the same CPU time per
# target as one after the other on 2 cores, in two rounds instead of three.
for ((i = 0; i < ${#FUZZ_TARGETS[@]}; i += 2)); do
    pair=("${FUZZ_TARGETS[@]:i:2}")
    banner "build-fuzz: ${pair[*]} for $FUZZ_SECONDS s"
    for t in "${pair[@]}"; do fuzz_run "$t" & done
    wait
    for t in "${pair[@]}"; do fuzz_report "$t"; done
done
RESULT[build-fuzz]=ok
