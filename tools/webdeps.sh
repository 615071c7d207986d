#!/usr/bin/env bash
# tools/webdeps.sh: installs what the browser test of `delayq web`
# (tests/web/test_browser.mjs, meson suite 'browser') needs:
#   - chromium, nodejs and npm from Debian (apt-get), when missing;
#   - playwright-core (pinned) into .deps/web-node, with
#     PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1: it drives Debian's chromium
#     (/usr/bin/chromium) and downloads no browser of its own.
# Idempotent; prints "webdeps: ok" or what it installed.
set -euo pipefail

cd "$(dirname -- "$0")/.."

PLAYWRIGHT_VERSION=1.65.1
DEST=.deps/web-node
PACKAGES=(chromium nodejs npm)

die() { printf 'webdeps: error: %s\n' "$*" >&2; exit 1; }

missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$pkg")
done
# A node from elsewhere (nvm, a toolchain image) is fine: only install
# nodejs/npm when there is no node or npm at all.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    keep=()
    for pkg in "${missing[@]}"; do
        [[ $pkg == nodejs || $pkg == npm ]] || keep+=("$pkg")
    done
    missing=("${keep[@]}")
fi

did=()
if [[ ${#missing[@]} -gt 0 ]]; then
    SUDO=()
    if [[ $EUID -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 \
            || die "missing packages (${missing[*]}) and not root: run as root"
        SUDO=(sudo)
    fi
    LOG=$(mktemp "${TMPDIR:-/tmp}/webdeps.XXXXXX")
    trap 'rm -f -- "$LOG"' EXIT
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$LOG" 2>&1 \
        || { cat "$LOG" >&2; die "apt-get update failed"; }
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}" >"$LOG" 2>&1 \
        || { cat "$LOG" >&2; die "apt-get install ${missing[*]} failed"; }
    did+=("${missing[@]}")
fi
[[ -x /usr/bin/chromium ]] || die "/usr/bin/chromium is missing after the install"

have=$(node -e "try{console.log(require('./$DEST/node_modules/playwright-core/package.json').version)}catch(e){}" 2>/dev/null || true)
if [[ $have != "$PLAYWRIGHT_VERSION" ]]; then
    mkdir -p "$DEST"
    [[ -f $DEST/package.json ]] || echo '{"private":true}' >"$DEST/package.json"
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$DEST" --no-save \
        --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT_VERSION" \
        || die "npm install playwright-core@$PLAYWRIGHT_VERSION failed"
    did+=("playwright-core@$PLAYWRIGHT_VERSION")
fi

if [[ ${#did[@]} -eq 0 ]]; then
    echo "webdeps: ok"
else
    echo "webdeps: installed ${did[*]}"
fi
