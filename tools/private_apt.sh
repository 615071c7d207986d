# shellcheck shell=bash
# tools/private_apt.sh - sourced (never run) by tools/hiredis12.sh and
# tools/valkey.sh: fetches Debian packages through a private apt
# configuration (own sources.list, lists, cache and dpkg status in a temp
# dir) and unpacks them with `dpkg -x`, so nothing is installed on the
# system.
#
# The sourcing script sets -euo pipefail and defines log and die (messages
# to stderr) and MIRROR and KEYRING; then it calls, in this order:
#   apt_require                 apt-get, dpkg and the keyring are there
#   apt_workdir NAME SUBDIR...  WORK: a temp dir (removed on exit) with the
#                               private configuration (APT_OPTS) and the
#                               subdirs SUBDIR... apt may download into
#   apt_update SUITE...         private sources.list = SUITE..., update
#   apt_download DIR PKG...     the .deb files of PKG... into DIR
#   apt_unpack DIR PREFIX [N]   dpkg -x every DIR/*.deb into PREFIX
#                               (exactly N of them, when N is given)

apt_require() {
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found (Debian needed)"
    command -v dpkg >/dev/null 2>&1 || die "dpkg not found (Debian needed)"
    [[ -r $KEYRING ]] || die "$KEYRING not found (apt-get install debian-archive-keyring)"
}

# apt_workdir NAME SUBDIR...: makes WORK (${TMPDIR:-/tmp}/NAME.XXXXXX, removed
# on exit) and APT_OPTS, the apt-get options that keep apt inside it.
apt_workdir() {
    local name=$1 d
    shift
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
    trap 'rm -rf -- "$WORK"' EXIT
    # apt drops privileges to _apt for downloads: let it traverse and write there.
    chmod 755 "$WORK"
    mkdir -p "$WORK/etc/preferences.d" "$WORK/lists/partial" "$WORK/cache/archives/partial"
    for d in "$@"; do mkdir -p "$WORK/$d"; done
    : >"$WORK/status"
    : >"$WORK/etc/sources.list"
    if [[ $EUID -eq 0 ]] && getent passwd _apt >/dev/null 2>&1; then
        chown -R _apt "$WORK/lists/partial" "$WORK/cache/archives/partial"
        for d in "$@"; do chown -R _apt "$WORK/$d"; done
    fi

    APT_OPTS=(
        -o "Dir::Etc::SourceList=$WORK/etc/sources.list"
        -o "Dir::Etc::SourceParts=/nonexistent"
        -o "Dir::Etc::Preferences=$WORK/etc/preferences"
        -o "Dir::Etc::PreferencesParts=$WORK/etc/preferences.d"
        -o "Dir::State::Lists=$WORK/lists"
        -o "Dir::State::status=$WORK/status"
        -o "Dir::Cache=$WORK/cache"
        -o "Dir::Cache::pkgcache="
        -o "Dir::Cache::srcpkgcache="
        -o "Acquire::Languages=none"
        -o "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false"
        -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
        -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
        -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
        -o "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false"
        -o "APT::Update::Post-Invoke-Success::="
    )
}

# apt_update SUITE...: points the private sources.list at SUITE... (main) and
# reads their package lists.
apt_update() {
    local s
    : >"$WORK/etc/sources.list"
    for s in "$@"; do
        printf 'deb [signed-by=%s] %s %s main\n' "$KEYRING" "$MIRROR" "$s" \
            >>"$WORK/etc/sources.list"
    done
    if ! apt-get -q "${APT_OPTS[@]}" update >"$WORK/update.log" 2>&1; then
        cat "$WORK/update.log" >&2
        die "apt-get update of the private sources ($*) failed"
    fi
}

# apt_download DIR PKG...: downloads the .deb files of PKG... into DIR.
apt_download() {
    local dir=$1
    shift
    if ! (cd "$dir" && apt-get -q "${APT_OPTS[@]}" download "$@") \
        >"$WORK/download.log" 2>&1; then
        cat "$WORK/download.log" >&2
        die "apt-get download $* failed"
    fi
}

# apt_unpack DIR PREFIX [N]: unpacks every DIR/*.deb into PREFIX; with N,
# dies unless there are exactly N of them.
apt_unpack() {
    local dir=$1 prefix=$2 want=${3:-} deb debs
    shopt -s nullglob
    debs=("$dir"/*.deb)
    shopt -u nullglob
    [[ -z $want || ${#debs[@]} -eq $want ]] \
        || die "expected $want .deb files, got ${#debs[@]}"
    for deb in "${debs[@]}"; do
        log "unpacking $(basename -- "$deb")"
        dpkg -x "$deb" "$prefix"
    done
}
