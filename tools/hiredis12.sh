#!/usr/bin/env bash
# tools/hiredis12.sh [PREFIX_DIR]
#
# Fetches hiredis 1.2 (libhiredis-dev + libhiredis1.1.0) from Debian's trixie
# suite and unpacks it into PREFIX_DIR (default: $PWD/.deps/hiredis12) WITHOUT
# installing anything on the system: it uses a private apt configuration
# (own sources.list, lists and cache) and `dpkg -x` (tools/private_apt.sh).
# The .pc files are then rewritten so that they point into PREFIX_DIR.
#
# The last line on stdout is the directory to put in PKG_CONFIG_PATH; every
# other message goes to stderr.  Does nothing (but print that line) when
# PREFIX_DIR already holds a working hiredis 1.x.
#
#   P=$(bash tools/hiredis12.sh)
#   PKG_CONFIG_PATH=$P pkg-config --modversion hiredis     # -> 1.2.0
#   LD_LIBRARY_PATH=$(PKG_CONFIG_PATH=$P pkg-config --variable=libdir hiredis)
set -euo pipefail

SUITE=trixie
MIRROR=http://deb.debian.org/debian
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PACKAGES=(libhiredis-dev libhiredis1.1.0)

log() { printf 'hiredis12: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=tools/private_apt.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/private_apt.sh"

prefix_arg=${1:-"$PWD/.deps/hiredis12"}
mkdir -p -- "$prefix_arg"
PREFIX=$(cd -- "$prefix_arg" && pwd -P)

if command -v dpkg-architecture >/dev/null 2>&1; then
    MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || true)
fi
if [[ -z ${MULTIARCH:-} ]]; then
    MULTIARCH=$(gcc -print-multiarch 2>/dev/null || true)
fi
[[ -n ${MULTIARCH:-} ]] || die "cannot determine the multiarch triplet (need dpkg-dev or gcc)"

LIBDIR="$PREFIX/usr/lib/$MULTIARCH"
PCDIR="$LIBDIR/pkgconfig"

# Rewrites prefix/libdir of every .pc file we unpacked so it points into PREFIX.
fix_pc_files() {
    local pc
    for pc in "$PCDIR"/hiredis.pc "$PCDIR"/hiredis_ssl.pc; do
        [[ -f $pc ]] || die "missing $pc after unpacking"
        # Debian hard-codes /usr: prefix=/usr and also pkgincludedir=/usr/...
        # (which would pull the system hiredis 0.14 headers in).  Every other
        # variable whose value is an absolute /usr path is made
        # ${prefix}-relative; ${prefix}-relative ones follow by themselves.
        sed -i \
            -e "s|^prefix=.*|prefix=$PREFIX/usr|" \
            -e "s|^libdir=.*|libdir=\${prefix}/lib/$MULTIARCH|" \
            -e "/^prefix=/!s|^\([A-Za-z_][A-Za-z0-9_]*\)=/usr\(/.*\)\{0,1\}\$|\1=\${prefix}\2|" \
            "$pc"
    done
}

# True when PREFIX holds a hiredis 1.x whose .pc files point into PREFIX.
working() {
    local ver libdir flags
    [[ -f $PCDIR/hiredis.pc && -f $PCDIR/hiredis_ssl.pc ]] || return 1
    ver=$(PKG_CONFIG_PATH=$PCDIR pkg-config --modversion hiredis 2>/dev/null) || return 1
    [[ $ver == 1.* ]] || return 1
    libdir=$(PKG_CONFIG_PATH=$PCDIR pkg-config --variable=libdir hiredis 2>/dev/null) || return 1
    [[ $libdir == "$LIBDIR" ]] || return 1
    PKG_CONFIG_PATH=$PCDIR pkg-config --exists hiredis_ssl 2>/dev/null || return 1
    # No flag may point at the system's /usr (its hiredis is 0.14).
    flags=$(PKG_CONFIG_PATH=$PCDIR pkg-config --cflags --libs hiredis hiredis_ssl 2>/dev/null) || return 1
    [[ $flags != *-I/usr/* && $flags != *-L/usr/* ]] || return 1
    [[ -e $LIBDIR/libhiredis.so && -e $LIBDIR/libhiredis_ssl.so ]] || return 1
    [[ -f $PREFIX/usr/include/hiredis/hiredis.h ]] || return 1
}

command -v pkg-config >/dev/null 2>&1 || die "pkg-config not found (run tools/deps.sh)"

if working; then
    printf '%s\n' "$PCDIR"
    exit 0
fi

# Unpacked before but moved/copied elsewhere: only the .pc files need fixing.
if [[ -f $PCDIR/hiredis.pc && -f $PCDIR/hiredis_ssl.pc && -e $LIBDIR/libhiredis.so ]]; then
    fix_pc_files
    if working; then
        printf '%s\n' "$PCDIR"
        exit 0
    fi
fi

apt_require
apt_workdir hiredis12 debs

log "fetching ${PACKAGES[*]} from Debian $SUITE into $PREFIX"
apt_update "$SUITE"
apt_download "$WORK/debs" "${PACKAGES[@]}"
apt_unpack "$WORK/debs" "$PREFIX" "${#PACKAGES[@]}"

fix_pc_files
working || die "unpacked hiredis in $PREFIX but pkg-config does not accept it (see $PCDIR)"
log "hiredis $(PKG_CONFIG_PATH=$PCDIR pkg-config --modversion hiredis) ready in $PREFIX"
printf '%s\n' "$PCDIR"
