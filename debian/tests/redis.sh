# Sourced by the tests: start_redis starts a private redis-server on a unix
# socket in a temp dir (no TCP port, no persistence) and sets TMP, SOCK and
# URI; it is stopped by its pid and the dir removed on exit.
set -euo pipefail

TMP=$(mktemp -d "${AUTOPKGTEST_TMP:-${TMPDIR:-/tmp}}/delayq-test.XXXXXX")
REDIS_PID=
stop_redis() {
    if [[ -n $REDIS_PID ]]; then
        kill "$REDIS_PID" 2>/dev/null || true
        wait "$REDIS_PID" 2>/dev/null || true
    fi
    rm -rf -- "$TMP"
}
trap stop_redis EXIT

fail() { printf '%s: FAIL: %s\n' "${0##*/}" "$*" >&2; exit 1; }
say() { printf '%s: %s\n' "${0##*/}" "$*"; }

start_redis() {
    SOCK=$TMP/redis.sock
    URI=unix://$SOCK
    redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 \
        --save '' --appendonly no --dir "$TMP" --logfile "$TMP/redis.log" \
        --daemonize no >"$TMP/redis.out" 2>&1 &
    REDIS_PID=$!
    local _
    for _ in $(seq 100); do
        redis-cli -s "$SOCK" ping 2>/dev/null | grep -q PONG && return 0
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$TMP/redis.out" "$TMP/redis.log" >&2 || true
    fail "redis-server did not start"
}

# The README's complete example, with its URI pointed at the private
# server, written to $1.
readme_example() {
    sed -n '/^### A complete example/,/^```$/p' README.md |
        sed -n '/^```c$/,/^```$/p' | sed '1d;$d' |
        sed "s|redis://127.0.0.1:6379|$URI|" >"$1"
    grep -q 'int main' "$1" || fail "no complete example found in README.md"
    grep -q "$URI" "$1" || fail "the README example's URI was not replaced"
}

# Fails unless program $1 loads the libdelayq.so.0 of the libdelayq0 package.
loads_installed_lib() {
    local so
    so=$(ldd "$1" | awk '/libdelayq\.so/ { print $3 }')
    [[ -n $so ]] || fail "$1 does not load libdelayq"
    so=$(readlink -f "$so")
    dpkg -S "$so" 2>/dev/null | grep -q '^libdelayq0' ||
        fail "$1 loads $so, not the library of the libdelayq0 package"
}
