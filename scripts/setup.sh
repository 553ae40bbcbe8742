#!/usr/bin/env bash
# Install what sandboxd needs on Debian 12 (as root), build it, install it.
# Safe to re-run: installs only what is missing, rebuilds incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(meson ninja-build pkg-config gcc libc6-dev
          libmicrohttpd-dev libjansson-dev libsqlite3-dev libseccomp-dev libssl-dev
          libcurl4-openssl-dev libcmocka-dev
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

if [ ! -f build/build.ninja ]; then
        meson setup build --prefix=/usr/local >/dev/null
fi
ninja -C build
ninja -C build install >/dev/null
echo "setup: installed $(command -v sandboxd)"
