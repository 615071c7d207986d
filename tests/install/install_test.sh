#!/usr/bin/env bash
# tests/install/install_test.sh BUILD_DIR CONSUMER_C [SANITIZE] [PKG_CONFIG_PATH]
#
# Installs the build into a temporary DESTDIR (meson install --no-rebuild),
# checks the installed tree (header, libdelayq.so.0 soname, libdelayq.a,
# delayq.pc, only dq_* symbols exported), then compiles CONSUMER_C (a program
# that includes only <delayq.h>) with nothing but
# `pkg-config --cflags --libs delayq` and runs it, against the shared and
# the static library, on a private redis-server (unix socket in a temp dir,
# stopped by its pid on exit).  Then the same with CMake alone
# (tests/install/cmake: find_package(delayq CONFIG), the targets
# delayq::delayq, delayq::delayq-static and delayq::delayq-event, the last
# building examples/order_timeout_event.c).
#
# SANITIZE is the build's b_sanitize value ("none" if absent): an
# instrumented library needs the same -fsanitize flags in the program.
# PKG_CONFIG_PATH (optional) is where the build found hiredis (delayq.pc
# names it in Requires.private).
set -euo pipefail

BUILD=${1:?usage: install_test.sh BUILD_DIR CONSUMER_C [SANITIZE] [PKG_CONFIG_PATH]}
SRC=${2:?usage: install_test.sh BUILD_DIR CONSUMER_C [SANITIZE] [PKG_CONFIG_PATH]}
SANITIZE=${3:-none}
EXTRA_PC=${4:-}

fail() { printf 'install_test: FAIL: %s\n' "$*" >&2; exit 1; }
note() { printf 'install_test: %s\n' "$*"; }

HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
for tool in meson pkg-config cc cmake nm readelf redis-server redis-cli; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (run tools/deps.sh)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/dq-install.XXXXXX")
REDIS_PID=
cleanup() {
    if [[ -n $REDIS_PID ]]; then
        kill "$REDIS_PID" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$REDIS_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$REDIS_PID" 2>/dev/null || true
    fi
    rm -rf -- "$TMP"
}
trap cleanup EXIT

DEST=$TMP/dest
# ---- install ------------------------------------------------------------
meson install -C "$BUILD" --destdir "$DEST" --no-rebuild --quiet \
    >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log" >&2; fail "meson install"; }

PC=$(find "$DEST" -name delayq.pc -path '*/pkgconfig/*' | head -n 1)
[[ -n $PC ]] || fail "no pkgconfig/delayq.pc under the destdir"
PCDIR=$(dirname -- "$PC")
LIBDIR=$(dirname -- "$PCDIR")
note "installed: $(find "$DEST" -type f -o -type l | sed "s|^$DEST||" | sort | tr '\n' ' ')"

# ---- the installed tree ------------------------------------------------------
HDR=$(find "$DEST" -path '*/include/delayq.h' | head -n 1)
[[ -n $HDR ]] || fail "include/delayq.h not installed"
[[ -e $LIBDIR/libdelayq.so.0 ]] || fail "libdelayq.so.0 not in $LIBDIR"
[[ -e $LIBDIR/libdelayq.so ]] || fail "libdelayq.so (dev link) not in $LIBDIR"
[[ -f $LIBDIR/libdelayq.a ]] || fail "libdelayq.a not in $LIBDIR"
SONAME=$(readelf -d "$LIBDIR/libdelayq.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $SONAME == libdelayq.so.0 ]] || fail "soname is '$SONAME', expected libdelayq.so.0"
# Exported (defined, dynamic) symbols: only dq_*, besides the version node.
BAD_SYMS=$(nm -D --defined-only "$LIBDIR/libdelayq.so.0" |
    awk '$2 != "A" { print $3 }' | sed 's/@.*//' | grep -v '^dq_' || true)
[[ -z $BAD_SYMS ]] || fail "non-dq_ symbols exported: $BAD_SYMS"
NSYMS=$(nm -D --defined-only "$LIBDIR/libdelayq.so.0" | awk '$2 != "A"' | wc -l)
[[ $NSYMS -ge 30 ]] || fail "only $NSYMS symbols exported"
note "tree ok: soname $SONAME, $NSYMS dq_* symbols exported"

# ---- compile with pkg-config only --------------------------------------------
export PKG_CONFIG_SYSROOT_DIR=$DEST
export PKG_CONFIG_PATH=$PCDIR${EXTRA_PC:+:$EXTRA_PC}${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
CFLAGS=$(pkg-config --cflags delayq) || fail "pkg-config --cflags delayq"
LIBS=$(pkg-config --libs delayq) || fail "pkg-config --libs delayq"
note "pkg-config --cflags --libs delayq: $CFLAGS $LIBS"
[[ $CFLAGS == *"$DEST"* ]] || fail "cflags do not point into the destdir: $CFLAGS"
[[ $LIBS == *"-L$DEST"* ]] || fail "libs do not point into the destdir: $LIBS"
SAN=()
if [[ $SANITIZE != none && -n $SANITIZE ]]; then
    SAN=("-fsanitize=$SANITIZE")
    note "library built with -fsanitize=$SANITIZE: the program gets it too"
fi
# shellcheck disable=SC2086  # pkg-config output is a list of words
cc -std=c11 -Wall -Wextra -Werror "${SAN[@]}" -o "$TMP/consumer_app" "$SRC" $CFLAGS $LIBS \
    || fail "compiling $SRC against the installed library"
# Static: the same flags, the archive chosen explicitly through -Bstatic.
# The sysroot stands for the DESTDIR and so also prefixes the paths of
# delayq's own dependencies (hiredis from a private prefix, say): a -L/-I
# path that only exists without the prefix gets it removed.
unsysroot() {
    local w out=()
    for w in "$@"; do
        case $w in
            -L"$DEST"/* | -I"$DEST"/*)
                if [[ ! -e ${w:2} && -e ${w:2+${#DEST}} ]]; then
                    w=${w:0:2}${w:2+${#DEST}}
                fi ;;
        esac
        out+=("$w")
    done
    printf '%s ' "${out[@]}"
}
STATIC_LIBS=$(pkg-config --static --libs delayq) || fail "pkg-config --static --libs delayq"
# shellcheck disable=SC2086
STATIC_LIBS=$(unsysroot $STATIC_LIBS)
note "pkg-config --static --libs delayq: $STATIC_LIBS"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "${SAN[@]}" -o "$TMP/consumer_app_static" "$SRC" $CFLAGS \
    ${STATIC_LIBS/-ldelayq/-Wl,-Bstatic -ldelayq -Wl,-Bdynamic} \
    || fail "compiling $SRC against libdelayq.a"

export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
RESOLVED=$(ldd "$TMP/consumer_app" | awk '/libdelayq/ { print $3 }')
[[ $RESOLVED == "$LIBDIR"/* ]] || fail "consumer_app loads libdelayq from '$RESOLVED'"
if ldd "$TMP/consumer_app_static" | grep -q libdelayq; then
    fail "consumer_app_static still loads libdelayq.so"
fi

# ---- compile with CMake only ---------------------------------------------------
# find_package(delayq CONFIG) from the destdir's lib/cmake/delayq: the same
# program on delayq::delayq and delayq::delayq-static, and the libevent
# example on delayq::delayq-event.  Its dependencies come from pkg-config as
# the build found them (no sysroot: they are not in the destdir).
CMCONF=$(find "$DEST" -name delayqConfig.cmake -path '*/cmake/delayq/*' | head -n 1)
[[ -n $CMCONF ]] || fail "no cmake/delayq/delayqConfig.cmake under the destdir"
[[ -f $(dirname -- "$CMCONF")/delayqConfigVersion.cmake ]] || fail "no delayqConfigVersion.cmake"
CMB=$TMP/cmake-build
(
    unset PKG_CONFIG_SYSROOT_DIR
    export PKG_CONFIG_PATH=$EXTRA_PC
    cmake -S "$HERE/cmake" -B "$CMB" -Ddelayq_DIR="$(dirname -- "$CMCONF")" \
        -DCONSUMER_C="$SRC" -DEVENT_C="$HERE/../../examples/order_timeout_event.c" \
        -DCMAKE_C_FLAGS="${SAN[*]}" >"$TMP/cmake.log" 2>&1 &&
        cmake --build "$CMB" >>"$TMP/cmake.log" 2>&1
) || { cat "$TMP/cmake.log" >&2; fail "CMake consumer (tests/install/cmake)"; }
note "cmake: $(grep -o 'delayq [0-9.]* from .*' "$TMP/cmake.log")"
RESOLVED=$(ldd "$CMB/consumer_app" | awk '/libdelayq/ { print $3 }')
[[ $RESOLVED == "$LIBDIR"/* ]] || fail "CMake's consumer_app loads libdelayq from '$RESOLVED'"
if ldd "$CMB/consumer_app_static" | grep -q libdelayq; then
    fail "CMake's consumer_app_static still loads libdelayq.so"
fi
if grep -q 'libevent TRUE' "$TMP/cmake.log"; then
    [[ -x $CMB/event_app ]] || fail "no event_app from delayq::delayq-event"
fi

# ---- a private redis-server --------------------------------------------------
SOCK=$TMP/redis.sock
redis-server --port 0 --unixsocket "$SOCK" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$TMP" --logfile "$TMP/redis.log" --daemonize no \
    >"$TMP/redis.out" 2>&1 &
REDIS_PID=$!
for _ in $(seq 100); do
    [[ -S $SOCK ]] && redis-cli -s "$SOCK" ping 2>/dev/null | grep -q PONG && break
    kill -0 "$REDIS_PID" 2>/dev/null || { cat "$TMP/redis.out" "$TMP/redis.log" >&2 || true; fail "redis-server exited"; }
    sleep 0.1
done
redis-cli -s "$SOCK" ping 2>/dev/null | grep -q PONG || fail "redis-server did not answer PING"

# ---- run ---------------------------------------------------------------------
"$TMP/consumer_app" "unix://$SOCK" || fail "consumer_app (shared) failed"
redis-cli -s "$SOCK" flushall >/dev/null
"$TMP/consumer_app_static" "unix://$SOCK" || fail "consumer_app (static) failed"
for app in consumer_app consumer_app_static event_app; do
    [[ -x $CMB/$app ]] || continue
    redis-cli -s "$SOCK" flushall >/dev/null
    "$CMB/$app" "unix://$SOCK" >"$TMP/$app.out" 2>&1 ||
        { cat "$TMP/$app.out" >&2; fail "$app (CMake) failed"; }
done
note "CMake consumers ran: $(cd "$CMB" && ls consumer_app* event_app 2>/dev/null | tr '\n' ' ')"
note "ok"
