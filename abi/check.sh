#!/usr/bin/env bash
# abi/check.sh LIBRARY [--update]
#
# Checks the ABI of LIBRARY (a libdelayq.so.* built with debug info, -g)
# against the one recorded for its soname, abi/<soname>.abi (libabigail's
# abidw of the release that introduced that soname, restricted to the types
# of include/):
#   - no change, or only compatible ones (added functions): ok (added ones
#     are listed; record them at the next release);
#   - an incompatible change (a function removed, a parameter or return
#     type changed, ...) under the same soname: FAIL;
#   - a soname with no record yet while others exist: the soname changed,
#     so a break is allowed: ok, and --update records the new ABI.
# --update writes abi/<soname>.abi from LIBRARY (at a release: see
# docs/RELEASING.md).  Needs abidw/abidiff (Debian: abigail-tools).
# Exit: 0 ok, 1 ABI break or error, 2 usage.
set -euo pipefail

LIB=${1:-}
MODE=${2:-check}
if [[ -z $LIB || ! -f $LIB || ( $MODE != check && $MODE != --update ) ]]; then
    echo "usage: abi/check.sh LIBRARY [--update]" >&2
    exit 2
fi
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
INCLUDE=$HERE/../include
say() { printf 'abi: %s\n' "$*"; }
for tool in abidw abidiff readelf; do
    command -v "$tool" >/dev/null 2>&1 ||
        { echo "abi: $tool not found (apt-get install abigail-tools binutils)" >&2; exit 1; }
done
[[ $(readelf -S "$LIB") == *.debug_info* ]] ||
    { echo "abi: $LIB has no debug info: build it with -g" >&2; exit 1; }

SONAME=$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ -n $SONAME ]] || { echo "abi: $LIB has no SONAME" >&2; exit 1; }
REF=$HERE/$SONAME.abi

if [[ $MODE == --update ]]; then
    # Only what a program sees: the public headers' types, no paths, no
    # line numbers, no DT_NEEDED (hiredis 0.14 or 1.x is not our ABI).
    abidw --headers-dir "$INCLUDE" --drop-private-types --drop-undefined-syms \
        --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
        --type-id-style hash --out-file "$REF" "$LIB"
    say "recorded $(grep -c '<elf-symbol ' "$REF") symbols of $SONAME in abi/${REF##*/}"
    exit 0
fi

if [[ ! -f $REF ]]; then
    others=$(cd "$HERE" && ls -- *.abi 2>/dev/null | tr '\n' ' ')
    if [[ -z $others ]]; then
        echo "abi: nothing recorded in abi/: run abi/check.sh LIB --update" >&2
        exit 1
    fi
    say "soname $SONAME is new (recorded: $others): an incompatible ABI is allowed;"
    say "record it with: abi/check.sh $LIB --update"
    exit 0
fi

REPORT=$(mktemp "${TMPDIR:-/tmp}/abidiff.XXXXXX")
trap 'rm -f -- "$REPORT"' EXIT
rc=0
abidiff --headers-dir2 "$INCLUDE" --drop-private-types --no-show-locs \
    "$REF" "$LIB" >"$REPORT" 2>&1 || rc=$?
# abidiff's exit code is a bit mask: 1 error, 2 usage, 4 ABI change,
# 8 incompatible ABI change.
if (( rc & 3 )); then
    cat "$REPORT" >&2
    echo "abi: abidiff failed (exit $rc)" >&2
    exit 1
fi
if (( rc & 8 )); then
    cat "$REPORT" >&2
    echo "abi: FAIL: incompatible ABI change under the same soname $SONAME" \
         "(keep the old functions, or bump the soname: docs/RELEASING.md)" >&2
    exit 1
fi
if (( rc & 4 )); then
    cat "$REPORT"
    say "ok: $SONAME compatible with abi/${REF##*/} (additions above: add them to" \
        "debian/libdelayq0.symbols with the version that brings them)"
    exit 0
fi
say "ok: $SONAME identical to abi/${REF##*/}"
