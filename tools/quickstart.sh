#!/usr/bin/env bash
# tools/quickstart.sh: the quick start, in one command on a fresh Debian 12.
#
#   bash tools/quickstart.sh
#
# 1. installs whatever is missing (tools/deps.sh; apt-get, needs root),
# 2. builds libdelayq and the demo in build/ (reused when already set up),
# 3. starts a private redis-server on a unix socket in a temp dir,
# 4. runs build/examples/demo against it (a timeline of the three
#    scenarios: orders, sessions, consumers with a crash),
# 5. stops that redis-server (by its pid) and exits with the demo's status.
set -euo pipefail

cd "$(dirname -- "$0")/.."

log() { printf 'quickstart: %s\n' "$*"; }
die() { printf 'quickstart: error: %s\n' "$*" >&2; exit 1; }

# ---- 1. dependencies --------------------------------------------------------
log "checking packages (tools/deps.sh)"
bash tools/deps.sh

# ---- 2. build ----------------------------------------------------------------
# Same options as tools/test.sh uses for build/, so neither reconfigures the
# other's directory.
if [[ -f build/meson-private/coredata.dat ]]; then
    log "reusing build/"
else
    log "configuring build/"
    meson setup build -Dbuildtype=debugoptimized -Dwerror=true >/dev/null \
        || die "meson setup failed (see build/meson-logs/meson-log.txt)"
fi
log "compiling the library and the demo"
# A build/ configured before examples/demo.c existed has no such target:
# reconfigure once and try again.
if ! meson compile -C build examples/demo >"${TMPDIR:-/tmp}/quickstart-build.$$.log" 2>&1; then
    if grep -q "not found" "${TMPDIR:-/tmp}/quickstart-build.$$.log"; then
        log "reconfiguring build/ (the demo target is new to it)"
        meson setup --reconfigure build >/dev/null || die "meson setup --reconfigure failed"
    fi
    meson compile -C build examples/demo || { rm -f "${TMPDIR:-/tmp}/quickstart-build.$$.log"; die "build failed"; }
fi
rm -f "${TMPDIR:-/tmp}/quickstart-build.$$.log"
DEMO=build/examples/demo
[[ -x $DEMO ]] || die "$DEMO was not built"

# ---- 3. a private redis-server -----------------------------------------------
SERVER=$(command -v redis-server || true)
[[ -n $SERVER ]] || SERVER=/usr/bin/redis-server
[[ -x $SERVER ]] || die "redis-server not found (tools/deps.sh should have installed it)"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/delayq-quickstart.XXXXXX")
REDIS_PID=
cleanup() {
    if [[ -n $REDIS_PID ]] && kill -0 "$REDIS_PID" 2>/dev/null; then
        kill "$REDIS_PID" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$REDIS_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    rm -rf -- "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SOCK=$DIR/redis.sock
"$SERVER" --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$DIR" --logfile "$DIR/redis.log" --daemonize no \
    >"$DIR/redis.out" 2>&1 &
REDIS_PID=$!
for _ in $(seq 100); do
    if [[ -S $SOCK ]] && redis-cli -s "$SOCK" ping 2>/dev/null | grep -q PONG; then
        break
    fi
    if ! kill -0 "$REDIS_PID" 2>/dev/null; then
        cat "$DIR/redis.out" "$DIR/redis.log" >&2 2>/dev/null || true
        die "redis-server exited at start"
    fi
    sleep 0.1
done
redis-cli -s "$SOCK" ping 2>/dev/null | grep -q PONG \
    || die "redis-server did not answer on $SOCK"
log "redis-server $("$SERVER" --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') (pid $REDIS_PID) on unix://$SOCK"
echo

# ---- 4. the demo -------------------------------------------------------------
status=0
"$DEMO" "unix://$SOCK" || status=$?
echo
if [[ $status -eq 0 ]]; then
    log "done. Next: bash tools/test.sh runs the whole test suite."
else
    log "the demo failed (exit $status)"
fi
exit "$status"
