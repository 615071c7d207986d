#!/usr/bin/env bash
# tools/deps.sh: installs (apt-get, Debian 12) every package this project
# needs to build, test and benchmark.  Only missing packages are installed and
# `apt-get update` runs only when something is missing.  Idempotent; prints a
# single line on success: "deps: ok" or "deps: installed PKG...".
set -euo pipefail

PACKAGES=(
    build-essential pkg-config meson ninja-build
    libhiredis-dev libevent-dev check libsubunit-dev
    redis-server redis-tools
    python3 gnuplot-nox clang valgrind cmake
    ca-certificates openssl libssl-dev
    iproute2 nftables
)

die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [[ $status != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
    echo "deps: ok"
    exit 0
fi

SUDO=()
if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 \
        || die "missing packages (${missing[*]}) and not root: run as root"
    SUDO=(sudo)
fi

LOG=$(mktemp "${TMPDIR:-/tmp}/deps.XXXXXX")
trap 'rm -f -- "$LOG"' EXIT

export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" apt-get update -q >"$LOG" 2>&1; then
    cat "$LOG" >&2
    die "apt-get update failed"
fi
if ! "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    "${missing[@]}" >"$LOG" 2>&1; then
    cat "$LOG" >&2
    die "apt-get install ${missing[*]} failed"
fi

# The redis-server package starts a system service on port 6379.  Tests run
# their own private servers, so stop and disable that one (no systemd in
# containers: try every way, ignore failures, and kill nothing else).
for pkg in "${missing[@]}"; do
    if [[ $pkg == redis-server ]]; then
        if command -v systemctl >/dev/null 2>&1; then
            timeout 30 "${SUDO[@]}" systemctl stop redis-server >/dev/null 2>&1 || true
            timeout 30 "${SUDO[@]}" systemctl disable redis-server >/dev/null 2>&1 || true
        fi
        if command -v service >/dev/null 2>&1; then
            timeout 30 "${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
        fi
        if command -v update-rc.d >/dev/null 2>&1; then
            timeout 30 "${SUDO[@]}" update-rc.d redis-server disable >/dev/null 2>&1 || true
        fi
    fi
done

# Verify: a package that apt-get silently did not install is an error.
for pkg in "${missing[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || die "$pkg still not installed after apt-get install"
done

echo "deps: installed ${missing[*]}"
