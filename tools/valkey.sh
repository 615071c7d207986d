#!/usr/bin/env bash
# tools/valkey.sh [PREFIX_DIR]
#
# Fetches Valkey 8.0.1 (valkey-server + valkey-tools) from Debian's
# bookworm-backports suite and unpacks it into PREFIX_DIR (default:
# $PWD/.deps/valkey) WITHOUT installing anything on the system: it uses a
# private apt configuration (own sources.list, lists and cache) and `dpkg -x`
# (tools/private_apt.sh).
# A shared library the binaries need and that this system lacks is fetched
# the same way (from bookworm) into PREFIX_DIR; the binaries are then run
# through small wrappers in PREFIX_DIR/bin that set LD_LIBRARY_PATH.
#
# The last line on stdout is the directory holding valkey-server and
# valkey-cli; every other message goes to stderr.  Does nothing (but print
# that line) when PREFIX_DIR already holds a working valkey-server 8.x (or
# exactly DQ_VALKEY_VERSION when that is set).
#
#   V=$(bash tools/valkey.sh | tail -n 1)
#   "$V/valkey-server" --version                     # -> Valkey server v=8.0.1 ...
#   DQ_REDIS_SERVER=$V/valkey-server DQ_REDIS_CLI=$V/valkey-cli meson test -C build
#
# Environment: DQ_VALKEY_VERSION=X.Y.Z  upstream version to fetch (default
# 8.0.1; Debian backports keeps only its latest upload, so when 8.0.1 is gone
# the error lists what is there).
set -euo pipefail

SUITE=bookworm-backports
LIB_SUITE=bookworm
MIRROR=http://deb.debian.org/debian
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
VERSION=${DQ_VALKEY_VERSION:-8.0.1}
PACKAGES=(valkey-server valkey-tools)

log() { printf 'valkey: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=tools/private_apt.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/private_apt.sh"

[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] \
    || die "DQ_VALKEY_VERSION must look like 8.0.1, got \"$VERSION\""
MAJOR=${VERSION%%.*}

prefix_arg=${1:-"$PWD/.deps/valkey"}
mkdir -p -- "$prefix_arg"
PREFIX=$(cd -- "$prefix_arg" && pwd -P)

REAL_BINDIR=$PREFIX/usr/bin   # what dpkg -x unpacks
WRAP_BINDIR=$PREFIX/bin       # wrappers, only when private libraries are needed

# The directory to hand out: the wrappers when there are any.
bindir() {
    if [[ -x $WRAP_BINDIR/valkey-server ]]; then
        printf '%s\n' "$WRAP_BINDIR"
    else
        printf '%s\n' "$REAL_BINDIR"
    fi
}

# The version a valkey-server already in PREFIX must have: any $MAJOR.x,
# or exactly DQ_VALKEY_VERSION when that is set.
if [[ -n ${DQ_VALKEY_VERSION:-} ]]; then WANT="$VERSION "; else WANT="$MAJOR."; fi

# True when directory $1 holds a valkey-server $WANT... and a valkey-cli
# that both start (so every shared library they need is found).
working() {
    local dir=$1 out
    [[ -x $dir/valkey-server && -x $dir/valkey-cli ]] || return 1
    out=$("$dir/valkey-server" --version 2>/dev/null) || return 1
    [[ $out == "Valkey server v=$WANT"* ]] || return 1
    "$dir/valkey-cli" --version >/dev/null 2>&1 || return 1
}

if working "$(bindir)"; then
    bindir
    exit 0
fi

command -v apt-cache >/dev/null 2>&1 || die "apt-cache not found (Debian needed)"
command -v ldd >/dev/null 2>&1 || die "ldd not found (apt-get install libc-bin)"
apt_require
apt_workdir valkey debs libdebs

# True when the system has package $1 installed, in a version that satisfies
# "$2 $3" (e.g. ">= 2.34") when $2 is given.
installed() {
    local pkg=$1 op=${2:-} want=${3:-} st
    st=$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$pkg" 2>/dev/null) || return 1
    [[ $st == "installed "* ]] || return 1
    [[ -z $op ]] || dpkg --compare-versions "${st#installed }" "$op" "$want"
}

# Prints the library packages (lib*) that PKG=VER... depend on and that this
# system lacks (or has too old), one per line.
missing_libs() {
    local spec dep alt name op want ok first
    for spec in "$@"; do
        apt-cache "${APT_OPTS[@]}" show "$spec" 2>/dev/null \
            | sed -n 's/^\(Pre-\)\{0,1\}Depends: //p' | tr ',' '\n'
    done | sed 's/^ *//; s/ *$//' | sort -u | while IFS= read -r dep; do
        [[ -n $dep ]] || continue
        ok=0 first=""
        IFS='|' read -ra alts <<<"$dep"
        for alt in "${alts[@]}"; do
            alt=$(sed 's/^ *//; s/ *$//' <<<"$alt")
            name=${alt%% *}
            name=${name%%:*}
            op="" want=""
            if [[ $alt =~ \(([<>=]+)\ *([^\)]+)\) ]]; then
                op=${BASH_REMATCH[1]} want=${BASH_REMATCH[2]}
            fi
            [[ -n $first ]] || first=$name
            if installed "$name" "$op" "$want"; then ok=1; break; fi
        done
        # Only shared libraries matter for running the binaries (adduser,
        # init-system-helpers... are for the maintainer scripts we never run);
        # the valkey packages themselves are fetched anyway.
        if [[ $ok -eq 0 && $first == lib* ]]; then
            printf '%s\n' "$first"
        fi
    done | sort -u
}

# Prints the private library directories under PREFIX (those holding a .so).
private_libdirs() {
    local d dirs=()
    for d in "$PREFIX/usr/lib" "$PREFIX/lib"; do [[ -d $d ]] && dirs+=("$d"); done
    [[ ${#dirs[@]} -gt 0 ]] || return 0
    find "${dirs[@]}" -name '*.so*' \( -type f -o -type l \) -printf '%h\n' | sort -u
}

# ---- valkey-server + valkey-tools from bookworm-backports --------------------
log "reading the $SUITE package lists (private apt configuration)"
apt_update "$SUITE"

# The Debian version of upstream $VERSION (e.g. 8.0.1+dfsg1-1~bpo12+1).
avail=$(apt-cache "${APT_OPTS[@]}" madison valkey-server 2>/dev/null \
    | awk -F'|' '{gsub(/ /, "", $2); print $2}')
debver=$(grep -E "^([0-9]+:)?${VERSION//./\\.}([+~-]|$)" <<<"$avail" | head -n 1 || true)
[[ -n $debver ]] || die "valkey-server $VERSION is not in $SUITE (there: $(paste -sd' ' - <<<"$avail")); set DQ_VALKEY_VERSION"
SPECS=()
for p in "${PACKAGES[@]}"; do SPECS+=("$p=$debver"); done

log "fetching ${SPECS[*]} from Debian $SUITE into $PREFIX"
apt_download "$WORK/debs" "${SPECS[@]}"

LIBS=()
while IFS= read -r l; do [[ -n $l ]] && LIBS+=("$l"); done < <(missing_libs "${SPECS[@]}")

apt_unpack "$WORK/debs" "$PREFIX" "${#PACKAGES[@]}"

# ---- shared libraries this system lacks, from bookworm -----------------------
if [[ ${#LIBS[@]} -gt 0 ]]; then
    log "this system lacks ${LIBS[*]}: fetching from Debian $LIB_SUITE into $PREFIX"
    apt_update "$LIB_SUITE" "$SUITE"
    apt_download "$WORK/libdebs" "${LIBS[@]}"
    apt_unpack "$WORK/libdebs" "$PREFIX"
fi

LIBPATH=$(private_libdirs | paste -sd: -)

# Every shared library must resolve (with the private ones when there are).
notfound=""
for b in valkey-check-rdb valkey-cli; do
    [[ -x $REAL_BINDIR/$b ]] || die "$REAL_BINDIR/$b missing after unpacking"
    nf=$(LD_LIBRARY_PATH=$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
        ldd "$REAL_BINDIR/$b" | awk '/not found/ {print $1}' || true)
    [[ -z $nf ]] || notfound+=" $b:$(paste -sd, - <<<"$nf")"
done
[[ -z $notfound ]] \
    || die "shared libraries not found (binary:libraries):$notfound; their packages are not among the Depends of ${PACKAGES[*]}"

# Wrappers that add the private libraries, only when there are some.
rm -rf -- "$WRAP_BINDIR"
if [[ -n $LIBPATH ]]; then
    mkdir -p "$WRAP_BINDIR"
    for b in valkey-server valkey-cli valkey-benchmark valkey-check-aof valkey-check-rdb; do
        [[ -e $REAL_BINDIR/$b ]] || continue
        # Paths relative to the wrapper, so the prefix may be moved.  exec
        # keeps the pid (the test harness signals it); argv[0] stays the
        # valkey-server name valkey's mode detection looks at.
        cat >"$WRAP_BINDIR/$b" <<EOF
#!/bin/sh
# Runs $b with the shared libraries that tools/valkey.sh fetched.
P=\$(cd -- "\$(dirname -- "\$0")/.." && pwd -P)
LD_LIBRARY_PATH=$(private_libdirs | sed "s|^$PREFIX|\$P|" | paste -sd: -)\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
exec "\$P/usr/bin/$b" "\$@"
EOF
        chmod 755 "$WRAP_BINDIR/$b"
    done
    log "wrappers with LD_LIBRARY_PATH in $WRAP_BINDIR"
fi

BINDIR=$(bindir)
working "$BINDIR" || die "unpacked valkey in $PREFIX but $BINDIR/valkey-server --version does not say v=${WANT% }..."
log "$("$BINDIR/valkey-server" --version) ready in $BINDIR"
printf '%s\n' "$BINDIR"
