#!/usr/bin/env bash
# Install what sandboxd needs on Debian 12 (as root), build it, install it.
# Safe to re-run: installs only what is missing, rebuilds incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(meson ninja-build pkg-config gcc libc6-dev
          libmicrohttpd-dev libjansson-dev libsqlite3-dev libseccomp-dev libssl-dev
          libcurl4-openssl-dev libcmocka-dev libarchive-dev libnftables-dev
          mmdebstrap busybox-static iproute2 nftables e2fsprogs)
# Node (tests and the TypeScript client): Debian's unless one is on PATH.
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

if [ "$(id -u)" != 0 ]; then
        echo "setup: run as root (sandboxd manages namespaces, cgroups and mounts)" >&2
        exit 1
fi

missing=()
for p in "${PACKAGES[@]}" ${EXTRA_PACKAGES:-}; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
        echo "setup: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The gvisor class needs runsc from bookworm-backports: bookworm's own
# (2022) is too old for current kernels. The suite comes from the archive
# the host already uses; only runsc is pinned to it.
# (Its output is taken whole: grep -q may stop reading before runsc has
# written it all, and pipefail would count runsc's SIGPIPE as a failure.)
runsc_ok() {
        local v
        v=$(runsc --version 2>/dev/null) || return 1
        [[ $v =~ 20(2[3-9]|[3-9][0-9])[0-9]{4} ]]
}
. /etc/os-release 2>/dev/null || true
if ! runsc_ok && [ "${VERSION_CODENAME:-}" = bookworm ] && [ -z "${SANDBOXD_NO_GVISOR:-}" ]; then
        archive=$(grep -rhoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
                  | grep -v security | head -1 | tr -d ' ' || true)
        archive=${archive:-http://deb.debian.org/debian}
        if [ ! -f /etc/apt/sources.list.d/sandboxd-backports.sources ]; then
                printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
                        "${archive%/}" >/etc/apt/sources.list.d/sandboxd-backports.sources
        fi
        printf 'Package: runsc\nPin: release n=bookworm-backports\nPin-Priority: 990\n' \
                >/etc/apt/preferences.d/sandboxd-runsc
        echo "setup: installing runsc from bookworm-backports (the gvisor class)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq -t bookworm-backports runsc >/dev/null
fi
runsc_ok || echo "setup: no usable runsc: the gvisor class is unavailable (the ns class works)"

if [ ! -f build/build.ninja ]; then
        meson setup build --prefix=/usr/local >/dev/null
fi
ninja -C build
ninja -C build install >/dev/null
echo "setup: installed $(command -v sandboxd)"
