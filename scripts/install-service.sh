#!/usr/bin/env bash
# sandboxd as a system service on a fresh Debian 12 machine (as root, from
# a clone of this repository): the same set-up as scripts/up.sh (packages,
# build, install, the debian image), then the systemd unit
# dist/systemd/sandboxd.service, which meson installs, enabled and started.
# It serves 127.0.0.1:7070 with its state in /var/lib/sandboxd; settings go
# in /var/lib/sandboxd/sandboxd.conf (`key = value`, the names of
# `sandboxd serve --help`), then `systemctl restart sandboxd`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d /run/systemd/system ]; then
        echo "install-service: systemd is not running on this machine; scripts/up.sh runs" \
                "sandboxd in the foreground instead" >&2
        exit 1
fi
./scripts/setup.sh

STATE=/var/lib/sandboxd
if ! sandboxd image list --state "$STATE" | awk 'NR > 1 {print $1}' | grep -qx debian; then
        sandboxd image build debian --state "$STATE"
fi
systemctl daemon-reload
systemctl enable --now sandboxd
systemctl --no-pager --lines=5 status sandboxd || true

TOKEN=$(sandboxd token --state "$STATE" --deployment demo --account demo --ttl 24h)
cat <<EOT

sandboxd runs as the systemd service sandboxd (journalctl -u sandboxd for its
logs, systemctl reload sandboxd after sandboxd key rotate).

  export SANDBOXD_TOKEN=$TOKEN
  sbx exec thread-42 -- python3 -c 'print(2 + 2)'
EOT
