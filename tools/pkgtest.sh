#!/usr/bin/env bash
# tools/pkgtest.sh: libdelayq as its users get it, checked end to end on
# Debian 12 (as root; CI runs it after the test suite):
#
#   deps       installs what is missing (apt-get, like tools/deps.sh)
#   versions   meson.build, debian/changelog, pyproject.toml, delayq.h and
#              the symbols file name one version and one soname
#   dist       `meson dist` tarball of HEAD (DQ_PKGTEST_WORKTREE=1: a copy of
#              the working tree instead, for trying uncommitted changes)
#   debs       dpkg-buildpackage -us -uc -b in the unpacked tarball
#              (DEB_BUILD_OPTIONS=nocheck: the suites run elsewhere;
#              DQ_PKGTEST_CHECK=1 runs the package's fast suites too)
#   lintian    no error and no warning on the packages
#   abi        abi/check.sh on the packaged build against abi/*.abi, and a
#              stand-in library without the functions must fail it
#   install    apt-get install ./*.deb
#   autopkgtest/*  each test of debian/tests/control, run as autopkgtest
#              would in a testbed (the unpacked source, a clean PATH)
#   man, import    `man -w delayq`, `python3 -c "import delayq"`
#   pip        pip install of bindings/python into a fresh venv, offline,
#              and the binding's tests from there
#   purge      apt-get purge of the packages again (also on failure), so
#              later test runs never see an installed libdelayq
#
# Leaves the worktree as it was (everything happens in a temp dir; the
# steps' logs are copied to $DQ_PKGTEST_LOGS if set).  Ends
# with "pkgtest: N passed, M failed"; exit 0 only if nothing failed.
set -euo pipefail

cd "$(dirname -- "$0")/.."
ROOT=$PWD
PKGS=(libdelayq0 libdelayq-dev delayq python3-delayq)
DEPS=(build-essential dpkg-dev debhelper dh-python help2man lintian
      abigail-tools cmake pkgconf meson ninja-build git libhiredis-dev
      libevent-dev python3 python3-setuptools python3-wheel python3-venv
      man-db redis-server redis-tools)
# Debian's tools and python, not another one earlier on PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export DEBIAN_FRONTEND=noninteractive
DEB_PY=/usr/bin/python3

TMP=$(mktemp -d "${TMPDIR:-/tmp}/pkgtest.XXXXXX")
PASSED=0
FAILED=0

say() { printf 'pkgtest: %s\n' "$*"; }

# $TMP/installed exists from just before `apt-get install` of the packages
# until their purge: whatever ends the run, they are removed again.
cleanup() {
    if [[ -n ${DQ_PKGTEST_LOGS:-} ]]; then
        mkdir -p "$DQ_PKGTEST_LOGS" && cp "$TMP"/log.* "$DQ_PKGTEST_LOGS"/ 2>/dev/null || true
    fi
    if [[ -e $TMP/installed ]]; then
        apt-get purge -y -q "${PKGS[@]}" >/dev/null 2>&1 ||
            say "WARNING: apt-get purge ${PKGS[*]} failed: remove them by hand"
    fi
    rm -rf -- "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# step NAME COMMAND...: runs COMMAND in a subshell under set -e (its first
# failing command fails the step) with its output in a log, counts it and
# prints one line; on failure the log's tail.  Returns COMMAND's status.
step() {
    local name=$1 t0=$SECONDS rc=0
    shift
    (trap - EXIT; set -e; "$@") >"$TMP/log.${name//\//_}" 2>&1 &
    wait $! || rc=$?
    if [[ $rc -eq 0 ]]; then
        PASSED=$((PASSED + 1))
        say "ok     $name ($((SECONDS - t0)) s)"
    else
        FAILED=$((FAILED + 1))
        say "FAILED $name ($((SECONDS - t0)) s, exit $rc); its log ends:"
        tail -n 40 "$TMP/log.${name//\//_}" | sed 's/^/    /'
    fi
    return "$rc"
}

finish() {
    say "$PASSED passed, $FAILED failed ($SECONDS s)"
    [[ $FAILED -eq 0 ]]
    exit $?
}

# A step the rest depends on: its failure ends the run.
must() { step "$@" || finish; }

# ---- the steps -------------------------------------------------------------

install_deps() {
    local pkg missing=()
    for pkg in "${DEPS[@]}"; do
        [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) == \
            "install ok installed" ]] || missing+=("$pkg")
    done
    if [[ ${#missing[@]} -eq 0 ]]; then
        echo "nothing missing"
        return 0
    fi
    echo "installing: ${missing[*]}"
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# meson.build's version and soversion against the other places that say them.
check_versions() {
    local version soversion
    version=$(sed -n "s/^ *version : '\([0-9.]*\)',.*/\1/p" meson.build | head -n 1)
    soversion=$(sed -n "s/^dq_soversion = '\([0-9]*\)'.*/\1/p" meson.build)
    echo "meson.build: version $version, soversion $soversion"
    [[ -n $version && -n $soversion ]] || { echo "cannot read meson.build"; return 1; }
    local changelog
    changelog=$(dpkg-parsechangelog -l debian/changelog -S Version)
    [[ $changelog == "$version" ]] ||
        { echo "debian/changelog is at $changelog, meson.build at $version"; return 1; }
    grep -qx "version = \"$version\"" bindings/python/pyproject.toml ||
        { echo "bindings/python/pyproject.toml is not at $version"; return 1; }
    grep -q "#define DQ_VERSION_STRING \"$version\"" include/delayq.h ||
        { echo "include/delayq.h's DQ_VERSION_STRING is not $version"; return 1; }
    [[ -f debian/libdelayq$soversion.symbols ]] ||
        { echo "no debian/libdelayq$soversion.symbols for soversion $soversion"; return 1; }
    head -n 1 "debian/libdelayq$soversion.symbols" |
        grep -q "^libdelayq.so.$soversion libdelayq$soversion " ||
        { echo "debian/libdelayq$soversion.symbols does not start with libdelayq.so.$soversion"; return 1; }
    grep -q "^Package: libdelayq$soversion\$" debian/control ||
        { echo "debian/control has no package libdelayq$soversion"; return 1; }
    [[ -f abi/libdelayq.so.$soversion.abi ]] ||
        echo "note: no abi/libdelayq.so.$soversion.abi yet (a new soname: record it at the release)"
}

# The source the packages are built from, unpacked in $TMP/src.
make_source() {
    mkdir -p "$TMP/src"
    if [[ ${DQ_PKGTEST_WORKTREE:-0} == 1 ]]; then
        git ls-files -co --exclude-standard -z |
            tar --null -T - -cf - | tar -xf - -C "$TMP/src"
        echo "copied the working tree"
        return 0
    fi
    if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
        echo "note: uncommitted changes are not in the tarball (DQ_PKGTEST_WORKTREE=1 takes them)"
    fi
    meson setup "$TMP/dist-build" -Dtests=false -Dman=disabled
    meson dist -C "$TMP/dist-build" --no-tests --allow-dirty --formats xztar
    local tarball
    tarball=$(ls "$TMP"/dist-build/meson-dist/*.tar.xz)
    tar -xJf "$tarball" -C "$TMP/src" --strip-components=1
    echo "unpacked ${tarball##*/}"
}

build_debs() {
    local opts="nocheck parallel=2" profiles=nocheck
    if [[ ${DQ_PKGTEST_CHECK:-0} == 1 ]]; then
        opts="parallel=2"
        profiles=
    fi
    (cd "$TMP/src" && DEB_BUILD_OPTIONS=$opts DEB_BUILD_PROFILES=$profiles \
        dpkg-buildpackage -us -uc -b)
    ls -l "$TMP"/*.deb
}

run_lintian() {
    # lintian warns that it runs as root; that is not a finding.
    lintian --fail-on error,warning --display-info "$TMP"/*.changes
}

# The shared library of the package build, before it was stripped.
built_lib() {
    find "$TMP"/src/obj-*/lib -maxdepth 1 -type f -name 'libdelayq.so.*' | head -n 1
}

check_abi() {
    local lib
    lib=$(built_lib)
    echo "checking $lib"
    bash "$TMP/src/abi/check.sh" "$lib"
    # The check can fail: a library of the same soname without the
    # recorded functions is an ABI break.
    printf '#include <delayq.h>\nint dq_version_number(void) { return 0; }\n' \
        >"$TMP/stub.c"
    cc -g -shared -fPIC -I"$TMP/src/include" \
        -Wl,-soname,"$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" \
        -o "$TMP/stub.so" "$TMP/stub.c"
    if bash "$TMP/src/abi/check.sh" "$TMP/stub.so" >"$TMP/stub.log" 2>&1; then
        cat "$TMP/stub.log"
        echo "abi/check.sh passed a library without the recorded functions"
        return 1
    fi
    echo "abi/check.sh fails a library without the recorded functions: ok"
}

install_debs() {
    local pkg debs=()
    for pkg in "${PKGS[@]}"; do
        if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
            echo "$pkg is installed already: not replacing (or later purging) it"
            return 1
        fi
        debs+=("$(ls "$TMP/${pkg}"_*.deb)")
    done
    touch "$TMP/installed"
    apt-get install -y -q --no-install-recommends "${debs[@]}"
    dpkg-query -W "${PKGS[@]}"
}

# Runs debian/tests/NAME as autopkgtest does: in the source tree, with the
# packages installed, a clean environment and its own temp dir.
run_autopkgtest() {
    mkdir -p "$TMP/adt-$1"
    (cd "$TMP/src" && env -i PATH="$PATH" HOME="$TMP/adt-$1" LANG=C.UTF-8 \
        AUTOPKGTEST_TMP="$TMP/adt-$1" "debian/tests/$1")
}

check_man() {
    man -w delayq
    man -w 3 libdelayq
}

check_import() {
    (cd / && "$DEB_PY" -c 'import delayq; print(delayq.__file__, delayq.version())')
}

# A private redis-server on a unix socket, stopped when the step ends.
start_redis() {
    redis-server --port 0 --unixsocket "$TMP/redis.sock" --unixsocketperm 700 \
        --save '' --appendonly no --dir "$TMP" --logfile "$TMP/redis.log" \
        --daemonize no >/dev/null 2>&1 &
    REDIS_PID=$!
    trap 'kill "$REDIS_PID" 2>/dev/null || true; wait "$REDIS_PID" 2>/dev/null || true' EXIT
    local _
    for _ in $(seq 100); do
        redis-cli -s "$TMP/redis.sock" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.1
    done
    echo "redis-server did not start"
    return 1
}

# pip install of the binding into a fresh venv (offline: the backend is the
# system's setuptools), then its tests with the venv's python: the module
# from the venv, the library from the package.
check_pip() {
    local venv=$TMP/venv
    "$DEB_PY" -m venv --system-site-packages "$venv"
    "$venv/bin/pip" install --no-index --no-build-isolation "$TMP/src/bindings/python"
    "$venv/bin/pip" show delayq
    mkdir -p "$TMP/pytest"
    cp "$TMP/src/bindings/python/test_delayq.py" "$TMP/pytest/"
    (cd "$TMP/pytest" && "$venv/bin/python" -c '
import sys, delayq
assert delayq.__file__.startswith(sys.prefix), delayq.__file__
print("delayq", delayq.version(), "from", delayq.__file__)')
    start_redis
    (cd "$TMP/pytest" && DQ_TEST_REDIS_URI="unix://$TMP/redis.sock" \
        DQ_TEST_REDIS_SOCKET="$TMP/redis.sock" DELAYQ_INCLUDE=/usr/include \
        "$venv/bin/python" -B test_delayq.py)
}

purge_debs() {
    apt-get purge -y -q "${PKGS[@]}"
    rm -f "$TMP/installed"
    local pkg
    for pkg in "${PKGS[@]}"; do
        if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
            echo "$pkg is still installed"
            return 1
        fi
    done
    [[ ! -e /usr/include/delayq.h ]] || { echo "/usr/include/delayq.h is still there"; return 1; }
}

# With the packages gone, the venv's module loads the library DELAYQ_LIB names.
check_delayq_lib() {
    local lib
    lib=$(built_lib)
    (cd "$TMP/pytest" && DELAYQ_LIB=$lib "$TMP/venv/bin/python" -c '
import delayq, os
assert delayq.library_path() == os.environ["DELAYQ_LIB"]
print("DELAYQ_LIB:", delayq.library_path(), delayq.version())')
}

# ---- the run -----------------------------------------------------------------

[[ $EUID -eq 0 ]] || { say "needs root (apt-get install / purge)"; exit 1; }
must deps install_deps
must versions check_versions
must dist make_source
must debs build_debs
step lintian run_lintian || true
step abi check_abi || true
must install install_debs
for t in $(sed -n 's/^Tests: *//p' "$TMP/src/debian/tests/control" | tr ',' ' '); do
    step "autopkgtest/$t" run_autopkgtest "$t" || true
done
step man check_man || true
step import check_import || true
step pip check_pip || true
step purge purge_debs || true
step delayq-lib check_delayq_lib || true
finish
